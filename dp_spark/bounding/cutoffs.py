"""The order and the pre-filter of the top-l selection (HPA): public scores -> Spark columns.

Everything here is computed from public values (the noisy popularity, the user's own row
count), so it changes which rows reach the per-user aggregation, never which rows it keeps
(docs/sra_hpa.md, "Sampling: exact, repeatable, and no sort of all rows").
"""

from __future__ import annotations

import math

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as F


def score_thresholds(scores, l: int) -> list[int]:
    """Strictly decreasing score values at ranks l, 2l, 4l, ... of ``scores``."""
    ranked = sorted((int(s) for s in scores), reverse=True)
    thresholds: list[int] = []
    rank = l
    while rank <= len(ranked):
        value = ranked[rank - 1]
        if not thresholds or value < thresholds[-1]:
            thresholds.append(value)
        rank *= 2
    return thresholds


def score_cutoffs(item_scores, l: int, oversample: float = 6.0) -> list[tuple[int, int]]:
    """Pairs (min_rows, min_score), both strictly decreasing, from public scores.

    Levels are the scores at ranks l, 2l, 4l, ... For each level, min_rows is
    the least row count n at which a user whose rows were n independent draws
    from the items in proportion to their score would expect
    l + oversample·(√l + 2) rows scoring at or above it (distinct items:
    Σ_i 1 − (1 − p_i)^n over those items). Levels no user could fill are left
    out. :func:`dp_spark.bounding.user_records.top_selection` keeps, of a user
    with n rows, only the rows at or above the first level with n ≥ min_rows; a
    user whose real rows fall short of that is redone from all of them, so the
    cutoffs change the cost, never the result.
    """
    scores = np.maximum(np.asarray(item_scores, dtype=float), 0)
    if not scores.size:
        return []
    weights = scores / scores.sum() if scores.sum() > 0 else np.full(scores.size, 1 / scores.size)
    need = l + oversample * (math.sqrt(l) + 2)
    cutoffs: list[tuple[int, int]] = []
    for level in score_thresholds(scores, l):
        min_rows = _least_rows_expecting(weights[scores >= level], need)
        if min_rows is not None and (not cutoffs or min_rows < cutoffs[-1][0]):
            cutoffs.append((min_rows, level))
    return cutoffs


def _least_rows_expecting(weights: np.ndarray, need: float, most: int = 1 << 40) -> int | None:
    """Least n with Σ 1 − (1 − w)^n ≥ need (distinct items hit by n weighted
    draws), by bisection; None if even ``most`` draws fall short."""
    miss = np.log1p(-np.minimum(weights, 1 - 1e-15))

    def expected(n: int) -> float:
        return float(np.sum(-np.expm1(n * miss)))

    if expected(most) < need:
        return None
    low, high = 1, most
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if expected(mid) >= need else (mid + 1, high)
    return low


def best_first(score: Column, position: Column) -> Column:
    """An order in which a higher score comes first and equal scores go by smaller position: the
    struct (−score, position). Two of a user's rows tie only when their 64-bit positions are
    equal. (A score of few bits once shared one long with the position's top bits,
    which Spark compares faster; two rows then tied whenever those bits agreed, and which one
    Spark kept depended on the order the rows arrived in, which other users' rows can change.)"""
    return F.struct((-score).alias("_score"), position.alias("_position"))


def long_array(values) -> Column:
    """An array<bigint> literal, sent to Spark as one comma-separated string that the optimizer
    folds into the array once (``F.lit`` of a list makes a call to the JVM per element: 25 ms
    against 14 ms for HPA's two cutoff arrays). A constant array, unlike a ``CASE``, reaches the
    generated code by reference, so the code compiled for one run's values serves the next."""
    values = [int(v) for v in values]
    if not values:
        return F.array().cast("array<bigint>")
    return F.split(F.lit(",".join(map(str, values))), ",").cast("array<bigint>")


def min_score(n: Column, l: int, cutoffs: list[tuple[int, int]]) -> Column:
    """The score of the first cutoff a user with ``n`` rows reaches; null (keep every row) when
    n ≤ l or when it reaches none.

    The cutoffs go in as array literals, which Spark's generated code reads by reference: written
    out as a ``CASE``, each run's cutoffs compiled a new class, warmed up by the JIT anew (HPA at
    10M rows in one session: 7.07 → 6.54 s; docs/lab/performance.md, sixth round). A lower score
    needs fewer rows, so the first cutoff reached is the one with the largest minimum at or below
    n, found as n's place among the sorted minimums; doubled, they never tie with 2n + 1."""
    rising = list(reversed(cutoffs))
    doubled_min_rows = long_array([2 * int(min_rows) for min_rows, _ in rising])
    scores = long_array([int(score) for _, score in rising])
    probe = 2 * n.cast("long") + 1
    reached = F.array_position(F.sort_array(F.concat(doubled_min_rows, F.array(probe))), probe) - 1
    return F.when((n <= l) | (reached == 0), None).otherwise(F.element_at(scores, reached.cast("int")))
