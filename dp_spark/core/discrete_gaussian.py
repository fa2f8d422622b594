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
rounds any σ² up to one (more noise, never less) whose denominator keeps the exponent in int64 for
σ up to about 5,800, the fast path; beyond, or for a draw far in the tail, it is computed in Python
integers, with the same result.

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


# Exponents stay in int64 (the sampler's fast path) while q·t² is at most this: then u = q·t·|Y| − p
# fits with |Y| up to 64·t, beyond which a draw has probability below e^-64.
_FAST_DENOMINATOR = 1 << 25


def variance_at_least(value: Fraction | float | int) -> Fraction:
    """``value`` itself when :func:`as_variance` accepts it and its denominator q keeps the sampler's
    exponents in 64 bits (q·t² ≤ 2^25, t = ⌊σ⌋ + 1), else the smallest fraction above it with a
    power-of-two denominator q that does (or, past σ ≈ 5,800, the integer above it): more noise
    than asked for, never less, by less than 1/q ≤ 2t²/2^25, which is below 2.4·10^-7 of σ² for
    σ ≥ 1 (below 2^-23 absolute for σ < 1)."""
    variance = Fraction(value)
    if variance <= 0:
        raise ValueError(f"the variance parameter sigma^2 must be positive, got {variance}")
    t = math.isqrt(variance.numerator // variance.denominator) + 1
    accepted = variance.numerator * variance.denominator < _MAX_PRODUCT and variance < _MAX_VARIANCE
    if accepted and variance.denominator * t * t <= _FAST_DENOMINATOR:
        return variance
    bits = min(30, max(0, (_FAST_DENOMINATOR // (t * t)).bit_length() - 1))  # 2^bits·t² ≤ 2^25 when it can be
    q = 1 << bits
    p = -((-variance.numerator * q) // variance.denominator)  # ⌈σ²·q⌉
    rounded = Fraction(p, q)
    return as_variance(rounded if rounded >= variance else rounded + Fraction(1, q))


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


def _exponents(abs_y: np.ndarray, p: int, q: int, t: int, denominator: int) -> tuple[np.ndarray, np.ndarray]:
    """(⌊u²/B⌋, u² mod B) per draw, u = q·t·|Y| − p: in int64 when every value fits (the common
    case), else in Python integers; the two give the same numbers."""
    bound = q * t * int(abs_y.max(initial=0)) + p  # |u| ≤ bound
    if bound * bound < 1 << 63 and denominator < 1 << 63:
        u = abs_y * np.int64(q * t) - np.int64(p)
        squares = u * u
        return squares // np.int64(denominator), squares % np.int64(denominator)
    u = abs_y.astype(object) * (q * t) - p
    squares = u * u
    return squares // denominator, squares % denominator


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
        wholes, rests = _exponents(np.abs(y), p, q, t, denominator)
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


# Up to this σ the pmf's sums run over every integer within 40σ (an array of 80σ doubles); beyond it
# the normaliser is σ√(2π) (Poisson summation: the correction, 2·Σ exp(−2π²σ²k²), is below 10^-300
# from σ = 10 on) and the tails are bounded by integrals, so a σ of millions costs no memory.
SUMMED_SIGMA = 10_000


def _sigma(variance: Fraction | float) -> float:
    return math.sqrt(float(variance))


def support(variance: Fraction | float) -> np.ndarray:
    """The integers carrying all but about 1e-300 of the mass: |z| ≤ 40σ + 2 (for σ up to 10,000)."""
    if _sigma(variance) > SUMMED_SIGMA:
        raise ValueError(f"sigma {_sigma(variance):.4g} is above {SUMMED_SIGMA}: use the tail bounds")
    reach = int(40 * _sigma(variance)) + 2
    return np.arange(-reach, reach + 1)


def _normaliser(variance: Fraction | float) -> float:
    if _sigma(variance) > SUMMED_SIGMA:
        return _sigma(variance) * math.sqrt(2 * math.pi)
    return float(np.exp(-(support(variance).astype(float) ** 2) / (2 * float(variance))).sum())


def discrete_gaussian_pmf(z: np.ndarray, variance: Fraction | float) -> np.ndarray:
    """The exact pmf the sampler targets (float, for tests and error bars)."""
    return np.exp(-(np.asarray(z, dtype=float) ** 2) / (2 * float(variance))) / _normaliser(variance)


def discrete_gaussian_variance(variance: Fraction | float) -> float:
    """Var(Z) = Σ z²·P(z): slightly below σ² (CKS Corollary 9), and σ² to double precision beyond
    σ = 10,000, where that is what is returned."""
    if _sigma(variance) > SUMMED_SIGMA:
        return float(variance)
    z = support(variance)
    return float((z.astype(float) ** 2 * discrete_gaussian_pmf(z, variance)).sum())


def tail_at_least(m: int, variance: Fraction | float) -> float:
    """P(Z ≥ m) for an integer m, exactly summed up to σ = 10,000; beyond, an upper bound:
    Σ_{z≥m} f(z) ≤ f(m) + ∫_m^∞ f for m ≥ 0, f(x) = exp(−x²/2σ²) decreasing (and 1 − P(Z ≥ 1 − m)
    by symmetry for m < 0, with the lower bound ∫_m^∞ f there)."""
    if _sigma(variance) <= SUMMED_SIGMA:
        z = support(variance)
        return float(discrete_gaussian_pmf(z[z >= m], variance).sum())
    sigma, norm = _sigma(variance), _normaliser(variance)
    if m >= 0:
        head = math.exp(-m * m / (2 * sigma * sigma)) / norm
        return min(1.0, head + 0.5 * math.erfc(m / (sigma * math.sqrt(2))))
    return 1.0 - 0.5 * math.erfc((1 - m) / (sigma * math.sqrt(2)))


def discrete_gaussian_tail(h: int, variance: Fraction | float) -> float:
    """P(|Z| > h) for an integer h ≥ 0 (an upper bound beyond σ = 10,000)."""
    return min(1.0, 2 * tail_at_least(h + 1, variance))


def discrete_gaussian_halfwidth(variance: Fraction | float, alpha: float) -> int:
    """The smallest integer h ≥ 0 with P(|Z| ≤ h) ≥ 1 − α, from the exact pmf (beyond σ = 10,000,
    from the tail's upper bound: at most one step wider)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if _sigma(variance) > SUMMED_SIGMA:
        return least_integer(lambda h: discrete_gaussian_tail(h, variance) <= alpha)
    z = support(variance)
    inside = discrete_gaussian_pmf(z, variance)
    reach = z[-1]
    # P(|Z| ≤ h) as h grows: the centre, then both sides added one step at a time.
    covered = np.cumsum(np.concatenate([[inside[reach]], inside[reach + 1:] + inside[reach - 1::-1][: reach]]))
    return int(np.searchsorted(covered, 1 - alpha))


def least_integer(holds, low: int = 0) -> int:
    """The least integer n ≥ ``low`` with ``holds(n)``, for a ``holds`` false then true from some n on."""
    high = max(low, 1)
    while not holds(high):
        high *= 2
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle + 1
    return low
