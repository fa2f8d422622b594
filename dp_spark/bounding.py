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

Cost (docs/performance.md). The selection is one aggregation per user,
``min_by(row, order, l)``, which keeps a bounded heap per user instead of
sorting the user's rows with a window. Spark runs it as a sort-based
aggregate, so it is fed as few rows as possible: with each user's row count
known (one cheap hash aggregation, shared with input validation), a heavy
user's rows are pre-filtered with keep probability (l + 6(√l + 2))/n, which
leaves about 40 rows per user at l = 10 and never changes the result (users
left short are redone exactly).
"""

from __future__ import annotations

import hashlib
import math
import secrets

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


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


def _position(df: DataFrame, user_col: str, salt: int) -> Column:
    """The row's random position: a 63-bit non-negative integer from the keyed hash.
    Distinct rows of a user tie with probability about n²/2^64."""
    key = F.xxhash64(F.lit(salt), *[F.col(c) for c in _key_columns(df, user_col)])
    return F.shiftrightunsigned(key, 1)


def user_counts(df: DataFrame, user_col: str = "user_id") -> DataFrame:
    """DataFrame[user_col, _n]: each user's number of rows (one hash aggregation)."""
    return df.groupBy(user_col).agg(F.count(F.lit(1)).alias("_n"))


def _smallest_per_user(df: DataFrame, l: int, order: Column, user_col: str, columns: list[str], *extra) -> DataFrame:
    """Each user's ``l`` rows with the smallest ``order`` as an array ``_rows``,
    plus any ``extra`` aggregates."""
    row = F.struct(*[F.col(c) for c in columns if c != user_col])
    return df.groupBy(user_col).agg(F.min_by(row, order, l).alias("_rows"), *extra)


def _rows_of(selected: DataFrame, user_col: str, columns: list[str]) -> DataFrame:
    exploded = selected.select(user_col, F.explode("_rows").alias("_row"))
    return exploded.select(*[F.col(user_col) if c == user_col else F.col(f"_row.`{c}`").alias(c) for c in columns])


def sample_per_user(
    df: DataFrame,
    l: int,
    seed: int | None = None,
    user_col: str = "user_id",
    *,
    salt: int | None = None,
    counts: DataFrame | None = None,
    oversample: float = 6.0,
) -> DataFrame:
    """At most ``l`` rows per user, a uniform sample without replacement.

    The sample is exactly each user's ``l`` rows of smallest random position;
    users with ≤ l rows keep all of them. ``counts`` (from :func:`user_counts`
    on the same ``df``) saves a pass when the caller has it. Heavy users' rows
    are pre-filtered with keep probability (l + oversample·(√l + 2))/n; a user
    left with fewer than l candidates (probability below 10^-8 per user at the
    default) is redone from all of its rows, so the pre-filter never changes
    the result; ``oversample`` only trades rows aggregated against how often
    that happens. Returns the columns of ``df``.
    """
    if l < 1:
        raise ValueError(f"l must be >= 1, got {l}")
    salt = new_salt(seed, "sample_per_user") if salt is None else salt
    counts = user_counts(df, user_col) if counts is None else counts
    columns = df.columns
    keyed = df.withColumn("_position", _position(df, user_col, salt)).join(F.broadcast(counts), user_col)
    # Comparing as doubles is monotone in _position, so the candidates always
    # include every row smaller than any candidate: the pre-filter is exact.
    keep_below = F.lit((l + oversample * (math.sqrt(l) + 2)) * 2.0**63) / F.col("_n")
    candidates = keyed.where((F.col("_n") <= l) | (F.col("_position") < keep_below))
    # One eager pass: materialise each user's selection once (small: at most l
    # rows per user), so checking for short users does not aggregate again.
    selected = _smallest_per_user(candidates, l, F.col("_position"), user_col, columns, F.max("_n").alias("_n"))
    selected = selected.localCheckpoint(eager=True)
    short = F.size("_rows") < F.least(F.col("_n"), F.lit(l))
    sample = _rows_of(selected.where(~short), user_col, columns)
    short_users = selected.where(short).select(user_col)
    if short_users.isEmpty():
        return sample
    redone = _smallest_per_user(
        keyed.join(short_users, user_col, "left_semi"), l, F.col("_position"), user_col, columns
    )
    return sample.unionByName(_rows_of(redone, user_col, columns))


def score_thresholds(scores, l: int) -> list[int]:
    """Strictly decreasing score values at ranks l, 2l, 4l, ... of ``scores``: the
    levels :func:`top_per_user` pre-filters by. Derived from public scores only."""
    ranked = sorted((int(s) for s in scores), reverse=True)
    thresholds: list[int] = []
    rank = l
    while rank <= len(ranked):
        value = ranked[rank - 1]
        if not thresholds or value < thresholds[-1]:
            thresholds.append(value)
        rank *= 2
    return thresholds


def top_per_user(
    df: DataFrame,
    l: int,
    score_col: str,
    seed: int | None = None,
    user_col: str = "user_id",
    *,
    salt: int | None = None,
    thresholds: list[int] | None = None,
) -> DataFrame:
    """Each user's ``l`` rows with the highest ``score_col`` (a non-null
    integer); ties broken uniformly at random (by the row's random position).
    Users with ≤ l rows keep all.

    The score must be public or a DP output (HPA: noisy popularity), so the
    selection stays a per-user transform.

    With ``thresholds`` (strictly decreasing, e.g. :func:`score_thresholds`) a
    row's level is the first j with score ≥ thresholds[j]. One hash
    aggregation counts each user's rows by level, and only the rows up to the
    first level holding l of them go into the per-user selection. Rows left
    out score strictly below all l or more rows kept, so they could never be
    chosen: the result is exactly the same, with far fewer rows aggregated.
    """
    if l < 1:
        raise ValueError(f"l must be >= 1, got {l}")
    salt = new_salt(seed, "top_per_user") if salt is None else salt
    columns = df.columns
    order = F.struct((-F.col(score_col)).alias("_score"), _position(df, user_col, salt).alias("_position"))
    if thresholds:
        if any(a <= b for a, b in zip(thresholds, thresholds[1:])):
            raise ValueError("thresholds must be strictly decreasing")
        top = len(thresholds)
        level = F.when(F.col(score_col) >= thresholds[0], 0)
        for j, value in enumerate(thresholds[1:], 1):
            level = level.when(F.col(score_col) >= value, j)
        leveled = df.withColumn("_level", level.otherwise(top))
        per_user = leveled.groupBy(user_col).agg(
            *[F.sum((F.col("_level") <= j).cast("long")).alias(f"_up_to_{j}") for j in range(top)]
        )
        keep_to = per_user.select(
            user_col, F.least(*[F.when(F.col(f"_up_to_{j}") >= l, j) for j in range(top)], F.lit(top)).alias("_keep_to")
        )
        df = leveled.join(F.broadcast(keep_to), user_col).where(F.col("_level") <= F.col("_keep_to"))
    return _rows_of(_smallest_per_user(df, l, order, user_col, columns), user_col, columns)
