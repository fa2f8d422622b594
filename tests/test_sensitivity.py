"""The sensitivity audit (dp_spark.lab.sensitivity) in CI, and the one-added-user reproduction of
the scan-position key's break through the public API: with the seed known, adding one user moves each keyed bounding
path's pre-noise aggregates by at most the sensitivity its noise is scaled to, wherever that
user's records lie in the scan and whatever duplicates anyone holds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.lab import sensitivity as sens
from dp_spark.lab import sensitivity_groups

ODD_IDS = (-5, 2**62)  # the added user's id: negative, near the top of a long


@pytest.fixture(scope="module")
def on_table(spark):
    """Each family's aggregates on D = sens.table() (number ids, not declared distinct), computed
    once in this module: the test of every family and the negative controls that start from the
    same D and the same code (nothing patched) compare their D′ with them."""
    found: dict[str, np.ndarray] = {}

    def on_d(family: sens.Family) -> np.ndarray:
        if family.name not in found:
            found[family.name] = sens.aggregate_on(spark, family, sens.table())
        return found[family.name]

    return on_d


@pytest.mark.parametrize("family", sens.FAMILIES, ids=lambda f: f.name)
def test_one_added_user_moves_every_family_within_its_sensitivity(spark, on_table, family):
    extras = [sens.added_user(user_id) for user_id in ODD_IDS]
    for move in sens.moves(spark, family, sens.table(), extras, on_d=on_table(family)):
        assert move.within(family), move


@pytest.mark.parametrize("family", [f for f in sens.FAMILIES if f.name in ("sra", "frapp_sample")],
                         ids=lambda f: f.name)
def test_the_distinct_path_is_within_the_sensitivity_too(spark, family):
    """Records declared distinct skip the occurrence index: on distinct data, and on data that
    breaks the declaration (identical records then share a key), one user still moves at most
    the sensitivity."""
    for duplicates in (False, True):
        base = sens.table(duplicates=duplicates)
        for move in sens.moves(spark, family, base, [sens.added_user(7_000, duplicates)], distinct=True):
            assert move.within(family), (duplicates, move)


def test_the_audit_catches_a_key_that_hashes_the_scan_position(spark, monkeypatch):
    """Negative control: the old row key, the row's position in the scan, lets the added user
    shift every later user's sample, and the audit sees it."""
    from pyspark.sql import functions as F

    from dp_spark.bounding import keys

    def scan_position_key(df, user_col="user_id", distinct=False):
        return df.withColumn(keys.ROW_KEY, F.monotonically_increasing_id())

    monkeypatch.setattr(keys, "with_row_key", scan_position_key)
    family = next(f for f in sens.FAMILIES if f.name == "sra")
    # The user added first in the scan is the case the assertion reads (it shifts every later row).
    found = sens.moves(spark, family, sens.table(), [sens.added_user(-5)], layouts=("first",))
    first = next(m for m in found if m.layout == "first")
    assert not first.within(family) and first.l1 > 5 * family.l1


def test_the_audit_catches_an_aggregation_that_keeps_one_group_too_many(spark, on_table, monkeypatch):
    """Negative control of the aggregate family's path: a release that kept l + 1 groups per user,
    audited at l, is seen: the added user has two records in each of five groups, so it moves the
    records and users by (l + 1)·(C + 1) = 12 against the l·(C + 1) = 9 allowed."""
    family = next(f for f in sens.FAMILIES if f.name == "groups_per_user")
    heavy = sens.added_user(-5, duplicates=False).assign(item_id=[1, 1, 2, 2, 3, 3, 4, 4, 5, 5])
    assert all(m.within(family) for m in sens.moves(spark, family, sens.table(), [heavy], layouts=("first",),
                                                    on_d=on_table(family)))
    monkeypatch.setattr(sensitivity_groups, "BOUND", sens.BOUND + 1)  # from here D is aggregated anew, at l + 1
    found = sens.moves(spark, family, sens.table(), [heavy], layouts=("first",))
    assert not any(m.within(family) for m in found) and found[0].l1 == 12


def test_the_audit_catches_a_guard_on_raw_row_counts(spark, on_table):
    """Negative control: the first guard compared the raw rows outside the domain with the rows read.
    One user moves that count by as many rows as it holds outside the domain, not by one."""
    from pyspark.sql import functions as F

    def rows_outside(df, distinct):
        outside = ~F.col("item_id").between(*sens.GUARD_DOMAIN.id_range)
        return np.array([df.where(outside).count()], dtype=np.int64)

    family = sens.Family("rows outside the domain", rows_outside, 1)
    found = sens.moves(spark, family, sens.table(), [sens.added_user(-5).assign(item_id=12)])
    assert not any(m.within(family) for m in found) and found[0].l1 == 10  # all ten of its records
    guarded = next(f for f in sens.FAMILIES if f.name == "guard_figures")  # the same user, in the guards' figures
    heavy_outside = [sens.added_user(-5).assign(item_id=12)]
    assert all(m.within(guarded) for m in sens.moves(spark, guarded, sens.table(), heavy_outside,
                                                     on_d=on_table(guarded)))


def test_a_user_with_malformed_ids_moves_the_guards_within_their_sensitivity(spark):
    """Rows with a null or blank user id, or a null or non-integer item id, belong to no user or no
    item and are dropped: a D′ that adds them (spread through the table) moves nothing the guards
    count by more than SHARE_GRID."""
    base = sens.table().astype({"user_id": "object", "item_id": "object"})
    extra = sens.added_user(9_999).astype({"user_id": "object", "item_id": "object"})
    extra.loc[[0, 1, 2], "user_id"] = [None, " ", "   "]
    extra.loc[[3, 4], "item_id"] = [None, "seven"]
    strings = [frame.astype(str).replace("None", None) for frame in (base, extra)]
    family = next(f for f in sens.FAMILIES if f.name == "guard_figures")
    as_text = "user_id string, item_id string, attr string"
    for move in sens.moves(spark, family, strings[0], [strings[1]], schema=as_text):
        assert move.within(family), move


def text_ids(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with text user ids as a warehouse holds them: "u7" for odd users, " 08" (a whole
    number, with a space and a leading zero) for even ones."""
    return rows.assign(user_id=[f"u{u}" if u % 2 else f" 0{u}" for u in rows["user_id"]])


# The families whose users are keyed by code of their own; the others cap or sum what one of these
# keeps (sra_capped, sra_items and gs_one_record: sra's sample; groups_per_user_values: the groups';
# means_capped and means_on_executors: the means'; dpsense_normalized: dpsense's rows;
# entropy_guard_figures: the guards'), and are audited on text ids through it.
TEXT_ID_FAMILIES = ("sra", "hpa_popularity", "hpa_top", "hpa_top_capped", "partition_keys", "dpsense_sampled",
                    "entropy_random", "entropy_first_visits", "frapp_sample", "groups_per_user", "means_sums",
                    "means_clip_ranks", "user_histogram", "guard_figures")


def test_the_text_id_families_are_families():
    assert set(TEXT_ID_FAMILIES) <= {f.name for f in sens.FAMILIES}


@pytest.mark.parametrize("family", [f for f in sens.FAMILIES if f.name in TEXT_ID_FAMILIES], ids=lambda f: f.name)
def test_text_user_ids_move_every_family_within_its_sensitivity(spark, family):
    """Text user ids are the privacy unit as numbers are: on a table of text ids, some of which read
    as numbers, one added user (a UUID) moves every family within its sensitivity. Two layouts (the
    test above tries every layout on number ids): spread among the others' records, and reshuffled."""
    extras = [sens.added_user(0).assign(user_id="6f1c2a7e-0b3d-4e59-9a51-2d8f0c4b7e13")]
    for move in sens.moves(spark, family, text_ids(sens.table()), extras, schema=TEXT_SCHEMA,
                           layouts=("spread", "reshuffled")):
        assert move.within(family), move


TEXT_SCHEMA = "user_id string, item_id long, attr string"


def _ratings(users: int = 300, per_user: int = 10, items: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(39)
    return pd.DataFrame([(u, int(i)) for u in range(1, users + 1)
                         for i in rng.choice(np.arange(1, items + 1), size=per_user, replace=False)],
                        columns=["user_id", "item_id"])


@pytest.mark.parametrize("distinct_records", [False, True])
def test_a_user_whose_record_comes_first_moves_sra_by_at_most_l(spark, distinct_records):
    """A break a review found, reproduced: 300 users x 10 records, l = 2, seeded so both sides draw the same
    noise; D′ adds a user whose single record is the first row of the table. The released counts
    may differ by that user's one kept record; under the scan-position key they moved by L1 = 167."""
    d = _ratings()
    d2 = pd.concat([pd.DataFrame({"user_id": [10_000], "item_id": [3]}), d], ignore_index=True)
    common = dict(items=range(1, 41), l=2, epsilon=1.0, seed=2024, distinct_records=distinct_records)
    on_d = dp_spark.sra(spark.createDataFrame(d).coalesce(1), **common).tables["item_counts"]["noisy_count"]
    on_d2 = dp_spark.sra(spark.createDataFrame(d2).coalesce(1), **common).tables["item_counts"]["noisy_count"]
    assert int(np.abs(on_d2.to_numpy() - on_d.to_numpy()).sum()) <= 1


def test_without_the_cap_one_user_moves_the_item_counts_by_l_in_l2(spark, on_table):
    """Negative control of the per-item cap: an added user whose four records are all of item 1
    keeps three of them (l = 3), which move that item's count by 3: a squared L2 of 9 = l², which
    the capped paths' bound l·c = 3 would refuse."""
    one_item = pd.DataFrame([(8_000, 1, attr) for attr in ("a", "b", "c", "a")], columns=["user_id", "item_id", "attr"])
    items = next(f for f in sens.FAMILIES if f.name == "sra_items")
    moved = sens.moves(spark, items, sens.table(), [one_item], on_d=on_table(items))
    assert max(move.l2_squared for move in moved) > sens.BOUND
    capped = sens.Family("capped bound", sens.sra_items, sens.BOUND, l2_squared=sens.BOUND)
    assert not all(move.within(capped) for move in moved)


def test_the_audit_catches_a_range_choice_that_reads_every_value_of_a_user(spark, monkeypatch):
    """Negative control of the aggregation's range choice: ranks counted over every grouped value of
    a user, not one, move by the added user's records (a count by several, beyond L∞ 1)."""
    from pyspark.sql import functions as F

    from dp_spark.families.aggregate import range_choice

    family = next(f for f in sens.FAMILIES if f.name == "groups_value_ranks")
    monkeypatch.setattr(range_choice, "one_value_per_user", lambda grouped, group, value, salt, user_col="user_id":
                        grouped.select(user_col, F.col(value).alias(range_choice.SAMPLED)))
    found = sens.moves(spark, family, sens.table(), [sens.added_user(-5, duplicates=False)], layouts=("first",))
    assert not any(m.within(family) for m in found) and found[0].linf > 1
