"""DPA-AHP: AHP whose first pass gives each bin a budget by its rank
(Chan 2017), in the corrected form of specification §5.2.

Corrected version, ε = ε_r + ε1 + ε2 (ε_r = 5% of ε by default; ε1, ε2 split
the rest by ρ as in AHP):
* a ranking pass adds discrete Laplace of scale Δ/ε_r to every bin: ε_r-DP;
  the ranks come from it, never from the true counts;
* the bin ranked i (ascending, 0-based) gets budget ε_(i) = ε1·v(i)/v(0) with
  v(i) = ⌈n/2⌉ + (n − 2i − 1)·δ/2, so the largest is exactly ε1. One user moves
  the vector by at most Δ in L1, and a bin with budget ε_(i) ≤ ε1 gets scale
  Δ/ε_(i) ≥ Δ/ε1, so the first pass is ε1-DP (a vector of Laplace releases is
  max ε_i-DP, §1.5);
* clustering and the second pass are AHP's: ε2-DP.
SDPA-AHP is δ = 1.

``reproduce_paper=True`` runs the thesis' version instead: ranks from the TRUE
counts and ε_i = n·f(i)·ε1, f(i) = v(i)/Σ v. It is NOT differentially private
(§5.2: the ranks leak the data, and the largest ε_i exceeds ε1); the ledger
and the report say so.

Claim: docs/publishers.md, "Privacy claim: dpa_ahp, sdpa_ahp".
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource, as_scale, scale_at_least
from dp_spark.publishers import ahp
from dp_spark.publishers.grouping import random_order_by
from dp_spark.publishers.interface import Published, check_request

RANKING_SHARE = Fraction(1, 20)
NOT_PRIVATE = ("DPA-AHP as published: bins are ranked by their true counts and the largest per-bin "
               "budget exceeds epsilon_1 (specification §5.2)")


def weights(cells: int, delta: Fraction) -> list[Fraction]:
    """v(i) = ⌈n/2⌉ + (n − 2i − 1)·δ/2 for ranks i = 0..n−1 (ascending counts)."""
    half = math.ceil(cells / 2)
    return [half + Fraction(cells - 2 * i - 1) * delta / 2 for i in range(cells)]


def publish(counts: np.ndarray, sensitivity: int, epsilon: Fraction, budget: Budget, rng: RandomSource,
            step: str, *, delta: Fraction = Fraction(1, 20), ranking_share: Fraction = RANKING_SHARE,
            rho: Fraction = ahp.RHO, eta: float = ahp.ETA, reproduce_paper: bool = False) -> Published:
    """DPA-AHP over the counts (any shape; bins in public order); floats, same shape."""
    counts = check_request(counts, sensitivity, epsilon, budget, step)
    flat = counts.reshape(-1)
    noisy, bin_budget, epsilon2, entries = first_pass(flat, sensitivity, epsilon, budget, rng, step, delta=delta,
                                                      ranking_share=ranking_share, rho=rho,
                                                      reproduce_paper=reproduce_paper)
    phase1 = ahp.threshold(noisy, np.array([1 / float(b) for b in bin_budget]), sensitivity, eta, flat.size)
    second = ahp.smooth(flat, phase1, sensitivity, epsilon2, budget, rng, step)
    return Published(second.values.reshape(counts.shape), (*entries, *second.entries))


def first_pass(flat: np.ndarray, sensitivity: int, epsilon: Fraction, budget: Budget, rng: RandomSource, step: str, *,
               delta: Fraction = Fraction(1, 20), ranking_share: Fraction = RANKING_SHARE, rho: Fraction = ahp.RHO,
               reproduce_paper: bool = False) -> tuple[np.ndarray, list[Fraction], Fraction, list[LedgerEntry]]:
    """The ranking and the per-bin first pass: (noisy counts, budget per bin, ε2 left for the second
    pass, the ledger entries it spent). Separate so that the audit can test its claim on its own."""
    delta = Fraction(delta).limit_denominator(10**6)
    if not 0 <= delta <= 1:
        raise ValueError(f"delta must be between 0 and 1, got {float(delta)}")
    n = flat.size
    v = weights(n, delta)
    entries = []
    if reproduce_paper:
        order_ascending = np.argsort(flat, kind="stable")  # the flaw: true counts decide the budgets
        epsilon_rest = Fraction(epsilon)
    else:
        if not 0 < ranking_share < 1:
            raise ValueError(f"ranking_share must be between 0 and 1, got {ranking_share}")
        epsilon_rank = Fraction(epsilon) * Fraction(ranking_share)
        ranking = LedgerEntry(step=f"{step} (ranking pass)", mechanism="discrete Laplace per bin",
                              epsilon=epsilon_rank, sensitivity=Fraction(sensitivity),
                              noise_scale=as_scale(Fraction(sensitivity) / epsilon_rank), cells=n)
        pre_release = flat + budget.discrete_laplace(ranking, rng)
        order_ascending = random_order_by(-pre_release, rng)
        entries.append(ranking)
        epsilon_rest = Fraction(epsilon) - epsilon_rank
    epsilon1 = epsilon_rest * Fraction(rho)
    epsilon2 = epsilon_rest - epsilon1

    if reproduce_paper:
        budgets = [epsilon1 * vi / math.ceil(n / 2) for vi in v]  # n·f(i)·ε1 with Σ v = n⌈n/2⌉
    else:
        budgets = [epsilon1 * vi / v[0] for vi in v]
    bin_budget = [Fraction(0)] * n
    for rank, cell in enumerate(order_ascending):
        bin_budget[cell] = budgets[rank]
    scales = [scale_at_least(Fraction(sensitivity) / b) for b in bin_budget]
    largest = max(budgets)
    per_bin = LedgerEntry(
        step=f"{step} (first pass, per-bin budgets)", mechanism="discrete Laplace per bin, scale by rank",
        epsilon=epsilon1, sensitivity=Fraction(sensitivity), noise_scale=min(scales), cells=n,
        not_private=(f"{NOT_PRIVATE}; its largest per-bin epsilon is {float(largest):.6g}"
                     if reproduce_paper else ""),
    )
    noisy = (flat + budget.discrete_laplace_each(per_bin, rng, scales)).astype(float)
    entries.append(per_bin)
    return noisy, bin_budget, epsilon2, entries
