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

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark import datasets
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
        return datasets.LOADERS[source.format](spark, source.path).select(*wanted, "record_id")
    df = with_record_id(_read_raw(spark, source))
    selected = []
    for ours in wanted:
        theirs = source.columns.get(ours, ours)
        if theirs not in df.columns:
            available = ", ".join(c for c in df.columns if c != "record_id")
            raise DataError(f"source column {theirs!r} (for {ours}) not found; the source has columns: {available}")
        selected.append(F.col(f"`{theirs}`").alias(ours))
    return df.select(*selected, "record_id")


def _integer_problems(df: DataFrame, column: str) -> tuple[Column, Column]:
    """(is not a valid integer id, the value as a long) for one id column."""
    field_type = df.schema[column].dataType
    c = F.col(column)
    if isinstance(field_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return F.lit(False), c.cast("long")
    if isinstance(field_type, T.StringType):
        as_long = F.trim(c).try_cast("long")
        return c.isNotNull() & as_long.isNull(), as_long
    if isinstance(field_type, (T.FloatType, T.DoubleType, T.DecimalType)):
        whole = c.isNotNull() & ~F.isnan(c.cast("double")) & (c == F.floor(c))
        return c.isNotNull() & ~whole, F.when(whole, c.try_cast("long"))
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

    def release(self) -> None:
        """Drop the cached per-user table once the job no longer needs it."""
        self.cached.unpersist()


def _first_bad_value(df: DataFrame, column: str, bad: Column) -> str | None:
    row = df.where(bad).select(F.col(column).cast("string")).first()
    return None if row is None else row[0]


def validate_records(df: DataFrame, items: ItemDomain, attributes: AttributeDomain | None) -> ValidatedRecords:
    """Check ids, cast them, and drop rows outside the public domain.

    One pass: a per-user aggregation that counts each user's in-domain rows
    (which bounding reuses) and the problems, summed on a small cached table.
    Null or non-integer ids are an error; ids outside the domain are dropped
    and counted in the NOT-private diagnostics.
    """
    bad, typed = {}, {}
    for column in ID_COLUMNS:
        bad[column], typed[column] = _integer_problems(df, column)
    attr = F.col("attr").cast("string")
    in_items = _in_item_domain(typed["item_id"], items)
    in_attrs = F.coalesce(attr.isin(list(attributes.values)), F.lit(False)) if attributes else F.lit(True)
    flags = {
        "user_id_null": F.col("user_id").isNull(),
        "user_id_bad": bad["user_id"],
        "item_id_null": F.col("item_id").isNull(),
        "item_id_bad": bad["item_id"],
        "out_items": ~in_items,
        "out_attrs": ~in_attrs,
    }
    per_user = (
        df.select(typed["user_id"].alias("user_id"), (in_items & in_attrs).alias("_valid"),
                  *[flag.alias(name) for name, flag in flags.items()])
        .groupBy("user_id")
        .agg(F.count(F.lit(1)).alias("rows"), F.sum(F.col("_valid").cast("long")).alias("_n"),
             *[F.sum(F.col(name).cast("long")).alias(name) for name in flags])
        # Few partitions: the table is small and is broadcast several times.
        .coalesce(df.sparkSession.sparkContext.defaultParallelism)
        .persist()
    )
    stats = per_user.agg(*[F.sum(c).alias(c) for c in ["rows", *flags]]).first().asDict()
    if not stats["rows"]:
        per_user.unpersist()
        raise DataError("the source has no records")
    for column in ID_COLUMNS:
        problem = None
        if stats[f"{column}_null"]:
            problem = f"column {column} has {stats[f'{column}_null']} null values (of {stats['rows']} rows)"
        elif stats[f"{column}_bad"]:
            problem = (f"column {column} has {stats[f'{column}_bad']} non-integer values, "
                       f"e.g. {_first_bad_value(df, column, bad[column])!r} (of {stats['rows']} rows)")
        if problem:
            per_user.unpersist()
            raise DataError(problem)
    records = df.select(
        typed["user_id"].alias("user_id"),
        typed["item_id"].alias("item_id"),
        *([attr.alias("attr")] if attributes else []),
        "record_id",
    ).where(in_items & in_attrs)
    diagnostics = {
        "rows_read": stats["rows"],
        "rows_outside_item_domain": stats["out_items"],
        "rows_outside_attribute_domain": stats["out_attrs"] if attributes else 0,
    }
    return ValidatedRecords(records, diagnostics, per_user.where(F.col("_n") > 0).select("user_id", "_n"), per_user)


# ---------------------------------------------------------------------------
# Output: through Hadoop's FileSystem so local paths, HDFS and object stores
# behave the same way.


def _filesystem(spark: SparkSession, path: str):
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hadoop_path


def check_output_location(spark: SparkSession, output: str) -> None:
    """Refuse to replace a non-empty directory that is not a dp-spark output.

    Called before any data is read, so a typo in ``output`` cannot wipe a
    directory that holds something else.
    """
    fs, path = _filesystem(spark, output)
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


def write_release(spark: SparkSession, output: str, tables: dict, report: dict) -> None:
    """Write Parquet tables (pandas DataFrames) and privacy.json, all or nothing.

    Everything goes to a hidden sibling directory first, which then replaces
    ``output`` by a rename: a failed run leaves the previous output untouched.
    """
    fs, target = _filesystem(spark, output)
    jvm_path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
    parent = target.getParent()
    staging = jvm_path(parent, f".{target.getName()}.tmp-{uuid.uuid4().hex}")
    try:
        for name, frame in tables.items():
            spark.createDataFrame(frame).coalesce(1).write.parquet(staging.toString() + "/" + name)
        stream = fs.create(jvm_path(staging, REPORT_FILE), True)
        try:
            stream.write(bytearray(json.dumps(report, indent=2, sort_keys=False).encode("utf-8")))
        finally:
            stream.close()
        if fs.exists(target) and not fs.delete(target, True):
            raise DataError(f"cannot remove the previous output {output!r}")
        if not fs.rename(staging, target):
            raise DataError(f"cannot move the new output into place at {output!r}")
    finally:
        if fs.exists(staging):
            fs.delete(staging, True)
