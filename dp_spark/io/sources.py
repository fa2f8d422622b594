"""Reading records: one DataFrame with our standard columns, whatever the source.

``read_records`` returns ``user_id``, ``item_id`` (and ``attr`` when edges are
wanted) in the source's own types, plus ``row_key``: a hash of the row's content
and its occurrence index among the user's identical rows
(:func:`dp_spark.bounding.keys.with_row_key`), the same whatever the scan order
or the other users' rows. Bounding gives every record its own sampling key from it.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dp_spark.bounding.keys import ROW_KEY, text_user, with_row_key
from dp_spark.errors import ConfigError, DataError
from dp_spark.io import datasets
from dp_spark.io.validation import user_values


@dataclass(frozen=True)
class SourceSpec:
    format: str
    path: str | None = None
    table: str | None = None
    sep: str = ","
    header: bool = True
    names: tuple[str, ...] | None = None
    columns: dict[str, str] = field(default_factory=dict)
    # Set only by `dp-spark audit-report` (a NOT private test): the source minus this user, the
    # neighbouring input D′ (io.without_dropped_user). No config key sets it.
    drop_user: int | str | None = None
    # source.distinct_records: the operator vouches that no user has two identical records, so
    # the rows' occurrence indices (a shuffle of every record) are not computed (bounding.keys).
    distinct_records: bool = False
    # source.encoding: the character set of a CSV or check-in text file, as Spark names it
    # ("utf-8", "iso-8859-1", "utf-16le", ...; jobs.config.SPARK_CHARSETS).
    encoding: str = "utf-8"
    # source.attribute: with a MovieLens loader, what a rating's attribute is ("gender_age", the
    # papers' six values; "gender"; "age"); None: the loader's default.
    attribute: str | None = None

    @property
    def spark_path(self) -> str | None:
        """``path`` as Spark is to read it: a path without a scheme is local to where the job was
        started, so it is made absolute (a Spark Connect server resolves a relative path against its
        own working directory)."""
        if self.path is None:
            return None
        scheme = urlsplit(self.path).scheme
        return os.path.abspath(self.path) if len(scheme) <= 1 else self.path  # one letter: a Windows drive


def _read_raw(spark: SparkSession, source: SourceSpec) -> DataFrame:
    try:
        if source.format == "parquet":
            return spark.read.parquet(source.spark_path)
        if source.format == "csv":
            reader = spark.read.option("sep", source.sep).option("header", source.header) \
                .option("encoding", source.encoding)
            df = reader.csv(source.spark_path)
            if source.header:
                refuse_data_as_header(df.columns, source)
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
    except Exception as exc:  # AnalysisException, Py4J's errors and friends: the root cause in one line
        raise DataError(f"cannot read source {source.path or source.table!r}: {spark_error_line(exc)}") from None


# Spark's error classes: "[CANNOT_READ_FILE_FOOTER] Could not read footer for file: ..." names
# what went wrong; Py4J's first line ("An error occurred while calling o39.parquet.") does not.
_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)*\] .*")


def spark_error_line(exc: BaseException) -> str:
    """One line that says why Spark failed: the first line with an error class and its message
    (without Java's exception name or the SQLSTATE), else the message's first line."""
    text = str(exc).strip()
    for line in text.splitlines():
        found = _ERROR_CLASS.search(line)
        if found:
            return re.sub(r"\s*SQLSTATE: \w+\s*$", "", found.group(0)).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def refuse_data_as_header(names: list[str], source: SourceSpec) -> None:
    """Raise DataError when a CSV read with a header has a first line that reads as data (numbers,
    dates): the file has no header, and its first record would silently be taken as one."""
    if any(name in source.columns.values() for name in names):
        return  # the config names these columns: a header of numbers, but meant
    fields = [name for name in names if not re.fullmatch(r"_c\d+", name)]  # Spark's names for empty fields
    if fields and all(_reads_as_data(name) for name in fields):
        raise DataError(f"{source.path!r} seems to have no header: its first line reads as data "
                        f"({', '.join(names[:6])}{', ...' if len(names) > 6 else ''}) and would be dropped as one; "
                        "set source.header = false and source.names = [...] (the column names)")


def _reads_as_data(text: str) -> bool:
    """Whether a header field is a number or an ISO date/time rather than a column name."""
    try:
        float(text)
        return True
    except ValueError:
        pass
    try:
        dt.datetime.fromisoformat(text.strip())
        return True
    except ValueError:
        return False


def read_records(spark: SparkSession, source: SourceSpec, want_attr: bool, want_value: bool = False) -> DataFrame:
    """Records as DataFrame[user_id, item_id, attr?, value?, row_key] (ids not yet validated)."""
    wanted = ["user_id", "item_id"] + (["attr"] if want_attr else []) + (["value"] if want_value else [])
    if source.format in datasets.LOADERS:
        if source.columns:
            raise ConfigError(f"source.columns is not used with the named loader {source.format!r}")
        if want_value and not datasets.has_values(source.format, source.spark_path):
            raise DataError(f"{source.format} source {source.path!r} holds no values to sum (no ratings); for "
                            "MovieLens 1M give a file with ratings, e.g. path = \".../ml-1m/"
                            "ratings_users_0001-2999.dat.gz\"")
        options = {"attribute": source.attribute} if source.attribute else {}
        records = datasets.LOADERS[source.format](spark, source.spark_path, **options).select(*wanted)
    else:
        df = _read_raw(spark, source)
        selected = []
        for ours in wanted:
            theirs = source.columns.get(ours, ours)
            if theirs not in df.columns:
                raise DataError(f"source column {theirs!r} (for {ours}) not found; the source has columns: "
                                f"{', '.join(df.columns)}")
            selected.append(F.col(f"`{theirs}`").alias(ours))
        records = df.select(*selected)
    distinct = source.distinct_records or source.format in datasets.DISTINCT_RECORDS
    return with_row_key(without_dropped_user(records, source), distinct=distinct)


def read_keyed_records(spark: SparkSession, source: SourceSpec, columns: tuple[str, ...]) -> DataFrame:
    """Records as DataFrame[user_id, *columns] (an aggregation's key and value columns, under their
    own names; ids not yet validated). A named loader's records have the columns user_id, item_id,
    attr and value (when its file holds values); any other source names its user column in
    source.columns.user_id (default user_id)."""
    if source.format in datasets.LOADERS:
        if source.columns:
            raise ConfigError(f"source.columns is not used with the named loader {source.format!r}")
        options = {"attribute": source.attribute} if source.attribute else {}
        df = datasets.LOADERS[source.format](spark, source.spark_path, **options)
        user = "user_id"
    else:
        extra = sorted(set(source.columns) - {"user_id"})
        if extra:
            raise ConfigError(f"source.columns.{extra[0]}: an aggregation names its key and value columns as the "
                              "source does; source.columns names only the user column (user_id)")
        df = _read_raw(spark, source)
        user = source.columns.get("user_id", "user_id")
    missing = [name for name in (user, *columns) if name not in df.columns]
    if missing:
        raise DataError(f"source column {missing[0]!r} not found; the source has columns: {', '.join(df.columns)}")
    if user != "user_id" and "user_id" in columns:
        raise DataError(f"a key or value column is named user_id besides the user column {user!r}: rename one")
    if user in columns:
        raise ConfigError(f"the user column {user!r} cannot also be a key or value column")
    records = df.select(F.col(f"`{user}`").alias("user_id"), *[F.col(f"`{name}`") for name in columns])
    return without_dropped_user(records, source)


def without_dropped_user(df: DataFrame, source: SourceSpec, column: str = "user_id") -> DataFrame:
    """``df`` without the rows of ``source.drop_user``; ``df`` itself when that is None (always, for
    a release). Every other row keeps its row key and hence its sampling key (a function of its
    user's records alone): the job sees exactly D minus one user, the id compared as validation reads
    it (io.validation.user_values). Rows whose user id is unusable are kept, for validation to report."""
    if source.drop_user is None:
        return df
    _bad, user = user_values(df, column)
    text = str(source.drop_user).strip()
    number = int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None
    if not text_user(df, column) and number is None:
        raise ConfigError(f"user {source.drop_user!r} cannot be removed: the user ids are numbers")
    dropped = (text if number is None else str(number)) if text_user(df, column) else number
    return df.where(F.coalesce(user != F.lit(dropped), F.lit(True)))


def read_whole_records(spark: SparkSession, source: SourceSpec) -> DataFrame:
    """Whole records with their own columns (FRAPP), the user id column (source.columns.user_id,
    by default user_id) renamed to ``user_id`` when the source has one; without it every row is
    taken as one user."""
    df = datasets.RAW_LOADERS[source.format](spark, source.spark_path) if source.format in datasets.RAW_LOADERS \
        else _read_raw(spark, source)
    name = source.columns.get("user_id", "user_id")
    if name not in df.columns:
        if "user_id" in source.columns:
            raise DataError(f"source column {name!r} (for user_id) not found; the source has: {', '.join(df.columns)}")
        if source.drop_user is not None:
            raise ConfigError("the source has no user id column (source.columns.user_id): no user can be removed")
        return df
    if "user_id" in df.columns and name != "user_id":
        raise DataError(f"the source has a column user_id besides its user column {name!r}: rename one of them")
    if ROW_KEY in df.columns:
        raise DataError(f"the source has a column named {ROW_KEY}, which dp-spark adds: rename it")
    return with_row_key(without_dropped_user(df.withColumnRenamed(name, "user_id"), source),
                        distinct=source.distinct_records)
