"""Coverage for the operator (rows read, outside the domain, kept by bounding, users truncated)
and the guards that refuse a run before any noise is drawn (issue 29, "Silent all-noise release").

Jobs run in-process through ``cli.main`` with the suite's SparkSession; expected numbers are
computed here from the records themselves.
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dp_spark import api
from dp_spark.cli import main
from dp_spark.core.domain import AttributeDomain
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError, GuardRefused
from dp_spark.families import guards


# --- Unit: the guard's decisions ---------------------------------------------------------------


def coverage(rows_read, outside, users=None, truncated=None):
    return guards.Coverage(rows_read, outside, users=users, users_truncated=truncated, bound="l = 2")


class Said(list):
    """A progress that records its lines, with the operator's diagnostics asked for."""

    def __call__(self, message):
        self.append(message)

    def diagnostic(self, message):
        self.append(f"NOT PRIVATE: {message}")


@pytest.mark.unit
def test_by_default_only_an_all_outside_run_is_refused():
    said = Said()
    with pytest.raises(GuardRefused, match="10 of 10 rows .* are outside the public domain"):
        guards.check(guards.Guards(), coverage(10, {"item_id": 4, "attr": 6}), said)
    guards.check(guards.Guards(), coverage(10, {"item_id": 4, "attr": 5}), said)  # 9 of 10: a warning
    assert any(line.startswith("NOT PRIVATE: WARNING: 90.0% of the rows read") for line in said)
    assert all(line.startswith("NOT PRIVATE: ") for line in said)
    quiet = []  # without diagnostics asked for, the figures and the warning stay out of the log
    guards.check(guards.Guards(), coverage(10, {"item_id": 4, "attr": 5}), quiet.append)
    assert quiet == []


@pytest.mark.unit
def test_the_limits_from_the_config_are_applied():
    quiet = []
    guards.check(guards.Guards(max_dropped_fraction=1), coverage(10, {"item_id": 10}), quiet.append)  # never refuses
    with pytest.raises(GuardRefused, match=r"guards.max_dropped_fraction = 0.2"):
        guards.check(guards.Guards(max_dropped_fraction=0.2), coverage(10, {"item_id": 3}), quiet.append)
    guards.check(guards.Guards(max_dropped_fraction=0.3), coverage(10, {"item_id": 3}), quiet.append)
    with pytest.raises(GuardRefused, match=r"3 of 4 users \(75.0%\) have more records than the bound l = 2"):
        guards.check(guards.Guards(max_truncated_fraction=0.5), coverage(10, {}, users=4, truncated=3), quiet.append)
    guards.check(guards.Guards(max_truncated_fraction=0.75), coverage(10, {}, users=4, truncated=3), quiet.append)
    below = []
    guards.check(guards.Guards(warn_dropped_fraction=0.5), coverage(10, {"item_id": 3}), below.append)
    assert not any("WARNING" in line for line in below)


@pytest.mark.unit
@pytest.mark.parametrize("table, message", [
    ({"max_dropped_fraction": 1.5}, "guards.max_dropped_fraction must be a number in [0, 1]"),
    ({"max_truncated_fraction": "half"}, "guards.max_truncated_fraction must be a number in [0, 1]"),
    ({"max_droped_fraction": 0.1}, "unknown config key 'guards.max_droped_fraction'"),
])
def test_bad_guards_are_config_errors(table, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        guards.guards_of(table)


@pytest.mark.unit
def test_a_truncation_limit_is_refused_where_the_bound_is_chosen_with_noise():
    with pytest.raises(ConfigError, match="guards.max_truncated_fraction is not checked for dpsense"):
        guards.Guards(max_truncated_fraction=0.1).check_family("dpsense", "dpsense")
    guards.Guards(max_truncated_fraction=0.1).check_family("counts", "sra")


@pytest.mark.unit
def test_bounded_coverage_from_users_per_row_count():
    users_by_n = pd.Series({1: 5, 2: 3, 7: 2})  # 5 users with 1 row, 3 with 2, 2 with 7
    c = guards.bounded_coverage(40, {"item_id": 9}, users_by_n, 2)
    assert (c.users, c.rows_kept_by_bounding, c.users_truncated) == (10, 5 + 3 * 2 + 2 * 2, 2)


@pytest.mark.unit
def test_a_numeric_attribute_domain_is_compared_by_value():
    assert AttributeDomain(("1", "2", "3")).numbers == (1.0, 2.0, 3.0)
    assert AttributeDomain(("Mon", "Tue")).numbers is None
    assert AttributeDomain(("1", "1.0")).numbers is None  # equal as numbers: compared as text


# --- Jobs ---------------------------------------------------------------------------------------


def write_job(tmp_path: Path, source: Path, fmt: str, attributes: str, *extra: str, store: bool = False) -> Path:
    lines = [f'output = "{tmp_path / "out"}"', "seed = 3", "[source]", f'format = "{fmt}"', f'path = "{source}"',
             "[domain]", "items = { range = [1, 20] }", f"attributes = {attributes}",
             "[privacy]", "epsilon = 1", "[algorithm]", 'name = "sra"', "l = 2", *extra]
    if store:
        lines += ["[budget_store]", f'path = "{tmp_path / "budget.json"}"', 'dataset = "toy"', "epsilon_cap = 10"]
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def released(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "privacy.json").read_text())


def diagnostics(tmp_path: Path) -> dict:
    """What ``--diagnostics`` wrote: the run's NOT-private figures, outside the release."""
    return json.loads((tmp_path / "diagnostics.json").read_text())


def kept_by_sra(frame: pd.DataFrame, l: int) -> int:
    return int(np.minimum(frame.groupby("user_id").size(), l).sum())


def test_a_csv_attribute_read_as_4_0_matches_the_integer_domain(spark, tmp_path, capsys):
    csv = tmp_path / "ratings.csv"
    frame = pd.DataFrame({"user_id": [1, 1, 1, 2, 3, 3], "item_id": ["4.0", "5", "6.0", "4", "7", "8"],
                          "attr": ["4.0", "5.0", "2.0", " 1 ", "3.0", "4"]})
    frame.to_csv(csv, index=False)
    config = write_job(tmp_path, csv, "csv", "{ range = [1, 5] }")
    assert main(["run", str(config), "--diagnostics", str(tmp_path / "diagnostics.json")]) == 0
    report = released(tmp_path)
    cov = diagnostics(tmp_path)["coverage"]
    assert cov["rows_outside_domain"] == {"item_id": 0, "attr": 0}
    assert cov["rows_kept_by_bounding"] == kept_by_sra(frame, 2) == 5 > 0
    assert diagnostics(tmp_path)["rows_after_bounding"] == 5  # the counts saw the records
    edges = pd.read_parquet(tmp_path / "out" / "edge_counts")
    assert sorted(edges["attr"].unique()) == ["1", "2", "3", "4", "5"]  # the domain's own spelling
    assert "NOT PRIVATE: 6 rows read; outside the domain: item_id 0, attr 0" in capsys.readouterr().err


def test_monday_against_mon_is_refused_before_noise_naming_both(spark, tmp_path, capsys):
    source = tmp_path / "visits.parquet"
    pd.DataFrame({"user_id": [1, 2, 3], "item_id": [1, 2, 3], "attr": ["monday", "tuesday", "monday"]}) \
        .to_parquet(source)
    config = write_job(tmp_path, source, "parquet", '["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]', store=True)
    assert main(["run", str(config), "--diagnostics", str(tmp_path / "diagnostics.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("dp-spark: error: 3 of 3 rows (100.0%) are outside the public domain")
    assert '"monday"' in err and '"Mon"' in err and "string column" in err and "strings, compared as text" in err
    assert not (tmp_path / "out").exists()
    [run] = json.loads((tmp_path / "budget.json").read_text())["runs"]
    assert run["status"] == "refused" and run["epsilon"] == 1.0 and run["error"].startswith("GuardRefused")
    assert "monday" not in run["error"] and "3 of 3" not in run["error"]  # raw data: console only, never the store


def test_coverage_numbers_are_exact(spark, tmp_path, capsys):
    frame = pd.DataFrame({
        "user_id": [1, 1, 1, 1, 2, 2, 3, 4, 4, 4, 5, 5, 5],
        "item_id": [1, 2, 3, 99, 4, 5, 6, 7, 8, 9, 50, 10, 11],
        "attr": ["a", "b", "a", "a", "zzz", "a", "b", "a", "b", "b", "a", "a", "b"],
    })  # users with 3, 1, 1, 3 and 2 rows in the domain (l = 2: two truncated, one exactly at the bound)
    source = tmp_path / "records.parquet"
    frame.to_parquet(source)
    config = write_job(tmp_path, source, "parquet", '["a", "b"]', "[guards]", "warn_dropped_fraction = 0.5")
    assert main(["run", str(config), "--diagnostics", str(tmp_path / "diagnostics.json")]) == 0
    said = capsys.readouterr().err  # progress lines go to stderr
    cov = diagnostics(tmp_path)["coverage"]
    outside_items = ~frame["item_id"].between(1, 20)
    outside_attr = ~outside_items & ~frame["attr"].isin(["a", "b"])
    inside = frame[~outside_items & ~outside_attr]
    per_user = inside.groupby("user_id").size()
    assert cov["rows_read"] == len(frame)
    assert cov["rows_outside_domain"] == {"item_id": int(outside_items.sum()), "attr": int(outside_attr.sum())}
    assert cov["dropped_fraction"] == pytest.approx((outside_items.sum() + outside_attr.sum()) / len(frame))
    assert cov["users"] == len(per_user)
    assert cov["rows_kept_by_bounding"] == int(np.minimum(per_user, 2).sum())
    assert cov["users_truncated"] == int((per_user > 2).sum())
    assert cov["bound"] == "l = 2"
    assert f"NOT PRIVATE: {cov['users_truncated']} of {cov['users']} users" in said
    assert "WARNING (NOT PRIVATE)" not in said  # 3 of 13 rows dropped is under the 0.5 set above


def test_the_guard_fires_before_any_noise_is_drawn(spark, monkeypatch):
    def no_noise(self, n):
        raise RuntimeError("noise drawn")

    monkeypatch.setattr(RandomSource, "words", no_noise)
    records = spark.createDataFrame(pd.DataFrame({"user_id": [1, 2, 3, 4], "item_id": [1, 2, 3, 30]}))
    with pytest.raises(RuntimeError, match="noise drawn"):  # the patch does stop a release that gets that far
        api.hpa(records, items=range(1, 11), l=2, epsilon=1, seed=1, guards={"max_dropped_fraction": 0.25})
    with pytest.raises(GuardRefused, match="1 of 4 rows"):  # HPA's popularity noise comes first in its run
        api.hpa(records, items=range(1, 11), l=2, epsilon=1, seed=1, guards={"max_dropped_fraction": 0.2})
    with pytest.raises(GuardRefused, match=r"2 of 4 users \(50.0%\) have more records"):
        many = spark.createDataFrame(pd.DataFrame({"user_id": [1, 1, 1, 2, 2, 2, 3, 4], "item_id": [1] * 8}))
        api.sra(many, items=range(1, 11), l=2, epsilon=1, seed=1, guards={"max_truncated_fraction": 0.25})


def test_entropy_coverage_counts_pairs_and_users_over_m(spark, tmp_path):
    checkins = pd.DataFrame({"user_id": [1, 1, 1, 2, 2, 3, 3, 3], "location_id": [1, 2, 3, 1, 1, 2, 40, 3],
                             "time": [1, 2, 3, 1, 2, 1, 2, 3], "visits": [1, 2, 1, 3, 9, 1, 1, 1]})
    release = api.location_entropy(spark.createDataFrame(checkins), locations=range(1, 11), epsilon=1, M=2, C=5,
                                   time="time", visits="visits", seed=2)
    cov = release.diagnostics["coverage"]
    inside = checkins[checkins["location_id"] <= 10]
    pairs = inside.groupby(["user_id", "location_id"])["visits"].sum()
    locations = pairs.groupby("user_id").size()
    assert cov["rows_read"] == len(checkins) and cov["rows_outside_domain"] == {"location_id": 1}
    assert cov["kept_of"] == len(pairs) and cov["users"] == len(locations)
    assert cov["users_truncated"] == int((locations > 2).sum()) == 1
    assert cov["rows_kept_by_bounding"] == int(np.minimum(locations, 2).sum())
    assert cov["visits_in_domain"] == int(inside["visits"].sum())


def test_dpsense_coverage_counts_rows_longer_than_the_chosen_theta(spark):
    rows = {1: [1, 2, 3, 4, 5, 6], 2: [1, 2], 3: [3], 4: [1, 2, 3, 4, 5, 6, 7, 8]}
    frame = pd.DataFrame([(u, i) for u, items in rows.items() for i in items], columns=["user_id", "item_id"])
    release = api.dpsense(spark.createDataFrame(frame), items=range(1, 11), epsilon=1, theta_max=8, seed=4)
    theta = release.report["algorithm"]["chosen"]["theta"]
    cov = release.diagnostics["coverage"]
    lengths = np.array([len(items) for items in rows.values()])
    assert cov["users_truncated"] == int((lengths > theta).sum())
    assert cov["rows_kept_by_bounding"] == int(np.minimum(lengths, theta).sum())
    assert cov["kept_of"] == lengths.sum() and cov["bound"] == f"theta = {theta}"
