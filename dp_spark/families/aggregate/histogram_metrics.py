"""Every value metric of a group from one noisy histogram per group: pure numpy, no Spark.

For a value with few possible values (star ratings: 1 to 5), one table holds everything the value
metrics show: h[g, k], how many of group g's bounded records have a value whose nearest public
candidate is b_k (aggregates.value_histogram.kept_histograms; ties to the lower candidate, values
beyond the candidates to the end ones). A user keeps at most c records in each of at most l groups
(bounding.user_groups), and a record is one in one cell, so adding or removing the user moves the
table by at most c per group: L1 l·c and L2² at most l·c² (all c records in one cell). The table
gets discrete Laplace noise at its L1 or, under zCDP, discrete Gaussian noise at its L2², with the
whole budget the value metrics have (one ledger step), and every metric is post-processing of ĥ:

    count     Σ_k ĥ_k
    sum       Σ_k b_k·ĥ_k
    mean      m + Σ_k (b_k − m)·ĥ_k / Σ_k ĥ_k, m the candidates' midpoint, kept in [b_1, b_K]
    variance  Σ_k (b_k − m)²·ĥ_k / Σ_k ĥ_k − (mean − m)², kept in [0, ((b_K − b_1)/2)²]
    quantile  the least b_k with Σ_{j≤k} g_j ≥ q·Σ_j g_j, g = max(ĥ, 0) + λ·(pooled shares)

The mean and variance are given where the count's interval stays above zero (as the means'), the
quantiles where the noisy count is positive; a group of few records gets mostly noise, and its
count says so. The quantiles read the cells clamped at zero (no group holds fewer than no
records) plus a prior of λ = √K·sd records spread as all groups' cells are (with_prior):
where noise outweighs a small group its quantiles then lean on the whole table's, and a group of
many records keeps its own. Against a table per figure (noisy_totals) and
the exponential mechanism per quantile level (quantiles), nothing is split: with K candidates
the count carries K cells' noise, but a mean, a variance and each quantile level cost no more,
and the noise grows as √l (L2) where the exponential mechanism's rank error grows as l.

The claim: docs/aggregate.md, "Privacy claim: the histogram per group".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dp_spark.core import accuracy, noise_choice, noise_sums
from dp_spark.core.clip_range import ratio_intervals
from dp_spark.core.discrete_gaussian import discrete_gaussian_variance
from dp_spark.core.ledger import GAUSSIAN_MECHANISM, Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.aggregate.metrics import COUNT, Metric
from dp_spark.families.aggregate.noisy_totals import GroupBound
from dp_spark.families.aggregate.quantiles import Candidates
from dp_spark.release.sum_tables import halfwidth, table_entry

KINDS = (COUNT, "sum", "mean", "variance", "stddev", "median", "quantiles")  # what the histogram answers


def step_name(value: str) -> str:
    """The histogram's ledger step: "histogram(stars)"."""
    return f"histogram({value})"


def sensitivity(bound: GroupBound) -> tuple[int, int]:
    """(L1, L2²) of the histograms of all groups: l·c and l·c² (module docstring)."""
    c = bound.records_per_group
    return bound.groups_per_user * c, bound.groups_per_user * c * c


def ledger_entry(bound: GroupBound, value: str, share: Fraction, noise: str, groups: int,
                 candidates: int) -> LedgerEntry:
    """The histogram's entry at ``share`` of ε (under zCDP, the pure-ε equivalent of its share of ρ),
    one cell per group and candidate, with the noise ``noise`` names ("auto": the lower variance)."""
    l1, l2_squared = sensitivity(bound)
    return table_entry(step_name(value), noise_choice.chosen(noise, l1, l2_squared, Fraction(share)), l1,
                       l2_squared, Fraction(share), groups * candidates)


def cell_sd(entry: LedgerEntry) -> float:
    """The standard deviation of one cell's noise, from its pmf."""
    if entry.mechanism == GAUSSIAN_MECHANISM:
        return math.sqrt(discrete_gaussian_variance(entry.noise_scale))
    return accuracy.discrete_laplace_sd(entry.noise_scale)


def combination_halfwidth(entry: LedgerEntry, weights: Sequence[float] | np.ndarray, alpha: float) -> float:
    """An h with P(|Σ_k w_k·Z_k| > h) ≤ α, the Z_k independent noises of ``entry``'s cells: the
    exact one from the cells' pmfs when the weights lie on a lattice (core.noise_sums), else the
    least of three bounds that each hold. A union bound over the cells (each |Z_k| at most its exact
    half-width at α/K); Chebyshev's (‖w‖·sd/√α); and under the discrete Gaussian of parameter σ²,
    whose moment generating function is at most the continuous one's, the sub-Gaussian tail
    ‖w‖·σ·√(2·ln(2/α))."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    w = np.asarray(weights, dtype=np.float64)
    w = w[w != 0]
    if not w.size:
        return 0.0
    norm = float(np.sqrt(np.sum(w * w)))
    bounds = [float(np.abs(w).sum()) * halfwidth(entry, alpha / w.size), norm * cell_sd(entry) / math.sqrt(alpha)]
    if entry.mechanism == GAUSSIAN_MECHANISM:
        bounds.append(norm * math.sqrt(float(entry.noise_scale)) * math.sqrt(2 * math.log(2 / alpha)))
    exact = noise_sums.exact_halfwidth(entry, w.tolist(), alpha)
    return min(bounds if exact is None else [*bounds, exact])


def publish(histograms: np.ndarray, metrics: Sequence[Metric], candidates: Candidates, bound: GroupBound,
            share: Fraction, noise: str, budget: Budget, rng: RandomSource,
            alpha: float = 0.05) -> dict[str, np.ndarray]:
    """The value metrics' columns (and ``count``'s, when asked) from the histograms [group,
    candidate] with noise, paid from ``budget`` as one step at ``share``."""
    h = np.asarray(histograms, dtype=np.int64)
    if h.ndim != 2 or h.shape[1] != len(candidates):
        raise ValueError(f"histograms must have one column per candidate ({len(candidates)})")
    value = next(m.value for m in metrics if m.value is not None)
    entry = ledger_entry(bound, value, share, noise, h.shape[0], len(candidates))
    noisy = h + budget.noise(entry, rng).reshape(h.shape)
    return columns_of(noisy, metrics, candidates, entry, alpha)


def columns_of(noisy: np.ndarray, metrics: Sequence[Metric], candidates: Candidates, entry: LedgerEntry,
               alpha: float) -> dict[str, np.ndarray]:
    """Every asked metric's columns from the noisy histograms (module docstring); a mean's interval
    at level 1 − α, each of its two figures at α/2 (a union bound)."""
    b = np.asarray(candidates.values, dtype=np.float64)
    k = len(b)
    centre = (b[0] + b[-1]) / 2
    counts = noisy.sum(axis=1)
    centred = noisy.astype(np.float64) @ (b - centre)
    count_h = combination_halfwidth(entry, np.ones(k), alpha / 2)
    mean, low, high = ratio_intervals(centred, counts, combination_halfwidth(entry, b - centre, alpha / 2),
                                      count_h, centre, 1.0, b[0], b[-1])
    given = ~np.isnan(mean)
    columns: dict[str, np.ndarray] = {}
    for metric in metrics:
        names = metric.columns
        if metric.kind == COUNT:
            columns[COUNT] = counts
        elif metric.kind == "sum":
            columns[names[0]] = noisy.astype(np.float64) @ b
        elif metric.kind == "mean":
            columns.update(zip(names, (mean, low, high)))
        elif metric.kind in ("variance", "stddev"):
            variance = _variances(noisy, counts, mean, b, centre, given)
            columns[names[0]] = variance if metric.kind == "variance" else np.sqrt(variance)
        elif metric.kind in ("median", "quantiles"):
            defined, leaned = counts > 0, with_prior(noisy, entry)
            for level, name in zip(metric.levels, names):
                columns[name] = np.where(defined, b[_quantile_positions(leaned, level)], np.nan)
    return columns


def prior_weight(entry: LedgerEntry, candidates: int) -> float:
    """λ = √K·sd: the prior's mass in each group, the standard deviation of the noise on a group's
    count of K cells (public: from the entry). Chosen on MovieLens 1M's ratings at l = 20 and 100
    against none and K·sd: the median's error of groups of 100 to 999 ratings fell from 0.68–0.84
    to 0.46–0.53 stars, of those under 100 from 1.10–1.15 to 0.86–0.87, while those of 1,000 and
    more rose from 0.03–0.29 to 0.14–0.24 (K·sd: 0.28–0.31)."""
    return math.sqrt(candidates) * cell_sd(entry)


def with_prior(noisy: np.ndarray, entry: LedgerEntry) -> np.ndarray:
    """The cells the quantiles read: each clamped at zero, plus λ times each candidate's share of
    all groups' noisy cells summed (then clamped at zero; uniform when nothing is left). Summed
    before clamping, the noise of the many empty groups cancels out instead of flattening the
    shares. Both read DP outputs and public values only: post-processing."""
    clamped = np.maximum(noisy, 0).astype(np.float64)
    pooled = np.maximum(noisy.sum(axis=0), 0).astype(np.float64)
    shares = pooled / pooled.sum() if pooled.sum() > 0 else np.full(noisy.shape[1], 1 / noisy.shape[1])
    return clamped + prior_weight(entry, noisy.shape[1]) * shares


def _variances(noisy: np.ndarray, counts: np.ndarray, means: np.ndarray, b: np.ndarray, centre: float,
               given: np.ndarray) -> np.ndarray:
    safe = np.where(given, counts, 1).astype(np.float64)
    second = (noisy.astype(np.float64) @ ((b - centre) ** 2)) / safe
    shift = np.where(given, means, centre) - centre
    widest = ((b[-1] - b[0]) / 2) ** 2
    return np.where(given, np.clip(second - shift * shift, 0.0, widest), np.nan)


def _quantile_positions(noisy: np.ndarray, level: Fraction) -> np.ndarray:
    """Per group, the first candidate whose noisy running count reaches q of the noisy total, in
    whole numbers (D·running ≥ N·total for q = N/D); the last where none does (a total at most zero,
    where columns_of gives none)."""
    running = np.cumsum(noisy, axis=1)
    reached = level.denominator * running >= level.numerator * running[:, -1:]
    return np.where(reached.any(axis=1), np.argmax(reached, axis=1), noisy.shape[1] - 1)


def rank_error(entry: LedgerEntry, candidates: int, level: Fraction, beta: float) -> float:
    """With probability at least 1 − β, each group's quantile is at most this many of its values
    from its q-quantile in rank (of the values rounded to the candidates): (1 + q)·max(E_low, E_up).
    Clamping moves each cell towards its true count, so a running sum's error lies between the
    running sum of the noise and that of its positive parts: E_low bounds the first from below at
    every k (K running sums, each at β/2K), E_up the second from above (the one over all K cells,
    at β/2; core.noise_sums). The chosen b_k has a clamped running count at least q times the
    clamped total and the one before it less, so its true ranks are within q·E_low + E_up (or
    q·E_up + E_low) of q·n. The prior adds at most λ to a running count (with_prior), so to E_up."""
    low = max(combination_halfwidth(entry, np.ones(k), beta / (2 * candidates)) for k in range(1, candidates + 1))
    high = noise_sums.positive_part_quantile(entry, candidates, beta / 2) + prior_weight(entry, candidates)
    return (1 + float(level)) * max(low, high)


def table_accuracy(metrics: Sequence[Metric], entry: LedgerEntry, candidates: Candidates, alpha: float,
                   records_shown: Sequence[int], confidence: float,
                   counted: str = "records") -> dict[str, accuracy.Accuracy]:
    """Each column's expected error from the config alone: the count's and the sum's sd exactly and
    their half-widths by combination_halfwidth (exact on a lattice of weights); a mean's interval by
    the group's records (``counted`` names them: "users" when each user counts once per group); a
    variance none; a quantile's rank error at 1 − alpha."""
    b = np.asarray(candidates.values, dtype=np.float64)
    k = len(b)
    sd = cell_sd(entry)
    columns: dict[str, accuracy.Accuracy] = {}
    for metric in metrics:
        if metric.kind in (COUNT, "sum"):
            weights = np.ones(k) if metric.kind == COUNT else b
            exact = all(noise_sums.exact_halfwidth(entry, weights.tolist(), a) is not None for a in (0.05, alpha))
            columns[metric.columns[0]] = accuracy.Accuracy(
                f"the sum of {k} cells' noise" + ("" if metric.kind == COUNT else ", each times its candidate"),
                accuracy.EXACT if exact else accuracy.UPPER_BOUND, alpha, sd=sd * float(np.linalg.norm(weights)),
                ci95_halfwidth=combination_halfwidth(entry, weights, 0.05),
                ci_halfwidth=combination_halfwidth(entry, weights, alpha),
                note="the sd and the half-widths from the cells' exact pmfs" if exact else
                     "the sd is exact; the half-widths are the least of a union bound, Chebyshev's and (Gaussian "
                     "noise) the sub-Gaussian tail")
        elif metric.kind == "mean":
            columns[metric.columns[0]] = _mean_accuracy(entry, b, alpha, records_shown, confidence, counted)
        elif metric.kind in ("variance", "stddev"):
            columns[metric.columns[0]] = accuracy.not_additive(
                "from the noisy histogram", alpha, "no interval yet: the histogram's second moment less the squared "
                "mean, kept in [0, ((high - low)/2)^2]; a group with few records has mostly noise")
        elif metric.kind in ("median", "quantiles"):
            for level, name in zip(metric.levels, metric.columns):
                rank = rank_error(entry, k, level, alpha)
                columns[name] = accuracy.not_additive(
                    "running sums of the noisy histogram", alpha,
                    f"with probability at least {100 * (1 - alpha):g}% a group's value is at most {rank:,.1f} of its "
                    f"values away from its {float(level):g}-quantile in rank (values rounded to the {k} candidates); "
                    "none where the noisy count is not positive")
    return columns


def _mean_accuracy(entry: LedgerEntry, b: np.ndarray, alpha: float, records_shown: Sequence[int],
                   confidence: float, counted: str = "records") -> accuracy.Accuracy:
    level_alpha = 1 - confidence
    centre = (b[0] + b[-1]) / 2
    count_h = combination_halfwidth(entry, np.ones(len(b)), level_alpha / 2)
    sum_h = combination_halfwidth(entry, b - centre, level_alpha / 2)
    widths = []
    for n in records_shown:
        # The widest interval over true means across the range, at zero noise.
        totals = np.linspace(b[0] - centre, b[-1] - centre, 21) * n
        _, low, high = ratio_intervals(totals, np.full(totals.shape, float(n)), sum_h, count_h, centre, 1.0, b[0],
                                       b[-1])
        widths.append((n, None if np.isnan(low).any() else float(np.max(high - low) / 2)))
    note = (f"the ratio of two sums of the noisy histogram: each group's {100 * confidence:g}% interval "
            "(mean_<v>_low, mean_<v>_high) covers the mean of the kept records rounded to the candidates; a group "
            "whose count's interval reaches zero gets no mean")
    return accuracy.not_additive("ratio of two noisy figures", alpha, note, tuple(widths), confidence,
                                 math.floor(count_h) + 1, counted)
