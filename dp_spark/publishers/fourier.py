"""FPA / DFT: keep the k lowest Fourier coefficients, add noise, invert
(Rastogi & Nath 2010 as used by papers 000 and 001; specification §3.4).

DP claim. The orthonormal DFT preserves L2 norms (Parseval), so one user
moves the kept coefficients by at most Δ2 in L2, and their 2k real and
imaginary parts by at most √(2k)·Δ2 in L1: noise of scale √(2k)·Δ2/ε on each
part is ε-DP (the [FIX] of §3.4; the paper's √k is too small). Noise is drawn
exactly on the public grid g = 2^-grid_bits (§1.4): the parts are rounded to
the grid, which can move each by one more grid step, so the sensitivity used is
⌈√(2k)·Δ2/g⌉ + 2k grid steps, and the draw is discrete Laplace in grid units.
Inverting with ``irfft`` is post-processing.

Δ2: a user with at most Δ units in the vector moves it by at most Δ in L2
(all units on one cell), or by √Δ when each unit sits in a different cell
(``distinct_cells``: one user's distinct items, paper 001's rows).

Claim: docs/publishers.md, "Privacy claim: fourier".
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dp_spark.core.exact_roots import ceil_sqrt
from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource, as_scale
from dp_spark.publishers.interface import Published, check_request


def default_k(cells: int) -> int:
    """Coefficients kept when the config names none: 5% of the cells (§3.4 [ASSUME])."""
    return max(1, round(0.05 * cells))


def grid_sensitivity(k: int, l2_squared: int, grid_bits: int) -> int:
    """⌈√(2k·Δ2²)/g⌉ + 2k, the L1 sensitivity of the 2k grid-rounded parts, in grid steps."""
    return ceil_sqrt(2 * k * l2_squared * 4**grid_bits) + 2 * k  # (√(2k)·Δ2/g)², an exact integer


def publish(counts: np.ndarray, sensitivity: int, epsilon: Fraction, budget: Budget, rng: RandomSource,
            step: str, *, k: int | None = None, distinct_cells: bool = False, grid_bits: int = 10) -> Published:
    """The counts (flattened in their public order) through FPA_k; same shape back, floats."""
    counts = check_request(counts, sensitivity, epsilon, budget, step)
    x = counts.reshape(-1).astype(float)
    spectrum_size = x.size // 2 + 1
    k = default_k(x.size) if k is None else k
    if not 1 <= k <= spectrum_size:
        raise ValueError(f"k must be between 1 and {spectrum_size} for {x.size} cells, got {k}")
    l2_squared = sensitivity if distinct_cells else sensitivity**2
    steps = grid_sensitivity(k, l2_squared, grid_bits)
    grid = Fraction(1, 2**grid_bits)
    entry = LedgerEntry(
        step=step, mechanism=f"discrete Laplace on the grid 2^-{grid_bits}, {k} lowest DFT coefficients",
        epsilon=Fraction(epsilon), sensitivity=Fraction(steps) * grid,
        noise_scale=as_scale(Fraction(steps) / Fraction(epsilon)) * grid, cells=2 * k,
    )
    # Noise in grid steps: k for the real parts, then k for the imaginary parts, two runs of the sampler.
    noise = budget.discrete_laplace(entry, rng, grid=grid, blocks=(k, k))

    spectrum = np.fft.rfft(x, norm="ortho")[:k]
    real = np.round(spectrum.real / float(grid)).astype(np.int64) + noise[:k]
    imag = np.round(spectrum.imag / float(grid)).astype(np.int64) + noise[k:]
    # Im F[0] (and Im F[n/2] for even n) is zero for every input: nothing to hide there.
    always_real = np.zeros(k, dtype=bool)
    always_real[0] = True
    if x.size % 2 == 0 and k == spectrum_size:
        always_real[-1] = True
    imag[always_real] = 0
    noisy = np.zeros(spectrum_size, dtype=complex)
    noisy[:k] = (real + 1j * imag) * float(grid)
    values = np.fft.irfft(noisy, n=x.size, norm="ortho").reshape(counts.shape)
    return Published(values, (entry,))
