"""Make noisy item and edge counts agree: post-processing, no extra budget.

Every record adds one to its item and one to one of that item's edges, so the
true counts satisfy item_i = Σ_a edge_ia. The noisy ones do not. This module
returns, per item, the non-negative edges x_ia that minimise

    Σ_a (x_ia − ê_ia)² / var_edge  +  (Σ_a x_ia − î_i)² / var_item

and the items Σ_a x_ia: the weighted least-squares estimate under the
constraints, each noisy count weighted by the inverse of its noise variance.
Being a function of the released counts only, it is post-processing and keeps
the release's guarantee (specification §1.5).

Claim: docs/publishers.md, "Privacy claim: consistency".
"""

from __future__ import annotations

import numpy as np


def consistent_counts(items: np.ndarray, edges: np.ndarray, var_item: float, var_edge: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(items, edges), consistent and non-negative; ``edges`` is [item, attribute].

    Without the sign constraint the solution is closed-form: each free edge
    moves by r·var_edge / (k·var_edge + var_item), r the item's residual
    î − Σ ê over its k free edges. Edges that come out negative are fixed at 0
    and the rest re-solved; this active-set loop ends after at most h rounds
    and gives the constrained optimum (the objective is a sum of squares
    whose constraints only bound single coordinates).
    """
    items = np.asarray(items, dtype=float)
    edges = np.asarray(edges, dtype=float)
    if edges.ndim != 2 or edges.shape[0] != items.shape[0]:
        raise ValueError("edges must be [item, attribute] with one row per item")
    if var_item <= 0 or var_edge <= 0:
        raise ValueError("noise variances must be positive")
    free = np.ones(edges.shape, dtype=bool)
    for _ in range(edges.shape[1] + 1):
        k = free.sum(axis=1)
        residual = items - np.where(free, edges, 0).sum(axis=1)
        shift = np.where(k > 0, residual * var_edge / (k * var_edge + var_item), 0.0)
        solved = np.where(free, edges + shift[:, None], 0.0)
        negative = free & (solved < 0)
        if not negative.any():
            break
        free &= ~negative
    return solved.sum(axis=1), solved
