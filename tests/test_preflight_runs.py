"""Whole runs that pre-flight stops before the charge, and runtime failures after it that end
on one line. Jobs run in-process through ``cli.main`` with the suite's
SparkSession, against a budget store: every refusal here leaves the store without a run and
the output unwritten; a failure after the charge leaves the run "failed" and the output unwritten.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.io import release_store
from tests.test_preflight import FULL_DISK_TRACE, Py4JJavaError

RECORDS = pd.DataFrame({"user_id": [1, 1, 2, 3, 3, 3, 4], "item_id": [1, 2, 2, 3, 4, 5, 5],
                        "attr": ["a", "b", "a", "b", "a", "a", "b"]})
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def job(tmp_path: Path, output=None, store=None, source=None, items="{ range = [1, 10] }") -> Path:
    if source is None:
        source = tmp_path / "records.parquet"
        RECORDS.to_parquet(source)
    lines = [f'output = "{output or tmp_path / "out"}"', "[source]", 'format = "parquet"', f'path = "{source}"',
             "[domain]", f"items = {items}", 'attributes = ["a", "b"]',
             "[privacy]", "epsilon = 1", "[algorithm]", 'name = "sra"', "l = 2",
             "[budget_store]", f'path = "{store or tmp_path / "budget.json"}"', 'dataset = "toy"', "epsilon_cap = 5",
             # Seven records are too few for the default noise-only refusal (docs/privacy.md): released anyway.
             "[guards]", "refuse_noise_only = false"]
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def store_runs(path: Path) -> list[dict]:
    return json.loads(path.read_text())["runs"] if path.exists() else []


def refused_before_the_charge(tmp_path, capsys, args, message) -> list[str]:
    """Run; expect exit 2 with ``message`` on the last line, no run in the store, no output."""
    assert main(["run", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dp-spark: error: ") and message in err[-1], err[-1]
    assert not any("\tat " in line or "Traceback" in line for line in err)
    assert store_runs(tmp_path / "budget.json") == []  # nothing charged
    assert not (tmp_path / "out").exists()  # nothing written
    return err


def test_an_output_under_a_file_is_refused_before_the_charge(spark, tmp_path, capsys):
    (tmp_path / "a_file").write_text("x")
    config = job(tmp_path, output=tmp_path / "a_file" / "out")
    # The output's lock, taken first, finds it: its file cannot be made under a file.
    refused_before_the_charge(tmp_path, capsys, [str(config)], f"{tmp_path}/a_file exists and is a file, not a "
                                                               "directory: the output cannot be written there")
    assert (tmp_path / "a_file").read_text() == "x"


@pytest.mark.skipif(AS_ROOT, reason="chmod does not stop root from writing")
def test_a_read_only_output_directory_is_refused_before_the_charge(spark, tmp_path, capsys):
    parent = tmp_path / "read_only"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        refused_before_the_charge(tmp_path, capsys, [str(job(tmp_path, output=parent / "out"))],
                                  f"output '{parent}/out' is not writable: cannot create a file in '{parent}': "
                                  "Permission denied")
    finally:
        parent.chmod(0o755)


def _sysfs_refuses_files() -> bool:
    """Whether /sys exists and refuses new files even to root (Linux's sysfs does)."""
    try:
        with open(f"/sys/dp-spark-write-check-{os.getpid()}", "w"):
            pass
    except OSError:
        return os.path.isdir("/sys")
    return False


@pytest.mark.skipif(not _sysfs_refuses_files(), reason="needs a directory that refuses files to everyone (/sys)")
def test_an_output_nobody_may_write_is_refused_before_the_charge_even_as_root(spark, tmp_path, capsys):
    # The chmod tests above cannot run as root (CI does): sysfs refuses new files to root too.
    err = refused_before_the_charge(tmp_path, capsys, [str(job(tmp_path, output="/sys/dp-spark-out"))],
                                    "Permission denied")
    assert "/sys" in err[-1]


def test_an_unreachable_budget_store_is_refused_before_the_charge(spark, tmp_path, capsys):
    (tmp_path / "a_file").write_text("x")
    config = job(tmp_path, store=tmp_path / "a_file" / "budget.json")
    refused_before_the_charge(tmp_path, capsys, [str(config)], f"budget store '{tmp_path}/a_file/budget.json' is "
                                                               f"unreachable: '{tmp_path}/a_file' is not a directory")


@pytest.mark.parametrize("l", ["100001", "1000000000000"])
def test_l_past_the_engine_is_refused_at_load(spark, tmp_path, capsys, l):
    refused_before_the_charge(tmp_path, capsys, [str(job(tmp_path)), "--set", f"algorithm.l={l}"],
                              "is above the supported maximum 100,000: Spark's min_by")


def test_a_missing_source_path_is_one_line_before_the_charge(spark, tmp_path, capsys):
    err = refused_before_the_charge(tmp_path, capsys, [str(job(tmp_path, source=tmp_path / "nope.parquet"))],
                                    f"source path '{tmp_path}/nope.parquet' does not exist")
    assert len(err) <= 3, err


def test_a_latin1_domain_file_runs(spark, tmp_path, capsys):
    titles = tmp_path / "movie_titles.txt"
    titles.write_bytes("\n".join(f"{i},2001,Amélie {i}" for i in range(1, 11)).encode("latin-1"))
    assert main(["run", str(job(tmp_path, items=f'{{ file = "{titles}" }}'))]) == 0
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    assert "(not UTF-8: read as cp1252)" in json.dumps(report)
    assert [r["status"] for r in store_runs(tmp_path / "budget.json")] == ["released"]


def _full_disk(*_args, **_kwargs):
    raise Py4JJavaError(FULL_DISK_TRACE)


def test_a_failure_after_the_charge_ends_on_one_line_naming_its_root_cause(spark, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(release_store, "write_release", _full_disk)
    assert main(["run", str(job(tmp_path))]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("dp-spark: runtime error: IOException: No space left on device "
                       "(--debug prints the traceback)")
    assert not any("Traceback" in line or "\tat " in line or "Caused by" in line for line in err)
    assert [r["status"] for r in store_runs(tmp_path / "budget.json")] == ["failed"]  # charged, then failed
    assert not (tmp_path / "out").exists()


def test_debug_prints_the_traceback_and_the_json_end_event_carries_it(spark, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(release_store, "write_release", _full_disk)
    assert main(["run", str(job(tmp_path)), "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "Caused by: java.io.IOException" in err
    assert err.strip().splitlines()[-1] == "dp-spark: runtime error: IOException: No space left on device"

    assert main(["run", str(job(tmp_path)), "--log-format", "json"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    events = [json.loads(line) for line in lines]  # JSON only: the error is in the end event, last
    end = events[-1]
    assert end["event"] == "end" and end["exit_code"] == 1 and end["error"] == "IOException: No space left on device"
    assert "Traceback (most recent call last)" in end["traceback"] and "No space left" in end["traceback"]


def _fail_write_with(monkeypatch, query) -> None:
    """Make the release's write run a Spark query that fails (after the charge, before a file)."""
    monkeypatch.setattr(release_store, "write_release", lambda spark_session, *_a, **_k: query(spark_session))


def test_a_real_spark_error_after_the_charge_is_one_line(spark, tmp_path, capfd, monkeypatch):
    # A DataFrame error, which PySpark also logs with its plan and Java stack unless told not to.
    _fail_write_with(monkeypatch, lambda session: session.range(1).select("no_such_column_here").collect())
    assert main(["run", str(job(tmp_path))]) == 1
    err = capfd.readouterr().err.strip().splitlines()  # the process's stderr: JVM and PySpark loggers too
    assert err[-1].startswith("dp-spark: runtime error: AnalysisException: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A "
                              "column, variable, or function parameter with name `no_such_column_here` cannot be "
                              "resolved"), err[-1]
    assert err[-1].endswith("(--debug prints the traceback)")
    others = [line for line in err[:-1] if not line.startswith("[dp-spark ")]  # not the progress lines
    assert others == [], others  # no Java frames, no PySpark error log, no traceback
    assert [r["status"] for r in store_runs(tmp_path / "budget.json")] == ["failed"]
    assert not (tmp_path / "out").exists()


def test_a_spark_error_reading_a_missing_path_after_the_charge_is_one_line(spark, tmp_path, capsys, monkeypatch):
    missing = tmp_path / "vanished"  # e.g. a source removed between the pre-flight and the read
    _fail_write_with(monkeypatch, lambda session: session.read.parquet(str(missing)).collect())
    assert main(["run", str(job(tmp_path))]) == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("[dp-spark ")]
    # What dp-spark prints; Spark's own log4j WARN for the path goes to the JVM's stderr (docs/scheduled_runs.md).
    assert err == [f"dp-spark: runtime error: AnalysisException: [PATH_NOT_FOUND] Path does not exist: file:{missing}. "
                   "SQLSTATE: 42K03 (--debug prints the traceback)"]


def test_an_unreadable_source_ends_in_one_line_naming_the_root_cause(spark, tmp_path, capsys):
    """A text file named .parquet: Spark's error class and the file, not Py4J's "An error occurred
    while calling o39.parquet." over a Java stack."""
    source = tmp_path / "records.parquet"
    source.write_text("user_id,item_id\n1,2\n")
    err = refused_before_the_charge(tmp_path, capsys, [str(job(tmp_path, source=source))],
                                    f"cannot read source '{source}': [FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER]")
    assert str(source) in err[-1].partition("CANNOT_READ_FILE_FOOTER]")[2]
    assert not any("An error occurred while calling" in line or "SQLSTATE" in line for line in err)
