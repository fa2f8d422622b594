"""DPSense and DPSense-S: quality sensitivities by brute force, the exponential mechanism's
frequencies, the limited counts against direct computation, and whole jobs on MovieLens 100K."""

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dp_spark.bounding import item_rows, keys
from dp_spark.cli import main
from dp_spark.core.domain import ItemDomain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource, exponential_mechanism, exponential_probabilities
from dp_spark.families.dpsense import columns as item_columns
from dp_spark.families.dpsense import theta as dpsense
from dp_spark.io.validation import validate_records
from tests.conftest import ml100k_job, shared_data

THETA_MAX = 4
COLUMNS = 5


def tiny_matrices(count=30, seed=0):
    """Random binary matrices (rows = users' sets of distinct columns), 1 to 7 rows of length 1..5."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        rows = []
        for _ in range(rng.integers(1, 8)):
            length = int(rng.integers(1, COLUMNS + 1))
            rows.append(sorted(rng.choice(COLUMNS, size=length, replace=False).tolist()))
        yield rows


def hist_of(rows, theta_max=THETA_MAX):
    hist = np.zeros(theta_max + 1, dtype=np.int64)
    for row in rows:
        hist[min(len(row), theta_max)] += 1
    return hist


UNIT = 1 << dpsense.QUALITY_GRID_BITS


def by_length_of(rows, theta_max=THETA_MAX, columns=COLUMNS):
    """N[j, r] and S'[j] = Σ ⌊2^k/r⌋ over the rows longer than θ_max, directly from the rows."""
    by_length, long_units = np.zeros((columns, theta_max + 1), dtype=np.int64), np.zeros(columns, dtype=np.int64)
    for row in rows:
        for j in row:
            if len(row) <= theta_max:
                by_length[j, len(row)] += 1
            else:
                long_units[j] += UNIT // len(row)
    return by_length, long_units


def neighbours(rows):
    """Every dataset with one row removed: the add/remove-one-user relation, both ways round."""
    for i in range(len(rows)):
        yield rows[:i] + rows[i + 1:]


THETAS = np.arange(1, THETA_MAX + 1)
EPS2 = Fraction(9, 10)


def test_quality_moves_one_way_by_at_most_theta_max_minus_one():
    """§4.2 (ii): adding a row lowers every q(θ) by a value in [0, θ_max − 1], exactly."""
    worst = 0
    for rows in tiny_matrices():
        q = dpsense.quality(hist_of(rows), THETAS, COLUMNS, EPS2)
        for smaller in neighbours(rows):
            change = q - dpsense.quality(hist_of(smaller), THETAS, COLUMNS, EPS2)  # D = D' + one row
            assert np.all(change <= 0) and np.all(change >= -dpsense.quality_sensitivity(THETA_MAX))
            worst = max(worst, -change.min())
    assert worst == THETA_MAX - 1  # the bound is reached: a row of length ≥ θ_max at θ = 1


def test_quality_is_exact_so_rounding_cannot_exceed_its_sensitivity():
    """In doubles, q(θ) = −(L + d·θ/ε2) is rounded: here L + d/ε2 sits just under 2^27, and one
    added row of length θ_max moved the double q(1) by 255 + 1.9e-9 > Δq = 255. Exact
    Fractions move it by 255 (found by a search over ε2, d and L; the old float quality fails)."""
    theta_max, columns, epsilon_counts = 256, 3767, Fraction(3, 289)
    hist = np.zeros(theta_max + 1, dtype=np.int64)
    hist[2] = 16_414_191  # rows of length 2: each loses one unit at θ = 1, so L = 16,414,191
    bigger = hist.copy()
    bigger[theta_max] += 1
    thetas = np.arange(1, theta_max + 1)
    change = dpsense.quality(hist, thetas, columns, epsilon_counts) - dpsense.quality(bigger, thetas, columns,
                                                                                       epsilon_counts)
    assert Fraction(change[0]) == dpsense.quality_sensitivity(theta_max)
    assert all(Fraction(c) <= dpsense.quality_sensitivity(theta_max) for c in change)
    assert Fraction(dpsense.quality(hist, thetas, columns, epsilon_counts)[0]) == -(
        16_414_191 + columns / epsilon_counts
    )


def brute_force_quality_s(rows, theta, alpha, theta_max, columns, epsilon_counts):
    """qS(θ, α) in Fractions straight from the rows, with the grid-floored weights of docs/dpsense.md:
    a row of length r ≤ θ_max weighs 1 in c^max and ⌊min(1, θ/r)·2^k⌋/2^k in c^θ; a longer row
    weighs θ_max·⌊2^k/r⌋/2^k and θ·⌊2^k/r⌋/2^k."""
    at_max, at_theta = [Fraction(0)] * columns, [Fraction(0)] * columns
    for row in rows:
        r = len(row)
        if r <= theta_max:
            weight_max, weight = Fraction(1), Fraction(min(UNIT, theta * UNIT // r), UNIT)
        else:
            weight_max, weight = Fraction(theta_max * (UNIT // r), UNIT), Fraction(theta * (UNIT // r), UNIT)
        for j in row:
            at_max[j] += weight_max
            at_theta[j] += weight
    bias = sum(abs(m - alpha * c) for m, c in zip(at_max, at_theta))
    return -(bias + alpha * columns * theta / Fraction(epsilon_counts))


@pytest.mark.parametrize("theta_max", [2, THETA_MAX])
def test_quality_s_is_exact_and_equals_a_brute_force_computation(theta_max):
    """Every score is a Fraction equal to qS computed row by row (rows of length 3..5 are long
    at θ_max = 2, rows of length 5 at θ_max = 4)."""
    thetas = np.arange(1, theta_max + 1)
    for rows in tiny_matrices(count=6, seed=4):
        q = dpsense.quality_s(*by_length_of(rows, theta_max), thetas, dpsense.ALPHAS, theta_max, EPS2)
        assert q.shape == (theta_max, len(dpsense.ALPHAS))
        for i, theta in enumerate(thetas):
            for k, alpha in enumerate(dpsense.ALPHAS):
                assert type(q[i, k]) is Fraction
                assert q[i, k] == brute_force_quality_s(rows, int(theta), alpha, theta_max, COLUMNS, EPS2)


WIDE = 10  # columns: room for an added row of every length 1..θ_max + 5


def test_quality_s_moves_by_at_most_alpha_max_theta_max():
    """§4.3 with grid-floored weights: adding one row, of every length 1..θ_max + 5, to random
    small matrices moves every candidate's qS by at most α_max·θ_max, checked exactly."""
    rng = np.random.default_rng(7)
    bound = dpsense.quality_s_sensitivity(THETA_MAX, dpsense.ALPHAS[-1])
    assert bound == 3 * THETA_MAX
    worst = Fraction(0)
    for _ in range(12):
        rows = [sorted(rng.choice(WIDE, size=int(rng.integers(1, WIDE)), replace=False).tolist())
                for _ in range(rng.integers(0, 6))]
        q = dpsense.quality_s(*by_length_of(rows, columns=WIDE), THETAS, dpsense.ALPHAS, THETA_MAX, EPS2)
        for length in range(1, THETA_MAX + 6):
            added = rows + [sorted(rng.choice(WIDE, size=length, replace=False).tolist())]
            other = dpsense.quality_s(*by_length_of(added, columns=WIDE), THETAS, dpsense.ALPHAS, THETA_MAX, EPS2)
            moves = [abs(a - b) for a, b in zip(q.ravel(), other.ravel())]
            assert all(type(m) is Fraction and m <= bound for m in moves)
            worst = max(worst, *moves)
    # The largest move is 2·θ_max (α = 3, θ = θ_max: each column moves by |1 − 3·1|): a row's weight
    # in c^θ is at most its weight in c^max, so |a − α·b| ≤ a·max(1, α − 1) and the spec's α_max·θ_max
    # is safe but not reached.
    assert worst == 2 * THETA_MAX


def test_quality_s_cannot_exceed_its_sensitivity_through_rounding():
    """In doubles a score is rounded to its ulp, so its move between neighbours can exceed ΔqS
    once the ulp is comparable to ΔqS: at ε2 = 10^-15, θ = 4 and α = 3, α·d·θ/ε2 = 6·10^16 (ulp 8),
    and adding the last row below moved the old double score by 16 > ΔqS = 12. Exact, it moves by 8.
    (Only short rows, so the aggregates mean the same to the old and the new code; the case was
    found by a search over random small matrices against the old code.)"""
    epsilon_counts = Fraction(1, 10**15)
    alphas = np.array(dpsense.ALPHAS, dtype=object)
    bound = 3 * THETA_MAX
    rows = [[1, 2, 3, 4], [4], [1, 2, 4], [1, 2, 4], [1, 3], [0, 1, 4], [1, 3], [0, 1, 3, 4]]
    q = dpsense.quality_s(*by_length_of(rows), THETAS, alphas, THETA_MAX, epsilon_counts)
    other = dpsense.quality_s(*by_length_of(rows + [[0, 2, 3, 4]]), THETAS, alphas, THETA_MAX, epsilon_counts)
    moves = [abs(Fraction(a) - Fraction(b)) for a, b in zip(q.ravel(), other.ravel())]
    assert max(moves) <= bound
    assert moves[-1] == 8  # θ = 4, α = 3: the exact move
    assert Fraction(q[-1, -1]) == brute_force_quality_s(rows, 4, Fraction(3), THETA_MAX, COLUMNS, epsilon_counts)


def test_quality_s_falls_back_to_python_ints_beyond_int64():
    """Counts so large that Σ_j |20·c^max_j − m·c^θ_j| could pass 2^63 are summed in Python ints:
    the scores equal the int64 ones scaled up, with no wrap-around."""
    by_length, long_units = by_length_of([[0], [0, 1, 2], [1, 2, 3, 4, 0]])
    huge = 1 << 50  # every row repeated 2^50 times (object arrays: these counts pass int64 too)
    big_by_length, big_long_units = by_length.astype(object) * huge, long_units.astype(object) * huge
    assert dpsense.quality_s_bound(big_by_length, big_long_units, THETA_MAX, dpsense.ALPHAS) >= 2**63
    small = dpsense.quality_s(by_length, long_units, THETAS, dpsense.ALPHAS, THETA_MAX, EPS2)
    large = dpsense.quality_s(big_by_length, big_long_units, THETAS, dpsense.ALPHAS, THETA_MAX, EPS2 / huge)
    assert all(b == huge * a for a, b in zip(small.ravel(), large.ravel()))


def direct_biases(at_max, at_theta, m):
    return np.array([[sum(abs(int(a) - int(k) * int(b)) for a, b in zip(at_max, row)) for k in m] for row in at_theta])


def test_biases_by_sorting_equal_the_direct_sum_with_ties_and_empty_columns():
    """DPSense-S's Σ_j |a_j − m·b_j| for every θ and α by sorting each column between the m's
    equals the direct sum: with columns whose ratio a/b equals some m exactly, columns with
    b = 0 (and a = 0), and ratios just either side of an m."""
    rng = np.random.default_rng(11)
    m = np.arange(20, 61, dtype=np.int64)
    for _ in range(40):
        d = int(rng.integers(1, 40))
        at_theta = rng.integers(0, 30, size=(3, d)).astype(np.int64)
        at_max = rng.integers(0, 2000, size=d).astype(np.int64)
        tied = rng.random(d) < 0.4
        at_max[tied] = at_theta[0, tied] * rng.choice(m, size=int(tied.sum())) + rng.integers(
            -1, 2, size=int(tied.sum())
        )
        at_max = np.maximum(at_max, 0)
        assert dpsense._biases(at_max, at_theta, m).tolist() == direct_biases(at_max, at_theta, m).tolist()


def test_biases_stay_exact_where_doubles_cannot_order_the_ratios():
    """a/b = 20 − 1/b rounds to exactly 20 in doubles once a passes 2^53: the sort would put the
    column on the wrong side of m = 20 (a bias of −1 instead of 1), so such counts take the
    direct sum."""
    b = (1 << 53) // 20 + 7
    at_max, at_theta, m = np.array([20 * b - 1], dtype=np.int64), np.array([[b]], dtype=np.int64), np.array([20, 21])
    assert float(at_max[0]) / float(b) == 20.0  # the rounding the direct sum avoids
    assert dpsense._biases(at_max, at_theta, m).tolist() == [[1, b + 1]]


def test_quality_counts_through_doubles_equal_the_int64_product():
    """The weighted sums go through BLAS in doubles only while they are exact integers there."""
    rng = np.random.default_rng(5)
    by_length = rng.integers(0, 1000, size=(30, 9)).astype(np.int64)
    long_units = rng.integers(0, 1 << 25, size=30).astype(np.int64)
    thetas = np.arange(1, 9)
    fast = dpsense.quality_counts(by_length, long_units, thetas)
    exact = dpsense.quality_counts(by_length.astype(object), long_units.astype(object), thetas, dtype=object)
    assert fast.dtype == np.int64 and fast.tolist() == exact.tolist()
    huge = np.full((2, 9), (1 << 31) + 1, dtype=np.int64)  # unit·Σ_r N_j(r) ≥ 2^53: stays in int64
    assert dpsense.quality_counts(huge, np.zeros(2, dtype=np.int64), thetas).tolist() == \
        dpsense.quality_counts(huge.astype(object), np.zeros(2, dtype=object), thetas, dtype=object).tolist()


def test_limited_counts_equal_the_direct_sum():
    for rows in tiny_matrices(count=10, seed=2):
        limited = dpsense.limited_counts_all(*by_length_of(rows), THETAS)
        for i, theta in enumerate(THETAS):
            direct = np.zeros(COLUMNS)
            for row in rows:
                r = len(row)
                direct[row] += (min(UNIT, theta * UNIT // r) if r <= THETA_MAX else theta * (UNIT // r)) / UNIT
            np.testing.assert_array_equal(limited[i], direct)


@pytest.mark.long
def test_exponential_mechanism_frequencies_match_its_probabilities():
    """20,000 draws at a fixed seed; every candidate's frequency within 4.5 standard errors."""
    scores = np.array([0.0, -1.0, -2.5, -0.5, -4.0, -10.0])
    probabilities = exponential_probabilities(scores, 1.0, 1.0)
    rng = RandomSource(3)
    draws = np.array([exponential_mechanism(rng, scores, 1.0, 1.0) for _ in range(20_000)])
    frequencies = np.bincount(draws, minlength=scores.size) / draws.size
    tolerance = 4.5 * np.sqrt(probabilities * (1 - probabilities) / draws.size) + 1e-4
    assert np.all(np.abs(frequencies - probabilities) <= tolerance)
    # The monotone form doubles the exponent: exp(ε·q/Δ) instead of exp(ε·q/(2Δ)).
    sharp = exponential_probabilities(scores, 1.0, 1.0, monotone=True)
    assert sharp[0] / sharp[1] == pytest.approx(np.e) and probabilities[0] / probabilities[1] == pytest.approx(
        np.e**0.5
    )
    # Scores in the millions do not overflow.
    assert exponential_probabilities(np.array([-3e6, -3e6 - 2]), 1.0, 1.0).sum() == pytest.approx(1.0)


def rows_frame(spark, rows, duplicate_first=False):
    pairs = [(u + 1, j + 1) for u, row in enumerate(rows) for j in row]
    if duplicate_first:
        pairs.append(pairs[0])  # a repeated (user, item) record: still one 1 in the matrix
    return spark.createDataFrame(pd.DataFrame(pairs, columns=["user_id", "item_id"]).astype("int64"))


ROWS = [[0], [0, 1, 2], [1, 2, 3, 4], [0, 1, 2, 3, 4], [4], [2, 3]]
ITEMS = ItemDomain(ids=np.arange(1, COLUMNS + 1), description="1..5", id_range=(1, COLUMNS))


def test_spark_aggregates_match_the_direct_computation(spark):
    rows = item_rows.rows_of(rows_frame(spark, ROWS, duplicate_first=True))
    try:
        assert item_columns.length_histogram(rows, THETA_MAX).tolist() == hist_of(ROWS).tolist()
        by_length, long_units = item_columns.length_by_column(rows, ITEMS, THETA_MAX,
                                                              grid_bits=dpsense.QUALITY_GRID_BITS)
        expected = by_length_of(ROWS)
        assert by_length.dtype == long_units.dtype == np.int64
        assert by_length.tolist() == expected[0].tolist()
        assert long_units.tolist() == expected[1].tolist() == [209_715] * 5  # ⌊2^20/5⌋, exactly
        truth = np.zeros(COLUMNS, dtype=np.int64)
        for row in ROWS:
            truth[row] += 1
        assert item_columns.column_counts(rows, ITEMS).tolist() == truth.tolist()
    finally:
        rows.release()


def test_rows_from_validation_give_the_aggregates_of_rows_built_from_the_records(spark):
    """The run takes its rows and their users by length from validation's pass: with a repeated
    record, a record outside the item domain in a user's row, and a user with no record inside,
    every aggregate equals that of the rows built from the validated records by their own shuffle."""
    frame = rows_frame(spark, ROWS, duplicate_first=True).unionByName(
        spark.createDataFrame([(2, 99), (50, 77)], "user_id long, item_id long"))
    records = keys.with_row_key(frame)
    validated = validate_records(records, ITEMS, None, item_sets=True)
    reference = item_rows.rows_of(validated.records)
    from_validation = item_rows.Rows(validated.item_sets, validated.users_by_items, owned=False)
    try:
        assert from_validation.users_by_length.to_dict() == {1: 2, 2: 1, 3: 1, 4: 1, 5: 1}
        for theta_max in (2, THETA_MAX):
            assert (
                item_columns.length_histogram(from_validation, theta_max).tolist()
                == item_columns.length_histogram(reference, theta_max).tolist()
                == hist_of(ROWS, theta_max).tolist()
            )
            got = item_columns.length_by_column(from_validation, ITEMS, theta_max, grid_bits=dpsense.QUALITY_GRID_BITS)
            want = item_columns.length_by_column(reference, ITEMS, theta_max, grid_bits=dpsense.QUALITY_GRID_BITS)
            assert [a.tolist() for a in got] == [a.tolist() for a in want]
        for theta in (1, 2, 3, 5):
            assert from_validation.truncation(theta) == reference.truncation(theta)
            for limit in item_rows.LIMITS:
                assert (
                    item_columns.limited_counts(
                        from_validation, ITEMS, theta, limit, 5, grid_bits=dpsense.GRID_BITS
                    ).tolist()
                    == item_columns.limited_counts(
                        reference, ITEMS, theta, limit, 5, grid_bits=dpsense.GRID_BITS
                    ).tolist()
                )
    finally:
        reference.release()
        from_validation.release()
        assert validated.cached.is_cached  # validation's cache, released by validation
        validated.release()


@pytest.mark.parametrize("theta", [1, 2, 3, 5])
def test_limited_rows_keep_their_mass_at_most_theta(spark, theta):
    """Normalised: every row adds r·⌊θ·2^10/r⌋ ≤ θ·2^10 grid units, which the columns sum to;
    sampled: every row keeps min(r, θ) of its ones."""
    unit = 1 << dpsense.GRID_BITS
    rows = item_rows.rows_of(rows_frame(spark, ROWS))
    try:
        normalized = item_columns.normalized_counts(rows, ITEMS, theta, grid_bits=dpsense.GRID_BITS)
        per_row = [len(r) * min(unit, theta * unit // len(r)) for r in ROWS]
        assert all(mass <= theta * unit for mass in per_row)
        assert normalized.sum() == sum(per_row)
        expected = np.zeros(COLUMNS, dtype=np.int64)
        for row in ROWS:
            expected[row] += min(unit, theta * unit // len(row))
        assert normalized.tolist() == expected.tolist()
        sampled = item_columns.sampled_counts(rows, ITEMS, theta, seed=5)
        assert sampled.sum() == sum(min(len(r), theta) for r in ROWS)
        assert np.all(sampled <= item_columns.column_counts(rows, ITEMS))
    finally:
        rows.release()


def test_publish_columns_pays_both_parts():
    budget = Budget(1)
    split = dpsense.default_split(Fraction(1))
    counts = np.array([5 * 1024, 3 * 1024, 0], dtype=np.int64)
    noisy = dpsense.publish_columns(counts, 4, "normalize", split["epsilon_counts"], budget, RandomSource(1))
    assert noisy.shape == (3,) and budget.spent == Fraction(9, 10)
    (entry,) = budget.entries
    assert (entry.sensitivity, entry.noise_scale) == (4, Fraction(40, 9))


def ml100k_dpsense(tmp_path, name="dpsense", epsilon=1.0, extra=""):
    return ml100k_job(tmp_path, f'name = "{name}"\ntheta_max = 64\n{extra}', seed=6, epsilon=epsilon,
                      name="dpsense.toml")


def ml100k_rows():
    ratings = pd.read_csv(shared_data("ml-100k") / "u.data.gz", sep="\t", names=["user", "item", "rating", "time"])
    return ratings.drop_duplicates(["user", "item"])


def test_dpsense_at_huge_epsilon_picks_theta_max_and_releases_the_normalised_counts(spark, tmp_path):
    """At ε = 10^6 the quality is all loss, which is least at θ_max, and the noise vanishes:
    the release must be the grid-floored normalised counts, computed here with pandas."""
    assert main(["run", str(ml100k_dpsense(tmp_path, epsilon=1e6))]) == 0
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    assert report["algorithm"]["chosen"] == {"theta": 64, "alpha": 1.0}
    ratings = ml100k_rows()
    lengths = ratings.groupby("user")["item"].transform("size")
    ratings = ratings.assign(w=np.minimum(1024, (64 * 1024) // lengths) / 1024)
    expected = ratings.groupby("item")["w"].sum().reindex(np.arange(1, 1683), fill_value=0).to_numpy()
    released = pd.read_parquet(tmp_path / "out" / "item_counts").sort_values("item_id")["noisy_count"].to_numpy()
    np.testing.assert_allclose(released, expected, atol=1e-9)
    assert [e["step"] for e in report["ledger"]] == ["theta", "column_counts"]
    assert report["epsilon_spent"] == report["epsilon_total"]


@pytest.mark.parametrize("name, limit", [("dpsense", "sample"), ("dpsense_s", "normalize")])
def test_dpsense_jobs_on_movielens_100k(spark, tmp_path, name, limit):
    assert main(["run", str(ml100k_dpsense(tmp_path, name, extra=f'limit = "{limit}"'))]) == 0
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    released = pd.read_parquet(tmp_path / "out" / "item_counts")
    assert len(released) == 1682 and report["algorithm"]["specification"] == dpsense.SPEC_SECTIONS[name]
    chosen = report["algorithm"]["chosen"]
    assert 1 <= chosen["theta"] <= 64 and 1 <= chosen["alpha"] <= 3
    assert sum(e["epsilon"] for e in report["ledger"]) == pytest.approx(1.0)
    # Sampled rows give integer counts plus integer noise; normalised ones are on the grid 2^-10,
    # and DPSense-S multiplies them by α afterwards.
    units = released["noisy_count"].to_numpy() / chosen["alpha"] * (1 if limit == "sample" else 1024)
    np.testing.assert_allclose(units, np.round(units), atol=1e-6)
    if name == "dpsense":
        # θ ≤ 64 leaves the most rated movie (Star Wars, 583 users) far ahead of the noise.
        assert 50 in released.nlargest(10, "noisy_count")["item_id"].tolist()


def test_evaluate_on_movielens_100k_compares_dpsense_with_the_baselines(spark, tmp_path):
    out = tmp_path / "eval"
    args = ["evaluate", str(ml100k_dpsense(tmp_path)), "--runs", "2", "--m", "64", "--out", str(out),
            "--methods", "dpsense,dpsense_s,lpa,alpa,fpa,gs"]
    assert main(args) == 0
    records = json.loads((out / "evaluation.json").read_text())
    cells = {(r["method"], r["query"], r["metric"]): r for r in records}
    for method in ("dpsense", "dpsense_s", "lpa", "alpa", "fpa", "gs"):
        for metric in ("mae", "mre", "top10", "ndcg10", "top50_mae", "top100_mre"):
            assert cells[(method, "columns", metric)]["runs"] == 2
    assert 1 <= cells[("dpsense", "theta", "chosen")]["mean"] <= 64
    assert 1 <= cells[("oracle", "theta", "best_for_mae")]["mean"] <= 64
    # The oracle θ minimises the expected MAE over all θ, so no run of DPSense can do much better
    # (3% allows for the noise of two runs: their standard deviation here is about 0.5%).
    oracle = cells[("oracle", "columns", "expected_mae")]["mean"]
    assert cells[("dpsense", "columns", "mae")]["mean"] >= 0.97 * oracle
    # ALPA gives every column the same value, so its top-10 NDCG is that of an arbitrary order.
    assert cells[("dpsense", "columns", "ndcg10")]["mean"] > cells[("alpa", "columns", "ndcg10")]["mean"]


@pytest.mark.unit
def test_under_zcdp_the_choice_of_theta_is_a_bounded_range_step_at_twice_its_share():
    """The exponential mechanism is ε-bounded range, ε²/8 in ρ: θ's share of ρ, handed out as
    ε_k ≤ √(2ρ_k), buys it at 2ε_k, as the counts' bound (before, as a pure step, the same ρ bought
    only ε_k)."""
    from dp_spark.core import zcdp
    from dp_spark.core.accounting import Accounting

    rho = zcdp.rho_of(1.0, 1e-6)
    share = zcdp.epsilon_for_rho(rho / 10)
    rows = next(iter(tiny_matrices(count=1, seed=4)))
    for choose, arguments in ((dpsense.choose_theta, (hist_of(rows), THETA_MAX, COLUMNS)),
                              (dpsense.choose_theta_alpha, (*by_length_of(rows), THETA_MAX))):
        budget = Budget(1, accounting=Accounting("laplace", rho, 1e-6))
        choose(*arguments, {"epsilon_theta": share, "epsilon_counts": EPS2}, budget, RandomSource(5))
        entry = budget.entries[0]
        assert entry.bounded_range and entry.epsilon == 2 * share
        assert budget.rho_spent == share**2 / 2 <= rho / 10
        pure = Budget(1)  # under pure ε the step spends its share, as before
        choose(*arguments, {"epsilon_theta": share, "epsilon_counts": EPS2}, pure, RandomSource(5))
        assert pure.spent == share and not pure.entries[0].bounded_range
