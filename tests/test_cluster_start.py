"""scripts/cluster.sh start fails fast and leaves nothing running when it cannot bring the
cluster up (a busy master port, a worker that dies)."""

import os
import shutil
import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.system


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tmp_path, port: int, **settings) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "CLUSTER_PORT": str(port), "CLUSTER_UI_PORT": str(free_port()),
           "CLUSTER_DIR": str(tmp_path / "cluster"), **settings}
    return subprocess.run([str(ROOT / "scripts" / "cluster.sh"), "start"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)


def spark_daemons(tmp_path, port: int) -> list[str]:
    """Command lines of Spark masters on ``port`` and of workers of this test's cluster."""
    lines = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout.splitlines()
    return [line for line in lines if ("deploy.master.Master" in line and f"--port {port}" in line)
            or ("deploy.worker.Worker" in line and str(tmp_path) in line)]


def test_a_busy_master_port_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = start(tmp_path, port)
    assert done.returncode == 1
    assert f"dp-spark: error: port {port} on 127.0.0.1 is in use" in done.stderr
    assert not list((tmp_path / "cluster").glob("*.pid")) and not list((tmp_path / "cluster").glob("*.log"))
    assert spark_daemons(tmp_path, port) == []


@pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="needs Java")
def test_a_failed_start_stops_the_master_it_launched(tmp_path):
    port = free_port()
    done = start(tmp_path, port, CLUSTER_WORKERS="1", CLUSTER_WORKER_MEMORY="lots")  # the worker cannot start
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the worker1 exited before it was up" in done.stderr
    assert "stopped the 2 process(es) this start had launched" in done.stderr
    assert "Starting Spark master" in (tmp_path / "cluster" / "master.log").read_text()  # it had been up
    assert not list((tmp_path / "cluster").glob("*.pid"))
    assert spark_daemons(tmp_path, port) == []
