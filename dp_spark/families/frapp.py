"""FRAPP (paper 003): every record perturbed on its own (local DP), then frequent itemsets mined
from the perturbed records.

Bound: a user keeps at most ``records_per_user`` records (a uniform sample of its own), when the
source names its users. Perturb: each record through the scheme's matrix, within a probability
ratio γ = e^ε per record. The job (dp_spark.jobs.frapp_job) writes the perturbed records and
mines them. Claim and argument: docs/frapp.md and docs/privacy.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dp_spark.algorithms import frapp
from dp_spark.algorithms.frapp_mining import AttributeSpec, Scheme, check_bit_capacity
from dp_spark.core.privacy import as_epsilon
from dp_spark.errors import ConfigError
from dp_spark.families.base import positive_int, require

FRAPP_KEYS = ("scheme", "sup_min", "records_per_user", "cp_k", "cp_rho")  # the algorithm.* keys it takes


@dataclass(frozen=True)
class FrappParams:
    """Built by :func:`frapp_params`, which checks every value: the attributes and their public
    values (``specs``), the fixed perturbation ``scheme``, the mining support ``sup_min``, the
    records kept per user and the ε each record's perturbation spends."""

    specs: tuple[AttributeSpec, ...]
    scheme: Scheme
    sup_min: float
    records_per_user: int
    epsilon_per_record: Fraction
    algorithm: str = "frapp"


def attribute_spec(entry: Any, index: int):
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


def frapp_params(algorithm: dict[str, Any], privacy: dict[str, Any], domain: dict[str, Any],
                 publisher: dict[str, Any], source_format: str | None = None) -> FrappParams:
    """FRAPP's parameters from a config's [algorithm], [privacy], [domain] and [publisher] tables
    (the API passes the same shapes). The privacy level is γ (the worst ratio of output
    probabilities) or ε = ln γ per record."""
    if source_format is not None and source_format not in ("adult", "parquet", "csv", "table"):
        raise ConfigError(f"frapp reads whole records: source.format must be adult, parquet, csv or table, "
                          f"got {source_format!r}")
    for key in algorithm:
        if key not in ("name", *FRAPP_KEYS):
            raise ConfigError(f"algorithm.{key} is not used by frapp (it takes: {', '.join(FRAPP_KEYS)})")
    for key in domain:
        if key != "records":
            raise ConfigError(f"domain.{key} is not used by frapp; its public domain is domain.records")
    for key in privacy:
        if key not in ("epsilon", "gamma"):
            raise ConfigError(f"privacy.{key} is not used by frapp: it has one step, set privacy.epsilon or "
                              "privacy.gamma")
    if publisher:
        raise ConfigError("frapp perturbs records itself; remove [publisher]")
    records = require(domain, "records", "domain")
    if not isinstance(records, list) or not records:
        raise ConfigError("domain.records must list the attributes, e.g. [{ column = 'sex', values = ['F', 'M'] }]")
    specs = tuple(attribute_spec(entry, i) for i, entry in enumerate(records))
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
    per_user = positive_int(algorithm.get("records_per_user", 1), "algorithm.records_per_user")
    cp_k = positive_int(algorithm.get("cp_k", frapp.PAPER_CP_K), "algorithm.cp_k")
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
    return FrappParams(specs, fixed, float(sup_min), per_user, per_record)


