"""SRA and HPA (Fan & Jin, WWW 2015): item and item x attribute ("edge") counts.

DP claims (user level, pure ε-DP; specification §3.1 and §3.2):

* SRA is (ε_items + ε_edges)-DP. Each user keeps at most l records chosen by a
  per-user uniform sample, so item counts and edge counts each have L1
  sensitivity l; each vector gets discrete Laplace noise of scale l/ε_part.
* The baselines of paper 000 (§3.3–3.5, [FIX] public bound M): LPA, DFT and GS
  keep a uniform sample of at most m records per user, so again L1 sensitivity
  m, and publish with discrete Laplace, FPA or GS (dp_spark.publishers).
  Any job may name another publisher; each publisher's claim is in its module.
* HPA is (ε_popularity + ε_items + ε_edges)-DP. Popularity counts come from at
  most d records per user (sensitivity d, scale d/ε_popularity). Given those
  noisy counts, a DP output, keeping each user's l most popular records is a
  per-user transform, so the final counts again have sensitivity l (adaptive
  sequential composition). d is public (§3.2 [FIX]: never min |T_k|).

Claim: docs/sra_hpa.md, "Privacy claim: sra", "Privacy claim: hpa", "Privacy claim: lpa, dft, gs".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark import publishers
from dp_spark.aggregates import item_edges
from dp_spark.bounding import keys, user_records
from dp_spark.core import noise_choice
from dp_spark.core.accounting import Noise
from dp_spark.core.domain import AttributeDomain, ItemDomain
from dp_spark.core.ledger import Budget, gaussian_entry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.vector_noise import NoiseSecret
from dp_spark.families.counts.params import CountsParams
from dp_spark.publishers import consistency, executor_laplace
from dp_spark.release.hpa_selection import Popularity, hpa_selection, noisy_popularity

# Each count table (its ledger step) and its part of the split.
TABLE_PARTS = {"item_counts": "epsilon_items", "edge_counts": "epsilon_edges"}


def count_tables(items: int, attributes: int | None) -> dict[str, tuple[str, int]]:
    """{table: (its part of the split, its cells)}: the item counts, and the item × attribute
    counts when there are ``attributes`` values (None: no attribute domain)."""
    cells = {"item_counts": items, **({"edge_counts": items * attributes} if attributes is not None else {})}
    return {table: (TABLE_PARTS[table], size) for table, size in cells.items()}


SPEC_SECTIONS = {name: f"docs/specification.md §{section}" for name, section in
                 {"sra": "3.1", "hpa": "3.2", "lpa": "3.3", "dft": "3.4", "gs": "3.5"}.items()}


def default_split(algorithm: str, epsilon: Fraction, with_edges: bool) -> dict[str, Fraction]:
    """The papers' budget split (000 §6): SRA ε/2 + ε/2; HPA ε/10 + 0.45ε + 0.45ε.
    Without edges the edge share goes to the item counts."""
    if algorithm != "hpa":
        return (
            {"epsilon_items": epsilon / 2, "epsilon_edges": epsilon / 2} if with_edges else {"epsilon_items": epsilon}
        )
    popularity = epsilon / 10
    if with_edges:
        return {"epsilon_popularity": popularity, "epsilon_items": epsilon * 9 / 20, "epsilon_edges": epsilon * 9 / 20}
    return {"epsilon_popularity": popularity, "epsilon_items": epsilon * 9 / 10}


@dataclass(frozen=True)
class CountsRelease:
    item_counts: np.ndarray  # noisy, one per domain item
    edge_counts: np.ndarray | None  # noisy, [item, attribute]
    diagnostics: dict = field(default_factory=dict)  # NOT private


@dataclass(frozen=True)
class Publisher:
    """Which publisher turns the bounded counts into the release, with its options. ``gaussian``:
    the tables (ledger steps "item_counts", "edge_counts") that get discrete Gaussian noise instead,
    each with its squared L2 sensitivity (zCDP accounting only; docs/sra_hpa.md), which
    ``records_per_item`` bounds (bounding.item_cap)."""

    name: str = "laplace"
    options: dict = field(default_factory=dict)
    gaussian: dict = field(default_factory=dict)
    records_per_item: int | None = None  # at most this many of a user's selected records per item


def _one_record_per_user(bounded: DataFrame, items, attributes, seed: int | None) -> np.ndarray:
    """Edge counts of one record drawn at random from each user's bounded records (GS's ordering sample)."""
    one_each = user_records.sample_per_user(bounded, 1, salt=keys.new_salt(seed, "one_record_per_user"))
    return item_edges.edge_counts(one_each, items, attributes)


def made_consistent(release: CountsRelease, l: int, epsilons: dict[str, Fraction],
                    gaussian: dict | None = None) -> CountsRelease:
    """The release with items and edges agreeing (post-processing). Each count is weighted by
    the inverse of its noise's variance: 2b² for Laplace noise at its part's scale b = l/ε (which
    stays positive where the discrete variance underflows, at a huge ε), σ² = Δ₂²/ε² for a table
    with Gaussian noise (``gaussian``: step -> Δ₂²)."""
    gaussian = gaussian or {}

    def variance(step: str, part: str) -> float:
        if step in gaussian:
            return float(Fraction(gaussian[step]) / epsilons[part] ** 2)
        return 2 * float(Fraction(l) / epsilons[part]) ** 2

    var_item, var_edge = (variance(step, TABLE_PARTS[step]) for step in ("item_counts", "edge_counts"))
    items, edges = consistency.consistent_counts(release.item_counts, release.edge_counts, var_item, var_edge)
    return CountsRelease(items, edges, release.diagnostics)


@dataclass(frozen=True)
class BoundedCounts:
    """True counts of the bounded records (NOT private until published)."""

    edges: np.ndarray  # [item, attribute]; one column without attributes
    sampled_edges: np.ndarray | None  # one random record per user, for publishers that need it
    with_edges: bool


def bounded_counts(bounded: user_records.Selection, items: ItemDomain, attributes: AttributeDomain | None,
                   publisher: Publisher, seed: int | None) -> BoundedCounts:
    """Aggregate the bounded records: the only Spark work between bounding and noise."""
    edges = item_edges.selected_edge_counts(bounded, items, attributes, publisher.records_per_item)
    sampled = None
    if publisher.name in publishers.NEEDS_ONE_RECORD_PER_USER:
        sampled = _one_record_per_user(bounded.rows(), items, attributes, seed)
    return BoundedCounts(edges, sampled, attributes is not None)


def publish_counts(counts: BoundedCounts, l: int, epsilons: dict[str, Fraction], budget: Budget,
                   rng: RandomSource, publisher: Publisher) -> CountsRelease:
    """Item counts (row sums of the edges) and edge counts through the publisher; pure numpy.
    Both have L1 sensitivity l; each pays its own part of ε into ``budget`` (the publisher
    spends it before drawing)."""

    def release(true, sampled, epsilon, step):
        if step in publisher.gaussian:
            entry = gaussian_entry(step, l, publisher.gaussian[step], epsilon, int(true.size))
            return true.astype(np.int64) + budget.discrete_gaussian(entry, rng).reshape(true.shape)
        extra = {"sampled": sampled} if sampled is not None else {}
        return publishers.publish(publisher.name, true, l, epsilon, budget, rng, step, **publisher.options,
                                  **extra).values

    sampled = counts.sampled_edges
    item_sample = item_edges.item_counts(sampled) if sampled is not None else None
    noisy_items = release(item_edges.item_counts(counts.edges), item_sample, epsilons["epsilon_items"], "item_counts")
    noisy_edges = None
    if counts.with_edges:
        noisy_edges = release(counts.edges, sampled, epsilons["epsilon_edges"], "edge_counts")
    return CountsRelease(noisy_items, noisy_edges, {"rows_after_bounding": int(counts.edges.sum())})


@dataclass(frozen=True)
class ExecutorCounts:
    """The noisy tables of :func:`publish_counts_on_executors`: Spark DataFrames, never on the driver."""

    item_counts: DataFrame  # item_id, noisy_count
    edge_counts: DataFrame | None  # item_id, attr, noisy_count
    diagnostics: dict = field(default_factory=dict)  # NOT private


def publish_counts_on_executors(selection: user_records.Selection, items: ItemDomain,
                                attributes: AttributeDomain | None, l: int, epsilons: dict[str, Fraction],
                                budget: Budget, secret: NoiseSecret, kept_rows: int | None,
                                gaussian: dict | None = None, records_per_item: int | None = None) -> ExecutorCounts:
    """:func:`bounded_counts` then :func:`publish_counts` with the laplace publisher, for tables
    too large for the driver: the counts stay on the executors, where the noise is drawn
    (publishers.executor_laplace; same mechanism, same sensitivity l, same ledger entries in the
    same order). ``kept_rows`` (Σ min(n, l), from validation) is a diagnostic only."""
    edges = item_edges.selected_cell_tally(selection, items, attributes, records_per_item).localCheckpoint(eager=True)
    h = len(attributes) if attributes else 1
    item_tally = edges if h == 1 else edges.groupBy(F.expr(f"_cell div {h}").alias("_cell")).agg(
        F.sum("_count").alias("_count"))
    gaussian = gaussian or {}
    noisy_items, _ = executor_laplace.publish(item_tally, executor_laplace.CellGrid(items), l,
                                              epsilons["epsilon_items"], budget, secret, "item_counts",
                                              l2_squared=gaussian.get("item_counts"))
    noisy_edges = None
    if attributes:
        noisy_edges, _ = executor_laplace.publish(edges, executor_laplace.CellGrid(items, attributes), l,
                                                  epsilons["epsilon_edges"], budget, secret, "edge_counts",
                                                  l2_squared=gaussian.get("edge_counts"))
    return ExecutorCounts(noisy_items, noisy_edges,
                          {} if kept_rows is None else {"rows_after_bounding": int(kept_rows)})


def _released(selection: user_records.Selection, items: ItemDomain, attributes: AttributeDomain | None, l: int,
              epsilons: dict[str, Fraction], budget: Budget, rng: RandomSource, seed: int | None,
              publisher: Publisher, on_executors: NoiseSecret | None,
              users_by_n: pd.Series | None) -> CountsRelease | ExecutorCounts:
    """The selection's counts published on the driver, or on the executors with ``on_executors``
    (the laplace publisher only: the others need every count at once)."""
    if on_executors is None:
        return publish_counts(bounded_counts(selection, items, attributes, publisher, seed), l, epsilons, budget,
                              rng, publisher)
    if publisher.name != "laplace" or publisher.options:
        raise ValueError(f"only the laplace publisher releases on the executors, not {publisher.name}")
    kept = None if users_by_n is None else user_records.capped_total(users_by_n, l)
    return publish_counts_on_executors(selection, items, attributes, l, epsilons, budget, on_executors, kept,
                                       publisher.gaussian, publisher.records_per_item)


def sra(records: DataFrame, items: ItemDomain, attributes: AttributeDomain | None, l: int,
        epsilons: dict[str, Fraction], budget: Budget, rng: RandomSource, seed: int | None = None,
        user_counts: DataFrame | None = None, publisher: Publisher = Publisher(),
        users_by_n: pd.Series | None = None,
        on_executors: NoiseSecret | None = None) -> CountsRelease | ExecutorCounts:
    """Simple Random Algorithm: a uniform sample of ≤ l records per user, then noisy counts.
    ``user_counts`` (rows per user of ``records``) saves a pass when known, and
    ``users_by_n`` (users per row count) a job. The baselines LPA, DFT and GS
    are this with l = M and their publisher. ``on_executors``: the noise secret, to release the
    counts on the executors (:func:`publish_counts_on_executors`)."""
    sample = user_records.sample_selection(records, l, seed=seed, counts=user_counts, users_by_n=users_by_n)
    return _released(sample, items, attributes, l, epsilons, budget, rng, seed, publisher, on_executors, users_by_n)


def hpa(records: DataFrame, items: ItemDomain, attributes: AttributeDomain | None, l: int, d: int,
        epsilons: dict[str, Fraction], budget: Budget, rng: RandomSource, seed: int | None = None,
        user_counts: DataFrame | None = None, publisher: Publisher = Publisher(),
        users_by_n: pd.Series | None = None, one_per_user: DataFrame | None = None,
        on_executors: NoiseSecret | None = None,
        popularity: Popularity | None = None) -> CountsRelease | ExecutorCounts:
    """Hand-Picked Algorithm: noisy popularity from ≤ d records per user (drawn here unless
    ``popularity`` was drawn before, as l = "auto" does to score HPA's own bias), then each user's
    l records of highest noisy popularity (ties at random), then noisy counts (:func:`hpa_selection`)."""
    if popularity is None:
        popularity = noisy_popularity(records, items, d, epsilons["epsilon_popularity"], budget, rng, seed,
                                      user_counts, users_by_n, one_per_user)
    chosen = hpa_selection(records, items, l, popularity, seed, user_counts, users_by_n)
    release = _released(chosen, items, attributes, l, epsilons, budget, rng, seed, publisher, on_executors,
                        users_by_n)
    release.diagnostics["rows_in_popularity_sample"] = popularity.sample_rows
    return release


def l2_squared(params: CountsParams, l: int) -> int:
    """The squared L2 sensitivity of the item counts, and of the edge counts, at bound ``l``: one
    user adds n_j ≤ c records to item (or item-attribute cell) j, c = records_per_item (else l),
    with Σ n_j ≤ l, so Σ n_j² ≤ c·Σ n_j ≤ l·c (docs/sra_hpa.md, "Privacy claim: sra")."""
    return l * min(params.records_per_item or l, l)


def gaussian_tables(params: CountsParams, l: int, split: dict[str, Fraction], with_edges: bool) -> dict[str, int]:
    """{ledger step: squared L2 sensitivity} of the tables that get discrete Gaussian noise: all of
    them with privacy.noise = "gaussian", those whose Gaussian has the lower variance with "auto"
    (core.noise_choice). Public: the config, the bound (a DP output when chosen) and the split."""
    if params.noise == Noise.LAPLACE or params.publisher != "laplace" or params.publisher_options:
        return {}
    l2 = l2_squared(params, l)
    parts = {step: part for step, part in TABLE_PARTS.items() if with_edges or step == "item_counts"}
    return {step: l2 for step, part in parts.items()
            if noise_choice.chosen(params.noise, l, l2, split[part]) == noise_choice.GAUSSIAN}
