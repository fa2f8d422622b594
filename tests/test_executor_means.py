"""Means released on the executors (families.means.on_executors): the executors' tally is
the driver's bounded sums, every cell is its true count and sum plus exactly its keyed noise
through the driver's own columns, the ledger is the driver's, a mean left out is null, and the
family's switch (a range of a billion items never lands on the driver; HPA's stays there)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from dp_spark import api
from dp_spark.aggregates.value_sums import bounded_sums, cell_tally
from dp_spark.bounding.user_records import sample_selection
from dp_spark.core.accounting import Accounting
from dp_spark.core.clip_range import ClipRange, SumSensitivity
from dp_spark.core.domain import attribute_domain, item_domain
from dp_spark.core.ledger import Budget
from dp_spark.core.vector_noise import GAUSSIAN as KEYED_GAUSSIAN
from dp_spark.core.vector_noise import LAPLACE as KEYED_LAPLACE
from dp_spark.core.vector_noise import CellNoise, NoiseSecret
from dp_spark.errors import BudgetExceeded, ConfigError
from dp_spark.families.means import on_executors as executor_means
from dp_spark.publishers.executor_laplace import CellGrid
from dp_spark.release.sum_tables import GAUSSIAN, LAPLACE, TablePair, halfwidth, pair_entries, released_columns

SECRET = NoiseSecret.from_seed(43)
STARS = ClipRange(1.0, 5.0)
QUIET = {"progress": lambda _: None}


def _tally(spark, cells: list[tuple[int, int, int]]):
    """DataFrame[_cell, _count, _sum] from (cell, count, sum) triples; a cell may come twice."""
    return spark.createDataFrame(pd.DataFrame(cells, columns=["_cell", "_count", "_sum"], dtype="int64"))


@pytest.mark.parametrize("items, attributes, cap", [
    ({"range": [-40, 59]}, ["a", "b", "c"], None),            # negative ids, packed (cell, units)
    ({"ids": ["b7", "a", "zz", "7"]}, ["x", "y"], None),        # string ids: struct keys
    ({"range": [1, 30]}, None, 1),                              # the per-item cap
    ({"range": [-40, 59]}, ["a", "b", "c"], 2),               # the cap over a packed edge key in the struct
    ({"ids": [-(2**62), -3, 0, 17, 2**62]}, [str(v) for v in range(20)], None),  # > 16 values: struct keys
    ({"ids": [3, 1, 40, 7]}, None, 1),                         # a list of integer ids: positions by a join
])
def test_the_executors_tally_is_the_drivers_bounded_sums(spark, items, attributes, cap):
    domain, values = item_domain(items), attribute_domain(attributes) if attributes else None
    rng = np.random.default_rng(7)
    ids = domain.ids
    rows = pd.DataFrame({"user_id": rng.integers(0, 30, 500), "item_id": ids[rng.integers(0, len(ids), 500)],
                         "value": rng.choice([0.5, 1.0, 2.5, 3.3, 5.0, 7.0], 500), "row_key": np.arange(500)})
    if values:
        rows["attr"] = np.array(values.values, dtype=object)[rng.integers(0, len(values), 500)]
    selection = sample_selection(spark.createDataFrame(rows), 4, seed=1)
    item_sums, edge_sums = bounded_sums(selection, domain, "value", STARS, values, cap)
    driver = edge_sums or item_sums
    tally = cell_tally(selection, domain, "value", STARS, values, cap).toPandas()
    for figure, expected in (("_count", driver.counts), ("_sum", driver.units)):
        placed = np.zeros(expected.size, dtype=np.int64)
        np.add.at(placed, tally["_cell"].to_numpy(), tally[figure].to_numpy())
        np.testing.assert_array_equal(placed, expected)
    assert driver.counts.sum() > 0 and np.abs(driver.units).sum() > 0


def _expected(grid: CellGrid, cells, pair: TablePair, s: SumSensitivity, clip: ClipRange) -> pd.DataFrame:
    """Every cell in domain order: its true figures plus its keyed noise, through the driver's columns."""
    counts, units = np.zeros(grid.cells, dtype=np.int64), np.zeros(grid.cells, dtype=np.int64)
    for cell, count, total in cells:
        counts[cell] += count
        units[cell] += total
    count_entry, sum_entry = pair_entries(s, grid.cells, pair, clip.unit)

    def noise(entry):
        mechanism = KEYED_GAUSSIAN if entry.mechanism == "discrete Gaussian" else KEYED_LAPLACE
        return CellNoise(SECRET, entry.step, Fraction(entry.noise_scale), mechanism)(0, grid.cells - 1)
    columns = released_columns(counts + noise(count_entry), units + noise(sum_entry), halfwidth(count_entry, 0.05),
                               halfwidth(sum_entry, 0.05), clip)
    h = grid.width
    keys = {"item_id": np.repeat(grid.items.ids, h)}
    if grid.attributes:
        keys["attr"] = np.tile(np.array(grid.attributes.values, dtype=object), len(grid.items))
    return pd.DataFrame({**keys, **columns})


@pytest.mark.parametrize("items, attributes, chunk_cells, noises", [
    ({"range": [-5, 1994]}, ["a", "b", "c"], 1_000, (LAPLACE, LAPLACE)),  # a range cut into chunks across blocks
    ({"ids": [str(i) for i in range(0, 3000, 3)]}, None, 300, (GAUSSIAN, LAPLACE)),  # string ids, mixed noises
])
def test_every_cell_is_its_true_figures_plus_its_own_keyed_noise(spark, items, attributes, chunk_cells, noises):
    grid = CellGrid(item_domain(items), attribute_domain(attributes) if attributes else None, chunk_cells=chunk_cells)
    # Cells counted twice, both ends, and counts large enough for a mean despite the noise.
    cells = [(0, 5, 3000), (7, 1, -1000), (grid.cells - 1, 9, 200), (grid.cells // 2, 40_000, -1_000_000),
             (7, 2, 500), (11, 90_000, 89_000_000)]
    pair = TablePair("value_counts", "value_sums", Fraction(3, 10), Fraction(7, 10), *noises)
    s = SumSensitivity(3, 2, STARS.steps)
    budget = Budget(2, fixed_seed=True, accounting=Accounting("auto", Fraction(1), 1e-6))
    table = executor_means.publish_means(_tally(spark, cells), grid, s, STARS, pair, budget, SECRET)
    assert [entry.step for entry in budget.entries] == ["value_counts", "value_sums"]  # the driver's order
    keys = ["item_id", "attr"] if attributes else ["item_id"]
    released = table.toPandas().sort_values(keys).reset_index(drop=True)
    expected = _expected(grid, cells, pair, s, STARS).sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(released, expected, check_dtype=False)
    assert released["mean"].notna().sum() >= 2 and released["mean"].isna().sum() > 0
    # A mean left out is a null in the table, as on the driver's path, not a NaN.
    assert table.where(F.isnan("mean")).count() == 0
    assert table.where(F.col("mean").isNull()).count() == released["mean"].isna().sum()


def test_the_sums_are_refused_before_their_noise_when_the_budget_is_short(spark):
    grid = CellGrid(item_domain({"range": [1, 10]}))
    pair = TablePair("value_counts", "value_sums", Fraction(1, 2), Fraction(1, 2))
    budget = Budget(Fraction(3, 4), fixed_seed=True)
    with pytest.raises(BudgetExceeded):
        executor_means.publish_means(_tally(spark, [(0, 1, 0)]), grid, SumSensitivity(1, 1, 1000), STARS, pair,
                                     budget, SECRET)
    assert [entry.step for entry in budget.entries] == ["value_counts"]  # the sums were refused before a draw


def test_the_vectorised_means_are_mean_interval_to_the_bit():
    from dp_spark.core.clip_range import mean_interval, mean_intervals

    # Figures within ±2^53, which doubles hold exactly: a cell of up to 9·10^12 records at 1,000
    # steps. (Beyond, the quotient of the rounded doubles may differ from Python's exact int/int in
    # the last bit: 1.1e-16 for a sum of 4.9·10^17 units.)
    rng = np.random.default_rng(5)
    for clip in (STARS, ClipRange(-3.5, 1e6, steps=7), ClipRange(0, 1, steps=10**6)):
        counts = np.concatenate([rng.integers(-50, 5000, 3000), [0, 1, 2, 2**53 // 10**6]])
        units = rng.integers(-clip.steps, clip.steps + 1, counts.size) * np.maximum(np.abs(counts), 1) \
            + rng.integers(-3000, 3000, counts.size)
        assert np.abs(units).max() <= 2**53
        # A count half-width of exactly 1: a cell of count 1 has no mean, and must not divide by zero.
        for sum_width, count_width in ((0.0, 0.0), (1234.5, 17.0), (10.0**6, 3.0), (5.0, 1.0)):
            with np.errstate(all="raise"):
                means, lows, highs = mean_intervals(units, counts, sum_width, count_width, clip)
            for i in range(counts.size):
                one = mean_interval(int(units[i]), int(counts[i]), sum_width, count_width, clip)
                got = (means[i], lows[i], highs[i])
                if one.mean is None:
                    assert all(np.isnan(got))
                else:
                    assert got == (one.mean, one.low, one.high)


def _ratings(spark, users=60, per_user=6, items=300):
    rng = np.random.default_rng(11)
    n = users * per_user
    return spark.createDataFrame(pd.DataFrame({
        "user_id": np.repeat(np.arange(users), per_user), "item_id": rng.integers(1, 21, n) * (items // 20),
        "sex": rng.choice(["F", "M"], n), "rating": rng.integers(1, 6, n).astype(float)}))


@pytest.mark.parametrize("extra", [
    {"epsilon": 10**7},  # the sums' Laplace scale 4,000/(0.35·10^7): P(nonzero) < 1e-300 a cell
    {"epsilon": 10**7, "bounding": "hpa", "d": 2},  # HPA's popularity drawn on the driver either way
    # zCDP: rho grows about as epsilon here; the sums' sigma^2 is 5e-5, P(nonzero) < 1e-4000 a cell.
    {"epsilon": 10**12, "noise": "gaussian", "delta": 1e-6, "records_per_item": 1}])
def test_without_noise_both_paths_release_the_same_tables(spark, extra):
    # At an epsilon so large that every draw is 0, what is left is the bounded tally and the
    # post-processing: the executors' must be the driver's, cell for cell.
    df = _ratings(spark)
    common = dict(items=range(1, 301), value="rating", l=4, low=1, high=5, seed=5, attribute="sex",
                  attributes=["F", "M"], **QUIET, **extra)
    driver = api.means(df, **common)
    executors = api.means(df, executor_noise_cells=600, **common)
    assert executors.report["noise"]["drawn_on"] == "executors" and "drawn_on" not in driver.report["noise"]
    assert executors.report["outputs"] == driver.report["outputs"]
    assert executors.report["ledger"] == driver.report["ledger"]
    assert executors.diagnostics["rows_after_bounding"] == driver.diagnostics["rows_after_bounding"] > 0
    for table, keys in (("item_means", ["item_id"]), ("edge_means", ["item_id", "attr"])):
        on_executors = executors[table].toPandas().sort_values(keys).reset_index(drop=True)
        # toPandas gives a null double as NaN, the driver's table holds it as <NA>: compare as floats.
        on_driver = driver[table].astype({name: "float64" for name in ("mean", "mean_low", "mean_high")})
        pd.testing.assert_frame_equal(on_executors, on_driver.sort_values(keys).reset_index(drop=True),
                                      check_dtype=False)
        assert driver[table]["noisy_count"].sum() > 0 and driver[table]["mean"].notna().sum() > 10


def test_a_range_of_a_billion_items_never_lands_on_the_driver_and_hpa_stays_within_it(spark):
    df = _ratings(spark, users=20, per_user=2)
    domain = item_domain({"range": [1, 10**9]})
    # 40 records: the noise-only refusal (records kept, a DP estimate) would stop it (docs/privacy.md).
    release = api.means(df, items=domain, value="rating", l=2, low=1, high=5, epsilon=1, seed=2,
                        guards={"refuse_noise_only": False}, **QUIET)
    assert release.report["noise"]["drawn_on"] == "executors"
    assert release.report["outputs"]["item_means"]["rows"] == 10**9
    assert domain._ids is None  # only its bounds were used
    assert release["item_means"].columns[:6] == ["item_id", "noisy_count", "noisy_sum", "mean", "mean_low",
                                                 "mean_high"]
    budget = api.DatasetBudget(10)
    with pytest.raises(ConfigError, match="popularity is drawn on the driver"):
        api.means(df, items=range(1, 60_000_001), value="rating", l=2, low=1, high=5, epsilon=1, bounding="hpa",
                  budget=budget)
    assert budget.spent == 0


def test_a_job_on_the_executors_writes_what_the_api_releases_and_sums_it_up(spark, tmp_path, capsys):
    # The summary reads the written tables back: before it did, a means job on the executors
    # released its tables and then failed on them (exit 1).
    import json

    from dp_spark.cli import main

    _ratings(spark).write.parquet(str(tmp_path / "records.parquet"))
    (tmp_path / "job.toml").write_text("\n".join([
        f'output = "{tmp_path / "out"}"', "seed = 9", "[source]", 'format = "parquet"',
        f'path = "{tmp_path / "records.parquet"}"', "[source.columns]", 'attr = "sex"', 'value = "rating"',
        "[domain]", "items = { range = [1, 300] }", 'attributes = ["F", "M"]', "[privacy]", "epsilon = 1.0",
        "[algorithm]", 'name = "means"', "l = 3", "low = 1", "high = 5", "[execution]",
        "executor_noise_cells = 600"]) + "\n")
    assert main(["run", str(tmp_path / "job.toml")]) == 0
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    assert report["noise"]["drawn_on"] == "executors" and report["outputs"]["edge_means"]["rows"] == 600
    assert "of 300 items have a mean" in capsys.readouterr().out
    records = spark.read.parquet(str(tmp_path / "records.parquet"))
    release = api.means(records, items=range(1, 301), value="rating", l=3, low=1, high=5, epsilon=1,
                        attribute="sex", attributes=["F", "M"], seed=9, executor_noise_cells=600, **QUIET)
    for table, keys in (("item_means", ["item_id"]), ("edge_means", ["item_id", "attr"])):
        written = pd.read_parquet(tmp_path / "out" / table).sort_values(keys).reset_index(drop=True)
        released = release[table].toPandas().sort_values(keys).reset_index(drop=True)
        assert len(written) == report["outputs"][table]["rows"]
        pd.testing.assert_frame_equal(written, released, check_dtype=False)
