"""The budget store: cumulative charges per dataset, the cap, atomic and locked updates (no Spark)."""

import json
import multiprocessing
from fractions import Fraction

import pytest

from dp_spark import budget_store
from dp_spark.budget_store import BudgetRefused, StoreSpec
from dp_spark.errors import ConfigError


def spec(tmp_path, cap="1", delta_cap=0.0, dataset="ratings") -> StoreSpec:
    return StoreSpec(str(tmp_path / "state" / "budget.json"), dataset, Fraction(cap), delta_cap)


def charged_runs(store: StoreSpec) -> list[dict]:
    return json.loads(open(store.path).read())["runs"]


def test_charges_add_up_exactly_to_the_cap_and_no_further(tmp_path):
    store = spec(tmp_path, cap="1")
    for _ in range(10):  # 10 x 0.1 is exactly 1 in fractions, not 0.9999999999999999 or 1.0000000000000002
        budget_store.charge(store, Fraction("0.1"), 0.0, {"run_date": None})
    with pytest.raises(BudgetRefused, match=r"spent epsilon 1 of its cap 1 \(10 runs"):
        budget_store.charge(store, Fraction("0.001"), 0.0, {})
    assert len(charged_runs(store)) == 10  # the refused run left no trace


def test_a_charge_reports_the_totals_including_itself(tmp_path):
    store = spec(tmp_path, cap="3")
    budget_store.charge(store, Fraction(1), 0.0, {})
    charged = budget_store.charge(store, Fraction("0.5"), 0.0, {"run_date": "2026-11-22"})
    assert charged["epsilon_charged_total"] == 1.5 and charged["runs"] == 2 and charged["epsilon_cap"] == 3


def test_failed_and_unfinished_runs_stay_charged(tmp_path):
    store = spec(tmp_path, cap="2")
    first = budget_store.charge(store, Fraction(1), 0.0, {})["run_id"]
    budget_store.charge(store, Fraction(1), 0.0, {})  # never finished: as if killed
    budget_store.finish(store, first, "failed", error="boom")
    runs = charged_runs(store)
    assert [r["status"] for r in runs] == ["failed", "charged"]
    with pytest.raises(BudgetRefused):
        budget_store.charge(store, Fraction("0.01"), 0.0, {})


def test_delta_has_its_own_cap(tmp_path):
    with pytest.raises(BudgetRefused, match="delta"):
        budget_store.charge(spec(tmp_path, cap="10"), Fraction(1), 1e-6, {})
    store = spec(tmp_path, cap="10", delta_cap=2e-6)
    budget_store.charge(store, Fraction(1), 1e-6, {})
    budget_store.charge(store, Fraction(1), 1e-6, {})
    with pytest.raises(BudgetRefused, match="delta"):
        budget_store.charge(store, Fraction(1), 1e-6, {})


def test_a_store_of_another_dataset_or_a_foreign_file_is_refused(tmp_path):
    budget_store.charge(spec(tmp_path, dataset="ratings"), Fraction(1), 0.0, {})
    with pytest.raises(ConfigError, match="belongs to dataset 'ratings'"):
        budget_store.charge(spec(tmp_path, dataset="checkins"), Fraction(1), 0.0, {})
    open(spec(tmp_path).path, "w").write("{not json")
    with pytest.raises(ConfigError, match="cannot be read"):
        budget_store.read(spec(tmp_path))
    open(spec(tmp_path).path, "w").write('{"runs": []}')
    with pytest.raises(ConfigError, match="not a dp-spark budget store"):
        budget_store.read(spec(tmp_path))


def test_no_temporary_file_is_left_behind(tmp_path):
    store = spec(tmp_path)
    budget_store.charge(store, Fraction("0.5"), 0.0, {})
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["budget.json", "budget.json.lock"]


def _charge_one(path: str) -> bool:
    try:
        budget_store.charge(StoreSpec(path, "ratings", Fraction(5)), Fraction(1), 0.0, {})
        return True
    except BudgetRefused:
        return False


def test_concurrent_runs_cannot_overspend(tmp_path):
    """16 processes race to charge 1 each against a cap of 5: exactly 5 win, and the file holds 5."""
    path = str(tmp_path / "budget.json")
    with multiprocessing.get_context("fork").Pool(8) as pool:
        won = pool.map(_charge_one, [path] * 16)
    assert sum(won) == 5
    assert len(json.loads(open(path).read())["runs"]) == 5
