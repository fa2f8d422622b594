"""Without ../shared/data the tests that read it skip rather than fail: a clone without the
shared datasets still runs the rest. Checked in a new pytest process whose data folder is absent."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# Unit-tier files that read the shared datasets.
READERS = ["tests/test_clip_choice.py"]


@pytest.mark.system  # a new pytest process
def test_the_data_readers_skip_without_the_data(tmp_path):
    """Negative control, by hand: with test_clip_choice.py reading SHARED_DATA directly, as it
    did, this fails (the module fixture errors on the missing file)."""
    env = {**os.environ, "DP_SPARK_SHARED_DATA": str(tmp_path / "absent")}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-m", "unit", "-rs"]
    run = subprocess.run([*command, *READERS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "absent" in run.stdout and "is not present" in run.stdout, run.stdout[-3000:]
    assert " error" not in run.stdout.lower().rsplit("\n", 2)[-2]
