"""``domain.items = "private"``: a counts release over the items partition selection releases
(docs/partition_selection.md), in the API and in a job. The mechanism itself is tested in
test_partition_selection.py; here, that a release selects, pays ε and δ, counts only the selected
items, reports them as a DP output, and that bad settings are refused before anything is read."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

import dp_spark
from dp_spark.errors import ConfigError
from dp_spark.families.counts import family as counts
from dp_spark.families.registry import family_of
from dp_spark.jobs.config import load_config
from dp_spark.release.family import Domains, plan_split
from tests.conftest import ROOT, shared_data


def _records(spark, popular, rare_users=3):
    """300 users with one record of each popular item; ``rare_users`` users with item "rare"."""
    rows = [(u, item) for u in range(300) for item in popular] + [(1000 + u, "rare")
                                                 for u in range(rare_users)]
    return spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id"]).astype({"item_id": str}))


def test_a_private_release_selects_pays_and_counts_only_the_selected_items(spark):
    df = _records(spark, ["sku-a", "sku-b", "sku-c"])
    release = dp_spark.sra(df, items="private", delta=1e-6, l=3, keys_per_user=3, epsilon=2, seed=1)
    table = release["item_counts"]
    # 300 users each: far past the always-released count (80 at ε_partition = 1, l0 = 3); 3 users:
    # released with probability π(3) < 1e-5.
    assert table["item_id"].tolist() == ["sku-a", "sku-b", "sku-c"]
    assert ((table["noisy_count"] - 300).abs() < 60).all()
    report = release.report
    assert report["algorithm"]["chosen"] == {"items_selected": 3}
    assert report["algorithm"]["parameters"]["items"] == "private"
    assert report["algorithm"]["parameters"]["keys_per_user"] == 3
    assert report["domain"]["item_count"] == 3 and "selected privately" in report["domain"]["items"]
    steps = {entry["step"]: entry for entry in release.ledger}
    assert steps["select items"]["delta"] == 1e-6 and steps["select items"]["epsilon_exact"] == "1"
    assert steps["item_counts"]["epsilon_exact"] == "9/10" and steps["item_counts"]["cells"] == 3
    # What bounding kept, over the selected items: 900 records, with noise of scale l/(ε/40) = 60.
    assert abs(report["accuracy"]["bounding"]["records_kept_noisy"] - 900) < 600
    assert report["delta_spent"] == pytest.approx(1e-6)
    assert release.diagnostics["partition_selection"] == {"keys_seen": 4, "keys_selected": 3}
    # The rows of the item left out are counted apart, not as rows outside a public domain.
    coverage = release.diagnostics["coverage"]
    assert coverage["rows_outside_domain"] == {} and coverage["rows_of_items_not_selected"] == 3
    assert coverage["kept_of"] == 900 and coverage["rows_kept_by_bounding"] == 900


def test_integer_ids_and_edges_work_too(spark):
    rows = [(u, item, "x" if u % 2 else "y") for u in range(200) for item in (7, 8)]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id", "attr"]))
    release = dp_spark.sra(df, items="private", delta=1e-6, l=2, keys_per_user=2, epsilon=4, attribute="attr",
                           attributes=["x", "y"], seed=3)
    assert release["item_counts"]["item_id"].tolist() == [7, 8]
    assert len(release["edge_counts"]) == 4
    assert set(release.report["algorithm"]["epsilon_split"]) == {"epsilon_partition", "epsilon_bounding",
                                                                 "epsilon_items", "epsilon_edges"}


def test_nothing_selected_gives_empty_tables_and_spends_no_more(spark, tmp_path):
    df = _records(spark, [], rare_users=3)
    release = dp_spark.sra(df, items="private", delta=1e-6, l=1, epsilon=1, seed=4)
    assert release["item_counts"].empty
    release.write(str(tmp_path / "empty"))  # an empty table is written with its columns
    assert list(pd.read_parquet(tmp_path / "empty" / "item_counts").columns) == list(release["item_counts"].columns)
    assert release.report["algorithm"]["chosen"] == {"items_selected": 0}
    assert [entry["step"] for entry in release.ledger] == ["select items"]


def test_one_user_spelled_several_ways_is_one_user_for_the_selection(spark):
    # Validation reads "1", "01", " 1" and "1.0" as user 1 (the privacy unit). Bounded by the raw
    # text, that user would put forward 4 items with keys_per_user = 1 (a review's finding).
    from dp_spark.aggregates.key_users import users_per_key
    from dp_spark.bounding.user_keys import bounded_keys
    from dp_spark.io.validation import keyed_by_user

    df = spark.createDataFrame(pd.DataFrame({"user_id": ["1", "01", " 1", "1.0", "2"],
                                             "item_id": ["a", "b", "c", "d", "a"]}))
    keys, users = users_per_key(bounded_keys(keyed_by_user(df), 1, seed=0))
    assert users.sum() == 2  # user 1 counts once, on one of its items, and user 2 once
    raw_keys, raw_users = users_per_key(bounded_keys(df, 1, seed=0))
    assert raw_users.sum() == 5  # the negative control: by the raw text, user 1 counts four times


def test_a_double_item_column_is_refused_before_the_selection_draws(spark):
    # Refused in keyed_by_user, which runs before private_keys draws (a selected domain holds
    # integer or string ids only).
    df = spark.createDataFrame(pd.DataFrame({"user_id": [1, 2], "item_id": [1.5, 2.0]}))
    with pytest.raises(dp_spark.DataError, match="integer or string ids"):
        dp_spark.sra(df, items="private", delta=1e-6, l=1, epsilon=1)


def test_auto_and_private_items_split_the_budget_in_order():
    params = counts.CountsParams("sra", "auto", private_items=True, delta=1e-6)
    split = plan_split(family_of("sra"), params, Fraction(1), Domains(None))
    assert split == {"epsilon_partition": Fraction(1, 2), "epsilon_bound": Fraction(1, 10),
                     "epsilon_bounding": Fraction(1, 20), "epsilon_items": Fraction(7, 20)}
    assert params.keys_per_user == counts.DEFAULT_KEYS_PER_USER == 10
    assert counts.CountsParams("sra", 7, private_items=True, delta=1e-6, keys_per_user=3).keys_per_user == 3


@pytest.mark.parametrize("arguments, message", [
    (dict(private_items=True), "needs privacy.delta in"),
    (dict(private_items=True, delta=1.5), "needs privacy.delta in"),
    (dict(private_items=True, delta=1e-6, publisher="ahp"), "needs the laplace publisher"),
    (dict(delta=1e-6), "used only with domain.items"),
    (dict(keys_per_user=3), "used only with domain.items"),
    (dict(private_items=True, delta=1e-6, keys_per_user=0), "keys_per_user must be an integer"),
])
def test_bad_private_settings_are_refused(arguments, message):
    with pytest.raises(ConfigError, match=message):
        counts.CountsParams("sra", 5, **arguments)


def test_the_api_needs_delta_with_private_items_and_refuses_it_without():
    with pytest.raises(ConfigError, match="needs delta"):
        dp_spark.plan("sra", items="private", l=3, epsilon=1)
    with pytest.raises(ConfigError, match="spent only by partition selection"):
        dp_spark.plan("sra", items=range(1, 5), l=3, epsilon=1, delta=1e-6)


def test_the_config_reads_private_items():
    cfg = load_config(ROOT / "conf/movielens_sra.toml", ['domain.items="private"', "privacy.delta=1e-6",
                                                         "algorithm.keys_per_user=5"])
    assert cfg.params.private_items and cfg.params.keys_per_user == 5 and cfg.params.delta == 1e-6
    assert cfg.items == {}
    with pytest.raises(ConfigError, match="needs privacy.delta"):
        load_config(ROOT / "conf/movielens_sra.toml", ['domain.items="private"'])
    with pytest.raises(ConfigError, match="location-entropy parameter"):
        load_config(ROOT / "conf/movielens_sra.toml", ["privacy.delta=1e-6"])

@pytest.mark.parametrize("algorithm", ["dpsense", "user_histogram"])
def test_only_the_counts_take_private_items(tmp_path, algorithm):
    extra = 'quantity = "records"\nbins = [1, 5]' if algorithm == "user_histogram" else ""
    config = tmp_path / "job.toml"
    config.write_text(f"""output = "out"\n[source]\nformat = "csv"\npath = "r.csv"\n[domain]\nitems = "private"
[privacy]\nepsilon = 1.0\ndelta = 1e-6\n[algorithm]\nname = "{algorithm}"\n{extra}\n""")
    with pytest.raises(ConfigError, match='domain.items = "private" is for'):
        load_config(config)


def test_a_private_items_job_runs_and_writes_the_selected_items(spark, tmp_path):
    from dp_spark.cli import main
    out = tmp_path / "private"
    assert main(["run", str(ROOT / "conf/movielens_sra.toml"), "--set", "source.format=movielens-100k",
                 "--set", f"source.path={shared_data('ml-100k')}", "--set", 'domain.items="private"',
                 "--set", "privacy.delta=1e-6", "--set", "privacy.epsilon=8", "--set", "algorithm.keys_per_user=3",
                 "--set", "seed=2", "--set", f"output={out}"]) == 0
    items = pd.read_parquet(out / "item_counts")
    # Some of ML-100K's movies, not all: each user adds to 3 of theirs, and the least rated are left out.
    assert 0 < len(items) < 1682
    # At the default of 10 items per user and ε = 1, no ML-100K movie has enough users: empty tables.
    empty = tmp_path / "empty"
    assert main(["run", str(ROOT / "conf/movielens_sra.toml"), "--set", "source.format=movielens-100k",
                 "--set", f"source.path={shared_data('ml-100k')}", "--set", 'domain.items="private"',
                 "--set", "privacy.delta=1e-6", "--set", "seed=2", "--set", f"output={empty}"]) == 0
    assert pd.read_parquet(empty / "item_counts").empty


# ---------------------------------------------------------------------------
# Sums and means over items selected privately: the counts' selection, then the means.


def _valued(spark, popular, rare_users=3):
    """Each popular item rated 4 by 300 users, and "rare" rated 1 by ``rare_users`` users."""
    rows = [(u, item, 4.0) for u in range(300) for item in popular] + [(1000 + u, "rare", 1.0)
                                                                      for u in range(rare_users)]
    return spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id", "value"]))


def test_means_over_private_items_select_pay_and_sum_only_the_selected_items(spark, tmp_path):
    df = _valued(spark, ["sku-a", "sku-b"])
    release = dp_spark.means(df, items="private", delta=1e-6, value="value", low=0, high=5, l=2, keys_per_user=2,
                             epsilon=4, seed=2, progress=lambda _: None)
    table = release["item_means"]
    assert table["item_id"].tolist() == ["sku-a", "sku-b"] and (table["mean"].astype(float) - 4).abs().max() < 0.5
    report = release.report
    assert report["algorithm"]["chosen"] == {"items_selected": 2}
    assert report["algorithm"]["parameters"]["items"] == "private" and report["domain"]["item_count"] == 2
    steps = {entry["step"]: entry for entry in release.ledger}
    assert list(steps) == ["select items", "value_counts", "value_sums", "bounding: kept", "bounding: removed"]
    assert steps["select items"]["epsilon_exact"] == "2" and steps["value_sums"]["cells"] == 2
    assert report["delta_spent"] == pytest.approx(1e-6) and report["epsilon_spent"] == pytest.approx(4)
    coverage = release.diagnostics["coverage"]
    assert "item_id" not in coverage["rows_outside_domain"] and coverage["rows_of_items_not_selected"] == 3
    # Nothing selected: empty tables with their columns, and nothing spent after the selection.
    empty = dp_spark.means(_valued(spark, []), items="private", delta=1e-6, value="value", low=0, high=5, l=1,
                           epsilon=1, seed=4, progress=lambda _: None)
    assert empty["item_means"].empty and [e["step"] for e in empty.ledger] == ["select items"]
    empty.write(str(tmp_path / "empty"))
    assert list(pd.read_parquet(tmp_path / "empty" / "item_means").columns) == list(empty["item_means"].columns)


def test_a_means_job_takes_private_items_and_needs_delta(tmp_path):
    job = tmp_path / "job.toml"
    text = f'''output = "{tmp_path / 'out'}"
[source]
format = "csv"
path = "x.csv"
[domain]
items = "private"
[privacy]
epsilon = 1.0
{{delta}}
[algorithm]
name = "means"
l = 5
low = 1
high = 5
keys_per_user = 3
'''
    job.write_text(text.format(delta=""))
    with pytest.raises(ConfigError, match="needs privacy.delta"):
        load_config(job)
    job.write_text(text.format(delta="delta = 1e-6"))
    params = load_config(job).params
    assert params.private_items and params.keys_per_user == 3 and params.delta == 1e-6
    split = plan_split(family_of("means"), params, Fraction(1), Domains(None, None))
    assert split["epsilon_partition"] == Fraction(1, 2)
    with pytest.raises(ConfigError, match="used only with"):
        dp_spark.plan("means", items=range(1, 4), value="v", low=1, high=5, l=5, keys_per_user=3, epsilon=1)
