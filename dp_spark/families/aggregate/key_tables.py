"""Key values held in a catalog table: one key column's values (``{table = "db.movies", column =
"movie_id"}``), or a table of key tuples (``{columns = ["city", "zip"], table = "db.places"}``, the
table's columns of those names). The config names the table; Spark reads its distinct rows when
the job runs, before anything is charged (GroupKeys.read_tables), so until then the groups'
number is unknown, as with keys chosen privately.

Such a table is public only by the operator's word, as the counts' ``domain.items.table`` is: the
report and the console say so. The one case dp-spark can see is refused: the table is the job's
source, or reads its files (core.domain_tables), since its distinct values would publish which
keys the private records hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import functions as F

from dp_spark.core.domain_tables import refuse_source_table
from dp_spark.errors import ConfigError

# The Spark types a key value read from a table may have (Spark's simpleString names).
KEY_TYPES = ("tinyint", "smallint", "int", "bigint", "string", "date")


@dataclass(frozen=True)
class KeyTable:
    """Key columns whose public values a catalog table holds, read when the job runs."""

    key: str  # the entry's name under keys (its config key is keys.<key>)
    columns: tuple[str, ...]  # the key columns it gives values for
    table: str
    column: str | None = None  # one key column's values: the table's column that holds them

    @property
    def tupled(self) -> bool:
        """Whether the table lists tuples of several key columns (rather than one column's values)."""
        return self.column is None

    @property
    def spec(self) -> dict[str, Any]:
        return {"table": self.table, "columns": list(self.columns)} if self.tupled else {"table": self.table,
                                                                                          "column": self.column}

    def assertion(self) -> str:
        """What the report and the console say: the values are public by the operator's word."""
        held = f"columns {', '.join(self.columns)}" if self.tupled else f"column {self.column}"
        return (f"the values of keys.{self.key} are the distinct rows of table {self.table} {held}, which the "
                "operator asserts is public and not derived from the private records; dp-spark cannot check that")


def is_catalog_table(spec: Any) -> bool:
    return isinstance(spec, Mapping) and "table" in spec


def key_table(name: str, spec: Mapping[str, Any], columns: tuple[str, ...] | None = None) -> KeyTable:
    """``keys.<name>`` as a KeyTable: one key column ``name`` (``column`` defaults to ``name``), or,
    with ``columns``, a table of key tuples of those columns."""
    key = f"keys.{name}"
    table = spec["table"]
    if not isinstance(table, str) or not table.strip():
        raise ConfigError(f"{key}.table must name a catalog table (database.name), got {table!r}")
    allowed = {"table", "columns"} if columns is not None else {"table", "column"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ConfigError(f"{key}: a catalog table of key values takes {' and '.join(sorted(allowed))}; "
                          f"{', '.join(unknown)} is not read")
    if columns is not None:
        return KeyTable(name, columns, table)
    column = spec.get("column", name)
    if not isinstance(column, str) or not column:
        raise ConfigError(f"{key}.column must name the table's column that holds the values, got {column!r}")
    return KeyTable(name, (name,), table, column)


def read_rows(spark: Any, table: KeyTable, source: Any) -> tuple[pd.DataFrame, dict[str, str]]:
    """The table's distinct rows of its columns, and each column's Spark type (simpleString);
    refused, before anything is read, when the table is the job's ``source``. A missing table or
    column, or a null value, is refused by name."""
    key = f"keys.{table.key}"
    refuse_source_table(table.spec, spark, source, key)
    wanted = list(table.columns) if table.column is None else [table.column]
    try:
        # Named as asked: Spark finds a column whatever its case, and names it as the table does.
        frame = spark.table(table.table).select(*[F.col(f"`{c}`").alias(c) for c in wanted])
        types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
        rows = frame.distinct().toPandas()
    except Exception as exc:  # AnalysisException: a missing table or column
        raise ConfigError(f"{key}: cannot read table {table.table!r} column(s) {', '.join(wanted)}: "
                          f"{str(exc).splitlines()[0]}") from None
    odd = {c: t for c, t in types.items() if t not in KEY_TYPES}
    if odd:
        column, kind = next(iter(odd.items()))
        raise ConfigError(f"{key}: table {table.table} column {column} has type {kind}; key values are whole numbers "
                          "of an integer type, text or dates")
    if rows.empty:
        raise ConfigError(f"{key}: table {table.table} has no row")
    if rows.isna().any().any():
        raise ConfigError(f"{key}: table {table.table} holds a null in {', '.join(wanted)}; a key value is never null")
    return rows, types
