"""The budget, its ledger, and the Laplace publisher's calibration."""

from fractions import Fraction

import numpy as np
import pytest

from dp_spark.core.accounting import as_epsilon
from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource, discrete_laplace_variance
from dp_spark.errors import BudgetExceeded, ConfigError
from dp_spark.publishers import laplace


def entry(step, eps):
    return LedgerEntry(step, "discrete Laplace", as_epsilon(eps), Fraction(1), 1 / as_epsilon(eps), 1)


def test_decimal_split_spends_exactly_the_total():
    budget = Budget(1.0)
    for step, eps in [("popularity", 0.1), ("items", 0.45), ("edges", 0.45)]:
        budget.spend(entry(step, eps))
    assert budget.spent == 1 and budget.remaining == 0
    assert [e["epsilon"] for e in budget.to_json()["ledger"]] == [0.1, 0.45, 0.45]


def test_overspend_is_refused_and_not_recorded():
    budget = Budget(0.5)
    budget.spend(entry("items", 0.3))
    with pytest.raises(BudgetExceeded, match="only 0.2 of 0.5 is left"):
        budget.spend(entry("edges", 0.3))
    assert budget.spent == Fraction(3, 10) and len(budget.entries) == 1


def test_plan_check_names_every_part():
    with pytest.raises(BudgetExceeded, match=r"items 0.7 \+ edges 0.5 = 1.2 > epsilon 1"):
        Budget(1).check_plan({"items": as_epsilon(0.7), "edges": as_epsilon(0.5)})


@pytest.mark.parametrize("bad", [0, -0.5, "abc", float("nan"), True, None])
def test_bad_epsilons_are_refused(bad):
    with pytest.raises(ConfigError, match="epsilon"):
        as_epsilon(bad)


def test_laplace_publisher_noise_has_scale_sensitivity_over_epsilon():
    counts = np.arange(100_000, dtype=np.int64) % 50
    out = laplace.publish(counts, 10, Fraction(1, 2), Budget(10), RandomSource(seed=4), "items")
    (e,) = out.entries
    assert (e.epsilon, e.sensitivity, e.noise_scale, e.cells) == (Fraction(1, 2), 10, 20, 100_000)
    noise = (out.values - counts).astype(float)
    assert out.values.dtype == np.int64
    # Variance of DLap(20) is ≈ 799.7; its standard error over 1e5 cells is ≈ 0.6%.
    assert noise.var() == pytest.approx(discrete_laplace_variance(20), rel=0.03)
    assert abs(noise.mean()) < 5 * np.sqrt(discrete_laplace_variance(20) / counts.size)


def test_laplace_publisher_refuses_floats_and_zero_sensitivity():
    with pytest.raises(TypeError):
        laplace.publish(np.ones(3), 1, Fraction(1), Budget(10), RandomSource(seed=1), "x")
    with pytest.raises(ValueError):
        laplace.publish(np.ones(3, dtype=np.int64), 0, Fraction(1), Budget(10), RandomSource(seed=1), "x")
