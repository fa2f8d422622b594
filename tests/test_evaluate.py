"""dp-spark evaluate on MovieLens 100K: every method, every metric, and the numbers checked."""

import json
from pathlib import Path

import numpy as np
import pytest

from dp_spark.aggregates import item_edges
from dp_spark.bounding import user_records
from dp_spark.cli import main
from dp_spark.core.domain import attribute_domain, item_domain
from dp_spark.errors import ConfigError
from dp_spark.io import sources, validation
from dp_spark.jobs.config import load_config
from dp_spark.lab import evaluate, metrics
from tests.conftest import LARGE_TABLE_SQL_SETTINGS, ROOT, shared_data
from tests.samples import movielens_100k_sample

pytestmark = pytest.mark.sql_settings(LARGE_TABLE_SQL_SETTINGS)  # large tables: compiled expressions

USERS = 300  # of MovieLens 100K's 943, each with at least 20 ratings


def ml100k_args(*extra, path: Path | None = None):
    """--set arguments for a seeded job on MovieLens 100K (``path``: a sample of it in its format)."""
    path = path or shared_data("ml-100k")
    return ["--set", "source.format=movielens-100k", "--set", f"source.path={path}",
            "--set", "domain.items={ range = [1, 1682] }", "--set", "seed=4", *extra]


@pytest.fixture(scope="module")
def first_users(tmp_path_factory) -> Path:
    """MovieLens 100K's first USERS users, written once for the module: each test here compares
    two computations on the same records, or reads what one evaluation writes, which needs no
    more of them."""
    return movielens_100k_sample(tmp_path_factory.mktemp("ml100k") / "ml-100k", USERS)


def test_evaluate_writes_every_method_and_metric(spark, first_users, tmp_path, capsys):
    out = tmp_path / "eval"
    args = ["evaluate", str(ROOT / "conf/movielens_sra.toml"), "--runs", "2", "--methods", "sra,hpa,lpa,dft,gs",
            "--m", "100", "--out", str(out), *ml100k_args("--set", "algorithm.l=20", path=first_users)]
    assert main(args) == 0
    records = json.loads((out / "evaluation.json").read_text())
    keys = {(r["method"], r["query"], r["metric"]) for r in records}
    for method in ("sra", "hpa", "lpa", "dft", "gs"):
        for metric in ("mse", "kl", "top10", "mae", "mre", "ndcg10"):
            assert (method, "items", metric) in keys
        for metric in ("mse", "kl", "top10"):
            assert (method, "edges", metric) in keys
            assert (method, "edges_consistent", metric) in keys and (method, "items_consistent", metric) in keys
    assert all(r["runs"] == 2 and r["dataset"] == "ml-100k" and r["std"] >= 0 for r in records)
    assert all(0 <= r["mean"] <= 1 for r in records if r["metric"] in ("top10", "ndcg10"))
    rows = {r["method"]: r["mean"] for r in records if r["query"] == "bounded"}
    assert rows["sra"] == rows["hpa"] == USERS * 20  # every ML-100K user has >= 20 ratings
    assert rows["lpa"] == rows["gs"] > USERS * 20  # m = 100 keeps more
    printed = capsys.readouterr().out
    assert printed.startswith("NOT PRIVATE") and "| items | mse |" in printed
    assert "NOT PRIVATE" in (out / "evaluation.md").read_text()


def test_with_negligible_noise_the_error_is_the_bounding_bias(spark, first_users):
    """At ε = 10^6 the noise is zero, so SRA's item MSE must equal the MSE of its bounded
    counts against the truth, computed here independently from the same seeded sample."""
    cfg = load_config(ROOT / "conf/movielens_sra.toml", ml100k_args("--set", "algorithm.l=20", path=first_users)[1::2]
                      + ["privacy.epsilon=1000000"])
    records = evaluate.evaluate(cfg, spark, ["sra"], 2, None, lambda message: None)
    got = {(r["query"], r["metric"]): r for r in records}

    items, attributes = item_domain(cfg.items, spark), attribute_domain(cfg.attributes)
    validated = validation.validate_records(sources.read_records(spark, cfg.source, True), items, attributes)
    try:
        truth = item_edges.edge_counts(validated.records, items, attributes)
        sample = user_records.sample_per_user(validated.records, 20, seed=4, counts=validated.user_counts)
        bounded = item_edges.edge_counts(sample, items, attributes)
    finally:
        validated.release()
    expected = metrics.mse(truth.sum(axis=1), bounded.sum(axis=1))
    assert got[("items", "mse")]["mean"] == pytest.approx(expected, rel=1e-9)
    assert got[("items", "mse")]["std"] == pytest.approx(0, abs=1e-9)
    assert got[("edges", "mse")]["mean"] == pytest.approx(metrics.mse(truth, bounded), rel=1e-9)
    assert got[("items", "top10")]["mean"] == metrics.top_k_precision(truth.sum(axis=1), bounded.sum(axis=1), 10)


def test_baselines_need_a_public_bound():
    cfg = load_config(ROOT / "conf/movielens_sra.toml")
    with pytest.raises(ConfigError, match="needs the public per-user bound: pass --m"):
        evaluate.method_config(cfg, "lpa", None)
    with pytest.raises(ConfigError, match="unknown method 'lap'"):
        evaluate.method_config(cfg, "lap", 5)
    assert evaluate.method_config(cfg, "dft", 50).publisher == "fourier"


def test_markdown_has_one_column_per_method():
    records = [{"method": m, "dataset": "d", "query": "items", "metric": "mse", "mean": v, "std": 0.0, "runs": 1}
               for m, v in (("sra", 1.5), ("lpa", 20.0))]
    table = evaluate.markdown(records)
    assert table.splitlines()[0] == "| query | metric | sra | lpa |"
    assert "| items | mse | 1.5 ± 0 | 20 ± 0 |" in table
    assert np.isfinite([r["mean"] for r in records]).all()


def test_metric_bars_draw_a_png(tmp_path):
    from dp_spark.lab import plots

    records = [{"method": m, "dataset": d, "query": "items", "metric": "mse", "mean": v, "std": v / 10, "runs": 3}
               for d in ("a", "b") for m, v in (("sra", 10.0), ("lpa", 1000.0))]
    path = plots.metric_bars(records, "items", "mse", tmp_path / "bars.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    with pytest.raises(ValueError, match="no records"):
        plots.metric_bars(records, "edges", "mse", tmp_path / "none.png")


def test_metric_curves_draw_one_line_per_method(tmp_path):
    from dp_spark.lab import plots

    records = [{"method": m, "dataset": "d", "query": "items", "metric": f"top{k}", "mean": k / 100, "std": 0.0,
                "runs": 1} for m in ("sra", "hpa") for k in (1, 10, 100)]
    path = plots.metric_curves(records, "items", "K", {"top1": 1, "top10": 10, "top100": 100}, tmp_path / "c.png",
                               log_x=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no records"):
        plots.metric_curves(records, "edges", "K", {"top1": 1}, tmp_path / "none.png")


def test_a_run_measuring_nan_is_kept_and_counted_not_fatal():
    # A variant that publishes nothing measures NaN; one such run used to raise in
    # statistics.pstdev, and every run of every method was lost.
    got = evaluate.summary([4.0, float("nan"), 2.0])
    assert got["runs"] == 3 and got["nan_runs"] == 1
    assert got["mean"] == 3.0 and got["std"] == 1.0 and got["median"] == 3.0
    nothing = evaluate.summary([float("nan")] * 2)
    assert nothing["mean"] is None and nothing["nan_runs"] == 2
    records = [{"method": "sra", "dataset": "d", "query": "items", "metric": "mse", **nothing},
               {"method": "lpa", "dataset": "d", "query": "items", "metric": "mse", **got}]
    assert "| NaN in all 2 runs | 3 ± 1 (p50 3, p90 3.8, p99 3.98); NaN in 1 of 3 runs |" in evaluate.markdown(records)


def test_the_summary_reports_the_tail_not_only_mean_and_std():
    # 99 runs at 1 and one at 1,000: mean ± std hides how rare the bad run is; the percentiles
    # say it (numpy's linear interpolation between order statistics).
    got = evaluate.summary([1.0] * 99 + [1000.0])
    assert got["median"] == 1.0 and got["p90"] == 1.0
    assert got["p99"] == pytest.approx(1 + 0.01 * 999)


def test_the_oracle_tries_a_dense_grid_not_only_the_candidates():
    # Fixed l = 10 beat a powers-of-two oracle twice, so the oracle now tries the integers
    # nearest 2^(j/4) as well, up to the largest candidate; HPA (a full release per bound) keeps
    # to the candidates.
    bounds = evaluate.oracle_bounds((1, 2, 4, 8, 16), "sra")
    assert bounds == [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16]
    assert len(evaluate.oracle_bounds(tuple(2 ** k for k in range(9)), "lpa")) == 28
    assert evaluate.oracle_bounds((1, 2, 4, 8, 16), "hpa") == [1, 2, 4, 8, 16]


def test_private_items_are_evaluated_as_the_release_selects_them(spark):
    # evaluate used to read items = "private" as a public domain and stop with a message
    # about domain.items. Now each run is the family's own release, partition selection included
    # (ε = 10: ML-100K's 943 users leave no item selected at ε = 1).
    cfg = load_config(ROOT / "conf/movielens_private_items.toml",
                      ml100k_args("--set", 'domain.items="private"', "--set", "privacy.epsilon=10")[1::2])
    records = evaluate.evaluate(cfg, spark, ["sra"], 2, None, lambda message: None)
    got = {(r["query"], r["metric"]): r for r in records}
    selected, share = got[("selection", "items_selected")], got[("selection", "records_share")]
    assert selected["runs"] == 2 and 1 <= selected["mean"] < 1682
    assert 0 < share["mean"] < 1
    # Items left out count as 0: the MSE is over every item of the raw records, at least the
    # mean squared count of the items not selected times their share of the items.
    assert got[("items", "mse")]["mean"] > 0 and got[("items", "mse")]["nan_runs"] == 0
