"""Key values held in a catalog table (families.aggregate.key_tables): one key column's values or a
table of key tuples, named by the config or the API and read when the job runs, before anything is
charged. A release from tables equals the same seeded release with the values listed; a table that
is the job's source, or reads its files, is refused, as is a table no key can be read from."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pandas as pd
import pytest

import dp_spark
from dp_spark.cli import main
from dp_spark.core.domain_tables import FrameSource
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.family import FAMILY, aggregate_params
from dp_spark.families.aggregate.key_tables import KeyTable, read_rows
from dp_spark.jobs.config import load_config

GENRES = ["drama", "comedy"]
DAYS = [datetime.date(2024, 3, 1), datetime.date(2024, 3, 2)]
PLACES = [("Lyon", 69001), ("Oslo", 150)]


@pytest.mark.unit
def test_until_the_run_reads_them_the_groups_are_not_known():
    params = aggregate_params(by=["genre", "year"], keys={"genre": {"table": "db.genres", "column": "name"},
                                                          "year": range(2000, 2003)},
                              metrics=["count"], groups_per_user=2)
    keys = params.keys
    assert keys.tables == (KeyTable("genre", ("genre",), "db.genres", "name"),) and keys.size() is None
    assert FAMILY.reads_tables(params) and FAMILY.output_rows(params, None) == {"groups": None}
    section = FAMILY.domain_section(params, None)
    assert section["groups"] is None and section["keys"]["genre"] == "table db.genres, read when the job runs"
    assert "db.genres column name" in section["keys_public_by_assertion"][0]
    assert "genre read from their catalog tables when the job runs" in FAMILY.describe(params, 1, None)
    tuples = aggregate_params(by=["city", "zip"], keys={("city", "zip"): {"table": "db.places"}}, metrics=["count"],
                              groups_per_user=2).keys
    assert tuples.tables[0].tupled and tuples.tupled == () and tuples.names == ("city", "zip")


@pytest.mark.unit
@pytest.mark.parametrize("keys, message", [
    ({"genre": {"table": ""}}, "must name a catalog table"),
    ({"genre": {"table": "t", "file": "x.txt"}}, "file is not read"),
    ({"genre": {"table": "t", "column": 3}}, "must name the table's column"),
    ({"place": {"columns": ["genre"], "table": "t", "rows": []}}, "rows is not read"),
    ({"place": {"columns": ["genre", "genre"], "table": "t"}}, "each once"),
])
def test_a_bad_table_entry_is_refused_with_the_config(keys, message):
    with pytest.raises(ConfigError, match=message):
        aggregate_params(by=["genre"], keys=keys, metrics=["count"], groups_per_user=1)


@pytest.mark.unit
def test_a_catalog_table_of_tuples_beside_private_keys_is_refused():
    with pytest.raises(ConfigError, match="not both"):
        aggregate_params(by=["a", "b", "c"], keys={("a", "b"): {"table": "t"}, "c": "private"}, metrics=["count"],
                         groups_per_user=1, delta=1e-6)


@pytest.fixture()
def key_views(spark):
    views = {"kt_genres": pd.DataFrame({"name": GENRES + GENRES}),  # repeated rows are one value
             "kt_years": pd.DataFrame({"year": [2002, 2000, 2001]}),
             "kt_places": pd.DataFrame(PLACES, columns=["city", "zip"]),
             "kt_days": pd.DataFrame({"day": DAYS}),
             "kt_doubles": pd.DataFrame({"genre": [1.5]}),
             "kt_nulls": pd.DataFrame({"genre": ["drama", None]})}
    for name, frame in views.items():
        spark.createDataFrame(frame).createOrReplaceTempView(name)
    yield
    for name in views:
        spark.catalog.dropTempView(name)


def job(folder: Path, source: Path, keys: list[str], extra: str = "") -> Path:
    config = folder / "job.toml"
    config.write_text("\n".join([
        f'output = "{folder / "out"}"', "seed = 4", extra,
        "[source]", 'format = "parquet"', f'path = "{source}"',
        "[domain.keys]", *keys, "[privacy]", "epsilon = 1.0",
        "[algorithm]", 'name = "aggregate"', 'by = ["genre", "year"]', 'metrics = ["count", "users"]',
        "groups_per_user = 3", "[guards]", "refuse_noise_only = false"]) + "\n")
    return config


def ratings(folder: Path) -> Path:
    source = folder / "ratings.parquet"
    pd.DataFrame({"user_id": [u % 40 for u in range(300)], "genre": [GENRES[u % 3 % 2] for u in range(300)],
                  "year": [2000 + u % 4 for u in range(300)]}).to_parquet(source)
    return source


@pytest.mark.spark
def test_a_job_reading_its_keys_from_tables_equals_the_job_listing_them(spark, tmp_path, key_views, capsys):
    source = ratings(tmp_path)
    listed, held = tmp_path / "listed", tmp_path / "held"
    listed.mkdir(), held.mkdir()
    assert main(["run", str(job(listed, source, ['genre = ["drama", "comedy"]', "year = [2000, 2001, 2002]"]))]) == 0
    capsys.readouterr()
    # The column found whatever its case, as Spark finds it.
    config = job(held, source, ['genre = { table = "kt_genres", column = "NAME" }', 'year = { table = "kt_years" }'])
    assert main(["plan", str(config)]) == 0
    assert "output: groups 6 rows" in capsys.readouterr().out  # the tables were read: six groups
    assert main(["run", str(config)]) == 0
    assert "WARNING: the values of keys.genre are the distinct rows of table kt_genres" in capsys.readouterr().err
    pd.testing.assert_frame_equal(pd.read_parquet(held / "out" / "groups"), pd.read_parquet(listed / "out" / "groups"))
    report = json.loads((held / "out" / "privacy.json").read_text())
    assert report["domain"]["groups"] == 6 and report["domain"]["keys"]["genre"].startswith("table kt_genres.NAME")
    assert len(report["domain"]["keys_public_by_assertion"]) == 2


@pytest.mark.spark
def test_an_api_release_from_a_table_of_tuples_and_a_column_of_dates_equals_the_listed_one(spark, key_views):
    rows = [(u, city, zip_code, DAYS[u % 2]) for u in range(200) for city, zip_code in PLACES]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "city", "zip", "day"]))
    common = dict(by=["city", "day", "zip"], metrics=["count"], groups_per_user=2, epsilon=1, seed=3)
    held = dp_spark.aggregate(df, keys={("city", "zip"): {"table": "kt_places"}, "day": {"table": "kt_days"}}, **common)
    listed = dp_spark.aggregate(df, keys={("city", "zip"): PLACES, "day": DAYS}, **common)
    pd.testing.assert_frame_equal(held["groups"], listed["groups"])
    assert held["groups"]["day"].tolist() == DAYS * 2
    assert held.report["domain"]["keys"]["zip"] == "a table of key tuples (table kt_places: 2 distinct (city, zip))"


@pytest.mark.spark
def test_a_table_over_the_source_files_is_refused_before_the_charge(spark, tmp_path):
    source = ratings(tmp_path)
    df = spark.read.parquet(str(source))
    spark.read.parquet(str(source)).select("genre").createOrReplaceTempView("kt_source")  # another plan, same files
    budget = dp_spark.DatasetBudget(epsilon=1)
    try:
        with pytest.raises(ConfigError, match="keys.genre.table 'kt_source' reads the job's source files"):
            dp_spark.aggregate(df, by=["genre"], keys={"genre": {"table": "kt_source"}}, metrics=["count"],
                               groups_per_user=1, epsilon=1, budget=budget)
        assert budget.spent == 0
        config = job(tmp_path, source, ['genre = { table = "KT_SOURCE" }', "year = [2000]"])
        config.write_text(config.read_text().replace('format = "parquet"', 'format = "table"\ntable = "kt_source"'))
        with pytest.raises(ConfigError, match="keys.genre.table 'KT_SOURCE' is the job's source"):
            from dp_spark.jobs.runner import run_job
            run_job(load_config(config), spark, progress=lambda _message: None)
        assert not (tmp_path / "out").exists()
    finally:
        spark.catalog.dropTempView("kt_source")


@pytest.mark.spark
def test_a_view_of_the_dataframe_itself_is_refused_in_the_api(spark):
    """No file to compare when the DataFrame is in memory: its view is refused by its plan."""
    df = spark.createDataFrame(pd.DataFrame({"user_id": [1, 2], "genre": ["drama", "comedy"]}))
    df.createOrReplaceTempView("kt_itself")
    budget = dp_spark.DatasetBudget(epsilon=1)
    try:
        with pytest.raises(ConfigError, match="keys.genre.table 'kt_itself' is the DataFrame being released"):
            dp_spark.aggregate(df, by=["genre"], keys={"genre": {"table": "kt_itself"}}, metrics=["count"],
                               groups_per_user=1, epsilon=1, budget=budget)
        assert budget.spent == 0
    finally:
        spark.catalog.dropTempView("kt_itself")


@pytest.mark.spark
@pytest.mark.parametrize("table, message", [
    (KeyTable("genre", ("genre",), "kt_absent", "genre"), "cannot read table 'kt_absent'"),
    (KeyTable("genre", ("genre",), "kt_genres", "genre"), "cannot read table 'kt_genres'"),  # no such column
    (KeyTable("genre", ("genre",), "kt_doubles", "genre"), "has type double"),
    (KeyTable("genre", ("genre",), "kt_nulls", "genre"), "holds a null"),
])
def test_a_table_no_key_can_be_read_from_is_refused(spark, key_views, table, message):
    source = FrameSource(spark.createDataFrame(pd.DataFrame({"user_id": [1]})))
    with pytest.raises(ConfigError, match=message):
        read_rows(spark, table, source)
