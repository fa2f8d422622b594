"""A release of 10^7 to 10^9 cells with the noise drawn on the executors, against its non-private equivalent.

    python bench/executor_release.py --items 1000000 --attributes 100 --rows 2000000 --repeats 1 --out DIR
    python bench/executor_release.py --family means ...

Synthetic records (user_id, item_id, attr, value) over an item range [1, items] × attribute values
1..h, then, in one Spark session, alternating:

* ``floor``: the non-private equivalent: count per (item, attr) (with ``--family means`` also the
  sum of the value), zero-fill by a join with the whole domain (spark.range × the attribute
  values), add a constant column, write Parquet;
* ``dp``: dp_spark.sra (l = 10, ε = 1, seed 7), or dp_spark.means (the same, values clipped to
  [1, 5]), with ``executor_noise_cells`` = 1, and ``Release.write`` (validation, bounding, the item
  and edge tables on the executors, atomic write).

Printed and written to DIR/executor_release.json: wall seconds of each, their ratio, the rows
written, and the peak resident memory of the driver's Python process and of the JVM (in local
mode the JVM runs the executors' tasks too, so its peak is not the driver's alone).
NOT PRIVATE: the floor's numbers are true counts; nothing here is a release.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyspark.sql import functions as F  # noqa: E402

from dp_spark import api  # noqa: E402
from dp_spark.io.session import get_session  # noqa: E402
from dp_spark.lab.bench import _jvm_pid, _peak_mb  # noqa: E402  (the bench's own probes: VmHWM from /proc)


def records(spark, rows: int, items: int, h: int, users: int):
    """Synthetic records: users uniform, items skewed (the square of a uniform), attributes uniform."""
    base = spark.range(rows)
    return base.select(
        (F.abs(F.xxhash64("id", F.lit(1))) % users).alias("user_id"),
        (F.floor(F.pow(F.rand(11), 2) * items) + 1).cast("long").alias("item_id"),
        (F.abs(F.xxhash64("id", F.lit(2))) % h + 1).cast("long").alias("attr"),
        (F.abs(F.xxhash64("id", F.lit(3))) % 5 + 1).cast("double").alias("value"))


def floor_release(spark, df, items: int, h: int, out: str, family: str) -> int:
    domain = spark.range(1, items + 1).withColumnRenamed("id", "item_id").crossJoin(
        spark.range(1, h + 1).select(F.col("id").cast("string").alias("attr")))
    figures = [F.count(F.lit(1)).alias("count")] + ([F.sum("value").alias("sum")] if family == "means" else [])
    counts = df.groupBy("item_id", F.col("attr").cast("string").alias("attr")).agg(*figures)
    table = (domain.join(counts, ["item_id", "attr"], "left").fillna(0, ["count", "sum"][:len(figures)])
             .withColumn("ci95_halfwidth", F.lit(1.0)))
    table.write.mode("overwrite").parquet(out)
    return items * h


def dp_release(df, items: int, h: int, out: str, family: str) -> int:
    common = dict(items=range(1, items + 1), l=10, epsilon=1, attribute="attr", attributes=list(range(1, h + 1)),
                  seed=7, executor_noise_cells=1, progress=lambda m: None)
    release = api.means(df, value="value", low=1, high=5, **common) if family == "means" else api.sra(df, **common)
    shutil.rmtree(out, ignore_errors=True)
    release.write(out)
    return sum(table["rows"] for table in release.report["outputs"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--attributes", type=int, default=100)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--family", choices=("counts", "means"), default="counts")
    parser.add_argument("--scratch", default="/tmp/dp_spark_bench_executor")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    spark = get_session("local[*]", {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                     "spark.driver.memory": "8g", "spark.sql.shuffle.partitions": "64"})
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    df = records(spark, args.rows, args.items, args.attributes, args.users).persist()
    df.count()
    times = {"floor": [], "dp": []}
    rows = {}
    for _ in range(args.repeats):
        for job in ("floor", "dp"):
            out = str(scratch / job)
            start = time.perf_counter()
            if job == "floor":
                rows[job] = floor_release(spark, df, args.items, args.attributes, out, args.family)
            else:
                rows[job] = dp_release(df, args.items, args.attributes, out, args.family)
            times[job].append(time.perf_counter() - start)
            print(f"{job}: {times[job][-1]:.1f} s", flush=True)
    jvm = _jvm_pid(spark)
    result = {
        "family": args.family,
        "items": args.items,
        "attributes": args.attributes,
        "cells": args.items * args.attributes,
        "rows": args.rows,
        "users": args.users,
        "cores": os.cpu_count(),
        "seconds": {job: statistics.median(values) for job, values in times.items()},
        "all_seconds": times,
        "rows_written": rows,
        "ratio_dp_to_floor": statistics.median(times["dp"]) / statistics.median(times["floor"]),
        "driver_python_peak_rss_gib": _peak_mb(os.getpid()) / 1024,
        "jvm_peak_rss_gib": _peak_mb(jvm) / 1024 if jvm else None,
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        name = f"executor_release_{result['cells']}" + ("_means" if args.family == "means" else "")
        (Path(args.out) / f"{name}.json").write_text(json.dumps(result, indent=2))
    shutil.rmtree(scratch, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
