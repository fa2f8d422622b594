"""Choosing a per-user bound privately: the exponential mechanism over public candidate bounds,
with a quality that weighs the records the bound drops against the noise it brings (issue 30).

The bound is SRA's and HPA's ``l``, the baselines' ``m``: every user keeps at most ``b`` records,
and each count table is then released with noise of scale ``b/ε_t``. A small ``b`` drops the
records of heavy users (counts biased down); a large one makes every cell noisier. Looking at the
data to pick ``b`` is itself a release (ALGORITHMS.md §1.3), so it is chosen here with its own
share of ε, as DPSense chooses its θ (§4.2). The quality, its sensitivity and the argument:
docs/bound_selection.md, "Privacy claim: bound_selection".

Pure Python integers and Fractions over one aggregate the validation already makes:
``users_by_n``, the number of users with ``n`` records in the domain. That aggregate is NOT
private; it is read only inside the mechanism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np

from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.privacy import Budget, LedgerEntry

# Public defaults (docs/bound_selection.md, "Defaults"): powers of two up to 256, a tenth of ε,
# and the bias of a table taken to spread like its records over a quarter of its cells.
DEFAULT_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_SHARE = Fraction(1, 10)
DEFAULT_EFFECTIVE_SHARE = Fraction(1, 4)
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


@dataclass(frozen=True)
class TableNoise:
    """One count table the bound applies to, in public terms: its cells, its part of ε, and the
    number of cells its bias is taken to spread over (``effective_cells``: the inverse of Σ p²
    for the cells' shares p of the records, when those shares are the bias's)."""

    cells: int
    epsilon: Fraction
    effective_cells: Fraction

    def __post_init__(self):
        if isinstance(self.cells, bool) or not isinstance(self.cells, int) or self.cells < 1:
            raise ValueError(f"a table needs cells >= 1, got {self.cells!r}")
        if not Fraction(self.epsilon) > 0 or not Fraction(self.effective_cells) > 0:
            raise ValueError("a table's epsilon and effective cells must be > 0")
        object.__setattr__(self, "epsilon", Fraction(self.epsilon))
        object.__setattr__(self, "effective_cells", Fraction(self.effective_cells))


@dataclass(frozen=True)
class ErrorModel:
    """The public constants of the expected squared error at bound b:
    f(b) = bias_weight·Loss(b)² + noise_per_unit·b², summed over the tables."""

    bias_weight: Fraction  # Σ_t 1/effective_cells_t
    noise_per_unit: Fraction  # Σ_t 2·cells_t/ε_t²: Laplace variance 2(b/ε_t)² in each cell

    @classmethod
    def of(cls, tables: Sequence[TableNoise]) -> ErrorModel:
        if not tables:
            raise ValueError("the error model needs at least one table")
        return cls(sum((1 / t.effective_cells for t in tables), Fraction(0)),
                   sum((2 * t.cells / t.epsilon ** 2 for t in tables), Fraction(0)))


def truncation_loss(users_by_n: Mapping[int, int], candidates: Sequence[int]) -> list[int]:
    """Loss(b) = Σ_users max(min(n, b_K) − b, 0) for every candidate b: the records the bound
    drops, each user's count first capped at the largest candidate b_K (so one user moves any
    Loss(b) by at most b_K − b_1). Exact integers."""
    bounds = candidates_checked(candidates)
    top = int(bounds[-1])
    capped: dict[int, int] = {}
    for n, users in users_by_n.items():
        if int(n) < 0 or int(users) < 0:
            raise ValueError(f"users_by_n needs non-negative counts, got {n}: {users}")
        capped[min(int(n), top)] = capped.get(min(int(n), top), 0) + int(users)
    return [sum(max(n - int(b), 0) * users for n, users in capped.items()) for b in bounds]


def _sqrt_up(value: Fraction) -> Fraction:
    """√value rounded up to the grid 1/SCALE, exactly: the least m/SCALE with m² ≥ value·SCALE²."""
    scaled = math.ceil(value * SCALE * SCALE)
    root = math.isqrt(scaled)
    return Fraction(root if root * root == scaled else root + 1, SCALE)


def quality(users_by_n: Mapping[int, int], candidates: Sequence[int], model: ErrorModel) -> np.ndarray:
    """q(b) = −√f(b), rounded up to the grid 1/SCALE: minus a root-squared-error proxy of the
    release at bound b, with f(b) = bias_weight·Loss(b)² + noise_per_unit·b².

    Exact Fractions (an object array), as for DPSense: rounded doubles could move a score by more
    than the sensitivity the mechanism is given."""
    bounds = candidates_checked(candidates)
    return np.array([-_sqrt_up(model.bias_weight * lost * lost + model.noise_per_unit * int(b) * int(b))
                     for lost, b in zip(truncation_loss(users_by_n, bounds), bounds)], dtype=object)


def quality_sensitivity(candidates: Sequence[int], model: ErrorModel) -> Fraction:
    """Δq = √bias_weight·(b_K − b_1) + 1/SCALE, rounded up to the grid: √(A·L² + C) moves by at
    most √A per unit of L, one user moves every Loss(b) by at most b_K − b_1, and rounding up to
    the grid adds less than 1/SCALE."""
    bounds = candidates_checked(candidates)
    spread = int(bounds[-1] - bounds[0])
    return _sqrt_up(model.bias_weight * spread * spread) + Fraction(1, SCALE)


def choose_bound(users_by_n: Mapping[int, int], candidates: Sequence[int], model: ErrorModel,
                 epsilon: Fraction, budget: Budget, rng: RandomSource, step: str = "bound") -> int:
    """One candidate bound, drawn with the exact exponential mechanism at P(b) ∝ exp(ε·q(b)/Δq)
    (the monotone case), ``epsilon`` spent through ``budget`` under ``step``."""
    bounds = candidates_checked(candidates)
    sensitivity = quality_sensitivity(bounds, model)
    scores = quality(users_by_n, bounds, model)
    entry = LedgerEntry(step, "exponential mechanism (monotone quality)", Fraction(epsilon), sensitivity,
                        sensitivity / Fraction(epsilon), bounds.size)
    return int(bounds[budget.exponential_mechanism(entry, rng, scores, monotone=True)])
