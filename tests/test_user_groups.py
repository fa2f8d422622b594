"""At most l groups per user and c records per group (bounding.user_groups): the bound holds, a
user's kept records do not depend on other users, and the groups and records kept are uniform."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dp_spark.bounding.keys import with_row_key
from dp_spark.bounding.user_groups import bounded_groups


def kept_of(spark, frame: pd.DataFrame, l: int, c: int, seed: int = 3) -> pd.DataFrame:
    records = with_row_key(spark.createDataFrame(frame))
    return bounded_groups(records, "cell", l, c, seed).toPandas()


@pytest.fixture(scope="module")
def ratings() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({"user_id": rng.integers(0, 30, 600), "cell": rng.integers(0, 12, 600),
                         "value": rng.integers(1, 6, 600)})


def test_each_user_keeps_at_most_l_groups_and_c_records_in_each(spark, ratings):
    kept = kept_of(spark, ratings, 3, 2)
    assert set(kept.columns) == set(ratings.columns) | {"row_key"}
    assert kept.groupby("user_id")["cell"].nunique().max() <= 3
    assert kept.groupby(["user_id", "cell"]).size().max() <= 2
    # Every user keeps min(its groups, 3) groups, and min(its records there, 2) in each kept group.
    groups = ratings.groupby("user_id")["cell"].nunique().clip(upper=3)
    assert kept.groupby("user_id")["cell"].nunique().reindex(groups.index, fill_value=0).equals(groups)
    sizes = ratings.groupby(["user_id", "cell"]).size()
    kept_sizes = kept.groupby(["user_id", "cell"]).size()
    assert (kept_sizes == sizes.loc[kept_sizes.index].clip(upper=2)).all()


def test_a_user_s_kept_records_do_not_depend_on_anyone_else(spark, ratings):
    """Another user added (with many records in a third of the groups) and the rows shuffled:
    every other user keeps exactly the same records."""
    heavy = pd.DataFrame({"user_id": 999, "cell": np.arange(0, 12, 3).repeat(40), "value": 3})
    before = kept_of(spark, ratings, 2, 1)
    after = kept_of(spark, pd.concat([heavy, ratings]).sample(frac=1, random_state=1), 2, 1)
    rows = ["user_id", "cell", "value", "row_key"]
    assert after[after.user_id != 999][rows].sort_values(rows).reset_index(drop=True).equals(
        before[rows].sort_values(rows).reset_index(drop=True))


def test_negative_control_a_group_order_that_counts_other_users_is_caught(spark, ratings, monkeypatch):
    """The groups ordered by how many records all users have there (popularity without noise):
    the user added moves every other user's choice, and the test above fails."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from dp_spark.bounding import user_groups

    keyed = user_groups.keys.keyed_position

    def popular_first(key, text_user=False):
        if len(key) == 2 and "cell" in str(key[1]):  # the group's position, not a record's
            return -F.count(F.lit(1)).over(Window.partitionBy(key[1]))
        return keyed(key, text_user)
    monkeypatch.setattr(user_groups.keys, "keyed_position", popular_first)
    with pytest.raises(AssertionError):
        test_a_user_s_kept_records_do_not_depend_on_anyone_else(spark, ratings)


def test_the_groups_and_the_records_kept_are_uniform(spark):
    """3,000 users of 4 groups with 3 records each, l = 2 and c = 1: each group is kept by half the
    users and each record by a third of those, within 4.5 standard errors (fixed seed)."""
    users = 3_000
    frame = pd.DataFrame({"user_id": np.arange(users).repeat(12), "cell": np.tile(np.arange(4).repeat(3), users),
                          "value": np.tile(np.arange(12), users)})
    kept = kept_of(spark, frame, 2, 1, seed=8)
    groups = kept.groupby("cell").size() / users
    assert np.abs(groups - 1 / 2).max() < 4.5 * np.sqrt(0.25 / users)
    records = kept.groupby("value").size() / users  # each record: its group kept (1/2), then 1 of 3
    assert np.abs(records - 1 / 6).max() < 4.5 * np.sqrt((1 / 6) * (5 / 6) / users)


@pytest.mark.parametrize("l, c", [(0, 1), (1, 0), (True, 1), (1.5, 1)])
def test_the_bounds_are_whole_numbers_of_at_least_one(spark, l, c):
    records = with_row_key(spark.createDataFrame(pd.DataFrame({"user_id": [1], "cell": [0], "value": [1]})))
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        bounded_groups(records, "cell", l, c, 1)


def test_the_group_totals_are_those_of_the_kept_records(spark, ratings):
    """Records, distinct users, Σ units and Σ square units (u²/steps, rounded) per group, against
    pandas on the same kept records; a group nobody kept is all zeros."""
    from dp_spark.aggregates.group_totals import group_totals
    from dp_spark.core.clip_range import ClipRange

    stars = ClipRange(1, 5, steps=4)  # units: 1 → −4, 2 → −2, 3 → 0, 4 → 2, 5 → 4
    records = with_row_key(spark.createDataFrame(ratings))
    kept_frame = bounded_groups(records, "cell", 3, 2, seed=3)
    totals = group_totals(kept_frame, "cell", 13, "value", stars)
    kept = kept_frame.toPandas().assign(u=lambda f: [stars.units(v) for v in f["value"]])
    want = kept.groupby("cell").agg(n=("u", "size"), users=("user_id", "nunique"), s=("u", "sum"),
                                    q=("u", lambda u: sum(stars.square_units(x) for x in u))) \
        .reindex(range(13), fill_value=0)
    assert totals.records.tolist() == want["n"].tolist() and totals.users.tolist() == want["users"].tolist()
    assert totals.units.tolist() == want["s"].tolist() and totals.squares.tolist() == want["q"].tolist()
    assert totals.records[12] == totals.users[12] == 0  # no record has group 12
    counts_only = group_totals(kept_frame, "cell", 13)
    assert counts_only.records.tolist() == totals.records.tolist() and counts_only.units is None
