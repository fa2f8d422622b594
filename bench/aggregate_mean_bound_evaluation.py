"""The aggregate's groups_per_user = "auto" with a mean per group, against every fixed l from 1 to
256, on the means' evaluation shapes (bench/means_bound_evaluation.py): groups = movies, a mean of
the ratings per movie (tables: a count and a sum), c = 1 record per group (MovieLens has one rating
per user and movie, so the aggregate's bound keeps what SRA's does at b = l). NOT private: a
measurement.

The score and oracle are the means bench's (its module docstring), with the aggregate's own noise
at each l: its count and sum tables' entries and the half-width a mean needs at α/2 (α = 0.05).
"auto": exact over the choice the aggregate makes now with a mean asked (the means' quality on the
groups' kept counts, bound_choice.means_model); "before": the counts' quality it used for every
metric (the membership bias, with its user count), exact over both of its draws; "floor": the
best candidate at auto's split.

    python bench/aggregate_mean_bound_evaluation.py [--set heldout] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from means_bound_evaluation import (  # noqa: E402
    DEFAULT_L,
    ORACLE,
    W,
    _quantile_score,
    heldout_shapes,
    kept_cells,
    score_with,
    shapes,
    write_table,
)

from dp_spark.core import zcdp  # noqa: E402
from dp_spark.core.accounting import Accounting  # noqa: E402
from dp_spark.families.aggregate import bound_choice, noisy_totals  # noqa: E402
from dp_spark.families.aggregate.family import FAMILY, aggregate_params  # noqa: E402
from dp_spark.families.aggregate.histogram_metrics import cell_sd  # noqa: E402
from dp_spark.families.aggregate.params import AggregateParams  # noqa: E402
from dp_spark.lab import tune_means  # noqa: E402
from dp_spark.release import bound_selection as bs  # noqa: E402
from dp_spark.release import mean_bound_quality as mq  # noqa: E402
from dp_spark.release.bound_selection import DEFAULT_CANDIDATES  # noqa: E402
from dp_spark.release.family import Domains, plan_split  # noqa: E402
from dp_spark.release.sum_tables import halfwidth  # noqa: E402

DELTA = 1e-6
ALPHA = 0.05


def params_of(items: np.ndarray, noise: str, l) -> AggregateParams:
    return aggregate_params("item_id", {"item_id": items.tolist()}, ["mean(value)"], l, 1, 1.0, 5.0, noise=noise,
                            method="tables")


def split_of(params: AggregateParams, epsilon: Fraction) -> dict:
    accounting = None if params.noise == "laplace" else Accounting("gaussian", zcdp.rho_of(epsilon, DELTA), DELTA)
    return plan_split(FAMILY, params, epsilon, Domains(None), **({"accounting": accounting} if accounting else {}))


def table_noise(params: AggregateParams, split: dict, l: int) -> tune_means.TableNoise:
    """The mean's count and sum noise at ``l`` as the aggregate draws them (the sum's in values²)."""
    tables = (noisy_totals.RECORDS, noisy_totals.SUM)
    shares = {table: split[noisy_totals.step_name(table, "value")] for table in tables}
    entries = noisy_totals.ledger_entries(tables, noisy_totals.GroupBound(l, 1), params.clip, "value", shares,
                                          params.noise, 1)
    count, total = entries[noisy_totals.RECORDS], entries[noisy_totals.SUM]
    return tune_means.TableNoise(cell_sd(count) ** 2, cell_sd(total) ** 2 * params.clip.unit ** 2,
                                 halfwidth(count, ALPHA / 2), count)


def evaluate(records: pd.DataFrame, items: np.ndarray, noise: str, epsilon: Fraction) -> dict:
    fixed, auto = params_of(items, noise, DEFAULT_L), params_of(items, noise, "auto")
    fixed_split, auto_split = split_of(fixed, epsilon), split_of(auto, epsilon)
    candidates = auto.bound_candidates
    grid = sorted(set(ORACLE) | set(DEFAULT_CANDIDATES))
    rows = records[["user_id", "item_id", "value"]]
    ranked = tune_means.sampled_ranks(rows.sort_values(["user_id", "item_id"], kind="stable", ignore_index=True))
    truth = ranked.groupby("item_id")["value"].mean()
    at_fixed = {b: score_with(ranked, truth, b, 1, table_noise(fixed, fixed_split, b)) for b in grid}
    at_auto = {b: score_with(ranked, truth, b, 1, table_noise(auto, auto_split, b)) for b in grid}
    gaussian = noise == "gaussian"
    cells = kept_cells(rows)
    model = bound_choice.means_model(auto, auto_split, len(items), ALPHA)
    picks = mq.pick_probabilities([mq.kept_counts(cells, candidates, 1, by_cells=True)], candidates, model,
                                  zcdp.selection_epsilon(auto_split["epsilon_bound"], gaussian))
    memberships = cells.assign(k=1)

    def norms_at(user_cap: int) -> list[int]:
        return bs.squared_bias_norms(memberships, candidates, 1, user_cap)

    before = bs.pick_probabilities(norms_at, int(rows["user_id"].nunique()), candidates,
                                   bound_choice.error_model(auto, auto_split, len(items)), auto_split["epsilon_bound"],
                                   gaussian)
    oracle = min(ORACLE, key=lambda b: at_fixed[b][0])

    def expected(p, column: int = 0) -> float:
        return float(sum(q * at_auto[int(b)][column] for q, b in zip(p, candidates)))

    return {"oracle": oracle, "oracle_score": at_fixed[oracle][0], "auto": expected(picks),
            "floor": min(at_auto[int(b)][0] for b in candidates), "before": expected(before),
            "default": at_fixed[DEFAULT_L][0], "likeliest": int(candidates[int(np.argmax(picks))]),
            "p99": _quantile_score(np.asarray(picks), candidates, at_auto, 0.99), "means_auto": expected(picks, 1),
            "means_oracle": at_fixed[oracle][1], "means_default": at_fixed[DEFAULT_L][1]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="default bench/results/bound_evaluation/aggregate_means.md, or "
                        "aggregate_means_heldout.md with --set heldout")
    parser.add_argument("--set", choices=["evaluation", "heldout"], default="evaluation")
    args = parser.parse_args(argv)
    out = args.out or ROOT / "bench" / "results" / "bound_evaluation" / (
        "aggregate_means.md" if args.set == "evaluation" else "aggregate_means_heldout.md")
    title = ("# bench/aggregate_mean_bound_evaluation.py: the aggregate's groups_per_user = \"auto\" with a mean "
             f"per movie against the best integer l in 1..256 (the means bench's score, lower is better; W = {W:g})")
    write_table(out, title, shapes() if args.set == "evaluation" else heldout_shapes(), evaluate)


if __name__ == "__main__":
    main()
