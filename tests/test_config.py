"""Config parsing and validation: everything is refused before any data is read."""

from fractions import Fraction

import pytest

from dp_spark.errors import BudgetExceeded, ConfigError
from dp_spark.jobs.config import build_config, parse_override
from dp_spark.jobs.runner import plan_budget


def base(**algorithm):
    return {
        "output": "out/x",
        "source": {"format": "parquet", "path": "x.parquet"},
        "domain": {"items": {"range": [1, 10]}, "attributes": ["a", "b"]},
        "privacy": {"epsilon": 1.0},
        "algorithm": {"name": "sra", "l": 10, **algorithm},
    }


def test_overrides_are_typed():
    assert parse_override("privacy.epsilon=0.5") == (["privacy", "epsilon"], 0.5)
    assert parse_override("algorithm.l=30") == (["algorithm", "l"], 30)
    assert parse_override("source.format=csv") == (["source", "format"], "csv")
    assert parse_override("source.header=false") == (["source", "header"], False)
    assert parse_override('domain.attributes=["x", "y"]') == (["domain", "attributes"], ["x", "y"])
    with pytest.raises(ConfigError, match="key=value"):
        parse_override("privacy.epsilon")


def test_misspelled_key_gets_a_suggestion():
    raw = base()
    raw["privacy"]["epsilom"] = 1
    with pytest.raises(ConfigError, match=r"unknown config key 'privacy.epsilom'; did you mean 'epsilon'\?"):
        build_config(raw)


@pytest.mark.parametrize(
    "section, key, value, message",
    [
        ("privacy", "epsilon", 0, "privacy.epsilon must be > 0"),
        ("privacy", "epsilon", -1, "privacy.epsilon must be > 0"),
        ("privacy", "epsilon", "1.0", "privacy.epsilon must be a number, not the string '1.0'"),
        ("privacy", "epsilon_items", "0.5", "privacy.epsilon_items must be a number, not the string"),
        ("algorithm", "l", 0, "algorithm.l must be an integer >= 1"),
        ("algorithm", "l", 2.5, "algorithm.l must be an integer >= 1"),
        ("algorithm", "name", "sraa", "unknown algorithm 'sraa'"),
        ("source", "format", "orc", "unknown source.format 'orc'"),
        ("source", "distinct_records", "yes", "source.distinct_records must be true or false"),
    ],
)
def test_bad_values_name_the_key(section, key, value, message):
    raw = base()
    raw[section][key] = value
    with pytest.raises(ConfigError, match=message):
        build_config(raw)


def test_default_splits_follow_the_paper():
    # A twentieth of epsilon estimates what bounding removed; the papers' split shares the rest.
    sra = plan_budget(build_config(base()))
    assert sra == {"epsilon_bounding": Fraction(1, 20), "epsilon_items": Fraction(19, 40),
                   "epsilon_edges": Fraction(19, 40)}
    raw = base(name="hpa", d=1)
    hpa = plan_budget(build_config(raw))
    assert hpa == {"epsilon_bounding": Fraction(1, 20), "epsilon_popularity": Fraction(19, 200),
                   "epsilon_items": Fraction(171, 400), "epsilon_edges": Fraction(171, 400)}
    assert sum(hpa.values()) == 1
    raw = base()
    del raw["domain"]["attributes"]
    assert plan_budget(build_config(raw)) == {"epsilon_bounding": Fraction(1, 20), "epsilon_items": Fraction(19, 20)}


def test_split_over_the_total_is_refused():
    raw = base(name="hpa", d=1)
    raw["privacy"]["epsilon_items"] = 0.7
    with pytest.raises(BudgetExceeded, match="exceeds the total"):
        plan_budget(build_config(raw))


def test_hpa_parameters_are_refused_for_sra():
    with pytest.raises(ConfigError, match="HPA parameter"):
        build_config(base(d=3))


@pytest.mark.parametrize(
    "algorithm, publisher, message",
    [
        ({}, {"name": "gauss"}, "unknown publisher.name 'gauss'"),
        (
            {},
            {"name": "fourier", "rho": 0.5},
            r"publisher.rho is not an option of 'fourier' \(it takes: grid_bits, k\)",
        ),
        ({}, {"name": "dpa_ahp", "delta": 1.5}, "publisher.delta must be between 0 and 1"),
        ({}, {"name": "ahp", "rho": 1}, "publisher.rho must be strictly between 0 and 1"),
        ({}, {"name": "fourier", "k": 0}, "publisher.k must be an integer >= 1"),
        ({}, {"name": "dpa_ahp", "reproduce_paper": "yes"}, "publisher.reproduce_paper must be true or false"),
        ({"name": "lpa"}, {}, "algorithm.l is not used by lpa; its per-user bound is algorithm.m"),
        ({"name": "gs", "l": None, "m": 5}, {"name": "ahp"}, "algorithm 'gs' always publishes with 'grouping'"),
        ({"d": 3}, {}, "algorithm.d is an HPA parameter; sra does not use it"),
        ({"consistent": "yes"}, {}, "algorithm.consistent must be true or false"),
        ({}, {"name": "fourier", "distinct_cells": True}, "unknown config key 'publisher.distinct_cells'"),
    ],
)
def test_bad_publisher_settings_are_refused(algorithm, publisher, message):
    raw = base(**algorithm)
    if raw["algorithm"].get("l", 0) is None:
        del raw["algorithm"]["l"]
    raw["publisher"] = publisher
    with pytest.raises(ConfigError, match=message):
        build_config(raw)


def test_baselines_take_their_bound_as_m_and_their_publisher():
    raw = base(name="dft", m=25)
    del raw["algorithm"]["l"]
    raw["publisher"] = {"k": 7}
    cfg = build_config(raw)
    assert (cfg.l, cfg.bound_name, cfg.publisher, cfg.publisher_options) == (25, "m", "fourier", {"k": 7})
    assert plan_budget(cfg) == {"epsilon_bounding": Fraction(1, 20), "epsilon_items": Fraction(19, 40),
                                "epsilon_edges": Fraction(19, 40)}
    sra = build_config({**base(), "publisher": {"name": "dpa_ahp", "delta": 0.075}})
    assert sra.publisher_options["delta"] == pytest.approx(0.075) and sra.bound_name == "l"


def histogram_raw(**algorithm):
    raw = base()
    del raw["domain"]["attributes"]
    raw["algorithm"] = {"name": "user_histogram", "quantity": "records", "bins": [1, 5, 20], **algorithm}
    return raw


def test_user_histogram_spends_everything_on_one_bin_per_user():
    cfg = build_config({**histogram_raw(), "publisher": {"name": "ahp", "rho": 0.8}})
    assert (cfg.quantity, cfg.bins, cfg.l, cfg.publisher) == ("records", (1, 5, 20), 1, "ahp")
    assert plan_budget(cfg) == {"epsilon_histogram": 1}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"l": 10}, "algorithm.l is not used by user_histogram"),
        ({"quantity": "ratings"}, "unknown algorithm.quantity 'ratings'"),
        ({"bins": [0, 5]}, "algorithm.bins: the first bin edge must be 1"),
        ({"bins": None}, "missing config key 'algorithm.bins'"),
        ({"attributes": ["a"]}, "domain.attributes is not used by user_histogram"),
        ({"epsilon_items": 0.5}, "privacy.epsilon_items is not used by user_histogram"),
    ],
)
def test_user_histogram_settings_are_checked(change, message):
    raw = histogram_raw()
    if "attributes" in change:
        raw["domain"]["attributes"] = change["attributes"]
    elif "epsilon_items" in change:
        raw["privacy"]["epsilon_items"] = change["epsilon_items"]
    elif change.get("bins", 0) is None:
        del raw["algorithm"]["bins"]
    else:
        raw["algorithm"].update(change)
    with pytest.raises(ConfigError, match=message):
        build_config(raw)


def test_histogram_keys_are_refused_for_count_jobs():
    with pytest.raises(ConfigError, match="algorithm.bins is a user_histogram parameter; sra does not use it"):
        build_config(base(bins=[1, 2]))


def dpsense_raw(**algorithm):
    raw = base()
    del raw["domain"]["attributes"]
    raw["algorithm"] = {"name": "dpsense", **algorithm}
    return raw


def test_dpsense_defaults_and_split():
    cfg = build_config(dpsense_raw())
    assert (cfg.theta_max, cfg.limit) == (256, "normalize")
    assert plan_budget(cfg) == {"epsilon_theta": Fraction(1, 10), "epsilon_counts": Fraction(9, 10)}
    raw = dpsense_raw(name="dpsense_s", theta_max=32, limit="sample")
    raw["privacy"].update(epsilon_theta=0.2, epsilon_counts=0.8)
    cfg = build_config(raw)
    assert (cfg.algorithm, cfg.theta_max, cfg.limit) == ("dpsense_s", 32, "sample")
    assert plan_budget(cfg) == {"epsilon_theta": Fraction(1, 5), "epsilon_counts": Fraction(4, 5)}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"algorithm": {"l": 10}}, "algorithm.l is not used by dpsense"),
        ({"algorithm": {"theta_max": 0}}, "algorithm.theta_max must be an integer >= 1"),
        ({"algorithm": {"limit": "clip"}}, "algorithm.limit must be one of normalize, sample"),
        ({"algorithm": {"bins": [1, 2]}}, "algorithm.bins is a user_histogram parameter; dpsense does not use it"),
        ({"domain": {"attributes": ["a"]}}, "domain.attributes is not used by dpsense"),
        ({"privacy": {"epsilon_items": 0.5}}, "privacy.epsilon_items is not used by dpsense"),
        ({"publisher": {"name": "ahp"}}, "dpsense adds its own noise"),
    ],
)
def test_dpsense_settings_are_checked(change, message):
    raw = dpsense_raw()
    for section, values in change.items():
        raw.setdefault(section, {}).update(values)
    with pytest.raises(ConfigError, match=message):
        build_config(raw)


def test_dpsense_keys_are_refused_elsewhere():
    with pytest.raises(ConfigError, match="algorithm.theta_max is a dpsense and dpsense_s parameter; sra"):
        build_config(base(theta_max=8))
    raw = base()
    raw["privacy"]["epsilon_theta"] = 0.1
    with pytest.raises(ConfigError, match="privacy.epsilon_theta is a DPSense parameter"):
        build_config(raw)
    raw = dpsense_raw()
    raw["privacy"].update(epsilon_theta=0.5, epsilon_counts=0.9)
    with pytest.raises(BudgetExceeded):
        plan_budget(build_config(raw))


def test_execution_sets_where_the_noise_is_drawn():
    assert build_config(base()).execution.executor_noise_cells == 20_000_000  # the default
    cfg = build_config({**base(), "execution": {"executor_noise_cells": 1000}})
    assert cfg.execution.executor_noise_cells == 1000 and cfg.execution.on_executors(1000)


@pytest.mark.parametrize("execution, message", [
    ({"executor_noise_cells": 0}, "execution.executor_noise_cells must be an integer >= 1"),
    ({"executor_noise_cells": "many"}, "execution.executor_noise_cells must be an integer >= 1"),
    ({"executor_cells": 10}, "did you mean 'executor_noise_cells'"),
    ("fast", r"config section \[execution\] must be a table"),
])
def test_bad_execution_is_refused(execution, message):
    with pytest.raises(ConfigError, match=message):
        build_config({**base(), "execution": execution})


def test_distinct_records_is_off_unless_the_operator_vouches():
    assert build_config(base()).source.distinct_records is False
    raw = base()
    raw["source"]["distinct_records"] = True
    assert build_config(raw).source.distinct_records is True


def test_the_api_refuses_an_epsilon_given_as_text_before_anything_runs():
    import dp_spark

    with pytest.raises(ConfigError, match="epsilon must be a number, not the string '1.0'"):
        dp_spark.plan("sra", items=range(1, 5), l=2, epsilon="1.0")
    with pytest.raises(ConfigError, match="budget epsilon must be a number, not the string"):
        dp_spark.DatasetBudget(epsilon="5")
    assert dp_spark.plan("sra", items=range(1, 5), l=2, epsilon=1.0).epsilon_split == {"epsilon_bounding": 0.05,
                                                                                       "epsilon_items": 0.95}


def test_api_arguments_of_the_wrong_kind_are_config_errors_before_anything_is_read():
    import pandas as pd

    import dp_spark

    frame = pd.DataFrame({"user_id": [1, 2], "item_id": [1, 2]})
    with pytest.raises(ConfigError, match=r"Spark DataFrame, got pandas\.core\.frame\.DataFrame .*createDataFrame"):
        dp_spark.sra(frame, items=range(1, 3), l=1, epsilon=1)
    with pytest.raises(ConfigError, match="sra needs items"):
        dp_spark.sra(frame, items=None, l=1, epsilon=1)
