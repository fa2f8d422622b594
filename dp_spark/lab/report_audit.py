"""Report audit: privacy.json must not depend on the data (docs/report_audit.md).

A job run on an input D and on its neighbour D′ (one user removed) must write the same
privacy.json, except for

- fields that are not derived from the data at all (the wall clock), and
- fields that are outputs of a DP mechanism, or post-processing of one, each named by its exact
  leaf key and justified below.

The raw diagnostics are not in the report at all: they go to the operator, when asked
(``dp-spark run --diagnostics FILE``, ``Release.diagnostics``), so a report that carries any is a
difference like any other.

Everything else — every ledger entry's epsilon, sensitivity and noise scale, the guarantee, the
domain, the output shapes — must be a function of the config and the public domains only, or
the report itself leaks the data (as a ledger noise scale once did: it told 30 users from 31
at one location). :func:`differences` compares two reports and names every other field that differs.

This half of the module is pure (dicts in, strings out). :func:`neighbour_reports` below runs
a job on D and D′ with Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# ---------------------------------------------------------------------------
# What may differ between the reports of D and D′, and why.


@dataclass(frozen=True)
class Allowed:
    """Fields that may differ: ``pattern`` is a path such as ``ledger[*].cells`` (``*`` stands for
    any one key or index; a pattern also covers everything below it). With ``step``, only ledger
    entries whose step (on both sides, after :data:`STEP_NORMALISERS`) matches that regex."""

    pattern: str
    reason: str
    step: str | None = None


ALLOWED: tuple[Allowed, ...] = (
    Allowed("created_utc", "the wall clock when the report was written: not derived from the data"),
    Allowed("run.budget_store.run_id", "a random name the budget store gives each run: not derived from the data"),
    # The noise-only refusal (release.noise_only) decides on the release's own DP figures.
    Allowed("guards.noise_only.figures", "DP outputs: the noisy records kept (step bounding: kept) and released "
            "tables' totals (post-processing), with thresholds from the public noise at a bound, or over items, "
            "that may be chosen privately"),
    # DPSense and DPSense-S: θ* (and α*) are drawn by the exponential mechanism, whose epsilon_theta is
    # in the ledger; the reader needs them to use the counts.
    Allowed("algorithm.chosen.theta", "θ* is an output of DPSense's exponential mechanism (ledger step theta or "
            "theta_alpha)"),
    Allowed("algorithm.chosen.alpha", "α* is an output of DPSense-S's exponential mechanism (ledger step "
            "theta_alpha)"),
    # Location entropy's M and C are outputs of its exponential mechanism (ledger step bound (M, C)).
    Allowed("algorithm.chosen.M", "location entropy's M is an output of its exponential mechanism (step bound (M, C))"),
    Allowed("algorithm.chosen.C", "location entropy's C is an output of its exponential mechanism (step bound (M, C))"),
    # The column counts are released with sensitivity θ* and scale θ*/epsilon_counts: functions of the
    # DP output θ* above, hence post-processing of it (sequential composition).
    Allowed("ledger[*].sensitivity_l1", "DPSense's column-count sensitivity is θ*, a DP output",
            step=r"column_counts"),
    Allowed("ledger[*].noise_scale", "DPSense's column-count scale is θ*/epsilon_counts, θ* a DP output",
            step=r"column_counts"),
    # Location entropy with M or C "auto": the release's steps (named "... (at the chosen M, C)") have
    # sensitivity and scale from the chosen M and C, outputs of the exponential mechanism (step "bound (M, C)").
    Allowed("ledger[*].sensitivity_l1", "location entropy's sensitivity follows from the privately chosen M, C",
            step=r".* \(at the chosen M, C\)"),
    Allowed("ledger[*].noise_scale", "location entropy's scale follows from the privately chosen M, C",
            step=r".* \(at the chosen M, C\)"),
    # AHP (and DPA-AHP / SDPA-AHP, which end in AHP's second phase) clusters the bins by their noisy
    # first-pass values: the number of clusters is post-processing of that release.
    Allowed("ledger[*].cells", "AHP's number of clusters comes from its noisy first pass (a DP output)",
            step=r".*\(cluster sums, N clusters\)"),
    # GS picks its group width from the noisy ordering sample (its first ledger step).
    Allowed("ledger[*].cells", "GS's number of groups follows from its width, chosen from the noisy ordering "
            "sample (a DP output)", step=r".*\(group sums, width W\)"),
    # FRAPP: the itemsets are mined from the perturbed records, which are the local-DP release itself.
    Allowed("algorithm.frequent_itemsets_per_length", "FRAPP's itemsets are mined from the perturbed records "
            "(post-processing of the local-DP release)"),
    Allowed("outputs.frequent_itemsets.rows", "FRAPP's itemsets are mined from the perturbed records "
            "(post-processing of the local-DP release)"),
    # The guards' figures: discrete Laplace releases in the ledger (steps "guard: ..."), and the
    # fractions are post-processing of them. Their limits and ε are config, so not listed.
    Allowed("guards.users_noisy", "the guards' noisy user count (ledger step guard: users)"),
    Allowed("guards.dropped_fraction_noisy", "post-processing of the guards' noisy share sum and user count "
            "(ledger steps guard: ...)"),
    Allowed("guards.truncated_fraction_noisy", "post-processing of the guards' noisy count of users over the "
            "bound and user count (ledger steps guard: ...)"),
)

# The step names of ledger entries that carry a number chosen from a DP output (the cluster count,
# the group width) are compared with that number replaced by a letter; the number itself is allowed
# above through ``cells``.
STEP_NORMALISERS: tuple[tuple[str, str], ...] = (
    (r"\(cluster sums, \d+ clusters\)", "(cluster sums, N clusters)"),
    (r"\(group sums, width \d+\)", "(group sums, width W)"),
)

# FRAPP's local guarantee is for one record under replacement, with the record count N public
# (specification §1.1): removing a user changes N, visibly and by design. The
# allowance holds only while the report says so, i.e. does not claim the add/remove-one-user unit,
# under which a published N would be a leak.
FRAPP_ALLOWED = (Allowed("outputs.perturbed_records.rows", "FRAPP publishes every perturbed record: the count "
                         "N is public under its local guarantee (one record, replacement neighbours)"),)


# Counts with l = "auto" (or m): the release's sensitivity and scale are the chosen bound, an output
# of the exponential mechanism (ledger step "choose l"), and so is the accuracy worked out at it.
# Only for reports whose config asked for "auto" (a public fact), so a fixed-bound job keeps the
# full check.
# HPA's popularity step has sensitivity d, a config value, whatever l is chosen: not covered.
COUNTS_COUNT_STEPS = r"item_counts|edge_counts"
# The means' tables, paid at the chosen l as well (families/means_params.PAIRS).
MEANS_STEPS = r"value_counts|value_sums|edge_value_counts|edge_value_sums"
CHOSEN_BOUND_STEPS = f"{COUNTS_COUNT_STEPS}|{MEANS_STEPS}"
# The accuracy leaves that follow from the scale (the note names the chosen bound), and a mean's
# interval half-widths by records and the count a mean needs (from the chosen l and range; whether
# a cell's records are its users follows from the chosen l when no per-item cap is given).
ACCURACY_LEAVES = ("scale", "sd", "ci95_halfwidth", "note", "interval_halfwidth_by_records",
                   "least_records_for_a_mean", "records_counted")


def _accuracy_allowed(report: dict) -> tuple[Allowed, ...]:
    """Each accuracy leaf that follows from the privately chosen bound, with the (1 − α) key of the
    report's own α."""
    from dp_spark.core.accuracy import confidence_label

    alpha = report.get("accuracy", {}).get("alpha") if isinstance(report.get("accuracy"), dict) else None
    leaves = ACCURACY_LEAVES + ((f"ci{confidence_label(alpha)}_halfwidth",) if isinstance(alpha, float) else ())
    return tuple(Allowed(f"accuracy.tables.*.*.{leaf}", "worked out at the privately chosen bound "
                         "(post-processing of a DP output)") for leaf in dict.fromkeys(leaves))


def _sum_column_allowed(parameters: dict) -> tuple[Allowed, ...]:
    """An aggregation's sum column, whose distribution names the grid unit and centre of the
    privately chosen range (CLIP_AUTO_ALLOWED's noisy_sum, under the column's own name)."""
    found = [re.match(r"sum\((\w+)\)", str(m)) for m in parameters.get("metrics", ())]
    return tuple(Allowed(f"accuracy.tables.*.sum_{m.group(1)}.{leaf}", why) for m in found if m
                 for leaf, why in (("distribution", "names the grid unit and centre of the privately chosen range (a "
                                    "DP output)"),
                                   ("kind", "exact where the privately chosen range is centred on 0, else an upper "
                                    "bound (a union bound)")))


# The exponential mechanism of the bound's choice (its Δq depends on the user cap the count set).
CHOICE_STEPS = r"choose l|choose m"
# The steps of the estimate of what bounding removed (release.bounding_estimate).
BOUNDING_STEPS = r"bounding: kept|bounding: removed"


def _bounding_accuracy_allowed(report: dict) -> tuple[Allowed, ...]:
    """The bounding estimate's accuracy leaves, worked out at the privately chosen bound."""
    return tuple(Allowed(a.pattern.replace("accuracy.tables.*.*.", f"accuracy.bounding.{figure}."), a.reason)
                 for figure in ("records_kept", "records_removed") for a in _accuracy_allowed(report))


COUNTS_AUTO_ALLOWED = (
    Allowed("algorithm.chosen.l", "the counts' l is an output of the exponential mechanism (step choose l)"),
    Allowed("algorithm.chosen.m", "the baselines' m is an output of the exponential mechanism (step choose m)"),
    Allowed("algorithm.chosen.users_noisy", "the users with an in-domain record, with discrete Laplace noise (step "
            "choose l: users, or choose m: users)"),
    Allowed("algorithm.chosen.user_cap", "the quality's user cap: post-processing of the noisy user count"),
    Allowed("algorithm.chosen.record_counts_noisy", "SRA's estimate choice: users per bin of record counts, with "
            "noise (step choose l: record counts)"),
    Allowed("algorithm.chosen.bias_anchors_noisy", "SRA's estimate choice: the scored tables' weighted bias norm at "
            "the smallest candidate, with noise (step choose l: bias of ...)"),
    Allowed("ledger[*].sensitivity_l1", "the choice's Δq is at the user cap, post-processing of the noisy user count",
            step=CHOICE_STEPS),
    Allowed("ledger[*].noise_scale", "the choice's Δq/ε is at the user cap, post-processing of the noisy user count",
            step=CHOICE_STEPS),
    Allowed("ledger[*].sensitivity_l1", "the tables' sensitivity is the privately chosen bound (a DP output)",
            step=f"{CHOSEN_BOUND_STEPS}|{BOUNDING_STEPS}"),
    Allowed("ledger[*].noise_scale", "the tables' scale follows from the privately chosen bound (a DP output)",
            step=f"{CHOSEN_BOUND_STEPS}|{BOUNDING_STEPS}"),
    Allowed("accuracy.bounding.bias", "names the privately chosen bound (a DP output)"),
    Allowed("accuracy.bounding.cap_per_user", "a multiple of the privately chosen bound (a DP output)"),
)
# Means with low or high "auto": the range is an output of the exponential mechanisms (steps "choose
# low", "choose high"), whose Δq and scale follow from the tail q, post-processing of the noisy user
# count (step "choose clip: users"). The tables are paid in grid units, whatever the range; their
# accuracy in value units, and the distribution that names the grid unit, follow from the range.
CLIP_STEPS = r"choose low|choose high"
CLIP_AUTO_ALLOWED = (
    Allowed("algorithm.chosen.low", "an output of the exponential mechanism (step choose low)"),
    Allowed("algorithm.chosen.high", "an output of the exponential mechanism (step choose high)"),
    Allowed("algorithm.chosen.clip_users_noisy", "the users with a usable record, with discrete Laplace noise (step "
            "choose clip: users)"),
    Allowed("algorithm.chosen.clip_tail", "post-processing of the noisy user count (step choose clip: users)"),
    Allowed("ledger[*].sensitivity_l1", "max(q, 1 - q) for the tail q, post-processing of the noisy user count",
            step=CLIP_STEPS),
    Allowed("ledger[*].noise_scale", "2 max(q, 1 - q)/epsilon for the tail q, post-processing of the noisy user "
            "count", step=CLIP_STEPS),
    Allowed("ledger[*].cells", "the candidates above the privately chosen low (a DP output)", step=r"choose high"),
    Allowed("accuracy.tables.*.noisy_sum.distribution", "names the grid unit and centre of the privately chosen "
            "range (a DP output)"),
    Allowed("accuracy.tables.*.noisy_sum.kind", "exact where the privately chosen range is centred on 0, else an "
            "upper bound (a union bound)"),
    Allowed("ledger[*].value_unit", "the value one grid unit of the sums' noise stands for: the privately chosen "
            "range's half-width over the grid's steps",
            step=r"value_sums|edge_value_sums|sum\(\w+\)|sum of squares\(\w+\)"),
)
# Every counts and means release: the estimate of what bounding removed is drawn with discrete
# Laplace noise (ledger steps "bounding: kept" and "bounding: removed"); the shares and the warning
# are post-processing of it and of public numbers.
COUNTS_ALGORITHMS = ("sra", "hpa", "lpa", "dft", "gs")
BOUNDING_ALGORITHMS = (*COUNTS_ALGORITHMS, "means")
BOUNDING_ALLOWED = tuple(Allowed(f"accuracy.bounding.{leaf}", why) for leaf, why in (
    ("records_kept_noisy", "the records kept, with discrete Laplace noise (step bounding: kept)"),
    ("records_removed_at_least_noisy", "the records removed up to the cap, with discrete Laplace noise (step "
                                       "bounding: removed)"),
    ("kept_share_noisy", "post-processing of the two noisy figures"),
    ("kept_share_at_most_95", "post-processing of the two noisy figures and their public noise"),
    ("warning", "post-processing of the noisy records kept and the tables' public noise"),
))
# Counts over items selected privately: the selected items are the output of partition selection
# (ledger step "select items"), and the domain, the cells and the tables' rows follow from them.
PRIVATE_ITEMS_ALLOWED = (
    Allowed("algorithm.chosen.items_selected", "the number of items partition selection released (step select "
            "items)"),
    Allowed("domain.items", "the items selected privately (a DP output): their number"),
    Allowed("domain.item_count", "the number of items selected privately (a DP output)"),
    Allowed("ledger[*].cells", "one cell per item selected privately (a DP output)",
            step=CHOSEN_BOUND_STEPS),
    Allowed("outputs.*.rows", "one row per item selected privately (a DP output)"),
)

# An aggregation whose key columns are chosen privately: its groups are the tuples partition
# selection released (ledger step "select groups") times the public keys' values.
PRIVATE_GROUPS_ALLOWED = (
    Allowed("algorithm.chosen.groups_selected", "the number of groups, from the tuples partition selection released "
            "(step select groups)"),
    Allowed("ledger[*].cells", "one cell per group (and candidate), whose number follows from the tuples selected "
            "privately (a DP output)", step=r"(?!select groups$).*"),
    Allowed("outputs.*.rows", "one row per group, whose number follows from the tuples selected privately"),
)
# An aggregation with groups_per_user = "auto": l is an output of the exponential mechanism (step
# "choose groups_per_user"), and every metric step's sensitivity and scale follow from it.
AGGREGATE_CHOICE_STEP = r"choose groups_per_user"
AGGREGATE_METRIC_STEPS = r"(?!choose groups_per_user|select groups$|popularity$).*"
AGGREGATE_AUTO_ALLOWED = (
    Allowed("algorithm.chosen.groups_per_user", "an output of the exponential mechanism (step choose "
            "groups_per_user)"),
    *(Allowed(f"ledger[*].{leaf}", "the metric steps' sensitivity follows from the privately chosen l (a DP output)",
              step=AGGREGATE_METRIC_STEPS) for leaf in ("sensitivity_l1", "noise_scale")),
)
# The counts' quality only (parameters.groups_per_user_quality "counts"): its Δq is at a user cap
# from a noisy count of the users. The means' quality draws no such count, and its Δq follows from
# the config alone: a neighbour that moved it would be flagged.
AGGREGATE_USER_CAP_ALLOWED = (
    Allowed("algorithm.chosen.users_noisy", "the users with a record in a group, with discrete Laplace noise (step "
            "choose groups_per_user: users)"),
    Allowed("algorithm.chosen.user_cap", "the quality's user cap: post-processing of the noisy user count"),
    *(Allowed(f"ledger[*].{leaf}", "the choice's Δq is at the user cap, post-processing of the noisy user count",
              step=AGGREGATE_CHOICE_STEP) for leaf in ("sensitivity_l1", "noise_scale")),
)

# Under zCDP a Gaussian step's σ² is the sensitivity's over ε², rounded up to what the exact sampler
# takes; where that sensitivity is a DP output (DPSense's θ*, the counts' chosen bound), σ², the step's
# ρ and so the report's ρ spent, the ε it is stated as and the guarantee that quotes them follow from
# it (within about 10^-7 of the share's ρ). Only for reports whose config asked for Gaussian noise.
GAUSSIAN_LEAVES = ("rho", "rho_exact", "sensitivity_l2", "sigma", "sigma_squared_exact")


def _gaussian_chosen_allowed(steps: str, chosen: str) -> tuple[Allowed, ...]:
    why = f"the Gaussian's sigma and rho follow from {chosen} (a DP output)"
    return (*(Allowed(f"ledger[*].{leaf}", why, step=steps) for leaf in GAUSSIAN_LEAVES),
            *(Allowed(key, f"{why}: the rho spent and the epsilon it is stated as")
              for key in ("rho_spent", "rho_spent_exact", "epsilon_spent", "guarantee")))


def allowed_for(report: dict) -> tuple[Allowed, ...]:
    """The allow-list for a report of this job family (and of its config's public choices)."""
    algorithm = report.get("algorithm")
    name = algorithm.get("name") if isinstance(algorithm, dict) else None
    # N is outside a local replacement guarantee, and the report says so (not_hidden); under the
    # add/remove-one-user relation of the central families it would be a leak.
    if name == "frapp" and report.get("neighbouring_relation") == "replacement":
        return ALLOWED + FRAPP_ALLOWED
    parameters = algorithm.get("parameters", {}) if isinstance(algorithm, dict) else {}
    extra = ()
    gaussian = parameters.get("noise") in ("gaussian", "auto")
    if name in BOUNDING_ALGORITHMS:
        extra += BOUNDING_ALLOWED
    if any(parameters.get(bound) == "auto" for bound in ("l", "m")):
        extra += COUNTS_AUTO_ALLOWED + _accuracy_allowed(report) + _bounding_accuracy_allowed(report)
        if gaussian:
            extra += _gaussian_chosen_allowed(CHOSEN_BOUND_STEPS, "the privately chosen bound")
    if name in ("means", "aggregate") and "auto" in (parameters.get("low"), parameters.get("high")):
        extra += CLIP_AUTO_ALLOWED + _accuracy_allowed(report) + _sum_column_allowed(parameters)
    if gaussian and name in ("dpsense", "dpsense_s"):
        extra += _gaussian_chosen_allowed(r"column_counts", "theta*")
    if parameters.get("items") == "private":
        extra += PRIVATE_ITEMS_ALLOWED
    domain = report.get("domain")
    if name == "aggregate" and isinstance(domain, dict) and domain.get("private_keys"):
        extra += PRIVATE_GROUPS_ALLOWED
    if name == "aggregate" and parameters.get("groups_per_user") == "auto":
        extra += AGGREGATE_AUTO_ALLOWED + _accuracy_allowed(report)
        if parameters.get("groups_per_user_quality") != "means":
            extra += AGGREGATE_USER_CAP_ALLOWED
        if gaussian:
            extra += _gaussian_chosen_allowed(AGGREGATE_METRIC_STEPS, "the privately chosen groups_per_user")
    return ALLOWED + extra


# ---------------------------------------------------------------------------
# Comparing two reports.


def _path(parts: tuple) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(the report)"


def _pattern_parts(pattern: str) -> tuple:
    parts = []
    for key, index in re.findall(r"([^.\[\]]+)|\[([^\]]+)\]", pattern):
        parts.append(key if key else ("*" if index == "*" else int(index)))
    return tuple(parts)


def _covers(pattern: tuple, parts: tuple) -> bool:
    return len(parts) >= len(pattern) and all(p == "*" or p == q for p, q in zip(pattern, parts))


def normalised_step(step: object) -> object:
    if not isinstance(step, str):
        return step
    for regex, replacement in STEP_NORMALISERS:
        step = re.sub(regex, replacement, step)
    return step


def _allowance(parts: tuple, a: dict, b: dict, allowed: tuple[Allowed, ...]) -> Allowed | None:
    """The rule that lets the field at ``parts`` differ, or None."""
    for rule in allowed:
        if not _covers(_pattern_parts(rule.pattern), parts):
            continue
        if rule.step is None:
            return rule
        # A ledger rule: the entry's step must match on both sides.
        if parts[0] == "ledger" and len(parts) > 1 and isinstance(parts[1], int):
            steps = [_entry_step(r, parts[1]) for r in (a, b)]
            if all(isinstance(s, str) and re.fullmatch(rule.step, s) for s in steps):
                return rule
    return None


def _entry_step(report: dict, index: int) -> object:
    ledger = report.get("ledger")
    if isinstance(ledger, list) and index < len(ledger) and isinstance(ledger[index], dict):
        return normalised_step(ledger[index].get("step"))
    return None


def _show(value: object) -> str:
    return "missing" if value is _MISSING else repr(value)


_MISSING = object()


def _walk(x: object, y: object, parts: tuple, out: list[tuple[tuple, str]]) -> None:
    if isinstance(x, dict) and isinstance(y, dict):
        for key in list(x) + [k for k in y if k not in x]:
            _walk(x.get(key, _MISSING), y.get(key, _MISSING), parts + (key,), out)
        return
    if isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            out.append((parts, f"{len(x)} entries vs {len(y)} entries"))
        for index, (u, v) in enumerate(zip(x, y)):
            _walk(u, v, parts + (index,), out)
        return
    if parts and parts[-1] == "step" and "ledger" in parts:
        x, y = normalised_step(x), normalised_step(y)
    # bool is an int in Python: True == 1 must still count as a difference of type.
    if x != y or type(x) is not type(y):
        out.append((parts, f"{_show(x)} vs {_show(y)}"))


@dataclass(frozen=True)
class Difference:
    path: str  # e.g. ledger[2].noise_scale
    values: str  # e.g. 0.70547 vs 0.68866
    allowed_because: str | None = None  # the allow-list's reason, or None: a leak

    def __str__(self) -> str:
        return f"{self.path}: {self.values}"


def compare(a: dict, b: dict, allowed: tuple[Allowed, ...] | None = None) -> list[Difference]:
    """Every field where two privacy.json dicts differ, each with the allow-list's reason when
    the allow-list (by default the one for ``a``'s job family) lets it differ."""
    allowed = allowed_for(a) if allowed is None else allowed
    found: list[tuple[tuple, str]] = []
    _walk(a, b, (), found)
    out = []
    for parts, values in found:
        rule = _allowance(parts, a, b, allowed)
        out.append(Difference(_path(parts), values, rule.reason if rule else None))
    return out


def differences(a: dict, b: dict, allowed: tuple[Allowed, ...] | None = None) -> list[str]:
    """The differences outside the allow-list, as ``path: value in a vs value in b``, e.g.
    ``ledger[2].noise_scale: 0.70547 vs 0.68866``. Empty when the reports agree."""
    return [str(d) for d in compare(a, b, allowed) if d.allowed_because is None]


# ---------------------------------------------------------------------------
# Running a job on D and D′ (Spark). A NOT private test: the operator's tool reads the raw data to
# pick the user, both runs use a fixed seed, and neither charges the configured budget store.


def audit_config(cfg, output: str, seed: int, drop_user: int | str | None = None):
    """``cfg`` for one side of the audit: its own output, a fixed seed, no run date, no budget
    store, the source without ``drop_user`` (D′) or whole (D), and the noise-only refusal off
    (release.noise_only): the audit compares the privacy.json a release writes, on small data too."""
    return replace(cfg, output=output, seed=seed, run_date=None, budget_store=None,
                   source=replace(cfg.source, drop_user=drop_user),
                   guards=replace(cfg.guards, refuse_noise_only=False))


def _loaded_source(cfg, spark):
    """The source as the job loads it, and the name of its user id column."""
    from dp_spark.errors import ConfigError
    from dp_spark.families.registry import family_of
    from dp_spark.jobs.reading import family_records

    df = family_records(family_of(cfg.algorithm), cfg.params, spark, cfg.source, want_attr=False)
    if "user_id" not in df.columns:
        raise ConfigError("the FRAPP source has no user id column (source.columns.user_id): every row is its "
                          "own user, and a row cannot be named to remove it")
    return df, "user_id"


def heaviest_user(cfg, spark) -> tuple[int | str, int]:
    """(user id, its number of rows) of the user with the most rows in the source; the smallest
    id among ties. Reads the raw data: NOT private, for this test only."""
    from pyspark.sql import functions as F

    from dp_spark.errors import DataError
    from dp_spark.io import validation

    df, column = _loaded_source(replace(cfg, source=replace(cfg.source, drop_user=None)), spark)
    _bad, user = validation.user_values(df, column)
    top = (df.select(user.alias("user")).where(F.col("user").isNotNull()).groupBy("user").count()
           .orderBy(F.desc("count"), "user").first())
    if top is None:
        raise DataError("the source has no user with a usable id")
    return (top["user"] if isinstance(top["user"], str) else int(top["user"])), int(top["count"])


@dataclass(frozen=True)
class NeighbourReports:
    user: int | str  # the user removed from D to make D′
    on_d: dict  # privacy.json of the run on D
    on_d_prime: dict  # privacy.json of the run on D′
    # Each run's NOT-private diagnostics (never in the reports): that rows_read differs shows D′ is not D.
    diagnostics: tuple[dict, dict] = ({}, {})

    def compare(self) -> list[Difference]:
        return compare(self.on_d, self.on_d_prime)

    def differences(self) -> list[str]:
        return differences(self.on_d, self.on_d_prime)


def neighbour_reports(cfg, spark, workdir: str, user: int | str | None = None, seed: int = 0,
                      progress=None) -> NeighbourReports:
    """Run the job on D (the configured source) into ``workdir/D`` and on D′ (D without ``user``,
    by default the heaviest) into ``workdir/D_prime``, each with ``seed``; return the two
    privacy.json files as written."""
    from dp_spark.io import release_store
    from dp_spark.jobs.runner import run_job

    if user is None:
        user, _rows = heaviest_user(cfg, spark)
    base = workdir.rstrip("/")
    reports, diagnostics = [], []
    for name, dropped in (("D", None), ("D_prime", user)):
        side = audit_config(cfg, f"{base}/{name}", seed, dropped)
        result = run_job(side, spark, progress)
        reports.append(release_store.read_report(spark, result.output))
        diagnostics.append(result.diagnostics or {})
    return NeighbourReports(user, *reports, diagnostics=tuple(diagnostics))
