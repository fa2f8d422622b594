"""Spark's own channels lie outside the release (docs/privacy.md, "What readers can see"): the
event log holds exact figures of the data, which differ between D and D′ (one user added), while
everything the release shows (exit, files, privacy.json, the default log, Spark's lines in it
included) does not. A job's session starts with the UI off; a session with the UI or the event log
on says so in one line (the job's log) or one warning (the API)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from dp_spark.io import session, spark_channels
from dp_spark.io.spark_channels import EVENT_LOG, UI, SparkChannelsNotice, channels_on, notice
from dp_spark.lab import report_audit
from tests.test_observables_audit import log_lines, release_files, spark_lines
from tests.test_report_audit import HEAVY, ratings_config, write_ratings

# ---------------------------------------------------------------------------
# Which channels are on, and the notice (pure).


@pytest.mark.parametrize(("settings", "on"), [
    ({}, (UI,)),                                              # Spark's defaults: the UI on, no event log
    ({UI: "false"}, ()),
    ({UI: "False", EVENT_LOG: "true"}, (EVENT_LOG,)),
    ({UI: "true", EVENT_LOG: "TRUE"}, (UI, EVENT_LOG)),
    ({EVENT_LOG: "false"}, (UI,)),
])
def test_channels_on_follow_the_settings_and_sparks_defaults(settings, on):
    assert channels_on(settings.get) == on


def test_the_notice_names_each_channel_on_and_how_to_turn_it_off_in_one_line():
    assert notice(()) is None
    both = notice((UI, EVENT_LOG))
    assert "\n" not in both and both.startswith("NOTE: the Spark UI and the event log are on")
    assert "spark.ui.enabled = false and spark.eventLog.enabled = false turn them off" in both
    assert 'docs/privacy.md, "What readers can see"' in both
    assert notice((EVENT_LOG,)).endswith("spark.eventLog.enabled = false turns it off")


def test_a_job_session_starts_with_the_ui_off_unless_the_config_or_spark_defaults_turn_it_on():
    defaults = session.DEFAULT_SPARK_CONF
    assert session.session_settings(defaults, lambda key: False, {})[UI] == "false"
    # spark-defaults.conf (or spark-submit --conf) sets it: theirs holds, ours is not applied.
    assert UI not in session.session_settings(defaults, lambda key: key == UI, {})
    assert session.session_settings(defaults, lambda key: False, {UI: "true"})[UI] == "true"


class _Conf:
    def __init__(self, settings):
        self.settings = settings

    def get(self, key, default=None):
        return self.settings.get(key, default)


class _Session:
    """What warn_once reads of a session: its settings, the application id among them."""

    def __init__(self, app_id: str, **settings):
        self.conf = _Conf({"spark.app.id": app_id, **settings})


def test_the_api_warns_once_per_session_and_can_be_silenced_by_name(monkeypatch):
    monkeypatch.setattr(spark_channels, "_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spark_channels.warn_once(_Session("app-1", **{EVENT_LOG: "true"}))
        spark_channels.warn_once(_Session("app-1", **{EVENT_LOG: "true"}))
        spark_channels.warn_once(_Session("app-2", **{UI: "false"}))  # nothing on: nothing said
        spark_channels.warn_once(_Session("app-3"))                    # another session, UI on by default
    assert [(w.category, str(w.message)) for w in caught] == [
        (SparkChannelsNotice, notice((UI, EVENT_LOG))), (SparkChannelsNotice, notice((UI,)))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=SparkChannelsNotice)
        spark_channels.warn_once(_Session("app-4"))
    assert caught == []


def test_a_release_from_the_api_gives_the_notice_through_warn_once(spark, monkeypatch):
    """The wiring: the suite's session has the UI and event log off (no warning); a session that
    had them on gets exactly one warning for two releases."""
    import dp_spark

    ratings = spark.createDataFrame(pd.DataFrame({"user": [1, 1, 2], "movie": [1, 2, 2]}))

    def release():
        dp_spark.sra(ratings, privacy_unit="user", item="movie", items=range(1, 4), l=1, epsilon=1.0, seed=1)

    monkeypatch.setattr(spark_channels, "_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        release()
    assert not [w for w in caught if w.category is SparkChannelsNotice]
    monkeypatch.setattr(spark_channels, "session_channels", lambda spark: (EVENT_LOG,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        release()
        release()
    assert [str(w.message) for w in caught if w.category is SparkChannelsNotice] == [notice((EVENT_LOG,))]


# ---------------------------------------------------------------------------
# D and D′ in new processes, with the event log on.


def event_log(folder: Path) -> list[dict]:
    """Every event of the one application whose (uncompressed) event log is in ``folder``."""
    files = [p for p in folder.rglob("*") if p.is_file() and not p.name.startswith((".", "appstatus"))]
    assert files, f"no event log in {folder}"
    return [json.loads(line) for path in sorted(files) for line in path.read_text().splitlines() if line]


def records_read(events: list[dict]) -> list[int]:
    """Each task's input records read: Spark's exact count of the rows it scanned."""
    return [e.get("Task Metrics", {}).get("Input Metrics", {}).get("Records Read", 0)
            for e in events if e["Event"] == "SparkListenerTaskEnd"]


def sql_metrics(events: list[dict]) -> Counter:
    """The SQL tab's figures: each task's update of every named SQL metric (rows out, shuffle records)."""
    return Counter((a["Name"], a["Update"]) for e in events if e["Event"] == "SparkListenerTaskEnd"
                   for a in e["Task Info"].get("Accumulables", []) if not a["Name"].startswith("internal."))


def ui_setting(events: list[dict]) -> str | None:
    env = next(e for e in events if e["Event"] == "SparkListenerEnvironmentUpdate")
    return env["Spark Properties"].get(UI)


# The job default taken away, as a job that kept Spark's UI on would run.
UI_ON_BY_DEFAULT = ("import sys\nfrom dp_spark.io import session\ndel session.DEFAULT_SPARK_CONF['spark.ui.enabled']\n"
                    "from dp_spark.cli import main\nsys.exit(main(sys.argv[1:]))\n")


def run_job(folder: Path, data: str, log_format: str = "text", script: str | None = None) -> dict:
    """``dp-spark run`` of a seeded SRA job in a new process, with the event log on in ``folder``."""
    folder.mkdir(parents=True)
    (folder / "events").mkdir()
    config = folder / "job.toml"
    config.write_text(f'output = "{folder / "out"}"\nseed = 5\n' + ratings_config(data, "sra", "l = 5") +
                      f'\n[spark]\n"spark.eventLog.enabled" = "true"\n"spark.eventLog.dir" = "{folder / "events"}"\n'
                      '"spark.eventLog.compress" = "false"\n"spark.eventLog.rolling.enabled" = "false"\n')
    command = [sys.executable, "-c", script] if script else [sys.executable, "-m", "dp_spark.cli"]
    done = subprocess.run([*command, "run", str(config), "--log-format", log_format, "--master", "local[2]"],
                          capture_output=True, text=True, timeout=600)
    err = done.stderr.replace(str(folder), "<side>").replace(data, "<input>")
    return {"exit": done.returncode, "stderr": done.stderr, "files": release_files(folder / "out"),
            "report": json.loads((folder / "out" / "privacy.json").read_text()) if done.returncode == 0 else None,
            "log": log_lines(err, log_format), "spark": spark_lines(err, log_format),
            "events": event_log(folder / "events")}


@pytest.fixture(scope="module")
def neighbours(tmp_path_factory):
    root = tmp_path_factory.mktemp("channels")
    d = write_ratings(root / "ratings.csv")
    frame = pd.read_csv(d)
    d_prime = root / "ratings_prime.csv"
    frame[frame["user_id"] != HEAVY].to_csv(d_prime, index=False)
    return {"D": run_job(root / "D", d), "D_prime": run_job(root / "D_prime", str(d_prime)),
            "rows": (len(frame), int((frame["user_id"] != HEAVY).sum())), "root": root, "data": d}


@pytest.mark.system
def test_the_event_log_holds_exact_figures_that_the_release_does_not(neighbours):
    d, d_prime = neighbours["D"], neighbours["D_prime"]
    assert d["exit"] == 0, d["stderr"]
    # The event log: Spark's exact count of the rows read, and SQL metrics that differ.
    rows_d, rows_d_prime = neighbours["rows"]
    assert rows_d in records_read(d["events"]) and rows_d_prime in records_read(d_prime["events"])
    assert rows_d not in records_read(d_prime["events"])
    assert sql_metrics(d["events"]) != sql_metrics(d_prime["events"])
    # The release: the same on both sides.
    for what in ("exit", "files", "log", "spark"):
        assert d[what] == d_prime[what], what
    # The two sources are two files: the config's path (source.location) is all that may differ.
    d_prime["report"]["source"]["location"] = d["report"]["source"]["location"]
    assert report_audit.differences(d["report"], d_prime["report"]) == []
    # A job's session had the UI off, and its log said that the event log is on.
    assert ui_setting(d["events"]) == "false"
    assert notice((EVENT_LOG,)) in d["log"]


@pytest.mark.system
def test_negative_control_a_job_that_keeps_the_ui_on_by_default_is_seen(neighbours):
    """The same job with the UI left at Spark's default: the event log shows the UI on, so the
    check above would fail, and the JSON log's one line names both channels."""
    run = run_job(neighbours["root"] / "ui_on", neighbours["data"], "json", script=UI_ON_BY_DEFAULT)
    assert run["exit"] == 0, run["stderr"]
    assert ui_setting(run["events"]) != "false"
    messages = [json.loads(line).get("message") for line in run["log"]]
    assert messages.count(notice((UI, EVENT_LOG))) == 1
