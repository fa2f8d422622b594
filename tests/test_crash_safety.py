"""SIGKILL a job at each stage: no partial output is visible, the previous release is intact, the
budget store stays consistent (and still counts the killed run), and the next run recovers.

The killed job is a separate process group (the Python driver and its JVM), killed the moment its
JSON log says a stage started: what a scheduler or a lost node does to it.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dp_spark.cli import main
from tests.test_scheduled_runs import job, store_runs

DATE = "2026-11-20"


# The files of a first release that write its folder's path: the config (output, source, store),
# the store's runs (output, release) and the release's report (source, store).
FILES_NAMING_THEIR_FOLDER = ("job.toml", "budget.json", f"out/run_date={DATE}/privacy.json")


def first_release(folder: Path) -> Path:
    """The job of tests.test_scheduled_runs released once in ``folder`` for DATE; its config."""
    config = job(folder, cap=10)
    config.write_text(config.read_text().replace("[source]", "[spark]\n\"spark.ui.enabled\" = false\n[source]"))
    assert main(["run", str(config), "--run-date", DATE]) == 0
    return config


@pytest.fixture(scope="module")
def template(spark, tmp_path_factory) -> Path:
    """One first release per test file, which each test copies instead of releasing again."""
    return first_release(tmp_path_factory.mktemp("first_release")).parent


def copy_of_release(template: Path, folder: Path) -> Path:
    """``template``'s first release copied into ``folder`` as if released there; its config.

    A finished run holds no lock (the output's lock file is gone; the budget store's is empty and
    locked only while open), so the copy is what a first release in ``folder`` leaves, but for its
    timestamps, run id and noise, once its folder's path is rewritten wherever a file writes it."""
    shutil.copytree(template, folder, dirs_exist_ok=True)
    for name in FILES_NAMING_THEIR_FOLDER:
        path = folder / name
        assert str(template) in path.read_text(), name
        path.write_text(path.read_text().replace(str(template), str(folder)))
    assert sorted(p.name for p in (folder / "out").iterdir()) == [f"run_date={DATE}"]  # no lock, no staging
    return folder / "job.toml"


def run_and_kill_at(config: Path, stage: str) -> list[dict]:
    """Start ``dp-spark run --force`` and SIGKILL it when ``stage`` starts; returns the log lines seen."""
    command = [sys.executable, "-m", "dp_spark.cli", "run", str(config), "--run-date", DATE, "--force",
               "--log-format", "json", "--master", "local[1]", "--set", "spark.ui.enabled=false"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                               start_new_session=True, cwd=Path(__file__).resolve().parents[1])
    seen = []
    try:
        for line in process.stderr:
            if not line.startswith("{"):
                continue  # Spark's own log lines
            event = json.loads(line)
            seen.append(event)
            if event["event"] == "stage" and event["stage"] == stage and event["status"] == "started":
                os.killpg(process.pid, signal.SIGKILL)
                break
            if event["event"] == "end":
                break
    finally:
        with_timeout_kill(process)
    return seen


def with_timeout_kill(process: subprocess.Popen) -> None:
    try:
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def visible(directory: Path) -> list[str]:
    """What a reader of the output sees: Spark and Hadoop skip names starting with '.' or '_'."""
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith((".", "_")))


@pytest.mark.parametrize("stage", ["charge", "read", "release", "write", "record"])
def test_sigkill_at_each_stage(spark, template, tmp_path, capsys, stage):
    config = copy_of_release(template, tmp_path)
    release = tmp_path / "out" / f"run_date={DATE}"
    previous = (release / "privacy.json").read_text()

    seen = run_and_kill_at(config, stage)
    assert any(e.get("stage") == stage and e["status"] == "started" for e in seen), seen
    assert not any(e["event"] == "end" for e in seen)  # it was killed, it did not finish

    # No partial output: the release directory is the old one or (killed after its rename) a whole new one.
    assert visible(tmp_path / "out") == [f"run_date={DATE}"]
    assert visible(release) == ["edge_counts", "item_counts", "privacy.json"]
    report = json.loads((release / "privacy.json").read_text())
    if stage != "record":  # a kill at "record" comes after the new release was moved into place
        assert (release / "privacy.json").read_text() == previous
    assert spark.read.parquet(str(release / "item_counts")).count() == 10
    assert report["epsilon_spent"] == 1.0

    # The store parses and counts the killed run from its charge on, finished or not.
    runs = store_runs(tmp_path)
    assert runs[0]["status"] == "released"
    if stage == "charge":
        assert len(runs) in (1, 2)  # the kill may land before or after the charge is written
    elif stage == "record":  # the kill may land before or after the store records the release
        assert len(runs) == 2 and runs[1]["status"] in ("charged", "released") and runs[1]["forced"]
    else:
        assert len(runs) == 2 and runs[1]["status"] == "charged" and runs[1]["forced"]

    # The next run on this output cleans up what the killed one left and works as usual.
    assert main(["run", str(config), "--run-date", DATE]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"run_date={DATE}"]
    assert main(["run", str(config), "--run-date", "2026-11-21"]) == 0
    assert len(store_runs(tmp_path)) == len(runs) + 1
