"""Key columns whose values are chosen privately (families.aggregate.private_groups): partition
selection over the tuples of those columns, then the groups as the selected tuples times the public
columns' values. The mechanism is tested in test_partition_selection.py and its sensitivity on the
aggregate's own path in the sensitivity audit (private_group_keys); here, that a release selects,
pays ε and δ in order, aggregates only over the selected tuples, reports them as a DP output, and
that bad settings are refused before anything is read."""

from __future__ import annotations

import datetime
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.errors import ConfigError, DataError
from dp_spark.families.aggregate import private_groups
from dp_spark.families.aggregate.family import aggregate_params
from dp_spark.families.aggregate.run import grouped_records
from dp_spark.jobs.config import load_config

MOVIES = [11, 12, 13]  # each rated by 200 users: selected at ε = 1, δ = 1e-6
CITIES = ["Lyon", "Oslo"]


def _params(**extra):
    arguments = {"by": ["movie", "city", "gender"],
                 "keys": {"movie": "private", "city": "private", "gender": ["F", "M"]},
                 "metrics": ["count", "users"], "groups_per_user": 4, "delta": 5e-7} | extra
    return aggregate_params(**arguments)


@pytest.mark.unit
def test_the_groups_are_the_selected_tuples_times_the_public_values_in_the_order_given():
    keys = _params().keys
    assert (keys.private, keys.names, keys.public_size, keys.size()) == (("movie", "city"),
                                                                         ("movie", "city", "gender"), 2, None)
    with pytest.raises(ValueError, match="known only once their keys are read from their tables or selected"):
        len(keys)
    chosen = keys.with_tuples([(13, "Oslo"), (11, "Lyon")])
    assert chosen.tuples == ((11, "Lyon"), (13, "Oslo"))  # sorted: the order says nothing of the data
    frame = chosen.frame()
    assert list(frame.columns) == ["movie", "city", "gender"]
    assert frame.values.tolist() == [[11, "Lyon", "F"], [11, "Lyon", "M"], [13, "Oslo", "F"], [13, "Oslo", "M"]]


@pytest.mark.unit
def test_the_selection_takes_half_of_epsilon_first_and_keys_per_user_defaults_to_groups_per_user():
    params = _params(metrics=["count", "mean(stars)"], low=1, high=5, method="tables")
    assert params.keys_per_user == 4
    assert params.split(Fraction(1)) == {"epsilon_partition": Fraction(1, 2), "count": Fraction(1, 4),
                                         "sum(stars)": Fraction(1, 4)}
    assert params.split_keys() == ("epsilon_partition", "count", "sum(stars)")
    assert _params(keys_per_user=2).keys_per_user == 2
    # With l chosen privately the bound holds the largest candidate: the counts' default, 10, instead.
    assert _params(groups_per_user="auto").keys_per_user == 10


@pytest.mark.unit
@pytest.mark.parametrize("extra, message", [
    ({"delta": 0.0}, "need delta in \\(0, 1\\)"),
    ({"keys": {"movie": [1, 2], "city": ["Lyon"], "gender": ["F"]}}, "used only when a key column"),
    ({"keys_per_user": 0}, "keys_per_user must be"),
    ({"keys": {"movie": "secret", "city": "private", "gender": ["F"]}}, "keys.movie: give a range"),
])
def test_bad_private_settings_are_refused(extra, message):
    with pytest.raises(ConfigError, match=message):
        _params(**extra)


@pytest.mark.unit
def test_the_api_and_the_config_need_delta_with_a_private_key(tmp_path):
    frame = pd.DataFrame({"user_id": [1], "movie": [11]})
    with pytest.raises(ConfigError, match="needs delta"):
        dp_spark.aggregate(frame, by="movie", keys={"movie": "private"}, metrics=["count"], groups_per_user=1,
                           epsilon=1)
    config = tmp_path / "job.toml"
    body = (f'output = "{tmp_path}/out"\n[source]\nformat = "parquet"\npath = "{tmp_path}/in"\n'
            '[algorithm]\nname = "aggregate"\nby = ["movie"]\nmetrics = ["count"]\ngroups_per_user = 2\n'
            '[domain.keys]\nmovie = "private"\n[privacy]\nepsilon = 1.0\n')
    config.write_text(body)
    with pytest.raises(ConfigError, match="needs privacy.delta"):
        load_config(config)
    config.write_text(body + "delta = 1e-6\n")
    params = load_config(config).params
    assert (params.keys.private, params.delta, params.keys_per_user) == (("movie",), 1e-6, 2)


def _ratings(spark, rare_users: int = 1):
    """200 users, each rating every movie of MOVIES in one city, with a gender and stars; plus
    ``rare_users`` users on a movie nobody else rated (too few to be selected)."""
    rng = np.random.default_rng(5)
    rows = [(u, m, CITIES[u % 2], "FM"[u % 3 == 0], float(rng.integers(1, 6))) for u in range(200) for m in MOVIES]
    rows += [(1000 + u, 99, "Lyon", "F", 5.0) for u in range(rare_users)]
    return spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "movie", "city", "gender", "stars"]))


@pytest.mark.spark
def test_a_release_selects_pays_and_aggregates_only_the_selected_tuples(spark):
    df = _ratings(spark)
    release = dp_spark.aggregate(df, by=["movie", "city", "gender"],
                                 keys={"movie": "private", "city": "private", "gender": ["F", "M"]},
                                 metrics=["count", "users", "mean(stars)"], groups_per_user=4, low=1, high=5,
                                 epsilon=20, delta=1e-6, seed=2)
    table = release["groups"]
    tuples = sorted({(m, c) for m in MOVIES for c in CITIES})
    assert table[["movie", "city", "gender"]].values.tolist() == [[m, c, g] for m, c in tuples for g in "FM"]
    assert [entry["step"] for entry in release.ledger][0] == "select groups"
    assert release.ledger[0]["delta"] == 1e-6
    assert release.report["algorithm"]["chosen"] == {"groups_selected": 12}
    assert release.report["domain"]["groups"] is None  # from the config alone: the count is a DP output
    truth = df.toPandas().query("movie != 99").groupby(["movie", "city", "gender"]).size()
    counts = table.set_index(["movie", "city", "gender"])["count"]
    # Each user keeps its 3 groups of 4 allowed; a count's noise at ε 20/2/3 has scale 1.2.
    assert (counts.reindex(truth.index) - truth).abs().max() <= 10


@pytest.mark.spark
def test_dates_and_text_are_keys_too_and_come_back_typed(spark):
    day = datetime.date(2024, 3, 1)
    rows = pd.DataFrame({"user_id": range(400), "day": [day] * 400, "shop": ["north"] * 400})
    release = dp_spark.aggregate(spark.createDataFrame(rows), by=["day", "shop"],
                                 keys={"day": "private", "shop": "private"}, metrics=["count"], groups_per_user=1,
                                 epsilon=1, delta=1e-6, seed=1)
    assert release["groups"][["day", "shop"]].values.tolist() == [[day, "north"]]


@pytest.mark.spark
def test_nothing_selected_gives_an_empty_table_and_spends_no_more(spark, tmp_path):
    release = dp_spark.aggregate(_ratings(spark).where("movie = 99"), by="movie", keys={"movie": "private"},
                                 metrics=["count", "mean(stars)"], groups_per_user=1, low=1, high=5, epsilon=1,
                                 delta=1e-6, seed=1)
    assert release["groups"].empty
    assert list(release["groups"].columns) == ["movie", "count", "mean_stars", "mean_stars_low", "mean_stars_high",
                                               "count_ci95_halfwidth"]
    release.write(str(tmp_path / "empty"))
    assert pd.read_parquet(tmp_path / "empty" / "groups").empty
    assert [entry["step"] for entry in release.ledger] == ["select groups"]


@pytest.mark.spark
def test_a_column_no_private_key_can_have_is_refused_before_anything_is_spent(spark):
    df = spark.createDataFrame(pd.DataFrame({"user_id": [1, 2], "price": [1.5, 2.5]}))
    budget = dp_spark.DatasetBudget(epsilon=1, delta=1e-6)
    with pytest.raises(DataError, match="key column price has type double"):
        dp_spark.aggregate(df, by="price", keys={"price": "private"}, metrics=["count"], groups_per_user=1,
                           epsilon=1, delta=1e-6, budget=budget)
    assert budget.spent == 0


@pytest.mark.spark
def test_spark_writes_and_the_driver_reads_each_tuple_alike(spark):
    kinds = (private_groups.INTEGER, private_groups.STRING, private_groups.DATE)
    rows = pd.DataFrame({"n": [7, -2**40], "s": ['a "quoted", é', ""], "d": [datetime.date(1969, 12, 31),
                                                                             datetime.date(2038, 1, 19)]})
    texts = spark.createDataFrame(rows).select(private_groups.tuple_key(["n", "s", "d"], kinds).alias("k")).toPandas()
    assert [private_groups.decoded(t, kinds) for t in texts["k"]] == [tuple(r) for r in rows.itertuples(index=False)]
    # A day Python's dates cannot hold (Spark's can): not released, rather than a failed run.
    assert private_groups.decoded('{"k0":7,"k1":"x","k2":3000000}', kinds) is None


@pytest.mark.spark
def test_records_are_not_grouped_before_their_private_keys_are_selected(spark):
    params = aggregate_params(by="n", keys={"n": "private"}, metrics=["count"], groups_per_user=1, delta=1e-6)
    with pytest.raises(ValueError, match="selected before"):
        grouped_records(spark.createDataFrame(pd.DataFrame({"user_id": [1], "n": [7]})), params)
