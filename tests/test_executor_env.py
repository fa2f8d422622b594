"""The executors' pre-flight (dp_spark/io/executor_env.py): what counts as a difference,
that the probe runs where the executors do, and that a difference stops a job and an API call
before anything is charged. The cluster with a bare Python is tests/test_package.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pandas as pd
import pytest

import dp_spark
from dp_spark.errors import PreflightError
from dp_spark.io import executor_env
from tests.conftest import ROOT
from tests.test_preflight_runs import job, refused_before_the_charge

DRIVER = {"python": "3.11.7", "executable": "/venv/bin/python", "host": "driver",
          "packages": {"numpy": "2.4.6", "pandas": "2.3.3", "pyarrow": "26.0.1", "dp-spark": "0.1.0 (code abc)"}}


def seen(host="node1", python="3.11.7", **packages) -> dict:
    return {"python": python, "executable": "/usr/bin/python3", "host": host,
            "packages": {**DRIVER["packages"], **packages}}


# --- What counts as a difference (pure) --------------------------------------------------------

def test_executors_like_the_driver_show_no_difference():
    assert executor_env.differences(DRIVER, [seen("node1"), seen("node2", python="3.11.2")]) == []


def test_a_bare_python_is_reported_once_with_every_missing_package():
    bare = seen(numpy="missing (ModuleNotFoundError: No module named 'numpy')",
                pandas="missing (ModuleNotFoundError: No module named 'pandas')", pyarrow="26.0.1")
    assert executor_env.differences(DRIVER, [bare]) == ["no numpy, pandas in /usr/bin/python3 (host node1)"]


@pytest.mark.parametrize("package, version", [("numpy", "1.26.4"), ("pandas", "2.2.0"), ("pyarrow", "14.0.0"),
                                              ("dp-spark", "0.1.0 (code def)")])
def test_another_version_of_any_package_or_of_the_code_is_a_difference(package, version):
    lines = executor_env.differences(DRIVER, [seen("node1"), seen("node2", **{package: version})])
    assert lines == [f"{package} {version} in /usr/bin/python3 (host node2), the driver's is "
                     f"{DRIVER['packages'][package]}"]


def test_another_python_minor_version_is_a_difference():
    assert executor_env.differences(DRIVER, [seen(python="3.10.12")]) == [
        "Python 3.10.12 (/usr/bin/python3 (host node1)), the driver's is 3.11.7"]


def test_a_failed_probe_is_told_in_one_line_naming_the_cause():
    java = ("An error occurred while calling o52.collectToPython.\n: org.apache.spark.SparkException: Job aborted\n"
            "Caused by: java.io.IOException: Cannot run program \"/opt/env/bin/python\": error=2, No such file or "
            "directory\n\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)")
    assert executor_env.failure_reason(RuntimeError(java)) == (
        'Caused by: java.io.IOException: Cannot run program "/opt/env/bin/python": error=2, No such file or directory')
    assert executor_env.failure_reason(RuntimeError("first line\nsecond")) == "first line"


def test_the_code_fingerprint_is_the_same_from_a_zip_and_changes_with_one_byte(tmp_path):
    archive = shutil.make_archive(str(tmp_path / "shipped"), "zip", ROOT, "dp_spark")  # as submit.sh ships it
    assert executor_env.code_fingerprint(zipfile.Path(archive, "dp_spark/")) == executor_env.code_fingerprint()
    copy = tmp_path / "copy" / "dp_spark"
    shutil.copytree(ROOT / "dp_spark", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert executor_env.code_fingerprint(copy) == executor_env.code_fingerprint()
    version = copy / "version.py"
    version.write_text(version.read_text() + "\n")  # one byte more
    assert executor_env.code_fingerprint(copy) != executor_env.code_fingerprint()


def test_describe_and_import_dp_spark_need_no_numpy_pandas_or_pyspark():
    # The probe runs in a Python that may lack all three: its module and dp_spark's import must not pull them.
    code = ("import sys, json, dp_spark, dp_spark.io.executor_env as e; json.loads(e.describe()); "
            "print(sorted(m for m in ('numpy', 'pandas', 'pyarrow', 'pyspark') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['numpy', 'pandas', 'pyarrow']"  # describe imports them to name their versions
    code = ("import sys, dp_spark, dp_spark.io.executor_env; "
            "print([m for m in ('numpy', 'pandas', 'pyspark') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


# --- On the suite's session --------------------------------------------------------------------

def test_the_probe_runs_in_the_executors_and_finds_the_driver_s_python(spark):
    found = executor_env.probe(spark, tasks=4)
    assert len(found) == 1  # four tasks, one interpreter
    assert executor_env.differences(json.loads(executor_env.describe()), found) == []
    assert found[0]["packages"]["numpy"] == __import__("numpy").__version__


def test_local_mode_with_the_driver_s_interpreter_is_not_probed(spark):
    assert os.environ["PYSPARK_PYTHON"] == sys.executable  # what the suite's session started its workers with
    assert executor_env.needs_check(spark) is False


@pytest.fixture
def executors_with_another_numpy(monkeypatch):
    """The suite's local executors, checked as a cluster's would be, against a driver that says it
    has another numpy (the executors' description is the real one, from their own Python)."""
    driver = executor_env.this_python()
    driver["packages"]["numpy"] = "0.0.1"
    monkeypatch.setattr(executor_env, "needs_check", lambda spark: True)
    monkeypatch.setattr(executor_env, "_CHECKED", set())
    monkeypatch.setattr(executor_env, "this_python", lambda: driver)
    monkeypatch.setattr(executor_env, "_local_classic", lambda spark: False)


def test_a_local_session_gets_the_local_fix_in_one_line(spark, executors_with_another_numpy, monkeypatch):
    """In local mode the cluster's advice (package, submit) does not apply: the message says how
    the workers' Python is chosen there."""
    monkeypatch.setattr(executor_env, "_local_classic", lambda spark: True)
    with pytest.raises(PreflightError, match=r"^in local mode Spark's Python workers run .*numpy \S+ in .*"
                                             r"os\.environ\['PYSPARK_PYTHON'\] = sys\.executable") as refused:
        executor_env.check(spark)
    assert "make package" not in str(refused.value)


def test_an_api_call_is_refused_before_its_budget_is_charged(spark, executors_with_another_numpy):
    df = spark.createDataFrame(pd.DataFrame({"user_id": [1, 2, 2], "item_id": [1, 1, 2]}))
    budget = dp_spark.DatasetBudget(epsilon=2)
    with pytest.raises(PreflightError, match=r"numpy \S+ in .*, the driver's is 0\.0\.1.*make package"):
        dp_spark.sra(df, items=range(1, 3), l=1, epsilon=1, budget=budget)
    assert budget.spent == 0 and budget.charges == []


def test_a_job_is_refused_before_the_store_is_charged(spark, tmp_path, capsys, executors_with_another_numpy):
    refused_before_the_charge(tmp_path, capsys, [str(job(tmp_path))], "the executors' Python does not match the "
                                                                      "driver's: numpy")


def test_the_check_passes_once_per_application_when_the_executors_match(spark, monkeypatch):
    # The control of the two above: the same forced check, with the driver's true description.
    monkeypatch.setattr(executor_env, "needs_check", lambda spark: True)
    monkeypatch.setattr(executor_env, "_CHECKED", set())
    calls = []
    monkeypatch.setattr(executor_env, "probe", lambda spark: calls.append(1) or [executor_env.this_python()])
    executor_env.check(spark)
    executor_env.check(spark)
    assert calls == [1]
