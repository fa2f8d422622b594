"""Choosing a per-user bound privately: the exponential mechanism over public candidate bounds,
with a quality that weighs the records the bound drops against the noise it brings (issue 30).

The bound is SRA's and HPA's ``l``, the baselines' ``m``: every user keeps at most ``b`` records,
and each count table is then released with noise of scale ``b/ε_t``. A small ``b`` drops the
records of heavy users (counts biased down); a large one makes every cell noisier. Looking at the
data to pick ``b`` is itself a release (ALGORITHMS.md §1.3), so it is chosen here with its own
share of ε, as DPSense chooses its θ (§4.2). The claim, its sensitivity and its argument:
docs/bound_selection.md, "Privacy claim: bound_selection".

Pure numpy and Fractions over one aggregate the validation already makes: ``users_by_n``, the
number of users with ``n`` records in the domain. That aggregate is NOT private; it is read
only inside the mechanism.

This module is the mechanism alone; the jobs and the API do not call it yet (issue 30 goes on).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np

from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.privacy import Budget, LedgerEntry


def candidates_checked(candidates: Sequence[int]) -> np.ndarray:
    """The public candidate bounds as a strictly increasing array of integers >= 1."""
    values = np.asarray(list(candidates), dtype=object)
    if values.size == 0:
        raise ValueError("the candidate bounds are empty")
    if any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1 for b in values):
        raise ValueError(f"candidate bounds must be integers >= 1, got {list(candidates)!r}")
    values = np.array([int(b) for b in values], dtype=np.int64)
    if np.any(np.diff(values) <= 0):
        raise ValueError(f"candidate bounds must be strictly increasing, got {values.tolist()}")
    return values


def truncation_loss(users_by_n: Mapping[int, int], candidates: Sequence[int]) -> np.ndarray:
    """Loss(b) = Σ_users max(min(n, b_max) − b, 0) for every candidate b: the records the bound
    drops, each user's count first capped at the largest candidate b_max (so one user moves any
    Loss(b) by at most b_max − b_1). Exact integers."""
    bounds = candidates_checked(candidates)
    top = int(bounds[-1])
    capped: dict[int, int] = {}
    for n, users in users_by_n.items():
        if int(n) < 0 or int(users) < 0:
            raise ValueError(f"users_by_n needs non-negative counts, got {n}: {users}")
        capped[min(int(n), top)] = capped.get(min(int(n), top), 0) + int(users)
    return np.array([sum(max(n - int(b), 0) * users for n, users in capped.items()) for b in bounds], dtype=object)


def quality(users_by_n: Mapping[int, int], candidates: Sequence[int], noise_per_unit: Fraction,
            tables: int = 1) -> np.ndarray:
    """q(b) = −(tables·Loss(b) + b·noise_per_unit): minus a bound on the release's expected
    total L1 error. Each of ``tables`` count tables loses Loss(b) of its mass to bounding (every
    record counts once in each), and ``noise_per_unit`` = Σ_t cells_t/ε_t is the expected total
    |noise| per unit of bound (E|Lap(s)| = s, and a discrete Laplace's is smaller).

    Exact Fractions (an object array), as for DPSense: rounded doubles could move a score by more
    than the sensitivity the mechanism is given."""
    if tables < 1:
        raise ValueError(f"tables must be >= 1, got {tables}")
    per_unit = Fraction(noise_per_unit)
    if per_unit < 0:
        raise ValueError(f"noise_per_unit must be >= 0, got {noise_per_unit}")
    bounds = candidates_checked(candidates)
    return np.array([-(tables * int(lost) + int(b) * per_unit)
                     for lost, b in zip(truncation_loss(users_by_n, bounds), bounds)], dtype=object)


def quality_sensitivity(candidates: Sequence[int], tables: int = 1) -> int:
    """Δq = tables·(b_max − b_1): adding a user with n records lowers every q(b) by
    tables·max(min(n, b_max) − b, 0), between 0 and Δq, all scores the same way (monotone)."""
    bounds = candidates_checked(candidates)
    return max(tables * int(bounds[-1] - bounds[0]), 1)  # one candidate: any positive Δq is exact


def choose_bound(users_by_n: Mapping[int, int], candidates: Sequence[int], noise_per_unit: Fraction,
                 epsilon: Fraction, budget: Budget, rng: RandomSource, tables: int = 1, step: str = "bound") -> int:
    """One candidate bound, drawn with the exact exponential mechanism at P(b) ∝ exp(ε·q(b)/Δq)
    (the monotone case), ``epsilon`` spent through ``budget`` under ``step``."""
    bounds = candidates_checked(candidates)
    sensitivity = quality_sensitivity(bounds, tables)
    scores = quality(users_by_n, bounds, noise_per_unit, tables)
    entry = LedgerEntry(step, "exponential mechanism (monotone quality)", Fraction(epsilon), Fraction(sensitivity),
                        Fraction(sensitivity) / Fraction(epsilon), bounds.size)
    return int(bounds[budget.exponential_mechanism(entry, rng, scores, monotone=True)])
