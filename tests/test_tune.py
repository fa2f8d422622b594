"""`dp-spark tune` (NOT private): SRA's expected item-count error at a bound against a hand
computation and a simulation of SRA's sampling, and the command on the demo config."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dp_spark.cli import main
from dp_spark.core.domain import ItemDomain
from dp_spark.core.mechanisms import exponential_probabilities
from dp_spark.io import datasets
from dp_spark.lab import bound_curve, tune
from dp_spark.release import bound_selection
from tests.conftest import ROOT


def discrete_laplace_variance(scale: float) -> float:
    """2r/(1 − r)², r = e^(−1/scale): written out here, not taken from core.accuracy."""
    r = math.exp(-1 / scale)
    return 2 * r / (1 - r) ** 2


# User 1 has four records (items 10, 10, 20, 30), user 2 one (item 10); four items in the domain.
HAND = pd.DataFrame({"user_id": [1, 1, 1, 1, 2], "item_id": [10, 10, 20, 30, 10]})
HAND_SETUP = tune.TuneSetup("sra", "laplace", {}, Fraction(1), {"epsilon_items": Fraction(1)}, 4, None)


def hand_norms(candidates) -> dict[int, list[int]]:
    """{user cap: the norms at it} for every cap the candidates allow."""
    table = bound_curve.user_item_table(HAND).rename(columns={"item_id": "cell"})
    spread = candidates[-1] - candidates[0]
    return {cap: bound_selection.squared_bias_norms(table, candidates, 1, cap) for cap in range(min(1, spread),
                                                                                            spread + 1)}


def test_expected_error_matches_the_hand_computation():
    # b = 2: user 1 keeps each record with probability 1/2, user 2 keeps theirs.
    # E[count] = 10: 2·1/2 + 1 = 2, 20: 1/2, 30: 1/2; true 3, 1, 1: bias 1, 1/2, 1/2 -> bias² sum 3/2.
    # Hypergeometric (2 drawn of 4): item 10 (k = 2) 2·(1/2)(1/2)·2/3 = 1/3; items 20, 30 (k = 1)
    # 2·(1/4)(3/4)·2/3 = 1/4 each -> 5/6. Mean over 4 items: (3/2 + 5/6)/4 = 7/12.
    error = bound_curve.sra_sampling_errors(HAND, [2], cells=4)[0]
    assert error.bias_squared == pytest.approx(3 / 8)
    assert error.sampling_variance == pytest.approx(5 / 24)
    assert error.expected_dropped == pytest.approx(2)
    noise = discrete_laplace_variance(2)  # sensitivity 2, epsilon_items 1
    assert bound_curve.sra_expected_mse(HAND, 2, 4, noise) == pytest.approx(7 / 12 + noise)
    row = tune.tune_rows(HAND, hand_norms([2, 4]), [2, 4], HAND_SETUP)[0]
    assert row.expected_mse == pytest.approx(7 / 12 + noise, rel=1e-12)
    assert row.noise_variance == pytest.approx(noise, rel=1e-12)


def test_hpas_expected_error_matches_the_hand_computation():
    # Item 10 scored 9, items 20 and 30 both 5. b = 2: user 1 keeps its two records of item 10 and
    # drops 20 and 30 whole (their tie group of 2, ranked 3rd and 4th): bias 1 each, no variance.
    # b = 3: it keeps one of 20 and 30 at random: bias 1/2 each, variance 1/4 each. Means over 4.
    scores = {10: 9, 20: 5, 30: 5}
    at_2, at_3 = bound_curve.hpa_sampling_errors(HAND, [2, 3], 4, scores)
    assert (at_2.bias_squared, at_2.sampling_variance, at_2.expected_dropped) == pytest.approx((2 / 4, 0, 2))
    assert (at_3.bias_squared, at_3.sampling_variance, at_3.expected_dropped) == pytest.approx((0.5 / 4, 0.5 / 4, 1))
    # One score for every item is SRA's uniform sample.
    sra = bound_curve.sra_sampling_errors(HAND, [2], 4)[0]
    assert bound_curve.hpa_sampling_errors(HAND, [2], 4, dict.fromkeys(scores, 0))[0] == pytest.approx(sra)
    # tune shows HPA's curve when given the scores, and SRA's without them: the two differ here.
    hpa_row = tune.tune_rows(HAND, hand_norms([2, 4]), [2, 4], HAND_SETUP, scores=scores)[0]
    assert hpa_row.bias_squared == pytest.approx(at_2.bias_squared)
    assert hpa_row.bias_squared != pytest.approx(sra.bias_squared)


def test_a_bound_at_the_heaviest_user_has_no_bias_and_only_noise():
    error = bound_curve.sra_sampling_errors(HAND, [4, 50], cells=4)
    assert [(e.bias_squared, e.sampling_variance, e.expected_dropped) for e in error] == [(0, 0, 0)] * 2


def test_quality_and_pick_probabilities_by_hand():
    # Candidates 1, 2; one table of 4 cells at ε_items·(1 − 1/10) = 9/10. User 1 (n = 4, one record
    # per cell counted) drops (4 − b)/4 of a record in each of its 3 cells, scaled by
    # (b_K − b_1)/max(n − b_1, b_K − b_1) = 1/3: 1/4 at b = 1 (256/1024), 1/6 at b = 2 (170/1024 on
    # the grid); user 2 drops nothing. Bias² 3·(1/4)² = 0.1875 and 3·(170/1024)² = 0.08268; noise
    # 4·DL(b/0.9): 9.2358 and 38.846. q(1) = −√9.4233 → −3.07, q(2) = −√38.929 → −6.24 (rounded up
    # to 1/100). Δq = √(1·1·(2 − 1)) + 1/100 = 1.01 (U = b_K − b_1 = 1: candidates this close
    # leave no choice of U, so no user count), ε_bound = 1/10.
    rows = tune.tune_rows(HAND, hand_norms([1, 2]), [1, 2], HAND_SETUP)
    noise = [4 * discrete_laplace_variance(b / 0.9) for b in (1, 2)]
    assert noise == pytest.approx([9.2358, 38.846], abs=1e-3)
    assert [r.quality for r in rows] == pytest.approx([-3.07, -6.24])
    assert rows[0].pick_probability == pytest.approx(1 / (1 + math.exp(-0.1 * 3.17 / 1.01)))
    assert sum(r.pick_probability for r in rows) == pytest.approx(1)


def test_the_rows_mix_the_user_caps_the_count_can_give():
    # Candidates 1 and 20 leave a choice of U: the count of HAND's 2 users at ε/100 gives U = 16
    # or 19, both likely. tune_rows asks for the norms at those caps only (here no other is
    # given), shows q(b) at the likelier, and P(pick) is the mixture over the caps of the
    # exponential mechanism's probabilities at each, weighted by the caps' probabilities.
    candidates = [1, 20]
    caps = tune.likely_caps(2, candidates, HAND_SETUP, tune.BOUND_SHARE)
    assert set(caps) == {16, 19} and sum(caps.values()) == pytest.approx(1)
    every = hand_norms(candidates)
    norms = {cap: every[cap] for cap in caps}
    rows = tune.tune_rows(HAND, norms, candidates, HAND_SETUP)
    model = HAND_SETUP.error_model(tune.BOUND_SHARE, candidates)
    likeliest = max(caps, key=caps.get)
    at_likeliest = replace(model, user_cap=likeliest)
    assert [r.quality for r in rows] == pytest.approx(bound_selection.quality(norms[likeliest], candidates,
                                                                              at_likeliest))
    epsilon = HAND_SETUP.mechanism_epsilon(tune.BOUND_SHARE, candidates)
    mixed = sum(p * exponential_probabilities(
        np.asarray(bound_selection.quality(norms[cap], candidates, replace(model, user_cap=cap)), dtype=float),
        epsilon, bound_selection.quality_sensitivity(candidates, replace(model, user_cap=cap)), monotone=True)
        for cap, p in caps.items())
    assert [r.pick_probability for r in rows] == pytest.approx(list(mixed), rel=1e-9)
    assert sum(r.pick_probability for r in rows) == pytest.approx(1)
    report = tune.report(rows, replace(HAND_SETUP, users=2), tune.BOUND_SHARE, None, "hand")
    assert report["bound_selection"]["user_caps"] == {str(cap): p for cap, p in caps.items()}


def simulated_counts(pairs: pd.DataFrame, bound: int, runs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(item ids, counts of shape runs x items): each user keeps a uniform sample of
    min(n, bound) of their records (SRA's bounding), drawn with numpy."""
    rng = np.random.default_rng(seed)
    codes, ids = pd.factorize(pairs["item_id"])
    per_user = [codes[idx] for idx in pairs.groupby("user_id").indices.values()]
    counts = np.empty((runs, ids.size))
    for run in range(runs):
        kept = np.concatenate([u if u.size <= bound else rng.choice(u, bound, replace=False) for u in per_user])
        counts[run] = np.bincount(kept, minlength=ids.size)
    return np.asarray(ids), counts


@pytest.mark.long
def test_the_formula_matches_a_simulation_of_sras_sampling():
    # 60 users with 1 to 40 records over 12 items (popular items likelier, repeats allowed).
    rng = np.random.default_rng(7)
    rows = [(u, int(rng.choice(12, p=np.arange(12, 0, -1) / 78))) for u in range(60)
            for _ in range(int(rng.integers(1, 41)))]
    pairs = pd.DataFrame(rows, columns=["user_id", "item_id"])
    runs = 3000
    for bound in (1, 5, 20):
        ids, counts = simulated_counts(pairs, bound, runs, seed=bound)
        moments = bound_curve.sra_item_moments(pairs, bound).loc[ids]
        # Per item, tolerance four standard errors: of the mean, sd/sqrt(runs); of the sample
        # variance, about var·sqrt(2/runs) (near-normal counts).
        mean, var = counts.mean(axis=0), counts.var(axis=0, ddof=1)
        assert np.all(np.abs(moments["expected"] - mean) <= 4 * np.sqrt(moments["variance"] / runs) + 1e-9), bound
        assert np.all(np.abs(moments["variance"] - var) <= 4 * moments["variance"] * np.sqrt(2 / runs) + 1e-9), bound
        # And the item MSE the bound gives (bias² + variance), four standard errors of its mean.
        true = moments["true"].to_numpy()
        mse = ((true - counts) ** 2).sum(axis=1) / 15
        error = bound_curve.sra_sampling_errors(pairs, [bound], cells=15)[0]
        assert error.bias_squared + error.sampling_variance == pytest.approx(
            mse.mean(), abs=4 * mse.std(ddof=1) / math.sqrt(runs)), bound


def test_bad_candidates_and_inputs_are_refused():
    with pytest.raises(Exception, match="strictly increasing"):
        tune.candidates_of([5, 2])
    assert tune.candidates_of(None) == tune.DEFAULT_CANDIDATES
    with pytest.raises(ValueError, match="user_id"):
        bound_curve.sra_sampling_errors(pd.DataFrame({"item_id": [1]}), [1], 1)
    with pytest.raises(ValueError, match="more than"):
        bound_curve.sra_sampling_errors(HAND, [1], 2)


def with_light_users(path, users: int, seed: int) -> None:
    """Add ``users`` users of one record each to the Netflix-shaped table at ``path`` (ids past
    the generator's, items at random, weekdays drawn from the table's own rows)."""
    table = pq.read_table(path)
    rng = np.random.default_rng(seed)
    light = pa.table({"user_id": pa.array(10**7 + np.arange(users), pa.int64()),
                      "item_id": pa.array(rng.integers(1, 17_771, users), pa.int32()),
                      "weekday": table["weekday"].take(rng.integers(0, table.num_rows, users))}, schema=table.schema)
    pq.write_table(pa.concat_tables([table, light]), path)


def test_tune_runs_on_the_demo_config(spark, tmp_path, capsys, monkeypatch):
    data = tmp_path / "netflix.parquet"
    datasets.generate_netflix(20_000, str(data), seed=3, progress=lambda _: None)
    # The generator's 96 users, and 2,500 more with one record each: with that many users the
    # choice's count of them (at ε/100) gives the user cap U = 255 alone, and tune aggregates the
    # bias norms once a call rather than at each of the nine caps a count of 96 users can give
    # (a few Spark jobs a cap). The command over two caps is the table's call below; the mixture
    # over them, test_the_rows_mix_the_user_caps_the_count_can_give.
    with_light_users(data, 2_500, seed=4)
    conf = ["tune", str(ROOT / "conf/demo.toml"), "--set", f"source.path={data}"]
    assert main([*conf, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["not_private"].startswith("NOT PRIVATE")
    assert list(result["bound_selection"]["user_caps"]) == ["255"]
    assert 'l = "auto"' in result["warning"] and "no longer has the guarantee" in result["warning"]
    assert [r["bound"] for r in result["rows"]] == list(tune.DEFAULT_CANDIDATES)
    assert result["configured_bound"] == 10 and result["count_tables"] == 2 and result["item_cells"] == 17_770
    # The demo's l is fixed: tune shows what l = "auto" would score by default, the item table.
    assert result["bound_selection"]["objective"] == "items" and result["bound_selection"]["count_tables"] == 1
    assert result["bound_selection"]["objective_described"] == "the item table's squared error"
    # Edges in the demo: the items get (1 - 1/20) epsilon/2 (a twentieth estimates what bounding
    # removed), so the noise at bound b is discrete Laplace of scale 40b/19.
    for row in result["rows"]:
        assert row["noise_variance"] == pytest.approx(discrete_laplace_variance(40 * row["bound"] / 19), rel=1e-9)
    # The Spark path reads the records a job reads: the same curve as from the file read with pandas.
    pairs = pd.read_parquet(data, columns=["user_id", "item_id"])
    errors = bound_curve.sra_sampling_errors(pairs, tune.DEFAULT_CANDIDATES, 17_770)
    assert [r["bias_squared"] for r in result["rows"]] == pytest.approx([e.bias_squared for e in errors])
    assert sum(r["pick_probability"] for r in result["rows"]) == pytest.approx(1)
    assert result["best_bound"] == min(result["rows"], key=lambda r: r["expected_mse"])["bound"]
    # The table for people says it too, first and last. With a hundredth of ε on the choice its
    # count of the users (at ε/1000) gives U = 16 or 18 for the candidates 2 and 20: tune
    # aggregates the norms at both caps and mixes them.
    assert main([*conf, "--candidates", "2,20", "--bound-share", "0.01"]) == 0
    text = capsys.readouterr().out.strip().splitlines()
    assert text[1] == text[-1] == tune.VOIDS_THE_GUARANTEE
    assert all("NOT PRIVATE" in line or line == tune.VOIDS_THE_GUARANTEE for line in text)
    assert [line.split()[0] for line in text if line.split()[0].isdigit()] == ["2", "20"]
    assert re.search(r"user cap U \(P\) 16: \S+, 18: \S+;", "\n".join(text))
    assert main([*conf, "--candidates", "8,2"]) == 2
    # An l = "auto" config that sets its epsilon_bound: the fixed bounds it is set against drop
    # that part with the choice (a review's finding: tune refused the config).
    assert main([*conf, "--set", 'algorithm.l="auto"', "--set", "privacy.epsilon_bound=0.1", "--json"]) == 0
    auto = json.loads(capsys.readouterr().out)
    assert auto["epsilon_items"] < result["epsilon_items"]  # the rows are at auto's split
    assert auto["auto"]["best_fixed_bound"] in tune.DEFAULT_CANDIDATES
    fixed = {r["bound"]: r["expected_mse"] for r in result["rows"]}  # the fixed config's rows
    assert auto["auto"]["best_fixed_mse"] == pytest.approx(min(fixed.values()), rel=1e-9)
    # HPA: the choice's view scores HPA's own drop, ranked by the popularity in expectation.
    from dp_spark.families.counts import bound_choice

    rankings, scored = [], bound_choice.bias_norms
    monkeypatch.setattr(bound_choice, "bias_norms", lambda *a, **k: rankings.append(a[4]) or scored(*a, **k))
    assert main([*conf, "--set", 'algorithm.name="hpa"', "--set", "algorithm.d=1", "--json"]) == 0
    hpa = json.loads(capsys.readouterr().out)
    assert "HPA's own drop" in hpa["method"] and sum(r["pick_probability"] for r in hpa["rows"]) == pytest.approx(1)
    expected = tune.expected_popularity(pairs, ItemDomain(None, "1..17770", id_range=(1, 17_770)), 1)
    assert rankings and all(r is not None and (r.scores == expected).all() for r in rankings)
    # Its curve is HPA's at that ranking, not SRA's formula.
    ids = np.arange(1, 17_771)
    hpa_errors = bound_curve.hpa_sampling_errors(pairs, tune.DEFAULT_CANDIDATES, 17_770, dict(zip(ids, expected)))
    assert [r["bias_squared"] for r in hpa["rows"]] == pytest.approx([e.bias_squared for e in hpa_errors])


def test_hpas_popularity_in_expectation_is_what_a_sample_of_d_per_user_counts():
    # User 1 has 4 records (items 1, 1, 2, 3), user 2 one (item 2): with d = 2 user 1's records
    # each count 2/4, user 2's 1; item 4 has none. In 1/1024 of a record, rounded down.
    pairs = pd.DataFrame({"user_id": [1, 1, 1, 1, 2], "item_id": [1, 1, 2, 3, 2]})
    items = ItemDomain(np.arange(1, 5), "1..4")
    assert tune.expected_popularity(pairs, items, 2).tolist() == [1024, 1536, 512, 0]
    assert tune.expected_popularity(pairs, items, 4).tolist() == [2048, 2048, 1024, 0]  # d ≥ n: the counts


def test_tune_on_a_means_config_reads_the_records_its_job_reads(spark, tmp_path, capsys):
    from dp_spark.core.domain import item_domain_of_ids
    from dp_spark.families.means import choice as means_choice
    from dp_spark.families.means import params as means_params
    from dp_spark.families.means.params import MeansParams
    from dp_spark.lab import tune_means
    from dp_spark.release import mean_bound_quality
    from dp_spark.release.family import Domains

    rng = np.random.default_rng(5)
    users = np.repeat(np.arange(1, 1501), 6)
    frame = pd.DataFrame({"user_id": users, "item_id": rng.integers(1, 11, users.size),
                          "value": rng.integers(1, 6, users.size).astype(float)})
    frame.to_csv(tmp_path / "ratings.csv", index=False)
    (tmp_path / "means.toml").write_text(f"""output = "{tmp_path / 'out'}"
[source]
format = "csv"
path = "{tmp_path / 'ratings.csv'}"
[domain]
items = {{ range = [1, 10] }}
[privacy]
epsilon = 1.0
[algorithm]
name = "means"
l = 4
low = 1
high = 5
""")
    conf = ["tune", str(tmp_path / "means.toml"), "--candidates", "1,4,6"]
    assert main([*conf, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["not_private"].startswith("NOT PRIVATE") and result["configured_bound"] == 4
    # The rows of the records as pandas reads them: Spark's read of the same file, the same draw.
    split = {"epsilon_bounding": Fraction(1, 20), "epsilon_counts": Fraction(19, 20) * Fraction(3, 10),
             "epsilon_sums": Fraction(19, 20) * Fraction(7, 10)}
    expected = tune_means.tune_rows(frame, MeansParams(1.0, 5.0, 4), [1, 4, 6], split, np.arange(1, 11))
    for got, want in zip(result["rows"], [row.to_json() for row in expected], strict=True):
        assert got == pytest.approx(want, rel=1e-9)
    assert result["rows"][2]["bias_rms"] == 0  # l = 6: every user keeps all six
    assert main(conf) == 0  # the table for people, between the warnings
    said = capsys.readouterr().out.splitlines()
    assert said[1] == said[-1] == tune.VOIDS_THE_GUARANTEE and "items w/ mean" in said[4]
    assert said[-3].startswith(f"lowest score: l = {result['best_bound']} ")
    assert main([*conf, "--set", 'algorithm.high="auto"']) == 2  # a range chosen privately: nothing to tune at
    assert "needs a public clipping range" in capsys.readouterr().err
    # l = "auto": what the choice would do, from the job's own model and the same records.
    assert main([*conf, "--set", 'algorithm.l="auto"', "--json"]) == 0
    auto = json.loads(capsys.readouterr().out)["auto"]
    assert auto["objective"] == "items" and auto["objective_described"] == "the item table's means"
    params = MeansParams(1.0, 5.0, "auto", candidates=(1, 4, 6))
    domains = Domains(item_domain_of_ids(list(range(1, 11)), "1..10"))
    split = means_params.budget_split(params, Fraction(1), domains)  # the config's ε = 1
    model = means_choice.error_model(params, domains, split)
    cells = frame.groupby(["user_id", "item_id"]).size().rename("k").reset_index()
    cells["n"] = cells["user_id"].map(frame.groupby("user_id").size())
    kept = [mean_bound_quality.kept_counts(cells.rename(columns={"item_id": "cell"}), (1, 4, 6), 6)]
    picks = mean_bound_quality.pick_probabilities(kept, (1, 4, 6), model, split["epsilon_bound"])
    assert list(auto["pick_probability"].values()) == pytest.approx(picks.tolist(), rel=1e-9)
    assert main([*conf, "--set", 'algorithm.l="auto"']) == 0
    said = capsys.readouterr().out.splitlines()
    assert any(line.startswith('l = "auto" scores the item table\'s means') for line in said)
    # HPA: the kept counts HPA's choice scores, each user's records ranked by the popularity in
    # expectation, at HPA's split.
    assert main([*conf, "--set", 'algorithm.l="auto"', "--set", 'algorithm.bounding="hpa"', "--json"]) == 0
    hpa = json.loads(capsys.readouterr().out)["auto"]
    params = MeansParams(1.0, 5.0, "auto", candidates=(1, 4, 6), bounding="hpa")
    split = means_params.budget_split(params, Fraction(1), domains)
    model = means_choice.error_model(params, domains, split)
    scores = tune.expected_popularity(frame, domains.items, 1)
    ranked = bound_selection.ranked_cells(cells.assign(cell=cells["item_id"]), "item_id",
                                          dict(zip(range(1, 11), scores.tolist())))
    kept = [mean_bound_quality.kept_counts(ranked, (1, 4, 6), 6)]
    picks = mean_bound_quality.pick_probabilities(kept, (1, 4, 6), model, split["epsilon_bound"])
    assert list(hpa["pick_probability"].values()) == pytest.approx(picks.tolist(), rel=1e-9)
    unranked = [mean_bound_quality.kept_counts(cells.rename(columns={"item_id": "cell"}), (1, 4, 6), 6)]
    assert list(hpa["pick_probability"].values()) != pytest.approx(
        mean_bound_quality.pick_probabilities(unranked, (1, 4, 6), model, split["epsilon_bound"]).tolist(), rel=1e-3)
    # HPA's rows keep each user's records of the most popular items, at HPA's fixed-l split.
    assert main([*conf, "--set", 'algorithm.bounding="hpa"', "--json"]) == 0
    hpa_rows = json.loads(capsys.readouterr().out)
    fixed = MeansParams(1.0, 5.0, 4, bounding="hpa")
    expected = tune_means.tune_rows(frame, fixed, [1, 4, 6], means_params.budget_split(fixed, Fraction(1), domains),
                                    np.arange(1, 11), scores=tune_means.hpa_scores(frame, fixed, domains.items))
    assert "HPA's records of the most popular items" in hpa_rows["method"]
    for got, want in zip(hpa_rows["rows"], [row.to_json() for row in expected], strict=True):
        assert got == pytest.approx(want, rel=1e-9)
    assert [r["bias_rms"] for r in hpa_rows["rows"]] != pytest.approx([r["bias_rms"] for r in result["rows"]])


def test_an_auto_config_is_scored_as_its_job_scores_it():
    # The split of an l = "auto" config already leaves the bound's tenth out: tune must not take it
    # out again (a review's finding); a fixed config's split loses it; both give the job's model.
    from dp_spark.core.domain import ItemDomain
    from dp_spark.families.counts import bound_choice
    from dp_spark.families.counts import family as counts
    from dp_spark.families.registry import family_of
    from dp_spark.release.family import Domains, plan_split

    domains = Domains(ItemDomain(np.arange(1, 5), "1..4"))
    auto = counts.CountsParams("sra", "auto", candidates=(1, 2, 4))
    split = plan_split(family_of("sra"), auto, Fraction(1), domains)
    setup = tune.TuneSetup("sra", "laplace", {}, Fraction(1), split, 4, None)
    assert setup.error_model(tune.BOUND_SHARE, (1, 2, 4)) == bound_choice.error_model(auto, domains, split)
    fixed = plan_split(family_of("sra"), counts.CountsParams("sra", 4), Fraction(1), domains)
    setup = tune.TuneSetup("sra", "laplace", {}, Fraction(1), fixed, 4, None)
    assert setup.error_model(tune.BOUND_SHARE, (1, 2, 4)) == bound_choice.error_model(auto, domains, split)
    # With guards their part comes off the top, and the bound takes its tenth of the rest (a review's
    # finding: tune shrank the guards' part too).
    from dp_spark.release.guards import Guards

    limits = Guards(max_dropped_fraction=0.5, epsilon=Fraction(1, 10))
    guarded = plan_split(family_of("sra"), auto, Fraction(1), domains, guards=limits)
    fixed = plan_split(family_of("sra"), counts.CountsParams("sra", 4), Fraction(1), domains, guards=limits)
    setup = tune.TuneSetup("sra", "laplace", {}, Fraction(1), fixed, 4, None)
    assert setup.error_model(tune.BOUND_SHARE, (1, 2, 4)) == bound_choice.error_model(auto, domains, guarded)
    # Candidates 1, 2, 4 leave no choice of the user cap: the mechanism has the whole part; with the
    # default candidates a tenth of it counts the users first.
    assert setup.mechanism_epsilon(tune.BOUND_SHARE, (1, 2, 4)) == guarded["epsilon_bound"]
    assert setup.mechanism_epsilon(tune.BOUND_SHARE, tune.DEFAULT_CANDIDATES) == guarded["epsilon_bound"] * Fraction(9,
                                                                                                                 10)


def test_under_zcdp_tune_scores_the_choice_as_the_job_makes_it():
    # A review's finding: tune took ε·share for the mechanism under zCDP too. The job runs it at
    # twice the ε of its share of ρ (a bounded-range step), and the tables keep 9/10 of their ρ.
    from dp_spark.core import zcdp
    from dp_spark.core.accounting import Accounting
    from dp_spark.core.domain import ItemDomain
    from dp_spark.families.counts import bound_choice
    from dp_spark.families.counts import family as counts
    from dp_spark.families.registry import family_of
    from dp_spark.release.family import Domains, plan_split

    accounting = Accounting("gaussian", zcdp.rho_of(1.0, 1e-6), 1e-6)
    domains = Domains(ItemDomain(np.arange(1, 5), "1..4"))
    gaussian = dict(noise="gaussian", records_per_item=1)
    auto = counts.CountsParams("sra", "auto", candidates=(1, 2, 4), **gaussian)
    auto_split = plan_split(family_of("sra"), auto, Fraction(1), domains, accounting=accounting)
    fixed = plan_split(family_of("sra"), counts.CountsParams("sra", 4, **gaussian), Fraction(1), domains,
                       accounting=accounting)
    setup = tune.TuneSetup("sra", "laplace", {}, Fraction(1), fixed, 4, None, 1, "gaussian", accounting.rho)
    assert setup.mechanism_epsilon(tune.BOUND_SHARE, (1, 2, 4)) == 2 * auto_split["epsilon_bound"]
    rest = zcdp.epsilon_for_rho(zcdp.pure_cost(auto_split["epsilon_bound"]) * Fraction(9, 10))  # after the user count
    assert setup.mechanism_epsilon(tune.BOUND_SHARE, tune.DEFAULT_CANDIDATES) == 2 * rest
    got = setup.error_model(tune.BOUND_SHARE, (1, 2, 4))
    want = bound_choice.error_model(auto, domains, auto_split)
    assert [float(v) for v in got.noise_variance] == pytest.approx([float(v) for v in want.noise_variance], rel=1e-5)


def test_under_zcdp_the_rows_carry_the_gaussian_noise_the_job_draws():
    # tune showed the publisher's (Laplace) variance for a config with privacy.noise = "gaussian":
    # the rows' noise must be the discrete Gaussian's at the item share of ρ, c = 1.
    from dp_spark.core import noise_choice, zcdp

    rho = zcdp.rho_of(1.0, 1e-6)
    split = {"epsilon_items": Fraction(1, 2), "epsilon_bounding": Fraction(1, 20)}
    setup = tune.TuneSetup("sra", "laplace", {}, Fraction(1), split, 4, None, 1, "gaussian", rho)
    rows = tune.tune_rows(HAND, hand_norms([1, 2, 4]), [1, 2, 4], setup)
    assert [r.noise_variance for r in rows] == pytest.approx(
        [noise_choice.gaussian_variance(b, Fraction(1, 2)) for b in (1, 2, 4)], rel=1e-12)
    assert rows[2].noise_variance < discrete_laplace_variance(8)  # not the Laplace's at scale 4/(1/2)


def test_the_auto_summary_is_the_expectation_over_the_choice():
    # Σ P(b)·MSE(b) with the items' part of auto's split (9/10 of the fixed split's here), against
    # the best candidate at the fixed split; and the percentiles of MSE | pick.
    rows = tune.tune_rows(HAND, hand_norms([1, 2, 4]), [1, 2, 4], HAND_SETUP)
    summary = tune.auto_summary(rows, HAND_SETUP, tune.BOUND_SHARE, 4)
    sampling = [r.bias_squared + r.sampling_variance for r in rows]
    at_auto = [e + discrete_laplace_variance(b / 0.9) for e, b in zip(sampling, (1, 2, 4))]
    at_fixed = [e + discrete_laplace_variance(b) for e, b in zip(sampling, (1, 2, 4))]
    expected = sum(r.pick_probability * m for r, m in zip(rows, at_auto))
    assert summary["expected_mse"] == pytest.approx(expected, rel=1e-12)
    assert summary["best_fixed_bound"] == (1, 2, 4)[int(np.argmin(at_fixed))]
    assert summary["auto_vs_best_fixed"] == pytest.approx(expected / min(at_fixed), rel=1e-12)
    assert summary["auto_vs_configured"] == pytest.approx(expected / at_fixed[2], rel=1e-12)
    assert min(at_auto) <= summary["p50"] <= summary["p90"] <= summary["p99"] <= max(at_auto)
    # The percentiles over a choice: P = (0.5, 0.4, 0.1) on values (3, 1, 2) reach 0.5 at 2, 0.9 and 0.99 at 3.
    assert tune.choice_percentiles([0.5, 0.4, 0.1], [3, 1, 2]) == {0.5: 2.0, 0.9: 3.0, 0.99: 3.0}


@pytest.mark.parametrize("algorithm", ["sra", "hpa"])
def test_tune_shows_what_the_estimate_choice_does(spark, tmp_path, capsys, algorithm):
    # 300 users with 2 to 40 ratings of 30 items: the estimate choice's distribution over 200 of its
    # own runs, its expected MSE at the config's split, and the best bound fixed at a fixed split
    # (HPA's at the expected popularity, as the rows).
    rng = np.random.default_rng(4)
    rows = [(u, int(i)) for u in range(300) for i in rng.choice(np.arange(1, 31), 2 + u % 29, replace=False)]
    pd.DataFrame(rows, columns=["user_id", "item_id"]).to_csv(tmp_path / "r.csv", index=False)
    (tmp_path / "sra.toml").write_text(f"""output = "{tmp_path / 'out'}"
[source]
format = "csv"
path = "{tmp_path / 'r.csv'}"
[domain]
items = {{ range = [1, 30] }}
[privacy]
epsilon = 2.0
[algorithm]
name = "{algorithm}"
l = "auto"
l_candidates = [1, 40]
l_choice = "estimate"
""")
    assert main(["tune", str(tmp_path / "sra.toml"), "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)["estimate"]
    assert estimate["draws"] == tune.ESTIMATE_DRAWS
    assert sum(estimate["pick_probability"].values()) == pytest.approx(1.0)
    assert all(1 <= int(b) <= 40 for b in estimate["pick_probability"]) and 1 <= estimate["best_fixed_bound"] <= 40
    # Each bound's error at auto's split is above its error at a fixed bound's (less ε for the
    # items), so the choice's expectation is above the best fixed bound's.
    assert estimate["expected_mse"] > estimate["best_fixed_mse"] and estimate["estimate_vs_best_fixed"] > 1
    assert main(["tune", str(tmp_path / "sra.toml")]) == 0
    assert 'l_choice = "estimate"' in capsys.readouterr().out
