"""What every publisher shares: its result (:class:`Published`) and the check of a request.

Every publisher is ``publish(counts, sensitivity, epsilon, budget, rng, step, **options) ->
Published``: an integer count vector over a public domain, the L1 sensitivity one user can
cause after bounding, the epsilon to spend, the budget that hands out the noise, and the
ledger's name for the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark.core.privacy import Budget, LedgerEntry


@dataclass(frozen=True)
class Published:
    values: np.ndarray  # same shape as the counts; integers (LPA) or floats (averages)
    entries: tuple[LedgerEntry, ...]  # what the publisher spent from the budget, in order


def check_request(counts, sensitivity: int, epsilon: Fraction, budget: Budget, step: str) -> np.ndarray:
    """The counts as an integer array, once the request is sound: refuses a non-integer array,
    an empty one, Δ < 1, or an epsilon the budget cannot pay for (before any noise is drawn, also
    for a publisher that spends in several parts)."""
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, (int, np.integer)) or sensitivity < 1:
        raise ValueError(f"sensitivity must be a positive integer, got {sensitivity!r}")
    counts = np.asarray(counts)
    if not np.issubdtype(counts.dtype, np.integer):
        raise TypeError("publishers need integer counts")
    if counts.size == 0:
        raise ValueError("cannot publish an empty count vector")
    budget.check_affordable(Fraction(epsilon), step)
    return counts
