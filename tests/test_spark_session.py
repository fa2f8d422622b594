"""Session defaults: shuffle partitions sized for local mode, nothing forced on a cluster."""

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
