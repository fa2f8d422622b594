"""An aggregation's expected error per released column, from the config and the public key values
alone (plan, and the report's accuracy): the counts' noise exactly; a sum's sd exactly and its
half-widths by a union bound; a mean's interval by the group's records; a quantile's rank error.
Claims: docs/aggregate.md, "Expected error"."""

from __future__ import annotations

import math
from fractions import Fraction

from dp_spark.core import accuracy as core_accuracy
from dp_spark.families.aggregate import histogram_metrics, noisy_totals, quantiles
from dp_spark.families.aggregate.metrics import COUNT, USERS
from dp_spark.families.aggregate.noisy_totals import RECORDS, SUM
from dp_spark.families.aggregate.params import HISTOGRAM, QUANTILE_KINDS, AggregateParams, quantile_step
from dp_spark.families.aggregate.run import TABLE
from dp_spark.release import sum_tables
from dp_spark.release.family import Domains

# The confidence of a mean's interval (mean_v_low, mean_v_high).
CONFIDENCE = 0.95
# The records kept in a group at which plan and the report state a mean's interval.
RECORDS_SHOWN = (10, 100, 1_000, 10_000)


def _table_accuracy(params: AggregateParams, split: dict[str, Fraction], alpha: float, zcdp: bool) -> dict:
    """Each column's expected error, from the config alone: the counts' noise exactly; the sum's
    sd exactly and its half-widths by a union bound; a mean's interval by the group's records; a
    variance none; a quantile's rank error at 1 − alpha."""
    groups = params.keys.size() or 1  # a cell's noise does not depend on how many there are
    entries = noisy_totals.ledger_entries(params.tables, params.bound, params.clip, params.value,
                                          {t: split[noisy_totals.step_name(t, params.value)] for t in params.tables},
                                          params.noise, groups)
    columns: dict[str, core_accuracy.Accuracy] = {}
    if params.method == HISTOGRAM:
        assert params.value is not None and params.candidates is not None
        entry = histogram_metrics.ledger_entry(params.bound, params.value,
                                               split[histogram_metrics.step_name(params.value)], params.noise, groups,
                                               len(params.candidates))
        columns.update(histogram_metrics.table_accuracy(
            [m for m in params.metrics if m.kind in histogram_metrics.KINDS], entry, params.candidates, alpha,
            RECORDS_SHOWN, CONFIDENCE, _counted(params)))
    for metric in params.metrics:
        if metric.kind in (COUNT, USERS) and metric.kind in columns:
            continue
        if metric.kind in (COUNT, USERS):
            columns[metric.kind] = _exact(entries[RECORDS if metric.kind == COUNT else noisy_totals.DISTINCT_USERS],
                                          alpha)
        elif params.method == HISTOGRAM:
            continue
        elif metric.kind == "sum":
            columns[metric.columns[0]] = _sum_accuracy(params, entries, alpha)
        elif metric.kind == "mean":
            columns[metric.columns[0]] = _mean_accuracy(params, entries, alpha)
        elif metric.kind in ("variance", "stddev"):
            columns[metric.columns[0]] = core_accuracy.not_additive(
                "from three noisy figures", alpha, "no interval yet: the noisy sum of squares less the squared noisy "
                "mean, kept in [0, ((high - low)/2)^2]; a group with few records has mostly noise")
        elif metric.kind in QUANTILE_KINDS:
            for level, name in zip(metric.levels, metric.columns):
                columns[name] = _quantile_accuracy(params, split[quantile_step(metric.value or "", level)], level,
                                                   alpha, zcdp)
    return {TABLE: columns}


def _exact(entry, alpha: float) -> core_accuracy.Accuracy:
    if entry.gaussian:
        return core_accuracy.discrete_gaussian(entry.noise_scale, alpha)
    return core_accuracy.discrete_laplace(entry.noise_scale, alpha)


def _sum_accuracy(params: AggregateParams, entries: dict, alpha: float) -> core_accuracy.Accuracy:
    """γ·(sum noise) + m·(count noise): the sd exact, the half-widths the two's at half the level each."""
    clip = params.clip
    assert clip is not None
    count, units = entries[RECORDS], entries[SUM]
    g, m = clip.unit, abs(clip.centre)
    sd = math.sqrt(g * g * _variance(units) + m * m * _variance(count))
    h95 = g * sum_tables.halfwidth(units, 0.025) + m * sum_tables.halfwidth(count, 0.025)
    h = g * sum_tables.halfwidth(units, alpha / 2) + m * sum_tables.halfwidth(count, alpha / 2)
    return core_accuracy.Accuracy(f"{g:g} x (noise on the sum of grid units) + {clip.centre:g} x (the count's noise)",
                             core_accuracy.UPPER_BOUND, alpha, sd=sd, ci95_halfwidth=h95, ci_halfwidth=h,
                             note="the sd is exact; the half-widths add the two noises' at half the level each")


def _variance(entry) -> float:
    sd = _exact(entry, 0.5).sd
    assert sd is not None  # exact noise has one
    return sd * sd


def _mean_accuracy(params: AggregateParams, entries: dict, alpha: float) -> core_accuracy.Accuracy:
    clip = params.clip
    assert clip is not None
    level_alpha = 1 - CONFIDENCE
    count_h = sum_tables.halfwidth(entries[RECORDS], level_alpha / 2)
    sum_h = sum_tables.halfwidth(entries[SUM], level_alpha / 2)
    widths = tuple((n, sum_tables.mean_halfwidth(n, count_h, sum_h, clip)) for n in RECORDS_SHOWN)
    note = (f"the ratio of the noisy sum and count: each group's {100 * CONFIDENCE:g}% interval (mean_<v>_low, "
            "mean_<v>_high) covers the mean of the records bounding kept; a group whose count's interval reaches "
            "zero gets no mean")
    return core_accuracy.not_additive("ratio of two noisy figures", alpha, note, widths, CONFIDENCE,
                                 math.floor(count_h) + 1, _counted(params))


def _counted(params: AggregateParams) -> str:
    """What a group's records are in the plan's and the report's words: its users when each user
    counts once per group (c = 1)."""
    return "users" if params.bound.records_per_group == 1 else "records kept"


def _quantile_accuracy(params: AggregateParams, share: Fraction, level: Fraction, alpha: float,
                       zcdp: bool) -> core_accuracy.Accuracy:
    assert params.candidates is not None
    bound = params.bound
    rank = quantiles.rank_error(len(params.candidates), share, level, bound.groups_per_user,
                                bound.records_per_group, zcdp, alpha)
    return core_accuracy.not_additive(
        "exponential mechanism over the candidates", alpha,
        f"with probability at least {100 * (1 - alpha):g}% a group's value is at most {rank:,.1f} of its values away "
        f"from its {float(level):g}-quantile in rank (values rounded to the {len(params.candidates)} candidates), "
        "whatever the group's size: a group of many more values than that gets a close quantile")


def accuracy(params: AggregateParams, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
              alpha: float) -> dict:
    # Gaussian or "auto" noise means zCDP accounting, where the mechanism runs at twice its share. A
    # zCDP release with Laplace noise (privacy.rho alone) is stated at the share: an upper bound.
    zcdp = params.noise != "laplace"
    return _table_accuracy(params, split, alpha, zcdp)
