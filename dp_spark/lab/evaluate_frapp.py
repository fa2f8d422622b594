"""``dp-spark evaluate`` on a FRAPP config: mining accuracy of each scheme against exact Apriori.

NOT PRIVATE: the true frequent itemsets come from the raw records, for comparing methods only.

Methods: ``exact`` (Apriori on the raw records: metric ``frequent_itemsets`` per length, paper 003
Table 3) and the schemes det_gd, ran_gd, mask, cut_paste (metrics per itemset length, M8:
``frequent_itemsets`` |R|, ``support_error`` ρ in %, ``sigma_plus`` and ``sigma_minus`` in % of
|F|, and ``condition_number`` of the matrix the scheme inverts). Queries are ``len1``, ``len2``, ….
Every run perturbs the records afresh. Cut-and-Paste uses the config's K and ρ when its scheme
is cut_paste, else K = 3 and the tight ρ for γ.
"""

from __future__ import annotations

import math
from collections import defaultdict

from dp_spark.errors import ConfigError
from dp_spark.families.frapp import mining as fm
from dp_spark.families.frapp import perturbation as frapp
from dp_spark.jobs.config import JobConfig

METHODS = ("exact", *frapp.SCHEMES)


def check_method(method: str) -> None:
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r} for a frapp config; expected some of {', '.join(METHODS)}")


def scheme_for(cfg: JobConfig, method: str) -> fm.Scheme:
    configured: fm.Scheme = cfg.frapp["scheme"]
    if method == configured.name:
        return configured
    return fm.Scheme.of(method, configured.gamma, configured.sizes)


def run_methods(cfg: JobConfig, spark, methods: list[str], runs: int, progress) -> list[tuple[str, dict]]:
    """[(method, {(query, metric): [values over runs]})]."""
    from dp_spark.families.frapp.family import bounded_records
    from dp_spark.io.sources import read_whole_records

    for method in methods:
        check_method(method)
    specs = list(cfg.frapp["specs"])
    sizes = fm.sizes_of([s.attribute() for s in specs])
    sup_min = cfg.frapp["sup_min"]
    records, _ = bounded_records(read_whole_records(spark, cfg.source), cfg.params.records_per_user, cfg.seed)
    table = fm.coded(records, specs)[0].localCheckpoint(eager=True)
    progress(f"exact Apriori on the raw records (NOT private), support {sup_min:g}")
    truth = fm.mine(table, sizes, None, sup_min, progress)
    results = []
    for method in methods:
        values = defaultdict(list)
        if method == "exact":
            for length, count in sorted(_lengths(truth).items()):
                values[(f"len{length}", "frequent_itemsets")].append(float(count))
            results.append((method, values))
            continue
        scheme = scheme_for(cfg, method)
        for run in range(runs):
            seed = None if cfg.seed is None else cfg.seed + 7919 * run
            perturbed = fm.perturb(table, scheme, seed).localCheckpoint(eager=True)
            found = fm.mine(perturbed, sizes, scheme, sup_min)
            perturbed.unpersist()
            for length, row in frapp.accuracy(truth, found).items():
                for metric, value in row.items():
                    if math.isfinite(value):
                        values[(f"len{length}", metric)].append(value)
            progress(f"{method} run {run + 1}/{runs}: {len(found)} itemsets found")
        for length in sorted(_lengths(truth)):
            values[(f"len{length}", "condition_number")].append(frapp.condition_number(
                method, length, sizes, scheme.gamma, scheme.p, scheme.cp_k, scheme.rho))
        results.append((method, values))
    table.unpersist()
    return results


def _lengths(itemsets: dict) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for itemset in itemsets:
        out[len(itemset)] += 1
    return dict(out)
