"""A release shown to a person: a short text summary, an HTML view for notebooks, plots, and one
self-contained HTML page for a privacy reviewer (``dp-spark report OUT --html FILE``).

Everything here reads the privacy report and the noisy tables only (DP outputs and the config),
never raw diagnostics. Pure functions over plain data; matplotlib (the ``plot`` extra) is needed
only for pictures.
"""

from __future__ import annotations

import html
import io
from typing import Any

import pandas as pd

HALFWIDTH = "ci95_halfwidth"
TOP = 20  # bars in a top-k plot
SHOWN_ROWS = 5  # rows of each table in the notebook view


def value_column(table: pd.DataFrame) -> str | None:
    """The released value a person looks at first: the first noisy_* column (support for itemsets)."""
    noisy = [c for c in table.columns if c.startswith("noisy_") and not c.endswith(HALFWIDTH)]
    return noisy[0] if noisy else ("support" if "support" in table.columns else None)


def halfwidth_column(table: pd.DataFrame, value: str) -> str | None:
    for name in (f"{value}_{HALFWIDTH}", HALFWIDTH):
        if name in table.columns:
            return name
    return None


def key_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if not c.startswith("noisy_") and not c.endswith(HALFWIDTH)
            and c not in ("support", "low", "high", "length")]


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


def short_mechanism(entry: dict, width: int = 40) -> str:
    """A ledger entry's mechanism in a few words for a console or a table (privacy.json has it whole)."""
    text = entry["mechanism"]
    for stop in (", ", ": ", " ("):
        text = text.split(stop, 1)[0]
    return text if len(text) <= width else text[: width - 1] + "…"


def epsilon_text(entry: dict) -> str:
    """The entry's ε, or for a Gaussian step (which has none) its zCDP cost ρ."""
    return f"rho {entry['rho']:.3g}" if entry.get("epsilon") is None else f"{entry['epsilon']:g}"


def noise_scale_text(entry: dict) -> str:
    """The entry's noise scale, or '-' for a selection, which adds no noise of a scale to a value."""
    return "-" if entry["mechanism"].startswith("partition selection") else f"{entry['noise_scale']:g}"


def summary_lines(report: dict, tables: dict[str, Any]) -> list[str]:
    """A release in a few lines: algorithm, spend, guarantee, each table's size and noise, ledger."""
    lines = [
        f"dp-spark release: {_algorithm_line(report)}; epsilon {report['epsilon_spent']:g} spent of "
        f"{report['epsilon_total']:g}" + (f", delta {report['delta_spent']:g}" if report.get("delta_spent") else ""),
        f"  guarantee: {report['guarantee']}",
        f"  privacy unit: {report['privacy_unit']}",
    ]
    lines.append("  tables:")
    for name, table in tables.items():
        rows = table_rows(report, name, table)
        size = f"{rows:>11,} rows" if rows is not None else "  (a Spark DataFrame)"
        column = value_column(table) if isinstance(table, pd.DataFrame) else None
        lines.append(f"    {name:<18}{size}  {column or ''} {_noise_of(report, name, column)}".rstrip())
    if _selected_privately(report):
        lines.append(f"  note: {ABSENT_NOTE}")
    bounding = _bounding(report)
    if bounding:
        lines.append(f"  {bounding}")
    lines.append("  ledger:")
    for entry in report["ledger"]:
        lines.append(f"    {entry['step']:<18} {short_mechanism(entry):<22} epsilon {epsilon_text(entry):<8} "
                     f"sensitivity {entry['sensitivity_l1']:g}, scale {noise_scale_text(entry)}, "
                     f"{entry['cells']:,} cells")
    return lines


def _html_table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, classes="dp-table", float_format=lambda v: f"{v:,.4g}")


def _ledger_frame(report: dict) -> pd.DataFrame:
    return pd.DataFrame([{"step": e["step"], "mechanism": short_mechanism(e, 60), "epsilon": epsilon_text(e),
                          "delta": e.get("delta", 0.0), "L1 sensitivity": e["sensitivity_l1"],
                          "noise scale": noise_scale_text(e), "cells": e["cells"]} for e in report["ledger"]])


def summary_html(report: dict, tables: dict[str, Any], shown_rows: int = SHOWN_ROWS) -> str:
    """The notebook view (``Release._repr_html_``): guarantee, ledger, each table's size and first rows."""
    escape = html.escape
    parts = [f"<div class='dp-release'><b>dp-spark release: {escape(_algorithm_line(report))}</b>; "
             f"epsilon {report['epsilon_spent']:g} spent of {report['epsilon_total']:g}<br>",
             f"<i>{escape(report['guarantee'])}</i><br>privacy unit: {escape(report['privacy_unit'])}",
             f"<br><b>Note:</b> {ABSENT_NOTE}" if _selected_privately(report) else "",
             f"<br>{html.escape(_bounding(report))}" if _bounding(report) else "",
             "<h4>Ledger</h4>", _html_table(_ledger_frame(report))]
    for name, table in tables.items():
        rows = table_rows(report, name, table)
        column = value_column(table) if isinstance(table, pd.DataFrame) else None
        noise = _noise_of(report, name, column)
        parts.append(f"<h4>{escape(name)}: {'a Spark DataFrame' if rows is None else f'{rows:,} rows'}"
                     f"{escape(f'; {column} {noise}') if noise else ''}</h4>")
        if isinstance(table, pd.DataFrame):
            parts.append(_html_table(table.head(shown_rows)))
        else:
            parts.append(f"<p>Not collected to the driver: <code>release.to_spark({escape(repr(name))})</code></p>")
    return "\n".join(parts) + "</div>"


def plotted(report: dict, tables: dict[str, Any]) -> list[str]:
    """The tables worth a picture: pandas tables with a released value."""
    return [name for name, table in tables.items() if isinstance(table, pd.DataFrame) and value_column(table)
            and len(table)]


def figure(report: dict, tables: dict[str, Any], name: str, top: int = TOP):
    """One table's picture (matplotlib Figure): a histogram's bars in bin order, otherwise the
    ``top`` largest released values; error bars at the 95% half-width where the noise is exact."""
    try:  # a Figure of its own, not pyplot's: a notebook's backend and open figures are left alone
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plots need matplotlib: pip install 'dp-spark[plot]' (or matplotlib)") from None

    table = tables[name]
    value = value_column(table)
    width = halfwidth_column(table, value)
    if name == "histogram":
        shown = table
        labels = shown["bin"].astype(str)
        title = f"{name}: {value} per bin"
    else:
        shown = table.nlargest(top, value)
        keys = key_columns(table)
        labels = shown[keys].astype(str).agg(" ".join, axis=1) if keys else shown.index.astype(str)
        title = f"{name}: the {len(shown)} largest {value}"
    tall = 4.0 if name == "histogram" else max(2.5, 0.28 * len(shown) + 1.2)
    fig = Figure(figsize=(8, tall), layout="constrained")
    axes = fig.add_subplot()
    errors = shown[width] if width else None
    positions = range(len(shown))[::-1] if name != "histogram" else range(len(shown))
    if name == "histogram":
        axes.bar(list(positions), shown[value], yerr=errors, capsize=3 if len(shown) <= 50 else 0, color="#4c78a8",
                 width=0.9)
        every = max(1, len(shown) // 20)  # at most about 20 labels
        axes.set_xticks(list(positions)[::every], list(labels)[::every], rotation=45, ha="right")
        axes.set_ylabel(value)
    else:
        axes.barh(list(positions), shown[value], xerr=errors, capsize=3, color="#4c78a8")
        axes.set_yticks(list(positions), list(labels))
        axes.set_xlabel(value + (" (bars: ±95% half-width of the noise)" if width else ""))
    axes.set_title(title)
    return fig


def figure_svg(fig) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg")
    text = out.getvalue()
    return text[text.index("<svg"):]


def report_page(report: dict, tables: dict[str, Any], title: str = "dp-spark release") -> str:
    """One self-contained HTML page (no external files, scripts or fonts): guarantee, ledger,
    expected error, tables' first rows and a plot of each, for a privacy reviewer."""
    from dp_spark.core import accuracy

    escape = html.escape
    try:
        plots = [f"<figure>{figure_svg(figure(report, tables, name))}</figure>" for name in plotted(report, tables)]
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
             "pre{background:#f6f6f6;padding:.5em;overflow-x:auto}svg{max-width:100%;height:auto}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def _json(report: dict) -> str:
    import json

    return json.dumps(report, indent=2, default=str)

