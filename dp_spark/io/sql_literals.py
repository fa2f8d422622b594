"""Long lists of public numbers (a domain's ids, a lookup table) written into a query as one SQL
expression. PySpark makes a call to the JVM for each F.lit and each value of Column.isin, a
millisecond or more apiece on the driver, so a catalogue of a few thousand ids cost seconds in
every release before any record was read; Spark parses one expression in one call. The values
are public (domains, positions in them), so they may sit in the plan like any literal."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as F

Numbers = Sequence[int] | np.ndarray


def _numbers(values: Numbers) -> str:
    return ", ".join(str(int(v)) for v in values)


def in_id_list(column: str, ids: Numbers) -> Column:
    """Whether the integer column ``column`` holds one of ``ids`` (null for a null value), planned
    as Column.isin's is: a hash-set lookup."""
    if not len(ids):
        return F.lit(False)
    return F.expr(f"`{column}` IN ({_numbers(ids)})")


def int_array(values: Numbers) -> Column:
    """An array literal of ``values``, typed as F.array of F.lit's would be: int, or bigint when a
    value needs it."""
    if not len(values):
        raise ValueError("an array literal needs at least one value")
    return F.expr(f"array({_numbers(values)})")
