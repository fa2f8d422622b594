"""Whole jobs on a Spark Connect session (`remote("local[2]")`), one per algorithm family, whose
seeded releases must equal the same jobs' on a classic session; and the release writer's
recovery and scheduled runs on Connect.

Run with `pytest --connect` (a process of its own: see conftest.py). The classic releases come
from a child process, which runs while the Connect server starts and runs the same jobs; the API
docs' examples run on the same Connect session in a thread, alongside those jobs.
"""

import gzip
import json
import shutil
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import pandas as pd
import pytest

from dp_spark.io import checkins, release_store
from dp_spark.jobs.config import load_config
from dp_spark.jobs.runner import run_job
from tests.conftest import ROOT, SHARED_DATA, TEST_SPARK_CONF

pytestmark = pytest.mark.connect

SEED = 7


def job_overrides(data: Path) -> dict[str, tuple[str, list[str]]]:
    """Family -> (shipped config, --set overrides) on small data: a sample of MovieLens 100K
    (:func:`inputs`), UCI Adult and generated check-ins."""
    ml100k = ["source.format=movielens-100k", f"source.path={data / 'ml-100k'}",
              "domain.items={ range = [1, 1682] }"]
    # One job per family (each one costs this pass seconds on both sessions). HPA, the other job
    # of the counts family, differs from SRA only in which records each user keeps, in driver-side
    # Python and DataFrame code that the API examples (dp_spark.hpa) run on Connect too.
    return {
        "sra_edges": ("movielens_sra.toml", [*ml100k, "algorithm.l=20"]),
        "user_histogram": ("movielens_user_histogram.toml", ml100k),
        "dpsense": ("movielens_dpsense.toml", [*ml100k, "algorithm.theta_max=64"]),
        "entropy": ("sparse_entropy.toml", [f"source.path={data / 'checkins'}"]),
        "frapp": ("adult_frapp.toml", [f"source.path={SHARED_DATA / 'adult'}"]),
        # Fixed [low, high]: the private choice of the clipping range ("auto") runs on Connect in the
        # API examples (dp_spark.means with high chosen privately).
        "means": ("movielens_means.toml", [*ml100k, "algorithm.l=20"]),
        # All of MovieLens 100K here: on the sample, the groups' noisy total (1,682 groups) cannot be
        # told from noise and the release is refused. The gender chosen privately: the selection's
        # lookup table and join run on Connect too, beside the public movies' positions.
        "aggregate": ("movielens_aggregate.toml", [ml100k[0], f"source.path={SHARED_DATA / 'ml-100k'}",
                                                   "domain.keys.item_id={ range = [1, 1682] }",
                                                   'domain.keys.attr="private"',
                                                   "algorithm.groups_per_user=20"]),
    }


def run_all(spark, data: Path, out: Path) -> None:
    """Every job of :func:`job_overrides`, seeded, each into ``out/<family>``."""
    for family, (config, overrides) in job_overrides(data).items():
        cfg = load_config(ROOT / "conf" / config, [*overrides, f"seed={SEED}", f"output={out / family}"])
        run_job(cfg, spark, progress=lambda _message: None)


def released(directory: Path) -> tuple[dict, dict]:
    """A release's report (without its run information and time) and its tables, rows sorted."""
    report = json.loads((directory / "privacy.json").read_text())
    report.pop("run", None)
    report.pop("created_utc")
    tables = {}
    for table in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        frame = pd.read_parquet(table)
        tables[table.name] = frame.sort_values(list(frame.columns)).reset_index(drop=True)
    return report, tables


@pytest.fixture(scope="session")
def inputs(tmp_path_factory) -> Path:
    for name in ("ml-100k", "adult"):
        if not (SHARED_DATA / name).exists():
            pytest.skip(f"{SHARED_DATA / name} is not present")
    data = tmp_path_factory.mktemp("data")
    # The first quarter of MovieLens 100K's ratings (all of its users' table): the jobs of both
    # sessions and the API examples share this machine's two cores, so every job's CPU time counts,
    # and what Connect must reproduce (plans, sampling, noise, written tables) is the same on 25,000
    # records as on 100,000 (the tests still check that every table has rows).
    (data / "ml-100k").mkdir()
    shutil.copy(SHARED_DATA / "ml-100k" / "u.user", data / "ml-100k" / "u.user")
    with gzip.open(SHARED_DATA / "ml-100k" / "u.data.gz", "rt") as ratings:
        (data / "ml-100k" / "u.data").write_text("".join(line for _, line in zip(range(25_000), ratings)))
    checkins.generate(2000, str(data / "checkins"), locations=200, max_visits=50, seed=2)
    return data


@pytest.fixture(scope="session")
def classic_run(inputs, tmp_path_factory):
    """The seeded releases of a classic session, from a child process (no Connect in it) started
    now, so that it runs while the Connect server starts and runs the same jobs: this process is
    alone on the machine after the other tests, and one after the other the two left a core idle.
    Its output goes to a file (a pipe left unread would stop it when full)."""
    out = tmp_path_factory.mktemp("classic")
    log = (out.parent / "classic.log").open("w")
    child = subprocess.Popen([sys.executable, "-m", "tests.test_connect", str(inputs), str(out)], cwd=ROOT,
                             stdout=log, stderr=subprocess.STDOUT, text=True)
    yield child, out, Path(log.name)
    if child.poll() is None:
        child.kill()
    log.close()


@pytest.fixture(scope="session")
def classic_releases(classic_run) -> Path:
    child, out, log = classic_run
    assert child.wait(timeout=1200) == 0, log.read_text()[-3000:]
    return out


@pytest.fixture(scope="session")
def api_examples_run(connect_spark):
    """docs/api.md, every block in order, on the Connect session, in a thread started now: the
    server keeps only a little over one core busy with one client's queries, so the examples run
    alongside the jobs of connect_releases instead of after them. Their print goes to a buffer of their own
    (pytest's capture of sys.stdout would take them into whichever test runs meanwhile)."""
    from tests.test_api_docs import run_python_blocks

    printed: list[str] = []
    result: dict = {"namespace": {"print": lambda *args, **_kw: printed.append(" ".join(map(str, args)))}}

    def run():
        try:
            run_python_blocks("docs/api.md", result["namespace"])
        except BaseException:  # handed to the test, which fails with it
            result["error"] = traceback.format_exc()

    thread = threading.Thread(target=run, name="api examples", daemon=True)
    thread.start()
    yield thread, result, printed
    thread.join()


@pytest.fixture(scope="session")
def connect_releases(classic_run, inputs, connect_spark, api_examples_run, tmp_path_factory) -> Path:
    assert type(connect_spark).__module__.startswith("pyspark.sql.connect.")
    out = tmp_path_factory.mktemp("connect")
    run_all(connect_spark, inputs, out)
    return out


# connect_releases first: the Connect jobs run while the classic ones (classic_run) and the API
# examples (api_examples_run) do.
@pytest.mark.parametrize("family", list(job_overrides(Path("."))))
def test_a_seeded_release_on_connect_equals_the_classic_one(connect_releases, classic_releases, family):
    classic_report, classic_tables = released(classic_releases / family)
    report, tables = released(connect_releases / family)
    assert report == classic_report
    assert tables.keys() == classic_tables.keys() and tables
    for name, frame in tables.items():
        assert len(frame) > 0, name
        pd.testing.assert_frame_equal(frame, classic_tables[name], check_exact=True)
    assert report["epsilon_spent"] > 0


def test_a_write_killed_between_its_moves_is_recovered_on_connect(connect_spark, tmp_path):
    target = tmp_path / "out" / "release"
    records = pd.DataFrame({"item_id": [1, 2, 3]})
    release_store.write_release(connect_spark, str(target), {"t": records}, {"release": "old"})
    assert pd.read_parquet(target / "t")["item_id"].tolist() == [1, 2, 3]
    target.rename(tmp_path / "out" / ".release.previous-0123")  # a kill between the two moves
    (tmp_path / "out" / ".release.tmp-4567").mkdir()
    release_store.check_output_location(connect_spark, str(target))
    assert release_store.read_report(connect_spark, str(target)) == {"release": "old"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["release"]


def test_scheduled_runs_on_connect(connect_spark, tmp_path):
    """Run-date partitions, the no-op re-run, and a forced replacement read back on Connect."""
    source = tmp_path / "records.parquet"
    pd.DataFrame({"user_id": [1, 1, 2, 3], "item_id": [1, 2, 2, 3]}).to_parquet(source)
    config = tmp_path / "job.toml"
    config.write_text(f'output = "{tmp_path / "out"}"\nseed = 1\n[source]\nformat = "parquet"\npath = "{source}"\n'
                      '[domain]\nitems = { range = [1, 4] }\n[privacy]\nepsilon = 1\n'
                      '[algorithm]\nname = "sra"\nl = 2\n[guards]\nrefuse_noise_only = false\n')  # four records
    first = run_job(load_config(config, ["run_date=2026-11-20"]), connect_spark, progress=lambda _m: None)
    again = run_job(load_config(config, ["run_date=2026-11-20"]), connect_spark, progress=lambda _m: None)
    assert (first.status, again.status) == ("released", "unchanged") and again.report == first.report
    forced = run_job(load_config(config, ["run_date=2026-11-20", "seed=2"]), connect_spark,
                     progress=lambda _m: None, force=True)
    assert forced.status == "released"
    release = tmp_path / "out" / "run_date=2026-11-20"
    assert json.loads((release / "privacy.json").read_text())["run"] == forced.report["run"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["run_date=2026-11-20"]
    counts = connect_spark.read.parquet(str(release / "item_counts")).toPandas()
    assert sorted(counts["item_id"]) == [1, 2, 3, 4]


def test_an_api_release_on_connect_equals_the_classic_job(classic_releases, connect_spark, inputs):
    """dp_spark.sra on a Connect DataFrame releases what the classic job released (sra_edges)."""
    import dp_spark
    from dp_spark.io import datasets

    groups = ["F_under25", "F_25-34", "F_over34", "M_under25", "M_25-34", "M_over34"]
    ratings = datasets.load_movielens_100k(connect_spark, str(inputs / "ml-100k"))
    release = dp_spark.sra(ratings, items=range(1, 1683), attribute="attr", attributes=groups, l=20, epsilon=1,
                           seed=SEED)
    _report, classic_tables = released(classic_releases / "sra_edges")
    assert release.tables.keys() == classic_tables.keys()
    for name, frame in release.tables.items():
        ours = frame.sort_values(list(frame.columns)).reset_index(drop=True)
        pd.testing.assert_frame_equal(ours, classic_tables[name], check_dtype=False, check_exact=True)


def test_the_api_examples_run_on_connect(api_examples_run):
    """docs/api.md, every block in order, in the Connect process (its getOrCreate is Connect's)."""
    thread, result, printed = api_examples_run
    thread.join(timeout=1200)
    assert not thread.is_alive(), "the API examples did not finish"
    assert "error" not in result, result.get("error")
    assert type(result["namespace"]["spark"]).__module__.startswith("pyspark.sql.connect.")
    assert "noisy_count" in "\n".join(printed)


if __name__ == "__main__":  # the classic reference runs: python -m tests.test_connect DATA OUT
    from dp_spark.io.session import get_session

    session = get_session("local[2]", TEST_SPARK_CONF)
    run_all(session, Path(sys.argv[1]), Path(sys.argv[2]))
    session.stop()
