"""The private choice of a per-user bound (dp_spark.algorithms.bound_selection): the loss against
a per-user brute force, the sensitivity the proof needs (docs/bound_selection.md) on random
neighbouring inputs, and the sampler's distribution against the exponential mechanism's."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.algorithms import bound_selection as bs
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities
from dp_spark.core.privacy import Budget

from tests.stats import chi2_critical, chi2_statistic

CANDIDATES = [1, 2, 5, 10, 20, 50]


def model(cells=1000, epsilon=Fraction(1), effective=Fraction(250), tables=1):
    return bs.ErrorModel.of([bs.TableNoise(cells, epsilon, effective)] * tables)


def per_user_loss(counts: list[int], bound: int, top: int) -> int:
    return sum(max(min(n, top) - bound, 0) for n in counts)


def histogram(counts: list[int]) -> dict[int, int]:
    values, users = np.unique(counts, return_counts=True)
    return {int(n): int(k) for n, k in zip(values, users)}


def test_the_loss_is_the_records_each_user_loses_capped_at_the_largest_candidate():
    counts = [1, 3, 3, 7, 12, 60, 400]
    loss = bs.truncation_loss(histogram(counts), CANDIDATES)
    assert loss == [per_user_loss(counts, b, 50) for b in CANDIDATES]
    assert loss[-1] == 0  # nobody loses anything at the largest candidate, after the cap


def test_the_score_is_minus_the_root_of_bias_squared_plus_noise_rounded_up():
    counts = [1, 3, 3, 7, 12, 60, 400]
    m = model(cells=200, epsilon=Fraction(1, 2), effective=Fraction(50), tables=2)
    assert m.bias_weight == Fraction(2, 50) and m.noise_per_unit == 2 * (2 * 200 * 4)
    for b, lost, score in zip(CANDIDATES, bs.truncation_loss(histogram(counts), CANDIDATES),
                              bs.quality(histogram(counts), CANDIDATES, m)):
        exact = math.sqrt(float(m.bias_weight) * lost ** 2 + float(m.noise_per_unit) * b ** 2)
        assert exact <= float(-score) < exact + 1 / bs.SCALE + 1e-9
        assert (-score * bs.SCALE).denominator == 1  # on the grid: exact rationals


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=40), st.integers(0, 1000), st.integers(1, 3),
       st.fractions(min_value=Fraction(1, 1000), max_value=10), st.fractions(min_value=1, max_value=10_000))
def test_adding_a_user_lowers_every_score_by_at_most_the_sensitivity(counts, added, tables, epsilon, effective):
    # The argument of the claim: every q(b) moves the same way (down), by at most Δq.
    m = model(cells=500, epsilon=epsilon, effective=effective, tables=tables)
    before = bs.quality(histogram(counts), CANDIDATES, m)
    after = bs.quality(histogram(counts + [added]), CANDIDATES, m)
    sensitivity = bs.quality_sensitivity(CANDIDATES, m)
    assert all(0 <= b - a <= sensitivity for b, a in zip(before, after))


def test_a_heavy_user_moves_the_smallest_candidate_by_nearly_the_whole_sensitivity():
    # Where the mechanism is weakest: no noise term, one user above b_K moves q(b_1) by √A·(b_K − b_1).
    m = bs.ErrorModel(Fraction(1, 4), Fraction(0))
    move = bs.quality({}, CANDIDATES, m)[0] - bs.quality({10_000: 1}, CANDIDATES, m)[0]
    assert move == Fraction(49, 2)
    assert move <= bs.quality_sensitivity(CANDIDATES, m) <= move + Fraction(2, bs.SCALE)


def test_without_the_cap_one_user_could_move_a_score_past_the_sensitivity():
    # Negative control: the cap at the largest candidate is what bounds a user's effect.
    m = bs.ErrorModel(Fraction(1), Fraction(0))
    uncapped_move = 10_000 - CANDIDATES[0]
    assert uncapped_move > bs.quality_sensitivity(CANDIDATES, m)
    assert -bs.quality({10_000: 1}, CANDIDATES, m)[0] == CANDIDATES[-1] - CANDIDATES[0]


def test_the_quality_trades_dropped_records_against_noise():
    # 1,000 users with 20 records: little noise favours keeping them all (b = 20); a lot of noise
    # (a small ε) favours b = 1.
    users = {20: 1000}
    cheap = bs.quality(users, CANDIDATES, model(cells=100, epsilon=Fraction(10)))
    dear = bs.quality(users, CANDIDATES, model(cells=100_000, epsilon=Fraction(1, 100)))
    assert CANDIDATES[int(np.argmax(cheap))] == 20
    assert CANDIDATES[int(np.argmax(dear))] == 1


def test_the_choice_follows_the_exponential_mechanism_and_is_paid_for():
    users = {1: 500, 4: 300, 15: 120, 80: 30}
    m, epsilon = model(cells=50, epsilon=Fraction(1, 10), effective=Fraction(10)), Fraction(1, 10)
    scores = bs.quality(users, CANDIDATES, m)
    expected = exponential_probabilities(scores, epsilon, bs.quality_sensitivity(CANDIDATES, m), monotone=True)
    assert max(expected) < 0.9  # a spread-out distribution, so the test sees more than one candidate
    rng = RandomSource(30)
    draws = []
    for _ in range(4000):
        budget = Budget(epsilon)
        draws.append(bs.choose_bound(users, CANDIDATES, m, epsilon, budget, rng))
        assert budget.spent == epsilon and budget.entries[0].step == "bound"
    observed = np.array([draws.count(b) for b in CANDIDATES])
    wanted = np.asarray(expected, dtype=float) * len(draws)
    kept = wanted >= 5  # the chi-square approximation needs expected counts of 5 or more
    # Fixed seed; the critical value is the one-sided 1e-4 quantile (tests/stats.py).
    assert chi2_statistic(observed[kept], wanted[kept]) < chi2_critical(int(kept.sum()) - 1)
    assert observed[~kept].sum() <= max(5, 3 * wanted[~kept].sum())


@pytest.mark.parametrize("candidates", [[], [0, 1], [3, 3], [5, 2], [1.5, 2], [True, 2]])
def test_bad_candidates_are_refused(candidates):
    with pytest.raises(ValueError):
        bs.candidates_checked(candidates)


@pytest.mark.parametrize("cells, epsilon, effective", [(0, 1, 1), (10, 0, 1), (10, 1, 0), (True, 1, 1)])
def test_bad_tables_are_refused(cells, epsilon, effective):
    with pytest.raises(ValueError):
        bs.TableNoise(cells, Fraction(epsilon), Fraction(effective))
