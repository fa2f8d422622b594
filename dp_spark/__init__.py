"""dp-spark: differentially private statistics over user-contributed data.

The pipeline is bound -> aggregate -> publish; every epsilon is spent through the ledger
(:class:`dp_spark.core.privacy.Budget`). The public API works on your own DataFrame::

    import dp_spark
    release = dp_spark.sra(df, privacy_unit="user_id", item="movie_id", items=range(1, 17771), l=10, epsilon=1)
    release["item_counts"]; release.report; release.write("out/counts")

docs/api.md shows every function; docs/architecture.md the layout of the package.
"""

__version__ = "0.1.0"

from dp_spark.api import (  # noqa: E402  (the version first: modules below read it)
    DatasetBudget, Release, dft, dpsense, dpsense_s, gs, hpa, location_entropy, lpa, sra, user_histogram,
)
from dp_spark.core.privacy import BudgetExceeded  # noqa: E402
from dp_spark.errors import ConfigError, DataError, DpSparkError  # noqa: E402

__all__ = ["BudgetExceeded", "ConfigError", "DataError", "DatasetBudget", "DpSparkError", "Release", "dft",
           "dpsense", "dpsense_s", "gs", "hpa", "location_entropy", "lpa", "sra", "user_histogram"]
