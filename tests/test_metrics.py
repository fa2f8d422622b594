"""Metric formulas (specification §2) against values worked out by hand."""

import math

import numpy as np
import pytest

from dp_spark.lab import metrics


def test_mse_mae_mre():
    true, released = [10, 0, 4], [12, -1, 4]
    assert metrics.mse(true, released) == pytest.approx((4 + 1 + 0) / 3)
    assert metrics.mae(true, released) == pytest.approx((2 + 1 + 0) / 3)
    # MRE divides by max(true, 1): 2/10, 1/1, 0/4.
    assert metrics.mre(true, released) == pytest.approx((0.2 + 1 + 0) / 3)
    assert metrics.mre(true, released, sanity=5) == pytest.approx((0.2 + 0.2 + 0) / 3)


def test_kl_zero_handling_of_each_paper():
    true, released = [3, 1, 0], [2, 2, -5]
    # 000: both floored at 0.01 where <= 0, then KL(true || released).
    p = np.array([3, 1, 0.01]) / 4.01
    q = np.array([2, 2, 0.01]) / 4.01
    assert metrics.kl_000(true, released) == pytest.approx(float(np.sum(p * np.log(p / q))))
    # 002: 0 ln 0 = 0 for the truth; released floored at 0.01.
    p2 = np.array([0.75, 0.25])
    q2 = np.array([2, 2, 0.01]) / 4.01
    assert metrics.kl_002(true, released) == pytest.approx(float(np.sum(p2 * np.log(p2 / q2[:2]))))
    # 004: KL(published || actual), both floored.
    assert metrics.kl_004(true, released) == pytest.approx(float(np.sum(q * np.log(q / p))))
    assert metrics.kl_000([1, 2], [1, 2]) == 0


def test_top_k_precision_breaks_ties_by_id():
    true = [5, 9, 9, 1, 7]
    assert metrics.top_k(true, 3).tolist() == [1, 2, 4]
    assert metrics.top_k_precision(true, [0, 9, 0, 0, 7], 2) == 0.5  # {1, 4} against {1, 2}
    edges_true = np.array([[1, 5], [3, 0], [2, 9]])
    edges_released = np.array([[1, 5], [3, 1], [0, 9]])
    # attribute 0: top-1 {1} vs {1}; attribute 1: top-1 {2} vs {2}; top-2: {1,2}v{1,0} and {2,0}v{2,0}.
    assert metrics.edge_top_k_precision(edges_true, edges_released, 1) == 1.0
    assert metrics.edge_top_k_precision(edges_true, edges_released, 2) == pytest.approx((0.5 + 1.0) / 2)


def test_ndcg_hand_worked():
    true = [10, 8, 6, 1]  # true ranks: 0, 1, 2 -> relevance 3, 2, 1 for k = 3
    released = [6, 9, 8, 0]  # released order: 1, 2, 0
    dcg = 2 / math.log2(2) + 1 / math.log2(3) + 3 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert metrics.ndcg(true, released, 3) == pytest.approx(dcg / ideal)
    assert metrics.ndcg(true, true, 3) == pytest.approx(1.0)


def test_top_k_errors_use_the_true_top_cells():
    true, released = [100, 1, 50, 2], [90, 30, 55, 2]
    assert metrics.top_k_mae(true, released, 2) == pytest.approx((10 + 5) / 2)
    assert metrics.top_k_mre(true, released, 2) == pytest.approx((0.1 + 0.1) / 2)


def test_range_query_mse_hand_worked():
    true, released = [1, 2, 3, 4], [1, 3, 3, 2]
    queries = np.array([[0, 0], [1, 2], [0, 3]])
    # sums: [1] 1 vs 1; [2,3] 5 vs 6; all 10 vs 9.
    assert metrics.range_query_mse(true, released, queries) == pytest.approx((0 + 1 + 1) / 3)
    workload = metrics.range_queries(50, 1000, seed=3)
    assert workload.shape == (1000, 2) and (workload[:, 0] <= workload[:, 1]).all() and workload.max() < 50
    np.testing.assert_array_equal(workload, metrics.range_queries(50, 1000, seed=3))


def test_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="different shapes"):
        metrics.mse([1, 2], [1, 2, 3])
