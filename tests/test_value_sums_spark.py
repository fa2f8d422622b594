"""The executors' sums of kept values (dp_spark.aggregates.value_sums) against the
driver's reference: the grid's integers, and each cell's count and sum over the rows the
per-user bound keeps."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from dp_spark.aggregates.value_ranks import value_ranks
from dp_spark.aggregates.value_sums import bounded_sums, cell_sums, units_column
from dp_spark.bounding import keys
from dp_spark.bounding.user_records import sample_selection
from dp_spark.core.clip_range import ClipRange
from dp_spark.core.domain import item_domain_of_ids
from dp_spark.io.validation import SHARE_GRID, validate_records
from dp_spark.release import clip_choice

STARS = ClipRange(1.0, 5.0)


def test_the_executors_put_values_on_the_grid_as_the_driver_does(spark):
    rng = np.random.default_rng(3)
    # Exact ties for the grid of 10 steps on [0, 10] (unit 0.5): x.25 and x.75 fall on k + 1/2.
    ties = [k / 4 for k in range(1, 40, 2)]
    values = [1.0, 5.0, 3.0, 3.001, 3.003, 0.0, 7.5, -0.0, 5e-324, math.inf, -math.inf, *ties,
              *rng.uniform(-1, 7, 2000).tolist(), *(3 + rng.integers(-1000, 1001, 500) * 0.002).tolist()]
    for clip in (STARS, ClipRange(-3.5, 1e6, steps=7), ClipRange(0, 1, steps=10**6), ClipRange(0, 10, steps=10)):
        frame = spark.createDataFrame(pd.DataFrame({"v": values}))
        got = [row[0] for row in frame.select(units_column(F.col("v"), clip)).collect()]
        assert got == [clip.units(v) for v in values]


def test_a_nan_or_a_null_would_be_counted_at_an_end_of_the_range_so_they_must_be_dropped_first(spark):
    # Negative control for the rule units_column states: Spark orders NaN above every number (a
    # NaN becomes high) and greatest skips nulls (a null becomes low).
    frame = spark.range(1).select(F.lit(float("nan")).alias("nan"), F.lit(None).cast("double").alias("null"))
    row = frame.select(units_column(F.col("nan"), STARS), units_column(F.col("null"), STARS)).first()
    assert (row[0], row[1]) == (STARS.steps, -STARS.steps)
    with pytest.raises(ValueError, match="NaN"):
        STARS.units(math.nan)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("l, oversample", [(1, 6.0), (3, 6.0), (50, 6.0), (3, 0.0)])
def test_each_cells_count_and_sum_are_those_of_the_kept_rows(spark, l, oversample, packed):
    """With no oversampling (keep probability l/n) many users are left short of l candidates, so
    the count takes its exact path: the short users' placeholder rows beside the tally's sums."""
    rng = np.random.default_rng(l)
    # Negative item ids: the packed key is taken apart by pmod and exact division, not truncation.
    frame = pd.DataFrame({"user_id": rng.integers(0, 40, 600), "item_id": rng.integers(-6, 6, 600),
                          "rating": rng.choice([0.5, 1.0, 2.5, 3.0, 4.5, 5.0, 6.0], 600)})
    selection = sample_selection(spark.createDataFrame(frame), l, seed=9, oversample=oversample)
    kept = selection.rows().toPandas()
    assert kept.groupby("user_id").size().max() <= l
    got = cell_sums(selection, F.col("item_id"), units_column(F.col("rating"), STARS), STARS, packed)
    kept["units"] = [STARS.units(v) for v in kept["rating"]]
    want = kept.groupby("item_id").agg(count=("units", "size"), _sum=("units", "sum"))
    got = got.groupby("_key")[["count", "_sum"]].sum().rename_axis("item_id")
    assert got.astype("int64").equals(want.astype("int64"))


def test_the_packed_sums_keep_large_ids_and_both_ends_of_the_grid_exactly(spark):
    """Item ids at the two ends of what a packed long can hold, with values at both ends of the
    range: a double anywhere on the way would round the keys (they are far above 2^53)."""
    from dp_spark.aggregates.item_edges import long_key_fits
    from dp_spark.core.domain import item_domain_of_ids

    w = 2 * STARS.steps + 1
    # The ends long_key_fits allows: bottom·w − w ≥ −2^63 and top·w + w ≤ 2^63 − 1.
    top, bottom = (2**63 - 1 - w) // w, -((2**63 - w) // w)
    items = item_domain_of_ids([bottom, 7, top], "ends")
    assert long_key_fits(items, None, w)
    # Negative control: one past either end could overflow on the way (bottom - 1 did, before the bound was fixed).
    assert not long_key_fits(item_domain_of_ids([top + 1], "over"), None, w)
    assert not long_key_fits(item_domain_of_ids([bottom - 1], "under"), None, w)
    # The lowest cell with the lowest value: cell·w + units alone would pass below −2^63.
    frame = spark.createDataFrame([(1, bottom, 5.0), (2, bottom, 1.0), (4, bottom, 1.0), (1, top, 1.0), (3, top, 5.0),
                                   (3, 7, 1.0)], "user_id long, item_id long, rating double")
    bounded, _ = bounded_sums(sample_selection(frame, 5, seed=2), items, "rating", STARS)
    assert bounded.counts.tolist() == [3, 1, 2] and bounded.units.tolist() == [-1000, -1000, 0]


def test_bad_values_are_dropped_before_bounding_and_a_column_of_flags_is_refused(spark):
    from dp_spark.core.domain import item_domain_of_ids
    from dp_spark.errors import DataError
    from dp_spark.io.validation import check_value_schema, validate_records

    frame = spark.createDataFrame([(1, 1, 4.0), (1, 1, float("nan")), (2, 1, None), (3, 1, float("inf")),
                                   (4, 1, float("-inf")), (5, 1, 2.0)], "user_id long, item_id long, value double")
    validated = validate_records(frame, item_domain_of_ids([1], "1"), None, value=True)
    kept = validated.records.toPandas().sort_values("user_id")
    validated.release()
    assert kept["user_id"].tolist() == [1, 5] and kept["value"].tolist() == [4.0, 2.0]
    assert validated.diagnostics["rows_invalid_value"] == 4 and validated.users_by_n.to_dict() == {1: 2}
    flags = spark.createDataFrame([(1, 1, True)], "user_id long, item_id long, value boolean")
    with pytest.raises(DataError, match="must hold numbers"):
        check_value_schema(flags)


def test_the_bounded_sums_carry_the_bound_and_the_grid_they_were_made_with(spark):
    from dp_spark.core.domain import item_domain_of_ids

    # 30 users rate item 1 (4 stars) and item 2 (2 stars) once each; item 3 is in the domain, unrated.
    frame = pd.DataFrame({"user_id": np.repeat(np.arange(30), 2), "item_id": np.tile([1, 2], 30),
                          "rating": np.tile([4.0, 2.0], 30)})
    selection = sample_selection(spark.createDataFrame(frame), 2, seed=1)
    bounded, none = bounded_sums(selection, item_domain_of_ids([1, 2, 3], "1..3"), "rating", STARS)
    assert bounded.counts.tolist() == [30, 30, 0] and bounded.units.tolist() == [15_000, -15_000, 0]
    assert (bounded.bound, bounded.clip, bounded.per_cell, none) == (2, STARS, None, None)


def test_the_cap_keeps_at_most_c_records_per_user_and_item_in_every_cell(spark):
    from dp_spark.core.domain import AttributeDomain, item_domain_of_ids

    # One user with 5 ratings of item 1 (3 as "F", 2 as "M") and one of item 2; l = 6 keeps all six.
    frame = pd.DataFrame({"user_id": [1] * 6, "item_id": [1, 1, 1, 1, 1, 2], "attr": ["F", "F", "F", "M", "M", "F"],
                          "rating": [5.0, 5.0, 5.0, 1.0, 1.0, 3.0]})
    items, attributes = item_domain_of_ids([1, 2], "1..2"), AttributeDomain(("F", "M"))
    selection = sample_selection(spark.createDataFrame(frame), 6, seed=1)
    uncapped, uncapped_edges = bounded_sums(selection, items, "rating", STARS, attributes)
    assert uncapped.counts.tolist() == [5, 1] and uncapped_edges.counts.tolist() == [3, 2, 1, 0]
    capped, edges = bounded_sums(selection, items, "rating", STARS, attributes, cap=2)
    assert capped.counts.tolist() == [2, 1] and edges.counts.reshape(2, 2).sum(axis=1).tolist() == [2, 1]
    assert capped.per_cell == 2 and edges.per_cell == 2
    # The sums are those of the records kept: each F record of item 1 is +1000, each M one −1000.
    kept_f, kept_m = edges.counts[0], edges.counts[1]
    assert edges.units[:2].tolist() == [1000 * kept_f, -1000 * kept_m] and capped.units[0] == edges.units[:2].sum()


@pytest.mark.parametrize("l, oversample, likely", [(3, 6.0, False), (3, 0.0, False), (8, 0.0, True), (50, 6.0, False)])
def test_the_cap_inside_the_counted_selection_keeps_what_the_cap_after_it_keeps(spark, l, oversample, likely):
    """The per-item cap tallied in the selection's own job (the rows past it under a null key) must
    keep the very records the cap after the exact selection keeps (bounding.item_cap), on each of
    the counted paths: direct (no user short), exact with short users redone (no oversampling),
    exact from the start (short users likely); for the means' sums and the counts alike."""
    from dataclasses import replace

    from dp_spark.aggregates import item_edges
    from dp_spark.bounding.item_cap import capped_values

    rng = np.random.default_rng(l)
    frame = pd.DataFrame({"user_id": rng.integers(0, 40, 900), "item_id": rng.integers(-3, 3, 900),
                          "rating": rng.choice([0.5, 1.0, 2.5, 3.0, 4.5, 5.0, 6.0], 900)})
    selection = sample_selection(spark.createDataFrame(frame), l, seed=9, oversample=oversample)
    if likely:
        selection = replace(selection, short_users_likely=True)
    cell, units = F.col("item_id"), units_column(F.col("rating"), STARS)
    for c in (1, 2):
        got = cell_sums(selection, cell, units, STARS, cap=c, item_of_cell=F.col("_value.cell"))
        kept = capped_values(selection.kept_values(F.struct(cell.alias("cell"), units.alias("units"))),
                             F.col("_value.cell"), c)
        want = kept.groupBy(F.col("_value.cell").alias("_key")).agg(F.count(F.lit(1)).alias("count"),
                                                                    F.sum("_value.units").alias("_sum")).toPandas()
        got = got.groupby("_key")[["count", "_sum"]].sum().sort_index()
        want = want.set_index("_key")[["count", "_sum"]].sort_index()
        assert got.astype("int64").equals(want.astype("int64")), (c, got, want)
        assert int(want["count"].sum()) < int(frame.groupby("user_id").size().clip(upper=l).sum())  # it capped
        counts = item_edges.selected_edge_counts(selection, item_domain_of_ids(list(range(-3, 3)), "-3..2"), None, c)
        np.testing.assert_array_equal(counts.reshape(-1), want["count"].to_numpy())


def test_validation_draws_one_usable_record_per_user_and_the_ranks_count_its_values(spark):
    """The clipping range's input: the value of the record validation draws per user (the same
    record as its item, one with a usable value), and each candidate's counts below and at most."""
    rng = np.random.default_rng(8)
    users = rng.integers(1, 60, 600)
    values = rng.choice([0.5, 1.0, 2.0, 3.5, np.nan, np.inf], 600)
    frame = pd.DataFrame({"user_id": users, "item_id": rng.integers(1, 6, 600), "value": values})
    records = keys.with_row_key(spark.createDataFrame(frame))
    validated = validate_records(records, item_domain_of_ids([1, 2, 3, 4, 5], "1..5"), None, value=True,
                                 sample_value=True, one_per_user_salt=keys.sample_salt(4))
    try:
        sampled = validated.one_per_user.toPandas()
        candidates = [0.0, 1.0, 2.0, 3.5, 9.0]
        below, at_most, n = value_ranks(validated.one_per_user, "_sampled_value", candidates)
    finally:
        validated.release()
    usable = frame[np.isfinite(frame["value"])]
    assert sorted(sampled["user_id"]) == sorted(usable["user_id"].unique()) and n == len(sampled)
    own = set(zip(usable["user_id"], usable["item_id"], usable["value"]))
    assert all((u, i, v) in own for u, i, v in zip(sampled["user_id"], sampled["_sampled_item"],
                                                    sampled["_sampled_value"]))
    v = sampled["_sampled_value"].to_numpy()
    assert list(below) == [(v < b).sum() for b in candidates] and list(at_most) == [(v <= b).sum() for b in candidates]


def test_the_ranks_binary_search_places_every_value_as_numpy_does(spark):
    """Values on the candidates, between them, beyond both ends, ±0 and the least double."""
    rng = np.random.default_rng(1)
    candidates = clip_choice.DEFAULT_CANDIDATES
    values = np.concatenate([rng.choice(candidates, 300), rng.uniform(-1e9, 1e9, 300), rng.normal(0, 3, 300),
                             [1e12, -1e12, 0.0, -0.0, 5e-324]])
    frame = spark.createDataFrame(pd.DataFrame({"v": values}))
    for grid in (candidates, (0.0, 1.0), (-1.0, 0.0, 2.0, 3.0, 5.0), (7.0, 8.0)):
        below, at_most, n = value_ranks(frame, "v", grid)
        assert n == values.size
        assert list(below) == [(values < b).sum() for b in grid]
        assert list(at_most) == [(values <= b).sum() for b in grid]


def test_a_record_dropped_for_its_value_counts_in_the_guards_share_with_items_selected_privately(spark):
    """With items selected privately the guards read the share of rows dropped for anything but
    their item ("attr"): an unusable value is such a row (it once was left out of it, so that
    max_dropped_fraction never saw bad values when the items were private)."""
    frame = pd.DataFrame({"user_id": [1, 1, 2, 2], "item_id": [1, 2, 1, 9], "value": [np.nan, 2.0, 3.0, 4.0]})
    validated = validate_records(keys.with_row_key(spark.createDataFrame(frame)),
                                 item_domain_of_ids([1, 2], "1..2"), None, value=True)
    try:
        share = validated.dropped_share
    finally:
        validated.release()
    # User 1: one row of two dropped for its value; user 2: one of two for its item (not in "attr").
    assert share == {"all": 2 * SHARE_GRID // 2, "attr": SHARE_GRID // 2}
