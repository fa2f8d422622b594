"""Pre-flight before the charge and one-line runtime errors.

Unit tests here: the root cause of sample exception chains, the probes, the engine's limits on
parameters and the decoding of domain files. Whole runs through ``cli.main`` (exit codes, the
budget store, nothing written) are in tests/test_preflight_runs.py.
"""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from dp_spark.cli.exits import error_fields, innermost_java_cause, root_cause, short_java_name
from dp_spark.core.domain import item_domain, read_movielens_catalogue
from dp_spark.errors import ConfigError, DataError, PreflightError
from dp_spark.families.counts.family import CountsParams
from dp_spark.families.dpsense.family import DPSenseParams
from dp_spark.families.location_entropy.family import EntropyParams
from dp_spark.families.user_histogram.family import HistogramParams
from dp_spark.io.release_store import probe_writable
from dp_spark.jobs import budget_store
from dp_spark.jobs.config import load_config
from dp_spark.jobs.preflight import check_source_path

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0  # chmod does not stop root

# What a Spark write on a full disk raises through Py4J (abridged: the real one has ~90 frames).
FULL_DISK_TRACE = """An error occurred while calling o123.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, \
most recent failure: Lost task 0.0 in stage 3.0 (TID 7) (10.0.0.5 executor driver): \
org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to file:/data/out. SQLSTATE: 58030
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError(QueryExecutionErrors.scala:775)
\tat org.apache.spark.sql.execution.datasources.FileFormatWriter$.executeTask(FileFormatWriter.scala:420)
Caused by: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device
\tat org.apache.hadoop.fs.RawLocalFileSystem$LocalFSFileOutputStream.write(RawLocalFileSystem.java:321)
\t... 12 more
Caused by: java.io.IOException: No space left on device
\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)
\t... 30 more
"""


class Py4JJavaError(Exception):
    """Stands in for py4j.protocol.Py4JJavaError (matched by name, as str() of the real one is its trace)."""


class CapturedLike(Exception):
    """Stands in for pyspark.errors' CapturedException: a description, a Java trace, a converted cause."""

    def __init__(self, desc: str, stack: str = "", cause: BaseException | None = None):
        super().__init__(desc + "\n\nJVM stacktrace:\n" + stack)
        self._desc, self._stackTrace, self._cause = desc, stack, cause


# --- root cause -----------------------------------------------------------------------------------

def test_the_innermost_java_cause_of_a_trace():
    assert innermost_java_cause(FULL_DISK_TRACE) == "IOException: No space left on device"
    assert innermost_java_cause("java.lang.RuntimeException: x\n\tat a.b(C.java:1)") is None


@pytest.mark.parametrize("line, short", [
    ("java.io.IOException: No space left on device", "IOException: No space left on device"),
    ("org.apache.spark.SparkException: Job aborted", "SparkException: Job aborted"),
    ("java.lang.OutOfMemoryError: Java heap space", "OutOfMemoryError: Java heap space"),
    ("Path does not exist: file:/a.b", "Path does not exist: file:/a.b"),  # a message alone stays
])
def test_java_class_names_lose_their_package(line, short):
    assert short_java_name(line) == short


def test_a_py4j_error_gives_its_innermost_java_cause():
    assert root_cause(Py4JJavaError(FULL_DISK_TRACE)) == "IOException: No space left on device"


def test_a_py4j_error_under_python_wrappers_gives_its_innermost_java_cause():
    try:
        try:
            raise Py4JJavaError(FULL_DISK_TRACE)
        except Py4JJavaError as exc:
            raise RuntimeError("writing the release failed") from exc
    except RuntimeError as outer:
        assert root_cause(outer) == "IOException: No space left on device"


def test_a_lost_task_without_a_caused_by_gives_the_tasks_error():
    text = ("An error occurred while calling o9.collect.\n: org.apache.spark.SparkException: Job aborted due to stage "
            "failure: Task 1 in stage 2.0 failed 4 times, most recent failure: Lost task 1.3 in stage 2.0 (TID 9) "
            "(worker-3 executor 2): java.io.IOException: No space left on device")
    assert root_cause(Py4JJavaError(text)) == "IOException: No space left on device"


def test_a_pyspark_error_gives_its_description_or_its_innermost_cause():
    inner = CapturedLike("No space left on device", "java.io.IOException: No space left on device\n\tat x")
    outer = CapturedLike("[TASK_WRITE_FAILED] Task failed while writing rows", "org.apache...\n\tat y", inner)
    assert root_cause(outer) == "IOException: No space left on device"
    missing = CapturedLike("[PATH_NOT_FOUND] Path does not exist: file:/nope.", "org.apache...\n\tat z")
    assert root_cause(missing) == "CapturedLike: [PATH_NOT_FOUND] Path does not exist: file:/nope."


def test_an_os_error_names_its_reason_and_file():
    exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/out/part-0.parquet")
    assert root_cause(exc) == "OSError: No space left on device: /data/out/part-0.parquet"


def test_a_python_worker_traceback_gives_its_last_line():
    exc = CapturedLike("[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most recent "
                       "call last):\n  File \"x.py\", line 1, in f\nZeroDivisionError: division by zero\n"
                       "SQLSTATE: 38000")
    assert root_cause(exc) == "ZeroDivisionError: division by zero"


def test_the_root_cause_is_one_bounded_line():
    cause = root_cause(RuntimeError("first line\nsecond line " + "x" * 2000))
    assert cause == "RuntimeError: first line"
    assert len(root_cause(RuntimeError("y" * 5000))) == 500


def test_the_end_event_carries_the_traceback_of_a_runtime_failure_only():
    try:
        raise Py4JJavaError(FULL_DISK_TRACE)
    except Py4JJavaError as exc:
        fields = error_fields(exc)
    assert fields["error"] == "IOException: No space left on device"
    assert "Traceback (most recent call last)" in fields["traceback"] and "raise Py4JJavaError" in fields["traceback"]
    assert error_fields(DataError("column user_id has 1 null values")) == {"error": "column user_id has 1 null values"}


# --- what the engine supports ---------------------------------------------------------------------

@pytest.mark.parametrize("value", [100_001, 10**12])
def test_a_per_user_bound_past_spark_min_by_is_refused(value):
    with pytest.raises(ConfigError, match=rf"algorithm.l = {value:,} is above the supported maximum 100,000: "
                                          "Spark's min_by"):
        CountsParams("sra", l=value)
    with pytest.raises(ConfigError, match=r"algorithm.m = .* above the supported maximum 100,000"):
        CountsParams("lpa", l=value, publisher="laplace")
    with pytest.raises(ConfigError, match=r"algorithm.d = .* above the supported maximum 100,000"):
        CountsParams("hpa", l=10, d=value)
    with pytest.raises(ConfigError, match=r"algorithm.theta_max = .* above the supported maximum 100,000"):
        DPSenseParams("dpsense", theta_max=value)


def test_the_largest_supported_bound_is_accepted():
    assert CountsParams("sra", l=100_000).l == 100_000
    assert DPSenseParams("dpsense", theta_max=100_000).theta_max == 100_000


def test_entropy_visits_and_histogram_bins_have_limits():
    with pytest.raises(ConfigError, match=r"algorithm.visits_per_location = 1,000,000,000,000 is above the "
                                          r"supported maximum 1,000,000"):
        EntropyParams(C=10**12)
    with pytest.raises(ConfigError, match=r"algorithm.bins has 1,000,000,000,000 bins, above the supported maximum"):
        HistogramParams("records", {"range": [1, 10**12]})
    assert len(HistogramParams("records", {"range": [1, 1000]}).bins) == 1000


def _config(tmp_path, algorithm_lines: list[str], items: str = "{ range = [1, 10] }") -> str:
    path = tmp_path / "job.toml"
    path.write_text("\n".join([f'output = "{tmp_path / "out"}"', "[source]", 'format = "parquet"',
                               f'path = "{tmp_path / "records.parquet"}"', "[domain]", f"items = {items}",
                               "[privacy]", "epsilon = 1", "[algorithm]", *algorithm_lines]) + "\n")
    return str(path)


@pytest.mark.parametrize("l", ["100001", "1000000000000"])
def test_the_limit_is_a_config_error_at_load(tmp_path, l):
    with pytest.raises(ConfigError, match=r"algorithm.l = [\d,]+ is above the supported maximum 100,000"):
        load_config(_config(tmp_path, ['name = "sra"', f"l = {l}"]))


def test_frapp_records_per_user_has_the_same_limit(tmp_path):
    path = tmp_path / "frapp.toml"
    path.write_text("\n".join([f'output = "{tmp_path / "out"}"', "[source]", 'format = "csv"', 'path = "x.csv"',
                               "[domain]", "records = [{ column = 'sex', values = ['F', 'M'] }]",
                               "[privacy]", "epsilon = 1", "[algorithm]", 'name = "frapp"',
                               "records_per_user = 100001"]) + "\n")
    with pytest.raises(ConfigError, match=r"algorithm.records_per_user = 100,001 is above the supported maximum"):
        load_config(str(path))


# --- domain files in any common encoding ---------------------------------------------------------

def _titles_file(tmp_path, encoding: str):
    path = tmp_path / f"movie_titles.{encoding}.txt"
    path.write_bytes("1,2001,Amélie\n2,1997,Das Boot – Director's Cut\n3,2003,Æon Flux\n".encode(encoding, "replace"))
    return path


def test_a_latin1_domain_file_is_read_with_a_note(tmp_path):
    path = _titles_file(tmp_path, "latin-1")
    with pytest.raises(UnicodeDecodeError):
        path.read_text(encoding="utf-8")  # the file really is not UTF-8
    domain = item_domain({"file": str(path)})
    assert domain.ids.tolist() == [1, 2, 3]
    assert domain.description == f"file {path} (not UTF-8: read as cp1252)"


def test_a_utf8_domain_file_has_no_note(tmp_path):
    path = _titles_file(tmp_path, "utf-8")
    assert item_domain({"file": str(path)}).description == f"file {path}"


def test_a_domain_file_with_its_encoding_given(tmp_path):
    path = _titles_file(tmp_path, "latin-1")
    domain = item_domain({"file": str(path), "encoding": "latin-1"})
    assert domain.ids.tolist() == [1, 2, 3] and domain.description == f"file {path}"
    with pytest.raises(ConfigError, match=r"is not valid utf-8: byte 0xe9 at offset 9 \(set domain.items.encoding"):
        item_domain({"file": str(path), "encoding": "utf-8"})
    with pytest.raises(ConfigError, match="domain.items.encoding 'klingon' is not a known text encoding"):
        item_domain({"file": str(path), "encoding": "klingon"})
    with pytest.raises(ConfigError, match="domain.items.encoding applies to a file or a catalogue"):
        item_domain({"range": [1, 3], "encoding": "latin-1"})


def test_a_catalogue_in_another_encoding(tmp_path):
    path = tmp_path / "movies.dat"
    path.write_text("1::Amélie (2001)::Comedy\n2::Æon Flux (2005)::Action\n", encoding="utf-8")
    ids, titles = read_movielens_catalogue(str(path), "utf-8")
    assert ids.tolist() == [1, 2] and titles[1] == "Amélie (2001)"
    domain = item_domain({"catalogue": "movielens", "path": str(path), "encoding": "utf-8"})
    assert domain.titles[1] == "Amélie (2001)" and np.array_equal(domain.ids, [1, 2])


# --- probes -----------------------------------------------------------------------------------------

def test_an_output_under_a_file_is_not_writable(tmp_path):
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(PreflightError, match=r"output '.*/a_file/out' cannot be written: '.*/a_file' is a file"):
        probe_writable(str(tmp_path / "a_file" / "out"))


@pytest.mark.skipif(AS_ROOT, reason="chmod does not stop root from writing")
def test_a_read_only_output_directory_is_not_writable(tmp_path):
    parent = tmp_path / "read_only"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        with pytest.raises(PreflightError, match=r"output '.*/read_only/out' is not writable: cannot create a file in "
                                                 r"'.*/read_only': Permission denied"):
            probe_writable(str(parent / "out"))
    finally:
        parent.chmod(0o755)


def test_the_probe_leaves_nothing_behind(tmp_path):
    probe_writable(str(tmp_path / "new" / "deeper" / "out"))  # the nearest existing ancestor is probed
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_budget_store_is_refused(tmp_path):
    (tmp_path / "a_file").write_text("x")
    spec = budget_store.StoreSpec(str(tmp_path / "a_file" / "budget.json"), "toy")
    with pytest.raises(PreflightError, match=r"budget store '.*/a_file/budget.json' is unreachable: '.*/a_file' is "
                                             "not a directory"):
        budget_store.check_reachable(spec)
    budget_store.check_reachable(budget_store.StoreSpec(str(tmp_path / "new" / "budget.json"), "toy"))
    assert list(tmp_path.iterdir()) == [tmp_path / "a_file"]  # nothing created


@pytest.mark.skipif(AS_ROOT, reason="chmod does not stop root from writing")
def test_a_read_only_budget_store_directory_is_refused(tmp_path):
    tmp_path.joinpath("ro").mkdir()
    tmp_path.joinpath("ro").chmod(0o555)
    try:
        with pytest.raises(PreflightError, match="is unreachable: cannot create a file in .*: Permission denied"):
            budget_store.check_reachable(budget_store.StoreSpec(str(tmp_path / "ro" / "budget.json"), "toy"))
    finally:
        tmp_path.joinpath("ro").chmod(0o755)


def test_another_datasets_store_is_refused_before_the_charge(tmp_path):
    path = str(tmp_path / "budget.json")
    budget_store.create(path, "other", epsilon_cap=budget_store.Fraction(5))
    with pytest.raises(ConfigError, match="belongs to dataset 'other', not 'toy'"):
        budget_store.check_reachable(budget_store.StoreSpec(path, "toy"))


def test_a_missing_source_path_is_refused_and_a_glob_left_to_spark(tmp_path):
    with pytest.raises(PreflightError, match=r"source path '.*/nope.parquet' does not exist"):
        check_source_path(str(tmp_path / "nope.parquet"))
    check_source_path(str(tmp_path / "day=*" / "*.parquet"))
    check_source_path(None)  # a table source
    check_source_path(str(tmp_path))


class _Conf:
    def __init__(self, settings):
        self.settings = settings

    def get(self, key, default=None):
        return self.settings.get(key, default)


class _Session:
    def __init__(self, settings):
        self.conf = _Conf(settings)


def test_a_path_without_a_scheme_is_checked_only_where_it_means_a_local_file(monkeypatch):
    # On a cluster whose default file system is HDFS, "data/ratings" is an HDFS path the driver's
    # disk knows nothing of: refusing it there would refuse a source Spark reads fine.
    from dp_spark.jobs.preflight import schemeless_paths_are_local

    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    assert schemeless_paths_are_local(None)
    assert schemeless_paths_are_local(_Session({"spark.hadoop.fs.defaultFS": "file:///"}))
    assert not schemeless_paths_are_local(_Session({"spark.hadoop.fs.defaultFS": "hdfs://namenode:8020"}))
    monkeypatch.setenv("HADOOP_CONF_DIR", "/etc/hadoop/conf")
    assert not schemeless_paths_are_local(_Session({}))
