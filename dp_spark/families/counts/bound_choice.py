"""The counts' per-user bound chosen privately (``l = "auto"``, ``m = "auto"``): the public error
model of the objective's tables, the bias norms the quality reads, and the choice itself
(release.bound_selection's mechanism; docs/bound_selection.md)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from dp_spark.core import accuracy, noise_choice
from dp_spark.families.counts.params import CountsParams
from dp_spark.families.counts.sampling import count_tables, gaussian_tables
from dp_spark.release import bound_bias, bound_estimate, bound_objective, bound_selection
from dp_spark.release.family import Domains, RunInputs
from dp_spark.release.hpa_selection import Popularity
from dp_spark.release.publisher_accuracy import publisher_accuracy


def _candidates(params: CountsParams) -> tuple[int, ...]:
    """The candidate bounds of a choice (only "auto" has them)."""
    if params.candidates is None:
        raise ValueError(f"{params.bound_name} = {params.l} is not chosen: it has no candidates")
    return tuple(params.candidates)


def scored_tables(params: CountsParams, domains: Domains) -> dict[str, tuple[Fraction, str, int]]:
    """{table: (its weight in the bound's quality, its part of the split, its cells)} for the
    tables the objective scores (weight above 0), the items first. Public: the config and the
    domains."""
    if domains.items is None or params.objective is None:
        raise ValueError("the bound's objective needs the item domain and l = \"auto\"")
    cells = count_tables(len(domains.items), None if domains.attributes is None else len(domains.attributes))
    weights = bound_objective.weights(params.objective, {table: size for table, (_, size) in cells.items()})
    return {table: (weight, *cells[table]) for table, weight in weights.items()}


def error_model(params: CountsParams, domains: Domains, split: dict[str, Fraction]) -> bound_selection.ErrorModel:
    """The public side of the bound's quality: the weights of the count tables the objective
    scores, the records per user and cell the bias counts (``records_per_item`` when the release
    caps them, else bound_selection's default), and the weighted noise variance at every
    candidate: each table's weight times its cells times its exact per-cell variance at that
    bound, with the noise the table would get there (Gaussian or the publisher's)."""
    tables = scored_tables(params, domains)
    noise = []
    for b in _candidates(params):
        gaussian = gaussian_tables(params, b, split, domains.attributes is not None)
        noise.append(sum((weight * size * Fraction(cell_variance(params, b, split[part], gaussian.get(step), size))
                          for step, (weight, part, size) in tables.items()), Fraction(0)))
    return bound_selection.ErrorModel(tuple(weight for weight, _, _ in tables.values()), quality_cap(params),
                                      tuple(noise), cells=tuple(size for _, _, size in tables.values()))


def quality_cap(params: CountsParams) -> int:
    """The records per user and cell the quality counts: the release's cap when it has one."""
    return params.records_per_item or bound_selection.QUALITY_RECORDS_PER_CELL


def cell_variance(params: CountsParams, bound: int, epsilon: Fraction, l2_squared: int | None, cells: int) -> float:
    """One cell's noise variance at ``bound``: the discrete Gaussian's when the table gets it
    (``l2_squared`` given), else the publisher's (exact for the Laplace publisher, the per-cell
    figure of publisher_accuracy for the others)."""
    if l2_squared is not None:
        return noise_choice.gaussian_variance(l2_squared, epsilon)
    if params.publisher == "laplace" and not params.publisher_options:
        return noise_choice.laplace_variance(bound, epsilon)
    sd = publisher_accuracy(params.publisher, params.publisher_options, bound, epsilon, cells,
                            accuracy.DEFAULT_ALPHA).sd
    if sd is None:
        raise ValueError(f"the {params.publisher} publisher states no noise deviation to score a bound by")
    return sd ** 2


CELL_COLUMNS = {"item_counts": bound_bias.ITEMS, "edge_counts": bound_bias.EDGES}


def table_norms(params: CountsParams, validated, domains: Domains, candidates, user_cap: int,
                ranking: bound_bias.ItemRanking | None = None) -> list[list[int]]:
    """Each scored table's ‖B_t(b)‖² at each of ``candidates`` and user cap U, in GRID² units,
    from the validated records (one Spark aggregation per table; NOT private)."""
    tables = scored_tables(params, domains)
    return bound_bias.squared_bias_norms(validated.records, candidates, quality_cap(params), bound_selection.GRID,
                                         [CELL_COLUMNS[t] for t in tables], _largest(validated), validated.user_counts,
                                         int(validated.users_by_n.sum()), user_cap=user_cap,
                                         record_count=bound_bias.record_count(validated.users_by_n), ranking=ranking)


def _largest(validated) -> int | None:
    """The most records a user has in the domain (validation's counts; NOT private: it only picks
    long or decimal arithmetic, which give the same integers)."""
    return int(validated.users_by_n.index.max()) if len(validated.users_by_n) else None


def bias_norms(params: CountsParams, validated, domains: Domains, user_cap: int,
               ranking: bound_bias.ItemRanking | None = None) -> list[Fraction]:
    """Σ_t w_t·‖B_t(b)‖² over the tables the objective scores, for every candidate bound at the
    user cap U, from the validated records (one Spark aggregation per table; NOT private: read
    only by the mechanism). HPA's bias is scored at its ``ranking``, the noisy popularity it
    keeps records by; SRA's and the baselines' at their uniform sample (no ranking)."""
    if (params.algorithm == "hpa") != (ranking is not None):
        raise ValueError("HPA's bound is scored at its noisy popularity, and only HPA's: "
                         f"{params.algorithm} was given {'a' if ranking is not None else 'no'} ranking")
    per_table = table_norms(params, validated, domains, _candidates(params), user_cap, ranking)
    return bound_selection.weighted_norms(per_table, [weight for weight, _, _ in
                                                      scored_tables(params, domains).values()])


def squared_anchors(params: CountsParams, validated, domains: Domains, user_cap: int,
                    ranking: bound_bias.ItemRanking | None = None) -> list[int]:
    """Each scored table's anchor squared, ‖A_t‖², at user cap U, in GRID² units (NOT private:
    read only to be noised): the bias at the smallest candidate, every record of a cell counted,
    each user's part within the anchor's reach (release.bound_bias.anchor_squared_norms); HPA's
    at its ``ranking``."""
    tables = scored_tables(params, domains)
    reaches = [bound_estimate.anchor_reach(quality_cap(params), user_cap, size) for _, _, size in tables.values()]
    return bound_bias.anchor_squared_norms(validated.records, _candidates(params)[0], user_cap, reaches,
                                           bound_selection.GRID, [CELL_COLUMNS[t] for t in tables],
                                           validated.user_counts, int(validated.users_by_n.sum()),
                                           bound_bias.record_count(validated.users_by_n), _largest(validated),
                                           ranking=ranking)


def every_bound(params: CountsParams) -> CountsParams:
    """The parameters with every integer from b_1 to b_K a candidate: the estimate's range."""
    candidates = _candidates(params)
    return replace(params, candidates=tuple(range(candidates[0], candidates[-1] + 1)))


def estimated_bound(params: CountsParams, inputs: RunInputs, validated,
                    ranking: bound_bias.ItemRanking | None = None) -> tuple[int, dict]:
    """The bound of least estimated error (``l_choice = "estimate"``, release.bound_estimate): SRA's,
    or HPA's at its ``ranking`` (release.ranked_bias's model)."""
    candidates = _candidates(params)
    inputs.progress(f"choosing {params.bound_name} privately from {candidates[0]} to {candidates[-1]} "
                    "by its estimated error")
    choice = estimate_choice(params, validated, inputs.domains, inputs.split, inputs.budget, inputs.rng, ranking)
    inputs.progress(f"{params.bound_name} = {choice.bound}, chosen privately from {candidates[0]} to "
                    f"{candidates[-1]}")
    return choice.bound, choice.to_json(params.bound_name)


def estimate_choice(params: CountsParams, validated, domains: Domains, split: dict, budget, rng,
                    ranking: bound_bias.ItemRanking | None = None) -> bound_estimate.EstimateChoice:
    """The estimate choice itself, paid through ``budget`` (its part: ``split["epsilon_bound"]``)."""
    candidates = _candidates(params)
    if domains.items is None:
        raise ValueError("the estimate needs the item domain")
    model = error_model(every_bound(params), domains, split)  # public
    return bound_estimate.choose_bound(
        validated.users_by_n, lambda cap: squared_anchors(params, validated, domains, cap, ranking),
        list(scored_tables(params, domains)), candidates, model, len(domains.items), split["epsilon_bound"],
        budget, rng, step=f"choose {params.bound_name}", ranked=ranking is not None)


def chosen_bound(params: CountsParams, inputs: RunInputs, validated,
                 popularity: Popularity | None = None) -> tuple[int, dict | None]:
    """The per-user bound and, when it was chosen privately, the report's ``chosen`` (a DP output).
    HPA's choice needs its noisy ``popularity``, drawn before it (a DP output, public here)."""
    if not params.auto:
        return int(params.l), None
    if (params.algorithm == "hpa") != (popularity is not None):
        raise ValueError("HPA's bound is chosen at its noisy popularity, and only HPA's")
    ranking = None
    if popularity is not None:
        if inputs.domains.items is None:
            raise ValueError("HPA's popularity needs the item domain")
        ranking = bound_bias.ItemRanking(inputs.domains.items, popularity.scores)
    if params.choice == "estimate":
        return estimated_bound(params, inputs, validated, ranking)
    candidates = _candidates(params)
    model = error_model(params, inputs.domains, inputs.split)  # public: any error before the records' pass
    inputs.progress(f"choosing {params.bound_name} privately from {len(candidates)} candidates")
    choice = bound_selection.choose_bound_by_users(
        lambda cap: bias_norms(params, validated, inputs.domains, cap, ranking),
        int(validated.users_by_n.sum()), candidates, model, inputs.split["epsilon_bound"], inputs.budget,
        inputs.rng, step=f"choose {params.bound_name}")
    inputs.progress(f"{params.bound_name} = {choice.bound}, chosen privately from {list(candidates)}")
    return choice.bound, choice.to_json(params.bound_name)
