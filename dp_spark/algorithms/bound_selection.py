"""Choosing a per-user bound privately: the exponential mechanism over public candidate bounds,
with a quality that weighs the bias the bound brings against the noise (issues 30 and 42).

The bound is SRA's and HPA's ``l``, the baselines' ``m``: every user keeps at most ``b`` records,
and each count table is then released with noise that grows with ``b``. A small ``b`` drops the
records of heavy users (counts biased down); a large one makes every cell noisier. Looking at the
data to pick ``b`` is itself a release (ALGORITHMS.md §1.3), so it is chosen here with its own
share of ε, as DPSense chooses its θ (§4.2).

The quality measures the bias where it falls, cell by cell: for each candidate, the squared norm
of the vector of records the bound removes from each cell in expectation (SRA's uniform sample),
each user's part capped so that one user moves the norm by a bounded amount. The noise side is
the exact noise variance of the release at that bound, a public number. The quality, its
sensitivity and the argument: docs/bound_selection.md, "Privacy claim: bound_selection".

This module is pure Python: the per-user terms (``bias_term``), the squared norms summed from
them over plain pandas data (``squared_bias_norms``, for the driver, tests and benchmarks; Spark
sums the same terms in ``aggregates.bound_bias``), the quality and the mechanism. The norms are
NOT private; they are read only inside the mechanism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np
import pandas as pd

from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.privacy import Budget, selection_entry

# Public defaults (docs/bound_selection.md, "Defaults"): bounds a factor of about √2 apart up to
# 256, and a tenth of ε for the choice.
DEFAULT_CANDIDATES = (1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)
DEFAULT_SHARE = Fraction(1, 10)
# The quality counts at most this many of a user's records per cell (unless the release caps
# them itself, with algorithm.records_per_item): it keeps one user's move of the bias norm at
# √(c·(b_K − b_1)) records (docs/bound_selection.md, "The quality").
QUALITY_RECORDS_PER_CELL = 1
# The per-user bias terms are integers in units of 1/GRID records, rounded down, so that the
# squared norms are exact integers and the sensitivity holds for the numbers the mechanism gets.
GRID = 1024
# Scores are rounded up to this grid (in records) so that they stay exact rationals; the rounding
# adds 1/SCALE to the sensitivity.
SCALE = 100


def candidates_checked(candidates: Sequence[int]) -> np.ndarray:
    """The public candidate bounds as a strictly increasing array of integers >= 1."""
    values = list(candidates)
    if not values:
        raise ValueError("the candidate bounds are empty")
    if any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1 for b in values):
        raise ValueError(f"candidate bounds must be integers >= 1, got {values!r}")
    bounds = np.array([int(b) for b in values], dtype=np.int64)
    if np.any(np.diff(bounds) <= 0):
        raise ValueError(f"candidate bounds must be strictly increasing, got {bounds.tolist()}")
    return bounds


def bias_term(records: int, user_records: int, bound: int, first: int, last: int, cap: int) -> int:
    """One user's expected loss in one cell at ``bound``, in units of 1/GRID records, rounded down:

        ⌊GRID·min(k, c)·(n − b)⁺·(b_K − b_1) / (n·max(n − b_1, b_K − b_1))⌋

    for a user with k = ``records`` in the cell and n = ``user_records`` in the domain, the
    candidates b_1 = ``first`` ≤ b ≤ b_K = ``last``, c = ``cap``. Without the caps it is
    k·(n − b)⁺/n, the records SRA's uniform sample of b drops from the cell in expectation; a
    user with n > b_K has it scaled by (b_K − b_1)/(n − b_1), the same at every candidate, so
    that the user's terms sum to at most b_K − b_1 (and each is at most c)."""
    if user_records <= bound:
        return 0
    spread = last - first
    numerator = GRID * min(records, cap) * (user_records - bound) * spread
    return numerator // (user_records * max(user_records - first, spread))


def squared_bias_norms(cells: pd.DataFrame, candidates: Sequence[int], cap: int) -> list[int]:
    """Σ_j B_j(b)² for every candidate b, B_j(b) = Σ_u bias_term(k_uj, n_u, b, …): exact integers.

    ``cells``: one row per (user, cell) with ``user_id``, ``cell`` (any hashable key), ``k`` (the
    user's records in the cell) and ``n`` (the user's records in the domain). The driver-side
    twin of ``aggregates.bound_bias`` (tests hold them equal)."""
    bounds = [int(b) for b in candidates_checked(candidates)]
    first, last = bounds[0], bounds[-1]
    spread = last - first
    k = np.minimum(cells["k"].to_numpy(dtype=np.int64), cap)
    n = cells["n"].to_numpy(dtype=np.int64)
    if np.any(k < 1) or np.any(n < k):
        raise ValueError("each row needs 1 <= k <= n")
    cell = pd.factorize(cells["cell"])[0]
    # Exact integers: int64 while the numerator and the denominator fit, else Python integers.
    largest = int(n.max()) if n.size else 0
    exact = object if max(GRID * cap * largest * spread, largest * max(largest, spread)) >= 2**62 else np.int64
    k, n = k.astype(exact), n.astype(exact)
    out = []
    for b in bounds:
        numerator = GRID * k * np.maximum(n - b, 0) * spread
        terms = numerator // (n * np.maximum(n - first, spread)) if spread else np.zeros(n.size, dtype=exact)
        sums = np.zeros(int(cell.max()) + 1 if cell.size else 0, dtype=exact)
        np.add.at(sums, cell, terms)
        out.append(int(sum(int(v) * int(v) for v in sums)))
    return out


@dataclass(frozen=True)
class ErrorModel:
    """The public side of the quality: how many count tables share the bias (T), how many of a
    user's records per cell the bias counts (c), and the release's total noise variance (summed
    over every cell of every table) at each candidate bound."""

    tables: int
    records_per_cell: int
    noise_variance: tuple[Fraction, ...]

    def __post_init__(self):
        for name in ("tables", "records_per_cell"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"the error model's {name} must be an integer >= 1, got {value!r}")
        noise = tuple(Fraction(v) for v in self.noise_variance)
        if not noise or any(v < 0 for v in noise):
            raise ValueError("the error model needs a non-negative noise variance per candidate")
        object.__setattr__(self, "noise_variance", noise)


def _sqrt_up(value: Fraction) -> Fraction:
    """√value rounded up to the grid 1/SCALE, exactly: the least m/SCALE with m² ≥ value·SCALE²."""
    scaled = math.ceil(value * SCALE * SCALE)
    root = math.isqrt(scaled)
    return Fraction(root if root * root == scaled else root + 1, SCALE)


def _checked(norms: Sequence[int], candidates: Sequence[int], model: ErrorModel) -> np.ndarray:
    bounds = candidates_checked(candidates)
    if len(norms) != bounds.size or len(model.noise_variance) != bounds.size:
        raise ValueError(f"{bounds.size} candidates need as many squared norms and noise variances, got "
                         f"{len(norms)} and {len(model.noise_variance)}")
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 for v in norms):
        raise ValueError("the squared bias norms must be non-negative integers")
    return bounds


def quality(norms: Sequence[int], candidates: Sequence[int], model: ErrorModel) -> np.ndarray:
    """q(b) = −√(‖B(b)‖² + N(b)), rounded up to the grid 1/SCALE: minus the root of the release's
    total squared error at bound b, bias (``norms``, in GRID² units) plus noise (N, public).

    Exact Fractions (an object array), as for DPSense: rounded doubles could move a score by more
    than the sensitivity the mechanism is given."""
    _checked(norms, candidates, model)
    return np.array([-_sqrt_up(Fraction(int(s), GRID * GRID) + noise)
                     for s, noise in zip(norms, model.noise_variance)], dtype=object)


def quality_sensitivity(candidates: Sequence[int], model: ErrorModel) -> Fraction:
    """Δq = √(T·c·(b_K − b_1)) + 1/SCALE, rounded up to the grid: one user adds to each table's
    bias vector a vector of terms each at most c and summing to at most b_K − b_1, so of norm at
    most √(c·(b_K − b_1)); √(x² + N) is 1-Lipschitz in x; the rounding adds less than 1/SCALE."""
    bounds = candidates_checked(candidates)
    spread = int(bounds[-1] - bounds[0])
    return _sqrt_up(Fraction(model.tables * model.records_per_cell * spread)) + Fraction(1, SCALE)


def choose_bound(norms: Sequence[int], candidates: Sequence[int], model: ErrorModel, epsilon: Fraction,
                 budget: Budget, rng: RandomSource, step: str = "bound") -> int:
    """One candidate bound, drawn with the exact exponential mechanism at P(b) ∝ exp(ε·q(b)/Δq)
    (the monotone case), spent through ``budget`` under ``step``. ``epsilon`` is the choice's part
    of the split; the mechanism runs at core.zcdp.selection_epsilon of it (twice it under zCDP, a
    bounded-range step)."""
    bounds = _checked(norms, candidates, model)
    sensitivity = quality_sensitivity(bounds, model)
    scores = quality(norms, bounds, model)
    entry = selection_entry(step, "exponential mechanism (monotone quality)", epsilon, sensitivity, bounds.size,
                            budget.zcdp, monotone=True)
    return int(bounds[budget.exponential_mechanism(entry, rng, scores, monotone=True)])
