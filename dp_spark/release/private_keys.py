"""Private partition selection from records to released keys, for a family's run:
bound each user to ``l0`` distinct keys, count users per key, release keys with the optimal
per-key probabilities. The claim: docs/partition_selection.md, "Privacy claim:
partition_selection". Also the config side of ``domain.items = "private"`` that the counts and the
means share, and the selected items as a release's domain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from pyspark.sql import DataFrame

from dp_spark.aggregates.key_users import users_per_key
from dp_spark.bounding.user_keys import bounded_keys
from dp_spark.core.domain import ItemDomain, item_domain_of_ids
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError
from dp_spark.io.validation import keyed_by_user
from dp_spark.release.family import RunInputs, rows_per_user
from dp_spark.release.partition_selection import (
    GaussianSelection,
    SelectionParams,
    better_rule,
    select,
    select_gaussian,
)

PRIVATE_ITEMS = "private"  # domain.items: the items selected privately (release.partition_selection)
# Partition selection's distinct items per user unless algorithm.keys_per_user says otherwise: each
# key gets ε_partition/10, so at ε = 1, δ = 1e-6 an item needs about 260 users to be released as
# often as not (docs/partition_selection.md), where l = 30 would need about 750.
DEFAULT_KEYS_PER_USER = 10
PARTITION_SHARE = Fraction(1, 2)  # of ε, to select the items (as PipelineDP shares it with one metric)
# Under zCDP, partition selection spends this part of privacy.delta outside zCDP (its threshold's δ);
# the conversion of ρ to (ε, δ) gets the rest (docs/partition_selection.md, "Under zCDP").
PARTITION_DELTA_SHARE = Fraction(1, 2)


def partition_delta(delta: float, zcdp: bool) -> float:
    """The δ partition selection spends: all of privacy.delta, or under zCDP its share."""
    return float(delta) * float(PARTITION_DELTA_SHARE) if zcdp else float(delta)


def checked_private_items(private: bool, keys_per_user: Any, delta: Any) -> tuple[int | None, float]:
    """(keys_per_user, delta) checked: with items selected privately, l0 (default
    DEFAULT_KEYS_PER_USER) and partition selection's δ in (0, 1); without, neither may be given."""
    if not private:
        if keys_per_user is not None or delta != 0.0:
            raise ConfigError(f"algorithm.keys_per_user and privacy.delta are used only with "
                              f"domain.items = \"{PRIVATE_ITEMS}\"")
        return None, 0.0
    keys_per_user = rows_per_user(DEFAULT_KEYS_PER_USER if keys_per_user is None else keys_per_user,
                                  "algorithm.keys_per_user")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ConfigError(f"domain.items = \"{PRIVATE_ITEMS}\" needs privacy.delta in (0, 1) for partition "
                          f"selection, got {delta!r}")
    return keys_per_user, float(delta)


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


# The progress line of a release whose selection kept no item (the tables are then empty).
NOTHING_SELECTED = ("WARNING: no item was selected; the tables are empty (too few users per item for this "
                    "epsilon_partition and delta)")


def items_text(private: bool, delta: float, keys_per_user: int | None, domains_items) -> str:
    """How a release's description names its items: selected privately, or the public domain's count."""
    if private:
        return f"items selected privately (delta {delta:g}, at most {keys_per_user} per user)"
    return f"{len(domains_items):,} items"


@dataclass(frozen=True)
class SelectedItems:
    domain: Any  # ItemDomain of the released keys (a DP output)
    diagnostics: dict  # NOT private


def selected_items(inputs: RunInputs, keys_per_user: int, delta: float) -> SelectedItems:
    """The items partition selection releases (docs/partition_selection.md) from the run's records
    with its part ``epsilon_partition``, as the release's domain."""
    inputs.progress(f"selecting the items privately (at most {keys_per_user} distinct items per user)")
    selected = private_keys(keyed_by_user(inputs.records), keys_per_user, inputs.split["epsilon_partition"],
                            delta, inputs.budget, inputs.rng, inputs.seed, step="select items")
    inputs.progress(f"{selected.keys.size:,} items selected privately")
    said = f"{selected.keys.size:,} items selected privately by partition selection (docs/partition_selection.md)"
    domain = item_domain_of_ids(selected.keys, said) if selected.keys.size else ItemDomain(selected.keys, said)
    return SelectedItems(domain, selected.diagnostics)
