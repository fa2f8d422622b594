"""Count-vector publishers: pure numpy, driver side, no Spark.

Every publisher has one signature, ``publish(counts, sensitivity, epsilon,
budget, rng, step, **options) -> Published``: a count vector over a public
domain, the L1 sensitivity one user can cause after bounding, epsilon, the
budget that pays and the random source. It draws noise only through the
budget, which spends each ledger entry before it draws (an overspend is refused
before any noise exists), and returns the published vector with the entries it
spent. :func:`publish`
picks one by name, as a job's config does (``publisher = "ahp"``).

Claims: docs/publishers.md, one "Privacy claim: <name>" section per publisher.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.publishers import ahp, alpa, dpa_ahp, fourier, grouping, laplace
from dp_spark.publishers.interface import Published, Publisher  # noqa: F401 - the publishers' type

# name -> (function, the options it accepts)
PUBLISHERS: dict[str, tuple[Callable[..., Published], tuple[str, ...]]] = {
    "laplace": (laplace.publish, ()),
    "alpa": (alpa.publish, ()),
    "fourier": (fourier.publish, ("k", "distinct_cells", "grid_bits")),
    "grouping": (grouping.publish, ("sampled",)),
    "ahp": (ahp.publish, ("rho", "eta")),
    "dpa_ahp": (dpa_ahp.publish, ("delta", "ranking_share", "rho", "eta", "reproduce_paper")),
    "sdpa_ahp": (dpa_ahp.publish, ("ranking_share", "rho", "eta", "reproduce_paper")),
}
NEEDS_ONE_RECORD_PER_USER = frozenset({"grouping"})


def publish(name: str, counts: np.ndarray, sensitivity: int, epsilon: Fraction, budget: Budget, rng: RandomSource,
            step: str, **options) -> Published:
    """Run the publisher ``name``; options it does not take are an error, not ignored."""
    if name not in PUBLISHERS:
        raise ValueError(f"unknown publisher {name!r}; expected one of {', '.join(PUBLISHERS)}")
    function, accepted = PUBLISHERS[name]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"publisher {name!r} takes no option {', '.join(unknown)}")
    if name == "sdpa_ahp":
        options["delta"] = Fraction(1)
    return function(counts, sensitivity, epsilon, budget, rng, step, **options)
