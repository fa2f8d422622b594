"""Row keys, salts and the keyed random position that per-user sampling orders rows by.

A row's position is a keyed hash of (salt, user, row key), not ``rand()``: a task that Spark
retries picks exactly the same rows. The row key (:func:`with_row_key`) is a hash of the row's own
content and of its occurrence index among the user's identical rows (0 for the first copy, 1 for
the second, ...). So a row's position is a function of the salt and of that user's records alone:
adding, removing or moving another user's records, in the scan or across partitions, changes no
other user's positions, whatever the salt and whether or not it is known. The sensitivity argument
of every sampler built on it (:mod:`dp_spark.bounding.user_records`) therefore needs no secret and
no cryptographic property of the hash (docs/sra_hpa.md, "Privacy claim: sra").

What the hash is assumed to do is for utility only: that under a fresh salt the positions of a
user's distinct rows behave like independent uniform draws, so that the l smallest are a uniform
sample of the user's records, duplicates included (each copy has its own occurrence index, and so
its own position). Two different rows of a user get the same position with probability about
n²/2^64; they are then ordered arbitrarily.

Identical records need their occurrence index, which takes a shuffle of every record (a window
over user and content): SRA at 10M rows took 13.8 s with it and 3.4 s without, against 2.1 s for
a non-private count (docs/lab/performance.md, "Sampling keys from each user's own records"). A source
whose records are known to be distinct (each user has each content at most once, as in a ratings
table keyed by user and item) skips it with ``distinct=True``: every occurrence index is then 0.
If that declaration is wrong, a user's identical records share one position and are kept or
dropped together: still a function of that user's records alone (private as before), but no
longer a uniform sample for that user. The same holds for identical records of one user whose
text id is spelled two ways ("7" and "07", one user to validation): they are numbered apart.

The salt never enters a Spark plan as a literal: :func:`with_salt` joins a one-row table that
holds it, so explain(), the SQL tab and the event log show a column, not its value.
"""

from __future__ import annotations

import hashlib
import secrets

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

ROW_KEY = "row_key"  # a row's content and occurrence index among its user's identical rows, hashed
SALT = "_salt"  # the column with_salt adds


def with_row_key(df: DataFrame, user_col: str = "user_id", distinct: bool = False) -> DataFrame:
    """``df`` with a column ``row_key``: a 64-bit hash of the row's other columns and its
    occurrence index among the user's identical rows (every column equal). With ``distinct`` the
    caller vouches that no user has two identical rows, and the index (which takes a shuffle) is
    0 for every row.

    A nullable column is hashed with its null flag: Spark's hash skips a null, which would give
    (null, 1) and (1, null) one key."""
    if ROW_KEY in df.columns:
        raise ValueError(f"the records already have a {ROW_KEY} column")
    content = []
    for field in df.schema.fields:
        if field.name == user_col:
            continue
        content.append(F.col(f"`{field.name}`"))
        if field.nullable:
            content.append(F.col(f"`{field.name}`").isNull())
    if distinct:
        occurrence = F.lit(0)
    else:
        columns = [F.col(f"`{c}`") for c in df.columns]
        identical = Window.partitionBy(*columns).orderBy(*columns)
        occurrence = F.row_number().over(identical) - 1
    return df.withColumn(ROW_KEY, F.xxhash64(*content, occurrence))


def new_salt(seed: int | None, purpose: str) -> int:
    """A 63-bit salt: fresh from the OS without a seed, derived from it with one."""
    if seed is None:
        return secrets.randbits(63)
    digest = hashlib.sha256(f"dp-spark:{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def sample_salt(seed: int | None) -> int:
    """The salt :func:`dp_spark.bounding.user_records.sample_selection` draws its sample under
    when none is given; a sample drawn elsewhere under it (``io.validate_records``' one record per
    user) picks the same rows."""
    return new_salt(seed, "sample_per_user")


def with_salt(df: DataFrame, salt: int) -> DataFrame:
    """``df`` with the column ``_salt`` holding ``salt`` in every row, from a broadcast one-row
    table: the value travels as data, so no plan shows it. The 8 bytes (not a long) also keep the
    generated code of a stage the same from one salt to the next."""
    spark = df.sparkSession
    schema = T.StructType([T.StructField(SALT, T.BinaryType(), False)])
    one_row = spark.createDataFrame([(bytearray(salt.to_bytes(8, "big")),)], schema)
    return df.crossJoin(F.broadcast(one_row))


def key_columns(df: DataFrame, user_col: str) -> list[str]:
    """What tells a user's rows apart: the row key when present, else every column (rows equal
    in all of them then share a position and are kept or dropped together)."""
    if ROW_KEY in df.columns:
        return [user_col, ROW_KEY]
    return [user_col] + [c for c in df.columns if c not in (user_col, SALT)]


def text_user(df: DataFrame, user_col: str = "user_id") -> bool:
    """Whether ``df``'s user ids are text rather than numbers (io.validation.user_values): the
    column's type, public; :func:`user_hash` hashes text ids that read as numbers as the numbers."""
    return isinstance(df.schema[user_col].dataType, T.StringType)


def row_position(df: DataFrame, user_col: str) -> Column:
    """The row's random position under the salt in ``df``'s ``_salt`` column (:func:`with_salt`):
    a 63-bit non-negative integer."""
    return keyed_position([F.col(c) for c in key_columns(df, user_col)], text_user=text_user(df, user_col))


def keyed_position(key: list[Column], text_user: bool = False) -> Column:
    """:func:`row_position` of the row whose key columns (user first, then what tells its rows
    apart) are ``key``, under the salt in the column ``_salt``. ``text_user``: the user id is text
    (io.validation.user_values); see :func:`user_hash`."""
    return F.shiftrightunsigned(user_hash([F.col(SALT)], key[0], key[1:], text_user), 1)


def user_hash(before: list[Column], user: Column, after: list[Column], text_user: bool) -> Column:
    """xxhash64 of ``before``, the user id and ``after``. A text id written as a whole number
    (validation writes such an id as the number's decimal form) is hashed as that number: a user's
    positions are the same whether the ids came as numbers or as text (a Parquet table and a CSV
    of the same records give one release), and every other text id is hashed as text."""
    if not text_user:
        return F.xxhash64(*before, user, *after)
    number = user.try_cast("long")
    return F.when(number.isNotNull(), F.xxhash64(*before, number, *after)).otherwise(F.xxhash64(*before, user, *after))
