"""The public API: differentially private releases from a DataFrame you already have.

Each function takes a Spark DataFrame, names the column that identifies the privacy unit (one
user, by default the column ``user_id``) and the columns it counts, takes the public domain and
the privacy parameters as arguments, and returns a :class:`Release`: the noisy tables (pandas),
the ledger and the privacy report, and ``write(path)`` with the same all-or-nothing guarantee as
``dp-spark run``. A :class:`DatasetBudget` shared by several calls caps what they spend together.

A TOML job (``dp-spark run``) is a translation of its config onto the same families and the
same release lifecycle: with the same inputs and seed, a job and an API call release the same tables.

The package: functions.py (one function per algorithm, and plan), arguments.py (arguments into
domains and columns), run.py (the API's side of the release lifecycle), results.py (Release and
Plan). The budgets are dp_spark.jobs.dataset_budget's, beside the budget store.
"""

from dp_spark.api.functions import (
                                    RELEASES,
                                    aggregate,
                                    dft,
                                    dpsense,
                                    dpsense_s,
                                    frapp,
                                    gs,
                                    hpa,
                                    location_entropy,
                                    lpa,
                                    means,
                                    plan,
                                    sra,
                                    user_histogram,
)
from dp_spark.api.results import Plan, Release
from dp_spark.errors import BudgetExceeded
from dp_spark.jobs.dataset_budget import DatasetBudget, StoreBudget, rho_per_run

__all__ = ["RELEASES", "BudgetExceeded", "aggregate", "DatasetBudget", "Plan", "Release", "StoreBudget", "dft",
           "dpsense", "dpsense_s", "frapp", "gs", "hpa", "location_entropy", "lpa", "means", "plan", "rho_per_run",
           "sra", "user_histogram"]
