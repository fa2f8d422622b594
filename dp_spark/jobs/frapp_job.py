"""The FRAPP job (paper 003, ALGORITHMS.md §6): code → perturb → write → mine → publish.

The perturbed records are drawn once, written to a scratch directory beside the output and
read back for mining, so the itemsets are mined from exactly the records that are published
(re-running a perturbation draws new randomness). Budget is spent before anything is drawn.

Claim: docs/frapp.md, "Privacy claim: frapp".
"""

from __future__ import annotations

import datetime as dt
import uuid
from fractions import Fraction

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.version import __version__
from dp_spark.bounding import user_records
from dp_spark.io import datasets, release_store, sources
from dp_spark.algorithms import frapp
from dp_spark.algorithms import frapp_mining as fm
from dp_spark.jobs.config import JobConfig
from dp_spark.errors import ConfigError, DataError
from dp_spark.core.privacy import Budget, LedgerEntry, PrivacyUnit
from dp_spark.core.progress import stage

# FRAPP's guarantee is local and bounded (ALGORITHMS.md §1.1 rule 4, §6): a record's values may be
# replaced, but the number of records is published exactly.
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


def read_source(spark, cfg: JobConfig) -> DataFrame:
    if cfg.source.format in datasets.RAW_LOADERS:
        df = datasets.RAW_LOADERS[cfg.source.format](spark, cfg.source.path)
    else:
        df = sources._read_raw(spark, cfg.source)
    if cfg.source.drop_user is None:
        return df
    user = user_column(cfg, df)  # dp-spark audit-report's neighbouring input: one user removed
    if user is None:
        raise ConfigError("the source has no user id column (source.columns.user_id): no user can be removed")
    return sources.without_dropped_user(df, cfg.source, user)


def user_column(cfg: JobConfig, df: DataFrame) -> str | None:
    """The source's user id column, if it has one: without it every row is one user."""
    name = cfg.source.columns.get("user_id", "user_id")
    if name in df.columns:
        return name
    if "user_id" in cfg.source.columns:
        raise DataError(f"source column {name!r} (for user_id) not found; the source has: {', '.join(df.columns)}")
    return None


def bounded_records(df: DataFrame, cfg: JobConfig) -> tuple[DataFrame, dict]:
    """At most records_per_user rows per user (a uniform sample), when users are known."""
    per_user = cfg.frapp["records_per_user"]
    user = user_column(cfg, df)
    if user is None:
        return df, {"users": "not given: every row is taken as one user"}
    if df.where(F.col(f"`{user}`").isNull()).limit(1).count():
        raise DataError(f"user id column {user!r} has missing values")
    keyed = user_records.with_record_id(df).withColumnRenamed(user, "_user")
    kept = user_records.sample_per_user(keyed, per_user, cfg.seed, user_col="_user")
    return kept.drop("record_id").withColumnRenamed("_user", user), {"users": f"column {user!r}"}


def _ledger_entry(cfg: JobConfig, scheme: fm.Scheme) -> LedgerEntry:
    per_user = cfg.frapp["records_per_user"]
    return LedgerEntry(
        step="perturb records",
        mechanism=f"FRAPP {scheme.name} (local)" + (f" x {per_user} records" if per_user > 1 else ""),
        epsilon=cfg.epsilon,
        sensitivity=Fraction(per_user),
        noise_scale=Fraction(0),
        cells=frapp.record_space(list(scheme.sizes)),
    )


def _report(cfg: JobConfig, budget: Budget, attributes, scheme: fm.Scheme, outputs: dict, diagnostics: dict,
            lengths: dict) -> dict:
    return {
        "dp_spark_version": __version__,
        "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "algorithm": {
            "name": "frapp",
            "parameters": {**scheme.parameters(), "sup_min": cfg.frapp["sup_min"],
                           "records_per_user": cfg.frapp["records_per_user"],
                           "epsilon_per_record": float(cfg.frapp["epsilon_per_record"])},
            "specification": frapp.SPEC_SECTIONS[scheme.name],
            "post_processing": "frequent itemsets mined from the perturbed records (Apriori with support "
                               "reconstruction; no budget)",
            "frequent_itemsets_per_length": lengths,
            **({"note": "RAN-GD's random matrix adds no privacy: the guarantee is exactly DET-GD's "
                        "(ALGORITHMS.md §6.3)"} if scheme.name == "ran_gd" else {}),
        },
        **budget.to_json(),
        "noise": {"sampler": "exact integer draws per record (keep/flip/insert probabilities are fractions)"
                  + (f"; RAN-GD's r uniform on {frapp.RAN_GD_POINTS} fixed points" if scheme.name == "ran_gd" else ""),
                  "randomness": "fixed seed: reproducible, not for publication" if cfg.seed is not None
                  else "OS CSPRNG, one source per Arrow batch"},
        "source": {"format": cfg.source.format, "location": cfg.source.path or cfg.source.table},
        "domain": {"records": {a.name: list(a.labels) for a in attributes},
                   "record_space": frapp.record_space(list(scheme.sizes))},
        # The number of perturbed records is public: it is the row count of the released table.
        "outputs": outputs,
        "diagnostics_not_private": {"note": "NOT PRIVATE: from the raw records, for the operator's checks only",
                                    **diagnostics},
    }


def run(cfg: JobConfig, spark, progress, output: str, run_info: dict):
    """Read, perturb, mine and write to ``output`` (checked by the caller); returns the report and
    the tables (the frequent itemsets as pandas). ``run_info`` is the report's ``run`` section."""
    specs = list(cfg.frapp["specs"])
    scheme: fm.Scheme = cfg.frapp["scheme"]
    attributes = [s.attribute() for s in specs]
    progress(f"FRAPP {scheme.name}: gamma {float(scheme.gamma):g} (worst ratio {scheme.ratio:.4g}), epsilon "
             f"{float(cfg.frapp['epsilon_per_record']):.4g} per record; {len(attributes)} attributes, record "
             f"space {frapp.record_space(list(scheme.sizes)):,}")
    progress(f"reading {cfg.source.format} source {cfg.source.path or cfg.source.table}")
    with stage(progress, "read"):
        raw = read_source(spark, cfg)
        unit = privacy_unit(cfg.frapp["records_per_user"], user_column(cfg, raw) is not None)
        records, diagnostics = bounded_records(raw, cfg)
        table = fm.coded(records, specs)

    budget = Budget(cfg.epsilon, unit=unit, fixed_seed=cfg.seed is not None)
    budget.spend(_ledger_entry(cfg, scheme))  # before any randomness is drawn
    target = release_store.location(output)
    scratch = target.sibling(f".{target.name}.perturbed-{uuid.uuid4().hex}").uri
    try:
        with stage(progress, "release"):
            progress("perturbing the records")
            fm.perturb(table, scheme, cfg.seed).write.parquet(scratch)
            perturbed = spark.read.parquet(scratch)
            rows = perturbed.count()
            progress(f"{rows:,} perturbed records; mining frequent itemsets at support {cfg.frapp['sup_min']:g}")
            found = fm.mine(perturbed, list(scheme.sizes), scheme, cfg.frapp["sup_min"], progress)
            itemsets = fm.itemsets_table(found, attributes)
            lengths = {str(k): int(v) for k, v in itemsets["length"].value_counts().sort_index().items()}
            published = fm.labelled(perturbed, attributes, scheme.name in frapp.BIT_SCHEMES)
            outputs = {"perturbed_records": {"rows": rows, "columns": published.columns},
                       "frequent_itemsets": {"rows": len(itemsets), "columns": list(itemsets.columns)}}
            report = {**_report(cfg, budget, attributes, scheme, outputs, diagnostics, lengths), "run": run_info}
        with stage(progress, "write"):
            progress(f"writing {output}")
            release_store.write_release(spark, output, {"perturbed_records": published, "frequent_itemsets": itemsets}, report)
    finally:
        release_store.delete(release_store.location(scratch))
    return report, {"frequent_itemsets": itemsets}
