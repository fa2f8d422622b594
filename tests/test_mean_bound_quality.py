"""The means' quality for choosing l privately (dp_spark.release.mean_bound_quality): the kept
counts against a brute force and against Spark's, the usefulness's shape, the Lipschitz bound
against the derivative on a fine grid (with a negative control that leaves a term out), the
sensitivity and monotonicity the claim needs (docs/value_sums.md, "Privacy claim: the means'
choice of l") on random neighbouring inputs and near where it is tight, and the mechanism's
ledger entry."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.core.domain import ItemDomain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.release import bound_bias, bound_selection
from dp_spark.release import mean_bound_quality as mq
from tests.conftest import examples

CANDIDATES = [1, 2, 5, 10, 20, 50]
G = mq.GRID


def table(noise=mq.LAPLACE, scale=4.0, threshold=12.0, variance=40.0) -> mq.TableAtBound:
    return mq.TableAtBound(noise, scale, threshold, variance)


def model_of(b_scale: float, noise: str = mq.LAPLACE, cells=(None,), weights=(1,), tables=1,
             candidates=CANDIDATES, c: int = 1) -> mq.MeansErrorModel:
    """Noise that grows with b as the release's does: Laplace scale, threshold and sd ∝ b, Gaussian ∝ √b."""
    def at(b):
        grow = b if noise == mq.LAPLACE else math.sqrt(b)
        return table(noise, b_scale * grow, 3 * b_scale * grow, 2 * (b_scale * grow) ** 2)
    return mq.MeansErrorModel(tuple(Fraction(w) for w in weights), tuple(cells),
                              tuple(tuple(at(b) for b in candidates) for _ in range(tables)), c)


def cells_of(records) -> pd.DataFrame:
    """(user, cell) records to rows of user_id, cell, k and n."""
    frame = pd.DataFrame(records, columns=["user_id", "cell"])
    rows = frame.groupby(["user_id", "cell"], sort=False).size().rename("k").reset_index()
    rows["n"] = rows["user_id"].map(frame.groupby("user_id").size())
    return rows


def test_the_kept_counts_are_each_users_expected_sample_on_the_grid():
    records = [(1, "x"), (1, "x"), (1, "y"), (2, "x"), (2, "z"), (2, "z"), (2, "z"), (3, "y")]
    for cap in (1, 2):
        kept = mq.kept_counts(cells_of(records), CANDIDATES, cap)
        for i, b in enumerate(CANDIDATES):
            want = {}
            for row in cells_of(records).itertuples():
                want[row.cell] = want.get(row.cell, 0) + G * min(row.k, cap) * min(row.n, b) // row.n
            assert kept[:, i].tolist() == list(want.values())
    # b = 1: user 1 keeps a third of a record in expectation, two thirds of it in x.
    assert mq.kept_counts(cells_of(records), [1], 2)[0, 0] == G * 2 // 3 + G * 1 // 4


def test_hpas_kept_counts_keep_each_users_records_of_highest_score_first():
    # User 1: x (score 9), y and z (both 5), one record each; user 2: y twice. At b = 1 user 1
    # keeps x and none of y, z; at b = 2 one of y and z at random (half a record each); user 2
    # keeps one of its two y records at b = 1 (a tie group of 2) and both at b = 2.
    scores = {"x": 9, "y": 5, "z": 5}
    ranked = bound_selection.ranked_cells(cells_of([(1, "x"), (1, "y"), (1, "z"), (2, "y"), (2, "y")]), "cell",
                                          scores)
    kept = dict(zip(ranked["cell"].drop_duplicates(), mq.kept_counts(ranked, [1, 2, 3], 2)))
    assert kept["x"].tolist() == [G, G, G]
    assert kept["y"].tolist() == [G, G // 2 + 2 * G, G + 2 * G]
    assert kept["z"].tolist() == [0, G // 2, G]
    # One score for every cell is the uniform sample's.
    flat = bound_selection.ranked_cells(cells_of([(1, "x"), (1, "y"), (2, "y")]), "cell", dict.fromkeys("xy", 0))
    assert (mq.kept_counts(flat, CANDIDATES, 1) == mq.kept_counts(cells_of([(1, "x"), (1, "y"), (2, "y")]),
                                                                  CANDIDATES, 1)).all()
    with pytest.raises(ValueError, match="both t and g"):
        mq.kept_counts(ranked.drop(columns="t"), CANDIDATES, 1)


def test_the_spark_kept_counts_are_the_reference_counts(spark, monkeypatch):
    monkeypatch.setattr(bound_bias, "RECORDS_PER_PARTITION", 100)
    rng = np.random.default_rng(5)
    rows = [(int(u), int(rng.integers(1, 9)), str(rng.choice(["a", "b"])))
            for u in range(40) for _ in range(int(rng.integers(1, 30)))]
    frame = pd.DataFrame(rows, columns=["user_id", "item_id", "attr"])
    records = spark.createDataFrame(frame)
    user_counts = spark.createDataFrame(frame.groupby("user_id").size().rename("_n").reset_index())
    for cap, given_counts in ((1, None), (3, user_counts)):
        kept = bound_bias.expected_kept(records, CANDIDATES, cap, G, [bound_bias.ITEMS, bound_bias.EDGES],
                                        given_counts, 40 if given_counts else None, len(frame))
        for got, columns in zip(kept, (["item_id"], ["item_id", "attr"])):
            rows_of = frame.assign(cell=list(zip(*(frame[c] for c in columns))))[["user_id", "cell"]]
            want = mq.kept_counts(cells_of(rows_of.itertuples(index=False)), CANDIDATES, cap)
            assert sorted(map(tuple, got)) == sorted(map(tuple, want))
    # HPA's: each user's records ranked by public item scores, with ties (items 1..8, 4 scores).
    scores = np.array([3, 1, 1, 0, 2, 2, 2, 0])
    ranking = bound_bias.ItemRanking(ItemDomain(None, "1..8", (1, 8)), scores)
    kept = bound_bias.expected_kept(records, CANDIDATES, 2, G, [bound_bias.ITEMS, bound_bias.EDGES], user_counts, 40,
                                    len(frame), ranking)
    by_item = dict(zip(range(1, 9), scores.tolist()))
    for got, columns in zip(kept, (["item_id"], ["item_id", "attr"])):
        rows_of = frame.assign(cell=list(zip(*(frame[c] for c in columns))))
        cells = cells_of(rows_of[["user_id", "cell"]].itertuples(index=False)).assign(item=lambda f: f["cell"].str[0])
        want = mq.kept_counts(bound_selection.ranked_cells(cells, "item", by_item), CANDIDATES, 2)
        assert sorted(map(tuple, got)) == sorted(map(tuple, want))
    assert not (kept[0] == bound_bias.expected_kept(records, CANDIDATES, 2, G, [bound_bias.ITEMS], user_counts, 40,
                                                    len(frame))[0]).all()  # the ranking does change them


def test_usefulness_is_zero_without_records_and_rises_with_them():
    for noise in (mq.LAPLACE, mq.GAUSSIAN):
        t = table(noise)
        k = np.linspace(0, 500, 5001)
        u = t.usefulness(k)
        assert u[0] == 0 and np.all(np.diff(u) >= -1e-15) and u[-1] > 1
        # The mean's squared error at K = 100: (40 + 100)/100² of the range's; g is minus its log.
        assert t.precision(np.array([100.0]))[0] == pytest.approx(-math.log(140 / 100**2))
        assert t.published(np.array([t.threshold]))[0] == pytest.approx(0.5)


@pytest.mark.parametrize("noise", [mq.LAPLACE, mq.GAUSSIAN])
@pytest.mark.parametrize("scale, threshold, variance", [
    (4.0, 12.0, 40.0), (0.5, 1.5, 0.6), (100.0, 300.0, 5e4), (2.0, 0.0, 9.0), (1.0, 50.0, 1.0)])
def test_the_lipschitz_bound_is_above_the_derivative_everywhere(noise, scale, threshold, variance):
    t = table(noise, scale, threshold, variance)
    k = np.concatenate([np.linspace(0, 10 * (threshold + scale + math.sqrt(variance)), 400_001),
                        np.geomspace(1e-6, 1e7, 200_001)])
    k.sort()
    slopes = np.diff(t.usefulness(k)) / np.diff(k)
    bound = t.lipschitz()
    assert slopes.max() <= bound
    assert slopes.max() >= bound / 3  # and not loose by much


def test_negative_control_a_bound_without_the_density_term_is_exceeded():
    # The bug: bounding u' by p·g' alone, forgetting that p rises where g is already large.
    t = table(mq.LAPLACE, 1.0, 400.0, 9.0)
    k = np.linspace(300, 500, 200_001)
    slopes = np.diff(t.usefulness(k)) / np.diff(k)
    without_density = t.lipschitz() - 1 / (2 * t.scale) * float(t.precision(np.array([401.0]))[0])
    assert slopes.max() > without_density


@st.composite
def neighbours(draw):
    """Records of up to 12 users over 8 cells, and one more user's."""
    records = draw(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 7)), max_size=150))
    added = draw(st.lists(st.tuples(st.just(99), st.integers(0, 7)), min_size=1, max_size=120))
    return records, added


def _kept_tables(records, tables: int, cap: int) -> list[np.ndarray]:
    """Table 0 over the cells, table 1 (when there are two) over the cells mod 3: every cell of
    each listed, so that the rows of the neighbours line up."""
    out = []
    for t in range(tables):
        mapped = [(u, c if t == 0 else c % 3) for u, c in records]
        kept = mq.kept_counts(cells_of(mapped), CANDIDATES, cap) if mapped else np.zeros((0, len(CANDIDATES)), int)
        present = list(dict.fromkeys(c for _, c in mapped))
        full = np.zeros((8 if t == 0 else 3, len(CANDIDATES)), dtype=np.int64)
        for row, cell in enumerate(present):
            full[cell] = kept[row]
        out.append(full)
    return out


@pytest.mark.long
@settings(max_examples=examples(150), deadline=None)
@given(neighbours(), st.integers(1, 3), st.sampled_from([mq.LAPLACE, mq.GAUSSIAN]),
       st.floats(0.05, 20), st.integers(1, 2), st.booleans(), st.data())
def test_adding_a_user_raises_every_score_by_at_most_the_sensitivity(pair, cap, noise, b_scale, tables, small,
                                                                     data):
    records, added = pair
    weights = data.draw(st.lists(st.fractions(0, 4, max_denominator=50), min_size=tables, max_size=tables)
                        .filter(any))
    cells = (8, 3)[:tables] if small else (None,) * tables
    m = model_of(b_scale, noise, cells, weights, tables, c=cap)
    before = mq.quality(_kept_tables(records, tables, cap), CANDIDATES, m)
    after = mq.quality(_kept_tables(records + added, tables, cap), CANDIDATES, m)
    sensitivity = mq.quality_sensitivity(CANDIDATES, m)
    grid = mq.step(CANDIDATES, m)
    # Monotone: every score rises (the rounding may take one step off), by at most Δq.
    assert all(-grid <= a - b <= sensitivity for b, a in zip(before, after))


@pytest.mark.long
@settings(max_examples=examples(100), deadline=None)
@given(neighbours(), st.integers(1, 3), st.sampled_from([mq.LAPLACE, mq.GAUSSIAN]), st.floats(0.05, 20),
       st.lists(st.integers(0, 3), min_size=8, max_size=8), st.booleans())
def test_with_hpas_ranking_adding_a_user_raises_every_score_by_at_most_the_sensitivity(pair, cap, noise, b_scale,
                                                                                       scores, small):
    # HPA's kept counts at public scores of the 8 cells (ties likely): the same Δq holds.
    records, added = pair
    m = model_of(b_scale, noise, (8,) if small else (None,), c=cap)

    def kept(rows):
        full = np.zeros((8, len(CANDIDATES)), dtype=np.int64)
        if rows:
            cells = bound_selection.ranked_cells(cells_of(rows), "cell", dict(enumerate(scores)))
            full[cells["cell"].drop_duplicates().to_numpy()] = mq.kept_counts(cells, CANDIDATES, cap)
        return [full]
    before, after = mq.quality(kept(records), CANDIDATES, m), mq.quality(kept(records + added), CANDIDATES, m)
    sensitivity, grid = mq.quality_sensitivity(CANDIDATES, m), mq.step(CANDIDATES, m)
    assert all(-grid <= a - b <= sensitivity for b, a in zip(before, after))


def test_near_where_the_argument_is_tight_one_user_moves_a_score_by_much_of_the_sensitivity():
    # Every cell sits where the usefulness is steepest at b = 50; one more user with 50 records,
    # one per cell, adds a whole record to each.
    m = model_of(1.0, candidates=[50])
    t = m.tables[0][0]
    k = np.linspace(0, 2000, 200_001)
    steepest = k[np.argmax(np.diff(t.usefulness(k)))]
    base = np.full((50, 1), int(round(steepest * G)), dtype=np.int64)
    move = mq.quality([base + G], [50], m)[0] - mq.quality([base], [50], m)[0]
    assert 0.5 * mq.quality_sensitivity([50], m) < move <= mq.quality_sensitivity([50], m)


def test_a_small_domain_bounds_a_users_reach_by_c_per_cell_not_one():
    # Three cells at the steepest point of a steep curve; a user with two records in each (n = 6 ≤ b)
    # keeps them all: the score rises by nearly L·c·cells, within Δq, and past what a bound of one
    # per cell would allow (the usefulness is not capped at 1).
    m = model_of(0.01, mq.GAUSSIAN, cells=(3,), candidates=[50], c=2)
    t = m.tables[0][0]
    k = np.linspace(0, 20, 2_000_001)
    steepest = k[np.argmax(np.diff(t.usefulness(k)))]
    base = np.full((3, 1), int(round(steepest * G)), dtype=np.int64)
    move = mq.quality([base + 2 * G], [50], m)[0] - mq.quality([base], [50], m)[0]
    sensitivity = mq.quality_sensitivity([50], m)
    assert move <= sensitivity and float(sensitivity) == pytest.approx(t.lipschitz() * 2 * 3, rel=0.01)
    assert move > 3  # one per cell would cap the move at the three cells (here 3.3 of Δq 6.0)


def test_the_choice_spends_one_monotone_exponential_mechanism_at_its_share():
    m = model_of(1.0)
    kept = [np.array([[G * b * 30 for b in CANDIDATES]] * 20, dtype=np.int64)]
    budget = Budget(Fraction(1))
    picks = {mq.choose_bound(kept, CANDIDATES, m, Fraction(1, 10), budget, RandomSource(seed))
             for seed in range(3)}
    assert picks <= set(CANDIDATES)
    entries = budget.entries
    assert [e.step for e in entries] == ["choose l"] * 3
    assert entries[0].epsilon == Fraction(1, 10) and entries[0].sensitivity == mq.quality_sensitivity(CANDIDATES, m)
    probabilities = mq.pick_probabilities(kept, CANDIDATES, m, Fraction(1, 10))
    assert probabilities.sum() == pytest.approx(1) and np.argmax(probabilities) == len(CANDIDATES) - 1


@pytest.mark.parametrize("bad", [
    dict(noise="cauchy"), dict(scale=0.0), dict(variance=0.0), dict(threshold=-1.0), dict(scale=math.inf)])
def test_bad_tables_are_refused(bad):
    with pytest.raises(ValueError):
        table(**bad)
