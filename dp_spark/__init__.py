"""dp-spark: differentially private statistics over user-contributed data.

The pipeline is bound -> aggregate -> publish; every epsilon is spent through the ledger
(:class:`dp_spark.core.ledger.Budget`). The public API works on your own DataFrame::

    import dp_spark
    release = dp_spark.sra(df, privacy_unit="user_id", item="movie_id", items=range(1, 17771), l=10, epsilon=1)
    release["item_counts"]; release.report; release.write("out/counts")

docs/api.md shows every function; docs/architecture.md the layout of the package.
"""

import os as _os
import sys as _sys

from dp_spark.errors import ConfigError, DataError, DpSparkError, GuardRefused
from dp_spark.io.spark_channels import SparkChannelsNotice
from dp_spark.version import __version__

# Spark's local Python workers run PYSPARK_PYTHON, else whatever `python3` comes first on the PATH,
# fixed when the SparkContext starts. A script or notebook kernel started as .venv/bin/python
# (the venv not on the PATH) would get a bare python3 without numpy, pandas or pyarrow. So a
# session built after `import dp_spark` runs its local workers in this interpreter. Not under
# spark-submit or the pyspark shell (PYSPARK_GATEWAY_PORT), whose Python is the submitter's
# choice, never over a choice already made, and not while a context runs: its workers' Python is
# fixed, and the executors' check (io/executor_env.py) reads the variable to know it.
# docs/cluster.md: a plain-Python driver of a cluster sets PYSPARK_PYTHON to the nodes' Python.
_context = getattr(_sys.modules.get("pyspark"), "SparkContext", None)
if (not _os.environ.get("PYSPARK_PYTHON") and not _os.environ.get("PYSPARK_GATEWAY_PORT") and _sys.executable
        and getattr(_context, "_active_spark_context", None) is None):
    _os.environ["PYSPARK_PYTHON"] = _sys.executable

__all__ = [
    "__version__", "BudgetExceeded", "ConfigError", "DataError", "DatasetBudget", "DpSparkError", "GuardRefused",
    "Plan", "Release", "aggregate", "dft", "dpsense", "dpsense_s", "frapp", "gs", "hpa", "location_entropy", "lpa",
    "means", "plan", "rho_per_run", "SparkChannelsNotice", "sra", "user_histogram",
]

# The API's names are loaded on first use: ``import dp_spark`` (and so every ``dp-spark`` command,
# whose modules live in this package) then does not pay for pandas and PySpark until it needs them,
# and imports without numpy at all, as the executors' pre-flight check needs (io/executor_env.py).
_API_NAMES = frozenset({"BudgetExceeded", "DatasetBudget", "Plan", "Release", "aggregate", "dft", "dpsense",
                        "dpsense_s", "frapp", "gs", "hpa", "location_entropy", "lpa", "means", "plan", "rho_per_run",
                        "sra", "user_histogram"})


def __getattr__(name: str):
    if name in _API_NAMES:
        from dp_spark import api

        return getattr(api, name)
    raise AttributeError(f"module 'dp_spark' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _API_NAMES)
