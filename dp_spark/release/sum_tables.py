"""Sums and means of a value per cell over the records a per-user bound keeps: the
noise and the means, on the driver (pure numpy; the aggregation is aggregates.value_sums). The
means family publishes its tables with it, and the aggregate family its sums and means per group.

A table of counts has L1 sensitivity l (each user keeps at most l records) and squared L2
sensitivity l·c (at most c of them per item); the table of centred sums, in grid units, l·steps
and l·c·steps² (``value_sums.SumSensitivity``). Each gets discrete Laplace noise (L1) or, under
zCDP accounting, discrete Gaussian noise (L2) at its own part of the budget, paid through the
budget's ledger; the sums of the clipped values, the means and the means' intervals are
post-processing (``value_sums.mean_interval``). Claim: docs/value_sums.md, "Privacy claim: value_sums, means".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.aggregates.value_sums import BoundedSums
from dp_spark.core import accuracy
from dp_spark.core.clip_range import ClipRange, SumSensitivity, mean_interval, mean_intervals
from dp_spark.core.discrete_gaussian import discrete_gaussian_halfwidth
from dp_spark.core.ledger import GAUSSIAN_MECHANISM, Budget, LedgerEntry, gaussian_entry
from dp_spark.core.mechanisms import RandomSource

LAPLACE, GAUSSIAN = "laplace", "gaussian"


@dataclass(frozen=True)
class TablePair:
    """How one table of counts and sums is paid for: their ledger steps, parts of ε (under zCDP,
    the pure-ε equivalents of their shares of ρ) and noises ("laplace" or "gaussian")."""

    count_step: str
    sum_step: str
    epsilon_counts: Fraction
    epsilon_sums: Fraction
    count_noise: str = LAPLACE
    sum_noise: str = LAPLACE

    def __post_init__(self):
        if not (self.epsilon_counts > 0 and self.epsilon_sums > 0):
            raise ValueError(f"both tables need a positive epsilon, got {self.epsilon_counts} and {self.epsilon_sums}")
        for noise in (self.count_noise, self.sum_noise):
            if noise not in (LAPLACE, GAUSSIAN):
                raise ValueError(f"unknown noise {noise!r}")


def table_entry(step: str, noise: str, l1: int, l2_squared: int, epsilon: Fraction, cells: int) -> LedgerEntry:
    """The ledger entry of one integer table: discrete Laplace at L1 ``l1`` and ``epsilon``, or
    discrete Gaussian at L2² ``l2_squared`` and the share of ρ whose pure-ε equivalent is ``epsilon``."""
    if noise == GAUSSIAN:
        return gaussian_entry(step, l1, l2_squared, epsilon, cells)
    epsilon = Fraction(epsilon)
    return LedgerEntry(step, "discrete Laplace", epsilon, Fraction(l1), Fraction(l1) / epsilon, cells)


def in_values(entry: LedgerEntry, value_unit: float) -> LedgerEntry:
    """The sums' entry, whose noise is in grid units, saying what one unit is worth in values."""
    return replace(entry, value_unit=Fraction(value_unit))


def ledger_entries(bounded: BoundedSums, pair: TablePair) -> tuple[LedgerEntry, LedgerEntry]:
    """The two tables' ledger entries: counts at L1 l (L2² l·c), sums at l·steps (l·c·steps²) grid units."""
    return pair_entries(bounded.sensitivity, bounded.counts.size, pair, bounded.clip.unit)


def pair_entries(s: SumSensitivity, cells: int, pair: TablePair, value_unit: float) -> tuple[LedgerEntry, LedgerEntry]:
    """:func:`ledger_entries` from the sensitivity, the number of cells and the grid's unit in
    values (tables left on the executors)."""
    return (table_entry(pair.count_step, pair.count_noise, s.bound, s.count_l2_squared, pair.epsilon_counts, cells),
            in_values(table_entry(pair.sum_step, pair.sum_noise, s.l1, s.l2_squared, pair.epsilon_sums, cells),
                       value_unit))


def halfwidth(entry: LedgerEntry, alpha: float) -> float:
    """The smallest h with P(|noise| ≤ h) ≥ 1 − α for one cell of ``entry`` (exact, from the pmf)."""
    if entry.mechanism == GAUSSIAN_MECHANISM:
        return float(discrete_gaussian_halfwidth(entry.noise_scale, alpha))
    return accuracy.discrete_laplace_halfwidth(entry.noise_scale, alpha)


def publish_means(bounded: BoundedSums, pair: TablePair, budget: Budget, rng: RandomSource,
                  alpha: float = accuracy.DEFAULT_ALPHA) -> dict[str, np.ndarray]:
    """noisy_count, noisy_sum, mean, mean_low, mean_high per cell (NaN where no mean is given):
    the two tables with noise (paid from ``budget``, counts first); noisy_sum estimates Σ clip(x)
    as γ·Ŝ + m·Ĉ, so its error carries m times the count's; each cell's mean with its interval,
    each figure's half-width at α/2, so that a cell's interval fails with probability at most α
    (a union bound over its two figures); no mean where the count's lower end is not positive."""
    count_entry, sum_entry = ledger_entries(bounded, pair)
    counts = bounded.counts + budget.noise(count_entry, rng)
    units = bounded.units + budget.noise(sum_entry, rng)
    return released_columns(counts, units, halfwidth(count_entry, alpha / 2), halfwidth(sum_entry, alpha / 2),
                            bounded.clip)


def nullable_means(columns: dict[str, np.ndarray]) -> dict[str, object]:
    """The columns with each mean left out as a missing value (null in Parquet and in Spark), not NaN."""
    return {name: pd.array(values, dtype="Float64") if name.startswith("mean") else values
            for name, values in columns.items()}


def released_columns(counts: np.ndarray, units: np.ndarray, count_width: float, sum_width: float,
                     clip: ClipRange) -> dict[str, np.ndarray]:
    """A table's columns from its noisy counts and centred sums (post-processing): noisy_count,
    noisy_sum = γ·Ŝ + m·Ĉ, and each cell's mean with its interval from the two half-widths
    (:func:`value_sums.mean_interval`, cell by cell as numpy arrays; NaN where no mean is given)."""
    counts, units = np.asarray(counts, dtype=np.int64), np.asarray(units, dtype=np.int64)
    mean, low, high = mean_intervals(units, counts, sum_width, count_width, clip)
    return {"noisy_count": counts, "noisy_sum": units * clip.unit + clip.centre * counts,
            "mean": mean, "mean_low": low, "mean_high": high}


def mean_halfwidth(records: int, count_h: float, sum_h: float, clip: ClipRange, points: int = 21) -> float | None:
    """Half the width of the interval a cell of ``records`` records kept gets (clip_range.mean_interval)
    when its noise is zero, the widest over ``points`` true means across the range; None when a
    cell of that many records gets no mean."""
    widest = None
    for step in np.linspace(-clip.steps, clip.steps, points):
        estimate = mean_interval(int(round(step * records)), records, sum_h, count_h, clip)
        if not estimate.published or estimate.high is None or estimate.low is None:
            return None
        width = (estimate.high - estimate.low) / 2
        widest = width if widest is None else max(widest, width)
    return widest
