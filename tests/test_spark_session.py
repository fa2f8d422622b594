"""Session defaults: shuffle partitions sized for local mode, nothing forced on a cluster."""

import os

import pytest

from dp_spark.spark import local_cores


@pytest.mark.parametrize(
    "master, cores",
    [("local", 1), ("local[2]", 2), ("local[3,4]", 3), ("local[*]", os.cpu_count()),
     ("spark://127.0.0.1:7077", None), ("yarn", None), ("k8s://https://host:443", None)],
)
def test_local_cores(master, cores):
    assert local_cores(master) == cores
