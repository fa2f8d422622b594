"""Text sources in another character set, and compressed check-in files: a Latin-1 CSV
read with source.encoding keeps every row; read without it, every row misses the domain, and the
run is refused as noise only (exit 5, no charge returned) unless the operator turns that off, while
`dp-spark check` says why; a gzipped check-in file is read like a plain one."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.errors import ConfigError
from dp_spark.io import checkins
from dp_spark.jobs.config import build_config

DRINKS = ["Café", "Thé", "Crème"]
USERS = 600  # two orders each: enough that a correct release is told from noise (docs/privacy.md)


def latin1_job(tmp_path, *extra: str) -> str:
    csv = tmp_path / "orders.csv"
    users = [u for u in range(1, USERS + 1) for _ in range(2)]
    frame = pd.DataFrame({"user_id": users, "item_id": [1 + (u + k) % 5 for k, u in enumerate(users)],
                          "attr": [DRINKS[(u + k) % 3] for k, u in enumerate(users)]})
    csv.write_bytes(frame.to_csv(index=False).encode("latin-1"))
    config = tmp_path / "job.toml"
    config.write_text("\n".join([
        f'output = "{tmp_path / "out"}"', "seed = 2", "[source]", 'format = "csv"', f'path = "{csv}"', *extra,
        "[domain]", "items = { range = [1, 5] }", 'attributes = ["Café", "Thé", "Crème"]',
        "[privacy]", "epsilon = 1", "[algorithm]", 'name = "sra"', "l = 5"]) + "\n", encoding="utf-8")
    return str(config)


def outside(tmp_path, config: str, *overrides: str) -> int:
    sets = [a for o in overrides for a in ("--set", o)]
    assert main(["run", config, "--diagnostics", str(tmp_path / "diagnostics.json"), *sets]) == 0
    return json.loads((tmp_path / "diagnostics.json").read_text())["rows_outside_attribute_domain"]


def test_a_latin1_csv_read_with_its_encoding_keeps_every_row(spark, tmp_path):
    assert outside(tmp_path, latin1_job(tmp_path, 'encoding = "latin-1"')) == 0
    edges = pd.read_parquet(tmp_path / "out" / "edge_counts")
    assert sorted(edges["attr"].unique()) == ["Café", "Crème", "Thé"]


def test_read_as_utf8_the_same_file_is_refused_as_noise_only(spark, tmp_path, capsys):
    """The night a CSV is read without its encoding: every row misses the domain. The release's own
    DP figures cannot be told from noise, so it is refused (exit 5, nothing written); the message
    quotes noisy figures only. With the check off (the negative control) it releases, and the
    diagnostics show every row outside the domain."""
    config = latin1_job(tmp_path)
    assert main(["run", config]) == 5
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said.startswith("dp-spark: refused: the release cannot be told from noise (records kept ")
    assert "dp-spark check" in said and str(2 * USERS) not in said
    assert not (tmp_path / "out").exists()
    assert outside(tmp_path, config, "guards.refuse_noise_only=false") == 2 * USERS


def test_check_tells_the_operator_why_without_charging_or_releasing(spark, tmp_path, capsys):
    config = latin1_job(tmp_path)
    assert main(["check", config]) == 0  # whatever it finds
    said = capsys.readouterr().out.splitlines()
    assert all(line.startswith("NOT PRIVATE: ") for line in said)
    assert f"NOT PRIVATE: rows read: {2 * USERS:,}; a run would keep 0 (0.0%)" in said
    assert f"NOT PRIVATE: dropped, attribute outside its domain: {2 * USERS:,} rows" in said
    assert any("attr: 100.0% of the values hold U+FFFD" in line and "source.encoding" in line for line in said)
    assert any("a run would release noise only" in line for line in said)
    assert not (tmp_path / "out").exists()
    # The negative control: read in its encoding, every row is kept and nothing is flagged.
    assert main(["check", latin1_job(tmp_path, 'encoding = "latin-1"')]) == 0
    said = capsys.readouterr().out.splitlines()
    assert f"NOT PRIVATE: rows read: {2 * USERS:,}; a run would keep {2 * USERS:,} (100.0%)" in said
    assert not any("U+FFFD" in line or "dropped" in line or "noise only" in line for line in said)


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
