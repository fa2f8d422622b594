"""Private partition selection (docs/partition_selection.md): the exact release table against
its two constraints and against simulation, its monotonicity, the δ bound for a new key, the
negative controls (a user not bounded to l0 keys, a lowered threshold), bad inputs, the ledger,
and the Spark path on string and integer ids."""

from __future__ import annotations

import importlib.util
import math
from decimal import Context, Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dp_spark.core import mechanisms
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import BudgetExceeded, ConfigError
from dp_spark.lab import audit
from dp_spark.lab.audit_targets import FAMILIES, TARGETS
from dp_spark.release import partition_selection as ps

GRID = [(Fraction(1, 10), 1e-6, 1), (Fraction(1), 1e-6, 1), (Fraction(1), 1e-6, 10), (Fraction(1), 1e-6, 30),
        (Fraction(5), 1e-3, 1), (Fraction(1, 2), 1e-2, 4), (Fraction(2), 1e-10, 3)]


def params(eps=Fraction(1), delta=1e-6, l0=1) -> ps.SelectionParams:
    return ps.SelectionParams(eps, delta, l0)


# ---------------------------------------------------------------------------
# The table.


@pytest.mark.parametrize("eps, delta, l0", GRID)
def test_the_table_meets_both_constraints_exactly(eps, delta, l0):
    """Between n − 1 and n users, in exact rationals: π(n) ≤ e^ε'·π(n−1) + δ' (release) and
    1 − π(n−1) ≤ e^ε'·(1 − π(n)) + δ' (no release), with r ≤ e^ε' in place of e^ε' (which only
    makes the check stricter); the other two directions follow from π rising."""
    p = params(eps, delta, l0)
    pi = [Fraction(q, ps.ONE) for q in ps.release_table(p)]
    r, d = ps.exp_lower_bound(p.key_epsilon), p.key_delta
    exact_exp = Fraction(Decimal(p.key_epsilon.numerator).__truediv__(p.key_epsilon.denominator).exp(
        Context(prec=80)))  # e^ε' to 80 digits: the check is far finer than r's 2^-60
    assert exact_exp * (1 - Fraction(1, 2**55)) < r < exact_exp
    assert pi[0] == 0 and pi[-1] == 1 and all(q < 1 for q in pi[:-1])
    for before, after in zip(pi, pi[1:]):
        assert before <= after
        assert after <= r * before + d
        assert 1 - before <= r * (1 - after) + d


@pytest.mark.parametrize("eps, delta, l0", GRID)
def test_the_table_is_the_optimal_recursion_up_to_rounding(eps, delta, l0):
    """Against Desfontaines et al.'s recursion in doubles: the exact table is below it by less
    than 1e-7 (relative). Each step rounds down by under 2^-62, and the growth e^ε' per step
    carries those roundings along: at ε' = 2/3, δ' = 3e-11 they come to about 4e-9."""
    p = params(eps, delta, l0)
    e, d = math.exp(float(p.key_epsilon)), float(p.key_delta)
    ideal = [0.0]
    while ideal[-1] < 1 and len(ideal) < 100_000:
        q = ideal[-1]
        ideal.append(min(e * q + d, 1 - (1 - q - d) / e, 1.0))
    exact = ps.release_probabilities(p, np.arange(len(ideal) + 5))
    np.testing.assert_allclose(exact[:len(ideal)], ideal, atol=1e-15, rtol=1e-7)
    assert np.all(exact[:len(ideal)] <= np.array(ideal) * (1 + 1e-12) + 1e-15)  # never above it
    assert abs(ps.threshold(p) - (len(ideal) - 1)) <= 1


@pytest.mark.parametrize("eps, delta, l0", GRID)
def test_a_key_with_one_user_is_released_with_probability_at_most_delta_over_l0(eps, delta, l0):
    p = params(eps, delta, l0)
    assert ps.release_probability(p, 0) == 0
    one = ps.release_probability(p, 1)
    assert 0 < one <= Fraction(delta) / l0
    assert one > Fraction(delta) / l0 - Fraction(1, ps.ONE)  # and uses the δ it is given, to the grid


def test_the_release_probability_matches_simulation():
    """Every count up to the threshold, 20,000 keys each, fixed seed: each frequency within 5
    standard deviations of the exact π(n) (about 1 false alarm in 3.5 million counts)."""
    p = params(Fraction(1), 1e-2, 2)
    top = ps.threshold(p)
    copies = 20_000
    users = np.repeat(np.arange(0, top + 2), copies)
    keys = np.arange(users.size)
    released = ps.select(keys, users, p, Budget(1, 1e-2), RandomSource(2026))
    hits = np.bincount(users[released], minlength=top + 2)
    expected = ps.release_probabilities(p, np.arange(top + 2))
    sd = np.sqrt(copies * expected * (1 - expected))
    assert np.all(np.abs(hits - copies * expected) <= 5 * sd + 1e-9), (hits, copies * expected)
    assert hits[0] == 0 and hits[-1] == copies


def test_threshold_and_median_are_monotone_in_epsilon_delta_and_l0():
    def both(eps=Fraction(1), delta=1e-6, l0=1):
        p = params(eps, delta, l0)
        return ps.threshold(p), ps.median_count(p)

    for low, high in [(Fraction(1, 10), Fraction(1, 2)), (Fraction(1, 2), Fraction(1)), (Fraction(1), Fraction(5))]:
        assert all(a > b for a, b in zip(both(eps=low), both(eps=high)))  # more ε: fewer users needed
    for low, high in [(1e-10, 1e-6), (1e-6, 1e-3), (1e-3, 0.1)]:
        assert all(a > b for a, b in zip(both(delta=low), both(delta=high)))  # more δ: fewer users
    for low, high in [(1, 2), (2, 10), (10, 30)]:
        assert all(a < b for a, b in zip(both(l0=low), both(l0=high)))  # more keys per user: more users


@pytest.mark.parametrize("eps, delta, l0", GRID)
def test_the_median_formula_is_within_one_of_the_table(eps, delta, l0):
    p = params(eps, delta, l0)
    n = ps.median_count(p)
    assert ps.release_probability(p, n) >= Fraction(1, 2) > ps.release_probability(p, n - 1)
    assert abs(ps.median_count_formula(p) - n) <= 1


def test_the_measured_numbers_in_the_doc():
    """docs/partition_selection.md's table at ε = 1, δ = 1e-6."""
    assert [(ps.threshold(params(l0=l0)), ps.median_count(params(l0=l0))) for l0 in (1, 10, 30)] == [
        (28, 14), (264, 132), (789, 395)]


# ---------------------------------------------------------------------------
# Negative controls: what the claim rests on, broken.


def test_without_the_l0_bound_one_user_puts_many_keys_over():
    """The per-key δ' = δ/l0 holds only if a user reaches at most l0 keys. One unbounded user with
    100 keys nobody else has, at l0 = 1: some key shows with probability 1 − (1 − δ)^100, far
    above δ (exact). Bounded to one key, it is π(1) ≤ δ."""
    p = params(Fraction(1), 1e-2, 1)
    one = ps.release_probability(p, 1)
    assert 1 - (1 - one) ** 100 > 50 * Fraction(p.delta)
    assert 1 - (1 - one) ** p.l0 <= Fraction(p.delta)


def test_a_lowered_threshold_breaks_the_delta_bound():
    """The table read one user ahead (the threshold lowered by one): a new key then shows with
    probability π(2) > δ', which no ε can pay for (the key is absent on D)."""
    p = params(Fraction(1), 1e-6, 1)
    assert ps.release_probability(p, 2) > 2 * p.key_delta


def test_the_audit_passes_the_grid_and_flags_the_lowered_threshold():
    family = FAMILIES["partition_selection"]
    assert len(family.points) == 24
    for target in family.points:
        result = audit.run(target, 20_000, seed=7)
        assert not result.flagged, (target.name, result.lower_bound, result.event)
    control = audit.run(TARGETS["partition_selection_threshold_lowered"], 20_000, seed=7)
    assert control.negative_control and control.flagged, (control.lower_bound, control.event)


def test_the_claim_is_documented_beside_the_modules():
    spec = importlib.util.spec_from_file_location("claims", Path(__file__).with_name("test_claims_documented.py"))
    claims = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(claims)
    claims.check_claim("docs/partition_selection.md", "partition_selection")
    for module in ("dp_spark/release/partition_selection.py", "dp_spark/release/private_keys.py"):
        claims.check_docstring_points_to(module, "docs/partition_selection.md", "partition_selection")


# ---------------------------------------------------------------------------
# Inputs, ledger, sampler.


@pytest.mark.parametrize("kwargs, message", [
    ({"l0": 0}, "l0"), ({"l0": -3}, "l0"), ({"l0": 1.5}, "l0"), ({"l0": True}, "l0"),
    ({"delta": 0.0}, "delta"), ({"delta": 1.0}, "delta"), ({"delta": -0.1}, "delta"), ({"delta": 2}, "delta"),
    ({"delta": "1e-6"}, "delta"), ({"delta": 1e-30, "l0": 10}, "too small"),
    ({"eps": 0}, "epsilon"), ({"eps": -1}, "epsilon"), ({"eps": "x"}, "epsilon"),
])
def test_bad_parameters_are_refused_with_their_name(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        params(**kwargs)


def test_select_refuses_mismatched_or_negative_counts():
    with pytest.raises(ValueError, match="one length"):
        ps.select(np.arange(3), [1, 2], params(), Budget(1, 1e-6), RandomSource(0))
    with pytest.raises(ValueError, match=">= 0"):
        ps.select(np.arange(2), [1, -2], params(), Budget(1, 1e-6), RandomSource(0))


def test_the_ledger_records_epsilon_delta_and_only_public_numbers():
    budget = Budget(2, 1e-5)
    keys = np.array(["b", "a", "c", "d"], dtype=object)
    chosen = ps.select(keys, [500, 500, 0, 1], params(Fraction(1), 1e-6, 3), budget, RandomSource(1))
    assert chosen.tolist() == ["a", "b"]  # 500 users are over the threshold, 0 never, 1 almost never
    (entry,) = budget.entries
    assert (entry.epsilon, entry.delta, entry.sensitivity, entry.cells) == (1, 1e-6, 3, 0)
    assert "l0 = 3" in entry.mechanism and str(ps.threshold(params(Fraction(1), 1e-6, 3))) in entry.mechanism
    assert budget.delta_spent == 1e-6


def test_a_budget_without_delta_refuses_before_drawing():
    budget = Budget(1)
    with pytest.raises(BudgetExceeded, match="delta"):
        ps.select(np.arange(3), [5, 5, 5], params(), budget, RandomSource(0))
    assert budget.entries == []


def test_bernoulli_dyadic_is_exact_at_the_ends_and_refuses_bad_input():
    rng = RandomSource(3)
    draws = mechanisms.bernoulli_dyadic(rng, np.array([0, 1 << 62] * 1000, dtype=np.uint64), 62)
    assert not draws[0::2].any() and draws[1::2].all()
    quarter = mechanisms.bernoulli_dyadic(rng, [1] * 40_000, 2)
    assert abs(quarter.mean() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / 40_000)
    with pytest.raises(ValueError, match="bits"):
        mechanisms.bernoulli_dyadic(rng, [1], 63)
    with pytest.raises(ValueError, match="numerators"):
        mechanisms.bernoulli_dyadic(rng, [5], 2)


# ---------------------------------------------------------------------------
# Spark.


def records_of(spark, pairs, key_type):
    return spark.createDataFrame(pairs, f"user_id long, item_id {key_type}, rating int")


@pytest.mark.parametrize("key_type, make", [("string", lambda i: f"sku-{i:03d}"), ("long", lambda i: 1000 + i)])
def test_bounded_keys_keep_at_most_l0_of_each_users_own_keys(spark, key_type, make):
    from dp_spark.aggregates.key_users import users_per_key
    from dp_spark.bounding.user_keys import bounded_keys

    # User 1: 6 distinct keys, each twice; user 2: 2 keys; user 3: key 0 only (and a null key).
    pairs = [(1, make(i), 5) for i in range(6) for _ in range(2)] + [(2, make(0), 1), (2, make(7), 1),
                                                                      (3, make(0), 2), (3, None, 2)]
    records = records_of(spark, pairs, key_type)
    kept = bounded_keys(records, 3, seed=11).toPandas()
    by_user = kept.groupby("user_id")["item_id"].apply(set).to_dict()
    assert len(by_user[1]) == 3 and by_user[1] <= {make(i) for i in range(6)}
    assert by_user[2] == {make(0), make(7)} and by_user[3] == {make(0)}
    # User 1's keys do not depend on the other users (the hash reads its own pairs only).
    alone = bounded_keys(records.where("user_id = 1"), 3, seed=11).toPandas()
    assert set(alone["item_id"]) == by_user[1]
    keys, users = users_per_key(bounded_keys(records, 3, seed=11))
    assert keys.tolist() == sorted(set(kept["item_id"]))
    assert dict(zip(keys.tolist(), users.tolist()))[make(0)] == 2 + (make(0) in by_user[1])
    assert keys.dtype == (object if key_type == "string" else np.int64)
    assert all(isinstance(k, str) for k in keys) if key_type == "string" else True


@pytest.mark.parametrize("key_type, make", [("string", lambda i: f"venue:{i}"), ("long", lambda i: i * 7)])
def test_private_keys_releases_popular_keys_and_never_absent_ones(spark, key_type, make):
    from dp_spark.release.private_keys import private_keys

    # ε = 40, δ = 0.5, l0 = 2: keys with 3 or more users always go out; a key with 1 user with
    # probability 0.25; a key nobody has, never.
    p = ps.SelectionParams(40, 0.5, 2)
    assert ps.threshold(p) == 3
    pairs = [(u, make(0), 1) for u in range(5)] + [(u, make(1), 1) for u in range(3)] + [(9, make(2), 1)]
    budget = Budget(40, 0.5)
    result = private_keys(records_of(spark, pairs, key_type), 2, 40, 0.5, budget, RandomSource(5), seed=3)
    assert {make(0), make(1)} <= set(result.keys.tolist()) <= {make(0), make(1), make(2)}
    assert list(result.keys) == sorted(result.keys)
    assert result.diagnostics == {"keys_seen": 3, "keys_selected": len(result.keys)}
    assert budget.delta_spent == 0.5 and budget.spent == 40
    with pytest.raises(ConfigError, match="l0"):
        private_keys(records_of(spark, pairs, key_type), 0, 1, 1e-6, Budget(1, 1e-6), RandomSource(5), seed=3)
