"""Choosing a per-user bound privately: the exponential mechanism over public candidate bounds,
with a quality that weighs the bias the bound brings against the noise.

The bound is SRA's and HPA's ``l``, the baselines' ``m``: every user keeps at most ``b`` records,
and each count table is then released with noise that grows with ``b``. A small ``b`` drops the
records of heavy users (counts biased down); a large one makes every cell noisier. Looking at the
data to pick ``b`` is itself a release (specification §1.3), so it is chosen here with its own
share of ε, as DPSense chooses its θ (§4.2).

The quality measures the bias where it falls, cell by cell: for each candidate, the squared norm
of the vector of records the bound removes from each cell in expectation (SRA's uniform sample,
or HPA's most popular records by its noisy popularity),
each user's part capped at U records so that one user moves the norm by a bounded amount; U is
set from a DP count of the users, made first with a tenth of the choice's ε
(``choose_bound_by_users``). The noise side is
the exact noise variance of the release at that bound, a public number. The quality, its
sensitivity and the argument: docs/bound_selection.md, "Privacy claim: bound_selection".

This module is pure Python: the per-user terms (``bias_term``), the squared norms summed from
them over plain pandas data (``squared_bias_norms``, for the driver, tests and benchmarks; Spark
sums the same terms in ``release.bound_bias``), the quality and the mechanism. The norms are
NOT private; they are read only inside the mechanism.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.core import zcdp
from dp_spark.core.exact_roots import ceil_sqrt
from dp_spark.core.ledger import Budget, LedgerEntry, selection_entry
from dp_spark.core.mechanisms import RandomSource, exponential_probabilities

# Public defaults (docs/bound_selection.md, "Defaults"): bounds a factor of about √2 apart up to
# 256, and a tenth of ε for the choice.
DEFAULT_CANDIDATES = (1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)
DEFAULT_SHARE = Fraction(1, 10)
# The quality counts at most this many of a user's records per cell (unless the release caps
# them itself, with algorithm.records_per_item): it keeps one user's move of the bias norm at
# √(c·U) records (docs/bound_selection.md, "The quality").
QUALITY_RECORDS_PER_CELL = 1
# The user cap U, the most one user adds to the bias summed over the cells, is set from a DP
# count of the users (docs/bound_selection.md, "The user cap"): this share of the choice's part
# of ε (under zCDP, of its ρ) pays for the count, and U is b_K − b_1 when (κ·ε_mechanism·N̂)²
# reaches it, else the largest grid value at most that (the grid's least at least), with
# κ = USER_CAP_FACTOR: a small table at a small ε gets a small Δq, so that the mechanism's noise
# does not drown its scores. Candidates spread by no more than the grid's least value have no
# choice of U, and no count.
USER_COUNT_SHARE = Fraction(1, 10)
USER_CAP_FACTOR = Fraction(3, 5)
USER_CAP_GRID = (16, 23, 32, 45, 64, 91, 128, 181)
# Exact expectations over the count's noise leave out caps less likely than this.
LEAST_CAP_PROBABILITY = 1e-9
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


def bias_term(records: int, user_records: int, bound: int, first: int, user_cap: int, cap: int,
              through: int | None = None, tied: int | None = None) -> int:
    """One user's expected loss in one cell at ``bound``, in units of 1/GRID records, rounded down:

        ⌊GRID·min(k, c)·min(g, (t − b)⁺)·U / (g·max(n − b_1, U))⌋

    for a user with k = ``records`` in the cell and n = ``user_records`` in the domain, the
    smallest candidate b_1 = ``first`` ≤ b, U = ``user_cap``, c = ``cap``. t = ``through`` and
    g = ``tied`` say where the cell's records rank among the user's when the bound keeps the
    records of highest public score first (HPA's noisy popularity, ties at random): g records
    share the cell's score, t score at least as high. Keeping b records then drops min(g, (t − b)⁺)
    of those g, each alike, so the cell loses k·min(g, (t − b)⁺)/g in expectation. A uniform sample
    (SRA) ranks all n records alike: t = g = n (the default), and the loss is k·(n − b)⁺/n.

    The caps bound the user's part: each term is at most c, and a user with n − b_1 > U has every
    term scaled by U/(n − b_1), the same at every candidate, so that the terms sum to at most U."""
    if (through is None) != (tied is None):
        raise ValueError("a ranked term needs both through and tied")
    through = user_records if through is None else through
    tied = user_records if tied is None else tied
    dropped = min(tied, max(through - bound, 0))
    if dropped == 0 or user_cap == 0:
        return 0
    numerator = GRID * min(records, cap) * dropped * user_cap
    return numerator // (tied * max(user_records - first, user_cap))


def checked_user_cap(candidates: Sequence[int], user_cap: int | None) -> int:
    """U for these candidates: ``user_cap``, an integer from 1 (0 with one candidate) to b_K − b_1,
    or b_K − b_1 when None."""
    spread = int(candidates[-1]) - int(candidates[0])
    if user_cap is None:
        return spread
    if isinstance(user_cap, bool) or not isinstance(user_cap, (int, np.integer)) \
            or not min(1, spread) <= user_cap <= spread:
        raise ValueError(f"the user cap must be an integer from {min(1, spread)} to b_K - b_1 = {spread}, "
                         f"got {user_cap!r}")
    return int(user_cap)


def squared_bias_norms(cells: pd.DataFrame, candidates: Sequence[int], cap: int,
                       user_cap: int | None = None) -> list[int]:
    """Σ_j B_j(b)² for every candidate b, B_j(b) = Σ_u bias_term(k_uj, n_u, b, …): exact integers.

    ``cells``: one row per (user, cell) with ``user_id``, ``cell`` (any hashable key), ``k`` (the
    user's records in the cell) and ``n`` (the user's records in the domain), and, when the bound
    keeps the records of highest score first, ``t`` and ``g`` (bias_term's ``through`` and
    ``tied``; ``ranked_cells`` adds them); ``user_cap``: U (default b_K − b_1, the largest). The
    driver-side twin of ``release.bound_bias`` (tests hold them equal)."""
    bounds = [int(b) for b in candidates_checked(candidates)]
    first = bounds[0]
    u = checked_user_cap(bounds, user_cap)
    k = np.minimum(cells["k"].to_numpy(dtype=np.int64), cap)
    n = cells["n"].to_numpy(dtype=np.int64)
    ranked = "t" in cells.columns
    if ranked != ("g" in cells.columns):
        raise ValueError("ranked rows need both t and g")
    t = cells["t"].to_numpy(dtype=np.int64) if ranked else n
    g = cells["g"].to_numpy(dtype=np.int64) if ranked else n
    if np.any(k < 1) or np.any(n < k) or np.any(g < k) or np.any(t < g) or np.any(n < t):
        raise ValueError("each row needs 1 <= k <= g <= t <= n")
    cell = pd.factorize(cells["cell"])[0]
    # Exact integers: int64 while the numerator and the denominator fit, else Python integers.
    largest = int(n.max()) if n.size else 0
    exact = object if max(GRID * cap * largest * u, largest * max(largest, u)) >= 2**62 else np.int64
    k, n, t, g = (a.astype(exact) for a in (k, n, t, g))
    out = []
    for b in bounds:
        numerator = GRID * k * np.minimum(g, np.maximum(t - b, 0)) * u
        terms = numerator // (g * np.maximum(n - first, u)) if u else np.zeros(n.size, dtype=exact)
        sums = np.zeros(int(cell.max()) + 1 if cell.size else 0, dtype=exact)
        np.add.at(sums, cell, terms)
        out.append(int(sum(int(v) * int(v) for v in sums)))
    return out


def ranked_cells(cells: pd.DataFrame, item_of_cell: str, scores: Mapping) -> pd.DataFrame:
    """``cells`` (squared_bias_norms' rows) with ``t`` and ``g`` for a bound that keeps each user's
    records of highest score first: ``scores`` maps each item to its public score, and
    ``item_of_cell`` names the column of ``cells`` that holds the cell's item. A user's records of
    items of equal score tie (g of them); t counts those and the ones scored higher."""
    score = cells[item_of_cell].map(scores)
    if score.isna().any():
        raise ValueError("every cell's item needs a score")
    frame = cells.assign(_score=score.to_numpy())
    per_score = frame.groupby(["user_id", "_score"])["k"].sum().rename("g").reset_index()
    per_score = per_score.sort_values(["user_id", "_score"], ascending=[True, False])
    per_score["t"] = per_score.groupby("user_id")["g"].cumsum()
    return frame.merge(per_score, on=["user_id", "_score"]).drop(columns="_score")


@dataclass(frozen=True)
class ErrorModel:
    """The public side of the quality: the weight of each count table the quality scores (its
    squared bias norm and its noise are counted that many times; 1 each when every cell of every
    table counts alike, 0 for a table left out), how many of a user's records per cell the bias
    counts (c), the weighted noise variance Σ_t w_t·N_t(b) at each candidate bound (N_t summed
    over the table's cells), the user cap U (None: b_K − b_1; ``choose_bound_by_users`` sets it
    from a DP count of the users), and each table's number of cells (None: not bounded), which
    bounds a user's part of its bias norm when it is below U/c."""

    weights: tuple[Fraction, ...]
    records_per_cell: int
    noise_variance: tuple[Fraction, ...]
    user_cap: int | None = None
    cells: tuple[int, ...] | None = None

    def __post_init__(self):
        weights = tuple(Fraction(w) for w in self.weights) if isinstance(self.weights, (tuple, list)) else ()
        if not weights or any(w < 0 for w in weights) or not any(weights):
            raise ValueError(f"the error model needs a non-negative weight per table, one at least positive, got "
                             f"{self.weights!r}")
        object.__setattr__(self, "weights", weights)
        value = self.records_per_cell
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"the error model's records_per_cell must be an integer >= 1, got {value!r}")
        noise = tuple(Fraction(v) for v in self.noise_variance)
        if not noise or any(v < 0 for v in noise):
            raise ValueError("the error model needs a non-negative noise variance per candidate")
        object.__setattr__(self, "noise_variance", noise)
        if self.cells is not None:
            cells = tuple(self.cells)
            if len(cells) != len(weights) or any(isinstance(v, bool) or not isinstance(v, (int, np.integer))
                                                 or v < 1 for v in cells):
                raise ValueError(f"the error model needs an integer >= 1 of cells per table, got {self.cells!r}")
            object.__setattr__(self, "cells", tuple(int(v) for v in cells))

    def squared_reach(self, user_cap: int) -> Fraction:
        """Σ_t w_t·min(c·U, c²·cells_t): the most one user adds to the weighted squared bias norm
        at user cap U (each of the user's terms is at most c and they sum to at most U, so their
        squares sum to at most c·U, and to at most c² times the cells they fall in)."""
        c = self.records_per_cell
        if self.cells is None:
            return self.total_weight * c * user_cap
        return sum((w * min(c * user_cap, c * c * size) for w, size in zip(self.weights, self.cells)), Fraction(0))

    @property
    def tables(self) -> int:
        """How many count tables the quality scores (a weight above 0)."""
        return sum(1 for w in self.weights if w)

    @property
    def total_weight(self) -> Fraction:
        """W = Σ_t w_t, which sets the sensitivity (T, the number of tables, when each weighs 1)."""
        return sum(self.weights, Fraction(0))


def weighted_norms(per_table: Sequence[Sequence[int]], weights: Sequence[Fraction]) -> list[Fraction]:
    """Σ_t w_t·‖B_t(b)‖² at each candidate, from each table's squared norms (exact rationals)."""
    if len(per_table) != len(weights):
        raise ValueError(f"{len(weights)} weights need as many tables of norms, got {len(per_table)}")
    return [sum((Fraction(w) * int(norms[i]) for w, norms in zip(weights, per_table) if w), Fraction(0))
            for i in range(len(per_table[0]) if per_table else 0)]


def _sqrt_up(value: Fraction) -> Fraction:
    """√value rounded up to the grid 1/SCALE, exactly: the least m/SCALE with m² ≥ value·SCALE²."""
    return Fraction(ceil_sqrt(value * SCALE * SCALE), SCALE)


def _checked(norms: Sequence[int | Fraction], candidates: Sequence[int], model: ErrorModel) -> np.ndarray:
    bounds = candidates_checked(candidates)
    checked_user_cap(bounds, model.user_cap)
    if len(norms) != bounds.size or len(model.noise_variance) != bounds.size:
        raise ValueError(f"{bounds.size} candidates need as many squared norms and noise variances, got "
                         f"{len(norms)} and {len(model.noise_variance)}")
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer, Fraction)) or v < 0 for v in norms):
        raise ValueError("the squared bias norms must be non-negative integers or fractions")
    return bounds


def quality(norms: Sequence[int | Fraction], candidates: Sequence[int], model: ErrorModel) -> np.ndarray:
    """q(b) = −√(‖B(b)‖² + N(b)), rounded up to the grid 1/SCALE: minus the root of the release's
    squared error at bound b, each table weighted as the model says: bias (``norms``, Σ_t w_t·‖B_t‖²
    in GRID² units) plus noise (N = Σ_t w_t·N_t, public).

    Exact Fractions (an object array), as for DPSense: rounded doubles could move a score by more
    than the sensitivity the mechanism is given."""
    _checked(norms, candidates, model)
    return np.array([-_sqrt_up(Fraction(s) / (GRID * GRID) + noise)
                     for s, noise in zip(norms, model.noise_variance)], dtype=object)


def quality_sensitivity(candidates: Sequence[int], model: ErrorModel) -> Fraction:
    """Δq = √(Σ_t w_t·min(c·U, c²·cells_t)) + 1/SCALE, rounded up to the grid (√(W·c·U) when no
    table has fewer than U/c cells, W = Σ_t w_t): one user adds to each table's bias vector a
    vector of terms each at most c and summing to at most U, so of squared norm at most c·U, and at
    most c² times the table's cells; to the tables' vectors scaled by √w_t, stacked, one of norm at
    most the root of the weighted sum (ErrorModel.squared_reach); √(x² + N) is 1-Lipschitz in x;
    the rounding adds less than 1/SCALE."""
    bounds = candidates_checked(candidates)
    user_cap = checked_user_cap(bounds, model.user_cap)
    return _sqrt_up(model.squared_reach(user_cap)) + Fraction(1, SCALE)


def choose_bound(norms: Sequence[int | Fraction], candidates: Sequence[int], model: ErrorModel, epsilon: Fraction,
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


# ---------------------------------------------------------------------------
# The user cap from a DP count of the users, and the whole choice.


@dataclass(frozen=True)
class BoundChoice:
    """What the choice releases (DP outputs): the bound, the noisy count of users with a record
    in the domain (None when the candidates leave no choice of U), and the user cap U the quality
    used (post-processing of the count)."""

    bound: int
    users_noisy: int | None
    user_cap: int

    def to_json(self, bound_name: str) -> dict:
        """privacy.json's ``algorithm.chosen``."""
        counted = {} if self.users_noisy is None else {"users_noisy": self.users_noisy}
        return {bound_name: self.bound, **counted, "user_cap": self.user_cap}


def counts_users(candidates: Sequence[int]) -> bool:
    """Whether the choice counts the users: only when some cap of the grid is below b_K − b_1."""
    bounds = candidates_checked(candidates)
    return int(bounds[-1] - bounds[0]) > USER_CAP_GRID[0]


def choice_parts(epsilon: Fraction, zcdp_accounting: bool, candidates: Sequence[int]) -> tuple[Fraction | None,
                                                                                               Fraction]:
    """(the user count's ε, the mechanism's share) of the choice's part ``epsilon``: USER_COUNT_SHARE
    of it and the rest, under zCDP of its ρ = ε²/2 (each ε_k ≤ √(2ρ_k), rounded down); (None,
    ``epsilon``) when the candidates leave no choice of U (:func:`counts_users`)."""
    epsilon = Fraction(epsilon)
    if not counts_users(candidates):
        return None, epsilon
    if not zcdp_accounting:
        return epsilon * USER_COUNT_SHARE, epsilon * (1 - USER_COUNT_SHARE)
    rho = zcdp.pure_cost(epsilon)
    return zcdp.epsilon_for_rho(rho * USER_COUNT_SHARE), zcdp.epsilon_for_rho(rho * (1 - USER_COUNT_SHARE))


def user_cap(users_noisy: int, mechanism_epsilon: Fraction, candidates: Sequence[int]) -> int:
    """U from the noisy user count N̂: b_K − b_1 when (κ·ε·N̂)² reaches it, else the largest value
    of USER_CAP_GRID at most (κ·ε·N̂)² (its first value at least, and b_K − b_1 at most). Exact
    rationals, so that the same count always gives the same cap. ε is the mechanism's, as it
    runs (core.zcdp.selection_epsilon)."""
    bounds = candidates_checked(candidates)
    spread = int(bounds[-1] - bounds[0])
    grid = [g for g in USER_CAP_GRID if g < spread]
    target = (USER_CAP_FACTOR * Fraction(mechanism_epsilon) * max(int(users_noisy), 0)) ** 2
    if not grid or target >= spread:
        return spread
    return max([g for g in grid if g <= target], default=grid[0])


def user_cap_probabilities(users: int, count_epsilon: Fraction | None, mechanism_epsilon: Fraction,
                           candidates: Sequence[int]) -> dict[int, float]:
    """P(U = u) for every cap the choice can use on a table of ``users`` users, over the discrete
    Laplace noise (scale 1/``count_epsilon``) of the count: for tune and the benchmarks' exact
    expectation. U is monotone in N̂, so U ≥ u exactly when N̂ reaches the least count giving u.
    Without a count (``count_epsilon`` None) U is b_K − b_1."""
    bounds = candidates_checked(candidates)
    spread = int(bounds[-1] - bounds[0])
    if count_epsilon is None:
        return {spread: 1.0}
    caps = sorted({spread} | {g for g in USER_CAP_GRID if g < spread})  # every value user_cap can take
    r = math.exp(-float(count_epsilon))

    def at_least(t: int) -> float:  # P(users + Z >= t), Z discrete Laplace: P(Z = z) ∝ r^|z|
        z = t - users
        return r**z / (1 + r) if z >= 1 else 1 - r ** (1 - z) / (1 + r)

    def least_count(u: int) -> int:  # the least N̂ whose cap is at least u
        low, high = 0, 1
        while user_cap(high, mechanism_epsilon, bounds) < u:
            high *= 2
        while low < high:
            middle = (low + high) // 2
            low, high = (middle + 1, high) if user_cap(middle, mechanism_epsilon, bounds) < u else (low, middle)
        return low

    tails = [at_least(least_count(u)) if i else 1.0 for i, u in enumerate(caps)] + [0.0]
    return {u: tails[i] - tails[i + 1] for i, u in enumerate(caps) if tails[i] - tails[i + 1] > 0}


def pick_probabilities(norms_at: Callable[[int], Sequence[int | Fraction]], users: int, candidates: Sequence[int],
                       model: ErrorModel, epsilon: Fraction, zcdp_accounting: bool,
                       least: float = LEAST_CAP_PROBABILITY) -> np.ndarray:
    """P(choose_bound_by_users picks each candidate) on a table of ``users`` users, mixed over the
    user caps the count can give (caps less likely than ``least`` left out, the rest rescaled):
    for tune and the benchmarks (NOT private: reads the norms)."""
    bounds = candidates_checked(candidates)
    count_epsilon, share = choice_parts(epsilon, zcdp_accounting, bounds)
    at = zcdp.selection_epsilon(share, zcdp_accounting)
    caps = {u: p for u, p in user_cap_probabilities(users, count_epsilon, at, bounds).items() if p >= least}
    total = sum(caps.values())
    picks = np.zeros(bounds.size)
    for cap, p in caps.items():
        at_cap = replace(model, user_cap=cap)
        scores = np.asarray(quality(norms_at(cap), bounds, at_cap), dtype=float)
        picks += p / total * exponential_probabilities(scores, at, quality_sensitivity(bounds, at_cap), monotone=True)
    return picks


def choose_bound_by_users(norms_at: Callable[[int], Sequence[int | Fraction]], users: int, candidates: Sequence[int],
                          model: ErrorModel, epsilon: Fraction, budget: Budget, rng: RandomSource,
                          step: str = "bound") -> BoundChoice:
    """The whole private choice with the choice's part ``epsilon``: a discrete Laplace count of the
    ``users`` (sensitivity 1, ledger step "<step>: users"), the user cap U from it (post-processing),
    then choose_bound over ``norms_at(U)`` (the squared bias norms at cap U) with the rest. Without
    a choice of U (:func:`counts_users`) no count: U = b_K − b_1 and the mechanism has it all."""
    bounds = candidates_checked(candidates)
    count_epsilon, share = choice_parts(epsilon, budget.zcdp, bounds)
    users_noisy = None
    if count_epsilon is not None:
        entry = LedgerEntry(f"{step}: users", "discrete Laplace", count_epsilon, Fraction(1), 1 / count_epsilon, 1)
        users_noisy = int(users + budget.discrete_laplace(entry, rng)[0])
    cap = (checked_user_cap(bounds, None) if users_noisy is None
           else user_cap(users_noisy, zcdp.selection_epsilon(share, budget.zcdp), bounds))
    bound = choose_bound(norms_at(cap), bounds, replace(model, user_cap=cap), share, budget, rng, step=step)
    return BoundChoice(bound, users_noisy, cap)
