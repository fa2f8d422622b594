"""Item and item x attribute counts: SRA, HPA and paper 000's baselines LPA, DFT and GS.

Bound: each user keeps at most ``l`` records (a uniform sample, or HPA's most popular).
Aggregate: counts per item and per (item, attribute). Publish: the chosen publisher at L1
sensitivity ``l``. Claim and argument: docs/sra_hpa.md and docs/privacy.md.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dp_spark.bounding import keys
from dp_spark.core import accuracy, noise_choice
from dp_spark.core.accounting import Noise
from dp_spark.core.accuracy import POST_PROCESSED, UPPER_BOUND
from dp_spark.core.discrete_gaussian import variance_at_least
from dp_spark.core.progress import diagnostic
from dp_spark.errors import ConfigError
from dp_spark.families.counts import bound_choice, sampling
from dp_spark.families.counts.params import ALGORITHMS, BASELINE_PUBLISHERS, ESTIMATED, CountsParams  # noqa: F401
from dp_spark.families.counts.sampling import gaussian_tables, l2_squared  # noqa: F401 (read from here too)
from dp_spark.io.validation import check_schema, validate_records
from dp_spark.publishers.options import publisher_choice
from dp_spark.release import bound_objective, bound_selection, bounding_estimate, guards
from dp_spark.release import on_executors as executor_path
from dp_spark.release.auto_bound import AUTO, AUTO_NOTE
from dp_spark.release.family import (
    ConfigTables,
    Domains,
    Execution,
    Family,
    FamilyOutput,
    RunInputs,
    require,
    rows_per_user,
)

# DEFAULT_KEYS_PER_USER and PARTITION_SHARE are read from here too (tests, bench/bound_selection.py).
from dp_spark.release.private_keys import (  # noqa: F401
    DEFAULT_KEYS_PER_USER,
    NOTHING_SELECTED,
    PARTITION_SHARE,
    PRIVATE_ITEMS,
    SelectedItems,
    checked_private_items,
    items_text,
    partition_delta,
    selected_items,
)
from dp_spark.release.publisher_accuracy import publisher_accuracy


def _split(params: CountsParams, epsilon: Fraction, domains: Domains) -> dict[str, Fraction]:
    """The papers' split; with private items, half of ε first selects them, with "auto" a tenth
    of ε chooses the bound, and a twentieth estimates what bounding removed; the papers' split
    shares the rest."""
    with_edges = domains.attributes is not None
    first = {}
    if params.private_items:  # half of ε selects the items, as PipelineDP shares it with one metric
        first["epsilon_partition"] = epsilon * PARTITION_SHARE
    if params.auto:
        first["epsilon_bound"] = epsilon * bound_selection.DEFAULT_SHARE
    first["epsilon_bounding"] = epsilon * bounding_estimate.SHARE
    return {**first, **sampling.default_split(params.algorithm, epsilon - sum(first.values(), Fraction(0)), with_edges)}


def _split_keys(params: CountsParams, domains: Domains) -> tuple[str, ...]:
    return tuple(_split(params, Fraction(1), domains))


def _popularity_salt(params: CountsParams, seed: int | None) -> int | None:
    """For HPA with d = 1, the salt of its popularity sample, which validation then draws in its
    own pass (the sampler's salt, so a seeded run keeps the same records as without this)."""
    return keys.sample_salt(seed) if params.algorithm == "hpa" and params.d == 1 else None


def tables_of(release: sampling.CountsRelease | sampling.ExecutorCounts, domains: Domains) -> dict[str, Any]:
    """The release's tables: pandas from the driver, Spark DataFrames from the executors."""
    items, attributes = domains.items, domains.attributes
    if isinstance(release, sampling.ExecutorCounts):
        tables = {"item_counts": release.item_counts}
        return tables if release.edge_counts is None else {**tables, "edge_counts": release.edge_counts}
    tables = {"item_counts": pd.DataFrame({"item_id": items.ids, "noisy_count": release.item_counts})}
    if attributes:
        h = len(attributes)
        tables["edge_counts"] = pd.DataFrame({
            "item_id": items.ids.repeat(h),
            "attr": list(attributes.values) * len(items),
            "noisy_count": release.edge_counts.reshape(-1),
        })
    return tables


def run(params: CountsParams, inputs: RunInputs) -> FamilyOutput:
    if params.consistent and inputs.domains.attributes is None:
        raise ConfigError("algorithm.consistent needs edge counts: set domain.attributes")
    selection = None
    if params.private_items:
        selection = selected_items(inputs, params.keys_per_user, params.delta)
        inputs = replace(inputs, domains=replace(inputs.domains, items=selection.domain))
        if not len(selection.domain):
            return _nothing_selected(inputs, selection)
    output = _counted(params, inputs)
    if selection is None:
        return output
    chosen = {**(output.chosen or {}), "items_selected": len(selection.domain)}
    return replace(output, domains=inputs.domains, chosen=chosen,
                   diagnostics={**output.diagnostics, "partition_selection": selection.diagnostics})


def _counted(params: CountsParams, inputs: RunInputs) -> FamilyOutput:
    """Bound, count and publish over the (public or privately selected) item domain."""
    items, attributes = inputs.domains.items, inputs.domains.attributes
    validated = validate_records(inputs.records, items, attributes,
                                 one_per_user_salt=_popularity_salt(params, inputs.seed),
                                 strict=inputs.guards.strict, progress=inputs.progress)
    try:
        # HPA's choice of l scores the records HPA drops, which follow its noisy popularity: drawn
        # first. With a fixed l the popularity stays after the guards, where it always was.
        popularity = _popularity(params, inputs, validated) if params.algorithm == "hpa" and params.auto else None
        l, chosen = bound_choice.chosen_bound(params, inputs, validated, popularity)
        # Everything the guards need is known from validation's pass: each user keeps min(n, l).
        # Before the counts' noise (after the choice of l and the items', when those are private,
        # and HPA's popularity with l = "auto": docs/bound_selection.md, "Guards").
        coverage, decided = guards.check_bounded(inputs, validated, l, params.private_items, params.bound_name)
        inputs.progress("records read; bounding and counting")
        diagnostic(inputs.progress, f"{validated.diagnostics['rows_read']:,} records read")
        on_executors = _on_executors(params, inputs.domains, inputs.execution)
        if on_executors:
            inputs.progress(executor_path.said(inputs.domains, inputs.execution))
        gaussian = gaussian_tables(params, l, inputs.split, attributes is not None)
        common = dict(items=items, attributes=attributes, l=l, epsilons=inputs.split, budget=inputs.budget,
                      rng=inputs.rng, seed=inputs.seed, user_counts=validated.user_counts,
                      users_by_n=validated.users_by_n,
                      publisher=sampling.Publisher(params.publisher, dict(params.publisher_options), gaussian,
                                                   params.records_per_item),
                      on_executors=executor_path.noise_secret(inputs.seed) if on_executors else None)
        if params.algorithm != "hpa":
            release = sampling.sra(validated.records, **common)
        else:
            release = sampling.hpa(validated.records, d=params.d, one_per_user=validated.one_per_user,
                                   popularity=popularity, **common)
    finally:
        validated.release()
    if params.consistent:
        release = sampling.made_consistent(release, l, inputs.split, gaussian)
    # From validation's per-user counts (no pass of its own): what bounding at l removed.
    removed = bounding_estimate.estimate(validated.users_by_n, _bounding_plan(l, inputs.split, inputs.budget.zcdp),
                                         inputs.budget, inputs.rng)
    warning = bounding_estimate.noise_warning(removed, _halfwidths(params, l, inputs.domains, inputs.split))
    if warning:
        inputs.progress(f"WARNING: {warning}")
        removed = {**removed, "warning": warning}
    return FamilyOutput(tables_of(release, inputs.domains), {**validated.diagnostics, **release.diagnostics,
                                                             "coverage": coverage.to_json()}, chosen=chosen,
                        guards=decided, bounding=removed,
                        **(executor_path.executor_output(_output_rows(params, inputs.domains), inputs.seed)
                           if on_executors else {}))


def _popularity(params: CountsParams, inputs: RunInputs, validated) -> sampling.Popularity:
    """HPA's noisy popularity (ledger step "popularity"), from validation's records and sample."""
    return sampling.noisy_popularity(validated.records, inputs.domains.items, params.d,
                                     inputs.split["epsilon_popularity"], inputs.budget, inputs.rng, inputs.seed,
                                     validated.user_counts, validated.users_by_n, validated.one_per_user)


def _on_executors(params: CountsParams, domains: Domains, execution: Execution) -> bool:
    """Whether the tables are released on the executors: the laplace publisher only (the others
    need every count at once, and so does making items and edges consistent), and only when the
    largest table reaches execution.executor_noise_cells. A function of the config and the
    public domains (items selected privately are a DP output)."""
    if params.publisher != "laplace" or params.publisher_options or params.consistent:
        return False
    return executor_path.reaches_threshold(domains, execution)


def _nothing_selected(inputs: RunInputs, selection: SelectedItems) -> FamilyOutput:
    """No item had enough users to be released: empty tables, and nothing more is spent."""
    inputs.progress(NOTHING_SELECTED)
    empty = sampling.CountsRelease(np.zeros(0, dtype=np.int64), None if inputs.domains.attributes is None
                                   else np.zeros((0, len(inputs.domains.attributes)), dtype=np.int64))
    return FamilyOutput(tables_of(empty, inputs.domains), {"partition_selection": selection.diagnostics},
                        chosen={"items_selected": 0}, domains=inputs.domains,
                        bounding={"note": "no item was selected: nothing was counted, and no estimate was drawn"})


def _describe(params: CountsParams, epsilon: Fraction, domains: Domains) -> str:
    how = (f"by its estimated error from {params.candidates[0]} to {params.candidates[-1]}"
           if params.choice == "estimate" else f"from {list(params.candidates)}") if params.auto else ""
    bound = (f"auto (chosen privately {how}, scoring {bound_objective.described(params.objective)})"
             if params.auto else params.l)
    items = items_text(params.private_items, params.delta, params.keys_per_user, domains.items)
    # Gaussian noise replaces the laplace publisher's, so the description names the noise instead.
    noise = noise_choice.described(params.noise, params.records_per_item) or f"publisher {params.publisher}"
    return (f"{params.algorithm.upper()} with epsilon {float(epsilon):g}, {params.bound_name} = {bound}, "
            f"{noise}; {items}"
            + (f" x {len(domains.attributes)} attribute values" if domains.attributes else ""))


def _report_section(params: CountsParams) -> dict:
    selection = {f"{params.bound_name}_candidates": list(params.candidates),
                 f"{params.bound_name}_objective": bound_objective.to_json(params.objective),
                 **({"l_choice": params.choice} if params.choice != "exponential" else {}),
                 "quality": "docs/bound_selection.md"} if params.auto else {}
    private = {"items": PRIVATE_ITEMS, "keys_per_user": params.keys_per_user, "delta": params.delta,
               "partition_selection": "docs/partition_selection.md"} if params.private_items else {}
    gaussian = {"noise": params.noise, **({"records_per_item": params.records_per_item}
                                          if params.records_per_item else {})} if params.noise != Noise.LAPLACE else {}
    return {
        "parameters": {params.bound_name: params.l, **selection, **private, **gaussian,
                       **({"d": params.d} if params.algorithm == "hpa" else {})},
        "specification": sampling.SPEC_SECTIONS[params.algorithm],
        "post_processing": ("item and edge counts made consistent and non-negative (weighted least squares; no "
                            "budget)") if params.consistent else None,
        "publisher": {"name": params.publisher, **{k: v if isinstance(v, (bool, int)) else float(v)
                                                   for k, v in params.publisher_options.items()}},
    }


CONSISTENT_NOTE = ("then made consistent and non-negative by weighted least squares (post-processing): these "
                   "are the numbers of the noise before that step, which moves every value; it uses the released "
                   "values only, but clipping at zero raises small counts, a bias not shown")


def _output_rows(params: CountsParams, domains: Domains) -> dict[str, int | None]:
    """A row per item, and per item and attribute value; items selected privately: as many as it selects."""
    items = None if domains.items is None else len(domains.items)
    rows = {"item_counts": items}
    if domains.attributes is not None:
        rows["edge_counts"] = None if items is None else items * len(domains.attributes)
    return rows


def _accuracy(params: CountsParams, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
              alpha: float) -> dict:
    """Each table's noisy_count: the publisher at L1 sensitivity l and its part of epsilon."""
    items = 0 if domains.items is None else len(domains.items)  # private items: unknown before the run (laplace only)
    tables = {}
    gaussian = gaussian_tables(params, params.largest_bound, split, domains.attributes is not None)
    attributes = None if domains.attributes is None else len(domains.attributes)
    for table, (part_name, count) in sampling.count_tables(items, attributes).items():
        part = split[part_name]
        if table in gaussian:
            noise = accuracy.discrete_gaussian(variance_at_least(Fraction(gaussian[table]) / part ** 2), alpha)
        else:
            noise = publisher_accuracy(params.publisher, params.publisher_options, params.largest_bound, part, count,
                                       alpha)
        if params.auto and noise.kind != POST_PROCESSED:
            noise = replace(noise, kind=UPPER_BOUND, note="; ".join(filter(None, [noise.note, AUTO_NOTE.format(
                name=params.bound_name, largest=params.largest_bound)])))
        if params.consistent:
            noise = replace(noise, kind=POST_PROCESSED, note="; ".join(filter(None, [noise.note, CONSISTENT_NOTE])))
        tables[table] = {"noisy_count": noise}
    return tables


def _bounding_plan(l: int, split: dict[str, Fraction], zcdp: bool) -> bounding_estimate.BoundingPlan:
    return bounding_estimate.BoundingPlan(l, split["epsilon_bounding"], zcdp)


def _halfwidths(params: CountsParams, l: int, domains: Domains, split: dict[str, Fraction]) -> dict[str, tuple]:
    """{table: (cells, the 95% half-width of its noise at bound l)} for the tables whose noise is
    that half-width (before any post-processing), not only at most it (GS, AHP: no claim of
    uselessness), from the config and the domains."""
    at_l = replace(params, l=l, candidates=None)
    tables = _accuracy(at_l, sum(split.values(), Fraction(0)), domains, split, accuracy.DEFAULT_ALPHA)
    cells = _output_rows(at_l, domains)
    return {table: (cells[table], columns["noisy_count"].ci95_halfwidth) for table, columns in tables.items()
            if columns["noisy_count"].kind in (accuracy.EXACT, POST_PROCESSED)}


def _bounding(params: CountsParams, split: dict[str, Fraction], alpha: float, zcdp: bool) -> dict:
    """accuracy.bounding before the run (with "auto": at the largest candidate, an upper bound)."""
    return bounding_estimate.planned_section(_bounding_plan(params.largest_bound, split, zcdp), alpha,
                                             chosen_later=params.auto)


def from_config(c: ConfigTables) -> CountsParams:
    name, algorithm, parts = c.name, c.algorithm, c.parts
    for key in ("epsilon_theta", "epsilon_counts"):
        if key in parts:
            raise ConfigError(f"privacy.{key} is a DPSense parameter; {name} does not use it")
    bound = "m" if name in BASELINE_PUBLISHERS else "l"
    other = "l" if bound == "m" else "m"
    if other in algorithm:
        raise ConfigError(f"algorithm.{other} is not used by {name}; its per-user bound is algorithm.{bound}")
    for key in (f"{other}_candidates", f"{other}_objective"):
        if key in algorithm:
            raise ConfigError(f"algorithm.{key} is not used by {name}; its per-user bound is algorithm.{bound}")
    l = require(algorithm, bound, "algorithm")
    if "l_choice" in algorithm and name not in ESTIMATED:
        raise ConfigError(f"algorithm.l_choice is SRA's and HPA's; {name} chooses its bound with the exponential "
                          "mechanism")
    if l != AUTO:
        l = rows_per_user(l, f"algorithm.{bound}")
        for key in (f"{bound}_objective", "l_choice"):
            if key in algorithm:
                raise ConfigError(f"algorithm.{key} is used only with {bound} = \"auto\"")
    d = rows_per_user(algorithm.get("d", 1), "algorithm.d")
    if name != "hpa" and "d" in algorithm:
        raise ConfigError(f"algorithm.d is an HPA parameter; {name} does not use it")
    if name != "hpa" and "epsilon_popularity" in parts:
        raise ConfigError(f"privacy.epsilon_popularity is an HPA parameter; {name} does not use it")
    publisher, options = publisher_choice(c.publisher, name, BASELINE_PUBLISHERS.get(name))
    consistent = algorithm.get("consistent", False)
    if not isinstance(consistent, bool):
        raise ConfigError(f"algorithm.consistent must be true or false, got {consistent!r}")
    if consistent and c.attributes is None:
        raise ConfigError("algorithm.consistent needs edge counts: set domain.attributes")
    if c.attributes is None and "epsilon_edges" in parts:
        raise ConfigError("privacy.epsilon_edges is set but domain.attributes is not: no edge counts to publish")
    private = c.domain.get("items") == PRIVATE_ITEMS
    zcdp = c.privacy.get("noise", "laplace") != "laplace" or "rho" in c.privacy
    if private and "delta" not in c.privacy:
        raise ConfigError(f"domain.items = \"{PRIVATE_ITEMS}\" needs privacy.delta (e.g. 1e-6): partition selection "
                          "spends it")
    params = CountsParams(name, l, d, publisher, options, consistent, algorithm.get(f"{bound}_candidates"),
                          private, algorithm.get("keys_per_user"),
                          partition_delta(c.privacy.get("delta", 0.0), zcdp) if private else 0.0,
                          c.privacy.get("noise", "laplace"),
                          algorithm.get("records_per_item"), algorithm.get(f"{bound}_objective"),
                          algorithm.get("l_choice"))
    bound_objective.check_tables(params.objective, c.attributes is not None)
    return params


def _with_chosen(params: CountsParams, chosen: dict) -> tuple[CountsParams, dict] | None:
    """The parameters at the privately chosen bound (the number of items selected does not change
    any cell's noise)."""
    if params.bound_name not in chosen:
        return None
    bound = chosen[params.bound_name]
    return replace(params, l=bound, candidates=None), {params.bound_name: bound}


FAMILY = Family(name="counts", algorithms=ALGORITHMS, params_type=CountsParams, default_split=_split,
                split_keys=_split_keys, run=run, describe=_describe, report_section=_report_section,
                from_config=from_config, accuracy=_accuracy, with_chosen=_with_chosen, bounding=_bounding,
                delta=lambda params: params.delta, beyond_the_driver=lambda params, domains, execution: (
                    params.algorithm != "hpa" and not params.private_items
                    and _on_executors(params, domains, execution)),
                config_keys=("keys_per_user", "l_candidates", "m_candidates", "records_per_item", "l_objective",
                             "m_objective", "l_choice"),
                takes_gaussian=True,
                check_schema=lambda params, records, domains: check_schema(records, domains.items,
                                                                           params.private_items, domains.attributes),
                output_rows=_output_rows)
