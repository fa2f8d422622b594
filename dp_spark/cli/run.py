"""``dp-spark run`` and ``dp-spark generate``: a job from its config, and synthetic datasets."""

from __future__ import annotations

import contextlib
import io
import signal
import threading

from dp_spark.cli import spark_args
from dp_spark.cli.exits import EXIT_INPUT, EXIT_OK, error_fields, status_of, to_stderr
from dp_spark.errors import DpSparkError, Interrupted


def _write_diagnostics(path: str, result) -> None:
    """The run's raw diagnostics as JSON at ``path`` (local), for the operator alone."""
    import json
    import os

    text = json.dumps(result.diagnostics, indent=2, default=str)
    # Readable by the owner only: it holds raw figures.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text + "\n")


def _check_outside_release(path: str, output: str) -> None:
    """Refuse a diagnostics file inside the release's output, where readers of the release
    (and catalog tables over it) would find it."""
    import os

    where = os.path.abspath(output.removeprefix("file://")) if "://" not in output.removeprefix("file://") else None
    if where is not None and os.path.abspath(path).startswith(where.rstrip(os.sep) + os.sep):
        raise DpSparkError(f"--diagnostics {path} is inside the release's output {output}: write the NOT-private "
                           "diagnostics somewhere readers of the release cannot see")


def _print_summary(result) -> None:
    import textwrap

    from dp_spark.core import accuracy
    from dp_spark.display import ABSENT_NOTE, ledger_lines, spent_text

    report = result.report
    print(f"\nOutputs in {result.output}/")
    for name, info in report["outputs"].items():
        print(f"  {name + '/':<14} {info['rows']:>9,} rows  ({', '.join(info['columns'])})")
    print(f"  {'privacy.json':<14} the privacy report and ledger")

    unit = report["privacy_unit"].split(":", 1)[0]  # the full sentence is in privacy.json
    print(f"\nPrivacy ledger (unit: {unit}; {report['neighbouring_relation']} neighbours, "
          f"{report['privacy_model']} model):")
    print("\n".join(ledger_lines(report)))
    print(f"  {spent_text(report)}{'  (FIXED SEED: for testing only, NOT private)' if report['fixed_seed'] else ''}")
    print(f"  guarantee: {report['guarantee']}")

    chosen = report["algorithm"].get("chosen")
    if chosen:
        # The figures; the estimate choice's histogram and anchors are in privacy.json.
        print("  chosen privately: " + ", ".join(f"{k} = {v:g}" for k, v in chosen.items()
                                                  if isinstance(v, (int, float))))
    if chosen and "items_selected" in chosen:
        print(f"  note: {ABSENT_NOTE}")
    if "histogram" in result.tables:
        _print_histogram(result.tables["histogram"], _halfwidth(report, "histogram", "noisy_count"))
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
        plus = _halfwidth(report, "location_entropy", "noisy_entropy")
        for row in table[published].nlargest(10, "noisy_entropy").itertuples(index=False):
            print(f"  location {row.location_id:<9} {row.noisy_entropy:8.3f}{plus}")
        return
    if "item_means" in result.tables:
        _print_means(result)
        return
    if "groups" in result.tables:
        _print_groups(result)
        return
    top = _top_items(result, 10)
    plus = _halfwidth(report, "item_counts", "noisy_count")
    print("\nTop-10 items by noisy count" + (" (± the 95% half-width of the noise alone)" if plus else "") + ":")
    for rank, row in enumerate(top.itertuples(index=False), 1):
        title = result.items.titles.get(int(row.item_id), "") if result.items.titles else ""  # ids may be strings
        count = f"{row.noisy_count:>11,.1f}" if isinstance(row.noisy_count, float) else f"{row.noisy_count:>9,}"
        print(f"  {rank:>2}. item {row.item_id:<7} {count}{plus}  {title}")
    bounding = report.get("accuracy", {}).get("bounding")
    if bounding:
        print(textwrap.fill(f"NOTE: {accuracy.bounding_text(bounding)}.", 100, initial_indent="  ",
                            subsequent_indent="    "))
    # Among n cells of noise alone, about 10 exceed the level with P(Z > level) = 10/n: a top-10 not
    # clearly above it may be there by noise alone (computed from the scale and domain size only).
    cells = result.report["outputs"]["item_counts"]["rows"]
    if not cells:  # items selected privately, and none was
        print("  (no items)")
        return
    level = _halfwidth_value(report, "item_counts", "noisy_count", alpha=min(0.999, 20 / cells), exact_only=True)
    width = _halfwidth_value(report, "item_counts", "noisy_count")
    if level is not None and len(top) and max(level, width) >= float(top["noisy_count"].min()):
        print(f"  NOTE: the noise is as large as these counts: among {cells:,} items, noise alone puts about 10 "
              f"above {max(level, width):,.4g}, so these items may be at the top by noise alone (small data); "
              "their true counts may be near zero.")


def _print_means(result) -> None:
    """The 10 items of highest noisy count with their means and intervals, and what the intervals
    cover (DP outputs only)."""
    import textwrap

    import pandas as pd

    from dp_spark.core import accuracy
    from dp_spark.display import interval_level

    table = _read_back(result, "item_means")
    on_driver = isinstance(table, pd.DataFrame)
    given = int(table["mean"].notna().sum()) if on_driver else table.where(table["mean"].isNotNull()).count()
    rows = len(table) if on_driver else result.report["outputs"]["item_means"]["rows"]
    level = interval_level(result.report)
    print(f"\n{given:,} of {rows:,} items have a mean; the 10 of highest noisy count, with each mean's {level}% "
          "interval:")
    for row in _top_items(result, 10, "item_means").itertuples(index=False):
        title = result.items.titles.get(int(row.item_id), "") if result.items.titles else ""
        mean = "no mean" if pd.isna(row.mean) else \
            f"mean {row.mean:6.3f} [{row.mean_low:.3f}, {row.mean_high:.3f}]"
        print(f"  item {row.item_id:<7} count {row.noisy_count:>7,}  {mean}  {title}")
    bounding = result.report.get("accuracy", {}).get("bounding")
    if bounding:
        print(textwrap.fill(f"NOTE: {accuracy.bounding_text(bounding)}.", 100, initial_indent="  ",
                            subsequent_indent="    "))


def _print_groups(result) -> None:
    """An aggregation's 10 groups of highest noisy count (of highest noisy users, else the first
    10), with their metrics: DP outputs only."""
    import pandas as pd

    table = result.tables["groups"]
    by = next((c for c in ("count", "users") if c in table.columns), None)
    shown = table.sort_values(by, ascending=False, kind="stable").head(10) if by else table.head(10)
    columns = [c for c in table.columns if not c.endswith("_halfwidth")]
    print(f"\n{len(table):,} groups; " + (f"the 10 of highest noisy {by}:" if by else "the first 10:"))
    with pd.option_context("display.width", 120, "display.max_columns", 20, "display.float_format", "{:.4g}".format):
        print(shown[columns].to_string(index=False))


def _read_back(result, name: str):
    """A released table as pandas, or, released on the executors, what was written (a Spark
    DataFrame): read back rather than drawn again."""
    import pandas as pd

    table = result.tables[name]
    if isinstance(table, pd.DataFrame):
        return table
    return table.sparkSession.read.parquet(f"{result.output.rstrip('/')}/{name}")


def _top_items(result, n: int, name: str = "item_counts"):
    """The n items of highest noisy count (ties by id), as pandas."""
    import pandas as pd
    from pyspark.sql import functions as F

    table = _read_back(result, name)
    if isinstance(table, pd.DataFrame):
        return table.sort_values(["noisy_count", "item_id"], ascending=[False, True]).head(n)
    return table.orderBy(F.desc("noisy_count"), F.asc("item_id")).limit(n).toPandas()


def _halfwidth_value(report: dict, table: str, column: str, alpha: float = 0.05,
                     exact_only: bool = False) -> float | None:
    """The (1 − alpha) half-width of a column's noise, from privacy.json's accuracy section; for
    DPSense, the exact one at its privately chosen θ (and α), which the report publishes."""
    from dp_spark.core import accuracy

    noise = report.get("accuracy", {}).get("tables", {}).get(table, {}).get(column)
    if not noise or noise["ci95_halfwidth"] is None:
        return None
    algorithm = report["algorithm"]
    dpsense = algorithm["name"] in ("dpsense", "dpsense_s")
    if exact_only and noise["kind"] != "exact" and not dpsense:
        return None
    if dpsense and algorithm.get("chosen"):
        from fractions import Fraction

        from dp_spark.families.dpsense.family import DPSenseParams, accuracy_at

        params = DPSenseParams(algorithm["name"], algorithm["parameters"]["theta_max"],
                               algorithm["parameters"]["limit"])
        split = {k: Fraction(v).limit_denominator(10**9) for k, v in algorithm["epsilon_split"].items()}
        chosen = algorithm["chosen"]
        return accuracy_at(params, split, chosen["theta"], chosen["alpha"], alpha).ci_halfwidth
    if alpha != 0.05:
        if not noise["distribution"].startswith("discrete Laplace") or "divided" in noise["distribution"]:
            return None  # the scale of an averaged noise (ALPA's) is not one of integer noise
        return accuracy.discrete_laplace_halfwidth(noise["scale"], alpha)  # counts: integer noise
    return noise["ci95_halfwidth"]


def _halfwidth(report: dict, table: str, column: str) -> str:
    """" ± h" to print beside a noisy value ("≤" where h only bounds the noise), or ""."""
    width = _halfwidth_value(report, table, column)
    if width is None:
        return ""
    kind = report["accuracy"]["tables"][table][column]["kind"]
    if report["algorithm"]["name"] in ("dpsense", "dpsense_s"):
        kind = "exact"  # at the chosen θ
    return f" ±{_KIND_SIGN.get(kind, '')}{width:,.4g}"


_KIND_SIGN = {"upper_bound": "≤", "lower_bound": "≥", "post_processed": "≈"}


def _print_histogram(table, plus: str = "", shown: int = 40) -> None:
    print(f"\nNoisy histogram ({len(table):,} bins{f'; the first {shown} shown' if len(table) > shown else ''}"
          + ("; ± the 95% half-width of the noise alone" if plus else "") + "):")
    for row in table.head(shown).itertuples(index=False):
        count = f"{row.noisy_count:>11,.1f}" if isinstance(row.noisy_count, float) else f"{row.noisy_count:>9,}"
        print(f"  {row.bin:>12} {count}{plus}")


@contextlib.contextmanager
def signals_interrupt(signals=(signal.SIGTERM, signal.SIGINT)):
    """While the block runs, SIGTERM and SIGINT raise ``Interrupted`` in the main thread.

    What schedulers send becomes an exception that unwinds like any failure: staging removed,
    the output's lock released, the budget store's run marked failed, the ``end`` event logged.
    Only the first signal raises; later ones are ignored so that the clean-up can finish (a
    scheduler's SIGKILL after its grace period still ends it). Outside the main thread, where
    Python cannot handle signals, the block runs with the handlers as they are.

    Yields ``arm``, which installs the handlers again: call it after starting Spark, because a
    classic session puts its own on SIGINT (it cancels the session's jobs, then raises
    KeyboardInterrupt). Ours calls such a handler first, for either signal, so that Spark jobs in
    flight are cancelled, then raises ``Interrupted``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    received = []
    installed_since = {}  # handlers others installed during the block (Spark's), called first

    def interrupt(signum, frame):
        if received:
            return
        received.append(signum)
        for handler in set(installed_since.values()):
            with contextlib.suppress(BaseException):  # it raises KeyboardInterrupt once it has cancelled
                handler(signum, frame)
        raise Interrupted(signum)

    def arm():
        for signum in signals:
            current = signal.getsignal(signum)
            if callable(current) and current not in (interrupt, previous[signum]):
                installed_since[signum] = current
            signal.signal(signum, interrupt)

    previous = {signum: signal.getsignal(signum) for signum in signals}
    arm()
    try:
        yield arm
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run(args) -> int:
    from dp_spark.core.progress import Progress

    progress = Progress(log_format=args.log_format, diagnostics=getattr(args, "diagnostics", None) is not None)
    progress.context(config=args.config)
    # JSON mode: Python's warnings too are events, also while summing up.
    with progress.python_logs(), signals_interrupt() as arm_signals:
        return _run_and_end(args, progress, arm_signals)


def _run_and_end(args, progress, arm_signals) -> int:
    try:
        result = _run_job(args, progress, arm_signals)
    except BaseException as exc:
        status, code = status_of(exc)
        progress.end(status, code, **error_fields(exc))
        if progress.json and isinstance(exc, (Exception, Interrupted, KeyboardInterrupt)):
            return code  # said in the end event; more text on stderr would break the JSON lines
        raise
    if getattr(args, "diagnostics", None) and result.diagnostics is not None:
        _write_diagnostics(args.diagnostics, result)
    progress.end(result.status, EXIT_OK, output=result.output,
                 epsilon_spent=0 if result.status == "unchanged" else result.report.get("epsilon_spent"))
    if result.status == "unchanged":
        print(f"The release for run date {result.report.get('run', {}).get('run_date')} already exists: "
              f"{result.output}/ (nothing done, no budget spent; --force replaces it)")
    else:
        _print_summary(result)
    return EXIT_OK


def _run_job(args, progress, arm_signals=lambda: None):
    from dataclasses import replace

    from dp_spark.io import spark_channels
    from dp_spark.io.session import get_session
    from dp_spark.jobs.config import load_config, run_date
    from dp_spark.jobs.runner import check_before_spark, existing_release, plan_budget, run_job

    with progress.stage("config"):
        cfg = load_config(args.config, args.overrides)
        if args.run_date is not None:
            cfg = replace(cfg, run_date=run_date(args.run_date))
        if args.force and cfg.run_date is None:
            raise DpSparkError("--force only applies to a run with a run date (--run-date or run_date)")
        plan_budget(cfg)  # fail on a bad split, or a release too large, before starting Spark
        check_before_spark(cfg)
        if getattr(args, "diagnostics", None):
            _check_outside_release(args.diagnostics, cfg.output)
    progress.context(job=cfg.algorithm, run_date=cfg.run_date)
    if not args.force:
        unchanged = existing_release(cfg, progress)  # a retried run answers without starting Spark
        if unchanged is not None:
            return unchanged
    with progress.stage("spark"):
        spark = get_session(spark_args.master_of(args), cfg.spark, progress_bar=False if progress.json else None,
                            jvm_stderr=progress.spark_log if progress.json else None)
        arm_signals()  # again: a classic session has put its own handler on SIGINT
        spark_channels.announce(spark, progress)  # the UI or event log on: one line, from the settings alone
    return run_job(cfg, spark, progress, force=args.force)


@contextlib.contextmanager
def json_usage_errors(argv: list[str]):
    """With ``--log-format json`` among the arguments, a usage error (which argparse prints as
    text, then exits 2) becomes the run's one JSON line, an ``end`` event."""
    if not _asks_for_json(argv):
        yield
        return
    from dp_spark.core.progress import Progress

    usage = io.StringIO()
    try:
        with contextlib.redirect_stderr(usage):
            yield
    except SystemExit as exc:
        if exc.code not in (0, None):
            lines = usage.getvalue().strip().splitlines() or ["invalid arguments"]
            Progress(log_format="json").end("bad_input", EXIT_INPUT, error=lines[-1])
        raise


def _asks_for_json(argv: list[str]) -> bool:
    pairs = zip(argv, argv[1:])
    return "--log-format=json" in argv or any(a == "--log-format" and b == "json" for a, b in pairs)


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
