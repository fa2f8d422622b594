"""Refusing a release that is noise only: the night whose records all fell outside the domain.

A run whose records do not match its domain (a CSV read in the wrong encoding, ids of another
catalogue) keeps nothing, and its release is pure noise that looks like any other. Whether a run
releases is something its readers see, so the decision may not look at the raw records; it looks
at the release's own DP outputs instead, and so costs no ε (post-processing):

* the counts' records kept, K̂ (``accuracy.bounding.records_kept_noisy``): K plus discrete
  Laplace noise of a scale the config gives (release.bounding_estimate);
* the total of each released count table whose noise is exactly known (``noisy_count`` of kind
  "exact": every cell's noise drawn on its own, with the planned standard deviation σ), over its
  c cells: the true total plus noise of standard deviation √c·σ.

Each figure gets a threshold that noise alone reaches with probability at most ``MISS / k``
(k figures): the exact discrete Laplace tail for K̂, and Cantelli's one-sided bound
P(X ≥ t) ≤ s²/(s² + t²) for a total of standard deviation s, which needs no more than the
variance. The run is refused when **no** figure reaches its threshold: a release of no records
is then refused with probability at least 1 − MISS (a union bound over the k figures), and a
release with records is refused only when none of its figures shows them.

At small user counts a correct release may show no figure above its threshold either, and is
then refused: at ε = 1 and l = 10 on 10 items, 50 users with 10 records each pass (their total
lies far above the threshold), 5 such users do not (docs/privacy.md, "Privacy claim: noise-only
refusal", has the table). Such a release is mostly noise; ``guards.refuse_noise_only = false``
releases it anyway.

Not checked: location entropy (its entropies are no totals), tables released on the executors
(their totals stay there; the counts' and means' K̂ still decides), and FRAPP, whose release of no records is
visibly empty (its number of perturbed records N is public under its local model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dp_spark.core import accuracy
from dp_spark.errors import GuardRefused

MISS = 0.05  # the most often a release of no records is let through
COUNT_COLUMNS = ("noisy_count", "count")  # the count tables' columns of noisy record counts
KEY = "noise_only"  # privacy.json's guards.noise_only


class NoiseOnlyRefused(GuardRefused):
    """The release's DP figures do not tell it from noise: nothing is written; the charge stays."""


@dataclass(frozen=True)
class Figure:
    """A DP output that grows with the records kept, and the value that noise alone reaches with
    probability at most the figure's share of MISS."""

    name: str
    noisy: float
    threshold: float

    @property
    def shows_records(self) -> bool:
        return self.noisy >= self.threshold


def laplace_threshold(scale: float, miss: float) -> int:
    """The smallest integer t with P(Z ≥ t) ≤ miss, Z discrete Laplace of this scale (one side:
    half the two-sided tail P(|Z| ≥ t))."""
    return accuracy.discrete_laplace_halfwidth_steps(scale, 2 * miss) + 1


def cantelli_threshold(sd: float, miss: float) -> float:
    """t with P(X ≥ t) ≤ miss for any noise X of mean 0 and standard deviation ``sd``."""
    return sd * math.sqrt(1 / miss - 1)


def count_column(columns: dict) -> str | None:
    """The table's column of noisy record counts: noisy_count, or an aggregation's count."""
    return next((name for name in COUNT_COLUMNS if name in columns), None)


def table_totals(tables: dict[str, Any], planned: dict[str, dict[str, accuracy.Accuracy]]) -> list[tuple]:
    """(name, noisy total, its noise's standard deviation) of each pandas table whose count column
    has exactly known, cell-by-cell noise."""
    totals = []
    for table, columns in planned.items():
        frame, column = tables.get(table), count_column(columns)
        noise = columns.get(column) if column else None
        if not isinstance(frame, pd.DataFrame) or noise is None or noise.kind != accuracy.EXACT or noise.sd is None \
                or frame.empty:
            continue
        totals.append((f"{table} total", float(frame[column].sum()), math.sqrt(len(frame)) * noise.sd))
    return totals


def figures(bounding: dict | None, kept_scale: float | None, totals: list[tuple]) -> list[Figure]:
    """The figures of one release, each with its threshold at MISS / k."""
    kept = bounding.get("records_kept_noisy") if bounding and kept_scale is not None else None
    k = len(totals) + (kept is not None)
    if not k:
        return []
    miss = MISS / k
    found = [Figure(name, noisy, cantelli_threshold(sd, miss)) for name, noisy, sd in totals]
    if kept is not None and kept_scale is not None:
        found.insert(0, Figure("records kept", kept, laplace_threshold(kept_scale, miss)))
    return found


def decide(found: list[Figure], enabled: bool = True) -> dict | None:
    """privacy.json's ``guards.noise_only`` (None: nothing to decide on); raises NoiseOnlyRefused
    when ``enabled`` and no figure shows records. Reads DP outputs and public numbers only."""
    if not found:
        return None
    section = {"miss": MISS, "figures": {f.name: {"noisy": round(f.noisy, 6), "threshold": round(f.threshold, 6)}
                                         for f in found},
               "refuse": enabled}
    if enabled and not any(f.shows_records for f in found):
        said = "; ".join(f"{f.name} {f.noisy:,.6g} below {f.threshold:,.6g}" for f in found)
        raise NoiseOnlyRefused(
            f"the release cannot be told from noise ({said}; noise alone passes these at most "
            f"{MISS:.0%} of the time): its records seem not to match the domain, or are too few. Nothing was "
            "released and the run stays charged; `dp-spark check CONFIG` (NOT PRIVATE) shows what a run drops "
            "and why, and guards.refuse_noise_only = false releases such a run anyway")
    return section


def planned(kept_scale: float | None, planned_tables: dict[str, dict[str, accuracy.Accuracy]],
            rows: dict[str, int | None]) -> list[Figure]:
    """The figures a run will decide on, with their thresholds (noisy values 0): for ``plan``,
    from the config and the domains alone. ``rows``: each table's rows (None: chosen by the run)."""
    totals = []
    for table, columns in planned_tables.items():
        column = count_column(columns)
        noise, cells = (columns.get(column) if column else None), rows.get(table)
        if noise is not None and noise.kind == accuracy.EXACT and noise.sd is not None and cells:
            totals.append((f"{table} total", 0.0, math.sqrt(cells) * noise.sd))
    return figures({"records_kept_noisy": 0} if kept_scale is not None else None, kept_scale, totals)


def plan_line(found: list[Figure]) -> str:
    """What ``plan`` says of the refusal before anything is read."""
    if not found:
        return "noise-only refusal: not checked for this job (it releases no total to decide on)"
    said = " or ".join(f"{f.name} reaches {f.threshold:,.0f}" for f in found)
    return (f"noise-only refusal: a run releases only if {said} (noise alone does at most {MISS:.0%} of the "
            "time; guards.refuse_noise_only = false turns this off)")
