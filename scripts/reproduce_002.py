"""Paper 002's experiment: AHP against DPA-AHP (corrected, specification §5.2) on
histograms, by KL divergence and range-query MSE over ε and δ.

    python scripts/reproduce_002.py [--runs 30]

Histograms: LOGNORMAL and EXPONENTIAL, drawn to match the shape of Table 2 of
the thesis (sensitivity 1: in the thesis each bin is one user); and the
ratings per movie of MovieLens 100K after keeping at most l = 20 ratings per
user (sensitivity 20, user-level), bounded with dp_spark's SRA sampler; and the
number of ratings per user of MovieLens 1M in 1,000 public bins (1, 2, …, 999,
1000+), the job ``user_histogram`` (sensitivity 1, user-level). The last is
the user-level counterpart of the thesis' check-in data, where each bin was one
user's check-ins (specification §5.3).
DPA-AHP as published is run too, labelled: it is not differentially private.
Writes docs/lab/reproduction_002.md and bench/results/reproduction_002/evaluation.json.
Every number is an error against the true histogram: NOT private.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dp_spark import publishers  # noqa: E402
from dp_spark.core.ledger import Budget  # noqa: E402
from dp_spark.core.mechanisms import RandomSource  # noqa: E402
from dp_spark.lab import metrics

EPSILONS = (Fraction(1, 100), Fraction(1, 10), Fraction(1))
DELTAS = (Fraction(0), Fraction(1, 40), Fraction(1, 20), Fraction(3, 40), Fraction(1, 10), Fraction(3, 20))
# Table 2 of the thesis: bins, mean, variance, range.
TABLE_2 = {"LOGNORMAL": (66, 53.697, 953.090, (2, 99)), "EXPONENTIAL": (51, 498.635, 65_447.501, (59, 996))}


def lognormal_histogram(bins: int, mean: float, variance: float, low: int, high: int, seed: int) -> np.ndarray:
    """Bin counts drawn from the log-normal with this mean and variance, clipped to [low, high]
    (the clipping lowers the variance: the thesis' histogram is not described beyond Table 2)."""
    sigma2 = np.log1p(variance / mean**2)
    draws = np.random.default_rng(seed).lognormal(np.log(mean) - sigma2 / 2, np.sqrt(sigma2), bins)
    return np.clip(np.round(draws), low, high).astype(np.int64)


def exponential_histogram(bins: int, mean: float, low: int, high: int, seed: int) -> np.ndarray:
    """Bin counts low + Exponential(mean − low), clipped to [low, high]."""
    draws = low + np.random.default_rng(seed).exponential(mean - low, bins)
    return np.clip(np.round(draws), low, high).astype(np.int64)


def movielens_histogram(l: int) -> np.ndarray:
    """Ratings per movie of MovieLens 100K after a uniform sample of ≤ l ratings per user."""
    from dp_spark.aggregates import item_edges
    from dp_spark.bounding import user_records
    from dp_spark.bounding.keys import with_row_key
    from dp_spark.core.domain import ItemDomain
    from dp_spark.io import datasets
    from dp_spark.io.session import get_session

    spark = get_session("local[2]", {"spark.ui.showConsoleProgress": "false"})
    records = datasets.load_movielens_100k(spark, str(ROOT.parent / "shared" / "data" / "ml-100k"))
    kept = user_records.sample_per_user(with_row_key(records.select("user_id", "item_id"), distinct=True), l, seed=0)
    items = ItemDomain(ids=np.arange(1, 1683), description="1..1682", id_range=(1, 1682))
    return item_edges.item_counts(item_edges.edge_counts(kept, items, None))


def movielens_user_histogram(bins: int) -> np.ndarray:
    """Users of MovieLens 1M by number of ratings, in bins 1, 2, …, bins − 1 and "bins or more"."""
    from dp_spark.families.user_histogram import histogram
    from dp_spark.families.user_histogram import quantities as user_quantities
    from dp_spark.io import datasets
    from dp_spark.io.session import get_session

    spark = get_session("local[2]", {"spark.ui.showConsoleProgress": "false"})
    records = datasets.load_movielens_1m(spark, str(ROOT.parent / "shared" / "data" / "ml-1m"))
    return user_quantities.true_histogram(records, "records", histogram.bin_edges({"range": [1, bins]}))


def run(histograms: dict, runs: int, progress) -> list[dict]:
    records = []
    for name, (counts, sensitivity) in histograms.items():
        queries = metrics.range_queries(counts.size, 1000, seed=0)
        variants = [("ahp", {}, Fraction(0))] + [("dpa_ahp", {"delta": d}, d) for d in DELTAS[1:]]
        variants += [("dpa_ahp_as_published", {"delta": d, "reproduce_paper": True}, d) for d in DELTAS[1:]]
        for epsilon in EPSILONS:
            for method, options, delta in variants:
                progress(f"{name}: {method} eps={float(epsilon):g} delta={float(delta):g}")
                rng = RandomSource(7)
                kl, rq = [], []
                for _ in range(runs):
                    publisher = "dpa_ahp" if method.startswith("dpa_ahp") else method
                    released = publishers.publish(publisher, counts, sensitivity, epsilon, Budget(epsilon), rng, "h",
                                                  **options)
                    kl.append(metrics.kl_002(counts, released.values))
                    rq.append(metrics.range_query_mse(counts, released.values, queries))
                for metric, series in (("kl", kl), ("range_mse", rq)):
                    records.append({"method": method, "dataset": name, "query": "histogram", "metric": metric,
                                    "epsilon": float(epsilon), "delta": float(delta),
                                    "mean": statistics.fmean(series), "std": statistics.pstdev(series),
                                    "runs": runs})
    return records


def standard_error(record: dict) -> float:
    return record["std"] / record["runs"] ** 0.5


def verdicts(records: list[dict]) -> list[str]:
    """Per histogram, ε and metric: AHP against the corrected DPA-AHP at its best δ, and
    whether the gap is larger than twice the standard error of the difference."""
    lines = ["| histogram | metric | ε | AHP | corrected DPA-AHP, best δ | difference / its standard error | verdict |",
             "|---|---|---:|---:|---:|---:|---|"]
    keyed = {(r["dataset"], r["metric"], r["epsilon"], r["method"], r["delta"]): r for r in records}
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        for metric in ("kl", "range_mse"):
            for epsilon in EPSILONS:
                e = float(epsilon)
                ahp = keyed[(dataset, metric, e, "ahp", 0.0)]
                best = min((keyed[(dataset, metric, e, "dpa_ahp", float(d))] for d in DELTAS[1:]),
                           key=lambda r: r["mean"])
                z = (ahp["mean"] - best["mean"]) / (standard_error(ahp) ** 2 + standard_error(best) ** 2) ** 0.5
                verdict = "DPA-AHP lower" if z > 2 else ("AHP lower" if z < -2 else "no clear difference")
                lines.append(f"| {dataset} | {metric} | {e:g} | {ahp['mean']:.4g} | {best['mean']:.4g} "
                             f"(δ = {best['delta']:g}) | {z:.1f} | {verdict} |")
    rows = lines[2:]
    dpa_wins = sum("DPA-AHP lower" in row for row in rows)
    ahp_wins = sum("AHP lower" in row and "DPA-AHP lower" not in row for row in rows)
    lines += ["", f"Of {len(rows)} comparisons, the corrected DPA-AHP is clearly lower in {dpa_wins} and AHP in "
              f"{ahp_wins}; the rest are within noise. Taking the best of five δ after the fact favours DPA-AHP, "
              f"so {dpa_wins} is an upper bound. The thesis' ~10% gains came with a first pass that spends up to "
              "(1 + δ)·ε1 (specification §5.2). With the largest per-bin budget held at ε1, every bin gets at "
              "least AHP's first-pass noise (and 5% of ε goes to the ranking), so the allocation cannot help."]
    return lines


def table(records: list[dict], dataset: str, metric: str) -> list[str]:
    cell = {(r["method"], r["epsilon"], r["delta"]): f"{r['mean']:.4g} ± {standard_error(r):.2g}" for r in records
            if r["dataset"] == dataset and r["metric"] == metric}
    lines = ["| method | δ | " + " | ".join(f"ε = {float(e):g}" for e in EPSILONS) + " |",
             "|---|---:|" + "---:|" * len(EPSILONS)]
    rows = [("ahp", 0.0)] + [(m, float(d)) for m in ("dpa_ahp", "dpa_ahp_as_published") for d in DELTAS[1:]]
    for method, delta in rows:
        lines.append(f"| {method} | {delta:g} | " + " | ".join(cell[(method, float(e), delta)] for e in EPSILONS)
                     + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    started = time.monotonic()
    bins, mean, variance, (low, high) = TABLE_2["LOGNORMAL"]
    lognormal = lognormal_histogram(bins, mean, variance, low, high, seed=1)
    bins_e, mean_e, _, (low_e, high_e) = TABLE_2["EXPONENTIAL"]
    exponential = exponential_histogram(bins_e, mean_e, low_e, high_e, seed=1)
    histograms = {"LOGNORMAL": (lognormal, 1), "EXPONENTIAL": (exponential, 1),
                  "ML-100K (l = 20)": (movielens_histogram(20), 20),
                  "ML-1M ratings per user": (movielens_user_histogram(1000), 1)}
    records = run(histograms, args.runs, lambda message: print(message, file=sys.stderr))
    seconds = round(time.monotonic() - started)

    raw = ROOT / "bench" / "results" / "reproduction_002"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "evaluation.json").write_text(json.dumps(records, indent=2) + "\n")
    lines = [
        "# Paper 002 reproduced: AHP against DPA-AHP",
        "",
        f"Generated by `python scripts/reproduce_002.py --runs {args.runs}` ({seconds} s). NOT PRIVATE: errors "
        "against the true histograms. Raw records: `bench/results/reproduction_002/evaluation.json`.",
        "",
        "`dpa_ahp` is the corrected, ε-DP version (a ranking pass with 5% of ε, per-bin budgets scaled so the "
        "largest is ε1). `dpa_ahp_as_published` is the thesis' version: ranks from the true counts and a largest "
        "per-bin budget of about (1 + δ)·ε1. It is NOT differentially private and is shown only to compare "
        "with the thesis' numbers. AHP: ρ = 0.85, η = 0.35. KL uses the thesis' rule (M2, 002: released bins "
        "floored at 0.01); range-query MSE is over the same 1,000 random intervals for every method (M7). "
        f"Mean ± standard error over {args.runs} runs (the same noise stream for every method).",
        "",
        "## Does the corrected DPA-AHP beat AHP?",
        "",
        *verdicts(records),
        "",
        "## The histograms",
        "",
        "| histogram | bins | mean | variance | range | thesis (Table 2) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, (counts, _sensitivity) in histograms.items():
        thesis = TABLE_2.get(name)
        thesis_text = (f"{thesis[0]} bins, mean {thesis[1]}, variance {thesis[2]:,}, range {list(thesis[3])}"
                       if thesis else "—")
        lines.append(f"| {name} | {counts.size} | {counts.mean():.1f} | {counts.var():,.1f} | "
                     f"[{counts.min()}, {counts.max()}] | {thesis_text} |")
    for name in histograms:
        for metric in ("kl", "range_mse"):
            lines += ["", f"## {name}: {metric}", ""] + table(records, name, metric)
    (ROOT / "docs" / "lab" / "reproduction_002.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
