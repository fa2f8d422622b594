"""The estimate choice's bias model for a bound that keeps each user's records of highest public
score first (HPA's noisy popularity; docs/bound_selection.md, "The estimate for HPA").

SRA drops a share of every record a user has, so each bound drops records from the cells in the
proportions it does at b_1 (release.bound_estimate). HPA drops a user's records of lowest score,
and its users mostly hold the popular items: the records it drops gather on fewer cells as the
bound grows, so their bias vector's norm falls more slowly than the records it drops. The model
here takes the users' items as nested by score: a user with n records holds the n highest-scored
record slots, c to an item, so that the item of rank j loses, at bound b, the records of its
slots above b from every user who reaches them, and its bias is

    a_j(b) = Σ_{r in j's slots, r > b} H(r),   H(r) = the users with at least r records,

with R(b) = Σ_j a_j(b)². H comes from the noisy histogram of record counts alone (each bin's users
spread evenly over its counts). The anchor calibrates it: the estimate of the weighted squared bias
at b is A²·R(b)/R(b_1), so the model supplies only how the bias falls from b_1 on. On the evaluation
set's 48 HPA cells, with the statistics taken without noise, the pick's error is at most 7.9% above
the best integer bound's at the same split, median 0.3% (docs/bound_selection.md). Where users
spread over a sparse catalogue of rarely shared items (check-ins), HPA's drops spread thinner as
the bound grows and the bias falls faster than either this model or SRA's: the estimate then picks
high, and the exponential mechanism does better there.

Pure functions over plain numbers: post-processing of the choice's DP statistics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def users_at_least(histogram: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """H(r) for r = 1 .. edges[-1] − 1, at index r − 1: the users with at least r records, each
    bin's users (``histogram``, post-processed) spread evenly over its record counts."""
    edges = np.asarray(edges, dtype=np.int64)
    widths = np.diff(edges)
    if edges[0] != 1 or np.any(widths < 1) or len(histogram) != widths.size:
        raise ValueError("the bins must start at 1 and have one count each")
    per_count = np.repeat(np.asarray(histogram, dtype=float) / widths, widths)
    return np.cumsum(per_count[::-1])[::-1]


def ranked_norms(histogram: np.ndarray, edges: np.ndarray, bounds: Sequence[int] | np.ndarray,
                 records_per_cell: int) -> np.ndarray:
    """R(b) for each of ``bounds``: the nested model's squared bias norm (the module), the record
    slots in items of c. The slots run to the histogram's top: above c·C_items (the most a user has
    who keeps to c records per item) the trimmed histogram is empty unless users with repeated
    records are significant there, and then their slots count as items of their own."""
    c = int(records_per_cell)
    if c < 1:
        raise ValueError("the model needs c >= 1")
    at_least = users_at_least(histogram, edges)
    items = -(-at_least.size // c)
    padded = np.zeros(items * c)
    padded[:at_least.size] = at_least
    rank = np.arange(1, padded.size + 1)
    out = []
    for b in bounds:
        dropped = np.where(rank > int(b), padded, 0.0).reshape(items, c).sum(axis=1)
        out.append(float(dropped @ dropped))
    return np.array(out)


def ranked_errors(histogram: np.ndarray, edges: np.ndarray, anchor: float, bounds: Sequence[int] | np.ndarray,
                  records_per_cell: int, noise: Sequence) -> np.ndarray:
    """The predicted error at each of ``bounds`` (b_1 first): A²·R(b)/R(b_1) + N(b), A the noisy
    anchor in records (its negative part read as 0), N(b) the public weighted noise variance. HPA
    keeps a user's records in a fixed order, so it adds no sampling variance beyond its ties at the
    boundary, which the model leaves out."""
    norms = ranked_norms(histogram, edges, bounds, records_per_cell)
    spread = max(float(anchor), 0.0) ** 2 / norms[0] if norms[0] > 0 else 0.0
    return spread * norms + np.array([float(v) for v in noise])
