"""ALPA: one noisy average for every cell (paper 001's baseline, specification §4).

DP claim: the total Σ c is an integer with L1 sensitivity Δ (one user moves
the vector by at most Δ in L1, so the sum by at most Δ); discrete Laplace of
scale Δ/ε on it is ε-DP (§1.4), and dividing by the public cell count is
post-processing. Every cell gets the same value (Σ c + noise)/cells.

Claim: docs/publishers.md, "Privacy claim: alpa".
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource, as_scale
from dp_spark.publishers.interface import Published, check_request


def publish(counts: np.ndarray, sensitivity: int, epsilon: Fraction, budget: Budget, rng: RandomSource,
            step: str) -> Published:
    counts = check_request(counts, sensitivity, epsilon, budget, step)
    entry = LedgerEntry(step=f"{step} (total)", mechanism="discrete Laplace on the sum, then averaged",
                        epsilon=Fraction(epsilon), sensitivity=Fraction(sensitivity),
                        noise_scale=as_scale(Fraction(sensitivity) / Fraction(epsilon)), cells=1)
    total = int(counts.sum()) + int(budget.discrete_laplace(entry, rng)[0])
    values = np.full(counts.shape, total / counts.size, dtype=float)
    return Published(values, (entry,))
