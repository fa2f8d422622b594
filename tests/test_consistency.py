"""Consistent item and edge counts: the constrained weighted least-squares optimum."""

import numpy as np
import pytest

from dp_spark.publishers.consistency import consistent_counts


def objective(x, item, edges, var_item, var_edge):
    return np.sum((x - edges) ** 2) / var_edge + (x.sum() - item) ** 2 / var_item


def test_closed_form_without_the_sign_constraint():
    # One item, two edges: residual 10 - (3 + 4) = 3 spread as 3·ve/(2ve + vi) on each edge.
    items, edges = consistent_counts(np.array([10.0]), np.array([[3.0, 4.0]]), var_item=2.0, var_edge=1.0)
    assert edges[0] == pytest.approx([3 + 0.75, 4 + 0.75])
    assert items[0] == pytest.approx(8.5)


@pytest.mark.parametrize("seed", range(5))
def test_matches_a_brute_force_search_and_is_consistent(seed):
    rng = np.random.default_rng(seed)
    items = rng.normal(5, 8, size=30)
    edges = rng.normal(2, 6, size=(30, 2))
    var_item, var_edge = float(rng.uniform(0.5, 4)), float(rng.uniform(0.5, 4))
    got_items, got_edges = consistent_counts(items, edges, var_item, var_edge)
    assert (got_edges >= 0).all()
    np.testing.assert_allclose(got_items, got_edges.sum(axis=1))
    a, b = np.meshgrid(np.linspace(0, 40, 801), np.linspace(0, 40, 801))  # steps of 0.05
    for i in range(30):
        grid = ((a - edges[i, 0]) ** 2 + (b - edges[i, 1]) ** 2) / var_edge + (a + b - items[i]) ** 2 / var_item
        ours = objective(got_edges[i], items[i], edges[i], var_item, var_edge)
        # Never worse than the best grid point, and within the grid's resolution of it.
        assert ours <= grid.min() + 1e-9
        assert ours >= grid.min() - 0.5


def test_already_consistent_non_negative_counts_are_unchanged():
    edges = np.array([[1.0, 2.0, 3.0], [0.0, 5.0, 1.0]])
    items, fitted = consistent_counts(edges.sum(axis=1), edges, 1.0, 1.0)
    np.testing.assert_allclose(fitted, edges)
    np.testing.assert_allclose(items, [6.0, 6.0])


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="one row per item"):
        consistent_counts(np.zeros(3), np.zeros((2, 2)), 1.0, 1.0)
