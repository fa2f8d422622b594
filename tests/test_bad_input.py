"""Bad input: a one-line message naming the problem, exit status 2, no output.

Jobs run in-process through ``cli.main`` with the suite's SparkSession.
"""

import json
from pathlib import Path

import pandas as pd
import pytest

import dp_spark
from dp_spark.cli import main


def toml_value(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def write_config(tmp_path: Path, source: dict, **extra) -> Path:
    output = extra.pop("output", str(tmp_path / "out"))
    lines = [f'output = "{output}"', "seed = 5", "[source]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in source.items()]
    lines += ["[domain]", "items = { range = [1, 20] }", 'attributes = ["a", "b"]']
    lines += [
        "[privacy]",
        f"epsilon = {extra.pop('epsilon', 1.0)}",
        "[algorithm]",
        'name = "sra"',
        f"l = {extra.pop('l', 2)}",
    ]
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def parquet(tmp_path: Path, frame: pd.DataFrame) -> str:
    path = tmp_path / "records.parquet"
    frame.to_parquet(path)
    return str(path)


GOOD = pd.DataFrame(
    {"user_id": [1, 1, 2, 3, 3, 3], "item_id": [1, 2, 2, 3, 4, 5], "attr": ["a", "b", "a", "b", "a", "a"]}
)


def run(spark, config: Path, *overrides: str) -> int:
    """The job, with its NOT-private diagnostics written beside the config (read by diagnostics()).
    These sources hold a handful of records, too few for the default noise-only refusal
    (docs/privacy.md): released anyway, to check what a release does with bad records."""
    args = ["run", str(config), "--diagnostics", str(config.parent / "diagnostics.json"),
            "--set", "guards.refuse_noise_only=false"]
    for o in overrides:
        args += ["--set", o]
    return main(args)


def diagnostics(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "diagnostics.json").read_text())


def expect_error(spark, capsys, config, message, *overrides):
    code = run(spark, config, *overrides)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("dp-spark: error: ") and message in err[-1], err[-1]
    assert not (config.parent / "out").exists()


MALFORMED = [
    (GOOD.assign(user_id=[1, None, 2, 3, 3, 3]), "column user_id has null values", "1 of 6 rows"),
    (GOOD.assign(user_id=["1", " ", "2", "3", "3", "3"]), "column user_id has empty values", "1 of 6 rows"),
    (GOOD.assign(item_id=[1, 2, None, 3, 4, 5]), "column item_id has null values", "1 of 6 rows"),
    (GOOD.assign(item_id=["1", "2", "x7", "3", "4", "5"]), "column item_id has non-integer values", "e.g. 'x7'"),
    (GOOD.assign(item_id=[1.0, 2.0, 2.5, 3.0, 4.0, 5.0]), "column item_id has non-integer values", "e.g. '2.5'"),
    (GOOD.iloc[0:0], "the source has no records", "0 rows"),
]
MALFORMED_IDS = ["null-user", "blank-user", "null-item", "non-integer-item", "fractional-item", "empty"]
# The release test puts the cases whose ids have one type into one source, released once: its
# ids' type, and how many of its rows have an unusable user id and item id.
RELEASED_TOGETHER = [
    (["null-user", "null-item", "fractional-item"], "float64", 1, 2),
    (["blank-user", "non-integer-item"], "str", 1, 1),
    (["empty"], "int64", 0, 0),
]


def malformed_source(case_ids: list[str], id_type: str) -> pd.DataFrame:
    """The rows of the MALFORMED cases named, one after the other, with ids of ``id_type``."""
    frames = [MALFORMED[MALFORMED_IDS.index(case)][0] for case in case_ids]
    return pd.concat(frames, ignore_index=True).astype({"user_id": id_type, "item_id": id_type})


def test_a_missing_column_is_an_error(spark, capsys, tmp_path):
    frame = GOOD.rename(columns={"item_id": "movie"})
    config = write_config(tmp_path, {"format": "parquet", "path": parquet(tmp_path, frame)})
    expect_error(spark, capsys, config, "source column 'item_id' (for item_id) not found; the source has columns: "
                                        "user_id, movie, attr")


@pytest.mark.parametrize("case_ids, id_type, invalid_users, invalid_items", RELEASED_TOGETHER,
                         ids=["float-ids", "text-ids", "empty"])
def test_malformed_records_are_dropped_and_counted_for_the_operator(spark, capsys, tmp_path, case_ids, id_type,
                                                                   invalid_users, invalid_items):
    frame = malformed_source(case_ids, id_type)
    config = write_config(tmp_path, {"format": "parquet", "path": parquet(tmp_path, frame)})
    assert run(spark, config) == 0  # bad records must not decide whether the run releases
    found = diagnostics(tmp_path)
    assert (found["rows_invalid_user_id"], found["rows_invalid_item_id"]) == (invalid_users, invalid_items)
    assert found["rows_read"] == len(frame)
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    assert "conditional_on" not in report and "invalid" not in json.dumps(report)


@pytest.mark.parametrize("frame, message, detail", MALFORMED, ids=MALFORMED_IDS)
def test_strict_mode_refuses_malformed_records(spark, capsys, tmp_path, frame, message, detail):
    config = write_config(tmp_path, {"format": "parquet", "path": parquet(tmp_path, frame)})
    code = run(spark, config, "guards.strict=true")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith(f"dp-spark: error: {message}") and "guards.strict refuses" in err[-1]
    assert detail not in err[-1]  # how many and which: for the operator who asked (--diagnostics)
    assert any(line.endswith(f"NOT PRIVATE: {message}: {detail}") or detail in line for line in err[:-1]
               if "NOT PRIVATE" in line)
    assert not (tmp_path / "out").exists()


def test_misspelled_column_mapping(spark, capsys, tmp_path):
    config = write_config(tmp_path, {"format": "parquet", "path": parquet(tmp_path, GOOD)})
    expect_error(spark, capsys, config, "source column 'itme' (for item_id) not found", "source.columns.item_id=itme")


@pytest.mark.parametrize(
    "override, message",
    [
        ("privacy.epsilon=0", "privacy.epsilon must be > 0"),
        ("privacy.epsilon=-2", "privacy.epsilon must be > 0"),
        ("algorithm.l=0", "algorithm.l must be an integer >= 1"),
        ("algorithm.name=apriori", "unknown algorithm 'apriori'"),
        ("algorithm.name=frapp", "algorithm.l is not used by frapp"),
        ("privacy.epsilom=1", "unknown config key 'privacy.epsilom'"),
        ("source.path=no/such/file.parquet", "source path 'no/such/file.parquet' does not exist"),
    ],
)
def test_bad_config(spark, capsys, tmp_path, override, message):
    config = write_config(tmp_path, {"format": "parquet", "path": parquet(tmp_path, GOOD)})
    expect_error(spark, capsys, config, message, override)


def test_ids_outside_the_domain_are_dropped_and_counted(spark, capsys, tmp_path):
    frame = GOOD.assign(item_id=[1, 2, 99, 3, 4, 500], attr=["a", "b", "a", "zzz", "a", "a"])
    config = write_config(tmp_path, {"format": "parquet", "path": parquet(tmp_path, frame)})
    assert run(spark, config) == 0
    found = diagnostics(tmp_path)
    assert found["rows_outside_item_domain"] == 2
    assert found["rows_outside_attribute_domain"] == 1
    assert found["rows_after_bounding"] == 3  # (1,1,a), (1,2,b), (3,4,a); l = 2


def test_a_failed_rerun_keeps_the_previous_output(spark, capsys, tmp_path):
    config = write_config(tmp_path, {"format": "parquet", "path": parquet(tmp_path, GOOD)})
    assert run(spark, config) == 0
    before = (tmp_path / "out" / "privacy.json").read_text()
    GOOD.assign(user_id=[1, None, 2, 3, 3, 3]).to_parquet(tmp_path / "records.parquet")
    assert run(spark, config, "guards.strict=true") == 2
    assert (tmp_path / "out" / "privacy.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out")) == []


def test_a_foreign_output_directory_is_not_replaced(spark, capsys, tmp_path):
    keep = tmp_path / "precious"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    config = write_config(tmp_path, {"format": "parquet", "path": parquet(tmp_path, GOOD)}, output=str(keep))
    assert run(spark, config) == 2
    assert "refusing to replace it" in capsys.readouterr().err
    assert (keep / "notes.txt").read_text() == "mine"


def test_csv_source_with_column_mapping(spark, capsys, tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("who;what;when\n1;3;a\n2;3;b\n2;4;a\n")
    config = write_config(
        tmp_path,
        {
            "format": "csv",
            "path": str(path),
            "sep": ";",
            "columns": {"user_id": "who", "item_id": "what", "attr": "when"},
        },
    )
    assert run(spark, config) == 0
    assert diagnostics(tmp_path)["rows_read"] == 3


def test_table_source_with_a_file_domain(spark, capsys, tmp_path):
    spark.createDataFrame(GOOD).createOrReplaceTempView("ratings_view")
    ids = tmp_path / "items.txt"
    ids.write_text("# public catalogue\n2\n3\n4\n")
    config = write_config(tmp_path, {"format": "table", "table": "ratings_view"})
    assert run(spark, config, f'domain.items={{ file = "{ids}" }}') == 0
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    assert report["domain"]["item_count"] == 3
    assert diagnostics(tmp_path)["rows_outside_item_domain"] == 2  # items 1 and 5
    assert sorted(pd.read_parquet(tmp_path / "out" / "item_counts")["item_id"]) == [2, 3, 4]


def test_missing_java_says_how_to_install_it(monkeypatch, tmp_path):
    from dp_spark.errors import DpSparkError
    from dp_spark.io.session import check_java

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DpSparkError, match="Java 17 is required.*openjdk-17"):
        check_java()


EMPTY_RELEASES = {
    "sra": lambda df, off: dp_spark.sra(df, items=range(1, 6), l=2, epsilon=1, seed=1, guards=off),
    "sra_auto": lambda df, off: dp_spark.sra(df, items=range(1, 6), l="auto", epsilon=1, seed=1, guards=off),
    "hpa": lambda df, off: dp_spark.hpa(df, items=range(1, 6), l=2, epsilon=1, seed=1, guards=off),
    "lpa": lambda df, off: dp_spark.lpa(df, items=range(1, 6), m=2, epsilon=1, seed=1, guards=off),
    "dft": lambda df, off: dp_spark.dft(df, items=range(1, 6), m=2, epsilon=1, seed=1, guards=off),
    "gs": lambda df, off: dp_spark.gs(df, items=range(1, 6), m=2, epsilon=1, seed=1, guards=off),
    "sra_private_items": lambda df, off: dp_spark.sra(df, items="private", l=2, epsilon=1, delta=1e-6, seed=1,
                                                      guards=off),
    "sra_guarded": lambda df, off: dp_spark.sra(df, items=range(1, 6), l=2, epsilon=1, seed=1,
                                                guards={**off, "epsilon": 0.1, "max_dropped_fraction": 1,
                                                        "max_truncated_fraction": 1}),  # draws, never refuses
    "user_histogram": lambda df, off: dp_spark.user_histogram(df, quantity="records", bins=[1, 2, 4], epsilon=1,
                                                              seed=1, guards=off),
    "dpsense": lambda df, off: dp_spark.dpsense(df, items=range(1, 6), epsilon=1, seed=1, guards=off),
    "dpsense_s": lambda df, off: dp_spark.dpsense_s(df, items=range(1, 6), epsilon=1, seed=1, guards=off),
    "entropy": lambda df, off: dp_spark.location_entropy(df.withColumnRenamed("item_id", "location_id"),
                                                         locations=range(1, 6), M=2, C=2, epsilon=1, seed=1,
                                                         location_choice="random", guards=off),
}


@pytest.mark.parametrize("name", list(EMPTY_RELEASES))
def test_every_central_family_releases_noise_on_an_empty_source(spark, name):
    """No records is one user's neighbour of one user's records: nothing raw may refuse it (only
    guards.strict, which says so). The default noise-only refusal may, on DP figures alone
    (tests/test_noise_only.py); with it off, every family releases noise."""
    empty = spark.createDataFrame([], "user_id long, item_id long")
    release = EMPTY_RELEASES[name](empty, {"refuse_noise_only": False})
    assert release.report["epsilon_spent"] > 0 and release.tables


def test_api_arguments_of_the_wrong_kind_cost_nothing(spark):
    """A budget that is not a DatasetBudget, or no items, is a ConfigError before the
    DatasetBudget is charged or a record read."""
    df = spark.createDataFrame(GOOD[["user_id", "item_id"]])
    budget = dp_spark.DatasetBudget(epsilon=2)
    with pytest.raises(dp_spark.ConfigError, match="budget must be a dp_spark.DatasetBudget"):
        dp_spark.sra(df, items=range(1, 21), l=2, epsilon=1, budget=5.0)
    with pytest.raises(dp_spark.ConfigError, match="sra needs items"):
        dp_spark.sra(df, items=None, l=2, epsilon=1, budget=budget)
    assert budget.charges == []
