"""Noise is paid for before it is drawn: the budget hands out the noise.

No Spark: the publishers are pure numpy, and the source check only parses files.

* Every publisher refuses an overspend with BudgetExceeded before it reads a single random word,
  also when only a later part of its epsilon would overspend.
* The budget's noise methods spend first, and refuse an entry whose numbers do not match the draw.
* No module outside dp_spark/core reaches the samplers themselves: all noise goes through a budget.
"""

from __future__ import annotations

import ast
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dp_spark import publishers
from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import BudgetExceeded

ROOT = Path(__file__).resolve().parents[1]
# The samplers that turn random words into noise; outside core, only a Budget may call them.
# core.vector_noise's range_noise and block_noise draw the executors' noise: a budget hands it out
# as a CellNoise (Budget.discrete_laplace_on_executors).
SAMPLERS = frozenset({"discrete_laplace", "discrete_laplace_each", "_discrete_laplace", "exponential_mechanism",
                      "exponential_mechanism_rows", "bernoulli_dyadic", "range_noise", "block_noise",
                      "discrete_gaussian"})
# Modules whose samplers draw noise (Laplace and the exponential mechanism; the discrete Gaussian);
# importing one whole would reach them.
MECHANISMS_MODULES = frozenset({"dp_spark.core.mechanisms", "dp_spark.core.discrete_gaussian"})


class CountingSource(RandomSource):
    """A seeded source that counts the random words it hands out."""

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self.words_drawn = 0

    def words(self, n: int) -> np.ndarray:
        self.words_drawn += n
        return super().words(n)


COUNTS = np.array([5, 3, 0, 7, 1, 0, 2, 4], dtype=np.int64)


def publish(name: str, budget: Budget, rng: RandomSource, epsilon: Fraction = Fraction(1)):
    options = {"sampled": np.minimum(COUNTS, 1)} if name in publishers.NEEDS_ONE_RECORD_PER_USER else {}
    return publishers.publish(name, COUNTS, 2, epsilon, budget, rng, "counts", **options)


@pytest.mark.parametrize("name", sorted(publishers.PUBLISHERS))
def test_an_overspending_publisher_draws_nothing(name):
    budget = Budget(Fraction(1, 2))
    rng = CountingSource()
    with pytest.raises(BudgetExceeded):
        publish(name, budget, rng)
    assert rng.words_drawn == 0 and budget.entries == []


@pytest.mark.parametrize("name", ["ahp", "dpa_ahp", "grouping"])
def test_a_publisher_in_parts_draws_nothing_when_only_a_late_part_overspends(name):
    # 0.99 left: every single part of epsilon 1 fits, the whole does not.
    budget = Budget(Fraction(99, 100))
    rng = CountingSource()
    with pytest.raises(BudgetExceeded):
        publish(name, budget, rng)
    assert rng.words_drawn == 0 and budget.entries == []


@pytest.mark.parametrize("name", sorted(publishers.PUBLISHERS))
def test_a_publisher_reports_exactly_what_it_spent(name):
    budget = Budget(2)
    budget.spend(LedgerEntry("earlier", "discrete Laplace", Fraction(1, 2), Fraction(1), Fraction(2), 1))
    released = publish(name, budget, CountingSource())
    assert budget.entries[1:] == list(released.entries) and budget.spent == Fraction(3, 2)


def entry(epsilon=Fraction(1), sensitivity=Fraction(1), scale=Fraction(1), cells=4, not_private=""):
    return LedgerEntry("step", "discrete Laplace", epsilon, sensitivity, scale, cells, not_private=not_private)


def test_the_budget_spends_before_it_draws():
    budget = Budget(1)
    rng = CountingSource()
    noise = budget.discrete_laplace(entry(), rng)
    assert noise.shape == (4,) and rng.words_drawn > 0 and budget.spent == 1
    drawn = rng.words_drawn
    for draw in (lambda: budget.discrete_laplace(entry(), rng),
                 lambda: budget.discrete_laplace_each(entry(), rng, [1, 2, 3, 4]),
                 lambda: budget.exponential_mechanism(entry(scale=Fraction(2)), rng, [0.0, 1.0, 2.0, 3.0]),
                 lambda: budget.exponential_mechanism_rows(entry(scale=Fraction(2)), rng, np.zeros((3, 4), int))):
        with pytest.raises(BudgetExceeded):
            draw()
    assert rng.words_drawn == drawn and len(budget.entries) == 1


@pytest.mark.parametrize("draw, message", [
    # Less noise than the entry's own sensitivity / epsilon needs.
    (lambda b, rng: b.discrete_laplace(entry(sensitivity=Fraction(2)), rng), "below sensitivity/epsilon"),
    # Blocks that do not make up the entry's cells.
    (lambda b, rng: b.discrete_laplace(entry(), rng, blocks=(2, 1)), "do not make up"),
    # A cell drawn below the scale the ledger records (in grid units: 2 steps of 1/4 < 1).
    (lambda b, rng: b.discrete_laplace_each(entry(), rng, [8, 8, 8, 2], grid=Fraction(1, 4)), "below its recorded"),
    (lambda b, rng: b.discrete_laplace_each(entry(), rng, [1, 1, 1]), "4 cells but 3 scales"),
    # The exponential mechanism's ledger scale is 2Δq/ε (Δq/ε when monotone).
    (lambda b, rng: b.exponential_mechanism(entry(), rng, [0, 1, 2, 3]), "records noise scale"),
    (lambda b, rng: b.exponential_mechanism(entry(scale=Fraction(2)), rng, [0, 1, 2]), "3 scores"),
    (lambda b, rng: b.exponential_mechanism_rows(entry(), rng, np.zeros((2, 4), int)), "records noise scale"),
    (lambda b, rng: b.exponential_mechanism_rows(entry(scale=Fraction(2)), rng, np.zeros((2, 3), int)), "3 scores"),
])
def test_an_entry_that_does_not_match_its_draw_is_refused_before_spending(draw, message):
    budget = Budget(5)
    rng = CountingSource()
    with pytest.raises(ValueError, match=message):
        draw(budget, rng)
    assert rng.words_drawn == 0 and budget.entries == []


def test_the_draw_is_at_the_scale_the_entry_records():
    # On a grid of 1/4, an entry of scale 5 draws grid steps at scale 20: the same words as the sampler's.
    grid_entry = entry(sensitivity=Fraction(5), scale=Fraction(5), cells=3)
    through_budget = Budget(1).discrete_laplace(grid_entry, RandomSource(3), grid=Fraction(1, 4), blocks=(2, 1))
    from dp_spark.core import mechanisms

    rng = RandomSource(3)
    direct = np.concatenate([mechanisms.discrete_laplace(rng, 20, 2), mechanisms.discrete_laplace(rng, 20, 1)])
    np.testing.assert_array_equal(through_budget, direct)
    assert Budget(1).exponential_mechanism(entry(scale=Fraction(1), cells=3), RandomSource(4), [0, 5, 1],
                                           monotone=True) == mechanisms.exponential_mechanism(
        RandomSource(4), [0, 5, 1], 1, 1, monotone=True)
    rows = np.array([[0, 5, 1], [2, 2, 0]])
    np.testing.assert_array_equal(
        Budget(1).exponential_mechanism_rows(entry(scale=Fraction(1), cells=3), RandomSource(4), rows, monotone=True),
        mechanisms.exponential_mechanism_rows(RandomSource(4), rows, 1, 1, monotone=True))


# ---------------------------------------------------------------------------
# The source check.


def sampler_uses(source: str) -> list[str]:
    """Where ``source`` reaches a sampler of dp_spark.core.mechanisms without a budget: a sampler
    imported by name (from any module), or the mechanisms module imported whole (through which
    any of its samplers could be called)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                if alias.name in SAMPLERS:
                    found.append(f"line {node.lineno}: imports {alias.name} from {module}")
                if f"{module}.{alias.name}" in MECHANISMS_MODULES:
                    found.append(f"line {node.lineno}: imports the module {module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MECHANISMS_MODULES:
                    found.append(f"line {node.lineno}: imports the module {alias.name}")
    return found


def outside_core() -> list[Path]:
    files = [p for p in (ROOT / "dp_spark").rglob("*.py") if "core" not in p.relative_to(ROOT / "dp_spark").parts[:1]]
    return sorted(files + list((ROOT / "scripts").rglob("*.py")))


def test_the_source_check_sees_a_sampler():
    assert sampler_uses("from dp_spark.core.mechanisms import RandomSource, discrete_laplace\n")
    assert sampler_uses("from dp_spark.core import mechanisms\n")
    assert sampler_uses("import dp_spark.core.mechanisms as m\n")
    assert sampler_uses("from dp_spark.core.vector_noise import CellNoise, range_noise\n")
    assert sampler_uses("from dp_spark.core import discrete_gaussian\n")
    assert sampler_uses("from dp_spark.core.discrete_gaussian import discrete_gaussian\n")
    assert not sampler_uses("from dp_spark.core.mechanisms import RandomSource, as_scale\n"
                            "noise = budget.discrete_laplace(entry, rng)\n")


def test_no_module_outside_core_calls_a_sampler_directly():
    files = outside_core()
    assert any(p.name == "laplace.py" for p in files) and not any("core" in p.parts for p in files)
    offenders = {str(p.relative_to(ROOT)): uses for p in files if (uses := sampler_uses(p.read_text("utf-8")))}
    assert not offenders, ("noise must come from a Budget (dp_spark.core.ledger), which spends first: "
                           f"{offenders}")
