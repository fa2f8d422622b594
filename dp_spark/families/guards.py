"""Coverage and guards: how many records a release used, told to the operator, and refused when
too few of them did.

A release over a domain that none of the records match is pure noise, yet looks like any other
release (issue 29: an attribute that reads "4.0" against a domain of integers, or "monday"
against "Mon"). So every family that validates and bounds records reports its **coverage**:
rows read, rows outside the public domain (per column), rows kept by bounding, users, and users
truncated (users with more records than the bound). These numbers come from the raw records
without noise: they are NOT private, and go only to the operator who asks for them
(``dp-spark run --diagnostics FILE``: the console, labelled NOT PRIVATE, and FILE's ``coverage``;
the API's ``Release.diagnostics``), never to privacy.json or the default log.

**Guards** (a job's ``[guards]`` table, or the API's ``guards=`` dict with the same keys) refuse a run
from these numbers, after the records are checked and before any noise is drawn or anything is
written (:class:`dp_spark.errors.GuardRefused`, exit 2):

* ``max_dropped_fraction``: the most of the rows read that may lie outside the domain. Unset,
  the run is refused only when *every* row read is outside it (nothing but noise would be
  released); 1.0 never refuses.
* ``max_truncated_fraction``: the most of the users that may have more records than the
  per-user bound (counts: ``l``/``m``; location entropy: ``M`` locations). Unset: never refuses.
  Only for families whose bound is public and known before noise (not DPSense, whose θ is
  chosen privately, nor the user histogram, which never truncates).
* ``warn_dropped_fraction`` (default 0.05): above it, the diagnostics (when asked for) carry a
  WARNING naming the columns and examples of the values that did not match.

The dropped fraction counts only rows outside the domain, not rows removed by bounding: bounding
removing most rows is how the algorithms are meant to work (SRA at l = 10 keeps a few percent of
a heavy table), and is reported, and guarded by ``max_truncated_fraction``, separately.

Refusing depends on the data, so it is not private either: whether a run releases, its exit
status and the store's status are then decided by the raw records (issue 39; docs/privacy.md,
"What readers can see"). A budget store keeps the refused run's charge (docs/scheduled_runs.md).
Nothing here changes what a release publishes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd

from dp_spark.bounding.user_records import capped_total
from dp_spark.core.progress import diagnostic
from dp_spark.errors import ConfigError, GuardRefused

GUARD_KEYS = ("max_dropped_fraction", "max_truncated_fraction", "warn_dropped_fraction")
DEFAULT_WARN_DROPPED_FRACTION = 0.05
# The families whose per-user bound is public and applied before any noise is drawn.
TRUNCATION_GUARDED = ("counts", "location_entropy")
LABEL = "NOT PRIVATE"


def _fraction(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1 or math.isnan(value):
        raise ConfigError(f"guards.{name} must be a number in [0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Guards:
    """Limits on the coverage of a run; see the module's docstring for each."""

    max_dropped_fraction: float | None = None  # None: refuse only when every row is outside the domain
    max_truncated_fraction: float | None = None  # None: never refuse for truncation
    warn_dropped_fraction: float = DEFAULT_WARN_DROPPED_FRACTION

    def __post_init__(self):
        for name in GUARD_KEYS:
            object.__setattr__(self, name, _fraction(getattr(self, name), name))
        if self.warn_dropped_fraction is None:
            object.__setattr__(self, "warn_dropped_fraction", DEFAULT_WARN_DROPPED_FRACTION)

    def check_family(self, family_name: str, algorithm: str) -> None:
        """Refuse (before anything runs) a truncation limit the family cannot check before noise."""
        if self.max_truncated_fraction is not None and family_name not in TRUNCATION_GUARDED:
            raise ConfigError(f"guards.max_truncated_fraction is not checked for {algorithm}: its per-user bound "
                              "is not a public number applied before the noise (use it with the counts "
                              "algorithms or entropy)")


def guards_of(table: Any) -> Guards:
    """A config's ``[guards]`` table (or the API's keywords) as :class:`Guards`."""
    if table is None:
        return Guards()
    if not isinstance(table, dict):
        raise ConfigError("config section [guards] must be a table")
    unknown = sorted(set(table) - set(GUARD_KEYS))
    if unknown:
        raise ConfigError(f"unknown config key 'guards.{unknown[0]}'; known keys: {', '.join(GUARD_KEYS)}")
    return Guards(**table)


@dataclass(frozen=True)
class Coverage:
    """What a run used of the records it read (NOT private). ``None`` where a family cannot say."""

    rows_read: int
    rows_outside_domain: dict[str, int]  # column -> rows outside its domain (each row counted once)
    users: int | None = None  # users with at least one row inside the domain
    rows_kept_by_bounding: int | None = None
    users_truncated: int | None = None  # users with more records (entropy: locations) than the bound
    bound: str | None = None  # e.g. "l = 10"
    # What bounding kept rows_kept_by_bounding of, when not the rows inside the domain, and what
    # those are (DPSense: a user's distinct items; entropy: user-location pairs).
    kept_of: int | None = None
    unit: str = "rows"
    extra: dict = field(default_factory=dict)  # family-specific counts (entropy's visits)

    @property
    def rows_dropped(self) -> int:
        return sum(self.rows_outside_domain.values())

    @property
    def dropped_fraction(self) -> float:
        return self.rows_dropped / self.rows_read if self.rows_read else 0.0

    @property
    def truncated_fraction(self) -> float | None:
        if self.users_truncated is None or not self.users:
            return None
        return self.users_truncated / self.users

    def to_json(self) -> dict:
        return {"rows_read": self.rows_read, "rows_outside_domain": dict(self.rows_outside_domain),
                "dropped_fraction": self.dropped_fraction, "users": self.users,
                "rows_kept_by_bounding": self.rows_kept_by_bounding, "users_truncated": self.users_truncated,
                "truncated_fraction": self.truncated_fraction, "bound": self.bound,
                **({"kept_of": self.kept_of, "unit": self.unit} if self.kept_of is not None else {}), **self.extra}


def bounded_coverage(rows_read: int, outside: dict[str, int], users_by_n: pd.Series, l: int,
                     bound_name: str = "l") -> Coverage:
    """Coverage of a bound of ``l`` records per user, from the users per in-domain row count that
    validation already counted (no pass of its own): each user keeps min(n, l) rows."""
    n = users_by_n.index.to_numpy()
    return Coverage(rows_read, outside, users=int(users_by_n.sum()), rows_kept_by_bounding=capped_total(users_by_n, l),
                    users_truncated=int(users_by_n[n > l].sum()), bound=f"{bound_name} = {l}")


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def coverage_lines(coverage: Coverage) -> list[str]:
    """The operator's account of a run's coverage (NOT private: printed only as diagnostics)."""
    c = coverage
    outside = ", ".join(f"{column} {rows:,}" for column, rows in c.rows_outside_domain.items()) or "none"
    lines = [f"{c.rows_read:,} rows read; outside the domain: {outside} "
             f"({_percent(c.rows_dropped, c.rows_read)} of the rows read)"]
    if c.rows_kept_by_bounding is not None:
        inside = c.rows_read - c.rows_dropped if c.kept_of is None else c.kept_of
        lines.append(f"bounding ({c.bound}) kept {c.rows_kept_by_bounding:,} of the {inside:,} {c.unit} in "
                     f"the domain ({_percent(c.rows_kept_by_bounding, inside)})")
    if c.users_truncated is not None and c.users is not None:
        lines.append(f"{c.users_truncated:,} of {c.users:,} users "
                     f"({_percent(c.users_truncated, c.users)}) had more than the bound ({c.bound}) and were truncated")
    return lines


def check(guards: Guards, coverage: Coverage, progress: Callable[[str], None],
          explain: Callable[[], str] | None = None) -> None:
    """Tell the operator the coverage, warn when many rows fell outside the domain, and raise
    GuardRefused when a guard is exceeded. Call it before any noise is drawn.

    ``explain`` (called only when a warning or refusal is due: it may read a few records) says
    which values did not match, e.g. 'attr values look like "monday" (string); the domain holds
    "Mon", "Tue", ...'. It is NOT private: console and exception message only."""
    for line in coverage_lines(coverage):
        diagnostic(progress, line)
    dropped, fraction = coverage.rows_dropped, coverage.dropped_fraction
    limit = guards.max_dropped_fraction
    refused = fraction > limit if limit is not None else coverage.rows_read > 0 and dropped == coverage.rows_read
    warned = dropped and fraction > guards.warn_dropped_fraction
    why = ""
    if (refused or warned) and explain is not None:
        why = explain()
    if refused:
        allowed = (f"guards.max_dropped_fraction = {limit:g}" if limit is not None else
                   "by default a run is refused when every row is outside the domain; set "
                   "guards.max_dropped_fraction = 1 to publish noise anyway")
        raise GuardRefused(f"{dropped:,} of {coverage.rows_read:,} rows ({_percent(dropped, coverage.rows_read)}) are "
                           f"outside the public domain ({allowed}); nothing was released"
                           + (f". {LABEL}: {why}" if why else ""))
    if warned:  # decided by the raw data: for the operator who asked, like the figures above
        diagnostic(progress, f"WARNING: {_percent(dropped, coverage.rows_read)} of the rows read are outside the public "
                 f"domain and were dropped (warning above guards.warn_dropped_fraction = "
                 f"{guards.warn_dropped_fraction:g})" + (f"; {why}" if why else ""))
    truncated = coverage.truncated_fraction
    most = guards.max_truncated_fraction
    if most is not None and truncated is not None and truncated > most:
        raise GuardRefused(f"{coverage.users_truncated:,} of {coverage.users:,} users ({truncated:.1%}) have more "
                           f"records than the bound {coverage.bound} (guards.max_truncated_fraction = "
                           f"{guards.max_truncated_fraction:g}); nothing was released")
