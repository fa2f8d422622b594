"""DPSense and DPSense-S (Day & Li, ASIACCS 2015): column counts of high-dimensional rows.

A row is one user's set of distinct items; a column count is the number of
users whose row holds the item. Rows longer than a limit θ are cut down to
mass θ, by normalisation (each of the row's r ones weighs min(1, θ/r), floored
to the grid 2^-10) or by sampling θ of its ones, and θ is chosen privately.

DP claims (user level = one row, pure ε-DP; specification §4.2, §4.3, [RECON]):

* DPSense is (ε1 + ε2)-DP, ε1 = ε/10 and ε2 = 9ε/10. θ comes from
  Θ = {1, …, θ_max} by the exponential mechanism with quality
  q(θ) = −(Σ_t max(min(r_t, θ_max) − θ, 0) + d·θ/ε2). Adding one row moves
  every q(θ) by a value in [−(θ_max − 1), 0]: sensitivity θ_max − 1, all
  scores in one direction, so exp(ε1·q/Δq) is ε1-DP (§4.2 (ii)). Given θ,
  each row adds at most θ to the column counts in L1 (grid weights are
  floored, so r·w ≤ θ exactly), and discrete Laplace of scale θ/ε2 on the
  grid is ε2-DP (§4.2 (iii), §1.4).
* Under zCDP accounting the column counts may take discrete Gaussian noise instead:
  a row's weights w_j ≤ u (u grid units per count) with Σ w_j ≤ θ·u give squared L2 sensitivity
  Σ w_j² ≤ θ·u², so σ² = θ/ε2² in counts (:func:`publish_columns`).
* DPSense-S is (ε1 + ε2)-DP: (θ, α) ∈ Θ × {1.00, 1.05, …, 3.00} by the
  exponential mechanism with quality
  qS = −(Σ_j |c_j^max − α·c_j^θ| + α·d·θ/ε2), sensitivity α_max·θ_max
  (§4.3; not monotone, so the factor 2 stays); then the DPSense release at θ
  times α (post-processing). [FIX] for exactness: c^θ and c^max are built from
  weights floored to the grid 2^-k, k = QUALITY_GRID_BITS = 20, so qS is an
  exact rational (docs/dpsense.md): in grid units, a row of length r ≤ θ_max
  weighs ⌊min(1, θ/r)·2^k⌋ in c^θ and 2^k in c^max, a longer row θ·⌊2^k/r⌋ and
  θ_max·⌊2^k/r⌋. A row then moves qS by at most max(θ_max, α·θ) ≤ α_max·θ_max.

The exponential mechanism is sampled exactly (mechanisms.exponential_mechanism),
and both qualities are exact (Fractions), so the claims hold with δ = 0.

The quality functions are computed from three aggregates, never from rows:
the histogram of row lengths capped at θ_max, and, for DPSense-S, per column
the number of rows of each length r ≤ θ_max holding it (N_j(r)) and the sum
of ⌊2^20/r⌋ over the longer rows holding it (S'_j, an integer summed as a long
in Spark) (specification §10).

This module is the numpy part: the qualities, the choice of θ (and α) and the
release. The rows and their limit are :mod:`dp_spark.bounding.item_rows`, the
column sums and length histograms :mod:`dp_spark.families.dpsense.columns`, and
``families.dpsense.family.run`` puts them in order.

Claim: docs/dpsense.md, "Privacy claim: dpsense", "Privacy claim: dpsense_s".
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry, gaussian_entry, selection_entry
from dp_spark.core.mechanisms import RandomSource, as_scale
from dp_spark.publishers import laplace

SPEC_SECTIONS = {"dpsense": "docs/specification.md §4.2", "dpsense_s": "docs/specification.md §4.3"}
DEFAULT_THETA_MAX = 256  # §4.2 [ASSUME]
ALPHAS = tuple(Fraction(100 + 5 * i, 100) for i in range(41))  # 1.00, 1.05, …, 3.00 (§4.3 [ASSUME])
GRID_BITS = 10  # weights are multiples of 2^-10 (§1.4)
QUALITY_GRID_BITS = 20  # DPSense-S's quality weighs rows in 2^-20: ⌊2^20/r⌋ resolves long rows (docs/dpsense.md)


def default_split(epsilon: Fraction) -> dict[str, Fraction]:
    """ε1 = ε/10 to choose θ, ε2 = 9ε/10 for the counts (§4.2 [ASSUME])."""
    return {"epsilon_theta": epsilon / 10, "epsilon_counts": epsilon * 9 / 10}


# ---------------------------------------------------------------------------
# Quality functions: pure numpy over the aggregates.


def loss(length_hist: np.ndarray, thetas: np.ndarray) -> np.ndarray:
    """Σ_t max(r̄_t − θ, 0) for every θ; ``length_hist[r]`` = rows of capped length r."""
    lengths = np.arange(length_hist.size)
    return (np.maximum(lengths[None, :] - thetas[:, None], 0) * length_hist[None, :]).sum(axis=1)


def quality(length_hist: np.ndarray, thetas: np.ndarray, columns: int, epsilon_counts: Fraction) -> np.ndarray:
    """DPSense's q(θ): minus (the mass removed by limiting + the expected total |noise|).

    Exact, as Fractions (an object array): the loss is an integer and d·θ/ε2 a rational.
    In doubles, rounding L + d·θ/ε2 near a power of two can move a score by Δq plus an
    ulp, more than the sensitivity the mechanism is given."""
    noise_per_theta = Fraction(columns) / Fraction(epsilon_counts)
    return np.array([-(int(lost) + int(theta) * noise_per_theta)
                     for lost, theta in zip(loss(length_hist, thetas), thetas)], dtype=object)


def quality_sensitivity(theta_max: int) -> int:
    return max(theta_max - 1, 1)  # Θ = {1} has constant quality; any positive Δq is then exact


def quality_counts(by_length: np.ndarray, long_units: np.ndarray, thetas, grid_bits: int = QUALITY_GRID_BITS,
                   dtype=np.int64) -> np.ndarray:
    """DPSense-S's c_j^θ in grid units 2^-k (integers, shape (θ, d)), for every θ and column j:
    Σ_{r ≤ θ_max} N_j(r)·⌊min(1, θ/r)·2^k⌋ + θ·S'_j.

    ``by_length[j, r]`` = N_j(r) for r = 1..θ_max (column 0 unused); ``long_units[j]`` =
    S'_j = Σ ⌊2^k/r⌋ over the rows longer than θ_max holding j. Short rows weigh as in the
    release, on a finer grid; a long row weighs θ·⌊2^k/r⌋ ≤ ⌊θ·2^k/r⌋, so that one integer
    per column serves every θ. int64 is exact while :func:`quality_s_bound` < 2^63 (every term
    and partial sum is non-negative and at most that); ``dtype=object`` computes in Python ints."""
    unit = 1 << grid_bits
    thetas = np.array([int(t) for t in thetas], dtype=dtype)
    lengths = np.arange(by_length.shape[1]).astype(dtype)
    lengths[0] = 1
    weights = np.minimum(unit, (thetas[:, None] * unit) // lengths[None, :])
    weights[:, 0] = 0
    return _weighted_sums(weights, by_length.astype(dtype), unit) + thetas[:, None] * long_units.astype(dtype)[None, :]


_EXACT_DOUBLES = 2**53  # every integer up to this is a double, and so are sums and products that stay below it


def _weighted_sums(weights: np.ndarray, by_length: np.ndarray, unit: int) -> np.ndarray:
    """``weights @ by_length.T`` (integers), through BLAS in doubles when that is exact: every
    weight is at most ``unit``, so each product and partial sum of column j is an integer at most
    unit·Σ_r N_j(r); below 2^53 they are all doubles exactly, whatever order BLAS adds in. Numpy
    multiplies int64 matrices without BLAS, about ten times slower (θ_max = 256, 17,770 columns)."""
    if by_length.dtype != np.int64 or by_length.size == 0 or int(by_length.sum(axis=1).max()) * unit >= _EXACT_DOUBLES:
        return weights @ by_length.T
    return (weights.astype(np.float64) @ by_length.T.astype(np.float64)).astype(np.int64)


def limited_counts_all(by_length: np.ndarray, long_units: np.ndarray, thetas) -> np.ndarray:
    """c_j^θ of :func:`quality_counts` in count units (floats; for evaluation only)."""
    return quality_counts(by_length, long_units, thetas) / float(1 << QUALITY_GRID_BITS)


def quality_s_bound(by_length: np.ndarray, long_units: np.ndarray, theta_max: int, alphas,
                    grid_bits: int = QUALITY_GRID_BITS) -> int:
    """An upper bound on every integer :func:`quality_s` forms, with α = m/s: s·c^max_j,
    m·c^θ_j and Σ_j |s·c^max_j − m·c^θ_j| are all ≤ (s + m_max)·Σ_j c^max_j, as
    0 ≤ c^θ_j ≤ c^max_j. A row adds at most θ_max·2^k to Σ_j c^max_j, so for n rows and
    ALPHAS (s = 20, m_max = 60) the bound is at most 80·n·θ_max·2^k: below 2^63 while
    n·θ_max < 1.1·10^11 at k = 20 (e.g. 4·10^8 users at θ_max = 256)."""
    scale, multiples = _alpha_multiples(alphas)
    total_max = (1 << grid_bits) * int(by_length.sum()) + theta_max * int(long_units.sum())
    return (scale + max(multiples)) * total_max


def _alpha_multiples(alphas) -> tuple[int, list[int]]:
    """(s, [m]) with every α = m/s exactly: s = 20 and m = 20..60 for ALPHAS."""
    alphas = [Fraction(a) for a in alphas]
    scale = math.lcm(*(a.denominator for a in alphas))
    return scale, [int(a * scale) for a in alphas]


def quality_s(by_length: np.ndarray, long_units: np.ndarray, thetas, alphas, theta_max: int,
              epsilon_counts: Fraction, grid_bits: int = QUALITY_GRID_BITS) -> np.ndarray:
    """DPSense-S's qS(θ, α), shape (θ, α), exact (Fractions, count units): minus the estimated
    L1 error of α·(c^θ + noise) against c^max, the counts at θ_max (:func:`quality_counts`).

    With α = m/s and ε2 = p/q, every score is one fraction of integers:
    qS = −(p·Σ_j |s·c^max_j − m·c^θ_j| + q·m·θ·d·2^k) / (p·s·2^k), the c's in grid units.
    The Σ_j runs in int64 when :func:`quality_s_bound` is below 2^63, else in Python ints."""
    unit = 1 << grid_bits
    scale, multiples = _alpha_multiples(alphas)
    fits = quality_s_bound(by_length, long_units, theta_max, alphas, grid_bits) < 2**63
    dtype = np.int64 if fits else object
    thetas = [int(t) for t in thetas]
    at_theta = quality_counts(by_length, long_units, thetas, grid_bits, dtype)
    at_max = quality_counts(by_length, long_units, [theta_max], grid_bits, dtype)[0] * scale
    m = np.array(multiples, dtype=dtype)
    epsilon_counts = Fraction(epsilon_counts)
    p, q = epsilon_counts.numerator, epsilon_counts.denominator
    noise = q * by_length.shape[0] * unit  # q·d·2^k: the noise term's numerator, times m·θ
    denominator = p * scale * unit
    biases = _biases(at_max, at_theta, m)
    out = np.empty((len(thetas), len(multiples)), dtype=object)
    for i, theta in enumerate(thetas):
        for k, multiple in enumerate(multiples):
            out[i, k] = Fraction(-(p * int(biases[i, k]) + noise * multiple * theta), denominator)
    return out


def _biases(at_max: np.ndarray, at_theta: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Σ_j |a_j − m_k·b_ij| for every row i of ``at_theta`` (b) and multiple m_k, exact
    (shape (θ, α)); a = ``at_max``, all non-negative integers, m increasing and positive.

    By sorting each column into the m it lies between: with S = {j : a_j ≥ m·b_j} the sum is
    2·Σ_S (a_j − m·b_j) − Σ_all (a_j − m·b_j), and S holds the j whose ratio a_j/b_j is at
    least m. The ratio is compared as a double: while a and b·m are below 2^53, a and b are
    doubles exactly, a ratio below m never rounds up to m (m − a/b ≥ 1/b exceeds half an ulp of
    m) and one above never rounds below it (m is a double), so S is exact (a ratio equal to m adds
    0 on either side). Otherwise, and for Python ints, the direct sum over every (m, j). The
    int64 sums stay within :func:`quality_s_bound` (α ≥ 1, so 2·s·Σc^max is within it)."""
    fast = (at_theta.dtype == np.int64 and at_max.size > 0
            and int(at_max.max()) < _EXACT_DOUBLES and int(at_theta.max()) * int(m[-1]) < _EXACT_DOUBLES)
    if not fast:
        return np.array([np.abs(at_max[None, :] - m[:, None] * b[None, :]).sum(axis=1) for b in at_theta])
    a_float, bounds = at_max.astype(np.float64), m.astype(np.float64)
    a_total = int(at_max.sum())
    out = np.empty((at_theta.shape[0], m.size), dtype=np.int64)
    for i, b in enumerate(at_theta):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(b > 0, a_float / b, np.inf)  # b = 0: |a − m·0| = a, in S for every m
        # bucket = how many m lie at or below the ratio: j is in S for m_k iff bucket > k.
        bucket = np.searchsorted(bounds, ratio, side="right").astype(np.uint8 if m.size < 255 else np.int64)
        order = np.argsort(bucket, kind="stable")
        below = np.concatenate(([0], np.cumsum(np.bincount(bucket, minlength=m.size + 1))))[1:m.size + 1]
        a_cum = np.concatenate(([0], np.cumsum(at_max[order])))
        b_cum = np.concatenate(([0], np.cumsum(b[order])))
        b_total = int(b_cum[-1])
        a_in, b_in = a_total - a_cum[below], b_total - b_cum[below]  # Σ over S for each m_k
        out[i] = 2 * (a_in - m * b_in) - (a_total - m * b_total)
    return out


def quality_s_sensitivity(theta_max: int, alpha_max: Fraction) -> Fraction:
    return Fraction(alpha_max) * theta_max


# ---------------------------------------------------------------------------
# The release.


def choose_theta(length_hist, theta_max: int, columns: int, epsilons: dict, budget: Budget,
                 rng: RandomSource) -> int:
    thetas = np.arange(1, theta_max + 1)
    sensitivity = quality_sensitivity(theta_max)
    scores = quality(length_hist, thetas, columns, epsilons["epsilon_counts"])
    entry = selection_entry("theta", "exponential mechanism (monotone quality)", epsilons["epsilon_theta"],
                            sensitivity, thetas.size, budget.zcdp, monotone=True)
    index = budget.exponential_mechanism(entry, rng, scores, monotone=True)
    return int(thetas[index])


def choose_theta_alpha(by_length, long_units, theta_max: int, epsilons: dict, budget: Budget,
                       rng: RandomSource) -> tuple[int, Fraction]:
    """(θ, α) by the exponential mechanism over exact scores; ``by_length`` and ``long_units``
    as :func:`dp_spark.families.dpsense.columns.length_by_column` returns them."""
    return draw_theta_alpha(theta_alpha_scores(by_length, long_units, theta_max, epsilons), epsilons, budget, rng)


def theta_alpha_scores(by_length, long_units, theta_max: int, epsilons: dict) -> np.ndarray:
    """The exact scores qS(θ, α) for θ = 1..θ_max and every α of ALPHAS, shape (θ, α): a pure
    function of the data, which only the draw below may release."""
    return quality_s(by_length, long_units, np.arange(1, theta_max + 1), ALPHAS, theta_max,
                     epsilons["epsilon_counts"])


def draw_theta_alpha(scores: np.ndarray, epsilons: dict, budget: Budget, rng: RandomSource) -> tuple[int, Fraction]:
    """(θ, α) drawn by the exponential mechanism over ``scores`` (:func:`theta_alpha_scores`),
    charged to ``budget`` at sensitivity α_max·θ_max."""
    theta_max = scores.shape[0]
    entry = selection_entry("theta_alpha", "exponential mechanism", epsilons["epsilon_theta"],
                            quality_s_sensitivity(theta_max, ALPHAS[-1]), scores.size, budget.zcdp)
    index = budget.exponential_mechanism(entry, rng, scores.ravel())
    return index // len(ALPHAS) + 1, ALPHAS[index % len(ALPHAS)]


def grid_unit(limit: str, grid_bits: int = GRID_BITS) -> int:
    """Grid units per count: 2^grid_bits for normalised rows, 1 for sampled ones."""
    return 1 if limit == "sample" else 1 << grid_bits


def column_l2_squared(theta: int, limit: str, grid_bits: int = GRID_BITS) -> int:
    """The column counts' squared L2 sensitivity in grid units: a row adds w_j ≤ u (u = grid units
    per count) to each of its columns with Σ w_j ≤ θ·u, so Σ w_j² ≤ u·Σ w_j ≤ θ·u²."""
    unit = grid_unit(limit, grid_bits)
    return theta * unit * unit


def publish_columns(limited: np.ndarray, theta: int, limit: str, epsilon: Fraction, budget: Budget,
                    rng: RandomSource, grid_bits: int = GRID_BITS, gaussian: bool = False) -> np.ndarray:
    """Noisy column counts of the θ-limited rows: L1 sensitivity θ, scale θ/ε.
    Normalised counts are in grid units and get noise on the grid (§1.4). ``gaussian`` (zCDP
    accounting): discrete Gaussian noise at squared L2 sensitivity θ (θ·u² in grid units u),
    σ² = θ/ε² in counts, drawn in grid units."""
    if gaussian:
        unit = grid_unit(limit, grid_bits)
        entry = gaussian_entry("column_counts", theta * unit, column_l2_squared(theta, limit, grid_bits), epsilon,
                               int(limited.size))
        if unit > 1:  # the ledger's sensitivities and sigma are in grid units: say so
            entry = replace(entry, mechanism=f"discrete Gaussian on the grid 2^-{grid_bits} (sensitivities and "
                                             "sigma in grid units)")
        return (np.asarray(limited, dtype=np.int64) + budget.discrete_gaussian(entry, rng)) / unit
    if limit == "sample":
        return laplace.publish(limited, theta, epsilon, budget, rng, "column_counts").values.astype(float)
    unit = 1 << grid_bits
    scale = as_scale(Fraction(theta * unit) / epsilon)
    entry = LedgerEntry("column_counts", f"discrete Laplace on the grid 2^-{grid_bits}", epsilon,
                        Fraction(theta), scale / unit, int(limited.size))
    return (limited + budget.discrete_laplace(entry, rng, grid=Fraction(1, unit))) / unit
