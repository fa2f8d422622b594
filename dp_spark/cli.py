"""``dp-spark run | generate``: the command line.

Errors a user can fix (bad config, bad data, a refused budget) print one line
``dp-spark: error: ...`` and exit with status 2; nothing is written.
"""

from __future__ import annotations

import argparse
import sys

from dp_spark.errors import DpSparkError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dp-spark", description="Differentially private statistics on Spark.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run a job described by a TOML config")
    run.add_argument("config", help="job config, e.g. conf/demo.toml")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key, e.g. --set privacy.epsilon=0.5 (repeatable)")
    run.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")

    generate = commands.add_parser("generate", help="write a synthetic dataset")
    generate.add_argument("dataset", choices=["netflix"])
    generate.add_argument("--rows", type=int, required=True, help="number of ratings (100480507 = full Netflix)")
    generate.add_argument("--out", required=True, help="output Parquet file")
    generate.add_argument("--seed", type=int, default=0)
    return parser


def _print_summary(result) -> None:
    report = result.report
    print(f"\nOutputs in {result.output}/")
    for name, info in report["outputs"].items():
        print(f"  {name + '/':<14} {info['rows']:>9,} rows  ({', '.join(info['columns'])})")
    print(f"  {'privacy.json':<14} the privacy report and ledger")

    print(f"\nPrivacy ledger (unit: {report['privacy_unit']}):")
    print(f"  {'step':<12} {'mechanism':<17} {'epsilon':>8} {'sensitivity':>11} {'noise scale':>11} {'cells':>9}")
    for e in report["ledger"]:
        print(f"  {e['step']:<12} {e['mechanism']:<17} {e['epsilon']:>8g} {e['sensitivity_l1']:>11g}"
              f" {e['noise_scale']:>11g} {e['cells']:>9,}")
    print(f"  spent epsilon {report['epsilon_spent']:g} of {report['epsilon_total']:g}"
          f"{'  (FIXED SEED: noise is reproducible, not for publication)' if report['fixed_seed'] else ''}")

    top = result.item_table.sort_values(["noisy_count", "item_id"], ascending=[False, True]).head(10)
    print("\nTop-10 items by noisy count:")
    for rank, row in enumerate(top.itertuples(index=False), 1):
        title = result.items.titles.get(int(row.item_id), "")
        print(f"  {rank:>2}. item {row.item_id:<7} {row.noisy_count:>9,}  {title}")


def _run(args) -> int:
    from dp_spark.config import load_config
    from dp_spark.jobs import Progress, plan_budget, run_job
    from dp_spark.spark import get_session

    cfg = load_config(args.config, args.overrides)
    plan_budget(cfg)  # fail on a bad split before starting Spark
    spark = get_session(args.master, cfg.spark)
    result = run_job(cfg, spark, Progress())
    _print_summary(result)
    return 0


def _generate(args) -> int:
    from dp_spark.datasets import NETFLIX_ITEMS, generate_netflix

    progress = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    stats = generate_netflix(args.rows, args.out, seed=args.seed, progress=progress)
    print(f"wrote {args.out}: {stats['rows']:,} ratings by {stats['users']:,} users of "
          f"{stats['items_rated']:,}/{NETFLIX_ITEMS:,} movies; per user min {stats['min_per_user']}, "
          f"mean {stats['mean_per_user']:.1f}, max {stats['max_per_user']:,} ({stats['seconds']} s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args) if args.command == "run" else _generate(args)
    except DpSparkError as exc:
        print(f"dp-spark: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
