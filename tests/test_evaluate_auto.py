"""dp-spark evaluate's private-bound methods (sra_auto, hpa_auto, limit_auto) and their oracles."""

import json

import pytest

from dp_spark.cli import main
from dp_spark.core.domain import item_domain
from dp_spark.errors import ConfigError
from dp_spark.io import checkins
from dp_spark.jobs.config import load_config
from dp_spark.lab import evaluate, evaluate_entropy
from dp_spark.release import bound_selection
from tests.conftest import ROOT
from tests.test_evaluate import ml100k_args
from tests.test_location_entropy import generated

CANDIDATES = "algorithm.l_candidates=[5, 20, 80]"


def _cells(records, query="items", metric="mse"):
    return {r["method"]: r for r in records if r["query"] == query and r["metric"] == metric}


def _ml100k(*extra):
    return load_config(ROOT / "conf/movielens_sra.toml", ml100k_args(*extra)[1::2])


def test_auto_methods_take_the_configs_candidates_or_the_defaults():
    cfg = load_config(ROOT / "conf/movielens_sra.toml")
    assert evaluate.method_config(cfg, "sra_auto", None).params.candidates == bound_selection.DEFAULT_CANDIDATES
    auto = load_config(ROOT / "conf/movielens_sra.toml", ["algorithm.l=\"auto\"", CANDIDATES])
    hpa = evaluate.method_config(auto, "hpa_auto", None)
    assert (hpa.algorithm, hpa.params.l, hpa.params.candidates) == ("hpa", "auto", (5, 20, 80))
    # An "auto" config is evaluated with its private choice unless told otherwise.
    assert evaluate.evaluator_of(auto).default_methods(auto) == "sra_auto"
    assert evaluate.evaluator_of(cfg).default_methods(cfg) == "sra"
    # A baseline from an "auto" config is a fixed bound: the candidates go.
    assert evaluate.method_config(auto, "lpa", 50).params.candidates is None


def _auto_against_fixed(spark, epsilon, candidates, *extra):
    """sra_auto's records (sra_oracle's with them), and fixed SRA's mean item MSE at each
    candidate, the same seeds. One evaluation takes the auto config's method and a fixed config
    at each candidate, so that one read, validation and truth of the records serve all three, and
    the bounded counts at each bound too, as evaluate shares them between its methods (evaluate
    builds its methods from one config, and a fixed bound is another config; the command's whole
    path for fixed SRA is test_evaluate_writes_every_method_and_metric's, in tests/test_evaluate.py)."""
    cfg = _ml100k("--set", "algorithm.l=\"auto\"", "--set", f"algorithm.l_candidates={candidates}",
                  "--set", f"privacy.epsilon={epsilon}", *extra)
    fixed_cfgs = [evaluate.method_config(_ml100k("--set", f"algorithm.l={l}", "--set", f"privacy.epsilon={epsilon}",
                                                 *extra), "sra", None) for l in candidates]
    fixed_methods = [f"sra at {l}" for l in candidates]
    records = evaluate.evaluator_of(cfg).run(cfg, [evaluate.method_config(cfg, "sra_auto", None), *fixed_cfgs], spark,
                                             ["sra_auto", *fixed_methods], 2, None, lambda message: None)
    cells = _cells(records)
    return records, {l: cells[method]["mean"] for l, method in zip(candidates, fixed_methods, strict=True)}


def test_the_oracle_is_the_best_fixed_bound_and_auto_applies_its_choice(spark):
    """Where the noise vanishes (ε = 10^6) the bias decides and the mechanism picks the same
    candidate every run, and sra_auto's item MSE must then be that of fixed SRA at the bound it
    reports. On ML-100K's first 20 movies 297 users rated more than 4 of them, so every candidate
    drops records and the largest drops fewest; on its first 2 no user has more than 2 records, so
    2 drops none and wins. The oracle tries a dense grid (evaluate.oracle_bounds; 1 and 3 beside
    the candidates 2 and 4): its MSE is at most the best candidate's. (Small candidates and few
    movies: the oracle's grid, every bound up to the largest candidate, is what takes the time, a
    few Spark jobs a bound, and every job is quicker on the few records of a small domain.)"""
    chosen = set()
    for candidates, movies in (([2, 4], 20), ([1, 2], 2)):
        records, fixed = _auto_against_fixed(spark, 1000000, candidates,
                                             "--set", f"domain.items={{ range = [1, {movies}] }}")
        bounds = _cells(records, "bound", "l")
        l = bounds["sra_auto"]["mean"]
        assert bounds["sra_auto"]["std"] == 0 and l in fixed
        assert _cells(records)["sra_auto"]["mean"] == pytest.approx(fixed[int(l)], rel=1e-9)
        assert bounds["sra_oracle"]["mean"] in evaluate.oracle_bounds(candidates, "sra")
        assert _cells(records)["sra_oracle"]["mean"] <= min(fixed.values()) * (1 + 1e-9)
        chosen.add(l)
    assert chosen == {4, 2}  # the two settings choose differently, so the bound applied is the chosen one


def test_evaluate_reports_hpa_auto_beside_its_oracle(spark, tmp_path, capsys):
    # The command's whole path for HPA's private bound: one run (each run of each bound is a whole
    # HPA release, and the test reads no spread over runs) on ML-100K's first 100 movies (a
    # smaller input for every job). By the estimate, HPA's default, the run's bound is any integer
    # from the first candidate to the last; the oracle's is one of the candidates.
    out = tmp_path / "eval"
    args = ["evaluate", str(ROOT / "conf/movielens_sra.toml"), "--runs", "1", "--methods", "hpa_auto", "--out",
            str(out), *ml100k_args("--set", "algorithm.l=\"auto\"", "--set", "algorithm.l_candidates=[5, 80]",
                                   "--set", "domain.items={ range = [1, 100] }")]
    assert main(args) == 0
    records = json.loads((out / "evaluation.json").read_text())
    assert set(_cells(records)) == {"hpa_auto", "hpa_oracle"}
    bounds = _cells(records, "bound", "l")
    assert 5 <= bounds["hpa_auto"]["mean"] <= 80 and bounds["hpa_oracle"]["mean"] in (5, 80)
    assert "NOT private" in (out / "evaluation.md").read_text() and "hpa_oracle" in capsys.readouterr().out


def test_limit_auto_and_its_oracle(spark, tmp_path):
    """The oracle must be the fixed Limit of lowest MSE over the grid, which fixed evaluations
    at each (M, C) give with the same seeds; limit_auto reports a pair of the grid. limit_auto
    goes through evaluate whole. The fixed Limits are evaluate's own engine (run_variants: each
    pair bounded on its own, not the oracle's one aggregation over the grid) on one cached read of
    the check-ins, not four whole evaluations that each read and validate them again: the whole
    evaluate path of a fixed Limit is test_evaluate_compares_the_variants's, in
    tests/test_location_entropy.py."""
    path, _stats = generated(tmp_path)
    common = [f"source.path={path}", "domain.items={ range = [1, 200] }", "seed=1"]
    grid = ["algorithm.locations_per_user=\"auto\"", "algorithm.visits_per_location=\"auto\"",
            "algorithm.locations_per_user_candidates=[2, 10]", "algorithm.visits_per_location_candidates=[1, 5]"]
    cfg = load_config(ROOT / "conf/sparse_entropy.toml", common + grid)
    records = evaluate.evaluate(cfg, spark, ["limit_auto"], 2, None, lambda message: None)
    pairs = [(M, C) for M in (2, 10) for C in (1, 5)]
    configs = [evaluate.method_config(load_config(ROOT / "conf/sparse_entropy.toml", common + [
        f"algorithm.locations_per_user={M}", f"algorithm.visits_per_location={C}"]), "limit", None) for M, C in pairs]
    locations = item_domain(cfg.items, spark, cfg.source)
    checked, _diagnostics = checkins.validate_checkins(checkins.read_checkins(spark, cfg.source), locations)
    cached = evaluate_entropy.cached(checked)
    try:
        actual = evaluate_entropy.actual_stats(cached, locations)
        results = evaluate_entropy.run_variants(configs, cached, locations, actual, 2, lambda message: None)
    finally:
        cached.unpersist()
    fixed = {pair: evaluate.summary(values[("entropy", "mse")])["mean"]
             for pair, (_method, values) in zip(pairs, results, strict=True)}
    mse = _cells(records, "entropy")
    best = min(fixed, key=fixed.get)
    assert (
        _cells(records, "bound", "M")["limit_oracle"]["mean"],
        _cells(records, "bound", "C")["limit_oracle"]["mean"],
    ) == best
    assert mse["limit_oracle"]["mean"] == pytest.approx(fixed[best], rel=1e-9)
    assert (
        _cells(records, "bound", "M")["limit_auto"]["mean"] in (2, 10)
        or _cells(records, "bound", "M")["limit_auto"]["std"] > 0
    )
    assert mse["limit_auto"]["runs"] == 2


def test_fixed_entropy_methods_refuse_an_auto_config(tmp_path):
    cfg = load_config(ROOT / "conf/sparse_entropy.toml", ["algorithm.locations_per_user=\"auto\""])
    with pytest.raises(ConfigError, match="or use the method limit_auto"):
        evaluate.method_config(cfg, "limit", None)
    assert evaluate.method_config(cfg, "limit_auto", None).params.M == "auto"
    assert evaluate.evaluator_of(cfg).default_methods(cfg) == "limit_auto"
