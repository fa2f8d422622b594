"""``dp-spark run | generate | bench | evaluate | audit | budget``: the command line.

Exit status, for people and schedulers alike:

- 0: done (for ``run`` also when the run date's release already existed and nothing was done);
- 2: bad config or bad input data; one line ``dp-spark: error: ...``, nothing written (a run that
  a budget store had already charged stays charged: docs/scheduled_runs.md);
- 3: budget refused (a split over the job's epsilon, or a run over the dataset's cap in the budget
  store); one line ``dp-spark: budget refused: ...``, nothing written;
- 1: anything else went wrong at run time (Spark, the file system, a bug): the traceback, then
  one line ``dp-spark: runtime error: ...``; the previous release is intact;
- 4: ``dp-spark audit`` found a lower bound above the claimed ε.
- 4 also: ``dp-spark audit-report`` found privacy.json differing on neighbouring inputs.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from dp_spark.errors import DpSparkError
from dp_spark.core.privacy import BudgetExceeded

EXIT_OK, EXIT_RUNTIME, EXIT_INPUT, EXIT_BUDGET, EXIT_AUDIT = 0, 1, 2, 3, 4


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dp-spark", description="Differentially private statistics on Spark.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run a job described by a TOML config")
    run.add_argument("config", help="job config, e.g. conf/demo.toml")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key, e.g. --set privacy.epsilon=0.5 (repeatable)")
    run.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    run.add_argument("--run-date", metavar="YYYY-MM-DD",
                     help="write the release to OUTPUT/run_date=YYYY-MM-DD/ (same as the config key run_date); "
                          "re-running a date that has a release does nothing")
    run.add_argument("--force", action="store_true",
                     help="with a run date whose release exists: draw new noise and replace it, spending the "
                          "budget again")
    run.add_argument("--log-format", choices=["text", "json"], default="text",
                     help="progress on stderr as text, or as one JSON object per line for schedulers")

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
    evaluate.add_argument("--methods", help="comma-separated: sra, hpa, lpa, dft, gs; for a user_histogram config, "
                          "publishers such as laplace, ahp, dpa_ahp; for a dpsense config, dpsense, "
                          "dpsense_s, lpa, alpa, fpa, gs; for an entropy config, baseline, limit, "
                          "limit_ss, limit_cb, limit_cb_dp; for a frapp config, exact, det_gd, ran_gd, mask, "
                          "cut_paste (default: the config's)")
    evaluate.add_argument("--m", type=int,
                          help="public per-user bound M for lpa, dft and gs (on a dpsense config: the row bound Δ)")
    evaluate.add_argument("--out", default="evaluation", help="directory for evaluation.json and evaluation.md")
    evaluate.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                          help="override a config key (repeatable)")
    evaluate.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")

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
    from dp_spark.lab.bench import DEFAULT_JOBS as DEFAULT_BENCH_JOBS, JOBS as BENCH_JOBS

    bench = commands.add_parser("bench", help="time jobs against the non-private floor (docs/performance.md)")
    bench.add_argument("--rows", required=True, help="comma-separated table sizes, e.g. 1000000,10000000")
    bench.add_argument("--jobs", default=",".join(DEFAULT_BENCH_JOBS),
                       help=f"comma-separated: {', '.join(BENCH_JOBS)} (default: {','.join(DEFAULT_BENCH_JOBS)})")
    bench.add_argument("--out", required=True, help="directory for bench.json and machine.json")
    bench.add_argument("--repeats", type=int, default=5, help="timed runs per job after the warm-ups (default 5)")
    bench.add_argument("--warmups", type=int, default=2, help="untimed rounds of every job first (default 2)")
    bench.add_argument("--data-dir", default="data", help="where the generated tables are kept (default data/)")
    bench.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    _budget_parser(commands)

    audit_report = commands.add_parser(
        "audit-report", help="run a job on its source and on the source without one user, and compare the two "
        "privacy.json files (exit 4 if they differ outside the noisy values; a test, NOT private)")
    audit_report.add_argument("config", help="job config, e.g. conf/demo.toml")
    audit_report.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                              help="override a config key (repeatable)")
    audit_report.add_argument("--remove-user", type=int, metavar="ID",
                              help="the user left out of D' (default: the user with the most records)")
    audit_report.add_argument("--seed", type=int, default=0, help="the seed of both runs (default 0)")
    audit_report.add_argument("--out", help="keep both releases here (D/ and D_prime/); default: a temporary "
                              "local directory, removed afterwards")
    audit_report.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    return parser


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


def _run(args) -> int:
    from dp_spark.core.progress import Progress

    progress = Progress(log_format=args.log_format)
    progress.context(config=args.config)
    try:
        result = _run_job(args, progress)
    except BaseException as exc:
        status, code = _status(exc)
        progress.end(status, code, error=_one_line(exc))
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


def _status(exc: BaseException) -> tuple[str, int]:
    if isinstance(exc, BudgetExceeded):
        return "refused", EXIT_BUDGET
    if isinstance(exc, DpSparkError):
        return "bad_input", EXIT_INPUT
    return "error", EXIT_RUNTIME


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _generate(args) -> int:
    if args.dataset == "checkins":
        return _generate_checkins(args)
    if args.rows is None or args.rows < 1:
        raise DpSparkError("generate netflix needs --rows N (N >= 1)")
    from dp_spark.io.datasets import generate_netflix, netflix_targets

    stats = generate_netflix(args.rows, args.out, seed=args.seed, progress=_to_stderr)
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


def _rows_list(text: str) -> list[int]:
    try:
        rows = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise DpSparkError(f"--rows must be comma-separated integers, got {text!r}") from None
    if not rows or min(rows) < 1:
        raise DpSparkError(f"--rows must list sizes >= 1, got {text!r}")
    return rows


def _bench(args) -> int:
    from dp_spark.lab import bench

    jobs = [job.strip() for job in args.jobs.split(",") if job.strip()]
    records = bench.run(_rows_list(args.rows), jobs, args.out, args.repeats, args.data_dir, args.master, _to_stderr,
                        args.warmups)
    print(bench.markdown(records))
    print(f"\nwrote {args.out}/bench.json and {args.out}/machine.json")
    return 0


def _audit_report(args) -> int:
    import shutil
    import tempfile

    from dp_spark.lab import report_audit
    from dp_spark.jobs.config import load_config
    from dp_spark.jobs.runner import plan_budget
    from dp_spark.core.progress import Progress
    from dp_spark.io.session import get_session

    cfg = load_config(args.config, args.overrides)
    plan_budget(cfg)  # fail on a bad split before starting Spark
    spark = get_session(args.master, cfg.spark)
    workdir = args.out or tempfile.mkdtemp(prefix="dp-spark-audit-report-")
    try:
        user = args.remove_user
        if user is None:
            user, rows = report_audit.heaviest_user(cfg, spark)
            _to_stderr(f"D' leaves out user {user}, who has the most rows ({rows:,}); chosen from the raw data, "
                       "as this test may")
        reports = report_audit.neighbour_reports(cfg, spark, workdir, user, args.seed, Progress())
    finally:
        if args.out is None:
            shutil.rmtree(workdir, ignore_errors=True)
    found = reports.compare()
    print(f"Report audit of {args.config}: D = the configured source, D' = D without user {user}; both runs with "
          f"seed {args.seed}, no budget store (NOT private: for testing)")
    allowed = [d for d in found if d.allowed_because]
    leaks = [d for d in found if not d.allowed_because]
    if allowed:
        print(f"\nAllowed to differ ({len(allowed)}):")
        for d in allowed:
            print(f"  {d}\n      because {d.allowed_because}")
    if all(d.path == "created_utc" for d in found):
        print(f"\nWARNING: D and D' gave the same report, diagnostics and all: is user {user} in the source?")
    if leaks:
        print(f"\nDIFFERENT outside the allow-list ({len(leaks)}): privacy.json depends on the data")
        for d in leaks:
            print(f"  {d}")
        return EXIT_AUDIT
    print("\nprivacy.json is the same on D and D' outside the allow-list (docs/report_audit.md)")
    return EXIT_OK


def _plot(records: list[dict], out: str) -> None:
    from dp_spark.lab import plots

    if not plots.available():
        _to_stderr("no plots: install the 'plot' extra (pip install 'dp-spark[plot]') for PNGs")
        return
    if any(r["query"].startswith("len") for r in records):  # frapp: metrics against itemset length
        plots.per_length(records, ["support_error", "sigma_minus", "sigma_plus"], f"{out}/frapp_errors.png")
        plots.per_length(records, ["frequent_itemsets", "condition_number"], f"{out}/frapp_itemsets.png",
                         log_metrics=("condition_number",))
        return
    for query in dict.fromkeys(r["query"] for r in records if r["query"] != "bounded"):
        for metric in ("mse", "kl", "top10", "range_mse", "mae", "mse_throwaway", "published_ratio"):
            if any(r["query"] == query and r["metric"] == metric for r in records):
                plots.metric_bars(records, query, metric, f"{out}/{query}_{metric}.png",
                                  log_scale=metric in ("mse", "range_mse", "mse_throwaway"))


def _evaluate(args) -> int:
    from dp_spark.lab import evaluate
    from dp_spark.jobs.config import COLUMN_ALGORITHMS, load_config
    from dp_spark.io.session import get_session

    cfg = load_config(args.config, args.overrides)
    default = {"user_histogram": cfg.publisher, "entropy": cfg.entropy.get("variant"),
               "frapp": f"exact,{cfg.frapp['scheme'].name}" if cfg.frapp else None}.get(cfg.algorithm, cfg.algorithm)
    methods = [m.strip() for m in (args.methods or default).split(",") if m.strip()]
    if args.m is not None and args.m < 1:
        raise DpSparkError(f"--m must be >= 1, got {args.m}")
    for method in methods:
        evaluate.method_config(cfg, method, args.m)  # refuse a bad method before Spark starts
    spark = get_session(args.master, cfg.spark)
    records = evaluate.evaluate(cfg, spark, methods, args.runs, args.m, _to_stderr)
    meta = {"config": args.config, "runs": args.runs, "epsilon": float(cfg.epsilon), "seed": cfg.seed}
    if cfg.algorithm == "user_histogram":
        meta.update(quantity=cfg.quantity, bins=len(cfg.bins))
    elif cfg.algorithm in COLUMN_ALGORITHMS:
        meta.update(theta_max=cfg.theta_max, limit=cfg.limit, m=args.m)
    elif cfg.algorithm == "entropy":
        meta.update({key: cfg.entropy[key] for key in ("M", "C", "k", "delta")})
    elif cfg.algorithm == "frapp":
        meta.update(cfg.frapp["scheme"].parameters(), sup_min=cfg.frapp["sup_min"])
    else:
        meta.update(l=cfg.l, m=args.m, publisher=cfg.publisher)
    evaluate.write(records, args.out, meta)
    _plot(records, args.out)
    print(evaluate.NOT_PRIVATE)
    print(evaluate.markdown(records))
    print(f"\nwrote {args.out}/evaluation.json and {args.out}/evaluation.md")
    return 0


def _audit_selection(args) -> list:
    """The targets that ``dp-spark audit`` runs: one point, a family's grid, or all of either."""
    from dp_spark.lab.audit_targets import FAMILIES, GRID_POINTS, TARGETS

    if args.name == "all":
        return ([t for family in FAMILIES.values() for t in family.points] if args.grid else list(TARGETS.values()))
    if args.grid:
        if args.name not in FAMILIES:
            raise DpSparkError(f"no grid called {args.name!r}; 'dp-spark audit --list' shows the names")
        return list(FAMILIES[args.name].points)
    if args.name in TARGETS:
        return [TARGETS[args.name]]
    if args.name in GRID_POINTS:
        return [GRID_POINTS[args.name]]
    raise DpSparkError(f"nothing called {args.name!r} to audit; 'dp-spark audit --list' shows the names")


def _audit(args) -> int:
    import json
    import time

    from dp_spark.lab import audit
    from dp_spark.lab.audit_targets import FAMILIES, TARGETS

    if args.list or not args.name:
        listed = [t for family in FAMILIES.values() for t in family.points] if args.grid else TARGETS.values()
        for target in listed:
            status = f" [refused: {target.refused}]" if target.refused else ""
            print(f"{target.name:<30} claims eps {target.claim_epsilon:.4g}, delta {target.claim_delta:g}: "
                  f"{target.what}{status}")
        return 0
    targets = _audit_selection(args)
    if args.trials is not None and args.trials < 20:
        raise DpSparkError(f"--trials must be at least 20, got {args.trials}")
    # Bonferroni: with m targets each audited at α/m, the chance that any mechanism within its
    # claim is flagged stays below α. At α per target a grid of a hundred points, several of
    # them tight (true ε = claim), flagged one now and then (sra[eps=5] once at seed 1).
    alpha = audit.ALPHA / len(targets)
    spark = None
    results = []
    for target in targets:
        if target.needs_spark and spark is None:
            from dp_spark.io.session import get_session

            spark = get_session(None, {"spark.ui.showConsoleProgress": "false"})
        _to_stderr(f"auditing {target.name}: {target.what}")
        started = time.monotonic()
        result = audit.run(target, args.trials, args.seed, spark, alpha=alpha)
        seconds = time.monotonic() - started
        results.append((result, seconds))
        if result.refused:
            verdict = "refused by the code: nothing is released at these parameters"
        else:
            verdict = "VIOLATION: the lower bound exceeds the claim" if result.flagged else "consistent with the claim"
        if result.negative_control:
            verdict += " (negative control: it should be flagged)"
        print(f"{target.name}: claimed epsilon {result.claim_epsilon:.4g} (delta {result.claim_delta:g}); audited "
              f"lower bound {result.lower_bound:.4g} at {100 * result.confidence:.4g}% confidence, {result.trials:,} "
              f"releases per side, {seconds:.1f} s; {verdict}\n  event: {result.event}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump([{**r.to_json(), "seconds": round(s, 1)} for r, s in results], out, indent=2)
    if len(results) == 1 and not args.grid:  # one target: 4 when flagged, control or not
        return EXIT_AUDIT if results[0][0].flagged else EXIT_OK
    # 'all' and the grids include negative controls, which must be flagged: 4 when a mechanism is
    # flagged or a control is not.
    return EXIT_AUDIT if any(r.flagged != r.negative_control for r, _s in results) else EXIT_OK


def _budget_parser(commands) -> None:
    budget = commands.add_parser("budget", help="a dataset's budget store: create it, show it, change its cap "
                                 "(docs/scheduled_runs.md)")
    actions = budget.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a store with its caps (a run never changes them)")
    set_cap = actions.add_parser("set-cap", help="change a store's caps: logged with the time, user and reason; "
                                 "never below what is spent")
    for action in (create, set_cap):
        action.add_argument("--path", required=True, help="the store file")
        action.add_argument("--dataset", required=True, help="the dataset the store belongs to")
        action.add_argument("--epsilon-cap", required=True, help="the most all runs may spend, e.g. 10 or 1/3")
    create.add_argument("--delta-cap", type=float, default=0.0, help="the same for delta (default 0)")
    set_cap.add_argument("--delta-cap", type=float, help="the same for delta (default: keep the stored one)")
    create.add_argument("--reason", default="dp-spark budget create", help="kept in the store's log")
    set_cap.add_argument("--reason", required=True, help="why the cap changes; kept in the store's log")
    show = actions.add_parser("show", help="caps, spent, remaining, the runs and the cap changes")
    show.add_argument("--path", required=True, help="the store file")
    show.add_argument("--dataset", help="refuse a store of another dataset")
    show.add_argument("--json", action="store_true", help="print JSON (exact epsilon as fraction strings)")


def _budget(args) -> int:
    import json

    from dp_spark.jobs import budget_store
    from dp_spark.core.privacy import as_epsilon

    if args.action == "show":
        info = budget_store.summary(args.path, args.dataset)
        print(json.dumps(info, indent=2) if args.json else budget_store.summary_text(info))
        return EXIT_OK
    epsilon_cap = as_epsilon(args.epsilon_cap, "--epsilon-cap")
    delta_cap = None if args.delta_cap is None else budget_store.check_delta_cap(args.delta_cap, "--delta-cap")
    if args.action == "create":
        budget_store.create(args.path, args.dataset, epsilon_cap, delta_cap, args.reason)
    else:
        budget_store.set_cap(args.path, args.dataset, epsilon_cap, delta_cap, args.reason)
    print(budget_store.summary_text(budget_store.summary(args.path, args.dataset)))
    return EXIT_OK


COMMANDS = {"run": _run, "generate": _generate, "bench": _bench, "evaluate": _evaluate, "audit": _audit,
            "budget": _budget, "audit-report": _audit_report}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except BudgetExceeded as exc:
        print(f"dp-spark: budget refused: {exc}", file=sys.stderr)
        return EXIT_BUDGET
    except DpSparkError as exc:
        print(f"dp-spark: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:  # noqa: BLE001 - a scheduler needs a status, the operator the traceback
        traceback.print_exc()
        print(f"dp-spark: runtime error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_RUNTIME


if __name__ == "__main__":
    sys.exit(main())
