"""What `l = "auto"` costs against the best fixed bound, and what partition selection releases.

NOT PRIVATE: every number here is computed from the raw records, for the benchmark only.

    python bench/bound_selection.py expected [--netflix T.parquet] --out DIR
        SRA's expected item-count MSE with l = "auto" (exact: Σ_b P(pick b)·MSE(b at 9/10 of ε)),
        against the best fixed l of a sweep 1..300 (the oracle), the best default candidate and the
        shipped default, all at the full ε; MovieLens 1M and 100K and the Netflix-shaped table.
    python bench/bound_selection.py runs --dataset ml-1m --epsilon 1 --runs 20 --out DIR
        Seeded releases of dp_spark.sra / dp_spark.hpa with l = "auto" (and HPA at fixed bounds):
        the empirical item MSE, to check the expectation and to measure HPA, which has no formula.
    python bench/bound_selection.py partition --runs 20 --out DIR
        Partition selection on MovieLens 1M with no item domain (ε = 1, δ = 1e-6).
    python bench/bound_selection.py speed --netflix T.parquet --repeats 3 --out DIR
        Wall time of SRA at l = 10 against l = "auto" on one table, interleaved, median of the runs.

Item counts only (no attributes), the Laplace publisher (discrete Laplace noise), as the job.
The MSE is over the public item domain, items without records included, as `dp-spark evaluate`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dp_spark.algorithms import bound_selection  # noqa: E402
from dp_spark.core.mechanisms import exponential_probabilities  # noqa: E402
from dp_spark.families import counts  # noqa: E402
from dp_spark.families.base import Domains  # noqa: E402
from dp_spark.lab.bound_curve import NOT_PRIVATE, sra_sampling_errors  # noqa: E402
from dp_spark.lab.tune import TuneSetup  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
EPSILONS = (0.1, 1.0)
SWEEP = range(1, 301)
SHIPPED = {"ml-1m": 30, "ml-100k": 30, "netflix-10m": 10}  # conf/movielens_sra.toml, conf/netflix_sra.toml
ITEM_CELLS = {"ml-1m": None, "ml-100k": 1682, "netflix-10m": 17770}  # ml-1m: the movies of movies.dat


# ---------------------------------------------------------------------------
# Data: (user_id, item_id), one row per record, all in the public domain.


def movielens_1m_items() -> np.ndarray:
    lines = (DATA / "ml-1m" / "movies.dat").read_bytes().decode("latin-1").splitlines()
    return np.array(sorted(int(line.split("::")[0]) for line in lines if line.strip()))


def read_pairs(dataset: str, netflix: str | None) -> tuple[pd.DataFrame, int]:
    """The pairs and the number of items in the public domain."""
    if dataset == "ml-1m":
        with gzip.open(DATA / "ml-1m" / "ratings_pairs.dat.gz", "rt") as f:
            pairs = pd.read_csv(f, sep="::", engine="python", names=["user_id", "item_id"])
        items = movielens_1m_items()
        pairs = pairs[pairs["item_id"].isin(items)]
        return pairs.reset_index(drop=True), items.size
    if dataset == "ml-100k":
        pairs = pd.read_csv(DATA / "ml-100k" / "u.data.gz", sep="\t", names=["user_id", "item_id", "r", "t"],
                            usecols=[0, 1])
        return pairs, ITEM_CELLS[dataset]
    if dataset == "netflix-10m":
        if netflix is None:
            raise SystemExit("netflix-10m needs --netflix PATH (dp-spark generate netflix --rows 10000000)")
        return pd.read_parquet(netflix, columns=["user_id", "item_id"]), ITEM_CELLS[dataset]
    raise SystemExit(f"unknown dataset {dataset!r}")


def users_by_n(pairs: pd.DataFrame) -> dict[int, int]:
    per_user = pairs.groupby("user_id").size()
    return {int(n): int(u) for n, u in per_user.value_counts().items()}


# ---------------------------------------------------------------------------
# The expectation.


def pick_probabilities(by_n: dict[int, int], cells: int, epsilon: float,
                       candidates=bound_selection.DEFAULT_CANDIDATES) -> np.ndarray:
    """P(the mechanism picks each candidate), as a release of SRA with l = "auto" and item counts
    only sets it: the product's split and error model, the exact quality and sensitivity."""
    params = counts.CountsParams("sra", "auto")
    split = counts._split(params, Fraction(epsilon), Domains(None))
    model = counts.error_model(params, Domains(range(cells)), split)
    scores = bound_selection.quality(by_n, candidates, model)
    sensitivity = bound_selection.quality_sensitivity(candidates, model)
    return exponential_probabilities(np.asarray(scores, dtype=float), split["epsilon_bound"], sensitivity,
                                     monotone=True)


def noise_variance(bound: int, epsilon_items: float, cells: int) -> float:
    """The Laplace publisher's per-item noise variance (discrete Laplace) at sensitivity ``bound``."""
    setup = TuneSetup("sra", "laplace", {}, Fraction(epsilon_items), {"epsilon_items": Fraction(epsilon_items)},
                      cells, None)
    return setup.noise_variance(bound)


def expected_rows(dataset: str, pairs: pd.DataFrame, cells: int) -> list[dict]:
    by_n = users_by_n(pairs)
    candidates = bound_selection.DEFAULT_CANDIDATES
    bounds = sorted(set(SWEEP) | set(candidates) | {SHIPPED[dataset]})
    errors = {e.bound: e for e in sra_sampling_errors(pairs, bounds, cells)}
    rows = []
    for epsilon in EPSILONS:
        full = {b: errors[b].expected_mse(noise_variance(b, epsilon, cells)) for b in bounds}
        # l = "auto": a tenth of ε picks l, the item counts get the other 9/10 (families/counts.py _split).
        auto_eps = epsilon * 9 / 10
        picks = pick_probabilities(by_n, cells, epsilon, candidates)
        at_auto = [errors[b].expected_mse(noise_variance(b, auto_eps, cells)) for b in candidates]
        auto = float(np.dot(picks, at_auto))
        oracle = min(SWEEP, key=lambda b: full[b])
        best_candidate = min(candidates, key=lambda b: full[b])
        shipped = SHIPPED[dataset]
        rows.append({
            "dataset": dataset, "epsilon": epsilon, "records": int(len(pairs)), "users": int(sum(by_n.values())),
            "items": cells,
            "auto_mse": auto,
            "auto_picks": {int(b): round(float(p), 4) for b, p in zip(candidates, picks) if p >= 1e-4},
            "oracle_l": int(oracle), "oracle_mse": full[oracle],
            "best_candidate_l": int(best_candidate), "best_candidate_mse": full[best_candidate],
            "shipped_l": shipped, "shipped_mse": full[shipped],
            "auto_vs_oracle": auto / full[oracle], "auto_vs_shipped": auto / full[shipped],
        })
    return rows


def expected_markdown(rows: list[dict]) -> str:
    lines = ["| data | ε | l = auto: E[MSE] (picks) | oracle l (1..300) | best candidate | shipped | auto/oracle "
             "| auto/shipped |", "|---|---|---|---|---|---|---:|---:|"]
    for r in rows:
        picks = ", ".join(f"{b}: {p:.2f}" for b, p in r["auto_picks"].items() if p >= 0.01)
        lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {r['auto_mse']:.4g} ({picks}) | "
                     f"{r['oracle_l']}: {r['oracle_mse']:.4g} | {r['best_candidate_l']}: {r['best_candidate_mse']:.4g} | "
                     f"{r['shipped_l']}: {r['shipped_mse']:.4g} | {r['auto_vs_oracle']:.3f} | "
                     f"{r['auto_vs_shipped']:.3f} |")
    return "\n".join(lines)


def cmd_expected(args) -> None:
    rows = []
    for dataset in args.datasets.split(","):
        started = time.monotonic()
        pairs, cells = read_pairs(dataset, args.netflix)
        rows += expected_rows(dataset, pairs, cells)
        print(f"{dataset}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    write(args.out, "expected", rows, expected_markdown(rows))


def write(out: str, name: str, rows, text: str) -> None:
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps({"not_private": NOT_PRIVATE, "rows": rows}, indent=2) + "\n")
    (directory / f"{name}.md").write_text(f"{NOT_PRIVATE}\n\n{text}\n")
    print(f"{NOT_PRIVATE}\n\n{text}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("expected")
    p.add_argument("--datasets", default="ml-1m,ml-100k,netflix-10m")
    p.add_argument("--netflix")
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_expected)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
