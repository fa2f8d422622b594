"""dp-spark bench: the records it writes, from a tiny generated table."""

import pytest

from dp_spark import bench, datasets
from dp_spark.errors import ConfigError


def test_bench_scale_times_every_job_after_the_warmups(spark, tmp_path):
    data = str(tmp_path / "netflix.parquet")
    datasets.generate_netflix(5000, data, progress=lambda _message: None)
    messages = []
    records = bench.bench_scale(spark, data, 5000, ["floor", "sra"], 2, messages.append, warmups=2)
    assert [r["job"] for r in records] == ["floor", "sra"]
    assert [m for m in messages if "warm-up" in m] == ["  warm-up floor", "  warm-up sra",
                                                      "  warm-up 2/2 floor", "  warm-up 2/2 sra"]
    floor, sra = records
    for record in records:
        assert len(record["runs_s"]) == 2 and record["warmups"] == 2
        assert record["floor_median_s"] == floor["median_s"]
    # Both medians are rounded to milliseconds in the record, the ratio is not.
    assert sra["ratio"] == pytest.approx(sra["median_s"] / floor["median_s"], rel=0.01)


def test_bench_refuses_no_warmup(tmp_path):
    with pytest.raises(ConfigError, match="--warmups"):
        bench.run([1000], ["floor"], str(tmp_path), 1, str(tmp_path), "local[2]", print, warmups=0)
