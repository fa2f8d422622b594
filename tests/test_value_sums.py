"""The public side of sums and means per cell (dp_spark.core.clip_range): the
grid by hand, the sensitivity on random neighbouring inputs and where it is tight, and the mean's
interval against the truth it must cover."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.core.accounting import Accounting
from dp_spark.core.clip_range import ClipRange, SumSensitivity, mean_interval
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from tests.conftest import examples
from tests.test_claims_documented import check_claim, check_docstring_points_to

STARS = ClipRange(1.0, 5.0)  # ratings: centre 3, half-width 2, one unit 0.002


def test_values_are_clipped_centred_and_put_on_the_grid():
    assert (STARS.centre, STARS.half_width, STARS.unit) == (3.0, 2.0, 0.002)
    assert [STARS.units(x) for x in (1.0, 3.0, 5.0, 4.5, 0.0, 7.0)] == [-1000, 0, 1000, 750, -1000, 1000]
    assert STARS.units(math.inf) == 1000 and STARS.units(-math.inf) == -1000
    coarse = ClipRange(0, 10, steps=5)  # unit 1: 7.6 -> 2.6 units -> 3
    assert coarse.units(7.6) == 3 and coarse.value_of(3) == 3.0
    # Exact ties (unit 0.5 around 5) round half to even, as Spark's bround: ±0.5 -> 0, ±1.5 -> ±2.
    halves = ClipRange(0, 10, steps=10)
    assert [halves.units(x) for x in (5.25, 5.75, 4.75, 4.25, 6.25)] == [0, 2, 0, -2, 2]
    with pytest.raises(ValueError, match="NaN"):
        STARS.units(math.nan)


@pytest.mark.parametrize("low, high, steps", [(1, 1, 10), (5, 1, 10), (math.nan, 1, 10), (0, math.inf, 10),
                                              (True, 2, 10), ("0", 1, 10), (0, 1, 0), (0, 1, 1.5),
                                              (0, 5e-324, 1000), (0, 1e-318, 10**6),
                                              (1e16, 1e16 + 2, 1000), (1.0, math.nextafter(1.0, 2.0), 1000),
                                              (0, 10**400, 10)])
def test_bad_clipping_ranges_are_refused(low, high, steps):
    with pytest.raises(ValueError):
        ClipRange(low, high, steps)


@settings(max_examples=examples(300), deadline=None)
@given(st.floats(-1e300, 1e300), st.floats(1e-300, 1e300), st.integers(1, 10**6), st.floats(allow_nan=False))
def test_any_grid_that_is_accepted_puts_its_ends_at_the_ends_and_every_value_between(low, width, steps, value):
    try:
        clip = ClipRange(low, low + width, steps)
    except ValueError:
        return  # refused: a range doubles cannot grid
    assert (clip.units(clip.low), clip.units(clip.high)) == (-steps, steps)
    assert -steps <= clip.units(value) <= steps


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 12), st.data())
def test_one_user_moves_the_sums_by_at_most_the_sensitivity(bound, data):
    # A user keeps at most l records, at most c in a cell; any values, any cells: the vector of
    # cell sums moves by at most l·steps in L1 and √(l·c)·steps in L2.
    per_cell = data.draw(st.integers(1, bound))
    cells = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=bound))
    cells = [cell for i, cell in enumerate(cells) if cells[:i].count(cell) < per_cell]
    values = data.draw(st.lists(st.floats(allow_nan=False), min_size=len(cells), max_size=len(cells)))
    moved: dict[int, int] = {}
    for cell, value in zip(cells, values):
        moved[cell] = moved.get(cell, 0) + STARS.units(value)
    sensitivity = SumSensitivity(bound, per_cell, STARS.steps)
    assert sum(abs(v) for v in moved.values()) <= sensitivity.l1
    assert sum(v * v for v in moved.values()) <= sensitivity.l2_squared


def test_where_the_sensitivity_is_tight():
    # l = 6 records at the top of the range, c = 2 in each of 3 cells: L1 6·1000, L2² 3·(2·1000)².
    moved = [2 * STARS.units(5.0)] * 3
    sensitivity = SumSensitivity(6, 2, STARS.steps)
    assert sum(moved) == sensitivity.l1 and sum(v * v for v in moved) == sensitivity.l2_squared


@pytest.mark.parametrize("bound, per_cell, steps", [(0, 1, 1), (2, 3, 1), (2, 1, 0), (True, 1, 1)])
def test_bad_sensitivities_are_refused(bound, per_cell, steps):
    with pytest.raises(ValueError):
        SumSensitivity(bound, per_cell, steps)


def test_the_mean_is_post_processing_with_an_interval_from_the_corners():
    # Ŝ = 600 units over Ĉ = 100 records: 3 + 0.002·6 = 3.012; corners (600 ± 200)/(100 ± 20).
    estimate = mean_interval(600, 100, 200, 20, STARS)
    assert estimate.published and estimate.mean == pytest.approx(3.012)
    assert estimate.low == pytest.approx(3 + 0.002 * 400 / 120) and estimate.high == pytest.approx(3 + 0.002 * 10)
    # A count whose lower end is not positive: no mean.
    assert not mean_interval(600, 20, 200, 20, STARS).published
    # The interval never leaves the range.
    wide = mean_interval(-90_000, 60, 20_000, 50, STARS)
    assert wide.low == 1.0 and wide.mean == 1.0 and wide.high <= 5.0
    with pytest.raises(ValueError, match="half-widths"):
        mean_interval(600, 100, math.nan, 20, STARS)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.floats(0, 6, allow_nan=False), min_size=1, max_size=40), st.integers(-300, 300),
       st.integers(-5, 5), st.integers(0, 300), st.integers(0, 5))
def test_the_interval_covers_the_kept_records_mean_when_both_figures_are_within_their_widths(
        values, sum_noise, count_noise, sum_width, count_width):
    # The claim of mean_interval: if |Ŝ − S| ≤ h_S and |Ĉ − C| ≤ h_C, the true mean of the kept
    # (clipped, rounded) records is inside the interval, or no mean is published.
    sum_noise = max(-sum_width, min(sum_width, sum_noise))
    count_noise = max(-count_width, min(count_width, count_noise))
    units = [STARS.units(v) for v in values]
    truth = STARS.centre + STARS.value_of(sum(units) / len(units))
    estimate = mean_interval(sum(units) + sum_noise, len(units) + count_noise, sum_width, count_width, STARS)
    if estimate.published:
        assert estimate.low - 1e-12 <= truth <= estimate.high + 1e-12
        assert estimate.low <= estimate.mean <= estimate.high


def test_the_claim_is_documented_beside_the_modules():
    check_claim("docs/value_sums.md", "value_sums")
    for module in ("dp_spark/core/clip_range.py", "dp_spark/release/sum_tables.py"):
        check_docstring_points_to(module, "docs/value_sums.md", "value_sums")


# ---------------------------------------------------------------------------
# The release on the driver (release.sum_tables).


def _bounded(counts, means_in_stars, bound=2):
    from dp_spark.aggregates.value_sums import BoundedSums

    counts = np.asarray(counts)
    units = np.array([c * STARS.units(m) for c, m in zip(counts, means_in_stars)])
    return BoundedSums(counts, units, bound, STARS)


def _pair(epsilon_counts, epsilon_sums, count_noise="laplace", sum_noise="laplace"):
    from dp_spark.release.sum_tables import TablePair

    return TablePair("value_counts", "value_sums", Fraction(epsilon_counts), Fraction(epsilon_sums), count_noise,
                     sum_noise)


def test_the_release_pays_each_table_at_its_sensitivity_and_sums_back_in_values():
    from dp_spark.release import sum_tables as means

    bounded = _bounded([30, 30, 0], [4.0, 2.0, 3.0])
    budget = Budget(Fraction(2))
    table = means.publish_means(bounded, _pair(1, 1), budget, RandomSource(5))
    count_entry, sum_entry = budget.entries
    assert (count_entry.step, count_entry.sensitivity, count_entry.noise_scale) == ("value_counts", 2, 2)
    assert (sum_entry.step, sum_entry.sensitivity, sum_entry.noise_scale) == ("value_sums", 2000, 2000)
    assert budget.spent == 2 and len(table["noisy_count"]) == 3
    # noisy_sum is Σ clip(x) ≈ 30·4 and 30·2 stars: the centred sum back in stars plus m times the count.
    assert table["noisy_sum"][0] == pytest.approx(120, abs=30) and table["noisy_sum"][1] == pytest.approx(60, abs=30)


def test_gaussian_tables_are_paid_by_their_l2_sensitivity_with_the_per_item_cap():
    # l = 4, c = 1: counts L2² = l·c = 4, sums L2² = l·c·steps² = 4·10⁶; their L1 stays l and l·steps.
    from dp_spark.aggregates.value_sums import BoundedSums
    from dp_spark.core import zcdp
    from dp_spark.release import sum_tables as means

    bounded = BoundedSums(np.array([30, 5]), np.array([0, 100]), 4, STARS, per_cell=1)
    budget = Budget(Fraction(1), accounting=Accounting("gaussian", Fraction(1, 2), 1e-6))
    means.publish_means(bounded, _pair(Fraction(1, 2), Fraction(1, 2), "gaussian", "gaussian"), budget,
                        RandomSource(1))
    count_entry, sum_entry = budget.entries
    assert (count_entry.l2_squared, sum_entry.l2_squared) == (4, 4 * 10**6)
    assert (count_entry.sensitivity, sum_entry.sensitivity) == (4, 4000)
    assert count_entry.rho <= zcdp.pure_cost(Fraction(1, 2)) and sum_entry.rho <= zcdp.pure_cost(Fraction(1, 2))
    # Negative control: without the cap the sums' L2² is l² steps², four times as much.
    uncapped = BoundedSums(np.array([30, 5]), np.array([0, 100]), 4, STARS)
    assert means.ledger_entries(uncapped, _pair(1, 1, "gaussian", "gaussian"))[1].l2_squared == 16 * 10**6
    with pytest.raises(ValueError):
        BoundedSums(np.array([1]), np.array([0]), 2, STARS, per_cell=3)


def test_the_means_intervals_cover_at_the_stated_rate_over_all_items():
    # 2,000 items of 40 records at a known mean; α = 0.1, so each figure's half-width is at α/2
    # and an interval may fail for at most 10% of the published items (the union bound; with
    # independent noises about 2·(α/2)·(its share), observed near 1%). A half-width at α, not α/2,
    # would be narrower: the test checks the widths too.
    from dp_spark.core import accuracy
    from dp_spark.release import sum_tables as means

    truth = np.linspace(1.2, 4.8, 2000)
    bounded = _bounded([40] * 2000, truth)
    kept_means = STARS.centre + bounded.units * STARS.unit / 40
    table = pd.DataFrame(means.publish_means(bounded, _pair(Fraction(1, 2), Fraction(1, 2)), Budget(Fraction(1)),
                                             RandomSource(7), alpha=0.1))
    published = table["mean"].notna()
    assert published.sum() > 1000
    misses = ((table["mean_low"] > kept_means + 1e-12) | (table["mean_high"] < kept_means - 1e-12))[published]
    assert misses.mean() <= 0.1
    # The widths: at α/2 for each figure (count scale 4, sum scale 4,000 units).
    width = accuracy.discrete_laplace_halfwidth(Fraction(4), 0.05)
    assert width > accuracy.discrete_laplace_halfwidth(Fraction(4), 0.1)
    row = table.iloc[0]
    first = mean_interval(int(round((row["noisy_sum"] - 3 * row["noisy_count"]) / STARS.unit)),
                          int(row["noisy_count"]), accuracy.discrete_laplace_halfwidth(Fraction(4000), 0.05), width,
                          STARS)
    assert (row["mean_low"], row["mean_high"]) == pytest.approx((first.low, first.high))


@pytest.mark.parametrize("counts, units, bound", [([1, 2], [0], 1), ([-1], [0], 1), ([1], [1001], 1), ([1], [0], 0)])
def test_bad_bounded_sums_are_refused(counts, units, bound):
    from dp_spark.aggregates.value_sums import BoundedSums

    with pytest.raises(ValueError):
        BoundedSums(np.array(counts), np.array(units), bound, STARS)
