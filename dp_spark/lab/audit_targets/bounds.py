"""Audit samplers for the private choice of a per-user bound (``bound_selection.choose_bound``),
and its negative control.

The mechanism reads the squared bias norms of every candidate and the public error model (the
tables' weights w_t, c records per user and cell, the noise variance at each candidate) of
q(b) = −⌈√(Σ_t w_t·‖B_t(b)‖² + N(b))⌉. The neighbours are placed where the sensitivity argument is tight:

* Every user has exactly b_K records, k = c of them in each of b_K/c cells shared by all users:
  at b_1 each user's bias vector is c·(b_K − b_1)/b_K in each cell, of norm √(c·b_K)·(b_K −
  b_1)/b_K, nearly the √(c·(b_K − b_1)) the argument allows; at b_K it is zero.
* D′ adds one more such user. Every user's vector points the same way, so the norm at b_1 grows
  by the whole norm of the new user's vector (the triangle inequality is an equality).
* The public noise is zero at b_1, so the root moves one for one, and at b_K it is set so that on
  D the exponents ε·q/Δq put b_1 ahead of b_K by ε + TILT: b_K is rare on D and about e^ε times
  likelier on D′. Middle candidates get noise large enough to take no part.

In the "ranked" pair (HPA's bias) each user's b_K records fall one in each of b_K items, ranked
by distinct public scores: at b_1 every user drops the same b_K − b_1 items whole, a vector of norm
exactly √(b_K − b_1).

With two tables or more every record has the same attribute value, so the edge table repeats the
item table (and, for the means, each sum table's stand-in repeats its count table): the weighted
norm is W = Σ_t w_t times one table's.
The statistic is the chosen bound; the exact ε of a pair is :func:`pair_epsilon`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.core.ledger import LedgerEntry
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities
from dp_spark.lab.audit_targets import primitives as prim
from dp_spark.release import bound_selection as bs

# The candidate lists of the grid: two close bounds, many bounds, and a wide range where Δq is
# large and the exact Fractions are long.
CANDIDATES = {
    "two": (5, 10),
    "many": (1, 2, 5, 10, 20, 50, 100, 200),
    "wide": (1, 100_000),
}
# The tables' weights (release.bound_objective): T tables weighing 1 each, the counts' item table
# (1), items and edges (2), and the means with attributes (4: the counts' bias vectors of items and
# edges, each standing for its sum table's too; families/means/choice.py); and the counts'
# "tables" objective with five attribute values (items 1, edges 1/5). "small": one table whose
# domain has only the cells the users' records fall in, with c = 1, where Δq comes from the cells
# (√(c²·cells) below √(c·U)) and the users' terms fill every cell: the tight case of that bound.
# "ranked": one table, HPA's bias: each user's b_K records are one in each of b_K items, every item
# with its own public score, so at b_1 every user drops the same b_K − b_1 least popular items whole
# (c = 1): a vector of norm exactly √(b_K − b_1), the whole √(c·U) the argument allows.
WEIGHTS: dict[int | str, tuple[Fraction, ...]] = {
    1: (Fraction(1),), 2: (Fraction(1),) * 2, 4: (Fraction(1),) * 4, "1+1/5": (Fraction(1), Fraction(1, 5)),
    "small": (Fraction(1),), "ranked": (Fraction(1),)}
TABLES = tuple(WEIGHTS)
SMALL = "small"
RANKED = "ranked"
USERS = 3  # on D; any number gives the same move, since the users' vectors are parallel
CELLS = 10  # the cells each user's b_K records fall in (k = b_K/10 of them each, when b_K allows)
TILT = Fraction(1)  # on D', b_1's exponent leads b_K's by about this much; on D by ε + TILT


@dataclass(frozen=True)
class BoundPair:
    """Neighbouring inputs of ``choose_bound`` (the squared norms on D and D′) and its public
    error model."""

    candidates: tuple[int, ...]
    model: bs.ErrorModel
    norms: tuple[list[int], list[int]]  # D, D'


def _per_cell(top: int) -> tuple[int, int]:
    """(cells, records per cell) for a user with exactly b_K = ``top`` records."""
    cells = max(c for c in range(1, CELLS + 1) if top % c == 0)
    return cells, top // cells


def _norms(users: int, candidates: tuple[int, ...], weights: tuple[Fraction, ...], cap: int,
           ranked: bool = False) -> list:
    cells, per_cell = (candidates[-1], 1) if ranked else _per_cell(candidates[-1])
    rows = pd.DataFrame({"user_id": np.repeat(np.arange(users), cells), "cell": np.tile(np.arange(cells), users),
                         "k": per_cell, "n": candidates[-1]})
    if ranked:  # item j scored b_K − j: the user's records ranked 1, 2, …, b_K, no ties
        rows = bs.ranked_cells(rows, "cell", {j: candidates[-1] - j for j in range(cells)})
    one = bs.squared_bias_norms(rows, candidates, cap)
    return bs.weighted_norms([one] * len(weights), weights)


def model_of(candidates: tuple[int, ...], tables: int | str) -> bs.ErrorModel:
    """The pair's error model before its noise is set: all that Δq reads (its weights, c and
    cells), without the norms, which take most of a pair's time to count."""
    cells, per_cell = _per_cell(candidates[-1])
    cap, domain = (1, (cells,)) if tables == SMALL else (1, None) if tables == RANKED else (per_cell, None)
    return bs.ErrorModel(WEIGHTS[tables], cap, (Fraction(0),) * len(candidates), cells=domain)


def pair(candidates: tuple[int, ...], tables: int | str, epsilon: Fraction) -> BoundPair:
    """D: USERS users as in the module; D′: one more. The noise at b_K (public, any value is
    fair) is the least that puts b_1 ahead by ε + TILT exponent units on D; :func:`pair_epsilon`
    gives the pair's exact ε."""
    model = model_of(candidates, tables)
    d, d2 = (_norms(users, candidates, WEIGHTS[tables], model.records_per_cell, tables == RANKED)
             for users in (USERS, USERS + 1))
    if len(candidates) == 1:
        return BoundPair(tuple(candidates), model, (d, d2))
    lead = float((epsilon + TILT) / epsilon * bs.quality_sensitivity(candidates, model))
    root_k = math.sqrt(d[0]) / bs.GRID + lead
    far = Fraction(round(root_k * 10)) ** 2  # the middle candidates: far behind both ends
    noise = (Fraction(0),) + (far,) * (len(candidates) - 2) + (Fraction(root_k * root_k).limit_denominator(10**6),)
    return BoundPair(tuple(candidates), replace(model, noise_variance=noise), (d, d2))


def pair_epsilon(p: BoundPair, epsilon: Fraction, sensitivity: Fraction | None = None) -> float:
    """The pair's true ε when the mechanism runs at ``epsilon`` with ``sensitivity`` (default the
    claimed Δq): the largest |ln P_D(b)/P_D′(b)| over the candidates (for a discrete output no
    event does better than one outcome)."""
    sensitivity = bs.quality_sensitivity(p.candidates, p.model) if sensitivity is None else sensitivity
    d, d2 = (np.asarray(exponential_probabilities(bs.quality(norms, p.candidates, p.model), epsilon, sensitivity,
                                                  monotone=True), dtype=float) for norms in p.norms)
    return float(np.max(np.abs(np.log(d / d2))))


def choose_bound_sampler(epsilon: Fraction, candidates: tuple[int, ...], tables: int | str):
    """The bound ``choose_bound`` picks, once per trial, on D or D′. The pair is counted at the
    first trial, not here: importing the grid builds every sampler, and a run samples few of them."""
    the_pair = functools.cache(lambda: pair(candidates, tables, epsilon))

    def sample(side, trials, seed, _spark):
        p = the_pair()
        rng = RandomSource(seed)
        # The first release is choose_bound's own; the others draw the exponential mechanism it
        # called, with its entry (ε, Δq, factor) and scores, all at once: one call per release
        # spent half a millisecond on the exact scores and a draw that settles one release a round.
        budget = prim.RecordingBudget(epsilon)
        first = bs.choose_bound(p.norms[side], p.candidates, p.model, epsilon, budget, rng)
        entry, scores, monotone, index = budget.only_draw()
        if first != p.candidates[index]:
            raise AssertionError(f"choose_bound returned {first}, not candidate {index} of {p.candidates}")
        rest = prim.exponential_rows(entry, scores, monotone, trials - 1, rng)
        return np.concatenate([[first], np.asarray(p.candidates, dtype=float)[rest]])
    return sample


def capless_sensitivity(p: BoundPair) -> Fraction:
    """The bug the control plants: Δq worked out as if each user counted one record per cell
    (c = 1) while the quality counts up to c; √c too small."""
    return bs.quality_sensitivity(p.candidates, replace(p.model, records_per_cell=1))


def one_cell_sensitivity(p: BoundPair) -> Fraction:
    """The bug the small-domain control plants: Δq worked out for a domain of one cell while the
    users' records fill ten; √10 too small."""
    return bs.quality_sensitivity(p.candidates, replace(p.model, cells=(1,)))


def cap_forgotten_sampler(epsilon: Fraction, candidates: tuple[int, ...] = CANDIDATES["many"],
                          tables: int | str = 1):
    """NEGATIVE CONTROL: ``choose_bound``'s quality sampled at :func:`capless_sensitivity`; on the
    ``many`` pair (c = 20) the true ε is several times the claim."""
    return _wrong_sensitivity_sampler(pair(candidates, tables, epsilon), epsilon, capless_sensitivity,
                                      "exponential mechanism without the per-cell cap",
                                      "the records per cell forgotten in the sensitivity")


def cells_understated_sampler(epsilon: Fraction, candidates: tuple[int, ...] = CANDIDATES["many"]):
    """NEGATIVE CONTROL: the ``small`` pair's quality sampled at :func:`one_cell_sensitivity`;
    the true ε is about three times the claim."""
    return _wrong_sensitivity_sampler(pair(candidates, SMALL, epsilon), epsilon, one_cell_sensitivity,
                                      "exponential mechanism with the domain's cells understated",
                                      "the cells that bound a user's part understated")


def _wrong_sensitivity_sampler(p: BoundPair, epsilon: Fraction, sensitivity, name: str, why: str):
    wrong = sensitivity(p)

    def sample(side, trials, seed, _spark):
        scores = bs.quality(p.norms[side], p.candidates, p.model)
        entry = LedgerEntry("negative control", name, epsilon, wrong, wrong / epsilon, len(p.candidates),
                            not_private=why)
        # Every release at once (as many independent draws as calls, a row each): one call per
        # release took 2 ms.
        chosen = prim.exponential_rows(entry, scores, True, trials, RandomSource(seed))
        return np.asarray(p.candidates, dtype=float)[chosen]
    return sample
