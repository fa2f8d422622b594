"""HPA's bound chosen by the estimate (release.ranked_bias's model, release.bound_bias's ranked
anchor): the model against HPA's exact bias, the anchor's sensitivity and its Spark twin, and a
release's choice with its negative control."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dp_spark
from dp_spark.core.domain import ItemDomain
from dp_spark.lab.bound_curve import hpa_sampling_errors
from dp_spark.release import bound_bias, bound_estimate, bound_selection
from dp_spark.release import ranked_bias as rb
from tests.conftest import examples

ITEMS = 8
SCORES = {item: 100 - item for item in range(1, ITEMS + 1)}  # item 1 the most popular, no ties


def _nested(users_by_n: dict[int, int], c: int = 1) -> pd.DataFrame:
    """Users who hold the most popular items: a user with n records has c of each of items 1 .. n/c."""
    rows, user = [], 0
    for n, count in users_by_n.items():
        for _ in range(count):
            rows += [(user, item) for item in range(1, n // c + 1) for _ in range(c)]
            user += 1
    return pd.DataFrame(rows, columns=["user_id", "item_id"])


def _exact_norms(pairs: pd.DataFrame, bounds) -> np.ndarray:
    return np.array([e.bias_squared * ITEMS for e in hpa_sampling_errors(pairs, bounds, ITEMS, SCORES)])


@pytest.mark.parametrize("c, users_by_n", [(1, {1: 5, 2: 3, 4: 7, 6: 2, 8: 1}), (2, {2: 4, 4: 3, 8: 2, 16: 1})])
def test_where_users_hold_the_most_popular_items_the_model_is_hpas_exact_bias(c, users_by_n):
    pairs = _nested(users_by_n, c)
    edges = np.arange(1, c * ITEMS + 2)  # one bin per record count: the histogram is exact
    histogram = np.array([users_by_n.get(n, 0) for n in edges[:-1]])
    bounds = list(range(1, c * ITEMS + 1))
    model = rb.ranked_norms(histogram, edges, bounds, c)
    assert model == pytest.approx(_exact_norms(pairs, bounds))
    assert model[0] > 0 and model[-1] == 0


def test_negative_control_sras_proportional_model_misses_hpas_bias_on_the_same_users():
    # SRA's model scales the bias at b_1 by the records dropped, S(b)/S(b_1): HPA's drops gather on
    # the least popular items as b grows, so its norm falls more slowly than the records it drops.
    users_by_n = {1: 5, 2: 3, 4: 7, 6: 2, 8: 1}
    exact = _exact_norms(_nested(users_by_n), range(1, ITEMS + 1))
    dropped = np.array([sum(count * max(n - b, 0) for n, count in users_by_n.items()) for b in range(1, ITEMS + 1)])
    proportional = exact[0] * (dropped / dropped[0]) ** 2
    assert np.max(np.abs(proportional[:-1] / exact[:-1] - 1)) > 0.3


def test_the_histograms_users_spread_evenly_over_each_bins_counts():
    edges = np.array([1, 2, 4, 8])  # bins {1}, {2, 3}, {4 .. 7}
    at_least = rb.users_at_least(np.array([3, 4, 8]), edges)
    assert at_least == pytest.approx([15, 12, 10, 8, 6, 4, 2])
    with pytest.raises(ValueError, match="start at 1"):
        rb.users_at_least(np.array([1, 1]), np.array([2, 3, 4]))


def test_the_errors_are_the_model_scaled_to_the_anchor_plus_the_noise():
    histogram, edges = np.array([0, 10, 0, 5]), np.arange(1, 6)  # 10 users with 2 records, 5 with 4
    norms = rb.ranked_norms(histogram, edges, [1, 2, 3, 4], 1)
    assert norms == pytest.approx([15**2 + 5**2 + 5**2, 5**2 + 5**2, 5**2, 0])
    errors = rb.ranked_errors(histogram, edges, 30.0, [1, 2, 3, 4], 1, [1, 4, 9, 16])
    assert errors == pytest.approx(30.0**2 * norms / norms[0] + [1, 4, 9, 16])
    # A negative noisy anchor reads as no bias, and so does a histogram with nobody above b_1.
    assert rb.ranked_errors(histogram, edges, -3.0, [1, 2], 1, [1, 4]) == pytest.approx([1, 4])
    assert rb.ranked_errors(np.array([7, 0, 0, 0]), edges, 30.0, [1, 2], 1, [1, 4]) == pytest.approx([1, 4])


def test_users_above_c_per_item_keep_a_bias_past_the_domains_size():
    # Repeated records: 20 users with 6 records each on a 4-item domain (c = 1). Every bound below
    # 6 drops some of them. The model's first version stopped the slots at c·C_items = 4, read no
    # bias from 4 on (0 at all three bounds here) and picked 4, up to 309 times the oracle's error
    # on the check-ins with visits (docs/bound_selection.md).
    histogram, edges = np.array([0, 0, 0, 0, 0, 20]), np.arange(1, 8)
    norms = rb.ranked_norms(histogram, edges, [4, 5, 6], 1)
    assert norms == pytest.approx([2 * 20**2, 20**2, 0])


def _ranked(rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["user_id", "cell"])
    cells = frame.groupby(["user_id", "cell"]).size().rename("k").reset_index()
    cells["n"] = cells["user_id"].map(frame.groupby("user_id").size())
    return bound_selection.ranked_cells(cells, "cell", {cell: (7 - cell) // 2 for cell in range(8)})  # ties in pairs


@settings(max_examples=examples(60), deadline=None)
@given(others=st.lists(st.lists(st.integers(0, 7), min_size=1, max_size=40), min_size=1, max_size=8),
       added=st.lists(st.integers(0, 7), min_size=1, max_size=300), cap=st.integers(1, 40), first=st.integers(1, 5),
       per_cell=st.integers(1, 3))
def test_one_added_user_moves_a_ranked_anchor_by_at_most_its_sensitivity(others, added, cap, first, per_cell):
    # The ranked terms are the user's expected drop per cell at the public popularity (ties shared
    # alike): they sum to the records the user drops, as SRA's do, so the same cap and reach hold.
    rows = [(u, c) for u, cells in enumerate(others) for c in cells]
    with_added = rows + [(len(others), c) for c in added]
    reach = bound_estimate.anchor_reach(per_cell, cap, 8)
    anchors = [bound_estimate.anchor_value(bound_estimate.anchor_squared_norms(_ranked(r), first, cap, reach))
               for r in (rows, with_added)]
    assert abs(anchors[1] - anchors[0]) <= bound_estimate.anchor_sensitivity(per_cell, cap, 8)


def test_the_ranked_anchor_is_hpas_drop_and_its_negative_control_sras():
    # One user with cells 0, 1 and 4 (scores 3, 3 and 1). At b_1 = 2 HPA drops cell 4 whole; at
    # b_1 = 1 also one of the tied cells 0 and 1, half of each in expectation. SRA drops a share of
    # every cell alike.
    cells, grid = _ranked([(0, 0), (0, 1), (0, 4)]), bound_selection.GRID
    assert bound_estimate.anchor_squared_norms(cells, 2, 10, 10) == grid ** 2
    assert bound_estimate.anchor_squared_norms(cells, 1, 10, 10) == 2 * (grid // 2) ** 2 + grid ** 2
    assert bound_estimate.anchor_squared_norms(cells.drop(columns=["t", "g"]), 2, 10, 10) == 3 * (grid // 3) ** 2


def test_the_spark_ranked_anchors_are_the_reference_anchors(spark, monkeypatch):
    monkeypatch.setattr(bound_bias, "RECORDS_PER_PARTITION", 100)
    rng = np.random.default_rng(5)
    rows = [(int(u), int(rng.integers(1, 9)), str(rng.choice(["a", "b"])))
            for u in range(40) for _ in range(int(rng.integers(1, 4)) ** int(rng.integers(1, 4)))]
    frame = pd.DataFrame(rows, columns=["user_id", "item_id", "attr"])
    scores = np.array([5, 5, 9, 0, 3, 3, 3, 1])  # items 1..8, with ties
    ranking = bound_bias.ItemRanking(ItemDomain(None, "1..8", id_range=(1, 8)), scores)
    anchors = bound_bias.anchor_squared_norms(spark.createDataFrame(frame), 1, 19, (8, 16), bound_selection.GRID,
                                              [bound_bias.ITEMS, bound_bias.EDGES], ranking=ranking)
    n = frame.groupby("user_id").size()
    expected = []
    for cells, reach in ((["item_id"], 8), (["item_id", "attr"], 16)):
        table = frame.groupby(["user_id", *cells]).size().rename("k").reset_index()
        table["n"] = table["user_id"].map(n)
        table = bound_selection.ranked_cells(table, "item_id", dict(zip(range(1, 9), scores.tolist())))
        table["cell"] = list(zip(*(table[c] for c in cells)))
        expected.append(bound_estimate.anchor_squared_norms(table, 1, 19, reach))
    assert anchors == expected and all(a > 0 for a in anchors)
    unranked = bound_bias.anchor_squared_norms(spark.createDataFrame(frame), 1, 19, (8, 16), bound_selection.GRID,
                                               [bound_bias.ITEMS, bound_bias.EDGES])
    assert unranked != anchors


def test_hpa_estimates_the_records_it_drops_not_sras(spark, monkeypatch):
    # 1,600 users each rate item 1 and an item of their own. HPA keeps item 1 at l = 1 (its noisy
    # popularity is far above the others'): each user drops their own item, a bias of 1 record in
    # each of 1,600 cells (norm² 1,600), against the noise l = 2 adds (1,601 cells, ε_items = 0.765
    # at ε = 1: about 1,601·2·(4 − 1)/0.765² ≈ 16,400), so the estimate picks 1. Without the ranking (the negative
    # control) HPA's anchor is SRA's: its sample drops half of item 1 (norm² ≈ 800²), and it picks 2.
    users = 1600
    rows = [(u, 1) for u in range(users)] + [(u, u + 2) for u in range(users)]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id"]))
    common = dict(items=range(1, users + 2), l="auto", l_candidates=[1, 2], epsilon=1, seed=3)
    hpa = dp_spark.hpa(df, d=1, **common)
    assert [e["step"] for e in hpa.ledger][:3] == ["popularity", "choose l: record counts",
                                                   "choose l: bias of item_counts (1/1024 records)"]
    chosen = hpa.report["algorithm"]["chosen"]
    assert chosen["l"] == 1 and set(chosen) == {"l", "record_bins", "record_counts_noisy", "bias_anchors_noisy"}
    assert hpa.report["algorithm"]["parameters"]["l_choice"] == "estimate"
    unranked = bound_bias.anchor_squared_norms
    monkeypatch.setattr(bound_bias, "anchor_squared_norms", lambda *a, ranking=None, **k: unranked(*a, **k))
    assert dp_spark.hpa(df, d=1, **common).report["algorithm"]["chosen"]["l"] == 2
