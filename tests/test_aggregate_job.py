"""The aggregate family as users run it: a config, `dp-spark plan` and `run`, and the API call
``dp_spark.aggregate``, which release the same seeded table and report."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.cli import main
from dp_spark.core.ledger import LedgerEntry
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate import histogram_metrics as hm
from dp_spark.families.aggregate.family import aggregate_params
from dp_spark.jobs.config import load_config

METRICS = ["count", "users", "sum(stars)", "mean(stars)", "variance(stars)", "quantiles(stars, 0.5, 0.9)"]


def job(folder: Path, source: Path, *extra: str, algorithm: str = "", privacy: str = "epsilon = 1.0") -> Path:
    config = folder / "job.toml"
    config.write_text("\n".join([
        f'output = "{folder / "out"}"', "seed = 4",
        "[source]", 'format = "csv"', f'path = "{source}"', 'columns = { user_id = "person" }',
        "[domain.keys]", "genre = [\"drama\", \"comedy\"]", "year = { range = [2000, 2002] }",
        "[privacy]", privacy,
        "[algorithm]", 'name = "aggregate"', 'by = ["genre", "year"]', f"metrics = {json.dumps(METRICS)}",
        algorithm or "groups_per_user = 4\nrecords_per_group = 2", "low = 1", "high = 5",
        "candidates = [1, 2, 3, 4, 5]", *extra]) + "\n")
    return config


def ratings(rows: int = 3000, seed: int = 1) -> pd.DataFrame:
    """Text user ids, text ratings (a few that are no number), a few genres and years outside the keys."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"person": [f"p{u}" for u in rng.integers(0, 400, rows)],
                         "genre": rng.choice(["drama", "comedy", "horror"], rows, p=[0.5, 0.45, 0.05]),
                         "year": rng.integers(1999, 2003, rows),
                         "stars": rng.choice(["1", "2", "3", "4", "5", "x", ""], rows)})


@pytest.mark.unit
def test_the_config_names_the_bound_in_users_words_or_the_papers():
    keys = {"genre": ["drama"]}
    assert aggregate_params("genre", keys, ["count"], 3).bound.records_per_group == 1
    assert aggregate_params(["genre"], {"genre": range(1, 4)}, ["count"], 3).keys.columns[0].domain.id_range == (1, 3)
    with pytest.raises(ConfigError, match="groups_per_user must be an integer >= 1"):
        aggregate_params("genre", keys, ["count"], 0)
    with pytest.raises(ConfigError, match="metrics of stars need its range: give low and high"):
        aggregate_params("genre", keys, ["mean(stars)"], 3)
    with pytest.raises(ConfigError, match="give each key column's public values"):
        aggregate_params("genre", None, ["count"], 3)


@pytest.mark.unit
@pytest.mark.parametrize("extra, algorithm, message", [
    ((), "l = 4\nc = 2", None),  # the papers' names
    ((), "l = 4\ngroups_per_user = 4", "algorithm.l and algorithm.groups_per_user are the same bound"),
    ((), "records_per_group = 2", "missing config key 'algorithm.groups_per_user'"),
    (("[publisher]", 'name = "ahp"'), "", r"\[publisher\] is not used by aggregate"),
    (("[guards]", "max_dropped_fraction = 0.5"), "", "guards.epsilon"),
])
def test_the_config_is_checked_before_anything_is_read(tmp_path, extra, algorithm, message):
    config = job(tmp_path, tmp_path / "absent.csv", *extra, algorithm=algorithm)
    if message is None:
        params = load_config(config).params
        assert (params.bound.groups_per_user, params.bound.records_per_group) == (4, 2)
    else:
        with pytest.raises(ConfigError, match=message):
            load_config(config)


@pytest.mark.unit
def test_plan_states_each_metric_s_error_and_the_ledger_steps(tmp_path, capsys):
    """By histogram (the default for the five stars): two steps, the users and the histogram; by
    tables: six, an equal part each (count, users, sum, sum of squares, two quantile levels)."""
    config = job(tmp_path, tmp_path / "absent.csv")
    assert main(["plan", str(config)]) == 0
    said = capsys.readouterr().out
    assert "users" in said and "histogram(stars)" in said and "quantile(stars, 0.5)" not in said
    assert "away from its 0.9-quantile in rank" in said and "its 95% interval's half-width by the cell" in said
    plan = dp_spark.plan("aggregate", by=["genre", "year"], keys={"genre": ["drama", "comedy"],
                                                                  "year": range(2000, 2003)},
                         metrics=METRICS, groups_per_user=4, records_per_group=2, low=1, high=5,
                         candidates=[1, 2, 3, 4, 5], epsilon=1)
    assert set(plan.epsilon_split) == {"users", "histogram(stars)"}
    # The count is the sum of five cells' discrete Laplace noise, each at scale l·c/(ε/2) = 16.
    cell = hm.cell_sd(LedgerEntry("h", "discrete Laplace", Fraction(1, 2), Fraction(8), Fraction(16), 30))
    assert plan.accuracy["tables"]["groups"]["count"]["sd"] == pytest.approx(cell * np.sqrt(5), rel=1e-9)

    tables = job(tmp_path, tmp_path / "absent.csv", 'method = "tables"')
    assert main(["plan", str(tables)]) == 0
    said = capsys.readouterr().out
    for step in ("count", "users", "sum(stars)", "sum of squares(stars)", "quantile(stars, 0.5)",
                 "quantile(stars, 0.9)"):
        assert step in said, step
    assert "groups count" in said and "discrete Laplace (scale 48)" in said  # l·c = 8 at ε = 1/6
    assert "away from its 0.9-quantile in rank" in said


@pytest.mark.spark
def test_the_seeded_job_equals_the_seeded_api_call(spark, tmp_path):
    source = tmp_path / "ratings.csv"
    frame = ratings()
    frame.to_csv(source, index=False)
    assert main(["run", str(job(tmp_path, source))]) == 0
    table = pd.read_parquet(tmp_path / "out" / "groups")
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    release = dp_spark.aggregate(spark.read.csv(str(source), header=True), privacy_unit="person",
                                 by=["genre", "year"], keys={"genre": ["drama", "comedy"], "year": range(2000, 2003)},
                                 metrics=METRICS, groups_per_user=4, records_per_group=2, low=1, high=5,
                                 candidates=[1, 2, 3, 4, 5], epsilon=1, seed=4)
    api = release["groups"]
    assert list(api.columns) == list(table.columns)
    # Each key's values in order (text in code-point order), the first key slowest.
    assert table[["genre", "year"]].values.tolist() == [[g, y] for g in ("comedy", "drama") for y in (2000, 2001, 2002)]
    pd.testing.assert_frame_equal(api.reset_index(drop=True), table, check_dtype=False)
    for key in ("created_utc", "source", "run"):
        report.pop(key, None)
        release.report.pop(key, None)
    assert json.loads(json.dumps(release.report)) == report
    assert [e["step"] for e in report["ledger"]] == ["users", "histogram(stars)"]
    assert report["algorithm"]["parameters"]["method"] == "histogram"
    assert report["domain"]["groups"] == 6 and report["epsilon_spent"] == 1.0
    assert table["stars_p50"].isin([1, 2, 3, 4, 5]).all() and (table["stars_p50"] <= table["stars_p90"]).all()
    width = report["accuracy"]["tables"]["groups"]["count"]["ci95_halfwidth"]
    assert (table["count_ci95_halfwidth"] == width).all()


@pytest.mark.spark
def test_records_all_outside_the_keys_are_refused_as_noise_only(spark, tmp_path, capsys):
    """Every year outside [2000, 2002]: the noisy counts cannot be told from noise, so the run is
    refused (exit 5) and nothing is written, the charge kept."""
    source = tmp_path / "ratings.csv"
    ratings().assign(year=1990).to_csv(source, index=False)
    assert main(["run", str(job(tmp_path, source))]) == 5
    assert "cannot be told from noise" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_a_key_column_no_value_of_its_domain_can_have_is_refused_before_the_charge(spark, tmp_path, capsys):
    source = tmp_path / "ratings.parquet"
    ratings().assign(year=True).to_parquet(source)
    config = job(tmp_path, source, "[budget_store]", f'path = "{tmp_path / "budget.json"}"', 'dataset = "toy"',
                 "epsilon_cap = 5")
    config.write_text(config.read_text().replace('format = "csv"', 'format = "parquet"'))
    assert main(["run", str(config)]) == 2
    assert "key column year has type boolean" in capsys.readouterr().err
    assert not (tmp_path / "budget.json").exists() or json.loads((tmp_path / "budget.json").read_text())["runs"] == []


@pytest.mark.spark
def test_check_counts_each_reason_an_aggregation_drops_a_row(spark, tmp_path, capsys):
    """dp-spark check (NOT private, for the operator) on the job's CSV: the rows read, each key
    outside its values, the values that are no number, and the rows a run would group."""
    source = tmp_path / "ratings.csv"
    frame = ratings()
    frame.to_csv(source, index=False)
    assert main(["check", str(job(tmp_path, source)), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    genre_out = ~frame["genre"].isin(["drama", "comedy"])
    year_out = ~frame["year"].between(2000, 2002)
    no_value = ~frame["stars"].isin(["1", "2", "3", "4", "5"])
    assert result["rows_read"] == len(frame)
    assert result["dropped"] == {"rows_outside_key:genre": int(genre_out.sum()),
                                 "rows_outside_key:year": int(year_out.sum()),
                                 "rows_invalid_value": int(no_value.sum())}
    assert result["rows_kept"] == int((~genre_out & ~year_out & ~no_value).sum())
    assert result["users"] == frame["person"].nunique()
