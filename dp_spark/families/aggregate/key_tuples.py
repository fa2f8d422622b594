"""A public table of key tuples: the combinations of several key columns that exist (a city and its
postcodes, a shop and its departments), given instead of their product. Its rows are public, as
any key domain is: the groups are its distinct rows times the other key columns' values.

Given as {"columns": [...], "rows": ...} (in the API: a list of tuples or a pandas DataFrame) or
{"columns": [...], "file": "keys.csv"} (a CSV file with a header naming the columns, or a Parquet
file or folder). The values are kept as read until the run, which types them as the records'
columns are typed (typed_tuples: whole numbers, text or dates), so that "07" in a CSV of keys
meets the number 7 in the records.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dp_spark.errors import ConfigError

INTEGER, STRING, DATE = "integer", "string", "date"  # a key column's kind, from the records' type


def is_tuple_table(spec: Any) -> bool:
    return isinstance(spec, Mapping) and "columns" in spec


def checked_columns(name: str, columns: Any) -> tuple[str, ...]:
    """``keys.<name>.columns``: the key columns a table of key tuples holds, each once."""
    if (not isinstance(columns, (list, tuple)) or not columns or not all(isinstance(c, str) and c for c in columns)
            or len(set(columns)) != len(columns)):
        raise ConfigError(f"keys.{name}.columns must list the key columns of the table, each once, got {columns!r}")
    return tuple(columns)


def listed_tuples(name: str, spec: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[tuple, ...], str]:
    """(the columns, the table's rows as read, a description for the report) of ``keys.<name>``."""
    key = f"keys.{name}"
    columns = checked_columns(name, spec["columns"])
    sources = [k for k in ("rows", "file") if k in spec]
    unknown = sorted(set(spec) - {"columns", "rows", "file"})
    if unknown or len(sources) != 1:
        raise ConfigError(f"{key}: a table of key tuples takes columns and one of rows (a list of tuples or a pandas "
                          f"DataFrame), file (CSV with a header, or Parquet) or table (a catalog table)"
                          + (f"; {', '.join(unknown)} is not read" if unknown else ""))
    if "rows" in spec:
        frame = _frame(spec["rows"], columns, key)
        source = f"{len(frame):,} rows given"
    else:
        frame = _read_file(spec["file"], columns, key)
        source = f"file {spec['file']}"
    if frame.isna().any().any():
        raise ConfigError(f"{key}: a row of the table of key tuples has an empty value")
    rows, described = distinct_rows(frame, columns, source)
    return tuple(columns), rows, described


def distinct_rows(frame: pd.DataFrame, columns: Sequence[str], source: str) -> tuple[tuple[tuple, ...], str]:
    """The table's rows, each once in the order first met, and the report's description of them."""
    rows = tuple(dict.fromkeys(tuple(row) for row in frame.itertuples(index=False, name=None)))
    return rows, f"{source}: {len(rows):,} distinct ({', '.join(columns)})"


def _frame(rows: Any, columns: Sequence[str], key: str) -> pd.DataFrame:
    if isinstance(rows, pd.DataFrame):
        missing = [c for c in columns if c not in rows.columns]
        if missing:
            raise ConfigError(f"{key}.rows has no column {', '.join(missing)}")
        return rows[list(columns)].astype(object)
    if not isinstance(rows, (list, tuple)):
        raise ConfigError(f"{key}.rows must be a list of tuples or a pandas DataFrame, got {type(rows).__name__}")
    bad = [row for row in rows if not isinstance(row, (list, tuple)) or len(row) != len(columns)]
    if bad:
        raise ConfigError(f"{key}.rows: each row is a tuple of {len(columns)} values, got {bad[0]!r}")
    return pd.DataFrame([tuple(row) for row in rows], columns=list(columns), dtype=object)


def _read_file(path: str, columns: Sequence[str], key: str) -> pd.DataFrame:
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"{key}.file {path} does not exist")
    try:
        if file.is_dir() or file.suffix == ".parquet":
            frame = pd.read_parquet(file)
        else:
            frame = pd.read_csv(file, dtype=str, keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as e:
        raise ConfigError(f"{key}.file {path} cannot be read: {e}") from None
    return _frame(frame, columns, key)


def typed_tuples(columns: Sequence[str], rows: Sequence[tuple], kinds: Sequence[str]) -> list[tuple]:
    """The listed rows with each value as its column's kind in the records: a whole number (from a
    number or a text of one), a text, or a date (a date or an ISO text). A ConfigError names a
    value that cannot be one, before anything is spent."""
    typed = []
    for row in rows:
        typed.append(tuple(_typed(value, kind, column) for value, kind, column in zip(row, kinds, columns)))
    return typed


def _typed(value: Any, kind: str, column: str) -> Any:
    if kind == STRING:
        return str(value)
    if kind == DATE:
        if isinstance(value, datetime.datetime):
            return value.date()
        if isinstance(value, datetime.date):
            return value
        try:
            return datetime.date.fromisoformat(str(value).strip())
        except ValueError:
            raise ConfigError(f"the key tuples' {column} holds {value!r}, which is no date (the records' {column} "
                              "holds dates)") from None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        number = None
    if isinstance(value, bool) or number is None or not number.is_integer():
        raise ConfigError(f"the key tuples' {column} holds {value!r}, which is no whole number (the records' {column} "
                          "holds whole numbers)")
    return int(number)
