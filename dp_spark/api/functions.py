"""One function per algorithm: the public releases (see dp_spark.api for the whole surface).

Arguments are keywords, as PySpark's writers take options: a release function names the privacy
unit's column and the columns it counts, the public domains, the budget and the algorithm's own
parameters, and returns a :class:`Release`. :func:`plan` takes the same keywords without the
DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from pyspark.sql import DataFrame

from dp_spark.api.arguments import (
    Attributes,
    Bins,
    Bound,
    Items,
    Number,
    ProgressSink,
    as_attributes,
    as_execution,
    as_items,
    standard_columns,
    zcdp_accounting,
)
from dp_spark.api.results import Plan, Planning, Release
from dp_spark.api.run import plan_of, record_release, release_of
from dp_spark.bounding.keys import with_row_key
from dp_spark.core import accuracy
from dp_spark.core.accounting import accounting_of
from dp_spark.core.domain_tables import FrameSource
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.family import aggregate_params
from dp_spark.families.counts.family import BASELINE_PUBLISHERS, CountsParams
from dp_spark.families.dpsense.family import DPSenseParams
from dp_spark.families.frapp.family import frapp_params
from dp_spark.families.location_entropy.family import EntropyParams
from dp_spark.families.means.params import TABLES as MEANS_TABLES
from dp_spark.families.means.params import MeansParams
from dp_spark.families.registry import family_of
from dp_spark.families.user_histogram.family import HistogramParams
from dp_spark.io import checkins
from dp_spark.jobs.dataset_budget import DatasetBudget
from dp_spark.release import bound_objective
from dp_spark.release.auto_bound import AUTO
from dp_spark.release.family import Domains, check_accounting
from dp_spark.release.guards import Guards
from dp_spark.release.private_keys import PARTITION_DELTA_SHARE, PRIVATE_ITEMS, partition_delta


def _returned(result: Release | Plan) -> Release:
    """What a release function returns: its Release, or, when :func:`plan` called it with a
    Planning in place of the DataFrame, the Plan that plan() hands on (plan() is typed -> Plan)."""
    return result  # type: ignore[return-value]


def _counts(algorithm: str, df: DataFrame, *, items: Items, l: Bound, epsilon: Number | None, d: int = 1,
            privacy_unit: str = "user_id", item: str = "item_id", attribute: str | None = None,
            attributes: Attributes = None, epsilon_split: Mapping[str, Number] | None = None,
            publisher: str | None = None, publisher_options: Mapping[str, Any] | None = None,
            consistent: bool = False, seed: int | None = None, budget: DatasetBudget | None = None,
            guards: Mapping[str, Any] | Guards | None = None, progress: ProgressSink | None = None,
            candidates: Sequence[int] | None = None, delta: float | None = None,
            keys_per_user: int | None = None, executor_noise_cells: int | None = None,
            max_output_rows: int | None = None, distinct_records: bool = False, noise: str | None = None,
            rho: Number | None = None, records_per_item: int | None = None, objective: Any = None,
            choice: str | None = None) -> Release:
    private = isinstance(items, str) and items == PRIVATE_ITEMS
    if items is None:
        raise ConfigError(f"{algorithm} needs items: the public item ids (a range, a list, a table such as "
                          f"{{'range': [1, 100]}}), or items=\"{PRIVATE_ITEMS}\" to select them privately")
    zcdp_asked = noise not in (None, "laplace") or rho is not None
    if delta is not None and not private and not zcdp_asked:
        raise ConfigError(f"delta is spent only by partition selection (give items=\"{PRIVATE_ITEMS}\") or states a "
                          "zCDP guarantee (give noise=\"gaussian\" or \"auto\", or rho); otherwise give no delta")
    if private and delta is None:
        raise ConfigError(f"items=\"{PRIVATE_ITEMS}\" needs delta (e.g. 1e-6): partition selection spends it")
    if objective is not None and l != AUTO:
        bound = "m" if algorithm in BASELINE_PUBLISHERS else "l"
        raise ConfigError(f"{bound}_objective is used only with {bound}=\"auto\"")
    if choice is not None and l != AUTO:
        raise ConfigError("l_choice is used only with l=\"auto\"")
    accounting, epsilon = accounting_of(noise, epsilon, delta, rho, seed is not None, prefix="",
                                        outside_share=PARTITION_DELTA_SHARE if private else Fraction(0))
    params = CountsParams(algorithm, l, d, publisher or BASELINE_PUBLISHERS.get(algorithm, "laplace"),
                          dict(publisher_options or {}), consistent, candidates, private,
                          keys_per_user, partition_delta(delta or 0.0, accounting.zcdp) if private else 0.0,
                          noise or "laplace", records_per_item, objective, choice)
    bound_objective.check_tables(params.objective, attributes is not None)
    check_accounting(family_of(algorithm), params, accounting)
    execution = as_execution(executor_noise_cells, max_output_rows)
    return _returned(record_release(params, df, privacy_unit, item, attribute, None if private else items, attributes,
                                    epsilon, epsilon_split, seed, budget, progress, guards, execution, distinct_records,
                                    accounting))


def sra(df: DataFrame, *, items: Items, l: Bound, epsilon: Number | None = None, privacy_unit: str = "user_id",
        item: str = "item_id", attribute: str | None = None, attributes: Attributes = None,
        epsilon_split: Mapping[str, Number] | None = None, publisher: str = "laplace",
        publisher_options: Mapping[str, Any] | None = None, consistent: bool = False, seed: int | None = None,
        budget: DatasetBudget | None = None, guards: Mapping[str, Any] | Guards | None = None,
        progress: ProgressSink | None = None, l_candidates: Sequence[int] | None = None, delta: float | None = None,
        keys_per_user: int | None = None, executor_noise_cells: int | None = None, max_output_rows: int | None = None,
        distinct_records: bool = False, noise: str | None = "laplace", rho: Number | None = None,
        records_per_item: int | None = None, l_objective: str | Mapping[str, Number] | None = None,
        l_choice: str | None = None) -> Release:
    """Item counts (and item x attribute counts) with at most ``l`` records per user, a uniform
    sample of each user's own (paper 000's SRA). Tables: item_counts, edge_counts.

    ``items="private"`` (with ``delta``) releases only the items that partition selection picks,
    each user counted on at most ``keys_per_user`` distinct items (default 10), with half of ε
    (docs/partition_selection.md); item ids may then be strings.

    ``l="auto"`` chooses l privately from ``l_candidates`` (default 1, 2, 3, 4, 6, 8, 11, ..., 181,
    256: about √2 apart) with a tenth of ε (``epsilon_split["epsilon_bound"]``); the choice is in
    ``release.report["algorithm"]["chosen"]`` (docs/bound_selection.md). It scores the item
    table's error unless ``l_objective`` says otherwise: "cells" (every cell of every table
    alike), "tables" (each table's mean error per cell) or weights such as
    ``{"item_counts": 1, "edge_counts": 0.25}``. By default (``l_choice="estimate"``) it picks the
    bound of least error estimated from two DP statistics (the users' record counts, and each
    scored table's bias at the smallest candidate), over every integer from the first candidate to
    the last; ``l_choice="exponential"`` draws one of the candidates with the exponential mechanism
    instead, with the same share.

    A twentieth of ε (``epsilon_split["epsilon_bounding"]``) estimates what bounding removed: the
    records kept and removed, and at most what share of the records the counts hold, in
    ``release.report["accuracy"]["bounding"]`` and ``print(release)`` (docs/accuracy.md).

    When the largest table (items × attribute values) has at least ``executor_noise_cells`` cells
    (default 20 million), every table of the release is released on the executors and returned as
    a Spark DataFrame; below it they are pandas (docs/executor_noise.md). A release of more than
    ``max_output_rows`` rows (default 10^9) is refused before anything is read or charged.

    Identical records of a user (same item and attribute) are each sampled as records of their
    own, which takes a shuffle of every record to number them; ``distinct_records=True`` vouches
    that there are none and skips it (if wrong, a user's identical records are kept or dropped
    together: still private, no longer a uniform sample; docs/sra_hpa.md).

    ``noise="gaussian"`` (or ``"auto"``: the lower variance per table) counts the budget in zCDP:
    ``epsilon`` with ``delta`` is converted to ρ (or give ``rho`` and ``delta``), and the tables get
    discrete Gaussian noise paid by their L2 sensitivity, √(l·c) with at most ``records_per_item``
    = c records per user and item (docs/zcdp.md)."""
    return _counts("sra", df, items=items, l=l, epsilon=epsilon, privacy_unit=privacy_unit, item=item,
                   attribute=attribute, attributes=attributes, epsilon_split=epsilon_split, publisher=publisher,
                   publisher_options=publisher_options, consistent=consistent, seed=seed, budget=budget,
                   guards=guards, progress=progress, candidates=l_candidates,
                   delta=delta, keys_per_user=keys_per_user, executor_noise_cells=executor_noise_cells,
                   max_output_rows=max_output_rows, distinct_records=distinct_records, noise=noise, rho=rho,
                   records_per_item=records_per_item, objective=l_objective, choice=l_choice)


def hpa(df: DataFrame, *, items: Items, l: Bound, epsilon: Number | None = None, d: int = 1,
        privacy_unit: str = "user_id", item: str = "item_id", attribute: str | None = None,
        attributes: Attributes = None, epsilon_split: Mapping[str, Number] | None = None, publisher: str = "laplace",
        publisher_options: Mapping[str, Any] | None = None, consistent: bool = False, seed: int | None = None,
        budget: DatasetBudget | None = None, guards: Mapping[str, Any] | Guards | None = None,
        progress: ProgressSink | None = None, l_candidates: Sequence[int] | None = None, delta: float | None = None,
        keys_per_user: int | None = None, executor_noise_cells: int | None = None, max_output_rows: int | None = None,
        distinct_records: bool = False, noise: str | None = "laplace", rho: Number | None = None,
        records_per_item: int | None = None, l_objective: str | Mapping[str, Number] | None = None,
        l_choice: str | None = None) -> Release:
    """Like :func:`sra`, but each user keeps its ``l`` records of highest noisy popularity,
    measured on ``d`` records per user (paper 000's HPA). ``l="auto"``, ``l_objective``,
    ``l_choice`` and ``noise`` as for :func:`sra`; the estimate reads HPA's drop at its noisy
    popularity (docs/bound_selection.md, "The estimate for HPA")."""
    return _counts("hpa", df, items=items, l=l, d=d, epsilon=epsilon, privacy_unit=privacy_unit, item=item,
                   attribute=attribute, attributes=attributes, epsilon_split=epsilon_split, publisher=publisher,
                   publisher_options=publisher_options, consistent=consistent, seed=seed, budget=budget,
                   guards=guards, progress=progress, candidates=l_candidates,
                   delta=delta, keys_per_user=keys_per_user, executor_noise_cells=executor_noise_cells,
                   max_output_rows=max_output_rows, distinct_records=distinct_records, noise=noise, rho=rho,
                   records_per_item=records_per_item, objective=l_objective, choice=l_choice)


def _baseline(algorithm: str):
    def release(df: DataFrame, *, items: Items, m: Bound, epsilon: Number | None = None,
                privacy_unit: str = "user_id", item: str = "item_id", attribute: str | None = None,
                attributes: Attributes = None, epsilon_split: Mapping[str, Number] | None = None,
                publisher_options: Mapping[str, Any] | None = None, seed: int | None = None,
                budget: DatasetBudget | None = None, guards: Mapping[str, Any] | Guards | None = None,
                progress: ProgressSink | None = None, m_candidates: Sequence[int] | None = None,
                delta: float | None = None, keys_per_user: int | None = None, executor_noise_cells: int | None = None,
                max_output_rows: int | None = None, distinct_records: bool = False, noise: str | None = "laplace",
                rho: Number | None = None, records_per_item: int | None = None,
                m_objective: str | Mapping[str, Number] | None = None) -> Release:
        return _counts(algorithm, df, items=items, l=m, epsilon=epsilon, privacy_unit=privacy_unit, item=item,
                       attribute=attribute, attributes=attributes, epsilon_split=epsilon_split,
                       publisher_options=publisher_options, seed=seed, budget=budget, guards=guards,
                       progress=progress, candidates=m_candidates, delta=delta,
                       keys_per_user=keys_per_user, executor_noise_cells=executor_noise_cells,
                       max_output_rows=max_output_rows, distinct_records=distinct_records, noise=noise, rho=rho,
                       records_per_item=records_per_item, objective=m_objective)

    release.__name__ = release.__qualname__ = algorithm
    return release


lpa = _baseline("lpa")
lpa.__doc__ = ("Paper 000's LPA: a uniform sample of at most ``m`` records per user, discrete Laplace counts. "
               "``m=\"auto\"`` chooses m privately, as :func:`sra` does l.")
dft = _baseline("dft")
dft.__doc__ = "Paper 000's DFT: as :func:`lpa`, published with the Fourier perturbation algorithm."
gs = _baseline("gs")
gs.__doc__ = "Paper 000's GS: as :func:`lpa`, published by grouping and smoothing."


def user_histogram(df: DataFrame, *, bins: Bins, epsilon: Number | None = None, quantity: str = "records",
                   items: Items | None = None, privacy_unit: str = "user_id", item: str | None = "item_id",
                   publisher: str = "laplace", publisher_options: Mapping[str, Any] | None = None,
                   seed: int | None = None, budget: DatasetBudget | None = None,
                   guards: Mapping[str, Any] | Guards | None = None, progress: ProgressSink | None = None,
                   noise: str | None = "laplace", delta: float | None = None, rho: Number | None = None) -> Release:
    """How many users have how many records (``quantity="records"``, the default) or distinct items
    (``"distinct_items"``), in public ``bins`` (increasing edges, the last bin open-ended).
    ``items``, if given, keeps only records of those items; without it every record counts, and
    records per user need no item column (``item=None``, or a DataFrame without one).
    ``noise="gaussian"`` with ``delta`` (or ``rho``): zCDP, discrete Gaussian noise (docs/zcdp.md)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    accounting, epsilon = zcdp_accounting("user_histogram", noise, epsilon, delta, rho, seed)
    params = HistogramParams(quantity, bins, publisher, dict(publisher_options or {}), noise=noise or "laplace")
    check_accounting(family_of("user_histogram"), params, accounting)
    if items is None and quantity == "records" and not isinstance(df, Planning) and (
            item is None or (isinstance(df, DataFrame) and item not in df.columns)):
        # Every record counts once for its user, whatever its item: one stand-in item for all.
        df, item = df.withColumn("_any_item", F.lit(0)), "_any_item"
    return _returned(record_release(params, df, privacy_unit, item, None, items, None, epsilon, None, seed, budget,
                                    progress, guards, accounting=accounting))


def dpsense(df: DataFrame, *, items: Items, epsilon: Number | None = None, theta_max: int = 256,
            limit: str = "normalize", privacy_unit: str = "user_id", item: str = "item_id",
            epsilon_split: Mapping[str, Number] | None = None, seed: int | None = None,
            budget: DatasetBudget | None = None, guards: Mapping[str, Any] | Guards | None = None,
            progress: ProgressSink | None = None, noise: str | None = "laplace", delta: float | None = None,
            rho: Number | None = None) -> Release:
    """Column counts of each user's row of distinct items, the row limit θ chosen privately
    (paper 001's DPSense). The chosen θ is in ``report["algorithm"]["chosen"]``. ``noise="gaussian"``
    with ``delta`` (or ``rho``): zCDP, discrete Gaussian column counts (docs/zcdp.md)."""
    accounting, epsilon = zcdp_accounting("dpsense", noise, epsilon, delta, rho, seed)
    params = DPSenseParams("dpsense", theta_max, limit, noise or "laplace")
    return _returned(record_release(params, df, privacy_unit, item, None, items, None, epsilon, epsilon_split, seed,
                                    budget, progress, guards, accounting=accounting))


def dpsense_s(df: DataFrame, *, items: Items, epsilon: Number | None = None, theta_max: int = 256,
              limit: str = "normalize", privacy_unit: str = "user_id", item: str = "item_id",
              epsilon_split: Mapping[str, Number] | None = None, seed: int | None = None,
              budget: DatasetBudget | None = None, guards: Mapping[str, Any] | Guards | None = None,
              progress: ProgressSink | None = None, noise: str | None = "laplace", delta: float | None = None,
              rho: Number | None = None) -> Release:
    """DPSense-S: :func:`dpsense` with a privately chosen scale α as well (paper 001)."""
    accounting, epsilon = zcdp_accounting("dpsense_s", noise, epsilon, delta, rho, seed)
    params = DPSenseParams("dpsense_s", theta_max, limit, noise or "laplace")
    return _returned(record_release(params, df, privacy_unit, item, None, items, None, epsilon, epsilon_split, seed,
                                    budget, progress, guards, accounting=accounting))


def location_entropy(df: DataFrame, *, locations: Items, epsilon: Number, M: Bound = 5, C: Bound = 5,
                     variant: str = "limit", k: int = 50, xi: float = 1e-3, delta: float = 1e-8,
                     outputs: Sequence[str] = ("entropy",), privacy_unit: str = "user_id",
                     location: str = "location_id", visits: str | None = None, time: str | None = None,
                     location_choice: str = "first_visit", epsilon_split: Mapping[str, Number] | None = None,
                     seed: int | None = None, budget: DatasetBudget | None = None,
                     guards: Mapping[str, Any] | Guards | None = None, progress: ProgressSink | None = None,
                     M_candidates: Sequence[int] | None = None, C_candidates: Sequence[int] | None = None) -> Release:
    """The entropy of each public location's visits (paper 004), each user bounded to ``M``
    locations and ``C`` visits at each. Rows are check-ins: one visit each, or ``visits`` of
    them; ``time`` orders a user's check-ins for the choice of its M locations (needed by the
    default ``location_choice="first_visit"``; ``"random"`` keeps a uniformly random M instead).
    ``M="auto"`` and/or ``C="auto"`` choose the bound privately from ``M_candidates`` /
    ``C_candidates`` (public lists; None: the defaults) with the split's ``epsilon_bound``; the
    chosen values are in ``report["algorithm"]["chosen"]``."""
    params = EntropyParams(variant, M, C, k, xi, delta, tuple(outputs), location_choice,
                           M_candidates=None if M_candidates is None else tuple(M_candidates),
                           C_candidates=None if C_candidates is None else tuple(C_candidates))
    domains = Domains(as_items(locations, "locations"))
    if isinstance(df, Planning):
        return _returned(plan_of(family_of("entropy"), params, domains, epsilon, epsilon_split, df, guards))
    records = checkins.standard_checkins(standard_columns(
        df, {"user_id": privacy_unit, "item_id": location, "time": time, "visits": visits}), time or "time")
    return _returned(release_of(family_of("entropy"), params, records, domains, epsilon, epsilon_split, seed, budget,
                                progress, guards))


def frapp(df: DataFrame, *, attributes: Sequence[Mapping[str, Any]], epsilon: Number | None = None,
          gamma: Number | None = None, scheme: str = "det_gd", sup_min: float = 0.02, records_per_user: int = 1,
          cp_k: int | None = None, cp_rho: float | None = None, privacy_unit: str | None = None,
          seed: int | None = None, budget: DatasetBudget | None = None,
          guards: Mapping[str, Any] | Guards | None = None, progress: ProgressSink | None = None,
          distinct_records: bool = False) -> Release:
    """Every record perturbed on its own (local DP, paper 003's FRAPP), then the frequent itemsets
    mined from the perturbed records. ``attributes`` lists each column's public domain, e.g.
    ``{"column": "sex", "values": ["F", "M"]}`` or ``{"column": "age", "edges": [35, 55]}``; give
    ``epsilon`` per record or ``gamma`` = e^epsilon. With ``privacy_unit`` (a user column) each
    user keeps ``records_per_user`` records; without it every row is one person. Tables:
    perturbed_records (a Spark DataFrame), frequent_itemsets."""
    algorithm = {"scheme": scheme, "sup_min": sup_min, "records_per_user": records_per_user,
                 **({"cp_k": cp_k} if cp_k is not None else {}), **({"cp_rho": cp_rho} if cp_rho is not None else {})}
    privacy = {**({"epsilon": epsilon} if epsilon is not None else {}),
               **({"gamma": gamma} if gamma is not None else {})}
    if isinstance(attributes, (str, Mapping)) or not isinstance(attributes, Iterable):
        raise ConfigError("attributes must be a list of tables such as {'column': 'sex', 'values': ['F', 'M']}")
    params = frapp_params(algorithm, privacy, {"records": [dict(a) for a in attributes]}, {})
    if isinstance(df, Planning):
        return _returned(plan_of(family_of("frapp"), params, Domains(None), params.epsilon, None, df))
    columns = {spec.column: spec.column for spec in params.specs}
    records = standard_columns(df, {**columns, **({"user_id": privacy_unit} if privacy_unit else {})})
    if privacy_unit:  # each user's sample keys (distinct_records as for sra)
        records = with_row_key(records, distinct=distinct_records)
    return _returned(release_of(family_of("frapp"), params, records, Domains(None), params.epsilon, None, seed,
                                budget, progress, guards))


def means(df: DataFrame, *, items: Items, value: str, l: Bound, low: float | str = "auto",
          high: float | str = "auto", epsilon: Number | None = None, bounding: str = "sra", d: int = 1,
          privacy_unit: str = "user_id", item: str = "item_id", attribute: str | None = None,
          attributes: Attributes = None, records_per_item: int | None = None,
          epsilon_split: Mapping[str, Number] | None = None, seed: int | None = None,
          budget: DatasetBudget | None = None, guards: Mapping[str, Any] | Guards | None = None,
          progress: ProgressSink | None = None, noise: str | None = "laplace", delta: float | None = None,
          rho: Number | None = None, distinct_records: bool = False, l_candidates: Sequence[int] | None = None,
          clip_candidates: Sequence[float] | None = None, keys_per_user: int | None = None,
          executor_noise_cells: int | None = None, max_output_rows: int | None = None,
          confidence: float = 0.95, l_objective: str | Mapping[str, Number] | None = None) -> Release:
    """The sum, count and mean of the numeric column ``value`` per item (table item_means), and
    per item and attribute value with ``attribute``/``attributes`` (edge_means). Values are
    clipped to the public range [``low``, ``high``] (either left out or ``"auto"``: chosen privately
    from ``clip_candidates``, default 0 and ±1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k for k = -2 to 8, with a
    tenth of ε);
    each user keeps at most ``l`` records
    (``bounding="sra"``: a uniform sample of its own; ``"hpa"``: its most popular by a noisy
    popularity from ``d`` records per user); ``l="auto"`` chooses l privately from ``l_candidates``
    (default 1, 2, 3, 4, 6, ..., 256) with a twentieth of ε (under zCDP a tenth of ρ), for the item table's means unless
    ``l_objective`` says otherwise ("cells": every mean of both tables alike; "tables": each
    table alike; or weights such as {"item_means": 1, "edge_means": 0.5}). Each row has
    noisy_count, noisy_sum, mean and the mean's interval (mean_low, mean_high) at ``confidence``
    (default 95%), which covers the mean of the records bounding kept; an item whose count is too
    small for a mean has none.
    ``items="private"`` (with ``delta``) releases only the items partition selection picks, with
    half of ε, each user on at most ``keys_per_user`` distinct items (default 10;
    docs/partition_selection.md). Records whose value is null, NaN or infinite are dropped (counted in the
    diagnostics). ``noise="gaussian"`` with ``delta`` (or ``rho``): zCDP and discrete Gaussian noise,
    paid by the L2 sensitivity, which ``records_per_item`` = c (at most c records per user and
    item) lowers (docs/value_sums.md). When the largest table has at least ``executor_noise_cells``
    cells (default 20 million), the tables are released on the executors and returned as Spark
    DataFrames (docs/executor_noise.md); ``max_output_rows`` as for ``sra``."""
    private = isinstance(items, str) and items == PRIVATE_ITEMS
    if private:  # partition selection spends delta, and shares it under zCDP
        if delta is None:
            raise ConfigError(f"items=\"{PRIVATE_ITEMS}\" needs delta (e.g. 1e-6): partition selection spends it")
        accounting, epsilon = accounting_of(noise, epsilon, delta, rho, seed is not None, prefix="",
                                            outside_share=PARTITION_DELTA_SHARE)
    else:
        accounting, epsilon = zcdp_accounting("means", noise, epsilon, delta, rho, seed)
    if l_objective is not None and l != AUTO:
        raise ConfigError("l_objective is used only with l=\"auto\"")
    params = MeansParams(low, high, l, bounding, d, records_per_item, noise or "laplace", l_candidates,
                         clip_candidates=clip_candidates, private_items=private, keys_per_user=keys_per_user,
                         delta=partition_delta(delta or 0.0, accounting.zcdp) if private else 0.0,
                         confidence=confidence, objective=l_objective)
    bound_objective.check_tables(params.objective, attributes is not None, MEANS_TABLES)
    check_accounting(family_of("means"), params, accounting)
    domains = Domains(None if private else as_items(items), as_attributes(attributes))
    if (attribute is None) != (domains.attributes is None):
        raise ConfigError("give both attribute (the column) and attributes (its public values), or neither")
    if isinstance(df, Planning):
        return _returned(plan_of(family_of("means"), params, domains, epsilon, epsilon_split, df, guards, accounting))
    if not isinstance(distinct_records, bool):
        raise ConfigError(f"distinct_records must be True or False, got {distinct_records!r}")
    records = with_row_key(standard_columns(df, {"user_id": privacy_unit, "item_id": item, "attr": attribute,
                                                  "value": value}), distinct=distinct_records)
    execution = as_execution(executor_noise_cells, max_output_rows)
    return _returned(release_of(family_of("means"), params, records, domains, epsilon, epsilon_split, seed, budget,
                                progress, guards, execution, accounting))


def aggregate(df: DataFrame, *, by: str | Sequence[str], keys: Mapping[Any, Any], metrics: Sequence[str],
              groups_per_user: int | str, records_per_group: int = 1, low: float | str | None = None,
              high: float | str | None = None, candidates: Sequence[float] | None = None, epsilon: Number | None = None,
              privacy_unit: str = "user_id",
              seed: int | None = None, budget: DatasetBudget | None = None,
              guards: Mapping[str, Any] | Guards | None = None, progress: ProgressSink | None = None,
              noise: str | None = "laplace", delta: float | None = None, rho: Number | None = None,
              max_output_rows: int | None = None, method: str = "auto", keys_per_user: int | None = None,
              bounding: str = "sra", d: int = 1, groups_per_user_candidates: Sequence[int] | None = None,
              clip_candidates: Sequence[float] | None = None, weights: Mapping[str, float] | None = None) -> Release:
    """Several metrics per group of the key columns ``by``, in one table (``groups``): one row per combination of the
    keys' public values ``keys`` ({column: a range, a list, an item domain's table such as {"file": ...}, or a
    catalog table's column, {"table": "db.movies", "column": "movie_id"}}; {("city", "zip"): rows}: the listed
    tuples of several columns, a list of tuples, a pandas DataFrame or {"table": "db.places"}, instead of their
    product), the key columns first. ``metrics``: "count" (records kept), "users" (distinct users),
    "sum(v)", "mean(v)" (with its interval, mean_v_low and mean_v_high), "variance(v)", "stddev(v)", "median(v)" and
    "quantiles(v, 0.1, 0.9, ...)", of one numeric column v clipped to the public [``low``, ``high``], whose values
    are rounded to ``candidates`` (default 101 evenly over the range) for its quantiles, and for every value metric
    by histogram. Each user keeps at most ``groups_per_user`` of its groups (a uniform sample) and
    ``records_per_group`` of its records in each (default 1). ``method``: "histogram" (one noisy histogram per group
    over the candidates, every value metric from it), "tables" (a noisy table per figure, the exponential mechanism
    per quantile level) or "auto" (the histogram for at most 32 given candidates where its noise is lower: with a
    quantile, or a variance of the stars 1 to 5). Each ledger step gets an equal part of ε (of ρ under zCDP:
    ``noise="gaussian"`` or ``"auto"`` with ``delta``, or ``rho``). A key column given as ``"private"`` has its
    values chosen by partition selection over the tuples of all such columns, with half of ε and ``delta`` (needed
    then), each user on at most ``keys_per_user`` tuples (default ``groups_per_user``; 10 with "auto").
    ``bounding="hpa"``: each user keeps its most popular groups, by a noisy popularity (a tenth of ε) from ``d``
    groups per user, rather than a uniform sample. ``groups_per_user="auto"``: l chosen privately from
    ``groups_per_user_candidates`` with a tenth of ε (with HPA, after its popularity, by the groups HPA drops);
    with a mean, variance or deviation asked, scored by the groups' means with a twentieth of ε instead.
    ``low`` or ``high`` "auto": that end of the value's range chosen
    privately from ``clip_candidates`` (default 0 and ±1, 1.5, 2, 3, 4, 5, 6, 8 × 10^k, k = −2..8) with a tenth of
    ε, from one value per user, as the means choose theirs. ``weights``: the ledger steps' relative parts (step name ->
    weight, 1 unless given; ``plan`` lists the steps), instead of equal ones. docs/aggregate.md."""
    private = isinstance(keys, Mapping) and any(isinstance(spec, str) and spec == PRIVATE_ITEMS
                                                for spec in keys.values())
    if private:  # partition selection spends delta, and shares it under zCDP
        if delta is None:
            raise ConfigError(f"a key column chosen privately (\"{PRIVATE_ITEMS}\") needs delta (e.g. 1e-6): "
                              "partition selection spends it")
        accounting, epsilon = accounting_of(noise, epsilon, delta, rho, seed is not None, prefix="",
                                            outside_share=PARTITION_DELTA_SHARE)
    else:
        accounting, epsilon = zcdp_accounting("aggregate", noise, epsilon, delta, rho, seed)
    params = aggregate_params(by, dict(keys) if isinstance(keys, Mapping) else keys, metrics, groups_per_user,
                              records_per_group, low, high, candidates, noise or "laplace", method=method,
                              keys_per_user=keys_per_user,
                              delta=partition_delta(delta or 0.0, accounting.zcdp) if private else 0.0,
                              bounding=bounding, d=d, groups_per_user_candidates=groups_per_user_candidates,
                              clip_candidates=clip_candidates, weights=dict(weights) if weights is not None else None)
    family = family_of("aggregate")
    check_accounting(family, params, accounting)
    domains = Domains(None)
    if isinstance(df, Planning):
        return _returned(plan_of(family, params, domains, epsilon, None, df, guards, accounting))
    if family.reads_tables(params):  # key values in catalog tables: never ``df``'s own
        params = family.read_tables(params, df.sparkSession, FrameSource(df))
    records = standard_columns(df, {"user_id": privacy_unit, **{name: name for name in family.read_columns(params)}})
    execution = as_execution(None, max_output_rows)
    return _returned(release_of(family, params, records, domains, epsilon, None, seed, budget, progress, guards,
                                execution, accounting))


RELEASES: dict[str, Callable[..., Any]] = {
            "sra": sra, "hpa": hpa, "lpa": lpa, "dft": dft, "gs": gs, "user_histogram": user_histogram,
            "dpsense": dpsense, "dpsense_s": dpsense_s, "entropy": location_entropy,
            "location_entropy": location_entropy, "frapp": frapp, "means": means, "aggregate": aggregate}


def plan(algorithm: str, *, alpha: float = accuracy.DEFAULT_ALPHA, **arguments: Any) -> Plan:
    """The expected error of each table that the release function ``algorithm`` ("sra", "hpa",
    "dpsense", "location_entropy", ...) would publish, given the same keyword arguments without the
    DataFrame: each noisy column's noise distribution, sd, 95% and (1 - ``alpha``) interval
    half-widths, from public parameters only. Nothing is read, and a ``budget`` is not charged.
    The arguments are checked as the release checks them. Column names may be left out."""
    if algorithm not in RELEASES:
        raise ConfigError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(RELEASES)}")
    arguments.pop("budget", None)
    if algorithm == "means":  # the value column is named by the release only: nothing is read here
        arguments.setdefault("value", "value")
    return RELEASES[algorithm](Planning(alpha), **arguments)
