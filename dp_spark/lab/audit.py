"""Empirical privacy audits: a statistically valid lower bound on ε from repeated releases.

For a mechanism M with a claimed (ε, δ) and a pair of neighbouring inputs D, D′ (the worst case
its sensitivity analysis names), every ε-DP mechanism satisfies, for every event E,
P(M(D) ∈ E) ≤ e^ε·P(M(D′) ∈ E) + δ. An audit draws ``trials`` releases on each side and:

1. on the first half, picks an event: outputs are binned (exact values when few, else quantile
   bins refined towards both tails); candidates are thresholds on the output and prefixes of the
   bins ordered by the likelihood ratio seen in the first quarter; the candidate with the best
   estimated bound on the second quarter is chosen, in either direction;
2. on the second half, counts the event on each side and takes Clopper–Pearson bounds, each at
   one-sided level α/2: ε_lb = ln((p_lower(D) − δ) / p_upper(D′)).

Because the event is fixed before the second half is looked at, ε_lb is a lower bound on the
true ε with confidence ≥ 1 − α (95% by default). An audit *flags* a mechanism when ε_lb
exceeds its claim. The negative controls (a mechanism with half the noise, DPA-AHP as
published, Limit-SS with the paper's β, and old code paths a review found broken: Limit-SS's rounded
scale, RAN-GD's clipping, the Limit-SS ledger) must be flagged: an audit that cannot fail proves
nothing. A :class:`Family` is one mechanism's parameter grid, a target per point. The targets,
grids and neighbouring pairs are in :mod:`dp_spark.lab.audit_targets`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

ALPHA = 0.05
# At most this many distinct outputs: bin by value. Beyond it, quantile bins: with a few hundred
# exact values, the event search on the first half overfits sparse bins (location entropy's noisy
# user count, 230 values, gave a bound of 0 by value and 0.077 of 0.083 by quantile bins).
EXACT_VALUES = 64
_TAIL_LEVELS = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05)


@dataclass(frozen=True)
class Target:
    """A mechanism to audit. ``sample(side, trials, rng_seed, spark)`` returns one number per
    release: side 0 runs on D, side 1 on D′."""

    name: str
    claim_epsilon: float
    claim_delta: float
    what: str
    sample: Callable
    negative_control: bool = False
    needs_spark: bool = False
    trials: int = 20_000  # default per side
    refused: str = ""  # the code refuses these parameters (why): nothing is released, nothing to audit


@dataclass(frozen=True)
class Family:
    """A mechanism's grid: one target per parameter point (ε, γ, the boundary inputs)."""

    name: str
    points: tuple[Target, ...]

    def __post_init__(self):
        if not self.points:
            raise ValueError(f"family {self.name!r} has no grid points")
        names = [t.name for t in self.points]
        if len(set(names)) != len(names):
            raise ValueError(f"family {self.name!r} repeats a grid point name")


def point_name(family: str, **parameters) -> str:
    """``family[key=value,...]``: the name of one grid point, e.g. ``entropy_limit_ss[eps=0.1,n=13542]``."""
    return f"{family}[{','.join(f'{k}={_short(v)}' for k, v in parameters.items())}]"


def _short(value) -> str:
    if isinstance(value, float) or hasattr(value, "denominator"):
        return f"{float(value):g}"
    return str(value)


@dataclass(frozen=True)
class AuditResult:
    name: str
    claim_epsilon: float
    claim_delta: float
    lower_bound: float
    confidence: float
    trials: int
    event: str
    negative_control: bool
    refused: str = ""

    @property
    def flagged(self) -> bool:
        return self.lower_bound > self.claim_epsilon

    def to_json(self) -> dict:
        return {"name": self.name, "claimed_epsilon": self.claim_epsilon, "claimed_delta": self.claim_delta,
                "lower_bound": self.lower_bound, "confidence": self.confidence, "trials_per_side": self.trials,
                "event": self.event, "negative_control": self.negative_control, "flagged": self.flagged,
                **({"refused": self.refused} if self.refused else {})}


# ---------------------------------------------------------------------------
# Clopper–Pearson.


@lru_cache(maxsize=16)
def _log_binomial(n: int) -> np.ndarray:
    """ln C(n, k) for k = 0..n."""
    log_fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=float)))))
    return log_fact[n] - log_fact - log_fact[::-1]


# The sum below runs over the mean ± (40 standard deviations + 1000) only: Bernstein's inequality
# leaves less than e^-375 of the mass outside, and past the mean the terms only fall. A whole sum
# from k to n took 13 s of an audit at 12,000,000 releases a side.
_WINDOW_SDS, _WINDOW_SLACK = 40, 1000


def _tail_at_least(k: int, n: int, p: float) -> float:
    """P(X ≥ k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if p <= 0 or k > n:
        return 0.0
    if p >= 1:
        return 1.0
    mean, width = n * p, _WINDOW_SDS * math.sqrt(n * p * (1 - p)) + _WINDOW_SLACK
    low, high = max(k, math.floor(mean - width)), min(n, math.ceil(max(k, mean) + width))
    j = np.arange(low, high + 1)
    terms = _log_binomial(n)[low:high + 1] + j * math.log(p) + (n - j) * math.log1p(-p)
    top = terms.max()
    return float(min(1.0, math.exp(top) * np.exp(terms - top).sum()))


def _bisect(increasing: Callable[[float], float], target: float) -> float:
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if increasing(mid) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson lower bound on p from k successes in n, level α."""
    if k == 0:
        return 0.0
    return _bisect(lambda p: _tail_at_least(k, n, p), alpha)


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson upper bound on p from k successes in n, level α."""
    if k >= n:
        return 1.0
    # P(X ≤ k | p) = 1 − P(X ≥ k + 1 | p) falls as p grows; find where it equals α.
    return _bisect(lambda p: _tail_at_least(k + 1, n, p), 1.0 - alpha)


def epsilon_lower_bound(hits_d: int, hits_d2: int, n: int, delta: float = 0.0, alpha: float = ALPHA) -> float:
    """ln((p_lower(D) − δ)/p_upper(D′)) with each bound at α/2; 0 when nothing can be said."""
    numerator = cp_lower(hits_d, n, alpha / 2) - delta
    denominator = cp_upper(hits_d2, n, alpha / 2)
    if numerator <= 0 or denominator <= 0:
        return 0.0
    return max(0.0, math.log(numerator / denominator))


# ---------------------------------------------------------------------------
# Choosing the event on the first half, counting it on the second.


def _binning(pooled: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A function from outputs to bin ids (−1: a value the first half never showed)."""
    # Outputs of many values show more than EXACT_VALUES of them in their first few thousand: only
    # when they do not is the whole sorted (seconds on millions of releases).
    values = np.unique(pooled[:4096])
    if values.size <= EXACT_VALUES:
        values = np.unique(pooled)
    if values.size <= EXACT_VALUES:
        def exact(x):
            pos = np.minimum(np.searchsorted(values, x), values.size - 1)
            return np.where(values[pos] == x, pos, -1)
        return exact
    levels = sorted({*_TAIL_LEVELS, *(1 - q for q in _TAIL_LEVELS), *np.linspace(0.05, 0.95, 37)})
    edges = np.unique(np.quantile(pooled, levels))
    return lambda x: np.searchsorted(edges, x, side="right")


def _wilson(k: np.ndarray, n: int, z: float, upper: bool) -> np.ndarray:
    """Wilson score bounds: a cheap stand-in for Clopper–Pearson when only ranking events."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre + half if upper else np.maximum(centre - half, 0.0)


def _best_event(ranking: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray, n: int,
                delta: float, z: float = 1.96) -> tuple[np.ndarray, float]:
    """Bins (a boolean mask) whose union maximises an estimated bound on the first half, for D
    over D′: a prefix of the bins ordered by estimated likelihood ratio, or a threshold on the
    output (bins are numbered in output order; ratios of sparse bins are noisy, thresholds are
    not). The ratios come from ``ranking`` (other releases than the scored counts ``a``, ``b``),
    so noise in sparse bins does not pick the event. Only the choice of event depends on this
    estimate, never the reported bound. ``z`` is the normal quantile of the final bound's level:
    a stricter level (a Bonferroni share) favours events with more hits."""
    best_score, best_mask = -np.inf, np.zeros(a.size, dtype=bool)
    ascending = np.arange(a.size)
    ratio = (ranking[0] + 0.5) / (ranking[1] + 0.5)
    for order in (np.argsort(-ratio, kind="stable"), ascending, ascending[::-1]):
        numerator = _wilson(np.cumsum(a[order]), n, z, upper=False) - delta
        denominator = _wilson(np.cumsum(b[order]), n, z, upper=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where((numerator > 0) & (denominator > 0), np.log(numerator / denominator), -1.0)
        size = int(np.argmax(score)) + 1
        if score[size - 1] > best_score:
            best_score = float(score[size - 1])
            best_mask = np.zeros(a.size, dtype=bool)
            best_mask[order[:size]] = True
    return best_mask, best_score


def audit_samples(d: np.ndarray, d2: np.ndarray, delta: float = 0.0, alpha: float = ALPHA) -> tuple[float, str]:
    """(ε lower bound, event description) from one statistic per release on D and on D′."""
    d, d2 = np.asarray(d, dtype=float), np.asarray(d2, dtype=float)
    half = min(d.size, d2.size) // 2
    if half < 10:
        raise ValueError("an audit needs at least 20 releases per side")
    first_d, first_d2, second_d, second_d2 = d[:half], d2[:half], d[half:2 * half], d2[half:2 * half]
    bin_of = _binning(np.concatenate([first_d, first_d2]))
    ids_d, ids_d2 = bin_of(first_d), bin_of(first_d2)  # each output binned once (a search per output)
    bins = int(max(ids_d.max(initial=0), ids_d2.max(initial=0))) + 2
    quarter = half // 2

    def counts(ids):
        return np.bincount(ids + 1, minlength=bins + 1)[1:]

    rank = (counts(ids_d[:quarter]), counts(ids_d2[:quarter]))
    score = (counts(ids_d[quarter:2 * quarter]), counts(ids_d2[quarter:2 * quarter]))
    choices = []
    for name, flip in (("D over D'", False), ("D' over D", True)):
        r, s = (rank[::-1], score[::-1]) if flip else (rank, score)
        mask, estimate = _best_event(r, s[0], s[1], quarter, delta, NormalDist().inv_cdf(1 - alpha / 2))
        choices.append((estimate, name, mask))
    _score, direction, mask = max(choices, key=lambda c: c[0])
    hits = []
    for x in (second_d, second_d2):
        ids = bin_of(x)
        known = (ids >= 0) & (ids < mask.size)
        hits.append(int((known & mask[np.clip(ids, 0, mask.size - 1)]).sum()))
    if direction == "D' over D":
        hits = hits[::-1]
    bound = epsilon_lower_bound(hits[0], hits[1], half, delta, alpha)
    event = f"{direction}: {int(mask.sum())} of {mask.size} output bins; held-out hits {hits[0]} vs {hits[1]} of {half}"
    return bound, event


def run(target: Target, trials: int | None = None, seed: int = 0, spark=None, alpha: float = ALPHA) -> AuditResult:
    """Audit one target: ``trials`` releases per side (the target's default if None)."""
    trials = trials or target.trials
    if target.refused:  # the code will not run at these parameters: there is no release to audit
        return AuditResult(target.name, target.claim_epsilon, target.claim_delta, 0.0, 1 - alpha, 0,
                           f"refused by the code: {target.refused}", target.negative_control, target.refused)
    d = np.asarray(target.sample(0, trials, seed, spark), dtype=float)
    d2 = np.asarray(target.sample(1, trials, seed + 1, spark), dtype=float)
    bound, event = audit_samples(d, d2, target.claim_delta, alpha)
    return AuditResult(target.name, target.claim_epsilon, target.claim_delta, bound, 1 - alpha, trials, event,
                       target.negative_control)
