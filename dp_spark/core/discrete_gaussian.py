"""The exact discrete Gaussian N_Z(0, σ²): P(Z = z) ∝ exp(−z²/(2σ²)) over the integers.

Canonne, Kamath and Steinke (NeurIPS 2020), Algorithm 3: draw Y from the discrete Laplace of
scale t = ⌊σ⌋ + 1 and keep it with probability exp(−(|Y| − σ²/t)²/(2σ²)); otherwise draw again.
A kept Y has P(Y = y) ∝ exp(−|y|/t − (|y| − σ²/t)²/(2σ²)) = exp(−y²/(2σ²) − σ²/(2t²)), the
discrete Gaussian (any t > 0 gives it; t near σ keeps about half the tries or more).

Exactness: σ² is a fraction p/q, so the exponent is the rational x = u²/B with u = q·t·|Y| − p and
B = 2pq·t². exp(−x) = exp(−1)^⌊x⌋ · exp(−(x − ⌊x⌋)): the whole part is ⌊x⌋ Bernoulli(exp(−1))
draws, the rest one Bernoulli(exp(−r/B)) by CKS Algorithm 1, whose steps are Bernoulli(r/(B·k))
draws: a uniform integer below B·k compared with r. B·k can exceed 64 bits, so the uniform integer
is drawn in two limbs, U = U_lo + b_lo·U_hi with U_lo uniform below b_lo = 2pq and U_hi uniform
below b_hi·k = t²·k, each within 64 bits: U is uniform below B·k, and U < r is decided on the
limbs exactly. The samplers compare integers only, as the discrete Laplace's do
(:mod:`dp_spark.core.mechanisms`), so no rounding touches the distribution.

σ² is kept to fractions with p·q < 2^62 and t < 2^24 (:func:`as_variance`); :func:`variance_at_least`
rounds any σ² up to one (more noise, never less).

Claim: docs/mechanisms.md, "Privacy claim: discrete_gaussian".
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dp_spark.core.mechanisms import RandomSource, _discrete_laplace, _survive_whole_parts

_MAX_PRODUCT = 1 << 62  # p·q below it: the low limb 2pq stays below 2^63
_MAX_T = 1 << 24  # t² below 2^48: the high limb t²·k stays in 64 bits for every k below 2^16
_MAX_ROUNDS = 1 << 15  # CKS Algorithm 1 reaches round k with probability below 1/(k − 1)!
_MAX_VARIANCE = Fraction((_MAX_T - 1) ** 2)


def as_variance(value: Fraction | int) -> Fraction:
    """Validate a discrete Gaussian variance parameter σ² > 0 given as an exact fraction."""
    variance = Fraction(value)
    if variance <= 0:
        raise ValueError(f"the variance parameter sigma^2 must be positive, got {variance}")
    if variance >= _MAX_VARIANCE:
        raise ValueError(f"sigma = {math.sqrt(variance):.4g} is above the sampler's limit {_MAX_T - 1:,}: noise of "
                         "that size leaves nothing of the counts (raise epsilon or lower the per-user bound)")
    if variance.numerator * variance.denominator >= _MAX_PRODUCT:
        raise ValueError(f"sigma^2 = {variance} has too large a numerator or denominator (use variance_at_least)")
    return variance


def variance_at_least(value: Fraction | float | int) -> Fraction:
    """``value`` itself when :func:`as_variance` accepts it, else the smallest fraction with a
    power-of-two denominator above it that it accepts: more noise than asked for, never less
    (at most 2^-30 relative, or one part in σ² for σ² ≥ 2^31)."""
    variance = Fraction(value)
    if variance <= 0:
        raise ValueError(f"the variance parameter sigma^2 must be positive, got {variance}")
    if variance.numerator * variance.denominator < _MAX_PRODUCT and variance < _MAX_VARIANCE:
        return variance
    bits = 30
    while bits > 0:
        q = 1 << bits
        p = -((-variance.numerator * q) // variance.denominator)  # ⌈σ²·q⌉
        if p * q < _MAX_PRODUCT:
            break
        bits -= 1
    else:
        q, p = 1, -((-variance.numerator) // variance.denominator)
    return as_variance(Fraction(p, q))


def laplace_scale_of(variance: Fraction) -> int:
    """t = ⌊σ⌋ + 1, the proposal's scale: ⌊√(p/q)⌋ = isqrt(⌊p/q⌋) in integers."""
    variance = as_variance(variance)
    return math.isqrt(variance.numerator // variance.denominator) + 1


def _bernoulli_exp_minus_limbs(rng: RandomSource, r_lo: np.ndarray, r_hi: np.ndarray, b_lo: int, b_hi: int
                               ) -> np.ndarray:
    """Exact Bernoulli(exp(−r/B)) per entry, r = r_lo + b_lo·r_hi < B = b_lo·b_hi (CKS Algorithm 1:
    A_k ~ Bernoulli(r/(B·k)) for k = 1, 2, ... until the first failure K; P(K odd) = exp(−r/B)).
    Each A_k compares a two-limb uniform integer below B·k with r."""
    out_k = np.ones(r_lo.size, dtype=np.uint64)
    pending = np.arange(r_lo.size)
    lows = np.full(r_lo.size, b_lo, dtype=np.uint64)
    while pending.size:
        k = out_k[pending]
        if int(k.max()) >= _MAX_ROUNDS:  # probability below 1/32767!: a broken random source
            raise RuntimeError("the Bernoulli sampler ran past its round limit")
        u_hi = rng.below(np.uint64(b_hi) * k)
        u_lo = rng.below(lows[: pending.size])
        hi = r_hi[pending]
        success = (u_hi < hi) | ((u_hi == hi) & (u_lo < r_lo[pending]))
        advanced = pending[success]
        out_k[advanced] += np.uint64(1)
        pending = advanced
    return out_k % np.uint64(2) == 1


def discrete_gaussian(rng: RandomSource, variance: Fraction | int, size: int) -> np.ndarray:
    """``size`` exact draws of N_Z(0, σ²), σ² = ``variance`` (an exact fraction, :func:`as_variance`)."""
    variance = as_variance(variance)
    p, q = variance.numerator, variance.denominator
    t = laplace_scale_of(variance)
    b_lo, b_hi = 2 * p * q, t * t
    denominator = b_lo * b_hi
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    ones = np.ones(size, dtype=np.uint64)
    while pending.size:
        n = pending.size
        y = _discrete_laplace(rng, np.full(n, t, dtype=np.uint64), ones[:n])
        u = np.abs(y).astype(object) * (q * t) - p  # Python ints: u² may pass 64 bits
        squares = u * u
        wholes, rests = squares // denominator, squares % denominator
        keep = _survive_whole_parts(rng, wholes)
        alive = np.flatnonzero(keep)
        if alive.size:
            rest = rests[alive]
            r_hi = (rest // b_lo).astype(np.uint64)
            r_lo = (rest % b_lo).astype(np.uint64)
            keep[alive] = _bernoulli_exp_minus_limbs(rng, r_lo, r_hi, b_lo, b_hi)
        out[pending[keep]] = y[keep]
        pending = pending[~keep]
    return out


def support(variance: Fraction | float) -> np.ndarray:
    """The integers carrying all but about 1e-300 of the mass: |z| ≤ 40σ + 2."""
    reach = int(40 * math.sqrt(float(variance))) + 2
    return np.arange(-reach, reach + 1)


def discrete_gaussian_pmf(z: np.ndarray, variance: Fraction | float) -> np.ndarray:
    """The exact pmf the sampler targets (float, for tests and error bars)."""
    sigma2 = float(variance)
    norm = np.exp(-(support(variance).astype(float) ** 2) / (2 * sigma2)).sum()
    return np.exp(-(np.asarray(z, dtype=float) ** 2) / (2 * sigma2)) / norm


def discrete_gaussian_variance(variance: Fraction | float) -> float:
    """Var(Z) = Σ z²·P(z): slightly below σ² (CKS Corollary 9), equal to it for large σ."""
    z = support(variance)
    return float((z.astype(float) ** 2 * discrete_gaussian_pmf(z, variance)).sum())


def discrete_gaussian_tail(h: int, variance: Fraction | float) -> float:
    """P(|Z| > h) for an integer h ≥ 0."""
    z = support(variance)
    return float(discrete_gaussian_pmf(z[np.abs(z) > h], variance).sum())


def discrete_gaussian_halfwidth(variance: Fraction | float, alpha: float) -> int:
    """The smallest integer h ≥ 0 with P(|Z| ≤ h) ≥ 1 − α, from the exact pmf."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    z = support(variance)
    inside = discrete_gaussian_pmf(z, variance)
    reach = z[-1]
    # P(|Z| ≤ h) as h grows: the centre, then both sides added one step at a time.
    covered = np.cumsum(np.concatenate([[inside[reach]], inside[reach + 1:] + inside[reach - 1::-1][: reach]]))
    return int(np.searchsorted(covered, 1 - alpha))
