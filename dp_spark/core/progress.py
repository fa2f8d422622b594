"""Progress on stderr: timed text lines for people, or one JSON object per line for schedulers.

In JSON mode every line is an object with ``ts`` (UTC), ``elapsed_s`` and ``event``:

- ``{"event": "stage", "stage": "read", "status": "ok" | "failed", "seconds": 1.23}`` when a stage
  ends, and ``{"event": "stage", "stage": "read", "status": "started"}`` when it starts;
- ``{"event": "message", "message": "..."}`` for the same messages the text mode prints;
- ``{"event": "spark_log", "line": "..."}`` for each line the driver JVM writes to stderr (Spark's
  log at WARN and above, Java's own warnings), and ``{"event": "python_log", "level": "WARNING",
  "logger": "py.warnings", "message": "..."}`` for Python warnings and log records;
- ``{"event": "heartbeat", "stage": "read", "seconds": 30.0, "estimate_left_s": 95.0}`` every
  HEARTBEAT_SECONDS while a stage runs (text mode: "still in stage read (5 of 8) after 30s; about
  1m35s left (the last release of this output took 2m05s)"); the estimate comes from the budget
  store's record of the last release of the same output, and is left out without one;
- ``{"event": "end", "status": "released" | "unchanged" | "refused" | "error" | ..., "exit_code": 0}``
  once, last: anything after it is dropped, so that a scheduler can stop reading there.

Context given to :meth:`Progress.context` (job, output, run date) is repeated on every line, so
lines from several jobs in one log can be told apart.

What the log says is an output too: by default every line depends only on the config, the public
domains and DP outputs. Raw figures (records read, users, rows kept) go through :func:`diagnostic`
and are printed only when the operator asks (``diagnostics=True``: ``dp-spark run --diagnostics``),
each marked NOT PRIVATE; in JSON mode they are ``{"event": "diagnostic", "message": "..."}``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import sys
import threading
import time

FORMATS = ("text", "json")
# The stages of ``dp-spark run`` in order (charge and record only with a budget store).
RUN_STAGES = ("config", "spark", "plan", "charge", "read", "release", "write", "record")
# A stage still running after this long says so, and again as often, with an estimate when one is known.
HEARTBEAT_SECONDS = 30.0


WARNING = "WARNING"  # how a message that must reach a reader starts (a quiet Progress prints only these)


def in_notebook() -> bool:
    """Whether this Python runs a Jupyter kernel (IPython's shell over ZeroMQ)."""
    ipython = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return type(ipython).__name__ == "ZMQInteractiveShell"


def default_progress() -> Progress:
    """The API's progress when the caller gives none: every step on stderr, or in a notebook only
    the warnings (pass ``progress=print`` to see every step there)."""
    return Progress(quiet=in_notebook())


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Callable with a message; ``stage(name)`` times a block of work."""

    def __init__(self, stream=None, log_format: str = "text", diagnostics: bool = False,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, quiet: bool = False):
        if log_format not in FORMATS:
            raise ValueError(f"log format must be one of {FORMATS}, got {log_format!r}")
        self.stream = stream  # None: whatever sys.stderr is at the time of the message
        # Warnings only (a notebook's default: every other line would sit under each cell).
        self.quiet = quiet
        self.json = log_format == "json"
        self.diagnostics = diagnostics  # raw, NOT-private figures in the log: only when the operator asks
        self.started = time.monotonic()
        self.fields: dict = {}
        self.ended = False
        # The JVM's lines arrive on another thread; reentrant, as a signal handler may log while
        # the main thread is inside _emit.
        self._lock = threading.RLock()
        self.heartbeat_seconds = heartbeat_seconds
        # An estimate of the work from the read on (expect()): the last release of the same output.
        self._expected: tuple[float, float] | None = None  # (seconds it took, when this run's work began)

    def expect(self, seconds: float) -> None:
        """The run's work (read to record) is expected to take about ``seconds``, as the last release
        of the same output did: long stages then say how much is left."""
        self._expected = (seconds, time.monotonic())

    def _still_running(self, name: str, began: float) -> None:
        """The heartbeat of a long stage: which stage, for how long, and an estimate if known."""
        so_far = time.monotonic() - began
        position = f" ({RUN_STAGES.index(name) + 1} of {len(RUN_STAGES)})" if name in RUN_STAGES else ""
        estimate, left = "", None
        if self._expected is not None:
            took, since = self._expected
            left = took - (time.monotonic() - since)
            estimate = (f"; about {_duration(left)} left (the last release of this output took {_duration(took)})"
                        if left > 0 else f"; longer than the last release of this output ({_duration(took)})")
        if self.json:
            self._emit("heartbeat", stage=name, seconds=round(so_far, 1),
                       **({} if left is None else {"estimate_left_s": round(max(left, 0.0), 1)}))
        else:
            self(f"still in stage {name}{position} after {_duration(so_far)}{estimate}")

    def _heartbeat(self, name: str, began: float, done: threading.Event) -> None:
        while not done.wait(self.heartbeat_seconds):
            self._still_running(name, began)

    def context(self, **fields) -> None:
        self.fields.update({k: v for k, v in fields.items() if v is not None})

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _emit(self, event: str, **fields) -> None:
        line = {"ts": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
                "elapsed_s": round(self._elapsed(), 3), "event": event, **self.fields, **fields}
        text = json.dumps(line, default=str)
        with self._lock:
            if self.ended:
                return
            self.ended = event == "end"
            print(text, file=self.stream or sys.stderr, flush=True)

    def spark_log(self, line: str) -> None:
        """A line the driver JVM wrote to stderr: an event of its own in JSON mode."""
        if self.json:
            self._emit("spark_log", line=line)
        else:
            print(line, file=self.stream or sys.stderr, flush=True)

    @contextlib.contextmanager
    def python_logs(self):
        """In JSON mode, Python warnings and log records (which would otherwise print text on
        stderr) become ``python_log`` events while the block runs."""
        if not self.json:
            yield
            return
        handler = _EventHandler(self)
        root = logging.getLogger()
        root.addHandler(handler)
        logging.captureWarnings(True)
        try:
            yield
        finally:
            logging.captureWarnings(False)
            root.removeHandler(handler)

    def __call__(self, message: str) -> None:
        if self.quiet and not message.startswith(WARNING):
            return
        if self.json:
            self._emit("message", message=message)
        else:
            print(f"[dp-spark {self._elapsed():6.1f}s] {message}", file=self.stream or sys.stderr, flush=True)

    def diagnostic(self, message: str) -> None:
        """A raw figure for the operator: printed only when diagnostics were asked for."""
        if not self.diagnostics:
            return
        if self.json:
            self._emit("diagnostic", message=message)
        else:
            print(f"[dp-spark {self._elapsed():6.1f}s] NOT PRIVATE: {message}", file=self.stream or sys.stderr,
                  flush=True)

    @contextlib.contextmanager
    def stage(self, name: str):
        """Time a stage; in JSON mode, one line when it starts and one when it ends."""
        began = time.monotonic()
        if self.json:
            self._emit("stage", stage=name, status="started")
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(name, began, done), name="dp-spark-heartbeat",
                                daemon=True)
        beat.start()
        try:
            yield
        except BaseException:
            if self.json:
                self._emit("stage", stage=name, status="failed", seconds=round(time.monotonic() - began, 3))
            raise
        finally:
            done.set()
        if self.json:
            self._emit("stage", stage=name, status="ok", seconds=round(time.monotonic() - began, 3))

    def end(self, status: str, exit_code: int, **fields) -> None:
        """The last line of a run (JSON mode only: text mode has said it all already)."""
        if self.json:
            self._emit("end", status=status, exit_code=exit_code, **fields)


class _EventHandler(logging.Handler):
    def __init__(self, progress: Progress):
        super().__init__(logging.WARNING)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage().strip()
        except Exception:  # noqa: BLE001 - a bad format string must not end the run
            message = str(record.msg)
        self.progress._emit("python_log", level=record.levelname, logger=record.name, message=message)


def diagnostic(progress, message: str) -> None:
    """``progress.diagnostic(message)``; a plain message callable (an API caller's) gets none: raw
    figures reach an API caller through ``Release.diagnostics`` instead."""
    if hasattr(progress, "diagnostic"):
        progress.diagnostic(message)


def stage(progress, name: str):
    """``progress.stage(name)``, or nothing for a plain message callable (bench, peers)."""
    return progress.stage(name) if hasattr(progress, "stage") else contextlib.nullcontext()
