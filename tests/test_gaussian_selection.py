"""Partition selection by a Gaussian threshold under zCDP: the threshold's δ,
the release rates it gives, the choice between it and the optimal pure rule. No Spark."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.core import discrete_gaussian as dg
from dp_spark.core import zcdp
from dp_spark.core.accounting import Accounting
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import BudgetExceeded
from dp_spark.release import partition_selection as ps

RHO = zcdp.rho_of(1.0, 5e-7)


def _tail(variance: Fraction, at: int) -> float:
    z = dg.support(variance)
    return float(dg.discrete_gaussian_pmf(z[z >= at], variance).sum())


@pytest.mark.parametrize("l0", [1, 3, 10, 100])
@pytest.mark.parametrize("delta", [1e-9, 5e-7, 1e-4])
def test_the_threshold_is_the_least_that_keeps_a_lone_users_keys_within_delta(l0, delta):
    params = ps.GaussianSelection(zcdp.epsilon_for_rho(RHO / 2), delta, l0)
    tau = params.threshold
    # A key only the added user holds has count 1: released when 1 + Z ≥ τ.
    assert l0 * _tail(params.variance, tau - 1) <= delta
    assert tau == 1 or l0 * _tail(params.variance, tau - 2) > delta
    assert params.rho == Fraction(l0) / (2 * params.variance) <= zcdp.epsilon_for_rho(RHO / 2) ** 2 / 2


def test_release_rates_follow_the_noisy_threshold():
    params = ps.GaussianSelection(zcdp.epsilon_for_rho(RHO / 2), 5e-7, 10)
    tau, n = params.threshold, 40_000
    counts = np.repeat([0, 1, tau - 20, tau, tau + 40], n)
    budget = Budget(1, 5e-7, accounting=Accounting("gaussian", RHO, 5e-7))
    chosen = ps.select_gaussian(np.arange(counts.size), counts, params, budget, RandomSource(seed=4))
    rates = np.bincount(chosen // n, minlength=5) / n
    expected = [0.0, _tail(params.variance, tau - 1), _tail(params.variance, 20), _tail(params.variance, 0),
                _tail(params.variance, -40)]
    for rate, p in zip(rates, expected):  # 5 standard errors, fixed seed
        assert abs(rate - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12, (rates, expected)
    (entry,) = budget.entries
    assert entry.cells == 0 and entry.delta == 5e-7 and entry.rho == params.rho


def test_the_gaussian_threshold_needs_zcdp_and_its_delta():
    params = ps.GaussianSelection(Fraction(1, 10), 5e-7, 10)
    with pytest.raises(BudgetExceeded, match="zCDP"):
        ps.select_gaussian(np.arange(3), np.ones(3, dtype=int), params, Budget(1, 5e-7), RandomSource(seed=1))
    with pytest.raises(BudgetExceeded, match="delta"):  # a budget allowing no δ outside zCDP
        ps.select_gaussian(np.arange(3), np.ones(3, dtype=int), params,
                           Budget(1, 0.0, accounting=Accounting("gaussian", RHO, 5e-7)), RandomSource(seed=1))


@pytest.mark.parametrize("l0", [1, 10, 100])
def test_the_rule_of_lower_median_is_chosen(l0):
    epsilon = zcdp.epsilon_for_rho(RHO / 2)
    gaussian = ps.GaussianSelection(epsilon, 5e-7, l0).median_count()
    optimal = ps.median_count(ps.SelectionParams(epsilon, 5e-7, l0))
    assert ps.better_rule(epsilon, 5e-7, l0) == ("gaussian" if gaussian < optimal else "optimal")
    # At ε = 1, δ = 1e-6 (half of each for the selection) the Gaussian needs fewer users at every l0
    # here, and far fewer than the pure release's rule at half of ε: 113 against 250 at l0 = 10.
    assert gaussian < optimal
    if l0 == 10:
        assert gaussian <= 115 and ps.median_count(ps.SelectionParams(Fraction(1, 2), 1e-6, 10)) >= 245


def test_the_numbers_in_the_doc():
    # docs/partition_selection.md, "Under zCDP": ε = 1, δ = 1e-6; the selection's half of each.
    epsilon = zcdp.epsilon_for_rho(RHO / 2)
    table = {1: (26, 80, 34), 10: (250, 789, 113), 100: (2487, 7877, 380)}
    for l0, (pure, zcdp_optimal, gaussian) in table.items():
        assert ps.median_count(ps.SelectionParams(Fraction(1, 2), 1e-6, l0)) == pure
        assert ps.median_count(ps.SelectionParams(epsilon, 5e-7, l0)) == zcdp_optimal
        assert ps.GaussianSelection(epsilon, 5e-7, l0).median_count() == gaussian
