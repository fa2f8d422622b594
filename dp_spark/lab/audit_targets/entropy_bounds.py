"""Audit samplers for the private choice of location entropy's M and C
(``entropy_bound_selection.choose_bounds``), and its negative control.

The mechanism reads the per-location sums at every candidate pair (``CandidateSums``: users,
visits and Σ c ln c at (M_i, C_j)); they are built here on the driver, user by user, exactly as
``families.location_entropy.sums.candidate_sums`` adds them up over ``ranked_pairs`` (each user keeps
its first M_i locations, visits capped at C_j; the product's Spark test checks that equality).
No Spark runs: a release is one ``choose_bounds`` call.

The neighbours, where the sensitivity argument is least loose (a search over small crowds, in
the report of this target's branch, found no pair of inputs doing better):

* D: |L| = M_K public locations, each with a small crowd of users who visit it and nowhere else
  (``LAYOUTS``: on the default grid 15 users with one visit each).
* D′ adds one user who visits all M_K locations (its own order, location 0 first; on the
  default grid with C_K visits at each). At the reference (M_K, C_K) the user dominates every
  location and pulls its entropy down by about GS(C_K); at a small C the capped user is one more
  single visit and pushes the entropy up; where M_i leaves the user out, only the reference
  moves. So every candidate but the reference gets further from it, by up to about half of Δq
  (the rest of Δq is the room the proof leaves for both H̄ and the reference moving the other way,
  which one user cannot do at once), and the reference's score does not move at all.
* ε_entropy (public) is the value of TUNING_GRID that gives the pair its largest exact ε: a
  large one, where the noise term is small and the quality moves with D (√(D² + |L|²·V) damps
  D's move when the noise dominates).

The statistic is the chosen candidate's index i·|C| + j; the exact ε of a pair is
:func:`pair_epsilon`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import LedgerEntry
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities
from dp_spark.families.location_entropy import bounds_choice as ebs
from dp_spark.families.location_entropy.sums import CandidateSums
from dp_spark.lab.audit_targets import primitives as prim

GRIDS = {
    "small": ((1, 2), (1, 5)),
    "default": (ebs.DEFAULT_M_CANDIDATES, ebs.DEFAULT_C_CANDIDATES),
}
VARIANTS = ("limit", "limit_ss")
# Per grid, the M_K locations the added user touches, in its order: (the visits of the users there
# on D, each with that one location only; the added user's visits). A search over crowds of up to
# four users, and of up to 100 one-visit users with two more, found these best for the pair
# (reference, the least-bounded candidates) under the first quality, −(D + |L|·s). Under the present
# one, −⌈√(D² + |L|²·V)⌉, at the ε_entropy that shows the most, they reach 9-10% (small) and 21-22%
# (default) of the claim.
LAYOUTS = {
    "small": (((1, 1, 1), 5), ((3,), 3)),
    "default": (((1,) * 15, 50),) * ebs.DEFAULT_M_CANDIDATES[-1],
}
# The public ε_entropy of a pair is the one of these (10^-3 to 10^9, a quarter decade apart) that
# shows the largest exact ε (pair).
TUNING_GRID = tuple(Fraction(10 ** (e / 4)).limit_denominator(10**6) for e in range(-12, 37))
K, DELTA, XI = 50, 1e-8, 1e-3  # the config's defaults (algorithm.k, privacy.delta, xi)

User = list[tuple[int, int]]  # (location, visits) in the user's own order


@dataclass(frozen=True)
class EntropyBoundPair:
    """Neighbouring inputs of ``choose_bounds`` and the public parameters of its quality."""

    Ms: tuple[int, ...]
    Cs: tuple[int, ...]
    variant: str
    epsilon_entropy: Fraction
    sums: tuple[CandidateSums, CandidateSums]  # D, D'

    @property
    def locations(self) -> int:
        return self.sums[0].users.shape[1]

    def scores(self, side: int) -> np.ndarray:
        """The product's quality on one side, flattened in choose_bounds' order i·|C| + j."""
        return ebs.quality(self.sums[side], self.variant, self.epsilon_entropy, self.locations, K, DELTA,
                           XI).reshape(-1)


def candidate_sums_of(users: list[User], locations: int, Ms: tuple[int, ...], Cs: tuple[int, ...]
                      ) -> CandidateSums:
    """What ``candidate_sums`` computes, user by user: at (M_i, C_j) each user keeps its first M_i
    locations, visits capped at C_j (NOT private)."""
    n = np.zeros((len(Ms), locations), dtype=np.int64)
    c = np.zeros((len(Ms), len(Cs), locations), dtype=np.int64)
    s = np.zeros((len(Ms), len(Cs), locations))
    for pairs in users:
        for i, M in enumerate(Ms):
            for location, visits in pairs[:M]:
                n[i, location] += 1
                for j, C in enumerate(Cs):
                    kept = min(visits, C)
                    c[i, j, location] += kept
                    s[i, j, location] += kept * math.log(kept)
    return CandidateSums(tuple(Ms), tuple(Cs), n, c, s, {})


def neighbours(grid: str) -> tuple[CandidateSums, CandidateSums]:
    """The sums on D (the layout's crowds, one location per user) and on D′ (plus the user who
    visits all M_K locations)."""
    Ms, Cs = GRIDS[grid]
    layout = LAYOUTS[grid]
    if len(layout) != Ms[-1] or max(v for crowd, added in layout for v in (*crowd, added)) > Cs[-1]:
        raise ValueError(f"the {grid} layout must touch M_K = {Ms[-1]} locations with visits <= C_K")
    crowd = [[(location, visits)] for location, (visits_there, _) in enumerate(layout) for visits in visits_there]
    added = [(location, visits) for location, (_, visits) in enumerate(layout)]
    return (candidate_sums_of(crowd, len(layout), Ms, Cs), candidate_sums_of(crowd + [added], len(layout), Ms, Cs))


# Cached, and called when a point is first sampled, not when the targets are listed: tuning the 18
# points' pairs took 8 s, which every process that imported the audit (each test process) paid.
@functools.lru_cache(maxsize=None)
def pair(grid: str, variant: str, epsilon: Fraction, sensitivity: Fraction | None = None) -> EntropyBoundPair:
    """The pair of :func:`neighbours` on ``grid``, with the public ε_entropy of TUNING_GRID that
    gives the pair its largest exact ε when the mechanism runs at ``sensitivity`` (default the
    claimed Δq). With little noise the quality is −D itself and D′ moves it most; with much, the
    noise term damps D's move (√(D² + x) moves less than D)."""
    Ms, Cs = GRIDS[grid]
    sums = neighbours(grid)
    best, best_epsilon = None, -1.0
    for epsilon_entropy in TUNING_GRID:
        candidate = EntropyBoundPair(Ms, Cs, variant, epsilon_entropy, sums)
        true = pair_epsilon(candidate, epsilon, sensitivity)
        if math.isfinite(true) and true > best_epsilon:  # probabilities that underflow say nothing
            best, best_epsilon = candidate, true
    return best


def pair_epsilon(p: EntropyBoundPair, epsilon: Fraction, sensitivity: Fraction | None = None,
                 monotone: bool = False) -> float:
    """The pair's true ε when the mechanism runs at ``epsilon`` with ``sensitivity`` (default the
    claimed Δq) and the general factor 2 (``monotone``: without it): the largest
    |ln P_D(o)/P_D′(o)| over the candidates (for a discrete output no event does better)."""
    sensitivity = ebs.quality_sensitivity(p.Ms, p.Cs) if sensitivity is None else sensitivity
    d, d2 = (np.asarray(exponential_probabilities(p.scores(side), epsilon, sensitivity, monotone=monotone),
                        dtype=float) for side in (0, 1))
    with np.errstate(divide="ignore", invalid="ignore"):  # an underflow gives inf or nan: not a measure
        return float(np.max(np.abs(np.log(d / d2))))


def choose_bounds_sampler(epsilon: Fraction, grid: str, variant: str):
    """The candidate ``choose_bounds`` picks (index i·|C| + j), once per trial, on D or D′."""

    def sample(side, trials, seed, _spark):
        p = pair(grid, variant, epsilon)
        rng = RandomSource(seed)
        # The first release is choose_bounds' own; the others draw the exponential mechanism it
        # called, with its entry (ε, Δq, factor) and scores, all at once: one call per release
        # spent 1-2 ms on the exact scores and a draw that settles one release a round.
        budget = prim.RecordingBudget(epsilon)
        i, j = ebs.choose_bounds(p.sums[side], p.variant, p.epsilon_entropy, p.locations, epsilon, budget, rng,
                                 K, DELTA, XI)
        entry, scores, monotone, index = budget.only_draw()
        if index != i * len(p.Cs) + j:
            raise AssertionError(f"choose_bounds returned {(i, j)} for candidate {index}")
        rest = prim.exponential_rows(entry, scores, monotone, trials - 1, rng)
        return np.concatenate([[index], rest]).astype(float)
    return sample


def per_location_sensitivity(p: EntropyBoundPair) -> Fraction:
    """The bug the control plants: Δq = 2·u(C_K), one location's move, the factor M_K forgotten
    (one user touches up to M_K locations)."""
    return Fraction(ebs.quality_sensitivity(p.Ms, p.Cs), max(p.Ms))


def per_location_sampler(epsilon: Fraction, grid: str = "default", variant: str = "limit"):
    """NEGATIVE CONTROL: ``choose_bounds``' quality sampled at :func:`per_location_sensitivity`,
    M_K = 10 times too small on the default grid. The pair is tuned at that sensitivity, as the
    buggy code would draw with it."""

    def sample(side, trials, seed, _spark):
        wrong = per_location_sensitivity(pair(grid, variant, epsilon))
        scores = pair(grid, variant, epsilon, wrong).scores(side)
        entry = LedgerEntry("negative control", "exponential mechanism at one location's sensitivity", epsilon,
                            wrong, 2 * wrong / epsilon, len(scores),
                            not_private="the quality's sensitivity without the factor M_K")
        # Every release at once (as many independent draws as calls, a row each): one call per
        # release took 0.7 ms.
        return prim.exponential_rows(entry, scores, False, trials, RandomSource(seed)).astype(float)
    return sample
