"""The squared norms of the bias a per-user bound brings, for every candidate bound, summed on
the executors: the Spark twin of ``release.bound_selection.squared_bias_norms`` (the terms,
their caps and why: that module and docs/bound_selection.md, "The quality"). NOT private: read
only by ``bound_selection.choose_bound``.

Each user's records per cell (k) are counted beside the user's records in the domain (n); each row
gets one integer term per candidate, summed per cell, and the squares are summed to one row per
table. For HPA, which keeps each user's records of highest noisy popularity first, each (user,
item) also gets where its records rank among the user's (``ItemRanking``: a window per user, so
that path shuffles by user, then by item for the sums). Without a ranking the records are
shuffled by item, so that a cell's users are all in one task: the counts
per (cell, user) and the sums per cell then need no further shuffle. The terms are exact integer
divisions: of longs when the largest user's numbers fit one (the caller knows the largest n),
else of decimals, several times slower; the quotients are at most grid·c, so they fit a long. The
sums are longs and the squares decimals: the driver gets exact integers.

``expected_kept`` gives the means' quality its per-cell kept counts from the same shuffle
(release.mean_bound_quality).
``anchor_squared_norms`` gives the estimate choice its anchors (release.bound_estimate) from the
same shuffle: every record of a cell counted, each user's terms scaled down to the anchor's reach
(the sum of their squares that the anchor's sensitivity allows), which a join of each user's sum of
squares back onto their rows applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from dp_spark.bounding.user_records import capped_total
from dp_spark.core.domain import ItemDomain
from dp_spark.release.bound_estimate import SHRINK
from dp_spark.release.bound_selection import checked_user_cap
from dp_spark.release.hpa_selection import with_item_values

_WIDE = "decimal(38,0)"
# A per-cell cap above any count a cell can hold (a long): min(k, _NO_CAP) = k.
_NO_CAP = 2**62
# Up to this many users (two longs each) the per-user table is broadcast to every task.
BROADCAST_USERS = 2_000_000
# The records are shuffled into partitions of about this many, so that each task's per-(cell, user)
# counts stay small enough not to spill: at 10M rows in local mode (2 cores, Spark's default heap)
# the release took 42 s with the session's 8 partitions, 27 s with 64 and 30 s with 128
# (docs/lab/performance.md, "Choosing l privately").
RECORDS_PER_PARTITION = 160_000


def _term(bound: int, first: int, user_cap: int, cap: int, grid: int, kind: str, ranked: bool) -> Column:
    """bound_selection.bias_term over the columns _k and _n, and with ``ranked`` _t and _g:
    ⌊grid·min(k, c)·min(g, (t − b)⁺)·U / (g·max(n − b_1, U))⌋, which is ⌊grid·min(k, c)·(n − b)⁺·U
    / (n·max(n − b_1, U))⌋ unranked (t = g = n), exact in ``kind`` ("bigint" or the decimal; the
    integers in the expression are public: config values and U, post-processing of a DP count)."""
    if user_cap == 0:
        return F.lit(0).cast("long")
    dropped, tied = ("least(_g, greatest(_t - {b}, 0))", "_g") if ranked else ("greatest(_n - {b}, 0)", "_n")
    return F.expr(
        f"cast((cast({grid * user_cap} as {kind}) * cast(least(_k, {cap}) as {kind}) "
        f"* cast({dropped.format(b=bound)} as {kind})) "
        f"div (cast({tied} as {kind}) * cast(greatest(_n - {first}, {user_cap}) as {kind})) as bigint)")


def _arithmetic(largest_n: int | None, user_cap: int, cap: int, grid: int) -> str:
    """Long arithmetic when the numerator and the denominator of every term fit below 2^62 for
    users of at most ``largest_n`` records, else decimals."""
    if largest_n is None:
        return _WIDE
    numerator = grid * max(user_cap, 1) * cap * largest_n
    denominator = largest_n * max(largest_n, user_cap)
    return "bigint" if max(numerator, denominator) < 2**62 else _WIDE


def _squared_norms(per_cell: DataFrame, cells: Sequence[str], bounds: list[int], user_cap: int, cap: int,
                   grid: int, kind: str, ranked: bool) -> list[int]:
    """Σ_j (Σ_u term)² per candidate over one table's cells; ``per_cell`` has user_id, the cells'
    columns, _k and _n, and with ``ranked`` _t and _g."""
    sums = per_cell.groupBy(*cells).agg(*[F.sum(_term(b, bounds[0], user_cap, cap, grid, kind, ranked))
                                          .alias(f"_b{i}") for i, b in enumerate(bounds)])
    row = sums.agg(F.count(F.lit(1)).alias("_cells"),
                   *[F.sum(F.col(f"_b{i}").cast(_WIDE) * F.col(f"_b{i}").cast(_WIDE)).alias(f"_s{i}")
                     for i in range(len(bounds))]).collect()[0]
    if row["_cells"] == 0:
        return [0] * len(bounds)
    values = [row[f"_s{i}"] for i in range(len(bounds))]
    if any(v is None for v in values):  # a decimal overflow, when ANSI mode is off
        raise ArithmeticError("the bias norms overflowed 38 digits (decimal); the bound cannot be chosen on this "
                              "table: set the bound instead of \"auto\"")
    return [int(v) for v in values]


def record_count(users_by_n: pd.Series) -> int:
    """Σ n over the users, from validation's users per row count n (a Series indexed by n): the
    capped total with no user above the cap."""
    return capped_total(users_by_n, int(users_by_n.index.max())) if len(users_by_n) else 0


def _by_item(records: DataFrame, record_count: int | None) -> DataFrame:
    """``records`` shuffled by item: into partitions of about RECORDS_PER_PARTITION records when
    there are more than one such, else into the session's number of partitions."""
    wanted = -(-record_count // RECORDS_PER_PARTITION) if record_count else 0
    return records.repartition(wanted, "item_id") if wanted > 1 else records.repartition("item_id")


def _checked_bounds(candidates: Sequence[int], tables: Sequence[tuple[str, ...]]) -> list[int]:
    bounds = [int(b) for b in candidates]
    if not bounds or any(b < 1 for b in bounds) or bounds != sorted(set(bounds)):
        raise ValueError(f"the candidates must be strictly increasing integers >= 1, got {bounds}")
    if not tables or any(not table or table[0] != "item_id" for table in tables):
        raise ValueError(f"each table's cells must start with item_id, got {list(tables)}")
    return bounds


@dataclass(frozen=True)
class ItemRanking:
    """A public score per domain item (``scores[i]`` for the i-th item of ``items``): the bound
    keeps each user's records of highest score first, ties at random (HPA's noisy popularity,
    max(ñ, 0), a DP output)."""

    items: ItemDomain
    scores: np.ndarray


def _ranks(known: DataFrame, ranking: ItemRanking, by_cells: bool = False) -> DataFrame:
    """Per (user, item): _k, the user's records of the item, _t, those of items scored at least as
    high as it, and _g, those scored the same (bias_term's ``through`` and ``tied``), from the
    user's records alone and the public scores: the records counted per (user, item), then a
    window per user. ``by_cells``: _t and _g count the user's items rather than records (a bound
    on a user's items, as the aggregate's groups per user)."""
    pairs = known.groupBy("user_id", "item_id").agg(F.count(F.lit(1)).alias("_k"))
    scored = with_item_values(pairs, ranking.items, ranking.scores, "_score")
    # Ordered by score, highest first, a range frame ends at the current score's last peer.
    through = (Window.partitionBy("user_id").orderBy(F.desc("_score"))
               .rangeBetween(Window.unboundedPreceding, Window.currentRow))
    tied = Window.partitionBy("user_id", "_score")
    weight = F.lit(1).cast("long") if by_cells else F.col("_k")
    return scored.select("user_id", "item_id", "_k", F.sum(weight).over(through).alias("_t"),
                         F.sum(weight).over(tied).alias("_g"))


def _per_cell_user(records: DataFrame, tables: Sequence[tuple[str, ...]], user_counts: DataFrame | None,
                   users: int | None, record_count: int | None, ranking: ItemRanking | None = None,
                   by_cells: bool = False) -> list[DataFrame]:
    """Per table, one row per (cell, user) with _k (the user's records in the cell) and _n (in the
    domain), and with a ``ranking`` _t and _g (:func:`_ranks`); without one, from one shuffle of
    the records by item.

    A hash partitioning on the item clusters both (cell, user) and the cell, so the per-(cell,
    user) counts and the per-cell sums need no further shuffle; each user's n, small (a row per
    user), is sent whole to every task rather than joined by a shuffle. Shuffled by user instead,
    every task held a partial sum of nearly every cell, a second shuffle as large as the records
    (185 MB for the edges at 10M rows): the norms took 13.1–18.4 s against 9.7–11.8 s by item.
    Persisting the shuffled records for the second table cost more than shuffling again
    (docs/lab/performance.md, "Choosing l privately"). A ranking needs each user's records
    together (a window per user over the (user, item) counts): the item table's rows are those,
    and the other tables' are joined to them by (user, item)."""
    columns = list(dict.fromkeys(column for table in tables for column in table))
    known = records.where(F.col("user_id").isNotNull()).select("user_id", *columns)
    if user_counts is None:
        user_counts = known.groupBy("user_id").agg(F.count(F.lit(1)).alias("_n"))
    per_user = user_counts.select("user_id", "_n")
    if users is not None and users <= BROADCAST_USERS:
        per_user = F.broadcast(per_user)
    if ranking is None:
        by_item = _by_item(known, record_count)
        return [by_item.groupBy(*table, "user_id").agg(F.count(F.lit(1)).alias("_k")).join(per_user, "user_id")
                for table in tables]
    # The item table's (item, user) rows are the ranks' own: no shuffle of the records by item.
    ranks = _ranks(known, ranking, by_cells).join(per_user, "user_id")
    cells: dict[tuple[str, ...], DataFrame] = {ITEMS: ranks}
    if any(tuple(table) != ITEMS for table in tables):
        by_item = _by_item(known, record_count)
        place = ranks.select("user_id", "item_id", "_t", "_g", "_n")
        cells.update({tuple(table): by_item.groupBy(*table, "user_id").agg(F.count(F.lit(1)).alias("_k"))
                      .join(place, ["user_id", "item_id"]) for table in tables if tuple(table) != ITEMS})
    return [cells[tuple(table)] for table in tables]


ITEMS = ("item_id",)  # the item counts' cells
EDGES = ("item_id", "attr")  # the edge counts' cells: item × attribute value


def squared_bias_norms(records: DataFrame, candidates: Sequence[int], cap: int, grid: int,
                       tables: Sequence[tuple[str, ...]] = (ITEMS,), largest_n: int | None = None,
                       user_counts: DataFrame | None = None, users: int | None = None, user_cap: int | None = None,
                       record_count: int | None = None, ranking: ItemRanking | None = None) -> list[list[int]]:
    """Each table's squared bias norm at each candidate, in units of 1/``grid`` record squared: a
    list per table of ``tables``, each named by its cells' columns (ITEMS, EDGES; every table's
    cells start with the item).

    ``records``: the validated in-domain records (user_id and the tables' columns);
    ``largest_n``: the most records a user has in the domain, when known, for long arithmetic
    (the same integers either way); ``user_counts``: [user_id, _n], each user's records in the
    domain, when validation has them cached (else counted here); ``users``: how many, when known,
    to send them whole to every task (BROADCAST_USERS at most) rather than join by a shuffle;
    ``user_cap``: the quality's U (default b_K − b_1); ``record_count``: how many records there are,
    when known, to shuffle them into partitions of RECORDS_PER_PARTITION (else the session's
    number); ``ranking``: the public item scores when the bound keeps each user's records of
    highest score first (HPA), else SRA's uniform sample is scored."""
    bounds = _checked_bounds(candidates, tables)
    user_cap = checked_user_cap(bounds, user_cap)
    kind = _arithmetic(largest_n, user_cap, cap, grid)
    per_cell = _per_cell_user(records, tables, user_counts, users, record_count, ranking)
    return [_squared_norms(counted, list(table), bounds, user_cap, cap, grid, kind, ranking is not None)
            for counted, table in zip(per_cell, tables)]


def _kept_term(bound: int, cap: int, grid: int, ranked: bool) -> Column:
    """mean_bound_quality.kept_counts' term over _k and _n, and with ``ranked`` _t and _g:
    ⌊grid·min(k, c)·m/g⌋ with m = min(g, (b − (t − g))⁺) of the g tied records kept, which is
    ⌊grid·min(k, c)·min(n, b)/n⌋ unranked (t = g = n)."""
    if not ranked:
        return F.expr(f"cast({grid} * least(_k, {cap}) * least(_n, {bound}) div _n as bigint)")
    return F.expr(f"cast({grid} * least(_k, {cap}) * least(_g, greatest({bound} - (_t - _g), 0)) div _g as bigint)")


def expected_kept(records: DataFrame, candidates: Sequence[int], cap: int, grid: int,
                  tables: Sequence[tuple[str, ...]] = (ITEMS,), user_counts: DataFrame | None = None,
                  users: int | None = None, record_count: int | None = None,
                  ranking: ItemRanking | None = None, by_cells: bool = False) -> list[np.ndarray]:
    """Each table's kept counts for the means' quality (release.mean_bound_quality): per cell with
    a record, a column per candidate b of Σ_u ⌊grid·min(k, c)·min(n, b)/n⌋ (longs: each term is at
    most grid·c, exact whatever the order of the sums), the cells in no particular order; with a
    ``ranking`` (HPA), what keeping each user's records of highest score first keeps instead
    (:func:`_kept_term`). The arguments and the shuffles as for :func:`squared_bias_norms`.
    ``by_cells``: b bounds a user's items rather than records (the aggregate's groups per user,
    each group an item): ``user_counts``' _n, which must be given, counts each user's items, and a
    ranking ranks them by item (item table only). NOT private: read only by the mechanism."""
    bounds = _checked_bounds(candidates, tables)
    if by_cells and (user_counts is None or any(tuple(table) != ITEMS for table in tables)):
        raise ValueError("kept counts by cells need each user's cells counted and the item table alone")
    kept = []
    for counted, table in zip(_per_cell_user(records, tables, user_counts, users, record_count, ranking, by_cells),
                              tables):
        sums = counted.groupBy(*table).agg(*[F.sum(_kept_term(b, cap, grid, ranking is not None)).alias(f"_b{i}")
                                             for i, b in enumerate(bounds)])
        # Through Arrow: a million cells took 2.4-2.9 s and 128 MB as a frame, 21-27 s and about
        # a gigabyte as Rows of Python ints (16 candidates, local[2]).
        frame = sums.select(*[f"_b{i}" for i in range(len(bounds))]).toPandas()
        kept.append(np.asarray(frame, dtype=np.int64).reshape(-1, len(bounds)))
    return kept


def anchor_squared_norms(records: DataFrame, first: int, user_cap: int, reaches: Sequence[int], grid: int,
                         tables: Sequence[tuple[str, ...]] = (ITEMS,), user_counts: DataFrame | None = None,
                         users: int | None = None, record_count: int | None = None,
                         largest_n: int | None = None, ranking: ItemRanking | None = None) -> list[int]:
    """Each table's ‖A_t‖², the estimate's anchor squared (release.bound_estimate, in units of
    1/``grid`` record squared), from terms that keep a user's repeated records of a cell: per
    (user, cell) r = ⌊grid·k·(n − b_1)⁺·U / (n·max(n − b_1, U))⌋ (the quality's term at b_1 with
    every record counted, not min(k, c)), and where a user's Q = Σ_cells r² exceeds reach_t·grid²
    their terms are scaled down by √(reach_t·grid²/Q), each floored (``reaches``: per table, the
    squared norm in records that one user may move it by). Summed per cell, squared, summed.
    ``largest_n``: the most records a user has, when known, for long arithmetic where it fits
    (k ≤ n: the term's numbers are those of the quality's with c = n); a user's squares sum to at
    most (grid·U)², their terms being each at most grid·U and summing to at most that.
    ``ranking``: the public item scores when the bound keeps each user's records of highest score
    first (HPA): the terms are then the ranked ones, ⌊grid·k·min(g, (t − b_1)⁺)·U / (g·max(n − b_1,
    U))⌋, which also sum to at most grid·U per user (a user drops (n − b_1)⁺ records in all).
    The driver-side twin is bound_estimate.anchor_squared_norms (tests hold them equal)."""
    if len(reaches) != len(tables):
        raise ValueError("one reach per table")
    _checked_bounds([first], tables)
    # The quality's term with a cap no cell reaches (k ≤ n ≤ the largest n): every record counted.
    cap = largest_n if largest_n is not None else _NO_CAP
    kind = _arithmetic(largest_n, user_cap, cap, grid)
    squares_kind = "bigint" if (grid * max(user_cap, 1)) ** 2 < 2**62 else _WIDE
    per_cell = _per_cell_user(records, tables, user_counts, users, record_count, ranking)
    term = _term(first, first, user_cap, cap, grid, kind, ranking is not None)
    return [_anchor_norm(counted, list(table), term, user_cap, reach, grid, users, squares_kind)
            for counted, table, reach in zip(per_cell, tables, reaches)]


def _anchor_norm(per_cell: DataFrame, cells: list[str], term: Column, user_cap: int, reach: int, grid: int,
                 users: int | None, squares_kind: str) -> int:
    if user_cap == 0:
        return 0
    raw = per_cell.select(*cells, "user_id", term.alias("_r"))
    squares = raw.groupBy("user_id").agg(
        F.sum(F.col("_r").cast(squares_kind) * F.col("_r").cast(squares_kind)).alias("_q"))
    if users is not None and users <= BROADCAST_USERS:
        squares = F.broadcast(squares)
    limit = reach * grid * grid
    scaled = F.when(F.col("_q") <= F.lit(limit), F.col("_r")).otherwise(F.floor(
        F.col("_r").cast("double") * F.sqrt(F.lit(float(limit)) / F.col("_q").cast("double")) * F.lit(SHRINK))
        .cast("bigint"))
    sums = raw.join(squares, "user_id").groupBy(*cells).agg(F.sum(scaled).alias("_a"))
    row = sums.agg(F.sum(F.col("_a").cast(_WIDE) * F.col("_a").cast(_WIDE)).alias("_s")).collect()[0]
    return int(row["_s"] or 0)
