"""Placing aggregated values on a public domain, zero-filled.

Spark returns a group only where some record fell. A release needs a cell for every element of
the public domain, reached or not, so that which cells exist says nothing about the data
(specification §1.2). Every aggregate that leaves Spark goes through :func:`on_domain`; a
table released on the executors places its counts by the items' ranks (:func:`domain_positions`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from dp_spark.core.domain import ItemDomain

OUTSIDE = "records outside the public domain reached aggregation"


def on_domain(positions, values, shape, dtype=np.int64) -> np.ndarray:
    """An array of ``shape`` that is zero except at ``positions``, where ``values`` add up.

    ``shape`` is the domain's size, or a tuple of sizes for a grid of domains (items ×
    attributes); ``positions`` is one index array, or a tuple of index arrays for a grid. An
    index outside the domain (negative, as ``ItemDomain.index_of`` gives for an unknown id, or
    past the end) means that records skipped validation, and raises ValueError.
    """
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    index = positions if isinstance(positions, tuple) else (positions,)
    if len(index) != len(shape):
        raise ValueError(f"{len(index)} index arrays for a domain of {len(shape)} dimensions")
    index = tuple(np.asarray(p, dtype=np.int64) for p in index)
    if any(((p < 0) | (p >= size)).any() for p, size in zip(index, shape)):
        raise ValueError(OUTSIDE)
    out = np.zeros(shape, dtype=dtype)
    np.add.at(out, index, np.asarray(values, dtype=dtype))
    return out


def domain_positions(spark: SparkSession, items: ItemDomain) -> DataFrame:
    """DataFrame[item_id, _pos]: each id of a domain held on the driver with its rank (through Arrow)."""
    item_type = T.StringType() if items.is_string else T.LongType()
    frame = pd.DataFrame({"item_id": items.ids, "_pos": np.arange(len(items), dtype=np.int64)})
    return spark.createDataFrame(frame, schema=T.StructType([T.StructField("item_id", item_type, False),
                                                             T.StructField("_pos", T.LongType(), False)]))
