"""AHP: noisy bins, sorted and clustered, then one noisy sum per cluster
(Zhang et al. 2014 as pinned down in specification §5.1).

DP claim, ε = ε1 + ε2 with ε1 = ρε:
* phase 1 adds discrete Laplace of scale Δ/ε1 to every bin (L1 sensitivity Δ
  after per-user bounding): ε1-DP. Zeroing small values, sorting and the
  greedy clustering only read these noisy values: post-processing;
* phase 2 adds discrete Laplace of scale Δ/ε2 to the true sum of each cluster.
  Clusters are disjoint, so the vector of sums has L1 sensitivity Δ: ε2-DP.
Each bin gets its cluster's noisy sum over the cluster size.

Claim: docs/publishers.md, "Privacy claim: ahp".
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource, as_scale
from dp_spark.publishers.interface import Published, check_request

RHO = Fraction(17, 20)  # 0.85: share of ε for phase 1 (§9.3, from the DPBench code)
ETA = 0.35  # threshold factor


def threshold(noisy: np.ndarray, scale_over_sensitivity: np.ndarray | float, sensitivity: int, eta: float,
              cells: int) -> np.ndarray:
    """Phase-1 values at or below η·Δ·ln(n)/ε_i set to zero (ε_i: the bin's phase-1 budget)."""
    limit = eta * sensitivity * math.log(cells) * np.asarray(scale_over_sensitivity, dtype=float)
    return np.where(noisy <= limit, 0.0, noisy)


def clusters(z: np.ndarray, noise_term: float) -> list[tuple[int, int]]:
    """Greedy clustering of the ascending values ``z`` into blocks [a, b) (0-based, end exclusive).

    ``noise_term`` is 2Δ²/ε2², the variance of one phase-2 noise draw. A block's
    error is its squared spread plus noise_term over its size; a block is closed
    when extending it costs more than starting anew with the best look-ahead
    block (§5.1, with the reference code's early stop).
    """
    n = z.size
    total = np.concatenate(([0.0], np.cumsum(z)))
    squares = np.concatenate(([0.0], np.cumsum(z * z)))
    run_ends = np.searchsorted(z, z, side="right") - 1  # z is sorted: last index equal to z[j]

    def err(a: int, b: int) -> float:  # block z[a..b], inclusive, 0-based
        size = b - a + 1
        s = total[b + 1] - total[a]
        return squares[b + 1] - squares[a] - s * s / size + noise_term / size

    def look(j: int) -> float:
        def first(end: int) -> float:
            return (z[j] - (total[end + 1] - total[j]) / (end - j + 1)) ** 2

        def second(end: int) -> float:
            return noise_term / (end - j + 1) ** 2

        # Over the run of values equal to z[j] the first term is 0 and the second
        # falls, so the scan never stops inside it: jump to its end (exactly the
        # same result, without a quadratic scan over long runs of zeros).
        run_end = run_ends[j]
        best = second(run_end)
        floor = noise_term / (n - j + 1) ** 2  # the second term's value one past the end
        for end in range(run_end + 1, n):
            if first(end) - first(end - 1) >= second(end - 1) - floor:
                break
            best = min(best, first(end) + second(end))
        return best

    blocks = []
    start, current = 0, err(0, 0)
    for j in range(1, n):
        extended = err(start, j)
        if extended >= current + look(j):
            blocks.append((start, j))
            start, current = j, err(j, j)
        else:
            current = extended
    blocks.append((start, n))
    return blocks


def smooth(counts: np.ndarray, phase1: np.ndarray, sensitivity: int, epsilon2: Fraction, budget: Budget,
           rng: RandomSource, step: str) -> Published:
    """Phase 2 given the thresholded phase-1 values: sort, cluster, one noisy sum per cluster."""
    order = np.argsort(phase1, kind="stable")
    noise_term = 2 * sensitivity**2 / float(epsilon2) ** 2
    blocks = clusters(phase1[order], noise_term)
    starts = np.array([a for a, _ in blocks])
    sizes = np.array([b - a for a, b in blocks])
    entry = LedgerEntry(step=f"{step} (cluster sums, {starts.size} clusters)",
                        mechanism="discrete Laplace on cluster sums", epsilon=epsilon2,
                        sensitivity=Fraction(sensitivity), noise_scale=as_scale(Fraction(sensitivity) / epsilon2),
                        cells=int(starts.size))
    sums = np.add.reduceat(counts[order], starts) + budget.discrete_laplace(entry, rng)
    values = np.empty(counts.size, dtype=float)
    values[order] = np.repeat(sums / sizes, sizes)
    return Published(values, (entry,))


def publish(counts: np.ndarray, sensitivity: int, epsilon: Fraction, budget: Budget, rng: RandomSource,
            step: str, *, rho: Fraction = RHO, eta: float = ETA) -> Published:
    """AHP over the counts (any shape; bins in public order); floats, same shape."""
    counts = check_request(counts, sensitivity, epsilon, budget, step)
    if not 0 < rho < 1:
        raise ValueError(f"rho must be between 0 and 1, got {rho}")
    epsilon1 = Fraction(epsilon) * Fraction(rho)
    epsilon2 = Fraction(epsilon) - epsilon1
    flat = counts.reshape(-1)
    first = LedgerEntry(step=f"{step} (first pass)", mechanism="discrete Laplace per bin", epsilon=epsilon1,
                        sensitivity=Fraction(sensitivity), noise_scale=as_scale(Fraction(sensitivity) / epsilon1),
                        cells=int(flat.size))
    noisy = (flat + budget.discrete_laplace(first, rng)).astype(float)
    phase1 = threshold(noisy, 1 / float(epsilon1), sensitivity, eta, flat.size)
    second = smooth(flat, phase1, sensitivity, epsilon2, budget, rng, step)
    return Published(second.values.reshape(counts.shape), (first, *second.entries))
