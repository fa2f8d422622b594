"""HPA's `l = "auto"` on the evaluation set: what its private choice costs against the fine-grid
oracle of fixed bounds, on the item counts.

NOT PRIVATE: every number here is computed from the raw records, for the benchmark only.

    python bench/hpa_bound_evaluation.py --out DIR [--shapes NAME,...] [--draws 4]
        [--noise laplace,gaussian] [--epsilons 0.1,1,5] [--quality hpa,sra] [--candidates 1,2,4,...]
        [--choice estimate [--runs 200]] [--set heldout --checkins DIR]

HPA (d = 1) first draws a noisy popularity and then keeps each user's l records of highest
popularity, ties at random. Given one draw of the popularity its item error is exact: each item's
expected drop (bound_selection's term without its caps), squared, plus the variance of the ties
at the boundary (hypergeometric within the tie group), plus the noise of the counts. This script
draws the popularity as the release does (one record per user, uniformly; discrete Laplace noise
at the split's ε_popularity) ``--draws`` times, and averages over the draws:

- auto: Σ_b P(pick b | popularity)·E(b | popularity) at auto's split, P the exact distribution of
  the product's choice (bound_selection.pick_probabilities: the user count and the exponential
  mechanism) over the norms it scores, HPA's own drop (``--quality hpa``, the product) or SRA's
  (``--quality sra``: what HPA scored before);
- oracle: the best integer bound from 1 to 256 at a fixed bound's split, the same draws of the
  popularity's sample and noise scaled to that split's ε_popularity;
- shipped: l = 30, conf/movielens_hpa.toml's bound;
- floor: the best candidate's error at auto's split over the same draws, what the choice's share of
  ε and the grid cost before the mechanism's spread.

With ``--choice estimate`` (algorithm.l_choice, HPA's default; release.bound_estimate with
release.ranked_bias's model) P is instead how often ``--runs`` runs of the product's choice pick each
integer bound on the draw's raw statistics (its anchor at that draw's ranking; fixed seeds;
``--runs 0``: the statistics without noise, the model alone), and the floor is the best integer
bound at auto's split.

The shapes are bench/bound_evaluation.py's MovieLens ones with item counts alone; with ``--set
heldout`` its held-out ones with item counts alone (Laplace only for the check-ins with repeated
records, as there).
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bound_evaluation import FINE, heldout_shapes, records_of, shapes, write_results  # noqa: E402
from bound_selection import Setting  # noqa: E402

from dp_spark.core.mechanisms import RandomSource, discrete_laplace  # noqa: E402
from dp_spark.families.counts import bound_choice  # noqa: E402
from dp_spark.families.counts import family as counts  # noqa: E402
from dp_spark.families.registry import family_of  # noqa: E402
from dp_spark.lab.bound_curve import ranked_sampling_errors, user_item_table  # noqa: E402
from dp_spark.lab.tune import choice_percentiles  # noqa: E402
from dp_spark.release import bound_estimate, bound_objective, bound_selection  # noqa: E402
from dp_spark.release.family import Domains, plan_split  # noqa: E402

SHIPPED = 30


class HpaSetting(Setting):
    """bench/bound_selection.py's Setting for HPA with d = 1."""

    def params(self, l, objective=None) -> counts.CountsParams:
        gaussian = dict(noise="gaussian", records_per_item=1) if self.noise == "gaussian" else {}
        auto = dict(candidates=self.candidates, objective=objective) if l == "auto" else {}
        return counts.CountsParams("hpa", l, d=1, **auto, **gaussian)

    def split_of(self, params: counts.CountsParams, domains: Domains) -> dict:
        return plan_split(family_of("hpa"), params, Fraction(str(self.epsilon)), domains, accounting=self.accounting)


def sampled_counts(table: pd.DataFrame, position: np.ndarray, cells: int, rng: np.random.Generator) -> np.ndarray:
    """Item counts of one record per user drawn uniformly (HPA's popularity sample with d = 1):
    ``table`` has one row per (user, item) with k and n, sorted by user; ``position`` codes its item."""
    users_start = np.flatnonzero(np.r_[True, table["user_id"].to_numpy()[1:] != table["user_id"].to_numpy()[:-1]])
    n = table["n"].to_numpy()[users_start]
    pick = (rng.random(n.size) * n).astype(np.int64)  # the record's rank among the user's n
    cumulative = np.cumsum(table["k"].to_numpy())
    before = np.r_[0, cumulative[:-1]][users_start]
    row = np.searchsorted(cumulative, before + pick, side="right")
    return np.bincount(position[row], minlength=cells)


def ranked(table: pd.DataFrame, scores: np.ndarray, position: np.ndarray) -> pd.DataFrame:
    """The rows with t and g (bound_selection.ranked_cells) for the items' ``scores``."""
    return bound_selection.ranked_cells(table.assign(item=position), "item", dict(enumerate(scores.tolist())))


def hpa_errors(rows: pd.DataFrame, cells: int, bounds) -> dict[int, float]:
    """{l: Σ_items (expected drop² + the ties' variance)} for HPA at each bound, given the ranking
    (lab.bound_curve's model, as sums over the items rather than means)."""
    return {e.bound: (e.bias_squared + e.sampling_variance) * cells
            for e in ranked_sampling_errors(rows, "item", bounds, cells)}


def estimate_picks(rows: pd.DataFrame, users_by_n: pd.Series, setting: HpaSetting, auto, domains: Domains,
                   split: dict, runs: int, seed: int) -> dict[int, float]:
    """P(the estimate picks b) over ``runs`` runs of the product's choice on one draw's ranked
    rows (each user's records at that draw's popularity), or its pick without noise (runs = 0)."""
    model = bound_choice.error_model(bound_choice.every_bound(auto), domains, split)
    first, last = setting.candidates[0], setting.candidates[-1]
    cells = len(domains.items)
    reach = bound_estimate.anchor_reach(model.records_per_cell, last - first, cells)
    squared = [bound_estimate.anchor_squared_norms(rows.drop(columns="item_id").rename(columns={"item": "cell"}),
                                                   first, last - first, reach)]
    if runs:
        return bound_estimate.pick_probabilities(users_by_n, squared, ["item_counts"], setting.candidates, model,
                                                 cells, split["epsilon_bound"], setting.accounting, runs, seed,
                                                 ranked=True)
    edges = bound_estimate.histogram_edges(cells, model.records_per_cell)
    return {bound_estimate.bound_of(bound_estimate.record_histogram(users_by_n, edges),
                                    bound_estimate.combined_value(squared, [1]), edges, setting.candidates, model,
                                    bound_estimate.assumed_top(cells, model.records_per_cell),
                                    bound_estimate.NO_NOISE, ranked=True): 1.0}


def evaluate(shape, records: pd.DataFrame, ids: np.ndarray, setting: HpaSetting, draws: int, quality: str,
             seed: int, runs: int | None = None) -> dict:
    """One cell; ``runs`` (not None): the estimate choice's, from that many runs per draw."""
    cells = len(ids)
    domains = Domains(range(cells))
    auto = setting.params("auto", bound_objective.ITEMS)
    if runs is not None:
        auto = replace(auto, choice="estimate")
    auto_split, fixed_split = setting.split_of(auto, domains), setting.split_of(setting.params(SHIPPED), domains)
    model = bound_choice.error_model(auto, domains, auto_split)
    candidates = setting.candidates if runs is None else tuple(FINE)
    table = user_item_table(records[["user_id", "item_id"]]).sort_values("user_id", kind="stable")
    table = table.reset_index(drop=True)
    position = np.searchsorted(ids, table["item_id"].to_numpy())
    users = int(table["user_id"].nunique())
    users_by_n = table.groupby("user_id")["n"].first().value_counts()
    sample_rng = np.random.default_rng(seed)
    noise_rng = RandomSource(seed)
    auto_errors, fixed_errors, picks_all = [], [], []
    sra_cells = table.rename(columns={"item_id": "cell"})
    for _ in range(draws):
        sample = sampled_counts(table, position, cells, sample_rng)
        # The release's noise: discrete Laplace of scale d/ε_popularity (d = 1), at each split's part.
        auto_scores, fixed_scores = (
            np.maximum(sample + discrete_laplace(noise_rng, 1 / split["epsilon_popularity"], cells), 0)
            for split in (auto_split, fixed_split))
        rows_auto = ranked(table, auto_scores, position)
        scored = rows_auto.rename(columns={"item": "cell"}) if quality == "hpa" else sra_cells

        def norms_at(cap: int, scored=scored) -> list:
            return bound_selection.weighted_norms(
                [bound_selection.squared_bias_norms(scored, candidates, model.records_per_cell, cap)], [1])
        if runs is None:
            picks_all.append(bound_selection.pick_probabilities(
                norms_at, users, candidates, model, auto_split["epsilon_bound"], setting.noise == "gaussian"))
        else:
            run_seed = zlib.crc32(f"{shape.name}|{setting.noise}|{setting.epsilon}|{len(picks_all)}".encode())
            picked = estimate_picks(rows_auto, users_by_n, setting, auto, domains, auto_split, runs, run_seed)
            picks_all.append(np.array([picked.get(b, 0.0) for b in candidates]))
        at_auto = hpa_errors(rows_auto, cells, candidates)
        auto_errors.append(np.array([at_auto[b] + cells * setting.noise_variance(b, auto_split["epsilon_items"])
                                     for b in candidates]))
        at_fixed = hpa_errors(ranked(table, fixed_scores, position), cells, sorted(set(FINE) | {SHIPPED}))
        fixed_errors.append({b: e + cells * setting.noise_variance(b, fixed_split["epsilon_items"])
                             for b, e in at_fixed.items()})
    fixed = {b: float(np.mean([f[b] for f in fixed_errors])) for b in fixed_errors[0]}
    oracle = min(FINE, key=fixed.__getitem__)
    expected = float(np.mean([np.dot(p, e) for p, e in zip(picks_all, auto_errors)]))
    mean_picks = np.mean(picks_all, axis=0)
    spread = choice_percentiles(np.concatenate(picks_all) / draws, np.concatenate(auto_errors))
    at_auto_split = np.mean(auto_errors, axis=0)  # each candidate's error at auto's split, over the draws
    return {
        "shape": shape.name, "quality": quality if runs is None else "estimate", "noise": setting.noise,
        "epsilon": setting.epsilon, "users": users,
        "cells": cells, "draws": draws, "auto": expected, "auto_p99": spread[0.99],
        "picks": {int(b): round(float(p), 4) for b, p in zip(candidates, mean_picks) if p >= 1e-4},
        "likeliest": int(candidates[int(np.argmax(mean_picks))]), "oracle_l": int(oracle), "oracle": fixed[oracle],
        "shipped": fixed[SHIPPED], "auto_vs_oracle": expected / fixed[oracle],
        "p99_vs_oracle": spread[0.99] / fixed[oracle], "auto_vs_shipped": expected / fixed[SHIPPED],
        "shipped_vs_oracle": fixed[SHIPPED] / fixed[oracle],
        "floor_l": int(candidates[int(np.argmin(at_auto_split))]),
        "floor_vs_oracle": float(at_auto_split.min()) / fixed[oracle],
    }


def markdown(rows: list[dict]) -> str:
    lines = ["| shape | quality | noise | ε | auto/oracle | floor | p99/oracle | auto/shipped | shipped/oracle "
             "| oracle l | likeliest | picks ≥ 0.05 |", "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        picks = ", ".join(f"{b}: {p:.2f}" for b, p in r["picks"].items() if p >= 0.05)
        lines.append(f"| {r['shape']} | {r['quality']} | {r['noise']} | {r['epsilon']:g} | {r['auto_vs_oracle']:.3f} | "
                     f"{r['floor_vs_oracle']:.3f} | {r['p99_vs_oracle']:.3f} | {r['auto_vs_shipped']:.3f} | "
                     f"{r['shipped_vs_oracle']:.3f} | "
                     f"{r['oracle_l']} | {r['likeliest']} | {picks} |")
    lines.append("")
    for quality in dict.fromkeys(r["quality"] for r in rows):
        ratios = [r["auto_vs_oracle"] for r in rows if r["quality"] == quality]
        lines.append(f"quality {quality}: auto within 1.3× of the oracle in {sum(x <= 1.3 for x in ratios)} of "
                     f"{len(ratios)} cells; median {float(np.median(ratios)):.3f}, worst {max(ratios):.3f}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", help="names (or parts of names), comma-separated; default the MovieLens "
                        "item shapes")
    parser.add_argument("--noise", default="laplace,gaussian")
    parser.add_argument("--epsilons", default="0.1,1,5")
    parser.add_argument("--draws", type=int, default=4, help="draws of the popularity per cell")
    parser.add_argument("--quality", default="hpa,sra", help="hpa (HPA's own drop, the product), sra (SRA's)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--candidates", help="the candidate bounds, comma-separated (default the product's)")
    parser.add_argument("--choice", default="exponential", choices=["exponential", "estimate"],
                        help="estimate: l_choice = \"estimate\" (HPA's default; --quality is then unused)")
    parser.add_argument("--set", default="evaluation", choices=["evaluation", "heldout"])
    parser.add_argument("--checkins", help="with --set heldout: the generated check-ins' directory")
    parser.add_argument("--runs", type=int, default=200, help="with --choice estimate: runs of the choice per draw "
                                                              "(0: the statistics without noise)")
    args = parser.parse_args(argv)
    candidates = (tuple(int(b) for b in args.candidates.split(",")) if args.candidates
                  else bound_selection.DEFAULT_CANDIDATES)
    wanted = [s for s in (shapes() if args.set == "evaluation" else heldout_shapes())
              if s.source != "netflix" and not s.edges]
    if args.shapes:
        wanted = [s for s in wanted if any(part in s.name for part in args.shapes.split(","))]
    cache, rows = {}, []
    for shape in wanted:
        started = time.monotonic()
        records, ids = records_of(shape, None, cache, args.checkins)
        for noise in ("laplace",) if shape.source == "checkins-visits" else args.noise.split(","):
            for epsilon in (float(e) for e in args.epsilons.split(",")):
                qualities = args.quality.split(",") if args.choice == "exponential" else ["hpa"]
                for quality in qualities:
                    setting = HpaSetting(epsilon, noise, candidates)
                    rows.append(evaluate(shape, records, ids, setting, args.draws, quality, args.seed,
                                         None if args.choice == "exponential" else args.runs))
                    r = rows[-1]
                    print(f"{shape.name} | {quality} | {noise} | {epsilon:g}: auto/oracle {r['auto_vs_oracle']:.3f} "
                          f"(oracle l {r['oracle_l']}, likeliest {r['likeliest']})", file=sys.stderr)
        print(f"{shape.name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    name = "hpa_evaluation" if args.choice == "exponential" else "hpa_estimate"
    name = name if args.set == "evaluation" else f"{name}_heldout"
    write_results(Path(args.out), name if args.runs or args.choice == "exponential" else f"{name}_no_noise", rows,
                  markdown(rows))


if __name__ == "__main__":
    main()
