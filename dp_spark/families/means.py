"""Sums and means of a value per item, and per item x attribute value (issue 43).

Bound: each user keeps at most ``l`` records (SRA's uniform sample, or HPA's most popular by a
noisy popularity; with l = "auto" l is chosen privately first, by the counts' mechanism with the
sums' error model: ``error_model``), and with ``records_per_item`` at most c of them per item.
Aggregate: per cell, the kept records and the sum of their values clipped to the public [low,
high] and centred (aggregates.value_sums). Publish: noisy counts at L1 l and noisy centred sums at
L1 l·(high − low)/2, Laplace or (zCDP) Gaussian; the sums and means are post-processing of the two
(algorithms.means). Claim and argument: docs/value_sums.md, "Privacy claim: value_sums, means".
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from dp_spark.aggregates import bound_bias
from dp_spark.aggregates.value_ranks import value_ranks
from dp_spark.aggregates.value_sums import SUM, bounded_sums, cell_tally
from dp_spark.algorithms import bound_selection, clip_choice, executor_means
from dp_spark.algorithms import means as publishing
from dp_spark.algorithms.sampling import hpa_selection
from dp_spark.algorithms.value_sums import DEFAULT_STEPS, ClipRange, SumSensitivity
from dp_spark.bounding import keys, user_records
from dp_spark.core import accuracy, noise_choice
from dp_spark.core.accuracy import UPPER_BOUND
from dp_spark.core.discrete_gaussian import discrete_gaussian_halfwidth, discrete_gaussian_variance, variance_at_least
from dp_spark.core.privacy import check_noise
from dp_spark.core.progress import diagnostic
from dp_spark.errors import ConfigError
from dp_spark.families import guards
from dp_spark.families import on_executors as executor_path
from dp_spark.families.base import ConfigTables, Domains, Family, FamilyOutput, RunInputs, require, rows_per_user
from dp_spark.families.auto_bound import AUTO, AUTO_NOTE, AutoBound, candidates_of
from dp_spark.families.private_keys import (NOTHING_SELECTED, PARTITION_SHARE, PRIVATE_ITEMS, checked_private_items,
                                            items_text, partition_delta, selected_items, unselected_apart)
from dp_spark.io.validation import check_schema, check_value_schema, validate_records
from dp_spark.publishers.executor_laplace import COUNT, CellGrid

BOUNDINGS = ("sra", "hpa")
# The share of each table pair's ε that goes to the sums, the rest to the counts: the sum's
# noise is l·h/ε_sums and the mean's error is mostly the sum's (bench/means_simulation.py:
# 0.7 was no worse than 0.5 to 0.8 at ε = 1 on MovieLens 1M).
SUM_SHARE = Fraction(7, 10)
POPULARITY_SHARE = Fraction(1, 10)  # HPA's popularity, as for the counts (paper 000 §6)
ITEM_TABLE, EDGE_TABLE = "item_means", "edge_means"
# Each table pair: its ledger steps and its parts of the budget (privacy.epsilon_*).
PAIRS = {ITEM_TABLE: ("value_counts", "value_sums", "epsilon_counts", "epsilon_sums"),
         EDGE_TABLE: ("edge_value_counts", "edge_value_sums", "epsilon_edge_counts", "epsilon_edge_sums")}
CLIP_NOTE = ("the clipping range is chosen privately from the candidates: the sum's noise is that of the chosen "
             "range, at most these numbers (at the widest, [{low:g}, {high:g}]); privacy.json's algorithm.chosen "
             "says which")
MEAN_NOTE = ("the ratio of the noisy sum and count, not additive noise: each row's mean_low and mean_high are its "
             "interval at 1 - alpha (both figures within their half-widths at alpha/2); a row without a mean had a "
             "count whose interval reaches zero (docs/value_sums.md)")


def clip_candidates_of(values: Any) -> tuple[float, ...]:
    """The public candidates of a clipping range chosen privately (clip_choice's default when not given)."""
    if values is None:
        return clip_choice.DEFAULT_CANDIDATES
    if not isinstance(values, (list, tuple)):
        raise ConfigError(f"algorithm.clip_candidates must be a list of numbers, got {values!r}")
    try:
        return clip_choice.candidates_checked(values)
    except ValueError as e:
        raise ConfigError(f"algorithm.clip_candidates: {e}") from None


@functools.lru_cache(maxsize=16)
def _check_ranges(lows: tuple[float, ...], highs: tuple[float, ...], steps: int) -> None:
    """Every range the choice can give must be a grid doubles hold: checked before the choice is
    paid for, not after (once per set of candidates: 15,000 ranges for the default)."""
    for low in lows:
        for high in highs:
            if high > low:
                ClipRange(low, high, steps)


@dataclass(frozen=True)
class MeansParams(AutoBound):
    """``low``, ``high``: the public range values are clipped to, either or both "auto" to choose
    it privately from ``clip_candidates`` with a tenth of ε (docs/value_sums.md, "Choosing the
    clipping range"); ``l``: records kept per user,
    by ``bounding`` ("sra": a uniform sample; "hpa": the most popular, popularity measured on
    ``d`` records per user), or "auto" to choose it privately from ``candidates`` with a tenth of
    ε (docs/value_sums.md, "Choosing l"); ``records_per_item``: at most c of a user's kept records
    per item (lowers the L2 sensitivity, which only Gaussian noise uses); ``noise``: privacy.noise."""

    low: float | str
    high: float | str
    l: int | str = 10
    bounding: str = "sra"
    d: int = 1
    records_per_item: int | None = None
    noise: str = "laplace"
    candidates: tuple[int, ...] | None = None
    steps: int = DEFAULT_STEPS
    clip_candidates: tuple[float, ...] | None = None
    # domain.items = "private": the items are selected by partition selection first (at most
    # keys_per_user distinct items per user), which spends privacy.delta (as for the counts).
    private_items: bool = False
    keys_per_user: int | None = None
    delta: float = 0.0
    algorithm: str = "means"

    def __post_init__(self):
        if self.bounding not in BOUNDINGS:
            raise ConfigError(f"algorithm.bounding must be one of {', '.join(BOUNDINGS)}, got {self.bounding!r}")
        if self.auto:
            object.__setattr__(self, "candidates", candidates_of(self.candidates, "l"))
        else:
            rows_per_user(self.l, "algorithm.l")
            if self.candidates is not None:
                raise ConfigError("algorithm.l_candidates is used only with l = \"auto\"")
        rows_per_user(self.d, "algorithm.d")
        if self.bounding != "hpa" and self.d != 1:
            raise ConfigError("algorithm.d is HPA bounding's parameter: set algorithm.bounding = \"hpa\", or remove it")
        self._check_clip()
        keys_per_user, delta = checked_private_items(self.private_items, self.keys_per_user, self.delta)
        object.__setattr__(self, "keys_per_user", keys_per_user)
        object.__setattr__(self, "delta", delta)
        check_noise(self.noise)
        if self.records_per_item is not None:
            # c ≥ l caps nothing (at most l records are kept in all): the sensitivities take min(c, l),
            # as the counts' do, so a privately chosen l below c is no error.
            rows_per_user(self.records_per_item, "algorithm.records_per_item")
            if self.noise == "laplace":
                raise ConfigError("algorithm.records_per_item bounds the L2 sensitivity, which only Gaussian noise "
                                  "uses: set privacy.noise = \"gaussian\" or \"auto\" (with privacy.delta), or "
                                  "remove it")

    def _check_clip(self) -> None:
        if not self.clip_auto:
            if self.clip_candidates is not None:
                raise ConfigError("algorithm.clip_candidates is used only with low or high \"auto\"")
            try:
                clip = ClipRange(self.low, self.high, self.steps)
            except ValueError as e:
                raise ConfigError(f"algorithm.low and algorithm.high: {e}") from None
            object.__setattr__(self, "low", clip.low)
            object.__setattr__(self, "high", clip.high)
            return
        candidates = clip_candidates_of(self.clip_candidates)
        object.__setattr__(self, "clip_candidates", candidates)
        given = {name: getattr(self, name) for name in ("low", "high") if getattr(self, name) != AUTO}
        for name, value in given.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"algorithm.{name} must be a finite number or \"auto\", got {value!r}")
            object.__setattr__(self, name, float(value))
        lows = [c for c in candidates if c < self.high] if "high" in given else list(candidates[:-1])
        highs = [c for c in candidates if c > self.low] if "low" in given else list(candidates[1:])
        if not lows or not highs:
            side = "below algorithm.high" if not lows else "above algorithm.low"
            raise ConfigError(f"algorithm.clip_candidates has no value {side}: the range cannot be chosen")
        try:
            _check_ranges(tuple(lows), tuple(highs), self.steps)
        except ValueError as e:
            raise ConfigError(f"algorithm.clip_candidates: {e}") from None

    @property
    def clip_auto(self) -> bool:
        return AUTO in (self.low, self.high)

    @property
    def clip(self) -> ClipRange:
        """The public range (not with "auto": see widest_clip)."""
        if self.clip_auto:
            raise ValueError("the clipping range is chosen privately: it is known only after the choice")
        return ClipRange(self.low, self.high, self.steps)

    @property
    def widest_clip(self) -> ClipRange:
        """The range, or with "auto" the widest the choice can give: every chosen range lies in it."""
        if not self.clip_auto:
            return self.clip
        low = self.clip_candidates[0] if self.low == AUTO else self.low
        high = self.clip_candidates[-1] if self.high == AUTO else self.high
        return ClipRange(low, high, self.steps)

    @property
    def per_cell(self) -> int:
        """c: at most this many of a user's kept records per item (l, or below it with the cap)."""
        return self.per_cell_at(self.largest_bound)

    def per_cell_at(self, l: int) -> int:
        return min(self.records_per_item or l, l)

    @property
    def sensitivity(self) -> SumSensitivity:
        """The tables' sensitivities (algorithms.means takes the same from the sums it publishes);
        with "auto", at the largest candidate."""
        return self.sensitivity_at(self.largest_bound)

    def sensitivity_at(self, l: int) -> SumSensitivity:
        return SumSensitivity(l, self.per_cell_at(l), self.steps)


def _split(params: MeansParams, epsilon: Fraction, domains: Domains) -> dict[str, Fraction]:
    """With items selected privately, half of ε first selects them (as for the counts); with
    "auto", a tenth of ε to choose l and a tenth to choose the clipping range; HPA: a tenth of ε
    for the popularity; the rest shared
    by the table pairs (items, and items × attributes), each pair 3/10 to its counts and 7/10 to its
    sums."""
    first = {"epsilon_partition": epsilon * PARTITION_SHARE} if params.private_items else {}
    if params.auto:
        first["epsilon_bound"] = epsilon * bound_selection.DEFAULT_SHARE
    if params.clip_auto:
        first["epsilon_clip"] = epsilon * clip_choice.SHARE
    if params.bounding == "hpa":
        first["epsilon_popularity"] = epsilon * POPULARITY_SHARE
    pairs = [ITEM_TABLE] + ([EDGE_TABLE] if domains.attributes is not None else [])
    each = (epsilon - sum(first.values(), Fraction(0))) / len(pairs)
    split = dict(first)
    for table in pairs:
        _, _, counts, sums = PAIRS[table]
        split[counts], split[sums] = each * (1 - SUM_SHARE), each * SUM_SHARE
    return split


def _noises(params: MeansParams, split: dict[str, Fraction], table: str, l: int | None = None) -> tuple[str, str]:
    """The counts' and the sums' noise in ``table`` at bound ``l`` (default: params.largest_bound):
    Laplace, Gaussian, or with privacy.noise = "auto" the lower variance."""
    _, _, counts, sums = PAIRS[table]
    s = params.sensitivity_at(l or params.largest_bound)
    return (noise_choice.chosen(params.noise, s.bound, s.count_l2_squared, split[counts]),
            noise_choice.chosen(params.noise, s.l1, s.l2_squared, split[sums]))


def _pair(params: MeansParams, split: dict[str, Fraction], table: str) -> publishing.TablePair:
    count_step, sum_step, counts, sums = PAIRS[table]
    count_noise, sum_noise = _noises(params, split, table)
    return publishing.TablePair(count_step, sum_step, split[counts], split[sums], count_noise, sum_noise)


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
        # Chosen before the guards look, as the counts' l (docs/bound_selection.md, "Guards").
        params, chosen = _bound(params, inputs, validated)
        params, chosen = _clip(params, inputs, validated, chosen)
        # The per-item cap may keep fewer: rows_after_bounding, in the diagnostics, is exact.
        coverage = guards.bounded_coverage(validated.diagnostics["rows_read"], validated.rows_outside_domain,
                                           validated.users_by_n, params.l)
        if params.private_items:
            coverage = unselected_apart(coverage)
        guards.tell(inputs.guards, coverage, inputs.progress, validated.explain)
        decided = guards.check(inputs, guards.figures_of(validated, attributes_only=params.private_items,
                                                         users_truncated=coverage.users_truncated),
                               bound=coverage.bound)
        inputs.progress("records read; bounding and summing")
        # A function of the config and the public domains (items selected privately are a DP output).
        on_executors = executor_path.reaches_threshold(inputs.domains, inputs.execution)
        diagnostic(inputs.progress, f"{validated.diagnostics['rows_read']:,} records read")
        extra = {}
        if hpa:
            selection, extra["rows_in_popularity_sample"] = hpa_selection(
                validated.records, items, params.l, params.d, inputs.split["epsilon_popularity"], inputs.budget,
                inputs.rng, inputs.seed, validated.user_counts, validated.users_by_n, validated.one_per_user)
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
        return FamilyOutput(_tables_on_executors(params, inputs, tally), diagnostics, guards=decided, chosen=chosen,
                            **executor_path.executor_output(_output_rows(params, inputs.domains), inputs.seed))
    tables = {ITEM_TABLE: pd.DataFrame({"item_id": items.ids, **publishing.nullable_means(
        publishing.publish_means(item_sums, _pair(params, inputs.split, ITEM_TABLE), inputs.budget, inputs.rng))})}
    if attributes is not None:
        h = len(attributes)
        tables[EDGE_TABLE] = pd.DataFrame({"item_id": items.ids.repeat(h), "attr": list(attributes.values) * len(items),
                                           **publishing.nullable_means(publishing.publish_means(
                                               edge_sums, _pair(params, inputs.split, EDGE_TABLE), inputs.budget,
                                               inputs.rng))})
    return FamilyOutput(tables, diagnostics, guards=decided, chosen=chosen)


def _tables_on_executors(params: MeansParams, inputs: RunInputs, tally) -> dict[str, Any]:
    """The tables as Spark DataFrames, their noise drawn on the executors (algorithms.executor_means),
    from the checkpointed tally of DataFrame[_cell, _count, _sum] by item × attribute cell; the item
    table's tally is that tally summed per item. Spent as the driver's path spends: items, then edges."""
    items, attributes = inputs.domains.items, inputs.domains.attributes
    secret, s = executor_path.noise_secret(inputs.seed), params.sensitivity_at(params.l)
    h = len(attributes) if attributes else 1
    item_tally = tally if h == 1 else tally.groupBy(F.expr(f"_cell div {h}").alias("_cell")).agg(
        F.sum(COUNT).alias(COUNT), F.sum(SUM).alias(SUM))
    tables = {ITEM_TABLE: executor_means.publish_means(item_tally, CellGrid(items), s, params.clip,
                                                       _pair(params, inputs.split, ITEM_TABLE), inputs.budget, secret)}
    if attributes is not None:
        tables[EDGE_TABLE] = executor_means.publish_means(tally, CellGrid(items, attributes), s, params.clip,
                                                          _pair(params, inputs.split, EDGE_TABLE), inputs.budget,
                                                          secret)
    return tables


def error_model(params: MeansParams, domains: Domains, split: dict[str, Fraction]) -> bound_selection.ErrorModel:
    """The public side of l's quality (docs/value_sums.md, "Choosing l"): a record l drops leaves
    its cell's count short by one and its centred sum by at most steps units, one record's worth,
    so each count table's bias vector stands for its sum table's too (twice the tables, twice the
    squared norm); the noise is every table's exact variance at each candidate, the sums' in
    records (grid units over steps²)."""
    noise = []
    for b in params.candidates:
        s = params.sensitivity_at(b)
        total = Fraction(0)
        for table, cells in _output_rows(params, domains).items():
            _, _, counts, sums = PAIRS[table]
            count_noise, sum_noise = _noises(params, split, table, b)
            total += cells * (Fraction(_variance(count_noise, s.bound, s.count_l2_squared, split[counts]))
                              + Fraction(_variance(sum_noise, s.l1, s.l2_squared, split[sums])) / s.steps ** 2)
        noise.append(total)
    return bound_selection.ErrorModel(2 * len(_output_rows(params, domains)), _quality_cap(params), tuple(noise))


def _variance(noise: str, l1: int, l2_squared: int, epsilon: Fraction) -> float:
    if noise == noise_choice.GAUSSIAN:
        return noise_choice.gaussian_variance(l2_squared, epsilon)
    return noise_choice.laplace_variance(l1, epsilon)


def _quality_cap(params: MeansParams) -> int:
    """The records per user and cell the quality counts: the release's cap when it has one."""
    return params.records_per_item or bound_selection.QUALITY_RECORDS_PER_CELL


def _bound(params: MeansParams, inputs: RunInputs, validated) -> tuple[MeansParams, dict | None]:
    """The parameters at the per-user bound and, when it was chosen privately, the report's
    ``chosen`` (a DP output): bound_selection's mechanism over the error model above, its bias
    norms the counts' own, doubled (NOT private: read only by the mechanism)."""
    if not params.auto:
        return params, None
    model = error_model(params, inputs.domains, inputs.split)  # public: any error before the records' pass
    users = int(validated.users_by_n.sum())
    largest = int(validated.users_by_n.index.max()) if users else None
    with_edges = inputs.domains.attributes is not None

    def norms_at(user_cap: int) -> list[int]:
        norms, _ = bound_bias.squared_bias_norms(validated.records, params.candidates, _quality_cap(params),
                                                 bound_selection.GRID, with_edges, largest, validated.user_counts,
                                                 users, user_cap=user_cap)
        return [2 * norm for norm in norms]

    inputs.progress(f"choosing l privately from {len(params.candidates)} candidates")
    choice = bound_selection.choose_bound_by_users(norms_at, users, params.candidates, model,
                                                   inputs.split["epsilon_bound"], inputs.budget, inputs.rng,
                                                   step="choose l")
    inputs.progress(f"l = {choice.bound}, chosen privately from {list(params.candidates)}")
    return _at_bound(params, choice.bound), choice.to_json("l")


def _clip(params: MeansParams, inputs: RunInputs, validated, chosen: dict | None
          ) -> tuple[MeansParams, dict | None]:
    """The parameters at the clipping range and, when it was chosen privately, ``chosen`` with the
    range added (DP outputs): algorithms.clip_choice over the ranks of the candidates among one
    value per user (NOT private: read only by its mechanisms)."""
    if not params.clip_auto:
        return params, chosen
    inputs.progress(f"choosing the clipping range privately from {len(params.clip_candidates)} candidates")
    below, at_most, values = value_ranks(validated.one_per_user, "_sampled_value", params.clip_candidates)
    choice = clip_choice.choose_clip(params.clip_candidates, below, at_most, values,
                                     None if params.low == AUTO else params.low,
                                     None if params.high == AUTO else params.high,
                                     inputs.split["epsilon_clip"], inputs.budget, inputs.rng)
    inputs.progress(f"clipping range [{choice.low:g}, {choice.high:g}], chosen privately")
    return _at_clip(params, choice.low, choice.high), {**(chosen or {}), **choice.to_json()}


def _at_bound(params: MeansParams, l: int) -> MeansParams:
    return replace(params, l=l, candidates=None)


def _at_clip(params: MeansParams, low: float, high: float) -> MeansParams:
    return replace(params, low=low, high=high, clip_candidates=None)


def _with_chosen(params: MeansParams, chosen: dict) -> tuple[MeansParams, dict] | None:
    """The parameters at the privately chosen l and clipping range, for the report's accuracy."""
    said = {}
    if "l" in chosen:
        params, said["l"] = _at_bound(params, chosen["l"]), chosen["l"]
    if "low" in chosen:
        params = _at_clip(params, chosen["low"], chosen["high"])
        said.update(low=chosen["low"], high=chosen["high"])
    return (params, said) if said else None


def _describe(params: MeansParams, epsilon: Fraction, domains: Domains) -> str:
    noise = "" if params.noise == "laplace" else f", {params.noise} noise (zCDP)" + (
        f", at most {params.records_per_item} records per user and item" if params.records_per_item else "")
    items = items_text(params.private_items, params.delta, params.keys_per_user, domains.items)
    return (f"means of the value clipped to {_clip_text(params)} with epsilon {float(epsilon):g}, "
            f"{params.bounding.upper()} bounding with l = {_bound_text(params)}{noise}; {items}"
            + (f" x {len(domains.attributes)} attribute values" if domains.attributes else ""))


def _clip_text(params: MeansParams) -> str:
    if not params.clip_auto:
        return f"[{params.low:g}, {params.high:g}]"
    ends = ", ".join("auto" if end == AUTO else f"{end:g}" for end in (params.low, params.high))
    return f"[{ends}] (chosen privately from {len(params.clip_candidates)} candidates)"


def _bound_text(params: MeansParams) -> str:
    return f"auto (chosen privately from {list(params.candidates)})" if params.auto else str(params.l)


def _sensitivities(params: MeansParams) -> dict:
    """The report's sensitivities; with "auto", a rule at the chosen l and range (algorithm.chosen
    says which)."""
    if params.auto or params.clip_auto:
        h = "(high - low)/2" if params.clip_auto else f"{params.clip.half_width:g}"
        c = f"min(l, {params.records_per_item})" if params.records_per_item else "l"
        l, c = (("l", c) if params.auto else (str(params.l), str(params.per_cell)))
        chosen = " and ".join(filter(None, ["l" if params.auto else "", "range" if params.clip_auto else ""]))
        return {"sensitivity": f"at the chosen {chosen}: L1 {l} (counts) and {l} x {h} (sums); L2 sqrt({l} x {c}) "
                               f"and sqrt({l} x {c}) x {h}"}
    h = params.clip.half_width
    root = math.sqrt(params.sensitivity.count_l2_squared)
    return {"sensitivity_l1": {"noisy_count": params.l, "noisy_sum": params.l * h},
            "sensitivity_l2": {"noisy_count": root, "noisy_sum": root * h}}


def _report_section(params: MeansParams) -> dict:
    selection = {"l_candidates": list(params.candidates), "quality": "docs/value_sums.md, \"Choosing l\""} \
        if params.auto else {}
    if params.clip_auto:
        selection["clip_candidates"] = list(params.clip_candidates)
    if params.private_items:
        selection.update(items=PRIVATE_ITEMS, keys_per_user=params.keys_per_user, delta=params.delta,
                         partition_selection="docs/partition_selection.md")
    return {
        "parameters": {"bounding": params.bounding, "l": params.l, **selection,
                       **({"d": params.d} if params.bounding == "hpa" else {}),
                       "low": params.low, "high": params.high, "grid_steps": params.steps,
                       **({"records_per_item": params.records_per_item} if params.records_per_item else {}),
                       **({"noise": params.noise} if params.noise != "laplace" else {}),
                       **_sensitivities(params)},
        "specification": ("docs/value_sums.md (bounding: ALGORITHMS.md "
                          + ("§3.2" if params.bounding == "hpa" else "§3.1") + ")"),
        "post_processing": ("noisy_sum = (centred sum) + centre x (count); mean = noisy_sum / noisy_count with an "
                            "interval from both half-widths, left out where the count's interval reaches zero"),
        "publisher": {"name": "laplace"},
    }


def _noise_accuracy(noise: str, l1: int, l2_squared: int, epsilon: Fraction, alpha: float,
                    grid: float = 1.0) -> tuple[accuracy.Accuracy, float, float, float]:
    """One table's noise in grid units: its Accuracy in value units (a grid unit is ``grid``) and,
    in grid units, its variance and half-widths at α/2 and 2.5% (the sum's union bound)."""
    if noise == noise_choice.GAUSSIAN:
        variance = variance_at_least(Fraction(l2_squared) / Fraction(epsilon) ** 2)
        return (accuracy.discrete_gaussian(variance, alpha, divisor=1 / grid), discrete_gaussian_variance(variance),
                float(discrete_gaussian_halfwidth(variance, alpha / 2)), float(discrete_gaussian_halfwidth(variance,
                                                                                                           0.025)))
    scale = Fraction(l1) / Fraction(epsilon)
    return (accuracy.discrete_laplace(scale * Fraction(grid), alpha, grid=Fraction(grid)),
            noise_choice.laplace_variance(l1, epsilon), accuracy.discrete_laplace_halfwidth(scale, alpha / 2),
            accuracy.discrete_laplace_halfwidth(scale, 0.025))


def _accuracy(params: MeansParams, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
              alpha: float) -> dict:
    """Per table: noisy_count's noise; noisy_sum's = γ·(sum noise) + m·(count noise), its sd exact
    and its half-widths from a union bound (γ·h_S + |m|·h_C at half the level each, an upper
    bound); the means' intervals are per row. With a range chosen privately, an upper bound at
    the widest range, the centre's size at most the larger of its ends' (``_clip_upper_bound``)."""
    clip, s = params.widest_clip, params.sensitivity
    tables = {}
    for table in [ITEM_TABLE] + ([EDGE_TABLE] if domains.attributes is not None else []):
        _, _, counts, sums = PAIRS[table]
        count_noise, sum_noise = _noises(params, split, table)
        count, count_var, count_h, count_h95 = _noise_accuracy(count_noise, s.bound, s.count_l2_squared,
                                                               split[counts], alpha)
        sum_alone, sum_var, sum_h, sum_h95 = _noise_accuracy(sum_noise, s.l1, s.l2_squared, split[sums], alpha,
                                                             grid=clip.unit)
        m, g = abs(clip.centre), clip.unit
        centre = f"{clip.centre:g}"
        if params.clip_auto:  # every chosen range's centre is within [low, high] of the widest
            m, centre = max(abs(clip.low), abs(clip.high)), "(the centre)"
        if m == 0:
            total = sum_alone
        else:
            total = accuracy.Accuracy(
                f"{g:g} x ({sum_noise} noise on the centred sum) + {centre} x (the count's {count_noise} noise)",
                accuracy.UPPER_BOUND, alpha, scale=None, sd=math.sqrt(g * g * sum_var + m * m * count_var),
                ci95_halfwidth=g * sum_h95 + m * count_h95, ci_halfwidth=g * sum_h + m * count_h,
                note="the sd is exact; the half-widths add the two noises' at half the level each (a union bound)")
        if params.auto:
            count, total = _upper_bound(count, params), _upper_bound(total, params)
        if params.clip_auto:
            total = _clip_upper_bound(total, params)
        tables[table] = {"noisy_count": count, "noisy_sum": total,
                         "mean": accuracy.not_additive("ratio of two noisy figures", alpha, MEAN_NOTE)}
    return tables


def _upper_bound(noise: accuracy.Accuracy, params: MeansParams) -> accuracy.Accuracy:
    """Before l is chosen: the noise at the largest candidate, at most what the chosen l gives."""
    return replace(noise, kind=UPPER_BOUND, note="; ".join(filter(None, [noise.note, AUTO_NOTE.format(
        name="l", largest=params.largest_bound)])))


def _clip_upper_bound(noise: accuracy.Accuracy, params: MeansParams) -> accuracy.Accuracy:
    """Before the range is chosen: the sum's noise at the widest range, at most what the chosen gives."""
    clip = params.widest_clip
    return replace(noise, kind=UPPER_BOUND, note="; ".join(filter(None, [noise.note, CLIP_NOTE.format(
        low=clip.low, high=clip.high)])))


def _output_rows(params: MeansParams, domains: Domains) -> dict[str, int | None]:
    """A row per item, and per item and attribute value; items selected privately: as many as it selects."""
    items = None if domains.items is None else len(domains.items)
    rows = {ITEM_TABLE: items}
    if domains.attributes is not None:
        rows[EDGE_TABLE] = None if items is None else items * len(domains.attributes)
    return rows


def _clip_end(table: dict, key: str) -> float | str:
    """A number (the public clipping range), or "auto" (also when left out): chosen privately."""
    value = table.get(key, AUTO)
    if value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"algorithm.{key} must be a number (the public clipping range) or \"auto\" (chosen "
                          f"privately), got {value!r}")
    return float(value)


# The algorithm.* keys means reads.
TAKES = ("name", "bounding", "l", "l_candidates", "d", "records_per_item", "low", "high", "clip_candidates",
         "keys_per_user")


def from_config(c: ConfigTables) -> MeansParams:
    # A privacy.epsilon_* part the release does not spend is refused with the split (base.plan_split).
    algorithm = c.algorithm
    if c.publisher and c.publisher != {"name": "laplace"}:
        raise ConfigError("[publisher] is not used by means: its tables take Laplace noise, or Gaussian noise under "
                          "privacy.noise")
    for key in algorithm:
        if key not in TAKES:
            raise ConfigError(f"algorithm.{key} is not used by means (it takes {', '.join(TAKES)})")
    private = c.domain.get("items") == PRIVATE_ITEMS
    if private and "delta" not in c.privacy:
        raise ConfigError(f"domain.items = \"{PRIVATE_ITEMS}\" needs privacy.delta (e.g. 1e-6): partition selection "
                          "spends it")
    zcdp = c.privacy.get("noise", "laplace") != "laplace" or "rho" in c.privacy
    return MeansParams(_clip_end(algorithm, "low"), _clip_end(algorithm, "high"), require(algorithm, "l", "algorithm"),
                       algorithm.get("bounding", "sra"), algorithm.get("d", 1), algorithm.get("records_per_item"),
                       c.privacy.get("noise", "laplace"), algorithm.get("l_candidates"),
                       clip_candidates=algorithm.get("clip_candidates"), private_items=private,
                       keys_per_user=algorithm.get("keys_per_user"),
                       delta=partition_delta(c.privacy.get("delta", 0.0), zcdp) if private else 0.0)


def _check_schema(params: MeansParams, records, domains: Domains) -> None:
    check_schema(records, domains.items, params.private_items, domains.attributes)
    check_value_schema(records)


def _beyond_the_driver(params: MeansParams, domains: Domains, execution) -> bool:
    """No value per item on the driver: SRA's bounding (HPA's popularity is drawn there) over a
    public domain, released on the executors."""
    return params.bounding == "sra" and not params.private_items and executor_path.reaches_threshold(domains, execution)


FAMILY = Family(name="means", algorithms=("means",), params_type=MeansParams, default_split=_split,
                split_keys=lambda params, domains: tuple(_split(params, Fraction(1), domains)), run=run,
                describe=_describe, report_section=_report_section, from_config=from_config, accuracy=_accuracy,
                config_keys=("bounding", "low", "high", "records_per_item", "l_candidates", "clip_candidates",
                             "keys_per_user"),
                reads="valued_records", with_chosen=_with_chosen,
                takes_gaussian=True, check_schema=_check_schema, output_rows=_output_rows,
                delta=lambda params: params.delta, beyond_the_driver=_beyond_the_driver)
