"""What every algorithm family is: its parameters, its budget split, its run and its report section.

A family turns validated records into noisy tables along bound -> aggregate -> publish. The job
runner, the public API and the command line find a family through ``families.registry`` and
never ask for an algorithm by name; a new family is one module here and one line in the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dp_spark.core import zcdp
from dp_spark.core.accounting import PURE, USER_UNIT, Accounting, Noise, PrivacyUnit
from dp_spark.core.domain import AttributeDomain, ItemDomain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import BudgetExceeded, ConfigError
from dp_spark.release.guards import SPLIT_KEY as GUARDS_SPLIT_KEY
from dp_spark.release.guards import Guards


@dataclass(frozen=True)
class Domains:
    """The public domains of one release: items (locations for location entropy) and, for edge
    counts, attribute values."""

    items: ItemDomain | None  # None for FRAPP, whose domain is its attributes' values
    attributes: AttributeDomain | None = None


# Tables of at least this many cells get their noise on the executors (docs/executor_noise.md):
# below it the driver's path is faster, and its pandas table of 20 million rows takes about 1 GB.
DEFAULT_EXECUTOR_NOISE_CELLS = 20_000_000
# A release of more rows than this is refused unless [execution] max_output_rows raises it: a
# domain typed as { range = [1, 10^12] } would otherwise start writing 10^12 rows (terabytes).
# 10^9 rows of counts are about 10 GB of Parquet (docs/scheduled_runs.md, "Output size").
DEFAULT_MAX_OUTPUT_ROWS = 1_000_000_000


@dataclass(frozen=True)
class Execution:
    """Where a release does its work (``[execution]`` in a job config): a table of at least
    ``executor_noise_cells`` cells is released on the executors, a smaller one on the driver."""

    executor_noise_cells: int = DEFAULT_EXECUTOR_NOISE_CELLS
    max_output_rows: int = DEFAULT_MAX_OUTPUT_ROWS

    def __post_init__(self):
        positive_int(self.executor_noise_cells, "execution.executor_noise_cells")
        positive_int(self.max_output_rows, "execution.max_output_rows")

    def on_executors(self, cells: int) -> bool:
        return cells >= self.executor_noise_cells


@dataclass(frozen=True)
class RunInputs:
    """What a family's run reads: the records with our standard column names (not yet
    validated), the domains, the epsilon split, and where its randomness comes from."""

    records: Any  # pyspark DataFrame
    domains: Domains
    split: dict[str, Fraction]
    budget: Budget
    rng: RandomSource
    seed: int | None
    progress: Callable[[str], None]
    guards: Guards = Guards()  # checked on the records' coverage before any noise is drawn
    execution: Execution = field(default_factory=lambda: Execution())


@dataclass(frozen=True)
class FamilyOutput:
    """Noisy tables (pandas, one row per public domain value; FRAPP's perturbed records are a
    Spark DataFrame), the NOT-private diagnostics, and private outputs that the tables need to be
    read (DPSense's chosen θ and α)."""

    tables: dict[str, Any]
    diagnostics: dict = field(default_factory=dict)
    chosen: dict | None = None
    rows: dict[str, int] | None = None  # rows per table, where a table is a Spark DataFrame
    algorithm_extra: dict = field(default_factory=dict)  # more of the report's algorithm section
    domains: Domains | None = None  # the domains released over, when the run chose them (private items)
    noise_extra: dict = field(default_factory=dict)  # more of the report's noise section (where it was drawn)
    guards: dict | None = None  # the guards' limits and noisy figures (release.guards.check), when set
    bounding: dict | None = None  # accuracy.bounding after the run: the DP estimate of what bounding removed


@dataclass(frozen=True)
class ConfigTables:
    """The parts of a job config a family reads, after the checks every job shares: its
    algorithm name, the [algorithm], [privacy], [domain] and [publisher] tables, the named
    epsilon parts (privacy.epsilon_*) and the attribute domain's spec (None without edges)."""

    name: str
    algorithm: dict[str, Any]
    privacy: dict[str, Any]
    domain: dict[str, Any]
    publisher: dict[str, Any]
    parts: dict[str, Fraction]
    attributes: Any = None


@dataclass(frozen=True)
class Family:
    """One algorithm family.

    ``algorithms`` are the names a config or an API call uses for it (SRA, HPA and the
    baselines are one family: the counts). ``params_type`` is its frozen, self-validating
    parameter class; every other field is a function of those parameters.
    """

    name: str
    algorithms: tuple[str, ...]
    params_type: type
    default_split: Callable[[Any, Fraction, Domains], dict[str, Fraction]]
    split_keys: Callable[[Any, Domains], tuple[str, ...]]
    run: Callable[[Any, RunInputs], FamilyOutput]
    describe: Callable[[Any, Fraction, Domains], str]
    report_section: Callable[[Any], dict]  # name, parameters, specification, post-processing, publisher
    from_config: Callable[[ConfigTables], Any]  # the parameter class from a job config's tables
    config_keys: tuple[str, ...] = ()  # algorithm.* keys that only this family takes
    delta: Callable[[Any], float] = lambda params: 0.0
    extra_noise: Callable[[Any], dict] = lambda params: {}
    extra_domain: Callable[[Any], dict] = lambda params: {}
    # What the family reads (jobs.reading): "records" (user, item, attribute), "checkins" (user,
    # location, time, visits), "valued_records" (user, item, attribute, value: means),
    # "whole_records" (FRAPP: a record's own columns, and its user when known) or "keyed_records"
    # (the user and the columns ``read_columns`` names, under their own names: aggregate).
    reads: str = "records"
    read_columns: Callable[[Any], tuple[str, ...]] = lambda params: ()
    uses_item_domain: bool = True  # FRAPP's domain is its attributes' values, in its parameters
    item_domain_optional: bool = False  # without domain.items every record counts (user_histogram)
    # (params, domains) -> the shares of ρ under zCDP accounting, where they differ from the
    # default split's shares of ε (the means' choice of l). None: default_split's at ε = 1.
    zcdp_shares: Callable[[Any, Domains], dict[str, Fraction]] | None = None
    # Whom a release protects, given the records it reads (FRAPP: whether they name their users).
    privacy_unit: Callable[[Any, Any], PrivacyUnit] = lambda params, records: USER_UNIT
    # The report's noise and domain sections, where a family's differ from the central counts'.
    noise_section: Callable[[Any, int | None], dict] | None = None
    domain_section: Callable[[Any, Domains], dict] | None = None
    # The expected error of each released column from public parameters only (the config and the
    # public domains, never the records): (params, epsilon, domains, split, alpha) ->
    # {table: {column: core.accuracy.Accuracy}}. None: the family states none.
    accuracy: Callable[[Any, Fraction, Domains, dict[str, Fraction], float], dict[str, dict[str, Any]]] | None = None
    # (params, chosen) -> (params with the privately chosen values put in, those values), so that
    # the report's accuracy is that of the chosen bound; None when ``chosen`` (algorithm.chosen)
    # holds nothing the accuracy depends on. None: the family chooses nothing the accuracy states.
    with_chosen: Callable[[Any, dict], tuple[Any, dict] | None] | None = None
    # (params, split, alpha, zcdp) -> privacy.json's ``accuracy.bounding`` before the run: how well
    # the run's DP estimate of what bounding removed will state it (the counts' bias, which the
    # noise's ± leaves out; release.bounding_estimate), under pure ε or ρ-zCDP accounting.
    # None: the family publishes no such estimate.
    bounding: Callable[[Any, dict[str, Fraction], float, bool], dict] | None = None
    # (params, split, alpha) -> warnings from public parameters alone that the release will be of
    # little use, e.g. noise wider than the whole range its statistic can take (accuracy.warnings;
    # ``dp-spark plan`` and the run say them).
    warnings: Callable[[Any, dict[str, Fraction], float], list[str]] = lambda params, split, alpha: []
    # (params, domains, execution) -> whether this release never needs a value per item on the
    # driver, so that its item domain may be larger than the driver's memory: its tables go to
    # the executors and nothing else holds the items (docs/executor_noise.md).
    beyond_the_driver: Callable[[Any, Domains, Execution], bool] = lambda params, domains, execution: False
    # (params, records, domains) -> None, or a DataError when the records' columns cannot be read as
    # this family reads them (a missing column, a type no id can have). The schema is public, and
    # Spark knows it without reading a record: checked before any budget is charged.
    check_schema: Callable[[Any, Any, Domains], None] = lambda params, records, domains: None
    # (params, domains) -> {table: its number of rows}, from the config and the public domains
    # alone; None where the size depends on the data (FRAPP's records, items selected privately).
    output_rows: Callable[[Any, Domains], dict[str, int | None]] = lambda params, domains: {}
    # (params) -> whether a public domain in the parameters is held in a catalog table not read yet
    # (an aggregation's key values); (params, spark, source) -> the parameters with those read, each
    # table refused when it is the job's source (core.domain_tables), before anything is charged.
    reads_tables: Callable[[Any], bool] = lambda params: False
    read_tables: Callable[[Any, Any, Any], Any] = lambda params, spark, source: params
    # Whether some of its tables may take discrete Gaussian noise (privacy.noise = "gaussian" or
    # "auto", zCDP accounting); the others keep the Laplace noise their claim is argued for.
    takes_gaussian: bool = False
    # Said on the console when a release's mechanism is not differentially private.
    not_private_warning: str = ("WARNING: this release reproduces a published flaw and is NOT differentially "
                                "private; privacy.json says why. Do not publish it.")


# A release on the driver holds a value per item there (numpy, then a pandas table): 50 million
# items take 0.4 GB per int64 column, and a table of several columns a few GB.
MAX_DRIVER_ITEMS = 50_000_000


def check_domain_fits(family: Family, params: Any, domains: Domains, execution: Execution) -> None:
    """Refuse, before anything is read or spent, an item domain too large for a release on the
    driver, unless this release's tables go to the executors."""
    items = domains.items
    if items is None or len(items) <= MAX_DRIVER_ITEMS or family.beyond_the_driver(params, domains, execution):
        return
    raise ConfigError(f"the item domain has {len(items):,} items, more than the {MAX_DRIVER_ITEMS:,} a release on "
                      f"the driver holds; only sra and lpa with the laplace publisher, and means with sra bounding, "
                      f"release larger domains, on the executors (execution.executor_noise_cells; hpa's popularity "
                      f"is drawn on the driver: docs/executor_noise.md)")


def output_size(family: Family, params: Any, domains: Domains, execution: Execution) -> dict[str, int | None]:
    """{table: rows} of the release (None: depends on the data); refuses, before anything is read
    or spent, a release of more rows than ``execution.max_output_rows``."""
    rows = family.output_rows(params, domains)
    total = sum(n for n in rows.values() if n is not None)
    if total > execution.max_output_rows:
        raise ConfigError(
            f"the release would write {total:,} rows ({describe_output_size(rows)}), more than "
            f"execution.max_output_rows = {execution.max_output_rows:,}: check the domain (a range "
            "typed one digit too long?), or raise the limit if you mean it "
            f"(--set execution.max_output_rows={total}; in the API's count and means functions max_output_rows={total})"
        )
    return rows


def describe_output_size(rows: dict[str, int | None]) -> str:
    return "; ".join(f"{table} {'a number of rows that depends on the data' if n is None else f'{n:,} rows'}"
                     for table, n in rows.items())


def plan_split(family: Family, params: Any, epsilon: Fraction, domains: Domains,
               overrides: dict[str, Fraction] | None = None, guards: Guards = Guards(),
               accounting: Accounting = PURE) -> dict[str, Fraction]:
    """The family's default split of ``epsilon`` with the caller's named parts put in; refuses a
    part the family does not spend and a split over the total (before any record is read).
    Guards with limits take ``guards.epsilon`` first (``epsilon_guards``); the family's default
    split shares the rest. Under zCDP ``accounting`` see :func:`zcdp_split`."""
    if accounting.zcdp:
        return zcdp_split(family, params, domains, overrides, guards, accounting)
    if guards.active and guards.epsilon >= epsilon:
        raise ConfigError(f"guards.epsilon {float(guards.epsilon):g} leaves nothing of epsilon {float(epsilon):g} "
                          "for the release")
    split = family.default_split(params, epsilon - guards.spent, domains)
    known = family.split_keys(params, domains)
    for key, value in (overrides or {}).items():
        if key not in known:
            raise ConfigError(f"privacy.{key} is not a part of this {params.algorithm} release "
                              f"(its parts: {', '.join(known)})")
        split[key] = value
    if guards.active:
        split[GUARDS_SPLIT_KEY] = guards.epsilon
    try:
        Budget(epsilon).check_plan(split)
    except BudgetExceeded as e:
        defaults = [key for key in known if key not in (overrides or {})]
        if not overrides or not defaults:
            raise
        # e.g. a split written before a part was added (the counts' epsilon_bounding)
        raise BudgetExceeded(f"{e}; the parts not set ({', '.join(defaults)}) keep their default shares of "
                             "epsilon: set them too, or leave room for them") from None
    return split


def zcdp_split(family: Family, params: Any, domains: Domains, overrides: dict[str, Fraction] | None,
               guards: Guards, accounting: Accounting) -> dict[str, Fraction]:
    """The split under ρ-zCDP: the family's default split read as shares of ρ (what the guards'
    pure ε costs, ε²/2, taken first), each share ρ_k handed out as the largest short fraction ε_k
    with ε_k²/2 ≤ ρ_k. A pure step at ε_k costs at most ρ_k; a Gaussian step pays σ² = Δ₂²/ε_k²."""
    if overrides:
        raise ConfigError("under zCDP accounting the budget's parts are shares of rho, set by the family; "
                          f"privacy.{next(iter(overrides))} cannot set one")
    rho = accounting.rho
    if guards.active:
        rho -= zcdp.pure_cost(guards.epsilon)
        if rho <= 0:
            raise ConfigError(f"guards.epsilon {float(guards.epsilon):g} costs rho "
                              f"{float(zcdp.pure_cost(guards.epsilon)):.6g}, all of the release's rho "
                              f"{float(accounting.rho):.6g}")
    shares = (family.zcdp_shares(params, domains) if family.zcdp_shares is not None
              else family.default_split(params, Fraction(1), domains))
    if sum(shares.values(), Fraction(0)) != 1:
        raise ConfigError(f"{params.algorithm} cannot split a zCDP budget (its parts are not shares of one total)")
    try:
        split = {key: zcdp.epsilon_for_rho(share * rho) for key, share in shares.items()}
    except ValueError as e:
        raise ConfigError(f"privacy budget too small to split: {e}") from None
    if guards.active:
        split[GUARDS_SPLIT_KEY] = guards.epsilon
    Budget(1, accounting=accounting).check_plan(split)
    return split


def check_accounting(family: Family, params: Any, accounting: Accounting) -> None:
    """Refuse what zCDP accounting does not cover yet: Gaussian noise where the family's claim is
    argued for Laplace noise only, and steps that spend their own δ (smooth sensitivity) outside the
    counts and the means, whose partition selection shares privacy.delta with the conversion
    (private_keys.partition_delta)."""
    if not accounting.zcdp:
        return
    if accounting.noise == Noise.GAUSSIAN and not family.takes_gaussian:
        raise ConfigError(f"privacy.noise = \"gaussian\": {params.algorithm}'s tables take Laplace noise only (their "
                          "privacy argument is in L1); privacy.noise = \"auto\" keeps them under zCDP accounting")
    if family.delta(params) > 0 and not family.takes_gaussian:
        raise ConfigError(f"zCDP accounting does not cover {params.algorithm} steps that spend their own delta "
                          "(smooth sensitivity) yet: use privacy.noise = \"laplace\" without privacy.rho")


# What the engine supports (docs/scheduled_runs.md, "Pre-flight"). A per-user bound that
# selects rows goes through Spark's min_by(value, order, k), which refuses k above 100,000
# ("The `k` must be between [1, 100000]"; past 2^31 the cast of k to int overflows first).
MAX_ROWS_PER_USER = 100_000
ROWS_PER_USER_LIMIT = "Spark's min_by, which selects each user's rows, keeps at most 100,000 per user"


def positive_int(value: Any, name: str, maximum: int | None = None, why: str = "") -> int:
    """``value`` if it is an integer >= 1 (and at most ``maximum``, what the engine supports, for
    the reason ``why``); a ConfigError naming the config key otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} = {value:,} is above the supported maximum {maximum:,}: {why}")
    return value


def rows_per_user(value: Any, name: str) -> int:
    """A per-user bound on rows (l, m, d, θ_max, records_per_user): 1 to MAX_ROWS_PER_USER."""
    return positive_int(value, name, MAX_ROWS_PER_USER, ROWS_PER_USER_LIMIT)


def require(table: dict[str, Any], key: str, section: str) -> Any:
    """``table[key]``; a ConfigError naming the missing config key otherwise."""
    if key not in table:
        raise ConfigError(f"missing config key '{section}.{key}'")
    return table[key]
