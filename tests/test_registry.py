"""The registry of algorithm families: every algorithm a config may name has one family, whose
parameter class the config builds, and a function in the public API."""

from __future__ import annotations

import pytest

import dp_spark
from dp_spark.families.registry import BY_ALGORITHM, FAMILIES, family_of
from dp_spark.jobs.config import ALGORITHMS, load_config
from tests.conftest import ROOT

SHIPPED = sorted((ROOT / "conf").glob("*.toml"))


def test_every_algorithm_has_exactly_one_family():
    assert set(ALGORITHMS) == set(BY_ALGORITHM)
    named = [name for family in FAMILIES for name in family.algorithms]
    assert len(named) == len(set(named))


@pytest.mark.parametrize("config", SHIPPED, ids=lambda path: path.stem)
def test_a_shipped_config_builds_its_familys_parameters(config, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config(config)
    family = family_of(cfg.algorithm)
    assert isinstance(cfg.params, family.params_type) and cfg.params.algorithm == cfg.algorithm


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_every_family_has_an_api_function(family):
    names = [name for name in (*family.algorithms, family.name) if callable(getattr(dp_spark, name, None))]
    assert names, f"dp_spark has no function for the {family.name} family"


def test_an_unknown_algorithm_is_refused_with_the_known_names():
    with pytest.raises(dp_spark.ConfigError, match="unknown algorithm 'srra'; expected one of sra, hpa"):
        family_of("srra")
