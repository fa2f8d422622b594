"""Pre-flight on the executors: their Python has the packages dp-spark runs there, at the driver's
versions, and the driver's dp-spark code (docs/cluster.md, "The check before the charge").

dp-spark runs numpy, pandas and pyarrow code inside Spark's Python workers (the noise of a table
released on the executors, FRAPP's perturbation). On a cluster whose nodes have a bare Python the
first such step would fail with a worker's traceback, after the budget was charged. This check runs
one small Spark job before the charge: each task describes the Python it runs in, and the driver
compares every description with its own. A difference is a PreflightError (exit 2, nothing charged
or written) that says what differs and how to ship the driver's environment (``make package``,
``scripts/submit.sh --package``).

Why exact versions: a seeded release must be the same on the cluster as in local mode, and the
executors' code is tested with the driver's packages only; a different numpy is a different program.

This module imports only the standard library at the top: :func:`describe` runs on the executors,
where nothing else may be installed (``import dp_spark`` is kept free of numpy for the same reason).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

# What the executors import (dp_spark/publishers/executor_laplace.py, dp_spark/families/frapp/mining.py).
PACKAGES = ("numpy", "pandas", "pyarrow")
FIX = ("Build the driver's environment into one file with `make package` and submit with `scripts/submit.sh CONF "
       "--package ...`, or give the executors a Python with the driver's packages (spark.pyspark.python); "
       "docs/cluster.md")


def code_fingerprint(root=None) -> str:
    """A digest of dp_spark's Python sources, wherever this interpreter imports them from (a
    directory, the --py-files zip, the packaged environment): equal digests, same code.
    ``root``: the package's folder as an importlib Traversable (default: the one imported)."""
    from importlib import resources

    root = root or resources.files("dp_spark")
    digest = hashlib.sha256()
    stack = [root]
    sources = []
    while stack:
        node = stack.pop()
        for child in node.iterdir():
            if child.is_dir():
                if child.name != "__pycache__":
                    stack.append(child)
            elif child.name.endswith(".py"):
                sources.append(child)
    prefix = len(str(root).rstrip("/"))
    for source in sorted(sources, key=str):  # named by their path inside the package
        digest.update(str(source)[prefix:].encode())
        digest.update(b"\0")
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def describe(_row_id: Any = None) -> str:
    """This Python, as JSON: its version and path, each package's version (or why it does not
    import), and dp-spark's version and code. Runs on the executors (a Spark UDF), so it never
    raises: a failure to import is part of the description."""
    import importlib
    import socket

    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = importlib.import_module(name).__version__
        except Exception as exc:  # noqa: BLE001 - a broken install is what we report
            packages[name] = f"missing ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    try:
        from dp_spark.version import __version__

        dp_spark = f"{__version__} (code {code_fingerprint()})"
    except Exception as exc:  # noqa: BLE001
        dp_spark = f"missing ({type(exc).__name__})"
    return json.dumps({
        "python": ".".join(map(str, sys.version_info[:3])),
        "executable": sys.executable,
        "host": socket.gethostname(),
        "packages": {**packages, "dp-spark": dp_spark},
    }, sort_keys=True)


def this_python() -> dict:
    """The driver's own description, to compare the executors' with."""
    return json.loads(describe())


def differences(driver: dict, executors: list[dict]) -> list[str]:
    """What the executors' Pythons lack or hold at another version than the driver's, one line
    each (empty: they match). Python itself must agree in major.minor (Spark refuses otherwise)."""
    lines = []
    for seen in executors:
        where = f"{seen['executable']} (host {seen['host']})"
        if seen["python"].split(".")[:2] != driver["python"].split(".")[:2]:
            lines.append(f"Python {seen['python']} ({where}), the driver's is {driver['python']}")
        missing = [name for name, version in seen["packages"].items() if version.startswith("missing")]
        if missing:
            lines.append(f"no {', '.join(missing)} in {where}")
        for name, version in seen["packages"].items():
            if name not in missing and version != driver["packages"].get(name):
                lines.append(f"{name} {version} in {where}, the driver's is {driver['packages'].get(name)}")
    return lines


MAX_PROBE_TASKS = 256  # tasks of the probe job at most
_CHECKED: set[str] = set()  # applications whose executors passed (one probe per session)


def needs_check(spark) -> bool:
    """Whether the executors may run another Python than this one: not for a classic session in
    local mode whose workers run this interpreter (dp_spark.io.session sets that up). A classic
    context takes its workers' Python from PYSPARK_PYTHON when it starts (spark-submit puts
    spark.pyspark.python there), else ``python3``."""
    from dp_spark.io.session import is_connect, local_cores

    if is_connect(spark):
        return True
    worker_python = os.environ.get("PYSPARK_PYTHON", "python3")
    # abspath, not realpath: a bare venv's python is a link to the same interpreter as the driver's venv.
    return not (local_cores(spark.conf.get("spark.master", "")) and
                os.path.abspath(worker_python) == os.path.abspath(sys.executable))


def _local_classic(spark) -> bool:
    from dp_spark.io.session import is_connect, local_cores

    return not is_connect(spark) and bool(local_cores(spark.conf.get("spark.master", "")))


def _local_mismatch(what: str):
    """The one line for a local session whose workers run another Python: the cluster advice
    (package, submit) does not apply there."""
    from dp_spark.errors import PreflightError

    worker_python = os.environ.get("PYSPARK_PYTHON", "python3")
    return PreflightError(f"in local mode Spark's Python workers run {worker_python!r} (fixed when the session "
                          f"started), not this interpreter, and {what}: set os.environ['PYSPARK_PYTHON'] = "
                          "sys.executable (or import dp_spark) before the SparkSession starts, or start Python with "
                          "the venv first on the PATH")


def check(spark, progress=None) -> None:
    """Refuse (PreflightError) executors whose Python differs from the driver's, before any
    budget is charged; once per application, and not at all where :func:`needs_check` says no."""
    from dp_spark.errors import PreflightError

    if not needs_check(spark):
        return
    application = _application(spark)
    if application in _CHECKED:
        return
    if progress is not None:
        progress("checking the executors' Python (numpy, pandas, pyarrow and dp-spark as on the driver)")
    local = _local_classic(spark)
    try:
        seen = probe(spark)
    except Exception as exc:  # noqa: BLE001 - Spark's own failure, shortened below
        if local:
            raise _local_mismatch(f"they could not run dp-spark's check ({failure_reason(exc)})") from None
        raise PreflightError(f"the executors could not run dp-spark's Python check: {failure_reason(exc)}. "
                             f"{FIX}") from None
    problems = differences(this_python(), seen)
    if problems and local:
        raise _local_mismatch(problems[0])
    if problems:
        shown = problems[:6] + ([f"... and {len(problems) - 6} more"] if len(problems) > 6 else [])
        raise PreflightError("the executors' Python does not match the driver's: " + "; ".join(shown) + f". {FIX}")
    _CHECKED.add(application)


def probe(spark, tasks: int | None = None) -> list[dict]:
    """Each distinct description of the Pythons that ``tasks`` tasks ran in, through a plain
    Python UDF (no Arrow, no pandas: those may be missing). By default as many tasks as Spark's
    default parallelism (spark.default.parallelism, a local master's cores, else the shuffle
    partitions), at least 2 and at most MAX_PROBE_TASKS."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from dp_spark.io.session import default_parallelism

    if tasks is None:
        tasks = max(2, min(default_parallelism(spark), MAX_PROBE_TASKS))
    described = F.udf(describe, StringType(), useArrow=False)
    rows = spark.range(0, tasks, 1, tasks).select(described("id").alias("python")).collect()
    return [json.loads(text) for text in sorted({row.python for row in rows})]


def _application(spark) -> str:
    try:
        return spark.conf.get("spark.app.id")
    except Exception:  # noqa: BLE001 - a managed service may hide it
        return str(id(spark))


# Spark wraps a worker's failure in several layers; these lines say what happened.
_REASONS = ("Cannot run program", "PYTHON_VERSION_MISMATCH", "Python in worker has different version",
            "No such file or directory", "ModuleNotFoundError", "ImportError", "Permission denied")


def failure_reason(exc: BaseException) -> str:
    """One line from a failed probe job: the first line naming a known cause, else the message's
    first line (never a traceback)."""
    text = str(getattr(exc, "desc", None) or exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for reason in _REASONS:
        for line in lines:
            if reason in line:
                return line[:300]
    return (lines[0] if lines else type(exc).__name__)[:300]
