"""Long stages say which stage they are in and, when the budget store knows how long the last
release of the same output took, about how much is left."""

from __future__ import annotations

import io
import json
import time
from fractions import Fraction

import pytest

from dp_spark.core.progress import Progress
from dp_spark.jobs import budget_store

pytestmark = pytest.mark.unit


def test_a_long_stage_says_where_it_is_and_what_is_left():
    out = io.StringIO()
    progress = Progress(stream=out, heartbeat_seconds=0.2)
    progress.expect(60.0)
    with progress.stage("read"):
        time.sleep(0.5)
    lines = [line for line in out.getvalue().splitlines() if "still in stage" in line]
    assert lines and "still in stage read (5 of 8) after 0s; about 1m00s left (the last release of this output " \
        "took 1m00s)" in lines[0]
    count = len(lines)
    time.sleep(0.5)
    assert len([line for line in out.getvalue().splitlines() if "still in stage" in line]) == count  # stopped


def test_json_heartbeats_carry_the_estimate_and_none_without_one():
    out = io.StringIO()
    progress = Progress(stream=out, log_format="json", heartbeat_seconds=0.2)
    with progress.stage("release"):
        time.sleep(0.35)
    beats = [e for e in map(json.loads, out.getvalue().splitlines()) if e["event"] == "heartbeat"]
    assert beats and beats[0]["stage"] == "release" and "estimate_left_s" not in beats[0]
    progress.expect(0.1)
    with progress.stage("write"):
        time.sleep(0.35)
    beats = [e for e in map(json.loads, out.getvalue().splitlines()) if e["event"] == "heartbeat"]
    assert beats[-1]["stage"] == "write" and beats[-1]["estimate_left_s"] == 0.0


def test_the_estimate_is_the_last_released_run_of_the_same_output(tmp_path):
    store = budget_store.StoreSpec(str(tmp_path / "budget.json"), "toy", Fraction(10))
    assert budget_store.last_release_seconds(store, "sra", "out") is None
    for output, status in (("out/run_date=2026-11-01", "released"), ("other", "released"),
                           ("out/run_date=2026-11-02", "failed")):
        run = budget_store.charge(store, Fraction(1), 0.0, {"algorithm": "sra", "output": output, "run_date": None,
                                                            "forced": False})
        budget_store.finish(store, run["run_id"], status)
    state = json.loads((tmp_path / "budget.json").read_text())
    state["runs"][0].update(charged_utc="2026-11-01T02:00:00+00:00", finished_utc="2026-11-01T02:04:10+00:00")
    (tmp_path / "budget.json").write_text(json.dumps(state))
    assert budget_store.last_release_seconds(store, "sra", "out") == 250.0
    assert budget_store.last_release_seconds(store, "hpa", "out") is None
