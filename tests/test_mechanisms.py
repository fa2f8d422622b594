"""The exact samplers: distributions match their targets (fixed seeds, stated tolerances)."""

from fractions import Fraction

import numpy as np
import pytest

from dp_spark.mechanisms import (
    RandomSource,
    bernoulli_exp_minus,
    discrete_laplace,
    discrete_laplace_pmf,
    discrete_laplace_variance,
)
from tests.stats import chi2_critical, chi2_statistic

N = 200_000


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(5, 2), Fraction(20)])
def test_discrete_laplace_matches_its_pmf(scale):
    draws = discrete_laplace(RandomSource(seed=11), scale, N)
    assert draws.dtype == np.int64
    # Bins: every z with expected count >= 20, plus the two tails pooled.
    z = np.arange(-400, 401)
    expected = discrete_laplace_pmf(z, scale) * N
    inner = z[expected >= 20]
    lo, hi = inner.min(), inner.max()
    observed = [np.sum(draws < lo)] + [np.sum(draws == v) for v in inner] + [np.sum(draws > hi)]
    tail = (1 - discrete_laplace_pmf(inner, scale).sum()) / 2 * N
    exp = [tail] + list(discrete_laplace_pmf(inner, scale) * N) + [tail]
    stat = chi2_statistic(observed, exp)
    assert stat < chi2_critical(len(exp) - 1), f"chi-square {stat:.1f} with {len(exp) - 1} df"


def test_discrete_laplace_moments():
    scale = Fraction(20)
    draws = discrete_laplace(RandomSource(seed=3), scale, N).astype(float)
    var = discrete_laplace_variance(scale)
    # Mean: 5 standard errors; variance: within 3% (its standard error here is about 0.5%).
    assert abs(draws.mean()) < 5 * np.sqrt(var / N)
    assert draws.var() == pytest.approx(var, rel=0.03)


def test_bernoulli_exp_minus_frequencies():
    rng = RandomSource(seed=5)
    for num, den in [(0, 1), (1, 3), (1, 1), (7, 8)]:
        hits = bernoulli_exp_minus(rng, np.full(N, num), np.full(N, den)).mean()
        p = np.exp(-num / den)
        assert abs(hits - p) < 5 * np.sqrt(p * (1 - p) / N) + 1e-12, (num, den, hits, p)


def test_below_is_uniform_and_in_range():
    rng = RandomSource(seed=9)
    draws = rng.below(np.full(70_000, 7))
    assert draws.max() < 7
    counts = np.bincount(draws.astype(np.int64), minlength=7)
    assert chi2_statistic(counts, np.full(7, 10_000)) < chi2_critical(6)
    big = np.uint64((1 << 63) + 12345)
    assert np.all(rng.below(np.full(1000, big)) < big)


def test_seeded_streams_repeat_and_os_streams_do_not():
    a = discrete_laplace(RandomSource(seed=1), Fraction(10), 50)
    b = discrete_laplace(RandomSource(seed=1), Fraction(10), 50)
    c = discrete_laplace(RandomSource(seed=2), Fraction(10), 50)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert RandomSource().seeded is False
    assert not np.array_equal(RandomSource().words(8), RandomSource().words(8))


@pytest.mark.parametrize("bad", [0, -1, Fraction(1, 1 << 41)])
def test_bad_scales_are_refused(bad):
    with pytest.raises(ValueError):
        discrete_laplace(RandomSource(seed=1), bad, 1)
