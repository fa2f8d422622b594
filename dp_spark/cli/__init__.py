"""The command line: ``dp-spark run | generate | bench | evaluate | audit | audit-report | budget``."""

from dp_spark.cli.main import main

__all__ = ["main"]
