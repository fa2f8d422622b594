"""groups_per_user = "auto" (families.aggregate.bound_choice): l chosen privately from public
candidates by the counts' choice of a bound, over each user's memberships of its groups. The
mechanism is tested and audited in test_bound_selection.py and test_audit.py; here, the quality's
sensitivity on the aggregate's own path (one user moves the root of each norm by at most √U), the
split, the choice's use, and the refusals."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate import bound_choice
from dp_spark.families.aggregate.family import aggregate_params
from dp_spark.families.aggregate.run import GROUP, in_groups
from dp_spark.release import bound_bias, bound_selection

CANDIDATES = (1, 2, 4, 8, 16, 32)


def _params(**extra):
    return aggregate_params(**({"by": "movie", "keys": {"movie": range(1, 51)}, "metrics": ["count"],
                                "groups_per_user": "auto", "groups_per_user_candidates": CANDIDATES} | extra))


@pytest.mark.unit
def test_auto_takes_a_tenth_of_epsilon_first_and_plans_at_the_largest_candidate():
    params = _params()
    assert (params.auto, params.bound.groups_per_user, params.bound_candidates) == (True, 32, CANDIDATES)
    assert params.split(Fraction(1)) == {"epsilon_bound": Fraction(1, 10), "count": Fraction(9, 10)}
    assert bound_choice.at_bound(params, 4).bound.groups_per_user == 4 and not bound_choice.at_bound(params, 4).auto
    assert _params(groups_per_user_candidates=None).bound_candidates == bound_selection.DEFAULT_CANDIDATES
    model = bound_choice.error_model(params, params.split(Fraction(1)), 50)
    assert (model.tables, model.records_per_cell) == (1, 1)
    assert list(model.noise_variance) == sorted(model.noise_variance)  # more noise at a larger l


@pytest.mark.unit
@pytest.mark.parametrize("extra, message", [
    ({"groups_per_user_candidates": (4, 2)}, "strictly increasing"),
    ({"groups_per_user_candidates": (0, 2)}, "integers >= 1"),
    ({"groups_per_user": 3}, "used only with groups_per_user = \"auto\""),
])
def test_bad_choices_are_refused(extra, message):
    with pytest.raises(ConfigError, match=message):
        _params(**extra)


@pytest.mark.spark
def test_one_user_moves_the_root_of_each_norm_by_at_most_the_root_of_the_cap(spark):
    """On the release's own path (in_groups, memberships): D and D with one user of 50
    groups, at two caps; the quality's sensitivity is √U (in records; the norms are in 1/GRID²)."""
    rng = np.random.default_rng(4)
    rows = [(u, int(m)) for u in range(60) for m in rng.choice(np.arange(1, 51), rng.integers(1, 40), replace=False)]
    d = pd.DataFrame(rows, columns=["user_id", "movie"])
    d_plus = pd.concat([d, pd.DataFrame({"user_id": 999, "movie": np.arange(1, 51)})])
    params = _params()
    for cap in (3, 31):
        norms = []
        for frame in (d, d_plus):
            pairs = bound_choice.memberships(in_groups(spark.createDataFrame(frame), params), GROUP)
            groups = bound_choice.Memberships.of(pairs)
            per_user = frame.groupby("user_id").size()
            assert (groups.users, groups.largest, groups.total) == (len(per_user), per_user.max(), len(frame))
            norms.append(bound_choice.membership_norms(groups, CANDIDATES, cap))
            groups.unpersist()
        moves = [abs(math.sqrt(a) - math.sqrt(b)) / bound_selection.GRID for a, b in zip(*norms)]
        assert max(moves) <= math.sqrt(cap) + 1e-9
        assert max(moves) > 0.2 * math.sqrt(cap)  # the heavy user does move it: the check can fail


@pytest.mark.spark
def test_a_release_chooses_l_pays_for_it_and_bounds_at_it(spark):
    """Every user has 20 groups: the choice goes high (at l = 1 each count loses 19/20 of its
    users); the release is bounded at the chosen l, which the report states as a DP output."""
    rows = [(u, m) for u in range(800) for m in range(1, 21)]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "movie"]))
    release = dp_spark.aggregate(df, by="movie", keys={"movie": range(1, 21)}, metrics=["count"],
                                 groups_per_user="auto", groups_per_user_candidates=[1, 4, 20], epsilon=4, seed=2)
    chosen = release.report["algorithm"]["chosen"]["groups_per_user"]
    assert chosen == 20
    assert [e["step"] for e in release.ledger] == ["choose groups_per_user: users", "choose groups_per_user", "count"]
    assert release.ledger[-1]["sensitivity_l1"] == chosen  # the count table's L1 at the chosen l (c = 1)
    assert release.report["algorithm"]["parameters"]["groups_per_user"] == "auto"
    assert (release["groups"]["count"] - 800).abs().max() < 60


@pytest.mark.unit
def test_with_hpa_the_popularity_and_the_choice_each_take_a_tenth():
    params = _params(bounding="hpa")
    assert params.split(Fraction(1)) == {"epsilon_bound": Fraction(1, 10), "epsilon_popularity": Fraction(1, 10),
                                         "count": Fraction(4, 5)}
    with pytest.raises(ValueError, match="needs the popularity's ranks"):  # SRA's terms for HPA: refused
        bound_choice.choose(None, params, params.split(Fraction(1)), None, None, GROUP)


@pytest.mark.spark
def test_hpa_draws_its_popularity_first_and_scores_the_groups_it_drops(spark, monkeypatch):
    """1,000 users each in group 1 and a group of their own. HPA keeps group 1 at l = 1 (its noisy
    popularity, about 1,000 from one group per user, is far above the others'): each user is absent
    from its own group, a bias of one membership in each of 1,000 cells (norm² 1,000) against noise
    of variance about 3.1 per group at l = 1 (ε = 1, a count's share 0.8; 1,001 groups) and 4 times
    that at l = 2, so q(1) ≈ −64 and q(2) ≈ −112. SRA's sample is absent from group 1 half the
    time (norm² ≈ 500²): q(1) ≈ −503. With Δq = 1 (U = 1) and ε_m = 0.1, HPA picks 1 with
    probability 1 − e^(−4.8) and SRA 2 with 1 − e^(−39)."""
    users = 1000
    rows = [(u, 1) for u in range(users)] + [(u, u + 2) for u in range(users)]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "movie"]))
    common = dict(by="movie", keys={"movie": range(1, users + 2)}, metrics=["count"], groups_per_user="auto",
                  groups_per_user_candidates=[1, 2], epsilon=1, seed=3)
    hpa = dp_spark.aggregate(df, bounding="hpa", **common)
    sra = dp_spark.aggregate(df, **common)
    assert hpa.report["algorithm"]["chosen"]["groups_per_user"] == 1
    assert sra.report["algorithm"]["chosen"]["groups_per_user"] == 2
    # The popularity first, then the choice (candidates 1 and 2: no count of the users), then the
    # counts at the chosen l, kept by that same popularity: group 1 keeps nearly all its users.
    assert [e["step"] for e in hpa.ledger] == ["popularity", "choose groups_per_user", "count"]
    assert hpa.ledger[-1]["sensitivity_l1"] == 1
    assert abs(hpa["groups"]["count"].iloc[0] - users) < 30
    # Negative control: scored as SRA's absences (no ranking), HPA's choice is SRA's.
    unranked = bound_bias.squared_bias_norms
    monkeypatch.setattr(bound_bias, "squared_bias_norms", lambda *a, ranking=None, **k: unranked(*a, **k))
    assert dp_spark.aggregate(df, bounding="hpa", **common).report["algorithm"]["chosen"]["groups_per_user"] == 2


@pytest.mark.unit
def test_a_config_takes_auto_with_its_candidates_or_the_papers_names(tmp_path):
    from dp_spark.jobs.config import load_config

    config = tmp_path / "job.toml"
    body = (f'output = "{tmp_path}/out"\n[source]\nformat = "parquet"\npath = "{tmp_path}/in"\n'
            '[domain.keys]\nmovie = { range = [1, 50] }\n[privacy]\nepsilon = 1.0\n'
            '[algorithm]\nname = "aggregate"\nby = ["movie"]\nmetrics = ["count"]\n')
    config.write_text(body + 'groups_per_user = "auto"\ngroups_per_user_candidates = [1, 5]\n')
    assert load_config(config).params.bound_candidates == (1, 5)
    config.write_text(body + 'l = "auto"\nl_candidates = [2, 6]\n')
    assert load_config(config).params.bound_candidates == (2, 6)
