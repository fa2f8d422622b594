"""FRAPP: the samplers against their matrices (frequencies and exact ratio bounds), reconstruction
exact in expectation, Apriori against brute force, paper 003's Table 3 on UCI Adult, and jobs."""

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError
from dp_spark.families.frapp import mining as fm
from dp_spark.families.frapp import perturbation as frapp
from dp_spark.jobs.config import build_config
from tests.conftest import ROOT, shared_data
from tests.stats import chi2_critical, chi2_statistic

SIZES = [2, 3]  # n_C = 6: small enough to enumerate every record and every output
RECORDS = list(itertools.product(*[range(s) for s in SIZES]))
DRAWS = 30_000


# ---------------------------------------------------------------------------
# Exact output distributions, by enumeration (independent of the samplers).


def gd_distribution(u, gamma: Fraction) -> dict:
    x = frapp.gamma_x(gamma, len(RECORDS))
    return {v: gamma * x if v == u else x for v in RECORDS}


def bit_outputs(sizes):
    """Every output of the bit schemes: per attribute a bit set over its values."""
    return list(itertools.product(*[range(1 << s) for s in sizes]))


def mask_distribution(u, p: Fraction, sizes=SIZES) -> dict:
    out = {}
    for v in bit_outputs(sizes):
        prob = Fraction(1)
        for a, size in enumerate(sizes):
            for value in range(size):
                original = int(u[a] == value)
                prob *= p if (v[a] >> value) & 1 == original else 1 - p
        out[v] = prob
    return out


def cp_distribution(u, k: int, rho: Fraction, sizes=SIZES) -> dict:
    """J uniform on 0..K, j = min(J, m) items of u copied, every other item inserted with ρ."""
    m = len(sizes)
    universe = [(a, value) for a, size in enumerate(sizes) for value in range(size)]
    own = [(a, u[a]) for a in range(m)]
    out = {}
    for v in bit_outputs(sizes):
        present = {(a, value) for a, value in universe if (v[a] >> value) & 1}
        prob = Fraction(0)
        for big_j in range(k + 1):
            j = min(big_j, m)
            for copied in itertools.combinations(own, j):
                if not set(copied) <= present:
                    continue
                inserted = len(present) - j
                prob += (Fraction(1, k + 1) / math.comb(m, j) * rho ** inserted
                         * (1 - rho) ** (len(universe) - j - inserted))
        out[v] = prob
    return out


def sampled_frequencies(sampler, u, outputs) -> np.ndarray:
    codes = np.tile(np.asarray(u, dtype=np.int64), (DRAWS, 1))
    drawn = sampler(codes)
    index = {v: i for i, v in enumerate(outputs)}
    return np.bincount([index[tuple(row)] for row in drawn.tolist()], minlength=len(outputs))


def assert_matches(observed: np.ndarray, probabilities: list) -> None:
    expected = np.array([float(q) for q in probabilities]) * observed.sum()
    keep = expected > 0
    assert observed[~keep].sum() == 0  # impossible outputs never appear
    statistic = chi2_statistic(observed[keep], expected[keep])
    assert statistic < chi2_critical(int(keep.sum()) - 1), statistic


# ---------------------------------------------------------------------------
# Samplers.


@pytest.mark.parametrize("randomized, gamma", [(False, Fraction(3)), (True, Fraction(3)),
                                               (True, Fraction(11, 10)), (True, Fraction(19))])
def test_gamma_diagonal_sampler_frequencies_match_the_matrix(randomized, gamma):
    """RAN-GD is checked against DET-GD's matrix: its random r averages out (§6.3). With n_C = 6,
    γ = 1.1 (below 2(n_C−1)/(n_C−2) = 2.5) and γ = 19 (above 2(n_C−1) = 10) are where the paper's
    α = γx/2 would clip the keep probability."""
    for i, u in enumerate(RECORDS[:3]):
        rng = RandomSource(10 + i)
        counts = sampled_frequencies(lambda c, rng=rng: frapp.perturb_gd(c, SIZES, gamma, rng, randomized), u, RECORDS)
        assert_matches(counts, [gd_distribution(u, gamma)[v] for v in RECORDS])


# The paper's γ = 19, γ ≈ e (ε = 1), and γ = 1.1 and 1.5 where its α would clip; n_C = 2000 is CENSUS.
RAN_GD_GAMMAS = [Fraction(11, 10), Fraction(3, 2), frapp.gamma_below(Fraction(1)), Fraction(19)]


def paper_clipped_mean_keep(gamma: Fraction, n_c: int) -> Fraction:
    """The mean keep probability of the old RAN-GD sampler, exactly. r was uniform on
    [−γx/2, γx/2], so the keep probability p = (γ−1)x + r·n_C/(n_C−1) was uniform on [low, high],
    and the comparison u < p clipped it to [0, 1]: the mean is ∫ clip(p) dp / (high − low)."""
    x = frapp.gamma_x(gamma, n_c)
    centre, half_width = (gamma - 1) * x, gamma * x / 2 * Fraction(n_c, n_c - 1)
    low, high = centre - half_width, centre + half_width
    a, b = max(low, Fraction(0)), min(high, Fraction(1))
    between = (b * b - a * a) / 2 if b > a else Fraction(0)  # ∫ p dp where 0 ≤ p ≤ 1
    above = max(high - max(low, Fraction(1)), Fraction(0))  # ∫ 1 dp where p > 1
    return (between + above) / (high - low)


@pytest.mark.parametrize("n_c", [4, 2000])
@pytest.mark.parametrize("gamma", RAN_GD_GAMMAS)
def test_ran_gd_worst_ratio_is_gamma_exactly(gamma, n_c):
    """Every keep probability RAN-GD draws from is a fraction in [0, 1] and their mean is exactly
    (γ−1)x, so the worst ratio, from exact fractions, is γ (the old
    sampler clipped its keep probability at 0, which broke this)."""
    keep = frapp.ran_gd_keep_probabilities(gamma, n_c)
    assert len(keep) == frapp.RAN_GD_POINTS and all(0 < k < 1 for k in keep)
    assert sum(keep, Fraction(0)) / len(keep) == (gamma - 1) * frapp.gamma_x(gamma, n_c)
    assert frapp.gd_worst_ratio(keep, n_c) == gamma
    assert fm.Scheme.of("ran_gd", gamma, [n_c]).ratio == pytest.approx(float(gamma), rel=1e-15)


def test_the_paper_clipped_sampler_fails_the_ratio_check():
    """The check above rejects the old sampler: at γ = 1.1 on CENSUS (n_C = 2000) clipping lifts
    the mean keep probability, and the true ε is 0.176, not ln 1.1 = 0.095."""
    gamma, n_c = Fraction(11, 10), 2000
    ratio = frapp.gd_worst_ratio([paper_clipped_mean_keep(gamma, n_c)], n_c)
    assert ratio > gamma
    assert math.log(ratio) == pytest.approx(0.176, abs=5e-4)
    at_1_5 = frapp.gd_worst_ratio([paper_clipped_mean_keep(Fraction(3, 2), n_c)], n_c)
    assert math.log(at_1_5) == pytest.approx(0.419, abs=5e-4)  # against ln 1.5 = 0.405
    # Where nothing clips, the old formula's mean is (γ−1)x, and the same check passes it.
    assert frapp.gd_worst_ratio([paper_clipped_mean_keep(Fraction(19), n_c)], n_c) == 19


def test_ran_gd_alpha_is_the_papers_unless_it_would_clip():
    x = frapp.gamma_x(Fraction(19), 2000)
    assert frapp.ran_gd_alpha(Fraction(19), 2000) == 19 * x / 2  # CENSUS at γ = 19: the paper's setting
    for n_c in (4, 2000):
        edge = Fraction(2 * (n_c - 1), n_c - 2)  # below this γ, γx/2 would push the keep probability below 0
        for gamma in (edge, 2 * (n_c - 1)):  # at both edges the paper's α just fits
            assert frapp.ran_gd_alpha(gamma, n_c) == gamma * frapp.gamma_x(gamma, n_c) / 2
        for gamma in (edge - Fraction(1, 100), Fraction(2 * n_c)):  # beyond them α is smaller
            paper = gamma * frapp.gamma_x(gamma, n_c) / 2
            assert 0 < frapp.ran_gd_alpha(gamma, n_c) < paper
            assert min(frapp.ran_gd_keep_probabilities(gamma, n_c)) > 0
            assert max(frapp.ran_gd_keep_probabilities(gamma, n_c)) < 1


def test_ran_gd_keep_rate_at_gamma_1_1_is_gamma_minus_one_times_x():
    """The real sampler's keep decisions, seeded, on CENSUS's n_C = 2000 at γ = 1.1: the keep rate
    is (γ−1)x = 5.0e-5. 4·10^6 records: E[kept] = 200 (sd 14.1), allowed ±4.5 sd. The old sampler's
    clipped mean keep probability, 9.6e-5, gives 384 kept (13 sd too many)."""
    gamma, n_c, n = Fraction(11, 10), 2000, 4_000_000
    kept = int(frapp.gd_keep(RandomSource(27), n, gamma, n_c, randomized=True).sum())
    p = float((gamma - 1) * frapp.gamma_x(gamma, n_c))
    assert abs(kept - n * p) < 4.5 * math.sqrt(n * p * (1 - p)), kept
    assert n * float(paper_clipped_mean_keep(gamma, n_c)) - n * p > 9 * math.sqrt(n * p)  # the test can tell


def test_exact_bernoulli_of_a_table_reads_on_after_a_tie():
    """The comparison with a probability's binary expansion, forced through its tie branch."""

    class Words:
        def __init__(self, words):
            self.words_left = list(words)

        def words(self, n):
            taken, self.words_left = self.words_left[:n], self.words_left[n:]
            return np.array(taken, dtype=np.uint64)

    third = Fraction(1, 3)  # binary 0.0101…: every 64-bit word is 0x5555…5555
    digit = 0x5555_5555_5555_5555
    index = np.zeros(4, dtype=np.int64)
    # First words: below, above, tie, tie; then the third record ties again and falls below, the
    # fourth lands above.
    rng = Words([digit - 1, digit + 1, digit, digit, digit, digit - 1, digit + 1])
    assert frapp.bernoulli_of_table(rng, (third,), index).tolist() == [True, False, True, False]
    assert rng.words_left == []
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        frapp.bernoulli_of_table(Words([0]), (Fraction(1),), np.zeros(1, dtype=np.int64))
    # Seeded, with a denominator above 2^64 that RandomSource.below could not take.
    big = Fraction(2**70 // 3, 2**70)
    drawn = frapp.bernoulli_of_table(RandomSource(3), (big,), np.zeros(200_000, dtype=np.int64))
    assert abs(drawn.mean() - 1 / 3) < 4.5 * math.sqrt(2 / 9 / 200_000)


def test_mask_sampler_frequencies_match_the_matrix():
    p = frapp.mask_p(Fraction(3), len(SIZES))
    outputs = bit_outputs(SIZES)
    for i, u in enumerate(RECORDS[:2]):
        rng = RandomSource(20 + i)
        counts = sampled_frequencies(lambda c, rng=rng: frapp.perturb_mask(c, SIZES, p, rng), u, outputs)
        assert_matches(counts, [mask_distribution(u, p)[v] for v in outputs])


def test_cut_and_paste_sampler_frequencies_match_the_enumeration():
    rho = Fraction(2, 5)
    outputs = bit_outputs(SIZES)
    for k in (1, 3):  # K < m and K > m
        rng = RandomSource(30 + k)
        u = RECORDS[4]
        counts = sampled_frequencies(lambda c, k=k, rng=rng: frapp.perturb_cut_paste(c, SIZES, k, rho, rng), u, outputs)
        assert_matches(counts, [cp_distribution(u, k, rho)[v] for v in outputs])


def worst_ratio(distribution) -> Fraction:
    tables = [distribution(u) for u in RECORDS]
    return max(a[v] / b[v] for a in tables for b in tables for v in a)


def test_ratio_bounds_hold_exactly():
    gamma = Fraction(19)
    assert worst_ratio(lambda u: gd_distribution(u, gamma)) == gamma
    p = frapp.mask_p(gamma, len(SIZES))
    assert worst_ratio(lambda u: mask_distribution(u, p)) <= gamma
    assert worst_ratio(lambda u: mask_distribution(u, p + Fraction(1, 1 << 20))) > gamma  # p is (nearly) tight
    for k in (1, 2, 5):
        rho = frapp.cp_rho(Fraction(9), k, len(SIZES))
        exact = worst_ratio(lambda u, k=k, rho=rho: cp_distribution(u, k, rho))
        assert exact <= 9
        assert float(exact) == pytest.approx(frapp.cp_ratio(float(rho), k, len(SIZES)), rel=1e-9)


def test_mask_and_cut_and_paste_parameters_of_the_paper():
    gamma = Fraction(19)
    assert round(float(frapp.mask_p(gamma, 6)), 4) == 0.5610
    assert round(float(frapp.mask_p(gamma, 7)), 4) == 0.5524
    # K = 3, ρ = 0.494 meets γ = 19 with room (γ_CP ≈ 15.4); the tight ρ is ≈ 0.4514 (§6.5).
    assert frapp.cp_ratio(0.494, 3, 6) == pytest.approx(15.417, abs=1e-3)
    assert float(frapp.cp_rho(gamma, 3, 6)) == pytest.approx(0.4514, abs=1e-4)
    assert frapp.condition_number("det_gd", 1, [4, 5, 5, 5, 2, 2], gamma) == pytest.approx(112.1, abs=0.05)
    with pytest.raises(ValueError, match="too small"):
        frapp.cp_rho(Fraction(4), 3, 6)  # even ρ = 1 leaves a ratio of K + 1 = 4


def test_epsilon_and_gamma_conversions_never_undercount():
    for eps in (Fraction(1, 10), Fraction(1), Fraction(2944438979, 10**9), Fraction(8)):
        gamma = frapp.gamma_below(eps)
        assert math.log(gamma) <= eps
        assert math.exp(float(eps)) - float(gamma) < 1e-6 * math.exp(float(eps))
    assert frapp.epsilon_of(19) >= math.log(19)
    assert float(frapp.epsilon_of(19)) == pytest.approx(math.log(19), abs=2e-9)


# ---------------------------------------------------------------------------
# Reconstruction, in expectation, on an enumerated example.

DATA = [(0, 0), (0, 0), (0, 1), (1, 2), (1, 2), (1, 2), (0, 2), (1, 0)]
ITEMSETS = [((0, 0),), ((1, 2),), ((0, 1), (1, 2)), ((0, 0), (1, 0))]


def true_support(itemset) -> float:
    return sum(all(r[a] == v for a, v in itemset) for r in DATA) / len(DATA)


def expected_statistics(distribution, itemset, scheme, p=None) -> np.ndarray:
    """E[level statistics] = Σ over records and outputs of P(output | record) · statistics(output)."""
    total = np.zeros(frapp.statistics_length([itemset], scheme))
    for record in DATA:
        for output, prob in distribution(record).items():
            total += float(prob) * frapp.level_statistics(np.array([output]), [itemset], scheme, p)
    return total


@pytest.mark.parametrize("itemset", ITEMSETS)
def test_reconstruction_is_exact_in_expectation(itemset):
    truth = true_support(itemset)
    gamma = Fraction(4)
    stats = expected_statistics(lambda u: gd_distribution(u, gamma), itemset, "det_gd")
    assert frapp.reconstruct(stats, [itemset], "det_gd", SIZES, len(DATA), gamma)[0] == pytest.approx(truth, abs=1e-12)
    p = frapp.mask_p(gamma, len(SIZES))
    stats = expected_statistics(lambda u: mask_distribution(u, p), itemset, "mask", p)
    assert frapp.reconstruct(stats, [itemset], "mask", SIZES, len(DATA))[0] == pytest.approx(truth, abs=1e-9)
    rho = Fraction(3, 10)
    for k in (2, 3):  # every itemset length here is ≤ K
        stats = expected_statistics(lambda u, k=k: cp_distribution(u, k, rho), itemset, "cut_paste")
        got = frapp.reconstruct(stats, [itemset], "cut_paste", SIZES, len(DATA), cp_k=k, rho=rho)[0]
        assert got == pytest.approx(truth, abs=1e-9)


def test_cut_and_paste_cannot_resolve_itemsets_longer_than_k():
    """At most K items are copied, so the (k+1)-system has rank K + 1 (why C&P fails beyond K)."""
    assert np.linalg.matrix_rank(frapp.cp_transition(3, 6, 3, 0.494)) == 4
    assert np.linalg.matrix_rank(frapp.cp_transition(4, 6, 3, 0.494)) == 4
    assert np.allclose(frapp.cp_transition(4, 6, 3, 0.494).sum(axis=0), 1)


# ---------------------------------------------------------------------------
# Apriori.


def brute_force_frequent(rows: list[tuple], sizes: list[int], sup_min: float) -> dict:
    out = {}
    for length in range(1, len(sizes) + 1):
        for attrs in itertools.combinations(range(len(sizes)), length):
            for values in itertools.product(*[range(sizes[a]) for a in attrs]):
                itemset = tuple(zip(attrs, values))
                support = sum(all(r[a] == v for a, v in itemset) for r in rows) / len(rows)
                if support >= sup_min:
                    out[itemset] = support
    return out


def test_apriori_on_spark_matches_brute_force(spark):
    sizes = [3, 2, 4, 2]
    rng = np.random.default_rng(5)
    # Skewed values, so that itemsets of every length are frequent.
    rows = [tuple(int(min(rng.geometric(0.6) - 1, s - 1)) for s in sizes) for _ in range(300)]
    table = spark.createDataFrame(pd.DataFrame(rows, columns=fm.code_columns(len(sizes)))).repartition(3)
    for sup_min in (0.02, 0.1):
        expected = brute_force_frequent(rows, sizes, sup_min)
        found = fm.mine(table, sizes, None, sup_min)
        assert set(found) == set(expected)
        assert all(found[i] == pytest.approx(expected[i], abs=1e-12) for i in expected)
        assert max(len(i) for i in found) == len(sizes) if sup_min == 0.02 else True


def test_accuracy_metrics_by_hand():
    truth = {((0, 0),): 0.5, ((0, 1),): 0.3, ((0, 0), (1, 1)): 0.2}
    found = {((0, 0),): 0.6, ((1, 0),): 0.1, ((0, 0), (1, 1)): 0.1}
    got = frapp.accuracy(truth, found)
    assert got[1] == pytest.approx({"frequent_itemsets": 2.0, "support_error": 20.0, "sigma_plus": 50.0,
                                    "sigma_minus": 50.0})
    assert got[2]["support_error"] == pytest.approx(50.0)
    assert got[2]["sigma_minus"] == 0.0


# ---------------------------------------------------------------------------
# Paper 003 Table 3 and the job.


def adult_config(tmp_path, **algorithm) -> dict:
    import tomllib

    raw = tomllib.loads((ROOT / "conf" / "adult_frapp.toml").read_text())
    raw["source"]["path"] = str(shared_data("adult"))
    raw["output"] = str(tmp_path / "out")
    raw["algorithm"].update(algorithm)
    return raw


def test_exact_apriori_reproduces_table_3_census_row(spark, tmp_path):
    from dp_spark.io.sources import read_whole_records

    cfg = build_config(adult_config(tmp_path))
    specs = list(cfg.frapp["specs"])
    table = fm.coded(read_whole_records(spark, cfg.source), specs)[0].cache()
    assert table.count() == 48_842  # adult.data and adult.test, '?' kept
    found = fm.mine(table, fm.sizes_of([s.attribute() for s in specs]), None, 0.02)
    per_length = [sum(len(i) == k for i in found) for k in range(1, 7)]
    assert per_length == [19, 102, 203, 165, 64, 10]
    table.unpersist()


def write_people(tmp_path, users=400, per_user=3) -> str:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({
        "person": np.repeat(np.arange(users), per_user),
        "age": rng.integers(18, 90, users * per_user),
        "sex": rng.choice(["F", "M"], users * per_user),
    })
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    return str(path)


def people_config(tmp_path, users=True, **extra) -> str:
    """Without ``users`` the person column is not declared, so every row counts as one user."""
    path = write_people(tmp_path)
    lines = [f'output = "{tmp_path / "out"}"', "seed = 4", "[source]", 'format = "csv"', f'path = "{path}"',
             "columns = { user_id = \"person\" }" if users else "", "[domain]",
             'records = [{ column = "age", edges = [40, 65] }, { column = "sex", values = ["F", "M"] }]',
             "[privacy]", "gamma = 9", "[algorithm]", 'name = "frapp"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    (tmp_path / "job.toml").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "job.toml")


@pytest.mark.parametrize("scheme", ["det_gd", "ran_gd", "mask"])
def test_job_publishes_the_records_it_mined(spark, tmp_path, scheme):
    """The itemsets are mined from exactly the published perturbed records: recomputing the
    1-itemset supports from perturbed_records/ gives the released numbers."""
    config = people_config(tmp_path, scheme=scheme, records_per_user=2, sup_min=0.05)
    assert main(["run", config]) == 0
    out = tmp_path / "out"
    report = json.loads((out / "privacy.json").read_text())
    assert report["epsilon_spent"] == pytest.approx(2 * math.log(9), abs=1e-8)  # two records per user
    assert report["algorithm"]["parameters"]["scheme"] == scheme
    published = pd.read_parquet(out / "perturbed_records")
    assert len(published) == 800 and list(published.columns) == ["age", "sex"]
    itemsets = pd.read_parquet(out / "frequent_itemsets")
    attributes = [
        fm.AttributeSpec("age", (40.0, 65.0)).attribute(),
        fm.AttributeSpec("sex", values=("F", "M")).attribute(),
    ]
    sizes = fm.sizes_of(attributes)
    cfg_scheme = fm.Scheme.of(scheme, Fraction(9), sizes)
    for row in itemsets[itemsets["length"] == 1].itertuples():
        name, label = row.itemset.split("=", 1)
        a = [x.name for x in attributes].index(name)
        v = attributes[a].labels.index(label)
        if scheme == "mask":
            bits = published[name].map(lambda labels, label=label: int(label in list(labels)))
            w0, w1 = frapp.mask_weights(cfg_scheme.p)
            expected = float(np.where(bits == 1, w1, w0).mean())
        else:
            observed = float((published[name] == label).mean())
            expected = frapp.reconstruct_gd(observed, ((a, v),), sizes, Fraction(9))
        assert row.support == pytest.approx(expected, abs=1e-9)


@pytest.mark.spark  # cli.main starts the session itself
def test_records_outside_the_domain_are_dropped_or_in_strict_mode_refused(tmp_path, capsys):
    config = people_config(tmp_path)
    text = open(config).read().replace('values = ["F", "M"]', 'values = ["F"]')
    open(config, "w").write(text)
    assert main(["run", config, "--diagnostics", str(tmp_path / "diagnostics.json")]) == 0
    found = json.loads((tmp_path / "diagnostics.json").read_text())["coverage"]
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    dropped = found["rows_outside_domain"]["records"]
    assert dropped > 0 and report["outputs"]["perturbed_records"]["rows"] == found["rows_kept_by_bounding"]
    open(config, "w").write(text + "\n[guards]\nstrict = true\n")
    assert main(["run", config]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "column 'sex' has values missing or outside its public domain" in err and str(dropped) not in err


@pytest.mark.parametrize("change, message", [
    ({"privacy": {"gamma": 19, "epsilon": 1}}, "exactly one of privacy.epsilon and privacy.gamma"),
    ({"privacy": {"gamma": 1}}, "must be > 1"),
    ({"algorithm": {"name": "frapp", "scheme": "cut_paste", "cp_rho": 0.2}}, "raise cp_rho"),
    ({"algorithm": {"name": "frapp", "cp_k": 2}}, "Cut-and-Paste parameter"),
    ({"algorithm": {"name": "frapp", "sup_min": 0}}, "sup_min"),
    ({"domain": {"records": [{"column": "age", "edges": [3, 1]}]}}, "increasing"),
    ({"domain": {"records": [{"column": "sex", "values": ["F"], "edges": [1]}]}}, "exactly one of"),
    ({"source": {"format": "movielens-1m", "path": "x"}}, "whole records"),
])
def test_config_errors(tmp_path, change, message):
    raw = adult_config(tmp_path)
    raw.update(change)
    with pytest.raises(ConfigError, match=message):
        build_config(raw)


def test_ran_gd_at_gamma_1_5_charges_ln_1_5_and_reports_the_alpha_used(tmp_path):
    raw = adult_config(tmp_path, scheme="ran_gd")
    raw["privacy"] = {"gamma": 1.5}
    cfg = build_config(raw)
    assert float(cfg.epsilon) == pytest.approx(math.log(1.5), abs=2e-9)
    parameters = cfg.frapp["scheme"].parameters()
    assert parameters["worst_ratio"] == 1.5 and parameters["record_space"] == 2000
    assert parameters["alpha"] == float(frapp.ran_gd_alpha(Fraction(3, 2), 2000)) < parameters["alpha_paper"]


def test_epsilon_gives_the_largest_gamma_below_it(tmp_path):
    raw = adult_config(tmp_path)
    raw["privacy"] = {"epsilon": 1.0}
    cfg = build_config(raw)
    assert cfg.epsilon == 1
    assert math.e - 1e-8 < float(cfg.frapp["scheme"].gamma) <= math.e


@pytest.mark.spark  # cli.main starts the session itself
def test_evaluate_reports_exact_counts_and_errors_per_length(tmp_path):
    config = people_config(tmp_path, users=False, sup_min=0.05)
    out = tmp_path / "evaluation"
    assert main(["evaluate", config, "--methods", "exact,det_gd,cut_paste", "--runs", "2", "--out", str(out)]) == 0
    records = json.loads((out / "evaluation.json").read_text())
    frame = pd.read_csv(tmp_path / "people.csv")
    rows = [(int(a >= 40) + int(a >= 65), int(s == "M")) for a, s in zip(frame["age"], frame["sex"])]
    exact = {r["query"]: r["mean"] for r in records if r["method"] == "exact"}
    brute = brute_force_frequent(rows, [3, 2], 0.05)
    assert exact == {f"len{k}": sum(len(i) == k for i in brute) for k in (1, 2)}
    per_method = {r["method"] for r in records if r["metric"] == "support_error"}
    assert per_method == {"det_gd", "cut_paste"}
    condition = {r["method"]: r["mean"] for r in records if r["metric"] == "condition_number" and r["query"] == "len1"}
    assert condition["det_gd"] == pytest.approx((9 + 6 - 1) / (9 - 1))
