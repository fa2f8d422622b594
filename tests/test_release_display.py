"""A release shown to a person: ``print(release)`` is a short summary, Jupyter gets HTML
with each table's first rows and its ± column, ``release.plot()`` draws a table, and
``dp-spark report OUT`` shows a written release as text or as one self-contained HTML page,
which a real headless Chromium renders (its screenshot must show the page and its plots)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark import display
from dp_spark.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def releases(spark):
    rng = np.random.default_rng(0)
    frame = spark.createDataFrame(pd.DataFrame({"user_id": rng.integers(0, 300, 3000),
                                                "item_id": rng.integers(1, 40, 3000),
                                                "attr": rng.choice(["a", "b"], 3000),
                                                "stars": rng.integers(1, 6, 3000).astype(float)}))
    return {
        "counts": dp_spark.sra(frame, items=range(1, 41), attribute="attr", attributes=["a", "b"], l=5, epsilon=1,
                               seed=1),
        "histogram": dp_spark.user_histogram(frame, quantity="records", bins=[1, 5, 10, 20], epsilon=1, seed=1),
        "private": dp_spark.sra(frame, items="private", delta=1e-6, l=5, epsilon=1, seed=1),
        "means": dp_spark.means(frame, items=range(1, 41), value="stars", low=1, high=5, l=10, epsilon=2, seed=1),
    }


def test_printing_a_release_gives_a_short_summary(releases):
    text = str(releases["counts"])
    assert text == repr(releases["counts"]) and len(text.splitlines()) <= 15 and len(text) < 1800
    assert "bounding kept" in text and "removed at least" in text  # the bias the ± leaves out
    assert "epsilon 1 spent of 1" in text
    assert re.search(r"item_counts +40 rows +noisy_count ±\d+ \(95%\)", text)
    assert re.search(r"edge_counts +80 rows", text)
    assert "discrete Laplace" in text and releases["counts"].report["guarantee"] in text
    assert "count is unknown, not zero" not in text
    assert "count is unknown, not zero" in str(releases["private"])


def test_the_notebook_view_shows_the_ledger_and_first_rows_with_their_halfwidth(releases):
    page = releases["counts"]._repr_html_()
    assert "<h4>Ledger</h4>" in page and page.count("<table") == 3
    first = releases["counts"]["item_counts"].head(display.SHOWN_ROWS)
    for value in first["noisy_count"]:
        assert f"<td>{value:,}</td>" in page or f"<td>{value}</td>" in page
    assert "<th>ci95_halfwidth</th>" in page
    hostile = dict(releases["counts"].report, guarantee="<script>alert(1)</script>")
    assert "<script>" not in display.summary_html(hostile, releases["counts"].tables)


def test_plot_draws_the_top_values_or_the_histograms_bins(releases):
    counts = releases["counts"].plot()
    bars = counts.axes[0].patches
    assert len(bars) == display.TOP
    top = releases["counts"]["item_counts"].nlargest(display.TOP, "noisy_count")["noisy_count"]
    assert sorted(bar.get_width() for bar in bars) == sorted(top)
    histogram = releases["histogram"].plot()
    assert [bar.get_height() for bar in histogram.axes[0].patches] == list(releases["histogram"]["histogram"]
                                                                          ["noisy_count"])
    with pytest.raises(dp_spark.ConfigError, match="no plot of 'nope'"):
        releases["counts"].plot("nope")


def test_a_means_release_is_summed_up_plotted_and_shown_by_its_means(releases):
    means = releases["means"]
    text = str(means)
    given = int(means["item_means"]["mean"].notna().sum())
    assert f"item_means                 40 rows  mean for {given} rows (95% interval each)" in text
    assert "each mean's interval covers the mean of the records bounding kept" in text
    assert "noisy_count ±" not in text  # the mean, not the count, is what a means release is read by
    fig = means.plot()
    assert "95% interval" in fig.axes[0].get_xlabel() and fig.axes[0].get_xlim() == (1.0, 5.0)
    assert len(fig.axes[0].get_yticklabels()) == min(display.TOP, given)
    page = means._repr_html_()
    assert "mean for" in page and ">NaN<" not in page  # a missing mean shows empty, not NaN


def test_report_prints_a_written_release(releases, tmp_path, capsys):
    releases["counts"].write(str(tmp_path / "out"))
    assert main(["report", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.strip() == str(releases["counts"]).strip()
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "holds no dp-spark release" in capsys.readouterr().err


@pytest.mark.system
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; .ci/run does)")
@pytest.mark.parametrize("kind", ["counts", "histogram", "means"])
def test_the_html_report_renders_in_headless_chromium(releases, tmp_path, capsys, kind):
    from matplotlib.image import imread

    releases[kind].write(str(tmp_path / "out"))
    page = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "out"), "--html", str(page)]) == 0
    text = page.read_text()
    assert "src=" not in text and "<link" not in text and "<script" not in text  # self-contained
    browse = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"file://{page}"]
    dom = subprocess.run([*browse[:-1], "--dump-dom", browse[-1]], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = dom.stdout
    assert "<h2>Plots</h2>" in rendered and "Ledger" in rendered
    assert rendered.count("<svg") == len(releases[kind].tables)  # a plot per table
    shot = tmp_path / "page.png"
    done = subprocess.run([*browse[:-1], "--window-size=1000,1600", f"--screenshot={shot}", browse[-1]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (1600, 1000)
    ink = (pixels.mean(axis=2) < 0.5).mean()  # dark pixels: text, bars and axes were drawn
    blue = ((pixels[..., 2] > 0.55) & (pixels[..., 0] < 0.45)).mean()  # the bars' colour
    assert ink > 0.01 and blue > 0.005


def test_a_private_selection_prints_a_short_ledger_row_and_says_absent_is_not_zero(releases, capsys):
    from types import SimpleNamespace

    from dp_spark.cli.run import _print_summary

    private = releases["private"]
    outputs = {name: {"rows": len(table), "columns": list(table.columns)} for name, table in private.tables.items()}
    _print_summary(SimpleNamespace(report={**private.report, "outputs": outputs}, tables=private.tables, output="x"))
    out = capsys.readouterr().out
    ledger = out[out.index("Privacy ledger"):out.index(" spent of ")].splitlines()[2:]
    selection = [row for row in ledger if row.strip().startswith("select items")]
    assert selection and all(len(row) <= 100 for row in ledger)
    assert selection[0].split()[-2] == "-"  # no noise scale for a selection
    assert "an item missing from a table was not selected, and its count is unknown, not zero" in out


def test_the_diagnostics_count_the_rows_of_items_not_selected_apart():
    from dp_spark.release.guards import Coverage, coverage_lines

    lines = coverage_lines(Coverage(1000, {}, extra={"rows_of_items_not_selected": 975}))
    assert lines[0].startswith("1,000 rows read; outside the domain: none")
    assert lines[1].startswith("975 rows (97.5%) are of items that partition selection did not select")
