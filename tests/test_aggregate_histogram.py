"""The value metrics from one noisy histogram per group (families.aggregate.histogram_metrics): the
metrics with negligible noise against a direct computation, the quantile against its definition,
the ledger and the noise's scale, the half-widths and the rank error against simulation, and the
method's choice in the parameters."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.core.accounting import Accounting
from dp_spark.core.clip_range import ClipRange
from dp_spark.core.discrete_gaussian import discrete_gaussian_variance
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource, discrete_laplace_variance
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate import histogram_metrics as hm
from dp_spark.families.aggregate.family import FAMILY, aggregate_params
from dp_spark.families.aggregate.keys import group_keys
from dp_spark.families.aggregate.metrics import metrics_of
from dp_spark.families.aggregate.noisy_totals import GroupBound
from dp_spark.families.aggregate.params import AggregateParams
from dp_spark.families.aggregate.quantiles import Candidates

STARS = Candidates((1, 2, 3, 4, 5))
ALL = metrics_of(["count", "sum(stars)", "mean(stars)", "variance(stars)", "stddev(stars)",
                  "quantiles(stars, 0.1, 0.5, 0.9)"])
KEYS = group_keys(["movie"], {"movie": {"range": [1, 4]}})


def histograms_of(groups: list[np.ndarray], candidates: Candidates) -> np.ndarray:
    return np.array([np.bincount(candidates.nearest(g), minlength=len(candidates)) for g in groups])


def true_quantile(values: np.ndarray, level: Fraction) -> float:
    """The least value with at least q·n values at most it."""
    ordered = np.sort(values)
    need = level * len(ordered)
    return float(next(v for i, v in enumerate(ordered) if i + 1 >= need))


def test_with_negligible_noise_the_metrics_are_those_of_the_kept_records():
    rng = np.random.default_rng(3)
    groups = [rng.integers(1, 6, n).astype(float) for n in (40, 7, 300, 2)]
    budget = Budget(Fraction(10**9))
    got = hm.publish(histograms_of(groups, STARS), ALL, STARS, GroupBound(2, 3), Fraction(10**9), "laplace",
                     budget, RandomSource(seed=1))
    assert got["count"].tolist() == [40, 7, 300, 2]
    assert got["sum_stars"].tolist() == pytest.approx([g.sum() for g in groups])
    assert got["mean_stars"] == pytest.approx([g.mean() for g in groups])
    assert (got["mean_stars_low"] <= got["mean_stars"]).all() and (got["mean_stars"] <= got["mean_stars_high"]).all()
    assert got["variance_stars"] == pytest.approx([g.var() for g in groups], abs=1e-9)
    assert got["stddev_stars"] == pytest.approx([g.std() for g in groups], abs=1e-9)
    for level, name in ((Fraction(1, 10), "stars_p10"), (Fraction(1, 2), "stars_p50"), (Fraction(9, 10), "stars_p90")):
        assert got[name].tolist() == [true_quantile(g, level) for g in groups], name
    assert [(e.step, e.cells) for e in budget.entries] == [("histogram(stars)", 4 * 5)]
    assert budget.spent == 10**9


def test_values_are_rounded_to_their_nearest_candidate():
    """Off the candidates, the metrics are those of the rounded values (ties to the lower one)."""
    candidates = Candidates((0, 10, 20))
    values = np.array([4.0, 5.0, 6.0, 19.0, 25.0, -3.0])  # 0, 0, 10, 20, 20 (the end), 0 (the end)
    got = hm.columns_of(histograms_of([values], candidates), metrics_of(["sum(v)", "median(v)"]), candidates,
                        hm.ledger_entry(GroupBound(1, 1), "v", Fraction(10**9), "laplace", 1, 3), 0.05)
    assert got["sum_v"].tolist() == [50.0] and got["v_p50"].tolist() == [0.0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=2, max_size=8).filter(lambda h: sum(h) > 0),
       st.fractions(min_value=Fraction(1, 100), max_value=Fraction(99, 100), max_denominator=100))
def test_the_quantile_is_the_least_candidate_whose_running_count_reaches_q(counts, level):
    """On a histogram without noise, against the definition over the values it holds."""
    values = np.repeat(np.arange(len(counts), dtype=float), counts)
    position = hm._quantile_positions(np.array([counts]), level)[0]
    assert float(position) == true_quantile(values, level)


def test_a_group_whose_count_reaches_zero_gets_no_mean_or_variance_and_without_a_count_no_quantile():
    entry = hm.ledger_entry(GroupBound(1, 1), "stars", Fraction(1), "laplace", 3, 5)
    noisy = np.array([[0, 1, 0, -1, 2], [200, 300, 500, 300, 200], [0, 1, 0, -1, 0]])
    got = hm.columns_of(noisy, ALL, STARS, entry, 0.05)
    for name in ("mean_stars", "mean_stars_low", "variance_stars"):
        assert np.isnan(got[name][0]) and not np.isnan(got[name][1]), name
    # Defined, if noisy: from the cells clamped at zero, 0, 1, 0, 0, 2, and the prior's λ ≈ 3.0
    # records spread as the table's cells summed (about 0.13, 0.20, 0.33, 0.20, 0.13).
    assert (got["stars_p10"][0], got["stars_p50"][0], got["stars_p90"][0]) == (2, 3, 5)
    assert np.isnan(got["stars_p50"][2])  # a count of zero: none
    assert got["count"].tolist() == [2, 1500, 0]  # the count is always given
    assert 1 <= got["mean_stars_low"][1] <= got["mean_stars"][1] <= got["mean_stars_high"][1] <= 5


def test_a_group_of_noise_leans_on_the_table_s_quantiles_and_a_large_one_keeps_its_own():
    """λ = √K·sd records spread as all groups' cells summed: a group of noise alone (sd about 56 a
    cell here, a noisy count of 10) gets the table's median; a group of 10,000 records keeps its
    own, against the table's."""
    entry = hm.ledger_entry(GroupBound(20, 1), "stars", Fraction(1, 2), "laplace", 3, 5)
    assert hm.prior_weight(entry, 5) == pytest.approx(np.sqrt(5) * hm.cell_sd(entry))
    noisy = np.array([[0, 0, 0, 30_000, 0], [-40, 20, -10, 45, -5], [9_000, 500, 200, 200, 100]])
    got = hm.columns_of(noisy, metrics_of(["median(stars)"]), STARS, entry, 0.05)["stars_p50"]
    assert got[1] == 4 and got[2] == 1  # noise: the table's median; a large group: its own
    assert hm.with_prior(noisy, entry).sum(axis=1) == pytest.approx(
        np.maximum(noisy, 0).sum(axis=1) + hm.prior_weight(entry, 5))
    # The shares are of the cells summed, then clamped: the noise of empty groups cancels (clamped
    # first, these two would spread a third of the prior over the other stars).
    cancelling = np.array([[0, 0, 0, 100, 0], [30, -30, 30, -30, 0], [-30, 30, -30, 30, 0]])
    prior = hm.with_prior(cancelling, entry) - np.maximum(cancelling, 0)
    assert prior[0] == pytest.approx(hm.prior_weight(entry, 5) * np.array([0, 0, 0, 1, 0]))


def test_the_variance_stays_in_the_range_s_widest():
    entry = hm.ledger_entry(GroupBound(1, 1), "stars", Fraction(10**6), "laplace", 1, 5)
    noisy = np.array([[100, -60, -60, -60, 100]])  # a second moment beyond what values in [1, 5] can have
    assert hm.columns_of(noisy, metrics_of(["variance(stars)"]), STARS, entry, 0.05)["variance_stars"][0] == 4.0


def test_the_sensitivity_is_that_of_l_groups_of_c_records():
    """A user with c records in each of l groups, all in one cell, moves the histograms by L1 l·c
    and L2² l·c² exactly; spread over cells, by less in L2."""
    bound = GroupBound(groups_per_user=3, records_per_group=2)
    assert hm.sensitivity(bound) == (6, 12)
    others = [np.array([1.0, 3.0]), np.array([5.0]), np.array([]), np.array([2.0])]
    for theirs in ([5.0, 5.0], [1.0, 5.0]):
        added = [np.concatenate([g, theirs]) if i < 3 else g for i, g in enumerate(others)]
        moved = histograms_of(added, STARS) - histograms_of(others, STARS)
        assert np.abs(moved).sum() == 6 and (moved * moved).sum() <= 12


def test_one_ledger_step_at_the_share_and_sensitivity():
    budget = Budget(Fraction(1))
    hm.publish(np.zeros((6, 5), dtype=np.int64), metrics_of(["mean(v)"]), STARS, GroupBound(4, 2), Fraction(1, 2),
               "laplace", budget, RandomSource(seed=2))
    (entry,) = budget.entries
    assert (entry.step, entry.sensitivity, entry.noise_scale, entry.cells) == ("histogram(v)", 8, 16, 30)
    assert budget.spent == Fraction(1, 2)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_noise_has_the_ledger_s_scale_and_the_half_widths_hold(noise):
    """4,000 empty groups of 5 cells (20,000 draws): each cell's noise variance matches its entry
    (relative standard error about √(5/n) ≈ 1.6% for the Laplace; the tolerance is 6%), and the
    count's and the sum's 90% half-widths are exceeded in at most 10% of the groups, give or take 3
    binomial standard errors (1.4%)."""
    groups, bound = 4_000, GroupBound(2, 3)
    budget = (Budget(Fraction(1, 4), accounting=Accounting("gaussian", Fraction(1, 4), 1e-6))
              if noise == "gaussian" else Budget(Fraction(1)))
    share = budget.total
    got = hm.publish(np.zeros((groups, 5), dtype=np.int64), metrics_of(["count", "sum(v)"]), STARS, bound, share,
                     noise, budget, RandomSource(seed=9))
    (entry,) = budget.entries
    expected = discrete_gaussian_variance if noise == "gaussian" else discrete_laplace_variance
    assert got["count"].var() / 5 == pytest.approx(expected(entry.noise_scale), rel=0.06)
    for name, weights in (("count", np.ones(5)), ("sum_v", np.array(STARS.values))):
        h = hm.combination_halfwidth(entry, weights, 0.1)
        rate = float(np.mean(np.abs(got[name]) > h))
        assert rate <= 0.1 + 3 * np.sqrt(0.1 * 0.9 / groups), (name, rate)


def test_combination_half_widths_take_the_least_bound():
    laplace = hm.ledger_entry(GroupBound(1, 1), "v", Fraction(1), "laplace", 1, 5)
    assert hm.combination_halfwidth(laplace, [0, 0], 0.05) == 0.0
    one = hm.combination_halfwidth(laplace, [1], 0.05)
    assert one == pytest.approx(hm.halfwidth(laplace, 0.05))  # one cell: its exact half-width
    assert hm.combination_halfwidth(laplace, np.ones(100), 0.05) < 100 * one  # Chebyshev beats the union
    with pytest.raises(ValueError, match="alpha"):
        hm.combination_halfwidth(laplace, [1], 0)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_rank_error_holds_at_its_level(noise):
    """2,000 groups of 3,000 values over 5 candidates, at l = 20, whose median lies near a change
    of candidate: the chosen median is within the bound's ranks in at least 95% of them (β = 0.05)."""
    rng = np.random.default_rng(4)
    groups, bound, level = 2_000, GroupBound(20, 1), Fraction(1, 2)
    truth = rng.multinomial(3_000, [0.1, 0.15, 0.25, 0.3, 0.2], size=groups)  # a median near a change
    budget = (Budget(Fraction(1, 2), accounting=Accounting("gaussian", Fraction(1, 2), 1e-6))
              if noise == "gaussian" else Budget(Fraction(1, 2)))
    got = hm.publish(truth, metrics_of(["median(v)"]), Candidates((0, 1, 2, 3, 4)), bound, budget.total, noise,
                     budget, RandomSource(seed=5))
    (entry,) = budget.entries
    bound_ranks = hm.rank_error(entry, 5, level, 0.05)
    at_most = np.cumsum(truth, axis=1)
    assert not np.isnan(got["v_p50"]).any()  # every count's interval stays far above zero
    chosen = got["v_p50"].astype(int)
    rows = np.arange(groups)
    below = at_most[rows, chosen] - truth[rows, chosen]
    distance = np.maximum(0, np.maximum(below - 1_500, 1_500 - at_most[rows, chosen]))
    assert 0 < bound_ranks < 3_000
    assert np.mean(distance > bound_ranks) <= 0.05
    # Negative control: the noise does move the medians, so a bound of zero would fail here.
    assert np.mean(distance > 0) > 0.05


def params(**given) -> AggregateParams:
    base = dict(keys=KEYS, metrics=metrics_of(["count", "mean(stars)"]), bound=GroupBound(5, 1),
                clip=ClipRange(1, 5))
    return AggregateParams(**{**base, **given})


def test_auto_takes_the_histogram_for_few_given_candidates_where_its_noise_is_lower():
    """For the stars: with a quantile always; else when S_h·Σ(b_k − m)² = 10·S_h is below
    S_t·((5 − 1)/2)² = 4·S_t (S the steps sharing the budget): a variance (3 tables), not a mean
    alone (2 tables)."""
    def method(*metrics, **given):
        return params(candidates=STARS, metrics=metrics_of(list(metrics)), **given).method
    assert method("median(stars)") == "histogram"
    assert method("count", "mean(stars)", "variance(stars)") == "histogram"
    assert method("count", "mean(stars)") == "tables"
    assert method("users", "mean(stars)", "variance(stars)") == "tables"  # 2·10 against 4·4
    assert method("count", "mean(stars)", method="histogram") == "histogram"
    assert method("median(stars)", method="tables") == "tables"
    assert params(metrics=metrics_of(["count", "median(stars)"])).method == "tables"  # 101 by default
    assert params(candidates=Candidates.evenly(1, 5, 33), metrics=metrics_of(["median(stars)"])).method == "tables"
    histogram = params(candidates=STARS, metrics=metrics_of(["count", "variance(stars)"]))
    assert histogram.steps() == ("histogram(stars)",)
    with_users = params(candidates=STARS, metrics=metrics_of(["users", "median(stars)"]))
    assert with_users.steps() == ("users", "histogram(stars)")
    assert with_users.split(Fraction(1)) == {"users": Fraction(1, 2), "histogram(stars)": Fraction(1, 2)}


def test_the_histogram_method_is_refused_where_it_cannot_answer():
    with pytest.raises(ConfigError, match="answers the metrics of a value"):
        params(metrics=metrics_of(["count"]), clip=None, method="histogram")
    with pytest.raises(ConfigError, match="must lie in the value's range"):
        params(candidates=Candidates((0, 1, 2)), method="histogram")
    with pytest.raises(ConfigError, match="method must be one of"):
        params(method="tree")
    with pytest.raises(ConfigError, match="no metric is a median"):
        params(candidates=STARS, method="tables")
    assert len(params(method="histogram").candidates) == 101  # without candidates: evenly over the range


@pytest.mark.unit
@pytest.mark.parametrize("c, counted", [(1, "users"), (2, "records kept")])
def test_a_mean_s_interval_names_a_group_s_users_when_each_counts_once(c, counted):
    params = aggregate_params(by="movie", keys={"movie": range(1, 11)}, metrics=["mean(stars)", "variance(stars)"],
                              groups_per_user=5, records_per_group=c, low=1, high=5, candidates=[1, 2, 3, 4, 5],
                              method="histogram")
    stated = FAMILY.accuracy(params, Fraction(1), None, params.split(Fraction(1)), 0.05)
    assert stated["groups"]["mean_stars"].counted == counted
