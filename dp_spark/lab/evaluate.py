"""``dp-spark evaluate``: the error of each method against the true counts, over repeated runs.

NOT PRIVATE. The true counts are computed from the raw records without noise,
so every number this module writes is for comparing methods, never for
publication; the output says so.

Each method bounds the records once and then draws fresh noise in every run,
except HPA, whose selection depends on its noisy popularity and is therefore
redone in every run. With a fixed seed the bounding is the same across runs
and only the noise varies; the spread reported is the noise's, not the
sample's.

``sra_gaussian`` and ``hpa_gaussian`` are SRA and HPA under zCDP accounting: the same ε,
converted to ρ at the config's privacy.delta (10⁻⁶ without one), at most one record per user and
item, and discrete Gaussian noise on the item and edge counts; set beside ``sra`` and ``hpa`` they
compare Laplace and Gaussian noise at equal (ε, δ).

``sra_auto`` and ``hpa_auto`` choose the bound privately in every run, as a
release with ``l = "auto"`` does (a tenth of ε; by the estimate unless the
config's ``l_choice`` asks for the exponential mechanism over the candidates),
and report the chosen bound beside the errors. Each comes with
its oracle, ``sra_oracle`` / ``hpa_oracle``: the fixed method run at every
candidate with the same runs and seeds, and the candidate of lowest mean item
MSE kept. The oracle picks its bound by looking at the true counts: it is NOT
private, a yardstick for the private choice only.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import functions as F

from dp_spark import publishers
from dp_spark.aggregates import item_edges
from dp_spark.bounding import keys, user_records
from dp_spark.core import zcdp
from dp_spark.core.accounting import Accounting
from dp_spark.core.domain import attribute_domain, item_domain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError
from dp_spark.families.counts import bound_choice as counts_bound
from dp_spark.families.counts import family as counts_family
from dp_spark.families.counts import sampling
from dp_spark.families.counts.family import AUTO, BASELINE_PUBLISHERS
from dp_spark.families.registry import family_of
from dp_spark.io import checkins, sources, validation
from dp_spark.io.validation import keyed_by_user
from dp_spark.jobs.config import JobConfig
from dp_spark.jobs.runner import plan_budget
from dp_spark.lab import evaluate_columns, evaluate_entropy, evaluate_frapp, evaluate_histogram, metrics
from dp_spark.lab.metrics import summaries, summary  # noqa: F401 - summary: evaluate's own name too
from dp_spark.release import bound_bias, bound_selection
from dp_spark.release.family import Domains, RunInputs

AUTO_METHODS = {"sra_auto": "sra", "hpa_auto": "hpa"}  # the bound chosen privately in every run
GAUSSIAN_METHODS = {"sra_gaussian": "sra", "hpa_gaussian": "hpa"}  # zCDP, one record per user and item
METHODS = ("sra", "hpa", "lpa", "dft", "gs", *AUTO_METHODS, *GAUSSIAN_METHODS)
EVALUATE_DELTA = 1e-6  # the δ of a Gaussian method when the config gives none
ORACLE_NOTE = ("<method>_oracle: the fixed bound of lowest mean item MSE, of the candidates and (but for HPA) every "
               "integer nearest a power of 2^(1/4) up to the largest, run with the same seeds; chosen on the true "
               "counts, NOT private")
NOT_PRIVATE = ("NOT PRIVATE: errors against true counts computed from the raw records without noise; "
               "for comparing methods only")
TOP_K = 10
TOP_K_CURVE = (1, 5, 20, 50, 100, 200, 500, 1000)  # with TOP_K: paper 000 Figure 9's K axis


def _entropy_method(cfg: JobConfig, method: str, m: int | None) -> JobConfig:
    if m is not None:
        raise ConfigError("--m is not used by an entropy config: set algorithm.locations_per_user")
    return evaluate_entropy.method_config(cfg, method)


def _frapp_method(cfg: JobConfig, method: str, m: int | None) -> JobConfig:
    if m is not None:
        raise ConfigError("--m is not used by a frapp config")
    evaluate_frapp.check_method(method)
    return cfg


def _columns_method(cfg: JobConfig, method: str, m: int | None) -> JobConfig:
    evaluate_columns.check_method(method, m)
    return cfg.with_params(algorithm=method) if method.startswith("dpsense") else cfg


def _histogram_method(cfg: JobConfig, method: str, m: int | None) -> JobConfig:
    """For a user_histogram config the methods are the publishers."""
    if method not in publishers.PUBLISHERS:
        raise ConfigError(f"unknown method {method!r} for a user_histogram config; expected some of "
                          f"{', '.join(publishers.PUBLISHERS)} (the publishers)")
    if m is not None:
        raise ConfigError("--m is not used by a user_histogram config: every user counts once")
    options = cfg.publisher_options if method == cfg.publisher else {}
    return cfg.with_params(publisher=method, publisher_options=options)


def _counts_method(cfg: JobConfig, method: str, m: int | None) -> JobConfig:
    """Baselines bound users to the public m and use their publisher."""
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; expected some of {', '.join(METHODS)}")
    if method in BASELINE_PUBLISHERS:
        if m is None:
            raise ConfigError(f"method {method!r} needs the public per-user bound: pass --m")
        publisher = BASELINE_PUBLISHERS[method]
        options = cfg.publisher_options if cfg.publisher == publisher else {}
        changed = cfg.with_params(algorithm=method, l=m, d=1, publisher=publisher, publisher_options=options,
                                  candidates=None)
        return dataclasses.replace(changed, epsilon_parts={})
    if method in AUTO_METHODS:  # the config's candidates when it has them, else the defaults
        algorithm = AUTO_METHODS[method]
        keep = cfg.params.auto
        return cfg.with_params(algorithm=algorithm, l=AUTO, d=cfg.d if algorithm == "hpa" else 1,
                               candidates=cfg.params.candidates if keep else None)
    if method in GAUSSIAN_METHODS:
        algorithm = GAUSSIAN_METHODS[method]
        delta = cfg.accounting.conversion_delta if cfg.accounting.zcdp else EVALUATE_DELTA
        accounting = Accounting("gaussian", zcdp.rho_of(float(cfg.epsilon), delta), delta)
        changed = cfg.with_params(algorithm=algorithm, d=cfg.d if algorithm == "hpa" else 1, noise="gaussian",
                                  records_per_item=1)
        return dataclasses.replace(changed, epsilon_parts={}, accounting=accounting)
    # HPA keeps the config's d; the others sample no popularity.
    return cfg.with_params(algorithm=method, d=cfg.d if method == "hpa" else 1)


def item_metrics(true: np.ndarray, released: np.ndarray) -> dict[str, float]:
    return {
        "mse": metrics.mse(true, released),
        "kl": metrics.kl_000(true, released),
        f"top{TOP_K}": metrics.top_k_precision(true, released, TOP_K),
        "mae": metrics.mae(true, released),
        "mre": metrics.mre(true, released),
        f"ndcg{TOP_K}": metrics.ndcg(true, released, TOP_K),
        **{f"top{k}": metrics.top_k_precision(true, released, k) for k in TOP_K_CURVE if k < true.size},
    }


def edge_metrics(true: np.ndarray, released: np.ndarray) -> dict[str, float]:
    return {
        "mse": metrics.mse(true, released),
        "kl": metrics.kl_000(true, released),
        f"top{TOP_K}": metrics.edge_top_k_precision(true, released, TOP_K),
    }


@dataclasses.dataclass(frozen=True)
class Truth:
    """True counts of the in-domain raw records: NOT private."""

    items: np.ndarray
    edges: np.ndarray


def _fixed(cfg: JobConfig, l: int) -> JobConfig:
    return cfg.with_params(l=l, candidates=None)


class _Bounded:
    """SRA's bounded counts at each bound, aggregated once per bound (the sample is seeded)."""

    def __init__(self, records, validated, items, attributes, publisher, seed):
        self._args = (records, validated, items, attributes, publisher, seed)
        self._counts = {}

    def at(self, l: int):
        if l not in self._counts:
            records, validated, items, attributes, publisher, seed = self._args
            # The users per row count, as the job passes them: the sample's count is checked
            # against Σ min(n, l) without a job of its own (the same sample either way).
            sample = user_records.sample_selection(records, l, seed=seed, counts=validated.user_counts,
                                                   users_by_n=validated.users_by_n)
            self._counts[l] = sampling.bounded_counts(sample, items, attributes, publisher, seed)
        return self._counts[l]


def _release_metrics(release, l, split, truth: Truth, attributes, gaussian=None):
    """(query, metric, value) of one release against the truth."""
    yield "bounded", "rows", float(release.diagnostics["rows_after_bounding"])
    for metric, value in item_metrics(truth.items, release.item_counts).items():
        yield "items", metric, value
    if attributes:
        for metric, value in edge_metrics(truth.edges, release.edge_counts).items():
            yield "edges", metric, value
        # The same release made consistent (post-processing): does it lower the error?
        fitted = sampling.made_consistent(release, l, split, gaussian)
        for metric, value in item_metrics(truth.items, fitted.item_counts).items():
            yield "items_consistent", metric, value
        for metric, value in edge_metrics(truth.edges, fitted.edge_counts).items():
            yield "edges_consistent", metric, value


def _run_method(cfg, records, validated, items, attributes, truth: Truth, runs, progress, bounded: _Bounded):
    """Yield (query, metric, value) for every run of one method; with "auto" the bound is chosen
    privately in each run (a tenth of ε, as the release does) and reported as ("bound", l)."""
    split = plan_budget(cfg)
    model = counts_bound.error_model(cfg.params, Domains(items, attributes), split) if cfg.params.auto else None
    norms = {}  # the squared bias norms at each user cap a run's count gives (a few values at most)

    def norms_at(cap: int) -> list[int]:
        if cap not in norms:
            norms[cap] = counts_bound.bias_norms(cfg.params, validated, Domains(items, attributes), cap)
        return norms[cap]
    for run in range(runs):
        progress(f"{cfg.algorithm}{'_auto' if model else ''}: run {run + 1}/{runs}")
        rng = RandomSource(None if cfg.seed is None else cfg.seed + run)
        budget = Budget(cfg.epsilon, accounting=cfg.accounting)
        l, popularity = cfg.l, None
        if model is not None:
            scored_at = norms_at
            if cfg.algorithm == "hpa":  # HPA's choice scores its own drop, at this run's noisy popularity
                popularity = sampling.noisy_popularity(records, items, cfg.d, split["epsilon_popularity"], budget, rng,
                                                       cfg.seed, validated.user_counts, validated.users_by_n,
                                                       validated.one_per_user)
                scored_at = functools.partial(counts_bound.bias_norms, cfg.params, validated,
                                              Domains(items, attributes),
                                              ranking=bound_bias.ItemRanking(items, popularity.scores))
            if cfg.params.choice == "estimate":
                ranking = None if popularity is None else bound_bias.ItemRanking(items, popularity.scores)
                l = counts_bound.estimate_choice(cfg.params, validated, Domains(items, attributes), split, budget,
                                                 rng, ranking).bound
            else:
                l = bound_selection.choose_bound_by_users(scored_at, int(validated.users_by_n.sum()),
                                                          cfg.params.candidates, model, split["epsilon_bound"],
                                                          budget, rng, step=f"choose {cfg.bound_name}").bound
            yield "bound", cfg.bound_name, float(l)
        gaussian = counts_family.gaussian_tables(cfg.params, l, split, attributes is not None)
        publisher = sampling.Publisher(cfg.publisher, dict(cfg.publisher_options), gaussian,
                                       cfg.params.records_per_item)
        if cfg.algorithm == "hpa":
            release = sampling.hpa(records, items, attributes, l, cfg.d, split, budget, rng,
                                   seed=cfg.seed, user_counts=validated.user_counts, publisher=publisher,
                                   users_by_n=validated.users_by_n, one_per_user=validated.one_per_user,
                                   popularity=popularity)
        else:
            release = sampling.publish_counts(bounded.at(l), l, split, budget, rng, publisher)
        yield from _release_metrics(release, l, split, truth, attributes, gaussian)


def oracle_bounds(candidates, algorithm: str) -> list[int]:
    """The fixed bounds the oracle tries: the candidates and, but for HPA, every integer nearest
    a power of 2^(1/4) up to the largest candidate (1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16, 19,
    …, 256: 28 bounds for the default candidates), so that the yardstick is not limited to the
    choices "auto" has. SRA's bounded counts are aggregated once per bound and only the noise is
    redrawn per run; HPA redoes its selection in every run, so its oracle stays on the
    candidates (each bound costs it a full release per run)."""
    top = max(candidates)
    dense = set() if algorithm == "hpa" else {round(2 ** (j / 4)) for j in range(4 * top.bit_length() + 1)}
    return sorted(set(candidates) | {b for b in dense if b <= top})


def _oracle(cfg, records, validated, items, attributes, truth: Truth, runs, progress, bounded: _Bounded) -> dict:
    """The fixed method at every bound of :func:`oracle_bounds`, the same runs and seeds; the
    bound of lowest mean item MSE, with ("bound", l) added. NOT private: it looks at the truth."""
    best, best_mse = None, None
    for l in oracle_bounds(cfg.params.candidates, cfg.algorithm):
        values = defaultdict(list)
        for query, metric, value in _run_method(_fixed(cfg, l), records, validated, items, attributes, truth, runs,
                                                lambda message, l=l: progress(
                                                    f"oracle at {cfg.bound_name} = {l}: {message}"),
                                                bounded):
            values[(query, metric)].append(value)
        mse = summary(values[("items", "mse")])["mean"]
        if mse is not None and (best_mse is None or mse < best_mse):
            best, best_mse = {("bound", cfg.bound_name): [float(l)] * runs, **values}, mse
    return best


def _evaluate_columns(cfg: JobConfig, spark, methods: list[str], runs: int, m: int | None, progress) -> list[dict]:
    items = item_domain(cfg.items, spark, cfg.source)
    progress(f"reading {cfg.source.path or cfg.source.table}; true column counts are computed WITHOUT noise")
    validated = validation.validate_records(sources.read_records(spark, cfg.source, False), items, None)
    dataset = Path(cfg.source.path or cfg.source.table).name
    try:
        results = evaluate_columns.evaluate_columns(cfg, validated.records, items, methods, runs, m, progress)
    finally:
        validated.release()
    return [record for method, values in results for record in summaries(method, dataset, values)]


def _evaluate_entropy(configs: list[JobConfig], spark, runs: int, progress) -> list[dict]:
    cfg = configs[0]
    locations = item_domain(cfg.items, spark, cfg.source)
    progress(f"reading {cfg.source.path or cfg.source.table}; the actual entropy is computed WITHOUT noise")
    # As run checks them: with location_choice = "first_visit", the times of the strictest M.
    timed = [m for m in (evaluate_entropy.timed_bound(c) for c in configs) if m is not None]
    records, _diagnostics = checkins.validate_checkins(checkins.read_checkins(spark, cfg.source), locations,
                                                       min(timed) if timed else None)
    records = evaluate_entropy.cached(records)
    dataset = Path(cfg.source.path or cfg.source.table).name
    try:
        actual = evaluate_entropy.actual_stats(records, locations)
        results = evaluate_entropy.run_variants(configs, records, locations, actual, runs, progress)
    finally:
        records.unpersist()
    return [record for method, values in results for record in summaries(method, dataset, values)]


def _evaluate_frapp(cfg: JobConfig, spark, methods: list[str], runs: int, progress) -> list[dict]:
    dataset = Path(cfg.source.path or cfg.source.table).name
    results = evaluate_frapp.run_methods(cfg, spark, methods, runs, progress)
    return [record for method, values in results for record in summaries(method, dataset, values)]


def _aligned(table, truth: pd.Series) -> np.ndarray:
    """A released table's noisy counts on the truth's items, 0 for an item not released."""
    released = table.set_index("item_id")["noisy_count"] if len(table) else pd.Series(dtype=float)
    return released.reindex(truth.index, fill_value=0).to_numpy(dtype=float)


def _evaluate_private_items(configs: list[JobConfig], methods: list[str], spark, runs: int,
                            progress) -> list[dict]:
    """Counts whose items are selected privately (``domain.items = "private"``): each run is the
    family's own release (partition selection, then bounding and noise), scored on every item the
    raw records hold, an item left out counting as 0, with the number of items selected and the
    share of the true records they hold. NOT private: the truth is the raw records'."""
    cfg = configs[0]
    attributes = attribute_domain(cfg.attributes)
    if attributes is not None:
        raise ConfigError("evaluate scores private items on their item counts only: remove domain.attributes")
    progress(f"reading {cfg.source.path or cfg.source.table}; true counts are computed WITHOUT noise")
    records = sources.read_records(spark, cfg.source, False).persist(StorageLevel.MEMORY_AND_DISK)
    dataset = Path(cfg.source.path or cfg.source.table).name
    out = []
    try:
        # The records a release can count: a usable user id and an item (validation's rule).
        truth = (keyed_by_user(records).where(F.col("item_id").isNotNull()).groupBy("item_id").count().toPandas()
                 .set_index("item_id")["count"].astype(float))
        for method, method_cfg in zip(methods, configs):
            values = defaultdict(list)
            for run in range(runs):
                progress(f"{method}: run {run + 1}/{runs}")
                seed = None if method_cfg.seed is None else method_cfg.seed + run
                budget = Budget(method_cfg.epsilon, family_of(method_cfg.algorithm).delta(method_cfg.params),
                                fixed_seed=seed is not None, accounting=method_cfg.accounting)
                inputs = RunInputs(records, Domains(None, None), plan_budget(method_cfg), budget, RandomSource(seed),
                                   seed, lambda message: None)
                output = counts_family.run(method_cfg.params, inputs)
                released = _aligned(output.tables["item_counts"], truth)
                for metric, value in item_metrics(truth.to_numpy(), released).items():
                    values[("items", metric)].append(value)
                kept = truth.index.isin(output.tables["item_counts"]["item_id"])
                values[("selection", "items_selected")].append(float(kept.sum()))
                values[("selection", "records_share")].append(float(truth[kept].sum() / truth.sum()))
                if (output.chosen or {}).get(method_cfg.bound_name) is not None:
                    values[("bound", method_cfg.bound_name)].append(float(output.chosen[method_cfg.bound_name]))
            out += summaries(method, dataset, values)
    finally:
        records.unpersist()
    return out


def _evaluate_counts(cfg: JobConfig, configs: list[JobConfig], methods: list[str], spark, runs: int,
                     progress) -> list[dict]:
    if cfg.params.private_items:
        return _evaluate_private_items(configs, methods, spark, runs, progress)
    items = item_domain(cfg.items, spark, cfg.source)
    attributes = attribute_domain(cfg.attributes)
    progress(f"reading {cfg.source.path or cfg.source.table}; true counts are computed WITHOUT noise")
    # HPA with d = 1 takes its popularity sample from validation's pass, as the job does: under the
    # sampler's salt it is the same record per user, without a selection of its own in every run.
    # Only when seeded: without a seed each run draws a sample of its own.
    salt = keys.sample_salt(cfg.seed) if cfg.seed is not None and any(
        c.algorithm == "hpa" and c.d == 1 for c in configs) else None
    validated = validation.validate_records(
        sources.read_records(spark, cfg.source, attributes is not None), items, attributes, one_per_user_salt=salt
    )
    dataset = Path(cfg.source.path or cfg.source.table).name
    # Every method and every HPA run reads the records again: keep them (spilling to disk
    # when they do not fit) rather than re-reading and re-parsing the source each time.
    cached = validated.records.persist(StorageLevel.MEMORY_AND_DISK)
    records = []
    try:
        edges = item_edges.edge_counts(cached, items, attributes)
        truth = Truth(item_edges.item_counts(edges).astype(float), edges.astype(float))
        bounded = {}  # SRA's bounded counts, per publisher
        for method, method_cfg in zip(methods, configs):
            publisher = sampling.Publisher(method_cfg.publisher, dict(method_cfg.publisher_options),
                                           records_per_item=method_cfg.params.records_per_item)
            key = (publisher.name, tuple(sorted(publisher.options.items())), publisher.records_per_item)
            counts_at = bounded.setdefault(key, _Bounded(cached, validated, items, attributes, publisher,
                                                         method_cfg.seed))
            run = (cached, validated, items, attributes, truth, runs, progress, counts_at)
            values = defaultdict(list)
            for query, metric, value in _run_method(method_cfg, *run):
                values[(query, metric)].append(value)
            records += summaries(method, dataset, values)
            if method_cfg.params.auto:
                records += summaries(f"{method_cfg.algorithm}_oracle", dataset, _oracle(method_cfg, *run))
    finally:
        cached.unpersist()
        validated.release()
    return records


@dataclasses.dataclass(frozen=True)
class Evaluator:
    """How ``dp-spark evaluate`` compares methods on one family's config (NOT private): each
    method's config, the runs, the methods compared by default, what the report notes."""

    method_config: Callable[[JobConfig, str, int | None], JobConfig]
    run: Callable[..., list[dict]]  # (cfg, method configs, spark, methods, runs, m, progress)
    default_methods: Callable[[JobConfig], str]
    meta: Callable[[JobConfig, int | None], dict]


EVALUATORS = {  # by family name (dp_spark.families.registry)
    "counts": Evaluator(
        _counts_method, lambda cfg, configs, spark, methods, runs, m, progress: _evaluate_counts(
            cfg, configs, methods, spark, runs, progress),
        lambda cfg: f"{cfg.algorithm}_auto" if f"{cfg.algorithm}_auto" in AUTO_METHODS and cfg.params.auto
        else cfg.algorithm, lambda cfg, m: {"l": cfg.l, "m": m, "publisher": cfg.publisher,
                                                   "oracle": ORACLE_NOTE}),
    "user_histogram": Evaluator(
        _histogram_method, lambda cfg, configs, spark, methods, runs, m, progress: evaluate_histogram.evaluate(
            configs, spark, runs, progress),
        lambda cfg: cfg.publisher, lambda cfg, m: {"quantity": cfg.quantity, "bins": len(cfg.bins)}),
    "dpsense": Evaluator(
        _columns_method, lambda cfg, configs, spark, methods, runs, m, progress: _evaluate_columns(
            cfg, spark, methods, runs, m, progress),
        lambda cfg: cfg.algorithm, lambda cfg, m: {"theta_max": cfg.theta_max, "limit": cfg.limit, "m": m}),
    "location_entropy": Evaluator(
        _entropy_method, lambda cfg, configs, spark, methods, runs, m, progress: _evaluate_entropy(
            configs, spark, runs, progress),
        lambda cfg: "limit_auto" if cfg.params.auto and cfg.entropy["variant"] == "limit" else cfg.entropy["variant"],
        lambda cfg, m: {k: cfg.entropy[k] for k in ("M", "C", "k", "delta")}),
    "frapp": Evaluator(
        _frapp_method, lambda cfg, configs, spark, methods, runs, m, progress: _evaluate_frapp(
            cfg, spark, methods, runs, progress),
        lambda cfg: f"exact,{cfg.frapp['scheme'].name}",
        lambda cfg, m: {**cfg.frapp["scheme"].parameters(), "sup_min": cfg.frapp["sup_min"]}),
}


def evaluator_of(cfg: JobConfig) -> Evaluator:
    return EVALUATORS[family_of(cfg.algorithm).name]


def method_config(cfg: JobConfig, method: str, m: int | None) -> JobConfig:
    """The job config of one method (its family's rules: evaluator_of(cfg).method_config)."""
    return evaluator_of(cfg).method_config(cfg, method, m)


def evaluate(cfg: JobConfig, spark, methods: list[str], runs: int, m: int | None, progress) -> list[dict]:
    """Records {method, dataset, query, metric, mean, std, median, p90, p99, runs, nan_runs} for
    every method and metric (:func:`summary`)."""
    if runs < 1:
        raise ConfigError(f"--runs must be >= 1, got {runs}")
    configs = [method_config(cfg, method, m) for method in methods]  # all checked before Spark works
    return evaluator_of(cfg).run(cfg, configs, spark, methods, runs, m, progress)


def _shown(r: dict | None) -> str:
    if r is None:
        return ""
    if r["mean"] is None:
        return f"NaN in all {r['runs']} runs"
    nan = f"; NaN in {r['nan_runs']} of {r['runs']} runs" if r.get("nan_runs") else ""
    tail = f" (p50 {r['median']:.4g}, p90 {r['p90']:.4g}, p99 {r['p99']:.4g})" if r.get("runs", 1) > 1 else ""
    return f"{r['mean']:.4g} ± {r['std']:.2g}{tail}{nan}"


def markdown(records: list[dict]) -> str:
    """One row per (query, metric), one column per method: mean ± std, the median and the 90th
    and 99th percentiles, and the runs that measured NaN."""
    methods = list(dict.fromkeys(r["method"] for r in records))
    rows = list(dict.fromkeys((r["query"], r["metric"]) for r in records))
    cell = {(r["method"], r["query"], r["metric"]): r for r in records}
    lines = ["| query | metric | " + " | ".join(methods) + " |", "|---|---|" + "---:|" * len(methods)]
    for query, metric in rows:
        shown = [_shown(cell.get((method, query, metric))) for method in methods]
        lines.append(f"| {query} | {metric} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def write(records: list[dict], out: str, meta: dict) -> None:
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "evaluation.json").write_text(json.dumps(records, indent=2) + "\n")
    (directory / "evaluation.md").write_text(f"{NOT_PRIVATE}\n\n" + "\n".join(f"- {k}: {v}" for k, v in meta.items())
                                             + "\n\n" + markdown(records) + "\n")
