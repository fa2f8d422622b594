"""Per-user contribution bounding: DataFrame -> DataFrame transforms, no noise.

Privacy property relied on (specification §1.1 rule 1, paper 000 Lemma 6):
every transform here decides a user's kept rows from that user's own rows and
a random key, never from other users' data. Adding or removing a user
therefore changes the output only by that user's kept rows, of which there
are at most ``l``. Counts over the result have L1 sensitivity ``l``.

Randomness (:mod:`dp_spark.bounding.keys`). Each row's sampling key is a keyed
hash of (salt, user, row key), not ``rand()``, so a task that Spark retries
picks exactly the same rows. The row key hashes the row's content and its
occurrence index among the user's identical rows, so the key is a function of
the salt and the user's own records: the argument above holds for any salt,
known or not, and wherever the other users' rows lie in the scan. The salt
reaches the rows as data (a broadcast column), never as a literal in a plan.

Cost (docs/lab/performance.md). The selection is one aggregation per user,
``min_by(value, order, l)``, which keeps a bounded heap per user instead of
sorting the user's rows with a window; when the selection is only counted, the
value is a long cell key rather than the whole row. Spark runs it as a sort-based
aggregate, so it is fed as few rows as possible: with each user's row count
known (one cheap hash aggregation, shared with input validation), a heavy
user's rows are pre-filtered with keep probability (l + 6(√l + 2))/n, which
leaves about 40 rows per user at l = 10 (for the top-l selection: only rows
above a score cutoff chosen from the public scores and the user's n,
:mod:`dp_spark.bounding.cutoffs`). Neither pre-filter changes the result:
users left short are redone exactly. A
:class:`Selection` that is only counted lists the short users in the same job
as the count, or, when they are rare, does not look for them at all: the
count's total tells whether there were any.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.bounding.cutoffs import best_first, min_score
from dp_spark.bounding.item_cap import ItemCap
from dp_spark.bounding.keys import new_salt, row_position, sample_salt, with_salt


def user_counts(df: DataFrame, user_col: str = "user_id") -> DataFrame:
    """DataFrame[user_col, _n]: each user's number of rows (one hash aggregation)."""
    return df.groupBy(user_col).agg(F.count(F.lit(1)).alias("_n"))


def _picked(df: DataFrame, l: int, order: Column, user_col: str, value: Column, *extra) -> DataFrame:
    """DataFrame[user_col, _picked, *extra]: ``value`` of each user's ``l`` rows of smallest ``order``, as an array.

    The value and the order are computed in a projection first: Spark evaluates a sort
    aggregate's inputs without generated code, row by row, which for HPA's selection at 10M rows
    cost more CPU time than the aggregation itself."""
    prepared = df.withColumns({"_value_in": value, "_order_in": order})
    return prepared.groupBy(user_col).agg(F.min_by("_value_in", "_order_in", l).alias("_picked"), *extra)


def _values_of(picked: DataFrame, user_col: str) -> DataFrame:
    return picked.select(user_col, F.explode("_picked").alias("_value"))


@dataclass(frozen=True)
class Tally:
    """How :meth:`Selection.counted` groups the picked values: by ``group`` of the value (the
    value itself by default), and with ``summand``, also the sum of ``summand`` of the values of
    each group (column ``_sum``). Both take the name of the column of picked values and give an
    expression over it: a value that packs a cell and a number per record
    (aggregates.value_sums) goes through the per-user selection as one long and is taken apart only
    in the tally."""

    group: Callable[[str], Column] | None = None
    summand: Callable[[str], Column] | None = None

    def aggregated(self, values: DataFrame, *by: Column) -> DataFrame:
        """DataFrame[_key, *by, count(, _sum)] from DataFrame[_value, ...]; left on the executors.
        A null value (a short user's placeholder) makes a null key and adds nothing to _sum."""
        key = self.group("_value") if self.group else F.col("_value")
        sums = [F.sum(self.summand("_value")).alias("_sum")] if self.summand else []
        return values.groupBy(key.alias("_key"), *by).agg(F.count(F.lit(1)).alias("count"), *sums)


COUNT = Tally()


def _tally(values: DataFrame, tally: Tally = COUNT) -> pd.DataFrame:
    """DataFrame[_key, count(, _sum)] on the driver: how many picked values fall in each group."""
    return tally.aggregated(values).toPandas()


def _capped_tally(values: DataFrame, tally: Tally, cap: ItemCap | None, user_col: str) -> tuple[pd.DataFrame, int]:
    """:func:`_tally` of ``values`` with at most cap.c per user and item, and how many values there
    were before the cap: those past it are tallied under a null key, left out of the result
    (through Arrow, which keeps a column of long keys long beside the null)."""
    if cap is None:
        result = _tally(values, tally)
        return result, int(result["count"].sum())
    grouped = tally.aggregated(cap.marked(values, user_col)).toArrow()
    total = pc.sum(grouped.column("count")).as_py() or 0
    return grouped.filter(pc.is_valid(grouped.column("_key"))).to_pandas(), int(total)


def capped_total(users_by_n: pd.Series, l: int) -> int:
    """Σ over users of min(n, l), from the number of users (values) with each row count n (index)."""
    return int((np.minimum(users_by_n.index.to_numpy(dtype=np.int64), l) * users_by_n.to_numpy(dtype=np.int64)).sum())


@dataclass(frozen=True)
class Selection:
    """Each user's ``l`` rows of smallest ``order``, planned but not computed.

    ``candidates`` is a subset of ``keyed`` chosen so that a user with at
    least min(n, l) candidates has every row it must keep among them (the
    pre-filters below); ``counts`` gives each user's n, or is None when the
    candidates are all rows; when it is given, every row of ``keyed`` carries
    its user's n as ``_n``. ``users_by_n`` (users per row count, as from
    validation) saves :meth:`counted` a job. ``short_users_likely`` says
    whether some user falls short in a typical run, which decides how
    :meth:`counted` checks.
    """

    keyed: DataFrame
    candidates: DataFrame
    counts: DataFrame | None
    l: int
    order: Column
    user_col: str
    columns: list[str]
    short_users_likely: bool = False
    users_by_n: pd.Series | None = None

    def _pick(self, df: DataFrame, value: Column, *extra) -> DataFrame:
        return _picked(df, self.l, self.order, self.user_col, value, *extra)

    def _exact(self, value: Column) -> DataFrame:
        """DataFrame[user_col, _value]: ``value`` of every selected row. A user left with fewer
        than min(n, l) candidates, or with none, is redone from all of its rows."""
        if self.counts is None:
            return _values_of(self._pick(self.keyed, value), self.user_col)
        # Materialised once (at most l values per user) so that finding the short
        # users does not run the aggregation again.
        picked = self._pick(self.candidates, value, F.max("_n").alias("_n")).localCheckpoint(eager=True)
        complete = picked.where(F.size("_picked") >= F.least(F.col("_n"), F.lit(self.l)))
        kept = _values_of(complete, self.user_col)
        # The complete users under a new column name: ``complete`` and ``counts`` come from the same
        # rows, and without adaptive execution Spark cannot tell their user columns apart in a join.
        done = complete.select(F.col(self.user_col).alias("_done_user"))
        short_users = self.counts.select(self.user_col).join(done, F.col(self.user_col) == done["_done_user"],
                                                             "left_anti")
        if short_users.isEmpty():
            return kept
        redone = self._pick(self.keyed.join(short_users, self.user_col, "left_semi"), value)
        return kept.unionByName(_values_of(redone, self.user_col))

    def kept_values(self, key: Column) -> DataFrame:
        """DataFrame[user_col, _value]: ``key`` of every selected row, exact, left on the
        executors (:meth:`counted` brings its tally to the driver instead)."""
        return self._exact(key)

    def rows(self) -> DataFrame:
        """The selected rows, with the columns of the input, exact."""
        row = F.struct(*[F.col(c) for c in self.columns if c != self.user_col])
        values = self._exact(row)
        return values.select(*[F.col(c) if c == self.user_col else F.col(f"_value.`{c}`").alias(c)
                               for c in self.columns])

    def counted(self, key: Column, tally: Tally = COUNT, cap: ItemCap | None = None) -> pd.DataFrame:
        """How many selected rows have each value of ``key``, an expression over the input's
        columns: DataFrame[_key, count] on the driver. A key can appear in more than one row
        (when short users were redone); its counts add up. With ``tally``, the rows are counted
        per group of their key instead, and a ``_sum`` column adds up a number taken from it.

        Only the key goes through the per-user selection. A long key is much cheaper there than
        a whole row: Spark's sort aggregate keeps an array of longs per user instead of an array
        of structs (HPA's selection at 10M rows: 2.9 s against 3.6 s; docs/lab/performance.md).

        When short users are rare, the candidates' selection is tallied directly: its total
        equals Σ min(n, l) exactly when no user was short (a short user has fewer rows, never
        more). Only otherwise is it tallied again, exactly. When they are likely, the exact
        tally is the only one.

        With ``cap`` (bounding.item_cap) at most cap.c of each user's selected rows per item are
        counted: those past it are tallied apart in the same job and left out, so that the total
        above still counts every selected row.
        """
        if self.short_users_likely:
            return self._counted_exactly(key, tally, cap)
        result, total = _capped_tally(_values_of(self._pick(self.candidates, key), self.user_col), tally, cap,
                                      self.user_col)
        if self.counts is None or total == self._capped_total():
            return result
        return self._counted_exactly(key, tally, cap)

    def _capped_total(self) -> int:
        """Σ min(n, l) over the users of ``counts``: what a count of the selection must add up to."""
        if self.users_by_n is not None:
            return capped_total(self.users_by_n, self.l)
        return self.counts.agg(F.sum(F.least(F.col("_n"), F.lit(self.l)))).first()[0] or 0

    def _counted_exactly(self, key: Column, tally: Tally = COUNT, cap: ItemCap | None = None) -> pd.DataFrame:
        """:meth:`counted`, exact on any data, in one job unless some user is short.

        The candidates carry their user's n, so the per-user selection gives each user's n as
        well: a user with fewer than min(n, l) picks is short. The same aggregation tallies the
        complete users' keys and lists the short users, who are then redone from all of their
        rows (a second scan, only when there are any). A user with no candidate at all does not
        appear in the selection; the tally notices, since the complete users' keys and the short
        users' min(n, l) then add up to less than Σ min(n, l), and only then is each user's row
        count joined with its selection to find it (a scan more). On MovieLens 1M no HPA run at
        l = 5 to 50 had such a user. Without the join in every run, HPA at 10M rows took 0.14 to
        0.22 s less in paired runs (docs/lab/performance.md, seventh round).
        """
        user = self.user_col
        if self.counts is None:
            return _capped_tally(_values_of(self._pick(self.keyed, key), user), tally, cap, user)[0]
        picked = self._pick(self.candidates, key, F.max("_n").alias("_n"))
        result, short, total = self._complete_tally_and_short_users(picked, tally, cap)
        if total + int(short["_capped"].sum()) != self._capped_total():
            with_every_user = self.counts.join(self._pick(self.candidates, key), user, "left")
            result, short, total = self._complete_tally_and_short_users(with_every_user, tally, cap)
        if short.empty:
            return result
        spark = self.keyed.sparkSession
        user_type = self.counts.schema[user].dataType
        short_users = spark.createDataFrame(short[[user]], schema=T.StructType([T.StructField(user, user_type)]))
        redone = self._pick(self.keyed.join(F.broadcast(short_users), user, "left_semi"), key)
        return pd.concat([result, _capped_tally(_values_of(redone, user), tally, cap, user)[0]], ignore_index=True)

    def _complete_tally_and_short_users(self, picked: DataFrame, tally: Tally = COUNT, cap: ItemCap | None = None
                                        ) -> tuple[pd.DataFrame, pd.DataFrame, int]:
        """From DataFrame[user, _n, _picked] (``_picked`` null for a user with no candidate): the
        complete users' tally, DataFrame[_key, count(, _sum)], with at most cap.c of a user's rows
        per item; the short users with their min(n, l), DataFrame[user, _capped]; and how many
        rows the complete users picked, before the cap. One job."""
        user = self.user_col
        complete = F.coalesce(F.size("_picked") >= F.least(F.col("_n"), F.lit(self.l)), F.lit(False))
        user_type = picked.schema[user].dataType
        no_value = F.array(F.lit(None).cast(picked.schema["_picked"].dataType.elementType))
        rows = picked.select(
            F.col(user), complete.alias("_complete"), F.least(F.col("_n"), F.lit(self.l)).alias("_least"),
            F.explode(F.when(complete, F.col("_picked")).otherwise(no_value)).alias("_value"),
        )
        if cap is not None:  # by the real user, before the complete users are put in one group
            rows = cap.marked(rows, user)
        complete = F.col("_complete")
        rows = rows.select(
            (~complete).alias("_short"),
            # Constants for complete users keep them in one group; never null, so an integer id
            # column stays integer on the driver.
            F.when(complete, F.lit(0).cast(user_type)).otherwise(F.col(user)).alias("_user"),
            F.when(complete, F.lit(0)).otherwise(F.col("_least")).alias("_capped"),
            F.col("_value"),
        )
        # Through Arrow and split before pandas: the short users' null key (and the rows past the
        # cap) would turn a pandas column of long keys into doubles.
        grouped = tally.aggregated(rows, F.col("_short"), F.col("_user"), F.col("_capped")).toArrow()
        is_short = grouped.column("_short")
        columns = ["_key", "count"] + (["_sum"] if tally.summand else [])
        complete_rows = grouped.filter(pc.invert(is_short))
        total = pc.sum(complete_rows.column("count")).as_py() or 0
        result = complete_rows.filter(pc.is_valid(complete_rows.column("_key"))).select(columns).to_pandas()
        short = grouped.filter(is_short).select(["_user", "_capped"]).rename_columns([user, "_capped"]).to_pandas()
        return result, short, int(total)


def sample_per_user(df: DataFrame, l: int, seed: int | None = None, user_col: str = "user_id", **options) -> DataFrame:
    """:func:`sample_selection`'s rows: at most ``l`` rows per user, as a DataFrame with the columns of ``df``."""
    return sample_selection(df, l, seed, user_col, **options).rows()


def sample_selection(
    df: DataFrame,
    l: int,
    seed: int | None = None,
    user_col: str = "user_id",
    *,
    salt: int | None = None,
    counts: DataFrame | None = None,
    users_by_n: pd.Series | None = None,
    oversample: float = 6.0,
) -> Selection:
    """At most ``l`` rows per user, a uniform sample without replacement.

    The sample is exactly each user's ``l`` rows of smallest random position;
    users with ≤ l rows keep all of them. ``counts`` (from :func:`user_counts`
    on the same ``df``) saves a pass when the caller has it. Heavy users' rows
    are pre-filtered with keep probability (l + oversample·(√l + 2))/n; a user
    left with fewer than l candidates (probability below 10^-8 per user at the
    default) is redone from all of its rows, so the pre-filter never changes
    the result; ``oversample`` only trades rows aggregated against how often
    that happens. ``users_by_n`` (users per row count of ``counts``) lets a
    count of the sample skip a job (:meth:`Selection.counted`).
    """
    if l < 1:
        raise ValueError(f"l must be >= 1, got {l}")
    if users_by_n is not None and counts is None:
        raise ValueError("users_by_n describes counts, which must be given with it")
    salt = sample_salt(seed) if salt is None else salt
    counts = user_counts(df, user_col) if counts is None else counts
    columns = df.columns
    # The salt rides on the per-user table that is broadcast anyway: no join of its own per row.
    keyed = df.join(F.broadcast(with_salt(counts, salt)), user_col).withColumn("_position", row_position(df, user_col))
    # Comparing as doubles is monotone in _position, so the candidates always
    # include every row smaller than any candidate: the pre-filter is exact.
    keep_below = F.lit((l + oversample * (math.sqrt(l) + 2)) * 2.0**63) / F.col("_n")
    candidates = keyed.where((F.col("_n") <= l) | (F.col("_position") < keep_below))
    return Selection(keyed, candidates, counts, l, F.col("_position"), user_col, columns, users_by_n=users_by_n)


def top_per_user(df: DataFrame, l: int, score_col: str, seed: int | None = None, user_col: str = "user_id",
                 **options) -> DataFrame:
    """:func:`top_selection`'s rows, as a DataFrame with the columns of ``df``."""
    return top_selection(df, l, score_col, seed, user_col, **options).rows()


def top_selection(
    df: DataFrame,
    l: int,
    score_col: str,
    seed: int | None = None,
    user_col: str = "user_id",
    *,
    salt: int | None = None,
    counts: DataFrame | None = None,
    cutoffs: list[tuple[int, int]] | None = None,
    users_by_n: pd.Series | None = None,
) -> Selection:
    """Each user's ``l`` rows with the highest ``score_col`` (a non-null
    integer); ties broken uniformly at random (by the row's random position).
    Users with ≤ l rows keep all.

    The score must be public or a DP output (HPA: noisy popularity), so the
    selection stays a per-user transform.

    With ``cutoffs`` (:func:`dp_spark.bounding.cutoffs.score_cutoffs` of the public item scores) and
    ``counts`` (rows per user of ``df``), a user with n rows sends only its
    rows scoring at or above the first cutoff it qualifies for into the
    selection. If l or more of them are left, every row left out scores
    strictly below l kept ones and could never be chosen; otherwise the user
    is redone from all of its rows. The result is the same either way.

    ``users_by_n`` (users per row count of ``counts``) saves a count of the selection a job.
    """
    if l < 1:
        raise ValueError(f"l must be >= 1, got {l}")
    if users_by_n is not None and counts is None:
        raise ValueError("users_by_n describes counts, which must be given with it")
    salt = new_salt(seed, "top_per_user") if salt is None else salt
    columns = df.columns
    # The position is part of the order expression rather than a column of ``keyed``, so that
    # Spark hashes only the candidates, not every row.
    order = best_first(F.col(score_col), row_position(df, user_col))
    if not cutoffs:
        keyed = with_salt(df, salt)
        return Selection(keyed, keyed, None, l, order, user_col, columns)
    if any(a[1] <= b[1] or a[0] <= b[0] for a, b in zip(cutoffs, cutoffs[1:])):
        raise ValueError("cutoff row counts and scores must be strictly decreasing")
    counts = user_counts(df, user_col) if counts is None else counts
    per_user = counts.select(user_col, "_n", min_score(F.col("_n"), l, cutoffs).alias("_min_score"))
    keyed = df.join(F.broadcast(with_salt(per_user, salt)), user_col)
    candidates = keyed.where(F.col("_min_score").isNull() | (F.col(score_col) >= F.col("_min_score")))
    # Real users stray from the crowd's tastes: on MovieLens 1M some user fell short of its
    # cutoff in every HPA run (l = 5 to 50), so a count of this selection looks for short users
    # as it counts, and redoes only them.
    return Selection(keyed, candidates, counts, l, order, user_col, columns, short_users_likely=True,
                     users_by_n=users_by_n)
