"""The metrics of an aggregation as users write them (families.aggregate.metrics)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.metrics import Metric, metric_of, metrics_of


def test_each_metric_is_read_with_its_column_and_levels():
    assert metric_of("count") == Metric("count") and metric_of(" users ") == Metric("users")
    assert metric_of("mean(stars)") == Metric("mean", "stars")
    assert metric_of("median( stars )") == Metric("median", "stars", (Fraction(1, 2),))
    assert metric_of("quantiles(stars, 0.9, 0.1,0.5)") == Metric("quantiles", "stars", (
        Fraction(1, 10), Fraction(1, 2), Fraction(9, 10)))


def test_output_columns_and_the_text_back():
    metrics = metrics_of(["count", "users", "sum(stars)", "mean(stars)", "stddev(stars)",
                          "quantiles(stars, 0.5, 0.999)"])
    assert [c for m in metrics for c in m.columns] == ["count", "users", "sum_stars", "mean_stars", "mean_stars_low",
                                                       "mean_stars_high", "stddev_stars", "stars_p50", "stars_p99_9"]
    assert [str(m) for m in metrics] == ["count", "users", "sum(stars)", "mean(stars)", "stddev(stars)",
                                         "quantiles(stars, 0.5, 0.999)"]


@pytest.mark.parametrize("texts, message", [
    ([], "non-empty list"),
    ("count", "non-empty list"),
    (["total"], "unknown metric 'total'"),
    (["avg(stars)"], "unknown metric"),
    (["mean(stars, 2)"], "one column only"),
    (["quantiles(stars)"], "give the quantiles' levels"),
    (["quantiles(stars, 1.5)"], "strictly between 0 and 1"),
    (["quantiles(stars, 0.5, 0.5)"], "each level once"),
    (["median(stars)", "quantiles(stars, 0.5)"], "output column twice"),
    (["mean(stars)", "sum(price)"], "one value column per release"),
    ([3], "a metric is a text"),
])
def test_bad_metrics_are_refused_by_name(texts, message):
    with pytest.raises(ConfigError, match=message):
        metrics_of(texts)
