"""validate_records: per-user counts of in-domain rows, reused by bounding, and released."""

import numpy as np
from chispa import assert_df_equality
from pyspark.sql import functions as F

from dp_spark.bounding import user_records
from dp_spark.core.domain import AttributeDomain, ItemDomain
from dp_spark.io import sql_literals, validation
from tests.spark_conf import session_settings


def test_user_counts_count_in_domain_rows_and_match_a_recount(spark):
    rows = [(u, i, "a" if i % 3 else "zz", u * 100 + i) for u in range(1, 40) for i in range(u % 7 + 1)]
    rows += [(99, 5000, "a", 99_000)]  # this user's only row is outside the item domain
    df = spark.createDataFrame(rows, "user_id long, item_id long, attr string, row_key long")
    items = ItemDomain(ids=np.arange(0, 10), description="0..9", id_range=(0, 9))
    validated = validation.validate_records(df, items, AttributeDomain(("a",)))
    try:
        expected = user_records.user_counts(validated.records)
        assert_df_equality(validated.user_counts, expected, ignore_row_order=True, ignore_nullable=True)
        assert validated.user_counts.where(F.col("user_id") == 99).count() == 0
        recount = expected.groupBy("_n").count().toPandas()
        assert validated.users_by_n.to_dict() == dict(zip(recount["_n"], recount["count"]))
        assert validated.diagnostics["rows_outside_item_domain"] == 1
        assert validated.diagnostics["rows_outside_attribute_domain"] == sum(1 for r in rows if r[2] != "a")
        # Passing the counts changes nothing in the sample.
        with_counts = user_records.sample_per_user(validated.records, 2, seed=4, counts=validated.user_counts)
        without = user_records.sample_per_user(validated.records, 2, seed=4)
        assert_df_equality(with_counts, without, ignore_row_order=True)
        # A session without adaptive execution (a user's own): the same sample, where the join of the
        # complete users with the row counts, both from these records, failed to resolve its columns.
        with session_settings(spark, {"spark.sql.adaptive.enabled": "false"}):
            for counts in (validated.user_counts, None):
                assert_df_equality(user_records.sample_per_user(validated.records, 2, seed=4, counts=counts),
                                   without, ignore_row_order=True)
        assert validated.cached.is_cached
    finally:
        validated.release()
    assert not validated.cached.is_cached


def test_the_one_record_sample_of_validation_is_the_samplers_sample_of_one(spark):
    # String user ids (cast in validation), and rows outside the item and the attribute domain.
    rows = [(f" {u}", i, "a" if (u + i) % 4 else "zz", u * 100 + i) for u in range(1, 60) for i in range(u % 9 + 1)]
    rows += [("99", 5000, "a", 99_000), ("98", 3, "zz", 98_000)]  # users with no in-domain row
    df = spark.createDataFrame(rows, "user_id string, item_id long, attr string, row_key long")
    items = ItemDomain(ids=np.arange(0, 8), description="0..7", id_range=(0, 7))
    for salt in (11, 2**62 + 5):
        validated = validation.validate_records(df, items, AttributeDomain(("a",)), one_per_user_salt=salt)
        try:
            sampled = validated.one_per_user.withColumnRenamed("_sampled_item", "item_id")
            expected = (
                user_records.sample_selection(validated.records, 1, salt=salt).rows().select("user_id", "item_id")
            )
            assert_df_equality(sampled, expected, ignore_row_order=True, ignore_nullable=True)
            got = sampled.toPandas()
            assert len(got) == validated.user_counts.count() and not {98, 99} & set(got["user_id"])
            assert got["item_id"].between(0, 7).all()
        finally:
            validated.release()
    without_sample = validation.validate_records(df, items, None)
    without_sample.release()
    assert without_sample.one_per_user is None


def test_validation_draws_each_users_record_uniformly(spark):
    # 800 users with the same 4 in-domain rows and 2 outside the domain, under one fixed salt:
    # each in-domain item is drawn about 200 times (chi-square with 3 degrees of freedom below
    # its 0.999 quantile), an item outside the domain never.
    rows = [(str(u), item, attr, 10 * u + k)
            for u in range(800) for k, (item, attr) in enumerate([(0, "a"), (1, "a"), (2, "a"), (3, "a"),
                                                                  (50, "a"), (4, "zz")])]
    df = spark.createDataFrame(rows, "user_id string, item_id long, attr string, row_key long")
    items = ItemDomain(ids=np.arange(0, 8), description="0..7", id_range=(0, 7))
    validated = validation.validate_records(df, items, AttributeDomain(("a",)), one_per_user_salt=12345)
    try:
        drawn = validated.one_per_user.groupBy("_sampled_item").count().toPandas()
    finally:
        validated.release()
    counts = drawn.set_index("_sampled_item")["count"]
    assert set(counts.index) == {0, 1, 2, 3} and counts.sum() == 800
    assert float(((counts - 200) ** 2 / 200).sum()) < 16.27


def test_users_item_sets_keep_the_shuffle_s_partitions(spark):
    """Each user's item list makes the per-user table as large as the records: squeezed into the
    default parallelism (2 partitions on local[2]) it ran a 1 GB heap out of memory at 100M rows
    (docs/scaling.md). A row per user is still coalesced, being small and broadcast."""
    df = spark.createDataFrame([(u, i, u * 100 + i) for u in range(1, 40) for i in range(1, 1 + u % 7)],
                               "user_id long, item_id long, row_key long")
    items = ItemDomain(ids=np.arange(1, 8), description="1..7", id_range=(1, 7))
    # AQE would merge such small partitions by itself; off, the partitions are the plan's own.
    settings = {"spark.sql.shuffle.partitions": "12", "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    with session_settings(spark, settings):
        with_sets = validation.validate_records(df, items, None, item_sets=True)
        without = validation.validate_records(df, items, None)
        try:
            assert with_sets.cached.rdd.getNumPartitions() == 12
            assert without.cached.rdd.getNumPartitions() == int(spark.conf.get("spark.default.parallelism"))
        finally:
            with_sets.cached.unpersist()
            without.cached.unpersist()


def test_a_domain_of_listed_ids_keeps_and_drops_what_column_isin_does(spark):
    """A domain that lists its ids (a catalogue with gaps) is checked by one SQL expression
    (sql_literals.in_id_list), not by Column.isin: the same rows are kept and dropped, text ids that
    read as numbers included, null and unusable ids dropped, ids past 2^31 compared whole."""
    big = 2**40
    ids = np.array([1, 3, 7, big], dtype=np.int64)
    items = ItemDomain(ids=ids, description="1, 3, 7, 2^40")
    rows = [(1, "1"), (1, " 3"), (2, "7.0"), (2, "2"), (3, str(big)), (3, str(big + 1)), (4, None), (4, "x"),
            (5, "-1"), (5, "7")]
    df = spark.createDataFrame(rows, "user_id long, item_id string")
    validated = validation.validate_records(df, items, None)
    try:
        kept = sorted(tuple(r) for r in validated.records.select("user_id", "item_id").collect())
        assert kept == [(1, 1), (1, 3), (2, 7), (3, big), (5, 7)]
        assert validated.diagnostics["rows_outside_item_domain"] == 5  # 2, 2^40 + 1, null, "x", -1
    finally:
        validated.release()
    # The expression itself against Column.isin, row by row (nulls stay null), and an empty list.
    numbers = spark.createDataFrame([(v,) for v in (1, 2, 3, 7, big, big + 1, -1, None)], "v long")
    found = numbers.select(sql_literals.in_id_list("v", ids).alias("mine"), F.col("v").isin(ids.tolist()).alias("isin"))
    assert all(r["mine"] == r["isin"] for r in found.collect())
    assert numbers.where(sql_literals.in_id_list("v", [])).count() == 0


def test_an_int_array_literal_is_the_array_of_lits(spark):
    """sql_literals.int_array: the values and the type that F.array of F.lit's gives (int, or bigint
    once a value needs it), in one expression."""
    for values in ([3, -1, 0, 7], [1, 2**40]):
        one = spark.range(1).select(sql_literals.int_array(values).alias("a"),
                                    F.array(*[F.lit(v) for v in values]).alias("b"))
        assert one.schema["a"].dataType == one.schema["b"].dataType
        row = one.first()
        assert row["a"] == row["b"] == values
