"""Choosing location entropy's bounds M and C privately: one exponential mechanism over
a public grid of candidate pairs (M, C), with a quality that weighs what bounding does to the
entropy against the noise the pair brings.

M (locations kept per user) and C (visits kept per location) trade bias for noise: small bounds
drop locations and clip visits, which moves every location's bounded entropy H̄ away from what
the data hold; large bounds make the release's noise, M·GS(C)/ε per location for Limit, grow.
Both sides are measured in the same unit, entropy on the release's grid 2^-16, summed over the
public locations:

    D(M, C)  = Σ_l |H̄_{M,C}(l) − H̄_{M_K,C_K}(l)|     # how far bounding at (M, C) moves H̄ from
                                                      # the least-bounded candidate (M_K, C_K)
    q(M, C)  = −⌈√( D(M, C)² + |L|²·V(M, C) )⌉         # V: the noise variance per location

−q/|L| = √((D/|L|)² + V) is the root of the squared mean |bias| plus the noise variance: by
Jensen, at most the root mean squared error against H̄ at the largest candidates, bias plus noise,
and it trades the two as that error does (the noise's variance grows as M², its mean |noise| as
M only: the first quality, −(D + |L|·s), weighed noise linearly and chose too large an M at a large
ε). For Limit-SS and Limit-CB-DP, whose noise depends on each location's private user count, V is
the variance at a public proxy scale, the one at k users.

Sensitivity (docs/bound_selection.md, "Privacy claim: entropy_bound_selection"): a user keeps a
prefix of its own ordering of locations, so at every candidate it touches only locations among
its first M_K. There H̄ at any (M, C) moves by at most GS(C) ≤ GS(C_K) in value, at most
u(C) = ⌈GS(C)/g⌉ + 1 on the grid, and the reference by at most u(C_K); elsewhere nothing moves.
So D moves by at most M_i·u(C_j) + M_K·u(C_K) ≤ 2·M_K·u(C_K) = Δq, an integer, in either
direction; √(D² + x) is 1-Lipschitz in D and V is public, and rounding up to an integer keeps the
bound (⌈a + Δ⌉ = ⌈a⌉ + Δ for an integer Δ). Not monotone: the factor 2 of the general
exponential mechanism applies.

Pure numpy and Fractions over the per-candidate location sums (NOT private), which
``families.location_entropy.sums.candidate_sums`` computes in one aggregation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dp_spark.core.exact_roots import ceil_sqrt
from dp_spark.core.ledger import Budget, selection_entry
from dp_spark.core.mechanisms import RandomSource, discrete_laplace_variance
from dp_spark.families.location_entropy import entropy as le
from dp_spark.families.location_entropy import sensitivity as sens
from dp_spark.families.location_entropy.sums import CandidateSums
from dp_spark.release.bound_selection import candidates_checked as bound_candidates_checked

# Public defaults (docs/bound_selection.md, "Location entropy: M and C"): M up to 10, every value
# to 5 (paper 004's default), and C from 1 to 50 as the paper's grid (it advises C < 10; its
# default is 5). The paper's M grid goes to 30, but Δq grows with M_K, and Limit's noise at M ≥ 10 has a
# scale of at least 10·ln 2/ε ≈ 7/ε per location: larger bounds pay only at an ε well above 5, and a
# config can list them (measured: bench/entropy_bound_selection.py).
DEFAULT_M_CANDIDATES = (1, 2, 3, 4, 5, 7, 10)
DEFAULT_C_CANDIDATES = (1, 2, 3, 5, 10, 20, 50)
MAX_CANDIDATES = 32  # per bound: the aggregation carries |M|·|C|·2 + |M| sums per location
DEFAULT_SHARE = Fraction(1, 10)  # of ε, to privacy.epsilon_bound


def candidates_checked(values: Sequence[int], name: str, maximum: int | None = None) -> tuple[int, ...]:
    """A public candidate list as a strictly increasing tuple of integers >= 1 (at most
    ``maximum``); ValueError naming ``name`` otherwise."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise ValueError(f"{name} must be a list of integers, got {values!r}")
    if not values or len(values) > MAX_CANDIDATES:
        raise ValueError(f"{name} must list 1 to {MAX_CANDIDATES} candidates, got {len(values)}")
    try:  # the counts' check of a candidate list: integers >= 1, strictly increasing
        checked = tuple(int(v) for v in bound_candidates_checked(values))
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if maximum is not None and checked[-1] > maximum:
        raise ValueError(f"{name} must be at most {maximum:,}, got {checked[-1]:,}")
    return checked


def stats_at(sums: CandidateSums, i: int, j: int) -> le.LocationStats:
    """n̄, c̄ and H̄ of every public location at the candidate pair (M_i, C_j)."""
    return le.LocationStats(sums.users[i], sums.visits[i, j],
                            le.entropy_of(sums.users[i], sums.visits[i, j], sums.c_log_c[i, j]))


def grid_units(value: float) -> int:
    """u = ⌈value/g⌉ + 1: how far one user can move a value rounded to the grid g = 2^-16 when it
    moves the value itself by at most ``value`` (rounding adds at most one step)."""
    return math.ceil(value * (1 << le.GRID_BITS)) + 1


def distance_units(sums: CandidateSums) -> np.ndarray:
    """D[i, j] = Σ_l |round(H̄_{M_i,C_j}(l)/g) − round(H̄_{M_K,C_K}(l)/g)| (Python ints)."""
    last_m, last_c = len(sums.Ms) - 1, len(sums.Cs) - 1
    reference = le._on_grid(stats_at(sums, last_m, last_c).entropy)
    out = np.empty((len(sums.Ms), len(sums.Cs)), dtype=object)
    for i in range(len(sums.Ms)):
        for j in range(len(sums.Cs)):
            out[i, j] = int(np.abs(le._on_grid(stats_at(sums, i, j).entropy) - reference).sum())
    return out


def noise_units(variant: str, M: int, C: int, epsilon: Fraction, k: int, delta: float, xi: float) -> Fraction:
    """The entropy release's noise scale per location in grid units at (M, C): exact for limit
    (M·u(GS(C))/ε, what laplace_entropy draws) and limit_cb (GS_k); for limit_ss and limit_cb_dp,
    whose scale depends on each location's private user count, the scale at k users (a public
    proxy)."""
    if variant == "limit":
        return Fraction(M * grid_units(sens.global_sensitivity(C))) / epsilon
    if variant == "limit_cb":
        return Fraction(M * grid_units(sens.crowd_sensitivity(C, k))) / epsilon
    if variant in ("limit_ss", "limit_cb_dp"):
        if variant == "limit_cb_dp":
            epsilon -= epsilon * le.SELECTION_SHARE
        return le.smooth_scale_units(np.array([k]), C, M, epsilon, delta, xi)[0]
    raise ValueError(f"bounds cannot be chosen for variant {variant!r}")


def noise_variance_units(variant: str, M: int, C: int, epsilon: Fraction, k: int, delta: float, xi: float
                         ) -> Fraction:
    """The entropy release's noise variance per location in grid units², at the scale of
    :func:`noise_units` (every variant draws discrete Laplace noise): an exact Fraction of a public
    double."""
    return Fraction(discrete_laplace_variance(noise_units(variant, M, C, epsilon, k, delta, xi)))


def quality(sums: CandidateSums, variant: str, epsilon_entropy: Fraction, locations: int, k: int = 50,
            delta: float = 1e-8, xi: float = 1e-3) -> np.ndarray:
    """q[i, j] = −⌈√(D[i, j]² + |L|²·V(M_i, C_j))⌉ in grid units, exact integers (an object array)."""
    distance = distance_units(sums)
    out = np.empty(distance.shape, dtype=object)
    for i, M in enumerate(sums.Ms):
        for j, C in enumerate(sums.Cs):
            noise = noise_variance_units(variant, M, C, epsilon_entropy, k, delta, xi)
            out[i, j] = -ceil_sqrt(Fraction(int(distance[i, j]) ** 2) + locations * locations * noise)
    return out


def quality_sensitivity(Ms: Sequence[int], Cs: Sequence[int]) -> int:
    """Δq = 2·M_K·u(GS(C_K)) grid units (module docstring): the most one user moves any q."""
    return 2 * max(Ms) * grid_units(sens.global_sensitivity(max(Cs)))


def choose_bounds(sums: CandidateSums, variant: str, epsilon_entropy: Fraction, locations: int,
                  epsilon: Fraction, budget: Budget, rng: RandomSource, k: int = 50, delta: float = 1e-8,
                  xi: float = 1e-3, step: str = "bound (M, C)") -> tuple[int, int]:
    """(i, j): the indices of the chosen (M_i, C_j), drawn with the exact exponential mechanism at
    P ∝ exp(ε·q/(2Δq)), spent through ``budget`` under ``step``. ``epsilon`` is the choice's part
    of the split; under zCDP the mechanism runs at twice it, a bounded-range step that costs the
    part's ρ (core.zcdp.selection_epsilon)."""
    scores = quality(sums, variant, epsilon_entropy, locations, k, delta, xi).reshape(-1)
    sensitivity = Fraction(quality_sensitivity(sums.Ms, sums.Cs))
    entry = selection_entry(step, f"exponential mechanism over the candidate grid of (M, C), quality in grid units "
                            f"2^-{le.GRID_BITS}", epsilon, sensitivity, int(scores.size), budget.zcdp)
    index = budget.exponential_mechanism(entry, rng, scores)
    return divmod(index, len(sums.Cs))
