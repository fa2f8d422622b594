"""A job's Spark settings ([spark] and --set spark.KEY=VALUE) reach the session, or a warning
says why not."""

import warnings

import pytest

from dp_spark.cli import main
from dp_spark.io.session import SparkSettingNotApplied, get_session
from dp_spark.jobs.config import apply_overrides, build_config

CONFIG = """\
output = "{out}"
seed = 1
[source]
format = "csv"
path = "{data}"
[domain]
items = {{ range = [1, 3] }}
[privacy]
epsilon = 1.0
[algorithm]
name = "sra"
l = 2
[guards]
refuse_noise_only = false
"""


def raw_config(**extra):
    return {"output": "o", "source": {"format": "parquet", "path": "x"}, "domain": {"items": {"range": [1, 3]}},
            "privacy": {"epsilon": 1.0}, "algorithm": {"name": "sra", "l": 2}, **extra}


@pytest.mark.unit
def test_set_spark_key_is_one_dotted_spark_setting():
    raw = apply_overrides(raw_config(), ["spark.sql.shuffle.partitions=8", "spark.executor.memory=2g",
                                         "spark.sql.adaptive.enabled=false"])
    assert build_config(raw).spark == {"spark.sql.shuffle.partitions": "8", "spark.executor.memory": "2g",
                                       "spark.sql.adaptive.enabled": "false"}


@pytest.mark.unit
def test_unquoted_dotted_keys_under_spark_are_flattened():
    # [spark] with `spark.sql.shuffle.partitions = 8` (no quotes) reads as nested tables
    raw = raw_config(spark={"spark": {"sql": {"shuffle": {"partitions": 8}}}, "spark.ui.enabled": False})
    assert build_config(raw).spark == {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"}


def test_set_spark_setting_is_in_the_session_after_a_run(spark, tmp_path):
    data = tmp_path / "r.csv"
    data.write_text("user_id,item_id\n1,1\n1,2\n2,3\n")
    config = tmp_path / "job.toml"
    config.write_text(CONFIG.format(out=tmp_path / "out", data=data))
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        assert main(["run", str(config), "--set", "spark.sql.shuffle.partitions=7"]) == 0
        assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_a_start_only_setting_on_a_running_session_is_reported(spark):
    held = spark.conf.get("spark.executor.memory", None)
    wanted = "3g" if held != "3g" else "5g"
    with pytest.warns(SparkSettingNotApplied, match=f"spark.executor.memory = {wanted} not applied"):
        get_session("local[2]", {"spark.executor.memory": wanted})
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparkSettingNotApplied)  # a runtime setting takes effect: no warning
        get_session("local[2]", {"spark.sql.shuffle.partitions": spark.conf.get("spark.sql.shuffle.partitions")})
