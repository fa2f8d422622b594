"""A public table of key tuples (families.aggregate.key_tuples): the combinations of several key
columns that exist, instead of their product. The groups are its distinct rows times the other
key columns' values; its values are typed as the records' columns are; bad tables are refused
before anything is read or spent."""

from __future__ import annotations

import datetime
from fractions import Fraction

import pandas as pd
import pytest

import dp_spark
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.family import aggregate_params
from dp_spark.families.aggregate.key_tuples import DATE, INTEGER, STRING, listed_tuples, typed_tuples
from dp_spark.jobs.config import load_config

PLACES = [("Lyon", "69001"), ("Lyon", "69002"), ("Oslo", "0150")]


@pytest.mark.unit
def test_the_groups_are_the_listed_tuples_times_the_other_columns_values():
    params = aggregate_params(by=["city", "year", "zip"], keys={("city", "zip"): PLACES + [PLACES[0]],
                                                                 "year": range(2020, 2022)},
                              metrics=["count"], groups_per_user=2)
    keys = params.keys
    assert (keys.tupled, keys.private, len(keys)) == (("city", "zip"), (), 6)  # the repeated row is one tuple
    assert params.split(Fraction(1)) == {"count": Fraction(1)}  # nothing is selected: no partition step
    frame = keys.with_tuples(PLACES).frame()
    assert list(frame.columns) == ["city", "year", "zip"]
    assert frame.values.tolist()[:3] == [["Lyon", 2020, "69001"], ["Lyon", 2021, "69001"], ["Lyon", 2020, "69002"]]


@pytest.mark.unit
def test_values_are_typed_as_the_records_columns_are():
    rows = [("07", "x", "2024-03-01"), (8.0, 9, datetime.date(2024, 3, 2))]
    assert typed_tuples(["a", "b", "c"], rows, [INTEGER, STRING, DATE]) == [
        (7, "x", datetime.date(2024, 3, 1)), (8, "9", datetime.date(2024, 3, 2))]
    for value, kind, message in [("7.5", INTEGER, "no whole number"), (True, INTEGER, "no whole number"),
                                 ("March", DATE, "no date")]:
        with pytest.raises(ConfigError, match=message):
            typed_tuples(["a"], [(value,)], [kind])


@pytest.mark.unit
@pytest.mark.parametrize("spec, message", [
    ({"columns": []}, "must list the key columns"),
    ({"columns": ["a", "a"], "rows": []}, "must list the key columns"),
    ({"columns": ["a"]}, "takes columns and one of rows"),
    ({"columns": ["a"], "rows": [], "table": "t"}, "table is not read"),
    ({"columns": ["a", "b"], "rows": [("x",)]}, "each row is a tuple of 2 values"),
    ({"columns": ["a"], "rows": pd.DataFrame({"b": [1]})}, "has no column a"),
    ({"columns": ["a"], "file": "/nonexistent/keys.csv"}, "does not exist"),
])
def test_bad_tables_are_refused(spec, message):
    with pytest.raises(ConfigError, match=message):
        listed_tuples("place", spec)


@pytest.mark.unit
def test_a_table_with_no_row_or_beside_private_keys_is_refused():
    with pytest.raises(ConfigError, match="has no row"):
        aggregate_params(by=["a"], keys={("a",): []}, metrics=["count"], groups_per_user=1)
    with pytest.raises(ConfigError, match="not both"):
        aggregate_params(by=["a", "b", "c"], keys={("a", "b"): [(1, 2)], "c": "private"}, metrics=["count"],
                         groups_per_user=1, delta=1e-6)


@pytest.mark.unit
def test_a_config_reads_the_table_from_a_csv_file(tmp_path):
    (tmp_path / "places.csv").write_text("zip,city\n69001,Lyon\n0150,Oslo\n")
    config = tmp_path / "job.toml"
    config.write_text(f'output = "{tmp_path}/out"\n[source]\nformat = "parquet"\npath = "{tmp_path}/in"\n'
                      '[algorithm]\nname = "aggregate"\nby = ["city", "zip"]\nmetrics = ["count"]\n'
                      f'groups_per_user = 2\n[domain.keys]\nplace = {{ columns = ["city", "zip"], file = '
                      f'"{tmp_path / "places.csv"}" }}\n[privacy]\nepsilon = 1.0\n')
    keys = load_config(config).params.keys
    assert keys.tuples == (("Lyon", "69001"), ("Oslo", "0150"))  # as read: text, zeros kept
    assert "places.csv: 2 distinct (city, zip)" in keys.source


@pytest.mark.spark
def test_a_release_counts_the_listed_tuples_only_and_types_them_as_the_records(spark):
    rows = [(u, city, zip_code) for u in range(300) for city, zip_code in [("Lyon", 69001), ("Oslo", 150)]]
    rows += [(u, "Lyon", 150) for u in range(300)]  # a combination the table does not list: in no group
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "city", "zip"]))
    release = dp_spark.aggregate(df, by=["city", "zip"], keys={("city", "zip"): [("Oslo", "0150"), ("Lyon", "69001"),
                                                                                 ("Paris", "75001")]},
                                 metrics=["count"], groups_per_user=3, epsilon=30, seed=1)
    table = release["groups"]
    assert table[["city", "zip"]].values.tolist() == [["Lyon", 69001], ["Oslo", 150], ["Paris", 75001]]
    assert (table["count"] - pd.Series([300, 300, 0])).abs().max() <= 5  # noise of scale 0.1 at ε 30, L1 3
    assert release.report["domain"]["keys"]["zip"].startswith("a table of key tuples (3 rows given")
    assert release.report["domain"]["groups"] == 3
    frame = pd.DataFrame({"city": ["Oslo"], "zip": ["0150"]})  # a pandas table of key tuples as well
    assert len(dp_spark.aggregate(df, by=["city", "zip"], keys={("city", "zip"): frame}, metrics=["count"],
                                  groups_per_user=3, epsilon=30, seed=1)["groups"]) == 1


@pytest.mark.spark
def test_a_listed_value_no_record_type_can_hold_is_refused_before_the_charge(spark):
    df = spark.createDataFrame(pd.DataFrame({"user_id": [1], "city": ["Lyon"], "zip": [69001]}))
    budget = dp_spark.DatasetBudget(epsilon=1)
    with pytest.raises(ConfigError, match="no whole number"):
        dp_spark.aggregate(df, by=["city", "zip"], keys={("city", "zip"): [("Lyon", "6900A")]}, metrics=["count"],
                           groups_per_user=1, epsilon=1, budget=budget)
    assert budget.spent == 0


@pytest.mark.spark
def test_check_counts_the_rows_whose_tuple_is_not_listed(spark, tmp_path, capsys):
    from dp_spark.cli import main

    (tmp_path / "places.csv").write_text("city,zip\nLyon,69001\nOslo,0150\n")
    pd.DataFrame({"user_id": [1, 2, 3, 4], "city": ["Lyon", "Oslo", "Lyon", None],
                  "zip": ["69001", "0150", "0150", "0150"]}).to_parquet(tmp_path / "in.parquet")
    config = tmp_path / "job.toml"
    config.write_text(f'output = "{tmp_path}/out"\n[source]\nformat = "parquet"\npath = "{tmp_path}/in.parquet"\n'
                      '[algorithm]\nname = "aggregate"\nby = ["city", "zip"]\nmetrics = ["count"]\n'
                      f'groups_per_user = 2\n[domain.keys]\nplace = {{ columns = ["city", "zip"], file = '
                      f'"{tmp_path / "places.csv"}" }}\n[privacy]\nepsilon = 1.0\n')
    assert main(["check", str(config)]) == 0
    text = capsys.readouterr().out
    assert "NOT PRIVATE: rows read: 4; a run would keep 2 (50.0%)" in text
    assert "NOT PRIVATE: dropped, key city null: 1 rows" in text
    assert "NOT PRIVATE: dropped, key tuple not in the table of key tuples: 1 rows" in text
