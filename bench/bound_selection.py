"""What `l = "auto"` costs against the best fixed bound, and what partition selection releases.

NOT PRIVATE: every number here is computed from the raw records, for the benchmark only.

    python bench/bound_selection.py expected [--netflix T.parquet] [--noise laplace,gaussian] --out DIR
        SRA's expected item-count MSE with l = "auto" (exact: Σ_b P(pick b)·MSE(b at the counts'
        share)), its 50th/90th/99th percentiles over the choice, against the best fixed l of every
        bound up to the largest candidate (the oracle) and the shipped default, both at the full
        budget; ε ∈ {0.1, 1, 5}, pure ε (Laplace) and ρ-zCDP from (ε, 1e-6) (Gaussian, c = 1);
        ML-100K, ML-1M, ML-1M's 100 most-rated movies against its whole catalogue, and the
        Netflix-shaped table.
    python bench/bound_selection.py runs --dataset ml-1m --epsilon 1 --runs 20 --out DIR
        Seeded releases of dp_spark.sra / dp_spark.hpa with l = "auto" (and HPA at fixed bounds):
        the empirical item MSE, to check the expectation and to measure HPA, which has no formula.
    python bench/bound_selection.py partition --runs 20 --out DIR
        Partition selection on MovieLens 1M with no item domain (ε = 1, δ = 1e-6).
    python bench/bound_selection.py speed --netflix T.parquet --repeats 3 --out DIR
        Wall time of SRA at l = 10 against l = "auto" on one table, interleaved, median of the runs.

Item counts only (no attributes), the Laplace publisher (discrete Laplace noise) or the
discrete Gaussian, as the job.
The MSE is over the public item domain, items without records included, as `dp-spark evaluate`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dp_spark.core import noise_choice, zcdp  # noqa: E402
from dp_spark.core.accounting import PURE, Accounting  # noqa: E402
from dp_spark.families.counts import bound_choice  # noqa: E402
from dp_spark.families.counts import family as counts  # noqa: E402
from dp_spark.families.registry import family_of  # noqa: E402
from dp_spark.lab.bound_curve import NOT_PRIVATE, sra_sampling_errors, user_item_table  # noqa: E402
from dp_spark.lab.tune import choice_percentiles  # noqa: E402
from dp_spark.release import bound_selection  # noqa: E402
from dp_spark.release.family import Domains, plan_split  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
EPSILONS = (0.1, 1.0, 5.0)
DELTA = 1e-6  # with --noise gaussian: the (ε, δ) each run's ρ is converted from
SHIPPED = {"ml-1m": 30, "ml-100k": 30, "ml-1m-top100": 30, "netflix-10m": 10}  # conf/movielens_sra.toml, netflix_sra
ITEM_CELLS = {"ml-100k": 1682, "netflix-10m": 17770}  # ml-1m: the movies of movies.dat


# ---------------------------------------------------------------------------
# Data: (user_id, item_id), one row per record, all in the public domain.


def movielens_1m_items() -> np.ndarray:
    lines = (DATA / "ml-1m" / "movies.dat").read_bytes().decode("latin-1").splitlines()
    return np.array(sorted(int(line.split("::")[0]) for line in lines if line.strip()))


def read_pairs(dataset: str, netflix: str | None) -> tuple[pd.DataFrame, int]:
    """The pairs and the number of items in the public domain. ``ml-1m-top100``: the ratings of
    ML-1M's 100 most-rated movies, against the whole catalogue (records on a small part of a
    large public domain, where a guess of how the bias spreads fails)."""
    if dataset in ("ml-1m", "ml-1m-top100"):
        with gzip.open(DATA / "ml-1m" / "ratings_pairs.dat.gz", "rt") as f:
            pairs = pd.read_csv(f, sep="::", engine="python", names=["user_id", "item_id"])
        items = movielens_1m_items()
        pairs = pairs[pairs["item_id"].isin(items)]
        if dataset == "ml-1m-top100":
            pairs = pairs[pairs["item_id"].isin(pairs["item_id"].value_counts().index[:100])]
        return pairs.reset_index(drop=True), items.size
    if dataset == "ml-100k":
        pairs = pd.read_csv(DATA / "ml-100k" / "u.data.gz", sep="\t", names=["user_id", "item_id", "r", "t"],
                            usecols=[0, 1])
        return pairs, ITEM_CELLS[dataset]
    if dataset == "netflix-10m":
        if netflix is None:
            raise SystemExit("netflix-10m needs --netflix PATH (dp-spark generate netflix --rows 10000000)")
        return pd.read_parquet(netflix, columns=["user_id", "item_id"]), ITEM_CELLS[dataset]
    raise SystemExit(f"unknown dataset {dataset!r}")


def cell_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """(user_id, cell, k, n) as the quality reads them: the item table's cells."""
    return user_item_table(pairs).rename(columns={"item_id": "cell"})


# ---------------------------------------------------------------------------
# The expectation.


@dataclass(frozen=True)
class Setting:
    """One evaluation point's public side: ε (with δ under zCDP), the noise, the candidates."""

    epsilon: float
    noise: str  # "laplace" (pure ε) or "gaussian" (ρ-zCDP from (ε, DELTA), c = 1)
    candidates: tuple[int, ...] = bound_selection.DEFAULT_CANDIDATES

    @property
    def accounting(self) -> Accounting:
        if self.noise == "laplace":
            return PURE
        return Accounting("gaussian", zcdp.rho_of(self.epsilon, DELTA), DELTA)

    def params(self, l, objective=None) -> counts.CountsParams:
        """SRA at bound ``l`` (with "auto", these candidates and ``objective``, default the product's)."""
        gaussian = dict(noise="gaussian", records_per_item=1) if self.noise == "gaussian" else {}
        auto = dict(candidates=self.candidates, objective=objective) if l == "auto" else {}
        return counts.CountsParams("sra", l, **auto, **gaussian)

    def split(self, l, cells: int) -> dict:
        return self.split_of(self.params(l), Domains(range(cells)))

    def split_of(self, params: counts.CountsParams, domains: Domains) -> dict:
        return plan_split(family_of("sra"), params, Fraction(str(self.epsilon)), domains, accounting=self.accounting)

    def noise_variance(self, bound: int, epsilon_items: Fraction) -> float:
        """One cell's noise variance at ``bound`` when its table gets ``epsilon_items``."""
        if self.noise == "gaussian":
            return noise_choice.gaussian_variance(bound, epsilon_items)
        return noise_choice.laplace_variance(bound, epsilon_items)


def pick_probabilities(table: pd.DataFrame, cells: int, setting: Setting) -> tuple[np.ndarray, Fraction]:
    """P(the choice picks each candidate), as a release of SRA with l = "auto" and item counts only
    makes it (the product's split, error model, user count, user cap, quality and sensitivity;
    bound_selection.pick_probabilities), and the items' ε."""
    split = setting.split("auto", cells)
    model = bound_choice.error_model(setting.params("auto"), Domains(range(cells)), split)
    norms = {}

    def norms_at(cap: int) -> list[int]:
        if cap not in norms:
            norms[cap] = bound_selection.squared_bias_norms(table, setting.candidates, model.records_per_cell, cap)
        return norms[cap]
    picks = bound_selection.pick_probabilities(norms_at, int(table["user_id"].nunique()), setting.candidates, model,
                                               split["epsilon_bound"], setting.noise == "gaussian")
    return picks, split["epsilon_items"]


def expected_rows(dataset: str, pairs: pd.DataFrame, cells: int, noise: str) -> list[dict]:
    table = cell_table(pairs)
    candidates = bound_selection.DEFAULT_CANDIDATES
    fine = range(1, candidates[-1] + 1)  # the oracle's grid: every bound up to the largest candidate
    errors = {e.bound: e for e in sra_sampling_errors(pairs, sorted(set(fine) | {SHIPPED[dataset]}), cells)}
    rows = []
    for epsilon in EPSILONS:
        setting = Setting(epsilon, noise, candidates)
        items_fixed = setting.split(SHIPPED[dataset], cells)["epsilon_items"]
        full = {b: errors[b].expected_mse(setting.noise_variance(b, items_fixed)) for b in errors}
        picks, items_auto = pick_probabilities(table, cells, setting)
        at_auto = np.array([errors[b].expected_mse(setting.noise_variance(b, items_auto)) for b in candidates])
        auto = float(np.dot(picks, at_auto))
        # The spread of a release's expected MSE over the mechanism's choice (the sample and the
        # noise averaged out): the 90th and 99th percentiles of E[MSE | pick].
        percentile = choice_percentiles(picks, at_auto)
        oracle = min(fine, key=lambda b: full[b])
        shipped = SHIPPED[dataset]
        rows.append({
            "dataset": dataset, "noise": noise, "epsilon": epsilon, "records": int(len(pairs)),
            "users": int(pairs["user_id"].nunique()), "items": cells,
            "auto_mse": auto, "auto_p50": percentile[0.5], "auto_p90": percentile[0.9], "auto_p99": percentile[0.99],
            "auto_picks": {int(b): round(float(p), 4) for b, p in zip(candidates, picks) if p >= 1e-4},
            "oracle_l": int(oracle), "oracle_mse": full[oracle],
            "shipped_l": shipped, "shipped_mse": full[shipped],
            # The least "auto" can reach: the best candidate, with the counts at their auto share.
            "floor_l": int(candidates[int(np.argmin(at_auto))]), "floor_mse": float(min(at_auto)),
            "auto_vs_oracle": auto / full[oracle], "auto_vs_shipped": auto / full[shipped],
            "p99_vs_oracle": percentile[0.99] / full[oracle],
        })
    return rows


def expected_markdown(rows: list[dict]) -> str:
    lines = ["| data | noise | ε | auto: E[MSE] (picks ≥ 0.05) | p99 | oracle l (1..256) | shipped | floor "
             "| auto/oracle | p99/oracle | auto/shipped |", "|---|---|---|---|---|---|---|---|---:|---:|---:|"]
    for r in rows:
        picks = ", ".join(f"{b}: {p:.2f}" for b, p in r["auto_picks"].items() if p >= 0.05)
        lines.append(f"| {r['dataset']} | {r['noise']} | {r['epsilon']:g} | {r['auto_mse']:.4g} ({picks}) | "
                     f"{r['auto_p99']:.4g} | {r['oracle_l']}: {r['oracle_mse']:.4g} | "
                     f"{r['shipped_l']}: {r['shipped_mse']:.4g} | {r['floor_l']}: {r['floor_mse']:.4g} | "
                     f"{r['auto_vs_oracle']:.3f} | {r['p99_vs_oracle']:.3f} | {r['auto_vs_shipped']:.3f} |")
    return "\n".join(lines)


def cmd_expected(args) -> None:
    rows = []
    for dataset in args.datasets.split(","):
        started = time.monotonic()
        pairs, cells = read_pairs(dataset, args.netflix)
        for noise in args.noise.split(","):
            rows += expected_rows(dataset, pairs, cells, noise)
        print(f"{dataset}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    write(args.out, "expected", rows, expected_markdown(rows))


# ---------------------------------------------------------------------------
# Seeded releases through the API.


def spark_session():
    from dp_spark.io.session import get_session

    # Spark's default 1 GB heap ran out at the 41st release of ML-1M in one session (HPA's sort
    # beside the cached frame), with no cache left behind by the releases.
    return get_session(conf={"spark.driver.memory": "4g"})


def pairs_frame(spark, pairs: pd.DataFrame):
    from pyspark import StorageLevel

    frame = spark.createDataFrame(pairs[["user_id", "item_id"]].astype("int64"))
    return frame.persist(StorageLevel.MEMORY_AND_DISK)


def domain_ids(dataset: str, cells: int) -> list[int]:
    return movielens_1m_items().tolist() if dataset == "ml-1m" else list(range(1, cells + 1))


def true_counts(pairs: pd.DataFrame, ids: list[int]) -> np.ndarray:
    return pairs["item_id"].value_counts().reindex(ids, fill_value=0).to_numpy(dtype=float)


def release_mse(release, ids: list[int], truth: np.ndarray) -> float:
    noisy = release["item_counts"].set_index("item_id")["noisy_count"].reindex(ids).to_numpy(dtype=float)
    return float(np.mean((noisy - truth) ** 2))


def summary(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "se": statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1
            else float("nan"), "runs": len(values)}


def cmd_runs(args) -> None:
    """Seeded releases (seeds 0..runs−1) of each method; a fresh seed gives a fresh SRA sample
    as well as fresh noise, so the mean estimates the same expectation as ``expected``."""
    import dp_spark

    pairs, cells = read_pairs(args.dataset, args.netflix)
    ids = domain_ids(args.dataset, cells)
    truth = true_counts(pairs, ids)
    spark = spark_session()
    frame = pairs_frame(spark, pairs)
    rows = []
    for method in args.methods.split(","):
        algorithm, _, bound = method.partition("@")  # sra@auto, hpa@auto, hpa@32
        release_of = getattr(dp_spark, algorithm)
        l = bound if bound == "auto" else int(bound)
        mses, chosen = [], []
        for seed in range(args.runs):
            started = time.monotonic()
            release = release_of(frame, items=ids, l=l, epsilon=args.epsilon, seed=seed)
            mses.append(release_mse(release, ids, truth))
            chosen.append((release.report["algorithm"].get("chosen") or {}).get("l", l))
            print(f"{method} seed {seed}: l = {chosen[-1]}, item MSE {mses[-1]:.4g} "
                  f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
        rows.append({"dataset": args.dataset, "epsilon": args.epsilon, "method": method, **summary(mses),
                     "chosen": {int(b): chosen.count(b) for b in sorted(set(chosen))}, "mse": mses})
    frame.unpersist()
    lines = ["| data | ε | method | mean item MSE ± s.e. | runs | chosen l (count) |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {r['method']} | {r['mean']:.4g} ± {r['se']:.2g} | "
                     f"{r['runs']} | {', '.join(f'{b}: {c}' for b, c in r['chosen'].items())} |")
    algorithms = "-".join(dict.fromkeys(method.partition("@")[0] for method in args.methods.split(",")))
    write(args.out, f"runs-{algorithms}-{args.dataset}-eps{args.epsilon:g}", rows, "\n".join(lines))


# ---------------------------------------------------------------------------
# Partition selection on MovieLens 1M, no item domain.


BOUNDED_EDGES = np.array([0, 25, 50, 75, 100, 125, 150, 175, 200, 250, 300, 400, 10**9])


def cmd_partition(args) -> None:
    """Seeded releases (seeds 0..runs−1) of dp_spark.sra with items = "private". Beside each, the
    items' user counts after the release's own bound on distinct items per user (the same seed
    draws the same bound), so the empirical release rate can be set against π(n) exactly."""
    import dp_spark
    from dp_spark.aggregates.key_users import users_per_key
    from dp_spark.bounding.user_keys import bounded_keys
    from dp_spark.release import partition_selection as ps

    pairs, _cells = read_pairs("ml-1m", None)
    raw_users = pairs.groupby("item_id")["user_id"].nunique()
    records = pairs.groupby("item_id").size()
    top_true = {k: set(records.sort_values(ascending=False, kind="stable").index[:k]) for k in (10, 100)}
    spark = spark_session()
    frame = pairs_frame(spark, pairs)
    l = args.l if args.l == "auto" else int(args.l)
    l0 = int(args.keys_per_user) if args.keys_per_user else (counts.DEFAULT_KEYS_PER_USER if l == "auto" else l)
    params = ps.SelectionParams(Fraction(args.epsilon) * counts.PARTITION_SHARE, args.delta, l0)
    released, precision = [], {10: [], 100: []}
    kept_by_bucket = np.zeros(BOUNDED_EDGES.size - 1)
    seen_by_bucket = np.zeros(BOUNDED_EDGES.size - 1)
    pi_by_bucket = np.zeros(BOUNDED_EDGES.size - 1)
    max_bounded = []
    for seed in range(args.runs):
        started = time.monotonic()
        release = dp_spark.sra(frame, items="private", l=l, epsilon=args.epsilon, delta=args.delta, seed=seed,
                               keys_per_user=l0)
        table = release["item_counts"]
        kept = set(table["item_id"].tolist())
        released.append(len(kept))
        noisy = table.set_index("item_id")["noisy_count"].sort_values(ascending=False, kind="stable")
        for k in precision:
            precision[k].append(len(top_true[k] & set(noisy.index[:k])) / k)
        keys, users = users_per_key(bounded_keys(frame, l0, seed), "item_id")
        bucket = np.digitize(users, BOUNDED_EDGES) - 1
        seen_by_bucket += np.bincount(bucket, minlength=BOUNDED_EDGES.size - 1)
        kept_by_bucket += np.bincount(bucket, weights=np.isin(keys, list(kept)).astype(float),
                                      minlength=BOUNDED_EDGES.size - 1)
        pi_by_bucket += np.bincount(bucket, weights=ps.release_probabilities(params, users),
                                    minlength=BOUNDED_EDGES.size - 1)
        max_bounded.append(int(users.max()))
        print(f"seed {seed}: {len(kept)} items released, most users of an item after bounding {users.max()} "
              f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    frame.unpersist()
    buckets = [{"bounded_users": f"[{BOUNDED_EDGES[b]}, {BOUNDED_EDGES[b + 1]})", "item_runs": int(seen_by_bucket[b]),
                "released": int(kept_by_bucket[b]), "empirical_rate": float(kept_by_bucket[b] / seen_by_bucket[b]),
                "expected_rate": float(pi_by_bucket[b] / seen_by_bucket[b])}
               for b in range(BOUNDED_EDGES.size - 1) if seen_by_bucket[b]]
    median = ps.median_count(params)
    row = {"epsilon": args.epsilon, "delta": args.delta, "l": l, "keys_per_user": l0,
           "epsilon_partition": float(params.epsilon), "runs": args.runs, "items_with_ratings": int(raw_users.size),
           "released": summary([float(x) for x in released]), "released_min": min(released),
           "released_max": max(released), "top10": summary(precision[10]), "top100": summary(precision[100]),
           "median_count": median, "median_count_formula": ps.median_count_formula(params),
           "threshold": ps.threshold(params),
           "items_with_raw_users_at_or_above_median": int((raw_users >= median).sum()),
           "most_users_after_bounding": max(max_bounded), "buckets": buckets,
           "expected_released_total": float(pi_by_bucket.sum() / args.runs)}
    lines = [
        f"ε = {args.epsilon:g}, δ = {args.delta:g}, l = {l}, keys_per_user = {l0}, ε_partition = "
        f"{float(params.epsilon):g}, {args.runs} seeded runs (seeds 0..{args.runs - 1}); "
        f"{raw_users.size} items have ratings",
        "",
        f"- items released: mean {row['released']['mean']:.1f} ± {row['released']['se']:.2g} s.e. "
        f"(min {row['released_min']}, max {row['released_max']}); expected from π at the bounded counts "
        f"{row['expected_released_total']:.1f}",
        f"- top-10 precision {row['top10']['mean']:.3f} ± {row['top10']['se']:.2g}, top-100 precision "
        f"{row['top100']['mean']:.3f} ± {row['top100']['se']:.2g} (against the true record counts)",
        f"- smallest user count (after the bound on distinct items) released with probability >= 1/2: "
        f"{median} (exact table; closed form {row['median_count_formula']}); always released from "
        f"{row['threshold']}; the most users any item keeps after bounding: {row['most_users_after_bounding']}; "
        f"{row['items_with_raw_users_at_or_above_median']} items have that many users before bounding",
        "",
        "| users per item after bounding | item-runs | released | rate | π(n), mean |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [f"| {b['bounded_users']} | {b['item_runs']} | {b['released']} | {b['empirical_rate']:.3f} | "
              f"{b['expected_rate']:.3f} |" for b in buckets]
    write(args.out, f"partition-ml-1m-l0-{l0}", row, "\n".join(lines))


# ---------------------------------------------------------------------------
# Speed: SRA at a fixed l against l = "auto", one session, interleaved.


def cmd_speed(args) -> None:
    from dp_spark.io.datasets import WEEKDAYS
    from dp_spark.jobs.config import build_config
    from dp_spark.jobs.runner import compute_release

    spark = spark_session()

    def config(l):
        return build_config({"output": "unused", "source": {"format": "netflix-synthetic", "path": args.netflix},
                             "domain": {"items": {"range": [1, 17770]}, "attributes": list(WEEKDAYS)},
                             "privacy": {"epsilon": 1.0},
                             "algorithm": {"name": "sra", "l": l}, "seed": 1})

    # The bound "auto" picks changes SRA's own work (the sample is larger at a larger l), so SRA at
    # the chosen l is timed too: auto against it is the cost of choosing.
    first = compute_release(config("auto"), spark, lambda message: None)
    chosen = first.report["algorithm"]["chosen"]["l"]
    jobs = {"sra": config(10), "sra_auto": config("auto"), "sra_at_chosen": config(chosen)}
    times = {name: [] for name in jobs}
    for round_ in range(args.warmups + args.repeats):
        for name, cfg in (jobs.items() if round_ % 2 == 0 else reversed(jobs.items())):
            started = time.perf_counter()
            result = compute_release(cfg, spark, lambda message: None)
            took = time.perf_counter() - started
            if round_ >= args.warmups:
                times[name].append(took)
            picked = (result.report["algorithm"].get("chosen") or {}).get("l", "")
            print(f"round {round_}: {name} {took:.1f} s {picked}", file=sys.stderr)
    medians = {name: statistics.median(t) for name, t in times.items()}
    row = {"table": args.netflix, "rows": int(spark.read.parquet(args.netflix).count()), "times": times,
           "median": medians, "chosen_l_first_run": chosen, "ratio": medians["sra_auto"] / medians["sra"],
           "ratio_at_chosen": medians["sra_auto"] / medians["sra_at_chosen"]}
    text = (f"{row['rows']:,} rows, item and edge (weekday) counts as `dp-spark bench`'s sra, ε = 1, {args.repeats} "
            f"timed runs each after {args.warmups} warm-up rounds, interleaved: sra (l = 10) median "
            f"{medians['sra']:.2f} s; sra with l = \"auto\" median {medians['sra_auto']:.2f} s (ratio "
            f"{row['ratio']:.2f}); sra at the l auto chose ({chosen}) median {medians['sra_at_chosen']:.2f} s "
            f"(auto/that {row['ratio_at_chosen']:.2f})")
    write(args.out, f"speed-{row['rows']}", row, text)


def write(out: str, name: str, rows, text: str) -> None:
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps({"not_private": NOT_PRIVATE, "rows": rows}, indent=2) + "\n")
    (directory / f"{name}.md").write_text(f"{NOT_PRIVATE}\n\n{text}\n")
    print(f"{NOT_PRIVATE}\n\n{text}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("expected")
    p.add_argument("--datasets", default="ml-100k,ml-1m,ml-1m-top100,netflix-10m")
    p.add_argument("--noise", default="laplace,gaussian", help="laplace (pure ε), gaussian (zCDP at δ = 1e-6)")
    p.add_argument("--netflix")
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_expected)
    p = sub.add_parser("runs")
    p.add_argument("--dataset", default="ml-1m")
    p.add_argument("--netflix")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--methods", default="sra@auto", help="algorithm@bound, e.g. sra@auto,hpa@auto,hpa@32")
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_runs)
    p = sub.add_parser("partition")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--l", default="auto", help="SRA's l (default auto)")
    p.add_argument("--keys-per-user", help="default: l, or 10 with \"auto\" (as the product)")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_partition)
    p = sub.add_parser("speed")
    p.add_argument("--netflix", required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmups", type=int, default=1)
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_speed)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
