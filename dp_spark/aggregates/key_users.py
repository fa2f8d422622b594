"""Distinct users per key on the driver: the counts private partition selection thresholds
(docs/partition_selection.md). NOT private: read only by
:func:`dp_spark.release.partition_selection.select`.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def users_per_key(bounded: DataFrame, key_col: str = "item_id") -> tuple[np.ndarray, np.ndarray]:
    """(keys, users): every key of ``bounded`` (one row per distinct (user, key) pair, as
    :func:`dp_spark.bounding.user_keys.bounded_keys` returns) and its number of users, sorted by
    key. Integer keys come back as int64, string keys as an object array of str."""
    table = bounded.groupBy(key_col).agg(F.count(F.lit(1)).alias("_users")).toPandas()
    keys = table[key_col].to_numpy()
    if keys.dtype.kind not in "iu":
        keys = keys.astype(object)
    users = table["_users"].to_numpy(dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    return keys[order], users[order]
