"""Audit samplers for the quantiles per group (``families.aggregate.quantiles.choose``), and the
negative control.

The worst case of the quality's sensitivity: each of L groups holds values at the two end
candidates, C at each, so every candidate is a median (all score 0); D′ adds a user with C
values at the top candidate in each of the L groups, which moves the lower candidates' scores by
C·max(q, 1 − q) in every group at once, the whole of the summed sensitivity. The statistic is the
tuple of the L chosen candidates (one number in base K). Each trial is L rows of one call of the
sampler by rows: the rows are independent, so the trials are too.

The negative control runs the same choice at the sensitivity of one record in one group (l = c =
1) while the added user has C records in each of L groups: its true ε is up to L·C times the claim.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.aggregate import quantiles

CANDIDATES = quantiles.Candidates((1.0, 2.0, 3.0))
GROUPS = 3  # l: the added user's groups
RECORDS = 3  # c: the added user's records in each
LEVEL = Fraction(1, 2)
D_HISTOGRAM = (RECORDS, 0, RECORDS)  # each group in D: every candidate a median
ADDED = (0, 0, RECORDS)  # what the added user puts in each group


def choice_sampler(epsilon: Fraction, one_record: bool = False):
    """The L groups' chosen candidates as one number; D′ adds the user (with ``one_record`` the
    choice is paid as if a user moved one group by one record: the NEGATIVE CONTROL)."""
    l, c = (1, 1) if one_record else (GROUPS, RECORDS)

    def sample(side, trials, seed, _spark):
        group = np.add(D_HISTOGRAM, ADDED) if side else np.asarray(D_HISTOGRAM)
        histograms = np.tile(group, (trials * GROUPS, 1))
        chosen = quantiles.choose(histograms, CANDIDATES, LEVEL, epsilon, l, c, Budget(epsilon), RandomSource(seed),
                                  "quantile")
        index = CANDIDATES.nearest(chosen).reshape(trials, GROUPS)
        return (index * len(CANDIDATES) ** np.arange(GROUPS)).sum(axis=1).astype(float)
    return sample
