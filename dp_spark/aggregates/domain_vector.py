"""Placing aggregated values on a public domain, zero-filled.

Spark returns a group only where some record fell. A release needs a cell for every element of
the public domain, reached or not, so that which cells exist says nothing about the data
(ALGORITHMS.md §1.2). Every aggregate that leaves Spark goes through :func:`on_domain`.
"""

from __future__ import annotations

import numpy as np

OUTSIDE = "records outside the public domain reached aggregation"


def on_domain(positions, values, shape, dtype=np.int64) -> np.ndarray:
    """An array of ``shape`` that is zero except at ``positions``, where ``values`` add up.

    ``shape`` is the domain's size, or a tuple of sizes for a grid of domains (items ×
    attributes); ``positions`` is one index array, or a tuple of index arrays for a grid. An
    index outside the domain (negative, as ``ItemDomain.index_of`` gives for an unknown id, or
    past the end) means that records skipped validation, and raises ValueError.
    """
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    index = positions if isinstance(positions, tuple) else (positions,)
    if len(index) != len(shape):
        raise ValueError(f"{len(index)} index arrays for a domain of {len(shape)} dimensions")
    index = tuple(np.asarray(p, dtype=np.int64) for p in index)
    if any(((p < 0) | (p >= size)).any() for p, size in zip(index, shape)):
        raise ValueError(OUTSIDE)
    out = np.zeros(shape, dtype=dtype)
    np.add.at(out, index, np.asarray(values, dtype=dtype))
    return out
