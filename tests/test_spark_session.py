"""Session defaults: shuffle partitions sized for local mode, nothing forced on a cluster; the suite's JVM flags."""

import os

import pytest

from dp_spark.io.session import local_cores


@pytest.mark.parametrize(
    "master, cores",
    [("local", 1), ("local[2]", 2), ("local[3,4]", 3), ("local[*]", os.cpu_count()),
     ("spark://127.0.0.1:7077", None), ("yarn", None), ("k8s://https://host:443", None)],
)
def test_local_cores(master, cores):
    assert local_cores(master) == cores


def test_sessions_do_not_send_python_call_sites_with_each_column(spark):
    # PySpark's per-Column call-site tracking costs about ten JVM calls per operation.
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()


def test_the_suite_s_jvm_runs_with_the_suite_s_flags(spark):
    # The suite's time rests on these (tests/conftest.py, SUITE_JVM_FLAGS): a session started before
    # conftest set them, or a launcher that stopped reading SPARK_SUBMIT_OPTS, would lose them quietly.
    from tests.conftest import SUITE_JVM_FLAGS

    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(SUITE_JVM_FLAGS.split()) <= set(arguments), arguments
