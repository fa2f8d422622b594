"""Sanity limits: an epsilon beyond any meaning is refused, one above 10 is warned about,
and a release of more rows than ``execution.max_output_rows`` is refused by ``plan`` and ``run``
before anything is read or charged, unless the operator raises the limit. ``plan`` and the run
show each table's size, which equals the rows a release writes."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.cli import main
from dp_spark.core.accounting import MAX_EPSILON, MEANINGFUL_EPSILON, epsilon_warning, release_epsilon
from dp_spark.errors import ConfigError
from dp_spark.jobs.config import load_config
from dp_spark.release.family import DEFAULT_MAX_OUTPUT_ROWS
from tests.test_accuracy import missing_source_config
from tests.test_preflight_runs import job, refused_before_the_charge

HUGE_ITEMS = "domain.items={ range = [1, 1000000000000] }"  # 10^12 items: a typo's worth


@pytest.mark.parametrize("epsilon", [MAX_EPSILON + 0.001, 1000, 1e300])
def test_an_epsilon_beyond_the_limit_is_refused_by_config_and_api(tmp_path, epsilon):
    with pytest.raises(ConfigError, match=f"privacy.epsilon = .* is above {MAX_EPSILON}, where a release protects"):
        load_config(missing_source_config(tmp_path), [f"privacy.epsilon={epsilon}"])
    with pytest.raises(ConfigError, match=f"is above {MAX_EPSILON}"):
        dp_spark.plan("sra", items=range(1, 5), l=1, epsilon=epsilon)
    with pytest.raises(ConfigError, match=f"is above {MAX_EPSILON}"):
        dp_spark.plan("sra", items=range(1, 5), l=1, epsilon=1, epsilon_split={"epsilon_items": epsilon})


def test_the_limit_itself_is_accepted_and_a_frapp_gamma_beyond_it_is_refused(tmp_path):
    assert release_epsilon(MAX_EPSILON) == MAX_EPSILON
    with pytest.raises(ConfigError, match=r"privacy.gamma = 1e\+300 is above e\^100"):
        dp_spark.plan("frapp", attributes=[{"column": "sex", "values": ["F", "M"]}], gamma=1e300)
    dp_spark.plan("frapp", attributes=[{"column": "sex", "values": ["F", "M"]}], gamma=math.exp(MAX_EPSILON) / 2)


def test_an_epsilon_above_ten_is_warned_about_with_its_odds(tmp_path, capsys):
    assert epsilon_warning(Fraction(MEANINGFUL_EPSILON)) is None
    warning = epsilon_warning(Fraction(20))
    assert "protects next to nothing" in warning and f"e^20 = {math.exp(20):.3g}" in warning
    assert main(["plan", missing_source_config(tmp_path), "--set", "privacy.epsilon=20"]) == 0
    assert warning in capsys.readouterr().out
    assert main(["plan", missing_source_config(tmp_path), "--set", "privacy.epsilon=10"]) == 0
    assert "WARNING" not in capsys.readouterr().out


def test_plan_shows_each_tables_size_and_refuses_a_huge_one_unless_raised(tmp_path, capsys):
    config = missing_source_config(tmp_path)
    assert main(["plan", config]) == 0
    items = load_config(config).items["range"][1]
    assert f"output: item_counts {items:,} rows; edge_counts {items * 3:,} rows" in capsys.readouterr().out
    assert main(["plan", config, "--set", HUGE_ITEMS]) == 2
    err = capsys.readouterr().err
    assert "the release would write 4,000,000,000,000 rows" in err
    assert f"more than execution.max_output_rows = {DEFAULT_MAX_OUTPUT_ROWS:,}" in err
    assert "--set execution.max_output_rows=4000000000000" in err
    assert main(["plan", config, "--set", HUGE_ITEMS, "--set", "execution.max_output_rows=4000000000000"]) == 0
    assert "output: item_counts 1,000,000,000,000 rows" in capsys.readouterr().out


def test_a_run_of_a_huge_release_is_refused_before_spark_starts(tmp_path, capsys):
    """Unit tier: a SparkSession asked for here fails the test (tests/conftest.py), so this also
    checks that `run` refuses a 10^12-item domain before starting Spark, as `plan` does."""
    refused_before_the_charge(tmp_path, capsys, [str(job(tmp_path)), "--set", HUGE_ITEMS],
                              "the release would write 3,000,000,000,000 rows")


def test_the_api_refuses_a_huge_release_before_the_charge(spark):
    frame = spark.createDataFrame(pd.DataFrame({"user_id": [1, 2], "item_id": [1, 2]}))
    budget = dp_spark.DatasetBudget(epsilon=5)
    with pytest.raises(ConfigError, match="max_output_rows=1000000000000"):
        dp_spark.sra(frame, items={"range": [1, 10**12]}, l=1, epsilon=1, budget=budget)
    assert budget.charges == []
    with pytest.raises(ConfigError, match="the release would write 10 rows .*max_output_rows = 9"):
        dp_spark.sra(frame, items=range(1, 11), l=1, epsilon=1, budget=budget, max_output_rows=9)
    assert budget.charges == []


def test_a_run_says_its_output_size_and_warns_about_its_epsilon_and_writes_that_many_rows(spark, tmp_path,
                                                                                            capsys):
    assert main(["run", str(job(tmp_path)), "--set", "privacy.epsilon=12", "--set", "budget_store.epsilon_cap=20"]) == 0
    err = capsys.readouterr().err
    assert "output: item_counts 10 rows; edge_counts 20 rows" in err
    assert epsilon_warning(Fraction(12)) in err
    assert len(pd.read_parquet(tmp_path / "out" / "item_counts")) == 10
    assert len(pd.read_parquet(tmp_path / "out" / "edge_counts")) == 20


@pytest.mark.parametrize("release, expected", [
    (lambda df, said: dp_spark.dpsense(df, items=range(1, 8), epsilon=1, seed=1, progress=said), {"item_counts": 7}),
    (lambda df, said: dp_spark.user_histogram(df, quantity="records", bins=[1, 2, 5, 9], items=range(1, 8), epsilon=1,
                                              seed=1, progress=said), {"histogram": 4}),
    (lambda df, said: dp_spark.location_entropy(df, location="item_id", locations=range(1, 8), epsilon=1,
                                                location_choice="random", seed=1, progress=said),
     {"location_entropy": 7}),
    (lambda df, said: dp_spark.sra(df, items=range(1, 8), l=2, epsilon=1, seed=1, progress=said),
     {"item_counts": 7}),
], ids=["dpsense", "user_histogram", "entropy", "counts"])
def test_each_familys_planned_size_is_what_it_releases(spark, release, expected):
    """The size said before the charge (the family's output_rows) is the size released."""
    rng = np.random.default_rng(0)
    frame = spark.createDataFrame(
        pd.DataFrame({"user_id": rng.integers(0, 30, 200), "item_id": rng.integers(1, 8, 200)})
    )
    said = []
    done = release(frame, said.append)
    released = {name: len(done[name]) for name in done.tables}
    assert released == expected
    assert f"output: {'; '.join(f'{name} {rows:,} rows' for name, rows in released.items())}" in said


def test_a_seeded_test_release_may_go_beyond_the_limit(tmp_path):
    """A seeded release is for tests and NOT private; a nearly noiseless one shows the bounded values."""
    assert load_config(missing_source_config(tmp_path), ["privacy.epsilon=1000000", "seed=1"]).epsilon == 10**6
    assert release_epsilon(1e6, seeded=True) == 10**6
    with pytest.raises(ConfigError, match="a seeded test release may go beyond"):
        release_epsilon(1e6)


def test_the_warning_of_a_huge_seeded_epsilon_does_not_overflow():
    assert "more than 10^300" in epsilon_warning(Fraction(10**7))
