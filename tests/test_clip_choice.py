"""The private choice of the means' clipping range (release.clip_choice), pure: the quality's
zero at the grid-rounded quantile and its sensitivity under one added value, the tail q, what the
ledger is charged, and the choice on real ratings and across ε."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.core import zcdp
from dp_spark.core.accounting import Accounting
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.release import clip_choice as cc
from tests.conftest import examples, shared_data

GRID = (0.0, 1.0, 2.0, 3.0, 5.0)


def ranks(values, candidates=GRID):
    v = np.asarray(values, dtype=float)
    return np.array([(v < b).sum() for b in candidates]), np.array([(v <= b).sum() for b in candidates]), v.size


def side_scores(values, side: str, q: Fraction, candidates=GRID) -> list[Fraction]:
    below, at_most, n = ranks(values, candidates)
    lower, upper = cc.rounded_ranks(below, at_most, n, side)
    return cc.quantile_scores(lower, upper, n, q if side == "low" else 1 - q)


def test_the_candidate_just_below_the_low_quantile_and_just_above_the_high_one_score_zero():
    values = [1.5] * 10 + [2.5] * 80 + [4.0] * 10  # no candidate sits on a quantile
    q = Fraction(1, 20)
    low, high = side_scores(values, "low", q), side_scores(values, "high", q)
    assert [i for i, s in enumerate(low) if s == 0] == [1]  # 1.0: below the 5% quantile 1.5
    assert [i for i, s in enumerate(high) if s == 0] == [4]  # 5.0: above the 95% quantile 4.0
    assert all(s < 0 for i, s in enumerate(low) if i != 1) and all(s < 0 for s in high[:4])


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0]), max_size=30),
       st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.5, 5.0, 6.0]),
       st.sampled_from([Fraction(1, 100), Fraction(1, 10), Fraction(1, 4)]), st.sampled_from(["low", "high"]))
def test_one_added_value_moves_every_score_by_at_most_the_stated_sensitivity(values, added, q, side):
    """Values on and between the candidates, and beyond them; n as small as zero."""
    before, after = side_scores(values, side, q), side_scores(values + [added], side, q)
    assert max(abs(a - b) for a, b in zip(before, after)) <= max(q, 1 - q)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0]), max_size=30),
       st.sampled_from([-1.0, 0.0, 0.5, 2.5, 5.0, 6.0]), st.sampled_from(["low", "high"]),
       st.integers(1, len(GRID) - 1))
def test_the_sensitivity_holds_on_each_sides_own_candidates(values, added, side, cut):
    """A side rounds to the candidates it may pick (below a given high, above the chosen low)."""
    q = Fraction(1, 10)
    room = list(GRID[:cut]) if side == "low" else list(GRID[cut:])
    before, after = side_scores(values, side, q, room), side_scores(values + [added], side, q, room)
    assert max(abs(a - b) for a, b in zip(before, after)) <= max(q, 1 - q)
    assert not values or max(before) == 0  # every rounded value is a candidate: some candidate is a quantile


@pytest.mark.parametrize("values, low, high, expected", [
    ([3.0] * 100_000, None, None, (3.0, 4.0)),  # a constant: the candidates around it
    ([1.0] * 99_500 + [0.0] * 500, None, None, (1.0, 1.5)),  # flags, nearly all 1
    ([5.0] * 100_000, None, 5.0, (4.0, 5.0)),  # high given, every value on it
    ([1e12] * 100_000, None, None, (6e8, 8e8)),  # beyond every candidate: clamped to the largest
])
def test_values_on_one_candidate_or_beyond_them_give_a_narrow_range(values, low, high, expected):
    """Negative control for a review's finding: rounded over the whole grid, values all on the
    chosen low left every higher candidate a tail short, and high fell up to 8·10^8."""
    below, at_most, n = ranks(values, cc.DEFAULT_CANDIDATES)
    picked = [cc.choose_clip(cc.DEFAULT_CANDIDATES, below, at_most, n, low, high, Fraction(1, 10), Budget(1),
                             RandomSource(seed)) for seed in range(10)]
    assert {(c.low, c.high) for c in picked} == {expected}


def test_the_sensitivity_is_reached():
    """Not an over-generous bound: some pair moves a score by the whole max(q, 1 − q)."""
    q = Fraction(1, 10)
    before, after = side_scores([2.5] * 9, "low", q), side_scores([2.5] * 9 + [-1.0], "low", q)
    assert max(abs(a - b) for a, b in zip(before, after)) == 1 - q


def test_the_tail_shrinks_with_the_users_and_stays_in_its_range():
    at = Fraction(9, 200)  # each side's ε at ε = 1: a tenth for the choice, 9/20 of that each
    tails = [cc.tail_share(n, at, 177) for n in (-5, 0, 10, 3_000, 30_000, 10**6)]
    assert tails[0] == tails[1] == tails[2] == cc.TAIL_MOST
    assert cc.TAIL_LEAST < tails[4] < tails[3] < cc.TAIL_MOST and tails[5] == cc.TAIL_LEAST
    # The formula: 2 (ln K + ln 1/β)/(ε N̂), rounded up to the grid.
    assert float(tails[3]) == pytest.approx(2 * (np.log(177) + np.log(100)) / (0.045 * 3000), abs=1e-3)


@pytest.mark.parametrize("zcdp_accounting", [False, True])
@pytest.mark.parametrize("low, high", [(None, None), (0.0, None), (None, 5.0)])
def test_the_ledger_pays_the_count_and_each_chosen_side_within_the_part(zcdp_accounting, low, high):
    epsilon = Fraction(1, 10)
    budget = Budget(epsilon, accounting=Accounting("gaussian", zcdp.pure_cost(epsilon), 1e-6)) if zcdp_accounting \
        else Budget(epsilon)
    below, at_most, n = ranks([1.5, 2.5, 2.5, 4.0] * 50)
    choice = cc.choose_clip(GRID, below, at_most, n, low, high, epsilon, budget, RandomSource(1))
    steps = [e.step for e in budget.entries]
    expected = ["choose clip: users"] + (["choose low"] if low is None else []) + (["choose high"] if high is None
                                                                                    else [])
    assert steps == expected
    assert choice.low < choice.high and (low is None or choice.low == low) and (high is None or choice.high == high)
    if zcdp_accounting:
        assert budget.rho_spent <= zcdp.pure_cost(epsilon)
        assert all(e.bounded_range for e in budget.entries[1:])
    else:
        assert budget.spent == epsilon


def test_the_count_noise_and_the_tail_are_in_the_chosen_json():
    below, at_most, n = ranks([2.5] * 40)
    choice = cc.choose_clip(GRID, below, at_most, n, None, None, Fraction(1), Budget(1), RandomSource(2))
    assert set(choice.to_json()) == {"low", "high", "clip_users_noisy", "clip_tail"}
    assert choice.to_json()["clip_tail"] == float(choice.tail)


def test_bad_input_is_refused():
    for bad in ([1.0], [2.0, 1.0], [1.0, 1.0], [0.0, float("inf")], [0.0, "1"], [0.0, True]):
        with pytest.raises(ValueError):
            cc.candidates_checked(bad)
    below, at_most, n = ranks([1.0])
    with pytest.raises(ValueError, match="both given"):
        cc.choose_clip(GRID, below, at_most, n, 0.0, 5.0, Fraction(1), Budget(1), RandomSource(0))
    with pytest.raises(ValueError, match="ranks"):
        cc.choose_clip(GRID, below[:2], at_most, n, None, None, Fraction(1), Budget(1), RandomSource(0))


@pytest.fixture(scope="module")
def movielens_ratings() -> np.ndarray:
    """One rating per user of MovieLens 1M's rated part (2,999 users), each user's first by time."""
    # "::" split as ":" by pandas' C reader (the Python one took 3 s): user, item, rating and time
    # are every other field.
    frame = pd.read_csv(shared_data("ml-1m") / "ratings_users_0001-2999.dat.gz", sep=":", header=None,
                        usecols=[0, 2, 4, 6], names=["user", "item", "rating", "time"])
    return frame.sort_values(["user", "time"]).groupby("user").head(1)["rating"].to_numpy(dtype=float)


@pytest.mark.parametrize("epsilon, scale, ranges", [
    # A tenth of ε = 1 on 2,999 users: the tail q is about 15%, and 1 and 2 stars (14% of them)
    # fall within it, so the low end is mostly 3 (2 in some runs); the high end is 5.
    (Fraction(1, 10), 1, {(2.0, 5.0), (3.0, 5.0)}),
    # With 100 times the users the 1% tail is resolved: ratings' own range.
    (Fraction(1, 10), 100, {(1.0, 5.0)}),
])
def test_on_movielens_ratings_the_choice_finds_their_range(movielens_ratings, epsilon, scale, ranges):
    values = np.tile(movielens_ratings, scale)
    below, at_most, n = ranks(values, cc.DEFAULT_CANDIDATES)
    picked = [cc.choose_clip(cc.DEFAULT_CANDIDATES, below, at_most, n, None, None, epsilon, Budget(1),
                             RandomSource(seed)) for seed in range(20)]
    assert {(c.low, c.high) for c in picked} <= ranges
