"""A real standalone cluster (scripts/cluster.sh): the same seed gives the same
release as local mode, so sampling does not depend on where tasks run, and neither does the
noise drawn on the executors."""

import json
import os
import subprocess

import pandas as pd
import pytest

from dp_spark.io import datasets
from tests.conftest import ROOT
from tests.test_end_to_end import read_output, submit

PORT, UI_PORT = "17077", "18080"  # away from the defaults, so a user's own cluster is left alone


def cluster(action: str, tmp_path, port: str = PORT, ui_port: str = UI_PORT, python=None) -> None:
    """scripts/cluster.sh start|stop, its logs under tmp_path/cluster; ``python``: the nodes' own."""
    env = {"CLUSTER_PORT": port, "CLUSTER_UI_PORT": ui_port, "CLUSTER_DIR": str(tmp_path / "cluster"),
           **({"CLUSTER_PYTHON": str(python)} if python else {})}
    done = subprocess.run([str(ROOT / "scripts" / "cluster.sh"), action], cwd=ROOT, capture_output=True,
                          text=True, timeout=180, env={**os.environ, **env})
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_cluster_output_equals_local_output_for_the_same_seed(tmp_path):
    data = tmp_path / "netflix.parquet"
    datasets.generate_netflix(40_000, str(data), seed=9, progress=lambda _: None)
    common = ["--set", f"source.path={data}", "--set", "seed=21"]
    # Noise drawn on the driver (the default at this size), and on the executors.
    where = {"driver": [], "executors": ["--set", "execution.executor_noise_cells=1"]}
    for name, settings in where.items():
        submit("conf/netflix_sra.toml", "--set", f"output={tmp_path / ('local_' + name)}", *common, *settings,
               "--diagnostics", str(tmp_path / f"local_{name}.json"))
    cluster("start", tmp_path)
    try:
        for name, settings in where.items():
            submit("conf/netflix_sra.toml", "--set", f"output={tmp_path / ('cluster_' + name)}", *common, *settings,
                   "--diagnostics", str(tmp_path / f"cluster_{name}.json"),
                   spark_args=("--master", f"spark://127.0.0.1:{PORT}"))
    finally:
        cluster("stop", tmp_path)
    # The job really ran on the cluster: the master registered it and gave it executors.
    master_log = (tmp_path / "cluster" / "master.log").read_text()
    assert "Registered app dp-spark" in master_log and "Launching executor" in master_log
    by_key = lambda df: df.sort_values(list(df.columns[:-1])).reset_index(drop=True)  # noqa: E731
    for name in where:
        local_report, local_items, local_edges = read_output(tmp_path / f"local_{name}")
        report, items, edges = read_output(tmp_path / f"cluster_{name}")
        assert (report["noise"].get("drawn_on") == "executors") == (name == "executors")
        pd.testing.assert_frame_equal(by_key(items), by_key(local_items))
        pd.testing.assert_frame_equal(by_key(edges), by_key(local_edges))
        assert report["ledger"] == local_report["ledger"]
        kept = [json.loads((tmp_path / f"{where}_{name}.json").read_text())["rows_after_bounding"]
                for where in ("local", "cluster")]
        assert kept[0] == kept[1]
