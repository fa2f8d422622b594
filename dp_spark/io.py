"""Reading and validating records; writing outputs atomically.

``read_records`` returns a DataFrame with our standard columns ``user_id``,
``item_id`` (and ``attr`` when edges are wanted) in the source's own types,
plus ``record_id``: a row identifier assigned right at the file scan (file
split + position), so it is the same when Spark re-runs a task. Bounding uses
it to give every record its own sampling key.

``validate_records`` checks ids in one aggregate pass and casts them; ids outside
the public domain are dropped and counted in the NOT-private diagnostics.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import pandas as pd

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark import bounding, datasets
from dp_spark.config import SourceSpec
from dp_spark.domain import AttributeDomain, ItemDomain
from dp_spark.errors import ConfigError, DataError

ID_COLUMNS = ("user_id", "item_id")
REPORT_FILE = "privacy.json"


def with_record_id(df: DataFrame) -> DataFrame:
    """Tag each row with its position in the scan; call before any shuffle."""
    return df.withColumn("record_id", F.monotonically_increasing_id())


def _read_raw(spark: SparkSession, source: SourceSpec) -> DataFrame:
    try:
        if source.format == "parquet":
            return spark.read.parquet(source.path)
        if source.format == "csv":
            reader = spark.read.option("sep", source.sep).option("header", source.header)
            df = reader.csv(source.path)
            if source.names:
                if len(source.names) != len(df.columns):
                    raise DataError(
                        f"source.names lists {len(source.names)} columns but {source.path!r} has {len(df.columns)}"
                    )
                df = df.toDF(*source.names)
            return df
        return spark.table(source.table)
    except DataError:
        raise
    except Exception as exc:  # AnalysisException and friends: report the first line only
        where = source.path or source.table
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"cannot read source {where!r}: {first_line}") from None


def read_records(spark: SparkSession, source: SourceSpec, want_attr: bool) -> DataFrame:
    """Records as DataFrame[user_id, item_id, attr?, record_id] (ids not yet validated)."""
    wanted = ["user_id", "item_id"] + (["attr"] if want_attr else [])
    if source.format in datasets.LOADERS:
        if source.columns:
            raise ConfigError(f"source.columns is not used with the named loader {source.format!r}")
        return without_dropped_user(datasets.LOADERS[source.format](spark, source.path).select(*wanted, "record_id"),
                                    source)
    df = with_record_id(_read_raw(spark, source))
    selected = []
    for ours in wanted:
        theirs = source.columns.get(ours, ours)
        if theirs not in df.columns:
            available = ", ".join(c for c in df.columns if c != "record_id")
            raise DataError(f"source column {theirs!r} (for {ours}) not found; the source has columns: {available}")
        selected.append(F.col(f"`{theirs}`").alias(ours))
    return without_dropped_user(df.select(*selected, "record_id"), source)


def without_dropped_user(df: DataFrame, source: SourceSpec, column: str = "user_id") -> DataFrame:
    """``df`` without the rows of ``source.drop_user``; ``df`` itself when that is None (always, for
    a release). Applied after ``with_record_id``, so every other row keeps its record id and hence
    its sampling key: the job sees exactly D minus one user. Rows whose user id is not an integer
    are kept, for validation to report."""
    if source.drop_user is None:
        return df
    _bad, user = _integer_problems(df, column)
    return df.where(F.coalesce(user != F.lit(source.drop_user), F.lit(True)))


_INTEGER_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def _integer_problems(df: DataFrame, column: str) -> tuple[Column, Column]:
    """(is not a valid integer id, the value as a long) for one id column."""
    field_type = df.schema[column].dataType
    c = F.col(column)
    if isinstance(field_type, _INTEGER_TYPES):
        return F.lit(False), c.cast("long")
    if isinstance(field_type, T.StringType):
        as_long = F.trim(c).try_cast("long")
        return c.isNotNull() & as_long.isNull(), as_long
    if isinstance(field_type, (T.FloatType, T.DoubleType, T.DecimalType)):
        # try_cast truncates 1.5 to 1 and saturates 2^63 to 2^63 - 1 (which equals 2^63 again as a
        # double), hence the explicit range; floor() would raise an overflow error instead.
        truncated = c.try_cast("long")
        in_range = (c >= F.lit(-(2.0**63))) & (c < F.lit(2.0**63))
        as_long = F.when(in_range & (truncated == c), truncated)
        return c.isNotNull() & as_long.isNull(), as_long
    raise DataError(f"column {column} has type {field_type.simpleString()}; expected integer ids")


def _in_item_domain(item: Column, items: ItemDomain) -> Column:
    inside = item.between(*items.id_range) if items.id_range else item.isin(items.ids.tolist())
    return F.coalesce(inside, F.lit(False))


@dataclass(frozen=True)
class ValidatedRecords:
    records: DataFrame  # in-domain rows only, ids as long, attr as string
    diagnostics: dict  # NOT private: raw counts for the operator
    user_counts: DataFrame  # [user_id, _n]: in-domain rows per user (cached; see release)
    cached: DataFrame  # the persisted per-user table behind user_counts
    users_by_n: pd.Series  # number of users (values) with n in-domain rows (index); NOT private
    # [user_id, _sampled_item]: one in-domain record per user, drawn uniformly (validate_records'
    # one_per_user_salt); None when not asked for. NOT private.
    one_per_user: DataFrame | None = None

    def release(self) -> None:
        """Drop the cached per-user table once the job no longer needs it."""
        self.cached.unpersist()


def _id_problem(df: DataFrame, column: str, rows: int) -> str | None:
    """Why ``column`` is unusable (null or non-integer values), or None. Error path only."""
    bad, _typed = _integer_problems(df, column)
    stats = df.agg(F.sum(F.col(column).isNull().cast("long")).alias("nulls"),
                   F.sum(bad.cast("long")).alias("bad")).first()
    if stats["nulls"]:
        return f"column {column} has {stats['nulls']} null values (of {rows} rows)"
    if stats["bad"]:
        example = df.where(bad).select(F.col(column).cast("string")).first()[0]
        return (f"column {column} has {stats['bad']} non-integer values, e.g. {example!r} (of {rows} rows); ids "
                "must be whole numbers in the 64-bit range")
    return None


def validate_records(df: DataFrame, items: ItemDomain, attributes: AttributeDomain | None,
                     one_per_user_salt: int | None = None) -> ValidatedRecords:
    """Check ids, cast them, and drop rows outside the public domain.

    One pass: a per-user aggregation that counts each user's in-domain rows
    (which bounding reuses), then summed per row count on that small cached
    table (bounding reuses the users per row count too). Null or
    non-integer ids are an error; ids outside the domain are dropped and
    counted in the NOT-private diagnostics.

    The pass keeps as few running sums as it can (each costs about a tenth of
    the scan; docs/performance.md): an unusable user id lands in the null
    user group, an unusable item id is counted only when the column can hold
    one, and rows outside the attribute domain are what is left over. Which
    problem it was is worked out only on the error path.

    With ``one_per_user_salt`` the same aggregation also keeps each user's
    in-domain record of smallest random position under that salt, as
    ``one_per_user``: exactly the record ``bounding.sample_selection(records,
    1, salt=one_per_user_salt)`` keeps, a uniform sample of one record per user
    (HPA's popularity sample with d = 1), without a pass of its own.
    """
    _bad, user = _integer_problems(df, "user_id")
    _bad, item = _integer_problems(df, "item_id")
    attr = F.col("attr").cast("string")
    in_items = _in_item_domain(item, items)
    in_attrs = F.coalesce(attr.isin(list(attributes.values)), F.lit(False)) if attributes else F.lit(True)
    item_field = df.schema["item_id"]
    item_can_be_bad = item_field.nullable or not isinstance(item_field.dataType, _INTEGER_TYPES)
    sums = {"_n": in_items & in_attrs, "out_items": ~in_items}
    if item_can_be_bad:
        sums["bad_items"] = item.isNull()
    sample_inputs, sample = [], []
    if one_per_user_salt is not None:
        if "record_id" not in df.columns:
            raise ValueError("a sample in validation needs the record_id column (io.read_records adds it)")
        # The key that bounding hashes for the validated records: the user id as a long, the record id.
        position = bounding.keyed_position([user, F.col("record_id")], one_per_user_salt)
        in_domain = in_items & in_attrs
        sample_inputs = [F.when(in_domain, item).alias("_sample_item"), F.when(in_domain, position).alias("_sample_at")]
        # min_by passes over rows whose order is null: a user's rows outside the domain are never drawn.
        sample = [F.min_by("_sample_item", "_sample_at").alias("_sampled_item")]
    per_user = (
        df.select(user.alias("user_id"), *[flag.alias(name) for name, flag in sums.items()], *sample_inputs)
        .groupBy("user_id")
        .agg(F.count(F.lit(1)).alias("rows"), *[F.sum(F.col(name).cast("long")).alias(name) for name in sums],
             *sample)
        # Few partitions: the table is small and is broadcast several times.
        .coalesce(df.sparkSession.sparkContext.defaultParallelism)
        .persist()
    )
    # Grouped by row count rather than summed to one row, at no extra cost: the same job then
    # also gives each n's number of users, from which bounding checks its counts (Σ min(n, l)).
    groups = per_user.groupBy("_n", F.col("user_id").isNull().alias("null_user")).agg(
        F.count(F.lit(1)).alias("users"), F.sum("rows").alias("rows"), F.sum("out_items").alias("out_items"),
        (F.sum("bad_items") if item_can_be_bad else F.lit(0)).alias("bad_items"),
    ).toPandas()
    stats = {"rows": int(groups["rows"].sum()), "_n": int((groups["_n"] * groups["users"]).sum()),
             "out_items": int(groups["out_items"].sum()), "bad_items": int(groups["bad_items"].sum()),
             "bad_users": int(groups.loc[groups["null_user"], "rows"].sum())}
    if not stats["rows"]:
        per_user.unpersist()
        raise DataError("the source has no records")
    for column in ID_COLUMNS if stats["bad_users"] or stats["bad_items"] else ():
        problem = _id_problem(df, column, stats["rows"])
        if problem:
            per_user.unpersist()
            raise DataError(problem)
    records = df.select(
        user.alias("user_id"),
        item.alias("item_id"),
        *([attr.alias("attr")] if attributes else []),
        "record_id",
    )
    # On clean data the filter keeps every row, and leaving it out spares each later pass the
    # attribute check, and the popularity sample the attribute column (docs/performance.md).
    if stats["_n"] < stats["rows"]:
        records = records.where(in_items & in_attrs)
    diagnostics = {
        "rows_read": stats["rows"],
        "rows_outside_item_domain": stats["out_items"],
        # Rows whose item is in the domain but whose attribute value is not.
        "rows_outside_attribute_domain": stats["rows"] - stats["_n"] - stats["out_items"],
    }
    counts = per_user.where(F.col("_n") > 0).select("user_id", "_n")
    users_by_n = groups[groups["_n"] > 0].groupby("_n")["users"].sum()
    one_per_user = per_user.where(F.col("_n") > 0).select("user_id", "_sampled_item") if sample else None
    return ValidatedRecords(records, diagnostics, counts, per_user, users_by_n, one_per_user)


# ---------------------------------------------------------------------------
# Output: through Hadoop's FileSystem so local paths, HDFS and object stores
# behave the same way.


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
