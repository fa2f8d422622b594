"""The release writer's moves, killed before each filesystem call they make: whatever the step,
after the next job's recovery a reader finds the old release whole or the new one whole (or,
for a first release, nothing), and no hidden leftovers. With directory renames (local, HDFS)
and with the copy-then-delete moves of object stores. No Spark."""

import json
from pathlib import Path

import pytest
from pyarrow import fs as pafs

from dp_spark.errors import ConfigError
from dp_spark.io import release_store

MUTATING = {"move", "copy_file", "delete_file", "delete_dir", "create_dir", "open_output_stream"}


class Killed(BaseException):
    """A SIGKILL: no ``except Exception`` clause or ``finally`` cleanup of the writer may run on."""


class KilledAt:
    """A filesystem that dies at its ``at``-th change; ``type_name`` picks rename or copy moves."""

    def __init__(self, at: int, type_name: str):
        self.fs, self.at, self.calls, self.type_name = pafs.LocalFileSystem(), at, 0, type_name

    def __getattr__(self, name):
        method = getattr(self.fs, name)
        if name not in MUTATING:
            return method

        def counted(*args, **kwargs):
            self.calls += 1
            if self.calls == self.at:
                raise Killed
            return method(*args, **kwargs)
        return counted


def make_release(directory: Path, label: str) -> None:
    (directory / "t").mkdir(parents=True)
    (directory / "t" / "part-0.parquet").write_text(label)
    (directory / "t" / "part-1.parquet").write_text(label)
    (directory / "privacy.json").write_text(json.dumps({"release": label}))


def what_a_reader_sees(target: Path) -> str | None:
    """The label of the whole release at ``target``, None when there is none; fails on a mix."""
    if not target.exists():
        return None
    label = json.loads((target / "privacy.json").read_text())["release"]
    assert sorted(p.name for p in target.iterdir()) == ["privacy.json", "t"]
    assert [p.read_text() for p in sorted((target / "t").iterdir())] == [label, label]
    return label


@pytest.mark.parametrize("type_name", ["local", "s3"], ids=["rename", "copy"])
@pytest.mark.parametrize("has_old", [True, False], ids=["replace", "first"])
def test_a_move_killed_at_any_step_is_recovered_to_a_whole_release(tmp_path, type_name, has_old):
    for at in range(1, 100):
        root = tmp_path / str(at)
        target, staging = root / "out", root / ".out.tmp-1"
        if has_old:
            make_release(target, "old")
        make_release(staging, "new")
        fs = KilledAt(at, type_name)
        try:
            release_store._swap_in(release_store.Location(str(staging), fs, str(staging)),
                                   release_store.Location(str(target), fs, str(target)))
            finished = True
        except Killed:
            finished = False
        # The next job: its recovery on the same kind of filesystem, then its check.
        release_store._recover(release_store.Location(str(target), KilledAt(0, type_name), str(target)))
        release_store.check_output_location(None, str(target))
        seen = what_a_reader_sees(target)
        assert sorted(p.name for p in root.iterdir()) == ([] if seen is None else ["out"])
        if finished:
            assert seen == "new" and fs.calls < at
            break
        assert seen in (("old" if has_old else None), "new")
    # Killed once at each of its steps before a run finished: one rename for a first release, two
    # renames and the deletion of the old one for a replacement, nine calls or more when copying.
    assert at - 1 >= {("local", False): 1, ("local", True): 4}.get((type_name, has_old), 9)


def test_on_an_object_store_recovery_replaces_a_copy_cut_short(tmp_path):
    make_release(tmp_path / ".out.previous-1", "old")
    (tmp_path / "out" / "t").mkdir(parents=True)  # a new release half copied: no report yet
    (tmp_path / "out" / "t" / "part-0.parquet").write_text("new")
    release_store._recover(release_store.Location(str(tmp_path / "out"), KilledAt(0, "s3"), str(tmp_path / "out")))
    assert what_a_reader_sees(tmp_path / "out") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_where_directories_are_renamed_recovery_deletes_no_files_at_the_target(tmp_path):
    make_release(tmp_path / ".out.previous-1", "old")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")  # no rename leaves this: not ours
    with pytest.raises(ConfigError, match="holds no privacy.json"):
        release_store.check_output_location(None, str(tmp_path / "out"))
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_a_directory_that_is_not_a_release_is_not_replaced(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds no privacy.json"):
        release_store.check_output_location(None, str(tmp_path / "out"))
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_spark_and_pyarrow_are_given_the_same_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    relative = release_store.location("out/release/")
    assert relative.uri == relative.path == str(tmp_path / "out" / "release")
    assert relative.sibling(".release.tmp-1").path == str(tmp_path / "out" / ".release.tmp-1")
    uri = release_store.location(f"file://{tmp_path}/out")
    assert (uri.uri, uri.path, uri.fs.type_name) == (f"file://{tmp_path}/out", f"{tmp_path}/out", "local")
    with pytest.raises(ConfigError, match="cannot reach 'nosuch://x/y' from the driver"):
        release_store.location("nosuch://x/y")
