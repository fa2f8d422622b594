"""Audit samplers for the noise primitives and the count-vector publishers (driver side, no Spark).

Every sampler factory takes the parameters of one grid point and returns
``sample(side, trials, seed, spark)``: side 0 runs on D, side 1 on D′.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from dp_spark import publishers
from dp_spark.core import zcdp
from dp_spark.core.accounting import Accounting
from dp_spark.core.discrete_gaussian import variance_at_least
from dp_spark.core.ledger import Budget, LedgerEntry, gaussian_entry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.publishers import dpa_ahp

# The publishers' two histograms. D′ adds one user (Δ = 1) to bin 0 of each.
BINS = {
    "mixed": np.array([5, 3, 0, 7, 1, 0, 2, 4]),  # a small histogram with empty and busy bins
    # Every bin empty: bin 0 goes 0 → 1, right where AHP's thresholding zeroes small values,
    # grouping merges empty cells and the consistency steps clip at zero.
    "zero": np.zeros(8, dtype=np.int64),
}


def neighbours(bins: str, side: int) -> np.ndarray:
    counts = BINS[bins].copy()
    if side:
        counts[0] += 1
    return counts


def discrete_laplace_sampler(epsilon: Fraction):
    """The count 0 against 1 through the LPA publisher (discrete Laplace, Δ = 1)."""
    def sample(side, trials, seed, _spark):
        counts = np.full(trials, side)
        return publishers.publish("laplace", counts, 1, epsilon, Budget(epsilon), RandomSource(seed), "audit").values
    return sample


AUDIT_DELTA = 1e-6  # the δ a discrete Gaussian target states its zCDP guarantee at


def discrete_gaussian_sampler(epsilon: Fraction, shrink: int = 1):
    """The count 0 against 1 with discrete Gaussian noise paid by ρ = rho_of(ε, AUDIT_DELTA) (Δ₂ = 1),
    through the budget's zCDP path as a release draws it; ``shrink`` > 1 divides σ by it (a negative
    control: the claim stays that of the full σ)."""
    rho = zcdp.rho_of(float(epsilon), AUDIT_DELTA)
    entry = gaussian_entry("audit", 1, 1, zcdp.epsilon_for_rho(rho), 1)
    if shrink > 1:
        small = variance_at_least(entry.noise_scale / shrink**2)
        entry = LedgerEntry(entry.step, entry.mechanism, entry.epsilon, entry.sensitivity, small, 1,
                            rho=zcdp.gaussian_cost(1, small), l2_squared=Fraction(1))

    def sample(side, trials, seed, _spark):
        budget = Budget(1, accounting=Accounting("gaussian", Fraction(10**6), AUDIT_DELTA))
        batch = LedgerEntry(entry.step, entry.mechanism, entry.epsilon, entry.sensitivity, entry.noise_scale, trials,
                            rho=entry.rho, l2_squared=entry.l2_squared)
        return side + budget.discrete_gaussian(batch, RandomSource(seed))
    return sample


def exponential_sampler(epsilon: Fraction):
    """51 candidates, Δq = 1: candidate 0 scores 1 on D′ and 0 on D, the rest the other way, so
    P(0) moves by close to the full e^ε."""
    def sample(side, trials, seed, _spark):
        scores = np.zeros(51) if side else np.ones(51)
        scores[0] = 1 - scores[0]
        rng = RandomSource(seed)
        entry = LedgerEntry("audit", "exponential mechanism", epsilon, Fraction(1), 2 / epsilon, scores.size)
        return np.array([Budget(epsilon).exponential_mechanism(entry, rng, scores) for _ in range(trials)])
    return sample


class RecordingBudget(Budget):
    """A budget that keeps what its last exponential mechanism drew: the entry, the scores, the
    factor and the index drawn. A sampler runs the product's choice once on it, then draws the
    other releases of that same choice with :func:`exponential_rows`."""

    drawn: tuple[LedgerEntry, list, bool, int] | None = None

    def exponential_mechanism(self, entry: LedgerEntry, rng: RandomSource, scores, *, monotone: bool = False) -> int:
        index = super().exponential_mechanism(entry, rng, scores, monotone=monotone)
        self.drawn = (entry, list(scores), monotone, index)
        return index

    def only_draw(self) -> tuple[LedgerEntry, list, bool, int]:
        """What the choice drew, when its one spending was that exponential mechanism: a choice
        that spent more (another mechanism, a count) would not be repeated whole by drawing the
        mechanism again, so it is refused."""
        if self.drawn is None or self.entries != [self.drawn[0]]:
            raise AssertionError(f"the choice spent {[e.step for e in self.entries]}, not one exponential mechanism: "
                                 "its releases cannot be drawn again by rows")
        return self.drawn


def exponential_rows(entry: LedgerEntry, scores, monotone: bool, trials: int, rng: RandomSource) -> np.ndarray:
    """``trials`` independent draws of the exponential mechanism of ``entry`` over ``scores`` (ints
    or exact fractions), distributed as ``trials`` calls of Budget.exponential_mechanism, in one
    call of the sampler by rows (a row per draw), which settles every pending draw in the same
    round instead of one draw at a time. That sampler takes whole numbers: the scores and Δq are
    multiplied by the scores' common denominator, which leaves every exponent ε·(q* − q)/Δq as it
    was."""
    exact = [Fraction(score) for score in scores]
    unit = math.lcm(*(score.denominator for score in exact))
    whole = np.array([int(score * unit) for score in exact], dtype=np.int64)
    scaled = replace(entry, sensitivity=entry.sensitivity * unit, noise_scale=entry.noise_scale * unit)
    return Budget(entry.epsilon).exponential_mechanism_rows(scaled, rng, np.tile(whole, (trials, 1)),
                                                            monotone=monotone)


def publisher_sampler(name: str, epsilon: Fraction, bins: str = "mixed", **options):
    """Bin 0 of the publisher's output."""
    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        counts = neighbours(bins, side)
        if name == "laplace":  # cells are independent: every trial in one call
            return publishers.publish(name, np.tile(counts, (trials, 1)), 1, epsilon, Budget(epsilon), rng,
                                      "audit").values[:, 0]
        extra = {"sampled": counts} if name in publishers.NEEDS_ONE_RECORD_PER_USER else {}
        return np.array([publishers.publish(name, counts, 1, epsilon, Budget(epsilon), rng, "audit", **options,
                                            **extra).values[0]
                         for _ in range(trials)])
    return sample


# DPA-AHP's first pass on two bins: D = [2, 2] (a tie), D′ = [2, 1]. Ranked by true counts, bin 0
# is the smallest on D and gets the largest budget, but the largest on D′ and gets the smallest.
FIRST_PASS_D = (np.array([2, 2]), np.array([2, 1]))
SDPA_DELTA = Fraction(1)  # the thesis' SDPA-AHP: the widest spread of per-bin budgets


def first_pass_sampler(epsilon: Fraction, reproduce_paper: bool):
    """The ranking pass and the first pass, reduced to one noisy count.

    The corrected version is measured on bin 1, the bin whose count differs (2 against 1). Bin 0
    has the same count on both sides: its bound only sees the ranking pass (ε_r), which made the
    old target vacuous against ε_r + ε1.

    The negative control (the thesis' version) is measured on bin 0: there the flaw shows, the
    true ranking hands bin 0 a noise scale that differs between D and D′."""
    measured = 0 if reproduce_paper else 1

    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        flat = FIRST_PASS_D[side]
        return np.array([dpa_ahp.first_pass(flat, 1, epsilon, Budget(epsilon), rng, "audit", delta=SDPA_DELTA,
                                            reproduce_paper=reproduce_paper)[0][measured] for _ in range(trials)])
    return sample


def first_pass_claim(epsilon: Fraction, reproduce_paper: bool) -> float:
    """What each version claims for its first pass: ε1 as published; ε_r + ε1 corrected."""
    rest = epsilon if reproduce_paper else epsilon * (1 - dpa_ahp.RANKING_SHARE)
    epsilon1 = rest * dpa_ahp.ahp.RHO
    return float(epsilon1 + (0 if reproduce_paper else epsilon * dpa_ahp.RANKING_SHARE))
