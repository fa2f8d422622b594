"""The means family's parameters: what a config or the API gives, checked; how the
budget is split between the choices and the tables (the parts compose sequentially:
docs/value_sums.md, "Privacy claim: value_sums, means"); each table's noise; the tables' shapes.
The release itself is :mod:`dp_spark.families.means.family`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dp_spark.core import noise_choice
from dp_spark.core.accounting import Noise, check_noise
from dp_spark.core.clip_range import DEFAULT_STEPS, ClipRange, SumSensitivity
from dp_spark.errors import ConfigError
from dp_spark.release import bound_objective, bound_selection, bounding_estimate, clip_choice
from dp_spark.release.auto_bound import AUTO, AutoBound, candidates_of
from dp_spark.release.family import ConfigTables, Domains, require, rows_per_user
from dp_spark.release.private_keys import PARTITION_SHARE, PRIVATE_ITEMS, checked_private_items, partition_delta
from dp_spark.release.sum_tables import TablePair

BOUNDINGS = ("sra", "hpa")
# The share of each table pair's ε that goes to the sums, the rest to the counts: the sum's
# noise is l·h/ε_sums and the mean's error is mostly the sum's (bench/means_simulation.py:
# 0.7 was no worse than 0.5 to 0.8 at ε = 1 on MovieLens 1M).
SUM_SHARE = Fraction(7, 10)
POPULARITY_SHARE = Fraction(1, 10)  # HPA's popularity, as for the counts (paper 000 §6)
# The choice of l under pure ε: a twentieth of ε. A movie that loses its mean costs the score
# much more than a noisier mean, so the tables' share matters more here than to the counts: with
# a tenth, the tables' loss alone put the best candidate at up to 1.61 times the best fixed l on
# the evaluation set's 90 movies. A tenth, a twentieth, a thirtieth and a fortieth were measured
# there and on 30 and 300 movies; a twentieth was the least worst over both (docs/value_sums.md,
# "The share of ε"). Under zCDP the tables pay for a share of ρ only in proportion (noise variance
# 1/(1 − share), not 1/(1 − share)²), and the choice keeps the counts' tenth of ρ.
BOUND_SHARE = Fraction(1, 20)
ZCDP_BOUND_SHARE = bound_selection.DEFAULT_SHARE
ITEM_TABLE, EDGE_TABLE = "item_means", "edge_means"
# Each table pair: its ledger steps and its parts of the budget (privacy.epsilon_*).
PAIRS = {ITEM_TABLE: ("value_counts", "value_sums", "epsilon_counts", "epsilon_sums"),
         EDGE_TABLE: ("edge_value_counts", "edge_value_sums", "epsilon_edge_counts", "epsilon_edge_sums")}
TABLES = (ITEM_TABLE, EDGE_TABLE)  # the tables of means an objective can weigh


@dataclass(frozen=True)
class MeansParams(AutoBound):
    """``low``, ``high``: the public range values are clipped to, either or both "auto" to choose
    it privately from ``clip_candidates`` with a tenth of ε (docs/value_sums.md, "Choosing the
    clipping range"); ``l``: records kept per user,
    by ``bounding`` ("sra": a uniform sample; "hpa": the most popular, popularity measured on
    ``d`` records per user), or "auto" to choose it privately from ``candidates`` with a twentieth
    of ε (under zCDP a tenth of ρ; docs/value_sums.md, "Choosing l"); ``records_per_item``: at
    most c of a user's kept records per item (lowers the L2 sensitivity, which only Gaussian noise
    uses); ``noise``: privacy.noise;
    ``objective``: with l = "auto", which means the choice scores (release.bound_objective over the
    tables item_means and edge_means; the item table's unless given)."""

    low: float | str
    high: float | str
    l: int | str = 10
    bounding: str = "sra"
    d: int = 1
    records_per_item: int | None = None
    noise: str = "laplace"
    candidates: Sequence[int] | None = None  # a tuple once checked
    steps: int = DEFAULT_STEPS
    clip_candidates: Sequence[float] | None = None  # a tuple once checked
    # domain.items = "private": the items are selected by partition selection first (at most
    # keys_per_user distinct items per user), which spends privacy.delta (as for the counts).
    private_items: bool = False
    keys_per_user: int | None = None
    delta: float = 0.0
    # The level of each mean's interval (mean_low, mean_high): the 95% of every other ± we print.
    confidence: float = 0.95
    # "auto": given as a name or a mapping of tables to weights, bound_objective.Objective once checked
    # (bound_objective.DEFAULT unless given).
    objective: Any = None
    algorithm: str = "means"

    def __post_init__(self):
        if self.bounding not in BOUNDINGS:
            raise ConfigError(f"algorithm.bounding must be one of {', '.join(BOUNDINGS)}, got {self.bounding!r}")
        if self.auto:
            object.__setattr__(self, "candidates", candidates_of(self.candidates, "l"))
            object.__setattr__(self, "objective", bound_objective.checked(
                bound_objective.DEFAULT if self.objective is None else self.objective, TABLES,
                "algorithm.l_objective"))
        else:
            rows_per_user(self.l, "algorithm.l")
            if self.candidates is not None:
                raise ConfigError("algorithm.l_candidates is used only with l = \"auto\"")
            # A fixed l scores nothing; the parameters at a chosen l drop the objective with the
            # candidates (from_config and the API refuse one given with a fixed l).
            object.__setattr__(self, "objective", None)
        rows_per_user(self.d, "algorithm.d")
        if self.bounding != "hpa" and self.d != 1:
            raise ConfigError("algorithm.d is HPA bounding's parameter: set algorithm.bounding = \"hpa\", or remove it")
        self._check_clip()
        keys_per_user, delta = checked_private_items(self.private_items, self.keys_per_user, self.delta)
        object.__setattr__(self, "keys_per_user", keys_per_user)
        object.__setattr__(self, "delta", delta)
        check_noise(self.noise)
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, (int, float)) \
                or not 0 < self.confidence < 1:
            raise ConfigError(f"algorithm.confidence (the means' interval level) must be a number strictly between "
                              f"0 and 1, e.g. 0.95, got {self.confidence!r}")
        object.__setattr__(self, "confidence", float(self.confidence))
        if self.records_per_item is not None:
            # c ≥ l caps nothing (at most l records are kept in all): the sensitivities take min(c, l),
            # as the counts' do, so a privately chosen l below c is no error.
            rows_per_user(self.records_per_item, "algorithm.records_per_item")
            if self.noise == Noise.LAPLACE:
                raise ConfigError("algorithm.records_per_item bounds the L2 sensitivity, which only Gaussian noise "
                                  "uses: set privacy.noise = \"gaussian\" or \"auto\" (with privacy.delta), or "
                                  "remove it")

    def _check_clip(self) -> None:
        if not self.clip_auto:
            if self.clip_candidates is not None:
                raise ConfigError("algorithm.clip_candidates is used only with low or high \"auto\"")
            try:
                clip = ClipRange(self.low, self.high, self.steps)
            except ValueError as e:
                raise ConfigError(f"algorithm.low and algorithm.high: {e}") from None
            object.__setattr__(self, "low", clip.low)
            object.__setattr__(self, "high", clip.high)
            return
        low, high, candidates = clip_choice.checked_ends(self.low, self.high, self.clip_candidates, self.steps)
        object.__setattr__(self, "clip_candidates", candidates)
        object.__setattr__(self, "low", AUTO if low is None else low)
        object.__setattr__(self, "high", AUTO if high is None else high)

    @property
    def clip_auto(self) -> bool:
        return AUTO in (self.low, self.high)

    @property
    def clip(self) -> ClipRange:
        """The public range (not with "auto": see widest_clip)."""
        if self.clip_auto:
            raise ValueError("the clipping range is chosen privately: it is known only after the choice")
        return ClipRange(self.low, self.high, self.steps)

    @property
    def widest_clip(self) -> ClipRange:
        """The range, or with "auto" the widest the choice can give: every chosen range lies in it."""
        if not self.clip_auto:
            return self.clip
        low = self.clip_candidates[0] if self.low == AUTO else self.low
        high = self.clip_candidates[-1] if self.high == AUTO else self.high
        return ClipRange(low, high, self.steps)

    @property
    def per_cell(self) -> int:
        """c: at most this many of a user's kept records per item (l, or below it with the cap)."""
        return self.per_cell_at(self.largest_bound)

    def per_cell_at(self, l: int) -> int:
        return min(self.records_per_item or l, l)

    @property
    def sensitivity(self) -> SumSensitivity:
        """The tables' sensitivities (release.sum_tables takes the same from the sums it publishes);
        with "auto", at the largest candidate."""
        return self.sensitivity_at(self.largest_bound)

    def sensitivity_at(self, l: int) -> SumSensitivity:
        return SumSensitivity(l, self.per_cell_at(l), self.steps)

    @property
    def interval_alpha(self) -> float:
        """α of the means' intervals: each fails with probability at most this."""
        return 1 - self.confidence


def budget_split(params: MeansParams, epsilon: Fraction, domains: Domains,
                 bound_share: Fraction = BOUND_SHARE) -> dict[str, Fraction]:
    """With items selected privately, half of ε first selects them (as for the counts); with
    "auto", ``bound_share`` of ε to choose l (a twentieth under pure ε; the shares of ρ under zCDP
    give it a tenth: ZCDP_BOUND_SHARE) and a tenth to choose the clipping range; HPA: a tenth of ε
    for the popularity; a twentieth estimates what bounding removed (as for the counts); the rest
    shared by the table pairs (items, and items × attributes), each pair 3/10 to its counts and
    7/10 to its sums."""
    first = {"epsilon_partition": epsilon * PARTITION_SHARE} if params.private_items else {}
    if params.auto:
        first["epsilon_bound"] = epsilon * bound_share
    if params.clip_auto:
        first["epsilon_clip"] = epsilon * clip_choice.SHARE
    if params.bounding == "hpa":
        first["epsilon_popularity"] = epsilon * POPULARITY_SHARE
    first["epsilon_bounding"] = epsilon * bounding_estimate.SHARE
    pairs = [ITEM_TABLE] + ([EDGE_TABLE] if domains.attributes is not None else [])
    each = (epsilon - sum(first.values(), Fraction(0))) / len(pairs)
    split = dict(first)
    for table in pairs:
        _, _, counts, sums = PAIRS[table]
        split[counts], split[sums] = each * (1 - SUM_SHARE), each * SUM_SHARE
    return split


def table_noises(params: MeansParams, split: dict[str, Fraction], table: str, l: int | None = None) -> tuple[str, str]:
    """The counts' and the sums' noise in ``table`` at bound ``l`` (default: params.largest_bound):
    Laplace, Gaussian, or with privacy.noise = "auto" the lower variance."""
    _, _, counts, sums = PAIRS[table]
    s = params.sensitivity_at(l or params.largest_bound)
    return (noise_choice.chosen(params.noise, s.bound, s.count_l2_squared, split[counts]),
            noise_choice.chosen(params.noise, s.l1, s.l2_squared, split[sums]))


def table_pair(params: MeansParams, split: dict[str, Fraction], table: str) -> TablePair:
    """How ``table``'s counts and sums are paid for: their steps, parts of ε and noises."""
    count_step, sum_step, counts, sums = PAIRS[table]
    count_noise, sum_noise = table_noises(params, split, table)
    return TablePair(count_step, sum_step, split[counts], split[sums], count_noise, sum_noise)


def output_rows(params: MeansParams, domains: Domains) -> dict[str, int | None]:
    """A row per item, and per item and attribute value; items selected privately: as many as it selects."""
    items = None if domains.items is None else len(domains.items)
    rows = {ITEM_TABLE: items}
    if domains.attributes is not None:
        rows[EDGE_TABLE] = None if items is None else items * len(domains.attributes)
    return rows


def _clip_end(table: dict, key: str) -> float | str:
    """A number (the public clipping range), or "auto" (also when left out): chosen privately."""
    value = table.get(key, AUTO)
    if value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"algorithm.{key} must be a number (the public clipping range) or \"auto\" (chosen "
                          f"privately), got {value!r}")
    return float(value)


# The algorithm.* keys means reads.
TAKES = ("name", "bounding", "l", "l_candidates", "l_objective", "d", "records_per_item", "low", "high",
         "clip_candidates", "keys_per_user", "confidence")


def from_config(c: ConfigTables) -> MeansParams:
    # A privacy.epsilon_* part the release does not spend is refused with the split (base.plan_split).
    algorithm = c.algorithm
    if c.publisher and c.publisher != {"name": "laplace"}:
        raise ConfigError("[publisher] is not used by means: its tables take Laplace noise, or Gaussian noise under "
                          "privacy.noise")
    for key in algorithm:
        if key not in TAKES:
            raise ConfigError(f"algorithm.{key} is not used by means (it takes {', '.join(TAKES)})")
    private = c.domain.get("items") == PRIVATE_ITEMS
    if private and "delta" not in c.privacy:
        raise ConfigError(f"domain.items = \"{PRIVATE_ITEMS}\" needs privacy.delta (e.g. 1e-6): partition selection "
                          "spends it")
    zcdp = c.privacy.get("noise", "laplace") != "laplace" or "rho" in c.privacy
    if "l_objective" in algorithm and algorithm.get("l") != AUTO:
        raise ConfigError("algorithm.l_objective is used only with l = \"auto\"")
    params = MeansParams(_clip_end(algorithm, "low"), _clip_end(algorithm, "high"),
                         require(algorithm, "l", "algorithm"),
                         algorithm.get("bounding", "sra"), algorithm.get("d", 1), algorithm.get("records_per_item"),
                         c.privacy.get("noise", "laplace"), algorithm.get("l_candidates"),
                         clip_candidates=algorithm.get("clip_candidates"), private_items=private,
                         keys_per_user=algorithm.get("keys_per_user"),
                         delta=partition_delta(c.privacy.get("delta", 0.0), zcdp) if private else 0.0,
                         confidence=algorithm.get("confidence", 0.95), objective=algorithm.get("l_objective"))
    bound_objective.check_tables(params.objective, c.attributes is not None, TABLES)
    return params
