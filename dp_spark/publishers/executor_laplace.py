"""LPA on the executors: discrete Laplace noise on every cell of a count table too large for the driver
(or, under zCDP accounting, discrete Gaussian noise: the same layout, another keyed sampler). The
layout (``released_cells``) serves any table of figures per cell: the means' counts and sums too
(families.means.on_executors).

The mechanism is :mod:`dp_spark.publishers.laplace`'s, with the same claim (docs/publishers.md,
"Privacy claim: laplace"): an integer count per cell of a public, complete domain, L1
sensitivity Δ under the privacy unit, independent discrete Laplace noise of scale Δ/ε on every
cell, zero counts included. Only where it runs differs. The driver never holds the table: the
domain is laid out on the executors in chunks of whole items, each chunk's true counts are
placed on it, and each cell's noise is the :class:`~dp_spark.core.vector_noise.CellNoise` the
budget hands out: a function of (secret, label, scale, cell index) alone, so a retried or
re-partitioned task writes the same values (docs/executor_noise.md).

A cell is (item position, attribute position); its index is position·width + attribute, where
width is the number of attribute values (1 without attributes). The position of an item is its
rank in the sorted domain: item_id − low for a range, which the executors compute, and otherwise
from the domain's ids, which travel to the executors as a table beside the counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.aggregates.domain_vector import OUTSIDE, domain_positions
from dp_spark.core.domain import AttributeDomain, ItemDomain
from dp_spark.core.ledger import Budget, LedgerEntry, gaussian_entry
from dp_spark.core.mechanisms import as_scale
from dp_spark.core.vector_noise import BLOCK_CELLS, NoiseSecret

# Cells per chunk, the unit of work of one call on an executor, about: large enough that Spark's
# per-group cost is small, small enough that one chunk's pandas table (three columns for counts,
# seven for means) stays within tens of megabytes. A chunk is whole items, and where the attribute
# values allow, whole noise blocks: otherwise it also draws the rest of the blocks at its two ends.
CHUNK_CELLS = 16 * BLOCK_CELLS


@dataclass(frozen=True)
class CellGrid:
    """The public cells of one count table: every item of ``items`` times every value of
    ``attributes`` (one cell per item without attributes)."""

    items: ItemDomain
    attributes: AttributeDomain | None = None
    chunk_cells: int = CHUNK_CELLS  # about how many cells one call on an executor releases

    def __post_init__(self):
        if isinstance(self.chunk_cells, bool) or not isinstance(self.chunk_cells, int) or self.chunk_cells < 1:
            raise ValueError(f"chunk_cells must be a positive integer, got {self.chunk_cells!r}")
        if self.cells >= 2**63:
            raise ValueError(f"{self.cells:,} cells: a cell index must fit in a 64-bit long")

    @property
    def width(self) -> int:
        return len(self.attributes) if self.attributes else 1

    @property
    def cells(self) -> int:
        return len(self.items) * self.width

    @property
    def items_per_chunk(self) -> int:
        """Items per chunk: a multiple of the items that make whole noise blocks when that stays
        within four times ``chunk_cells``, else about chunk_cells // width (chunks then cut blocks)."""
        aligned = BLOCK_CELLS // math.gcd(BLOCK_CELLS, self.width)  # items per whole number of blocks
        if aligned * self.width <= 4 * self.chunk_cells:
            return aligned * max(1, round(self.chunk_cells / (aligned * self.width)))
        return max(1, self.chunk_cells // self.width)

    @property
    def chunks(self) -> int:
        return -(-len(self.items) // self.items_per_chunk)

    def schema(self, fields: list[T.StructField] | None = None) -> T.StructType:
        """The released table: item_id (and attr), then ``fields`` (default: noisy_count)."""
        item_type = T.StringType() if self.items.is_string else T.LongType()
        keys = [T.StructField("item_id", item_type, False)]
        if self.attributes:
            keys.append(T.StructField("attr", T.StringType(), False))
        released = [T.StructField("noisy_count", T.LongType(), False)] if fields is None else fields
        return T.StructType(keys + released)


# Rows of the domain carry this count, the true counts' rows at least 1: no column holds a null,
# so Arrow hands the executors int64 columns (a null would make them float64, which cannot hold
# every 64-bit id).
_DOMAIN_ROW = -1
COUNT = "_count"  # the tally's count column: every tally has one, and marks the domain's rows


def _chunk_of(index: str, per_chunk: int):
    """The chunk of a row: its cell index divided by the cells per chunk, or its item position
    divided by the items per chunk."""
    return F.expr(f"{index} div {per_chunk}")


def _domain_rows(spark: SparkSession, grid: CellGrid, item_type: T.DataType, others: tuple[str, ...]) -> DataFrame:
    """One row per chunk: the chunk alone for a range (the executors compute its ids), or one row
    per item with its position and id otherwise. Every chunk has at least one, so every chunk is
    released even where no record fell. The tally's other figures are 0 on these rows."""
    items = grid.items
    zeros = [F.lit(0).cast("long").alias(name) for name in others]
    if items.id_range:
        return spark.range(grid.chunks).select(F.col("id").alias("_chunk"), F.lit(0).cast("long").alias("_cell"),
                                               F.lit(_DOMAIN_ROW).cast("long").alias(COUNT), *zeros,
                                               _no_item(item_type))
    return domain_positions(spark, items).select(_chunk_of("_pos", grid.items_per_chunk).alias("_chunk"),
                                                 F.col("_pos").alias("_cell"),
                                                 F.lit(_DOMAIN_ROW).cast("long").alias(COUNT), *zeros,
                                                 F.col("item_id").alias("_item"))


def _no_item(item_type: T.DataType):
    return F.lit("" if isinstance(item_type, T.StringType) else 0).cast(item_type).alias("_item")


# What a chunk's cells become: (first cell index, {figure: the true figure of each of the chunk's
# cells, zero-filled}) -> {output column: one value per cell}.
Finish = Callable[[int, dict[str, np.ndarray]], dict[str, Any]]


def _released_chunk(grid: CellGrid, figures: tuple[str, ...], finish: Finish):
    """The function each chunk goes through on an executor: its cells' true figures, zero-filled,
    through ``finish``."""
    width, per_chunk = grid.width, grid.items_per_chunk
    low = grid.items.id_range[0] if grid.items.id_range else None
    n_items = len(grid.items)
    attribute_values = np.array(grid.attributes.values, dtype=object) if grid.attributes else None

    def release(rows: pd.DataFrame) -> pd.DataFrame:
        chunk = int(rows["_chunk"].iloc[0])
        first_item = chunk * per_chunk
        n = min(per_chunk, n_items - first_item)
        first_cell = first_item * width
        tally = rows[rows[COUNT] != _DOMAIN_ROW]
        local = tally["_cell"].to_numpy(dtype=np.int64) - first_cell
        if local.size and (local.min() < 0 or local.max() >= n * width):  # fail closed, as on_domain does
            raise ValueError(OUTSIDE)
        true = {}
        for name in figures:
            true[name] = np.zeros(n * width, dtype=np.int64)
            np.add.at(true[name], local, tally[name].to_numpy(dtype=np.int64))
        if low is not None:
            ids = np.arange(low + first_item, low + first_item + n, dtype=np.int64)
        else:
            domain = rows[rows[COUNT] == _DOMAIN_ROW].sort_values("_cell")
            ids = domain["_item"].to_numpy()
            if ids.size != n:  # the domain table lost or repeated a row: never release a partial chunk
                raise RuntimeError(f"chunk {chunk} has {ids.size} domain items, expected {n}")
        out = {"item_id": np.repeat(ids, width) if width > 1 else ids}
        if attribute_values is not None:
            out["attr"] = np.tile(attribute_values, n)
        out.update(finish(first_cell, true))
        return pd.DataFrame(out)

    return release


def released_cells(tally: DataFrame, grid: CellGrid, figures: tuple[str, ...], fields: list[T.StructField],
                   finish: Finish) -> DataFrame:
    """One row per cell of ``grid`` (a Spark DataFrame, never on the driver): item_id (and attr)
    and the columns ``fields`` that ``finish`` makes of each chunk's true ``figures``, zero-filled.
    ``tally`` is DataFrame[_cell, *figures] (long columns; ``_count`` first, at least 1 on every
    row), only where some record fell; a cell may appear more than once, its figures add up.
    ``finish`` runs on the executors, so it must draw any noise from a CellNoise, keyed per cell."""
    if not figures or figures[0] != COUNT:
        raise ValueError(f"a tally's first figure is its count, {COUNT}, got {figures!r}")
    schema = grid.schema(fields)
    item_type = schema["item_id"].dataType
    cells = tally.select(_chunk_of("_cell", grid.width * grid.items_per_chunk).alias("_chunk"),
                         F.col("_cell").cast("long"), *[F.col(name).cast("long") for name in figures],
                         _no_item(item_type))
    rows = _domain_rows(tally.sparkSession, grid, item_type, figures[1:]).unionByName(cells)
    # As many partitions as chunks, by hash of the chunk: which are empty, and so how many files the
    # table is written as, is a function of the domain alone. Left to Spark, adaptive execution
    # would merge partitions by their bytes, which the true counts' rows decide.
    rows = rows.repartition(grid.chunks, "_chunk")
    return rows.groupBy("_chunk").applyInPandas(_released_chunk(grid, figures, finish), schema)


def publish(tally: DataFrame, grid: CellGrid, sensitivity: int, epsilon: Fraction, budget: Budget,
            secret: NoiseSecret, step: str, l2_squared: int | None = None) -> tuple[DataFrame, LedgerEntry]:
    """The noisy table (a Spark DataFrame, one row per cell of ``grid``) of the true counts
    ``tally`` (DataFrame[_cell, _count]: a count per cell index, only where some record fell;
    a cell may appear more than once, its counts add up), with discrete Laplace noise of scale
    sensitivity/ε drawn on the executors, or with ``l2_squared`` (the squared L2 sensitivity;
    zCDP accounting) discrete Gaussian noise of σ² = l2_squared/ε² (privacy.gaussian_entry).
    ``step`` names the ledger entry and is the noise's label, so two tables of one release never
    share noise. The entry is spent here, before any executor draws."""
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, (int, np.integer)) or sensitivity < 1:
        raise ValueError(f"sensitivity must be a positive integer, got {sensitivity!r}")
    if grid.cells == 0:
        raise ValueError("cannot publish an empty count vector")
    epsilon = Fraction(epsilon)
    if l2_squared is not None:
        entry = gaussian_entry(step, int(sensitivity), int(l2_squared), epsilon, grid.cells)
        noise = budget.discrete_gaussian_on_executors(entry, secret)
    else:
        entry = LedgerEntry(step=step, mechanism="discrete Laplace", epsilon=epsilon,
                            sensitivity=Fraction(sensitivity), noise_scale=as_scale(Fraction(sensitivity) / epsilon),
                            cells=grid.cells)
        noise = budget.discrete_laplace_on_executors(entry, secret)

    def noisy_counts(first_cell: int, true: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        counts = true[COUNT]
        return {"noisy_count": counts + noise(first_cell, first_cell + counts.size - 1)}
    return released_cells(tally, grid, (COUNT,), [T.StructField("noisy_count", T.LongType(), False)],
                          noisy_counts), entry
