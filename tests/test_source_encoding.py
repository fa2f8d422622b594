"""Text sources in another character set, and compressed check-in files: a Latin-1 CSV
read with source.encoding keeps every row; a gzipped check-in file is read like a plain one."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.errors import ConfigError
from dp_spark.io import checkins
from dp_spark.jobs.config import build_config

DRINKS = ["Café", "Thé", "Café", "Crème", "Thé", "Café"]


def latin1_job(tmp_path, *extra: str) -> str:
    csv = tmp_path / "orders.csv"
    frame = pd.DataFrame({"user_id": [1, 1, 2, 3, 3, 4], "item_id": [1, 2, 2, 3, 4, 1], "attr": DRINKS})
    csv.write_bytes(frame.to_csv(index=False).encode("latin-1"))
    config = tmp_path / "job.toml"
    config.write_text("\n".join([
        f'output = "{tmp_path / "out"}"', "seed = 2", "[source]", 'format = "csv"', f'path = "{csv}"', *extra,
        "[domain]", "items = { range = [1, 5] }", 'attributes = ["Café", "Thé", "Crème"]',
        "[privacy]", "epsilon = 1", "[algorithm]", 'name = "sra"', "l = 5"]) + "\n", encoding="utf-8")
    return str(config)


def outside(tmp_path, config: str) -> int:
    assert main(["run", config, "--diagnostics", str(tmp_path / "diagnostics.json")]) == 0
    return json.loads((tmp_path / "diagnostics.json").read_text())["rows_outside_attribute_domain"]


def test_a_latin1_csv_read_with_its_encoding_keeps_every_row(spark, tmp_path):
    assert outside(tmp_path, latin1_job(tmp_path, 'encoding = "latin-1"')) == 0
    edges = pd.read_parquet(tmp_path / "out" / "edge_counts")
    assert sorted(edges["attr"].unique()) == ["Café", "Crème", "Thé"]


def test_read_as_utf8_the_same_file_loses_the_accented_rows(spark, tmp_path):
    # The negative control: what happened without source.encoding (every value with an accent).
    assert outside(tmp_path, latin1_job(tmp_path)) == len(DRINKS)


def test_a_gzipped_check_in_file_is_read_like_a_plain_one(spark, tmp_path):
    lines = "1\t3\t2010-10-19T23:55:27Z\n1\t2\t2010-10-18T22:17:43Z\n2\t3\t2010-10-17T23:42:03Z\n"
    path = tmp_path / "checkins.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(lines)
    source = build_config({"output": "o", "source": {"format": "checkins", "path": str(path)},
                           "domain": {"items": {"range": [1, 9]}}, "privacy": {"epsilon": 1},
                           "algorithm": {"name": "entropy"}}).source
    rows = checkins.read_checkins(spark, source).orderBy("time").toPandas()
    assert rows[["user_id", "item_id"]].astype(int).values.tolist() == [[2, 3], [1, 2], [1, 3]]


@pytest.mark.unit
@pytest.mark.parametrize("source, message", [
    ({"format": "csv", "path": "x.csv", "encoding": "latin-9000"}, "unknown source.encoding 'latin-9000'"),
    ({"format": "parquet", "path": "x", "encoding": "latin-1"}, "source.encoding applies to text sources"),
    ({"format": "csv", "path": "x.csv", "encoding": 1}, "source.encoding must be a character set name"),
    ({"format": "csv", "path": "x.csv", "encoding": "cp1252"}, "Spark cannot read source.encoding 'cp1252'.*iconv"),
])
def test_a_bad_encoding_is_a_config_error(source, message):
    with pytest.raises(ConfigError, match=message):
        build_config({"output": "o", "source": source, "domain": {"items": {"range": [1, 9]}},
                      "privacy": {"epsilon": 1}, "algorithm": {"name": "sra", "l": 2}})


@pytest.mark.unit
def test_the_encoding_is_named_as_python_and_java_both_know_it():
    cfg = build_config({"output": "o", "source": {"format": "csv", "path": "x.csv", "encoding": "Latin-1"},
                        "domain": {"items": {"range": [1, 9]}}, "privacy": {"epsilon": 1},
                        "algorithm": {"name": "sra", "l": 2}})
    assert cfg.source.encoding == "iso-8859-1"
