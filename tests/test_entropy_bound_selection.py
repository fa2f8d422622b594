"""The private choice of location entropy's M and C (dp_spark.families.location_entropy.bounds_choice):
the sensitivity the proof needs (docs/bound_selection.md, "Privacy claim: entropy_bound_selection")
on random neighbouring inputs, a negative control, the sampler against the exponential
mechanism's probabilities, the one-aggregation sums against bounding at each candidate, a seeded
job with "auto", and the config's checks."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.bounding.user_locations import bounded_pairs, ranked_pairs
from dp_spark.cli import main
from dp_spark.core.domain import ItemDomain
from dp_spark.core.exact_roots import ceil_sqrt
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource, discrete_laplace_variance, exponential_probabilities
from dp_spark.errors import ConfigError
from dp_spark.families.location_entropy import bounds_choice as ebs
from dp_spark.families.location_entropy import entropy as le
from dp_spark.families.location_entropy import sensitivity as sens
from dp_spark.families.location_entropy.sums import CandidateSums, candidate_sums, location_sums
from dp_spark.io import checkins
from dp_spark.jobs.config import build_config
from dp_spark.lab.audit_targets.entropy_bounds import candidate_sums_of
from tests.conftest import examples
from tests.stats import chi2_critical, chi2_statistic

LOCATIONS = 6
MS, CS = (1, 2, 4), (1, 3, 8)

# A user: its check-ins as (location, visits) in its own order (first visit first), distinct locations.
user_strategy = st.lists(st.tuples(st.integers(0, LOCATIONS - 1), st.integers(1, 10_000)), max_size=10,
                         unique_by=lambda pair: pair[0])


def sums_of(users: list[list[tuple[int, int]]], Ms=MS, Cs=CS) -> CandidateSums:
    """What candidate_sums computes, by brute force per user (the audit's driver-side version):
    at (M_i, C_j) each user keeps its first M_i locations, visits capped at C_j."""
    return candidate_sums_of(users, LOCATIONS, tuple(Ms), tuple(Cs))


def quality(users, variant="limit", epsilon=Fraction(1), Ms=MS, Cs=CS) -> np.ndarray:
    return ebs.quality(sums_of(users, Ms, Cs), variant, epsilon, LOCATIONS)


@pytest.mark.long
@settings(max_examples=examples(150), deadline=None)
@given(st.lists(user_strategy, max_size=12), user_strategy, st.sampled_from(["limit", "limit_ss", "limit_cb_dp"]),
       st.sampled_from([Fraction(1), Fraction(10**9)]))
def test_adding_a_user_moves_every_score_by_at_most_the_sensitivity(users, added, variant, epsilon):
    # At a large ε_entropy the noise term is small and the score moves with D, the whole of Δq's
    # room; at ε_entropy = 1 the noise damps the move (a review found the test weaker there alone).
    before = quality(users, variant, epsilon)
    after = quality(users + [added], variant, epsilon)
    delta_q = ebs.quality_sensitivity(MS, CS)
    assert all(abs(b - a) <= delta_q for b, a in zip(before.reshape(-1), after.reshape(-1)))


@pytest.mark.unit
def test_one_heavy_user_comes_close_to_the_sensitivity():
    """The bound is not loose by orders of magnitude: a user at M_K locations of 1-visit users,
    with C_K visits at each, moves some score by a good part of Δq. (With little noise, at a large
    ε_entropy: a large noise term damps the move of D, √(D² + x) moving less than D.)"""
    crowd = [[(location, 1)] for location in range(LOCATIONS) for _ in range(2)]
    heavy = [(location, 8) for location in range(4)]
    little_noise = Fraction(10**9)
    moves = np.abs((quality(crowd, epsilon=little_noise) - quality(crowd + [heavy], epsilon=little_noise)
                    ).astype(float))
    assert moves.max() > 0.25 * ebs.quality_sensitivity(MS, CS)


@pytest.mark.unit
def test_without_the_bounds_one_heavy_user_moves_the_score_past_the_sensitivity():
    """Negative control: measured against the unbounded entropy (every location, every visit)
    instead of the largest candidates (M_K, C_K), one user with many locations and visits moves
    the distance by far more than Δq."""
    crowd = [[(location, 1)] for location in range(LOCATIONS) for _ in range(3)]
    heavy = [(location, 10_000) for location in range(LOCATIONS)]
    unbounded = (*MS, 10**6), (*CS, 10**9)  # the reference at no bound at all

    def distance_to_unbounded(users):
        return ebs.distance_units(sums_of(users, *unbounded))[0, 0]  # at (M_1, C_1)

    move = abs(distance_to_unbounded(crowd + [heavy]) - distance_to_unbounded(crowd))
    assert move > ebs.quality_sensitivity(MS, CS)
    # The same user against the bounded reference stays within Δq.
    bounded = abs(ebs.distance_units(sums_of(crowd + [heavy]))[0, 0] - ebs.distance_units(sums_of(crowd))[0, 0])
    assert bounded <= ebs.quality_sensitivity(MS, CS)


@pytest.mark.unit
def test_the_quality_is_the_root_of_the_squared_distance_plus_the_noise_variance():
    """q = −⌈√(D² + |L|²·V)⌉ at every candidate, V the discrete Laplace variance at the release's
    scale (the first quality, −(D + |L|·s), weighed the noise by its scale, linearly in M); and
    −q/|L| is at most the root mean squared error against the reference, bias plus noise (Jensen),
    up to the rounding."""
    rng = np.random.default_rng(7)
    users = [[(int(x), int(v)) for x, v in zip(rng.permutation(LOCATIONS)[:k], rng.integers(1, 12, k))]
             for k in rng.integers(1, 6, 80)]
    sums, epsilon = sums_of(users), Fraction(3)
    scores, distance = ebs.quality(sums, "limit", epsilon, LOCATIONS), ebs.distance_units(sums)
    reference = le._on_grid(ebs.stats_at(sums, len(MS) - 1, len(CS) - 1).entropy)
    for i, M in enumerate(MS):
        for j, C in enumerate(CS):
            variance = discrete_laplace_variance(Fraction(M * ebs.grid_units(sens.global_sensitivity(C))) / epsilon)
            assert abs(-scores[i, j] - math.sqrt(float(distance[i, j]) ** 2 + LOCATIONS**2 * variance)) <= 1
            bias = (le._on_grid(ebs.stats_at(sums, i, j).entropy) - reference).astype(float)
            assert -scores[i, j] <= LOCATIONS * math.sqrt(np.mean(bias**2) + variance) + 1
    assert distance.max() > 0  # bounding moves the entropies: the bias side is seen


@pytest.mark.unit
def test_the_quality_trades_bias_against_noise():
    """Everyone has one location with one visit: bounding drops nothing, so the smallest bounds
    win. Users with four locations and eight visits each at a large ε: nothing is worth clipping."""
    light = [[(u % LOCATIONS, 1)] for u in range(60)]
    best = np.unravel_index(np.argmax(quality(light).astype(float)), (len(MS), len(CS)))
    assert (MS[best[0]], CS[best[1]]) == (1, 1)
    rng = np.random.default_rng(0)
    heavy = [[(int(x), int(v)) for x, v in zip(rng.permutation(LOCATIONS)[:4], rng.integers(1, 9, 4))]
             for _ in range(400)]
    best = np.unravel_index(np.argmax(quality(heavy, epsilon=Fraction(10**6)).astype(float)), (len(MS), len(CS)))
    assert (MS[best[0]], CS[best[1]]) == (4, 8)


@pytest.mark.long
def test_the_choice_follows_the_exponential_mechanism_and_is_paid_for():
    rng_data = np.random.default_rng(3)
    users = [[(int(x), int(v)) for x, v in zip(rng_data.permutation(LOCATIONS)[:k], rng_data.integers(1, 12, k))]
             for k in rng_data.integers(1, 6, 300)]
    sums = sums_of(users)
    epsilon_entropy, epsilon = Fraction(2), Fraction(6)
    scores = ebs.quality(sums, "limit", epsilon_entropy, LOCATIONS).reshape(-1)
    expected = exponential_probabilities(scores, epsilon, ebs.quality_sensitivity(MS, CS))
    assert 0.15 < expected.max() < 0.9  # a spread the test can see
    rng = RandomSource(30)
    draws = []
    for _ in range(3000):
        budget = Budget(epsilon)
        i, j = ebs.choose_bounds(sums, "limit", epsilon_entropy, LOCATIONS, epsilon, budget, rng)
        draws.append(i * len(CS) + j)
        assert budget.spent == epsilon and budget.entries[0].step == "bound (M, C)"
    observed = np.bincount(draws, minlength=len(scores))
    wanted = np.asarray(expected, dtype=float) * len(draws)
    kept = wanted >= 5
    # Fixed seed; the critical value is the one-sided 1e-4 quantile (tests/stats.py).
    assert chi2_statistic(observed[kept], wanted[kept]) < chi2_critical(int(kept.sum()) - 1)
    assert observed[~kept].sum() <= max(5, 3 * wanted[~kept].sum())


@pytest.mark.unit
def test_the_sensitivity_covers_the_rounded_global_sensitivity():
    assert ebs.quality_sensitivity(MS, CS) == 2 * 4 * (int(np.ceil(sens.global_sensitivity(8) * 2**16)) + 1)


@pytest.mark.unit
def test_the_root_is_rounded_up_exactly():
    """⌈√v⌉ for Fractions, at squares, just above and below them, below 1 and past doubles' 2^53."""
    big = (1 << 60) + 12345
    cases = {
        Fraction(0): 0,
        Fraction(1, 10**9): 1,
        Fraction(1): 1,
        Fraction(4): 2,
        Fraction(4) + Fraction(1, 10**12): 3,
        Fraction(17, 2): 3,
        Fraction(big * big): big,
        Fraction(big * big + 1): big + 1,
        Fraction(big * big - 1): big,
    }
    assert {v: ceil_sqrt(v) for v in cases} == cases


# ---------------------------------------------------------------------------
# Spark: one aggregation gives what bounding at each candidate gives.


def test_candidate_sums_equal_bounding_at_each_candidate(spark):
    rng = np.random.default_rng(5)
    rows = [(u, int(x), float(t), int(v)) for u in range(40) for x, t, v in
            zip(rng.integers(1, 7, 6), rng.random(6), rng.integers(1, 12, 6))]
    frame = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id", "time", "visits"]))
    domain = ItemDomain(ids=np.arange(1, 7), description="1..6", id_range=(1, 6))
    grid = candidate_sums(ranked_pairs(frame, MS[-1], CS[-1]), domain, MS, CS)
    for i, M in enumerate(MS):
        for j, C in enumerate(CS):
            direct = location_sums(bounded_pairs(frame, M, C), domain)
            at = grid.at(i, j)
            assert at.users.tolist() == direct.users.tolist() and at.visits.tolist() == direct.visits.tolist()
            np.testing.assert_allclose(at.c_log_c, direct.c_log_c, rtol=1e-12)
            assert at.coverage == direct.coverage


def entropy_run(tmp_path, *extra):
    path = tmp_path / "checkins"
    checkins.generate(2000, str(path), locations=200, max_visits=50, seed=2)
    out = tmp_path / "out"
    assert main(["run", "conf/sparse_entropy.toml", "--set", f"source.path={path}", "--set", f"output={out}",
                 "--set", "domain.items={ range = [1, 200] }", "--set", "seed=3", *extra]) == 0
    return pd.read_parquet(out / "location_entropy"), json.loads((out / "privacy.json").read_text())


def test_an_auto_job_under_zcdp_charges_the_choice_as_bounded_range(spark, tmp_path):
    # ρ from (ε = 5, δ = 1e-6); the choice's tenth of ρ buys the mechanism at twice √(2ρ/10).
    from fractions import Fraction as F

    from dp_spark.core import zcdp

    _table, report = entropy_run(tmp_path, "--set", 'algorithm.locations_per_user="auto"',
                                 "--set", 'privacy.noise="auto"', "--set", "privacy.delta=1e-6")
    choice = next(e for e in report["ledger"] if e["step"] == "bound (M, C)")
    share = zcdp.epsilon_for_rho(F(report["rho_total_exact"]) / 10)
    assert choice["bounded_range"] is True and F(choice["epsilon_exact"]) == 2 * share
    assert F(report["rho_spent_exact"]) <= F(report["rho_total_exact"])


def test_an_auto_job_reports_the_chosen_bounds_and_pays_for_them(spark, tmp_path):
    table, report = entropy_run(tmp_path, "--set", 'algorithm.locations_per_user="auto"',
                                "--set", 'algorithm.visits_per_location="auto"',
                                "--set", "algorithm.visits_per_location_candidates=[1, 5, 20]",
                                "--set", 'algorithm.outputs=["entropy", "users"]')
    chosen = report["algorithm"]["chosen"]
    assert chosen["M"] in ebs.DEFAULT_M_CANDIDATES and chosen["C"] in (1, 5, 20)
    assert report["algorithm"]["parameters"]["C_candidates"] == [1, 5, 20]
    ledger = {e["step"]: e for e in report["ledger"]}
    assert ledger["bound (M, C)"]["epsilon"] == pytest.approx(0.5)  # 10% of epsilon = 5
    assert ledger["bound (M, C)"]["cells"] == len(ebs.DEFAULT_M_CANDIDATES) * 3
    assert ledger["entropy (at the chosen M, C)"]["epsilon"] == pytest.approx(2.25)
    assert ledger["users (at the chosen M, C)"]["sensitivity_l1"] == chosen["M"]
    assert report["epsilon_spent"] == pytest.approx(5.0)
    # The noise depends on the chosen bound: an upper bound, and no half-width column.
    assert report["accuracy"]["tables"]["location_entropy"]["noisy_entropy"]["kind"] == "upper_bound"
    assert not any("halfwidth" in column for column in table.columns)
    assert len(table) == 200 and table["noisy_entropy"].notna().all()
    # The API passes "auto" and the candidates through to the same release.
    import dp_spark

    release = dp_spark.location_entropy(
        spark.read.parquet(str(tmp_path / "checkins")), locations=range(1, 201), M="auto", C="auto",
        C_candidates=[1, 5, 20], outputs=["entropy", "users"], time="first_time", visits="visits", epsilon=5, seed=3)
    assert release.report["algorithm"]["chosen"] == chosen
    assert [e["step"] for e in release.report["ledger"]] == [e["step"] for e in report["ledger"]]
    np.testing.assert_array_equal(release.tables["location_entropy"].sort_values("location_id")["noisy_entropy"],
                                  table.sort_values("location_id")["noisy_entropy"])


def test_an_explicit_bound_share_is_spent(spark, tmp_path):
    _table, report = entropy_run(tmp_path, "--set", 'algorithm.visits_per_location="auto"',
                                 "--set", "privacy.epsilon_bound=1", "--set", "privacy.epsilon_entropy=4")
    assert report["algorithm"]["chosen"]["M"] == 5  # fixed
    assert {e["step"]: e["epsilon"] for e in report["ledger"]} == pytest.approx(
        {"bound (M, C)": 1.0, "entropy (at the chosen M, C)": 4.0})


# ---------------------------------------------------------------------------
# Config.


def entropy_config(algorithm: dict, privacy: dict | None = None) -> dict:
    return {"output": "o", "source": {"format": "checkins", "path": "x.tsv"}, "domain": {"items": {"range": [1, 9]}},
            "privacy": {"epsilon": 1, **(privacy or {})}, "algorithm": {"name": "entropy", **algorithm}}


@pytest.mark.unit
@pytest.mark.parametrize("algorithm, privacy, message", [
    ({"locations_per_user": "auto", "locations_per_user_candidates": [0, 1]}, None, "must be integers >= 1"),
    ({"locations_per_user": "auto", "locations_per_user_candidates": [3, 2]}, None, "strictly increasing"),
    ({"locations_per_user": "auto", "locations_per_user_candidates": []}, None, "1 to 32 candidates"),
    ({"visits_per_location": "auto", "visits_per_location_candidates": [1.5, 2]}, None, "must be integers"),
    ({"visits_per_location": "auto", "visits_per_location_candidates": [1, 2_000_000]}, None, "at most 1,000,000"),
    ({"locations_per_user": "auto", "locations_per_user_candidates": 5}, None, "must be a list of integers"),
    ({"visits_per_location": "auto", "visits_per_location_candidates": "1,2"}, None, "must be a list of integers"),
    ({"locations_per_user_candidates": [1, 2]}, None, "used only with algorithm.locations_per_user = \"auto\""),
    ({"locations_per_user": "many"}, None, "algorithm.locations_per_user must be an integer"),
    ({"variant": "baseline", "visits_per_location": "auto"}, None, "does not apply to the baseline"),
    ({}, {"epsilon_bound": 0.1}, "privacy.epsilon_bound is spent only when"),
])
def test_bad_auto_settings_are_refused(algorithm, privacy, message):
    with pytest.raises(ConfigError, match=message):
        build_config(entropy_config(algorithm, privacy))


@pytest.mark.unit
def test_auto_splits_a_tenth_to_the_bound_by_default():
    from dp_spark.families.registry import family_of
    from dp_spark.release.family import Domains, plan_split

    cfg = build_config(entropy_config({"locations_per_user": "auto", "visits_per_location": "auto"}))
    assert cfg.params.grid == (ebs.DEFAULT_M_CANDIDATES, ebs.DEFAULT_C_CANDIDATES)
    split = plan_split(family_of("entropy"), cfg.params, cfg.epsilon, Domains(None))
    assert split == {"epsilon_bound": Fraction(1, 10), "epsilon_entropy": Fraction(9, 10)}
    fixed = build_config(entropy_config({}))
    assert plan_split(family_of("entropy"), fixed.params, fixed.epsilon, Domains(None)) == {
        "epsilon_entropy": Fraction(1)}


@pytest.mark.unit
def test_under_zcdp_the_choice_is_a_bounded_range_step_at_twice_its_share():
    """The general exponential mechanism (exp(εq/(2Δq))) is ε-bounded range, ε²/8 in ρ: the
    choice's share of ρ, handed out as ε_k ≤ √(2ρ_k), buys it at 2ε_k (before, as a pure step, the
    same ρ bought only ε_k)."""
    from dp_spark.core import zcdp
    from dp_spark.core.accounting import Accounting

    rho = zcdp.rho_of(1.0, 1e-6)
    share = zcdp.epsilon_for_rho(rho / 10)
    sums = sums_of([[(0, 3), (1, 1)], [(2, 5)], [(0, 1)]])
    budget = Budget(1, accounting=Accounting("laplace", rho, 1e-6))
    ebs.choose_bounds(sums, "limit", Fraction(1), LOCATIONS, share, budget, RandomSource(2))
    entry = budget.entries[0]
    assert entry.bounded_range and entry.epsilon == 2 * share
    assert entry.noise_scale == 2 * ebs.quality_sensitivity(MS, CS) / (2 * share)
    assert budget.rho_spent == share**2 / 2 <= rho / 10
    pure = Budget(1)
    ebs.choose_bounds(sums, "limit", Fraction(1), LOCATIONS, share, pure, RandomSource(2))
    assert pure.spent == share and not pure.entries[0].bounded_range
