"""An aggregation's value range chosen privately (low or high "auto": families.aggregate.range_choice):
checked with the config, a tenth of ε paid first, the metrics clipped to the chosen range and their
candidates made over it; the draw of one value per user reads the user's own records alone."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate import range_choice
from dp_spark.families.aggregate.family import FAMILY, aggregate_params
from dp_spark.release import clip_choice

KEYS = {"movie": range(1, 4)}


@pytest.mark.unit
def test_the_parameters_hold_the_widest_range_until_the_choice():
    params = aggregate_params("movie", KEYS, ["mean(stars)", "median(stars)"], 2, low="auto", high=5)
    assert params.range_choice == range_choice.RangeChoice(None, 5.0, clip_choice.DEFAULT_CANDIDATES, 1000)
    assert (params.clip.low, params.clip.high) == (clip_choice.DEFAULT_CANDIDATES[0], 5.0)
    split = params.split(Fraction(1))
    assert split["epsilon_clip"] == Fraction(1, 10) and sum(split.values()) == 1
    assert params.split_keys()[0] == "epsilon_clip"
    section = FAMILY.report_section(params)["parameters"]
    assert (section["low"], section["high"], len(section["clip_candidates"])) == ("auto", 5.0, 177)
    chosen = range_choice.at_range(params, 1.0, 5.0)
    assert (chosen.clip.low, chosen.clip.high, chosen.range_choice) == (1.0, 5.0, None)
    assert chosen.candidates.values[0] == 1.0 and chosen.candidates.values[-1] == 5.0  # made over the chosen range


@pytest.mark.unit
@pytest.mark.parametrize("arguments, message", [
    (dict(low="auto", high=5, candidates=[1, 2, 3]), "candidates fix the values"),
    (dict(low=1, high=5, clip_candidates=[0, 1]), "used only with low or high \"auto\""),
    (dict(low="auto", high=5, clip_candidates=[6, 7]), "clip_candidates has no value below high"),
    (dict(low="auto", high="x"), "high must be a finite number or \"auto\""),
    (dict(low="auto", high="auto", clip_candidates=[1]), "clip_candidates"),
])
def test_a_bad_choice_is_refused_with_the_config(arguments, message):
    with pytest.raises(ConfigError, match=message):
        aggregate_params("movie", KEYS, ["mean(stars)"], 2, **arguments)


def _ratings(spark, users: int = 600):
    rng = np.random.default_rng(3)
    rows = [(u, int(m), int(s)) for u in range(users) for m, s in zip(rng.integers(1, 4, 3), rng.integers(1, 6, 3))]
    return spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "movie", "stars"]))


@pytest.mark.spark
def test_one_value_per_user_is_its_own_and_does_not_move_with_other_users(spark):
    df = _ratings(spark, 50)
    params = aggregate_params("movie", KEYS, ["mean(stars)"], 2, low=1, high=5)
    from dp_spark.families.aggregate.run import GROUP, VALUE, in_groups

    def drawn(frame, salt):
        sampled = range_choice.one_value_per_user(in_groups(frame, params), GROUP, VALUE, salt).toPandas()
        return dict(zip(sampled["user_id"], sampled[range_choice.SAMPLED]))

    alone = drawn(df, 7)
    own = df.toPandas().groupby("user_id")["stars"].apply(set)
    assert set(alone) == set(own.index) and all(value in own[user] for user, value in alone.items())
    more = df.union(spark.createDataFrame(pd.DataFrame({"user_id": [999] * 3, "movie": [1, 2, 3],
                                                        "stars": [1, 5, 3]})))
    assert {u: v for u, v in drawn(more, 7).items() if u != 999} == alone
    assert drawn(df, 8) != alone  # the salt decides: a negative control of the draw itself


@pytest.mark.spark
def test_a_release_chooses_the_range_pays_for_it_first_and_clips_to_it(spark):
    release = dp_spark.aggregate(_ratings(spark), by="movie", keys=KEYS, metrics=["count", "mean(stars)"],
                                 groups_per_user=3, low="auto", high="auto", epsilon=10, seed=2)
    chosen = release.report["algorithm"]["chosen"]
    assert (chosen["low"], chosen["high"]) == (1.0, 5.0)  # 600 users' values from 1 to 5, at ε 1 for the choice
    steps = [entry["step"] for entry in release.report["ledger"]]
    assert steps[:3] == ["choose clip: users", "choose low", "choose high"]
    assert release.report["epsilon_spent"] == pytest.approx(10)
    table = release["groups"]
    assert table["mean_stars"].between(1, 5).all()
    # The report's accuracy is at the chosen range: a mean's interval over [1, 5], not the widest.
    shown = release.report["accuracy"]["tables"]["groups"]["mean_stars"]
    assert max(shown["interval_halfwidth_by_records"].values()) < 1 and "privately chosen low = 1.0" in shown["note"]


@pytest.mark.unit
def test_a_range_the_choice_could_give_that_no_grid_holds_is_refused_before_anything_is_paid():
    """A given end is checked with every candidate the other end may take (it once was not: the
    range [0, 1e-310] was found only after the choice was paid)."""
    with pytest.raises(ConfigError, match="clip_candidates: .*not a grid doubles can hold"):
        aggregate_params("movie", KEYS, ["mean(stars)"], 2, low="auto", high=1e-310, clip_candidates=[0, 1])
    with pytest.raises(ConfigError, match="clip_candidates: .*not a grid doubles can hold"):
        aggregate_params("movie", KEYS, ["mean(stars)"], 2, low=-1e-310, high="auto", clip_candidates=[0, 1])
