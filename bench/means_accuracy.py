"""The means' accuracy: the error of the released average rating per movie, by method, through
the product's own code (dp_spark.means on Spark), against the true average over all ratings.

On the rated part of MovieLens 1M (users 1-2999, 487,650 ratings) and on MovieLens 100K, at
ε = 1 (pure, discrete Laplace) and at ε = 1, δ = 1e-6 (zCDP, discrete Gaussian, one rating per
user and movie): SRA and HPA bounding at several l, each over a few seeded runs (fixed seeds:
NOT private; this is a measurement). It prints, per setting, the mean absolute error of the
released means for the movies with at least 1,000 ratings that got a mean (ML-100K has none: its
line uses those with at least 300) and how many did, for all movies that got a mean, and how many
got one; and the shipped config
(conf/movielens_means.toml, whose gender table takes half the budget) the same way.

    python bench/means_accuracy.py [--runs 3] [--out bench/results/means/accuracy.txt]
    python bench/means_accuracy.py --only-auto --runs 2    # l = "auto" alone (accuracy_auto.txt)
    python bench/means_accuracy.py --clip-auto --runs 3    # the range chosen privately (accuracy_clip.txt)

With l = "auto" the line says which l the private choice took in each run; with --clip-auto
(low and high left out, default candidates, l fixed at CLIP_BOUNDS) which range.
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

import dp_spark  # noqa: E402
from dp_spark.io import datasets  # noqa: E402
from dp_spark.io.session import get_session  # noqa: E402
from dp_spark.jobs.config import load_config  # noqa: E402
from dp_spark.jobs.runner import compute_release  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
SETS = {"ml-1m rated": (datasets.load_movielens_1m, DATA / "ml-1m" / "ratings_users_0001-2999.dat.gz", 1000),
        "ml-100k": (datasets.load_movielens_100k, DATA / "ml-100k", 300)}
BOUNDS = {"laplace": (10, 30, 60, "auto"), "gaussian": (10, 30, 60, 200, "auto")}
CLIP_BOUNDS = {"laplace": (10,), "gaussian": (60,)}  # the best fixed l of accuracy.txt


def errors(table: pd.DataFrame, truth: pd.DataFrame, popular: int) -> tuple[float, float, int, int]:
    """MAE over the popular movies that got a mean, MAE over every movie with a mean, how many
    movies got one, and how many of the popular ones did."""
    joined = table.set_index("item_id").join(truth, how="inner")
    published = joined[joined["mean"].notna()]
    big = published[published["ratings"] >= popular]
    error = np.abs(published["mean"].astype(float) - published["true_mean"])
    return float(error[big.index].mean()), float(error.mean()), len(published), len(big)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shipped-runs", type=int, default=6, help="seeded runs of the shipped config")
    parser.add_argument("--only-shipped", action="store_true", help="measure the shipped config alone")
    parser.add_argument("--only-auto", action="store_true", help="measure l = \"auto\" alone")
    parser.add_argument("--clip-auto", action="store_true", help="measure the range chosen privately alone")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "means" / "accuracy.txt"))
    args = parser.parse_args()
    spark = get_session(app_name="means accuracy")
    out = Path(args.out)
    if args.only_shipped:  # the methods' table is kept as it was; the shipped config's lines replaced
        kept = out.read_text(encoding="utf-8").split("\nThe shipped config")[0].splitlines()
        out.write_text("\n".join(kept + shipped(spark, args.shipped_runs)) + "\n", encoding="utf-8")
        return
    if args.only_auto or args.clip_auto:
        out = out.with_name("accuracy_clip.txt" if args.clip_auto else "accuracy_auto.txt")
    clip = {} if args.clip_auto else {"low": 1, "high": 5}
    lines = [f"# bench/means_accuracy.py, {args.runs} seeded runs per setting; MAE in stars", "",
             "| data | noise | bounding | l | MAE, popular movies | popular with a mean | MAE, all with a mean "
             "| movies with a mean |", "|---|---|---|---:|---:|---:|---:|---:|"]
    started = time.time()
    for name, (load, path, popular) in SETS.items():
        records = load(spark, str(path)).select("user_id", "item_id", "value").cache()
        local = records.toPandas().astype({"item_id": "int64", "value": "float64"})
        truth = local.groupby("item_id")["value"].agg(true_mean="mean", ratings="size")
        items = sorted(truth.index.tolist())
        for noise, bounds in BOUNDS.items():
            zcdp = {"delta": 1e-6, "noise": "gaussian", "records_per_item": 1} if noise == "gaussian" else {}
            for bounding in ("sra", "hpa"):
                for l in ("auto",) if args.only_auto else CLIP_BOUNDS[noise] if args.clip_auto else bounds:
                    found, chosen = [], []
                    for seed in range(1, args.runs + 1):
                        release = dp_spark.means(records, items=items, value="value", l=l, **clip,
                                                 epsilon=1, bounding=bounding, seed=seed, progress=lambda _: None,
                                                 distinct_records=True, **zcdp)
                        found.append(errors(release["item_means"], truth, popular))
                        picked = release.report["algorithm"].get("chosen", {})
                        chosen.append(f"[{picked['low']:g}, {picked['high']:g}]" if args.clip_auto else picked.get("l"))
                    big, everything, published, popular_published = (np.mean([f[k] for f in found])
                                                                     for k in range(4))
                    said = f"auto ({', '.join(map(str, chosen))})" if l == "auto" else l
                    if args.clip_auto:
                        said = f"{l}, range {' '.join(chosen)}"
                    lines.append(f"| {name} (popular: >= {popular:,}) | {noise} | {bounding} | {said} | {big:.3f} | "
                                 f"{popular_published:.1f} of {int((truth['ratings'] >= popular).sum())} | "
                                 f"{everything:.3f} | {published:.0f} |")
                    print(lines[-1], f"({time.time() - started:.0f} s)", flush=True)
        records.unpersist()
    out.parent.mkdir(parents=True, exist_ok=True)
    tail = [] if args.only_auto or args.clip_auto else shipped(spark, args.shipped_runs)
    out.write_text("\n".join(lines + tail) + "\n", encoding="utf-8")


def shipped(spark, runs: int) -> list[str]:
    """The shipped config's lines: its MAE per seeded run (from the config's directory, as a user runs it)."""
    lines = ["", "The shipped config, conf/movielens_means.toml (items and items x gender, half the budget each):", ""]
    local = datasets.load_movielens_1m(spark, str(SETS["ml-1m rated"][1])).select("item_id", "value").toPandas()
    truth = local.astype({"item_id": "int64"}).groupby("item_id")["value"].agg(true_mean="mean", ratings="size")
    found = []
    for seed in range(1, runs + 1):
        cfg = load_config(ROOT / "conf" / "movielens_means.toml", [f"seed={seed}"])
        computed = compute_release(cfg, spark, progress=lambda _: None)
        found.append(errors(computed.tables["item_means"], truth, 1000))
    big, everything, published, popular_published = (np.mean([f[k] for f in found]) for k in range(4))
    lines.append(f"conf/movielens_means.toml, {runs} seeded runs: MAE {big:.3f} stars for the movies with >= 1,000 "
                 f"ratings ({popular_published:.1f} of 29 with a mean; by run "
                 f"{', '.join(f'{f[0]:.3f}' for f in found)}), {everything:.3f} for all {published:.0f} movies with "
                 "a mean")
    print(lines[-1])
    return lines


if __name__ == "__main__":
    main()
