"""PipelineDP's answer to bench/aggregate_accuracy.py's question, on the same data, bounds and
budget, scored by the same code: per movie and per movie x gender on the rated part of MovieLens
1M, the count, mean, variance, median and 90th percentile of the stars, at ε = 1, δ = 1e-6 with
Gaussian noise, one rating per user and group (max_contributions_per_partition = 1), at most l
groups per user (max_partitions_contributed), values in [1, 5], the same public groups (the
movies with a rating, times the two genders).

PipelineDP is not a dependency: this runs in its own environment (make's .venv-pipelinedp recipe),
on its local backend, with its naive accountant (its PLD accountant refuses a variance), which
splits (ε, δ) among the metrics. Its noise cannot be seeded, so the runs differ. Its means and
variances are kept in [1, 5] and [0, 4] (it returns a mean of 6 stars where a noisy count is
small): post-processing that only helps it. It appends its lines to the file aggregate_accuracy.py wrote.

    .venv-pipelinedp/bin/python bench/aggregate_pipelinedp.py [--runs 2] [--out bench/results/aggregate/accuracy.txt]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from aggregate_accuracy import BOUNDS, BUCKETS, COLUMNS, RATED, errors, truth_of  # noqa: E402

USERS = RATED.parent / "users.dat"
PERCENTILES = {"median": 50, "p90": 90}


def rated() -> pd.DataFrame:
    """user_id, item_id, attr (gender), value: the ratings as aggregate_accuracy.py reads them."""
    ratings = pd.read_csv(RATED, sep="::", engine="python", names=["user_id", "item_id", "value", "ts"],
                          compression="gzip")
    users = pd.read_csv(USERS, sep="::", engine="python", names=["user_id", "attr", "age", "job", "zip"])
    frame = ratings.merge(users[["user_id", "attr"]], on="user_id")
    return frame[["user_id", "item_id", "attr", "value"]].astype({"value": "float64"})


def release(local: pd.DataFrame, by: list[str], partitions: list, l: int) -> pd.DataFrame:
    import pipeline_dp
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    metrics = [pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.MEAN, pipeline_dp.Metrics.VARIANCE,
               *(pipeline_dp.Metrics.PERCENTILE(p) for p in PERCENTILES.values())]
    params = pipeline_dp.AggregateParams(noise_kind=pipeline_dp.NoiseKind.GAUSSIAN, metrics=metrics,
                                         max_partitions_contributed=l, max_contributions_per_partition=1,
                                         min_value=1.0, max_value=5.0)
    key = (lambda row: row[1]) if len(by) == 1 else (lambda row: (row[1], row[2]))
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda row: row[0], partition_extractor=key,
                                            value_extractor=lambda row: row[3])
    rows = list(local[["user_id", "item_id", "attr", "value"]].itertuples(index=False, name=None))
    result = engine.aggregate(rows, params, extractors, public_partitions=partitions)
    accountant.compute_budgets()
    out = []
    for partition, m in result:
        keys = (partition,) if len(by) == 1 else partition
        # Its mean and variance can leave what values in [1, 5] allow (a noisy count near zero
        # divides): kept in [1, 5] and [0, 4], as dp-spark keeps its own and as a user would.
        out.append({**dict(zip(by, keys)), "count": m.count, "mean_value": min(max(m.mean, 1.0), 5.0),
                    "variance_value": min(max(m.variance, 0.0), 4.0),
                    **{COLUMNS[name]: getattr(m, f"percentile_{p}") for name, p in PERCENTILES.items()}})
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", default=str(BENCH / "results" / "aggregate" / "accuracy.txt"))
    args = parser.parse_args()
    local = rated()
    movies = sorted(local["item_id"].unique().tolist())
    lines = ["", f"# PipelineDP (bench/aggregate_pipelinedp.py): the same data, bounds and budget, naive accounting, "
             f"{args.runs} unseeded runs per setting", ""]
    for by in (["item_id"], ["item_id", "attr"]):
        truth = truth_of(local, by)
        partitions = movies if len(by) == 1 else [(m, g) for m in movies for g in ("F", "M")]
        lines += [f"## PipelineDP by {' x '.join(by)}", "", "| l | groups | " + " | ".join(COLUMNS) + " | seconds |",
                  "|---:|---|" + "---:|" * (len(COLUMNS) + 1)]
        for l in BOUNDS:
            runs, seconds = [], []
            for _ in range(args.runs):
                started = time.time()
                runs.append(errors(release(local, by, partitions, l), truth, by))
                seconds.append(time.time() - started)
            for bucket, _low, _high in BUCKETS:
                cells = [f"{np.nanmean([r[(bucket, m)][0] for r in runs]):.3f} "
                         f"({np.mean([r[(bucket, m)][1] for r in runs]):.0f})" for m in COLUMNS]
                lines.append(f"| {l} | {bucket} | " + " | ".join(cells) + f" | {np.median(seconds):.1f} |")
                print(lines[-1], flush=True)
        lines.append("")
    with open(args.out, "a", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
