"""DPSense's aggregates (specification §4.2, §4.3, §10): column sums of the θ-limited rows, and
the row-length histograms that its quality functions are computed from. Only per-item (or
per-item and length) groups reach the driver; NOT private until the publisher adds noise."""

from __future__ import annotations

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates import item_edges
from dp_spark.aggregates.domain_vector import on_domain
from dp_spark.bounding.item_rows import LIMITS, Rows, normalized_weight, sampled_ones
from dp_spark.core.domain import ItemDomain


def column_sums(df: DataFrame, value: Column, items: ItemDomain) -> np.ndarray:
    """Σ ``value`` (an integer) per item of ``df`` [item_id, …], one int64 per public item."""
    sums = df.groupBy("item_id").agg(F.sum(value).alias("s")).toPandas()
    return on_domain(items.index_of(sums["item_id"].to_numpy()), sums["s"], len(items))


def column_counts(rows: Rows, items: ItemDomain) -> np.ndarray:
    """The true column counts (users per item; NOT private): for evaluation."""
    return column_sums(rows.ones, F.lit(1), items)


def normalized_counts(rows: Rows, items: ItemDomain, theta: int, *, grid_bits: int) -> np.ndarray:
    """Σ over rows holding j of ⌊min(1, θ/r)·2^k⌋, in grid units (integers): each row adds
    r·⌊θ·2^k/r⌋ ≤ θ·2^k, so the L1 sensitivity is θ in count units. NOT private."""
    return column_sums(rows.ones, normalized_weight(theta, grid_bits), items)


def sampled_counts(rows: Rows, items: ItemDomain, theta: int, seed: int | None) -> np.ndarray:
    """Column counts after keeping θ random ones of every longer row. NOT private."""
    return item_edges.item_counts(item_edges.selected_edge_counts(sampled_ones(rows, theta, seed), items, None))


def limited_counts(rows: Rows, items: ItemDomain, theta: int, limit: str, seed: int | None, *,
                   grid_bits: int) -> np.ndarray:
    """The column counts of the rows limited to θ by ``limit`` (normalised counts in grid units
    2^-``grid_bits``, sampled counts in units). NOT private."""
    if limit not in LIMITS:
        raise ValueError(f"unknown limit {limit!r}; expected one of {', '.join(LIMITS)}")
    if limit == "normalize":
        return normalized_counts(rows, items, theta, grid_bits=grid_bits)
    return sampled_counts(rows, items, theta, seed)


def length_histogram(rows: Rows, theta_max: int) -> np.ndarray:
    """Rows by length capped at θ_max: index r = 1..θ_max (0 unused). NOT private. No job when
    the rows come with their users by length."""
    if rows.users_by_length is not None:
        lengths = rows.users_by_length.index.to_numpy(dtype=np.int64)
        return on_domain(np.minimum(lengths, theta_max), rows.users_by_length.to_numpy(dtype=np.int64),
                         theta_max + 1)
    capped = rows.per_user.select(F.least(F.col("_r"), F.lit(theta_max)).alias("r")).groupBy("r").count().toPandas()
    return on_domain(capped["r"], capped["count"], theta_max + 1)


def length_by_column(rows: Rows, items: ItemDomain, theta_max: int, *,
                     grid_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, S'), both int64: N[j, r] rows of length r ≤ θ_max holding column j, and
    S'[j] = Σ ⌊2^k/r⌋ over the longer rows holding it, in grid units 2^-``grid_bits``. Spark
    sums S' as a long (integer division, no doubles), so it is exact and does not depend on the
    order of the sum. At most |items|·(θ_max + 1) groups reach the driver. NOT private."""
    long = F.col("_r") > theta_max
    units = F.when(long, F.expr(f"{1 << grid_bits} div _r")).otherwise(F.lit(0)).cast("long")
    grouped = (rows.ones.groupBy("item_id", F.when(long, F.lit(0)).otherwise(F.col("_r")).alias("r"))
               .agg(F.count(F.lit(1)).alias("n"), F.sum(units).alias("units"))
               .toPandas())
    position = items.index_of(grouped["item_id"].to_numpy())
    r = grouped["r"].to_numpy(dtype=np.int64)
    short = r > 0
    by_length = on_domain((position[short], r[short]), grouped["n"].to_numpy(dtype=np.int64)[short],
                          (len(items), theta_max + 1))
    long_units = on_domain(position[~short], grouped["units"].to_numpy(dtype=np.int64)[~short], len(items))
    return by_length, long_units
