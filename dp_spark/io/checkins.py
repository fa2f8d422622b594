"""Check-in data for location entropy: reading, checking, and paper 004's synthetic sets.

A check-in table has our columns ``user_id``, ``item_id`` (the location), ``time``
(optional; a number or a timestamp; only its order is used) and ``visits``
(optional, default 1: how many visits the row stands for, so pre-aggregated
data such as the synthetic sets can be read without expanding it).

Sources: ``checkins`` reads text files of user, location[, time[, lat, lon]]
lines, tab- or comma-separated (the first line decides); ``parquet``, ``csv`` and
``table`` use ``source.columns``; ``checkins-synthetic`` reads the table
:func:`generate` writes.
"""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dp_spark.core.domain import ItemDomain
from dp_spark.errors import ConfigError, DataError
from dp_spark.io import sources, validation
from dp_spark.io.sources import SourceSpec
from dp_spark.io.sql_literals import in_id_list

CHECKIN_FIELDS = ("user_id", "item_id", "time", "lat", "lon")
PAPER_TABLE_2 = {  # paper 004 Table 2 (specification §9.5)
    "sparse": {"users": 100_000, "locations": 10_000, "max_locations_per_user": 100, "avg_locations_per_user": 19.28,
               "max_visits": 20_813, "avg_visits": 2_578.0, "avg_users_per_location": 192.9, "avg_entropy": 3.19},
    "dense": {"users": 10_000_000, "locations": 10_000, "max_locations_per_user": 100,
              "avg_locations_per_user": 19.28, "max_visits": 24_035, "avg_visits": 2_575.8,
              "avg_users_per_location": 19_278, "avg_entropy": 7.79},
}


# Compressed text Spark reads by its file name's extension; the first line is read the same way.
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open}


def _first_line(path: Path, encoding: str) -> str:
    opener = _OPENERS.get(path.suffix, open)
    with opener(path, "rt", encoding=encoding, errors="replace") as handle:
        return handle.readline()


def _text_checkins(spark: SparkSession, path: str, encoding: str = "utf-8") -> DataFrame:
    files = sorted(p for p in Path(path).glob("*") if not p.name.startswith((".", "_"))) if Path(path).is_dir() \
        else [Path(path)]
    if not files or not files[0].exists():
        raise DataError(f"check-in file {path!r} not found")
    first = _first_line(files[0], encoding)
    sep = "\t" if "\t" in first else ","
    raw = spark.read.option("sep", sep).option("header", False).option("encoding", encoding).csv(path)
    if len(raw.columns) < 2:
        raise DataError(f"{path!r}: expected at least user and location per line, separated by tabs or commas")
    names = CHECKIN_FIELDS[: len(raw.columns)] + tuple(f"_extra{i}" for i in range(len(raw.columns) - 5))
    return raw.toDF(*names)


def read_checkins(spark: SparkSession, source: SourceSpec) -> DataFrame:
    """[user_id, item_id, time (double or null), visits (long)], ids not yet checked."""
    if source.format == "checkins":
        df = _text_checkins(spark, source.spark_path, source.encoding)
    elif source.format == "checkins-synthetic":
        df = spark.read.parquet(source.spark_path).withColumnRenamed("location_id", "item_id") \
            .withColumnRenamed("first_time", "time")
    else:
        df = sources._read_raw(spark, source)
        df = df.select(*[F.col(f"`{theirs}`").alias(ours) for ours, theirs in
                         {c: source.columns.get(c, c) for c in ("user_id", "item_id", "time", "visits")}.items()
                         if theirs in df.columns])
    time_name = {"checkins-synthetic": "first_time"}.get(source.format, source.columns.get("time", "time"))
    return sources.without_dropped_user(standard_checkins(df, time_name), source)


def standard_checkins(df: DataFrame, time_name: str = "time") -> DataFrame:
    """[user_id, item_id, time (double or null), visits, time_raw] from check-ins with our column
    names, of which time (a number or a timestamp) and visits (default 1 a row) may be missing.
    ``time_raw`` is the time as given (a string; null without a time column), named ``time_name``
    (the source's column) in its metadata, for :func:`validate_checkins`' messages."""
    for needed in ("user_id", "item_id"):
        if needed not in df.columns:
            raise DataError(f"the check-in source has no {needed} column (columns: {', '.join(df.columns)})")
    time = F.col("time") if "time" in df.columns else F.lit(None)
    # Numbers keep their order; timestamps become seconds; anything else is no time at all
    # (validate_checkins refuses it when the time decides which locations a user keeps).
    as_time = F.coalesce(time.try_cast("double"), F.unix_timestamp(time.cast("string").try_cast("timestamp"))
                         .cast("double")) if "time" in df.columns else F.lit(None).cast("double")
    visits = F.col("visits") if "visits" in df.columns else F.lit(1)
    raw = time.cast("string").alias("time_raw", metadata={"source_column": time_name if "time" in df.columns
                                                          else None})
    return df.select("user_id", "item_id", as_time.alias("time"), visits.alias("visits"), raw)


def _checked(df: DataFrame, locations: ItemDomain):
    """(the records, user id as validation reads it (io.validation.user_values), location id as a
    long, visits as a long, whether the location is in the set, whether the row is kept): null where
    a value is unusable; a row is kept when its user id is usable, its location in the set and its
    visits a positive whole number. A set that lists its ids is checked in one SQL expression
    (io.sql_literals) over the location id as a column of its own, which the records returned carry."""
    if locations.is_string:
        raise ConfigError(f"location ids must be integers; the location set {locations.description} holds strings")
    _bad, user = validation.user_values(df)
    _bad, item = validation._integer_problems(df, "item_id")
    visits = F.col("visits").try_cast("long")
    if locations.id_range:
        in_set = item.between(*locations.id_range)
    else:
        df = df.withColumn(_LOCATION_LONG, item)
        item = F.col(_LOCATION_LONG)
        in_set = in_id_list(_LOCATION_LONG, locations.ids)
    in_set = F.coalesce(in_set, F.lit(False))
    return df, user, item, visits, in_set, in_set & F.coalesce(visits >= 1, F.lit(False)) & user.isNotNull()


_LOCATION_LONG = "_location_id_long"


def check_schema(df: DataFrame, locations: ItemDomain, by_time: bool) -> None:
    """A DataError (or ConfigError) when the check-ins cannot be read as the job reads them: ids of a
    type no id can have, string location ids, or no time column for a choice by first visit. The
    schema is public: checked before the charge (and again on validation)."""
    def columns() -> DataFrame:
        checked, user, item, visits, _in_set, kept = _checked(df, locations)
        return checked.select(user.alias("u"), item.alias("i"), visits.alias("v"), kept.alias("k"))

    validation.analysed(columns)
    if by_time and df.schema["time_raw"].metadata.get("source_column") is None:
        raise DataError("algorithm.location_choice = \"first_visit\" keeps each user's first M locations by time, "
                        "and the source has no time column: name it (source.columns.time), or set "
                        "algorithm.location_choice = \"random\" to keep a uniformly random M")


def validate_checkins(df: DataFrame, locations: ItemDomain, first_m: int | None = None, strict: bool = False,
                      progress=None) -> tuple[DataFrame, dict]:
    """Ids cast to long, visits checked (a positive integer), rows outside the public location
    set dropped and counted (NOT private), and so are rows with a null or non-integer id or
    unusable visits: whether a run goes on must not depend on one record.

    ``first_m``: the M of a job that keeps each user's first M locations by first visit (None
    when time is not used). The source must then have a time column (its schema is public: a
    DataError otherwise); a check-in whose time is empty or does not parse counts as the latest
    (bounding's order, ties by location id).

    ``strict`` (guards.strict): unusable ids or visits, or no records at all, are a DataError
    instead, and with ``first_m`` so are a time that is neither a number nor a timestamp and a
    user with more than M locations of which one has no time (the choice would fall to location
    ids, specification §7.3); ``progress`` gets how many (a diagnostic)."""
    check_schema(df, locations, first_m is not None)
    df, user, item, visits, in_set, kept = _checked(df, locations)
    stats = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(user.isNull().cast("long")).alias("bad_users"),
        F.sum(item.isNull().cast("long")).alias("bad_items"),
        F.sum(F.coalesce(visits < 1, F.lit(True)).cast("long")).alias("bad_visits"),
        F.sum((~in_set).cast("long")).alias("outside"),
        *_time_sums(df, first_m),
    ).first().asDict()
    stats = {name: value or 0 for name, value in stats.items()}  # sums over no rows are null
    records = df.where(kept).select(user.alias("user_id"), item.alias("item_id"), "time", visits.alias("visits"))
    if strict:
        _refuse_malformed(stats, progress)
        if first_m is not None:
            _refuse_unordered(df, records, stats, first_m, progress)
    return records, {"rows_read": stats["rows"], "rows_outside_location_set": stats["outside"] - stats["bad_items"],
                     "rows_invalid_user_id": stats["bad_users"], "rows_invalid_item_id": stats["bad_items"],
                     "rows_invalid_visits": stats["bad_visits"]}


def _refuse_malformed(stats, progress) -> None:
    rows = stats["rows"]
    if not rows:
        validation.refuse_strictly("the check-in source has no records", "0 rows", progress)
    for column, count in (("user_id", stats["bad_users"]), ("item_id", stats["bad_items"])):
        if count:
            validation.refuse_strictly(f"column {column} has null or non-integer values", f"{count:,} of {rows:,} rows",
                                       progress)
    if stats["bad_visits"]:
        validation.refuse_strictly("column visits has values that are not positive integers",
                                   f"{stats['bad_visits']:,} of {rows:,} rows", progress)


def guard_figures(df: DataFrame, locations: ItemDomain) -> tuple[int, int]:
    """(users with a usable id, the sum over them of ⌊SHARE_GRID · d/n⌋, d of a user's n rows
    not kept by validate_checkins): the guards' figures (release.guards; NOT private until
    noised). A pass of its own, run only when a guard is set."""
    df, user, _item, _visits, _in_set, kept = _checked(df, locations)
    per_user = (df.select(user.alias("user_id"), (~kept).cast("long").alias("d")).where(F.col("user_id").isNotNull())
                .groupBy("user_id").agg(F.count(F.lit(1)).alias("n"), F.sum("d").alias("d")))
    row = per_user.agg(F.count(F.lit(1)).alias("users"),
                       F.sum(F.expr(f"d * {validation.SHARE_GRID} div n")).alias("share")).first()
    return int(row["users"]), int(row["share"] or 0)


def _time_sums(df: DataFrame, first_m: int | None) -> list:
    if first_m is None:
        return []
    unparsed = F.col("time_raw").isNotNull() & F.col("time").isNull()
    return [
        F.sum(unparsed.cast("long")).alias("bad_times"),
        F.sum(F.col("time").isNull().cast("long")).alias("untimed"),
    ]


def _refuse_unordered(df: DataFrame, records: DataFrame, stats, first_m: int, progress) -> None:
    """guards.strict: DataError when time cannot order what bounding keeps (see
    validate_checkins); the extra pass over the pairs runs only when some check-in has no time."""
    name = df.schema["time_raw"].metadata.get("source_column")
    if stats["bad_times"]:
        example = df.where(F.col("time_raw").isNotNull() & F.col("time").isNull()).select("time_raw").first()[0]
        validation.refuse_strictly(f"column {name} has values that are neither numbers nor timestamps (each user's "
                                   "first M locations are chosen by time, so every check-in needs one)",
                                   f"{stats['bad_times']:,} of {stats['rows']:,} rows, e.g. {example!r}", progress)
    if not stats["untimed"]:
        return
    firsts = records.groupBy("user_id", "item_id").agg(F.min("time").alias("first"))
    users = firsts.groupBy("user_id").agg(F.count(F.lit(1)).alias("n"), F.count("first").alias("timed")) \
        .where((F.col("n") > first_m) & (F.col("timed") < F.col("n"))).count()
    if users:
        missing = f"the column {name} is empty in {stats['untimed']:,} of {stats['rows']:,} rows"
        who = "1 user has" if users == 1 else f"{users:,} users have"
        validation.refuse_strictly(
            f"some users have more than M = {first_m} locations and check-ins without a time: their first M by "
            "first visit are not known (they would be chosen by location id). Give every check-in a time "
            "(source.columns.time), or set algorithm.location_choice = \"random\" to keep a uniformly random M",
            f"{who} more than M locations; {missing}", progress)


# ---------------------------------------------------------------------------
# Paper 004's synthetic data (specification §7.6: the paper gives only the popularity laws).


def _harmonic_weights(n: int) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1)
    return w / w.sum()


def generate(users: int, out: str, locations: int = 10_000, max_locations: int = 100, max_visits: int = 25_000,
             seed: int = 0, chunk: int = 200_000) -> dict:
    """Write a Sparse/Dense-style table (user_id, location_id, visits, first_time) as Parquet.

    Per user: its number of distinct locations k with P(k) ∝ 1/k on 1..max_locations (mean
    100/H_100 = 19.27, Table 2's 19.28); k distinct locations drawn with P(x) ∝ 1/x over the
    location ids; visits to each with P(v) ∝ 1/v on 1..max_visits (mean ≈ 2,340 at 25,000;
    Table 2 has about 2,578); a first-visit time uniform in [0, 1). Users y = 1..users; the
    paper's "users ∝ 1/y" is read as user y's place in this order, which no statistic here sees.
    """
    rng = np.random.default_rng(seed)
    p_count = _harmonic_weights(max_locations)
    p_location = _harmonic_weights(locations)
    p_visits = _harmonic_weights(max_visits)
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("part-*.parquet"):
        old.unlink()
    totals = {"rows": 0, "max_locations_per_user": 0, "max_visits": 0, "visits": 0}
    for part, start in enumerate(range(0, users, chunk)):
        ids = np.arange(start + 1, min(start + chunk, users) + 1)
        counts = rng.choice(max_locations, size=ids.size, p=p_count) + 1
        rows_user = np.repeat(ids, counts)
        # Distinct locations per user: draw with replacement and redraw duplicates, which keeps
        # P(x) ∝ 1/x among a user's remaining choices (sequential sampling without replacement).
        chosen = rng.choice(locations, size=rows_user.size, p=p_location) + 1
        frame = pd.DataFrame({"user_id": rows_user, "location_id": chosen})
        duplicated = frame.duplicated(["user_id", "location_id"]).to_numpy()
        while duplicated.any():
            frame.loc[duplicated, "location_id"] = rng.choice(locations, size=int(duplicated.sum()), p=p_location) + 1
            duplicated = frame.duplicated(["user_id", "location_id"]).to_numpy()
        frame["visits"] = rng.choice(max_visits, size=len(frame), p=p_visits) + 1
        frame["first_time"] = rng.random(len(frame))
        frame.to_parquet(path / f"part-{part:05d}.parquet", index=False)
        totals["rows"] += len(frame)
        totals["max_locations_per_user"] = max(totals["max_locations_per_user"], int(counts.max()))
        totals["max_visits"] = max(totals["max_visits"], int(frame["visits"].max()))
        totals["visits"] += int(frame["visits"].sum())
    stats = {"users": users, "locations": locations, "rows": totals["rows"],
            "max_locations_per_user": totals["max_locations_per_user"],
            "avg_locations_per_user": totals["rows"] / users, "max_visits": totals["max_visits"],
            "avg_visits": totals["visits"] / totals["rows"], "avg_users_per_location": totals["rows"] / locations,
            "expected_avg_visits": float(max_visits / np.sum(1.0 / np.arange(1, max_visits + 1)))}
    (path / "_stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    return stats


def generated_stats(path: str | Path) -> dict:
    """The statistics :func:`generate` recorded beside its table."""
    return json.loads((Path(path) / "_stats.json").read_text())
