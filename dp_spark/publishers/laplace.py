"""LPA: discrete Laplace noise on every cell of a count vector.

DP claim: for an integer vector whose L1 sensitivity under the privacy unit is
Δ, adding independent discrete Laplace noise of scale Δ/ε to every cell is
ε-DP (specification §1.4 and §3.3; the discrete Laplace mechanism of Canonne,
Kamath and Steinke 2020, Theorem 7). The domain must be public and complete:
cells with a true count of zero get noise too (§1.2).

Every publisher has this module's signature, ``publish(counts, sensitivity,
epsilon, budget, rng, step, **options) -> Published``, and draws its noise only
from ``budget`` (:meth:`dp_spark.core.ledger.Budget.discrete_laplace`), which
spends each ledger entry before it draws.

Claim: docs/publishers.md, "Privacy claim: laplace".
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource, as_scale
from dp_spark.publishers.interface import Published, check_request


def publish(counts: np.ndarray, sensitivity: int, epsilon: Fraction, budget: Budget, rng: RandomSource,
            step: str) -> Published:
    """Noisy copy of an integer count array (any shape) with scale sensitivity/ε."""
    counts = check_request(counts, sensitivity, epsilon, budget, step)
    entry = LedgerEntry(
        step=step,
        mechanism="discrete Laplace",
        epsilon=Fraction(epsilon),
        sensitivity=Fraction(sensitivity),
        noise_scale=as_scale(Fraction(sensitivity) / Fraction(epsilon)),
        cells=int(counts.size),
    )
    noise = budget.discrete_laplace(entry, rng).reshape(counts.shape)
    return Published(values=counts.astype(np.int64) + noise, entries=(entry,))
