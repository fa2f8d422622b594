"""A histogram of one per-user quantity (records, or distinct items) in public bins.

Bound: every user falls in exactly one bin (quantities past the last edge go to the last,
open-ended bin). Aggregate: users per bin. Publish: the chosen publisher at L1 sensitivity 1.
Claim and argument: docs/user_histogram.md and docs/privacy.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dp_spark.core import accuracy, noise_choice
from dp_spark.core.accounting import Noise, check_noise
from dp_spark.core.discrete_gaussian import variance_at_least
from dp_spark.core.progress import diagnostic
from dp_spark.errors import ConfigError
from dp_spark.families.user_histogram import histogram
from dp_spark.families.user_histogram import quantities as user_quantities
from dp_spark.io.validation import check_schema, validate_records
from dp_spark.publishers.options import publisher_choice
from dp_spark.release import guards
from dp_spark.release.family import ConfigTables, Domains, Family, FamilyOutput, RunInputs, require
from dp_spark.release.publisher_accuracy import publisher_accuracy

# The most bins a histogram may have (each one a released cell and a label in privacy.json).
MAX_BINS = 1_000_000


@dataclass(frozen=True)
class HistogramParams:
    """``quantity``: "records" or "distinct_items" per user; ``bins``: the public bin edges (a
    list of increasing integers >= 1, or {"range": [lo, hi]}), the last bin open-ended;
    ``noise``: privacy.noise (under zCDP, "gaussian" or "auto" give the bins discrete Gaussian noise)."""

    quantity: str
    bins: Any
    publisher: str = "laplace"
    publisher_options: dict[str, Any] = field(default_factory=dict)
    algorithm: str = "user_histogram"
    noise: str = "laplace"

    def __post_init__(self):
        if not isinstance(self.quantity, str) or self.quantity not in histogram.QUANTITIES:
            raise ConfigError(f"unknown algorithm.quantity {self.quantity!r}; expected one of "
                              f"{', '.join(histogram.QUANTITIES)}")
        _refuse_too_many_bins(self.bins)
        try:
            edges = histogram.bin_edges(list(self.bins) if isinstance(self.bins, (tuple, range)) else self.bins)
        except ValueError as exc:
            raise ConfigError(f"algorithm.bins: {exc}") from None
        object.__setattr__(self, "bins", tuple(int(e) for e in edges))
        _name, options = publisher_choice({"name": self.publisher, **self.publisher_options})
        object.__setattr__(self, "publisher_options", options)
        check_noise(self.noise, self.publisher, self.publisher_options)


def gaussian(params: HistogramParams, epsilon: Fraction) -> bool:
    """Whether the bins get discrete Gaussian noise: with "gaussian", or "auto" where its variance at
    L1 = L2 = 1 is the lower (always, for one user in one bin); only in place of the laplace publisher."""
    if params.noise == Noise.LAPLACE or params.publisher != "laplace" or params.publisher_options:
        return False
    sensitivity = histogram.SENSITIVITY
    return noise_choice.chosen(params.noise, sensitivity, sensitivity ** 2, epsilon) == noise_choice.GAUSSIAN


def _refuse_too_many_bins(bins: Any) -> None:
    """A bin range of more than MAX_BINS bins: every bin is a cell of the release, its label a
    string in privacy.json, and ``{ range = [1, 10^12] }`` would not fit in memory."""
    bounds = bins.get("range") if isinstance(bins, dict) else None
    high = bounds[1] if isinstance(bounds, list) and len(bounds) == 2 else None
    count = high if isinstance(high, int) else len(bins) if isinstance(bins, (list, tuple)) else 0
    if count > MAX_BINS:
        raise ConfigError(f"algorithm.bins has {count:,} bins, above the supported maximum {MAX_BINS:,}: each bin is a "
                          "released cell with a label in privacy.json; use wider bins")


def _split(params, epsilon: Fraction, domains: Domains) -> dict[str, Fraction]:
    return {"epsilon_histogram": epsilon}


def _table(params: HistogramParams, noisy: np.ndarray) -> pd.DataFrame:
    edges = np.asarray(params.bins)
    lows, highs = histogram.bin_bounds(edges)
    return pd.DataFrame({"bin": histogram.bin_labels(edges), "low": lows,
                         "high": pd.array(highs, dtype="Int64"), "noisy_count": noisy})


def run(params: HistogramParams, inputs: RunInputs) -> FamilyOutput:
    validated = validate_records(inputs.records, inputs.domains.items, None, strict=inputs.guards.strict,
                                 progress=inputs.progress)
    rows_read, outside = validated.diagnostics["rows_read"], validated.rows_outside_domain
    # Every user adds one to one bin, with all of its in-domain rows: bounding drops no row.
    coverage = guards.Coverage(rows_read, outside, users=int(validated.users_by_n.sum()),
                               rows_kept_by_bounding=rows_read - sum(outside.values()), users_truncated=0,
                               bound="one bin per user")
    try:
        guards.tell(inputs.guards, coverage, inputs.progress, validated.explain)
        decided = guards.check(inputs, guards.figures_of(validated))
        inputs.progress("records read; bounding and counting")
        diagnostic(inputs.progress, f"{rows_read:,} records read")
        true = user_quantities.true_histogram(validated.records, params.quantity, np.asarray(params.bins),
                                        validated.user_counts)
        epsilon = inputs.split["epsilon_histogram"]
        noisy = histogram.publish_histogram(true, epsilon, inputs.budget, inputs.rng, params.publisher,
                                            params.publisher_options, gaussian(params, epsilon))
    finally:
        validated.release()
    return FamilyOutput({"histogram": _table(params, noisy)}, {**validated.diagnostics, "coverage": coverage.to_json()},
                        guards=decided)


def _describe(params: HistogramParams, epsilon: Fraction, domains: Domains) -> str:
    items = f"{len(domains.items):,} items" if domains.items is not None else "every item id counts (no item domain)"
    noise = noise_choice.described(params.noise) or f"publisher {params.publisher}"
    return (f"histogram of {histogram.QUANTITIES[params.quantity]} in {len(params.bins)} public bins with "
            f"epsilon {float(epsilon):g}, {noise}; {items}")


NO_ITEM_DOMAIN = "none: every record counts, whatever its item id"


def _domain_section(params: HistogramParams, domains: Domains) -> dict:
    """The report's domain: the bins, and the item domain that filtered the records, if any."""
    items = domains.items
    if items is None:
        item_part = {"items": NO_ITEM_DOMAIN, "item_count": None}
    else:
        item_part = {"items": items.description,
                     **({"items_public_by_assertion": items.public_by_assertion} if items.public_by_assertion else {}),
                     "item_count": len(items)}
    return {**item_part, "attributes": None, **_extra_domain(params)}


def _extra_domain(params: HistogramParams) -> dict:
    return {"bins": f"{len(params.bins)} public bins from the config, the last open-ended"}


def _report_section(params: HistogramParams) -> dict:
    return {
        "parameters": {"quantity": params.quantity, "bins": histogram.bin_labels(np.asarray(params.bins)),
                       "sensitivity_l1": histogram.SENSITIVITY,
                       **({"noise": params.noise, "sensitivity_l2": histogram.SENSITIVITY}
                          if params.noise != Noise.LAPLACE else {})},
        "specification": histogram.SPEC_SECTION,
        "post_processing": None,
        "publisher": {"name": params.publisher, **{k: v if isinstance(v, (bool, int)) else float(v)
                                                   for k, v in params.publisher_options.items()}},
    }


def _accuracy(params: HistogramParams, epsilon: Fraction, domains: Domains, split: dict[str, Fraction],
              alpha: float) -> dict:
    """Every bin: the publisher at L1 sensitivity 1 (one user, one bin), or the discrete Gaussian."""
    epsilon_histogram = split["epsilon_histogram"]
    if gaussian(params, epsilon_histogram):
        variance = variance_at_least(Fraction(histogram.SENSITIVITY ** 2) / epsilon_histogram ** 2)
        return {"histogram": {"noisy_count": accuracy.discrete_gaussian(variance, alpha)}}
    return {"histogram": {"noisy_count": publisher_accuracy(params.publisher, params.publisher_options,
                                                            histogram.SENSITIVITY, split["epsilon_histogram"],
                                                            len(params.bins), alpha)}}


def from_config(c: ConfigTables) -> HistogramParams:
    """Every user adds one to one public bin, so there is no per-user bound to choose and the
    whole ε goes to the histogram."""
    for key in ("l", "m", "d", "consistent"):
        if key in c.algorithm:
            raise ConfigError(f"algorithm.{key} is not used by user_histogram: every user counts once, in one bin")
    if c.attributes is not None:
        raise ConfigError("domain.attributes is not used by user_histogram; remove it")
    if c.parts:
        raise ConfigError(f"privacy.{next(iter(c.parts))} is not used by user_histogram: the whole "
                          "privacy.epsilon goes to the histogram")
    quantity = c.algorithm.get("quantity", "records")
    bins = require(c.algorithm, "bins", "algorithm")
    publisher, options = publisher_choice(c.publisher)
    return HistogramParams(quantity, bins, publisher, options, noise=c.privacy.get("noise", "laplace"))


FAMILY = Family(name="user_histogram", algorithms=("user_histogram",), params_type=HistogramParams,
                default_split=_split, split_keys=lambda params, domains: ("epsilon_histogram",), run=run,
                describe=_describe, report_section=_report_section, from_config=from_config,
                config_keys=("quantity", "bins"), extra_domain=_extra_domain, domain_section=_domain_section,
                item_domain_optional=True, accuracy=_accuracy,
                check_schema=lambda params, records, domains: check_schema(records, domains.items),
                output_rows=lambda params, domains: {"histogram": len(params.bins)}, takes_gaussian=True)
