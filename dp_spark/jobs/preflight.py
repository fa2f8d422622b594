"""Pre-flight: what must hold for a run to succeed here, checked before the budget store charges
it and before any record is read (docs/scheduled_runs.md, "Pre-flight").

A failure is a PreflightError (or the ConfigError of the check that found it): exit 2, nothing
charged, nothing written. The parameters were already checked against what the engine supports
when the config was loaded (families/*.py); here are the checks that need the file systems:

- the output location takes a file (a probe is created and deleted beside the release);
- the budget store's directory exists (or can be created) and takes a file;
- the source path exists, where the driver can see it (a Spark glob or a scheme pyarrow cannot
  reach is left for Spark to read);
- the item domain, when it is a file or a catalogue, can be read and decoded (the same read as
  the release's, so a broken or mis-encoded file fails here, not after the charge).
"""

from __future__ import annotations

from typing import Any

from pyarrow import fs as pafs

from dp_spark.core.domain import item_domain
from dp_spark.errors import ConfigError, PreflightError
from dp_spark.io import release_store
from dp_spark.jobs import budget_store

# Characters that make a Spark path a glob (data/2026-*.parquet), which no file is named after.
_GLOB = frozenset("*?[]{}")


def check(cfg: Any, target: str, uses_item_domain: bool) -> None:
    """Every pre-flight check of a run (``cfg``, a jobs.config.JobConfig, not imported here so
    the import chain stays short) writing ``target``; raises on the first that fails."""
    release_store.probe_writable(target)
    if cfg.budget_store is not None:
        budget_store.check_reachable(cfg.budget_store)
    check_source_path(cfg.source.path)
    if uses_item_domain and any(kind in cfg.items for kind in ("file", "catalogue")):
        item_domain(cfg.items)  # reads the file; a table domain is read (by Spark) in the release


def check_source_path(path: str | None) -> None:
    """A PreflightError when ``path`` names nothing; silent for a glob, a table source (None) or
    a location the driver cannot reach through pyarrow (Spark may still read it)."""
    if not path or _GLOB & set(path):
        return
    try:
        where = release_store.location(path)
        kind = where.fs.get_file_info(where.path).type
    except (ConfigError, OSError):  # no pyarrow filesystem or no credentials here: Spark will say
        return
    if kind == pafs.FileType.NotFound:
        raise PreflightError(f"source path {path!r} does not exist")
