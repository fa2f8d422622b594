"""Getting a SparkSession, in local mode or under spark-submit."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dp_spark.errors import DpSparkError

# Settings every dp-spark job wants, under spark-submit too (the session is
# built here); a job's [spark] table overrides them.
DEFAULT_SPARK_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.showConsoleProgress": "true",
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


def get_session(master: str | None = None, conf: dict[str, str] | None = None, app_name: str = "dp-spark"):
    """The active session, or a new one: ``master`` if given, else the master
    spark-submit set, else ``local[*]``."""
    check_java()
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not SparkConf().contains("spark.master"):
        builder = builder.master("local[*]")
    for key, value in {**DEFAULT_SPARK_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
