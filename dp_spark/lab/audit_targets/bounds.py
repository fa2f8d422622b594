"""Audit samplers for the private choice of a per-user bound (``bound_selection.choose_bound``,
issue 30), and its negative control.

The mechanism reads ``users_by_n`` (users per record count) and public numbers: the candidates
b_1 < … < b_K, the tables T and the noise per unit N. D′ adds one user with 3·b_K records,
beyond the cap: every score q(b) drops by T·(b_K − b), so b_1's drops by the full
Δq = T·(b_K − b_1) and b_K's not at all. In the monotone case a candidate's probability moves by
nearly e^ε only when the others hardly move the normaliser, so the scores are placed (through
the public N) where that shows: on D the exponents c·q(b), c = ε/Δq, fall linearly from b_1 to
b_K by ε + 1, on D′ by 1. Then b_K is rare on D and about e^ε times likelier on D′ (the exact
ratio: :func:`pair_epsilon`). Users with one record lose nothing at any bound; they are there so
the loss is summed over more than one kind of user.

The statistic is the chosen bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark.algorithms import bound_selection as bs
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities
from dp_spark.core.privacy import Budget, LedgerEntry

# The candidate lists of the grid: two close bounds, the many bounds tune shows by default, and a
# wide range where Δq is large (99,999·T) and the exact Fractions are long.
CANDIDATES = {
    "two": (5, 10),
    "many": (1, 2, 5, 10, 20, 50, 100, 200),
    "wide": (1, 100_000),
}
TABLES = (1, 2)
LIGHT_USERS = 10  # one record each: below every bound
HEAVY_USERS = 2  # b_K records each on D; D' has one more (3·b_K records, capped to b_K)
TILT = Fraction(1)  # on D', b_1's exponent leads b_K's by this much; on D by ε + TILT


@dataclass(frozen=True)
class BoundPair:
    """Neighbouring inputs of ``choose_bound`` and its public parameters."""

    candidates: tuple[int, ...]
    tables: int
    noise_per_unit: Fraction
    users_by_n: tuple[dict[int, int], dict[int, int]]  # D, D'


def pair(candidates: tuple[int, ...], tables: int, epsilon: Fraction) -> BoundPair:
    """D: LIGHT_USERS with one record and HEAVY_USERS with b_K; D′: one more user with 3·b_K.

    With h heavy users, q(b) = const − (N − T·h)·b, so the exponent falls by
    ε·(N − T·h)/T from b_1 to b_K. N = T·(h + (ε + TILT)/ε) makes that ε + TILT on D and TILT
    on D′ (h + 1 heavy users)."""
    top = candidates[-1]
    d = {1: LIGHT_USERS, top: HEAVY_USERS}
    d2 = {**d, 3 * top: 1}
    noise_per_unit = tables * (HEAVY_USERS + (epsilon + TILT) / epsilon)
    return BoundPair(tuple(candidates), tables, noise_per_unit, (d, d2))


def pair_epsilon(p: BoundPair, epsilon: Fraction) -> float:
    """The pair's true ε: the largest |ln P_D(b)/P_D′(b)| over the candidates (for a discrete
    output no event does better than one outcome)."""
    sensitivity = bs.quality_sensitivity(p.candidates, p.tables)
    d, d2 = (np.asarray(exponential_probabilities(bs.quality(users, p.candidates, p.noise_per_unit, p.tables),
                                                  epsilon, sensitivity, monotone=True), dtype=float)
             for users in p.users_by_n)
    return float(np.max(np.abs(np.log(d / d2))))


def choose_bound_sampler(epsilon: Fraction, candidates: tuple[int, ...], tables: int):
    """The bound ``choose_bound`` picks, once per trial, on D or D′."""
    p = pair(candidates, tables, epsilon)

    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        users = p.users_by_n[side]
        return np.array([bs.choose_bound(users, p.candidates, p.noise_per_unit, epsilon, Budget(epsilon), rng,
                                         p.tables) for _ in range(trials)], dtype=float)
    return sample


def half_sensitivity_sampler(epsilon: Fraction, candidates: tuple[int, ...] = CANDIDATES["many"], tables: int = 2):
    """NEGATIVE CONTROL: ``choose_bound`` with the sensitivity of one table, b_K − b_1, for a
    quality summed over ``tables`` = 2 tables (the factor T forgotten): half the true Δq, so the
    true ε is twice the claim. Not the cap: capping n at b_K shifts every score by the same
    constant, so the mechanism without it has the same distribution and no audit can tell."""
    p = pair(candidates, tables, epsilon)
    wrong = bs.quality_sensitivity(p.candidates, 1)

    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        scores = bs.quality(p.users_by_n[side], p.candidates, p.noise_per_unit, p.tables)
        out = np.empty(trials)
        for i in range(trials):
            entry = LedgerEntry("negative control", "exponential mechanism at half its sensitivity", epsilon,
                                Fraction(wrong), Fraction(wrong) / epsilon, len(p.candidates),
                                not_private="the sensitivity of one table for a quality over two")
            out[i] = p.candidates[Budget(epsilon).exponential_mechanism(entry, rng, scores, monotone=True)]
        return out
    return sample
