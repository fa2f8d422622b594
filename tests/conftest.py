"""One local SparkSession for the whole suite, paths to ../shared/data, and the test tiers
(unit, spark, system) with the guard that keeps the unit tier off the JVM."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# DP_SPARK_SHARED_DATA moves it (tests/test_without_data.py points it at nothing).
SHARED_DATA = Path(os.environ.get("DP_SPARK_SHARED_DATA", ROOT.parent / "shared" / "data"))


# Hypothesis: each property's example count is the size CI runs; HYPOTHESIS_PROFILE=thorough runs
# ten times as many, for a longer run by hand (docs/architecture.md, "Tests").
HYPOTHESIS_SCALE = {"ci": 1, "thorough": 10}
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
if HYPOTHESIS_PROFILE not in HYPOTHESIS_SCALE:
    raise pytest.UsageError(f"HYPOTHESIS_PROFILE must be one of {', '.join(HYPOTHESIS_SCALE)}")


def examples(n: int) -> int:
    """A property's example count under the profile: ``n`` for CI, 10n for a thorough run."""
    return n * HYPOTHESIS_SCALE[HYPOTHESIS_PROFILE]


def _register_hypothesis_profiles() -> None:
    """The same scale for properties that keep hypothesis' default count."""
    from hypothesis import settings

    for name, scale in HYPOTHESIS_SCALE.items():
        settings.register_profile(name, max_examples=100 * scale)
    settings.load_profile(HYPOTHESIS_PROFILE)


_register_hypothesis_profiles()


# Every JVM the suite starts (its own sessions, the CLI and spark-submit in child processes, the
# Connect server) runs with the client compiler only and the serial collector. The suite runs
# thousands of small jobs over varied code paths, and the optimising compiler (C2) spent more CPU
# compiling them than it won back: a quarter of a worker session's CPU went to its thread, and the
# suite's tests took 2,685 s in all against 3,188 s with Java's defaults, on 2 cores (the JVMs of
# child processes gained most; a few long in-session tests lost 10-25%). The JIT and the collector
# change speed, never results. Spark reads SPARK_SUBMIT_OPTS when it starts a driver
# JVM, and child processes inherit it; flags already set there are kept, ahead of these.
# pytest_configure adds the class archive's flags (tests/jvm_archive.py) before any JVM starts.
SUITE_JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _use_jvm_flags(flags: str) -> None:
    """Add ``flags`` to SPARK_SUBMIT_OPTS once (xdist's workers inherit the controller's)."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if flags not in opts:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} {flags}".strip()


_use_jvm_flags(SUITE_JVM_FLAGS)


# The suite's sessions evaluate Spark's expressions interpreted, not as Java generated and compiled
# for each query, and plan each query once, without adaptive execution: the suite runs thousands
# of small queries, nearly every one a new plan, on tables of a few hundred rows, where compiling a
# plan and re-planning it at each shuffle cost more than running it. Measured in one session, runs
# interleaved: the sensitivity audit's 26 families took 17.6 s with whole-stage code generation off
# alone (the suite's setting before), 16.0 s interpreted and 11.7 s interpreted without adaptive
# execution; sixteen test files of mid-sized jobs took 753 s in all against 689 s. Results do not
# change: sampling keys hash each record's content, and a seeded release of each family (the jobs
# of tests/test_connect.py) was the same, rows and report, under these settings and Spark's
# defaults. Test files whose jobs read large tables (MovieLens 1M samples, MovieLens 100K, the
# 60,000-row Netflix table; marked sql_settings(LARGE_TABLE_SQL_SETTINGS)) keep the compiled expressions and adaptive
# execution, where they won: those three files took 345 s against 471 s interpreted. The JVMs of
# child processes (spark-submit, the CLI, the cluster, through SPARK_SUBMIT_OPTS) get the
# interpreted expressions (dp-spark's own session settings turn adaptive execution on there); the
# Spark Connect pass keeps Spark's defaults, so that every family's whole job also runs on
# generated code, and tests/codegen.py turns whole-stage code generation on where a test reads the
# generated code.
INTERPRETED_SQL_SETTINGS = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
SUITE_SQL_SETTINGS = {**INTERPRETED_SQL_SETTINGS, "spark.sql.adaptive.enabled": "false"}
# Spark's own values of those settings, for the tests that need generated code (SPARK_DEFAULT_SQL_SETTINGS
# in a session, spark_defaults_env for a child process).
SPARK_DEFAULT_SQL_SETTINGS = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK",
                              "spark.sql.adaptive.enabled": "true"}
LARGE_TABLE_SQL_SETTINGS = {**SPARK_DEFAULT_SQL_SETTINGS, "spark.sql.codegen.wholeStage": "false"}


def suite_sql_flags() -> str:
    return " ".join(f"-D{key}={value}" for key, value in INTERPRETED_SQL_SETTINGS.items())


def spark_defaults_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a child process whose JVM keeps Spark's defaults (no SUITE_SQL_SETTINGS)."""
    opts = env.get("SPARK_SUBMIT_OPTS", "").replace(suite_sql_flags(), "").strip()
    return {**env, "SPARK_SUBMIT_OPTS": opts}


def _use_jvm_archive(config) -> None:
    """Find the class archive or start building it in the background (not for a unit-only run,
    which starts no JVM), and add its flags to SUITE_JVM_FLAGS; test modules import
    SUITE_JVM_FLAGS after this, at collection. JVMs started before the build ends start without
    it (tests/jvm_archive.py); pytest_unconfigure waits for the build."""
    global SUITE_JVM_FLAGS
    from tests import jvm_archive

    path = os.environ.get(jvm_archive.ENV)
    if path == jvm_archive.OFF:
        return
    if not path and config.getoption("markexpr") != "unit" and getattr(config, "cache", None) is not None:
        found, config._jvm_archive_build = jvm_archive.building(config.cache.mkdir("jvm-archive"), SUITE_JVM_FLAGS)
        path = str(found) if found else None
    if path:
        os.environ[jvm_archive.ENV] = path
        flags = jvm_archive.archive_flags(Path(path))
        SUITE_JVM_FLAGS = f"{SUITE_JVM_FLAGS} {flags}"
        _use_jvm_flags(flags)


def shared_data(name: str) -> Path:
    """A dataset folder from ../shared/data (skips the test when it is absent)."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not present (tests read real data from ../shared/data)")
    return path


def ml100k_job(tmp_path: Path, algorithm: str, *, seed: int, epsilon: float = 1.0, domain: str = "",
               publisher: str | None = None, name: str = "job.toml") -> Path:
    """A seeded job over MovieLens 100K (all 1,682 movies as the item domain), with the given
    [algorithm] lines, extra [domain] lines and, when given, [publisher] lines (TOML)."""
    config = tmp_path / name
    publisher_table = "" if publisher is None else f"[publisher]\n{publisher}\n"
    config.write_text(f"""
output = "{tmp_path / 'out'}"
seed = {seed}
[source]
format = "movielens-100k"
path = "{shared_data('ml-100k')}"
[domain]
items = {{ range = [1, 1682] }}
{domain}
[privacy]
epsilon = {epsilon}
[algorithm]
{algorithm}
{publisher_table}""")
    return config


@pytest.fixture(scope="session")
def spark():
    """The suite's session, tuned for its many small jobs: two partitions, interpreted expressions
    and no adaptive execution (SUITE_SQL_SETTINGS). Results depend on none of them (sampling keys
    hash each record's content)."""
    from dp_spark.io.session import get_session

    session = get_session(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            **SUITE_SQL_SETTINGS,
        },
    )
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _marked_sql_settings(request):
    """The settings of a test's ``sql_settings(settings)`` marker (its own or its module's) on the
    suite's session while it runs; a test that does not use Spark is left alone (it may be in the
    unit tier)."""
    marker = request.node.get_closest_marker("sql_settings")
    if marker is None or not uses_spark(request.node):
        yield
        return
    from tests.spark_conf import session_settings

    with session_settings(request.getfixturevalue("spark"), marker.args[0]):
        yield


# --- Test tiers --------------------------------------------------------------------------------
# Every test gets exactly one tier marker, so `-m unit` runs without a JVM and `make test` runs all:
#   unit   : pure Python/numpy; never starts Spark (enforced below, it fails loudly if it does);
#   spark  : uses a local SparkSession through a fixture whose name contains "spark";
#   system : new processes, spark-submit, a cluster, long jobs (marked slow, or in SYSTEM_MODULES),
#            and the long statistical controls (marked long: seconds of sampling each).
# A test may also carry a tier marker itself; it wins over the rules, except that a test which
# needs a Spark fixture, or is marked slow or long, cannot be declared unit. See docs/architecture.md, "Tests".
pytest_plugins = ["pytester"]  # tests/test_architecture.py runs the tier rules on a small suite
TIERS = ("unit", "spark", "system")
SYSTEM_MODULES = frozenset({
    "test_crash_safety",  # runs the CLI in a new process and SIGKILLs it
    "test_package",       # builds the packaged environment, starts the suite's one cluster (bare Python)
})
TIER_KEY = pytest.StashKey[str]()
UNDO_KEY = pytest.StashKey[pytest.MonkeyPatch]()  # the unit tier's refusal of SparkSessions
JVM_BEFORE_KEY = pytest.StashKey[bool]()


def uses_spark(item: pytest.Item) -> bool:
    # fixturenames is the closure: a fixture that uses `spark` brings it in as well.
    return any("spark" in name for name in getattr(item, "fixturenames", ()))


def tier_of(item: pytest.Item) -> str:
    declared = [tier for tier in TIERS if item.get_closest_marker(tier)]
    if len(declared) > 1:
        raise pytest.UsageError(f"{item.nodeid} is marked with several tiers: {declared}")
    if declared == ["unit"] and uses_spark(item):
        raise pytest.UsageError(f"{item.nodeid} is marked unit but uses a Spark fixture")
    # A module's `unit` would otherwise keep its long controls in `make test-fast`.
    if declared == ["unit"] and (item.get_closest_marker("slow") or item.get_closest_marker("long")):
        raise pytest.UsageError(f"{item.nodeid} is marked unit but also slow or long (the system tier)")
    if declared:
        return declared[0]
    if (item.get_closest_marker("slow") or item.get_closest_marker("long")
            or getattr(item.module, "__name__", "").rpartition(".")[2] in SYSTEM_MODULES):
        return "system"
    return "spark" if uses_spark(item) else "unit"


# The test files that take longest (minutes, measured), run first: `make test` gives each of its
# processes a whole file at a time in collection order (--dist loadfile), so a long file collected
# last would keep one process busy while the other has nothing left. Order only; nothing is skipped.
LONG_FILES = ("test_observables_audit", "test_sensitivity", "test_audit", "test_package", "test_api",
              "test_end_to_end", "test_catalog", "test_signals", "test_value_sums_spark", "test_executor_release",
              "test_cli_connect", "test_bounding", "test_crash_safety", "test_scheduler_logs", "test_means",
              "test_location_entropy", "test_malformed_data", "test_executor_means", "test_evaluate",
              "test_spark_channels")


def long_files_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: LONG_FILES' tests first, in that order, then the rest as collected."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}

    def order(indexed: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = indexed
        module = getattr(item.module, "__name__", "").rpartition(".")[2] if getattr(item, "module", None) else ""
        return (rank.get(module, len(LONG_FILES)), index)

    items[:] = [item for _, item in sorted(enumerate(items), key=order)]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    long_files_first(items)
    for item in items:
        tier = tier_of(item)
        item.stash[TIER_KEY] = tier
        if not item.get_closest_marker(tier):
            item.add_marker(tier)
    deselect_connect_or_not(config, items)


def jvm_started() -> bool:
    context = sys.modules.get("pyspark.core.context")
    return context is not None and context.SparkContext._gateway is not None


class UnitTestStartedSpark(RuntimeError):
    pass


def refuse_session(*args, **kwargs):
    raise UnitTestStartedSpark(
        "a unit-tier test asked for a SparkSession: take the `spark` fixture (the test is then "
        "spark tier) or mark it @pytest.mark.spark / @pytest.mark.system (docs/architecture.md, Tests)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    # Refuse sessions from setup to teardown: unit-tier fixtures must not start Spark either.
    if item.stash.get(TIER_KEY, None) == "unit":
        from pyspark.sql.session import SparkSession

        patch = pytest.MonkeyPatch()
        patch.setattr(SparkSession.Builder, "getOrCreate", refuse_session)
        patch.setattr(SparkSession.Builder, "create", refuse_session, raising=False)
        item.stash[UNDO_KEY] = patch
        item.stash[JVM_BEFORE_KEY] = jvm_started()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    # Catches what the patch cannot see (a SparkContext built by hand), whenever the JVM was
    # not up before this test: always so in a `-m unit` run.
    if item.stash.get(TIER_KEY, None) == "unit" and not item.stash[JVM_BEFORE_KEY] and jvm_started():
        raise UnitTestStartedSpark(f"{item.nodeid} is unit tier but started a JVM")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        patch = item.stash.get(UNDO_KEY, None)
        if patch is not None:
            patch.undo()


# Spark Connect: `remote("local")` starts its server from this Python process and then every
# builder in it returns Connect sessions, while a classic session already running refuses to let
# it start. So the `connect` tests run in a pytest process of their own (`pytest --connect`, the
# second command of `make test`), and the other tests in one without them.
def pytest_addoption(parser):
    parser.addoption("--connect", action="store_true", help="run only the tests marked connect (Spark Connect)")


def pytest_configure(config):
    config.addinivalue_line("markers", "connect: runs on a Spark Connect session; selected by --connect only")
    _use_jvm_archive(config)
    if not config.getoption("--connect"):
        _use_jvm_flags(suite_sql_flags())


def pytest_unconfigure(config):
    build = getattr(config, "_jvm_archive_build", None)
    if build is not None:  # a short run can end before the archive is written: finish it for the next
        build.join()


def deselect_connect_or_not(config, items):
    """Keep only the connect tests with --connect, and only the others without it."""
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
