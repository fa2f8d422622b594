"""The means' l = "auto" against every fixed l from 1 to 256, on the shapes of the bound's
evaluation set (docs/bound_selection.md, "The evaluation set"): MovieLens 100K and the rated part of
MovieLens 1M (users 1-2999), whole against the catalogue, and restricted to their 90 most-rated
movies against the catalogue and against their own ids; Laplace (pure ε) and Gaussian (zCDP at
δ = 1e-6, one rating per user and movie); ε 0.1, 1 and 5. NOT private: a measurement.

The error of a bound: over the movies with a rating, the mean of p·min(error², W) + (1 − p)·W,
W = 4 the squared error of knowing only the range [1, 5], p the exact chance that the movie gets a
mean (its kept count plus the count's noise above the half-width), error² the squared bias of the
kept ratings' mean against all the movie's ratings plus the mean's noise variance (delta method, as
``dp-spark tune`` has it: lab/tune_means.py); one fixed draw of SRA's sampling, the noise in
expectation. Unlike tune's score every movie with a rating counts at every bound, so the score is
smooth where few movies clear the half-width. The oracle is the best integer l in 1..256 with all
of the release's ε on the tables (a fixed l's split); auto's error is exact over its choice:
Σ_b P(auto picks b)·score(b) at auto's split, P from the product's own quality and mechanism
(release.mean_bound_quality). "floor": the best candidate at auto's split (the choice's share of ε
costs the tables that much); "before": the choice the means made before their own quality (the
counts' mechanism over the count and sum tables' squared error), exact over its user count and
mechanism.

    python bench/means_bound_evaluation.py [--set heldout] [--out FILE] [--candidates 1,2,4,...]
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dp_spark.core import zcdp  # noqa: E402
from dp_spark.core.accounting import Accounting  # noqa: E402
from dp_spark.core.domain import item_domain_of_ids  # noqa: E402
from dp_spark.families.means import choice  # noqa: E402
from dp_spark.families.means.family import FAMILY  # noqa: E402
from dp_spark.families.means.params import MeansParams  # noqa: E402
from dp_spark.lab import tune_means  # noqa: E402
from dp_spark.release import bound_selection as bs  # noqa: E402
from dp_spark.release import mean_bound_quality as mq  # noqa: E402
from dp_spark.release.bound_selection import DEFAULT_CANDIDATES  # noqa: E402
from dp_spark.release.family import Domains, plan_split  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
EPSILONS = (Fraction(1, 10), Fraction(1), Fraction(5))
DELTA = 1e-6
ORACLE = tuple(range(1, 257))
DEFAULT_L = 10
W = 4.0  # ((5 − 1)/2)²: the squared error of knowing only the range


def _ml_100k() -> tuple[pd.DataFrame, np.ndarray]:
    records = pd.read_csv(DATA / "ml-100k" / "u.data.gz", sep="\t", names=["user_id", "item_id", "value", "t"],
                          usecols=[0, 1, 2])
    return records, np.arange(1, 1683)


def _ml_1m_rated() -> tuple[pd.DataFrame, np.ndarray]:
    with gzip.open(DATA / "ml-1m" / "ratings_users_0001-2999.dat.gz", "rt") as f:
        records = pd.read_csv(f, sep="::", engine="python", names=["user_id", "item_id", "value", "t"],
                              usecols=[0, 1, 2])
    lines = (DATA / "ml-1m" / "movies.dat").read_bytes().decode("latin-1").splitlines()
    return records, np.array(sorted(int(line.split("::")[0]) for line in lines if line.strip()))


TABLES = (("ML-100K", _ml_100k), ("ML-1M rated", _ml_1m_rated))


def _most_rated(records: pd.DataFrame, count: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The records of the ``count`` most-rated movies, and those movies' ids, sorted."""
    top = records["item_id"].value_counts().index[:count]
    return records[records["item_id"].isin(top)].reset_index(drop=True), np.sort(top.to_numpy())


def shapes():
    """(label, records, item ids) for each shape."""
    for label, load in TABLES:
        records, catalogue = load()
        yield f"{label}, catalogue", records, catalogue
        kept, ids = _most_rated(records, 90)
        yield f"{label} top 90, catalogue", kept, catalogue
        yield f"{label} top 90, own ids", kept, ids


def heldout_shapes():
    """Other domain sizes (``--set heldout``): the same two tables' 30 and 300 most-rated movies,
    against their own ids. Held out from the quality's design; the share of ε was set on both sets."""
    for label, load in TABLES:
        records, _ = load()
        for count in (30, 300):
            yield (f"{label} top {count}, own ids", *_most_rated(records, count))


def params_of(noise: str, l, candidates=None) -> MeansParams:
    return MeansParams(1.0, 5.0, l, noise=noise, records_per_item=1 if noise == "gaussian" else None,
                       candidates=candidates)


def split_of(params: MeansParams, epsilon: Fraction, domains: Domains) -> dict:
    if params.noise == "laplace":
        return plan_split(FAMILY, params, epsilon, domains)
    accounting = Accounting("gaussian", zcdp.rho_of(epsilon, DELTA), DELTA)
    return plan_split(FAMILY, params, epsilon, domains, accounting=accounting)


def kept_cells(records: pd.DataFrame) -> pd.DataFrame:
    cells = records.groupby(["user_id", "item_id"]).size().rename("k").reset_index()
    cells["n"] = cells["user_id"].map(records.groupby("user_id").size())
    return cells.rename(columns={"item_id": "cell"})


def evaluate(records: pd.DataFrame, items: np.ndarray, noise: str, epsilon: Fraction, candidates=None) -> dict:
    domains = Domains(item_domain_of_ids(items.tolist(), "ids"))
    fixed, auto = params_of(noise, DEFAULT_L), params_of(noise, "auto", candidates)
    fixed_split, auto_split = split_of(fixed, epsilon, domains), split_of(auto, epsilon, domains)
    grid = sorted(set(ORACLE) | set(DEFAULT_CANDIDATES))
    rows = records[["user_id", "item_id", "value"]]
    ranked = tune_means.sampled_ranks(rows.sort_values(["user_id", "item_id"], kind="stable", ignore_index=True))
    truth = ranked.groupby("item_id")["value"].mean()
    at_fixed = {b: score(ranked, truth, fixed, fixed_split, b) for b in grid}
    at_auto = {b: score(ranked, truth, fixed, auto_split, b) for b in grid}
    model = choice.error_model(auto, domains, auto_split)
    kept = [mq.kept_counts(kept_cells(rows), auto.candidates, auto.per_cell)]
    mechanism = zcdp.selection_epsilon(auto_split["epsilon_bound"], noise == "gaussian")
    picks = mq.pick_probabilities(kept, auto.candidates, model, mechanism)
    oracle = min(ORACLE, key=lambda b: at_fixed[b][0])
    expected = float(sum(p * at_auto[int(b)][0] for p, b in zip(picks, auto.candidates)))
    means = float(sum(p * at_auto[int(b)][1] for p, b in zip(picks, auto.candidates)))
    p99 = _quantile_score(picks, auto.candidates, at_auto, 0.99)
    old = old_picks(rows, auto, model_domains=domains, split=auto_split)
    return {"oracle": oracle, "oracle_score": at_fixed[oracle][0], "auto": expected,
            "floor": min(at_auto[int(b)][0] for b in auto.candidates),
            "before": float(sum(p * at_auto[int(b)][0] for p, b in zip(old, auto.candidates))),
            "default": at_fixed[DEFAULT_L][0], "likeliest": int(auto.candidates[int(np.argmax(picks))]),
            "p99": p99, "means_auto": means, "means_oracle": at_fixed[oracle][1],
            "means_default": at_fixed[DEFAULT_L][1]}


def old_picks(rows: pd.DataFrame, auto: MeansParams, model_domains: Domains, split: dict) -> np.ndarray:
    """P(pick) of the choice the means made before their own quality: the counts' mechanism over
    the item table's count and sum tables' squared error (the counts' bias norm doubled, the two
    tables' noise), with the user count's cap (release.bound_selection)."""
    cells = len(model_domains.items)
    noise = []
    for b in auto.candidates:
        at = params_of(auto.noise, int(b))
        counts = tune_means.item_noise(at, split)
        noise.append(Fraction(cells * (counts.count_variance + counts.sum_variance / 4.0)))  # values² over h² = 4
    cap = auto.records_per_item or bs.QUALITY_RECORDS_PER_CELL
    model = bs.ErrorModel((Fraction(1), Fraction(1)), cap, tuple(noise), cells=(cells, cells))
    table = kept_cells(rows)

    def norms_at(user_cap: int) -> list[int]:
        return [2 * n for n in bs.squared_bias_norms(table, auto.candidates, cap, user_cap)]

    return bs.pick_probabilities(norms_at, int(rows["user_id"].nunique()), auto.candidates, model,
                                 split["epsilon_bound"], auto.noise == "gaussian")


def score(ranked: pd.DataFrame, truth: pd.Series, params: MeansParams, split: dict, bound: int
          ) -> tuple[float, float]:
    """(the score above, the expected number of movies with a rating that get a mean) at ``bound``."""
    at = params_of(params.noise, bound)
    return score_with(ranked, truth, bound, at.per_cell, tune_means.item_noise(at, split))


def score_with(ranked: pd.DataFrame, truth: pd.Series, bound: int, per_cell: int, noise: tune_means.TableNoise
               ) -> tuple[float, float]:
    """:func:`score` with the records a user keeps at ``bound`` (its first ``bound`` by rank, at most
    ``per_cell`` of an item) and the item table's ``noise`` given."""
    kept = ranked[(ranked["rank"] < bound) & (ranked["item_rank"] < per_cell)]
    cells = kept.groupby("item_id")["value"].agg(["size", "mean"]).reindex(truth.index)
    sizes = cells["size"].fillna(0).to_numpy(dtype=np.int64)
    p = noise.at_least(np.floor(noise.least - sizes).astype(np.int64) + 1)
    safe = np.maximum(sizes, 1)
    means = cells["mean"].fillna(3.0).to_numpy()
    variance = (noise.sum_variance + (means - 3.0) ** 2 * noise.count_variance) / safe**2
    error = np.where(sizes > 0, np.minimum((means - truth.to_numpy()) ** 2 + variance, W), W)
    return float(np.mean(p * error + (1 - p) * W)), float(p.sum())


def _quantile_score(picks: np.ndarray, candidates, rows: dict, level: float) -> float:
    """The score auto's pick stays below with probability ``level``."""
    scores = np.array([rows[int(b)][0] for b in candidates])
    order = np.argsort(scores)
    reached = np.cumsum(picks[order])
    return float(scores[order][min(int(np.searchsorted(reached, level)), len(order) - 1)])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="default bench/results/bound_evaluation/means.md, or "
                        "means_heldout.md with --set heldout")
    parser.add_argument("--set", choices=["evaluation", "heldout"], default="evaluation",
                        help="the evaluation set's shapes, or the held-out ones")
    parser.add_argument("--candidates", help="the candidate bounds, comma-separated (default the product's)")
    args = parser.parse_args(argv)
    candidates = tuple(int(b) for b in args.candidates.split(",")) if args.candidates else None
    out = args.out or ROOT / "bench" / "results" / "bound_evaluation" / (
        "means.md" if args.set == "evaluation" else "means_heldout.md")
    title = ("# bench/means_bound_evaluation.py: the means' l = \"auto\" against the best integer l in 1..256 "
             "(the module's score, lower is better; W = 4)")
    title += f"; candidates {args.candidates}" if args.candidates else ""
    write_table(out, title, shapes() if args.set == "evaluation" else heldout_shapes(),
                lambda records, items, noise, epsilon: evaluate(records, items, noise, epsilon, candidates))


def write_table(out: Path, title: str, cells, evaluate_cell) -> None:
    """The table of every shape of ``cells`` (label, records, item ids) at each noise and ε, each
    row from ``evaluate_cell(records, items, noise, epsilon)`` (:func:`evaluate`'s keys), printed
    as it comes and written to ``out``."""
    lines = [title, "",
             "| shape | noise | ε | oracle l | auto/oracle | floor | before/oracle | l = 10/oracle | p99/oracle | "
             "likeliest | rated movies with a mean: auto | oracle | l = 10 |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    start = time.time()
    for label, records, items in cells:
        for noise in ("laplace", "gaussian"):
            for epsilon in EPSILONS:
                r = evaluate_cell(records, items, noise, epsilon)
                base = r["oracle_score"]
                lines.append(f"| {label} | {noise} | {float(epsilon):g} | {r['oracle']} | {r['auto'] / base:.3f} | "
                             f"{r['floor'] / base:.3f} | {r['before'] / base:.3f} | {r['default'] / base:.3f} | "
                             f"{r['p99'] / base:.3f} | {r['likeliest']} | "
                             f"{r['means_auto']:.1f} | {r['means_oracle']:.1f} | {r['means_default']:.1f} |")
                print(lines[-1], f"({time.time() - start:.0f} s)", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
