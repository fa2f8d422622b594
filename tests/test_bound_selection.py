"""The private choice of a per-user bound (dp_spark.algorithms.bound_selection): the loss against
a per-user brute force, the sensitivity the proof needs (docs/bound_selection.md) on random
neighbouring inputs, and the sampler's distribution against the exponential mechanism's."""

from __future__ import annotations

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


def per_user_loss(counts: list[int], bound: int, top: int) -> int:
    return sum(max(min(n, top) - bound, 0) for n in counts)


def histogram(counts: list[int]) -> dict[int, int]:
    values, users = np.unique(counts, return_counts=True)
    return {int(n): int(k) for n, k in zip(values, users)}


def test_the_loss_is_the_records_each_user_loses_capped_at_the_largest_candidate():
    counts = [1, 3, 3, 7, 12, 60, 400]
    loss = bs.truncation_loss(histogram(counts), CANDIDATES)
    assert loss.tolist() == [per_user_loss(counts, b, 50) for b in CANDIDATES]
    assert loss[-1] == 0  # nobody loses anything at the largest candidate, after the cap


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=40), st.integers(0, 1000), st.integers(1, 3),
       st.fractions(min_value=0, max_value=10_000))
def test_adding_a_user_lowers_every_score_by_at_most_the_sensitivity(counts, added, tables, per_unit):
    # The argument of the claim: every q(b) moves the same way (down), by at most Δq.
    before = bs.quality(histogram(counts), CANDIDATES, per_unit, tables)
    after = bs.quality(histogram(counts + [added]), CANDIDATES, per_unit, tables)
    moves = [b - a for b, a in zip(before, after)]
    assert all(0 <= move <= bs.quality_sensitivity(CANDIDATES, tables) for move in moves)


def test_without_the_cap_one_user_could_move_a_score_past_the_sensitivity():
    # Negative control: the cap at the largest candidate is what bounds a user's effect.
    heavy = {10_000: 1}
    uncapped_move = 10_000 - CANDIDATES[0]
    assert uncapped_move > bs.quality_sensitivity(CANDIDATES)
    assert -bs.quality(heavy, CANDIDATES, Fraction(0))[0] == CANDIDATES[-1] - CANDIDATES[0]


def test_the_quality_trades_dropped_records_against_noise():
    # 1,000 users with 20 records: little noise per unit favours keeping them all (b = 20); a lot
    # of noise per unit favours b = 1.
    users = {20: 1000}
    cheap = bs.quality(users, CANDIDATES, Fraction(1))
    dear = bs.quality(users, CANDIDATES, Fraction(10**6))
    assert CANDIDATES[int(np.argmax(cheap))] == 20
    assert CANDIDATES[int(np.argmax(dear))] == 1


def test_the_choice_follows_the_exponential_mechanism_and_is_paid_for():
    users = {1: 500, 4: 300, 15: 120, 80: 30}
    per_unit, epsilon = Fraction(400), Fraction(1, 10)
    scores = bs.quality(users, CANDIDATES, per_unit)
    expected = exponential_probabilities(scores, epsilon, bs.quality_sensitivity(CANDIDATES), monotone=True)
    rng = RandomSource(30)
    draws = []
    for _ in range(4000):
        budget = Budget(epsilon)
        draws.append(bs.choose_bound(users, CANDIDATES, per_unit, epsilon, budget, rng))
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
