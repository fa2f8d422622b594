"""Per-user contribution bounding: DataFrame -> DataFrame transforms, no noise.

Privacy property relied on (ALGORITHMS.md §1.1 rule 1, paper 000 Lemma 6):
every transform here decides a user's kept rows from that user's own rows and
a random key, never from other users' data. Adding or removing a user
therefore changes the output only by that user's kept rows, of which there
are at most ``l``. Counts over the result have L1 sensitivity ``l``.

Randomness. Each row's sampling key is a keyed hash of (salt, user, row id),
not ``rand()``: the key does not depend on row order or partitioning, so a task
that Spark retries picks exactly the same rows. The salt is a fresh secret per
run unless a seed is given. The DP guarantee comes from the noise added later
and does not depend on the keys being secret; the keys only make the sample
uniform.

Cost. Users with at most ``l`` rows keep everything, without a sort. For the
others a per-user count sets an oversampled keep-probability, so only about
``l + 6(√l + 2)`` rows per heavy user reach the exact top-``l`` selection (a
window sort) instead of all of them (ALGORITHMS.md §10, DESIGN.md hot paths).
"""

from __future__ import annotations

import hashlib
import math
import secrets

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

_UNIFORM_BITS = 53  # the top 53 bits of the key, as an exact integer in a double's range


def new_salt(seed: int | None, purpose: str) -> int:
    """A 63-bit salt: secret and fresh without a seed, derived from it with one."""
    if seed is None:
        return secrets.randbits(63)
    digest = hashlib.sha256(f"dp-spark:{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _key_columns(df: DataFrame, user_col: str) -> list[str]:
    """Hash inputs that tell rows apart: the scan-time record id when present
    (the cheap choice: no other column has to be read), else every column.
    Rows identical in these columns share a key, so without ``record_id``
    exact duplicates are sampled together."""
    if "record_id" in df.columns:
        return [user_col, "record_id"]
    return list(df.columns)


def _keyed_with_counts(df: DataFrame, user_col: str, salt: int) -> DataFrame:
    """Adds ``_n`` (the user's row count), ``_u`` (uniform in [0, 2^53)) and ``_key``."""
    key = F.xxhash64(F.lit(salt), *[F.col(c) for c in _key_columns(df, user_col)])
    per_user = df.groupBy(user_col).agg(F.count(F.lit(1)).alias("_n"))
    return (
        df.join(per_user, user_col)
        .withColumn("_key", key)
        .withColumn("_u", F.shiftrightunsigned(F.col("_key"), 64 - _UNIFORM_BITS))
    )


def _rank(df: DataFrame, user_col: str, order: list[Column]) -> DataFrame:
    return df.withColumn("_rank", F.row_number().over(Window.partitionBy(user_col).orderBy(*order)))


def sample_per_user(
    df: DataFrame,
    l: int,
    seed: int | None = None,
    user_col: str = "user_id",
    *,
    salt: int | None = None,
    oversample: float = 6.0,
) -> DataFrame:
    """At most ``l`` rows per user, a uniform sample without replacement.

    Users with ≤ l rows keep all of them. The sample is exactly "the l rows
    with the smallest keys": a heavy user's rows are pre-filtered with keep
    probability (l + oversample·(√l + 2))/n; if fewer than l survive (rare),
    that user is redone from all of its rows, so the pre-filter never changes
    the result. ``oversample`` only trades sort size against how often that
    happens. Returns the columns of ``df``.
    """
    if l < 1:
        raise ValueError(f"l must be >= 1, got {l}")
    salt = new_salt(seed, "sample_per_user") if salt is None else salt
    keyed = _keyed_with_counts(df, user_col, salt)
    heavy = F.col("_n") > l
    expected = l + oversample * (math.sqrt(l) + 2)
    keep_below = F.lit(expected * 2.0**_UNIFORM_BITS) / F.col("_n")
    order = [F.col("_u"), F.col("_key")]

    ranked = _rank(keyed.where(heavy & (F.col("_u") < keep_below)), user_col, order).withColumn(
        "_candidates", F.count(F.lit(1)).over(Window.partitionBy(user_col))
    )
    complete = ranked.where((F.col("_candidates") >= l) & (F.col("_rank") <= l))
    short_users = ranked.where(F.col("_candidates") < l).select(user_col).distinct()
    redone = _rank(keyed.where(heavy).join(short_users, user_col, "left_semi"), user_col, order)
    light = keyed.where(~heavy)
    columns = df.columns
    return (
        light.select(columns)
        .unionByName(complete.select(columns))
        .unionByName(redone.where(F.col("_rank") <= l).select(columns))
    )


def top_per_user(
    df: DataFrame,
    l: int,
    score_col: str,
    seed: int | None = None,
    user_col: str = "user_id",
    *,
    salt: int | None = None,
) -> DataFrame:
    """Each user's ``l`` rows with the highest ``score_col``; ties broken
    uniformly at random (by the row's key). Users with ≤ l rows keep all.

    The score must be public or a DP output (HPA: noisy popularity), so the
    selection stays a per-user transform.
    """
    if l < 1:
        raise ValueError(f"l must be >= 1, got {l}")
    salt = new_salt(seed, "top_per_user") if salt is None else salt
    keyed = _keyed_with_counts(df, user_col, salt)
    heavy = F.col("_n") > l
    ranked = _rank(keyed.where(heavy), user_col, [F.col(score_col).desc(), F.col("_u"), F.col("_key")])
    columns = df.columns
    return keyed.where(~heavy).select(columns).unionByName(ranked.where(F.col("_rank") <= l).select(columns))
