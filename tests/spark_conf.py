"""Session settings changed for one block of a test, and put back after it."""

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def session_settings(spark, settings: dict[str, str]) -> Iterator[None]:
    before = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
