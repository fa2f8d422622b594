"""A dataset's privacy budget as the API holds it: in memory for one session (DatasetBudget), or
in the budget store the scheduled jobs use (StoreBudget, through DatasetBudget.from_store), so that
a notebook's releases and the jobs share one cap. Each is a charger of the release lifecycle
(dp_spark.release.lifecycle): a release's whole cost is charged before it reads a record.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from dp_spark.core.accounting import as_epsilon
from dp_spark.core.composition import SEQUENTIAL, ZCDP, Charge, check_composition, guarantee
from dp_spark.errors import BudgetExceeded, ConfigError
from dp_spark.jobs import budget_store


class DatasetBudget:
    """The privacy budget of one dataset, shared by the releases made from it.

    Every API call given ``budget=`` charges its whole epsilon (and delta) here before it reads a
    record, and is refused with :class:`BudgetExceeded` when that would pass the cap: the
    releases of one dataset compose sequentially, or with ``composition="zcdp"`` (and a delta) by
    adding their ρ (docs/zcdp.md). (Across processes and scheduled runs, the job's budget store
    does the same job: docs/scheduled_runs.md.)
    """

    def __init__(self, epsilon: object, delta: float = 0.0, composition: str = SEQUENTIAL):
        self._epsilon = as_epsilon(epsilon, "budget epsilon")
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 <= delta < 1:
            raise ConfigError(f"budget delta must be a number in [0, 1), got {delta!r}")
        self._delta = float(delta)
        self._composition = check_composition(composition, "composition", self._delta)
        self.charges: list[dict] = []

    @property
    def epsilon(self) -> Fraction:
        """The cap on what the dataset's releases spend together."""
        return self._epsilon

    @property
    def delta(self) -> float:
        return self._delta

    @property
    def composition(self) -> str:
        """How the releases add up: "sequential" (ε and δ add) or "zcdp" (ρ adds)."""
        return self._composition

    @property
    def spent(self) -> Fraction:
        return sum((c["epsilon"] for c in self.charges), Fraction(0))

    @property
    def delta_spent(self) -> float:
        return sum(c["delta"] for c in self.charges)

    @property
    def remaining(self) -> Fraction:
        return self.epsilon - self.spent

    def charge(self, epsilon: Fraction, delta: float, what: str, cost: Charge | None = None) -> dict:
        """Charge a release's (ε, δ) (``cost``: its approximate-zCDP cost, for a zCDP release): it fits
        when the releases with it are within the budget by its composition rule (core.composition)."""
        cost = cost or Charge.pure(epsilon, delta)
        after = guarantee([c["cost"] for c in self.charges] + [cost], self.delta)
        if not after.within(self.epsilon, self.delta, self.composition):
            if self.composition == ZCDP:
                raise BudgetExceeded(f"{what} would take the releases to epsilon {after.epsilon_zcdp:.6g} at delta "
                                     f"{self.delta:g} by zCDP composition (rho {float(after.rho):.6g}), past the "
                                     f"dataset's {float(self.epsilon):g}")
            if self.spent + epsilon > self.epsilon:
                raise BudgetExceeded(f"{what} needs epsilon {float(epsilon):g} but only {float(self.remaining):g} of "
                                     f"the dataset's {float(self.epsilon):g} is left")
            raise BudgetExceeded(f"{what} needs delta {delta:g} but the dataset's budget allows {self.delta:g} "
                                 f"in all ({self.delta_spent:g} spent)")
        self.charges.append({"what": what, "epsilon": epsilon, "delta": delta, "cost": cost})
        return self.charges[-1]

    def finish(self, charge: Any, status: str, exc: BaseException | None = None, report: dict | None = None) -> None:
        """How a charged release ended; kept only by a persistent store (:meth:`from_store`)."""

    def __repr__(self) -> str:
        return (f"DatasetBudget(epsilon={float(self.epsilon):g}, spent={float(self.spent):g}, "
                f"releases={len(self.charges)})")

    @staticmethod
    def from_store(path: str, dataset: str, epsilon_cap: object = None, delta_cap: float | None = None,
                   composition: str | None = None) -> StoreBudget:
        """The dataset's budget in the persistent store the jobs use (``[budget_store]``,
        docs/scheduled_runs.md), so that a notebook's releases and the scheduled runs share one cap
        and a kernel restart forgets nothing. Each release is charged in the store before it reads a
        record and recorded there as released, failed or refused; the store's cap rules apply (a
        store is created only with ``epsilon_cap``, and a cap above the stored one is refused;
        ``composition`` creates a store with that rule, and must match an existing store's)."""
        return StoreBudget(path, dataset, epsilon_cap, delta_cap, composition)


class StoreBudget(DatasetBudget):
    """A :class:`DatasetBudget` kept in a budget store file (:meth:`DatasetBudget.from_store`):
    ``spent`` and ``remaining`` are read from the store, so they include every other run's spend."""

    def __init__(self, path: str, dataset: str, epsilon_cap: object = None, delta_cap: float | None = None,
                 composition: str | None = None):
        if not isinstance(path, str) or not isinstance(dataset, str) or not path or not dataset:
            raise ConfigError("from_store needs the store's path and the dataset's name, both strings")
        cap = None if epsilon_cap is None else as_epsilon(epsilon_cap, "epsilon_cap")
        if delta_cap is not None and (isinstance(delta_cap, bool) or not isinstance(delta_cap, (int, float))
                                      or not 0 <= delta_cap < 1):
            raise ConfigError(f"delta_cap must be a number in [0, 1), got {delta_cap!r}")
        if composition is not None:
            check_composition(composition, "composition", delta_cap)
        self.spec = budget_store.StoreSpec(path, dataset, cap, None if delta_cap is None else float(delta_cap),
                                           composition)
        self.charges = []
        budget_store.check_reachable(self.spec)

    @property
    def composition(self) -> str:
        info = self._summary()
        return info["composition"] if info else (self.spec.composition or SEQUENTIAL)

    def _summary(self) -> dict | None:
        """The store as ``dp-spark budget show --json`` reads it; None before its first charge."""
        return budget_store.summary(self.spec.path, self.spec.dataset) if Path(self.spec.path).exists() else None

    @property
    def epsilon(self) -> Fraction:
        info = self._summary()
        if info is None or info["epsilon"]["cap"] is None:
            return self.spec.epsilon_cap or Fraction(0)
        stored = Fraction(info["epsilon"]["cap"])  # a lower cap given here limits this budget's charges
        return stored if self.spec.epsilon_cap is None else min(stored, self.spec.epsilon_cap)

    @property
    def spent(self) -> Fraction:
        info = self._summary()
        return Fraction(0) if info is None else Fraction(info["epsilon"]["spent"])

    @property
    def delta(self) -> float:
        info = self._summary()
        return (self.spec.delta_cap or 0.0) if info is None else info["delta"]["cap"] or 0.0

    @property
    def delta_spent(self) -> float:
        info = self._summary()
        return 0.0 if info is None else info["delta"]["spent"]

    def charge(self, epsilon: Fraction, delta: float, what: str, cost: Charge | None = None) -> dict:
        charged = budget_store.charge(self.spec, epsilon, delta, {"algorithm": what, "output": None,
                                                                   "run_date": None, "forced": False, "api": True},
                                      cost)
        self.charges.append({"what": what, "epsilon": epsilon, "delta": delta, "run_id": charged["run_id"]})
        return charged

    def finish(self, charge: Any, status: str, exc: BaseException | None = None, report: dict | None = None) -> None:
        details = {"error": budget_store.stored_error(exc)} if exc is not None else {}
        if report is not None:
            details.update(epsilon_spent=report["epsilon_spent"], ledger=report["ledger"])
        budget_store.finish(self.spec, charge["run_id"], status, **details)

    def __repr__(self) -> str:
        return (f"DatasetBudget.from_store({self.spec.path!r}, {self.spec.dataset!r}): epsilon "
                f"{float(self.spent):g} spent of {float(self.epsilon):g}")


def rho_per_run(epsilon: float, delta: float, runs: int) -> float:
    """The ρ to give each of ``runs`` scheduled releases (``privacy.rho``, or ``rho=``) so that all of
    them together are (ε, δ)-DP by zCDP composition, as a budget store capped at (ε, δ) counts them:
    e.g. ``rho_per_run(1, 1e-6, 365)`` for a year of daily runs (docs/zcdp.md)."""
    from dp_spark.core import zcdp

    try:
        return float(zcdp.rho_per_run(epsilon, delta, runs))
    except ValueError as e:
        raise ConfigError(str(e)) from None
