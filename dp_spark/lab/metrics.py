"""Error metrics of a release against the true counts (specification §2, M1–M7).

Pure numpy over plain arrays. The true counts are computed from the raw data
without noise: anything built from these numbers is NOT private and is for
evaluation only. ``true`` and ``released`` are arrays over the same public
domain, in the same order.
"""

from __future__ import annotations

import numpy as np

KL_FLOOR = 0.01  # zero handling of papers 000/002/004 (§2 M2)


def _pair(true, released) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(true, dtype=float)
    r = np.asarray(released, dtype=float)
    if t.shape != r.shape:
        raise ValueError(f"true and released have different shapes: {t.shape} and {r.shape}")
    if t.size == 0:
        raise ValueError("metrics need at least one cell")
    return t, r


def mse(true, released) -> float:
    """M1: mean squared error over every cell of the domain."""
    t, r = _pair(true, released)
    return float(np.mean((r - t) ** 2))


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    p = p / p.sum()
    q = q / q.sum()
    inside = p > 0  # 0 ln 0 = 0
    return float(np.sum(p[inside] * np.log(p[inside] / q[inside])))


def kl_000(true, released) -> float:
    """M2, paper 000: values ≤ 0 in both vectors become 0.01, each is normalised, KL(true ‖ released)."""
    t, r = _pair(true, released)
    return _kl(np.where(t <= 0, KL_FLOOR, t).ravel(), np.where(r <= 0, KL_FLOOR, r).ravel())


def kl_002(true, released) -> float:
    """M2, paper 002: bin proportions of the truth (0 ln 0 = 0) against the released
    histogram floored at 0.01 before normalising."""
    t, r = _pair(true, released)
    return _kl(t.ravel(), np.maximum(r, KL_FLOOR).ravel())


def kl_004(true, released) -> float:
    """M2, paper 004: KL(published ‖ actual), both floored at 0.01 and normalised."""
    t, r = _pair(true, released)
    return _kl(np.maximum(r, KL_FLOOR).ravel(), np.maximum(t, KL_FLOOR).ravel())


def top_k(values, k: int) -> np.ndarray:
    """Indices of the k largest values, ties broken by index (the public id order)."""
    v = np.asarray(values, dtype=float)
    return np.lexsort((np.arange(v.size), -v))[:k]


def top_k_precision(true, released, k: int) -> float:
    """M3: |top-k(released) ∩ top-k(true)| / k."""
    t, r = _pair(true, released)
    k = min(k, t.size)
    return len(set(top_k(t, k).tolist()) & set(top_k(r, k).tolist())) / k


def edge_top_k_precision(true, released, k: int) -> float:
    """M3 for edges (paper 000): top-k items per attribute value (columns), averaged."""
    t, r = _pair(true, released)
    if t.ndim != 2:
        raise ValueError("edge counts must be a 2-D [item, attribute] array")
    return float(np.mean([top_k_precision(t[:, a], r[:, a], k) for a in range(t.shape[1])]))


def mae(true, released) -> float:
    """M4: mean absolute error."""
    t, r = _pair(true, released)
    return float(np.mean(np.abs(r - t)))


def mre(true, released, sanity: float = 1.0) -> float:
    """M4: mean of |error| / max(true, sanity), sanity bound s = 1 by default."""
    t, r = _pair(true, released)
    return float(np.mean(np.abs(r - t) / np.maximum(t, sanity)))


def ndcg(true, released, k: int) -> float:
    """M5: DCG of the released top k over the ideal DCG, graded relevance
    rel(j) = k + 1 − true rank of j (0 outside the true top k)."""
    t, r = _pair(true, released)
    k = min(k, t.size)
    relevance = np.zeros(t.size)
    relevance[top_k(t, k)] = np.arange(k, 0, -1)
    discount = 1 / np.log2(np.arange(2, k + 2))
    ideal = float(np.sum(np.arange(k, 0, -1) * discount))
    return float(np.sum(relevance[top_k(r, k)] * discount)) / ideal


def top_k_mae(true, released, k: int) -> float:
    """M6: MAE over the k cells with the largest true values."""
    t, r = _pair(true, released)
    cells = top_k(t, k)
    return mae(t[cells], r[cells])


def top_k_mre(true, released, k: int, sanity: float = 1.0) -> float:
    """M6: MRE over the k cells with the largest true values."""
    t, r = _pair(true, released)
    cells = top_k(t, k)
    return mre(t[cells], r[cells], sanity)


def range_queries(cells: int, count: int = 1000, seed: int = 0) -> np.ndarray:
    """``count`` intervals [i, j] of bin positions, 0 ≤ i ≤ j < cells: two uniform
    endpoints, sorted (§2 M7 [ASSUME]; fixed seed so every method sees the same workload)."""
    ends = np.sort(np.random.default_rng(seed).integers(0, cells, size=(count, 2)), axis=1)
    return ends


def range_query_mse(true, released, queries: np.ndarray | None = None) -> float:
    """M7: mean squared error of interval sums in bin order."""
    t, r = _pair(true, released)
    t, r = t.ravel(), r.ravel()
    queries = range_queries(t.size) if queries is None else queries
    prefix_t = np.concatenate(([0.0], np.cumsum(t)))
    prefix_r = np.concatenate(([0.0], np.cumsum(r)))
    lo, hi = queries[:, 0], queries[:, 1] + 1
    return float(np.mean(((prefix_r[hi] - prefix_r[lo]) - (prefix_t[hi] - prefix_t[lo])) ** 2))


def summary(series) -> dict:
    """One metric over the runs: mean and standard deviation, and the median, 90th and 99th
    percentiles (a heavy tail, say a rare bad choice of the bound, shows there and not in mean ±
    std). Runs whose metric is NaN (a release with nothing to measure) or infinite are kept and
    counted as ``nan_runs``; the figures are over the others, None when there are none."""
    values = np.asarray(series, dtype=float)
    finite = values[np.isfinite(values)]
    figures = {"mean": None, "std": None, "median": None, "p90": None, "p99": None}
    if finite.size:
        p50, p90, p99 = (float(v) for v in np.percentile(finite, [50, 90, 99]))
        figures = {"mean": float(finite.mean()), "std": float(finite.std()), "median": p50, "p90": p90, "p99": p99}
    return {**figures, "runs": int(values.size), "nan_runs": int(values.size - finite.size)}


def summaries(method: str, dataset: str, values: dict) -> list[dict]:
    return [{"method": method, "dataset": dataset, "query": query, "metric": metric, **summary(series)}
            for (query, metric), series in values.items()]
