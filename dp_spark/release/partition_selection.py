"""Private partition selection: which keys (items) to release when no public list of them is
given.

A Spark ``groupBy(item)`` returns only the keys present in the data, so the key set itself
leaks (specification §1.2): one user with a rare item adds that item. Partition selection
releases a key only with a probability that grows with the number of distinct users who
contributed it, calibrated so that the presence of a key is (ε, δ)-DP at the user level.

Mechanism: the optimal one-key mechanism of Desfontaines, Voss, Gipson and Mandayam
("Differentially private partition selection", PoPETs 2022), generalised to ``l0`` keys per user
the way PipelineDP and Google's library do: each user is first bounded to at most ``l0``
distinct keys; each key then gets (ε/l0, δ/l0), and a key with n users is released with
probability π(n), where π(0) = 0 and

    π(n) = min( e^ε'·π(n−1) + δ',  1 − e^−ε'·(1 − π(n−1) − δ'),  1 ),   ε' = ε/l0, δ' = δ/l0.

π is the largest release probability that meets both (ε', δ') constraints between n − 1 and n
users, so among per-key mechanisms it needs the fewest users before a key shows up. Discrete
Laplace thresholding at the same per-key budget is dominated by it (at ε = 1, δ = 1e-6, l0 = 30
it needs about a quarter more users for an even chance of release; docs/partition_selection.md).

Exactness: π is computed in integers on the grid 2^-62 with e^ε' replaced by a rational lower
bound and every step rounded down. Both constraints hold exactly for the rounded table (the
argument is in the doc), and each key's Bernoulli(π(n)) is drawn exactly by
:meth:`dp_spark.core.ledger.Budget.bernoulli_dyadic`, no floating point anywhere.

Pure numpy, Fractions and ints; the user counts per key come from
:mod:`dp_spark.aggregates.key_users`, the whole path from :mod:`dp_spark.release.private_keys`.

Under zCDP accounting a second rule is available: discrete Gaussian noise on each
key's user count and a threshold τ (:class:`GaussianSelection`). Its noise is paid by the counts'
L2 sensitivity √l0, not l0, so for larger l0 it needs far fewer users than the optimal pure rule
at the same share of ρ; :func:`better_rule` picks, from public quantities, the rule whose median
count is lower.

Claim: docs/partition_selection.md, "Privacy claim: partition_selection" and "Privacy claim:
gaussian_selection".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dp_spark.core import zcdp
from dp_spark.core.accounting import as_epsilon
from dp_spark.core.discrete_gaussian import least_integer, tail_at_least, variance_at_least
from dp_spark.core.ledger import GAUSSIAN_MECHANISM, Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError

GRID_BITS = 62  # release probabilities are multiples of 2^-62 (bernoulli_dyadic draws them exactly)
ONE = 1 << GRID_BITS
_EXP_BITS = 64  # the lower bound of e^ε' is a multiple of 2^-64
# Steps of the recursion before every larger count is released for sure; ε' = 1e-4 with δ' = 1e-10
# takes about 5e5. Beyond this the table would take minutes to build: refuse such a budget.
MAX_TABLE = 5_000_000


@dataclass(frozen=True)
class SelectionParams:
    """The public parameters of partition selection: the total ε and δ it spends, and ``l0``, the
    most distinct keys a user may contribute to (each user is bounded to it before counting)."""

    epsilon: Fraction
    delta: float
    l0: int

    def __post_init__(self):
        object.__setattr__(self, "epsilon", as_epsilon(self.epsilon, "partition selection epsilon"))
        if isinstance(self.delta, bool) or not isinstance(self.delta, (int, float)) or not 0 < self.delta < 1:
            raise ConfigError(f"partition selection delta must be a number in (0, 1), got {self.delta!r}")
        object.__setattr__(self, "delta", float(self.delta))
        if isinstance(self.l0, bool) or not isinstance(self.l0, (int, np.integer)) or self.l0 < 1:
            raise ConfigError(f"partition selection l0 (distinct keys per user) must be an integer >= 1, "
                              f"got {self.l0!r}")
        object.__setattr__(self, "l0", int(self.l0))
        if _delta_units(self.delta, self.l0) == 0:
            raise ConfigError(f"partition selection delta = {self.delta:g} is too small for l0 = {self.l0}: "
                              f"delta/l0 must be at least 2^-{GRID_BITS}")

    @property
    def key_epsilon(self) -> Fraction:
        """ε' = ε/l0, each key's share."""
        return self.epsilon / self.l0

    @property
    def key_delta(self) -> Fraction:
        """δ' = δ/l0, each key's share (exact: the double δ's own value over l0)."""
        return Fraction(self.delta) / self.l0


def _delta_units(delta: float, l0: int) -> int:
    """⌊δ'·2^62⌋: δ' rounded down onto the grid (a smaller δ' only tightens the constraints)."""
    share = Fraction(delta) / l0
    return share.numerator * ONE // share.denominator


def exp_lower_bound(x: Fraction) -> Fraction:
    """A rational r with 1 ≤ r ≤ e^x, within about 2^-60 of it (relative), for x ≥ 0: a partial
    sum of e^x's series (every term is positive, so each partial sum is below e^x), rounded down
    to a multiple of 2^-64."""
    x = Fraction(x)
    if x < 0:
        raise ValueError(f"x must be >= 0, got {x}")
    total, term, k = Fraction(1), Fraction(1), 0
    while True:
        k += 1
        term = term * x / k
        total += term
        if k > x and term * (1 << 72) < total:
            break
    scale = 1 << _EXP_BITS
    return Fraction(total.numerator * scale // total.denominator, scale)


@lru_cache(maxsize=64)
def _table(key_epsilon: Fraction, delta_units: int) -> tuple[int, ...]:
    """π(0), π(1), …, π(n*) in units of 2^-62, n* the first count released for sure."""
    r = exp_lower_bound(key_epsilon)
    up, down = r.numerator, r.denominator  # r = up/down ≥ 1
    table = [0]
    while table[-1] < ONE:
        if len(table) > MAX_TABLE:
            raise ConfigError(f"partition selection: epsilon/l0 = {float(key_epsilon):g} is too small for delta/l0 "
                              f"= {delta_units / ONE:g} (over {MAX_TABLE} users before a key is always released)")
        q = table[-1]
        grow = q * up // down + delta_units  # ⌊r·π⌋ + δ'
        rest = ONE - q - delta_units  # 1 − π − δ'; the second bound is 1 − rest/r, rounded down
        fill = ONE - (-(-rest * down // up)) if rest > 0 else ONE
        table.append(min(grow, fill, ONE))
    return tuple(table)


def release_table(params: SelectionParams) -> tuple[int, ...]:
    """π(n)·2^62 for n = 0 … threshold(params): every larger count is released with probability 1."""
    return _table(params.key_epsilon, _delta_units(params.delta, params.l0))


def threshold(params: SelectionParams) -> int:
    """The smallest user count that is always released (π = 1). Public: from ε, δ, l0 only."""
    return len(release_table(params)) - 1


def release_probability(params: SelectionParams, users: int) -> Fraction:
    """The exact probability that a key with ``users`` distinct (bounded) users is released."""
    if users < 0:
        raise ValueError(f"a user count must be >= 0, got {users}")
    table = release_table(params)
    return Fraction(table[min(int(users), len(table) - 1)], ONE)


def release_probabilities(params: SelectionParams, users) -> np.ndarray:
    """:func:`release_probability` for every entry of ``users``, as doubles."""
    table = np.array(release_table(params), dtype=np.uint64)
    counts = np.asarray(users, dtype=np.int64)
    if counts.size and counts.min() < 0:
        raise ValueError("user counts must be >= 0")
    return table[np.minimum(counts, table.size - 1)].astype(float) / ONE


def median_count(params: SelectionParams) -> int:
    """The smallest user count released with probability at least 1/2 (exact, from the table)."""
    return next(n for n, q in enumerate(release_table(params)) if 2 * q >= ONE)


def median_count_formula(params: SelectionParams) -> int:
    """A closed form for :func:`median_count`, for reading the table's behaviour: while π is
    small it grows as the first bound, π(n) = δ'·(e^{nε'} − 1)/(e^ε' − 1), until it reaches
    1/(1 + e^ε'); one more step of the second bound then takes it to e^ε'/(1 + e^ε') ≥ 1/2. So
    n ≈ 1 + ⌈ln(1 + (e^ε' − 1)/((1 + e^ε')·δ'))/ε'⌉, within one of the exact value
    (tests/test_partition_selection.py); for small ε' that is about (l0/ε)·ln(ε/(2δ))."""
    eps, delta = float(params.key_epsilon), float(params.key_delta)
    growth = math.expm1(eps)
    return 1 + math.ceil(math.log1p(growth / ((2 + growth) * delta)) / eps)


def mechanism_text(params: SelectionParams) -> str:
    """The ledger's description: everything in it is public."""
    return (f"partition selection, optimal per-key release probability (Desfontaines et al. 2022) at "
            f"epsilon/l0, delta/l0 per key, l0 = {params.l0}: one exact Bernoulli per key some user contributed; "
            f"keys with {threshold(params)} or more users always released")


def _candidates(keys, users) -> tuple[np.ndarray, np.ndarray]:
    """(keys, their user counts) as vectors of one length, the counts integers >= 0."""
    keys = np.asarray(keys)
    counts = np.asarray(users, dtype=np.int64)
    if keys.ndim != 1 or keys.shape != counts.shape:
        raise ValueError(f"keys and users must be vectors of one length, got {keys.shape} and {counts.shape}")
    if counts.size and counts.min() < 0:
        raise ValueError("user counts must be >= 0")
    return keys, counts


def select(keys, users, params: SelectionParams, budget: Budget, rng: RandomSource,
           step: str = "partition selection") -> np.ndarray:
    """The released keys, sorted: key i is kept with probability π(users[i]), independently.

    ``users[i]`` must count the distinct users of ``keys[i]`` after every user was bounded to at
    most ``params.l0`` distinct keys (:mod:`dp_spark.bounding.user_keys`); a key with 0 users is
    never released, so passing keys nobody contributed is harmless. ε and δ are spent through
    ``budget`` under ``step`` before anything is drawn."""
    keys, counts = _candidates(keys, users)
    table = np.array(release_table(params), dtype=np.uint64)
    numerators = table[np.minimum(counts, table.size - 1)]
    # Sensitivity: one user moves at most l0 keys' counts, each by one. cells = 0: the number of
    # candidate keys is found in the data and is not released.
    entry = LedgerEntry(step, mechanism_text(params), params.epsilon, Fraction(params.l0),
                        Fraction(params.l0) / params.epsilon, 0, delta=params.delta)
    released = budget.bernoulli_dyadic(entry, rng, numerators, GRID_BITS)
    return np.sort(keys[released], kind="stable")


@dataclass(frozen=True)
class GaussianSelection:
    """Partition selection by a Gaussian threshold (zCDP accounting): each key's bounded user count
    plus discrete Gaussian noise N_Z(0, σ²), released when at least ``threshold``. ``epsilon`` is the
    share of ρ it is paid from, handed out as ε with ε²/2 = ρ_p (core.zcdp.epsilon_for_rho); ``delta``
    the δ it spends outside zCDP; ``l0`` the distinct keys per user."""

    epsilon: Fraction
    delta: float
    l0: int

    def __post_init__(self):
        SelectionParams(self.epsilon, self.delta, self.l0)  # the same checks of ε, δ and l0
        object.__setattr__(self, "epsilon", Fraction(self.epsilon))

    @property
    def variance(self) -> Fraction:
        """σ² ≥ l0/ε²: one user moves at most l0 counts by one, an L2 sensitivity of √l0."""
        return variance_at_least(Fraction(self.l0) / self.epsilon ** 2)

    @property
    def rho(self) -> Fraction:
        return zcdp.gaussian_cost(self.l0, self.variance)

    @property
    def threshold(self) -> int:
        """The least τ ≥ 1 with l0·P(Z ≥ τ − 1) ≤ δ: a key only the added user holds (count 1) is
        released with probability P(Z ≥ τ − 1), and that user holds at most l0 of them."""
        return _gaussian_threshold(self.variance, self.l0, self.delta)

    def median_count(self) -> int:
        """The least user count released with probability at least 1/2: τ (P(Z ≥ 0) ≥ 1/2 > P(Z ≥ 1))."""
        return self.threshold


@lru_cache(maxsize=64)
def _gaussian_threshold(variance: Fraction, l0: int, delta: float) -> int:
    """The least τ ≥ 1 with l0·P(Z ≥ τ − 1) ≤ δ; P(Z ≥ m) falls as m grows. A relative margin of
    1e-6 keeps the tail's doubles on the safe side (beyond σ = 10,000 the tail is an upper bound)."""
    def small_enough(m: int) -> bool:
        return l0 * tail_at_least(m, variance) * (1 + 1e-6) <= delta
    return max(1, least_integer(small_enough) + 1)


def better_rule(epsilon: Fraction, delta: float, l0: int) -> str:
    """"gaussian" or "optimal": the rule whose median count (users a key needs for an even chance)
    is lower at the same share of ρ (ε²/2) and δ; public quantities only."""
    gaussian = GaussianSelection(epsilon, delta, l0).median_count()
    return "gaussian" if gaussian < median_count(SelectionParams(epsilon, delta, l0)) else "optimal"


def select_gaussian(keys, users, params: GaussianSelection, budget: Budget, rng: RandomSource,
                    step: str = "partition selection") -> np.ndarray:
    """The keys whose user count plus discrete Gaussian noise reaches ``params.threshold``, sorted.
    ``users`` as for :func:`select`; ρ and δ are spent through ``budget`` before anything is drawn."""
    keys, counts = _candidates(keys, users)
    variance, tau = params.variance, params.threshold
    text = (f"partition selection, {GAUSSIAN_MECHANISM} threshold: user count per key (at most l0 = {params.l0} "
            f"keys per user, L2 sensitivity sqrt(l0)) plus discrete Gaussian noise, released at {tau} or more")
    entry = LedgerEntry(step, text, Fraction(0), Fraction(params.l0), variance, 0, delta=params.delta,
                        rho=params.rho, l2_squared=Fraction(params.l0))
    noise = budget.discrete_gaussian_found(entry, rng, int(counts.size))
    released = (counts > 0) & (counts + noise >= tau)
    return np.sort(keys[released], kind="stable")
