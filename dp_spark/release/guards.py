"""Coverage and guards: how many records a release used, told to the operator who asks, and a
run refused, through noisy figures, when too few of them did.

A release over a domain that none of the records match is pure noise, yet looks like any other
release (e.g. an attribute that reads "4.0" against a domain of integers, or "monday"
against "Mon"). So every family that validates and bounds records counts its **coverage**:
rows read, rows outside the public domain (per column), rows kept by bounding, users, and users
truncated (users with more records than the bound). These numbers come from the raw records
without noise: they are NOT private, and go only to the operator who asks for them
(``dp-spark run --diagnostics FILE``: the console, labelled NOT PRIVATE, and FILE's ``coverage``;
the API's ``Release.diagnostics``), with a WARNING above ``warn_dropped_fraction`` (default
0.05) naming examples of the values that did not match. Nothing else depends on them.

**Guards** (a job's ``[guards]`` table, or the API's ``guards=`` dict with the same keys) refuse a
run whose coverage is too poor. Whether a run releases is something its readers see (the exit
status, the missing output, the store's "refused"), so the decision is made on noisy figures,
paid from the budget and listed in the ledger:

* ``epsilon``: what the guards' figures spend, carved out of ``privacy.epsilon`` before the
  algorithm's split (the report's ``epsilon_split`` shows it as ``epsilon_guards``). Needed by,
  and only with, a limit below.
* ``max_dropped_fraction``: the most that the **average over users of the share of their rows
  outside the domain** may be. Each user's share is in [0, 1], so the sum over users moves by at
  most 1 when one user is added or removed, and the number of users by 1.
* ``max_truncated_fraction``: the most that the share of users with more records than the
  per-user bound (counts: ``l``/``m``; location entropy: ``M`` locations; aggregate: ``l`` groups
  or ``c`` records in one) may be; the count of
  those users moves by at most 1. Only for families whose bound is public and applied before any
  noise (not DPSense, whose θ is chosen privately, nor the user histogram, which never truncates).

The figures released are the number of users, the share sum (on a grid of ``SHARE_GRID``
steps per user: integers, so the sensitivity is exactly ``SHARE_GRID``) and the truncated users,
each with discrete Laplace noise at its sensitivity over an equal part of ``guards.epsilon``
(sequential composition). The fractions are post-processing of them (a noisy user count below 1
is taken as 1); a run is refused when a noisy fraction is above its limit, before the
algorithm draws any noise of its own (after a private choice of the bound or the items, which
the truncation guard needs). The refusal quotes only the noisy fractions, and a release's
privacy.json carries them under ``guards``. A budget store keeps a refused run's charge. The
claim is docs/privacy.md, "Privacy claim: guards".

The dropped fraction counts only rows outside the domain, not rows removed by bounding: bounding
removing most rows is how the algorithms are meant to work, and is guarded by
``max_truncated_fraction`` separately. With items selected privately, items left out are not a
mismatch: only rows whose attribute lies outside its domain count.

``refuse_noise_only`` (default true) costs nothing: after the release's noise, it refuses a
release whose own DP figures cannot be told from noise (release.noise_only), the night whose
records all fell outside the domain. A guard's refusal exits 5 (cli.exits.EXIT_GUARD).

``strict`` (default false) is about malformed records, not coverage: by default a row whose user
or item id is null or not an integer is dropped like a row outside the domain (counted in the
diagnostics), and an empty source releases noise, so that no single record can stop a run.
``strict = true`` refuses such a source instead (DataError, exit 2); then whether a run completes
depends on the records, and privacy.json's guarantee says it holds only for runs that complete.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import pandas as pd

from dp_spark.bounding.user_records import capped_total
from dp_spark.core.accounting import as_epsilon
from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.progress import diagnostic
from dp_spark.errors import ConfigError, GuardRefused
from dp_spark.io.validation import SHARE_GRID

GUARD_KEYS = ("epsilon", "max_dropped_fraction", "max_truncated_fraction", "warn_dropped_fraction", "strict",
              "refuse_noise_only")
LIMIT_KEYS = ("max_dropped_fraction", "max_truncated_fraction")
DEFAULT_WARN_DROPPED_FRACTION = 0.05
# The families that count coverage before their noise; of them, those whose per-user bound is
# public and applied before any noise is drawn.
COVERAGE_GUARDED = ("counts", "user_histogram", "dpsense", "location_entropy", "means", "aggregate")
TRUNCATION_GUARDED = ("counts", "location_entropy", "means", "aggregate")
LABEL = "NOT PRIVATE"
SPLIT_KEY = "epsilon_guards"
STRICT_CONDITION = ("guards.strict: a run refused for malformed records (null or non-integer ids, values "
                    "that are no number, an empty source) says that they exist, so the guarantee holds for the "
                    "runs that complete")


def _fraction(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1 or math.isnan(value):
        raise ConfigError(f"guards.{name} must be a number in [0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Guards:
    """Limits on the coverage of a run, their budget, and strictness; see the module's docstring."""

    max_dropped_fraction: float | None = None  # None: no guard on rows outside the domain
    max_truncated_fraction: float | None = None  # None: no guard on truncation
    warn_dropped_fraction: float = DEFAULT_WARN_DROPPED_FRACTION  # diagnostics only
    epsilon: Fraction | None = None  # what the noisy figures spend; with a limit only
    strict: bool = False
    # Refuse a release whose own DP figures cannot be told from noise (release.noise_only; no ε).
    refuse_noise_only: bool = True

    def __post_init__(self):
        for name in ("max_dropped_fraction", "max_truncated_fraction", "warn_dropped_fraction"):
            object.__setattr__(self, name, _fraction(getattr(self, name), name))
        if self.warn_dropped_fraction is None:
            object.__setattr__(self, "warn_dropped_fraction", DEFAULT_WARN_DROPPED_FRACTION)
        for name in ("strict", "refuse_noise_only"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"guards.{name} must be true or false, got {getattr(self, name)!r}")
        if self.epsilon is not None:
            object.__setattr__(self, "epsilon", as_epsilon(self.epsilon, "guards.epsilon"))
        if self.active and self.epsilon is None:
            raise ConfigError("a guard decides on noisy figures that spend part of the budget: set guards.epsilon "
                              "(e.g. 0.05; it is taken from privacy.epsilon before the algorithm's split)")
        if not self.active and self.epsilon is not None:
            raise ConfigError("guards.epsilon is spent only by a limit: set guards.max_dropped_fraction or "
                              "guards.max_truncated_fraction, or remove guards.epsilon")

    @property
    def active(self) -> bool:
        """Whether any limit is set (and so the guards draw noise and may refuse)."""
        return any(getattr(self, name) is not None for name in LIMIT_KEYS)

    @property
    def spent(self) -> Fraction:
        return self.epsilon if self.active else Fraction(0)

    def check_family(self, family_name: str, algorithm: str) -> None:
        """Refuse (before anything runs) a limit the family cannot check before its noise."""
        if self.active and family_name not in COVERAGE_GUARDED:
            raise ConfigError(f"guards' limits are not checked for {algorithm}: it does not count coverage before "
                              "its noise (remove guards.max_dropped_fraction and max_truncated_fraction)")
        if self.max_truncated_fraction is not None and family_name not in TRUNCATION_GUARDED:
            raise ConfigError(f"guards.max_truncated_fraction is not checked for {algorithm}: its per-user bound "
                              "is not a public number applied before the noise (use it with the counts "
                              "algorithms, the means, entropy or aggregate)")


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


@dataclass(frozen=True)
class GuardFigures:
    """What the guards noise (NOT private until noised), each moving by at most its sensitivity
    when one user is added or removed: the users with at least one usable row (1); the sum over
    them of ⌊SHARE_GRID · d/n⌋, d of the user's n rows being outside the domain (SHARE_GRID);
    the users over the per-user bound (1; None where the family does not bound by a public number)."""

    users: int
    dropped_share: int
    users_truncated: int | None = None


def figures_of(validated, attributes_only: bool = False, users_truncated: int | None = None) -> GuardFigures:
    """The figures of records checked by ``io.validation.validate_records`` (its per-user pass
    counted them). ``attributes_only``: only rows dropped for something other than their item
    (an attribute outside its domain, an unusable value) are a mismatch (items selected
    privately: the items left out are not)."""
    return GuardFigures(validated.users_read, validated.dropped_share["attr" if attributes_only else "all"],
                        users_truncated)


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
    unselected = c.extra.get("rows_of_items_not_selected")
    if unselected is not None:
        lines.append(f"{unselected:,} rows ({_percent(unselected, c.rows_read)}) are of items that partition "
                     "selection did not select: not released, and not counted as outside the domain")
    if c.rows_kept_by_bounding is not None:
        inside = c.rows_read - c.rows_dropped if c.kept_of is None else c.kept_of
        lines.append(f"bounding ({c.bound}) kept {c.rows_kept_by_bounding:,} of the {inside:,} {c.unit} in "
                     f"the domain ({_percent(c.rows_kept_by_bounding, inside)})")
    if c.users_truncated is not None and c.users is not None:
        lines.append(f"{c.users_truncated:,} of {c.users:,} users "
                     f"({_percent(c.users_truncated, c.users)}) had more than the bound ({c.bound}) and were truncated")
    return lines


def tell(guards: Guards, coverage: Coverage, progress: Callable[[str], None],
         explain: Callable[[], str] | None = None) -> None:
    """Give the operator who asked for diagnostics the coverage, with a WARNING when many rows
    fell outside the domain. Decides nothing: every line is a diagnostic.

    ``explain`` (called only when the warning is due, and only with diagnostics on: it may read a
    few records) says which values did not match, e.g. 'attr values look like "monday" (string);
    the domain holds "Mon", "Tue", ...'. NOT private."""
    if not getattr(progress, "diagnostics", False):
        return
    for line in coverage_lines(coverage):
        diagnostic(progress, line)
    dropped, fraction = coverage.rows_dropped, coverage.dropped_fraction
    if dropped and fraction > guards.warn_dropped_fraction:
        why = explain() if explain is not None else ""
        diagnostic(
            progress,
            f"WARNING: {_percent(dropped, coverage.rows_read)} of the rows read are outside the public "
            f"domain and were dropped (warning above guards.warn_dropped_fraction = "
            f"{guards.warn_dropped_fraction:g})" + (f"; {why}" if why else ""),
        )


def figure_scale(limits: Guards) -> Fraction:
    """The discrete Laplace scale of each guard figure, in users (the share sum's too, in units
    of a user's whole share): one figure per limit and the user count share guards.epsilon."""
    return (1 + sum(getattr(limits, name) is not None for name in LIMIT_KEYS)) / limits.epsilon


def planned(limits: Guards) -> str:
    """What ``dp-spark plan`` says of the guards: how much their noise moves a fraction."""
    scale = float(figure_scale(limits))
    return (f"guards: each noisy figure has discrete Laplace noise of scale {scale:g} users, so a fraction over "
            f"N users moves by about {scale * 2 ** 0.5:.3g}/N (sd); with 1,000 users, by {scale * 2 ** 0.5 / 1000:.1%}")


def _noisy(budget: Budget, rng: RandomSource, step: str, value: int, sensitivity: int, epsilon: Fraction) -> int:
    entry = LedgerEntry(step, "discrete Laplace", epsilon, Fraction(sensitivity), Fraction(sensitivity) / epsilon, 1)
    return int(value + budget.discrete_laplace(entry, rng)[0])


def check(inputs: Any, figures: GuardFigures, bound: str | None = None) -> dict | None:
    """The guards' decision, from noisy figures: draws them (paid from ``inputs.budget``, from
    ``inputs.rng``), and raises GuardRefused when a noisy fraction is above its limit. Returns
    privacy.json's ``guards`` section (limits and noisy fractions: DP outputs), or None when no
    limit is set (nothing is drawn). Call it before the tables' noise (after any private choice
    the guards need: the bound, the items, and HPA's popularity when it chooses l)."""
    guards: Guards = inputs.guards
    if not guards.active:
        return None
    limits = {name: getattr(guards, name) for name in LIMIT_KEYS if getattr(guards, name) is not None}
    if "max_truncated_fraction" in limits and figures.users_truncated is None:
        raise ConfigError("guards.max_truncated_fraction: this run has no public per-user bound to check")
    each = 1 / figure_scale(guards)  # the users, and one figure per limit
    users = max(_noisy(inputs.budget, inputs.rng, "guard: users", figures.users, 1, each), 1)
    noisy = {}
    if "max_dropped_fraction" in limits:
        share = _noisy(inputs.budget, inputs.rng, "guard: share of rows outside the domain", figures.dropped_share,
                       SHARE_GRID, each)
        noisy["max_dropped_fraction"] = min(max(share / (SHARE_GRID * users), 0.0), 1.0)
    if "max_truncated_fraction" in limits:
        truncated = _noisy(inputs.budget, inputs.rng, "guard: users over the bound", figures.users_truncated, 1, each)
        noisy["max_truncated_fraction"] = min(max(truncated / users, 0.0), 1.0)
    section = {"epsilon": float(guards.epsilon), "users_noisy": users,
               **{_NOISY_NAME[name]: round(value, 6) for name, value in noisy.items()},
               **{name: value for name, value in limits.items()}}
    over = [name for name, value in noisy.items() if value > limits[name]]
    if over:
        said = "; ".join(_refusal(name, noisy[name], limits[name], bound) for name in over)
        raise GuardRefused(f"{said}: nothing was released (these figures are noisy, from guards.epsilon = "
                           f"{float(guards.epsilon):g})")
    return section


_NOISY_NAME = {"max_dropped_fraction": "dropped_fraction_noisy", "max_truncated_fraction": "truncated_fraction_noisy"}


def _refusal(name: str, value: float, limit: float, bound: str | None) -> str:
    if name == "max_dropped_fraction":
        return (f"on average {value:.1%} of a user's rows are outside the public domain (noisy), above "
                f"guards.max_dropped_fraction = {limit:g}")
    return (f"{value:.1%} of the users have more records than the bound{f' ({bound})' if bound else ''} (noisy), "
            f"above guards.max_truncated_fraction = {limit:g}")


def unselected_apart(coverage: Coverage) -> Coverage:
    """With items selected privately, the rows of the items left out are not a mismatch with the
    domain (nothing for the dropped-fraction guard or its warning): counted apart."""
    unselected = coverage.rows_outside_domain.get("item_id", 0)
    outside = {column: rows for column, rows in coverage.rows_outside_domain.items() if column != "item_id"}
    return replace(coverage, rows_outside_domain=outside, kept_of=coverage.rows_read - coverage.rows_dropped,
                   extra={**coverage.extra, "rows_of_items_not_selected": unselected})


def check_bounded(inputs: Any, validated: Any, bound: int, private_items: bool,
                  bound_name: str = "l") -> tuple[Coverage, dict | None]:
    """The guards of a release whose users each keep min(n, ``bound``) of their records (the
    counts, the means): the coverage from validation's pass, told to the operator who asked, then
    the guards' decision on their noisy figures (:func:`check`). With items selected privately,
    the rows of the items left out are counted apart."""
    coverage = bounded_coverage(validated.diagnostics["rows_read"], validated.rows_outside_domain,
                                validated.users_by_n, bound, bound_name)
    if private_items:
        coverage = unselected_apart(coverage)
    tell(inputs.guards, coverage, inputs.progress, validated.explain)
    figures = figures_of(validated, attributes_only=private_items, users_truncated=coverage.users_truncated)
    return coverage, check(inputs, figures, bound=coverage.bound)
