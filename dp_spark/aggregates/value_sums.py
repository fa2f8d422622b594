"""Per-cell counts and centred sums of the records a per-user bound keeps, summed on the executors.
The values go through ``core.clip_range.ClipRange.units`` (clip, centre, round to
the integer grid) as a Spark expression that gives the same integers; the result is NOT private
until noise is added to it.

The selection carries (cell, units) as one value per kept record, so the per-user bounding is the
counts' own (``bounding.user_records``: SRA's uniform sample or HPA's top rows): a user's kept
records depend on that user's records only, and the value rides along with the record it belongs to.
Without a per-item cap the pair is counted as the counts are (``Selection.counted``), in one job
that ends in a row or a few per cell; where the cell is a long (integer item ids, few attribute
values) the pair is packed into one long, cell·(2·steps + 1) + units + steps, which Spark's
per-user aggregation keeps more cheaply than a struct (together, about 11% off the release at 10M
rows: docs/value_sums.md, "Speed").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates import item_edges
from dp_spark.bounding.item_cap import ItemCap, capped_values
from dp_spark.bounding.user_records import Selection, Tally
from dp_spark.core.clip_range import ClipRange, SumSensitivity
from dp_spark.core.domain import AttributeDomain, ItemDomain

COUNT, SUM = "_count", "_sum"  # the columns of a tally left on the executors (cell_tally)


@dataclass(frozen=True)
class BoundedSums:
    """Per cell, the kept records and the sum of their grid units (NOT private), with the bound
    (l), the per-item cap (c; None: l) and the range they were summed under: the noise is set
    from these, never from numbers given again (a grid finer than the one summed would
    understate the sensitivity)."""

    counts: np.ndarray
    units: np.ndarray
    bound: int
    clip: ClipRange
    per_cell: int | None = None

    def __post_init__(self):
        counts, units = np.asarray(self.counts, dtype=np.int64), np.asarray(self.units, dtype=np.int64)
        if counts.shape != units.shape or counts.ndim != 1:
            raise ValueError(f"one count and one sum per cell, got shapes {counts.shape} and {units.shape}")
        if isinstance(self.bound, bool) or not isinstance(self.bound, int) or self.bound < 1:
            raise ValueError(f"the bound must be a positive integer, got {self.bound!r}")
        if np.any(counts < 0) or np.any(np.abs(units) > counts * self.clip.steps):
            raise ValueError("each cell's sum must be within steps times its count of records")
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "units", units)
        self.sensitivity  # noqa: B018 - checks the cap against the bound

    @property
    def sensitivity(self) -> SumSensitivity:
        return SumSensitivity(self.bound, self.bound if self.per_cell is None else self.per_cell, self.clip.steps)


def units_column(value: Column, clip: ClipRange) -> Column:
    """``clip.units`` over a double column: round half to even of (clip(v) − m)/γ, as a long in
    [−steps, steps]. The quotient is the same IEEE double as the Python function's (the same
    operations in the same order); ``bround`` rounds its shortest decimal form, Python the binary
    value, and the two agree because a tie k + ½ is itself a double, which no other double's
    shortest form can equal (tested at exact ties). NaN and null must be dropped before, as
    io.validation.validate_records does: Spark orders NaN above every number and greatest skips
    nulls, so a NaN would count as ``high`` and a null as ``low``. The constants are public."""
    clipped = F.least(F.greatest(value.cast("double"), F.lit(float(clip.low))), F.lit(float(clip.high)))
    scaled = (clipped - F.lit(clip.centre)) / F.lit(clip.unit)
    rounded = F.bround(scaled, 0).cast("long")
    return F.least(F.greatest(rounded, F.lit(-clip.steps)), F.lit(clip.steps))


def _cell_and_units(packed: bool, clip: ClipRange) -> Tally:
    """The tally of (cell, units) values (column ``_value``): per cell, the count of kept records
    and the sum of their units (``_sum``). Packed: cell·w + units + steps with w = 2·steps + 1, taken
    apart by pmod and exact integer division (also for negative cells); else a struct."""
    if not packed:
        return Tally(group=lambda name: F.col(name).getField("cell"),
                     summand=lambda name: F.col(name).getField("units"))
    w = 2 * clip.steps + 1
    return Tally(group=lambda name: F.expr(f"({name} - pmod({name}, {w})) div {w}"),
                 summand=lambda name: F.expr(f"pmod({name}, {w}) - {clip.steps}"))


def _record_value(cell: Column, units: Column, clip: ClipRange, packed: bool) -> Column:
    """What goes through the per-user selection for each record: its cell and units, packed into
    one long (cell·w + units + steps) or as a struct. A packed long stays within a long, and so do
    the sums on the way, however Spark orders them (item_edges.long_key_fits)."""
    if packed:
        return cell * F.lit(2 * clip.steps + 1) + units + F.lit(clip.steps)
    return F.struct(cell.alias("cell"), units.alias("units"))


def _capped(selection: Selection, cell: Column, units: Column, clip: ClipRange, cap: int,
            item_of_cell: Column) -> DataFrame:
    """The kept (cell, units) structs, at most ``cap`` per user and item (bounding.item_cap)."""
    kept = selection.kept_values(_record_value(cell, units, clip, packed=False))
    return capped_values(kept, item_of_cell, cap, selection.user_col)


def cell_sums(selection: Selection, cell: Column, units: Column, clip: ClipRange, packed: bool = False,
              cap: int | None = None, item_of_cell: Column | None = None) -> pd.DataFrame:
    """DataFrame[_key, count, _sum] on the driver: for each cell (``cell``, an expression over the
    selection's input columns), the number of kept records and the sum of their ``units`` (a long
    per record in [−steps, steps], from :func:`units_column`); a cell can have more than one row
    (add them up). ``packed`` when ``cell`` is a long with room beside it
    (item_edges.long_key_fits). With ``cap``, at most that many of each user's kept records per
    item, ``item_of_cell`` naming a record's item from ``_value.cell`` (bounding.item_cap)."""
    if cap is None:
        return selection.counted(_record_value(cell, units, clip, packed), _cell_and_units(packed, clip))
    return selection.counted(_record_value(cell, units, clip, packed=False), _cell_and_units(False, clip),
                             ItemCap(cap, item_of_cell))


def cell_tally(selection: Selection, items: ItemDomain, value_col: str, clip: ClipRange,
               attributes: AttributeDomain | None = None, cap: int | None = None) -> DataFrame:
    """DataFrame[_cell, _count, _sum] left on the executors (for tables too large for the driver):
    per cell index (publishers.executor_laplace.CellGrid) the selection's kept records and the sum
    of their units, only where some record fell. The records and units of :func:`bounded_sums`,
    from the exact selection (kept_values) rather than the counted one."""
    packed = cap is None and item_edges.long_key_fits(items, attributes, 2 * clip.steps + 1)
    cell, units = item_edges.edge_key(items, attributes), units_column(F.col(value_col), clip)
    kept = selection.kept_values(_record_value(cell, units, clip, packed)) if cap is None \
        else _capped(selection, cell, units, clip, cap, item_edges.item_of_key("_value.cell", items, attributes))
    tally = _cell_and_units(packed, clip).aggregated(kept).withColumnRenamed("count", COUNT)
    return item_edges.cells_of_keys(tally, items, attributes, (COUNT, SUM))


def bounded_sums(selection: Selection, items: ItemDomain, value_col: str, clip: ClipRange,
                 attributes: AttributeDomain | None = None, cap: int | None = None
                 ) -> tuple[BoundedSums, BoundedSums | None]:
    """The selection's records counted and their values summed per item of the domain, and per
    (item, attribute value) cell with ``attributes`` (flattened item by item), zero where none
    fell: one Spark aggregation. With ``cap`` at most that many of a user's kept records per item
    count (c). The selection's input must be in the domain with usable values (io.validate_records)."""
    packed = item_edges.long_key_fits(items, attributes, 2 * clip.steps + 1)
    tally = cell_sums(selection, item_edges.edge_key(items, attributes), units_column(F.col(value_col), clip), clip,
                      packed, cap, item_edges.item_of_key("_value.cell", items, attributes))

    def per_cell(column: str) -> np.ndarray:
        return item_edges.edges_from_tally(tally[["_key", column]].rename(columns={column: "count"}), items,
                                           attributes)
    counts, units = per_cell("count"), per_cell("_sum")
    item_sums = BoundedSums(counts.sum(axis=1), units.sum(axis=1), selection.l, clip, cap)
    edge_sums = BoundedSums(counts.reshape(-1), units.reshape(-1), selection.l, clip, cap) if attributes else None
    return item_sums, edge_sums
