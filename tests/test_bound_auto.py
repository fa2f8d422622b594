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
from dp_spark.algorithms import bound_selection
from dp_spark.core.accuracy import EXACT, UPPER_BOUND
from dp_spark.core.domain import AttributeDomain, ItemDomain
from dp_spark.errors import ConfigError
from dp_spark.families import counts
from dp_spark.families.base import Domains, plan_split
from dp_spark.families.registry import family_of
from dp_spark.jobs.config import load_config
from tests.conftest import ROOT

DOMAINS = Domains(ItemDomain(np.arange(1, 101), "1..100"), AttributeDomain(("a", "b")))


def test_auto_takes_the_default_candidates_and_a_tenth_of_epsilon():
    params = counts.CountsParams("sra", "auto")
    assert params.candidates == bound_selection.DEFAULT_CANDIDATES and params.largest_bound == 256
    split = plan_split(family_of("sra"), params, Fraction(1), DOMAINS)
    assert split == {"epsilon_bound": Fraction(1, 10), "epsilon_items": Fraction(9, 20), "epsilon_edges": Fraction(9, 20)}
    hpa = plan_split(family_of("hpa"), counts.CountsParams("hpa", "auto"), Fraction(1), DOMAINS)
    assert hpa["epsilon_bound"] == Fraction(1, 10) and sum(hpa.values()) == 1


def test_the_error_model_is_public_cells_epsilons_and_effective_items():
    params = counts.CountsParams("sra", "auto", effective_items=20)
    split = plan_split(family_of("sra"), params, Fraction(1), DOMAINS)
    model = counts.error_model(params, DOMAINS, split)
    assert model.bias_weight == Fraction(1, 20) + Fraction(1, 40)
    assert model.noise_per_unit == 2 * 100 / Fraction(9, 20) ** 2 + 2 * 200 / Fraction(9, 20) ** 2
    default = counts.error_model(counts.CountsParams("sra", "auto"), DOMAINS, split)
    assert default.bias_weight == Fraction(1, 25) + Fraction(1, 50)  # a quarter of the 100 items


@pytest.mark.parametrize("arguments, message", [
    (dict(l="auto", candidates=[4, 2]), "strictly increasing"),
    (dict(l="auto", candidates=[0, 2]), "integers >= 1"),
    (dict(l="auto", candidates="1,2"), "must be a list"),
    (dict(l="auto", candidates=[1, 200_000]), "supported maximum"),
    (dict(l="auto", effective_items=0), "effective_items"),
    (dict(l=10, candidates=[1, 2]), 'used only with l = "auto"'),
    (dict(l=10, effective_items=5), 'used only with l = "auto"'),
    (dict(l="automatic"), "algorithm.l must be an integer"),
])
def test_bad_auto_settings_are_refused_naming_the_key(arguments, message):
    with pytest.raises(ConfigError, match=message):
        counts.CountsParams("sra", **arguments)


def _config(*overrides):
    return load_config(ROOT / "conf/movielens_sra.toml", list(overrides))


def test_the_config_reads_auto_its_candidates_and_epsilon_share():
    cfg = _config('algorithm.l="auto"', "algorithm.l_candidates=[1, 5, 25]", "privacy.epsilon_bound=0.2",
                  "privacy.epsilon_items=0.4", "privacy.epsilon_edges=0.4")
    assert cfg.params.auto and cfg.params.candidates == (1, 5, 25)
    assert cfg.epsilon_parts["epsilon_bound"] == Fraction(1, 5)


@pytest.mark.parametrize("overrides, message", [
    (['algorithm.l="auto"', "algorithm.m_candidates=[1, 2]"], "m_candidates is not used by sra"),
    (["algorithm.l_candidates=[1, 2]"], 'used only with l = "auto"'),
])
def test_bad_auto_configs_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        _config(*overrides)


def test_epsilon_bound_without_auto_is_refused_before_any_record_is_read():
    params = counts.CountsParams("sra", 10)
    with pytest.raises(ConfigError, match="epsilon_bound is not a part of this sra release"):
        plan_split(family_of("sra"), params, Fraction(1), DOMAINS, {"epsilon_bound": Fraction(1, 10)})


def test_the_plan_states_an_upper_bound_at_the_largest_candidate():
    plan = dp_spark.plan("sra", items=range(1, 101), l="auto", l_candidates=[1, 8, 40], epsilon=1)
    noise = plan.accuracy["tables"]["item_counts"]["noisy_count"]
    assert noise["kind"] == UPPER_BOUND and "chosen privately" in noise["note"]
    assert noise["scale"] == pytest.approx(40 / 0.9)  # the largest candidate over the items' 9/10 of epsilon


def _everyone_rates_everything(spark, users: int, items: int):
    rows = [(u, i) for u in range(users) for i in range(1, items + 1)]
    return spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id"]))


def test_a_release_chooses_pays_for_applies_and_reports_the_bound(spark):
    # 400 users with 64 records each: at ε = 8, keeping all 64 wins by a margin the mechanism
    # cannot miss (q(64) ≈ −100 against q(1) ≈ −6,300 with Δq ≈ 16 and ε_bound = 0.8).
    df = _everyone_rates_everything(spark, 400, 64)
    release = dp_spark.sra(df, items=range(1, 65), l="auto", l_candidates=[1, 64], epsilon=8, seed=5)
    algorithm = release.report["algorithm"]
    assert algorithm["chosen"] == {"l": 64}
    assert algorithm["parameters"]["l"] == "auto" and algorithm["parameters"]["l_candidates"] == [1, 64]
    steps = {entry["step"]: entry for entry in release.ledger}
    assert steps["choose l"]["epsilon_exact"] == "4/5" and steps["choose l"]["cells"] == 2
    assert steps["item_counts"]["sensitivity_l1"] == 64  # the chosen bound is the release's sensitivity
    assert release.epsilon_spent == 8
    # Every record kept: the counts are 400 plus noise of scale 64/7.2 (|noise| < 120 with
    # probability 1 - 64·e^(-13.5), far beyond any seed's reach).
    assert (release["item_counts"]["noisy_count"] - 400).abs().max() < 120
    noise = release.report["accuracy"]["tables"]["item_counts"]["noisy_count"]
    assert noise["kind"] == EXACT and noise["scale"] == pytest.approx(64 / 7.2)
    assert "at the privately chosen l = 64" in noise["note"]
    assert (release["item_counts"]["ci95_halfwidth"] == noise["ci95_halfwidth"]).all()


def test_a_baseline_chooses_m(spark):
    df = _everyone_rates_everything(spark, 50, 4)
    release = dp_spark.lpa(df, items=range(1, 5), m="auto", m_candidates=[1, 2, 4], epsilon=1, seed=2)
    assert set(release.report["algorithm"]["chosen"]) == {"m"}
    assert release.report["algorithm"]["chosen"]["m"] in (1, 2, 4)
    assert [e["step"] for e in release.ledger][0] == "choose m"


def test_hpa_chooses_l_before_its_popularity_and_keeps_the_papers_split_of_the_rest(spark):
    df = _everyone_rates_everything(spark, 100, 8)
    release = dp_spark.hpa(df, items=range(1, 9), l="auto", l_candidates=[1, 8], d=1, epsilon=8, seed=4)
    assert [e["step"] for e in release.ledger][:2] == ["choose l", "popularity"]
    assert release.report["algorithm"]["chosen"] == {"l": 8}  # every record kept wins by far at ε = 8
    split = release.report["algorithm"]["epsilon_split"]
    assert split["epsilon_bound"] == pytest.approx(0.8) and split["epsilon_popularity"] == pytest.approx(0.72)
