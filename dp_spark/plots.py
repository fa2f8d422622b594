"""PNG plots of evaluation records (optional extra ``dp-spark[plot]``: matplotlib).

Plots are drawn from the long-format records of :mod:`dp_spark.evaluate`, so
they show exactly the numbers in ``evaluation.json``. They are built from
errors against true counts: NOT private, for comparing methods only.
"""

from __future__ import annotations

from pathlib import Path


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def metric_bars(records: list[dict], query: str, metric: str, path: str | Path, log_scale: bool = True) -> Path:
    """Bars of one metric, methods side by side within each dataset (paper 000 Figures 7 and 8)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = [r for r in records if r["query"] == query and r["metric"] == metric]
    if not chosen:
        raise ValueError(f"no records for query {query!r}, metric {metric!r}")
    datasets = list(dict.fromkeys(r["dataset"] for r in chosen))
    methods = list(dict.fromkeys(r["method"] for r in chosen))
    width = 0.8 / len(methods)
    figure, axes = plt.subplots(figsize=(max(5.0, 1.2 + 0.5 * len(datasets) * len(methods)), 4.0))
    for j, method in enumerate(methods):
        cells = {r["dataset"]: r for r in chosen if r["method"] == method}
        xs = [i + (j - (len(methods) - 1) / 2) * width for i, d in enumerate(datasets) if d in cells]
        means = [cells[d]["mean"] for d in datasets if d in cells]
        stds = [cells[d]["std"] for d in datasets if d in cells]
        axes.bar(xs, means, width, yerr=stds, label=method, capsize=2)
    axes.set_xticks(range(len(datasets)), datasets)
    if log_scale:
        axes.set_yscale("log")
    axes.set_ylabel(f"{metric} ({query})")
    axes.legend(fontsize="small", ncol=len(methods), loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    axes.set_title(f"{query}: {metric}, mean ± std over runs (not private)", fontsize="medium")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
