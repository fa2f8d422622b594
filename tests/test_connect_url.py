"""Which Spark a command uses: a master, or a Spark Connect server from ``--remote``, ``--master
sc://...``, ``[spark] spark.remote`` or ``SPARK_REMOTE`` (io/session.connect_url, cli/spark_args)."""

from argparse import Namespace

import pytest

from dp_spark.cli.spark_args import master_of
from dp_spark.errors import ConfigError
from dp_spark.io.session import connect_url

URL = "sc://host:15002"


@pytest.mark.parametrize("master, conf, environ, expected", [
    (None, {}, {}, None),
    ("local[2]", {}, {}, None),
    (URL, {}, {}, URL),
    (None, {"spark.remote": URL}, {}, URL),
    (None, {}, {"SPARK_REMOTE": URL}, URL),
    (None, {"spark.remote": URL}, {"SPARK_REMOTE": "sc://other:1"}, URL),  # the job's own setting first
    (None, {}, {"SPARK_REMOTE": URL, "PYSPARK_GATEWAY_PORT": "4040"}, None),  # spark-submit's JVM is up
])
def test_the_connect_url_comes_from_the_master_the_job_or_the_environment(master, conf, environ, expected):
    assert connect_url(master, conf, environ) == expected


@pytest.mark.parametrize("conf, environ", [({"spark.remote": URL}, {}), ({}, {"SPARK_REMOTE": URL})])
def test_a_master_beside_a_connect_server_is_refused(conf, environ):
    with pytest.raises(ConfigError, match="both a Spark master .* and a Spark Connect server"):
        connect_url("local[2]", conf, environ)


def test_remote_is_handed_on_as_the_master_and_refused_beside_one():
    assert master_of(Namespace(master=None, remote=URL)) == URL
    assert master_of(Namespace(master="local[2]", remote=None)) == "local[2]"
    with pytest.raises(ConfigError, match="both given"):
        master_of(Namespace(master="local[2]", remote=URL))
    with pytest.raises(ConfigError, match="sc://host:port"):
        master_of(Namespace(master=None, remote="local[2]"))
