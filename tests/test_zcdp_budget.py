"""The ledger under zCDP accounting: costs in ρ, Gaussian entries, refusals, the report's
statement, and the configs and API arguments that ask for it. No Spark."""

from fractions import Fraction

import pytest

from dp_spark.core import zcdp
from dp_spark.core.accounting import PURE, Accounting, accounting_of
from dp_spark.core.ledger import Budget, LedgerEntry, gaussian_entry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.core.vector_noise import GAUSSIAN, LAPLACE, NoiseSecret
from dp_spark.errors import BudgetExceeded, ConfigError
from dp_spark.jobs.config import build_config

RHO = zcdp.rho_of(1.0, 1e-6)
ZCDP = Accounting("gaussian", RHO, 1e-6)


def _laplace(step: str, epsilon: Fraction) -> LedgerEntry:
    return LedgerEntry(step, "discrete Laplace", epsilon, Fraction(1), 1 / epsilon, 3)


def test_pure_steps_cost_half_their_epsilon_squared_and_gaussian_steps_their_rho():
    budget = Budget(1, accounting=ZCDP)
    half = zcdp.epsilon_for_rho(RHO / 2)
    budget.discrete_laplace(_laplace("a", half), RandomSource(seed=1))
    entry = gaussian_entry("b", 10, 10, half, 5)
    assert entry.noise_scale >= Fraction(10) / half**2  # σ² ≥ Δ₂²/ε², never less
    assert entry.rho == Fraction(10) / (2 * entry.noise_scale) <= half**2 / 2
    noise = budget.discrete_gaussian(entry, RandomSource(seed=1))
    assert noise.shape == (5,)
    assert budget.rho_spent == half**2 / 2 + entry.rho <= RHO
    with pytest.raises(BudgetExceeded, match="rho"):  # nothing is left for another share
        budget.discrete_laplace(_laplace("c", Fraction(1, 100)), RandomSource(seed=1))
    assert len(budget.entries) == 2


def test_noise_draws_with_the_sampler_its_entry_names_on_the_driver_and_the_executors():
    # Budget.noise and noise_on_executors serve tables that take either noise (the means): a
    # Gaussian entry must get the Gaussian sampler, a Laplace entry the Laplace one, each spent once.
    laplace, gaussian = _laplace("a", Fraction(1, 20)), gaussian_entry("b", 10, 10, Fraction(1, 20), 3)
    budget, reference = Budget(1, accounting=ZCDP), Budget(1, accounting=ZCDP)
    assert (budget.noise(laplace, RandomSource(seed=1))
            == reference.discrete_laplace(laplace, RandomSource(seed=1))).all()
    assert (budget.noise(gaussian, RandomSource(seed=1))
            == reference.discrete_gaussian(gaussian, RandomSource(seed=1))).all()
    assert budget.entries == reference.entries == [laplace, gaussian]
    secret = NoiseSecret.fresh()
    on_executors = Budget(1, accounting=ZCDP)
    for entry, mechanism in ((_laplace("c", Fraction(1, 20)), LAPLACE),
                             (gaussian_entry("d", 10, 10, Fraction(1, 20), 3), GAUSSIAN)):
        handed_out = on_executors.noise_on_executors(entry, secret)
        assert (handed_out.mechanism, handed_out.label, handed_out.scale) == (mechanism, entry.step, entry.noise_scale)
    assert [e.step for e in on_executors.entries] == ["c", "d"]
    # Spent before drawn: what the budget cannot pay for is neither drawn nor handed out.
    spent = Budget(Fraction(1, 100))
    rng = RandomSource(seed=1)
    with pytest.raises(BudgetExceeded):
        spent.noise(_laplace("e", Fraction(1, 20)), rng)
    with pytest.raises(BudgetExceeded):
        spent.noise_on_executors(_laplace("f", Fraction(1, 20)), NoiseSecret.fresh())
    assert spent.entries == [] and rng.words(4).tolist() == RandomSource(seed=1).words(4).tolist()


def test_an_exponential_mechanism_costs_a_quarter_as_a_bounded_range_step():
    # The exponential mechanism's privacy loss has range ε: ε²/8 under zCDP, so a share ρ_k buys
    # it at twice ε_k (Cesar and Rogers 2021); the same ε as a pure step costs four times that.
    share = zcdp.epsilon_for_rho(RHO / 2)
    chosen = LedgerEntry("choose", "exponential mechanism (monotone quality)", 2 * share, Fraction(1),
                         1 / (2 * share), 3, bounded_range=True)
    assert chosen.cost == (2 * share) ** 2 / 8 == share ** 2 / 2
    assert chosen.to_json()["bounded_range"] is True
    budget = Budget(1, accounting=ZCDP)
    assert budget.exponential_mechanism(chosen, RandomSource(seed=2), [0, 1, 2], monotone=True) in (0, 1, 2)
    assert budget.rho_spent == share ** 2 / 2
    # Without the mark the same entry costs (2ε_k)²/2, four times the share, more than ρ: refused.
    unmarked = LedgerEntry("choose", "exponential mechanism (monotone quality)", 2 * share, Fraction(1),
                           1 / (2 * share), 3)
    with pytest.raises(BudgetExceeded, match="rho"):
        Budget(1, accounting=ZCDP).exponential_mechanism(unmarked, RandomSource(seed=2), [0, 1, 2], monotone=True)
    # Under pure accounting the mark changes nothing: the step spends its ε.
    pure = Budget(1)
    pure.exponential_mechanism(chosen, RandomSource(seed=2), [0, 1, 2], monotone=True)
    assert pure.spent == 2 * share


def test_only_an_exponential_mechanism_may_be_charged_as_bounded_range():
    # Negative controls: a Laplace step marked bounded range would be undercharged fourfold, and
    # so would a marked entry spent directly, whose scale nothing checks.
    marked = LedgerEntry("counts", "discrete Laplace", Fraction(1, 2), Fraction(1), Fraction(2), 3, bounded_range=True)
    with pytest.raises(ValueError, match="only an exponential mechanism"):
        Budget(1, accounting=ZCDP).discrete_laplace(marked, RandomSource(seed=1))
    with pytest.raises(ValueError, match="only an exponential mechanism"):
        Budget(1, accounting=ZCDP).exponential_mechanism(marked, RandomSource(seed=1), [0, 1, 2], monotone=True)
    chosen = LedgerEntry("choose", "exponential mechanism", Fraction(1, 2), Fraction(1), Fraction(2), 3,
                         bounded_range=True)
    with pytest.raises(ValueError, match="only an exponential mechanism drawn by"):
        Budget(1, accounting=ZCDP).spend(chosen)
    # The monotone factor with a step that does not say its quality is monotone (a reviewer's
    # hardening): a general quality drawn so would have a loss range of 2ε, charged as ε.
    general = LedgerEntry("choose", "exponential mechanism", Fraction(1, 2), Fraction(1), Fraction(2), 3,
                          bounded_range=True)
    with pytest.raises(ValueError, match="monotone quality"):
        Budget(1, accounting=ZCDP).exponential_mechanism(general, RandomSource(seed=1), [0, 1, 2], monotone=True)


def test_a_pure_budget_refuses_a_gaussian_step():
    budget = Budget(1)
    with pytest.raises(BudgetExceeded, match="zCDP"):
        budget.discrete_gaussian(gaussian_entry("b", 10, 10, Fraction(1, 2), 5), RandomSource(seed=1))
    assert budget.entries == []


def test_an_entry_whose_rho_is_below_its_noise_is_refused():
    entry = gaussian_entry("b", 10, 10, Fraction(1, 2), 5)
    forged = LedgerEntry(entry.step, entry.mechanism, entry.epsilon, entry.sensitivity, entry.noise_scale, 5,
                         rho=entry.rho / 2, l2_squared=entry.l2_squared)
    with pytest.raises(ValueError, match="below its noise"):
        Budget(1, accounting=ZCDP).discrete_gaussian(forged, RandomSource(seed=1))


def test_the_report_states_rho_and_the_epsilon_delta_it_implies():
    budget = Budget(1, accounting=ZCDP)
    budget.discrete_gaussian(gaussian_entry("items", 30, 30, zcdp.epsilon_for_rho(RHO), 4), RandomSource(seed=2))
    report = budget.to_json()
    assert report["accounting"] == "zCDP"
    assert Fraction(report["rho_spent_exact"]) == budget.rho_spent <= Fraction(report["rho_total_exact"])
    assert report["epsilon_spent"] <= 1.0 and report["epsilon_spent"] == pytest.approx(1.0, rel=1e-4)
    assert report["delta_spent"] == 1e-6
    assert "rho-zCDP" in report["guarantee"] and "delta = 1e-06" in report["guarantee"]
    entry = report["ledger"][0]
    assert entry["epsilon"] is None and entry["sensitivity_l2"] == pytest.approx(30**0.5)
    assert entry["sigma"] ** 2 == pytest.approx(float(Fraction(entry["sigma_squared_exact"])))


def test_a_pure_report_keeps_its_keys():
    budget = Budget(1)
    budget.discrete_laplace(_laplace("a", Fraction(1, 2)), RandomSource(seed=1))
    report = budget.to_json()
    assert "accounting" not in report and "rho_spent" not in report
    assert report["epsilon_spent"] == 0.5


def test_the_plan_is_checked_in_rho():
    budget = Budget(1, accounting=ZCDP)
    share = zcdp.epsilon_for_rho(RHO / 2)
    budget.check_plan({"a": share, "b": share})
    with pytest.raises(BudgetExceeded, match="rho"):
        budget.check_plan({"a": share, "b": share, "c": Fraction(1, 100)})


def test_accounting_from_settings():
    assert accounting_of(None, 1.0, None, None) == (PURE, Fraction(1))
    accounting, epsilon = accounting_of("gaussian", 1.0, 1e-6, None)
    assert accounting.rho == RHO and epsilon == 1 and accounting.conversion_delta == 1e-6
    accounting, epsilon = accounting_of("auto", None, 1e-6, 0.05)
    assert accounting.rho == Fraction(1, 20) and float(epsilon) == pytest.approx(zcdp.epsilon_of(0.05, 1e-6), rel=1e-8)
    for noise, eps, delta, rho, message in [("gaussian", 1.0, None, None, "needs privacy.delta"),
                                            ("laplace", 1.0, 1e-6, 0.1, "not both"),
                                            ("cauchy", 1.0, 1e-6, None, "must be one of"),
                                            ("gaussian", 1.0, 1.5, None, "strictly between"),
                                            ("gaussian", None, 1e-6, None, "needs privacy.epsilon")]:
        with pytest.raises(ConfigError, match=message):
            accounting_of(noise, eps, delta, rho)


def _config(**privacy) -> dict:
    return {"output": "/tmp/x", "source": {"format": "parquet", "path": "/tmp/none.parquet"},
            "domain": {"items": {"range": [1, 100]}, "attributes": ["a", "b"]},
            "privacy": privacy, "algorithm": {"name": "sra", "l": 10}}


def test_configs_ask_for_zcdp_and_are_checked():
    cfg = build_config(_config(epsilon=1.0, delta=1e-6, noise="gaussian"))
    assert cfg.accounting.zcdp and cfg.params.noise == "gaussian" and cfg.epsilon == 1
    assert build_config(_config(epsilon=1.0)).accounting == PURE
    raw = _config(epsilon=1.0, delta=1e-6, noise="gaussian")
    raw["algorithm"]["records_per_item"] = 1
    assert build_config(raw).params.records_per_item == 1
    refused = [
        (_config(epsilon=1.0, noise="gaussian"), "needs privacy.delta"),
        (_config(epsilon=1.0, delta=1e-6), "privacy.delta is a location-entropy parameter"),
        (_config(epsilon=1.0, delta=1e-6, noise="gaussian", epsilon_items=0.5), "shares of rho"),
        ({**_config(epsilon=1.0), "algorithm": {"name": "sra", "l": 10, "records_per_item": 1}}, "only Gaussian"),
        ({**_config(epsilon=1.0, delta=1e-6, noise="gaussian"), "algorithm": {"name": "dft", "m": 10}},
         "argued for Laplace noise only"),
        ({**_config(epsilon=5.0, delta=1e-8, noise="auto"), "domain": {"items": {"range": [1, 6]}},
          "source": {"format": "checkins", "path": "/tmp/none"},
          "algorithm": {"name": "entropy", "variant": "limit_ss", "locations_per_user": 5, "visits_per_location": 5}},
         "does not cover"),
    ]
    for raw, message in refused:
        with pytest.raises(ConfigError, match=message):
            build_config(raw)
    # Items selected privately: partition selection spends half of δ, the conversion the other half.
    private = build_config({**_config(epsilon=1.0, delta=1e-6, noise="gaussian"), "domain": {"items": "private"}})
    assert private.params.delta == 5e-7 and private.accounting.conversion_delta == 5e-7
    assert private.accounting.rho == zcdp.rho_of(1.0, 5e-7)
