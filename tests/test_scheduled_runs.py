"""Scheduled runs: run-date partitions, the budget store, re-runs, JSON-line logs and exit codes.

Jobs run in-process through ``cli.main`` with the suite's SparkSession.
"""

import json
from pathlib import Path

import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.io import release_store
from dp_spark.jobs import runner

RECORDS = pd.DataFrame({"user_id": [1, 1, 2, 3, 3, 3, 4], "item_id": [1, 2, 2, 3, 4, 5, 5],
                        "attr": ["a", "b", "a", "b", "a", "a", "b"]})


def job(tmp_path: Path, cap=2.5, source=None, store=True) -> Path:
    if source is None:
        source = tmp_path / "records.parquet"
        RECORDS.to_parquet(source)
    lines = [f'output = "{tmp_path / "out"}"', "[source]", 'format = "parquet"', f'path = "{source}"',
             "[domain]", "items = { range = [1, 10] }", 'attributes = ["a", "b"]',
             "[privacy]", "epsilon = 1", "[algorithm]", 'name = "sra"', "l = 2",
             # A handful of records: too few for the default noise-only refusal (docs/privacy.md).
             "[guards]", "refuse_noise_only = false"]
    if store:
        lines += ["[budget_store]", f'path = "{tmp_path / "budget.json"}"', 'dataset = "toy"']
        lines += [f"epsilon_cap = {cap}"] if cap is not None else []
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def store_runs(tmp_path: Path) -> list[dict]:
    return json.loads((tmp_path / "budget.json").read_text())["runs"]


def report(tmp_path: Path, date: str) -> dict:
    return json.loads((tmp_path / "out" / f"run_date={date}" / "privacy.json").read_text())


def test_each_run_date_is_its_own_partition_and_charged(spark, tmp_path, capsys):
    config = job(tmp_path)
    assert main(["run", str(config), "--run-date", "2026-11-20"]) == 0
    assert main(["run", str(config), "--set", "run_date=2026-11-21"]) == 0  # the config key, TOML date
    runs = store_runs(tmp_path)
    assert [(r["run_date"], r["status"], r["epsilon"]) for r in runs] == [("2026-11-20", "released", 1.0),
                                                                         ("2026-11-21", "released", 1.0)]
    assert runs[1]["release"].endswith("out/run_date=2026-11-21")
    assert sum(e["epsilon"] for e in runs[0]["ledger"]) == 1.0  # the run's own ledger is kept
    second = report(tmp_path, "2026-11-21")["run"]
    assert second["run_date"] == "2026-11-21" and not second["forced"]
    assert second["budget_store"]["epsilon_charged_total"] == 2.0 and second["budget_store"]["runs"] == 2
    # A partitioned Parquet path: one table across dates, with the date as a column.
    out = str(tmp_path / "out")
    counts = spark.read.option("basePath", out).parquet(f"{out}/run_date=*/item_counts")
    assert sorted(str(r.run_date) for r in counts.select("run_date").distinct().collect()) == ["2026-11-20",
                                                                                                "2026-11-21"]
    assert counts.count() == 20


def test_rerunning_a_date_is_a_no_op_unless_forced(spark, tmp_path, capsys):
    config = job(tmp_path)
    assert main(["run", str(config), "--run-date", "2026-11-20"]) == 0
    before = (tmp_path / "out" / "run_date=2026-11-20" / "privacy.json").read_text()
    capsys.readouterr()
    assert main(["run", str(config), "--run-date", "2026-11-20"]) == 0
    assert "already exists" in capsys.readouterr().out
    assert (tmp_path / "out" / "run_date=2026-11-20" / "privacy.json").read_text() == before  # not redrawn
    assert len(store_runs(tmp_path)) == 1  # and not charged

    assert main(["run", str(config), "--run-date", "2026-11-20", "--force"]) == 0
    assert "spends epsilon 1 again" in capsys.readouterr().err
    runs = store_runs(tmp_path)
    assert len(runs) == 2 and runs[1]["forced"] and report(tmp_path, "2026-11-20")["run"]["forced"]
    assert (tmp_path / "out" / "run_date=2026-11-20" / "privacy.json").read_text() != before


def refuse_reading(monkeypatch) -> None:
    """Make reading the records fail (exit 1): a run that ends in status 3 was refused before."""
    def read(*args, **kwargs):
        raise RuntimeError("the records were read")
    monkeypatch.setattr(runner, "compute_release", read)


def test_a_run_over_the_cap_is_refused_before_reading_data(spark, tmp_path, capsys, monkeypatch):
    config = job(tmp_path, cap=1.5)
    assert main(["run", str(config), "--run-date", "2026-11-20"]) == 0
    capsys.readouterr()
    refuse_reading(monkeypatch)
    assert main(["run", str(config), "--run-date", "2026-11-21"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dp-spark: budget refused: dataset 'toy' has spent epsilon 1 of its cap 1.5")
    assert not (tmp_path / "out" / "run_date=2026-11-21").exists()
    assert len(store_runs(tmp_path)) == 1


def test_a_config_cannot_raise_the_stores_cap(spark, tmp_path, capsys, monkeypatch):
    """The first run creates the store with cap 1; a later config (or --set) saying 100 is refused."""
    assert main(["run", str(job(tmp_path, cap=1)), "--run-date", "2026-11-20"]) == 0
    source = tmp_path / "records.parquet"
    refuse_reading(monkeypatch)  # status 3 below means: refused before reading
    capsys.readouterr()
    assert main(["run", str(job(tmp_path, cap=100, source=source)), "--run-date", "2026-11-21"]) == 3
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("dp-spark: budget refused: the config's budget_store.epsilon_cap 100 is above the cap "
                          f"stored in {tmp_path / 'budget.json'} for dataset 'toy' (epsilon 1)")
    assert f"dp-spark budget set-cap --path {tmp_path / 'budget.json'} --dataset toy --epsilon-cap 100" in err
    config = job(tmp_path, cap=1, source=source)
    assert main(["run", str(config), "--run-date", "2026-11-21", "--set", "budget_store.epsilon_cap=100"]) == 3
    assert "epsilon_cap 100 is above the cap stored" in capsys.readouterr().err
    assert len(store_runs(tmp_path)) == 1 and not (tmp_path / "out" / "run_date=2026-11-21").exists()
    assert json.loads((tmp_path / "budget.json").read_text())["epsilon_cap"] == "1"


def test_set_cap_is_logged_then_runs_may_use_it_and_show_prints_the_numbers(spark, tmp_path, capsys,
                                                                               monkeypatch):
    store = str(tmp_path / "budget.json")
    assert main(["budget", "create", "--path", store, "--dataset", "toy", "--epsilon-cap", "1"]) == 0
    assert main(["run", str(job(tmp_path, cap=None)), "--run-date", "2026-11-20"]) == 0  # the stored cap applies
    capsys.readouterr()
    assert main(["run", str(job(tmp_path, cap=2.5)), "--run-date", "2026-11-21"]) == 3
    monkeypatch.setenv("LOGNAME", "operator-ann")
    assert main(["budget", "set-cap", "--path", store, "--dataset", "toy", "--epsilon-cap", "2.5",
                 "--reason", "two more weeks approved"]) == 0
    assert main(["run", str(job(tmp_path, cap=2.5)), "--run-date", "2026-11-21"]) == 0
    capsys.readouterr()
    assert main(["budget", "set-cap", "--path", store, "--dataset", "toy", "--epsilon-cap", "1.5",
                 "--reason", "tighten"]) == 2  # below the 2 already spent
    assert "already spent epsilon 2 and delta 0; a cap of epsilon 1.5" in capsys.readouterr().err

    assert main(["budget", "show", "--path", store]) == 0
    shown = capsys.readouterr().out
    assert "epsilon: cap 2.5, spent 2, remaining 0.5" in shown and "runs (2;" in shown
    assert "set-cap: epsilon 1, delta 0 -> epsilon 2.5, delta 0 by operator-ann: two more weeks approved" in shown
    assert main(["budget", "show", "--path", store, "--dataset", "toy", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["epsilon"]["cap"], info["epsilon"]["spent"], info["epsilon"]["remaining"]) == ("5/2", "2", "1/2")
    assert [r["run_date"] for r in info["runs"]] == ["2026-11-20", "2026-11-21"]
    assert [c["action"] for c in info["cap_log"]] == ["create", "set-cap"]


def test_a_split_over_the_job_epsilon_exits_3(spark, tmp_path, capsys):
    config = job(tmp_path, store=False)
    assert main(["run", str(config), "--set", "privacy.epsilon_items=0.8", "--set", "privacy.epsilon_edges=0.8"]) == 3
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("dp-spark: budget refused: budget split")


def test_bad_input_after_the_charge_exits_2_and_stays_charged(spark, tmp_path, capsys):
    source = tmp_path / "bad.parquet"
    RECORDS.assign(user_id=[1, None, 2, 3, 3, 3, 4]).to_parquet(source)
    strict = ["--set", "guards.strict=true"]  # by default the bad row is dropped and the run releases
    assert main(["run", str(job(tmp_path, source=source)), "--run-date", "2026-11-20", *strict]) == 2
    assert "column user_id has null values; guards.strict refuses" in capsys.readouterr().err
    [run] = store_runs(tmp_path)
    assert run["status"] == "failed" and run["charged_utc"]  # conservative: the charge stays
    # The store keeps the kind of error, not its message.
    assert run["error"].startswith("DataError") and "null" not in run["error"]
    assert not (tmp_path / "out").exists()


def test_a_runtime_failure_exits_1_and_keeps_the_previous_release(spark, tmp_path, capsys, monkeypatch):
    config = job(tmp_path)
    assert main(["run", str(config), "--run-date", "2026-11-20"]) == 0
    before = (tmp_path / "out" / "run_date=2026-11-20" / "privacy.json").read_text()

    def broken_disk(*_args, **_kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(release_store, "write_release", broken_disk)
    capsys.readouterr()
    assert main(["run", str(config), "--run-date", "2026-11-20", "--force"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)  # behind --debug (tests/test_preflight_runs.py)
    assert err[-1] == "dp-spark: runtime error: OSError: No space left on device (--debug prints the traceback)"
    assert (tmp_path / "out" / "run_date=2026-11-20" / "privacy.json").read_text() == before
    assert [r["status"] for r in store_runs(tmp_path)] == ["released", "failed"]


def test_json_logs_give_one_object_per_line_with_stage_timings(spark, tmp_path, capsys):
    assert main(["run", str(job(tmp_path)), "--run-date", "2026-11-20", "--log-format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().err.strip().splitlines()]
    ended = [(e["stage"], e["seconds"]) for e in lines if e["event"] == "stage" and e["status"] == "ok"]
    assert [stage for stage, _ in ended] == ["config", "spark", "plan", "charge", "read", "release", "write", "record"]
    assert all(seconds >= 0 for _, seconds in ended)
    assert lines[-1]["event"] == "end" and lines[-1]["status"] == "released" and lines[-1]["exit_code"] == 0
    assert all(e["job"] == "sra" and e["run_date"] == "2026-11-20" for e in lines[2:])
    assert any(e["event"] == "message" and "charged epsilon 1" in e["message"] for e in lines)


def test_json_logs_end_with_the_refusal(spark, tmp_path, capsys):
    config = job(tmp_path, cap=0.5)
    assert main(["run", str(config), "--run-date", "2026-11-20", "--log-format", "json"]) == 3
    events = [json.loads(line) for line in capsys.readouterr().err.strip().splitlines()]  # JSON only
    end = events[-1]  # the error is in the end event: no text line follows it
    assert end["event"] == "end" and end["status"] == "refused" and end["exit_code"] == 3
    assert "cap" in end["error"]
    failed = [e for e in events if e.get("status") == "failed"]
    assert [e["stage"] for e in failed] == ["charge"]


@pytest.mark.parametrize("args, message", [
    (["--run-date", "2026-02-30"], "run_date must be a date such as 2026-11-22, got '2026-02-30'"),
    (["--force"], "--force only applies to a run with a run date (--run-date or run_date)"),
])
def test_bad_run_options_are_input_errors(spark, tmp_path, capsys, args, message):
    assert main(["run", str(job(tmp_path)), *args]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"dp-spark: error: {message}"
    assert not (tmp_path / "budget.json").exists()


def test_run_dates_are_not_mixed_with_other_files(spark, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    assert main(["run", str(job(tmp_path)), "--run-date", "2026-11-20"]) == 2
    assert "holds 'notes.txt', which is not a run_date=... partition" in capsys.readouterr().err
    assert not (tmp_path / "budget.json").exists()  # refused before the charge


def test_a_write_killed_between_its_renames_is_recovered(spark, tmp_path):
    """The state a SIGKILL between moving the old release aside and moving the new one in leaves."""
    target = tmp_path / "out" / "run_date=2026-11-20"
    release_store.write_release(spark, str(target), {"t": RECORDS}, {"release": "old"})
    aside = tmp_path / "out" / ".run_date=2026-11-20.previous-0123"
    target.rename(aside)
    staging = tmp_path / "out" / ".run_date=2026-11-20.tmp-4567"
    staging.mkdir()
    release_store.check_output_location(spark, str(target))
    assert json.loads((target / "privacy.json").read_text()) == {"release": "old"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["run_date=2026-11-20"]
