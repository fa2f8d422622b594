"""What a scheduler sees on stderr: JSON lines only in JSON mode (ending with ``end``, also on
errors), no Spark start-up noise or progress bar in text mode, and a re-run of a released date
that answers without starting Spark. docs/scheduled_runs.md, "Logs for schedulers".

The unit tests run the CLI in this process with Spark replaced; the system tests run real jobs
in new processes, as a scheduler does.
"""

import json
import os
import re
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.core.progress import Progress
from dp_spark.io import session
from tests.conftest import SUITE_JVM_FLAGS
from tests.test_scheduled_runs import job

ROOT = Path(__file__).resolve().parents[1]
DATE = "2026-11-20"


class Stream:
    def __init__(self, tty: bool):
        self.tty = tty
        self.lines: list[str] = []

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        pass


class SparkStarted(RuntimeError):
    pass


def json_lines(text: str) -> list[dict]:
    """Every line of ``text`` as a JSON object (fails on any line that is not one)."""
    return [json.loads(line) for line in text.splitlines()]


# --- Spark's progress bar --------------------------------------------------------------------


@pytest.fixture
def session_settings(monkeypatch):
    """What get_session would give the builder, with no JVM started: getOrCreate returns the
    builder's options, and the log settings are not installed in this process's environment."""
    import pyspark
    from pyspark.sql import SparkSession

    # With the suite's session running, SparkConf() would read that JVM's settings as if a site
    # had set them (spark.ui.showConsoleProgress among them): start from none.
    real_conf = pyspark.SparkConf
    monkeypatch.setattr(pyspark, "SparkConf", lambda: real_conf(loadDefaults=False))
    monkeypatch.setattr(session, "install_log4j2", lambda settings: False)
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", lambda builder: dict(builder._options))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    return lambda **kwargs: session.get_session("local[1]", **kwargs)


@pytest.mark.parametrize("tty", [True, False])
def test_the_progress_bar_follows_whether_stderr_is_a_terminal(session_settings, monkeypatch, tty):
    monkeypatch.setattr(sys, "stderr", Stream(tty))
    assert session.console_progress() is tty
    assert session_settings()["spark.ui.showConsoleProgress"] == ("true" if tty else "false")
    assert session_settings(progress_bar=False)["spark.ui.showConsoleProgress"] == "false"  # JSON mode


@pytest.mark.parametrize("log_format, bar", [("text", None), ("json", False)])
def test_the_run_turns_the_bar_off_in_json_mode(tmp_path, monkeypatch, capsys, log_format, bar):
    asked = {}

    def get_session(master, conf, **kwargs):
        asked.update(kwargs)
        raise SparkStarted("stop here")

    monkeypatch.setattr(session, "get_session", get_session)
    assert main(["run", str(job(tmp_path, store=False)), "--log-format", log_format]) == 1
    assert asked["progress_bar"] is bar
    assert callable(asked["jvm_stderr"]) if log_format == "json" else asked["jvm_stderr"] is None


# --- Spark's log settings -------------------------------------------------------------------


def test_the_log4j2_file_ships_with_the_package():
    assert session.LOG4J2_FILE.is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert session.LOG4J2_FILE.name in package_data["dp_spark.io"]
    text = session.LOG4J2_FILE.read_text()
    assert re.search(r"^rootLogger.level = warn$", text, re.M)
    assert "org.apache.hadoop.util.NativeCodeLoader" in text
    # MovieLens 1M's release printed "Stage 19 contains a task of very large size (1549 KiB)".
    assert "contains a task of very large size" in text


def test_the_log_file_is_installed_unless_the_site_has_its_own(tmp_path):
    environ = {"SPARK_SUBMIT_OPTS": "-Xss4m"}
    assert session.install_log4j2({}, environ)
    assert environ["SPARK_SUBMIT_OPTS"] == f"-Xss4m -Dlog4j2.configurationFile={session.LOG4J2_FILE.as_uri()}"

    site_option = {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=/etc/spark/log4j2.xml"}
    environ = {}
    assert not session.install_log4j2(site_option, environ) and environ == {}
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    environ = {"SPARK_CONF_DIR": str(tmp_path)}
    assert not session.install_log4j2({}, environ) and "SPARK_SUBMIT_OPTS" not in environ


# --- JSON lines --------------------------------------------------------------------------------


def test_json_mode_writes_jvm_lines_and_python_warnings_as_events_and_nothing_after_end():
    stream = Stream(False)
    progress = Progress(stream, "json")
    progress.spark_log("26/11/24 21:24:58 WARN Something: happened")
    with progress.python_logs():
        warnings.warn("pandas said something", UserWarning, stacklevel=1)
    progress.end("released", 0)
    progress("too late")
    progress.spark_log("a JVM line after the end")
    progress.end("error", 1)
    events = json_lines("".join(stream.lines))
    assert [e["event"] for e in events] == ["spark_log", "python_log", "end"]
    assert events[0]["line"].endswith("WARN Something: happened")
    assert events[1]["logger"] == "py.warnings" and "pandas said something" in events[1]["message"]
    assert events[2]["exit_code"] == 0


def test_text_mode_passes_jvm_lines_through():
    stream = Stream(False)
    Progress(stream, "text").spark_log("a JVM line")
    assert "".join(stream.lines) == "a JVM line\n"


@pytest.mark.parametrize("arguments", [["run", "--log-format", "json"],  # no config
                                       ["run", "job.toml", "--log-format=json", "--no-such-option"]])
def test_a_usage_error_in_json_mode_is_one_end_event(capsys, arguments):
    with pytest.raises(SystemExit) as exit_:
        main(arguments)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    [event] = json_lines(captured.err)
    assert (event["event"], event["status"], event["exit_code"]) == ("end", "bad_input", 2)
    assert "error:" in event["error"]


def test_a_usage_error_in_text_mode_stays_text(capsys):
    with pytest.raises(SystemExit):
        main(["run"])
    assert capsys.readouterr().err.startswith("usage: dp-spark run")


def test_a_config_error_in_json_mode_ends_with_end_and_prints_no_text(tmp_path, capsys):
    config = job(tmp_path, store=False)
    assert main(["run", str(config), "--log-format", "json", "--set", "algorithm.no_such_key=1"]) == 2
    events = json_lines(capsys.readouterr().err)
    assert events[-1]["event"] == "end" and events[-1]["exit_code"] == 2 and "no_such_key" in events[-1]["error"]


def test_a_runtime_error_in_json_mode_carries_its_traceback_in_the_end_event(tmp_path, monkeypatch, capsys):
    def get_session(*args, **kwargs):
        raise SparkStarted("the JVM would not start")

    monkeypatch.setattr(session, "get_session", get_session)
    assert main(["run", str(job(tmp_path, store=False)), "--log-format", "json"]) == 1
    end = json_lines(capsys.readouterr().err)[-1]
    assert (end["event"], end["status"], end["error"]) == ("end", "error", "SparkStarted: the JVM would not start")
    assert "Traceback" in end["traceback"] and "SparkStarted" in end["traceback"]


def test_a_python_warning_during_a_json_run_is_an_event(tmp_path, monkeypatch, capsys):
    def get_session(*args, **kwargs):
        warnings.warn("pyarrow said something", UserWarning, stacklevel=1)
        raise SparkStarted("stop here")

    monkeypatch.setattr(session, "get_session", get_session)
    assert main(["run", str(job(tmp_path, store=False)), "--log-format", "json"]) == 1
    events = json_lines(capsys.readouterr().err)
    [warning] = [e for e in events if e["event"] == "python_log"]
    assert warning["level"] == "WARNING" and "pyarrow said something" in warning["message"]
    assert events[-1]["event"] == "end"


# --- A no-op re-run -------------------------------------------------------------------------


def released(tmp_path: Path) -> Path:
    """A job whose run date already has a release (its privacy.json), made by hand."""
    config = job(tmp_path)
    release = tmp_path / "out" / f"run_date={DATE}"
    release.mkdir(parents=True)
    (release / "privacy.json").write_text(json.dumps({"run": {"run_date": DATE}, "epsilon_spent": 1.0}))
    return config


@pytest.fixture
def session_refused(monkeypatch):
    def get_session(*args, **kwargs):
        raise SparkStarted("get_session was called")

    monkeypatch.setattr(session, "get_session", get_session)


def test_a_rerun_of_a_released_date_does_not_start_spark(tmp_path, session_refused, capsys):
    config = released(tmp_path)
    assert main(["run", str(config), "--run-date", DATE]) == 0
    assert "already exists" in capsys.readouterr().out
    assert not (tmp_path / "budget.json").exists()  # nothing charged

    assert main(["run", str(config), "--run-date", DATE, "--log-format", "json"]) == 0
    events = json_lines(capsys.readouterr().err)
    assert "spark" not in [e.get("stage") for e in events]
    assert (events[-1]["event"], events[-1]["status"], events[-1]["epsilon_spent"]) == ("end", "unchanged", 0)


def test_a_forced_rerun_and_a_new_date_do_start_spark(tmp_path, session_refused, capsys):
    config = released(tmp_path)
    assert main(["run", str(config), "--run-date", DATE, "--force"]) == 1
    assert main(["run", str(config), "--run-date", "2026-11-21"]) == 1
    (tmp_path / "out" / f"run_date={DATE}" / "privacy.json").unlink()  # a release without its report is not one
    assert main(["run", str(config), "--run-date", DATE]) == 1
    assert capsys.readouterr().err.count("dp-spark: runtime error: SparkStarted: get_session was called") == 3


# --- Real jobs in new processes ---------------------------------------------------------------

# What Spark and the JVM used to print on every start, and the progress bar.
NOISE = [r"\bWARN\b", r"Using Spark's default log4j profile", r"Setting default log level",
         r"To adjust logging level", r"NativeCodeLoader", r"Setting Spark log level", r"SparkStringUtils",
         r"resolves to a loopback address", r"SPARK_LOCAL_IP", r"could not bind on port", r"\[Stage \d+"]
# The JVM prints this itself when Spark's launcher adds the Vector API module; no log setting
# reaches it (docs/scheduled_runs.md).
JVM_INCUBATOR_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"


def user_shell() -> dict[str, str]:
    """This process's environment as a user's shell has it: without the log settings the suite's
    session added to SPARK_SUBMIT_OPTS, with only the suite's JVM flags there (speed, not output)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS", "PYSPARK_GATEWAY_PORT")}
    return {**environ, "SPARK_SUBMIT_OPTS": SUITE_JVM_FLAGS}


def run_cli(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    environ = user_shell()
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "dp_spark.cli", "run", *arguments, "--master", "local[1]"],
                          capture_output=True, text=True, cwd=cwd, env=environ, timeout=600)


@pytest.mark.system
def test_json_mode_stderr_is_json_lines_ending_with_end(tmp_path):
    done = run_cli(str(job(tmp_path)), "--run-date", DATE, "--log-format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    events = json_lines(done.stderr)  # every line, none skipped
    assert [e["event"] for e in events].count("end") == 1
    assert (events[-1]["event"], events[-1]["status"], events[-1]["exit_code"]) == ("end", "released", 0)
    stages = [e["stage"] for e in events if e["event"] == "stage" and e["status"] == "ok"]
    assert stages == ["config", "spark", "plan", "charge", "read", "release", "write", "record"]


@pytest.mark.system
def test_json_mode_a_job_failing_on_its_data_ends_with_end(tmp_path):
    source = tmp_path / "no-items.parquet"
    pd.DataFrame({"user_id": [1, 2], "movie": [3, 4]}).to_parquet(source)  # no item_id column
    done = run_cli(str(job(tmp_path, source=source, store=False)), "--log-format", "json", cwd=tmp_path)
    events = json_lines(done.stderr)
    assert done.returncode == 2
    assert (events[-1]["event"], events[-1]["status"], events[-1]["exit_code"]) == ("end", "bad_input", 2)
    assert "item_id" in events[-1]["error"]
    # Found from the schema with Spark running, before any charge.
    assert ("plan", "failed") in [(e.get("stage"), e.get("status")) for e in events]


@pytest.mark.system
def test_text_mode_stderr_has_no_spark_noise(tmp_path):
    """A run that writes its release and registers it in a Hive catalog: what a plain run to files
    logs, and the Hive metastore's start-up notes too."""
    catalog = ["--set", "output_table=default.noise", "--set", "spark.sql.catalogImplementation=\"hive\""]
    done = run_cli(str(job(tmp_path)), "--run-date", DATE, *catalog, "--set",
                   f"spark.sql.warehouse.dir=\"{tmp_path / 'warehouse'}\"", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    noise = [line for line in lines if any(re.search(pattern, line) for pattern in NOISE)]
    assert noise == []
    assert [line for line in lines if not line.startswith("[dp-spark")] in ([], [JVM_INCUBATOR_WARNING])


FAILING_TASK = """
from pyspark.sql import functions as F
from dp_spark.io.session import get_session
spark = get_session("local[2]", {})
@F.udf("long")
def full(x):
    raise OSError(28, "No space left on device")
try:
    spark.range(4).select(full("id")).collect()
except Exception as exc:
    print("failed:", type(exc).__name__)
"""


@pytest.mark.system
@pytest.mark.parametrize("debug", [False, True])
def test_a_failed_task_logs_its_java_stack_in_full_only_with_debug(tmp_path, debug):
    """A full disk printed ~310 lines of Java stacks before dp-spark's one line; now each
    trace is cut to its first frame unless --debug asked for them whole."""
    environ = user_shell()
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), environ.get("PYTHONPATH", "")])
    if debug:  # what --debug adds (cli.main.full_java_stacks)
        environ["SPARK_SUBMIT_OPTS"] += " -Ddpspark.stack=full"
    done = subprocess.run([sys.executable, "-c", FAILING_TASK], capture_output=True, text=True, cwd=tmp_path,
                          env=environ, timeout=300)
    assert "failed: PythonException" in done.stdout, done.stderr[-2000:]
    frames = [line for line in done.stderr.splitlines() if line.startswith("\tat ")]
    if debug:
        # Whole traces: how many the JVM logs depends on when the job is cancelled (one task's
        # trace, or both tasks'), but even one is far past the cut version's 4 frames (CI saw 26).
        assert len(frames) > 20
    else:
        assert len(frames) <= 4 and "(stack trace: --debug)" in done.stderr
