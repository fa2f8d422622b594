"""Per-user bounding: uniform, bounded, exact, and the same on every run with a seed."""

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from chispa import assert_df_equality
from pyspark.sql import Window
from pyspark.sql import functions as F

from dp_spark.bounding import keys, user_records
from dp_spark.bounding.cutoffs import long_array, min_score, score_cutoffs, score_thresholds
from tests.codegen import generated_code
from tests.stats import chi2_critical, chi2_statistic


def records(spark, rows_per_user: dict[int, int]):
    rows = [(u, i, u * 1000 + i) for u, n in rows_per_user.items() for i in range(n)]
    return spark.createDataFrame(rows, "user_id long, item_id long, row_key long")


# 60 users of 10 to 423 rows: the prefilter's and the fast count's tests share it.
STAIRCASE = {u: 10 + 7 * u for u in range(60)}


@pytest.fixture(scope="module")
def staircase(spark):
    """records(STAIRCASE), cached: each selection reads its records several times, and a frame made
    from local rows is rebuilt in Python at each read."""
    frame = records(spark, STAIRCASE).cache()
    yield frame
    frame.unpersist()


@pytest.fixture
def cache():
    """Caches the frames a test reads several times (as ``staircase``), and drops them after it."""
    frames = []

    def cached(frame):
        frames.append(frame.cache())
        return frame

    yield cached
    for frame in frames:
        frame.unpersist()


def per_user_positions(sample):
    return sample.select("user_id", "item_id").toPandas()


def test_each_position_is_picked_with_frequency_l_over_n(spark):
    users, n, l = 2000, 20, 5
    sample = per_user_positions(user_records.sample_per_user(records(spark, {u: n for u in range(users)}), l, seed=1))
    assert (sample.groupby("user_id").size() == l).all()
    picks = np.bincount(sample["item_id"], minlength=n)
    # Each position ~ Binomial(2000, 1/4): expected 500 picks each; chi-square over 20 positions.
    assert chi2_statistic(picks, np.full(n, users * l / n)) < chi2_critical(n - 1)


def test_a_fresh_salt_reuses_the_generated_code(spark):
    """The salt reaches Spark's generated code by reference, not written into it, so a run with a
    new salt reuses the code compiled for the last one (docs/lab/performance.md, fifth round)."""
    df = records(spark, {1: 5, 2: 9})
    first, second = (
        generated_code(user_records.sample_selection(df, 3, salt=salt).candidates) for salt in (1, 2**62 + 7)
    )
    assert "XXH64" in first and first == second


def test_light_users_keep_everything_and_nobody_exceeds_l(spark):
    sizes = {1: 1, 2: 3, 3: 4, 4: 5, 5: 50, 6: 400}
    df = records(spark, sizes)
    sample = user_records.sample_per_user(df, 4, seed=2)
    light = df.where(F.col("user_id") <= 3)
    assert_df_equality(sample.where(F.col("user_id") <= 3), light, ignore_row_order=True)
    counts = dict(sample.groupBy("user_id").count().collect())
    assert counts == {1: 1, 2: 3, 3: 4, 4: 4, 5: 4, 6: 4}


def test_same_seed_same_sample_whatever_the_partitioning(spark, cache):
    df = cache(records(spark, {u: 30 for u in range(50)}))
    first = user_records.sample_per_user(df, 3, seed=7)
    again = user_records.sample_per_user(df.repartition(7, "item_id"), 3, seed=7)
    assert_df_equality(first, again, ignore_row_order=True)
    other = user_records.sample_per_user(df, 3, seed=8)
    assert set(map(tuple, first.collect())) != set(map(tuple, other.collect()))


@pytest.mark.parametrize("oversample", [6.0, 0.0, -1.5])
def test_prefilter_never_changes_the_result(staircase, oversample):
    """The sample is exactly each user's l smallest keys, also when the
    pre-filter leaves users short (oversample = 0 makes that happen to about
    half of them, exercising the exact fallback) or with no candidate at all
    (-1.5 keeps under one row per user on average)."""
    df = staircase
    l, salt = 8, 12345
    got = user_records.sample_per_user(df, l, salt=salt, oversample=oversample)
    ranked = keys.with_salt(df, salt).withColumn("_position", keys.row_position(df, "user_id")).withColumn(
        "_rank", F.row_number().over(Window.partitionBy("user_id").orderBy("_position"))
    )
    brute = ranked.where(F.col("_rank") <= l).select(df.columns)
    assert_df_equality(got, brute, ignore_row_order=True)


def item_histogram(rows, size=600):
    """Rows per item_id as an array."""
    return tally_histogram(rows.groupBy(F.col("item_id").alias("_key")).count().toPandas(), size)


def tally_histogram(tally, size=600):
    """A tally by item_id (Selection.counted) as an array."""
    counts = np.zeros(size, dtype=np.int64)
    np.add.at(counts, tally["_key"].to_numpy(), tally["count"].to_numpy())
    return counts


@pytest.mark.parametrize("known_users_by_n", [False, True])
@pytest.mark.parametrize("oversample", [6.0, 0.0, -1.5])
def test_counted_equals_the_count_of_the_exact_rows(staircase, oversample, known_users_by_n):
    """The fast path counts the candidates' selection and checks its total (from a job, or
    from the users per row count); with oversample 0 or -1.5 users fall short, and only the
    fallback gets it right."""
    rows_per_user, df = STAIRCASE, staircase
    options = {}
    if known_users_by_n:
        options = {"counts": user_records.user_counts(df), "users_by_n": pd.Series(Counter(rows_per_user.values()))}
    selection = user_records.sample_selection(df, 8, salt=12345, oversample=oversample, **options)
    exact = item_histogram(selection.rows())
    assert exact.sum() == sum(min(8, n) for n in rows_per_user.values())
    assert np.array_equal(tally_histogram(selection.counted(F.col("item_id"))), exact)


def test_capped_total_is_the_sum_over_users_of_min_n_l():
    rows_per_user = np.random.default_rng(5).integers(1, 50, size=300)
    users_by_n = pd.Series(Counter(rows_per_user.tolist()))
    for l in (1, 7, 49, 60):
        assert user_records.capped_total(users_by_n, l) == int(np.minimum(rows_per_user, l).sum())


def test_users_by_n_needs_the_counts_it_describes(spark):
    df = records(spark, {1: 3})
    with pytest.raises(ValueError, match="users_by_n"):
        user_records.sample_selection(df, 2, seed=1, users_by_n=pd.Series({3: 1}))


def test_top_per_user_keeps_highest_scores_and_breaks_ties_at_random(spark):
    # Every user: 2 rows of score 5, 8 rows of score 1; keep 3 -> both 5s plus one random 1.
    users = 1600
    rows = [(u, i, u * 100 + i, 5 if i < 2 else 1) for u in range(users) for i in range(10)]
    df = spark.createDataFrame(rows, "user_id long, item_id long, row_key long, score long")
    kept = user_records.top_per_user(df, 3, "score", seed=3).toPandas()
    assert (kept.groupby("user_id").size() == 3).all()
    assert (kept.groupby("user_id")["score"].sum() == 11).all()
    tie_picks = np.bincount(kept.loc[kept.score == 1, "item_id"] - 2, minlength=8)
    assert chi2_statistic(tie_picks, np.full(8, users / 8)) < chi2_critical(7)


def test_l_must_be_positive(spark):
    with pytest.raises(ValueError):
        user_records.sample_per_user(records(spark, {1: 2}), 0)


def test_score_thresholds_are_the_scores_at_ranks_l_2l_4l():
    scores = list(range(100, 0, -1))  # rank r has score 101 - r
    assert score_thresholds(scores, 5) == [96, 91, 81, 61, 21]
    # Ties collapse to one strictly decreasing list; too few scores give none.
    assert score_thresholds([7] * 40 + [3] * 40, 5) == [7, 3]
    assert score_thresholds([4, 2], 5) == []


def test_score_cutoffs_follow_the_expected_distinct_items():
    scores = np.arange(100, 0, -1)  # rank r has score 101 - r
    cutoffs = score_cutoffs(scores, 5)
    need = 5 + 6 * (np.sqrt(5) + 2)
    weights = scores / scores.sum()
    for min_rows, level in cutoffs:
        above = weights[scores >= level]
        at, below = (np.sum(1 - (1 - above) ** n) for n in (min_rows, min_rows - 1))
        assert at >= need > below
    # Levels of fewer than `need` items can never be filled, and are left out.
    assert [level for _, level in cutoffs] == [61, 21]
    assert cutoffs[0][0] > cutoffs[1][0]  # fewer rows reach the lower level
    assert score_cutoffs([], 5) == []


def test_cutoffs_never_change_top_per_user(spark, cache):
    """Users of every size (1 to 120 rows), scores with many ties, and users who
    rate only low-scored items (short of the cutoff, so redone from all of
    their rows): the pre-filtered selection equals the selection over all rows."""
    rng = np.random.default_rng(5)
    item_scores = rng.integers(0, 25, size=300)
    low_items = np.flatnonzero(item_scores < 5)
    sizes = {u: 1 + (u * 3) % 120 for u in range(80)}
    rows = [(u, int(i), u * 1000 + k, int(item_scores[i]))
            for u in range(80) for k, i in enumerate(rng.choice(300, size=sizes[u], replace=False))]
    for u in range(80, 90):  # niche users: many rows, all of low score
        sizes[u] = len(low_items)
        rows += [(u, int(i), u * 1000 + k, int(item_scores[i])) for k, i in enumerate(low_items)]
    df = cache(spark.createDataFrame(rows, "user_id long, item_id long, row_key long, score long"))
    l = 6
    cutoffs = score_cutoffs(item_scores, l)
    assert len(cutoffs) >= 3 and min(sizes.values()) < cutoffs[-1][0] <= max(sizes.values())
    assert all(sizes[u] >= cutoffs[-1][0] for u in range(80, 90))
    plain = user_records.top_per_user(df, l, "score", salt=99)
    filtered = user_records.top_selection(df, l, "score", salt=99, cutoffs=cutoffs)
    assert_df_equality(filtered.rows(), plain, ignore_row_order=True)
    # The niche users are short of their cutoff, so the fast count must notice and redo.
    assert np.array_equal(tally_histogram(filtered.counted(F.col("item_id")), 300), item_histogram(plain, 300))
    assert plain.count() == sum(min(l, n) for n in sizes.values())


def test_each_user_gets_the_first_cutoff_its_row_count_reaches(spark):
    cutoffs = [(100, 50), (40, 30), (10, 20)]
    l = 5
    ns = spark.createDataFrame([(n,) for n in range(1, 151)], "_n long")
    got = dict(ns.select("_n", min_score(F.col("_n"), l, cutoffs).alias("s")).collect())

    def first_reached(n):
        if n <= l:
            return None
        return next((score for min_rows, score in cutoffs if n >= min_rows), None)

    assert got == {n: first_reached(n) for n in range(1, 151)}
    assert got[9] is None and got[10] == 20 and got[39] == 20 and got[40] == 30 and got[100] == 50
    # The lookup relies on the row counts falling as the scores do; other cutoffs are refused.
    df = records(spark, {1: 3})
    with pytest.raises(ValueError, match="strictly decreasing"):
        user_records.top_selection(df.withColumn("score", F.lit(1)), 2, "score", salt=1, cutoffs=[(10, 5), (40, 3)])


def test_new_cutoffs_reuse_the_generated_code(spark):
    """Each run's cutoffs reach Spark's generated code by reference (docs/lab/performance.md, sixth
    round): selections with different cutoffs, even a different number of them, share their code."""
    df = spark.createDataFrame([(u, i, u * 100 + i, i % 7) for u in range(5) for i in range(20)],
                               "user_id long, item_id long, row_key long, score long")
    codes = [generated_code(user_records.top_selection(df, 3, "score", salt=5, cutoffs=cutoffs).candidates)
             for cutoffs in ([(12, 6), (8, 4)], [(15, 5), (9, 3), (4, 1)])]
    # Three stages: the row counts, the per-user cutoffs and the candidates' scan.
    assert "GeneratedIteratorForCodegenStage3" in codes[0] and codes[0] == codes[1]


def test_equal_scores_are_ordered_by_the_whole_position(spark):
    """HPA's order is (−score, position) with all 64 bits of the position: two rows of equal score
    whose positions differ only in their low bits do not tie (the long that packed the score with
    the position's top bits tied them, and Spark kept whichever row it met first)."""
    from dp_spark.bounding.cutoffs import best_first

    rows = [(5, 2**40 + 1), (5, 2**40), (7, 2**62), (5, -(2**40))]
    df = spark.createDataFrame(rows, "score long, position long")
    ordered = df.select("score", "position", best_first(F.col("score"), F.col("position")).alias("o")) \
        .orderBy("o").collect()
    assert [(r["score"], r["position"]) for r in ordered] == [(7, 2**62), (5, -(2**40)), (5, 2**40), (5, 2**40 + 1)]
    assert len({tuple(r["o"]) for r in ordered}) == len(rows)


def test_the_top_selection_does_not_depend_on_how_the_rows_are_read(spark):
    rng = np.random.default_rng(8)
    rows = [(u, i, u * 1000 + i, int(rng.integers(0, 4))) for u in range(300) for i in range(int(rng.integers(1, 40)))]
    df = spark.createDataFrame(rows, "user_id long, item_id long, row_key long, score long")
    reread = spark.createDataFrame(rows[::-1], "user_id long, item_id long, row_key long, score long").repartition(7)
    assert_df_equality(user_records.top_per_user(df, 6, "score", salt=11),
                       user_records.top_per_user(reread, 6, "score", salt=11), ignore_row_order=True)


def test_the_exact_count_keeps_large_ids_and_keys_whole(spark, cache):
    """The one-job exact count (HPA's selection) lists short users by id and tallies long
    keys; ids 0 and 2^62 + 1 and keys above 2^53 must come back exactly, not as doubles. User 0
    rates only unscored items, so it has no candidate at all; user 2^62 + 1 has two of them."""
    big = 2**62 + 1
    item_scores = {i: (100 - i if i < 20 else 0) for i in range(60)}
    rows_of = {0: list(range(40, 60)), big: [0, 1] + list(range(30, 58)), 7: list(range(0, 40))}
    rows = [(u, i, k, item_scores[i]) for u, items in rows_of.items() for k, i in enumerate(items)]
    df = cache(spark.createDataFrame(rows, "user_id long, item_id long, row_key long, score long"))
    l = 4
    cutoffs = [(10, 98)]  # users with 10 rows or more send only items 0, 1 and 2
    key = F.col("item_id") + F.lit(2**60)
    filtered = user_records.top_selection(df, l, "score", salt=3, cutoffs=cutoffs)
    plain = user_records.top_per_user(df, l, "score", salt=3)
    assert filtered.candidates.where(F.col("user_id") == 0).count() == 0
    tally = filtered.counted(key)
    assert tally["_key"].dtype == np.int64
    got = Counter()
    for k, c in zip(tally["_key"], tally["count"]):
        got[int(k)] += int(c)
    expected = Counter(int(r["item_id"]) + 2**60 for r in plain.collect())
    assert got == expected and sum(got.values()) == 3 * l


@pytest.mark.parametrize("known_users_by_n", [False, True])
@pytest.mark.parametrize("with_user_without_candidates", [False, True])
def test_the_exact_count_joins_the_row_counts_only_for_a_user_without_candidates(
        spark, cache, monkeypatch, known_users_by_n, with_user_without_candidates):
    """HPA's count finds the users short of their cutoff in the selection itself. A user with no
    candidate at all is not in it; the totals give it away, and only then is every user's row
    count joined in and tallied again. Either way the count is exact."""
    item_scores = {i: (100 - i if i < 20 else 0) for i in range(60)}
    rows_of = {5: [0, 1] + list(range(30, 58)), 7: list(range(0, 40)), 9: list(range(3))}
    if with_user_without_candidates:
        rows_of[0] = list(range(40, 60))
    rows = [(u, i, k, item_scores[i]) for u, items in rows_of.items() for k, i in enumerate(items)]
    df = cache(spark.createDataFrame(rows, "user_id long, item_id long, row_key long, score long"))
    options = {"counts": user_records.user_counts(df)}
    if known_users_by_n:
        options["users_by_n"] = pd.Series(Counter(len(items) for items in rows_of.values()))
    tallies = []
    tally_and_short = user_records.Selection._complete_tally_and_short_users

    def spy(self, picked, *tally):
        tallies.append(picked)
        return tally_and_short(self, picked, *tally)

    monkeypatch.setattr(user_records.Selection, "_complete_tally_and_short_users", spy)
    l = 4
    filtered = user_records.top_selection(df, l, "score", salt=3, cutoffs=[(10, 98)], **options)
    tally = filtered.counted(F.col("item_id"))
    assert len(tallies) == (2 if with_user_without_candidates else 1)
    plain = user_records.top_per_user(df, l, "score", salt=3)
    assert np.array_equal(tally_histogram(tally, 60), item_histogram(plain, 60))
    assert int(tally["count"].sum()) == sum(min(l, len(items)) for items in rows_of.values())


def test_a_long_array_literal_keeps_every_value_exactly(spark):
    """The array goes to Spark as text: extreme longs must come back whole, and no values as an
    empty array (not as one null)."""
    values = [-(2**63), -7, 0, 2**53 + 1, 2**63 - 1]
    row = spark.range(1).select(long_array(values).alias("a"), long_array([]).alias("e")).first()
    assert row["a"] == values and row["e"] == []


@pytest.fixture(scope="module")
def three_a_one_b(spark):
    """4,000 users, each holding item A three times and item B once (cached: four samples read it)."""
    rows = pd.DataFrame([(u, item) for u in range(4_000) for item in ("A", "A", "A", "B")],
                        columns=["user_id", "item_id"])
    frame = spark.createDataFrame(rows).cache()
    yield frame
    frame.unpersist()


@pytest.mark.parametrize("l, expected", [(1, {"A": 0.75, "B": 0.25}), (2, {"AA": 0.5, "AB": 0.5})])
def test_identical_records_are_sampled_as_records_of_their_own(three_a_one_b, l, expected):
    """Each user holds item A three times and item B once. A uniform sample of l of the 4 records
    keeps A with probability 3/4 at l = 1, and AA and AB with 1/2 each at l = 2 (of the 6 pairs, 3
    are two copies of A). 4,000 users, each with its own keys: each frequency within four
    standard errors (at most 0.032). Negative control: the block sampler of records declared
    distinct keeps A at l = 1 with probability 1/2 and is caught."""
    users, df = 4_000, three_a_one_b

    def frequencies(distinct: bool) -> dict[str, float]:
        kept = user_records.sample_per_user(keys.with_row_key(df, distinct=distinct), l, seed=39).toPandas()
        picks = kept.sort_values("item_id").groupby("user_id")["item_id"].agg("".join)
        assert len(picks) == users and (picks.str.len() == l).all()
        return (picks.value_counts() / users).to_dict()

    tolerance = 4 * np.sqrt(0.25 / users)
    found = frequencies(distinct=False)
    assert set(found) == set(expected)
    assert all(abs(found[k] - p) < tolerance for k, p in expected.items()), found
    if l == 1:
        block = frequencies(distinct=True)
        assert abs(block["A"] - 0.5) < tolerance and abs(block["A"] - 0.75) > tolerance, block
