"""The means family end to end: config, API and CLI give the same seeded release; bad
values are dropped and counted (or refused under strict guards), never summed; the noise of both
tables is what the ledger says, at the sensitivity the per-user bound and the per-item cap give;
empty and tiny items get no mean; sources without values are refused before anything is spent."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.core import accuracy, noise_choice, zcdp
from dp_spark.core.accounting import Accounting
from dp_spark.core.domain import AttributeDomain, item_domain_of_ids
from dp_spark.errors import ConfigError, DataError
from dp_spark.families.means import choice as means_choice
from dp_spark.families.means import params as means_params
from dp_spark.families.means.family import FAMILY
from dp_spark.jobs.config import load_config
from dp_spark.jobs.runner import compute_release
from dp_spark.release import bound_selection, clip_choice, mean_bound_quality
from dp_spark.release.family import Domains, plan_split
from tests.samples import movielens_1m_sample

ITEMS = 40
MOVIELENS_VALUES = "ratings_users_0001-2999.dat.gz"  # MovieLens 1M's ratings with their values


@pytest.fixture(scope="module")
def ratings(spark):
    """3,000 users with 1 to 12 ratings of items 1..40 (item 40 never rated), item i's ratings
    around 1 + 4·i/40, a few values that are no number; as pandas and as a Spark DataFrame."""
    rng = np.random.default_rng(4)
    rows = []
    for user in range(1, 3001):
        for item in rng.choice(np.arange(1, ITEMS), int(rng.integers(1, 13)), replace=False):
            rows.append((user, int(item), "F" if user % 3 else "M", float(np.clip(1 + 4 * item / 40
                                                                                   + rng.normal(0, 0.5), 0, 6))))
    frame = pd.DataFrame(rows, columns=["user_id", "item_id", "attr", "value"])
    frame.loc[[3, 50, 700], "value"] = [np.nan, np.inf, -np.inf]
    return frame, spark.createDataFrame(frame)


def _release(df, **extra):
    arguments = dict(items=range(1, ITEMS + 1), value="value", low=1, high=5, l=12, epsilon=4, seed=3,
                     progress=lambda _: None)
    return dp_spark.means(df, **{**arguments, **extra})


def test_every_record_is_kept_at_a_large_bound_and_the_bad_values_are_dropped_and_counted(ratings):
    frame, df = ratings
    release = _release(df)
    table = release["item_means"].set_index("item_id")
    assert list(table.columns[:5]) == ["noisy_count", "noisy_sum", "mean", "mean_low", "mean_high"]
    assert release.diagnostics["rows_invalid_value"] == 3 and release.diagnostics["rows_after_bounding"] == len(
        frame) - 3
    # The tables, then the DP estimate of what bounding removed (a twentieth of ε).
    assert [e["step"] for e in release.report["ledger"]] == ["value_counts", "value_sums", "bounding: kept",
                                                             "bounding: removed"]
    assert release.report["epsilon_spent"] == pytest.approx(4)
    assert release.report["accuracy"]["bounding"]["about"] == "means"
    # The sum's noise is l·h/ε_sums = 12·2/2.8 stars (scale 8.6, sd 12) over about 500 ratings per
    # item: each mean within about 0.03 stars, and the count's noise adds less.
    good = frame[np.isfinite(frame["value"])]
    truth = good.assign(value=good["value"].clip(1, 5)).groupby("item_id")["value"].mean()
    popular = good.groupby("item_id").size() >= 300
    published = table["mean"].notna()
    errors = (table.loc[popular[popular].index, "mean"].astype(float) - truth[popular]).abs()
    assert popular.sum() > 30 and table.loc[popular[popular].index, "mean"].notna().all()
    assert errors.mean() < 0.08
    truth = truth.reindex(table.index)
    inside = ((table["mean_low"] <= truth) & (truth <= table["mean_high"]))[published & truth.notna()]
    assert inside.mean() >= 0.9


@pytest.mark.parametrize("epsilon", [0.05, 0.5])
def test_a_mean_is_given_exactly_where_the_counts_interval_stays_above_zero(ratings, epsilon):
    # A 95% interval: the count's half-width at 2.5%, scale l/ε_counts = 12/(0.3·0.95·ε) (a twentieth
    # of ε estimates what bounding removed). At ε = 0.05 it is about 3,100, far above every true
    # count (about 500): only noise can put a count there.
    _, df = ratings
    # At ε = 0.05 the counts are noise by design: released anyway (the noise-only refusal is off).
    table = _release(df, epsilon=epsilon, guards={"refuse_noise_only": False})["item_means"]
    halfwidth = accuracy.discrete_laplace_halfwidth(Fraction(12) / (Fraction(3, 10) * Fraction(19, 20)
                                                                    * Fraction(epsilon).limit_denominator()), 0.025)
    assert (table["mean"].notna() == (table["noisy_count"] > halfwidth)).all()
    assert (table["mean"].notna() == table["mean_low"].notna()).all()
    if epsilon == 0.05:
        assert table["mean"].notna().mean() < 0.2


def _comparable(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The table sorted by its keys, its nullable floats as NumPy's: a mean left out is NaN on both
    sides (pandas' <NA> in the API's table, NaN or <NA> as Parquet gives it back)."""
    floats = {name: "float64" for name in frame.columns if str(frame[name].dtype) == "Float64"}
    return frame.astype(floats).sort_values(keys).reset_index(drop=True)


def test_the_config_the_api_and_the_cli_give_the_same_seeded_release(ratings, tmp_path, capsys):
    """The CLI's run of a config (which loads it and computes its release as the job does) writes
    the tables the API call releases, seeded alike: one release each, compared whole."""
    frame, df = ratings
    path = tmp_path / "ratings.csv"
    frame.to_csv(path, index=False)
    config = tmp_path / "job.toml"
    config.write_text(f'''output = "{tmp_path / 'out'}"
seed = 3
[source]
format = "csv"
path = "{path}"
[domain]
items = {{ range = [1, {ITEMS}] }}
attributes = ["F", "M"]
[privacy]
epsilon = 4.0
[algorithm]
name = "means"
l = 12
low = 1
high = 5
''')
    api = _release(df, attribute="attr", attributes=["F", "M"])
    assert [e["step"] for e in api.report["ledger"]] == ["value_counts", "value_sums", "edge_value_counts",
                                                         "edge_value_sums", "bounding: kept", "bounding: removed"]
    capsys.readouterr()
    assert main_run(config) == 0
    printed = capsys.readouterr().out
    out = " ".join(printed.split())  # the console, its wrapped lines joined
    assert "items have a mean; the 10 of highest noisy count, with each mean's 95% interval" in out
    assert "NOTE: each mean's interval covers the mean of the records bounding kept, not of all an item's" in out
    # The sums' ledger row in value units: l·(high − low)/2 = 12·2 stars, not 12,000 grid units.
    rows = [line.split() for line in printed.splitlines() if line.split()[:1] == ["value_sums"]]
    assert [row[4:6] for row in rows] == [["L1", "24"]]
    for table, keys in (("item_means", ["item_id"]), ("edge_means", ["item_id", "attr"])):
        written = pd.read_parquet(tmp_path / "out" / table)
        assert len(written) and written["mean"].notna().any() and written["mean"].isna().any()
        pd.testing.assert_frame_equal(_comparable(written, keys), _comparable(api[table], keys), check_dtype=False)


def main_run(config) -> int:
    from dp_spark.cli.main import main

    return main(["run", str(config)])


def test_gaussian_noise_is_paid_by_the_capped_l2_sensitivity_and_hpa_pays_its_popularity(ratings):
    _, df = ratings
    release = _release(df, bounding="hpa", d=2, delta=1e-6, noise="gaussian", records_per_item=1, epsilon=1)
    steps = {e["step"]: e for e in release.report["ledger"]}
    assert list(steps) == ["popularity", "value_counts", "value_sums", "bounding: kept", "bounding: removed"]
    assert steps["value_counts"]["mechanism"] == steps["value_sums"]["mechanism"] == "discrete Gaussian"
    assert steps["value_counts"]["sensitivity_l2"] == pytest.approx(math.sqrt(12))
    # l·c·steps² with c = 1: √12 · 1,000 grid units, i.e. √12 · 2 stars.
    assert steps["value_sums"]["sensitivity_l2"] == pytest.approx(math.sqrt(12) * 1000)
    assert steps["value_sums"]["value_unit"] == 2 / 1000 and "value_unit" not in steps["value_counts"]
    assert release.report["rho_spent"] <= release.report["rho_total"]
    parameters = release.report["algorithm"]["parameters"]
    assert parameters["sensitivity_l2"]["noisy_sum"] == pytest.approx(math.sqrt(12) * 2)


def test_the_sums_noise_has_the_stated_scale(spark):
    # 2,000 items of exactly 20 ratings of 3 stars (the centre): every centred sum is 0, so noisy_sum
    # − 3·noisy_count is the sum's noise in stars, discrete Laplace of scale l·h/ε_sums = 1·2/0.665
    # (ε_sums = 0.7 of the 0.95 of ε the tables get; a twentieth estimates what bounding removed).
    users = np.repeat(np.arange(1, 40_001), 1)
    frame = pd.DataFrame({"user_id": users, "item_id": (users - 1) // 20 + 1, "value": 3.0})
    release = dp_spark.means(spark.createDataFrame(frame), items=range(1, 2001), value="value", low=1, high=5, l=1,
                             epsilon=1, seed=8, progress=lambda _: None, distinct_records=True)
    table = release["item_means"]
    noise = table["noisy_sum"] - 3 * table["noisy_count"]
    sd = accuracy.discrete_laplace_sd(1000 / 0.665) * 0.002
    # 2,000 cells: the sample sd's standard error is about 2.4% (Laplace's kurtosis); tolerance 4 of them.
    assert noise.std() == pytest.approx(sd, rel=0.10) and abs(noise.mean()) < 5 * sd / math.sqrt(2000)
    planned = release.report["accuracy"]["tables"]["item_means"]
    assert planned["noisy_sum"]["sd"] == pytest.approx(math.sqrt(sd ** 2 + 9 * accuracy.discrete_laplace_sd(
        1 / 0.285) ** 2))


def test_a_value_column_that_cannot_be_summed_is_refused_before_any_spend(spark):
    df = spark.createDataFrame([(1, 1, True)], "user_id long, item_id long, value boolean")
    budget = dp_spark.DatasetBudget(epsilon=5)
    with pytest.raises(DataError, match="must hold numbers"):
        dp_spark.means(df, items=[1], value="value", low=0, high=1, l=2, epsilon=1, budget=budget)
    with pytest.raises(DataError, match="not found"):
        dp_spark.means(df, items=[1], value="stars", low=0, high=1, l=2, epsilon=1, budget=budget)
    assert budget.spent == 0


def test_hpa_with_its_popularity_from_validations_sample_keeps_its_bound(ratings):
    # d = 1 draws the popularity sample in validation's own pass (the records with usable values only).
    frame, df = ratings
    release = _release(df, bounding="hpa", l=3)
    assert [e["step"] for e in release.report["ledger"]] == ["popularity", "value_counts", "value_sums",
                                                             "bounding: kept", "bounding: removed"]
    good = frame[np.isfinite(frame["value"])]
    kept = int(np.minimum(good.groupby("user_id").size(), 3).sum())
    assert release.diagnostics["rows_after_bounding"] == kept
    assert release.diagnostics["rows_in_popularity_sample"] == good["user_id"].nunique()


def _csv_job(tmp_path, algorithm: str) -> str:
    """A means job over a CSV source with a small item range, its [algorithm] table's keys after name."""
    return f'''output = "{tmp_path / 'out'}"
[source]
format = "csv"
path = "x.csv"
[domain]
items = {{ range = [1, 3] }}
[privacy]
epsilon = 1.0
[algorithm]
name = "means"
''' + algorithm


def test_unknown_keys_are_refused(tmp_path):
    config = tmp_path / "job.toml"
    config.write_text(_csv_job(tmp_path, """l = 2
low = 0
high = 1
consistent = true
"""))
    with pytest.raises(ConfigError, match="consistent"):
        load_config(config)


def test_strict_guards_refuse_bad_values(ratings):
    _, df = ratings
    with pytest.raises(DataError, match="NaN, infinite or no number"):
        _release(df, guards={"strict": True})


def test_text_values_are_read_as_numbers_and_the_others_dropped(spark):
    # Spark's cast alone would read "4d" as 4 and "0x1p3" as 8; as text they are no number.
    df = spark.createDataFrame([(1, 1, "4.5"), (2, 1, "x"), (3, 1, ""), (4, 1, " 2 "), (5, 1, "4d"), (6, 1, "0x1p3"),
                                (7, 1, "NaN"), (8, 1, "-1e0")], "user_id long, item_id long, value string")
    release = dp_spark.means(df, items=[1], value="value", low=1, high=5, l=1, epsilon=100, seed=1,
                             progress=lambda _: None)
    assert release.diagnostics["rows_invalid_value"] == 5 and release.diagnostics["rows_after_bounding"] == 3


def test_a_movielens_source_without_ratings_is_refused_and_gender_is_an_attribute(spark, tmp_path):
    # MovieLens 1M's files as they are, with the ratings of its first 20 users: the refusal and the
    # attribute depend on the files' format, not on how many lines they hold.
    sample = movielens_1m_sample(tmp_path / "ml-1m", 20, ("ratings_pairs.dat.gz", MOVIELENS_VALUES))
    base = f"""output = "{tmp_path / 'out'}"
[source]
format = "movielens-1m"
path = "{sample}"
[domain]
items = {{ range = [1, 3952] }}
[privacy]
epsilon = 1.0
[algorithm]
name = "means"
l = 5
low = 1
high = 5
"""
    config = tmp_path / "job.toml"
    config.write_text(base)
    with pytest.raises(DataError, match="no values"):
        compute_release(load_config(config), spark, progress=lambda _: None)
    config.write_text(base.replace("movielens-1m\"\npath", "movielens-1m\"\nattribute = \"age_group\"\npath"))
    with pytest.raises(ConfigError, match="source.attribute"):
        load_config(config)
    from dp_spark.io import datasets

    rated = datasets.load_movielens_1m(spark, str(sample / MOVIELENS_VALUES), attribute="gender")
    first = rated.orderBy("user_id", "item_id").first()
    assert first["attr"] in ("F", "M") and 1 <= first["value"] <= 5



# ---------------------------------------------------------------------------
# l = "auto": chosen privately for the means (release.mean_bound_quality).


def test_auto_l_is_chosen_privately_and_the_tables_are_paid_at_the_chosen_l(ratings):
    frame, df = ratings
    release = _release(df, l="auto", attribute="attr", attributes=["F", "M"])
    chosen = release.report["algorithm"]["chosen"]["l"]
    assert chosen in bound_selection.DEFAULT_CANDIDATES
    steps = {e["step"]: e for e in release.report["ledger"]}
    assert list(steps) == ["choose l", "value_counts", "value_sums", "edge_value_counts",
                           "edge_value_sums", "bounding: kept", "bounding: removed"]
    assert steps["bounding: kept"]["sensitivity_l1"] == chosen  # the estimate at the chosen l
    assert steps["value_counts"]["sensitivity_l1"] == chosen and steps["value_sums"]["sensitivity_l1"] == chosen * 1000
    good = frame[np.isfinite(frame["value"])]
    assert release.diagnostics["rows_after_bounding"] == int(np.minimum(good.groupby("user_id").size(), chosen).sum())
    assert release.report["epsilon_spent"] <= 4
    planned = release.report["accuracy"]["tables"]["item_means"]["noisy_count"]
    assert planned["kind"] == accuracy.EXACT and f"at the privately chosen l = {chosen}" in planned["note"]
    assert release.report["algorithm"]["parameters"]["l"] == "auto"


def test_hpas_auto_l_draws_its_popularity_first_and_scores_what_hpa_keeps(spark, monkeypatch):
    # 500 users each rate the same 20 items and 20 of their own. HPA keeps the 20 shared ones at
    # l = 20 (their noisy popularity, about 12 from one record per user, is far above the own
    # items'): each shared item keeps all 500 users, where SRA's sample keeps 250 of them; at
    # l = 40 both keep everything with twice the noise. Scored as HPA keeps (exact, from the kept
    # counts the choice is given): P(l = 20) = 0.997; scored as SRA's sample, P(l = 40) = 0.89. The
    # split gives the choice a tenth of ε (the default under pure ε is a twentieth: P(l = 20) = 0.93
    # against P(l = 40) = 0.74 for SRA's sample), so that the two scorings stand well apart.
    users, shared = 500, 20
    rng = np.random.default_rng(1)
    rows = [(u, i, float(rng.uniform(1, 5))) for u in range(users) for i in range(1, shared + 1)]
    rows += [(u, shared + 1 + u * shared + j, float(rng.uniform(1, 5))) for u in range(users) for j in range(shared)]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["user_id", "item_id", "value"]))
    common = dict(items=range(1, shared * (users + 1) + 1), value="value", low=1, high=5, l="auto",
                  l_candidates=[shared, 2 * shared], bounding="hpa", epsilon=8, seed=0, progress=lambda _: None,
                  epsilon_split=dict(epsilon_bound=0.8, epsilon_popularity=0.8, epsilon_bounding=0.4,
                                     epsilon_counts=1.8, epsilon_sums=4.2))
    chances, choose = [], mean_bound_quality.choose_bound

    def watched(kept, candidates, model, epsilon, *rest, **named):
        chances.append(mean_bound_quality.pick_probabilities(kept, candidates, model, epsilon))
        return choose(kept, candidates, model, epsilon, *rest, **named)
    monkeypatch.setattr(mean_bound_quality, "choose_bound", watched)
    release = dp_spark.means(df, **common)
    assert [e["step"] for e in release.report["ledger"]][:3] == ["popularity", "choose l", "value_counts"]
    assert release.report["algorithm"]["chosen"]["l"] == shared and chances[-1][0] > 0.99
    # Negative control: the kept counts of SRA's uniform sample (no ranking) lean the other way.
    from dp_spark.release import bound_bias

    unranked = bound_bias.expected_kept
    monkeypatch.setattr(bound_bias, "expected_kept", lambda *a, ranking=None, **k: unranked(*a, **k))
    dp_spark.means(df, **common)
    assert chances[-1][1] > 0.85


def _domains(with_edges: bool) -> Domains:
    return Domains(item_domain_of_ids(list(range(1, ITEMS + 1)), "1..40"),
                   AttributeDomain(("F", "M")) if with_edges else None)


@pytest.mark.parametrize("with_edges", [False, True])
def test_the_choice_scores_the_item_means_with_each_tables_own_noise(ratings, monkeypatch, with_edges):
    """The mechanism gets the item table's kept counts (the default objective) from the records
    with a finite value, and at each candidate the item table's count noise, the half-width its
    means need and the two noises' variance in records (the sum's over steps²); the release is
    paid at the bound it returns."""
    _, df = ratings
    seen = {}

    def choose(kept, candidates, model, epsilon, budget, rng, step):
        seen.update(kept=kept, model=model, epsilon=epsilon)
        return 3

    monkeypatch.setattr(mean_bound_quality, "choose_bound", choose)
    extra = {"attribute": "attr", "attributes": ["F", "M"]} if with_edges else {}
    release = _release(df, l="auto", l_candidates=[1, 3, 12, 40], **extra)
    assert release.report["algorithm"]["chosen"] == {"l": 3}
    assert {e["step"]: e["sensitivity_l1"] for e in release.report["ledger"]}["value_counts"] == 3
    finite = F.col("value").isNotNull() & ~F.isnan("value") & (F.abs("value") != math.inf)
    records = df.where(finite).select("user_id", "item_id", "attr").toPandas()
    cells = records.groupby(["user_id", "item_id"]).size().rename("k").reset_index()
    cells["n"] = cells["user_id"].map(records.groupby("user_id").size())
    want = mean_bound_quality.kept_counts(cells.rename(columns={"item_id": "cell"}), [1, 3, 12, 40], 40)
    assert len(seen["kept"]) == 1 and sorted(map(tuple, seen["kept"][0])) == sorted(map(tuple, want))
    # ε = 4: a twentieth chooses l, a twentieth estimates what bounding removed; each table pair
    # shares the rest, 3/10 to its counts and 7/10 to its sums.
    assert seen["epsilon"] == Fraction(2, 10)
    pair = Fraction(36, 10) / (2 if with_edges else 1)
    assert seen["model"].weights == (1,) and seen["model"].cells == (ITEMS,)
    for b, table in zip([1, 3, 12, 40], seen["model"].tables[0]):
        counts = noise_choice.laplace_variance(b, pair * Fraction(3, 10))
        sums = noise_choice.laplace_variance(b * 1000, pair * Fraction(7, 10)) / 1000 ** 2
        assert table.noise == mean_bound_quality.LAPLACE and table.scale == pytest.approx(b / (pair * 3 / 10))
        assert table.variance == pytest.approx(counts + sums, rel=1e-12)
        assert table.threshold == accuracy.discrete_laplace_halfwidth(Fraction(b) / (pair * Fraction(3, 10)), 0.025)
    if with_edges:  # every mean alike: both tables, each cell weighing 1
        params = means_params.MeansParams(1, 5, "auto", objective="cells")
        model = means_choice.error_model(params, _domains(True),
                                         means_params.budget_split(params, Fraction(4), _domains(True)))
        assert model.weights == (1, 1) and model.cells == (ITEMS, 2 * ITEMS)


def test_the_means_objective_is_refused_where_it_has_no_use(tmp_path):
    common = dict(items=range(1, 5), value="v", low=0, high=1, epsilon=1)
    with pytest.raises(ConfigError, match="l_objective is used only with"):
        dp_spark.plan("means", **common, l=4, l_objective="cells")
    with pytest.raises(ConfigError, match="which this release does not publish"):
        dp_spark.plan("means", **common, l="auto", l_objective={"edge_means": 1})
    with pytest.raises(ConfigError, match="l_objective must be one of"):
        means_params.MeansParams(0, 1, "auto", objective="means")
    config = tmp_path / "job.toml"
    config.write_text(_csv_job(tmp_path, """l = 4
l_objective = "cells"
low = 0
high = 1
"""))
    with pytest.raises(ConfigError, match="l_objective is used only with"):
        load_config(config)


def test_the_choice_of_l_takes_a_twentieth_of_epsilon_or_a_tenth_of_rho():
    """Under pure ε the choice takes a twentieth (the tables pay for their share squared in noise
    variance); under zCDP a tenth of ρ, as the counts' choice (docs/value_sums.md, "Choosing l")."""
    params, domains = means_params.MeansParams(1.0, 5.0, "auto"), Domains(range(10))
    pure = plan_split(FAMILY, params, Fraction(2), domains)
    assert pure["epsilon_bound"] == Fraction(1, 10) and sum(pure.values()) == 2
    rho = zcdp.rho_of(Fraction(2), 1e-6)
    under_zcdp = plan_split(FAMILY, params, Fraction(2), domains, accounting=Accounting("gaussian", rho, 1e-6))
    assert under_zcdp["epsilon_bound"] == zcdp.epsilon_for_rho(rho / 10)
    # Negative control: the pure split's shares read as shares of ρ would give the choice a twentieth.
    assert under_zcdp["epsilon_bound"] > zcdp.epsilon_for_rho(rho / 20)


def test_auto_is_checked_like_the_counts_and_planned_at_the_largest_candidate(tmp_path):
    common = dict(items=range(1, 5), value="v", low=0, high=1)
    with pytest.raises(ConfigError, match="l_candidates is used only with"):
        dp_spark.plan("means", **common, l=4, l_candidates=[1, 2], epsilon=1)
    with pytest.raises(ConfigError, match="strictly increasing"):
        dp_spark.plan("means", **common, l="auto", l_candidates=[8, 2], epsilon=1)
    auto = dp_spark.plan("means", **common, l="auto", l_candidates=[2, 8], epsilon=1).accuracy["tables"]
    # Before the run: the noise at the largest candidate (8), with the 9/10 of ε the tables get (a
    # twentieth chooses l, a twentieth estimates what bounding removed): a fixed l's tables get 19/20.
    fixed = dp_spark.plan("means", **common, l=8, epsilon=Fraction(18, 19)).accuracy["tables"]
    for column in ("noisy_count", "noisy_sum"):
        planned, at_largest = auto["item_means"][column], fixed["item_means"][column]
        assert planned["kind"] == accuracy.UPPER_BOUND and planned["sd"] == pytest.approx(at_largest["sd"])
    config = tmp_path / "job.toml"
    config.write_text(_csv_job(tmp_path, """l = "auto"
l_candidates = [2, 5]
low = 0
high = 1
"""))
    params = load_config(config).params
    assert params.auto and params.candidates == (2, 5)


def test_a_chosen_l_below_the_per_item_cap_is_paid_as_no_cap(ratings, monkeypatch):
    """c = 4 caps nothing once l = 2 is chosen: the run goes on (the choice is already paid for)
    and both tables are paid at l·min(c, l) = 4 in L2², as without a cap."""
    _, df = ratings
    monkeypatch.setattr(mean_bound_quality, "choose_bound", lambda *args, **kwargs: 2)
    release = _release(df, l="auto", l_candidates=[1, 2, 8], noise="gaussian", delta=1e-6, records_per_item=4)
    steps = {e["step"]: e for e in release.report["ledger"]}
    assert release.report["algorithm"]["chosen"]["l"] == 2
    assert steps["value_counts"]["sensitivity_l2"] == pytest.approx(2)
    assert steps["value_sums"]["sensitivity_l2"] == pytest.approx(2000)


# ---------------------------------------------------------------------------
# The clipping range chosen privately (release.clip_choice).


def test_the_range_is_chosen_from_one_value_per_user_and_the_sums_use_it(ratings, monkeypatch):
    """Left out, low and high are chosen: from the ranks of one usable value per user (the
    record validation draws), before the sums, which are then clipped to the chosen range and
    reported at it."""
    frame, df = ratings
    seen = {}
    choose = clip_choice.choose_clip

    def spy(candidates, below, at_most, values, low, high, epsilon, budget, rng):
        seen.update(below=below, at_most=at_most, values=values, epsilon=epsilon)
        return choose(candidates, below, at_most, values, low, high, epsilon, budget, rng)

    monkeypatch.setattr(clip_choice, "choose_clip", spy)
    candidates = [0, 1, 2, 3, 4, 5, 6]
    arguments = dict(items=range(1, ITEMS + 1), value="value", l=12, epsilon=4, seed=3, progress=lambda _: None)
    release = dp_spark.means(df, clip_candidates=candidates, **arguments)
    good = frame[np.isfinite(frame["value"])]
    assert seen["values"] == good["user_id"].nunique() and seen["epsilon"] == Fraction(4, 10)
    # Each user's value is one of its own: the ranks lie between those of the users' least and
    # greatest values.
    least, most = good.groupby("user_id")["value"].min(), good.groupby("user_id")["value"].max()
    for b, below, at_most in zip(candidates, seen["below"], seen["at_most"]):
        assert (most < b).sum() <= below <= (least < b).sum() and (most <= b).sum() <= at_most <= (least <= b).sum()
    chosen = release.report["algorithm"]["chosen"]
    assert {e["step"] for e in release.report["ledger"]} >= {"choose clip: users", "choose low", "choose high"}
    assert release.report["epsilon_spent"] == pytest.approx(4)
    assert release.report["algorithm"]["parameters"]["low"] == "auto" == release.report["algorithm"]["parameters"][
        "high"]
    table = release["item_means"].dropna(subset=["mean"])
    assert len(table) and (table["mean_low"] >= chosen["low"]).all() and (table["mean_high"] <= chosen["high"]).all()
    # The accuracy is reported at the chosen range: as a release with that range given and the
    # 17/20 of ε the tables got (a tenth chose the range, a twentieth estimates what bounding removed):
    # a given range's tables get 19/20 of its ε.
    fixed = dp_spark.means(df, low=chosen["low"], high=chosen["high"], **{**arguments, "epsilon": Fraction(68, 19)})
    report_sum = release.report["accuracy"]["tables"]["item_means"]["noisy_sum"]
    fixed_sum = fixed.report["accuracy"]["tables"]["item_means"]["noisy_sum"]
    assert report_sum["sd"] == pytest.approx(fixed_sum["sd"])
    assert f"low = {chosen['low']}" in report_sum["note"]


def test_a_range_not_given_is_planned_at_the_widest_and_checked_before_the_run(tmp_path):
    common = dict(items=range(1, 5), value="v", l=4, epsilon=1)
    planned = dp_spark.plan("means", **common, low=0, clip_candidates=[1, 2, 10]).accuracy["tables"]["item_means"]
    # Before the run: an upper bound at the widest range, [0, 10], at the 17/20 of ε the tables get (a
    # given range's tables get 19/20 of its ε).
    widest = dp_spark.plan("means", **{**common, "epsilon": Fraction(17, 19)}, low=0, high=10).accuracy["tables"][
        "item_means"]
    assert planned["noisy_sum"]["kind"] == accuracy.UPPER_BOUND
    assert planned["noisy_sum"]["sd"] >= widest["noisy_sum"]["sd"]
    assert planned["noisy_count"]["sd"] == pytest.approx(widest["noisy_count"]["sd"])
    for bad, message in [(dict(low=0, high=5, clip_candidates=[1, 2]), "used only with"),
                         (dict(low=10, clip_candidates=[1, 2]), "no value above"),
                         (dict(clip_candidates=[2, 1]), "increasing"),
                         (dict(low="x"), "finite number or \"auto\""),
                         (dict(clip_candidates=[0.0, 1e-310]), "not a grid")]:
        with pytest.raises(ConfigError, match=message):
            dp_spark.plan("means", **common, **bad)
    config = tmp_path / "job.toml"
    config.write_text(_csv_job(tmp_path, """l = 4
high = 5
clip_candidates = [-1, 0, 1]
"""))
    params = load_config(config).params
    assert params.low == "auto" and params.high == 5 and params.clip_candidates == (-1.0, 0.0, 1.0)
