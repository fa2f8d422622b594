"""SIGTERM and SIGINT during ``dp-spark run``: the run is marked failed in the budget store, its
staging directory removed, the previous release left intact, the JSON log ends with ``end``, and
the exit code is 128 + the signal's number.

The subprocess tests send the signal to a real ``dp-spark run`` (the driver process, as a
scheduler does); one pauses the job after it has staged its first table, so that the signal lands
mid-write every time, and runs a second job on the same output meanwhile.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dp_spark.cli import main
from dp_spark.cli.run import signals_interrupt
from dp_spark.errors import Interrupted
from dp_spark.io import release_store
from tests.test_crash_safety import copy_of_release, first_release, with_timeout_kill
from tests.test_scheduled_runs import store_runs

DATE = "2026-11-20"
ROOT = Path(__file__).resolve().parents[1]
# `dp-spark` with its write paused for good after the first table is staged (and a line saying so).
PAUSED_AFTER_FIRST_TABLE = """
import json, sys, time
from dp_spark.io import release_store
write_table = release_store._write_table
def write_then_pause(spark, frame, table):
    write_table(spark, frame, table)
    print(json.dumps({"event": "paused", "table": table.path}), file=sys.stderr, flush=True)
    time.sleep(600)
release_store._write_table = write_then_pause
from dp_spark.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def hidden_leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith("."))


@pytest.fixture(scope="module")
def template(spark, tmp_path_factory) -> Path:
    """One first release for this file, which each test copies instead of releasing again."""
    return first_release(tmp_path_factory.mktemp("first_release")).parent


def previous_release(template: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the file's first release (tests.test_crash_safety) in ``tmp_path``: its config and report."""
    config = copy_of_release(template, tmp_path)
    return config, (tmp_path / "out" / f"run_date={DATE}" / "privacy.json").read_text()


def start(config: Path, *python: str) -> subprocess.Popen:
    command = [sys.executable, *python, "run", str(config), "--run-date", DATE, "--force", "--log-format", "json",
               "--master", "local[1]"]
    return subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def events_until(process: subprocess.Popen, wanted) -> list[dict]:
    """The JSON lines of the process's log up to the first one ``wanted`` accepts (or its end)."""
    seen = []
    for line in process.stderr:
        if line.startswith("{"):
            seen.append(json.loads(line))
            if wanted(seen[-1]) or seen[-1]["event"] == "end":
                break
    return seen


def check_interrupted(tmp_path: Path, process: subprocess.Popen, signum: int, previous: str) -> list[dict]:
    """After the signal: exit code, last log lines, store, output. Returns the rest of the log."""
    rest = process.stderr.read().splitlines()
    with_timeout_kill(process)
    assert process.returncode == 128 + signum, rest[-5:]
    name = signal.Signals(signum).name
    end = json.loads(rest[-1])  # JSON mode: the end event is the last line, with no text after it
    assert end["error"] == f"stopped by {name} (signal {signum})"
    assert (end["event"], end["status"], end["exit_code"]) == ("end", "interrupted", 128 + signum)

    first, interrupted = store_runs(tmp_path)
    assert first["status"] == "released"
    assert interrupted["status"] == "failed" and name in interrupted["error"] and interrupted["forced"]
    out = tmp_path / "out"
    assert hidden_leftovers(out) == []  # no staging directory, no lock
    assert (out / f"run_date={DATE}" / "privacy.json").read_text() == previous
    return [json.loads(line) for line in rest if line.startswith("{")]


@pytest.mark.system
def test_sigterm_mid_write_cleans_up_and_a_concurrent_run_is_refused(spark, template, tmp_path, capsys):
    config, previous = previous_release(template, tmp_path)
    process = start(config, "-c", PAUSED_AFTER_FIRST_TABLE)
    try:
        seen = events_until(process, lambda e: e["event"] == "paused")
        assert seen[-1]["event"] == "paused", seen[-3:]
        staging = Path(seen[-1]["table"]).parent
        assert staging.name.startswith(f".run_date={DATE}.tmp-") and staging.is_dir()

        # Meanwhile a second run of the same output and date: refused before its charge.
        capsys.readouterr()
        assert main(["run", str(config), "--run-date", DATE, "--force"]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"another run is writing {staging.parent / f'run_date={DATE}'} (pid {process.pid} on host" in err
        assert [r["status"] for r in store_runs(tmp_path)] == ["released", "charged"]

        os.kill(process.pid, signal.SIGTERM)
        check_interrupted(tmp_path, process, signal.SIGTERM, previous)
    finally:
        with_timeout_kill(process)
    assert not staging.exists()
    assert main(["run", str(config), "--run-date", DATE, "--force"]) == 0  # the lock was released


@pytest.mark.system
@pytest.mark.parametrize("stage, signum", [("read", signal.SIGTERM), ("release", signal.SIGINT)])
def test_a_signal_at_a_stage_of_a_real_run(spark, template, tmp_path, stage, signum):
    """The plain command, signalled when its log says ``stage`` started (Spark may be mid-job). The
    write stage is the first test's, where the signal lands mid-write every time."""
    config, previous = previous_release(template, tmp_path)
    process = start(config, "-m", "dp_spark.cli")
    try:
        seen = events_until(process, lambda e: e.get("stage") == stage and e["status"] == "started")
        assert seen[-1].get("stage") == stage, seen[-3:]
        os.kill(process.pid, signum)
        rest = check_interrupted(tmp_path, process, signum, previous)
    finally:
        with_timeout_kill(process)
    assert [e["event"] for e in rest].count("end") == 1


def test_a_signal_in_process_ends_the_json_log_and_marks_the_run_failed(spark, template, tmp_path, capsys,
                                                                        monkeypatch):
    config, previous = previous_release(template, tmp_path)
    write_table = release_store._write_table

    def write_then_signal(spark, frame, table):
        write_table(spark, frame, table)
        os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode: mid-write

    monkeypatch.setattr(release_store, "_write_table", write_then_signal)
    capsys.readouterr()
    assert main(["run", str(config), "--run-date", DATE, "--force", "--log-format", "json"]) == 143
    err = capsys.readouterr().err.strip().splitlines()
    stages = [json.loads(line) for line in err]  # JSON only: no text line after the end event
    assert stages[-1]["error"] == "stopped by SIGTERM (signal 15)"
    assert [e for e in stages if e.get("status") == "failed"][0]["stage"] == "write"
    assert stages[-1]["event"] == "end" and stages[-1]["exit_code"] == 143
    [_, interrupted] = store_runs(tmp_path)
    assert interrupted["status"] == "failed" and interrupted["error"] == "Interrupted: stopped by SIGTERM (signal 15)"
    assert hidden_leftovers(tmp_path / "out") == []
    assert (tmp_path / "out" / f"run_date={DATE}" / "privacy.json").read_text() == previous
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the CLI put the handler back


@pytest.mark.unit
def test_only_the_first_signal_raises_and_the_handlers_are_restored():
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(Interrupted) as raised:
        with signals_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                pytest.fail("the signal did not raise")
            finally:
                os.kill(os.getpid(), signal.SIGTERM)  # during the clean-up: ignored
                cleaned_up = True
    assert cleaned_up and raised.value.signum == signal.SIGINT and raised.value.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is before and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


# A write whose two tasks sleep 3 s, stopped by a signal after 1 s; then, 4 s later (past the tasks'
# end had they gone on), what is left beside the output. In a process of its own: the signal cuts a
# call to the JVM short, which leaves that thread's Py4J connection out of step for good.
WRITE_STOPPED_MID_JOB = """
import json, signal, sys, time
from pathlib import Path
from pyspark.sql import functions as F
from dp_spark.errors import Interrupted
from dp_spark.io import release_store
from dp_spark.io.session import get_session

spark = get_session("local[2]", {"spark.ui.enabled": "false"})
slow = F.udf(lambda i: time.sleep(3) or int(i), "long")
table = spark.range(0, 2, 1, 2).select(slow("id").alias("x"))

def interrupt(signum, frame):
    raise Interrupted(signum)

signal.signal(signal.SIGALRM, interrupt)
signal.setitimer(signal.ITIMER_REAL, 1.0)
try:
    release_store.write_release(spark, sys.argv[1] + "/out", {"slow": table}, {"x": 1})
    print(json.dumps({"interrupted": False}))
except Interrupted:
    time.sleep(4)
    print(json.dumps({"interrupted": True, "left": sorted(p.name for p in Path(sys.argv[1]).iterdir())}))
"""


@pytest.mark.system
def test_a_write_stopped_mid_job_waits_for_its_tasks_and_leaves_no_staging(tmp_path):
    """The CI failure of 2026-11-26: a signal stops the driver's Python while Spark's write job goes
    on, and its tasks put files back into the staging directory after it was deleted. The write now
    cancels its jobs and waits for the tasks before it deletes (without that, this test fails)."""
    (tmp_path / "release").mkdir()
    done = subprocess.run([sys.executable, "-c", WRITE_STOPPED_MID_JOB, str(tmp_path / "release")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"interrupted": True, "left": []}
