"""What the API returns: a :class:`Release` (the noisy tables, the report, and ways to show, plot
and write them) or, from :func:`dp_spark.plan`, a :class:`Plan` of the expected error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dp_spark import display
from dp_spark.core import accuracy
from dp_spark.errors import ConfigError
from dp_spark.io import release_store


@dataclass(frozen=True, repr=False)
class Release:
    """The noisy tables of one release by name, and its privacy report. Tables are pandas
    DataFrames (one row per public domain value), except FRAPP's perturbed records, which are as
    many as the input's records, and the count and means tables released on the executors (at
    least ``executor_noise_cells`` cells), which never reach the driver: those are Spark DataFrames."""

    tables: dict[str, Any]
    report: dict
    spark: Any = field(default=None, repr=False, compare=False)
    # NOT private: raw figures (records read, users, rows outside the domain, rows kept) for the
    # caller's own checks. Not in the report and never written by write().
    diagnostics: dict = field(default_factory=dict, repr=False, compare=False)

    def __getitem__(self, name: str) -> Any:
        return self.tables[name]

    def __repr__(self) -> str:
        """A few lines: the algorithm, the spend, the guarantee, each table's size and noise, the ledger."""
        return "\n".join(display.summary_lines(self.report, self.tables))

    __str__ = __repr__

    def _repr_html_(self) -> str:
        """Jupyter's view: the same, with each table's first rows."""
        return display.summary_html(self.report, self.tables)

    def plot(self, table: str | None = None, top: int = display.TOP, titles: Mapping | None = None):
        """A matplotlib Figure of one table (default: the first with a released value): a
        histogram's bars; a means table's means with their intervals, for the ``top`` items of
        highest noisy count; or the ``top`` largest values, with the 95% half-width of the noise as
        error bars where it is exact. ``titles``: labels by item id (e.g. a catalogue's titles),
        shown beside the ids. Needs matplotlib (``pip install 'dp-spark[plot]'``)."""
        names = display.plotted(self.report, self.tables)
        if table is None:
            if not names:
                raise ConfigError("this release has no table to plot (a Spark DataFrame is not collected: "
                                  "release.to_spark(name))")
            table = names[0]
        elif table not in names:
            raise ConfigError(f"no plot of {table!r}: plotted tables are {', '.join(names) or 'none'}")
        return display.figure(self.report, self.tables, table, top, titles)

    @property
    def ledger(self) -> list[dict]:
        """Every noisy step: what it released, its mechanism, epsilon, sensitivity and scale."""
        return self.report["ledger"]

    @property
    def epsilon_spent(self) -> float:
        return self.report["epsilon_spent"]

    def to_spark(self, name: str):
        """One noisy table as a Spark DataFrame (on the session of the input DataFrame)."""
        table = self.tables[name]
        return table if not isinstance(table, pd.DataFrame) else self.spark.createDataFrame(table)

    def write(self, path: str) -> str:
        """Write the tables as Parquet and privacy.json to ``path``, all or nothing; refuses a
        non-empty directory that is not a dp-spark release. Returns ``path``."""
        release_store.check_output_location(self.spark, path)
        release_store.write_release(self.spark, path, self.tables, self.report)
        return path


@dataclass(frozen=True)
class Plan:
    """What a release would publish and how far each released value may be from the value it is
    computed from, before anything is read or spent (:func:`plan`). ``accuracy`` is the
    ``accuracy`` section the release's privacy report will carry; ``str(plan)`` prints it."""

    algorithm: str
    description: str
    epsilon_split: dict[str, float]
    accuracy: dict

    def __str__(self) -> str:
        return "\n".join([self.description, *accuracy.format_section(self.accuracy)])


class Planning:
    """Passed by :func:`plan` in place of the DataFrame: the release function checks its
    arguments and builds its parameters and domains as for a release, then returns a
    :class:`Plan` before it touches any data or budget."""

    def __init__(self, alpha: float):
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
            raise ConfigError(f"alpha must be a number strictly between 0 and 1, got {alpha!r}")
        self.alpha = float(alpha)
