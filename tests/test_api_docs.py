"""The examples of the README's API section run as they are written, on a classic session.

docs/api.md's examples run on a Spark Connect session in the Connect pass (tests/test_connect.py,
``api_examples_run``); running them here as well took about a minute of the suite's time for
code that tests/test_api.py already runs on a classic session, job against API call."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def python_blocks(path) -> list[str]:
    return BLOCK.findall((ROOT / path).read_text(encoding="utf-8"))


def run_python_blocks(page: str, namespace: dict) -> None:
    """Every python block of ``page``, in order, in ``namespace``; a failure names its block (the
    traceback points into the page)."""
    for number, code in enumerate(python_blocks(page), 1):
        try:
            exec(compile(code, f"{page} block {number}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{page}, python block {number} failed: {exc!r}") from exc


@pytest.mark.parametrize("page", ["README.md"])
def test_every_python_block_runs(spark, page, capsys):
    assert python_blocks(page), f"{page} has no python examples"
    run_python_blocks(page, {})
    out = capsys.readouterr().out
    assert "noisy_count" in out or "noisy_entropy" in out  # the examples print released tables
