"""A numpy simulation of the means release, to choose its defaults before the family exists (not
the product's code path; NOT PRIVATE). On the rated part of ML-1M (users 1-2999, 487,650 ratings):
SRA's uniform sample of l ratings per user, each rating centred at 3 stars on a grid of 1/500 star,
per-movie counts and centred sums with noise, and the mean as their ratio. It prints, for movies
with at least 1,000 ratings (29 of them), the mean absolute error of the released average rating
against the true one:

* bias: the kept ratings' mean without noise (what bounding alone costs);
* laplace 1:1 and laplace 0.7: pure ε = 1, the sums getting half or 0.7 of it;
* gaussian 1:1 and gaussian 0.7: ρ of (ε = 1, δ = 1e-6), c = 1 rating per user and movie, split
  the same ways in ρ.

    python bench/means_simulation.py [--runs 10]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dp_spark.core import zcdp  # noqa: E402

RATINGS = ROOT.parent / "shared" / "data" / "ml-1m" / "ratings_users_0001-2999.dat.gz"
CENTRE, UNIT, STEPS = 3.0, 0.002, 1000  # ratings 1..5: half-range 2 stars in 1,000 units
BOUNDS = (10, 30, 60, 100, 200, 400)


def read() -> pd.DataFrame:
    ratings = pd.read_csv(RATINGS, sep="::", engine="python", names=["user", "movie", "rating", "time"])
    return ratings.sort_values("user", kind="stable").reset_index(drop=True)


def sra_keep(users: np.ndarray, l: int, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask: each user's uniform sample of min(n, l) rows (``users`` sorted)."""
    keep = np.zeros(users.size, dtype=bool)
    starts = np.r_[0, np.flatnonzero(np.diff(users)) + 1]
    keys = rng.random(users.size)
    for start, size in zip(starts, np.diff(np.r_[starts, users.size])):
        chosen = np.arange(size) if size <= l else np.argpartition(keys[start:start + size], l)[:l]
        keep[start + chosen] = True
    return keep


def noisy(true: np.ndarray, l1: float, l2: float, share: float, noise: str, epsilon: float, rho: float,
          rng: np.random.Generator) -> np.ndarray:
    if noise == "laplace":
        return true + rng.laplace(0, l1 / (epsilon * share), true.size)
    return true + rng.normal(0, l2 / math.sqrt(2 * rho * share), true.size)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    ratings = read()
    movies, cell = np.unique(ratings["movie"].to_numpy(), return_inverse=True)
    truth = ratings.groupby("movie")["rating"].mean().reindex(movies).to_numpy()
    popular = ratings.groupby("movie").size().reindex(movies).to_numpy() >= 1000
    units = np.round((ratings["rating"].to_numpy() - CENTRE) / UNIT)
    epsilon, rho = 1.0, float(zcdp.rho_of(1.0, 1e-6))
    rng = np.random.default_rng(0)
    print(f"{popular.sum()} movies with >= 1,000 ratings; MAE of their average rating over {args.runs} runs")
    variants = [("laplace", 0.5), ("laplace", 0.7), ("gaussian", 0.5), ("gaussian", 0.7)]
    print(f"{'l':>5} {'bias':>7} " + " ".join(f"{n} {s:g}".rjust(13) for n, s in variants))
    for l in BOUNDS:
        errors = {name: [] for name in ["bias", *variants]}
        for _ in range(args.runs):
            keep = sra_keep(ratings["user"].to_numpy(), l, rng)
            counts = np.bincount(cell[keep], minlength=movies.size).astype(float)
            sums = np.bincount(cell[keep], weights=units[keep], minlength=movies.size)
            kept_mean = CENTRE + UNIT * sums[popular] / counts[popular]  # every popular movie keeps some
            errors["bias"].append(np.abs(kept_mean - truth[popular]).mean())
            for noise, share in variants:
                c = noisy(counts, l, math.sqrt(l), 1 - share, noise, epsilon, rho, rng)
                s = noisy(sums, l * STEPS, math.sqrt(l) * STEPS, share, noise, epsilon, rho, rng)
                mean = np.clip(CENTRE + UNIT * s / np.maximum(c, 1e-9), 1, 5)
                errors[(noise, share)].append(np.abs(mean - truth)[popular].mean())
        print(f"{l:>5} " + " ".join(f"{np.mean(v):>{7 if k == 'bias' else 13}.3f}" for k, v in errors.items()))


if __name__ == "__main__":
    main()
