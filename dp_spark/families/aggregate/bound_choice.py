"""groups_per_user = "auto": l chosen privately from public candidates, with the counts' choice of
a bound (release.bound_selection, claim docs/bound_selection.md, "Privacy claim: bound_selection")
applied to a user's groups.

The quality weighs, at each candidate l, the bias SRA's uniform sample of l groups brings against
the noise a count per group carries at l. The bias is counted in memberships: a user with n
groups keeps each with probability l/n, so it is absent from each of its groups with probability
(n − l)⁺/n, and the squared norm over the groups of these expected absences (each user's part
capped at U, from a DP count of the users) is bound_selection's with one record per (user,
group) cell: one user moves it by at most √U, the sensitivity the mechanism is given. The noise
side is public: the variance of one step's noise per group at L1 l·c (L2² l·c²), times the number
of groups, over c² so that it is counted in memberships of c records each. A tenth of ε pays for
the choice (params.BOUND_SHARE, the counts' share), before the bound it chooses is applied.

With HPA's bounding a user keeps its l groups of highest noisy popularity (ties at random), so the
absences are HPA's: the popularity is drawn before the choice (a DP output, fixed whatever one user
adds) and bound_bias ranks each user's groups by it, the counts' ranked terms with one record per
cell. A user's absences still sum to (n − l)⁺, so the sensitivity is the same.

When the metrics ask for a mean (or a variance or deviation, given where the mean is), the choice
scores what the means' l is scored by instead (release.mean_bound_quality; docs/aggregate.md,
"Choosing groups_per_user for means"): per group, the chance its noisy count passes the half-width
the release asks before it gives a mean, times the nats by which that mean beats the range alone,
at each group's kept count Σ_u min(k_uj, c)·m_uj (m_uj the share of group j the bound keeps of
user u: min(g_u, l)/g_u for SRA's sample of g_u groups, HPA's by rank). A user adds at most c to a
group and c·min(l, G) in all (records_per_bound = c), which Δq covers; no count of users is drawn.
As the means' own l, this choice takes a twentieth of ε under pure ε and a tenth of ρ under zCDP
(params.MEANS_BOUND_SHARE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.core import noise_choice
from dp_spark.core.domain import ItemDomain
from dp_spark.core.ledger import GAUSSIAN_MECHANISM, Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.aggregate import histogram_metrics, noisy_totals
from dp_spark.families.aggregate.noisy_totals import RECORDS, SUM, GroupBound
from dp_spark.families.aggregate.params import BOUND_SPLIT_KEY, HISTOGRAM, HPA, AggregateParams
from dp_spark.release import bound_bias, bound_selection
from dp_spark.release import mean_bound_quality as mq
from dp_spark.release.sum_tables import halfwidth

STEP = "choose groups_per_user"
COUNTS, MEANS = "counts", "means"


def quality_of(params: AggregateParams) -> str:
    """Which quality scores l (public: the metrics): MEANS when a metric is given only where its
    group's mean is (AggregateParams.scores_means), else COUNTS."""
    return MEANS if params.scores_means else COUNTS


def error_model(params: AggregateParams, split: dict[str, Fraction], groups: int) -> bound_selection.ErrorModel:
    """The quality's public side at each candidate: one table of memberships (T = 1, one record per
    cell) and the noise of one metric step per group at that l, in memberships of c records."""
    assert params.bound_candidates is not None
    c = params.bound.records_per_group
    share = min(split[step] for step in params.steps())
    noise = []
    for l in params.bound_candidates:
        l1, l2_squared = l * c, l * c * c
        chosen = noise_choice.chosen(params.noise, l1, l2_squared, share)
        variance = (noise_choice.gaussian_variance(l2_squared, share) if chosen == noise_choice.GAUSSIAN
                    else noise_choice.laplace_variance(l1, share))
        noise.append(Fraction(variance) * groups / (c * c))
    return bound_selection.ErrorModel((Fraction(1),), 1, tuple(noise), cells=(groups,))


def means_model(params: AggregateParams, split: dict[str, Fraction], groups: int | None,
                alpha: float) -> mq.MeansErrorModel:
    """The means' quality's public side at each candidate l (docs/aggregate.md, "Choosing
    groups_per_user for means"): one table of ``groups`` cells (None when the groups are selected
    privately: Δq then takes every user's reach as c·l), the mean's count noise, its half-width at
    α/2 and the mean's noise variance at that l, as the release draws them; c records per group,
    and a user keeps at most c·l records (records_per_bound = c)."""
    assert params.bound_candidates is not None
    c = params.bound.records_per_group
    tables = tuple(_mean_table_at(params, split, GroupBound(int(l), c), alpha) for l in params.bound_candidates)
    return mq.MeansErrorModel((Fraction(1),), (groups,), (tables,), c, records_per_bound=c)


def _mean_table_at(params: AggregateParams, split: dict[str, Fraction], bound: GroupBound,
                   alpha: float) -> mq.TableAtBound:
    """The mean of one group at ``bound``, as the release gives it: by tables, a count table and a
    sum table (the sum's noise over the range's half-width, steps units, squared); by histogram,
    the count is the sum of the group's K cells and the mean's numerator their sum weighted by
    the candidates' distances from the centre, over the half-range (the count's noise taken as a
    Gaussian of its variance: it enters the choice's utility only). The noise variances do not
    depend on the range, so a range chosen after l leaves them as they are."""
    value = params.value
    assert value is not None and params.clip is not None
    if params.method == HISTOGRAM:
        assert params.candidates is not None
        b = np.asarray(params.candidates.values, dtype=float)
        entry = histogram_metrics.ledger_entry(bound, value, split[histogram_metrics.step_name(value)], params.noise, 1,
                                               b.size)
        cell = histogram_metrics.cell_sd(entry) ** 2
        centre, half_range = (b[0] + b[-1]) / 2, (b[-1] - b[0]) / 2
        threshold = histogram_metrics.combination_halfwidth(entry, np.ones(b.size), alpha / 2)
        variance = b.size * cell + cell * float(np.sum((b - centre) ** 2)) / half_range**2
        return mq.TableAtBound(mq.GAUSSIAN, math.sqrt(b.size * cell), threshold, variance)
    shares = {table: split[noisy_totals.step_name(table, value)] for table in (RECORDS, SUM)}
    entries = noisy_totals.ledger_entries((RECORDS, SUM), bound, params.clip, value, shares, params.noise, 1)
    count, total = entries[RECORDS], entries[SUM]
    if count.mechanism == GAUSSIAN_MECHANISM:
        noise, scale = mq.GAUSSIAN, math.sqrt(float(count.noise_scale))
    else:
        noise, scale = mq.LAPLACE, float(count.noise_scale)
    variance = histogram_metrics.cell_sd(count) ** 2 + histogram_metrics.cell_sd(total) ** 2 / params.clip.steps**2
    return mq.TableAtBound(noise, scale, halfwidth(count, alpha / 2), variance)


def mean_kept_counts(grouped: DataFrame, groups: Memberships, params: AggregateParams, group: str,
                     user_col: str = "user_id", ranks: np.ndarray | None = None) -> np.ndarray:
    """Each group's kept count at each candidate l, in 1/mq.GRID records (bound_bias.expected_kept
    by cells): Σ_u ⌊GRID·min(k_uj, c)·m_uj⌋, k_uj the user's records in group j, m_uj the share of
    the group SRA's sample of l of the user's groups keeps (or HPA's, by ``ranks``). NOT private:
    read only by the mechanism."""
    assert params.bound_candidates is not None
    records = grouped.select(F.col(user_col).alias("user_id"), F.col(group).alias("item_id"))
    (kept,) = bound_bias.expected_kept(records, params.bound_candidates, params.bound.records_per_group, mq.GRID,
                                       [bound_bias.ITEMS], groups.per_user, groups.users,
                                       ranking=None if ranks is None else ranking(ranks), by_cells=True)
    return kept


def memberships(grouped: DataFrame, group: str, user_col: str = "user_id") -> DataFrame:
    """Each user's distinct groups, as bound_bias reads a user's records: (user_id, item_id) with
    one row per (user, group), so that a cell's k is 1 and a user's n its number of groups."""
    return grouped.select(F.col(user_col).alias("user_id"), F.col(group).alias("item_id")).distinct()


@dataclass(frozen=True)
class Memberships:
    """The (user, group) pairs with each user's number of groups beside them, cached, and their
    sizes (NOT private: read only by the mechanism)."""

    pairs: DataFrame  # [user_id, item_id], one row per (user, group)
    per_user: DataFrame  # [user_id, _n]: each user's groups
    users: int
    largest: int | None  # the most groups a user has; None without pairs
    total: int  # the pairs

    @classmethod
    def of(cls, pairs: DataFrame) -> Memberships:
        per_user = pairs.groupBy("user_id").agg(F.count(F.lit(1)).alias("_n")).cache()
        sizes = per_user.agg(F.count(F.lit(1)).alias("users"), F.max("_n").alias("largest"),
                             F.sum("_n").alias("total")).collect()[0]
        largest = None if sizes["largest"] is None else int(sizes["largest"])
        return cls(pairs, per_user, int(sizes["users"]), largest, int(sizes["total"] or 0))

    def unpersist(self) -> None:
        """Drop the per-user table's cache (the pairs' is their owner's)."""
        self.per_user.unpersist()


def ranking(ranks: np.ndarray) -> bound_bias.ItemRanking:
    """HPA's order of the groups as bound_bias reads it: group i (its index, 0 to G − 1) scored by
    its rank of noisy popularity (popular_groups.popularity_ranks; a DP output), which orders and
    ties the groups as the popularity itself does."""
    groups = ItemDomain(None, "the groups", (0, len(ranks) - 1))
    return bound_bias.ItemRanking(groups, np.asarray(ranks, dtype=np.int64))


def membership_norms(groups: Memberships, candidates: tuple[int, ...], user_cap: int,
                     ranks: np.ndarray | None = None) -> list[int]:
    """The squared norms of the expected absences at each candidate, each user's part capped at
    ``user_cap`` (NOT private: read only by the mechanism); with ``ranks``, HPA's absences. The
    largest user's groups let the terms be longs rather than decimals, and the pairs' number sizes
    the shuffle: a release at 10M records took 34.1 s against 62.7 s without them
    (docs/lab/performance.md, "Choosing l privately")."""
    (norms,) = bound_bias.squared_bias_norms(groups.pairs, candidates, 1, bound_selection.GRID, [bound_bias.ITEMS],
                                             groups.largest, groups.per_user, groups.users, user_cap=user_cap,
                                             record_count=groups.total,
                                             ranking=None if ranks is None else ranking(ranks))
    return norms


def choose(grouped: DataFrame, params: AggregateParams, split: dict[str, Fraction], budget: Budget,
           rng: RandomSource, group: str, user_col: str = "user_id",
           ranks: np.ndarray | None = None, alpha: float = 0.05) -> tuple[AggregateParams, dict]:
    """The parameters at the l chosen privately (a DP output) and what the report says of it.
    ``grouped``: run.in_groups' records (a user and a group index each); NOT private, read
    only by the mechanism. ``ranks``: with HPA's bounding, the groups' ranks of noisy popularity,
    drawn before. ``alpha``: the release's, whose half-width at α/2 a group's noisy count must
    pass for a mean (the means' quality)."""
    candidates = params.bound_candidates
    assert candidates is not None
    if (ranks is None) != (params.bounding != HPA):
        raise ValueError("HPA's choice of l needs the popularity's ranks, and only HPA's")
    # Public: any error in the model before the records' pass. With private keys the groups'
    # number is a DP output, but Δq is kept a function of the config alone (cells None).
    model = (means_model(params, split, None if params.keys.private else len(params.keys), alpha)
             if quality_of(params) == MEANS else None)
    pairs = memberships(grouped, group, user_col).cache()
    try:
        groups = Memberships.of(pairs)
        try:
            if model is not None:
                kept = mean_kept_counts(grouped, groups, params, group, user_col, ranks)
                l = mq.choose_bound([kept], candidates, model, split[BOUND_SPLIT_KEY], budget, rng, step=STEP)
                return at_bound(params, l), {"groups_per_user": l}
            choice = bound_selection.choose_bound_by_users(lambda cap: membership_norms(groups, candidates, cap, ranks),
                                                           groups.users, candidates,
                                                           error_model(params, split, len(params.keys)),
                                                           split[BOUND_SPLIT_KEY], budget, rng, step=STEP)
        finally:
            groups.unpersist()
    finally:
        pairs.unpersist()
    return at_bound(params, choice.bound), choice.to_json("groups_per_user")


def at_bound(params: AggregateParams, l: int) -> AggregateParams:
    """The parameters at ``l``, no longer "auto"."""
    return replace(params, bound=GroupBound(l, params.bound.records_per_group), bound_candidates=None)

