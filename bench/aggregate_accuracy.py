"""The aggregate family's accuracy: per movie, and per movie x gender, on the rated part of MovieLens
1M (users 1-2999, 487,650 ratings), the error of the released count, mean, median, 90th percentile
and variance of the stars against their truth over all ratings, through the product's own code
(dp_spark.aggregate on Spark).

At ε = 1, δ = 1e-6 under zCDP, by both methods (histogram: one discrete Gaussian histogram per
group over the stars 1 to 5, every metric from it; tables: a discrete Gaussian table per figure and
the exponential mechanism per quantile level), one rating per user and group, at several
groups_per_user l, each over a few seeded runs (fixed seeds: NOT private; this is a measurement).
The truth is of every rating: what the bound drops counts as error. It prints, per setting and
group size (>= 1,000 ratings, 100-999, < 100), each metric's mean absolute error over the groups
(a mean or variance over those that got one) and the seconds a release took.

    python bench/aggregate_accuracy.py [--runs 3] [--out bench/results/aggregate/accuracy.txt]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RATED = ROOT.parent / "shared" / "data" / "ml-1m" / "ratings_users_0001-2999.dat.gz"
METRICS = ["count", "mean(value)", "variance(value)", "quantiles(value, 0.5, 0.9)"]
COLUMNS = {"count": "count", "mean": "mean_value", "median": "value_p50", "p90": "value_p90",
           "variance": "variance_value"}
BUCKETS = (("ratings >= 1,000", 1000, None), ("100-999", 100, 1000), ("< 100", 0, 100))
BOUNDS = (20, 50, 100)
METHODS = ("histogram", "tables")


def lower_quantile(values: pd.Series, q: float) -> float:
    """The least value with at least q·n values at most it: the quantile the release estimates."""
    return float(np.quantile(values, q, method="inverted_cdf"))


def truth_of(local: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    grouped = local.groupby(by)["value"]
    return pd.DataFrame({"count": grouped.size(), "mean": grouped.mean(), "variance": grouped.var(ddof=0),
                         "median": grouped.agg(lambda s: lower_quantile(s, 0.5)),
                         "p90": grouped.agg(lambda s: lower_quantile(s, 0.9))})


def errors(table: pd.DataFrame, truth: pd.DataFrame, by: list[str]) -> dict:
    """{(bucket, metric): (MAE, groups it is over)} for one release."""
    joined = table.set_index(by).join(truth.add_suffix("_true"), how="inner")
    found = {}
    for bucket, low, high in BUCKETS:
        rows = joined[(joined["count_true"] >= low) & ((joined["count_true"] < high) if high else True)]
        for metric, column in COLUMNS.items():
            released = rows[column].astype(float)
            given = released.notna()
            found[(bucket, metric)] = (float(np.abs(released[given] - rows.loc[given, f"{metric}_true"]).mean())
                                       if given.any() else float("nan"), int(given.sum()))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "aggregate" / "accuracy.txt"))
    args = parser.parse_args()
    # Imported here: bench/aggregate_pipelinedp.py reads this module's truth and errors from a
    # separate environment without dp-spark's dependencies.
    import dp_spark
    from dp_spark.io import datasets
    from dp_spark.io.session import get_session
    spark = get_session(app_name="aggregate accuracy")
    records = datasets.load_movielens_1m(spark, str(RATED), attribute="gender") \
        .select("user_id", "item_id", "attr", "value").cache()
    local = records.toPandas().astype({"item_id": "int64", "value": "float64"})
    movies = sorted(local["item_id"].unique().tolist())
    lines = [f"# bench/aggregate_accuracy.py: MovieLens 1M users 1-2999, epsilon 1, delta 1e-6 (zCDP), "
             f"{args.runs} seeded runs per setting; MAE (stars; counts in ratings) over the groups given one", ""]
    for by in (["item_id"], ["item_id", "attr"]):
        truth = truth_of(local, by)
        keys = {"item_id": movies, **({"attr": ["F", "M"]} if "attr" in by else {})}
        lines += [f"## by {' x '.join(by)} ({len(truth):,} groups with ratings)", "",
                  "| method | l | groups | " + " | ".join(COLUMNS) + " | seconds |",
                  "|---|---:|---|" + "---:|" * (len(COLUMNS) + 1)]
        for method, l in ((m, b) for m in METHODS for b in BOUNDS):
            runs, seconds = [], []
            for seed in range(1, args.runs + 1):
                started = time.time()
                release = dp_spark.aggregate(records, by=by, keys=keys, metrics=METRICS, groups_per_user=l,
                                             records_per_group=1, low=1, high=5, candidates=[1, 2, 3, 4, 5],
                                             epsilon=1, delta=1e-6, noise="gaussian", seed=seed, method=method,
                                             progress=lambda _: None, guards={"refuse_noise_only": False})
                seconds.append(time.time() - started)
                runs.append(errors(release["groups"], truth, by))
            for bucket, _low, _high in BUCKETS:
                cells = []
                for metric in COLUMNS:
                    mae = np.nanmean([r[(bucket, metric)][0] for r in runs])
                    cells.append(f"{mae:.3f} ({np.mean([r[(bucket, metric)][1] for r in runs]):.0f})")
                lines.append(f"| {method} | {l} | {bucket} | " + " | ".join(cells) + f" | {np.median(seconds):.1f} |")
                print(lines[-1], flush=True)
        lines.append("")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
