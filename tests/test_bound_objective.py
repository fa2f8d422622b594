"""What the private bound's quality scores (dp_spark.release.bound_objective): each named
objective's weights, a table of weights, and the refusals, all public arithmetic on the tables'
sizes."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dp_spark.errors import ConfigError
from dp_spark.release import bound_objective as bo

TABLES = ("item_counts", "edge_counts")
CELLS = {"item_counts": 100, "edge_counts": 600}


@pytest.mark.parametrize("objective, weights", [
    ("items", {"item_counts": 1}),
    ("cells", {"item_counts": 1, "edge_counts": 1}),
    ("tables", {"item_counts": 1, "edge_counts": Fraction(1, 6)}),  # each table's mean per cell
    ((("item_counts", Fraction(1)), ("edge_counts", Fraction(1, 4))),
     {"item_counts": 1, "edge_counts": Fraction(1, 4)}),
    ((("edge_counts", Fraction(3)),), {"edge_counts": 3}),  # a table not named weighs 0, and is left out
])
def test_each_objective_weighs_the_tables_as_documented(objective, weights):
    assert bo.weights(objective, CELLS) == weights


def test_without_edges_every_named_objective_scores_the_item_table_alone():
    for name in bo.NAMED:
        assert bo.weights(name, {"item_counts": 100}) == {"item_counts": 1}
    with pytest.raises(ConfigError, match="does not publish"):
        bo.weights((("edge_counts", Fraction(1)),), {"item_counts": 100})


def test_a_table_of_weights_is_checked_and_kept_exact_in_the_tables_order():
    checked = bo.checked({"edge_counts": 0.25, "item_counts": 1}, TABLES, "algorithm.l_objective")
    assert checked == (("item_counts", Fraction(1)), ("edge_counts", Fraction(1, 4)))
    assert bo.checked(checked, TABLES, "algorithm.l_objective") == checked  # checking again changes nothing
    assert bo.to_json(checked) == {"item_counts": 1.0, "edge_counts": 0.25}
    assert bo.described(checked) == "the tables' squared errors weighted item_counts 1, edge_counts 0.25"
    assert bo.checked("tables", TABLES, "k") == "tables" and bo.to_json("tables") == "tables"


@pytest.mark.parametrize("value, message", [
    ("all", "must be one of 'items', 'cells', 'tables'"),
    (3, "or a table of weights"),
    ({"rows": 1}, "the release's tables are"),
    ({"item_counts": -0.5}, "must be a finite number >= 0"),
    ({"item_counts": float("inf")}, "must be a finite number >= 0"),
    ({"item_counts": float("nan")}, "must be a finite number >= 0"),
    ({"item_counts": True}, "must be a finite number >= 0"),
    ({"item_counts": "1"}, "must be a finite number >= 0"),
    ({"item_counts": 0, "edge_counts": 0}, "some table a weight above 0"),
])
def test_bad_objectives_are_refused_naming_the_key(value, message):
    with pytest.raises(ConfigError, match=message) as caught:
        bo.checked(value, TABLES, "algorithm.l_objective")
    assert "algorithm.l_objective" in str(caught.value)
