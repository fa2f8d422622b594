"""The groups of an aggregation (families.aggregate.keys): the product of the key columns' public
domains as one long per group, in Spark and on the driver alike."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest

from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.keys import group_keys
from tests.spark_conf import session_settings

KEYS = {"movie": {"range": [10, 13]}, "gender": {"ids": ["F", "M"]}, "age": {"ids": [1, 18, 25]}}


def test_the_groups_are_the_product_first_column_slowest():
    keys = group_keys(["movie", "gender", "age"], KEYS)
    assert len(keys) == 4 * 2 * 3 and keys.strides() == (6, 3, 1)
    frame = keys.frame()
    assert frame.iloc[0].tolist() == [10, "F", 1] and frame.iloc[7].tolist() == [11, "F", 18]
    assert frame.iloc[-1].tolist() == [13, "M", 25]
    assert len(frame.drop_duplicates()) == len(keys)
    assert keys.frame(np.array([23, 0])).values.tolist() == [[13, "M", 25], [10, "F", 1]]


@pytest.mark.parametrize("by, domains, message", [
    ([], {}, "at least one key column"),
    (["movie"], {}, "no values for key column"),
    (["movie"], {"movie": {"range": [1, 2]}, "age": {"ids": [1]}}, "which is not a key column"),
    (["movie", "movie"], {"movie": {"range": [1, 2]}}, "each key column once"),
    (["a", "b", "c"], {k: {"range": [0, 2**21]} for k in "abc"}, "more than"),
    # A key column's values refused in its own name, not as domain.items.
    (["year"], {"year": {"range": [2003, 2000]}}, r"^keys\.year\.range must be \[low, high\]"),
    (["genre"], {"genre": {"ids": []}}, r"^keys\.genre\.ids must be a non-empty list"),
    (["genre"], {"genre": {"values": ["a"]}}, r"^keys\.genre needs exactly one of range, ids"),
    (["day"], {"day": {"range": [datetime.date(2024, 1, 2), datetime.date(2024, 1, 1)]}},
     r"^keys\.day\.range must be \[first, last\] dates"),
    (["day"], {"day": {"ids": [datetime.date(2024, 1, 2), "2024-01-03"]}}, r"^keys\.day mixes dates"),
])
def test_bad_groups_are_refused_before_anything_is_read(by, domains, message):
    with pytest.raises(ConfigError, match=message):
        group_keys(by, domains)


def test_a_key_of_dates_is_a_range_or_a_list_of_days_shown_as_dates():
    first, last = datetime.date(2024, 2, 27), datetime.date(2024, 3, 2)
    keys = group_keys(["day", "gender"], {"day": {"range": [first, last]}, "gender": {"ids": ["F", "M"]}})
    assert len(keys) == 5 * 2  # a leap year's February 29 included
    frame = keys.frame()
    assert frame["day"].iloc[0] == first and frame["day"].iloc[-1] == last
    assert frame["day"].iloc[4] == datetime.date(2024, 2, 29)
    listed = group_keys(["day"], {"day": {"ids": [last, first, first]}})
    assert listed.frame()["day"].tolist() == [first, last]  # sorted, each once


def test_spark_finds_a_record_s_day_from_a_date_a_timestamp_or_a_text(spark):
    keys = group_keys(["day"], {"day": {"range": [datetime.date(2024, 2, 27), datetime.date(2024, 3, 2)]}})
    listed = group_keys(["day"], {"day": {"ids": [datetime.date(2024, 3, 2), datetime.date(1969, 12, 31)]}})
    dates = spark.createDataFrame(pd.DataFrame({"day": [datetime.date(2024, 2, 29), datetime.date(2024, 3, 3),
                                                        datetime.date(1969, 12, 31), None]}))
    assert [r[0] for r in dates.select(keys.cell()).collect()] == [2, None, None, None]
    assert [r[0] for r in dates.select(listed.cell()).collect()] == [None, None, 0, None]
    text = spark.createDataFrame(pd.DataFrame({"day": ["2024-03-02", "2024-02-30", "March", "2024-02-27"]}))
    assert [r[0] for r in text.select(keys.cell()).collect()] == [4, None, None, 0]
    stamps = text.selectExpr("try_to_timestamp(concat(day, ' 23:59:59')) AS day")
    assert [r[0] for r in stamps.select(keys.cell()).collect()] == [4, None, None, 0]


def test_spark_gives_each_record_the_driver_s_group_and_none_outside(spark):
    keys = group_keys(["movie", "gender", "age"], KEYS)
    records = pd.DataFrame({"movie": [10, 13, 12, 14, 11, None], "gender": ["M", "F", "X", "F", "M", "F"],
                            "age": [25, 1, 18, 18, None, 1]})
    frame = spark.createDataFrame(records.astype({"movie": "Int64", "age": "Int64"}))
    cells = [row[0] for row in frame.select(keys.cell()).collect()]
    assert cells == [0 * 6 + 1 * 3 + 2, 3 * 6 + 0 + 0, None, None, None, None]
    # The driver decodes them back to the records' keys.
    assert keys.frame(np.array(cells[:2])).values.tolist() == [[10, "M", 25], [13, "F", 1]]
    # A key column read as text (a CSV's) finds the same groups; text that is no whole number, and a
    # fraction, are in no group (and fail nothing, whatever spark.sql.ansi.enabled says).
    text = frame.select(*[frame[c].cast("string").alias(c) for c in frame.columns])
    assert [row[0] for row in text.select(keys.cell()).collect()] == cells
    odd = spark.createDataFrame(pd.DataFrame({"movie": ["10", "ten", " 12", "11.5"], "gender": ["F"] * 4,
                                              "age": [1.0, 1.0, 18.0, 1.0]}))
    assert [row[0] for row in odd.select(keys.cell()).collect()] == [0, None, 2 * 6 + 0 * 3 + 1, None]


def test_a_listed_key_is_found_by_index_or_by_search_alike(spark):
    """Whole numbers of a short span are looked up by index (keys.DENSE_FACTOR), others by a search:
    the same position for each listed id, and none for a gap, an id outside or one far beyond int's
    range (which fails nothing under ANSI mode)."""
    dense = group_keys(["age"], {"age": {"ids": [25, 1, 18]}})
    sparse = group_keys(["age"], {"age": {"ids": [25, 1, 18, 10**9]}})
    values = [25, 1, 18, 2, 0, 26, -5, 10**9, 2**40, None]
    frame = spark.createDataFrame(pd.DataFrame({"age": pd.array(values, dtype="Int64")}))
    with session_settings(spark, {"spark.sql.ansi.enabled": "true"}):
        by_index = [row[0] for row in frame.select(dense.cell()).collect()]
        by_search = [row[0] for row in frame.select(sparse.cell()).collect()]
    assert by_index == [2, 0, 1] + [None] * 7  # the domain's ids in order: 1, 18, 25
    assert by_search == [2, 0, 1, None, None, None, None, 3, None, None]


@pytest.mark.parametrize("l, cap", [(2, None), (50, None), (50, 2)])
def test_the_histograms_count_the_kept_records_at_their_nearest_candidate(spark, l, cap):
    """Per group and candidate, the kept records (all of a user's with l = 50; a sample with l = 2),
    each at its nearest candidate as Candidates.nearest puts it on the driver (midpoints and values
    beyond the ends included); with a cap, at most that many of a user's records per group."""
    from pyspark.sql import functions as F

    from dp_spark.aggregates.value_histogram import group_histograms
    from dp_spark.bounding.user_records import sample_selection
    from dp_spark.families.aggregate.quantiles import Candidates

    grid = Candidates((1.0, 2.0, 3.5, 5.0))
    rng = np.random.default_rng(l)
    frame = pd.DataFrame({"user_id": rng.integers(0, 15, 300), "cell": rng.integers(0, 4, 300),
                          "value": rng.choice([0.0, 1.0, 1.5, 1.6, 2.75, 3.5, 4.9, 9.0], 300)})
    selection = sample_selection(spark.createDataFrame(frame), l, seed=4)
    got = group_histograms(selection, F.col("cell"), F.col("value"), grid.midpoints().tolist(), 4, cap)
    kept = selection.rows().toPandas()
    want = np.zeros((4, len(grid)), dtype=np.int64)
    np.add.at(want, (kept["cell"].to_numpy(), grid.nearest(kept["value"].to_numpy())), 1)
    if cap is None:
        assert got.tolist() == want.tolist()
        return
    # Capped: min(n, c) of each user's records in each group, among the records kept.
    per_group = kept.groupby(["user_id", "cell"]).size().clip(upper=cap).groupby("cell").sum()
    assert got.sum(axis=1).tolist() == per_group.reindex(range(4), fill_value=0).tolist()
    assert (got <= want).all() and got.sum() < want.sum()
