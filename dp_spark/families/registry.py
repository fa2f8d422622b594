"""Every algorithm family, and the family behind each algorithm name.

The job runner, the public API and the command line look families up here; none of them asks
for an algorithm by name. A new family is a module in this package and one entry below.
"""

from __future__ import annotations

from dp_spark.errors import ConfigError
from dp_spark.families.aggregate import family as aggregate
from dp_spark.families.counts import family as counts
from dp_spark.families.dpsense import family as dpsense
from dp_spark.families.frapp import family as frapp
from dp_spark.families.location_entropy import family as location_entropy
from dp_spark.families.means import family as means
from dp_spark.families.user_histogram import family as user_histogram
from dp_spark.release.family import Family

FAMILIES: tuple[Family, ...] = (counts.FAMILY, user_histogram.FAMILY, dpsense.FAMILY, location_entropy.FAMILY,
                                frapp.FAMILY, means.FAMILY, aggregate.FAMILY)
BY_ALGORITHM: dict[str, Family] = {name: family for family in FAMILIES for name in family.algorithms}


def family_of(algorithm: str) -> Family:
    """The family that runs ``algorithm`` (a config's algorithm.name)."""
    try:
        return BY_ALGORITHM[algorithm]
    except KeyError:
        raise ConfigError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(BY_ALGORITHM)}") from None
