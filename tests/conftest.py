"""One local SparkSession for the whole suite, and paths to ../shared/data."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


def shared_data(name: str) -> Path:
    """A dataset folder from ../shared/data (skips the test when it is absent)."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not present (tests read real data from ../shared/data)")
    return path


@pytest.fixture(scope="session")
def spark():
    from dp_spark.io.session import get_session

    session = get_session(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        },
    )
    yield session
    session.stop()
