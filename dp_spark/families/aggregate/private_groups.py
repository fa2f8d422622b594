"""Key columns whose values come as tuples: chosen privately (partition selection over the tuples
of their values), or listed in a public table of key tuples (key_tuples); then each record's
group among those tuples.

Selection: from the records the aggregation would bound (a usable user id, the public keys in
their domains, a usable value when the metrics read one, every private key non-null), each user
keeps at most ``keys_per_user`` of its distinct tuples, a uniform sample keyed on the user's own
tuples (bounding.user_keys), and a tuple is released when its noisy count of users passes the
threshold (release.private_keys: pure ε, or the Gaussian rule under zCDP, paid through the ledger
with δ). Claim: docs/partition_selection.md, "Privacy claim: partition_selection"; how the
aggregation composes with it: docs/aggregate.md, "Key columns chosen privately".

Lookup: the released tuples (a DP output) or the listed ones (public) are a small table joined to
the records on the tuple, a lookup that reads each record alone; a record whose tuple is not
there is in no group.

A private column is read by its type (the schema is public, Spark knows it without reading a
record): whole numbers of an integer type, text, or dates. Its tuple is written as one text, the
JSON of the values, so that one hash join finds it whatever the columns' types.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from fractions import Fraction

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError, DataError
from dp_spark.families.aggregate.key_tuples import DATE, INTEGER, STRING, typed_tuples
from dp_spark.families.aggregate.keys import EPOCH, GroupKeys, column
from dp_spark.io.validation import INTEGER_TYPES
from dp_spark.release.private_keys import private_keys

KEY = "_private_key"  # a record's tuple of private key values, as one JSON text
POSITION = "_tuple_position"  # the record's tuple's position in keys.tuples
STEP = "select groups"  # the ledger's name for the selection


def kinds(schema: T.StructType, names: Sequence[str]) -> tuple[str, ...]:
    """Each tupled key column's kind from its type; a DataError for a type no key can have."""
    found = []
    for name in names:
        kind = schema[name].dataType
        if isinstance(kind, INTEGER_TYPES):
            found.append(INTEGER)
        elif isinstance(kind, T.StringType):
            found.append(STRING)
        elif isinstance(kind, T.DateType):
            found.append(DATE)
        else:
            raise DataError(f"key column {name} has type {kind.simpleString()}; a key chosen privately or listed in a "
                            f"table of key tuples must be whole numbers of an integer type, text or dates (cast it "
                            f"first, e.g. a timestamp to_date)")
    return tuple(found)


def tuple_key(names: Sequence[str], column_kinds: Sequence[str]) -> Column:
    """The record's tuple as one text (null when any of its values is null): JSON of an array, the
    whole numbers as longs, the dates as their days since 1970-01-01 (a text would not read back
    for years past 9999)."""
    typed = [column(n).cast("long") if k == INTEGER else F.unix_date(column(n)).cast("long") if k == DATE
             else column(n).cast("string") for n, k in zip(names, column_kinds)]
    text = F.to_json(F.struct(*[value.alias(f"k{at}") for at, value in enumerate(typed)]))
    present = F.lit(True)
    for value in typed:
        present = present & value.isNotNull()
    return F.when(present, text)


def decoded(text: str, column_kinds: Sequence[str]) -> tuple | None:
    """A tuple_key text back as the columns' values (int, str or datetime.date); None for a date
    Python cannot hold (before year 1 or after 9999), which the table could not show."""
    values = json.loads(text)
    out: list[int | str | datetime.date] = []
    for at, kind in enumerate(column_kinds):
        value = values[f"k{at}"]
        if kind == DATE:
            try:
                out.append(EPOCH + datetime.timedelta(days=int(value)))
            except OverflowError:
                return None
        else:
            out.append(int(value) if kind == INTEGER else str(value))
    return tuple(out)


def select(grouped: DataFrame, keys: GroupKeys, column_kinds: Sequence[str], keys_per_user: int,
           epsilon: Fraction, delta: float, budget: Budget, rng: RandomSource, seed: int | None,
           user_col: str = "user_id") -> tuple[GroupKeys, dict]:
    """``keys`` with the tuples partition selection releases from ``grouped`` (run.usable_records
    before the selection: the user and KEY columns), and NOT private diagnostics for the operator."""
    chosen = private_keys(grouped.select(user_col, KEY), keys_per_user, epsilon, delta, budget, rng, seed,
                          user_col=user_col, key_col=KEY, step=STEP)
    tuples = [decoded(text, column_kinds) for text in chosen.keys]
    return keys.with_tuples([t for t in tuples if t is not None]), chosen.diagnostics


def typed_columns(keys: GroupKeys, column_kinds: Sequence[str]) -> list[Column]:
    """The tupled key columns as the table of tuples holds them: longs, texts and dates."""
    spark_type = {INTEGER: "long", STRING: "string", DATE: "date"}
    return [column(n).cast(spark_type[k]).alias(f"_private_{at}")
            for at, (n, k) in enumerate(zip(keys.tupled, column_kinds))]


def with_position(records: DataFrame, keys: GroupKeys, column_kinds: Sequence[str]) -> DataFrame:
    """``records`` (which hold the tupled key columns) with POSITION, the position of their tuple
    among ``keys.tuples`` (typed as ``column_kinds``); a record whose tuple is not there is dropped.
    A broadcast hash join of each record to a table of public values or DP outputs: it reads the
    record alone."""
    assert keys.tuples is not None
    spark_type = {INTEGER: T.LongType(), STRING: T.StringType(), DATE: T.DateType()}
    schema = T.StructType([*(T.StructField(f"_private_{at}", spark_type[k]) for at, k in enumerate(column_kinds)),
                           T.StructField(POSITION, T.LongType())])
    rows = [(*values, at) for at, values in enumerate(keys.tuples)]
    selected = records.sparkSession.createDataFrame(rows, schema)
    typed = records.select("*", *typed_columns(keys, column_kinds))
    on = [f"_private_{at}" for at in range(len(column_kinds))]
    return typed.join(F.broadcast(selected), on=on, how="inner").drop(*on)


def listed_typed(keys: GroupKeys, schema: T.StructType) -> GroupKeys:
    """``keys`` with the listed tuples typed as the records' columns are (key_tuples.typed_tuples),
    sorted; a ConfigError when two listed rows are one tuple so typed ("7" and "07" against whole
    numbers), since the groups' number was said from the rows as listed."""
    assert keys.tuples is not None and not keys.private
    typed = typed_tuples(keys.tupled, keys.tuples, kinds(schema, keys.tupled))
    if len(set(typed)) != len(typed):
        raise ConfigError(f"the table of key tuples lists one ({', '.join(keys.tupled)}) twice once its values are "
                          "read as the records' columns are (e.g. 7 and \"07\" against whole numbers)")
    return keys.with_tuples(typed)
