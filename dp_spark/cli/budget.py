"""``dp-spark budget create | set-cap | show``: a dataset's budget store."""

from __future__ import annotations

from dp_spark.cli.exits import EXIT_OK


def add_parser(commands) -> None:
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
    create.add_argument("--composition", choices=("sequential", "zcdp"), default="sequential",
                        help="how runs add up: sequential (epsilons and deltas add; the default) or zcdp (their rho "
                        "adds, stated as epsilon at the delta cap; needs --delta-cap; docs/zcdp.md)")
    set_cap.add_argument("--composition", choices=("sequential", "zcdp"),
                         help="change how runs add up (default: keep the stored rule)")
    create.add_argument("--reason", default="dp-spark budget create", help="kept in the store's log")
    set_cap.add_argument("--reason", required=True, help="why the cap changes; kept in the store's log")
    show = actions.add_parser("show", help="caps, spent, remaining, the runs and the cap changes")
    show.add_argument("--path", required=True, help="the store file")
    show.add_argument("--dataset", help="refuse a store of another dataset")
    show.add_argument("--json", action="store_true", help="print JSON (exact epsilon as fraction strings)")


def budget(args) -> int:
    import json

    from dp_spark.core.accounting import as_epsilon
    from dp_spark.jobs import budget_store

    if args.action == "show":
        info = budget_store.summary(args.path, args.dataset)
        print(json.dumps(info, indent=2) if args.json else budget_store.summary_text(info))
        return EXIT_OK
    epsilon_cap = as_epsilon(args.epsilon_cap, "--epsilon-cap", text=True)
    delta_cap = None if args.delta_cap is None else budget_store.check_delta_cap(args.delta_cap, "--delta-cap")
    if args.action == "create":
        budget_store.create(args.path, args.dataset, epsilon_cap, delta_cap, args.reason, args.composition)
    else:
        budget_store.set_cap(args.path, args.dataset, epsilon_cap, delta_cap, args.reason, args.composition)
    print(budget_store.summary_text(budget_store.summary(args.path, args.dataset)))
    return EXIT_OK
