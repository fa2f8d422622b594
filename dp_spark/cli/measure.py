"""The lab's commands: ``dp-spark bench | evaluate | audit | audit-report``. They measure and are
NOT private; they import the lab (dp_spark.lab) inside the functions only."""

from __future__ import annotations

from dp_spark.cli import spark_args
from dp_spark.cli.exits import EXIT_AUDIT, EXIT_OK, to_stderr
from dp_spark.errors import DpSparkError


def _rows_list(text: str) -> list[int]:
    try:
        rows = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise DpSparkError(f"--rows must be comma-separated integers, got {text!r}") from None
    if not rows or min(rows) < 1:
        raise DpSparkError(f"--rows must list sizes >= 1, got {text!r}")
    return rows


def bench(args) -> int:
    from dp_spark.lab import bench

    jobs = [job.strip() for job in args.jobs.split(",") if job.strip()]
    records = bench.run(_rows_list(args.rows), jobs, args.out, args.repeats, args.data_dir, args.master, to_stderr,
                        args.warmups)
    print(bench.markdown(records))
    print(f"\nwrote {args.out}/bench.json and {args.out}/machine.json")
    return 0


def audit_report(args) -> int:
    import shutil
    import tempfile

    from dp_spark.core.progress import Progress
    from dp_spark.io.session import get_session
    from dp_spark.jobs.config import load_config
    from dp_spark.jobs.runner import plan_budget
    from dp_spark.lab import report_audit

    cfg = load_config(args.config, args.overrides)
    plan_budget(cfg)  # fail on a bad split before starting Spark
    spark = get_session(spark_args.master_of(args), cfg.spark)
    workdir = args.out or tempfile.mkdtemp(prefix="dp-spark-audit-report-")
    try:
        user = args.remove_user
        if user is None:
            user, rows = report_audit.heaviest_user(cfg, spark)
            to_stderr(f"D' leaves out user {user}, who has the most rows ({rows:,}); chosen from the raw data, "
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
    # FRAPP counts the records it perturbs rather than those it read.
    rows = [side.get("rows_read", side.get("coverage", {}).get("rows_kept_by_bounding"))
            for side in reports.diagnostics]
    print(f"Rows read (NOT private, the operator's check that D' is not D): D {rows[0]}, D' {rows[1]}")
    if reports.diagnostics[0] == reports.diagnostics[1]:
        print(f"\nWARNING: D and D' read as many rows: is user {user} in the source?")
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
        to_stderr("no plots: install the 'plot' extra (pip install 'dp-spark[plot]') for PNGs")
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


def evaluate(args) -> int:
    from dp_spark.io.session import get_session
    from dp_spark.jobs.config import load_config
    from dp_spark.lab import evaluate

    cfg = load_config(args.config, args.overrides)
    evaluator = evaluate.evaluator_of(cfg)
    methods = [m.strip() for m in (args.methods or evaluator.default_methods(cfg)).split(",") if m.strip()]
    if args.m is not None and args.m < 1:
        raise DpSparkError(f"--m must be >= 1, got {args.m}")
    for method in methods:
        evaluate.method_config(cfg, method, args.m)  # refuse a bad method before Spark starts
    spark = get_session(spark_args.master_of(args), cfg.spark)
    records = evaluate.evaluate(cfg, spark, methods, args.runs, args.m, to_stderr)
    meta = {"config": args.config, "runs": args.runs, "epsilon": float(cfg.epsilon), "seed": cfg.seed,
            **evaluator.meta(cfg, args.m)}
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


def audit(args) -> int:
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
        to_stderr(f"auditing {target.name}: {target.what}")
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
