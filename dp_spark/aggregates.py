"""Aggregation: bounded records -> count arrays over the public domain.

One ``groupBy(item, attr)`` gives the edge counts; item counts are their row
sums, because every record hits exactly one item and one edge (paper 000 §3).
Only the aggregate (at most |items| x |attributes| rows) reaches the driver,
where it is placed into a zero-filled array indexed by the public domain, so
items nobody rated get a cell too (ALGORITHMS.md §1.2).
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame

from dp_spark.domain import AttributeDomain, ItemDomain


def edge_counts(df: DataFrame, items: ItemDomain, attributes: AttributeDomain | None) -> np.ndarray:
    """True counts as int64 [item, attribute]; one column when there are no attributes.

    ``df`` must already be restricted to the domain (``io.validate_records``).
    """
    keys = ["item_id"] + (["attr"] if attributes else [])
    rows = df.groupBy(*keys).count().toPandas()
    counts = np.zeros((len(items), len(attributes) if attributes else 1), dtype=np.int64)
    item_pos = items.index_of(rows["item_id"].to_numpy())
    attr_pos = attributes.index_of(rows["attr"]) if attributes else np.zeros(len(rows), dtype=np.int64)
    if (item_pos < 0).any() or (attr_pos < 0).any():
        raise ValueError("records outside the public domain reached aggregation")
    np.add.at(counts, (item_pos, attr_pos), rows["count"].to_numpy(dtype=np.int64))
    return counts


def item_counts(edges: np.ndarray) -> np.ndarray:
    return edges.sum(axis=1)
