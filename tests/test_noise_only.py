"""The noise-only refusal (dp_spark.release.noise_only): its thresholds are exact or safe, it
decides on DP figures alone, and its behaviour at small user counts is the one docs/privacy.md
states. The whole job (a CSV read in the wrong encoding, exit 5): tests/test_source_encoding.py."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dp_spark.core import accuracy
from dp_spark.core.mechanisms import RandomSource, discrete_laplace
from dp_spark.release import noise_only
from dp_spark.release.guards import guards_of

pytestmark = pytest.mark.unit


def one_sided_tail(t: int, scale: float) -> float:
    """P(Z ≥ t) for t ≥ 1, Z discrete Laplace: half of P(|Z| > t − 1)."""
    return accuracy.discrete_laplace_tail(t - 1, scale) / 2


@pytest.mark.parametrize("scale", [0.3, 1, 7.5, 400, 1e5])
@pytest.mark.parametrize("miss", [0.05, 0.01, 1e-4])
def test_the_laplace_threshold_is_the_smallest_that_noise_alone_reaches_at_most_miss(scale, miss):
    t = noise_only.laplace_threshold(scale, miss)
    assert one_sided_tail(t, scale) <= miss
    assert t == 1 or one_sided_tail(t - 1, scale) > miss


@pytest.mark.parametrize("cells, scale", [(1, Fraction(2)), (3, Fraction(21, 2)), (200, Fraction(7, 10))])
def test_a_total_of_noise_alone_passes_its_cantelli_threshold_at_most_miss(cells, scale):
    """Sums of discrete Laplace noise, 4,000 seeded draws: the share at or above the threshold is
    at most MISS (Cantelli's bound holds for any noise of that variance; 0.01, three standard
    deviations of the share, covers the sampling)."""
    rng = RandomSource(3)
    sd = accuracy.discrete_laplace_sd(scale)
    threshold = noise_only.cantelli_threshold(np.sqrt(cells) * sd, noise_only.MISS)
    draws = discrete_laplace(rng, scale, 4_000 * cells).reshape(4_000, cells).sum(axis=1)
    assert (draws >= threshold).mean() <= noise_only.MISS + 0.01


def test_the_decision_reads_only_its_figures_and_refuses_when_none_shows_records():
    low = noise_only.Figure("records kept", -312, 922)
    high = noise_only.Figure("item_counts total", 5_000, 362.5)
    with pytest.raises(noise_only.NoiseOnlyRefused) as refused:
        noise_only.decide([low, noise_only.Figure("item_counts total", 100, 362.5)])
    said = str(refused.value)
    assert "records kept -312 below 922" in said and "item_counts total 100 below 362.5" in said
    assert "guards.refuse_noise_only = false" in said and "dp-spark check" in said
    section = noise_only.decide([low, high])  # one figure shows records: released
    assert section["refuse"] and section["figures"]["item_counts total"] == {"noisy": 5000, "threshold": 362.5}
    assert noise_only.decide([low], enabled=False)["refuse"] is False  # the operator's switch
    assert noise_only.decide([]) is None  # nothing to decide on (entropy, tables on the executors)


def test_the_figures_share_the_miss_rate():
    bounding = {"records_kept_noisy": 10}
    found = noise_only.figures(bounding, 400.0, [("item_counts total", 50.0, 20.0)])
    assert [f.name for f in found] == ["records kept", "item_counts total"]
    assert found[0].threshold == noise_only.laplace_threshold(400.0, noise_only.MISS / 2)
    assert found[1].threshold == pytest.approx(noise_only.cantelli_threshold(20.0, noise_only.MISS / 2))
    assert noise_only.figures({"note": "no item was selected"}, None, []) == []


def test_only_exactly_known_count_noise_makes_a_table_total():
    exact = accuracy.discrete_laplace(10, 0.05)
    bounded = accuracy.discrete_laplace(10, 0.05, kind=accuracy.UPPER_BOUND)
    tables = {"item_counts": pd.DataFrame({"noisy_count": [3, 4, 5, 6]}),
              "edge_counts": pd.DataFrame({"noisy_count": [1, 2]}),
              "empty": pd.DataFrame({"noisy_count": []})}
    planned = {"item_counts": {"noisy_count": exact}, "edge_counts": {"noisy_count": bounded},
               "empty": {"noisy_count": exact}}
    [(name, total, sd)] = noise_only.table_totals(tables, planned)
    assert (name, total) == ("item_counts total", 18.0) and sd == pytest.approx(2 * exact.sd)


def test_the_switch_is_a_guard_key_on_by_default():
    assert guards_of(None).refuse_noise_only is True
    assert guards_of({"refuse_noise_only": False}).refuse_noise_only is False
    with pytest.raises(Exception, match="guards.refuse_noise_only must be true or false"):
        guards_of({"refuse_noise_only": "no"})


# docs/privacy.md's table: SRA at ε = 1, l = 10, 10 items and no attribute (epsilon_bounding ε/20,
# the counts the rest), u users with 10 in-domain records each, spread evenly over the items.
def refused_share(users: int, draws: int = 4_000, seed: int = 9) -> float:
    rng = RandomSource(seed)
    kept_scale, count_scale = Fraction(10) / Fraction(1, 40), Fraction(10) / Fraction(19, 20)
    sd = np.sqrt(10) * accuracy.discrete_laplace_sd(count_scale)
    kept = users * 10 + discrete_laplace(rng, kept_scale, draws)
    totals = users * 10 + discrete_laplace(rng, count_scale, draws * 10).reshape(draws, 10).sum(axis=1)
    found = noise_only.figures({"records_kept_noisy": 0}, float(kept_scale), [("t", 0.0, sd)])
    thresholds = [f.threshold for f in found]  # decide() refuses when every figure is below its own
    return float(((kept < thresholds[0]) & (totals < thresholds[1])).mean())


# (users, refused at least, at most): the documented 98%, 93%, 41% and 0%, with 4,000 draws' room
# (a share's standard deviation is at most 0.008).
@pytest.mark.parametrize("users, low, high", [(0, 0.95, 1.0), (20, 0.9, 0.96), (30, 0.37, 0.46), (50, 0.0, 0.002)])
def test_the_refusal_at_small_user_counts_is_the_documented_one(users, low, high):
    assert low <= refused_share(users) <= high


def test_plan_says_what_a_run_must_reach_or_that_it_is_not_checked():
    """The plan's thresholds are the run's (the same figures, from the config alone); a job with
    nothing to decide on says so."""
    exact = accuracy.discrete_laplace(10, 0.05)
    found = noise_only.planned(400.0, {"item_counts": {"noisy_count": exact}}, {"item_counts": 100})
    assert [f.threshold for f in found] == [f.threshold for f in noise_only.figures(
        {"records_kept_noisy": 0}, 400.0, [("item_counts total", 0.0, 10 * exact.sd)])]
    assert noise_only.plan_line(found).startswith(
        f"noise-only refusal: a run releases only if records kept reaches {found[0].threshold:,.0f} or item_counts "
        f"total reaches {found[1].threshold:,.0f}")
    assert noise_only.planned(None, {"item_counts": {"noisy_count": exact}}, {"item_counts": None}) == []
    assert noise_only.plan_line([]).startswith("noise-only refusal: not checked for this job")
