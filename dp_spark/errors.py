"""Errors a user can fix. The CLI prints their message on one line and exits 2.

(And ``Interrupted``, at the end: a run stopped by a signal.)
"""

import signal


class DpSparkError(Exception):
    """Base class: bad configuration, bad input data, or a refused privacy spend."""


class ConfigError(DpSparkError):
    """The job configuration is invalid; raised before any data is read."""


class DataError(DpSparkError):
    """The input data cannot be used as it is (missing column, bad ids, empty)."""


class PreflightError(ConfigError):
    """The run cannot succeed here (output not writable, budget store unreachable, a parameter
    beyond what the engine supports); found before the budget is charged or a record is read."""


class GuardRefused(DataError):
    """A guard (the config's [guards] table) refused the run after the records were checked and
    before any noise was drawn; nothing is written, and a budget store records the run as refused."""


class OutputBusy(PreflightError):
    """Another run holds the lock of this output and run date (dp_spark/io/output_lock.py); found
    before the budget is charged."""


class Interrupted(BaseException):
    """The run was stopped by a signal (SIGTERM from a scheduler, SIGINT from Ctrl-C).

    A BaseException, like KeyboardInterrupt, so that no ``except Exception`` swallows it: it
    unwinds through every ``finally`` (the staging directory is removed, the output's lock
    released) and the budget store's failure path. The CLI exits with 128 + the signal number.
    """

    def __init__(self, signum: int):
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"stopped by {self.signal_name} (signal {signum})")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class BudgetExceeded(DpSparkError):
    """A spend (or a planned split) would exceed the total epsilon."""
