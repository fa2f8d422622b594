"""Which noise a count table gets under zCDP accounting, from public quantities only.

For the same share of ρ, handed out as ε (ε²/2 = ρ_k), a table of L1 sensitivity Δ₁ takes discrete
Laplace noise of scale Δ₁/ε, and a table of squared L2 sensitivity Δ₂² takes discrete Gaussian noise
of σ² = Δ₂²/ε². "auto" picks the one of lower variance, exactly (both variances from their pmfs).
For counts Δ₂² ≤ Δ₁², so the Gaussian's variance, at most Δ₂²/ε², is below the Laplace's, about
2Δ₁²/ε²: it wins at every bound, by √(2l/c) in sd with at most c records per user and item.
"""

from __future__ import annotations

from fractions import Fraction

from dp_spark.core import discrete_gaussian, mechanisms

LAPLACE = "laplace"
GAUSSIAN = "gaussian"
AUTO = "auto"


def gaussian_variance(l2_squared: int, epsilon: Fraction) -> float:
    """The variance of the Gaussian noise a table of squared L2 sensitivity Δ₂² gets at ε."""
    return discrete_gaussian.discrete_gaussian_variance(discrete_gaussian.variance_at_least(
        Fraction(l2_squared) / Fraction(epsilon) ** 2))


def laplace_variance(l1: int, epsilon: Fraction) -> float:
    """The variance of the Laplace noise a table of L1 sensitivity Δ₁ gets at ε."""
    return mechanisms.discrete_laplace_variance(Fraction(l1) / Fraction(epsilon))


def chosen(noise: str, l1: int, l2_squared: int, epsilon: Fraction) -> str:
    """"laplace" or "gaussian" for one table, given privacy.noise (``noise``)."""
    if noise in (LAPLACE, GAUSSIAN):
        return noise
    if noise != AUTO:
        raise ValueError(f"unknown noise {noise!r}")
    return GAUSSIAN if gaussian_variance(l2_squared, epsilon) < laplace_variance(l1, epsilon) else LAPLACE


def described(noise: str, records_per_item: int | None = None) -> str:
    """A release's noise for its one-line description: "discrete Gaussian noise (zCDP), at most 1
    record per user and item", "the lower-variance noise per table (zCDP)", or "" for Laplace
    (the publisher names it)."""
    if noise == LAPLACE:
        return ""
    said = "discrete Gaussian noise (zCDP)" if noise == GAUSSIAN else \
        "Laplace or discrete Gaussian noise per table, the lower variance (zCDP)"
    if records_per_item:
        said += f", at most {records_per_item} record{'s' if records_per_item > 1 else ''} per user and item"
    return said
