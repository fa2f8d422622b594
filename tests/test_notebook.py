"""In a Jupyter kernel: the API's progress prints only dp-spark's warnings (every other line would
sit under each cell), and a release's plot shows as the last expression of a cell without
``%matplotlib inline`` (its figure has a PNG of its own). The real kernel runs in
scripts/journeys.sh, which executes a notebook with nbclient."""

from __future__ import annotations

import sys
import types

import pandas as pd
import pytest

from dp_spark import display
from dp_spark.core.progress import Progress, default_progress, in_notebook


def _kernel(monkeypatch, shell_name: str) -> None:
    shell = type(shell_name, (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))


def test_in_a_notebook_the_default_progress_prints_only_warnings(monkeypatch, capsys):
    assert not in_notebook() and not default_progress().quiet  # a script or a job: every step
    _kernel(monkeypatch, "TerminalInteractiveShell")  # IPython in a terminal is no notebook
    assert not in_notebook()
    _kernel(monkeypatch, "ZMQInteractiveShell")
    progress = default_progress()
    assert in_notebook() and progress.quiet
    progress("reading and checking csv source ratings.csv")
    progress("WARNING: fixed seed: this release is for testing only and NOT private")
    said = capsys.readouterr().err
    assert "WARNING: fixed seed" in said and "reading" not in said
    Progress()("reading")  # the negative control: not quiet, every line
    assert "reading" in capsys.readouterr().err


def test_a_release_figure_renders_itself_as_png_for_jupyter():
    pytest.importorskip("matplotlib")
    table = pd.DataFrame({"item_id": [1, 2, 3], "noisy_count": [30, 20, 10], "ci95_halfwidth": [5, 5, 5]})
    fig = display.figure({"accuracy": {"tables": {}}}, {"item_counts": table}, "item_counts")
    png = fig._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 2_000
    assert fig.canvas.figure is fig and not hasattr(fig, "number")  # not one of pyplot's figures
