"""One step of the ledger: what a noisy release published, with which mechanism and budget, and
the constructors of the entries that several families share (an exponential mechanism's, a discrete
Gaussian's). The budget that spends entries and hands out their noise is :mod:`dp_spark.core.ledger`.

Claim: docs/mechanisms.md, "Privacy claim: Budget".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dp_spark.core import discrete_gaussian, zcdp


@dataclass(frozen=True)
class LedgerEntry:
    """One noisy release: what was published, with which mechanism and budget.

    ``sensitivity`` is the L1 sensitivity of the released vector under the
    privacy unit; ``noise_scale`` is sensitivity / epsilon (the smallest scale
    when cells get different scales). ``not_private`` names why a step that
    reproduces a flawed paper is NOT differentially private (empty otherwise);
    its ``epsilon`` is then only what the paper claims.

    A discrete Gaussian step (:func:`gaussian_entry`) has no ε: its cost is ``rho``
    = Δ₂²/(2σ²), from its squared L2 sensitivity ``l2_squared`` and variance parameter
    ``variance`` σ²; its ``epsilon`` is 0 and its ``noise_scale`` σ² (the sampler's parameter).
    """

    step: str
    mechanism: str
    epsilon: Fraction
    sensitivity: Fraction
    noise_scale: Fraction
    cells: int
    not_private: str = ""
    delta: float = 0.0  # > 0 only for (ε, δ) mechanisms (smooth sensitivity, partition selection)
    rho: Fraction | None = None  # the zCDP cost of a Gaussian step; a pure step's is ε²/2
    l2_squared: Fraction | None = None  # a Gaussian step's squared L2 sensitivity
    # An ε-DP step whose privacy loss has range at most ε (an exponential mechanism): under zCDP
    # it costs ε²/8, not ε²/2 (core.zcdp.bounded_range_cost; docs/zcdp.md).
    bounded_range: bool = False
    # Noise on values on a grid (the means' sums): one noise step is worth this many value units.
    # The mechanism works in grid steps; a reader is shown the sensitivity and scale in values.
    value_unit: Fraction | None = None

    @property
    def gaussian(self) -> bool:
        return self.rho is not None

    @property
    def cost(self) -> Fraction:
        """What the step costs in ρ-zCDP: its ρ, ε²/8 for a bounded-range step, or ε²/2 for a
        pure (or (ε, δ)) step."""
        if self.rho is not None:
            return self.rho
        return zcdp.bounded_range_cost(self.epsilon) if self.bounded_range else zcdp.pure_cost(self.epsilon)

    def to_json(self) -> dict:
        if self.rho is not None and self.l2_squared is not None:  # a Gaussian step (gaussian_entry)
            return {
                "step": self.step,
                "mechanism": self.mechanism,
                "epsilon": None,
                "rho": float(self.rho),
                "rho_exact": str(self.rho),
                "delta": self.delta,
                "sensitivity_l1": float(self.sensitivity),
                "sensitivity_l2": math.sqrt(self.l2_squared),
                "sigma": math.sqrt(self.noise_scale),
                "sigma_squared_exact": str(self.noise_scale),
                "noise_scale": math.sqrt(self.noise_scale),
                "cells": self.cells,
                **self._unit_json(),
            }
        return {
            "step": self.step,
            "mechanism": self.mechanism,
            "epsilon": float(self.epsilon),
            "epsilon_exact": str(self.epsilon),
            "delta": self.delta,
            "sensitivity_l1": float(self.sensitivity),
            "noise_scale": float(self.noise_scale),
            "cells": self.cells,
            **self._unit_json(),
            **({"bounded_range": True, "rho": float(self.cost), "rho_exact": str(self.cost)}
               if self.bounded_range else {}),
            **({"NOT_PRIVATE": self.not_private} if self.not_private else {}),
        }

    def _unit_json(self) -> dict:
        return {} if self.value_unit is None else {"value_unit": float(self.value_unit)}


GAUSSIAN_MECHANISM = "discrete Gaussian"
BOUNDED_RANGE_MECHANISM = "exponential mechanism"
MONOTONE_QUALITY = "(monotone quality)"  # how a monotone exponential mechanism names itself in the ledger


def selection_entry(step: str, mechanism: str, share: Fraction, sensitivity: Fraction | int, cells: int,
                    zcdp_accounting: bool, monotone: bool = False) -> LedgerEntry:
    """The entry of an exponential mechanism over ``cells`` candidates given its part ``share`` of
    the split: at that ε, or under zCDP at twice it as a bounded-range step of the same ρ
    (zcdp.selection_epsilon); the noise scale is the factor's inverse, Δq/ε for a monotone quality,
    else 2Δq/ε, as Budget.exponential_mechanism checks."""
    at = zcdp.selection_epsilon(share, zcdp_accounting)
    scale = Fraction(sensitivity) / at * (1 if monotone else 2)
    return LedgerEntry(step, mechanism, at, Fraction(sensitivity), scale, cells, bounded_range=zcdp_accounting)


def gaussian_entry(step: str, l1: int, l2_squared: int, epsilon: Fraction, cells: int) -> LedgerEntry:
    """The ledger entry of discrete Gaussian noise on ``cells`` cells of an integer vector with
    L1 sensitivity ``l1`` and squared L2 sensitivity ``l2_squared``, paid from a share of ρ whose
    pure-ε equivalent is ``epsilon`` (a share ρ_k, handed out as ε_k with ε_k²/2 ≤ ρ_k): σ² is
    Δ₂²/ε_k², rounded up to what the exact sampler takes, so its cost Δ₂²/(2σ²) ≤ ε_k²/2."""
    epsilon = Fraction(epsilon)
    if epsilon <= 0 or l2_squared < 1 or l1 < 1:
        raise ValueError(f"step {step!r}: the sensitivities and the epsilon share must be positive")
    variance = discrete_gaussian.variance_at_least(Fraction(l2_squared) / epsilon**2)
    return LedgerEntry(step=step, mechanism=GAUSSIAN_MECHANISM, epsilon=Fraction(0), sensitivity=Fraction(l1),
                       noise_scale=variance, cells=cells, rho=zcdp.gaussian_cost(l2_squared, variance),
                       l2_squared=Fraction(l2_squared))
