"""Writing a release (Parquet tables and privacy.json) all or nothing, and reading its report back.

Spark writes the tables; the driver moves directories and writes privacy.json through
``pyarrow.fs``, which needs no JVM and so works the same on a classic and a Spark Connect
session. The mechanism and its limits: docs/scheduled_runs.md ("Crash safety").

A release counts as complete when its directory holds privacy.json: the report is written last
and, when a directory is copied rather than renamed, copied last and deleted first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import uuid
from urllib.parse import urlsplit

from pyarrow import fs as pafs
from pyspark.sql import DataFrame, SparkSession

from dp_spark.errors import ConfigError, DataError, PreflightError

REPORT_FILE = "privacy.json"
# Filesystems whose directory rename is one atomic step; on the others (object stores) a move
# is a copy then a delete, and readers may see a release half copied.
ATOMIC_RENAME = frozenset({"local", "hdfs"})
# Spark's names for the object stores pyarrow knows under another scheme.
_PYARROW_SCHEME = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}


@dataclasses.dataclass(frozen=True)
class Location:
    """One directory or file, as Spark names it (``uri``) and as pyarrow reaches it (``fs``, ``path``)."""

    uri: str
    fs: object
    path: str

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def child(self, name: str) -> Location:
        return Location(f"{self.uri}/{name}", self.fs, f"{self.path}/{name}")

    def sibling(self, name: str) -> Location:
        return Location(f"{self.uri.rsplit('/', 1)[0]}/{name}", self.fs, f"{self.path.rsplit('/', 1)[0]}/{name}")

    def parent_path(self) -> str:
        return self.path.rsplit("/", 1)[0] or "/"


def location(path: str) -> Location:
    """Where ``path`` is, for Spark and for pyarrow. A path without a scheme is a local path
    (made absolute, so that Spark and pyarrow agree on a relative one)."""
    path = str(path).rstrip("/") or "/"
    scheme = urlsplit(path).scheme
    if not scheme or len(scheme) == 1:  # no scheme, or a Windows drive letter
        path = os.path.abspath(path)
        return Location(path, pafs.LocalFileSystem(), path)
    arrow_uri = _PYARROW_SCHEME.get(scheme.lower(), scheme) + path[len(scheme):]
    try:
        filesystem, arrow_path = pafs.FileSystem.from_uri(arrow_uri)
    except (OSError, ValueError) as exc:  # unknown scheme, no libhdfs, no credentials
        raise ConfigError(f"cannot reach {path!r} from the driver through pyarrow.fs: {exc}") from None
    return Location(path, filesystem, arrow_path.rstrip("/"))


def _kind(loc: Location):
    return loc.fs.get_file_info(loc.path).type


def _exists(loc: Location) -> bool:
    return _kind(loc) != pafs.FileType.NotFound


def _entries(loc: Location) -> list:
    """The entries directly in a directory (none when it does not exist)."""
    return loc.fs.get_file_info(pafs.FileSelector(loc.path, allow_not_found=True))


def _empty_or_absent(loc: Location) -> bool:
    kind = _kind(loc)
    return kind == pafs.FileType.NotFound or (kind == pafs.FileType.Directory and not _entries(loc))


def _has_report(loc: Location) -> bool:
    return _kind(loc.child(REPORT_FILE)) == pafs.FileType.File


def delete(loc: Location) -> None:
    """Remove a directory (or file) and everything in it; nothing when it is absent."""
    kind = _kind(loc)
    if kind == pafs.FileType.Directory:
        if _kind(loc.child(REPORT_FILE)) == pafs.FileType.File:
            loc.fs.delete_file(loc.child(REPORT_FILE).path)  # first: a half-deleted release is incomplete
        loc.fs.delete_dir(loc.path)
    elif kind != pafs.FileType.NotFound:
        loc.fs.delete_file(loc.path)


def _copy_tree(source: Location, target: Location) -> None:
    """Copy a directory file by file, privacy.json last, so that a copy cut short has no report."""
    report = source.child(REPORT_FILE).path
    files = [f for f in source.fs.get_file_info(pafs.FileSelector(source.path, recursive=True))
             if f.type == pafs.FileType.File]
    target.fs.create_dir(target.path)
    for info in sorted(files, key=lambda f: f.path == report):
        destination = target.path + info.path[len(source.path):]
        target.fs.create_dir(destination.rsplit("/", 1)[0])
        source.fs.copy_file(info.path, destination)


def _move(source: Location, target: Location) -> None:
    """Rename a directory; where the filesystem cannot do that in one step, copy it then delete it."""
    if source.fs.type_name in ATOMIC_RENAME:
        source.fs.move(source.path, target.path)
    else:
        _copy_tree(source, target)
        delete(source)


def _siblings(target: Location, kind: str) -> list[Location]:
    """Hidden siblings ``.{name}.{kind}-*`` that a write of ``target`` leaves behind if killed."""
    prefix = f".{target.name}.{kind}-"
    parent = Location(target.uri.rsplit("/", 1)[0], target.fs, target.parent_path())
    return sorted((target.sibling(info.base_name) for info in _entries(parent)
                   if info.base_name.startswith(prefix)), key=lambda loc: loc.path)


def _recover(target: Location) -> None:
    """Finish what a killed write left: put back a previous release that was moved aside, and drop
    staging and scratch directories (one job writes an output at a time).

    A target without a report next to a complete staged or previous release is what a killed
    move left: absent (after the first rename) or, on object stores, partly copied; it goes.
    Where directories are renamed, a move leaves no partial target, so a target holding files
    is never deleted here."""
    previous = [p for p in _siblings(target, "previous") if _has_report(p)]
    staged = [t for t in _siblings(target, "tmp") if _has_report(t)]
    copied = target.fs.type_name not in ATOMIC_RENAME
    if (previous or staged) and not _has_report(target) and (copied or _empty_or_absent(target)):
        delete(target)
        if previous:
            _move(previous[0], target)
    for kind in ("previous", "tmp", "perturbed"):
        for leftover in _siblings(target, kind):
            delete(leftover)


def check_output_location(spark: SparkSession, output: str) -> None:
    """Refuse to replace a non-empty directory that is not a dp-spark output.

    Called before any data is read, so a typo in ``output`` cannot wipe a
    directory that holds something else. Also recovers from a job killed while writing here.
    """
    target = location(output)
    with _unusable_as_preflight(output):
        _recover(target)
        kind = _kind(target)
    if kind == pafs.FileType.NotFound:
        return
    if kind != pafs.FileType.Directory:
        raise ConfigError(f"output {output!r} exists and is a file, not a directory")
    if _entries(target) and not _has_report(target):
        raise ConfigError(
            f"output {output!r} exists, is not empty and holds no {REPORT_FILE}: "
            "refusing to replace it (choose another output or remove it)"
        )


@contextlib.contextmanager
def _unusable_as_preflight(output: str):
    """An OSError while looking at the output (a path under a file, a directory it may not list)
    becomes a PreflightError naming the path and the reason: found before anything is charged."""
    try:
        yield
    except OSError as exc:
        raise PreflightError(f"output {output!r} cannot be used: {_reason(exc)}") from None


def _nearest_existing(loc: Location) -> Location:
    """``loc`` or its closest ancestor that exists (the filesystem root at worst)."""
    while not _exists(loc) and loc.parent_path() != loc.path:
        loc = Location(loc.uri.rsplit("/", 1)[0] or "/", loc.fs, loc.parent_path())
    return loc


def probe_writable(output: str) -> None:
    """Refuse, with the path and the filesystem's reason, an output where a release cannot be
    written: create and delete a small file in the directory that will hold the output's staging
    sibling (the output's parent, or its nearest existing ancestor). Nothing is left behind."""
    target = location(output)
    parent = Location(target.uri.rsplit("/", 1)[0] or "/", target.fs, target.parent_path())
    where = _nearest_existing(parent)
    if _kind(where) != pafs.FileType.Directory:
        raise PreflightError(f"output {output!r} cannot be written: {where.uri!r} is a file, not a directory")
    probe = where.child(f".{target.name}.probe-{uuid.uuid4().hex}")
    try:
        with probe.fs.open_output_stream(probe.path) as stream:
            stream.write(b"dp-spark write probe\n")
        probe.fs.delete_file(probe.path)
    except OSError as exc:
        raise PreflightError(f"output {output!r} is not writable: cannot create a file in {where.uri!r}: "
                             f"{_reason(exc)}") from None


def _reason(exc: OSError) -> str:
    """The filesystem's reason on one line ("Permission denied"), without pyarrow's preamble
    ("Failed to open local file '...'. Detail: [errno 13] Permission denied")."""
    text = " ".join((exc.strerror or str(exc)).split())
    detail = re.search(r"\[errno \d+\] (.*)$", text)
    return (detail.group(1) if detail else text) or type(exc).__name__


def check_partitioned_output(spark: SparkSession, output: str, partition_key: str) -> None:
    """Refuse a partitioned output directory that holds anything but ``key=value`` partitions."""
    target = location(output)
    with _unusable_as_preflight(output):
        kind = _kind(target)
        entries = _entries(target) if kind == pafs.FileType.Directory else []
    if kind == pafs.FileType.NotFound:
        return
    if kind != pafs.FileType.Directory:
        raise ConfigError(f"output {output!r} exists and is a file, not a directory")
    for info in entries:
        name = info.base_name
        if not (name.startswith((".", "_"))
                or (name.startswith(f"{partition_key}=") and info.type == pafs.FileType.Directory)):
            raise ConfigError(f"output {output!r} holds {name!r}, which is not a {partition_key}=... partition: "
                              "refusing to write run-date partitions there (choose another output)")


def release_exists(spark: SparkSession, output: str) -> bool:
    return _has_report(location(output))


def read_report(spark: SparkSession, output: str) -> dict:
    """The privacy report of an existing release."""
    report = location(output).child(REPORT_FILE)
    with report.fs.open_input_stream(report.path) as stream:
        return json.loads(stream.read().decode("utf-8"))


def _empty_schema(frame):
    """The Spark schema of an empty pandas table (Spark cannot infer one from no rows): its dtypes
    through Arrow, a column of no known type (an empty object column) as a string."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    arrow = pa.Schema.from_pandas(frame, preserve_index=False)
    return from_arrow_schema(pa.schema([f.with_type(pa.string()) if pa.types.is_null(f.type) else f for f in arrow]))


def _write_table(spark: SparkSession, frame, table: Location) -> None:
    if isinstance(frame, DataFrame):  # large: written by the executors, as many files as partitions
        frame.write.parquet(table.uri)
    else:
        spark.createDataFrame(frame, schema=_empty_schema(frame) if frame.empty else None).coalesce(1).write.parquet(
            table.uri)
    if _kind(table) != pafs.FileType.Directory:
        raise DataError(f"Spark wrote {table.uri!r} where pyarrow cannot see it (a path without a scheme "
                        "is a local path here; on a cluster whose default filesystem is not local, give "
                        "the output as a full URI such as hdfs://... or s3a://...)")


def _swap_in(staging: Location, target: Location) -> None:
    """Move the previous release (if any) aside, the staged one into place, then drop the previous."""
    previous = target.sibling(f".{target.name}.previous-{uuid.uuid4().hex}")
    if _exists(target):
        _move(target, previous)
    try:
        _move(staging, target)
    except Exception:
        if _exists(previous) and not _has_report(target):
            delete(target)
            _move(previous, target)
        raise
    delete(previous)


def write_release(spark: SparkSession, output: str, tables: dict, report: dict) -> None:
    """Write Parquet tables (pandas or Spark DataFrames) and privacy.json, all or nothing.

    Everything goes to a hidden sibling directory first. The previous release, if any, is then
    moved aside, the new one moved into place, and the previous one deleted. Readers (which
    skip hidden names) see the old release or the new one, never a mix, where directories are
    renamed atomically; a job killed between the two moves leaves the old release aside, and the
    next job on this output puts it back (``check_output_location``).
    """
    target = location(output)
    staging = target.sibling(f".{target.name}.tmp-{uuid.uuid4().hex}")
    try:
        staging.fs.create_dir(staging.path)
        for name, frame in tables.items():
            _write_table(spark, frame, staging.child(name))
        with staging.fs.open_output_stream(staging.child(REPORT_FILE).path) as stream:
            stream.write(json.dumps(report, indent=2, sort_keys=False).encode("utf-8"))
        try:
            _swap_in(staging, target)
        except OSError as exc:
            raise DataError(f"cannot move the new output into place at {output!r}: {exc}") from None
    except BaseException as failure:
        if not isinstance(failure, Exception):  # a signal: Spark's write job goes on without us
            _interrupt_jobs(spark)
        _delete_until_quiet(staging)
        raise
    finally:
        delete(staging)


# How long a failed write's cancelled tasks may go on writing: Spark kills a Python worker that does
# not stop spark.python.task.killTimeout (2 s by default) after its task was cancelled. 5 s was not
# enough on a loaded machine (a fresh-clone CI run, 2026-11-27, left a staging directory behind);
# Spark's status tracker would tell when the tasks end, but only on a classic session.
TASKS_SETTLE_SECONDS = 10.0


def _interrupt_jobs(spark: SparkSession) -> None:
    """Cancel the session's running Spark jobs after a signal stopped the driver's Python mid-write.

    From a new thread: the signal may have cut this thread's call to the JVM short, leaving its
    answer unread on this thread's Py4J connection, and a new thread has a connection of its own.
    All of the session's jobs, not only the write's: a job tag added here would be this thread's
    only on a classic session, out of reach of another thread; and PySpark's own Ctrl-C handler
    cancels every job too."""
    import threading

    def interrupt():
        with contextlib.suppress(Exception):  # a session that has stopped runs nothing
            spark.interruptAll()

    helper = threading.Thread(target=interrupt, name="dp-spark-interrupt-write", daemon=True)
    helper.start()
    helper.join(30)


def _delete_until_quiet(staging: Location, seconds: float = TASKS_SETTLE_SECONDS) -> None:
    """Delete the staging directory, and again whenever it comes back, for ``seconds``.

    A signal stops the driver's Python while Spark's write job goes on. Cancelling ends the job at
    once, but its tasks stop only when they next look (a Python worker is killed after Spark's
    kill timeout), and one still running puts its directories back after they were deleted (seen
    once in CI: a SIGTERM at the write left a staging directory behind)."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(OSError):  # a task may be writing into it right now: try again
            delete(staging)
        if time.monotonic() >= deadline:
            return
        time.sleep(0.2)
