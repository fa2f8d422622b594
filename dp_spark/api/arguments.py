"""The API's arguments into what the release kernel takes: public domains from ranges, lists or
tables; the caller's columns renamed to ours; guards, execution limits and accounting. Every
refusal here is a ConfigError that names the argument, raised before any data is read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Union

from dp_spark.core.accounting import Accounting, accounting_of
from dp_spark.core.domain import AttributeDomain, ItemDomain, attribute_domain, item_domain, item_domain_of_ids
from dp_spark.errors import ConfigError, DataError
from dp_spark.release.family import Execution
from dp_spark.release.guards import Guards, guards_of
from dp_spark.release.lifecycle import Progress

# The types of the API's arguments, as its functions' signatures show them.
Number = Union[int, float, Fraction]  # an epsilon, a rho, a value: exact when given as a Fraction
Items = Union[range, Sequence[int], Sequence[str], Mapping[str, Any], ItemDomain, str]  # str: "private" only
Attributes = Union[Sequence[Any], range, Mapping[str, Any], None]  # an attribute column's public values
Bound = Union[int, str]  # a per-user bound, or "auto" to choose it privately
Bins = Union[Sequence[int], Mapping[str, Any]]  # histogram edges, or {"range": [1, N]}
ProgressSink = Progress  # called with each progress line (the lifecycle's own type)


def as_items(items: Any, what: str = "items") -> ItemDomain:
    """A public id domain from a range (step 1), a sequence of integer or string ids, or a
    config-style table such as {"range": [1, 17770]} or {"file": "ids.txt"}."""
    if isinstance(items, ItemDomain):
        return items
    if isinstance(items, range):
        if items.step != 1 or len(items) == 0:
            raise ConfigError(f"{what} must be a non-empty range with step 1, got {items!r}")
        return item_domain({"range": [items.start, items.stop - 1]})
    if isinstance(items, Mapping):
        return item_domain(dict(items))
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise ConfigError(f"{what} must be a range, a sequence of integer or string ids or a table such as "
                          f"{{'range': [1, 100]}}, got {items!r}")
    ids = list(items)  # integers or strings; item_domain_of_ids refuses a mix and other types
    return item_domain_of_ids(ids, f"{len(ids):,} ids given to the API")


def as_attributes(values: Any) -> AttributeDomain | None:
    if values is None:
        return None
    if isinstance(values, range):
        values = list(values)
    return attribute_domain(list(values) if not isinstance(values, Mapping) else dict(values))


def require_spark_dataframe(df) -> None:
    """Refuse anything but a Spark DataFrame (classic or Connect) before it is touched."""
    from pyspark.sql import DataFrame

    if not isinstance(df, DataFrame):
        kind = f"{type(df).__module__}.{type(df).__qualname__}"
        hint = " (a pandas DataFrame: pass spark.createDataFrame(frame))" if kind.startswith("pandas.") else ""
        raise ConfigError(f"the records must be a Spark DataFrame, got {kind}{hint}")


def standard_columns(df, columns: dict[str, str | None]):
    """``df`` with the named columns renamed to ours (user_id, item_id, ...), others dropped."""
    require_spark_dataframe(df)
    selected = []
    for ours, theirs in columns.items():
        if theirs is None:
            continue
        if theirs not in df.columns:
            raise DataError(f"column {theirs!r} (for {ours}) not found; the DataFrame has columns: "
                            f"{', '.join(df.columns)}")
        selected.append(df[theirs].alias(ours))
    return df.select(*selected)


def as_guards(guards: Any) -> Guards:
    return guards if isinstance(guards, Guards) else guards_of(None if guards is None else dict(guards))


def as_execution(executor_noise_cells: int | None, max_output_rows: int | None) -> Execution:
    """Where the tables are released and how large they may be: the defaults, unless given."""
    return Execution(**{k: v for k, v in {"executor_noise_cells": executor_noise_cells,
                                          "max_output_rows": max_output_rows}.items() if v is not None})


def zcdp_accounting(algorithm: str, noise, epsilon, delta, rho, seed) -> tuple[Accounting, Fraction]:
    """The accounting of a release with no δ of its own (zCDP states its guarantee at ``delta``)."""
    if delta is not None and noise in (None, "laplace") and rho is None:
        raise ConfigError(f"{algorithm}: delta states a zCDP guarantee: give noise=\"gaussian\" or \"auto\", or rho; "
                          "otherwise no delta")
    return accounting_of(noise, epsilon, delta, rho, seed is not None, prefix="")
