"""Spark's own channels lie outside the release (docs/privacy.md, "What readers can see"): the
event log holds exact figures of the data, which differ between D and D′ (D without its heaviest
user), while everything the release shows (exit, files, privacy.json, the default log, Spark's
lines in it included) does not. A job's session starts with the UI off; a session with the UI or
the event log on says so in one line (the job's log) or one warning (the API)."""

from __future__ import annotations

import json
import re
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
from tests.test_observables_audit import log_lines, other_lines, release_files
from tests.test_preflight import _Session as FakeSession
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


class _Context:
    """What session_channels reads of a classic context: whether its UI runs, and its settings."""

    def __init__(self, ui_url: str | None, **settings):
        self.uiWebUrl = ui_url  # noqa: N815 - SparkContext's name
        self.settings = settings

    def getConf(self):  # noqa: N802 - SparkContext's name
        return _Settings(self.settings)


class _Settings(dict):
    def get(self, key, default=None):  # SparkConf.get's signature
        return super().get(key, default)


def test_a_classic_session_is_read_from_its_context_not_from_settings_copied_in_later():
    """A builder's .config("spark.ui.enabled", "false") on a session already running lands in the
    session's settings while the UI runs on: the context decides."""
    copied_in = FakeSession({UI: "false", EVENT_LOG: "false"})
    assert spark_channels.session_channels(copied_in, _Context("http://driver:4040")) == (UI,)
    assert spark_channels.session_channels(copied_in, _Context(None, **{EVENT_LOG: "true"})) == (EVENT_LOG,)
    assert spark_channels.session_channels(FakeSession({UI: "true"}), _Context(None)) == ()


class _HiddenConf:
    def get(self, key, default=None):
        raise RuntimeError("not allowed")


def test_a_connect_setting_that_cannot_be_read_counts_as_on():
    connect = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    connect.conf = _HiddenConf()
    assert spark_channels.session_channels(connect) == (UI, EVENT_LOG)
    connect.conf = FakeSession({UI: "false", EVENT_LOG: "true"}).conf
    assert spark_channels.session_channels(connect) == (EVENT_LOG,)


def test_the_suites_session_has_neither_channel_on(spark):
    assert spark_channels.session_channels(spark) == ()


def _session(app_id: str, **settings) -> FakeSession:
    """A session for warn_once: its settings, the application id among them."""
    return FakeSession({"spark.app.id": app_id, **settings})


def _read_settings(spark, context=None):
    return channels_on(lambda key: spark.conf.get(key, None))


def test_the_api_warns_once_per_session_at_the_callers_line_and_can_be_silenced_by_name(monkeypatch):
    monkeypatch.setattr(spark_channels, "_WARNED", set())
    monkeypatch.setattr(spark_channels, "session_channels", _read_settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spark_channels.warn_once(_session("app-1", **{EVENT_LOG: "true"}))
        spark_channels.warn_once(_session("app-1", **{EVENT_LOG: "true"}))
        spark_channels.warn_once(_session("app-2", **{UI: "false"}))  # nothing on: nothing said
        spark_channels.warn_once(_session("app-3"))                    # another session, UI on by default
    assert [(w.category, str(w.message)) for w in caught] == [
        (SparkChannelsNotice, notice((UI, EVENT_LOG))), (SparkChannelsNotice, notice((UI,)))]
    assert {w.filename for w in caught} == {__file__}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=SparkChannelsNotice)
        spark_channels.warn_once(_session("app-4"))
    assert caught == []


def test_a_release_from_the_api_gives_the_notice_through_warn_once(spark, monkeypatch):
    """The wiring: the suite's session has the UI and event log off (no warning); a session that
    had them on gets exactly one warning for two releases, shown at the line that asked."""
    import dp_spark

    ratings = spark.createDataFrame(pd.DataFrame({"user": [1, 1, 2], "movie": [1, 2, 2]}))

    def release():
        dp_spark.sra(ratings, privacy_unit="user", item="movie", items=range(1, 4), l=1, epsilon=1.0, seed=1,
                     guards={"refuse_noise_only": False})  # three records: released anyway

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
    notices = [w for w in caught if w.category is SparkChannelsNotice]
    assert [(str(w.message), w.filename) for w in notices] == [(notice((EVENT_LOG,)), __file__)]


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


# Spark's lines that a slow machine alone brings (a late heartbeat between driver and executor):
# timing, which the release does not cover (docs/privacy.md), not compared.
TIMING_ONLY = r"[Hh]eartbeat"

# The job default taken away, as a job that kept Spark's UI on would run.
UI_ON_BY_DEFAULT = ("import sys\nfrom dp_spark.io import session\ndel session.DEFAULT_SPARK_CONF['spark.ui.enabled']\n"
                    "from dp_spark.cli import main\nsys.exit(main(sys.argv[1:]))\n")


def run_job(folder: Path, data: str, log_format: str = "text", script: str | None = None) -> dict:
    """``dp-spark run`` of a seeded SRA job in a new process, with the event log on in ``folder``."""
    folder.mkdir(parents=True)
    (folder / "events").mkdir()
    config = folder / "job.toml"
    # The inputs' 41 users are too few for the default noise-only refusal: released anyway, to be compared.
    config.write_text(f'output = "{folder / "out"}"\nseed = 5\n' + ratings_config(data, "sra", "l = 5") +
                      '\n[guards]\nrefuse_noise_only = false\n' +
                      f'\n[spark]\n"spark.eventLog.enabled" = "true"\n"spark.eventLog.dir" = "{folder / "events"}"\n'
                      '"spark.eventLog.compress" = "false"\n"spark.eventLog.rolling.enabled" = "false"\n')
    command = [sys.executable, "-c", script] if script else [sys.executable, "-m", "dp_spark.cli"]
    done = subprocess.run([*command, "run", str(config), "--log-format", log_format, "--master", "local[2]"],
                          capture_output=True, text=True, timeout=600)
    err = done.stderr.replace(str(folder), "<side>").replace(data, "<input>")
    return {"exit": done.returncode, "stderr": done.stderr, "files": release_files(folder / "out"),
            "report": json.loads((folder / "out" / "privacy.json").read_text()) if done.returncode == 0 else None,
            "log": log_lines(err, log_format), "spark": [line for line in other_lines(err, log_format)
                                                          if not re.search(TIMING_ONLY, line)],
            "events": event_log(folder / "events")}


@pytest.fixture(scope="module")
def neighbours(tmp_path_factory):
    """D and D′ (D without its heaviest user), each run with the text log. The JSON log carries the
    same JVM lines, each wrapped in an event (tests/test_scheduler_logs.py), and the same progress
    events as the text log (compared on D and D′ in tests/test_observables_audit.py)."""
    root = tmp_path_factory.mktemp("channels")
    d = write_ratings(root / "ratings.csv")
    frame = pd.read_csv(d, dtype=str, keep_default_na=False)  # every other row as it was, to the byte
    d_prime = root / "ratings_prime.csv"
    frame[frame["user_id"] != HEAVY].to_csv(d_prime, index=False)
    runs = {(side, "text"): run_job(root / side / "text", data, "text")
            for side, data in (("D", d), ("D_prime", str(d_prime)))}
    return {"runs": runs, "rows": (len(frame), int((frame["user_id"] != HEAVY).sum())), "root": root, "data": d}


@pytest.mark.system
def test_the_event_log_holds_exact_figures_that_the_release_does_not(neighbours):
    d, d_prime = (neighbours["runs"][side, "text"] for side in ("D", "D_prime"))
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
    assert d["log"].count(notice((EVENT_LOG,))) == 1


@pytest.mark.system
def test_negative_control_a_job_that_keeps_the_ui_on_by_default_is_seen(neighbours):
    """The same job with the UI left at Spark's default: the event log shows the UI on, so the
    check above would fail, and the JSON log's one line names both channels."""
    run = run_job(neighbours["root"] / "ui_on", neighbours["data"], "json", script=UI_ON_BY_DEFAULT)
    assert run["exit"] == 0, run["stderr"]
    assert ui_setting(run["events"]) != "false"
    messages = [json.loads(line).get("message") for line in run["log"]]
    assert messages.count(notice((UI, EVENT_LOG))) == 1
