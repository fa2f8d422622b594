"""At most ``c`` of each user's kept records per item: the bound that gives counts a small L2 sensitivity.

With at most l records per user the item counts move by at most l in L1 when one user comes or goes,
but by up to l in L2 too, when all l fall on one item. With at most c per item as well, a user adds
n_j ≤ c to each item with Σ n_j ≤ l, so the squared L2 move is Σ n_j² ≤ c·Σ n_j ≤ l·c (with c = 1,
"each user counted once per item", it is l). Gaussian noise is paid by the L2 sensitivity
(docs/sra_hpa.md, "Privacy claim: sra"), so the cap is what makes it pay off.

The cap applies to each user's selected records (SRA's sample, HPA's top l), after the selection:
those are at most l per user, already grouped by user on the executors, so the cap costs a sort of
them within their partitions and no shuffle of the whole table. (Capping every record before the
selection took 38.9 s against 2.8 s on the 10M-row table: docs/performance.md.) A user whose selected
records repeat an item ends with fewer than l: their count stays within l.

Which c of a user's selected records of one item are kept is a function of that user's own records
only: they are ordered by a hash of (user, cell key), then by the cell key, never by anything another
user holds, so the choice is the same in every run and every retried task.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

_RANK = "_rank_in_item"


def capped_values(values: DataFrame, item: Column, c: int, user_col: str = "user_id") -> DataFrame:
    """``values`` (DataFrame[user_col, _value], one row per selected record: its cell key) with at
    most ``c`` rows per (user, ``item``), ``item`` an expression of ``_value`` naming the record's item."""
    if isinstance(c, bool) or not isinstance(c, int) or c < 1:
        raise ValueError(f"c must be an integer >= 1, got {c!r}")
    value = F.col("_value")
    ranked = Window.partitionBy(F.col(user_col), item).orderBy(F.xxhash64(F.col(user_col), value), value)
    return values.withColumn(_RANK, F.row_number().over(ranked)).where(F.col(_RANK) <= c).drop(_RANK)
