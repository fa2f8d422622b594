"""Audit samplers for the means' private choice of l (``mean_bound_quality.choose_bound``), and its
negative control.

The mechanism reads each cell's kept count at every candidate and the public model the means
family builds (``families.means.choice.error_model``: each candidate's count noise, the half-width a
mean needs, the two noises' variance), here for a domain of DOMAIN items with the tables' part of
ε ten times the choice's, as a release's split gives. The neighbours are placed where the
sensitivity argument is tight:

* b* is the candidate whose reach L_b·b is the largest (it sets Δq), and K* the kept count where
  the usefulness at b* is steepest.
* D: b_K cells, each holding round(K*) users of one record each (their kept count is the same at
  every candidate: a user with n ≤ b_1 keeps everything).
* D′ adds a user with b_K records, one in each cell: at b* it keeps b*/b_K of a record in each, b*
  in all, each on the steepest part of the curve, so q(b*) rises by nearly L_b*·b* = Δq. At the
  other candidates the cells sit where their curves are flatter, so their scores move less and
  b*'s share of the draw moves most.
* The "ranked" pair (HPA's kept counts): the same user's records ranked by distinct public scores
  of the cells, so that at b it keeps whole records in its first b cells and none in the others,
  b in all: at b* a whole record in each of b* cells on the steepest part.

The statistic is the chosen bound; the exact ε of a pair is :func:`pair_epsilon`. Where b* is
unlikely on both sides the samples cannot see the move, however large; the exact ε is then the
check (tests).

The negative control runs at the Δq of the smallest candidate, as if one candidate's reach bounded
them all: with Gaussian noise the reach grows as √b, and that Δq is far too small. Its pair adds to
D a block of b_K cells filled by m heavy users with a record in each (their kept count grows with
b), m the least that brings q(b_K) level with the best other score: b_K and the leader then share
the draw on D, and D′'s move hands it to b_K.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dp_spark.core.domain import item_domain_of_ids
from dp_spark.core.ledger import LedgerEntry
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities
from dp_spark.families.aggregate import bound_choice
from dp_spark.families.aggregate.family import aggregate_params
from dp_spark.families.aggregate.params import MEANS_BOUND_SHARE
from dp_spark.families.means import choice
from dp_spark.families.means.params import MeansParams, budget_split
from dp_spark.lab.audit_targets import primitives as prim
from dp_spark.release import mean_bound_quality as mq
from dp_spark.release.family import Domains

CANDIDATES = {
    "two": (5, 10),
    "many": (1, 2, 5, 10, 20, 50),
}
NOISES = ("laplace", "gaussian")
# The aggregate's points: c records per group, so that the reach's c·l differs from the means' l.
RECORDS_PER_GROUP = (2, 4)
CONTROL_RECORDS_PER_GROUP = 4
DOMAIN = 200  # items in the public domain: more than the b_K cells the pair fills
TABLES_SHARE = 10  # the tables' part of ε over the choice's (a tenth chooses l)


@dataclass(frozen=True)
class MeanBoundPair:
    """Neighbouring inputs of ``choose_bound`` (the item table's kept counts on D and D′) and its
    public model."""

    candidates: tuple[int, ...]
    model: mq.MeansErrorModel
    kept: tuple[np.ndarray, np.ndarray]  # D, D'


def model_of(candidates: tuple[int, ...], noise: str, epsilon: Fraction) -> mq.MeansErrorModel:
    """The means family's model for values in [0, 1] over DOMAIN items, at a total ε that gives the
    choice ``epsilon`` (Gaussian noise with one record per user and item)."""
    params = MeansParams(0.0, 1.0, "auto", noise=noise, records_per_item=1 if noise == "gaussian" else None,
                         candidates=candidates)
    domains = Domains(item_domain_of_ids(list(range(1, DOMAIN + 1)), f"1..{DOMAIN}"))
    split = budget_split(params, epsilon * TABLES_SHARE, domains, Fraction(1, TABLES_SHARE))
    return choice.error_model(params, domains, split)


def aggregate_model_of(candidates: tuple[int, ...], noise: str, epsilon: Fraction,
                       records_per_group: int) -> mq.MeansErrorModel:
    """The aggregate's model when it scores groups_per_user by the means (a count and a mean of
    values in [0, 1] per group, DOMAIN groups, ``records_per_group`` records each), at a total ε
    that gives the choice ``epsilon``: a user keeps up to c records per unit of l."""
    params = aggregate_params("g", {"g": range(DOMAIN)}, ["count", "mean(v)"], "auto", records_per_group, 0.0, 1.0,
                              noise=noise, groups_per_user_candidates=candidates)
    split = params.split(epsilon / MEANS_BOUND_SHARE)
    return bound_choice.means_model(params, split, DOMAIN, 0.05)


@lru_cache(maxsize=None)  # the registry names each pair's Δq, and its sampler draws from it
def pair(candidates: tuple[int, ...], noise: str, epsilon: Fraction, ranked: bool = False,
         records_per_group: int | None = None) -> MeanBoundPair:
    """Without ``records_per_group``, the means family's pair (one record per unit of the bound);
    with c, the aggregate's: D′'s user has c records in each of its b_K groups, and keeps c·b of
    them at b."""
    model = (model_of(candidates, noise, epsilon) if records_per_group is None
             else aggregate_model_of(candidates, noise, epsilon, records_per_group))
    per_record = mq.GRID * (records_per_group or 1)
    reach = mq.reach(candidates, model)
    star = int(np.argmax(reach))
    curve = model.tables[0][star]
    k = np.linspace(0, 50 * (curve.threshold + curve.scale + curve.variance ** 0.5), 20_001)
    steepest = float(k[np.argmax(np.diff(curve.usefulness(k)))])
    users = max(1, round(steepest))
    top = candidates[-1]
    d = np.full((top, len(candidates)), users * mq.GRID, dtype=np.int64)
    if ranked:  # cell j is the user's (j+1)-th by score: kept whole at b > j
        added = per_record * (np.arange(top)[:, None] < np.asarray(candidates)[None, :]).astype(np.int64)
    else:
        added = np.array([per_record * min(top, b) // top for b in candidates], dtype=np.int64)
    return MeanBoundPair(tuple(candidates), model, (d, d + added))


def pair_epsilon(p: MeanBoundPair, epsilon: Fraction, sensitivity: Fraction | None = None) -> float:
    """The pair's true ε when the mechanism runs at ``epsilon`` with ``sensitivity`` (default the
    claimed Δq): the largest |ln P_D(b)/P_D′(b)| over the candidates."""
    sensitivity = mq.quality_sensitivity(p.candidates, p.model) if sensitivity is None else sensitivity
    d, d2 = (np.asarray(exponential_probabilities(mq.quality([kept], p.candidates, p.model), epsilon,
                                                  float(sensitivity), monotone=True), dtype=float)
             for kept in p.kept)
    return float(np.max(np.abs(np.log(d / d2))))


def choose_bound_sampler(epsilon: Fraction, candidates: tuple[int, ...], noise: str, ranked: bool = False,
                         records_per_group: int | None = None):
    """The bound ``choose_bound`` picks, once per trial, on D or D′."""
    p = pair(candidates, noise, epsilon, ranked, records_per_group)

    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        # The first release is choose_bound's own; the others draw the exponential mechanism it
        # called, with its entry and scores, all at once (prim.exponential_rows).
        budget = prim.RecordingBudget(epsilon)
        first = mq.choose_bound([p.kept[side]], p.candidates, p.model, epsilon, budget, rng)
        entry, scores, monotone, index = budget.only_draw()
        if first != p.candidates[index]:
            raise AssertionError(f"choose_bound returned {first}, not candidate {index} of {p.candidates}")
        rest = prim.exponential_rows(entry, scores, monotone, trials - 1, rng)
        return np.concatenate([[first], np.asarray(p.candidates, dtype=float)[rest]])
    return sample


def control_pair(candidates: tuple[int, ...] = CANDIDATES["many"], noise: str = "gaussian",
                 epsilon: Fraction = Fraction(1), records_per_group: int | None = None) -> MeanBoundPair:
    """:func:`pair` with the block of heavy users described in the module, b* = b_K (with
    ``records_per_group``, the aggregate's pair, each heavy user with c records per group)."""
    p = pair(candidates, noise, epsilon, records_per_group=records_per_group)
    top = candidates[-1]
    per_user = np.array([mq.GRID * (records_per_group or 1) * min(top, b) // top for b in candidates], dtype=np.int64)

    def with_block(m: int) -> tuple[np.ndarray, np.ndarray]:
        block = np.tile(m * per_user, (top, 1))
        return tuple(np.vstack([kept, block]) for kept in p.kept)  # type: ignore[return-value]

    def gap(m: int) -> Fraction:
        scores = mq.quality([with_block(m)[0]], candidates, p.model)
        return scores[-1] - max(scores[:-1])

    low, high = 0, 1
    while gap(high) < 0:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if gap(middle) < 0 else (low, middle)
    return MeanBoundPair(p.candidates, p.model, with_block(low))


def smallest_reach_sensitivity(p: MeanBoundPair) -> Fraction:
    """The bug the control plants: Δq from the smallest candidate's reach alone."""
    first = replace(p.model, tables=tuple(t[:1] for t in p.model.tables))
    return mq.quality_sensitivity(p.candidates[:1], first)


def smallest_reach_sampler(epsilon: Fraction, candidates: tuple[int, ...] = CANDIDATES["many"],
                           noise: str = "gaussian"):
    """NEGATIVE CONTROL: the ``many`` Gaussian :func:`control_pair`'s quality sampled at
    :func:`smallest_reach_sensitivity`."""
    p = control_pair(candidates, noise, epsilon)
    return _wrong_sensitivity_sampler(p, epsilon, smallest_reach_sensitivity(p),
                                      "exponential mechanism at the smallest candidate's reach",
                                      "the largest candidate's reach left out of the sensitivity")


def _wrong_sensitivity_sampler(p: MeanBoundPair, epsilon: Fraction, wrong: Fraction, mechanism: str,
                               not_private: str):
    """The bound the exponential mechanism picks over ``p``'s quality at the ``wrong`` Δq, once per
    trial, on D or D′ (a control: its ledger entry says what is wrong)."""
    def sample(side, trials, seed, _spark):
        scores = mq.quality([p.kept[side]], p.candidates, p.model)
        entry = LedgerEntry("negative control", mechanism, epsilon, wrong, wrong / epsilon, len(p.candidates),
                            not_private=not_private)
        chosen = prim.exponential_rows(entry, scores, True, trials, RandomSource(seed))
        return np.asarray(p.candidates, dtype=float)[chosen]
    return sample


def records_per_bound_forgotten_sensitivity(p: MeanBoundPair) -> Fraction:
    """The bug the aggregate's control plants: Δq as if a user kept one record per unit of l (the
    means' reach) while it keeps c per group."""
    return mq.quality_sensitivity(p.candidates, replace(p.model, records_per_bound=1))


def records_per_bound_forgotten_sampler(epsilon: Fraction, records_per_group: int = CONTROL_RECORDS_PER_GROUP,
                                        candidates: tuple[int, ...] = CANDIDATES["many"], noise: str = "gaussian"):
    """NEGATIVE CONTROL: the aggregate's :func:`control_pair` (c records per group) sampled at
    :func:`records_per_bound_forgotten_sensitivity`."""
    p = control_pair(candidates, noise, epsilon, records_per_group)
    return _wrong_sensitivity_sampler(p, epsilon, records_per_bound_forgotten_sensitivity(p),
                                      "exponential mechanism at one record per unit of l",
                                      "c records per group left out of the sensitivity")
