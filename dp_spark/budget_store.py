"""A dataset's privacy budget across scheduled runs: a JSON file that every run appends to.

Sequential composition (ALGORITHMS.md §1.5) holds across runs as well as within one: every
run reads the same users, so the dataset's total loss is the sum of what all runs spent. The
store keeps that sum honest:

- A run is charged its whole budget (the job's ``privacy.epsilon`` and δ) **before** it reads
  data or draws noise. A run that then crashes, fails or is killed stays charged: whether noise
  was drawn cannot be known afterwards, so the store assumes it was (conservative).
- A run whose charge would take the total past the cap is refused (``BudgetRefused``) and
  nothing is written to the store.
- Every change rewrites the whole file through a temporary file and an atomic rename, under an
  exclusive lock on a sidecar ``.lock`` file: a reader or a killed writer sees the old file or
  the new one, never half of one. The store is a local (or POSIX-shared) file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import math
import os
import uuid
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from dp_spark.errors import ConfigError
from dp_spark.privacy import BudgetExceeded

FORMAT = "dp-spark budget store 1"


class BudgetRefused(BudgetExceeded):
    """The run would take the dataset's cumulative spend past its cap."""


@dataclass(frozen=True)
class StoreSpec:
    path: str
    dataset: str
    epsilon_cap: Fraction
    delta_cap: float = 0.0


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _load(path: Path, dataset: str) -> dict:
    if not path.exists():
        return {"format": FORMAT, "dataset": dataset, "runs": []}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"budget store {str(path)!r} cannot be read: {exc}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT or not isinstance(state.get("runs"), list):
        raise ConfigError(f"budget store {str(path)!r} is not a dp-spark budget store")
    if state.get("dataset") != dataset:
        raise ConfigError(f"budget store {str(path)!r} belongs to dataset {state.get('dataset')!r}, "
                          f"not {dataset!r}")
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


def totals(state: dict) -> tuple[Fraction, float]:
    """(ε, δ) charged so far: every run counts, whatever its status."""
    epsilon = sum((Fraction(run["epsilon_exact"]) for run in state["runs"]), Fraction(0))
    return epsilon, math.fsum(run["delta"] for run in state["runs"])


def read(spec: StoreSpec) -> dict:
    path = Path(spec.path)
    with _locked(path):
        return _load(path, spec.dataset)


def charge(spec: StoreSpec, epsilon: Fraction, delta: float, run: dict) -> dict:
    """Charge a run before it reads data; raises BudgetRefused over the cap.

    Returns the run's id and the dataset's totals including this charge (for the privacy report).
    """
    path = Path(spec.path)
    with _locked(path):
        state = _load(path, spec.dataset)
        spent_epsilon, spent_delta = totals(state)
        if spent_epsilon + epsilon > spec.epsilon_cap:
            raise BudgetRefused(
                f"dataset {spec.dataset!r} has spent epsilon {float(spent_epsilon):g} of its cap "
                f"{float(spec.epsilon_cap):g} ({len(state['runs'])} runs in {spec.path}); this run needs "
                f"{float(epsilon):g} more")
        if spent_delta + delta > spec.delta_cap * (1 + 1e-12):
            raise BudgetRefused(
                f"dataset {spec.dataset!r} has spent delta {spent_delta:g} of its cap {spec.delta_cap:g}; "
                f"this run needs {delta:g} more (set budget_store.delta_cap)")
        run_id = uuid.uuid4().hex
        state["runs"].append({"run_id": run_id, **run, "epsilon": float(epsilon), "epsilon_exact": str(epsilon),
                              "delta": delta, "epsilon_cap": float(spec.epsilon_cap), "status": "charged",
                              "charged_utc": _now()})
        _save(path, state)
    return {"path": spec.path, "dataset": spec.dataset, "run_id": run_id, "runs": len(state["runs"]),
            "epsilon_cap": float(spec.epsilon_cap), "epsilon_charged_total": float(spent_epsilon + epsilon),
            "delta_cap": spec.delta_cap, "delta_charged_total": spent_delta + delta}


def finish(spec: StoreSpec, run_id: str, status: str, **details) -> None:
    """Record how a charged run ended ("released" or "failed"); the charge stays either way."""
    path = Path(spec.path)
    with _locked(path):
        state = _load(path, spec.dataset)
        for run in state["runs"]:
            if run["run_id"] == run_id:
                run.update(status=status, finished_utc=_now(), **details)
                break
        else:
            raise ConfigError(f"run {run_id} is not in the budget store {spec.path!r}")
        _save(path, state)
