"""Exit statuses and the one-line error messages that every command prints."""

from __future__ import annotations

import signal
import sys

from dp_spark.core.privacy import BudgetExceeded
from dp_spark.errors import DpSparkError, Interrupted

EXIT_OK, EXIT_RUNTIME, EXIT_INPUT, EXIT_BUDGET, EXIT_AUDIT = 0, 1, 2, 3, 4


def status_of(exc: BaseException) -> tuple[str, int]:
    if isinstance(exc, Interrupted):
        return "interrupted", exc.exit_code
    if isinstance(exc, KeyboardInterrupt):  # SIGINT outside dp-spark's handler (e.g. while Spark starts)
        return "interrupted", 128 + signal.SIGINT
    if isinstance(exc, BudgetExceeded):
        return "refused", EXIT_BUDGET
    if isinstance(exc, DpSparkError):
        return "bad_input", EXIT_INPUT
    return "error", EXIT_RUNTIME


def one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
