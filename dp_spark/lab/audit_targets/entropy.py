"""Audit samplers for location entropy (specification §7): one location, D′ adds one user.

The trials are independent copies of the location in one release (noise is per location), so
one call of the job's release function gives every trial. Each location's release must meet the
share (ε/M, δ/M) for the M locations of one user to compose to (ε, δ) (§7.4): that is the claim
audited for the entropy and for the ``visits`` and ``users`` outputs.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.location_entropy import entropy as location_entropy


@dataclass(frozen=True)
class LocationPair:
    """One location on D and on D′: its users' bounded visit counts, and the job's bounds."""

    name: str
    visits: tuple[np.ndarray, np.ndarray]
    bounds: location_entropy.Bounds
    delta: float
    fold: bool = False  # the statistic is |release − H(D)|: both tails at once (post-processing)

    def claim(self, epsilon: Fraction, variant: str = "limit_ss") -> tuple[float, float]:
        """(ε/M, δ/M) per location; δ only for the variants that spend it."""
        delta = self.delta / self.bounds.M if variant in location_entropy.DELTA_VARIANTS else 0.0
        return float(epsilon) / self.bounds.M, delta


# 3 users against 4, where the paper's smooth sensitivity jumps.
SMALL = LocationPair("small", (np.array([1, 1, 5]), np.array([1, 1, 5, 5])), location_entropy.Bounds(M=20, C=5),
                     1e-3)


def many_users(n: int, bounds: location_entropy.Bounds, delta: float) -> LocationPair:
    """n users against n + 1, all with C visits: large n sits near the ξ floor of smooth
    sensitivity, where a scale rounded to grid units jumps by a whole unit between n and n + 1."""
    full = np.full(n, bounds.C)
    return LocationPair(f"n={n}", (full, np.append(full, bounds.C)), bounds, delta, fold=True)


BOUNDARY_BOUNDS = location_entropy.Bounds(M=5, C=5)
BOUNDARY = many_users(13_542, BOUNDARY_BOUNDS, 1e-8)  # the units of the old scale go 68 → 67 here
BASELINE_BOUNDS = location_entropy.Bounds(M=100, C=1000)  # Fig. 2's public C_max, M_max (config default)
# Baseline: 170 users with one visit each, and D′ adds a user with C_max visits. That moves H̄ by
# 3.975, all of GS(1000) = ln 1000 − ln ln 1000 − 1: the worst case of its sensitivity analysis.
BASELINE = LocationPair("baseline", (np.ones(170, dtype=np.int64), np.append(np.ones(170, dtype=np.int64), 1000)),
                        BASELINE_BOUNDS, 1e-3)
XI = 1e-3
K = 4  # Limit-CB-DP's crowd size: below the 3 or 4 users of SMALL's location, so both sides can publish


def stats(visits: np.ndarray, copies: int) -> location_entropy.LocationStats:
    users = np.full(copies, visits.size)
    total = np.full(copies, float(visits.sum()))
    c_log_c = np.full(copies, float((visits * np.log(visits)).sum()))
    return location_entropy.LocationStats(users, total, location_entropy.entropy_of(users, total, c_log_c))


CHUNK = 1_000_000  # locations per release: a release with millions of copies holds a scale object each


def entropy_sampler(variant: str, epsilon: Fraction, pair: LocationPair):
    """The noisy entropy (−10 where Limit-CB-DP suppresses the location: its own outcome)."""
    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        noisy = np.concatenate([
            location_entropy.publish(stats(pair.visits[side], min(CHUNK, trials - start)), variant, pair.bounds,
                                     {"epsilon_entropy": epsilon}, Budget(epsilon, pair.delta), rng, delta=pair.delta,
                                     k=K, xi=XI).entropy
            for start in range(0, trials, CHUNK)])
        if pair.fold:
            return np.abs(noisy - entropy_of(pair.visits[0]))
        return np.where(np.isfinite(noisy), noisy, -10.0)
    return sample


def entropy_of(visits: np.ndarray) -> float:
    """H̄ of one location from its users' visit counts (a public constant of the audit's pair)."""
    return float(stats(visits, 1).entropy[0])


def output_sampler(output: str, epsilon: Fraction, pair: LocationPair = SMALL):
    """The noisy ``visits`` or ``users`` of the location, with ε shared by the three outputs as the
    job's default split does. D′'s extra user moves c̄ by C and n̄ by 1, the per-location worst
    cases of their sensitivities M·C and M."""
    split = location_entropy.default_split(epsilon, location_entropy.OUTPUTS)

    def sample(side, trials, seed, _spark):
        budget = Budget(epsilon, pair.delta)
        release = location_entropy.publish(stats(pair.visits[side], trials), "limit", pair.bounds, split, budget,
                                           RandomSource(seed), delta=pair.delta)
        return release.extra[output].astype(float)
    return sample


def output_claim(epsilon: Fraction, pair: LocationPair = SMALL) -> tuple[float, float]:
    share = location_entropy.default_split(epsilon, location_entropy.OUTPUTS)["epsilon_visits"]
    return float(share) / pair.bounds.M, 0.0


# The ledger: two locations, the first with 30 users against 31 (where the old ledger's scale told them apart).
LEDGER_BOUNDS = location_entropy.Bounds(M=5, C=5)
LEDGER_DELTA = 1e-8
LEDGER_USERS = ((30, 12), (31, 12))


def ledger_stats(side: int) -> location_entropy.LocationStats:
    users = np.array(LEDGER_USERS[side])
    total = users * float(LEDGER_BOUNDS.C)  # every user with C visits
    c_log_c = total * np.log(LEDGER_BOUNDS.C)
    return location_entropy.LocationStats(users, total, location_entropy.entropy_of(users, total, c_log_c))


def ledger_code(budget: Budget) -> float:
    """Every number the ledger publishes, as one code (equal ledgers, equal codes)."""
    text = repr([(e.step, e.mechanism, e.epsilon, e.sensitivity, e.noise_scale, e.cells, e.delta)
                 for e in budget.entries])
    return float(zlib.crc32(text.encode()))


def ledger_sampler(variant: str, epsilon: Fraction):
    """What the job's ledger says, on two check-in inputs that differ by one user. Everything in
    the ledger must be a function of the config and public domains: equal on both sides."""
    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        out = np.empty(trials)
        for t in range(trials):
            budget = Budget(epsilon, LEDGER_DELTA)
            location_entropy.publish(ledger_stats(side), variant, LEDGER_BOUNDS, {"epsilon_entropy": epsilon}, budget,
                                     rng, delta=LEDGER_DELTA, k=K, xi=XI)
            out[t] = ledger_code(budget)
        return out
    return sample
