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


# Spark Connect: `remote("local")` starts its server from this Python process and then every
# builder in it returns Connect sessions, while a classic session already running refuses to let
# it start. So the `connect` tests run in a pytest process of their own (`pytest --connect`, the
# second command of `make test`), and the other tests in one without them.
def pytest_addoption(parser):
    parser.addoption("--connect", action="store_true", help="run only the tests marked connect (Spark Connect)")


def pytest_configure(config):
    config.addinivalue_line("markers", "connect: runs on a Spark Connect session; selected by --connect only")


def pytest_collection_modifyitems(config, items):
    wanted = config.getoption("--connect")
    skipped = [item for item in items if (item.get_closest_marker("connect") is not None) != wanted]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [item for item in items if item not in skipped]


# The settings of the ``spark`` fixture, for the Connect session and classic reference runs.
TEST_SPARK_CONF = {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4",
                   "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}


@pytest.fixture(scope="session")
def connect_spark():
    """A Spark Connect session on a local server (`remote("local[2]")`), set up like ``spark``."""
    import os
    import sys
    import warnings

    from pyspark.sql import SparkSession

    from dp_spark.io.session import DEFAULT_SPARK_CONF

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the server's Python workers (FRAPP)
    builder = SparkSession.builder.remote("local[2]")
    for key, value in {**DEFAULT_SPARK_CONF, **TEST_SPARK_CONF}.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():  # the client sets them again once the server has started: refused
        warnings.filterwarnings("ignore", "Failed to set spark", UserWarning)
        session = builder.getOrCreate()
    yield session
    session.stop()
