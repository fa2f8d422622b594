"""How well the DP estimate of what bounding removed states it, against the truth.

NOT PRIVATE: every number here is computed from the raw records, for the benchmark only.

    python bench/bounding_estimate.py [--netflix T.parquet] [--runs 400] --out DIR

For ML-100K, ML-1M and the Netflix-shaped table, at the bounds l ∈ {10, 30, 64} and ε ∈ {0.1, 1, 5}
(the estimate gets ε/20 of it, as a counts release gives it): the true records kept K, the true
records removed (all of them, and up to the cap 8·l), the true share kept; over ``runs`` seeded
draws of the job's own function (``noisy_figures``), the median relative error of K̂ and D̂, how
often the 95% bound on the share kept covers the TRUE share (records past the cap included), and
the median of that bound. Pure pandas: the figures come from the users' record counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bound_selection import read_pairs  # noqa: E402

from dp_spark.core.ledger import Budget  # noqa: E402
from dp_spark.core.mechanisms import RandomSource  # noqa: E402
from dp_spark.release import bounding_estimate as be  # noqa: E402

BOUNDS = (10, 30, 64)
EPSILONS = (Fraction(1, 10), Fraction(1), Fraction(5))
DATASETS = ("ml-100k", "ml-1m", "netflix-10m")


def users_by_n(pairs: pd.DataFrame) -> pd.Series:
    return pairs.groupby("user_id").size().value_counts().sort_index()


def point(users: pd.Series, l: int, epsilon: Fraction, runs: int, seed: int) -> dict:
    plan = be.BoundingPlan(l, epsilon * be.SHARE)
    true = be.figures(users, plan)
    n = users.index.to_numpy(dtype=np.int64)
    total = int((n * users.to_numpy(dtype=np.int64)).sum())
    share = true.kept / total
    rng = RandomSource(seed)
    kept_err, removed_err, covered, highs = [], [], 0, []
    for _ in range(runs):
        kept, removed = be.noisy_figures(users, plan, Budget(plan.epsilon), rng)
        kept_err.append(abs(kept - true.kept) / true.kept)
        removed_err.append(abs(removed - true.removed_to_cap) / max(true.removed_to_cap, 1))
        high = be.kept_share_at_most(kept, removed, plan)
        covered += high is None or share <= high
        highs.append(1.0 if high is None else high)
    return {"l": l, "epsilon": float(epsilon), "records": total, "kept": true.kept,
            "removed_all": total - true.kept, "removed_to_cap": true.removed_to_cap, "true_share": round(share, 4),
            "share_to_cap": round(true.kept / (true.kept + true.removed_to_cap), 4),
            "kept_median_rel_error": round(float(np.median(kept_err)), 4),
            "removed_median_rel_error": round(float(np.median(removed_err)), 4),
            "coverage_95": round(covered / runs, 4), "share_bound_median": round(float(np.median(highs)), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--netflix", help="the 10M-row Netflix-shaped Parquet (dp-spark generate netflix)")
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    for dataset in DATASETS:
        if dataset == "netflix-10m" and args.netflix is None:
            continue
        users = users_by_n(read_pairs(dataset, args.netflix)[0])
        for l in BOUNDS:
            for epsilon in EPSILONS:
                rows.append({"dataset": dataset, **point(users, l, epsilon, args.runs, seed=l)})
                print(json.dumps(rows[-1]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"not_private": "NOT PRIVATE: from the raw records",
                                                  "runs": args.runs, "rows": rows}, indent=1) + "\n")
    columns = list(rows[0]) if rows else []
    table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    table += ["| " + " | ".join(f"{row[c]:,}" if isinstance(row[c], int) else str(row[c]) for c in columns) + " |"
              for row in rows]
    (out / "results.md").write_text("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
