"""Config parsing and validation: everything is refused before any data is read."""

import pytest

from dp_spark.config import build_config, parse_override
from dp_spark.errors import ConfigError
from dp_spark.jobs import plan_budget
from dp_spark.privacy import BudgetExceeded


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
        ("algorithm", "l", 0, "algorithm.l must be an integer >= 1"),
        ("algorithm", "l", 2.5, "algorithm.l must be an integer >= 1"),
        ("algorithm", "name", "sraa", "unknown algorithm 'sraa'"),
        ("source", "format", "orc", "unknown source.format 'orc'"),
    ],
)
def test_bad_values_name_the_key(section, key, value, message):
    raw = base()
    raw[section][key] = value
    with pytest.raises(ConfigError, match=message):
        build_config(raw)


def test_default_splits_follow_the_paper():
    sra = plan_budget(build_config(base()))
    assert sra == {"epsilon_items": 0.5, "epsilon_edges": 0.5}
    raw = base(name="hpa", d=1)
    hpa = plan_budget(build_config(raw))
    assert {k: float(v) for k, v in hpa.items()} == {
        "epsilon_popularity": 0.1, "epsilon_items": 0.45, "epsilon_edges": 0.45,
    }
    assert sum(hpa.values()) == 1
    raw = base()
    del raw["domain"]["attributes"]
    assert plan_budget(build_config(raw)) == {"epsilon_items": 1}


def test_split_over_the_total_is_refused():
    raw = base(name="hpa", d=1)
    raw["privacy"]["epsilon_items"] = 0.7
    with pytest.raises(BudgetExceeded, match="exceeds the total"):
        plan_budget(build_config(raw))


def test_hpa_parameters_are_refused_for_sra():
    with pytest.raises(ConfigError, match="HPA parameter"):
        build_config(base(d=3))
