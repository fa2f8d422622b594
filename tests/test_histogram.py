"""The histogram of a per-user quantity: bins, the true histogram, its sensitivity, and the job."""

import json

import numpy as np
import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError
from dp_spark.families.user_histogram import histogram
from dp_spark.families.user_histogram import quantities as user_quantities
from dp_spark.jobs.config import load_config
from dp_spark.lab import evaluate
from tests.conftest import ml100k_job, shared_data

EDGES = np.array([1, 2, 5, 10])  # bins 1, 2-4, 5-9, 10+


def test_bins_from_a_list_and_from_a_range():
    assert histogram.bin_edges([1, 2, 5, 10]).tolist() == [1, 2, 5, 10]
    assert histogram.bin_edges({"range": [1, 4]}).tolist() == [1, 2, 3, 4]
    assert histogram.bin_labels(EDGES) == ["1", "2-4", "5-9", "10+"]
    lows, highs = histogram.bin_bounds(EDGES)
    assert lows.tolist() == [1, 2, 5, 10] and highs == [1, 4, 9, None]


@pytest.mark.parametrize(
    "spec, message",
    [
        ([1], "at least two"),
        ([0, 2, 5], "first bin edge must be 1"),
        ([1, 5, 5], "strictly increasing"),
        ([1, 2.5], "integers"),
        ([1, True], "integers"),
        ({"range": [2, 10]}, r"\[1, N\]"),
        ({"range": [1, 1]}, r"\[1, N\]"),
        ({"width": 5}, "range"),
        ("1,2,5", "list"),
    ],
)
def test_bad_bins_are_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        histogram.bin_edges(spec)


def test_every_value_falls_in_the_bin_whose_bounds_hold_it():
    values = np.arange(1, 40)
    bins = user_quantities.bin_of(values, EDGES)
    lows, highs = histogram.bin_bounds(EDGES)
    for value, b in zip(values, bins):
        assert lows[b] <= value and (highs[b] is None or value <= highs[b])


def records_frame(spark, rows):
    return spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id"]).astype("int64"))


# user 1: 1 record; user 2: 3 records of 2 distinct items; user 3: 12 records of 12 items; user 4: 6 of 1 item
ROWS = [(1, 7)] + [(2, 1), (2, 1), (2, 2)] + [(3, i) for i in range(12)] + [(4, 5)] * 6


@pytest.mark.parametrize("quantity, expected", [("records", [1, 1, 1, 1]), ("distinct_items", [2, 1, 0, 1])])
def test_true_histogram_counts_users_per_bin(spark, quantity, expected):
    assert user_quantities.true_histogram(records_frame(spark, ROWS), quantity, EDGES).tolist() == expected


def test_true_histogram_reuses_validated_per_user_counts(spark):
    counts = spark.createDataFrame([(1, 1), (2, 30), (3, 4)], "user_id long, _n long")
    assert user_quantities.true_histogram(None, "records", EDGES, counts).tolist() == [1, 1, 0, 1]


@pytest.mark.parametrize("quantity", list(histogram.QUANTITIES))
def test_removing_any_one_user_changes_one_bin_by_one(spark, quantity):
    """The L1 sensitivity the DP claim rests on, by brute force over every user."""
    full = user_quantities.true_histogram(records_frame(spark, ROWS), quantity, EDGES)
    for user in {u for u, _ in ROWS}:
        others = records_frame(spark, [r for r in ROWS if r[0] != user])
        without = user_quantities.true_histogram(others, quantity, EDGES)
        assert np.abs(full - without).sum() == 1


@pytest.mark.parametrize("publisher", ["laplace", "grouping", "ahp", "dpa_ahp"])
def test_publishing_pays_epsilon_at_sensitivity_one(publisher):
    budget = Budget(1)
    counts = np.array([50, 40, 30, 5, 0, 2, 1, 0], dtype=np.int64)
    noisy = histogram.publish_histogram(counts, budget.total, budget, RandomSource(5), publisher)
    assert noisy.shape == counts.shape
    assert budget.spent == 1 and all(e.sensitivity == 1 for e in budget.entries)


def ml100k_histogram_config(tmp_path, publisher="laplace", epsilon=1.0, quantity="records"):
    algorithm = f'name = "user_histogram"\nquantity = "{quantity}"\nbins = [1, 20, 50, 100, 200, 500]'
    return ml100k_job(tmp_path, algorithm, seed=2, epsilon=epsilon, publisher=f'name = "{publisher}"', name="hist.toml")


def test_job_on_movielens_100k_releases_every_bin_with_its_report(spark, tmp_path, capsys):
    """At ε = 10^6 the noise is zero, so the release must be the true histogram, computed here
    with pandas from u.data; the report names sensitivity 1 and the whole ε."""
    assert main(["run", str(ml100k_histogram_config(tmp_path, epsilon=1e6))]) == 0
    table = pd.read_parquet(tmp_path / "out" / "histogram").sort_values("low")
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    ratings = pd.read_csv(shared_data("ml-100k") / "u.data.gz", sep="\t", names=["user", "item", "rating", "time"])
    per_user = ratings.groupby("user").size().to_numpy()
    expected = np.bincount(user_quantities.bin_of(per_user, np.array([1, 20, 50, 100, 200, 500])), minlength=6)
    assert table["noisy_count"].tolist() == expected.tolist()
    assert table["bin"].tolist() == ["1-19", "20-49", "50-99", "100-199", "200-499", "500+"]
    assert [(e["step"], e["sensitivity_l1"]) for e in report["ledger"]] == [("histogram", 1)]
    assert report["epsilon_spent"] == report["epsilon_total"] == 1e6
    assert report["algorithm"]["parameters"]["quantity"] == "records"
    assert report["algorithm"]["specification"] == histogram.SPEC_SECTION
    assert "500+" in capsys.readouterr().out


def test_evaluate_compares_publishers_on_the_histogram(spark, tmp_path):
    out = tmp_path / "eval"
    config = ml100k_histogram_config(tmp_path, publisher="ahp", quantity="distinct_items")
    assert main(["evaluate", str(config), "--runs", "3", "--methods", "laplace,ahp,alpa", "--out", str(out)]) == 0
    records = json.loads((out / "evaluation.json").read_text())
    cells = {(r["method"], r["metric"]): r for r in records}
    assert {r["query"] for r in records} == {"histogram"}
    for method in ("laplace", "ahp", "alpa"):
        for metric in ("mse", "kl", "range_mse", "mae"):
            assert cells[(method, metric)]["runs"] == 3
    # Laplace at scale 1 has MSE 2e/(e−1)² ≈ 0.92 per bin; ALPA's one average for 6 very unequal
    # bins is off by hundreds.
    assert cells[("laplace", "mse")]["mean"] < 5 < cells[("alpa", "mse")]["mean"]


def test_evaluate_refuses_non_publishers_for_a_histogram(tmp_path):
    cfg = load_config(ml100k_histogram_config(tmp_path))
    with pytest.raises(ConfigError, match="the publishers"):
        evaluate.method_config(cfg, "sra", None)
    with pytest.raises(ConfigError, match="--m is not used"):
        evaluate.method_config(cfg, "ahp", 10)
