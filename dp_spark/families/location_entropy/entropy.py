"""Location entropy with user-level privacy (To, Nguyen, Shahabi 2016; specification §7).

Input: check-ins [user_id, item_id (the location), time, visits] with locations in
a public set L. Every variant first bounds each user on its own data (§7.3,
:func:`dp_spark.bounding.user_locations.bounded_pairs`): keep the user's first M
distinct locations by its own first-visit time (ties by location id) and cap its
visits at each at C. Then, per location of L, n̄ (users), c̄ (visits) and
Σ c̄ ln c̄ (:func:`dp_spark.families.location_entropy.sums.location_sums`) give
H̄ = ln c̄ − Σ c̄ ln c̄ / c̄ (0 for n̄ ≤ 1). This module is the numpy part.

DP claims (unit: one user with all its check-ins):

* ``limit`` (ε-DP, §7.3): a user touches at most M locations and moves each H̄
  by at most GS(C). H̄ is rounded to the grid g = 2^-16, which can add g per
  location, so the L1 sensitivity is M·(GS(C) + g) and the noise is discrete
  Laplace of that scale over ε on the grid (§1.4).
* ``baseline`` (ε-DP, §7.2 [FIX]): ``limit`` with the public bounds
  (C_max, M_max), enforced, never read from the data.
* ``limit_ss`` ((ε, δ)-DP, §7.4 [FIX]): location l gets discrete Laplace noise of scale
  b(n̄_l) = 2M·S(n̄_l)/ε grid units, S(n) = (SS(n)/g + 1)·(1 + 2^-30), SS the ξ-floored
  smooth bound for β = β′ − slack, β′ = ε/(2M ln(2M/δ)), and b rounded up to an exact
  fraction (relative error ≤ 2^-37, which the slack covers). S is a β′-smooth upper bound
  on how far one user moves the rounded H̄ in grid units, so each of a user's ≤ M
  locations is (ε/M, δ/M)-DP (Nissim, Raskhodnikova, Smith); the argument for the grid
  and the rounding is in docs/location_entropy.md, and
  :func:`dp_spark.core.hockey_stick.discrete_laplace_delta` checks it exactly. The realised
  scales depend on n̄ and never reach the report: the ledger carries the formula and the
  scale at the ξ floor.
* ``limit_cb`` (§7.5): locations with n̄ ≥ k get noise M·GS_k/ε, the others are
  suppressed. Whether a location is published depends on its exact user count,
  so this is only (k, ε)-crowd-blending private, NOT differentially private;
  the ledger and the report say so.
* ``limit_cb_dp`` ((ε_s + ε_e, δ)-DP, §7.5 [FIX]): user counts n̄_l with
  discrete Laplace M/ε_s (L1 sensitivity M) choose the published set
  {l : ñ_l ≥ k}; those get ``limit_ss`` values with (ε_e, δ).
* Optional ``visits`` (Σ c̄, sensitivity M·C) and ``users`` (n̄, sensitivity M),
  each with discrete Laplace and its own share of ε.

Claim: docs/location_entropy.md, "Privacy claim: limit, baseline", "Privacy claim: limit_ss",
"Privacy claim: limit_cb_dp", "Privacy claim: limit_cb".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource, as_scale
from dp_spark.families.location_entropy import sensitivity as sens

VARIANTS = ("baseline", "limit", "limit_ss", "limit_cb", "limit_cb_dp")
DELTA_VARIANTS = ("limit_ss", "limit_cb_dp")  # (ε, δ)-DP; the others spend no δ
SPEC_SECTIONS = {"baseline": "docs/specification.md §7.2", "limit": "docs/specification.md §7.3",
                 "limit_ss": "docs/specification.md §7.4",
                 "limit_cb": "docs/specification.md §7.5 (crowd-blending, not DP)",
                 "limit_cb_dp": "docs/specification.md §7.5 (Limit-CB-DP)"}
OUTPUTS = ("entropy", "visits", "users")
GRID_BITS = 16
SELECTION_SHARE = Fraction(1, 10)  # Limit-CB-DP: ε_s = ε/10 of the entropy's share (§7.5 [ASSUME])
CROWD_BLENDING = ("Limit-CB publishes a location only when its exact user count reaches k: (k, epsilon)-"
                  "crowd-blending private, NOT differentially private (specification §7.5)")


@dataclass(frozen=True)
class Bounds:
    M: int  # locations kept per user
    C: int  # visits kept per user and location


@dataclass(frozen=True)
class LocationStats:
    """Per public location, after bounding (NOT private)."""

    users: np.ndarray  # n̄
    visits: np.ndarray  # c̄
    entropy: np.ndarray  # H̄


def stats_of(sums) -> LocationStats:
    """n̄, c̄ and H̄ = ln c̄ − Σ c̄ ln c̄ / c̄ for every public location, from the Spark aggregate
    (:class:`dp_spark.families.location_entropy.sums.LocationSums`)."""
    return LocationStats(sums.users, sums.visits, entropy_of(sums.users, sums.visits, sums.c_log_c))


def entropy_of(users: np.ndarray, visits: np.ndarray, sum_c_log_c: np.ndarray) -> np.ndarray:
    out = np.zeros(users.size)
    many = users >= 2
    out[many] = np.log(visits[many]) - sum_c_log_c[many] / visits[many]
    return np.maximum(out, 0.0)  # rounding can leave −1e-16 where all users are equal


# ---------------------------------------------------------------------------
# Releases: pure numpy on the driver.


def _units(value: float, grid_bits: int = GRID_BITS) -> int:
    """⌈value / g⌉: a public sensitivity in grid units, rounded up."""
    return math.ceil(value * (1 << grid_bits))


def _on_grid(values: np.ndarray, grid_bits: int = GRID_BITS) -> np.ndarray:
    return np.round(values * (1 << grid_bits)).astype(np.int64)


def laplace_entropy(stats: LocationStats, sensitivity_per_location: float, M: int, epsilon: Fraction,
                    budget: Budget, rng: RandomSource, step: str, mechanism: str, not_private: str = ""
                    ) -> np.ndarray:
    """H̄ + discrete Laplace of scale M·(S + g)/ε on the grid: ε-DP for a per-location bound S."""
    unit = 1 << GRID_BITS
    sensitivity_units = M * (_units(sensitivity_per_location) + 1)
    scale = as_scale(Fraction(sensitivity_units) / epsilon)
    entry = LedgerEntry(step, mechanism, epsilon, Fraction(sensitivity_units, unit), scale / unit,
                        int(stats.entropy.size), not_private=not_private)
    return (_on_grid(stats.entropy) + budget.discrete_laplace(entry, rng, grid=Fraction(1, unit))) / unit


# Limit-SS's scale must itself be β′-smooth (§7.4 [FIX, turn 2]). Two things move it away from the
# ideal 2M·S(n)/ε: the scale is rounded up to an exact fraction the sampler takes (relative error
# ≤ 2^(1 − SCALE_BITS)), and the table is computed in doubles (a few ulps per step). The table is
# therefore built for β′ minus SMOOTHNESS_SLACK, which covers both with orders of magnitude to spare,
# and S is padded by TABLE_PAD so that it stays above the true LS* despite rounding in its logarithms.
SCALE_BITS = 38
SMOOTHNESS_SLACK = math.log1p(2.0 ** (1 - SCALE_BITS)) + 2.0 ** -40
TABLE_PAD = 1 + 2.0 ** -30


def round_up_relative(value: Fraction, bits: int = SCALE_BITS) -> Fraction:
    """The smallest multiple of 2^(e − bits) at or above ``value``, where 2^(e−1) ≤ value < 2^e:
    never below ``value``, above it by a factor of at most 1 + 2^(1 − bits), and with a numerator
    and denominator the exact sampler accepts."""
    if value <= 0:
        raise ValueError(f"a noise scale must be positive, got {value}")
    e = value.numerator.bit_length() - value.denominator.bit_length()
    while Fraction(2) ** (e - 1) > value:
        e -= 1
    while Fraction(2) ** e <= value:
        e += 1
    quantum = Fraction(2) ** (e - bits)
    return -(-value // quantum) * quantum


def smooth_scale_units(users: np.ndarray, C: int, M: int, epsilon: Fraction, delta: float, xi: float
                       ) -> list[Fraction]:
    """Limit-SS's noise scale in grid units for each user count in ``users``: b(n) = 2M·S(n)/ε
    rounded up, S(n) = (SS(n)/g + 1)·TABLE_PAD (n = 0 takes SS(1)).

    SS(n)/g + 1 bounds how far one user moves the rounded H̄ (≤ LS*(n)/g plus one step of
    rounding), and adding a constant keeps β-smoothness: SS(n) ≤ e^β·SS(n ± 1) gives the same for
    SS/g + 1."""
    users = np.asarray(users, dtype=np.int64)
    beta_prime = sens.smoothing(float(epsilon), delta, M)
    if beta_prime <= SMOOTHNESS_SLACK:
        raise ValueError(f"beta' = {beta_prime:g} is too small for Limit-SS's rounding slack {SMOOTHNESS_SLACK:g}")
    table = sens.smooth_sensitivity_table(C, M, float(epsilon), delta, int(max(users.max(initial=1), 1)), xi,
                                          beta_prime - SMOOTHNESS_SLACK)
    unit = 1 << GRID_BITS
    distinct, position = np.unique(users, return_inverse=True)
    scales = [round_up_relative(Fraction(2 * M) * Fraction((float(table[n]) * unit + 1) * TABLE_PAD) / epsilon)
              for n in distinct]
    return [scales[i] for i in position.reshape(-1)]


def smooth_scale_floor(M: int, epsilon: Fraction, xi: float) -> Fraction:
    """The least Limit-SS scale any location can get, in value units: the one at the ξ floor. A
    function of the config only, so the ledger may carry it."""
    unit = 1 << GRID_BITS
    return round_up_relative(Fraction(2 * M) * Fraction((xi * unit + 1) * TABLE_PAD) / epsilon) / unit


def smooth_entropy(entropy: np.ndarray, users: np.ndarray, bounds: Bounds, epsilon: Fraction, delta: float,
                   budget: Budget, rng: RandomSource, xi: float, step: str) -> np.ndarray:
    """Limit-SS noise: location l gets scale b(n̄_l) = 2M·S(n̄_l)/ε on the grid (§7.4, module docstring).

    The scales depend on n̄, so the ledger records only what the config fixes: the formula, β′, δ,
    ξ, and the scale and sensitivity at the ξ floor (the least noise a location can get). A realised
    min or max over locations would reveal the largest user count."""
    unit = 1 << GRID_BITS
    scales = smooth_scale_units(users, bounds.C, bounds.M, epsilon, delta, xi)
    used_beta = sens.smoothing(float(epsilon), delta, bounds.M)
    floor_scale = smooth_scale_floor(bounds.M, epsilon, xi)
    mechanism = (f"discrete Laplace on the grid 2^-{GRID_BITS}, smooth sensitivity: location l gets scale "
                 f"about 2M(SS(C, n_l) + g)/epsilon, beta' = {used_beta:.6g}, floor xi = {xi:g}; sensitivity_l1 and "
                 "noise_scale are those at the xi floor, the least any location gets")
    entry = LedgerEntry(step, mechanism, epsilon, floor_scale * epsilon / 2, floor_scale, int(users.size),
                        delta=delta)
    return (_on_grid(entropy) + budget.discrete_laplace_each(entry, rng, scales, grid=Fraction(1, unit))) / unit


@dataclass(frozen=True)
class EntropyRelease:
    entropy: np.ndarray  # float, NaN where suppressed
    extra: dict = field(default_factory=dict)  # name -> noisy vector (visits, users)
    diagnostics: dict = field(default_factory=dict)  # NOT private


def publish(stats: LocationStats, variant: str, bounds: Bounds, epsilons: dict, budget: Budget, rng: RandomSource,
            delta: float = 1e-8, k: int = 50, xi: float = 1e-3, step_suffix: str = "") -> EntropyRelease:
    """The variant's entropy release and any visit or user counts, every step paid into ``budget``
    (``step_suffix`` is added to every step's name, e.g. when the bounds were chosen privately)."""
    eps = epsilons["epsilon_entropy"]
    step = "entropy" + step_suffix
    if variant in ("limit", "baseline"):
        noisy = laplace_entropy(stats, sens.global_sensitivity(bounds.C), bounds.M, eps, budget, rng, step,
                                f"discrete Laplace on the grid 2^-{GRID_BITS}")
    elif variant == "limit_ss":
        noisy = smooth_entropy(stats.entropy, stats.users, bounds, eps, delta, budget, rng, xi, step)
    elif variant == "limit_cb":
        noisy = laplace_entropy(stats, sens.crowd_sensitivity(bounds.C, k), bounds.M, eps, budget, rng, step,
                                f"discrete Laplace on the grid 2^-{GRID_BITS}, k = {k} crowd",
                                not_private=CROWD_BLENDING)
        noisy = np.where(stats.users >= k, noisy, np.nan)
    elif variant == "limit_cb_dp":
        eps_select = eps * SELECTION_SHARE
        selection = LedgerEntry("entropy (selection by noisy users)" + step_suffix, "discrete Laplace", eps_select,
                                Fraction(bounds.M), as_scale(Fraction(bounds.M) / eps_select), int(stats.users.size))
        chosen = stats.users + budget.discrete_laplace(selection, rng) >= k
        noisy = smooth_entropy(stats.entropy, stats.users, bounds, eps - eps_select, delta, budget, rng, xi,
                               step)
        noisy = np.where(chosen, noisy, np.nan)
    else:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    extra = {}
    for name, true, sensitivity in (("visits", stats.visits, bounds.M * bounds.C), ("users", stats.users, bounds.M)):
        key = f"epsilon_{name}"
        if key in epsilons:
            entry = LedgerEntry(name + step_suffix, "discrete Laplace", epsilons[key], Fraction(sensitivity),
                                as_scale(Fraction(sensitivity) / epsilons[key]), int(true.size))
            extra[name] = true + budget.discrete_laplace(entry, rng)
    published = int(np.isfinite(noisy).sum())
    return EntropyRelease(noisy, extra, {"locations_published": published})


def default_split(epsilon: Fraction, outputs: tuple[str, ...]) -> dict[str, Fraction]:
    """ε shared equally by the requested outputs (entropy, visits, users)."""
    return {f"epsilon_{name}": epsilon / len(outputs) for name in outputs}
