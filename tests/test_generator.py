"""The Netflix-shaped generator: exact size, scaled users, distinct items, same table per seed."""

import numpy as np
import pyarrow.parquet as pq

from dp_spark.io import datasets
from tests.stats import chi2_critical, chi2_statistic


def test_shape_and_determinism(tmp_path):
    rows = 300_000
    first, again = tmp_path / "a.parquet", tmp_path / "b.parquet"
    stats = datasets.generate_netflix(rows, str(first), seed=5, progress=lambda _: None)
    datasets.generate_netflix(rows, str(again), seed=5, progress=lambda _: None)
    table = pq.read_table(first).to_pandas()
    assert pq.read_table(again).to_pandas().equals(table)

    targets = datasets.netflix_targets(rows)
    assert len(table) == stats["rows"] == rows
    assert table["user_id"].nunique() == stats["users"] == targets["users"] == 1434
    per_user = table.groupby("user_id").size()
    # A user rates a movie at most once.
    assert (table.groupby("user_id")["item_id"].nunique() == per_user).all()
    assert per_user.min() >= 1 and per_user.max() <= datasets.NETFLIX_MAX_PER_USER
    # Heavy tail as in Netflix: mean 209 (exact by construction), median near 96.
    assert per_user.mean() == rows / 1434
    assert 70 <= per_user.median() <= 125
    assert table["item_id"].between(1, datasets.NETFLIX_ITEMS).all()
    assert set(table["weekday"].astype(str)) == set(datasets.WEEKDAYS)


def test_single_draws_follow_the_zipf_weights():
    """With one item per user there is no without-replacement effect: item
    positions are drawn with weight 1/(r + 10). Chi-square over the 30 most
    popular positions plus the rest, 200,000 draws, fixed seed."""
    weights = 1.0 / (np.arange(1, datasets.NETFLIX_ITEMS + 1) + 10.0)
    weights /= weights.sum()
    cdf = np.cumsum(weights)
    cdf[-1] = 1.0
    users, items = datasets._items_light_users(np.random.default_rng(2), np.ones(200_000, dtype=np.int64), cdf)
    assert np.array_equal(users, np.arange(200_000))
    observed = np.append(np.bincount(items, minlength=30)[:30], (items >= 30).sum())
    expected = 200_000 * np.append(weights[:30], weights[30:].sum())
    assert chi2_statistic(observed, expected) < chi2_critical(30)


def test_whole_table_popularity_is_heavy_headed(tmp_path):
    """Netflix's most rated movie was rated by about half of the users and
    popularity falls steeply; ours too (users rate a movie once, which
    flattens the head: we check a wide band, not the 1/(r + 10) curve)."""
    path = tmp_path / "z.parquet"
    datasets.generate_netflix(400_000, str(path), seed=1, progress=lambda _: None)
    table = pq.read_table(path).to_pandas()
    by_rank = np.sort(table["item_id"].value_counts().to_numpy())[::-1]
    top_share = by_rank[0] / table["user_id"].nunique()
    assert 0.3 < top_share < 0.8
    assert 8 < by_rank[:5].mean() / by_rank[995:1005].mean() < 40
