"""Coverage for the operator (rows read, outside the domain, kept by bounding, users truncated)
and the guards that refuse a run on noisy coverage figures, before the algorithm's
noise (whether a run releases is seen by its readers, so only DP outputs decide it).

Jobs run in-process through ``cli.main`` with the suite's SparkSession; expected numbers are
computed here from the records themselves.
"""

import itertools
import json
import re
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dp_spark import api
from dp_spark.cli import main
from dp_spark.core.domain import AttributeDomain
from dp_spark.core.ledger import Budget
from dp_spark.core.mechanisms import RandomSource, discrete_laplace_pmf
from dp_spark.errors import ConfigError, GuardRefused
from dp_spark.io.validation import SHARE_GRID
from dp_spark.release import guards

# --- Unit: what the operator is told, and the guards' noisy decision --------------------------


def coverage(rows_read, outside, users=None, truncated=None):
    return guards.Coverage(rows_read, outside, users=users, users_truncated=truncated, bound="l = 2")


class Said(list):
    """A progress that records its lines, with the operator's diagnostics asked for."""

    diagnostics = True

    def __call__(self, message):
        self.append(message)

    def diagnostic(self, message):
        self.append(f"NOT PRIVATE: {message}")


def run_inputs(limits: guards.Guards, epsilon=10, seed=1):
    """What guards.check reads of a family's RunInputs: the guards, a budget and a random source."""
    return SimpleNamespace(guards=limits, budget=Budget(epsilon), rng=RandomSource(seed))


@pytest.mark.unit
def test_coverage_is_told_only_to_an_operator_who_asked_and_decides_nothing():
    said = Said()
    guards.tell(guards.Guards(), coverage(10, {"item_id": 4, "attr": 6}), said)  # every row outside: no refusal
    assert any(line.startswith("NOT PRIVATE: WARNING: 100.0% of the rows read") for line in said)
    assert all(line.startswith("NOT PRIVATE: ") for line in said)
    quiet = []  # without diagnostics asked for, the figures and the warning stay out of the log
    explained = []
    guards.tell(guards.Guards(), coverage(10, {"item_id": 4, "attr": 5}), quiet.append, lambda: explained.append(1))
    assert quiet == [] and explained == []  # nor are records read to explain it
    below = Said()
    guards.tell(guards.Guards(warn_dropped_fraction=0.5), coverage(10, {"item_id": 3}), below)
    assert not any("WARNING" in line for line in below)
    inputs = run_inputs(guards.Guards())
    assert guards.check(inputs, guards.GuardFigures(users=10, dropped_share=10 * SHARE_GRID)) is None
    assert inputs.budget.entries == []  # no limit: nothing drawn, nothing spent


@pytest.mark.unit
def test_the_guards_decide_on_noisy_figures_paid_in_the_ledger():
    # 1000 users, 30% of each one's rows outside the domain, 400 of them over the bound.
    figures = guards.GuardFigures(users=1000, dropped_share=1000 * (3 * SHARE_GRID // 10), users_truncated=400)
    both = guards.Guards(max_dropped_fraction=0.35, max_truncated_fraction=0.45, epsilon=3)
    inputs = run_inputs(both)
    section = guards.check(inputs, figures, bound="l = 2")
    # Scales 1/ε_each = 1 user and SHARE_GRID share units: each fraction moves by well under 1%.
    assert section["dropped_fraction_noisy"] == pytest.approx(0.3, abs=0.01)
    assert section["truncated_fraction_noisy"] == pytest.approx(0.4, abs=0.01)
    assert abs(section["users_noisy"] - 1000) <= 15
    assert {k: section[k] for k in ("epsilon", "max_dropped_fraction", "max_truncated_fraction")} == \
        {"epsilon": 3.0, "max_dropped_fraction": 0.35, "max_truncated_fraction": 0.45}
    steps = {e.step: e for e in inputs.budget.entries}
    assert set(steps) == {"guard: users", "guard: share of rows outside the domain", "guard: users over the bound"}
    assert inputs.budget.spent == 3  # ε_guards in three equal parts
    assert steps["guard: share of rows outside the domain"].sensitivity == SHARE_GRID
    assert all(e.noise_scale == e.sensitivity / e.epsilon for e in steps.values())
    over_the_bound = r"40\.\d% of the users have more records than the bound \(l = 2\)"
    for limits, message in ((guards.Guards(max_dropped_fraction=0.25, epsilon=2), "on average 30"),
                            (guards.Guards(max_truncated_fraction=0.35, epsilon=2), over_the_bound)):
        with pytest.raises(GuardRefused, match=message) as refused:
            guards.check(run_inputs(limits), figures, bound="l = 2")
        assert "1000" not in str(refused.value) and "400" not in str(refused.value)  # no raw figure


@pytest.mark.unit
def test_plan_states_the_scale_the_guards_draw_at():
    limits = guards.Guards(max_dropped_fraction=0.1, epsilon=0.05)
    assert guards.figure_scale(limits) == 40
    inputs = run_inputs(limits)
    guards.check(inputs, guards.GuardFigures(users=1000, dropped_share=0))
    assert [e.noise_scale for e in inputs.budget.entries] == [40, 40 * SHARE_GRID]  # the share in 1/SHARE_GRID units
    assert "scale 40 users" in guards.planned(limits) and "5.7%" in guards.planned(limits)


def refusal_probability(users: int, share: int, limit: float, user_scale: float) -> float:
    """P(the dropped-fraction guard refuses), exactly (up to floating point), for figures (users,
    share) and the scales the guard draws at: Ũ = U + Z_u, S̃ = S + Z_s, refused when
    S̃ > limit · SHARE_GRID · max(Ũ, 1)."""
    r_s = np.exp(-1.0 / (user_scale * SHARE_GRID))

    def at_least(k):  # P(Z_s >= k) for integers k, Z_s discrete Laplace at the share's scale
        k = np.asarray(k, dtype=float)
        upper = r_s ** np.maximum(k, 1) / (1 + r_s)
        return np.where(k >= 1, upper, 1 - r_s ** np.maximum(1 - k, 1) / (1 + r_s))

    z = np.arange(-int(60 * user_scale), int(60 * user_scale) + 1)  # past e^-60 of the mass
    noisy_users = np.maximum(users + z, 1)
    threshold = np.floor(limit * SHARE_GRID * noisy_users - share) + 1
    return float(np.sum(discrete_laplace_pmf(z, user_scale) * at_least(threshold)))


@pytest.mark.unit
@pytest.mark.parametrize("epsilon", [0.01, 0.1, 1.0])
def test_the_refusal_is_epsilon_dp_across_its_range(epsilon):
    """Whether a run is refused is what its readers see: at the scale the guard draws at, the
    probability of each outcome moves by at most e^ε_guards when one user is added, for users
    whose rows are all outside the domain and for users with none, small tables and large,
    limits near the true fraction and far from it. The accounting composes two figures, so the
    decision alone loses about ε/2 here. Negative control: a third of the scale breaks the bound."""
    scale = float(guards.figure_scale(guards.Guards(max_dropped_fraction=0.5, epsilon=epsilon)))
    worst, worst_third = 0.0, 0.0
    for users, fraction, limit in itertools.product((0, 3, 50, 2000), (0.0, 0.3, 1.0), (0.05, 0.3, 0.5, 0.95)):
        share = int(users * fraction * SHARE_GRID)
        for added in (0, SHARE_GRID):  # the added user has no row outside, or every row
            for b, record in ((scale, "worst"), (scale / 3, "worst_third")):
                p, q = (refusal_probability(u, s, limit, b) for u, s in ((users, share), (users + 1, share + added)))
                for x, y in ((p, q), (1 - p, 1 - q)):
                    if min(x, y) > 1e-12:
                        ratio = abs(np.log(x / y))
                        worst, worst_third = ((max(worst, ratio), worst_third) if record == "worst"
                                              else (worst, max(worst_third, ratio)))
    assert worst <= epsilon * (1 + 1e-6), worst
    assert worst_third > epsilon * 1.2, worst_third


@pytest.mark.unit
def test_a_guard_at_small_epsilon_is_a_coin_not_the_data():
    # ε_guards = 0.01 over 50 users: the noisy fraction is mostly noise, and decides either way on
    # the same data, so which way it goes says little about any one user.
    figures = guards.GuardFigures(users=50, dropped_share=25 * SHARE_GRID)
    outcomes = set()
    for seed in range(40):
        try:
            guards.check(run_inputs(guards.Guards(max_dropped_fraction=0.5, epsilon=0.01), seed=seed), figures)
            outcomes.add("released")
        except GuardRefused:
            outcomes.add("refused")
    assert outcomes == {"released", "refused"}


@pytest.mark.unit
@pytest.mark.parametrize("table, message", [
    ({"max_dropped_fraction": 1.5, "epsilon": 0.1}, "guards.max_dropped_fraction must be a number in [0, 1]"),
    ({"max_truncated_fraction": "half", "epsilon": 0.1}, "guards.max_truncated_fraction must be a number in [0, 1]"),
    ({"max_droped_fraction": 0.1}, "unknown config key 'guards.max_droped_fraction'"),
    ({"max_dropped_fraction": 0.1}, "set guards.epsilon"),
    ({"epsilon": 0.1}, "guards.epsilon is spent only by a limit"),
    ({"max_dropped_fraction": 0.1, "epsilon": -1}, "guards.epsilon"),
    ({"strict": "yes"}, "guards.strict must be true or false"),
])
def test_bad_guards_are_config_errors(table, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        guards.guards_of(table)


@pytest.mark.unit
def test_the_guards_epsilon_comes_off_the_top_of_the_split():
    from dp_spark.families.counts.family import CountsParams
    from dp_spark.families.registry import family_of
    from dp_spark.release.family import Domains, plan_split
    params, family = CountsParams("sra", l=2), family_of("sra")
    limits = guards.Guards(max_dropped_fraction=0.5, epsilon=Fraction(1, 10))
    assert plan_split(family, params, Fraction(1), Domains(None), guards=limits) == \
        {"epsilon_bounding": Fraction(9, 200), "epsilon_items": Fraction(171, 200), "epsilon_guards": Fraction(1, 10)}
    assert plan_split(family, params, Fraction(1), Domains(None)) == {"epsilon_bounding": Fraction(1, 20),
                                                                      "epsilon_items": Fraction(19, 20)}
    with pytest.raises(ConfigError, match="leaves nothing"):
        plan_split(family, params, Fraction(1, 10), Domains(None), guards=limits)


@pytest.mark.unit
def test_limits_are_refused_where_they_cannot_be_checked_before_noise():
    with pytest.raises(ConfigError, match="guards.max_truncated_fraction is not checked for dpsense"):
        guards.Guards(max_truncated_fraction=0.1, epsilon=0.1).check_family("dpsense", "dpsense")
    with pytest.raises(ConfigError, match="guards' limits are not checked for frapp"):
        guards.Guards(max_dropped_fraction=0.1, epsilon=0.1).check_family("frapp", "frapp")
    guards.Guards(max_truncated_fraction=0.1, epsilon=0.1).check_family("counts", "sra")
    guards.Guards(strict=True).check_family("frapp", "frapp")


@pytest.mark.unit
def test_bounded_coverage_from_users_per_row_count():
    users_by_n = pd.Series({1: 5, 2: 3, 7: 2})  # 5 users with 1 row, 3 with 2, 2 with 7
    c = guards.bounded_coverage(40, {"item_id": 9}, users_by_n, 2)
    assert (c.users, c.rows_kept_by_bounding, c.users_truncated) == (10, 5 + 3 * 2 + 2 * 2, 2)


@pytest.mark.unit
def test_a_numeric_attribute_domain_is_compared_by_value():
    assert AttributeDomain(("1", "2", "3")).numbers == (1.0, 2.0, 3.0)
    assert AttributeDomain(("Mon", "Tue")).numbers is None
    assert AttributeDomain(("1", "1.0")).numbers is None  # equal as numbers: compared as text


# --- Jobs ---------------------------------------------------------------------------------------


def write_job(tmp_path: Path, source: Path, fmt: str, attributes: str, *extra: str, store: bool = False) -> Path:
    lines = [f'output = "{tmp_path / "out"}"', "seed = 3", "[source]", f'format = "{fmt}"', f'path = "{source}"',
             "[domain]", "items = { range = [1, 20] }", f"attributes = {attributes}",
             "[privacy]", "epsilon = 1", "[algorithm]", 'name = "sra"', "l = 2", *extra]
    if store:
        lines += ["[budget_store]", f'path = "{tmp_path / "budget.json"}"', 'dataset = "toy"', "epsilon_cap = 10"]
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def released(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "privacy.json").read_text())


def diagnostics(tmp_path: Path) -> dict:
    """What ``--diagnostics`` wrote: the run's NOT-private figures, outside the release."""
    return json.loads((tmp_path / "diagnostics.json").read_text())


def kept_by_sra(frame: pd.DataFrame, l: int) -> int:
    return int(np.minimum(frame.groupby("user_id").size(), l).sum())


def test_a_csv_attribute_read_as_4_0_matches_the_integer_domain(spark, tmp_path, capsys):
    csv = tmp_path / "ratings.csv"
    frame = pd.DataFrame({"user_id": [1, 1, 1, 2, 3, 3], "item_id": ["4.0", "5", "6.0", "4", "7", "8"],
                          "attr": ["4.0", "5.0", "2.0", " 1 ", "3.0", "4"]})
    frame.to_csv(csv, index=False)
    # Six records: too few for the default noise-only refusal (docs/privacy.md), released anyway.
    config = write_job(tmp_path, csv, "csv", "{ range = [1, 5] }", "[guards]", "refuse_noise_only = false")
    assert main(["run", str(config), "--diagnostics", str(tmp_path / "diagnostics.json")]) == 0
    released(tmp_path)
    cov = diagnostics(tmp_path)["coverage"]
    assert cov["rows_outside_domain"] == {"item_id": 0, "attr": 0}
    assert cov["rows_kept_by_bounding"] == kept_by_sra(frame, 2) == 5 > 0
    assert diagnostics(tmp_path)["rows_after_bounding"] == 5  # the counts saw the records
    edges = pd.read_parquet(tmp_path / "out" / "edge_counts")
    assert sorted(edges["attr"].unique()) == ["1", "2", "3", "4", "5"]  # the domain's own spelling
    assert "NOT PRIVATE: 6 rows read; outside the domain: item_id 0, attr 0" in capsys.readouterr().err


def monday_job(tmp_path: Path, *extra: str) -> Path:
    """300 users whose day reads "monday" against a domain of "Mon", ...: every row outside it."""
    source = tmp_path / "visits.parquet"
    pd.DataFrame({"user_id": range(300), "item_id": [1, 2, 3] * 100, "attr": ["monday", "tuesday"] * 150}) \
        .to_parquet(source)
    return write_job(tmp_path, source, "parquet", '["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]', *extra,
                     store=True)


def test_monday_against_mon_is_refused_on_noisy_figures(spark, tmp_path, capsys):
    config = monday_job(tmp_path, "[guards]", "max_dropped_fraction = 0.5", "epsilon = 0.1")
    assert main(["run", str(config), "--diagnostics", str(tmp_path / "diagnostics.json")]) == 5  # EXIT_GUARD
    said = capsys.readouterr().err.strip().splitlines()
    assert re.match(r"dp-spark: refused: on average (9\d|100)\.\d% of a user's rows are outside", said[-1])
    assert "(noisy)" in said[-1]
    assert "monday" not in said[-1] and "300" not in said[-1]  # the refusal quotes DP figures only
    # The operator who asked is told which values missed the domain, as a diagnostic.
    [warning] = [line for line in said if "WARNING" in line and "domain" in line]
    assert "NOT PRIVATE: WARNING: 100.0%" in warning and '"monday"' in warning and '"Mon"' in warning
    assert not (tmp_path / "out").exists()
    [run] = json.loads((tmp_path / "budget.json").read_text())["runs"]
    assert run["status"] == "refused" and run["epsilon"] == 1.0 and run["error"].startswith("GuardRefused")
    assert "monday" not in run["error"]


def test_plan_shows_the_guards_part_and_noise(tmp_path, capsys):
    config = monday_job(tmp_path, "[guards]", "max_dropped_fraction = 0.5", "epsilon = 0.1")
    assert main(["plan", str(config)]) == 0
    said = capsys.readouterr().out
    assert "epsilon_guards 0.1" in said and "epsilon_items 0.4275, epsilon_edges 0.4275" in said
    assert "guards: each noisy figure has discrete Laplace noise of scale 20 users" in said


def test_without_a_limit_an_all_outside_run_is_refused_as_noise_only(spark, tmp_path, capsys):
    """No [guards] limit: nothing is decided from the records, but the release's own DP figures
    cannot be told from noise, so the run is refused (exit 5, charged, nothing written), quoting
    noisy figures only; only an operator who asks for diagnostics hears why. With the refusal off
    (the negative control) the run releases the noise."""
    config = monday_job(tmp_path)
    assert main(["run", str(config)]) == 5
    said = capsys.readouterr().err
    assert "monday" not in said and "300" not in said and "cannot be told from noise" in said
    assert not (tmp_path / "out").exists()
    [run] = json.loads((tmp_path / "budget.json").read_text())["runs"]
    assert run["status"] == "refused" and run["epsilon"] == 1.0
    assert main(["run", str(config), "--set", "guards.refuse_noise_only=false"]) == 0
    report = released(tmp_path)
    assert report["epsilon_spent"] == 1.0 and report["guards"]["noise_only"]["refuse"] is False


def test_coverage_numbers_are_exact(spark, tmp_path, capsys):
    frame = pd.DataFrame({
        "user_id": [1, 1, 1, 1, 2, 2, 3, 4, 4, 4, 5, 5, 5],
        "item_id": [1, 2, 3, 99, 4, 5, 6, 7, 8, 9, 50, 10, 11],
        "attr": ["a", "b", "a", "a", "zzz", "a", "b", "a", "b", "b", "a", "a", "b"],
    })  # users with 3, 1, 1, 3 and 2 rows in the domain (l = 2: two truncated, one exactly at the bound)
    source = tmp_path / "records.parquet"
    frame.to_parquet(source)
    config = write_job(tmp_path, source, "parquet", '["a", "b"]', "[guards]", "warn_dropped_fraction = 0.5",
                       "refuse_noise_only = false")  # 13 records: too few to be told from noise
    assert main(["run", str(config), "--diagnostics", str(tmp_path / "diagnostics.json")]) == 0
    said = capsys.readouterr().err  # progress lines go to stderr
    cov = diagnostics(tmp_path)["coverage"]
    outside_items = ~frame["item_id"].between(1, 20)
    outside_attr = ~outside_items & ~frame["attr"].isin(["a", "b"])
    inside = frame[~outside_items & ~outside_attr]
    per_user = inside.groupby("user_id").size()
    assert cov["rows_read"] == len(frame)
    assert cov["rows_outside_domain"] == {"item_id": int(outside_items.sum()), "attr": int(outside_attr.sum())}
    assert cov["dropped_fraction"] == pytest.approx((outside_items.sum() + outside_attr.sum()) / len(frame))
    assert cov["users"] == len(per_user)
    assert cov["rows_kept_by_bounding"] == int(np.minimum(per_user, 2).sum())
    assert cov["users_truncated"] == int((per_user > 2).sum())
    assert cov["bound"] == "l = 2"
    assert f"NOT PRIVATE: {cov['users_truncated']} of {cov['users']} users" in said
    assert "WARNING (NOT PRIVATE)" not in said  # 3 of 13 rows dropped is under the 0.5 set above


def test_the_guards_draw_first_and_a_refusal_stops_the_release(spark, monkeypatch):
    steps = []
    drawn = Budget.discrete_laplace

    def recorded(self, entry, *args, **kwargs):
        steps.append(entry.step)
        return drawn(self, entry, *args, **kwargs)

    monkeypatch.setattr(Budget, "discrete_laplace", recorded)
    # 400 users with 4 rows each: one of each user's rows is outside the domain (a share of 1/4);
    # users 0-199 have 3 rows in it, more than l = 2.
    frame = pd.DataFrame([(u, i) for u in range(400) for i in ([1, 2, 3, 30] if u < 200 else [1, 2, 30])],
                         columns=["user_id", "item_id"])
    records = spark.createDataFrame(frame)
    kw = dict(items=range(1, 11), l=2, epsilon=30, seed=1)
    release = api.hpa(records, **kw, guards={"max_dropped_fraction": 0.4, "epsilon": 20})
    assert steps[:2] == ["guard: users", "guard: share of rows outside the domain"]  # before HPA's popularity
    assert release.report["guards"]["dropped_fraction_noisy"] == pytest.approx(
        (200 * 1 / 4 + 200 * 1 / 3) / 400, abs=0.01)
    steps.clear()
    with pytest.raises(GuardRefused, match="on average 29"):
        api.hpa(records, **kw, guards={"max_dropped_fraction": 0.25, "epsilon": 20})
    assert steps == ["guard: users", "guard: share of rows outside the domain"]  # nothing of HPA's own
    with pytest.raises(GuardRefused, match=r"50\.\d% of the users have more records than the bound \(l = 2\)"):
        api.sra(records, **kw, guards={"max_truncated_fraction": 0.25, "epsilon": 20})


def test_entropy_coverage_counts_pairs_and_users_over_m(spark, tmp_path):
    checkins = pd.DataFrame({"user_id": [1, 1, 1, 2, 2, 3, 3, 3], "location_id": [1, 2, 3, 1, 1, 2, 40, 3],
                             "time": [1, 2, 3, 1, 2, 1, 2, 3], "visits": [1, 2, 1, 3, 9, 1, 1, 1]})
    release = api.location_entropy(spark.createDataFrame(checkins), locations=range(1, 11), epsilon=1, M=2, C=5,
                                   time="time", visits="visits", seed=2)
    cov = release.diagnostics["coverage"]
    inside = checkins[checkins["location_id"] <= 10]
    pairs = inside.groupby(["user_id", "location_id"])["visits"].sum()
    locations = pairs.groupby("user_id").size()
    assert cov["rows_read"] == len(checkins) and cov["rows_outside_domain"] == {"location_id": 1}
    assert cov["kept_of"] == len(pairs) and cov["users"] == len(locations)
    assert cov["users_truncated"] == int((locations > 2).sum()) == 1
    assert cov["rows_kept_by_bounding"] == int(np.minimum(locations, 2).sum())
    assert cov["visits_in_domain"] == int(inside["visits"].sum())


def test_dpsense_coverage_counts_rows_longer_than_the_chosen_theta(spark):
    rows = {1: [1, 2, 3, 4, 5, 6], 2: [1, 2], 3: [3], 4: [1, 2, 3, 4, 5, 6, 7, 8]}
    frame = pd.DataFrame([(u, i) for u, items in rows.items() for i in items], columns=["user_id", "item_id"])
    release = api.dpsense(spark.createDataFrame(frame), items=range(1, 11), epsilon=1, theta_max=8, seed=4)
    theta = release.report["algorithm"]["chosen"]["theta"]
    cov = release.diagnostics["coverage"]
    lengths = np.array([len(items) for items in rows.values()])
    assert cov["users_truncated"] == int((lengths > theta).sum())
    assert cov["rows_kept_by_bounding"] == int(np.minimum(lengths, theta).sum())
    assert cov["kept_of"] == lengths.sum() and cov["bound"] == f"theta = {theta}"
