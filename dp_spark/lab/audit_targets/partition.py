"""Audit samplers for private partition selection (docs/partition_selection.md): the presence of
a user's keys on neighbouring inputs.

D′ adds one user who contributes to ``l0`` keys (the most the bound allows). On D each of those
keys has ``n`` users, on D′ ``n + 1``: ``n = 0`` is the case δ pays for (on D the keys are not
in the data at all, so they can never be released), and ``n`` one below the median count is
where the release probability moves fastest. The statistic is how many of the ``l0`` keys are released:
the keys are independent and alike, so that count carries all the information the released set
holds about the user. The claim audited is the whole (ε, δ) of the user, not a per-key share.

The trials are independent copies of the ``l0`` keys in one release (one Bernoulli per key), so
one call of :func:`dp_spark.release.partition_selection.select` gives every trial.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.release import partition_selection as ps


def released_per_trial(params: ps.SelectionParams, n: int, trials: int, seed: int, shift: int = 0) -> np.ndarray:
    """How many of the user's ``l0`` keys are released, per trial, when each has ``n`` users.
    ``shift`` > 0 is the NEGATIVE CONTROL: the table read ``shift`` users ahead, i.e. the
    threshold lowered by ``shift``."""
    keys = np.arange(trials * params.l0, dtype=np.int64)
    budget = Budget(params.epsilon, params.delta)
    if shift == 0:
        released = ps.select(keys, np.full(keys.size, n), params, budget, RandomSource(seed), "audit")
    else:
        table = ps.release_table(params)
        # A key with n users is released as if it had n + shift: π(1) is then above δ/l0.
        numerator = table[min(n + shift, len(table) - 1)] if n > 0 else 0
        entry = LedgerEntry("audit", "partition selection, threshold lowered", params.epsilon, Fraction(params.l0),
                            Fraction(params.l0) / params.epsilon, 0, not_private="threshold lowered",
                            delta=params.delta)
        released = keys[budget.bernoulli_dyadic(entry, RandomSource(seed), np.full(keys.size, numerator),
                                                ps.GRID_BITS)]
    return np.bincount(released // params.l0, minlength=trials).astype(float)


def presence_sampler(params: ps.SelectionParams, n: int, shift: int = 0):
    """Side 0: the user's keys have ``n`` users each; side 1: ``n + 1``."""
    def sample(side, trials, seed, _spark):
        return released_per_trial(params, n + side, trials, seed, shift)
    return sample
