"""δ at its boundaries: caps compared exactly, splits that never add up past their total, and a
delta_of that never states 0.

A δ is a double. The budget (core.ledger.Budget), the composition of releases
(core.composition.Guarantee.within) and through them the budget store and the API's DatasetBudget
compare the exact sum of the doubles' values (as fractions) with the cap, with no allowance above
it: a spend exactly at the cap fits, the next double above does not, and neither do parts whose
float sum rounds down to the cap while their exact sum is above it. The δ's the code splits
(partition selection's share and the zCDP conversion's, δ/l0 per key, Limit-SS's δ/M per
location, the δ left to the conversion across runs) add up to at most their total exactly.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

import dp_spark
from dp_spark.core import composition, zcdp
from dp_spark.core.accounting import accounting_of
from dp_spark.core.composition import Charge, Guarantee, guarantee
from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.errors import BudgetExceeded
from dp_spark.families.location_entropy import entropy as location_entropy
from dp_spark.families.location_entropy import sensitivity as entropy_sensitivity
from dp_spark.jobs import budget_store
from dp_spark.jobs.budget_store import BudgetRefused, StoreSpec
from dp_spark.release import partition_selection as ps
from dp_spark.release.private_keys import PARTITION_DELTA_SHARE, partition_delta

CAP = 1e-6
# δ's of every kind: round decimals, thirds and sevenths that no double holds, the extremes a
# config may give (core.accounting.MIN_DELTA is 1e-100), and a large one.
DELTAS = (1e-6, 1e-6 / 3, 1e-5 / 3, 1e-7 / 7, 0.1, 0.3, 1e-10, 1e-8, 2e-7, 3e-9, 1e-100, 1e-99 / 3, 0.999)


def above(x: float) -> float:
    return math.nextafter(x, math.inf)


def rounds_down_to(cap: float) -> tuple[float, float]:
    """Doubles a, b > 0 with a + b == cap in floating point but an exact sum above cap."""
    a = cap * 0.75
    b = above(cap - a)  # cap − a is exact (Sterbenz); one ulp of b is below half an ulp of cap
    assert a + b == cap and Fraction(a) + Fraction(b) > Fraction(cap)
    return a, b


# Ten parts of 1e-9 against 1e-8: each float sum on the way, and math.fsum of all ten, is at or
# below the cap, but the doubles' exact sum is above it.
TENTH, TEN_CAP = 1e-9, 1e-8


def test_the_ten_parts_case_is_what_it_says():
    assert math.fsum([TENTH] * 10) <= TEN_CAP and 10 * Fraction(TENTH) > Fraction(TEN_CAP)


def _entry(delta: float, step: str = "step", epsilon: Fraction = Fraction(1, 100)) -> LedgerEntry:
    return LedgerEntry(step, "discrete Laplace", epsilon, Fraction(1), 1 / epsilon, 1, delta=delta)


# -- Budget._spend: one job's ledger -------------------------------------------------------------------


def test_a_spend_exactly_at_the_cap_fits():
    budget = Budget(1, delta=CAP)
    budget.spend(_entry(CAP))
    assert budget.delta_spent == CAP


def test_a_spend_one_double_above_the_cap_is_refused():
    budget = Budget(1, delta=CAP)
    with pytest.raises(BudgetExceeded, match="delta"):
        budget.spend(_entry(above(CAP)))
    assert budget.entries == []


def test_parts_whose_float_sum_rounds_down_to_the_cap_are_refused():
    a, b = rounds_down_to(CAP)
    budget = Budget(1, delta=CAP)
    budget.spend(_entry(a, "first"))
    with pytest.raises(BudgetExceeded, match="delta"):
        budget.spend(_entry(b, "second"))
    assert [e.step for e in budget.entries] == ["first"]


def test_rounding_cannot_accumulate_past_the_cap_over_many_steps():
    budget = Budget(1, delta=TEN_CAP)
    for i in range(9):
        budget.spend(_entry(TENTH, f"part {i}"))
    with pytest.raises(BudgetExceeded, match="delta"):
        budget.spend(_entry(TENTH, "part 9"))
    assert len(budget.entries) == 9


def test_parts_that_add_up_exactly_to_the_cap_all_fit():
    budget = Budget(1, delta=CAP)
    for i in range(4):
        budget.spend(_entry(CAP / 4, f"quarter {i}"))  # 2.5e-7 four times is the double 1e-6 exactly
    assert 4 * Fraction(CAP / 4) == Fraction(CAP)
    assert len(budget.entries) == 4 and budget.delta_spent == CAP


def test_the_report_still_gives_the_float_sum():
    budget = Budget(1, delta=CAP)
    budget.spend(_entry(CAP / 3, "a"))
    budget.spend(_entry(CAP / 3, "b"))
    report = budget.to_json()
    assert type(report["delta_spent"]) is float and report["delta_spent"] == math.fsum([CAP / 3] * 2)
    assert type(report["delta_total"]) is float and report["delta_total"] == CAP
    assert all(type(e["delta"]) is float for e in report["ledger"])


def test_a_negative_delta_cannot_buy_room():
    budget = Budget(1, delta=CAP)
    with pytest.raises(ValueError, match="delta"):
        budget.spend(_entry(-CAP))


# -- Guarantee.within: releases of one dataset ------------------------------------------------------


def _within(deltas, cap: float) -> bool:
    return guarantee([Charge.pure(Fraction(1, 100), d) for d in deltas], cap).within(Fraction(1), cap)


def test_within_takes_a_sum_exactly_at_the_cap_and_nothing_above():
    assert _within([CAP], CAP)
    assert not _within([above(CAP)], CAP)
    assert _within([CAP / 4] * 4, CAP)


def test_within_refuses_parts_whose_float_sum_rounds_down_to_the_cap():
    a, b = rounds_down_to(CAP)
    g = guarantee([Charge.pure(Fraction(1, 100), a), Charge.pure(Fraction(1, 100), b)], CAP)
    assert g.delta_sequential == CAP  # what a report shows: the float sum
    assert not g.within(Fraction(1), CAP)


def test_within_refuses_many_parts_past_the_cap():
    assert _within([TENTH] * 9, TEN_CAP)
    assert not _within([TENTH] * 10, TEN_CAP)


def test_a_guarantee_built_from_its_fields_compares_its_double_exactly():
    g = Guarantee(Fraction(1, 2), above(CAP), Fraction(1, 8), 0.0, CAP, None)
    assert not g.within(Fraction(1), CAP)
    assert Guarantee(Fraction(1, 2), CAP, Fraction(1, 8), 0.0, CAP, None).within(Fraction(1), CAP)


def test_the_budget_store_and_the_api_refuse_the_rounded_down_pair(tmp_path):
    a, b = rounds_down_to(CAP)
    store = StoreSpec(str(tmp_path / "budget.json"), "ratings", Fraction(10), CAP)
    budget_store.charge(store, Fraction(1), a, {})
    with pytest.raises(BudgetRefused, match="delta"):
        budget_store.charge(store, Fraction(1), b, {})
    at_cap = StoreSpec(str(tmp_path / "exact.json"), "ratings", Fraction(10), CAP)
    budget_store.charge(at_cap, Fraction(1), CAP / 2, {})
    budget_store.charge(at_cap, Fraction(1), CAP / 2, {})  # exactly the cap: fits

    api = dp_spark.DatasetBudget(epsilon=10, delta=CAP)
    api.charge(Fraction(1), a, "first")
    with pytest.raises(BudgetExceeded, match="delta"):
        api.charge(Fraction(1), b, "second")


def test_the_store_says_when_only_the_doubles_exact_sum_passes_the_cap(tmp_path):
    """Ten runs of 1e-9 against a cap of 1e-8: the tenth is refused, and the refusal says why,
    since its figures, printed as %g, read as the cap exactly."""
    store = StoreSpec(str(tmp_path / "budget.json"), "ratings", Fraction(100), TEN_CAP)
    for _ in range(9):
        budget_store.charge(store, Fraction(1), TENTH, {})
    with pytest.raises(BudgetRefused, match="add up exactly to a little more than the cap"):
        budget_store.charge(store, Fraction(1), TENTH, {})
    with pytest.raises(BudgetRefused) as refused:  # a plain overspend does not get the note
        budget_store.charge(store, Fraction(1), 2 * TENTH, {})
    assert "a little more" not in str(refused.value)


# -- The splits the code makes ---------------------------------------------------------------------------


def _conversion_share_rounds_up(cap: float) -> float:
    """An outside δ x for which the float cap − x is above the exact difference."""
    for k in range(1, 1000):
        x = cap * k / 3000
        if Fraction(cap - x) > Fraction(cap) - Fraction(x):
            return x
    raise AssertionError("no such x")


@pytest.mark.parametrize("cap", [CAP, 1e-8, 0.1])
def test_the_delta_left_to_the_zcdp_conversion_never_adds_up_past_the_cap(cap, monkeypatch):
    """Across runs, a zCDP statement is taken at δ_cap − Σ δ_outside: rounded down, not to nearest."""
    seen = []
    real = zcdp.epsilon_of

    def spy(rho, delta):
        seen.append(delta)
        return real(rho, delta)

    monkeypatch.setattr(composition.zcdp, "epsilon_of", spy)
    x = _conversion_share_rounds_up(cap)
    for outside in ([x], [x, x / 3], [cap / 7] * 5, [cap / 2]):
        seen.clear()
        g = guarantee([Charge(Fraction(1, 10), 0.0, Fraction(1, 200), d) for d in outside], cap)
        (left,) = seen
        assert left > 0 and Fraction(left) + sum(map(Fraction, outside)) <= Fraction(cap), (cap, outside)
        assert g.epsilon_zcdp is not None


@pytest.mark.parametrize("delta", DELTAS)
def test_partition_selection_and_the_conversion_share_delta_within_it(delta):
    """Under zCDP with private items, partition selection spends its share of δ outside zCDP and the
    conversion gets the rest (the job's claimed δ is their float sum): exactly within δ."""
    outside = partition_delta(delta, True)
    accounting, _ = accounting_of("gaussian", 1, delta, None, outside_share=PARTITION_DELTA_SHARE)
    conversion = accounting.conversion_delta
    assert Fraction(outside) + Fraction(conversion) <= Fraction(delta)
    assert Fraction(outside + conversion) <= Fraction(delta)  # as runner.claimed_delta adds them
    assert outside + conversion == delta  # nothing lost either: the share is a half
    assert partition_delta(delta, False) == delta
    alone, _ = accounting_of("gaussian", 1, delta, None)  # without partition selection: all of δ
    assert alone.conversion_delta == delta


@pytest.mark.parametrize("delta", DELTAS[:-1])
@pytest.mark.parametrize("l0", [1, 3, 7, 10, 30])
def test_partition_selection_per_key_delta_adds_up_to_at_most_delta(delta, l0):
    units = ps._delta_units(delta, l0)
    assert Fraction(units * l0, ps.ONE) <= Fraction(delta)  # the grid's δ/l0, l0 times
    if units:
        assert ps.SelectionParams(Fraction(1), delta, l0).key_delta * l0 == Fraction(delta)


@pytest.mark.parametrize("delta", [1e-6 / 3, 0.1, 1e-10, 1e-8, 1e-5 / 7, 1e-100])
@pytest.mark.parametrize("M", [1, 3, 5, 7, 100])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 1 / 3])
def test_limit_ss_smoothing_is_within_delta_over_m_per_location(delta, M, epsilon):
    """Limit-SS splits δ as δ/M per location through β′ = (ε/M)/(2 ln(2M/δ)): the β it uses (β′ less
    the slack for the doubles) is at most the exact one, so no location spends more than δ/M."""
    used = Decimal(entropy_sensitivity.smoothing(epsilon, delta, M) - location_entropy.SMOOTHNESS_SLACK)
    with localcontext() as ctx:
        ctx.prec = 60
        exact = Decimal(epsilon) / (2 * M * (Decimal(2 * M) / Decimal(delta)).ln())
        assert used <= exact


# -- delta_of never states 0 ----------------------------------------------------------------------------


def _log_delta_exact(rho: float, epsilon: float, alpha: float) -> Decimal:
    """log of Corollary 13's δ at α, in 60 digits (the doubles' own values)."""
    with localcontext() as ctx:
        ctx.prec = 60
        a, r, e = Decimal(alpha), Decimal(rho), Decimal(epsilon)
        return (a - 1) * (a * r - e) + a * (1 - 1 / a).ln() - (a - 1).ln()


def _delta_exact(rho: float, epsilon: float) -> Decimal:
    """Corollary 13's δ at the α delta_of uses: at least the true δ (the infimum over α)."""
    with localcontext() as ctx:
        ctx.prec = 60
        return _log_delta_exact(rho, epsilon, zcdp._best_alpha(rho, epsilon)).exp()


def _old_delta_of(rho: float, epsilon: float) -> float:
    """delta_of as it was, before its floor."""
    log_delta = zcdp._log_delta(rho, epsilon, zcdp._best_alpha(rho, epsilon))
    return min(1.0, math.exp(log_delta) * (1 + zcdp._SAFETY))


@pytest.mark.parametrize("rho, epsilon", [(0.01, 5.66), (1e-4, 0.57), (0.001, 1.8), (0.05, 12.7)])
def test_a_true_delta_far_below_the_least_double_is_stated_positive_and_above_it(rho, epsilon):
    true = _delta_exact(rho, epsilon)
    assert true.ln() < -800  # far below 5e-324: exp rounds it to 0
    stated = zcdp.delta_of(rho, epsilon)
    assert stated > 0 and Decimal(stated) >= true


def test_delta_of_is_safe_across_the_subnormal_range():
    """Where exp's result is subnormal (log δ from about -708 to -745) it has too few bits for the
    relative margin (it was stated below the true δ, e.g. at ε = 1.6955 here); delta_of states
    e^-708 there, above the true δ."""
    rho = 0.001
    epsilons = [1.6 + k / 2000 for k in range(400)]  # log δ from about -646 to -810
    stated = {epsilon: zcdp.delta_of(rho, epsilon) for epsilon in epsilons}
    below = [epsilon for epsilon in epsilons if not Decimal(stated[epsilon]) >= _delta_exact(rho, epsilon)]
    assert below == []
    assert min(stated.values()) >= 2.2250738585072014e-308  # a normal double, not 0


@pytest.mark.parametrize("rho, epsilon", [(rho, epsilon) for rho in (1 / 32, 0.05, 0.5, 2.0, 10.0)
                                           for epsilon in (0.0, 0.01, 0.5, 1.0, 3.0, 8.0)]
                         + [(1e-4, 0.0), (1e-4, 0.01), (1e-4, 0.5), (0.001, 1.6), (0.01, 5.3)])
def test_delta_of_is_unchanged_where_exp_is_a_normal_double(rho, epsilon):
    old = _old_delta_of(rho, epsilon)
    assert old >= 2.2250738585072014e-308  # the old formula's result is a normal double here
    assert zcdp.delta_of(rho, epsilon) == old


def _old_epsilon_of(rho: float, delta: float) -> float:
    """epsilon_of as it was."""
    if _old_delta_of(rho, 0.0) <= delta:
        return 0.0
    classical = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    return zcdp._bisect(0.0, classical, lambda eps: _old_delta_of(rho, eps) <= delta)[1] * (1 + zcdp._SAFETY)


def _old_rho_of(epsilon: float, delta: float) -> Fraction:
    """rho_of as it was."""
    low, _ = zcdp._bisect(0.0, epsilon, lambda rho: _old_delta_of(rho, epsilon) > delta)
    return zcdp.floor_fraction(low * (1 - zcdp._RHO_SAFETY))


@pytest.mark.parametrize("delta", [1e-6, 1e-6 / 3, 1e-12, 1e-100, 1e-300])
@pytest.mark.parametrize("rho, epsilon", [(0.05, 1.0), (1e-4, 0.1), (2.0, 10.0)])
def test_epsilon_of_and_rho_of_are_unchanged_at_a_delta_a_double_can_state(delta, rho, epsilon):
    """Down to e^-708 the predicates their bisections test are the same as before (a floored δ and
    an underflowed 0 are both at most δ): the same ε and ρ to the last bit."""
    assert zcdp.epsilon_of(rho, delta) == _old_epsilon_of(rho, delta)
    assert zcdp.rho_of(epsilon, delta) == _old_rho_of(epsilon, delta)


@pytest.mark.parametrize("delta", [3e-308, 1e-320])
def test_epsilon_of_and_rho_of_below_the_floor_compare_logs(delta):
    """At a δ below e^-708, which delta_of never states, epsilon_of and rho_of compare log δ: still
    safe (the exact δ at what they state is at most the one asked), and no looser than the
    classical bound ρ + 2√(ρ ln(1/δ)), nor a ρ of 0."""
    rho = 0.01
    epsilon = zcdp.epsilon_of(rho, delta)
    assert math.isfinite(epsilon) and epsilon <= rho + 2 * math.sqrt(rho * -math.log(delta))
    assert _delta_exact(rho, epsilon) <= Decimal(delta)
    handed = zcdp.rho_of(1.0, delta)
    assert handed > 0 and _delta_exact(float(handed), 1.0) <= Decimal(delta)


def test_float_at_most_rounds_down():
    for value in (Fraction(1, 3), Fraction(1, 10**7) * 3, Fraction(2, 3) * Fraction(1e-6), Fraction(1, 2)):
        f = zcdp.float_at_most(value)
        assert Fraction(f) <= value < Fraction(above(f))
    assert zcdp.float_at_most(Fraction(1, 2)) == 0.5
