"""Sums and means of a value per item, and per item x attribute value.

Bound: each user keeps at most ``l`` records (SRA's uniform sample, or HPA's most popular by a
noisy popularity; with l = "auto" l is chosen privately first, by the means' own quality over
what the bound keeps, HPA's popularity drawn before it: means_choice.choose_l), and with
``records_per_item`` at most c of them per item.
Aggregate: per cell, the kept records and the sum of their values clipped to the public [low,
high] and centred (aggregates.value_sums). Publish: noisy counts at L1 l and noisy centred sums at
L1 l·(high − low)/2, Laplace or (zCDP) Gaussian; the sums and means are post-processing of the two
(release.sum_tables). Claim and argument: docs/value_sums.md, "Privacy claim: value_sums, means".

Here: the release's steps in order. The parameters and the budget's split are in means_params, the
private choices of l and the range in means_choice, what the report says in means_report.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from dp_spark.aggregates.value_sums import COUNT, SUM, bounded_sums, cell_tally
from dp_spark.bounding import keys, user_records
from dp_spark.core.progress import diagnostic
from dp_spark.families.means import on_executors as executor_means
from dp_spark.families.means.choice import choose_clip_range, choose_l, with_chosen
from dp_spark.families.means.params import (
    EDGE_TABLE,
    ITEM_TABLE,
    ZCDP_BOUND_SHARE,
    MeansParams,
    budget_split,
    from_config,
    output_rows,
    table_pair,
)
from dp_spark.families.means.report import describe, report_section, table_accuracy
from dp_spark.io.validation import check_schema, check_value_schema, validate_records
from dp_spark.publishers.executor_laplace import CellGrid
from dp_spark.release import bounding_estimate, guards
from dp_spark.release import on_executors as executor_path
from dp_spark.release import sum_tables as publishing
from dp_spark.release.family import Domains, Family, FamilyOutput, RunInputs
from dp_spark.release.hpa_selection import Popularity, hpa_selection, noisy_popularity
from dp_spark.release.private_keys import NOTHING_SELECTED, selected_items


def run(params: MeansParams, inputs: RunInputs) -> FamilyOutput:
    if not params.private_items:
        return _summed(params, inputs)
    selection = selected_items(inputs, params.keys_per_user, params.delta)
    inputs = replace(inputs, domains=replace(inputs.domains, items=selection.domain))
    if len(selection.domain):
        output = _summed(params, inputs)
    else:  # nothing more is spent
        inputs.progress(NOTHING_SELECTED)
        output = FamilyOutput(_empty_tables(inputs.domains), {})
    return replace(output, domains=inputs.domains, chosen={**(output.chosen or {}),
                                                           "items_selected": len(selection.domain)},
                   diagnostics={**output.diagnostics, "partition_selection": selection.diagnostics})


def _popularity(params: MeansParams, inputs: RunInputs, validated) -> Popularity:
    """HPA's noisy popularity (ledger step "popularity"), from the validated records."""
    return noisy_popularity(validated.records, inputs.domains.items, params.d, inputs.split["epsilon_popularity"],
                            inputs.budget, inputs.rng, inputs.seed, validated.user_counts, validated.users_by_n,
                            validated.one_per_user)


def _empty_tables(domains: Domains) -> dict[str, pd.DataFrame]:
    """The release's tables with their columns and no row (no item was selected), so that they
    are written as an empty release's are."""
    columns = {name: pd.array([], dtype="Float64") if name.startswith("mean") else np.zeros(0, dtype=np.int64)
               for name in ("noisy_count", "noisy_sum", "mean", "mean_low", "mean_high")}
    columns["noisy_sum"] = np.zeros(0)
    tables = {ITEM_TABLE: pd.DataFrame({"item_id": domains.items.ids, **columns})}
    if domains.attributes is not None:
        tables[EDGE_TABLE] = pd.DataFrame({"item_id": domains.items.ids, "attr": pd.Series([], dtype=object),
                                           **columns})
    return tables


def _summed(params: MeansParams, inputs: RunInputs) -> FamilyOutput:
    """Bound, sum and publish over the (public or privately selected) item domain."""
    items, attributes = inputs.domains.items, inputs.domains.attributes
    hpa = params.bounding == "hpa"
    # One record per user, drawn in the validation pass: HPA's popularity sample (d = 1), and the
    # value the clipping range is chosen from. The same salt as SRA's selection, which the choice
    # may share: each step is DP given any salt (docs/value_sums.md, "Choosing the clipping range").
    sampled = (hpa and params.d == 1) or params.clip_auto
    validated = validate_records(inputs.records, items, attributes, value=True, strict=inputs.guards.strict,
                                 progress=inputs.progress, sample_value=params.clip_auto,
                                 one_per_user_salt=keys.sample_salt(inputs.seed) if sampled else None)
    try:
        # HPA's l = "auto" scores what HPA keeps, ranked by its popularity: drawn first then.
        popularity = _popularity(params, inputs, validated) if hpa and params.auto else None
        # Chosen before the guards look, as the counts' l (docs/bound_selection.md, "Guards").
        params, chosen = choose_l(params, inputs, validated, popularity)
        params, chosen = choose_clip_range(params, inputs, validated, chosen)
        # The per-item cap may keep fewer: rows_after_bounding, in the diagnostics, is exact.
        coverage, decided = guards.check_bounded(inputs, validated, params.l, params.private_items)
        inputs.progress("records read; bounding and summing")
        # A function of the config and the public domains (items selected privately are a DP output).
        on_executors = executor_path.reaches_threshold(inputs.domains, inputs.execution)
        diagnostic(inputs.progress, f"{validated.diagnostics['rows_read']:,} records read")
        extra = {}
        if hpa:
            if popularity is None:  # a fixed l: drawn here, after the guards, as always
                popularity = _popularity(params, inputs, validated)
            extra["rows_in_popularity_sample"] = popularity.sample_rows
            selection = hpa_selection(validated.records, items, params.l, popularity, inputs.seed,
                                      validated.user_counts, validated.users_by_n)
        else:
            selection = user_records.sample_selection(validated.records, params.l, inputs.seed,
                                                      counts=validated.user_counts, users_by_n=validated.users_by_n)
        # A cap of c ≥ l keeps every kept record (a chosen l can be below the configured c).
        cap = params.records_per_item if params.records_per_item and params.records_per_item < params.l else None
        if on_executors:
            inputs.progress(executor_path.said(inputs.domains, inputs.execution))
            # Checkpointed: both tables are made from the same tally, and a retried task reads the same
            # counts (a lost executor fails the write rather than tally again: docs/executor_noise.md).
            tally = cell_tally(selection, items, "value", params.clip, attributes, cap).localCheckpoint(eager=True)
            kept_rows = (user_records.capped_total(validated.users_by_n, params.l) if cap is None
                         else int(tally.agg(F.sum(COUNT)).first()[0] or 0))
        else:
            item_sums, edge_sums = bounded_sums(selection, items, "value", params.clip, attributes, cap)
            kept_rows = int(item_sums.counts.sum())
    finally:
        validated.release()
    diagnostics = {**validated.diagnostics, "rows_after_bounding": kept_rows, **extra, "coverage": coverage.to_json()}
    if on_executors:
        tables = _tables_on_executors(params, inputs, tally)
        return FamilyOutput(tables, diagnostics, guards=decided, chosen=chosen,
                            bounding=_bounding_estimate(params, inputs, validated.users_by_n),
                            **executor_path.executor_output(output_rows(params, inputs.domains), inputs.seed))
    alpha = params.interval_alpha
    tables = {ITEM_TABLE: pd.DataFrame({"item_id": items.ids, **publishing.nullable_means(
        publishing.publish_means(item_sums, table_pair(params, inputs.split, ITEM_TABLE), inputs.budget, inputs.rng,
                                 alpha))})}
    if attributes is not None:
        h = len(attributes)
        tables[EDGE_TABLE] = pd.DataFrame({"item_id": items.ids.repeat(h), "attr": list(attributes.values) * len(items),
                                           **publishing.nullable_means(publishing.publish_means(
                                               edge_sums, table_pair(params, inputs.split, EDGE_TABLE), inputs.budget,
                                               inputs.rng, alpha))})
    return FamilyOutput(tables, diagnostics, guards=decided, chosen=chosen,
                        bounding=_bounding_estimate(params, inputs, validated.users_by_n))


def _bounding_plan(l: int, split: dict[str, Fraction], zcdp: bool) -> bounding_estimate.BoundingPlan:
    return bounding_estimate.BoundingPlan(l, split["epsilon_bounding"], zcdp, about=bounding_estimate.MEANS)


def _bounding_estimate(params: MeansParams, inputs: RunInputs, users_by_n: pd.Series) -> dict:
    """After the tables: the DP estimate of what bounding at l removed, from validation's per-user
    counts (release.bounding_estimate), paid from its own part of ε."""
    return bounding_estimate.estimate(users_by_n, _bounding_plan(params.l, inputs.split, inputs.budget.zcdp),
                                      inputs.budget, inputs.rng)


def _planned_bounding(params: MeansParams, split: dict[str, Fraction], alpha: float, zcdp: bool) -> dict:
    """accuracy.bounding before the run (with "auto": at the largest candidate, an upper bound)."""
    return bounding_estimate.planned_section(_bounding_plan(params.largest_bound, split, zcdp), alpha,
                                             chosen_later=params.auto)


def _tables_on_executors(params: MeansParams, inputs: RunInputs, tally) -> dict[str, Any]:
    """The tables as Spark DataFrames, their noise drawn on the executors (families.means.on_executors),
    from the checkpointed tally of DataFrame[_cell, _count, _sum] by item × attribute cell; the item
    table's tally is that tally summed per item. Spent as the driver's path spends: items, then edges."""
    items, attributes = inputs.domains.items, inputs.domains.attributes
    secret, s = executor_path.noise_secret(inputs.seed), params.sensitivity_at(params.l)
    h = len(attributes) if attributes else 1
    item_tally = tally if h == 1 else tally.groupBy(F.expr(f"_cell div {h}").alias("_cell")).agg(
        F.sum(COUNT).alias(COUNT), F.sum(SUM).alias(SUM))
    alpha = params.interval_alpha
    tables = {ITEM_TABLE: executor_means.publish_means(item_tally, CellGrid(items), s, params.clip,
                                                       table_pair(params, inputs.split, ITEM_TABLE), inputs.budget,
                                                       secret, alpha)}
    if attributes is not None:
        tables[EDGE_TABLE] = executor_means.publish_means(tally, CellGrid(items, attributes), s, params.clip,
                                                          table_pair(params, inputs.split, EDGE_TABLE), inputs.budget,
                                                          secret, alpha)
    return tables


def _check_schema(params: MeansParams, records, domains: Domains) -> None:
    check_schema(records, domains.items, params.private_items, domains.attributes)
    check_value_schema(records)


def _beyond_the_driver(params: MeansParams, domains: Domains, execution) -> bool:
    """No value per item on the driver: SRA's bounding (HPA's popularity is drawn there) over a
    public domain, released on the executors."""
    return params.bounding == "sra" and not params.private_items and executor_path.reaches_threshold(domains, execution)


FAMILY = Family(name="means", algorithms=("means",), params_type=MeansParams, default_split=budget_split,
                zcdp_shares=lambda params, domains: budget_split(params, Fraction(1), domains, ZCDP_BOUND_SHARE),
                split_keys=lambda params, domains: tuple(budget_split(params, Fraction(1), domains)), run=run,
                describe=describe, report_section=report_section, from_config=from_config, accuracy=table_accuracy,
                config_keys=("bounding", "low", "high", "records_per_item", "l_candidates", "l_objective",
                             "clip_candidates", "keys_per_user", "confidence"),
                reads="valued_records", with_chosen=with_chosen, bounding=_planned_bounding,
                takes_gaussian=True, check_schema=_check_schema, output_rows=output_rows,
                delta=lambda params: params.delta, beyond_the_driver=_beyond_the_driver)
