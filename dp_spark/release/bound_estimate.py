"""SRA's and HPA's per-user bound chosen from an estimate of the release's error (``l_choice =
"estimate"``; docs/bound_selection.md, "The estimate choice"): two kinds of DP statistics of low sensitivity,
and the bound that minimises the error they predict, found by post-processing alone.

1. A histogram of the users' record counts n_u in the domain, over public bins (each user in one
   bin: sensitivity 1), from which the records a bound b drops, S(b) = Σ_u (n_u − b)⁺, and SRA's
   sampling variance follow for every integer b.
2. One anchor: the norm of the bias vector at the smallest candidate b_1 of the tables the
   objective scores, each table's part weighted by √w_t, √(Σ_t w_t·‖A_t‖²), every record of a
   cell counted, each user's part capped at U = b_K − b_1 records and then scaled to each table's
   reach (:func:`anchor_squared_norms`). It tells how the dropped records spread over the cells;
   the estimate reads the tables only through that weighted sum, so one anchor serves them all.

The noisy histogram is post-processed first: its tails that noise alone would fill are read as
empty unless significant (:func:`trimmed`): above c records per item unless their total is, above
the last bin loud against the noise beyond the longest significant run of bins from there. Its
tail from 32 records on is then made non-increasing (:func:`monotone_tail`). The estimate of the
tables' weighted squared bias at b is then (A/S_U)²·S(b)², S_U = Σ_u min((n_u − b_1)⁺, U): each
bound drops records from the cells in the proportions it does at b_1. With the public noise
variance N_t(b) and the sampling variance V(b), the chosen bound minimises
(A/S_U)²·S(b)² + Σ_t w_t·(V(b) + N_t(b)) over every integer from b_1 to b_K. HPA, which keeps a
user's records of highest noisy popularity rather than a uniform sample, has a bias model of its
own over the same statistics (release.ranked_bias), its anchor's terms ranked by that popularity.

Pure functions over plain numbers; the Spark side is release.bound_bias (the anchors' squared
norms) and validation's users_by_n (the histogram's counts)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.core import zcdp
from dp_spark.core.discrete_gaussian import discrete_gaussian_variance
from dp_spark.core.exact_roots import ceil_sqrt
from dp_spark.core.ledger import Budget
from dp_spark.core.ledger_entry import LedgerEntry
from dp_spark.core.mechanisms import RandomSource, discrete_laplace_variance
from dp_spark.release.bound_selection import GRID, ErrorModel, bias_term, candidates_checked
from dp_spark.release.ranked_bias import ranked_errors
from dp_spark.release.sum_tables import GAUSSIAN, LAPLACE, halfwidth, table_entry

# The histogram takes this share of the choice's ε (of its ρ under zCDP), the anchor the rest. Set
# on the evaluation set (docs/bound_selection.md): 0.3 and 0.15 did worse.
HISTOGRAM_SHARE = Fraction(1, 5)
# Bins: 1, 2, 3, 4 records each alone, then edges a factor 2^(1/4) apart.
FINE_UP_TO = 4
BIN_RATIO = 2 ** 0.25
# The histogram's top: users with more records count at it. Its bins run to TOP_RECORDS whatever
# the domain, with an edge just above c·(the item domain's size), the most a user with at most c
# records per item can have. The bins above that edge hold noise alone on data that keeps to c per
# pair (ratings), and that noise would read as heavy users; they hold the users with repeated
# records where the data does not (check-ins, purchases). So they are kept only when their noisy
# total is GATE_SDS standard deviations of its noise above zero, and read as empty otherwise
# (post-processing; docs/bound_selection.md, "What the estimate assumes"). At 3 the noise alone
# passed in about 1 release in 500 (at 4, 1 in 4,000), and such a release picked a bound several
# times the best (ML-100K's top 30 movies against their own ids, ε = 5: 1.47 times the oracle in
# expectation, 1.25 at 4); users with repeated records spread over many bins pass either by far.
# One bin alone passes too when it is above what any bin's noise reaches with probability
# GATE_ALPHA (a union bound over the bins): many users with repeated records in few bins (1,000
# users with 300 records each, ε = 1) can fall short of the total's bar.
TOP_RECORDS = 512
GATE_SDS = 4
GATE_ALPHA = 1e-4
# Where the users stop at some count (all rate the same few items, say), the bins above it hold
# noise alone, and that too reads as heavy users. So the bins above the last bin whose count alone
# is loud (above what the noise of any of the bins reaches with probability LOUD_ALPHA, a union
# bound over them) are kept only up to the longest run from its next bin whose total is TAIL_SDS
# standard deviations of its noise above 0, and read as empty beyond it (trimmed). A run, not the
# total of all of them: a real tail puts its few users in the bins just above the loud ones, and
# the empty bins further up only add noise to a total (docs/bound_selection.md, "What the estimate
# assumes"). The bar is low because a real tail spreads few users over many bins: at 3, ML-100K's
# top 90 against their own ids went to 1.34 times the oracle (Laplace, ε = 1; 1.31 at 2.5).
LOUD_ALPHA = 0.01
TAIL_SDS = 2.5
# The anchors' terms scaled to a user's reach (anchor_squared_norms) are ⌊r·√(reach·grid²/Q)·SHRINK⌋
# in floats: the factor keeps the rounding from ever raising a term, so that a user's squares stay
# within reach·grid² as the sensitivity needs; Spark and the driver compute it alike.
SHRINK = 1 - 2.0**-30
# From the first bin at or above this many records the noisy counts per record are made
# non-increasing (pool-adjacent-violators): users get rarer as their records grow there, and the
# noise of the many thin bins of the tail would otherwise read as heavy users.
MONOTONE_FROM = 32


def assumed_top(item_cells: int, records_per_cell: int) -> int:
    """The most records a user with at most c records per item has in the domain, c·C_items (at
    least 1): the bins above it are read as empty unless significant (:func:`trimmed`)."""
    return max(1, int(records_per_cell) * int(item_cells))


def histogram_edges(item_cells: int, records_per_cell: int) -> np.ndarray:
    """The bins' edges for a domain (:func:`bin_edges` to TOP_RECORDS), with an edge just above
    :func:`assumed_top` when it is below TOP_RECORDS, so that no bin straddles it."""
    edges = bin_edges(TOP_RECORDS)
    assumed = assumed_top(item_cells, records_per_cell)
    if assumed < TOP_RECORDS:
        edges = np.union1d(edges, [assumed + 1])
    return edges


def bin_edges(top: int) -> np.ndarray:
    """The bins' lower edges, from 1, and top + 1 last: bin i holds n in [e_i, e_{i+1})."""
    if top < 1:
        raise ValueError(f"the histogram's top must be at least 1, got {top}")
    edges = list(range(1, min(FINE_UP_TO, top) + 1))
    x = float(FINE_UP_TO)
    while True:
        x *= BIN_RATIO
        edge = int(round(x))
        if edge > top:
            break
        if edge > edges[-1]:
            edges.append(edge)
    return np.array(edges + [top + 1], dtype=np.int64)


def record_histogram(users_by_n: pd.Series, edges: np.ndarray) -> np.ndarray:
    """The users per bin, a user with more than the top counted in the last bin (NOT private)."""
    counts = np.zeros(len(edges) - 1, dtype=np.int64)
    if len(users_by_n):
        n = users_by_n.index.to_numpy(dtype=np.int64)
        if n.min() < 1:
            raise ValueError("the histogram counts users with a record in the domain: record counts from 1")
        n = np.minimum(n, edges[-1] - 1)
        bins = np.searchsorted(edges, n, side="right") - 1
        np.add.at(counts, bins, users_by_n.to_numpy(dtype=np.int64))
    return counts


def anchor_sensitivity(records_per_cell: int, user_cap: int, cells: int) -> int:
    """How far one user moves a table's anchor, in 1/GRID records, rounded up: their terms'
    squares sum to at most GRID²·min(c·U, c²·cells) (:func:`anchor_reach`; scaled down to it
    where they would not), so their vector's norm is at most its root (triangle inequality), and
    rounding the norm up adds less than 1."""
    return max(1, ceil_sqrt(GRID * GRID * anchor_reach(records_per_cell, user_cap, cells)))


def anchor_squared_norms(cells: pd.DataFrame, first: int, user_cap: int, reach: int) -> int:
    """The anchor squared, ‖A‖², in 1/GRID records squared, from ``cells`` (one row per (user,
    cell) with user_id, cell, k and n, and for a ranked bound t and g, bound_selection.bias_term's
    ``through`` and ``tied``): the driver-side twin of release.bound_bias's anchor_squared_norms
    (the terms and why there): the quality's term at b_1 with every record counted (c = k), each
    user's terms scaled down to squares summing to at most ``reach``·GRID² (NOT private)."""
    if user_cap == 0 or cells.empty:
        return 0
    k = cells["k"].to_numpy(dtype=object)
    n = cells["n"].to_numpy(dtype=object)
    if np.any(k < 1) or np.any(n < k):
        raise ValueError("each row needs 1 <= k <= n")
    if "t" in cells and "g" in cells:
        ranks = zip(cells["t"].tolist(), cells["g"].tolist())
        raw = np.array([bias_term(int(a), int(b), first, first, user_cap, int(a), int(t), int(g))
                        for a, b, (t, g) in zip(k, n, ranks)], dtype=object)
    else:
        raw = np.array([bias_term(int(a), int(b), first, first, user_cap, int(a)) for a, b in zip(k, n)],
                       dtype=object)
    user = pd.factorize(cells["user_id"])[0]
    squares = np.zeros(int(user.max()) + 1, dtype=object)
    np.add.at(squares, user, raw * raw)
    limit = int(reach) * GRID * GRID
    scaled = [r if q <= limit else int(np.floor(float(r) * np.sqrt(float(limit) / float(q)) * SHRINK))
              for r, q in zip(raw, squares[user])]
    cell = pd.factorize(cells["cell"])[0]
    sums = np.zeros(int(cell.max()) + 1, dtype=object)
    np.add.at(sums, cell, np.array(scaled, dtype=object))
    return int(sum(int(v) * int(v) for v in sums))


def anchor_reach(records_per_cell: int, user_cap: int, cells: int) -> int:
    """What one user may add to a table's anchor, squared, in records²: min(c·U, c²·C_t)."""
    c = int(records_per_cell)
    return min(c * int(user_cap), c * c * int(cells))


def anchor_value(squared_norm: int) -> int:
    """One table's anchor: ⌈√‖A‖²⌉ in 1/GRID records (exact)."""
    return ceil_sqrt(int(squared_norm))


def combined_value(squared_norms: Sequence[int], weights: Sequence[Fraction]) -> int:
    """The anchor the noise is added to: ⌈√(Σ_t w_t·‖A_t‖²)⌉ in 1/GRID records (exact), the norm of
    the scored tables' bias vectors put end to end, each times √w_t; one table of weight 1 gives
    :func:`anchor_value`."""
    if len(squared_norms) != len(weights) or any(Fraction(w) <= 0 for w in weights):
        raise ValueError("one positive weight per scored table")
    return ceil_sqrt(sum((Fraction(w) * int(q) for w, q in zip(weights, squared_norms)), Fraction(0)))


def combined_sensitivity(records_per_cell: int, user_cap: int, cells: Sequence[int],
                         weights: Sequence[Fraction]) -> int:
    """How far one user moves the combined anchor, in 1/GRID records, rounded up: their part of
    each table's vector has squares summing to at most GRID²·R_t (:func:`anchor_reach`), so their
    part of the weighted vector has norm at most GRID·√(Σ_t w_t·R_t) (triangle inequality), and
    rounding the norm up adds less than 1. One table of weight 1 gives :func:`anchor_sensitivity`."""
    if len(cells) != len(weights) or any(Fraction(w) <= 0 for w in weights):
        raise ValueError("one positive weight per scored table")
    reach = sum((Fraction(w) * anchor_reach(records_per_cell, user_cap, c) for w, c in zip(weights, cells)),
                Fraction(0))
    return max(1, ceil_sqrt(GRID * GRID * reach))


@dataclass(frozen=True)
class HistogramNoise:
    """What the histogram's noise is, per bin (public: from its ledger entry): its standard
    deviation, and the counts the noise of any bin exceeds with probability at most LOUD_ALPHA
    (``loud``) and GATE_ALPHA (``gate_loud``).
    :data:`NO_NOISE` for statistics taken without noise (the benchmarks)."""

    sd: float
    loud: float
    gate_loud: float = math.inf  # as loud, at GATE_ALPHA

    @staticmethod
    def of(entry: LedgerEntry) -> HistogramNoise:
        variance = (discrete_gaussian_variance(entry.noise_scale) if entry.rho is not None
                    else discrete_laplace_variance(entry.noise_scale))
        # One-sided at α/bins from the two-sided half-width at 2·α/bins.
        return HistogramNoise(math.sqrt(variance), halfwidth(entry, 2 * LOUD_ALPHA / entry.cells),
                              halfwidth(entry, 2 * GATE_ALPHA / entry.cells))


NO_NOISE = HistogramNoise(0.0, 0.0)


def significant(total: float, bins: int, noise_sd: float, sds: float) -> bool:
    """Whether a sum of ``bins`` noisy counts (noise of standard deviation ``noise_sd`` each) is
    ``sds`` standard deviations of its noise above 0, and above 0 at all."""
    return total > 0 and total >= sds * noise_sd * math.sqrt(bins)


def significant_run(counts: np.ndarray, noise_sd: float, sds: float) -> int:
    """How many of ``counts`` (noisy, in order) to keep: the largest m whose first m sum to a
    total that is ``sds`` standard deviations of its noise above 0 (:func:`significant`), 0 when
    none does."""
    totals = np.cumsum(np.asarray(counts, dtype=float))
    passing = [m for m in range(1, totals.size + 1) if significant(float(totals[m - 1]), m, noise_sd, sds)]
    return passing[-1] if passing else 0


def trimmed(counts: np.ndarray, edges: np.ndarray, assumed: int, noise: HistogramNoise) -> np.ndarray:
    """The noisy bin counts with two tails read as empty unless they are significant
    (post-processing only):

    1. the bins above ``assumed`` records, unless their total is GATE_SDS standard deviations of
       its noise above 0 or one of them is above ``noise.gate_loud``: whether any user has more
       records than c per item allows;
    2. the bins above the last loud bin (``noise.loud``; those not set to 0 by 1), beyond the
       longest run from the first of them whose total is TAIL_SDS above 0
       (:func:`significant_run`): where the users stop at a count and the bins above hold noise
       alone."""
    out = np.asarray(counts, dtype=float).copy()
    live = np.ones(out.size, dtype=bool)
    beyond = edges[:-1] > assumed
    if beyond.any() and not (significant(out[beyond].sum(), int(beyond.sum()), noise.sd, GATE_SDS)
                             or out[beyond].max() > noise.gate_loud):
        out[beyond], live[beyond] = 0.0, False
    loud = np.flatnonzero(out > noise.loud)
    if loud.size:
        above = np.flatnonzero(live & (np.arange(out.size) > loud[-1]))
        kept = significant_run(out[above], noise.sd, TAIL_SDS)
        out[above[kept:]] = 0.0
    return out


def monotone_tail(counts: np.ndarray, edges: np.ndarray, start_at: int = MONOTONE_FROM) -> np.ndarray:
    """Noisy bin counts made non-increasing per record from the first bin at ``start_at`` records
    on (weighted isotonic regression of count/width, the widths as weights), then at least 0."""
    out = np.asarray(counts, dtype=float).copy()
    width = np.diff(edges).astype(float)
    first = int(np.searchsorted(edges[:-1], start_at))
    values: list[float] = []
    weights: list[float] = []
    sizes: list[int] = []
    for density, weight in zip(out[first:] / width[first:], width[first:]):
        values.append(density)
        weights.append(weight)
        sizes.append(1)
        while len(values) > 1 and values[-2] < values[-1]:  # pool adjacent violators
            value, weight_, size = values.pop(), weights.pop(), sizes.pop()
            values[-1] = (values[-1] * weights[-1] + value * weight_) / (weights[-1] + weight_)
            weights[-1] += weight_
            sizes[-1] += size
    if values:
        out[first:] = np.repeat(values, sizes) * width[first:]
    return np.maximum(out, 0.0)


@functools.lru_cache(maxsize=32)
def _moments(edges: tuple[int, ...], first: int, last: int) -> BinMoments:
    """BinMoments over every bound from ``first`` to ``last`` (U = last − first), by the edges."""
    return BinMoments.of(np.array(edges, dtype=np.int64), range(first, last + 1), last - first)


@dataclass(frozen=True)
class BinMoments:
    """Per bin, the mean over its record counts n (uniform within the bin) of what the estimate
    needs, for each bound b of ``bounds``: (n − b)⁺, SRA's sampling variance b·(n − b)⁺/n, and
    min((n − b_1)⁺, U)."""

    bounds: np.ndarray
    dropped: np.ndarray  # bins × bounds
    sampling: np.ndarray  # bins × bounds
    capped: np.ndarray  # bins

    @staticmethod
    def of(edges: np.ndarray, bounds: Sequence[int], user_cap: int) -> BinMoments:
        b = np.asarray(bounds, dtype=float)
        dropped, sampling, capped = [], [], []
        for low, high in zip(edges[:-1], edges[1:]):
            n = np.arange(low, high, dtype=float)[:, None]
            excess = np.maximum(n - b, 0)
            dropped.append(excess.mean(axis=0))
            sampling.append((b * excess / n).mean(axis=0))
            capped.append(np.minimum(np.maximum(n[:, 0] - b[0], 0), user_cap).mean())
        return BinMoments(np.asarray(bounds, dtype=np.int64), np.array(dropped), np.array(sampling), np.array(capped))


def estimated_errors(histogram: np.ndarray, anchor: float, moments: BinMoments, weight: Fraction,
                     noise: Sequence[Fraction | float]) -> np.ndarray:
    """The predicted error at each bound of ``moments.bounds``:
    H·S(b)² + W·V(b) + N(b), H = max(A, 0)²/max(S_U, 1)². ``histogram``: the users per bin
    (post-processed); ``anchor``: A, the scored tables' weighted bias norm in records
    (:func:`combined_value`); ``weight``: W = Σ_t w_t; ``noise``: N(b) = Σ_t w_t·N_t(b), the
    weighted noise variance at each bound (public: ErrorModel.noise_variance)."""
    users = np.asarray(histogram, dtype=float)
    dropped = users @ moments.dropped
    sampling = users @ moments.sampling
    capped = max(float(users @ moments.capped), 1.0)
    total = np.array([float(v) for v in noise])
    spread = max(float(anchor), 0.0) ** 2 / capped ** 2
    total += spread * dropped ** 2 + float(weight) * sampling
    return total


def best_bound(errors: np.ndarray, bounds: np.ndarray) -> int:
    """The bound of least predicted error, the smallest of equals."""
    return int(bounds[int(np.argmin(errors))])


# ---------------------------------------------------------------------------
# The whole choice: the statistics drawn through the budget, then the estimate's best bound.


@dataclass(frozen=True)
class EstimateChoice:
    """What the choice releases (DP outputs): the bound, the noisy users per bin of record counts
    (bins from ``record_bins``, public), and the noisy anchor in records, named by the scored
    tables (joined by " + " when there are several)."""

    bound: int
    record_bins: tuple[int, ...]
    record_counts_noisy: tuple[int, ...]
    anchors_noisy: dict[str, float]

    def to_json(self, bound_name: str) -> dict:
        """privacy.json's ``algorithm.chosen``."""
        return {bound_name: self.bound, "record_bins": list(self.record_bins),
                "record_counts_noisy": list(self.record_counts_noisy), "bias_anchors_noisy": dict(self.anchors_noisy)}


def choice_parts(epsilon: Fraction, zcdp_accounting: bool) -> tuple[Fraction, Fraction]:
    """(the histogram's ε, the anchor's ε) from the choice's part ``epsilon``: HISTOGRAM_SHARE of
    it and the rest; under zCDP the same shares of its ρ = ε²/2, each handed out as the ε_k with
    ε_k²/2 at most its share (rounded down)."""
    epsilon, share = Fraction(epsilon), HISTOGRAM_SHARE
    if not zcdp_accounting:
        return epsilon * share, epsilon * (1 - share)
    rho = zcdp.pure_cost(epsilon)
    return zcdp.epsilon_for_rho(rho * share), zcdp.epsilon_for_rho(rho * (1 - share))


def _noisy(budget: Budget, rng: RandomSource, step: str, values: np.ndarray, sensitivity: int,
           epsilon: Fraction) -> tuple[np.ndarray, LedgerEntry]:
    """``values`` (integers) with noise of the given L1 = L2 sensitivity at ``epsilon``: discrete
    Laplace under pure ε, the discrete Gaussian under zCDP, paid through ``budget`` first; and
    the noise's ledger entry."""
    entry = table_entry(step, GAUSSIAN if budget.zcdp else LAPLACE, sensitivity, sensitivity * sensitivity, epsilon,
                        values.size)
    return values + budget.noise(entry, rng).astype(np.int64), entry


def choose_bound(users_by_n: pd.Series, squared_anchors_at: Callable[[int], Sequence[int]],
                 tables: Sequence[str], candidates: Sequence[int], model: ErrorModel, item_cells: int,
                 epsilon: Fraction, budget: Budget, rng: RandomSource, step: str = "bound",
                 ranked: bool = False) -> EstimateChoice:
    """The whole choice with its part ``epsilon``: the histogram of ``users_by_n`` (users per
    record count, NOT private) with noise of sensitivity 1 (ledger step "<step>: record counts"),
    the anchor ⌈√(Σ_t w_t·‖A_t‖²)⌉ (``squared_anchors_at(U)``: each scored table's squared norm at
    b_1 with user cap U, in GRID² units) with noise of sensitivity ``combined_sensitivity`` (step
    "<step>: bias of <tables> (1/GRID records)"), then the bound from b_1 to b_K of least
    estimated error. ``model``: the public error model over every integer from b_1 to b_K (its
    noise variances), with the scored tables' weights and cells; ``item_cells``: the item domain's
    size; ``ranked``: the bound keeps each user's records of highest public score (HPA: the
    anchor's terms ranked by it, release.ranked_bias's model), not a uniform sample."""
    bounds = candidates_checked(candidates)
    every = np.arange(int(bounds[0]), int(bounds[-1]) + 1)
    if len(model.noise_variance) != every.size or model.cells is None:
        raise ValueError(f"the estimate needs the noise at each of the {every.size} bounds and each table's cells")
    weights = [w for w in model.weights if w]
    if not weights or len(weights) != len(model.weights) or len(tables) != len(weights):
        raise ValueError("the estimate needs one positive weight per scored table")
    user_cap = int(bounds[-1] - bounds[0])
    histogram_epsilon, anchor_epsilon = choice_parts(epsilon, budget.zcdp)
    edges = histogram_edges(item_cells, model.records_per_cell)
    squared = squared_anchors_at(user_cap)  # the Spark pass before any spending: a failure there spends nothing
    counts, counts_entry = _noisy(budget, rng, f"{step}: record counts", record_histogram(users_by_n, edges), 1,
                                  histogram_epsilon)
    name = " + ".join(tables)
    sensitivity = combined_sensitivity(model.records_per_cell, user_cap, model.cells, weights)
    noisy, _entry = _noisy(budget, rng, f"{step}: bias of {name} (1/{GRID} records)",
                           np.array([combined_value(squared, weights)], dtype=np.int64), sensitivity, anchor_epsilon)
    anchor = int(noisy[0])
    bound = bound_of(counts, anchor, edges, candidates, model, assumed_top(item_cells, model.records_per_cell),
                     HistogramNoise.of(counts_entry), ranked)
    return EstimateChoice(bound, tuple(int(e) for e in edges[:-1]), tuple(int(c) for c in counts),
                          {name: anchor / GRID})


def bound_of(counts: np.ndarray, anchor: int, edges: np.ndarray, candidates: Sequence[int],
             model: ErrorModel, assumed: int, noise: HistogramNoise, ranked: bool = False) -> int:
    """The bound from b_1 to b_K of least estimated error, from the users per bin ``counts``
    (noisy, as drawn, with ``noise``: NO_NOISE for statistics without) and the anchor (in 1/GRID
    records: :func:`combined_value` of the model's tables, with noise or without): the bins above
    ``assumed`` records gated, the tail made monotone, the estimate's least error; post-processing
    only. ``ranked``: a bound that keeps each user's records of highest public score (HPA), with
    release.ranked_bias's bias model rather than SRA's."""
    bounds = candidates_checked(candidates)
    moments = _moments(tuple(int(e) for e in edges), int(bounds[0]), int(bounds[-1]))
    histogram = monotone_tail(trimmed(counts, edges, assumed, noise), edges)
    if ranked:
        return best_bound(ranked_errors(histogram, edges, anchor / GRID, moments.bounds, model.records_per_cell,
                                        model.noise_variance), moments.bounds)
    errors = estimated_errors(histogram, anchor / GRID, moments, sum((w for w in model.weights if w), Fraction(0)),
                              model.noise_variance)
    return best_bound(errors, moments.bounds)


def pick_probabilities(users_by_n: pd.Series, squared_anchors: Sequence[int], tables: Sequence[str],
                       candidates: Sequence[int], model: ErrorModel, item_cells: int, epsilon: Fraction,
                       accounting, draws: int = 200, seed: int = 0, ranked: bool = False) -> dict[int, float]:
    """How often the choice picks each bound over ``draws`` runs of :func:`choose_bound` itself
    (fixed seeds), on these raw statistics (NOT private): for tune and the benchmarks. The
    distribution has no closed form; its error is that of ``draws`` samples."""
    picks: dict[int, int] = {}
    for draw in range(draws):
        budget = Budget(Fraction(10) ** 6, accounting=accounting)
        chosen = choose_bound(users_by_n, lambda _cap: squared_anchors, tables, candidates, model, item_cells,
                              epsilon, budget, RandomSource(seed * 1_000_003 + draw), ranked=ranked)
        picks[chosen.bound] = picks.get(chosen.bound, 0) + 1
    return {b: count / draws for b, count in sorted(picks.items())}
