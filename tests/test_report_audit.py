"""Report audit (docs/report_audit.md): the comparison of two privacy.json files outside the
allow-list of noisy values, the wall clock and the NOT private diagnostics; the `audit-report`
command; and JOBS, every job family on tiny generated inputs in which the removed user matters,
which tests/test_observables_audit.py runs on D and on D minus that user, comparing privacy.json
with everything else a reader sees."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.lab import report_audit
from dp_spark.release import engine

HEAVY = "u99"  # the user removed to make D′: the heaviest, and at the busiest location


def user_ids(numbers) -> list[str]:
    """The inputs' user ids as a warehouse may hold them, both kinds in one column: text ("u7") for
    odd users, whole numbers for even ones. So every job below also runs on text user ids."""
    return [f"u{n}" if n % 2 else str(n) for n in numbers]


# ---------------------------------------------------------------------------
# The pure comparison.


def report(**changes) -> dict:
    base = {
        "created_utc": "2025-01-01T00:00:00+00:00",
        "algorithm": {"name": "sra", "parameters": {"l": 5}},
        "ledger": [{"step": "item_counts", "epsilon": 0.5, "sensitivity_l1": 5.0, "noise_scale": 10.0, "cells": 20},
                   {"step": "entropy", "epsilon": 0.5, "sensitivity_l1": 0.01, "noise_scale": 0.70547, "cells": 6}],
        "outputs": {"item_counts": {"rows": 20, "columns": ["item_id", "noisy_count"]}},
    }
    for path, value in changes.items():
        node = base
        *parents, last = path.split("__")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return base


def test_equal_reports_have_no_differences():
    assert report_audit.differences(report(), report()) == []


def test_a_changed_nested_value_is_reported_with_its_path():
    found = report_audit.differences(report(), report(ledger__1__noise_scale=0.68866))
    assert found == ["ledger[1].noise_scale: 0.70547 vs 0.68866"]


def test_missing_keys_list_lengths_and_types_are_differences():
    changed = report(outputs={"item_counts": {"rows": 20, "columns": ["item_id"]}, "extra": {"rows": 1}})
    found = report_audit.differences(report(), changed)
    assert "outputs.item_counts.columns: 2 entries vs 1 entries" in found
    assert "outputs.extra: missing vs {'rows': 1}" in found
    assert report_audit.differences(report(ledger__0__cells=1), report(ledger__0__cells=True)) == [
        "ledger[0].cells: 1 vs True"]


def test_allowed_fields_are_not_reported():
    other = report(created_utc="2025-06-01T12:00:00+00:00")
    assert report_audit.differences(report(), other) == []
    reasons = {d.path: d.allowed_because for d in report_audit.compare(report(), other)}
    assert set(reasons) == {"created_utc"} and all(reasons.values())


def test_raw_diagnostics_in_a_report_are_a_difference():
    """Negative control: the raw figures left the report (they were in it once); one that carries
    them again is flagged, not allowed."""
    leaky = [report(diagnostics_not_private={"rows_read": n}) for n in (120, 119)]
    assert report_audit.differences(*leaky) == ["diagnostics_not_private.rows_read: 120 vs 119"]


def test_the_allow_list_names_leaf_keys_only():
    """A DP output is allowed by its exact key; a key beside it is not."""
    auto = report(algorithm={"name": "sra", "parameters": {"l": "auto"}, "chosen": {"l": 4}})
    other = report(algorithm={"name": "sra", "parameters": {"l": "auto"}, "chosen": {"l": 8, "raw_users": 7}})
    assert report_audit.differences(auto, other) == ["algorithm.chosen.raw_users: missing vs 7"]
    fixed = report(algorithm={"name": "sra", "parameters": {"l": 5}, "chosen": {"l": 4}})
    assert report_audit.differences(fixed, report(algorithm={"name": "sra", "parameters": {"l": 5},
                                                             "chosen": {"l": 8}})) == [
        "algorithm.chosen.l: 4 vs 8"]  # l is allowed to differ only when the config asked for "auto"
    popularity = [report(algorithm={"name": "hpa", "parameters": {"l": "auto"}},
                         ledger=[{"step": "popularity", "sensitivity_l1": s}]) for s in (1.0, 2.0)]
    assert report_audit.differences(*popularity) == ["ledger[0].sensitivity_l1: 1.0 vs 2.0"]


def test_the_choices_noisy_user_count_and_cap_and_its_delta_q_may_differ_only_with_auto():
    """A review's finding: the choice's Δq and scale follow the user cap, post-processing of a
    noisy count, so they may differ between D and D′ when the count crosses a cap's threshold."""
    def choice_report(l, users, cap, sensitivity):
        return report(algorithm={"name": "sra", "parameters": {"l": l},
                                 "chosen": {"l": 4, "users_noisy": users, "user_cap": cap}},
                      ledger=[{"step": "choose l: users", "sensitivity_l1": 1.0, "noise_scale": 1000.0},
                              {"step": "choose l", "sensitivity_l1": sensitivity, "noise_scale": sensitivity / 0.009}])
    assert report_audit.differences(choice_report("auto", 888, 16, 4.01), choice_report("auto", 889, 23, 4.81)) == []
    fixed = report_audit.differences(choice_report(5, 888, 16, 4.01), choice_report(5, 889, 23, 4.81))
    assert len(fixed) == 4 and "ledger[1].sensitivity_l1: 4.01 vs 4.81" in fixed
    # The count's own step has a constant sensitivity: a difference there is still found.
    moved = choice_report("auto", 888, 16, 4.01)
    moved["ledger"][0]["sensitivity_l1"] = 2.0
    assert report_audit.differences(choice_report("auto", 888, 16, 4.01), moved) == [
        "ledger[0].sensitivity_l1: 1.0 vs 2.0"]


def test_the_bounding_estimates_noise_may_follow_the_bound_only_when_it_is_chosen_privately():
    """The noisy figures of what bounding removed may differ in every counts release; their scale
    and the cap only when l is a DP output ("auto"); a raw figure beside them never."""
    def counts_report(l, scale, kept, extra=None):
        bounding = {"records_kept_noisy": kept, "cap_per_user": 8 * (l if l != "auto" else 4),
                    "records_kept": {"scale": scale}, **(extra or {})}
        return report(algorithm={"name": "sra", "parameters": {"l": l}}, accuracy={"bounding": bounding},
                      ledger=[{"step": "bounding: kept", "sensitivity_l1": scale}])
    assert report_audit.differences(counts_report(5, 100.0, 900), counts_report(5, 100.0, 870)) == []
    fixed = report_audit.differences(counts_report(5, 100.0, 900), counts_report(5, 160.0, 900))
    assert sorted(fixed) == ["accuracy.bounding.records_kept.scale: 100.0 vs 160.0",
                             "ledger[0].sensitivity_l1: 100.0 vs 160.0"]
    assert report_audit.differences(counts_report("auto", 100.0, 900), counts_report("auto", 160.0, 870)) == []
    leaky = report_audit.differences(counts_report(5, 100.0, 900, {"records_kept_true": 901}),
                                     counts_report(5, 100.0, 900, {"records_kept_true": 900}))
    assert leaky == ["accuracy.bounding.records_kept_true: 901 vs 900"]


def test_a_ledger_allowance_holds_only_for_its_step():
    """θ* is a DP output, so DPSense's column_counts scale may follow it; the same field of any
    other step may not differ."""
    a = report(ledger__0__step="column_counts")
    b = report(ledger__0__step="column_counts", ledger__0__noise_scale=12.0, ledger__1__noise_scale=0.7)
    assert report_audit.differences(a, b) == ["ledger[1].noise_scale: 0.70547 vs 0.7"]


def test_a_gaussian_sigma_may_follow_a_chosen_theta_only_under_gaussian_noise():
    """DPSense's θ* sets its Gaussian's σ² and so the ρ spent; with Laplace noise (no Gaussian
    leaves) or at a fixed-bound count step the same fields may not differ."""
    def gaussian_report(noise, name, step, sigma, spent):
        return report(algorithm={"name": name, "parameters": {"noise": noise}}, rho_spent=spent,
                      ledger=[{"step": step, "sigma": sigma, "rho": spent}])
    assert report_audit.differences(gaussian_report("gaussian", "dpsense", "column_counts", 76.4, 0.0243),
                                    gaussian_report("gaussian", "dpsense", "column_counts", 75.1, 0.0242)) == []
    assert sorted(report_audit.differences(gaussian_report("laplace", "dpsense", "column_counts", 76.4, 0.0243),
                                           gaussian_report("laplace", "dpsense", "column_counts", 75.1, 0.0242))) == [
        "ledger[0].rho: 0.0243 vs 0.0242", "ledger[0].sigma: 76.4 vs 75.1", "rho_spent: 0.0243 vs 0.0242"]
    assert len(report_audit.differences(gaussian_report("gaussian", "sra", "item_counts", 76.4, 0.0243),
                                        gaussian_report("gaussian", "sra", "item_counts", 75.1, 0.0242))) == 3


def test_the_aggregates_user_cap_may_differ_only_where_l_is_scored_by_the_counts():
    """With the counts' quality the choice's Δq is at a noisy user cap; with the means' it follows
    from the config alone, so the same fields differing there are flagged (negative control)."""
    def aggregate_report(quality, users, delta_q):
        parameters = {"groups_per_user": "auto", "groups_per_user_quality": quality}
        return report(algorithm={"name": "aggregate", "parameters": parameters,
                                 "chosen": {"groups_per_user": 4, "users_noisy": users}},
                      ledger=[{"step": "choose groups_per_user", "sensitivity_l1": delta_q}])
    assert report_audit.differences(aggregate_report("counts", 41, 6.4), aggregate_report("counts", 40, 6.3)) == []
    assert sorted(report_audit.differences(aggregate_report("means", 41, 6.4), aggregate_report("means", 40, 6.3))) == [
        "algorithm.chosen.users_noisy: 41 vs 40", "ledger[0].sensitivity_l1: 6.4 vs 6.3"]


def test_a_cluster_count_chosen_from_noisy_values_may_differ_but_not_the_step_around_it():
    a = report(ledger__0__step="histogram (cluster sums, 4 clusters)", ledger__0__cells=4)
    b = report(ledger__0__step="histogram (cluster sums, 3 clusters)", ledger__0__cells=3)
    assert report_audit.differences(a, b) == []
    c = report(ledger__0__step="items (cluster sums, 3 clusters)", ledger__0__cells=3)
    assert report_audit.differences(a, c) == [
        "ledger[0].step: 'histogram (cluster sums, N clusters)' vs 'items (cluster sums, N clusters)'"]


def test_frapp_record_count_is_allowed_only_for_frapp():
    a = report(outputs={"perturbed_records": {"rows": 800}})
    b = report(outputs={"perturbed_records": {"rows": 797}})
    assert report_audit.differences(a, b) == ["outputs.perturbed_records.rows: 800 vs 797"]
    a["algorithm"]["name"] = b["algorithm"]["name"] = "frapp"
    a["neighbouring_relation"] = b["neighbouring_relation"] = "replacement"
    assert report_audit.differences(a, b) == []
    # Not while the report claims the add/remove-one-user relation, under which N is not public.
    a["neighbouring_relation"] = b["neighbouring_relation"] = "add/remove"
    assert report_audit.differences(a, b) == ["outputs.perturbed_records.rows: 800 vs 797"]


# ---------------------------------------------------------------------------
# Tiny inputs in which the removed user matters.


def write_ratings(path) -> str:
    """40 users with 1 to 7 ratings of items 1..20 and the heaviest user (HEAVY) with 40: well past
    every per-user bound below, and the user that sets the longest row for DPSense."""
    rng = np.random.default_rng(7)
    users = user_ids([u for u in range(1, 41) for _ in range(u % 7 + 1)] + [99] * 40)
    items = rng.integers(1, 21, len(users))
    items[-20:] = np.arange(1, 21)  # HEAVY rates every item: DPSense rows of distinct items
    frame = pd.DataFrame({"user_id": users, "item_id": items, "attr": rng.choice(["a", "b"], len(users)),
                          # Ratings for the means, a few that are no number (dropped, never counted).
                          "value": rng.choice(["1", "2.5", "4", "5", "7", "NaN", "x", ""], len(users))})
    frame.to_csv(path, index=False)
    return str(path)


def write_checkins(path) -> str:
    """Finding 1's shape: 31 users at location 1 (30 without HEAVY), fewer elsewhere; HEAVY has
    exactly M = 5 locations with C = 5 visits each, so bounding keeps all of them. Each check-in
    has a time (its row number): the default keeps each user's first M locations by time."""
    rows = [(u, 1, 1 + u % 4) for u in range(1, 31)]
    rows += [(u, 2 + u % 5, 1 + u % 3) for u in range(1, 31)]
    rows += [(99, loc, 5) for loc in range(1, 6)]
    frame = pd.DataFrame(rows, columns=["user_id", "item_id", "visits"])
    frame["user_id"] = user_ids(frame["user_id"])
    frame.assign(time=range(len(frame))).to_csv(path, index=False)
    return str(path)


def write_people(path) -> str:
    """FRAPP records: 60 people with 1 to 3 records, HEAVY with 4."""
    rng = np.random.default_rng(3)
    people = user_ids([p for p in range(1, 61) for _ in range(p % 3 + 1)] + [99] * 4)
    frame = pd.DataFrame({"person": people, "age": rng.integers(18, 90, len(people)),
                          "sex": rng.choice(["F", "M"], len(people))})
    frame.to_csv(path, index=False)
    return str(path)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    return {"ratings": write_ratings(folder / "ratings.csv"), "checkins": write_checkins(folder / "checkins.csv"),
            "people": write_people(folder / "people.csv")}


def ratings_config(path: str, algorithm: str, extra: str = "", attributes: bool = True) -> str:
    return f"""
[source]
format = "csv"
path = "{path}"
[domain]
items = {{ range = [1, 20] }}
{'attributes = ["a", "b"]' if attributes else ''}
[privacy]
epsilon = 1.0
[algorithm]
name = "{algorithm}"
{extra}
"""


def aggregate_config(path: str, privacy: str = "epsilon = 1.0") -> str:
    """Every metric per (item, attribute), with text ids and values as the CSV holds them."""
    return f"""
[source]
format = "csv"
path = "{path}"
[domain.keys]
item_id = {{ range = [1, 20] }}
attr = ["a", "b"]
[privacy]
{privacy}
[algorithm]
name = "aggregate"
by = ["item_id", "attr"]
metrics = ["count", "users", "sum(value)", "mean(value)", "stddev(value)", "quantiles(value, 0.5, 0.9)"]
groups_per_user = 3
records_per_group = 2
low = 1
high = 5
candidates = [1, 2, 3, 4, 5]
"""


def entropy_config(path: str, variant: str, bounds: str = "locations_per_user = 5\nvisits_per_location = 5") -> str:
    return f"""
[source]
format = "csv"
path = "{path}"
[domain]
items = {{ range = [1, 6] }}
[privacy]
epsilon = 5.0
{'delta = 1e-8' if variant in ('limit_ss', 'limit_cb_dp') else ''}
[algorithm]
name = "entropy"
variant = "{variant}"
{bounds}
{'k = 20' if variant.startswith('limit_cb') else ''}
outputs = ["entropy", "visits", "users"]
"""


def frapp_config(path: str, scheme: str) -> str:
    return f"""
[source]
format = "csv"
path = "{path}"
columns = {{ user_id = "person" }}
[domain]
records = [{{ column = "age", edges = [40, 65] }}, {{ column = "sex", values = ["F", "M"] }}]
[privacy]
gamma = 9
[algorithm]
name = "frapp"
scheme = "{scheme}"
records_per_user = 2
sup_min = 0.05
"""


# One case per path a reader could see differ: a variant that only changes the noise (pure or zCDP,
# l chosen privately or not, a publisher the counts already show) shares its path with another case.
# Each case is two whole runs in the observables audit, so options whose paths are independent of
# each other (guards, the per-item cap, where the noise is drawn, private items) share a case.
JOBS = {
    "sra": ("ratings", lambda p: ratings_config(p, "sra", "l = 5")),
    "sra_ahp": ("ratings", lambda p: ratings_config(p, "sra", "l = 5\n[publisher]\nname = \"ahp\"")),
    "hpa": ("ratings", lambda p: ratings_config(p, "hpa", "l = 5\nd = 2")),
    "lpa": ("ratings", lambda p: ratings_config(p, "lpa", "m = 8")),
    "dft": ("ratings", lambda p: ratings_config(p, "dft", "m = 8", attributes=False)),
    "gs": ("ratings", lambda p: ratings_config(p, "gs", "m = 8", attributes=False)),
    "user_histogram": ("ratings", lambda p: ratings_config(
        p, "user_histogram", 'quantity = "records"\nbins = [1, 2, 4, 8, 16, 32]', attributes=False)),
    "user_histogram_dpa_ahp": ("ratings", lambda p: ratings_config(
        p, "user_histogram", 'quantity = "records"\nbins = [1, 2, 4, 8, 16, 32]\n[publisher]\nname = "dpa_ahp"',
        attributes=False)),
    "dpsense": ("ratings", lambda p: ratings_config(p, "dpsense", "theta_max = 32", attributes=False)),
    "dpsense_sample": ("ratings", lambda p: ratings_config(p, "dpsense", 'theta_max = 32\nlimit = "sample"',
                                                           attributes=False)),
    "dpsense_s": ("ratings", lambda p: ratings_config(p, "dpsense_s", "theta_max = 32", attributes=False)),
    **{f"entropy_{v}": ("checkins", lambda p, v=v: entropy_config(p, v))
       for v in ("baseline", "limit", "limit_ss", "limit_cb_dp")},
    "entropy_limit_cb_guarded": ("checkins", lambda p: entropy_config(p, "limit_cb") +
                                 "[guards]\nepsilon = 0.2\nmax_dropped_fraction = 1\nmax_truncated_fraction = 1\n"),
    # M and C chosen privately: the chosen values and the release's scale may differ, nothing else.
    **{f"entropy_{v}_auto": ("checkins", lambda p, v=v: entropy_config(
        p, v, 'locations_per_user = "auto"\nvisits_per_location = "auto"\nvisits_per_location_candidates = [1, 5, 20]\n'
        'location_choice = "random"'))
       for v in ("limit", "limit_cb_dp")},
    **{f"frapp_{s}": ("people", lambda p, s=s: frapp_config(p, s)) for s in ("det_gd", "ran_gd", "mask", "cut_paste")},
    # Items selected privately.
    "sra_private_items": ("ratings", lambda p: ratings_config(p, "sra", "l = 5\nkeys_per_user = 1").replace(
        "items = { range = [1, 20] }", 'items = "private"').replace("epsilon = 1.0", "epsilon = 40.0\ndelta = 1e-6")),
    # zCDP with Gaussian noise: on the driver and the executors, with the cap of one record
    # per item, HPA with "auto", and items selected privately by the Gaussian threshold.
    "sra_gaussian_on_executors": ("ratings", lambda p: ratings_config(
        p, "sra", "l = 5\nrecords_per_item = 1\n[execution]\nexecutor_noise_cells = 1").replace(
        "epsilon = 1.0", 'epsilon = 1.0\ndelta = 1e-6\nnoise = "gaussian"')),
    "user_histogram_gaussian": ("ratings", lambda p: ratings_config(
        p, "user_histogram", 'quantity = "records"\nbins = [1, 2, 4, 8, 16, 32]', attributes=False).replace(
        "epsilon = 1.0", 'epsilon = 1.0\ndelta = 1e-6\nnoise = "gaussian"')),
    "sra_auto_gaussian": ("ratings", lambda p: ratings_config(
        p, "sra", 'l = "auto"\nl_candidates = [1, 5, 20]').replace(
        "epsilon = 1.0", 'epsilon = 1.0\ndelta = 1e-6\nnoise = "gaussian"')),
    # SRA's l = "auto": by its default, the estimate, under zCDP (above); by the exponential mechanism here.
    "sra_auto_exponential": ("ratings", lambda p: ratings_config(p, "sra", 'l = "auto"\nl_choice = "exponential"')),
    # HPA's l = "auto" by its default, the estimate at its noisy popularity.
    "hpa_auto": ("ratings", lambda p: ratings_config(p, "hpa", 'l = "auto"\nl_candidates = [1, 5, 20]')),
    "hpa_auto_noise": ("ratings", lambda p: ratings_config(p, "hpa", "l = 5\nd = 2").replace(
        "epsilon = 1.0", 'epsilon = 1.0\ndelta = 1e-6\nnoise = "auto"')),
    "sra_gaussian_private_items": ("ratings", lambda p: ratings_config(
        p, "sra", "l = 5\nkeys_per_user = 1\nrecords_per_item = 1").replace(
        "items = { range = [1, 20] }", 'items = "private"').replace(
        "epsilon = 1.0", 'epsilon = 40.0\ndelta = 1e-6\nnoise = "gaussian"')),
    # Sums and means: SRA and HPA bounding, pure and zCDP with the per-item cap, l and the range
    # chosen privately.
    "means": ("ratings", lambda p: ratings_config(p, "means", "l = 5\nlow = 1\nhigh = 5")),
    "means_hpa_gaussian": ("ratings", lambda p: ratings_config(
        p, "means", 'l = 5\nlow = 1\nhigh = 5\nbounding = "hpa"\nd = 2\nrecords_per_item = 1').replace(
        "epsilon = 1.0", 'epsilon = 1.0\ndelta = 1e-6\nnoise = "gaussian"')),
    "means_auto_clip_gaussian": ("ratings", lambda p: ratings_config(
        p, "means", 'l = "auto"\nlow = 0\nhigh = "auto"\nrecords_per_item = 1').replace(
        "epsilon = 1.0", 'epsilon = 1.0\ndelta = 1e-6\nnoise = "gaussian"')),
    "means_private_items_guarded": ("ratings", lambda p: ratings_config(
        p, "means", "l = 5\nlow = 1\nhigh = 5\n[guards]\nepsilon = 0.2\nmax_dropped_fraction = 1\n"
                    "max_truncated_fraction = 1").replace(
        "items = { range = [1, 20] }", 'items = "private"').replace("epsilon = 1.0", "epsilon = 40.0\ndelta = 1e-6")),
    # Metrics per group, by histogram and by tables (under zCDP only the noise differs, not what
    # readers see).
    # By histogram, each user's groups the most popular (HPA's rule), with guards (independent paths, one case).
    "aggregate": ("ratings", lambda p: aggregate_config(p) + 'bounding = "hpa"\nd = 2\n'
                  "[guards]\nepsilon = 0.2\nmax_dropped_fraction = 1\nmax_truncated_fraction = 1\n"),
    # By tables, with the items, l and the value's low end chosen privately (independent paths, one case).
    "aggregate_tables": ("ratings", lambda p: aggregate_config(p, "epsilon = 40.0\ndelta = 1e-6").replace(
        "item_id = { range = [1, 20] }", 'item_id = "private"').replace(
        "groups_per_user = 3", 'groups_per_user = "auto"').replace("low = 1", 'low = "auto"').replace(
        "candidates = [1, 2, 3, 4, 5]\n", "")
        + 'method = "tables"\nkeys_per_user = 1\ngroups_per_user_candidates = [1, 2, 4]\n'
        + "clip_candidates = [0, 1, 2, 3]\n"),
    # The tables released on the executors: the same report, plus where the noise was drawn.
    # Guards decide on noisy figures: their noisy values may differ, nothing else.
    "sra_guarded_on_executors": ("ratings", lambda p: ratings_config(
        p, "sra", "l = 5\n[guards]\nepsilon = 0.2\nmax_dropped_fraction = 1\nmax_truncated_fraction = 1\n"
                  "[execution]\nexecutor_noise_cells = 1")),
    "means_gaussian_on_executors": ("ratings", lambda p: ratings_config(
        p, "means", "l = 5\nlow = 1\nhigh = 5\nrecords_per_item = 1\n[execution]\nexecutor_noise_cells = 1").replace(
        "epsilon = 1.0", 'epsilon = 1.0\ndelta = 1e-6\nnoise = "gaussian"')),
    # Strict mode's report says its guarantee is conditional, on both sides; with θ* setting the
    # Gaussian's σ.
    "dpsense_gaussian_guarded_strict": ("ratings", lambda p: ratings_config(
        p, "dpsense", "theta_max = 32\n[guards]\nepsilon = 0.2\nmax_dropped_fraction = 1\nstrict = true",
        attributes=False).replace("epsilon = 1.0", 'epsilon = 1.0\ndelta = 1e-6\nnoise = "gaussian"')),
}


def leaky_report(honest):
    """``engine.build_report`` with a planted leak: the report copies the raw rows read."""
    def leaky(family, params, budget, domains, split, output, *args, **kwargs):
        built = honest(family, params, budget, domains, split, output, *args, **kwargs)
        built["domain"]["rows"] = output.diagnostics["rows_read"]
        return built
    return leaky


def write_config(tmp_path, text: str) -> str:
    path = tmp_path / "job.toml"
    path.write_text(f'output = "{tmp_path / "unused"}"\n' + text)
    return str(path)


# ---------------------------------------------------------------------------
# The command.


# The command on location entropy's check-ins, one of the cheapest whole jobs (four Spark jobs a run
# against SRA's seven); the observables audit compares every job's privacy.json on D and D′. Thirty
# users with two rows each, HEAVY with five.
COMMAND_JOB = "entropy_limit"


def test_command_removes_the_heaviest_user_and_passes_a_clean_job(spark, tmp_path, inputs, capsys):
    config = write_config(tmp_path, JOBS[COMMAND_JOB][1](inputs["checkins"]))
    assert main(["audit-report", config, "--seed", "3"]) == 0
    captured = capsys.readouterr()
    assert f"D' leaves out user {HEAVY}, who has the most rows (5)" in captured.err
    assert "D 65, D' 60" in captured.out  # the operator's check that D' is not D
    assert "privacy.json is the same on D and D' outside the allow-list" in captured.out


def test_command_fails_and_names_a_data_dependent_field(spark, tmp_path, inputs, capsys, monkeypatch):
    """A leak like finding 1, planted: the report copies the raw row count of the diagnostics."""
    monkeypatch.setattr(engine, "build_report", leaky_report(engine.build_report))
    out = tmp_path / "kept"
    config = write_config(tmp_path, JOBS[COMMAND_JOB][1](inputs["checkins"]))
    assert main(["audit-report", config, "--remove-user", str(HEAVY), "--out", str(out)]) == 4
    captured = capsys.readouterr().out
    assert "DIFFERENT outside the allow-list (1)" in captured and "domain.rows: 65 vs 60" in captured
    kept = [json.loads((out / side / "privacy.json").read_text()) for side in ("D", "D_prime")]
    assert [r["domain"]["rows"] for r in kept] == [65, 60] and all(r["fixed_seed"] for r in kept)
