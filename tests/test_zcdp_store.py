"""Budgets across releases under zCDP: core.composition's two rules, the budget
store and the API's DatasetBudget, at 365 daily runs and beside pure runs. A budget's
rule is fixed when it is created: sequential (the default, as before) or zcdp."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

import dp_spark
from dp_spark.core import zcdp
from dp_spark.core.composition import Charge, guarantee
from dp_spark.errors import ConfigError
from dp_spark.jobs import budget_store
from dp_spark.jobs.budget_store import BudgetRefused, StoreSpec

CAP = (Fraction(1), 1e-6)


def _zcdp_run(rho: Fraction, delta: float = 1e-6) -> tuple[Fraction, float, Charge]:
    """A zCDP run's (ε, δ) statement at ``delta`` and its charge."""
    epsilon = Fraction(zcdp.epsilon_of(float(rho), delta)).limit_denominator(10**9) + Fraction(1, 10**9)
    return epsilon, delta, Charge(epsilon, delta, rho, 0.0)


def test_each_rule_states_its_own_guarantee():
    pure = [Charge.pure(Fraction(1, 10))] * 5
    g = guarantee(pure, 1e-6)
    assert g.epsilon_sequential == Fraction(1, 2) and g.delta_sequential == 0
    assert g.rho == Fraction(5, 200) and g.epsilon_zcdp > 0.5  # five pure runs: sequential is better
    assert g.within(Fraction(1, 2), 0.0, "sequential") and not g.within(Fraction(1, 2), 1e-6, "zcdp")
    many = [Charge.pure(Fraction(1, 100))] * 400  # sequential ε 4; zCDP ρ = 0.02: ε about 0.9 at 1e-6
    g = guarantee(many, 1e-6)
    assert g.epsilon_sequential == 4 and g.epsilon_zcdp < 1
    assert g.within(Fraction(1), 1e-6, "zcdp") and not g.within(Fraction(1), 1e-6, "sequential")
    assert not g.within(Fraction(1), 0.0, "zcdp")  # the zCDP statement is at δ = 1e-6, above a cap of δ 0
    outside = guarantee([Charge(Fraction(1), 0.0, Fraction(1, 100), 1e-6)], 1e-6)
    assert outside.epsilon_zcdp is None  # its δ outside zCDP takes all of the cap's


@pytest.mark.long
def test_365_daily_runs_fit_in_one_cap_under_zcdp_and_the_366th_does_not(tmp_path):
    spec = StoreSpec(str(tmp_path / "store.json"), "ratings", *CAP, composition="zcdp")
    rho = zcdp.rho_per_run(1.0, 1e-6, 365)
    for day in range(365):
        epsilon, delta, cost = _zcdp_run(rho)
        charged = budget_store.charge(spec, epsilon, delta, {"run_date": f"day {day}"}, cost)
    assert charged["epsilon_running"] <= 1.0 and charged["rho_charged_total"] <= float(zcdp.rho_of(1.0, 1e-6))
    epsilon, delta, cost = _zcdp_run(rho)
    with pytest.raises(BudgetRefused, match="by zCDP composition"):
        budget_store.charge(spec, epsilon, delta, {"run_date": "day 366"}, cost)
    info = budget_store.summary(spec.path, "ratings")
    assert len(info["runs"]) == 365 and info["composition"] == "zcdp"
    assert info["zcdp"]["epsilon_at_cap_delta"] <= 1.0
    assert "zCDP:    rho spent" in budget_store.summary_text(info)
    # Each run's noise: σ of one count table at l = 10 (Δ₂² = 10 with one record per item) against
    # the pure path's Laplace sd at ε/365 (scale 10·365): 274 against 5,162.
    sigma = (10 / (2 * float(rho))) ** 0.5
    assert 270 < sigma < 280 and 2**0.5 * 10 * 365 > 5000


def test_a_sequential_store_adds_the_same_runs_by_their_epsilon_and_delta(tmp_path):
    # Negative control: in a store without the zcdp rule (every store before, and the default) each
    # run's δ of 1e-6 fills the cap at once, whatever rho the run reports.
    spec = StoreSpec(str(tmp_path / "store.json"), "ratings", *CAP)
    epsilon, delta, cost = _zcdp_run(zcdp.rho_per_run(1.0, 1e-6, 365))
    budget_store.charge(spec, epsilon, delta, {}, cost)
    with pytest.raises(BudgetRefused, match="spent delta"):
        budget_store.charge(spec, epsilon, delta, {}, cost)
    assert budget_store.summary(spec.path, "ratings")["composition"] == "sequential"


def test_a_sequential_store_with_a_delta_cap_still_takes_pure_runs_to_their_sum(tmp_path):
    # The second read's case: a cap of (1, 1e-6) takes exactly 100 pure runs of 0.01, as before zCDP.
    spec = StoreSpec(str(tmp_path / "store.json"), "ratings", *CAP)
    for _ in range(100):
        budget_store.charge(spec, Fraction(1, 100), 0.0, {})
    with pytest.raises(BudgetRefused, match="spent epsilon 1 of its cap 1"):
        budget_store.charge(spec, Fraction(1, 100), 0.0, {})
    state = json.loads((tmp_path / "store.json").read_text())
    assert "composition" not in state and all("rho_exact" not in run for run in state["runs"])


def test_the_rule_is_fixed_with_the_store(tmp_path):
    path = str(tmp_path / "store.json")
    with pytest.raises(ConfigError, match="needs a delta cap"):
        budget_store.create(path, "ratings", Fraction(1), 0.0, composition="zcdp")
    budget_store.create(path, "ratings", Fraction(1), 1e-6)
    with pytest.raises(BudgetRefused, match="a run never changes it"):
        budget_store.charge(StoreSpec(path, "ratings", composition="zcdp"), Fraction(1, 10), 0.0, {})
    budget_store.set_cap(path, "ratings", Fraction(1), 1e-6, "daily zCDP runs", composition="zcdp")
    budget_store.charge(StoreSpec(path, "ratings", composition="zcdp"), Fraction(1, 10), 0.0, {})
    info = budget_store.summary(path, "ratings")
    assert info["composition"] == "zcdp" and info["cap_log"][-1]["composition"] == "zcdp"
    assert "composition zcdp" in budget_store.summary_text(info)


def test_pure_runs_keep_their_store_and_a_cap_below_the_zcdp_spend_is_refused(tmp_path):
    spec = StoreSpec(str(tmp_path / "store.json"), "ratings", *CAP, composition="zcdp")
    budget_store.charge(spec, Fraction(1, 20), 0.0, {})
    run = json.loads((tmp_path / "store.json").read_text())["runs"][0]
    assert "rho_exact" not in run  # a pure run is stored as before
    rho = zcdp.rho_per_run(0.9, 1e-6, 30)
    for _ in range(30):  # beside the pure run's ρ of 0.05²/2: ε about 0.93 in all by zCDP
        epsilon, delta, cost = _zcdp_run(rho, 1e-7)
        budget_store.charge(spec, epsilon, delta, {}, cost)
    spent = budget_store.running(budget_store.read(spec), 1e-6)
    assert spent.epsilon_sequential > 1 and spent.epsilon_zcdp <= 1
    with pytest.raises(ConfigError, match="by zCDP composition"):
        budget_store.set_cap(spec.path, "ratings", Fraction(1, 2), 1e-6, "tighter")


def test_the_api_budget_composes_zcdp_releases_the_same_way():
    budget = dp_spark.DatasetBudget(epsilon=1, delta=1e-6, composition="zcdp")
    rho = zcdp.rho_per_run(1.0, 1e-6, 50)
    for _ in range(50):
        epsilon, delta, cost = _zcdp_run(rho)
        budget.charge(epsilon, delta, "a release", cost)
    epsilon, delta, cost = _zcdp_run(rho)
    with pytest.raises(dp_spark.BudgetExceeded, match="by zCDP composition"):
        budget.charge(epsilon, delta, "one more", cost)
    assert dp_spark.rho_per_run(1, 1e-6, 50) == pytest.approx(float(rho))
    with pytest.raises(ConfigError, match="runs"):
        dp_spark.rho_per_run(1, 1e-6, 0)
    sequential = dp_spark.DatasetBudget(epsilon=1, delta=1e-6)  # the default rule: the deltas add up
    sequential.charge(epsilon, delta, "a release", cost)
    with pytest.raises(dp_spark.BudgetExceeded, match="delta"):
        sequential.charge(epsilon, delta, "another", cost)
