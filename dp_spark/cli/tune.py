"""``dp-spark tune CONF``: the expected item-count error of a counts job at every candidate
per-user bound, and what the private bound selection would pick. NOT PRIVATE: it reads the raw
records (:mod:`dp_spark.lab.tune`, imported inside the function like the other lab commands)."""

from __future__ import annotations

import json
from fractions import Fraction

from dp_spark.cli import spark_args
from dp_spark.cli.exits import EXIT_OK, to_stderr
from dp_spark.errors import DpSparkError


def add_parser(commands) -> None:
    tune = commands.add_parser("tune", help="NOT PRIVATE: expected item-count error of a counts config (or the "
                               "per-item mean's error of a means config) at each candidate per-user bound, from "
                               "the raw records; a bound chosen from it voids the release's guarantee unless the "
                               "data is public or disjoint from the release's (else use l = \"auto\")")
    tune.add_argument("config", help="counts job config (sra, hpa, lpa, dft, gs) or means config, e.g. "
                      "conf/demo.toml")
    tune.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="override a config key (repeatable), as for run")
    tune.add_argument("--candidates", help="comma-separated bounds to show (default: the config's candidates, "
                      "else 1,2,4,...,256)")
    tune.add_argument("--bound-share", type=Fraction, default=None,
                      help="share of epsilon the private bound selection would spend (default 1/10)")
    tune.add_argument("--json", action="store_true", help="print the result as JSON")
    spark_args.add_arguments(tune)


def _bounds(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise DpSparkError(f"--candidates must be comma-separated integers, got {text!r}") from None


def tune(args) -> int:
    from dp_spark.io.session import get_session
    from dp_spark.jobs.config import load_config
    from dp_spark.lab import tune

    cfg = load_config(args.config, args.overrides)
    share = tune.BOUND_SHARE if args.bound_share is None else args.bound_share
    if not 0 < share < 1:
        raise DpSparkError(f"--bound-share must be strictly between 0 and 1, got {share}")
    candidates = _bounds(args.candidates)
    bounds = tune.candidates_of(candidates, cfg.params)  # refuse bad candidates before Spark starts
    if cfg.algorithm not in (*tune.COUNTS_ALGORITHMS, "means"):
        raise DpSparkError(f"tune works on counts configs ({', '.join(tune.COUNTS_ALGORITHMS)}) and means configs; "
                           f"{cfg.algorithm!r} is not one")
    spark = get_session(spark_args.master_of(args), cfg.spark)
    if cfg.algorithm == "means":
        return _tune_means(args, cfg, spark, bounds)
    rows, setup = tune.run(cfg, spark, candidates, share, to_stderr)
    result = tune.report(rows, setup, share, cfg.l, args.config)
    if _printed_as_json(args, result):
        return EXIT_OK
    print(f"{args.config}: {setup.algorithm.upper()}, publisher {setup.publisher}, epsilon {float(setup.epsilon):g} "
          f"(items {float(setup.split['epsilon_items']):g}), {setup.item_cells:,} items   NOT PRIVATE")
    print(f"method: {result['method']}   NOT PRIVATE")
    selection = result["bound_selection"]
    caps = ", ".join(f"{cap}: {p:.3g}" for cap, p in selection["user_caps"].items())
    print(f"q(b), P(pick): l = \"auto\" spending {selection['share']:g} of epsilon (the mechanism at "
          f"{selection['epsilon']:g}), user cap U (P) {caps}; q(b) and Delta q = {selection['sensitivity']} at the "
          "likeliest   NOT PRIVATE")
    print(f"objective: l = \"auto\" scores {selection['objective_described']} "
          f"({cfg.params.bound_name}_objective = {json.dumps(selection['objective'])}); the MSE columns below are the "
          "item table's   NOT PRIVATE")
    print("\n".join(tune.table(rows, cfg.l)))
    top = tune.best(rows)
    configured = next((r for r in rows if r.bound == cfg.l), None)
    line = f"lowest expected MSE: bound {top.bound} ({top.expected_mse:.4g})"
    if configured is not None:
        line += f"; the config's {cfg.l}: {configured.expected_mse:.4g}"
    print(f"{line}   NOT PRIVATE")
    auto = result["auto"]
    line = (f"{cfg.params.bound_name} = \"auto\": expected MSE {auto['expected_mse']:.4g} "
            f"(over its choice: median {auto['p50']:.4g}, "
            f"90th percentile {auto['p90']:.4g}, 99th {auto['p99']:.4g}), {auto['auto_vs_best_fixed']:.3f} times the "
            f"best of these bounds fixed ({auto['best_fixed_bound']}: {auto['best_fixed_mse']:.4g})")
    if "auto_vs_configured" in auto:
        line += f", {auto['auto_vs_configured']:.3f} times the config's {cfg.l}"
    print(f"{line}   NOT PRIVATE")
    if "estimate" in result:
        estimate = result["estimate"]
        print(f"l_choice = \"estimate\" (the rows' q(b) and P(pick) are the exponential mechanism's): over "
              f"{estimate['draws']} runs of the choice, likeliest l = {estimate['likeliest']}, expected MSE "
              f"{estimate['expected_mse']:.4g}, {estimate['estimate_vs_best_fixed']:.3f} times the best bound from "
              f"{cfg.params.candidates[0]} to {cfg.params.candidates[-1]} fixed ({estimate['best_fixed_bound']}: "
              f"{estimate['best_fixed_mse']:.4g})   NOT PRIVATE")
    print(tune.NOT_PRIVATE)
    print(tune.VOIDS_THE_GUARANTEE)
    return EXIT_OK


def _printed_as_json(args, result: dict) -> bool:
    """With --json, the result as JSON (True); else the warnings a table opens with (False)."""

    from dp_spark.lab import tune

    if args.json:
        print(json.dumps(result, indent=2))
        return True
    print(tune.NOT_PRIVATE)
    print(tune.VOIDS_THE_GUARANTEE)
    return False


def _tune_means(args, cfg, spark, bounds) -> int:
    from dp_spark.lab import tune, tune_means

    rows, users, auto = tune_means.run(cfg, spark, bounds, to_stderr)
    configured = None if cfg.params.auto else cfg.params.l
    result = tune_means.report(rows, cfg.params, configured, args.config, users, auto)
    if _printed_as_json(args, result):
        return EXIT_OK
    print(f"{args.config}: means of [{cfg.params.low:g}, {cfg.params.high:g}], {cfg.params.bounding.upper()} "
          f"bounding, epsilon {float(cfg.epsilon):g}, {users:,} users   NOT PRIVATE")
    print(f"method: {result['method']}; score: mean squared error over the items with a mean at some l, an item "
          "without one counted at (range/2)^2   NOT PRIVATE")
    print("\n".join(tune_means.table(rows, configured)))
    top = tune_means.best(rows)
    print(f"lowest score: l = {top.bound} (about {top.items_with_mean:,.0f} items with a mean, error rms "
          f"{top.error_rms:.3g})"
          "   NOT PRIVATE")
    if auto:
        picks = ", ".join(f"{b}: {p:.3f}" for b, p in auto["pick_probability"].items() if p >= 0.001)
        print(f"l = \"auto\" scores {auto['objective_described']} (l_objective = {json.dumps(auto['objective'])}), "
              f"the mechanism at epsilon {auto['epsilon']:g}, Delta q {auto['sensitivity']:.4g}; P(pick) {picks}; "
              f"expected score {auto['expected_score']:.4g} at these rows, {auto['expected_score'] / top.score:.3f} "
              f"times the lowest (the choice's tenth of epsilon not counted)   NOT PRIVATE")
    print(tune.NOT_PRIVATE)
    print(tune.VOIDS_THE_GUARANTEE)
    return EXIT_OK
