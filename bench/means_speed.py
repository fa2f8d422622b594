"""The means release's speed: the release against its own floor, a non-private
``groupBy(item).agg(sum, count)`` of the same Parquet, in one session, runs interleaved.

The synthetic Netflix-shaped table (``dp-spark generate netflix``) has no values, so a rating of 1
to 5 is added once per record (a hash of the record: the same on every run) and the table written
again beside it. Each round times the floor, then the release (SRA bounding, l = 10, ε = 1, pure
Laplace, fresh noise), then the same under zCDP with one record per user and item (Gaussian noise,
c = 1: the shipped config's path, with the per-item cap), then the first release with the clipping
range chosen privately (``means_clip``: a value drawn per user in validation's pass and a job over
those values, before the sums), then for reference the counts' SRA release of the same records at
the same l and ε (what bounding costs without a value), each ending
in its pandas result; the median ratios are printed. Also timed: ``floor_user``, a non-private
``groupBy(user).count()`` with its largest count collected (with the floor, the two passes any
per-user bound makes); ``means_plain``, the release with the records not vouched distinct (the
path of a user's own Parquet: identical records are numbered first); ``means_auto``, l = "auto".
``--runs`` picks some of them (the floor always runs).

    python bench/means_speed.py --rows 10000000 [--repeats 3] [--runs means,means_plain]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dp_spark  # noqa: E402
from dp_spark.io.session import get_session  # noqa: E402


def rated_table(spark, rows: int) -> str:
    """data/netflix-<rows>-rated.parquet, made from the generated table when absent."""
    plain = ROOT / "data" / f"netflix-{rows}.parquet"
    rated = ROOT / "data" / f"netflix-{rows}-rated.parquet"
    if not plain.exists():
        subprocess.run([sys.executable, "-m", "dp_spark.cli", "generate", "netflix", "--rows", str(rows), "--out",
                        str(plain)], check=True, cwd=ROOT)
    if not rated.exists():
        from pyspark.sql import functions as F

        table = spark.read.parquet(str(plain))
        stars = (F.pmod(F.xxhash64("user_id", "item_id"), F.lit(5)) + 1).cast("double")
        table.withColumn("value", stars).write.parquet(str(rated))
    return str(rated)


def interleaved(runs: dict, repeats: int, rows: int) -> str:
    """Each run once untimed (the JVM's warm-up and the file cache), then ``repeats`` rounds of all
    of them in turn, timed to their pandas result; the line of medians and their ratios to
    ``runs["floor"]``."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            began = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - began)
    medians = {name: statistics.median(seconds) for name, seconds in times.items()}
    return (f"rows {rows:,} (median of {repeats}): floor {medians['floor']:.2f} s, "
            + ", ".join(f"{name} {medians[name]:.2f} s, ratio {medians[name] / medians['floor']:.2f}"
                        for name in runs if name != "floor")
            + f"; all runs: { {name: [round(t, 2) for t in seconds] for name, seconds in times.items()} }")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", default="", help="comma-separated runs to time besides the floor (default: all)")
    args = parser.parse_args()
    spark = get_session(app_name="means speed")
    from pyspark.sql import functions as F

    path = rated_table(spark, args.rows)

    def floor():
        return spark.read.parquet(path).groupBy("item_id").agg(F.sum("value"), F.count(F.lit(1))).toPandas()

    def floor_user():
        return spark.read.parquet(path).groupBy("user_id").count().agg(F.max("count")).toPandas()

    def release(**extra):
        return dp_spark.means(spark.read.parquet(path), items=range(1, 17771), value="value", epsilon=1,
                              progress=lambda _: None, **{"l": 10, "distinct_records": True, "low": 1, "high": 5,
                                                          **extra})["item_means"]

    def counts():
        return dp_spark.sra(spark.read.parquet(path), items=range(1, 17771), l=10, epsilon=1, progress=lambda _: None,
                            distinct_records=True)["item_counts"]

    runs = {"floor": floor, "means": release,
            "means_c1": lambda: release(noise="gaussian", delta=1e-6, records_per_item=1),
            "means_clip": lambda: release(low="auto", high="auto"), "sra_counts": counts,
            "floor_user": floor_user, "means_plain": lambda: release(distinct_records=False),
            "means_auto": lambda: release(l="auto")}
    if args.runs:
        wanted = {"floor", *args.runs.split(",")}
        unknown = wanted - set(runs)
        if unknown:
            parser.error(f"unknown runs {sorted(unknown)}; the runs are {sorted(runs)}")
        runs = {name: run for name, run in runs.items() if name in wanted}
    print(interleaved(runs, args.repeats, args.rows))


if __name__ == "__main__":
    main()
