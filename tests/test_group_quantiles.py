"""Quantiles per group (families.aggregate.quantiles): the candidates and the rounding to them, the
rank-distance quality and its sensitivity, the choice through the ledger, and its rank error."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.core.accounting import Accounting
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.aggregate import quantiles
from dp_spark.families.aggregate.quantiles import Candidates, level_of, rank_scores, scaled_sensitivity
from tests.conftest import examples

STARS = Candidates((1, 2, 3, 4, 5))


def brute_scores(values: np.ndarray, candidates: Candidates, level: Fraction) -> np.ndarray:
    """The quality from its definition, over the values rounded to the candidates (unscaled)."""
    rounded = np.asarray(candidates.values)[candidates.nearest(values)]
    n = len(values)
    return np.array([-max(Fraction(0), int((rounded < b).sum()) - level * n, level * n - int((rounded <= b).sum()))
                     for b in candidates.values])


def histogram(values, candidates: Candidates) -> np.ndarray:
    return np.bincount(candidates.nearest(values), minlength=len(candidates))


def test_levels_are_the_fractions_they_name():
    assert level_of(0.9) == Fraction(9, 10) and level_of(0.5) == Fraction(1, 2) and level_of(Fraction(1, 3)) == \
        Fraction(1, 3)
    for bad in (0, 1, 1.5, -0.1, True, "0.5", Fraction(1, 10**6)):
        with pytest.raises(ValueError, match="quantile level"):
            level_of(bad)


def test_values_go_to_their_nearest_candidate_ties_to_the_lower_one():
    grid = Candidates((0, 1, 3))
    assert grid.nearest(np.array([-5, 0, 0.5, 0.51, 2, 2.01, 3, 99])).tolist() == [0, 0, 0, 1, 1, 2, 2, 2]
    assert Candidates.evenly(1, 5, 9).values == (1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5)
    for bad in ((1,), (1, 1), (2, 1), (0, float("nan")), tuple(range(quantiles.MAX_CANDIDATES + 1))):
        with pytest.raises(ValueError, match="quantile candidates"):
            Candidates(bad)


@settings(max_examples=examples(60), deadline=None)
@given(values=st.lists(st.floats(-1, 7, allow_nan=False), min_size=1, max_size=40),
       level=st.sampled_from([Fraction(1, 2), Fraction(1, 10), Fraction(9, 10), Fraction(1, 3)]))
def test_the_scores_are_the_rank_distance_and_zero_at_the_quantile(values, level):
    values = np.asarray(values)
    scores = rank_scores(histogram(values, STARS)[None, :], level)[0]
    assert [Fraction(int(s), level.denominator) for s in scores] == list(brute_scores(values, STARS, level))
    # The q-quantile of the rounded values (the least v with at least q·n values at most v) scores 0.
    rounded = np.sort(np.asarray(STARS.values)[STARS.nearest(values)])
    quantile = rounded[max(int(np.ceil(float(level) * len(values))) - 1, 0)]
    assert scores[STARS.values.index(quantile)] == 0


@settings(max_examples=examples(80), deadline=None)
@given(values=st.lists(st.floats(-1, 7, allow_nan=False), max_size=30),
       added=st.lists(st.floats(-1, 7, allow_nan=False), min_size=1, max_size=4),
       level=st.sampled_from([Fraction(1, 2), Fraction(1, 10), Fraction(9, 10), Fraction(2, 3)]))
def test_c_records_more_move_a_group_s_scores_by_at_most_its_sensitivity(values, added, level):
    """One user's c records added to a group (c = len(added)): no score moves by more than
    c·max(N, D − N) in the scaled units, the per-group part of scaled_sensitivity."""
    h = histogram(np.asarray(values), STARS) if values else np.zeros(len(STARS), dtype=np.int64)
    more = h + histogram(np.asarray(added), STARS)
    moved = np.abs(rank_scores(more[None, :], level) - rank_scores(h[None, :], level)).max()
    assert moved <= scaled_sensitivity(level, 1, len(added))


def test_negative_control_the_sensitivity_without_the_records_per_group_is_too_small():
    """A user's 4 records at the top move the median's scores by 4 half-steps: a bound for one
    record (c = 1) would be exceeded, which the property above would then catch."""
    h = np.array([[5, 0, 0, 0, 5]])
    moved = np.abs(rank_scores(h + [0, 0, 0, 0, 4], Fraction(1, 2)) - rank_scores(h, Fraction(1, 2))).max()
    assert moved > scaled_sensitivity(Fraction(1, 2), 1, 1) and moved <= scaled_sensitivity(Fraction(1, 2), 1, 4)


def test_large_groups_get_their_quantiles_and_the_ledger_pays_once_per_level():
    """Groups of 2,000 ratings at ε = 1 over l = 5 groups: the median and the 90th percentile are
    the true ones (fixed seed), the values in order, and each level is one ledger step."""
    rng = np.random.default_rng(4)
    groups = [rng.choice([1, 2, 3, 4, 5], size=2_000, p=p) for p in
              ([.1, .1, .2, .3, .3], [.4, .3, .1, .1, .1], [0, 0, 0, .2, .8])]
    h = np.stack([histogram(g, STARS) for g in groups])
    budget = Budget(Fraction(1))
    levels, shares = [Fraction(9, 10), Fraction(1, 2)], [Fraction(1, 2), Fraction(1, 2)]
    chosen = quantiles.choose_levels(h, STARS, levels, shares, 5, 1, budget, RandomSource(seed=8), "stars")
    truth = [[np.quantile(g, float(q), method="inverted_cdf") for q in levels] for g in groups]
    assert chosen.tolist() == truth
    assert [e.step for e in budget.entries] == ["quantile(stars, 0.9)", "quantile(stars, 0.5)"]
    assert budget.spent == 1 and all(e.cells == 5 and e.sensitivity == 5 * 9 for e in budget.entries[:1])


def test_a_higher_level_never_shows_a_lower_value():
    """Tiny groups at a small ε choose almost at random: sorting keeps the levels in order."""
    h = np.array([[1, 0, 0, 0, 1]] * 300)
    chosen = quantiles.choose_levels(h, STARS, [Fraction(9, 10), Fraction(1, 10), Fraction(1, 2)],
                                     [Fraction(1, 30)] * 3, 10, 1, Budget(Fraction(1, 10)), RandomSource(seed=2), "v")
    assert (chosen[:, 1] <= chosen[:, 2]).all() and (chosen[:, 2] <= chosen[:, 0]).all()
    assert len({tuple(row) for row in chosen.tolist()}) > 10  # they are random, and still ordered


@pytest.mark.parametrize("zcdp", [False, True])
def test_the_rank_error_bound_holds_at_its_level(zcdp):
    """4,000 groups of 200 values on 50 candidates, ε = 1/2 at l = 4, c = 2: the share of groups
    whose chosen median is further in rank than rank_error(β = 0.05) stays under 5% (fixed seed);
    under zCDP the same share of ρ runs at twice the ε, and the bound is half as wide."""
    grid = Candidates.evenly(0, 49, 50)
    rng = np.random.default_rng(11)
    values = rng.integers(0, 50, size=(4_000, 200))
    h = np.stack([np.bincount(row, minlength=50) for row in values])
    epsilon = Fraction(1, 2)
    rho = epsilon**2 / 2  # the share's ρ: the mechanism runs at 2ε, a bounded-range step of cost (2ε)²/8
    budget = Budget(rho, accounting=Accounting("gaussian", rho, 1e-6)) if zcdp else Budget(epsilon)
    chosen = quantiles.choose(h, grid, Fraction(1, 2), epsilon, 4, 2, budget, RandomSource(seed=5), "median")
    index = grid.nearest(chosen)
    at_most = np.cumsum(h, axis=1)[np.arange(len(h)), index]
    below = at_most - h[np.arange(len(h)), index]
    distance = np.maximum(0, np.maximum(below - 100, 100 - at_most))
    bound = quantiles.rank_error(50, epsilon, Fraction(1, 2), 4, 2, zcdp, 0.05)
    assert (distance > bound).mean() < 0.05
    assert (distance > bound / 4).mean() > 0.05  # the bound is not loose by a factor of four
