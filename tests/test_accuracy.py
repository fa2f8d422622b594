"""Expected error from public parameters (dp_spark.core.accuracy, each family's accuracy, and
``dp-spark plan``): the exact discrete quantities against brute-force sums of the pmf, the 95%
interval's coverage on draws of the product's own sampler, the scales against the ledger entries
the mechanisms write, and the plan command, which reads no records."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

import numpy as np
import pytest

import dp_spark
from dp_spark import publishers
from dp_spark.cli import main
from dp_spark.core import accuracy
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource, discrete_laplace
from dp_spark.families.dpsense import theta as dpsense_algorithm
from dp_spark.families.dpsense.family import FAMILY as DPSENSE
from dp_spark.families.dpsense.family import DPSenseParams
from dp_spark.families.location_entropy import entropy as le
from dp_spark.families.location_entropy import sensitivity as entropy_sensitivity
from dp_spark.families.location_entropy.family import FAMILY as ENTROPY
from dp_spark.families.location_entropy.family import EntropyParams
from dp_spark.release import engine
from dp_spark.release.publisher_accuracy import publisher_accuracy
from tests.conftest import ROOT


def brute_pmf(t: float, span: int) -> tuple[np.ndarray, np.ndarray]:
    """P(Z = z) ∝ exp(−|z|/t) for |z| ≤ span, normalised by summing the terms themselves (the
    tail past span is below 1e-15 for the spans used)."""
    z = np.arange(-span, span + 1)
    weights = np.exp(-np.abs(z) / t)
    return z, weights / weights.sum()


SCALES = [Fraction(1, 3), Fraction(1), Fraction(2), Fraction(20), Fraction(200, 7), 66.5]


@pytest.mark.parametrize("t", SCALES)
@pytest.mark.parametrize("alpha", [0.5, 0.1, 0.05, 0.01, 0.001])
def test_halfwidth_is_the_smallest_h_covering_one_minus_alpha(t, alpha):
    z, pmf = brute_pmf(float(t), int(40 * float(t)) + 50)
    h = accuracy.discrete_laplace_halfwidth_steps(t, alpha)
    covered = pmf[np.abs(z) <= h].sum()
    assert covered >= 1 - alpha - 1e-12
    if h > 0:
        assert pmf[np.abs(z) <= h - 1].sum() < 1 - alpha
    assert accuracy.discrete_laplace_tail(h, t) == pytest.approx(1 - covered, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("t", SCALES)
def test_sd_is_the_square_root_of_the_pmfs_variance(t):
    z, pmf = brute_pmf(float(t), int(40 * float(t)) + 50)
    assert accuracy.discrete_laplace_sd(t) == pytest.approx(math.sqrt((pmf * z**2).sum()), rel=1e-9)


def test_a_grid_scales_sd_and_halfwidth_by_its_step():
    grid = Fraction(1, 1024)
    t = Fraction(300)  # steps
    assert accuracy.discrete_laplace_sd(t * grid, grid) == pytest.approx(float(grid) * accuracy.discrete_laplace_sd(t))
    assert accuracy.discrete_laplace_halfwidth(t * grid, 0.05, grid) == float(grid) * \
        accuracy.discrete_laplace_halfwidth_steps(t, 0.05)
    # On a fine grid the discrete law is close to the continuous Laplace: b·ln(1/α).
    assert accuracy.discrete_laplace_halfwidth(t * grid, 0.05, grid) == pytest.approx(float(t * grid) * math.log(20),
                                                                                      rel=0.01)


def test_tiny_and_huge_scales_stay_finite():
    assert accuracy.discrete_laplace_halfwidth_steps(Fraction(1, 1000), 0.05) == 0
    assert accuracy.discrete_laplace_sd(Fraction(1, 1000)) == 0.0
    # For a large scale the discrete law is the continuous one to within a step: b·ln(1/α).
    assert abs(accuracy.discrete_laplace_halfwidth_steps(10**7, 0.05) - 10**7 * math.log(20)) <= 2


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5, True, "0.1"])
def test_alpha_outside_zero_one_is_refused(alpha):
    with pytest.raises(ValueError, match="alpha"):
        accuracy.discrete_laplace(20, alpha)


def test_coverage_of_the_95_interval_on_the_products_sampler():
    """10^4 cells drawn with the exact sampler (fixed seed 2029) at the demo's scale 20 and at a
    grid scale: the 95% interval must cover 95% ± 1% of them (4.5 binomial sds at n = 10^4)."""
    for scale, grid in ((Fraction(20), Fraction(1)), (Fraction(5, 4), Fraction(1, 16))):
        noise = discrete_laplace(RandomSource(2029), scale / grid, 10_000) * float(grid)
        planned = accuracy.discrete_laplace(scale, 0.1, grid=grid)
        coverage = float(np.mean(np.abs(noise) <= planned.ci95_halfwidth))
        assert abs(coverage - 0.95) <= 0.01, (scale, coverage)
        assert abs(float(np.mean(np.abs(noise) <= planned.ci_halfwidth)) - 0.90) <= 0.015
        assert float(np.std(noise)) == pytest.approx(planned.sd, rel=0.05)


# ---------------------------------------------------------------------------
# The scales match what the mechanisms record in the ledger.


def _published(name: str, sensitivity: int, epsilon: Fraction, cells: int, **options):
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 50, cells)
    extra = {"sampled": rng.integers(0, 5, cells)} if name == "grouping" else {}
    return publishers.publish(name, counts, sensitivity, epsilon, Budget(epsilon), RandomSource(1), "cells",
                              **options, **extra)


@pytest.mark.parametrize("name, options", [("laplace", {}), ("alpa", {}), ("grouping", {}), ("ahp", {}),
                                           ("dpa_ahp", {}), ("sdpa_ahp", {}), ("ahp", {"rho": Fraction(1, 2)}),
                                           ("dpa_ahp", {"reproduce_paper": True}), ("fourier", {"k": 7})])
def test_publisher_scales_match_the_ledger(name, options):
    epsilon, cells, sensitivity = Fraction(1, 2), 64, 10
    published = _published(name, sensitivity, epsilon, cells, **options)
    planned = publisher_accuracy(name, options, sensitivity, epsilon, cells, 0.1)
    last = published.entries[-1]  # the step whose noise each cell carries (the second pass for GS and AHP)
    expected = float(last.noise_scale) / (cells if name == "alpa" else 1)
    assert planned.scale == pytest.approx(expected, rel=1e-12)
    assert planned.kind == (accuracy.EXACT if name in ("laplace", "alpa") else accuracy.UPPER_BOUND)


@pytest.mark.parametrize("cells, k", [(64, 7), (64, 33), (63, 32), (10, 1), (2, 2), (1, 1)])
def test_fourier_sd_is_the_inverse_dfts_exact_variance(cells, k):
    """Push a unit of noise through every kept coefficient part, as fourier.publish does (Im of the
    DC term and of the Nyquist term dropped), and sum the squares: the variance per cell."""
    spectrum_size = cells // 2 + 1
    variance = np.zeros(cells)
    for j in range(k):
        for part in (1, 1j):
            always_real = j == 0 or (cells % 2 == 0 and k == spectrum_size and j == k - 1)
            if part == 1j and always_real:
                continue
            spectrum = np.zeros(spectrum_size, dtype=complex)
            spectrum[j] = part
            variance += np.fft.irfft(spectrum, n=cells, norm="ortho") ** 2
    planned = publisher_accuracy("fourier", {"k": k}, 3, Fraction(1), cells, 0.1)
    part_sd = accuracy.discrete_laplace_sd(planned.scale, Fraction(1, 1024))
    assert np.allclose(variance, variance[0])  # the same for every cell
    assert planned.sd == pytest.approx(part_sd * math.sqrt(variance[0]), rel=1e-9)


@pytest.mark.parametrize("variant", ["limit", "baseline", "limit_cb", "limit_ss", "limit_cb_dp"])
def test_entropy_scales_match_the_ledger(variant):
    params = EntropyParams(variant=variant, M=3, C=4, k=2, outputs=("entropy", "visits", "users"))
    split = {"epsilon_entropy": Fraction(1), "epsilon_visits": Fraction(1, 2), "epsilon_users": Fraction(1, 4)}
    stats = le.LocationStats(np.array([0, 1, 3, 9]), np.array([0, 2, 5, 20]), np.array([0.0, 0.0, 0.9, 1.5]))
    budget = Budget(sum(split.values()), delta=params.delta)
    le.publish(stats, variant, le.Bounds(params.M, params.C), split, budget, RandomSource(3), delta=params.delta,
               k=params.k, xi=params.xi)
    planned = ENTROPY.accuracy(params, budget.total, None, split, 0.1)["location_entropy"]
    ledger = {entry.step: entry for entry in budget.entries}
    assert planned["noisy_entropy"].scale == pytest.approx(float(ledger["entropy"].noise_scale), rel=1e-12)
    assert planned["noisy_visits"].scale == float(ledger["visits"].noise_scale)
    assert planned["noisy_users"].scale == float(ledger["users"].noise_scale)
    smooth = variant in ("limit_ss", "limit_cb_dp")
    assert planned["noisy_entropy"].kind == (accuracy.LOWER_BOUND if smooth else accuracy.EXACT)
    if variant == "limit":  # by hand: M·(⌈GS(C)·2^16⌉ + 1)/ε grid steps of 2^-16
        steps = 3 * (math.ceil(entropy_sensitivity.global_sensitivity(4) * 65536) + 1)
        assert planned["noisy_entropy"].scale == steps / 65536


@pytest.mark.parametrize("algorithm, limit", [("dpsense", "normalize"), ("dpsense", "sample"),
                                              ("dpsense_s", "normalize")])
def test_dpsense_bound_is_the_noise_at_theta_max(algorithm, limit):
    params = DPSenseParams(algorithm, theta_max=12, limit=limit)
    split = {"epsilon_theta": Fraction(1, 10), "epsilon_counts": Fraction(9, 10)}
    budget = Budget(1)
    counts = np.arange(20) * (1 if limit == "sample" else 1024)
    dpsense_algorithm.publish_columns(counts, 12, limit, split["epsilon_counts"], budget, RandomSource(2))
    planned = DPSENSE.accuracy(params, Fraction(1), None, split, 0.1)["item_counts"]["noisy_count"]
    most_alpha = 3 if algorithm == "dpsense_s" else 1
    assert planned.scale == pytest.approx(float(budget.entries[-1].noise_scale) * most_alpha, rel=1e-12)
    assert planned.kind == accuracy.UPPER_BOUND and "chosen privately" in planned.note


# ---------------------------------------------------------------------------
# dp-spark plan and dp_spark.plan: no records, no budget.


def missing_source_config(tmp_path) -> str:
    config = tmp_path / "job.toml"
    config.write_text(f"""
output = "{tmp_path / 'out'}"
[source]
format = "parquet"
path = "{tmp_path / 'no such table'}"
[domain]
items = {{ range = [1, 500] }}
attributes = ["a", "b", "c"]
[privacy]
epsilon = 0.8
[algorithm]
name = "sra"
l = 4
""")
    return str(config)


def test_plan_reads_no_records(tmp_path, capsys):
    """The source does not exist, yet the plan is made (and no Spark is started: unit tier)."""
    assert main(["plan", missing_source_config(tmp_path), "--alpha", "0.2"]) == 0
    out = capsys.readouterr().out
    expected = accuracy.discrete_laplace(Fraction(4) / (Fraction(4, 5) * Fraction(19, 40)), 0.2)  # l / epsilon_items
    row = [line for line in out.splitlines() if line.strip().startswith("item_counts")][0]
    assert f"{expected.sd:,.4g}" in row and f" {expected.ci95_halfwidth:,.4g} " in row
    assert f" {expected.ci_halfwidth:,.4g} " in row and "±80%" in out
    assert "bias" in out and "Nothing was read" in out
    assert not (tmp_path / "out").exists()


def test_plan_json_is_privacy_jsons_section(tmp_path, capsys):
    assert main(["plan", missing_source_config(tmp_path), "--json", "--set", "algorithm.l=9"]) == 0
    section = json.loads(capsys.readouterr().out)
    noise = section["tables"]["edge_counts"]["noisy_count"]
    scale = Fraction(9) / (Fraction(4, 5) * Fraction(19, 40))  # l / epsilon_edges
    assert noise["scale"] == float(scale)
    assert noise["ci90_halfwidth"] == accuracy.discrete_laplace(scale, 0.1).ci_halfwidth


@pytest.mark.parametrize("alpha", ["0", "1", "-3"])
def test_plan_refuses_a_bad_alpha(tmp_path, capsys, alpha):
    assert main(["plan", missing_source_config(tmp_path), "--alpha", alpha]) == 2
    assert "--alpha must be strictly between 0 and 1" in capsys.readouterr().err


def test_plan_of_every_shipped_config(monkeypatch, capsys):
    """Every shipped config plans (their data need not exist); the demo within its 3 s in-process."""
    monkeypatch.chdir(ROOT)
    if not (ROOT.parent / "shared" / "data" / "ml-1m").exists():
        pytest.skip("the MovieLens configs read their public catalogue from ../shared/data")
    for config in sorted((ROOT / "conf").glob("*.toml")):
        assert main(["plan", str(config)]) == 0, config
        assert "kind" in capsys.readouterr().out


def test_plan_of_a_user_histogram_without_an_item_domain(tmp_path, capsys):
    """The histogram may leave out domain.items (every record counts): plan as run does."""
    config = tmp_path / "histogram.toml"
    config.write_text('output = "out"\n[source]\nformat = "parquet"\npath = "nowhere.parquet"\n[privacy]\n'
                      'epsilon = 1\n[algorithm]\nname = "user_histogram"\nquantity = "records"\n'
                      'bins = [1, 2, 5]\n')
    assert main(["plan", str(config)]) == 0
    out = capsys.readouterr().out
    assert "no item domain" in out and "histogram" in out


def test_api_plan_matches_the_cli_and_charges_nothing(tmp_path, capsys):
    budget = dp_spark.DatasetBudget(0.1)
    planned = dp_spark.plan("sra", items=range(1, 501), attribute="attr", attributes=["a", "b", "c"], l=4,
                            epsilon=0.8, budget=budget)
    assert budget.spent == 0
    assert main(["plan", missing_source_config(tmp_path), "--json"]) == 0
    assert planned.accuracy == json.loads(capsys.readouterr().out)
    assert "item_counts" in str(planned) and planned.epsilon_split == {"epsilon_bounding": 0.04, "epsilon_items": 0.38,
                                                                      "epsilon_edges": 0.38}
    with pytest.raises(dp_spark.ConfigError, match="unknown algorithm"):
        dp_spark.plan("nope", epsilon=1)
    with pytest.raises(dp_spark.ConfigError, match="alpha"):
        dp_spark.plan("sra", items=range(1, 5), l=1, epsilon=1, alpha=0)


def test_halfwidth_columns_only_for_exactly_known_noise():
    import pandas as pd

    exact = accuracy.discrete_laplace(20, 0.1)
    bound = accuracy.discrete_laplace(20, 0.1, kind=accuracy.UPPER_BOUND)
    tables = {"a": pd.DataFrame({"noisy_count": [1, 2]}), "b": pd.DataFrame({"noisy_count": [3]}),
              "c": pd.DataFrame({"noisy_x": [1.0], "noisy_y": [2.0]})}
    out = engine.with_halfwidth_columns(tables, {"a": {"noisy_count": exact}, "b": {"noisy_count": bound},
                                                 "c": {"noisy_x": exact, "noisy_y": exact}})
    assert list(out["a"]["ci95_halfwidth"]) == [60.0, 60.0]
    assert list(out["b"].columns) == ["noisy_count"]
    assert list(out["c"].columns) == ["noisy_x", "noisy_y", "noisy_x_ci95_halfwidth", "noisy_y_ci95_halfwidth"]


# ---------------------------------------------------------------------------
# A real seeded run: privacy.json, the Parquet tables and the console carry the plan's numbers.


def test_plan_prints_what_a_seeded_run_reports(spark, tmp_path, capsys):
    import pandas as pd

    from tests.test_end_to_end import ml100k_config

    config = ml100k_config(tmp_path, 'name = "sra"\nl = 20')
    config.write_text(config.read_text().replace("epsilon = 1.0", "epsilon = 0.02"))  # small: noise swamps counts
    assert main(["plan", str(config), "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert main(["plan", str(config)]) == 0
    planned_text = capsys.readouterr().out
    assert main(["run", str(config), "--set", "guards.refuse_noise_only=false"]) == 0  # noise swamps it, on purpose
    console = capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "privacy.json").read_text())
    # The run's accuracy section is the plan's, with the DP estimate of what bounding removed added.
    bounding = report["accuracy"].pop("bounding")
    assert report["accuracy"] == {k: v for k, v in planned.items() if k != "bounding"}
    assert {k: bounding[k] for k in planned["bounding"]} == planned["bounding"]
    assert {"records_kept_noisy", "kept_share_at_most_95", "warning"} <= set(bounding)
    noise = planned["tables"]["item_counts"]["noisy_count"]
    assert noise["scale"] == float(Fraction(20) / (Fraction(2, 100) * Fraction(19, 40))) and noise["kind"] == "exact"
    assert f"{noise['ci95_halfwidth']:,.4g}" in planned_text and f"{noise['sd']:,.4g}" in planned_text
    for table in ("item_counts", "edge_counts"):
        frame = pd.read_parquet(tmp_path / "out" / table)
        assert set(frame["ci95_halfwidth"]) == {planned["tables"][table]["noisy_count"]["ci95_halfwidth"]}
        assert report["outputs"][table]["columns"][-1] == "ci95_halfwidth"
    # The console: ± beside each count; at epsilon 0.02 on 100K ratings the top-10 is noise, and it says so.
    top = [line for line in console.splitlines() if re.match(r"\s+\d+\. item ", line)]
    assert len(top) == 10 and all(f"±{noise['ci95_halfwidth']:,.4g}" in line for line in top)
    assert "may be at the top by noise alone" in console
    assert "bounding kept" in console and "WARNING: the noise is wider than the average count" in console
    # The noise-only refusal's thresholds (off for this run, which is noise on purpose): the plan's.
    figures = report["guards"]["noise_only"]["figures"]
    assert list(figures) == ["records kept", "item_counts total", "edge_counts total"]
    said = " or ".join(f"{name} reaches {figure['threshold']:,.0f}" for name, figure in figures.items())
    assert f"noise-only refusal: a run releases only if {said}" in planned_text


# ---------------------------------------------------------------------------
# Releases of little use: the plan warns where the noise is wider than the statistic's whole range.


@pytest.mark.parametrize("epsilon, variant, warned", [
    ("5", "limit", False),     # ±2.08: wider than ln n only below 8 users
    ("1", "limit", True),      # ±10.4: below 32,301 users
    ("0.1", "limit", True),
    ("1", "limit_ss", False),  # its noise is known only as at least ±0.03 (the xi floor): no claim of uselessness
])
def test_plan_warns_when_the_entropys_noise_is_wider_than_its_range(capsys, epsilon, variant, warned):
    overrides = ["--set", f"privacy.epsilon={epsilon}", "--set", f'algorithm.variant="{variant}"']
    if variant == "limit_ss":
        overrides += ["--set", "privacy.delta=1e-8"]
    assert main(["plan", str(ROOT / "conf" / "sparse_entropy.toml"), *overrides]) == 0
    said = capsys.readouterr().out
    assert ("WARNING: the entropy's noise" in said) == warned
    assert main(["plan", str(ROOT / "conf" / "sparse_entropy.toml"), "--json", *overrides]) == 0
    section = json.loads(capsys.readouterr().out)
    assert bool(section.get("warnings")) == warned
    if warned:
        width = section["tables"]["location_entropy"]["noisy_entropy"]["ci95_halfwidth"]
        assert width > math.log(10) and "fewer than n = " in section["warnings"][0]


def test_the_entropy_warning_is_worked_out_at_the_least_noise_a_private_choice_can_give():
    from dp_spark.core.domain import ItemDomain
    from dp_spark.release.family import Domains

    domains = Domains(ItemDomain(np.arange(1, 11), "1..10"))
    split = {"epsilon_bound": Fraction(1, 2), "epsilon_entropy": Fraction(9, 2)}
    # The smallest candidates (M = C = 1) at 4.5 leave a noise narrower than ln 10; the largest would not.
    auto = EntropyParams(variant="limit", M="auto", C="auto", M_candidates=(1, 30), C_candidates=(1, 50))
    assert "warnings" not in engine.accuracy_section(ENTROPY, auto, Fraction(5), domains, split)
    fixed = EntropyParams(variant="limit", M=30, C=50)
    assert len(engine.accuracy_section(ENTROPY, fixed, Fraction(5), domains, split)["warnings"]) == 1


@pytest.mark.unit
def test_a_noisy_removed_count_below_zero_is_said_as_zero_and_kept_in_the_report():
    bounding = {"records_kept": {"ci95_halfwidth": 10.0}, "records_removed": {"ci95_halfwidth": 12.0},
                "cap_per_user": 50, "kept_share_at_most_95": None, "records_kept_noisy": 900,
                "records_removed_at_least_noisy": -2981}
    assert "removed at least 0 ±12" in accuracy.bounding_text(bounding)
    assert "removed at least 7 ±12" in accuracy.bounding_text(dict(bounding, records_removed_at_least_noisy=7))
    assert bounding["records_removed_at_least_noisy"] == -2981
