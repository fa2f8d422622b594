"""The public evaluation set of `l = "auto"` (SRA): what the private choice costs against the
fine-grid oracle, shape by shape, on each objective it can score.

NOT PRIVATE: every number here is computed from the raw records, for the benchmark only.

    python bench/bound_evaluation.py --out DIR [--shapes NAME,...] [--netflix T.parquet]
        [--noise laplace,gaussian] [--epsilons 0.1,1,5] [--choice estimate [--draws 200]]
        [--set heldout --checkins DIR]

The shapes (docs/bound_selection.md, "The evaluation set"): MovieLens 100K and the rated part of
MovieLens 1M (users 1–2999, whose ratings are exact), whole and restricted to their 90 most-rated
movies; those counted against the whole catalogue and against their own 90 ids; item counts
alone, and items with item × rating edges (ratings 1–5). Beside them the earlier set's
ML-1M (all 1M pairs, items only) and ML-1M's 100 most-rated movies against the catalogue, and,
with --netflix, the Netflix-shaped table (items, and items × its attribute column).

For each shape, objective (release.bound_objective: "items", and with edges "cells" and
"tables"), ε and noise (pure ε with discrete Laplace noise; ρ-zCDP from (ε, 1e-6) with the
discrete Gaussian, c = 1):

- auto: Σ_b P(pick b)·E(b) with E(b) SRA's exact expected error on the objective (each table's
  squared bias, hypergeometric sampling variance and noise variance, summed over its cells,
  times its weight) at auto's split, P the choice's exact distribution from the product's own
  quality, objective weights, user count and sensitivity (bound_selection.pick_probabilities);
- oracle: the best integer bound from 1 to 256 (the largest candidate) at a fixed bound's split;
- shipped: the config's fixed default (l = 30 in conf/movielens_sra.toml, l = 10 for Netflix);
- p99: the 99th percentile of E(pick) over the choice; "below": P(pick < oracle's bound).

``--set heldout`` runs instead the shapes the estimate choice was not designed on
(heldout_shapes: other domain sizes, ML-1M's other users, generated check-ins with and without
repeated records), written to heldout{,_estimate}.{json,md}.

With ``--choice estimate`` (algorithm.l_choice, release.bound_estimate) P is instead how often
``--draws`` runs of that choice on the shape's statistics (fixed seeds) pick each integer bound
(``--draws 0``: the statistics without noise, the estimate's model alone), written to
evaluation_estimate.{json,md}.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
import zlib
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dp_spark.core import zcdp  # noqa: E402
from dp_spark.families.counts import bound_choice  # noqa: E402
from dp_spark.lab.bound_curve import NOT_PRIVATE, sra_sampling_errors, user_item_table  # noqa: E402
from dp_spark.lab.tune import choice_percentiles  # noqa: E402
from dp_spark.release import bound_estimate, bound_objective, bound_selection  # noqa: E402
from dp_spark.release.family import Domains  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from bound_selection import Setting  # noqa: E402  (ε, the noise and the candidates; its split and noise)

DATA = ROOT.parent / "shared" / "data"
FINE = range(1, bound_selection.DEFAULT_CANDIDATES[-1] + 1)  # the oracle's grid
RATINGS = (1, 2, 3, 4, 5)


# ---------------------------------------------------------------------------
# The data: (user_id, item_id, attr) records, all in the public domain.


def _ml_1m_catalogue() -> np.ndarray:
    lines = (DATA / "ml-1m" / "movies.dat").read_bytes().decode("latin-1").splitlines()
    return np.array(sorted(int(line.split("::")[0]) for line in lines if line.strip()))


def _ml_100k() -> tuple[pd.DataFrame, np.ndarray]:
    records = pd.read_csv(DATA / "ml-100k" / "u.data.gz", sep="\t", names=["user_id", "item_id", "attr", "t"],
                          usecols=[0, 1, 2])
    return records, np.arange(1, 1683)


def _ml_1m_rated() -> tuple[pd.DataFrame, np.ndarray]:
    with gzip.open(DATA / "ml-1m" / "ratings_users_0001-2999.dat.gz", "rt") as f:
        records = pd.read_csv(f, sep="::", engine="python", names=["user_id", "item_id", "attr", "t"],
                              usecols=[0, 1, 2])
    return records, _ml_1m_catalogue()


def _ml_1m_pairs() -> tuple[pd.DataFrame, np.ndarray]:
    with gzip.open(DATA / "ml-1m" / "ratings_pairs.dat.gz", "rt") as f:
        records = pd.read_csv(f, sep="::", engine="python", names=["user_id", "item_id"])
    catalogue = _ml_1m_catalogue()
    return records[records["item_id"].isin(catalogue)].reset_index(drop=True), catalogue


def _ml_1m_others() -> tuple[pd.DataFrame, np.ndarray]:
    """ML-1M's users 3000 and up (pairs only): none of them is in the rated part."""
    records, catalogue = _ml_1m_pairs()
    return records[records["user_id"] >= 3000].reset_index(drop=True), catalogue


def _checkins(path: str | None, visits: bool) -> tuple[pd.DataFrame, np.ndarray]:
    """The generated Sparse-style check-ins (dp-spark generate checkins; 20,000 users, 10,000
    locations, seed 0), one record per user and location, or with ``visits`` one per visit up to
    VISITS_KEPT per user and location: repeated records of a pair."""
    from dp_spark.io import checkins

    if path is None:
        raise SystemExit("the check-in shapes need --checkins DIR (written there if missing)")
    if not (Path(path) / "_stats.json").exists():
        checkins.generate(CHECKIN_USERS, path, seed=0)
    table = pd.read_parquet(path, columns=["user_id", "location_id", "visits"])
    repeats = np.minimum(table["visits"].to_numpy(), VISITS_KEPT) if visits else np.ones(len(table), dtype=np.int64)
    records = pd.DataFrame({"user_id": np.repeat(table["user_id"].to_numpy(), repeats),
                            "item_id": np.repeat(table["location_id"].to_numpy(), repeats)})
    return records, np.arange(1, 10_001)


CHECKIN_USERS = 20_000
VISITS_KEPT = 5


def _netflix(path: str | None) -> tuple[pd.DataFrame, np.ndarray]:
    if path is None:
        raise SystemExit("the netflix shapes need --netflix PATH (dp-spark generate netflix --rows 10000000)")
    records = pd.read_parquet(path, columns=["user_id", "item_id", "weekday"])
    return records.assign(attr=records.pop("weekday").astype(str)), np.arange(1, 17771)


@dataclass(frozen=True)
class Shape:
    """One table of the set: where its records come from, how many of the most-rated items it
    keeps (None: all), its domain ("catalogue" or "own": the kept ids), whether it has edges."""

    name: str
    source: str
    top: int | None
    domain: str
    edges: bool
    shipped: int


def shapes() -> list[Shape]:
    out = []
    for source, label in (("ml-100k", "ML-100K"), ("ml-1m-rated", "ML-1M rated")):
        for edges in (False, True):
            tables = "items + edges" if edges else "items"
            out.append(Shape(f"{label}, {tables}", source, None, "catalogue", edges, 30))
            for domain in ("catalogue", "own"):
                out.append(Shape(f"{label} top 90 vs {'its 90 ids' if domain == 'own' else 'catalogue'}, {tables}",
                                 source, 90, domain, edges, 30))
    out.append(Shape("ML-1M, items", "ml-1m", None, "catalogue", False, 30))
    out.append(Shape("ML-1M top 100 vs catalogue, items", "ml-1m", 100, "catalogue", False, 30))
    out.append(Shape("Netflix 10M, items", "netflix", None, "catalogue", False, 10))
    out.append(Shape("Netflix 10M, items + edges", "netflix", None, "catalogue", True, 10))
    return out


def heldout_shapes() -> list[Shape]:
    """Shapes outside the set the estimate choice was designed on (``--set heldout``): other
    domain sizes, other users of ML-1M, and generated check-ins, with and without repeated
    records of a user and location. Laplace only for the repeated records: the Gaussian release
    caps them at c = 1 per item, which the oracle here does not."""
    return [
        Shape("ML-100K top 30 vs its 30 ids, items + edges", "ml-100k", 30, "own", True, 30),
        Shape("ML-100K top 300 vs its 300 ids, items", "ml-100k", 300, "own", False, 30),
        Shape("ML-1M users 3000+ top 30 vs its 30 ids, items", "ml-1m-others", 30, "own", False, 30),
        Shape("ML-1M users 3000+ top 300 vs catalogue, items", "ml-1m-others", 300, "catalogue", False, 30),
        Shape("Check-ins 20K, items", "checkins", None, "catalogue", False, 30),
        Shape("Check-ins 20K top 90 vs its 90 ids, items", "checkins", 90, "own", False, 30),
        Shape("Check-ins 20K with visits, items", "checkins-visits", None, "catalogue", False, 30),
        Shape("Check-ins 20K with visits top 90 vs its 90 ids, items", "checkins-visits", 90, "own", False, 30),
    ]


def records_of(shape: Shape, netflix: str | None, cache: dict,
               checkins: str | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """The shape's records and its item ids."""
    if shape.source not in cache:
        cache[shape.source] = {"ml-100k": _ml_100k, "ml-1m-rated": _ml_1m_rated, "ml-1m": _ml_1m_pairs,
                               "ml-1m-others": _ml_1m_others, "netflix": lambda: _netflix(netflix),
                               "checkins": lambda: _checkins(checkins, False),
                               "checkins-visits": lambda: _checkins(checkins, True)}[shape.source]()
    records, ids = cache[shape.source]
    if shape.top is not None:
        counts_ = records["item_id"].value_counts(sort=False)
        kept = counts_.sort_index().sort_values(ascending=False, kind="stable").index[:shape.top]
        records = records[records["item_id"].isin(kept)].reset_index(drop=True)
        if shape.domain == "own":
            ids = np.sort(kept.to_numpy())
    return records, ids


# ---------------------------------------------------------------------------
# Each table's cells, errors and norms.


@dataclass(frozen=True)
class Table:
    """One count table of a shape: its (user_id, item_id) pairs with item_id the cell's code,
    its number of cells, and SRA's sampling error at every bound of the fine grid (totals over
    the cells)."""

    pairs: pd.DataFrame
    cells: int
    squared_error: dict[int, float]  # bound -> Σ_cells (bias² + sampling variance)


def tables_of(shape: Shape, records: pd.DataFrame, ids: np.ndarray) -> dict[str, Table]:
    attributes = np.unique(records["attr"]) if shape.edges else None
    if shape.edges and shape.source != "netflix":
        attributes = np.array(RATINGS)
    cells = {"item_counts": (records[["user_id", "item_id"]], len(ids))}
    if shape.edges:
        code = records["item_id"].to_numpy(dtype=np.int64) * 16 + np.searchsorted(attributes, records["attr"])
        cells["edge_counts"] = (pd.DataFrame({"user_id": records["user_id"].to_numpy(), "item_id": code}),
                                len(ids) * len(attributes))
    out = {}
    for name, (pairs, size) in cells.items():
        errors = sra_sampling_errors(pairs, sorted(set(FINE) | {shape.shipped}), size)
        out[name] = Table(pairs, size, {e.bound: size * (e.bias_squared + e.sampling_variance) for e in errors})
    return out


PARTS = {"item_counts": "epsilon_items", "edge_counts": "epsilon_edges"}


def objective_error(tables: dict[str, Table], weights: dict[str, Fraction], setting: Setting, split: dict,
                    bound: int) -> float:
    """E(b): each weighted table's expected squared error summed over its cells, noise included."""
    return sum(float(w) * (tables[t].squared_error[bound]
                           + tables[t].cells * setting.noise_variance(bound, split[PARTS[t]]))
               for t, w in weights.items())


def evaluate(shape: Shape, tables: dict[str, Table], objective, setting: Setting, users: int) -> dict:
    attributes = range(tables["edge_counts"].cells // tables["item_counts"].cells) if shape.edges else None
    domains = Domains(range(tables["item_counts"].cells), attributes)
    auto = replace(setting.params("auto", objective), choice="exponential")
    auto_split, fixed_split = setting.split_of(auto, domains), setting.split_of(setting.params(shape.shipped), domains)
    scored = bound_choice.scored_tables(auto, domains)
    weights = {t: w for t, (w, _, _) in scored.items()}
    model = bound_choice.error_model(auto, domains, auto_split)
    candidates = setting.candidates
    cell_tables = {t: user_item_table(tables[t].pairs).rename(columns={"item_id": "cell"}) for t in weights}
    norms = {}

    def norms_at(cap: int) -> list:
        if cap not in norms:
            per_table = [bound_selection.squared_bias_norms(cell_tables[t], candidates, model.records_per_cell, cap)
                         for t in weights]
            norms[cap] = bound_selection.weighted_norms(per_table, list(weights.values()))
        return norms[cap]
    picks = bound_selection.pick_probabilities(norms_at, users, candidates, model, auto_split["epsilon_bound"],
                                               setting.noise == "gaussian")
    return {
        "shape": shape.name, "objective": objective, "noise": setting.noise, "epsilon": setting.epsilon,
        "users": users, "cells": {t: tables[t].cells for t in tables},
        "picks": {int(b): round(float(p), 4) for b, p in zip(candidates, picks) if p >= 1e-4},
        "likeliest": int(candidates[int(np.argmax(picks))]),
        **choice_figures(shape, tables, weights, setting, auto_split, fixed_split, candidates, picks),
        "user_caps": {int(u): round(p, 4) for u, p in bound_selection.user_cap_probabilities(
            users, *_count_and_mechanism(auto_split["epsilon_bound"], setting), candidates).items()},
    }


def choice_figures(shape: Shape, tables: dict[str, Table], weights: dict[str, Fraction], setting: Setting,
                   auto_split: dict, fixed_split: dict, bounds, picks) -> dict:
    """A choice's figures from P(pick each of ``bounds``): its expected error on the objective at
    auto's split against the oracle and the shipped bound (at a fixed bound's split), its p99,
    P(below the oracle), the floor, and what the item table gets from it."""
    at_auto = np.array([objective_error(tables, weights, setting, auto_split, b) for b in bounds])
    fixed = {b: objective_error(tables, weights, setting, fixed_split, b) for b in tables["item_counts"].squared_error}
    oracle = min(FINE, key=fixed.__getitem__)
    expected = float(np.dot(picks, at_auto))
    # What the item table, the one users read first, gets from this choice, whatever it scored.
    items_only = {"item_counts": Fraction(1)}
    items_auto = float(np.dot(picks, [objective_error(tables, items_only, setting, auto_split, b) for b in bounds]))
    items_fixed = {b: objective_error(tables, items_only, setting, fixed_split, b) for b in FINE}
    spread = choice_percentiles(picks, at_auto)
    return {
        "auto": expected, "auto_p99": spread[0.99],
        "below_oracle": float(sum(p for b, p in zip(bounds, picks) if b < oracle)),
        "oracle_l": int(oracle), "oracle": fixed[oracle], "shipped_l": shape.shipped, "shipped": fixed[shape.shipped],
        "auto_vs_oracle": expected / fixed[oracle], "p99_vs_oracle": spread[0.99] / fixed[oracle],
        "auto_vs_shipped": expected / fixed[shape.shipped],
        # The least auto can reach: the best of its bounds, with the tables at auto's split.
        "floor_l": int(bounds[int(np.argmin(at_auto))]), "floor_vs_oracle": float(min(at_auto)) / fixed[oracle],
        "items_vs_items_oracle": items_auto / min(items_fixed.values()),
    }


def evaluate_estimate(shape: Shape, tables: dict[str, Table], objective, setting: Setting, draws: int) -> dict:
    """As :func:`evaluate`, for ``l_choice = "estimate"`` (release.bound_estimate): its picks over
    every integer bound from the distribution of ``draws`` runs of the product's choice on the
    shape's raw statistics (fixed seeds)."""
    attributes = range(tables["edge_counts"].cells // tables["item_counts"].cells) if shape.edges else None
    domains = Domains(range(tables["item_counts"].cells), attributes)
    auto = replace(setting.params("auto", objective), choice="estimate")
    auto_split, fixed_split = setting.split_of(auto, domains), setting.split_of(setting.params(shape.shipped), domains)
    scored = bound_choice.scored_tables(auto, domains)
    weights = {t: w for t, (w, _, _) in scored.items()}
    model = bound_choice.error_model(bound_choice.every_bound(auto), domains, auto_split)
    first, last = setting.candidates[0], setting.candidates[-1]
    squared = [bound_estimate.anchor_squared_norms(
        user_item_table(tables[t].pairs).rename(columns={"item_id": "cell"}), first, last - first,
        bound_estimate.anchor_reach(model.records_per_cell, last - first, tables[t].cells)) for t in weights]
    users_by_n = tables["item_counts"].pairs.groupby("user_id").size().value_counts()
    seed = zlib.crc32(f"{shape.name}|{objective}|{setting.noise}|{setting.epsilon}".encode())
    if draws:
        picks = bound_estimate.pick_probabilities(users_by_n, squared, list(weights), setting.candidates, model,
                                                  tables["item_counts"].cells, auto_split["epsilon_bound"],
                                                  setting.accounting, draws, seed)
    else:  # the statistics without noise: what the estimate's model alone costs
        cells, c = tables["item_counts"].cells, model.records_per_cell
        edges = bound_estimate.histogram_edges(cells, c)
        picks = {bound_estimate.bound_of(bound_estimate.record_histogram(users_by_n, edges),
                                         bound_estimate.combined_value(squared, list(weights.values())), edges,
                                         setting.candidates, model, bound_estimate.assumed_top(cells, c),
                                         bound_estimate.NO_NOISE): 1.0}
    bounds = list(range(first, last + 1))
    return {
        "shape": shape.name, "objective": objective, "noise": setting.noise, "epsilon": setting.epsilon,
        "users": int(users_by_n.sum()), "cells": {t: tables[t].cells for t in tables}, "choice": "estimate",
        "draws": draws, "picks": {int(b): round(float(p), 4) for b, p in picks.items() if p >= 1e-4},
        "likeliest": int(max(picks, key=picks.__getitem__)),
        **choice_figures(shape, tables, weights, setting, auto_split, fixed_split, bounds,
                         np.array([picks.get(b, 0.0) for b in bounds])),
    }


def _count_and_mechanism(epsilon: Fraction, setting: Setting) -> tuple:
    count, share = bound_selection.choice_parts(epsilon, setting.noise == "gaussian", setting.candidates)
    return count, zcdp.selection_epsilon(share, setting.noise == "gaussian")


def markdown(rows: list[dict]) -> str:
    lines = ["| shape | objective | noise | ε | auto/oracle | floor/oracle | p99/oracle | auto/shipped | oracle l "
             "| likeliest | P(below oracle) | item table / its oracle | picks ≥ 0.05 |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        picks = ", ".join(f"{b}: {p:.2f}" for b, p in r["picks"].items() if p >= 0.05)
        lines.append(f"| {r['shape']} | {r['objective']} | {r['noise']} | {r['epsilon']:g} | "
                     f"{r['auto_vs_oracle']:.3f} | {r['floor_vs_oracle']:.3f} | {r['p99_vs_oracle']:.3f} | "
                     f"{r['auto_vs_shipped']:.3f} | "
                     f"{r['oracle_l']} | {r['likeliest']} | {r['below_oracle']:.2f} | "
                     f"{r['items_vs_items_oracle']:.3f} | {picks} |")
    lines += ["", "| domain | objective | cells | auto within 1.3× of the oracle | worst |", "|---|---|---:|---:|---:|"]
    groups: dict[tuple, list] = {}
    for r in rows:
        own = re.search(r"vs (its \d+ ids)", r["shape"])
        domain = own.group(1) if own else "catalogue"
        groups.setdefault((domain, r["objective"]), []).append(r["auto_vs_oracle"])
    for (domain, objective), ratios in groups.items():
        within = sum(x <= 1.3 for x in ratios)
        lines.append(f"| {domain} | {objective} | {len(ratios)} | {within} | {max(ratios):.3f} |")
    within = sum(r["auto_vs_oracle"] <= 1.3 for r in rows)
    lines.append("")
    lines.append(f"auto within 1.3× of the oracle in {within} of {len(rows)} cells; worst "
                 f"{max(r['auto_vs_oracle'] for r in rows):.3f}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", help="names (or parts of names) to run, comma-separated; default all but Netflix "
                        "unless --netflix is given")
    parser.add_argument("--netflix")
    parser.add_argument("--set", default="evaluation", choices=["evaluation", "heldout"],
                        help="the evaluation set, or the held-out shapes (heldout_shapes)")
    parser.add_argument("--checkins", help="with --set heldout: the generated check-ins' directory "
                        "(written if missing)")
    parser.add_argument("--noise", default="laplace,gaussian")
    parser.add_argument("--epsilons", default="0.1,1,5")
    parser.add_argument("--candidates", help="the candidate bounds, comma-separated (default the product's)")
    parser.add_argument("--choice", default="exponential", choices=["exponential", "estimate"],
                        help="how l = \"auto\" chooses (algorithm.l_choice)")
    parser.add_argument("--draws", type=int, default=200, help="with --choice estimate: runs of the choice per cell "
                        "(0: the statistics without noise, what the estimate's model alone costs)")
    parser.add_argument("--share", help="the choice's share of ε, e.g. 1/20 (default the product's, "
                        "bound_selection.DEFAULT_SHARE): to measure another")
    args = parser.parse_args(argv)
    wanted = (heldout_shapes() if args.set == "heldout"
              else [s for s in shapes() if args.netflix or s.source != "netflix"])
    if args.shapes:
        wanted = [s for s in wanted if any(part in s.name for part in args.shapes.split(","))]
    if args.share:
        bound_selection.DEFAULT_SHARE = Fraction(args.share)  # read by the counts' split when it is planned
    candidates = (tuple(int(b) for b in args.candidates.split(",")) if args.candidates
                  else bound_selection.DEFAULT_CANDIDATES)
    cache, rows = {}, []
    for shape in wanted:
        started = time.monotonic()
        records, ids = records_of(shape, args.netflix, cache, args.checkins)
        tables = tables_of(shape, records, ids)
        users = int(records["user_id"].nunique())
        objectives = [bound_objective.ITEMS] + ([bound_objective.CELLS, bound_objective.TABLES] if shape.edges else [])
        for objective in objectives:
            for noise in ("laplace",) if shape.source == "checkins-visits" else args.noise.split(","):
                for epsilon in (float(e) for e in args.epsilons.split(",")):
                    setting = Setting(epsilon, noise, candidates)
                    rows.append(evaluate(shape, tables, objective, setting, users) if args.choice == "exponential"
                                else evaluate_estimate(shape, tables, objective, setting, args.draws))
                    r = rows[-1]
                    print(f"{shape.name} | {objective} | {noise} | {epsilon:g}: auto/oracle {r['auto_vs_oracle']:.3f} "
                          f"(oracle l {r['oracle_l']}, likeliest {r['likeliest']})", file=sys.stderr)
        print(f"{shape.name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    name = {"evaluation": "evaluation", "heldout": "heldout"}[args.set]
    write_results(Path(args.out), name if args.choice == "exponential" else f"{name}_estimate", rows, markdown(rows))


def write_results(out: Path, name: str, rows: list[dict], table: str) -> None:
    """NAME.json (the rows) and NAME.md (the table) in ``out``, both marked NOT private; the table
    printed too."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps({"not_private": NOT_PRIVATE, "rows": rows}, indent=2) + "\n")
    text = f"{NOT_PRIVATE}\n\n{table}\n"
    (out / f"{name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
