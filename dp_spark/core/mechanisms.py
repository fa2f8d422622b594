"""Noise primitives, exact and pure numpy (specification §1.4).

Floating-point Laplace samplers leak the true value through the set of doubles
they can return (Mironov, CCS 2012). Integer counts therefore get *discrete*
Laplace noise, P(Z = z) ∝ exp(-|z|/b), drawn with the exact rejection sampler
of Canonne, Kamath and Steinke (NeurIPS 2020, Algorithms 1 and 2). The sampler
only compares uniform integers, so no rounding ever touches the distribution.
For an integer query with L1 sensitivity Δ, scale b = Δ/ε gives ε-DP.

Randomness comes from the operating system's CSPRNG (``os.urandom``). A fixed
seed switches to numpy's PCG64 for tests and reproducible experiments only;
the privacy report says when that happened.

The samplers are vectorised: every loop below runs over *rounds* of rejection,
each round handling all pending samples at once, so 160,000 draws take about a
tenth of a second.

The exponential mechanism is sampled exactly too (specification §1.4 asks for
exact arithmetic, or else a stated δ). Every score is read as the exact
rational it is (a double is m·2^e), the exponents x_i = c·(q* − q_i) are exact
rationals, and a uniformly proposed candidate is kept with an exact
Bernoulli(exp(−x_i)): the kept candidate has P(i) ∝ exp(c·q_i) with no
rounding anywhere, so the mechanism's pure ε-DP holds as proven, with δ = 0.

Claim: docs/mechanisms.md, "Privacy claim: RandomSource", "Privacy claim: bernoulli_exp_minus,
bernoulli_exp_minus_fraction", "Privacy claim: discrete_laplace, discrete_laplace_each", "Privacy
claim: exponential_mechanism", "Privacy claim: exponential_mechanism_rows",
"Privacy claim: bernoulli_dyadic".
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np

_U64_MAX = np.iinfo(np.uint64).max
# Scales are exact fractions t/s; the sampler multiplies t by small integers in
# uint64, so keep both parts well inside 63 bits.
_MAX_SCALE_PART = 1 << 40
_POOL_WORDS = 1 << 16
# Candidates the exponential mechanism proposes per round of rejection (see exponential_mechanism).
_PROPOSALS_PER_ROUND = 1024


class RandomSource:
    """A stream of uniform 64-bit words.

    ``seed=None`` (the default, and the only choice for a real release) reads
    the OS CSPRNG; an integer seed gives a reproducible PCG64 stream.
    """

    def __init__(self, seed: int | None = None):
        self.seeded = seed is not None
        self._bits = np.random.PCG64(seed) if self.seeded else None
        self._drop_pool()

    def _drop_pool(self) -> None:
        self._pool, self._pool_pid = np.empty(0, dtype=np.uint64), os.getpid()

    def __getstate__(self):
        # Words read from the OS must be used once: a copy of the pool elsewhere would repeat them.
        state = dict(self.__dict__)
        state["_pool"], state["_pool_pid"] = np.empty(0, dtype=np.uint64), None
        return state

    def words(self, n: int) -> np.ndarray:
        if self._bits is not None:
            return self._bits.random_raw(n).astype(np.uint64, copy=False)
        if self._pool_pid != os.getpid():  # unpickled, or inherited by a forked process
            self._drop_pool()
        # The samplers ask for many short runs of words; one read from the OS serves many of them
        # (a system call per run was about a quarter of the exact sampler's time).
        if n > self._pool.size:
            fresh = np.frombuffer(os.urandom(8 * max(n - self._pool.size, _POOL_WORDS)), dtype=np.uint64)
            self._pool = np.concatenate([self._pool, fresh])
        taken, self._pool = self._pool[:n], self._pool[n:]
        return taken

    def below(self, bounds: np.ndarray) -> np.ndarray:
        """One uniform integer in [0, bound) per entry of ``bounds`` (all ≥ 1).

        Exact: words under 2^64 mod bound are rejected, so the accepted range
        is a whole multiple of the bound.
        """
        bounds = np.asarray(bounds, dtype=np.uint64)
        if np.any(bounds == 0):
            raise ValueError("bounds must be positive")
        reject_under = (_U64_MAX - bounds + np.uint64(1)) % bounds
        first = self.words(bounds.size)
        ok = first >= reject_under
        if ok.all():  # nearly always: a bound far below 2^64 rejects a word with tiny probability
            return first % bounds
        out = np.empty(bounds.shape, dtype=np.uint64)
        out[ok] = first[ok] % bounds[ok]
        pending = np.flatnonzero(~ok)
        while pending.size:
            w = self.words(pending.size)
            ok = w >= reject_under[pending]
            done = pending[ok]
            out[done] = w[ok] % bounds[done]
            pending = pending[~ok]
        return out

    def below_int(self, bound: int) -> int:
        """One uniform integer in [0, bound) for a Python int ``bound`` ≥ 1 of any size.

        Exact: the low ``b`` bits of ⌈b/64⌉ words, b = bit length of bound − 1, are a
        uniform integer in [0, 2^b); values ≥ bound are rejected (each try is kept
        with probability above 1/2).
        """
        if not isinstance(bound, (int, np.integer)) or isinstance(bound, bool) or bound < 1:
            raise ValueError(f"bound must be a positive integer, got {bound!r}")
        bits = (int(bound) - 1).bit_length()
        if bits == 0:
            return 0
        mask, count = (1 << bits) - 1, -(-bits // 64)
        while True:
            value = int.from_bytes(self.words(count).astype("<u8").tobytes(), "little") & mask
            if value < bound:
                return value


def bernoulli_exp_minus(rng: RandomSource, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Exact Bernoulli(exp(-num/den)) per entry, for 0 ≤ num ≤ den.

    CKS Algorithm 1: draw A_k ~ Bernoulli(γ/k) for k = 1, 2, ... until the first
    failure K; then P(K odd) = Σ_k (-γ)^k / k! = exp(-γ).
    """
    num = np.asarray(num, dtype=np.uint64)
    den = np.asarray(den, dtype=np.uint64)
    first_failure = np.ones(num.shape, dtype=np.uint64)
    pending = np.arange(num.size)
    while pending.size:
        success = rng.below(den[pending] * first_failure[pending]) < num[pending]
        advanced = pending[success]
        first_failure[advanced] += np.uint64(1)
        pending = advanced
    return first_failure % np.uint64(2) == 1


def bernoulli_dyadic(rng: RandomSource, numerators, bits: int) -> np.ndarray:
    """Exact Bernoulli(numerators[i] / 2^bits) per entry, 0 ≤ numerator ≤ 2^bits, bits ≤ 62: a
    uniform integer below 2^bits is compared with the numerator, so a probability that is a
    multiple of 2^-bits is drawn with no rounding at all."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 62:
        raise ValueError(f"bits must be an integer in [1, 62], got {bits!r}")
    wanted = np.asarray(numerators)
    if wanted.dtype.kind not in "iu":  # Python ints of any size, or a list: checked one by one
        wanted = np.array([int(v) for v in wanted.ravel()], dtype=object)
    if wanted.size and (wanted.min() < 0 or wanted.max() > 1 << bits):
        raise ValueError(f"numerators must lie in [0, 2^{bits}]")
    wanted = wanted.astype(np.uint64).ravel()
    return rng.below(np.full(wanted.size, 1 << bits, dtype=np.uint64)) < wanted


def _geometric_exp_minus_one(rng: RandomSource, n: int) -> np.ndarray:
    """Number of successes of Bernoulli(exp(-1)) before the first failure."""
    ones = np.ones(n, dtype=np.uint64)
    successes = np.zeros(n, dtype=np.uint64)
    pending = np.arange(n)
    while pending.size:
        hit = bernoulli_exp_minus(rng, ones[: pending.size], ones[: pending.size])
        pending = pending[hit]
        successes[pending] += np.uint64(1)
    return successes


def as_scale(value: Fraction | int) -> Fraction:
    """Validate a noise scale b > 0 given as an exact fraction."""
    scale = Fraction(value)
    if scale <= 0:
        raise ValueError(f"noise scale must be positive, got {scale}")
    if scale.numerator >= _MAX_SCALE_PART or scale.denominator >= _MAX_SCALE_PART:
        raise ValueError(f"noise scale {scale} has too large a numerator or denominator")
    return scale


def scale_at_least(value: Fraction | int) -> Fraction:
    """``value`` itself when :func:`as_scale` accepts it, else the next multiple of
    2^-20 above it: more noise than asked for, never less."""
    scale = Fraction(value)
    if scale > 0 and (scale.numerator >= _MAX_SCALE_PART or scale.denominator >= _MAX_SCALE_PART):
        steps = -((-scale.numerator * 2**20) // scale.denominator)  # ceil(scale · 2^20)
        scale = Fraction(steps, 2**20)
    return as_scale(scale)


def discrete_laplace(rng: RandomSource, scale: Fraction | int, size: int) -> np.ndarray:
    """``size`` draws of the discrete Laplace with P(Z = z) ∝ exp(-|z|/scale)."""
    scale = as_scale(scale)
    return _discrete_laplace(rng, np.full(size, scale.numerator, dtype=np.uint64),
                             np.full(size, scale.denominator, dtype=np.uint64))


def discrete_laplace_each(rng: RandomSource, scales) -> np.ndarray:
    """One discrete Laplace draw per entry of ``scales`` (exact fractions), each
    with its own scale: for mechanisms that give cells different budgets."""
    checked = [as_scale(scale) for scale in scales]
    return _discrete_laplace(rng, np.array([c.numerator for c in checked], dtype=np.uint64),
                             np.array([c.denominator for c in checked], dtype=np.uint64))


def _discrete_laplace(rng: RandomSource, t: np.ndarray, s: np.ndarray) -> np.ndarray:
    """CKS Algorithm 2 with scale t/s per entry: U ~ Uniform{0..t-1} accepted with
    probability exp(-U/t); V ~ Geometric(1 - exp(-1)); X = U + tV is then
    geometric with ratio exp(-1/t), Y = ⌊X/s⌋ geometric with ratio exp(-s/t);
    a random sign, rejecting "-0", makes it two-sided.
    """
    out = np.empty(t.size, dtype=np.int64)
    pending = np.arange(t.size)
    while pending.size:
        n = pending.size
        tp, sp = t[pending], s[pending]
        u = rng.below(tp)
        keep_u = bernoulli_exp_minus(rng, u, tp)
        v = _geometric_exp_minus_one(rng, n)
        y = ((u + tp * v) // sp).astype(np.int64)
        negative = rng.below(np.full(n, 2, dtype=np.uint64)) == 1
        accepted = keep_u & ~(negative & (y == 0))
        out[pending[accepted]] = np.where(negative, -y, y)[accepted]
        pending = pending[~accepted]
    return out


def discrete_laplace_pmf(z: np.ndarray, scale: Fraction | float) -> np.ndarray:
    """The exact pmf the sampler targets (float, for tests and error bars)."""
    r = np.exp(-1.0 / float(scale))
    return (1 - r) / (1 + r) * r ** np.abs(np.asarray(z, dtype=float))


def discrete_laplace_variance(scale: Fraction | float) -> float:
    """Variance 2r/(1-r)^2 with r = exp(-1/scale)."""
    r = np.exp(-1.0 / float(scale))
    return 2 * r / (1 - r) ** 2


def exponential_probabilities(scores, epsilon: Fraction | float, sensitivity: float,
                              monotone: bool = False) -> np.ndarray:
    """The exponential mechanism's output distribution: P(i) ∝ exp(ε·q_i/(2Δq)).

    ``monotone``: when a neighbouring dataset moves every score in the same
    direction, exp(ε·q_i/Δq) is already ε-DP (McSherry and Talwar 2007), which
    sharpens the choice. In doubles, as log-sum-exp (scores in the millions are
    fine): for tests and error bars; :func:`exponential_mechanism` samples it exactly.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError("scores must be a non-empty vector of finite numbers")
    if sensitivity <= 0:
        raise ValueError(f"the quality sensitivity must be positive, got {sensitivity}")
    factor = float(epsilon) / float(sensitivity) / (1.0 if monotone else 2.0)
    weights = np.exp(factor * (scores - scores.max()))
    return weights / weights.sum()


def _exact_ratio(value) -> tuple[int, int]:
    """(numerator, denominator > 0) of a finite int, float or Fraction, with no rounding."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"a score must be a number, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value), 1
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ValueError(f"scores must be finite, got {value}")
        return float(value).as_integer_ratio()  # a double is m·2^e: this ratio is its exact value
    exact = Fraction(value)
    return exact.numerator, exact.denominator


def exponential_exponents(scores, epsilon: Fraction | float, sensitivity: Fraction | float,
                          monotone: bool = False) -> tuple[list[int], int]:
    """The exact exponents x_i = c·(q* − q_i) ≥ 0, c = ε/(2Δq) (ε/Δq when ``monotone``),
    as integer numerators over one common denominator: P(i) ∝ exp(−x_i).

    Scores may be ints, doubles or Fractions; each is taken at its exact value, so
    nothing here rounds (ε and Δq likewise: a float's exact value, a Fraction as is).
    """
    if isinstance(scores, np.ndarray) and scores.ndim != 1:
        raise ValueError("scores must be a vector")
    if isinstance(scores, np.ndarray) and scores.dtype.kind == "f":  # the common case, kept fast
        if not np.all(np.isfinite(scores)):
            raise ValueError("scores must be finite")
        ratios = [value.as_integer_ratio() for value in scores.tolist()]  # exact: a double is m·2^e
    else:
        ratios = [_exact_ratio(s) for s in (scores.tolist() if isinstance(scores, np.ndarray) else scores)]
    if not ratios:
        raise ValueError("scores must be a non-empty vector of finite numbers")
    epsilon, sensitivity = Fraction(*_exact_ratio(epsilon)), Fraction(*_exact_ratio(sensitivity))
    if epsilon <= 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    if sensitivity <= 0:
        raise ValueError(f"the quality sensitivity must be positive, got {sensitivity}")
    common = math.lcm(*(den for _, den in ratios))
    scaled = [num * (common // den) for num, den in ratios]  # q_i = scaled_i / common
    best = max(scaled)
    c = epsilon / sensitivity / (1 if monotone else 2)
    return [c.numerator * (best - s) for s in scaled], c.denominator * common


def _survive_whole_parts(rng: RandomSource, wholes: np.ndarray) -> np.ndarray:
    """Per entry, True with probability exp(−wholes[i]) exactly: wholes[i] (a Python int
    of any size) draws of Bernoulli(exp(−1)), stopping at the first failure."""
    alive = np.ones(wholes.size, dtype=bool)
    pending = np.flatnonzero(wholes > 0)
    rounds = 0
    while pending.size:
        ones = np.ones(pending.size, dtype=np.uint64)
        failed = ~bernoulli_exp_minus(rng, ones, ones)
        alive[pending[failed]] = False
        rounds += 1
        pending = pending[~failed]
        pending = pending[(wholes[pending] > rounds).astype(bool)]
    return alive


def _bernoulli_exp_minus_ratio(rng: RandomSource, num: int, den: int) -> bool:
    """Exact Bernoulli(exp(−num/den)) for Python ints 0 ≤ num ≤ den of any size
    (CKS Algorithm 1, as :func:`bernoulli_exp_minus`, one draw)."""
    first_failure = 1
    while rng.below_int(den * first_failure) < num:
        first_failure += 1
    return first_failure % 2 == 1


def bernoulli_exp_minus_fraction(rng: RandomSource, x: Fraction) -> bool:
    """Exact Bernoulli(exp(−x)) for any rational x ≥ 0:
    exp(−x) = exp(−1)^⌊x⌋ · exp(−(x − ⌊x⌋)), each factor an exact Bernoulli."""
    x = Fraction(x)
    if x < 0:
        raise ValueError(f"x must be non-negative, got {x}")
    whole, rest = divmod(x.numerator, x.denominator)
    survived = 0
    while survived < whole:  # one draw at a time: a single Bernoulli gains nothing from numpy
        if not _bernoulli_exp_minus_ratio(rng, 1, 1):
            return False
        survived += 1
    return _bernoulli_exp_minus_ratio(rng, rest, x.denominator)


def exponential_mechanism(rng: RandomSource, scores, epsilon: Fraction | float, sensitivity: Fraction | float,
                          monotone: bool = False) -> int:
    """The index of one candidate drawn exactly from P(i) ∝ exp(c·q_i), c = ε/(2Δq)
    (ε/Δq when ``monotone``): the distribution :func:`exponential_probabilities` computes.

    Rejection sampling: propose i uniformly, keep it with probability
    exp(−c·(q* − q_i)) = exp(−x_i) ∈ (0, 1], else propose again. A try keeps i with
    probability exp(−x_i)/n, so the kept index has P(i) ∝ exp(−x_i) ∝ exp(c·q_i);
    the best candidate is kept with probability 1, so the expected number of tries is
    at most n. x_i is an exact rational (:func:`exponential_exponents`) and each keep
    is an exact Bernoulli, so no rounding touches the distribution.

    Tries run in rounds of up to ``_PROPOSALS_PER_ROUND``: the whole part ⌊x_i⌋ of
    every try in a round is settled at once (vectorised), and the survivors, in
    order, take their fractional part one by one; the first kept try is returned,
    exactly as if the tries had run one after another.
    """
    numerators, denominator = exponential_exponents(scores, epsilon, sensitivity, monotone)
    wholes = np.array([num // denominator for num in numerators], dtype=object)
    bounds = np.full(min(len(numerators), _PROPOSALS_PER_ROUND), len(numerators), dtype=np.uint64)
    while True:
        proposals = rng.below(bounds).astype(np.int64)
        for i in proposals[_survive_whole_parts(rng, wholes[proposals])]:
            if _bernoulli_exp_minus_ratio(rng, numerators[i] - wholes[i] * denominator, denominator):
                return int(i)


def exponential_mechanism_rows(rng: RandomSource, scores, epsilon: Fraction | float, sensitivity: Fraction | float,
                               monotone: bool = False) -> np.ndarray:
    """One candidate per row of an integer matrix of scores, each row drawn exactly as
    :func:`exponential_mechanism` draws one vector: P(i) ∝ exp(c·q_i), c = ε/(2Δq) (ε/Δq when
    ``monotone``), rows independent of each other. For many small choices at once (a quantile
    per group): every pending row proposes a candidate uniformly in the same round, keeps it
    with an exact Bernoulli(exp(−x)), x = c·(row's best − q_i), and rows that rejected propose
    again. Scores are whole numbers (scale a quality to them: a common factor is a factor of
    Δq too); where c·(best − q) is too long a fraction for 64-bit words, a row is drawn by
    :func:`exponential_mechanism` itself, with the same distribution."""
    scores = np.asarray(scores)
    if scores.ndim != 2 or scores.shape[1] == 0 or scores.dtype.kind not in "iu":
        raise ValueError("scores must be a matrix of whole numbers, one row per choice")
    c = Fraction(*_exact_ratio(epsilon)) / Fraction(*_exact_ratio(sensitivity)) / (1 if monotone else 2)
    if c <= 0:
        raise ValueError("epsilon and the quality sensitivity must be positive")
    gaps = scores.max(axis=1, keepdims=True).astype(np.int64) - scores.astype(np.int64)  # best − q ≥ 0
    if c.denominator >= _MAX_SCALE_PART or c.numerator * int(gaps.max(initial=0)) >= 1 << 62:
        return np.array([exponential_mechanism(rng, row.tolist(), epsilon, sensitivity, monotone)
                         for row in scores], dtype=np.int64)
    rows, k = scores.shape
    chosen = np.full(rows, -1, dtype=np.int64)
    pending = np.arange(rows)
    num, den = np.int64(c.numerator), np.int64(c.denominator)
    while pending.size:
        proposed = rng.below(np.full(pending.size, k, dtype=np.uint64)).astype(np.int64)
        exponent = gaps[pending, proposed] * num  # x = exponent/den
        alive = _survive_whole_parts(rng, exponent // den)
        kept = np.zeros(pending.size, dtype=bool)
        rest = (exponent % den)[alive]
        kept[alive] = bernoulli_exp_minus(rng, rest.astype(np.uint64), np.full(rest.size, den, dtype=np.uint64))
        chosen[pending[kept]] = proposed[kept]
        pending = pending[~kept]
    return chosen
