"""Location entropy keeps each user's first M locations by time: a source without a time column
is refused (its schema is public) unless algorithm.location_choice = "random" asks for a random M;
a check-in whose time is empty or does not parse counts as the latest, and guards.strict refuses
such records instead of ordering them."""

import re

import pandas as pd
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.bounding.user_locations import bounded_pairs
from dp_spark.cli import main
from dp_spark.errors import ConfigError, DataError
from dp_spark.io.checkins import standard_checkins
from dp_spark.jobs.config import build_config

# users 1 and 2 have three locations each (more than M = 2), user 3 one
ROWS = [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (2, 4), (3, 1)]


def frame(spark, times=None):
    data = pd.DataFrame(ROWS, columns=["user_id", "location_id"])
    if times is not None:
        data["ts"] = times
    return spark.createDataFrame(data)


class Diagnosed:
    """A progress with the operator's diagnostics asked for, recording them."""

    diagnostics = True

    def __init__(self, said):
        self.said = said

    def __call__(self, message):
        pass

    def diagnostic(self, message):
        self.said.append(message)


def entropy(df, **options):
    return dp_spark.location_entropy(df, locations=range(1, 5), M=2, C=3, epsilon=1, seed=3, **options)


def test_no_time_column_is_refused_whatever_the_records(spark):
    # The schema is public: the refusal does not depend on whether anyone has more than M locations.
    for records in (frame(spark), spark.createDataFrame(pd.DataFrame([(1, 1), (1, 2), (2, 3)],
                                                                     columns=["user_id", "location_id"]))):
        with pytest.raises(DataError, match=r"the source has no time column.*location_choice = \"random\""):
            entropy(records)


def test_times_that_do_not_parse_count_as_latest_or_in_strict_mode_are_refused(spark):
    times = ["2020-01-01 10:00:00", "2020-01-02", "yesterday", "17", "3.5", "later", None]
    release = entropy(frame(spark, times), time="ts")  # one bad time must not decide whether the run releases
    assert len(release["location_entropy"]) == 4
    said = []
    with pytest.raises(DataError, match=r"column ts has values that are neither numbers nor timestamps") as refused:
        entropy(frame(spark, times), time="ts", guards={"strict": True}, progress=Diagnosed(said))
    assert "yesterday" not in str(refused.value) and "later" not in str(refused.value)
    assert any(re.search(r"2 of 7 rows, e.g. '(yesterday|later)'", line) for line in said)


def test_untimed_check_ins_count_as_latest(spark):
    # User 1's location 3 has no time: kept last, so with M = 2 its locations 1 and 2 are kept.
    times = ["1", "2", None, "1", "2", "3", None]
    kept = bounded_pairs(standard_checkins(frame(spark, times).withColumnRenamed("location_id", "item_id"), "ts")
                         .withColumn("time", F.col("time").cast("double")), 2, 3).toPandas()
    assert sorted(kept.loc[kept["user_id"] == 1, "item_id"]) == [1, 2]
    assert len(entropy(frame(spark, times), time="ts")["location_entropy"]) == 4
    with pytest.raises(DataError, match=r"some users have more than M = 2 locations and check-ins without a time"):
        entropy(frame(spark, times), time="ts", guards={"strict": True})
    complete = ["1", "2", "3", "1", "2", "3", None]
    assert len(entropy(frame(spark, complete), time="ts", guards={"strict": True})["location_entropy"]) == 4


def test_random_choice_needs_no_time_and_is_reported(spark):
    release = entropy(frame(spark), location_choice="random")
    assert release.report["algorithm"]["parameters"]["location_choice"] == "random"


def test_random_choice_keeps_m_random_locations_per_user(spark):
    rows = [(user, location, None, 1) for user in range(1, 41) for location in range(1, 7)]
    checkins = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id", "time", "visits"])
                                     .astype({"time": "float64"}))
    kept = bounded_pairs(checkins, 2, 5, random_salt=11).toPandas()
    assert kept.groupby("user_id").size().eq(2).all() and len(kept) == 80
    chosen = kept.groupby("user_id")["item_id"].apply(frozenset)
    assert chosen.nunique() > 5  # not the same two for everyone, as an order by id would give
    assert set(kept["item_id"]) == set(range(1, 7))
    again = bounded_pairs(checkins, 2, 5, random_salt=11).toPandas()
    assert chosen.equals(again.groupby("user_id")["item_id"].apply(frozenset))  # a retried task keeps the same


def test_a_config_without_times_exits_2_naming_the_fix(spark, tmp_path, capsys):
    data = tmp_path / "checkins.csv"
    pd.DataFrame(ROWS, columns=["user_id", "item_id"]).to_csv(data, index=False)
    config = tmp_path / "job.toml"
    config.write_text(f'output = "{tmp_path / "out"}"\nseed = 1\n[source]\nformat = "csv"\npath = "{data}"\n'
                      '[domain]\nitems = { range = [1, 4] }\n[privacy]\nepsilon = 1.0\n'
                      '[algorithm]\nname = "entropy"\nlocations_per_user = 2\n')
    assert main(["run", str(config)]) == 2
    assert "the source has no time column" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["run", str(config), "--set", "algorithm.location_choice=random"]) == 0


@pytest.mark.unit
def test_location_choice_is_checked_and_only_for_entropy():
    raw = {"output": "o", "source": {"format": "checkins", "path": "x"}, "domain": {"items": {"range": [1, 4]}},
           "privacy": {"epsilon": 1.0}, "algorithm": {"name": "entropy", "location_choice": "random"}}
    assert build_config(raw).params.location_choice == "random"
    with pytest.raises(ConfigError, match="algorithm.location_choice must be one of first_visit, random"):
        build_config({**raw, "algorithm": {"name": "entropy", "location_choice": "by_id"}})
    with pytest.raises(ConfigError, match="algorithm.location_choice is a entropy parameter"):
        build_config({**raw, "source": {"format": "parquet", "path": "x"},
                      "algorithm": {"name": "sra", "l": 2, "location_choice": "random"}})


def test_a_checkin_file_is_tab_or_comma_separated_as_its_first_line_says(spark, tmp_path):
    from dp_spark.io.checkins import _text_checkins

    lines = [("7", "41", "2010-10-19T23:55:27Z"), ("8", "42", "2010-10-18T22:17:43Z")]
    tabs, commas = tmp_path / "tabs.txt", tmp_path / "commas.txt"
    tabs.write_text("".join("\t".join(line) + "\n" for line in lines))
    commas.write_text("".join(",".join(line) + "\n" for line in lines))
    read = {path: [tuple(row) for row in _text_checkins(spark, str(path)).collect()] for path in (tabs, commas)}
    assert read[tabs] == read[commas] == lines
    # The first line decides: a comma in a tab-separated file stays inside its field.
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("7\t41\t2010-10-19T23:55:27Z\n8,42,2010-10-18T22:17:43Z\n")
    rows = [tuple(row) for row in _text_checkins(spark, str(mixed)).collect()]
    assert rows[1][0] == "8,42,2010-10-18T22:17:43Z" and rows[1][1] is None
