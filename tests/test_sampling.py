"""HPA's lookup of each row's item score: the array literal and the join agree, and the array's
values reach Spark's generated code by reference."""

import numpy as np
from chispa import assert_df_equality

from dp_spark.algorithms import sampling
from dp_spark.domain import ItemDomain
from tests.codegen import generated_code


def _domains(low: int, high: int):
    ids = np.arange(low, high + 1, dtype=np.int64)
    return (ItemDomain(ids=ids, description="range", id_range=(low, high)),
            ItemDomain(ids=ids, description="the same ids, as a list"))


def _records(spark, item_ids):
    return spark.createDataFrame([(k % 7, int(i), k) for k, i in enumerate(item_ids)],
                                 "user_id long, item_id long, record_id long")


def test_the_array_lookup_gives_what_the_join_gives(spark):
    rng = np.random.default_rng(4)
    as_range, as_list = _domains(-3, 40)  # a negative low end checks the offset
    values = rng.integers(0, 1000, size=len(as_range))
    df = _records(spark, rng.integers(-3, 41, size=300))
    by_array = sampling.with_item_values(df, as_range, values, "_value")
    by_join = sampling.with_item_values(df, as_list, values, "_value")
    assert "Join" not in by_array._jdf.queryExecution().optimizedPlan().toString()
    assert_df_equality(by_array, by_join.select(*by_array.columns), ignore_row_order=True)
    got = {(r["item_id"], r["_value"]) for r in by_array.collect()}
    assert got == {(int(i), int(values[i + 3])) for i in df.toPandas()["item_id"]}


def test_new_values_reuse_the_generated_code(spark):
    as_range, _ = _domains(1, 50)
    df = _records(spark, range(1, 51))
    first, second = (generated_code(sampling.with_item_values(df, as_range, values, "_value"))
                     for values in (np.arange(50), np.arange(50)[::-1] * 3 + 7))
    assert "/* literal */).getLong(" in first and first == second
