"""No secret in any Spark plan or event log: every family released unseeded, in a new
process whose event log is on and uncompressed, and every salt and noise key the run drew is
searched for there, in every form Spark could print it (hex, decimal, base64). The event log holds
each query's physical plan, as explain() prints it, and the SQL tab's details.

Negative control: the same search finds a salt that a plan holds as a literal, the way the
sampling key once held it."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs in the child: records every fresh salt (secrets.randbits) and noise secret (os.urandom of
# NoiseSecret.fresh), runs the releases, prints the secrets as JSON on its last line.
CHILD = r'''
import json, os, secrets, sys
import numpy as np, pandas as pd
from pyspark.sql import SparkSession
drawn = {"salts": [], "keys": []}
real_randbits = secrets.randbits
def recorded_randbits(k):
    value = real_randbits(k)
    drawn["salts"].append(value)
    return value
secrets.randbits = recorded_randbits
from dp_spark.core import vector_noise
real_fresh = vector_noise.NoiseSecret.fresh.__func__
def recorded_fresh(cls):
    secret = real_fresh(cls)
    drawn["keys"].append(secret.key.hex())
    return secret
vector_noise.NoiseSecret.fresh = classmethod(recorded_fresh)
import dp_spark
# Eight shuffle partitions, as dp-spark's own sessions take on two local cores (io/session.py), not
# Spark's 200: adaptive execution does not coalesce the partitions of a cached table (DPSense caches
# its rows), and those 200-task stages took a third of the child's CPU. The plans differ only in
# that number; no salt or key depends on it.
spark = (SparkSession.builder.master("local[2]").config("spark.eventLog.enabled", "true")
         .config("spark.eventLog.dir", sys.argv[1]).config("spark.eventLog.compress", "false")
         .config("spark.eventLog.rolling.enabled", "false").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "8").getOrCreate())
rng = np.random.default_rng(1)
rows = pd.DataFrame({"user_id": rng.integers(1, 60, 900), "item_id": rng.integers(1, 30, 900),
                     "day": rng.choice(["a", "b"], 900)})
df = spark.createDataFrame(rows)
items = range(1, 30)
edges = dict(attribute="day", attributes=["a", "b"])
off = dict(guards={"refuse_noise_only": False})  # 60 users: released anyway
dp_spark.sra(df, items=items, l=3, epsilon=1.0, **edges, **off)
dp_spark.sra(df, items=items, l=3, epsilon=1.0, executor_noise_cells=1, **off)
dp_spark.sra(df, items="private", delta=1e-6, l=3, epsilon=1.0, **off)
dp_spark.hpa(df, items=items, l=3, d=1, epsilon=1.0, **edges, **off)
dp_spark.hpa(df, items=items, l=3, d=2, epsilon=1.0, **off)
dp_spark.gs(df, items=items, m=3, epsilon=1.0, **off)
dp_spark.dpsense(df, items=items, epsilon=1.0, theta_max=4, limit="sample", **off)
dp_spark.user_histogram(df, quantity="records", bins=[1, 5, 10, 20], epsilon=1.0, **off)
dp_spark.location_entropy(df, locations=items, epsilon=1.0, M=2, C=2, location="item_id",
                          location_choice="random", **off)
dp_spark.frapp(df, attributes=[{"column": "day", "values": ["a", "b"]}], epsilon=1.0, privacy_unit="user_id",
               records_per_user=2, sup_min=0.1, **off)
spark.stop()
print(json.dumps(drawn))
'''


def forms_of_salt(salt: int) -> list[str]:
    raw = salt.to_bytes(8, "big")
    return [raw.hex(), str(salt), base64.b64encode(raw).decode().rstrip("=")]


def found_in(text: str, drawn: dict) -> list[str]:
    lowered = text.lower()
    hits = [form for salt in drawn["salts"] for form in forms_of_salt(salt) if form.lower() in lowered]
    hits += [key for key in drawn["keys"] if key in lowered or key[:16] in lowered]
    return hits


def event_log_text(directory: Path) -> str:
    return "\n".join(path.read_text(errors="replace") for path in directory.rglob("*") if path.is_file())


@pytest.mark.system
def test_no_salt_or_noise_key_appears_in_any_plan_or_event_log(tmp_path):
    logs = tmp_path / "events"
    logs.mkdir()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", CHILD, f"file://{logs}"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    drawn = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(drawn["salts"]) >= 8 and drawn["keys"], drawn  # every keyed path ran, and the executors' noise
    text = event_log_text(logs)
    assert "SparkListenerSQLExecutionStart" in text and "xxhash64" in text  # the plans are there to search
    assert found_in(text, drawn) == []


@pytest.mark.spark
def test_the_search_finds_a_salt_written_into_a_plan_as_a_literal(spark):
    """Negative control: a salt passed as a literal, as the sampling key once did, is
    in the plan's text in one of the forms searched for."""
    from pyspark.sql import functions as F

    salt = 0x5DEECE66D1234567
    df = spark.range(3).select(F.xxhash64(F.lit(salt.to_bytes(8, "big")), "id").alias("h"))
    plan = df._jdf.queryExecution().toString()
    assert found_in(plan, {"salts": [salt], "keys": []})
    # and through the one-row table that replaced it, the plan shows a column, not the value
    from dp_spark.bounding import keys

    salted = keys.with_salt(spark.range(3), salt).select(F.xxhash64(F.col(keys.SALT), "id").alias("h"))
    assert found_in(salted._jdf.queryExecution().toString(), {"salts": [salt], "keys": []}) == []
    assert salted.count() == 3
