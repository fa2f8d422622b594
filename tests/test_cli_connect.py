"""``dp-spark run`` on a Spark Connect server: ``SPARK_REMOTE`` and ``--remote`` each
run the job on the server and write the same seeded release as a
classic run; ``output_table`` works there, and a re-run of a released date does nothing.

The server is started as docs/scheduled_runs.md says (PySpark's ``sbin/start-connect-server.sh``),
on a free port, and stopped at the end. Its working directory is not the job's, so a relative
source path must reach it made absolute."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from dp_spark.cli import main
from tests.conftest import ROOT, SHARED_DATA
from tests.test_connect import released

pytestmark = pytest.mark.system

SEED = 7


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``sc://localhost:PORT`` of a Connect server started by PySpark's own script."""
    where = tmp_path_factory.mktemp("connect-server")
    port = free_port()
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOG_DIR": str(where / "logs"), "SPARK_PID_DIR": str(where), "SPARK_IDENT_STRING": f"test{port}"}
    env.pop("SPARK_REMOTE", None)
    script = spark_home() / "sbin"
    subprocess.run([str(script / "start-connect-server.sh"), "--master", "local[2]",
                    "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false",
                    "--conf", "spark.sql.shuffle.partitions=4"],
                   cwd=where, env=env, check=True, capture_output=True, timeout=120)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(1)
        else:
            logs = "\n".join(p.read_text()[-2000:] for p in (where / "logs").glob("*"))
            pytest.fail(f"the Connect server did not start:\n{logs}")
        yield f"sc://localhost:{port}"
    finally:
        subprocess.run([str(script / "stop-connect-server.sh")], cwd=where, env=env, capture_output=True, timeout=120)


def dp_spark(args: list[str], cwd: Path, remote: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_GATEWAY_PORT")}
    if remote is not None:
        env["SPARK_REMOTE"] = remote
    return subprocess.run([sys.executable, "-m", "dp_spark.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> tuple[Path, list[str]]:
    """SRA with edges on MovieLens 100K, its source given by a path relative to the job's directory."""
    if not (SHARED_DATA / "ml-100k").exists():
        pytest.skip(f"{SHARED_DATA / 'ml-100k'} is not present")
    cwd = tmp_path_factory.mktemp("job")
    (cwd / "ml-100k").symlink_to(SHARED_DATA / "ml-100k")
    return cwd, [str(ROOT / "conf" / "movielens_sra.toml"), "--set", "source.format=movielens-100k",
                 "--set", "source.path=ml-100k", "--set", "domain.items={ range = [1, 1682] }",
                 "--set", "algorithm.l=20", "--set", f"seed={SEED}"]


@pytest.fixture(scope="module")
def classic(job, spark) -> tuple[dict, dict]:
    """The job's release on a classic session: the suite's own, in this process (a process of its
    own would start one more JVM; the CLI's child processes run on Connect below)."""
    cwd, args = job
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        assert main(["run", *args, "--set", "output=classic"]) == 0
    return released(cwd / "classic")


@pytest.mark.parametrize("how", ["SPARK_REMOTE", "--remote"])  # --master sc://: tests/test_connect_url.py
def test_a_job_on_spark_connect_releases_what_a_classic_run_does(server, job, classic, how):
    cwd, args = job
    out = f"connect-{how.strip('-').lower()}"
    flags = {"SPARK_REMOTE": [], "--remote": ["--remote", server]}[how]
    done = dp_spark(["run", *args, "--set", f"output={out}", *flags], cwd,
                    remote=server if how == "SPARK_REMOTE" else None)
    assert done.returncode == 0, done.stderr[-3000:]
    report, tables = released(cwd / out)
    expected_report, expected_tables = classic
    assert report == expected_report
    assert tables.keys() == expected_tables.keys()
    for name, table in tables.items():
        pd.testing.assert_frame_equal(table, expected_tables[name])


def test_output_table_on_spark_connect_and_its_rerun(server, job):
    cwd, args = job
    run = ["run", *args, "--set", "output=tables", "--set", "output_table=default.ml_connect", "--run-date",
           "2026-11-01"]
    first = dp_spark(run, cwd, remote=server)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "table default.ml_connect_item_counts, partition run_date=2026-11-01" in first.stderr
    again = dp_spark(run, cwd, remote=server)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already exists" in again.stdout and "no budget spent" in again.stdout
    count = subprocess.run(
        [sys.executable, "-c", "from pyspark.sql import SparkSession; "
         f"s = SparkSession.builder.remote({server!r}).getOrCreate(); "
         "print(s.table('default.ml_connect_item_counts').where(\"run_date = '2026-11-01'\").count())"],
        capture_output=True, text=True, timeout=300, env={k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"})
    assert count.returncode == 0, count.stderr[-2000:]
    assert int(count.stdout.strip().splitlines()[-1]) == 1682


def test_a_master_and_a_connect_server_together_are_refused_before_spark(job, tmp_path):
    cwd, args = job
    done = dp_spark(["run", *args, "--set", f"output={tmp_path / 'x'}", "--master", "local[2]"], cwd,
                    remote="sc://localhost:1")
    assert done.returncode == 2
    assert "both a Spark master (local[2]) and a Spark Connect server (sc://localhost:1" in done.stderr
    assert not (tmp_path / "x").exists()
