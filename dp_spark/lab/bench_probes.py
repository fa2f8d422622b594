"""``dp-spark bench``'s probes: peak resident memory from Linux ``/proc`` (VmHWM, reset through
``clear_refs``), and shuffle bytes and Spark jobs from the Spark UI's REST API on the loopback
address; None where unavailable (another OS, no UI, Spark Connect)."""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
from pathlib import Path

from dp_spark.io.session import is_connect


def reset_peak(pid: int) -> None:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def peak_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def jvm_pid(spark) -> int | None:
    if is_connect(spark):  # the JVM is the Connect server's, out of this client's reach
        return None
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return getattr(proc, "pid", None)


def ui(spark, what: str) -> list[dict] | None:
    """This application's ``what`` (stages, jobs) from the UI's REST API; None without the UI
    (or on Spark Connect, whose client has no SparkContext to find it)."""
    if is_connect(spark):
        return None
    url = spark.sparkContext.uiWebUrl
    if not url:
        return None
    app = spark.sparkContext.applicationId
    try:
        with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/{what}", timeout=10) as response:
            return json.load(response)
    except OSError:
        return None


def stages(spark) -> dict[int, int] | None:
    """Shuffle bytes written, by stage id."""
    listed = ui(spark, "stages")
    return None if listed is None else {s["stageId"]: s.get("shuffleWriteBytes", 0) for s in listed}


def ui_time(stamp: str) -> float:
    """Seconds since the epoch from the REST API's ``2026-11-24T07:01:02.345GMT``."""
    parsed = dt.datetime.strptime(stamp.removesuffix("GMT"), "%Y-%m-%dT%H:%M:%S.%f")
    return parsed.replace(tzinfo=dt.UTC).timestamp()


def job_timeline(jobs: list[dict], started: float, seen: set[int]) -> list[dict]:
    """The Spark jobs of ``jobs`` (REST API records) not in ``seen``, in order of submission:
    {start_s, seconds, tasks}, start_s counted from ``started`` (seconds since the epoch)."""
    timeline = []
    for job in sorted((j for j in jobs if j["jobId"] not in seen and "completionTime" in j),
                      key=lambda j: (j["submissionTime"], j["jobId"])):
        start = ui_time(job["submissionTime"])
        timeline.append({"start_s": round(start - started, 3),
                         "seconds": round(ui_time(job["completionTime"]) - start, 3),
                         "tasks": job["numTasks"]})
    return timeline


def time_in_jobs(timeline: list[dict]) -> float:
    """Wall time during which at least one of the jobs ran (overlaps counted once)."""
    total, reached = 0.0, float("-inf")
    for job in sorted(timeline, key=lambda j: j["start_s"]):
        start, end = job["start_s"], job["start_s"] + job["seconds"]
        total += max(0.0, end - max(start, reached))
        reached = max(reached, end)
    return round(total, 3)
