"""The DP estimate of what bounding removed (release.bounding_estimate): its figures by hand,
its sensitivity over neighbours, its ledger, the coverage of its share bound, and its warning."""

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.release import bounding_estimate as be
from tests.conftest import examples


def _users(counts: dict[int, int]) -> pd.Series:
    return pd.Series(counts, dtype="int64").sort_index()


def test_the_figures_by_hand():
    # l = 4, cap 32: users with 1, 1, 5 and 100 records keep 1 + 1 + 4 + 4 and lose 0 + 0 + 1 + 28.
    plan = be.BoundingPlan(4, Fraction(1, 10))
    assert plan.cap == 32
    assert be.figures(_users({1: 2, 5: 1, 100: 1}), plan) == be.BoundingFigures(kept=10, removed_to_cap=29)
    assert be.figures(_users({}), plan) == be.BoundingFigures(0, 0)


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(st.integers(1, 600), st.integers(1, 5), max_size=8), st.integers(1, 2_000),
       st.integers(1, 40))
def test_one_user_moves_each_figure_by_at_most_its_sensitivity(counts, n, bound):
    """Adding a user with n records (anywhere among others) moves K by min(n, l) <= l and D_B by
    min((n - l)+, B - l) <= B - l: the sensitivities the two ledger steps are noised at."""
    plan = be.BoundingPlan(bound, Fraction(1))
    before = be.figures(_users(counts), plan)
    added = dict(counts)
    added[n] = added.get(n, 0) + 1
    after = be.figures(_users(added), plan)
    kept_entry, removed_entry = plan.entries()
    assert 0 <= after.kept - before.kept <= kept_entry.sensitivity == bound
    assert 0 <= after.removed_to_cap - before.removed_to_cap <= removed_entry.sensitivity == plan.cap - bound
    if n >= plan.cap:  # the bound is tight: such a user moves both by their whole sensitivity
        assert (after.kept - before.kept, after.removed_to_cap - before.removed_to_cap) == (bound, plan.cap - bound)


def test_a_user_far_past_the_cap_adds_only_the_cap():
    """The cap is what bounds D_B's sensitivity: uncapped, this user would add 237 where the
    ledger's noise is for 21 (the audit's control bounding_estimate_uncapped measures that)."""
    plan = be.BoundingPlan(3, Fraction(1))
    assert be.figures(_users({10 * plan.cap: 1}), plan).removed_to_cap == plan.cap - plan.bound == 21


def test_the_ledger_pays_half_of_epsilon_bounding_for_each_figure():
    budget = Budget(Fraction(1, 10))
    section = be.estimate(_users({3: 10, 50: 4}), be.BoundingPlan(5, Fraction(1, 10)), budget, RandomSource(1))
    kept, removed = budget.entries
    assert (kept.step, removed.step) == (be.KEPT_STEP, be.REMOVED_STEP)
    assert kept.epsilon == removed.epsilon == Fraction(1, 20) and budget.spent == Fraction(1, 10)
    assert (kept.sensitivity, kept.noise_scale) == (5, 100) and (removed.sensitivity, removed.noise_scale) == (35, 700)
    assert section["records_kept"]["scale"] == 100 and section["records_removed"]["scale"] == 700
    assert section["cap_per_user"] == 40 and section["epsilon"] == 0.1
    assert isinstance(section["records_kept_noisy"], int)


@pytest.mark.parametrize("epsilon", [Fraction(1, 1000), Fraction(3, 100), Fraction(1)])
def test_under_zcdp_the_two_figures_spend_the_whole_share_of_rho(epsilon):
    """Each figure is a pure step costing ε_each²/2: together they spend ρ_bounding = ε_bounding²/2,
    not half of it (at ε_bounding/2 each they would spend ε_bounding²/4)."""
    from dp_spark.core import zcdp

    plan = be.BoundingPlan(7, epsilon, zcdp=True)
    spent = sum(zcdp.pure_cost(entry.epsilon) for entry in plan.entries())
    assert 0.999 * zcdp.pure_cost(epsilon) <= spent <= zcdp.pure_cost(epsilon)  # epsilon_for_rho rounds down
    assert be.BoundingPlan(7, epsilon).each == epsilon / 2  # pure ε: half each


@pytest.mark.long
@pytest.mark.parametrize("bound, epsilon", [(2, Fraction(1, 100)), (10, Fraction(1, 20)), (30, Fraction(1))])
def test_the_share_bound_covers_the_true_share_kept_at_least_95_percent_of_the_time(bound, epsilon):
    """K/(K + D_B) and so the true share kept (records past the cap only lower it) lie below
    kept_share_at_most_95 in at least 95% of releases: 4,000 seeded draws per point, checked at
    0.95 - 3 standard errors (0.0103), across a small and a large epsilon and bound."""
    rng = np.random.default_rng(bound)
    n = rng.geometric(1 / (4 * bound), size=5_000)  # many users over the cap (records past it too)
    users = pd.Series(n).value_counts().sort_index()
    plan = be.BoundingPlan(bound, epsilon)
    true_share = int(np.minimum(n, bound).sum()) / int(n.sum())
    source = RandomSource(3)
    covered = 0
    for _ in range(4_000):
        kept, removed = be.noisy_figures(users, plan, Budget(epsilon), source)
        high = be.kept_share_at_most(kept, removed, plan)
        covered += high is None or true_share <= high
    assert covered / 4_000 >= 0.95 - 3 * (0.95 * 0.05 / 4_000) ** 0.5


def test_the_share_bound_is_none_only_when_nothing_is_known():
    plan = be.BoundingPlan(1, Fraction(1, 1000))  # half-widths of thousands of records
    assert be.kept_share_at_most(-10**6, -10**6, plan) is None
    assert be.kept_share_at_most(100, -10**6, plan) == 1.0
    assert be.kept_share(0, 0) is None and be.kept_share(-5, 10) == 0.0


def test_the_warning_names_a_table_whose_noise_is_wider_than_its_average_count():
    section = {"records_kept_noisy": 1_000}
    assert be.noise_warning(section, {"item_counts": (100, 9.0)}) is None  # average 10 against ±9
    said = be.noise_warning(section, {"item_counts": (100, 9.0), "edge_counts": (600, 9.0)})
    assert said is not None and "edge_counts" in said and "item_counts" not in said
    assert be.noise_warning({"records_kept_noisy": -50}, {"item_counts": (10, 1.0)}) is not None


def test_plans_refuse_a_bound_or_epsilon_that_cannot_be():
    with pytest.raises(ValueError, match="positive integer"):
        be.BoundingPlan(0, Fraction(1))
    with pytest.raises(ValueError, match="epsilon_bounding"):
        be.BoundingPlan(3, Fraction(0))
