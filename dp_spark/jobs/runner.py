"""A job: config -> bound -> aggregate -> publish -> write (DESIGN.md).

Order matters for "bad input gets a clear error and nothing is lost": the
budget split, the domains and the output location are checked before any
record is read, and the outputs are written only after every noisy release
has been paid for in the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from dp_spark.core.composition import Charge
from dp_spark.core.domain import ItemDomain, attribute_domain, item_domain
from dp_spark.core.domain_tables import refuse_source_table
from dp_spark.core.progress import Progress, stage
from dp_spark.errors import ConfigError
from dp_spark.families.registry import family_of
from dp_spark.io import catalog, output_lock, release_store
from dp_spark.jobs import budget_store, preflight
from dp_spark.jobs.config import JobConfig
from dp_spark.jobs.reading import family_records
from dp_spark.release import lifecycle
from dp_spark.release.engine import Computed, compute, planned_accuracy
from dp_spark.release.family import Domains, check_domain_fits, output_size, plan_split


def _family(cfg: JobConfig):
    return family_of(cfg.algorithm)


def job_domains(cfg: JobConfig, spark=None) -> Domains:
    """The job's public domains; a table domain is read through ``spark``."""
    if not _family(cfg).uses_item_domain:
        return Domains(None)
    items = item_domain(cfg.items, spark, cfg.source) if cfg.items else None  # none: user_histogram may omit it
    return Domains(items, attribute_domain(cfg.attributes))


def with_tables_read(cfg: JobConfig, spark) -> JobConfig:
    """``cfg`` with the public domains its parameters hold in catalog tables read through ``spark``
    (an aggregation's key values), each refused when it is the job's source; unchanged without."""
    family = _family(cfg)
    if not family.reads_tables(cfg.params):
        return cfg
    return replace(cfg, params=family.read_tables(cfg.params, spark, cfg.source))


def plan_budget(cfg: JobConfig) -> dict[str, Fraction]:
    """The epsilon split this job will spend; refuses one that exceeds the total."""
    with_edges = Domains(None, attribute_domain(cfg.attributes))  # the split needs only whether there are edges
    return plan_split(_family(cfg), cfg.params, cfg.epsilon, with_edges, cfg.epsilon_parts, cfg.guards,
                      cfg.accounting)


def check_before_spark(cfg: JobConfig) -> None:
    """Refuse what ``plan`` refuses without Spark (a release too large for its limits, e.g. a range
    of 10^12 items), before ``run`` starts Spark. A domain held in a table needs Spark to be read,
    and is checked after it starts, as every domain is again before the charge."""
    family = _family(cfg)
    if (family.uses_item_domain and "table" in (cfg.items or {})) or family.reads_tables(cfg.params):
        return
    domains = job_domains(cfg)
    output_size(family, cfg.params, domains, cfg.execution)
    check_domain_fits(family, cfg.params, domains, cfg.execution)


@dataclass(frozen=True)
class JobResult:
    output: str
    report: dict
    tables: dict  # name -> pandas DataFrame of noisy outputs
    items: ItemDomain | None  # None for FRAPP, whose domain is the attributes' product
    status: str = "released"  # "unchanged": the run date's release already existed; nothing was spent
    diagnostics: dict | None = None  # NOT private, for the operator (dp-spark run --diagnostics FILE)


def read_source(cfg: JobConfig, spark, domains: Domains):
    """The job's records with our standard column names, as the family reads them."""
    return family_records(_family(cfg), cfg.params, spark, cfg.source, want_attr=domains.attributes is not None)


def check_source_schema(cfg: JobConfig, spark, domains: Domains):
    """The job's records (lazy, as read_source gives them) once their schema reads as the job
    needs: Spark resolves the column names and types (file footers, a CSV's header line; no record
    is read) and the family checks them. The schema is public, so a misnamed or missing column, a
    file of the wrong shape or a headerless CSV read with a header is refused here, before the
    budget store is charged."""
    records = read_source(cfg, spark, domains)
    _family(cfg).check_schema(cfg.params, records, domains)
    return records


def source_description(cfg: JobConfig) -> dict:
    return {"format": cfg.source.format, "location": cfg.source.path or cfg.source.table}


def compute_release(cfg: JobConfig, spark, progress=None, checked: tuple[Domains, Any] | None = None) -> Computed:
    """Read, check, bound, count and add noise; nothing is written. ``checked``: the domains and
    the (lazy) records the pre-flight already built, so that neither is read twice."""
    progress = progress or Progress()
    family = _family(cfg)
    split = plan_budget(cfg)
    cfg = with_tables_read(cfg, spark)  # already read when the job's plan checked it
    domains, records = checked if checked else (job_domains(cfg, spark), None)
    progress(family.describe(cfg.params, cfg.epsilon, domains))
    if domains.items is not None and domains.items.public_by_assertion:
        progress(f"WARNING: {domains.items.public_by_assertion}")
    progress(f"reading and checking {cfg.source.format} source {cfg.source.path or cfg.source.table}")
    with stage(progress, "read"):
        records = records if records is not None else read_source(cfg, spark, domains)
    with stage(progress, "release"):
        return compute(family, cfg.params, records, domains, cfg.epsilon, split, cfg.seed, source_description(cfg),
                       progress, cfg.guards, cfg.execution, cfg.accounting)


def release_tables(cfg: JobConfig, spark) -> list[str]:
    """The names of the tables this job's release writes, known from the config and the public
    domains before any record is read: the expected-error plan has a section for each
    (tests/test_accuracy.py checks that against real releases)."""
    return list(planned_accuracy(_family(cfg), cfg.params, cfg.epsilon, job_domains(cfg, spark), plan_budget(cfg)))


def claimed_delta(cfg: JobConfig) -> float:
    """The δ a job may spend: the (ε, δ) steps' (location entropy's smooth sensitivity, partition
    selection), or under zCDP the δ its ρ is stated at. With its ε (cfg.epsilon) it is the (ε, δ)
    a budget store adds up across runs."""
    return _family(cfg).delta(cfg.params) + (cfg.accounting.conversion_delta if cfg.accounting.zcdp else 0.0)


def zcdp_charge(cfg: JobConfig) -> Charge | None:
    """A zCDP job's cost across runs: its ρ, and the δ its (ε, δ) steps spend outside zCDP; None for
    a pure job, whose cost the store derives from its (ε, δ)."""
    if not cfg.accounting.zcdp:
        return None
    return Charge(cfg.epsilon, claimed_delta(cfg), cfg.accounting.rho, _family(cfg).delta(cfg.params))


def release_location(cfg: JobConfig) -> str:
    """Where the release goes: ``output``, or its partition ``output/run_date=YYYY-MM-DD``."""
    if cfg.run_date is None:
        return cfg.output
    return f"{cfg.output.rstrip('/')}/run_date={cfg.run_date}"


def existing_release(cfg: JobConfig, progress=None) -> JobResult | None:
    """The run date's release, status "unchanged", when its privacy.json is already there; found
    through pyarrow.fs alone, so that a retried run answers without starting Spark. None (run the
    job, whose plan checks again) when there is no run date, no release yet, or the location
    cannot be read from here; also with catalog tables, whose registration the job repeats (it
    finishes a run killed between writing and registering).

    Under the output's lock, like any run, it first finishes what a killed run left (a release
    moved aside, staging, the dead run's lock): a retry after a crash leaves a clean output. A
    lock another run holds gives None, and the job's own plan then refuses the run as busy."""
    if cfg.run_date is None or cfg.output_table is not None:
        return None
    target = release_location(cfg)
    progress = progress or Progress()
    try:
        with output_lock.held(target, progress):
            release_store.check_output_location(None, target)
            if not release_store.release_exists(None, target):
                return None
            report = release_store.read_report(None, target)
    except (ConfigError, OSError, ValueError):  # unreachable, busy, or not a release: let the job decide
        return None
    progress(f"the release for run date {cfg.run_date} already exists at {target}: nothing to do "
                             "and no budget spent (--force draws new noise and spends the budget again)")
    return JobResult(target, report, {}, None, status="unchanged")


def _release(cfg: JobConfig, spark, progress, target: str, run: dict, checked: tuple[Domains, Any]) -> JobResult:
    computed = compute_release(cfg, spark, progress, checked)
    report = {**computed.report, "run": run}
    with stage(progress, "write"):
        progress(f"writing {target}")
        release_store.write_release(spark, target, computed.tables, report)
        _register_tables(cfg, spark, progress, target, report)
    return JobResult(target, report, computed.tables, computed.items, diagnostics=computed.diagnostics)


def _register_tables(cfg: JobConfig, spark, progress, target: str, report: dict) -> None:
    """The release at ``target`` as ``cfg.output_table``'s catalog tables (idempotent; none without one)."""
    for table in catalog.register(cfg, spark, target, report):
        progress(f"table {table}" + (f", partition run_date={cfg.run_date}" if cfg.run_date else ""))


def run_job(cfg: JobConfig, spark, progress=None, force: bool = False) -> JobResult:
    """The whole job: plan, charge the budget store, read, release, write, record.

    The output location and the budget store are checked before any record is read. With a run
    date, a release that already exists is left alone (status "unchanged", nothing spent) unless
    ``force``, which draws fresh noise, replaces it, and is charged like any other run.
    One run per output and run date at a time: the location's lock (io/output_lock.py) is held
    from before the plan's checks to the end, so a second run stops before it is charged.
    """
    progress = progress or Progress()
    with output_lock.held(release_location(cfg), progress):
        return _run_job_locked(cfg, spark, progress, force)


def _run_job_locked(cfg: JobConfig, spark, progress, force: bool) -> JobResult:
    target = release_location(cfg)
    lifecycle.announce(progress, cfg.seed is not None, cfg.epsilon)
    with stage(progress, "plan"):
        split = plan_budget(cfg)
        refuse_source_table(cfg.items, spark, cfg.source)  # before the budget store is charged
        cfg = with_tables_read(cfg, spark)  # the same refusal for an aggregation's key tables
        catalog.preflight(cfg, spark, progress, lambda: release_tables(cfg, spark))  # source found, tables ours
        if cfg.run_date is not None:
            release_store.check_partitioned_output(spark, cfg.output, "run_date")
        release_store.check_output_location(spark, target)
        replacing = cfg.run_date is not None and release_store.release_exists(spark, target)
        if replacing and not force:
            progress(f"the release for run date {cfg.run_date} already exists at {target}: nothing to do and no "
                     "budget spent (--force draws new noise and spends the budget again)")
            existing = release_store.read_report(spark, target)
            _register_tables(cfg, spark, progress, target, existing)  # finishes a run killed while registering
            return JobResult(target, existing, {}, None, status="unchanged")
        if replacing:
            progress(f"--force: replacing the release for run date {cfg.run_date} at {target}; this run spends "
                     f"epsilon {float(cfg.epsilon):g} again")
        preflight.check(cfg, target, _family(cfg).uses_item_domain, spark, progress)  # nothing charged or read yet
        domains = job_domains(cfg, spark)
        lifecycle.refuse_before_charge(_family(cfg), cfg.params, domains, cfg.epsilon, split, cfg.execution,
                                       cfg.accounting, cfg.guards, progress)
        records = check_source_schema(cfg, spark, domains)
    run = {"run_date": cfg.run_date, "forced": replacing}
    charger = None if cfg.budget_store is None else _StoreCharger(cfg, target, run, progress)

    def release() -> JobResult:
        if charger is not None and hasattr(progress, "expect"):
            took = budget_store.last_release_seconds(cfg.budget_store, cfg.algorithm, cfg.output)
            if took is not None:
                progress.expect(took)
        return _release(cfg, spark, progress, target, run, (domains, records))

    return lifecycle.charged(charger, release, lambda result: result.report, progress)


class _StoreCharger:
    """A job's charge in its budget store (lifecycle.Charger): the run's entry, with what it
    released, or why it ended without a release. The entry goes into the release's report too
    (``run.budget_store``)."""

    what = "run"

    def __init__(self, cfg: JobConfig, target: str, run: dict, progress):
        self.cfg, self.target, self.run, self.progress = cfg, target, run, progress

    def charge(self) -> str:
        cfg, store, progress = self.cfg, self.cfg.budget_store, self.progress
        with stage(progress, "charge"):
            charged = budget_store.charge(store, cfg.epsilon, claimed_delta(cfg),
                                          {"algorithm": cfg.algorithm, "output": self.target,
                                           "run_date": cfg.run_date, "forced": self.run["forced"]}, zcdp_charge(cfg))
        if "epsilon_running" in charged:  # a zcdp store: its rule states the runs' rho at the delta cap
            progress(f"charged rho {float(cfg.accounting.rho):.6g} to dataset {store.dataset!r}: its runs so far "
                     f"are (epsilon {charged['epsilon_running']:.6g}, delta {charged['delta_cap']:g})-DP by zCDP "
                     f"composition, of its cap epsilon {charged['epsilon_cap']:g}")
        else:
            progress(f"charged epsilon {float(cfg.epsilon):g} to dataset {store.dataset!r}: "
                     f"{charged['epsilon_charged_total']:g} of its cap {charged['epsilon_cap']:g} is now used")
        self.run["budget_store"] = charged
        return charged["run_id"]

    def ended(self, run_id: str, status: str, exc: BaseException) -> None:
        budget_store.finish(self.cfg.budget_store, run_id, status, error=budget_store.stored_error(exc))

    def released(self, run_id: str, report: dict) -> None:
        """A run whose end cannot be recorded fails: the store must say what its charge bought."""
        with stage(self.progress, "record"):
            budget_store.finish(self.cfg.budget_store, run_id, "released", release=self.target,
                                epsilon_spent=report["epsilon_spent"], ledger=report["ledger"])
