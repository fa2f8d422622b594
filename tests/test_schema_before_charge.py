"""A source whose columns cannot be read as the job needs is refused before any budget is charged:
the schema (column names and types) is public, and Spark knows it without reading a
record. Each case runs the whole job through ``cli.main`` against a budget store and expects exit
2, the store without a run and no output; the API cases expect a ``DatasetBudget`` untouched.

Negative control: ``test_the_schema_check_is_what_stops_the_run`` takes the check out and finds
the same job charged first."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

import dp_spark
from dp_spark.cli import main
from dp_spark.errors import DpSparkError
from dp_spark.jobs import runner
from tests.test_preflight_runs import refused_before_the_charge, store_runs

GOOD = pd.DataFrame({"user_id": [1, 1, 2, 3], "item_id": [1, 2, 2, 3]})


def write_job(tmp_path: Path, source: list[str], algorithm: list[str] | None = None,
              domain: list[str] | None = None, privacy: str = "epsilon = 1") -> Path:
    lines = [f'output = "{tmp_path / "out"}"', "[source]", *source,
             "[domain]", *(domain or ["items = { range = [1, 10] }"]), "[privacy]", privacy,
             "[algorithm]", *(algorithm or ['name = "sra"', "l = 2"]),
             "[budget_store]", f'path = "{tmp_path / "budget.json"}"', 'dataset = "toy"', "epsilon_cap = 5",
             "[guards]", "refuse_noise_only = false"]  # four records: too few to be told from noise
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def parquet(tmp_path: Path, frame: pd.DataFrame) -> list[str]:
    frame.to_parquet(tmp_path / "records.parquet")
    return ['format = "parquet"', f'path = "{tmp_path / "records.parquet"}"']


def csv(tmp_path: Path, content: bytes, *extra: str) -> list[str]:
    (tmp_path / "records.csv").write_bytes(content)
    return ['format = "csv"', f'path = "{tmp_path / "records.csv"}"', *extra]


def test_a_misnamed_column_costs_nothing(spark, tmp_path, capsys):
    source = [*parquet(tmp_path, GOOD), "[source.columns]", 'user_id = "userid"']
    refused_before_the_charge(tmp_path, capsys, [str(write_job(tmp_path, source))],
                              "source column 'userid' (for user_id) not found; the source has columns: user_id, "
                              "item_id")


def test_a_missing_column_costs_nothing(spark, tmp_path, capsys):
    source = parquet(tmp_path, GOOD[["user_id"]])
    refused_before_the_charge(tmp_path, capsys, [str(write_job(tmp_path, source))],
                              "source column 'item_id' (for item_id) not found")


def test_a_column_of_a_type_no_id_has_costs_nothing(spark, tmp_path, capsys):
    dates = GOOD.assign(item_id=[dt.date(2026, 1, d) for d in (1, 2, 2, 3)])
    refused_before_the_charge(tmp_path, capsys, [str(write_job(tmp_path, parquet(tmp_path, dates)))],
                              "column item_id has type date; expected integer ids")


def test_a_binary_file_read_as_csv_costs_nothing(spark, tmp_path, capsys):
    noise = bytes(range(256)) * 40
    refused_before_the_charge(tmp_path, capsys, [str(write_job(tmp_path, csv(tmp_path, noise)))],
                              "(for user_id) not found")


def test_a_headerless_csv_read_with_a_header_costs_nothing(spark, tmp_path, capsys):
    source = csv(tmp_path, b"1,1\n1,2\n2,2\n", "header = true")
    refused_before_the_charge(tmp_path, capsys, [str(write_job(tmp_path, source))], "seems to have no header")


def test_a_csv_of_another_shape_costs_nothing(spark, tmp_path, capsys):
    source = csv(tmp_path, b"user_id,item_id,rating\n1,1,5\n", "header = true", "names = ['user_id', 'item_id']")
    refused_before_the_charge(tmp_path, capsys, [str(write_job(tmp_path, source))],
                              "source.names lists 2 columns but")


def test_an_attribute_column_no_domain_value_can_have_costs_nothing(spark, tmp_path, capsys):
    dates = GOOD.assign(attr=[dt.date(2026, 1, d) for d in (1, 2, 2, 3)])
    config = write_job(tmp_path, parquet(tmp_path, dates), domain=["items = { range = [1, 10] }",
                                                                   "attributes = [1, 2, 3]"])
    refused_before_the_charge(tmp_path, capsys, [str(config)], "cannot be read as this job reads them")


def test_entropy_visits_of_a_type_no_count_has_cost_nothing(spark, tmp_path, capsys):
    frame = pd.DataFrame({"user_id": [1, 2], "location": [1, 2], "visits": [[1], [2]]})
    source = [*parquet(tmp_path, frame), "[source.columns]", 'item_id = "location"']
    config = write_job(tmp_path, source, ['name = "entropy"', 'variant = "limit"', "locations_per_user = 2",
                                          "visits_per_location = 2", 'location_choice = "random"'])
    refused_before_the_charge(tmp_path, capsys, [str(config)], "cannot be read as this job reads them")


def test_entropy_by_first_visit_without_a_time_column_costs_nothing(spark, tmp_path, capsys):
    (tmp_path / "checkins.txt").write_text("1\t2\n1\t3\n2\t2\n")
    source = ['format = "checkins"', f'path = "{tmp_path / "checkins.txt"}"']
    config = write_job(tmp_path, source, ['name = "entropy"', 'variant = "limit"', "locations_per_user = 2",
                                          "visits_per_location = 2"])
    refused_before_the_charge(tmp_path, capsys, [str(config)], "the source has no time column")


def test_frapp_without_an_attribute_column_costs_nothing(spark, tmp_path, capsys):
    source = parquet(tmp_path, pd.DataFrame({"sex": ["F", "M"], "age": [30, 40]}))
    config = write_job(tmp_path, source, ['name = "frapp"'],
                       ["records = [{ column = 'sex', values = ['F', 'M'] }, { column = 'race', values = ['a'] }]"],
                       privacy="gamma = 19")
    refused_before_the_charge(tmp_path, capsys, [str(config)], "source has no column race")


def test_the_schema_check_is_what_stops_the_run(spark, tmp_path, capsys, monkeypatch):
    """Without the check before the charge, the same misnamed column is found after it."""
    monkeypatch.setattr(runner, "check_source_schema", lambda cfg, spark, domains: None)
    source = [*parquet(tmp_path, GOOD), "[source.columns]", 'user_id = "userid"']
    assert main(["run", str(write_job(tmp_path, source))]) == 2
    assert [run["status"] for run in store_runs(tmp_path / "budget.json")] == ["failed"]


@pytest.mark.parametrize("call", [
    lambda df, budget: dp_spark.sra(df, item="item_id", items=range(1, 5), l=2, epsilon=1.0, budget=budget),
    lambda df, budget: dp_spark.dpsense(df, items=range(1, 5), epsilon=1.0, budget=budget),
    lambda df, budget: dp_spark.sra(df, items="private", delta=1e-6, l=2, epsilon=1.0, budget=budget),
    lambda df, budget: dp_spark.location_entropy(df, location="item_id", locations=range(1, 5), epsilon=1.0,
                                                 location_choice="random", budget=budget),
], ids=["sra", "dpsense", "private_items", "entropy"])
def test_an_api_column_of_a_type_no_id_has_charges_no_budget(spark, call):
    frame = spark.createDataFrame(pd.DataFrame({"user_id": [1, 2], "item_id": [[1], [2]]}))  # arrays: no id
    budget = dp_spark.DatasetBudget(epsilon=5)
    with pytest.raises(DpSparkError, match="column item_id has type array<bigint>"):
        call(frame, budget)
    assert budget.spent == 0 and budget.charges == []


def test_an_api_frapp_without_an_attribute_column_charges_no_budget(spark):
    frame = spark.createDataFrame(pd.DataFrame({"sex": ["F", "M"]}))
    budget = dp_spark.DatasetBudget(epsilon=5)
    with pytest.raises(DpSparkError, match="column 'race' .* not found"):
        dp_spark.frapp(frame, attributes=[{"column": "sex", "values": ["F", "M"]}, {"column": "race", "values": ["a"]}],
                       gamma=19, budget=budget)
    assert budget.charges == []


def test_an_api_schema_error_leaves_the_persistent_store_without_a_run(spark, tmp_path):
    frame = spark.createDataFrame(pd.DataFrame({"user_id": [1, 2], "item_id": [[1], [2]]}))
    store = tmp_path / "budget.json"
    budget = dp_spark.DatasetBudget.from_store(str(store), "toy", epsilon_cap=5)
    with pytest.raises(DpSparkError, match="column item_id has type array<bigint>"):
        dp_spark.sra(frame, items=range(1, 5), l=2, epsilon=1.0, budget=budget)
    assert store_runs(store) == [] and budget.spent == 0
