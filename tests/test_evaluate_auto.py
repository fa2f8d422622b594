"""dp-spark evaluate's private-bound methods (sra_auto, hpa_auto, limit_auto) and their oracles."""

import json

import pytest

from dp_spark.cli import main
from dp_spark.errors import ConfigError
from dp_spark.jobs.config import load_config
from dp_spark.lab import evaluate
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
    """sra_auto's records, and fixed SRA's mean item MSE at each candidate, the same seeds."""
    cfg = _ml100k("--set", "algorithm.l=\"auto\"", "--set", f"algorithm.l_candidates={candidates}",
                  "--set", f"privacy.epsilon={epsilon}", *extra)
    records = evaluate.evaluate(cfg, spark, ["sra_auto"], 2, None, lambda message: None)
    fixed = {}
    for l in candidates:
        fixed_cfg = _ml100k("--set", f"algorithm.l={l}", "--set", f"privacy.epsilon={epsilon}", *extra)
        fixed[l] = _cells(evaluate.evaluate(fixed_cfg, spark, ["sra"], 2, None, lambda message: None))["sra"]["mean"]
    return records, fixed


def test_the_oracle_is_the_best_fixed_bound_and_auto_applies_its_choice(spark):
    """Where the noise vanishes (ε = 10^6) the bias decides and the mechanism picks the same
    candidate every run, and sra_auto's item MSE must then be that of fixed SRA at the bound it
    reports. On all of ML-100K every candidate drops records and the largest drops fewest; on
    its first 10 movies no user has more than 10 records, so 16 drops none and wins. The oracle
    tries a dense grid (evaluate.oracle_bounds): its MSE is at most the best candidate's. (Small
    candidates: the oracle's grid, every bound up to the largest candidate, is what takes the time.)"""
    chosen = set()
    for candidates, extra in (([2, 8], ()), ([4, 16], ("--set", "domain.items={ range = [1, 10] }"))):
        records, fixed = _auto_against_fixed(spark, 1000000, candidates, *extra)
        bounds = _cells(records, "bound", "l")
        l = bounds["sra_auto"]["mean"]
        assert bounds["sra_auto"]["std"] == 0 and l in fixed
        assert _cells(records)["sra_auto"]["mean"] == pytest.approx(fixed[int(l)], rel=1e-9)
        assert bounds["sra_oracle"]["mean"] in evaluate.oracle_bounds(candidates, "sra")
        assert _cells(records)["sra_oracle"]["mean"] <= min(fixed.values()) * (1 + 1e-9)
        chosen.add(l)
    assert chosen == {8, 16}  # the two settings choose differently, so the bound applied is the chosen one


def test_evaluate_reports_hpa_auto_beside_its_oracle(spark, tmp_path, capsys):
    out = tmp_path / "eval"
    args = ["evaluate", str(ROOT / "conf/movielens_sra.toml"), "--runs", "2", "--methods", "hpa_auto", "--out",
            str(out), *ml100k_args("--set", "algorithm.l=\"auto\"", "--set", "algorithm.l_candidates=[5, 80]")]
    assert main(args) == 0
    records = json.loads((out / "evaluation.json").read_text())
    assert set(_cells(records)) == {"hpa_auto", "hpa_oracle"}
    bounds = _cells(records, "bound", "l")
    assert 5 <= bounds["hpa_auto"]["mean"] <= 80 and bounds["hpa_oracle"]["mean"] in (5, 80)
    assert "NOT private" in (out / "evaluation.md").read_text() and "hpa_oracle" in capsys.readouterr().out


def test_limit_auto_and_its_oracle(spark, tmp_path):
    """The oracle must be the fixed Limit of lowest MSE over the grid, which fixed evaluations
    at each (M, C) give with the same seeds; limit_auto reports a pair of the grid."""
    path, _stats = generated(tmp_path)
    common = [f"source.path={path}", "domain.items={ range = [1, 200] }", "seed=1"]
    grid = ["algorithm.locations_per_user=\"auto\"", "algorithm.visits_per_location=\"auto\"",
            "algorithm.locations_per_user_candidates=[2, 10]", "algorithm.visits_per_location_candidates=[1, 5]"]
    cfg = load_config(ROOT / "conf/sparse_entropy.toml", common + grid)
    records = evaluate.evaluate(cfg, spark, ["limit_auto"], 2, None, lambda message: None)
    fixed = {}
    for M in (2, 10):
        for C in (1, 5):
            one = load_config(ROOT / "conf/sparse_entropy.toml",
                              common + [f"algorithm.locations_per_user={M}", f"algorithm.visits_per_location={C}"])
            got = evaluate.evaluate(one, spark, ["limit"], 2, None, lambda message: None)
            fixed[M, C] = _cells(got, "entropy")["limit"]["mean"]
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
