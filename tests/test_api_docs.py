"""The examples of docs/api.md and the README's API section run as they are written."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def python_blocks(path) -> list[str]:
    return BLOCK.findall((ROOT / path).read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", ["docs/api.md", "README.md"])
def test_every_python_block_runs(spark, page, capsys):
    blocks = python_blocks(page)
    assert blocks, f"{page} has no python examples"
    namespace: dict = {}
    for number, code in enumerate(blocks, 1):
        try:
            exec(compile(code, f"{page} block {number}", "exec"), namespace)
        except Exception as exc:  # name the block: the traceback points into the page
            raise AssertionError(f"{page}, python block {number} failed: {exc!r}") from exc
    out = capsys.readouterr().out
    assert "noisy_count" in out or "noisy_entropy" in out  # the examples print released tables
