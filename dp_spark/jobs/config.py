"""Job configuration: a TOML file plus ``--set key=value`` overrides.

Everything that decides the privacy guarantee (epsilon, l, d, the domains)
comes from here and is validated before Spark reads a single record
(ALGORITHMS.md §10: parameters that affect sensitivity are public and checked
up front).

Relative paths are taken relative to the directory the job is started from.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import difflib
import tomllib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from dp_spark.jobs.budget_store import StoreSpec
from dp_spark.errors import ConfigError
from dp_spark.io.sources import SourceSpec
from dp_spark.families.counts import CountsParams
from dp_spark.families.dpsense import DPSenseParams
from dp_spark.families.location_entropy import EntropyParams
from dp_spark.families.user_histogram import HistogramParams
from dp_spark.core.privacy import as_epsilon
from dp_spark.publishers.options import publisher_choice

SOURCE_FORMATS = ("parquet", "csv", "table", "movielens-1m", "movielens-100k", "netflix-synthetic", "checkins",
                  "checkins-synthetic", "adult")
ALGORITHMS = ("sra", "hpa", "lpa", "dft", "gs", "user_histogram", "dpsense", "dpsense_s", "entropy", "frapp")
COLUMN_ALGORITHMS = ("dpsense", "dpsense_s")  # paper 001: rows of distinct items, column counts
# Paper 000's baselines: a uniform sample of at most m records per user (the public bound M),
# published with a fixed publisher.
BASELINE_PUBLISHERS = {"lpa": "laplace", "dft": "fourier", "gs": "grouping"}
STANDARD_COLUMNS = ("user_id", "item_id", "attr", "time", "visits")  # time, visits: check-ins only

# Allowed keys per section; "spark" is free-form (Spark configuration keys).
_SCHEMA: dict[str, tuple[str, ...]] = {
    "": ("output", "seed", "run_date", "source", "domain", "privacy", "algorithm", "publisher", "budget_store",
         "spark"),
    "budget_store": ("path", "dataset", "epsilon_cap", "delta_cap"),
    "source": ("format", "path", "table", "sep", "header", "names", "columns"),
    "source.columns": STANDARD_COLUMNS,
    "domain": ("items", "attributes", "records"),
    "privacy": ("epsilon", "gamma", "epsilon_items", "epsilon_edges", "epsilon_popularity", "epsilon_theta",
                "epsilon_counts", "epsilon_entropy", "epsilon_visits", "epsilon_users", "delta"),
    "algorithm": ("name", "l", "d", "m", "consistent", "quantity", "bins", "theta_max", "limit", "variant",
                  "locations_per_user", "visits_per_location", "k", "xi", "outputs", "scheme", "sup_min",
                  "records_per_user", "cp_k", "cp_rho"),
    "publisher": ("name", "k", "grid_bits", "rho", "eta", "delta", "ranking_share", "reproduce_paper"),
}
EPSILON_PARTS = ("epsilon_popularity", "epsilon_items", "epsilon_edges", "epsilon_theta", "epsilon_counts",
                 "epsilon_entropy", "epsilon_visits", "epsilon_users")
_OWN_KEYS = {"user_histogram": ("quantity", "bins"), "dpsense": ("theta_max", "limit"),
             "dpsense_s": ("theta_max", "limit"),
             "entropy": ("variant", "locations_per_user", "visits_per_location", "k", "xi", "outputs"),
             "frapp": ("scheme", "sup_min", "records_per_user", "cp_k", "cp_rho")}
CHECKIN_FORMATS = ("checkins", "checkins-synthetic")


@dataclass(frozen=True)
class JobConfig:
    output: str
    source: SourceSpec
    items: dict[str, Any]
    attributes: Any  # list of values, {range = [lo, hi]}, or None for item counts only
    epsilon: Fraction
    epsilon_parts: dict[str, Fraction]  # explicit overrides of the default split
    algorithm: str
    l: int
    d: int
    seed: int | None = None
    spark: dict[str, str] = field(default_factory=dict)
    publisher: str = "laplace"
    publisher_options: dict[str, Any] = field(default_factory=dict)
    consistent: bool = False  # post-process item and edge counts to agree (dp_spark.publishers.consistency)
    quantity: str | None = None  # user_histogram: what is counted per user
    bins: tuple[int, ...] | None = None  # user_histogram: public bin edges
    theta_max: int = 256  # dpsense: the largest row limit θ considered
    limit: str = "normalize"  # dpsense: how long rows are cut to θ ("normalize" or "sample")
    entropy: dict[str, Any] = field(default_factory=dict)  # entropy: variant, M, C, delta, k, xi, outputs
    frapp: dict[str, Any] = field(default_factory=dict)  # frapp: specs, scheme, gamma, sup_min, ...
    run_date: str | None = None  # YYYY-MM-DD: the release goes to output/run_date=.../ (scheduled runs)
    budget_store: StoreSpec | None = None  # the dataset's budget across runs (dp_spark.jobs.budget_store)
    # The family's own frozen parameter class (dp_spark.families): what the runner reads. The
    # flat fields above (l, d, theta_max, entropy, ...) remain for the lab's evaluate and bench.
    params: Any = None

    @property
    def bound_name(self) -> str:
        """What the config calls the per-user record bound: m for the baselines, l otherwise."""
        return "m" if self.algorithm in BASELINE_PUBLISHERS else "l"


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
        node = raw
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {text!r}: {part!r} is not a section")
            node = child
        node[path[-1]] = value
    return raw


def _check_keys(raw: dict[str, Any]) -> None:
    def check(section: str, table: dict[str, Any]) -> None:
        allowed = _SCHEMA[section]
        for key in table:
            if key not in allowed:
                dotted = f"{section}.{key}" if section else key
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
                raise ConfigError(f"unknown config key {dotted!r}{hint}")

    check("", raw)
    for section in ("source", "domain", "privacy", "algorithm", "publisher", "budget_store"):
        value = raw.get(section, {})
        if not isinstance(value, dict):
            raise ConfigError(f"config section [{section}] must be a table")
        check(section, value)
    columns = raw.get("source", {}).get("columns", {})
    if not isinstance(columns, dict):
        raise ConfigError("source.columns must be a table of our column name -> source column name")
    check("source.columns", columns)


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _require(table: dict[str, Any], key: str, section: str) -> Any:
    if key not in table:
        raise ConfigError(f"missing config key '{section}.{key}'")
    return table[key]


def _source(raw: dict[str, Any]) -> SourceSpec:
    table = raw.get("source")
    if not table:
        raise ConfigError("missing config section [source]")
    fmt = _require(table, "format", "source")
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
    return SourceSpec(
        format=fmt,
        path=table.get("path"),
        table=table.get("table"),
        sep=str(table.get("sep", ",")),
        header=header,
        names=tuple(names) if names else None,
        columns=columns,
    )


def build_config(raw: dict[str, Any]) -> JobConfig:
    """Validate a parsed config (after overrides) into a JobConfig."""
    _check_keys(raw)
    cfg = _job_config(raw)
    return dataclasses.replace(cfg, run_date=run_date(raw.get("run_date")), budget_store=_budget_store(raw))


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
    path = _require(table, "path", "budget_store")
    dataset = _require(table, "dataset", "budget_store")
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
    return StoreSpec(path.removeprefix("file://"), dataset, cap, None if delta_cap is None else float(delta_cap))


def _job_config(raw: dict[str, Any]) -> JobConfig:
    output = raw.get("output")
    if not isinstance(output, str) or not output:
        raise ConfigError("missing config key 'output' (the output directory)")
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    source = _source(raw)
    if raw.get("algorithm", {}).get("name") == "frapp":
        return _frapp_config(raw, output, seed, source)
    if source.format == "adult":
        raise ConfigError("source.format 'adult' holds whole census records; only algorithm 'frapp' reads it")
    if "records" in raw.get("domain", {}) or "gamma" in raw.get("privacy", {}):
        raise ConfigError("domain.records and privacy.gamma are FRAPP settings; set algorithm.name = 'frapp'")

    domain = raw.get("domain", {})
    items = _require(domain, "items", "domain")
    if not isinstance(items, dict):
        raise ConfigError("domain.items must be a table such as { range = [1, 17770] }")
    attributes = domain.get("attributes")

    privacy = raw.get("privacy", {})
    epsilon = as_epsilon(_require(privacy, "epsilon", "privacy"), "privacy.epsilon")
    parts = {k: as_epsilon(privacy[k], f"privacy.{k}") for k in EPSILON_PARTS if k in privacy}

    algorithm = raw.get("algorithm", {})
    name = _require(algorithm, "name", "algorithm")
    if name not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; expected one of {', '.join(ALGORITHMS)}")
    for key in algorithm:
        owners = [other for other, keys in _OWN_KEYS.items() if key in keys]
        if owners and name not in owners:
            raise ConfigError(f"algorithm.{key} is a {' and '.join(owners)} parameter; {name} does not use it")
    if name != "entropy":
        for key in ("epsilon_entropy", "epsilon_visits", "epsilon_users", "delta"):
            if key in raw.get("privacy", {}):
                raise ConfigError(f"privacy.{key} is a location-entropy parameter; {name} does not use it")
        if source.format in CHECKIN_FORMATS:
            raise ConfigError(f"source.format {source.format!r} holds check-ins; only algorithm 'entropy' reads it")
    if name == "user_histogram":
        return _user_histogram_config(raw, output, seed, source, items, attributes, epsilon, parts)
    if name in COLUMN_ALGORITHMS:
        return _column_config(raw, name, output, seed, source, items, attributes, epsilon, parts)
    if name == "entropy":
        return _entropy_config(raw, output, seed, source, items, attributes, epsilon, parts)
    for key in ("epsilon_theta", "epsilon_counts"):
        if key in parts:
            raise ConfigError(f"privacy.{key} is a DPSense parameter; {name} does not use it")

    bound = "m" if name in BASELINE_PUBLISHERS else "l"
    other = "l" if bound == "m" else "m"
    if other in algorithm:
        raise ConfigError(f"algorithm.{other} is not used by {name}; its per-user bound is algorithm.{bound}")
    l = _positive_int(_require(algorithm, bound, "algorithm"), f"algorithm.{bound}")
    d = _positive_int(algorithm.get("d", 1), "algorithm.d")
    if name != "hpa" and "d" in algorithm:
        raise ConfigError(f"algorithm.d is an HPA parameter; {name} does not use it")
    if name != "hpa" and "epsilon_popularity" in parts:
        raise ConfigError(f"privacy.epsilon_popularity is an HPA parameter; {name} does not use it")
    publisher, publisher_options = publisher_choice(raw.get("publisher", {}), name, BASELINE_PUBLISHERS.get(name))
    consistent = algorithm.get("consistent", False)
    if not isinstance(consistent, bool):
        raise ConfigError(f"algorithm.consistent must be true or false, got {consistent!r}")
    if consistent and attributes is None:
        raise ConfigError("algorithm.consistent needs edge counts: set domain.attributes")
    if attributes is None and "epsilon_edges" in parts:
        raise ConfigError("privacy.epsilon_edges is set but domain.attributes is not: no edge counts to publish")

    return JobConfig(
        output=output,
        source=source,
        items=items,
        attributes=attributes,
        epsilon=epsilon,
        epsilon_parts=parts,
        algorithm=name,
        l=l,
        d=d,
        seed=seed,
        spark=_spark_settings(raw),
        publisher=publisher,
        publisher_options=publisher_options,
        consistent=consistent,
        params=CountsParams(name, l, d, publisher, publisher_options, consistent),
    )


def _spark_settings(raw: dict[str, Any]) -> dict[str, str]:
    spark = raw.get("spark", {})
    if not isinstance(spark, dict):
        raise ConfigError("config section [spark] must be a table of Spark settings")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in spark.items()}


def _user_histogram_config(raw, output, seed, source, items, attributes, epsilon, parts) -> JobConfig:
    """A histogram of a per-user quantity: every user adds one to one public bin, so
    there is no per-user bound to choose and the whole ε goes to the histogram."""
    from dp_spark.algorithms import histogram  # Spark-free helpers; kept here so config stays cheap

    algorithm = raw["algorithm"]
    for key in ("l", "m", "d", "consistent"):
        if key in algorithm:
            raise ConfigError(f"algorithm.{key} is not used by user_histogram: every user counts once, "
                              "in one bin")
    if attributes is not None:
        raise ConfigError("domain.attributes is not used by user_histogram; remove it")
    if parts:
        raise ConfigError(f"privacy.{next(iter(parts))} is not used by user_histogram: the whole "
                          "privacy.epsilon goes to the histogram")
    quantity = _require(algorithm, "quantity", "algorithm")
    if not isinstance(quantity, str) or quantity not in histogram.QUANTITIES:
        raise ConfigError(f"unknown algorithm.quantity {quantity!r}; expected one of "
                          f"{', '.join(histogram.QUANTITIES)}")
    try:
        edges = histogram.bin_edges(_require(algorithm, "bins", "algorithm"))
    except ValueError as exc:
        raise ConfigError(f"algorithm.bins: {exc}") from None
    publisher, publisher_options = publisher_choice(raw.get("publisher", {}))
    return JobConfig(
        output=output, source=source, items=items, attributes=None, epsilon=epsilon, epsilon_parts={},
        algorithm="user_histogram", l=histogram.SENSITIVITY, d=1, seed=seed, spark=_spark_settings(raw),
        publisher=publisher, publisher_options=publisher_options, quantity=quantity,
        bins=tuple(int(e) for e in edges),
        params=HistogramParams(quantity, tuple(int(e) for e in edges), publisher, publisher_options),
    )


def _column_config(raw, name, output, seed, source, items, attributes, epsilon, parts) -> JobConfig:
    """DPSense and DPSense-S: a user's row is its set of distinct items; θ is chosen privately,
    so there is no per-user bound to set, only the largest θ to consider."""
    from dp_spark.algorithms import dpsense  # kept here so config stays cheap to import

    algorithm = raw["algorithm"]
    for key in ("l", "m", "d", "consistent"):
        if key in algorithm:
            raise ConfigError(f"algorithm.{key} is not used by {name}: it chooses its row limit θ privately "
                              "(set algorithm.theta_max, the largest θ it may choose)")
    if attributes is not None:
        raise ConfigError(f"domain.attributes is not used by {name}: it publishes column (item) counts only")
    for key in parts:
        if key not in ("epsilon_theta", "epsilon_counts"):
            raise ConfigError(f"privacy.{key} is not used by {name}; its parts are epsilon_theta and epsilon_counts")
    if raw.get("publisher"):
        raise ConfigError(f"{name} adds its own noise (discrete Laplace at scale θ/ε); remove [publisher]")
    theta_max = _positive_int(algorithm.get("theta_max", dpsense.DEFAULT_THETA_MAX), "algorithm.theta_max")
    limit = algorithm.get("limit", "normalize")
    if limit not in dpsense.LIMITS:
        raise ConfigError(f"algorithm.limit must be one of {', '.join(dpsense.LIMITS)}, got {limit!r}")
    return JobConfig(
        output=output, source=source, items=items, attributes=None, epsilon=epsilon, epsilon_parts=parts,
        algorithm=name, l=theta_max, d=1, seed=seed, spark=_spark_settings(raw), publisher="laplace",
        theta_max=theta_max, limit=limit, params=DPSenseParams(name, theta_max, limit),
    )


def _entropy_config(raw, output, seed, source, items, attributes, epsilon, parts) -> JobConfig:
    """Location entropy (paper 004): items are the public locations; M and C are public bounds."""
    from dp_spark.algorithms import location_entropy  # kept here so config stays cheap to import

    algorithm, privacy = raw["algorithm"], raw.get("privacy", {})
    for key in ("l", "m", "d", "consistent"):
        if key in algorithm:
            raise ConfigError(f"algorithm.{key} is not used by entropy; its bounds are "
                              "algorithm.locations_per_user (M) and algorithm.visits_per_location (C)")
    if attributes is not None:
        raise ConfigError("domain.attributes is not used by entropy; domain.items is the public location set")
    if raw.get("publisher"):
        raise ConfigError("entropy adds its own noise; remove [publisher]")
    variant = algorithm.get("variant", "limit")
    if variant not in location_entropy.VARIANTS:
        raise ConfigError(f"algorithm.variant must be one of {', '.join(location_entropy.VARIANTS)}, got {variant!r}")
    baseline = variant == "baseline"  # Fig. 2's public bounds C_max = 1000, M_max = 100
    M = _positive_int(algorithm.get("locations_per_user", 100 if baseline else 5), "algorithm.locations_per_user")
    C = _positive_int(algorithm.get("visits_per_location", 1000 if baseline else 5), "algorithm.visits_per_location")
    k = _positive_int(algorithm.get("k", 50), "algorithm.k")
    xi = algorithm.get("xi", 1e-3)
    if isinstance(xi, bool) or not isinstance(xi, (int, float)) or not xi > 0:
        raise ConfigError(f"algorithm.xi must be a number > 0, got {xi!r}")
    delta = privacy.get("delta", 1e-8)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ConfigError(f"privacy.delta must be a number in (0, 1), got {delta!r}")
    outputs = algorithm.get("outputs", ["entropy"])
    if (not isinstance(outputs, list) or not outputs or "entropy" not in outputs
            or any(o not in location_entropy.OUTPUTS for o in outputs) or len(set(outputs)) != len(outputs)):
        raise ConfigError(f"algorithm.outputs must list 'entropy' and optionally 'visits', 'users' once each, "
                          f"got {outputs!r}")
    for key in parts:
        if key.removeprefix("epsilon_") not in outputs:
            raise ConfigError(f"privacy.{key} is not an output of this entropy job (outputs: {', '.join(outputs)})")
    return JobConfig(
        output=output, source=source, items=items, attributes=None, epsilon=epsilon, epsilon_parts=parts,
        algorithm="entropy", l=M, d=1, seed=seed, spark=_spark_settings(raw), publisher="laplace",
        entropy={"variant": variant, "M": M, "C": C, "k": k, "xi": float(xi), "delta": float(delta),
                 "outputs": tuple(outputs)},
        params=EntropyParams(variant, M, C, k, float(xi), float(delta), tuple(outputs)),
    )


def _attribute_spec(entry: Any, index: int):
    from dp_spark.algorithms.frapp_mining import AttributeSpec

    where = f"domain.records[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("column"), str):
        raise ConfigError(f"{where} must be a table with a 'column' and either 'edges' or 'values'")
    unknown = set(entry) - {"column", "edges", "right_closed", "values", "other"}
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r} (keys: column, edges, right_closed, values, "
                          "other)")
    edges, values = entry.get("edges"), entry.get("values")
    if (edges is None) == (values is None):
        raise ConfigError(f"{where} ({entry['column']}): give exactly one of 'edges' (numeric buckets) and "
                          "'values' (categories)")
    if edges is not None:
        if (not isinstance(edges, list) or not edges
                or any(isinstance(e, bool) or not isinstance(e, (int, float)) for e in edges)
                or any(a >= b for a, b in zip(edges, edges[1:]))):
            raise ConfigError(f"{where} ({entry['column']}): edges must be a non-empty increasing list of numbers")
        if "other" in entry:
            raise ConfigError(f"{where} ({entry['column']}): 'other' is for categories; numeric buckets cover "
                              "every number")
        right_closed = entry.get("right_closed", False)
        if not isinstance(right_closed, bool):
            raise ConfigError(f"{where}: right_closed must be true or false")
        return AttributeSpec(entry["column"], edges=tuple(float(e) for e in edges), right_closed=right_closed)
    if "right_closed" in entry:
        raise ConfigError(f"{where} ({entry['column']}): right_closed is for numeric edges")
    if (not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values)
            or len(set(values)) != len(values)):
        raise ConfigError(f"{where} ({entry['column']}): values must be a non-empty list of distinct strings")
    other = entry.get("other")
    if other is not None and (not isinstance(other, str) or other in values):
        raise ConfigError(f"{where} ({entry['column']}): other must be a string that is not one of the values")
    return AttributeSpec(entry["column"], values=tuple(values), other=other)


def _frapp_config(raw, output, seed, source) -> JobConfig:
    """FRAPP (paper 003): every record is perturbed on its own (local DP); the privacy level is
    γ (the worst ratio of output probabilities) or ε = ln γ per record."""
    from dp_spark.algorithms import frapp
    from dp_spark.algorithms.frapp_mining import Scheme, check_bit_capacity

    algorithm, privacy, domain = raw["algorithm"], raw.get("privacy", {}), raw.get("domain", {})
    if source.format not in ("adult", "parquet", "csv", "table"):
        raise ConfigError(f"frapp reads whole records: source.format must be adult, parquet, csv or table, "
                          f"got {source.format!r}")
    for key in algorithm:
        if key not in ("name", *_OWN_KEYS["frapp"]):
            raise ConfigError(f"algorithm.{key} is not used by frapp (it takes: {', '.join(_OWN_KEYS['frapp'])})")
    for key in domain:
        if key != "records":
            raise ConfigError(f"domain.{key} is not used by frapp; its public domain is domain.records")
    for key in privacy:
        if key not in ("epsilon", "gamma"):
            raise ConfigError(f"privacy.{key} is not used by frapp: it has one step, set privacy.epsilon or "
                              "privacy.gamma")
    if raw.get("publisher"):
        raise ConfigError("frapp perturbs records itself; remove [publisher]")
    records = _require(domain, "records", "domain")
    if not isinstance(records, list) or not records:
        raise ConfigError("domain.records must list the attributes, e.g. [{ column = 'sex', values = ['F', 'M'] }]")
    specs = tuple(_attribute_spec(entry, i) for i, entry in enumerate(records))
    if len({s.column for s in specs}) != len(specs):
        raise ConfigError("domain.records lists a column twice")
    try:
        check_bit_capacity([s.attribute() for s in specs])
    except ValueError as exc:
        raise ConfigError(f"domain.records: {exc}") from None
    if ("epsilon" in privacy) == ("gamma" in privacy):
        raise ConfigError("frapp needs exactly one of privacy.epsilon and privacy.gamma (gamma = e^epsilon)")
    if "gamma" in privacy:
        gamma = as_epsilon(privacy["gamma"], "privacy.gamma")
        if gamma <= 1:
            raise ConfigError(f"privacy.gamma must be > 1, got {privacy['gamma']!r}")
    else:
        gamma = frapp.gamma_below(as_epsilon(privacy["epsilon"], "privacy.epsilon"))
        if gamma <= 1:
            raise ConfigError(f"privacy.epsilon {privacy['epsilon']!r} is too small for FRAPP")
    scheme = algorithm.get("scheme", "det_gd")
    if scheme not in frapp.SCHEMES:
        raise ConfigError(f"algorithm.scheme must be one of {', '.join(frapp.SCHEMES)}, got {scheme!r}")
    for key in ("cp_k", "cp_rho"):
        if key in algorithm and scheme != "cut_paste":
            raise ConfigError(f"algorithm.{key} is a Cut-and-Paste parameter; scheme {scheme} does not use it")
    sup_min = algorithm.get("sup_min", 0.02)
    if isinstance(sup_min, bool) or not isinstance(sup_min, (int, float)) or not 0 < sup_min < 1:
        raise ConfigError(f"algorithm.sup_min must be a number strictly between 0 and 1, got {sup_min!r}")
    per_user = _positive_int(algorithm.get("records_per_user", 1), "algorithm.records_per_user")
    cp_k = _positive_int(algorithm.get("cp_k", frapp.PAPER_CP_K), "algorithm.cp_k")
    rho = algorithm.get("cp_rho")
    if rho is not None:
        if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not 0 < rho < 1:
            raise ConfigError(f"algorithm.cp_rho must be strictly between 0 and 1, got {rho!r}")
        rho = Fraction(str(rho))
    sizes = [len(s.attribute().labels) for s in specs]
    try:
        fixed = Scheme.of(scheme, gamma, sizes, cp_k, rho)
    except ValueError as exc:
        raise ConfigError(f"algorithm: {exc}") from None
    if fixed.ratio > float(gamma) * (1 + 1e-12):
        raise ConfigError(f"algorithm.cp_rho = {float(rho):g} with K = {cp_k} allows a probability ratio of "
                          f"{fixed.ratio:.4g} > gamma {float(gamma):.4g}; raise cp_rho or leave it out")
    per_record = frapp.epsilon_of(fixed.ratio)
    if "epsilon" in privacy:  # ratio ≤ γ ≤ e^ε holds exactly; the rounded-up log may not show it
        per_record = min(per_record, as_epsilon(privacy["epsilon"], "privacy.epsilon"))
    return JobConfig(
        output=output, source=source, items={}, attributes=None, epsilon=per_record * per_user, epsilon_parts={},
        algorithm="frapp", l=per_user, d=1, seed=seed, spark=_spark_settings(raw), publisher="laplace",
        frapp={"specs": specs, "scheme": fixed, "sup_min": float(sup_min), "records_per_user": per_user,
               "epsilon_per_record": per_record},
    )


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
