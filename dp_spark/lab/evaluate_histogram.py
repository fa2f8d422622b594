"""Evaluate the user histogram's publishers (paper 002's measures) on the same true histogram of a
per-user quantity, with fresh noise per run. NOT PRIVATE: the truth is computed from the raw
records; this is measurement code (dp_spark/lab)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from dp_spark.core.domain import item_domain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.user_histogram import histogram
from dp_spark.families.user_histogram import quantities as user_quantities
from dp_spark.io import sources, validation
from dp_spark.jobs.config import JobConfig
from dp_spark.lab import metrics
from dp_spark.lab.metrics import summaries


def histogram_metrics(true: np.ndarray, released: np.ndarray, queries: np.ndarray) -> dict[str, float]:
    """Paper 002's measures (KL with its zero rule, range-query MSE) and the cell errors."""
    return {
        "mse": metrics.mse(true, released),
        "kl": metrics.kl_002(true, released),
        "range_mse": metrics.range_query_mse(true, released, queries),
        "mae": metrics.mae(true, released),
    }



def evaluate(configs: list[JobConfig], spark, runs: int, progress) -> list[dict]:
    """Each publisher on the same true histogram of the per-user quantity, fresh noise per run."""
    cfg = configs[0]
    items = item_domain(cfg.items, spark, cfg.source) if cfg.items else None
    progress(f"reading {cfg.source.path or cfg.source.table}; the true histogram is computed WITHOUT noise")
    validated = validation.validate_records(sources.read_records(spark, cfg.source, False), items, None)
    try:
        true = user_quantities.true_histogram(validated.records, cfg.quantity, np.asarray(cfg.bins),
                                        validated.user_counts)
    finally:
        validated.release()
    queries = metrics.range_queries(true.size, 1000, seed=0)
    dataset = Path(cfg.source.path or cfg.source.table).name
    records = []
    for method_cfg in configs:
        values = defaultdict(list)
        for run in range(runs):
            progress(f"{method_cfg.publisher}: run {run + 1}/{runs}")
            rng = RandomSource(None if cfg.seed is None else cfg.seed + run)
            noisy = histogram.publish_histogram(true, cfg.epsilon, Budget(cfg.epsilon), rng, method_cfg.publisher,
                                                method_cfg.publisher_options)
            for metric, value in histogram_metrics(true.astype(float), noisy, queries).items():
                values[("histogram", metric)].append(value)
        records += summaries(method_cfg.publisher, dataset, values)
    return records
