"""Per group, the totals every metric but the quantiles is made from, over the records a per-user
bound kept (bounding.user_groups): the records, the distinct users, and the sum and the sum of
squares of the values clipped and centred on the range's integer grid (aggregates.value_sums'
units). One aggregation, in two steps: per (user, group) first, then per group, so that a user is
counted once in a group without a count of distinct values. NOT private until noise is added.

A record's square is of its grid units u, counted in units of steps: u² / steps rounded to the
nearest whole number (half up), in [0, steps], as the sum is in [−steps, steps]. Squares in plain
grid units would move by steps² per record (10^6 for the default grid), and their noise past what
the exact sampler draws; the rounding, by at most half a unit of γ²·steps, depends on the record
alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates.domain_vector import on_domain
from dp_spark.aggregates.value_sums import units_column
from dp_spark.core.clip_range import ClipRange


def square_units(units: Column, steps: int) -> Column:
    """u² / steps rounded half up, a long in [0, steps] for u in [−steps, steps] (module docstring)."""
    # Exact in doubles: u² + steps/2 is below 2^53, and a quotient of such whole numbers is never
    # within rounding of the whole number above it. An odd steps has no ties (2u² is even).
    return F.floor((units * units + F.lit(steps // 2)) / F.lit(steps)).cast("long")


@dataclass(frozen=True)
class GroupTotals:
    """Arrays over the groups [0, groups): records kept, distinct users with a kept record, and
    (with a value) Σ u and Σ square_units(u) of the kept records' grid units u."""

    records: np.ndarray
    users: np.ndarray
    units: np.ndarray | None = None
    squares: np.ndarray | None = None


def group_totals(kept: DataFrame, group: str, groups: int, value: str | None = None,
                 clip: ClipRange | None = None, user_col: str = "user_id") -> GroupTotals:
    """The totals of ``kept`` (one row per kept record, ``group`` its group index in [0, groups),
    ``value`` a usable number when given, with its ``clip`` range)."""
    if (value is None) != (clip is None):
        raise ValueError("give the value column and its clipping range together, or neither")
    units = [] if value is None or clip is None else [units_column(F.col(value), clip).alias("_u")]
    sums = [] if value is None or clip is None else [F.sum("_u").alias("_s"),
                                                      F.sum(square_units(F.col("_u"), clip.steps)).alias("_q")]
    per_user = kept.select(F.col(user_col), F.col(group).cast("long").alias("_g"), *units) \
        .groupBy(user_col, "_g").agg(F.count(F.lit(1)).alias("_n"), *sums)
    totals = per_user.groupBy("_g").agg(F.sum("_n").alias("_n"), F.count(F.lit(1)).alias("_users"),
                                        *([F.sum("_s").alias("_s"), F.sum("_q").alias("_q")] if value else []))
    frame = pd.DataFrame(totals.toPandas())

    def placed(column: str) -> np.ndarray:
        return on_domain(frame["_g"].to_numpy(dtype=np.int64), frame[column].to_numpy(dtype=np.int64), groups)
    if value is None:
        return GroupTotals(placed("_n"), placed("_users"))
    return GroupTotals(placed("_n"), placed("_users"), placed("_s"), placed("_q"))
