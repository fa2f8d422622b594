"""A dataset's guarantee across its releases, by one of two composition rules.

Every release of a dataset is charged as a :class:`Charge`: the (ε, δ) it is stated as, and its
cost in approximate zCDP, ρ with a δ spent outside zCDP. A budget composes its charges by the rule
it was created with (:data:`COMPOSITIONS`), and a release fits when the composed statement stays
within the cap:

* **sequential**: (Σ ε, Σ δ)-DP, basic composition (specification §1.5), as every run was before
  zCDP;
* **zCDP**: δ_out-approximately (Σ ρ)-zCDP, δ_out = Σ δ_outside (Bun and Steinke 2016, composition
  of approximate zCDP), hence (ε, δ_cap)-DP with ε = epsilon_of(Σ ρ, δ_cap − δ_out) at the cap's δ
  (Canonne, Kamath and Steinke 2020, Corollary 13). A pure ε-DP release costs ρ = ε²/2 (Bun–Steinke
  Proposition 1.4) and an (ε, δ)-DP one ε²/2 with its δ outside (their Proposition 1.13); a zCDP
  release costs its ρ.

The rule is the budget's, fixed when it is created (a store's ``composition``), never chosen per
release: a rule picked afterwards, whichever fits, would be a composition theorem of its own. The
zCDP statement is for the ρ's as charged; every release's ρ is fixed by its config before it reads
data. Repeated releases fit far longer under zCDP: 365 daily releases of ρ/365 each, with
ρ = rho_of(1, 10⁻⁶), stay within (1, 10⁻⁶), where sequential composition allows ε = 1/365 per
release. A zCDP budget needs δ_cap > 0: the conversion states ρ at a δ.

δ's are doubles, compared with the cap exactly: Σ δ is the exact sum of the doubles' values (as
fractions), with no allowance over the cap, and the δ left to the zCDP conversion, δ_cap − δ_out,
is rounded down, so that it and δ_out never add up past the cap.

Claim: docs/mechanisms.md, "Privacy claim: Accounting, delta_of" (across runs: docs/zcdp.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from dp_spark.core import zcdp
from dp_spark.errors import ConfigError

SEQUENTIAL = "sequential"
ZCDP = "zcdp"
COMPOSITIONS = (SEQUENTIAL, ZCDP)


@dataclass(frozen=True)
class Charge:
    """One release's charge: its (ε, δ) statement and its approximate-zCDP cost (ρ, δ_outside)."""

    epsilon: Fraction
    delta: float
    rho: Fraction
    delta_outside: float

    @classmethod
    def pure(cls, epsilon: Fraction, delta: float = 0.0) -> Charge:
        """An (ε, δ)-DP release (δ = 0: pure): ρ = ε²/2, its δ outside zCDP."""
        return cls(Fraction(epsilon), float(delta), zcdp.pure_cost(epsilon), float(delta))


@dataclass(frozen=True)
class Guarantee:
    """What a history of charges guarantees: the sequential (ε, δ), the zCDP (ρ, δ_outside), and the
    ε of the zCDP statement at ``delta`` (None when δ_outside leaves nothing of it).

    ``delta_sequential`` is Σ δ correctly rounded to a double (what reports show);
    ``delta_sequential_exact``, the exact sum of the charges' doubles, is what the cap is checked
    against (without it, the double is taken as exact)."""

    epsilon_sequential: Fraction
    delta_sequential: float
    rho: Fraction
    delta_outside: float
    delta: float
    epsilon_zcdp: float | None
    delta_sequential_exact: Fraction | None = field(default=None, compare=False, repr=False)

    def within(self, epsilon_cap: Fraction, delta_cap: float, composition: str = SEQUENTIAL) -> bool:
        """Whether the statement of ``composition`` is within (ε_cap, δ_cap): the sequential
        (Σ ε, Σ δ), or the zCDP (epsilon_zcdp, ``delta``). δ's are compared exactly: a Σ δ above
        δ_cap by any amount, however small, is not within."""
        if composition == SEQUENTIAL:
            spent = (Fraction(self.delta_sequential) if self.delta_sequential_exact is None
                     else self.delta_sequential_exact)
            return self.epsilon_sequential <= epsilon_cap and spent <= Fraction(delta_cap)
        if composition != ZCDP:
            raise ValueError(f"unknown composition {composition!r}; expected one of {', '.join(COMPOSITIONS)}")
        return self.epsilon_zcdp is not None and self.delta <= delta_cap and self.epsilon_zcdp <= epsilon_cap



def check_composition(value: object, name: str, delta_cap: float | None) -> str:
    """A budget's composition rule; zCDP needs a δ cap above 0 to state ρ at. Raises ConfigError."""
    if value not in COMPOSITIONS:
        raise ConfigError(f"{name} must be one of {', '.join(COMPOSITIONS)}, got {value!r}")
    if value == ZCDP and not delta_cap:
        raise ConfigError(f"{name} = \"zcdp\" needs a delta cap above 0: the runs' rho is stated as epsilon at it")
    return value


def guarantee(charges: Iterable[Charge], delta: float) -> Guarantee:
    """The guarantee of ``charges`` together, its zCDP statement taken at δ = ``delta`` (a cap's)."""
    charges = list(charges)
    epsilon = sum((c.epsilon for c in charges), Fraction(0))
    rho = sum((c.rho for c in charges), Fraction(0))
    outside = math.fsum(c.delta_outside for c in charges)
    # What the conversion may use: δ − δ_out exactly, rounded down (a float subtraction of a float
    # sum could round it up, and the two parts add up past δ).
    left_exact = Fraction(delta) - sum((Fraction(c.delta_outside) for c in charges), Fraction(0))
    left = zcdp.float_at_most(left_exact) if left_exact > 0 else 0.0
    stated = None
    if rho == 0 and left_exact >= 0:
        stated = 0.0
    elif left > 0 and delta < 1:
        stated = zcdp.epsilon_of(float(rho), left)
    return Guarantee(epsilon, math.fsum(c.delta for c in charges), rho, outside, delta, stated,
                     sum((Fraction(c.delta) for c in charges), Fraction(0)))
