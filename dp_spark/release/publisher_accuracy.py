"""The expected error of a count vector released through a named publisher
(:mod:`dp_spark.publishers`), from its public parameters only: sensitivity, epsilon, the number
of cells and the publisher's options. Used by the families that publish count vectors (counts,
user_histogram). The formulas follow each publisher's module; tests/test_accuracy.py checks the
scales against the ledger entries the publishers write.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from dp_spark.core import accuracy
from dp_spark.core.accuracy import Accuracy
from dp_spark.errors import ConfigError
from dp_spark.publishers import ahp, dpa_ahp, fourier


def publisher_accuracy(name: str, options: dict[str, Any], sensitivity: int, epsilon: Fraction, cells: int,
                       alpha: float) -> Accuracy:
    """The Accuracy of each cell of a vector of ``cells`` counts of L1 sensitivity ``sensitivity``
    published by ``name`` at ``epsilon``."""
    scale = Fraction(sensitivity) / Fraction(epsilon)
    if name == "laplace":
        return accuracy.discrete_laplace(scale, alpha)
    if name == "alpa":
        return accuracy.discrete_laplace(
            scale, alpha, divisor=cells, distribution="discrete Laplace on the total, divided by the number of cells",
            note="every cell gets the same value, the noisy total over the cells: its distance from its own count "
                 "(the averaging bias) is not shown and is usually far larger than the noise")
    if name == "fourier":
        return _fourier(options, sensitivity, epsilon, cells, alpha)
    if name == "grouping":
        return accuracy.discrete_laplace(
            Fraction(sensitivity) / (Fraction(epsilon) / 2), alpha, kind=accuracy.UPPER_BOUND,
            distribution="discrete Laplace on group sums, divided by the group width",
            note="the group width is chosen from a noisy sample (a private choice, >= 1): these are the numbers "
                 "for width 1, the most noise a cell can carry; averaging over a group adds a bias not shown")
    if name in ("ahp", "dpa_ahp", "sdpa_ahp"):
        return _ahp(name, options, sensitivity, epsilon, alpha)
    raise ConfigError(f"no accuracy formula for publisher {name!r}")


def _ahp(name: str, options: dict[str, Any], sensitivity: int, epsilon: Fraction, alpha: float) -> Accuracy:
    """AHP's second pass: discrete Laplace Δ/ε2 on each cluster's sum, divided by its size (≥ 1)."""
    rho = Fraction(options.get("rho", ahp.RHO))
    rest = Fraction(epsilon)
    if name != "ahp" and not options.get("reproduce_paper", False):
        rest -= rest * Fraction(options.get("ranking_share", dpa_ahp.RANKING_SHARE))
    epsilon2 = rest - rest * rho
    return accuracy.discrete_laplace(
        Fraction(sensitivity) / epsilon2, alpha, kind=accuracy.UPPER_BOUND,
        distribution="discrete Laplace on cluster sums, divided by the cluster size",
        note="the clusters are formed from a noisy first pass (a private choice): these are the numbers for a "
             "cluster of one cell, the most noise a cell can carry; averaging over a cluster adds a bias not shown")


def _fourier(options: dict[str, Any], sensitivity: int, epsilon: Fraction, cells: int, alpha: float) -> Accuracy:
    """FPA: 2k noisy coefficient parts (discrete Laplace on the grid), inverted by the orthonormal
    inverse DFT. Each cell's noise is (1/√n)·(N_0 + Σ_j 2·Re(N_j·e^(2πijm/n)) + N_(n/2)·(−1)^m):
    variance σ²·(1 + 4·(k − 1))/n, σ the sd of one part, less 3σ²/n when the Nyquist term (real only)
    is among the k kept. The same for every cell."""
    k = options.get("k") or fourier.default_k(cells)
    spectrum_size = cells // 2 + 1
    if not 1 <= k <= spectrum_size:
        raise ConfigError(f"publisher.k must be between 1 and {spectrum_size} for {cells} cells, got {k}")
    grid_bits = options.get("grid_bits", 10)
    grid = Fraction(1, 2**grid_bits)
    steps = fourier.grid_sensitivity(k, sensitivity**2, grid_bits)
    part_scale = Fraction(steps) / Fraction(epsilon) * grid
    part_sd = accuracy.discrete_laplace_sd(part_scale, grid)
    terms = 1 + 4 * (k - 1) - (3 if cells % 2 == 0 and k == spectrum_size and k > 1 else 0)
    sd = part_sd * (terms / cells) ** 0.5
    return Accuracy(
        f"discrete Laplace on the grid 2^-{grid_bits} on the {k} lowest DFT coefficients, inverted",
        accuracy.UPPER_BOUND,
        alpha,
        scale=float(part_scale),
        sd=sd,
        ci95_halfwidth=accuracy.chebyshev_halfwidth(sd, 0.05),
        ci_halfwidth=accuracy.chebyshev_halfwidth(sd, alpha),
        note="sd is exact; each cell's noise is a sum of many draws with no closed-form quantile, so the "
        "half-widths are Chebyshev bounds (sd/sqrt(alpha)); scale is that of one coefficient part. Keeping "
        f"only {k} coefficients adds a bias not shown",
    )
