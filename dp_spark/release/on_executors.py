"""Whether a release's tables go to the executors, and what its report then says
(docs/executor_noise.md). Shared by the families that release there: the counts and the means.

Which path runs is a function of the config and the public domains (items selected privately are
a DP output), so the report's word on it, and the tables' row counts, reveal nothing of the records.
"""

from __future__ import annotations

from dp_spark.core.vector_noise import NoiseSecret
from dp_spark.release.family import Domains, Execution

EXECUTOR_NOISE_NOTE = ("drawn on the executors, cell by cell: each cell's random bits are SHAKE-256 of a keyed "
                       "BLAKE2b of a 32-byte secret (drawn once on the driver) and the cell's block, so a retried "
                       "task draws the same noise; exact given those bits, which are uniform under the usual "
                       "assumption that keyed BLAKE2b and SHAKE-256 are pseudorandom (docs/executor_noise.md)")


def largest_table(domains: Domains) -> int:
    """The cells of the release's largest table: items × attribute values, or items."""
    return len(domains.items) * (len(domains.attributes) if domains.attributes else 1)


def reaches_threshold(domains: Domains, execution: Execution) -> bool:
    """Whether the largest table has at least execution.executor_noise_cells cells."""
    return execution.on_executors(largest_table(domains))


def said(domains: Domains, execution: Execution) -> str:
    """The progress line of a release on the executors (config and public domains only)."""
    return (f"{largest_table(domains):,} cells: the noise is drawn on the executors "
            f"(execution.executor_noise_cells = {execution.executor_noise_cells:,})")


def noise_secret(seed: int | None) -> NoiseSecret:
    """A fresh secret from the OS for a release; one derived from a fixed seed for a test."""
    return NoiseSecret.fresh() if seed is None else NoiseSecret.from_seed(seed)


def executor_output(rows: dict[str, int], seed: int | None) -> dict:
    """The FamilyOutput fields of a release on the executors: each table's rows (public: one per
    cell) and the report's word on where and how the noise was drawn."""
    return {"rows": rows, "noise_extra": {"drawn_on": "executors", "executor_noise": EXECUTOR_NOISE_NOTE + (
        "; the secret is derived from the fixed seed" if seed is not None else "")}}
