"""Pre-flight: what must hold for a run to succeed here, checked before the budget store charges
it and before any record is read (docs/scheduled_runs.md, "Pre-flight").

A failure is a PreflightError (or the ConfigError of the check that found it): exit 2, nothing
charged, nothing written. The parameters were already checked against what the engine supports
when the config was loaded (families/*.py); here are the checks that need the file systems:

- the output location takes a file (a probe is created and deleted beside the release);
- the budget store's directory exists (or can be created) and takes a file;
- the source path exists, where the driver can see it (a Spark glob, a scheme pyarrow cannot
  reach, or a path without a scheme where the default file system may not be local is left for
  Spark to read);
- the item domain, when it is a file or a catalogue, can be read and decoded (the same read as
  the release's, so a broken or mis-encoded file fails here, not after the charge);
- (jobs/runner.check_source_schema, after these) the source's schema reads as the job needs;
- the executors' Python has the driver's numpy, pandas, pyarrow and dp-spark (io/executor_env.py;
  one small Spark job, skipped in local mode where the workers run the driver's interpreter).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from pyarrow import fs as pafs

from dp_spark.core.domain import item_domain
from dp_spark.errors import ConfigError, PreflightError
from dp_spark.io import executor_env, release_store
from dp_spark.jobs import budget_store

# Characters that make a Spark path a glob (data/2026-*.parquet), which no file is named after.
_GLOB = frozenset("*?[]{}")


def check(cfg: Any, target: str, uses_item_domain: bool, spark=None, progress=None) -> None:
    """Every pre-flight check of a run (``cfg``, a jobs.config.JobConfig, not imported here so
    the import chain stays short) writing ``target``; raises on the first that fails."""
    release_store.probe_writable(target)
    if cfg.budget_store is not None:
        budget_store.check_reachable(cfg.budget_store)
    if cfg.source.path and (_has_scheme(cfg.source.path) or schemeless_paths_are_local(spark)):
        check_source_path(cfg.source.path)
    if uses_item_domain and any(kind in cfg.items for kind in ("file", "catalogue")):
        item_domain(cfg.items)  # reads the file; a table domain is read (by Spark) in the release
    if spark is not None:
        executor_env.check(spark, progress)


def _has_scheme(path: str) -> bool:
    scheme = urlsplit(path).scheme
    return len(scheme) > 1  # one letter: a Windows drive


def schemeless_paths_are_local(spark=None) -> bool:
    """Whether Spark reads a path without a scheme from the local file system, so that the driver
    can check it. Not where a Hadoop configuration may set another default file system (a
    cluster's core-site.xml saying hdfs://...): there the path is left for Spark to read."""
    if os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR"):
        return False
    default_fs = spark.conf.get("spark.hadoop.fs.defaultFS", None) if spark is not None else None
    return default_fs is None or default_fs.startswith("file:")


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
