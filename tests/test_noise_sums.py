"""The half-width of a weighted sum of cells' noise from the exact pmfs (core.noise_sums): one cell
is its own exact half-width, a sum's is neither too narrow nor a step wider than it must be
(against simulated sums), and weights off a lattice fall back."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.core import noise_sums
from dp_spark.core.accounting import Accounting
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.aggregate import histogram_metrics as hm
from dp_spark.families.aggregate.noisy_totals import GroupBound
from dp_spark.release.sum_tables import halfwidth


def entry(noise: str, l: int = 3):
    return hm.ledger_entry(GroupBound(l, 1), "v", Fraction(1, 2), noise, 40_000, 5)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_one_cell_is_its_own_exact_half_width(noise):
    for alpha in (0.5, 0.05, 1e-4):
        assert noise_sums.exact_halfwidth(entry(noise), [1], alpha) == halfwidth(entry(noise), alpha)
        assert noise_sums.exact_halfwidth(entry(noise), [-3], alpha) == 3 * halfwidth(entry(noise), alpha)


@pytest.mark.parametrize("noise, weights", [("laplace", [1, 1, 1, 1, 1]), ("laplace", [-1.5, -0.5, 0.5, 1.5]),
                                            ("gaussian", [-2, -1, 0, 1, 2]), ("gaussian", [-1.5, -0.5, 0.5, 1.5])])
def test_the_half_width_holds_and_is_the_least_on_its_lattice(noise, weights):
    """40,000 to 50,000 sums of 200,000 cells' noise, for α = 0.05: the exact h is exceeded at most
    5% of the time (plus 3 standard errors, about 0.3%), and one lattice step less is exceeded more
    than 5% less 3 standard errors of the time (each step moves the coverage by more than 1% here):
    it is no wider than it must be (the negative control)."""
    alpha = 0.05
    e = entry(noise)
    budget = (Budget(Fraction(10**6), accounting=Accounting("gaussian", Fraction(10**6), 1e-6)) if noise == "gaussian"
              else Budget(Fraction(10**6)))
    cells = np.concatenate([budget.noise(e, RandomSource(seed=s)) for s in range(5)])
    sums = cells.reshape(-1, len(weights)) @ np.asarray(weights, dtype=float)
    h = noise_sums.exact_halfwidth(e, weights, alpha)
    step = 1 / noise_sums.lattice(weights)[1]
    se = 3 * math.sqrt(alpha * (1 - alpha) / len(sums))
    assert np.mean(np.abs(sums) > h + 1e-9) <= alpha + se
    assert np.mean(np.abs(sums) > h - step + 1e-9) > alpha - se
    # The bounds that need no pmf hold it too, and are no narrower.
    assert hm.combination_halfwidth(e, weights, alpha) == h


def test_weights_off_a_lattice_or_too_wide_fall_back():
    assert noise_sums.lattice([1, 0.5, 0.25]) is not None and noise_sums.lattice([1, 0.5, 0.25])[1] == 4
    assert noise_sums.lattice([1, math.sqrt(2)]) is None
    assert noise_sums.exact_halfwidth(entry("gaussian"), [1, math.sqrt(2)], 0.05) is None
    assert noise_sums.exact_halfwidth(entry("laplace"), [10**6, 1], 0.05) is None  # past MAX_POINTS
    assert noise_sums.exact_halfwidth(entry("laplace"), [0, 0], 0.05) == 0.0
    bound = hm.combination_halfwidth(entry("gaussian"), [1, math.sqrt(2)], 0.05)
    assert bound >= noise_sums.exact_halfwidth(entry("gaussian"), [1, 1.5], 0.05)  # |√2| < 1.5: no narrower


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_positive_parts_quantile_holds_and_is_the_least(noise):
    """Σ max(Z_k, 0) over 5 cells, 40,000 sums: exceeded at most 5% of the time (plus 3 standard
    errors), and one less is exceeded more than 5% less 3 standard errors of the time."""
    alpha, e = 0.05, entry(noise)
    budget = (Budget(Fraction(10**6), accounting=Accounting("gaussian", Fraction(10**6), 1e-6)) if noise == "gaussian"
              else Budget(Fraction(10**6)))
    cells = np.concatenate([budget.noise(e, RandomSource(seed=s)) for s in range(5)])
    sums = np.maximum(cells, 0).reshape(-1, 5).sum(axis=1)
    h = noise_sums.positive_part_quantile(e, 5, alpha)
    se = 3 * math.sqrt(alpha * (1 - alpha) / len(sums))
    assert np.mean(sums > h) <= alpha + se
    assert np.mean(sums > h - 1) > alpha - se
