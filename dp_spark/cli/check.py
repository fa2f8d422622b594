"""``dp-spark check CONF``: what a run of this config would drop from the raw records, and why.
NOT PRIVATE (:mod:`dp_spark.lab.check`): nothing is charged or released, and the exit status is 0
whatever the records hold once they are read (2 for a config or source a run would refuse too)."""

from __future__ import annotations

from dp_spark.cli import spark_args
from dp_spark.cli.exits import EXIT_OK
from dp_spark.errors import ConfigError


def add_parser(commands) -> None:
    check = commands.add_parser("check", help="NOT PRIVATE: read the raw records as a run of CONF would and say what "
                                "it would drop and why (encoding, ids, domain); charges and releases nothing")
    check.add_argument("config", help="job config, e.g. conf/demo.toml")
    check.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config key (repeatable), as for run")
    check.add_argument("--json", action="store_true", help="print the figures as JSON")
    spark_args.add_arguments(check)


def check(args) -> int:
    import json

    from dp_spark.families.registry import family_of
    from dp_spark.io.session import get_session
    from dp_spark.jobs.config import load_config
    from dp_spark.lab import check

    cfg = load_config(args.config, args.overrides)
    reads = family_of(cfg.algorithm).reads
    if reads == "whole_records":
        raise ConfigError("check reads the records of every job but FRAPP's, which perturbs every record it reads, "
                          "with no domain to miss")
    result = check.check(cfg, get_session(spark_args.master_of(args), cfg.spark))
    print(json.dumps({"note": check.LABEL, **result}, indent=2) if args.json
          else "\n".join(check.lines(result, args.config)))
    return EXIT_OK
