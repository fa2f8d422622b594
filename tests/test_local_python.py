"""The README's first example as a new user runs it: with the venv's interpreter named
directly (``.venv/bin/python script.py``, a notebook kernel), not first on the PATH, where the
``python3`` Spark's local workers would start is a bare one without numpy, pandas or pyarrow.

Each case is a new Python process with a bare venv's ``python3`` first on the PATH (the same
interpreter version, no packages), so the test does not depend on what the machine's own
``python3`` holds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv

import pytest

from tests.conftest import ROOT, SUITE_JVM_FLAGS

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def bare_path(tmp_path_factory) -> str:
    """A PATH whose first ``python3`` has no packages."""
    bare = tmp_path_factory.mktemp("bare")
    venv.create(bare, with_pip=False)
    return os.pathsep.join([str(bare / "bin"), "/usr/bin", "/bin"])


def run_script(tmp_path, code: str, path: str) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(code)
    env = {"PATH": path, "HOME": os.environ.get("HOME", str(tmp_path)), "SPARK_SUBMIT_OPTS": SUITE_JVM_FLAGS,
           **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "TMPDIR")}}
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_readme_example_runs_with_the_venv_python_off_the_path(tmp_path, bare_path):
    first = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)[0]
    done = run_script(tmp_path, first, bare_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "noisy_count" in done.stdout and "pure epsilon-differential privacy" in done.stdout


def test_a_session_started_before_the_import_is_told_in_one_line(tmp_path, bare_path):
    code = """
import pandas as pd
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[2]").getOrCreate()
import dp_spark
ratings = spark.createDataFrame(pd.DataFrame({"person": [1, 1, 2], "movie": [1, 2, 2]}))
try:
    dp_spark.sra(ratings, privacy_unit="person", item="movie", items=range(1, 5), l=2, epsilon=1.0)
except dp_spark.ConfigError as error:
    print("REFUSED:", error)
"""
    done = run_script(tmp_path, code, bare_path)
    assert done.returncode == 0, done.stderr[-2000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("REFUSED:")]
    assert "in local mode Spark's Python workers run 'python3'" in line
    assert "os.environ['PYSPARK_PYTHON'] = sys.executable" in line and "make package" not in line
