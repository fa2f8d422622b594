"""FRAPP (paper 003, specification §6): every record perturbed on its own (local DP), then
frequent itemsets mined from the perturbed records.

Bound: a user keeps at most ``records_per_user`` records (a uniform sample of its own), when the
records name their users. Perturb: each record through the scheme's matrix, within a
probability ratio γ = e^ε per record; the budget is spent before anything is drawn. The
perturbed records are drawn once and kept (a local checkpoint), so the itemsets are mined from
exactly the records that are published: re-running a perturbation would draw new randomness, and
a lost checkpoint fails the run rather than draw it again. Mine: Apriori with support
reconstruction, post-processing.

Claim: docs/frapp.md, "Privacy claim: frapp".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.bounding.keys import ROW_KEY, with_row_key
from dp_spark.bounding.user_records import sample_per_user
from dp_spark.core import accuracy
from dp_spark.core.accounting import MAX_EPSILON, PrivacyUnit, as_epsilon, release_epsilon
from dp_spark.core.ledger import LedgerEntry
from dp_spark.core.progress import stage
from dp_spark.errors import ConfigError
from dp_spark.families.frapp import mining as fm
from dp_spark.families.frapp import perturbation as frapp
from dp_spark.families.frapp.mining import AttributeSpec, Scheme, check_bit_capacity
from dp_spark.io.validation import refuse_strictly, user_values
from dp_spark.release.family import (
    ConfigTables,
    Domains,
    Family,
    FamilyOutput,
    RunInputs,
    positive_int,
    require,
    rows_per_user,
)

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

    @property
    def epsilon(self) -> Fraction:
        """What a release spends per user: ε per record times the records each user keeps."""
        return self.epsilon_per_record * self.records_per_user


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
                 publisher: dict[str, Any]) -> FrappParams:
    """FRAPP's parameters from a config's [algorithm], [privacy], [domain] and [publisher] tables
    (the API passes the same shapes). The privacy level is γ (the worst ratio of output
    probabilities) or ε = ln γ per record."""
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
        if gamma > math.exp(MAX_EPSILON):
            raise ConfigError(f"privacy.gamma = {float(gamma):.4g} is above e^{MAX_EPSILON}: epsilon = ln gamma "
                              f"must be at most {MAX_EPSILON} (docs/choosing_epsilon.md)")
    else:
        gamma = frapp.gamma_below(release_epsilon(privacy["epsilon"], "privacy.epsilon"))
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
    per_user = rows_per_user(algorithm.get("records_per_user", 1), "algorithm.records_per_user")
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




def from_config(c: ConfigTables) -> FrappParams:
    return frapp_params(c.algorithm, c.privacy, c.domain, c.publisher)


# ---------------------------------------------------------------------------
# Whom it protects: FRAPP's guarantee is local and bounded (specification §1.1 rule 4, §6): a
# record's values may be replaced, but the number of records is published exactly.

RECORD_NEIGHBOURS = ("replacing the values of one record by any other values: every record is perturbed on its "
                     "own, and any two records give any output with probabilities within a factor "
                     "e^epsilon_per_record of each other")
N_PUBLIC = ("N, the number of records: the row count of perturbed_records, published exactly. Adding or removing "
            "a record or a user changes it, so the guarantee hides the values of records, not whether someone "
            "is in the data")


def privacy_unit(records_per_user: int, users_known: bool) -> PrivacyUnit:
    """What FRAPP protects: one record's values (replacement, local), and with L records per user
    all of a user's L records together at L times the per-record epsilon."""
    if not users_known:
        return PrivacyUnit("record (the source has no user column, so every row is taken as one user: a person "
                           "with several rows is protected per row only)", RECORD_NEIGHBOURS, "replacement",
                           "local", (N_PUBLIC,))
    if records_per_user == 1:
        return PrivacyUnit("user, through one record (each user keeps one record, a uniform sample of its own)",
                           RECORD_NEIGHBOURS, "replacement", "local", (N_PUBLIC,))
    per_user = records_per_user
    return PrivacyUnit(
        f"user, through at most {per_user} records (a uniform sample of the user's own)",
        f"replacing the values of all of one user's kept records (at most {per_user}) by any other values: each "
        f"record is perturbed on its own within a factor e^epsilon_per_record, so the user's records together "
        f"stay within e^({per_user} x epsilon_per_record) = e^epsilon (sequential composition); one record alone "
        f"is protected at epsilon_per_record",
        "replacement", "local",
        (N_PUBLIC, f"how many records each user keeps (at most {per_user}): the relation holds it fixed"))


def bounded_records(records: DataFrame, records_per_user: int, seed: int | None,
                    distinct: bool = False, strict: bool = False, progress=None) -> tuple[DataFrame, dict]:
    """At most ``records_per_user`` rows per user (a uniform sample, identical records each
    counted: ``distinct`` vouches there are none), when the records have a ``user_id`` column;
    every row is one user otherwise. A row without a user id belongs to no user: dropped, or,
    when ``strict`` (guards.strict), an error."""
    if "user_id" not in records.columns:
        return records, {"users": "not given: every row is taken as one user"}
    _bad, user = user_values(records)  # as every family reads them: "01" and 1 are one user
    records = records.withColumn("user_id", user)
    if strict and records.where(F.col("user_id").isNull()).limit(1).count():
        refuse_strictly("the user id column has missing values", "at least one row", progress)
    records = records.where(F.col("user_id").isNotNull())
    keyed = records if ROW_KEY in records.columns else with_row_key(records, distinct=distinct)
    kept = sample_per_user(keyed, records_per_user, seed)
    return kept.drop(ROW_KEY), {"users": "given"}


def _ledger_entry(params: FrappParams, epsilon: Fraction) -> LedgerEntry:
    per_user = params.records_per_user
    return LedgerEntry(
        step="perturb records",
        mechanism=f"FRAPP {params.scheme.name} (local)" + (f" x {per_user} records" if per_user > 1 else ""),
        epsilon=epsilon,
        sensitivity=Fraction(per_user),
        noise_scale=Fraction(0),
        cells=frapp.record_space(list(params.scheme.sizes)),
    )


def run(params: FrappParams, inputs: RunInputs) -> FamilyOutput:
    specs, scheme = list(params.specs), params.scheme
    attributes = [s.attribute() for s in specs]
    strict = inputs.guards.strict
    records, diagnostics = bounded_records(inputs.records, params.records_per_user, inputs.seed, strict=strict,
                                           progress=inputs.progress)
    table, dropped = fm.coded(records, specs, strict, inputs.progress)
    inputs.budget.spend(_ledger_entry(params, inputs.budget.total))  # before any randomness is drawn
    inputs.progress("perturbing the records")
    perturbed = fm.perturb(table, scheme, inputs.seed).localCheckpoint(eager=True)
    rows = perturbed.count()
    inputs.progress(f"{rows:,} perturbed records; mining frequent itemsets at support {params.sup_min:g}")
    with stage(inputs.progress, "mine"):
        found = fm.mine(perturbed, list(scheme.sizes), scheme, params.sup_min, inputs.progress)
    itemsets = fm.itemsets_table(found, attributes)
    published = fm.labelled(perturbed, attributes, scheme.name in frapp.BIT_SCHEMES)
    lengths = {str(k): int(v) for k, v in itemsets["length"].value_counts().sort_index().items()}
    # Records with a value outside its attribute's domain are dropped (or, strict, refused) after
    # bounding; the rows kept are the published N.
    bound = f"records_per_user = {params.records_per_user}" if diagnostics["users"] == "given" else None
    diagnostics["coverage"] = {"rows_outside_domain": {"records": dropped}, "rows_kept_by_bounding": rows,
                               "bound": bound}
    return FamilyOutput({"perturbed_records": published, "frequent_itemsets": itemsets}, diagnostics,
                        rows={"perturbed_records": rows, "frequent_itemsets": len(itemsets)},
                        algorithm_extra={"frequent_itemsets_per_length": lengths})


def _describe(params: FrappParams, epsilon: Fraction, domains: Domains) -> str:
    scheme = params.scheme
    return (f"FRAPP {scheme.name}: gamma {float(scheme.gamma):g} (worst ratio {scheme.ratio:.4g}), epsilon "
            f"{float(params.epsilon_per_record):.4g} per record; {len(params.specs)} attributes, record space "
            f"{frapp.record_space(list(scheme.sizes)):,}")


def _report_section(params: FrappParams) -> dict:
    scheme = params.scheme
    return {
        "parameters": {**scheme.parameters(), "sup_min": params.sup_min, "records_per_user": params.records_per_user,
                       "epsilon_per_record": float(params.epsilon_per_record)},
        "specification": frapp.SPEC_SECTIONS[scheme.name],
        "post_processing": "frequent itemsets mined from the perturbed records (Apriori with support "
                           "reconstruction; no budget)",
        "publisher": None,
        **({"note": "RAN-GD's random matrix adds no privacy: the guarantee is exactly DET-GD's "
                    "(specification §6.3)"} if scheme.name == "ran_gd" else {}),
    }


def _noise(params: FrappParams, seed: int | None) -> dict:
    ran_gd = params.scheme.name == "ran_gd"
    return {"sampler": "exact integer draws per record (keep/flip/insert probabilities are fractions)"
                       + (f"; RAN-GD's r uniform on {frapp.RAN_GD_POINTS} fixed points" if ran_gd else ""),
            "randomness": "fixed seed: reproducible, not for publication" if seed is not None
            else "OS CSPRNG, one source per Arrow batch"}


def _domain(params: FrappParams, domains: Domains) -> dict:
    attributes = [s.attribute() for s in params.specs]
    return {"records": {a.name: list(a.labels) for a in attributes},
            "record_space": frapp.record_space(list(params.scheme.sizes))}


def _accuracy(params: FrappParams, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
              alpha: float) -> dict:
    """No additive noise: each record is replaced through the scheme's matrix, and the supports are
    estimated from the perturbed records; their error depends on N and the true supports."""
    return {
        "perturbed_records": {"(every column)": accuracy.not_additive(
            f"each record perturbed on its own through {params.scheme.name}", alpha,
            "no noise is added to a value: each record's values are kept or replaced at random with public "
            "probabilities, so a single record says little; only counts over many records are informative")},
        "frequent_itemsets": {"support": accuracy.not_additive(
            "support reconstructed from the perturbed records", alpha,
            "its error depends on the number of records N (published by the run) and on the true supports, "
            "neither known before the run; keeping only itemsets above sup_min adds a selection bias")},
    }


FAMILY = Family(
    name="frapp", algorithms=("frapp",), params_type=FrappParams,
    default_split=lambda params, epsilon, domains: {"epsilon_records": epsilon},
    split_keys=lambda params, domains: ("epsilon_records",),
    run=run, describe=_describe, report_section=_report_section, from_config=from_config, reads="whole_records",
    config_keys=FRAPP_KEYS, uses_item_domain=False,
    privacy_unit=lambda params, records: privacy_unit(params.records_per_user, "user_id" in records.columns),
    noise_section=_noise, domain_section=_domain, accuracy=_accuracy,
    check_schema=lambda params, records, domains: fm.check_columns(records, list(params.specs)),
    output_rows=lambda params, domains: {"perturbed_records": None, "frequent_itemsets": None},
)
