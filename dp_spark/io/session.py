"""Getting a SparkSession, in local mode or under spark-submit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

from dp_spark.errors import ConfigError, DpSparkError, PreflightError

# Settings every dp-spark job wants, under spark-submit too (the session is
# built here); a job's [spark] table overrides them.
DEFAULT_SPARK_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    # PySpark otherwise sends each Column operation's Python call site to the JVM (for error
    # messages): ten JVM calls instead of one, 2,027 instead of 837 in one HPA run.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Set when the context starts, so on a local Spark Connect server too (a Connect client has
    # no SparkContext.setLogLevel).
    "spark.log.level": "WARN",
    # Spark's UI shows exact figures of the data (rows read, rows per step), which are not private:
    # off unless the job's [spark] table or spark-defaults turns it on (io/spark_channels.py).
    "spark.ui.enabled": "false",
}

# Spark's own log at WARN without the start-up noise: installed for the driver JVM that
# get_session launches; under spark-submit the site passes it (docs/scheduled_runs.md).
LOG4J2_FILE = Path(__file__).with_name("log4j2.properties")
LOG4J2_OPTION = "log4j2.configurationFile"


def console_progress(stderr=None) -> bool:
    """Whether Spark's console progress bar is wanted: only on a terminal. Its carriage-return
    redraws would glue themselves to the lines a scheduler or a log file collects."""
    stream = sys.stderr if stderr is None else stderr
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def site_log4j2_config(settings: dict[str, str], environ=os.environ) -> bool:
    """Whether the site configures Spark's log itself (a -Dlog4j2.configurationFile in
    SPARK_SUBMIT_OPTS or the driver's Java options, or a log4j2 file in its Spark conf dir);
    then dp-spark leaves the log alone."""
    options = [environ.get("SPARK_SUBMIT_OPTS", ""), settings.get("spark.driver.extraJavaOptions", ""),
               settings.get("spark.driver.defaultJavaOptions", "")]
    if any(LOG4J2_OPTION in option for option in options):
        return True
    conf_dirs = [environ.get("SPARK_CONF_DIR")] + (
        [f"{environ['SPARK_HOME']}/conf"] if environ.get("SPARK_HOME") else []
    )
    return any(Path(d, name).is_file() for d in conf_dirs if d
               for name in ("log4j2.properties", "log4j2.xml", "log4j2.yaml", "log4j2.json"))


def install_log4j2(settings: dict[str, str], environ=os.environ) -> bool:
    """Point the driver JVM that pyspark is about to launch at LOG4J2_FILE (through
    SPARK_SUBMIT_OPTS, which Spark's launcher adds to the JVM's options before a job's own
    spark.driver.extraJavaOptions); False when the site configures the log itself."""
    if site_log4j2_config(settings, environ):
        return False
    option = f"-D{LOG4J2_OPTION}={LOG4J2_FILE.as_uri()}"
    environ["SPARK_SUBMIT_OPTS"] = f"{environ.get('SPARK_SUBMIT_OPTS', '')} {option}".strip()
    return True


def _pump_lines(stream, sink: Callable[[str], None]) -> None:
    """Hand each line the JVM writes to ``sink``, until the JVM closes its end of the pipe."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line.strip():
            sink(line)


def _launch_jvm(master: str, app_name: str, settings: dict[str, str], stderr_sink: Callable[[str], None]) -> None:
    """Start the driver JVM with its stderr on a pipe whose lines go to ``stderr_sink``: the JVM
    writes some lines outside log4j ("WARNING: Using incubator modules", Java's own errors),
    and its Python workers inherit the same stderr."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf().setMaster(master).setAppName(app_name).setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_pump_lines, args=(gateway.proc.stderr, stderr_sink), name="jvm-stderr",
                     daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


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


CONNECT_SCHEME = "sc://"


def connect_url(master: str | None, conf: dict[str, str], environ=os.environ) -> str | None:
    """The Spark Connect server a session should use, or None for a classic session: a master
    given as ``sc://...`` (``--remote`` and ``--master`` alike), else the job's ``spark.remote``,
    else ``SPARK_REMOTE``. Under spark-submit the JVM is already up: classic."""
    if master is not None:
        if master.startswith(CONNECT_SCHEME):
            return master
        other = conf.get("spark.remote") or environ.get("SPARK_REMOTE")
        if other:
            raise ConfigError(f"both a Spark master ({master}) and a Spark Connect server ({other}, from "
                              f"{'spark.remote' if conf.get('spark.remote') else 'SPARK_REMOTE'}) are given: "
                              "keep one")
        return None
    if environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    return conf.get("spark.remote") or environ.get("SPARK_REMOTE") or None


def session_settings(
    defaults: dict[str, str], submitted: Callable[[str], bool], conf: dict[str, str]
) -> dict[str, str]:
    """The settings a new session starts with: dp-spark's ``defaults`` where spark-submit and the
    site's spark-defaults.conf (``submitted(key)``: whether they set it) say nothing, then the
    job's own ``conf`` over both."""
    return {**{k: v for k, v in defaults.items() if not submitted(k)}, **conf}


def get_session(master: str | None = None, conf: dict[str, str] | None = None, app_name: str = "dp-spark",
                progress_bar: bool | None = None, jvm_stderr: Callable[[str], None] | None = None):
    """The active session, or a new one: ``master`` if given, else the master
    spark-submit set, else ``local[*]``; a Spark Connect session when :func:`connect_url`
    names a server.

    Spark's console progress bar is on when ``progress_bar`` says so, by default when stderr is a
    terminal. A driver JVM launched here logs through LOG4J2_FILE (unless the site has its own),
    and with ``jvm_stderr`` writes its stderr, line by line, to that callable instead of ours."""
    url = connect_url(master, conf or {})
    if url is not None:
        return connect_session(url, {k: v for k, v in (conf or {}).items() if k != "spark.remote"}, app_name)
    conf = {k: v for k, v in (conf or {}).items() if k != "spark.remote"}
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Under spark-submit the job is classic even with SPARK_REMOTE exported for other commands:
        # PySpark's builder would otherwise turn to Connect.
        os.environ.pop("SPARK_REMOTE", None)
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
    show_bar = console_progress() if progress_bar is None else progress_bar
    defaults["spark.ui.showConsoleProgress"] = "true" if show_bar else "false"
    cores = local_cores(master)
    if cores:
        # 200 shuffle partitions (Spark's default) cost more in task overhead than they
        # save on a laptop; a few per core keep both cores busy (docs/lab/performance.md).
        defaults["spark.sql.shuffle.partitions"] = str(4 * cores)
        # Local Python workers (FRAPP's perturbation runs in them) need this interpreter's
        # packages, not whatever "python3" is first on the PATH.
        if not submitted.contains("spark.pyspark.python"):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = session_settings(defaults, submitted.contains, conf or {})
    if SparkContext._gateway is None:  # this call launches the driver JVM (not under spark-submit)
        install_log4j2(settings)
        if jvm_stderr is not None:
            _launch_jvm(master, app_name, settings, jvm_stderr)
    for key, value in settings.items():
        builder = builder.config(key, value)
    already_running = SparkContext._active_spark_context is not None
    spark = builder.getOrCreate()
    if already_running:
        warn_unapplied(spark, conf or {})
    check_catalog(spark, conf or {})
    return spark


def connect_session(url: str, conf: dict[str, str], app_name: str = "dp-spark"):
    """A Spark Connect session on the server at ``url`` (``sc://host:port``; ``local[N]`` starts
    one in this process, which needs Java). The server was configured when it started: of the
    job's settings only runtime SQL ones can be set here; any other the server does not hold
    gives a SparkSettingNotApplied warning, as on a classic session already running."""
    from pyspark.sql import SparkSession

    local_server = not url.startswith(CONNECT_SCHEME)
    if local_server:
        check_java()
    builder = SparkSession.builder.remote(url).appName(app_name)
    if local_server:  # the server starts here, with the settings a classic local session gets
        for key, value in {**DEFAULT_SPARK_CONF, **conf}.items():
            builder = builder.config(key, value)
    with warnings.catch_warnings():  # the client sets static settings again once started: refused, checked below
        warnings.filterwarnings("ignore", "Failed to set spark", UserWarning)
        spark = builder.getOrCreate()
    for key, value in conf.items():
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)
    warn_unapplied(spark, conf)
    check_catalog(spark, conf)
    return spark


class SparkSettingNotApplied(UserWarning):
    """A job's Spark setting that the session already running did not take."""


def warn_unapplied(spark, conf: dict[str, str]) -> None:
    """Warn about each of the job's settings the session does not hold: a session that already
    existed (or a Spark Connect server) keeps the settings it started with, except runtime SQL
    ones (e.g. executor memory cannot change once the JVM is up)."""
    if not conf:
        return  # nothing to check; the context's settings cost a JVM call per setting to copy
    if is_connect(spark):
        # No context here; the server's own settings are what its sessions report.
        def started_with(key):
            return spark.conf.get(key, None)
        where = "the Spark Connect server keeps the settings it started with; give it where the server starts " \
                "(start-connect-server.sh --conf)"
    else:
        from pyspark import SparkContext

        # Classic: the running context is in this process.
        started_with = SparkContext.getOrCreate().getConf().get
        where = "the Spark session was already running; give it when Spark starts (spark-submit --conf or " \
                "spark-defaults.conf)"
    for key, value in conf.items():
        # A session already running copies every setting into its SQL conf, so spark.conf.get alone
        # would say yes; only runtime SQL settings act there, the others acted (or not) at start.
        held = spark.conf.get(key, None) if spark.conf.isModifiable(key) else started_with(key)
        if held != value:
            warnings.warn(f"Spark setting {key} = {value} not applied (the session holds "
                          f"{held if held is not None else 'no value'}): {where}", SparkSettingNotApplied,
                          stacklevel=3)


CATALOG_SETTING = "spark.sql.catalogImplementation"  # "hive" or "in-memory"; fixed when Spark starts


def check_catalog(spark, conf: dict[str, str]) -> None:
    """Refuse a session whose catalog is not the one ``conf`` asks for.

    The catalog is chosen when the SparkContext starts; ``getOrCreate`` on a session that is
    already running (a notebook's, or one spark-submit started) ignores the setting, and the job
    would silently look for its tables in another catalog (docs/scheduled_runs.md, Catalog tables)."""
    asked = conf.get(CATALOG_SETTING)
    if asked is None:
        return
    used = spark.conf.get(CATALOG_SETTING, "in-memory")
    if asked != used:
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
