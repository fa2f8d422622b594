"""HPA's popular-first choice of groups (families.aggregate.popular_groups): a user keeps its l
groups of highest noisy popularity, drawn first with a tenth of ε from d groups per user. Its
sensitivity on the release's own path is the sensitivity audit's groups_per_user_popular."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

import dp_spark
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.family import aggregate_params


def _params(**extra):
    return aggregate_params(**({"by": "movie", "keys": {"movie": range(1, 11)}, "metrics": ["count", "users"],
                                "groups_per_user": 2} | extra))


@pytest.mark.unit
def test_the_popularity_takes_a_tenth_of_epsilon_first():
    params = _params(bounding="hpa", d=3)
    assert params.popularity_groups == 3
    assert params.split(Fraction(1)) == {"epsilon_popularity": Fraction(1, 10), "count": Fraction(9, 20),
                                         "users": Fraction(9, 20)}
    assert params.split_keys() == ("epsilon_popularity", "count", "users")
    assert _params().split(Fraction(1)) == {"count": Fraction(1, 2), "users": Fraction(1, 2)}


@pytest.mark.unit
@pytest.mark.parametrize("extra, message", [
    ({"bounding": "popular"}, "bounding must be one of sra, hpa"),
    ({"d": 2}, "used only with bounding"),
    ({"bounding": "hpa", "d": 0}, "d must be"),
])
def test_bad_choices_are_refused(extra, message):
    with pytest.raises(ConfigError, match=message):
        _params(**extra)


@pytest.mark.spark
@pytest.mark.parametrize("bounding, kept_in_rare", [("hpa", False), ("sra", True)])
def test_users_keep_their_most_popular_groups(spark, bounding, kept_in_rare):
    """400 users each rate movies 1 and 2 (popular) and two of 3 to 10 (rare); at l = 2, HPA keeps
    1 and 2 for everyone, where SRA's uniform sample keeps about half of each user's records in
    the rare ones."""
    rows = [(u, m) for u in range(400) for m in (1, 2, 3 + u % 8, 3 + (u + 1) % 8)]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "movie"]))
    release = dp_spark.aggregate(df, by="movie", keys={"movie": range(1, 11)}, metrics=["count"], groups_per_user=2,
                                 epsilon=40, seed=3, bounding=bounding)
    counts = release["groups"].set_index("movie")["count"]
    rare = counts.loc[3:10].sum()
    if kept_in_rare:
        assert 300 <= rare <= 500 and counts.loc[1:2].sum() < 500  # about 400 of the 800 kept records
    else:
        assert abs(rare) <= 20 and (counts.loc[1:2] - 400).abs().max() <= 5  # noise of scale about 0.05 per cell
    steps = [entry["step"] for entry in release.ledger]
    assert steps == (["popularity", "count"] if bounding == "hpa" else ["count"])
    assert release.report["algorithm"]["parameters"]["bounding"] == bounding
