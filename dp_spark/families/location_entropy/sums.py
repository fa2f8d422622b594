"""Location entropy's aggregate (specification §7.3): per public location, the bounded users,
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


@dataclass(frozen=True)
class CandidateSums:
    """Per candidate pair (M_i, C_j) and public location, the sums the entropy needs (NOT
    private): users[i] (n̄ at M_i), visits[i, j] (c̄ at M_i, C_j), c_log_c[i, j] (Σ c̄ ln c̄)."""

    Ms: tuple[int, ...]
    Cs: tuple[int, ...]
    users: np.ndarray  # (|M|, |L|) int64
    visits: np.ndarray  # (|M|, |C|, |L|) int64
    c_log_c: np.ndarray  # (|M|, |C|, |L|) float
    coverage: dict = field(default_factory=dict)  # users, pairs, visits; users_truncated per M (NOT private)

    def at(self, i: int, j: int) -> LocationSums:
        """The sums at (M_i, C_j), with bounding's coverage at M_i: what location_sums gives for
        bounded_pairs(M_i, C_j)."""
        coverage = {**{k: self.coverage[k] for k in ("users", "pairs", "visits")},
                    "users_truncated": self.coverage["users_truncated"][i]}
        return LocationSums(self.users[i], self.visits[i, j], self.c_log_c[i, j], coverage)


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


def candidate_sums(ranked: DataFrame, locations: ItemDomain, Ms: tuple[int, ...], Cs: tuple[int, ...]
                   ) -> CandidateSums:
    """The location sums at every candidate pair (M_i, C_j) in one aggregation over
    ``bounding.user_locations.ranked_pairs`` (ranked at the largest candidates): at (M_i, C_j) a
    pair counts when its rank is ≤ M_i, with c capped at C_j, exactly as bounded_pairs(M_i, C_j)
    keeps it. Also bounding's coverage per M_i (users truncated), for the operator (NOT private).
    """
    first = F.col("rank") == 1
    columns = [F.sum(first.cast("long")).alias("_users"),
               F.sum(F.when(first, F.col("locations")).otherwise(0)).alias("_pairs"),
               F.sum(F.when(first, F.col("visits")).otherwise(0)).alias("_visits")]
    for i, M in enumerate(Ms):
        kept = F.col("rank") <= M
        columns += [F.sum(kept.cast("long")).alias(f"n{i}"),
                    F.sum((first & (F.col("locations") > M)).cast("long")).alias(f"_truncated{i}")]
        for j, C in enumerate(Cs):
            c = F.least(F.col("c"), F.lit(C))
            columns += [F.sum(F.when(kept, c).otherwise(0)).alias(f"t{i}_{j}"),
                        F.sum(F.when(kept, c * F.log(c)).otherwise(0.0)).alias(f"s{i}_{j}")]
    rows = ranked.groupBy("item_id").agg(*columns).toPandas()
    position = locations.index_of(rows["item_id"].to_numpy())
    size = len(locations)
    users = np.stack([on_domain(position, rows[f"n{i}"], size) for i in range(len(Ms))])
    visits = np.stack([np.stack([on_domain(position, rows[f"t{i}_{j}"], size) for j in range(len(Cs))])
                       for i in range(len(Ms))])
    c_log_c = np.stack([np.stack([on_domain(position, rows[f"s{i}_{j}"], size, dtype=float) for j in range(len(Cs))])
                        for i in range(len(Ms))])
    coverage = {"users": int(rows["_users"].sum()), "pairs": int(rows["_pairs"].sum()),
                "visits": int(rows["_visits"].sum()),
                "users_truncated": [int(rows[f"_truncated{i}"].sum()) for i in range(len(Ms))]}
    return CandidateSums(tuple(Ms), tuple(Cs), users, visits, c_log_c, coverage)
