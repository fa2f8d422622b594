"""An aggregation's table: bound -> aggregate -> publish, one row per group of the public domains.

1. Each record's group is found from its key columns alone (keys.GroupKeys.cell); a record outside
   the domains, or without a value when the metrics read one, is dropped (a filter on the record).
2. Each user keeps at most l groups and c records in each (bounding.user_groups), from its own
   records alone.
3. The kept records are aggregated once per group: the totals the tables need
   (aggregates.group_totals), and the histograms over the candidates
   (aggregates.value_histogram.kept_histograms) when a quantile or the histogram method reads them.
4. The noise and the choices, paid through the budget in a fixed order: the tables
   (noisy_totals.publish), then the histogram with noise (histogram_metrics.publish) or each
   quantile level (quantiles.choose_levels).

Only the last step's outputs leave: the table holds the public keys and DP outputs. Claim:
docs/aggregate.md, "Privacy claim: aggregate".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.aggregates.group_totals import group_totals
from dp_spark.aggregates.value_histogram import kept_histograms
from dp_spark.bounding import keys as row_keys
from dp_spark.bounding.user_groups import bounded_groups
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.aggregate import histogram_metrics, noisy_totals, popular_groups, private_groups, quantiles
from dp_spark.families.aggregate.keys import column
from dp_spark.families.aggregate.metrics import COUNT, USERS
from dp_spark.families.aggregate.params import HISTOGRAM, HPA, QUANTILE_KINDS, AggregateParams, quantile_step
from dp_spark.io.validation import usable_value, user_values, value_number

GROUP = "_group"
TABLE = "groups"  # the release's one table
VALUE = "_value"  # the value column as the bound and the aggregates read it: a double


def usable_records(records: DataFrame, params: AggregateParams, user_col: str = "user_id") -> DataFrame:
    """The records with a usable user id, their public keys in their domains, every tupled key
    (chosen privately or listed) non-null, and a usable value when the metrics read one (a number,
    not null, NaN or infinite; text read as a number only when written as one): their user id as the job keys users
    (io.validation.user_values), their index among the public keys' combinations (GROUP), their
    value as a double (VALUE), the tupled key columns, and with private keys not yet selected
    their tuple as one text (private_groups.KEY). Each test reads the record alone."""
    keys = params.keys
    _bad, user = user_values(records, user_col)
    grouped = records.withColumn(user_col, user).withColumn(GROUP, keys.cell())
    wanted = F.col(user_col).isNotNull() & F.col(GROUP).isNotNull()
    columns: list[str | Column] = [user_col, GROUP]
    if params.value is not None:
        text = isinstance(records.schema[params.value].dataType, T.StringType)
        grouped = grouped.withColumn(VALUE, value_number(column(params.value), text))
        wanted = wanted & usable_value(F.col(VALUE))
        columns.append(VALUE)
    if keys.private and keys.tuples is None:  # before the selection: the tuples it counts
        tuple_key = private_groups.tuple_key(keys.private, private_groups.kinds(records.schema, keys.private))
        grouped = grouped.withColumn(private_groups.KEY, tuple_key)
        wanted = wanted & F.col(private_groups.KEY).isNotNull()
        columns.append(private_groups.KEY)
    for name in keys.tupled:
        wanted = wanted & column(name).isNotNull()
        columns.append(column(name))
    return grouped.where(wanted).select(*columns)


def in_groups(records: DataFrame, params: AggregateParams, user_col: str = "user_id") -> DataFrame:
    """The usable records (usable_records) in a group: the user, the group index (GROUP) and the
    value. With tupled keys (private ones selected first, listed ones typed first: family.run), the
    group puts the record's tuple first, and a record whose tuple is not among them is in none.
    Enough for what counts users and groups (the choice of l, the coverage); the bound needs
    grouped_records' row keys too."""
    keys = params.keys
    usable = usable_records(records, params, user_col)
    columns = [user_col, GROUP, *([VALUE] if params.value else [])]
    if keys.tupled:
        if keys.tuples is None:
            raise ValueError("the private keys' tuples are selected before the records are grouped")
        kinds = private_groups.kinds(records.schema, keys.tupled)
        usable = private_groups.with_position(usable, keys, kinds).withColumn(
            GROUP, F.col(private_groups.POSITION) * F.lit(keys.public_size) + F.col(GROUP))
    return usable.select(*columns)


def grouped_records(records: DataFrame, params: AggregateParams, user_col: str = "user_id") -> DataFrame:
    """in_groups' records with their row key (bounding.keys.with_row_key, a shuffle by user):
    what the bound samples from."""
    return row_keys.with_row_key(in_groups(records, params, user_col), user_col)


def kept_records(records: DataFrame, params: AggregateParams, seed: int | None, user_col: str = "user_id",
                 ranks: np.ndarray | None = None) -> DataFrame:
    """The records the bound keeps (steps 1 and 2), with their group index (GROUP) and value
    (VALUE). ``ranks``: with HPA's bounding, each group's rank of noisy popularity (a DP output,
    popular_groups.popularity_ranks), by which a user keeps its groups."""
    return bounded(grouped_records(records, params, user_col), params, seed, user_col, ranks)


def bounded(grouped: DataFrame, params: AggregateParams, seed: int | None, user_col: str = "user_id",
            ranks: np.ndarray | None = None) -> DataFrame:
    """Step 2 on grouped_records' records: at most l groups per user (a uniform sample, or with
    ``ranks`` the most popular) and c records in each."""
    bound = params.bound
    if ranks is None:
        return bounded_groups(grouped, GROUP, bound.groups_per_user, bound.records_per_group, seed, user_col)
    scored = popular_groups.with_ranks(grouped, GROUP, ranks)
    return bounded_groups(scored, GROUP, bound.groups_per_user, bound.records_per_group, seed, user_col,
                          score=popular_groups.SCORE).drop(popular_groups.SCORE)


@dataclass(frozen=True)
class DrawnPopularity:
    """HPA's noisy popularity of the groups and the records it was drawn from, grouped once."""

    grouped: DataFrame  # grouped_records' records, cached: the popularity's and then the bound's input
    ranks: np.ndarray  # each group's rank of noisy popularity (a DP output)


def draw_popularity(records: DataFrame, params: AggregateParams, split: Mapping[str, Fraction], budget: Budget,
                    rng: RandomSource, seed: int | None, user_col: str = "user_id") -> DrawnPopularity:
    """HPA's popularity (ledger step popular_groups.STEP), from the records grouped once and cached
    for the bound that reads it after."""
    grouped = grouped_records(records, params, user_col).cache()
    ranks = popular_groups.popularity_ranks(grouped, GROUP, len(params.keys), params.popularity_groups,
                                            split[popular_groups.SPLIT_KEY], budget, rng, seed, user_col)
    return DrawnPopularity(grouped, ranks)


def aggregate_table(records: DataFrame, params: AggregateParams, split: Mapping[str, Fraction], noise: str,
                    budget: Budget, rng: RandomSource, seed: int | None, alpha: float = 0.05,
                    user_col: str = "user_id", popularity: DrawnPopularity | None = None
                    ) -> tuple[pd.DataFrame, int]:
    """The released table (the key columns of every group, then the metrics' columns), and the
    records bounding kept (NOT private: the operator's diagnostics). ``popularity``: with HPA's
    bounding, the popularity when it was drawn before (to choose l), else drawn here, first."""
    bound = params.bound
    if params.bounding == HPA:
        if popularity is None:
            popularity = draw_popularity(records, params, split, budget, rng, seed, user_col)
        grouped = popularity.grouped
        kept = bounded(grouped, params, seed, user_col, popularity.ranks).cache()
    else:
        grouped = grouped_records(records, params, user_col)
        kept = bounded(grouped, params, seed, user_col).cache()
    try:
        groups = len(params.keys)
        columns: dict = {}
        kept_rows = 0
        by_histogram = params.method == HISTOGRAM
        if params.tables:
            valued = params.value is not None and not by_histogram
            totals = group_totals(kept, GROUP, groups, VALUE if valued else None, params.clip if valued else None,
                                  user_col)
            shares = {table: split[noisy_totals.step_name(table, params.value)] for table in params.tables}
            columns = noisy_totals.publish(totals, _table_metrics(params), bound, params.clip, shares, noise,
                                           budget, rng, alpha)
            kept_rows = int(totals.records.sum())
        if params.levels or by_histogram:
            value, candidates = params.value, params.candidates
            assert value is not None and candidates is not None
            histograms = kept_histograms(kept, GROUP, F.col(VALUE), candidates.midpoints().tolist(), groups)
            kept_rows = int(histograms.sum())
            if by_histogram:
                columns.update(histogram_metrics.publish(
                    histograms, [m for m in params.metrics if m.kind in histogram_metrics.KINDS], candidates, bound,
                    split[histogram_metrics.step_name(value)], noise, budget, rng, alpha))
            else:
                chosen = quantiles.choose_levels(histograms, candidates, params.levels,
                                                 [split[quantile_step(value, q)] for q in params.levels],
                                                 bound.groups_per_user, bound.records_per_group, budget, rng, value)
                names = [name for metric in params.metrics if metric.kind in QUANTILE_KINDS for name in metric.columns]
                columns.update({name: chosen[:, at] for at, name in enumerate(names)})
    finally:
        kept.unpersist()
        grouped.unpersist()  # a no-op unless it was cached
    table = params.keys.frame()
    for metric in params.metrics:
        for name in metric.columns:
            table[name] = columns[name]
    return table, kept_rows


def _table_metrics(params: AggregateParams) -> list:
    """The metrics noisy_totals answers: every one by tables, the users' alone by histogram."""
    if params.method == HISTOGRAM:
        return [m for m in params.metrics if m.kind not in histogram_metrics.KINDS]
    return list(params.metrics)


def empty_table(params: AggregateParams) -> pd.DataFrame:
    """The table of a release whose private keys selected no tuple: the key and metric columns, no
    row, so that it is written as any other release's is."""
    table = params.keys.frame()
    for metric in params.metrics:
        for name in metric.columns:
            whole = metric.kind in (COUNT, USERS) and name == metric.kind
            table[name] = np.zeros(0, dtype=np.int64 if whole else np.float64)
    return table
