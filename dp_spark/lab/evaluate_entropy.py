"""``dp-spark evaluate`` on a location-entropy config: the variants against the actual entropy.

NOT PRIVATE: the actual entropy of every location is computed from the raw
check-ins (no bounding, no noise), for comparing methods only.

Metrics (ALGORITHMS.md §2, paper 004): ``kl`` (M2, 004's rule: published against
actual, both floored at 0.01), ``mse`` (M10: a suppressed location counts as
entropy 0), ``mse_throwaway`` (M10 over published locations only) and
``published_ratio`` (M9: of the locations with at least K = 20 users in the raw
data, the share published; Limit, Limit-SS and Baseline publish a location when
it keeps K users after bounding, Limit-CB when it keeps k, Limit-CB-DP when its
noisy user count selects it).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.lab import metrics
from dp_spark.aggregates.location_sums import location_sums
from dp_spark.algorithms import location_entropy as le
from dp_spark.bounding.user_locations import bounded_pairs
from dp_spark.jobs.config import JobConfig
from dp_spark.errors import ConfigError
from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.privacy import Budget

ELIGIBLE_USERS = 20  # K of M9 (paper 004 Fig. 7)
BASELINE_BOUNDS = le.Bounds(M=100, C=1000)  # Fig. 2's public C_max, M_max


def method_config(cfg: JobConfig, method: str) -> JobConfig:
    if method not in le.VARIANTS:
        raise ConfigError(f"unknown method {method!r} for an entropy config; expected some of {', '.join(le.VARIANTS)}")
    if cfg.params.auto:
        raise ConfigError("evaluate compares fixed bounds: set algorithm.locations_per_user and "
                          "algorithm.visits_per_location to numbers (\"auto\" is not evaluated yet)")
    return cfg.with_params(variant=method)


def bounds_of(cfg: JobConfig) -> le.Bounds:
    if cfg.entropy["variant"] == "baseline":
        return BASELINE_BOUNDS
    return le.Bounds(cfg.entropy["M"], cfg.entropy["C"])


def actual_stats(records: DataFrame, locations) -> le.LocationStats:
    """Every user's every visit (NOT private)."""
    pairs = records.groupBy("user_id", "item_id").agg(F.sum("visits").alias("c"))
    return le.stats_of(location_sums(pairs, locations))


def entropy_metrics(actual: le.LocationStats, bounded: le.LocationStats, noisy: np.ndarray, variant: str,
                    k: int) -> dict[str, float]:
    published = np.isfinite(noisy)
    shown = np.where(published, noisy, 0.0)
    truth = actual.entropy
    eligible = actual.users >= ELIGIBLE_USERS
    if variant in ("limit_cb", "limit_cb_dp"):
        kept = published & ((bounded.users >= k) if variant == "limit_cb" else True)
    else:
        kept = bounded.users >= ELIGIBLE_USERS
    return {
        "kl": metrics.kl_004(truth, shown),
        "mse": metrics.mse(truth, shown),
        "mse_throwaway": metrics.mse(truth[published], noisy[published]) if published.any() else float("nan"),
        "published_ratio": float((eligible & kept).sum() / eligible.sum()) if eligible.any() else float("nan"),
    }


def run_variants(configs: list[JobConfig], records: DataFrame, locations, actual: le.LocationStats, runs: int,
                 progress, bounded_cache: dict | None = None) -> list[tuple[str, dict]]:
    """(method, {(query, metric): values per run}); bounding once per distinct (M, C)."""
    cache = {} if bounded_cache is None else bounded_cache
    results = []
    for cfg in configs:
        e, bounds = cfg.entropy, bounds_of(cfg)
        if bounds not in cache:
            progress(f"bounding to M = {bounds.M}, C = {bounds.C}")
            cache[bounds] = le.stats_of(location_sums(bounded_pairs(records, bounds.M, bounds.C), locations))
        bounded = cache[bounds]
        split = le.default_split(cfg.epsilon, ("entropy",))
        values = defaultdict(list)
        for run in range(runs):
            rng = RandomSource(None if cfg.seed is None else cfg.seed + run)
            budget = Budget(cfg.epsilon, e["delta"] if e["variant"] in le.DELTA_VARIANTS else 0.0)
            release = le.publish(bounded, e["variant"], bounds, split, budget, rng, e["delta"], e["k"], e["xi"])
            for metric, value in entropy_metrics(actual, bounded, release.entropy, e["variant"], e["k"]).items():
                values[("entropy", metric)].append(value)
        results.append((e["variant"], values))
    return results


def cached(records: DataFrame) -> DataFrame:
    return records.persist(StorageLevel.MEMORY_AND_DISK)
