"""An aggregation's coverage and the guards' figures (release.guards; claim docs/privacy.md,
"Privacy claim: guards"), counted in one pass per user when a guard's limit is set or the operator
asked for diagnostics.

Per user with a usable id: n, its rows; d, its rows in no group (a key outside its values, a null
or unlisted tupled key, a value that is no number; with key columns chosen privately, a tuple left
out by the selection is no mismatch, as the counts' items left out are not); whether it has more
than l groups or more than c records in one, the bound truncating it. The figures are the users,
the sum of ⌊SHARE_GRID·d/n⌋ (each user's part in [0, SHARE_GRID]) and the users truncated: each
moves by at most its sensitivity when one user is added or removed, as the guards' claim needs.
The raw counts are NOT private: they go to the guards' noise and to the operator's diagnostics.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.families.aggregate import run
from dp_spark.families.aggregate.params import AggregateParams
from dp_spark.io.validation import user_values
from dp_spark.release import guards


def counted(records: DataFrame, params: AggregateParams, user_col: str = "user_id") -> tuple[guards.GuardFigures,
                                                                                               guards.Coverage]:
    """The guards' figures and the operator's coverage of ``records`` for ``params`` (groups known:
    private keys selected, listed tuples typed, l chosen)."""
    bad_user, user = user_values(records, user_col)
    # A null id is no user (validation's rule for the other families): its rows count for no one.
    read = records.where(~bad_user & user.isNotNull()).groupBy(user.alias("_u")).agg(F.count(F.lit(1)).alias("_n"))
    grouped = run.in_groups(records, params, user_col)
    # Rows a tuple left out by the selection drops are no mismatch: only what usable_records drops is.
    matched = run.usable_records(records, params, user_col) if params.keys.private else grouped
    in_groups = matched.groupBy(F.col(user_col).alias("_u")).agg(F.count(F.lit(1)).alias("_m"))
    bound = params.bound
    per_group = grouped.groupBy(F.col(user_col).alias("_u"), run.GROUP).agg(F.count(F.lit(1)).alias("_k"))
    truncated = per_group.groupBy("_u").agg(((F.count(F.lit(1)) > bound.groups_per_user)
                                        | (F.max("_k") > bound.records_per_group)).alias("_over"))
    per_user = read.join(in_groups, "_u", "left").join(truncated, "_u", "left") \
        .select("_n", F.coalesce("_m", F.lit(0)).alias("_m"), F.coalesce("_over", F.lit(False)).alias("_over"))
    row = per_user.agg(
        F.count(F.lit(1)).alias("users"), F.sum("_n").alias("rows"), F.sum(F.col("_n") - F.col("_m")).alias("dropped"),
        F.sum(F.floor(F.lit(guards.SHARE_GRID) * (F.col("_n") - F.col("_m")) / F.col("_n"))).alias("share"),
        F.sum(F.col("_over").cast("long")).alias("over")).collect()[0]
    users, over = int(row["users"]), int(row["over"] or 0)
    said = f"l = {bound.groups_per_user} groups, c = {bound.records_per_group} records per group"
    coverage = guards.Coverage(int(row["rows"] or 0), {"keys or value": int(row["dropped"] or 0)}, users=users,
                               users_truncated=over, bound=said)
    return guards.GuardFigures(users, int(row["share"] or 0), over), coverage
