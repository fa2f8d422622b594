"""The executor-side sampler: noise is a function of (secret, label, scale, cell) and has the exact
discrete Laplace distribution the driver's sampler has."""

from __future__ import annotations

import pickle
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.core.mechanisms import RandomSource, discrete_laplace, discrete_laplace_pmf
from dp_spark.core.vector_noise import (
    BLOCK_CELLS,
    KeyedStream,
    NoiseSecret,
    block_noise,
    range_noise,
)
from tests.stats import chi2_critical, chi2_statistic

SECRET = NoiseSecret.from_seed(2031)
N = 163_840  # draws per distribution test (2.5 blocks)


def test_the_same_secret_and_range_give_the_same_noise():
    first = range_noise(SECRET, "count", Fraction(3), 1000, 9999)
    again = range_noise(NoiseSecret(SECRET.key), "count", Fraction(3), 1000, 9999)
    assert first.shape == (9000,) and first.dtype == np.int64
    np.testing.assert_array_equal(first, again)


def test_a_cell_gets_the_same_noise_whatever_range_covers_it():
    # A retried or re-partitioned task covers the cells with other ranges: each cell keeps its value.
    whole = range_noise(SECRET, "count", Fraction(3), 0, 3 * BLOCK_CELLS - 1)
    cuts = [0, 17, BLOCK_CELLS - 1, BLOCK_CELLS + 5, 2 * BLOCK_CELLS + 100, 3 * BLOCK_CELLS]
    pieces = [range_noise(SECRET, "count", Fraction(3), a, b - 1) for a, b in zip(cuts, cuts[1:])]
    np.testing.assert_array_equal(np.concatenate(pieces), whole)


@pytest.mark.parametrize("other", [
    dict(first=5000, last=5999),                       # disjoint cells
    dict(label="sum"),                                 # another column of the same release
    dict(secret=NoiseSecret.from_seed(2032)),          # another release
    dict(scale=Fraction(31, 10)),                      # another scale
])
def test_anything_else_gives_other_noise(other):
    base = dict(secret=SECRET, label="count", scale=Fraction(3), first=0, last=999)
    mine = range_noise(**base)
    theirs = range_noise(**{**base, **other})
    assert np.mean(mine == theirs) < 0.2  # two independent draws at scale 3 agree about 1 time in 6


def test_a_fresh_secret_is_random_and_hidden():
    one, two = NoiseSecret.fresh(), NoiseSecret.fresh()
    assert one.key != two.key and not one.seeded and SECRET.seeded
    assert one.key.hex() not in repr(one) and str(one.key) not in repr(one)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="32 bytes"):
        NoiseSecret(b"short")
    with pytest.raises(ValueError, match="after last"):
        range_noise(SECRET, "count", 3, 10, 9)
    with pytest.raises(ValueError, match="cell index"):
        range_noise(SECRET, "count", 3, -1, 9)
    with pytest.raises(ValueError, match="label"):
        range_noise(SECRET, "", 3, 0, 9)
    with pytest.raises(ValueError, match="positive"):
        range_noise(SECRET, "count", 0, 0, 9)
    with pytest.raises(TypeError, match="not shipped"):
        pickle.dumps(KeyedStream(SECRET.key))


def _chi_square(draws: np.ndarray, scale: Fraction) -> tuple[float, float]:
    """(statistic, 1e-4 critical value) against the exact pmf: every z with expected count ≥ 20
    is a bin, and the two tails beyond them are pooled into one bin each."""
    z = np.arange(-2000, 2001)
    expected = discrete_laplace_pmf(z, scale) * draws.size
    inner = z[expected >= 20]
    lo, hi = inner.min(), inner.max()
    observed = [np.sum(draws < lo)] + [np.sum(draws == v) for v in inner] + [np.sum(draws > hi)]
    tail = (draws.size - expected[expected >= 20].sum()) / 2
    exp = [tail] + list(expected[expected >= 20]) + [tail]
    return chi2_statistic(observed, exp), chi2_critical(len(exp) - 1)


SCALES = [Fraction(1, 2), Fraction(3), Fraction(40, 7)]


@pytest.mark.parametrize("scale", SCALES)
def test_the_executor_noise_has_the_exact_discrete_laplace_pmf(scale):
    # Fixed secret, so deterministic; the tolerance is the chi-square's 1e-4 critical value.
    draws = range_noise(SECRET, "count", scale, 7 * BLOCK_CELLS + 3, 7 * BLOCK_CELLS + 2 + N)
    stat, critical = _chi_square(draws, scale)
    assert stat < critical, f"chi-square {stat:.1f} above {critical:.1f}"


@pytest.mark.parametrize("scale", SCALES)
def test_a_wrong_scale_fails_the_same_test(scale):
    # The negative control: the test above can fail. 10% more scale is rejected at every scale.
    draws = range_noise(SECRET, "count", scale, 0, N - 1)
    stat, critical = _chi_square(draws, scale * Fraction(11, 10))
    assert stat > critical, f"chi-square {stat:.1f} not above {critical:.1f}"


@pytest.mark.parametrize("scale", SCALES)
def test_executor_and_driver_samplers_agree(scale):
    # Two-sample chi-square on the pooled bins of both samples (homogeneity, 1e-4 critical value).
    executor = range_noise(SECRET, "count", scale, 0, N - 1)
    driver = discrete_laplace(RandomSource(seed=31), scale, N)
    edge = int(np.ceil(6 * float(scale)))  # beyond ±edge both tails are pooled
    def bins(d):
        return np.bincount(np.clip(d, -edge - 1, edge + 1) + edge + 1, minlength=2 * edge + 3)
    a, b = bins(executor), bins(driver)
    keep = (a + b) >= 20
    a = np.append(a[keep], a[~keep].sum())
    b = np.append(b[keep], b[~keep].sum())
    total = a + b
    nonzero = total > 0
    stat = chi2_statistic(a[nonzero], total[nonzero] / 2) + chi2_statistic(b[nonzero], total[nonzero] / 2)
    assert stat < chi2_critical(int(nonzero.sum()) - 1), f"chi-square {stat:.1f}"


def test_one_block_is_one_run_of_the_driver_sampler_on_the_keyed_stream():
    # The decision steps are the driver's exact integer sampler; only the bits differ.
    from dp_spark.core.vector_noise import block_key
    key = block_key(SECRET, "count", Fraction(3), 5)
    np.testing.assert_array_equal(block_noise(SECRET, "count", Fraction(3), 5),
                                  discrete_laplace(KeyedStream(key), Fraction(3), BLOCK_CELLS))
