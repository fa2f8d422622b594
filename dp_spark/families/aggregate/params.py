"""The parameters of an aggregation, checked before anything is read: the groups, the metrics, the
contribution bound, the value's range and its candidates, the method; and the budget split, one
equal part per ledger step.

Two methods answer the value metrics. "tables": a noisy table per figure the metrics need
(noisy_totals.tables_for: count, users, sum, sum of squares) and one exponential-mechanism choice
per quantile level. "histogram": one noisy histogram per group over the candidates, of which the
count, sum, mean, variance and every quantile are post-processing (histogram_metrics), and the
users' table beside it when asked. "auto" (the default) takes the histogram when the candidates
are given, at most AUTO_HISTOGRAM_CANDIDATES (a value of few possible values, such as ratings), and
the metrics ask for a quantile or for figures whose separate tables would carry more noise
(AggregateParams._histogram_is_better): for the stars 1 to 5, a variance, not a mean alone.
Each step gets the same part of ε (under zCDP, of ρ): by tables, a release of `count` and
`mean(v)` spends half on the counts and half on the sums, one of `quantiles(v, 0.1, 0.5, 0.9)` a
third on each level; by histogram, all of it on the histogram (half with `users`). Before them,
key columns chosen privately take half of ε to be selected, a privately chosen l a tenth, a
privately chosen range of the value a tenth (range_choice), and HPA's bounding a tenth for the
groups' popularity; the steps share the rest. ``weights`` overrides the equal parts: each step's
part is then in proportion to its weight (1 unless given), as PipelineDP's budget weights are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dp_spark.core.clip_range import DEFAULT_STEPS, ClipRange
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate import histogram_metrics
from dp_spark.families.aggregate.keys import PRIVATE, GroupKeys
from dp_spark.families.aggregate.metrics import USERS, Metric
from dp_spark.families.aggregate.noisy_totals import GroupBound, step_name, tables_for
from dp_spark.families.aggregate.popular_groups import POPULARITY_SHARE
from dp_spark.families.aggregate.popular_groups import SPLIT_KEY as POPULARITY_STEP
from dp_spark.families.aggregate.quantiles import MAX_CANDIDATES, Candidates
from dp_spark.families.aggregate.range_choice import SHARE as RANGE_SHARE
from dp_spark.families.aggregate.range_choice import SPLIT_KEY as RANGE_SPLIT_KEY
from dp_spark.families.aggregate.range_choice import RangeChoice
from dp_spark.release import bound_selection
from dp_spark.release.family import rows_per_user
from dp_spark.release.private_keys import DEFAULT_KEYS_PER_USER, PARTITION_SHARE

QUANTILE_KINDS = ("median", "quantiles")
NOISES = ("laplace", "gaussian", "auto")
# Without candidates of its own, a quantile is chosen among this many values evenly over the range.
DEFAULT_CANDIDATES = 101
HISTOGRAM, TABLES, AUTO = "histogram", "tables", "auto"
METHODS = (AUTO, HISTOGRAM, TABLES)
# "auto" takes the histogram for at most this many given candidates: each group's count then
# carries at most this many cells' noise, while every other value metric costs nothing more.
AUTO_HISTOGRAM_CANDIDATES = 32
# The budget's part that selects the tuples of the key columns chosen privately (as the counts').
SELECTION_STEP = "epsilon_partition"
SRA, HPA = "sra", "hpa"
BOUNDINGS = (SRA, HPA)
# groups_per_user = "auto": l chosen privately (bound_choice) with this part of ε, before the rest.
BOUND_SPLIT_KEY = "epsilon_bound"
BOUND_SHARE = bound_selection.DEFAULT_SHARE
# With a mean asked, the choice scores the means (bound_choice's MEANS) and, as the means' own l,
# takes a twentieth of ε under pure ε and a tenth of ρ under zCDP: a group short of the mean's
# half-width loses its mean, so the tables' share weighs more than for a count (measured on the
# means' evaluation shapes: docs/aggregate.md, "Choosing groups_per_user for means").
MEANS_BOUND_SHARE = Fraction(1, 20)
MEANS_ZCDP_BOUND_SHARE = bound_selection.DEFAULT_SHARE
# The metrics given only where a group's noisy count passes the mean's half-width.
MEAN_KINDS = ("mean", "variance", "stddev")


def quantile_step(value: str, level: Fraction) -> str:
    """The ledger step of one quantile level (quantiles.choose_levels names it so)."""
    return f"quantile({value}, {float(level):g})"


@dataclass(frozen=True)
class AggregateParams:
    """One aggregation: ``keys`` (the groups), ``metrics``, ``bound`` (groups per user, records per
    group); with a value metric, ``clip`` (the public range and its grid); with a quantile,
    ``candidates`` (by default DEFAULT_CANDIDATES evenly over the range); ``method`` (module
    docstring: "auto" is resolved here, from the config alone)."""

    keys: GroupKeys
    metrics: tuple[Metric, ...]
    bound: GroupBound
    clip: ClipRange | None = None
    candidates: Candidates | None = None
    noise: str = "laplace"  # privacy.noise: the tables' noise ("gaussian" or "auto" under zCDP)
    method: str = AUTO
    # With key columns chosen privately: partition selection's distinct groups per user (default
    # groups_per_user) and the δ it spends (private_keys.partition_delta of privacy.delta).
    keys_per_user: int | None = None
    delta: float = 0.0
    # Which groups a user keeps: "sra", a uniform sample; "hpa", the most popular by a noisy
    # popularity from popularity_groups (d) groups per user (popular_groups).
    bounding: str = SRA
    popularity_groups: int = 1
    # groups_per_user = "auto": the candidates l is chosen from (bound_choice); ``bound`` then holds
    # the largest, at which plan states the error.
    bound_candidates: tuple[int, ...] | None = None
    # low or high "auto": the range is chosen privately (range_choice); ``clip`` then holds the
    # widest it can give, at which plan states the error.
    range_choice: RangeChoice | None = None
    # The metric steps' relative weights (step name -> weight, default 1 each): their parts of what
    # the steps share are proportional to them.
    weights: tuple[tuple[str, Fraction], ...] = ()

    algorithm = "aggregate"

    def __post_init__(self):
        if self.noise not in NOISES:
            raise ConfigError(f"privacy.noise must be one of {', '.join(NOISES)}, got {self.noise!r}")
        metrics = tuple(self.metrics)
        object.__setattr__(self, "metrics", metrics)
        self._check_selection()
        if self.bounding not in BOUNDINGS:
            raise ConfigError(f"bounding must be one of {', '.join(BOUNDINGS)}, got {self.bounding!r}")
        object.__setattr__(self, "popularity_groups", rows_per_user(self.popularity_groups, "d"))
        if self.bounding == SRA and self.popularity_groups != 1:
            raise ConfigError("d, the groups per user the popularity counts, is used only with bounding = \"hpa\"")
        self._check_bound_candidates()
        value = self.value
        if self.range_choice is not None and self.clip is None:
            object.__setattr__(self, "clip", self.range_choice.widest())
        if value is not None and self.clip is None:
            raise ConfigError(f"metrics of {value} need its range: give low and high (either \"auto\" to choose "
                              "it privately)")
        if value is None and (self.clip is not None or self.candidates is not None):
            raise ConfigError("a range or quantile candidates are given, but no metric reads a value")
        asked = self.method
        self._resolve_method()
        if self.candidates is not None and not self.levels and asked == TABLES:
            raise ConfigError("quantile candidates are given, but no metric is a median or quantiles (the "
                              "histogram method reads them for every value metric)")
        if (self.levels or self.method == HISTOGRAM) and self.candidates is None:
            assert self.clip is not None
            object.__setattr__(self, "candidates", Candidates.evenly(self.clip.low, self.clip.high, DEFAULT_CANDIDATES))
        if self.candidates is not None and len(self.candidates.values) > MAX_CANDIDATES:
            raise ConfigError(f"at most {MAX_CANDIDATES:,} quantile candidates")
        self._check_weights()
        if value is not None and value in self.keys.names:
            raise ConfigError(f"{value} is a key column and the value the metrics read: a column is one or the other")
        overlap = set(self.keys.names) & {c for m in metrics for c in m.columns}
        if overlap:
            raise ConfigError(f"a key column and a metric's output share the name {', '.join(sorted(overlap))}")

    def _check_weights(self) -> None:
        weights = tuple(self.weights)
        steps = self.steps()
        unknown = [step for step, _ in weights if step not in steps]
        if unknown:
            raise ConfigError(f"weights: {', '.join(repr(u) for u in unknown)} is no step of this release; its steps "
                              f"are {', '.join(repr(s) for s in steps)} (dp-spark plan lists them)")
        if len({step for step, _ in weights}) != len(weights):
            raise ConfigError("weights: each step once")
        object.__setattr__(self, "weights", tuple((step, weight_of(step, w)) for step, w in weights))

    def weight(self, step: str) -> Fraction:
        """A metric step's weight: given, or 1."""
        return dict(self.weights).get(step, Fraction(1))

    def _check_bound_candidates(self) -> None:
        if self.bound_candidates is None:
            return
        try:
            candidates = tuple(int(b) for b in bound_selection.candidates_checked(self.bound_candidates))
        except ValueError as e:
            raise ConfigError(f"groups_per_user_candidates: {e}") from None
        if candidates[-1] != self.bound.groups_per_user:
            raise ValueError("with groups_per_user = \"auto\" the bound holds the largest candidate")
        object.__setattr__(self, "bound_candidates", candidates)

    @property
    def auto(self) -> bool:
        """Whether l is chosen privately (groups_per_user = "auto")."""
        return self.bound_candidates is not None

    @property
    def scores_means(self) -> bool:
        """Whether a private l is scored by the means (a metric is given only where its group's
        mean is) rather than by the counts' bias (public: the metrics)."""
        return any(metric.kind in MEAN_KINDS for metric in self.metrics)

    def _check_selection(self) -> None:
        """keys_per_user and delta, which only partition selection reads, checked (and the default
        keys_per_user, groups_per_user or with "auto" DEFAULT_KEYS_PER_USER, put in) when a key
        column is chosen privately."""
        if not self.keys.private:
            if self.keys_per_user is not None or self.delta:
                raise ConfigError(f"keys_per_user and partition selection's delta are used only when a key column's "
                                  f"values are chosen privately (\"{PRIVATE}\")")
            return
        # With l chosen privately the bound holds the largest candidate, far more than a user's
        # tuples should share partition selection's ε among: the counts' default then.
        default = DEFAULT_KEYS_PER_USER if self.bound_candidates is not None else self.bound.groups_per_user
        keys_per_user = default if self.keys_per_user is None else self.keys_per_user
        object.__setattr__(self, "keys_per_user", rows_per_user(keys_per_user, "keys_per_user"))
        delta = self.delta
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
            raise ConfigError(f"key columns chosen privately need delta in (0, 1), which partition selection "
                              f"spends, got {delta!r}")

    def _resolve_method(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        method = self.method
        if method == AUTO:
            few = self.candidates is not None and len(self.candidates) <= AUTO_HISTOGRAM_CANDIDATES
            method = HISTOGRAM if self.value is not None and few and self._histogram_is_better() else TABLES
        if method == HISTOGRAM:
            if self.value is None:
                raise ConfigError("method \"histogram\" answers the metrics of a value: ask for one, e.g. mean(stars)")
            assert self.clip is not None
            if self.candidates is not None and not (self.clip.low <= self.candidates.values[0]
                                                    and self.candidates.values[-1] <= self.clip.high):
                raise ConfigError(f"the histogram's candidates must lie in the value's range [{self.clip.low:g}, "
                                  f"{self.clip.high:g}]")
        object.__setattr__(self, "method", method)

    def _histogram_is_better(self) -> bool:
        """With quantiles, always (the exponential mechanism's rank error grows as l, the histogram's
        as √l); else when the noise on the centred sum, in values, has the lower variance: S_h·Σ(b_k − m)²
        for the histogram against S_t·((high − low)/2)² for the tables, S the steps sharing the
        budget, m the candidates' or the range's midpoint (a record moves the sum table by at most
        half the range). From the config alone."""
        assert self.candidates is not None and self.clip is not None
        if self.levels:
            return True
        users = sum(1 for m in self.metrics if m.kind == USERS)
        b = self.candidates.values
        centre = (b[0] + b[-1]) / 2
        histogram = (1 + users) * sum((v - centre) ** 2 for v in b)
        half_range = (self.clip.high - self.clip.low) / 2
        return histogram < len(tables_for(self.metrics)) * half_range ** 2

    @property
    def value(self) -> str | None:
        """The value column the metrics read (one at most: metrics.metrics_of)."""
        return next((m.value for m in self.metrics if m.value is not None), None)

    @property
    def levels(self) -> tuple[Fraction, ...]:
        """Every quantile level asked, in the metrics' order."""
        return tuple(level for m in self.metrics if m.kind in QUANTILE_KINDS for level in m.levels)

    @property
    def tables(self) -> tuple[str, ...]:
        """The noisy tables of noisy_totals the release draws: by histogram, the users' alone."""
        if self.method == HISTOGRAM:
            return tables_for([m for m in self.metrics if m.kind == USERS])
        return tables_for(self.metrics)

    def steps(self) -> tuple[str, ...]:
        """The ledger steps, in the order the release pays them: the tables, then the histogram or
        each quantile level."""
        value = self.value or ""
        tables = tuple(step_name(t, self.value) for t in self.tables)
        if self.method == HISTOGRAM:
            return (*tables, histogram_metrics.step_name(value))
        return (*tables, *(quantile_step(value, q) for q in self.levels))

    def split(self, epsilon: Fraction, zcdp_shares: bool = False) -> dict[str, Fraction]:
        """An equal part of ``epsilon`` per step, or parts in proportion to the ``weights`` (module
        docstring); with key columns chosen privately, PARTITION_SHARE of it first selects their
        tuples (as the counts' items). ``zcdp_shares``: the shares of ρ under zCDP, which differ
        only in a private l scored by the means (MEANS_ZCDP_BOUND_SHARE)."""
        steps = self.steps()
        if len(set(steps)) != len(steps):
            raise ConfigError(f"the metrics ask for one quantile level twice: {', '.join(steps)}")
        epsilon = Fraction(epsilon)
        first = {SELECTION_STEP: epsilon * PARTITION_SHARE} if self.keys.private else {}
        if self.auto:
            means = MEANS_ZCDP_BOUND_SHARE if zcdp_shares else MEANS_BOUND_SHARE
            first[BOUND_SPLIT_KEY] = epsilon * (means if self.scores_means else BOUND_SHARE)
        if self.range_choice is not None:
            first[RANGE_SPLIT_KEY] = epsilon * RANGE_SHARE
        if self.bounding == HPA:
            first[POPULARITY_STEP] = epsilon * POPULARITY_SHARE
        rest = epsilon - sum(first.values(), Fraction(0))
        total = sum((self.weight(step) for step in steps), Fraction(0))
        return {**first, **{step: rest * self.weight(step) / total for step in steps}}

    def split_keys(self) -> tuple[str, ...]:
        return (*([SELECTION_STEP] if self.keys.private else []), *([BOUND_SPLIT_KEY] if self.auto else []),
                *([RANGE_SPLIT_KEY] if self.range_choice is not None else []),
                *([POPULARITY_STEP] if self.bounding == HPA else []), *self.steps())


def weight_of(step: str, value: object) -> Fraction:
    """A step's weight: a positive finite number (a decimal is read exactly: 0.1 is 1/10)."""
    if isinstance(value, Fraction):
        weight = value
    elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"weights: the weight of {step!r} must be a positive number, got {value!r}")
    else:
        weight = Fraction(str(value))
    if weight <= 0:
        raise ConfigError(f"weights: the weight of {step!r} must be a positive number, got {value!r}")
    return weight


def clip_of(low: float | None, high: float | None, steps: int = DEFAULT_STEPS) -> ClipRange | None:
    """The value's public range, or None when neither end is given or either is "auto"."""
    if (low is None and high is None) or AUTO in (low, high):
        return None
    if low is None or high is None:
        raise ConfigError("give the value's range with both low and high")
    try:
        return ClipRange(low, high, steps)
    except ValueError as e:
        raise ConfigError(f"the value's range: {e}") from None
