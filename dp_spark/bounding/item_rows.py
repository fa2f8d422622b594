"""DPSense's rows and their limit θ (specification §4.2, §4.3).

A user's row is its set of distinct items, built from that user's records alone. A row longer
than θ is cut down to mass θ: by normalisation, each of its r ones weighing ⌊min(1, θ/r)·2^k⌋
grid units, so the row adds r·⌊θ·2^k/r⌋ ≤ θ·2^k; or by sampling θ of its ones with the keyed
sampler of :mod:`dp_spark.bounding.user_records`. Either way one user adds at most θ to the column
counts in L1 (docs/dpsense.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dp_spark.bounding.keys import ROW_KEY, new_salt
from dp_spark.bounding.user_records import Selection, sample_selection

LIMITS = ("normalize", "sample")


@dataclass
class Rows:
    """One row per user: its distinct in-domain items (cached; call ``release``).

    ``users_by_length``, when known (validation gives it with the rows), is the number of users
    (values) whose row has each length r (index): the length histogram and the truncation
    figures then come from it on the driver, without a job. ``owned`` says whether ``release``
    drops the cache (False when the rows are part of a cache someone else releases)."""

    per_user: DataFrame  # [user_id, _items array<long>, _r]
    users_by_length: pd.Series | None = None
    owned: bool = True

    @property
    def ones(self) -> DataFrame:
        """[user_id, item_id, _r]: one line per one of the matrix."""
        return self.per_user.select("user_id", F.explode("_items").alias("item_id"), "_r")

    def release(self) -> None:
        if self.owned:
            self.per_user.unpersist()

    def truncation(self, theta: int) -> dict:
        """NOT private, for the operator: users, their distinct (user, item) pairs, the pairs a
        limit of θ keeps (Σ min(r, θ); by normalisation a long row keeps that mass, spread over
        all of its items) and the users whose row is longer than θ. One job on the cached rows,
        or none when the users by row length are known."""
        if self.users_by_length is not None:
            return truncation_of(self.users_by_length, theta)
        r, limit = F.col("_r"), F.lit(theta)
        stats = self.per_user.agg(F.count(F.lit(1)).alias("users"), F.sum(r).alias("pairs"),
                                  F.sum(F.least(r, limit)).alias("kept"),
                                  F.sum((r > limit).cast("long")).alias("truncated")).first()
        return {name: int(stats[name] or 0) for name in ("users", "pairs", "kept", "truncated")}


def truncation_of(users_by_length: pd.Series, theta: int) -> dict:
    """:meth:`Rows.truncation` from the number of users (values) with each row length (index)."""
    lengths = users_by_length.index.to_numpy(dtype=np.int64)
    users = users_by_length.to_numpy(dtype=np.int64)
    return {"users": int(users.sum()), "pairs": int((lengths * users).sum()),
            "kept": int((np.minimum(lengths, theta) * users).sum()), "truncated": int(users[lengths > theta].sum())}


def rows_of(records: DataFrame) -> Rows:
    """Each user's set of distinct items, in one shuffle (duplicates count once)."""
    per_user = (records.groupBy("user_id").agg(F.collect_set("item_id").alias("_items"))
                .withColumn("_r", F.size("_items")).persist(StorageLevel.MEMORY_AND_DISK))
    return Rows(per_user)


def normalized_weight(theta: int, grid_bits: int) -> Column:
    """The weight of each one of :attr:`Rows.ones`, ⌊min(1, θ/r)·2^k⌋ in grid units 2^-k, an
    integer (``θ·2^k div r`` in Spark SQL): a row adds at most θ·2^k."""
    unit = 1 << grid_bits
    return F.least(F.lit(unit), F.expr(f"{theta * unit} div _r"))


def sampled_ones(rows: Rows, theta: int, seed: int | None) -> Selection:
    """θ ones of every longer row, drawn uniformly with the keyed sampler; shorter rows keep all."""
    ones = rows.ones.withColumn(ROW_KEY, F.col("item_id"))  # a row's items are distinct: the item is the key
    counts = rows.per_user.select("user_id", F.col("_r").alias("_n"))
    return sample_selection(ones, theta, salt=new_salt(seed, "dpsense_rows"), counts=counts,
                            users_by_n=rows.users_by_length)
