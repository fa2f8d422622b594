"""Refusing a catalog table as a public domain when it holds the private records.

A domain read from a table (the counts' ``domain.items.table``, an aggregation's key column or
table of key tuples) is public only by the operator's word, except for one case dp-spark can
see: the table is the job's own source. Its distinct values would publish which items or keys
the private records hold, so it is refused before anything is charged: by name, as the catalog
resolves it, and by the files both read (a view over the source, a table at the source's
location). The source is a job's SourceSpec, or in the API the DataFrame being released
(FrameSource), refused as well when the table is a view of that DataFrame (the same plan). Nothing
is read here: Spark lists files and compares plans without reading them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from dp_spark.errors import ConfigError


@dataclass(frozen=True)
class FrameSource:
    """The API's records as a source a domain table must not be: the DataFrame (its plan) or its files."""

    frame: Any  # pyspark DataFrame
    format: str = "frame"


def _table_identity(spark: Any, name: str) -> tuple[str, ...]:
    """A table name as the catalog resolves it, lower-cased: "Ratings", "default.ratings" and
    "spark_catalog.default.ratings" are one table, and a temporary view is told apart from a
    table of the same name. A name the catalog does not know is qualified with the current
    catalog and database."""
    try:
        table = spark.catalog.getTable(name)
    except Exception:  # AnalysisException: not found; reading it will say so
        parts = [part.strip("`").lower() for part in name.split(".")]
        current = [spark.catalog.currentCatalog().lower(), spark.catalog.currentDatabase().lower()]
        return tuple(current[: max(0, 3 - len(parts))] + parts)
    if table.isTemporary:
        return ("<temporary view>", *(n.lower() for n in table.namespace or ()), table.name.lower())
    return (str(table.catalog).lower(), *(n.lower() for n in table.namespace or ()), table.name.lower())


def _location(uri: str) -> tuple[str, str, str]:
    """A file URI as (scheme, authority, path): "file:/a" and "file:///a" are one file."""
    parts = urlsplit(uri)
    return parts.scheme.lower(), parts.netloc.lower(), unquote(parts.path).rstrip("/")


def _source_files(spark: Any, source: Any) -> list[str]:
    """The files the source reads; none when they cannot be listed (a missing source: reading it
    later will say so)."""
    try:
        if source.format == "frame":
            return list(source.frame.inputFiles())
        if source.format == "table":
            return list(spark.table(source.table).inputFiles())
        # Spark lists the files under the source path (qualified as the domain table's are, on any
        # filesystem and without a JVM call from Python, so on Spark Connect too); nothing is read.
        return list(spark.read.option("recursiveFileLookup", "true").text(source.spark_path).inputFiles())
    except Exception:
        return []


def _same_plan(spark: Any, name: str, frame: Any) -> bool:
    """Whether the table is the API's DataFrame itself (a view of it, whose rows no file holds:
    an in-memory DataFrame, a JDBC read), by Spark's comparison of their plans."""
    try:
        return bool(spark.table(name).sameSemantics(frame))
    except Exception:  # a missing table: reading the domain will say so
        return False


def _reads_source(spark: Any, table: Any, source: Any) -> bool:
    """Whether a domain table reads any file of the source."""
    try:
        files = {_location(f) for f in table.inputFiles()}
    except Exception:  # not every relation can list its files; the name check still applies
        return False
    return bool(files) and bool(files & {_location(f) for f in _source_files(spark, source)})


def refuse_source_table(spec: dict[str, Any], spark: Any, source: Any, key: str = "domain.items") -> None:
    """Raise ConfigError when ``spec``'s table (``{"table": name, "column": ...}``, or the columns
    of a table of key tuples) is the job's source, by name or by the files it reads; nothing is
    read. Other domains pass. ``key``: the config key the refusal names."""
    if "table" not in spec or spark is None or source is None:
        return
    name = spec["table"]
    columns = spec.get("columns") or [spec.get("column", "item_id")]
    if source.format == "table" and _table_identity(spark, name) == _table_identity(spark, source.table):
        where = "is the job's source"
    elif source.format == "frame" and _same_plan(spark, name, source.frame):
        where = "is the DataFrame being released"
    else:
        try:
            table = spark.table(name)
        except Exception:  # a missing table: reading the domain will say so
            return
        if not _reads_source(spark, table, source):
            return
        where = "reads the job's source files"
    raise ConfigError(f"{key}.table {name!r} {where}: its distinct {', '.join(columns)} values would publish which "
                      "values the private records hold; give a public list of them instead")
