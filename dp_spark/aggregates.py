"""Aggregation: bounded records -> count arrays over the public domain.

One ``groupBy`` on a key that packs (item, attr) into a long gives the edge
counts; item counts are their row sums, because every record hits exactly one
item and one edge (paper 000 §3).
Only the aggregate (at most |items| x |attributes| rows) reaches the driver,
where it is placed into a zero-filled array indexed by the public domain, so
items nobody rated get a cell too (ALGORITHMS.md §1.2).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dp_spark.domain import AttributeDomain, ItemDomain


def _packable(items: ItemDomain, h: int) -> bool:
    """Whether item_id·h + (h − 1) stays within a signed 64-bit long for every id in the domain."""
    return int(items.ids.min()) >= -(2**63) // h and int(items.ids.max()) <= (2**63 - h) // h


def edge_key(items: ItemDomain, attributes: AttributeDomain | None) -> Column:
    """One value per (item, attribute) cell: item_id·h + the attribute's position in its domain
    (item_id alone without attributes), null for an attribute outside the domain.

    A long, so that a per-user selection carries one primitive per row
    (:meth:`dp_spark.bounding.Selection.counted`). Ids too large to pack (beyond
    about 2^63 / h) give a struct of the two instead, which is correct but slower.
    """
    item = F.col("item_id").cast("long")
    if not attributes:
        return item
    h = len(attributes)
    found = F.array_position(F.array(*[F.lit(v) for v in attributes.values]), F.col("attr").cast("string"))
    position = F.when(found > 0, found - 1)
    if _packable(items, h):
        return item * h + position
    return F.when(position.isNotNull(), F.struct(item.alias("item"), position.alias("attr")))


def edges_from_tally(tally: pd.DataFrame, items: ItemDomain, attributes: AttributeDomain | None) -> np.ndarray:
    """Counts per :func:`edge_key` value (DataFrame[_key, count]) placed into an int64 array
    [item, attribute], zero where no row fell; one column when there are no attributes."""
    h = len(attributes) if attributes else 1
    keys = tally["_key"]
    if keys.isna().any():
        raise ValueError("records outside the public domain reached aggregation")
    if keys.dtype == object:  # the struct fallback: a dict per key with Arrow, a Row without
        item_ids = np.array([k["item"] for k in keys], dtype=np.int64)
        attr_pos = np.array([k["attr"] for k in keys], dtype=np.int64)
    else:
        item_ids, attr_pos = np.divmod(keys.to_numpy(dtype=np.int64), h)
    item_pos = items.index_of(item_ids)
    if (item_pos < 0).any():
        raise ValueError("records outside the public domain reached aggregation")
    counts = np.zeros((len(items), h), dtype=np.int64)
    np.add.at(counts, (item_pos, attr_pos), tally["count"].to_numpy(dtype=np.int64))
    return counts


def edge_counts(df: DataFrame, items: ItemDomain, attributes: AttributeDomain | None) -> np.ndarray:
    """True counts as int64 [item, attribute]; one column when there are no attributes.

    ``df`` must already be restricted to the domain (``io.validate_records``).
    """
    tally = df.groupBy(edge_key(items, attributes).alias("_key")).count().toPandas()
    return edges_from_tally(tally, items, attributes)


def selected_edge_counts(selection, items: ItemDomain, attributes: AttributeDomain | None) -> np.ndarray:
    """:func:`edge_counts` of a :class:`dp_spark.bounding.Selection`'s rows, which only the
    cell key goes through."""
    return edges_from_tally(selection.counted(edge_key(items, attributes)), items, attributes)


def item_counts(edges: np.ndarray) -> np.ndarray:
    return edges.sum(axis=1)
