"""Property-based tests (hypothesis): any config a user can write, valid or not, is either
accepted or refused with a ConfigError carrying a message; it never ends in a traceback."""

import copy
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dp_spark.errors import ConfigError
from dp_spark.jobs.config import JobConfig, build_config
from tests.conftest import examples

BASES = {
    "sra": {"output": "out/x", "source": {"format": "parquet", "path": "x.parquet"},
            "domain": {"items": {"range": [1, 100]}, "attributes": ["a", "b"]},
            "privacy": {"epsilon": 1.0}, "algorithm": {"name": "sra", "l": 10}},
    "dpsense": {"output": "out/x", "source": {"format": "csv", "path": "x.csv"},
                "domain": {"items": {"range": [1, 100]}}, "privacy": {"epsilon": 1.0},
                "algorithm": {"name": "dpsense", "theta_max": 8}},
    "entropy": {"output": "out/x", "source": {"format": "checkins", "path": "x"},
                "domain": {"items": {"range": [1, 100]}}, "privacy": {"epsilon": 1.0},
                "algorithm": {"name": "entropy", "variant": "limit_ss"}},
    "user_histogram": {"output": "out/x", "source": {"format": "parquet", "path": "x.parquet"},
                       "domain": {"items": {"range": [1, 100]}}, "privacy": {"epsilon": 1.0},
                       "algorithm": {"name": "user_histogram", "quantity": "records", "bins": [1, 2, 5]}},
    "frapp": {"output": "out/x", "source": {"format": "adult", "path": "x"},
              "domain": {"records": [{"column": "age", "edges": [35, 55]}, {"column": "sex", "values": ["F", "M"]}]},
              "privacy": {"gamma": 19}, "algorithm": {"name": "frapp", "scheme": "mask"}},
}
KEYS = [
    ("output",),
    ("seed",),
    ("source", "format"),
    ("source", "path"),
    ("source", "columns"),
    ("domain", "items"),
    ("domain", "attributes"),
    ("domain", "records"),
    ("privacy", "epsilon"),
    ("privacy", "gamma"),
    ("privacy", "delta"),
    ("privacy", "epsilon_items"),
    ("algorithm", "name"),
    ("algorithm", "l"),
    ("algorithm", "theta_max"),
    ("algorithm", "variant"),
    ("algorithm", "scheme"),
    ("algorithm", "sup_min"),
    ("algorithm", "quantity"),
    ("algorithm", "bins"),
    ("algorithm", "cp_rho"),
    ("algorithm", "k"),
    ("publisher", "name"),
    ("publisher", "rho"),
    ("spark",),
    ("nonsense",),
    ("algorithm", "ünïcode"),
]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["sra", "hpa", "frapp", "mask", "cut_paste", "parquet", "adult", "limit", "1e-3", "0"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)


def mutate(base: dict, changes) -> dict:
    raw = copy.deepcopy(base)
    for path, value in changes:
        node = raw
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        if value is None:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    return raw


# derandomize: the same examples on every run, so the suite is deterministic. Long: 1,500 configs
# take about 10 s, so it runs in `make test`, not `make test-fast`.
@pytest.mark.long
@settings(max_examples=examples(1500), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(BASES)), st.lists(st.tuples(st.sampled_from(KEYS), values), min_size=1, max_size=4))
def test_any_config_is_accepted_or_refused_with_a_message(base, changes):
    raw = mutate(BASES[base], changes)
    try:
        cfg = build_config(raw)
    except ConfigError as exc:
        assert str(exc).strip()
        return
    assert isinstance(cfg, JobConfig)
    assert cfg.epsilon > 0 and math.isfinite(float(cfg.epsilon))


def test_the_bases_are_valid():
    for raw in BASES.values():
        build_config(copy.deepcopy(raw))
