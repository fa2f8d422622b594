"""What every publisher shares: its signature (:class:`Publisher`), its result
(:class:`Published`) and the check of a request.

Every publisher is ``publish(counts, sensitivity, epsilon, budget, rng, step, **options) ->
Published``: an integer count vector over a public domain, the L1 sensitivity one user can
cause after bounding, the epsilon to spend, the budget that hands out the noise, and the
ledger's name for the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource


@dataclass(frozen=True)
class Published:
    values: np.ndarray  # same shape as the counts; integers (LPA) or floats (averages)
    entries: tuple[LedgerEntry, ...]  # what the publisher spent from the budget, in order


class Publisher(Protocol):
    """The one signature of every publisher: a module's ``publish`` function, whose own options
    come after these as keywords (tests/test_publishers.py checks each registered one). It draws
    noise only through ``budget`` (which spends each ledger entry before it draws) and returns the
    published vector with the entries it spent."""

    def __call__(self, counts: np.ndarray, sensitivity: int, epsilon: Fraction, budget: Budget, rng: RandomSource,
                 step: str) -> Published: ...


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
