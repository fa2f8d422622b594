"""validate_records: per-user counts of in-domain rows, reused by bounding, and released."""

import numpy as np
from chispa import assert_df_equality
from pyspark.sql import functions as F

from dp_spark import bounding, io
from dp_spark.domain import AttributeDomain, ItemDomain


def test_user_counts_count_in_domain_rows_and_match_a_recount(spark):
    rows = [(u, i, "a" if i % 3 else "zz", u * 100 + i) for u in range(1, 40) for i in range(u % 7 + 1)]
    rows += [(99, 5000, "a", 99_000)]  # this user's only row is outside the item domain
    df = spark.createDataFrame(rows, "user_id long, item_id long, attr string, record_id long")
    items = ItemDomain(ids=np.arange(0, 10), description="0..9", id_range=(0, 9))
    validated = io.validate_records(df, items, AttributeDomain(("a",)))
    try:
        expected = bounding.user_counts(validated.records)
        assert_df_equality(validated.user_counts, expected, ignore_row_order=True, ignore_nullable=True)
        assert validated.user_counts.where(F.col("user_id") == 99).count() == 0
        recount = expected.groupBy("_n").count().toPandas()
        assert validated.users_by_n.to_dict() == dict(zip(recount["_n"], recount["count"]))
        assert validated.diagnostics["rows_outside_item_domain"] == 1
        assert validated.diagnostics["rows_outside_attribute_domain"] == sum(1 for r in rows if r[2] != "a")
        # Passing the counts changes nothing in the sample.
        with_counts = bounding.sample_per_user(validated.records, 2, seed=4, counts=validated.user_counts)
        without = bounding.sample_per_user(validated.records, 2, seed=4)
        assert_df_equality(with_counts, without, ignore_row_order=True)
        assert validated.cached.is_cached
    finally:
        validated.release()
    assert not validated.cached.is_cached
