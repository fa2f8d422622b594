"""Small things the command line says: its version, and numbers in error messages."""

from fractions import Fraction

import pyspark
import pytest

from dp_spark.cli import main
from dp_spark.core.accounting import as_epsilon
from dp_spark.errors import ConfigError
from dp_spark.version import __version__
from tests.conftest import ROOT

pytestmark = pytest.mark.unit


def test_version_names_dp_spark_and_pyspark(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"dp-spark {__version__} (PySpark {pyspark.__version__})"


@pytest.mark.parametrize("value, shown", [(Fraction(0), "got 0$"), (Fraction(-1, 3), "got -1/3$"), (0, "got 0$"),
                                          (-0.5, "got -0.5$")])
def test_a_non_positive_epsilon_is_shown_as_a_plain_number(value, shown):
    with pytest.raises(ConfigError, match=f"privacy.epsilon must be > 0, {shown}") as refused:
        as_epsilon(value, "privacy.epsilon")
    assert "Fraction" not in str(refused.value)


def test_an_epsilon_too_small_to_keep_is_refused_by_name_not_as_zero(capsys):
    """1e-12 used to become Fraction(0, 1) and fail later as 'epsilon must be > 0, got Fraction(0, 1)'."""
    assert main(["run", str(ROOT / "conf/demo.toml"), "--set", "privacy.epsilon=1e-12"]) == 2
    message = capsys.readouterr().err.strip()
    assert message == ("dp-spark: error: privacy.epsilon = 1e-12 is too small: epsilons are kept as fractions "
                       "with denominators up to 10^9")
    with pytest.raises(ConfigError, match="privacy.epsilon_items = 1e-12 is too small"):
        as_epsilon(1e-12, "privacy.epsilon_items")


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    """``dp-spark budget show | head``: 128 + SIGPIPE, no BrokenPipeError traceback."""
    import json
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from dp_spark.jobs.budget_store import StoreSpec, charge, finish

    store = StoreSpec(str(tmp_path / "budget.json"), "toy", Fraction(10**6), None)
    run = charge(store, Fraction(1), 0.0, {"algorithm": "sra", "output": "out", "run_date": None, "forced": False})
    finish(store, run["run_id"], "released", release="out", epsilon_spent=1.0, ledger=[])
    state = json.loads(Path(store.path).read_text())
    state["runs"] = [{**state["runs"][0], "run_id": f"{state['runs'][0]['run_id']}-{n}"} for n in range(1500)]
    Path(store.path).write_text(json.dumps(state))  # a listing longer than a pipe's buffer (64 KiB)
    shown = subprocess.Popen([sys.executable, "-m", "dp_spark.cli", "budget", "show", "--path", store.path],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert shown.stdout.readline()
    shown.stdout.close()  # what head does after its lines
    assert shown.wait(timeout=120) == 128 + signal.SIGPIPE
    err = shown.stderr.read().decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_debug_asks_the_jvm_for_whole_java_stacks(tmp_path, monkeypatch):
    """--debug reaches the log4j layout (dp_spark/io/log4j2.properties) as -Ddpspark.stack=full."""
    import os

    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Dother=1")
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-Dother=1"
    assert main(["run", str(tmp_path / "missing.toml"), "--debug"]) == 2
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-Dother=1 -Ddpspark.stack=full"
