"""Per group, how many of the records a per-user bound keeps have a value nearest each public
candidate: the histograms the quantiles per group are chosen from. NOT private until a mechanism
reads them.

A kept record carries one long through the per-user selection, its group's index times the number
of candidates K plus its candidate's position, as the sums carry theirs (aggregates.value_sums), so
that the bounding is the counts' own and the tally is one job ending in a row per non-empty
(group, candidate). Records already bounded (bounding.user_groups: at most l groups per user and c
records in each) are tallied directly, one aggregation per (group, candidate): ``kept_histograms``.
The candidate is found by a binary search over the midpoints between candidates, written as nested
CASE WHENs of public literals (aggregates.value_ranks): the number of midpoints below the value,
which puts a value at a midpoint with the lower candidate, as ``Candidates.nearest`` does on the
driver.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates.domain_vector import on_domain
from dp_spark.aggregates.value_ranks import candidates_below
from dp_spark.bounding.item_cap import ItemCap
from dp_spark.bounding.user_records import Selection


def nearest_candidate(value: Column, midpoints: Sequence[float]) -> Column:
    """The position of the value's nearest candidate, given the K − 1 midpoints between them."""
    return candidates_below(value.cast("double"), midpoints, 0, len(midpoints))


def group_histograms(selection: Selection, cell: Column, value: Column, midpoints: Sequence[float], groups: int,
                     cap: int | None = None) -> np.ndarray:
    """A matrix of counts [group, candidate] of the selection's kept records, ``cell`` the record's
    group index in [0, groups) and ``value`` its value (not null: validation drops those); with
    ``cap``, at most that many of a user's kept records per group count."""
    k = len(midpoints) + 1
    if groups * k >= 2**63:
        raise ValueError(f"{groups:,} groups of {k} candidates do not fit one long per record")
    key = cell.cast("long") * F.lit(k) + nearest_candidate(value, midpoints)
    item_cap = None if cap is None else ItemCap(cap, F.expr(f"_value div {k}"))
    tally = selection.counted(key, cap=item_cap)
    if tally["_key"].isna().any():
        raise ValueError("a record outside the groups, or without a value, reached the histograms")
    counts = np.zeros(groups * k, dtype=np.int64)
    np.add.at(counts, tally["_key"].to_numpy(dtype=np.int64), tally["count"].to_numpy(dtype=np.int64))
    return counts.reshape(groups, k)


def kept_histograms(kept: DataFrame, group: str, value: Column, midpoints: Sequence[float], groups: int) -> np.ndarray:
    """A matrix of counts [group, candidate] of records a bound has already kept, ``group`` their
    group index column in [0, groups) and ``value`` their value (not null)."""
    k = len(midpoints) + 1
    tally = pd.DataFrame(kept.groupBy(F.col(group).cast("long").alias("_g"),
                                      nearest_candidate(value, midpoints).alias("_k")).count().toPandas())
    return on_domain((tally["_g"].to_numpy(dtype=np.int64), tally["_k"].to_numpy(dtype=np.int64)),
                     tally["count"].to_numpy(dtype=np.int64), (groups, k))
