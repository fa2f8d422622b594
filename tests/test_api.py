"""The public API against the job: for every shipped config, ``dp-spark run`` and the API call a
user would write for the same data hand the release engine the same inputs (family, parameters,
public domains, budget split, seed, guards, execution, accounting, and the same records); for one
config of each family, the whole seeded release (tables and privacy.json) is compared as well.

The API calls below are written by hand from each config (not translated by the job's code), so a
translation error in either path shows up as a difference in what the engine is handed. Both paths
call the same engine with what they hand it, so equal inputs give equal releases; the whole
releases, one per family, check that nothing between the hand-off and the output differs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.api import run as api_run
from dp_spark.cli import main
from dp_spark.families.counts.family import CountsParams
from dp_spark.families.registry import family_of
from dp_spark.io import checkins, datasets
from dp_spark.jobs import runner
from dp_spark.jobs.config import load_config
from tests.conftest import LARGE_TABLE_SQL_SETTINGS, ROOT
from tests.samples import adult_sample, movielens_1m_sample

pytestmark = pytest.mark.sql_settings(LARGE_TABLE_SQL_SETTINGS)  # large tables: compiled expressions

SEED = 7
MOVIELENS = "../shared/data/ml-1m"
CATALOGUE = {"catalogue": "movielens", "path": f"{MOVIELENS}/movies.dat"}
MEANS_FILE = "ratings_users_0001-2999.dat.gz"  # movielens_means' ratings, with values
GROUPS = ["F_under25", "F_25-34", "F_over34", "M_under25", "M_25-34", "M_over34"]
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
SAMPLE_USERS = 300  # of MovieLens 1M's 6,040: the job and the API call read the same records either way
# movielens_aggregate's sample is larger: its groups total must clear the noise-only guard's
# threshold over its 7,766 groups (38,918), which the 15,729 records kept of 300 users do not.
AGGREGATE_USERS = 800
ADULT_LINES = 4_000  # of each of Adult's two files (48,842 people in all)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Small stand-ins for the configs' tables: generated ones, real MovieLens 1M ratings of its
    first SAMPLE_USERS users (AGGREGATE_USERS for movielens_aggregate; its users and movies files
    as they are) and Adult's first ADULT_LINES lines of each file. The property is the same release
    from the job and the API call on the same records, which needs no million rows. The Netflix
    table keeps 60,000 rows: the demo's seeded release on it keeps enough records for the
    noise-only guard to release it."""
    where = tmp_path_factory.mktemp("api_data")
    netflix, sparse = str(where / "netflix.parquet"), str(where / "checkins")
    ml = movielens_1m_sample(where / "ml-1m", SAMPLE_USERS, ("ratings_pairs.dat.gz", MEANS_FILE))
    aggregate = movielens_1m_sample(where / "ml-1m-aggregate", AGGREGATE_USERS, (MEANS_FILE,)) / MEANS_FILE
    adult = adult_sample(where / "adult", ADULT_LINES)
    datasets.generate_netflix(60_000, netflix, seed=3, progress=lambda *_: None)
    checkins.generate(2_000, sparse, locations=10_000, seed=3)
    return {"netflix": netflix, "checkins": sparse, "movielens": str(ml), "means": str(ml / MEANS_FILE),
            "aggregate": str(aggregate), "adult": str(adult)}


# The API's inputs, read once per session and cached: a release depends on the records, not on how
# often they were read (row keys hash each record's content).
_FRAMES: dict = {}


def movielens(spark, d):
    key = ("movielens", id(spark))
    if key not in _FRAMES:
        _FRAMES[key] = datasets.load_movielens_1m(spark, d["movielens"]).cache()
    return _FRAMES[key]


def netflix(spark, data):
    return spark.read.parquet(data["netflix"])


def movielens_source(d) -> list[str]:
    """The MovieLens configs' override: their sample of MovieLens 1M."""
    return [f"source.path={d['movielens']}"]


# config -> (extra --set overrides, the API call a user would write)
def netflix_sra(spark, d):  # demo and netflix_sra: one job on the same table
    return dp_spark.sra(netflix(spark, d), items=range(1, 17771), attribute="weekday", attributes=WEEKDAYS, l=10,
                        epsilon=1, seed=SEED)


def movielens_hpa(spark, d):  # movielens_hpa and movielens_compare: one job (compare adds evaluate's methods)
    return dp_spark.hpa(movielens(spark, d), items=CATALOGUE, attribute="attr", attributes=GROUPS, l=30, d=20,
                        epsilon=1, seed=SEED)


CASES = {
    "demo": (lambda d: [f"source.path={d['netflix']}"], netflix_sra),
    "netflix_sra": (lambda d: [f"source.path={d['netflix']}"], netflix_sra),
    "netflix_compare": (lambda d: [f"source.path={d['netflix']}"], lambda spark, d: dp_spark.hpa(
        netflix(spark, d), items=range(1, 17771), attribute="weekday", attributes=WEEKDAYS, l=10, d=1, epsilon=1,
        seed=SEED)),
    "movielens_sra": (movielens_source, lambda spark, d: dp_spark.sra(
        movielens(spark, d), items=CATALOGUE, attribute="attr", attributes=GROUPS, l=30, epsilon=1, seed=SEED)),
    "movielens_sra_auto": (movielens_source, lambda spark, d: dp_spark.sra(
        movielens(spark, d), items=CATALOGUE, attribute="attr", attributes=GROUPS, l="auto", epsilon=1, seed=SEED)),
    "movielens_private_items": (movielens_source, lambda spark, d: dp_spark.sra(
        movielens(spark, d).drop("attr"), items="private", delta=1e-6, keys_per_user=10, l=30, epsilon=1,
        seed=SEED)),
    "movielens_sra_gaussian": (movielens_source, lambda spark, d: dp_spark.sra(
        movielens(spark, d), items=CATALOGUE, attribute="attr", attributes=GROUPS, l=100, epsilon=1, delta=1e-6,
        noise="gaussian", records_per_item=1, seed=SEED)),
    "movielens_hpa": (movielens_source, movielens_hpa),
    "movielens_compare": (movielens_source, movielens_hpa),
    "movielens_item_histogram": (movielens_source, lambda spark, d: dp_spark.sra(
        movielens(spark, d), items=CATALOGUE, l=20, epsilon=1, publisher="ahp", seed=SEED)),
    "movielens_user_histogram": (movielens_source, lambda spark, d: dp_spark.user_histogram(
        movielens(spark, d), items=CATALOGUE, quantity="records", bins={"range": [1, 1000]}, epsilon=1,
        publisher="ahp", seed=SEED)),
    "movielens_dpsense": (movielens_source, lambda spark, d: dp_spark.dpsense(
        movielens(spark, d), items=CATALOGUE, theta_max=256, limit="normalize", epsilon=1, seed=SEED)),
    "movielens_means": (lambda d: [f"source.path={d['means']}"], lambda spark, d: dp_spark.means(
        datasets.load_movielens_1m(spark, d["means"], attribute="gender"),
        items=CATALOGUE, value="value", low=1, high=5, l=100, records_per_item=1, attribute="attr",
        attributes=["F", "M"], epsilon=1, delta=1e-6, noise="gaussian", seed=SEED)),
    "movielens_aggregate": (lambda d: [f"source.path={d['aggregate']}"], lambda spark, d: dp_spark.aggregate(
        datasets.load_movielens_1m(spark, d["aggregate"], attribute="gender"), by=["item_id", "attr"],
        keys={"item_id": CATALOGUE, "attr": ["F", "M"]},
        metrics=["count", "mean(value)", "variance(value)", "quantiles(value, 0.5, 0.9)"], groups_per_user=100,
        records_per_group=1, low=1, high=5, candidates=[1, 2, 3, 4, 5], epsilon=1, delta=1e-6, noise="gaussian",
        seed=SEED)),
    "sparse_entropy": (lambda d: [f"source.path={d['checkins']}"], lambda spark, d: dp_spark.location_entropy(
        spark.read.parquet(d["checkins"]), locations=range(1, 10001), M=5, C=5, time="first_time",
        visits="visits", epsilon=5, seed=SEED)),
}
ADULT = [
    {"column": "age", "edges": [35, 55, 75], "right_closed": True},
    {"column": "fnlwgt", "edges": [100000, 200000, 300000, 400000]},
    {"column": "hours-per-week", "edges": [20, 40, 60, 80]},
    {"column": "race", "values": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]},
    {"column": "sex", "values": ["Male", "Female"]},
    {"column": "native-country", "values": ["United-States"], "other": "Other"},
]
CASES["adult_frapp"] = (lambda d: [f"source.path={d['adult']}"], lambda spark, d: dp_spark.frapp(
    datasets.load_adult(spark, d["adult"]), attributes=ADULT, gamma=19, scheme="det_gd", sup_min=0.02,
    seed=SEED))


def test_every_shipped_config_has_an_api_case():
    shipped = {p.stem for p in (ROOT / "conf").glob("*.toml")}
    assert shipped == set(CASES)


def _job_args(name, overrides, out) -> list[str]:
    """`dp-spark run` of the shipped config, seeded, with the case's overrides, writing to ``out``."""
    sets = ["--set", f"seed={SEED}", "--set", f"output={out}"] + [a for o in overrides for a in ("--set", o)]
    return ["run", f"conf/{name}.toml", *sets]


def _job_release(tmp_path, name, overrides, monkeypatch) -> tuple[dict, dict]:
    monkeypatch.chdir(ROOT)
    out = tmp_path / name
    assert main(_job_args(name, overrides, out)) == 0
    tables = {p.name: pd.read_parquet(p) for p in sorted(out.iterdir()) if p.is_dir() and not p.name.startswith(".")}
    return tables, json.loads((out / "privacy.json").read_text())


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for column in frame.columns:  # Parquet's round trip turns numpy ints and pandas' Int64 into its own
        if frame[column].dtype.kind in "iu" or str(frame[column].dtype) == "Int64":
            frame[column] = frame[column].astype("Int64")
        elif str(frame[column].dtype) == "Float64":  # the means' missing means: NaN on both sides
            frame[column] = frame[column].astype("float64")
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


# Report fields that name where the data came from or when the release was made.
UNRELATED = ("created_utc", "source", "run")


_RELEASES: dict = {}


@pytest.fixture(scope="module", autouse=True)
def _forget_cached_inputs():
    """The frames cached for this module are let go when it ends: the session serves other files."""
    yield
    for frame in _FRAMES.values():
        frame.unpersist()
    _FRAMES.clear()
    _RELEASES.clear()


def api_release(call, spark, data):
    """The call's seeded release, made once: configs that are the same job share it."""
    key = (call, id(spark))
    if key not in _RELEASES:
        _RELEASES[key] = call(spark, data)
    return _RELEASES[key]


# One shipped config per family whose whole seeded release is compared: the cheapest of each.
WHOLE_RELEASES = ("demo", "movielens_user_histogram", "movielens_dpsense", "movielens_means", "movielens_aggregate",
                  "sparse_entropy", "adult_frapp")


class _HandedOver(Exception):
    """Raised by the stand-in engine once it has recorded what it was handed: nothing is computed."""


def _same_records(job, api) -> bool:
    """The same records in the columns both hand over (a family reads only its own: FRAPP's API
    frame may carry fewer of Adult's columns than the job reads), by their number and an
    order-free hash of their contents: one Spark job each."""
    columns = sorted(set(job.columns) & set(api.columns))
    assert columns, (job.columns, api.columns)

    def fingerprint(records):
        row = records.select(F.count(F.lit(1)), F.sum(F.xxhash64(*columns).cast("decimal(38,0)"))).first()
        return row[0], row[1]

    return fingerprint(job) == fingerprint(api)


def _handed_to_engine(monkeypatch, run) -> dict:
    """What ``run`` hands the engine (dp_spark.release.engine.compute), replaced by a recorder for the call."""
    handed: dict = {}

    def recorder(family, params, records, domains, epsilon, split, seed, source, progress, limits=None,
                 execution=None, accounting=None):
        # Domains and parameters compare by value (an item domain by its ids and description).
        handed.update(family=family.name, params=params, records=records, domains=domains, epsilon=epsilon,
                      split=split, seed=seed, limits=limits, execution=execution, accounting=accounting)
        raise _HandedOver

    monkeypatch.setattr(runner, "compute", recorder)
    monkeypatch.setattr(api_run, "compute", recorder)
    try:
        run()
    except _HandedOver:
        pass
    assert handed, "the engine was never called"
    return handed


def _job_handed(name, overrides, monkeypatch, tmp_path) -> dict:
    monkeypatch.chdir(ROOT)
    return _handed_to_engine(monkeypatch, lambda: main(_job_args(name, overrides, tmp_path / name)))


@pytest.mark.parametrize("name", sorted(set(CASES) - set(WHOLE_RELEASES)))
def test_the_job_hands_the_engine_what_the_api_call_does(spark, data, tmp_path, monkeypatch, name):
    overrides, call = CASES[name]
    job = _job_handed(name, overrides(data), monkeypatch, tmp_path)
    api = _handed_to_engine(monkeypatch, lambda: call(spark, data))
    assert _same_records(job.pop("records"), api.pop("records"))
    assert job == api


def test_negative_control_a_mistranslated_call_hands_the_engine_something_else(spark, data, tmp_path, monkeypatch):
    job = _job_handed("demo", CASES["demo"][0](data), monkeypatch, tmp_path)
    job_records = job["records"]
    wrong_l = _handed_to_engine(monkeypatch, lambda: dp_spark.sra(
        netflix(spark, data), items=range(1, 17771), attribute="weekday", attributes=WEEKDAYS, l=11, epsilon=1,
        seed=SEED))
    assert _same_records(job.pop("records"), wrong_l.pop("records")) and job != wrong_l
    fewer_records = _handed_to_engine(monkeypatch, lambda: dp_spark.sra(
        netflix(spark, data).limit(59_999), items=range(1, 17771), attribute="weekday", attributes=WEEKDAYS, l=10,
        epsilon=1, seed=SEED))
    assert not _same_records(job_records, fewer_records.pop("records")) and job == fewer_records


def test_the_whole_releases_cover_every_family_of_the_shipped_configs():
    def family(name):
        return family_of(load_config(ROOT / "conf" / f"{name}.toml").params.algorithm).name

    whole = [family(name) for name in WHOLE_RELEASES]
    assert len(set(whole)) == len(whole)  # one each: the cheapest config stands for its family
    assert set(whole) == {family(name) for name in CASES}


@pytest.mark.parametrize("name", WHOLE_RELEASES)
def test_the_seeded_job_equals_the_seeded_api_call(spark, data, tmp_path, monkeypatch, name):
    overrides, call = CASES[name]
    job_tables, job_report = _job_release(tmp_path, name, overrides(data), monkeypatch)
    release = api_release(call, spark, data)
    assert job_tables and all(len(table) for table in job_tables.values())  # a release, not a refusal
    assert set(release.tables) == set(job_tables)
    for table, frame in release.tables.items():
        frame = frame if isinstance(frame, pd.DataFrame) else frame.toPandas()  # FRAPP's perturbed records
        pd.testing.assert_frame_equal(_sorted(frame), _sorted(job_tables[table]), check_dtype=False)
    api_report = json.loads(json.dumps(release.report))
    for key in UNRELATED:
        job_report.pop(key, None)
        api_report.pop(key, None)
    assert api_report == job_report


def test_a_shared_budget_refuses_the_release_that_would_pass_it(spark):
    df = spark.createDataFrame(pd.DataFrame({"user_id": [1, 1, 2, 3], "item_id": [1, 2, 2, 3]}))
    budget = dp_spark.DatasetBudget(epsilon=1.5)
    # Four records, charged. Seeded: noise alone passes the guard's thresholds 5% of the time.
    with pytest.raises(dp_spark.GuardRefused, match="cannot be told from noise"):
        dp_spark.sra(df, items=range(1, 4), l=1, epsilon=1, budget=budget, seed=1)
    with pytest.raises(dp_spark.BudgetExceeded, match="only 0.5 of the dataset's 1.5 is left"):
        dp_spark.hpa(df, items=range(1, 4), l=1, epsilon=1, budget=budget)
    assert float(budget.spent) == 1 and len(budget.charges) == 1


def test_bad_arguments_are_refused_before_any_record_is_read(spark):
    df = spark.createDataFrame(pd.DataFrame({"person": [1], "movie": [1]}))
    with pytest.raises(dp_spark.ConfigError, match="algorithm.l must be an integer >= 1"):
        dp_spark.sra(df, privacy_unit="person", item="movie", items=range(1, 3), l=0, epsilon=1)
    with pytest.raises(dp_spark.DataError, match="column 'user_id' \\(for user_id\\) not found"):
        dp_spark.sra(df, item="movie", items=range(1, 3), l=1, epsilon=1)
    with pytest.raises(dp_spark.ConfigError, match="epsilon_items"):
        dp_spark.sra(df, privacy_unit="person", item="movie", items=range(1, 3), l=1, epsilon=1,
                     epsilon_split={"epsilon_theta": 0.5})
    with pytest.raises(dp_spark.ConfigError, match="always publishes with 'laplace'"):
        CountsParams("lpa", 1, publisher="ahp")


def test_write_is_the_jobs_atomic_release(spark, tmp_path):
    df = spark.createDataFrame(pd.DataFrame({"u": np.arange(50) % 7, "i": np.arange(50) % 5 + 1}))
    release = dp_spark.sra(df, privacy_unit="u", item="i", items=[1, 2, 3, 4, 5], l=2, epsilon=1, seed=1,
                           guards={"refuse_noise_only": False})  # seven users: released anyway
    path = release.write(str(tmp_path / "out"))
    written = json.loads((Path(path) / "privacy.json").read_text())
    assert written["ledger"] == release.ledger and written["fixed_seed"] is True
    assert pd.read_parquet(Path(path) / "item_counts")["noisy_count"].tolist() == \
        release["item_counts"]["noisy_count"].tolist()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("not a release")
    with pytest.raises(dp_spark.ConfigError, match="refusing to replace it"):
        release.write(str(tmp_path / "other"))
