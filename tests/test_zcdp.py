"""zCDP conversions (core.zcdp) against published values, the exact Gaussian privacy profile and the
classical bound, at small and large ε and δ."""

import math
from fractions import Fraction

import pytest

from dp_spark.core import zcdp

GRID = [(eps, delta) for eps in (0.01, 0.1, 1.0, 3.0, 10.0) for delta in (1e-12, 1e-6, 1e-3)]


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def _gaussian_delta(sigma: float, epsilon: float) -> float:
    """The exact (ε, δ) profile of the continuous Gaussian mechanism, sensitivity 1 (Balle and Wang
    2018, Theorem 8), which is (1/(2σ²))-zCDP."""
    shift = 1 / (2 * sigma)
    return _normal_cdf(shift - epsilon * sigma) - math.exp(epsilon) * _normal_cdf(-shift - epsilon * sigma)


def test_published_values():
    # OpenDP's test of its cdp_delta (Gaussian of scale 4, sensitivity 1: ρ = 1/32).
    assert zcdp.epsilon_of(1 / 32, 1e-3) == pytest.approx(0.6880024554878086, rel=1e-8)
    assert zcdp.delta_of(1 / 32, 0.6880024554878086) == pytest.approx(1e-3, rel=1e-8)
    # ε = 1, δ = 1e-6 is ρ ≈ 0.0244 by the CKS conversion (0.0175 by the classical one).
    assert float(zcdp.rho_of(1, 1e-6)) == pytest.approx(0.024356, rel=1e-4)


@pytest.mark.parametrize("epsilon, delta", GRID)
def test_the_conversion_is_tight_and_safe(epsilon, delta):
    rho = zcdp.rho_of(epsilon, delta)
    assert isinstance(rho, Fraction)
    # Stated back, the ρ handed out never claims more than the (ε, δ) asked, and loses little.
    assert epsilon * (1 - 1e-5) <= zcdp.epsilon_of(float(rho), delta) <= epsilon
    assert zcdp.delta_of(float(rho), epsilon) <= delta
    # Tighter than the classical ε = ρ + 2√(ρ ln(1/δ)), which is itself valid.
    classical = float(rho) + 2 * math.sqrt(float(rho) * math.log(1 / delta))
    assert zcdp.epsilon_of(float(rho), delta) <= classical


@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0, 20.0, 300.0])
@pytest.mark.parametrize("epsilon", [0.01, 0.1, 1.0, 5.0])
def test_the_stated_delta_covers_the_exact_gaussian_profile(sigma, epsilon):
    # The Gaussian of sensitivity 1 is (1/(2σ²))-zCDP: the conversion must give at least its exact δ
    # (else a stated guarantee would be false), and not absurdly more.
    exact = _gaussian_delta(sigma, epsilon)
    stated = zcdp.delta_of(1 / (2 * sigma**2), epsilon)
    assert stated >= exact
    if exact > 1e-300:
        assert stated <= 20 * exact + 1e-12


def test_delta_falls_as_epsilon_grows_and_rises_with_rho():
    deltas = [zcdp.delta_of(0.05, eps) for eps in (0.0, 0.1, 0.5, 1.0, 2.0)]
    assert deltas == sorted(deltas, reverse=True) and deltas[0] <= 1
    assert zcdp.delta_of(0.01, 1.0) < zcdp.delta_of(0.02, 1.0) < zcdp.delta_of(0.04, 1.0)


@pytest.mark.parametrize("rho", [5e-324, 1e-300, 1e-200, 1e-60, 1e-20])
def test_a_tiny_rho_states_a_tiny_delta_and_no_epsilon(rho):
    """Down to the least double: the best α is found (about 1/√(2ρ) at ε = 0), so δ is finite,
    falls with ε and stays at most √ρ-like; ε at δ = 1e-6 is 0. Negative control: halving α's
    range only 200 times, as before, δ at ε = 0 overflowed from about ρ = 1e-125 on."""
    deltas = [zcdp.delta_of(rho, eps) for eps in (0.0, 1e-9, 1.0)]
    assert all(math.isfinite(d) for d in deltas) and deltas == sorted(deltas, reverse=True)
    assert deltas[0] <= math.sqrt(rho) * 10 or deltas[0] == pytest.approx(math.exp(-708), rel=1e-6)
    assert zcdp.epsilon_of(rho, 1e-6) == 0.0
    assert zcdp._best_alpha(rho, 0.0) == pytest.approx(1 / math.sqrt(2 * rho), rel=1e-6)


def test_negative_control_alpha_halved_200_times_overflows(monkeypatch):
    monkeypatch.setattr(zcdp, "_ALPHA_BISECTIONS", 200)
    with pytest.raises(OverflowError):
        zcdp.delta_of(1e-300, 0.0)


def test_costs_of_steps():
    assert zcdp.pure_cost(Fraction(1, 2)) == Fraction(1, 8)
    assert zcdp.gaussian_cost(10, Fraction(410)) == Fraction(10, 820)
    for rho in (Fraction(1, 3), Fraction(24356, 10**6), Fraction(1, 10**9), Fraction(7)):
        eps = zcdp.epsilon_for_rho(rho)
        assert zcdp.pure_cost(eps) <= rho
        assert zcdp.pure_cost(eps + Fraction(1, 10**6)) > rho  # the largest on its grid
        assert eps.denominator <= 10**6
    with pytest.raises(ValueError, match="too small"):
        zcdp.epsilon_for_rho(Fraction(1, 10**14))


def test_floor_fraction_never_rounds_up():
    for value in (0.1, 1 / 3, 2.0**-40, 123456.789, Fraction(10**13 + 1, 10**13)):
        kept = zcdp.floor_fraction(value)
        assert kept <= Fraction(value) and kept.denominator <= 10**12
        assert float(kept) == pytest.approx(float(value), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan")])
def test_bad_inputs_are_refused(bad):
    with pytest.raises(ValueError):
        zcdp.rho_of(bad, 1e-6)
    with pytest.raises(ValueError):
        zcdp.epsilon_of(bad, 1e-6)
    for delta in (0, 1, -0.1, True):
        with pytest.raises(ValueError):
            zcdp.rho_of(1.0, delta)
