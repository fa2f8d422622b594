"""The ranks of public candidate clipping points among per-user values, for the private choice of
the clipping range (algorithms.clip_choice): one Spark aggregation over a table of one value per
user. The result is NOT private; only the choice's mechanisms read it. The candidates are public
literals in the plan."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def value_ranks(values: DataFrame, column: str, candidates: Sequence[float]) -> tuple[np.ndarray, np.ndarray, int]:
    """(below, at_most, n): for each candidate b, how many of the column's n non-null values are
    below b and at most b. One job; a driver-sized result whatever the table's size."""
    value = F.col(column)
    counted = [F.count(value).alias("n")]
    for i, b in enumerate(candidates):
        counted += [F.count(F.when(value < F.lit(float(b)), 1)).alias(f"below_{i}"),
                    F.count(F.when(value <= F.lit(float(b)), 1)).alias(f"at_most_{i}")]
    row = values.agg(*counted).first()
    below = np.array([row[f"below_{i}"] for i in range(len(candidates))], dtype=np.int64)
    at_most = np.array([row[f"at_most_{i}"] for i in range(len(candidates))], dtype=np.int64)
    return below, at_most, int(row["n"])
