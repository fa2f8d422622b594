"""The privacy budget and its ledger (specification §1.5).

Every noisy release is one :class:`LedgerEntry`; :meth:`Budget.spend` refuses
an entry that would take the total past the budget, so an overspending job
fails before anything is written.

The budget also hands out the noise: :meth:`Budget.discrete_laplace`,
:meth:`Budget.discrete_laplace_each`, :meth:`Budget.discrete_gaussian`, :meth:`Budget.exponential_mechanism`,
:meth:`Budget.exponential_mechanism_rows` and :meth:`Budget.bernoulli_dyadic` spend the entry first
and only then draw, at the scale the entry records. Code
outside ``dp_spark.core`` draws noise only through them, so noise that the
ledger does not pay for cannot be drawn (a test reads the source to hold this).

Epsilons are exact fractions (:mod:`dp_spark.core.accounting`). Deltas are doubles, but the check adds
their exact values (as fractions) and compares them with the job's δ with no
allowance: a step that would take the exact sum past it by an ulp is refused.

Composition is sequential (every step reads the same users), which is what
all algorithms in this package need. The guarantee is pure ε-DP (δ = 0), or
(ε, δ)-DP when a step spends δ, for a :class:`~dp_spark.core.accounting.PrivacyUnit`: by default one user
added or removed with all of that user's records (specification §1.1). A job
whose unit differs (FRAPP: one record replaced, locally) passes its own.
Under zCDP accounting (:class:`~dp_spark.core.accounting.Accounting`) the same ledger adds ρ instead: a pure
step costs ε²/2, a discrete Gaussian step Δ₂²/(2σ²) (:meth:`Budget.discrete_gaussian`),
and the total is stated as (ε, δ)-DP by :mod:`dp_spark.core.zcdp`.

A release drawn with a fixed seed has no guarantee at all, whatever its
mechanism: whoever learns the seed regenerates the noise and subtracts it.
The ledger still describes the mechanism; the report's ``guarantee`` and
``private`` say that this release is for testing only.

Claim: docs/mechanisms.md, "Privacy claim: Budget" and, under zCDP accounting,
"Privacy claim: Accounting, delta_of".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dp_spark.core import discrete_gaussian, mechanisms, vector_noise, zcdp
from dp_spark.core.accounting import PURE, USER_UNIT, Accounting, PrivacyUnit, as_epsilon
from dp_spark.core.ledger_entry import (  # noqa: F401 - the entry and its constructors, imported from here too
    BOUNDED_RANGE_MECHANISM,
    GAUSSIAN_MECHANISM,
    MONOTONE_QUALITY,
    LedgerEntry,
    gaussian_entry,
    selection_entry,
)
from dp_spark.errors import BudgetExceeded, ConfigError

SEEDED_GUARANTEE = ("NONE: this release was drawn with a fixed seed; it is for testing only and NOT private "
                    "(whoever learns the seed can regenerate the noise and remove it)")


class Budget:
    """A total epsilon and the ledger of what has been spent from it, for one privacy unit.

    ``fixed_seed``: the noise comes from a fixed seed, so the release has no guarantee (the
    ledger is unchanged: it describes the mechanism). ``condition``: what the guarantee is
    conditional on, when anything (guards.strict: the run completing).

    With zCDP ``accounting`` the budget is ``accounting.rho``: every entry costs its ρ (a pure
    step ε²/2) and the costs add up; ``delta`` is then what (ε, δ) steps (partition selection) may
    spend outside zCDP, and ``total`` only the ε the whole ρ is stated as.
    """

    def __init__(self, total: object, delta: float = 0.0, unit: PrivacyUnit = USER_UNIT,
                 fixed_seed: bool = False, condition: str = "", accounting: Accounting = PURE):
        self.total = as_epsilon(total)
        if not 0 <= delta < 1:
            raise ConfigError(f"delta must be in [0, 1), got {delta!r}")
        self.delta_total = float(delta)
        self.unit = unit
        self.fixed_seed = bool(fixed_seed)
        self.condition = condition
        self.accounting = accounting
        self.entries: list[LedgerEntry] = []
        self._cells_handed_out: set[str] = set()  # steps whose noise the executors draw

    @property
    def zcdp(self) -> bool:
        return self.accounting.zcdp

    @property
    def delta_spent(self) -> float:
        """Σ δ of the ledger, correctly rounded to a double (what the report shows)."""
        return math.fsum(e.delta for e in self.entries)

    @property
    def delta_spent_exact(self) -> Fraction:
        """Σ δ of the ledger exactly, the doubles' values added as fractions: what the budget is
        checked against, so that rounding cannot accumulate past it over many steps."""
        return sum((Fraction(e.delta) for e in self.entries), Fraction(0))

    @property
    def rho_spent(self) -> Fraction:
        return sum((e.cost for e in self.entries), Fraction(0))

    @property
    def spent(self) -> Fraction:
        return sum((e.epsilon for e in self.entries), Fraction(0))

    @property
    def remaining(self) -> Fraction:
        return self.total - self.spent

    def check_plan(self, parts: dict[str, Fraction]) -> None:
        """Refuse a planned split whose parts add up to more than the total (under zCDP: whose
        costs ε_k²/2 add up to more than ρ)."""
        if self.zcdp:
            planned = sum((zcdp.pure_cost(eps) for eps in parts.values()), Fraction(0))
            if planned > self.accounting.rho:
                raise BudgetExceeded(f"budget split exceeds the total: its parts cost rho {float(planned):.6g} "
                                     f"> rho {float(self.accounting.rho):.6g}")
            return
        planned = sum(parts.values(), Fraction(0))
        if planned > self.total:
            terms = " + ".join(f"{name} {float(eps):g}" for name, eps in parts.items())
            raise BudgetExceeded(
                f"budget split exceeds the total: {terms} = {float(planned):g} "
                f"> epsilon {float(self.total):g}"
            )

    def check_affordable(self, epsilon: Fraction, step: str) -> None:
        """Refuse a step needing more epsilon than is left, before it draws anything: a publisher
        that spends in several parts calls this with its whole epsilon first, so that a late
        part cannot fail after an early one has drawn."""
        if epsilon <= 0:
            raise BudgetExceeded(f"step {step!r} spends a non-positive epsilon {epsilon}")
        if self.zcdp:
            self._check_rho(zcdp.pure_cost(epsilon), step)
            return
        if self.spent + epsilon > self.total:
            raise BudgetExceeded(
                f"step {step!r} needs epsilon {float(epsilon):g} but only "
                f"{float(self.remaining):g} of {float(self.total):g} is left"
            )

    def _check_rho(self, cost: Fraction, step: str) -> None:
        if cost <= 0:
            raise BudgetExceeded(f"step {step!r} spends a non-positive rho {cost}")
        if self.rho_spent + cost > self.accounting.rho:
            raise BudgetExceeded(f"step {step!r} needs rho {float(cost):.6g} but only "
                                 f"{float(self.accounting.rho - self.rho_spent):.6g} of "
                                 f"{float(self.accounting.rho):.6g} is left")

    def spend(self, entry: LedgerEntry) -> None:
        if entry.bounded_range:
            # Only the exponential mechanism's loss is proven to have range ε, and only
            # exponential_mechanism checks that the entry's scale is the mechanism's: any other
            # step marked so would be charged a quarter of its cost.
            raise ValueError(f"step {entry.step!r}: only an {BOUNDED_RANGE_MECHANISM} drawn by "
                             "Budget.exponential_mechanism may be charged as bounded range")
        self._spend(entry)

    def _spend(self, entry: LedgerEntry) -> None:
        if entry.gaussian:
            if not self.zcdp:
                raise BudgetExceeded(f"step {entry.step!r} adds Gaussian noise, which needs zCDP accounting")
            self._check_rho(entry.cost, entry.step)
        elif entry.bounded_range and self.zcdp:
            if entry.epsilon <= 0:
                raise BudgetExceeded(f"step {entry.step!r} spends a non-positive epsilon {entry.epsilon}")
            self._check_rho(entry.cost, entry.step)
        else:
            self.check_affordable(entry.epsilon, entry.step)
        if isinstance(entry.delta, bool) or not isinstance(entry.delta, (int, float)) or not 0 <= entry.delta < 1:
            raise ValueError(f"step {entry.step!r} records delta {entry.delta!r}; a delta is a number in [0, 1)")
        # Exact: no allowance over the job's δ (a split must round its parts down instead).
        if self.delta_spent_exact + Fraction(entry.delta) > Fraction(self.delta_total):
            raise BudgetExceeded(f"step {entry.step!r} needs delta {entry.delta:g} but the job allows "
                                 f"{self.delta_total:g} in all")
        self.entries.append(entry)

    # -- Noise, paid for before it is drawn ------------------------------------------------------

    def discrete_laplace(self, entry: LedgerEntry, rng: mechanisms.RandomSource, *, grid: Fraction | int = 1,
                         blocks: Sequence[int] | None = None) -> np.ndarray:
        """Spend ``entry``, then draw its ``entry.cells`` discrete Laplace values of scale
        ``entry.noise_scale``: the draw is exactly what the ledger records.

        ``grid``: the values are integers in steps of ``grid`` (noise on a grid, docs/specification.md
        §1.4), so the sampler's scale is noise_scale / grid; multiply by ``grid`` for value units.
        ``blocks``: sizes, summing to ``entry.cells``, of consecutive separate runs of the sampler
        (a mechanism that draws its cells in parts; the runs consume the random words in order).
        """
        scale = mechanisms.as_scale(Fraction(entry.noise_scale) / Fraction(grid))
        sizes = [entry.cells] if blocks is None else [int(size) for size in blocks]
        if not sizes or sum(sizes) != entry.cells or min(sizes) < 0:
            raise ValueError(f"step {entry.step!r}: blocks {sizes} do not make up its {entry.cells} cells")
        _check_noise_covers_sensitivity(entry)
        self.spend(entry)
        return np.concatenate([mechanisms.discrete_laplace(rng, scale, size) for size in sizes])

    def discrete_laplace_on_executors(self, entry: LedgerEntry, secret: vector_noise.NoiseSecret
                                      ) -> vector_noise.CellNoise:
        """Spend ``entry``, then hand out the noise of its ``entry.cells`` cells, which the
        executors draw cell by cell from ``secret`` (core.vector_noise, docs/executor_noise.md):
        discrete Laplace at scale ``entry.noise_scale``, labelled with the entry's step so that
        two tables never share noise. The ledger records the draw before any executor makes it,
        as :meth:`discrete_laplace` does."""
        mechanisms.as_scale(Fraction(entry.noise_scale))
        _check_noise_covers_sensitivity(entry)
        return self._hand_out(entry, secret, vector_noise.LAPLACE)

    def _hand_out(self, entry: LedgerEntry, secret: vector_noise.NoiseSecret, mechanism: str) -> vector_noise.CellNoise:
        if secret.seeded != self.fixed_seed:  # the report's guarantee must say where the noise came from
            raise ValueError(f"step {entry.step!r}: a {'seeded' if secret.seeded else 'fresh'} noise secret for a "
                             f"budget {'with' if self.fixed_seed else 'without'} a fixed seed")
        if entry.step in self._cells_handed_out:  # the label keys the noise: one step, one noise
            raise ValueError(f"step {entry.step!r} already has its noise on the executors: two tables would share it")
        self.spend(entry)
        self._cells_handed_out.add(entry.step)
        return vector_noise.CellNoise(secret, entry.step, Fraction(entry.noise_scale), mechanism)

    def discrete_laplace_each(self, entry: LedgerEntry, rng: mechanisms.RandomSource, scales: Sequence,
                              *, grid: Fraction | int = 1) -> np.ndarray:
        """Spend ``entry``, then draw one discrete Laplace value per cell at its own scale
        (``scales`` in steps of ``grid``, as in :meth:`discrete_laplace`). The entry's
        noise_scale is the least noise any cell may get: every scale must be at least it."""
        checked = [mechanisms.as_scale(scale) for scale in scales]
        if len(checked) != entry.cells:
            raise ValueError(f"step {entry.step!r} has {entry.cells} cells but {len(checked)} scales")
        if checked and min(checked) * Fraction(grid) < entry.noise_scale:
            raise ValueError(f"step {entry.step!r} draws a cell below its recorded noise scale "
                             f"{float(entry.noise_scale):g}")
        _check_noise_covers_sensitivity(entry)
        self.spend(entry)
        return mechanisms.discrete_laplace_each(rng, checked)

    def discrete_gaussian(self, entry: LedgerEntry, rng: mechanisms.RandomSource) -> np.ndarray:
        """Spend ``entry`` (a :func:`gaussian_entry`), then draw its ``entry.cells`` exact discrete
        Gaussian values of variance parameter σ² = ``entry.noise_scale``."""
        _check_gaussian(entry)
        self.spend(entry)
        return discrete_gaussian.discrete_gaussian(rng, entry.noise_scale, entry.cells)

    def discrete_gaussian_found(self, entry: LedgerEntry, rng: mechanisms.RandomSource, size: int) -> np.ndarray:
        """Spend ``entry``, then draw ``size`` discrete Gaussian values for candidates found in the
        data (partition selection's keys): their number is not released, so the entry records
        ``cells`` = 0, as :meth:`bernoulli_dyadic` does."""
        _check_gaussian(entry)
        if entry.cells != 0:
            raise ValueError(f"step {entry.step!r}: candidates found in the data are not public cells")
        self.spend(entry)
        return discrete_gaussian.discrete_gaussian(rng, entry.noise_scale, size)

    def discrete_gaussian_on_executors(self, entry: LedgerEntry, secret: vector_noise.NoiseSecret
                                       ) -> vector_noise.CellNoise:
        """:meth:`discrete_laplace_on_executors` for a discrete Gaussian entry: spend it, then hand
        out its cells' noise for the executors to draw, keyed per cell."""
        _check_gaussian(entry)
        return self._hand_out(entry, secret, vector_noise.GAUSSIAN)

    def noise(self, entry: LedgerEntry, rng: mechanisms.RandomSource) -> np.ndarray:
        """Spend ``entry``, then draw its cells' noise with the mechanism it names:
        :meth:`discrete_gaussian` for a :func:`gaussian_entry`, else :meth:`discrete_laplace`
        (for a release whose tables take either, as it chose per table: core.noise_choice)."""
        if entry.mechanism == GAUSSIAN_MECHANISM:
            return self.discrete_gaussian(entry, rng)
        return self.discrete_laplace(entry, rng)

    def noise_on_executors(self, entry: LedgerEntry, secret: vector_noise.NoiseSecret) -> vector_noise.CellNoise:
        """:meth:`noise` with the cells' noise handed out for the executors to draw, keyed per cell."""
        if entry.mechanism == GAUSSIAN_MECHANISM:
            return self.discrete_gaussian_on_executors(entry, secret)
        return self.discrete_laplace_on_executors(entry, secret)

    def exponential_mechanism(self, entry: LedgerEntry, rng: mechanisms.RandomSource, scores, *,
                              monotone: bool = False) -> int:
        """Spend ``entry``, then pick one of its ``entry.cells`` candidates with the exponential
        mechanism at entry.epsilon and quality sensitivity entry.sensitivity. The entry's
        noise_scale must be 1/c, the factor's inverse: Δq/ε when ``monotone``, else 2Δq/ε. Either
        way the privacy loss has range at most ε, so an entry marked ``bounded_range`` costs
        ε²/8 under zCDP (docs/mechanisms.md, "Privacy claim: Accounting, delta_of")."""
        self._check_selection(entry, len(scores), monotone)
        self._spend(entry)
        return mechanisms.exponential_mechanism(rng, scores, entry.epsilon, entry.sensitivity, monotone)

    def exponential_mechanism_rows(self, entry: LedgerEntry, rng: mechanisms.RandomSource, scores, *,
                                   monotone: bool = False) -> np.ndarray:
        """As :meth:`exponential_mechanism`, one choice per row of a matrix of whole-number scores,
        each among the same ``entry.cells`` candidates, all paid by the one entry: its sensitivity
        must bound how far one privacy unit moves the scores of all rows together (a user in l
        groups, Δq in each: l·Δq), so that the rows compose to entry.epsilon."""
        self._check_selection(entry, np.shape(scores)[-1], monotone)
        self._spend(entry)
        return mechanisms.exponential_mechanism_rows(rng, scores, entry.epsilon, entry.sensitivity, monotone)

    @staticmethod
    def _check_selection(entry: LedgerEntry, candidates: int, monotone: bool) -> None:
        if candidates != entry.cells:
            raise ValueError(f"step {entry.step!r} has {entry.cells} candidates but {candidates} scores")
        inverse_factor = entry.sensitivity / entry.epsilon * (1 if monotone else 2)
        if entry.noise_scale != inverse_factor:
            raise ValueError(f"step {entry.step!r} records noise scale {float(entry.noise_scale):g}; the "
                             f"mechanism it names uses {float(inverse_factor):g}")
        if entry.bounded_range and not entry.mechanism.startswith(BOUNDED_RANGE_MECHANISM):
            raise ValueError(f"step {entry.step!r}: only an {BOUNDED_RANGE_MECHANISM} may be charged as bounded "
                             f"range, not a {entry.mechanism}")
        # The monotone factor is ε-bounded range only for a quality whose scores all move one way:
        # a step charged ε²/8 with it must say so, as the ledger's reader checks the argument by it.
        if entry.bounded_range and monotone and MONOTONE_QUALITY not in entry.mechanism:
            raise ValueError(f"step {entry.step!r} uses the monotone factor; its mechanism must name a "
                             f"{MONOTONE_QUALITY}, not {entry.mechanism!r}")

    def bernoulli_dyadic(self, entry: LedgerEntry, rng: mechanisms.RandomSource, numerators, bits: int
                         ) -> np.ndarray:
        """Spend ``entry``, then draw one exact Bernoulli(numerators[i] / 2^bits) per candidate: a
        mechanism whose output is yes or no per candidate, with the probabilities its claim works
        out in advance (partition selection: docs/partition_selection.md). The candidates may be
        found in the data (the keys users contributed), so their number is a draw's length, not
        ``entry.cells``, which records only what is public."""
        _check_noise_covers_sensitivity(entry)
        self.spend(entry)
        return mechanisms.bernoulli_dyadic(rng, numerators, bits)

    @property
    def private(self) -> bool:
        """Whether every mechanism in the ledger is differentially private (the seed aside)."""
        return not any(e.not_private for e in self.entries)

    def mechanism_guarantee(self) -> str:
        """What the ledger's mechanisms guarantee when their noise is fresh."""
        if not self.private:
            return ("NONE: this release reproduces a published algorithm that is not differentially "
                    "private (see the ledger's NOT_PRIVATE entries); do not publish it")
        kind = "local differential privacy" if self.unit.model == "local" else "differential privacy"
        if self.zcdp:
            rho, delta = self.rho_spent, self.accounting.conversion_delta + self.delta_spent
            approximate = (f" ({self.delta_spent:g} of it spent outside zCDP by (epsilon, delta) steps, "
                           "Bun-Steinke approximate zCDP)") if self.delta_spent > 0 else ""
            return (f"rho-zCDP (zero-concentrated {kind}) with rho = {float(rho):.6g}, composition adding rho; "
                    f"it implies (epsilon, delta)-{kind} with epsilon = {self.accounting.epsilon_at(rho):.6g} and "
                    f"delta = {delta:g}{approximate} (Canonne-Kamath-Steinke conversion)")
        if self.delta_spent > 0:
            return f"(epsilon, delta)-{kind} with delta = {self.delta_spent:g}, sequential composition"
        return f"pure epsilon-{kind} (delta = 0), sequential composition"

    def guarantee(self) -> str:
        """What this release guarantees: nothing when its noise came from a fixed seed."""
        if self.fixed_seed and self.private:
            return f"{SEEDED_GUARANTEE}; with fresh randomness the mechanisms give {self.mechanism_guarantee()}"
        if self.condition and self.private:
            return f"{self.mechanism_guarantee()}, conditional: {self.condition}"
        return self.mechanism_guarantee()

    def to_json(self) -> dict:
        return {
            **self.unit.to_json(),
            "guarantee": self.guarantee(),
            # False when the guarantee is NONE: a flawed mechanism, or a fixed seed.
            "private": self.private and not self.fixed_seed,
            # Only *whether* a seed was fixed: its value would let anyone regenerate the noise.
            "fixed_seed": self.fixed_seed,
            **({"conditional_on": self.condition} if self.condition else {}),
            **(self._zcdp_json() if self.zcdp else {
                "epsilon_total": float(self.total),
                "epsilon_spent": float(self.spent),
                "epsilon_spent_exact": str(self.spent),
                "delta_total": self.delta_total,
                "delta_spent": self.delta_spent,
            }),
            "ledger": [e.to_json() for e in self.entries],
        }

    def _zcdp_json(self) -> dict:
        """The budget under zCDP: ρ exactly, and the (ε, δ) it is stated as (ε rounded up)."""
        accounting, spent = self.accounting, self.rho_spent
        return {
            "accounting": "zCDP",
            "rho_total": float(accounting.rho),
            "rho_total_exact": str(accounting.rho),
            "rho_spent": float(spent),
            "rho_spent_exact": str(spent),
            "epsilon_total": accounting.epsilon_at(accounting.rho),
            # What the config or call asked for (or the ε its ρ is stated as): epsilon_total is
            # the ε that ρ is converted back to, a hair below it.
            "epsilon_asked": float(self.total),
            "epsilon_spent": accounting.epsilon_at(spent),
            # (ε, δ) of the spend: δ of the conversion plus what (ε, δ) steps spent outside zCDP.
            "delta_total": accounting.conversion_delta + self.delta_total,
            "delta_spent": accounting.conversion_delta + self.delta_spent,
            "delta_conversion": accounting.conversion_delta,
            "delta_outside_zcdp": self.delta_spent,
        }


def _check_gaussian(entry: LedgerEntry) -> None:
    """A Gaussian entry's numbers must add up: σ² a variance the sampler takes, ρ = Δ₂²/(2σ²)."""
    if not entry.gaussian or entry.l2_squared is None:
        raise ValueError(f"step {entry.step!r} is not a discrete Gaussian entry")
    discrete_gaussian.as_variance(entry.noise_scale)
    if entry.rho < zcdp.gaussian_cost(entry.l2_squared, entry.noise_scale):
        raise ValueError(f"step {entry.step!r} records rho {float(entry.rho):.6g}, below its noise's "
                         f"{float(zcdp.gaussian_cost(entry.l2_squared, entry.noise_scale)):.6g}")


def _check_noise_covers_sensitivity(entry: LedgerEntry) -> None:
    """Laplace noise pays for ε only at scale ≥ sensitivity/ε: refuse an entry whose own numbers
    do not add up, unless it already says it is not private."""
    if not entry.not_private and entry.noise_scale * entry.epsilon < entry.sensitivity:
        raise ValueError(f"step {entry.step!r}: noise scale {float(entry.noise_scale):g} is below "
                         f"sensitivity/epsilon = {float(entry.sensitivity / entry.epsilon):g}")
