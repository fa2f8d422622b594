"""What location entropy's M = C = "auto" costs against the best fixed bounds (Limit).

NOT PRIVATE: every number here is computed from the raw check-ins, for the benchmark only.

    python bench/entropy_bound_selection.py --data DIR [--name NAME] [--epsilons 0.1,1,5] --out OUT

DIR is a table from ``dp-spark generate checkins`` (user_id, location_id, visits, first_time).
For each ε, Limit's expected M10 (the mean squared error of the released entropy against the
actual, unbounded entropy, over the public locations 1..L, as ``dp-spark evaluate`` scores it),
exactly, with no sampling:

- at a fixed (M, C) with the whole ε: the bias² of H̄ rounded to the release's grid, plus the
  variance of the discrete Laplace the release draws (``location_entropy.laplace_entropy``);
- with M and C "auto": Σ P(pick)·MSE(pick at the entropy's share), P the exponential mechanism's
  exact distribution over the default candidate grid, from the product's own quality,
  sensitivity and split (a tenth of ε chooses), and the 50th/90th/99th percentiles of
  E[MSE | pick] over the choice;
- the oracle: the best fixed pair on the fine grid M ∈ 1..30, C ∈ 1..50 (every integer up to the
  largest of paper 004's grids, wider than the default candidates), and the shipped default (5, 5)
  of conf/sparse_entropy.toml.

Users keep their first M locations by first visit (``location_choice = "first_visit"``, the
default; ties by location id, as ``bounding.user_locations``), each capped at C visits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bound_selection import write  # noqa: E402  (the results' JSON and Markdown, headed NOT PRIVATE)

from dp_spark.core.mechanisms import as_scale, discrete_laplace_variance, exponential_probabilities  # noqa: E402
from dp_spark.families.location_entropy import bounds_choice as ebs  # noqa: E402
from dp_spark.families.location_entropy import entropy as le  # noqa: E402
from dp_spark.families.location_entropy import sensitivity as sens  # noqa: E402
from dp_spark.families.location_entropy.sums import CandidateSums  # noqa: E402
from dp_spark.lab.tune import choice_percentiles  # noqa: E402

FINE_M = tuple(range(1, 31))  # paper 004's M grid goes to 30, its C grid to 50
FINE_C = tuple(range(1, 51))
SHIPPED = le.Bounds(M=5, C=5)  # conf/sparse_entropy.toml
UNIT = 1 << le.GRID_BITS


def ranked(path: str) -> tuple[pd.DataFrame, int]:
    """(user_id, location, c, rank) with rank in the user's first-visit order, and L."""
    frame = pd.read_parquet(path, columns=["user_id", "location_id", "visits", "first_time"])
    stats = json.loads((Path(path) / "_stats.json").read_text())
    frame = frame.sort_values(["user_id", "first_time", "location_id"], kind="stable")
    frame["rank"] = frame.groupby("user_id", sort=False).cumcount() + 1
    return frame.rename(columns={"location_id": "location", "visits": "c"}), int(stats["locations"])


def actual_entropy(pairs: pd.DataFrame, locations: int) -> np.ndarray:
    """Every user's every visit, unbounded: what evaluate compares with."""
    where = pairs["location"].to_numpy() - 1
    c = pairs["c"].to_numpy(dtype=np.int64)
    users = np.bincount(where, minlength=locations)
    visits = np.bincount(where, weights=c, minlength=locations)
    c_log_c = np.bincount(where, weights=c * np.log(c), minlength=locations)
    return le.entropy_of(users, visits, c_log_c)


def grid_sums(pairs: pd.DataFrame, locations: int, Ms: tuple[int, ...], Cs: tuple[int, ...]) -> CandidateSums:
    """The sums ``families.location_entropy.sums.candidate_sums`` gives, in numpy: at (M_i, C_j) a pair
    counts when its rank is ≤ M_i, with c capped at C_j."""
    kept = pairs[pairs["rank"] <= Ms[-1]].sort_values("rank", kind="stable")
    rank = kept["rank"].to_numpy()
    where = kept["location"].to_numpy() - 1
    ends = np.searchsorted(rank, Ms, side="right")  # the rows of rank ≤ M_i are kept[:ends[i]]
    users = np.stack([np.bincount(where[:e], minlength=locations) for e in ends])
    visits = np.zeros((len(Ms), len(Cs), locations), dtype=np.int64)
    c_log_c = np.zeros((len(Ms), len(Cs), locations))
    raw = kept["c"].to_numpy(dtype=np.int64)
    for j, C in enumerate(Cs):
        c = np.minimum(raw, C)
        for i, e in enumerate(ends):
            visits[i, j] = np.bincount(where[:e], weights=c[:e], minlength=locations).astype(np.int64)
            c_log_c[i, j] = np.bincount(where[:e], weights=(c * np.log(c))[:e], minlength=locations)
    return CandidateSums(tuple(Ms), tuple(Cs), users, visits, c_log_c, {})


def squared_bias(sums: CandidateSums, truth: np.ndarray) -> np.ndarray:
    """mean_l (H̄ on the release's grid − H)² at every (M_i, C_j)."""
    out = np.empty((len(sums.Ms), len(sums.Cs)))
    for i in range(len(sums.Ms)):
        for j in range(len(sums.Cs)):
            released = le._on_grid(ebs.stats_at(sums, i, j).entropy) / UNIT
            out[i, j] = float(np.mean((released - truth) ** 2))
    return out


def noise_variance(M: int, C: int, epsilon: Fraction) -> float:
    """The variance of Limit's noise per location at (M, C), as laplace_entropy draws it."""
    units = M * (le._units(sens.global_sensitivity(C)) + 1)
    return discrete_laplace_variance(as_scale(Fraction(units) / epsilon)) / UNIT ** 2


def mse_table(bias: np.ndarray, Ms, Cs, epsilon: Fraction) -> np.ndarray:
    return bias + np.array([[noise_variance(M, C, epsilon) for C in Cs] for M in Ms])


def rows_for(name: str, pairs: pd.DataFrame, locations: int, epsilons: list[Fraction]) -> list[dict]:
    truth = actual_entropy(pairs, locations)
    fine = grid_sums(pairs, locations, FINE_M, FINE_C)
    fine_bias = squared_bias(fine, truth)
    Ms, Cs = ebs.DEFAULT_M_CANDIDATES, ebs.DEFAULT_C_CANDIDATES
    at = np.ix_([FINE_M.index(M) for M in Ms], [FINE_C.index(C) for C in Cs])
    grid = CandidateSums(Ms, Cs, fine.users[at[0][:, 0]], fine.visits[at[0], at[1]], fine.c_log_c[at[0], at[1]], {})
    grid_bias = fine_bias[at]
    sensitivity = ebs.quality_sensitivity(Ms, Cs)
    rows = []
    for epsilon in epsilons:
        full = mse_table(fine_bias, FINE_M, FINE_C, epsilon)
        bound = epsilon * ebs.DEFAULT_SHARE
        share = epsilon - bound  # as a release with only the entropy output splits it
        scores = ebs.quality(grid, "limit", share, locations).reshape(-1)
        picks = exponential_probabilities(np.asarray(scores, dtype=float), bound, sensitivity)
        at_auto = mse_table(grid_bias, Ms, Cs, share).reshape(-1)
        percentile = choice_percentiles(picks, at_auto)
        auto = float(picks @ at_auto)
        oi, oj = np.unravel_index(int(np.argmin(full)), full.shape)
        oracle = float(full[oi, oj])
        shipped = float(full[FINE_M.index(SHIPPED.M), FINE_C.index(SHIPPED.C)])
        pairs_picked = {f"{Ms[k // len(Cs)]},{Cs[k % len(Cs)]}": round(float(p), 4)
                        for k, p in enumerate(picks) if p >= 1e-4}
        # What C's spread costs: the error at each C beside the likeliest pick's M, over the floor.
        likeliest_m = int(np.argmax(picks)) // len(Cs)
        by_c = {C: float(at_auto[likeliest_m * len(Cs) + j]) for j, C in enumerate(Cs)}
        rows.append({
            "data": name, "epsilon": float(epsilon), "locations": locations,
            "users": int(pairs["user_id"].nunique()), "pairs": int(len(pairs)),
            "auto_mse": auto, "auto_p50": percentile[0.5], "auto_p90": percentile[0.9],
            "auto_p99": percentile[0.99], "auto_picks": pairs_picked,
            "oracle": [int(FINE_M[oi]), int(FINE_C[oj])], "oracle_mse": oracle,
            "shipped": [SHIPPED.M, SHIPPED.C], "shipped_mse": shipped,
            "floor_mse": float(at_auto.min()),  # the best candidate at the entropy's share
            "likeliest_M": int(Ms[likeliest_m]), "mse_by_C": by_c,
            "noise_by_C": {C: noise_variance(Ms[likeliest_m], C, share) for C in Cs},
            "auto_vs_oracle": auto / oracle, "p99_vs_oracle": percentile[0.99] / oracle,
            "auto_vs_shipped": auto / shipped,
        })
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| data | ε | auto: E[MSE] (picks ≥ 0.05) | p99 | oracle (M, C): MSE | shipped (5, 5) | floor "
             "| auto/oracle | p99/oracle | auto/shipped |", "|---|---|---|---|---|---|---|---:|---:|---:|"]
    for r in rows:
        picks = ", ".join(f"({k}): {p:.2f}" for k, p in r["auto_picks"].items() if p >= 0.05)
        lines.append(f"| {r['data']} | {r['epsilon']:g} | {r['auto_mse']:.4g} ({picks}) | {r['auto_p99']:.4g} | "
                     f"({r['oracle'][0]}, {r['oracle'][1]}): {r['oracle_mse']:.4g} | {r['shipped_mse']:.4g} | "
                     f"{r['floor_mse']:.4g} | {r['auto_vs_oracle']:.3f} | {r['p99_vs_oracle']:.3f} | "
                     f"{r['auto_vs_shipped']:.3f} |")
    lines += ["", "Each C at the likeliest pick's M: E[MSE | pick] over the floor (the noise's part of it)", "",
              "| data | ε | M | " + " | ".join(f"C = {C}" for C in ebs.DEFAULT_C_CANDIDATES) + " |",
              "|---|---|---:|" + "---:|" * len(ebs.DEFAULT_C_CANDIDATES)]
    for r in rows:
        cells = [f"{r['mse_by_C'][C] / r['floor_mse']:.3f} ({r['noise_by_C'][C] / r['mse_by_C'][C]:.2f})"
                 for C in ebs.DEFAULT_C_CANDIDATES]
        lines.append(f"| {r['data']} | {r['epsilon']:g} | {r['likeliest_M']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", action="append", required=True, help="a generated check-in table (repeatable)")
    parser.add_argument("--name", action="append", help="a name for each --data (default: the directory's name)")
    parser.add_argument("--epsilons", default="0.1,1,5")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    names = args.name or [Path(d).name for d in args.data]
    if len(names) != len(args.data):
        parser.error("give one --name per --data")
    epsilons = [Fraction(e) for e in args.epsilons.split(",")]
    rows = []
    for name, path in zip(names, args.data):
        started = time.monotonic()
        pairs, locations = ranked(path)
        rows += rows_for(name, pairs, locations, epsilons)
        print(f"{name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    write(args.out, "expected", rows, markdown(rows))


if __name__ == "__main__":
    main()
