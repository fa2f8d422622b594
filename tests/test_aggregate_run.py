"""An aggregation's whole table on Spark (families.aggregate.run): with a bound that keeps every
record and negligible noise it is the direct pandas computation over the records in the domains;
the budget is split and paid in its documented order; the bound applies."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dp_spark.core.clip_range import ClipRange
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.keys import group_keys
from dp_spark.families.aggregate.metrics import Metric, metrics_of
from dp_spark.families.aggregate.noisy_totals import GroupBound
from dp_spark.families.aggregate.params import AggregateParams, clip_of
from dp_spark.families.aggregate.quantiles import Candidates
from dp_spark.families.aggregate.run import aggregate_table

GENRES = ["Comedy", "Drama", "Horror"]
METRICS = metrics_of(["count", "users", "sum(stars)", "mean(stars)", "stddev(stars)", "quantiles(stars, 0.5, 0.9)"])


@pytest.fixture(scope="module")
def ratings() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 1_500
    frame = pd.DataFrame({"user_id": rng.integers(0, 60, n), "genre": rng.choice(GENRES + ["Western"], n),
                          "year": rng.integers(1999, 2003, n), "stars": rng.integers(1, 6, n).astype(float)})
    frame.loc[::97, "stars"] = np.nan  # no value: dropped where the metrics read one
    return frame


def params_of(metrics=METRICS, l: int = 10**4, c: int = 10**4, method: str = "tables") -> AggregateParams:
    keys = group_keys(["genre", "year"], {"genre": {"ids": GENRES}, "year": {"range": [2000, 2002]}})
    valued = any(m.value for m in metrics)
    quantiles = any(m.kind in ("median", "quantiles") for m in metrics)
    return AggregateParams(keys, tuple(metrics), GroupBound(l, c), ClipRange(1, 5, steps=4) if valued else None,
                           Candidates((1, 2, 3, 4, 5)) if quantiles or method == "histogram" else None, method=method)


@pytest.mark.parametrize("method, steps", [
    ("tables", ["count", "users", "sum(stars)", "sum of squares(stars)", "quantile(stars, 0.5)",
                "quantile(stars, 0.9)"]),
    ("histogram", ["users", "histogram(stars)"])])
def test_with_every_record_kept_and_negligible_noise_it_is_the_direct_computation(spark, ratings, method, steps):
    params = params_of(method=method)
    epsilon = Fraction(10**12)
    budget = Budget(epsilon)
    table, _kept = aggregate_table(spark.createDataFrame(ratings), params, params.split(epsilon), "laplace", budget,
                                   RandomSource(seed=3), seed=3)
    inside = ratings[ratings["genre"].isin(GENRES) & ratings["year"].between(2000, 2002) & ratings["stars"].notna()]
    def quantile(q):
        return lambda s: np.quantile(s, q, method="inverted_cdf")
    direct = inside.groupby(["genre", "year"]).agg(count=("stars", "size"), users=("user_id", "nunique"),
                                                   sum_stars=("stars", "sum"), mean_stars=("stars", "mean"),
                                                   stddev_stars=("stars", lambda s: s.std(ddof=0)),
                                                   stars_p50=("stars", quantile(0.5)),
                                                   stars_p90=("stars", quantile(0.9)))
    assert len(table) == 9 and table[["genre", "year"]].values.tolist() == [[g, y] for g in GENRES
                                                                           for y in (2000, 2001, 2002)]
    got = table.set_index(["genre", "year"]).loc[direct.index]
    for column in direct.columns:
        assert got[column].to_numpy() == pytest.approx(direct[column].to_numpy(), abs=1e-6), column
    assert (got["mean_stars_low"] <= got["mean_stars"]).all() and (got["mean_stars"] <= got["mean_stars_high"]).all()
    assert [e.step for e in budget.entries] == steps
    assert budget.spent == epsilon


def test_the_bound_holds_in_what_is_counted(spark, ratings):
    """l = 2 groups of c = 3 records per user: no more than 60 users · 2 · 3 records are counted,
    and no more than 60 · 2 user-group pairs."""
    params = params_of(metrics_of(["count", "users"]), l=2, c=3)
    table, _kept = aggregate_table(spark.createDataFrame(ratings), params, params.split(Fraction(10**12)), "laplace",
                                   Budget(Fraction(10**12)), RandomSource(seed=3), seed=3)
    assert table["count"].sum() <= 60 * 2 * 3 and table["users"].sum() <= 60 * 2
    assert table["count"].sum() > 100  # and the bound keeps what it may


def test_the_split_is_an_equal_part_per_step():
    params = params_of(metrics_of(["count", "mean(stars)", "median(stars)"]))
    assert params.steps() == ("count", "sum(stars)", "quantile(stars, 0.5)")
    assert params.split(Fraction(1)) == {step: Fraction(1, 3) for step in params.steps()}
    with pytest.raises(ConfigError, match="name an output column twice"):  # the same level twice, as text
        metrics_of(["median(stars)", "quantiles(stars, 0.5)"])
    twice = (Metric("median", "stars", (Fraction(1, 2),)), Metric("quantiles", "stars", (Fraction(1, 2),)))
    with pytest.raises(ConfigError, match="one quantile level twice"):
        params_of(twice).split(Fraction(1))


def test_parameters_that_do_not_fit_are_refused():
    keys = group_keys("genre", {"genre": {"ids": GENRES}})
    with pytest.raises(ConfigError, match="need its range: give low and high"):
        AggregateParams(keys, metrics_of(["mean(stars)"]), GroupBound(1, 1))
    with pytest.raises(ConfigError, match="no metric reads a value"):
        AggregateParams(keys, metrics_of(["count"]), GroupBound(1, 1), ClipRange(0, 1))
    with pytest.raises(ConfigError, match="share the name count"):
        AggregateParams(group_keys("count", {"count": {"range": [1, 2]}}), metrics_of(["count"]), GroupBound(1, 1))
    with pytest.raises(ConfigError, match="both low and high"):
        clip_of(1, None)
    evenly = AggregateParams(keys, metrics_of(["median(stars)"]), GroupBound(1, 1), ClipRange(0, 10))
    assert evenly.candidates is not None and len(evenly.candidates.values) == 101


@pytest.mark.parametrize("steps", [1, 4, 7, 1000])
def test_spark_rounds_each_square_as_the_driver_does(spark, steps):
    """The square units of every grid unit u in [−steps, steps] (aggregates.group_totals), against
    ClipRange.square_units: u²/steps to the nearest whole number, in [0, steps]."""
    from pyspark.sql import functions as F

    from dp_spark.aggregates.group_totals import square_units

    clip = ClipRange(-1, 1, steps=steps)
    units = list(range(-steps, steps + 1))
    got = [row[0] for row in spark.createDataFrame([(u,) for u in units], "u long")
           .select(square_units(F.col("u"), steps)).collect()]
    expected = [clip.square_units(u) for u in units]
    assert got == expected and min(expected) == 0 and max(expected) == steps
    assert all(abs(s * steps - u * u) * 2 <= steps for s, u in zip(expected, units))  # the nearest
