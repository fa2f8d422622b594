"""``dp-spark run | plan | tune | check | generate | bench | evaluate | audit | budget``: the command line.

Exit status, for people and schedulers alike:

- 0: done (for ``run`` also when the run date's release already existed and nothing was done);
- 2: bad config or bad input data; one line ``dp-spark: error: ...``, nothing written (a run that
  a budget store had already charged stays charged: docs/scheduled_runs.md);
- 3: budget refused (a split over the job's epsilon, or a run over the dataset's cap in the budget
  store); one line ``dp-spark: budget refused: ...``, nothing written;
- 1: anything else went wrong at run time (Spark, the file system, a bug): one line
  ``dp-spark: runtime error: ...`` naming the root cause (the innermost exception, e.g.
  "IOException: No space left on device"); ``run --debug`` prints the traceback before it (the
  other commands always do). The previous release is intact; a charged run is marked failed;
- 4: ``dp-spark audit`` found a lower bound above the claimed ε.
- 5: a guard refused the release on its noisy figures (``[guards]``, or the release's own figures
  could not be told from noise: release.noise_only); one line ``dp-spark: refused: ...``, nothing
  written, the charge kept; a retry on the same data is refused again.
- 4 also: ``dp-spark audit-report`` found privacy.json differing on neighbouring inputs;
- 2 also: another run of the same output and run date is in progress (its lock is held); nothing
  charged, nothing written;
- 128 + the signal's number (143 for SIGTERM, 130 for SIGINT): ``run`` was stopped by a signal;
  one line ``dp-spark: interrupted: ...``; the staging directory is removed, the previous release
  is intact (or the new one, if it was already in place), a budget store that charged the run
  marks it failed (charge kept), and the JSON log ends with its ``end`` event (status
  "interrupted"). The SIGINT code also covers Ctrl-C in the other commands.
"""

from __future__ import annotations

import argparse
import signal
import sys
import traceback

from dp_spark.cli import budget, check, measure, plan, report, run, spark_args, tune
from dp_spark.cli.exits import EXIT_BUDGET, EXIT_GUARD, EXIT_INPUT, EXIT_RUNTIME, quiet_spark_error_logs, root_cause
from dp_spark.errors import BudgetExceeded, DpSparkError, GuardRefused, Interrupted


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dp-spark", description="Differentially private statistics on Spark.")
    parser.add_argument("--version", action="version", version=_versions())
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run a job described by a TOML config")
    run.add_argument("config", help="job config, e.g. conf/demo.toml")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key, e.g. --set privacy.epsilon=0.5 (repeatable)")
    spark_args.add_arguments(run)
    run.add_argument("--run-date", metavar="YYYY-MM-DD",
                     help="write the release to OUTPUT/run_date=YYYY-MM-DD/ (same as the config key run_date); "
                          "re-running a date that has a release does nothing")
    run.add_argument("--force", action="store_true",
                     help="with a run date whose release exists: draw new noise and replace it, spending the "
                          "budget again")
    run.add_argument("--log-format", choices=["text", "json"], default="text",
                     help="progress on stderr as text, or as one JSON object per line for schedulers")
    run.add_argument("--diagnostics", metavar="FILE",
                     help="operator only, NOT private: print raw figures (records read, users, rows kept) in the "
                          "log and write them as JSON to FILE, which must be outside the release")
    run.add_argument("--debug", action="store_true",
                     help="on a runtime failure, print the traceback (Python and Java) before the one-line root "
                          "cause; the JSON log's end event carries it either way")

    generate = commands.add_parser("generate", help="write a synthetic dataset")
    generate.add_argument("dataset", choices=["netflix", "checkins"])
    generate.add_argument("--rows", type=int, help="netflix: number of ratings (100480507 = full Netflix)")
    generate.add_argument("--users", type=int,
                          help="checkins: number of users (paper 004's Sparse: 100000, Dense: 10000000)")
    generate.add_argument("--out", required=True, help="output Parquet file")
    generate.add_argument("--seed", type=int, default=0)

    evaluate = commands.add_parser("evaluate", help="error of each method against the true counts (NOT private)")
    evaluate.add_argument("config", help="job config giving the data, domains, epsilon and l")
    evaluate.add_argument("--runs", type=int, default=20, help="runs per method, each with fresh noise (default 20)")
    evaluate.add_argument(
        "--methods",
        help="comma-separated: sra, hpa, lpa, dft, gs, sra_auto, hpa_auto, "
        "sra_gaussian, hpa_gaussian (zCDP); for a user_histogram config, "
        "publishers such as laplace, ahp, dpa_ahp; for a dpsense config, dpsense, "
        "dpsense_s, lpa, alpa, fpa, gs; for an entropy config, baseline, limit, "
        "limit_ss, limit_cb, limit_cb_dp, limit_auto; for a frapp config, exact, det_gd, ran_gd, mask, "
        "cut_paste (default: the config's)",
    )
    evaluate.add_argument("--m", type=int,
                          help="public per-user bound M for lpa, dft and gs (on a dpsense config: the row bound Δ)")
    evaluate.add_argument("--out", default="evaluation", help="directory for evaluation.json and evaluation.md")
    evaluate.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                          help="override a config key (repeatable)")
    spark_args.add_arguments(evaluate)

    audit = commands.add_parser("audit", help="empirical lower bound on a mechanism's epsilon (exit 4 if above "
                                "its claim)")
    audit.add_argument("name", nargs="?", help="what to audit (see --list): a mechanism, one grid point "
                       "('family[eps=0.1]'), or 'all'")
    audit.add_argument("--grid", action="store_true", help="run every point of the mechanism's parameter grid "
                       "(with 'all': every family's grid and the negative controls)")
    audit.add_argument("--list", action="store_true", help="list what can be audited (with --grid: every grid point)")
    audit.add_argument("--trials", type=int, help="releases per side (default: the target's)")
    audit.add_argument("--seed", type=int, default=0, help="seed of the audit's own randomness (default 0)")
    audit.add_argument("--json", help="also write the results to this JSON file")

    # The lab (non-private measurement code) is imported inside functions only: tests/test_architecture.py.
    from dp_spark.lab.bench import DEFAULT_JOBS as DEFAULT_BENCH_JOBS
    from dp_spark.lab.bench import JOBS as BENCH_JOBS

    bench = commands.add_parser("bench", help="time jobs against the non-private floor (docs/lab/performance.md)")
    bench.add_argument("--rows", required=True, help="comma-separated table sizes, e.g. 1000000,10000000")
    bench.add_argument("--jobs", default=",".join(DEFAULT_BENCH_JOBS),
                       help=f"comma-separated: {', '.join(BENCH_JOBS)} (default: {','.join(DEFAULT_BENCH_JOBS)})")
    bench.add_argument("--out", required=True, help="directory for bench.json and machine.json")
    bench.add_argument("--repeats", type=int, default=5, help="timed runs per job after the warm-ups (default 5)")
    bench.add_argument("--warmups", type=int, default=2, help="untimed rounds of every job first (default 2)")
    bench.add_argument("--data-dir", default="data", help="where the generated tables are kept (default data/)")
    bench.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    budget.add_parser(commands)
    plan.add_parser(commands)
    report.add_parser(commands)
    tune.add_parser(commands)
    check.add_parser(commands)

    audit_report = commands.add_parser(
        "audit-report", help="run a job on its source and on the source without one user, and compare the two "
        "privacy.json files (exit 4 if they differ outside the noisy values; a test, NOT private)")
    audit_report.add_argument("config", help="job config, e.g. conf/demo.toml")
    audit_report.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                              help="override a config key (repeatable)")
    audit_report.add_argument("--remove-user", metavar="ID",
                              help="the user left out of D', as a number or text id (default: the user with the most "
                              "records)")
    audit_report.add_argument("--seed", type=int, default=0, help="the seed of both runs (default 0)")
    audit_report.add_argument("--out", help="keep both releases here (D/ and D_prime/); default: a temporary "
                              "local directory, removed afterwards")
    spark_args.add_arguments(audit_report)
    return parser


def _versions() -> str:
    """dp-spark's version and the installed PySpark's, read without starting Spark."""
    from dp_spark.version import __version__

    try:  # the module, not the package metadata: under spark-submit PySpark comes from SPARK_HOME
        from pyspark import __version__ as pyspark
    except ImportError:
        pyspark = "not installed"
    return f"dp-spark {__version__} (PySpark {pyspark})"


COMMANDS = {"run": run.run, "generate": run.generate, "bench": measure.bench, "evaluate": measure.evaluate,
            "audit": measure.audit, "budget": budget.budget, "audit-report": measure.audit_report, "plan": plan.plan}
COMMANDS["tune"] = tune.tune
COMMANDS["check"] = check.check
COMMANDS["report"] = report.report


def full_java_stacks() -> None:
    """Ask the driver JVM that is about to start for whole stack traces in its log."""
    import os

    option = "-Ddpspark.stack=full"
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if option not in opts:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} {option}".strip()


def stdout_closed() -> int:
    """Exit as a Unix tool whose reader has gone does: quietly, 128 + SIGPIPE. Standard output is
    pointed at /dev/null first, or Python's own flush at exit would fail on the closed pipe again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with run.json_usage_errors(argv):  # with --log-format json, a usage error is a JSON end event too
        args = _parser().parse_args(argv)
    debug = getattr(args, "debug", True)  # commands without --debug keep their tracebacks
    if not debug:
        quiet_spark_error_logs()
    else:  # the JVM's own log keeps whole Java stacks too (dp_spark/io/log4j2.properties)
        full_java_stacks()
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # the reader stopped early (`dp-spark budget show | head`): not an error of ours
        return stdout_closed()
    except Interrupted as exc:  # a BaseException: the run has already cleaned up on the way here
        print(f"dp-spark: interrupted: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # SIGINT where dp-spark's handler is not installed (another command, Spark's)
        print("dp-spark: interrupted: stopped by SIGINT (signal 2)", file=sys.stderr)
        return 128 + signal.SIGINT
    except BudgetExceeded as exc:
        print(f"dp-spark: budget refused: {exc}", file=sys.stderr)
        return EXIT_BUDGET
    except GuardRefused as exc:
        print(f"dp-spark: refused: {exc}", file=sys.stderr)
        return EXIT_GUARD
    except DpSparkError as exc:
        print(f"dp-spark: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:  # noqa: BLE001 - a scheduler needs a status and the root cause on one line
        if debug:
            traceback.print_exc()
        hint = "" if debug else " (--debug prints the traceback)"
        print(f"dp-spark: runtime error: {root_cause(exc)}{hint}", file=sys.stderr)
        return EXIT_RUNTIME
