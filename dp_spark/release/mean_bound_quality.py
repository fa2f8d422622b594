"""The means' quality for choosing l privately: at each candidate bound b, how many cells get a
mean worth reading (docs/value_sums.md, "Choosing l" and "Privacy claim: mean_bound_quality").

The counts score a bound by the records it drops; a mean barely moves when SRA's uniform sample
drops records, so for the means the quality counts the cells whose mean is likely published and
precise. Each cell's kept count K_j(b) = Σ_u min(k_uj, c)·min(n_u, b)/n_u is what SRA's sample
keeps of it in expectation; its usefulness is u_b(K) = p_b(K)·g_b(K):

* p_b(K): the chance that the noisy count K + Z exceeds the half-width h_b the release asks of it
  before it gives a mean (Z the count's noise, modelled continuous: Laplace of the same scale, or
  Gaussian of the same variance);
* g_b(K) = log⁺(1/r_b(K)): the nats by which the mean's squared error is below that of knowing
  only the range. r_b(K) = V_b/K² + 1/K is the mean's squared error over the range's half-width
  squared, at its worst for values in the range: the count's and the sum's noise,
  V_b = σ_C² + σ_S²/steps² records², over K², and the sample's own variance over K. In nats, a
  mean twice as precise adds the same to q whatever its error, so the choice weighs the ratios of
  the means' errors, the figure users compare bounds by.

q(b) = Σ_t w_t·Σ_j u_{t,b}(K_j), rounded down to a grid fine beside Δq. Both factors rise with K, and
adding a user raises every K_j, by at most c each and by at most min(n_u, b) in all, so q(b)
rises by at most Σ_t w_t·L_{t,b}·min(b, c·cells_t), L the Lipschitz constant of u_b (``lipschitz``):
monotone, Δq the largest of these over b plus the rounding and a bound on floating-point error.
Where b bounds a user's cells of up to c records each (the aggregate's groups per user), a user
adds at most c·b, and the reach takes r·b in place of b (``MeansErrorModel.records_per_bound``).

Pure numpy: the kept counts come from release.bound_bias.expected_kept (Spark) or
:func:`kept_counts` (pandas, its twin); they are NOT private, read only by the mechanism.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.core.ledger import Budget, selection_entry
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities
from dp_spark.release.bound_selection import candidates_checked

LAPLACE, GAUSSIAN = "laplace", "gaussian"
# Kept counts are integers in units of 1/GRID records (each user's term rounded down), so that
# Spark and pandas give the same numbers whatever the order of the sums.
GRID = 1024
# The quality is rounded down to a grid of a power of two at most 1/RESOLUTION of the largest
# reach (public), so that its steps stay small beside Δq at any ε; the rounding adds one step.
RESOLUTION = 1024
# Each cell's usefulness is some twenty floating-point operations from exact (each within 2^-53
# of a number at most 1) and math.fsum rounds each table's sum once, so CELL_SLACK per cell of
# weight 1, 400 times that error, bounds a quality's floating-point error; a table whose cells are
# not known (items selected privately) is taken at MAX_CELLS.
CELL_SLACK = Fraction(1, 2**40)
MAX_CELLS = 10**8
SPLITS = 1024  # the Lipschitz bound's pieces (``TableAtBound.lipschitz``)


@dataclass(frozen=True)
class TableAtBound:
    """One table of means at one candidate bound (public: the config and the bound): the count's
    noise (``noise``, LAPLACE with scale ``scale``, or GAUSSIAN with standard deviation
    ``scale``), the half-width ``threshold`` a noisy count must exceed before the release gives a
    mean, and ``variance`` = V = σ_C² + σ_S²/steps², the two noises in records²."""

    noise: str
    scale: float
    threshold: float
    variance: float

    def __post_init__(self):
        if self.noise not in (LAPLACE, GAUSSIAN):
            raise ValueError(f"the count's noise must be {LAPLACE!r} or {GAUSSIAN!r}, got {self.noise!r}")
        for name in ("scale", "threshold", "variance"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0) \
                    or (name != "threshold" and value == 0):
                raise ValueError(f"{name} must be a finite number >= 0 (scale and variance > 0), got {value!r}")

    def published(self, kept: np.ndarray) -> np.ndarray:
        """p(K) = P(K + Z > h), the count's noise Z continuous."""
        x = (self.threshold - np.asarray(kept, dtype=float)) / self.scale
        if self.noise == LAPLACE:
            return np.where(x >= 0, 0.5 * np.exp(-np.abs(x)), 1 - 0.5 * np.exp(-np.abs(x)))
        return 0.5 * _erfc(x / math.sqrt(2))

    def density(self, kept: np.ndarray) -> np.ndarray:
        """p′(K): the count noise's density at h − K."""
        x = (np.asarray(kept, dtype=float) - self.threshold) / self.scale
        if self.noise == LAPLACE:
            return np.exp(-np.abs(x)) / (2 * self.scale)
        return np.exp(-x * x / 2) / (self.scale * math.sqrt(2 * math.pi))

    def precision(self, kept: np.ndarray) -> np.ndarray:
        """g(K) = log⁺(1/r(K)), r(K) = V/K² + 1/K: the nats by which the mean's squared error is
        below the range's half-width squared (0 where it is not, and at K = 0)."""
        k = np.asarray(kept, dtype=float)
        safe = np.where(k > 0, k, 1.0)
        return np.where(k > 0, np.maximum(0.0, -np.log(self.variance / safe**2 + 1 / safe)), 0.0)

    def usefulness(self, kept: np.ndarray) -> np.ndarray:
        """u(K) = p(K)·g(K): non-negative and non-decreasing in K."""
        return self.published(kept) * self.precision(kept)

    def lipschitz(self) -> float:
        """An upper bound on u′(K) over K ≥ 0, u′ = p′·g + p·g′ (docs/value_sums.md, "Privacy
        claim: the means' choice of l"). g is 0 up to K0, where r = 1, then rises, with
        g′(K) = (2V + K)/(K·(V + K)) falling. On a piece [a, b] of a geometric split of [K0, T],
        p′·g ≤ p′(clamp(h, a, b))·g(b) (the density peaks at h) and p·g′ ≤ p(b)·g′(a). Above T,
        past the density's peak by 50 scales, g ≤ 2K/√V (log x ≤ x), K·p′(K) falls, so
        p′·g ≤ 2T·p′(T)/√V, and p·g′ ≤ g′(T)."""
        v = self.variance
        start = (1 + math.sqrt(1 + 4 * v)) / 2  # K0
        top = max(2 * self.threshold, start, self.scale) + 50 * self.scale
        points = np.geomspace(start, top, SPLITS + 1)
        a, b = points[:-1], points[1:]
        slope = (2 * v + points) / (points * (v + points))
        pieces = (self.density(np.clip(self.threshold, a, b)) * self.precision(b)
                  + self.published(b) * slope[:-1])
        tail = 2 * top * float(self.density(np.array([top]))[0]) / math.sqrt(v) + slope[-1]
        return float(max(pieces.max(), tail))


@dataclass(frozen=True)
class MeansErrorModel:
    """The public side of the quality: each scored table's weight and number of cells (None: not
    known before the release, as with privately selected items), the table at each candidate
    (``tables[t][i]``: table t at the i-th candidate), c, the most of a user's records per cell
    the kept counts count, and r (``records_per_bound``), the most records a user keeps per unit of
    the bound: 1 where the bound counts records (the means' l), c where it counts cells of up to c
    records each (the aggregate's groups per user), so that a user keeps at most r·b records."""

    weights: tuple[Fraction, ...]
    cells: tuple[int | None, ...]
    tables: tuple[tuple[TableAtBound, ...], ...]
    records_per_cell: int
    records_per_bound: int = 1

    def __post_init__(self):
        weights = tuple(Fraction(w) for w in self.weights)
        if not weights or any(w < 0 for w in weights) or not any(weights):
            raise ValueError(f"the means' error model needs a weight >= 0 per table, one above 0, got {self.weights!r}")
        object.__setattr__(self, "weights", weights)
        if len(self.cells) != len(weights) or len(self.tables) != len(weights):
            raise ValueError("the means' error model needs as many cell counts and tables as weights")
        if any(c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 1) for c in self.cells):
            raise ValueError(f"each table's cells must be an integer >= 1 or None, got {self.cells!r}")
        if len({len(at) for at in self.tables}) != 1:
            raise ValueError("every table needs a model at every candidate")
        for name in ("records_per_cell", "records_per_bound"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _bounds(candidates: Sequence[int] | np.ndarray) -> np.ndarray:
    return candidates_checked([int(b) for b in candidates])


def _erfc(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erfc, otypes=[float])(x)


def kept_counts(cells: pd.DataFrame, candidates: Sequence[int] | np.ndarray, cap: int,
                by_cells: bool = False) -> np.ndarray:
    """K_j(b) in units of 1/GRID records, one row per cell (in order of first appearance) and a
    column per candidate: Σ_u ⌊GRID·min(k, c)·min(n, b)/n⌋. ``cells``: a row per (user, cell)
    with ``cell``, ``k`` (the user's records in it) and ``n`` (the user's records in the domain),
    and, when the bound keeps each user's records of highest public score first (HPA), ``t`` and
    ``g`` (bound_selection.ranked_cells): the user keeps m = min(g, (b − (t − g))⁺) of the g
    records tied with the cell's, each alike, so the term is ⌊GRID·min(k, c)·m/g⌋ (t = g = n: the
    uniform sample's). Each term is at most GRID·c, and a user's terms add up to at most
    GRID·min(n, b) either way. ``by_cells``: the bound counts a user's cells rather than records
    (the aggregate's groups per user): n, t and g count the user's cells, k stays its records in
    the cell, and a user's terms add up to at most GRID·c·min(n, b). The pandas twin of
    release.bound_bias.expected_kept (tests hold them equal)."""
    bounds = _bounds(candidates)
    if ("t" in cells) != ("g" in cells):
        raise ValueError("a ranking needs both t and g")
    k = np.minimum(cells["k"].to_numpy(dtype=np.int64), cap)
    n = cells["n"].to_numpy(dtype=np.int64)
    t, g = (cells[c].to_numpy(dtype=np.int64) for c in ("t", "g")) if "t" in cells else (n, n)
    above_tied = np.zeros(k.size, dtype=bool) if by_cells else g < k  # by cells k is records, g cells: no order
    if np.any(k < 1) or np.any(above_tied) or np.any(g < 1) or np.any(t < g) or np.any(n < t):
        raise ValueError("each row needs 1 <= k <= g <= t <= n (k >= 1 and 1 <= g <= t <= n by cells)")
    index = pd.factorize(cells["cell"])[0]
    out = np.zeros((int(index.max()) + 1 if index.size else 0, bounds.size), dtype=np.int64)
    for i, b in enumerate(bounds):
        np.add.at(out[:, i], index, GRID * k * np.clip(b - (t - g), 0, g) // g)
    return out


def _checked(kept: Sequence[np.ndarray], candidates: Sequence[int] | np.ndarray, model: MeansErrorModel) -> np.ndarray:
    bounds = _bounds(candidates)
    if len(kept) != len(model.weights):
        raise ValueError(f"{len(model.weights)} tables need as many arrays of kept counts, got {len(kept)}")
    if len(model.tables[0]) != bounds.size:
        raise ValueError(f"{bounds.size} candidates need a model each, got {len(model.tables[0])}")
    for counts, cells in zip(kept, model.cells):
        if counts.ndim != 2 or counts.shape[1] != bounds.size or np.any(counts < 0):
            raise ValueError("each table's kept counts need a non-negative column per candidate")
        if counts.shape[0] > (cells or MAX_CELLS):
            raise ValueError(f"a table has {counts.shape[0]} cells with records, more than its {cells or MAX_CELLS}")
    return bounds


def step(candidates: Sequence[int] | np.ndarray, model: MeansErrorModel) -> Fraction:
    """The grid the quality is rounded to: the largest power of two at most the largest reach
    over RESOLUTION (public: the model)."""
    return Fraction(2) ** math.floor(math.log2(max(reach(candidates, model)) / RESOLUTION))


def quality(kept: Sequence[np.ndarray], candidates: Sequence[int] | np.ndarray, model: MeansErrorModel) -> np.ndarray:
    """q(b) = Σ_t w_t·Σ_j u_{t,b}(K_j) at each candidate, rounded down to :func:`step` (exact
    Fractions, an object array). ``kept``: each scored table's kept counts (GRID units), cells with
    records only (an empty cell's usefulness is 0 at every bound)."""
    bounds = _checked(kept, candidates, model)
    grid = step(bounds, model)
    out = []
    for i in range(bounds.size):
        total = math.fsum(float(w) * math.fsum(model.tables[t][i].usefulness(kept[t][:, i] / GRID))
                          for t, w in enumerate(model.weights) if w)
        out.append(math.floor(Fraction(total) / grid) * grid)
    return np.array(out, dtype=object)


def reach(candidates: Sequence[int] | np.ndarray, model: MeansErrorModel) -> list[float]:
    """Σ_t w_t·L_{t,b}·min(r·b, c·cells_t) at each candidate: the most one user moves q(b), before
    rounding (the user's terms sum to at most r·b, each at most c, in at most cells_t cells)."""
    bounds = _bounds(candidates)
    c, r = model.records_per_cell, model.records_per_bound
    return [sum(float(w) * model.tables[t][i].lipschitz() * min(r * int(b), c * (model.cells[t] or math.inf))
                for t, w in enumerate(model.weights) if w) for i, b in enumerate(bounds)]


def quality_sensitivity(candidates: Sequence[int] | np.ndarray, model: MeansErrorModel) -> Fraction:
    """Δq: the largest reach over the candidates rounded up to :func:`step`, one step more for the
    quality's rounding, and CELL_SLACK per cell and unit of weight for its floating point."""
    grid = step(candidates, model)
    slack = sum((w * (cells or MAX_CELLS) for w, cells in zip(model.weights, model.cells)), Fraction(0))
    # Two steps: the moves of neighbours' floored scores span at most the rounded reach plus one step
    # either way, and each side's floating-point error counts twice.
    return math.ceil(Fraction(max(reach(candidates, model))) / grid) * grid + 2 * grid + 4 * CELL_SLACK * slack


def choose_bound(kept: Sequence[np.ndarray], candidates: Sequence[int] | np.ndarray, model: MeansErrorModel,
                 epsilon: Fraction, budget: Budget, rng: RandomSource, step: str = "choose l") -> int:
    """One candidate, drawn with the exact exponential mechanism at P(b) ∝ exp(ε·q(b)/Δq) (the
    monotone case) and spent through ``budget`` under ``step``; ``epsilon`` is the choice's part
    of the split (under zCDP the mechanism runs at core.zcdp.selection_epsilon of it)."""
    bounds = _checked(kept, candidates, model)
    sensitivity = quality_sensitivity(bounds, model)
    scores = quality(kept, bounds, model)
    entry = selection_entry(step, "exponential mechanism (monotone quality)", epsilon, sensitivity, bounds.size,
                            budget.zcdp, monotone=True)
    return int(bounds[budget.exponential_mechanism(entry, rng, scores, monotone=True)])


def pick_probabilities(kept: Sequence[np.ndarray], candidates: Sequence[int] | np.ndarray, model: MeansErrorModel,
                       mechanism_epsilon: Fraction) -> np.ndarray:
    """P(choose_bound picks each candidate) with the mechanism at ``mechanism_epsilon``: for the
    benchmarks (NOT private: reads the kept counts)."""
    bounds = _checked(kept, candidates, model)
    return np.asarray(exponential_probabilities(quality(kept, bounds, model), mechanism_epsilon,
                                                float(quality_sensitivity(bounds, model)), monotone=True), dtype=float)
