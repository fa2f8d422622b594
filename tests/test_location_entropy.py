"""Location entropy: sensitivities against brute force, the smooth-sensitivity table against a
direct maximisation, bounding, and whole jobs on generated check-ins."""

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from dp_spark.bounding.user_locations import bounded_pairs
from dp_spark.cli import main
from dp_spark.core.domain import ItemDomain
from dp_spark.errors import ConfigError
from dp_spark.families.location_entropy import entropy as le
from dp_spark.families.location_entropy import sensitivity as sens
from dp_spark.families.location_entropy.sums import location_sums
from dp_spark.io import checkins, validation
from dp_spark.jobs.config import build_config


def true_local_sensitivity(C: int, n: int) -> float:
    """max over locations with n users (visits 1..C each) and over their neighbours (one user
    removed, or one added with 1..C visits) of |ΔH|: exhaustive."""
    worst = 0.0
    for counts in itertools.combinations_with_replacement(range(1, C + 1), n):
        h = sens.entropy(counts)
        for i in range(n):
            worst = max(worst, abs(h - sens.entropy(counts[:i] + counts[i + 1:])))
        for added in range(1, C + 1):
            worst = max(worst, abs(h - sens.entropy(counts + (added,))))
    return worst


@pytest.mark.parametrize("C", [1, 2, 3, 5])
def test_local_and_global_sensitivity_bound_the_brute_force(C):
    truths = {n: true_local_sensitivity(C, n) for n in range(1, 7)}
    for n, truth in truths.items():
        assert sens.local_sensitivity(C, n) >= truth - 1e-12, (C, n)
    # Up to C = 5 the global sensitivity is ln 2, reached when a second user joins a lone one.
    assert sens.global_sensitivity(C) == pytest.approx(max(truths.values()))


def test_the_c1_correction_is_needed():
    """With one visit each, removing one of two users moves H by ln 2; the paper's ln((n+1)/n)
    gives ln 1.5 (specification §7.1)."""
    assert true_local_sensitivity(1, 2) == pytest.approx(math.log(2))
    assert sens.local_sensitivity(1, 2) == pytest.approx(math.log(2))
    assert sens.local_sensitivity(1, 2) > math.log(1.5)


def test_values_listed_in_the_spec():
    """specification §9.5 and §7.1."""
    expected = [0.693, 0.693, 0.521, 0.376, 0.294, 0.242, 0.205, 0.178, 0.158, 0.141]
    assert [round(sens.local_sensitivity(5, n), 3) for n in range(1, 11)] == expected
    assert sens.local_sensitivity(5, 50) == pytest.approx(0.0519, abs=5e-5)
    for c, value in ((20, 0.8985), (50, 1.548), (1000, 3.975)):
        assert sens.global_sensitivity(c) == pytest.approx(value, abs=5e-4)
    assert sens.smoothing(5, 1e-8, 5) == pytest.approx(0.0241, abs=5e-5)


def uncapped_local(C, m):
    """The §7.1 formula without the cap at GS (what the spec's worked SS example uses)."""
    if m <= 1:
        return math.log(2)
    log_c = math.log(C)
    h_star = math.log(m - 1) - log_c / (C - 1) + math.log(log_c / (C - 1)) + 1
    return max(math.log((m - 1) / (m - 1 + C)) + C * log_c / (m - 1 + C),
               math.log(m / (m + C)) + C * log_c / (m + C), math.log1p(math.exp(-h_star)))


def test_smooth_sensitivity_table_equals_a_direct_maximisation():
    beta = sens.smoothing(5, 1e-8, 5)
    table = sens.smooth_sensitivity_table(5, 5, 5.0, 1e-8, 120)
    for n in (1, 2, 3, 10, 20, 50, 120):
        direct = max(math.exp(-beta * abs(m - n)) * sens.local_sensitivity(5, m) for m in range(1, 3000))
        assert table[n] == pytest.approx(max(direct, 1e-3), rel=1e-12)
    assert table[0] == table[1]
    # With the cap the spec prescribes, SS(5, 20) = e^(−18β′)·ln 2 = 0.449; the spec's worked example
    # (0.558) is the same maximisation over the uncapped formula, which peaks at 0.862 for m = 2.
    assert table[20] == pytest.approx(0.449, abs=5e-4)
    uncapped = max(math.exp(-beta * abs(m - 20)) * uncapped_local(5, m) for m in range(1, 3000))
    assert uncapped == pytest.approx(0.558, abs=5e-4)


def test_crowd_sensitivity_is_the_largest_local_bound_from_k_on():
    for C, k in ((5, 10), (5, 50), (20, 25)):
        assert sens.crowd_sensitivity(C, k) == pytest.approx(max(sens.local_sensitivity(C, n)
                                                                 for n in range(k, 5000)))



@pytest.mark.parametrize("C", [3, 5, 50, 199, 200, 1_000, 12_345, 100_000, 1_000_000])
def test_local_bound_is_non_increasing_from_m0_up_to_the_largest_supported_c(C):
    # The smooth-sensitivity table and GS_k stop at m0 (decreasing_from); that is sound only if
    # LS*(C, ·) never rises again after it. The spec checked C <= 199; the config accepts C up to
    # MAX_VISITS_PER_LOCATION. Densely just after m0, where LS* turns, then log-spaced to 10^12.
    from dp_spark.families.location_entropy.family import MAX_VISITS_PER_LOCATION

    assert C <= MAX_VISITS_PER_LOCATION
    m0 = math.ceil(sens.decreasing_from(C))
    dense = range(m0, m0 + 3000)
    tail = np.unique(np.geomspace(m0 + 3000, 1e12, 1500).astype(np.int64))
    values = [sens.local_sensitivity(C, int(n)) for n in [*dense, *tail]]
    rises = [(n, b - a) for n, a, b in zip([*dense, *tail], values, values[1:]) if b - a > 1e-15]
    assert rises == []


LOCATIONS = ItemDomain(ids=np.arange(1, 7), description="1..6", id_range=(1, 6))


def checkin_frame(spark, rows):
    frame = pd.DataFrame(rows, columns=["user_id", "item_id", "time", "visits"])
    return spark.createDataFrame(frame.astype({"user_id": "int64", "item_id": "int64", "time": "float64",
                                               "visits": "int64"}))


def test_bounding_keeps_the_first_m_locations_by_own_time_and_caps_visits(spark):
    rows = [  # user 1: five locations, first visits at times 5, 1, 3, 3, (none)
        (1, 1, 5.0, 2), (1, 2, 1.0, 9), (1, 2, 0.5, 1), (1, 3, 3.0, 1), (1, 4, 3.0, 4), (1, 5, None, 1),
        (2, 6, 2.0, 30), (2, 1, 1.0, 1),
    ]
    pairs = bounded_pairs(checkin_frame(spark, rows), locations_per_user=3, visits_per_location=4).toPandas()
    kept = {(r.user_id, r.item_id): r.c for r in pairs.itertuples()}
    # User 1: location 2 (t = 0.5), then 3 and 4 tie at t = 3 (by id); 1 and 5 are dropped.
    assert kept == {(1, 2): 4, (1, 3): 1, (1, 4): 4, (2, 1): 1, (2, 6): 4}
    assert pairs.groupby("user_id").size().max() <= 3 and pairs["c"].max() <= 4


def test_every_public_location_gets_a_value(spark):
    rows = [(1, 1, 1.0, 1), (2, 1, 1.0, 3), (3, 2, 1.0, 2)]
    stats = le.stats_of(location_sums(bounded_pairs(checkin_frame(spark, rows), 5, 5), LOCATIONS))
    assert stats.users.tolist() == [2, 1, 0, 0, 0, 0]
    assert stats.entropy[0] == pytest.approx(sens.entropy([1, 3])) and stats.entropy[1:].tolist() == [0.0] * 5


def generated(tmp_path, users=3000):
    path = tmp_path / "checkins"
    stats = checkins.generate(users, str(path), locations=200, max_visits=50, seed=2)
    return path, stats


@pytest.fixture(scope="module")
def three_thousand_users(tmp_path_factory):
    """generated() once for the tests below, which only read it: its path and statistics."""
    return generated(tmp_path_factory.mktemp("generated"))


def entropy_args(path, out, variant, *extra):
    return ["run", "conf/sparse_entropy.toml", "--set", f"source.path={path}", "--set", f"output={out}",
            "--set", "domain.items={ range = [1, 200] }", "--set", f"algorithm.variant={variant}",
            "--set", "seed=3", *extra]


def test_generator_shape(three_thousand_users):
    _path, stats = three_thousand_users
    assert stats["max_locations_per_user"] <= 100 and stats["max_visits"] <= 50
    # P(k) ∝ 1/k on 1..100 has mean 100/H_100 = 19.27: within 5% at 3,000 users.
    assert stats["avg_locations_per_user"] == pytest.approx(100 / sum(1 / k for k in range(1, 101)), rel=0.05)


@pytest.mark.parametrize("variant", le.VARIANTS)
def test_entropy_jobs_publish_every_location_with_a_labelled_report(spark, three_thousand_users, tmp_path, variant):
    path, _stats = three_thousand_users
    out = tmp_path / "out"
    assert main(entropy_args(path, out, variant, "--set", 'algorithm.outputs=["entropy", "users"]',
                             "--set", "algorithm.k=20")) == 0
    table = pd.read_parquet(out / "location_entropy")
    report = json.loads((out / "privacy.json").read_text())
    assert sorted(table["location_id"]) == list(range(1, 201))
    assert report["epsilon_spent"] == pytest.approx(5.0)
    steps = [e["step"] for e in report["ledger"]]
    assert steps[-1] == "users" and "entropy" in steps
    if variant == "limit_cb":
        assert report["guarantee"].startswith("NONE") and "crowd-blending" in json.dumps(report["ledger"])
        assert table["noisy_entropy"].isna().any()
    elif variant in ("limit_ss", "limit_cb_dp"):
        assert "give (epsilon, delta)" in report["guarantee"] and report["delta_spent"] == 1e-8  # seeded
    else:
        assert "give pure epsilon" in report["guarantee"] and table["noisy_entropy"].notna().all()  # seeded


def test_limit_at_huge_epsilon_releases_the_bounded_entropy(spark, tmp_path):
    """At ε = 10^7 the noise rounds away: the release is H̄ of the bounded data on the grid 2^-16,
    recomputed here with pandas from the generated table."""
    path, _stats = generated(tmp_path, users=500)
    out = tmp_path / "out"
    assert main(entropy_args(path, out, "limit", "--set", "privacy.epsilon=10000000")) == 0
    released = pd.read_parquet(out / "location_entropy").set_index("location_id")["noisy_entropy"]
    raw = pd.read_parquet(path)
    raw = raw.sort_values(["user_id", "first_time", "location_id"])
    kept = raw.groupby("user_id").head(5).assign(c=lambda f: f["visits"].clip(upper=5))
    expected = kept.groupby("location_id")["c"].apply(lambda c: sens.entropy(c.to_numpy()))
    expected = expected.reindex(range(1, 201), fill_value=0.0)
    np.testing.assert_allclose(released.reindex(range(1, 201)).to_numpy(), expected.to_numpy(), atol=2**-16)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"variant": "limit-ss"}, "algorithm.variant must be one of"),
        ({"locations_per_user": 0}, "algorithm.locations_per_user must be an integer >= 1"),
        ({"outputs": ["visits"]}, "algorithm.outputs must list 'entropy'"),
        ({"l": 5}, "algorithm.l is not used by entropy"),
    ],
)
def test_entropy_settings_are_checked(change, message):
    raw = {"output": "o", "source": {"format": "checkins", "path": "x.tsv"}, "domain": {"items": {"range": [1, 9]}},
           "privacy": {"epsilon": 1}, "algorithm": {"name": "entropy", **change}}
    with pytest.raises(ConfigError, match=message):
        build_config(raw)


def test_checkin_sources_and_entropy_keys_stay_with_entropy():
    base = {"output": "o", "domain": {"items": {"range": [1, 9]}}, "privacy": {"epsilon": 1}}
    with pytest.raises(ConfigError, match="only algorithm 'entropy' reads it"):
        build_config({**base, "source": {"format": "checkins", "path": "x"}, "algorithm": {"name": "sra", "l": 2}})
    with pytest.raises(ConfigError, match="privacy.delta is a location-entropy parameter"):
        build_config({**base, "source": {"format": "parquet", "path": "x"}, "privacy": {"epsilon": 1, "delta": 1e-6},
                      "algorithm": {"name": "sra", "l": 2}})


def test_text_checkins_are_read_with_their_times(spark, tmp_path):
    """Gowalla-style lines: user, location, time; tab-separated; ISO times keep their order."""
    path = tmp_path / "checkins.txt"
    path.write_text("1\t3\t2010-10-19T23:55:27Z\n1\t2\t2010-10-18T22:17:43Z\n2\t3\t2010-10-17T23:42:03Z\n")
    records, diagnostics = checkins.validate_checkins(
        checkins.read_checkins(spark, build_config({
            "output": "o", "source": {"format": "checkins", "path": str(path)}, "domain": {"items": {"range": [1, 9]}},
            "privacy": {"epsilon": 1}, "algorithm": {"name": "entropy"}}).source), LOCATIONS)
    rows = records.orderBy("time").toPandas()
    # A text file's user ids are text (io.validation.user_values): "2" is the user 2.
    assert rows[["user_id", "item_id"]].values.tolist() == [["2", 3], ["1", 2], ["1", 3]]
    assert diagnostics == {"rows_read": 3, "rows_outside_location_set": 0, "rows_invalid_user_id": 0,
                           "rows_invalid_item_id": 0, "rows_invalid_visits": 0}


def test_a_location_set_that_lists_its_ids_keeps_what_its_range_would(spark):
    """A location set with gaps is checked in one SQL expression (io.sql_literals), not Column.isin:
    the rows it keeps and the figures it counts are those of the range it lies in, less the gaps'
    rows, and the guards' figures see the same rows dropped."""
    rows = [(1, 1, 1), (1, 2, 3), (1, 4, 1), (2, 4, 2), (2, 6, 1), (3, 2, 0), (3, 9, 1), (4, None, 1), (5, 6, 1)]
    df = spark.createDataFrame(rows, "user_id long, item_id long, visits long").withColumn("time", F.lit(None))
    listed = ItemDomain(ids=np.array([1, 4, 6]), description="1, 4, 6")
    records, diagnostics = checkins.validate_checkins(df, listed)
    assert sorted(tuple(r) for r in records.select("user_id", "item_id", "visits").collect()) == [
        (1, 1, 1), (1, 4, 1), (2, 4, 2), (2, 6, 1), (5, 6, 1)]
    assert diagnostics == {"rows_read": 9, "rows_outside_location_set": 3, "rows_invalid_user_id": 0,
                           "rows_invalid_item_id": 1, "rows_invalid_visits": 1}
    # The guards' figures: user 1 loses one row of three, users 3 and 4 all of theirs.
    grid = validation.SHARE_GRID
    assert checkins.guard_figures(df, listed) == (5, grid // 3 + grid + grid)


def test_evaluate_compares_the_variants(spark, three_thousand_users, tmp_path):
    path, _stats = three_thousand_users
    out = tmp_path / "eval"
    args = ["evaluate", "conf/sparse_entropy.toml", "--runs", "2", "--out", str(out), "--methods",
            ",".join(le.VARIANTS), "--set", f"source.path={path}", "--set", "domain.items={ range = [1, 200] }",
            "--set", "algorithm.k=20", "--set", "seed=1"]
    assert main(args) == 0
    records = json.loads((out / "evaluation.json").read_text())
    cells = {(r["method"], r["metric"]): r["mean"] for r in records if r["query"] == "entropy"}
    for method in le.VARIANTS:
        for metric in ("kl", "mse", "mse_throwaway", "published_ratio"):
            assert (method, metric) in cells
        assert 0 <= cells[(method, "published_ratio")] <= 1
    # Baseline's public bounds (M = 100, C = 1000) give 100·GS(1000)/(5·ln 2) ≈ 115 times Limit's noise
    # scale, so its MSE is larger by far more than the bias Limit's tighter bounds add.
    assert cells[("baseline", "mse")] > 100 * cells[("limit", "mse")]
    # Variants that publish every location have the same MSE both ways.
    assert cells[("limit", "mse_throwaway")] == pytest.approx(cells[("limit", "mse")])


# ---------------------------------------------------------------------------
# Limit-SS: the scale actually used is β′-smooth and reaches the report only through config values
# (a review found the old rounded scale was not smooth, and the ledger carried realised scales).

from fractions import Fraction  # noqa: E402

from dp_spark.core import hockey_stick  # noqa: E402
from dp_spark.core.ledger import Budget  # noqa: E402
from dp_spark.core.mechanisms import RandomSource, as_scale, scale_at_least  # noqa: E402

SS_BOUNDS = le.Bounds(M=5, C=5)
SS_DELTA = 1e-8
N_UP_TO = 100_000


def _old_rounded_scales(epsilon: Fraction, n_max: int) -> np.ndarray:
    """NEGATIVE CONTROL: the scale as an earlier version built it, 2M·(⌈SS/g⌉ + 1)/ε grid units."""
    table = sens.smooth_sensitivity_table(SS_BOUNDS.C, SS_BOUNDS.M, float(epsilon), SS_DELTA, n_max, 1e-3)
    units = [math.ceil(v * 2**16) + 1 for v in table]
    return np.array([float(scale_at_least(Fraction(2 * SS_BOUNDS.M * u) / epsilon)) for u in units])


def _worst_neighbour_delta(scales: np.ndarray, epsilon: Fraction) -> float:
    """Exact δ per location for n against n + 1 users, n = 0..N_UP_TO, at the per-location share
    ε/M: the shift is the rounded entropy's largest move, ⌊LS*/g⌋ + 1 grid steps (round half to
    even can add a whole step). Pairs with one scale are skipped: a shift s ≤ S(n) against scale
    2M·S(n)/ε moves the log-probabilities by at most ε/(2M), so their δ is exactly 0."""
    ls = np.array([sens.local_sensitivity(SS_BOUNDS.C, max(n, 1)) for n in range(N_UP_TO + 2)])
    shift = np.floor(np.maximum(ls[:-1], ls[1:]) * 2**16).astype(np.int64) + 1
    differ = scales[:-1] != scales[1:]
    return hockey_stick.worst_delta(scales[:-1][differ], scales[1:][differ], shift[differ],
                                    float(epsilon) / SS_BOUNDS.M)


@pytest.mark.system  # exact δ over every user count: ~4 s each, too long for `make test-fast`
@pytest.mark.parametrize("epsilon", [Fraction(1, 10), Fraction(1, 2), Fraction(1)])
def test_limit_ss_exact_delta_per_location_is_within_the_claim(epsilon):
    users = np.arange(N_UP_TO + 2)
    scales = np.array([float(b) for b in le.smooth_scale_units(users, SS_BOUNDS.C, SS_BOUNDS.M, epsilon, SS_DELTA,
                                                               1e-3)])
    assert _worst_neighbour_delta(scales, epsilon) <= SS_DELTA / SS_BOUNDS.M


@pytest.mark.system  # the same exact check, ~3 s
def test_the_old_rounded_scale_breaks_the_claim_at_small_epsilon():
    """The same exact check flags the old construction (1.5e-3 at ε = 0.1, against 2e-9)."""
    epsilon = Fraction(1, 10)
    assert _worst_neighbour_delta(_old_rounded_scales(epsilon, N_UP_TO + 1), epsilon) > 1e-4


@pytest.mark.parametrize("epsilon", [Fraction(1, 10), Fraction(5)])
def test_limit_ss_scales_are_smooth_and_cover_the_rounded_sensitivity(epsilon):
    users = np.arange(20_001)
    scales = le.smooth_scale_units(users, SS_BOUNDS.C, SS_BOUNDS.M, epsilon, SS_DELTA, 1e-3)
    beta = sens.smoothing(float(epsilon), SS_DELTA, SS_BOUNDS.M)
    ratios = np.array([float(a / b) for a, b in zip(scales[:-1], scales[1:])])
    assert ratios.max() <= math.exp(beta) and ratios.min() >= math.exp(-beta)
    # Sliding: the largest move of the rounded entropy in grid steps, ⌊LS*/g⌋ + 1, is at most ε/(2M)
    # of the scale, at every n.
    for n in (0, 1, 2, 3, 50, 13_542, 20_000):
        move = math.floor(sens.local_sensitivity(SS_BOUNDS.C, max(n, 1)) * 2**16) + 1
        assert Fraction(move) / scales[n] <= epsilon / (2 * SS_BOUNDS.M)
    assert all(as_scale(b) == b for b in scales[::997])  # the exact sampler takes them as they are


@pytest.mark.parametrize("value", [Fraction(1, 3), Fraction(67 * 10**6, 7), Fraction(2**39 - 1, 2**20), Fraction(5)])
def test_round_up_relative_never_rounds_down_and_stays_close(value):
    rounded = le.round_up_relative(value)
    assert value <= rounded <= value * (1 + Fraction(1, 2**37))
    assert as_scale(rounded) == rounded


def test_hockey_stick_closed_form_matches_the_term_by_term_sum():
    rng = np.random.default_rng(3)
    for _ in range(100):
        b1 = rng.uniform(0.5, 30)
        b2 = b1 * rng.uniform(0.8, 1.25)
        shift, epsilon = int(rng.integers(-20, 21)), rng.uniform(0, 1.5)
        closed = float(hockey_stick.discrete_laplace_delta(b1, b2, shift, epsilon))
        assert closed == pytest.approx(hockey_stick.brute_force_delta(b1, b2, shift, epsilon), rel=1e-9, abs=1e-14)


def _one_location(users_at_location_one: int) -> le.LocationStats:
    """Three public locations; location 1 has the given number of users with 2 visits each."""
    users = np.array([users_at_location_one, 4, 0])
    visits = users * 2
    c_log_c = users * 2 * math.log(2)
    return le.LocationStats(users, visits, le.entropy_of(users, visits, c_log_c))


@pytest.mark.parametrize("variant", ["limit_ss", "limit_cb_dp"])
def test_the_ledger_is_the_same_on_neighbouring_inputs(variant):
    """The leak a review found: 30 against 31 users at location 1 (ε = 5, M = C = 5). The old ledger
    carried min(scales) and max(smooth units), 0.70547 against 0.68866."""
    ledgers = []
    for users in (30, 31):
        budget = Budget(5, 1e-8)
        le.publish(_one_location(users), variant, SS_BOUNDS, {"epsilon_entropy": Fraction(5)}, budget,
                   RandomSource(1), delta=1e-8, k=3)
        ledgers.append(budget.to_json()["ledger"])
    assert ledgers[0] == ledgers[1]
    entry = ledgers[0][-1]
    floor = le.smooth_scale_floor(5, Fraction(entry["epsilon_exact"]), 1e-3)
    assert entry["noise_scale"] == pytest.approx(float(floor), rel=1e-12)
    assert "xi" in entry["mechanism"] and "beta'" in entry["mechanism"]


def _two_location_checkins(path, times: bool) -> str:
    """100 users who each visit location 1 and then location 2 (a day later)."""
    lines = [f"{u}\t{loc}" + (f"\t2010-10-{10 + loc}T12:00:00Z" if times else "")
             for u in range(1, 101) for loc in (1, 2)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("choice, published", [("first_visit", 0.5), ("random", 1.0)])
def test_evaluate_bounds_users_as_the_release_chooses_their_locations(spark, tmp_path, choice, published):
    """M = 1: by first visit every user keeps location 1, so location 2 is left with no users
    (half the eligible locations published); a random choice leaves both about 50 (all published).
    evaluate once bounded by first visit whatever the config said."""
    path = _two_location_checkins(tmp_path / "checkins.txt", times=True)
    out = tmp_path / "eval"
    args = ["evaluate", "conf/sparse_entropy.toml", "--runs", "1", "--out", str(out), "--methods", "limit",
            "--set", 'source.format="checkins"', "--set", f"source.path={path}",
            "--set", "domain.items={ range = [1, 2] }", "--set", "algorithm.locations_per_user=1",
            "--set", f'algorithm.location_choice="{choice}"', "--set", "seed=3"]
    assert main(args) == 0
    records = json.loads((out / "evaluation.json").read_text())
    ratio = {r["metric"]: r["mean"] for r in records if r["query"] == "entropy"}["published_ratio"]
    assert ratio == published


def test_evaluate_checks_the_times_that_a_first_visit_release_needs(spark, tmp_path, capsys):
    path = _two_location_checkins(tmp_path / "checkins.txt", times=False)
    args = ["evaluate", "conf/sparse_entropy.toml", "--runs", "1", "--out", str(tmp_path / "eval"), "--methods",
            "limit", "--set", 'source.format="checkins"', "--set", f"source.path={path}",
            "--set", "domain.items={ range = [1, 2] }", "--set", "algorithm.locations_per_user=1"]
    assert main(args) != 0
    assert "time" in capsys.readouterr().err
    random = [*args, "--set", 'algorithm.location_choice="random"']
    assert main(random) == 0  # a random choice does not use time
