"""String item ids (SKUs, venue hashes) for the counts family: the domain, validation, the
counts, and releases through the API and a job.

The strongest check is a relabelling: the same records with each integer id k written as the
string "sku-k" (zero-padded, so both sort alike) must give, under one seed, exactly the release
of the integer domain, cell for cell. Sampling hashes (user, record id), never the item, and noise
is drawn in domain order, so any difference is a fault of the string path.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark.aggregates import item_edges
from dp_spark.api.arguments import as_items
from dp_spark.cli import main
from dp_spark.core.domain import AttributeDomain, item_domain, item_domain_of_ids, read_id_file
from dp_spark.errors import ConfigError, DataError
from dp_spark.io.validation import validate_records

SEED = 7


def sku(k: int) -> str:
    return f"sku-{k:03d}"


# --- The domain (unit) -------------------------------------------------------------------------


def test_a_string_domain_is_sorted_deduplicated_and_finds_its_ids():
    domain = item_domain({"ids": ["sku-2", "sku-10", "sku-1", "sku-2"]})
    assert domain.is_string and domain.ids.dtype == object
    assert domain.ids.tolist() == ["sku-1", "sku-10", "sku-2"]  # code point order, as Spark sorts strings
    assert domain.index_of(["sku-10", "nope", "sku-1", "sku-2"]).tolist() == [1, -1, 0, 2]
    assert domain.index_of([]).tolist() == []


def test_domains_compare_as_values_and_string_ids_never_equal_integers():
    """Parameters that hold a domain (an aggregation's key columns) compare by it, so a job and an
    API call can be checked to give the engine the same ones."""
    assert item_domain({"ids": [3, 1, 2]}) == item_domain({"ids": [2, 1, 3]})
    assert hash(item_domain({"ids": [3, 1, 2]})) == hash(item_domain({"ids": [1, 2, 3]}))
    assert item_domain({"ids": [1, 2, 3]}) != item_domain({"ids": [1, 2, 4]})
    assert item_domain({"ids": [1, 2]}) != item_domain({"ids": [1, 2, 3]})
    assert item_domain({"ids": ["1", "2"]}) != item_domain({"ids": [1, 2]})  # negative control: strings are not ints
    assert item_domain({"range": [1, 5]}) == item_domain({"range": [1, 5]}) != item_domain({"range": [1, 6]})


def test_an_integer_is_looked_up_in_a_string_domain_by_its_decimal_form():
    domain = item_domain({"ids": ["7", "42", "x"]})
    assert domain.index_of(np.array([42, 7, 8])).tolist() == [0, 1, -1]


def test_string_ids_that_read_as_integers_stay_distinct_strings():
    """Negative control: cast to int, "1", "01" and "001" would be one id."""
    domain = item_domain({"ids": ["1", "01", "001", "7"]})
    assert domain.is_string and len(domain) == 4
    assert len(set(domain.index_of(["1", "01", "001"]).tolist())) == 3


def test_integer_lists_still_give_integer_domains():
    domain = item_domain({"ids": [3, 1, 2, 3]})
    assert domain.ids.dtype == np.int64 and domain.ids.tolist() == [1, 2, 3] and not domain.is_string
    assert as_items([5, 4]).ids.dtype == np.int64
    assert as_items(np.array([5, 4])).ids.tolist() == [4, 5]


@pytest.mark.parametrize("ids", [["a", 1], [1, "a"], ["a", np.int64(1)]])
def test_a_list_mixing_integers_and_strings_is_refused(ids):
    with pytest.raises(ConfigError, match="mixes integer and string ids"):
        item_domain({"ids": ids})
    with pytest.raises(ConfigError, match="mixes integer and string ids"):
        as_items(ids)


@pytest.mark.parametrize("ids", [[1.5], [True, False], [None], []])
def test_other_id_lists_are_refused(ids):
    with pytest.raises(ConfigError):
        item_domain({"ids": ids})


def test_a_file_of_integers_is_an_integer_domain_and_any_other_line_makes_it_strings(tmp_path):
    numbers = tmp_path / "numbers.txt"
    numbers.write_text("# catalogue\n10\n2,title\n\n2\n")
    domain = item_domain({"file": str(numbers)})
    assert domain.ids.dtype == np.int64 and domain.ids.tolist() == [2, 10]
    skus = tmp_path / "skus.txt"
    skus.write_text("10\n02\tfirst\nsku-9  # a comment\n")
    assert read_id_file(str(skus)).tolist() == ["10", "02", "sku-9"]
    domain = item_domain({"file": str(skus)})
    assert domain.is_string and domain.ids.tolist() == ["02", "10", "sku-9"]
    assert "line 2, '02', is not a plain integer" in domain.description  # a leading zero: a string


# --- Validation and counts (spark) ---------------------------------------------------------


def _records(spark, items: list, users: list[int], item_type: str, attrs: list[str] | None = None):
    rows = pd.DataFrame({"user_id": users, "item_id": items, "row_key": range(len(items))})
    schema = f"user_id long, item_id {item_type}, row_key long"
    if attrs is not None:
        rows.insert(2, "attr", attrs)
        schema = f"user_id long, item_id {item_type}, attr string, row_key long"
    return spark.createDataFrame(rows, schema)


def _true_counts(records, domain, attributes=None):
    validated = validate_records(records, domain, attributes)
    try:
        return item_edges.edge_counts(validated.records, domain, attributes), validated.diagnostics
    finally:
        validated.release()


def test_string_ids_are_counted_as_strings_never_as_integers(spark):
    """Negative control: "1", "01" and "007" are three items, and "7" is not "007"."""
    items = ["1", "01", "01", "007", "7", "x", "1", "1 "]
    df = _records(spark, items, [1, 1, 2, 2, 3, 3, 4, 4], "string")
    domain = item_domain({"ids": ["1", "01", "007"]})
    counts, diagnostics = _true_counts(df, domain)
    # Domain order: "007", "01", "1". "7", "x" and "1 " (compared exactly, not trimmed) are outside.
    assert counts[:, 0].tolist() == [1, 2, 2]
    assert diagnostics["rows_outside_item_domain"] == 3


def test_an_integer_item_column_is_compared_by_its_decimal_form(spark):
    df = _records(spark, [1, 42, 42, 7, 100], [1, 1, 2, 2, 3], "long")
    domain = item_domain({"ids": ["1", "42", "sku-1", "07"]})
    counts, diagnostics = _true_counts(df, domain)
    assert dict(zip(domain.ids.tolist(), counts[:, 0].tolist())) == {"07": 0, "1": 1, "42": 2, "sku-1": 0}
    assert diagnostics["rows_outside_item_domain"] == 2  # 7 is "7", not "07"; 100 is not listed


def test_a_double_item_column_is_refused_against_a_string_domain(spark):
    df = _records(spark, [1.0, 2.0], [1, 2], "double")
    with pytest.raises(DataError, match="string or integer ids"):
        validate_records(df, item_domain({"ids": ["1", "2"]}), None)


def test_a_null_item_id_against_a_string_domain_is_dropped_or_in_strict_mode_an_error(spark):
    df = _records(spark, ["a", None, "b"], [1, 2, 3], "string")
    validated = validate_records(df, item_domain({"ids": ["a", "b"]}), None)
    assert validated.diagnostics["rows_invalid_item_id"] == 1
    assert sorted(validated.records.toPandas()["item_id"]) == ["a", "b"]
    validated.release()
    with pytest.raises(DataError, match="item_id has null values"):
        validate_records(df, item_domain({"ids": ["a", "b"]}), None, strict=True)


def test_edge_counts_over_string_items_and_attributes(spark):
    df = _records(spark, ["b", "a", "b", "b", "c"], [1, 1, 2, 3, 3], "string", ["x", "y", "y", "y", "x"])
    domain, attributes = item_domain({"ids": ["a", "b"]}), AttributeDomain(("x", "y"))
    counts, _diagnostics = _true_counts(df, domain, attributes)
    assert counts.tolist() == [[0, 1], [1, 2]]


# --- Releases (spark) ------------------------------------------------------------------------

N_ITEMS = 40
WEEKDAYS = ["Mon", "Tue", "Wed"]
SMALL = {"refuse_noise_only": False}  # 60 users over 120 cells: released anyway (docs/privacy.md)


@pytest.fixture(scope="module")
def ratings() -> pd.DataFrame:
    """Skewed ratings: 60 users with 1 to 30 records over 40 items, some items never rated."""
    rng = np.random.default_rng(3)
    users, items, days = [], [], []
    for user in range(60):
        n = int(rng.integers(1, 31))
        users += [user] * n
        items += rng.zipf(1.6, n).clip(1, N_ITEMS - 5).tolist()
        days += rng.choice(WEEKDAYS, n).tolist()
    return pd.DataFrame({"user_id": users, "item_id": items, "weekday": days})


def _relabelled(ratings: pd.DataFrame) -> pd.DataFrame:
    return ratings.assign(item_id=ratings["item_id"].map(sku))


def _as_int_ids(table: pd.DataFrame) -> pd.DataFrame:
    """A string release's table with "sku-k" turned back into k, to compare with the integer release."""
    assert all(isinstance(v, str) for v in table["item_id"])
    return table.assign(item_id=table["item_id"].str.removeprefix("sku-").astype("int64"))


# A row's sampling key hashes its content, item id included, so relabelling the items draws
# another sample; with bounds of at least every user's 30 records nothing is sampled out, and the
# releases must agree to the last count.
@pytest.mark.parametrize("algorithm, options", [("sra", {"l": 30}), ("hpa", {"l": 30, "d": 1}),
                                                ("hpa", {"l": 30, "d": 30}), ("lpa", {"m": 30})])
def test_a_string_release_is_the_integer_release_relabelled(spark, ratings, algorithm, options):
    release = getattr(dp_spark, algorithm)
    common = dict(attribute="weekday", attributes=WEEKDAYS, epsilon=2, seed=SEED, guards=SMALL, **options)
    by_int = release(spark.createDataFrame(ratings), items=range(1, N_ITEMS + 1), **common)
    by_str = release(spark.createDataFrame(_relabelled(ratings)), items=[sku(k) for k in range(1, N_ITEMS + 1)],
                     **common)
    assert set(by_int.tables) == set(by_str.tables) == {"item_counts", "edge_counts"}
    for name, table in by_int.tables.items():
        pd.testing.assert_frame_equal(_as_int_ids(by_str.tables[name]), table, check_dtype=False)
    # The noise hides nothing here: the true counts of both agree as well.
    assert by_str.diagnostics["rows_read"] == len(ratings)


def test_hpa_joins_its_scores_on_string_ids(spark, ratings, monkeypatch):
    """The broadcast join of with_item_values, on a domain larger than the literal's limit."""
    from dp_spark.release import hpa_selection
    monkeypatch.setattr(hpa_selection, "LITERAL_LOOKUP_MAX_ITEMS", 3)
    common = dict(l=30, d=30, epsilon=1, seed=SEED, guards=SMALL)  # no user sampled out (see above)
    by_int = dp_spark.hpa(spark.createDataFrame(ratings), items=list(range(1, N_ITEMS + 1)), **common)
    by_str = dp_spark.hpa(spark.createDataFrame(_relabelled(ratings)),
                          items={"ids": [sku(k) for k in range(1, N_ITEMS + 1)]}, **common)
    pd.testing.assert_frame_equal(_as_int_ids(by_str.tables["item_counts"]), by_int.tables["item_counts"],
                                  check_dtype=False)


def test_an_integer_item_column_against_a_string_domain_releases_by_decimal_form(spark, ratings):
    common = dict(l=5, epsilon=2, seed=SEED, guards=SMALL)
    by_int = dp_spark.sra(spark.createDataFrame(ratings), items=range(1, N_ITEMS + 1), **common)
    # The same items written as strings sort differently ("10" < "2"), so compare by id.
    by_str = dp_spark.sra(spark.createDataFrame(ratings), items=[str(k) for k in range(1, N_ITEMS + 1)], **common)
    assert by_str.tables["item_counts"]["item_id"].tolist() == sorted(str(k) for k in range(1, N_ITEMS + 1))
    assert by_str.diagnostics["rows_outside_item_domain"] == 0
    # The noise is drawn in domain order, so only the true counts can be compared: with a huge
    # epsilon the discrete Laplace noise is zero.
    exact = dict(l=5, epsilon=10**9, seed=SEED)
    by_int = dp_spark.sra(spark.createDataFrame(ratings), items=range(1, N_ITEMS + 1), **exact).tables["item_counts"]
    by_str = dp_spark.sra(spark.createDataFrame(ratings), items=[str(k) for k in range(1, N_ITEMS + 1)],
                          **exact).tables["item_counts"]
    assert dict(zip(by_str["item_id"], by_str["noisy_count"])) == \
        {str(k): c for k, c in zip(by_int["item_id"], by_int["noisy_count"])}
    assert by_int["noisy_count"].sum() > 0


def test_a_string_table_column_is_a_string_domain(spark):
    spark.createDataFrame(pd.DataFrame({"sku": ["b", "a", "b"]})).createOrReplaceTempView("string_catalogue")
    spark.createDataFrame(pd.DataFrame({"sku": ["2", "10"]})).createOrReplaceTempView("digit_catalogue")
    domain = item_domain({"table": "string_catalogue", "column": "sku"}, spark)
    assert domain.is_string and domain.ids.tolist() == ["a", "b"]
    # A string column whose every value is an integer reads as integers, as it always has.
    domain = item_domain({"table": "digit_catalogue", "column": "sku"}, spark)
    assert domain.ids.dtype == np.int64 and domain.ids.tolist() == [2, 10]


def test_a_job_with_a_string_domain_equals_the_api_call(spark, ratings, tmp_path):
    source, out = tmp_path / "ratings.parquet", tmp_path / "out"
    _relabelled(ratings).to_parquet(source)
    ids = [sku(k) for k in range(1, N_ITEMS + 1)]
    config = tmp_path / "job.toml"
    config.write_text(f"""output = "{out}"
seed = {SEED}
[source]
format = "parquet"
path = "{source}"
columns = {{ attr = "weekday" }}
[domain]
items = {{ ids = {json.dumps(ids)} }}
attributes = {json.dumps(WEEKDAYS)}
[privacy]
epsilon = 1.0
[algorithm]
name = "hpa"
l = 5
[guards]
refuse_noise_only = false
""")
    assert main(["run", str(config)]) == 0
    job = pd.read_parquet(out / "item_counts")
    assert job["item_id"].map(type).eq(str).all()
    api = dp_spark.hpa(spark.read.parquet(str(source)), items=ids, attribute="weekday", attributes=WEEKDAYS, l=5,
                       epsilon=1, seed=SEED, guards=SMALL).tables["item_counts"]
    pd.testing.assert_frame_equal(job.sort_values("item_id").reset_index(drop=True), api, check_dtype=False)
    report = json.loads((out / "privacy.json").read_text())
    assert "list of 40 ids" in json.dumps(report)


def test_item_domain_of_ids_keeps_strings_in_an_object_array():
    domain = item_domain_of_ids(np.array(["b", "a"]), "two ids")
    assert domain.ids.dtype == object and domain.ids.tolist() == ["a", "b"]


@pytest.mark.parametrize("algorithm, options", [
    ("dpsense", {"theta_max": 8, "limit": "normalize"}),
    ("user_histogram", {"quantity": "records", "bins": [1, 5, 10, 20]}),
])
def test_the_other_item_families_take_string_ids_too(spark, ratings, algorithm, options):
    """DPSense's normalised column counts and the user histogram's item filter: the string release
    is the integer release relabelled. (DPSense's ``limit = "sample"`` hashes the item id, so its
    sample differs between the two; it is not compared.)"""
    release = getattr(dp_spark, algorithm)
    subset = range(1, N_ITEMS - 10)  # some records fall outside, so the filter is exercised
    by_int = release(spark.createDataFrame(ratings), items=list(subset), epsilon=2, seed=SEED, **options)
    by_str = release(spark.createDataFrame(_relabelled(ratings)), items=[sku(k) for k in subset], epsilon=2,
                     seed=SEED, **options)
    for name, table in by_int.tables.items():
        other = by_str.tables[name]
        pd.testing.assert_frame_equal(_as_int_ids(other) if "item_id" in other else other, table, check_dtype=False)
    assert by_str.diagnostics["rows_outside_item_domain"] > 0


def test_a_string_location_set_is_refused_by_location_entropy(spark):
    """Location ids stay integers: a string set is refused, not compared with a long column."""
    df = spark.createDataFrame(pd.DataFrame({"user_id": [1, 2], "location_id": [1, 2]}))
    with pytest.raises(ConfigError, match="location ids must be integers"):
        dp_spark.location_entropy(df, locations=["a", "b"], epsilon=1, location_choice="random", seed=SEED)


def test_a_file_of_integer_looking_ids_that_are_not_canonical_is_read_as_strings(tmp_path):
    # int() would read "007" and "7" as one id (and "1_000" as 1000): a review's finding.
    from dp_spark.core.domain import item_domain
    path = tmp_path / "ids.txt"
    path.write_text("007\n7\n1_000\n")
    domain = item_domain({"file": str(path)})
    assert sorted(domain.ids.tolist()) == ["007", "1_000", "7"]
    path.write_text("7\n-3\n0\n")
    assert sorted(item_domain({"file": str(path)}).ids.tolist()) == [-3, 0, 7]
