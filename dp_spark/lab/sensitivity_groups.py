"""The sensitivity audit's aggregates of the aggregate family (lab.sensitivity lists them with their
stated sensitivities): each on the family's own path, from the records to the figures its noise or
its choices read, on D and on the neighbours."""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates.group_totals import group_totals
from dp_spark.aggregates.key_users import users_per_key
from dp_spark.aggregates.value_histogram import kept_histograms
from dp_spark.aggregates.value_ranks import value_ranks
from dp_spark.bounding import keys, user_keys
from dp_spark.families.aggregate import private_groups, range_choice, run
from dp_spark.families.aggregate.keys import PRIVATE, group_keys
from dp_spark.families.aggregate.metrics import metrics_of
from dp_spark.families.aggregate.noisy_totals import GroupBound
from dp_spark.families.aggregate.params import AggregateParams
from dp_spark.lab.sensitivity_data import BOUND, HISTOGRAM_CANDIDATES, ITEMS, MEANS_CLIP, SEED, VISITS_CAP, valued


def _aggregate_params(metrics: list[str]) -> AggregateParams:
    valued = any("(" in m for m in metrics)
    return AggregateParams(group_keys(["item_id"], {"item_id": {"range": [1, ITEMS]}}), metrics_of(metrics),
                           GroupBound(BOUND, VISITS_CAP), MEANS_CLIP if valued else None)


def groups_per_user(df: DataFrame, distinct: bool) -> np.ndarray:
    """The aggregate family's release path up to its totals (families.aggregate.run.kept_records:
    each record's user and group, then at most l items (groups) per user and C records in each):
    the records and the distinct users per item. The family has no distinct-records path."""
    params = _aggregate_params(["count", "users"])
    totals = group_totals(run.kept_records(df, params, SEED), run.GROUP, ITEMS)
    return np.concatenate([totals.records, totals.users])


def private_group_keys(df: DataFrame, distinct: bool) -> np.ndarray:
    """The aggregate family's selection of key columns chosen privately, on its own path
    (run.usable_records: each record's user and tuple; then at most l0 = l distinct tuples per
    user): the users per tuple that partition selection thresholds."""
    params = AggregateParams(group_keys(["item_id"], {"item_id": PRIVATE}), metrics_of(["count"]),
                             GroupBound(BOUND, VISITS_CAP), delta=1e-6)
    usable = run.usable_records(df, params)
    bounded = user_keys.bounded_keys(usable.select("user_id", private_groups.KEY), BOUND, SEED,
                                     key_col=private_groups.KEY)
    found, users = users_per_key(bounded, private_groups.KEY)
    vector = np.zeros(ITEMS, dtype=np.int64)
    decoded = [private_groups.decoded(text, (private_groups.INTEGER,)) for text in found]
    items = [values[0] for values in decoded if values is not None]  # every tuple here holds one whole number
    assert len(items) == len(found)
    vector[np.asarray(items, dtype=np.int64) - 1] = users
    return vector


def groups_per_user_popular(df: DataFrame, distinct: bool) -> np.ndarray:
    """:func:`groups_per_user` with HPA's rule: each user keeps its l groups of highest rank in a
    fixed popularity (given, as the release's is a DP output drawn before), ties at random."""
    params = _aggregate_params(["count", "users"])
    ranks = np.arange(ITEMS, dtype=np.int64) % 7  # many ties, so both orders decide
    totals = group_totals(run.kept_records(df, params, SEED, ranks=ranks), run.GROUP, ITEMS)
    return np.concatenate([totals.records, totals.users])


def groups_per_user_values(df: DataFrame, distinct: bool) -> np.ndarray:
    """:func:`groups_per_user` with a value: the sums of the kept values' grid units and of their
    square units per group, and the histograms over candidates that the histogram method noises (a
    record without a usable value is in no group, as the release drops it)."""
    params = _aggregate_params(["variance(value)"])
    kept = run.kept_records(valued(df, distinct), params, SEED).cache()
    try:
        totals = group_totals(kept, run.GROUP, ITEMS, run.VALUE, MEANS_CLIP)
        histograms = kept_histograms(kept, run.GROUP, F.col(run.VALUE), HISTOGRAM_CANDIDATES.midpoints().tolist(),
                                     ITEMS)
    finally:
        kept.unpersist()
    assert totals.units is not None and totals.squares is not None
    return np.concatenate([totals.units, totals.squares, histograms.ravel()])


# Candidates for the value's range: some between the values, some beyond them.
RANGE_CANDIDATES = (-4.0, -1.0, 0.0, 0.5, 2.0, 4.0, 6.0)


def groups_value_ranks(df: DataFrame, distinct: bool) -> np.ndarray:
    """The ranks an aggregation's range of the value is chosen from (low and high "auto":
    range_choice): each candidate's count of the per-user values below it and at most it, and their
    number, from one value per user among its records in a group. Each moves by at most one."""
    params = _aggregate_params(["mean(value)"])
    grouped = run.in_groups(valued(df, distinct), params)
    sampled = range_choice.one_value_per_user(grouped, run.GROUP, run.VALUE, keys.new_salt(SEED, "audit"))
    below, at_most, n = value_ranks(sampled, range_choice.SAMPLED, RANGE_CANDIDATES)
    return np.concatenate([below, at_most, [n]])
