"""PNG plots of evaluation records (optional extra ``dp-spark[plot]``: matplotlib).

Plots are drawn from the long-format records of :mod:`dp_spark.lab.evaluate`, so
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

    # A metric NaN in every run (mean None) has nothing to draw.
    chosen = [r for r in records if r["query"] == query and r["metric"] == metric and r["mean"] is not None]
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


def metric_curves(records: list[dict], query: str, x_label: str, points: dict[str, float], path: str | Path,
                  log_x: bool = False, log_y: bool = False) -> Path:
    """One line per method and one panel per dataset: ``points`` maps a metric name to its
    x value (paper 000 Figure 9: top-K precision against K; Figure 6: MSE against l)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = [r for r in records if r["query"] == query and r["metric"] in points and r["mean"] is not None]
    if not chosen:
        raise ValueError(f"no records for query {query!r} and metrics {sorted(points)}")
    datasets = list(dict.fromkeys(r["dataset"] for r in chosen))
    figure, panels = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.6), squeeze=False)
    for panel, dataset in zip(panels[0], datasets):
        for method in dict.fromkeys(r["method"] for r in chosen if r["dataset"] == dataset):
            line = sorted((points[r["metric"]], r["mean"]) for r in chosen
                          if r["dataset"] == dataset and r["method"] == method)
            panel.plot([x for x, _ in line], [y for _, y in line], marker="o", markersize=3, label=method)
        panel.set_title(dataset, fontsize="medium")
        panel.set_xlabel(x_label)
        if log_x:
            panel.set_xscale("log")
        if log_y:
            panel.set_yscale("log")
    panels[0][0].set_ylabel(query)
    panels[0][-1].legend(fontsize="small")
    return _saved(figure, path)


def per_length(records: list[dict], metrics: list[str], path: str | Path, log_metrics=("support_error",
               "condition_number")) -> Path:
    """One panel per metric, one line per method, the itemset length (queries len1, len2, …) on
    the x axis (paper 003 Figures 1 and 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(1, len(metrics), figsize=(4.0 * len(metrics), 3.6), squeeze=False)
    for panel, metric in zip(panels[0], metrics):
        chosen = [r for r in records
                  if r["metric"] == metric and r["query"].startswith("len") and r["mean"] is not None]
        for method in dict.fromkeys(r["method"] for r in chosen):
            line = sorted((int(r["query"][3:]), r["mean"]) for r in chosen if r["method"] == method)
            panel.plot([x for x, _ in line], [y for _, y in line], marker="o", markersize=3, label=method)
        panel.set_xlabel("itemset length")
        panel.set_title(metric, fontsize="medium")
        if metric in log_metrics:
            panel.set_yscale("log")
    panels[0][-1].legend(fontsize="small")
    return _saved(figure, path)


def _saved(figure, path: str | Path) -> Path:
    """The figure, titled as every lab plot is (its means are not private), written to ``path``."""
    import matplotlib.pyplot as plt

    figure.suptitle("mean over runs (not private)", fontsize="small")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
