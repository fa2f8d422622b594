"""``dp-spark run`` and ``dp-spark generate``: a job from its config, and synthetic datasets."""

from __future__ import annotations

from dp_spark.cli.exits import EXIT_OK, error_fields, status_of, to_stderr
from dp_spark.errors import DpSparkError


def _print_summary(result) -> None:
    report = result.report
    print(f"\nOutputs in {result.output}/")
    for name, info in report["outputs"].items():
        print(f"  {name + '/':<14} {info['rows']:>9,} rows  ({', '.join(info['columns'])})")
    print(f"  {'privacy.json':<14} the privacy report and ledger")

    unit = report["privacy_unit"].split(":", 1)[0]  # the full sentence is in privacy.json
    print(f"\nPrivacy ledger (unit: {unit}; {report['neighbouring_relation']} neighbours, "
          f"{report['privacy_model']} model):")
    step_w = max([12] + [len(e["step"]) for e in report["ledger"]])
    mech_w = max([17] + [len(e["mechanism"]) for e in report["ledger"]])
    print(f"  {'step':<{step_w}} {'mechanism':<{mech_w}} {'epsilon':>8} {'sensitivity':>11} {'noise scale':>11}"
          f" {'cells':>9}")
    for e in report["ledger"]:
        print(f"  {e['step']:<{step_w}} {e['mechanism']:<{mech_w}} {e['epsilon']:>8g} {e['sensitivity_l1']:>11g}"
              f" {e['noise_scale']:>11g} {e['cells']:>9,}")
    print(f"  spent epsilon {report['epsilon_spent']:g} of {report['epsilon_total']:g}"
          f"{'  (FIXED SEED: for testing only, NOT private)' if report['fixed_seed'] else ''}")
    print(f"  guarantee: {report['guarantee']}")

    chosen = report["algorithm"].get("chosen")
    if chosen:
        print("  chosen privately: " + ", ".join(f"{k} = {v:g}" for k, v in chosen.items()))
    if "histogram" in result.tables:
        _print_histogram(result.tables["histogram"])
        return
    if "frequent_itemsets" in result.tables:
        table = result.tables["frequent_itemsets"]
        lengths = result.report["algorithm"]["frequent_itemsets_per_length"]
        print(f"\n{len(table):,} frequent itemsets (by length: "
              + ", ".join(f"{k}: {v}" for k, v in lengths.items()) + "); the longest, by support:")
        for row in table.sort_values(["length", "support"], ascending=False).head(10).itertuples(index=False):
            print(f"  {row.support:7.4f}  {row.itemset}")
        return
    if "location_entropy" in result.tables:
        table = result.tables["location_entropy"]
        published = table["noisy_entropy"].notna()
        print(f"\n{int(published.sum()):,} of {len(table):,} locations published; top 10 by noisy entropy:")
        for row in table[published].nlargest(10, "noisy_entropy").itertuples(index=False):
            print(f"  location {row.location_id:<9} {row.noisy_entropy:8.3f}")
        return
    top = result.tables["item_counts"].sort_values(["noisy_count", "item_id"], ascending=[False, True]).head(10)
    print("\nTop-10 items by noisy count:")
    for rank, row in enumerate(top.itertuples(index=False), 1):
        title = result.items.titles.get(int(row.item_id), "")
        count = f"{row.noisy_count:>11,.1f}" if isinstance(row.noisy_count, float) else f"{row.noisy_count:>9,}"
        print(f"  {rank:>2}. item {row.item_id:<7} {count}  {title}")


def _print_histogram(table, shown: int = 40) -> None:
    print(f"\nNoisy histogram ({len(table):,} bins{f'; the first {shown} shown' if len(table) > shown else ''}):")
    for row in table.head(shown).itertuples(index=False):
        count = f"{row.noisy_count:>11,.1f}" if isinstance(row.noisy_count, float) else f"{row.noisy_count:>9,}"
        print(f"  {row.bin:>12} {count}")


def run(args) -> int:
    from dp_spark.core.progress import Progress

    progress = Progress(log_format=args.log_format)
    progress.context(config=args.config)
    try:
        result = _run_job(args, progress)
    except BaseException as exc:
        status, code = status_of(exc)
        progress.end(status, code, **error_fields(exc))
        raise
    progress.end(result.status, EXIT_OK, output=result.output,
                 epsilon_spent=0 if result.status == "unchanged" else result.report.get("epsilon_spent"))
    if result.status == "unchanged":
        print(f"The release for run date {result.report.get('run', {}).get('run_date')} already exists: "
              f"{result.output}/ (nothing done, no budget spent; --force replaces it)")
    else:
        _print_summary(result)
    return EXIT_OK


def _run_job(args, progress):
    from dataclasses import replace

    from dp_spark.jobs.config import load_config, run_date
    from dp_spark.jobs.runner import plan_budget, run_job
    from dp_spark.io.session import get_session

    with progress.stage("config"):
        cfg = load_config(args.config, args.overrides)
        if args.run_date is not None:
            cfg = replace(cfg, run_date=run_date(args.run_date))
        if args.force and cfg.run_date is None:
            raise DpSparkError("--force only applies to a run with a run date (--run-date or run_date)")
        plan_budget(cfg)  # fail on a bad split before starting Spark
    progress.context(job=cfg.algorithm, run_date=cfg.run_date)
    with progress.stage("spark"):
        spark = get_session(args.master, cfg.spark)
    return run_job(cfg, spark, progress, force=args.force)


def generate(args) -> int:
    if args.dataset == "checkins":
        return _generate_checkins(args)
    if args.rows is None or args.rows < 1:
        raise DpSparkError("generate netflix needs --rows N (N >= 1)")
    from dp_spark.io.datasets import generate_netflix, netflix_targets

    stats = generate_netflix(args.rows, args.out, seed=args.seed, progress=to_stderr)
    targets = netflix_targets(args.rows)
    print(f"wrote {args.out} in {stats['seconds']} s")
    print(f"  {'statistic':<16} {'realised':>12} {'target (paper 000 Table 4, scaled)':>36}")
    notes = {"max_per_user": "~17,000 at full scale"}
    for name, target in targets.items():
        value = stats[name]
        shown = f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
        target_text = notes.get(name, f"{target:,}")
        print(f"  {name:<16} {shown:>12} {target_text:>36}")
    return 0


def _generate_checkins(args) -> int:
    from dp_spark.io import checkins

    if args.users is None or args.users < 1:
        raise DpSparkError("generate checkins needs --users N (N >= 1)")
    stats = checkins.generate(args.users, args.out, seed=args.seed)
    paper = checkins.PAPER_TABLE_2["dense" if args.users >= 1_000_000 else "sparse"]
    print(f"wrote {args.out} ({stats['rows']:,} user-location rows)")
    print(f"  {'statistic':<24} {'realised':>12} {'paper 004 Table 2':>18}")
    for name in ("users", "locations", "max_locations_per_user", "avg_locations_per_user", "max_visits", "avg_visits",
                 "avg_users_per_location"):
        value = stats[name]
        print(f"  {name:<24} {value:>12,.2f} {paper[name]:>18,}" if isinstance(value, float)
              else f"  {name:<24} {value:>12,} {paper[name]:>18,}")
    return 0
