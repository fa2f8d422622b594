"""GS, grouping and smoothing (Kellaris & Papadopoulos 2013 as used by papers
000 and 001; specification §3.5, group-size rule [RECON]).

DP claim, ε = εa + εb (half each):
* the ordering pass: every user adds exactly one unit to ``sampled`` (one of
  its records, chosen at random, done by the caller on the bounded data), so
  that vector has L1 sensitivity 1; discrete Laplace of scale 1/εa is εa-DP;
* ordering the cells by the noisy sample, choosing the group size and forming
  groups are post-processing of it;
* the groups are disjoint, so the vector of group sums of the real counts has
  L1 sensitivity Δ; discrete Laplace of scale Δ/εb on each sum is εb-DP.
Each cell gets its group's noisy sum divided by the group size.

Claim: docs/publishers.md, "Privacy claim: grouping".
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource, as_scale
from dp_spark.publishers.interface import Published, check_request


def candidate_sizes(cells: int, sensitivity: int) -> list[int]:
    """Group sizes tried: 1, 2, 4, ... up to the cell count, and Δ (§3.5 [ASSUME])."""
    sizes = {1 << j for j in range(cells.bit_length()) if 1 << j <= cells}
    if sensitivity <= cells:
        sizes.add(sensitivity)
    return sorted(sizes)


def estimated_error(ordered: np.ndarray, width: int, epsilon_b: float) -> float:
    """Spread of the noisy sample around its group means plus the number of
    groups over εb: the §3.5 [RECON] error estimate for consecutive groups of ``width``."""
    starts = np.arange(0, ordered.size, width)
    sums = np.add.reduceat(ordered, starts)
    sizes = np.diff(np.append(starts, ordered.size))
    means = np.repeat(sums / sizes, sizes)
    return float(np.abs(ordered - means).sum() + starts.size / epsilon_b)


def random_order_by(values: np.ndarray, rng: RandomSource) -> np.ndarray:
    """Indices sorting ``values`` descending, ties in uniformly random order."""
    tie_break = rng.words(values.size)
    return np.lexsort((tie_break, -values))


def publish(counts: np.ndarray, sensitivity: int, epsilon: Fraction, budget: Budget, rng: RandomSource,
            step: str, *, sampled: np.ndarray) -> Published:
    """``counts`` (any shape, cells in public order) smoothed over groups of cells
    with similar noisy sampled counts; floats, same shape.

    ``sampled`` has the counts' shape and holds one unit per user: one record
    drawn at random from each user's bounded records.
    """
    counts = check_request(counts, sensitivity, epsilon, budget, step)
    sampled = np.asarray(sampled)
    if sampled.shape != counts.shape or not np.issubdtype(sampled.dtype, np.integer):
        raise ValueError("sampled must be integer counts of the same shape as counts")
    epsilon_a = epsilon_b = Fraction(epsilon) / 2
    flat = counts.reshape(-1)
    ordering = LedgerEntry(step=f"{step} (ordering sample)", mechanism="discrete Laplace on one record per user",
                           epsilon=epsilon_a, sensitivity=Fraction(1), noise_scale=as_scale(1 / epsilon_a),
                           cells=flat.size)
    noisy_sample = sampled.reshape(-1) + budget.discrete_laplace(ordering, rng)
    order = random_order_by(noisy_sample, rng)
    ordered = noisy_sample[order].astype(float)
    width = min(candidate_sizes(flat.size, sensitivity),
                key=lambda w: estimated_error(ordered, w, float(epsilon_b)))

    starts = np.arange(0, flat.size, width)
    sizes = np.diff(np.append(starts, flat.size))
    sums = LedgerEntry(step=f"{step} (group sums, width {width})", mechanism="discrete Laplace on group sums",
                       epsilon=epsilon_b, sensitivity=Fraction(sensitivity),
                       noise_scale=as_scale(Fraction(sensitivity) / epsilon_b), cells=int(starts.size))
    group_sums = np.add.reduceat(flat[order], starts) + budget.discrete_laplace(sums, rng)
    values = np.empty(flat.size, dtype=float)
    values[order] = np.repeat(group_sums / sizes, sizes)
    return Published(values.reshape(counts.shape), (ordering, sums))
