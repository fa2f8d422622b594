"""The sensitivity audit: every family's bounded pre-noise aggregates on D and on adversarial
neighbours D′ = D plus one user, with the seed (and so every salt) known to the adversary.

A mechanism's noise is scaled to a stated sensitivity: the most that adding or removing one user
moves its aggregates (L1, L∞ where stated, and the squared L2 that Gaussian noise is paid by). This
audit measures that move directly, with no noise and no statistics: for each family below it builds
the bounded aggregates of D and of D′,
where the added user's records come first in the scan, last, spread between the others' records,
or the whole table is reshuffled across partitions, and each user may hold identical records. A
bounding step that let one user's presence change another user's kept records (as a
sampling key that hashed the scan position once did) shows up as a move far above the sensitivity.

Pure data in, numbers out; ``tests/test_sensitivity.py`` runs it on every family in CI.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dp_spark.aggregates import item_edges, value_sums
from dp_spark.aggregates.domain_vector import on_domain
from dp_spark.aggregates.key_users import users_per_key
from dp_spark.aggregates.value_ranks import value_ranks
from dp_spark.bounding import item_rows, keys, user_keys, user_locations, user_records
from dp_spark.core.domain import AttributeDomain, ItemDomain
from dp_spark.families.counts import sampling
from dp_spark.families.dpsense import columns as item_columns
from dp_spark.families.dpsense import theta as dpsense
from dp_spark.families.frapp.family import bounded_records
from dp_spark.families.user_histogram import quantities as user_quantities
from dp_spark.io.checkins import guard_figures as guard_figures_of_checkins
from dp_spark.io.validation import SHARE_GRID, validate_records
from dp_spark.lab.sensitivity_data import (
    ATTRIBUTE_DOMAIN,
    ATTRS,
    BOUND,
    HISTOGRAM_EDGES,
    ITEM_DOMAIN,
    ITEMS,
    LAYOUTS,
    MEANS_CLIP,
    SCHEMA,
    SEED,
    VISITS_CAP,
    frame,
    keyed,
    neighbour,
    valued,
)
from dp_spark.lab.sensitivity_data import added_user as added_user  # the tests' neighbours, from here too
from dp_spark.lab.sensitivity_data import table as table
from dp_spark.lab.sensitivity_groups import (
    RANGE_CANDIDATES,
    groups_per_user,
    groups_per_user_popular,
    groups_per_user_values,
    groups_value_ranks,
    private_group_keys,
)
from dp_spark.release import bound_bias, bound_estimate
from dp_spark.release.bound_selection import GRID


def sra(df: DataFrame, distinct: bool) -> np.ndarray:
    """SRA, LPA, DFT: each user's uniform sample of l records, counted per (item, attribute)."""
    selection = user_records.sample_selection(keyed(df, distinct), BOUND, SEED)
    return item_edges.selected_edge_counts(selection, ITEM_DOMAIN, ATTRIBUTE_DOMAIN).ravel()


def sra_capped(df: DataFrame, distinct: bool) -> np.ndarray:
    """SRA with at most one record per user and item (records_per_item = 1, the Gaussian path), counted
    per (item, attribute) and per item: squared L2 sensitivity l·c = l in each table."""
    selection = user_records.sample_selection(keyed(df, distinct), BOUND, SEED)
    edges = item_edges.selected_edge_counts(selection, ITEM_DOMAIN, ATTRIBUTE_DOMAIN, cap=1)
    return np.concatenate([edges.ravel(), item_edges.item_counts(edges)])


def sra_items(df: DataFrame, distinct: bool) -> np.ndarray:
    """SRA's item counts without the cap: all l records of a user may fall on one item, so the squared
    L2 sensitivity is l² (the negative control of the cap)."""
    selection = user_records.sample_selection(keyed(df, distinct), BOUND, SEED)
    return item_edges.item_counts(item_edges.selected_edge_counts(selection, ITEM_DOMAIN, ATTRIBUTE_DOMAIN))


def hpa_top_capped(df: DataFrame, distinct: bool) -> np.ndarray:
    """HPA's top-l after the cap of one record per user and item, per (item, attribute) and per item."""
    scores = (np.arange(ITEMS) * 7) % 5
    scored = keyed(df, distinct).withColumn("_score", F.element_at(F.array(*[F.lit(int(s)) for s in scores]),
                                                                    F.col("item_id").cast("int")))
    edges = item_edges.selected_edge_counts(user_records.top_selection(scored, BOUND, "_score", SEED),
                                            ITEM_DOMAIN, ATTRIBUTE_DOMAIN, cap=1)
    return np.concatenate([edges.ravel(), item_edges.item_counts(edges)])


def _means_tables(df: DataFrame, distinct: bool, attributes: AttributeDomain | None, cap: int | None,
                  on_executors: bool = False):
    """The means' path: validation drops the NaN values (a rule on each record), SRA keeps l of
    each user's records, and the kept ones are summed per item (and cell); ``on_executors``: the
    tally a release beyond the driver makes instead (value_sums.cell_tally), as (counts, units)
    per cell."""
    validated = validate_records(valued(df, distinct), ITEM_DOMAIN, attributes, value=True)
    try:
        selection = user_records.sample_selection(validated.records, BOUND, SEED, counts=validated.user_counts,
                                                  users_by_n=validated.users_by_n)
        if not on_executors:
            return value_sums.bounded_sums(selection, ITEM_DOMAIN, "value", MEANS_CLIP, attributes, cap)
        tally = value_sums.cell_tally(selection, ITEM_DOMAIN, "value", MEANS_CLIP, attributes, cap).toPandas()
        cells = len(ITEM_DOMAIN) * (len(attributes) if attributes else 1)
        figures = [on_domain(tally["_cell"].to_numpy(), tally[name].to_numpy(), cells)
                   for name in (value_sums.COUNT, value_sums.SUM)]
        return tuple(figures)
    finally:
        validated.release()


def means_sums(df: DataFrame, distinct: bool) -> np.ndarray:
    """The means' centred sums in grid units per item (SRA bounding, no cap): L1 l·steps, and up
    to l·steps on one item, so squared L2 (l·steps)²."""
    items, _ = _means_tables(df, distinct, None, None)
    return np.concatenate([items.units, items.counts])


def means_capped(df: DataFrame, distinct: bool) -> np.ndarray:
    """The means' sums and counts per (item, attribute) and per item with at most one record per
    user and item (records_per_item = 1): each sums table moves by l·steps in L1 and l·steps² in
    squared L2, each count table by l and l."""
    items, edges = _means_tables(df, distinct, ATTRIBUTE_DOMAIN, 1)
    return np.concatenate([edges.units, items.units, edges.counts, items.counts])


def means_on_executors(df: DataFrame, distinct: bool) -> np.ndarray:
    """:func:`means_capped`'s aggregates as a release on the executors tallies them: the same
    sensitivity."""
    counts, units = _means_tables(df, distinct, ATTRIBUTE_DOMAIN, 1, on_executors=True)
    h = len(ATTRIBUTE_DOMAIN)
    return np.concatenate([units, units.reshape(-1, h).sum(axis=1), counts, counts.reshape(-1, h).sum(axis=1)])


# Candidates for the clipping range's choice: some between the values, some beyond them.
CLIP_CANDIDATES = (-4.0, -1.0, 0.0, 0.5, 2.0, 4.0, 6.0)


def means_clip_ranks(df: DataFrame, distinct: bool) -> np.ndarray:
    """The ranks the clipping range is chosen from (release.clip_choice): each candidate's count
    of per-user values below it and at most it, and their number, from the record validation
    draws per user. Each moves by at most one."""
    validated = validate_records(valued(df, distinct), ITEM_DOMAIN, None, value=True, sample_value=True,
                                 one_per_user_salt=keys.sample_salt(SEED))
    try:
        below, at_most, n = value_ranks(validated.one_per_user, "_sampled_value", CLIP_CANDIDATES)
        return np.concatenate([below, at_most, [n]])
    finally:
        validated.release()


# The estimate choice's user cap U in the audit: below the added user's records past b_1, so that
# the cap binds on them.
ESTIMATE_CAP = 4
# The anchor the choice releases for an objective that scores both tables, at weights that are not
# all 1 (as "tables" gives): the weighted norm of the two vectors put end to end.
ESTIMATE_WEIGHTS = (Fraction(1), Fraction(1, 2))
ESTIMATE_ANCHOR_MOVES = (*(bound_estimate.anchor_sensitivity(1, ESTIMATE_CAP, cells)
                           for cells in (ITEMS, ITEMS * len(ATTRS))),
                         bound_estimate.combined_sensitivity(1, ESTIMATE_CAP, (ITEMS, ITEMS * len(ATTRS)),
                                                             ESTIMATE_WEIGHTS))


def estimate_histogram(df: DataFrame, distinct: bool) -> np.ndarray:
    """SRA's estimate choice: the users per bin of in-domain record counts (each user in one bin)."""
    validated = validate_records(keyed(df, distinct), ITEM_DOMAIN, None)
    try:
        edges = bound_estimate.histogram_edges(ITEMS, 1)
        return bound_estimate.record_histogram(validated.users_by_n, edges)
    finally:
        validated.release()


# HPA's estimate ranks each user's records by a public popularity: here one with ties in threes.
ESTIMATE_RANKING = bound_bias.ItemRanking(ITEM_DOMAIN, np.arange(ITEMS, dtype=np.int64) // 3)


def estimate_anchors(df: DataFrame, distinct: bool, ranking: bound_bias.ItemRanking | None = None) -> np.ndarray:
    """SRA's estimate choice: the anchors ⌈‖A_t‖⌉ of the item and edge tables alone (1/GRID
    records), at b_1 = 1, c = 1 and U = ESTIMATE_CAP, every record of a cell counted and each
    user's part scaled to its reach, and the one anchor of both at ESTIMATE_WEIGHTS
    (bound_estimate.combined_value); each moves by at most its sensitivity (ESTIMATE_ANCHOR_MOVES).
    HPA's with a ``ranking``: the terms its drop at that public popularity."""
    validated = validate_records(keyed(df, distinct), ITEM_DOMAIN, ATTRIBUTE_DOMAIN)
    try:
        reaches = [bound_estimate.anchor_reach(1, ESTIMATE_CAP, cells) for cells in (ITEMS, ITEMS * len(ATTRS))]
        norms = bound_bias.anchor_squared_norms(validated.records, 1, ESTIMATE_CAP, reaches, GRID,
                                                [bound_bias.ITEMS, bound_bias.EDGES], user_counts=validated.user_counts,
                                                ranking=ranking)
        return np.array([*(bound_estimate.anchor_value(norm) for norm in norms),
                         bound_estimate.combined_value(norms, ESTIMATE_WEIGHTS)], dtype=np.int64)
    finally:
        validated.release()


def gs_one_record(df: DataFrame, distinct: bool) -> np.ndarray:
    """GS's ordering sample: one record of each user's bounded records."""
    bounded = user_records.sample_selection(keyed(df, distinct), BOUND, SEED).rows()
    return sampling._one_record_per_user(bounded, ITEM_DOMAIN, ATTRIBUTE_DOMAIN, SEED).ravel()


def hpa_popularity(df: DataFrame, distinct: bool) -> np.ndarray:
    """HPA's popularity sample with d = 1, drawn in validation's pass."""
    validated = validate_records(keyed(df, distinct), ITEM_DOMAIN, ATTRIBUTE_DOMAIN,
                                 one_per_user_salt=keys.sample_salt(SEED))
    try:
        sampled = validated.one_per_user.select(F.col("_sampled_item").alias("item_id"))
        return item_edges.item_counts(item_edges.edge_counts(sampled, ITEM_DOMAIN, None))
    finally:
        validated.release()


def hpa_top(df: DataFrame, distinct: bool) -> np.ndarray:
    """HPA's top-l: each user's l records of highest (public) score, ties by the keyed position."""
    scores = (np.arange(ITEMS) * 7) % 5  # many ties, so the keys decide
    scored = keyed(df, distinct).withColumn("_score", F.element_at(F.array(*[F.lit(int(s)) for s in scores]),
                                                                    F.col("item_id").cast("int")))
    selection = user_records.top_selection(scored, BOUND, "_score", SEED)
    return item_edges.selected_edge_counts(selection, ITEM_DOMAIN, ATTRIBUTE_DOMAIN).ravel()


def partition_keys(df: DataFrame, distinct: bool) -> np.ndarray:
    """Partition selection's bounded keys: users per item, each user on at most l0 items."""
    found, users = users_per_key(user_keys.bounded_keys(df, BOUND, SEED))
    vector = np.zeros(ITEMS, dtype=np.int64)
    vector[found.astype(np.int64) - 1] = users
    return vector


def dpsense_sampled(df: DataFrame, distinct: bool) -> np.ndarray:
    """DPSense with the sampling limit: column counts after θ random ones of every longer row."""
    rows = item_rows.rows_of(df.select("user_id", "item_id"))
    try:
        return item_columns.sampled_counts(rows, ITEM_DOMAIN, BOUND, SEED)
    finally:
        rows.release()


def entropy_random(df: DataFrame, distinct: bool) -> np.ndarray:
    """Location entropy with random locations: each user's M random locations, visits capped at C;
    the capped visits per location."""
    checkins = df.select("user_id", "item_id", F.lit(1).alias("visits"), F.lit(None).cast("timestamp").alias("time"))
    pairs = user_locations.bounded_pairs(checkins, BOUND, VISITS_CAP, keys.new_salt(SEED, "entropy_locations"))
    table = pairs.groupBy("item_id").agg(F.sum("c").alias("c")).toPandas()
    vector = np.zeros(ITEMS, dtype=np.int64)
    vector[table["item_id"].to_numpy(dtype=np.int64) - 1] = table["c"].to_numpy(dtype=np.int64)
    return vector


def user_histogram(df: DataFrame, distinct: bool) -> np.ndarray:
    """The user histogram: each user's record count, in one of the public bins."""
    validated = validate_records(keyed(df, distinct), ITEM_DOMAIN, None)
    try:
        return user_quantities.true_histogram(validated.records, "records", np.array(HISTOGRAM_EDGES),
                                              validated.user_counts)
    finally:
        validated.release()


def dpsense_normalized(df: DataFrame, distinct: bool) -> np.ndarray:
    """DPSense with the normalising limit: column sums of rows weighted ⌊min(1, θ/r)·2^k⌋, in
    grid units (a row adds at most θ·2^k)."""
    rows = item_rows.rows_of(df.select("user_id", "item_id"))
    try:
        return item_columns.normalized_counts(rows, ITEM_DOMAIN, BOUND, grid_bits=dpsense.GRID_BITS)
    finally:
        rows.release()


def entropy_first_visits(df: DataFrame, distinct: bool) -> np.ndarray:
    """Location entropy's default choice: each user's first M locations by its own first visit
    (no times here, so by location id), visits capped at C; the capped visits per location."""
    checkins = df.select("user_id", "item_id", F.lit(1).alias("visits"), F.lit(None).cast("timestamp").alias("time"))
    table = user_locations.bounded_pairs(checkins, BOUND, VISITS_CAP).groupBy("item_id").agg(
        F.sum("c").alias("c")).toPandas()
    vector = np.zeros(ITEMS, dtype=np.int64)
    vector[table["item_id"].to_numpy(dtype=np.int64) - 1] = table["c"].to_numpy(dtype=np.int64)
    return vector


def frapp_sample(df: DataFrame, distinct: bool) -> np.ndarray:
    """FRAPP's records per user: each user's uniform sample of k whole records (counted per cell)."""
    kept, _ = bounded_records(df, BOUND, SEED, distinct=distinct)
    return item_edges.edge_counts(kept, ITEM_DOMAIN, ATTRIBUTE_DOMAIN).ravel()


# The guards count coverage against narrower domains, so that D has rows outside them.
GUARD_DOMAIN = ItemDomain(ids=np.arange(1, ITEMS - 2, dtype=np.int64), description="guard audit",
                          id_range=(1, ITEMS - 3))
GUARD_ATTRIBUTES = AttributeDomain(ATTRS[:2])


def guard_figures(df: DataFrame, distinct: bool) -> np.ndarray:
    """The guards' figures from validation's pass (release.guards.GuardFigures): users, the
    dropped-share sum and the users over the bound, the counts of users scaled by SHARE_GRID so
    that every coordinate's sensitivity is SHARE_GRID."""
    validated = validate_records(keyed(df, distinct), GUARD_DOMAIN, GUARD_ATTRIBUTES)
    try:
        n = validated.users_by_n.index.to_numpy()
        truncated = int(validated.users_by_n[n > BOUND].sum())
        return np.array([validated.users_read * SHARE_GRID, validated.dropped_share["all"],
                         validated.dropped_share["attr"], truncated * SHARE_GRID], dtype=np.int64)
    finally:
        validated.release()


def entropy_guard_figures(df: DataFrame, distinct: bool) -> np.ndarray:
    """Location entropy's guard figures (io.checkins.guard_figures): users (scaled by SHARE_GRID)
    and the dropped-share sum."""
    checkins = df.select("user_id", "item_id", F.lit(1).alias("visits"))
    users, share = guard_figures_of_checkins(checkins, GUARD_DOMAIN)
    return np.array([users * SHARE_GRID, share], dtype=np.int64)


@dataclass(frozen=True)
class Family:
    """A family's aggregate under audit and its stated sensitivity (L1, L∞ when it is less, and the
    squared L2 where Gaussian noise is paid by it)."""

    name: str
    aggregate: Callable[[DataFrame, bool], np.ndarray]
    l1: int
    linf: int | None = None
    l2_squared: int | None = None


FAMILIES = (
    Family("sra", sra, BOUND),
    # The Gaussian path (docs/sra_hpa.md): items and edges each of squared L2 sensitivity l·c, c = 1;
    # the aggregate holds both tables, so its L1 is 2l and its squared L2 2l.
    Family("sra_capped", sra_capped, 2 * BOUND, linf=1, l2_squared=2 * BOUND),
    Family("hpa_top_capped", hpa_top_capped, 2 * BOUND, linf=1, l2_squared=2 * BOUND),
    Family("sra_items", sra_items, BOUND, l2_squared=BOUND * BOUND),
    Family("gs_one_record", gs_one_record, 1),
    Family("hpa_popularity", hpa_popularity, 1),
    Family("hpa_top", hpa_top, BOUND),
    Family("partition_keys", partition_keys, BOUND, linf=1),
    Family("dpsense_sampled", dpsense_sampled, BOUND, l2_squared=BOUND),
    Family("entropy_random", entropy_random, BOUND * VISITS_CAP, linf=VISITS_CAP),
    Family("frapp_sample", frapp_sample, BOUND),
    # At most l groups per user, C records in each: records per group L1 l·C, L∞ C; users per group L1 l.
    Family("groups_per_user_popular", groups_per_user_popular, BOUND * VISITS_CAP + BOUND, linf=VISITS_CAP,
           l2_squared=BOUND * VISITS_CAP ** 2 + BOUND),
    # Each user on at most l0 = l distinct tuples of the private key columns: users per tuple L1 l, L∞ 1.
    Family("private_group_keys", private_group_keys, BOUND, linf=1),
    Family("groups_per_user", groups_per_user, BOUND * VISITS_CAP + BOUND, linf=VISITS_CAP,
           l2_squared=BOUND * VISITS_CAP ** 2 + BOUND),
    # Its sums of units and of square units (each at most steps): L1 2·l·C·steps, L∞ C·steps; and its
    # histograms over candidates: L1 l·C, L∞ C, L2² l·C².
    Family("groups_per_user_values", groups_per_user_values,
           2 * BOUND * VISITS_CAP * MEANS_CLIP.steps + BOUND * VISITS_CAP, linf=VISITS_CAP * MEANS_CLIP.steps,
           l2_squared=2 * BOUND * VISITS_CAP ** 2 * MEANS_CLIP.steps ** 2 + BOUND * VISITS_CAP ** 2),
    # Sums and means (docs/value_sums.md): the sums in grid units beside the counts.
    Family("means_sums", means_sums, BOUND * MEANS_CLIP.steps + BOUND,
           l2_squared=(BOUND * MEANS_CLIP.steps) ** 2 + BOUND ** 2),
    Family("means_capped", means_capped, 2 * BOUND * MEANS_CLIP.steps + 2 * BOUND, linf=MEANS_CLIP.steps,
           l2_squared=2 * BOUND * MEANS_CLIP.steps ** 2 + 2 * BOUND),
    Family("means_on_executors", means_on_executors, 2 * BOUND * MEANS_CLIP.steps + 2 * BOUND,
           linf=MEANS_CLIP.steps, l2_squared=2 * BOUND * MEANS_CLIP.steps ** 2 + 2 * BOUND),
    # The clipping range's ranks: one value per user, so each count moves by one at most.
    Family("means_clip_ranks", means_clip_ranks, 2 * len(CLIP_CANDIDATES) + 1, linf=1),
    # The same for an aggregation's range of the value: one value per user among its grouped records.
    Family("groups_value_ranks", groups_value_ranks, 2 * len(RANGE_CANDIDATES) + 1, linf=1),
    # Families that bound without a random key: checked the same way.
    # The Gaussian's L2 too: one bin by one; a row's grid weights w ≤ 2^10 with Σ w ≤ θ·2^10.
    Family("user_histogram", user_histogram, 1, l2_squared=1),
    Family("estimate_histogram", estimate_histogram, 1, l2_squared=1),
    # Each anchor moves by at most its own sensitivity: the item table's and the edge table's.
    Family("estimate_anchors", estimate_anchors, sum(ESTIMATE_ANCHOR_MOVES), linf=max(ESTIMATE_ANCHOR_MOVES)),
    Family("hpa_estimate_anchors", functools.partial(estimate_anchors, ranking=ESTIMATE_RANKING),
           sum(ESTIMATE_ANCHOR_MOVES), linf=max(ESTIMATE_ANCHOR_MOVES)),
    Family("dpsense_normalized", dpsense_normalized, BOUND << dpsense.GRID_BITS,
           l2_squared=BOUND << (2 * dpsense.GRID_BITS)),
    Family("entropy_first_visits", entropy_first_visits, BOUND * VISITS_CAP, linf=VISITS_CAP),
    # The guards' noisy figures: each coordinate moves by at most SHARE_GRID (release.guards).
    Family("guard_figures", guard_figures, 4 * SHARE_GRID, linf=SHARE_GRID),
    Family("entropy_guard_figures", entropy_guard_figures, 2 * SHARE_GRID, linf=SHARE_GRID),
)


def aggregate_on(spark: SparkSession, family: Family, base: pd.DataFrame, distinct: bool = False,
                 schema: str = SCHEMA) -> np.ndarray:
    """The family's aggregates on D, read in its own order (what :func:`moves` compares D′ with)."""
    return family.aggregate(frame(spark, base, schema=schema), distinct)


@dataclass(frozen=True)
class Move:
    """How far one added user moved a family's aggregates in one layout."""

    family: str
    layout: str
    l1: int
    linf: int
    l2_squared: int = 0

    def within(self, family: Family) -> bool:
        return (self.l1 <= family.l1 and (family.linf is None or self.linf <= family.linf)
                and (family.l2_squared is None or self.l2_squared <= family.l2_squared))


def moves(spark: SparkSession, family: Family, base: pd.DataFrame, extras: list[pd.DataFrame],
          distinct: bool = False, schema: str = SCHEMA, layouts: tuple[str, ...] = LAYOUTS,
          on_d: np.ndarray | None = None) -> list[Move]:
    """The family's move from D to D′ in each of ``layouts`` (by default every one), D read in its
    own order; the layouts take the added users of ``extras`` in turn (so one run tries several
    odd ids). ``schema``: the columns' types (string ids, or malformed ones). ``on_d``: the
    family's aggregates on D when the caller has them already (:func:`aggregate_on`)."""
    if on_d is None:
        on_d = aggregate_on(spark, family, base, distinct, schema)
    found = []
    for k, layout in enumerate(layouts):
        extra = extras[k % len(extras)]
        on_d2 = family.aggregate(frame(spark, neighbour(base, extra, layout), layout, schema), distinct)
        delta = np.abs(on_d2.astype(np.int64) - on_d.astype(np.int64))
        found.append(Move(family.name, layout, int(delta.sum()), int(delta.max(initial=0)), int((delta ** 2).sum())))
    return found
