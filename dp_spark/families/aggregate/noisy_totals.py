"""The metrics per group other than the quantiles, from the bounded totals
(aggregates.group_totals) with noise: pure numpy, no Spark.

A user keeps at most ``l`` groups and at most ``c`` records in each (bounding.user_groups), and each
value is clipped to the public range and put on its grid of ±steps units u (core.clip_range); its
square counts as u²/steps rounded, in [0, steps] (ClipRange.square_units). Adding or removing the
user moves each of its groups' tables by at most c records, one user, c·steps units and c·steps
square units, in at most l groups:

    table            L1              L2²
    count            l·c             l·c²
    users            l               l
    sum              l·c·steps       l·c²·steps²
    sum of squares   l·c·steps       l·c²·steps²

Each table the metrics need gets discrete Laplace noise at its L1 sensitivity or, under zCDP,
discrete Gaussian noise at its L2², from its own share of the budget (sequential composition),
paid through the budget's ledger before it is drawn. Everything a metric shows is then
post-processing of the noisy tables: the sum Σ clip(v) = γ·Ŝ + m·Ĉ, the mean and its interval
(as the means family gives them: release.sum_tables), the variance Σ clip(v)²/Ĉ − mean² with
Σ clip(v)² = γ²·steps·Q̂ + 2γm·Ŝ + m²·Ĉ (each square rounded by at most γ²·steps/2), kept in
[0, ((high − low)/2)²], and the standard deviation, its square root. The claim:
docs/aggregate.md, "Privacy claim: counts, sums, means and variances per group".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark.aggregates.group_totals import GroupTotals
from dp_spark.core import noise_choice
from dp_spark.core.clip_range import ClipRange, mean_intervals
from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.aggregate.metrics import COUNT, USERS, Metric
from dp_spark.release.sum_tables import halfwidth, in_values, table_entry

RECORDS, DISTINCT_USERS, SUM, SQUARES = "count", "users", "sum", "sum of squares"
TABLES = (RECORDS, DISTINCT_USERS, SUM, SQUARES)  # the order their noise is drawn in
_NEEDS = {COUNT: (RECORDS,), USERS: (DISTINCT_USERS,), "sum": (RECORDS, SUM), "mean": (RECORDS, SUM),
          "variance": (RECORDS, SUM, SQUARES), "stddev": (RECORDS, SUM, SQUARES)}


def tables_for(metrics: Sequence[Metric]) -> tuple[str, ...]:
    """The noisy tables ``metrics`` are made from (none for the quantiles), in TABLES' order. A
    sum needs the records too: its values are centred on the range's midpoint m, so Σ v = γ·S + m·C."""
    needed = {table for metric in metrics for table in _NEEDS.get(metric.kind, ())}
    return tuple(table for table in TABLES if table in needed)


@dataclass(frozen=True)
class GroupBound:
    """The contribution bound: at most ``groups_per_user`` groups (l), at most
    ``records_per_group`` records in each (c)."""

    groups_per_user: int
    records_per_group: int

    def __post_init__(self):
        for name in ("groups_per_user", "records_per_group"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    def sensitivity(self, table: str, steps: int = 1) -> tuple[int, int]:
        """(L1, L2²) of ``table`` (the module's table), in grid units for the sums."""
        c = self.records_per_group
        per_group = {RECORDS: c, DISTINCT_USERS: 1, SUM: c * steps, SQUARES: c * steps}[table]
        return self.groups_per_user * per_group, self.groups_per_user * per_group * per_group


def step_name(table: str, value: str | None) -> str:
    """The ledger step of ``table``: "count", "users", "sum(v)", "sum of squares(v)"."""
    return table if table in (RECORDS, DISTINCT_USERS) else f"{table}({value})"


def ledger_entries(tables: Sequence[str], bound: GroupBound, clip: ClipRange | None, value: str | None,
                   shares: Mapping[str, Fraction], noise: str, groups: int) -> dict[str, LedgerEntry]:
    """Each table's entry at its share of ε (under zCDP, the pure-ε equivalent of its share of ρ),
    with the noise ``noise`` names ("auto": the lower-variance one for that table, core.noise_choice);
    the sums' noise is in grid units, and their entries say what a unit is worth in values."""
    entries = {}
    for table in tables:
        if table in (SUM, SQUARES) and clip is None:
            raise ValueError(f"the {table} table needs the value's clipping range")
        steps = clip.steps if clip is not None else 1
        l1, l2_squared = bound.sensitivity(table, steps)
        share = Fraction(shares[table])
        entry = table_entry(step_name(table, value), noise_choice.chosen(noise, l1, l2_squared, share), l1, l2_squared,
                            share, groups)
        if clip is not None and table in (SUM, SQUARES):
            entry = in_values(entry, clip.unit if table == SUM else clip.unit * clip.unit * clip.steps)
        entries[table] = entry
    return entries


def _true_table(totals: GroupTotals, table: str) -> np.ndarray:
    values = {RECORDS: totals.records, DISTINCT_USERS: totals.users, SUM: totals.units, SQUARES: totals.squares}[table]
    if values is None:
        raise ValueError(f"the totals have no {table} (they were taken without a value)")
    return values


def publish(totals: GroupTotals, metrics: Sequence[Metric], bound: GroupBound, clip: ClipRange | None,
            shares: Mapping[str, Fraction], noise: str, budget: Budget, rng: RandomSource,
            alpha: float = 0.05) -> dict[str, np.ndarray]:
    """The metrics' columns over the groups (Metric.columns' names, a mean also with its
    ``_low`` and ``_high`` ends at level 1 − α): each needed table with noise, paid from ``budget``
    (TABLES' order), and the metrics from them. NaN where a mean, variance or deviation is not given
    (the noisy count's lower end is not positive)."""
    value = next((metric.value for metric in metrics if metric.value is not None), None)
    tables = tables_for(metrics)
    entries = ledger_entries(tables, bound, clip, value, shares, noise, totals.records.size)
    noisy = {table: _true_table(totals, table) + budget.noise(entries[table], rng) for table in tables}
    columns: dict[str, np.ndarray] = {}
    for metric in metrics:
        if metric.kind in (COUNT, USERS):
            columns[metric.kind] = noisy[RECORDS if metric.kind == COUNT else DISTINCT_USERS]
        elif metric.kind in _NEEDS:
            assert clip is not None  # ledger_entries refused a sum without one
            columns.update(_value_columns(metric, noisy, entries, clip, alpha))
    return columns


def _value_columns(metric: Metric, noisy: Mapping[str, np.ndarray], entries: Mapping[str, LedgerEntry],
                   clip: ClipRange, alpha: float) -> dict[str, np.ndarray]:
    counts, units = noisy[RECORDS], noisy[SUM]
    name = metric.columns[0]
    if metric.kind == "sum":
        return {name: units * clip.unit + clip.centre * counts}
    # Each figure at α/2, so that a group's interval fails with probability at most α (a union bound).
    mean, low, high = mean_intervals(units, counts, halfwidth(entries[SUM], alpha / 2),
                                     halfwidth(entries[RECORDS], alpha / 2), clip)
    if metric.kind == "mean":
        return {name: mean, f"{name}_low": low, f"{name}_high": high}
    variance = variances(units, noisy[SQUARES], counts, mean, clip)
    return {name: variance if metric.kind == "variance" else np.sqrt(variance)}


def variances(units: np.ndarray, squares: np.ndarray, counts: np.ndarray, means: np.ndarray,
              clip: ClipRange) -> np.ndarray:
    """Σ clip(v)²/Ĉ − mean² from the noisy tables, Σ clip(v)² = γ²·steps·Q̂ + 2γm·Ŝ + m²·Ĉ, kept in
    [0, ((high − low)/2)²], the largest variance of values in the range; NaN where ``means`` is."""
    counts_f = np.asarray(counts, dtype=np.float64)
    given = ~np.isnan(means)
    safe = np.where(given, counts_f, 1.0)
    gamma, m = clip.unit, clip.centre
    squares_f, units_f = np.asarray(squares, dtype=np.float64), np.asarray(units, dtype=np.float64)
    second = (gamma * gamma * clip.steps * squares_f + 2 * gamma * m * units_f + m * m * counts_f) / safe
    widest = ((clip.high - clip.low) / 2) ** 2
    return np.where(given, np.clip(second - np.where(given, means, 0.0) ** 2, 0.0, widest), np.nan)
