"""Count tables released on the executors (publishers.executor_laplace): the true counts of every
cell of the public domain plus exactly the keyed noise of core.vector_noise, whatever the chunking
and partitioning; the same distribution as the driver's path; and the counts family's switch."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from dp_spark import api
from dp_spark.core.domain import attribute_domain, item_domain, item_domain_of_ids
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import discrete_laplace_pmf
from dp_spark.core.vector_noise import BLOCK_CELLS, NoiseSecret, range_noise
from dp_spark.errors import BudgetExceeded, ConfigError
from dp_spark.publishers import executor_laplace
from dp_spark.publishers.executor_laplace import CellGrid
from dp_spark.release.family import Execution
from tests.stats import chi2_critical, chi2_statistic

SECRET = NoiseSecret.from_seed(31)


def _tally(spark, cells: list[tuple[int, int]]):
    """DataFrame[_cell, _count] from (cell, count) pairs; a cell may come twice (its counts add up)."""
    return spark.createDataFrame(pd.DataFrame(cells, columns=["_cell", "_count"], dtype="int64"))


def _released(
    spark,
    grid: CellGrid,
    cells: list[tuple[int, int]],
    sensitivity=2,
    epsilon=Fraction(1, 2),
    step="edge_counts",
    secret=SECRET,
) -> tuple[pd.DataFrame, Budget]:
    budget = Budget(1, fixed_seed=True)
    table, entry = executor_laplace.publish(_tally(spark, cells), grid, sensitivity, epsilon, budget, secret, step)
    assert budget.entries == [entry] and entry.cells == grid.cells and entry.noise_scale == sensitivity / epsilon
    keys = ["item_id", "attr"] if grid.attributes else ["item_id"]
    return table.toPandas().sort_values(keys).reset_index(drop=True), budget


def _expected(grid: CellGrid, cells: list[tuple[int, int]], scale: Fraction, step="edge_counts") -> pd.DataFrame:
    """What the release must be: every cell in domain order, its true count plus the cell's keyed noise."""
    true = np.zeros(grid.cells, dtype=np.int64)
    for cell, count in cells:
        true[cell] += count
    h = grid.width
    columns = {"item_id": np.repeat(grid.items.ids, h)}
    if grid.attributes:
        columns["attr"] = np.tile(np.array(grid.attributes.values, dtype=object), len(grid.items))
    columns["noisy_count"] = true + range_noise(SECRET, step, scale, 0, grid.cells - 1)
    return pd.DataFrame(columns)


@pytest.mark.parametrize("items, chunk_cells", [
    ({"range": [-5, 2994]}, 1_000),               # a range the executors lay out, cut into 12 chunks across blocks
    ({"range": [100, 25_099]}, 16 * BLOCK_CELLS),  # one chunk
    ({"ids": [str(i) for i in range(0, 6000, 3)]}, 700),  # string ids from the driver's list, in code-point order
])
def test_every_cell_is_its_true_count_plus_its_own_keyed_noise(spark, items, chunk_cells):
    grid = CellGrid(item_domain(items), attribute_domain(["a", "b", "c"]), chunk_cells=chunk_cells)
    cells = [(0, 5), (7, 1), (grid.cells - 1, 9), (grid.cells // 2, 3), (7, 2)]
    released, _ = _released(spark, grid, cells)
    expected = _expected(grid, cells, Fraction(4))
    pd.testing.assert_frame_equal(released, expected.sort_values(["item_id", "attr"]).reset_index(drop=True),
                                  check_dtype=False)


def test_item_counts_without_attributes_and_integer_ids_from_a_list(spark):
    grid = CellGrid(item_domain_of_ids([3, 1, 2**62, -7, 40], "list"), chunk_cells=2)
    cells = [(0, 2), (4, 11), (4, 1)]
    released, _ = _released(spark, grid, cells, step="item_counts")
    expected = _expected(grid, cells, Fraction(4), step="item_counts")
    pd.testing.assert_frame_equal(released, expected, check_dtype=False)
    assert released["item_id"].tolist() == [-7, 1, 3, 40, 2**62]  # 64-bit ids survive the trip intact


def test_the_release_does_not_depend_on_chunks_or_partitions(spark):
    # What a cluster changes: how cells are split into tasks. No value may move. 140,000 cells:
    # more than two noise blocks, so chunks of 3,001 and 50,000 cells cut across block edges.
    items, attributes = item_domain({"range": [1, 20_000]}), attribute_domain({"range": [1, 7]})
    cells = [(c, c % 5 + 1) for c in range(0, 140_000, 997)]
    runs, before = [], spark.conf.get("spark.sql.shuffle.partitions")
    for chunk_cells, partitions in ((16 * BLOCK_CELLS, "4"), (3_001, "1"), (50_000, "7")):
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
        try:
            runs.append(_released(spark, CellGrid(items, attributes, chunk_cells=chunk_cells), cells)[0])
        finally:
            spark.conf.set("spark.sql.shuffle.partitions", before)
    pd.testing.assert_frame_equal(runs[0], runs[1])
    pd.testing.assert_frame_equal(runs[0], runs[2])


def test_the_ledger_pays_before_any_noise_and_refuses_an_overspend(spark):
    grid = CellGrid(item_domain({"range": [1, 10]}))
    budget = Budget(Fraction(1, 4), fixed_seed=True)
    with pytest.raises(BudgetExceeded):
        executor_laplace.publish(_tally(spark, [(0, 1)]), grid, 1, Fraction(1, 2), budget, SECRET, "item_counts")
    assert budget.entries == []
    with pytest.raises(ValueError, match="sensitivity"):
        executor_laplace.publish(_tally(spark, [(0, 1)]), grid, 0, Fraction(1, 8), budget, SECRET, "item_counts")


def _noise_chi_square(noise: np.ndarray, scale: Fraction) -> tuple[float, float]:
    """(statistic, 1e-4 critical value) of the noise against the exact pmf, bins with ≥ 20 expected."""
    support = np.arange(-200, 201)
    expected = discrete_laplace_pmf(support, scale) * noise.size
    keep = expected >= 20
    observed = np.array([(noise == z).sum() for z in support[keep]], dtype=float)
    other_observed, other_expected = noise.size - observed.sum(), noise.size - expected[keep].sum()
    observed, expected = np.append(observed, other_observed), np.append(expected[keep], other_expected)
    return chi2_statistic(observed, expected), chi2_critical(observed.size - 1)


def _records(spark, users: int, per_user: int, items: int):
    """Each user's records on distinct items; every record is kept at l = per_user (true counts known)."""
    rows = [(u, 1 + (u * 7919 + k * 104_729) % items) for u in range(users) for k in range(per_user)]
    return spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id"]))


def test_the_executor_and_driver_paths_release_the_same_distribution(spark):
    # 60,000 item cells, l = 3, ε = 1 (19/20 of it on the item counts, the rest on the bounding
    # estimate): noise of scale 60/19 on each. Both paths' noise (noisy − true count) is tested
    # against the exact pmf and against each other (two-sample chi-square), each at the 1e-4
    # critical value; fixed seeds, so the test is deterministic.
    items = 60_000
    df = _records(spark, users=300, per_user=3, items=items)
    true = df.groupBy("item_id").count().toPandas().set_index("item_id")["count"]
    true = true.reindex(range(1, items + 1), fill_value=0).to_numpy()
    noise = {}
    for path, cells in (("executors", 1), ("driver", None)):
        release = api.sra(df, items=range(1, items + 1), l=3, epsilon=1, seed=5, executor_noise_cells=cells,
                          progress=lambda _: None)
        table = release["item_counts"]
        assert isinstance(table, pd.DataFrame) == (path == "driver")
        assert (release.report["noise"].get("drawn_on") == "executors") == (path == "executors")
        table = table if isinstance(table, pd.DataFrame) else table.toPandas()
        noise[path] = table.sort_values("item_id")["noisy_count"].to_numpy() - true
    scale = Fraction(3) / Fraction(19, 20)
    for path, values in noise.items():
        stat, critical = _noise_chi_square(values, scale)
        assert stat < critical, f"{path}: chi-square {stat:.1f} above {critical:.1f}"
    wrong, critical = _noise_chi_square(noise["executors"], scale * Fraction(11, 10))  # the control: 10% more noise
    assert wrong > critical
    support = np.arange(-60, 61)
    a = np.array([(noise["executors"] == z).sum() for z in support], dtype=float)
    b = np.array([(noise["driver"] == z).sum() for z in support], dtype=float)
    keep = (a + b) >= 40
    stat = chi2_statistic(a[keep], (a + b)[keep] / 2) + chi2_statistic(b[keep], (a + b)[keep] / 2)
    assert stat < chi2_critical(int(keep.sum()) - 1)


def test_hpa_on_the_executors_releases_every_cell_with_its_report(spark, tmp_path):
    df = _records(spark, users=200, per_user=4, items=500).withColumn("attr", F.col("user_id") % 3)
    release = api.hpa(df, items=range(1, 501), l=2, epsilon=1, attribute="attr", attributes=[0, 1, 2], seed=3,
                      executor_noise_cells=1000, progress=lambda _: None)
    items, edges = release["item_counts"], release["edge_counts"]
    assert not isinstance(items, pd.DataFrame) and not isinstance(edges, pd.DataFrame)
    assert release.report["outputs"]["edge_counts"]["rows"] == 1500 and edges.count() == 1500
    assert [e["step"] for e in release.ledger] == ["popularity", "item_counts", "edge_counts", "bounding: kept",
                                                   "bounding: removed"]
    assert set(edges.columns) == {"item_id", "attr", "noisy_count", "ci95_halfwidth"}
    written = release.write(str(tmp_path / "out"))
    back = pd.read_parquet(f"{written}/edge_counts")
    assert len(back) == 1500 and back.groupby(["item_id", "attr"]).size().max() == 1
    # Below the threshold the same call stays on the driver (the item table alone: 500 cells).
    small = api.hpa(df, items=range(1, 501), l=2, epsilon=1, seed=3, executor_noise_cells=501,
                    progress=lambda _: None)
    assert isinstance(small["item_counts"], pd.DataFrame) and "drawn_on" not in small.report["noise"]


def test_only_the_laplace_publisher_and_unadjusted_counts_go_to_the_executors(spark):
    df = _records(spark, users=50, per_user=2, items=100).withColumn("attr", F.col("user_id") % 2)
    small = {"refuse_noise_only": False}  # 100 records: released anyway
    common = dict(items=range(1, 101), m=2, epsilon=1, seed=1, executor_noise_cells=1, progress=lambda _: None,
                  guards=small)
    assert isinstance(api.gs(df, **common)["item_counts"], pd.DataFrame)
    consistent = api.sra(df, items=range(1, 101), l=2, epsilon=1, attribute="attr", attributes=[0, 1], seed=1,
                         consistent=True, executor_noise_cells=1, progress=lambda _: None, guards=small)
    assert isinstance(consistent["edge_counts"], pd.DataFrame)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10"])
def test_a_bad_threshold_is_refused(value):
    with pytest.raises(ConfigError, match="execution.executor_noise_cells"):
        Execution(value)


def test_the_threshold_is_inclusive():
    assert Execution(100).on_executors(100) and not Execution(100).on_executors(99)


def test_a_job_on_the_executors_writes_what_the_api_releases(spark, tmp_path, capsys):
    import json

    from dp_spark.cli import main

    df = _records(spark, users=120, per_user=3, items=3000).withColumn("attr", F.col("user_id") % 4)
    df.write.parquet(str(tmp_path / "records.parquet"))
    (tmp_path / "job.toml").write_text("\n".join([
        f'output = "{tmp_path / "out"}"', "seed = 9", "[source]", 'format = "parquet"',
        f'path = "{tmp_path / "records.parquet"}"', "[domain]", "items = { range = [1, 3000] }",
        "attributes = [0, 1, 2, 3]", "[privacy]", "epsilon = 1.0", "[algorithm]", 'name = "sra"', "l = 3",
        "[execution]", "executor_noise_cells = 12000"]) + "\n")
    assert main(["run", str(tmp_path / "job.toml")]) == 0  # its summary reads the top items back
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    assert report["noise"]["drawn_on"] == "executors" and report["outputs"]["edge_counts"]["rows"] == 12_000
    assert "Top-10 items by noisy count" in capsys.readouterr().out
    records = spark.read.parquet(str(tmp_path / "records.parquet"))
    release = api.sra(records, items=range(1, 3001), l=3, epsilon=1, attribute="attr", attributes=[0, 1, 2, 3],
                      seed=9, executor_noise_cells=12_000, progress=lambda _: None)
    for table, keys in (("item_counts", ["item_id"]), ("edge_counts", ["item_id", "attr"])):
        written = pd.read_parquet(tmp_path / "out" / table).sort_values(keys).reset_index(drop=True)
        released = release[table].toPandas().sort_values(keys).reset_index(drop=True)
        assert len(written) == report["outputs"][table]["rows"]
        pd.testing.assert_frame_equal(written, released, check_dtype=False)


def test_a_range_of_a_billion_items_never_lands_on_the_driver(spark):
    # The release is planned, paid for and its true counts tallied; its tables stay lazy Spark
    # DataFrames, and the domain's ids are never made (they would take 8 GB).
    df = _records(spark, users=20, per_user=2, items=1000)
    domain = item_domain({"range": [1, 10**9]})
    release = api.sra(df, items=domain, l=2, epsilon=1, seed=2, progress=lambda _: None,
                      guards={"refuse_noise_only": False})  # 40 records: released anyway
    assert release.report["domain"]["item_count"] == 10**9 and release.report["noise"]["drawn_on"] == "executors"
    assert release.report["outputs"]["item_counts"]["rows"] == 10**9
    assert domain._ids is None  # only its bounds were used
    assert release["item_counts"].columns == ["item_id", "noisy_count", "ci95_halfwidth"]  # not drawn here


def test_a_domain_too_large_for_the_driver_is_refused_before_anything_is_read(spark):
    df = _records(spark, users=20, per_user=2, items=1000)
    budget = api.DatasetBudget(10)
    with pytest.raises(ConfigError, match="more than the 50,000,000 a release on the driver holds"):
        api.dpsense(df, items=range(1, 60_000_001), theta_max=4, epsilon=1, budget=budget)
    with pytest.raises(ConfigError, match="only sra and lpa"):  # GS needs every count at once
        api.gs(df, items=range(1, 60_000_001), m=2, epsilon=1, budget=budget)
    with pytest.raises(ConfigError, match="popularity is drawn on the driver"):
        api.hpa(df, items=range(1, 60_000_001), l=2, epsilon=1, budget=budget)
    assert budget.spent == 0


def test_a_range_domain_keeps_its_bounds_only():
    domain = item_domain({"range": [-3, 10**12]})
    assert len(domain) == 10**12 + 4 and not domain.is_string and domain.bounds == (-3, 10**12)
    np.testing.assert_array_equal(domain.index_of([-4, -3, 0, 10**12, 10**12 + 1]), [-1, 0, 3, 10**12 + 3, -1])
    assert domain._ids is None
    small = item_domain({"range": [5, 9]})
    np.testing.assert_array_equal(small.ids, [5, 6, 7, 8, 9])  # made on first use
    with pytest.raises(ConfigError, match="more than 2"):
        item_domain({"range": [0, 2**62]})


def test_one_step_gets_noise_once_and_from_a_secret_that_matches_the_budget(spark):
    tally = _tally(spark, [(0, 1)])
    grid = CellGrid(item_domain({"range": [1, 10]}))
    with pytest.raises(ValueError, match="seeded noise secret for a budget without a fixed seed"):
        executor_laplace.publish(tally, grid, 1, Fraction(1, 4), Budget(1), SECRET, "item_counts")
    with pytest.raises(ValueError, match="fresh noise secret for a budget with a fixed seed"):
        executor_laplace.publish(tally, grid, 1, Fraction(1, 4), Budget(1, fixed_seed=True), NoiseSecret.fresh(),
                                 "item_counts")
    budget = Budget(1, fixed_seed=True)
    executor_laplace.publish(tally, grid, 1, Fraction(1, 4), budget, SECRET, "item_counts")
    with pytest.raises(ValueError, match="two tables would share it"):
        executor_laplace.publish(tally, grid, 1, Fraction(1, 4), budget, SECRET, "item_counts")
    assert len(budget.entries) == 1


@pytest.mark.parametrize("items, attributes", [
    ({"range": [-40, 59]}, ["a", "b", "c"]),                       # negative ids, packed keys
    ({"ids": [-(2**62), -3, 0, 17, 2**62]}, [str(v) for v in range(20)]),  # huge ids, struct keys (> 16 values)
    ({"ids": ["b7", "a", "zz", "7"]}, ["x", "y"]),                  # string ids with attributes
    ({"ids": ["b7", "a", "zz", "7"]}, None),                        # string ids alone
])
def test_the_executors_tally_the_cells_the_driver_counts(spark, items, attributes):
    from dp_spark.aggregates import item_edges
    from dp_spark.bounding import user_records

    domain, values = item_domain(items), attribute_domain(attributes) if attributes else None
    rng = np.random.default_rng(3)
    ids = domain.ids
    rows = pd.DataFrame({"user_id": rng.integers(0, 30, 400), "item_id": ids[rng.integers(0, len(ids), 400)],
                         "row_key": np.arange(400)})
    if values:
        rows["attr"] = np.array(values.values, dtype=object)[rng.integers(0, len(values), 400)]
    selection = user_records.sample_selection(spark.createDataFrame(rows), 4, seed=1)
    driver = item_edges.selected_edge_counts(selection, domain, values).reshape(-1)
    tally = item_edges.selected_cell_tally(selection, domain, values).toPandas()
    executors = np.zeros(driver.size, dtype=np.int64)
    np.add.at(executors, tally["_cell"].to_numpy(), tally["_count"].to_numpy())
    np.testing.assert_array_equal(executors, driver)
    assert driver.sum() == 30 * 4 - sum(max(0, 4 - n) for n in np.bincount(rows["user_id"], minlength=30))


def test_a_key_outside_the_domain_fails_the_tally_rather_than_vanish(spark):
    from pyspark.errors import PySparkException

    from dp_spark.aggregates import item_edges

    domain = item_domain({"ids": [1, 5, 9]})
    tally = spark.createDataFrame(pd.DataFrame({"_key": [5, 6], "_count": [1, 1]}))
    with pytest.raises(PySparkException, match="outside the public domain"):
        item_edges.cells_of_keys(tally, domain, None).collect()


def test_the_secret_shows_in_no_plan_and_no_message(spark, capsys):
    secret = NoiseSecret.fresh()
    table, entry = executor_laplace.publish(_tally(spark, [(0, 1)]), CellGrid(item_domain({"range": [1, 10]})), 1,
                                            Fraction(1, 4), Budget(1), secret, "item_counts")
    table.explain(extended=True)
    shown = capsys.readouterr().out + repr(entry) + repr(secret)
    assert "ArrowEvalPython" in shown or "FlatMapGroupsInPandas" in shown  # the plan was printed
    for form in (secret.key.hex(), repr(secret.key), str(list(secret.key))):
        assert form not in shown


def test_the_number_of_files_written_depends_on_the_domain_alone(spark, tmp_path):
    """The shuffle carries one row per non-zero cell, and left to adaptive
    execution the table came out as more files the more cells had records (3 for 100 users,
    8 for 30,000). The count must follow from the grid: the same for a sparse and a dense tally."""
    grid = CellGrid(item_domain({"range": [1, 400_000]}), attribute_domain(["a", "b"]), chunk_cells=100_000)
    rng = np.random.default_rng(39)
    files = []
    # Dense enough that the shuffle's bytes pass adaptive execution's 1 MB minimum many times over.
    for nonzero in (10, grid.cells):
        chosen = rng.choice(grid.cells, size=nonzero, replace=False)
        cells = list(zip(chosen.tolist(), (1 + rng.integers(0, 50, size=nonzero)).tolist()))
        table, _entry = executor_laplace.publish(
            _tally(spark, cells), grid, 2, Fraction(1, 2), Budget(1, fixed_seed=True), SECRET, "edge_counts"
        )
        out = tmp_path / f"nonzero_{nonzero}"
        table.write.parquet(str(out))
        files.append(len(list(out.glob("part-*.parquet"))))
    assert files[0] == files[1] > 1, files
