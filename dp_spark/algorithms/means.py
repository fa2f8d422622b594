"""Sums and means of a value per item over the records a per-user bound keeps (issue 43): the
noise and the means, on the driver (pure numpy; the aggregation is aggregates.value_sums).

The item table of counts has L1 sensitivity l (each user keeps at most l records); the table of
centred sums, in grid units, l·steps (``value_sums.SumSensitivity``). Each gets discrete Laplace
noise at its own part of ε, paid through the budget (ledger steps "value_counts" and
"value_sums"); the sums of the clipped values, the means and the means' intervals are
post-processing (``value_sums.mean_interval``). Claim: docs/value_sums.md, "Privacy claim:
value_sums".
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.algorithms.value_sums import ClipRange, SumSensitivity, mean_interval
from dp_spark.core import accuracy
from dp_spark.core.domain import ItemDomain
from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.privacy import Budget, LedgerEntry

COUNT_STEP = "value_counts"
SUM_STEP = "value_sums"


@dataclass(frozen=True)
class BoundedSums:
    """Per domain item, the kept records and the sum of their grid units (NOT private), with the
    bound and the range they were summed under: the noise is set from these, never from numbers
    given again (a grid finer than the one summed would understate the sensitivity)."""

    counts: np.ndarray
    units: np.ndarray
    bound: int
    clip: ClipRange

    def __post_init__(self):
        counts, units = np.asarray(self.counts, dtype=np.int64), np.asarray(self.units, dtype=np.int64)
        if counts.shape != units.shape or counts.ndim != 1:
            raise ValueError(f"one count and one sum per item, got shapes {counts.shape} and {units.shape}")
        if isinstance(self.bound, bool) or not isinstance(self.bound, int) or self.bound < 1:
            raise ValueError(f"the bound must be a positive integer, got {self.bound!r}")
        if np.any(counts < 0) or np.any(np.abs(units) > counts * self.clip.steps):
            raise ValueError("each item's sum must be within steps times its count of records")
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "units", units)


def ledger_entries(bounded: BoundedSums, epsilon_counts: Fraction, epsilon_sums: Fraction) -> tuple[LedgerEntry,
                                                                                                     LedgerEntry]:
    """The two tables' ledger entries: counts at sensitivity l, sums at l·steps grid units."""
    if not (epsilon_counts > 0 and epsilon_sums > 0):
        raise ValueError(f"both tables need a positive epsilon, got {epsilon_counts} and {epsilon_sums}")
    l, cells = Fraction(bounded.bound), bounded.counts.size
    sums = Fraction(SumSensitivity(bounded.bound, bounded.bound, bounded.clip.steps).l1)
    return (LedgerEntry(COUNT_STEP, "discrete Laplace", Fraction(epsilon_counts), l, l / Fraction(epsilon_counts),
                        cells),
            LedgerEntry(SUM_STEP, "discrete Laplace", Fraction(epsilon_sums), sums, sums / Fraction(epsilon_sums),
                        cells))


def publish_means(bounded: BoundedSums, items: ItemDomain, epsilon_counts: Fraction, epsilon_sums: Fraction,
                  budget: Budget, rng: RandomSource, alpha: float = accuracy.DEFAULT_ALPHA) -> pd.DataFrame:
    """item_id, noisy_count, noisy_sum, mean, mean_low, mean_high: the two tables with noise
    (paid from ``budget``); noisy_sum estimates Σ clip(x) as γ·Ŝ + m·Ĉ, so its error carries m
    times the count's; each item's mean with its interval, each figure's half-width at α/2, so
    that over all items an interval fails with probability at most α (a union bound); no mean
    where the count's lower end is not positive."""
    if len(items) != bounded.counts.size:
        raise ValueError(f"{len(items)} items need as many sums, got {bounded.counts.size}")
    clip = bounded.clip
    count_entry, sum_entry = ledger_entries(bounded, epsilon_counts, epsilon_sums)
    counts = bounded.counts + budget.discrete_laplace(count_entry, rng)
    units = bounded.units + budget.discrete_laplace(sum_entry, rng)
    count_width = accuracy.discrete_laplace_halfwidth(count_entry.noise_scale, alpha / 2)
    sum_width = accuracy.discrete_laplace_halfwidth(sum_entry.noise_scale, alpha / 2)
    means = [mean_interval(int(s), int(c), sum_width, count_width, clip) for s, c in zip(units, counts)]
    return pd.DataFrame({"item_id": items.ids, "noisy_count": counts,
                         "noisy_sum": units * clip.unit + clip.centre * counts,
                         "mean": [m.mean for m in means], "mean_low": [m.low for m in means],
                         "mean_high": [m.high for m in means]})
