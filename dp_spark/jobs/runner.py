"""A job: config -> bound -> aggregate -> publish -> write (DESIGN.md).

Order matters for "bad input gets a clear error and nothing is lost": the
budget split, the domains and the output location are checked before any
record is read, and the outputs are written only after every noisy release
has been paid for in the ledger.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.io import release_store
from dp_spark.io import sources
from dp_spark.io import validation
from dp_spark import __version__
from dp_spark.bounding import user_records
from dp_spark.jobs import budget_store
from dp_spark.io import checkins
from dp_spark.algorithms import dpsense, histogram, location_entropy, sampling
from dp_spark.jobs.config import COLUMN_ALGORITHMS, JobConfig
from dp_spark.core.domain import AttributeDomain, ItemDomain, attribute_domain, item_domain, refuse_source_table
from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.privacy import Budget
from dp_spark.core.progress import Progress

DIAGNOSTICS_NOTE = (
    "NOT PRIVATE: computed from the raw records without noise, for the operator's "
    "checks only; remove this section before publishing the report"
)


def plan_budget(cfg: JobConfig) -> dict[str, Fraction]:
    """The epsilon split this job will spend; refuses one that exceeds the total."""
    if cfg.algorithm == "user_histogram":
        return {"epsilon_histogram": cfg.epsilon}
    if cfg.algorithm == "frapp":
        return {"epsilon_records": cfg.epsilon}
    if cfg.algorithm == "entropy":
        split = location_entropy.default_split(cfg.epsilon, cfg.entropy["outputs"])
        split.update(cfg.epsilon_parts)
        Budget(cfg.epsilon).check_plan(split)
        return split
    if cfg.algorithm in COLUMN_ALGORITHMS:
        split = dpsense.default_split(cfg.epsilon)
        split.update(cfg.epsilon_parts)
        Budget(cfg.epsilon).check_plan(split)
        return split
    split = sampling.default_split(cfg.algorithm, cfg.epsilon, cfg.attributes is not None)
    split.update({k: v for k, v in cfg.epsilon_parts.items() if k in split})
    Budget(cfg.epsilon).check_plan(split)
    return split


@dataclass(frozen=True)
class JobResult:
    output: str
    report: dict
    tables: dict  # name -> pandas DataFrame of noisy outputs
    items: ItemDomain | None  # None for FRAPP, whose domain is the attributes' product
    status: str = "released"  # "unchanged": the run date's release already existed; nothing was spent


def _stage(progress, name: str):
    """``progress.stage(name)``, or nothing for a plain message callable (bench, peers)."""
    return progress.stage(name) if hasattr(progress, "stage") else contextlib.nullcontext()


def _tables(release: sampling.CountsRelease, items: ItemDomain, attributes: AttributeDomain | None) -> dict:
    tables = {"item_counts": pd.DataFrame({"item_id": items.ids, "noisy_count": release.item_counts})}
    if attributes:
        h = len(attributes)
        tables["edge_counts"] = pd.DataFrame(
            {
                "item_id": items.ids.repeat(h),
                "attr": list(attributes.values) * len(items),
                "noisy_count": release.edge_counts.reshape(-1),
            }
        )
    return tables


def _histogram_table(cfg: JobConfig, noisy: np.ndarray) -> pd.DataFrame:
    edges = np.asarray(cfg.bins)
    lows, highs = histogram.bin_bounds(edges)
    return pd.DataFrame({"bin": histogram.bin_labels(edges), "low": lows,
                         "high": pd.array(highs, dtype="Int64"), "noisy_count": noisy})


def _parameters(cfg: JobConfig) -> dict:
    if cfg.algorithm == "entropy":
        return {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.entropy.items()}
    if cfg.algorithm in COLUMN_ALGORITHMS:
        return {"theta_max": cfg.theta_max, "limit": cfg.limit}
    if cfg.algorithm == "user_histogram":
        return {"quantity": cfg.quantity, "bins": histogram.bin_labels(np.asarray(cfg.bins)),
                "sensitivity_l1": histogram.SENSITIVITY}
    return {cfg.bound_name: cfg.l, **({"d": cfg.d} if cfg.algorithm == "hpa" else {})}


def _report(cfg, budget, items, attributes, split, diagnostics, tables) -> dict:
    spec = {**sampling.SPEC_SECTIONS, **dpsense.SPEC_SECTIONS, "user_histogram": histogram.SPEC_SECTION,
            "entropy": location_entropy.SPEC_SECTIONS.get(cfg.entropy.get("variant"))}[cfg.algorithm]
    return {
        "dp_spark_version": __version__,
        "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "algorithm": {
            "name": cfg.algorithm,
            "parameters": _parameters(cfg),
            "epsilon_split": {k: float(v) for k, v in split.items()},
            "specification": spec,
            "post_processing": ("item and edge counts made consistent and non-negative (weighted least "
                                "squares; no budget)") if cfg.consistent else None,
            "publisher": None if cfg.algorithm in (*COLUMN_ALGORITHMS, "entropy") else {
                "name": cfg.publisher,
                **{k: v if isinstance(v, (bool, int)) else float(v) for k, v in cfg.publisher_options.items()}},
        },
        **budget.to_json(),
        "noise": {
            "sampler": "exact discrete Laplace (Canonne, Kamath, Steinke 2020)",
            **({"selection": "exponential mechanism, sampled exactly: exact rational exponents, uniform proposals "
                             "kept by an exact Bernoulli(exp(-x))"} if cfg.algorithm in COLUMN_ALGORITHMS else {}),
            "randomness": "fixed seed: reproducible, not for publication" if cfg.seed is not None else "OS CSPRNG",
        },
        "source": {"format": cfg.source.format, "location": cfg.source.path or cfg.source.table},
        "domain": {
            "items": items.description,
            **({"items_public_by_assertion": items.public_by_assertion} if items.public_by_assertion else {}),
            "item_count": len(items),
            "attributes": list(attributes.values) if attributes else None,
            **({"bins": f"{len(cfg.bins)} public bins from the config, the last open-ended"}
               if cfg.bins else {}),
        },
        "outputs": {name: {"rows": len(frame), "columns": list(frame.columns)} for name, frame in tables.items()},
        "diagnostics_not_private": {"note": DIAGNOSTICS_NOTE, **diagnostics},
    }


@dataclass(frozen=True)
class Computed:
    tables: dict  # name -> pandas DataFrame of noisy outputs
    report: dict
    items: ItemDomain


def _describe(cfg: JobConfig, items: ItemDomain, attributes: AttributeDomain | None) -> str:
    if cfg.algorithm == "entropy":
        e = cfg.entropy
        return (f"location entropy ({e['variant']}) with epsilon {float(cfg.epsilon):g}, M = {e['M']}, C = {e['C']}; "
                f"{len(items):,} public locations; outputs {', '.join(e['outputs'])}")
    if cfg.algorithm == "user_histogram":
        return (f"histogram of {histogram.QUANTITIES[cfg.quantity]} in {len(cfg.bins)} public bins with "
                f"epsilon {float(cfg.epsilon):g}, publisher {cfg.publisher}; {len(items):,} items")
    if cfg.algorithm in COLUMN_ALGORITHMS:
        return (f"{cfg.algorithm.upper()} with epsilon {float(cfg.epsilon):g}, theta chosen privately from "
                f"1..{cfg.theta_max}, limit by {cfg.limit}; {len(items):,} columns (items)")
    return (f"{cfg.algorithm.upper()} with epsilon {float(cfg.epsilon):g}, {cfg.bound_name} = {cfg.l}, "
            f"publisher {cfg.publisher}; {len(items):,} items"
            + (f" x {len(attributes)} attribute values" if attributes else ""))


def _histogram_release(cfg, validated, items, split, budget, rng) -> tuple[dict, dict]:
    true = histogram.true_histogram(validated.records, cfg.quantity, np.asarray(cfg.bins), validated.user_counts)
    noisy = histogram.publish_histogram(true, cfg.epsilon, budget, rng, cfg.publisher, cfg.publisher_options)
    return {"histogram": _histogram_table(cfg, noisy)}, {}


def _column_release(cfg, validated, items, split, budget, rng) -> tuple[dict, dict]:
    release = dpsense.dpsense(validated.records, items, split, budget, rng, theta_max=cfg.theta_max,
                              limit=cfg.limit, scaled=cfg.algorithm == "dpsense_s", seed=cfg.seed)
    table = pd.DataFrame({"item_id": items.ids, "noisy_count": release.counts})
    # θ* and α* are outputs of the exponential mechanism: private, and needed to read the counts.
    return {"item_counts": table}, {"chosen": {"theta": release.theta, "alpha": float(release.alpha)}}


def _counts_release(cfg, validated, items, split, budget, rng, attributes) -> tuple[dict, dict]:
    common = dict(items=items, attributes=attributes, l=cfg.l, epsilons=split, budget=budget, rng=rng,
                  seed=cfg.seed, user_counts=validated.user_counts, users_by_n=validated.users_by_n,
                  publisher=sampling.Publisher(cfg.publisher, dict(cfg.publisher_options)))
    if cfg.algorithm != "hpa":
        release = sampling.sra(validated.records, **common)
    else:
        release = sampling.hpa(validated.records, d=cfg.d, one_per_user=validated.one_per_user, **common)
    if cfg.consistent:
        release = sampling.made_consistent(release, cfg.l, split)
    return _tables(release, items, attributes), {"diagnostics": release.diagnostics}


def entropy_table(items: ItemDomain, release: location_entropy.EntropyRelease) -> pd.DataFrame:
    table = pd.DataFrame({"location_id": items.ids, "noisy_entropy": release.entropy})
    for name, values in release.extra.items():
        table[f"noisy_{name}"] = values
    return table


def _entropy_release(cfg: JobConfig, spark, items: ItemDomain, split: dict, progress) -> Computed:
    e = cfg.entropy
    with _stage(progress, "read"):
        records, diagnostics = checkins.validate_checkins(checkins.read_checkins(spark, cfg.source), items)
    progress(f"{diagnostics['rows_read']:,} check-in rows read; bounding users to M = {e['M']} locations and "
             f"C = {e['C']} visits")
    with _stage(progress, "release"):
        bounds = location_entropy.Bounds(e["M"], e["C"])
        stats = location_entropy.location_stats(location_entropy.bounded_pairs(records, bounds), items)
        budget = Budget(cfg.epsilon, claimed_delta(cfg), fixed_seed=cfg.seed is not None)
        release = location_entropy.publish(stats, e["variant"], bounds, split, budget, RandomSource(cfg.seed),
                                           delta=e["delta"], k=e["k"], xi=e["xi"])
    if not budget.private:
        progress("WARNING: Limit-CB is only crowd-blending private, NOT differentially private; "
                 "privacy.json says why.")
    tables = {"location_entropy": entropy_table(items, release)}
    diagnostics = {**diagnostics, **release.diagnostics,
                   "locations_with_users_after_bounding": int((stats.users > 0).sum())}
    return Computed(tables, _report(cfg, budget, items, None, split, diagnostics, tables), items)


def _popularity_salt(cfg: JobConfig) -> int | None:
    """For HPA with d = 1, the salt of its popularity sample, which validation then draws in its
    own pass (the sampler's salt, so a seeded run keeps the same records as without this); None
    for every other job."""
    if cfg.algorithm == "hpa" and cfg.d == 1:
        return user_records.sample_salt(cfg.seed)
    return None


def compute_release(cfg: JobConfig, spark, progress=None) -> Computed:
    """Read, check, bound, count and add noise; nothing is written."""
    progress = progress or Progress()
    split = plan_budget(cfg)
    items = item_domain(cfg.items, spark, cfg.source)
    attributes = attribute_domain(cfg.attributes)
    progress(_describe(cfg, items, attributes))
    if items.public_by_assertion:
        progress(f"WARNING: {items.public_by_assertion}")

    progress(f"reading and checking {cfg.source.format} source {cfg.source.path or cfg.source.table}")
    if cfg.algorithm == "entropy":
        return _entropy_release(cfg, spark, items, split, progress)
    with _stage(progress, "read"):
        raw = sources.read_records(spark, cfg.source, want_attr=attributes is not None)
        validated = validation.validate_records(raw, items, attributes, one_per_user_salt=_popularity_salt(cfg))
    progress(f"{validated.diagnostics['rows_read']:,} records read; bounding and counting")

    budget = Budget(cfg.epsilon, fixed_seed=cfg.seed is not None)
    rng = RandomSource(cfg.seed)
    try:
        with _stage(progress, "release"):
            if cfg.algorithm == "user_histogram":
                tables, extra = _histogram_release(cfg, validated, items, split, budget, rng)
            elif cfg.algorithm in COLUMN_ALGORITHMS:
                tables, extra = _column_release(cfg, validated, items, split, budget, rng)
            else:
                tables, extra = _counts_release(cfg, validated, items, split, budget, rng, attributes)
    finally:
        validated.release()
    if not budget.private:
        progress("WARNING: this release reproduces a published flaw and is NOT differentially private; "
                 "privacy.json says why. Do not publish it.")
    diagnostics = {**validated.diagnostics, **extra.get("diagnostics", {})}
    report = _report(cfg, budget, items, attributes, split, diagnostics, tables)
    if "chosen" in extra:
        report["algorithm"]["chosen"] = extra["chosen"]
    return Computed(tables, report, items)


def claimed_delta(cfg: JobConfig) -> float:
    """The δ a job may spend: only the (ε, δ) location-entropy variants have one."""
    if cfg.algorithm == "entropy" and cfg.entropy["variant"] in location_entropy.DELTA_VARIANTS:
        return cfg.entropy["delta"]
    return 0.0


def release_location(cfg: JobConfig) -> str:
    """Where the release goes: ``output``, or its partition ``output/run_date=YYYY-MM-DD``."""
    if cfg.run_date is None:
        return cfg.output
    return f"{cfg.output.rstrip('/')}/run_date={cfg.run_date}"


def _release(cfg: JobConfig, spark, progress, target: str, run: dict) -> JobResult:
    if cfg.algorithm == "frapp":
        from dp_spark.jobs import frapp_job

        return frapp_job.run(cfg, spark, progress, target, run)
    computed = compute_release(cfg, spark, progress)
    report = {**computed.report, "run": run}
    with _stage(progress, "write"):
        progress(f"writing {target}")
        release_store.write_release(spark, target, computed.tables, report)
    return JobResult(target, report, computed.tables, computed.items)


def run_job(cfg: JobConfig, spark, progress=None, force: bool = False) -> JobResult:
    """The whole job: plan, charge the budget store, read, release, write, record.

    The output location and the budget store are checked before any record is read. With a run
    date, a release that already exists is left alone (status "unchanged", nothing spent) unless
    ``force``, which draws fresh noise, replaces it, and is charged like any other run.
    """
    progress = progress or Progress()
    target = release_location(cfg)
    if cfg.seed is not None:
        progress("WARNING: fixed seed: this release is for testing only and NOT private (whoever learns the "
                 "seed can regenerate the noise)")
    with _stage(progress, "plan"):
        plan_budget(cfg)
        refuse_source_table(cfg.items, spark, cfg.source)  # before the budget store is charged
        if cfg.run_date is not None:
            release_store.check_partitioned_output(spark, cfg.output, "run_date")
        release_store.check_output_location(spark, target)
        replacing = cfg.run_date is not None and release_store.release_exists(spark, target)
        if replacing and not force:
            progress(f"the release for run date {cfg.run_date} already exists at {target}: nothing to do and no "
                     "budget spent (--force draws new noise and spends the budget again)")
            return JobResult(target, release_store.read_report(spark, target), {}, None, status="unchanged")
        if replacing:
            progress(f"--force: replacing the release for run date {cfg.run_date} at {target}; this run spends "
                     f"epsilon {float(cfg.epsilon):g} again")
    run = {"run_date": cfg.run_date, "forced": replacing}
    store = cfg.budget_store
    if store is not None:
        with _stage(progress, "charge"):
            charged = budget_store.charge(store, cfg.epsilon, claimed_delta(cfg),
                                          {"algorithm": cfg.algorithm, "output": target, "run_date": cfg.run_date,
                                           "forced": replacing})
        progress(f"charged epsilon {float(cfg.epsilon):g} to dataset {store.dataset!r}: "
                 f"{charged['epsilon_charged_total']:g} of its cap {charged['epsilon_cap']:g} is now used")
        run["budget_store"] = charged
    try:
        result = _release(cfg, spark, progress, target, run)
    except BaseException as exc:  # the charge stays: noise may have been drawn
        if store is not None:
            budget_store.finish(store, run["budget_store"]["run_id"], "failed",
                                error=f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        raise
    if store is not None:
        with _stage(progress, "record"):
            budget_store.finish(store, run["budget_store"]["run_id"], "released", release=target,
                                epsilon_spent=result.report["epsilon_spent"], ledger=result.report["ledger"])
    return result
