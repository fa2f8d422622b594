"""A release shown to a person: a short text summary, an HTML view for notebooks, plots, and one
self-contained HTML page for a privacy reviewer (``dp-spark report OUT --html FILE``).

Everything here reads the privacy report and the noisy tables only (DP outputs and the config),
never raw diagnostics. Pure functions over plain data; matplotlib (the ``plot`` extra) is needed
only for pictures.
"""

from __future__ import annotations

import html
import io
from collections.abc import Mapping
from typing import Any

import pandas as pd

HALFWIDTH = "ci95_halfwidth"
TOP = 20  # bars in a top-k plot
BAR_COLOUR = "#4c78a8"
SHOWN_ROWS = 5  # rows of each table in the notebook view


MEAN_COLUMNS = ("mean", "mean_low", "mean_high")


def is_means(table: Any) -> bool:
    """A means table: each row's mean and its interval."""
    return all(c in table.columns for c in MEAN_COLUMNS)


def value_column(table: pd.DataFrame) -> str | None:
    """The released value a person looks at first: a means table's mean, else the first noisy_*
    column (support for itemsets)."""
    if is_means(table):
        return "mean"
    noisy = [c for c in table.columns if c.startswith("noisy_") and not c.endswith(HALFWIDTH)]
    return noisy[0] if noisy else ("support" if "support" in table.columns else None)


def halfwidth_column(table: pd.DataFrame, value: str) -> str | None:
    for name in (f"{value}_{HALFWIDTH}", HALFWIDTH):
        if name in table.columns:
            return name
    return None


def key_columns(table: pd.DataFrame) -> list[str]:
    """The columns that say which cell a row is (item_id, attr, bin, ...), not what was released."""
    return [c for c in table.columns if not c.startswith("noisy_") and not c.endswith(HALFWIDTH)
            and c not in ("support", "low", "high", "length", *MEAN_COLUMNS)]


def table_rows(report: dict, name: str, table: Any) -> int | None:
    """Rows of a table: counted when it is pandas, else from the report (None if not written yet)."""
    if isinstance(table, pd.DataFrame):
        return len(table)
    return report.get("outputs", {}).get(name, {}).get("rows")


def _noise_of(report: dict, name: str, column: str | None) -> str:
    """'±60 (95%)' for a column whose noise the report states, else ''."""
    noise = report.get("accuracy", {}).get("tables", {}).get(name, {}).get(column or "", {})
    width = noise.get("ci95_halfwidth")
    if width is None:
        return ""
    bound = {"upper_bound": "at most ", "lower_bound": "at least "}.get(noise.get("kind"), "")
    return f"±{bound}{width:,.4g} (95%)"


def _algorithm_line(report: dict) -> str:
    algorithm = report["algorithm"]
    chosen = algorithm.get("chosen") or {}
    chosen_text = ", ".join(f"{k} = {v:g}" for k, v in chosen.items() if isinstance(v, (int, float)))
    return algorithm["name"] + (f" (chosen privately: {chosen_text})" if chosen_text else "")


ABSENT_NOTE = ("the items were selected privately: an item missing from a table was not selected, and its "
               "count is unknown, not zero")


def _selected_privately(report: dict) -> bool:
    return "items_selected" in (report["algorithm"].get("chosen") or {})


def _bounding(report: dict) -> str:
    """The DP estimate of what bounding removed, in a sentence ("" when the release has none)."""
    from dp_spark.core import accuracy

    bounding = report.get("accuracy", {}).get("bounding")
    return accuracy.bounding_text(bounding) if bounding else ""


def interval_level(report: dict) -> str:
    """"95": the level of a means release's intervals, in percent (a release written before the
    level could be asked for has none in its report: its intervals were at 90%)."""
    return f"{100 * report['algorithm']['parameters'].get('confidence', 0.9):g}"


def _means_text(report: dict, table: pd.DataFrame) -> str:
    """"mean for 303 rows (95% interval each)": how many cells got a mean (a DP output)."""
    return f"mean for {int(table['mean'].notna().sum()):,} rows ({interval_level(report)}% interval each)"


def short_mechanism(entry: dict, width: int = 40) -> str:
    """A ledger entry's mechanism in a few words for a console or a table (privacy.json has it whole)."""
    text = entry["mechanism"]
    for stop in (", ", ": ", " ("):
        text = text.split(stop, 1)[0]
    return text if len(text) <= width else text[: width - 1] + "…"


def _is_selection(entry: dict) -> bool:
    return entry["mechanism"].startswith("partition selection")


def _rho_of(entry: dict, zcdp: bool) -> float | None:
    """The step's ρ: a Gaussian or bounded-range step's own, a pure step's ε²/2 under zCDP."""
    if "rho" in entry:
        return entry["rho"]
    return entry["epsilon"] ** 2 / 2 if zcdp and entry.get("epsilon") is not None else None


def ledger_rows(report: dict) -> list[dict[str, str]]:
    """The ledger as a person reads it, one dict of display strings per step: ε and ρ in columns
    of their own ("-" where a step has none), its δ, the sensitivity the noise is calibrated to
    (L2 for a Gaussian step, L1 otherwise) and the noise scale in the released value's units
    (a sum's noise is drawn in grid steps: value_unit converts), and its cells ("-" for a
    selection, whose number of candidates is found in the data and not released)."""
    zcdp = report.get("accounting") == "zCDP"
    rows = []
    for entry in report["ledger"]:
        unit = entry.get("value_unit", 1.0)
        gaussian = entry.get("epsilon") is None
        sensitivity = (f"L2 {entry['sensitivity_l2'] * unit:.4g}" if gaussian
                       else f"L1 {entry['sensitivity_l1'] * unit:.4g}")
        rho = _rho_of(entry, zcdp)
        selection = _is_selection(entry)
        rows.append({"step": entry["step"], "mechanism": short_mechanism(entry),
                     "epsilon": "-" if gaussian else f"{entry['epsilon']:.4g}",
                     "rho": "-" if rho is None else f"{rho:.3g}",
                     "delta": f"{entry.get('delta', 0.0):g}",
                     "sensitivity": sensitivity,
                     "noise scale": "-" if selection else f"{entry['noise_scale'] * unit:.4g}",
                     "cells": "-" if selection and not entry["cells"] else f"{entry['cells']:,}"})
    return rows


LEDGER_HEADER = ("step", "mechanism", "epsilon", "rho", "delta", "sensitivity", "noise scale", "cells")


def ledger_lines(report: dict, indent: str = "  ") -> list[str]:
    """The ledger as a text table, a header and a line per step."""
    rows = ledger_rows(report)
    shown = [c for c in LEDGER_HEADER if c != "rho" or any(r["rho"] != "-" for r in rows)]
    shown = [c for c in shown if c != "delta" or any(r["delta"] != "0" for r in rows)]
    widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in shown}
    left = ("step", "mechanism")

    def line(cells: dict[str, str]) -> str:
        return indent + " ".join(cells[c].ljust(widths[c]) if c in left else cells[c].rjust(widths[c])
                                 for c in shown).rstrip()
    return [line({c: c for c in shown})] + [line(r) for r in rows]


def spent_text(report: dict) -> str:
    """"epsilon 0.5 spent of 1": of what the config or call asked for (under zCDP, its ε, not the
    ε its ρ converts back to, a hair below)."""
    total = report.get("epsilon_asked", report["epsilon_total"])
    return f"epsilon {report['epsilon_spent']:g} spent of {total:g}"


def summary_lines(report: dict, tables: dict[str, Any]) -> list[str]:
    """A release in a few lines: algorithm, spend, guarantee, each table's size and noise, ledger."""
    lines = [
        f"dp-spark release: {_algorithm_line(report)}; {spent_text(report)}"
        + (f", delta {report['delta_spent']:g}" if report.get("delta_spent") else ""),
        f"  guarantee: {report['guarantee']}",
        f"  privacy unit: {report['privacy_unit']}",
    ]
    lines.append("  tables:")
    for name, table in tables.items():
        rows = table_rows(report, name, table)
        size = f"{rows:>11,} rows" if rows is not None else "  (a Spark DataFrame)"
        column = value_column(table) if isinstance(table, pd.DataFrame) else None
        said = _means_text(report, table) if column == "mean" else f"{column or ''} {_noise_of(report, name, column)}"
        lines.append(f"    {name:<18}{size}  {said}".rstrip())
    if _selected_privately(report):
        lines.append(f"  note: {ABSENT_NOTE}")
    bounding = _bounding(report)
    if bounding:
        lines.append(f"  {bounding}")
    lines.append("  ledger:")
    return lines + ledger_lines(report, indent="    ")


def _html_table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, classes="dp-table", float_format=lambda v: f"{v:,.4g}", na_rep="")


def _ledger_frame(report: dict) -> pd.DataFrame:
    return pd.DataFrame(ledger_rows(report), columns=list(LEDGER_HEADER))


def summary_html(report: dict, tables: dict[str, Any], shown_rows: int = SHOWN_ROWS) -> str:
    """The notebook view (``Release._repr_html_``): guarantee, ledger, each table's size and first rows."""
    escape = html.escape
    parts = [f"<div class='dp-release'><b>dp-spark release: {escape(_algorithm_line(report))}</b>; "
             f"{spent_text(report)}<br>",
             f"<i>{escape(report['guarantee'])}</i><br>privacy unit: {escape(report['privacy_unit'])}",
             f"<br><b>Note:</b> {ABSENT_NOTE}" if _selected_privately(report) else "",
             f"<br>{html.escape(_bounding(report))}" if _bounding(report) else "",
             "<h4>Ledger</h4>", _html_table(_ledger_frame(report))]
    for name, table in tables.items():
        rows = table_rows(report, name, table)
        column = value_column(table) if isinstance(table, pd.DataFrame) else None
        noise = _means_text(report, table) if column == "mean" else (
            f"{column} {_noise_of(report, name, column)}" if _noise_of(report, name, column) else "")
        parts.append(f"<h4>{escape(name)}: {'a Spark DataFrame' if rows is None else f'{rows:,} rows'}"
                     f"{escape(f'; {noise}') if noise else ''}</h4>")
        if isinstance(table, pd.DataFrame):
            parts.append(_html_table(table.head(shown_rows)))
        else:
            parts.append(f"<p>Not collected to the driver: <code>release.to_spark({escape(repr(name))})</code></p>")
    return "\n".join(parts) + "</div>"


def plotted(report: dict, tables: dict[str, Any]) -> list[str]:
    """The tables worth a picture: pandas tables with a released value."""
    return [name for name, table in tables.items() if isinstance(table, pd.DataFrame) and value_column(table)
            and len(table)]


def _labels(shown: pd.DataFrame, keys: list[str], titles: Mapping | None, width: int = 40) -> list[str]:
    """Each row's label: its key columns (as written: an id stays an integer), and the item's
    title when ``titles`` has one, cut to ``width`` characters."""
    columns = [shown[k].astype(str).tolist() for k in keys] or [shown.index.astype(str).tolist()]
    items = shown["item_id"].tolist() if titles and "item_id" in shown.columns else [None] * len(shown)
    labels = []
    for parts, item in zip(zip(*columns), items):
        title = titles.get(item) if item is not None else None
        text = " ".join([*parts, *([title] if title else [])])
        labels.append(text if len(text) <= width else text[: width - 1] + "…")
    return labels


_FIGURE_CLASS: list = []


def figure_class():
    """matplotlib's Figure with a PNG of itself for Jupyter (``_repr_png_``): a Figure of its own,
    not pyplot's, so a notebook's backend and open figures are left alone, and it still shows as
    the last expression of a cell whether or not ``%matplotlib inline`` ran."""
    if not _FIGURE_CLASS:
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError:
            raise ImportError("plots need matplotlib: pip install 'dp-spark[plot]' (or matplotlib)") from None

        class ReleaseFigure(Figure):
            def _repr_png_(self) -> bytes:
                out = io.BytesIO()
                FigureCanvasAgg(self).print_png(out)
                return out.getvalue()
        _FIGURE_CLASS.append(ReleaseFigure)
    return _FIGURE_CLASS[0]


def figure(report: dict, tables: dict[str, Any], name: str, top: int = TOP, titles: Mapping | None = None):
    """One table's picture (matplotlib Figure): a histogram's bars in bin order; a means table's
    means with their intervals, for the ``top`` rows of highest noisy count; otherwise the ``top``
    largest released values, with error bars at the 95% half-width where the noise is exact.
    ``titles``: an item's title by id (a public catalogue's), put beside its id."""
    Figure = figure_class()

    table = tables[name]
    if is_means(table):
        return _means_figure(Figure, report, table, name, top, titles)
    value = value_column(table)
    width = halfwidth_column(table, value)
    if name == "histogram":
        shown = table
        labels = list(shown["bin"].astype(str))
        title = f"{name}: {value} per bin"
    else:
        shown = table.nlargest(top, value)
        labels = _labels(shown, key_columns(table), titles)
        title = f"{name}: the {len(shown)} largest {value}"
    tall = 4.0 if name == "histogram" else max(2.5, 0.28 * len(shown) + 1.2)
    fig = Figure(figsize=(8, tall), layout="constrained")
    axes = fig.add_subplot()
    errors = shown[width] if width else None
    positions = range(len(shown))[::-1] if name != "histogram" else range(len(shown))
    if name == "histogram":
        axes.bar(list(positions), shown[value], yerr=errors, capsize=3 if len(shown) <= 50 else 0, color=BAR_COLOUR,
                 width=0.9)
        every = max(1, len(shown) // 20)  # at most about 20 labels
        axes.set_xticks(list(positions)[::every], labels[::every], rotation=45, ha="right")
        axes.set_ylabel(value)
    else:
        axes.barh(list(positions), shown[value], xerr=errors, capsize=3, color=BAR_COLOUR)
        axes.set_yticks(list(positions), labels)
        axes.set_xlabel(value + (" (bars: ±95% half-width of the noise)" if width else ""))
    axes.set_title(title)
    return fig


def _means_figure(Figure, report: dict, table: pd.DataFrame, name: str, top: int, titles: Mapping | None):
    """The means of the ``top`` rows of highest noisy count (the best supported, not the largest
    means, which are mostly noise) as points with their intervals, on the public clipping range."""
    given = table[table["mean"].notna()]
    shown = given.sort_values(["noisy_count", *key_columns(table)], ascending=[False] + [True] * len(
        key_columns(table))).head(top)
    fig = Figure(figsize=(8, max(2.5, 0.28 * len(shown) + 1.4)), layout="constrained")
    axes = fig.add_subplot()
    positions = list(range(len(shown)))[::-1]
    mean, low, high = (shown[c].astype(float).to_numpy() for c in MEAN_COLUMNS)  # nullable Float64 to numpy
    axes.errorbar(mean, positions, xerr=[mean - low, high - mean], fmt="o", color=BAR_COLOUR, capsize=3)
    axes.set_yticks(positions, _labels(shown, key_columns(table), titles))
    low, high = (report["algorithm"].get("chosen") or {}).get("low"), (report["algorithm"].get("chosen") or {}).get(
        "high")
    parameters = report["algorithm"]["parameters"]
    low = low if low is not None else parameters.get("low")
    high = high if high is not None else parameters.get("high")
    if isinstance(low, (int, float)) and isinstance(high, (int, float)):
        axes.set_xlim(low, high)
    level = interval_level(report)
    axes.set_xlabel(f"mean (bars: its {level}% interval, of the records bounding kept)")
    axes.set_title(f"{name}: the {len(shown)} of highest noisy count\n({len(given):,} rows have a mean)")
    return fig


def figure_svg(fig) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg")
    text = out.getvalue()
    return text[text.index("<svg"):]


def report_page(report: dict, tables: dict[str, Any], title: str = "dp-spark release",
                titles: Mapping | None = None) -> str:
    """One self-contained HTML page (no external files, scripts or fonts): guarantee, ledger,
    expected error, tables' first rows and a plot of each, for a privacy reviewer (``titles``:
    items' titles by id, for the plots' labels)."""
    from dp_spark.core import accuracy

    escape = html.escape
    try:
        plots = [f"<figure>{figure_svg(figure(report, tables, name, titles=titles))}</figure>"
                 for name in plotted(report, tables)]
    except ImportError as missing:
        plots = [f"<p>No plots: {escape(str(missing))}</p>"]
    accuracy_text = "\n".join(accuracy.format_section(report["accuracy"])) if "accuracy" in report else ""
    body = [f"<h1>{escape(title)}</h1>", summary_html(report, tables),
            "<h2>Expected error (the noise alone)</h2>", f"<pre>{escape(accuracy_text)}</pre>",
            "<h2>Plots</h2>", *plots,
            "<h2>privacy.json</h2>", "<details><summary>the whole report</summary><pre>"
            + escape(_json(report)) + "</pre></details>"]
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
             "table.dp-table{border-collapse:collapse;margin:.5em 0}"
             "table.dp-table td,table.dp-table th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
             # pre-wrap: the expected-error table's long lines wrap inside the page, not past its edge
             "pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}"
             "svg{max-width:100%;height:auto}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def _json(report: dict) -> str:
    import json

    return json.dumps(report, indent=2, default=str)

