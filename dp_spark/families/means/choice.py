"""The means' private choices: l by bound_selection's mechanism over the sums' error
model, and the clipping range by release.clip_choice; the parameters at what was chosen.
Both are paid from the ledger before the tables; the range's one value per user is drawn under
SRA's salt, which it may share, as the choice is DP given any salt (docs/value_sums.md,
"Choosing l", "Choosing the clipping range" and "Privacy claim: value_sums, means")."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from dp_spark.aggregates.value_ranks import value_ranks
from dp_spark.core import noise_choice
from dp_spark.families.means.params import PAIRS, MeansParams, output_rows, table_noises
from dp_spark.release import bound_bias, bound_selection, clip_choice
from dp_spark.release.auto_bound import AUTO
from dp_spark.release.family import Domains, RunInputs


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
        for table, cells in output_rows(params, domains).items():
            _, _, counts, sums = PAIRS[table]
            count_noise, sum_noise = table_noises(params, split, table, b)
            total += cells * (Fraction(_variance(count_noise, s.bound, s.count_l2_squared, split[counts]))
                              + Fraction(_variance(sum_noise, s.l1, s.l2_squared, split[sums])) / s.steps ** 2)
        noise.append(total)
    rows = output_rows(params, domains)  # each table's cells, twice: its counts and its sums
    return bound_selection.ErrorModel((Fraction(1),) * (2 * len(rows)), _quality_cap(params), tuple(noise),
                                      cells=None if None in rows.values()
                                      else tuple(cells for cells in rows.values() for _ in range(2)))


def _variance(noise: str, l1: int, l2_squared: int, epsilon: Fraction) -> float:
    if noise == noise_choice.GAUSSIAN:
        return noise_choice.gaussian_variance(l2_squared, epsilon)
    return noise_choice.laplace_variance(l1, epsilon)


def _quality_cap(params: MeansParams) -> int:
    """The records per user and cell the quality counts: the release's cap when it has one."""
    return params.records_per_item or bound_selection.QUALITY_RECORDS_PER_CELL


def choose_l(params: MeansParams, inputs: RunInputs, validated) -> tuple[MeansParams, dict | None]:
    """The parameters at the per-user bound and, when it was chosen privately, the report's
    ``chosen`` (a DP output): bound_selection's mechanism over the error model above, its bias
    norms the counts' own, doubled (NOT private: read only by the mechanism)."""
    if not params.auto:
        return params, None
    model = error_model(params, inputs.domains, inputs.split)  # public: any error before the records' pass
    users = int(validated.users_by_n.sum())
    largest = int(validated.users_by_n.index.max()) if users else None
    records = bound_bias.record_count(validated.users_by_n)
    tables = [bound_bias.ITEMS] + ([bound_bias.EDGES] if inputs.domains.attributes is not None else [])

    def norms_at(user_cap: int) -> list[int]:
        per_table = bound_bias.squared_bias_norms(validated.records, params.candidates, _quality_cap(params),
                                                  bound_selection.GRID, tables, largest, validated.user_counts,
                                                  users, user_cap=user_cap, record_count=records)
        return [2 * sum(norms) for norms in zip(*per_table)]

    inputs.progress(f"choosing l privately from {len(params.candidates)} candidates")
    choice = bound_selection.choose_bound_by_users(norms_at, users, params.candidates, model,
                                                   inputs.split["epsilon_bound"], inputs.budget, inputs.rng,
                                                   step="choose l")
    inputs.progress(f"l = {choice.bound}, chosen privately from {list(params.candidates)}")
    return _at_bound(params, choice.bound), choice.to_json("l")


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
    return replace(params, l=l, candidates=None)


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
