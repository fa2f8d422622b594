"""The half-width of a weighted sum of independent integer noises, from their exact pmfs.

A count made of K noisy cells carries Σ_k Z_k, a sum of values Σ_k w_k·Z_k. When the weights lie on
a lattice (each a whole multiple of 1/D for a small D: the stars 1 to 5, centred at 3, are −2 to 2),
D·Σ w_k·Z_k is an integer variable whose pmf is the convolution of the cells' pmfs spread out by
their whole weights: computed here by FFT, each cell's pmf cut where less than TAIL of its mass
lies beyond. The cut leaves a sub-probability (every point's mass at most its true mass), so the
least h whose cut mass within ±h reaches 1 − α (less a margin for the FFT's rounding) also holds
for the true sum. Weights off a lattice, or sums too wide to hold, get None: the caller falls back
on bounds that need no pmf. The same convolution gives the upper quantile of a sum of the cells'
positive parts, max(Z_k, 0), which bounds how far clamping noisy cells at zero can raise a sum.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from dp_spark.core.accuracy import discrete_laplace_halfwidth
from dp_spark.core.discrete_gaussian import SUMMED_SIGMA, discrete_gaussian_halfwidth, discrete_gaussian_pmf
from dp_spark.core.ledger import GAUSSIAN_MECHANISM, LedgerEntry

TAIL = 1e-12  # a cell's mass left out, at most, on both sides together
MAX_DENOMINATOR = 64  # the lattice 1/D of the weights, D at most this
MAX_POINTS = 1 << 21  # the sum's pmf, at most this many integers
ROUNDING = 1e-9  # subtracted from the covered mass: more than the FFT's rounding


def cell_pmf(entry: LedgerEntry) -> np.ndarray | None:
    """One cell's pmf on −R..R, all but at most TAIL of its mass; None beyond the summed σ."""
    if entry.mechanism == GAUSSIAN_MECHANISM:
        sigma = math.sqrt(float(entry.noise_scale))
        if sigma > SUMMED_SIGMA:
            return None
        # P(|Z| > R) ≤ 2·exp(−R²/2σ²) for the discrete Gaussian too (it is sub-Gaussian with σ²).
        reach = math.ceil(sigma * math.sqrt(2 * math.log(2 / TAIL))) + 1
        return discrete_gaussian_pmf(np.arange(-reach, reach + 1), entry.noise_scale)
    r = math.exp(-1 / float(entry.noise_scale))
    if r == 0.0:  # a scale so small that the noise is 0 but with probability below 1e-300
        return np.array([0.0, 1.0, 0.0])
    # P(|Z| > R) = 2·r^(R+1)/(1 + r) for the discrete Laplace.
    reach = max(1, math.ceil(math.log(TAIL * (1 + r) / 2) / math.log(r)))
    if 2 * reach + 1 > MAX_POINTS:
        return None
    z = np.arange(-reach, reach + 1)
    return (1 - r) / (1 + r) * np.power(r, np.abs(z))


def lattice(weights: Sequence[float]) -> tuple[np.ndarray, int] | None:
    """(D·w as integers, D) for the least D ≤ MAX_DENOMINATOR that makes every weight whole."""
    w = np.asarray(weights, dtype=np.float64)
    for d in range(1, MAX_DENOMINATOR + 1):
        scaled = w * d
        whole = np.round(scaled)
        if np.all(np.abs(scaled - whole) <= 1e-9 * np.maximum(1.0, np.abs(scaled))):
            return whole.astype(np.int64), d
    return None


def exact_halfwidth(entry: LedgerEntry, weights: Sequence[float], alpha: float) -> float | None:
    """The least h (on the weights' lattice) with P(|Σ w_k·Z_k| ≤ h) ≥ 1 − α, from the exact pmfs;
    None when the weights are off a lattice or the sum is too wide (module docstring)."""
    return _exact(entry, tuple(float(w) for w in weights if w != 0), float(alpha))


@functools.lru_cache(maxsize=256)
def _exact(entry: LedgerEntry, weights: tuple[float, ...], alpha: float) -> float | None:
    if not weights:
        return 0.0
    found = lattice(weights)
    pmf = cell_pmf(entry)
    if found is None or pmf is None:
        return None
    whole, d = found
    reach = (len(pmf) - 1) // 2
    span = int(np.abs(whole).sum()) * reach  # the sum lies in [−span, span]
    if 2 * span + 1 > MAX_POINTS:
        return None
    size = 1 << (2 * span + 1).bit_length()
    spectrum = np.ones(size // 2 + 1, dtype=np.complex128)
    for w in whole:
        spread = np.zeros(2 * abs(int(w)) * reach + 1)
        spread[:: abs(int(w))] = pmf  # symmetric pmf: the sign of w does not matter
        spectrum *= np.fft.rfft(spread, size)
    total = np.clip(np.fft.irfft(spectrum, size)[: 2 * span + 1], 0.0, None)
    # P(|S| ≤ h) as h grows: the centre, then both sides one step at a time.
    covered = np.cumsum(np.concatenate([[total[span]], total[span + 1:] + total[span - 1::-1]]))
    h = int(np.searchsorted(covered, 1 - alpha + ROUNDING))
    return None if h >= len(covered) else h / d


def positive_part_quantile(entry: LedgerEntry, cells: int, alpha: float) -> float:
    """The least h with P(Σ_k max(Z_k, 0) ≤ h) ≥ 1 − α over ``cells`` cells: from the exact pmfs
    (the positive part of a cell puts all of its mass at or below zero on zero), or beyond the
    summed σ the union bound's ``cells`` times one cell's two-sided half-width at α/cells."""
    return _positive(entry, int(cells), float(alpha))


@functools.lru_cache(maxsize=64)
def _positive(entry: LedgerEntry, cells: int, alpha: float) -> float:
    pmf = cell_pmf(entry)
    if pmf is not None:
        reach = (len(pmf) - 1) // 2
        if cells * reach + 1 <= MAX_POINTS:
            positive = np.concatenate([[pmf[: reach + 1].sum()], pmf[reach + 1:]])  # on 0..reach
            size = 1 << (cells * reach + 1).bit_length()
            total = np.clip(np.fft.irfft(np.fft.rfft(positive, size) ** cells, size)[: cells * reach + 1], 0.0, None)
            h = int(np.searchsorted(np.cumsum(total), 1 - alpha + ROUNDING))
            if h < len(total):
                return float(h)
    return cells * _one_cell(entry, alpha / cells)


def _one_cell(entry: LedgerEntry, alpha: float) -> float:
    """One cell's exact two-sided half-width at α."""
    if entry.mechanism == GAUSSIAN_MECHANISM:
        return float(discrete_gaussian_halfwidth(entry.noise_scale, alpha))
    return discrete_laplace_halfwidth(entry.noise_scale, alpha)
