"""The API's side of the release lifecycle (dp_spark.release.lifecycle): a call's arguments, once
turned into parameters and domains, are planned, checked before the charge, charged to the
DatasetBudget given, computed by the engine and returned as a :class:`Release`. A job goes through
the same lifecycle (dp_spark.jobs.runner), so a job and an API call with the same inputs and seed
release the same tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from dp_spark.api.arguments import as_attributes, as_guards, as_items, standard_columns
from dp_spark.api.results import Plan, Planning, Release
from dp_spark.bounding.keys import with_row_key
from dp_spark.core.accounting import PURE, Accounting, release_epsilon
from dp_spark.core.composition import Charge
from dp_spark.core.progress import Progress, default_progress
from dp_spark.errors import ConfigError
from dp_spark.families.registry import family_of
from dp_spark.io import executor_env, spark_channels
from dp_spark.jobs.dataset_budget import DatasetBudget
from dp_spark.release import lifecycle
from dp_spark.release.engine import accuracy_section, compute
from dp_spark.release.family import Domains, Execution, Family, plan_split
from dp_spark.release.guards import Guards


def split_of(family: Family, params: Any, domains: Domains, epsilon: object, epsilon_split: Mapping[str, Any] | None,
             limits: Guards = Guards(), seeded: bool = False,
             accounting: Accounting = PURE) -> tuple[Fraction, dict[str, Fraction]]:
    """The release's ε and its split, with the caller's overrides of the family's default split."""
    epsilon = release_epsilon(epsilon, "epsilon", seeded)
    overrides = {k: release_epsilon(v, f"epsilon_split[{k!r}]", seeded) for k, v in (epsilon_split or {}).items()}
    return epsilon, plan_split(family, params, epsilon, domains, overrides, limits, accounting)


def plan_of(family: Family, params: Any, domains: Domains, epsilon: object, epsilon_split: Mapping[str, Any] | None,
            planning: Planning, guards: Any = None, accounting: Accounting = PURE) -> Plan:
    limits = as_guards(guards)
    limits.check_family(family.name, params.algorithm)
    epsilon, split = split_of(family, params, domains, epsilon, epsilon_split, limits, accounting=accounting)
    return Plan(params.algorithm, family.describe(params, epsilon, domains), {k: float(v) for k, v in split.items()},
                accuracy_section(family, params, epsilon, domains, split, planning.alpha, accounting))


class _BudgetCharger:
    """A release's cost charged to a DatasetBudget (lifecycle.Charger). Its end is recorded where
    the budget keeps one (a store); a store that cannot take the record leaves the release charged,
    and the release is still returned, with a warning."""

    what = "release"

    def __init__(self, budget: DatasetBudget, epsilon: Fraction, delta: float, what: str, cost: Charge | None,
                 progress: Progress):
        self.budget, self.epsilon, self.delta, self.label, self.cost = budget, epsilon, delta, what, cost
        self.progress = progress

    def charge(self) -> Any:
        return self.budget.charge(self.epsilon, self.delta, self.label, self.cost)

    def ended(self, charge: Any, status: str, exc: BaseException) -> None:
        self.budget.finish(charge, status, exc=exc)

    def released(self, charge: Any, report: dict) -> None:
        try:
            self.budget.finish(charge, "released", report=report)
        except Exception as failure:  # noqa: BLE001 - the charge is in the store either way
            self.progress(f"WARNING: could not mark the release released in the budget store ({failure}); it "
                          "stays charged there")


def release_of(family: Family, params: Any, records, domains: Domains, epsilon: object,
               epsilon_split: Mapping[str, Any] | None, seed: int | None, budget: DatasetBudget | None, progress,
               guards: Any = None, execution: Execution = Execution(), accounting: Accounting = PURE) -> Release:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    if budget is not None and not isinstance(budget, DatasetBudget):
        raise ConfigError(f"budget must be a dp_spark.DatasetBudget shared by the releases of one dataset "
                          f"(e.g. DatasetBudget(epsilon=5)), got {budget!r}")
    limits = as_guards(guards)
    epsilon, split = split_of(family, params, domains, epsilon, epsilon_split, limits, seeded=seed is not None,
                              accounting=accounting)
    progress = progress or default_progress()
    lifecycle.announce(progress, seed is not None, epsilon)
    lifecycle.refuse_before_charge(family, params, domains, epsilon, split, execution, accounting, limits, progress)
    family.check_schema(params, records, domains)  # the columns' names and types are public: no charge yet
    executor_env.check(records.sparkSession, progress)  # the executors' Python, before any charge
    spark_channels.warn_once(records.sparkSession)  # the UI or event log on: exact figures outside the release
    # Under zCDP the release is stated as (epsilon, delta) at the delta its rho converts at, and costs its rho.
    delta = family.delta(params) + (accounting.conversion_delta if accounting.zcdp else 0.0)
    cost = None if accounting.rho is None else Charge(epsilon, delta, accounting.rho, family.delta(params))
    charger = None if budget is None else _BudgetCharger(budget, epsilon, delta, f"{params.algorithm} release", cost,
                                                          progress)

    def release() -> Release:
        progress(family.describe(params, epsilon, domains))
        computed = compute(family, params, records, domains, epsilon, split, seed,
                           {"format": "dataframe", "location": None}, progress, limits, execution, accounting)
        return Release(computed.tables, computed.report, records.sparkSession, computed.diagnostics)

    return lifecycle.charged(charger, release, lambda result: result.report, progress)


def record_release(params: Any, df, privacy_unit: str, item: str | None, attribute: str | None, items: Any,
                   attributes: Any, epsilon, epsilon_split, seed, budget, progress, guards=None,
                   execution: Execution = Execution(), distinct_records: bool = False,
                   accounting: Accounting = PURE) -> Release | Plan:
    """A release (or, given a Planning, its plan) of records with a user, an item and perhaps an
    attribute column."""
    domains = Domains(None if items is None else as_items(items), as_attributes(attributes))  # None: user_histogram
    if (attribute is None) != (domains.attributes is None):
        raise ConfigError("give both attribute (the column) and attributes (its public values), or neither")
    if isinstance(df, Planning):
        return plan_of(family_of(params.algorithm), params, domains, epsilon, epsilon_split, df, guards, accounting)
    if not isinstance(distinct_records, bool):
        raise ConfigError(f"distinct_records must be True or False, got {distinct_records!r}")
    records = with_row_key(standard_columns(df, {"user_id": privacy_unit, "item_id": item, "attr": attribute}),
                           distinct=distinct_records)
    return release_of(family_of(params.algorithm), params, records, domains, epsilon, epsilon_split, seed, budget,
                      progress, guards, execution, accounting)
