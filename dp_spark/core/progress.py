"""Progress on stderr: timed text lines for people, or one JSON object per line for schedulers.

In JSON mode every line is an object with ``ts`` (UTC), ``elapsed_s`` and ``event``:

- ``{"event": "stage", "stage": "read", "status": "ok" | "failed", "seconds": 1.23}`` when a stage
  ends, and ``{"event": "stage", "stage": "read", "status": "started"}`` when it starts;
- ``{"event": "message", "message": "..."}`` for the same messages the text mode prints;
- ``{"event": "end", "status": "released" | "unchanged" | "refused" | "error" | ..., "exit_code": 0}``
  once, last.

Context given to :meth:`Progress.context` (job, output, run date) is repeated on every line, so
lines from several jobs in one log can be told apart.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sys
import time

FORMATS = ("text", "json")


class Progress:
    """Callable with a message; ``stage(name)`` times a block of work."""

    def __init__(self, stream=None, log_format: str = "text"):
        if log_format not in FORMATS:
            raise ValueError(f"log format must be one of {FORMATS}, got {log_format!r}")
        self.stream = stream  # None: whatever sys.stderr is at the time of the message
        self.json = log_format == "json"
        self.started = time.monotonic()
        self.fields: dict = {}

    def context(self, **fields) -> None:
        self.fields.update({k: v for k, v in fields.items() if v is not None})

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _emit(self, event: str, **fields) -> None:
        line = {"ts": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
                "elapsed_s": round(self._elapsed(), 3), "event": event, **self.fields, **fields}
        print(json.dumps(line, default=str), file=self.stream or sys.stderr, flush=True)

    def __call__(self, message: str) -> None:
        if self.json:
            self._emit("message", message=message)
        else:
            print(f"[dp-spark {self._elapsed():6.1f}s] {message}", file=self.stream or sys.stderr, flush=True)

    @contextlib.contextmanager
    def stage(self, name: str):
        """Time a stage; in JSON mode, one line when it starts and one when it ends."""
        began = time.monotonic()
        if self.json:
            self._emit("stage", stage=name, status="started")
        try:
            yield
        except BaseException:
            if self.json:
                self._emit("stage", stage=name, status="failed", seconds=round(time.monotonic() - began, 3))
            raise
        if self.json:
            self._emit("stage", stage=name, status="ok", seconds=round(time.monotonic() - began, 3))

    def end(self, status: str, exit_code: int, **fields) -> None:
        """The last line of a run (JSON mode only: text mode has said it all already)."""
        if self.json:
            self._emit("end", status=status, exit_code=exit_code, **fields)


def stage(progress, name: str):
    """``progress.stage(name)``, or nothing for a plain message callable (bench, peers)."""
    return progress.stage(name) if hasattr(progress, "stage") else contextlib.nullcontext()
