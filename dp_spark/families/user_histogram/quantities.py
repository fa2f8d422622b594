"""The user histogram's aggregate: users per public bin of a per-user quantity (docs/specification.md
§1.1 rules 1 and 2). Each user's quantity comes from its own records only, and each user lands
in exactly one bin; the bins come from the config (docs/user_histogram.md)."""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates.domain_vector import on_domain


def per_user_quantity(records: DataFrame, quantity: str, user_counts: DataFrame | None = None) -> DataFrame:
    """[user_id, value]: the quantity ("records" or "distinct_items") of every user with at least
    one in-domain record. ``user_counts`` (DataFrame[user_id, _n], from validation) saves a pass
    for "records"."""
    if quantity == "records":
        if user_counts is not None:
            return user_counts.select("user_id", F.col("_n").alias("value"))
        return records.groupBy("user_id").agg(F.count(F.lit(1)).alias("value"))
    if quantity == "distinct_items":
        return records.groupBy("user_id").agg(F.countDistinct("item_id").alias("value"))
    raise ValueError(f"unknown quantity {quantity!r}; expected one of records, distinct_items")


def bin_of(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The bin of each quantity (all ≥ 1) among the bins starting at ``edges``; values past the
    last edge fall in the last, open-ended bin."""
    return np.searchsorted(edges, values, side="right") - 1


def true_histogram(records: DataFrame, quantity: str, edges: np.ndarray,
                   user_counts: DataFrame | None = None) -> np.ndarray:
    """Users per bin (NOT private). Quantities are capped at the last edge before the count, so
    at most one row per value up to the last edge reaches the driver, whatever the data."""
    values = per_user_quantity(records, quantity, user_counts)
    capped = F.least(F.col("value"), F.lit(int(edges[-1]))).alias("value")
    rows = values.select(capped).groupBy("value").count().toPandas()
    return on_domain(bin_of(rows["value"].to_numpy(dtype=np.int64), edges), rows["count"], len(edges))
