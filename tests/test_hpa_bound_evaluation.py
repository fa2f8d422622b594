"""bench/hpa_bound_evaluation.py's model of HPA's error given its popularity, by hand: the
benchmark's claims about HPA's l = "auto" rest on it (docs/bound_selection.md, "HPA")."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import hpa_bound_evaluation as hpa_eval  # noqa: E402


def _table(records):
    table = pd.DataFrame(records, columns=["user_id", "item_id"]).groupby(["user_id", "item_id"]).size()
    table = table.rename("k").reset_index()
    table["n"] = table.groupby("user_id")["k"].transform("sum")
    return table


def test_the_error_is_each_items_expected_drop_squared_plus_the_ties_variance():
    # User 1: items 0 (score 9), 1 and 2 (both 5), one record each; user 2: item 1 twice.
    table = _table([(1, 0), (1, 1), (1, 2), (2, 1), (2, 1)])
    position = table["item_id"].to_numpy()
    rows = hpa_eval.ranked(table, np.array([9, 5, 5]), position)
    errors = hpa_eval.hpa_errors(rows, 3, [1, 2, 3])
    # l = 1: user 1 keeps item 0 and drops 1 and 2 whole; user 2 drops one of its two records of
    # item 1 (a tie group of 2, no variance: k = g). Item 1 loses 1 + 1, item 2 loses 1: 4 + 1.
    assert errors[1] == pytest.approx(5)
    # l = 2: user 1 keeps one of items 1 and 2 at random: each loses 1/2 in expectation, with
    # variance 1/4 each; user 2 keeps both. 1/4 + 1/4 + 1/4 + 1/4.
    assert errors[2] == pytest.approx(1)
    assert errors[3] == 0


def test_the_popularity_sample_takes_one_record_per_user_uniformly():
    # User 1 has 3 records of item 0 and 1 of item 1; user 2 one of item 2: item 0 is drawn with
    # probability 3/4, and every draw counts one record per user.
    table = _table([(1, 0), (1, 0), (1, 0), (1, 1), (2, 2)])
    rng = np.random.default_rng(1)
    draws = np.array([hpa_eval.sampled_counts(table, table["item_id"].to_numpy(), 3, rng) for _ in range(4000)])
    assert (draws.sum(axis=1) == 2).all() and (draws[:, 2] == 1).all()
    assert draws[:, 0].mean() == pytest.approx(0.75, abs=0.03)  # 4 s.e. of 4,000 draws: 0.027


def test_an_item_dropped_whole_alone_in_its_group_counts_one_record_and_no_variance():
    # User 1: item 0 (score 9) and item 1 (score 5), one record each. At l = 1 item 1 is its own
    # group of one, all dropped: a bias of 1, and none of the 0/0 a hypergeometric of one record
    # would give.
    table = _table([(1, 0), (1, 1)])
    rows = hpa_eval.ranked(table, np.array([9, 5]), table["item_id"].to_numpy())
    assert hpa_eval.hpa_errors(rows, 2, [1]) == {1: 1.0}


def test_the_estimates_picks_are_the_products_choice_on_the_draws_ranking():
    # 300 users who each rate items 0 .. 3 (scores 9, 8, 7, 6), 50 who rate item 0 alone, at ε = 5:
    # every bound from 4 keeps all, and the noise grows with the bound, so without noise on the
    # statistics the estimate picks 4; with it, the picks are a distribution over the range.
    table = _table([(u, i) for u in range(300) for i in range(4)] + [(300 + u, 0) for u in range(50)])
    rows = hpa_eval.ranked(table, np.array([9, 8, 7, 6]), table["item_id"].to_numpy())
    users_by_n = table.groupby("user_id")["n"].first().value_counts()
    setting = hpa_eval.HpaSetting(5.0, "laplace")
    auto = hpa_eval.replace(setting.params("auto", hpa_eval.bound_objective.ITEMS), choice="estimate")
    domains = hpa_eval.Domains(range(4))
    split = setting.split_of(auto, domains)
    assert hpa_eval.estimate_picks(rows, users_by_n, setting, auto, domains, split, 0, 1) == {4: 1.0}
    picks = hpa_eval.estimate_picks(rows, users_by_n, setting, auto, domains, split, 20, 1)
    assert sum(picks.values()) == pytest.approx(1) and set(picks) <= set(range(1, 257)) and picks.get(4, 0) > 0.5
