"""Public domains: the item catalogue and the attribute values (specification §1.2).

Releasing the keys a ``groupBy`` happens to return is not DP, so every count is
published over a domain fixed in advance: an integer range, a list of ids, a
file of ids, a Spark table of ids, or a named catalogue (MovieLens
``movies.dat``). None of these is ever derived from the private records.

Item ids are integers or strings (SKUs, venue hashes), never both: a list that
mixes the two is refused, and a file or table whose ids are not all integers is
read as strings. Against a string domain the records' item ids are compared as
strings (an integer column by its decimal form, dp_spark.io.validation). Records whose item or
attribute lies outside the domain are dropped before bounding (a per-record,
data-independent filter, so it does not affect the guarantee).

A table of ids is the one domain dp-spark cannot vouch for: taking the distinct
values of a table that holds the private records would publish which items
occur in them. The job's own source table is refused (by name as the catalog
resolves it, and by the files both read); any other table is public only
because the operator asserts so, and the report and the console say that.
"""

from __future__ import annotations

import codecs
import gzip
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dp_spark.core.domain_tables import refuse_source_table
from dp_spark.errors import ConfigError

CATALOGUES = ("movielens",)
MAX_ITEMS = 2**62  # a range's size; a cell index (item position x attribute values) is a 64-bit long


@dataclass(frozen=True, init=False)
class ItemDomain:
    """Sorted unique item ids, plus optional titles for display: int64, or (a string domain)
    Python strings in an object array, sorted by code point.

    A range [lo, hi] keeps only its bounds: its ids are made on first use (``ids``), so a domain
    of 10⁹ ids released on the executors never has them on the driver. (``dataclasses.replace``
    does not work on it: build a new one.)"""

    _ids: np.ndarray | None = field(repr=False)
    description: str
    id_range: tuple[int, int] | None = None  # set when the domain is exactly [lo, hi]
    # A sentence when the domain is public only by the operator's word (a table); "" otherwise.
    public_by_assertion: str = ""
    titles: dict[int, str] = field(default_factory=dict, compare=False, repr=False)
    # The public catalogue the ids and titles were read from ({"catalogue", "path", "encoding"}), so
    # that a report of the release can label items by title; None for other domains.
    catalogue: dict[str, str] | None = field(default=None, compare=False, repr=False)

    def __init__(self, ids: np.ndarray | None, description: str, id_range: tuple[int, int] | None = None,
                 public_by_assertion: str = "", titles: dict[int, str] | None = None,
                 catalogue: dict[str, str] | None = None):
        if ids is None and id_range is None:
            raise ValueError("an item domain needs its ids or its range")
        if ids is not None and id_range is not None and (
                len(ids) != id_range[1] - id_range[0] + 1 or len(ids) and (ids[0], ids[-1]) != tuple(id_range)):
            raise ValueError(f"ids {ids[:3]}... do not make up the range {id_range}")
        object.__setattr__(self, "_ids", ids)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "id_range", None if id_range is None else (int(id_range[0]), int(id_range[1])))
        object.__setattr__(self, "public_by_assertion", public_by_assertion)
        object.__setattr__(self, "titles", titles or {})
        object.__setattr__(self, "catalogue", catalogue)

    def __eq__(self, other: object) -> bool:
        """Equal when they hold the same ids in the same order (a range by its bounds alone) and the
        same description: the generated comparison would compare the id arrays element-wise, which
        leaves a parameter object that holds a domain (an aggregation's key columns) uncomparable."""
        if not isinstance(other, ItemDomain):
            return NotImplemented
        if (self.description, self.id_range, self.public_by_assertion) != (
                other.description, other.id_range, other.public_by_assertion):
            return False
        return self.id_range is not None or (self._ids.dtype == other._ids.dtype
                                             and np.array_equal(self._ids, other._ids))

    def __hash__(self) -> int:
        return hash((self.description, self.id_range, self.public_by_assertion, len(self)))

    @property
    def ids(self) -> np.ndarray:
        if self._ids is None:  # a range: made once, when some driver-side step needs every id
            object.__setattr__(self, "_ids", np.arange(self.id_range[0], self.id_range[1] + 1, dtype=np.int64))
        return self._ids

    def __len__(self) -> int:
        if self.id_range is not None:
            return self.id_range[1] - self.id_range[0] + 1
        return int(self._ids.size)

    @property
    def is_string(self) -> bool:
        """Whether the ids are strings (records' item ids are then compared as strings)."""
        return self.id_range is None and self._ids.dtype == object

    @property
    def bounds(self) -> tuple:
        """(smallest id, largest id), without making a range's ids."""
        return self.id_range if self.id_range is not None else (self._ids[0], self._ids[-1])

    def index_of(self, item_ids: np.ndarray) -> np.ndarray:
        """Positions of the given ids in the domain, -1 where an id is not in it. Against a
        string domain an id is looked up by its string form (the integer 7 as "7")."""
        if self.is_string:
            item_ids = _string_array([str(v) for v in np.asarray(item_ids, dtype=object).reshape(-1)])
        else:
            item_ids = np.asarray(item_ids, dtype=np.int64)
        if item_ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        if self.id_range is not None:
            lo, hi = self.id_range
            return np.where((item_ids >= lo) & (item_ids <= hi), item_ids - lo, -1)
        pos = np.searchsorted(self.ids, item_ids)
        pos = np.minimum(pos, self.ids.size - 1)
        return np.where(self.ids[pos] == item_ids, pos, -1)


# A number as an attribute value: ASCII digits, an optional point and exponent (not "nan", "1_000").
NUMBER = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"


@dataclass(frozen=True)
class AttributeDomain:
    """Attribute values as strings (the records' attr column is compared as a string)."""

    values: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.values)

    def index_of(self, values: Any) -> np.ndarray:
        lookup = {v: i for i, v in enumerate(self.values)}
        return np.array([lookup.get(str(v), -1) for v in values], dtype=np.int64)

    @property
    def numbers(self) -> tuple[float, ...] | None:
        """The values as numbers, when every one reads as a finite number and no two are equal
        as numbers; None otherwise. A numeric domain is compared with the records by value, so a
        CSV's "4.0" (or a double 4.0) is the domain's "4" (dp_spark.io.validation)."""
        if not all(re.fullmatch(NUMBER, value.strip()) for value in self.values):
            return None
        numbers = [float(value) for value in self.values]
        finite = all(math.isfinite(n) for n in numbers)
        return tuple(numbers) if finite and len(set(numbers)) == len(numbers) else None


def _string_array(values: list[str]) -> np.ndarray:
    """Strings as a 1-d object array (np.asarray would make a fixed-width "<U" array)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _from_ids(ids: Any, description: str, titles: dict[int, str] | None = None,
              catalogue: dict[str, str] | None = None) -> ItemDomain:
    arr = np.unique(np.asarray(ids, dtype=np.int64))
    if arr.size == 0:
        raise ConfigError(f"item domain {description} is empty")
    return ItemDomain(ids=arr, description=description, titles=titles or {}, catalogue=catalogue)


def _from_strings(ids: list[str], description: str) -> ItemDomain:
    if not ids:
        raise ConfigError(f"item domain {description} is empty")
    # Sorted by code point, as Python sorts strings (and as Spark sorts them, by UTF-8 bytes).
    return ItemDomain(ids=_string_array(sorted(set(ids))), description=description)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_str(value: Any) -> bool:
    return isinstance(value, (str, np.str_))


def item_domain_of_ids(ids: Any, description: str) -> ItemDomain:
    """A domain of the given ids (sorted, duplicates dropped), e.g. a list passed to the API:
    integers, or strings. A list mixing the two is refused rather than guessed at: "7" and 7
    would be one id or two depending on the guess."""
    if isinstance(ids, np.ndarray) and np.issubdtype(ids.dtype, np.integer):
        return _from_ids(ids, description)
    values = list(ids.tolist() if isinstance(ids, np.ndarray) else ids)
    if values and all(_is_str(v) for v in values):
        return _from_strings([str(v) for v in values], description)
    if all(_is_int(v) for v in values):
        return _from_ids(np.asarray(values, dtype=np.int64), description)
    kinds = sorted({type(v).__name__ for v in values})
    if any(_is_str(v) for v in values) and any(_is_int(v) for v in values):
        raise ConfigError(f"item domain {description} mixes integer and string ids; write every id as a string "
                          "(or every one as an integer)")
    raise ConfigError(f"item domain {description} must hold integer or string ids, got values of type "
                      f"{', '.join(kinds)}")


def _int_range(spec: Any, name: str) -> tuple[int, int]:
    if (
        not isinstance(spec, list)
        or len(spec) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in spec)
        or spec[0] > spec[1]
    ):
        raise ConfigError(f"{name}.range must be [low, high] integers with low <= high, got {spec!r}")
    return spec[0], spec[1]


# Tried in order when a domain file names no encoding: UTF-8 (a BOM is dropped), then the two
# single-byte encodings of most older catalogues (Netflix's movie_titles.txt is ISO-8859-1).
# Latin-1 decodes any bytes, so a file is always read; a fallback is said in the description.
FALLBACK_ENCODINGS = ("utf-8-sig", "cp1252", "latin-1")


def _encoding(spec: dict[str, Any], default: str | None, key: str = "domain.items") -> str | None:
    """``<key>.encoding`` (checked to be a codec Python knows), else ``default``."""
    if "encoding" not in spec:
        return default
    name = spec["encoding"]
    try:
        codecs.lookup(name)
    except (LookupError, TypeError):
        raise ConfigError(f"{key}.encoding {name!r} is not a known text encoding "
                          "(e.g. \"utf-8\", \"latin-1\", \"cp1252\")") from None
    return name


def decode_text(data: bytes, what: str, encoding: str | None = None) -> tuple[str, str]:
    """(text, the encoding it was read in). With ``encoding``, bytes it cannot decode are a
    ConfigError naming the position; without, the first of FALLBACK_ENCODINGS that decodes."""
    if encoding is not None:
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{what} is not valid {encoding}: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                              "(set domain.items.encoding to the file's encoding, e.g. \"latin-1\")") from None
    for name in FALLBACK_ENCODINGS:
        try:
            return data.decode(name), name
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 decodes any bytes")


def _read_bytes(path: str, what: str) -> bytes:
    p = Path(path)
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "rb") as fh:
                return fh.read()
        return p.read_bytes()
    except (OSError, EOFError) as exc:
        raise ConfigError(f"cannot read {what} {path!r}: {getattr(exc, 'strerror', None) or exc}") from None


def _read_lines(path: str, what: str, encoding: str | None) -> tuple[list[str], str]:
    text, used = decode_text(_read_bytes(path, what), f"{what} {path!r}", encoding)
    return text.splitlines(), used


def _fallback_note(used: str, asked: str | None) -> str:
    """Said in the domain's description when a file was not UTF-8 and named no encoding."""
    return f" (not UTF-8: read as {used})" if asked is None and used != "utf-8-sig" else ""


def read_id_file(path: str, encoding: str | None = None) -> np.ndarray:
    """One id per line (first comma/tab-separated field, spaces around it dropped); '#' starts a
    comment. Integer ids (int64) when every line's id is an integer, else every id as a string
    (an object array). Read in ``encoding``, or UTF-8 falling back to cp1252 and Latin-1."""
    return _id_file(path, encoding)[0]


# An integer id as text: ASCII digits with an optional minus, no leading zero (Python's int() also
# takes "007", "1_000" and other scripts' digits, which would merge ids such as "007" and "7").
CANONICAL_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")


def _as_integers(texts: list[str]) -> tuple[list[int] | None, int | None]:
    """(the texts as integers, None) when every one is an integer written the one canonical way,
    or (None, the index of the first that is not): then the ids are strings, "007" and "7" two."""
    out = []
    for index, text in enumerate(texts):
        if not CANONICAL_INTEGER.fullmatch(text):
            return None, index
        out.append(int(text))
    return out, None


def _id_file(path: str, encoding: str | None) -> tuple[np.ndarray, str, str]:
    """(ids, the encoding read in, a note for the description when the ids are strings)."""
    lines, used = _read_lines(path, "item domain file", encoding)
    texts, numbers = [], []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].replace("\t", ",").split(",", 1)[0].strip()
        if text:
            texts.append(text)
            numbers.append(number)
    integers, first_other = _as_integers(texts)
    if integers is not None:
        return np.array(integers, dtype=np.int64), used, ""
    note = f" (string ids: line {numbers[first_other]}, {texts[first_other]!r}, is not a plain integer)"
    return _string_array(texts), used, note


def read_movielens_catalogue(path: str, encoding: str = "iso-8859-1") -> tuple[np.ndarray, dict[int, str]]:
    """MovieLens ``movies.dat`` (id::title::genres, ISO-8859-1) or 100K ``u.item`` (id|title|...)."""
    lines, _used = _read_lines(path, "MovieLens catalogue", encoding)
    sep = "::" if lines and "::" in lines[0] else "|"
    titles = {}
    for number, line in enumerate(lines, 1):
        if line.strip():
            fields = line.split(sep)
            try:
                titles[int(fields[0])] = fields[1]
            except (ValueError, IndexError):
                raise ConfigError(f"MovieLens catalogue {path!r} line {number} is not 'id{sep}title{sep}...'") from None
    return np.array(sorted(titles), dtype=np.int64), titles


def item_domain(spec: dict[str, Any], spark: Any = None, source: Any = None, key: str = "domain.items") -> ItemDomain:
    """Build the item domain from ``[domain] items = {...}``; ``source`` (the job's SourceSpec)
    is what a table of ids must not be; ``key``: the config key the refusals name (a key column's
    values are a domain too)."""
    kinds = [k for k in ("range", "ids", "file", "table", "catalogue") if k in spec]
    if len(kinds) != 1:
        raise ConfigError(f"{key} needs exactly one of range, ids, file, table or catalogue")
    kind = kinds[0]
    if "encoding" in spec and kind not in ("file", "catalogue"):
        raise ConfigError(f"{key}.encoding applies to a file or a catalogue")
    if kind == "range":
        lo, hi = _int_range(spec["range"], key)
        if lo < -(2**63) or hi >= 2**63:
            raise ConfigError(f"{key}.range [{lo}, {hi}] goes beyond 64-bit integers, which item ids must be")
        if hi - lo >= MAX_ITEMS:
            raise ConfigError(f"{key}.range [{lo}, {hi}] has more than 2^62 items, more than a cell "
                              "index can count")
        return ItemDomain(ids=None, description=f"range [{lo}, {hi}]", id_range=(lo, hi))
    if kind == "ids":
        ids = spec["ids"]
        if not isinstance(ids, list) or not ids:
            raise ConfigError(f"{key}.ids must be a non-empty list of ids, got {ids!r}")
        return item_domain_of_ids(ids, f"list of {len(ids):,} ids")
    if kind == "file":
        asked = _encoding(spec, None, key)
        ids, used, note = _id_file(spec["file"], asked)
        description = f"file {spec['file']}{_fallback_note(used, asked)}{note}"
        return _from_strings(ids.tolist(), description) if note else _from_ids(ids, description)
    if kind == "catalogue":
        if spec["catalogue"] not in CATALOGUES or "path" not in spec:
            raise ConfigError(f"{key}.catalogue must be one of {CATALOGUES} with a path")
        encoding = _encoding(spec, "iso-8859-1", key)
        ids, titles = read_movielens_catalogue(spec["path"], encoding)
        return _from_ids(ids, f"MovieLens catalogue {spec['path']}", titles,
                         {"catalogue": spec["catalogue"], "path": spec["path"], "encoding": encoding})
    if spark is None:
        raise ConfigError(f"{key}.table needs a Spark session")
    return _table_domain(spark, spec["table"], spec.get("column", "item_id"), source, key)


def _table_domain(spark: Any, name: str, column: str, source: Any = None, key: str = "domain.items") -> ItemDomain:
    """The distinct ids of a table: refused when it is the job's source, asserted public otherwise."""
    refuse_source_table({"table": name, "column": column}, spark, source, key)
    try:
        rows = spark.table(name).select(column).distinct().toPandas()
    except Exception as exc:  # AnalysisException: missing table or column
        raise ConfigError(f"cannot read item domain table {name!r} column {column!r}: {exc}") from None
    domain = table_ids(rows[column], f"table {name}.{column}")
    what = "the item ids" if key == "domain.items" else f"the values of {key}"
    assertion = (f"{what} are the distinct values of table {name} column {column}, which the operator "
                 "asserts is public and not derived from the private records; dp-spark cannot check that")
    return ItemDomain(domain.ids, domain.description, public_by_assertion=assertion)


def table_ids(values: Any, description: str) -> ItemDomain:
    """A table column's distinct values as a domain. A numeric column, or a string column whose
    every value reads as an integer, gives integer ids (as before string ids existed); any other
    string column gives string ids. A null in a string column is refused: it is no id."""
    if values.dtype != object:
        return _from_ids(values.to_numpy(), description)
    texts = values.tolist()
    if any(v is None for v in texts):
        raise ConfigError(f"item domain {description} holds null ids")
    if not all(_is_str(v) for v in texts):
        return _from_ids(values.to_numpy(), description)
    integers, first_other = _as_integers(texts)
    if integers is not None:
        return _from_ids(np.array(integers, dtype=np.int64), description)
    return _from_strings(texts, f"{description} (string ids: {texts[first_other]!r} is not a plain integer)")


def attribute_domain(spec: Any) -> AttributeDomain | None:
    """``[domain] attributes``: a list of values, or { range = [lo, hi] }; None = no edges."""
    if spec is None:
        return None
    if isinstance(spec, dict):
        if set(spec) != {"range"}:
            raise ConfigError("domain.attributes must be a list of values or { range = [low, high] }")
        lo, hi = _int_range(spec["range"], "domain.attributes")
        values = tuple(str(v) for v in range(lo, hi + 1))
    elif isinstance(spec, list) and spec:
        values = tuple(str(v) for v in spec)
    else:
        raise ConfigError("domain.attributes must be a non-empty list of values or { range = [low, high] }")
    if len(set(values)) != len(values):
        raise ConfigError("domain.attributes has duplicate values")
    return AttributeDomain(values=values)
