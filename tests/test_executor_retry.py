"""A task that Spark retries draws the same noise: a release on the executors with the first attempt
of some tasks failing on purpose writes exactly what a run without failures writes.

Local mode retries a task only when the master says so (local[N, maxFailures]), which a running
test session cannot change: the release runs in a new process (system tier)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from tests.conftest import ROOT

SCRIPT = textwrap.dedent('''
    import sys
    from fractions import Fraction
    from pathlib import Path

    import pandas as pd
    from pyspark import TaskContext

    from dp_spark.core.domain import attribute_domain, item_domain
    from dp_spark.core.ledger import Budget
    from dp_spark.core.vector_noise import NoiseSecret
    from dp_spark.io.session import get_session
    from dp_spark.publishers import executor_laplace

    folder = Path(sys.argv[1])
    spark = get_session("local[2,3]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "5"})
    grid = executor_laplace.CellGrid(item_domain({"range": [1, 30_000]}), attribute_domain(["x", "y"]),
                                     chunk_cells=7_000)
    tally = spark.createDataFrame(pd.DataFrame({"_cell": range(0, 60_000, 13), "_count": 1}))

    def release(name, fail):
        """The same seeded release, written to folder/name; with ``fail``, first attempts fail."""
        marks = folder / f"marks-{name}"
        marks.mkdir()
        budget = Budget(1, fixed_seed=True)  # the secret comes from a seed, and the budget must say so
        table, _ = executor_laplace.publish(tally, grid, 1, Fraction(1), budget, NoiseSecret.from_seed(8),
                                            "edge_counts")

        def first_attempts_fail(batches):
            # After the noise of this task's chunks is drawn: the retry draws it again.
            context = TaskContext.get()
            for batch in batches:
                if fail and context.attemptNumber() == 0 and context.partitionId() % 2 == 0:
                    (marks / f"failed-{context.partitionId()}").write_text("")
                    raise RuntimeError("injected failure of a first attempt")
                yield batch

        table.mapInPandas(first_attempts_fail, table.schema).write.parquet(str(folder / name))

    release("clean", fail=False)
    release("retried", fail=True)
    spark.stop()
''')


def _releases(tmp_path) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """The clean and the retried release, made in one new process; each table and its failure marks."""
    script = tmp_path / "release.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: (pd.read_parquet(tmp_path / name).sort_values(["item_id", "attr"]).reset_index(drop=True),
                   sorted(p.name for p in (tmp_path / f"marks-{name}").iterdir())) for name in ("clean", "retried")}


@pytest.mark.slow
def test_a_retried_task_writes_the_same_noise(tmp_path):
    releases = _releases(tmp_path)
    (clean, no_failures), (retried, failures) = releases["clean"], releases["retried"]
    assert no_failures == [] and failures, "no task failed: the test would prove nothing"
    assert len(clean) == 60_000
    pd.testing.assert_frame_equal(retried, clean)
