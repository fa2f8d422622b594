"""What privacy.json claims: FRAPP's privacy unit (local, replacement, N public), a domain read
from a table (the source refused, any other table flagged as public by assertion), and a seeded
release (no guarantee: for testing only)."""

import json

import numpy as np
import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.core.ledger import Budget
from dp_spark.errors import ConfigError
from dp_spark.jobs.config import build_config
from dp_spark.jobs.runner import run_job

# ---------------------------------------------------------------------------
# FRAPP: local DP on one record, replacement neighbours, the record count published.


def frapp_config(tmp_path, records_per_user: int, users: bool = True, seed: int | None = 4) -> str:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"person": np.repeat(np.arange(20), 3), "sex": rng.choice(["F", "M"], 60)})
    frame.to_csv(tmp_path / "people.csv", index=False)
    lines = [f'output = "{tmp_path / "out"}"', *([f"seed = {seed}"] if seed is not None else []),
             "[source]", 'format = "csv"', f'path = "{tmp_path / "people.csv"}"',
             'columns = { user_id = "person" }' if users else "",
             "[domain]", 'records = [{ column = "sex", values = ["F", "M"] }]', "[privacy]", "gamma = 9",
             "[algorithm]", 'name = "frapp"', f"records_per_user = {records_per_user}", "sup_min = 0.05"]
    (tmp_path / "job.toml").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "job.toml")


def run_frapp(tmp_path, **kwargs) -> dict:
    assert main(["run", frapp_config(tmp_path, **kwargs)]) == 0
    return json.loads((tmp_path / "out" / "privacy.json").read_text())


@pytest.mark.parametrize("records_per_user, users", [(1, True), (2, True), (1, False)])
def test_frapp_report_names_its_unit_relation_and_that_n_is_public(spark, tmp_path, records_per_user, users):
    report = run_frapp(tmp_path, records_per_user=records_per_user, users=users, seed=None)
    assert report["neighbouring_relation"] == "replacement"
    assert report["privacy_model"] == "local"
    assert "adding or removing" not in report["privacy_unit"]
    assert report["privacy_unit"].startswith("user" if users else "record")
    assert "replacing the values" in report["privacy_unit"]
    n_public = [line for line in report["not_hidden"] if line.startswith("N, the number of records")]
    assert len(n_public) == 1
    assert report["outputs"]["perturbed_records"]["rows"] == (20 * records_per_user if users else 60)
    assert report["guarantee"].startswith("pure epsilon-local differential privacy")
    if records_per_user > 1:  # §1.1: L records per user compose to L x the per-record epsilon
        assert "at most 2 records" in report["privacy_unit"]
        assert "2 x epsilon_per_record" in report["privacy_unit"]
        assert any("how many records each user keeps" in line for line in report["not_hidden"])
        assert report["epsilon_spent"] == pytest.approx(2 * report["algorithm"]["parameters"]["epsilon_per_record"])
    if not users:
        assert "every row is taken as one user" in report["privacy_unit"]


def test_frapp_seeded_release_has_no_guarantee(spark, tmp_path):
    report = run_frapp(tmp_path, records_per_user=1, seed=4)
    assert report["guarantee"].startswith("NONE") and "NOT private" in report["guarantee"]
    assert report["private"] is False and report["fixed_seed"] is True


def test_central_jobs_keep_the_user_unit():
    report = Budget(1).to_json()
    assert report["privacy_unit"] == ("user: adding or removing one user together with all of that user's "
                                      "records")
    assert report["neighbouring_relation"] == "add/remove" and report["privacy_model"] == "central"
    assert report["guarantee"].startswith("pure epsilon-differential privacy") and report["private"] is True


# ---------------------------------------------------------------------------
# A domain read from a table.

RATINGS = pd.DataFrame({"user_id": [1, 1, 2, 3, 3, 3], "item_id": [1, 2, 2, 3, 4, 5]})


@pytest.fixture()
def ratings_view(spark):
    spark.createDataFrame(RATINGS).createOrReplaceTempView("report_ratings")
    spark.createDataFrame(pd.DataFrame({"movie_id": [1, 2, 3, 4, 5, 6]})).createOrReplaceTempView("report_movies")
    yield "report_ratings"
    spark.catalog.dropTempView("report_ratings")
    spark.catalog.dropTempView("report_movies")


def sra_config(tmp_path, source: dict, items: dict, seed: int | None = None):
    raw = {"output": str(tmp_path / "out"), "source": source, "domain": {"items": items},
           "privacy": {"epsilon": 1.0}, "algorithm": {"name": "sra", "l": 2},
           "guards": {"refuse_noise_only": False}}  # a handful of records: released anyway
    if seed is not None:
        raw["seed"] = seed
    return build_config(raw)


@pytest.mark.parametrize("name", ["report_ratings", "REPORT_RATINGS", "`report_ratings`"])
def test_the_source_view_is_refused_as_a_domain(spark, tmp_path, ratings_view, name):
    cfg = sra_config(tmp_path, {"format": "table", "table": ratings_view}, {"table": name, "column": "item_id"})
    with pytest.raises(ConfigError, match="is the job's source"):
        run_job(cfg, spark, progress=lambda _message: None)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["report_src", "Report_Src", "default.report_src", "spark_catalog.default.report_src"])
def test_the_source_table_is_refused_with_or_without_its_database(spark, tmp_path, name):
    location = tmp_path / "ratings.parquet"
    RATINGS.to_parquet(location)
    spark.sql(f"CREATE TABLE report_src USING parquet LOCATION '{location}'")
    try:
        cfg = sra_config(tmp_path, {"format": "table", "table": "default.REPORT_SRC"},
                         {"table": name, "column": "item_id"})
        with pytest.raises(ConfigError, match="is the job's source"):
            run_job(cfg, spark, progress=lambda _message: None)
    finally:
        spark.sql("DROP TABLE IF EXISTS report_src")
    assert not (tmp_path / "out").exists()


def test_a_view_over_the_source_path_is_refused(spark, tmp_path):
    """A parquet source and a view that reads the same files: refused by the files, not the name."""
    location = tmp_path / "ratings"
    spark.createDataFrame(RATINGS).write.parquet(str(location))
    spark.read.parquet(str(location)).createOrReplaceTempView("report_same_files")
    try:
        cfg = sra_config(tmp_path, {"format": "parquet", "path": str(location)},
                         {"table": "report_same_files", "column": "item_id"})
        with pytest.raises(ConfigError, match="reads the job's source files"):
            run_job(cfg, spark, progress=lambda _message: None)
    finally:
        spark.catalog.dropTempView("report_same_files")
    assert not (tmp_path / "out").exists()


def test_another_table_is_flagged_as_public_by_assertion(spark, tmp_path, ratings_view, capsys):
    cfg = sra_config(tmp_path / "table", {"format": "table", "table": ratings_view},
                     {"table": "report_movies", "column": "movie_id"})
    result = run_job(cfg, spark)  # the default progress writes to stderr
    assertion = result.report["domain"]["items_public_by_assertion"]
    assert "report_movies" in assertion and "asserts is public" in assertion
    assert result.report["domain"]["item_count"] == 6
    warnings = [line for line in capsys.readouterr().err.splitlines() if "WARNING" in line]
    assert any("report_movies" in line and "asserts is public" in line for line in warnings)
    # A range from the config is public by construction: no flag, no warning.
    ranged = run_job(sra_config(tmp_path / "range", {"format": "table", "table": ratings_view}, {"range": [1, 6]}),
                     spark)
    assert "items_public_by_assertion" not in ranged.report["domain"]
    assert "asserts is public" not in capsys.readouterr().err


# ---------------------------------------------------------------------------
# A fixed seed: the ledger describes the mechanism; the release guarantees nothing.


def test_seeded_release_says_testing_and_not_private(spark, tmp_path, ratings_view, capsys):
    seeded = run_job(sra_config(tmp_path / "a", {"format": "table", "table": ratings_view}, {"range": [1, 6]},
                                seed=5), spark).report
    fresh = run_job(sra_config(tmp_path / "b", {"format": "table", "table": ratings_view}, {"range": [1, 6]}),
                    spark).report
    assert seeded["guarantee"].startswith("NONE")
    assert "testing" in seeded["guarantee"] and "NOT private" in seeded["guarantee"]
    assert seeded["private"] is False and seeded["fixed_seed"] is True
    assert fresh["guarantee"].startswith("pure epsilon-differential privacy")
    assert "NOT private" not in fresh["guarantee"] and "testing" not in fresh["guarantee"]
    assert fresh["private"] is True and fresh["fixed_seed"] is False
    # The ledger describes the mechanism, seeded or not.
    assert seeded["ledger"] == fresh["ledger"] and seeded["epsilon_spent"] == fresh["epsilon_spent"]
    err = capsys.readouterr().err
    assert err.count("WARNING: fixed seed") == 1


def test_evaluate_refuses_the_source_as_a_domain_too(spark, tmp_path, ratings_view):
    """`dp-spark evaluate` builds the same item domain as a job; the source table is refused there too."""
    from dp_spark.lab.evaluate import evaluate

    cfg = sra_config(tmp_path, {"format": "table", "table": ratings_view}, {"table": "REPORT_RATINGS",
                                                                             "column": "item_id"})
    with pytest.raises(ConfigError, match="is the job's source"):
        evaluate(cfg, spark, ["sra"], 1, None, lambda _message: None)
