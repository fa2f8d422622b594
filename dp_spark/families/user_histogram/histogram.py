"""The histogram of a per-user quantity: how many users have 1 record, 2–4, 5–9, ….

DP claim (user level, pure ε-DP): each user's quantity (its number of records,
or of distinct items) is computed from that user's own records and placed in
exactly one of the public bins, the last of which is open-ended ("500 or
more"), so adding or removing one user changes one bin by one: L1
sensitivity 1 (specification §1.1, rules 1 and 2), and L2 sensitivity 1, the one
discrete Gaussian noise under zCDP accounting is scaled to. The bins are public: they
come from the config, never from the data (§1.2). The publisher's own claim
covers the rest; with Δ = 1 it is the record-level analysis of paper 002
(§5.1, §5.2 corrected) applied to users (§5.3).

The Spark part, each user's quantity and the users per bin, is
:mod:`dp_spark.families.user_histogram.quantities`; this module holds the bins and the release.

Claim: docs/user_histogram.md, "Privacy claim: user_histogram".
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dp_spark import publishers
from dp_spark.core.ledger import Budget, gaussian_entry
from dp_spark.core.mechanisms import RandomSource

QUANTITIES = {
    "records": "records per user",
    "distinct_items": "distinct items per user",
}
SPEC_SECTION = "docs/specification.md §1.1 (rules 1 and 2) and §5.3"
SENSITIVITY = 1  # one user, one bin


def bin_edges(spec) -> np.ndarray:
    """Public bin edges from the config: a list of increasing integers starting at 1, or
    ``{range = [1, N]}`` for one bin per value 1..N−1 and a last bin "N or more".
    Raises ValueError with the reason."""
    if isinstance(spec, dict):
        bounds = spec.get("range")
        if set(spec) != {"range"} or not (isinstance(bounds, list) and len(bounds) == 2):
            raise ValueError("bins as a table must be { range = [1, N] }")
        low, high = bounds
        if any(isinstance(b, bool) or not isinstance(b, int) for b in bounds) or low != 1 or high <= low:
            raise ValueError(f"bins range must be [1, N] with an integer N > 1, got {bounds!r}")
        return np.arange(1, high + 1, dtype=np.int64)
    if not isinstance(spec, list) or len(spec) < 2:
        raise ValueError("bins must be a list of at least two increasing integer edges, e.g. [1, 2, 5, 10]")
    if any(isinstance(e, bool) or not isinstance(e, int) for e in spec):
        raise ValueError(f"bin edges must be integers, got {spec!r}")
    if spec[0] != 1:
        raise ValueError(f"the first bin edge must be 1 (every user has at least one record), got {spec[0]!r}")
    if any(b <= a for a, b in zip(spec, spec[1:])):
        raise ValueError(f"bin edges must be strictly increasing, got {spec!r}")
    return np.asarray(spec, dtype=np.int64)


def bin_bounds(edges: np.ndarray) -> tuple[np.ndarray, list]:
    """Each bin's lowest value and highest value (None for the open last bin)."""
    highs = [int(e) - 1 for e in edges[1:]] + [None]
    return edges.copy(), highs


def bin_labels(edges: np.ndarray) -> list[str]:
    lows, highs = bin_bounds(edges)
    return [f"{low}+" if high is None else str(low) if high == low else f"{low}-{high}"
            for low, high in zip(lows.tolist(), highs)]


def publish_histogram(counts: np.ndarray, epsilon: Fraction, budget: Budget, rng: RandomSource,
                      publisher: str = "laplace", options: dict | None = None, gaussian: bool = False) -> np.ndarray:
    """The noisy histogram through ``publisher`` at sensitivity 1, paid into ``budget``.
    Every user is one record here, so GS's one-record-per-user sample is the histogram itself.
    ``gaussian`` (zCDP accounting): discrete Gaussian noise instead, at L2 sensitivity 1 too (one
    user, one bin, one step), σ² = 1/ε²."""
    if gaussian:
        entry = gaussian_entry("histogram", SENSITIVITY, SENSITIVITY ** 2, epsilon, int(counts.size))
        return np.asarray(counts, dtype=np.int64) + budget.discrete_gaussian(entry, rng)
    extra = {"sampled": counts} if publisher in publishers.NEEDS_ONE_RECORD_PER_USER else {}
    return publishers.publish(publisher, counts, SENSITIVITY, epsilon, budget, rng, "histogram",
                              **dict(options or {}), **extra).values
