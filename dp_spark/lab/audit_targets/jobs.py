"""Audit samplers for the Spark job families: SRA, HPA, DPSense(-S), user_histogram.

Each runs the job's Spark steps (bounding, aggregation) once per side, or once per distinct
noisy outcome that steers them, and repeats the noisy steps: the bounding is a per-user
transform whose randomness the guarantee does not rely on; the sensitivity bound is.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark import publishers
from dp_spark.bounding.keys import ROW_KEY
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.lab.audit_targets import primitives as prim

JOB_L = 3
JOB_ITEMS = 5
BOUNDING_SEED = 7


def records(spark, side: int, heavy_records: int, items: int = JOB_ITEMS, heavy_items: int = 1):
    """Ten users with a few records each; D′ adds user 99 with ``heavy_records`` records spread
    over the first ``heavy_items`` items."""
    rows = [(u, 1 + (u + j) % items, u * 100 + j) for u in range(10) for j in range(1 + u % 4)]
    if side:
        rows += [(99, 1 + j % heavy_items, 9900 + j) for j in range(heavy_records)]
    return spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id", ROW_KEY]))


def item_domain(items: int = JOB_ITEMS):
    from dp_spark.core.domain import ItemDomain

    return ItemDomain(ids=np.arange(1, items + 1, dtype=np.int64), description="audit")


def sra_sampler(epsilon: Fraction):
    """Item 1's noisy count; D′ adds a user with 3l records of item 1."""
    def sample(side, trials, seed, spark):
        from dp_spark.bounding import user_records
        from dp_spark.families.counts import sampling

        bounded = user_records.sample_selection(records(spark, side, 3 * JOB_L), JOB_L, seed=BOUNDING_SEED)
        counts = sampling.bounded_counts(bounded, item_domain(), None, sampling.Publisher(), BOUNDING_SEED)
        split = sampling.default_split("sra", epsilon, False)
        return _first_item(counts, JOB_L, trials, split, epsilon, RandomSource(seed))
    return sample


HPA_ITEMS = 3  # few items: few rankings of the noisy popularity, each a Spark selection
HPA_D = 2
HPA_L = 1  # every user with two or more records is cut by the selection


def hpa_sampler(epsilon: Fraction):
    """HPA as the job runs it, with the selection steered by each trial's NOISY popularity.

    Per trial: the popularity (≤ d records per user, Laplace d/ε_p) is drawn, the items' scores
    max(ñ, 0) are ranked as ``sampling.hpa`` ranks them, and the counts are those of each user's
    l records of highest rank. The selection depends only on that ranking, so its bounded counts
    are computed on Spark once per ranking seen and cached. D′ adds a user with records of every
    item; the statistic adds item 1's popularity and count, each in units of its noise scale."""
    def sample(side, trials, seed, spark):
        from dp_spark.aggregates import item_edges
        from dp_spark.bounding import user_records
        from dp_spark.families.counts import sampling
        from dp_spark.release import hpa_selection

        data = records(spark, side, 3 * HPA_ITEMS, items=HPA_ITEMS, heavy_items=HPA_ITEMS)
        items = item_domain(HPA_ITEMS)
        popularity_true = item_edges.item_counts(item_edges.selected_edge_counts(
            user_records.sample_selection(data, HPA_D, seed=BOUNDING_SEED), items, None))
        split = sampling.default_split("hpa", epsilon, False)
        by_ranking: dict[tuple, object] = {}

        def counts_for(ranks: np.ndarray):
            key = tuple(int(r) for r in ranks)
            if key not in by_ranking:
                scored = hpa_selection.with_item_values(data, items, ranks, "_score_rank")
                chosen = user_records.top_selection(scored, HPA_L, "_score_rank", seed=BOUNDING_SEED)
                by_ranking[key] = sampling.bounded_counts(chosen, items, None, sampling.Publisher(), BOUNDING_SEED)
            return by_ranking[key]

        rng = RandomSource(seed)
        # Every trial's popularity in one call, a row each, then every trial of one ranking in one
        # call of publish_counts, its counts a row each: the laplace publisher noises every cell
        # independently, so the rows are the trials' releases (two calls per trial took 4 ms).
        popularity = publishers.publish("laplace", np.tile(popularity_true, (trials, 1)), HPA_D,
                                        split["epsilon_popularity"], Budget(epsilon), rng, "popularity").values
        rankings = [tuple(np.unique(np.maximum(row, 0), return_inverse=True)[1].tolist()) for row in popularity]
        out = popularity[:, 0] * float(split["epsilon_popularity"]) / HPA_D
        for ranking in dict.fromkeys(rankings):
            rows = np.flatnonzero([r == ranking for r in rankings])
            out[rows] += _first_item(counts_for(np.array(ranking)), HPA_L, rows.size, split, epsilon, rng) \
                * float(split["epsilon_items"]) / HPA_L
        return out
    return sample


def _first_item(counts, l: int, trials: int, split: dict, epsilon: Fraction, rng: RandomSource) -> np.ndarray:
    """Item 1's noisy count in ``trials`` releases of ``publish_counts`` on item ``counts`` (no
    edges), from one call on the counts repeated a row per trial: the laplace publisher noises
    every cell independently, so each row is one release."""
    from dp_spark.families.counts import sampling

    if counts.with_edges or counts.sampled_edges is not None:
        raise ValueError("only item counts through the laplace publisher repeat as rows")
    repeated = sampling.BoundedCounts(np.tile(counts.edges, (trials, 1)), None, False)
    release = sampling.publish_counts(repeated, l, split, Budget(epsilon), rng, sampling.Publisher())
    return release.item_counts.reshape(trials, -1)[:, 0]


DPSENSE_THETA_MAX = 4


def _dpsense_inputs(spark, side: int, scaled: bool, limit: str):
    """The Spark part of DPSense(-S) once per side: what the selection scores, and the limited
    column counts at every θ. D′ adds user 99 with a row of every item."""
    from dp_spark.bounding import item_rows
    from dp_spark.families.dpsense import columns as item_columns
    from dp_spark.families.dpsense import theta as dpsense

    data = records(spark, side, 0)
    if side:
        data = data.unionByName(spark.createDataFrame(
            pd.DataFrame({"user_id": 99, "item_id": np.arange(1, JOB_ITEMS + 1), ROW_KEY: 0})))
    items = item_domain()
    rows = item_rows.rows_of(data)
    try:
        scored = (item_columns.length_by_column(rows, items, DPSENSE_THETA_MAX, grid_bits=dpsense.QUALITY_GRID_BITS)
                  if scaled else item_columns.length_histogram(rows, DPSENSE_THETA_MAX))
        limited = {t: item_columns.limited_counts(rows, items, t, limit, BOUNDING_SEED, grid_bits=dpsense.GRID_BITS)
                   for t in range(1, DPSENSE_THETA_MAX + 1)}
    finally:
        rows.release()
    return scored, limited


def dpsense_sampler(epsilon: Fraction, limit: str = "normalize"):
    """θ by the exponential mechanism, then the counts at θ (normalised or sampled rows): the
    statistic is θ·1000 plus item 1's noisy count, so both outputs enter the event."""
    def sample(side, trials, seed, spark):
        from dp_spark.families.dpsense import theta as dpsense

        hist, limited = _dpsense_inputs(spark, side, scaled=False, limit=limit)
        split = dpsense.default_split(epsilon)
        rng = RandomSource(seed)
        # The first θ is choose_theta's own; the others draw the exponential mechanism it called,
        # with its entry and scores, all at once (the scores are the same every trial).
        budget = prim.RecordingBudget(epsilon)
        first = dpsense.choose_theta(hist, DPSENSE_THETA_MAX, JOB_ITEMS, split, budget, rng)
        entry, scores, monotone, index = budget.only_draw()
        if first != index + 1:
            raise AssertionError(f"choose_theta returned {first} for candidate {index}, not theta = {index + 1}")
        thetas = np.concatenate([[first], 1 + prim.exponential_rows(entry, scores, monotone, trials - 1, rng)])
        return thetas * 1000 + _first_column(thetas, limited, limit, split, epsilon, rng)
    return sample


def _first_column(thetas: np.ndarray, limited: dict, limit: str, split: dict, epsilon: Fraction,
                  rng: RandomSource) -> np.ndarray:
    """Item 1's noisy column count of each trial at its ``thetas``: one ``publish_columns`` call for
    all the trials of a θ, on its counts repeated once per trial. Its noise is independent from
    cell to cell, so each repeat is one release (a call per trial took 2 ms)."""
    from dp_spark.families.dpsense import theta as dpsense

    out = np.empty(thetas.size)
    for theta in np.unique(thetas).tolist():
        rows = np.flatnonzero(thetas == theta)
        counts = dpsense.publish_columns(np.tile(limited[theta], rows.size), theta, limit, split["epsilon_counts"],
                                         Budget(epsilon), rng)
        out[rows] = counts.reshape(rows.size, -1)[:, 0]
    return out


def dpsense_s_sampler(epsilon: Fraction):
    """DPSense-S: (θ, α) by one exponential mechanism, then the counts at θ scaled by α. The
    statistic is item 1's count read back from the output (released value / α) in units of θ,
    its noise scale: on 11 users the choice of (θ, α) is close to uniform and carries little
    signal, while mixing it into the statistic hid the counts' signal from the event search."""
    def sample(side, trials, seed, spark):
        from dp_spark.families.dpsense import theta as dpsense

        (by_length, long_units), limited = _dpsense_inputs(spark, side, scaled=True, limit="normalize")
        split = dpsense.default_split(epsilon)
        rng = RandomSource(seed)
        # choose_theta_alpha is this draw over these scores; the scores are the same every trial.
        # The first (θ, α) is draw_theta_alpha's own; the others draw the exponential mechanism it
        # called, with its entry and scores, all at once.
        budget = prim.RecordingBudget(epsilon)
        first, _alpha = dpsense.draw_theta_alpha(dpsense.theta_alpha_scores(by_length, long_units,
                                                                            DPSENSE_THETA_MAX, split),
                                                 split, budget, rng)
        entry, scores, monotone, index = budget.only_draw()
        per_theta = len(dpsense.ALPHAS)
        if first != index // per_theta + 1:
            raise AssertionError(f"draw_theta_alpha returned theta {first} for candidate {index}")
        rest = prim.exponential_rows(entry, scores, monotone, trials - 1, rng)
        thetas = np.concatenate([[first], rest // per_theta + 1])
        # The released count is counts[0] * α; α is released too.
        return _first_column(thetas, limited, "normalize", split, epsilon, rng) / thetas
    return sample


HISTOGRAM_EDGES = np.array([1, 2, 3, 4, 6])


def user_histogram_sampler(epsilon: Fraction):
    """Users per bin of their record count; D′ adds a user with 3 records (bin [3, 4))."""
    def sample(side, trials, seed, spark):
        from dp_spark.families.user_histogram import histogram
        from dp_spark.families.user_histogram import quantities as user_quantities

        counts = user_quantities.true_histogram(records(spark, side, 3), "records", HISTOGRAM_EDGES)
        rng = RandomSource(seed)
        bin_of_new_user = int(user_quantities.bin_of(np.array([3]), HISTOGRAM_EDGES)[0])
        # Every trial in one call, a row each: the publisher noises every cell independently, so row
        # i is trial i's release (one call per trial spent a millisecond on entries and checks).
        return histogram.publish_histogram(np.tile(counts, (trials, 1)), epsilon, Budget(epsilon),
                                           rng)[:, bin_of_new_user]
    return sample
