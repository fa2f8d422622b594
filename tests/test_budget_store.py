"""The budget store: cumulative charges per dataset, the cap, atomic and locked updates (no Spark)."""

import json
import multiprocessing
from fractions import Fraction

import pytest

from dp_spark.errors import ConfigError
from dp_spark.jobs import budget_store
from dp_spark.jobs.budget_store import BudgetRefused, StoreSpec


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
    state = json.loads(open(path).read())
    assert len(state["runs"]) == 5
    assert [c["action"] for c in state["cap_log"]] == ["create"]  # one racer created the store, once


# The cap lives in the store: a run's config cannot raise it.

def test_a_config_cannot_raise_the_stored_cap(tmp_path):
    budget_store.charge(spec(tmp_path, cap="1"), Fraction(1), 0.0, {})  # the first run creates the store, cap 1
    with pytest.raises(BudgetRefused, match=r"epsilon_cap 100 is above the cap stored in .* \(epsilon 1\).*"
                                            r"dp-spark budget set-cap"):
        budget_store.charge(spec(tmp_path, cap="100"), Fraction(1), 0.0, {})
    state = json.loads(open(spec(tmp_path).path).read())
    assert state["epsilon_cap"] == "1" and len(state["runs"]) == 1  # refused: nothing written, cap unchanged


def test_a_config_cannot_raise_the_stored_delta_cap(tmp_path):
    budget_store.create(spec(tmp_path).path, "ratings", Fraction(10), 1e-6)
    with pytest.raises(BudgetRefused, match=r"delta_cap 1e-05 is above the cap stored .* --delta-cap 1e-05"):
        budget_store.charge(spec(tmp_path, cap="10", delta_cap=1e-5), Fraction(1), 1e-6, {})


def test_a_lower_config_cap_is_a_stricter_limit_for_that_run_only(tmp_path):
    budget_store.create(spec(tmp_path).path, "ratings", Fraction(5))
    budget_store.charge(spec(tmp_path, cap="2"), Fraction(2), 0.0, {})
    with pytest.raises(BudgetRefused, match="spent epsilon 2 of its cap 2 .this run's config sets a lower limit"):
        budget_store.charge(spec(tmp_path, cap="2"), Fraction(1), 0.0, {})
    charged = budget_store.charge(spec(tmp_path, cap="5"), Fraction(1), 0.0, {})
    assert charged["epsilon_charged_total"] == 3 and charged["epsilon_cap_stored"] == 5
    assert json.loads(open(spec(tmp_path).path).read())["epsilon_cap"] == "5"


def test_a_config_without_a_cap_uses_the_stored_one_but_cannot_create_a_store(tmp_path):
    capless = StoreSpec(spec(tmp_path).path, "ratings")
    with pytest.raises(ConfigError, match="no budget store at .*dp-spark budget create"):
        budget_store.charge(capless, Fraction(1), 0.0, {})
    assert not (tmp_path / "state" / "budget.json").exists()
    budget_store.create(capless.path, "ratings", Fraction(3, 2))
    budget_store.charge(capless, Fraction(1), 0.0, {})
    with pytest.raises(BudgetRefused, match="spent epsilon 1 of its cap 1.5"):
        budget_store.charge(capless, Fraction(1), 0.0, {})


def test_create_refuses_an_existing_store(tmp_path):
    budget_store.create(spec(tmp_path).path, "ratings", Fraction(1))
    with pytest.raises(ConfigError, match="already exists.*dp-spark budget set-cap"):
        budget_store.create(spec(tmp_path).path, "ratings", Fraction(100))
    assert json.loads(open(spec(tmp_path).path).read())["epsilon_cap"] == "1"


def test_set_cap_is_logged_and_then_allows_the_run(tmp_path, monkeypatch):
    store = spec(tmp_path, cap="1")
    budget_store.charge(store, Fraction(1), 0.0, {})
    monkeypatch.setenv("LOGNAME", "alice")
    budget_store.set_cap(store.path, "ratings", Fraction(5, 2), None, "quarterly review")
    budget_store.charge(spec(tmp_path, cap="5/2"), Fraction("1.5"), 0.0, {})
    state = json.loads(open(store.path).read())
    assert state["epsilon_cap"] == "5/2"
    created, changed = state["cap_log"]
    assert created["action"] == "create" and created["epsilon_cap"] == "1"
    assert (changed["action"], changed["epsilon_cap_before"], changed["epsilon_cap"], changed["reason"],
            changed["user"]) == ("set-cap", "1", "5/2", "quarterly review", "alice")
    assert changed["delta_cap_before"] == changed["delta_cap"] == 0.0 and changed["utc"]


def test_set_cap_below_what_is_spent_is_refused(tmp_path):
    store = spec(tmp_path, cap="3")
    budget_store.charge(store, Fraction(2), 0.0, {})
    before = open(store.path).read()
    with pytest.raises(ConfigError, match="already spent epsilon 2 .*below it"):
        budget_store.set_cap(store.path, "ratings", Fraction("1.9"), None, "tighten")
    budget_store.set_cap(store.path, "ratings", Fraction(2), None, "no more runs")  # exactly the spend is allowed
    assert json.loads(open(store.path).read())["epsilon_cap"] == "2" != json.loads(before)["epsilon_cap"]
    with pytest.raises(ConfigError, match="needs a reason"):
        budget_store.set_cap(store.path, "ratings", Fraction(3), None, "  ")


def test_a_store_without_a_stored_cap_is_refused_until_one_is_adopted(tmp_path):
    """A store written before caps were stored: never trust the next config's cap."""
    store = spec(tmp_path, cap="100")
    (tmp_path / "state").mkdir()
    legacy = {"format": "dp-spark budget store 1", "dataset": "ratings",
              "runs": [{"run_id": "a" * 32, "epsilon": 1.0, "epsilon_exact": "1", "delta": 0.0, "epsilon_cap": 1.0,
                        "status": "released"}]}
    open(store.path, "w").write(json.dumps(legacy))
    with pytest.raises(ConfigError, match=r"stores no cap \(.*caps: 1\).*dp-spark budget set-cap"):
        budget_store.charge(store, Fraction(1), 0.0, {})
    with pytest.raises(ConfigError, match="below it"):
        budget_store.set_cap(store.path, "ratings", Fraction("0.5"), None, "adopt")
    budget_store.set_cap(store.path, "ratings", Fraction(2), None, "adopt the cap we meant")
    state = json.loads(open(store.path).read())
    assert state["format"] == budget_store.FORMAT and state["epsilon_cap"] == "2" and len(state["runs"]) == 1
    assert state["cap_log"][0]["action"].startswith("adopt") and state["cap_log"][0]["epsilon_cap_before"] is None
    with pytest.raises(BudgetRefused, match="epsilon_cap 100 is above"):
        budget_store.charge(store, Fraction(1), 0.0, {})
    budget_store.charge(spec(tmp_path, cap="2"), Fraction(1), 0.0, {})


def test_summary_gives_exact_caps_spent_and_remaining(tmp_path):
    store = spec(tmp_path, cap="1", delta_cap=1e-6)
    budget_store.charge(store, Fraction(1, 3), 1e-7, {"algorithm": "sra"})
    info = budget_store.summary(store.path, "ratings")
    assert info["epsilon"]["cap"] == "1" and info["epsilon"]["spent"] == "1/3"
    assert info["epsilon"]["remaining"] == "2/3" and info["epsilon"]["remaining_float"] == pytest.approx(2 / 3)
    assert info["delta"] == {"cap": 1e-6, "spent": 1e-7, "remaining": pytest.approx(9e-7)}
    assert len(info["runs"]) == 1 and [c["action"] for c in info["cap_log"]] == ["create"]
    with pytest.raises(ConfigError, match="belongs to dataset 'ratings'"):
        budget_store.summary(store.path, "checkins")
