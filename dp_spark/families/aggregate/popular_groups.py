"""HPA's popular-first choice applied to groups (paper 000's HPA, with groups for items): each user
keeps the ``l`` groups of highest noisy popularity rather than a uniform sample of ``l``.

Popularity: each user puts forward at most ``d`` of its groups, a uniform sample keyed on the
user's own records (bounding.user_groups with a salt of its own), and the users per group are
counted; discrete Laplace noise of scale d/ε_popularity makes them a DP output (ledger step
"popularity", L1 sensitivity d: one user moves at most d counts by one). Its share of ε is
POPULARITY_SHARE, as for the means' HPA.

Choice: the noisy counts, clamped at zero, ranked; a user keeps its groups of highest rank, ties
in the user's random order (bounding.user_groups' ``score``). Given the noisy popularity, which
groups a user keeps is a function of that user's records alone, so the tables and histograms that
follow keep their sensitivities (adaptive sequential composition). Claim: docs/aggregate.md,
"Privacy claim: aggregate".
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark import publishers
from dp_spark.aggregates.group_totals import group_totals
from dp_spark.bounding.user_groups import bounded_groups
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.io.sql_literals import int_array

POPULARITY_SHARE = Fraction(1, 10)  # of ε (under zCDP, of ρ), before the metrics' equal parts
STEP = "popularity"
SPLIT_KEY = "epsilon_popularity"
SCORE = "_popularity_rank"
# Up to this many groups the ranks are an array literal read at the group index; beyond, a
# broadcast join of (group, rank).
LITERAL_GROUPS = 100_000


def popularity_ranks(grouped: DataFrame, group: str, groups: int, d: int, epsilon: Fraction, budget: Budget,
                     rng: RandomSource, seed: int | None, user_col: str = "user_id") -> np.ndarray:
    """Each group's rank among the distinct noisy popularities (clamped at zero), paid through
    ``budget`` as STEP. ``grouped``: run.grouped_records' records (user, group index, row key)."""
    sample = bounded_groups(grouped, group, d, 1, seed, user_col, purpose="group_popularity")
    users = group_totals(sample, group, groups, user_col=user_col).users
    noisy = publishers.publish("laplace", users, d, epsilon, budget, rng, STEP)
    _distinct, ranks = np.unique(np.maximum(np.asarray(noisy.values), 0), return_inverse=True)
    return ranks.astype(np.int64)


def with_ranks(grouped: DataFrame, group: str, ranks: np.ndarray) -> DataFrame:
    """``grouped`` with SCORE, its group's rank (a function of the group alone)."""
    if len(ranks) <= LITERAL_GROUPS:
        return grouped.withColumn(SCORE, F.element_at(int_array(ranks), (F.col(group) + 1).cast("int")))
    table = grouped.sparkSession.createDataFrame(pd.DataFrame({group: np.arange(len(ranks), dtype=np.int64),
                                                               SCORE: ranks}))
    return grouped.join(F.broadcast(table), group)
