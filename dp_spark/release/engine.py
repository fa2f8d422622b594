"""One release of one family: budget, run, report. Shared by the job runner and the public API,
so a job and an API call with the same inputs release the same tables and the same report.

Order matters for "bad input gets a clear error": the caller plans the split (``plan_split``)
and builds the domains before any record is read; the noise is paid for in the ledger as it is
drawn, and a step that would overspend is refused before it draws.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import pandas as pd
from pyspark.sql import functions as F

from dp_spark.core import accuracy, zcdp
from dp_spark.core.accounting import PURE, Accounting
from dp_spark.core.domain import ItemDomain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.release import bounding_estimate, guards, noise_only
from dp_spark.release.family import Domains, Execution, Family, FamilyOutput, RunInputs, check_domain_fits
from dp_spark.release.guards import Guards
from dp_spark.version import __version__

DIAGNOSTICS_NOTE = (
    "NOT PRIVATE: computed from the raw records without noise, for the operator's "
    "checks only; never publish it or put it beside the release"
)


@dataclass(frozen=True)
class Computed:
    """A release: its noisy tables, its privacy report (config, public domains and DP outputs
    only) and, apart, the raw diagnostics that go to the operator alone, when asked for."""

    tables: dict  # name -> pandas DataFrame of noisy outputs
    report: dict
    items: ItemDomain | None
    diagnostics: dict = field(default_factory=dict)  # NOT private: see diagnostics_of


def diagnostics_of(report: dict, diagnostics: dict) -> dict:
    """The operator's diagnostics file: the NOT-private figures, headed by the note and the
    release's algorithm and creation time so that it can be matched to its report."""
    return {"note": DIAGNOSTICS_NOTE, "algorithm": report["algorithm"]["name"],
            "created_utc": report["created_utc"], **diagnostics}


def compute(family: Family, params: Any, records, domains: Domains, epsilon: Fraction, split: dict[str, Fraction],
            seed: int | None, source: dict, progress: Callable[[str], None], limits: Guards = Guards(),
            execution: Execution = Execution(), accounting: Accounting = PURE) -> Computed:
    """Run ``family`` on ``records`` (our standard columns, not yet validated) and build the
    report. ``source`` is the report's description of where the records came from; the guards
    (``limits``) may refuse the run from noisy coverage figures, before the algorithm's noise
    (release.guards);
    ``execution`` says which tables are released on the executors; ``accounting`` whether the
    budget is pure ε (``epsilon``) or ρ-zCDP (``accounting.rho``; ``epsilon`` is then what it is
    stated as)."""
    limits.check_family(family.name, params.algorithm)
    check_domain_fits(family, params, domains, execution)
    budget = Budget(epsilon, family.delta(params), unit=family.privacy_unit(params, records),
                    fixed_seed=seed is not None, condition=guards.STRICT_CONDITION if limits.strict else "",
                    accounting=accounting)
    inputs = RunInputs(records, domains, split, budget, RandomSource(seed), seed, progress, limits, execution)
    # The expected error is a function of the config alone: worked out before any noise is drawn,
    # so that a failure there cannot come after the budget is spent.
    planned = planned_accuracy(family, params, epsilon, domains, split)
    expected = accuracy_section(family, params, epsilon, domains, split, accounting=accounting)
    for warning in expected.get("warnings", []):
        progress(f"WARNING: {warning}")
    output = family.run(params, inputs)
    if not budget.private:
        progress(family.not_private_warning)
    resolved = family.with_chosen(params, output.chosen) if output.chosen and family.with_chosen else None
    if resolved is not None:
        # A bound chosen privately is a DP output: the noise it implies is post-processing of it.
        planned, expected = chosen_accuracy(family, *resolved, epsilon, domains, split)
    # Post-processing of the release's DP figures: refused (nothing written) when they are noise alone.
    noise_only_section = noise_only.decide(
        noise_only.figures(output.bounding, _kept_scale(budget), noise_only.table_totals(output.tables, planned)),
        limits.refuse_noise_only)
    if noise_only_section is not None:
        output = replace(output, guards={**(output.guards or {}), noise_only.KEY: noise_only_section})
    output = replace(output, tables=with_halfwidth_columns(output.tables, planned))
    domains = output.domains or domains  # items selected privately are a DP output, public from here on
    report = build_report(family, params, budget, domains, split, output, seed, source, expected)
    return Computed(output.tables, report, domains.items, diagnostics_of(report, output.diagnostics))


def _kept_scale(budget: Budget) -> float | None:
    """The noise scale of the counts' records kept (ledger step "bounding: kept"), None without it."""
    scales = [entry.noise_scale for entry in budget.entries if entry.step == bounding_estimate.KEPT_STEP]
    return float(scales[0]) if scales else None


def planned_accuracy(family: Family, params: Any, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
                     alpha: float = accuracy.DEFAULT_ALPHA) -> dict[str, dict[str, accuracy.Accuracy]]:
    """{table: {column: Accuracy}}: the expected error of every released column, from the
    parameters and the public domains only (what ``dp-spark plan`` prints before any run)."""
    return family.accuracy(params, epsilon, domains, split, alpha) if family.accuracy else {}


def accuracy_section(family: Family, params: Any, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
                     alpha: float = accuracy.DEFAULT_ALPHA, accounting: Accounting = PURE) -> dict:
    """privacy.json's ``accuracy``: public, like the ledger (a function of the config and domains)."""
    section = {**section_of(planned_accuracy(family, params, epsilon, domains, split, alpha), alpha),
               **_warnings(family, params, split, alpha)}
    if not family.bounding:
        return section
    return {**section, "bounding": family.bounding(params, split, alpha, accounting.zcdp)}


def _warnings(family: Family, params: Any, split: dict[str, Fraction], alpha: float) -> dict:
    """accuracy.warnings, when the family has any for these parameters (public: config only)."""
    warnings = family.warnings(params, split, alpha)
    return {"warnings": list(warnings)} if warnings else {}


def section_of(planned: dict[str, dict[str, accuracy.Accuracy]], alpha: float = accuracy.DEFAULT_ALPHA) -> dict:
    return {"alpha": alpha, "caveat": accuracy.CAVEAT,
            "tables": {table: {column: noise.to_json() for column, noise in columns.items()}
                       for table, columns in planned.items()}}


def chosen_accuracy(family: Family, params: Any, chosen: dict, epsilon: Fraction, domains: Domains,
                    split: dict[str, Fraction]) -> tuple[dict, dict]:
    """The accuracy at a privately chosen parameter (``params`` with it put in): the planned
    accuracy and privacy.json's section, each column's note saying what it was worked out at."""
    said = ", ".join(f"{name} = {value}" for name, value in chosen.items())
    note = f"at the privately chosen {said}"
    planned = {table: {column: replace(noise, note="; ".join(filter(None, [noise.note, note])))
                       for column, noise in columns.items()}
               for table, columns in planned_accuracy(family, params, epsilon, domains, split).items()}
    return planned, {**section_of(planned), **_warnings(family, params, split, accuracy.DEFAULT_ALPHA)}


def halfwidth_column(column: str, columns: dict) -> str:
    """The name of the column holding ``column``'s 95% half-width: ``ci95_halfwidth`` when the
    table has one noisy column, ``<column>_ci95_halfwidth`` when it has several."""
    return "ci95_halfwidth" if len(columns) == 1 else f"{column}_ci95_halfwidth"


def with_halfwidth_columns(tables: dict[str, Any], planned: dict[str, dict[str, accuracy.Accuracy]]) -> dict:
    """The tables (pandas, or Spark DataFrames released on the executors) with a constant 95%
    half-width column beside each noisy column whose noise is exactly known before the run (kind
    "exact"); the others are left as they are."""
    out = dict(tables)
    for table, columns in planned.items():
        frame = tables.get(table)
        if frame is None or not hasattr(frame, "columns"):
            continue
        exact = {c: noise for c, noise in columns.items() if noise.kind == accuracy.EXACT and c in frame.columns}
        if not exact:
            continue
        widths = {halfwidth_column(c, columns): noise.ci95_halfwidth for c, noise in exact.items()}
        if isinstance(frame, pd.DataFrame):
            out[table] = frame.assign(**widths)
        else:
            out[table] = frame.withColumns({name: F.lit(float(width)) for name, width in widths.items()})
    return out


def _samplers(budget: Budget) -> str:
    """The report's sampler: the exact discrete Laplace, and the exact discrete Gaussian where the
    ledger has Gaussian steps (both Canonne, Kamath, Steinke 2020)."""
    gaussian = [entry.step for entry in budget.entries if entry.gaussian]
    if not gaussian:
        return "exact discrete Laplace (Canonne, Kamath, Steinke 2020)"
    laplace = len(gaussian) < len(budget.entries)
    return ("exact discrete Gaussian (Canonne, Kamath, Steinke 2020, Algorithm 3) for " + ", ".join(gaussian)
            + ("; exact discrete Laplace (their Algorithm 2) for the other steps" if laplace else ""))


def build_report(family: Family, params: Any, budget: Budget, domains: Domains, split: dict[str, Fraction],
                 output: FamilyOutput, seed: int | None, source: dict, expected: dict) -> dict:
    """privacy.json: depends only on the parameters, the public domains and the noisy outputs
    (``expected``: the accuracy section). The raw diagnostics are not part of it (Computed)."""
    section = family.report_section(params)
    items, attributes = domains.items, domains.attributes
    tables = output.tables
    algorithm = {
        "name": params.algorithm,
        "parameters": section["parameters"],
        "epsilon_split": {k: float(v) for k, v in split.items()},
        # Under zCDP each part is a share of rho, handed out as the epsilon of a pure step of that cost
        # (a private choice, bounded range, runs at twice it for the same rho: its ledger entry says).
        **({"rho_split": {k: float(zcdp.pure_cost(v)) for k, v in split.items()}} if budget.zcdp else {}),
        "specification": section["specification"],
        "post_processing": section["post_processing"],
        "publisher": section["publisher"],
    }
    algorithm.update({k: v for k, v in section.items() if k not in algorithm})  # e.g. FRAPP's RAN-GD note
    if output.chosen is not None:
        algorithm["chosen"] = output.chosen
    algorithm.update(output.algorithm_extra)
    rows = output.rows or {}
    noise = family.noise_section(params, seed) if family.noise_section else {
        "sampler": _samplers(budget),
        **family.extra_noise(params),
        "randomness": "fixed seed: reproducible, not for publication" if seed is not None else "OS CSPRNG",
    }
    noise.update(output.noise_extra)
    domain = family.domain_section(params, domains) if family.domain_section else {
        "items": items.description,
        **({"items_public_by_assertion": items.public_by_assertion} if items.public_by_assertion else {}),
        "item_count": len(items),
        **({"catalogue": items.catalogue} if items.catalogue else {}),
        "attributes": list(attributes.values) if attributes else None,
        **family.extra_domain(params),
    }
    return {
        "dp_spark_version": __version__,
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "algorithm": algorithm,
        **budget.to_json(),
        "noise": noise,
        "source": source,
        "domain": domain,
        # The number of rows is public: each table has one row per public domain value, and
        # FRAPP's perturbed records are as many as its records (its N, published exactly).
        # accuracy_section, worked out before the run; what bounding removed is a DP output of the run.
        "accuracy": {**expected, "bounding": output.bounding} if output.bounding is not None else expected,
        "outputs": {name: {"rows": rows.get(name, len(frame) if isinstance(frame, pd.DataFrame) else None),
                           "columns": list(frame.columns)} for name, frame in tables.items()},
        # The guards' limits (config) and the noisy figures they decided on (DP outputs).
        **({"guards": output.guards} if output.guards is not None else {}),
    }
