"""A DP estimate of what bounding removed: the records a count release kept, and at least how many
it dropped, so that its readers can see the bias that the noise's ± leaves out.

A counts release keeps at most l records per user. Each count is then the count of the records
kept, never above the true count, and often far below it (on MovieLens 1M at l = 30, a movie
rated 3,428 times is released near 1,240 ± 190). Two figures say how far, from the users' in-domain record counts n_u:

* kept K = Σ_u min(n_u, l): one user adds at most l (L1 sensitivity l);
* removed, counted up to a public cap B = CAP_FACTOR·l per user, D_B = Σ_u min((n_u − l)⁺, B − l):
  one user adds at most B − l. Records past B are not counted, so D_B is a lower bound on what
  was removed.

Each gets discrete Laplace noise at its sensitivity with half of ``epsilon_bounding`` (two ledger
steps; sequential composition), or under zCDP half of its ρ (each at ε_bounding/√2, rounded down).
The share kept is then at most K/(K + D_B) ≤ (K̂ + h_K)/(K̂ + h_K + max(D̂ − h_D, 0)) with
probability at least 95%, h_K and h_D the two-sided 95% half-widths of the two noises: each
one-sided statement fails with probability at most 2.5%, both together at most 5% (a union
bound). Post-processing of the two DP figures. With a per-item cap c (Gaussian
counts) some of the min(n_u, l) records are dropped too: the records kept are then at most K, and
both statements still hold. Claim: docs/accuracy.md, "Privacy claim: bounding estimate".
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pandas as pd

from dp_spark.bounding.user_records import capped_total
from dp_spark.core import accuracy, zcdp
from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource

SHARE = Fraction(1, 20)  # of a counts release's ε (under zCDP: of ρ) for the estimate
CAP_FACTOR = 8  # the removed records are counted up to CAP_FACTOR·l per user
KEPT_STEP = "bounding: kept"
REMOVED_STEP = "bounding: removed"
# Each figure's two-sided 95% interval bounds it on one side with probability 97.5%, so both
# one-sided bounds hold at once with probability at least 95%.
EACH_ALPHA = 0.05
COUNTS, MEANS = "counts", "means"  # what the release publishes of the records kept
BIAS_NOTES = {
    COUNTS: ("each count is of the records kept (at most {bound} per user), never more than the true count: "
             "the counts are biased down by what bounding removed, which the noise's ± does not show"),
    # A user's kept records are a sample of theirs (SRA) or their most popular (HPA), so a user with
    # many records weighs less in a mean than in the mean of all records: no bound on that bias
    # follows from the two figures, only how much of the data the means stand for.
    MEANS: ("each mean and its interval are of the records kept (at most {bound} per user), clipped to the range: "
            "the interval covers the mean of those records, not the mean of all an item's records, which can lie "
            "outside it when bounding removed many"),
}


@dataclass(frozen=True)
class BoundingPlan:
    """The estimate's public side: the bound, its cap, and the ε of each figure (half of
    epsilon_bounding each, or under zCDP half of its ρ each)."""

    bound: int
    epsilon: Fraction  # epsilon_bounding, both figures together
    zcdp: bool = False  # whether the budget is ρ-zCDP (the share is then ρ_bounding = ε²/2)
    about: str = COUNTS  # what the release publishes of the records kept: its bias note

    def __post_init__(self):
        if self.about not in BIAS_NOTES:
            raise ValueError(f"about must be one of {', '.join(BIAS_NOTES)}, got {self.about!r}")
        if isinstance(self.bound, bool) or not isinstance(self.bound, int) or self.bound < 1:
            raise ValueError(f"the bound must be a positive integer, got {self.bound!r}")
        if not self.epsilon > 0:
            raise ValueError(f"epsilon_bounding must be positive, got {self.epsilon!r}")

    @property
    def cap(self) -> int:
        return CAP_FACTOR * self.bound

    @property
    def each(self) -> Fraction:
        """Each figure's ε: half of epsilon_bounding, or under zCDP the ε of half its ρ."""
        if self.zcdp:
            return zcdp.epsilon_for_rho(zcdp.pure_cost(Fraction(self.epsilon)) / 2)
        return Fraction(self.epsilon) / 2

    def entries(self) -> tuple[LedgerEntry, LedgerEntry]:
        each = self.each
        kept, removed = Fraction(self.bound), Fraction(self.cap - self.bound)
        return (LedgerEntry(KEPT_STEP, "discrete Laplace", each, kept, kept / each, 1),
                LedgerEntry(REMOVED_STEP, "discrete Laplace", each, removed, removed / each, 1))

    def halfwidths(self, alpha: float) -> tuple[float, float]:
        """The (1 − α) half-widths of the two figures' noise, in records."""
        return tuple(accuracy.discrete_laplace_halfwidth(entry.noise_scale, alpha) for entry in self.entries())


@dataclass(frozen=True)
class BoundingFigures:
    """The two figures before noise: NOT private."""

    kept: int
    removed_to_cap: int


def figures(users_by_n: pd.Series, plan: BoundingPlan) -> BoundingFigures:
    """K and D_B from the number of users (values) with each in-domain record count n (index):
    a user's records past l up to the cap are min(n, B) − min(n, l) = min((n − l)⁺, B − l)."""
    kept = capped_total(users_by_n, plan.bound)
    return BoundingFigures(kept, capped_total(users_by_n, plan.cap) - kept)


def kept_share_at_most(kept: int, removed: int, plan: BoundingPlan) -> float | None:
    """The 95% upper bound on the share of in-domain records kept, from the noisy figures (None when
    the figures cannot bound it: nothing is known kept or removed)."""
    h_kept, h_removed = plan.halfwidths(EACH_ALPHA)
    high_kept, low_removed = max(kept + h_kept, 0.0), max(removed - h_removed, 0.0)
    if high_kept + low_removed <= 0:
        return None
    return high_kept / (high_kept + low_removed)


def kept_share(kept: int, removed: int) -> float | None:
    """The share kept as the noisy figures give it, each clipped at zero (an estimate of an upper bound)."""
    kept, removed = max(kept, 0), max(removed, 0)
    return kept / (kept + removed) if kept + removed else None


def planned_section(plan: BoundingPlan, alpha: float, chosen_later: bool = False) -> dict:
    """privacy.json's ``accuracy.bounding`` before the run: what will be estimated and how well
    (``chosen_later``: at the largest candidate bound, the most noise; kind upper_bound)."""
    kept, removed = plan.entries()
    kind = accuracy.UPPER_BOUND if chosen_later else accuracy.EXACT
    said = ("the bound is chosen privately: these are the figures at the largest candidate, the most noise; "
            "the run states them at the chosen bound") if chosen_later else ""
    return {
        "about": plan.about,
        "bias": BIAS_NOTES[plan.about].format(bound=plan.bound) + "; unknown before the run"
                + (", between 0 and the whole count" if plan.about == COUNTS else ""),
        "estimate": ("the run publishes the records kept and (counted up to the cap per user) the records removed, "
                     "each with discrete Laplace noise, and the share kept at most (95%); docs/accuracy.md"),
        "cap_per_user": plan.cap,
        "epsilon": float(plan.epsilon),
        "records_kept": accuracy.discrete_laplace(kept.noise_scale, alpha, kind=kind).to_json(),
        "records_removed": accuracy.discrete_laplace(removed.noise_scale, alpha, kind=kind).to_json(),
        **({"note": said} if said else {}),
    }


def noisy_figures(users_by_n: pd.Series, plan: BoundingPlan, budget: Budget, rng: RandomSource) -> tuple[int, int]:
    """K and D_B, each with discrete Laplace noise at its sensitivity (l; B − l) over half of ε,
    paid from ``budget`` (ledger steps KEPT_STEP and REMOVED_STEP): DP outputs."""
    true = figures(users_by_n, plan)
    kept_entry, removed_entry = plan.entries()
    return (int(true.kept + budget.discrete_laplace(kept_entry, rng)[0]),
            int(true.removed_to_cap + budget.discrete_laplace(removed_entry, rng)[0]))


def estimate(users_by_n: pd.Series, plan: BoundingPlan, budget: Budget, rng: RandomSource,
             alpha: float = accuracy.DEFAULT_ALPHA) -> dict:
    """Draw the two figures (paid from ``budget``) and return privacy.json's ``accuracy.bounding``:
    the planned section with the noisy figures and the share they bound (DP outputs)."""
    kept, removed = noisy_figures(users_by_n, plan, budget, rng)
    share_high, share = kept_share_at_most(kept, removed, plan), kept_share(kept, removed)
    return {**planned_section(plan, alpha), "records_kept_noisy": kept, "records_removed_at_least_noisy": removed,
            "kept_share_noisy": None if share is None else round(share, 6),
            "kept_share_at_most_95": None if share_high is None else round(share_high, 6)}


def noise_warning(bounding: dict, tables: dict[str, tuple[int, float]]) -> str | None:
    """A warning when a table's noise (95% half-width) is wider than its average count, the noisy
    records kept over its cells: most of its counts are then noise (post-processing of DP outputs
    and public numbers). ``tables``: {name: (cells, half-width)}."""
    kept = max(bounding["records_kept_noisy"], 0)
    worse = [(name, kept / cells, width) for name, (cells, width) in tables.items() if cells and width > kept / cells]
    if not worse:
        return None
    said = "; ".join(f"{name} {average:,.3g} against ±{width:,.4g}" for name, average, width in worse)
    return (f"the noise is wider than the average count ({said}: the records kept, a DP estimate, over the cells): "
            "most counts are mostly noise, and only counts well above the ± say anything")
