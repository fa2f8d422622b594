"""What a reviewer reads of a means release, from public numbers alone (no Spark): the mean's
interval half-width by a cell's records and the count a mean needs, in plan and the report; the
ledger as people read it (ε and ρ apart, L2 for Gaussian steps, sums in value units, "spent of"
what was asked); the release's one-line description; the means' plot; and tune's rows."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark import display
from dp_spark.core import accuracy, noise_choice
from dp_spark.core.clip_range import ClipRange, mean_interval
from dp_spark.core.discrete_gaussian import discrete_gaussian_halfwidth
from dp_spark.core.domain import item_domain_of_ids
from dp_spark.families.means.params import MeansParams
from dp_spark.families.means.report import RECORDS_SHOWN
from dp_spark.lab import tune_means
from dp_spark.release.sum_tables import mean_halfwidth

PLAN = dict(items=range(1, 101), low=1, high=5, l=100, records_per_item=1, epsilon=1, delta=1e-6, noise="gaussian")


def _mean(planned) -> dict:
    return planned.accuracy["tables"]["item_means"]["mean"]


def test_plan_gives_the_means_halfwidth_by_users_and_the_count_a_mean_needs():
    mean = _mean(dp_spark.plan("means", **PLAN))  # no value column: plan reads nothing
    widths = {int(n): h for n, h in mean["interval_halfwidth_by_records"].items()}
    assert list(widths) == list(RECORDS_SHOWN) and mean["interval_level"] == 0.95
    assert mean["records_counted"] == "users"  # one record per user and item: a cell's records are its users
    least = mean["least_records_for_a_mean"]
    # Below the count's half-width no mean; above it the half-width shrinks about as 1/n.
    assert all((h is None) == (n < least) for n, h in widths.items())
    assert widths[10_000] < widths[1_000] / 5
    # Counted as the release decides: a mean where the noisy count exceeds the count's half-width
    # at 2.5% (half of the 5% a 95% interval may fail), so at least that plus one.
    counts = dp_spark.plan("means", **PLAN).accuracy["tables"]["item_means"]["noisy_count"]
    count_h = float(discrete_gaussian_halfwidth(counts["scale"] ** 2, 0.025))
    assert least == math.floor(count_h) + 1
    text = "\n".join(accuracy.format_section(dp_spark.plan("means", **PLAN).accuracy))
    assert f"a mean is given where the noisy count is at least {least:,}, so a cell needs about that many users" in text
    # Without the per-item cap a user may put several records in a cell: records, not users.
    capless = _mean(dp_spark.plan("means", **{**PLAN, "records_per_item": None}))
    assert capless["records_counted"] == "records kept"


def test_a_higher_confidence_widens_every_interval_and_needs_more_records():
    at = {level: _mean(dp_spark.plan("means", **PLAN, confidence=level)) for level in (0.9, 0.95, 0.99)}
    assert at[0.9]["least_records_for_a_mean"] < at[0.95]["least_records_for_a_mean"] < at[0.99][
        "least_records_for_a_mean"]
    for n in ("1000", "10000"):
        assert at[0.9]["interval_halfwidth_by_records"][n] < at[0.95]["interval_halfwidth_by_records"][n] < at[0.99][
            "interval_halfwidth_by_records"][n]
    with pytest.raises(dp_spark.ConfigError, match="confidence"):
        dp_spark.plan("means", **PLAN, confidence=95)


def test_the_halfwidth_is_the_widest_over_where_the_mean_lies():
    clip = ClipRange(1, 5, 1000)
    # By hand: at the centre the corners are ±h_S/(n − h_C) grid units; towards an end the count's
    # half-width adds, until the interval is clipped to the range.
    widest = mean_halfwidth(1000, 100.0, 20_000.0, clip)
    centre = mean_interval(0, 1000, 20_000.0, 100.0, clip)
    assert widest >= (centre.high - centre.low) / 2 > 0
    assert mean_halfwidth(100, 100.0, 20_000.0, clip) is None  # 100 − 100 is not positive: no mean
    assert mean_halfwidth(101, 100.0, 20_000.0, clip) is not None


def test_the_ledger_shows_rho_apart_l2_for_gaussian_steps_and_sums_in_value_units():
    report = {"accounting": "zCDP", "ledger": [
        {"step": "value_sums", "mechanism": "discrete Gaussian", "epsilon": None, "rho": 0.0081, "delta": 0.0,
         "sensitivity_l1": 100_000.0, "sensitivity_l2": 10_000.0, "noise_scale": 78_600.0, "cells": 3883,
         "value_unit": 0.002},
        {"step": "bounding: kept", "mechanism": "discrete Laplace", "epsilon": 0.0349, "delta": 0.0,
         "sensitivity_l1": 100.0, "noise_scale": 2866.0, "cells": 1},
        {"step": "select items", "mechanism": "partition selection, optimal per-key release probability",
         "epsilon": 0.5, "delta": 5e-7, "sensitivity_l1": 10.0, "noise_scale": 20.0, "cells": 0}]}
    rows = {row["step"]: row for row in display.ledger_rows(report)}
    sums = rows["value_sums"]
    assert (sums["epsilon"], sums["rho"], sums["sensitivity"], sums["noise scale"]) == ("-", "0.0081", "L2 20", "157.2")
    kept = rows["bounding: kept"]  # a pure step under zCDP costs ε²/2
    assert (kept["epsilon"], kept["rho"], kept["sensitivity"]) == ("0.0349", f"{0.0349 ** 2 / 2:.3g}", "L1 100")
    selection = rows["select items"]  # the candidates' number is not released, nor a scale of noise on values
    assert (selection["cells"], selection["noise scale"], selection["delta"]) == ("-", "-", "5e-07")
    header = display.ledger_lines(report)[0].split()
    assert header == ["step", "mechanism", "epsilon", "rho", "delta", "sensitivity", "noise", "scale", "cells"]
    pure = {"ledger": [report["ledger"][1]]}  # no ρ and no δ anywhere: no columns for them
    assert display.ledger_lines(pure)[0].split() == ["step", "mechanism", "epsilon", "sensitivity", "noise", "scale",
                                                     "cells"]


def test_spent_of_says_the_epsilon_that_was_asked():
    zcdp = {"epsilon_spent": 0.999994, "epsilon_total": 0.9999994, "epsilon_asked": 1.0}
    assert display.spent_text(zcdp) == "epsilon 0.999994 spent of 1"
    assert display.spent_text({"epsilon_spent": 0.5, "epsilon_total": 1.0}) == "epsilon 0.5 spent of 1"


def test_the_description_names_gaussian_noise_and_counts_records_in_the_singular():
    said = noise_choice.described("gaussian", 1)
    assert said == "discrete Gaussian noise (zCDP), at most 1 record per user and item"
    assert noise_choice.described("gaussian", 3).endswith("at most 3 records per user and item")
    assert noise_choice.described("laplace") == ""
    from dp_spark.core.domain import item_domain_of_ids
    from dp_spark.families.counts.family import CountsParams, _describe
    from dp_spark.release.family import Domains

    params = CountsParams("sra", 10, noise="gaussian", records_per_item=1, private_items=True, delta=1e-6,
                          keys_per_user=1)
    text = _describe(params, Fraction(1), Domains(item_domain_of_ids([1, 2], "ids")))
    assert "publisher laplace" not in text and "at most 1 record per user" in text  # the negative control's words


def _means_release() -> tuple[dict, dict]:
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 400, 30)
    counts[0] = 399  # item 1, which has a title, is among the plotted
    means = rng.uniform(1.5, 4.5, 30)
    given = counts > 150
    table = pd.DataFrame({"item_id": np.arange(1, 31), "noisy_count": counts, "noisy_sum": counts * means,
                          "mean": pd.array(np.where(given, means, np.nan), dtype="Float64"),
                          "mean_low": pd.array(np.where(given, means - 0.3, np.nan), dtype="Float64"),
                          "mean_high": pd.array(np.where(given, np.minimum(means + 0.4, 5), np.nan), dtype="Float64"),
                          "noisy_count_ci95_halfwidth": 150})
    report = {"algorithm": {"name": "means", "parameters": {"low": 1.0, "high": 5.0, "confidence": 0.95}},
              "accuracy": {"tables": {}}}
    return report, {"item_means": table}


def test_the_means_plot_shows_each_mean_with_its_interval_labelled_by_item_and_title():
    pytest.importorskip("matplotlib")
    report, tables = _means_release()
    table = tables["item_means"]
    fig = display.figure(report, tables, "item_means", top=5, titles={int(table["item_id"][0]): "A Film (1999)"})
    axes = fig.axes[0]
    shown = table[table["mean"].notna()].sort_values(["noisy_count", "item_id"], ascending=[False, True]).head(5)
    points = axes.lines[0].get_xdata()  # errorbar's markers: the means, highest noisy count on top
    assert list(np.round(points, 9)) == list(np.round(shown["mean"].astype(float), 9))
    top_down = [label.get_text() for _, label in sorted(zip(axes.get_yticks(), axes.get_yticklabels()),
                                                         key=lambda pair: -pair[0])]
    # Ids as written (1, not 1.0), each with its title when the catalogue gives one.
    assert top_down == [f"{i} A Film (1999)" if i == 1 else str(i) for i in shown["item_id"]]
    assert axes.get_xlim() == (1.0, 5.0)
    assert "95% interval" in axes.get_xlabel() and "noisy_count" not in axes.get_xlabel()
    summary = "\n".join(display.summary_lines({**report, "epsilon_spent": 1.0, "epsilon_total": 1.0,
                                               "guarantee": "g", "privacy_unit": "user", "ledger": []}, tables))
    assert f"mean for {int(table['mean'].notna().sum())} rows (95% interval each)" in summary


def test_tune_for_means_counts_items_with_a_mean_and_scores_a_bound_that_keeps_too_few():
    # 400 heavy users rate all 20 items 5, 4,000 light ones rate 3 items 1 to 3: about 1,000 ratings
    # per item, their mean near 3.2. At l = 1 a heavy user keeps one rating of 20 and each item's
    # mean falls near 2.1 (a bias its narrow interval does not show); at l = 20 nothing is dropped
    # and every item still clears the count's threshold.
    rng = np.random.default_rng(3)
    rows = [(u, i, 5.0) for u in range(400) for i in range(1, 21)]
    rows += [(u, int(i), float(rng.integers(1, 4))) for u in range(400, 4400)
             for i in rng.choice(np.arange(1, 21), 3, replace=False)]
    records = pd.DataFrame(rows, columns=["user_id", "item_id", "value"])
    params = MeansParams(1.0, 5.0, 20)
    split = {"epsilon_bounding": Fraction(1, 20), "epsilon_counts": Fraction(57, 20) * Fraction(3, 10),
             "epsilon_sums": Fraction(57, 20) * Fraction(7, 10)}
    table = tune_means.tune_rows(records, params, [1, 4, 20], split, np.arange(1, 22))  # item 21: never rated
    by = {row.bound: row for row in table}
    assert [row.records_kept for row in table] == [4400, 400 * 4 + 4000 * 3, 400 * 20 + 4000 * 3]
    assert by[20].bias_rms == pytest.approx(0.0, abs=1e-12)  # every record kept: no bias
    assert by[1].bias_rms > 0.8 and by[4].bias_rms > by[20].bias_rms
    # Every rated item gets a mean at each bound; the unrated one only by noise, rarely.
    for row in table:
        assert 20 <= row.items_with_mean < 20.2
    assert tune_means.best(table).bound == 20 and by[20].score < by[4].score < by[1].score
    assert by[20].error_rms == pytest.approx(by[20].noise_sd_rms) and by[1].error_rms >= by[1].bias_rms
    lines = tune_means.table(table, configured=4)
    assert all(line.endswith("NOT PRIVATE") for line in lines)
    marks = [line.removesuffix("NOT PRIVATE").split()[7:] for line in lines[1:]]  # after the score
    assert marks == [[], ["<"], ["*"]]  # the config's l, and the lowest score


def test_tune_for_hpa_means_keeps_each_users_most_popular_records():
    # 300 heavy users rate all 12 items 5; 3,000 light users rate one of items 1-4 (each 750 times)
    # 1, so items 1-4 are the popular ones. At l = 4, HPA keeps each heavy user's ratings of items
    # 1-4: their means carry no bias from bounding, and items 5-12 lose every heavy rating. SRA's
    # uniform sample keeps a third of each heavy user's ratings of every item, items 1-4 included.
    rows = [(u, i, 5.0) for u in range(300) for i in range(1, 13)]
    rows += [(u, 1 + u % 4, 1.0) for u in range(300, 3300)]
    records = pd.DataFrame(rows, columns=["user_id", "item_id", "value"])
    params = MeansParams(1.0, 5.0, 4, bounding="hpa")
    scores = tune_means.hpa_scores(records, params, item_domain_of_ids(list(range(1, 13)), "1..12"))
    assert max(scores[i] for i in range(5, 13)) < min(scores[i] for i in range(1, 5))
    ranked = tune_means.sampled_ranks(records, scores=scores)
    heavy_kept = ranked[(ranked["user_id"] < 300) & (ranked["rank"] < 4)]
    assert sorted(heavy_kept["item_id"].unique()) == [1, 2, 3, 4] and len(heavy_kept) == 1200
    split = {"epsilon_bounding": Fraction(1, 20), "epsilon_counts": Fraction(57, 20) * Fraction(3, 10),
             "epsilon_sums": Fraction(57, 20) * Fraction(7, 10)}
    hpa, sra = (tune_means.tune_rows(records, params, [4, 12], split, np.arange(1, 13), scores=given)
                for given in (scores, None))
    assert [r.records_kept for r in hpa] == [r.records_kept for r in sra] == [1200 + 3000, 3600 + 3000]
    # Items 1-4 keep every rating under HPA: no bias (SRA's mean of item 1 is near 1.5, its true
    # mean 2.1); items 5-12 keep none, and get a mean by noise alone, where SRA gives all 12 one.
    assert hpa[0].bias_rms == pytest.approx(0.0, abs=1e-12) and sra[0].bias_rms > 0.3
    assert hpa[0].items_with_mean < 4.2 and sra[0].items_with_mean > 11.9
    assert hpa[0].score > 10 * sra[0].score  # a range's worth of error on 8 of 12 items
    assert hpa[1] == sra[1]  # l = 12 keeps everything either way
    assert tune_means.hpa_scores(records, MeansParams(1.0, 5.0, 4), None) is None  # SRA: a uniform sample
