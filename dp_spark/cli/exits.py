"""Exit statuses and the one-line error messages that every command prints.

A failure at run time (Spark, the file system, a bug) ends with one line naming its root cause:
the innermost exception of the Python chain, and inside a Spark/Py4J error the innermost Java
``Caused by:``. The traceback is for ``--debug`` (and the JSON log's ``end`` event), not for the
scheduler's mail.
"""

from __future__ import annotations

import logging
import re
import signal
import sys
import traceback

from dp_spark.errors import BudgetExceeded, DpSparkError, GuardRefused, Interrupted

EXIT_OK, EXIT_RUNTIME, EXIT_INPUT, EXIT_BUDGET, EXIT_AUDIT = 0, 1, 2, 3, 4
# A guard refused the release on its noisy figures, after the charge: nothing was released, the
# charge stays, and a retry on the same data is refused again (docs/operations.md).
EXIT_GUARD = 5

# PySpark logs every analysis error that carries a DataFrame query context (the message, the
# plan and the Java stack, one long line on stderr) before the exception reaches us.
SPARK_ERROR_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")
_MAX_CHARS = 500
_LOST_TASK = re.compile(r"most recent failure: Lost task .*?\): (.+)$")
# A Java exception's package, before its class name: "java.io." of "java.io.IOException: ...".
_JAVA_PACKAGE = re.compile(r"^(?:[a-z_$][\w$]*\.)+(?=[A-Z][\w$]*(?:Exception|Error)\b)")


def status_of(exc: BaseException) -> tuple[str, int]:
    if isinstance(exc, Interrupted):
        return "interrupted", exc.exit_code
    if isinstance(exc, KeyboardInterrupt):  # SIGINT outside dp-spark's handler (e.g. while Spark starts)
        return "interrupted", 128 + signal.SIGINT
    if isinstance(exc, BudgetExceeded):
        return "refused", EXIT_BUDGET
    if isinstance(exc, GuardRefused):
        return "guard_refused", EXIT_GUARD
    if isinstance(exc, DpSparkError):
        return "bad_input", EXIT_INPUT
    return "error", EXIT_RUNTIME


def one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def innermost_java_cause(text: str) -> str | None:
    """The last ``Caused by:`` of a Java stack trace, as "IOException: message"; None without one.

    A Java trace lists the outermost exception first and each cause after ``Caused by:``; the
    last is where the failure began (a full disk under a Spark job abort)."""
    causes = [line.strip()[len("Caused by:"):].strip() for line in text.splitlines()
              if line.strip().startswith("Caused by:")]
    return short_java_name(causes[-1]) if causes else None


def short_java_name(line: str) -> str:
    """"java.io.IOException: No space left" -> "IOException: No space left" (a message alone stays)."""
    return _JAVA_PACKAGE.sub("", line.strip(), count=1)


def _python_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, outermost first (explicit causes, then implicit contexts)."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        chain.append(exc)
        seen.add(id(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return chain


def _java_text(exc: BaseException) -> str:
    """The Java stack trace a Py4J or PySpark exception carries, or "" (never calls the JVM
    beyond what str() of a Py4JJavaError does)."""
    stack = getattr(exc, "_stackTrace", None)  # pyspark.errors CapturedException
    if isinstance(stack, str):
        return stack
    if type(exc).__name__ == "Py4JJavaError":
        try:
            return str(exc)
        except Exception:  # noqa: BLE001 - a dead JVM: no trace to read
            return ""
    return ""


def _java_headline(trace: str) -> str | None:
    """A Java trace's first line when it names a Java exception ("IOException: No space left")."""
    first = trace.strip().splitlines()[0].strip() if trace.strip() else ""
    return short_java_name(first) if _JAVA_PACKAGE.match(first) else None


def _message(exc: BaseException) -> str:
    """One exception as one line: OSError as "reason: file", a PySpark error by its description,
    a Py4J error by its Java exception, a failed Spark task by the task's error."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{type(exc).__name__}: {exc.strerror}{where}"
    desc = getattr(exc, "_desc", None)  # PySpark: str() would append the JVM stack trace
    text = desc if isinstance(desc, str) and desc.strip() else str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    name = type(exc).__name__
    if name == "Py4JJavaError":  # "An error occurred while calling o12.x." then ": java...Exception: msg"
        lines = [line.removeprefix(": ") for line in lines[1:2]]
        name = ""
    if not lines:
        return type(exc).__name__
    if any("Traceback (most recent call last)" in line for line in lines):
        # A Python worker's traceback (PythonException): its last line is the error, before Spark's SQLSTATE.
        return [line for line in lines if not line.startswith("SQLSTATE")][-1]
    lost_task = _LOST_TASK.search(lines[0])
    if lost_task:  # "Job aborted due to stage failure: ... most recent failure: Lost task ...: <the error>"
        return short_java_name(lost_task.group(1))
    return f"{name}: {lines[0]}" if name else short_java_name(lines[0])


def root_cause(exc: BaseException) -> str:
    """The innermost cause of a failure, on one line of at most 500 characters.

    The innermost exception of the Python chain; inside a Spark error, its innermost Java
    ``Caused by:`` (so "Job aborted ... 93 frames ... No space left on device" gives the last)."""
    innermost = _python_chain(exc)[-1]
    pyspark_cause = getattr(innermost, "_cause", None)
    while isinstance(pyspark_cause, BaseException):  # a CapturedException's converted Java cause
        innermost, pyspark_cause = pyspark_cause, getattr(pyspark_cause, "_cause", None)
    java = _java_text(innermost)
    text = innermost_java_cause(java) or _java_headline(java) or _message(innermost)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_CHARS else text[: _MAX_CHARS - 3] + "..."


def error_fields(exc: BaseException) -> dict:
    """What a run's ``end`` event says about its failure: the one-line error and, for a runtime
    failure, the root cause and the full traceback (the JSON log keeps what --debug prints)."""
    if status_of(exc)[1] != EXIT_RUNTIME:
        return {"error": one_line(exc)}
    return {"error": root_cause(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}


def quiet_spark_error_logs() -> None:
    """Keep PySpark from logging a failed query's plan and Java stack on stderr (``--debug``
    leaves it on): the error reaches our handler, which prints its root cause."""
    for name in SPARK_ERROR_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
