"""Errors a user can fix. The CLI prints their message on one line and exits 2."""


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
