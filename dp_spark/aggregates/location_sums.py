"""Location entropy's aggregate (ALGORITHMS.md §7.3): per public location, the bounded users,
their visits and Σ c ln c, from which the entropy is computed on the driver."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dp_spark.aggregates.domain_vector import on_domain
from dp_spark.core.domain import ItemDomain


@dataclass(frozen=True)
class LocationSums:
    """One cell per public location, zero where nobody is left after bounding (NOT private)."""

    users: np.ndarray  # n̄, int64
    visits: np.ndarray  # c̄ = Σ c, int64
    c_log_c: np.ndarray  # Σ c ln c, float
    coverage: dict = field(default_factory=dict)  # totals of the pairs' _coverage_* columns, NOT private


def location_sums(pairs: DataFrame, locations: ItemDomain) -> LocationSums:
    """The sums over bounded pairs [user_id, item_id, c]; at most |L| rows reach the driver.
    Columns named _coverage_* are summed in the same job (bounding's counts for the operator)."""
    extra = [c for c in pairs.columns if c.startswith("_coverage_")]
    rows = pairs.groupBy("item_id").agg(
        F.count(F.lit(1)).alias("n"), F.sum("c").alias("total"), F.sum(F.col("c") * F.log("c")).alias("s"),
        *[F.sum(c).alias(c) for c in extra]
    ).toPandas()
    position = locations.index_of(rows["item_id"].to_numpy())
    size = len(locations)
    coverage = {c.removeprefix("_coverage_"): int(rows[c].sum()) for c in extra}
    return LocationSums(on_domain(position, rows["n"], size), on_domain(position, rows["total"], size),
                        on_domain(position, rows["s"], size, dtype=float), coverage)
