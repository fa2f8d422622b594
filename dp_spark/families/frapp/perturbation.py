"""FRAPP (Agrawal & Haritsa, ICDE 2005): local perturbation of categorical records and
frequent-itemset mining with support reconstruction (specification §6). Pure numpy.

Every record (one per user) is one value index per attribute over public domains
S^1..S^M, n_C = Π|S^j| possible records. Schemes, all ε-local DP with the ε below
(one record changes to any other; the worst output-probability ratio is bounded):

* ``det_gd``: with probability (γ − 1)x keep the record, else replace it by a uniform
  record, x = 1/(γ + n_C − 1). Then P(v = u) = γx and P(v = w) = x for w ≠ u: every ratio
  A_vu1/A_vu2 is at most γ, which is ε = ln γ local DP (§6 "DP reading", §6.1). The keep
  draw compares exact uniform integers, so the probabilities are exact for rational γ.
* ``ran_gd``: det_gd with a fresh r per record added to the keep probability (scaled by
  n_C/(n_C − 1)); r is one of K = 1024 equally likely points spread evenly over [−α, α], α the
  paper's γx/2 unless that would push the keep probability outside [0, 1] (then α is smaller:
  :func:`ran_gd_alpha`). Every keep probability is an exact fraction and their mean is exactly
  (γ − 1)x; r is never revealed, so the law of the output given the input is det_gd's: the
  guarantee is ln γ for every γ > 1, not better (§6.3 [FIX], docs/frapp.md).
* ``mask``: every record becomes Σ|S^j| one-hot bits; each bit is kept with probability p
  and flipped otherwise, p = γ^(1/2M)/(1 + γ^(1/2M)) rounded down to the grid 2^-32, so the
  ratio (p/(1 − p))^(2M) stays ≤ γ (§6.4).
* ``cut_paste``: J uniform on {0..K}, j = min(J, M) of the record's M items copied, every
  other item of the universe inserted with probability ρ (§6.5). Worst ratio
  γ_CP = Σ_j P[j]·ρ^−j / P[0]; ρ is the smallest grid value (2^-32) with γ_CP ≤ γ unless given.

Reconstruction: det_gd/ran_gd in closed form (§6.2); mask by per-record weights (§6.4);
cut_paste by solving the (k+1)-system of partial supports (§6.5). Claim: docs/frapp.md, "Privacy claim: frapp".
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark.core.mechanisms import RandomSource

SCHEMES = ("det_gd", "ran_gd", "mask", "cut_paste")
BIT_SCHEMES = ("mask", "cut_paste")  # perturbed records are bit sets, not value indices
GRID = 1 << 32
PAPER_CP_K = 3
RAN_GD_POINTS = 1024  # K: RAN-GD's r takes K equally likely values, a public constant
SPEC_SECTIONS = {"det_gd": "docs/specification.md §6.1-6.2", "ran_gd": "docs/specification.md §6.3",
                 "mask": "docs/specification.md §6.4", "cut_paste": "docs/specification.md §6.5"}

Itemset = tuple  # ((attribute index, value index), ...) sorted by attribute


@dataclass(frozen=True)
class Attribute:
    """A public domain: ``labels[i]`` names value i."""

    name: str
    labels: tuple[str, ...]


def record_space(sizes: list[int]) -> int:
    return math.prod(sizes)


def gamma_x(gamma: Fraction, n_c: int) -> Fraction:
    return Fraction(1) / (gamma + n_c - 1)


def gamma_below(epsilon: Fraction) -> Fraction:
    """The largest γ on the grid 2^-32 with ln γ ≤ ε (one grid step of slack for exp's rounding)."""
    return Fraction(math.floor(math.exp(float(epsilon)) * GRID) - 1, GRID)


def ran_gd_alpha(gamma: Fraction, n_c: int) -> Fraction:
    """The half-width α of RAN-GD's r: the paper's γx/2, unless some r in [−α, α] would then give a
    keep probability (γ − 1)x + r·n_C/(n_C − 1) outside [0, 1]. A sampler would have to clip such a
    probability, which raises the mean keep probability above (γ − 1)x and the worst ratio above γ.
    The lower end stays ≥ 0 while α·n_C/(n_C − 1) ≤ (γ − 1)x, which γx/2 breaks for
    γ < 2(n_C − 1)/(n_C − 2); the upper end stays ≤ 1 while α·n_C/(n_C − 1) ≤ 1 − (γ − 1)x = n_C·x,
    which γx/2 breaks for γ > 2(n_C − 1). α is the smallest of the three (0 when n_C = 1: a single
    possible record leaves nothing to randomise)."""
    if n_c < 2:
        return Fraction(0)
    x = gamma_x(gamma, n_c)
    return min(gamma * x / 2, (gamma - 1) * x * (n_c - 1) / n_c, x * (n_c - 1))


@functools.lru_cache(maxsize=32)
def ran_gd_keep_probabilities(gamma: Fraction, n_c: int) -> tuple[Fraction, ...]:
    """RAN-GD's K equally likely keep probabilities (γ − 1)x + r_i·n_C/(n_C − 1), with
    r_i = α·(2i + 1 − K)/K, i = 0..K−1: the midpoints of K equal cells of [−α, α]. They are
    symmetric around 0, so the mean is exactly (γ − 1)x, and all lie strictly inside (0, 1)."""
    keep = (gamma - 1) * gamma_x(gamma, n_c)
    if n_c < 2:
        return (keep,) * RAN_GD_POINTS
    shift = ran_gd_alpha(gamma, n_c) * Fraction(n_c, n_c - 1)
    return tuple(keep + shift * Fraction(2 * i + 1 - RAN_GD_POINTS, RAN_GD_POINTS) for i in range(RAN_GD_POINTS))


def gd_worst_ratio(keep_probabilities, n_c: int) -> Fraction:
    """The exact worst ratio P(v | u1)/P(v | u2) over outputs v and records u1 ≠ u2 of a
    γ-diagonal scheme that keeps each record with a probability drawn uniformly (afresh per
    record, never revealed) from ``keep_probabilities``, and otherwise outputs a uniform record.

    Only the mean k̄ of the keep probability matters: P(v = u | u) = k̄ + (1 − k̄)/n_C and
    P(v | u) = (1 − k̄)/n_C for v ≠ u, so the worst ratio is 1 + n_C·k̄/(1 − k̄) (γ when
    k̄ = (γ − 1)x). The entries must be the probabilities the sampler really uses, already clipped."""
    keep_probabilities = [Fraction(k) for k in keep_probabilities]
    if not keep_probabilities or any(not 0 <= k <= 1 for k in keep_probabilities):
        raise ValueError("keep probabilities must be a non-empty list of numbers in [0, 1]")
    if n_c < 2:
        return Fraction(1)  # one possible record: no two records to tell apart
    mean = sum(keep_probabilities, Fraction(0)) / len(keep_probabilities)
    if mean == 1:
        raise ValueError("a record kept with probability 1 has no finite ratio")
    return 1 + n_c * mean / (1 - mean)


def epsilon_of(ratio: Fraction | float) -> Fraction:
    """ln(ratio) rounded up to a multiple of 10^-9 (the ledger may only over-count)."""
    return Fraction(math.ceil(math.log(float(ratio)) * 10**9) + 1, 10**9)


def mask_p(gamma: Fraction, m: int) -> Fraction:
    """MASK's keep probability, rounded down to the grid (p > 1/2: rounding down lowers the ratio)."""
    root = float(gamma) ** (1 / (2 * m))
    p = Fraction(math.floor(root / (1 + root) * GRID), GRID)
    while mask_ratio(p, m) > gamma:  # only if the double root was rounded up
        p -= Fraction(1, GRID)
    return p


def mask_ratio(p: Fraction, m: int) -> Fraction:
    """The worst output-probability ratio of MASK: 2M bits can differ between two records."""
    return (p / (1 - p)) ** (2 * m)


def cp_copy_probabilities(k: int, m: int) -> np.ndarray:
    """P[j] for j = 0..m: j = min(J, m) with J uniform on {0..K}."""
    out = np.zeros(m + 1)
    for big_j in range(k + 1):
        out[min(big_j, m)] += 1 / (k + 1)
    return out


def cp_ratio(rho: float, k: int, m: int) -> float:
    """γ_CP = Σ_j P[j]·ρ^−j / P[0] (§6.5)."""
    p = cp_copy_probabilities(k, m)
    return float(sum(p[j] * rho ** -j for j in range(m + 1)) / p[0])


def cp_rho(gamma: Fraction, k: int, m: int) -> Fraction:
    """The smallest ρ on the grid with γ_CP(ρ) ≤ γ (γ_CP falls as ρ grows; ρ = 1 gives K' + 1)."""
    if cp_ratio(1.0, k, m) >= float(gamma):
        raise ValueError(f"gamma {float(gamma):g} is too small for Cut-and-Paste with K = {k}: even rho = 1 gives "
                         f"a ratio of {cp_ratio(1.0, k, m):g}; lower K")
    low, high = 0, GRID  # invariant: ratio(low/GRID) > γ ≥ ratio(high/GRID)
    while high - low > 1:
        mid = (low + high) // 2
        if mid == 0 or cp_ratio(mid / GRID, k, m) > float(gamma):
            low = mid
        else:
            high = mid
    return Fraction(high, GRID)


# ---------------------------------------------------------------------------
# Samplers: a block of records at a time, exact integer draws from a RandomSource.


def _bernoulli(rng: RandomSource, n: int, probability: Fraction) -> np.ndarray:
    """n exact Bernoulli(probability) draws (probability a fraction)."""
    return rng.below(np.full(n, probability.denominator, dtype=np.uint64)) < np.uint64(probability.numerator)


def bernoulli_of_table(rng: RandomSource, probabilities, index: np.ndarray) -> np.ndarray:
    """Exact Bernoulli(probabilities[index[j]]) for each j, whatever the denominators (they may
    exceed 2^64): a uniform U in [0, 1), read 64 bits at a time, is compared with the binary
    expansion of the probability; U < p is settled at the first 64-bit word where the two differ.
    A tie (chance 2^-64 per word) reads the next word. Every probability must be < 1."""
    firsts = [math.floor(p * 2**64) for p in probabilities]
    if max(firsts) >= 2**64 or min(firsts) < 0:
        raise ValueError("probabilities must lie in [0, 1)")
    target = np.array(firsts, dtype=np.uint64)[index]
    word = rng.words(index.size)
    out = word < target
    for j in np.flatnonzero(word == target):
        rest = probabilities[index[j]] * 2**64 - firsts[index[j]]  # the expansion still unread, in [0, 1)
        while True:
            rest *= 2**64
            digit = math.floor(rest)
            rest -= digit
            drawn = int(rng.words(1)[0])
            if drawn != digit:
                out[j] = drawn < digit
                break
    return out


def _uniform_records(rng: RandomSource, n: int, sizes: list[int]) -> np.ndarray:
    return np.column_stack([rng.below(np.full(n, s, dtype=np.uint64)).astype(np.int64) for s in sizes])


def perturb_gd(codes: np.ndarray, sizes: list[int], gamma: Fraction, rng: RandomSource,
               randomized: bool = False) -> np.ndarray:
    """codes [records, M] → perturbed codes (DET-GD, or RAN-GD with ``randomized``)."""
    n = codes.shape[0]
    keep = gd_keep(rng, n, gamma, record_space(sizes), randomized)
    return np.where(keep[:, None], codes, _uniform_records(rng, n, sizes))


def gd_keep(rng: RandomSource, n: int, gamma: Fraction, n_c: int, randomized: bool = False) -> np.ndarray:
    """Which of n records DET-GD (or RAN-GD) keeps; the others become uniform records."""
    if not randomized:
        return _bernoulli(rng, n, (gamma - 1) * gamma_x(gamma, n_c))
    # One of RAN-GD's K exact keep probabilities per record, uniformly: their mean is exactly
    # (γ−1)x, so the output's law given the input is det_gd's (§6.3, docs/frapp.md).
    point = rng.below(np.full(n, RAN_GD_POINTS, dtype=np.uint64)).astype(np.int64)
    return bernoulli_of_table(rng, ran_gd_keep_probabilities(gamma, n_c), point)


def perturb_mask(codes: np.ndarray, sizes: list[int], p: Fraction, rng: RandomSource) -> np.ndarray:
    """codes [records, M] → per attribute the bit set (bit v = value v) of the perturbed one-hot bits."""
    n = codes.shape[0]
    out = np.zeros((n, len(sizes)), dtype=np.int64)
    for j, size in enumerate(sizes):
        for value in range(size):
            flip = ~_bernoulli(rng, n, p)
            out[:, j] |= ((codes[:, j] == value) ^ flip).astype(np.int64) << value
    return out


def perturb_cut_paste(codes: np.ndarray, sizes: list[int], k: int, rho: Fraction, rng: RandomSource) -> np.ndarray:
    """codes [records, M] → per attribute the bit set of the perturbed record: j = min(J, M) of the
    record's items kept (a uniform j-subset), every other item inserted with probability ρ."""
    n, m = codes.shape
    j = np.minimum(rng.below(np.full(n, k + 1, dtype=np.uint64)).astype(np.int64), m)
    # A uniform j-subset of the M attributes: the j with the smallest random keys.
    keys = rng.words(n * m).reshape(n, m)
    rank = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")
    copied = rank < j[:, None]
    out = np.zeros((n, m), dtype=np.int64)
    for a, size in enumerate(sizes):
        for value in range(size):
            present = _bernoulli(rng, n, rho) | (copied[:, a] & (codes[:, a] == value))
            out[:, a] |= present.astype(np.int64) << value
    return out


# ---------------------------------------------------------------------------
# Statistics per level and reconstruction.


def _item_bits(table: np.ndarray, itemset: Itemset) -> np.ndarray:
    """[records, k] 0/1: which of the itemset's items each (bit-set) record holds."""
    return np.column_stack([(table[:, a] >> v) & 1 for a, v in itemset])


def level_statistics(table: np.ndarray, candidates: list[Itemset], scheme: str,
                     p: Fraction | None = None) -> np.ndarray:
    """Per block of records, the sums one level needs, concatenated over the candidates:
    exact/det_gd/ran_gd: records matching; mask: Σ Π w(bit); cut_paste: records holding
    exactly l' of the k items, l' = 0..k (k + 1 numbers)."""
    out = []
    if scheme == "mask":
        w0, w1 = mask_weights(p)
    for itemset in candidates:
        if scheme in BIT_SCHEMES:
            bits = _item_bits(table, itemset)
            if scheme == "mask":
                out.append(np.where(bits == 1, w1, w0).prod(axis=1).sum())
            else:
                out.extend(np.bincount(bits.sum(axis=1), minlength=len(itemset) + 1))
        else:
            match = np.ones(table.shape[0], dtype=bool)
            for a, v in itemset:
                match &= table[:, a] == v
            out.append(match.sum())
    return np.asarray(out, dtype=float)


def statistics_length(candidates: list[Itemset], scheme: str) -> int:
    return sum(len(c) + 1 for c in candidates) if scheme == "cut_paste" else len(candidates)


def reconstruct_gd(perturbed_support: float, itemset: Itemset, sizes: list[int], gamma: Fraction) -> float:
    """§6.2's closed form: the unbiased estimate of the original support."""
    n_c = record_space(sizes)
    n_cs = math.prod(sizes[a] for a, _ in itemset)
    x = float(gamma_x(gamma, n_c))
    return (perturbed_support - (n_c / n_cs) * x) / ((float(gamma) - 1) * x)


def mask_weights(p: Fraction) -> tuple[float, float]:
    """(w(0), w(1)) of §6.4: E[w(bit)] is 1 when the original bit is 1, and 0 when it is 0."""
    p = float(p)
    return -(1 - p) / (2 * p - 1), p / (2 * p - 1)


def cp_transition(k: int, m: int, cp_k: int, rho: float) -> np.ndarray:
    """P[l', l] = P(perturbed record holds l' of a k-itemset's items | original holds l) (§6.5)."""
    copy = cp_copy_probabilities(cp_k, m)
    out = np.zeros((k + 1, k + 1))
    for l in range(k + 1):
        for j in range(m + 1):
            if copy[j] == 0:
                continue
            for q in range(max(0, j - (m - l)), min(l, j) + 1):
                chosen = math.comb(l, q) * math.comb(m - l, j - q) / math.comb(m, j)
                for l2 in range(q, k + 1):
                    out[l2, l] += (copy[j] * chosen * math.comb(k - q, l2 - q) * rho ** (l2 - q)
                                   * (1 - rho) ** (k - l2))
    return out


def reconstruct_cp(partial: np.ndarray, m: int, cp_k: int, rho: float) -> float:
    """Original support from the fractions holding exactly l' = 0..k items: solve s' = P·s, take s_k.

    At most K of an itemset's items are ever copied, so P has rank ≤ K + 1: for k > K it is
    singular and the least-squares (minimum-norm) solution is all there is; this is why
    Cut-and-Paste cannot mine itemsets longer than K (paper 003: it fails beyond length 3)."""
    k = len(partial) - 1
    return float(np.linalg.lstsq(cp_transition(k, m, cp_k, rho), partial, rcond=None)[0][k])


def reconstruct(stats: np.ndarray, candidates: list[Itemset], scheme: str, sizes: list[int], rows: int,
                gamma: Fraction | None = None, cp_k: int = PAPER_CP_K, rho: Fraction | None = None) -> list[float]:
    """Supports (fractions of ``rows``) from the summed level statistics."""
    if scheme == "cut_paste":
        out, at = [], 0
        for c in candidates:
            out.append(reconstruct_cp(stats[at:at + len(c) + 1] / rows, len(sizes), cp_k, float(rho)))
            at += len(c) + 1
        return out
    observed = [float(s) / rows for s in stats]
    if scheme in ("exact", "mask"):
        return observed
    return [reconstruct_gd(s, c, sizes, gamma) for s, c in zip(observed, candidates)]


def condition_number(scheme: str, length: int, sizes: list[int], gamma: Fraction | None = None,
                     p: Fraction | None = None, cp_k: int = PAPER_CP_K, rho: Fraction | None = None) -> float:
    """Of the matrix each scheme inverts for itemsets of ``length`` items (2-norm)."""
    if scheme in ("det_gd", "ran_gd"):
        return float((gamma + record_space(sizes) - 1) / (gamma - 1))
    if scheme == "mask":  # the length-fold Kronecker power of [[p, 1−p], [1−p, p]]
        return (1 / (2 * float(p) - 1)) ** length
    return float(np.linalg.cond(cp_transition(length, len(sizes), cp_k, float(rho))))


# ---------------------------------------------------------------------------
# Apriori and the accuracy metrics.


def first_level(sizes: list[int]) -> list[Itemset]:
    return [((a, v),) for a, size in enumerate(sizes) for v in range(size)]


def next_candidates(frequent: list[Itemset]) -> list[Itemset]:
    """Apriori-gen: join itemsets sharing all but their last item (on different attributes),
    prune those with an infrequent subset."""
    known = set(frequent)
    out = set()
    for a, b in itertools.combinations(sorted(frequent), 2):
        if a[:-1] == b[:-1] and a[-1][0] != b[-1][0]:
            joined = tuple(sorted(a + (b[-1],)))
            if all(sub in known for sub in itertools.combinations(joined, len(joined) - 1)):
                out.add(joined)
    return sorted(out)


def apriori(support_of, first: list[Itemset], sup_min: float, progress=lambda _m: None) -> dict[Itemset, float]:
    """Level-wise mining: ``support_of(candidates) -> supports`` is called once per level."""
    found: dict[Itemset, float] = {}
    candidates = first
    while candidates:
        supports = support_of(candidates)
        frequent = [c for c, s in zip(candidates, supports) if s >= sup_min]
        progress(f"length {len(candidates[0])}: {len(candidates)} candidates, {len(frequent)} frequent")
        found.update({c: s for c, s in zip(candidates, supports) if s >= sup_min})
        candidates = next_candidates(frequent)
    return found


def itemset_label(itemset: Itemset, attributes: list[Attribute]) -> str:
    return ", ".join(f"{attributes[a].name}={attributes[a].labels[v]}" for a, v in itemset)


def accuracy(truth: dict[Itemset, float], found: dict[Itemset, float]) -> dict[int, dict[str, float]]:
    """M8 per itemset length: ρ (mean relative support error over F ∩ R, in %), σ+ and σ− (in %
    of |F|), and |R|."""
    out = {}
    for length in sorted({len(i) for i in truth} | {len(i) for i in found}):
        f = {i for i in truth if len(i) == length}
        r = {i for i in found if len(i) == length}
        both = f & r
        rho = 100 * sum(abs(found[i] - truth[i]) / truth[i] for i in both) / len(both) if both else math.nan
        out[length] = {"frequent_itemsets": float(len(r)), "support_error": rho,
                       "sigma_plus": 100 * len(r - f) / len(f) if f else math.nan,
                       "sigma_minus": 100 * len(f - r) / len(f) if f else math.nan}
    return out
