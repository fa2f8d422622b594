"""The exact discrete Gaussian sampler (CKS 2020, Algorithm 3): its draws follow the exact pmf across
the range of σ², on the driver and keyed per cell on the executors (fixed seeds, 1e-4 critical values)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.core import discrete_gaussian as dg
from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.vector_noise import BLOCK_CELLS, GAUSSIAN, NoiseSecret, range_noise
from tests.stats import chi2_critical, chi2_statistic

N = 200_000
SECRET = NoiseSecret(bytes(range(32)))
# Small (below one: most mass on 0), a fraction with a prime denominator, a count-sized σ, and a large
# irregular σ² rounded up by variance_at_least (σ ≈ 3,460: B = 2pq·t² is near 2^50).
VARIANCES = [Fraction(1, 4), Fraction(10, 3), Fraction(400), dg.variance_at_least(Fraction(10**14, 8_351_111))]


def _chi_square(draws: np.ndarray, variance: Fraction) -> tuple[float, float]:
    """(statistic, critical value) against the exact pmf: bins of ⌈σ/20⌉ consecutive integers
    (one integer each for σ ≤ 20), every bin with an expected count ≥ 20 its own, the rest pooled."""
    z = dg.support(variance)
    width = max(1, math.ceil(math.sqrt(variance) / 20))
    bins = (z - z[0]) // width
    expected = np.bincount(bins, weights=dg.discrete_gaussian_pmf(z, variance) * draws.size)
    observed = np.bincount((np.clip(draws, z[0], z[-1]) - z[0]) // width, minlength=expected.size)
    own = expected >= 20
    exp = np.append(expected[own], expected[~own].sum())
    obs = np.append(observed[own], observed[~own].sum())
    return chi2_statistic(obs, exp), chi2_critical(exp.size - 1)


@pytest.mark.parametrize("variance", VARIANCES)
def test_the_sampler_matches_the_exact_pmf(variance):
    draws = dg.discrete_gaussian(RandomSource(seed=17), variance, N)
    assert draws.dtype == np.int64
    stat, critical = _chi_square(draws, variance)
    assert stat < critical, f"chi-square {stat:.1f} above {critical:.1f}"


@pytest.mark.parametrize("variance", VARIANCES)
def test_a_variance_10_percent_too_small_fails_the_same_test(variance):
    # Negative control: the test above can fail. Draws at σ² are rejected as draws of 0.9·σ²
    # (too little noise), for every σ² of the grid.
    draws = dg.discrete_gaussian(RandomSource(seed=17), variance, N)
    stat, critical = _chi_square(draws, variance * Fraction(9, 10))
    assert stat > critical, f"chi-square {stat:.1f} not above {critical:.1f}"


def test_the_moments_and_the_variance_below_sigma_squared():
    for variance in (Fraction(1, 4), Fraction(400)):
        draws = dg.discrete_gaussian(RandomSource(seed=5), variance, N).astype(float)
        var = dg.discrete_gaussian_variance(variance)
        assert var <= float(variance)  # CKS Corollary 9
        assert abs(draws.mean()) < 5 * math.sqrt(var / N)
        assert draws.var() == pytest.approx(var, rel=0.02)  # its standard error is about 0.3%
    assert dg.discrete_gaussian_variance(Fraction(400)) == pytest.approx(400, rel=1e-12)
    assert dg.discrete_gaussian_variance(Fraction(1, 4)) < 0.9 * 0.25  # below σ² for σ < 1


@pytest.mark.parametrize("r, b_lo, b_hi", [(0, 3, 5), (7, 3, 5), (14, 3, 5), (2**61 + 12345, 2**40 + 3, 2**22 + 1),
                                          ((2**62 - 1) * 2**20, 2**62 - 1, 2**20 + 7)])
def test_the_two_limb_bernoulli_is_exp_minus_r_over_b(r, b_lo, b_hi):
    # B = b_lo·b_hi passes 2^64 in the last three cases: the comparison works on the limbs.
    rng = RandomSource(seed=23)
    n = 100_000
    hits = dg._bernoulli_exp_minus_limbs(rng, np.full(n, r % b_lo, dtype=np.uint64),
                                         np.full(n, r // b_lo, dtype=np.uint64), b_lo, b_hi).mean()
    p = math.exp(-r / (b_lo * b_hi))
    assert abs(hits - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-12, (hits, p)


def test_variance_at_least_never_rounds_down():
    for value in (Fraction(1, 3), Fraction(10**18 + 1, 10**9 + 7), Fraction(2**40 + 1, 3), Fraction(3**60, 2**50),
                  Fraction(17, 10**15)):
        kept = dg.variance_at_least(value)
        assert kept >= value
        assert dg.as_variance(kept) == kept
        assert float(kept - value) <= max(float(value) * 2.4e-7, 2**-23)
    assert dg.variance_at_least(Fraction(10, 3)) == Fraction(10, 3)  # accepted as it is


def test_bad_variances_are_refused():
    for bad in (0, Fraction(-1, 2)):
        with pytest.raises(ValueError, match="positive"):
            dg.as_variance(bad)
    with pytest.raises(ValueError, match="sampler's limit"):
        dg.as_variance(Fraction(2**48))
    with pytest.raises(ValueError, match="numerator or denominator"):
        dg.as_variance(Fraction(2**40 + 1, 2**31 + 1))


@pytest.mark.parametrize("variance", [Fraction(1, 4), Fraction(10, 3), Fraction(400), Fraction(10**10)])
def test_the_halfwidth_is_the_exact_95_percent_quantile(variance):
    h = dg.discrete_gaussian_halfwidth(variance, 0.05)
    assert dg.discrete_gaussian_tail(h, variance) <= 0.05
    assert h == 0 or dg.discrete_gaussian_tail(h - 1, variance) > 0.05
    if variance >= 400:  # the continuous normal's 1.96σ, to within one step
        assert abs(h - 1.959964 * math.sqrt(variance)) <= 1


@pytest.mark.parametrize("variance", [Fraction(10, 3), Fraction(400)])
def test_the_executor_noise_has_the_exact_discrete_gaussian_pmf(variance):
    draws = range_noise(SECRET, "count", variance, 3 * BLOCK_CELLS + 5, 3 * BLOCK_CELLS + 4 + N, GAUSSIAN)
    stat, critical = _chi_square(draws, variance)
    assert stat < critical, f"chi-square {stat:.1f} above {critical:.1f}"
    stat, critical = _chi_square(draws, variance * Fraction(9, 10))
    assert stat > critical  # and a σ² 10% too small would be caught


def test_executor_gaussian_noise_is_keyed_per_cell_and_apart_from_the_laplace():
    whole = range_noise(SECRET, "count", Fraction(400), 0, 2 * BLOCK_CELLS - 1, GAUSSIAN)
    part = range_noise(SECRET, "count", Fraction(400), BLOCK_CELLS - 10, BLOCK_CELLS + 9, GAUSSIAN)
    np.testing.assert_array_equal(part, whole[BLOCK_CELLS - 10: BLOCK_CELLS + 10])
    laplace = range_noise(SECRET, "count", Fraction(400), 0, 999)
    other_label = range_noise(SECRET, "edges", Fraction(400), 0, 999, GAUSSIAN)
    assert (laplace != whole[:1000]).mean() > 0.9
    assert (other_label != whole[:1000]).mean() > 0.9
    with pytest.raises(ValueError, match="unknown noise mechanism"):
        range_noise(SECRET, "count", Fraction(400), 0, 9, "cauchy")


def test_the_int64_and_the_python_integer_paths_draw_the_same(monkeypatch):
    # The fast path is an optimisation only: forced off, the same random words give the same draws.
    variance = dg.variance_at_least(Fraction(41330555661, 33554432))
    fast = dg.discrete_gaussian(RandomSource(seed=8), variance, 50_000)
    original = dg._exponents

    def slow(abs_y, p, q, t, denominator):
        u = abs_y.astype(object) * (q * t) - p
        return (u * u) // denominator, (u * u) % denominator
    monkeypatch.setattr(dg, "_exponents", slow)
    np.testing.assert_array_equal(fast, dg.discrete_gaussian(RandomSource(seed=8), variance, 50_000))
    assert original is not slow


def test_beyond_the_summed_range_the_tails_are_bounds_that_meet_the_sums(monkeypatch):
    # At σ = 10,000 both ways exist: the bound is at least the exact tail and exceeds it by at most
    # the pmf at m (the bound is f(m) + the integral from m).
    at_edge = Fraction(10**8)
    exact = {m: dg.tail_at_least(m, at_edge) for m in (0, 5_000, 20_000, 50_000)}
    heads = {m: float(dg.discrete_gaussian_pmf(np.array([m]), at_edge)[0]) for m in exact}
    monkeypatch.setattr(dg, "SUMMED_SIGMA", 9_999)
    for m, tail in exact.items():
        assert tail <= dg.tail_at_least(m, at_edge) <= tail + heads[m] * 1.001 + 1e-15
    # Far beyond it nothing is summed (σ ≈ 31,623 and 10^6): the variance is σ², the half-width 1.96σ.
    for variance in (Fraction(10**9), Fraction(10**12)):
        assert dg.discrete_gaussian_variance(variance) == float(variance)
        assert abs(dg.discrete_gaussian_halfwidth(variance, 0.05) - 1.959964 * float(variance) ** 0.5) <= 2
