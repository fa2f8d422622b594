"""The metrics an aggregation releases per group, as a user writes them: "count", "users",
"sum(stars)", "mean(stars)", "variance(stars)", "stddev(stars)", "median(stars)" and
"quantiles(stars, 0.1, 0.5, 0.9)". Parsed into frozen metrics before anything is read; every
refusal names the text it refuses.

One value column for now: the bounding keeps records, and the value metrics of one release read
the same column, so that a record's value is clipped once and its candidate found once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.quantiles import level_of

COUNT, USERS = "count", "users"  # of the kept records; of the distinct users with a kept record
VALUE_KINDS = ("sum", "mean", "variance", "stddev", "median", "quantiles")
_CALL = re.compile(r"^\s*(\w+)\s*\(\s*([A-Za-z_][\w.]*)\s*(?:,\s*(.*?))?\s*\)\s*$")


@dataclass(frozen=True)
class Metric:
    """One metric: ``kind`` (count, users, or one of VALUE_KINDS), the ``value`` column it reads
    (None for count and users) and, for quantiles, their ``levels`` (the median is 1/2)."""

    kind: str
    value: str | None = None
    levels: tuple[Fraction, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        """The names of its output columns, as the release's table shows them."""
        if self.kind in (COUNT, USERS):
            return (self.kind,)
        if self.kind in ("median", "quantiles"):
            return tuple(f"{self.value}_p{_percent(level)}" for level in self.levels)
        if self.kind == "mean":  # with its interval's ends
            return tuple(f"mean_{self.value}{end}" for end in ("", "_low", "_high"))
        return (f"{self.kind}_{self.value}",)

    def __str__(self) -> str:
        if self.kind in (COUNT, USERS):
            return self.kind
        if self.kind == "quantiles":
            return f"quantiles({self.value}, {', '.join(f'{float(q):g}' for q in self.levels)})"
        return f"{self.kind}({self.value})"


def _percent(level: Fraction) -> str:
    """50 for 1/2, 90 for 9/10, 99_9 for 999/1000: a column name's part."""
    text = f"{float(level * 100):g}"
    return text.replace(".", "_")


def metric_of(text: str) -> Metric:
    """One metric from its text (see the module)."""
    if not isinstance(text, str):
        raise ConfigError(f"a metric is a text such as \"count\" or \"mean(stars)\", got {text!r}")
    if text.strip() in (COUNT, USERS):
        return Metric(text.strip())
    call = _CALL.match(text)
    if not call or call.group(1) not in VALUE_KINDS:
        raise ConfigError(f"unknown metric {text!r}: expected count, users, or one of "
                          f"{', '.join(f'{k}(column)' for k in VALUE_KINDS[:-1])}, quantiles(column, q, ...)")
    kind, column, rest = call.groups()
    if kind == "quantiles":
        levels = _levels(text, rest)
        return Metric(kind, column, levels)
    if rest:
        raise ConfigError(f"metric {text!r}: {kind} takes one column only")
    return Metric(kind, column, (Fraction(1, 2),) if kind == "median" else ())


def _levels(text: str, rest: str | None) -> tuple[Fraction, ...]:
    if not rest:
        raise ConfigError(f"metric {text!r}: give the quantiles' levels, e.g. quantiles(stars, 0.1, 0.5, 0.9)")
    levels = []
    for part in rest.split(","):
        try:
            levels.append(level_of(float(part)))
        except ValueError:
            raise ConfigError(f"metric {text!r}: each level must be a number strictly between 0 and 1, "
                              f"got {part.strip()!r}") from None
    if len(set(levels)) != len(levels):
        raise ConfigError(f"metric {text!r}: each level once")
    return tuple(sorted(levels))


def metrics_of(texts: Sequence[str]) -> tuple[Metric, ...]:
    """The metrics of one release, each once, reading one value column at most."""
    if isinstance(texts, str) or not texts:
        raise ConfigError("metrics must be a non-empty list, e.g. [\"count\", \"mean(stars)\"]")
    metrics = tuple(metric_of(t) for t in texts)
    columns = [c for m in metrics for c in m.columns]
    if len(set(columns)) != len(columns):
        raise ConfigError(f"metrics {list(texts)} name an output column twice")
    values = {m.value for m in metrics if m.value is not None}
    if len(values) > 1:
        raise ConfigError(f"the metrics read one value column per release, got {', '.join(sorted(values))}")
    return metrics
