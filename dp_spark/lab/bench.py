"""``dp-spark bench``: wall time of each job against its own non-private floor.

Everything a ratio compares is measured in one Spark session, with the runs
of the jobs interleaved (floor, sra, hpa, floor, sra, ...) after untimed
warm-up rounds (two by default: after one, the JVM was still getting
faster), so a slow minute on a shared machine hits every job alike. A job's
time is the product path without the write: read, check, bound, count, add
noise.

Each job is compared with the least a non-private job computing the same statistic on the same
data must do (``FLOOR_OF``), collected to the driver:

- ``floor`` (SRA, HPA): the Netflix table's item x attribute counts, a plain ``groupBy().count()``
  (also for ``sra_exact``: SRA on the same table read as a plain Parquet source, records not
  declared distinct, so identical records are numbered first; and for ``sra_auto``);
- ``floor_distinct`` (DPSense): distinct users per item;
- ``floor_user_histogram``: records per user, binned as the job bins them;
- ``floor_entropy`` (location entropy): each location's exact entropy over its users' visits,
  on synthetic check-ins (paper 004's Sparse shape) with as many rows as the Netflix table;
- ``floor_apriori`` (FRAPP): exact Apriori on the raw records, Adult's rows repeated to the
  Netflix table's row count (the bench reads ../shared/data/adult; the product never ships it).

Every record also gives its ratio to ``floor`` (``ratio_to_edge_floor``), the comparison of
the benchmarks before per-family floors; and to the honest floor of a per-user bound, which
reads no text column: ``floor_item`` (``groupBy(item).count()``, ``ratio_to_item_floor``) and
``floor_item`` plus ``floor_user`` (``groupBy(user).count()``, the two passes any per-user bound
makes at least: ``ratio_to_two_passes``). ``sra_exact`` is the path a user's own Parquet takes;
``sra_auto`` chooses l privately on the vouched path.

Peak resident memory is read from ``/proc`` (VmHWM, reset before each job
through ``clear_refs``) for the Python driver and for the JVM, which in local
mode is the Spark driver and the executors at once. Shuffle bytes, and the
Spark jobs of each job's median run (when each started, how long it took),
come from the Spark UI's REST API on the loopback address, when the UI is on:
the time of a run outside its Spark jobs is the driver's (building and
planning queries, collecting results, drawing noise).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pyspark.sql import functions as F

from dp_spark.errors import ConfigError
from dp_spark.io import datasets
from dp_spark.jobs.config import build_config
from dp_spark.lab.bench_probes import job_timeline, jvm_pid, peak_mb, reset_peak, stages, time_in_jobs, ui
from dp_spark.version import __version__

JOBS = ("floor", "sra", "sra_exact", "sra_auto", "sra_gaussian", "sra_gaussian_c1", "hpa", "hpa_d10", "dpsense",
        "dpsense_s", "user_histogram", "entropy", "frapp")
DEFAULT_JOBS = ("floor", "sra", "hpa", "hpa_d10")
FLOOR_OF = {"sra": "floor", "sra_exact": "floor", "sra_auto": "floor", "sra_gaussian": "floor",
            "sra_gaussian_c1": "floor", "hpa": "floor",
            "hpa_d10": "floor", "dpsense": "floor_distinct",
            "dpsense_s": "floor_distinct", "user_histogram": "floor_user_histogram", "entropy": "floor_entropy",
            "frapp": "floor_apriori"}
# What each job reads: the Netflix-shaped table, synthetic check-ins, or whole records (FRAPP).
DATA_OF = {"entropy": "checkins", "floor_entropy": "checkins", "frapp": "records", "floor_apriori": "records"}
HISTOGRAM_BINS = 1000
ENTROPY = {"locations": 10_000, "M": 5, "C": 5, "epsilon": 5.0}  # paper 004's defaults (conf/sparse_entropy.toml)
# FRAPP's attributes and support: conf/adult_frapp.toml's.
FRAPP_CONFIG = Path(__file__).resolve().parents[2] / "conf" / "adult_frapp.toml"


def frapp_settings() -> tuple[list[dict], float]:
    """(domain.records, algorithm.sup_min) of the shipped FRAPP config."""
    config = tomllib.loads(FRAPP_CONFIG.read_text(encoding="utf-8"))
    return config["domain"]["records"], config["algorithm"]["sup_min"]
# Paper 000's Netflix setting: l = 10, and d = min |T_k|, which is 1 on Netflix (its Table 4),
# the default d as well. hpa_d10 draws HPA's popularity sample from 10 records per user, as the
# benchmarks before the ninth round did (docs/lab/performance.md).
L = 10
D = {"hpa": 1, "hpa_d10": 10}


def job_config(job: str, data: str):
    """SRA and HPA release item and edge counts; DPSense column counts; user_histogram the
    records per user in 1,000 bins; entropy paper 004's limit at its defaults; FRAPP det_gd
    over conf/adult_frapp.toml's attributes."""
    if job == "entropy":
        return _bench_config({
            "output": "unused-by-bench", "source": {"format": "checkins-synthetic", "path": data},
            "domain": {"items": {"range": [1, ENTROPY["locations"]]}}, "privacy": {"epsilon": ENTROPY["epsilon"]},
            "algorithm": {"name": "entropy", "variant": "limit", "locations_per_user": ENTROPY["M"],
                          "visits_per_location": ENTROPY["C"]}})
    if job == "frapp":
        records, sup_min = frapp_settings()
        return _bench_config({
            "output": "unused-by-bench", "source": {"format": "parquet", "path": data},
            "domain": {"records": records}, "privacy": {"gamma": 19},
            "algorithm": {"name": "frapp", "scheme": "det_gd", "sup_min": sup_min}})
    domain = {"items": {"range": [1, datasets.NETFLIX_ITEMS]}}
    if job == "sra_exact":
        # The same table read as a plain Parquet source, whose records nobody vouched distinct:
        # the sample numbers identical records (bounding.keys.with_row_key), a shuffle of every row.
        return _bench_config({
            "output": "unused-by-bench",
            "source": {"format": "parquet", "path": data, "columns": {"attr": "weekday"}},
            "domain": {**domain, "attributes": list(datasets.WEEKDAYS)},
            "privacy": {"epsilon": 1.0}, "algorithm": {"name": "sra", "l": L}})
    privacy = {"epsilon": 1.0}
    if job in ("sra_gaussian", "sra_gaussian_c1"):
        # SRA under zCDP with discrete Gaussian noise; _c1 also keeps one record per user and
        # item, the bound that makes the Gaussian pay (a sort of each user's selected records).
        privacy = {"epsilon": 1.0, "delta": 1e-6, "noise": "gaussian"}
        algorithm = {"name": "sra", "l": L, **({"records_per_item": 1} if job.endswith("_c1") else {})}
        domain["attributes"] = list(datasets.WEEKDAYS)
    elif job in ("sra", "sra_auto", *D):
        algorithm = ({"name": "sra", "l": L} if job == "sra" else {"name": "sra", "l": "auto"} if job == "sra_auto"
                     else {"name": "hpa", "l": L, "d": D[job]})
        domain["attributes"] = list(datasets.WEEKDAYS)
    elif job == "user_histogram":
        algorithm = {"name": job, "quantity": "records", "bins": {"range": [1, HISTOGRAM_BINS]}}
    else:
        algorithm = {"name": job}
    return _bench_config({
        "output": "unused-by-bench",
        "source": {"format": "netflix-synthetic", "path": data},
        "domain": domain,
        "privacy": privacy,
        "algorithm": algorithm,
    })


def _bench_config(raw: dict):
    """A bench job's config: its release is timed, never published, so the noise-only refusal
    (release.noise_only), which would stop the small tables of a quick bench, is off."""
    return build_config({**raw, "guards": {"refuse_noise_only": False}})


def floor(spark, data: str) -> np.ndarray:
    """Non-private edge counts, the least any job must do: read two columns, count."""
    rows = spark.read.parquet(data).groupBy("item_id", "weekday").count().toPandas()
    return rows["count"].to_numpy()


def floor_item(spark, data: str) -> np.ndarray:
    """Non-private item counts: read one numeric column, count per item. With floor_user, the honest
    floor of a per-user bound (two passes: each user's count, then the items'), free of the text
    column the edge floor reads."""
    return spark.read.parquet(data).groupBy("item_id").count().toPandas()["count"].to_numpy()


def floor_user(spark, data: str) -> np.ndarray:
    """Non-private records per user, the least any per-user bound must do; summed to their largest
    on the executors, as a bound keeps its per-user counts there rather than collecting them."""
    per_user = spark.read.parquet(data).groupBy("user_id").count()
    return per_user.agg(F.max("count").alias("most")).toPandas()["most"].to_numpy()


def floor_distinct(spark, data: str) -> np.ndarray:
    """Non-private DPSense: the number of distinct users per item."""
    pairs = spark.read.parquet(data).select("user_id", "item_id").distinct()
    return pairs.groupBy("item_id").count().toPandas()["count"].to_numpy()


def floor_user_histogram(spark, data: str) -> np.ndarray:
    """Non-private user histogram: users by their number of records, the last bin open-ended."""
    per_user = spark.read.parquet(data).groupBy("user_id").count()
    binned = per_user.groupBy(F.least(F.col("count"), F.lit(HISTOGRAM_BINS)).alias("bin")).count()
    return binned.toPandas()["count"].to_numpy()


def floor_entropy(spark, data: str) -> np.ndarray:
    """Non-private location entropy: H_l = log V_l − Σ_u v_ul log v_ul / V_l over each location's
    users' visits v_ul (all of them: no bound)."""
    visits = (spark.read.parquet(data).groupBy("location_id", "user_id").agg(F.sum("visits").alias("v"))
              .groupBy("location_id").agg(F.sum("v").alias("total"), F.sum(F.col("v") * F.log("v")).alias("vlogv"))
              .toPandas())
    return np.log(visits["total"].to_numpy()) - visits["vlogv"].to_numpy() / visits["total"].to_numpy()


def floor_apriori(spark, data: str) -> dict:
    """Non-private FRAPP: exact Apriori on the raw records, over the job's attributes and support."""
    from dp_spark.families.frapp import mining as frapp_mining
    from dp_spark.families.frapp.family import attribute_spec

    records, sup_min = frapp_settings()
    specs = [attribute_spec(entry, i) for i, entry in enumerate(records)]
    table = frapp_mining.coded(spark.read.parquet(data), specs)[0]
    return frapp_mining.mine(table, frapp_mining.sizes_of([spec.attribute() for spec in specs]), None, sup_min)


FLOORS = {"floor": floor, "floor_item": floor_item, "floor_user": floor_user, "floor_distinct": floor_distinct,
          "floor_user_histogram": floor_user_histogram, "floor_entropy": floor_entropy, "floor_apriori": floor_apriori}


@dataclass
class Runs:
    seconds: list[float]
    shuffle_bytes: list[int | None]
    timelines: list[list[dict] | None]
    python_peak_mb: float | None = None
    jvm_peak_mb: float | None = None


def _timed(spark, run) -> tuple[float, int | None, list[dict] | None]:
    """The run's wall time, its shuffle bytes and its Spark jobs (:func:`job_timeline`)."""
    stages_before, jobs_before = stages(spark), ui(spark, "jobs")
    started_at = time.time()
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    stages_after, jobs_after = stages(spark), ui(spark, "jobs")
    shuffled = timeline = None
    if stages_before is not None and stages_after is not None:
        shuffled = sum(b for stage, b in stages_after.items() if stage not in stages_before)
    if jobs_before is not None and jobs_after is not None:
        timeline = job_timeline(jobs_after, started_at, {j["jobId"] for j in jobs_before})
    return seconds, shuffled, timeline


def _median_run(runs: Runs) -> int:
    """Index of the run whose time is the median (the lower middle one for an even count)."""
    ranked = sorted(range(len(runs.seconds)), key=lambda i: runs.seconds[i])
    return ranked[(len(ranked) - 1) // 2]


# Every job is also compared with these, whatever its own floor: the edge floor (ratio_to_edge_floor)
# and the two passes of a per-user bound (ratio_to_item_floor, ratio_to_two_passes).
ALWAYS = ("floor", "floor_item", "floor_user")


def floors_for(jobs: list[str]) -> list[str]:
    """The floors the jobs are compared with: ALWAYS, then each job's own, in the order the jobs
    name them."""
    needed = list(ALWAYS)
    for job in jobs:
        own = FLOOR_OF.get(job, job if job in FLOORS else None)
        if own and own not in needed:
            needed.append(own)
    return needed


def bench_scale(spark, data: str | dict[str, str], rows: int, jobs: list[str], repeats: int, progress,
                warmups: int = 2) -> list[dict]:
    """Records {job, rows, median_s, floor, floor_median_s, ratio, ...} for one scale. ``data``: the
    Netflix-shaped table, or {"netflix": …, "checkins": …, "records": …} by what the jobs read."""
    from dp_spark.jobs.runner import compute_release

    data = {"netflix": data} if isinstance(data, str) else data
    quiet = lambda _message: None  # noqa: E731
    floors = floors_for(jobs)
    runners = {name: lambda name=name: FLOORS[name](spark, data[DATA_OF.get(name, "netflix")]) for name in floors}
    for job in jobs:
        if job not in FLOORS:
            cfg = job_config(job, data[DATA_OF.get(job, "netflix")])
            runners[job] = lambda cfg=cfg: compute_release(cfg, spark, quiet)
    order = floors + [j for j in jobs if j not in FLOORS]
    runs = {job: Runs([], [], []) for job in order}
    jvm = jvm_pid(spark)
    for job in order:  # warm-up, and the peak memory of one run of each job
        progress(f"  warm-up {job}")
        reset_peak(os.getpid())
        if jvm:
            reset_peak(jvm)
        runners[job]()
        runs[job].python_peak_mb = peak_mb(os.getpid())
        runs[job].jvm_peak_mb = peak_mb(jvm) if jvm else None
    for round_ in range(2, warmups + 1):
        for job in order:
            progress(f"  warm-up {round_}/{warmups} {job}")
            runners[job]()
    for repeat in range(repeats):
        for job in order:
            seconds, shuffled, timeline = _timed(spark, runners[job])
            runs[job].seconds.append(round(seconds, 3))
            runs[job].shuffle_bytes.append(shuffled)
            runs[job].timelines.append(timeline)
            progress(f"  run {repeat + 1}/{repeats} {job}: {seconds:.2f} s")
    edge_floor = statistics.median(runs["floor"].seconds)
    item_floor = statistics.median(runs["floor_item"].seconds)
    two_passes = item_floor + statistics.median(runs["floor_user"].seconds)
    records = []
    for job in order:
        r = runs[job]
        median = statistics.median(r.seconds)
        own = FLOOR_OF.get(job, job)
        own_median = statistics.median(runs[own].seconds)
        shuffles = [s for s in r.shuffle_bytes if s is not None]
        middle = _median_run(r)
        timeline = r.timelines[middle]
        records.append({
            "job": job,
            "rows": rows,
            "median_s": round(median, 3),
            "floor": own,
            "floor_median_s": round(own_median, 3),
            "ratio": round(median / own_median, 3),
            "ratio_to_edge_floor": round(median / edge_floor, 3),
            "ratio_to_item_floor": round(median / item_floor, 3),
            "ratio_to_two_passes": round(median / two_passes, 3),
            "rows_per_s": round(rows / median),
            "driver_peak_rss_mb": (r.python_peak_mb or 0) + (r.jvm_peak_mb or 0) or None,
            "python_driver_peak_rss_mb": r.python_peak_mb,
            "jvm_peak_rss_mb": r.jvm_peak_mb,
            "shuffle_bytes": int(statistics.median(shuffles)) if shuffles else None,
            "runs_s": r.seconds,
            "warmups": warmups,
            # Where the median run's time went: inside Spark jobs, or between them (building
            # and planning queries on the driver, collecting, noise).
            "median_run_s": r.seconds[middle],
            "median_run_in_spark_jobs_s": time_in_jobs(timeline) if timeline is not None else None,
            "median_run_spark_jobs": timeline,
        })
    return records


def machine() -> dict:
    import pyspark

    return {
        "dp_spark": __version__,
        "pyspark": pyspark.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def markdown(records: list[dict]) -> str:
    lines = [
        "| job | rows | median s | its floor | floor s | ratio | ratio to edge floor | ratio to item floor "
        "| ratio to two passes | rows/s | driver peak RSS MB (Python + JVM) | shuffle MB "
        "| median run: s in Spark jobs |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        shuffle = f"{r['shuffle_bytes'] / 2**20:.1f}" if r["shuffle_bytes"] is not None else "n/a"
        rss = f"{r['driver_peak_rss_mb']:,.0f}" if r["driver_peak_rss_mb"] else "n/a"
        in_jobs = r.get("median_run_in_spark_jobs_s")
        in_jobs = f"{in_jobs:.2f} of {r['median_run_s']:.2f}" if in_jobs is not None else "n/a"
        lines.append(f"| {r['job']} | {r['rows']:,} | {r['median_s']:.2f} | {r['floor']} | {r['floor_median_s']:.2f} "
                     f"| {r['ratio']:.2f} | {r['ratio_to_edge_floor']:.2f} | {r['ratio_to_item_floor']:.2f} "
                     f"| {r['ratio_to_two_passes']:.2f} | {r['rows_per_s']:,} | {rss} | {shuffle} "
                     f"| {in_jobs} |")
    return "\n".join(lines)


def ensure_table(rows: int, data_dir: str, progress) -> str:
    path = Path(data_dir) / f"netflix-{rows}.parquet"
    if not path.exists():
        progress(f"generating {path} ({rows:,} rows)")
        datasets.generate_netflix(rows, str(path), progress=progress)
    return str(path)


# Paper 004's Sparse shape has 19.27 distinct locations per user on average (io.checkins.generate).
CHECKIN_ROWS_PER_USER = 19.27


def ensure_checkins(rows: int, data_dir: str, progress) -> str:
    """Synthetic check-ins with about ``rows`` rows (one per user and location)."""
    from dp_spark.io import checkins

    path = Path(data_dir) / f"checkins-{rows}"
    if not (path / "_stats.json").exists():
        users = max(1, round(rows / CHECKIN_ROWS_PER_USER))
        progress(f"generating {path} ({users:,} users, about {rows:,} rows)")
        checkins.generate(users, str(path), locations=ENTROPY["locations"])
    return str(path)


ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult"


def ensure_records(spark, rows: int, data_dir: str, progress) -> str:
    """Adult's people repeated (and cut) to ``rows`` records, as Parquet: FRAPP's input at scale."""
    path = Path(data_dir) / f"adult-{rows}.parquet"
    if not path.exists():
        if not ADULT.exists():
            raise ConfigError(f"the frapp bench repeats Adult's records, which are not at {ADULT}")
        progress(f"generating {path} ({rows:,} records repeated from Adult)")
        adult = datasets.load_adult(spark, str(ADULT))
        copies = -(-rows // adult.count())
        repeated = adult.crossJoin(spark.range(copies).withColumnRenamed("id", "_copy")).drop("_copy").limit(rows)
        repeated.repartition(max(1, rows // 1_000_000)).write.parquet(str(path))
    return str(path)


def run(rows_list: list[int], jobs: list[str], out: str, repeats: int, data_dir: str, master: str,
        progress, warmups: int = 2) -> list[dict]:
    """Benchmark every scale, one fresh Spark session each; write ``out``/bench.json."""
    from dp_spark.io.session import get_session

    unknown = sorted(set(jobs) - set(JOBS) - set(FLOORS))
    if unknown:
        raise ConfigError(f"unknown bench job(s) {', '.join(unknown)}; known: {', '.join(JOBS)}")
    if repeats < 1:
        raise ConfigError(f"--repeats must be >= 1, got {repeats}")
    if warmups < 1:
        raise ConfigError(f"--warmups must be >= 1 (the first one measures peak memory), got {warmups}")
    records = []
    Path(out).mkdir(parents=True, exist_ok=True)
    reads = {DATA_OF.get(name, "netflix") for name in [*jobs, *floors_for(jobs)]}
    for rows in rows_list:
        progress(f"benchmarking {', '.join(jobs)} at {rows:,} rows on {master}")
        # The UI's REST API gives the shuffle bytes and job times (synthetic data: nothing private).
        spark = get_session(master, {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "true"},
                            app_name=f"dp-spark-bench-{rows}")
        try:
            data = {"netflix": ensure_table(rows, data_dir, progress)}
            if "checkins" in reads:
                data["checkins"] = ensure_checkins(rows, data_dir, progress)
            if "records" in reads:
                data["records"] = ensure_records(spark, rows, data_dir, progress)
            records += bench_scale(spark, data, rows, jobs, repeats, progress, warmups)
        finally:
            spark.stop()
        (Path(out) / "bench.json").write_text(json.dumps(records, indent=2) + "\n")
    (Path(out) / "machine.json").write_text(json.dumps(machine(), indent=2) + "\n")
    return records
