"""Column counts of rows of distinct items with the row limit θ chosen privately: DPSense and
DPSense-S (paper 001).

Bound: each user's row of distinct items is cut to θ (normalised or sampled), θ (and DPSense-S's
scale α) chosen by the exponential mechanism. Aggregate: column sums. Publish: discrete Laplace
at scale θ/ε. Claim and argument: docs/dpsense.md and docs/privacy.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from dp_spark.bounding import item_rows
from dp_spark.core import accuracy, noise_choice
from dp_spark.core.accounting import Noise, check_noise
from dp_spark.core.discrete_gaussian import variance_at_least
from dp_spark.core.progress import diagnostic
from dp_spark.errors import ConfigError
from dp_spark.families.dpsense import columns as item_columns
from dp_spark.families.dpsense import theta as dpsense
from dp_spark.io.validation import ValidatedRecords, check_schema, validate_records
from dp_spark.release import guards
from dp_spark.release.family import ConfigTables, Domains, Family, FamilyOutput, RunInputs, rows_per_user

ALGORITHMS = ("dpsense", "dpsense_s")


@dataclass(frozen=True)
class DPSenseParams:
    """``theta_max``: the largest row limit θ the mechanism may choose; ``limit``: how a long row
    is cut to θ ("normalize": every item weighs θ/r; "sample": θ of its items at random)."""

    algorithm: str = "dpsense"
    theta_max: int = dpsense.DEFAULT_THETA_MAX
    limit: str = "normalize"
    noise: str = "laplace"  # privacy.noise: "gaussian" or "auto" give the column counts discrete Gaussian noise

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm {self.algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
        rows_per_user(self.theta_max, "algorithm.theta_max")
        if self.limit not in item_rows.LIMITS:
            raise ConfigError(f"algorithm.limit must be one of {', '.join(item_rows.LIMITS)}, got {self.limit!r}")
        check_noise(self.noise)

    @property
    def scaled(self) -> bool:
        return self.algorithm == "dpsense_s"


def gaussian(params: DPSenseParams, theta: int, epsilon_counts: Fraction) -> bool:
    """Whether the column counts at row limit ``theta`` (a DP output) get discrete Gaussian noise:
    with "gaussian", or with "auto" where its variance is the lower (core.noise_choice)."""
    if params.noise == Noise.LAPLACE:
        return False
    unit = dpsense.grid_unit(params.limit)
    return noise_choice.chosen(params.noise, theta * unit, dpsense.column_l2_squared(theta, params.limit),
                               epsilon_counts) == noise_choice.GAUSSIAN


def _limited_counts(params: DPSenseParams, inputs: RunInputs,
                    validated: ValidatedRecords) -> tuple[np.ndarray, int, Fraction, dict]:
    """Bound and aggregate: each user's row (from validation's pass), θ (and α) chosen by the
    exponential mechanism from the length aggregates, the column counts of the rows limited to θ,
    and what the limit kept (all NOT private but θ and α)."""
    items, split = inputs.domains.items, inputs.split
    # Validation collected the rows and their users by length in its own pass; its cache holds
    # them, and validated.release() drops it.
    rows = item_rows.Rows(validated.item_sets, validated.users_by_items, owned=False)
    try:
        if params.scaled:
            by_length, long_units = item_columns.length_by_column(rows, items, params.theta_max,
                                                                  grid_bits=dpsense.QUALITY_GRID_BITS)
            theta, alpha = dpsense.choose_theta_alpha(by_length, long_units, params.theta_max, split, inputs.budget,
                                                      inputs.rng)
        else:
            theta = dpsense.choose_theta(item_columns.length_histogram(rows, params.theta_max), params.theta_max,
                                         len(items), split, inputs.budget, inputs.rng)
            alpha = Fraction(1)
        counts = item_columns.limited_counts(rows, items, theta, params.limit, inputs.seed,
                                             grid_bits=dpsense.GRID_BITS)
        truncation = rows.truncation(theta)
    finally:
        rows.release()
    return counts, theta, alpha, truncation


def run(params: DPSenseParams, inputs: RunInputs) -> FamilyOutput:
    validated = validate_records(inputs.records, inputs.domains.items, None, item_sets=True,
                                 strict=inputs.guards.strict, progress=inputs.progress)
    rows_read, outside = validated.diagnostics["rows_read"], validated.rows_outside_domain
    try:
        # θ is chosen with noise, so before the noise only the domain's coverage can be guarded.
        guards.tell(inputs.guards, guards.Coverage(rows_read, outside, users=int(validated.users_by_n.sum())),
                    inputs.progress, validated.explain)
        decided = guards.check(inputs, guards.figures_of(validated))
        inputs.progress("records read; bounding and counting")
        diagnostic(inputs.progress, f"{rows_read:,} records read")
        counts, theta, alpha, truncation = _limited_counts(params, inputs, validated)
    finally:
        validated.release()
    epsilon_counts = inputs.split["epsilon_counts"]
    noisy = dpsense.publish_columns(counts, theta, params.limit, epsilon_counts, inputs.budget, inputs.rng,
                                    gaussian=gaussian(params, theta, epsilon_counts)) * float(alpha)
    table = pd.DataFrame({"item_id": inputs.domains.items.ids, "noisy_count": noisy})
    # Rows here are a user's distinct items; bounding keeps Σ min(r, θ) of them (by mass, when normalised).
    coverage = guards.Coverage(rows_read, outside, users=truncation["users"],
                               rows_kept_by_bounding=truncation["kept"], users_truncated=truncation["truncated"],
                               bound=f"theta = {theta}", kept_of=truncation["pairs"],
                               unit="distinct (user, item) pairs")
    for line in guards.coverage_lines(coverage)[1:]:
        diagnostic(inputs.progress, line)
    # θ* and α* are outputs of the exponential mechanism: private, and needed to read the counts.
    return FamilyOutput({"item_counts": table}, {**validated.diagnostics, "coverage": coverage.to_json()},
                        chosen={"theta": theta, "alpha": float(alpha)}, guards=decided)


def _describe(params: DPSenseParams, epsilon: Fraction, domains: Domains) -> str:
    noise = "" if params.noise == Noise.LAPLACE else f", {params.noise} noise (zCDP)"
    return (f"{params.algorithm.upper()} with epsilon {float(epsilon):g}, theta chosen privately from "
            f"1..{params.theta_max}, limit by {params.limit}{noise}; {len(domains.items):,} columns (items)")


def accuracy_at(params: DPSenseParams, split: dict[str, Fraction], theta: int, scale_alpha: Fraction | float,
                alpha: float, kind: str = accuracy.EXACT, note: str = "") -> accuracy.Accuracy:
    """The noise of the column counts at row limit θ (and DPSense-S's scale α): discrete Laplace
    of scale θ/ε_counts, on the grid 2^-10 when rows are normalised, times α; or the discrete
    Gaussian of σ² = θ/ε_counts² (in grid units θ·u²/ε²) under zCDP."""
    epsilon_counts = split["epsilon_counts"]
    if gaussian(params, theta, epsilon_counts):
        unit = dpsense.grid_unit(params.limit)
        variance = variance_at_least(Fraction(dpsense.column_l2_squared(theta, params.limit)) / epsilon_counts ** 2)
        name = "discrete Gaussian" + ("" if unit == 1 else f" on the grid 2^-{dpsense.GRID_BITS}")
        return accuracy.discrete_gaussian(variance, alpha, divisor=unit / float(scale_alpha), kind=kind, note=note,
                                          distribution=name)
    grid = 1 if params.limit == "sample" else Fraction(1, 1 << dpsense.GRID_BITS)
    return accuracy.discrete_laplace(Fraction(theta) / split["epsilon_counts"], alpha, grid=grid,
                                     divisor=1 / float(scale_alpha), kind=kind, note=note)


def _accuracy(params: DPSenseParams, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
              alpha: float) -> dict:
    """θ (and α) are chosen privately, so before the run only the most noise is known: θ = θ_max
    (and α = 3). The noise grows with θ and α, so these numbers bound it."""
    most_alpha = max(dpsense.ALPHAS) if params.scaled else Fraction(1)
    chosen = "theta and alpha" if params.scaled else "theta"
    noise = ("discrete Gaussian of sigma sqrt(theta)/epsilon_counts" if gaussian(params, params.theta_max,
                                                                                  split["epsilon_counts"])
             else "discrete Laplace of scale theta/epsilon_counts")
    note = (f"the noise depends on {chosen}, chosen privately (privacy.json algorithm.chosen after the run): "
            f"{noise}{' times alpha' if params.scaled else ''}; these are "
            f"the numbers at theta = theta_max = {params.theta_max}"
            + (f" and alpha = {float(most_alpha):g}" if params.scaled else "")
            + ", the most noise possible; limiting each row to theta adds a bias not shown")
    return {"item_counts": {"noisy_count": accuracy_at(params, split, params.theta_max, most_alpha, alpha,
                                                       accuracy.UPPER_BOUND, note)}}


def from_config(c: ConfigTables) -> DPSenseParams:
    """A user's row is its set of distinct items; θ is chosen privately, so there is no
    per-user bound to set, only the largest θ to consider."""
    name = c.name
    for key in ("l", "m", "d", "consistent"):
        if key in c.algorithm:
            raise ConfigError(f"algorithm.{key} is not used by {name}: it chooses its row limit θ privately "
                              "(set algorithm.theta_max, the largest θ it may choose)")
    if c.attributes is not None:
        raise ConfigError(f"domain.attributes is not used by {name}: it publishes column (item) counts only")
    for key in c.parts:
        if key not in ("epsilon_theta", "epsilon_counts"):
            raise ConfigError(f"privacy.{key} is not used by {name}; its parts are epsilon_theta and epsilon_counts")
    if c.publisher:
        raise ConfigError(f"{name} adds its own noise (discrete Laplace at scale θ/ε); remove [publisher]")
    theta_max = rows_per_user(c.algorithm.get("theta_max", dpsense.DEFAULT_THETA_MAX), "algorithm.theta_max")
    return DPSenseParams(name, theta_max, c.algorithm.get("limit", "normalize"), c.privacy.get("noise", "laplace"))


FAMILY = Family(
    name="dpsense", algorithms=ALGORITHMS, params_type=DPSenseParams,
    default_split=lambda params, epsilon, domains: dpsense.default_split(epsilon),
    split_keys=lambda params, domains: ("epsilon_theta", "epsilon_counts"),
    run=run, describe=_describe, from_config=from_config, config_keys=("theta_max", "limit"), accuracy=_accuracy,
    check_schema=lambda params, records, domains: check_schema(records, domains.items),
    output_rows=lambda params, domains: {"item_counts": len(domains.items)},
    report_section=lambda params: {"parameters": {"theta_max": params.theta_max, "limit": params.limit,
                                                  **({"noise": params.noise} if params.noise != Noise.LAPLACE else {})},
                                   "specification": dpsense.SPEC_SECTIONS[params.algorithm],
                                   "post_processing": None, "publisher": None},
    extra_noise=lambda params: {"selection": "exponential mechanism, sampled exactly: exact rational exponents, "
                                             "uniform proposals kept by an exact Bernoulli(exp(-x))"},
    takes_gaussian=True,
)
