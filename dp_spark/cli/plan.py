"""``dp-spark plan CONF``: what a job would release and how far each released value may be from
the value it was computed from, before any record is read or any budget spent.

It builds the same parameters, split and public domains as ``dp-spark run`` (so a bad config
fails here the same way), then prints each output table's noise from public parameters only
(:mod:`dp_spark.core.accuracy`): the numbers ``privacy.json`` will carry in its ``accuracy``
section. Spark starts only when the item domain is a table.
"""

from __future__ import annotations

from dp_spark.cli import spark_args
from dp_spark.cli.exits import EXIT_OK
from dp_spark.errors import ConfigError


def add_parser(commands) -> None:
    plan = commands.add_parser("plan", help="expected error of each released value, before any run (reads no "
                               "records, spends nothing)")
    plan.add_argument("config", help="job config, e.g. conf/demo.toml")
    plan.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="override a config key (repeatable), as for run")
    plan.add_argument("--alpha", type=float, default=None,
                      help="also show the (1 - alpha) interval (default 0.1: the 90%% interval)")
    plan.add_argument("--json", action="store_true", help="print privacy.json's accuracy section as JSON")
    spark_args.add_arguments(plan, "Spark master URL, used only for a domain read from a table")


def plan(args) -> int:
    import json

    from dp_spark.core import accuracy
    from dp_spark.core.accounting import epsilon_warning
    from dp_spark.families.registry import family_of
    from dp_spark.jobs.config import load_config
    from dp_spark.jobs.runner import job_domains, plan_budget
    from dp_spark.release import guards, noise_only
    from dp_spark.release.engine import accuracy_section, planned_accuracy
    from dp_spark.release.family import describe_output_size, output_size

    alpha = accuracy.DEFAULT_ALPHA if args.alpha is None else args.alpha
    if not 0 < alpha < 1:
        raise ConfigError(f"--alpha must be strictly between 0 and 1, got {alpha:g}")
    cfg = load_config(args.config, args.overrides)
    split = plan_budget(cfg)
    family = family_of(cfg.algorithm)
    spark = None
    if (family.uses_item_domain and "table" in cfg.items) or family.reads_tables(cfg.params):
        # the one case that needs Spark: a domain held in a catalog table
        from dp_spark.core.domain_tables import refuse_source_table
        from dp_spark.io.session import get_session
        from dp_spark.jobs.runner import with_tables_read

        spark = get_session(spark_args.master_of(args), cfg.spark)
        refuse_source_table(cfg.items, spark, cfg.source)  # as run refuses it: a private domain
        cfg = with_tables_read(cfg, spark)
    domains = job_domains(cfg, spark)
    rows = output_size(family, cfg.params, domains, cfg.execution)  # refuses what run would refuse
    section = accuracy_section(family, cfg.params, cfg.epsilon, domains, split, alpha, cfg.accounting)
    if args.json:
        print(json.dumps(section, indent=2))
        return EXIT_OK
    print(f"Plan: {family.describe(cfg.params, cfg.epsilon, domains)}")
    print("epsilon split: " + ", ".join(f"{k} {float(v):g}" for k, v in split.items()))
    if epsilon_warning(cfg.epsilon):
        print(epsilon_warning(cfg.epsilon))
    print(f"output: {describe_output_size(rows)}")
    if cfg.guards.active:
        print(guards.planned(cfg.guards))
    if cfg.guards.refuse_noise_only:
        kept_scale = section.get("bounding", {}).get("records_kept", {}).get("scale")
        tables = planned_accuracy(family, cfg.params, cfg.epsilon, domains, split)
        print(noise_only.plan_line(noise_only.planned(kept_scale, tables, rows)))
    read = "No record was read" if spark is not None else "Nothing was read"  # with Spark: a public domain table
    print(f"{read} and no budget was spent. Expected error of each released value (the noise alone):\n")
    print("\n".join(accuracy.format_section(section)))
    return EXIT_OK
