"""Writing a release (Parquet tables and privacy.json) all or nothing, and reading its report back.

Output goes through Hadoop's FileSystem so local paths, HDFS and object stores
behave the same way.
"""

from __future__ import annotations

import json
import uuid

from pyspark.sql import DataFrame, SparkSession

from dp_spark.errors import ConfigError, DataError

REPORT_FILE = "privacy.json"


def _filesystem(spark: SparkSession, path: str):
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hadoop_path


def _siblings(fs, target, kind: str) -> list:
    """Hidden siblings ``.{name}.{kind}-*`` that a write of ``target`` leaves behind if killed."""
    prefix = f".{target.getName()}.{kind}-"
    parent = target.getParent()
    if not fs.exists(parent):
        return []
    return [status.getPath() for status in fs.listStatus(parent) if status.getPath().getName().startswith(prefix)]


def _recover(fs, target) -> None:
    """Finish what a killed write left: put back a previous release that was moved aside, and drop
    staging and scratch directories (one job writes an output at a time)."""
    previous = _siblings(fs, target, "previous")
    if previous and not fs.exists(target):
        fs.rename(previous[0], target)  # killed between moving the old release aside and moving the new one in
    for kind in ("previous", "tmp", "perturbed"):
        for leftover in _siblings(fs, target, kind):
            fs.delete(leftover, True)


def check_output_location(spark: SparkSession, output: str) -> None:
    """Refuse to replace a non-empty directory that is not a dp-spark output.

    Called before any data is read, so a typo in ``output`` cannot wipe a
    directory that holds something else. Also recovers from a job killed while writing here.
    """
    fs, path = _filesystem(spark, output)
    _recover(fs, path)
    if not fs.exists(path):
        return
    if not fs.getFileStatus(path).isDirectory():
        raise ConfigError(f"output {output!r} exists and is a file, not a directory")
    report = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path, REPORT_FILE)
    if fs.listStatus(path) and not fs.exists(report):
        raise ConfigError(
            f"output {output!r} exists, is not empty and holds no {REPORT_FILE}: "
            "refusing to replace it (choose another output or remove it)"
        )


def check_partitioned_output(spark: SparkSession, output: str, partition_key: str) -> None:
    """Refuse a partitioned output directory that holds anything but ``key=value`` partitions."""
    fs, path = _filesystem(spark, output)
    if not fs.exists(path):
        return
    if not fs.getFileStatus(path).isDirectory():
        raise ConfigError(f"output {output!r} exists and is a file, not a directory")
    for status in fs.listStatus(path):
        name = status.getPath().getName()
        if not (name.startswith((".", "_")) or (name.startswith(f"{partition_key}=") and status.isDirectory())):
            raise ConfigError(f"output {output!r} holds {name!r}, which is not a {partition_key}=... partition: "
                              "refusing to write run-date partitions there (choose another output)")


def release_exists(spark: SparkSession, output: str) -> bool:
    fs, path = _filesystem(spark, output)
    return fs.exists(spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path, REPORT_FILE))


def read_report(spark: SparkSession, output: str) -> dict:
    """The privacy report of an existing release."""
    fs, path = _filesystem(spark, output)
    stream = fs.open(spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path, REPORT_FILE))
    try:
        text = spark.sparkContext._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    return json.loads(text)


def write_release(spark: SparkSession, output: str, tables: dict, report: dict) -> None:
    """Write Parquet tables (pandas or Spark DataFrames) and privacy.json, all or nothing.

    Everything goes to a hidden sibling directory first. The previous release, if any, is then
    renamed aside, the new one renamed into place, and the previous one deleted. Readers (which
    skip hidden names) see the old release or the new one, never a mix; a job killed between the
    two renames leaves the old release aside, and the next job on this output puts it back
    (``check_output_location``).
    """
    fs, target = _filesystem(spark, output)
    jvm_path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
    parent = target.getParent()
    staging = jvm_path(parent, f".{target.getName()}.tmp-{uuid.uuid4().hex}")
    try:
        for name, frame in tables.items():
            if isinstance(frame, DataFrame):  # large: written by the executors, as many files as partitions
                frame.write.parquet(staging.toString() + "/" + name)
            else:
                spark.createDataFrame(frame).coalesce(1).write.parquet(staging.toString() + "/" + name)
        stream = fs.create(jvm_path(staging, REPORT_FILE), True)
        try:
            stream.write(bytearray(json.dumps(report, indent=2, sort_keys=False).encode("utf-8")))
        finally:
            stream.close()
        previous = jvm_path(parent, f".{target.getName()}.previous-{uuid.uuid4().hex}")
        if fs.exists(target) and not fs.rename(target, previous):
            raise DataError(f"cannot move the previous output {output!r} aside")
        if not fs.rename(staging, target):
            if fs.exists(previous):
                fs.rename(previous, target)
            raise DataError(f"cannot move the new output into place at {output!r}")
        if fs.exists(previous):
            fs.delete(previous, True)
    finally:
        if fs.exists(staging):
            fs.delete(staging, True)
