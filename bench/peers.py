"""The SRA item-count release next to the closest equivalent in a peer library.

    python bench/peers.py --tool dp-spark   --data T.parquet --out DIR   (our venv)
    python bench/peers.py --tool pipelinedp --data T.parquet --out DIR   (a venv with pipeline-dp)
    python bench/peers.py --tool tumult     --data T.parquet --out DIR   (a venv with tmlt.analytics)
    python bench/peers.py --table DIR                                    (Markdown from DIR/*.json)

Each tool releases one noisy count per public item (17,770 Netflix ids) with
pure ε-DP, ε = 1, each user contributing at most l = 10 records:
dp-spark SRA (item counts only); Tumult Analytics with privacy unit user_id
(AddRowsWithID), MaxRowsPerID(l) and a count grouped by the public item keys
under a pure-DP budget; PipelineDP on its Spark RDD backend with
max_partitions_contributed = l, max_contributions_per_partition = 1, public
partitions = the item domain, Laplace noise. Time is wall time of the release
after one warm-up, median of --repeats runs, local[2]. Accuracy (top-10
precision, MSE) is against the true counts, computed here without noise:
NOT PRIVATE, for the benchmark only.
"""

from __future__ import annotations

import argparse
import json
import statistics
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


def release_dp_spark(spark, data: str) -> np.ndarray:
    from dp_spark.config import build_config
    from dp_spark.jobs import compute_release

    cfg = build_config({
        "output": "unused", "source": {"format": "netflix-synthetic", "path": data},
        "domain": {"items": {"range": [1, 17770]}}, "privacy": {"epsilon": EPSILON},
        "algorithm": {"name": "sra", "l": L},
    })
    table = compute_release(cfg, spark, lambda _message: None).tables["item_counts"]
    return table.sort_values("item_id")["noisy_count"].to_numpy(dtype=float)


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


TOOLS = {"dp-spark": release_dp_spark, "pipelinedp": release_pipelinedp, "tumult": release_tumult}


def measure(tool: str, data: str, repeats: int) -> dict:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(f"peers-{tool}")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "8")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    truth = true_counts(spark, data)
    release = TOOLS[tool]
    release(spark, data)  # warm-up
    seconds, mse, top10 = [], [], []
    for _ in range(repeats):
        started = time.perf_counter()
        noisy = release(spark, data)
        seconds.append(round(time.perf_counter() - started, 2))
        mse.append(float(np.mean((noisy - truth) ** 2)))
        top_noisy, top_true = np.argsort(-noisy, kind="stable")[:10], np.argsort(-truth, kind="stable")[:10]
        top10.append(len(set(top_noisy) & set(top_true)) / 10)
    rows = int(truth.sum())
    spark.stop()
    return {"tool": tool, "rows": rows, "median_s": statistics.median(seconds), "runs_s": seconds,
            "top10_precision": statistics.mean(top10), "item_mse": statistics.mean(mse), "repeats": repeats}


def table(directory: Path) -> str:
    records = [json.loads(p.read_text()) for p in sorted(directory.glob("peer-*.json"))]
    ours = {r["rows"]: r["median_s"] for r in records if r["tool"] == "dp-spark"}
    lines = ["| tool | rows | median s | dp-spark s / tool s | top-10 precision | item MSE |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in records:
        ratio = f"{ours[r['rows']] / r['median_s']:.3f}" if r["rows"] in ours else "n/a"
        lines.append(f"| {r['tool']} | {r['rows']:,} | {r['median_s']:.1f} | {ratio} | "
                     f"{r['top10_precision']:.2f} | {r['item_mse']:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", choices=sorted(TOOLS))
    parser.add_argument("--data")
    parser.add_argument("--out", default="bench/results/peers")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--table", help="print the Markdown table of the results in this directory")
    args = parser.parse_args()
    if args.table:
        print(table(Path(args.table)))
        return
    if not (args.tool and args.data):
        parser.error("--tool and --data are required unless --table is given")
    record = measure(args.tool, args.data, args.repeats)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"peer-{args.tool}-{record['rows']}.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
