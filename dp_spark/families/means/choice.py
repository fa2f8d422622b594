"""The means' private choices: l by release.mean_bound_quality's mechanism (the cells that get
a mean worth reading), and the clipping range by release.clip_choice; the parameters at what was chosen.
Both are paid from the ledger before the tables; the range's one value per user is drawn under
SRA's salt, which it may share, as the choice is DP given any salt (docs/value_sums.md,
"Choosing l", "Choosing the clipping range" and "Privacy claim: value_sums, means")."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from dp_spark.aggregates.value_ranks import value_ranks
from dp_spark.core import accuracy
from dp_spark.core.discrete_gaussian import discrete_gaussian_variance
from dp_spark.core.ledger import GAUSSIAN_MECHANISM
from dp_spark.families.means.params import EDGE_TABLE, ITEM_TABLE, MeansParams, output_rows, table_pair
from dp_spark.release import bound_bias, bound_objective, clip_choice, mean_bound_quality, sum_tables
from dp_spark.release.auto_bound import AUTO
from dp_spark.release.family import Domains, RunInputs
from dp_spark.release.hpa_selection import Popularity


def error_model(params: MeansParams, domains: Domains, split: dict[str, Fraction]
                ) -> mean_bound_quality.MeansErrorModel:
    """The public side of l's quality (docs/value_sums.md, "Choosing l"): each table of means the
    objective weighs, its cells (None with items selected privately) and, at each candidate, its
    count's noise, the half-width a noisy count must exceed for a mean (the release's own, at
    α/2), and the count's and the sum's noise variances in records² (the sum's over steps²)."""
    rows = output_rows(params, domains)
    weights = _weights(params, domains)
    scored = list(weights)
    return mean_bound_quality.MeansErrorModel(
        tuple(weights[table] for table in scored), tuple(rows[table] for table in scored),
        tuple(tuple(_table_at(params, split, table, int(b)) for b in params.candidates) for table in scored),
        params.per_cell)


def scored_tables(params: MeansParams, domains: Domains) -> list[str]:
    """The tables of means the objective weighs, the item table first."""
    return list(_weights(params, domains))


def _weights(params: MeansParams, domains: Domains) -> dict[str, Fraction]:
    """The weight of each table of means the objective scores (above 0), the item table first."""
    rows = output_rows(params, domains)
    sizes = {table: cells or 1 for table, cells in rows.items()}
    if EDGE_TABLE in rows and rows[EDGE_TABLE] is None:  # private items: the tables' ratio is still public
        sizes[EDGE_TABLE] = len(domains.attributes)
    return bound_objective.weights(params.objective, sizes)


def _table_at(params: MeansParams, split: dict[str, Fraction], table: str, l: int
              ) -> mean_bound_quality.TableAtBound:
    at = _at_bound(params, l)
    count, total = sum_tables.pair_entries(at.sensitivity, 1, table_pair(at, split, table), 1.0)
    if count.mechanism == GAUSSIAN_MECHANISM:
        noise, scale = mean_bound_quality.GAUSSIAN, math.sqrt(float(count.noise_scale))
    else:
        noise, scale = mean_bound_quality.LAPLACE, float(count.noise_scale)
    variance = _variance(count) + _variance(total) / at.steps**2  # the sum's in grid units: records² over steps²
    return mean_bound_quality.TableAtBound(noise, scale, sum_tables.halfwidth(count, params.interval_alpha / 2),
                                           variance)


def _variance(entry) -> float:
    if entry.mechanism == GAUSSIAN_MECHANISM:
        return float(discrete_gaussian_variance(entry.noise_scale))
    return accuracy.discrete_laplace_sd(entry.noise_scale) ** 2


def choose_l(params: MeansParams, inputs: RunInputs, validated,
             popularity: Popularity | None = None) -> tuple[MeansParams, dict | None]:
    """The parameters at the per-user bound and, when it was chosen privately, the report's
    ``chosen`` (a DP output): release.mean_bound_quality's mechanism over the error model above
    and each scored table's kept counts (NOT private: read only by the mechanism). With HPA's
    bounding, ``popularity``: its noisy popularity (a DP output drawn before), by which the kept
    counts rank each user's records, as HPA keeps them."""
    if not params.auto:
        return params, None
    if (popularity is None) != (params.bounding != "hpa"):
        raise ValueError("HPA's choice of l needs its popularity, and only HPA's")
    model = error_model(params, inputs.domains, inputs.split)  # public: any error before the records' pass
    cells = {ITEM_TABLE: bound_bias.ITEMS, EDGE_TABLE: bound_bias.EDGES}
    inputs.progress(f"choosing l privately from {len(params.candidates)} candidates")
    kept = bound_bias.expected_kept(validated.records, params.candidates, params.per_cell, mean_bound_quality.GRID,
                                    [cells[table] for table in scored_tables(params, inputs.domains)],
                                    validated.user_counts, int(validated.users_by_n.sum()),
                                    bound_bias.record_count(validated.users_by_n),
                                    ranking=None if popularity is None else bound_bias.ItemRanking(
                                        inputs.domains.items, popularity.scores))
    l = mean_bound_quality.choose_bound(kept, params.candidates, model, inputs.split["epsilon_bound"], inputs.budget,
                                        inputs.rng, step="choose l")
    inputs.progress(f"l = {l}, chosen privately from {list(params.candidates)}")
    return _at_bound(params, l), {"l": l}


def choose_clip_range(params: MeansParams, inputs: RunInputs, validated, chosen: dict | None
                      ) -> tuple[MeansParams, dict | None]:
    """The parameters at the clipping range and, when it was chosen privately, ``chosen`` with the
    range added (DP outputs): release.clip_choice over the ranks of the candidates among one
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
    return replace(params, l=l, candidates=None, objective=None)


def _at_clip(params: MeansParams, low: float, high: float) -> MeansParams:
    return replace(params, low=low, high=high, clip_candidates=None)


def with_chosen(params: MeansParams, chosen: dict) -> tuple[MeansParams, dict] | None:
    """The parameters at the privately chosen l and clipping range, for the report's accuracy."""
    said = {}
    if "l" in chosen:
        params, said["l"] = _at_bound(params, chosen["l"]), chosen["l"]
    if "low" in chosen:
        params = _at_clip(params, chosen["low"], chosen["high"])
        said.update(low=chosen["low"], high=chosen["high"])
    return (params, said) if said else None
