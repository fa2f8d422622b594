"""At most ``l`` groups per user and at most ``c`` records per group: the contribution bound in the
words PipelineDP and Tumult users know (groups per user, records per group), drawn as SRA draws
its sample (paper 000): uniformly, from each user's own records.

Each of a user's distinct groups gets a keyed random position, a hash of (salt, user, group), and
the user keeps the ``l`` groups of smallest position: a uniform sample of the user's groups. Within
a kept group each record gets its own position, a hash of (salt, user, row key), and the ``c``
smallest are kept: a uniform sample of the user's records there. Both positions are functions of
the salt and of that user's records alone (bounding.keys), so one user's kept records do not
depend on any other user's, wherever they lie in the scan; the salt travels as data, never in a
plan.

HPA's rule (Fan and Jin's popular-first choice, paper 000) orders a user's groups by a score of
the group alone, a rank of the groups' noisy popularity (a DP output), before the random
position: the user keeps its ``l`` most popular groups, still a function of its own records.

What one user can then move: at most ``l`` groups, at most ``c`` records in each, so a count per
group has L1 sensitivity l·c, L∞ c and L2 √l·c, and a user appears in at most ``l`` groups.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dp_spark.bounding import keys

_GROUP_RANK, _RECORD_RANK = "_group_rank", "_record_rank"


def _checked(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def bounded_groups(records: DataFrame, group: str, groups_per_user: int, records_per_group: int,
                   seed: int | None, user_col: str = "user_id", score: str | None = None,
                   purpose: str = "groups_per_user") -> DataFrame:
    """The records each user keeps: ``records`` (with their ``row_key``, keys.with_row_key, and the
    ``group`` column, a non-null group index) restricted to at most ``groups_per_user`` of the
    user's groups and ``records_per_group`` of its records in each. Same columns as ``records``.
    With ``score`` (a column of ``records`` that depends on the group alone, such as a rank of its
    noisy popularity: HPA's rule), a user keeps its groups of highest score, ties in the random
    order. ``purpose`` names the salt's use (a sample drawn for another step gets its own salt).
    One shuffle by user and two sorts within it."""
    l, c = _checked("groups_per_user", groups_per_user), _checked("records_per_group", records_per_group)
    if keys.ROW_KEY not in records.columns:
        raise ValueError(f"the records need their {keys.ROW_KEY} (keys.with_row_key) to be sampled within a group")
    salted = keys.with_salt(records, keys.new_salt(seed, purpose))
    text = keys.text_user(records, user_col)
    user, cell = F.col(user_col), F.col(group)
    group_position = keys.keyed_position([user, cell], text_user=text)
    record_position = keys.row_position(salted, user_col)  # (salt, user, row key)
    # dense_rank: a group's records share its rank, so ranks 1..l are l whole groups (ties of
    # position, about n²/2^64 likely, are broken by the group index).
    first = [F.col(score).desc()] if score is not None else []
    by_user = Window.partitionBy(user).orderBy(*first, group_position, cell)
    in_group = Window.partitionBy(user, cell).orderBy(record_position, F.col(keys.ROW_KEY))
    ranked = salted.withColumn(_GROUP_RANK, F.dense_rank().over(by_user)) \
        .withColumn(_RECORD_RANK, F.row_number().over(in_group))
    kept = ranked.where((F.col(_GROUP_RANK) <= l) & (F.col(_RECORD_RANK) <= c))
    return kept.drop(_GROUP_RANK, _RECORD_RANK, keys.SALT)
