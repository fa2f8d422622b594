"""Quantiles per group, chosen privately from each group's histogram over public candidates:
pure numpy, no Spark.

Input: for each group g and each public candidate b_k (sorted, K of them), h[g, k], how many of
the group's bounded records have a value whose nearest candidate is b_k (ties go to the lower
one; values beyond the candidates go to the end ones). NOT private: only the mechanism reads it.

For a level q (a fraction in (0, 1)) and a group of n = Σ_k h[g, k] values, candidate k has
below_k = Σ_{j<k} h[g, j] values under it and at_most_k = below_k + h[g, k] at most it. Its
quality is the rank distance from q·n to the candidate's ranks, −max(0, below_k − q·n,
q·n − at_most_k): zero at the candidate that is the group's q-quantile (of the rounded values;
every rounded value is a candidate, so one candidate always scores zero), and one less for each
value between the two. It is the clipping range's quality (release.clip_choice), per group.

Sensitivity: one value added to the group moves n by one and each below_k and at_most_k by at
most one, in the same direction as q·n moves, so each term of the max by at most max(q, 1 − q).
A user who keeps at most c records in each of at most l groups moves one group's qualities by at
most c·max(q, 1 − q), and the qualities of all groups together by at most l·c·max(q, 1 − q): the
exponential mechanism per group at that total sensitivity (core.mechanisms.exponential_mechanism_rows)
is ε-DP for the user, whatever groups the user is in. Several levels are separate steps, each
with its part of ε (sequential composition); sorting a group's chosen values afterwards is
post-processing. The claim: docs/aggregate.md, "Privacy claim: quantiles".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, selection_entry
from dp_spark.core.mechanisms import RandomSource

MAX_CANDIDATES = 10_000
# A level's denominator at most this: the scores stay whole numbers of moderate size (q = 0.9 is
# 9/10, q = 0.999 is 999/1000).
MAX_LEVEL_DENOMINATOR = 10_000
MECHANISM = "exponential mechanism per group (rank distance)"


def level_of(value: float | Fraction) -> Fraction:
    """A quantile level as the exact fraction it names: 0.9 is 9/10, not the double nearest it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ValueError(f"a quantile level must be a number strictly between 0 and 1, got {value!r}")
    level = Fraction(value).limit_denominator(MAX_LEVEL_DENOMINATOR) if isinstance(value, float) else Fraction(value)
    if not 0 < level < 1 or level.denominator > MAX_LEVEL_DENOMINATOR:
        raise ValueError(f"a quantile level must lie strictly between 0 and 1, with at most "
                         f"{MAX_LEVEL_DENOMINATOR:,} as its denominator, got {value!r}")
    return level


@dataclass(frozen=True)
class Candidates:
    """The public values a quantile can take, increasing and finite: the values are rounded to
    the nearest of them, so a grid that holds every value the data can have (the whole numbers
    1 to 5 for ratings) loses nothing to rounding."""

    values: tuple[float, ...]

    def __post_init__(self):
        values = tuple(float(v) for v in self.values)
        if not 2 <= len(values) <= MAX_CANDIDATES:
            raise ValueError(f"give 2 to {MAX_CANDIDATES:,} quantile candidates, got {len(values)}")
        if not all(math.isfinite(v) for v in values) or any(b <= a for a, b in zip(values, values[1:])):
            raise ValueError("the quantile candidates must be finite and strictly increasing")
        object.__setattr__(self, "values", values)

    @classmethod
    def evenly(cls, low: float, high: float, count: int) -> Candidates:
        """``count`` candidates evenly spaced from ``low`` to ``high``, both included."""
        return cls(tuple(np.linspace(float(low), float(high), int(count))))

    def __len__(self) -> int:
        return len(self.values)

    def midpoints(self) -> np.ndarray:
        """The K − 1 boundaries between neighbouring candidates: a value goes to candidate k when
        it is above k boundaries (at a boundary: the lower candidate)."""
        v = np.asarray(self.values)
        return (v[:-1] + v[1:]) / 2

    def nearest(self, values: np.ndarray) -> np.ndarray:
        """The index of each value's candidate (the reference that the Spark expression matches)."""
        return np.searchsorted(self.midpoints(), np.asarray(values, dtype=float), side="left")


def rank_scores(histograms: np.ndarray, level: Fraction) -> np.ndarray:
    """The quality of every candidate for every group (rows: groups, columns: candidates),
    scaled by the level's denominator D to whole numbers: −max(0, D·below − N·n, N·n − D·at_most)
    for q = N/D. Its sensitivity in these units is D·c·max(q, 1 − q) = c·max(N, D − N) per group."""
    h = np.asarray(histograms, dtype=np.int64)
    if h.ndim != 2 or h.shape[1] < 2 or (h < 0).any():
        raise ValueError("histograms must be a matrix of counts, one row per group, a column per candidate")
    at_most = np.cumsum(h, axis=1)
    below = at_most - h
    n = at_most[:, -1:]
    target = level.numerator * n
    d = level.denominator
    return -np.maximum(0, np.maximum(d * below - target, target - d * at_most))


def scaled_sensitivity(level: Fraction, groups_per_user: int, records_per_group: int) -> int:
    """How far one user moves the scaled qualities of all groups together: l·c·max(N, D − N)."""
    return groups_per_user * records_per_group * max(level.numerator, level.denominator - level.numerator)


def choose(histograms: np.ndarray, candidates: Candidates, level: Fraction, share: Fraction, groups_per_user: int,
           records_per_group: int, budget: Budget, rng: RandomSource, step: str) -> np.ndarray:
    """Each group's q-quantile among the candidates, with the part ``share`` of the budget: one
    ledger step for all groups (the user's groups compose within it; module docstring)."""
    scores = rank_scores(histograms, level)
    if scores.shape[1] != len(candidates):
        raise ValueError(f"{scores.shape[1]} histogram columns for {len(candidates)} candidates")
    entry = selection_entry(step, MECHANISM, share, scaled_sensitivity(level, groups_per_user, records_per_group),
                            len(candidates), budget.zcdp)
    chosen = budget.exponential_mechanism_rows(entry, rng, scores)
    return np.asarray(candidates.values)[chosen]


def choose_levels(histograms: np.ndarray, candidates: Candidates, levels: Sequence[Fraction],
                  shares: Sequence[Fraction], groups_per_user: int, records_per_group: int, budget: Budget,
                  rng: RandomSource, column: str) -> np.ndarray:
    """Every level's quantiles (columns in the order of ``levels``), each level its own step
    ("quantile(<column>, q)") and share; within a group the values are then put in the order of
    their levels, so that a higher level never shows a lower value (post-processing)."""
    if len(levels) != len(shares) or not levels:
        raise ValueError("give one share per quantile level")
    chosen = np.column_stack([
        choose(histograms, candidates, level, share, groups_per_user, records_per_group, budget, rng,
               f"quantile({column}, {float(level):g})")
        for level, share in zip(levels, shares)])
    order = np.argsort(np.asarray([float(level) for level in levels]), kind="stable")
    chosen[:, order] = np.sort(chosen[:, order], axis=1)
    return chosen


def rank_error(candidates: int, epsilon: Fraction, level: Fraction, groups_per_user: int, records_per_group: int,
               zcdp_accounting: bool, beta: float) -> float:
    """With probability at least 1 − β, the chosen candidate is at most this many of the group's
    values away from its q-quantile, in rank (of the values rounded to the candidates), whatever the
    group's size: the exponential mechanism's bound 2Δ·ln(K/β)/ε per group, Δ = c·max(q, 1 − q) and
    the group's ε = ε/l (twice the share under zCDP, as the ledger runs it)."""
    if not 0 < beta < 1:
        raise ValueError(f"beta must lie in (0, 1), got {beta}")
    at = float(epsilon) * (2 if zcdp_accounting else 1)
    per_group = records_per_group * max(float(level), 1 - float(level))
    return 2 * per_group * groups_per_user * math.log(candidates / beta) / at
