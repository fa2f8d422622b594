"""Zero-concentrated differential privacy (ρ-zCDP): conversions to and from (ε, δ)-DP.

Under zCDP a release's cost is one number ρ and composition adds ρ: k releases of ρ each cost
kρ, where pure ε-DP pays kε and the (ε, δ) of the same k releases grows like √k. The facts used
(Bun and Steinke, TCC 2016, "Concentrated Differential Privacy: Simplifications, Extensions, and
Lower Bounds", arXiv 1605.02065; Canonne, Kamath and Steinke, NeurIPS 2020, "The Discrete
Gaussian for Differential Privacy", arXiv 2004.00010):

* a pure ε-DP step is (ε²/2)-zCDP (Bun–Steinke, Proposition 1.4);
* an (ε, δ)-DP step is δ-approximately (ε²/2)-zCDP (Bun–Steinke, Proposition 1.13), and
  δ-approximate ρ-zCDP steps compose by adding both ρ and δ;
* an integer query of L2 sensitivity Δ₂ plus discrete Gaussian noise N_Z(0, σ²) on every
  coordinate is (Δ₂²/(2σ²))-zCDP (Canonne–Kamath–Steinke, Theorems 14 and 15);
* ρ-zCDP implies (ε, δ)-DP for every ε ≥ 0 with (Canonne–Kamath–Steinke, Corollary 13)

      δ = inf over α > 1 of  exp((α − 1)(αρ − ε)) / (α − 1) · (1 − 1/α)^α,

  tighter than the classical ε = ρ + 2√(ρ·ln(1/δ)); a δ-approximate ρ-zCDP release is then
  (ε, δ_approx + δ)-DP.

The conversions are floating point, so each rounds the safe way: :func:`epsilon_of` may state a
slightly larger ε, :func:`rho_of` hands out a slightly smaller ρ, never the reverse. Every α > 1
gives a valid δ, so an imperfect minimisation over α only loosens the statement. A δ too small
for a normal double is stated as e^-708, never as 0 (which ``exp`` would round it to).

Claim: docs/mechanisms.md, "Privacy claim: Accounting, delta_of".
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

# Relative margin the conversions keep on the safe side of floating-point rounding in exp and log;
# a ρ handed out keeps a wider one, so that the ε it is stated back as is never above the ε asked.
_SAFETY = 1e-9
_RHO_SAFETY = 1e-6
_BISECTIONS = 200
# The best α lies anywhere from just above 1 (large ρ) to about 1/√(2ρ) or ε/(2ρ) (tiny ρ): up
# to the top of the doubles. Halving [1, 2^1023] down to adjacent doubles takes about 1,100 steps;
# 200 left α far off for ρ below about 1e-120 (30,000 times the root at 1e-130), where log δ came out
# positive and past exp's range (an OverflowError from about ρ = 1e-125 on). A range that narrows sooner
# stops sooner: for every ρ that converged in 200 steps α is the same double.
_ALPHA_BISECTIONS = 2200
# The least log δ that delta_of states: e^-708 is a normal double (the least is e^-708.4). Below it
# exp returns a subnormal, with too few bits for the margin to cover its rounding, or 0, a δ that
# no positive ρ has; any larger δ is a valid statement, so a smaller true δ is stated as e^-708.
_LEAST_LOG_DELTA = -708.0
_LEAST_DELTA = math.exp(_LEAST_LOG_DELTA) * (1 + _SAFETY)  # the least δ delta_of states


def _check_positive(value: float, name: str) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def _log_delta(rho: float, epsilon: float, alpha: float) -> float:
    """log of the Corollary-13 δ at one α > 1."""
    return (alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)


def _bisect(low: float, high: float, above, steps: int = _BISECTIONS) -> tuple[float, float]:
    """(low, high) narrowed to adjacent doubles (or ``steps`` halvings) around where ``above``,
    false at ``low`` and true at ``high``, turns true."""
    for _ in range(steps):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        if above(mid):
            high = mid
        else:
            low = mid
    return low, high


def _best_alpha(rho: float, epsilon: float) -> float:
    """The α minimising the δ: the root of the derivative of its log, (2α − 1)ρ − ε + ln(1 − 1/α),
    which increases with α from −∞ (α → 1) to +∞: bisection."""
    high = max(2.0, (epsilon + math.log(2)) / (2 * rho) + 1.5)  # there ln(1 − 1/α) ≥ −ln 2: derivative > 0
    # For a ρ near the least double that is past the doubles: any α > 1 is valid, and below half the
    # largest double the bisection's sums low + high stay finite.
    high = min(high, sys.float_info.max / 2)
    return _bisect(1.0, high, lambda a: (2 * a - 1) * rho - epsilon + math.log1p(-1 / a) >= 0,
                   _ALPHA_BISECTIONS)[1]


def delta_of(rho: float, epsilon: float) -> float:
    """The δ for which ρ-zCDP implies (ε, δ)-DP (Canonne–Kamath–Steinke, Corollary 13), at most 1
    and never below e^-708 (about 3.3e-308): a true δ smaller than a normal double is stated as
    that, never as 0."""
    rho = _check_positive(rho, "rho")
    if isinstance(epsilon, bool) or not math.isfinite(float(epsilon)) or epsilon < 0:
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    log_delta = _log_delta(rho, float(epsilon), _best_alpha(rho, float(epsilon)))
    return min(1.0, math.exp(max(log_delta, _LEAST_LOG_DELTA)) * (1 + _SAFETY))


def _check_delta(delta: float) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ValueError(f"delta must be strictly between 0 and 1, got {delta!r}")
    return float(delta)


def _implies(rho: float, epsilon: float, delta: float) -> bool:
    """Whether ρ-zCDP implies (ε, δ)-DP as delta_of states it: delta_of(ρ, ε) ≤ δ; for a δ below
    the least that delta_of states, the same test on logs, with the same margin."""
    if delta >= _LEAST_DELTA:
        return delta_of(rho, epsilon) <= delta
    return _log_delta(rho, epsilon, _best_alpha(rho, epsilon)) + _SAFETY <= math.log(delta)


def epsilon_of(rho: float, delta: float) -> float:
    """The smallest ε (up to 1e-9 relative, rounded up) for which ρ-zCDP implies (ε, δ)-DP."""
    rho, delta = _check_positive(rho, "rho"), _check_delta(delta)
    if _implies(rho, 0.0, delta):
        return 0.0
    # The classical bound is valid (-log δ where 1/δ would overflow, for a subnormal δ).
    classical = rho + 2 * math.sqrt(rho * (math.log(1 / delta) if delta >= _LEAST_DELTA else -math.log(delta)))
    return _bisect(0.0, classical, lambda eps: _implies(rho, eps, delta))[1] * (1 + _SAFETY)


def rho_of(epsilon: float, delta: float) -> Fraction:
    """The largest ρ (up to 1e-6 relative, rounded down, as an exact fraction) whose ρ-zCDP
    implies (ε, δ)-DP: how a budget given as (ε, δ) becomes a ρ to spend."""
    epsilon, delta = _check_positive(epsilon, "epsilon"), _check_delta(delta)
    # At ρ = ε, ε alone is below ρ's mean privacy loss: δ is large.
    low, _ = _bisect(0.0, epsilon, lambda rho: not _implies(rho, epsilon, delta))
    return floor_fraction(low * (1 - _RHO_SAFETY))


def float_at_most(value: Fraction | int) -> float:
    """The largest double that is at most ``value`` exactly: a part of a δ rounded down, so that
    parts computed apart never add up past their total however the doubles round."""
    value = Fraction(value)
    near = float(value)  # correctly rounded: at most half an ulp either way
    return math.nextafter(near, -math.inf) if Fraction(near) > value else near


def floor_fraction(value: float | Fraction, max_denominator: int = 10**12) -> Fraction:
    """The largest fraction with denominator at most ``max_denominator`` that is ≤ ``value``:
    a readable exact number that never rounds a budget up."""
    exact = Fraction(value)
    near = exact.limit_denominator(max_denominator)
    if near <= exact:
        return near
    return Fraction(math.floor(exact * max_denominator), max_denominator)


def pure_cost(epsilon: Fraction) -> Fraction:
    """ρ of a pure ε-DP step: ε²/2 (Bun–Steinke, Proposition 1.4)."""
    return Fraction(epsilon) ** 2 / 2


def bounded_range_cost(epsilon: Fraction) -> Fraction:
    """ρ of an ε-bounded-range step, such as the exponential mechanism at ε: ε²/8 (Cesar and
    Rogers 2021, Lemma 3.2; bounded range: Durfee and Rogers 2019). A quarter of a pure step's."""
    return Fraction(epsilon) ** 2 / 8


def selection_epsilon(share: Fraction, zcdp: bool) -> Fraction:
    """The ε an exponential mechanism runs at from its part ``share`` of a split: that part, or
    under zCDP (a share ρ_k handed out as ε_k ≤ √(2ρ_k), epsilon_for_rho rounding down) twice it,
    which as a bounded-range step costs (2ε_k)²/8 ≤ ρ_k (docs/mechanisms.md, "Privacy claim:
    Accounting, delta_of")."""
    return Fraction(share) * (2 if zcdp else 1)


def epsilon_for_rho(rho: Fraction, max_denominator: int = 10**6) -> Fraction:
    """The largest ε with denominator at most ``max_denominator`` and ε²/2 ≤ ρ: the pure-ε
    equivalent of a share of ρ (a step of that ε costs at most that share). A short fraction,
    so that noise scales Δ/ε stay exact fractions of moderate size."""
    rho = Fraction(rho)
    if rho <= 0:
        raise ValueError(f"rho must be positive, got {rho}")
    # ⌊√(2ρ)·d⌋/d for the denominator d, computed in integers: ⌊√(2ρd²)⌋ = isqrt(⌊2ρd²⌋).
    d = max_denominator
    epsilon = Fraction(math.isqrt(math.floor(2 * rho * d * d)), d)
    if epsilon <= 0:
        raise ValueError(f"rho {float(rho):.3g} is too small for a step with epsilon of denominator at most {d}")
    near = epsilon.limit_denominator(d)  # often a shorter fraction of the same value
    return near if pure_cost(near) <= rho else epsilon


def gaussian_cost(l2_sensitivity_squared: Fraction | int, variance: Fraction) -> Fraction:
    """ρ of discrete Gaussian noise of variance parameter σ² on every cell of an integer query of
    squared L2 sensitivity Δ₂²: Δ₂²/(2σ²) (Canonne–Kamath–Steinke, Theorems 14 and 15)."""
    variance = Fraction(variance)
    if variance <= 0 or Fraction(l2_sensitivity_squared) <= 0:
        raise ValueError("the variance and the sensitivity must be positive")
    return Fraction(l2_sensitivity_squared) / (2 * variance)


def rho_per_run(epsilon: float, delta: float, runs: int) -> Fraction:
    """The ρ each of ``runs`` releases may spend so that all of them together stay (ε, δ)-DP by zCDP
    composition: rho_of(ε, δ)/runs, rounded down (what a scheduled job's privacy.rho is set to)."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an integer >= 1, got {runs!r}")
    return floor_fraction(rho_of(epsilon, delta) / runs)
