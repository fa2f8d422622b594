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
the choice (params.BOUND_SHARE, the counts' and means' share), before the bound it chooses is
applied.

With HPA's bounding a user keeps its l groups of highest noisy popularity (ties at random), so the
absences are HPA's: the popularity is drawn before the choice (a DP output, fixed whatever one user
adds) and bound_bias ranks each user's groups by it, the counts' ranked terms with one record per
cell. A user's absences still sum to (n − l)⁺, so the sensitivity is the same.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.core import noise_choice
from dp_spark.core.domain import ItemDomain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.aggregate.noisy_totals import GroupBound
from dp_spark.families.aggregate.params import BOUND_SPLIT_KEY, HPA, AggregateParams
from dp_spark.release import bound_bias, bound_selection

STEP = "choose groups_per_user"


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
           ranks: np.ndarray | None = None) -> tuple[AggregateParams, dict]:
    """The parameters at the l chosen privately (a DP output) and what the report says of it.
    ``grouped``: run.in_groups' records (a user and a group index each); NOT private, read
    only by the mechanism. ``ranks``: with HPA's bounding, the groups' ranks of noisy popularity,
    drawn before."""
    candidates = params.bound_candidates
    assert candidates is not None
    if (ranks is None) != (params.bounding != HPA):
        raise ValueError("HPA's choice of l needs the popularity's ranks, and only HPA's")
    pairs = memberships(grouped, group, user_col).cache()
    try:
        groups = Memberships.of(pairs)
        try:
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

