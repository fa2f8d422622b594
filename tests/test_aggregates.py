"""Counts over the public domain, and the L1 sensitivity after bounding."""

import numpy as np
import pytest

from dp_spark.aggregates import item_edges
from dp_spark.aggregates.domain_vector import on_domain
from dp_spark.bounding import user_records
from dp_spark.core.domain import AttributeDomain, ItemDomain, attribute_domain, item_domain, item_domain_of_ids


def test_counts_are_zero_filled_over_the_domain(spark):
    items = item_domain({"range": [1, 5]})
    attrs = attribute_domain(["a", "b"])
    df = spark.createDataFrame(
        [(1, 1, "a"), (2, 1, "a"), (2, 3, "b"), (3, 5, "b")], "user_id long, item_id long, attr string"
    )
    edges = item_edges.edge_counts(df, items, attrs)
    expected = np.zeros((5, 2), dtype=np.int64)
    expected[0, 0], expected[2, 1], expected[4, 1] = 2, 1, 1
    assert np.array_equal(edges, expected)
    assert np.array_equal(item_edges.item_counts(edges), [2, 0, 1, 0, 1])


@pytest.mark.parametrize("ids", [[-7, 0, 12], [-(2**62), 5, 2**62]], ids=["packed", "too-large-to-pack"])
def test_cell_keys_give_the_same_counts_as_a_group_by(spark, ids):
    """Counting by the packed (item, attribute) key equals counting by the pair, for
    negative ids and for ids too large to pack (the struct fallback)."""
    items = ItemDomain(ids=np.array(ids, dtype=np.int64), description="t")
    attrs = attribute_domain(["x", "y", "z"])
    rng = np.random.default_rng(3)
    rows = [(int(rng.choice(ids)), str(rng.choice(list("xyz")))) for _ in range(200)]
    df = spark.createDataFrame(rows, "item_id long, attr string")
    expected = np.zeros((3, 3), dtype=np.int64)
    for item, attr in rows:
        expected[ids.index(item), "xyz".index(attr)] += 1
    assert np.array_equal(item_edges.edge_counts(df, items, attrs), expected)
    assert item_edges._packable(items, 3) == (ids[-1] < 2**60)


def test_the_highest_packable_id_with_the_last_attribute_value_does_not_overflow(spark):
    """item·h + position + ... − 1 passes through item·h + h on the way: with h = 2 and the id
    2^62 − 1 that is 2^63, beyond a long (which ANSI mode refuses). Such an id is not packed."""
    top = 2**62 - 1
    items = ItemDomain(ids=np.array([0, top - 1, top], dtype=np.int64), description="t")
    attrs = attribute_domain(["x", "y"])
    assert item_edges._packable(item_domain_of_ids([0, top - 1], "t"), 2)
    assert not item_edges._packable(items, 2)
    df = spark.createDataFrame([(top, "y"), (top - 1, "y"), (0, "x")], "item_id long, attr string")
    assert item_edges.edge_counts(df, items, attrs).tolist() == [[1, 0], [0, 1], [0, 1]]


@pytest.mark.parametrize("outside", [False, True])
def test_a_large_attribute_domain_gives_the_same_counts(spark, outside):
    """Above 16 attribute values the key is a struct looked up on the driver; the counts
    equal a plain tally, and a value outside the domain is still an error."""
    items = item_domain({"range": [1, 4]})
    attrs = attribute_domain({"range": [0, 99]})
    rng = np.random.default_rng(5)
    rows = [(int(rng.integers(1, 5)), str(int(rng.integers(0, 100)))) for _ in range(300)]
    if outside:
        rows.append((2, "100"))
    df = spark.createDataFrame(rows, "item_id long, attr string")
    if outside:
        with pytest.raises(ValueError, match="outside the public domain"):
            item_edges.edge_counts(df, items, attrs)
        return
    expected = np.zeros((4, 100), dtype=np.int64)
    for item, attr in rows:
        expected[item - 1, int(attr)] += 1
    assert np.array_equal(item_edges.edge_counts(df, items, attrs), expected)


def test_struct_keys_are_decoded_without_arrow_too(spark):
    """Without Arrow a struct key comes back as a Row, not a dict; both must decode."""
    items = ItemDomain(ids=np.array([-(2**62), 5, 2**62], dtype=np.int64), description="t")
    df = spark.createDataFrame([(2**62, "y"), (5, "x"), (5, "x")], "item_id long, attr string")
    key = "spark.sql.execution.arrow.pyspark.enabled"
    before = spark.conf.get(key)
    try:
        spark.conf.set(key, "false")
        edges = item_edges.edge_counts(df, items, attribute_domain(["x", "y", "z"]))
    finally:
        spark.conf.set(key, before)
    assert edges.tolist() == [[0, 0, 0], [2, 0, 0], [0, 1, 0]]


def test_an_attribute_outside_the_domain_is_an_error_not_a_wrong_cell(spark):
    items = item_domain({"range": [1, 5]})
    df = spark.createDataFrame([(2, "a"), (2, "c")], "item_id long, attr string")
    with pytest.raises(ValueError, match="outside the public domain"):
        item_edges.edge_counts(df, items, attribute_domain(["a", "b"]))


def test_domain_lookups():
    items = ItemDomain(ids=np.array([3, 7, 9]), description="t")
    assert items.index_of(np.array([7, 3, 8, 10, 1])).tolist() == [1, 0, -1, -1, -1]
    assert AttributeDomain(("x", "y")).index_of(["y", "z", "x"]).tolist() == [1, -1, 0]


def test_values_are_placed_on_the_domain_zero_filled_and_added_up():
    """The one placement every aggregate uses: a cell for every element of the public domain,
    values at one position summed, and nothing outside the domain accepted."""
    assert on_domain(np.array([3, 0, 3]), np.array([2, 5, 4]), 5).tolist() == [5, 0, 0, 6, 0]
    assert on_domain(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 3).tolist() == [0, 0, 0]
    grid = on_domain((np.array([1, 0, 1]), np.array([2, 0, 2])), np.array([1, 7, 1]), (2, 3))
    assert grid.dtype == np.int64 and grid.tolist() == [[7, 0, 0], [0, 0, 2]]
    sums = on_domain(np.array([1]), np.array([0.25]), 2, dtype=float)
    assert sums.dtype == float and sums.tolist() == [0.0, 0.25]
    for outside in ([-1], [5]):  # index_of's "unknown id", and one past the end
        with pytest.raises(ValueError, match="outside the public domain"):
            on_domain(np.array(outside), np.array([1]), 5)
    with pytest.raises(ValueError, match="outside the public domain"):
        on_domain((np.array([0]), np.array([3])), np.array([1]), (2, 3))


def neighbours(rows):
    """Every dataset obtained by removing one whole user."""
    users = sorted({r[0] for r in rows})
    return [[r for r in rows if r[0] != u] for u in users]


@pytest.mark.parametrize("bound", ["sample", "top"])
def test_bounded_counts_move_by_at_most_l_when_a_user_is_removed(spark, bound):
    """Brute-force sensitivity: removing any user changes the bounded item and
    edge counts by at most l in L1 (the Δ the noise is calibrated to)."""
    l = 3
    rng = np.random.default_rng(0)
    rows = []
    for user, n in enumerate([1, 2, 3, 5, 9, 14]):
        for r in range(n):
            rows.append(
                (user, int(rng.integers(1, 5)), str(rng.choice(["a", "b"])), user * 100 + r, int(rng.integers(0, 3)))
            )
    items, attrs = item_domain({"range": [1, 4]}), attribute_domain(["a", "b"])
    schema = "user_id long, item_id long, attr string, row_key long, score long"

    def bounded_counts(data):
        df = spark.createDataFrame(data, schema)
        kept = (
            user_records.sample_per_user(df, l, salt=99)
            if bound == "sample"
            else user_records.top_per_user(df, l, "score", salt=99)
        )
        return item_edges.edge_counts(kept, items, attrs)

    full = bounded_counts(rows)
    assert full.sum() == sum(min(n, l) for n in [1, 2, 3, 5, 9, 14])
    for smaller in neighbours(rows):
        diff = full - bounded_counts(smaller)
        assert (diff >= 0).all()  # removing a user only removes that user's kept rows
        assert np.abs(diff).sum() <= l
        assert np.abs(item_edges.item_counts(diff)).sum() <= l
