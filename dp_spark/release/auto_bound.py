"""A per-user bound chosen privately (``l = "auto"``, ``m = "auto"``): the config's side that the
counts and the means share. The mechanism is release.bound_selection; each family gives its
own error model (docs/bound_selection.md, docs/value_sums.md "Choosing l")."""

from __future__ import annotations

from typing import Any

from dp_spark.errors import ConfigError
from dp_spark.release import bound_selection
from dp_spark.release.family import MAX_ROWS_PER_USER, ROWS_PER_USER_LIMIT

AUTO = "auto"  # the per-user bound chosen privately (release.bound_selection)

# What the planned accuracy says of a bound not chosen yet.
AUTO_NOTE = ("{name} is chosen privately: the noise is that of the chosen {name}, at most these numbers (at the "
             "largest candidate, {name} = {largest}); privacy.json's algorithm.chosen says which")


class AutoBound:
    """The per-user bound ``l`` of a parameter class, and its ``candidates`` when it is "auto"."""

    l: int | str
    candidates: tuple[int, ...] | None

    @property
    def auto(self) -> bool:
        return self.l == AUTO

    @property
    def largest_bound(self) -> int:
        """The bound, or with "auto" the largest it can be: the noise is at most that bound's."""
        return self.candidates[-1] if self.auto else self.l


def candidates_of(values: Any, bound_name: str) -> tuple[int, ...]:
    """The public candidate bounds of "auto" (bound_selection's default when not given)."""
    key = f"algorithm.{bound_name}_candidates"
    if values is None:
        return bound_selection.DEFAULT_CANDIDATES
    if not isinstance(values, (list, tuple)):
        raise ConfigError(f"{key} must be a list of integers, got {values!r}")
    try:
        checked = bound_selection.candidates_checked(values)
    except ValueError as e:
        raise ConfigError(f"{key}: {e}") from None
    if checked[-1] > MAX_ROWS_PER_USER:
        raise ConfigError(f"{key} has {int(checked[-1]):,}, above the supported maximum {MAX_ROWS_PER_USER:,}: "
                          f"{ROWS_PER_USER_LIMIT}")
    return tuple(int(b) for b in checked)
