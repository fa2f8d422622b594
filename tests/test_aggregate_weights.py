"""An aggregation's budget split overridden by weights: each metric step's part of what the steps
share is in proportion to its weight (1 unless given), under pure ε and zCDP, from the API and a
config; an unknown step or a weight that is no positive number is refused with the config."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dp_spark.core.accounting import Accounting
from dp_spark.errors import ConfigError
from dp_spark.families.aggregate.family import FAMILY, aggregate_params
from dp_spark.jobs.config import load_config
from dp_spark.release.family import Domains, plan_split

KEYS = {"movie": range(1, 4)}
METRICS = ["count", "mean(stars)", "median(stars)"]


def params_with(weights, **extra):
    return aggregate_params("movie", KEYS, METRICS, 2, low=1, high=5, method="tables", weights=weights, **extra)


@pytest.mark.unit
def test_the_steps_share_in_proportion_to_their_weights():
    params = params_with({"sum(stars)": 3, "quantile(stars, 0.5)": 0.5})
    assert params.split(Fraction(1)) == {"count": Fraction(2, 9), "sum(stars)": Fraction(6, 9),
                                         "quantile(stars, 0.5)": Fraction(1, 9)}
    assert params_with(None).split(Fraction(1)) == {step: Fraction(1, 3) for step in params.steps()}
    # The parts taken first are not weighed: a range chosen privately keeps its tenth.
    auto = aggregate_params("movie", KEYS, METRICS, 2, low="auto", high=5, method="tables",
                            weights={"count": 2, "sum(stars)": 1, "quantile(stars, 0.5)": 1})
    split = auto.split(Fraction(1))
    assert split["epsilon_clip"] == Fraction(1, 10) and split["count"] == Fraction(9, 10) * Fraction(1, 2)
    assert FAMILY.report_section(params)["parameters"]["weights"] == {"sum(stars)": 3.0, "quantile(stars, 0.5)": 0.5}


@pytest.mark.unit
def test_under_zcdp_the_weights_are_shares_of_rho():
    params = params_with({"sum(stars)": 2}, noise="gaussian")
    zcdp = Accounting(rho=Fraction(1, 2), conversion_delta=1e-6)
    split = plan_split(FAMILY, params, Fraction(1), Domains(None), accounting=zcdp)
    assert split["sum(stars)"] > split["count"] == split["quantile(stars, 0.5)"]
    # Each share rho_k is handed out as the largest epsilon_k with epsilon_k^2 / 2 <= rho_k.
    assert float(split["sum(stars)"]) ** 2 / 2 == pytest.approx(0.25, rel=1e-3)


@pytest.mark.unit
@pytest.mark.parametrize("weights, message", [
    ({"sum(value)": 2}, "'sum\\(value\\)' is no step of this release; its steps are 'count', 'sum\\(stars\\)'"),
    ({"count": 0}, "must be a positive number"),
    ({"count": -1.5}, "must be a positive number"),
    ({"count": True}, "must be a positive number"),
    ({"count": float("inf")}, "must be a positive number"),
    (["count"], "weights must map ledger steps to weights"),
])
def test_bad_weights_are_refused(weights, message):
    with pytest.raises(ConfigError, match=message):
        params_with(weights)


@pytest.mark.unit
def test_a_config_sets_the_weights_in_its_algorithm_table(tmp_path):
    config = tmp_path / "job.toml"
    config.write_text(f'output = "{tmp_path}/out"\n[source]\nformat = "parquet"\npath = "{tmp_path}/in"\n'
                      '[domain.keys]\nmovie = { range = [1, 3] }\n[privacy]\nepsilon = 1.0\n'
                      '[algorithm]\nname = "aggregate"\nby = ["movie"]\nmetrics = ["count", "mean(stars)"]\n'
                      'groups_per_user = 2\nlow = 1\nhigh = 5\n[algorithm.weights]\n"sum(stars)" = 4\n')
    params = load_config(config).params
    assert params.split(Fraction(1)) == {"count": Fraction(1, 5), "sum(stars)": Fraction(4, 5)}
