"""dp-spark bench: the records it writes, from a tiny generated table."""

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from dp_spark.errors import ConfigError
from dp_spark.io import datasets
from dp_spark.lab import bench, bench_probes
from tests.conftest import ROOT


def test_bench_scale_times_every_job_after_the_warmups(spark, tmp_path):
    """The floors alone (cheap jobs: the warm-up rounds, each record's own floor and the session
    without a UI are the same for every job); a private job's ratios to its floors are checked in
    the bench command's own run below, which times SRA."""
    data = str(tmp_path / "netflix.parquet")
    datasets.generate_netflix(5000, data, progress=lambda _message: None)
    messages = []
    records = bench.bench_scale(spark, data, 5000, ["floor"], 2, messages.append, warmups=2)
    order = ["floor", "floor_item", "floor_user"]
    assert [r["job"] for r in records] == order
    assert [m for m in messages if "warm-up" in m] == [*(f"  warm-up {job}" for job in order),
                                                      *(f"  warm-up 2/2 {job}" for job in order)]
    for record in records:
        assert len(record["runs_s"]) == 2 and record["warmups"] == 2
        assert record["floor"] == record["job"] and record["floor_median_s"] == record["median_s"]
        # The suite's session has no UI, so no jobs can be listed; the median run is still named.
        assert record["median_run_spark_jobs"] is None and record["median_run_in_spark_jobs_s"] is None
        assert record["median_run_s"] == sorted(record["runs_s"])[0]


def test_bench_refuses_no_warmup(tmp_path):
    with pytest.raises(ConfigError, match="--warmups"):
        bench.run([1000], ["floor"], str(tmp_path), 1, str(tmp_path), "local[2]", print, warmups=0)


def _stamp(seconds: float) -> str:
    """A time as the UI's REST API writes it."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "GMT"


def test_the_timeline_lists_the_new_finished_jobs_from_the_start_of_the_run():
    started = 1_790_000_000.0
    jobs = [
        {"jobId": 7, "submissionTime": _stamp(started + 1.5), "completionTime": _stamp(started + 1.75), "numTasks": 4},
        {"jobId": 3, "submissionTime": _stamp(started - 9), "completionTime": _stamp(started - 8), "numTasks": 1},
        {"jobId": 6, "submissionTime": _stamp(started + 0.125), "completionTime": _stamp(started + 1.0), "numTasks": 2},
        {"jobId": 8, "submissionTime": _stamp(started + 2.0), "numTasks": 2},  # still running
    ]
    assert bench_probes.job_timeline(jobs, started, seen={3}) == [
        {"start_s": 0.125, "seconds": 0.875, "tasks": 2},
        {"start_s": 1.5, "seconds": 0.25, "tasks": 4},
    ]


def test_time_in_jobs_counts_overlapping_jobs_once():
    timeline = [{"start_s": 0.0, "seconds": 1.0}, {"start_s": 0.5, "seconds": 1.0},
                {"start_s": 0.6, "seconds": 0.2}, {"start_s": 3.0, "seconds": 0.5}]
    assert bench_probes.time_in_jobs(timeline) == pytest.approx(2.0)
    assert bench_probes.time_in_jobs([]) == 0


@pytest.mark.slow
def test_the_bench_command_records_the_spark_jobs_of_the_median_run(tmp_path):
    # A session of its own, with the UI on (the suite's has none): the REST API as it really answers.
    command = [sys.executable, "-m", "dp_spark.cli", "bench", "--rows", "3000", "--jobs", "floor,sra",
               "--repeats", "3", "--warmups", "1", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    records = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert [r["job"] for r in records] == ["floor", "floor_item", "floor_user", "sra"]
    for record in records:
        jobs = record["median_run_spark_jobs"]
        assert jobs, record
        run = record["median_run_s"]
        assert run == sorted(record["runs_s"])[1]
        # Both clocks are the machine's; the API keeps milliseconds.
        for job in jobs:
            assert -0.01 <= job["start_s"] and job["start_s"] + job["seconds"] <= run + 0.01 and job["tasks"] >= 1
        assert 0 < record["median_run_in_spark_jobs_s"] <= run + 0.01
    floor, item, user, sra = records
    # SRA's floor is the edge floor; both medians are rounded to milliseconds in the record, the
    # ratios are not.
    assert sra["floor"] == "floor" and sra["floor_median_s"] == floor["median_s"]
    assert sra["ratio"] == pytest.approx(sra["median_s"] / floor["median_s"], rel=0.01)
    assert sra["ratio_to_item_floor"] == pytest.approx(sra["median_s"] / item["median_s"], rel=0.01)
    assert sra["ratio_to_two_passes"] == pytest.approx(sra["median_s"] / (item["median_s"] + user["median_s"]),
                                                       rel=0.01)
    # SRA's validation and bounding each run a scan and the aggregations after it.
    assert len(sra["median_run_spark_jobs"]) > len(floor["median_run_spark_jobs"])
    assert "s in Spark jobs" in done.stdout


def test_sra_auto_chooses_l_on_the_vouched_path_and_sra_exact_reads_a_plain_parquet():
    auto, exact = bench.job_config("sra_auto", "data.parquet"), bench.job_config("sra_exact", "data.parquet")
    assert (auto.algorithm, auto.params.auto, auto.source.format) == ("sra", True, "netflix-synthetic")
    assert (exact.params.l, exact.source.format, exact.source.distinct_records) == (10, "parquet", False)


def test_the_hpa_jobs_run_paper_000s_netflix_setting_and_d_10():
    paper, d10 = bench.job_config("hpa", "data.parquet"), bench.job_config("hpa_d10", "data.parquet")
    assert (paper.algorithm, paper.l, paper.d) == ("hpa", 10, 1)
    assert (d10.algorithm, d10.l, d10.d) == ("hpa", 10, 10)
    assert paper.attributes == d10.attributes == list(datasets.WEEKDAYS)


def test_each_job_has_its_own_floor_and_the_edge_floor_always_runs():
    assert bench.floors_for(["floor", "sra", "hpa"]) == ["floor", "floor_item", "floor_user"]
    assert bench.floors_for(["dpsense", "dpsense_s", "entropy", "frapp", "user_histogram"]) == [
        "floor", "floor_item", "floor_user", "floor_distinct", "floor_entropy", "floor_apriori", "floor_user_histogram"]
    assert set(bench.FLOOR_OF) == set(bench.JOBS) - {"floor"} and set(bench.FLOOR_OF.values()) <= set(bench.FLOORS)


def test_the_floors_compute_the_non_private_statistic(spark, tmp_path):
    import numpy as np
    import pandas as pd

    ratings = pd.DataFrame({"user_id": [1, 1, 1, 2, 2, 3], "item_id": [5, 5, 6, 5, 7, 7], "weekday": ["Mon"] * 6})
    spark.createDataFrame(ratings).write.parquet(str(tmp_path / "r.parquet"))
    assert sorted(bench.floor_distinct(spark, str(tmp_path / "r.parquet"))) == [1, 2, 2]  # items 6, 5, 7
    assert sorted(bench.floor_item(spark, str(tmp_path / "r.parquet"))) == [1, 2, 3]  # items 6, 7, 5
    assert bench.floor_user(spark, str(tmp_path / "r.parquet")).tolist() == [3]  # user 1's records, the most
    assert sorted(bench.floor_user_histogram(spark, str(tmp_path / "r.parquet"))) == [1, 1, 1]  # 3, 2, 1 records
    checkins = pd.DataFrame({"user_id": [1, 2, 2, 3], "location_id": [9, 9, 9, 4], "visits": [1, 2, 1, 5]})
    spark.createDataFrame(checkins).write.parquet(str(tmp_path / "c.parquet"))
    entropies = sorted(bench.floor_entropy(spark, str(tmp_path / "c.parquet")))
    # Location 9: user 1 one visit of 4, user 2 three; location 4: one user.
    np.testing.assert_allclose(entropies, [0.0, -(0.25 * np.log(0.25) + 0.75 * np.log(0.75))])
