"""Job configuration: a TOML file plus ``--set key=value`` overrides.

Everything that decides the privacy guarantee (epsilon, l, d, the domains)
comes from here and is validated before Spark reads a single record
(specification §10: parameters that affect sensitivity are public and checked
up front).

Relative paths are taken relative to the directory the job is started from.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import datetime as dt
import difflib
import tomllib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from dp_spark.core.accounting import PURE, Accounting, accounting_of, as_epsilon, release_epsilon
from dp_spark.core.composition import check_composition
from dp_spark.errors import ConfigError
from dp_spark.families.counts.family import ALGORITHMS as COUNTS_ALGORITHMS
from dp_spark.families.frapp.family import FrappParams
from dp_spark.families.location_entropy.family import EntropyParams
from dp_spark.families.registry import BY_ALGORITHM, family_of
from dp_spark.io.catalog import check_output_table
from dp_spark.io.datasets import MOVIELENS_ATTRIBUTE_KINDS
from dp_spark.io.sources import SourceSpec
from dp_spark.jobs.budget_store import StoreSpec
from dp_spark.release.family import ConfigTables, Execution, check_accounting, require
from dp_spark.release.guards import GUARD_KEYS, Guards, guards_of
from dp_spark.release.private_keys import PARTITION_DELTA_SHARE, PRIVATE_ITEMS

SOURCE_FORMATS = ("parquet", "csv", "table", "movielens-1m", "movielens-100k", "netflix-synthetic", "checkins",
                  "checkins-synthetic", "adult")
ALGORITHMS = tuple(BY_ALGORITHM)  # every algorithm.name a config may give
STANDARD_COLUMNS = ("user_id", "item_id", "attr", "time", "visits", "value")  # time, visits: check-ins; value: means

# Allowed keys per section; "spark" is free-form (Spark configuration keys).
_SCHEMA: dict[str, tuple[str, ...]] = {
    "": ("output", "output_table", "seed", "run_date", "source", "domain", "privacy", "algorithm", "publisher",
         "budget_store", "spark", "guards", "execution"),
    "guards": GUARD_KEYS,
    "execution": ("executor_noise_cells", "max_output_rows"),
    "budget_store": ("path", "dataset", "epsilon_cap", "delta_cap", "composition"),
    "source": ("format", "path", "table", "sep", "header", "names", "columns", "distinct_records", "encoding",
               "attribute"),
    "source.columns": STANDARD_COLUMNS,
    "domain": ("items", "attributes", "records", "keys"),
    "privacy": ("epsilon", "gamma", "epsilon_partition", "epsilon_bound", "epsilon_bounding", "epsilon_items",
                "epsilon_edges", "epsilon_popularity", "epsilon_theta", "epsilon_counts", "epsilon_entropy",
                "epsilon_visits", "epsilon_users", "epsilon_sums", "epsilon_edge_counts", "epsilon_edge_sums",
                "epsilon_clip", "delta", "noise", "rho"),
    "algorithm": ("name", "l", "d", "m", "consistent", "quantity", "bins", "theta_max", "limit", "variant",
                  "locations_per_user", "visits_per_location", "k", "xi", "outputs", "scheme", "sup_min",
                  "records_per_user", "cp_k", "cp_rho", "location_choice", "l_candidates", "m_candidates",
                  "l_objective", "m_objective", "l_choice",
                  "clip_candidates", "keys_per_user", "records_per_item", "locations_per_user_candidates",
                  "visits_per_location_candidates", "bounding", "low", "high", "by", "metrics", "groups_per_user",
                  "records_per_group", "c", "candidates", "grid_steps", "method", "groups_per_user_candidates",
                  "weights"),
    "publisher": ("name", "k", "grid_bits", "rho", "eta", "delta", "ranking_share", "reproduce_paper"),
}
EPSILON_PARTS = ("epsilon_partition", "epsilon_bound", "epsilon_bounding", "epsilon_popularity", "epsilon_items",
                 "epsilon_edges", "epsilon_theta", "epsilon_counts", "epsilon_entropy", "epsilon_visits",
                 "epsilon_users", "epsilon_sums", "epsilon_edge_counts", "epsilon_edge_sums", "epsilon_clip")
CHECKIN_FORMATS = ("checkins", "checkins-synthetic")
WHOLE_RECORD_FORMATS = ("adult", "parquet", "csv", "table")


@dataclass(frozen=True)
class JobConfig:
    output: str
    source: SourceSpec
    items: dict[str, Any]
    attributes: Any  # list of values, {range = [lo, hi]}, or None for item counts only
    epsilon: Fraction
    epsilon_parts: dict[str, Fraction]  # explicit overrides of the default split
    algorithm: str
    params: Any  # the family's frozen parameter class (dp_spark.families): what the runner reads
    seed: int | None = None
    spark: dict[str, str] = field(default_factory=dict)
    run_date: str | None = None  # YYYY-MM-DD: the release goes to output/run_date=.../ (scheduled runs)
    budget_store: StoreSpec | None = None  # the dataset's budget across runs (dp_spark.jobs.budget_store)
    output_table: str | None = None  # "db.name": the release also as catalog tables db.name_<table> (io.catalog)
    guards: Guards = Guards()  # [guards]: refuse a run whose records the domain barely covers (release.guards)
    execution: Execution = Execution()  # [execution]: which tables are released on the executors
    accounting: Accounting = PURE  # pure epsilon, or rho-zCDP (privacy.noise, privacy.rho; core.accounting)

    def with_params(self, **changes) -> JobConfig:
        """This config with some parameters changed (checked again by the parameter class). Another
        algorithm takes its own default way of choosing an "auto" bound unless ``choice`` is given."""
        if hasattr(self.params, "choice") and changes.get("algorithm", self.params.algorithm) != self.params.algorithm:
            changes.setdefault("choice", None)
        params = dataclasses.replace(self.params, **changes)
        return dataclasses.replace(self, params=params, algorithm=params.algorithm)

    # Read-only views of the parameters under the config's flat names, for the lab (evaluate,
    # bench) and the command line's summaries; the product path reads ``params``.

    @property
    def l(self) -> int:
        """The per-user bound in the config's sense: l or m, θ_max, M, or records per user."""
        for name in ("l", "theta_max", "M", "records_per_user"):
            if hasattr(self.params, name):
                return getattr(self.params, name)
        return 1  # the user histogram: one bin per user

    @property
    def d(self) -> int:
        return getattr(self.params, "d", 1)

    @property
    def bound_name(self) -> str:
        """What the config calls the per-user record bound: m for the baselines, l otherwise."""
        return getattr(self.params, "bound_name", "l")

    @property
    def publisher(self) -> str:
        return getattr(self.params, "publisher", "laplace")

    @property
    def publisher_options(self) -> dict[str, Any]:
        return getattr(self.params, "publisher_options", {})

    @property
    def consistent(self) -> bool:
        return getattr(self.params, "consistent", False)

    @property
    def quantity(self) -> str | None:
        return getattr(self.params, "quantity", None)

    @property
    def bins(self) -> tuple[int, ...] | None:
        return getattr(self.params, "bins", None)

    @property
    def theta_max(self) -> int:
        return getattr(self.params, "theta_max", 256)

    @property
    def limit(self) -> str:
        return getattr(self.params, "limit", "normalize")

    @property
    def entropy(self) -> dict[str, Any]:
        """Location entropy's parameters as a dict (variant, M, C, k, xi, delta, outputs)."""
        if not isinstance(self.params, EntropyParams):
            return {}
        return {k: getattr(self.params, k) for k in ("variant", "M", "C", "k", "xi", "delta", "outputs")}

    @property
    def frapp(self) -> dict[str, Any]:
        """FRAPP's parameters as a dict (specs, scheme, sup_min, records_per_user, epsilon_per_record)."""
        if not isinstance(self.params, FrappParams):
            return {}
        return {k: getattr(self.params, k) for k in ("specs", "scheme", "sup_min", "records_per_user",
                                                      "epsilon_per_record")}


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (["a", "b"], typed value). Values are read as TOML
    (numbers, booleans, quoted strings, arrays, inline tables); anything that
    is not valid TOML is taken as a plain string, so ``source.format=csv`` works."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set expects key=value with a dotted key, got {text!r}")
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    return key.split("."), parsed


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for text in overrides:
        path, value = parse_override(text)
        if path[0] == "spark" and len(path) > 1:
            # Spark's own keys contain dots: spark.sql.shuffle.partitions is one key of [spark]
            # (written quoted in TOML), not a nest of tables.
            spark = raw.setdefault("spark", {})
            if not isinstance(spark, dict):
                raise ConfigError("config section [spark] must be a table of Spark settings")
            spark[".".join(path)] = value
            continue
        node = raw
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {text!r}: {part!r} is not a section")
            node = child
        node[path[-1]] = value
    return raw


# Keys that were once read and are no more, with what to do instead.
_REMOVED = {
    "algorithm.effective_items": "the choice of the bound now measures where the bias falls, cell by cell, so "
                                 "it needs no guess of how many items it spreads over (docs/bound_selection.md): "
                                 "remove the key",
}


def _check_keys(raw: dict[str, Any]) -> None:
    def check(section: str, table: dict[str, Any]) -> None:
        allowed = _SCHEMA[section]
        for key in table:
            dotted = f"{section}.{key}" if section else key
            if dotted in _REMOVED:
                raise ConfigError(f"{dotted} is no longer used: {_REMOVED[dotted]}")
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
                raise ConfigError(f"unknown config key {dotted!r}{hint}")

    check("", raw)
    for section in ("source", "domain", "privacy", "algorithm", "publisher", "budget_store", "guards", "execution"):
        value = raw.get(section, {})
        if not isinstance(value, dict):
            raise ConfigError(f"config section [{section}] must be a table")
        check(section, value)
    columns = raw.get("source", {}).get("columns", {})
    if not isinstance(columns, dict):
        raise ConfigError("source.columns must be a table of our column name -> source column name")
    check("source.columns", columns)


def _source(raw: dict[str, Any]) -> SourceSpec:
    table = raw.get("source")
    if not table:
        raise ConfigError("missing config section [source]")
    fmt = require(table, "format", "source")
    if fmt not in SOURCE_FORMATS:
        raise ConfigError(f"unknown source.format {fmt!r}; expected one of {', '.join(SOURCE_FORMATS)}")
    if fmt == "table":
        if not isinstance(table.get("table"), str):
            raise ConfigError("source.format = 'table' needs source.table (a Spark table name)")
    elif not isinstance(table.get("path"), str):
        raise ConfigError(f"source.format = {fmt!r} needs source.path")
    names = table.get("names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise ConfigError("source.names must be a list of column names")
    header = table.get("header", names is None)
    if not isinstance(header, bool):
        raise ConfigError(f"source.header must be true or false, got {header!r}")
    columns = {k: str(v) for k, v in table.get("columns", {}).items()}
    distinct = table.get("distinct_records", False)
    if not isinstance(distinct, bool):
        raise ConfigError(f"source.distinct_records must be true or false, got {distinct!r}")
    encoding = _encoding(table.get("encoding"), fmt)
    attribute = table.get("attribute")
    if attribute is not None and (fmt not in ("movielens-1m", "movielens-100k")
                                  or attribute not in MOVIELENS_ATTRIBUTE_KINDS):
        kinds = ", ".join(MOVIELENS_ATTRIBUTE_KINDS)
        raise ConfigError(f"source.attribute chooses a MovieLens rating's attribute ({kinds}) with format "
                          f"movielens-1m or movielens-100k; got {attribute!r} with {fmt!r}")
    return SourceSpec(
        format=fmt,
        path=table.get("path"),
        table=table.get("table"),
        sep=str(table.get("sep", ",")),
        header=header,
        names=tuple(names) if names else None,
        columns=columns,
        distinct_records=distinct,
        encoding=encoding,
        attribute=attribute,
    )


TEXT_FORMATS = ("csv", "checkins")
# The character sets Spark 4's CSV reader takes (its CSVOptions refuse others), by Python's
# canonical codec name, which the first-line peek of a check-in file uses.
SPARK_CHARSETS = {"utf-8": "utf-8", "iso8859-1": "iso-8859-1", "ascii": "us-ascii", "utf-16": "utf-16",
                  "utf-16-be": "utf-16be", "utf-16-le": "utf-16le", "utf-32": "utf-32"}


def _encoding(value: Any, fmt: str) -> str:
    """source.encoding as Spark names it, checked before anything is read: an unknown one, one
    Spark cannot read, or one for a source that is not text, is refused."""
    if value is None:
        return "utf-8"
    if fmt not in TEXT_FORMATS:
        raise ConfigError(f"source.encoding applies to text sources ({', '.join(TEXT_FORMATS)}), not {fmt!r}")
    if not isinstance(value, str):
        raise ConfigError(f"source.encoding must be a character set name such as \"latin-1\", got {value!r}")
    try:
        name = codecs.lookup(value).name
    except LookupError:
        raise ConfigError(f"unknown source.encoding {value!r}; Spark reads {', '.join(SPARK_CHARSETS.values())}") \
            from None
    if name not in SPARK_CHARSETS:
        raise ConfigError(f"Spark cannot read source.encoding {value!r}: it reads "
                          f"{', '.join(SPARK_CHARSETS.values())}; convert the file first, e.g. `iconv -f {value} "
                          "-t utf-8`")
    return SPARK_CHARSETS[name]


def build_config(raw: dict[str, Any]) -> JobConfig:
    """Validate a parsed config (after overrides) into a JobConfig."""
    _check_keys(raw)
    cfg = _job_config(raw)
    guards = guards_of(raw.get("guards"))
    guards.check_family(family_of(cfg.algorithm).name, cfg.algorithm)
    return dataclasses.replace(cfg, run_date=run_date(raw.get("run_date")), budget_store=_budget_store(raw),
                               output_table=check_output_table(raw.get("output_table")), guards=guards,
                               execution=Execution(**raw.get("execution", {})))


def run_date(value: Any) -> str | None:
    """A run date as YYYY-MM-DD (TOML reads an unquoted 2026-11-22 as a date), or None."""
    if value is None:
        return None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return dt.date.fromisoformat(value.strip()).isoformat()
    raise ConfigError(f"run_date must be a date such as 2026-11-22, got {value!r}")


def _budget_store(raw: dict[str, Any]) -> StoreSpec | None:
    table = raw.get("budget_store")
    if table is None:
        return None
    path = require(table, "path", "budget_store")
    dataset = require(table, "dataset", "budget_store")
    for key, value in (("path", path), ("dataset", dataset)):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"budget_store.{key} must be a non-empty string, got {value!r}")
    if "://" in path and not path.startswith("file://"):
        raise ConfigError(f"budget_store.path must be a local file (it is locked and renamed), got {path!r}")
    # The caps create a new store; on an existing one they may only be lower (a stricter limit for
    # this run) or left out: the stored cap rules (dp_spark.jobs.budget_store).
    cap = as_epsilon(table["epsilon_cap"], "budget_store.epsilon_cap") if "epsilon_cap" in table else None
    delta_cap = table.get("delta_cap")
    if delta_cap is not None and (isinstance(delta_cap, bool) or not isinstance(delta_cap, (int, float))
                                  or not 0 <= delta_cap < 1):
        raise ConfigError(f"budget_store.delta_cap must be a number in [0, 1), got {delta_cap!r}")
    composition = table.get("composition")
    if composition is not None:  # on a new store; an existing store's rule must be the same
        check_composition(composition, "budget_store.composition", delta_cap)
    return StoreSpec(path.removeprefix("file://"), dataset, cap, None if delta_cap is None else float(delta_cap),
                     composition)


def _job_config(raw: dict[str, Any]) -> JobConfig:
    output = raw.get("output")
    if not isinstance(output, str) or not output:
        raise ConfigError("missing config key 'output' (the output directory)")
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    source = _source(raw)
    name = raw.get("algorithm", {}).get("name")
    family = BY_ALGORITHM.get(name) if isinstance(name, str) else None  # a bad name is refused below
    if family is not None and family.reads == "whole_records":  # FRAPP: whole records, their own domain
        for key in ("noise", "rho"):
            if key in raw.get("privacy", {}):
                raise ConfigError(f"privacy.{key} is for central releases under zCDP; frapp perturbs each record "
                                  "locally and is accounted in pure epsilon")
        if source.format not in WHOLE_RECORD_FORMATS:
            raise ConfigError(f"frapp reads whole records: source.format must be {', '.join(WHOLE_RECORD_FORMATS)}, "
                              f"got {source.format!r}")
        tables = ConfigTables(family.algorithms[0], raw["algorithm"], raw.get("privacy", {}), raw.get("domain", {}),
                              raw.get("publisher", {}), {})
        params = family.from_config(tables)
        return JobConfig(output=output, source=source, items={}, attributes=None, epsilon=params.epsilon,
                         epsilon_parts={}, algorithm=params.algorithm, params=params, seed=seed,
                         spark=_spark_settings(raw))
    if source.format == "adult":
        raise ConfigError("source.format 'adult' holds whole census records; only algorithm 'frapp' reads it")
    if "records" in raw.get("domain", {}) or "gamma" in raw.get("privacy", {}):
        raise ConfigError("domain.records and privacy.gamma are FRAPP settings; set algorithm.name = 'frapp'")

    domain = raw.get("domain", {})
    # A family that only filters by the item domain may go without one: then every record counts.
    items = domain.get("items", {}) if family is not None and family.item_domain_optional \
        else require(domain, "items", "domain")
    if items == PRIVATE_ITEMS:
        if family is None or family.name not in ("counts", "means"):
            raise ConfigError(f"domain.items = \"{PRIVATE_ITEMS}\" is for the counts ({', '.join(COUNTS_ALGORITHMS)}) "
                              f"and means only; {name!r} needs a public item domain")
        items = {}  # the release selects its items privately (the family's parameters say so)
    elif not isinstance(items, dict):
        raise ConfigError(f"domain.items must be a table such as {{ range = [1, 17770] }}, or \"{PRIVATE_ITEMS}\"")
    attributes = domain.get("attributes")

    privacy = raw.get("privacy", {})
    seeded = raw.get("seed") is not None
    selects = _selects_privately(domain)
    accounting, epsilon = accounting_of(privacy.get("noise"), privacy.get("epsilon"), privacy.get("delta"),
                                        privacy.get("rho"), seeded, outside_share=PARTITION_DELTA_SHARE
                                        if selects else Fraction(0))
    parts = {k: release_epsilon(privacy[k], f"privacy.{k}", seeded) for k in EPSILON_PARTS if k in privacy}
    if accounting.zcdp and parts:
        raise ConfigError(f"privacy.{next(iter(parts))}: under zCDP accounting the budget's parts are shares of rho, "
                          "set by the algorithm (privacy.json's rho_split); remove it")

    algorithm = raw.get("algorithm", {})
    name = require(algorithm, "name", "algorithm")
    if name not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; expected one of {', '.join(ALGORITHMS)}")
    for key in algorithm:
        owners = [other for other in ALGORITHMS if key in _own_keys(other)]
        if owners and name not in owners:
            raise ConfigError(f"algorithm.{key} is a {' and '.join(owners)} parameter; {name} does not use it")
    if name != "entropy":
        for key in ("epsilon_entropy", "epsilon_visits", "epsilon_users", "delta"):
            if key == "delta" and (selects or accounting.zcdp):
                continue  # partition selection spends it; zCDP states its guarantee at it
            if key in raw.get("privacy", {}):
                raise ConfigError(f"privacy.{key} is a location-entropy parameter; {name} does not use it")
        if source.format in CHECKIN_FORMATS:
            raise ConfigError(f"source.format {source.format!r} holds check-ins; only algorithm 'entropy' reads it")
    tables = ConfigTables(name, algorithm, privacy, domain, raw.get("publisher", {}), parts, attributes)
    family = family_of(name)
    params = family.from_config(tables)
    check_accounting(family, params, accounting)
    return JobConfig(output=output, source=source, items=items, attributes=attributes, epsilon=epsilon,
                     epsilon_parts=parts, algorithm=name, params=params, seed=seed,
                     spark=_spark_settings(raw), accounting=accounting)



def _selects_privately(domain: dict[str, Any]) -> bool:
    """Whether the release selects its items, or some key columns' values, by partition selection
    (which spends privacy.delta)."""
    keys = domain.get("keys")
    return domain.get("items") == PRIVATE_ITEMS or (
        isinstance(keys, dict) and any(isinstance(spec, str) and spec == PRIVATE_ITEMS for spec in keys.values()))


def _own_keys(algorithm: str) -> tuple[str, ...]:
    """The algorithm.* keys that only ``algorithm``'s family takes."""
    return family_of(algorithm).config_keys


def _spark_settings(raw: dict[str, Any]) -> dict[str, str]:
    spark = raw.get("spark", {})
    if not isinstance(spark, dict):
        raise ConfigError("config section [spark] must be a table of Spark settings")
    return {key: str(v).lower() if isinstance(v, bool) else str(v) for key, v in _flat_settings(spark, "")}


def _flat_settings(table: dict[str, Any], prefix: str) -> list[tuple[str, Any]]:
    """(dotted key, value) pairs of [spark]: an unquoted TOML key such as spark.sql.shuffle.partitions
    reads as nested tables, which would otherwise reach Spark as one key holding a dict."""
    pairs = []
    for key, value in table.items():
        if isinstance(value, dict):
            pairs += _flat_settings(value, f"{prefix}{key}.")
        elif isinstance(value, (list, dt.date, dt.time)):
            raise ConfigError(f"Spark setting {prefix}{key!s} must be a string, number or boolean, got {value!r}")
        else:
            pairs.append((f"{prefix}{key}", value))
    return pairs


def load_config(path: str | Path, overrides: list[str] | None = None) -> JobConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {str(path)!r}: {exc.strerror or exc}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {str(path)!r} is not valid TOML: {exc}") from None
    return build_config(apply_overrides(raw, list(overrides or [])))
