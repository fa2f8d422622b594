"""A real standalone cluster (scripts/cluster.sh), the suite's one, whose nodes have a bare Python.

Its workers' python3 is a new venv without numpy, pandas or pyarrow: it plays a YARN or Kubernetes
cluster whose nodes were never set up for dp-spark. Without the package the job stops in
pre-flight, before its budget store is charged, with one line from dp-spark; with ``--package``
(scripts/package.sh builds the file) the same seeded job gives the release of local mode: SRA with
its noise drawn on the executors, whose Python work (the row keys, the noise in pandas UDFs) runs
on the packaged file. So sampling does not depend on where tasks run, and neither does the noise
drawn on the executors (noise drawn on the driver comes from the driver alone). The reference run
is local mode in the suite's own session, whose partitions are not the cluster's: the release does
not depend on those either. FRAPP's perturbation, the other family with Python on the executors
(numpy in mapInPandas), runs on the same packaged file and is not submitted here as well: one
cluster job shows the file is shipped, found and complete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.io import datasets
from tests.conftest import ROOT, SUITE_JVM_FLAGS

PORT, UI_PORT = "17177", "18180"  # away from the defaults, so a user's own cluster is left alone

# A seeded job with code on the executors: SRA with its noise drawn there. Its table below has 96
# users, too few for the default noise-only refusal (docs/privacy.md): released anyway.
SRA_ON_EXECUTORS = ("conf/netflix_sra.toml", "--set", "seed=21", "--set", "execution.executor_noise_cells=1",
                    "--set", "guards.refuse_noise_only=false")


def cluster(action: str, tmp_path, port: str = PORT, ui_port: str = UI_PORT, python=None) -> None:
    """scripts/cluster.sh start|stop, its logs under tmp_path/cluster; ``python``: the nodes' own."""
    # The suite's JVM flags (tests/conftest.py) for the master and the worker as for every JVM it starts.
    env = {"CLUSTER_PORT": port, "CLUSTER_UI_PORT": ui_port, "CLUSTER_DIR": str(tmp_path / "cluster"),
           "SPARK_DAEMON_JAVA_OPTS": SUITE_JVM_FLAGS, **({"CLUSTER_PYTHON": str(python)} if python else {})}
    done = subprocess.run([str(ROOT / "scripts" / "cluster.sh"), action], cwd=ROOT, capture_output=True,
                          text=True, timeout=180, env={**os.environ, **env})
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A venv with nothing installed, made from the interpreter this suite's venv came from."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    lacks = subprocess.run([str(python), "-c", "import numpy"], capture_output=True, text=True)
    assert lacks.returncode != 0 and "No module named 'numpy'" in lacks.stderr  # else the test proves nothing
    return python


def build_package(where) -> Path:
    """scripts/package.sh's file, built for this run into ``where`` (PACKAGE_OUT)."""
    out = where / "dp-spark-env.pex"
    done = subprocess.run([str(ROOT / "scripts" / "package.sh")], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "PACKAGE_OUT": str(out)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert out.exists() and "built" in done.stdout
    return out


def submit(conf_and_args, output, *spark_args, env=None) -> subprocess.CompletedProcess:
    conf, *job_args = conf_and_args
    # The executors the cluster starts for the job take the suite's JVM flags from it (speed, not results).
    # 5 shuffle partitions, not Spark's 200: the pre-flight check runs one task per partition, as do
    # four of the job's stages, and the two submits' 1,200 tasks took minutes on two one-core workers.
    # Still not local mode's 2, so the reference run's partitions differ from the cluster's.
    cmd = [str(ROOT / "scripts" / "submit.sh"), conf, "--driver-memory", "2g",
           "--conf", f"spark.executor.extraJavaOptions={SUITE_JVM_FLAGS}",
           "--conf", "spark.sql.shuffle.partitions=5", *spark_args,
           "--", *job_args, "--set", f"output={output}"]
    # Not the suite's PYSPARK_PYTHON (its session put the driver's venv there): a user's shell has none.
    clean = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, env={**clean, **(env or {})})


def sorted_table(path) -> pd.DataFrame:
    table = pd.read_parquet(path).astype(str)  # FRAPP's itemsets are arrays
    return table.sort_values(list(table.columns)).reset_index(drop=True)


@pytest.mark.slow
def test_a_bare_python_cluster_refuses_without_the_package_and_matches_local_mode_with_it(
        spark, tmp_path, bare_python, monkeypatch):
    netflix = tmp_path / "netflix.parquet"
    datasets.generate_netflix(20_000, str(netflix), seed=9, progress=lambda _: None)
    jobs = {"sra": (*SRA_ON_EXECUTORS, "--set", f"source.path={netflix}")}
    tables = {"sra": ("item_counts", "edge_counts")}

    def diagnostics(name: str, where: str) -> tuple[str, ...]:
        """The rows kept go to a diagnostics file."""
        return ("--diagnostics", str(tmp_path / f"{where}_{name}.json"))

    store = tmp_path / "budget.json"
    with_store = ("--set", f"budget_store.path={store}", "--set", "budget_store.dataset=netflix",
                  "--set", "budget_store.epsilon_cap=10")
    master = ("--master", f"spark://127.0.0.1:{PORT}")
    monkeypatch.chdir(ROOT)  # the configs' paths are relative to the repository, as for submit.sh
    # The package's build and the cluster's start run in the background while local mode runs: the
    # file is needed only by the last submit, the cluster only after local mode, and the three
    # overlap where one waits (on a JVM's start, the cluster's daemons, pip's index).
    with ThreadPoolExecutor(max_workers=2) as background:
        package = background.submit(build_package, tmp_path / "dist")
        started = background.submit(cluster, "start", tmp_path, port=PORT, ui_port=UI_PORT, python=bare_python)
        try:
            for name, (conf, *job_args) in jobs.items():  # the reference: local mode, in the suite's own session
                output = ("--set", f"output={tmp_path / f'local_{name}'}")
                assert main(["run", conf, *job_args, *diagnostics(name, "local"), *output]) == 0
            started.result()
            # One executor is enough to be refused; the second would start only to be stopped.
            refused = submit((*jobs["sra"], *with_store), tmp_path / "refused", *master, "--conf",
                             "spark.cores.max=1")
            package_env = {"PACKAGE_OUT": str(package.result())}
            packaged = {name: submit((*jobs[name], *diagnostics(name, "cluster")), tmp_path / f"cluster_{name}",
                                     *master, "--package", env=package_env) for name in jobs}
        finally:
            wait([started])  # a start still under way has written no pid files yet to stop
            cluster("stop", tmp_path)

    # Without the package: one line from dp-spark, no worker's traceback, nothing charged or written.
    assert refused.returncode == 2, refused.stderr[-3000:]
    said = refused.stdout + refused.stderr  # spark-submit passes the Python driver's stderr to its stdout
    errors = [line for line in said.splitlines() if line.startswith("dp-spark: error: ")]
    assert len(errors) == 1, said[-3000:]
    assert errors[0].startswith("dp-spark: error: the executors' Python does not match the driver's: no numpy, "
                                f"pandas, pyarrow in {bare_python}"), errors[0]
    assert "make package" in errors[0] and "--package" in errors[0]
    assert "Traceback" not in said
    assert not (tmp_path / "refused").exists()
    assert not store.exists() or json.loads(store.read_text())["runs"] == []

    # With it: the release of local mode, drawn on the bare nodes.
    for name in jobs:
        assert packaged[name].returncode == 0, packaged[name].stderr[-3000:]
        # submit.sh ran package.sh again: nothing had changed, so the file was not rebuilt.
        assert f"{package.result()} is up to date" in packaged[name].stderr
        for table in tables[name]:
            pd.testing.assert_frame_equal(sorted_table(tmp_path / f"cluster_{name}" / table),
                                          sorted_table(tmp_path / f"local_{name}" / table))
        report = json.loads((tmp_path / f"cluster_{name}" / "privacy.json").read_text())
        assert report["ledger"] == json.loads((tmp_path / f"local_{name}" / "privacy.json").read_text())["ledger"]
    report = json.loads((tmp_path / "cluster_sra" / "privacy.json").read_text())
    assert report["noise"].get("drawn_on") == "executors"
    kept = [json.loads((tmp_path / f"{where}_sra.json").read_text())["rows_after_bounding"]
            for where in ("local", "cluster")]
    assert kept[0] == kept[1]
    # The jobs really ran on the cluster: the master registered them and gave them executors.
    master_log = (tmp_path / "cluster" / "master.log").read_text()
    assert "Registered app dp-spark" in master_log and "Launching executor" in master_log
    # The executors really ran the packaged file, on the bare nodes' python3.11.
    stderr_logs = list((tmp_path / "cluster").glob("work*/app-*/*/stderr"))
    assert any("dp-spark-env.pex" in log.read_text() for log in stderr_logs)


# --- What submit.sh passes to spark-submit, per master (a stand-in spark-submit prints it) ---------

FAKE_SPARK_SUBMIT = """#!/bin/sh
exec "{python}" -c 'import json, os, sys; print(json.dumps({{"args": sys.argv[1:], "env": {{k: os.environ.get(k)
    for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}}}}))' "$@"
"""


@pytest.fixture(scope="module")
def fake_submit(tmp_path_factory):
    """A spark-submit that prints its arguments, beside a ``python`` (as in a venv's bin), and a
    packaged file that package.sh finds up to date (so nothing is built)."""
    where = tmp_path_factory.mktemp("fake")
    (where / "bin").mkdir()
    (where / "bin" / "spark-submit").write_text(FAKE_SPARK_SUBMIT.format(python=sys.executable))
    (where / "bin" / "python").symlink_to(sys.executable)
    (where / "bin" / "spark-submit").chmod(0o755)
    pex = where / "dist" / "dp-spark-env.pex"
    pex.parent.mkdir()
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable",
                             "--disable-pip-version-check"], capture_output=True, text=True, check=True).stdout
    pex.with_name(pex.name + ".requirements").write_text(
        "".join(line + "\n" for line in frozen.splitlines() if not line.startswith("pex==")))
    pex.write_text("stand-in")  # written last: newer than the code
    return where


def passed(fake_submit, *args) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(SPARK_SUBMIT=str(fake_submit / "bin" / "spark-submit"), PYTHON=sys.executable,
               PACKAGE_OUT=str(fake_submit / "dist" / "dp-spark-env.pex"))
    done = subprocess.run([str(ROOT / "scripts" / "submit.sh"), "conf/demo.toml", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert ("up to date" in done.stderr) == ("--package" in args)  # the stand-in file was not rebuilt
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def confs(args: list[str]) -> dict:
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")


@pytest.mark.parametrize("master, deploy, executors_python, driver_python", [
    ("yarn", "client", "./dp-spark-env.pex", "venv"),
    ("yarn", "cluster", "./dp-spark-env.pex", None),  # the driver runs the file in its container
    ("spark://host:7077", "client", "./dp-spark-env.pex", "venv"),
    ("local[2]", "client", "absolute", "venv"),       # local workers start from here
])
def test_package_ships_the_file_and_names_it_the_executors_python(fake_submit, master, deploy, executors_python,
                                                                  driver_python):
    pex = fake_submit / "dist" / "dp-spark-env.pex"
    seen, _ = passed(fake_submit, "--master", master, "--deploy-mode", deploy, "--package")
    args = seen["args"]
    assert args[args.index("--files") + 1] == str(pex)
    settings = confs(args)
    assert settings["spark.pyspark.python"] == (str(pex) if executors_python == "absolute" else executors_python)
    venv_python = str(fake_submit / "bin" / "python")
    assert settings.get("spark.pyspark.driver.python") == (venv_python if driver_python else None)
    assert seen["env"]["PYSPARK_PYTHON"] is None  # the setting decides, not the driver's environment
    assert "--package" not in args


def test_without_the_package_a_cluster_s_executors_keep_their_own_python(fake_submit):
    venv_python = str(fake_submit / "bin" / "python")
    seen, _ = passed(fake_submit, "--master", "spark://host:7077")
    assert "--files" not in seen["args"] and "spark.pyspark.python" not in confs(seen["args"])
    assert seen["env"] == {"PYSPARK_PYTHON": None, "PYSPARK_DRIVER_PYTHON": venv_python}
    seen, _ = passed(fake_submit)  # local mode: the workers run the driver's venv, as before
    assert seen["env"]["PYSPARK_PYTHON"] == venv_python


def test_kubernetes_without_an_upload_path_gets_a_note(fake_submit):
    _, said = passed(fake_submit, "--master", "k8s://https://api:443", "--package")
    assert "spark.kubernetes.file.upload.path" in said
    _, said = passed(fake_submit, "--master", "k8s://https://api:443", "--package",
                     "--conf", "spark.kubernetes.file.upload.path=s3a://b/p")
    assert "spark.kubernetes.file.upload.path" not in said
