"""Private partition selection from records to released keys, for a family's run (issue 30):
bound each user to ``l0`` distinct keys, count users per key, release keys with the optimal
per-key probabilities. The claim: docs/partition_selection.md, "Privacy claim:
partition_selection".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from pyspark.sql import DataFrame

from dp_spark.aggregates.key_users import users_per_key
from dp_spark.algorithms.partition_selection import (GaussianSelection, SelectionParams, better_rule, select,
                                                      select_gaussian)
from dp_spark.bounding.user_keys import bounded_keys
from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.privacy import Budget


@dataclass(frozen=True)
class PrivateKeys:
    """The released keys, sorted (a DP output), and NOT private diagnostics for the operator."""

    keys: np.ndarray
    diagnostics: dict = field(default_factory=dict)


def private_keys(records: DataFrame, l0: int, epsilon: Fraction | float, delta: float, budget: Budget,
                 rng: RandomSource, seed: int | None, *, user_col: str = "user_id", key_col: str = "item_id",
                 step: str = "partition selection") -> PrivateKeys:
    """The keys of ``records[key_col]`` released by partition selection at (``epsilon``,
    ``delta``), spent through ``budget`` under ``step``. ``seed`` fixes the salt of the per-user
    bound (a seeded release has no guarantee anyway); ``rng`` draws the selection. Under zCDP
    accounting (``budget.zcdp``) the rule of lower median count is used, the Gaussian threshold or
    the optimal pure rule (``epsilon`` is then the share of ρ, as ε²/2)."""
    params = SelectionParams(epsilon, delta, l0)
    keys, users = users_per_key(bounded_keys(records, params.l0, seed, user_col, key_col), key_col)
    if budget.zcdp and better_rule(params.epsilon, params.delta, params.l0) == "gaussian":
        chosen = select_gaussian(keys, users, GaussianSelection(params.epsilon, params.delta, params.l0), budget,
                                 rng, step)
    else:
        chosen = select(keys, users, params, budget, rng, step)
    return PrivateKeys(chosen, {"keys_seen": int(keys.size), "keys_selected": int(chosen.size)})
