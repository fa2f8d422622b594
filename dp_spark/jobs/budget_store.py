"""A dataset's privacy budget across scheduled runs: a JSON file that every run appends to.

Sequential composition (specification §1.5) holds across runs as well as within one: every
run reads the same users, so the dataset's total loss is the sum of what all runs spent. The
store keeps that sum honest:

- The cap (ε and δ) lives in the store. It is fixed when the store is created (by
  ``dp-spark budget create``, or by the first run that uses a new store, with its config's caps)
  and changes only through ``dp-spark budget set-cap``, an operator action logged in the store
  with its time, old and new caps, reason and user. A run never changes it: a run whose config
  names a higher cap is refused; a lower one is a stricter limit for that run only. A cap that
  each run's config could restate would be no cap at all.
- A run is charged its whole budget (the job's ``privacy.epsilon`` and δ) **before** it reads
  data or draws noise. A run that then crashes, fails or is killed stays charged: whether noise
  was drawn cannot be known afterwards, so the store assumes it was (conservative).
- A run whose charge would take the total past the cap is refused (``BudgetRefused``) and
  nothing is written to the store.
- Every change rewrites the whole file through a temporary file and an atomic rename, under an
  exclusive lock on a sidecar ``.lock`` file: a reader or a killed writer sees the old file or
  the new one, never half of one. The store is a local (or POSIX-shared) file.

Stores written before the cap was stored (format 1) hold no cap: runs against them are refused
until an operator adopts one with ``dp-spark budget set-cap`` (never the next config's cap,
which is what the old format trusted).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import getpass
import json
import math
import os
import uuid
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from dp_spark.core.accounting import as_epsilon
from dp_spark.core.composition import SEQUENTIAL, ZCDP, Charge, Guarantee, check_composition, guarantee
from dp_spark.errors import BudgetExceeded, ConfigError, Interrupted, PreflightError

FORMAT = "dp-spark budget store 2"  # the caps are stored in the file
LEGACY_FORMAT = "dp-spark budget store 1"  # no stored cap: each run applied its own config's


class BudgetRefused(BudgetExceeded):
    """The run would take the dataset's cumulative spend past its cap, or asks for a higher cap."""


@dataclass(frozen=True)
class StoreSpec:
    """A run's view of the store. ``epsilon_cap``/``delta_cap`` are the config's caps: they create
    a new store, and on an existing store they may only be at or below the stored caps (None: use
    the stored ones)."""

    path: str
    dataset: str
    epsilon_cap: Fraction | None = None
    delta_cap: float | None = None
    composition: str | None = None  # creates a new store with it; an existing store's must match


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _user() -> str | None:
    """Who is acting, as the environment names them (LOGNAME, USER, ... or the password entry)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def number(value: Fraction) -> str:
    """An exact ε for people: 2.5, or 1/3 (~0.333333) when a short decimal would round it."""
    text = f"{float(value):.12g}"
    return text if Fraction(text) == value else f"{value} (~{float(value):.6g})"


def composition_of(state: dict) -> str:
    """The store's rule: "sequential" unless it was created (or set) with "zcdp"."""
    return state.get("composition", SEQUENTIAL)


def check_delta_cap(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ConfigError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _load(path: Path, dataset: str | None) -> dict | None:
    """The store's state, or None when there is no store at ``path``."""
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"budget store {str(path)!r} cannot be read: {exc}") from None
    if (not isinstance(state, dict) or state.get("format") not in (FORMAT, LEGACY_FORMAT)
            or not isinstance(state.get("runs"), list)):
        raise ConfigError(f"budget store {str(path)!r} is not a dp-spark budget store")
    if dataset is not None and state.get("dataset") != dataset:
        raise ConfigError(f"budget store {str(path)!r} belongs to dataset {state.get('dataset')!r}, "
                          f"not {dataset!r}")
    if state["format"] == FORMAT:
        try:
            as_epsilon(state.get("epsilon_cap"), "epsilon_cap", text=True)
            check_delta_cap(state.get("delta_cap"), "delta_cap")
            check_composition(composition_of(state), "composition", state.get("delta_cap"))
        except ConfigError as exc:
            raise ConfigError(f"budget store {str(path)!r} has a damaged cap: {exc}") from None
    return state


def _save(path: Path, state: dict) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        json.dump(state, out, indent=2)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power cut
    finally:
        os.close(directory)


def _set_cap_command(path: str, dataset: str, epsilon_cap: object = "X") -> str:
    return (f"dp-spark budget set-cap --path {path} --dataset {dataset} --epsilon-cap {epsilon_cap} "
            "--reason \"...\"")


def caps(state: dict, path: str = "") -> tuple[Fraction, float]:
    """The stored (ε, δ) caps; a legacy store has none and is refused until one is adopted."""
    if state["format"] != FORMAT:
        checked = sorted({run.get("epsilon_cap") for run in state["runs"]} - {None})
        seen = f" (its runs were checked against their own configs' caps: {', '.join(f'{c:g}' for c in checked)})"
        raise ConfigError(
            f"budget store {path!r} was written by an older dp-spark and stores no cap{seen if checked else ''}; "
            f"a run no longer takes the cap from its config. Adopt one first: "
            f"{_set_cap_command(path, state['dataset'])}")
    return Fraction(state["epsilon_cap"]), float(state["delta_cap"])


def totals(state: dict) -> tuple[Fraction, float]:
    """(ε, δ) charged so far by sequential composition: every run counts, whatever its status."""
    epsilon = sum((Fraction(run["epsilon_exact"]) for run in state["runs"]), Fraction(0))
    return epsilon, math.fsum(run["delta"] for run in state["runs"])


def charge_of(run: dict) -> Charge:
    """A stored run as a charge: a zCDP run stores its ρ and the δ it spent outside
    zCDP; a pure run, and every run stored before, costs ε²/2 with its δ outside."""
    if "rho_exact" in run:
        return Charge(Fraction(run["epsilon_exact"]), float(run["delta"]), Fraction(run["rho_exact"]),
                      float(run["delta_outside_zcdp"]))
    return Charge.pure(Fraction(run["epsilon_exact"]), float(run["delta"]))


def running(state: dict, delta: float) -> Guarantee:
    """The dataset's guarantee from every charged run, its zCDP statement at δ = ``delta``."""
    return guarantee([charge_of(run) for run in state["runs"]], delta)


def _cap_entry(action: str, old: tuple | None, new: tuple[Fraction, float], reason: str,
               composition: tuple[str, str] | None = None) -> dict:
    before, after = composition or (SEQUENTIAL, SEQUENTIAL)
    changed = ({"composition_before": before} if before != after else {}) | (
        {"composition": after} if before != after or after != SEQUENTIAL else {})
    return {"utc": _now(), "action": action, "user": _user(), "reason": reason,
            "epsilon_cap_before": None if old is None else str(old[0]), "epsilon_cap": str(new[0]),
            "delta_cap_before": None if old is None else old[1], "delta_cap": new[1], **changed}


def _new_state(dataset: str, epsilon_cap: Fraction, delta_cap: float, reason: str,
               composition: str = SEQUENTIAL) -> dict:
    # A sequential store is written as before (no "composition" key): older readers read it as ever.
    rule = {} if composition == SEQUENTIAL else {"composition": composition}
    return {"format": FORMAT, "dataset": dataset, "epsilon_cap": str(epsilon_cap), "delta_cap": delta_cap, **rule,
            "cap_log": [_cap_entry("create", None, (epsilon_cap, delta_cap), reason, (composition, composition))],
            "runs": []}


def read(spec: StoreSpec) -> dict | None:
    """The store's state (None when it does not exist yet)."""
    path = Path(spec.path)
    with _locked(path):
        return _load(path, spec.dataset)


def create(path: str, dataset: str, epsilon_cap: Fraction, delta_cap: float = 0.0,
           reason: str = "dp-spark budget create", composition: str = SEQUENTIAL) -> dict:
    """A new, empty store with its caps and composition rule; refuses to replace an existing one."""
    check_composition(composition, "composition", delta_cap)
    where = Path(path)
    with _locked(where):
        if where.exists():
            raise ConfigError(f"a budget store already exists at {path!r}; its cap changes only with "
                              f"{_set_cap_command(path, dataset)}")
        state = _new_state(dataset, epsilon_cap, delta_cap, reason, composition)
        _save(where, state)
    return state


def set_cap(path: str, dataset: str, epsilon_cap: Fraction, delta_cap: float | None, reason: str,
            composition: str | None = None) -> dict:
    """The operator's change of the caps (and of the composition rule), logged in the store; never
    below what is already spent by the new rule.

    ``delta_cap`` None keeps the stored δ cap (0 when a legacy store adopts its first cap);
    ``composition`` None keeps the stored rule.
    """
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError("a cap change needs a reason (--reason \"...\"): it is kept in the store's log")
    where = Path(path)
    missing = ConfigError(f"no budget store at {path!r}; create one with dp-spark budget create --path {path} "
                          f"--dataset {dataset} --epsilon-cap X")
    if not where.exists():
        raise missing  # before locking: a mistyped path leaves no directory or lock file behind
    with _locked(where):
        state = _load(where, dataset)
        if state is None:
            raise missing
        old = caps(state, path) if state["format"] == FORMAT else None
        new = (epsilon_cap, (old[1] if old else 0.0) if delta_cap is None else delta_cap)
        rules = (composition_of(state), composition_of(state) if composition is None else composition)
        check_composition(rules[1], "composition", new[1])
        spent = running(state, new[1])
        if not spent.within(*new, rules[1]):
            raise ConfigError(
                f"dataset {dataset!r} has already spent epsilon {number(spent.epsilon_sequential)} and delta "
                f"{spent.delta_sequential:g}" + ("" if spent.epsilon_zcdp is None else
                                                f" (by zCDP composition epsilon {spent.epsilon_zcdp:.6g} at delta "
                                                f"{new[1]:g})")
                + f"; a cap of epsilon {number(new[0])}, delta {new[1]:g} would be below it (spent budget cannot be "
                "taken back)")
        action = "set-cap" if old else "adopt cap (store written by an older dp-spark, which stored none)"
        rule = {} if rules[1] == SEQUENTIAL else {"composition": rules[1]}
        state = {"format": FORMAT, "dataset": state["dataset"], "epsilon_cap": str(new[0]), "delta_cap": new[1],
                 **rule, "cap_log": [*state.get("cap_log", []), _cap_entry(action, old, new, reason.strip(), rules)],
                 "runs": state["runs"]}
        _save(where, state)
    return state


def _limits(state: dict, spec: StoreSpec) -> tuple[Fraction, float]:
    """The caps this run is checked against: the stored ones, or the config's where it is lower.

    A config cap above the stored one is refused: raising a cap is the operator's logged action.
    """
    stored_epsilon, stored_delta = caps(state, spec.path)
    if spec.epsilon_cap is not None and spec.epsilon_cap > stored_epsilon:
        raise BudgetRefused(
            f"the config's budget_store.epsilon_cap {number(spec.epsilon_cap)} is above the cap stored in "
            f"{spec.path} for dataset {spec.dataset!r} (epsilon {number(stored_epsilon)}); a run never raises the "
            f"cap. An operator raises it with {_set_cap_command(spec.path, spec.dataset, spec.epsilon_cap)}; or "
            f"set the config's epsilon_cap to {number(stored_epsilon)} or less, or leave it out")
    if spec.delta_cap is not None and spec.delta_cap > stored_delta:
        raise BudgetRefused(
            f"the config's budget_store.delta_cap {spec.delta_cap:g} is above the cap stored in {spec.path} for "
            f"dataset {spec.dataset!r} (delta {stored_delta:g}); a run never raises the cap. An operator raises it "
            f"with {_set_cap_command(spec.path, spec.dataset, stored_epsilon)} --delta-cap {spec.delta_cap:g}; or "
            f"set the config's delta_cap to {stored_delta:g} or less, or leave it out")
    stored_rule = composition_of(state)
    if spec.composition is not None and spec.composition != stored_rule:
        raise BudgetRefused(
            f"the config's budget_store.composition {spec.composition!r} is not the rule stored in {spec.path} for "
            f"dataset {spec.dataset!r} ({stored_rule!r}); a run never changes it. An operator changes it with "
            f"{_set_cap_command(spec.path, spec.dataset, stored_epsilon)} --composition {spec.composition}")
    return (stored_epsilon if spec.epsilon_cap is None else spec.epsilon_cap,
            stored_delta if spec.delta_cap is None else spec.delta_cap)


def check_reachable(spec: StoreSpec) -> None:
    """Refuse, before a run is charged, a store this process cannot write: its directory (or the
    nearest existing ancestor, where a first run would create it) must be a directory in which
    a file can be created, and an existing store must be a readable dp-spark store of this
    dataset. Probes with a hidden file that is removed at once; locks nothing."""
    path = Path(spec.path)
    if path.exists() and not path.is_file():
        raise PreflightError(f"budget store {spec.path!r} is not a file")
    where = path.parent
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        raise PreflightError(f"budget store {spec.path!r} is unreachable: {str(where)!r} is not a directory")
    probe = where / f".{path.name}.probe-{uuid.uuid4().hex}"
    try:
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as exc:
        raise PreflightError(f"budget store {spec.path!r} is unreachable: cannot create a file in {str(where)!r}: "
                             f"{exc.strerror or exc}") from None
    if path.exists():
        _load(path, spec.dataset)  # unreadable, not a store, another dataset's: ConfigError now


def charge(spec: StoreSpec, epsilon: Fraction, delta: float, run: dict, cost: Charge | None = None) -> dict:
    """Charge a run before it reads data; raises BudgetRefused over the cap.

    ``epsilon``, ``delta``: the run's (ε, δ) statement; ``cost``: its charge in approximate zCDP,
    for a zCDP run (None: a pure or (ε, δ) run, ρ = ε²/2). The run fits when, with it, the dataset's
    statement by the store's composition rule is within the cap (core.composition).

    A store that does not exist is created with the config's caps (a config without
    ``epsilon_cap`` cannot create one). Returns the run's id and the dataset's totals including
    this charge (for the privacy report).
    """
    cost = cost or Charge.pure(epsilon, delta)
    path = Path(spec.path)
    with _locked(path):
        state = _load(path, spec.dataset)
        if state is None:
            if spec.epsilon_cap is None:
                raise ConfigError(
                    f"no budget store at {spec.path!r}: create it with dp-spark budget create --path {spec.path} "
                    f"--dataset {spec.dataset} --epsilon-cap X, or give budget_store.epsilon_cap in the config "
                    "(the first run then creates it with that cap)")
            state = _new_state(spec.dataset, spec.epsilon_cap, spec.delta_cap or 0.0,
                               "created by the first run that used the store, with its config's caps",
                               check_composition(spec.composition or SEQUENTIAL, "budget_store.composition",
                                                 spec.delta_cap))
        stored_epsilon, stored_delta = caps(state, spec.path)
        epsilon_limit, delta_limit = _limits(state, spec)
        spent_epsilon, spent_delta = totals(state)
        rule = composition_of(state)
        after = guarantee([charge_of(old) for old in state["runs"]] + [cost], delta_limit)
        if not after.within(epsilon_limit, delta_limit, rule):
            stricter = " (this run's config sets a lower limit than the store's cap)"
            if rule == ZCDP:
                before = running(state, delta_limit)
                raise BudgetRefused(
                    f"dataset {spec.dataset!r} has spent rho {float(before.rho):.6g} by zCDP composition "
                    f"({len(state['runs'])} runs in {spec.path}): with this run's rho {float(cost.rho):.6g} it would "
                    f"be epsilon {after.epsilon_zcdp if after.epsilon_zcdp is not None else float('inf'):.6g} at delta "
                    f"{delta_limit:g}, above its cap of epsilon {number(epsilon_limit)}"
                    f"{stricter if (epsilon_limit, delta_limit) != (stored_epsilon, stored_delta) else ''}")
            if spent_epsilon + epsilon > epsilon_limit:
                raise BudgetRefused(
                    f"dataset {spec.dataset!r} has spent epsilon {number(spent_epsilon)} of its cap "
                    f"{number(epsilon_limit)}{stricter if epsilon_limit < stored_epsilon else ''} "
                    f"({len(state['runs'])} runs in {spec.path}); this run needs {number(epsilon)} more")
            raise BudgetRefused(
                f"dataset {spec.dataset!r} has spent delta {spent_delta:g} of its cap {delta_limit:g}"
                f"{stricter if delta_limit < stored_delta else ''}; this run needs {delta:g} more"
                + (", and the deltas add up exactly to a little more than the cap (a double such as 1e-09 lies above "
                   "its decimal; docs/scheduled_runs.md): give the cap a little room"  # %g would show spent = cap
                   if after.delta_sequential <= delta_limit else "")
                + " (an operator raises the stored cap with dp-spark budget set-cap ... --delta-cap Y)")
        run_id = uuid.uuid4().hex
        zcdp_cost = {} if cost == Charge.pure(epsilon, delta) else {
            "rho": float(cost.rho), "rho_exact": str(cost.rho), "delta_outside_zcdp": cost.delta_outside}
        state["runs"].append({"run_id": run_id, **run, "epsilon": float(epsilon), "epsilon_exact": str(epsilon),
                              "delta": delta, **zcdp_cost, "epsilon_cap": float(epsilon_limit),
                              "epsilon_cap_exact": str(epsilon_limit), "delta_cap": delta_limit,
                              "status": "charged", "charged_utc": _now()})
        _save(path, state)
    return {"path": spec.path, "dataset": spec.dataset, "run_id": run_id, "runs": len(state["runs"]),
            "epsilon_cap": float(epsilon_limit), "epsilon_cap_stored": float(stored_epsilon),
            "epsilon_charged_total": float(spent_epsilon + epsilon),
            "delta_cap": delta_limit, "delta_charged_total": spent_delta + delta,
            **({"composition": ZCDP, "rho_charged_total": float(after.rho), "epsilon_running": after.epsilon_zcdp}
               if rule == ZCDP else {})}


def last_release_seconds(spec: StoreSpec, algorithm: str, output: str) -> float | None:
    """How long the store's last released run of ``algorithm`` into ``output`` (any run date under
    it) took from its charge to its record; None without one. Progress's estimate for a new run."""
    base = output.rstrip("/")
    try:
        with _locked(Path(spec.path)):
            state = _load(Path(spec.path), spec.dataset)
        for run in reversed(state["runs"] if state else []):
            where = str(run.get("output") or "")
            if (run.get("status") == "released" and run.get("algorithm") == algorithm and run.get("finished_utc")
                    and (where == base or where.startswith(base + "/"))):
                took = dt.datetime.fromisoformat(run["finished_utc"]) - dt.datetime.fromisoformat(run["charged_utc"])
                return took.total_seconds()
    except (OSError, ValueError, KeyError, TypeError, ConfigError):  # only an estimate: never fail a run for it
        return None
    return None


def stored_error(exc: BaseException) -> str:
    """What the store keeps of a run's failure: the kind, never the message. Messages of errors
    found while reading can quote the data (a raw value, a count of bad rows), and the store is a
    long-lived file that ``dp-spark budget show`` prints; the message is in the run's own log.
    A signal and an operating-system error name no data, so theirs are kept."""
    if isinstance(exc, Interrupted):
        return f"Interrupted: {exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return f"{type(exc).__name__} (the message is in the run's log; not stored, as it may quote the data)"


def finish(spec: StoreSpec, run_id: str, status: str, **details) -> None:
    """Record how a charged run ended ("released", "failed" or "refused" by a guard); the charge stays
    either way."""
    path = Path(spec.path)
    with _locked(path):
        state = _load(path, spec.dataset)
        for run in state["runs"] if state else []:
            if run["run_id"] == run_id:
                run.update(status=status, finished_utc=_now(), **details)
                break
        else:
            raise ConfigError(f"run {run_id} is not in the budget store {spec.path!r}")
        _save(path, state)


def summary(path: str, dataset: str | None = None) -> dict:
    """What ``dp-spark budget show --json`` prints: caps, spent, remaining, the runs, the cap log.

    ε values are exact fraction strings (with a float beside them); a legacy store has no caps.
    """
    where = Path(path)
    state = None
    if where.exists():  # before locking: a mistyped path leaves no directory or lock file behind
        with _locked(where):
            state = _load(where, dataset)
    if state is None:
        raise ConfigError(f"no budget store at {path!r}")
    spent_epsilon, spent_delta = totals(state)
    legacy = state["format"] != FORMAT
    cap_epsilon, cap_delta = (None, None) if legacy else caps(state, path)
    epsilon = {"cap": None if legacy else str(cap_epsilon), "spent": str(spent_epsilon),
               "remaining": None if legacy else str(cap_epsilon - spent_epsilon)}
    g = running(state, cap_delta or 0.0)
    rule = composition_of(state)
    zcdp_summary = {"rho_spent": str(g.rho), "rho_spent_float": float(g.rho), "delta_outside_zcdp": g.delta_outside,
                    "epsilon_at_cap_delta": g.epsilon_zcdp}
    return {"path": path, "dataset": state["dataset"], "format": state["format"], "legacy_no_cap": legacy,
            "epsilon": epsilon | {f"{key}_float": None if value is None else float(Fraction(value))
                                  for key, value in epsilon.items()},
            "delta": {"cap": cap_delta, "spent": spent_delta,
                      "remaining": None if legacy else max(cap_delta - spent_delta, 0.0)},
            # The store's rule (core.composition): a run fits when the statement of that rule stays
            # within the cap. Under "zcdp", the runs' rho, stated as epsilon at the delta cap.
            "composition": rule,
            **({"zcdp": zcdp_summary} if rule == ZCDP else {}),
            "runs": state["runs"], "cap_log": state.get("cap_log", [])}


def summary_text(info: dict) -> str:
    """``dp-spark budget show`` for people."""
    eps, delta = info["epsilon"], info["delta"]
    lines = [f"budget store {info['path']} (dataset {info['dataset']!r})"]
    if info["legacy_no_cap"]:
        lines.append(f"  NO CAP STORED (written by an older dp-spark): runs are refused until an operator adopts "
                     f"one with {_set_cap_command(info['path'], info['dataset'])}")
        lines.append(f"  epsilon: spent {number(Fraction(eps['spent']))}")
        lines.append(f"  delta:   spent {delta['spent']:g}")
    elif info.get("composition") == ZCDP:
        running_zcdp = info["zcdp"]
        stated = running_zcdp["epsilon_at_cap_delta"]
        shown = "-" if stated is None else f"{stated:.6g}"
        lines.append(f"  caps:    epsilon {number(Fraction(eps['cap']))}, delta {delta['cap']:g}; zCDP composition "
                     "(the store's rule): a run fits while the runs' rho, stated at the delta cap, stays within "
                     "the cap")
        lines.append(f"  zCDP:    rho spent {running_zcdp['rho_spent_float']:.6g}: the runs so far are "
                     f"(epsilon {shown}, delta {delta['cap']:g})-DP")
        lines.append(f"  (the runs' own statements sum to epsilon {number(Fraction(eps['spent']))}, delta "
                     f"{delta['spent']:g}; under zCDP composition that sum is not what the cap bounds)")
    else:
        lines.append(f"  epsilon: cap {number(Fraction(eps['cap']))}, spent {number(Fraction(eps['spent']))}, "
                     f"remaining {number(Fraction(eps['remaining']))}")
        lines.append(f"  delta:   cap {delta['cap']:g}, spent {delta['spent']:g}, remaining {delta['remaining']:g}")
    lines.append(f"\nruns ({len(info['runs'])}; every charge counts, whatever its status):")
    for run in info["runs"]:
        lines.append(f"  {run.get('charged_utc', '?'):<25} {run.get('status', '?'):<9} "
                     f"epsilon {number(Fraction(run['epsilon_exact'])):<10} delta {run['delta']:<8g} "
                     + (f"rho {run['rho']:<10.4g} " if "rho" in run else "")
                     + f"{run.get('algorithm') or '-':<14} run_date {run.get('run_date') or '-':<10} "
                     f"run {run['run_id'][:8]}{' (forced)' if run.get('forced') else ''}")
    lines.append(f"\ncap changes ({len(info['cap_log'])}):")
    for change in info["cap_log"]:
        before = ("none" if change["epsilon_cap_before"] is None else
                  f"epsilon {number(Fraction(change['epsilon_cap_before']))}, delta {change['delta_cap_before']:g}")
        rule = f", composition {change['composition']}" if "composition" in change else ""
        lines.append(f"  {change['utc']:<25} {change['action']}: {before} -> epsilon "
                     f"{number(Fraction(change['epsilon_cap']))}, delta {change['delta_cap']:g}{rule} "
                     f"by {change.get('user') or 'unknown user'}: {change['reason']}")
    return "\n".join(lines)
