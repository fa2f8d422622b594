"""One run per output (and run date) at a time: a lock file next to the release it writes.

Two runs writing the same release at once would both be charged, and one release would
silently replace the other; worse, each run's start-up recovery (``release_store``) removes the
hidden staging directories it finds next to its target, which would be the other run's. So the
runner holds this lock from before its plan checks until it ends, on every exit path, and a
second run stops before its budget store charges anything (``OutputBusy``, exit 2).

The lock is a hidden file ``.{name}.lock`` beside the target ``.../{name}``: beside the output,
or inside it, next to the ``run_date=...`` partition, for a run with a run date. Readers skip
hidden names, ``check_partitioned_output`` allows them, and release_store's recovery removes
only ``.{name}.tmp-*``, ``.{name}.previous-*`` and ``.{name}.perturbed-*`` siblings. It holds
the holder's host, pid and start time, for the message a second run prints.

What the lock guarantees depends on where the output is (docs/scheduled_runs.md, "One run per
output at a time"):

- **Local paths** (including a POSIX file system shared by the nodes, as for the budget store):
  an exclusive ``fcntl.flock`` on the lock file, which the kernel releases when the holder's
  process dies, however it dies. A lock file that nobody holds is what a killed run left: it
  is taken over at once, with a message naming the run that left it.
- **HDFS and object stores**, reached through ``pyarrow.fs``, which can create a file only by
  overwriting it (no exclusive create, no lock): the lock is advisory and not atomic. A run
  reads the lock file, writes its own, and reads it back; a second run that starts while the
  first is running is stopped, but two runs starting within the same moment may both go on.
  A lock whose holder is gone (its pid is not running on this host) or is older than
  ``STALE_AFTER`` is taken over with a message: a run on another host that lost its lock file
  cannot be told from a live one, so only its age frees it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import uuid

from dp_spark.errors import OutputBusy, PreflightError
from dp_spark.io import release_store

# How long a lock on HDFS or an object store counts as held when its holder cannot be checked
# (it runs on another host): longer than any run should take. Local locks have no age limit.
STALE_AFTER = dt.timedelta(hours=24)


def lock_location(target: str) -> release_store.Location:
    """The lock file of a release location: its hidden sibling ``.{name}.lock``."""
    where = release_store.location(target)
    return where.sibling(f".{where.name}.lock")


def _holder() -> dict:
    now = dt.datetime.now(dt.UTC)
    return {"host": socket.gethostname(), "pid": os.getpid(), "started_utc": now.isoformat(timespec="seconds"),
            "token": uuid.uuid4().hex}


def _describe(holder: dict | None) -> str:
    if not holder:
        return "a run whose lock file holds no details"
    return (f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, started "
            f"{holder.get('started_utc', '?')}")


def _parse(text: bytes) -> dict | None:
    try:
        holder = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _pid_running(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # running, as another user
        return True
    return True


def is_stale(holder: dict | None, now: dt.datetime | None = None) -> bool:
    """A lock file on HDFS or an object store whose holder is gone: its pid is not running on this
    host, or it is older than STALE_AFTER (or unreadable, which no running holder leaves)."""
    if holder is None:
        return True
    if holder.get("host") == socket.gethostname() and not _pid_running(holder.get("pid")):
        return True
    try:
        started = dt.datetime.fromisoformat(holder["started_utc"])
    except (KeyError, TypeError, ValueError):
        return True
    return (now or dt.datetime.now(dt.UTC)) - started > STALE_AFTER


def _busy(target: str, lock: release_store.Location, holder: dict | None) -> OutputBusy:
    return OutputBusy(f"another run is writing {target} ({_describe(holder)}; lock file {lock.uri}): one run "
                      "per output and run date at a time. Nothing was charged; run again when it has finished")


def _taking_over(lock: release_store.Location, holder: dict | None) -> str:
    return (f"taking over the lock {lock.uri} left by a run that did not finish ({_describe(holder)}); its hidden "
            "leftovers are cleaned up next")


@contextlib.contextmanager
def held(target: str, progress=lambda _message: None):
    """Hold the lock of release location ``target`` for the block; raises OutputBusy if another run
    holds it. Released (and its file removed) however the block ends."""
    lock = lock_location(target)
    holding = _hold_local if lock.fs.type_name == "local" else _hold_advisory
    with holding(target, lock, progress):
        yield


@contextlib.contextmanager
def _made_parent(lock: release_store.Location):
    """The lock's directory exists for the block; if the block created it, it is removed again when
    empty (a run that writes nothing leaves no output directory behind)."""
    parent = lock.parent_path()
    created = []
    while not os.path.isdir(parent):
        if os.path.exists(parent):
            raise PreflightError(f"{parent} exists and is a file, not a directory: the output cannot be written "
                                 "there")
        created.append(parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(lock.parent_path(), exist_ok=True)
    except OSError as exc:  # a file in the way, a read-only disk
        raise PreflightError(f"cannot create the output's lock file {lock.uri}: {exc}") from None
    try:
        yield
    finally:
        for directory in created:  # innermost first
            try:
                os.rmdir(directory)
            except OSError:
                break  # not empty: something was written there (by this run or another)


def _open_locked(lock: release_store.Location, target: str) -> int:
    """A descriptor of the lock file, exclusively flocked; the file is the one at the path now."""
    while True:
        try:
            fd = os.open(lock.path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # a run of another date removed the directory it had made: make it again
            os.makedirs(lock.parent_path(), exist_ok=True)
            continue
        except OSError as exc:
            raise PreflightError(f"cannot create the output's lock file {lock.uri}: {exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _parse(os.pread(fd, 4096, 0))
            os.close(fd)
            raise _busy(target, lock, holder) from None
        try:
            same = os.stat(lock.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # its holder removed it between our open and our flock: lock the new file


@contextlib.contextmanager
def _hold_local(target: str, lock: release_store.Location, progress):
    with _made_parent(lock):
        fd = _open_locked(lock, target)
        try:
            left = os.pread(fd, 4096, 0)
            if left:
                progress(_taking_over(lock, _parse(left)))
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(_holder()).encode("utf-8"), 0)
            yield
        finally:
            os.unlink(lock.path)  # while still locked: the next run creates a fresh file
            os.close(fd)


def _read(lock: release_store.Location) -> bytes | None:
    try:
        with lock.fs.open_input_stream(lock.path) as stream:
            return stream.read()
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def _hold_advisory(target: str, lock: release_store.Location, progress):
    left = _read(lock)
    if left is not None:
        holder = _parse(left)
        if not is_stale(holder):
            raise _busy(target, lock, holder)
        progress(_taking_over(lock, holder))
    mine = _holder()
    try:
        lock.fs.create_dir(lock.parent_path())
        with lock.fs.open_output_stream(lock.path) as stream:
            stream.write(json.dumps(mine).encode("utf-8"))
    except OSError as exc:
        raise PreflightError(f"cannot write the output's lock file {lock.uri}: {exc}") from None
    now = _read(lock)
    if now is None or (_parse(now) or {}).get("token") != mine["token"]:  # another run wrote it just after us
        raise _busy(target, lock, _parse(now or b""))
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if (_parse(_read(lock) or b"") or {}).get("token") == mine["token"]:
                lock.fs.delete_file(lock.path)

