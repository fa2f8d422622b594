"""The parameters of an aggregation, checked before anything is read: the groups, the metrics, the
contribution bound, the value's range and the quantiles' candidates; and the budget split, one
equal part per ledger step.

The steps are the noisy tables the metrics need (noisy_totals.tables_for: count, users, sum, sum of
squares) and one choice per quantile level. Each gets the same part of ε (under zCDP, of ρ): a
release of `count` and `mean(v)` spends half on the counts and half on the sums; one of
`quantiles(v, 0.1, 0.5, 0.9)` a third on each level.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dp_spark.core.clip_range import DEFAULT_STEPS, ClipRange
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.keys import GroupKeys
from dp_spark.families.aggregate.metrics import Metric
from dp_spark.families.aggregate.noisy_totals import GroupBound, step_name, tables_for
from dp_spark.families.aggregate.quantiles import MAX_CANDIDATES, Candidates

QUANTILE_KINDS = ("median", "quantiles")
NOISES = ("laplace", "gaussian", "auto")
# Without candidates of its own, a quantile is chosen among this many values evenly over the range.
DEFAULT_CANDIDATES = 101


def quantile_step(value: str, level: Fraction) -> str:
    """The ledger step of one quantile level (quantiles.choose_levels names it so)."""
    return f"quantile({value}, {float(level):g})"


@dataclass(frozen=True)
class AggregateParams:
    """One aggregation: ``keys`` (the groups), ``metrics``, ``bound`` (groups per user, records per
    group); with a value metric, ``clip`` (the public range and its grid); with a quantile,
    ``candidates`` (by default DEFAULT_CANDIDATES evenly over the range)."""

    keys: GroupKeys
    metrics: tuple[Metric, ...]
    bound: GroupBound
    clip: ClipRange | None = None
    candidates: Candidates | None = None
    noise: str = "laplace"  # privacy.noise: the tables' noise ("gaussian" or "auto" under zCDP)

    algorithm = "aggregate"

    def __post_init__(self):
        if self.noise not in NOISES:
            raise ConfigError(f"privacy.noise must be one of {', '.join(NOISES)}, got {self.noise!r}")
        metrics = tuple(self.metrics)
        object.__setattr__(self, "metrics", metrics)
        value = self.value
        if value is not None and self.clip is None:
            raise ConfigError(f"metrics of {value} need its public range: give low and high")
        if value is None and (self.clip is not None or self.candidates is not None):
            raise ConfigError("a range or quantile candidates are given, but no metric reads a value")
        if self.candidates is not None and not self.levels:
            raise ConfigError("quantile candidates are given, but no metric is a median or quantiles")
        if self.levels and self.candidates is None:
            assert self.clip is not None
            object.__setattr__(self, "candidates", Candidates.evenly(self.clip.low, self.clip.high, DEFAULT_CANDIDATES))
        if self.candidates is not None and len(self.candidates.values) > MAX_CANDIDATES:
            raise ConfigError(f"at most {MAX_CANDIDATES:,} quantile candidates")
        if value is not None and value in self.keys.names:
            raise ConfigError(f"{value} is a key column and the value the metrics read: a column is one or the other")
        overlap = set(self.keys.names) & {c for m in metrics for c in m.columns}
        if overlap:
            raise ConfigError(f"a key column and a metric's output share the name {', '.join(sorted(overlap))}")

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
        return tables_for(self.metrics)

    def steps(self) -> tuple[str, ...]:
        """The ledger steps, in the order the release pays them: the tables, then each level."""
        value = self.value or ""
        return (*(step_name(t, self.value) for t in self.tables), *(quantile_step(value, q) for q in self.levels))

    def split(self, epsilon: Fraction) -> dict[str, Fraction]:
        """An equal part of ``epsilon`` per step (module docstring)."""
        steps = self.steps()
        if len(set(steps)) != len(steps):
            raise ConfigError(f"the metrics ask for one quantile level twice: {', '.join(steps)}")
        return {step: Fraction(epsilon) / len(steps) for step in steps}


def clip_of(low: float | None, high: float | None, steps: int = DEFAULT_STEPS) -> ClipRange | None:
    """The value's public range, or None when neither end is given."""
    if low is None and high is None:
        return None
    if low is None or high is None:
        raise ConfigError("give the value's range with both low and high")
    try:
        return ClipRange(low, high, steps)
    except ValueError as e:
        raise ConfigError(f"the value's range: {e}") from None
