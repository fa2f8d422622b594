"""What the means family says about a release: the description, the report's
section and each table's accuracy: before the records are read (with a choice: at the widest
range and the largest l, as upper bounds), and again at the chosen ones (means_choice.with_chosen)."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from dp_spark.core import accuracy, noise_choice
from dp_spark.core.accounting import Noise
from dp_spark.core.accuracy import UPPER_BOUND
from dp_spark.core.discrete_gaussian import discrete_gaussian_halfwidth, discrete_gaussian_variance, variance_at_least
from dp_spark.families.means.params import EDGE_TABLE, ITEM_TABLE, PAIRS, MeansParams, table_noises, table_pair
from dp_spark.release import bound_objective
from dp_spark.release import sum_tables as publishing
from dp_spark.release.auto_bound import AUTO, AUTO_NOTE
from dp_spark.release.family import Domains
from dp_spark.release.private_keys import PRIVATE_ITEMS, items_text
from dp_spark.release.sum_tables import mean_halfwidth

CLIP_NOTE = ("the clipping range is chosen privately from the candidates: the sum's noise is that of the chosen "
             "range, at most these numbers (at the widest, [{low:g}, {high:g}]); privacy.json's algorithm.chosen "
             "says which")
MEAN_NOTE = ("the ratio of the noisy sum and count, not additive noise: each row's mean_low and mean_high are its "
             "{level:g}% interval (both figures within their half-widths at half the rest each), which covers the "
             "mean of the records bounding kept, clipped to the range; a row without a mean had a count whose "
             "interval reaches zero (docs/value_sums.md)")
# The records kept in a cell at which plan and the report state a mean's interval.
RECORDS_SHOWN = (10, 100, 1_000, 10_000)


def describe(params: MeansParams, epsilon: Fraction, domains: Domains) -> str:
    noise = noise_choice.described(params.noise, params.records_per_item)
    noise = f", {noise}" if noise else ""
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
    return (f"auto (chosen privately from {list(params.candidates)} for "
            f"{bound_objective.described(params.objective, bound_objective.MEANS)})" if params.auto else str(params.l))


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


def report_section(params: MeansParams) -> dict:
    selection = {"l_candidates": list(params.candidates), "l_objective": bound_objective.to_json(params.objective),
                 "quality": "docs/value_sums.md, \"Choosing l\""} if params.auto else {}
    if params.clip_auto:
        selection["clip_candidates"] = list(params.clip_candidates)
    if params.private_items:
        selection.update(items=PRIVATE_ITEMS, keys_per_user=params.keys_per_user, delta=params.delta,
                         partition_selection="docs/partition_selection.md")
    return {
        "parameters": {"bounding": params.bounding, "l": params.l, **selection, "confidence": params.confidence,
                       **({"d": params.d} if params.bounding == "hpa" else {}),
                       "low": params.low, "high": params.high, "grid_steps": params.steps,
                       **({"records_per_item": params.records_per_item} if params.records_per_item else {}),
                       **({"noise": params.noise} if params.noise != Noise.LAPLACE else {}),
                       **_sensitivities(params)},
        "specification": ("docs/value_sums.md (bounding: docs/specification.md "
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


def table_accuracy(params: MeansParams, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
                   alpha: float) -> dict:
    """Per table: noisy_count's noise; noisy_sum's = γ·(sum noise) + m·(count noise), its sd exact
    and its half-widths from a union bound (γ·h_S + |m|·h_C at half the level each, an upper
    bound); the means' intervals are per row. With a range chosen privately, an upper bound at
    the widest range, the centre's size at most the larger of its ends' (``_clip_upper_bound``)."""
    clip, s = params.widest_clip, params.sensitivity
    tables = {}
    for table in [ITEM_TABLE] + ([EDGE_TABLE] if domains.attributes is not None else []):
        _, _, counts, sums = PAIRS[table]
        count_noise, sum_noise = table_noises(params, split, table)
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
        tables[table] = {"noisy_count": count, "noisy_sum": total, "mean": _mean_accuracy(params, split, table, alpha)}
    return tables


def _mean_accuracy(params: MeansParams, split: dict[str, Fraction], table: str, alpha: float) -> accuracy.Accuracy:
    """The mean's interval half-width for a cell of n records kept (RECORDS_SHOWN), the widest
    over where the cell's mean lies in the range, and the fewest records a mean needs: from the
    half-widths the release uses (release.sum_tables), at the widest range and the largest l
    when they are chosen privately (then upper bounds)."""
    clip = params.widest_clip
    count_entry, sum_entry = publishing.pair_entries(params.sensitivity, 1, table_pair(params, split, table), clip.unit)
    level_alpha = params.interval_alpha
    count_h, sum_h = publishing.halfwidth(count_entry, level_alpha / 2), publishing.halfwidth(sum_entry,
                                                                                            level_alpha / 2)
    widths = tuple((n, mean_halfwidth(n, count_h, sum_h, clip)) for n in RECORDS_SHOWN)
    note = MEAN_NOTE.format(level=100 * params.confidence)
    if params.auto or params.clip_auto:
        note += "; the half-widths by records are at the largest l and the widest range, at most what the run gives"
    # At most one kept record per user and cell, a cell's records are its users.
    counted = "users" if params.per_cell == 1 else "records kept"
    return accuracy.not_additive("ratio of two noisy figures", alpha, note, widths, params.confidence,
                                 math.floor(count_h) + 1, counted)


def _upper_bound(noise: accuracy.Accuracy, params: MeansParams) -> accuracy.Accuracy:
    """Before l is chosen: the noise at the largest candidate, at most what the chosen l gives."""
    return replace(noise, kind=UPPER_BOUND, note="; ".join(filter(None, [noise.note, AUTO_NOTE.format(
        name="l", largest=params.largest_bound)])))


def _clip_upper_bound(noise: accuracy.Accuracy, params: MeansParams) -> accuracy.Accuracy:
    """Before the range is chosen: the sum's noise at the widest range, at most what the chosen gives."""
    clip = params.widest_clip
    return replace(noise, kind=UPPER_BOUND, note="; ".join(filter(None, [noise.note, CLIP_NOTE.format(
        low=clip.low, high=clip.high)])))
