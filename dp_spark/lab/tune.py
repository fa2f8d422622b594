"""``dp-spark tune CONF``: the expected item-count error of a counts job at every candidate
per-user bound, from the raw records. NOT PRIVATE: it reads the true data without noise, like
``evaluate``; it is for the operator choosing a bound (or a candidate list), never for publication.

For each candidate b it shows SRA's exact expected error (:mod:`dp_spark.lab.bound_curve`):
the truncation bias and the sampling variance of keeping min(n, b) records per user, and the
noise variance the item table gets at bound b and the item counts' share of ε (the discrete
Gaussian's where the job would draw it, else the publisher's; ``families.counts.bound_choice.error_model``).
Beside them, the quality q(b) that ``l = "auto"`` would score
(:mod:`dp_spark.release.bound_selection`, at the likeliest user cap) and the probability that
the exponential mechanism picks b, over its user count's noise and its draw. With the estimate
choice (``l_choice = "estimate"``, SRA's and HPA's default) the distribution of that choice's picks over
runs of its own is shown beside them (:func:`estimate_summary`).

HPA keeps each user's most popular records rather than a uniform sample, ranked by a noisy
popularity the release draws first; tune ranks by the popularity its sample has in expectation,
without the noise (``expected_popularity``), and shows HPA's exact expected error at that ranking
(its bias and the variance of the ties at the boundary, ``bound_curve.hpa_sampling_errors``) with
HPA's noise, and q(b) and the pick probabilities of HPA's ``l = "auto"``, which scores HPA's own
drop, at that ranking too. The baselines (lpa, dft, gs) are SRA with
their publisher: exact for lpa; for dft and gs the noise is the publisher's per-cell figure
(``plan``'s) and the bias their smoothing adds is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.core import zcdp
from dp_spark.errors import ConfigError
from dp_spark.families.counts import bound_choice
from dp_spark.families.counts import family as counts
from dp_spark.lab.bound_curve import NOT_PRIVATE, hpa_sampling_errors, sra_sampling_errors
from dp_spark.release import bound_bias, bound_objective, bound_selection
from dp_spark.release.family import Domains
from dp_spark.release.guards import SPLIT_KEY as GUARDS_SPLIT_KEY

# The bounds shown when neither the config nor --candidates names any, and the share of ε that
# ``l = "auto"`` spends on the choice: the product's defaults.
DEFAULT_CANDIDATES = bound_selection.DEFAULT_CANDIDATES
BOUND_SHARE = bound_selection.DEFAULT_SHARE
COUNTS_ALGORITHMS = ("sra", "hpa", "lpa", "dft", "gs")
# Parts that l = "auto" leaves as they are: the guards' (taken first) and the bounding estimate's.
KEPT_PARTS = (GUARDS_SPLIT_KEY, "epsilon_bounding")


@dataclass(frozen=True)
class TuneRow:
    """One candidate bound: its expected error at the config's ε, and the mechanism's view."""

    bound: int
    expected_dropped: float  # records dropped, in expectation
    bias_squared: float  # mean over items
    sampling_variance: float  # mean over items
    noise_variance: float  # per item
    expected_mse: float
    quality: float  # q(b) of bound_selection
    pick_probability: float  # P(l = "auto" picks b), over the user count's noise and the mechanism's

    def to_json(self) -> dict:
        return dict(vars(self))


@dataclass(frozen=True)
class TuneSetup:
    """The public side of a tune: the counts job's parameters and the numbers of cells."""

    algorithm: str
    publisher: str
    publisher_options: dict
    epsilon: Fraction
    split: Mapping[str, Fraction]  # the config's split, all of ε on the release
    item_cells: int
    edge_cells: int | None  # None without attributes
    records_per_item: int | None = None  # the config's cap on a user's records per item, if any
    noise: str = "laplace"  # privacy.noise
    rho: Fraction | None = None  # the release's ρ under zCDP accounting; None under pure ε
    fixed_split: Mapping[str, Fraction] | None = None  # a fixed bound's split when ``split`` is l = "auto"'s
    users: int | None = None  # the users with an in-domain record, once read (NOT private)
    objective: bound_objective.Objective = bound_objective.DEFAULT  # what l = "auto" scores
    # With l_choice = "estimate": what that choice does on these records (estimate_summary); NOT private.
    estimate: Mapping | None = None

    @property
    def tables(self) -> int:
        return 1 if self.edge_cells is None else 2

    def noise_variance(self, bound: int, split: Mapping[str, Fraction] | None = None) -> float:
        """One item's noise variance at ``bound`` and the item counts' part of ``split`` (default the
        config's): the noise the item table gets there, the discrete Gaussian's or the publisher's,
        as the job's error model has it (families.counts.bound_choice.error_model on the item table alone)."""
        params = replace(self._params((bound,)), objective=bound_objective.ITEMS)
        model = bound_choice.error_model(params, Domains(range(self.item_cells)), dict(split or self.split))
        return float(model.noise_variance[0]) / self.item_cells

    def _params(self, candidates: Sequence[int]) -> counts.CountsParams:
        return counts.CountsParams(self.algorithm, "auto", publisher=self.publisher,
                                   publisher_options=dict(self.publisher_options), candidates=tuple(candidates),
                                   noise=self.noise, records_per_item=self.records_per_item,
                                   objective=self.objective)

    def _kept_split(self, share: Fraction) -> dict:
        """The parts of ε the tables keep once the bound has its share, as the job's split of
        l = "auto" gives them: as they are when the config's split already left it out. Else the
        guards' part comes off the top and the bound takes ``share`` of the rest (release.family.
        plan_split); the bounding estimate keeps its part (the same share in either split), and
        the other parts shrink together to make room: in ε, or under zCDP in ρ (ε_k²/2)."""
        if "epsilon_bound" in self.split:
            return dict(self.split)
        fixed = {part: value for part, value in self.split.items() if part in KEPT_PARTS}
        shared = {part: value for part, value in self.split.items() if part not in fixed}
        guards = self.split.get(GUARDS_SPLIT_KEY, Fraction(0))
        if self.rho is None:
            total = sum(shared.values(), Fraction(0))
            kept = (total - (self.epsilon - guards) * share) / total
            return {**fixed, **{part: value * kept for part, value in shared.items()}}
        total = sum((zcdp.pure_cost(value) for value in shared.values()), Fraction(0))
        kept = (total - (self.rho - zcdp.pure_cost(guards)) * share) / total
        return {**fixed, **{part: zcdp.epsilon_for_rho(zcdp.pure_cost(value) * kept)
                            for part, value in shared.items()}}

    def choice_epsilon(self, share: Fraction) -> Fraction:
        """The choice's part of the split, as l = "auto" gets it: the config's epsilon_bound, else
        ``share`` of ε (after the guards' part); under zCDP the ε of that share of ρ."""
        guards = self.split.get(GUARDS_SPLIT_KEY, Fraction(0))
        if self.rho is None:
            return self.split.get("epsilon_bound", (self.epsilon - guards) * share)
        return self.split.get("epsilon_bound", zcdp.epsilon_for_rho((self.rho - zcdp.pure_cost(guards)) * share))

    def mechanism_epsilon(self, share: Fraction, candidates: Sequence[int]) -> Fraction:
        """The ε the exponential mechanism runs at over ``candidates``, as choose_bound_by_users
        runs it: what the choice's part leaves after the user count (if any), at twice its ε under
        zCDP (bounded range)."""
        _, part = bound_selection.choice_parts(self.choice_epsilon(share), self.rho is not None, candidates)
        return zcdp.selection_epsilon(part, self.rho is not None)

    def error_model(self, share: Fraction, candidates: Sequence[int]) -> bound_selection.ErrorModel:
        """The quality's public side as ``l = "auto"`` sets it (families.counts.bound_choice.error_model), with
        every part of ε shrunk by the bound's ``share`` unless the config's split already left it out."""
        values = None if self.edge_cells is None else range(self.edge_cells // self.item_cells)
        return bound_choice.error_model(self._params(candidates), Domains(range(self.item_cells), values),
                                  self._kept_split(share))


def candidates_of(given: Sequence[int] | None, params=None) -> tuple[int, ...]:
    """The bounds to show: ``given`` (--candidates), else the config's candidate list when its
    parameters carry one, else DEFAULT_CANDIDATES."""
    chosen = given or getattr(params, "candidates", None) or DEFAULT_CANDIDATES
    try:
        return tuple(int(b) for b in bound_selection.candidates_checked(chosen))
    except ValueError as exc:
        raise ConfigError(f"tune: {exc}") from None


def likely_caps(users: int, candidates: Sequence[int], setup: TuneSetup, share: Fraction) -> dict[int, float]:
    """The user caps l = "auto"'s count of ``users`` users can give, with their probabilities (those
    below bound_selection.LEAST_CAP_PROBABILITY left out): the caps tune needs norms at."""
    count, _ = bound_selection.choice_parts(setup.choice_epsilon(share), setup.rho is not None, candidates)
    return {cap: p for cap, p in bound_selection.user_cap_probabilities(
        users, count, setup.mechanism_epsilon(share, candidates), candidates).items()
        if p >= bound_selection.LEAST_CAP_PROBABILITY}


def tune_rows(pairs: pd.DataFrame, norms: Mapping[int, Sequence[int]], candidates: Sequence[int], setup: TuneSetup,
              share: Fraction = BOUND_SHARE, scores: Mapping | None = None) -> list[TuneRow]:
    """Every candidate's row (see the module). ``pairs``: (user_id, item_id), one row per
    in-domain record; ``norms``: {user cap: the squared bias norms ``l = "auto"`` scores the
    candidates by at that cap} (release.bound_bias on the same records) for at least the caps
    of :func:`likely_caps`. The quality shown is at the likeliest cap; P(pick) mixes them all.
    ``scores``: item -> the public score HPA ranks a user's records by (the error is then HPA's);
    None for SRA's uniform sample."""
    candidates = tuple(int(b) for b in bound_selection.candidates_checked(candidates))
    if not 0 < share < 1:
        raise ValueError(f"the bound's share of epsilon must be in (0, 1), got {share}")
    errors = (sra_sampling_errors(pairs, candidates, setup.item_cells) if scores is None
              else hpa_sampling_errors(pairs, candidates, setup.item_cells, scores))
    model = setup.error_model(share, candidates)
    users = int(pairs["user_id"].nunique())
    caps = likely_caps(users, candidates, setup, share)
    likeliest = max(caps, key=caps.get)
    scores = bound_selection.quality(norms[likeliest], candidates, replace(model, user_cap=likeliest))
    picks = bound_selection.pick_probabilities(norms.__getitem__, users, candidates, model,
                                               setup.choice_epsilon(share), setup.rho is not None)
    rows = []
    for error, score, pick in zip(errors, scores, picks):
        noise = setup.noise_variance(error.bound)
        rows.append(TuneRow(error.bound, error.expected_dropped, error.bias_squared, error.sampling_variance, noise,
                            error.expected_mse(noise), float(score), float(pick)))
    return rows


def method_note(algorithm: str) -> str:
    if algorithm == "hpa":
        return ("HPA's exact expectation with each user's records ranked by the popularity its sample has in "
                "expectation, without its noise (a release ranks by a noisy one): bias, the ties' variance and "
                "noise at HPA's item share; q(b) and P(pick) score HPA's own drop at that ranking")
    if algorithm in ("dft", "gs"):
        return (
            "SRA's exact sampling error; noise as plan reports it per cell (the publisher's smoothing bias not shown)"
        )
    return "SRA's exact expectation: bias, sampling variance and the publisher's noise"


def best(rows: Sequence[TuneRow]) -> TuneRow:
    return min(rows, key=lambda r: r.expected_mse)


def choice_percentiles(picks: Sequence[float], values: Sequence[float], quantiles=(0.5, 0.9, 0.99)) -> dict:
    """{q: the q-quantile of ``values`` when value i comes with probability picks[i]}: the spread
    of a release's expected error over a mechanism's choice, the tail a mean hides."""
    values, picks = np.asarray(values, dtype=float), np.asarray(picks, dtype=float)
    order = np.argsort(values)
    reach = np.cumsum(picks[order])
    return {q: float(values[order][min(int(np.searchsorted(reach, q)), len(order) - 1)]) for q in quantiles}


def auto_summary(rows: Sequence[TuneRow], setup: TuneSetup, share: Fraction, configured: int | None) -> dict:
    """What l = "auto" gives in expectation, exactly: Σ_b P(pick b)·MSE(b), each MSE with the item
    counts' part of auto's split, its percentiles over the choice, and the ratios to the best
    candidate as a fixed bound (at a fixed bound's split) and to the config's bound. The figures of
    bench/bound_selection.py "expected", over the candidates shown (NOT private)."""
    kept, fixed = setup._kept_split(share), setup.fixed_split or setup.split
    sampling = [r.bias_squared + r.sampling_variance for r in rows]
    at_auto = [e + setup.noise_variance(r.bound, kept) for e, r in zip(sampling, rows)]
    at_fixed = {r.bound: e + setup.noise_variance(r.bound, fixed) for e, r in zip(sampling, rows)}
    picks = [r.pick_probability for r in rows]
    expected = float(np.dot(picks, at_auto))
    top = min(at_fixed, key=at_fixed.get)
    spread = choice_percentiles(picks, at_auto)
    summary = {"expected_mse": expected, "p50": spread[0.5], "p90": spread[0.9], "p99": spread[0.99],
               "best_fixed_bound": top, "best_fixed_mse": at_fixed[top], "auto_vs_best_fixed": expected / at_fixed[top]}
    if configured in at_fixed:
        summary.update(configured_mse=at_fixed[configured], auto_vs_configured=expected / at_fixed[configured])
    return summary


def table(rows: Sequence[TuneRow], configured: int | None = None) -> list[str]:
    """The rows as text, each line labelled; the lowest expected MSE marked with *, the config's
    bound with <."""
    top = best(rows)
    lines = [f"{'bound':>7} {'dropped':>11} {'bias^2':>11} {'samp var':>10} {'noise var':>11} {'exp. MSE':>11} "
             f"{'q(b)':>13} {'P(pick)':>8}"]
    for r in rows:
        lines.append(f"{r.bound:>7} {r.expected_dropped:>11.1f} {r.bias_squared:>11.4g} {r.sampling_variance:>10.4g} "
                     f"{r.noise_variance:>11.4g} {r.expected_mse:>11.4g} {r.quality:>13.6g} {r.pick_probability:>8.3f} "
                     f"{mark(r is top, r.bound == configured)}")
    return labelled(lines)


def mark(best_row: bool, configured: bool) -> str:
    """A row's marks: * for the best, < for the config's bound."""
    return ("*" if best_row else " ") + ("<" if configured else " ")


def labelled(lines: Sequence[str]) -> list[str]:
    return [f"{line}   NOT PRIVATE" for line in lines]


# Choosing l by looking at this table makes l a function of the raw records: the release at that l
# is then not covered by its own privacy report, which still says pure epsilon-DP.
VOIDS_THE_GUARANTEE = (
    "WARNING: a bound chosen from this table depends on the raw records, and a release at it no longer has the "
    "guarantee its privacy.json states. Use it on public data, or on data disjoint from what you will release "
    '(an earlier period, a held-out set of users); on the data you release, set l = "auto" (docs/bound_selection.md), '
    "which spends part of epsilon to choose l privately."
)


def report(rows: Sequence[TuneRow], setup: TuneSetup, share: Fraction, configured: int | None, source: str) -> dict:
    top = best(rows)
    bounds = [r.bound for r in rows]
    model = setup.error_model(share, bounds)
    if setup.users is None:
        raise ValueError("tune's report needs the number of users (TuneSetup.users, set by run)")
    caps = likely_caps(setup.users, bounds, setup, share)
    likeliest = max(caps, key=caps.get)
    return {
        "not_private": NOT_PRIVATE,
        "warning": VOIDS_THE_GUARANTEE,
        "source": source,
        "algorithm": setup.algorithm,
        "publisher": setup.publisher,
        "epsilon": float(setup.epsilon),
        "epsilon_items": float(setup.split["epsilon_items"]),
        "item_cells": setup.item_cells,
        "count_tables": setup.tables,
        "method": method_note(setup.algorithm),
        "bound_selection": {"epsilon": float(setup.mechanism_epsilon(share, bounds)), "share": float(share),
                            "objective": bound_objective.to_json(setup.objective),
                            "objective_described": bound_objective.described(setup.objective),
                            "count_tables": model.tables, "records_per_cell": model.records_per_cell,
                            "user_caps": {str(cap): p for cap, p in caps.items()},
                            "sensitivity": float(bound_selection.quality_sensitivity(
                                bounds, replace(model, user_cap=likeliest)))},
        "configured_bound": configured,
        "best_bound": top.bound,
        "auto": auto_summary(rows, setup, share, configured),
        **({"estimate": dict(setup.estimate)} if setup.estimate is not None else {}),
        "rows": [r.to_json() for r in rows],
    }


def refuse_private_items(cfg) -> None:
    if getattr(cfg.params, "private_items", False):
        raise ConfigError('tune needs a public item domain; this config selects its items privately '
                          '(domain.items = "private")')


def expected_popularity(pairs: pd.DataFrame, items, d: int) -> np.ndarray:
    """Per domain item, HPA's popularity count in expectation, without its noise, in 1/1024 of a
    record: ⌊1024·Σ_u k_ui·min(n_u, d)/n_u⌋, what a uniform sample of ≤ d records per user counts.
    ``pairs``: the in-domain records' (user_id, item_id). NOT private: tune's stand-in for the
    noisy popularity HPA's l = "auto" ranks each user's records by."""
    n = pairs.groupby("user_id")["item_id"].transform("size").to_numpy(dtype=np.int64)
    share = np.minimum(n, d) / n
    per_item = pd.Series(share).groupby(pairs["item_id"].to_numpy()).sum()
    return np.floor(1024 * per_item.reindex(items.ids, fill_value=0).to_numpy()).astype(np.int64)


def at_fixed_bound(cfg, bound: int) -> tuple:
    """(the config at the fixed ``bound``, its split): any fixed bound has the same split, and an
    explicit epsilon_bound (l = "auto"'s part) goes with the choice, back to the tables."""
    from dp_spark.jobs.runner import plan_budget

    fixed = cfg.with_params(l=int(bound), candidates=None)
    parts = {part: value for part, value in cfg.epsilon_parts.items() if part != "epsilon_bound"}
    return fixed, plan_budget(replace(fixed, epsilon_parts=parts))


ESTIMATE_DRAWS = 200  # runs of the estimate choice tune takes its distribution from


def estimate_summary(cfg, validated, pairs: pd.DataFrame, domains: Domains, setup: TuneSetup,
                     progress, draws: int = ESTIMATE_DRAWS, ranking: bound_bias.ItemRanking | None = None) -> dict:
    """What l_choice = "estimate" does on these records: how often ``draws`` runs of the choice
    itself (fixed seeds) pick each bound, the item table's expected MSE over those picks at the
    config's split, and the best bound from b_1 to b_K fixed at a fixed bound's split (NOT
    private; release.bound_estimate.pick_probabilities). HPA's at its ``ranking`` (the expected
    popularity, as the rows)."""
    from dp_spark.release import bound_estimate

    params, split = cfg.params, setup.split
    candidates = tuple(params.candidates)
    model = bound_choice.error_model(bound_choice.every_bound(params), domains, dict(split))
    squared = bound_choice.squared_anchors(params, validated, domains, candidates[-1] - candidates[0], ranking)
    progress(f"running the estimate choice {draws} times on the records' statistics")
    picks = bound_estimate.pick_probabilities(validated.users_by_n, squared, list(bound_choice.scored_tables(
        params, domains)), candidates, model, len(domains.items), split["epsilon_bound"], cfg.accounting, draws,
        ranked=ranking is not None)
    every = list(range(candidates[0], candidates[-1] + 1))
    cells = len(domains.items)
    curve = (sra_sampling_errors(pairs, every, cells) if ranking is None else
             hpa_sampling_errors(pairs, every, cells, dict(zip(domains.items.ids.tolist(), ranking.scores.tolist()))))
    errors = {e.bound: e.bias_squared + e.sampling_variance for e in curve}
    expected = sum(p * (errors[b] + setup.noise_variance(b)) for b, p in picks.items())
    fixed = {b: errors[b] + setup.noise_variance(b, setup.fixed_split) for b in every}
    top = min(fixed, key=fixed.__getitem__)
    return {"draws": draws, "pick_probability": {str(b): p for b, p in picks.items()},
            "likeliest": max(picks, key=picks.__getitem__), "expected_mse": expected, "best_fixed_bound": top,
            "best_fixed_mse": fixed[top], "estimate_vs_best_fixed": expected / fixed[top]}


def run(cfg, spark, candidates: Sequence[int] | None, share: Fraction, progress) -> tuple[list[TuneRow], TuneSetup]:
    """Read the config's records as a job does, and tune. NOT PRIVATE."""
    from dp_spark.core.domain import attribute_domain, item_domain
    from dp_spark.io import sources, validation
    from dp_spark.jobs.runner import plan_budget

    if cfg.algorithm not in COUNTS_ALGORITHMS:
        raise ConfigError(
            f"tune works on counts configs ({', '.join(COUNTS_ALGORITHMS)}); {cfg.algorithm!r} is not one"
        )
    refuse_private_items(cfg)
    bounds = candidates_of(candidates, cfg.params)
    split = plan_budget(cfg)
    # With l = "auto" the rows are at auto's split; the fixed bounds they are set against keep the
    # choice's part (any bound has the same split), and an explicit epsilon_bound goes with it.
    fixed_split = at_fixed_bound(cfg, bounds[0])[1] if cfg.params.auto else None
    items = item_domain(cfg.items, spark, cfg.source)
    attributes = attribute_domain(cfg.attributes)
    setup = TuneSetup(cfg.algorithm, cfg.params.publisher, dict(cfg.params.publisher_options), cfg.epsilon, split,
                      len(items), None if attributes is None else len(items) * len(attributes),
                      cfg.params.records_per_item, cfg.params.noise,
                      cfg.accounting.rho if cfg.accounting.zcdp else None, fixed_split,
                      objective=cfg.params.objective if cfg.params.auto else bound_objective.DEFAULT)
    progress(f"reading {cfg.source.path or cfg.source.table}; the error curve uses the raw records WITHOUT noise")
    # As the job validates them (attributes too), so the in-domain records are the job's.
    validated = validation.validate_records(sources.read_records(spark, cfg.source, attributes is not None), items,
                                            attributes)
    try:
        pairs = validated.records.select("user_id", "item_id").toPandas()
        # The norms the job's l = "auto" would score these candidates by, at each cap its count can give.
        auto = replace(cfg.params, l="auto", candidates=tuple(bounds), objective=setup.objective)
        popularity = expected_popularity(pairs, items, cfg.params.d) if cfg.algorithm == "hpa" else None
        ranking = None if popularity is None else bound_bias.ItemRanking(items, popularity)
        norms = {cap: bound_choice.bias_norms(auto, validated, Domains(items, attributes), cap, ranking)
                 for cap in likely_caps(int(validated.users_by_n.sum()), bounds, setup, share)}
        estimate = (estimate_summary(cfg, validated, pairs, Domains(items, attributes), setup, progress,
                                     ranking=ranking)
                    if cfg.params.auto and cfg.params.choice == "estimate" else None)
    finally:
        validated.release()
    setup = replace(setup, users=int(pairs["user_id"].nunique()), estimate=estimate)
    progress(f"{len(pairs):,} in-domain records of {setup.users:,} users")
    scores = None if popularity is None else dict(zip(items.ids.tolist(), popularity.tolist()))
    return tune_rows(pairs, norms, bounds, setup, share, scores), setup
