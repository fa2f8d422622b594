"""The aggregate release's speed against its floor, a non-private ``groupBy(item).agg(...)`` of the
same five metrics over the same Parquet (count, mean, variance, and the median and 90th percentile
by ``percentile_approx``, what a Spark user writes), in one session, runs interleaved.

The table is bench/means_speed.py's: the synthetic Netflix-shaped table with a rating of 1 to 5
per record. Each round times the floor, then the release of the five metrics in one bounding pass
(ε = 1, δ = 1e-6 under zCDP, at most l = 20 movies per user and one rating in each, the stars as
the candidates: the histogram method), then the same by tables, then the five metrics as five
separate releases (each with a fifth of ε), each ending in its pandas result; the medians and
their ratios to the floor are printed.

    python bench/aggregate_speed.py --rows 10000000 [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from means_speed import interleaved, rated_table  # noqa: E402

import dp_spark  # noqa: E402
from dp_spark.io.session import get_session  # noqa: E402

METRICS = ["count", "mean(value)", "variance(value)", "quantiles(value, 0.5, 0.9)"]
SEPARATE = ["count", "mean(value)", "variance(value)", "median(value)", "quantiles(value, 0.9)"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    spark = get_session(app_name="aggregate speed")
    from pyspark.sql import functions as F

    path = rated_table(spark, args.rows)

    def floor():
        value = F.col("value")
        return spark.read.parquet(path).groupBy("item_id").agg(
            F.count(F.lit(1)), F.mean(value), F.var_pop(value), F.percentile_approx(value, [0.5, 0.9])).toPandas()

    def release(metrics=METRICS, epsilon=1.0, **extra):
        valued = {"low": 1, "high": 5, "candidates": [1, 2, 3, 4, 5]} if metrics != ["count"] else {}
        return dp_spark.aggregate(spark.read.parquet(path), by="item_id", keys={"item_id": range(1, 17771)},
                                  metrics=metrics, groups_per_user=20, epsilon=epsilon, delta=1e-6, noise="gaussian",
                                  progress=lambda _: None, guards={"refuse_noise_only": False}, **valued,
                                  **extra)["groups"]

    def separate():
        return [release([metric], 1.0 / len(SEPARATE)) for metric in SEPARATE]

    runs = {"floor": floor, "histogram": release, "tables": lambda: release(method="tables"), "separate": separate}
    print(interleaved(runs, args.repeats, args.rows))


if __name__ == "__main__":
    main()
