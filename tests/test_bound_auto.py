"""``l = "auto"`` / ``m = "auto"``: the per-user bound chosen privately inside a counts release
(docs/bound_selection.md). The mechanism itself is tested in test_bound_selection.py; here, that a
release chooses, pays for the choice, applies the chosen bound and reports it, and that bad
settings are refused before any record is read."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.core import zcdp
from dp_spark.core.accuracy import EXACT, UPPER_BOUND
from dp_spark.core.domain import AttributeDomain, ItemDomain
from dp_spark.core.mechanisms import discrete_laplace_variance
from dp_spark.errors import ConfigError
from dp_spark.families.counts import bound_choice
from dp_spark.families.counts import family as counts
from dp_spark.families.registry import family_of
from dp_spark.jobs.config import load_config
from dp_spark.release import bound_bias, bound_estimate, bound_selection
from dp_spark.release.family import Domains, plan_split
from tests.conftest import ROOT

DOMAINS = Domains(ItemDomain(np.arange(1, 101), "1..100"), AttributeDomain(("a", "b")))


def test_auto_takes_the_default_candidates_and_a_tenth_of_epsilon():
    params = counts.CountsParams("sra", "auto")
    assert params.candidates == bound_selection.DEFAULT_CANDIDATES and params.largest_bound == 256
    split = plan_split(family_of("sra"), params, Fraction(1), DOMAINS)
    assert split == {"epsilon_bound": Fraction(1, 10), "epsilon_bounding": Fraction(1, 20),
                     "epsilon_items": Fraction(17, 40), "epsilon_edges": Fraction(17, 40)}
    hpa = plan_split(family_of("hpa"), counts.CountsParams("hpa", "auto"), Fraction(1), DOMAINS)
    assert hpa["epsilon_bound"] == Fraction(1, 10) and sum(hpa.values()) == 1


@pytest.mark.parametrize("objective, weights, cells", [
    (None, (1,), 100),  # the default: the item table alone
    ("items", (1,), 100),
    ("cells", (1, 1), 300),  # 100 item cells and 200 edge cells alike
    ("tables", (1, Fraction(1, 2)), 200),  # each table's mean per cell: the edges weigh 100/200
    ({"item_counts": 1, "edge_counts": 0.25}, (1, Fraction(1, 4)), 150),
    ({"edge_counts": 2}, (2,), 400),
])
def test_the_error_model_is_public_weights_cap_and_the_exact_noise_at_each_candidate(objective, weights, cells):
    params = counts.CountsParams("sra", "auto", candidates=(1, 4, 16), objective=objective)
    split = plan_split(family_of("sra"), params, Fraction(1), DOMAINS)
    model = bound_choice.error_model(params, DOMAINS, split)
    assert model.weights == tuple(Fraction(w) for w in weights)
    assert model.records_per_cell == bound_selection.QUALITY_RECORDS_PER_CELL
    # Each table at 17/40 of ε: the discrete Laplace variance at b, times its cells and weight.
    for b, noise in zip((1, 4, 16), model.noise_variance):
        assert float(noise) == pytest.approx(cells * discrete_laplace_variance(b / 0.425), rel=1e-12)
    assert bound_choice.scored_tables(params, DOMAINS).keys() == (
        {"edge_counts"} if objective == {"edge_counts": 2} else
        {"item_counts"} if len(weights) == 1 else {"item_counts", "edge_counts"})


def test_an_objective_that_weighs_the_edges_of_a_release_without_them_is_refused():
    params = counts.CountsParams("sra", "auto", objective={"edge_counts": 1})
    items_only = Domains(DOMAINS.items, None)
    with pytest.raises(ConfigError, match="does not publish"):
        bound_choice.error_model(params, items_only, plan_split(family_of("sra"), params, Fraction(1), items_only))


def test_under_zcdp_the_noise_of_each_candidate_is_the_gaussians_growing_as_b():
    params = counts.CountsParams("sra", "auto", candidates=(1, 4, 16), noise="gaussian", records_per_item=1)
    split = plan_split(family_of("sra"), params, Fraction(1), DOMAINS)
    model = bound_choice.error_model(params, DOMAINS, split)
    assert model.records_per_cell == 1
    one, four, sixteen = (float(v) for v in model.noise_variance)
    # σ² = b·c/ε² (the least variance at least that): about 4 times as much per step of 4 in b.
    assert four / one == pytest.approx(4, rel=0.02) and sixteen / four == pytest.approx(4, rel=0.01)


def test_the_spark_norms_are_the_reference_norms(spark, monkeypatch):
    # Repeated records, two attribute values, users above and below the largest candidate, the
    # cap at 1 and at 2, the user cap at b_K − b_1 and below, the records shuffled into the
    # session's partitions and into partitions of a given size: the executors' exact integers
    # equal the driver's.
    monkeypatch.setattr(bound_bias, "RECORDS_PER_PARTITION", 100)
    rng = np.random.default_rng(11)
    rows = [(int(u), int(rng.integers(1, 9)), str(rng.choice(["a", "b"])))
            for u in range(40) for _ in range(int(rng.integers(1, 30)))]
    frame = pd.DataFrame(rows, columns=["user_id", "item_id", "attr"])
    records = spark.createDataFrame(frame)
    candidates, grid = (1, 3, 8, 20), bound_selection.GRID
    largest = int(frame.groupby("user_id").size().max())
    user_counts = spark.createDataFrame(frame.groupby("user_id").size().rename("_n").reset_index())
    # Decimals, longs when the largest n is known, and validation's per-user counts given
    # (broadcast, as there are few users): taken in turn over the eight settings, so that each
    # meets both caps, both user caps and both attribute settings (8 runs, not all 24). HPA's
    # ranking (scores 0 to 2 over 8 items: ties within users) in four of them, with cap 2.
    arithmetic = ((None, None, None, None), (largest, None, None, None), (largest, user_counts, 40, len(frame)))
    settings = [(cap, user_cap, attributes) for user_cap in (None, 5) for cap in (1, 2) for attributes in (False, True)]
    # The scores looked up by a join (a list of ids) and from an array literal (an id range).
    scores = np.array([2, 0, 1, 2, 0, 1, 1, 0])
    rankings = [bound_bias.ItemRanking(ItemDomain(np.arange(1, 9), "1..8"), scores),
                bound_bias.ItemRanking(ItemDomain(None, "1..8", id_range=(1, 8)), scores)]
    for i, (cap, user_cap, attributes) in enumerate(settings):
        known, per_user, users, record_count = arithmetic[i % len(arithmetic)]
        tables = [bound_bias.ITEMS, bound_bias.EDGES] if attributes else [bound_bias.ITEMS]
        ranked = cap == 2
        norms = bound_bias.squared_bias_norms(records, candidates, cap, grid, tables, known, per_user, users,
                                              user_cap=user_cap, record_count=record_count,
                                              ranking=rankings[user_cap is None] if ranked else None)
        assert norms == _reference(frame, candidates, cap, attributes, user_cap, scores if ranked else None)
    assert _reference(frame, candidates, 1, False, 5) != _reference(frame, candidates, 1, False, None)
    assert _reference(frame, candidates, 2, True, 5, scores) != _reference(frame, candidates, 2, True, 5)
    assert bound_bias._by_item(records, len(frame)).rdd.getNumPartitions() == -(-len(frame) // 100) > 1
    assert bound_bias.record_count(frame.groupby("user_id").size().value_counts()) == len(frame)
    assert bound_bias._arithmetic(largest, 19, 2, grid) == "bigint" != bound_bias._arithmetic(None, 19, 2, grid)
    assert bound_bias._arithmetic(2**40, 10**5, 10**5, grid) != "bigint"  # beyond a long: decimals


def test_the_spark_anchors_are_the_reference_anchors(spark, monkeypatch):
    # Repeated records (up to 27 of one user and item) so that the reach binds on some users and
    # not on others, two tables, the session's partitions and small ones, users broadcast or not:
    # the executors' integers equal the driver's twin.
    monkeypatch.setattr(bound_bias, "RECORDS_PER_PARTITION", 100)
    rng = np.random.default_rng(12)
    rows = [(int(u), int(rng.integers(1, 9)), str(rng.choice(["a", "b"])))
            for u in range(40) for _ in range(int(rng.integers(1, 4)) ** int(rng.integers(1, 4)))]
    frame = pd.DataFrame(rows, columns=["user_id", "item_id", "attr"])
    records = spark.createDataFrame(frame)
    user_counts = spark.createDataFrame(frame.groupby("user_id").size().rename("_n").reset_index())
    n = frame.groupby("user_id").size()
    # Decimal arithmetic without the largest n, longs with it.
    largest = int(frame.groupby("user_id").size().max())
    for first, user_cap, reaches, given in ((1, 19, (8, 16), None),
                                            (2, 5, (3, 5), (user_counts, 40, len(frame), largest))):
        per_user, users, record_count, largest = given or (None, None, None, None)
        anchors = bound_bias.anchor_squared_norms(records, first, user_cap, reaches, bound_selection.GRID,
                                                  [bound_bias.ITEMS, bound_bias.EDGES], per_user, users, record_count,
                                                  largest)
        expected = []
        for cells, reach in ((["item_id"], reaches[0]), (["item_id", "attr"], reaches[1])):
            table = frame.groupby(["user_id", *cells]).size().rename("k").reset_index()
            table["cell"] = list(zip(*(table[c] for c in cells)))
            table["n"] = table["user_id"].map(n)
            expected.append(bound_estimate.anchor_squared_norms(table, first, user_cap, reach))
        assert anchors == expected and all(a > 0 for a in anchors)
        # The reach binds on some users here: the twin without it is larger.
        assert bound_estimate.anchor_squared_norms(table, first, user_cap, 10**9) > expected[1]


def _reference(frame: pd.DataFrame, candidates, cap: int, attributes: bool, user_cap: int | None,
               scores: np.ndarray | None = None) -> list[list[int]]:
    """Each table's norms, from the driver's pandas twin (items 1.. scored ``scores`` when given)."""
    n = frame.groupby("user_id").size()
    keys = [["item_id"]] + ([["item_id", "attr"]] if attributes else [])
    norms = []
    for cells in keys:
        table = frame.groupby(["user_id", *cells]).size().rename("k").reset_index()
        table["cell"] = list(zip(*(table[c] for c in cells)))
        table["n"] = table["user_id"].map(n)
        if scores is not None:
            table = bound_selection.ranked_cells(table, "item_id", dict(enumerate(scores.tolist(), start=1)))
        norms.append(bound_selection.squared_bias_norms(table, candidates, cap, user_cap))
    return norms


@pytest.mark.parametrize("arguments, message", [
    (dict(l="auto", candidates=[4, 2]), "strictly increasing"),
    (dict(l="auto", candidates=[0, 2]), "integers >= 1"),
    (dict(l="auto", candidates="1,2"), "must be a list"),
    (dict(l="auto", candidates=[1, 200_000]), "supported maximum"),
    (dict(l=10, candidates=[1, 2]), 'used only with l = "auto"'),
    (dict(l="auto", objective="rows"), "l_objective must be one of"),
    (dict(l="auto", objective={"item_counts": -1}), "l_objective.item_counts must be a finite number >= 0"),
    (dict(l="auto", objective={"item_counts": 0}), "some table a weight above 0"),
    (dict(l="auto", objective={"items": 1}), "the release's tables are"),
    (dict(l="auto", objective=[1, 2]), "or a table of weights"),
    (dict(l="automatic"), "algorithm.l must be an integer"),
])
def test_bad_auto_settings_are_refused_naming_the_key(arguments, message):
    with pytest.raises(ConfigError, match=message):
        counts.CountsParams("sra", **arguments)


def test_a_config_with_the_removed_effective_items_is_told_what_to_do():
    with pytest.raises(ConfigError, match="effective_items is no longer used.*remove the key"):
        _config('algorithm.l="auto"', "algorithm.effective_items=100")


def _config(*overrides):
    return load_config(ROOT / "conf/movielens_sra.toml", list(overrides))


def test_the_config_reads_auto_its_candidates_and_epsilon_share():
    cfg = _config('algorithm.l="auto"', "algorithm.l_candidates=[1, 5, 25]", "privacy.epsilon_bound=0.2",
                  "privacy.epsilon_items=0.4", "privacy.epsilon_edges=0.4")
    assert cfg.params.auto and cfg.params.candidates == (1, 5, 25)
    assert cfg.epsilon_parts["epsilon_bound"] == Fraction(1, 5)
    assert cfg.params.objective == "items"  # the default
    weighted = _config('algorithm.l="auto"', "algorithm.l_objective={item_counts = 1, edge_counts = 0.25}")
    assert weighted.params.objective == (("item_counts", Fraction(1)), ("edge_counts", Fraction(1, 4)))
    section = family_of("sra").report_section(weighted.params)
    assert section["parameters"]["l_objective"] == {"item_counts": 1.0, "edge_counts": 0.25}
    assert "scoring the tables' squared errors weighted item_counts 1, edge_counts 0.25" in family_of(
        "sra").describe(weighted.params, Fraction(1), DOMAINS)


@pytest.mark.parametrize("overrides, message", [
    (['algorithm.l="auto"', "algorithm.m_candidates=[1, 2]"], "m_candidates is not used by sra"),
    (["algorithm.l_candidates=[1, 2]"], 'used only with l = "auto"'),
    (['algorithm.l_objective="cells"'], 'l_objective is used only with l = "auto"'),
    (['algorithm.l="auto"', 'algorithm.m_objective="cells"'], "m_objective is not used by sra"),
    (['algorithm.l="auto"', 'algorithm.l_objective="rows"'], "l_objective must be one of"),
])
def test_bad_auto_configs_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        _config(*overrides)


def test_an_objective_weighing_edges_a_release_without_attributes_lacks_is_refused_by_the_config():
    with pytest.raises(ConfigError, match="does not publish"):
        load_config(ROOT / "conf/movielens_private_items.toml",
                    ['algorithm.l="auto"', "algorithm.l_objective={edge_counts = 1}"])


def test_epsilon_bound_without_auto_is_refused_before_any_record_is_read():
    params = counts.CountsParams("sra", 10)
    with pytest.raises(ConfigError, match="epsilon_bound is not a part of this sra release"):
        plan_split(family_of("sra"), params, Fraction(1), DOMAINS, {"epsilon_bound": Fraction(1, 10)})


def test_the_plan_states_an_upper_bound_at_the_largest_candidate():
    plan = dp_spark.plan("sra", items=range(1, 101), l="auto", l_candidates=[1, 8, 40], epsilon=1)
    noise = plan.accuracy["tables"]["item_counts"]["noisy_count"]
    assert noise["kind"] == UPPER_BOUND and "chosen privately" in noise["note"]
    assert noise["scale"] == pytest.approx(40 / 0.85)  # the largest candidate over the items' 17/20 of epsilon


def _everyone_rates_everything(spark, users: int, items: int):
    rows = [(u, i) for u in range(users) for i in range(1, items + 1)]
    return spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id"]))


def test_a_release_chooses_pays_for_applies_and_reports_the_bound(spark):
    # 400 users with 64 records each: at ε = 8, keeping all 64 wins by a margin the mechanism
    # cannot miss (q(64) ≈ −101 against q(1) ≈ −3,150 with Δq ≈ 8 and ε_bound = 0.8).
    df = _everyone_rates_everything(spark, 400, 64)
    release = dp_spark.sra(df, items=range(1, 65), l="auto", l_candidates=[1, 64], l_choice="exponential",
                           epsilon=8, seed=5)
    algorithm = release.report["algorithm"]
    # The quality's user cap is b_K − b_1 = 63 here: (κ·ε·N̂)² ≈ (0.6·0.72·400)² is far past it.
    assert algorithm["chosen"]["l"] == 64 and algorithm["chosen"]["user_cap"] == 63
    # The user count's noise has scale 1/0.08 = 12.5: |noise| < 200 with probability 1 - e^(-16).
    assert abs(algorithm["chosen"]["users_noisy"] - 400) < 200
    assert algorithm["parameters"]["l"] == "auto" and algorithm["parameters"]["l_candidates"] == [1, 64]
    steps = {entry["step"]: entry for entry in release.ledger}
    # The choice's 4/5: a tenth counts the users (sensitivity 1), the rest runs the mechanism.
    assert steps["choose l: users"]["epsilon_exact"] == "2/25" and steps["choose l: users"]["sensitivity_l1"] == 1
    assert steps["choose l"]["epsilon_exact"] == "18/25" and steps["choose l"]["cells"] == 2
    assert steps["item_counts"]["sensitivity_l1"] == 64  # the chosen bound is the release's sensitivity
    assert release.epsilon_spent == 8
    # Every record kept: the counts are 400 plus noise of scale 64/6.8 (|noise| < 120 with
    # probability 1 - 64·e^(-12.75), far beyond any seed's reach).
    assert (release["item_counts"]["noisy_count"] - 400).abs().max() < 120
    noise = release.report["accuracy"]["tables"]["item_counts"]["noisy_count"]
    assert noise["kind"] == EXACT and noise["scale"] == pytest.approx(64 / 6.8)
    # The estimate of what bounding removed is at the chosen bound too: nothing past l = 64 to remove.
    bounding = release.report["accuracy"]["bounding"]
    assert bounding["cap_per_user"] == 8 * 64 and steps["bounding: kept"]["sensitivity_l1"] == 64
    assert "at the privately chosen l = 64" in noise["note"]
    assert (release["item_counts"]["ci95_halfwidth"] == noise["ci95_halfwidth"]).all()


def test_the_estimate_choice_pays_its_statistics_picks_any_bound_in_range_and_reports_them(spark):
    # 400 users with 64 records each over 64 items, at ε = 8: the estimate keeps most records,
    # from any integer from 1 to 64, not only the candidates. (Not all 64: the tail above 32
    # records is made non-increasing per record, which spreads the 400 users of the bin of 64
    # down to 32: docs/bound_selection.md, "What the estimate assumes".)
    df = _everyone_rates_everything(spark, 400, 64)
    release = dp_spark.sra(df, items=range(1, 65), l="auto", l_candidates=[1, 64], l_choice="estimate", epsilon=8,
                           seed=5)
    algorithm = release.report["algorithm"]
    chosen = algorithm["chosen"]
    assert 48 <= chosen["l"] < 64 and set(chosen) == {"l", "record_bins", "record_counts_noisy", "bias_anchors_noisy"}
    assert algorithm["parameters"]["l_choice"] == "estimate"
    # Every user in the bin [64, 65), the last below the edge at c·C_items + 1 (one
    # record per item and user); the histogram's noise has scale 1/0.16 (|noise| < 100 with
    # probability 1 − e^(−16)). The bins above run to 512.
    bins = chosen["record_bins"]
    last = bins.index(65) - 1
    assert bins[last] == 64 and bins[-1] == 512 and len(chosen["record_counts_noisy"]) == len(bins)
    assert abs(chosen["record_counts_noisy"][last] - 400) < 100
    # The anchor: each user drops 63 of 64 records at l = 1, 63/64 of a record per item, so
    # ‖B(1)‖ = 400·63/64·√64 = 3,150 records; its noise has scale ⌈1,024·√63⌉/1,024/0.64 ≈ 12.4 records.
    assert abs(chosen["bias_anchors_noisy"]["item_counts"] - 3150) < 400
    steps = [(e["step"], e["epsilon_exact"]) for e in release.ledger]
    assert steps[:2] == [("choose l: record counts", "4/25"),
                         ("choose l: bias of item_counts (1/1024 records)", "16/25")]
    assert release.ledger[2]["step"] == "item_counts" and release.ledger[2]["sensitivity_l1"] == chosen["l"]
    assert release.epsilon_spent == 8


@pytest.mark.parametrize("overrides, message", [
    (['algorithm.l_choice="estimate"'], 'l_choice is used only with l = "auto"'),
    (['algorithm.l="auto"', 'algorithm.l_choice="guess"'], "l_choice must be one of exponential, estimate"),
])
def test_bad_estimate_choices_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        _config(*overrides)


def test_the_estimate_choice_is_sras_and_hpas_only(tmp_path):
    with pytest.raises(ConfigError, match="l_choice = \"estimate\" is SRA's and HPA's"):
        counts.CountsParams("lpa", "auto", choice="estimate")
    lpa = tmp_path / "lpa.toml"
    lpa.write_text((ROOT / "conf/movielens_sra.toml").read_text().replace(
        'name = "sra"\nl = 30', 'name = "lpa"\nm = "auto"\nl_choice = "estimate"'))
    with pytest.raises(ConfigError, match="l_choice is SRA's and HPA's"):
        load_config(lpa)
    hpa = load_config(ROOT / "conf/movielens_hpa.toml", ['algorithm.l="auto"', 'algorithm.l_choice="exponential"'])
    assert hpa.params.choice == "exponential"
    assert counts.CountsParams("sra", 10, choice="estimate").choice == "exponential"  # a fixed l chooses nothing


def test_a_baseline_chooses_m(spark):
    df = _everyone_rates_everything(spark, 50, 4)
    release = dp_spark.lpa(df, items=range(1, 5), m="auto", m_candidates=[1, 2, 4], epsilon=1, seed=2)
    # Candidates 1, 2, 4 leave no choice of the user cap (b_K − b_1 = 3 is below the grid): no count.
    assert release.report["algorithm"]["chosen"] == {"m": release.report["algorithm"]["chosen"]["m"], "user_cap": 3}
    assert release.report["algorithm"]["chosen"]["m"] in (1, 2, 4)
    assert [e["step"] for e in release.ledger][0] == "choose m"
    assert not any(e["step"].endswith(": users") for e in release.ledger)


def test_hpa_draws_its_popularity_then_chooses_l_and_keeps_the_papers_split_of_the_rest(spark):
    df = _everyone_rates_everything(spark, 100, 8)
    release = dp_spark.hpa(df, items=range(1, 9), l="auto", l_candidates=[1, 8], d=1, epsilon=8, seed=4,
                           l_choice="exponential")
    assert [e["step"] for e in release.ledger][:2] == ["popularity", "choose l"]  # 1 and 8: no choice of U
    assert release.report["algorithm"]["chosen"]["l"] == 8  # every record kept wins by far at ε = 8
    split = release.report["algorithm"]["epsilon_split"]
    assert split["epsilon_bound"] == pytest.approx(0.8) and split["epsilon_popularity"] == pytest.approx(0.68)
    # A fixed l draws the popularity where it always did, after the guards.
    fixed = dp_spark.hpa(df, items=range(1, 9), l=8, d=1, epsilon=8, seed=4,
                         guards={"max_truncated_fraction": 1, "epsilon": 0.5})
    steps = [e["step"] for e in fixed.ledger]
    assert steps.index("popularity") > max(i for i, step in enumerate(steps) if step.startswith("guard"))


def test_hpa_scores_the_records_it_drops_not_sras(spark, monkeypatch):
    # 1,600 users each rate item 1 and an item of their own. HPA keeps item 1 at l = 1 (its noisy
    # popularity, about 800 from one record per user, is far above the others'): each user drops
    # their own item, a bias of 1 record in each of 1,600 cells (norm² 1,600) against noise of about
    # 4.4 per cell at l = 1 and 4 times that at l = 2 (ε = 1; 1,601 cells), so q(1) ≈ −92 and
    # q(2) ≈ −166. SRA's sample drops half of item 1 (norm² ≈ 800²): q(1) ≈ −804. With Δq ≈ 1
    # (U = 1) and ε_m = 0.1, HPA picks 1 with probability 1 − e^(−7.4) and SRA 2 with 1 − e^(−63).
    users = 1600
    rows = [(u, 1) for u in range(users)] + [(u, u + 2) for u in range(users)]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id"]))
    common = dict(items=range(1, users + 2), l="auto", l_candidates=[1, 2], epsilon=1, seed=3,
                  l_choice="exponential")
    hpa = dp_spark.hpa(df, d=1, **common)
    sra = dp_spark.sra(df, **common)
    assert hpa.report["algorithm"]["chosen"]["l"] == 1 and sra.report["algorithm"]["chosen"]["l"] == 2
    # Negative control: scored as SRA's drop (HPA's quality before), HPA's choice is SRA's.
    unranked = bound_bias.squared_bias_norms
    monkeypatch.setattr(bound_bias, "squared_bias_norms", lambda *a, ranking=None, **k: unranked(*a, **k))
    assert dp_spark.hpa(df, d=1, **common).report["algorithm"]["chosen"]["l"] == 2


def test_under_zcdp_the_choice_runs_at_twice_its_share_as_a_bounded_range_step(spark):
    # The exponential mechanism is ε-bounded range: ε²/8 in ρ, so the bound's share of ρ, handed
    # out as ε_k, buys it at 2ε_k (docs/bound_selection.md, "Privacy claim").
    df = _everyone_rates_everything(spark, 50, 4)
    release = dp_spark.sra(df, items=range(1, 5), l="auto", l_candidates=[1, 2, 4, 32], l_choice="exponential",
                           epsilon=1, delta=1e-6, noise="gaussian", records_per_item=1, seed=2)
    steps = {entry["step"]: entry for entry in release.ledger}
    part = zcdp.epsilon_for_rho(Fraction(release.report["rho_total_exact"]) / 10)
    # The user count takes a tenth of the part's ρ (a pure step), the mechanism the rest at twice its ε.
    count, share = zcdp.epsilon_for_rho(zcdp.pure_cost(part) / 10), zcdp.epsilon_for_rho(zcdp.pure_cost(part) * 9 / 10)
    choose, users = steps["choose l"], steps["choose l: users"]
    assert choose["bounded_range"] is True and Fraction(choose["epsilon_exact"]) == 2 * share
    assert Fraction(users["epsilon_exact"]) == count and not users.get("bounded_range")
    assert Fraction(release.report["rho_spent_exact"]) <= Fraction(release.report["rho_total_exact"])
    # The bounding estimate's two pure steps spend its whole share of ρ (a review's finding: at
    # half of its ε each they spent half of it), to within epsilon_for_rho's rounding down.
    bounding = [e for e in release.ledger if e["step"].startswith("bounding: ")]
    spent = sum(Fraction(e["rho_exact"]) if "rho_exact" in e else zcdp.pure_cost(Fraction(e["epsilon_exact"]))
                for e in bounding)
    planned = release.report["algorithm"]["rho_split"]["epsilon_bounding"]
    assert len(bounding) == 2 and 0.999 * planned <= float(spent) <= planned * (1 + 1e-9)


def test_the_api_refuses_an_objective_without_auto_or_for_edges_it_does_not_publish():
    # Both before anything is read: no DataFrame is needed to be told.
    with pytest.raises(ConfigError, match='l_objective is used only with l="auto"'):
        dp_spark.sra(None, items=range(1, 5), l=10, l_objective="cells", epsilon=1)
    with pytest.raises(ConfigError, match="m_objective is used only with m=\"auto\""):
        dp_spark.lpa(None, items=range(1, 5), m=10, m_objective="cells", epsilon=1)
    with pytest.raises(ConfigError, match="does not publish"):
        dp_spark.hpa(None, items=range(1, 5), l="auto", l_objective={"edge_counts": 1}, epsilon=1)
