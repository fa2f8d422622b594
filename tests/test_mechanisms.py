"""The exact samplers: distributions match their targets (fixed seeds, stated tolerances)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.core import mechanisms
from dp_spark.core.mechanisms import (
    RandomSource,
    bernoulli_exp_minus,
    bernoulli_exp_minus_fraction,
    discrete_laplace,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    exponential_exponents,
    exponential_mechanism,
    exponential_mechanism_rows,
    exponential_probabilities,
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


def _below_one_batch_at_a_time(rng, bounds):
    """The rejection loop without a fast path: every pending entry takes a new word per round."""
    reject_under = (np.iinfo(np.uint64).max - bounds + np.uint64(1)) % bounds
    out = np.empty(bounds.size, dtype=np.uint64)
    pending = np.arange(bounds.size)
    while pending.size:
        w = rng.words(pending.size)
        ok = w >= reject_under[pending]
        out[pending[ok]] = w[ok] % bounds[pending[ok]]
        pending = pending[~ok]
    return out


@pytest.mark.parametrize("big_share", [0.0, 0.5])
def test_below_uses_the_words_of_the_plain_rejection_loop(big_share):
    # A bound just above 2^63 rejects almost half of all words, so the second case takes the slow path;
    # either way a seed must give the same draws as before (the docs' seeded results depend on it).
    picks = np.random.default_rng(4).random(5_000) < big_share
    bounds = np.where(picks, np.uint64((1 << 63) + 12345), np.uint64(1000))
    fast = RandomSource(seed=21).below(bounds)
    plain = _below_one_batch_at_a_time(RandomSource(seed=21), bounds)
    assert np.array_equal(fast, plain)


def test_os_words_are_fresh_across_refills_of_the_pool():
    rng = RandomSource()
    sizes = [3, 70_000, 65_536, 1, 90_000]
    chunks = [rng.words(n) for n in sizes]
    assert [c.size for c in chunks] == sizes
    words = np.concatenate(chunks)
    assert np.unique(words).size == words.size  # a repeat would mean a word served twice
    ones = np.unpackbits(words.view(np.uint8)).mean()
    bits = words.size * 64
    assert abs(ones - 0.5) < 5 * np.sqrt(0.25 / bits)


def test_a_copied_source_does_not_reuse_its_pool():
    import pickle

    rng = RandomSource()
    rng.words(10)  # fills the pool
    copy = pickle.loads(pickle.dumps(rng))
    assert not np.array_equal(rng.words(1000), copy.words(1000))


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


# ---------------------------------------------------------------------------
# Uniform integers of any size, exact Bernoulli(exp(-x)) for any rational x, and the exact
# exponential mechanism built from them.


def test_below_int_is_uniform_for_small_and_huge_bounds():
    rng = RandomSource(seed=31)
    small = [rng.below_int(7) for _ in range(35_000)]
    assert max(small) < 7 and min(small) >= 0
    assert chi2_statistic(np.bincount(small, minlength=7), np.full(7, 5_000)) < chi2_critical(6)
    # A bound of 72 bits (two words per try) just above a power of two: half the tries are rejected.
    huge = 3 * 2**70 + 1
    draws = [rng.below_int(huge) for _ in range(30_000)]
    assert max(draws) < huge and min(draws) >= 0
    sixths = np.bincount([6 * d // huge for d in draws], minlength=6)  # six equal-width bins
    assert chi2_statistic(sixths, np.full(6, 5_000)) < chi2_critical(5)
    edge = 2**64 + 1  # 65 bits: values above 2^64 come up only if the second word is used
    assert max(rng.below_int(edge) for _ in range(200)) < edge
    assert rng.below_int(1) == 0


def test_below_int_reads_the_low_bits_of_whole_words():
    """Two words per try for a 72-bit bound, kept when below the bound: the draw can be rebuilt
    from the same seeded stream (so no bit is lost or reused)."""
    bound = 3 * 2**70 + 1
    drawn = [RandomSource(seed=8).below_int(bound)]
    words = RandomSource(seed=8).words(200)
    rebuilt = None
    for i in range(0, 200, 2):
        value = (int(words[i]) | int(words[i + 1]) << 64) & (2**72 - 1)
        if value < bound:
            rebuilt = value
            break
    assert drawn == [rebuilt]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_below_int_refuses_bad_bounds(bad):
    with pytest.raises(ValueError):
        RandomSource(seed=1).below_int(bad)


@pytest.mark.parametrize("x", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(2.1),
                               Fraction(7)])
def test_bernoulli_exp_minus_fraction_frequencies(x):
    """Exact for every rational x ≥ 0 (the whole part as ⌊x⌋ draws of Bernoulli(e^-1)); 2.1 is the
    double 2.1, whose denominator is 2^51. 60,000 draws; 5 standard errors."""
    n = 60_000
    rng = RandomSource(seed=13)
    hits = sum(bernoulli_exp_minus_fraction(rng, x) for _ in range(n)) / n
    p = math.exp(-x)
    assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12, (x, hits, p)


def _pooled_chi_square(draws: np.ndarray, probabilities: np.ndarray) -> tuple[float, int]:
    """Chi-square of the draws against the probabilities, candidates with an expected count
    under 5 pooled into one bin; returns (statistic, degrees of freedom)."""
    expected = probabilities * draws.size
    observed = np.bincount(draws, minlength=probabilities.size).astype(float)
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    return chi2_statistic(obs[keep], exp[keep]), int(keep.sum()) - 1


EXPONENTIAL_CASES = {
    "small scores": (np.array([0.0, -1.0, -2.5, -0.5, -4.0, -10.0]), Fraction(1), 1.0, False),
    "scores in the millions": (-3e6 - np.array([0.0, 0.5, 2.0, 3.25, 7.0, 40.0]), Fraction(1, 2), 0.25, False),
    "ties": (np.array([5.0, 5.0, 5.0, 1.0, 5.0 - 1e-9]), Fraction(1), 1.0, False),
    "monotone": (-0.7 * np.arange(20.0), Fraction(1), 1.0, True),
    "Fraction scores": ([Fraction(-k, 3) for k in range(9)], Fraction(3, 2), Fraction(1, 2), True),
}


@pytest.mark.long
@pytest.mark.parametrize("case", list(EXPONENTIAL_CASES))
def test_exponential_mechanism_matches_its_probabilities(case):
    """8,000 draws per case at a fixed seed; chi-square below its 1e-4 critical value."""
    scores, epsilon, sensitivity, monotone = EXPONENTIAL_CASES[case]
    rng = RandomSource(seed=17)
    draws = np.array([exponential_mechanism(rng, scores, epsilon, sensitivity, monotone) for _ in range(8_000)])
    probabilities = exponential_probabilities(np.array([float(s) for s in scores]), epsilon, float(sensitivity),
                                              monotone)
    stat, df = _pooled_chi_square(draws, probabilities)
    assert df >= 2 and stat < chi2_critical(df), f"chi-square {stat:.1f} with {df} df"


# Rows of whole-number scores: rows whose best differs, ties, a gap of 40 (x = 10 at c = 1/4), and
# one constant row (uniform).
ROW_SCORES = np.array([[0, -1, -3, -8], [7, 7, 2, 7], [-100, -140, -100, -101], [4, 4, 4, 4]])


@pytest.mark.parametrize("epsilon, sensitivity, monotone", [(Fraction(1, 2), 1, False), (Fraction(1), 2, True),
                                                            (Fraction(3, 7), Fraction(5, 3), False)])
def test_each_row_of_the_rows_sampler_matches_its_probabilities(epsilon, sensitivity, monotone):
    """Each of the four rows repeated 4,000 times in one call (fixed seed): every row's draws
    follow exponential_probabilities of that row; chi-square below its 1e-4 critical value."""
    repeats = 4_000
    draws = exponential_mechanism_rows(RandomSource(seed=23), np.repeat(ROW_SCORES, repeats, axis=0), epsilon,
                                       sensitivity, monotone).reshape(len(ROW_SCORES), repeats)
    for row, chosen in zip(ROW_SCORES, draws):
        probabilities = exponential_probabilities(row.astype(float), epsilon, float(sensitivity), monotone)
        stat, df = _pooled_chi_square(chosen, probabilities)
        assert df == 0 or stat < chi2_critical(df), f"row {row}: chi-square {stat:.1f} with {df} df"
        assert set(np.unique(chosen)) <= set(np.flatnonzero(probabilities > 1e-12))


def test_rows_too_long_for_words_are_drawn_one_by_one_with_the_same_law():
    """A gap of 2^62 at c = 1/2 does not fit 64-bit words: those rows go to exponential_mechanism,
    which never picks the candidate exp(−2^61) below the best."""
    scores = np.array([[0, -(1 << 62)], [0, 0]] * 200)
    chosen = exponential_mechanism_rows(RandomSource(seed=3), scores, 1, 1).reshape(200, 2)
    assert (chosen[:, 0] == 0).all()
    assert 60 < chosen[:, 1].sum() < 140  # the tied row: uniform over its two candidates


@pytest.mark.parametrize("bad", [np.array([0, 1]), np.zeros((2, 0), dtype=int), np.array([[0.5, 1.0]])])
def test_the_rows_sampler_takes_a_matrix_of_whole_numbers(bad):
    with pytest.raises(ValueError, match="matrix of whole numbers"):
        exponential_mechanism_rows(RandomSource(seed=1), bad, 1, 1)


def test_exponential_exponents_are_exact_rationals():
    """x_i = c·(q* − q_i) computed without rounding: for a double q its exact value is taken."""
    q = -(1e6 + 0.1)  # not a short decimal: its exact value has denominator 2^33
    numerators, denominator = exponential_exponents(np.array([0.0, q, 0.0]), Fraction(1, 10), 3.0)
    assert [Fraction(n, denominator) for n in numerators] == [0, Fraction(1, 10) / 6 * -Fraction(q), 0]
    # The float product differs from the exact value: the old mechanism's exponents rounded.
    assert Fraction(0.1 / 6 * -q) != Fraction(1, 10) / 6 * -Fraction(q)
    # Monotone drops the factor 2; Fraction scores, ε and Δq are taken as they are.
    numerators, denominator = exponential_exponents([Fraction(1, 3), Fraction(-2, 7)], Fraction(2, 5),
                                                    Fraction(4, 9), monotone=True)
    assert [Fraction(n, denominator) for n in numerators] == [0, Fraction(2, 5) / Fraction(4, 9) * Fraction(13, 21)]


@pytest.mark.parametrize("bad", [np.array([]), np.array([0.0, np.inf]), np.array([np.nan]), np.zeros((2, 2))])
def test_exponential_mechanism_refuses_bad_scores(bad):
    with pytest.raises(ValueError):
        exponential_mechanism(RandomSource(seed=1), bad, 1.0, 1.0)


def test_each_try_is_kept_with_the_exact_exponent(monkeypatch):
    """Spy on the two exact Bernoullis a try goes through: the whole part ⌊x_i⌋ and the
    fraction x_i − ⌊x_i⌋ they receive rebuild x_i exactly, for x_i = 2.5000000000000004,
    a double just above 2.5 (this fails on the inverse-CDF sampler, which has no such step)."""
    x = Fraction(2.5000000000000004)
    wholes_seen, fractions_seen = [], []
    survive, keep = mechanisms._survive_whole_parts, mechanisms._bernoulli_exp_minus_ratio

    def spy_survive(rng, wholes):
        wholes_seen.extend(wholes.tolist())
        return survive(rng, wholes)

    def spy_keep(rng, num, den):
        fractions_seen.append(Fraction(num, den))
        return keep(rng, num, den)

    monkeypatch.setattr(mechanisms, "_survive_whole_parts", spy_survive)
    monkeypatch.setattr(mechanisms, "_bernoulli_exp_minus_ratio", spy_keep)
    rng = RandomSource(seed=23)
    for _ in range(200):
        exponential_mechanism(rng, [0.0, -float(x)], 1, 1, monotone=True)  # c = 1: x_1 = x exactly
    assert set(wholes_seen) == {0, 2}
    assert set(fractions_seen) == {0, x - 2}


def _old_inverse_cdf(scores, epsilon, sensitivity, uniform):
    """NEGATIVE CONTROL: the sampler this module used before (inverse CDF in doubles)."""
    cumulative = np.cumsum(exponential_probabilities(scores, epsilon, sensitivity))
    return min(int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right")), cumulative.size - 1)


def test_the_old_float_sampler_never_returns_a_candidate_of_probability_1e_20():
    """Scores [0, −92], ε = Δq = 1: candidate 1 has probability e^-46/(1 + e^-46) ≈ 1.05e-20.
    In doubles its cumulative sum is 1 + 1e-20 = 1, so even the largest 53-bit uniform
    (1 − 2^-53) lands on candidate 0: the old sampler gave it probability exactly 0, and a
    neighbour with a higher score for it could be told apart with certainty. The exact
    sampler keeps a try of candidate 1 with probability exp(−46), x_1 = 46 exactly."""
    scores = np.array([0.0, -92.0])
    assert exponential_probabilities(scores, 1.0, 1.0)[1] == pytest.approx(math.exp(-46), rel=1e-9)
    largest_uniform = (2**53 - 1) / 2**53
    assert _old_inverse_cdf(scores, 1.0, 1.0, largest_uniform) == 0
    assert np.cumsum(exponential_probabilities(scores, 1.0, 1.0))[0] == 1.0
    numerators, denominator = exponential_exponents(scores, Fraction(1), 1.0)
    assert Fraction(numerators[1], denominator) == 46
