"""Exact privacy loss of discrete Laplace releases whose scale depends on the data.

A mechanism is (ε, δ)-DP for a pair of neighbours exactly when the hockey-stick divergence
δ(ε) = Σ_z max(0, P(z) − e^ε·Q(z)) of their output laws is at most δ, both ways round. For
Limit-SS one location's release is V + Z with V the rounded entropy in grid units and Z discrete
Laplace whose scale b(n) depends on the user count n, so neighbours (n against n + 1 users)
give P = DLap(b₁) centred at 0 and Q = DLap(b₂) centred at a shift s with |s| ≤ the rounded
local sensitivity. This module sums δ in closed form, so a claim can be checked for every n
rather than sampled (tests/test_location_entropy.py, and the audit's exact rows).

log P(z) − log Q(z) is piecewise linear in z with kinks at 0 and s; on each piece the set where
P > e^ε·Q is an integer interval, and the sums of P and Q over it are geometric series.
"""

from __future__ import annotations

import math

import numpy as np


def _log_mass(scale: np.ndarray) -> np.ndarray:
    """log P(0) of DLap(scale): log((1 − r)/(1 + r)) = log tanh(1/(2·scale))."""
    return np.log(np.tanh(0.5 / scale))


def _one_side_sum(log_top: np.ndarray, scale: np.ndarray, near: np.ndarray, far: np.ndarray) -> np.ndarray:
    """Σ_{k=near}^{far} exp(log_top − k/scale), distances from the centre near ≤ far (far may be ∞)."""
    count = far - near + 1
    with np.errstate(invalid="ignore", over="ignore"):
        total = np.exp(log_top - near / scale) * (-np.expm1(-count / scale)) / (-np.expm1(-1.0 / scale))
    return np.where(count > 0, total, 0.0)


def _piece(a0, a1, low, high):
    """The integer z in [low, high] with a0 + a1·z > 0, as (first, last); empty when first > last."""
    with np.errstate(divide="ignore", invalid="ignore"):
        root = -a0 / a1
        first = np.where(a1 > 0, np.maximum(low, np.floor(root) + 1), low)
        last = np.where(a1 < 0, np.minimum(high, np.ceil(root) - 1), high)
    flat = a1 == 0
    first = np.where(flat & (a0 <= 0), np.inf, first)
    return first, last


def discrete_laplace_delta(scale_p, scale_q, shift, epsilon: float) -> np.ndarray:
    """δ(ε) of P = DLap(scale_p) at 0 against Q = DLap(scale_q) at ``shift`` (an integer), per
    entry of the broadcast arrays: Σ_z max(0, P(z) − e^ε·Q(z)). Scales are in the units of z."""
    b1, b2, s = np.broadcast_arrays(np.asarray(scale_p, float), np.asarray(scale_q, float),
                                    np.abs(np.asarray(shift, float)))  # P is symmetric: the sign of s is moot
    lp, lq = _log_mass(b1), _log_mass(b2) + epsilon
    a = lp - lq
    inf = np.full(b1.shape, np.inf)
    total = np.zeros(b1.shape)
    # Piece 1: z ≤ 0, left of both centres. D(z) = a + s/b2 + z(1/b1 − 1/b2).
    first, last = _piece(a + s / b2, 1 / b1 - 1 / b2, -inf, np.zeros_like(b1))
    total += np.maximum(0.0, _one_side_sum(lp, b1, -last, -first) - _one_side_sum(lq, b2, s - last, s - first))
    # Piece 2: 1 ≤ z ≤ s − 1, right of P's centre and left of Q's. D(z) = a + s/b2 − z(1/b1 + 1/b2).
    first, last = _piece(a + s / b2, -(1 / b1 + 1 / b2), np.ones_like(b1), s - 1)
    total += np.maximum(0.0, _one_side_sum(lp, b1, first, last) - _one_side_sum(lq, b2, s - last, s - first))
    # Piece 3: z ≥ max(s, 1), right of both. D(z) = a − s/b2 + z(1/b2 − 1/b1).
    first, last = _piece(a - s / b2, 1 / b2 - 1 / b1, np.maximum(s, 1), inf)
    total += np.maximum(0.0, _one_side_sum(lp, b1, first, last) - _one_side_sum(lq, b2, first - s, last - s))
    return total


def worst_delta(scale_n, scale_next, max_shift, epsilon: float, chunk: int = 1 << 21) -> float:
    """The largest δ(ε) over neighbours n and n + 1 (scales ``scale_n``, ``scale_next``), every
    shift 0..max_shift and both directions: what a per-location (ε, δ) claim must bound."""
    scale_n, scale_next = np.asarray(scale_n, float), np.asarray(scale_next, float)
    shifts_per_pair = np.asarray(max_shift, dtype=np.int64) + 1
    pair = np.repeat(np.arange(scale_n.size), shifts_per_pair)  # one row per (pair, shift)
    shift = np.arange(pair.size) - np.repeat(np.cumsum(shifts_per_pair) - shifts_per_pair, shifts_per_pair)
    worst = 0.0
    for start in range(0, pair.size, chunk):
        p, s = pair[start:start + chunk], shift[start:start + chunk]
        forward = discrete_laplace_delta(scale_n[p], scale_next[p], s, epsilon)
        backward = discrete_laplace_delta(scale_next[p], scale_n[p], s, epsilon)
        worst = max(worst, float(forward.max(initial=0.0)), float(backward.max(initial=0.0)))
    return worst


def brute_force_delta(scale_p: float, scale_q: float, shift: int, epsilon: float, reach: float = 60.0) -> float:
    """The same sum term by term over |z| ≤ reach·max scale (for tests of the closed form)."""
    width = int(math.ceil(reach * max(scale_p, scale_q))) + abs(shift)
    z = np.arange(-width, width + 1)
    p = np.exp(_log_mass(np.float64(scale_p)) - np.abs(z) / scale_p)
    q = np.exp(_log_mass(np.float64(scale_q)) - np.abs(z - shift) / scale_q)
    return float(np.maximum(0.0, p - math.exp(epsilon) * q).sum())
