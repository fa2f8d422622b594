"""Whole jobs on real and synthetic data, through spark-submit and in-process."""

import gzip
import json
import subprocess
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from dp_spark.aggregates import item_edges
from dp_spark.bounding import user_records
from dp_spark.cli import main
from dp_spark.core.domain import attribute_domain, item_domain
from dp_spark.core.mechanisms import discrete_laplace_variance
from dp_spark.io import datasets, sources, validation
from dp_spark.jobs.config import load_config
from tests.conftest import LARGE_TABLE_SQL_SETTINGS, ROOT, ml100k_job, shared_data
from tests.samples import movielens_1m_sample

pytestmark = pytest.mark.sql_settings(LARGE_TABLE_SQL_SETTINGS)  # large tables: compiled expressions

ML1M_MOVIES = 3883  # lines of movies.dat: the public item domain
SAMPLE_USERS = 300  # of MovieLens 1M's 6,040: every item and attribute stays in the domain


def submit(conf: str, *job_args: str, spark_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    cmd = [str(ROOT / "scripts" / "submit.sh"), conf, "--driver-memory", "2g", *spark_args, "--", *job_args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def read_diagnostics(path: Path) -> dict:
    """What ``--diagnostics PATH`` wrote: the NOT-private figures, outside the release."""
    return json.loads(path.read_text())


def read_output(out: Path):
    report = json.loads((out / "privacy.json").read_text())
    items = pd.read_parquet(out / "item_counts")
    edges = pd.read_parquet(out / "edge_counts")
    return report, items, edges


def check_release(report, items, edges, n_items, attrs, epsilon):
    assert sorted(items["item_id"]) == sorted(set(items["item_id"])) and len(items) == n_items
    assert len(edges) == n_items * len(attrs) and set(edges["attr"]) == set(attrs)
    assert sum(e["epsilon"] for e in report["ledger"]) == pytest.approx(epsilon)
    assert report["epsilon_spent"] == pytest.approx(epsilon) and report["epsilon_total"] == epsilon
    assert report["privacy_unit"].startswith("user")


def test_movielens_1m_loader_reproduces_paper_table_4(spark):
    df = datasets.load_movielens_1m(spark, str(shared_data("ml-1m")))
    # The ratings per user, per movie and per attribute in one pass: the gzipped ratings file is
    # read by one task, and one read of its million lines instead of four is most of this test's time.
    counted = df.groupingSets([["user_id"], ["item_id"], ["attr"]], "user_id", "item_id", "attr").agg(
        F.count("*").alias("count"), F.grouping_id().alias("grouping")).toPandas()
    by = {column: counted[counted["grouping"] == grouping]
          for column, grouping in (("user_id", 0b011), ("item_id", 0b101), ("attr", 0b110))}
    per_user = by["user_id"]["count"]
    assert (len(per_user), per_user.sum(), per_user.max(), per_user.min()) == (6040, 1_000_209, 2314, 20)
    assert round(per_user.mean(), 1) == 165.6
    assert len(by["item_id"]) == 3706  # distinct movies rated
    # Every rating has a (gender, age group) from users.dat, all in the public attribute list.
    assert set(by["attr"]["attr"]) == set(datasets.MOVIELENS_ATTRIBUTES)


@pytest.fixture(scope="module")
def ml1m_first_users(tmp_path_factory) -> Path:
    """MovieLens 1M with the ratings of its first SAMPLE_USERS users, written once for the module's
    two jobs on it (each writes its output and diagnostics in a folder of its own)."""
    return movielens_1m_sample(tmp_path_factory.mktemp("ml-1m-sample") / "ml-1m", SAMPLE_USERS)


@pytest.mark.slow
def test_movielens_sra_noise_matches_the_ledger(spark, ml1m_first_users, tmp_path, monkeypatch):
    """The released counts minus the bounded counts (recomputed here with the same seed) are
    discrete Laplace noise of exactly the ledger's scale. In the suite's session: spark-submit's
    path is the demo's, below. The ratings are those of MovieLens 1M's first 300 users: the
    test's power is in the 3,883 items' and 23,298 edges' cells, which stay."""
    ratings = ml1m_first_users
    out = tmp_path / "ml_sra"
    monkeypatch.chdir(ROOT)  # the config's catalogue path is relative to the repository
    sets = ["--set", f"source.path={ratings}", "--set", "seed=11"]
    assert main(["run", "conf/movielens_sra.toml", *sets, "--set", f"output={out}",
                 "--diagnostics", str(tmp_path / "diagnostics.json")]) == 0
    report, items, edges = read_output(out)
    check_release(report, items, edges, ML1M_MOVIES, datasets.MOVIELENS_ATTRIBUTES, 1.0)
    assert report["fixed_seed"] is True and "seed" not in report
    # Each table gets 19/40 of ε (a twentieth estimates what bounding removed): scale 30/(19/40).
    scale = float(Fraction(30) / Fraction(19, 40))
    assert [(e["step"], e["sensitivity_l1"], e["noise_scale"]) for e in report["ledger"]] == [
        ("item_counts", 30, scale), ("edge_counts", 30, scale), ("bounding: kept", 30, 1200),
        ("bounding: removed", 210, 8400)
    ]

    cfg = load_config(ROOT / "conf/movielens_sra.toml", [s for s in sets if s != "--set"])
    domain, attrs = item_domain(cfg.items), attribute_domain(cfg.attributes)
    records = validation.validate_records(sources.read_records(spark, cfg.source, True), domain, attrs).records
    true_edges = item_edges.edge_counts(user_records.sample_per_user(records, 30, seed=11), domain, attrs)
    assert true_edges.sum() == read_diagnostics(tmp_path / "diagnostics.json")["rows_after_bounding"]
    assert true_edges.sum(axis=1).max() <= 30 * SAMPLE_USERS

    noise_items = items.sort_values("item_id")["noisy_count"].to_numpy() - true_edges.sum(axis=1)
    released_edges = edges.set_index(["item_id", "attr"]).loc[
        [(i, a) for i in domain.ids for a in attrs.values], "noisy_count"
    ].to_numpy()
    noise_edges = released_edges - true_edges.reshape(-1)
    var = discrete_laplace_variance(scale)
    # Relative standard error of a Laplace-like sample variance is sqrt(5/n): 3.6% for 3,883
    # cells, 1.5% for 23,298. Tolerances are about four of those.
    assert noise_items.var() == pytest.approx(var, rel=0.15)
    assert noise_edges.var() == pytest.approx(var, rel=0.06)
    assert abs(noise_edges.mean()) < 5 * np.sqrt(var / noise_edges.size)


@pytest.mark.slow
def test_demo_config_through_spark_submit(tmp_path):
    data = tmp_path / "netflix.parquet"
    stats = datasets.generate_netflix(60_000, str(data), seed=3, progress=lambda _: None)
    assert stats["rows"] == 60_000 and stats["min_per_user"] >= 1
    out = tmp_path / "demo"
    # Unseeded, as the demo runs. The 2,821 records these 60,000 rows keep clear the noise-only
    # guard's threshold only about 99% of the time (the demo's million rows always do): the guard is off.
    done = submit("conf/demo.toml", "--set", f"source.path={data}", "--set", f"output={out}",
                  "--set", "guards.refuse_noise_only=false", "--diagnostics", str(tmp_path / "diagnostics.json"))
    report, items, edges = read_output(out)
    check_release(report, items, edges, 17_770, datasets.WEEKDAYS, 1.0)
    assert report["fixed_seed"] is False
    assert "diagnostics_not_private" not in report
    assert read_diagnostics(tmp_path / "diagnostics.json")["rows_read"] == 60_000
    assert "Top-10 items by noisy count" in done.stdout and "epsilon 1 spent of 1" in done.stdout


def test_movielens_hpa_in_process(spark, ml1m_first_users, tmp_path, capsys, monkeypatch):
    """The shipped HPA config on MovieLens 1M's first 300 users (all 3,883 movies in the domain)."""
    ratings = ml1m_first_users
    out = tmp_path / "ml_hpa"
    monkeypatch.chdir(ROOT)  # the config's catalogue path is relative to the repository
    assert main(["run", "conf/movielens_hpa.toml", "--set", f"source.path={ratings}", "--set", f"output={out}",
                 "--set", "seed=2", "--diagnostics", str(tmp_path / "diagnostics.json")]) == 0
    report, items, edges = read_output(out)
    check_release(report, items, edges, ML1M_MOVIES, datasets.MOVIELENS_ATTRIBUTES, 1.0)
    ledger = [(e["step"], e["epsilon"], e["sensitivity_l1"]) for e in report["ledger"]]
    assert ledger == [("popularity", 0.095, 20), ("item_counts", 0.4275, 30), ("edge_counts", 0.4275, 30),
                      ("bounding: kept", 0.025, 30), ("bounding: removed", 0.025, 210)]
    diagnostics = read_diagnostics(tmp_path / "diagnostics.json")
    # Each user's ratings, counted from the file in plain Python (no Spark job of its own).
    with gzip.open(ratings / "ratings_pairs.dat.gz", "rt") as lines:
        per_user = Counter(line.split("::", 1)[0] for line in lines)
    assert len(per_user) == SAMPLE_USERS and min(per_user.values()) >= 20  # so d = 20 of every user
    assert diagnostics["rows_in_popularity_sample"] == 20 * SAMPLE_USERS
    expected_kept = sum(min(n, 30) for n in per_user.values())
    assert diagnostics["rows_after_bounding"] == expected_kept  # min(n_u, l) rows of every user
    assert "Top-10 items by noisy count" in capsys.readouterr().out


def test_movielens_100k_in_process(spark, tmp_path):
    path = shared_data("ml-100k")
    out = tmp_path / "ml100k"
    args = [
        "run", str(ROOT / "conf/movielens_sra.toml"), "--set", "source.format=movielens-100k",
        "--set", f"source.path={path}", "--set", "domain.items={ range = [1, 1682] }",
        "--set", f"output={out}", "--set", "algorithm.l=20", "--diagnostics", str(tmp_path / "diagnostics.json"),
    ]
    assert main(args) == 0
    report, items, edges = read_output(out)
    check_release(report, items, edges, 1682, datasets.MOVIELENS_ATTRIBUTES, 1.0)
    diagnostics = read_diagnostics(tmp_path / "diagnostics.json")
    assert diagnostics["rows_read"] == 100_000 and diagnostics["rows_outside_item_domain"] == 0
    assert diagnostics["rows_after_bounding"] == 943 * 20  # every ML-100K user rated >= 20 movies


BOUNDING_STEPS = ("bounding: kept", "bounding: removed")  # every counts release estimates what bounding removed


def ml100k_config(tmp_path: Path, algorithm: str, publisher: str = "") -> Path:
    """A MovieLens 100K job with the given [algorithm] and [publisher] tables (TOML lines)."""
    attributes = "attributes = " + repr(list(datasets.MOVIELENS_ATTRIBUTES)).replace("'", '"')
    return ml100k_job(tmp_path, algorithm.replace("'", '"'), seed=3, domain=attributes,
                      publisher=publisher.replace("'", '"'))


@pytest.mark.parametrize(
    "algorithm, publisher, steps",
    [
        ('name = "lpa"\nm = 20', "", ["item_counts", "edge_counts", *BOUNDING_STEPS]),
        ('name = "dft"\nm = 20', "k = 40", ["item_counts", "edge_counts", *BOUNDING_STEPS]),
        ('name = "gs"\nm = 20', "",
         ["item_counts (ordering sample)", "item_counts (group sums", "edge_counts (ordering sample)",
          "edge_counts (group sums", *BOUNDING_STEPS]),
        ('name = "sra"\nl = 20', 'name = "ahp"',
         ["item_counts (first pass)", "item_counts (cluster sums", "edge_counts (first pass)",
          "edge_counts (cluster sums", *BOUNDING_STEPS]),
    ],
    ids=["lpa", "dft", "gs", "sra-ahp"],
)
def test_movielens_100k_baselines_and_publishers(spark, tmp_path, algorithm, publisher, steps):
    assert main(["run", str(ml100k_config(tmp_path, algorithm, publisher))]) == 0
    report, items, edges = read_output(tmp_path / "out")
    check_release(report, items, edges, 1682, datasets.MOVIELENS_ATTRIBUTES, 1.0)
    assert report["guarantee"].startswith("NONE") and "give pure epsilon" in report["guarantee"]  # seeded
    logged = [e["step"] for e in report["ledger"]]
    assert len(logged) == len(steps) and all(a.startswith(b) for a, b in zip(logged, steps))
    # Every publisher here is unbiased or nearly so at this size: the total stays near 943 × 20.
    assert items["noisy_count"].sum() == pytest.approx(943 * 20, rel=0.25)


def test_dpa_ahp_as_published_is_labelled_not_private(spark, tmp_path, capsys):
    config = ml100k_config(tmp_path, 'name = "sra"\nl = 20', 'name = "dpa_ahp"\nreproduce_paper = true')
    assert main(["run", str(config)]) == 0
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    assert report["guarantee"].startswith("NONE")
    assert any("NOT_PRIVATE" in e for e in report["ledger"])
    assert report["algorithm"]["publisher"] == {"name": "dpa_ahp", "reproduce_paper": True}
    assert "NOT differentially private" in capsys.readouterr().err


def test_consistent_counts_agree_and_are_not_negative(spark, tmp_path):
    config = ml100k_config(tmp_path, 'name = "sra"\nl = 20\nconsistent = true')
    assert main(["run", str(config)]) == 0
    report, items, edges = read_output(tmp_path / "out")
    check_release(report, items, edges, 1682, datasets.MOVIELENS_ATTRIBUTES, 1.0)
    per_item = edges.groupby("item_id")["noisy_count"].sum().reindex(items["item_id"]).to_numpy()
    np.testing.assert_allclose(items["noisy_count"].to_numpy(), per_item, rtol=1e-9, atol=1e-6)
    assert (edges["noisy_count"] >= 0).all()
    assert report["algorithm"]["post_processing"].startswith("item and edge counts made consistent")
