"""Counts with discrete Gaussian noise under zCDP, through the public API: the noise of a
release has the variance its ledger states, on the driver and on the executors; the per-item cap
bounds what one user adds to an item; "auto" and "laplace" choose as documented."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.core import discrete_gaussian as dg

ITEMS = 4000
USERS = 1500


@pytest.fixture(scope="module")
def ratings(spark):
    """Each user rates 5 distinct items, one record each, so that with l = 5 and c = 1 the bounded
    counts are the raw counts; plus one user who rates item 1 ten times (the cap's case)."""
    rng = np.random.default_rng(3)
    rows = [(u, int(i)) for u in range(1, USERS + 1) for i in rng.choice(np.arange(1, ITEMS + 1), 5, replace=False)]
    rows += [(USERS + 1, 1)] * 10
    frame = pd.DataFrame(rows, columns=["user_id", "item_id"])
    true = frame.drop_duplicates().groupby("item_id").size().reindex(range(1, ITEMS + 1), fill_value=0)
    return spark.createDataFrame(frame), true.to_numpy()


def _noise(table, true: np.ndarray) -> np.ndarray:
    frame = table if isinstance(table, pd.DataFrame) else table.toPandas()
    frame = frame.sort_values("item_id")
    return frame["noisy_count"].to_numpy() - true


@pytest.mark.parametrize("cells", [None, 1], ids=["driver", "executors"])
def test_the_noise_has_the_stated_discrete_gaussian_variance(ratings, cells):
    df, true = ratings
    release = dp_spark.sra(df, items=range(1, ITEMS + 1), l=5, epsilon=1, delta=1e-6, noise="gaussian",
                           records_per_item=1, seed=11, progress=lambda _: None,
                           **({"executor_noise_cells": cells} if cells else {}))
    entry, *bounding = release.report["ledger"]
    assert [e["step"] for e in bounding] == ["bounding: kept", "bounding: removed"]  # pure steps, in ρ
    assert entry["mechanism"] == "discrete Gaussian" and entry["sensitivity_l2"] == pytest.approx(math.sqrt(5))
    variance = dg.discrete_gaussian_variance(entry["sigma"] ** 2)
    noise = _noise(release.tables["item_counts"], true)
    # 4,000 cells: the sample variance's standard error is about 2.2%; the tolerance is 4.5 of them.
    assert abs(noise.mean()) < 5 * math.sqrt(variance / ITEMS)
    assert noise.var() == pytest.approx(variance, rel=0.10)
    halfwidth = release.report["accuracy"]["tables"]["item_counts"]["noisy_count"]["ci95_halfwidth"]
    assert 0.93 < np.mean(np.abs(noise) <= halfwidth) < 0.97  # the stated 95% interval, on 4,000 cells
    assert release.report["rho_spent"] <= release.report["rho_total"]


def test_a_variance_one_fifth_too_small_would_be_seen(ratings):
    # Negative control of the test above: against σ²·0.8 its tolerance fails.
    df, true = ratings
    release = dp_spark.sra(df, items=range(1, ITEMS + 1), l=5, epsilon=1, delta=1e-6, noise="gaussian",
                           records_per_item=1, seed=11, progress=lambda _: None)
    variance = dg.discrete_gaussian_variance(release.report["ledger"][0]["sigma"] ** 2)
    assert _noise(release.tables["item_counts"], true).var() != pytest.approx(0.8 * variance, rel=0.10)


def test_the_cap_counts_a_user_once_per_item(ratings):
    df, true = ratings
    # Near-noiseless (seeded, so allowed): item 1's count is its raw users, the ten-fold rater once.
    release = dp_spark.sra(df, items=range(1, ITEMS + 1), l=5, epsilon=None, rho=10**6, delta=1e-6,
                           noise="gaussian", records_per_item=1, seed=3, progress=lambda _: None)
    counts = release.tables["item_counts"].set_index("item_id")["noisy_count"]
    assert counts[1] == true[0]
    assert np.abs(counts.to_numpy() - true).max() <= 1


def test_auto_picks_the_gaussian_for_counts_and_laplace_stays_pure(ratings):
    df, _ = ratings
    auto = dp_spark.sra(df, items=range(1, ITEMS + 1), l=5, epsilon=1, delta=1e-6, noise="auto", seed=1,
                        progress=lambda _: None)
    assert [e["mechanism"] for e in auto.report["ledger"]] == ["discrete Gaussian", "discrete Laplace",
                                                               "discrete Laplace"]  # the bounding estimate
    assert auto.report["ledger"][0]["sensitivity_l2"] == pytest.approx(5)  # no cap: all 5 may fall on one item
    pure = dp_spark.sra(df, items=range(1, ITEMS + 1), l=5, epsilon=1, seed=1, progress=lambda _: None)
    assert "accounting" not in pure.report and pure.report["ledger"][0]["mechanism"] == "discrete Laplace"
    with pytest.raises(dp_spark.ConfigError, match="only Gaussian"):
        dp_spark.sra(df, items=range(1, ITEMS + 1), l=5, epsilon=1, records_per_item=1)


def test_the_user_histogram_takes_the_gaussian_at_l2_sensitivity_one(ratings):
    df, _ = ratings
    bins = {"range": [1, 3001]}  # 3,000 bins: every user has 5 records but one (10), so nearly all are 0
    release = dp_spark.user_histogram(df, bins=bins, epsilon=1, delta=1e-6, noise="gaussian", seed=2,
                                      progress=lambda _: None)
    (entry,) = release.report["ledger"]
    assert entry["mechanism"] == "discrete Gaussian" and entry["sensitivity_l2"] == 1
    noisy = release.tables["histogram"]["noisy_count"].to_numpy()
    true = np.zeros(noisy.size, dtype=np.int64)
    true[4], true[9] = USERS, 1  # bins 1, 2, ..., 3000+: 5 records in the fifth bin, 10 in the tenth
    variance = dg.discrete_gaussian_variance(entry["sigma"] ** 2)
    noise = noisy - true
    assert noise.var() == pytest.approx(variance, rel=0.12)  # 3,000 bins: its standard error is 2.6%
    assert release.report["accuracy"]["tables"]["histogram"]["noisy_count"]["distribution"] == "discrete Gaussian"


@pytest.mark.parametrize("limit", ["normalize", "sample"])
def test_dpsense_column_counts_take_the_gaussian_at_l2_sensitivity_sqrt_theta(spark, limit):
    # One item per user: any θ keeps every row whole, so the limited counts are the users per item.
    rng = np.random.default_rng(9)
    items = rng.integers(1, ITEMS + 1, size=6_000)
    df = spark.createDataFrame(pd.DataFrame({"user_id": np.arange(items.size), "item_id": items}))
    true = np.bincount(items, minlength=ITEMS + 1)[1:]
    release = dp_spark.dpsense(df, items=range(1, ITEMS + 1), theta_max=4, limit=limit, epsilon=1, delta=1e-6,
                               noise="gaussian", seed=4, progress=lambda _: None)
    entry = next(e for e in release.report["ledger"] if e["step"] == "column_counts")
    theta = release.report["algorithm"]["chosen"]["theta"]
    unit = 1024 if limit == "normalize" else 1
    assert entry["mechanism"].startswith("discrete Gaussian") and entry["sensitivity_l2"] == pytest.approx(
        math.sqrt(theta) * unit)
    noise = release.tables["item_counts"].sort_values("item_id")["noisy_count"].to_numpy() - true
    variance = dg.discrete_gaussian_variance(entry["sigma"] ** 2) / unit**2
    assert noise.var() == pytest.approx(variance, rel=0.10)  # 4,000 columns: standard error 2.2%
