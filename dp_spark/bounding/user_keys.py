"""Each user's distinct keys, at most ``l0`` of them, for private partition selection
(docs/partition_selection.md).

A user keeps all of its distinct keys when it has at most ``l0``, else ``l0`` of them uniformly
at random: those with the smallest keyed hash of (salt, user, key). The hash reads only the
user's own (user, key) pairs, not a scan position, so which keys a user keeps does not depend on
any other user, even under a known salt (:mod:`dp_spark.bounding.keys`); the salt reaches the
rows as data, not as a literal in the plan. Adding or removing a
user then changes the per-key user counts of at most ``l0`` keys, each by one.

The key column keeps its type: integer and string ids alike.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.bounding.keys import keyed_position, new_salt, text_user, with_salt

SALT_PURPOSE = "partition_selection_keys"


def bounded_keys(records: DataFrame, l0: int, seed: int | None, user_col: str = "user_id",
                 key_col: str = "item_id", salt: int | None = None) -> DataFrame:
    """DataFrame[user_col, key_col]: each user's distinct non-null keys, at most ``l0`` of them
    drawn uniformly (one row per kept pair). ``salt``: fresh and secret unless ``seed`` is given."""
    if isinstance(l0, bool) or not isinstance(l0, int) or l0 < 1:
        raise ValueError(f"l0 must be an integer >= 1, got {l0!r}")
    salt = new_salt(seed, SALT_PURPOSE) if salt is None else salt
    pairs = records.select(user_col, key_col).where(F.col(key_col).isNotNull()).distinct()
    order = keyed_position([F.col(user_col), F.col(key_col)], text_user=text_user(records, user_col))
    kept = (with_salt(pairs, salt).withColumn("_order", order)
            .groupBy(user_col).agg(F.min_by(key_col, "_order", l0).alias("_keys")))
    return kept.select(user_col, F.explode("_keys").alias(key_col))
