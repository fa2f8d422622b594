"""groups_per_user = "auto" scored by the means (families.aggregate.bound_choice, MEANS): the
kept counts by groups (a user's l of its groups, c records in each) against a brute force and
against Spark's on the release's path, the quality's sensitivity with c records per unit of l
(with a negative control at the means' one record per unit), the model the release's noise
gives, and a release's ledger and report. The mechanism's audit is in test_audit.py
(aggregate_mean_bound_selection)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dp_spark
from dp_spark.families.aggregate import bound_choice, noisy_totals
from dp_spark.families.aggregate.family import aggregate_params
from dp_spark.families.aggregate.run import GROUP, in_groups
from dp_spark.release import mean_bound_quality as mq
from dp_spark.release.sum_tables import halfwidth
from tests.conftest import examples

CANDIDATES = (1, 2, 4, 8)
G = mq.GRID


def _params(**extra):
    return aggregate_params(**({"by": "movie", "keys": {"movie": range(8)}, "metrics": ["count", "mean(stars)"],
                                "groups_per_user": "auto", "groups_per_user_candidates": CANDIDATES,
                                "records_per_group": 2, "low": 1, "high": 5} | extra))


def group_cells(records) -> pd.DataFrame:
    """(user, group) records to kept_counts' rows by groups: k the user's records in the group, n
    its number of groups."""
    frame = pd.DataFrame(records, columns=["user_id", "cell"])
    rows = frame.groupby(["user_id", "cell"], sort=False).size().rename("k").reset_index()
    rows["n"] = rows["user_id"].map(rows.groupby("user_id").size())
    return rows


def brute_force(records, cap: int, ranks: dict | None = None) -> dict:
    """Per group and candidate, Σ_u ⌊G·min(k, c)·m/g⌋ from each user's groups: SRA keeps min(n, l)
    of its n groups alike; HPA its groups of highest rank first, ties alike."""
    out: dict = {}
    for _user, rows in group_cells(records).groupby("user_id"):
        for row in rows.itertuples():
            for i, l in enumerate(CANDIDATES):
                if ranks is None:
                    kept, tied = min(row.n, l), row.n
                else:
                    above = sum(ranks[c] > ranks[row.cell] for c in rows["cell"])
                    tied = sum(ranks[c] == ranks[row.cell] for c in rows["cell"])
                    kept = min(tied, max(l - above, 0))
                out.setdefault(row.cell, [0] * len(CANDIDATES))[i] += G * min(row.k, cap) * kept // tied
    return out


def test_kept_counts_by_groups_count_records_per_group_and_groups_per_user():
    # User 1: 3 records in group x and 1 in y (2 groups); user 2: 5 records in group z alone.
    records = [(1, "x")] * 3 + [(1, "y"), (2, "z")] + [(2, "z")] * 4
    cells = group_cells(records)
    for cap in (1, 2, 3):
        kept = mq.kept_counts(cells, CANDIDATES, cap, by_cells=True)
        want = brute_force(records, cap)
        assert [kept[:, i].tolist() for i in range(len(CANDIDATES))] == [
            [want[c][i] for c in cells["cell"].unique()] for i in range(len(CANDIDATES))]
    # At l = 1 user 1 keeps half of each group: x gets ⌊G·min(3, 2)/2⌋ = G, y G/2; z its cap whole.
    assert mq.kept_counts(cells, CANDIDATES, 2, by_cells=True)[:, 0].tolist() == [G, G // 2, 2 * G]
    with pytest.raises(ValueError, match="k <= g"):  # 3 records in a group of a user with 2 groups: not by records
        mq.kept_counts(cells, CANDIDATES, 3)


@st.composite
def neighbours(draw):
    """Records of up to 10 users over 8 groups (repeats allowed), one more user's, and c."""
    records = draw(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 7)), max_size=120))
    added = draw(st.lists(st.tuples(st.just(99), st.integers(0, 7)), min_size=1, max_size=40))
    return records, added, draw(st.integers(1, 3))


def _kept(records, cap: int) -> np.ndarray:
    """Every one of the 8 groups' kept counts, so that the neighbours' rows line up."""
    full = np.zeros((8, len(CANDIDATES)), dtype=np.int64)
    if records:
        cells = group_cells(records)
        full[cells["cell"].unique()] = mq.kept_counts(cells, CANDIDATES, cap, by_cells=True)
    return full


def _model(c: int) -> mq.MeansErrorModel:
    params = _params(records_per_group=c)
    return bound_choice.means_model(params, params.split(Fraction(1)), 8, 0.05)


@settings(max_examples=examples(150), deadline=None)
@given(neighbours())
def test_one_user_raises_every_score_by_at_most_the_sensitivity(case):
    """Monotone and within Δq at every candidate, with c records per group counted in Δq."""
    records, added, c = case
    model = _model(c)
    delta = mq.quality_sensitivity(CANDIDATES, model)
    before = mq.quality([_kept(records, c)], CANDIDATES, model)
    after = mq.quality([_kept(records + added, c)], CANDIDATES, model)
    assert all(0 <= a - b <= delta for a, b in zip(after, before))


def test_with_one_record_per_unit_of_l_one_user_moves_a_score_past_that_sensitivity():
    """Negative control: a user with 4 records in each of 8 groups, where the groups' counts sit on
    the steepest part of the curve, moves q(8) by more than the Δq of the means' reach (one record per
    unit of l), and within the aggregate's (c = 4 per unit)."""
    model = _model(4)
    curve = model.tables[0][-1]
    k = np.linspace(0, 50 * (curve.threshold + curve.scale), 20_001)
    steepest = float(k[np.argmax(np.diff(curve.usefulness(k)))])
    base = [(u, g) for g in range(8) for u in range(round(steepest))]
    added = [(10_000, g) for g in range(8)] * 4
    move = (mq.quality([_kept(base + added, 4)], CANDIDATES, model)
            - mq.quality([_kept(base, 4)], CANDIDATES, model))[-1]
    assert move <= mq.quality_sensitivity(CANDIDATES, model)
    assert move > mq.quality_sensitivity(CANDIDATES, replace(model, records_per_bound=1))


@pytest.mark.unit
@pytest.mark.parametrize("method", ["tables", "histogram"])
def test_the_model_is_the_releases_mean_at_each_l(method):
    params = _params(method=method, candidates=[1, 2, 3, 4, 5] if method == "histogram" else None)
    assert bound_choice.quality_of(params) == bound_choice.MEANS
    assert bound_choice.quality_of(_params(metrics=["count", "sum(stars)"])) == bound_choice.COUNTS
    split = params.split(Fraction(1))
    model = bound_choice.means_model(params, split, 8, 0.05)
    assert (model.records_per_cell, model.records_per_bound, model.cells) == (2, 2, (8,))
    at = model.tables[0]
    assert [t.threshold for t in at] == sorted(t.threshold for t in at)  # more noise at a larger l
    assert [t.variance for t in at] == sorted(t.variance for t in at) and at[0].variance < at[-1].variance
    if method == "tables":  # the count's half-width the release asks of a mean, at l·c
        for l, t in zip(CANDIDATES, at):
            entries = noisy_totals.ledger_entries((noisy_totals.RECORDS, noisy_totals.SUM),
                                                  noisy_totals.GroupBound(l, 2), params.clip, "stars",
                                                  {"count": split["count"], "sum": split["sum(stars)"]}, "laplace", 1)
            assert t.threshold == halfwidth(entries["count"], 0.025) and t.scale == float(entries["count"].noise_scale)


@pytest.mark.spark
def test_the_spark_kept_counts_by_groups_are_the_reference(spark):
    """On the release's path (in_groups, memberships): SRA's and HPA's (ranks with ties) kept
    counts by groups with c = 2 and repeated records, against the brute force."""
    rng = np.random.default_rng(6)
    records = [(int(u), int(rng.integers(0, 8))) for u in range(30) for _ in range(int(rng.integers(1, 12)))]
    frame = pd.DataFrame(records, columns=["user_id", "movie"]).assign(stars=3.0)
    params = _params()
    grouped = in_groups(spark.createDataFrame(frame), params)
    groups = bound_choice.Memberships.of(bound_choice.memberships(grouped, GROUP))
    ranks = np.array([2, 0, 0, 1, 3, 3, 1, 0])
    try:
        for given_ranks in (None, ranks):
            kept = bound_choice.mean_kept_counts(grouped, groups, params, GROUP, ranks=given_ranks)
            want = brute_force(records, 2, None if given_ranks is None else dict(enumerate(ranks.tolist())))
            assert sorted(map(tuple, kept.tolist())) == sorted(map(tuple, want.values()))
    finally:
        groups.unpersist()


@pytest.mark.spark
def test_a_release_with_a_mean_chooses_l_by_the_means_and_says_so(spark):
    """Every user rates the same 20 movies twice (c = 2): no count of users is drawn, one ledger
    step chooses l, the tables follow at the chosen l·c, and the report names the quality."""
    rows = [(u, m, float(1 + (u + m) % 5)) for u in range(400) for m in range(1, 21) for _ in range(2)]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "movie", "stars"]))
    release = dp_spark.aggregate(df, by="movie", keys={"movie": range(1, 21)}, metrics=["count", "mean(stars)"],
                                 groups_per_user="auto", groups_per_user_candidates=[1, 4, 20], records_per_group=2,
                                 low=1, high=5, method="tables", epsilon=4, seed=2)
    l = release.report["algorithm"]["chosen"]["groups_per_user"]
    assert release.report["algorithm"]["chosen"] == {"groups_per_user": l} and l in (1, 4, 20)
    assert [e["step"] for e in release.ledger] == ["choose groups_per_user", "count", "sum(stars)"]
    assert release.ledger[0]["mechanism"] == "exponential mechanism (monotone quality)"
    assert release.ledger[1]["sensitivity_l1"] == 2 * l
    assert release.report["algorithm"]["parameters"]["groups_per_user_quality"] == "means"
    assert release["groups"]["mean_stars"].notna().all()
    # The counts' choice (no mean asked) still draws the users' count first.
    counts = dp_spark.aggregate(df, by="movie", keys={"movie": range(1, 21)}, metrics=["count"],
                                groups_per_user="auto", groups_per_user_candidates=[1, 4, 20], records_per_group=2,
                                epsilon=4, seed=2)
    assert counts.report["algorithm"]["parameters"]["groups_per_user_quality"] == "counts"
    assert [e["step"] for e in counts.ledger] == ["choose groups_per_user: users", "choose groups_per_user", "count"]
