"""A CSV read with header = true whose first line is data is refused, not silently one record short."""

import pytest

from dp_spark.errors import DataError
from dp_spark.io import sources
from dp_spark.io.sources import SourceSpec, refuse_data_as_header


def csv_source(path, **changes):
    return SourceSpec(format="csv", path=str(path), **changes)


def test_a_headerless_file_read_with_a_header_is_refused(spark, tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text("1,10,4.5,2001-03-04\n1,11,3,2001-03-05\n2,10,5,2001-03-06\n")
    with pytest.raises(DataError, match=r"seems to have no header: its first line reads as data "
                                        r"\(1, 10, 4.5, 2001-03-04\).*set source.header = false and source.names"):
        sources.read_records(spark, csv_source(path), want_attr=False)
    # read as the message says, every record is there
    fixed = csv_source(path, header=False, names=("user_id", "item_id", "rating", "day"))
    assert sources.read_records(spark, fixed, want_attr=False).count() == 3


def test_a_file_with_a_header_is_read_as_before(spark, tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text("user_id,item_id\n1,10\n2,11\n")
    assert sources.read_records(spark, csv_source(path), want_attr=False).count() == 2


@pytest.mark.unit
@pytest.mark.parametrize("names, columns, refused", [
    (["1", "10", "_c2"], {}, True),                    # an empty field in the first line
    (["7", "2010-10-19T23:55:27"], {}, True),
    (["user", "10"], {}, False),                       # a name among numbers: a header
    (["_c0", "_c1"], {}, False),                       # nothing to go by
    (["1", "2"], {"user_id": "1", "item_id": "2"}, False),  # numeric column names the config uses
])
def test_what_reads_as_a_data_line(names, columns, refused):
    source = SourceSpec(format="csv", path="x.csv", columns=columns)
    if refused:
        with pytest.raises(DataError, match="seems to have no header"):
            refuse_data_as_header(names, source)
    else:
        refuse_data_as_header(names, source)
