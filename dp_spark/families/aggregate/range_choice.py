"""low or high = "auto": the value's range chosen privately, as the means choose theirs
(release.clip_choice; claim docs/value_sums.md, "Choosing the clipping range").

The choice reads one value per user: among the user's records in a group (run.in_groups), the one
whose hash of (salt, user, group, value) is least. The salt is fresh, or derived from the seed, and
travels as data (bounding.keys.with_salt); the draw reads the user's own records alone, so adding
or removing a user adds or removes one value at most, which is all the choice's claim needs.
Identical records hash alike and count once: the draw is uniform over a user's distinct (group,
value) pairs rather than over its records, a bias of the sample, never of the guarantee.

A tenth of ε (SHARE) pays for it, before the metrics; the metrics then clip to the chosen range
and, without candidates of their own, take theirs evenly over it. Until the choice, plan and the
parameters state the widest range it can give (every chosen range lies within it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates.value_ranks import value_ranks
from dp_spark.bounding import keys as row_keys
from dp_spark.core.clip_range import ClipRange
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.release import clip_choice

SPLIT_KEY = "epsilon_clip"
SHARE = clip_choice.SHARE
SAMPLED = "_sampled_value"
SALT_PURPOSE = "aggregate_range_value"


@dataclass(frozen=True)
class RangeChoice:
    """The ends given (None: chosen) and the public candidates the chosen ends come from."""

    low: float | None
    high: float | None
    candidates: tuple[float, ...]
    steps: int  # the grid of the sums' range (grid_steps), whichever range is chosen

    def widest(self) -> ClipRange:
        """The widest range the choice can give: every chosen range lies in it."""
        low = self.candidates[0] if self.low is None else self.low
        high = self.candidates[-1] if self.high is None else self.high
        return ClipRange(low, high, self.steps)


def range_choice(low: Any, high: Any, candidates: Any, steps: int) -> RangeChoice | None:
    """The choice when low or high is "auto" (checked: clip_choice.checked_ends), else None."""
    if clip_choice.AUTO not in (low, high):
        return None
    given_low, given_high, checked = clip_choice.checked_ends(low, high, candidates, steps, prefix="")
    return RangeChoice(given_low, given_high, checked, steps)


def one_value_per_user(grouped: DataFrame, group: str, value: str, salt: int, user_col: str = "user_id"
                       ) -> DataFrame:
    """(user, SAMPLED): each user's value with the least salted hash among its records (NOT
    private: read only by the choice)."""
    salted = row_keys.with_salt(grouped, salt)
    order = F.xxhash64(F.col(row_keys.SALT), F.col(user_col), F.col(group), F.col(value))
    return salted.groupBy(user_col).agg(F.min_by(F.col(value), order).alias(SAMPLED))


def choose(grouped: DataFrame, choice: RangeChoice, group: str, value: str, split: dict[str, Fraction],
           budget: Budget, rng: RandomSource, seed: int | None, user_col: str = "user_id"
           ) -> clip_choice.ClipChoice:
    """The range chosen with the split's SPLIT_KEY part (ledger steps "choose clip: users", "choose
    low", "choose high"). ``grouped``: run.in_groups' records."""
    sampled = one_value_per_user(grouped, group, value, row_keys.new_salt(seed, SALT_PURPOSE), user_col)
    below, at_most, values = value_ranks(sampled, SAMPLED, choice.candidates)
    return clip_choice.choose_clip(choice.candidates, below.tolist(), at_most.tolist(), values, choice.low, choice.high,
                                   split[SPLIT_KEY], budget, rng)


def at_range(params: Any, low: float, high: float) -> Any:
    """The aggregation's parameters at the chosen range: the metrics clip to it, and quantile
    candidates of their own are made evenly over it again."""
    return replace(params, clip=ClipRange(low, high, params.clip.steps), range_choice=None, candidates=None)
