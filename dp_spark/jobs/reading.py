"""The records a release reads from a job's source, as its family reads them (Family.reads): the
one place that maps what a family reads to the reader that reads it, for the job, ``check`` and
the report audit."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from dp_spark.io import checkins, sources
from dp_spark.release.family import Family


def family_records(family: Family, params: Any, spark, source: sources.SourceSpec, want_attr: bool) -> DataFrame:
    """The source's records with our standard column names (lazy; ids not yet validated).
    ``want_attr``: the counts' and means' attribute column too (edges)."""
    if family.reads == "checkins":
        return checkins.read_checkins(spark, source)
    if family.reads == "whole_records":
        return sources.read_whole_records(spark, source)
    if family.reads == "keyed_records":
        return sources.read_keyed_records(spark, source, family.read_columns(params))
    if family.reads not in ("records", "valued_records"):
        raise ValueError(f"family {family.name} reads {family.reads!r}, which no reader reads")
    return sources.read_records(spark, source, want_attr=want_attr, want_value=family.reads == "valued_records")
