"""The privacy budget and its ledger (ALGORITHMS.md §1.5, DESIGN.md "rules of the road").

Every noisy release is one :class:`LedgerEntry`; :meth:`Budget.spend` refuses
an entry that would take the total past the budget, so an overspending job
fails before anything is written. Epsilons are exact fractions: a split such
as 0.1 + 0.45 + 0.45 adds up to exactly 1, never to 1.0000000000000002.

Composition is sequential (every step reads the same users), which is what
all algorithms in this package need; the guarantee is pure ε-DP (δ = 0) with
one user as the unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dp_spark.errors import ConfigError, DpSparkError

PRIVACY_UNIT = "user: adding or removing one user together with all of that user's records"


class BudgetExceeded(DpSparkError):
    """A spend (or a planned split) would exceed the total epsilon."""


def as_epsilon(value: object, name: str = "epsilon") -> Fraction:
    """Turn a config value into an exact positive epsilon, or raise ConfigError.

    Decimal strings of floats are taken literally (0.45 -> 9/20), so budgets
    written in a config add up the way a reader expects.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Fraction)):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    try:
        eps = Fraction(str(value)) if not isinstance(value, Fraction) else value
    except (ValueError, ZeroDivisionError):
        raise ConfigError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    if eps <= 0:
        raise ConfigError(f"{name} must be > 0, got {value!r}")
    return eps.limit_denominator(10**9)


@dataclass(frozen=True)
class LedgerEntry:
    """One noisy release: what was published, with which mechanism and budget.

    ``sensitivity`` is the L1 sensitivity of the released vector under the
    privacy unit; ``noise_scale`` is sensitivity / epsilon (the smallest scale
    when cells get different scales). ``not_private`` names why a step that
    reproduces a flawed paper is NOT differentially private (empty otherwise);
    its ``epsilon`` is then only what the paper claims.
    """

    step: str
    mechanism: str
    epsilon: Fraction
    sensitivity: Fraction
    noise_scale: Fraction
    cells: int
    not_private: str = ""
    delta: float = 0.0  # > 0 only for (ε, δ) mechanisms (smooth sensitivity)

    def to_json(self) -> dict:
        return {
            "step": self.step,
            "mechanism": self.mechanism,
            "epsilon": float(self.epsilon),
            "epsilon_exact": str(self.epsilon),
            "delta": self.delta,
            "sensitivity_l1": float(self.sensitivity),
            "noise_scale": float(self.noise_scale),
            "cells": self.cells,
            **({"NOT_PRIVATE": self.not_private} if self.not_private else {}),
        }


class Budget:
    """A total epsilon and the ledger of what has been spent from it."""

    def __init__(self, total: object, delta: float = 0.0):
        self.total = as_epsilon(total)
        if not 0 <= delta < 1:
            raise ConfigError(f"delta must be in [0, 1), got {delta!r}")
        self.delta_total = float(delta)
        self.entries: list[LedgerEntry] = []

    @property
    def delta_spent(self) -> float:
        return math.fsum(e.delta for e in self.entries)

    @property
    def spent(self) -> Fraction:
        return sum((e.epsilon for e in self.entries), Fraction(0))

    @property
    def remaining(self) -> Fraction:
        return self.total - self.spent

    def check_plan(self, parts: dict[str, Fraction]) -> None:
        """Refuse a planned split whose parts add up to more than the total."""
        planned = sum(parts.values(), Fraction(0))
        if planned > self.total:
            terms = " + ".join(f"{name} {float(eps):g}" for name, eps in parts.items())
            raise BudgetExceeded(
                f"budget split exceeds the total: {terms} = {float(planned):g} "
                f"> epsilon {float(self.total):g}"
            )

    def spend(self, entry: LedgerEntry) -> None:
        if entry.epsilon <= 0:
            raise BudgetExceeded(f"step {entry.step!r} spends a non-positive epsilon {entry.epsilon}")
        if self.spent + entry.epsilon > self.total:
            raise BudgetExceeded(
                f"step {entry.step!r} needs epsilon {float(entry.epsilon):g} but only "
                f"{float(self.remaining):g} of {float(self.total):g} is left"
            )
        if self.delta_spent + entry.delta > self.delta_total * (1 + 1e-12):
            raise BudgetExceeded(f"step {entry.step!r} needs delta {entry.delta:g} but the job allows "
                                 f"{self.delta_total:g} in all")
        self.entries.append(entry)

    @property
    def private(self) -> bool:
        return not any(e.not_private for e in self.entries)

    def to_json(self) -> dict:
        guarantee = "pure epsilon-differential privacy (delta = 0), sequential composition"
        if self.delta_spent > 0:
            guarantee = (f"(epsilon, delta)-differential privacy with delta = {self.delta_spent:g}, "
                         "sequential composition")
        if not self.private:
            guarantee = ("NONE: this release reproduces a published algorithm that is not differentially "
                         "private (see the ledger's NOT_PRIVATE entries); do not publish it")
        return {
            "privacy_unit": PRIVACY_UNIT,
            "guarantee": guarantee,
            "epsilon_total": float(self.total),
            "epsilon_spent": float(self.spent),
            "epsilon_spent_exact": str(self.spent),
            "delta_total": self.delta_total,
            "delta_spent": self.delta_spent,
            "ledger": [e.to_json() for e in self.entries],
        }
