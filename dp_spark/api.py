"""The public API: differentially private releases from a DataFrame you already have.

Each function takes a Spark DataFrame, names the column that identifies the privacy unit (one
user, by default the column ``user_id``) and the columns it counts, takes the public domain and
the privacy parameters as arguments, and returns a :class:`Release`: the noisy tables (pandas),
the ledger and the privacy report, and ``write(path)`` with the same all-or-nothing guarantee as
``dp-spark run``. A :class:`DatasetBudget` shared by several calls caps what they spend together.

A TOML job (``dp-spark run``) is a translation of its config onto the same families and the
same engine: with the same inputs and seed, a job and an API call release the same tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Mapping

import pandas as pd

from dp_spark import display
from dp_spark.bounding.keys import with_row_key
from dp_spark.core import accuracy
from dp_spark.core.composition import SEQUENTIAL, ZCDP, Charge, check_composition, guarantee
from dp_spark.core.domain import AttributeDomain, ItemDomain, attribute_domain, item_domain, item_domain_of_ids
from dp_spark.core.privacy import (PURE, Accounting, BudgetExceeded, accounting_of, as_epsilon, epsilon_warning,
                                   release_epsilon)
from dp_spark.core.progress import Progress
from dp_spark.errors import ConfigError, DataError, GuardRefused
from dp_spark.release.family import (Domains, Execution, Family, check_accounting, check_domain_fits,
                                   describe_output_size, output_size, plan_split)
from dp_spark.families.counts.family import BASELINE_PUBLISHERS, CountsParams
from dp_spark.release.private_keys import PARTITION_DELTA_SHARE, PRIVATE_ITEMS, partition_delta
from dp_spark.families.dpsense.family import DPSenseParams
from dp_spark.release.engine import accuracy_section, compute
from dp_spark.families.frapp.family import frapp_params
from dp_spark.release.guards import Guards, guards_of
from dp_spark.families.location_entropy.family import EntropyParams
from dp_spark.families.means.params import MeansParams
from dp_spark.families.registry import family_of
from dp_spark.families.user_histogram.family import HistogramParams
from dp_spark.io import checkins, executor_env, release_store, spark_channels


class DatasetBudget:
    """The privacy budget of one dataset, shared by the releases made from it.

    Every API call given ``budget=`` charges its whole epsilon (and delta) here before it reads a
    record, and is refused with :class:`BudgetExceeded` when that would pass the cap: the
    releases of one dataset compose sequentially, or with ``composition="zcdp"`` (and a delta) by
    adding their ρ (docs/zcdp.md). (Across processes and scheduled runs, the job's budget store
    does the same job: docs/scheduled_runs.md.)
    """

    def __init__(self, epsilon: object, delta: float = 0.0, composition: str = SEQUENTIAL):
        self.epsilon = as_epsilon(epsilon, "budget epsilon")
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 <= delta < 1:
            raise ConfigError(f"budget delta must be a number in [0, 1), got {delta!r}")
        self.delta = float(delta)
        self.composition = check_composition(composition, "composition", self.delta)
        self.charges: list[dict] = []

    @property
    def spent(self) -> Fraction:
        return sum((c["epsilon"] for c in self.charges), Fraction(0))

    @property
    def delta_spent(self) -> float:
        return sum(c["delta"] for c in self.charges)

    @property
    def remaining(self) -> Fraction:
        return self.epsilon - self.spent

    def charge(self, epsilon: Fraction, delta: float, what: str, cost: Charge | None = None) -> None:
        """Charge a release's (ε, δ) (``cost``: its approximate-zCDP cost, for a zCDP release): it fits
        when the releases with it are within the budget by its composition rule (core.composition)."""
        cost = cost or Charge.pure(epsilon, delta)
        after = guarantee([c["cost"] for c in self.charges] + [cost], self.delta)
        if not after.within(self.epsilon, self.delta, self.composition):
            if self.composition == ZCDP:
                raise BudgetExceeded(f"{what} would take the releases to epsilon {after.epsilon_zcdp:.6g} at delta "
                                     f"{self.delta:g} by zCDP composition (rho {float(after.rho):.6g}), past the "
                                     f"dataset's {float(self.epsilon):g}")
            if self.spent + epsilon > self.epsilon:
                raise BudgetExceeded(f"{what} needs epsilon {float(epsilon):g} but only {float(self.remaining):g} of "
                                     f"the dataset's {float(self.epsilon):g} is left")
            raise BudgetExceeded(f"{what} needs delta {delta:g} but the dataset's budget allows {self.delta:g} "
                                 f"in all ({self.delta_spent:g} spent)")
        self.charges.append({"what": what, "epsilon": epsilon, "delta": delta, "cost": cost})

    def finish(self, charge: Any, status: str, exc: BaseException | None = None, report: dict | None = None) -> None:
        """How a charged release ended; kept only by a persistent store (:meth:`from_store`)."""

    def __repr__(self) -> str:
        return (f"DatasetBudget(epsilon={float(self.epsilon):g}, spent={float(self.spent):g}, "
                f"releases={len(self.charges)})")

    @staticmethod
    def from_store(path: str, dataset: str, epsilon_cap: object = None, delta_cap: float | None = None,
                   composition: str | None = None) -> StoreBudget:
        """The dataset's budget in the persistent store the jobs use (``[budget_store]``,
        docs/scheduled_runs.md), so that a notebook's releases and the scheduled runs share one cap
        and a kernel restart forgets nothing. Each release is charged in the store before it reads a
        record and recorded there as released, failed or refused; the store's cap rules apply (a
        store is created only with ``epsilon_cap``, and a cap above the stored one is refused;
        ``composition`` creates a store with that rule, and must match an existing store's)."""
        return StoreBudget(path, dataset, epsilon_cap, delta_cap, composition)


class StoreBudget(DatasetBudget):
    """A :class:`DatasetBudget` kept in a budget store file (:meth:`DatasetBudget.from_store`):
    ``spent`` and ``remaining`` are read from the store, so they include every other run's spend."""

    def __init__(self, path: str, dataset: str, epsilon_cap: object = None, delta_cap: float | None = None,
                 composition: str | None = None):
        from dp_spark.jobs import budget_store

        if not isinstance(path, str) or not isinstance(dataset, str) or not path or not dataset:
            raise ConfigError("from_store needs the store's path and the dataset's name, both strings")
        cap = None if epsilon_cap is None else as_epsilon(epsilon_cap, "epsilon_cap")
        if delta_cap is not None and (isinstance(delta_cap, bool) or not isinstance(delta_cap, (int, float))
                                      or not 0 <= delta_cap < 1):
            raise ConfigError(f"delta_cap must be a number in [0, 1), got {delta_cap!r}")
        if composition is not None:
            check_composition(composition, "composition", delta_cap)
        self.spec = budget_store.StoreSpec(path, dataset, cap, None if delta_cap is None else float(delta_cap),
                                           composition)
        self.charges = []
        budget_store.check_reachable(self.spec)

    @property
    def composition(self) -> str:
        info = self._summary()
        return info["composition"] if info else (self.spec.composition or SEQUENTIAL)

    def _summary(self) -> dict | None:
        """The store as ``dp-spark budget show --json`` reads it; None before its first charge."""
        from pathlib import Path

        from dp_spark.jobs import budget_store

        return budget_store.summary(self.spec.path, self.spec.dataset) if Path(self.spec.path).exists() else None

    @property
    def epsilon(self) -> Fraction:
        info = self._summary()
        if info is None or info["epsilon"]["cap"] is None:
            return self.spec.epsilon_cap or Fraction(0)
        stored = Fraction(info["epsilon"]["cap"])  # a lower cap given here limits this budget's charges
        return stored if self.spec.epsilon_cap is None else min(stored, self.spec.epsilon_cap)

    @property
    def spent(self) -> Fraction:
        info = self._summary()
        return Fraction(0) if info is None else Fraction(info["epsilon"]["spent"])

    @property
    def delta(self) -> float:
        info = self._summary()
        return (self.spec.delta_cap or 0.0) if info is None else info["delta"]["cap"] or 0.0

    @property
    def delta_spent(self) -> float:
        info = self._summary()
        return 0.0 if info is None else info["delta"]["spent"]

    def charge(self, epsilon: Fraction, delta: float, what: str, cost: Charge | None = None) -> dict:
        from dp_spark.jobs import budget_store

        charged = budget_store.charge(self.spec, epsilon, delta, {"algorithm": what, "output": None,
                                                                   "run_date": None, "forced": False, "api": True},
                                      cost)
        self.charges.append({"what": what, "epsilon": epsilon, "delta": delta, "run_id": charged["run_id"]})
        return charged

    def finish(self, charge: Any, status: str, exc: BaseException | None = None, report: dict | None = None) -> None:
        from dp_spark.jobs import budget_store

        details = {"error": budget_store.stored_error(exc)} if exc is not None else {}
        if report is not None:
            details.update(epsilon_spent=report["epsilon_spent"], ledger=report["ledger"])
        budget_store.finish(self.spec, charge["run_id"], status, **details)

    def __repr__(self) -> str:
        return (f"DatasetBudget.from_store({self.spec.path!r}, {self.spec.dataset!r}): epsilon "
                f"{float(self.spent):g} spent of {float(self.epsilon):g}")


def rho_per_run(epsilon: float, delta: float, runs: int) -> float:
    """The ρ to give each of ``runs`` scheduled releases (``privacy.rho``, or ``rho=``) so that all of
    them together are (ε, δ)-DP by zCDP composition, as a budget store capped at (ε, δ) counts them:
    e.g. ``rho_per_run(1, 1e-6, 365)`` for a year of daily runs (docs/zcdp.md)."""
    from dp_spark.core import zcdp

    try:
        return float(zcdp.rho_per_run(epsilon, delta, runs))
    except ValueError as e:
        raise ConfigError(str(e)) from None


@dataclass(frozen=True, repr=False)
class Release:
    """The noisy tables of one release by name, and its privacy report. Tables are pandas
    DataFrames (one row per public domain value), except FRAPP's perturbed records, which are as
    many as the input's records, and the count and means tables released on the executors (at
    least ``executor_noise_cells`` cells), which never reach the driver: those are Spark DataFrames."""

    tables: dict[str, Any]
    report: dict
    spark: Any = field(default=None, repr=False, compare=False)
    # NOT private: raw figures (records read, users, rows outside the domain, rows kept) for the
    # caller's own checks. Not in the report and never written by write().
    diagnostics: dict = field(default_factory=dict, repr=False, compare=False)

    def __getitem__(self, name: str) -> Any:
        return self.tables[name]

    def __repr__(self) -> str:
        """A few lines: the algorithm, the spend, the guarantee, each table's size and noise, the ledger."""
        return "\n".join(display.summary_lines(self.report, self.tables))

    __str__ = __repr__

    def _repr_html_(self) -> str:
        """Jupyter's view: the same, with each table's first rows."""
        return display.summary_html(self.report, self.tables)

    def plot(self, table: str | None = None, top: int = display.TOP):
        """A matplotlib Figure of one table (default: the first with a released value): a
        histogram's bars, or the ``top`` largest values, with the 95% half-width of the noise as
        error bars where it is exact. Needs matplotlib (``pip install 'dp-spark[plot]'``)."""
        names = display.plotted(self.report, self.tables)
        if table is None:
            if not names:
                raise ConfigError("this release has no table to plot (a Spark DataFrame is not collected: "
                                  "release.to_spark(name))")
            table = names[0]
        elif table not in names:
            raise ConfigError(f"no plot of {table!r}: plotted tables are {', '.join(names) or 'none'}")
        return display.figure(self.report, self.tables, table, top)

    @property
    def ledger(self) -> list[dict]:
        """Every noisy step: what it released, its mechanism, epsilon, sensitivity and scale."""
        return self.report["ledger"]

    @property
    def epsilon_spent(self) -> float:
        return self.report["epsilon_spent"]

    def to_spark(self, name: str):
        """One noisy table as a Spark DataFrame (on the session of the input DataFrame)."""
        table = self.tables[name]
        return table if not isinstance(table, pd.DataFrame) else self.spark.createDataFrame(table)

    def write(self, path: str) -> str:
        """Write the tables as Parquet and privacy.json to ``path``, all or nothing; refuses a
        non-empty directory that is not a dp-spark release. Returns ``path``."""
        release_store.check_output_location(self.spark, path)
        release_store.write_release(self.spark, path, self.tables, self.report)
        return path


@dataclass(frozen=True)
class Plan:
    """What a release would publish and how far each released value may be from the value it is
    computed from, before anything is read or spent (:func:`plan`). ``accuracy`` is the
    ``accuracy`` section the release's privacy report will carry; ``str(plan)`` prints it."""

    algorithm: str
    description: str
    epsilon_split: dict[str, float]
    accuracy: dict

    def __str__(self) -> str:
        return "\n".join([self.description, *accuracy.format_section(self.accuracy)])


class _Planning:
    """Passed by :func:`plan` in place of the DataFrame: the release function checks its
    arguments and builds its parameters and domains as for a release, then returns a
    :class:`Plan` before it touches any data or budget."""

    def __init__(self, alpha: float):
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
            raise ConfigError(f"alpha must be a number strictly between 0 and 1, got {alpha!r}")
        self.alpha = float(alpha)


# ---------------------------------------------------------------------------
# Arguments into domains and columns.


def _items(items: Any, what: str = "items") -> ItemDomain:
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


def _attributes(values: Any) -> AttributeDomain | None:
    if values is None:
        return None
    if isinstance(values, range):
        values = list(values)
    return attribute_domain(list(values) if not isinstance(values, Mapping) else dict(values))


def _spark_dataframe(df) -> None:
    """Refuse anything but a Spark DataFrame (classic or Connect) before it is touched."""
    from pyspark.sql import DataFrame

    if not isinstance(df, DataFrame):
        kind = f"{type(df).__module__}.{type(df).__qualname__}"
        hint = " (a pandas DataFrame: pass spark.createDataFrame(frame))" if kind.startswith("pandas.") else ""
        raise ConfigError(f"the records must be a Spark DataFrame, got {kind}{hint}")


def _standard_columns(df, columns: dict[str, str | None]):
    """``df`` with the named columns renamed to ours (user_id, item_id, ...), others dropped."""
    _spark_dataframe(df)
    selected = []
    for ours, theirs in columns.items():
        if theirs is None:
            continue
        if theirs not in df.columns:
            raise DataError(f"column {theirs!r} (for {ours}) not found; the DataFrame has columns: "
                            f"{', '.join(df.columns)}")
        selected.append(df[theirs].alias(ours))
    return df.select(*selected)


def _split(family: Family, params: Any, domains: Domains, epsilon: object,
           epsilon_split: dict | None, limits: Guards = Guards(),
           seeded: bool = False, accounting: Accounting = PURE) -> tuple[Fraction, dict[str, Fraction]]:
    epsilon = release_epsilon(epsilon, "epsilon", seeded)
    overrides = {k: release_epsilon(v, f"epsilon_split[{k!r}]", seeded) for k, v in (epsilon_split or {}).items()}
    return epsilon, plan_split(family, params, epsilon, domains, overrides, limits, accounting)


def _guards(guards: Any) -> Guards:
    return guards if isinstance(guards, Guards) else guards_of(None if guards is None else dict(guards))


def _plan(family: Family, params: Any, domains: Domains, epsilon: object, epsilon_split: dict | None,
          planning: _Planning, guards: Any = None, accounting: Accounting = PURE) -> Plan:
    limits = _guards(guards)
    limits.check_family(family.name, params.algorithm)
    epsilon, split = _split(family, params, domains, epsilon, epsilon_split, limits, accounting=accounting)
    return Plan(params.algorithm, family.describe(params, epsilon, domains), {k: float(v) for k, v in split.items()},
                accuracy_section(family, params, epsilon, domains, split, planning.alpha, accounting))


def _release(family: Family, params: Any, records, domains: Domains, epsilon: object, epsilon_split: dict | None,
             seed: int | None, budget: DatasetBudget | None, progress, guards: Any = None,
             execution: Execution = Execution(), accounting: Accounting = PURE) -> Release:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    if budget is not None and not isinstance(budget, DatasetBudget):
        raise ConfigError(f"budget must be a dp_spark.DatasetBudget shared by the releases of one dataset "
                          f"(e.g. DatasetBudget(epsilon=5)), got {budget!r}")
    limits = _guards(guards)
    epsilon, split = _split(family, params, domains, epsilon, epsilon_split, limits, seeded=seed is not None,
                            accounting=accounting)
    progress = progress or Progress()
    if seed is not None:
        progress("WARNING: fixed seed: this release is for testing only and NOT private")
    if epsilon_warning(epsilon):
        progress(epsilon_warning(epsilon))
    limits.check_family(family.name, params.algorithm)  # before the budget is charged
    check_domain_fits(family, params, domains, execution)
    progress(f"output: {describe_output_size(output_size(family, params, domains, execution))}")
    family.check_schema(params, records, domains)  # the columns' names and types are public: no charge yet
    accuracy_section(family, params, epsilon, domains, split, accounting=accounting)  # refused before the charge
    executor_env.check(records.sparkSession, progress)  # the executors' Python, before any charge
    spark_channels.warn_once(records.sparkSession)  # the UI or event log on: exact figures outside the release
    # Under zCDP the release is stated as (epsilon, delta) at the delta its rho converts at, and costs its rho.
    delta = family.delta(params) + (accounting.conversion_delta if accounting.zcdp else 0.0)
    cost = Charge(epsilon, delta, accounting.rho, family.delta(params)) if accounting.zcdp else None
    charge = None if budget is None else budget.charge(epsilon, delta, f"{params.algorithm} release", cost)
    progress(family.describe(params, epsilon, domains))
    try:
        computed = compute(family, params, records, domains, epsilon, split, seed,
                           {"format": "dataframe", "location": None}, progress, limits, execution, accounting)
    except BaseException as exc:  # the charge stays: noise may have been drawn (or, refused, the data decided)
        if budget is not None:
            _finish(budget, charge, "refused" if isinstance(exc, GuardRefused) else "failed", progress, exc=exc)
        raise
    if budget is not None:
        _finish(budget, charge, "released", progress, report=computed.report)
    return Release(computed.tables, computed.report, records.sparkSession, computed.diagnostics)


def _finish(budget: DatasetBudget, charge: Any, status: str, progress, **details) -> None:
    """Record how a charged release ended; a store that cannot take it keeps the run charged, and
    the release (or the release's own error) is what the caller gets."""
    try:
        budget.finish(charge, status, **details)
    except Exception as failure:  # noqa: BLE001 - the charge is in the store either way
        progress(f"WARNING: could not mark the release {status} in the budget store ({failure}); it stays charged")


def _record_release(params: Any, df, privacy_unit: str, item: str, attribute: str | None, items: Any,
                    attributes: Any, epsilon, epsilon_split, seed, budget, progress, guards=None,
                    execution: Execution = Execution(), distinct_records: bool = False,
                    accounting: Accounting = PURE) -> Release:
    domains = Domains(None if items is None else _items(items), _attributes(attributes))  # None: user_histogram
    if (attribute is None) != (domains.attributes is None):
        raise ConfigError("give both attribute (the column) and attributes (its public values), or neither")
    if isinstance(df, _Planning):
        return _plan(family_of(params.algorithm), params, domains, epsilon, epsilon_split, df, guards, accounting)
    if not isinstance(distinct_records, bool):
        raise ConfigError(f"distinct_records must be True or False, got {distinct_records!r}")
    records = with_row_key(_standard_columns(df, {"user_id": privacy_unit, "item_id": item, "attr": attribute}),
                           distinct=distinct_records)
    return _release(family_of(params.algorithm), params, records, domains, epsilon, epsilon_split, seed, budget,
                    progress, guards, execution, accounting)


def _execution(executor_noise_cells: int | None, max_output_rows: int | None) -> Execution:
    """Where the tables are released and how large they may be: the defaults, unless given."""
    return Execution(**{k: v for k, v in {"executor_noise_cells": executor_noise_cells,
                                          "max_output_rows": max_output_rows}.items() if v is not None})


# ---------------------------------------------------------------------------
# One function per algorithm.


def _counts(algorithm: str, df, *, items, l, epsilon, d=1, privacy_unit="user_id", item="item_id", attribute=None,
            attributes=None, epsilon_split=None, publisher=None, publisher_options=None, consistent=False,
            seed=None, budget=None, guards=None, progress=None, candidates=None,
            delta=None, keys_per_user=None, executor_noise_cells=None, max_output_rows=None,
            distinct_records=False, noise=None, rho=None, records_per_item=None) -> Release:
    private = isinstance(items, str) and items == PRIVATE_ITEMS
    if items is None:
        raise ConfigError(f"{algorithm} needs items: the public item ids (a range, a list, a table such as "
                          f"{{'range': [1, 100]}}), or items=\"{PRIVATE_ITEMS}\" to select them privately")
    zcdp_asked = noise not in (None, "laplace") or rho is not None
    if delta is not None and not private and not zcdp_asked:
        raise ConfigError(f"delta is spent only by partition selection (give items=\"{PRIVATE_ITEMS}\") or states a "
                          "zCDP guarantee (give noise=\"gaussian\" or \"auto\", or rho); otherwise give no delta")
    if private and delta is None:
        raise ConfigError(f"items=\"{PRIVATE_ITEMS}\" needs delta (e.g. 1e-6): partition selection spends it")
    accounting, epsilon = accounting_of(noise, epsilon, delta, rho, seed is not None, prefix="",
                                        outside_share=PARTITION_DELTA_SHARE if private else Fraction(0))
    params = CountsParams(algorithm, l, d, publisher or BASELINE_PUBLISHERS.get(algorithm, "laplace"),
                          dict(publisher_options or {}), consistent, candidates, private,
                          keys_per_user, partition_delta(delta, accounting.zcdp) if private else 0.0,
                          noise or "laplace", records_per_item)
    check_accounting(family_of(algorithm), params, accounting)
    execution = _execution(executor_noise_cells, max_output_rows)
    return _record_release(params, df, privacy_unit, item, attribute, None if private else items, attributes,
                           epsilon, epsilon_split, seed, budget, progress, guards, execution, distinct_records,
                           accounting)


def sra(df, *, items, l, epsilon=None, privacy_unit="user_id", item="item_id", attribute=None, attributes=None,
        epsilon_split=None, publisher="laplace", publisher_options=None, consistent=False, seed=None, budget=None,
        guards=None, progress=None, l_candidates=None, delta=None,
        keys_per_user=None, executor_noise_cells=None, max_output_rows=None,
        distinct_records=False, noise="laplace", rho=None, records_per_item=None) -> Release:
    """Item counts (and item x attribute counts) with at most ``l`` records per user, a uniform
    sample of each user's own (paper 000's SRA). Tables: item_counts, edge_counts.

    ``items="private"`` (with ``delta``) releases only the items that partition selection picks,
    each user counted on at most ``keys_per_user`` distinct items (default 10), with half of ε
    (docs/partition_selection.md); item ids may then be strings.

    ``l="auto"`` chooses l privately from ``l_candidates`` (default 1, 2, 3, 4, 6, 8, 11, ..., 181,
    256: about √2 apart) with a tenth of ε (``epsilon_split["epsilon_bound"]``); the choice is in
    ``release.report["algorithm"]["chosen"]`` (docs/bound_selection.md).

    A twentieth of ε (``epsilon_split["epsilon_bounding"]``) estimates what bounding removed: the
    records kept and removed, and at most what share of the records the counts hold, in
    ``release.report["accuracy"]["bounding"]`` and ``print(release)`` (docs/accuracy.md).

    When the largest table (items × attribute values) has at least ``executor_noise_cells`` cells
    (default 20 million), every table of the release is released on the executors and returned as
    a Spark DataFrame; below it they are pandas (docs/executor_noise.md). A release of more than
    ``max_output_rows`` rows (default 10^9) is refused before anything is read or charged.

    Identical records of a user (same item and attribute) are each sampled as records of their
    own, which takes a shuffle of every record to number them; ``distinct_records=True`` vouches
    that there are none and skips it (if wrong, a user's identical records are kept or dropped
    together: still private, no longer a uniform sample; docs/sra_hpa.md).

    ``noise="gaussian"`` (or ``"auto"``: the lower variance per table) counts the budget in zCDP:
    ``epsilon`` with ``delta`` is converted to ρ (or give ``rho`` and ``delta``), and the tables get
    discrete Gaussian noise paid by their L2 sensitivity, √(l·c) with at most ``records_per_item``
    = c records per user and item (docs/zcdp.md)."""
    return _counts("sra", df, items=items, l=l, epsilon=epsilon, privacy_unit=privacy_unit, item=item,
                   attribute=attribute, attributes=attributes, epsilon_split=epsilon_split, publisher=publisher,
                   publisher_options=publisher_options, consistent=consistent, seed=seed, budget=budget,
                   guards=guards, progress=progress, candidates=l_candidates,
                   delta=delta, keys_per_user=keys_per_user, executor_noise_cells=executor_noise_cells,
                   max_output_rows=max_output_rows, distinct_records=distinct_records, noise=noise, rho=rho,
                   records_per_item=records_per_item)


def hpa(df, *, items, l, epsilon=None, d=1, privacy_unit="user_id", item="item_id", attribute=None, attributes=None,
        epsilon_split=None, publisher="laplace", publisher_options=None, consistent=False, seed=None, budget=None,
        guards=None, progress=None, l_candidates=None, delta=None,
        keys_per_user=None, executor_noise_cells=None, max_output_rows=None,
        distinct_records=False, noise="laplace", rho=None, records_per_item=None) -> Release:
    """Like :func:`sra`, but each user keeps its ``l`` records of highest noisy popularity,
    measured on ``d`` records per user (paper 000's HPA). ``l="auto"`` and ``noise`` as for :func:`sra`."""
    return _counts("hpa", df, items=items, l=l, d=d, epsilon=epsilon, privacy_unit=privacy_unit, item=item,
                   attribute=attribute, attributes=attributes, epsilon_split=epsilon_split, publisher=publisher,
                   publisher_options=publisher_options, consistent=consistent, seed=seed, budget=budget,
                   guards=guards, progress=progress, candidates=l_candidates,
                   delta=delta, keys_per_user=keys_per_user, executor_noise_cells=executor_noise_cells,
                   max_output_rows=max_output_rows, distinct_records=distinct_records, noise=noise, rho=rho,
                   records_per_item=records_per_item)


def _baseline(algorithm: str):
    def release(df, *, items, m, epsilon=None, privacy_unit="user_id", item="item_id", attribute=None,
                attributes=None, epsilon_split=None, publisher_options=None, seed=None, budget=None, guards=None,
                progress=None, m_candidates=None, delta=None, keys_per_user=None,
                executor_noise_cells=None, max_output_rows=None,
                distinct_records=False, noise="laplace", rho=None, records_per_item=None) -> Release:
        return _counts(algorithm, df, items=items, l=m, epsilon=epsilon, privacy_unit=privacy_unit, item=item,
                       attribute=attribute, attributes=attributes, epsilon_split=epsilon_split,
                       publisher_options=publisher_options, seed=seed, budget=budget, guards=guards,
                       progress=progress, candidates=m_candidates, delta=delta,
                       keys_per_user=keys_per_user, executor_noise_cells=executor_noise_cells,
                       max_output_rows=max_output_rows, distinct_records=distinct_records, noise=noise, rho=rho,
                       records_per_item=records_per_item)

    release.__name__ = release.__qualname__ = algorithm
    return release


lpa = _baseline("lpa")
lpa.__doc__ = ("Paper 000's LPA: a uniform sample of at most ``m`` records per user, discrete Laplace counts. "
               "``m=\"auto\"`` chooses m privately, as :func:`sra` does l.")
dft = _baseline("dft")
dft.__doc__ = "Paper 000's DFT: as :func:`lpa`, published with the Fourier perturbation algorithm."
gs = _baseline("gs")
gs.__doc__ = "Paper 000's GS: as :func:`lpa`, published by grouping and smoothing."


def user_histogram(df, *, bins, epsilon=None, quantity="records", items=None, privacy_unit="user_id",
                   item="item_id", publisher="laplace", publisher_options=None, seed=None, budget=None, guards=None,
                   progress=None, noise="laplace", delta=None, rho=None) -> Release:
    """How many users have how many records (``quantity="records"``, the default) or distinct items
    (``"distinct_items"``), in public ``bins`` (increasing edges, the last bin open-ended).
    ``items``, if given, keeps only records of those items; without it every record counts, and
    records per user need no item column (``item=None``, or a DataFrame without one).
    ``noise="gaussian"`` with ``delta`` (or ``rho``): zCDP, discrete Gaussian noise (docs/zcdp.md)."""
    from pyspark.sql import DataFrame, functions as F

    accounting, epsilon = _zcdp_of("user_histogram", noise, epsilon, delta, rho, seed)
    params = HistogramParams(quantity, bins, publisher, dict(publisher_options or {}), noise=noise or "laplace")
    check_accounting(family_of("user_histogram"), params, accounting)
    if items is None and quantity == "records" and not isinstance(df, _Planning) and (
            item is None or (isinstance(df, DataFrame) and item not in df.columns)):
        # Every record counts once for its user, whatever its item: one stand-in item for all.
        df, item = df.withColumn("_any_item", F.lit(0)), "_any_item"
    return _record_release(params, df, privacy_unit, item, None, items, None, epsilon, None, seed, budget, progress,
                           guards, accounting=accounting)


def _zcdp_of(algorithm: str, noise, epsilon, delta, rho, seed) -> tuple[Accounting, Fraction]:
    """The accounting of a release with no δ of its own (zCDP states its guarantee at ``delta``)."""
    if delta is not None and noise in (None, "laplace") and rho is None:
        raise ConfigError(f"{algorithm}: delta states a zCDP guarantee: give noise=\"gaussian\" or \"auto\", or rho; "
                          "otherwise no delta")
    return accounting_of(noise, epsilon, delta, rho, seed is not None, prefix="")


def dpsense(df, *, items, epsilon=None, theta_max=256, limit="normalize", privacy_unit="user_id", item="item_id",
            epsilon_split=None, seed=None, budget=None, guards=None, progress=None, noise="laplace", delta=None,
            rho=None) -> Release:
    """Column counts of each user's row of distinct items, the row limit θ chosen privately
    (paper 001's DPSense). The chosen θ is in ``report["algorithm"]["chosen"]``. ``noise="gaussian"``
    with ``delta`` (or ``rho``): zCDP, discrete Gaussian column counts (docs/zcdp.md)."""
    accounting, epsilon = _zcdp_of("dpsense", noise, epsilon, delta, rho, seed)
    params = DPSenseParams("dpsense", theta_max, limit, noise or "laplace")
    return _record_release(params, df, privacy_unit, item, None, items, None, epsilon, epsilon_split, seed, budget,
                           progress, guards, accounting=accounting)


def dpsense_s(df, *, items, epsilon=None, theta_max=256, limit="normalize", privacy_unit="user_id", item="item_id",
              epsilon_split=None, seed=None, budget=None, guards=None, progress=None, noise="laplace", delta=None,
              rho=None) -> Release:
    """DPSense-S: :func:`dpsense` with a privately chosen scale α as well (paper 001)."""
    accounting, epsilon = _zcdp_of("dpsense_s", noise, epsilon, delta, rho, seed)
    params = DPSenseParams("dpsense_s", theta_max, limit, noise or "laplace")
    return _record_release(params, df, privacy_unit, item, None, items, None, epsilon, epsilon_split, seed, budget,
                           progress, guards, accounting=accounting)


def location_entropy(df, *, locations, epsilon, M=5, C=5, variant="limit", k=50, xi=1e-3, delta=1e-8,
                     outputs=("entropy",), privacy_unit="user_id", location="location_id", visits=None, time=None,
                     location_choice="first_visit", epsilon_split=None, seed=None, budget=None, guards=None,
                     progress=None, M_candidates=None, C_candidates=None) -> Release:
    """The entropy of each public location's visits (paper 004), each user bounded to ``M``
    locations and ``C`` visits at each. Rows are check-ins: one visit each, or ``visits`` of
    them; ``time`` orders a user's check-ins for the choice of its M locations (needed by the
    default ``location_choice="first_visit"``; ``"random"`` keeps a uniformly random M instead).
    ``M="auto"`` and/or ``C="auto"`` choose the bound privately from ``M_candidates`` /
    ``C_candidates`` (public lists; None: the defaults) with the split's ``epsilon_bound``; the
    chosen values are in ``report["algorithm"]["chosen"]``."""
    params = EntropyParams(variant, M, C, k, xi, delta, tuple(outputs), location_choice,
                           M_candidates=None if M_candidates is None else tuple(M_candidates),
                           C_candidates=None if C_candidates is None else tuple(C_candidates))
    domains = Domains(_items(locations, "locations"))
    if isinstance(df, _Planning):
        return _plan(family_of("entropy"), params, domains, epsilon, epsilon_split, df, guards)
    records = checkins.standard_checkins(_standard_columns(
        df, {"user_id": privacy_unit, "item_id": location, "time": time, "visits": visits}), time or "time")
    return _release(family_of("entropy"), params, records, domains, epsilon, epsilon_split, seed, budget, progress,
                    guards)


def frapp(df, *, attributes, epsilon=None, gamma=None, scheme="det_gd", sup_min=0.02, records_per_user=1,
          cp_k=None, cp_rho=None, privacy_unit=None, seed=None, budget=None, guards=None,
          progress=None, distinct_records=False) -> Release:
    """Every record perturbed on its own (local DP, paper 003's FRAPP), then the frequent itemsets
    mined from the perturbed records. ``attributes`` lists each column's public domain, e.g.
    ``{"column": "sex", "values": ["F", "M"]}`` or ``{"column": "age", "edges": [35, 55]}``; give
    ``epsilon`` per record or ``gamma`` = e^epsilon. With ``privacy_unit`` (a user column) each
    user keeps ``records_per_user`` records; without it every row is one person. Tables:
    perturbed_records (a Spark DataFrame), frequent_itemsets."""
    algorithm = {"scheme": scheme, "sup_min": sup_min, "records_per_user": records_per_user,
                 **({"cp_k": cp_k} if cp_k is not None else {}), **({"cp_rho": cp_rho} if cp_rho is not None else {})}
    privacy = {**({"epsilon": epsilon} if epsilon is not None else {}), **({"gamma": gamma} if gamma is not None else {})}
    if isinstance(attributes, (str, Mapping)) or not isinstance(attributes, Iterable):
        raise ConfigError("attributes must be a list of tables such as {'column': 'sex', 'values': ['F', 'M']}")
    params = frapp_params(algorithm, privacy, {"records": [dict(a) for a in attributes]}, {})
    if isinstance(df, _Planning):
        return _plan(family_of("frapp"), params, Domains(None), params.epsilon, None, df)
    columns = {spec.column: spec.column for spec in params.specs}
    records = _standard_columns(df, {**columns, **({"user_id": privacy_unit} if privacy_unit else {})})
    if privacy_unit:  # each user's sample keys (distinct_records as for sra)
        records = with_row_key(records, distinct=distinct_records)
    return _release(family_of("frapp"), params, records, Domains(None), params.epsilon, None, seed, budget, progress,
                    guards)


def means(df, *, items, value, l, low="auto", high="auto", epsilon=None, bounding="sra", d=1, privacy_unit="user_id",
          item="item_id", attribute=None, attributes=None, records_per_item=None, epsilon_split=None, seed=None,
          budget=None, guards=None, progress=None, noise="laplace", delta=None, rho=None,
          distinct_records=False, l_candidates=None, clip_candidates=None, keys_per_user=None,
          executor_noise_cells=None, max_output_rows=None) -> Release:
    """The sum, count and mean of the numeric column ``value`` per item (table item_means), and
    per item and attribute value with ``attribute``/``attributes`` (edge_means). Values are
    clipped to the public range [``low``, ``high``] (either left out or ``"auto"``: chosen privately
    from ``clip_candidates``, default 0 and ±1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k for k = -2 to 8, with a
    tenth of ε);
    each user keeps at most ``l`` records
    (``bounding="sra"``: a uniform sample of its own; ``"hpa"``: its most popular by a noisy
    popularity from ``d`` records per user); ``l="auto"`` chooses l privately from ``l_candidates``
    (default 1, 2, 3, 4, 6, ..., 256) with a tenth of ε. Each row has noisy_count, noisy_sum, mean and the
    mean's interval (mean_low, mean_high; at 1 - 0.1); an item whose count is too small for a
    mean has none. ``items="private"`` (with ``delta``) releases only the items partition selection
    picks, with half of ε, each user on at most ``keys_per_user`` distinct items (default 10;
    docs/partition_selection.md). Records whose value is null, NaN or infinite are dropped (counted in the
    diagnostics). ``noise="gaussian"`` with ``delta`` (or ``rho``): zCDP and discrete Gaussian noise,
    paid by the L2 sensitivity, which ``records_per_item`` = c (at most c records per user and
    item) lowers (docs/value_sums.md). When the largest table has at least ``executor_noise_cells``
    cells (default 20 million), the tables are released on the executors and returned as Spark
    DataFrames (docs/executor_noise.md); ``max_output_rows`` as for ``sra``."""
    private = isinstance(items, str) and items == PRIVATE_ITEMS
    if private:  # partition selection spends delta, and shares it under zCDP
        if delta is None:
            raise ConfigError(f"items=\"{PRIVATE_ITEMS}\" needs delta (e.g. 1e-6): partition selection spends it")
        accounting, epsilon = accounting_of(noise, epsilon, delta, rho, seed is not None, prefix="",
                                            outside_share=PARTITION_DELTA_SHARE)
    else:
        accounting, epsilon = _zcdp_of("means", noise, epsilon, delta, rho, seed)
    params = MeansParams(low, high, l, bounding, d, records_per_item, noise or "laplace", l_candidates,
                         clip_candidates=clip_candidates, private_items=private, keys_per_user=keys_per_user,
                         delta=partition_delta(delta, accounting.zcdp) if private else 0.0)
    check_accounting(family_of("means"), params, accounting)
    domains = Domains(None if private else _items(items), _attributes(attributes))
    if (attribute is None) != (domains.attributes is None):
        raise ConfigError("give both attribute (the column) and attributes (its public values), or neither")
    if isinstance(df, _Planning):
        return _plan(family_of("means"), params, domains, epsilon, epsilon_split, df, guards, accounting)
    if not isinstance(distinct_records, bool):
        raise ConfigError(f"distinct_records must be True or False, got {distinct_records!r}")
    records = with_row_key(_standard_columns(df, {"user_id": privacy_unit, "item_id": item, "attr": attribute,
                                                  "value": value}), distinct=distinct_records)
    execution = _execution(executor_noise_cells, max_output_rows)
    return _release(family_of("means"), params, records, domains, epsilon, epsilon_split, seed, budget, progress,
                    guards, execution, accounting)


RELEASES = {"sra": sra, "hpa": hpa, "lpa": lpa, "dft": dft, "gs": gs, "user_histogram": user_histogram,
            "dpsense": dpsense, "dpsense_s": dpsense_s, "entropy": location_entropy,
            "location_entropy": location_entropy, "frapp": frapp, "means": means}


def plan(algorithm: str, *, alpha: float = accuracy.DEFAULT_ALPHA, **arguments) -> Plan:
    """The expected error of each table that the release function ``algorithm`` ("sra", "hpa",
    "dpsense", "location_entropy", ...) would publish, given the same keyword arguments without the
    DataFrame: each noisy column's noise distribution, sd, 95% and (1 - ``alpha``) interval
    half-widths, from public parameters only. Nothing is read, and a ``budget`` is not charged.
    The arguments are checked as the release checks them. Column names may be left out."""
    if algorithm not in RELEASES:
        raise ConfigError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(RELEASES)}")
    arguments.pop("budget", None)
    return RELEASES[algorithm](_Planning(alpha), **arguments)
