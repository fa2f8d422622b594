"""Guards' limits on an aggregation (families.aggregate.coverage, release.guards): the figures
counted per user as the guards' claim needs them, and a release refused on their noisy values
before the metrics' noise; the coverage for an operator who asks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.errors import GuardRefused
from dp_spark.families.aggregate import coverage
from dp_spark.families.aggregate.family import aggregate_params
from dp_spark.release import guards


def _ratings() -> pd.DataFrame:
    """Users with 1 to 6 ratings of movies 1 to 12, some outside the keys (movies 11, 12) or with
    no value; rows with a blank or null user id belong to no user."""
    rng = np.random.default_rng(3)
    rows = [(str(u), int(rng.integers(1, 13)), rng.choice([1.0, 4.0, np.nan], p=[0.45, 0.45, 0.1]))
            for u in range(200) for _ in range(int(rng.integers(1, 7)))]
    return pd.DataFrame(rows + [("", 1, 3.0), (None, 2, 3.0), (None, 12, 3.0)], columns=["user_id", "movie", "stars"])


@pytest.mark.spark
def test_the_figures_are_the_users_their_shares_outside_and_the_users_over_the_bound(spark):
    frame = _ratings()
    params = aggregate_params(by="movie", keys={"movie": range(1, 11)}, metrics=["mean(stars)"], groups_per_user=2,
                              records_per_group=1, low=1, high=5)
    figures, said = coverage.counted(spark.createDataFrame(frame), params)
    users = frame[frame["user_id"].notna() & (frame["user_id"] != "")]  # null and blank ids are no user
    inside = users["movie"].between(1, 10) & users["stars"].notna()
    per_user = users.assign(inside=inside).groupby("user_id")["inside"].agg(["size", "sum"])
    share = (np.floor(guards.SHARE_GRID * (per_user["size"] - per_user["sum"]) / per_user["size"])).sum()
    kept = users[inside].groupby("user_id")["movie"]
    over = ((kept.nunique() > 2) | (kept.agg(lambda m: m.value_counts().max()) > 1)).sum()
    assert (figures.users, figures.dropped_share, figures.users_truncated) == (len(per_user), int(share), int(over))
    assert said.rows_read == len(users) and said.rows_dropped == int((~inside).sum())


@pytest.mark.spark
def test_a_release_is_refused_on_its_noisy_figures_before_its_own_noise(spark):
    df = spark.createDataFrame(_ratings())
    arguments = {"by": "movie", "metrics": ["count"], "groups_per_user": 2, "epsilon": 20, "seed": 1}
    with pytest.raises(GuardRefused, match="outside the public domain"):
        dp_spark.aggregate(df, keys={"movie": range(1, 3)}, guards={"epsilon": 10, "max_dropped_fraction": 0.5},
                           **arguments)
    release = dp_spark.aggregate(df, keys={"movie": range(1, 13)}, guards={"epsilon": 10, "max_dropped_fraction": 0.5,
                                                                             "max_truncated_fraction": 0.9},
                                 **arguments)
    assert release.report["guards"]["dropped_fraction_noisy"] < 0.1
    assert [e["step"] for e in release.ledger][:2] == ["guard: users", "guard: share of rows outside the domain"]


@pytest.mark.spark
@pytest.mark.parametrize("added", [
    [("heavy", m, 4.0) for m in range(1, 13) for _ in range(3)],  # over the bound, a quarter outside the keys
    [("outside", 12, 4.0)] * 5,  # all outside
    [(" 7 ", 3, 1.0), ("7.0", 4, np.nan)],  # an existing user's id spelled two ways: still that user
])
def test_one_user_moves_each_figure_by_at_most_its_sensitivity(spark, added):
    params = aggregate_params(by="movie", keys={"movie": range(1, 11)}, metrics=["mean(stars)"], groups_per_user=2,
                              low=1, high=5)
    frame = _ratings()
    before, _ = coverage.counted(spark.createDataFrame(frame), params)
    after, _ = coverage.counted(spark.createDataFrame(pd.concat([frame, pd.DataFrame(
        added, columns=frame.columns)])), params)
    assert abs(after.users - before.users) <= 1
    assert abs(after.dropped_share - before.dropped_share) <= guards.SHARE_GRID
    assert abs(after.users_truncated - before.users_truncated) <= 1
    assert (after.users, after.dropped_share, after.users_truncated) != (before.users, before.dropped_share,
                                                                         before.users_truncated)
