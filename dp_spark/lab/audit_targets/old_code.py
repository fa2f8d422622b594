"""NEGATIVE CONTROLS built from code paths that a privacy review found broken.

The real modules are fixed, so the old logic is copied here, verbatim in what matters, for the
audit to run against: an audit that does not flag these cannot be trusted to flag anything. None
of this code is used by a job.

* :func:`old_smooth_entropy_sampler`: Limit-SS as it was, with the smooth scale rounded up to grid
  units, units = ⌈SS/2^-16⌉ + 1 and scale 2M·units/ε on the grid. Between n and n + 1 users the
  units can jump by one (68 → 67 at n = 13,542, C = M = 5, δ = 1e-8, ε = 0.1), a factor 1.015 where
  β-smoothness allows e^β′ = 1.0005. Also, with the paper's β = ε/(2 ln(2/δ)) in place of
  β′ = ε/(2M ln(2M/δ)), the ``limit_ss_paper_beta`` control.
* :func:`old_ran_gd_sampler`: RAN-GD as it was, keep probability (γ−1)x + r·n_C/(n_C−1) with
  r ~ U[−γx/2, γx/2], in doubles. For γ < 2 it goes negative and acts as 0, which raises the mean
  keep probability: at γ = 1.1 the true ε is 0.176 on n_C = 2000 and 0.219 on n_C = 4, against
  ln γ = 0.095. The control runs on n_C = 4: the excess is there for every n_C, and on 2000
  records the events have probability ~6e-4, which would need ~50M releases per side to flag.
* :func:`old_ledger_sampler`: the ledger's noise scale as Limit-SS wrote it, min over locations of
  the realised scales: it falls as the largest user count grows, and is published unnoised.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource, scale_at_least
from dp_spark.families.location_entropy import sensitivity as sens

GRID_BITS = 16
UNIT = 1 << GRID_BITS
DRAW_BLOCK = 1_000_000  # discrete Laplace draws per run of the sampler


# ---------------------------------------------------------------------------
# Limit-SS as it was: the smooth table, the rounded units and the scale per location.


def old_units(smooth: float) -> int:
    """The old code's rounding: ⌈SS/g⌉ + 1 grid units."""
    return math.ceil(smooth * UNIT) + 1


def old_scales(users: np.ndarray, C: int, M: int, epsilon: Fraction, delta: float, xi: float,
               beta: float | None = None) -> list[Fraction]:
    """Per location, the old discrete Laplace scale 2M·units/ε in grid units."""
    # The table itself was right and is unchanged (entropy_sensitivity); the rounding below was the flaw.
    table = sens.smooth_sensitivity_table(C, M, float(epsilon), delta, int(max(users.max(initial=1), 1)), xi, beta)
    return [scale_at_least(Fraction(2 * M * old_units(table[n])) / epsilon) for n in users]


def old_smooth_entropy_sampler(visits: tuple[np.ndarray, np.ndarray], C: int, M: int, epsilon: Fraction,
                               delta: float, xi: float, beta: float | None = None, fold: bool = False):
    """NEGATIVE CONTROL: one location's noisy entropy with the old rounded scale (every trial is
    a copy of the location, as in one release). ``fold``: the statistic is |release − H(D)|, both
    tails at once, where a larger scale shows (post-processing by a public constant)."""
    scales: list[Fraction] = []  # both sides' scales, from one smooth sensitivity table (a second of work)

    def sample(side, trials, seed, _spark):
        counts = visits[side]
        entropy = entropy_of(counts)
        if not scales:
            scales.extend(old_scales(np.array([v.size for v in visits]), C, M, epsilon, delta, xi, beta))
        scale = scales[side]
        on_grid = round(entropy * UNIT)
        # Drawn through a budget like every noise outside core; the entry says what this control is.
        entry = LedgerEntry("negative control", "old Limit-SS: discrete Laplace at the old rounded scale", epsilon,
                            scale / UNIT * epsilon, scale / UNIT, trials, not_private="old, broken Limit-SS scale")
        # In runs of a million draws: the sampler's temporary arrays then stay a size the allocator
        # reuses, and 12,000,000 draws took half the time they took in one run.
        blocks = [min(DRAW_BLOCK, trials - start) for start in range(0, trials, DRAW_BLOCK)]
        noisy = (on_grid + Budget(epsilon).discrete_laplace(entry, RandomSource(seed), grid=Fraction(1, UNIT),
                                                            blocks=blocks)) / UNIT
        return np.abs(noisy - entropy_of(visits[0])) if fold else noisy
    return sample


def entropy_of(counts: np.ndarray) -> float:
    return float(math.log(counts.sum()) - (counts * np.log(counts)).sum() / counts.sum())


def old_ledger_sampler(users: tuple[tuple[int, ...], tuple[int, ...]], C: int, M: int, epsilon: Fraction,
                       delta: float, xi: float):
    """NEGATIVE CONTROL: the ledger's noise_scale as the old Limit-SS wrote it, min(scales)/g. It
    is deterministic: the statistic is one value per side."""
    def sample(side, trials, _seed, _spark):
        scale = min(old_scales(np.array(users[side]), C, M, epsilon, delta, xi)) / UNIT
        return np.full(trials, float(scale))
    return sample


# ---------------------------------------------------------------------------
# RAN-GD as it was.

CHUNK = 1 << 20  # records perturbed per call, to bound memory


def old_perturb_ran_gd(codes: np.ndarray, sizes: list[int], gamma: Fraction, rng: RandomSource) -> np.ndarray:
    """The old randomised branch of ``frapp.perturb_gd``: keep with (γ−1)x + r·n_C/(n_C−1),
    r uniform on [−γx/2, γx/2], compared in doubles; a negative probability keeps never."""
    n_c = math.prod(sizes)
    x = Fraction(1) / (gamma + n_c - 1)
    keep_probability = (gamma - 1) * x
    n = codes.shape[0]
    alpha = float(gamma * x / 2)
    r = ((rng.words(n) >> np.uint64(11)).astype(float) / 2.0**53 * 2 - 1) * alpha
    u = (rng.words(n) >> np.uint64(11)).astype(float) / 2.0**53
    keep = u < float(keep_probability) + r * n_c / (n_c - 1)
    uniform = np.column_stack([rng.below(np.full(n, s, dtype=np.uint64)).astype(np.int64) for s in sizes])
    return np.where(keep[:, None], codes, uniform)


def match_code(out: np.ndarray, records: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """0 where a perturbed record equals D's record, 1 where it equals D′'s, 2 otherwise: for the
    gamma-diagonal schemes every other record is equally likely on both sides."""
    is_d = (out == records[0]).all(axis=1)
    is_d2 = (out == records[1]).all(axis=1)
    return np.where(is_d, 0, np.where(is_d2, 1, 2)).astype(float)


def old_ran_gd_sampler(sizes: list[int], gamma: Fraction, records: tuple[np.ndarray, np.ndarray]):
    """NEGATIVE CONTROL: one record perturbed by the old RAN-GD, D's record against D′'s."""
    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        parts = []
        for start in range(0, trials, CHUNK):
            size = min(CHUNK, trials - start)
            parts.append(match_code(old_perturb_ran_gd(np.tile(records[side], (size, 1)), sizes, gamma, rng),
                                    records))
        return np.concatenate(parts)
    return sample


def old_ran_gd_epsilon(gamma: Fraction, n_c: int) -> float:
    """The old sampler's true ε: the worst ratio 1 + n_C·E[k⁺]/(1 − E[k⁺]) of its output
    probabilities, E[k⁺] the mean of the clipped keep probability k uniform on [a − w, a + w]."""
    x = 1 / (float(gamma) + n_c - 1)
    a, w = (float(gamma) - 1) * x, float(gamma) * x / 2 * n_c / (n_c - 1)
    low, high = a - w, min(a + w, 1.0)
    mean_kept = a if low >= 0 else high * high / (2 * (2 * w))
    return math.log(1 + n_c * mean_kept / (1 - mean_kept))

