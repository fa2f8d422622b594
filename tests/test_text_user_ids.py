"""Text user ids (UUIDs, account keys) are the privacy unit as integer ids are: how validation reads
them, that a whole number written as text is that number's user, and that a job keyed by text ids
keeps every user. Every family's whole job on text ids: tests/test_observables_audit.py (its inputs
mix text and number ids); their sensitivity: tests/test_sensitivity.py."""

from __future__ import annotations

import uuid

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.bounding import keys
from dp_spark.errors import DataError
from dp_spark.io import validation


def test_text_ids_read_as_numbers_when_whole_and_as_trimmed_text_otherwise(spark):
    raw = ["42", " 042", "42.0", "+42", "u474 ", " u474", "4.5", "  ", None, "9223372036854775808"]
    df = spark.createDataFrame(pd.DataFrame({"user_id": raw}), "user_id string")
    bad, user = validation.user_values(df)
    got = [(r["user"], r["bad"]) for r in df.select(user.alias("user"), bad.alias("bad")).collect()]
    assert got == [("42", False), ("42", False), ("42", False), ("42", False), ("u474", False), ("u474", False),
                   ("4.5", False), (None, True), (None, False),  # a null is counted as a null, not as bad
                   ("9223372036854775808", False)]  # past a long: text, not a number (never wrapped)
    assert keys.text_user(df)


def test_a_user_column_of_another_type_is_refused_before_anything_runs(spark):
    df = spark.createDataFrame(pd.DataFrame({"user_id": [True, False], "item_id": [1, 2]}))
    with pytest.raises(DataError, match="column user_id has type boolean; user ids are integers or text"):
        dp_spark.sra(df, items=range(1, 3), l=1, epsilon=1, seed=1)


def _records(users: int = 400, seed: int = 8) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, users)
    return pd.DataFrame({"user_id": np.repeat(np.arange(1, users + 1), sizes),
                         "item_id": rng.integers(1, 31, int(sizes.sum()))})


def _sra(spark, frame: pd.DataFrame, schema: str):
    release = dp_spark.sra(spark.createDataFrame(frame, schema), items=range(1, 31), l=3, epsilon=1, seed=5)
    return release.tables["item_counts"].sort_values("item_id").reset_index(drop=True), release.diagnostics


def test_number_ids_written_as_text_give_the_release_of_the_numbers(spark):
    """A CSV's ids are text: "7", "07" and " 7.0" must be the user 7 of a Parquet column, with the
    same sampling keys, so the same records give the same seeded release however they were stored."""
    records = _records()
    as_numbers, _ = _sra(spark, records, "user_id long, item_id long")
    spellings = ["{}", "0{}", " {}.0", "+{} "]  # a user's spelling, the same in each of its records
    texts = [spellings[u % 4].format(u) for u in records["user_id"]]
    as_text, _ = _sra(spark, records.assign(user_id=texts), "user_id string, item_id long")
    pd.testing.assert_frame_equal(as_numbers, as_text)


def test_a_job_keyed_by_uuids_keeps_every_user(spark):
    """UUID user ids: no row is dropped as an invalid id, every user counts, and bounding keeps
    min(n, l) records of each (the NOT private coverage, for the operator)."""
    records = _records()
    ids = {u: str(uuid.UUID(int=int(u) * 7919)) for u in records["user_id"].unique()}
    _table, diagnostics = _sra(spark, records.assign(user_id=records["user_id"].map(ids)),
                               "user_id string, item_id long")
    coverage = diagnostics["coverage"]
    per_user = records.groupby("user_id").size()
    assert coverage["rows_read"] == len(records) and coverage["users"] == len(per_user)
    assert coverage["rows_kept_by_bounding"] == int(np.minimum(per_user, 3).sum())
