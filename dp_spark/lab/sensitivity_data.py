"""The sensitivity audit's data (lab.sensitivity): the table D, the added user, the neighbours'
layouts, the public domains and parameters every audited family shares, and the records as the
families read them (with row keys, with a value of their own). Pure data in, DataFrames out."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dp_spark.bounding import keys
from dp_spark.core.clip_range import ClipRange
from dp_spark.core.domain import AttributeDomain, ItemDomain
from dp_spark.families.aggregate.quantiles import Candidates

SEED = 11  # known to the adversary: every salt is derived from it
ITEMS = 12
ATTRS = ("a", "b", "c")
BOUND = 3  # l, d, l0, θ, M and records per user alike
VISITS_CAP = 2  # location entropy's C
HISTOGRAM_EDGES = (1, 2, 4, 8, 16)  # the user histogram's public bins (the last one open)
LAYOUTS = ("first", "last", "spread", "reshuffled")


def table(users: int = 30, seed: int = 5, duplicates: bool = True) -> pd.DataFrame:
    """D: ``users`` users with 1 to 14 records over ITEMS items and ATTRS; with ``duplicates`` most
    users repeat some of their records exactly (same item and attribute)."""
    rng = np.random.default_rng(seed)
    rows = []
    for user in range(1, users + 1):
        n = int(rng.integers(1, 15))
        cells = rng.choice(ITEMS * len(ATTRS), size=n, replace=duplicates or n > ITEMS * len(ATTRS))
        rows += [(user, 1 + int(c) // len(ATTRS), ATTRS[int(c) % len(ATTRS)]) for c in cells]
    return pd.DataFrame(rows, columns=["user_id", "item_id", "attr"])


def added_user(user_id: int, duplicates: bool = True) -> pd.DataFrame:
    """The user D′ adds: ten records, several of them identical when ``duplicates``."""
    cells = [0, 0, 0, 5, 7, 7, 9, 12, 20, 33] if duplicates else [0, 1, 2, 5, 7, 8, 9, 12, 20, 33]
    return pd.DataFrame([(user_id, 1 + c // len(ATTRS), ATTRS[c % len(ATTRS)]) for c in cells],
                        columns=["user_id", "item_id", "attr"])


def neighbour(base: pd.DataFrame, extra: pd.DataFrame, layout: str) -> pd.DataFrame:
    """D′ as a row order: the extra user's records first, last, or spread evenly between D's rows;
    "reshuffled" permutes every row of D′ (the caller also spreads it over more partitions)."""
    if layout == "first":
        return pd.concat([extra, base], ignore_index=True)
    if layout == "last":
        return pd.concat([base, extra], ignore_index=True)
    if layout == "spread":
        at = np.linspace(0, len(base), len(extra), endpoint=False).astype(int)
        parts, start = [], 0
        for k, cut in enumerate(at):
            parts += [base.iloc[start:cut], extra.iloc[[k]]]
            start = cut
        return pd.concat(parts + [base.iloc[start:]], ignore_index=True)
    if layout == "reshuffled":
        whole = pd.concat([base, extra], ignore_index=True)
        return whole.iloc[np.random.default_rng(1).permutation(len(whole))].reset_index(drop=True)
    raise ValueError(f"unknown layout {layout!r}")


SCHEMA = "user_id long, item_id long, attr string"


def frame(spark: SparkSession, rows: pd.DataFrame, layout: str = "first", schema: str = SCHEMA) -> DataFrame:
    """The rows as Spark reads them, in their order; "reshuffled" over five partitions."""
    df = spark.createDataFrame(rows, schema)
    return df.repartition(5) if layout == "reshuffled" else df.coalesce(2)


ITEM_DOMAIN = ItemDomain(ids=np.arange(1, ITEMS + 1, dtype=np.int64), description="sensitivity audit",
                         id_range=(1, ITEMS))
ATTRIBUTE_DOMAIN = AttributeDomain(ATTRS)


def keyed(df: DataFrame, distinct: bool) -> DataFrame:
    return keys.with_row_key(df, distinct=distinct)


# The means' range: values from −3.1 to 5.3 below, so some are clipped; 10 grid units per half-range.
MEANS_CLIP = ClipRange(-1.0, 4.0, steps=10)
HISTOGRAM_CANDIDATES = Candidates((-1.0, 0.0, 1.5, 2.0, 4.0))  # uneven, within MEANS_CLIP


def valued(df: DataFrame, distinct: bool) -> DataFrame:
    """The rows with a value of their own (a function of the record alone: clipped at both ends
    for some, NaN for others) and their row keys: the means' input before validation."""
    code = F.pmod(F.col("item_id") * 7 + F.length("attr") + F.ascii("attr"), F.lit(13))
    value = F.when(code == 12, F.lit(float("nan"))).otherwise(code * 0.7 - 3.1)
    return keyed(df, distinct).withColumn("value", value.cast("double"))
