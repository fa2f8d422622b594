"""``dp-spark evaluate`` on a location-entropy config: the variants against the actual entropy.

NOT PRIVATE: the actual entropy of every location is computed from the raw
check-ins (no bounding, no noise), for comparing methods only.

Metrics (specification §2, paper 004): ``kl`` (M2, 004's rule: published against
actual, both floored at 0.01), ``mse`` (M10: a suppressed location counts as
entropy 0), ``mse_throwaway`` (M10 over published locations only) and
``published_ratio`` (M9: of the locations with at least K = 20 users in the raw
data, the share published; Limit, Limit-SS and Baseline publish a location when
it keeps K users after bounding, Limit-CB when it keeps k, Limit-CB-DP when its
noisy user count selects it).

``limit_auto`` is Limit with M and C chosen privately in every run, as a release
with ``locations_per_user = visits_per_location = "auto"`` does (a tenth of ε,
the exponential mechanism over the candidate grid; the config's candidates when
it has them), with the chosen M and C reported. Beside it, ``limit_oracle``: Limit
at every (M, C) of the grid with the same runs and seeds, and the pair of lowest
mean MSE kept. The oracle looks at the actual entropy: NOT private.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.bounding.user_locations import bounded_pairs, ranked_pairs
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError
from dp_spark.families.location_entropy import bounds_choice as ebs
from dp_spark.families.location_entropy import entropy as le
from dp_spark.families.location_entropy.family import AUTO, bounding_salt
from dp_spark.families.location_entropy.family import timed_bound as timed_bound_of
from dp_spark.families.location_entropy.sums import candidate_sums, location_sums
from dp_spark.jobs.config import JobConfig
from dp_spark.lab import metrics

ELIGIBLE_USERS = 20  # K of M9 (paper 004 Fig. 7)
BASELINE_BOUNDS = le.Bounds(M=100, C=1000)  # Fig. 2's public C_max, M_max


AUTO_METHODS = {"limit_auto": "limit"}  # M and C chosen privately in every run


def method_config(cfg: JobConfig, method: str) -> JobConfig:
    if method in AUTO_METHODS:
        keep = cfg.params.auto
        return cfg.with_params(variant=AUTO_METHODS[method], M=AUTO, C=AUTO,
                               M_candidates=cfg.params.M_candidates if keep and cfg.params.M == AUTO else None,
                               C_candidates=cfg.params.C_candidates if keep and cfg.params.C == AUTO else None)
    if method not in le.VARIANTS:
        raise ConfigError(f"unknown method {method!r} for an entropy config; expected some of "
                          f"{', '.join((*le.VARIANTS, *AUTO_METHODS))}")
    if cfg.params.auto:
        raise ConfigError(f"method {method!r} compares fixed bounds: set algorithm.locations_per_user and "
                          "algorithm.visits_per_location to numbers, or use the method limit_auto")
    return cfg.with_params(variant=method)


def timed_bound(cfg: JobConfig) -> int | None:
    """The M whose users' check-in times validation checks, as the job's run does."""
    return timed_bound_of(cfg.params)


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
    """(method, {(query, metric): values per run}); bounding once per distinct (M, C) and choice
    of locations (``location_choice``: by first visit, or random under the salt the job derives
    from the config's seed; one draw of that choice serves every run)."""
    cache = {} if bounded_cache is None else bounded_cache
    results = []
    for cfg in configs:
        if cfg.params.auto:
            results += _run_auto(cfg, records, locations, actual, runs, progress)
            continue
        e, bounds = cfg.entropy, bounds_of(cfg)
        salt = bounding_salt(cfg.params, cfg.seed)
        if (bounds, salt) not in cache:
            progress(f"bounding to M = {bounds.M}, C = {bounds.C}")
            cache[bounds, salt] = le.stats_of(location_sums(bounded_pairs(records, bounds.M, bounds.C, salt),
                                                            locations))
        bounded = cache[bounds, salt]
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


def _run_auto(cfg: JobConfig, records: DataFrame, locations, actual: le.LocationStats, runs: int,
              progress) -> list[tuple[str, dict]]:
    """limit_auto and limit_oracle (see the module): one aggregation gives the sums at every
    candidate pair, as the release's own (families.location_entropy.family._run_auto)."""
    p = cfg.params
    Ms, Cs = p.grid
    progress(f"location sums at {len(Ms) * len(Cs)} candidate bounds (M in {list(Ms)}, C in {list(Cs)})")
    grid = candidate_sums(ranked_pairs(records, Ms[-1], Cs[-1], bounding_salt(p, cfg.seed)), locations, Ms, Cs)
    # Only the entropy is evaluated (as run_variants does): a tenth of ε chooses, the entropy has the rest.
    bound = cfg.epsilon * ebs.DEFAULT_SHARE
    split = {"epsilon_bound": bound, **le.default_split(cfg.epsilon - bound, ("entropy",))}
    stats = {}

    def run_at(i, j, budget, rng, step_suffix=""):
        if (i, j) not in stats:
            stats[i, j] = le.stats_of(grid.at(i, j))
        bounds = le.Bounds(Ms[i], Cs[j])
        release = le.publish(stats[i, j], p.variant, bounds, split, budget, rng, p.delta, p.k, p.xi,
                             step_suffix=step_suffix)
        return entropy_metrics(actual, stats[i, j], release.entropy, p.variant, p.k)

    def budget_of():
        return Budget(cfg.epsilon, p.delta if p.variant in le.DELTA_VARIANTS else 0.0)

    auto = defaultdict(list)
    for run in range(runs):
        rng = RandomSource(None if cfg.seed is None else cfg.seed + run)
        budget = budget_of()
        i, j = ebs.choose_bounds(grid, p.variant, split["epsilon_entropy"], len(locations), split["epsilon_bound"],
                                 budget, rng, k=p.k, delta=p.delta, xi=p.xi)
        auto[("bound", "M")].append(float(Ms[i]))
        auto[("bound", "C")].append(float(Cs[j]))
        for metric, value in run_at(i, j, budget, rng, " (chosen bounds)").items():
            auto[("entropy", metric)].append(value)
    # The oracle: every pair at the whole ε (as a fixed-bound release), the same seeds.
    fixed = le.default_split(cfg.epsilon, ("entropy",))
    best, best_mse = None, None
    for i in range(len(Ms)):
        for j in range(len(Cs)):
            values = defaultdict(list, {("bound", "M"): [float(Ms[i])] * runs, ("bound", "C"): [float(Cs[j])] * runs})
            for run in range(runs):
                rng = RandomSource(None if cfg.seed is None else cfg.seed + run)
                if (i, j) not in stats:
                    stats[i, j] = le.stats_of(grid.at(i, j))
                release = le.publish(stats[i, j], p.variant, le.Bounds(Ms[i], Cs[j]), fixed, budget_of(), rng,
                                     p.delta, p.k, p.xi)
                for metric, value in entropy_metrics(actual, stats[i, j], release.entropy, p.variant, p.k).items():
                    values[("entropy", metric)].append(value)
            mse = float(np.mean(values[("entropy", "mse")]))
            if best_mse is None or mse < best_mse:
                best, best_mse = values, mse
    return [(f"{p.variant}_auto", auto), (f"{p.variant}_oracle", best)]


def cached(records: DataFrame) -> DataFrame:
    return records.persist(StorageLevel.MEMORY_AND_DISK)
