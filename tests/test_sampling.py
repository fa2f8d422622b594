"""HPA's lookup of each row's item score: the array literal and the join agree, and the array's
values reach Spark's generated code by reference. HPA with its popularity sample drawn in
validation releases what it releases without."""

from fractions import Fraction

import numpy as np
from chispa import assert_df_equality

from dp_spark.bounding import keys
from dp_spark.core.domain import AttributeDomain, ItemDomain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.counts import sampling
from dp_spark.io import datasets, validation
from dp_spark.release import hpa_selection
from tests.codegen import generated_code


def _domains(low: int, high: int):
    ids = np.arange(low, high + 1, dtype=np.int64)
    return (ItemDomain(ids=ids, description="range", id_range=(low, high)),
            ItemDomain(ids=ids, description="the same ids, as a list"))


def _records(spark, item_ids):
    return spark.createDataFrame([(k % 7, int(i), k) for k, i in enumerate(item_ids)],
                                 "user_id long, item_id long, row_key long")


def test_the_array_lookup_gives_what_the_join_gives(spark):
    rng = np.random.default_rng(4)
    as_range, as_list = _domains(-3, 40)  # a negative low end checks the offset
    values = rng.integers(0, 1000, size=len(as_range))
    df = _records(spark, rng.integers(-3, 41, size=300))
    by_array = hpa_selection.with_item_values(df, as_range, values, "_value")
    by_join = hpa_selection.with_item_values(df, as_list, values, "_value")
    assert "Join" not in by_array._jdf.queryExecution().optimizedPlan().toString()
    assert_df_equality(by_array, by_join.select(*by_array.columns), ignore_row_order=True)
    got = {(r["item_id"], r["_value"]) for r in by_array.collect()}
    assert got == {(int(i), int(values[i + 3])) for i in df.toPandas()["item_id"]}


def test_new_values_reuse_the_generated_code(spark):
    as_range, _ = _domains(1, 50)
    df = _records(spark, range(1, 51))
    first, second = (generated_code(hpa_selection.with_item_values(df, as_range, values, "_value"))
                     for values in (np.arange(50), np.arange(50)[::-1] * 3 + 7))
    assert "/* literal */).getLong(" in first and first == second


def test_hpa_with_the_validation_sample_releases_what_it_releases_without(spark, tmp_path):
    # d = 1: the popularity sample drawn in validation's pass, under the salt the sampler takes
    # from the seed, is the sampler's own, so a seeded release is the same to the last count.
    data = str(tmp_path / "netflix.parquet")
    datasets.generate_netflix(20_000, data, progress=lambda _message: None)
    items = ItemDomain(ids=np.arange(1, datasets.NETFLIX_ITEMS + 1), description="range",
                       id_range=(1, datasets.NETFLIX_ITEMS))
    attributes = AttributeDomain(tuple(datasets.WEEKDAYS))
    raw = keys.with_row_key(datasets.LOADERS["netflix-synthetic"](spark, data), distinct=True)
    seed = 9
    validated = validation.validate_records(raw, items, attributes,
                                    one_per_user_salt=keys.sample_salt(seed))
    split = sampling.default_split("hpa", Fraction(1), True)
    try:
        releases = []
        for one_per_user in (validated.one_per_user, None):
            release = sampling.hpa(validated.records, items, attributes, 10, 1, split, Budget(Fraction(1)),
                                   RandomSource(seed), seed=seed, user_counts=validated.user_counts,
                                   users_by_n=validated.users_by_n, one_per_user=one_per_user)
            releases.append(release)
    finally:
        validated.release()
    with_sample, without = releases
    assert with_sample.diagnostics == without.diagnostics
    assert with_sample.diagnostics["rows_in_popularity_sample"] == validated.users_by_n.sum()
    np.testing.assert_array_equal(with_sample.item_counts, without.item_counts)
    np.testing.assert_array_equal(with_sample.edge_counts, without.edge_counts)
