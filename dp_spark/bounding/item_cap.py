"""At most ``c`` of each user's kept records per item: the bound that gives counts a small L2 sensitivity.

With at most l records per user the item counts move by at most l in L1 when one user comes or goes,
but by up to l in L2 too, when all l fall on one item. With at most c per item as well, a user adds
n_j ≤ c to each item with Σ n_j ≤ l, so the squared L2 move is Σ n_j² ≤ c·Σ n_j ≤ l·c (with c = 1,
"each user counted once per item", it is l). Gaussian noise is paid by the L2 sensitivity
(docs/sra_hpa.md, "Privacy claim: sra"), so the cap is what makes it pay off.

The cap applies to each user's selected records (SRA's sample, HPA's top l), after the selection:
those are at most l per user, already grouped by user on the executors, so the cap costs a sort of
them within their partitions and no shuffle of the whole table. (Capping every record before the
selection took 38.9 s against 2.8 s on the 10M-row table: docs/lab/performance.md.) A user whose selected
records repeat an item ends with fewer than l: their count stays within l. A selection that is only
tallied (bounding.user_records.Selection.counted) applies the cap in its own job, marking the
records past it rather than dropping them (``ItemCap.marked``), so that its check that no user was
left short still sees every selected record.

Which c of a user's selected records of one item are kept is a function of that user's own records
only: they are ordered by a hash of (user, cell key), then by the cell key, never by anything another
user holds, so the choice is the same in every run and every retried task.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from dp_spark.bounding.keys import text_user, user_hash

_RANK = "_rank_in_item"


@dataclass(frozen=True)
class ItemCap:
    """At most ``c`` of a user's selected records per item, ``item`` an expression of the column
    ``_value`` (a selected record's cell key) naming the record's item."""

    c: int
    item: Column

    def __post_init__(self):
        if isinstance(self.c, bool) or not isinstance(self.c, int) or self.c < 1:
            raise ValueError(f"c must be an integer >= 1, got {self.c!r}")

    def _rank(self, values: DataFrame, user_col: str) -> Column:
        value = F.col("_value")
        order = user_hash([], F.col(user_col), [value], text_user(values, user_col))
        ranked = Window.partitionBy(F.col(user_col), self.item).orderBy(order, value)
        return F.row_number().over(ranked)

    def kept(self, values: DataFrame, user_col: str = "user_id") -> DataFrame:
        """``values`` (DataFrame[user_col, _value, ...], one row per selected record) with at most
        c rows per (user, item)."""
        return values.withColumn(_RANK, self._rank(values, user_col)).where(F.col(_RANK) <= self.c).drop(_RANK)

    def marked(self, values: DataFrame, user_col: str = "user_id") -> DataFrame:
        """The same rows, those past the cap kept but with a null ``_value``: a tally then counts
        them apart (a null key), and its total still says how many records were selected
        (bounding.user_records: the check that no user was left short)."""
        over = self._rank(values, user_col) > self.c
        return values.withColumn("_value", F.when(over, F.lit(None)).otherwise(F.col("_value")))


def capped_values(values: DataFrame, item: Column, c: int, user_col: str = "user_id") -> DataFrame:
    """``values`` (DataFrame[user_col, _value], one row per selected record: its cell key) with at
    most ``c`` rows per (user, ``item``), ``item`` an expression of ``_value`` naming the record's item."""
    return ItemCap(c, item).kept(values, user_col)
