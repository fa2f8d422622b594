"""Location entropy's per-user bound (specification §7.3 (a)): each user keeps at most M
locations and at most C visits at each.

Privacy property relied on: which locations a user keeps, and how many visits, is decided from
that user's own check-ins alone, so adding or removing a user changes the bounded pairs only by
that user's at most M pairs, each of at most C visits (docs/location_entropy.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dp_spark.bounding.keys import keyed_position, text_user, with_salt

# The coverage columns of bounded_pairs (NOT private; summed by families.location_entropy.sums).
COVERAGE_COLUMNS = ("_coverage_users", "_coverage_pairs", "_coverage_users_truncated", "_coverage_visits")


def bounded_pairs(checkins: DataFrame, locations_per_user: int, visits_per_location: int,
                  random_salt: int | None = None) -> DataFrame:
    """[user_id, item_id, c, *COVERAGE_COLUMNS]: each user's first ``locations_per_user`` (M)
    locations by its own first visit (ties by location id; no time counts as latest), visits
    capped at ``visits_per_location`` (C). With ``random_salt`` the M are a uniformly random
    choice among the user's locations instead (a keyed hash of salt, user and location; time is
    not used).

    The coverage columns let the location sums count, in the same job, what bounding did (for
    the operator, NOT private): on each user's first pair, 1 (a user), the user's number of
    locations and of visits before bounding, and 1 if it has more than M locations. Those are
    counts over the ranking's own window (a frame of the whole user), so they need no shuffle or
    sort of their own."""
    ranked = _ranked(checkins, random_salt)
    first = F.col("_rank") == 1
    return ranked.where(F.col("_rank") <= locations_per_user).select(
        "user_id", "item_id", F.least(F.col("c"), F.lit(visits_per_location)).alias("c"),
        first.cast("long").alias("_coverage_users"),
        F.when(first, F.col("_locations")).otherwise(0).cast("long").alias("_coverage_pairs"),
        (first & (F.col("_locations") > locations_per_user)).cast("long").alias("_coverage_users_truncated"),
        F.when(first, F.col("_visits")).otherwise(0).cast("long").alias("_coverage_visits"))


def ranked_pairs(checkins: DataFrame, locations_per_user: int, visits_per_location: int,
                 random_salt: int | None = None) -> DataFrame:
    """[user_id, item_id, c, rank, locations, visits]: what :func:`bounded_pairs` keeps at the
    largest candidate bounds (M_K, C_K), with each pair's rank in its user's own order and the
    user's locations and visits before bounding. The pairs bounded_pairs keeps at any M ≤ M_K,
    C ≤ C_K are those of rank ≤ M, with c capped at C: one ranking serves every candidate
    (the private choice of M and C, families.location_entropy.bounds_choice)."""
    ranked = _ranked(checkins, random_salt)
    return ranked.where(F.col("_rank") <= locations_per_user).select(
        "user_id", "item_id", F.least(F.col("c"), F.lit(visits_per_location)).alias("c"),
        F.col("_rank").alias("rank"), F.col("_locations").alias("locations"), F.col("_visits").alias("visits"))


def _ranked(checkins: DataFrame, random_salt: int | None) -> DataFrame:
    """Each (user, location) pair with its visits c, its rank in the user's own order (first
    visit, or the keyed hash with ``random_salt``), and the user's locations and visits."""
    pairs = checkins.groupBy("user_id", "item_id").agg(F.sum("visits").alias("c"), F.min("time").alias("first"))
    if random_salt is not None:
        pairs = with_salt(pairs, random_salt)
    by = [F.col("first").asc_nulls_last(), F.col("item_id")] if random_salt is None \
        else [keyed_position([F.col("user_id"), F.col("item_id")], text_user=text_user(checkins))]
    order = Window.partitionBy("user_id").orderBy(*by)
    whole_user = order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    return pairs.withColumns({"_rank": F.row_number().over(order), "_locations": F.count(F.lit(1)).over(whole_user),
                              "_visits": F.sum("c").over(whole_user)})
