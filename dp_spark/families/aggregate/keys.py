"""The groups of an aggregation: one or more key columns, each with its public values, and the
groups as their product. A group is one cell index, a long: the mixed-radix number of its
columns' positions in their domains (the first column varies slowest), so that the bounding and
the aggregates that work per item work per group unchanged, over the range [0, groups).

The domains are public (specification §1.2): a record whose key is outside them is in no group and
is dropped before bounding, a per-record filter that depends on nothing else. The positions are
found in Spark from the public values alone (a range by arithmetic, a list by a lookup literal).

A key column of dates has a range of two dates or a list of dates as its values (TOML's own dates,
or Python's datetime.date): it is a domain of whole days since 1970-01-01, and a record's date
(a date, a timestamp on its day in the session's time zone, or a text Spark reads as a date) is
found on it as a whole number is; the released table shows the dates.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F

from dp_spark.core.domain import MAX_ITEMS, ItemDomain, item_domain, table_ids
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.key_tables import KeyTable, is_catalog_table, key_table, read_rows
from dp_spark.families.aggregate.key_tuples import checked_columns, distinct_rows, is_tuple_table, listed_tuples
from dp_spark.io.sql_literals import int_array

# A group's index is a long, and every count of groups a Python int: at most 2^62 groups, as items.
MAX_GROUPS = MAX_ITEMS
# A list of whole numbers is looked up by index in an array of positions over its span when that
# array is at most this many times the list's length (plus DENSE_SLACK): building it costs no more
# than a few copies of the list, which the search would build once.
DENSE_FACTOR, DENSE_SLACK = 4, 1024
# A key column's values given as this are chosen privately (private_groups).
PRIVATE = "private"
# A key column of dates counts whole days from this one (Spark's unix_date).
EPOCH = datetime.date(1970, 1, 1)


def column(name: str) -> Column:
    """The records' column ``name`` as written, a dot in it included (not a struct's field)."""
    return F.col(f"`{name}`")


@dataclass(frozen=True)
class KeyColumn:
    """A key column of the records and its public values (integers or strings, as an item domain)."""

    name: str
    domain: ItemDomain
    dates: bool = False  # the domain's ids are days since 1970-01-01

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a key column needs a name, got {self.name!r}")

    def position(self) -> Column:
        """The value's position in the domain, a long; null outside it (or null). Against whole
        numbers, a value counts as the whole number it is (7, 7.0 or the text "07"), and is in no
        group when it is not one (7.5, "seven"): try_cast never fails on a record, and a value
        whose long and double differ was truncated."""
        value = column(self.name)
        if self.domain.is_string:
            return self._listed(value.cast("string"))
        if self.dates:
            whole = F.unix_date(value.try_cast("date")).cast("long")
        else:
            as_long = value.try_cast("long")
            whole = F.when(as_long.cast("double") == value.try_cast("double"), as_long)
        if self.domain.id_range is not None:
            low, high = self.domain.id_range
            return F.when(whole.between(low, high), whole - F.lit(low))
        return self._listed(whole)

    def values(self, positions: np.ndarray) -> np.ndarray:
        """The public values at ``positions``: ids, or dates (datetime.date) for a column of dates."""
        ids = self.domain.ids[positions]
        return ids.astype("datetime64[D]").astype(object) if self.dates else ids

    def _listed(self, value: Column) -> Column:
        """The position of ``value`` in the domain's list of ids; null when it is not there. Whole
        numbers whose span is short beside their number (DENSE_FACTOR) are looked up by index in an
        array of positions (-1 for a gap), one step per record; other lists are searched, a step per
        listed id."""
        ids = self.domain.ids
        span = int(ids.max()) - int(ids.min()) + 1 if len(ids) and not self.domain.is_string else None
        if span is not None and span <= DENSE_FACTOR * len(ids) + DENSE_SLACK:
            low, high = int(ids.min()), int(ids.max())
            positions = np.full(high - low + 1, -1, dtype=np.int64)
            positions[ids.astype(np.int64) - low] = np.arange(len(ids))
            table = int_array(positions)  # one expression: an F.lit per position costs a call to the JVM each
            # Guarded by the range first: the index is then an int in [1, span], valid under ANSI mode.
            at = F.when(value.between(low, high), F.element_at(table, (value - F.lit(low - 1)).cast("int")))
            return F.when(at >= 0, at)
        listed = F.array(*[F.lit(v) for v in ids.tolist()]) if self.domain.is_string else int_array(ids)
        found = F.array_position(listed, value)
        return F.when(found > 0, found - F.lit(1))


@dataclass(frozen=True)
class GroupKeys:
    """The groups: every combination of the public key columns' values (``columns``), times the
    tuples of the ``tupled`` columns when there are some: listed in a public table of key tuples,
    or, with ``tuples_private``, the tuples partition selection released (set by the run:
    private_groups). A group's index puts the tuple's position first (slowest), then the public
    columns' positions; ``order`` is the key columns in the order the user gave them, the released
    table's. Listed tuples are kept as given until the run types them (typed_tuples); the tuples
    are then sorted and distinct. Key columns whose values a catalog table holds are ``tables``
    until the run reads them (read_tables); until then, too, the groups are not known."""

    columns: tuple[KeyColumn, ...]
    tupled: tuple[str, ...] = ()
    tuples: tuple[tuple, ...] | None = None  # selected (a DP output) or listed (public)
    tuples_private: bool = False
    order: tuple[str, ...] = ()
    source: str = ""  # where listed tuples come from, for the report
    tables: tuple[KeyTable, ...] = ()  # key values in catalog tables, not read yet
    asserted: str = ""  # listed tuples read from a catalog table: public by the operator's word

    def __post_init__(self):
        columns, tupled = tuple(self.columns), tuple(self.tupled)
        names = [*(c.name for c in columns), *tupled, *(name for table in self.tables for name in table.columns)]
        if not names:
            raise ConfigError("group by at least one key column")
        if len(set(names)) != len(names):
            raise ConfigError(f"each key column once: {', '.join(names)}")
        if math.prod(len(c.domain) for c in columns) > MAX_GROUPS:
            raise ConfigError(f"the key columns' domains make more than {MAX_GROUPS:,} groups")
        order = tuple(self.order) or tuple(names)
        if sorted(order) != sorted(names):
            raise ValueError(f"the key columns' order {order} names other columns than {names}")
        if (self.tuples is not None or self.tuples_private) and not tupled:
            raise ValueError("tuples without the columns they are of")
        if tupled and not self.tuples_private and not self.tuples:
            raise ConfigError(f"the table of key tuples for {', '.join(tupled)} has no row")
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "tupled", tupled)
        object.__setattr__(self, "order", order)

    @property
    def names(self) -> tuple[str, ...]:
        return self.order

    @property
    def private(self) -> tuple[str, ...]:
        """The key columns whose values are chosen privately (none, or all of ``tupled``)."""
        return self.tupled if self.tuples_private else ()

    @property
    def public_size(self) -> int:
        """The number of combinations of the public columns' values (1 when there is none)."""
        return math.prod(len(c.domain) for c in self.columns)

    @property
    def known(self) -> bool:
        """Whether the groups are known: no catalog table left to read, and no private tuples or
        those selected."""
        return not self.tables and (not self.tupled or self.tuples is not None)

    def __len__(self) -> int:
        if not self.known:
            raise ValueError("the groups are known only once their keys are read from their tables or selected")
        return self.public_size * (len(self.tuples) if self.tuples is not None else 1)

    def size(self) -> int | None:
        """The number of groups, or None while the private keys are not selected yet."""
        return len(self) if self.known else None

    def public_by_assertion(self) -> list[str]:
        """What makes the key values read from catalog tables public: the operator's word."""
        said = [c.domain.public_by_assertion for c in self.columns if c.domain.public_by_assertion]
        return [*said, *([self.asserted] if self.asserted else []), *(table.assertion() for table in self.tables)]

    def read_tables(self, spark: Any, source: Any) -> GroupKeys:
        """These keys with the values their catalog tables hold read through ``spark`` (each
        refused when it is the job's ``source``: key_tables.read_rows); unchanged without tables."""
        if not self.tables:
            return self
        columns = {c.name: c for c in self.columns}
        tuples: dict[str, Any] = {}
        for table in self.tables:
            rows, types = read_rows(spark, table, source)
            if table.tupled:
                listed, described = distinct_rows(rows, table.columns, f"table {table.table}")
                tuples = {"tupled": table.columns, "tuples": listed, "asserted": table.assertion(),
                          "source": described}
                continue
            assert table.column is not None
            values, description = rows[table.column], f"table {table.table}.{table.column}"
            dates = types[table.column] == "date"
            read = date_domain({"ids": values.tolist()}, f"keys.{table.key}") if dates else None
            found = read if read is not None else table_ids(values, description)
            domain = ItemDomain(found.ids, description, public_by_assertion=table.assertion())
            columns[table.key] = KeyColumn(table.key, domain, dates=dates)
        ordered = tuple(columns[name] for name in self.order if name in columns)
        return replace(self, columns=ordered, tables=(), **tuples)

    def with_tuples(self, tuples: Sequence[tuple]) -> GroupKeys:
        """These keys with ``tuples`` (selected privately, or listed and typed), sorted and distinct."""
        return replace(self, tuples=tuple(sorted({tuple(t) for t in tuples})))

    def strides(self) -> tuple[int, ...]:
        """How far one step of each public column's position moves the group index."""
        sizes = [len(c.domain) for c in self.columns]
        return tuple(math.prod(sizes[i + 1:]) for i in range(len(sizes)))

    def cell(self) -> Column:
        """The record's index among the public columns' combinations, a long in [0, public_size);
        null when any public key is outside its domain (0 for every record without public columns).
        With tupled columns, the group index adds the tuple's position times public_size
        (run.in_groups)."""
        if not self.columns:
            return F.lit(0).cast("long")
        terms = [column.position() * F.lit(stride) if stride != 1 else column.position()
                 for column, stride in zip(self.columns, self.strides())]
        index = terms[0]
        for term in terms[1:]:
            index = index + term
        return index

    def positions(self, cells: np.ndarray) -> list[np.ndarray]:
        """Each public column's positions for the given group indices."""
        cells = np.asarray(cells, dtype=np.int64) % self.public_size
        return [(cells // stride) % len(c.domain) for c, stride in zip(self.columns, self.strides())]

    def frame(self, cells: np.ndarray | None = None) -> pd.DataFrame:
        """The key columns of the given groups (all of them, in index order, by default), in the
        order the user gave them."""
        cells = np.arange(len(self), dtype=np.int64) if cells is None else np.asarray(cells, dtype=np.int64)
        table = {c.name: c.values(p) for c, p in zip(self.columns, self.positions(cells))}
        if self.tupled:
            assert self.tuples is not None
            at_tuple = cells // self.public_size
            for at, name in enumerate(self.tupled):
                table[name] = np.array([self.tuples[t][at] for t in at_tuple], dtype=object)
        return pd.DataFrame({name: table[name] for name in self.order}, index=range(len(cells)))


def group_keys(by: Sequence[str] | str, domains: Mapping[str, Any]) -> GroupKeys:
    """The groups of ``by`` from each column's public domain, given as an item domain is (a range,
    a list, a file: core.domain.item_domain's tables) or as an ItemDomain, or held in a catalog table
    ({"table": ..., "column": ...}, read by the run: key_tables); or PRIVATE: the column's values are
    chosen privately, together with the other private columns' (private_groups); or, under a name of
    its own, a table of key tuples of several columns (key_tuples.listed_tuples: {"columns": [...],
    "file": ...} or "rows"; or "table", a catalog table)."""
    if isinstance(by, str):
        by = [by]
    tables = {name: spec for name, spec in domains.items() if is_tuple_table(spec)}
    if len(tables) > 1:
        raise ConfigError(f"one table of key tuples at most, got {', '.join(tables)}")
    listed: tuple[str, ...] = ()
    rows: tuple[tuple, ...] | None = None
    source = ""
    pending: list[KeyTable] = []
    for name, spec in tables.items():
        if is_catalog_table(spec):
            listed = checked_columns(name, spec["columns"])
            pending.append(key_table(name, spec, listed))
        else:
            listed, rows, source = listed_tuples(name, spec)
    per_column = {name: spec for name, spec in domains.items() if name not in tables}
    missing = [name for name in by if name not in per_column and name not in listed]
    if missing:
        raise ConfigError(f"no values for key column(s) {', '.join(missing)}: give each a range, a list, a file, "
                          f"a table, or \"{PRIVATE}\" to choose them privately")
    extra = [name for name in [*per_column, *listed] if name not in by]
    if extra:
        raise ConfigError(f"values given for {', '.join(extra)}, which is not a key column")
    private = tuple(name for name in by if name in per_column and _is_private(per_column[name]))
    if private and listed:
        raise ConfigError(f"key columns chosen privately ({', '.join(private)}) and a table of key tuples "
                          f"({', '.join(listed)}) in one release: give the table's columns' values as tuples, or "
                          "choose them privately, not both")
    held = [name for name in by if name in per_column and is_catalog_table(per_column[name])]
    pending += [key_table(name, per_column[name]) for name in held]
    public = tuple(_key_column(name, per_column[name]) for name in by
                   if name in per_column and name not in private and name not in held)
    if private:
        return GroupKeys(public, private, tuples_private=True, order=tuple(by), tables=tuple(pending))
    if rows is None:
        listed = ()  # a table of key tuples in the catalog: its columns are tupled once it is read
    return GroupKeys(public, listed, rows, order=tuple(by), source=source, tables=tuple(pending))


def _is_private(spec: Any) -> bool:
    return isinstance(spec, str) and spec == PRIVATE


def _key_column(name: str, spec: Any) -> KeyColumn:
    if isinstance(spec, ItemDomain):
        return KeyColumn(name, spec)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"keys.{name}: give a range, a list, a file, a table or \"{PRIVATE}\", got {spec!r}")
    spec = dict(spec)
    dates = date_domain(spec, f"keys.{name}")
    if dates is not None:
        return KeyColumn(name, dates, dates=True)
    return KeyColumn(name, item_domain(spec, key=f"keys.{name}"))


def _is_date(value: Any) -> bool:
    return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)


def _day(value: datetime.date) -> int:
    return (value - EPOCH).days


def date_domain(spec: dict[str, Any], key: str) -> ItemDomain | None:
    """The days of a range of two dates or of a list of dates, or None when ``spec`` holds no date.
    A list mixing dates with other values, or a range of a date and something else, is refused."""
    values = spec.get("range", spec.get("ids"))
    if not isinstance(values, (list, tuple)) or not any(_is_date(v) for v in values):
        return None
    if not all(_is_date(v) for v in values):
        raise ConfigError(f"{key} mixes dates with other values: give every value as a date (2024-01-31 in "
                          "TOML, datetime.date in Python)")
    if "range" in spec:
        if len(values) != 2 or values[0] > values[1]:
            raise ConfigError(f"{key}.range must be [first, last] dates with first <= last, got {values!r}")
        first, last = _day(values[0]), _day(values[1])
        return ItemDomain(ids=None, description=f"dates [{values[0]}, {values[1]}]", id_range=(first, last))
    days = np.unique(np.asarray([_day(v) for v in values], dtype=np.int64))
    return ItemDomain(ids=days, description=f"{len(days):,} dates")
