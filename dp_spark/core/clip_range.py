"""Sums and means of a numeric value per cell: the public side, as pure functions.

Each kept record's value x is clipped to the public range [low, high], centred at its midpoint
m = (low + high)/2 and put on an integer grid of ``steps`` units per half-range h = (high − low)/2:

    units(x) = round((clip(x, low, high) − m) / γ),   γ = h / steps,   units ∈ [−steps, steps]

A cell's sum is then an integer, so its noise is exact (discrete Laplace or discrete Gaussian on
integers; specification §1.4). A user keeps at most l records, at most c of them in one cell, so
adding the user moves the sum vector by at most l·steps units in L1 and √(l·c)·steps in L2
(``SumSensitivity``): l·h and √(l·c)·h in value units, where an uncentred clipped value would
move it by up to max(|low|, |high|) ≥ h per record (5 against 2 for ratings 1 to 5).
The rounding moves a record by at most γ/2 (h/2000 at the default 1,000 steps), the same on every
neighbouring input: it is part of the function released, not of the noise.

The mean of a cell's kept records is m + γ·S/C for its centred sum S (units) and count C, so the
noisy mean is post-processing of the two noisy figures. ``mean_interval`` gives it an interval from
the figures and their public half-widths only: with S and C each within its half-width (a union
bound over the two), the mean lies between the smallest and largest of m + γ·s/c over the corners
s = Ŝ ± h_S, c = Ĉ ± h_C, clipped to [low, high]; when the count's lower end is not positive the
mean says nothing and is left out. The claim: docs/value_sums.md, "Privacy claim: value_sums, means".
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

DEFAULT_STEPS = 1000  # grid units per half-range: a record moves by at most h/2000 in rounding


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond the doubles
        return False


@dataclass(frozen=True)
class ClipRange:
    """The public range [low, high] values are clipped to, and the integer grid of the centred sum."""

    low: float
    high: float
    steps: int = DEFAULT_STEPS

    def __post_init__(self):
        for name in ("low", "high"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
                raise ValueError(f"the clipping range's {name} must be a finite number, got {value!r}")
            object.__setattr__(self, name, float(value))
        if not self.low < self.high:
            raise ValueError(f"the clipping range needs low < high, got [{self.low}, {self.high}]")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or not 1 <= self.steps <= 10**6:
            raise ValueError(f"the grid's steps must be an integer from 1 to 10^6, got {self.steps!r}")
        # A grid that doubles cannot hold (a unit below the normal floats, or a midpoint doubles
        # cannot place) would leave the clamp in units() as the only guard of the sensitivity:
        # refuse it, so that the ends are exactly ∓steps and rounding moves a value by γ/2 at most.
        if not self.unit >= sys.float_info.min or self.units(self.low) != -self.steps \
                or self.units(self.high) != self.steps:
            raise ValueError(f"the clipping range [{self.low!r}, {self.high!r}] with {self.steps} steps is not a grid "
                             "doubles can hold: widen it or use fewer steps")

    @property
    def centre(self) -> float:
        return self.low / 2 + self.high / 2  # halves first: no overflow near the doubles' limit

    @property
    def half_width(self) -> float:
        return self.high / 2 - self.low / 2

    @property
    def unit(self) -> float:
        """γ: the value of one grid unit."""
        return self.half_width / self.steps

    def units(self, value: float) -> int:
        """The record's centred, clipped value in grid units, an integer in [−steps, steps]
        (round half to even, as Spark's ``bround``). Bad values (NaN, ±∞, null, non-numbers) are
        dropped before this (``io.validation.validate_records``); NaN is refused here."""
        if math.isnan(value):
            raise ValueError("a NaN value has no place on the grid: drop it before summing")
        clipped = min(max(value, self.low), self.high)
        return max(-self.steps, min(self.steps, round((clipped - self.centre) / self.unit)))

    def square_units(self, units: int) -> int:
        """A record's square in a sum of squares: u²/steps rounded half up, an integer in [0, steps]
        for u in [−steps, steps], so that it moves as a sum's unit does (aggregates.group_totals)."""
        return (units * units + self.steps // 2) // self.steps

    def value_of(self, units: float) -> float:
        """Grid units (a sum, or a sum over a count) back in value units, around the centre."""
        return units * self.unit


@dataclass(frozen=True)
class SumSensitivity:
    """How far one user moves a table of centred sums, in grid units: each of at most ``bound``
    records (l) moves its cell by at most ``steps`` units, at most ``per_cell`` (c) records in one
    cell (c = l when the release does not cap them)."""

    bound: int
    per_cell: int
    steps: int

    def __post_init__(self):
        for name in ("bound", "per_cell", "steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"the sum's {name} must be a positive integer, got {value!r}")
        if self.per_cell > self.bound:
            raise ValueError(f"at most {self.bound} records per user cannot put {self.per_cell} in one cell")

    @property
    def l1(self) -> int:
        """l·steps: the user's records move their cells by at most steps each, l records at most."""
        return self.bound * self.steps

    @property
    def count_l2_squared(self) -> int:
        """l·c: the same records' count table, each record one in its cell (docs/sra_hpa.md)."""
        return self.bound * self.per_cell

    @property
    def l2_squared(self) -> int:
        """l·c·steps²: Σ_j (c_j·steps)² with c_j ≤ c and Σ_j c_j ≤ l is at most (l/c)·(c·steps)²."""
        return self.bound * self.per_cell * self.steps * self.steps


@dataclass(frozen=True)
class MeanEstimate:
    """A cell's mean from its noisy sum and count (post-processing of DP outputs): the estimate and
    an interval that holds when both figures are within their half-widths; None where the count's
    lower end is not positive (the mean is then noise)."""

    mean: float | None
    low: float | None
    high: float | None

    @property
    def published(self) -> bool:
        return self.mean is not None


def mean_interval(sum_units: int, count: int, sum_halfwidth: float, count_halfwidth: float,
                  clip: ClipRange) -> MeanEstimate:
    """The noisy mean m + γ·Ŝ/Ĉ of a cell and its interval (see the module), from the noisy centred
    sum ``sum_units`` and count and their half-widths (in units and records)."""
    if not (sum_halfwidth >= 0 and count_halfwidth >= 0):
        raise ValueError(f"half-widths must be numbers >= 0, got {sum_halfwidth!r} and {count_halfwidth!r}")
    least = count - count_halfwidth
    if least <= 0:
        return MeanEstimate(None, None, None)

    def at(total: float, records: float) -> float:
        return min(max(clip.centre + clip.value_of(total / records), clip.low), clip.high)
    corners = [at(sum_units + s, count + c) for s in (-sum_halfwidth, sum_halfwidth)
               for c in (-count_halfwidth, count_halfwidth)]
    return MeanEstimate(at(sum_units, count), min(corners), max(corners))


def mean_intervals(sum_units: np.ndarray, counts: np.ndarray, sum_halfwidth: float, count_halfwidth: float,
                   clip: ClipRange) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`mean_interval` of every cell at once: the means, lows and highs as float arrays, NaN
    where no mean is given. The same operations in the same order on the same doubles, so each
    cell's numbers are mean_interval's to the bit (tested) while its figures are within ±2^53 (at
    1,000 steps, a cell of fewer than 9·10^12 records); beyond, the mean may differ in its last bit
    (mean_interval divides the exact integers)."""
    if not (sum_halfwidth >= 0 and count_halfwidth >= 0):
        raise ValueError(f"half-widths must be numbers >= 0, got {sum_halfwidth!r} and {count_halfwidth!r}")
    s = np.asarray(sum_units, dtype=np.int64).astype(np.float64)
    c = np.asarray(counts, dtype=np.int64).astype(np.float64)
    return ratio_intervals(s, c, sum_halfwidth, count_halfwidth, clip.centre, clip.unit, clip.low, clip.high)


def ratio_intervals(totals: np.ndarray, counts: np.ndarray, total_halfwidth: float, count_halfwidth: float,
                    centre: float, unit: float, low: float, high: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per cell, centre + unit·total/count kept in [low, high], and the least and greatest of it
    over the four corners total ± total_halfwidth, count ± count_halfwidth: the mean of noisy
    centred totals and its interval, NaN where the count's lower end is not positive. The means'
    (:func:`mean_intervals`, totals in grid units) and the histograms' (totals in values, unit 1)."""
    s = np.asarray(totals, dtype=np.float64)
    c = np.asarray(counts, dtype=np.float64)
    given = c - count_halfwidth > 0
    # Where no mean is given, a count whose corners stay positive (count_halfwidth + 1): no
    # division by zero, and nothing of it is kept.
    safe = np.where(given, c, count_halfwidth + 1.0)

    def at(total: np.ndarray, records: np.ndarray) -> np.ndarray:
        return np.minimum(np.maximum(centre + (total / records) * unit, low), high)
    corners = [at(s + ds, safe + dc) for ds in (-total_halfwidth, total_halfwidth)
               for dc in (-count_halfwidth, count_halfwidth)]
    missing = np.full(s.shape, np.nan)
    return (np.where(given, at(s, safe), missing), np.where(given, np.minimum.reduce(corners), missing),
            np.where(given, np.maximum.reduce(corners), missing))
