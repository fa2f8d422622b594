"""``dp-spark evaluate`` on a DPSense config: column counts of users' distinct items.

NOT PRIVATE: the true column counts, and the θ that would minimise the true
error, are computed from the raw rows without noise, for comparing methods.

Methods (paper 001): ``dpsense`` and ``dpsense_s`` choose θ afresh in every run
(the aggregates their quality functions need are computed once; the limited
counts once per distinct θ chosen); the baselines ``lpa``, ``alpa``, ``fpa`` and
``gs`` keep a uniform sample of at most Δ = ``--m`` ones per row (a public
bound, specification §4 [FIX]) once, then draw fresh noise per run.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from fractions import Fraction

import numpy as np

from dp_spark import publishers
from dp_spark.bounding import item_rows
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError
from dp_spark.families.dpsense import columns as item_columns
from dp_spark.families.dpsense import theta as dpsense
from dp_spark.jobs.config import JobConfig
from dp_spark.lab import metrics

METHODS = ("dpsense", "dpsense_s", "lpa", "alpa", "fpa", "gs")
BASELINES = {"lpa": ("laplace", {}), "alpa": ("alpa", {}), "fpa": ("fourier", {"distinct_cells": True}),
             "gs": ("grouping", {})}
TOP_KS = (10, 50, 100)  # specification §4.4 [ASSUME]


def check_method(method: str, m: int | None) -> None:
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r} for a DPSense config; expected some of {', '.join(METHODS)}")
    if method in BASELINES and m is None:
        raise ConfigError(f"method {method!r} needs the public row bound Δ: pass --m")


def column_metrics(true: np.ndarray, released: np.ndarray) -> dict[str, float]:
    """Paper 001's measures (M4–M6) and the MSE."""
    out = {"mae": metrics.mae(true, released), "mre": metrics.mre(true, released),
           "mse": metrics.mse(true, released)}
    for k in TOP_KS:
        if k <= true.size:
            out[f"top{k}"] = metrics.top_k_precision(true, released, k)
            out[f"ndcg{k}"] = metrics.ndcg(true, released, k)
            out[f"top{k}_mae"] = metrics.top_k_mae(true, released, k)
            out[f"top{k}_mre"] = metrics.top_k_mre(true, released, k)
    return out


def expected_mae(true: np.ndarray, limited: np.ndarray, thetas: np.ndarray, epsilon_counts: Fraction) -> np.ndarray:
    """E|c^θ_j + Lap(θ/ε2) − c_j| averaged over columns, for every θ (rows of ``limited``):
    |β| + b·e^(−|β|/b) per column, β the limiting bias and b the noise scale."""
    bias = np.abs(limited - true[None, :])
    scale = thetas[:, None] / float(epsilon_counts)
    return (bias + scale * np.exp(-bias / scale)).mean(axis=1)


@dataclasses.dataclass
class Aggregates:
    """Everything the runs need from the rows, computed once (NOT private)."""

    true: np.ndarray
    length_hist: np.ndarray
    by_length: np.ndarray
    long_units: np.ndarray


def _dpsense_runs(cfg: JobConfig, method: str, rows, items, agg: Aggregates, runs: int, progress):
    split = dpsense.default_split(cfg.epsilon)
    split.update(cfg.epsilon_parts)
    limited_by_theta: dict[int, np.ndarray] = {}
    for run in range(runs):
        progress(f"{method}: run {run + 1}/{runs}")
        rng = RandomSource(None if cfg.seed is None else cfg.seed + run)
        budget = Budget(cfg.epsilon)
        if method == "dpsense_s":
            theta, alpha = dpsense.choose_theta_alpha(agg.by_length, agg.long_units, cfg.theta_max, split,
                                                      budget, rng)
        else:
            theta = dpsense.choose_theta(agg.length_hist, cfg.theta_max, len(items), split, budget, rng)
            alpha = Fraction(1)
        if theta not in limited_by_theta:
            limited_by_theta[theta] = item_columns.limited_counts(rows, items, theta, cfg.limit, cfg.seed,
                                                                  grid_bits=dpsense.GRID_BITS)
        noisy = dpsense.publish_columns(limited_by_theta[theta], theta, cfg.limit, split["epsilon_counts"],
                                        budget, rng) * float(alpha)
        yield "theta", "chosen", float(theta)
        if method == "dpsense_s":
            yield "alpha", "chosen", float(alpha)
        for metric, value in column_metrics(agg.true, noisy).items():
            yield "columns", metric, value


def _baseline_runs(cfg: JobConfig, method: str, rows, items, true: np.ndarray, m: int, runs: int, progress):
    name, options = BASELINES[method]
    truncated = item_columns.sampled_counts(rows, items, m, cfg.seed)
    extra = {}
    if name in publishers.NEEDS_ONE_RECORD_PER_USER:
        extra["sampled"] = item_columns.sampled_counts(rows, items, 1, None if cfg.seed is None else cfg.seed + 1)
    for run in range(runs):
        progress(f"{method}: run {run + 1}/{runs}")
        rng = RandomSource(None if cfg.seed is None else cfg.seed + run)
        published = publishers.publish(name, truncated, m, cfg.epsilon, Budget(cfg.epsilon), rng, "column_counts",
                                       **options, **extra)
        for metric, value in column_metrics(true, published.values.astype(float)).items():
            yield "columns", metric, value


def aggregates_of(rows, items, theta_max: int) -> Aggregates:
    by_length, long_units = item_columns.length_by_column(rows, items, theta_max,
                                                          grid_bits=dpsense.QUALITY_GRID_BITS)
    return Aggregates(item_columns.column_counts(rows, items).astype(float),
                      item_columns.length_histogram(rows, theta_max), by_length, long_units)


def run_methods(cfg: JobConfig, rows, items, agg: Aggregates, methods: list[str], runs: int, m: int | None,
                progress) -> list[tuple[str, dict]]:
    """(method, {(query, metric): [one value per run]}) for every method."""
    results = []
    for method in methods:
        values = defaultdict(list)
        runner = (_dpsense_runs(cfg, method, rows, items, agg, runs, progress) if method.startswith("dpsense")
                  else _baseline_runs(cfg, method, rows, items, agg.true, m, runs, progress))
        for query, metric, value in runner:
            values[(query, metric)].append(value)
        results.append((method, values))
    return results


def oracle(cfg: JobConfig, agg: Aggregates) -> tuple[int, float]:
    """The θ that minimises DPSense's expected MAE against the truth, and that MAE (NOT private)."""
    thetas = np.arange(1, cfg.theta_max + 1, dtype=float)
    split = dpsense.default_split(cfg.epsilon)
    split.update(cfg.epsilon_parts)
    errors = expected_mae(agg.true, dpsense.limited_counts_all(agg.by_length, agg.long_units, thetas), thetas,
                          split["epsilon_counts"])
    return int(thetas[int(np.argmin(errors))]), float(errors.min())


def evaluate_columns(cfg: JobConfig, records, items, methods: list[str], runs: int, m: int | None,
                     progress) -> list[tuple[str, dict]]:
    """Every method's values, plus the oracle θ as method ``oracle`` (NOT private)."""
    rows = item_rows.rows_of(records)
    try:
        agg = aggregates_of(rows, items, cfg.theta_max)
        results = run_methods(cfg, rows, items, agg, methods, runs, m, progress)
    finally:
        rows.release()
    best, error = oracle(cfg, agg)
    return results + [("oracle", {("theta", "best_for_mae"): [float(best)], ("columns", "expected_mae"): [error]})]
