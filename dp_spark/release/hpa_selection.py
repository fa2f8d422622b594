"""HPA's bounding, shared by the counts and the means: noisy popularity from at most d records
per user, then each user's l records of highest noisy popularity (Fan and Jin, WWW 2015).

Claim (user level, pure ε-DP): the popularity counts come from a per-user uniform sample of at
most d records, so their L1 sensitivity is d and their discrete Laplace noise has scale
d/ε_popularity. Given those noisy counts (a DP output), keeping a user's l most popular records
is a transform of that user's records alone, so whatever is counted from the selection again
has sensitivity l (adaptive sequential composition). d is public. Claim in full: docs/sra_hpa.md,
"Privacy claim: hpa".
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark import publishers
from dp_spark.aggregates import item_edges
from dp_spark.bounding import keys, user_records
from dp_spark.bounding.cutoffs import long_array, score_cutoffs
from dp_spark.core.domain import ItemDomain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource

# Domains up to this size are looked up in an array literal rather than joined (with_item_values).
# The literal travels in every stage's task binary, so a large domain is broadcast instead.
LITERAL_LOOKUP_MAX_ITEMS = 100_000


def with_item_values(records: DataFrame, items: ItemDomain, values: np.ndarray, name: str) -> DataFrame:
    """``records`` with a long column ``name``: ``values[i]`` for the row of the i-th domain item.

    For an id range of at most LITERAL_LOOKUP_MAX_ITEMS items, the values are an array literal
    read at item_id − low: one string goes to Spark and is folded into the array once, and
    Spark's generated code reads it by reference. Against the broadcast join that serves other
    domains, HPA at 10M rows in one session: 5.81 → 5.38 s (docs/lab/performance.md, sixth round).
    A string domain (never a range) is joined on its string ids the same way.
    """
    values = np.asarray(values, dtype=np.int64)
    if items.id_range and len(items) <= LITERAL_LOOKUP_MAX_ITEMS:
        table = long_array(values.tolist())
        position = (F.col("item_id") - F.lit(items.id_range[0]) + 1).cast("int")
        return records.withColumn(name, F.element_at(table, position))
    # Through Arrow: a list of 17,770 Python tuples took a few tenths of a second to ship.
    ids = items.ids if items.is_string else np.asarray(items.ids, dtype=np.int64)
    lookup = records.sparkSession.createDataFrame(pd.DataFrame({"item_id": ids, name: values}))
    return records.join(F.broadcast(lookup), "item_id")


@dataclass(frozen=True)
class Popularity:
    """HPA's noisy popularity: ``scores[i]`` = max(ñ_i, 0) for the i-th domain item (a DP output),
    and the popularity sample's rows (NOT private: a diagnostic)."""

    scores: np.ndarray
    sample_rows: int


def noisy_popularity(records: DataFrame, items: ItemDomain, d: int, epsilon_popularity: Fraction, budget: Budget,
                     rng: RandomSource, seed: int | None = None, user_counts: DataFrame | None = None,
                     users_by_n: pd.Series | None = None, one_per_user: DataFrame | None = None) -> Popularity:
    """HPA's first step: item counts of ≤ d records per user with discrete Laplace noise of scale
    d/ε_popularity (ledger step "popularity", paid from ``budget``).

    Scoring by max(ñ_i, 0) orders the items as the paper's normalised p̃_i does, and stays in
    exact integers; if every ñ_i ≤ 0 all scores tie and the selection is uniform, as with p̃_i = 1/m.

    ``one_per_user`` (DataFrame[user_id, _sampled_item], one record drawn uniformly per user
    of ``records``: ``io.validate_records``' sample) is the popularity sample when d = 1, and
    saves the pass that would draw it. It is the same per-user uniform sample of one record, so
    the popularity counts keep L1 sensitivity d = 1 and the proof of specification §3.2 holds
    as it is.
    """
    if d == 1 and one_per_user is not None:
        sampled = one_per_user.select(F.col("_sampled_item").alias("item_id"))
        popularity_true = item_edges.item_counts(item_edges.edge_counts(sampled, items, None))
    else:
        popularity_sample = user_records.sample_selection(
            records.select("user_id", "item_id", keys.ROW_KEY), d, seed=seed, counts=user_counts, users_by_n=users_by_n
        )
        popularity_true = item_edges.item_counts(item_edges.selected_edge_counts(popularity_sample, items, None))
    popularity = publishers.publish("laplace", popularity_true, d, epsilon_popularity, budget, rng, "popularity")
    return Popularity(np.maximum(popularity.values, 0), int(popularity_true.sum()))


def hpa_selection(records: DataFrame, items: ItemDomain, l: int, popularity: Popularity, seed: int | None = None,
                  user_counts: DataFrame | None = None,
                  users_by_n: pd.Series | None = None) -> user_records.Selection:
    """HPA's bounding given its noisy popularity (:func:`noisy_popularity`): each user's l records
    of highest score, ties at random. The selection, planned, not computed."""
    item_scores = popularity.scores
    # The selection orders by each score's rank among the distinct scores, which orders the same
    # (and keeps the generated code the same from run to run: docs/lab/performance.md, fifth round).
    distinct_scores, item_ranks = np.unique(item_scores, return_inverse=True)
    scored = with_item_values(records, items, item_ranks, "_score_rank")
    # The cutoffs only decide which rows the selection looks at, never its result.
    cutoffs = [(min_rows, int(np.searchsorted(distinct_scores, score)))
               for min_rows, score in score_cutoffs(item_scores, l)]
    return user_records.top_selection(scored, l, "_score_rank", seed=seed, counts=user_counts, cutoffs=cutoffs,
                                      users_by_n=users_by_n)
