"""Square roots rounded up, exactly, for the sensitivities and scores that must never round down."""

from __future__ import annotations

import math
from fractions import Fraction


def ceil_sqrt(value: Fraction | int) -> int:
    """⌈√value⌉ for a rational value ≥ 0, exactly: the least integer m with m² ≥ value, which is the
    least with m² ≥ ⌈value⌉ (m² is an integer)."""
    target = math.ceil(Fraction(value))
    if target < 0:
        raise ValueError(f"the root of a negative value: {value}")
    root = math.isqrt(target)
    return root if root * root == target else root + 1
