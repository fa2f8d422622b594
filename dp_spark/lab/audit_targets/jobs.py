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
        rng = RandomSource(seed)
        return np.array([sampling.publish_counts(counts, JOB_L, split, Budget(epsilon), rng,
                                                 sampling.Publisher()).item_counts[0] for _ in range(trials)])
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
        out = np.empty(trials)
        for t in range(trials):
            budget = Budget(epsilon)
            popularity = publishers.publish("laplace", popularity_true, HPA_D, split["epsilon_popularity"], budget,
                                            rng, "popularity")
            _distinct, ranks = np.unique(np.maximum(popularity.values, 0), return_inverse=True)
            release = sampling.publish_counts(counts_for(ranks), HPA_L, split, budget, rng, sampling.Publisher())
            out[t] = (popularity.values[0] * float(split["epsilon_popularity"]) / HPA_D
                      + release.item_counts[0] * float(split["epsilon_items"]) / HPA_L)
        return out
    return sample


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
        out = np.empty(trials)
        for t in range(trials):
            budget = Budget(epsilon)
            theta = dpsense.choose_theta(hist, DPSENSE_THETA_MAX, JOB_ITEMS, split, budget, rng)
            counts = dpsense.publish_columns(limited[theta], theta, limit, split["epsilon_counts"], budget, rng)
            out[t] = theta * 1000 + counts[0]
        return out
    return sample


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
        scores = dpsense.theta_alpha_scores(by_length, long_units, DPSENSE_THETA_MAX, split)
        out = np.empty(trials)
        for t in range(trials):
            budget = Budget(epsilon)
            theta, _alpha = dpsense.draw_theta_alpha(scores, split, budget, rng)
            counts = dpsense.publish_columns(limited[theta], theta, "normalize", split["epsilon_counts"], budget, rng)
            out[t] = counts[0] / theta  # the released count is counts[0] * α; α is released too
        return out
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
        return np.array([histogram.publish_histogram(counts, epsilon, Budget(epsilon), rng)[bin_of_new_user]
                         for _ in range(trials)])
    return sample
