"""``DatasetBudget.from_store``: the API charges the jobs' persistent budget store, so a
kernel restart forgets nothing and a notebook and the nightly job share one cap."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.cli import main
from dp_spark.errors import BudgetExceeded, ConfigError
from tests.test_preflight_runs import job


@pytest.fixture(scope="module")
def ratings(spark):
    rng = np.random.default_rng(0)
    return spark.createDataFrame(pd.DataFrame({"user_id": rng.integers(0, 40, 400),
                                               "item_id": rng.integers(1, 11, 400)}))


def runs(path) -> list[dict]:
    return json.loads(path.read_text())["runs"]


def release(ratings, budget, epsilon=1.0):
    # 80 records kept: unseeded, the noise-only guard would refuse about 1% of these at epsilon 1.
    return dp_spark.sra(ratings, items=range(1, 11), l=2, epsilon=epsilon, budget=budget, progress=lambda _m: None,
                        guards={"refuse_noise_only": False})


def test_the_spend_outlives_the_object_and_the_cap_holds(ratings, tmp_path):
    store = tmp_path / "budget.json"
    with pytest.raises(ConfigError, match="no budget store"):  # only a cap creates a store
        release(ratings, dp_spark.DatasetBudget.from_store(str(store), "toy"))
    first = dp_spark.DatasetBudget.from_store(str(store), "toy", epsilon_cap=2)
    release(ratings, first)
    assert runs(store)[0]["status"] == "released" and runs(store)[0]["epsilon_exact"] == "1"
    restarted = dp_spark.DatasetBudget.from_store(str(store), "toy")  # a new kernel
    assert (restarted.spent, restarted.remaining, restarted.epsilon) == (1, 1, 2)
    with pytest.raises(BudgetExceeded, match="has spent epsilon 1 of its cap 2"):
        release(ratings, restarted, epsilon=1.5)
    assert len(runs(store)) == 1  # refused: not charged
    with pytest.raises(BudgetExceeded, match="above the cap stored"):
        release(ratings, dp_spark.DatasetBudget.from_store(str(store), "toy", epsilon_cap=100))
    with pytest.raises(ConfigError, match="dataset"):
        release(ratings, dp_spark.DatasetBudget.from_store(str(store), "other"))


def test_a_notebook_and_a_job_share_the_store(spark, ratings, tmp_path, capsys):
    assert main(["run", str(job(tmp_path))]) == 0  # epsilon 1 against the store's cap 5
    capsys.readouterr()
    notebook = dp_spark.DatasetBudget.from_store(str(tmp_path / "budget.json"), "toy")
    assert notebook.spent == 1
    release(ratings, notebook, epsilon=3.5)
    assert main(["run", str(job(tmp_path))]) == 3  # 1 + 3.5 + 1 > 5
    assert "has spent epsilon 4.5 of its cap 5" in capsys.readouterr().err


def test_a_release_that_fails_after_the_charge_stays_charged_and_says_so(ratings, tmp_path):
    store = tmp_path / "budget.json"
    budget = dp_spark.DatasetBudget.from_store(str(store), "toy", epsilon_cap=5)
    with pytest.raises(dp_spark.GuardRefused):  # every record outside the domain: the guard refuses
        dp_spark.sra(ratings, items=range(100, 110), l=2, epsilon=1, budget=budget, progress=lambda _m: None,
                     seed=3, guards={"max_dropped_fraction": 0.2, "epsilon": 0.5})
    (charged,) = runs(store)
    assert charged["status"] == "refused" and "GuardRefused" in charged["error"]
    assert budget.spent == Fraction(1)
