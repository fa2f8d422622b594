"""Audit samplers for the private choice of a per-user bound (``bound_selection.choose_bound``,
issue 30), and its negative control.

The mechanism reads ``users_by_n`` (users per record count) and two public constants: the bias
weight A and the noise per unit V of q(b) = −⌈√(A·Loss(b)² + V·b²)⌉. The neighbours are placed
where the sensitivity argument is tight:

* D′ adds one user with 3·b_K records, beyond the cap: Loss(b_1) rises by the full b_K − b_1 and
  Loss(b_K) not at all (it is 0 on both sides).
* √(A·L² + C) rises by close to √A per record only when A·L² dominates C, so D already holds
  ``heavy`` users with b_K records each, many of them (the pair's :func:`heavy_users`).
* V (public) is set so that on D the exponents c·q(b), c = ε/Δq, put b_1 ahead of b_K by ε + 1,
  and on D′ by a little more than 1: b_K is rare on D and nearly e^ε times likelier on D′.

Users with one record lose nothing at any bound; they are there so the loss is summed over more
than one kind of user. ``tables`` T sets A = T/4, as T tables whose bias spreads over 4 cells.
The statistic is the chosen bound; the exact ε of a pair is :func:`pair_epsilon`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark.algorithms import bound_selection as bs
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities
from dp_spark.core.privacy import Budget, LedgerEntry

# The candidate lists of the grid: two close bounds, many bounds, and a wide range where Δq is
# large and the exact Fractions are long.
CANDIDATES = {
    "two": (5, 10),
    "many": (1, 2, 5, 10, 20, 50, 100, 200),
    "wide": (1, 100_000),
}
TABLES = (1, 2)
LIGHT_USERS = 10  # one record each: below every bound
TILT = Fraction(1)  # on D', b_1's exponent leads b_K's by about this much; on D by ε + TILT


@dataclass(frozen=True)
class BoundPair:
    """Neighbouring inputs of ``choose_bound`` and its public error model."""

    candidates: tuple[int, ...]
    model: bs.ErrorModel
    users_by_n: tuple[dict[int, int], dict[int, int]]  # D, D'


def heavy_users(epsilon: Fraction) -> int:
    """Heavy users on D: 20 times the exponent lead, so that A·Loss(b_1)² dominates the noise
    term V·b_1² as far as the candidates allow (its share is about (b_1/b_K)²)."""
    return int(math.ceil(20 * (epsilon + TILT) / epsilon))


def pair(candidates: tuple[int, ...], tables: int, epsilon: Fraction) -> BoundPair:
    """D: LIGHT_USERS with one record and h heavy users with b_K; D′: one more user with 3·b_K.

    On D, Loss(b_1) = L = h·(b_K − b_1) and Loss(b_K) = 0, so q(b_1) = −√(A·L² + V·b_1²) and
    q(b_K) = −√V·b_K. √V is the root x of x·b_K − √(A·L² + x²·b_1²) = G, G = (ε + TILT)/ε·Δq
    (b_1 ahead by ε + TILT exponent units), rounded to a rational: V is public, so any value is
    fair, and :func:`pair_epsilon` gives the pair's exact ε."""
    top, bottom = candidates[-1], candidates[0]
    h = heavy_users(epsilon)
    bias_weight = Fraction(tables, 4)
    users = {1: LIGHT_USERS, top: h}
    spread = top - bottom
    if spread == 0:
        return BoundPair(tuple(candidates), bs.ErrorModel(bias_weight, Fraction(0)), (users, {**users, 3 * top: 1}))
    lead = float((epsilon + TILT) / epsilon) * math.sqrt(bias_weight) * spread
    a_l2 = float(bias_weight) * (h * spread) ** 2
    # x²(b_K² − b_1²) − 2·b_K·G·x + (G² − A·L²) = 0, the larger root.
    qa, qb, qc = top * top - bottom * bottom, -2 * top * lead, lead * lead - a_l2
    root_v = (-qb + math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
    model = bs.ErrorModel(bias_weight, Fraction(root_v * root_v).limit_denominator(10**6))
    return BoundPair(tuple(candidates), model, (users, {**users, 3 * top: 1}))


def pair_epsilon(p: BoundPair, epsilon: Fraction, sensitivity: Fraction | None = None) -> float:
    """The pair's true ε when the mechanism runs at ``epsilon`` with ``sensitivity`` (default the
    claimed Δq): the largest |ln P_D(b)/P_D′(b)| over the candidates (for a discrete output no
    event does better than one outcome)."""
    sensitivity = bs.quality_sensitivity(p.candidates, p.model) if sensitivity is None else sensitivity
    d, d2 = (np.asarray(exponential_probabilities(bs.quality(users, p.candidates, p.model), epsilon, sensitivity,
                                                  monotone=True), dtype=float) for users in p.users_by_n)
    return float(np.max(np.abs(np.log(d / d2))))


def choose_bound_sampler(epsilon: Fraction, candidates: tuple[int, ...], tables: int):
    """The bound ``choose_bound`` picks, once per trial, on D or D′."""
    p = pair(candidates, tables, epsilon)

    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        users = p.users_by_n[side]
        return np.array([bs.choose_bound(users, p.candidates, p.model, epsilon, Budget(epsilon), rng)
                         for _ in range(trials)], dtype=float)
    return sample


def rootless_sensitivity(p: BoundPair) -> Fraction:
    """The bug the control plants: Δq = A·(b_K − b_1), the square root of A forgotten. With A = 1/4
    (one table) that is half the true Δq."""
    return p.model.bias_weight * (p.candidates[-1] - p.candidates[0]) + Fraction(1, bs.SCALE)


def half_sensitivity_sampler(epsilon: Fraction, candidates: tuple[int, ...] = CANDIDATES["wide"], tables: int = 1):
    """NEGATIVE CONTROL: ``choose_bound``'s quality sampled at :func:`rootless_sensitivity`, so
    the true ε is about twice the claim. Not the cap: capping n at b_K shifts every score by the
    same constant when A·L² dominates, so the mechanism without it is hard to tell apart."""
    p = pair(candidates, tables, epsilon)
    wrong = rootless_sensitivity(p)

    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        scores = bs.quality(p.users_by_n[side], p.candidates, p.model)
        out = np.empty(trials)
        for i in range(trials):
            entry = LedgerEntry("negative control", "exponential mechanism at half its sensitivity", epsilon,
                                wrong, wrong / epsilon, len(p.candidates),
                                not_private="the square root of the bias weight forgotten in the sensitivity")
            out[i] = p.candidates[Budget(epsilon).exponential_mechanism(entry, rng, scores, monotone=True)]
        return out
    return sample
