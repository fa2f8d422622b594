"""The entropy of the visits at each public location (paper 004), with optional visit and user
counts.

Bound: each user keeps at most M locations and at most C visits at each. Aggregate: per
location, users, visits and Σ c·ln c. Publish: the variant's noise (global, smooth or
crowd-blending sensitivity). Claim and argument: docs/location_entropy.md and docs/privacy.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import pandas as pd

from dp_spark.bounding.keys import new_salt
from dp_spark.bounding.user_locations import bounded_pairs, ranked_pairs
from dp_spark.core import accuracy
from dp_spark.core.progress import diagnostic
from dp_spark.errors import ConfigError
from dp_spark.families.location_entropy import bounds_choice as ebs
from dp_spark.families.location_entropy import entropy as le
from dp_spark.families.location_entropy import sensitivity as entropy_sensitivity
from dp_spark.families.location_entropy.sums import candidate_sums, location_sums
from dp_spark.io.checkins import check_schema, guard_figures, validate_checkins
from dp_spark.io.validation import describe_mismatch, outside_item_domain
from dp_spark.release import guards
from dp_spark.release.family import ConfigTables, Domains, Family, FamilyOutput, RunInputs, positive_int

# C's largest supported value: Limit-SS and Limit-CB tabulate LS*(C, n) in Python up to n ≈ C/ln C
# (entropy_sensitivity.smooth_sensitivity_table), a hang at C = 10^12.
MAX_VISITS_PER_LOCATION = 1_000_000
LOCATION_CHOICES = ("first_visit", "random")
AUTO = "auto"  # M or C chosen privately from public candidates (families.location_entropy.bounds_choice)


@dataclass(frozen=True)
class EntropyParams:
    """``M`` (config: locations_per_user) and ``C`` (visits_per_location) are the public bounds;
    ``k`` is the crowd of the Limit-CB variants, ``xi`` the smoothness floor and ``delta`` the δ
    of Limit-SS and Limit-CB-DP; ``outputs`` lists "entropy" and optionally "visits", "users".
    ``location_choice``: which M locations a user with more keeps: its first M by first visit
    ("first_visit", which needs the times), or a uniformly random M ("random").
    ``M`` and/or ``C`` may be "auto": chosen privately from ``M_candidates`` / ``C_candidates``
    (public; None: the defaults) with the ε share privacy.epsilon_bound (docs/bound_selection.md)."""

    variant: str = "limit"
    M: int | str = 5  # or "auto"
    C: int | str = 5
    k: int = 50
    xi: float = 1e-3
    delta: float = 1e-8
    outputs: tuple[str, ...] = ("entropy",)
    location_choice: str = "first_visit"
    algorithm: str = "entropy"
    M_candidates: Sequence[int] | None = None  # tuples once checked
    C_candidates: Sequence[int] | None = None

    def __post_init__(self):
        if self.location_choice not in LOCATION_CHOICES:
            raise ConfigError(f"algorithm.location_choice must be one of {', '.join(LOCATION_CHOICES)}, "
                              f"got {self.location_choice!r}")
        if self.variant not in le.VARIANTS:
            raise ConfigError(f"algorithm.variant must be one of {', '.join(le.VARIANTS)}, got {self.variant!r}")
        self._check_bounds()
        positive_int(self.k, "algorithm.k")
        if isinstance(self.xi, bool) or not isinstance(self.xi, (int, float)) or not self.xi > 0:
            raise ConfigError(f"algorithm.xi must be a number > 0, got {self.xi!r}")
        if isinstance(self.delta, bool) or not isinstance(self.delta, (int, float)) or not 0 < self.delta < 1:
            raise ConfigError(f"privacy.delta must be a number in (0, 1), got {self.delta!r}")
        outputs = self.outputs
        if (not isinstance(outputs, (list, tuple)) or not outputs or "entropy" not in outputs
                or any(o not in le.OUTPUTS for o in outputs) or len(set(outputs)) != len(outputs)):
            raise ConfigError(f"algorithm.outputs must list 'entropy' and optionally 'visits', 'users' once each, "
                              f"got {outputs!r}")
        object.__setattr__(self, "outputs", tuple(outputs))
        object.__setattr__(self, "xi", float(self.xi))
        object.__setattr__(self, "delta", float(self.delta))

    def _check_bounds(self) -> None:
        why_c = "the smooth-sensitivity tables are computed on the driver over about C/ln C user counts"
        for name, value, field_name, maximum, why, default in (
                ("locations_per_user", self.M, "M_candidates", None, "", ebs.DEFAULT_M_CANDIDATES),
                ("visits_per_location", self.C, "C_candidates", MAX_VISITS_PER_LOCATION, why_c,
                 ebs.DEFAULT_C_CANDIDATES)):
            candidates = getattr(self, field_name)
            if value != AUTO:
                positive_int(value, f"algorithm.{name}", maximum, why)
                if candidates is not None:
                    raise ConfigError(f"algorithm.{name}_candidates is used only with algorithm.{name} = \"auto\"")
                continue
            if self.variant == "baseline":
                raise ConfigError(f"algorithm.{name} = \"auto\" does not apply to the baseline, whose bounds are the "
                                  "public maxima; use variant \"limit\"")
            try:
                checked = ebs.candidates_checked(default if candidates is None else candidates,
                                                 f"algorithm.{name}_candidates", maximum)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            object.__setattr__(self, field_name, checked)

    @property
    def auto(self) -> bool:
        """Whether M or C is chosen privately (then the split has a part epsilon_bound)."""
        return AUTO in (self.M, self.C)

    @property
    def grid(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The candidate M and C (a fixed bound is its only candidate)."""
        return (self.M_candidates if self.M == AUTO else (self.M,),
                self.C_candidates if self.C == AUTO else (self.C,))

    @property
    def spends_delta(self) -> bool:
        return self.variant in le.DELTA_VARIANTS


def entropy_table(items, release: le.EntropyRelease) -> pd.DataFrame:
    table = pd.DataFrame({"location_id": items.ids, "noisy_entropy": release.entropy})
    for name, values in release.extra.items():
        table[f"noisy_{name}"] = values
    return table


def timed_bound(params: EntropyParams) -> int | None:
    """The M whose users' check-ins validation checks for times: with location_choice =
    "first_visit", M (with M chosen privately, its smallest candidate, the strictest: a user it
    truncates needs a time on every check-in); None when the choice is random (time unused)."""
    if params.location_choice != "first_visit":
        return None
    return params.grid[0][0]


def bounding_salt(params: EntropyParams, seed: int | None) -> int | None:
    """The salt of a random choice of each user's M locations (None: by first visit)."""
    return None if params.location_choice == "first_visit" else new_salt(seed, "entropy_locations")


def run(params: EntropyParams, inputs: RunInputs) -> FamilyOutput:
    if params.auto:
        return _run_auto(params, inputs)
    items = inputs.domains.items
    records, diagnostics = validate_checkins(inputs.records, items, timed_bound(params),
                                             strict=inputs.guards.strict, progress=inputs.progress)
    diagnostic(inputs.progress, f"{diagnostics['rows_read']:,} check-in rows read")
    inputs.progress(f"check-in rows read; bounding users to M = {params.M} locations "
                    f"and C = {params.C} visits")
    bounds = le.Bounds(params.M, params.C)
    sums = location_sums(bounded_pairs(records, bounds.M, bounds.C, bounding_salt(params, inputs.seed)), items)
    coverage = _coverage(diagnostics, sums, params)

    def explain() -> str:
        outside = outside_item_domain(inputs.records, items)
        return describe_mismatch(inputs.records, "item_id", outside, f"the location set is {items.description}")

    guards.tell(inputs.guards, coverage, inputs.progress, explain)
    decided = _guarded(inputs, coverage.users_truncated, coverage.bound)  # before any noise
    stats = le.stats_of(sums)
    release = le.publish(stats, params.variant, bounds, inputs.split, inputs.budget, inputs.rng,
                         delta=params.delta, k=params.k, xi=params.xi)
    diagnostics = {**diagnostics, **release.diagnostics,
                   "locations_with_users_after_bounding": int((stats.users > 0).sum()), "coverage": coverage.to_json()}
    return FamilyOutput({"location_entropy": entropy_table(items, release)}, diagnostics, guards=decided)


def _guarded(inputs: RunInputs, users_truncated: int | None, bound: str | None) -> dict | None:
    """The guards' decision (release.guards.check); their share figure is counted in a pass of
    its own, only when a guard is set."""
    if not inputs.guards.active:
        return None
    users, share = guard_figures(inputs.records, inputs.domains.items)
    return guards.check(inputs, guards.GuardFigures(users, share, users_truncated), bound=bound)


def _run_auto(params: EntropyParams, inputs: RunInputs) -> FamilyOutput:
    """M and/or C chosen privately (docs/bound_selection.md, "Privacy claim: entropy_bound_selection"):
    one aggregation gives the location sums at every candidate pair, the exponential mechanism
    picks one with epsilon_bound, and the release uses that pair's sums, like a fixed-bound run."""
    items = inputs.domains.items
    Ms, Cs = params.grid
    if params.M == AUTO and inputs.guards.max_truncated_fraction is not None:
        raise ConfigError("guards.max_truncated_fraction needs a public M; with algorithm.locations_per_user = "
                          "\"auto\" M is chosen privately, after the guards are checked")
    records, diagnostics = validate_checkins(inputs.records, items, timed_bound(params),
                                             strict=inputs.guards.strict, progress=inputs.progress)
    diagnostic(inputs.progress, f"{diagnostics['rows_read']:,} check-in rows read")
    inputs.progress(f"check-in rows read; location sums at {len(Ms) * len(Cs)} "
                    f"candidate bounds (M in {list(Ms)}, C in {list(Cs)})")
    grid = candidate_sums(ranked_pairs(records, Ms[-1], Cs[-1], bounding_salt(params, inputs.seed)), items, Ms, Cs)

    def explain() -> str:
        outside = outside_item_domain(inputs.records, items)
        return describe_mismatch(inputs.records, "item_id", outside, f"the location set is {items.description}")

    # Before the choice (noise), only what does not depend on it can be guarded: the location set's
    # coverage, and truncation when M is fixed.
    before = guards.Coverage(diagnostics["rows_read"], {"location_id": diagnostics["rows_outside_location_set"]},
                             users=grid.coverage["users"],
                             users_truncated=grid.coverage["users_truncated"][0] if len(Ms) == 1 else None,
                             bound=f"M = {Ms[0]} locations" if len(Ms) == 1 else None)
    guards.tell(inputs.guards, before, inputs.progress, explain)
    decided = _guarded(inputs, before.users_truncated, before.bound)
    i, j = ebs.choose_bounds(grid, params.variant, inputs.split["epsilon_entropy"], len(items),
                             inputs.split["epsilon_bound"], inputs.budget, inputs.rng, k=params.k,
                             delta=params.delta, xi=params.xi)
    bounds = le.Bounds(Ms[i], Cs[j])
    sums = grid.at(i, j)
    coverage = _coverage(diagnostics, sums, bounds)
    for line in guards.coverage_lines(coverage)[1:]:
        diagnostic(inputs.progress, line)
    stats = le.stats_of(sums)
    release = le.publish(stats, params.variant, bounds, inputs.split, inputs.budget, inputs.rng,
                         delta=params.delta, k=params.k, xi=params.xi, step_suffix=CHOSEN_SUFFIX)
    diagnostics = {**diagnostics, **release.diagnostics,
                   "locations_with_users_after_bounding": int((stats.users > 0).sum()), "coverage": coverage.to_json()}
    # M and C are outputs of the exponential mechanism: private, and needed to read the entropies.
    return FamilyOutput({"location_entropy": entropy_table(items, release)}, diagnostics,
                        chosen={"M": bounds.M, "C": bounds.C}, guards=decided)


# The release's ledger steps after a private choice of M, C: their sensitivity and scale follow
# from the chosen bounds (a DP output), which the report audit allows for these steps only.
CHOSEN_SUFFIX = " (at the chosen M, C)"


def _coverage(diagnostics: dict, sums, params) -> guards.Coverage:
    """What bounding to M locations and C visits kept, counted in the location sums' own job.
    ``params``: anything with the bounds M and C."""
    counted = sums.coverage
    return guards.Coverage(
        diagnostics["rows_read"], {"location_id": diagnostics["rows_outside_location_set"]}, users=counted["users"],
        rows_kept_by_bounding=int(sums.users.sum()), users_truncated=counted["users_truncated"],
        bound=f"M = {params.M} locations, C = {params.C} visits", kept_of=counted["pairs"],
        unit="user-location pairs",
        extra={"visits_in_domain": counted["visits"], "visits_kept_by_bounding": int(sums.visits.sum())})


def _describe(params: EntropyParams, epsilon: Fraction, domains: Domains) -> str:
    Ms, Cs = params.grid
    m = params.M if params.M != AUTO else f"chosen privately from {list(Ms)}"
    c = params.C if params.C != AUTO else f"chosen privately from {list(Cs)}"
    return (f"location entropy ({params.variant}) with epsilon {float(epsilon):g}, M = {m}, C = {c}; "
            f"{len(domains.items):,} public locations; outputs {', '.join(params.outputs)}")


def _report_section(params: EntropyParams) -> dict:
    parameters = {"variant": params.variant, "M": params.M, "C": params.C, "k": params.k, "xi": params.xi,
                  "delta": params.delta, "outputs": list(params.outputs), "location_choice": params.location_choice}
    for name, candidates in (("M_candidates", params.M_candidates), ("C_candidates", params.C_candidates)):
        if candidates is not None:
            parameters[name] = list(candidates)
    return {"parameters": parameters, "specification": le.SPEC_SECTIONS.get(params.variant),
            "post_processing": None, "publisher": None}


GRID = Fraction(1, 1 << le.GRID_BITS)
ROUNDING_NOTE = "the entropy is rounded to the grid before the noise (at most half a step more)"


def _global_entropy_noise(params: EntropyParams, epsilon: Fraction, per_location: float, alpha: float, note: str
                          ) -> accuracy.Accuracy:
    """Limit and baseline (and Limit-CB): scale M·(⌈S/g⌉ + 1)/ε grid steps (le.laplace_entropy)."""
    sensitivity_steps = params.M * (math.ceil(per_location * (1 << le.GRID_BITS)) + 1)
    return accuracy.discrete_laplace(Fraction(sensitivity_steps) / epsilon * GRID, alpha, grid=GRID, note=note)


def _entropy_accuracy(params: EntropyParams, split: dict[str, Fraction], alpha: float) -> accuracy.Accuracy:
    epsilon = split["epsilon_entropy"]
    if params.variant in ("limit", "baseline"):
        return _global_entropy_noise(params, epsilon, entropy_sensitivity.global_sensitivity(params.C), alpha,
                                     ROUNDING_NOTE)
    if params.variant == "limit_cb":
        return _global_entropy_noise(
            params, epsilon, entropy_sensitivity.crowd_sensitivity(params.C, params.k), alpha,
            f"{ROUNDING_NOTE}; locations with fewer than k = {params.k} users are not published (NaN), which "
            "depends on their exact user count: NOT differentially private")
    if params.variant == "limit_cb_dp":
        epsilon -= epsilon * le.SELECTION_SHARE
    selected = (f"; only locations whose noisy user count reaches k = {params.k} are published"
                if params.variant == "limit_cb_dp" else "")
    return accuracy.discrete_laplace(
        le.smooth_scale_floor(params.M, epsilon, params.xi), alpha, grid=GRID, kind=accuracy.LOWER_BOUND,
        distribution=f"discrete Laplace on the grid 2^-{le.GRID_BITS}, smooth sensitivity",
        note="each location's noise scale depends on its user count after bounding (private), so no number fits "
             f"every location: these are the numbers at the xi = {params.xi:g} floor, the least noise any location "
             f"gets; locations with few users get much more; {ROUNDING_NOTE}{selected}")


def _accuracy(params: EntropyParams, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
              alpha: float) -> dict:
    """The entropy's noise by variant; visits and users have discrete Laplace at L1 sensitivity M·C and M."""
    if params.auto:
        return _auto_accuracy(params, epsilon, domains, split, alpha)
    columns = {"noisy_entropy": _entropy_accuracy(params, split, alpha)}
    for name, sensitivity in (("visits", params.M * params.C), ("users", params.M)):
        if name in params.outputs:
            columns[f"noisy_{name}"] = accuracy.discrete_laplace(Fraction(sensitivity) / split[f"epsilon_{name}"],
                                                                 alpha)
    return {"location_entropy": columns}


def _auto_accuracy(params: EntropyParams, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
                   alpha: float) -> dict:
    """With M or C chosen privately the noise is known only after the run: these are the numbers
    at the largest candidates (M_K, C_K), the most noise any choice gives (kind upper_bound), and
    for Limit-SS and Limit-CB-DP's entropy, whose numbers are already a lower bound, at the
    smallest M (the least). No column is exact, so the table gets no ci95 column."""
    Ms, Cs = params.grid
    at = {name: dataclasses.replace(params, M=M, C=C, M_candidates=None, C_candidates=None)
          for name, M, C in (("most", Ms[-1], Cs[-1]), ("least", Ms[0], Cs[0]))}
    most = _accuracy(at["most"], epsilon, domains, split, alpha)["location_entropy"]
    least = _accuracy(at["least"], epsilon, domains, split, alpha)["location_entropy"]
    which = {(True, True): "M and C are", (True, False): "M is", (False, True): "C is"}[
        (params.M == AUTO, params.C == AUTO)]
    chosen = (f"{which} chosen privately from public candidates (privacy.json algorithm.chosen after the run) "
              "and the noise grows with M and C: ")
    columns = {}
    for column, noise in most.items():
        if noise.kind == accuracy.LOWER_BOUND:
            noise = least[column]
            columns[column] = dataclasses.replace(noise, note=f"{chosen}these are the numbers at the smallest "
                                                              f"M = {Ms[0]}; {noise.note}")
        else:
            columns[column] = dataclasses.replace(
                noise, kind=accuracy.UPPER_BOUND,
                note=f"{chosen}these are the numbers at the largest candidates M = {Ms[-1]}, C = {Cs[-1]}, the most "
                     "noise possible" + (f"; {noise.note}" if noise.note else ""))
    return {"location_entropy": columns}


# A location's entropy lies in [0, ln n] for its n users (at most ln n, with even visits). Noise whose
# 95% half-width h is wider than that whole range for every location of fewer than e^h users makes
# such locations noise; above this many, the plan and the run warn (on small check-in
# data, publishing 0 everywhere beat every variant at epsilon <= 1).
USELESS_BELOW_USERS = 10


def _warnings(params: EntropyParams, split: dict[str, Fraction], alpha: float) -> list[str]:
    """The plan's and the run's warning when the entropy's noise is wider than the entropy's whole
    range at every location of fewer than USELESS_BELOW_USERS users (with M or C chosen privately:
    even at the smallest candidates, the least noise any choice gives). Public: config only."""
    if "entropy" not in params.outputs:
        return []
    if params.auto:
        (M, *_), (C, *_) = params.grid
        params = dataclasses.replace(params, M=M, C=C, M_candidates=None, C_candidates=None)
    noise = _entropy_accuracy(params, split, alpha)
    width = noise.ci95_halfwidth
    if width <= math.log(USELESS_BELOW_USERS):
        return []
    users = f"{math.exp(width):,.0f}" if width < 30 else f"e^{width:.0f}"
    least = ", at least" if noise.kind == accuracy.LOWER_BOUND else ""
    return [f"the entropy's noise (±{width:.3g}, 95%{least}) is wider "
            f"than the whole range of the entropy, [0, ln n], of every location with fewer than n = {users} users: "
            "those locations are released as noise, and 0 would usually be closer to their truth; raise epsilon, "
            "lower M or C, or publish only busy locations"]


def from_config(c: ConfigTables) -> EntropyParams:
    """Items are the public locations; M and C are public bounds. The baseline variant's
    defaults are Fig. 2's public bounds C_max = 1000, M_max = 100."""
    algorithm = c.algorithm
    for key in ("l", "m", "d", "consistent"):
        if key in algorithm:
            raise ConfigError(f"algorithm.{key} is not used by entropy; its bounds are "
                              "algorithm.locations_per_user (M) and algorithm.visits_per_location (C)")
    if c.attributes is not None:
        raise ConfigError("domain.attributes is not used by entropy; domain.items is the public location set")
    if c.publisher:
        raise ConfigError("entropy adds its own noise; remove [publisher]")
    variant = algorithm.get("variant", "limit")
    baseline = variant == "baseline"
    candidates = {}
    for key, field_name in (("locations_per_user_candidates", "M_candidates"),
                            ("visits_per_location_candidates", "C_candidates")):
        if key in algorithm:
            value = algorithm[key]
            if not isinstance(value, list):
                raise ConfigError(f"algorithm.{key} must be a list of integers such as [1, 2, 5, 10], got {value!r}")
            candidates[field_name] = tuple(value)
    params = EntropyParams(
        variant=variant,
        M=algorithm.get("locations_per_user", 100 if baseline else 5),
        C=algorithm.get("visits_per_location", 1000 if baseline else 5),
        k=algorithm.get("k", 50), xi=algorithm.get("xi", 1e-3), delta=c.privacy.get("delta", 1e-8),
        outputs=algorithm.get("outputs", ["entropy"]),
        location_choice=algorithm.get("location_choice", "first_visit"),
        **candidates,
    )
    for key in c.parts:
        if key == "epsilon_bound":
            if not params.auto:
                raise ConfigError("privacy.epsilon_bound is spent only when algorithm.locations_per_user or "
                                  "algorithm.visits_per_location is \"auto\"")
        elif key.removeprefix("epsilon_") not in params.outputs:
            raise ConfigError(f"privacy.{key} is not an output of this entropy job (outputs: "
                              f"{', '.join(params.outputs)})")
    return params


def _default_split(params: EntropyParams, epsilon: Fraction) -> dict[str, Fraction]:
    """The outputs share ε equally (le.default_split); with M or C "auto", epsilon_bound takes a
    tenth first."""
    if not params.auto:
        return le.default_split(epsilon, params.outputs)
    bound = epsilon * ebs.DEFAULT_SHARE
    return {"epsilon_bound": bound, **le.default_split(epsilon - bound, params.outputs)}


FAMILY = Family(
    name="location_entropy", algorithms=("entropy",), params_type=EntropyParams,
    default_split=lambda params, epsilon, domains: _default_split(params, epsilon),
    split_keys=lambda params, domains: (("epsilon_bound",) if params.auto else ())
    + tuple(f"epsilon_{name}" for name in params.outputs),
    run=run, describe=_describe, report_section=_report_section, from_config=from_config, reads="checkins",
    config_keys=("variant", "locations_per_user", "visits_per_location", "k", "xi", "outputs", "location_choice",
                 "locations_per_user_candidates", "visits_per_location_candidates"),
    delta=lambda params: params.delta if params.spends_delta else 0.0, accuracy=_accuracy, warnings=_warnings,
    check_schema=lambda params, records, domains: check_schema(records, domains.items,
                                                               params.location_choice == "first_visit"),
    output_rows=lambda params, domains: {"location_entropy": len(domains.items)},
    not_private_warning=("WARNING: Limit-CB is only crowd-blending private, NOT differentially private; "
                         "privacy.json says why."),
)
