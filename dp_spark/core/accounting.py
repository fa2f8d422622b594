"""What a release's budget is, before anything is spent: whom it protects (:class:`PrivacyUnit`),
its ε read exactly from a config or a call, the noise kinds, and how it is counted
(:class:`Accounting`: pure ε with ε adding up, or ρ-zCDP with ρ adding up and the total stated
as (ε, δ)-DP by :mod:`dp_spark.core.zcdp`). Pure values, no state; the ledger that spends is
:mod:`dp_spark.core.ledger`.

Epsilons are exact fractions: a split such as 0.1 + 0.45 + 0.45 adds up to exactly 1, never to
1.0000000000000002.

Claim: docs/mechanisms.md, "Privacy claim: Accounting, delta_of".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from dp_spark.core import zcdp
from dp_spark.errors import ConfigError

MODELS = ("central", "local")


@dataclass(frozen=True)
class PrivacyUnit:
    """Whom a release protects, and against which change of the input.

    ``name`` is what is protected (a user, a record); ``neighbours`` is the neighbouring
    relation in words; ``model`` is "central" (noise added to aggregates) or "local" (each
    record randomised on its own); ``not_hidden`` lists what the release shows exactly, outside
    the guarantee (for a replacement relation, at least the record count).
    """

    name: str
    neighbours: str
    relation: str  # "add/remove" (unbounded) or "replacement" (bounded)
    model: str = "central"
    not_hidden: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.name or not self.neighbours:
            raise ValueError("a privacy unit needs a name and a neighbouring relation")
        if self.relation not in ("add/remove", "replacement"):
            raise ValueError(f"relation must be 'add/remove' or 'replacement', got {self.relation!r}")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")

    def to_json(self) -> dict:
        return {
            "privacy_unit": f"{self.name}: {self.neighbours}",
            "neighbouring_relation": self.relation,
            "privacy_model": self.model,
            "not_hidden": list(self.not_hidden),
        }


USER_UNIT = PrivacyUnit(
    name="user",
    neighbours="adding or removing one user together with all of that user's records",
    relation="add/remove",
)

def as_epsilon(value: object, name: str = "epsilon", text: bool = False) -> Fraction:
    """Turn a config value into an exact positive epsilon, or raise ConfigError.

    Decimal strings of floats are taken literally (0.45 -> 9/20), so budgets
    written in a config add up the way a reader expects. A string is a number
    only where text is what the value comes as (``text``: a command-line flag
    such as ``--epsilon-cap 1/3``, the budget store's exact fractions); in a
    config or an API call "1.0" is a mistake to point out, not to guess at.
    """
    if isinstance(value, str) and not text:
        raise ConfigError(f"{name} must be a number, not the string {value!r} (write it without quotes)")
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Fraction)):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    try:
        eps = Fraction(str(value)) if not isinstance(value, Fraction) else value
    except (ValueError, ZeroDivisionError):
        raise ConfigError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    if eps <= 0:
        raise ConfigError(f"{name} must be > 0, got {_plain(value)}")
    kept = eps.limit_denominator(10**9)
    if kept <= 0:  # below 5e-10: it would become 0 and fail later, or spend nothing
        raise ConfigError(f"{name} = {_plain(value)} is too small: epsilons are kept as fractions with "
                          "denominators up to 10^9")
    return kept


# One release's epsilon: above MEANINGFUL_EPSILON the guarantee protects next to nothing (a warning
# says so); above MAX_EPSILON a release is refused, as a slip (1e300 for 1e-3) rather than a choice
# (docs/choosing_epsilon.md). A seeded release, for tests and NOT private anyway, may go beyond:
# a nearly noiseless release is how a test sees the bounded values themselves.
MEANINGFUL_EPSILON = 10
MAX_EPSILON = 100


def release_epsilon(value: object, name: str = "epsilon", seeded: bool = False) -> Fraction:
    """as_epsilon for the epsilon of one release (or a part of it): refused above MAX_EPSILON
    unless the release is ``seeded``. Caps of a dataset's cumulative spend are not releases and
    take as_epsilon."""
    eps = as_epsilon(value, name)
    if eps > MAX_EPSILON and not seeded:
        raise ConfigError(f"{name} = {float(eps):.4g} is above {MAX_EPSILON}, where a release protects no one (any "
                          f"one user's data may change the odds of a guess about them by a factor of e^{MAX_EPSILON}); "
                          "public deployments spend between about 0.1 and 10 per release (a seeded test release "
                          "may go beyond): docs/choosing_epsilon.md")
    return eps


def epsilon_warning(epsilon: Fraction | float) -> str | None:
    """A WARNING line for an epsilon whose protection is meaningless, or None."""
    if epsilon <= MEANINGFUL_EPSILON:
        return None
    factor = f"{math.exp(float(epsilon)):.3g}" if epsilon < 700 else "more than 10^300"  # exp overflows past ~709
    return (f"WARNING: epsilon {float(epsilon):g} protects next to nothing: the release may change the odds of a "
            f"guess about any one user by a factor of up to e^{float(epsilon):g} = {factor} "
            f"(above {MEANINGFUL_EPSILON}, the guarantee is a formality; docs/choosing_epsilon.md)")


def _plain(value: object) -> str:
    """A number as a reader writes it: 0 and 1/3, not Fraction(0, 1)."""
    return str(value) if isinstance(value, Fraction) else repr(value)


class Noise(StrEnum):
    """The noise of the tables that may take either: discrete Laplace (L1, pure ε), discrete
    Gaussian (L2, zCDP), or "auto", the lower variance of the two for the same share of ρ. A
    member is its string ("laplace" == Noise.LAPLACE), so configs, reports and the executors'
    seeds read the same as before."""

    LAPLACE = "laplace"
    GAUSSIAN = "gaussian"
    AUTO = "auto"


NOISES = tuple(Noise)


def check_noise(noise: object, publisher: str = "laplace", publisher_options: dict | None = None,
                name: str = "privacy.noise") -> Noise:
    """``noise`` if it is one of :data:`NOISES`; "gaussian" only where it replaces the laplace
    publisher's noise (the other publishers' arguments are in L1)."""
    if not isinstance(noise, str) or noise not in NOISES:
        raise ConfigError(f"{name} must be one of {', '.join(NOISES)}, got {noise!r}")
    if noise == Noise.GAUSSIAN and (publisher != "laplace" or publisher_options):
        raise ConfigError(f"{name} = \"gaussian\" replaces the laplace publisher's noise; publisher {publisher!r} "
                          "is argued for Laplace noise only (use privacy.noise = \"auto\" to keep it under zCDP "
                          "accounting)")
    return Noise(noise)


MIN_DELTA = 1e-100  # the least δ a zCDP guarantee is stated at (core.zcdp works in doubles)


@dataclass(frozen=True)
class Accounting:
    """How a job counts its budget: pure ε-DP with sequential composition of ε (``rho`` None,
    the default), or ρ-zCDP with ρ adding up (docs/mechanisms.md, "Privacy claim: Accounting,
    delta_of"). ``noise``: the noise of the tables that may take either ("laplace", "gaussian",
    or "auto": the lower variance for the same share of ρ); anything but "laplace" needs zCDP.
    ``conversion_delta``: the δ at which the zCDP guarantee is also stated as (ε, δ)-DP."""

    noise: Noise = Noise.LAPLACE
    rho: Fraction | None = None
    conversion_delta: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "noise", check_noise(self.noise))
        if self.rho is None:
            if self.noise != Noise.LAPLACE:
                raise ConfigError(
                    f"privacy.noise = {str(self.noise)!r} needs zCDP accounting: give privacy.epsilon with "
                    "privacy.delta, or privacy.rho"
                )
            return
        if Fraction(self.rho) <= 0:
            raise ConfigError(f"rho must be > 0, got {self.rho}")
        if not 0 < self.conversion_delta < 1:
            raise ConfigError(f"zCDP accounting states its guarantee at a delta in (0, 1), got "
                              f"{self.conversion_delta!r}")

    @property
    def zcdp(self) -> bool:
        return self.rho is not None

    def epsilon_at(self, rho: Fraction | float) -> float:
        """The ε of the (ε, conversion_delta)-DP that ``rho``-zCDP implies (0 for no spend)."""
        return 0.0 if rho <= 0 else zcdp.epsilon_of(float(rho), self.conversion_delta)


PURE = Accounting()


def accounting_of(noise: object, epsilon: object, delta: object, rho: object, seeded: bool = False,
                  prefix: str = "privacy.", outside_share: Fraction = Fraction(0)) -> tuple[Accounting, Fraction]:
    """(accounting, the release's ε) from a config's [privacy] table or an API call's arguments
    (``prefix`` names them in errors). Laplace noise without ρ is pure ε-DP, as always; "gaussian"
    or "auto" noise, or a ρ, is zCDP: ρ given, or converted from (ε, δ) by the tight conversion
    (core.zcdp.rho_of), with δ the level at which the guarantee is stated as (ε, δ)-DP.
    ``outside_share``: the part of δ that (ε, δ) steps spend outside zCDP (partition selection);
    the conversion gets the rest."""
    noise = check_noise("laplace" if noise is None else noise, name=f"{prefix}noise")
    if noise == Noise.LAPLACE and rho is None:
        if epsilon is None:
            raise ConfigError(f"missing config key '{prefix}epsilon'" if prefix == "privacy." else
                              "epsilon is required")
        return PURE, release_epsilon(epsilon, f"{prefix}epsilon", seeded)
    why = f"{prefix}rho" if rho is not None else f"{prefix}noise = {noise.value!r}"
    if delta is None:
        raise ConfigError(f"{why} counts the budget in zCDP, which needs {prefix}delta: the delta at which the "
                          "guarantee is also stated as (epsilon, delta)-DP, e.g. 1e-6 (docs/zcdp.md)")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ConfigError(f"{prefix}delta must be a number strictly between 0 and 1, got {delta!r}")
    if delta < MIN_DELTA:  # the conversion works in doubles: far below this it cannot be stated safely
        raise ConfigError(f"{prefix}delta = {delta:g} is below {MIN_DELTA:g}, where the zCDP conversion is not "
                          "computed")
    # The conversion's part of δ, rounded down: with the outside part (exact for a share of 1/2) it
    # never adds up past δ.
    conversion = zcdp.float_at_most(Fraction(float(delta)) * (1 - Fraction(outside_share)))
    if rho is not None:
        if epsilon is not None:
            raise ConfigError(f"give {prefix}epsilon (with {prefix}delta) or {prefix}rho, not both")
        rho = as_epsilon(rho, f"{prefix}rho")
        converted = zcdp.epsilon_of(float(rho), conversion)
        if converted <= 0:
            raise ConfigError(f"{prefix}rho = {float(rho):g} is so small that it amounts to epsilon 0 at delta "
                              f"{conversion:g}: nothing would be released but noise")
        stated = release_epsilon(converted, f"the epsilon of {prefix}rho", seeded)
        return Accounting(noise, rho, conversion), stated
    if epsilon is None:
        raise ConfigError(f"{why} needs {prefix}epsilon (with {prefix}delta) or {prefix}rho")
    epsilon = release_epsilon(epsilon, f"{prefix}epsilon", seeded)
    return Accounting(noise, zcdp.rho_of(float(epsilon), conversion), conversion), epsilon
