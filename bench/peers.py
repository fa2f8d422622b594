"""The SRA item-count release next to the closest equivalent in a peer library.

    python bench/peers.py --pair tumult --peer-python .venv-tumult/bin/python --data T.parquet --out DIR
                          [--ours dp-spark-plain]  (dp-spark on a plain Parquet source, the default path)
    python bench/peers.py --table DIR                  (Markdown from DIR/*.json)

Each tool releases one noisy count per public item (17,770 Netflix ids) with
pure ε-DP, ε = 1, each user contributing at most l = 10 records:
dp-spark SRA (item counts only); Tumult Analytics with privacy unit user_id
(AddRowsWithID), MaxRowsPerID(l) and a count grouped by the public item keys
under a pure-DP budget; PipelineDP on its Spark RDD backend with
max_partitions_contributed = l, max_contributions_per_partition = 1, public
partitions = the item domain, Laplace noise.

The tools need different PySpark versions, so each runs in its own process
(``--serve``: a local[2] session, the warm-ups, then one timed release per
line ``run`` on stdin). ``--pair`` starts dp-spark and one peer that way and
has them take turns, alternating who goes first, so that a slow minute on a
shared machine hits both: the speed-up is a ratio of medians from one run.
Accuracy (top-10 precision, MSE) is against the true counts, computed here
without noise: NOT PRIVATE, for the benchmark only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ITEMS = np.arange(1, 17_771)
L, EPSILON = 10, 1.0


def true_counts(spark, data: str) -> np.ndarray:
    rows = spark.read.parquet(data).groupBy("item_id").count().toPandas()
    counts = np.zeros(ITEMS.size)
    counts[rows["item_id"].to_numpy() - 1] = rows["count"].to_numpy()
    return counts


def release_dp_spark(spark, data: str, source: dict | None = None) -> np.ndarray:
    from dp_spark.jobs.config import build_config
    from dp_spark.jobs.runner import compute_release

    cfg = build_config({
        "output": "unused", "source": source or {"format": "netflix-synthetic", "path": data},
        "domain": {"items": {"range": [1, 17770]}}, "privacy": {"epsilon": EPSILON},
        "algorithm": {"name": "sra", "l": L},
    })
    table = compute_release(cfg, spark, lambda _message: None).tables["item_counts"]
    return table.sort_values("item_id")["noisy_count"].to_numpy(dtype=float)


def release_dp_spark_plain(spark, data: str) -> np.ndarray:
    """The same release on the path a user's own table takes: a plain Parquet source that nobody
    vouched free of identical records, so the sample numbers them first (a shuffle of every row)."""
    return release_dp_spark(spark, data, {"format": "parquet", "path": data})


def release_pipelinedp(spark, data: str) -> np.ndarray:
    import pipeline_dp

    rdd = spark.read.parquet(data).select("user_id", "item_id").rdd.map(tuple)
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=0)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.SparkRDDBackend(spark.sparkContext))
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[pipeline_dp.Metrics.COUNT],
        max_partitions_contributed=L, max_contributions_per_partition=1,
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1], value_extractor=lambda r: 0
    )
    result = engine.aggregate(rdd, params, extractors, public_partitions=[int(i) for i in ITEMS])
    accountant.compute_budgets()
    counts = np.zeros(ITEMS.size)
    for item, metrics in result.collect():
        counts[int(item) - 1] = metrics.count
    return counts


def release_tumult(spark, data: str) -> np.ndarray:
    from tmlt.analytics import AddRowsWithID, KeySet, MaxRowsPerID, PureDPBudget, QueryBuilder, Session

    ratings = spark.read.parquet(data).select("user_id", "item_id")
    session = Session.from_dataframe(
        privacy_budget=PureDPBudget(EPSILON), source_id="ratings", dataframe=ratings,
        protected_change=AddRowsWithID(id_column="user_id"),
    )
    keys = KeySet.from_dict({"item_id": [int(i) for i in ITEMS]})
    query = QueryBuilder("ratings").enforce(MaxRowsPerID(L)).groupby(keys).count()
    rows = session.evaluate(query, PureDPBudget(EPSILON)).toPandas()
    counts = np.zeros(ITEMS.size)
    counts[rows["item_id"].to_numpy() - 1] = rows["count"].to_numpy()
    return counts


TOOLS = {"dp-spark": release_dp_spark, "dp-spark-plain": release_dp_spark_plain, "pipelinedp": release_pipelinedp,
         "tumult": release_tumult}
OURS = ("dp-spark", "dp-spark-plain")


def serve(tool: str, data: str, warmups: int) -> None:
    """Answer each ``run`` line on stdin with one timed release, as a ``RESULT {json}`` line."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(f"peers-{tool}")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "8")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    truth = true_counts(spark, data)
    release = TOOLS[tool]
    for _ in range(warmups):
        release(spark, data)
    print("READY", flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        started = time.perf_counter()
        noisy = release(spark, data)
        seconds = round(time.perf_counter() - started, 2)
        top_noisy, top_true = np.argsort(-noisy, kind="stable")[:10], np.argsort(-truth, kind="stable")[:10]
        result = {"seconds": seconds, "mse": float(np.mean((noisy - truth) ** 2)),
                  "top10": len(set(top_noisy) & set(top_true)) / 10, "rows": int(truth.sum())}
        print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


class Server:
    """A ``--serve`` process of one tool under its own interpreter."""

    def __init__(self, tool: str, python: str, data: str, warmups: int):
        self.tool = tool
        self.log = tempfile.TemporaryFile(mode="w+")
        env = {**os.environ, "PYSPARK_PYTHON": python}
        command = [python, __file__, "--serve", "--tool", tool, "--data", data, "--warmups", str(warmups)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True, env=env)

    def _line(self, prefix: str) -> str:
        for line in self.process.stdout:
            if line.startswith(prefix):
                return line[len(prefix):]
        self.log.seek(0)
        raise RuntimeError(f"{self.tool} stopped before {prefix.strip()}:\n{self.log.read()[-3000:]}")

    def ready(self) -> None:
        self._line("READY")

    def run(self) -> dict:
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        return json.loads(self._line("RESULT "))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()
        self.log.close()


def summary(results: list[dict]) -> dict:
    seconds = [r["seconds"] for r in results]
    return {"median_s": statistics.median(seconds), "runs_s": seconds,
            "top10_precision": round(statistics.mean(r["top10"] for r in results), 3),
            "item_mse": statistics.mean(r["mse"] for r in results)}


def pair(peer: str, peer_python: str, data: str, repeats: int, warmups: int, ours: str = "dp-spark") -> dict:
    """dp-spark (``ours``: the vouched path or the plain one) and ``peer`` taking turns on the same
    table; both warm up first (at the same time)."""
    servers = [Server(ours, sys.executable, data, warmups), Server(peer, peer_python, data, warmups)]
    try:
        for server in servers:
            server.ready()
        results: dict[str, list[dict]] = {ours: [], peer: []}
        for round_ in range(repeats):
            for server in servers if round_ % 2 == 0 else servers[::-1]:
                result = server.run()
                results[server.tool].append(result)
                print(f"  run {round_ + 1}/{repeats} {server.tool}: {result['seconds']:.2f} s", file=sys.stderr)
    finally:
        for server in servers:
            server.close()
    mine, theirs = summary(results[ours]), summary(results[peer])
    return {"tool": peer, "rows": results[peer][0]["rows"], **theirs, "dp_spark": mine, "dp_spark_path": ours,
            "speedup": round(theirs["median_s"] / mine["median_s"], 2), "repeats": repeats, "warmups": warmups}


def table(directory: Path) -> str:
    records = [json.loads(p.read_text()) for p in sorted(directory.glob("peer-*.json"))]
    lines = [("| peer | rows | dp-spark's path | peer s | dp-spark s (same run) | dp-spark faster by "
              "| top-10 precision (peer / dp-spark) | item MSE (peer / dp-spark) |"),
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in records:
        ours = r["dp_spark"]
        path = "plain Parquet" if r.get("dp_spark_path") == "dp-spark-plain" else "vouched distinct"
        lines.append(
            f"| {r['tool']} | {r['rows']:,} | {path} | {r['median_s']:.1f} | {ours['median_s']:.2f} "
            f"| {r['median_s'] / ours['median_s']:.1f}× "
            f"| {r['top10_precision']:.2f} / {ours['top10_precision']:.2f} "
            f"| {r['item_mse']:,.0f} / {ours['item_mse']:,.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", choices=sorted(set(TOOLS) - set(OURS)), help="the peer to run against dp-spark")
    parser.add_argument("--ours", choices=OURS, default="dp-spark",
                        help="dp-spark's path: the vouched distinct loader, or a plain Parquet source (the default)")
    parser.add_argument("--peer-python", help="the interpreter of the peer's virtual environment")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tool", choices=sorted(TOOLS), help=argparse.SUPPRESS)
    parser.add_argument("--data")
    parser.add_argument("--out", default="bench/results/peers")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--table", help="print the Markdown table of the results in this directory")
    args = parser.parse_args()
    if args.table:
        print(table(Path(args.table)))
        return
    if args.serve:
        serve(args.tool, args.data, args.warmups)
        return
    if not (args.pair and args.peer_python and args.data):
        parser.error("--pair, --peer-python and --data are required unless --table is given")
    if args.repeats < 1 or args.warmups < 0:
        parser.error("--repeats must be >= 1 and --warmups >= 0")
    record = pair(args.pair, args.peer_python, args.data, args.repeats, args.warmups, args.ours)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "-plain" if args.ours == "dp-spark-plain" else ""
    (out / f"peer-{args.pair}-{record['rows']}{suffix}.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
