"""Per-cell counts and centred sums of the records a per-user bound keeps, summed on the executors
(issue 43). The values go through ``algorithms.value_sums.ClipRange.units`` (clip, centre, round to
the integer grid) as a Spark expression that gives the same integers; the result is NOT private
until noise is added to it.

The selection carries (cell, units) as one struct per kept record, so the per-user bounding is
the counts' own (``bounding.user_records``: SRA's uniform sample or HPA's top rows): a user's kept
records depend on that user's records only, and the value rides along with the record it belongs to.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates import item_edges
from dp_spark.algorithms.means import BoundedSums
from dp_spark.algorithms.value_sums import ClipRange
from dp_spark.bounding.item_cap import capped_values
from dp_spark.bounding.user_records import Selection
from dp_spark.core.domain import AttributeDomain, ItemDomain


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


def cell_sums(selection: Selection, cell: Column, units: Column, cap: int | None = None,
              item_of_cell: Column | None = None) -> DataFrame:
    """DataFrame[_key, _count, _units]: for each cell (``cell``, an expression over the selection's
    input columns), the number of kept records and the sum of their ``units`` (a long per record,
    from :func:`units_column`). With ``cap``, at most that many of each user's kept records per
    item, ``item_of_cell`` naming a record's item from ``_value.cell`` (bounding.item_cap). Left
    on the executors."""
    kept = selection.kept_values(F.struct(cell.alias("cell"), units.alias("units")))
    if cap is not None:
        kept = capped_values(kept, item_of_cell, cap, selection.user_col)
    return kept.groupBy(F.col("_value.cell").alias("_key")).agg(F.count(F.lit(1)).alias("_count"),
                                                                F.sum("_value.units").alias("_units"))


def bounded_sums(selection: Selection, items: ItemDomain, value_col: str, clip: ClipRange,
                 attributes: AttributeDomain | None = None, cap: int | None = None
                 ) -> tuple[BoundedSums, BoundedSums | None]:
    """The selection's records counted and their values summed per item of the domain, and per
    (item, attribute value) cell with ``attributes`` (flattened item by item), zero where none
    fell: one Spark aggregation. With ``cap`` at most that many of a user's kept records per item
    count (c). The selection's input must be in the domain with usable values (io.validate_records)."""
    tally = cell_sums(selection, item_edges.edge_key(items, attributes), units_column(F.col(value_col), clip), cap,
                      item_edges.item_of_key("_value.cell", items, attributes)).toPandas()

    def per_cell(column: str) -> np.ndarray:
        return item_edges.edges_from_tally(tally[["_key", column]].rename(columns={column: "count"}), items,
                                           attributes)
    counts, units = per_cell("_count"), per_cell("_units")
    item_sums = BoundedSums(counts.sum(axis=1), units.sum(axis=1), selection.l, clip, cap)
    edge_sums = BoundedSums(counts.reshape(-1), units.reshape(-1), selection.l, clip, cap) if attributes else None
    return item_sums, edge_sums
