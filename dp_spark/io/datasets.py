"""Known datasets: MovieLens loaders and the synthetic Netflix-shaped table.

Loaders return DataFrame[user_id, item_id, attr, value] with ids as read (validation
casts them); ``value`` is the rating, null where the file holds none (MovieLens' pairs file, the
synthetic table), and ``io.sources.read_records`` refuses a value column asked of such a source.
``io.sources.read_records`` adds each row's key.

MovieLens edges follow paper 000 §6.2: attribute = (gender, age group) with the
age groups under 25, 25-34 and over 34, i.e. six values.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from dp_spark.errors import DataError

MOVIELENS_ATTRIBUTES = tuple(f"{g}_{a}" for g in ("F", "M") for a in ("under25", "25-34", "over34"))
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

# Netflix Prize training set, paper 000 Table 4 (17,770 movies in the public set).
NETFLIX_USERS = 480_189
NETFLIX_ITEMS = 17_770
NETFLIX_ROWS = 100_480_507
NETFLIX_MAX_PER_USER = 17_000


def _first_existing(directory: Path, names: tuple[str, ...], what: str) -> Path:
    for name in names:
        if (directory / name).exists():
            return directory / name
    raise DataError(f"{what}: none of {', '.join(names)} found in {str(directory)!r}")


def _age_group(age):
    from pyspark.sql import functions as F

    return F.when(age < 25, "under25").when(age < 35, "25-34").otherwise("over34")


# source.attribute for the MovieLens loaders: what a rating's attribute is (paper 000: gender_age).
MOVIELENS_ATTRIBUTE_KINDS = ("gender_age", "gender", "age")


def _with_demographics(ratings, users, attribute: str = "gender_age"):
    """Join each rating with its user's (gender, age group), or one of the two; user ids compared as text."""
    from pyspark.sql import functions as F

    if attribute not in MOVIELENS_ATTRIBUTE_KINDS:
        raise ValueError(f"unknown MovieLens attribute {attribute!r}; expected one of {MOVIELENS_ATTRIBUTE_KINDS}")
    parts = {"gender_age": [F.col("gender"), _age_group(F.col("age"))], "gender": [F.col("gender")],
             "age": [_age_group(F.col("age"))]}[attribute]
    attr = F.concat_ws("_", *parts)
    users = users.select("user_id", attr.alias("attr"))
    return ratings.join(F.broadcast(users), "user_id", "left").select("user_id", "item_id", "attr", "value")


def _load_movielens(spark, ratings_file: Path, ratings_sep: str, users_file: Path, users_sep: str,
                    gender_field: int, age_field: int, attribute: str = "gender_age"):
    """Ratings (user, item first) joined with each user's (gender, age group). Separators are
    Java regular expressions."""
    from pyspark.sql import functions as F

    parts = F.split(F.col("value"), ratings_sep)
    # The rating, null where a line has no number there (dropped and counted by validation).
    rating = F.try_element_at(parts, F.lit(3)).try_cast("double")
    ratings = spark.read.text(str(ratings_file)).select(parts[0].alias("user_id"), parts[1].alias("item_id"),
                                                        rating.alias("value"))
    fields = F.split(F.col("value"), users_sep)
    users = spark.read.text(str(users_file)).select(
        F.trim(fields[0]).alias("user_id"),
        fields[gender_field].alias("gender"),
        fields[age_field].cast("int").alias("age"),
    )
    return _with_demographics(ratings, users, attribute)


# MovieLens 1M's ratings file without the ratings' values (user::movie only).
UNRATED = ("ratings_pairs.dat.gz",)


def load_movielens_1m(spark, path: str, attribute: str = "gender_age"):
    """ml-1m: ratings.dat, or ratings_pairs.dat.gz (user::movie), joined with users.dat; ``path``
    is the directory, or one ratings file in it (e.g. ratings_users_0001-2999.dat.gz, the rated
    part of a directory whose full ratings are pairs only).

    users.dat age codes are 1 (under 18), 18, 25, 35, 45, 50, 56: the code is
    the lower end of the bucket, so the <25 / 25-34 / >34 split is exact.
    """
    given = Path(path)
    directory = given.parent if given.is_file() else given
    ratings = given if given.is_file() else _first_existing(directory, ("ratings.dat", "ratings.dat.gz",
                                                                        "ratings_pairs.dat.gz"), "MovieLens 1M")
    users = _first_existing(directory, ("users.dat",), "MovieLens 1M")
    return _load_movielens(spark, ratings, "::", users, "::", gender_field=1, age_field=2, attribute=attribute)


def load_movielens_100k(spark, path: str, attribute: str = "gender_age"):
    """ml-100k: u.data (user, item, rating, time; tab-separated) joined with u.user (id|age|gender|...)."""
    directory = Path(path)
    ratings = _first_existing(directory, ("u.data", "u.data.gz"), "MovieLens 100K")
    users = _first_existing(directory, ("u.user",), "MovieLens 100K")
    return _load_movielens(spark, ratings, "\t", users, r"\|", gender_field=2, age_field=1, attribute=attribute)


NETFLIX_SPARK_SCHEMA = "user_id long, item_id int, weekday string"  # what generate_netflix writes


def load_netflix_synthetic(spark, path: str):
    """The Parquet table written by :func:`generate_netflix`; attr = weekday."""
    if not Path(path).exists() and "://" not in path:
        raise DataError(
            f"synthetic Netflix table {path!r} not found; create it with "
            f"'dp-spark generate netflix --rows 1000000 --out {path}'"
        )
    from pyspark.sql import functions as F

    # The schema is ours, so Spark need not run a job to read it from the file footers.
    df = spark.read.schema(NETFLIX_SPARK_SCHEMA).parquet(path)
    return df.select("user_id", "item_id", df["weekday"].alias("attr"), F.lit(None).cast("double").alias("value"))


ADULT_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
                 "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
                 "income")
ADULT_INTEGERS = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")


def load_adult(spark, path: str):
    """UCI Adult: adult.data and adult.test (plain or .gz) together, one row per person, the 15
    named columns with integers cast, text trimmed, the test file's trailing '.' on income
    dropped and '?' kept as a value. Lines starting with '|' (the test file's first) are skipped."""
    from pyspark.sql import functions as F

    directory = Path(path)
    files = [str(_first_existing(directory, (f"adult.{part}", f"adult.{part}.gz"), "UCI Adult"))
             for part in ("data", "test")]
    lines = spark.read.text(files).where((F.length(F.trim("value")) > 0) & ~F.col("value").startswith("|"))
    fields = F.split(F.col("value"), ",")
    columns = []
    for i, name in enumerate(ADULT_COLUMNS):
        value = F.trim(fields[i])
        if name in ADULT_INTEGERS:
            value = value.cast("long")
        elif name == "income":
            value = F.regexp_replace(value, r"\.$", "")
        columns.append(value.alias(name))
    return lines.select(*columns)


RAW_LOADERS = {"adult": load_adult}  # whole tables with their own columns, for FRAPP

LOADERS = {
    "movielens-1m": load_movielens_1m,
    "movielens-100k": load_movielens_100k,
    "netflix-synthetic": load_netflix_synthetic,
}
# Each user has each (item, attribute) at most once: MovieLens has one rating per (user, movie),
# and generate_netflix draws a user's items without replacement. Their records need no occurrence
# index (bounding.keys.with_row_key).
DISTINCT_RECORDS = frozenset(LOADERS)


def has_values(fmt: str, path: str) -> bool:
    """Whether the named loader's source holds a value per record (a rating): MovieLens' rating
    files do; its pairs file and the synthetic Netflix-shaped table do not."""
    if fmt == "netflix-synthetic":
        return False
    if fmt == "movielens-1m":
        given = Path(path)
        if given.is_file():
            return given.name not in UNRATED
        return any((given / name).exists() for name in ("ratings.dat", "ratings.dat.gz"))
    return True


# ---------------------------------------------------------------------------
# The synthetic Netflix-shaped ratings table.


def _scaled_users(rows: int) -> int:
    """Netflix's user count scaled to ``rows`` ratings (same mean per user)."""
    return max(1, round(NETFLIX_USERS * rows / NETFLIX_ROWS))


def _user_counts(rng: np.random.Generator, users: int, rows: int) -> np.ndarray:
    """Heavy-tailed ratings per user: log-normal (median 96, mean ≈ 209 as in
    Netflix), at least 1, at most 17,000, rescaled to sum to exactly ``rows``."""
    sigma = np.sqrt(2 * np.log(209.25 / 96))
    raw = np.clip(rng.lognormal(np.log(96), sigma, users), 1, NETFLIX_MAX_PER_USER)
    counts = np.clip(np.floor(raw * rows / raw.sum()), 1, NETFLIX_MAX_PER_USER).astype(np.int64)
    # Hand out the remainder (or take back the excess) one row at a time at random.
    while counts.sum() != rows:
        gap = rows - counts.sum()
        room = counts < NETFLIX_MAX_PER_USER if gap > 0 else counts > 1
        chosen = rng.choice(np.flatnonzero(room), size=min(abs(gap), int(room.sum())), replace=False)
        counts[chosen] += 1 if gap > 0 else -1
    return counts


def _items_light_users(rng: np.random.Generator, counts: np.ndarray, cdf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each user u, counts[u] distinct item positions drawn by popularity,
    vectorised over users: draw with some slack, drop repeats (keeping the
    first draw of each item), keep each user's first counts[u], redraw for the
    users still short. Keeping the first k distinct draws is successive
    sampling without replacement, weighted by popularity."""
    m = cdf.size
    users = np.empty(0, dtype=np.int64)
    items = np.empty(0, dtype=np.int64)
    deficit = counts.astype(np.int64)
    while (short := np.flatnonzero(deficit > 0)).size:
        draws = deficit[short] + deficit[short] // 4 + 4
        new_users = np.repeat(short, draws)
        new_items = np.searchsorted(cdf, rng.random(new_users.size), side="right")
        users = np.concatenate([users, new_users])
        items = np.concatenate([items, new_items])
        _, first = np.unique(users * m + items, return_index=True)
        first.sort()  # back to draw order, so "first k" means the earliest draws
        by_user = first[np.argsort(users[first], kind="stable")]
        users, items = users[by_user], items[by_user]
        group_start = np.concatenate([[0], np.cumsum(np.bincount(users, minlength=counts.size))[:-1]])
        rank = np.arange(users.size) - group_start[users]
        keep = rank < counts[users]
        users, items = users[keep], items[keep]
        deficit = counts - np.bincount(users, minlength=counts.size)
    return users, items


def _items_heavy_user(rng: np.random.Generator, k: int, weights: np.ndarray) -> np.ndarray:
    """k distinct item positions for one heavy user: the k smallest of
    Exp(1)/weight, which is the same weighted sampling without replacement
    (Efraimidis and Spirakis) at O(items) cost however large k is."""
    keys = rng.exponential(size=weights.size) / weights
    return np.argpartition(keys, k - 1)[:k]


def _chunks(counts: np.ndarray, rows_per_chunk: int) -> list[tuple[int, int]]:
    """Consecutive user ranges of about ``rows_per_chunk`` rows each."""
    ends = np.searchsorted(np.cumsum(counts), np.arange(rows_per_chunk, counts.sum(), rows_per_chunk), side="left")
    bounds = np.unique(np.concatenate([[0], ends + 1, [counts.size]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def generate_netflix(rows: int, out: str, seed: int = 0, progress=print) -> dict:
    """Write a deterministic Netflix-shaped Parquet table (user_id, item_id, weekday).

    The user count scales with ``rows`` (480,189 users at 100,480,507 rows);
    item popularity is Zipf-like over 17,770 movies whose popularity ranks are
    a seeded permutation of the ids; weekdays lean towards the weekend. Users
    are written in chunks of about two million rows, the rows of a chunk in a
    random order (one Parquet row group per chunk). Returns the realised
    statistics; the same ``rows`` and ``seed`` give the same table.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rows < 1:
        raise DataError(f"--rows must be >= 1, got {rows}")
    started = time.monotonic()
    rng = np.random.default_rng(seed)
    users = _scaled_users(rows)
    counts = _user_counts(rng, users, rows)
    weights = 1.0 / (np.arange(1, NETFLIX_ITEMS + 1) + 10.0)
    weights /= weights.sum()
    cdf = np.cumsum(weights)
    cdf[-1] = 1.0
    item_ids = (rng.permutation(NETFLIX_ITEMS) + 1).astype(np.int32)
    weekday_p = np.array([0.13, 0.13, 0.13, 0.14, 0.15, 0.16, 0.16])
    heavy_from = NETFLIX_ITEMS // 8  # above this many items a user is drawn item by item (see _items_heavy_user)

    Path(out).parent.mkdir(parents=True, exist_ok=True)
    weekday_type = pa.dictionary(pa.int8(), pa.string())
    schema = pa.schema([("user_id", pa.int64()), ("item_id", pa.int32()), ("weekday", weekday_type)])
    item_seen = np.zeros(NETFLIX_ITEMS, dtype=bool)
    with pq.ParquetWriter(out, schema) as writer:
        for first_user, end_user in _chunks(counts, 2_000_000):
            chunk = counts[first_user:end_user]
            light = chunk <= heavy_from
            light_users, light_items = _items_light_users(rng, np.where(light, chunk, 0), cdf)
            heavy = [(u, _items_heavy_user(rng, int(chunk[u]), weights)) for u in np.flatnonzero(~light)]
            user_pos = np.concatenate([light_users] + [np.full(p.size, u) for u, p in heavy])
            item_pos = np.concatenate([light_items] + [p for _, p in heavy])
            order = rng.permutation(user_pos.size)
            user_pos, item_pos = user_pos[order], item_pos[order]
            item_seen[item_pos] = True
            weekday = rng.choice(7, size=user_pos.size, p=weekday_p).astype(np.int8)
            table = pa.table(
                {
                    "user_id": user_pos + first_user + 1,
                    "item_id": item_ids[item_pos],
                    "weekday": pa.DictionaryArray.from_arrays(weekday, pa.array(WEEKDAYS)),
                },
                schema=schema,
            )
            writer.write_table(table, row_group_size=table.num_rows)
            progress(f"  generated {end_user:,} of {users:,} users")
    return {
        "rows": int(counts.sum()),
        "users": int(users),
        "items_rated": int(item_seen.sum()),
        "max_per_user": int(counts.max()),
        "mean_per_user": float(counts.mean()),
        "min_per_user": int(counts.min()),
        "seconds": round(time.monotonic() - started, 1),
    }


def netflix_targets(rows: int) -> dict:
    """What :func:`generate_netflix` aims at for ``rows`` (paper 000 Table 4, scaled)."""
    return {
        "rows": rows,
        "users": _scaled_users(rows),
        "items_rated": NETFLIX_ITEMS,
        "max_per_user": NETFLIX_MAX_PER_USER,
        "mean_per_user": 209.2,
        "min_per_user": 1,
    }
