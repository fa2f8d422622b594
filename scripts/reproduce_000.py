"""Paper 000's comparison (SRA, HPA, LPA, DFT, GS; ε = 1) on MovieLens 1M and the
Netflix-shaped table, with its qualitative claims (specification §9.1) checked.

    python scripts/reproduce_000.py [--runs 20] [--netflix-rows 1000000]

Writes docs/lab/reproduction_000.md, docs/lab/img/reproduction_000_*.png (with the
``plot`` extra) and bench/results/reproduction_000/evaluation.json. Every number
is an error against true counts computed without noise: NOT private.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dp_spark.io.session import get_session  # noqa: E402
from dp_spark.jobs.config import load_config  # noqa: E402
from dp_spark.lab import (
    evaluate,
    plots,  # noqa: E402
)

METHODS = ["sra", "hpa", "lpa", "dft", "gs"]
L_VALUES = (5, 10, 20, 30, 50)  # Figure 6's sweep (the paper's Foursquare; here MovieLens 1M)
# The baselines' public bound M: the paper's max |T_k| of each dataset (Table 4), a published
# statistic, used here as the public constant the [FIX] of specification §3.3 asks for.
DATASETS = {"ml-1m": ("conf/movielens_compare.toml", 2314), "netflix": ("conf/netflix_compare.toml", 17_000)}


def claims(mean) -> list[tuple[str, bool, str]]:
    """(claim, holds?, the numbers) for each checkable claim of §9.1."""
    out = []

    def m(dataset, method, query, metric):
        return mean[(dataset, method, query, metric)]

    cases = [(d, q) for d in DATASETS for q in ("items", "edges")]
    for metric, label in (("mse", "MSE"), ("kl", "KL")):
        worst = {c: max(METHODS, key=lambda x, c=c: m(*c[:1], x, c[1], metric)) for c in cases}
        out.append((f"{label}: LPA is the worst everywhere", all(w == "lpa" for w in worst.values()),
                    ", ".join(f"{d} {q}: worst {w}" for (d, q), w in worst.items())))
    best = {c: min(METHODS, key=lambda x, c=c: m(c[0], x, c[1], "mse")) for c in cases}
    out.append(("MSE: SRA or HPA is lowest on Netflix edges (the paper's exceptions: Netflix items, "
                "MovieLens items and edges)", best[("netflix", "edges")] in ("sra", "hpa"),
                ", ".join(f"{d} {q}: best {b}" for (d, q), b in best.items())))
    gs_vs_dft = {c: m(c[0], "gs", c[1], "mse") <= m(c[0], "dft", c[1], "mse") for c in cases}
    out.append(("MSE: GS no worse than DFT except MovieLens items",
                all(ok for c, ok in gs_vs_dft.items() if c != ("ml-1m", "items")),
                ", ".join(f"{d} {q}: {'GS ≤ DFT' if ok else 'GS > DFT'}" for (d, q), ok in gs_vs_dft.items())))
    out.append(("KL: SRA better than HPA everywhere",
                all(m(d, "sra", q, "kl") < m(d, "hpa", q, "kl") for d, q in cases),
                ", ".join(f"{d} {q}: SRA {m(d, 'sra', q, 'kl'):.3f} / HPA {m(d, 'hpa', q, 'kl'):.3f}"
                          for d, q in cases)))
    fails = {(d, x): m(d, x, "items", "top10") for d in DATASETS for x in ("lpa", "dft", "gs")}
    out.append(("Top-10 items: LPA, DFT and GS fail (precision ≤ 0.3 here)", all(v <= 0.3 for v in fails.values()),
                ", ".join(f"{d} {x}: {v:.2f}" for (d, x), v in fails.items())))
    out.append(("Top-10 items: HPA reaches 100% on Netflix", m("netflix", "hpa", "items", "top10") == 1.0,
                f"HPA {m('netflix', 'hpa', 'items', 'top10'):.2f}"))
    sra_wins = {c: m(c[0], "sra", c[1], "top10") > m(c[0], "hpa", c[1], "top10") for c in cases}
    out.append(("Top-10: SRA beats HPA only on MovieLens items",
                sra_wins[("ml-1m", "items")] and not any(v for c, v in sra_wins.items() if c != ("ml-1m", "items")),
                ", ".join(f"{d} {q}: SRA {m(d, 'sra', q, 'top10'):.2f} / HPA {m(d, 'hpa', q, 'top10'):.2f}"
                          for d, q in cases)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--netflix-rows", type=int, default=1_000_000)
    parser.add_argument("--sweep-runs", type=int, default=10, help="runs per l in the Figure 6 sweep")
    args = parser.parse_args()
    netflix = ROOT / "data" / f"netflix-{args.netflix_rows}.parquet"
    if not netflix.exists():
        subprocess.run([sys.executable, "-m", "dp_spark.cli", "generate", "netflix", "--rows",
                        str(args.netflix_rows), "--out", str(netflix)], check=True, cwd=ROOT)
    spark = get_session("local[2]", {"spark.ui.showConsoleProgress": "false"})
    records, started = [], time.monotonic()
    for name, (conf, bound) in DATASETS.items():
        overrides = ["seed=0"] + ([f"source.path={netflix}"] if name == "netflix" else [])
        cfg = load_config(ROOT / conf, overrides)
        found = evaluate.evaluate(cfg, spark, METHODS, args.runs, bound,
                                  lambda message, name=name: print(f"[{name}] {message}", file=sys.stderr))
        records += [{**r, "dataset": name} for r in found]
    sweep = []
    for l in L_VALUES:
        cfg = load_config(ROOT / DATASETS["ml-1m"][0], ["seed=0", f"algorithm.l={l}"])
        found = evaluate.evaluate(cfg, spark, ["sra", "hpa"], args.sweep_runs, None,
                                  lambda message, l=l: print(f"[l = {l}] {message}", file=sys.stderr))
        sweep += [{**r, "dataset": "ml-1m", "metric": f"mse@l={l}"} for r in found if r["metric"] == "mse"]
    seconds = round(time.monotonic() - started)

    raw = ROOT / "bench" / "results" / "reproduction_000"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "evaluation.json").write_text(json.dumps(records, indent=2) + "\n")
    (raw / "sweep_l.json").write_text(json.dumps(sweep, indent=2) + "\n")
    images = ROOT / "docs" / "lab" / "img"
    pictures = []
    if plots.available():
        images.mkdir(parents=True, exist_ok=True)
        for query in ("items", "edges"):
            for metric in ("mse", "kl", "top10"):
                path = plots.metric_bars(records, query, metric, images / f"reproduction_000_{query}_{metric}.png",
                                         log_scale=metric == "mse")
                pictures.append(path.relative_to(ROOT / "docs"))
        top_k = {f"top{k}": k for k in (*evaluate.TOP_K_CURVE, evaluate.TOP_K)}
        path = plots.metric_curves(records, "items", "K (top-K precision)", top_k,
                                   images / "reproduction_000_items_topk.png", log_x=True)
        pictures.append(path.relative_to(ROOT / "docs"))
        for query in ("items", "edges"):
            path = plots.metric_curves(sweep, query, "l (records kept per user)",
                                       {f"mse@l={l}": l for l in L_VALUES},
                                       images / f"reproduction_000_{query}_mse_by_l.png", log_y=True)
            pictures.append(path.relative_to(ROOT / "docs"))

    mean = {(r["dataset"], r["method"], r["query"], r["metric"]): r["mean"] for r in records}
    lines = [
        "# Paper 000 reproduced: SRA, HPA and the baselines on MovieLens 1M and the Netflix-shaped table",
        "",
        f"Generated by `python scripts/reproduce_000.py --runs {args.runs} --netflix-rows {args.netflix_rows}` "
        f"({seconds} s on this 2-core machine). {evaluate.NOT_PRIVATE}.",
        "",
        "Settings (paper 000 §6): ε = 1; SRA ε/2 + ε/2; HPA ε/10 + 0.45ε + 0.45ε; l = 30 (MovieLens), 10 "
        "(Netflix); HPA's d = 20 (MovieLens) and 1 (Netflix). The baselines keep a uniform sample of at "
        "most M records per user, M = the paper's max |T_k| (2,314 and 17,000), and get ε/2 per query. "
        "DFT keeps k = 5% of the coefficients with the corrected noise √(2k)·M/ε. Each method bounds once "
        "(seed 0) and draws fresh noise in each run, except HPA, which redoes its selection per run. "
        f"Mean ± standard deviation over {args.runs} runs. Raw records: "
        "`bench/results/reproduction_000/evaluation.json`.",
        "",
    ]
    for name in DATASETS:
        curve = {f"top{k}" for k in evaluate.TOP_K_CURVE}  # plotted, not tabulated
        shown = [r for r in records if r["dataset"] == name and r["metric"] not in curve]
        lines += [f"## {name}", "", evaluate.markdown(shown), ""]
    sweep_mean = {(r["method"], r["query"], r["metric"]): r["mean"] for r in sweep}
    lines += [f"## MSE against l on MovieLens 1M (Figure 6; {args.sweep_runs} runs per point)", "",
              "| l | SRA items | HPA items | SRA edges | HPA edges |", "|---:|---:|---:|---:|---:|"]
    lines += [f"| {l} | " + " | ".join(f"{sweep_mean[(m, q, f'mse@l={l}')]:.4g}"
                                         for q in ("items", "edges") for m in ("sra", "hpa")) + " |"
              for l in L_VALUES]
    lines += [""]
    lines += ["## The paper's claims (specification §9.1)", "", "| claim | here | numbers |", "|---|---|---|"]
    lines += [f"| {text} | {'holds' if ok else 'does not hold'} | {numbers} |" for text, ok, numbers in claims(mean)]
    lines += [""] + [f"![{p.stem}]({p})" for p in pictures]
    (ROOT / "docs" / "lab" / "reproduction_000.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
