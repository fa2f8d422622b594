"""Aggregation: bounded records -> count arrays over the public domain.

One ``groupBy`` on a key that packs (item, attr) into a long gives the edge
counts; item counts are their row sums, because every record hits exactly one
item and one edge (paper 000 §3).
Only the aggregate (at most |items| x |attributes| rows) reaches the driver,
where it is placed into a zero-filled array indexed by the public domain, so
items nobody rated get a cell too (:func:`dp_spark.aggregates.domain_vector.on_domain`,
specification §1.2).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates.domain_vector import OUTSIDE, domain_positions, on_domain
from dp_spark.bounding.item_cap import ItemCap, capped_values
from dp_spark.core.domain import AttributeDomain, ItemDomain


def _packable(items: ItemDomain, h: int, margin: int = 0) -> bool:
    """Whether item_id·h − ``margin`` and item_id·h + h stay within a signed 64-bit long for every
    id in the domain (never for string ids): item_id·h + (h − 1) and every partial sum on the way
    to it, in whatever order Spark's optimizer adds the terms (it gathers the literals of a sum),
    and with ``margin`` a term down to −margin beside them."""
    if items.is_string:
        return False
    low, high = (int(v) for v in items.bounds)
    return low * h - margin >= -(2**63) and high * h + h <= 2**63 - 1


# array_position scans the domain for every row: 5M keys took 0.42 s with 7 values, 0.98 s
# with 64 and 5.8 s with 512, against 0.23–0.34 s for a struct of (item, attr).
_MAX_PACKED_ATTRIBUTES = 16


def _packs(items: ItemDomain, attributes: AttributeDomain | None) -> bool:
    """Whether :func:`edge_key` packs (item, attribute) into one long."""
    return bool(attributes) and len(attributes) <= _MAX_PACKED_ATTRIBUTES and _packable(items, len(attributes))


def long_key_fits(items: ItemDomain, attributes: AttributeDomain | None, width: int) -> bool:
    """Whether :func:`edge_key` is a long and key·``width`` + (``width`` − 1) stays within a signed
    64-bit long for every cell of the domain: room to pack a number in [0, width) beside the key,
    made as key·width + (n + shift) from an n ≥ −width, summed in any order."""
    if items.is_string or (attributes and not _packs(items, attributes)):
        return False
    return _packable(items, (len(attributes) if attributes else 1) * width, margin=width)


def edge_key(items: ItemDomain, attributes: AttributeDomain | None) -> Column:
    """One value per (item, attribute) cell, null for an attribute outside the domain (or null).

    For a small attribute domain a long, item_id·h + the attribute's position in its domain
    (item_id alone without attributes), so that a per-user selection carries one primitive per
    row (:meth:`dp_spark.bounding.user_records.Selection.counted`). For a large domain, or ids too large to
    pack (beyond about 2^63 / h), a struct of (item, attr) whose attribute is looked up on the
    driver: correct, but slower through a selection. String ids (a string domain) are the
    string item_id without attributes, and the struct with them.
    """
    item = F.col("item_id").cast("string" if items.is_string else "long")
    if not attributes:
        return item
    h = len(attributes)
    attr = F.col("attr").cast("string")
    if _packs(items, attributes):
        found = F.array_position(F.array(*[F.lit(v) for v in attributes.values]), attr)
        return F.when(found > 0, item * h + found - 1)
    in_domain = attr.isin(list(attributes.values))
    return F.when(in_domain, F.struct(item.alias("item"), attr.alias("attr")))


def edges_from_tally(tally: pd.DataFrame, items: ItemDomain, attributes: AttributeDomain | None) -> np.ndarray:
    """Counts per :func:`edge_key` value (DataFrame[_key, count]) placed into an int64 array
    [item, attribute], zero where no row fell; one column when there are no attributes."""
    h = len(attributes) if attributes else 1
    keys = tally["_key"]
    if keys.isna().any():
        raise ValueError(OUTSIDE)
    if items.is_string and not attributes:  # the string item id itself
        item_ids, attr_pos = keys.to_numpy(dtype=object), np.zeros(len(keys), dtype=np.int64)
    elif keys.dtype == object:  # the struct form: a dict per key with Arrow, a Row without
        item_ids = np.array([k["item"] for k in keys], dtype=object if items.is_string else np.int64)
        attr_pos = attributes.index_of([k["attr"] for k in keys])
    else:
        item_ids, attr_pos = np.divmod(keys.to_numpy(dtype=np.int64), h)
    return on_domain((items.index_of(item_ids), attr_pos), tally["count"], (len(items), h))


def edge_counts(df: DataFrame, items: ItemDomain, attributes: AttributeDomain | None) -> np.ndarray:
    """True counts as int64 [item, attribute]; one column when there are no attributes.

    ``df`` must already be restricted to the domain (``io.validate_records``).
    """
    tally = df.groupBy(edge_key(items, attributes).alias("_key")).count().toPandas()
    return edges_from_tally(tally, items, attributes)


def item_of_key(column: str, items: ItemDomain, attributes: AttributeDomain | None) -> Column:
    """The item of the :func:`edge_key` values in ``column`` (exact integer division for packed keys)."""
    if not attributes:
        return F.col(column)
    if _packs(items, attributes):
        h = len(attributes)
        return F.expr(f"({column} - pmod({column}, {h})) div {h}")
    return F.col(column).getField("item")


def _capped_kept_values(selection, items: ItemDomain, attributes: AttributeDomain | None, cap: int) -> DataFrame:
    """The selection's cell keys, DataFrame[user, _value], with at most ``cap`` per user and item
    (bounding.item_cap)."""
    values = selection.kept_values(edge_key(items, attributes))
    return capped_values(values, item_of_key("_value", items, attributes), cap, selection.user_col)


def selected_edge_counts(selection, items: ItemDomain, attributes: AttributeDomain | None,
                         cap: int | None = None) -> np.ndarray:
    """:func:`edge_counts` of a :class:`dp_spark.bounding.user_records.Selection`'s rows, which only the
    cell key goes through; with ``cap``, at most that many of each user's selected rows per item."""
    capped = None if cap is None else ItemCap(cap, item_of_key("_value", items, attributes))
    return edges_from_tally(selection.counted(edge_key(items, attributes), cap=capped), items, attributes)


def item_counts(edges: np.ndarray) -> np.ndarray:
    return edges.sum(axis=1)


def selected_cell_tally(selection, items: ItemDomain, attributes: AttributeDomain | None,
                        cap: int | None = None) -> DataFrame:
    """DataFrame[_cell, _count] on the executors: the selected rows counted per cell, where a
    cell's index is the item's rank in the domain times the number of attribute values, plus the
    attribute's rank (:class:`dp_spark.publishers.executor_laplace.CellGrid`); only cells some row
    fell in. The rows must already be restricted to the domain (``io.validate_records``). With
    ``cap``, at most that many of each user's selected rows per item."""
    values = (selection.kept_values(edge_key(items, attributes)) if cap is None
              else _capped_kept_values(selection, items, attributes, cap))
    tally = values.groupBy(F.col("_value").alias("_key")).agg(F.count(F.lit(1)).alias("_count"))
    return cells_of_keys(tally, items, attributes)


def cells_of_keys(tally: DataFrame, items: ItemDomain, attributes: AttributeDomain | None,
                  figures: tuple[str, ...] = ("_count",)) -> DataFrame:
    """A tally by :func:`edge_key` (DataFrame[_key, *figures]) as a tally by cell index,
    DataFrame[_cell, *figures]."""
    h = len(attributes) if attributes else 1
    key = F.col("_key")
    if not attributes:
        item, attr = key, F.lit(0).cast("long")
    elif _packs(items, attributes):
        attr = F.pmod(key, F.lit(h))
        item = F.expr(f"(_key - pmod(_key, {h})) div {h}")
    else:
        item = key.getField("item")
        attr = (F.array_position(F.array(*[F.lit(v) for v in attributes.values]), key.getField("attr")) - 1)
    decoded = tally.select(item.alias("item_id"), attr.cast("long").alias("_attr"), *figures)
    if items.id_range:
        positioned = decoded.withColumn("_pos", F.col("item_id") - F.lit(items.id_range[0]))
    else:  # a left join: a key outside the domain keeps its row, with no position
        positioned = decoded.join(domain_positions(tally.sparkSession, items), "item_id", "left")
    cell = F.col("_pos") * F.lit(h) + F.col("_attr")
    # A key outside the domain (records that skipped validation) fails the release, as
    # on_domain does on the driver, rather than being dropped or counted in another cell.
    inside = (F.col("_pos").between(0, len(items) - 1) & F.col("_attr").between(0, h - 1))
    checked = F.when(F.coalesce(inside, F.lit(False)), cell).otherwise(F.raise_error(F.lit(OUTSIDE)))
    return positioned.select(checked.cast("long").alias("_cell"), *figures)
