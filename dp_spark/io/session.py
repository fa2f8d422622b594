"""Getting a SparkSession, in local mode or under spark-submit."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from dp_spark.errors import DpSparkError, PreflightError

# Settings every dp-spark job wants, under spark-submit too (the session is
# built here); a job's [spark] table overrides them.
DEFAULT_SPARK_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.showConsoleProgress": "true",
    # PySpark otherwise sends each Column operation's Python call site to the JVM (for error
    # messages): ten JVM calls instead of one, 2,027 instead of 837 in one HPA run.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Set when the context starts, so on a local Spark Connect server too (a Connect client has
    # no SparkContext.setLogLevel).
    "spark.log.level": "WARN",
}


def check_java() -> None:
    """Fail with install instructions when no Java runtime is found."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java"):
        return
    raise DpSparkError(
        "Java 17 is required by Spark and was not found (no JAVA_HOME, no java on PATH); "
        "install it, e.g. 'sudo apt-get install openjdk-17-jre-headless' on Debian/Ubuntu "
        "or 'brew install openjdk@17' on macOS, then run again"
    )


def local_cores(master: str) -> int | None:
    """Cores of a ``local``, ``local[N]`` or ``local[*]`` master; None for a cluster."""
    match = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if not match:
        return None
    count = match.group(1)
    if count is None:
        return 1
    return (os.cpu_count() or 1) if count == "*" else int(count)


def get_session(master: str | None = None, conf: dict[str, str] | None = None, app_name: str = "dp-spark"):
    """The active session, or a new one: ``master`` if given, else the master
    spark-submit set, else ``local[*]``."""
    check_java()
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Under spark-submit the JVM is already up; connect first, or SparkConf()
        # cannot see the master and settings spark-submit was given (it would be
        # empty, and the job would quietly run in local mode instead).
        SparkContext._ensure_initialized()
    submitted = SparkConf()  # what spark-submit and the site's spark-defaults.conf set
    builder = SparkSession.builder.appName(app_name)
    master = master or submitted.get("spark.master", "local[*]")
    builder = builder.master(master)
    defaults = dict(DEFAULT_SPARK_CONF)
    cores = local_cores(master)
    if cores:
        # 200 shuffle partitions (Spark's default) cost more in task overhead than they
        # save on a laptop; a few per core keep both cores busy (docs/performance.md).
        defaults["spark.sql.shuffle.partitions"] = str(4 * cores)
        # Local Python workers (FRAPP's perturbation runs in them) need this interpreter's
        # packages, not whatever "python3" is first on the PATH.
        if not submitted.contains("spark.pyspark.python"):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {k: v for k, v in defaults.items() if not submitted.contains(k)}
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    check_catalog(spark, conf or {})
    return spark


CATALOG_SETTING = "spark.sql.catalogImplementation"  # "hive" or "in-memory"; fixed when Spark starts


def check_catalog(spark, conf: dict[str, str]) -> None:
    """Refuse a session whose catalog is not the one ``conf`` asks for.

    The catalog is chosen when the SparkContext starts; ``getOrCreate`` on a session that is
    already running (a notebook's, or one spark-submit started) ignores the setting, and the job
    would silently look for its tables in another catalog (docs/scheduled_runs.md, Catalog tables)."""
    asked = conf.get(CATALOG_SETTING)
    used = spark.conf.get(CATALOG_SETTING, "in-memory")
    if asked is not None and asked != used:
        raise PreflightError(f"[spark] asks for {CATALOG_SETTING} = {asked!r} but the session already running uses "
                             f"{used!r}, and the catalog is fixed when Spark starts: set it where the session is "
                             f"started (spark-submit --conf {CATALOG_SETTING}={asked}, spark-defaults.conf, or the "
                             f"builder)")


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def default_parallelism(spark) -> int:
    """What ``SparkContext.defaultParallelism`` is, found from the configuration so that a Spark
    Connect session can ask too: ``spark.default.parallelism`` if set, else a local master's
    cores; on a cluster without the setting, ``spark.sql.shuffle.partitions``."""
    setting = spark.conf.get("spark.default.parallelism", None)
    if setting:
        return int(setting)
    try:
        cores = local_cores(spark.conf.get("spark.master", ""))
    except Exception:  # a managed service may hide the master
        cores = None
    return cores or int(spark.conf.get("spark.sql.shuffle.partitions"))
