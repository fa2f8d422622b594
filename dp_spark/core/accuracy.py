"""Expected error of a released value from public parameters only: the noise's standard
deviation and the half-width of its two-sided (1 − α) interval.

Every noisy value dp-spark releases is a true (bounded) value plus discrete Laplace noise,
P(Z = z) ∝ exp(−|z|/t) over the integers (:mod:`dp_spark.core.mechanisms`), on a grid of step g
(1 for counts, 2^-k for values drawn on a grid): the released noise is g·Z, of scale b = g·t.
With r = exp(−1/t):

* Var(Z) = 2r/(1 − r)², so sd = g·√(2r)/(1 − r);
* P(|Z| > h) = 2·r^(h+1)/(1 + r) for integers h ≥ 0, so the interval half-width is g·h for the
  smallest integer h with P(|Z| ≤ h) ≥ 1 − α, found exactly (no normal or continuous
  approximation): the interval [x − g·h, x + g·h] around a released x covers the true bounded
  value with probability at least 1 − α.

A mechanism that releases a fixed linear combination of several draws (the Fourier publisher)
has an exact sd but no closed-form quantile; :func:`chebyshev_halfwidth` gives a valid bound
there. Nothing here reads data: the inputs are scales, grids and α from the config.

These numbers describe the noise alone. Bounding (records beyond a user's limit, outside the
domain) and post-processing (averaging, clustering, clipping) add a bias they cannot show.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from fractions import Fraction

from dp_spark.core import discrete_gaussian as dg

DEFAULT_ALPHA = 0.1  # the second interval reported beside the 95% one: 90%
CAVEAT = ("These numbers are for the added noise alone: a released value lies within the half-width of the "
          "value it was computed from (the true count after bounding) with the stated probability. Bounding "
          "(records beyond each user's limit, or outside the public domain, are dropped) and post-processing "
          "(averaging, clustering, clipping) add a bias that these numbers cannot show, so a released value can "
          "be further from the raw count than the interval says.")

# What the numbers of an Accuracy are.
EXACT = "exact"  # the released value is the bounded value plus exactly this noise
UPPER_BOUND = "upper_bound"  # the noise is no larger than this (in distribution)
LOWER_BOUND = "lower_bound"  # the noise is at least this; its size depends on private data
POST_PROCESSED = "post_processed"  # the noise before a post-processing step that changes it
NOT_ADDITIVE = "not_additive"  # no additive noise per value: no numbers
KINDS = (EXACT, UPPER_BOUND, LOWER_BOUND, POST_PROCESSED, NOT_ADDITIVE)
KIND_LEGEND = ("kind: exact = each value carries exactly this noise; upper_bound = at most this (the note says why); "
               "lower_bound = at least this (the noise depends on private data); "
               "post_processed = the noise before a post-processing step; not_additive = no noise per value")


def _check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, Fraction)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number strictly between 0 and 1, got {alpha!r}")
    return float(alpha)


def _steps(scale: Fraction | float, grid: Fraction | float) -> float:
    """The scale t in grid steps, checked."""
    scale, grid = float(scale), float(grid)
    if not scale > 0 or not grid > 0 or not math.isfinite(scale / grid):
        raise ValueError(f"scale and grid must be positive, got scale {scale}, grid {grid}")
    return scale / grid


def discrete_laplace_sd(scale: Fraction | float, grid: Fraction | float = 1) -> float:
    """Standard deviation of g·Z, Z discrete Laplace with P(Z = z) ∝ exp(−|z|·g/scale)."""
    t = _steps(scale, grid)
    r = math.exp(-1.0 / t)
    return float(grid) * math.sqrt(2 * r) / -math.expm1(-1.0 / t)  # 1 − r without cancellation


def discrete_laplace_tail(h: int, scale: Fraction | float, grid: Fraction | float = 1) -> float:
    """P(|Z| > h) for an integer h ≥ 0 (Z in grid steps): 2·r^(h+1)/(1 + r)."""
    if h < 0:
        return 1.0
    t = _steps(scale, grid)
    return math.exp(math.log(2.0) - (h + 1) / t - math.log1p(math.exp(-1.0 / t)))


def discrete_laplace_halfwidth_steps(scale: Fraction | float, alpha: float, grid: Fraction | float = 1) -> int:
    """The smallest integer h ≥ 0 with P(|Z| ≤ h) ≥ 1 − α, Z in grid steps."""
    alpha = _check_alpha(alpha)
    t = _steps(scale, grid)
    # P(|Z| > h) ≤ α ⇔ (h + 1)/t ≥ ln(2/(α(1 + r))): the closed form, then checked either way
    # against the tail itself so that a rounding at the boundary cannot give a wrong h.
    bound = t * (math.log(2.0 / alpha) - math.log1p(math.exp(-1.0 / t)))
    h = max(0, math.ceil(bound) - 1) if math.isfinite(bound) else 0
    while h > 0 and discrete_laplace_tail(h - 1, scale, grid) <= alpha:
        h -= 1
    while discrete_laplace_tail(h, scale, grid) > alpha:
        h += 1
    return h


def discrete_laplace_halfwidth(scale: Fraction | float, alpha: float, grid: Fraction | float = 1) -> float:
    """Half-width of the (1 − α) interval of g·Z in value units: g·h."""
    return float(grid) * discrete_laplace_halfwidth_steps(scale, alpha, grid)


def chebyshev_halfwidth(sd: float, alpha: float) -> float:
    """sd/√α: P(|X| ≥ sd/√α) ≤ α for any zero-mean X with that sd (Chebyshev); a valid, loose bound
    where the exact quantile has no closed form."""
    return float(sd) / math.sqrt(_check_alpha(alpha))


@dataclass(frozen=True)
class Accuracy:
    """The expected error of the values of one released column. ``kind`` says what the numbers
    are (:data:`KINDS`); ``scale`` is the noise scale b in value units (None without one)."""

    distribution: str
    kind: str
    alpha: float
    scale: float | None = None
    sd: float | None = None
    ci95_halfwidth: float | None = None
    ci_halfwidth: float | None = None
    note: str = ""
    # A mean's interval, whose width depends on the cell's count (the means): its half-width at
    # ``level`` for a cell of n records, None where no mean is given, as ((n, half-width), ...).
    by_records: tuple[tuple[int, float | None], ...] = ()
    level: float | None = None
    least_records: int | None = None  # the fewest records kept a cell needs for a mean
    counted: str = "records"  # what a cell's records are: "users" when each user keeps one per cell

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown accuracy kind {self.kind!r}; expected one of {', '.join(KINDS)}")
        _check_alpha(self.alpha)
        given = [n is not None for n in (self.sd, self.ci95_halfwidth, self.ci_halfwidth)]
        if given != [self.kind != NOT_ADDITIVE] * 3:
            raise ValueError("sd and both half-widths are given exactly when the kind is not 'not_additive'")

    def to_json(self) -> dict:
        return {"distribution": self.distribution, "kind": self.kind, "scale": self.scale, "sd": self.sd,
                "ci95_halfwidth": self.ci95_halfwidth, "alpha": self.alpha,
                f"ci{confidence_label(self.alpha)}_halfwidth": self.ci_halfwidth, "note": self.note,
                **({"interval_level": self.level,
                    "interval_halfwidth_by_records": {str(n): h for n, h in self.by_records},
                    "least_records_for_a_mean": self.least_records, "records_counted": self.counted}
                   if self.by_records else {})}


def confidence_label(alpha: float) -> str:
    """"90" for α = 0.1, "99.5" for α = 0.005: the (1 − α) level in percent, as a key suffix."""
    return f"{100 * (1 - _check_alpha(alpha)):.10g}"


def discrete_laplace(scale: Fraction | float, alpha: float, *, grid: Fraction | float = 1, divisor: float = 1,
                     kind: str = EXACT, distribution: str | None = None, note: str = "") -> Accuracy:
    """The Accuracy of values carrying g·Z/divisor, Z discrete Laplace of scale ``scale``/g in
    grid steps (``divisor``: a value averaged over that many cells, e.g. ALPA's total over the
    domain). Exact: dividing by a constant divides every quantile by it."""
    if not divisor > 0:
        raise ValueError(f"divisor must be positive, got {divisor}")
    name = distribution or ("discrete Laplace" + (f" on the grid {_grid_text(grid)}" if grid != 1 else ""))
    return Accuracy(name, kind, _check_alpha(alpha), scale=float(scale) / divisor,
                    sd=discrete_laplace_sd(scale, grid) / divisor,
                    ci95_halfwidth=discrete_laplace_halfwidth(scale, 0.05, grid) / divisor,
                    ci_halfwidth=discrete_laplace_halfwidth(scale, alpha, grid) / divisor, note=note)


def discrete_gaussian(variance: Fraction, alpha: float, *, divisor: float = 1, kind: str = EXACT, note: str = "",
                      distribution: str = "discrete Gaussian") -> Accuracy:
    """The Accuracy of values carrying Z/divisor, Z discrete Gaussian N_Z(0, σ²), σ² = ``variance``:
    the sd and both half-widths from the exact pmf (core.discrete_gaussian); ``scale`` is σ/divisor
    (``divisor``: grid units per value, or a scale factor's inverse)."""
    if not divisor > 0:
        raise ValueError(f"divisor must be positive, got {divisor}")
    divisor = float(divisor)
    return Accuracy(distribution, kind, _check_alpha(alpha), scale=math.sqrt(variance) / divisor,
                    sd=math.sqrt(dg.discrete_gaussian_variance(variance)) / divisor,
                    ci95_halfwidth=float(dg.discrete_gaussian_halfwidth(variance, 0.05)) / divisor,
                    ci_halfwidth=float(dg.discrete_gaussian_halfwidth(variance, alpha)) / divisor, note=note)


def _grid_text(grid: Fraction | float) -> str:
    grid = Fraction(grid)
    if grid.numerator == 1 and grid.denominator & (grid.denominator - 1) == 0:
        return f"2^-{grid.denominator.bit_length() - 1}"
    return f"{float(grid):g}"


def not_additive(distribution: str, alpha: float, note: str, by_records: tuple = (),
                 level: float | None = None, least_records: int | None = None, counted: str = "records") -> Accuracy:
    """A release with no additive noise per value (FRAPP's perturbed records, the means): no sd or
    ± of its own; a mean's interval half-width by its cell's records, when given."""
    return Accuracy(distribution, NOT_ADDITIVE, _check_alpha(alpha), note=note, by_records=by_records, level=level,
                    least_records=least_records, counted=counted)


def by_records_text(noise: dict) -> str:
    """"its 95% interval's half-width by the cell's users: 10: no mean, ..., 1,000: ±0.67; a mean is
    given where ..." from a mean column's JSON, or "" for any other column."""
    widths = noise.get("interval_halfwidth_by_records")
    if not widths:
        return ""
    said = ", ".join(f"{int(n):,}: " + ("no mean" if h is None else f"±{h:.2g}") for n, h in widths.items())
    counted = noise.get("records_counted", "records")
    return (f"its {100 * noise['interval_level']:g}% interval's half-width by the cell's {counted}: {said}; "
            f"a mean is given where the noisy count is at least {noise['least_records_for_a_mean']:,}, so a cell "
            f"needs about that many {counted}")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.4g}"


# Below this 95% upper bound on the share kept, the reader is told that the bias can dwarf the ±.
FAR_BELOW_SHARE = 0.9


def bounding_text(bounding: dict) -> str:
    """``accuracy.bounding`` (release.bounding_estimate) in a sentence for a person: after a
    run, the DP estimate of what bounding removed; before it, what the run will estimate."""
    if "records_kept" not in bounding:
        return f"bounding: {bounding.get('note', 'no estimate')}"
    h_kept, h_removed = bounding["records_kept"]["ci95_halfwidth"], bounding["records_removed"]["ci95_halfwidth"]
    cap = bounding["cap_per_user"]
    if "records_kept_noisy" not in bounding:
        return (f"bounding, not in the ± above: {bounding['bias']}. The run publishes a DP estimate of the records "
                f"kept (±{h_kept:,.0f}) and of those removed (±{h_removed:,.0f}, counted up to {cap:,} per user), "
                f"with epsilon {bounding['epsilon']:g}" + (f" ({bounding['note']})" if bounding.get("note") else ""))
    high = bounding["kept_share_at_most_95"]
    means = bounding.get("about") == "means"
    far = (", so an item's mean over all its records can lie outside its interval" if means else
           ", so a count can be far below its true count, by much more than its ± shows")
    share = "" if high is None else (f"; the {'means are of' if means else 'counts hold'} at most {high:.0%} of the "
                                     f"records in the domain (95%)" + (far if high < FAR_BELOW_SHARE else ""))
    warning = f". WARNING: {bounding['warning']}" if bounding.get("warning") else ""
    covers = ("each mean's interval covers the mean of the records bounding kept, not of all an item's records: "
              if means else "")
    # Bounding removes no fewer than no records: a noisy estimate below zero is shown as 0 (the
    # report keeps the noisy figure; clamping it is post-processing).
    removed = max(bounding["records_removed_at_least_noisy"], 0)
    return (f"{covers}bounding kept {bounding['records_kept_noisy']:,} ±{h_kept:,.0f} records and removed at least "
            f"{removed:,} ±{h_removed:,.0f} (DP estimates, 95%; records past "
            f"{cap:,} per user not counted){share}{warning}")


def format_section(section: dict) -> list[str]:
    """privacy.json's ``accuracy`` section (or ``dp-spark plan``'s) as lines for a person: one row
    per released column, its notes, what bounding removed (counts), then the caveat."""
    alpha = section["alpha"]
    level = confidence_label(alpha)
    rows = [(table, column, noise) for table, columns in section["tables"].items() for column, noise in columns.items()]
    if not rows:
        return ["No accuracy statement for this release."]
    table_w = max(5, *(len(t) for t, _, _ in rows))
    column_w = max(6, *(len(c) for _, c, _ in rows))
    lines = [textwrap.fill(f"WARNING: {warning}", 100, initial_indent="  ", subsequent_indent="    ")
             for warning in section.get("warnings", [])]
    lines += [""] if lines else []
    lines.append(f"  {'table':<{table_w}} {'column':<{column_w}} {'sd':>10} {'±95%':>10} {f'±{level}%':>10}  "
                 "kind, noise")
    notes = []
    for table, column, noise in rows:
        lines.append(f"  {table:<{table_w}} {column:<{column_w}} {_number(noise['sd']):>10} "
                     f"{_number(noise['ci95_halfwidth']):>10} {_number(noise[f'ci{level}_halfwidth']):>10}  "
                     f"{noise['kind']}, {noise['distribution']}"
                     + (f" (scale {_number(noise['scale'])})" if noise["scale"] is not None else ""))
        if by_records_text(noise):
            lines.append(f"  {'':<{table_w}} {'':<{column_w}} {by_records_text(noise)}")
        if noise["note"]:
            notes.append(f"  {table}.{column}: {noise['note']}.")
    notes = [textwrap.fill(note, 100, subsequent_indent="    ") for note in notes]
    lines.append(textwrap.fill(KIND_LEGEND, 100, initial_indent="  ", subsequent_indent="    "))
    bounding = ([textwrap.fill(bounding_text(section["bounding"]) + ".", 100, initial_indent="  ",
                               subsequent_indent="    ")] if section.get("bounding") else [])
    return lines + ([""] + notes if notes else []) + ([""] + bounding if bounding else []) + [
        "", textwrap.fill(section["caveat"], 100, initial_indent="  ", subsequent_indent="  ")]
