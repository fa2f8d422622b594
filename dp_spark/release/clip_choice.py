"""The clipping range of sums and means chosen privately: the public side, pure Python.

Input: one value per user, the value of one record drawn uniformly from the user's usable
records (io.validation's per-user sample, in the validation pass), so that adding or removing a
user adds or removes one value at most. For each public candidate b, the ranks #{v < b} and
#{v ≤ b} of those n values (aggregates.value_ranks; NOT private, read only here).

1. A discrete Laplace count N̂ of the users (sensitivity 1) sets the tail q, the least share of
   the values a quantile mechanism at ε can place with probability ≥ 1 − β over the K candidates:
   q = 2·(ln K + ln 1/β)/(ε·N̂), within [1/100, 1/4] (``tail_share``). At a million users this is
   the 1% floor; at 3,000 users and ε = 0.045 it is about 15%: a rarer tail is below what the
   mechanism can tell from an empty one, and asking for it lets the choice fall anywhere in the
   wide default grid.
2. low: the exponential mechanism over the candidates below the largest (or below a given high),
   with the quality of b as the q-quantile of the values each rounded down to those candidates
   and clamped to them (``rounded_ranks``, ``quantile_scores``): −max(0, #{v < b} − q·n,
   q·n − #{v < b⁺}) for the next candidate b⁺, with n for the last candidate's second count and 0
   for the first's first; zero at the candidate just below the q-quantile. Every rounded value
   is a candidate, so on a grid coarser than the values, and on values all equal or beyond the
   candidates, some candidate always scores 0. Adding a user with value v moves n by one and
   each count by at most one, in the same direction as q·n, so each of the two terms by at most
   max(q, 1 − q) and the quality by at most that, ≤ 1 (the clamped ends are constants or n).
3. high: the same over the candidates above low at 1 − q, the values rounded up to them and
   clamped: −max(0, #{v ≤ b⁻} − (1 − q)·n, (1 − q)·n − #{v ≤ b}) for the previous candidate b⁻
   (0 for the first; n for the last's second count), zero at the candidate just above the
   (1 − q)-quantile. The clamp matters: without it, values all on the chosen low (flags of 0 and
   1, a constant) left every candidate above low one tail short, and high fell anywhere up to
   8·10^8 (a review's finding; tests/test_clip_choice.py).

Each step is DP on its own; q and the second step's candidates are post-processing of the first
steps' outputs, so the three compose (sequentially, adaptively). The claim: docs/value_sums.md,
"Privacy claim: value_sums, means".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dp_spark.core import zcdp
from dp_spark.core.clip_range import ClipRange
from dp_spark.core.ledger import Budget, LedgerEntry, selection_entry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError

# The default candidates: 0 and ±{1, 1.5, 2, 3, 4, 5, 6, 8}·10^k for k = −2 to 8, 177 values from
# −8·10^8 to 8·10^8, neighbours at most a factor 1.5 apart away from 0 (round numbers, so that a
# range such as ratings' [1, 5] or [0.5, 5] can be found exactly).
MANTISSAS = ("1", "1.5", "2", "3", "4", "5", "6", "8")
DEFAULT_CANDIDATES = tuple(sorted({0.0} | {sign * float(f"{m}e{k}") for sign in (1, -1) for m in MANTISSAS
                                          for k in range(-2, 9)}))
MAX_CANDIDATES = 200
SHARE = Fraction(1, 10)  # of ε, for the choice (as for a privately chosen l)
USER_COUNT_SHARE = Fraction(1, 10)  # of the choice's part, for N̂
TAIL_LEAST, TAIL_MOST = Fraction(1, 100), Fraction(1, 4)
MISS = 1 / 100  # β: at most this chance of a pick where the tail is empty (a range far too wide)
TAIL_GRID = 1000  # q is rounded up to a multiple of 1/1000, so that the scores stay short fractions


def candidates_checked(values: Sequence[float]) -> tuple[float, ...]:
    """Distinct finite numbers in increasing order, from 2 to MAX_CANDIDATES of them."""
    checked = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            raise ValueError(f"the clipping candidates must be finite numbers, got {value!r}")
        checked.append(float(value))
    if list(checked) != sorted(set(checked)):
        raise ValueError("the clipping candidates must be distinct and in increasing order")
    if not 2 <= len(checked) <= MAX_CANDIDATES:
        raise ValueError(f"give from 2 to {MAX_CANDIDATES} clipping candidates, got {len(checked)}")
    return tuple(checked)


def parts(epsilon: Fraction, zcdp_accounting: bool, sides: int) -> tuple[Fraction, Fraction]:
    """(the user count's ε, each side's share) of the choice's part ``epsilon``: USER_COUNT_SHARE
    for the count, the rest split between the ``sides`` (1 or 2) chosen; under zCDP the same
    shares of its ρ = ε²/2, each as the largest ε_k with ε_k²/2 within its share."""
    epsilon = Fraction(epsilon)
    side = (1 - USER_COUNT_SHARE) / sides
    if not zcdp_accounting:
        return epsilon * USER_COUNT_SHARE, epsilon * side
    rho = zcdp.pure_cost(epsilon)
    return zcdp.epsilon_for_rho(rho * USER_COUNT_SHARE), zcdp.epsilon_for_rho(rho * side)


def tail_share(users_noisy: int, mechanism_epsilon: Fraction, candidates: int) -> Fraction:
    """q from the noisy user count (post-processing): 2·(ln K + ln 1/β)/(ε·N̂) rounded up to the
    grid, within [TAIL_LEAST, TAIL_MOST]; TAIL_MOST when N̂ ≤ 0."""
    if users_noisy <= 0:
        return TAIL_MOST
    wanted = 2 * (math.log(candidates) + math.log(1 / MISS)) / (float(mechanism_epsilon) * users_noisy)
    q = Fraction(math.ceil(wanted * TAIL_GRID), TAIL_GRID)
    return min(max(q, TAIL_LEAST), TAIL_MOST)


def quantile_scores(below: Sequence[int], at_most: Sequence[int], values: int, q: Fraction) -> list[Fraction]:
    """The quality of each candidate as the q-quantile of ``values`` numbers, from how many are
    below it and at most it: −max(0, below − q·n, q·n − at_most), 0 at a q-quantile; its
    sensitivity is max(q, 1 − q) under adding or removing one value (the module). The values
    rounded to a side's candidates: ``below`` and ``at_most`` as :func:`rounded_ranks` gives them."""
    target = Fraction(q) * values
    return [-max(Fraction(0), int(b) - target, target - int(a)) for b, a in zip(below, at_most)]


def rounded_ranks(below: np.ndarray, at_most: np.ndarray, values: int, side: str) -> tuple[np.ndarray, np.ndarray]:
    """(below, at_most) of each of a side's candidates (consecutive ones of the grid, with their
    ranks) among the values rounded to those candidates and clamped to them: down for the "low"
    side (a value is at most b when below the next candidate; all n at most the last; none below
    the first, where the values under it are clamped), up for "high" (below b when at most the
    previous candidate; none below the first; all n at most the last, where the values above it
    are clamped). Every rounded value is then a candidate, so some candidate is a quantile."""
    if side == "low":
        lower = below.copy()
        lower[0] = 0
        return lower, np.append(below[1:], values)
    if side == "high":
        upper = at_most.copy()
        upper[-1] = values
        return np.insert(at_most[:-1], 0, 0), upper
    raise ValueError(f"side must be \"low\" or \"high\", got {side!r}")


@dataclass(frozen=True)
class ClipChoice:
    """What the choice releases (DP outputs): the range, the noisy user count and the tail q."""

    low: float
    high: float
    users_noisy: int
    tail: Fraction

    def to_json(self) -> dict:
        """privacy.json's ``algorithm.chosen``, next to a chosen l's."""
        return {"low": self.low, "high": self.high, "clip_users_noisy": self.users_noisy,
                "clip_tail": float(self.tail)}


def _choose(candidates: Sequence[float], below: np.ndarray, at_most: np.ndarray, values: int, q: Fraction,
            share: Fraction, budget: Budget, rng: RandomSource, step: str) -> float:
    scores = quantile_scores(below, at_most, values, q)
    entry = selection_entry(step, "exponential mechanism", share, max(q, 1 - q), len(candidates), budget.zcdp)
    return float(candidates[budget.exponential_mechanism(entry, rng, scores)])


def choose_clip(candidates: Sequence[float], below: Sequence[int], at_most: Sequence[int], values: int,
                low: float | None, high: float | None, epsilon: Fraction, budget: Budget, rng: RandomSource
                ) -> ClipChoice:
    """The range with the choice's part ``epsilon``: each of ``low`` and ``high`` that is None is
    chosen (ledger steps "choose clip: users", "choose low", "choose high"), the other is the
    public value given. ``below[i]`` and ``at_most[i]`` count the ``values`` per-user values
    below and at most candidates[i] (NOT private: read only by the mechanisms)."""
    cands = np.asarray(candidates_checked(candidates))
    below, at_most = np.asarray(below, dtype=np.int64), np.asarray(at_most, dtype=np.int64)
    if not below.shape == at_most.shape == cands.shape:
        raise ValueError("give the ranks of every candidate")
    if low is not None and high is not None:
        raise ValueError("nothing to choose: low and high are both given")
    sides = (low is None) + (high is None)
    count_epsilon, share = parts(epsilon, budget.zcdp, sides)
    entry = LedgerEntry("choose clip: users", "discrete Laplace", count_epsilon, Fraction(1), 1 / count_epsilon, 1)
    users_noisy = int(values + budget.discrete_laplace(entry, rng)[0])
    # One tail for both sides, at the number of all candidates (each side has fewer).
    q = tail_share(users_noisy, zcdp.selection_epsilon(share, budget.zcdp), cands.size)
    # Each side rounds the values to its own candidates (consecutive ones of the grid), clamping
    # those beyond them: a given end, or all values on one candidate, then leaves no empty tail.
    if low is None:
        # Below the largest candidate, or below a given high, so that some candidate is left above.
        room = cands < (cands[-1] if high is None else high)
        lower, upper = rounded_ranks(below[room], at_most[room], values, "low")
        low = _choose(cands[room], lower, upper, values, q, share, budget, rng, "choose low")
    if high is None:
        room = cands > low
        lower, upper = rounded_ranks(below[room], at_most[room], values, "high")
        high = _choose(cands[room], lower, upper, values, 1 - q, share, budget, rng, "choose high")
    return ClipChoice(low, high, users_noisy, q)


AUTO = "auto"  # an end of the range given so is chosen here


def checked_ends(low: Any, high: Any, candidates: Any, steps: int, prefix: str = "algorithm."
                 ) -> tuple[float | None, float | None, tuple[float, ...]]:
    """A range with one end or both "auto", checked before anything is paid: (the given low or
    None, the given high or None, the candidates, DEFAULT_CANDIDATES unless given). Every range the
    choice can give must be a grid doubles hold (check_ranges). ``prefix``: the config keys' (the
    API's names have none)."""
    if candidates is None:
        candidates = DEFAULT_CANDIDATES
    elif not isinstance(candidates, (list, tuple)):
        raise ConfigError(f"{prefix}clip_candidates must be a list of numbers, got {candidates!r}")
    else:
        try:
            candidates = candidates_checked(candidates)
        except ValueError as e:
            raise ConfigError(f"{prefix}clip_candidates: {e}") from None
    given = {}
    for name, value in (("low", low), ("high", high)):
        if value == AUTO:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{prefix}{name} must be a finite number or \"{AUTO}\", got {value!r}")
        given[name] = float(value)
    # The ends the choice can give: a given end is that end alone.
    lows = [given["low"]] if "low" in given else [c for c in candidates if c < given.get("high", candidates[-1])]
    highs = [given["high"]] if "high" in given else [c for c in candidates if c > given.get("low", candidates[0])]
    if not lows or not highs:
        side = f"below {prefix}high" if not lows else f"above {prefix}low"
        raise ConfigError(f"{prefix}clip_candidates has no value {side}: the range cannot be chosen")
    try:
        check_ranges(tuple(lows), tuple(highs), steps)
    except ValueError as e:
        raise ConfigError(f"{prefix}clip_candidates: {e}") from None
    return given.get("low"), given.get("high"), tuple(candidates)


@functools.lru_cache(maxsize=16)
def check_ranges(lows: tuple[float, ...], highs: tuple[float, ...], steps: int) -> None:
    """Every range the choice can give must be a grid doubles hold: checked before the choice is
    paid for, not after (once per set of candidates: 15,000 ranges for the default)."""
    for low in lows:
        for high in highs:
            if high > low:
                ClipRange(low, high, steps)
