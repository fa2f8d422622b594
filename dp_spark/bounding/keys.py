"""Record ids, salts and the keyed random position that per-user sampling orders rows by.

Each row's position is a keyed hash of (salt, user, record id), not ``rand()``: it does not
depend on row order or partitioning, so a task that Spark retries picks exactly the same rows.

Assumed (docs/sra_hpa.md, "Privacy claim: sra"): the salt is fresh and secret, and the hash is
treated as a random function. The record id is the row's position in the scan, so a user's ids
shift when another user's rows come before them; only under a secret salt is each user's sample
uniform and independent of everyone else's. A salt derived from a seed is known, and a seeded
release has no guarantee anyway (docs/mechanisms.md, "Privacy claim: RandomSource").
"""

from __future__ import annotations

import hashlib
import secrets

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def with_record_id(df: DataFrame) -> DataFrame:
    """Tag each row with its position in the scan (the record id that sampling keys hash); call before any shuffle."""
    return df.withColumn("record_id", F.monotonically_increasing_id())


def new_salt(seed: int | None, purpose: str) -> int:
    """A 63-bit salt: secret and fresh without a seed, derived from it with one."""
    if seed is None:
        return secrets.randbits(63)
    digest = hashlib.sha256(f"dp-spark:{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def sample_salt(seed: int | None) -> int:
    """The salt :func:`dp_spark.bounding.user_records.sample_selection` draws its sample under
    when none is given; a sample drawn elsewhere under it (``io.validate_records``' one record per
    user) picks the same rows."""
    return new_salt(seed, "sample_per_user")


def key_columns(df: DataFrame, user_col: str) -> list[str]:
    """Hash inputs that tell rows apart: the scan-time record id when present
    (the cheap choice: no other column has to be read), else every column.
    Rows identical in these columns share a key, so without ``record_id``
    exact duplicates are sampled together."""
    if "record_id" in df.columns:
        return [user_col, "record_id"]
    return list(df.columns)


def row_position(df: DataFrame, user_col: str, salt: int) -> Column:
    """The row's random position: a 63-bit non-negative integer from the keyed hash.
    Distinct rows of a user tie with probability about n²/2^64.

    The salt goes in as 8 bytes, not as a long: Spark writes a long literal into the code it
    generates, so each fresh salt would compile the stage, and warm up the compiled code, anew;
    bytes are passed by reference, and the stage compiled for one run serves the next (runs at
    10M rows in one session: HPA 6.67 → 6.07 s, SRA 4.13 → 3.89 s; docs/performance.md, fifth
    round)."""
    return keyed_position([F.col(c) for c in key_columns(df, user_col)], salt)


def keyed_position(key: list[Column], salt: int) -> Column:
    """:func:`row_position` of the row whose key columns (user first, then what tells its rows
    apart) are ``key``."""
    return F.shiftrightunsigned(F.xxhash64(F.lit(salt.to_bytes(8, "big")), *key), 1)
