"""Small samples of the real datasets in ../shared/data, written to a test's folder in their own
format, for tests whose property is the same result from two paths on the same records (which
needs no whole dataset): the ratings of a dataset's first users, or Adult's first lines."""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Iterable
from itertools import islice
from pathlib import Path

from tests.conftest import shared_data


def _copy(real: Path, target: Path, names: Iterable[str]) -> None:
    target.mkdir(parents=True)
    for name in names:
        shutil.copy(real / name, target / name)


def _first_users(given: Path, kept: Path, users: int, separator: str) -> None:
    """The lines of the gzipped ratings file ``given`` whose user id (the first field) is at most ``users``."""
    with gzip.open(given, "rt") as lines, gzip.open(kept, "wt") as out:
        out.writelines(line for line in lines if int(line.split(separator, 1)[0]) <= users)


def movielens_1m_sample(target: Path, users: int, ratings: tuple[str, ...] = ("ratings_pairs.dat.gz",)) -> Path:
    """The folder ``target`` with MovieLens 1M's users and movies files as they are, and the
    ratings of its users 1 to ``users`` from each gzipped file of ``ratings``, in its format."""
    real = shared_data("ml-1m")
    _copy(real, target, ("users.dat", "movies.dat"))
    for name in ratings:
        _first_users(real / name, target / name, users, "::")
    return target


def movielens_100k_sample(target: Path, users: int) -> Path:
    """The folder ``target`` with MovieLens 100K's user file as it is and the ratings (u.data) of
    its users 1 to ``users``: every one of them rated at least 20 movies, as in the whole set."""
    real = shared_data("ml-100k")
    _copy(real, target, ("u.user",))
    _first_users(real / "u.data.gz", target / "u.data.gz", users, "\t")
    return target


def adult_sample(target: Path, lines: int) -> Path:
    """The folder ``target`` with the first ``lines`` lines of each of Adult's two files
    (adult.data and adult.test, whose first line is a comment the loader skips)."""
    real = shared_data("adult")
    target.mkdir(parents=True)
    for name in ("adult.data.gz", "adult.test.gz"):
        with gzip.open(real / name, "rt") as given, gzip.open(target / name, "wt") as kept:
            kept.writelines(islice(given, lines))
    return target
