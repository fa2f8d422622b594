"""A publisher chosen by name with its options, checked before any record is read.

The same check serves a config's ``[publisher]`` table and the public API's ``publisher`` and
``publisher_options`` arguments, so both refuse the same things with the same messages (which
name the config keys).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from dp_spark.errors import ConfigError
from dp_spark.publishers import PUBLISHERS

# Not chosen by a caller: "sampled" is computed by the job, and "distinct_cells" is only true
# for rows of distinct items (DPSense), which a record-count job does not guarantee.
INTERNAL_OPTIONS = frozenset({"sampled", "distinct_cells"})


def publisher_choice(table: dict[str, Any], algorithm: str | None = None,
                     fixed: str | None = None) -> tuple[str, dict[str, Any]]:
    """(name, checked options) from ``{"name": ..., option: value, ...}``; ``fixed`` is the one
    publisher that ``algorithm`` allows (the baselines LPA, DFT and GS)."""
    name = table.get("name", fixed or "laplace")
    if not isinstance(name, str) or name not in PUBLISHERS:
        raise ConfigError(f"unknown publisher.name {name!r}; expected one of {', '.join(PUBLISHERS)}")
    if fixed and name != fixed:
        raise ConfigError(f"algorithm {algorithm!r} always publishes with {fixed!r}; remove publisher.name")
    accepted = set(PUBLISHERS[name][1]) - INTERNAL_OPTIONS
    options = {}
    for key, value in table.items():
        if key == "name":
            continue
        if key not in accepted:
            takes = ", ".join(sorted(accepted)) or "no options"
            raise ConfigError(f"publisher.{key} is not an option of {name!r} (it takes: {takes})")
        options[key] = _option(key, value)
    return name, options


def _option(key: str, value: Any) -> Any:
    if key == "reproduce_paper":
        if not isinstance(value, bool):
            raise ConfigError(f"publisher.{key} must be true or false, got {value!r}")
        return value
    if key in ("k", "grid_bits"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"publisher.{key} must be an integer >= 1, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ConfigError(f"publisher.{key} must be a number, got {value!r}")
    if key == "eta":
        if value <= 0:
            raise ConfigError(f"publisher.eta must be > 0, got {value!r}")
        return float(value)
    fraction = Fraction(str(value)).limit_denominator(10**6)
    if key == "delta" and not 0 <= fraction <= 1:
        raise ConfigError(f"publisher.delta must be between 0 and 1, got {value!r}")
    if key in ("rho", "ranking_share") and not 0 < fraction < 1:
        raise ConfigError(f"publisher.{key} must be strictly between 0 and 1, got {value!r}")
    return fraction
