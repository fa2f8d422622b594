"""Small statistical helpers for tests (no scipy dependency)."""

from __future__ import annotations

import math

import numpy as np

# Standard normal quantile for a one-sided p = 1e-4: tests fail by chance about once in 10,000 runs
# of a *different* seed; with the fixed seeds used here they are deterministic.
Z_1E4 = 3.719


def chi2_critical(df: int, z: float = Z_1E4) -> float:
    """Upper critical value of chi-square(df) by the Wilson-Hilferty approximation."""
    h = 2.0 / (9.0 * df)
    return df * (1.0 - h + z * math.sqrt(h)) ** 3


def chi2_statistic(observed: np.ndarray, expected: np.ndarray) -> float:
    observed = np.asarray(observed, dtype=float)
    expected = np.asarray(expected, dtype=float)
    return float(((observed - expected) ** 2 / expected).sum())
