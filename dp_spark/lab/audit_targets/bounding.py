"""Audit samplers for the DP estimate of what bounding removed (release.bounding_estimate),
and its negative control.

D is a few users with public-looking record counts; D′ adds one user with exactly the cap
B = 8·l records, the worst case of the claim: it adds l to the records kept and B − l to the
records removed (counted up to the cap), each one sensitivity of its figure. The statistic is
the sum of the two noisy figures, each in units of its noise scale, so that both moves count.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.release import bounding_estimate as be

AUDIT_L = 3
USERS_BY_N = {1: 3, 2: 2, 5: 1, 40: 1}  # n: users with n in-domain records (D)
# The control's heavy user: far past the cap, so that a removed count without the cap moves by
# HEAVY_FACTOR·B − l where the claim allows B − l.
HEAVY_FACTOR = 4


def users_by_n(side: int, heavy_records: int) -> pd.Series:
    counts = dict(USERS_BY_N)
    if side:
        counts[heavy_records] = counts.get(heavy_records, 0) + 1
    return pd.Series(counts, dtype="int64").sort_index()


def _statistic(kept: int, removed: int, plan: be.BoundingPlan) -> float:
    return float(_statistics(np.array([kept]), np.array([removed]), plan)[0])


def _statistics(kept: np.ndarray, removed: np.ndarray, plan: be.BoundingPlan) -> np.ndarray:
    kept_entry, removed_entry = plan.entries()
    return kept / float(kept_entry.noise_scale) + removed / float(removed_entry.noise_scale)


def estimate_sampler(epsilon: Fraction):
    """The job's two noisy figures (``noisy_figures``); D′ adds a user with B records."""
    plan = be.BoundingPlan(AUDIT_L, epsilon)

    def sample(side, trials, seed, _spark):
        data = users_by_n(side, plan.cap)
        rng = RandomSource(seed)
        return np.array([_statistic(*be.noisy_figures(data, plan, Budget(epsilon), rng), plan)
                         for _ in range(trials)])
    return sample


def uncapped_sampler(epsilon: Fraction):
    """NEGATIVE CONTROL: the removed records counted without the cap (Σ (n − l)⁺) but noised at
    the capped sensitivity B − l; D′ adds a user with HEAVY_FACTOR·B records, so the removed
    figure moves by about HEAVY_FACTOR times its claimed sensitivity."""
    plan = be.BoundingPlan(AUDIT_L, epsilon)

    def sample(side, trials, seed, _spark):
        data = users_by_n(side, HEAVY_FACTOR * plan.cap)
        n = data.index.to_numpy(dtype=np.int64)
        users = data.to_numpy(dtype=np.int64)
        kept_true = int((np.minimum(n, AUDIT_L) * users).sum())
        removed_true = int((np.maximum(n - AUDIT_L, 0) * users).sum())  # the bug: no cap
        # Every trial's noise at once: each figure's entry drawn for ``trials`` cells, whose noise is
        # independent from cell to cell, so cell i is trial i's figure (one draw per trial took a
        # millisecond of entries and sampler calls).
        kept_entry, removed_entry = (replace(entry, cells=trials) for entry in plan.entries())
        rng, budget = RandomSource(seed), Budget(epsilon)
        kept = kept_true + budget.discrete_laplace(kept_entry, rng)
        removed = removed_true + budget.discrete_laplace(removed_entry, rng)
        return _statistics(kept, removed, plan)
    return sample
