"""A table pair of counts and centred sums released on the executors, for domains too large for
the driver: the mechanism of :func:`dp_spark.release.sum_tables.publish_means` (the same
ledger entries, in the same order, at the same sensitivities; the same columns, computed by the
same numpy function from the noisy figures), laid out on the executors as the counts' are
(publishers.executor_laplace) and with each cell's noise keyed by (secret, table, cell)
(core.vector_noise), so that a retried task writes the same values (docs/executor_noise.md).
Claim: docs/value_sums.md, "Privacy claim: value_sums, means".
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from dp_spark.aggregates.value_sums import SUM
from dp_spark.core import accuracy
from dp_spark.core.clip_range import ClipRange, SumSensitivity
from dp_spark.core.ledger import Budget
from dp_spark.core.vector_noise import NoiseSecret
from dp_spark.publishers.executor_laplace import COUNT, CellGrid, released_cells
from dp_spark.release.sum_tables import TablePair, halfwidth, nullable_means, pair_entries, released_columns

# The released columns, as the driver's tables have them: a mean left out is null.
FIELDS = [T.StructField("noisy_count", T.LongType(), False), T.StructField("noisy_sum", T.DoubleType(), False),
          *[T.StructField(name, T.DoubleType(), True) for name in ("mean", "mean_low", "mean_high")]]


def publish_means(tally: DataFrame, grid: CellGrid, sensitivity: SumSensitivity, clip: ClipRange, pair: TablePair,
                  budget: Budget, secret: NoiseSecret, alpha: float = accuracy.DEFAULT_ALPHA) -> DataFrame:
    """One row per cell of ``grid`` (a Spark DataFrame, never on the driver): item_id (and attr),
    noisy_count, noisy_sum, mean, mean_low, mean_high, from the true tally
    DataFrame[_cell, _count, _sum] (only where some record fell; aggregates.value_sums.cell_tally).
    Both entries are spent here, counts first, before any executor draws."""
    if grid.cells == 0:
        raise ValueError("cannot publish an empty table")
    count_entry, sum_entry = pair_entries(sensitivity, grid.cells, pair, clip.unit)
    count_noise = budget.noise_on_executors(count_entry, secret)  # counts first, as on the driver
    sum_noise = budget.noise_on_executors(sum_entry, secret)
    count_width, sum_width = halfwidth(count_entry, alpha / 2), halfwidth(sum_entry, alpha / 2)

    def finish(first_cell: int, true: dict[str, np.ndarray]) -> dict[str, object]:
        last = first_cell + true[COUNT].size - 1
        columns = released_columns(true[COUNT] + count_noise(first_cell, last), true[SUM] + sum_noise(first_cell, last),
                                   count_width, sum_width, clip)
        return nullable_means(columns)
    return released_cells(tally, grid, (COUNT, SUM), FIELDS, finish)
