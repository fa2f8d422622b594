"""Audit samplers for the private choice of the means' clipping range (``clip_choice.choose_clip``),
and its negative control.

The whole choice is audited at its part ε: the user count, low and high (the statistic is the
chosen pair; the count's discrete Laplace is audited on its own). The neighbours came from a
search over small tables of values between the candidates 0 to 4 (and beyond them), for the
largest exact privacy loss of the pair at ε = 1 with q at its ceiling 1/4 (which four users give at
every ε of the grid): D holds four users' values at the top, D′ adds one low value, and the
pair's loss is about 0.39 of the claimed 1 (the rest of the claim is the mechanism's bound 2Δq,
which this quality's scores, moving mostly together, never reach, and the count's tenth). That
search ran before each side's values were clamped to its candidates; a review's search over up to
five users after it found pairs a little higher (0.41 at ε = 1, 2.19 at ε = 5).

The negative control counts every record of the added user, twenty of them at that value, where
the choice assumes one value per user: the ranks then move by twenty. With ten the control was
caught at seed 5 by 1.20 against 1 only (5,000 releases a side); with twenty, 2.85 to 3.45 at
seeds 1, 3 and 5.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.release import clip_choice

CANDIDATES = (0.0, 1.0, 2.0, 3.0, 4.0)
VALUES = (3.5, 3.5, 4.5, 4.5)  # D: one value per user
ADDED = 1.5  # D′'s user
HEAVY_RECORDS = 20  # the negative control's added user: this many records, all counted


def ranks(values) -> tuple[np.ndarray, np.ndarray, int]:
    """(below, at_most, n) of the candidates among ``values``."""
    v = np.asarray(values, dtype=float)
    return (np.array([(v < b).sum() for b in CANDIDATES]), np.array([(v <= b).sum() for b in CANDIDATES]), v.size)


def choice_sampler(epsilon: Fraction, every_record: bool = False):
    """The chosen (low, high) as one number, low's index·K + high's; D′ adds one value (with
    ``every_record``, HEAVY_RECORDS of them: the NEGATIVE CONTROL)."""
    def sample(side, trials, seed, _spark):
        added = [ADDED] * (HEAVY_RECORDS if every_record else 1) if side else []
        below, at_most, n = ranks(list(VALUES) + added)
        rng = RandomSource(seed)
        out = np.empty(trials)
        for i in range(trials):
            choice = clip_choice.choose_clip(CANDIDATES, below, at_most, n, None, None, epsilon, Budget(epsilon), rng)
            out[i] = CANDIDATES.index(choice.low) * len(CANDIDATES) + CANDIDATES.index(choice.high)
        return out
    return sample
