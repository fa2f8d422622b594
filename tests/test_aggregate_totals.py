"""Counts, users, sums, means and variances per group (families.aggregate.noisy_totals): the tables
each metric needs, their sensitivities, the ledger, the metrics with negligible noise against a
direct computation, and the noise at its scale."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dp_spark.aggregates.group_totals import GroupTotals
from dp_spark.core.accounting import Accounting
from dp_spark.core.clip_range import ClipRange
from dp_spark.core.discrete_gaussian import discrete_gaussian_variance
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource, discrete_laplace_variance
from dp_spark.families.aggregate import noisy_totals
from dp_spark.families.aggregate.metrics import metrics_of
from dp_spark.families.aggregate.noisy_totals import GroupBound, tables_for

STARS = ClipRange(1, 5, steps=4)  # units -4..4, half a star each: the grid holds every star
ALL = metrics_of(["count", "users", "sum(stars)", "mean(stars)", "variance(stars)", "stddev(stars)"])
SHARES = {table: Fraction(1, 4) for table in noisy_totals.TABLES}


def totals_of(groups: list[list[tuple[int, float]]], clip: ClipRange) -> GroupTotals:
    """The totals of kept (user, value) records per group, computed directly."""
    units = [[clip.units(v) for _, v in g] for g in groups]
    return GroupTotals(np.array([len(g) for g in groups]), np.array([len({u for u, _ in g}) for g in groups]),
                       np.array([sum(u) for u in units]),
                       np.array([sum(clip.square_units(x) for x in u) for u in units]))


def test_each_metric_needs_its_tables():
    assert tables_for(metrics_of(["users"])) == ("users",)
    assert tables_for(metrics_of(["sum(v)"])) == ("count", "sum")  # centred sums need the count back
    assert tables_for(metrics_of(["stddev(v)", "count"])) == ("count", "sum", "sum of squares")
    assert tables_for(metrics_of(["median(v)"])) == ()  # the quantiles are chosen, not noised


def test_the_sensitivities_are_those_of_l_groups_of_c_records():
    bound = GroupBound(groups_per_user=3, records_per_group=2)
    assert bound.sensitivity("count") == (6, 12)  # L1 l·c, L2² l·c²
    assert bound.sensitivity("users") == (3, 3)
    assert bound.sensitivity("sum", steps=10) == (60, 1_200)  # l·c·steps, l·c²·steps²
    assert bound.sensitivity("sum of squares", steps=10) == (60, 1_200)  # a square is at most steps units
    with pytest.raises(ValueError, match="records_per_group must be an integer >= 1"):
        GroupBound(3, 0)


def test_a_user_moves_every_table_by_at_most_its_sensitivity():
    """Direct check: a user with c records at the range's end in each of l groups, added to
    other users' records, moves each table by its L1 and L2² exactly (the worst case)."""
    bound, clip = GroupBound(3, 2), ClipRange(0, 10, steps=10)
    others = [[(1, 3.0), (2, 7.5)], [(1, 10.0)], [], [(4, 0.0)]]
    added = [g + ([(9, 10.0), (9, 10.0)] if i < 3 else []) for i, g in enumerate(others)]
    before, after = totals_of(others, clip), totals_of(added, clip)
    for table, field in (("count", "records"), ("users", "users"), ("sum", "units"), ("sum of squares", "squares")):
        moved = getattr(after, field) - getattr(before, field)
        l1, l2_squared = bound.sensitivity(table, clip.steps)
        assert np.abs(moved).sum() <= l1 and (moved * moved).sum() <= l2_squared, table
    # The sums' worst case is met: values at the range's end, the farthest from its centre.
    assert np.abs(after.units - before.units).sum() == bound.sensitivity("sum", clip.steps)[0]


def test_with_negligible_noise_the_metrics_are_those_of_the_kept_records():
    rng = np.random.default_rng(3)
    groups = [[(int(u), float(v)) for u, v in zip(rng.integers(0, 30, n), rng.integers(1, 6, n))]
              for n in (40, 7, 300, 1)]
    budget = Budget(Fraction(10**9))
    shares = {table: Fraction(10**9, 4) for table in noisy_totals.TABLES}
    got = noisy_totals.publish(totals_of(groups, STARS), ALL, GroupBound(2, 3), STARS, shares, "laplace", budget,
                               RandomSource(seed=1))
    values = [np.array([v for _, v in g]) for g in groups]
    assert got["count"].tolist() == [40, 7, 300, 1]
    assert got["users"].tolist() == [len({u for u, _ in g}) for g in groups]
    assert got["sum_stars"].tolist() == pytest.approx([v.sum() for v in values])
    assert got["mean_stars"] == pytest.approx([v.mean() for v in values])
    assert (got["mean_stars_low"] <= got["mean_stars"]).all() and (got["mean_stars"] <= got["mean_stars_high"]).all()
    assert got["variance_stars"] == pytest.approx([v.var() for v in values], abs=1e-9)
    assert got["stddev_stars"] == pytest.approx([v.std() for v in values], abs=1e-9)
    assert [e.step for e in budget.entries] == ["count", "users", "sum(stars)", "sum of squares(stars)"]
    assert budget.spent == 10**9


def test_the_ledger_names_each_table_at_its_sensitivity_and_share():
    bound, clip = GroupBound(4, 2), ClipRange(0, 100, steps=1000)
    budget = Budget(Fraction(1))
    totals = GroupTotals(*(np.zeros(6, dtype=np.int64) for _ in range(4)))
    noisy_totals.publish(totals, metrics_of(["mean(v)", "variance(v)"]), bound, clip,
                         {"count": Fraction(1, 2), "sum": Fraction(1, 4), "sum of squares": Fraction(1, 4)},
                         "laplace", budget, RandomSource(seed=2))
    count, total, squares = budget.entries
    assert (count.step, count.sensitivity, count.noise_scale, count.cells) == ("count", 8, 16, 6)
    assert (total.step, total.sensitivity, total.noise_scale) == ("sum(v)", 8_000, 32_000)
    assert total.value_unit == Fraction(clip.unit)  # the noise is in grid units of 0.1
    assert (squares.step, squares.sensitivity) == ("sum of squares(v)", 8 * 1000)
    assert squares.value_unit == Fraction(clip.unit * clip.unit * clip.steps)
    assert budget.spent == 1


def test_under_zcdp_each_table_gets_discrete_gaussian_noise_at_its_l2():
    bound = GroupBound(4, 2)
    rho = Fraction(1, 2)
    budget = Budget(rho, accounting=Accounting("gaussian", rho, 1e-6))
    totals = GroupTotals(np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64))
    noisy_totals.publish(totals, metrics_of(["count", "users"]), bound, None,
                         {"count": Fraction(1, 2), "users": Fraction(1, 2)}, "gaussian", budget, RandomSource(seed=2))
    count, users = budget.entries
    assert count.l2_squared == 4 * 2 * 2 and users.l2_squared == 4
    # σ² = Δ₂²/ε_k² for the share's pure-ε equivalent ε_k = 1/2, at least (rounded up for the sampler).
    assert float(count.noise_scale) == pytest.approx(16 / 0.25, rel=1e-6)
    assert sum(e.rho for e in budget.entries) <= rho


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_noise_has_the_ledger_s_scale(noise):
    """20,000 empty groups: each table's noise variance matches its entry (the sample variance's
    relative standard error is about √(5/n) ≈ 1.6% for the Laplace, √(2/n) for the Gaussian; the
    tolerance is 6%)."""
    groups, bound = 20_000, GroupBound(2, 3)
    zeros = GroupTotals(*(np.zeros(groups, dtype=np.int64) for _ in range(4)))
    shares = {"count": Fraction(1, 2), "sum": Fraction(1, 2)}
    budget = (Budget(Fraction(1, 4), accounting=Accounting("gaussian", Fraction(1, 4), 1e-6))
              if noise == "gaussian" else Budget(Fraction(1)))
    got = noisy_totals.publish(zeros, metrics_of(["count", "sum(stars)"]), bound, STARS, shares, noise, budget,
                               RandomSource(seed=9))
    count_entry, sum_entry = budget.entries
    expected = (discrete_gaussian_variance if noise == "gaussian" else discrete_laplace_variance)
    assert got["count"].var() == pytest.approx(expected(count_entry.noise_scale), rel=0.06)
    sum_noise = (got["sum_stars"] - STARS.centre * got["count"]) / STARS.unit  # back to grid units
    assert sum_noise.var() == pytest.approx(expected(sum_entry.noise_scale), rel=0.06)


def test_variances_stay_in_the_range_s_widest_and_go_where_the_mean_goes():
    """Noise can push Σv²/n − mean² outside [0, ((high − low)/2)²]: it is kept inside; a group
    whose count's lower end is not positive gets no mean and no variance."""
    clip = ClipRange(0, 10, steps=10)
    units, squares, counts = np.array([0, 50, -50]), np.array([0, 0, 10**5]), np.array([5, 10, 10])
    means = np.array([np.nan, 10.0, 0.0])
    got = noisy_totals.variances(units, squares, counts, means, clip)
    assert np.isnan(got[0]) and got[1] == 0 and got[2] == 25


def test_a_value_metric_without_its_range_is_refused():
    with pytest.raises(ValueError, match="needs the value's clipping range"):
        noisy_totals.publish(GroupTotals(np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)),
                             metrics_of(["sum(v)"]), GroupBound(1, 1), None, SHARES, "laplace", Budget(1),
                             RandomSource(seed=1))
    with pytest.raises(ValueError, match="taken without a value"):
        noisy_totals.publish(GroupTotals(np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)),
                             metrics_of(["sum(v)"]), GroupBound(1, 1), STARS, SHARES, "laplace", Budget(1),
                             RandomSource(seed=1))
