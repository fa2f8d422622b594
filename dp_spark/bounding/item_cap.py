"""At most ``c`` of each user's records per item: the bound that gives counts a small L2 sensitivity.

With at most l records per user the item counts move by at most l in L1 when one user comes or goes,
but by up to l in L2 too, when all l fall on one item. With at most c per item as well, one user
changes at most l/c items by at most c each: the squared L2 sensitivity is at most l·c (with c = 1,
"each user counted once per item", it is l). Gaussian noise is paid by the L2 sensitivity
(docs/sra_hpa.md, "Privacy claim: sra"), so the cap is what makes it pay off.

Which c records of a user's records of one item are kept is a function of that user's own records
only: they are ordered by the row key (a hash of the record's content and its occurrence index among
the user's identical records, :mod:`dp_spark.bounding.keys`), then by the content itself, so the
choice is the same in every run and every retried task, and no other user's records take part.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dp_spark.bounding.keys import ROW_KEY

_RANK = "_rank_in_item"


def cap_per_item(records: DataFrame, c: int, user_col: str = "user_id", item_col: str = "item_id") -> DataFrame:
    """``records`` with at most ``c`` rows per (user, item): for each pair, the rows of smallest row
    key (content as the tie-break). One shuffle by (user, item) and a sort within it."""
    if isinstance(c, bool) or not isinstance(c, int) or c < 1:
        raise ValueError(f"c must be an integer >= 1, got {c!r}")
    content = [F.col(f"`{name}`") for name in records.columns if name not in (user_col, item_col, ROW_KEY)]
    order = ([F.col(ROW_KEY)] if ROW_KEY in records.columns else []) + content
    ranked = Window.partitionBy(user_col, item_col).orderBy(*order) if order else \
        Window.partitionBy(user_col, item_col).orderBy(F.col(item_col))
    return records.withColumn(_RANK, F.row_number().over(ranked)).where(F.col(_RANK) <= c).drop(_RANK)
