"""The private choice of a per-user bound (dp_spark.release.bound_selection): the per-user
bias terms by hand, the squared norms against a brute force, the sensitivity the proof needs
(docs/bound_selection.md) on random neighbouring inputs and where it is tight, a negative control
without the per-cell cap, and the sampler's distribution against the exponential mechanism's."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities
from dp_spark.release import bound_selection as bs
from tests.conftest import examples
from tests.stats import chi2_critical, chi2_statistic

CANDIDATES = [1, 2, 5, 10, 20, 50]
G = bs.GRID


def model(noise=0, tables=1, c=1, candidates=CANDIDATES, weights=None):
    """An error model with the same total noise variance ``noise`` times b² at each candidate, and
    ``tables`` tables weighing 1 each unless ``weights`` are given."""
    return bs.ErrorModel(weights or (Fraction(1),) * tables, c, tuple(Fraction(noise) * b * b for b in candidates))


def cells_of(records: list[tuple[int, object]], scores=None, item=lambda cell: cell) -> pd.DataFrame:
    """(user, cell) records to the (user_id, cell, k, n) rows the norms read; with ``scores``
    (item -> public score) ranked as HPA keeps them, ``item`` giving a cell's item."""
    frame = pd.DataFrame(records, columns=["user_id", "cell"])
    table = frame.groupby(["user_id", "cell"]).size().rename("k").reset_index()
    table["n"] = table.groupby("user_id")["k"].transform("sum")
    if scores is None:
        return table
    return bs.ranked_cells(table.assign(item=table["cell"].map(item)), "item", scores)


def norms_of(records, candidates=CANDIDATES, cap=1, attributes=False, user_cap=None, weights=None,
             scores=None) -> list:
    """The squared norms summed over the item table and, with ``attributes``, the edge table,
    each times its weight (1 unless ``weights``); records are (user, item, attr); with ``scores``
    (item -> public score) the bias of keeping each user's records of highest score first."""
    items = bs.squared_bias_norms(cells_of([(u, i) for u, i, _ in records], scores), candidates, cap, user_cap) \
        if records else [0] * len(candidates)
    tables = [items]
    if attributes:
        edges = cells_of([(u, (i, a)) for u, i, a in records], scores, item=lambda cell: cell[0])
        tables.append(bs.squared_bias_norms(edges, candidates, cap, user_cap) if records else [0] * len(candidates))
    return bs.weighted_norms(tables, weights or [1] * len(tables))


def test_a_term_is_the_expected_loss_on_the_grid_scaled_for_heavy_users():
    # n = 8 records, 3 of them in the cell, b = 2, candidates 1..50 (U = 49 at most): 3·6/8 records
    # in expectation, capped at c = 1 record: 6/8 of a record, on the grid 1/1024 (768).
    assert bs.bias_term(3, 8, 2, 1, 49, cap=1) == 768
    assert bs.bias_term(3, 8, 2, 1, 49, cap=5) == 3 * 768
    assert bs.bias_term(3, 8, 8, 1, 49, cap=5) == 0  # nothing dropped at b >= n
    # n = 99, n − b_1 = 98 > U = 49: scaled by 49/98, the same at every candidate.
    assert bs.bias_term(1, 99, 2, 1, 49, cap=1) == (G * 97 * 49) // (99 * 98)
    # A smaller user cap scales more users: n = 8, n − b_1 = 7 > U = 4, scaled by 4/7.
    assert bs.bias_term(3, 8, 2, 1, 4, cap=5) == (G * 3 * 6 * 4) // (8 * 7)
    assert bs.bias_term(1, 7, 3, 3, 0, cap=1) == 0  # one candidate: U = 0, nothing to choose


def test_ranked_the_term_is_what_keeping_the_highest_scores_drops_ties_alike():
    # One user, n = 8: 3 records of x (score 10), 2 of y and 3 of z (both score 5: one tie group of
    # 5 records, ranked through t = 8). At b = 2: x's group keeps 2 of 3 (drops 1 of 3 records), the
    # tie group keeps none; with c = 5 and U = 49 (no scaling: n − b_1 = 7) the terms are x: 1
    # record, y: 2, z: 3, which sum to the n − b = 6 records dropped.
    assert bs.bias_term(3, 8, 2, 1, 49, cap=5, through=3, tied=3) == G
    assert bs.bias_term(2, 8, 2, 1, 49, cap=5, through=8, tied=5) == 2 * G
    assert bs.bias_term(3, 8, 2, 1, 49, cap=5, through=8, tied=5) == 3 * G
    # At b = 5 x is kept whole and the group keeps 2 of its 5: z loses 3·3/5 records, capped at c = 1.
    assert bs.bias_term(3, 8, 5, 1, 49, cap=5, through=3, tied=3) == 0
    assert bs.bias_term(3, 8, 5, 1, 49, cap=5, through=8, tied=5) == (G * 3 * 3) // 5
    assert bs.bias_term(3, 8, 5, 1, 49, cap=1, through=8, tied=5) == (G * 3) // 5
    # One group of all n records is SRA's uniform sample, the default.
    assert bs.bias_term(3, 8, 5, 1, 49, cap=5, through=8, tied=8) == bs.bias_term(3, 8, 5, 1, 49, cap=5)
    # A heavy user is scaled as before: n − b_1 = 7 > U = 4.
    assert bs.bias_term(2, 8, 2, 1, 4, cap=5, through=8, tied=5) == (G * 2 * 5 * 4) // (5 * 7)
    with pytest.raises(ValueError, match="both"):
        bs.bias_term(3, 8, 2, 1, 49, cap=5, through=3)
    with pytest.raises(ValueError, match="both t and g"):
        bs.squared_bias_norms(cells_of([(1, "x")]).assign(t=1), CANDIDATES, 1)


def test_ranked_cells_rank_each_users_records_by_the_public_scores():
    table = cells_of([(1, "x")] * 3 + [(1, "y")] * 2 + [(1, "z")] * 3 + [(2, "z"), (2, "w")],
                     scores={"x": 10, "y": 5, "z": 5, "w": 7})
    got = {(row.user_id, row.cell): (row.k, row.n, row.t, row.g) for row in table.itertuples()}
    assert got == {(1, "x"): (3, 8, 3, 3), (1, "y"): (2, 8, 8, 5), (1, "z"): (3, 8, 8, 5),
                   (2, "w"): (1, 2, 1, 1), (2, "z"): (1, 2, 2, 1)}
    with pytest.raises(ValueError, match="needs a score"):
        cells_of([(1, "x"), (1, "v")], scores={"x": 1})
    records = [(u, i, "a") for u in range(6) for i in range(u + 3)]
    # Every item scored alike: one tie group per user, SRA's norms exactly.
    assert norms_of(records, scores=dict.fromkeys(range(9), 4)) == norms_of(records)
    # Popular items first: the ones everyone has (0, 1, 2) are kept at b = 3, and user u drops its
    # items 3 to u + 2 whole (U = 99: nobody scaled), so item i loses a record of each of 8 − i users.
    pairs = [(u, i) for u, i, _ in records]
    ranked = bs.squared_bias_norms(cells_of(pairs, {i: 9 - i for i in range(9)}), [1, 3, 100], 1)
    assert ranked[1] == sum((8 - i) ** 2 for i in range(3, 8)) * G * G
    assert ranked[1] != bs.squared_bias_norms(cells_of(pairs), [1, 3, 100], 1)[1]  # SRA drops from every item


def test_the_norms_are_the_squared_cell_sums_of_the_terms():
    records = [(1, "x"), (1, "x"), (1, "y"), (2, "x"), (2, "z"), (2, "z"), (2, "z"), (3, "y")]
    table = cells_of(records)
    for cap in (1, 2):
        expected = []
        for b in CANDIDATES:
            sums = {}
            for row in table.itertuples():
                sums[row.cell] = sums.get(row.cell, 0) + bs.bias_term(row.k, row.n, b, 1, 49, cap)
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


@pytest.mark.long
@settings(max_examples=examples(200), deadline=None)
@given(neighbours(), st.integers(1, 3), st.booleans(), st.fractions(min_value=0, max_value=10_000),
       st.sampled_from([CANDIDATES, [3, 7, 12, 40], [2, 90]]),
       st.none() | st.lists(st.integers(0, 3), min_size=6, max_size=6), st.data())
def test_adding_a_user_lowers_every_score_by_at_most_the_sensitivity(pair, cap, attributes, noise, candidates,
                                                                      ranking, data):
    # The argument of the claim: every q(b) moves the same way (down), by at most Δq, at any user
    # cap U from 1 to b_K − b_1 and any table weights (an objective); with b_1 > 1 users below the
    # smallest candidate are in it too; SRA's uniform sample, or HPA's most popular records by any
    # public scores (few values: many ties).
    records, added = pair
    scores = None if ranking is None else dict(enumerate(ranking))
    user_cap = data.draw(st.integers(1, candidates[-1] - candidates[0]))
    weight = st.fractions(min_value=0, max_value=4, max_denominator=100)
    weights = data.draw(st.lists(weight, min_size=2 if attributes else 1, max_size=2 if attributes else 1)
                        .filter(any))
    # The domain's cells (6 items, 12 item x attribute cells) bound a user's part when below U/c.
    cells = data.draw(st.sampled_from([None, (6, 12)[:len(weights)]]))
    m = replace(model(noise=noise, c=cap, candidates=candidates, weights=tuple(weights)), user_cap=user_cap,
                cells=cells)
    before = bs.quality(norms_of(records, candidates, cap, attributes, user_cap, weights, scores), candidates, m)
    after = bs.quality(norms_of(records + added, candidates, cap, attributes, user_cap, weights, scores), candidates,
                       m)
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


def test_a_ranking_by_the_records_own_popularity_would_break_the_claim():
    # Negative control for HPA's order of steps: its quality ranks by the noisy popularity, a DP
    # output drawn before the choice, fixed whatever one user adds. Ranked instead by the records'
    # own counts, one user flips the order for everyone. 100 users have {A, B}, 100 {A, C}: A is
    # the most popular, so at b = 1 the first drop B, the others C (a norm of 100·√2). One user
    # with 201 records each of B and C puts both above A: all 200 then drop A (a norm of 200),
    # and the score moves by about 59 records, far past Δq ≈ 7.
    records = [(u, "A", "a") for u in range(200)] + [(u, "B" if u < 100 else "C", "a") for u in range(200)]
    added = [(999, item, "a") for item in ("B", "C") for _ in range(201)]

    def popularity(rows):
        return pd.Series([item for _, item, _ in rows]).value_counts().to_dict()
    m = model()
    move = (bs.quality(norms_of(records, scores=popularity(records)), CANDIDATES, m)[0]
            - bs.quality(norms_of(records + added, scores=popularity(records + added)), CANDIDATES, m)[0])
    assert move > 8 * bs.quality_sensitivity(CANDIDATES, m)
    # With the scores fixed (public), the same user moves it within Δq.
    public = popularity(records)
    fixed = (bs.quality(norms_of(records, scores=public), CANDIDATES, m)[0]
             - bs.quality(norms_of(records + added, scores=public), CANDIDATES, m)[0])
    assert 0 <= fixed <= bs.quality_sensitivity(CANDIDATES, m)


def test_norms_at_one_user_cap_scored_with_a_smaller_caps_sensitivity_would_break_the_claim():
    # Negative control for the pairing of U: the tight example's move, √49 ≈ 7 records at U = 49,
    # is past the Δq of U = 16 (4.01); with the norms at U = 16 too it stays within (the user's
    # 49/50 of a record in each of 50 cells is scaled by 16/49: a norm of 0.32·√50 ≈ 2.26).
    records = [(u, i, "a") for u in range(200) for i in range(50)]
    added = [(999, i, "a") for i in range(50)]
    small = replace(model(), user_cap=16)

    def move(user_cap):
        return (bs.quality(norms_of(records, user_cap=user_cap), CANDIDATES, small)[0]
                - bs.quality(norms_of(records + added, user_cap=user_cap), CANDIDATES, small)[0])
    assert move(None) > 1.5 * bs.quality_sensitivity(CANDIDATES, small)
    assert 2.2 <= move(16) <= bs.quality_sensitivity(CANDIDATES, small)


def test_on_a_small_domain_its_cells_bound_a_users_part_and_the_bound_is_tight():
    # 10 cells, c = 1, U = 49: a user adds at most one record's worth per cell, so √10 where U
    # alone allows √49. Each user has one record in each of the 10 cells, and the bound b_1 = 1
    # drops 9/10 of a record from each, all users alike: one more moves the norm by √10·0.9.
    records = [(u, i, "a") for u in range(200) for i in range(10)]
    added = [(999, i, "a") for i in range(10)]
    small = replace(model(), cells=(10,))
    sensitivity = bs.quality_sensitivity(CANDIDATES, small)
    assert sensitivity == bs._sqrt_up(Fraction(10)) + Fraction(1, 100)  # √10, not √49
    move = bs.quality(norms_of(records), CANDIDATES, small)[0] - bs.quality(norms_of(records + added), CANDIDATES,
                                                                            small)[0]
    assert 0.85 * sensitivity <= move <= sensitivity
    # Negative control: told the domain has 4 cells, Δq (√4) is below what the user moves.
    assert move > bs.quality_sensitivity(CANDIDATES, replace(small, cells=(4,)))
    assert small.squared_reach(49) == 10 and replace(small, cells=None).squared_reach(49) == 49


def test_norms_weighted_above_one_scored_with_the_number_of_tables_would_break_the_claim():
    # Negative control for the weights: the tight example with the item table weighing 4 moves
    # the score by nearly √(4·49) = 14 records, twice the Δq of one table weighing 1 (7.01); the
    # Δq of the weights, √(W·c·U), holds it.
    records = [(u, i, "a") for u in range(200) for i in range(50)]
    added = [(999, i, "a") for i in range(50)]
    heavy = model(weights=(Fraction(4),))
    move = (bs.quality(norms_of(records, weights=[4]), CANDIDATES, heavy)[0]
            - bs.quality(norms_of(records + added, weights=[4]), CANDIDATES, heavy)[0])
    assert move > 1.9 * bs.quality_sensitivity(CANDIDATES, model())
    assert 0.95 * bs.quality_sensitivity(CANDIDATES, heavy) <= move <= bs.quality_sensitivity(CANDIDATES, heavy)


def test_weighted_norms_are_each_tables_norms_times_its_weight():
    assert bs.weighted_norms([[4, 2], [8, 0]], [1, Fraction(1, 4)]) == [6, 2]
    assert bs.weighted_norms([[4, 2], [8, 0]], [0, 2]) == [16, 0]
    with pytest.raises(ValueError, match="weights"):
        bs.weighted_norms([[4, 2]], [1, 1])
    assert model(weights=(Fraction(1), Fraction(1, 4), Fraction(0))).tables == 2
    assert model(weights=(Fraction(1), Fraction(1, 4))).total_weight == Fraction(5, 4)


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


@pytest.mark.long
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


def test_the_user_cap_follows_the_noisy_user_count_on_its_grid():
    cands = bs.DEFAULT_CANDIDATES  # b_K − b_1 = 255
    epsilon = Fraction(9, 1000)
    # (κ·ε·N̂)² with κ = 3/5: N̂ = 943 gives 25.9 -> 23; N̂ = 2000 gives 116.6 -> 91.
    assert bs.user_cap(943, epsilon, cands) == 23 and bs.user_cap(2000, epsilon, cands) == 91
    assert bs.user_cap(0, epsilon, cands) == bs.user_cap(-500, epsilon, cands) == 16  # the grid's least
    assert bs.user_cap(10**6, epsilon, cands) == 255  # past the grid: b_K − b_1
    # The thresholds are exact: (κ·ε·N̂)² reaches 23 first at N̂ = ⌈√23/(κ·ε)⌉ = 889 (888.1).
    assert bs.user_cap(888, epsilon, cands) == 16 and bs.user_cap(889, epsilon, cands) == 23
    assert bs.user_cap(889, Fraction(1, 100), cands) == 23  # (0.6·0.01·889)² = 28.5
    caps = [bs.user_cap(n, epsilon, cands) for n in range(0, 6000, 7)]
    assert caps == sorted(caps) and set(caps) == set(bs.USER_CAP_GRID) | {255}
    # Candidates whose spread is below the grid: U = b_K − b_1 whatever the count.
    assert bs.user_cap(0, epsilon, (5, 10)) == bs.user_cap(10**6, epsilon, (5, 10)) == 5
    assert bs.user_cap(0, epsilon, (7,)) == 0
    assert bs.user_cap(0, epsilon, (1, 40)) == 16 and bs.user_cap(10**6, epsilon, (1, 40)) == 39


@pytest.mark.long
@pytest.mark.parametrize("users, count_epsilon", [(943, Fraction(1, 1000)), (300, Fraction(1, 5)), (0, Fraction(1))])
def test_the_cap_probabilities_are_the_count_noise_summed_over_each_caps_counts(users, count_epsilon):
    cands, epsilon = bs.DEFAULT_CANDIDATES, Fraction(9, 100)
    got = bs.user_cap_probabilities(users, count_epsilon, epsilon, cands)
    # By hand: the discrete Laplace pmf (1 − r)/(1 + r)·r^|z|, summed over a wide window of counts.
    r = math.exp(-float(count_epsilon))
    want: dict[int, float] = {}
    for z in range(-40_000, 40_001):
        cap = bs.user_cap(users + z, epsilon, cands)
        want[cap] = want.get(cap, 0.0) + (1 - r) / (1 + r) * r ** abs(z)
    assert sum(got.values()) == pytest.approx(1, abs=1e-12)
    for cap in set(got) | set(want):
        assert got.get(cap, 0.0) == pytest.approx(want.get(cap, 0.0), abs=1e-9)


def _records(seed=4, users=120):
    rng = np.random.default_rng(seed)
    return [(u, int(rng.integers(0, 30)), "a") for u in range(users) for _ in range(int(rng.integers(1, 40)))]


@pytest.mark.parametrize("zcdp", [False, True])
def test_the_whole_choice_counts_the_users_then_scores_at_their_cap(zcdp):
    from dp_spark.core import zcdp as Z
    from dp_spark.core.accounting import Accounting

    # A small part of ε, so that the count's U falls below b_K − b_1 = 49 in some seeds and not others.
    records, part = _records(), Fraction(1, 20)
    seen = set()
    for seed in range(12):
        asked = []

        def norms_at(user_cap, asked=asked):
            asked.append(user_cap)
            return norms_of(records, user_cap=user_cap)
        budget = Budget(part, accounting=Accounting("gaussian", Z.pure_cost(part), 1e-6)) if zcdp else Budget(part)
        choice = bs.choose_bound_by_users(norms_at, 120, CANDIDATES, model(noise=20), part, budget,
                                          RandomSource(seed))
        count, share = bs.choice_parts(part, zcdp, CANDIDATES)
        users, chosen = budget.entries
        assert (users.step, chosen.step) == ("bound: users", "bound")
        assert users.epsilon == count and users.sensitivity == 1 and users.noise_scale == 1 / count
        assert chosen.epsilon == Z.selection_epsilon(share, zcdp)
        # The norms and Δq are both at the U of the count (a negative control for their pairing:
        # test_norms_at_one_user_cap_scored_with_a_smaller_caps_sensitivity_would_break_the_claim).
        assert asked == [choice.user_cap] == [bs.user_cap(choice.users_noisy, chosen.epsilon, CANDIDATES)]
        assert chosen.sensitivity == bs.quality_sensitivity(CANDIDATES, replace(model(), user_cap=choice.user_cap))
        assert choice.bound in CANDIDATES
        seen.add(choice.user_cap)
        if zcdp:
            assert Z.pure_cost(count) + Z.pure_cost(share) <= Z.pure_cost(part)
        else:
            assert count + share == part and count == part / 10
    assert min(seen) < 49 and 49 in seen  # both kinds of run were checked


@pytest.mark.long
def test_the_whole_choice_follows_its_mixture_over_the_caps():
    # χ² of 3,000 choices against pick_probabilities: P(U) from the count's noise, then the
    # exponential mechanism at each U (fixed seed; the one-sided 1e-4 critical value).
    records, part, m = _records(), Fraction(1, 20), model(noise=20)
    cache = {}

    def norms_at(user_cap):
        if user_cap not in cache:
            cache[user_cap] = norms_of(records, user_cap=user_cap)
        return cache[user_cap]
    expected = bs.pick_probabilities(norms_at, 120, CANDIDATES, m, part, False)
    assert max(expected) < 0.9 and expected.sum() == pytest.approx(1)
    source = RandomSource(8)
    draws = [bs.choose_bound_by_users(norms_at, 120, CANDIDATES, m, part, Budget(part), source).bound
             for _ in range(3000)]
    assert len(cache) > 1  # the draws used more than one cap
    observed = np.array([draws.count(b) for b in CANDIDATES])
    wanted = expected * len(draws)
    kept = wanted >= 5
    assert chi2_statistic(observed[kept], wanted[kept]) < chi2_critical(int(kept.sum()) - 1)
    assert observed[~kept].sum() <= max(5, 3 * wanted[~kept].sum())


def test_candidates_with_no_choice_of_cap_spend_nothing_on_a_count():
    budget = Budget(Fraction(1))
    choice = bs.choose_bound_by_users(lambda cap: norms_of(_records(), [1, 2, 17], user_cap=cap), 120, [1, 2, 17],
                                      model(candidates=[1, 2, 17]), Fraction(1), budget, RandomSource(1))
    assert choice.users_noisy is None and choice.user_cap == 16
    assert [e.step for e in budget.entries] == ["bound"] and budget.entries[0].epsilon == 1
    assert choice.to_json("l") == {"l": choice.bound, "user_cap": 16}
    assert bs.choice_parts(Fraction(1), False, [1, 2, 17]) == (None, 1)
    assert bs.choice_parts(Fraction(1), False, [1, 2, 18]) == (Fraction(1, 10), Fraction(9, 10))


@pytest.mark.parametrize("candidates", [[], [0, 1], [3, 3], [5, 2], [1.5, 2], [True, 2]])
def test_bad_candidates_are_refused(candidates):
    with pytest.raises(ValueError):
        bs.candidates_checked(candidates)


@pytest.mark.parametrize("weights, c, noise", [((), 1, (1,)), ((0,), 1, (1,)), ((1, -1), 1, (1,)), (1, 1, (1,)),
                                               ((1,), 0, (1,)), ((1,), True, (1,)), ((1,), 1, ()), ((1,), 1, (-1,))])
def test_bad_error_models_are_refused(weights, c, noise):
    with pytest.raises(ValueError):
        bs.ErrorModel(weights, c, noise)


@pytest.mark.parametrize("cells", [(), (0,), (3, 4), (True,), (2.5,)])
def test_bad_cells_are_refused(cells):
    with pytest.raises(ValueError, match="cells per table"):
        bs.ErrorModel((Fraction(1),), 1, (Fraction(1),), cells=cells)


@pytest.mark.parametrize("user_cap", [0, 50, -1, True, 2.0])
def test_a_user_cap_outside_one_to_the_candidates_spread_is_refused(user_cap):
    with pytest.raises(ValueError, match="user cap"):
        bs.quality([0] * 6, CANDIDATES, replace(model(), user_cap=user_cap))


def test_norms_and_noise_must_match_the_candidates():
    with pytest.raises(ValueError, match="as many"):
        bs.quality([0, 0], CANDIDATES, model())
    with pytest.raises(ValueError, match="non-negative integers"):
        bs.quality([0.5] * 6, CANDIDATES, model())
