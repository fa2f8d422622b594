"""The counts' parameters (SRA, HPA and the baselines LPA, DFT, GS), checked when made: what a
config's [algorithm] and [publisher] give, and what the API's functions pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dp_spark.core.accounting import Noise, check_noise
from dp_spark.errors import ConfigError
from dp_spark.publishers.options import publisher_choice
from dp_spark.release import bound_objective
from dp_spark.release.auto_bound import AUTO, AutoBound, candidates_of
from dp_spark.release.family import rows_per_user
from dp_spark.release.private_keys import PRIVATE_ITEMS, checked_private_items

ALGORITHMS = ("sra", "hpa", "lpa", "dft", "gs")
TABLES = ("item_counts", "edge_counts")  # what a release publishes: the items, and with attributes the edges
# How l = "auto" chooses (docs/bound_selection.md): the exponential mechanism over the candidates
# (every algorithm; the baselines' only choice), or the bound of least error estimated from DP
# statistics (release.bound_estimate; SRA's and HPA's default).
CHOICES = ("exponential", "estimate")
# The algorithms the estimate has an error model for: SRA's uniform sample, HPA's ranked records.
ESTIMATED = ("sra", "hpa")


def default_choice(algorithm: str) -> str:
    """How l = "auto" chooses unless algorithm.l_choice says: SRA and HPA by the estimate
    (docs/bound_selection.md, "The estimate choice"), the baselines by the exponential mechanism."""
    return "estimate" if algorithm in ESTIMATED else "exponential"


# Paper 000's baselines: a uniform sample of at most m records per user, always published
# with the same publisher.
BASELINE_PUBLISHERS = {"lpa": "laplace", "dft": "fourier", "gs": "grouping"}


@dataclass(frozen=True)
class CountsParams(AutoBound):
    """``l``: records kept per user (a config's ``algorithm.m`` for the baselines), or "auto" to
    choose it privately from ``candidates`` with a share of ε (docs/bound_selection.md);
    ``d``: HPA's records per user in its popularity sample; ``consistent``: make items and edges agree.
    ``noise``: privacy.noise, the noise of the item and edge counts under zCDP accounting ("laplace",
    "gaussian", or "auto": the lower variance); ``records_per_item``: at most this many of a user's
    records per item (c), which brings the tables' squared L2 sensitivity from l² down to l·c.
    ``objective``: with "auto", what the choice scores (release.bound_objective; the item table
    alone unless given). ``choice``: with "auto", how the bound is chosen (CHOICES; "estimate", SRA's
    only, is its default; the exponential mechanism for the others)."""

    algorithm: str = "sra"
    l: int | str = 10
    d: int = 1
    publisher: str = "laplace"
    publisher_options: dict[str, Any] = field(default_factory=dict)
    consistent: bool = False
    # A tuple once checked, as AutoBound reads it; any sequence of integers is taken.
    candidates: Sequence[int] | None = None  # type: ignore[assignment]
    # domain.items = "private": the items are selected by partition selection, which keeps at most
    # keys_per_user distinct items per user (default DEFAULT_KEYS_PER_USER) and spends privacy.delta.
    private_items: bool = False
    keys_per_user: int | None = None
    delta: float = 0.0
    noise: str = "laplace"
    records_per_item: int | None = None
    objective: bound_objective.Objective | None = None  # "auto": bound_objective.DEFAULT unless given
    choice: str | None = None  # None: the algorithm's default (default_choice)

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"unknown counts algorithm {self.algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
        if self.l == AUTO:
            object.__setattr__(self, "candidates", candidates_of(self.candidates, self.bound_name))
            object.__setattr__(self, "objective", bound_objective.checked(
                bound_objective.DEFAULT if self.objective is None else self.objective, TABLES,
                f"algorithm.{self.bound_name}_objective"))
            if self.choice is None:
                object.__setattr__(self, "choice", default_choice(self.algorithm))
        else:
            rows_per_user(self.l, f"algorithm.{self.bound_name}")
            if self.candidates is not None:
                raise ConfigError(f"algorithm.{self.bound_name}_candidates is used only with "
                                  f"{self.bound_name} = \"auto\"")
            # A fixed bound scores nothing; the parameters at a chosen bound drop the objective
            # and the choice with the candidates (from_config refuses them with a fixed bound).
            object.__setattr__(self, "objective", None)
            object.__setattr__(self, "choice", CHOICES[0])
        self._check_choice()
        rows_per_user(self.d, "algorithm.d")
        if self.algorithm != "hpa" and self.d != 1:
            raise ConfigError(f"algorithm.d is an HPA parameter; {self.algorithm} does not use it")
        if not isinstance(self.consistent, bool):
            raise ConfigError(f"algorithm.consistent must be true or false, got {self.consistent!r}")
        name, options = publisher_choice({"name": self.publisher, **self.publisher_options}, self.algorithm,
                                         BASELINE_PUBLISHERS.get(self.algorithm))
        object.__setattr__(self, "publisher_options", options)
        self._check_private_items()
        self._check_noise()

    def _check_choice(self) -> None:
        if self.choice not in CHOICES:
            raise ConfigError(f"algorithm.l_choice must be one of {', '.join(CHOICES)}, got {self.choice!r}")
        if self.choice == "estimate" and self.algorithm not in ESTIMATED:
            raise ConfigError(f"algorithm.l_choice = \"estimate\" is SRA's and HPA's (its error models are theirs); "
                              f"{self.algorithm} chooses its bound with the exponential mechanism")

    def _check_noise(self):
        check_noise(self.noise, self.publisher, self.publisher_options)
        if self.records_per_item is None:
            return
        rows_per_user(self.records_per_item, "algorithm.records_per_item")
        if self.noise == Noise.LAPLACE:
            raise ConfigError("algorithm.records_per_item bounds the counts' L2 sensitivity, which only Gaussian "
                              "noise uses: set privacy.noise = \"gaussian\" or \"auto\" (with privacy.delta), or "
                              "remove it")

    def _check_private_items(self):
        if self.private_items and self.publisher != "laplace":
            raise ConfigError(f"domain.items = \"{PRIVATE_ITEMS}\" needs the laplace publisher ({self.algorithm} uses "
                              f"{self.publisher}, whose noise depends on the domain's size before the run)")
        keys_per_user, delta = checked_private_items(self.private_items, self.keys_per_user, self.delta)
        object.__setattr__(self, "keys_per_user", keys_per_user)
        object.__setattr__(self, "delta", delta)

    @property
    def bound_name(self) -> str:
        """What a config calls the per-user bound: m for the baselines, l otherwise."""
        return "m" if self.algorithm in BASELINE_PUBLISHERS else "l"
