"""user_histogram without domain.items: every record counts, and the release is the one a
domain covering every item gives."""

import json

import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.errors import ConfigError
from dp_spark.families.user_histogram.family import NO_ITEM_DOMAIN
from dp_spark.jobs.config import build_config

CONFIG = """\
output = "{out}"
seed = 5
[source]
format = "csv"
path = "{data}"
{domain}
[privacy]
epsilon = 1.0
[algorithm]
name = "user_histogram"
quantity = "{quantity}"
bins = [1, 2, 4]
[guards]
refuse_noise_only = false  # a few users: released anyway
"""


def raw_config(name="user_histogram", **algorithm):
    return {"output": "o", "source": {"format": "parquet", "path": "x"}, "privacy": {"epsilon": 1.0},
            "algorithm": {"name": name, **algorithm}}


@pytest.mark.unit
def test_only_user_histogram_may_leave_out_the_item_domain():
    cfg = build_config(raw_config(quantity="records", bins=[1, 2]))
    assert cfg.items == {}
    with pytest.raises(ConfigError, match="missing config key 'domain.items'"):
        build_config(raw_config("sra", l=2))


def release(tmp_path, name, data, domain, quantity):
    out = tmp_path / name
    config = tmp_path / f"{name}.toml"
    config.write_text(CONFIG.format(out=out, data=data, domain=domain, quantity=quantity))
    assert main(["run", str(config)]) == 0
    return pd.read_parquet(out / "histogram").sort_values("bin"), json.loads((out / "privacy.json").read_text())


@pytest.mark.parametrize("quantity", ["records", "distinct_items"])
def test_no_item_domain_releases_what_a_domain_of_every_item_does(spark, tmp_path, quantity):
    data = tmp_path / "r.csv"
    # users 1..4 with 1, 2, 3 and 5 records; items 3..900 (user 4 rates item 7 twice)
    data.write_text("user_id,item_id\n1,3\n2,3\n2,900\n3,10\n3,11\n3,12\n4,7\n4,7\n4,8\n4,9\n4,10\n")
    without, report = release(tmp_path, "without", data, "", quantity)
    covering, report_covering = release(tmp_path, "covering", data, "[domain]\nitems = { range = [1, 1000] }",
                                        quantity)
    pd.testing.assert_frame_equal(without.reset_index(drop=True), covering.reset_index(drop=True))
    assert report["domain"]["items"] == NO_ITEM_DOMAIN and report["domain"]["item_count"] is None
    assert report_covering["domain"]["item_count"] == 1000
    assert report["ledger"] == report_covering["ledger"]
    # and the domain, when given, still filters: items 1..9 leave out user 3 and two of the others' records
    narrow, _ = release(tmp_path, "narrow", data, "[domain]\nitems = { range = [1, 9] }", quantity)
    assert not narrow["noisy_count"].equals(without["noisy_count"])


def test_records_per_user_need_no_quantity_and_no_item_column(spark):
    """quantity defaults to "records", which counts every record whatever its item: a DataFrame of
    user ids alone is enough, and gives the histogram of the same DataFrame with items."""
    import pandas as pd

    import dp_spark

    users = pd.DataFrame({"user_id": [1, 1, 1, 2, 3, 3], "item_id": [5, 6, 7, 5, 5, 9]})
    small = {"guards": {"refuse_noise_only": False}}  # three users: released anyway
    with_items = dp_spark.user_histogram(spark.createDataFrame(users), bins=[1, 2, 3], epsilon=1, seed=4, **small)
    alone = dp_spark.user_histogram(spark.createDataFrame(users[["user_id"]]), bins=[1, 2, 3], epsilon=1, seed=4,
                                    **small)
    assert alone["histogram"].equals(with_items["histogram"])
    assert alone.report["ledger"] == with_items.report["ledger"]
    by_none = dp_spark.user_histogram(spark.createDataFrame(users), item=None, bins=[1, 2, 3], epsilon=1, seed=4,
                                      **small)
    assert by_none["histogram"].equals(with_items["histogram"])
    with pytest.raises(dp_spark.DataError, match="column 'item_id' .* not found"):  # distinct items need items
        dp_spark.user_histogram(spark.createDataFrame(users[["user_id"]]), quantity="distinct_items", bins=[1, 2],
                                epsilon=1)
