"""Errors a user can fix. The CLI prints their message on one line and exits 2."""


class DpSparkError(Exception):
    """Base class: bad configuration, bad input data, or a refused privacy spend."""


class ConfigError(DpSparkError):
    """The job configuration is invalid; raised before any data is read."""


class DataError(DpSparkError):
    """The input data cannot be used as it is (missing column, bad ids, empty)."""
