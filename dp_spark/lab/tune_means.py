"""``dp-spark tune CONF`` on a means config: the per-item mean's error at every candidate per-user
bound l, from the raw records. NOT PRIVATE, as the counts' tune: for the operator choosing l (or a
candidate list) on public data or on data disjoint from the release, never for publication.

For each candidate l, each user keeps min(n, l) of its in-domain records (with
``records_per_item`` c at most c of them per item): with SRA a uniform sample, with HPA the
records of the most popular items first, ranked by the popularity in expectation (without the
release's noise, as the counts' tune does), ties in a uniform order. The order is drawn once with
a fixed seed: one draw of the sampling, not its expectation. Per item, from the clipped values:

* the bias: the mean of the kept records minus the mean of all the item's records;
* the noise: the mean's standard deviation from the count's and the sum's noise at l and the
  config's split (release.sum_tables's entries), by the delta method,
  (γ²σ_S² + (μ − m)²σ_C²)/C², C the kept count and μ its mean;
* the probability p that the item gets a mean: that its kept count plus the count's noise is
  above the count's half-width, as the release decides from its noisy count (exact tails). The
  expected number of items with a mean, Σ p over the domain, counts the items that get one by
  noise alone too (about a fortieth of the empty cells at 95%), as a release does.

With l = "auto" the result also says what the choice would do over the same candidates and records
(``auto_choice``): the objective it scores, its quality q(b) and chance of picking each candidate
(the job's own model and mechanism, release.mean_bound_quality; for HPA each user's records ranked
by the popularity in expectation, without the release's noise), and the expected score of its pick
over the rows (the choice's share of ε not counted there).

The bias, noise and error columns are over the items whose kept count is above the half-width.
The score is the mean over the items whose kept count is above it at some candidate of
p·min(bias² + noise variance, W) + (1 − p)·W, W = (high − low)²/4 the squared error of knowing only
the range: a bound that leaves most items without a mean does not win by scoring the few it
keeps. The lowest score is marked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.core import accuracy, zcdp
from dp_spark.core.clip_range import ClipRange
from dp_spark.core.discrete_gaussian import discrete_gaussian_pmf, discrete_gaussian_variance, support, tail_at_least
from dp_spark.core.ledger import GAUSSIAN_MECHANISM, LedgerEntry
from dp_spark.families.means import choice
from dp_spark.families.means.params import EDGE_TABLE, ITEM_TABLE, MeansParams, table_pair
from dp_spark.lab import tune
from dp_spark.release import bound_objective, bound_selection
from dp_spark.release import mean_bound_quality as mq
from dp_spark.release import sum_tables as publish

SAMPLING_SEED = 0  # one fixed draw of the sampling: the table is NOT private in any case
# What each bounding keeps in the rows, as the report says it.
KEPT = {"sra": "one fixed-seed draw of SRA's uniform sample per l",
        "hpa": "HPA's records of the most popular items per l, ranked by the popularity in expectation, "
               "ties in one fixed-seed order"}


@dataclass(frozen=True)
class MeansTuneRow:
    """One candidate l: what bounding keeps, how many items get a mean, and the means' error."""

    bound: int
    records_kept: int
    items_with_mean: float  # expected, over the count's noise
    bias_rms: float  # over the items with a mean
    noise_sd_rms: float  # over the items with a mean
    error_rms: float  # over the items with a mean: sqrt(mean(bias² + noise variance))
    score: float  # see the module: every item that gets a mean at some candidate

    def to_json(self) -> dict:
        return dict(vars(self))


@dataclass(frozen=True)
class TableNoise:
    """The item table's noise at one l: the count's and the sum's variances (the sum's in values²),
    the half-width a noisy count must exceed for a mean, and the count noise's entry."""

    count_variance: float
    sum_variance: float
    least: float
    count_entry: LedgerEntry

    def at_least(self, m: np.ndarray) -> np.ndarray:
        """P(Z ≥ m) for the count's noise Z, for each integer in ``m``."""
        m = np.asarray(m, dtype=np.int64)
        entry = self.count_entry
        if entry.mechanism != GAUSSIAN_MECHANISM:  # discrete Laplace: P(Z ≥ k) = r^k/(1 + r) for k ≥ 1
            r = math.exp(-1 / float(entry.noise_scale))
            return np.where(m >= 1, r ** np.maximum(m, 1) / (1 + r), 1 - r ** np.maximum(1 - m, 1) / (1 + r))
        if math.sqrt(entry.noise_scale) > 10_000:  # no table of the pmf this wide
            return np.vectorize(lambda k: tail_at_least(int(k), entry.noise_scale))(m)
        z = support(entry.noise_scale)
        at_least = np.cumsum(discrete_gaussian_pmf(z, entry.noise_scale)[::-1])[::-1]
        return np.where(m <= z[0], 1.0, np.where(m > z[-1], 0.0, at_least[np.clip(m - z[0], 0, len(z) - 1)]))


def item_noise(params: MeansParams, split: dict[str, Fraction]) -> TableNoise:
    """The item table's noise at params.l: the release's own entries and half-widths."""
    clip = params.clip
    count_entry, sum_entry = publish.pair_entries(params.sensitivity, 1, table_pair(params, split, ITEM_TABLE),
                                                  clip.unit)
    variances = [float(discrete_gaussian_variance(e.noise_scale)) if e.mechanism == GAUSSIAN_MECHANISM
                 else accuracy.discrete_laplace_sd(e.noise_scale) ** 2 for e in (count_entry, sum_entry)]
    return TableNoise(variances[0], variances[1] * clip.unit ** 2,
                      publish.halfwidth(count_entry, params.interval_alpha / 2), count_entry)


def sampled_ranks(records: pd.DataFrame, seed: int = SAMPLING_SEED,
                  scores: dict | None = None) -> pd.DataFrame:
    """``records`` (user_id, item_id, value) with each record's rank in its user's records
    (``rank``, from 0) and in its user's records of its item (``item_rank``): a uniform order, or
    with ``scores`` (item → a whole number, HPA's popularity) the highest score first and ties in
    a uniform order."""
    keyed = records.assign(_key=np.random.default_rng(seed).random(len(records)))
    order = keyed["_key"]
    if scores is not None:  # whole scores apart by 1 or more, so the key in [0, 1) only breaks ties
        order = order - keyed["item_id"].map(scores).astype(np.float64)
    keyed["rank"] = order.groupby(keyed["user_id"]).rank(method="first").astype(np.int64) - 1
    keyed["item_rank"] = keyed.groupby(["user_id", "item_id"])["_key"].rank(method="first").astype(np.int64) - 1
    return keyed.drop(columns="_key")


def tune_rows(records: pd.DataFrame, params: MeansParams, candidates: Sequence[int],
              split: dict[str, Fraction], items: Sequence | np.ndarray,
              scores: dict | None = None) -> list[MeansTuneRow]:
    """Every candidate's row (see the module). ``records``: (user_id, item_id, value), one row per
    in-domain record (NOT private); ``params`` with a public clipping range; ``split``: the
    config's split at a fixed l; ``items``: the item domain's ids; ``scores``: for HPA, each
    item's popularity (:func:`hpa_scores`), by which each user's records are kept."""
    clip: ClipRange = params.clip
    # Sorted first (a user id as text: a CSV's ids are), so that the draw does not depend on the
    # order the records were read in, or on whether the ids were read as numbers.
    ordered = records.assign(_user=records["user_id"].astype(str)).sort_values(
        ["_user", "item_id", "value"], kind="stable", ignore_index=True).drop(columns="_user")
    ranked = sampled_ranks(ordered.assign(value=ordered["value"].clip(clip.low, clip.high)), scores=scores)
    truth = ranked.groupby("item_id")["value"].mean()
    worst = ((clip.high - clip.low) / 2) ** 2
    per_bound = []
    for bound in candidates:
        at = replace(params, l=int(bound), candidates=None)
        kept = ranked[(ranked["rank"] < bound) & (ranked["item_rank"] < at.per_cell)]
        cells = kept.groupby("item_id")["value"].agg(["size", "mean"]).reindex(items)
        sizes = cells["size"].fillna(0).to_numpy(dtype=np.int64)
        noise = item_noise(at, split)
        # A mean is given when C + Z > h, that is Z ≥ floor(h − C) + 1.
        p = pd.Series(noise.at_least(np.floor(noise.least - sizes).astype(np.int64) + 1), index=cells.index)
        given = cells[sizes > noise.least]
        squared = (given["mean"] - truth.reindex(given.index)) ** 2
        noise_var = (noise.sum_variance + (given["mean"] - clip.centre) ** 2 * noise.count_variance) \
            / given["size"].astype(float) ** 2
        per_bound.append((int(bound), len(kept), p, squared, noise_var))
    supported = sorted(set().union(*(set(squared.index) for *_, squared, _ in per_bound)))
    rows = []
    for bound, kept, p, squared, noise_var in per_bound:
        error = (squared + noise_var).reindex(supported).fillna(worst).clip(upper=worst)
        chance = p.reindex(supported)
        score = float((chance * error + (1 - chance) * worst).mean()) if supported else worst
        rows.append(MeansTuneRow(bound, kept, float(p.sum()), _rms(squared), _rms(noise_var),
                                 _rms(squared + noise_var), score))
    return rows


def _rms(values: pd.Series) -> float:
    return float(np.sqrt(values.mean())) if len(values) else float("nan")


def best(rows: Sequence[MeansTuneRow]) -> MeansTuneRow:
    return min(rows, key=lambda r: r.score)


def table(rows: Sequence[MeansTuneRow], configured: int | None = None) -> list[str]:
    """The rows as text, each line labelled; the lowest score marked with *, the config's l with <."""
    top = best(rows)
    lines = [f"{'l':>7} {'records kept':>13} {'items w/ mean':>14} {'bias rms':>9} {'noise sd':>9} "
             f"{'error rms':>10} {'score':>10}"]
    for r in rows:
        lines.append(f"{r.bound:>7} {r.records_kept:>13,} {r.items_with_mean:>14,.0f} {r.bias_rms:>9.3g} "
                     f"{r.noise_sd_rms:>9.3g} {r.error_rms:>10.3g} {r.score:>10.4g} "
                     f"{tune.mark(r is top, r.bound == configured)}")
    return tune.labelled(lines)


def hpa_scores(records: pd.DataFrame, params: MeansParams, items) -> dict | None:
    """For HPA, each domain item's popularity in expectation, without the release's noise
    (tune.expected_popularity): what tune ranks each user's records by in place of the noisy
    popularity a release draws. None for SRA. NOT PRIVATE."""
    if params.bounding != "hpa":
        return None
    return dict(zip(items.ids.tolist(), tune.expected_popularity(records, items, params.d).tolist()))


def auto_choice(records: pd.DataFrame, params: MeansParams, candidates: Sequence[int], split: dict[str, Fraction],
                domains, zcdp_accounting: bool, rows: Sequence[MeansTuneRow]) -> dict:
    """What l = "auto" would do over ``candidates`` on these records: the objective it scores, its
    quality and probability of picking each candidate (release.mean_bound_quality, the job's own
    model at the config's ``split``), Δq, and the expected score over ``rows`` (the fixed split's:
    the choice's share of ε is not counted in it). NOT PRIVATE."""
    auto = replace(params, l="auto", candidates=tuple(candidates))
    model = choice.error_model(auto, domains, split)
    columns = {ITEM_TABLE: ["item_id"], EDGE_TABLE: ["item_id", "attr"]}
    n = records.groupby("user_id").size()
    # HPA's choice ranks each user's records by its noisy popularity; here, the popularity in
    # expectation (the counts' tune does the same).
    scores = hpa_scores(records, params, domains.items)
    kept = []
    for table in choice.scored_tables(auto, domains):
        cells = records.groupby(["user_id", *columns[table]]).size().rename("k").reset_index()
        cells["cell"] = list(zip(*(cells[c] for c in columns[table])))
        cells["n"] = cells["user_id"].map(n)
        if scores is not None:
            cells = bound_selection.ranked_cells(cells, "item_id", scores)
        kept.append(mq.kept_counts(cells, candidates, auto.per_cell))
    at = zcdp.selection_epsilon(split["epsilon_bound"], zcdp_accounting)
    picks = mq.pick_probabilities(kept, candidates, model, at)
    quality = mq.quality(kept, candidates, model)
    scores = {r.bound: r.score for r in rows}
    return {"objective": bound_objective.to_json(auto.objective),
            "objective_described": bound_objective.described(auto.objective, bound_objective.MEANS),
            "epsilon": float(at), "sensitivity": float(mq.quality_sensitivity(candidates, model)),
            "quality": {str(b): float(q) for b, q in zip(candidates, quality)},
            "pick_probability": {str(b): float(p) for b, p in zip(candidates, picks)},
            "likeliest": int(candidates[int(np.argmax(picks))]),
            "expected_score": float(sum(p * scores[int(b)] for p, b in zip(picks, candidates)))}


def report(rows: Sequence[MeansTuneRow], params: MeansParams, configured: int | None, source: str,
           users: int, auto: dict | None = None) -> dict:
    return {"not_private": tune.NOT_PRIVATE, "warning": tune.VOIDS_THE_GUARANTEE, "source": source,
            "algorithm": "means",
            "bounding": params.bounding, "low": params.low, "high": params.high, "users": users,
            "method": f"{KEPT[params.bounding]}; the mean's noise by the delta method "
                      "(docs/value_sums.md, \"Choosing l\")",
            "configured_bound": configured, "best_bound": best(rows).bound, "rows": [r.to_json() for r in rows],
            **({"auto": auto} if auto else {})}


def run(cfg, spark, candidates: Sequence[int], progress) -> tuple[list[MeansTuneRow], int, dict | None]:
    """Read the means config's records as its job does, and tune; with l = "auto", also what the
    choice would do (:func:`auto_choice`). NOT PRIVATE."""
    from dp_spark.core.domain import attribute_domain, item_domain
    from dp_spark.errors import ConfigError
    from dp_spark.io import sources, validation
    from dp_spark.jobs.runner import plan_budget
    from dp_spark.release.family import Domains

    params: MeansParams = cfg.params
    if params.clip_auto:
        raise ConfigError("tune for means needs a public clipping range: set algorithm.low and algorithm.high "
                          "(tune shows the error at a range, it does not choose one)")
    tune.refuse_private_items(cfg)
    fixed, split = tune.at_fixed_bound(cfg, candidates[0])  # with l = "auto": the split of a fixed l
    items = item_domain(cfg.items, spark, cfg.source)
    attributes = attribute_domain(cfg.attributes)
    progress(f"reading {cfg.source.path or cfg.source.table}; the error uses the raw records WITHOUT noise")
    validated = validation.validate_records(sources.read_records(spark, cfg.source, attributes is not None, True),
                                            items, attributes, value=True)
    columns = ["user_id", "item_id", "value"] + (["attr"] if attributes is not None else [])
    try:
        records: pd.DataFrame = validated.records.select(*columns).toPandas()
    finally:
        validated.release()
    users = int(records["user_id"].nunique())
    progress(f"{len(records):,} in-domain records of {users:,} users")
    rows = tune_rows(records, fixed.params, candidates, split, items.ids, hpa_scores(records, params, items))
    auto = None
    if params.auto:
        auto = auto_choice(records, params, candidates, plan_budget(cfg), Domains(items, attributes),
                           cfg.accounting.zcdp, rows)
    return rows, users, auto
