"""Sensitivities of location entropy (To, Nguyen, Shahabi 2016; specification §7.1, §7.4, §7.5).

Pure functions of public parameters: C (the most visits a user may have at one
location after capping), n (users at a location), M, ε, δ. The entropy of a
location is H = ln c − (Σ_u c_u ln c_u)/c over its users' visit counts c_u,
c = Σ_u c_u; H = 0 with at most one user.

Corrections carried (§7.1, §7.4): the local sensitivity at C = 1 is
ln(n/(n − 1)), not ln((n + 1)/n) (removing a user counts too); the local bound
is capped by the global one (LS* = min(LS, GS)); Limit-SS smooths with
β′ = ε/(2M·ln(2M/δ)), because each of the M locations a user touches gets
(ε/M, δ/M); ξ is only a floor.

Claim: docs/location_entropy.md, "Privacy claim: limit, baseline", "Privacy claim: limit_ss",
"Privacy claim: limit_cb_dp", "Privacy claim: limit_cb".
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

LN2 = math.log(2)


def entropy(counts) -> float:
    """H of one location from its users' visit counts (all ≥ 1); 0 for at most one user."""
    c = np.asarray(counts, dtype=float)
    if c.size <= 1:
        return 0.0
    total = c.sum()
    return float(math.log(total) - (c * np.log(c)).sum() / total)


def global_sensitivity(C: int) -> float:
    """GS(C) = max(ln 2, ln C − ln ln C − 1) (Theorem 1; GS(1) = ln 2)."""
    _check_cap(C)
    if C < 2:
        return LN2
    return max(LN2, math.log(C) - math.log(math.log(C)) - 1)


def local_sensitivity(C: int, n: int) -> float:
    """LS*(C, n): an upper bound on how much one user added to or removed from a location with
    n users can move its entropy, capped by GS(C) (§7.1 with the C = 1 correction)."""
    _check_cap(C)
    if n <= 1:
        return LN2
    if C == 1:
        return min(math.log(n / (n - 1)), LN2)
    log_c = math.log(C)
    a = math.log((n - 1) / (n - 1 + C)) + C * log_c / (n - 1 + C)
    b = math.log(n / (n + C)) + C * log_c / (n + C)
    h_star = math.log(n - 1) - log_c / (C - 1) + math.log(log_c / (C - 1)) + 1
    e = math.log1p(math.exp(-h_star))
    return min(max(a, b, e), global_sensitivity(C))


def decreasing_from(C: int) -> float:
    """m0: LS*(C, ·) is non-increasing from here on (§7.1). Checked numerically (the spec for C ≤ 199;
    tests/test_location_entropy.py up to the largest C the config accepts, 1,000,000)."""
    _check_cap(C)
    if C <= 2:
        return 2.0
    return C / (math.log(C) - 1) + 1 if C > math.e else 2.0


def smoothing(epsilon: float, delta: float, M: int) -> float:
    """β′ = ε / (2M·ln(2M/δ)) (§7.4 [FIX])."""
    if not (epsilon > 0 and 0 < delta < 1 and M >= 1):
        raise ValueError(f"need epsilon > 0, 0 < delta < 1, M >= 1; got {epsilon}, {delta}, {M}")
    return epsilon / (2 * M * math.log(2 * M / delta))


@lru_cache(maxsize=64)
def smooth_sensitivity_table(C: int, M: int, epsilon: float, delta: float, n_max: int,
                             xi: float = 1e-3, beta: float | None = None) -> np.ndarray:
    """SS(C, n) for n = 0..n_max (n = 0 uses SS(C, 1)): max over m ≥ 1 of e^(−β′|m − n|)·LS*(C, m),
    floored at ξ. Exact: two linear passes over m = 1..N_cap, where N_cap is past both n_max
    and m0, beyond which LS* only falls (§7.4). Cached per parameter set.
    ``beta`` overrides β′ only to audit the paper's flawed β."""
    beta = smoothing(epsilon, delta, M) if beta is None else beta
    n_cap = max(n_max, math.ceil(decreasing_from(C))) + 1
    upper = np.array([local_sensitivity(C, m) for m in range(1, n_cap + 1)])
    decay = math.exp(-beta)
    left = upper.copy()
    for i in range(1, upper.size):
        left[i] = max(left[i], decay * left[i - 1])
    right = upper.copy()
    for i in range(upper.size - 2, -1, -1):
        right[i] = max(right[i], decay * right[i + 1])
    smooth = np.maximum(np.maximum(left, right), xi)
    return np.concatenate(([smooth[0]], smooth[:n_max]))  # index n: SS(C, n); n = 0 → SS(C, 1)


def crowd_sensitivity(C: int, k: int) -> float:
    """GS_k = max over n ≥ k of LS*(C, n) (Limit-CB, §7.5)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    last = max(k, math.ceil(decreasing_from(C))) + 1
    return max(local_sensitivity(C, n) for n in range(k, last + 1))


def _check_cap(C: int) -> None:
    if isinstance(C, bool) or not isinstance(C, (int, np.integer)) or C < 1:
        raise ValueError(f"C must be an integer >= 1, got {C!r}")
