"""Location entropy's per-user bound (ALGORITHMS.md §7.3 (a)): each user keeps at most M
locations and at most C visits at each.

Privacy property relied on: which locations a user keeps, and how many visits, is decided from
that user's own check-ins alone, so adding or removing a user changes the bounded pairs only by
that user's at most M pairs, each of at most C visits (docs/location_entropy.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dp_spark.bounding.keys import keyed_position


def bounded_pairs(checkins: DataFrame, locations_per_user: int, visits_per_location: int,
                  random_salt: int | None = None) -> DataFrame:
    """[user_id, item_id, c]: each user's first ``locations_per_user`` (M) locations by its own
    first visit (ties by location id; no time counts as latest), visits capped at
    ``visits_per_location`` (C). With ``random_salt`` the M are a uniformly random choice among
    the user's locations instead (a keyed hash of salt, user and location; time is not used)."""
    pairs = checkins.groupBy("user_id", "item_id").agg(F.sum("visits").alias("c"), F.min("time").alias("first"))
    by = [keyed_position([F.col("user_id"), F.col("item_id")], random_salt)] if random_salt is not None \
        else [F.col("first").asc_nulls_last(), F.col("item_id")]
    order = Window.partitionBy("user_id").orderBy(*by)
    ranked = pairs.withColumn("_rank", F.row_number().over(order))
    return ranked.where(F.col("_rank") <= locations_per_user).select(
        "user_id", "item_id", F.least(F.col("c"), F.lit(visits_per_location)).alias("c"))
