"""The private choice of a per-user bound (dp_spark.algorithms.bound_selection): the per-user
bias terms by hand, the squared norms against a brute force, the sensitivity the proof needs
(docs/bound_selection.md) on random neighbouring inputs and where it is tight, a negative control
without the per-cell cap, and the sampler's distribution against the exponential mechanism's."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.algorithms import bound_selection as bs
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities
from dp_spark.core.privacy import Budget

from tests.stats import chi2_critical, chi2_statistic

CANDIDATES = [1, 2, 5, 10, 20, 50]
G = bs.GRID


def model(noise=0, tables=1, c=1, candidates=CANDIDATES):
    """An error model with the same total noise variance ``noise`` times b² at each candidate."""
    return bs.ErrorModel(tables, c, tuple(Fraction(noise) * b * b for b in candidates))


def cells_of(records: list[tuple[int, object]]) -> pd.DataFrame:
    """(user, cell) records to the (user_id, cell, k, n) rows the norms read."""
    frame = pd.DataFrame(records, columns=["user_id", "cell"])
    table = frame.groupby(["user_id", "cell"]).size().rename("k").reset_index()
    table["n"] = table.groupby("user_id")["k"].transform("sum")
    return table


def norms_of(records, candidates=CANDIDATES, cap=1, attributes=False) -> list[int]:
    """The squared norms summed over the item table and, with ``attributes``, the edge table;
    records are (user, item, attr)."""
    items = bs.squared_bias_norms(cells_of([(u, i) for u, i, _ in records]), candidates, cap) if records \
        else [0] * len(candidates)
    if not attributes or not records:
        return items
    edges = bs.squared_bias_norms(cells_of([(u, (i, a)) for u, i, a in records]), candidates, cap)
    return [x + y for x, y in zip(items, edges)]


def test_a_term_is_the_expected_loss_on_the_grid_scaled_for_heavy_users():
    # n = 8 records, 3 of them in the cell, b = 2, candidates 1..50: 3·6/8 records in expectation,
    # capped at c = 1 record: 6/8 of a record, on the grid 1/1024 (768).
    assert bs.bias_term(3, 8, 2, 1, 50, cap=1) == 768
    assert bs.bias_term(3, 8, 2, 1, 50, cap=5) == 3 * 768
    assert bs.bias_term(3, 8, 8, 1, 50, cap=5) == 0  # nothing dropped at b >= n
    # n = 99 > b_K = 50: scaled by 49/98, the same at every candidate.
    assert bs.bias_term(1, 99, 2, 1, 50, cap=1) == (G * 97 * 49) // (99 * 98)
    assert bs.bias_term(1, 7, 3, 3, 3, cap=1) == 0  # one candidate: no spread, nothing to choose


def test_the_norms_are_the_squared_cell_sums_of_the_terms():
    records = [(1, "x"), (1, "x"), (1, "y"), (2, "x"), (2, "z"), (2, "z"), (2, "z"), (3, "y")]
    table = cells_of(records)
    for cap in (1, 2):
        expected = []
        for b in CANDIDATES:
            sums = {}
            for row in table.itertuples():
                sums[row.cell] = sums.get(row.cell, 0) + bs.bias_term(row.k, row.n, b, 1, 50, cap)
            expected.append(sum(v * v for v in sums.values()))
        assert bs.squared_bias_norms(table, CANDIDATES, cap) == expected
    assert bs.squared_bias_norms(table, CANDIDATES, 1)[-1] == 0  # nobody has more than 50 records


def test_the_score_is_minus_the_root_of_bias_plus_noise_rounded_up():
    norms = [G * G * 9, G * G * 4 + 5, 0, 0, 0, 0]
    m = model(noise=Fraction(1, 2))
    scores = bs.quality(norms, CANDIDATES, m)
    for norm, b, score in zip(norms, CANDIDATES, scores):
        exact = (norm / G ** 2 + b * b / 2) ** 0.5
        assert exact <= float(-score) < exact + 1 / bs.SCALE + 1e-9
        assert (-score * bs.SCALE).denominator == 1  # on the grid: exact rationals


@st.composite
def neighbours(draw):
    """Records of up to 12 users over 6 items and 2 attribute values, and one more user's."""
    record = st.tuples(st.integers(0, 11), st.integers(0, 5), st.sampled_from("ab"))
    records = draw(st.lists(record, max_size=80))
    added = draw(st.lists(st.tuples(st.just(99), st.integers(0, 5), st.sampled_from("ab")), min_size=1,
                          max_size=120))
    return records, added


@settings(max_examples=150, deadline=None)
@given(neighbours(), st.integers(1, 3), st.booleans(), st.fractions(min_value=0, max_value=10_000),
       st.sampled_from([CANDIDATES, [3, 7, 12, 40], [2, 90]]))
def test_adding_a_user_lowers_every_score_by_at_most_the_sensitivity(pair, cap, attributes, noise, candidates):
    # The argument of the claim: every q(b) moves the same way (down), by at most Δq; with
    # b_1 > 1 users below the smallest candidate are in it too.
    records, added = pair
    m = model(noise=noise, tables=2 if attributes else 1, c=cap, candidates=candidates)
    before = bs.quality(norms_of(records, candidates, cap=cap, attributes=attributes), candidates, m)
    after = bs.quality(norms_of(records + added, candidates, cap=cap, attributes=attributes), candidates, m)
    sensitivity = bs.quality_sensitivity(candidates, m)
    assert all(0 <= b - a <= sensitivity for b, a in zip(before, after))


def test_where_the_argument_is_tight_one_user_moves_a_score_by_nearly_the_sensitivity():
    # Many users rate the same 50 items; one more user with the same 50 records moves the bias
    # vector at b_1 along itself by nearly √(b_K − b_1), with no noise to soften the root.
    records = [(u, i, "a") for u in range(200) for i in range(50)]
    added = [(999, i, "a") for i in range(50)]
    m = model()
    move = bs.quality(norms_of(records), CANDIDATES, m)[0] - bs.quality(norms_of(records + added), CANDIDATES, m)[0]
    sensitivity = bs.quality_sensitivity(CANDIDATES, m)
    assert 0.95 * sensitivity <= move <= sensitivity


def test_without_the_per_cell_cap_one_user_could_move_a_score_past_the_sensitivity():
    # Negative control: a user with 50 records of one item moves that cell's bias by 49 records,
    # far past Δq = √49 + 1/100 — unless the quality counts at most c = 1 record per cell.
    added = [(999, 0, "a")] * 50
    m = model()
    uncapped = bs.quality(norms_of(added, cap=50), CANDIDATES, m)[0]
    capped = bs.quality(norms_of(added, cap=1), CANDIDATES, m)[0]
    assert -uncapped > 6 * bs.quality_sensitivity(CANDIDATES, m)
    assert -capped <= bs.quality_sensitivity(CANDIDATES, m)


def test_the_quality_trades_the_bias_where_it_falls_against_noise():
    # 300 users with 20 records over the same 20 items: little noise favours keeping all 20; a lot
    # of noise favours b = 1. The bias falls on 20 cells whatever the domain's size: the choice
    # does not depend on a guess of how it spreads.
    records = [(u, i, "a") for u in range(300) for i in range(20)]
    norms = norms_of(records)
    cheap = bs.quality(norms, CANDIDATES, model(noise=Fraction(1, 100)))
    dear = bs.quality(norms, CANDIDATES, model(noise=10**6))
    assert CANDIDATES[int(np.argmax(cheap))] == 20
    assert CANDIDATES[int(np.argmax(dear))] == 1


def test_the_choice_follows_the_exponential_mechanism_and_is_paid_for():
    rng = np.random.default_rng(4)
    records = [(u, int(rng.integers(0, 30)), "a") for u in range(120) for _ in range(int(rng.integers(1, 40)))]
    norms = norms_of(records)
    m, epsilon = model(noise=20), Fraction(1, 10)
    scores = bs.quality(norms, CANDIDATES, m)
    expected = exponential_probabilities(scores, epsilon, bs.quality_sensitivity(CANDIDATES, m), monotone=True)
    assert max(expected) < 0.9  # a spread-out distribution, so the test sees more than one candidate
    source = RandomSource(30)
    draws = []
    for _ in range(4000):
        budget = Budget(epsilon)
        draws.append(bs.choose_bound(norms, CANDIDATES, m, epsilon, budget, source))
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


@pytest.mark.parametrize("tables, c, noise", [(0, 1, (1,)), (1, 0, (1,)), (True, 1, (1,)), (1, 1, ()),
                                              (1, 1, (-1,))])
def test_bad_error_models_are_refused(tables, c, noise):
    with pytest.raises(ValueError):
        bs.ErrorModel(tables, c, noise)


def test_norms_and_noise_must_match_the_candidates():
    with pytest.raises(ValueError, match="as many"):
        bs.quality([0, 0], CANDIDATES, model())
    with pytest.raises(ValueError, match="non-negative integers"):
        bs.quality([0.5] * 6, CANDIDATES, model())
