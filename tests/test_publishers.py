"""Publishers: exact small cases with the noise switched off, ledgers, and noise scales.

``zero_noise`` replaces the discrete Laplace samplers that the budget draws
from (tests only), so what is left is the deterministic part of each
algorithm, checked against hand-worked or brute-force results.
"""

import math
from fractions import Fraction

import numpy as np
import pytest

from dp_spark import publishers
from dp_spark.core import mechanisms
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource, discrete_laplace_variance
from dp_spark.publishers import ahp, alpa, dpa_ahp, fourier, grouping


@pytest.fixture
def zero_noise(monkeypatch):
    # Publishers draw only through the budget, which calls these two samplers.
    monkeypatch.setattr(mechanisms, "discrete_laplace", lambda rng, scale, size: np.zeros(size, dtype=np.int64))
    monkeypatch.setattr(mechanisms, "discrete_laplace_each",
                        lambda rng, scales: np.zeros(len(scales), dtype=np.int64))


def reference_clusters(z, noise_term):
    """specification §5.1 step 4 written out literally (1-based, direct means, no shortcuts)."""
    n = len(z)
    zz = [None, *map(float, z)]  # 1-based

    def mean(a, b):
        return sum(zz[a:b + 1]) / (b - a + 1)

    def err(a, b):
        m = mean(a, b)
        return sum((zz[i] - m) ** 2 for i in range(a, b + 1)) + noise_term / (b - a + 1)

    def look(j):
        def first(l):
            return (zz[j] - mean(j, l)) ** 2

        def second(l):
            return noise_term / (l - j + 1) ** 2

        best = first(j) + second(j)
        for l in range(j + 1, n + 1):
            if first(l) - first(l - 1) >= second(l - 1) - noise_term / (n - j + 2) ** 2:
                break
            best = min(best, first(l) + second(l))
        return best

    blocks, a, cur = [], 1, err(1, 1)
    for j in range(2, n + 1):
        if err(a, j) >= cur + look(j):
            blocks.append((a - 1, j - 1))
            a, cur = j, err(j, j)
        else:
            cur = err(a, j)
    blocks.append((a - 1, n))
    return blocks


def test_ahp_clusters_a_hand_worked_vector():
    # Three plateaus far apart compared with the noise term: one cluster each.
    z = np.array([0, 0, 0, 10, 10, 10, 50, 50], dtype=float)
    assert ahp.clusters(z, noise_term=1.0) == [(0, 3), (3, 6), (6, 8)]
    # With phase-2 noise far larger than the spread, one cluster is cheapest.
    assert ahp.clusters(z, noise_term=1e6) == [(0, 8)]


@pytest.mark.parametrize("seed", range(6))
def test_ahp_clusters_match_the_literal_specification(seed):
    rng = np.random.default_rng(seed)
    z = np.sort(np.concatenate([np.zeros(rng.integers(0, 15)), rng.exponential(30, size=rng.integers(1, 40))]))
    noise_term = float(rng.choice([2.0, 88.9, 2000.0]))
    assert ahp.clusters(z, noise_term) == reference_clusters(z, noise_term)


def test_ahp_without_noise_publishes_cluster_means_of_the_true_counts(zero_noise):
    counts = np.array([100, 0, 3, 100, 0, 3, 40], dtype=np.int64)
    released = ahp.publish(counts, 1, Fraction(1), Budget(10), RandomSource(0), "h")
    # Phase 1 without noise is the counts themselves, with values at or below η·ln(n)/ε1 zeroed.
    limit = ahp.ETA * math.log(7) / 0.85
    phase1 = np.where(counts <= limit, 0, counts).astype(float)
    order = np.argsort(phase1, kind="stable")
    expected = np.empty(7)
    for a, b in ahp.clusters(phase1[order], 2 / 0.15**2):
        expected[order[a:b]] = counts[order[a:b]].mean()
    np.testing.assert_allclose(released.values, expected)
    assert [e.epsilon for e in released.entries] == [Fraction(17, 20), Fraction(3, 20)]


def test_fourier_reconstructs_a_known_signal_without_noise(zero_noise):
    t = np.arange(64)
    signal = np.round(100 + 50 * np.cos(2 * np.pi * 3 * t / 64)).astype(np.int64)
    released = fourier.publish(signal, 1, Fraction(1), Budget(10), RandomSource(0), "f", k=5)
    # irfft keeps the cosine's full amplitude; only the rounding of the input and the grid remain.
    smooth = 100 + 50 * np.cos(2 * np.pi * 3 * t / 64)
    assert np.max(np.abs(released.values - smooth)) < 0.6
    assert np.ptp(released.values) == pytest.approx(100, abs=1.2)


def test_fourier_sensitivity_covers_sqrt_2k_times_l2():
    for k, l2_squared in [(1, 1), (5, 100), (889, 100), (13, 7)]:
        steps = fourier.grid_sensitivity(k, l2_squared, 10)
        exact = math.sqrt(2 * k * l2_squared) * 2**10
        assert exact + 2 * k <= steps < exact + 2 * k + 1
    released = fourier.publish(np.arange(100, dtype=np.int64), 10, Fraction(1, 2), Budget(10), RandomSource(1), "f",
                               k=5)
    (entry,) = released.entries
    assert entry.sensitivity >= math.sqrt(2 * 5) * 10  # Δ2 = Δ = 10 (all records on one item)
    assert entry.noise_scale == entry.sensitivity * 2  # scale = sensitivity / ε
    distinct = fourier.publish(np.arange(100, dtype=np.int64), 10, Fraction(1, 2), Budget(10), RandomSource(1), "f",
                               k=5, distinct_cells=True)
    assert distinct.entries[0].sensitivity < entry.sensitivity  # Δ2 = √10 for distinct items


def test_alpa_without_noise_gives_every_cell_the_mean(zero_noise):
    counts = np.array([[1, 2], [3, 10]], dtype=np.int64)
    released = alpa.publish(counts, 3, Fraction(1), Budget(10), RandomSource(0), "a")
    np.testing.assert_array_equal(released.values, np.full((2, 2), 4.0))
    assert released.entries[0].cells == 1 and released.entries[0].noise_scale == 3


@pytest.mark.long
def test_alpa_noise_on_the_total_has_the_discrete_laplace_variance():
    rng = RandomSource(7)
    counts = np.zeros(4, dtype=np.int64)
    totals = np.array([alpa.publish(counts, 2, Fraction(1), Budget(10), rng, "a").values.sum() for _ in range(4000)])
    expected = discrete_laplace_variance(2)
    # The sample variance of 4000 draws is within 10% of the truth with high probability (kurtosis 6).
    assert totals.var() == pytest.approx(expected, rel=0.12)


def test_grouping_without_noise_smooths_over_groups_ordered_by_the_sample(zero_noise):
    counts = np.array([50, 1, 52, 2, 48, 0, 3, 51], dtype=np.int64)
    sampled = np.array([5, 0, 5, 0, 5, 0, 0, 5], dtype=np.int64)
    released = grouping.publish(counts, 4, Fraction(2), Budget(10), RandomSource(0), "g", sampled=sampled)
    big = released.values[[0, 2, 4, 7]]
    small = released.values[[1, 3, 5, 6]]
    # Each group holds cells of one kind only, and each cell gets its group's mean.
    assert big.min() > 40 and small.max() < 5
    assert released.values.sum() == pytest.approx(counts.sum())
    order_entry, sums_entry = released.entries
    assert order_entry.sensitivity == 1 and sums_entry.sensitivity == 4
    assert order_entry.epsilon + sums_entry.epsilon == 2


def test_grouping_candidate_sizes():
    assert grouping.candidate_sizes(10, 3) == [1, 2, 3, 4, 8]
    assert grouping.candidate_sizes(4, 30) == [1, 2, 4]


def test_dpa_ahp_weights_and_budgets():
    v = dpa_ahp.weights(7, Fraction(1, 10))
    assert sum(v) == 7 * 4  # Σ v = n⌈n/2⌉
    assert v[0] > v[-1] > 0 and v == sorted(v, reverse=True)
    assert all(w == 4 for w in dpa_ahp.weights(7, Fraction(0)))  # δ = 0 is AHP


def test_corrected_dpa_ahp_never_gives_a_bin_more_than_epsilon_1():
    counts = np.random.default_rng(0).poisson(20, 50).astype(np.int64)
    released = dpa_ahp.publish(counts, 2, Fraction(1), Budget(10), RandomSource(3), "d", delta=Fraction(1, 10))
    ranking, first, second = released.entries
    assert ranking.epsilon + first.epsilon + second.epsilon == 1
    # The smallest scale (largest per-bin budget) is exactly Δ/ε1: the first pass is ε1-DP.
    assert first.noise_scale == Fraction(2) / first.epsilon
    assert not any(e.not_private for e in released.entries)


def test_dpa_ahp_as_published_is_marked_not_private():
    counts = np.random.default_rng(0).poisson(20, 50).astype(np.int64)
    released = dpa_ahp.publish(counts, 1, Fraction(1), Budget(10), RandomSource(3), "d", delta=Fraction(1, 10),
                               reproduce_paper=True)
    first = released.entries[0]
    assert first.not_private and "ranked by their true counts" in first.not_private
    # Its largest per-bin budget exceeds the claimed ε1 (flaw (1) of §5.2): (1 + (n−1)δ/(2⌈n/2⌉))·ε1.
    assert first.noise_scale < 1 / first.epsilon
    assert float(1 / first.noise_scale) == pytest.approx(float(first.epsilon) * (1 + 49 * 0.1 / 50))


def test_sdpa_is_dpa_with_delta_one():
    counts = np.arange(30, dtype=np.int64)
    a = publishers.publish("sdpa_ahp", counts, 1, Fraction(1), Budget(10), RandomSource(5), "s")
    b = publishers.publish("dpa_ahp", counts, 1, Fraction(1), Budget(10), RandomSource(5), "s", delta=Fraction(1))
    np.testing.assert_array_equal(a.values, b.values)


@pytest.mark.parametrize("name", sorted(publishers.PUBLISHERS))
def test_every_publisher_spends_exactly_epsilon_and_keeps_the_shape(name):
    counts = np.random.default_rng(1).poisson(5, (40, 3)).astype(np.int64)
    options = {"sampled": (counts > 5).astype(np.int64)} if name == "grouping" else {}
    budget = Budget(1)
    released = publishers.publish(name, counts, 3, Fraction(7, 10), budget, RandomSource(2), "x", **options)
    assert released.values.shape == counts.shape
    assert sum(e.epsilon for e in released.entries) == Fraction(7, 10)
    assert budget.entries == list(released.entries)  # what it reports is what it spent
    assert all(e.noise_scale * e.epsilon >= e.sensitivity or e.not_private for e in released.entries)


def test_publish_refuses_unknown_names_and_options():
    counts = np.ones(4, dtype=np.int64)
    with pytest.raises(ValueError, match="unknown publisher 'gauss'"):
        publishers.publish("gauss", counts, 1, Fraction(1), Budget(10), RandomSource(0), "x")
    with pytest.raises(ValueError, match="takes no option k"):
        publishers.publish("ahp", counts, 1, Fraction(1), Budget(10), RandomSource(0), "x", k=3)
    with pytest.raises(ValueError, match="empty"):
        publishers.publish("laplace", np.array([], dtype=np.int64), 1, Fraction(1), Budget(10), RandomSource(0), "x")
    with pytest.raises(ValueError, match="delta must be between 0 and 1"):
        publishers.publish("dpa_ahp", counts, 1, Fraction(1), Budget(10), RandomSource(0), "x", delta=Fraction(3, 2))


@pytest.mark.parametrize("name", sorted(publishers.PUBLISHERS))
def test_each_publisher_has_the_publisher_signature(name):
    """The Publisher protocol's six parameters come first, in its order; the publisher's own
    options follow as keywords, each the registry lists and each with a default but grouping's
    one-record-per-user sample, which the release passes."""
    import inspect

    from dp_spark.publishers.interface import Publisher

    function, options = publishers.PUBLISHERS[name]
    shared = [p for p in inspect.signature(Publisher.__call__).parameters if p != "self"]
    parameters = list(inspect.signature(function).parameters.values())
    assert [p.name for p in parameters[:len(shared)]] == shared
    own = parameters[len(shared):]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in own)
    assert set(options) <= {p.name for p in own} | {"delta"}
    assert [p.name for p in own if p.default is inspect.Parameter.empty] in ([], ["sampled"])


def test_the_signature_check_catches_a_publisher_out_of_order(monkeypatch):
    def publish(counts, epsilon, sensitivity, budget, rng, step):
        raise AssertionError("never called")

    monkeypatch.setitem(publishers.PUBLISHERS, "swapped", (publish, ()))
    with pytest.raises(AssertionError):
        test_each_publisher_has_the_publisher_signature("swapped")
