"""What the private choice of a per-user bound scores: the weight each released table's squared
error gets in its quality (docs/bound_selection.md, "The objective"). Public: the config's
choice and the domains' sizes.

- ``"items"`` (the default): the item table alone, the one users read first. The edge table's
  many cells, whose noise grows with the bound as the items' does, then no longer pull the bound
  down, and their bias norms are not computed.
- ``"cells"``: every cell of every table alike, the release's total squared error (what the
  quality scored before the objective could be chosen).
- ``"tables"``: each table's mean squared error per cell, summed, so that every table weighs
  alike however many cells it has (weights cells_items / cells_t, 1 for the items).
- a table of weights, e.g. ``{item_counts = 1, edge_counts = 0.25}``: each table's total squared
  error times its weight (a table not named weighs 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from dp_spark.errors import ConfigError

ITEMS = "items"
CELLS = "cells"
TABLES = "tables"
NAMED = (ITEMS, CELLS, TABLES)
DEFAULT = ITEMS

Objective = str | tuple[tuple[str, Fraction], ...]  # a name, or (table, weight) pairs


def checked(value: Any, tables: tuple[str, ...], key: str) -> Objective:
    """The objective ``value`` (a name, or a mapping of some of ``tables`` to weights ≥ 0, one at
    least positive) as a hashable value, or a ConfigError naming ``key``."""
    if isinstance(value, str):
        if value not in NAMED:
            raise ConfigError(f"{key} must be one of {', '.join(repr(n) for n in NAMED)} or a table of weights, "
                              f"got {value!r}")
        return value
    if not isinstance(value, (Mapping, tuple)):
        raise ConfigError(f"{key} must be one of {', '.join(repr(n) for n in NAMED)} or a table of weights "
                          f"(e.g. {{{tables[0]} = 1}}), got {value!r}")
    pairs = dict(value)
    unknown = sorted(set(pairs) - set(tables))
    if unknown:
        raise ConfigError(f"{key} names {unknown}; the release's tables are {list(tables)}")
    weights = {}
    for table, weight in pairs.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float, Fraction)) or not weight >= 0 \
                or weight == float("inf"):
            raise ConfigError(f"{key}.{table} must be a finite number >= 0, got {weight!r}")
        weights[table] = Fraction(str(weight)) if isinstance(weight, float) else Fraction(weight)
    if not any(weights.values()):
        raise ConfigError(f"{key} must give some table a weight above 0, got {dict(pairs)!r}")
    return tuple((table, weights[table]) for table in tables if table in weights)


def weights(objective: Objective, cells: Mapping[str, int]) -> dict[str, Fraction]:
    """Each table's weight (``cells``: the release's tables, the item table first, and their
    numbers of cells); tables weighing 0 are left out."""
    names = list(cells)
    if objective == ITEMS:
        found = {names[0]: Fraction(1)}
    elif objective == CELLS:
        found = {table: Fraction(1) for table in names}
    elif objective == TABLES:
        found = {table: Fraction(cells[names[0]], cells[table]) if cells[table] else Fraction(0) for table in names}
    else:
        assert not isinstance(objective, str), objective  # every name is handled above
        given = dict(objective)
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ConfigError(f"the bound's objective weighs {unknown}, which this release does not publish "
                              f"(its tables: {names})")
        found = {table: given.get(table, Fraction(0)) for table in names}
    return {table: weight for table, weight in found.items() if weight}


def check_tables(objective: Objective | None, with_edges: bool,
                 tables: tuple[str, str] = ("item_counts", "edge_counts")) -> None:
    """Refuse, before anything is read, an objective that weighs a table the release will not
    publish (the edges, without attributes); ``tables``: the release's item and edge tables."""
    if objective is not None:
        weights(objective, {tables[0]: 1, **({tables[1]: 1} if with_edges else {})})


COUNTS, MEANS = "counts", "means"  # what the tables publish: the quality each objective weighs


def described(objective: Objective, kind: str = COUNTS) -> str:
    """The objective in words, for tune, plan and the report; ``kind`` MEANS: the means' quality
    (release.mean_bound_quality), which scores each mean's precision in nats."""
    if kind == MEANS:
        if objective == ITEMS:
            return "the item table's means"
        if objective == CELLS:
            return "every mean of every table alike"
        if objective == TABLES:
            return "each table's means per cell, summed"
        assert not isinstance(objective, str), objective
        return "the tables' means weighted " + ", ".join(f"{t} {float(w):g}" for t, w in objective)
    if objective == ITEMS:
        return "the item table's squared error"
    if objective == CELLS:
        return "the squared error summed over every cell of every table"
    if objective == TABLES:
        return "each table's mean squared error per cell, summed"
    assert not isinstance(objective, str), objective
    return "the tables' squared errors weighted " + ", ".join(f"{t} {float(w):g}" for t, w in objective)


def to_json(objective: Objective) -> str | dict[str, float]:
    return objective if isinstance(objective, str) else {t: float(w) for t, w in objective}
