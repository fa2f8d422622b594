"""One run per output and run date at a time (dp_spark/io/output_lock.py).

The busy case is driven deterministically: the test holds the lock as a running job would, then
starts the second run. A real concurrent run in another process is in tests/test_signals.py.
"""

import datetime as dt
import json
import os
import socket
import subprocess
import sys

import pytest
from pyarrow import fs as pafs

from dp_spark.cli import main
from dp_spark.errors import OutputBusy, PreflightError
from dp_spark.io import output_lock, release_store
from tests.test_scheduled_runs import job, store_runs

DATE = "2026-11-20"


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def holder(pid: int, host: str | None = None, age: dt.timedelta = dt.timedelta(0)) -> dict:
    started = dt.datetime.now(dt.UTC) - age
    return {"host": host or socket.gethostname(), "pid": pid, "started_utc": started.isoformat(timespec="seconds"),
            "token": "theirs"}


# --- local paths: flock ----------------------------------------------------------------------------------

@pytest.mark.unit
def test_a_held_lock_refuses_a_second_holder_and_is_removed_after(tmp_path):
    target = str(tmp_path / "out" / f"run_date={DATE}")
    lock = tmp_path / "out" / f".run_date={DATE}.lock"
    with output_lock.held(target):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        with pytest.raises(OutputBusy, match=rf"another run is writing {target} \(pid {os.getpid()} on host "):
            with output_lock.held(target):
                pass
        assert lock.exists()  # the refused attempt did not remove the holder's lock
    assert not lock.exists()
    assert not (tmp_path / "out").exists()  # the directory made for the lock goes with it when empty
    with output_lock.held(target):  # free again
        pass


@pytest.mark.unit
def test_the_lock_is_released_when_the_block_raises(tmp_path):
    target = str(tmp_path / "out")
    with pytest.raises(RuntimeError):
        with output_lock.held(target):
            raise RuntimeError("boom")
    assert not (tmp_path / ".out.lock").exists()
    with output_lock.held(target):
        pass


@pytest.mark.unit
def test_the_lock_file_survives_recovery_and_the_partition_check(tmp_path):
    """release_store sweeps .NAME.tmp-*, .previous-*, .perturbed-* and allows hidden names in a
    partitioned output: the lock is neither swept nor refused."""
    out = tmp_path / "out"
    (out / f"run_date={DATE}").mkdir(parents=True)
    (out / f"run_date={DATE}" / "privacy.json").write_text("{}")
    (out / f".run_date={DATE}.tmp-abc").mkdir()
    target = str(out / f"run_date={DATE}")
    with output_lock.held(target):
        release_store.check_partitioned_output(None, str(out), "run_date")
        release_store.check_output_location(None, target)
        assert sorted(p.name for p in out.iterdir()) == [f".run_date={DATE}.lock", f"run_date={DATE}"]


@pytest.mark.unit
def test_a_lock_left_by_a_killed_run_is_taken_over_with_a_message(tmp_path):
    lock = tmp_path / ".out.lock"
    lock.write_text(json.dumps(holder(dead_pid())))  # a file nobody holds: its writer was killed
    said = []
    with output_lock.held(str(tmp_path / "out"), said.append):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert len(said) == 1 and said[0].startswith(f"taking over the lock {lock} left by a run that did not finish")
    assert not lock.exists()


# --- HDFS and object stores: an advisory lock file through pyarrow.fs -----------------------------------

def mock_lock() -> release_store.Location:
    filesystem = pafs._MockFileSystem()
    filesystem.create_dir("bucket/out")
    return release_store.Location("mock://bucket/out/.run_date=x.lock", filesystem, "bucket/out/.run_date=x.lock")


def put(lock: release_store.Location, content: dict) -> None:
    with lock.fs.open_output_stream(lock.path) as stream:
        stream.write(json.dumps(content).encode())


def exists(lock: release_store.Location) -> bool:
    return lock.fs.get_file_info(lock.path).type != pafs.FileType.NotFound


@pytest.mark.unit
def test_an_advisory_lock_refuses_while_held_and_is_removed_after():
    lock = mock_lock()
    with output_lock._hold_advisory("mock://bucket/out/run_date=x", lock, print):
        assert exists(lock)
        with pytest.raises(OutputBusy, match=f"pid {os.getpid()} on host"):
            with output_lock._hold_advisory("mock://bucket/out/run_date=x", lock, print):
                pass
    assert not exists(lock)


@pytest.mark.unit
@pytest.mark.parametrize("holder_of, taken", [
    (lambda: holder(os.getpid()), False),  # running on this host
    (lambda: holder(dead_pid()), True),  # not running on this host
    (lambda: holder(1, host="another-host", age=dt.timedelta(hours=1)), False),  # cannot be checked: young
    (lambda: holder(1, host="another-host", age=output_lock.STALE_AFTER + dt.timedelta(minutes=1)), True),  # too old
], ids=["alive", "exited", "other_host_young", "other_host_old"])
def test_an_advisory_lock_is_taken_over_only_when_stale(holder_of, taken):
    # The holder is made when the test runs: a pid that exited at collection can belong to another
    # process an hour of tests later (CI saw one reused).
    left = holder_of()
    lock = mock_lock()
    put(lock, left)
    said = []
    if not taken:
        with pytest.raises(OutputBusy, match=f"pid {left['pid']} on host {left['host']}"):
            with output_lock._hold_advisory("mock://bucket/out/run_date=x", lock, said.append):
                pass
        assert not said and json.loads(lock.fs.open_input_stream(lock.path).read())["token"] == "theirs"
        return
    with output_lock._hold_advisory("mock://bucket/out/run_date=x", lock, said.append):
        assert json.loads(lock.fs.open_input_stream(lock.path).read())["pid"] == os.getpid()
    assert len(said) == 1 and "taking over the lock" in said[0] and f"pid {left['pid']}" in said[0]
    assert not exists(lock)


# --- through the CLI ---------------------------------------------------------------------------------

def test_a_second_run_of_the_same_output_and_date_exits_2_before_its_charge(spark, tmp_path, capsys):
    config = job(tmp_path, cap=10)
    assert main(["run", str(config), "--run-date", DATE]) == 0
    release = tmp_path / "out" / f"run_date={DATE}"
    first = (release / "privacy.json").read_text()
    capsys.readouterr()

    with output_lock.held(str(release)):  # as the first run would, while it writes
        assert main(["run", str(config), "--run-date", DATE, "--force"]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith(f"dp-spark: error: another run is writing {release} (pid {os.getpid()} on host ")
        assert "Nothing was charged" in err
        assert main(["run", str(config), "--run-date", "2026-11-21"]) == 0  # another date is another lock

    assert [r["run_date"] for r in store_runs(tmp_path)] == [DATE, "2026-11-21"]  # the refused run: no charge
    assert (release / "privacy.json").read_text() == first
    assert main(["run", str(config), "--run-date", DATE, "--force"]) == 0  # free again once the first ends
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"run_date={DATE}", "run_date=2026-11-21"]


def test_a_run_takes_over_the_lock_a_killed_run_left(spark, tmp_path, capsys):
    config = job(tmp_path)
    (tmp_path / "out").mkdir()
    lock = tmp_path / "out" / f".run_date={DATE}.lock"
    lock.write_text(json.dumps(holder(dead_pid())))
    assert main(["run", str(config), "--run-date", DATE]) == 0
    assert f"taking over the lock {lock} left by a run that did not finish" in capsys.readouterr().err
    assert not lock.exists() and [r["status"] for r in store_runs(tmp_path)] == ["released"]


@pytest.mark.unit
def test_a_file_where_the_output_directory_should_be_is_one_clear_error(tmp_path):
    (tmp_path / "out").write_text("not a directory")
    with pytest.raises(PreflightError, match=f"^{tmp_path / 'out'} exists and is a file, not a directory"):
        with output_lock.held(str(tmp_path / "out" / f"run_date={DATE}")):
            pass
    assert (tmp_path / "out").read_text() == "not a directory"
