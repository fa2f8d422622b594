"""Metrics per group: count, distinct users, sum, mean, variance, standard deviation and quantiles
of one value, for every group of one or more key columns' public values, in one release.

Bound: each user keeps at most ``groups_per_user`` (l) of its groups, a uniform sample, and at most
``records_per_group`` (c) of its records in each (bounding.user_groups). Aggregate: per group, the
totals the metrics need and the histograms over the value's candidates (run.aggregate_table).
Publish: by histogram, one noisy histogram per group whose post-processing is every value metric;
by tables, each table with noise at its share and each quantile level by the exponential mechanism
at its share (params: the methods).
Claim and argument: docs/aggregate.md, "Privacy claim: aggregate".

Here: the family's entry (config, report, accuracy, plan). The parts are in params, metrics, keys,
noisy_totals, quantiles and run.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

from pyspark.sql import types as T

from dp_spark.core import noise_choice
from dp_spark.core.clip_range import DEFAULT_STEPS
from dp_spark.errors import ConfigError, DataError
from dp_spark.families.aggregate import (
    bound_choice,
    coverage,
    expected_error,
    histogram_metrics,
    noisy_totals,
    popular_groups,
    private_groups,
    quantiles,
    range_choice,
)
from dp_spark.families.aggregate.expected_error import CONFIDENCE
from dp_spark.families.aggregate.keys import PRIVATE, group_keys
from dp_spark.families.aggregate.metrics import metrics_of
from dp_spark.families.aggregate.noisy_totals import GroupBound
from dp_spark.families.aggregate.params import (
    AUTO,
    HISTOGRAM,
    HPA,
    SELECTION_STEP,
    SRA,
    AggregateParams,
    clip_of,
    quantile_step,
)
from dp_spark.families.aggregate.quantiles import Candidates
from dp_spark.families.aggregate.run import (
    GROUP,
    TABLE,
    VALUE,
    aggregate_table,
    draw_popularity,
    empty_table,
    in_groups,
    usable_records,
)
from dp_spark.io.validation import INTEGER_TYPES, NUMERIC_TYPES, analysed, user_values
from dp_spark.release import bound_selection, guards
from dp_spark.release.family import ConfigTables, Domains, Family, FamilyOutput, RunInputs, require
from dp_spark.release.private_keys import partition_delta

# The paper's names for the bound, taken as aliases of the users' words.
ALIASES = {"l": "groups_per_user", "c": "records_per_group", "l_candidates": "groups_per_user_candidates"}
CONFIG_KEYS = ("by", "metrics", "groups_per_user", "records_per_group", "low", "high", "candidates", "grid_steps",
               "method", "c", "keys_per_user", "bounding", "groups_per_user_candidates", "l_candidates",
               "clip_candidates", "weights")
# (Not d: the counts' HPA takes it as well, and a key listed here is refused for every other family.)


def aggregate_params(by: Any, keys: Any, metrics: Any, groups_per_user: Any, records_per_group: Any = 1,
                     low: Any = None, high: Any = None, candidates: Any = None, noise: str = "laplace",
                     grid_steps: int = DEFAULT_STEPS, method: str = AUTO, keys_per_user: Any = None,
                     delta: float = 0.0, bounding: str = SRA, d: Any = 1,
                     groups_per_user_candidates: Any = None, clip_candidates: Any = None,
                     weights: Any = None) -> AggregateParams:
    """The parameters from the words of the API and the config (module docstring), each checked.
    ``delta``: partition selection's, with key columns chosen privately (private_keys.partition_delta);
    ``groups_per_user = "auto"``: l chosen privately from ``groups_per_user_candidates`` (default
    bound_selection.DEFAULT_CANDIDATES)."""
    if not isinstance(keys, dict) or not keys:
        raise ConfigError("keys: give each key column's public values, or \"private\", e.g. "
                          "keys={\"movie\": range(1, 3953), \"gender\": [\"F\", \"M\"]}")
    keys = {_tuple_table_name(name): _tuple_table(name, spec) if isinstance(name, tuple) else spec
            for name, spec in keys.items()}
    bound_candidates = None
    if groups_per_user == AUTO:
        try:
            bound_candidates = tuple(int(b) for b in bound_selection.candidates_checked(
                groups_per_user_candidates or bound_selection.DEFAULT_CANDIDATES))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"groups_per_user_candidates: {e}") from None
        groups_per_user = bound_candidates[-1]
    elif groups_per_user_candidates is not None:
        raise ConfigError("groups_per_user_candidates are used only with groups_per_user = \"auto\"")
    try:
        bound = GroupBound(groups_per_user, records_per_group)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    clip = clip_of(low, high, grid_steps)
    choice = range_choice.range_choice(low, high, clip_candidates, grid_steps)
    if choice is None and clip_candidates is not None:
        raise ConfigError("clip_candidates are used only with low or high \"auto\"")
    if choice is not None and candidates is not None:
        raise ConfigError("candidates fix the values a value is rounded to, and so its range: give low and high with "
                          "them, or leave them out to have them made evenly over the chosen range")
    chosen = None
    if candidates is not None:
        try:
            chosen = Candidates(tuple(candidates))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"candidates: {e}") from None
    return AggregateParams(group_keys(by, {name: _domain_spec(spec) for name, spec in keys.items()}),
                           metrics_of(metrics), bound, clip, chosen, noise, method, keys_per_user, delta, bounding, d,
                           bound_candidates, choice, _weights(weights))


def _weights(weights: Any) -> tuple[tuple[str, Any], ...]:
    """The metric steps' weights as given: a table of step name -> weight (checked by the params)."""
    if weights is None:
        return ()
    if not isinstance(weights, dict) or not all(isinstance(step, str) for step in weights):
        raise ConfigError(f"weights must map ledger steps to weights, e.g. {{\"count\": 1, \"sum(stars)\": 3}}, got "
                          f"{weights!r}")
    return tuple(weights.items())


def _tuple_table_name(name: Any) -> str:
    """The API's keys={("city", "zip"): rows}: a table of key tuples, named by its columns."""
    return ",".join(name) if isinstance(name, tuple) else name


def _tuple_table(columns: tuple, spec: Any) -> dict[str, Any]:
    """The API's rows of key tuples, or the catalog table that holds them ({"table": ...})."""
    if isinstance(spec, dict) and "table" in spec:
        return {"columns": list(columns), **spec}
    return {"columns": list(columns), "rows": spec}


def _domain_spec(spec: Any) -> Any:
    """A key column's public values as an item domain's table: a range or list may be given bare."""
    if isinstance(spec, range):
        if spec.step != 1 or not len(spec):
            raise ConfigError(f"a key column's range must be consecutive and non-empty, got {spec!r}")
        return {"range": [spec.start, spec.stop - 1]}
    if isinstance(spec, (list, tuple)):
        return {"ids": list(spec)}
    return spec


def from_config(c: ConfigTables) -> AggregateParams:
    """[algorithm] name = "aggregate", by, metrics, groups_per_user (l), records_per_group (c), low,
    high, candidates, method; [domain.keys] one entry per key column."""
    if c.attributes is not None or "items" in c.domain:
        raise ConfigError("aggregate groups by the key columns of algorithm.by, with their public values in "
                          "[domain.keys]; domain.items and domain.attributes are for the counts and means")
    unknown = sorted(set(c.domain) - {"keys"})
    if unknown:
        raise ConfigError(f"domain.{unknown[0]} is not used by aggregate (its domain is [domain.keys])")
    if c.parts:
        raise ConfigError(f"privacy.{next(iter(c.parts))} is not used by aggregate: each ledger step (a noisy "
                          "table, a quantile level) gets an equal part of privacy.epsilon, or a part in proportion "
                          "to its weight in [algorithm.weights]")
    if c.publisher:
        raise ConfigError("[publisher] is not used by aggregate: its tables take discrete Laplace noise, or "
                          "discrete Gaussian under zCDP (privacy.noise)")
    algorithm = dict(c.algorithm)
    for alias, name in ALIASES.items():
        if alias in algorithm:
            if name in algorithm:
                raise ConfigError(f"algorithm.{alias} and algorithm.{name} are the same bound: give one")
            algorithm[name] = algorithm.pop(alias)
    keys = c.domain.get("keys")
    private = isinstance(keys, dict) and any(isinstance(spec, str) and spec == PRIVATE for spec in keys.values())
    if private and "delta" not in c.privacy:
        raise ConfigError(f"a key column chosen privately (\"{PRIVATE}\") needs privacy.delta (e.g. 1e-6): partition "
                          "selection spends it")
    zcdp = c.privacy.get("noise", "laplace") != "laplace" or "rho" in c.privacy
    return aggregate_params(require(algorithm, "by", "algorithm"), keys,
                            require(algorithm, "metrics", "algorithm"), require(algorithm, "groups_per_user",
                                                                                "algorithm"),
                            algorithm.get("records_per_group", 1), algorithm.get("low"), algorithm.get("high"),
                            algorithm.get("candidates"), c.privacy.get("noise", "laplace"),
                            algorithm.get("grid_steps", DEFAULT_STEPS), algorithm.get("method", AUTO),
                            algorithm.get("keys_per_user"),
                            partition_delta(c.privacy.get("delta", 0.0), zcdp) if private else 0.0,
                            algorithm.get("bounding", SRA), algorithm.get("d", 1),
                            algorithm.get("groups_per_user_candidates"), algorithm.get("clip_candidates"),
                            algorithm.get("weights"))


def _read_columns(params: AggregateParams) -> tuple[str, ...]:
    return (*params.keys.names, *([params.value] if params.value else []))


def _check_schema(params: AggregateParams, records, domains: Domains) -> None:
    """The user column's type (analysed by Spark, no record read), each key column's and the
    value's: a key of whole numbers is read from numbers or text, a key of strings from strings or
    whole numbers, a key of dates from dates, timestamps or text, a key chosen privately from whole
    numbers, text or dates, a value from numbers or text."""
    analysed(lambda: records.select(user_values(records)[1].alias("user_id")))
    fields = {f.name: f.dataType for f in records.schema.fields}
    for column in params.keys.columns:
        kind = fields[column.name]
        allowed, said = (((T.StringType, *INTEGER_TYPES), "strings") if column.domain.is_string else
                         ((T.StringType, T.DateType, T.TimestampType, T.TimestampNTZType), "dates") if column.dates
                         else ((T.StringType, *NUMERIC_TYPES), "whole numbers"))
        if not isinstance(kind, allowed):
            raise DataError(f"key column {column.name} has type {kind.simpleString()}; its public values are {said}")
    private_groups.kinds(records.schema, params.keys.tupled)  # a DataError for a type no such key can have
    if params.keys.tupled and not params.keys.private:
        private_groups.listed_typed(params.keys, records.schema)  # a ConfigError for a value no key there can be
    if params.value is not None and not isinstance(fields[params.value], (T.StringType, *NUMERIC_TYPES)):
        raise DataError(f"the value column {params.value} must hold numbers, got "
                        f"{fields[params.value].simpleString()}")


def run(params: AggregateParams, inputs: RunInputs) -> FamilyOutput:
    selection: dict = {}
    for said in params.keys.public_by_assertion():
        inputs.progress(f"WARNING: {said}")
    if params.keys.tupled and not params.keys.private:
        params = replace(params, keys=private_groups.listed_typed(params.keys, inputs.records.schema))
    if params.keys.private:
        params, selection = _selected(params, inputs)
        if not len(params.keys):  # nothing more is spent
            inputs.progress(NOTHING_SELECTED)
            return FamilyOutput({TABLE: empty_table(params)}, {"partition_selection": selection},
                                chosen={"groups_selected": 0})
    chosen = {"groups_selected": len(params.keys)} if params.keys.private else {}
    popularity = None
    if params.bound_candidates is not None and params.bounding == HPA:
        # HPA's choice scores the groups it keeps by this popularity, drawn first; the table's bound reuses it.
        inputs.progress("drawing the groups' noisy popularity")
        popularity = draw_popularity(inputs.records, params, inputs.split, inputs.budget, inputs.rng, inputs.seed)
    try:
        if params.bound_candidates is not None:
            candidates = list(params.bound_candidates)
            inputs.progress(f"choosing groups_per_user privately from {candidates}")
            params, bound = bound_choice.choose(in_groups(inputs.records, params), params, inputs.split, inputs.budget,
                                                inputs.rng, GROUP,
                                                ranks=None if popularity is None else popularity.ranks,
                                                alpha=1 - CONFIDENCE)
            inputs.progress(f"groups_per_user = {params.bound.groups_per_user}, chosen privately from {candidates}")
            chosen.update(bound)
        if params.range_choice is not None:
            params, picked = _range_chosen(params, inputs)
            chosen.update(picked)
        decided = _guarded(params, inputs)  # before the metrics' noise
    except BaseException:
        if popularity is not None:
            popularity.grouped.unpersist()
        raise
    inputs.progress("records read; bounding and aggregating")
    table, kept = aggregate_table(inputs.records, params, inputs.split, params.noise, inputs.budget, inputs.rng,
                                  inputs.seed, 1 - CONFIDENCE, popularity=popularity)
    diagnostics = {"rows_after_bounding": kept, **({"partition_selection": selection} if selection else {})}
    return FamilyOutput({TABLE: table}, diagnostics, chosen=chosen or None, guards=decided)


def _range_chosen(params: AggregateParams, inputs: RunInputs) -> tuple[AggregateParams, dict]:
    """The parameters at the value's range chosen privately, and what the report says of it."""
    assert params.range_choice is not None and params.value is not None
    inputs.progress(f"choosing the range of {params.value} privately from {len(params.range_choice.candidates)} "
                    "candidates")
    choice = range_choice.choose(in_groups(inputs.records, params), params.range_choice, GROUP, VALUE, inputs.split,
                                 inputs.budget, inputs.rng, inputs.seed)
    inputs.progress(f"{params.value}: clipping range [{choice.low:g}, {choice.high:g}], chosen privately")
    return range_choice.at_range(params, choice.low, choice.high), choice.to_json()


def _guarded(params: AggregateParams, inputs: RunInputs) -> dict | None:
    """The guards' decision on noisy figures (release.guards.check), and the coverage for an
    operator who asked for diagnostics: one pass per user, only when either is wanted."""
    if not inputs.guards.active and not getattr(inputs.progress, "diagnostics", False):
        return None
    figures, counted = coverage.counted(inputs.records, params)
    guards.tell(inputs.guards, counted, inputs.progress)
    return guards.check(inputs, figures, bound=counted.bound) if inputs.guards.active else None


# The progress line of a release whose selection kept no tuple of the private key columns.
NOTHING_SELECTED = ("WARNING: no group was selected; the table is empty (too few users per key for this "
                    "epsilon_partition and delta)")


def _selected(params: AggregateParams, inputs: RunInputs) -> tuple[AggregateParams, dict]:
    """The parameters with the private key columns' tuples partition selection released, and its
    NOT private diagnostics."""
    keys = params.keys
    inputs.progress(f"selecting the values of {', '.join(keys.private)} privately (at most {params.keys_per_user} "
                    f"per user)")
    assert params.keys_per_user is not None
    kinds = private_groups.kinds(inputs.records.schema, keys.private)
    keys, diagnostics = private_groups.select(usable_records(inputs.records, params), keys, kinds,
                                              params.keys_per_user, inputs.split[SELECTION_STEP], params.delta,
                                              inputs.budget, inputs.rng, inputs.seed)
    inputs.progress(f"{len(keys.tuples or ()):,} tuples selected privately: {len(keys):,} groups")
    limit = inputs.execution.max_output_rows
    if len(keys) > limit:  # a DP output's size: refusing on it says nothing more
        raise ConfigError(f"the {len(keys.tuples or ()):,} tuples selected privately make {len(keys):,} groups, more "
                          f"than execution.max_output_rows = {limit:,}: raise it, or list fewer values of the other "
                          "key columns")
    return replace(params, keys=keys), diagnostics


def _describe(params: AggregateParams, epsilon: Fraction, domains: Domains) -> str:
    noise = noise_choice.described(params.noise)
    bound = params.bound
    per_user = "l" if params.auto else bound.groups_per_user
    return (f"aggregate of {', '.join(str(m) for m in params.metrics)} by {', '.join(params.keys.names)} "
            f"({_groups_text(params)}) with epsilon {float(epsilon):g}; at most {per_user} groups per user "
            f"({_choice_text(params)}) and {bound.records_per_group} records per group"
            + (f"; {noise}" if noise else ""))


def _with_chosen(params: AggregateParams, chosen: dict) -> tuple[AggregateParams, dict] | None:
    """The parameters at the privately chosen l and value range, for the report's accuracy."""
    said = {}
    if "groups_per_user" in chosen:
        params, said["groups_per_user"] = bound_choice.at_bound(params, chosen["groups_per_user"]), chosen[
            "groups_per_user"]
    if "low" in chosen:
        params = range_choice.at_range(params, chosen["low"], chosen["high"])
        said.update(low=chosen["low"], high=chosen["high"])
    return (params, said) if said else None


def _choice_text(params: AggregateParams) -> str:
    means = params.auto and bound_choice.quality_of(params) == bound_choice.MEANS
    scored = ", scoring the groups' means" if means else ""
    chosen = f"; l chosen privately from {list(params.bound_candidates or ())}{scored}" if params.auto else ""
    if params.bounding == HPA:
        return f"the most popular, by a noisy popularity from {params.popularity_groups} per user{chosen}"
    return f"a uniform sample{chosen}"


def _groups_text(params: AggregateParams) -> str:
    keys = params.keys
    held = [name for table in keys.tables for name in table.columns]
    read = f"the values of {', '.join(held)} read from their catalog tables when the job runs" if held else ""
    if not keys.private:
        return f"{len(keys):,} groups" if keys.known else f"groups: {read}"
    public = f" times {keys.public_size:,} public combinations" if keys.columns else ""
    return (f"groups: the values of {', '.join(keys.private)} selected privately (delta {params.delta:g}, at most "
            f"{params.keys_per_user} per user){public}" + (f", and {read}" if read else ""))


def _domain_section(params: AggregateParams, domains: Domains) -> dict:
    """From the config and the public key values: with private keys, the number of groups is a DP
    output (the report's chosen.groups_selected), not said here; with values still in catalog tables
    (plan), neither is it."""
    keys = params.keys
    described = {c.name: c.domain.description for c in keys.columns}
    described.update({name: f"table {table.table}, read when the job runs" for table in keys.tables
                      for name in table.columns})
    described.update({name: "selected privately (docs/partition_selection.md)" for name in keys.private})
    if keys.tupled and not keys.private:
        described.update({name: f"a table of key tuples ({keys.source})" for name in keys.tupled})
    section: dict[str, Any] = {"items": None, "attributes": None, "groups": None if keys.private else keys.size(),
                               "keys": {name: described[name] for name in keys.names}}
    if keys.public_by_assertion():
        section["keys_public_by_assertion"] = keys.public_by_assertion()
    if keys.private:
        section["private_keys"] = {"columns": list(keys.private), "keys_per_user": params.keys_per_user,
                                   "delta": params.delta}
    return section


def _report_section(params: AggregateParams) -> dict:
    bound, clip = params.bound, params.clip
    return {
        "parameters": {
            "by": list(params.keys.names), "metrics": [str(m) for m in params.metrics],
            "groups_per_user": AUTO if params.auto else bound.groups_per_user,
            **({"groups_per_user_candidates": list(params.bound_candidates or ()),
                "groups_per_user_quality": bound_choice.quality_of(params)} if params.auto else {}),
            "records_per_group": bound.records_per_group,
            "bounding": params.bounding, **({"d": params.popularity_groups} if params.bounding == HPA else {}),
            **({"low": clip.low, "high": clip.high, "grid_steps": clip.steps} if clip else {}),
            **(_range_parameters(params.range_choice) if params.range_choice else {}),
            **({"candidates": len(params.candidates)} if params.candidates else {}),
            **({"method": params.method} if params.value else {}),
            **({"weights": {step: float(weight) for step, weight in params.weights}} if params.weights else {}),
            "noise": params.noise, "confidence": CONFIDENCE,
            # With l chosen privately, each step's sensitivity follows from it: the ledger states them.
            **({} if params.auto else {"sensitivity_l1": _sensitivities(params)}),
        },
        "specification": "docs/aggregate.md",
        "post_processing": _POST_PROCESSING[params.method],
        "publisher": {"name": "laplace" if params.noise == "laplace" else params.noise},
    }


def _range_parameters(choice: range_choice.RangeChoice) -> dict:
    return {"low": AUTO if choice.low is None else choice.low, "high": AUTO if choice.high is None else choice.high,
            "clip_candidates": list(choice.candidates)}


_POST_PROCESSING = {
    "tables": ("sum = unit x (noisy sum of units) + centre x (noisy count); mean = sum / count with an interval, none "
               "where the count's interval reaches zero; variance from the noisy sums of units and of their squares, "
               "kept in [0, ((high - low)/2)^2]; quantile levels sorted within a group"),
    HISTOGRAM: ("count, sum, mean (with an interval), variance and quantiles from each group's noisy histogram over "
                "the candidates; mean and variance none where the count's interval reaches zero, quantiles none "
                "where the noisy count is not positive"),
}


def _sensitivities(params: AggregateParams) -> dict:
    """Each ledger step's L1 sensitivity (the sums' in grid units; a quantile's on its scaled scores)."""
    steps = params.clip.steps if params.clip else 1
    said = {private_groups.STEP: params.keys_per_user} if params.keys.private else {}
    if params.bounding == HPA:
        said[popular_groups.STEP] = params.popularity_groups
    said.update({noisy_totals.step_name(t, params.value): params.bound.sensitivity(t, steps)[0] for t in params.tables})
    if params.method == HISTOGRAM:
        said[histogram_metrics.step_name(params.value or "")] = histogram_metrics.sensitivity(params.bound)[0]
        return said
    for level in params.levels:
        said[quantile_step(params.value or "", level)] = quantiles.scaled_sensitivity(
            level, params.bound.groups_per_user, params.bound.records_per_group)
    return said


FAMILY = Family(name="aggregate", algorithms=("aggregate",), params_type=AggregateParams,
                default_split=lambda params, epsilon, domains: params.split(epsilon),
                zcdp_shares=lambda params, domains: params.split(Fraction(1), zcdp_shares=True),
                split_keys=lambda params, domains: params.split_keys(), run=run, describe=_describe,
                report_section=_report_section, from_config=from_config, config_keys=CONFIG_KEYS,
                reads="keyed_records", read_columns=_read_columns, uses_item_domain=False,
                item_domain_optional=True, domain_section=_domain_section, accuracy=expected_error.accuracy,
                check_schema=_check_schema, output_rows=lambda params, domains: {TABLE: params.keys.size()},
                delta=lambda params: params.delta, with_chosen=_with_chosen, takes_gaussian=True,
                reads_tables=lambda params: bool(params.keys.tables),
                read_tables=lambda params, spark, source: replace(params, keys=params.keys.read_tables(spark, source)))

