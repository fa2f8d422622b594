"""Catalog tables: ``source.format = "table"`` and ``output_table``.

The spark-tier tests use the suite's session, whose catalog is the in-memory one. The system test
uses what a site runs: a Hive catalog on an embedded Derby metastore (both ship with PySpark) in a
temporary directory, a real ``saveAsTable`` table written by another process, and the job run as
``python -m dp_spark.cli run`` (killed mid-write) and in Hive sessions of other processes (a Hive
session cannot join the suite's). Each process starts Spark, so they are kept few (three): every
write the test reads back is read by a later process, and the kill has a process of its own.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.errors import ConfigError, PreflightError
from dp_spark.io import catalog
from dp_spark.io.session import check_catalog
from dp_spark.jobs.config import load_config
from tests.conftest import SPARK_DEFAULT_SQL_SETTINGS, spark_defaults_env
from tests.test_scheduled_runs import RECORDS, job, store_runs

ROOT = Path(__file__).resolve().parents[1]
DATE = "2026-11-20"


# Spark's defaults for these tests, not the suite's interpreted expressions: with those, a second
# write to a partitioned catalog table fails in Spark (IllegalArgumentException: argument type
# mismatch), and the product runs on Spark's defaults.
pytestmark = pytest.mark.sql_settings(SPARK_DEFAULT_SQL_SETTINGS)


def with_table_output(config: Path, output_table: str, source_table: str | None = None) -> Path:
    """``config`` writing also to ``output_table`` (and reading ``source_table``, if given)."""
    text = f'output_table = "{output_table}"\n' + config.read_text()
    if source_table is not None:
        start, end = text.index("[source]"), text.index("[domain]")
        text = text[:start] + f'[source]\nformat = "table"\ntable = "{source_table}"\n' + text[end:]
    config.write_text(text)
    return config


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# --- config ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["stats.movielens", "movielens", "_a1.b_2"])
def test_output_table_names_are_accepted(value):
    assert catalog.check_output_table(value) == value


@pytest.mark.parametrize("value", ["a.b.c", "stats.", "1x", "x;DROP TABLE y", "a b", 3, ""])
def test_bad_output_table_names_are_refused(value):
    with pytest.raises(ConfigError, match="output_table must be a table name"):
        catalog.check_output_table(value)


def test_the_config_takes_output_table_at_the_top_level(tmp_path):
    assert load_config(with_table_output(job(tmp_path), "stats.ml")).output_table == "stats.ml"
    assert load_config(job(tmp_path)).output_table is None
    with pytest.raises(ConfigError, match="output_table must be a table name"):
        load_config(job(tmp_path), ["output_table=stats.ml.x"])


def test_table_names_are_the_output_table_and_the_release_table():
    assert catalog.table_name("stats.ml", "item_counts") == "`stats`.`ml_item_counts`"
    assert catalog.table_name("ml", "edge_counts") == "`ml_edge_counts`"


# --- the in-memory catalog (the suite's session) ------------------------------------------------

def test_a_missing_source_table_is_refused_before_the_charge_naming_the_catalog(spark, tmp_path, capsys):
    config = with_table_output(job(tmp_path), unique("ml"), source_table="nowhere.ratings")
    assert main(["run", str(config), "--run-date", DATE]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "table 'nowhere.ratings' not found in the session's in-memory catalog" in error
    assert 'spark.sql.catalogImplementation = "hive"' in error
    assert not (tmp_path / "budget.json").exists() and not (tmp_path / "out").exists()


def test_a_session_with_another_catalog_is_refused(spark):
    with pytest.raises(PreflightError, match="already running uses 'in-memory'"):
        check_catalog(spark, {"spark.sql.catalogImplementation": "hive"})
    check_catalog(spark, {"spark.sql.catalogImplementation": "in-memory"})
    check_catalog(spark, {})


def test_view_in_partitioned_tables_out_in_memory(spark, tmp_path, capsys):
    view, name = unique("ratings"), unique("ml")
    spark.createDataFrame(RECORDS).createOrReplaceTempView(view)
    config = with_table_output(job(tmp_path), name, source_table=view)
    for date in (DATE, "2026-11-21"):
        assert main(["run", str(config), "--run-date", date]) == 0
    table = spark.table(f"{name}_item_counts")
    assert [f.name for f in table.schema.fields][-1] == "run_date"
    for date in (DATE, "2026-11-21"):
        released = pd.read_parquet(tmp_path / "out" / f"run_date={date}" / "item_counts")
        shown = table.where(f"run_date = '{date}'").drop("run_date").toPandas()
        pd.testing.assert_frame_equal(shown.sort_values("item_id").reset_index(drop=True),
                                      released.sort_values("item_id").reset_index(drop=True), check_dtype=False)
    assert spark.table(f"{name}_edge_counts").select("run_date").distinct().count() == 2
    assert catalog.OWNER_PROPERTY in catalog._properties(spark, f"`{name}_item_counts`")
    # privacy.json stays beside the partition's files; the tables' own locations hold no data.
    assert (tmp_path / "out" / f"run_date={DATE}" / "privacy.json").exists()
    assert not any((tmp_path / "out" / "_tables").rglob("*.parquet"))


def test_an_unregistered_release_is_registered_by_the_no_op_rerun(spark, tmp_path, capsys):
    """What a run killed after its release was moved into place, before registering, leaves."""
    name = unique("ml")
    config = with_table_output(job(tmp_path), name)
    assert main(["run", str(config), "--run-date", DATE]) == 0
    spark.sql(f"ALTER TABLE {name}_item_counts DROP PARTITION (run_date = '{DATE}')")
    assert spark.table(f"{name}_item_counts").count() == 0
    assert main(["run", str(config), "--run-date", DATE]) == 0
    assert "already exists" in capsys.readouterr().out
    assert len(store_runs(tmp_path)) == 1  # nothing charged
    assert spark.table(f"{name}_item_counts").count() == 10


def test_a_table_that_shows_another_output_is_refused_before_the_charge(spark, tmp_path, capsys):
    name = unique("ml")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = with_table_output(job(tmp_path / "a"), name)
    assert main(["run", str(first), "--run-date", DATE]) == 0
    second = with_table_output(job(tmp_path / "b"), name)
    assert main(["run", str(second), "--run-date", DATE]) == 2
    assert "shows the releases in" in capsys.readouterr().err
    assert not (tmp_path / "b" / "budget.json").exists() and not (tmp_path / "b" / "out").exists()


def test_a_table_dp_spark_did_not_create_is_not_written_to(spark, tmp_path, capsys):
    name = unique("ml")
    spark.sql(f"CREATE TABLE {name}_item_counts (item_id INT) USING parquet LOCATION '{tmp_path / 'theirs'}'")
    config = with_table_output(job(tmp_path), name)
    assert main(["run", str(config), "--run-date", DATE]) == 2
    assert "was not created by dp-spark" in capsys.readouterr().err
    assert not (tmp_path / "budget.json").exists()  # found before the charge: the release's table names are planned
    assert not (tmp_path / "out").exists()
    assert spark.table(f"{name}_item_counts").columns == ["item_id"]


# --- a Hive metastore (embedded Derby), as a site runs it ----------------------------------------

def hive_settings(tmp_path: Path) -> dict[str, str]:
    return {"spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(tmp_path / "warehouse"),
            "spark.hadoop.javax.jdo.option.ConnectionURL":
                f"jdbc:derby:;databaseName={tmp_path / 'metastore_db'};create=true",
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}


def child_env() -> dict[str, str]:
    return spark_defaults_env({**os.environ, "PYTHONPATH": str(ROOT)})


def in_hive_session(tmp_path: Path, code: str) -> tuple[str, str]:
    """Run ``code`` in a new process with a Hive session ``spark``; its stdout and stderr."""
    preamble = ("from pyspark.sql import SparkSession\n"
                "builder = SparkSession.builder.master('local[1]')\n"
                f"for key, value in {hive_settings(tmp_path)!r}.items():\n"
                "    builder = builder.config(key, value)\n"
                "spark = builder.getOrCreate()\n")
    done = subprocess.run([sys.executable, "-c", preamble + code], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, done.stderr


def run_in_session(config: Path, *args: str) -> str:
    """Code that runs the job in the session at hand and prints its exit status."""
    return (f"from dp_spark.cli import main\n"
            f"print('EXIT', main(['run', {str(config)!r}, '--run-date', {DATE!r}, *{list(args)!r}]))\n")


def hive_job(tmp_path: Path) -> Path:
    config = with_table_output(job(tmp_path, cap=10), "stats.ml", source_table="src.ratings")
    settings = "".join(f'"{k}" = "{v}"\n' for k, v in hive_settings(tmp_path).items())
    config.write_text(config.read_text() + "[spark]\n" + settings)
    return config


def kill_mid_write(config: Path, staging_parent: Path) -> None:
    """Run ``--force`` and SIGKILL it (driver and JVM) once Spark has written a first table of the
    new release to staging, while the others are still to come."""
    command = [sys.executable, "-m", "dp_spark.cli", "run", str(config), "--run-date", DATE, "--force",
               "--master", "local[1]", "--log-format", "json"]
    process = subprocess.Popen(command, cwd=config.parent, env=child_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not list(staging_parent.glob(f".run_date={DATE}.tmp-*/*/_SUCCESS")):
            assert process.poll() is None, "the run ended before it was killed"
            assert time.monotonic() < deadline, "no staged table appeared"
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


READ_BACK = """
import json
rows = spark.table('stats.ml_item_counts').orderBy('item_id').toPandas()
parts = [r[0] for r in spark.sql('SHOW PARTITIONS stats.ml_item_counts').collect()]
print('READ ' + json.dumps({'rows': rows.to_dict('list'), 'partitions': parts,
                            'edges': spark.table('stats.ml_edge_counts').count()}))
"""


# Names Spark and Hadoop skip, beside the release: a staging directory or a lock.
HIDDEN = "import os; print('HIDDEN', [n for n in os.listdir({out!r}) if n.startswith('.')])\n"


def read_back(tmp_path: Path, before: str = "", then: str = "") -> tuple[dict, str, str]:
    """What ``spark.table`` shows in a new Hive session, after ``before`` (and the stdout and
    stderr of ``then``, run after)."""
    out, err = in_hive_session(tmp_path, before + READ_BACK + then)
    line = next(line for line in out.splitlines() if line.startswith("READ "))
    return json.loads(line.removeprefix("READ ")), out, err


def released(partition: Path) -> dict:
    """The item counts of the release in ``partition`` (a ``run_date=...`` directory), by item."""
    frame = pd.read_parquet(partition / "item_counts").sort_values("item_id")
    return {column: frame[column].tolist() for column in frame.columns}


# In the first process, between its two runs: the first release is copied aside (the forced run
# replaces it), for the test to compare the forced one with.
KEEP_FIRST = "import shutil; shutil.copytree({partition!r}, {first!r})\n"


@pytest.mark.system
def test_hive_round_trip_rerun_force_and_kill_mid_write(tmp_path):
    # Another job saves the source table into the metastore; then the job runs in that session, and
    # runs again with --force, which replaces the partition with new noise and is charged. (One
    # process, to save Spark starts: the table is read back from the metastore by a new process
    # below, after the kill; the first release's files are kept aside to compare the forced one with.)
    config = hive_job(tmp_path)
    partition, first = tmp_path / "out" / f"run_date={DATE}", tmp_path / "first"
    out, err = in_hive_session(tmp_path, "import pandas as pd\n"
                                         "spark.sql('CREATE DATABASE src'); spark.sql('CREATE DATABASE stats')\n"
                                         f"spark.createDataFrame(pd.DataFrame({RECORDS.to_dict('list')!r}))"
                                         ".write.saveAsTable('src.ratings')\n" + run_in_session(config) +
                                         KEEP_FIRST.format(partition=str(partition), first=str(first)) +
                                         run_in_session(config, "--force"))
    assert out.count("EXIT 0") == 2, err[-3000:]
    assert err.count("table stats.ml_item_counts, partition run_date=2026-11-20") == 2
    assert "spends epsilon 1 again" in err
    before, after = released(first), released(partition)
    assert after != before  # new noise
    assert json.loads((first / "privacy.json").read_text())["source"]["location"] == "src.ratings"
    report = (partition / "privacy.json").read_text()
    assert json.loads(report)["source"]["location"] == "src.ratings" and json.loads(report)["run"]["forced"]

    # Killed while a forced re-run, `python -m dp_spark.cli run` in a process of its own, writes:
    # the previous partition is intact, in files and table.
    kill_mid_write(config, tmp_path / "out")
    assert list((tmp_path / "out").glob(f".run_date={DATE}.tmp-*"))  # it was cut short while staging
    assert (partition / "privacy.json").read_text() == report
    # Read back in a new session: the table shows the forced release, whose files the kill left in
    # place. That session then runs the date again: the run recovers (staging removed) and, the
    # date's release existing, is a no-op.
    shown, out, err = read_back(tmp_path, then=run_in_session(config) + HIDDEN.format(out=str(tmp_path / "out")))
    assert shown["rows"] == {**after, "run_date": [DATE] * 10} and shown["partitions"] == [f"run_date={DATE}"]
    assert shown["edges"] == len(pd.read_parquet(partition / "edge_counts"))
    assert out.count("EXIT 0") == 1 and "already exists" in out
    # The no-op registers the release again (idempotent), in a session that did not create the
    # tables: the statements a forced run in a later process sends, run against the metastore.
    assert "table stats.ml_item_counts, partition run_date=2026-11-20" in err
    assert "HIDDEN []" in out  # no staging directory or lock left after the recovery
    assert (partition / "privacy.json").read_text() == report  # the no-op drew nothing
    runs = store_runs(tmp_path)
    # The forced run is released; the killed one (forced too) stays charged; the no-op adds nothing.
    assert [r["status"] for r in runs] == ["released", "released", "charged"]
    assert not runs[0]["forced"] and runs[1]["forced"] and runs[2]["forced"]
