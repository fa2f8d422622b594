"""What ``dp-spark audit`` audits: every publisher and algorithm family, on tiny neighbouring
inputs chosen as the worst cases of their sensitivity analyses, and the negative controls.

``TARGETS`` holds one point per mechanism (``dp-spark audit NAME``); ``FAMILIES`` holds each
mechanism's grid (``dp-spark audit NAME --grid``): ε ∈ {0.1, 1, 5} for every family, γ ∈ {1.1, 1.5,
e, 19} for FRAPP, and the boundary inputs where a mechanism is weakest (Limit-SS with many users
near the ξ floor of smooth sensitivity, publishers on all-empty bins where thresholding and
clipping start, the bound selection on candidate lists from two close bounds to a range of 1 to
100,000, over one and two tables, location entropy's choice of (M, C) on a small and the
default grid, for limit and limit_ss). Grid points are named
``family[key=value,...]``. Each sampler calls the same functions the jobs call; the samplers are
in :mod:`.primitives`, :mod:`.bounds`, :mod:`.bounding`, :mod:`.entropy_bounds`, :mod:`.entropy`,
:mod:`.frapp` and :mod:`.jobs`, and the negative controls built from old, broken code paths in
:mod:`.old_code`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dp_spark.core.ledger import Budget, LedgerEntry
from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import ConfigError
from dp_spark.lab.audit import Family, Target, point_name
from dp_spark.lab.audit_targets import bounding, bounds, clip, jobs, old_code, partition, quantiles
from dp_spark.lab.audit_targets import entropy as ent
from dp_spark.lab.audit_targets import entropy_bounds as ebounds
from dp_spark.lab.audit_targets import frapp as fr
from dp_spark.lab.audit_targets import mean_bounds as mbounds
from dp_spark.lab.audit_targets import primitives as prim
from dp_spark.release import bound_selection as bs
from dp_spark.release import mean_bound_quality as mq
from dp_spark.release import partition_selection as ps
from dp_spark.release.bounding_estimate import CAP_FACTOR

EPSILONS = (Fraction(1, 10), Fraction(1), Fraction(5))
GAMMAS = (Fraction(11, 10), Fraction(3, 2), Fraction(271828, 100000), Fraction(19))  # 271828/100000: just under e
DEFAULT_EPSILON = Fraction(1)
# The bound selection's ε: the grid's, and 0.01, a share as small as a tenth of ε = 0.1.
BOUND_EPSILONS = (Fraction(1, 100), *EPSILONS)
ENTROPY_EPSILON = Fraction(5)  # the single-point entropy targets (the grid adds 0.1 and 1)
DEFAULT_GAMMA = GAMMAS[2]
PUBLISHERS = {"laplace": "LPA", "alpa": "ALPA", "fourier": "FPA (k = 2)", "grouping": "GS", "ahp": "AHP",
              "dpa_ahp": "corrected DPA-AHP", "sdpa_ahp": "corrected SDPA-AHP (DPA-AHP with delta = 1)"}
PUBLISHER_OPTIONS = {"fourier": {"k": 2}}
# A release of these takes 2-8 ms (sorting, clustering, per-bin scales in Python): their grid
# points run 5,000 releases per side, which still flags a publisher whose true ε exceeds its
# claim by about 0.3 or more, and keeps the full grid near half an hour. `--trials` overrides.
SLOW_PUBLISHERS = {"fourier", "grouping", "ahp", "dpa_ahp", "sdpa_ahp"}
SLOW_PUBLISHER_GRID_TRIALS = 5_000
SPARK_JOBS = {
    "sra": (jobs.sra_sampler, f"SRA item counts, l = {jobs.JOB_L}: D' adds a user with {3 * jobs.JOB_L} records of "
            "one item"),
    "hpa": (jobs.hpa_sampler, f"HPA with its noisy popularity steering each trial's selection, {jobs.HPA_ITEMS} "
            f"items, l = {jobs.HPA_L}, d = {jobs.HPA_D}: D' adds a user with records of every item"),
    "dpsense": (jobs.dpsense_sampler, f"DPSense theta and normalised column counts, theta_max = "
                f"{jobs.DPSENSE_THETA_MAX}: D' adds a full row"),
    "dpsense_sample": (lambda eps: jobs.dpsense_sampler(eps, limit="sample"),
                       f"DPSense with limit = 'sample' (theta random ones per row), theta_max = "
                       f"{jobs.DPSENSE_THETA_MAX}: D' adds a full row"),
    "dpsense_s": (jobs.dpsense_s_sampler, f"DPSense-S (theta, alpha) and scaled column counts, theta_max = "
                  f"{jobs.DPSENSE_THETA_MAX}: D' adds a full row"),
    "user_histogram": (jobs.user_histogram_sampler, "user_histogram of records per user, 5 bins: D' adds a user "
                       "with 3 records"),
}
ENTROPY_VARIANTS = ("baseline", "limit", "limit_ss", "limit_cb_dp")
# Releases per side at the Limit-SS boundary, for the real code and the control of its old rounded
# scale alike: the old scale's excess there is small (68/67 units), and at 3M the control's bound
# ranged from 0 to 0.053 over seeds 1-4. At 12M it gave 0.052-0.068 at α = 5% and 0.032-0.039 at the
# Bonferroni share of a full grid (claim 0.02), seeds 1-3.
BOUNDARY_TRIALS = 12_000_000


# ---------------------------------------------------------------------------
# One target per grid point.


def discrete_laplace_target(name: str, eps: Fraction) -> Target:
    return Target(name, float(eps), 0.0, f"discrete Laplace, Delta = 1, eps = {float(eps):g}: count 0 against 1",
                  prim.discrete_laplace_sampler(eps), trials=200_000)


def discrete_gaussian_target(name: str, eps: Fraction) -> Target:
    return Target(name, float(eps), prim.AUDIT_DELTA,
                  f"discrete Gaussian under zCDP, rho = rho_of({float(eps):g}, {prim.AUDIT_DELTA:g}), Delta_2 = 1: "
                  "count 0 against 1; the claim is the (eps, delta) the conversion states",
                  prim.discrete_gaussian_sampler(eps), trials=200_000)


def exponential_target(name: str, eps: Fraction) -> Target:
    return Target(name, float(eps), 0.0, f"exponential mechanism, 51 candidates, Delta q = 1, eps = {float(eps):g}",
                  prim.exponential_sampler(eps))


def publisher_target(name: str, publisher: str, eps: Fraction, bins: str = "mixed", trials: int = 20_000) -> Target:
    return Target(name, float(eps), 0.0, f"{PUBLISHERS[publisher]} publisher, eps = {float(eps):g}, 8 {bins} bins, "
                  "one user added to bin 0",
                  prim.publisher_sampler(publisher, eps, bins, **PUBLISHER_OPTIONS.get(publisher, {})), trials=trials)


def publisher_family(publisher: str) -> Family:
    """ε on the grid with the mixed bins, and the all-empty bins (the boundary) at ε = 1."""
    trials = SLOW_PUBLISHER_GRID_TRIALS if publisher in SLOW_PUBLISHERS else 20_000
    points = [(eps, "mixed") for eps in EPSILONS] + [(DEFAULT_EPSILON, "zero")]
    return Family(publisher, tuple(publisher_target(point_name(publisher, eps=eps, bins=bins), publisher, eps, bins,
                                                    trials) for eps, bins in points))


def first_pass_target(name: str, eps: Fraction) -> Target:
    return Target(name, prim.first_pass_claim(eps, False), 0.0,
                  f"corrected DPA-AHP (delta = 1), eps = {float(eps):g}: ranking pass and first pass, bins [2, 2] "
                  "against [2, 1], measured on bin 1 (the bin that differs)", prim.first_pass_sampler(eps, False),
                  trials=10_000)


def bound_selection_target(name: str, eps: Fraction, candidates: str = "many", tables: int | str = 1) -> Target:
    listed = bounds.CANDIDATES[candidates]
    return Target(name, float(eps), 0.0,
                  f"private bound selection (choose_bound), candidates {list(listed)}, tables weighing "
                  f"{' + '.join(str(w) for w in bounds.WEIGHTS[tables])}, eps = "
                  f"{float(eps):g}: D' adds one more user like the others, with {listed[-1]} records (all scores "
                  f"move by up to Delta q = "
                  f"{float(bs.quality_sensitivity(listed, bounds.model_of(listed, tables))):g})",
                  bounds.choose_bound_sampler(eps, listed, tables))


def bound_selection_family() -> Family:
    """Every ε on the many candidates with one table (``bound_selection[eps=…]``), and the other
    candidate lists and tables (weights: bounds.WEIGHTS) at every ε
    (``bound_selection[eps=…,cands=…,tables=…]``)."""
    points = []
    for eps in BOUND_EPSILONS:
        for candidates in bounds.CANDIDATES:
            for tables in bounds.TABLES:
                extra = {} if (candidates, tables) == ("many", 1) else {"cands": candidates, "tables": tables}
                points.append(bound_selection_target(point_name("bound_selection", eps=eps, **extra), eps, candidates,
                                                     tables))
    return Family("bound_selection", tuple(points))


def mean_bound_selection_target(name: str, eps: Fraction, candidates: str = "many", noise: str = "laplace",
                                ranked: bool = False) -> Target:
    listed = mbounds.CANDIDATES[candidates]
    p = mbounds.pair(listed, noise, eps, ranked)
    kept = "keeps them whole in rank order (HPA)" if ranked else "keeps a share of each (SRA)"
    return Target(name, float(eps), 0.0,
                  f"the means' private choice of l (mean_bound_quality.choose_bound), candidates {list(listed)}, "
                  f"{noise} tables at ten times the choice's eps, eps = {float(eps):g}: D' adds a user with one "
                  f"record in each of {listed[-1]} cells where the usefulness is steepest, and the bound {kept} "
                  f"(Delta q = {float(mq.quality_sensitivity(listed, p.model)):g})",
                  mbounds.choose_bound_sampler(eps, listed, noise, ranked))


def mean_bound_selection_family() -> Family:
    """Every ε on the many candidates with Laplace tables (``mean_bound_selection[eps=…]``), the
    other candidate list and noise at every ε (``mean_bound_selection[eps=…,cands=…,noise=…]``),
    and HPA's ranked kept counts on the many candidates with both noises
    (``mean_bound_selection[eps=…,noise=…,kept=ranked]``)."""
    points = []
    for eps in BOUND_EPSILONS:
        for candidates in mbounds.CANDIDATES:
            for noise in mbounds.NOISES:
                extra = {} if (candidates, noise) == ("many", "laplace") else {"cands": candidates, "noise": noise}
                points.append(mean_bound_selection_target(point_name("mean_bound_selection", eps=eps, **extra), eps,
                                                          candidates, noise))
        for noise in mbounds.NOISES:
            points.append(mean_bound_selection_target(
                point_name("mean_bound_selection", eps=eps, noise=noise, kept="ranked"), eps, "many", noise,
                ranked=True))
    return Family("mean_bound_selection", tuple(points))


def aggregate_mean_bound_selection_target(name: str, eps: Fraction, noise: str = "laplace",
                                          records_per_group: int = 4, ranked: bool = False) -> Target:
    listed = mbounds.CANDIDATES["many"]
    p = mbounds.pair(listed, noise, eps, ranked, records_per_group)
    kept = "keeps whole groups in rank order (HPA)" if ranked else "keeps a share of each (SRA)"
    return Target(name, float(eps), 0.0,
                  f"the aggregate's private choice of groups_per_user scored by the means (mean_bound_quality."
                  f"choose_bound on bound_choice.means_model), candidates {list(listed)}, {noise} count and sum "
                  f"tables, c = {records_per_group}, eps = {float(eps):g}: D' adds a user with {records_per_group} "
                  f"records in each of {listed[-1]} groups where the usefulness is steepest, and the bound {kept} "
                  f"(Delta q = {float(mq.quality_sensitivity(listed, p.model)):g})",
                  mbounds.choose_bound_sampler(eps, listed, noise, ranked, records_per_group))


def aggregate_mean_bound_selection_family() -> Family:
    """Every ε with c = 4 and each noise (``aggregate_mean_bound_selection[eps=…]`` with Laplace,
    ``[eps=…,noise=gaussian]``), and HPA's ranked kept counts at c = 2
    (``[eps=…,c=2,kept=ranked]``)."""
    points = []
    for eps in BOUND_EPSILONS:
        for noise in mbounds.NOISES:
            extra = {} if noise == "laplace" else {"noise": noise}
            points.append(aggregate_mean_bound_selection_target(
                point_name("aggregate_mean_bound_selection", eps=eps, **extra), eps, noise))
        points.append(aggregate_mean_bound_selection_target(
            point_name("aggregate_mean_bound_selection", eps=eps, c=2, kept="ranked"), eps, "laplace", 2, ranked=True))
    return Family("aggregate_mean_bound_selection", tuple(points))


# The choice of location entropy's (M, C): one choose_bounds call per release, 1-2 ms on the
# default grid, so 10,000 releases per side keep its 16 points within a few minutes.
ENTROPY_BOUND_TRIALS = 10_000


def entropy_bound_selection_target(name: str, eps: Fraction, grid: str = "default", variant: str = "limit"
                                   ) -> Target:
    Ms, Cs = ebounds.GRIDS[grid]
    return Target(name, float(eps), 0.0,
                  f"private choice of location entropy's (M, C) (choose_bounds, {variant}), M in {list(Ms)}, C in "
                  f"{list(Cs)}, eps = {float(eps):g}: D' adds a user with C_K visits at M_K = {Ms[-1]} locations",
                  ebounds.choose_bounds_sampler(eps, grid, variant), trials=ENTROPY_BOUND_TRIALS)


def entropy_bound_selection_family() -> Family:
    """Every ε on the default grid with limit (``entropy_bound_selection[eps=…]``), and the small
    grid and limit_ss at every ε (``entropy_bound_selection[eps=…,grid=…,variant=…]``)."""
    points = []
    for eps in BOUND_EPSILONS:
        for grid in ebounds.GRIDS:
            for variant in ebounds.VARIANTS:
                extra = {} if (grid, variant) == ("default", "limit") else {"grid": grid, "variant": variant}
                points.append(entropy_bound_selection_target(point_name("entropy_bound_selection", eps=eps, **extra),
                                                             eps, grid, variant))
    return Family("entropy_bound_selection", tuple(points))


def bounding_estimate_target(name: str, eps: Fraction) -> Target:
    return Target(name, float(eps), 0.0,
                  f"the estimate of what bounding removed (records kept and removed up to the cap), l = "
                  f"{bounding.AUDIT_L}: D' adds a user with the cap's {CAP_FACTOR * bounding.AUDIT_L} records; "
                  f"eps = {float(eps):g}",
                  bounding.estimate_sampler(eps))


def clip_choice_target(name: str, eps: Fraction) -> Target:
    return Target(name, float(eps), 0.0,
                  f"private choice of the means' clipping range (choose_clip), candidates {list(clip.CANDIDATES)}: D "
                  f"holds values {list(clip.VALUES)}, D' adds {clip.ADDED}; statistic the chosen pair; "
                  f"eps = {float(eps):g}", clip.choice_sampler(eps), trials=5_000)


def group_quantiles_target(name: str, eps: Fraction) -> Target:
    return Target(name, float(eps), 0.0,
                  f"quantiles per group (the aggregate family's choose), candidates "
                  f"{list(quantiles.CANDIDATES.values)}, median: {quantiles.GROUPS} groups each holding "
                  f"{list(quantiles.D_HISTOGRAM)}; D' adds a user with {quantiles.RECORDS} records at the top in "
                  f"each; statistic the groups' choices; eps = {float(eps):g}",
                  quantiles.choice_sampler(eps), trials=100_000)


def job_target(name: str, job: str, eps: Fraction) -> Target:
    sampler, what = SPARK_JOBS[job]
    return Target(name, float(eps), 0.0, f"{what}; eps = {float(eps):g}", sampler(eps), needs_spark=True)


def entropy_target(name: str, variant: str, eps: Fraction, pair: ent.LocationPair | None = None,
                   trials: int = 200_000) -> Target:
    pair = pair or (ent.BASELINE if variant == "baseline" else ent.SMALL)
    users = [v.size for v in pair.visits]
    return Target(name, *pair.claim(eps, variant),
                  f"location entropy {variant}, one location: {users[0]} users against {users[1]} (M = "
                  f"{pair.bounds.M}, C = {pair.bounds.C}, eps = {float(eps):g}, delta = {pair.delta:g}; per-location "
                  "share)", ent.entropy_sampler(variant, eps, pair), trials=trials)


def entropy_output_target(name: str, output: str, eps: Fraction) -> Target:
    return Target(name, *ent.output_claim(eps),
                  f"location entropy's {output} output (eps = {float(eps):g} shared by entropy, visits, users), one "
                  f"location, D' adds a user with C visits (M = {ent.SMALL.bounds.M}, C = {ent.SMALL.bounds.C}; "
                  "per-location share)", ent.output_sampler(output, eps), trials=200_000)


def ledger_target(name: str, variant: str, eps: Fraction) -> Target:
    return Target(name, float(eps), ent.LEDGER_DELTA,
                  f"the ledger of location entropy {variant} (every number it publishes), eps = {float(eps):g}, "
                  f"M = C = 5: {ent.LEDGER_USERS[0][0]} users against {ent.LEDGER_USERS[1][0]} at one location",
                  ent.ledger_sampler(variant, eps), trials=4_000)


def frapp_target(name: str, scheme_name: str, gamma: Fraction, sizes=fr.SMALL_SIZES, trials: int = 100_000) -> Target:
    what = f"FRAPP {scheme_name}, gamma = {float(gamma):.4g}, on {' x '.join(map(str, sizes))} values: record " \
           "(0, 0) against (1, 1)"
    try:
        built = fr.scheme(scheme_name, gamma, sizes)
    except (ValueError, ConfigError) as exc:
        return Target(name, math.log(float(gamma)), 0.0, what, _refused, trials=trials, refused=str(exc))
    return Target(name, fr.claim(built), 0.0, what, fr.record_sampler(built), trials=trials)


def frapp_user_target(name: str, eps: Fraction) -> Target:
    built = fr.scheme("det_gd", fr.per_record_gamma(eps), fr.SMALL_SIZES)
    return Target(name, fr.USER_RECORDS * fr.claim(built), 0.0,
                  f"FRAPP det_gd with records_per_user = {fr.USER_RECORDS}, user-level eps = {float(eps):g} (gamma = "
                  f"e^(eps/{fr.USER_RECORDS}) per record), 2 x 2 values: a user's records all (0, 0) against all "
                  "(1, 1)", fr.user_sampler(built), trials=100_000)


# Partition selection: the grid's ε with δ in {1e-2, 1e-6} and l0 in {1, 4}, the user's keys new
# (0 users against 1: what δ pays for) or one below the median count against it (where the release
# probability moves fastest and one of its ε bounds holds with equality: the audit's bound comes
# close to the claim there).
# The points named by ε alone are δ = 1e-2, l0 = 1 at the median count.
PARTITION_DELTAS = (1e-2, 1e-6)
PARTITION_L0 = (1, 4)
PARTITION_TRIALS = 200_000


def partition_target(name: str, eps: Fraction, delta: float = PARTITION_DELTAS[0], l0: int = 1,
                     at_median: bool = False, shift: int = 0) -> Target:
    params = ps.SelectionParams(eps, delta, l0)
    n = ps.median_count(params) - 1 if at_median else 0  # D′ reaches the median count
    control = "NEGATIVE CONTROL: threshold lowered by one; " if shift else ""
    return Target(name, float(eps), delta,
                  f"{control}partition selection, eps = {float(eps):g}, delta = {delta:g}, l0 = {l0}: D' adds a user "
                  f"with {l0} keys of {n} users each on D; statistic: how many of them are released",
                  partition.presence_sampler(params, n, shift), negative_control=bool(shift), trials=PARTITION_TRIALS)


def partition_family() -> Family:
    points = []
    for eps in EPSILONS:
        for delta in PARTITION_DELTAS:
            for l0 in PARTITION_L0:
                for where in ("0", "median"):
                    base = (delta, l0, where) == (PARTITION_DELTAS[0], 1, "median")
                    name = point_name("partition_selection", eps=eps) if base else point_name(
                        "partition_selection", eps=eps, delta=delta, l0=l0, n=where)
                    points.append(partition_target(name, eps, delta, l0, where == "median"))
    return Family("partition_selection", tuple(points))


def _refused(*_args):
    raise RuntimeError("a refused grid point has no release to sample")


# ---------------------------------------------------------------------------
# Negative controls: each must be flagged.


def _half_noise(side, trials, seed, _spark):
    """NEGATIVE CONTROL: claims ε but adds discrete Laplace of scale Δ/(2ε)."""
    entry = LedgerEntry("negative control", "discrete Laplace at half the scale", DEFAULT_EPSILON, Fraction(1),
                        Fraction(1, 2) / DEFAULT_EPSILON, trials, not_private="half the noise its epsilon needs")
    return side + Budget(DEFAULT_EPSILON).discrete_laplace(entry, RandomSource(seed))


def negative_controls() -> list[Target]:
    small, boundary = ent.SMALL, ent.BOUNDARY
    paper_beta = float(ENTROPY_EPSILON) / (2 * math.log(2 / small.delta))
    n_c = math.prod(fr.SMALL_SIZES)
    old_limit = (old_code.old_ran_gd_epsilon(GAMMAS[0], n_c), math.log(float(GAMMAS[0])))
    return [
        Target("negative_control_half_noise", 1.0, 0.0, "NEGATIVE CONTROL: discrete Laplace with half the noise",
               _half_noise, negative_control=True, trials=200_000),
        Target("discrete_gaussian_sigma_too_small", float(DEFAULT_EPSILON), prim.AUDIT_DELTA,
               "NEGATIVE CONTROL: discrete Gaussian with a third of the sigma its rho needs (eps = 1, delta = 1e-6)",
               prim.discrete_gaussian_sampler(DEFAULT_EPSILON, shrink=3), negative_control=True, trials=200_000),
        Target("dpa_ahp_as_published", prim.first_pass_claim(DEFAULT_EPSILON, True), 0.0,
               "NEGATIVE CONTROL: the thesis' SDPA/DPA-AHP first pass (ranks from true counts), claimed eps1, "
               "bins [2, 2] against [2, 1], bin 0", prim.first_pass_sampler(DEFAULT_EPSILON, True),
               negative_control=True, trials=10_000),
        Target("limit_ss_paper_beta", *small.claim(ENTROPY_EPSILON),
               "NEGATIVE CONTROL: Limit-SS with the paper's beta = eps/(2 ln(2/delta)), 3 users against 4 (M = 20, "
               "C = 5, eps = 5)",
               old_code.old_smooth_entropy_sampler(small.visits, small.bounds.C, small.bounds.M, ENTROPY_EPSILON,
                                                   small.delta, ent.XI, beta=paper_beta),
               negative_control=True, trials=200_000),
        Target("old_limit_ss_rounded_scale", *boundary.claim(Fraction(1, 10)),
               "NEGATIVE CONTROL: the old Limit-SS scale rounded up to grid units, eps = 0.1, 13,542 users against "
               "13,543 (M = C = 5, delta = 1e-8): its units jump 68 -> 67; statistic |release - H(D)|",
               old_code.old_smooth_entropy_sampler(boundary.visits, boundary.bounds.C, boundary.bounds.M,
                                                   Fraction(1, 10), boundary.delta, ent.XI, fold=True),
               negative_control=True, trials=BOUNDARY_TRIALS),
        Target("old_ran_gd_clipping", fr.claim(fr.scheme("det_gd", GAMMAS[0], fr.SMALL_SIZES)), 0.0,
               f"NEGATIVE CONTROL: the old RAN-GD sampler (keep probability clipped at 0) at gamma = 1.1 on 2 x 2 "
               f"values: true eps {old_limit[0]:.3f} against ln gamma = {old_limit[1]:.3f}",
               old_code.old_ran_gd_sampler(list(fr.SMALL_SIZES), GAMMAS[0], fr.RECORDS),
               negative_control=True, trials=100_000),
        Target("old_entropy_ledger_scale", float(ENTROPY_EPSILON), ent.LEDGER_DELTA,
               "NEGATIVE CONTROL: the old Limit-SS ledger's noise_scale (min of the per-location scales), eps = 5, "
               "M = C = 5: 30 users against 31 at one location",
               old_code.old_ledger_sampler(ent.LEDGER_USERS, ent.LEDGER_BOUNDS.C, ent.LEDGER_BOUNDS.M,
                                           ENTROPY_EPSILON, ent.LEDGER_DELTA, ent.XI),
               negative_control=True, trials=20_000),
        partition_target("partition_selection_threshold_lowered", DEFAULT_EPSILON, shift=1),
        Target("bound_selection_cap_forgotten", float(DEFAULT_EPSILON), 0.0,
               f"NEGATIVE CONTROL: choose_bound at the Delta q of one record per cell while the quality counts "
               f"20 (sqrt(20) too small), candidates {list(bounds.CANDIDATES['many'])}, eps = 1",
               bounds.cap_forgotten_sampler(DEFAULT_EPSILON), negative_control=True, trials=20_000),
        Target("bound_selection_cells_understated", float(DEFAULT_EPSILON), 0.0,
               f"NEGATIVE CONTROL: choose_bound at the Delta q of a one-cell domain while the users fill ten "
               f"(sqrt(10) too small), candidates {list(bounds.CANDIDATES['many'])}, c = 1, eps = 1",
               bounds.cells_understated_sampler(DEFAULT_EPSILON), negative_control=True, trials=20_000),
        Target("mean_bound_selection_smallest_reach", float(DEFAULT_EPSILON), 0.0,
               f"NEGATIVE CONTROL: the means' choice of l at the Delta q of the smallest candidate's reach alone, "
               f"Gaussian tables, candidates {list(mbounds.CANDIDATES['many'])}, eps = 1: true eps 13.0",
               mbounds.smallest_reach_sampler(DEFAULT_EPSILON), negative_control=True, trials=20_000),
        Target("aggregate_mean_bound_selection_records_per_bound_forgotten", float(DEFAULT_EPSILON), 0.0,
               f"NEGATIVE CONTROL: the aggregate's choice of groups_per_user by the means at the Delta q of one "
               f"record per unit of l while each group keeps c = {mbounds.CONTROL_RECORDS_PER_GROUP}, Gaussian "
               f"tables, candidates {list(mbounds.CANDIDATES['many'])}, eps = 1: true eps 2.7",
               mbounds.records_per_bound_forgotten_sampler(DEFAULT_EPSILON), negative_control=True, trials=20_000),
        Target("clip_choice_every_record", float(DEFAULT_EPSILON), 0.0,
               f"NEGATIVE CONTROL: choose_clip on the ranks of every record, the added user's {clip.HEAVY_RECORDS} "
               "records all counted where the choice assumes one value per user, eps = 1",
               clip.choice_sampler(DEFAULT_EPSILON, every_record=True), negative_control=True, trials=5_000),
        Target("group_quantiles_one_record", float(DEFAULT_EPSILON), 0.0,
               f"NEGATIVE CONTROL: the quantiles per group paid at the sensitivity of one record in one group, while "
               f"D' adds {quantiles.RECORDS} records in each of {quantiles.GROUPS} groups, eps = 1",
               quantiles.choice_sampler(DEFAULT_EPSILON, one_record=True), negative_control=True, trials=100_000),
        Target("bounding_estimate_uncapped", float(DEFAULT_EPSILON), 0.0,
               f"NEGATIVE CONTROL: the records removed counted without the cap, noised at the capped sensitivity; "
               f"D' adds a user with {bounding.HEAVY_FACTOR} times the cap's records, l = {bounding.AUDIT_L}, eps = 1",
               bounding.uncapped_sampler(DEFAULT_EPSILON), negative_control=True, trials=20_000),
        Target("entropy_bound_selection_per_location", float(DEFAULT_EPSILON), 0.0,
               "NEGATIVE CONTROL: choose_bounds' quality sampled at Delta q = 2 u(C_K), one location's move (the "
               "factor M_K = 10 forgotten), default grid, limit, eps = 1: true eps 1.99",
               ebounds.per_location_sampler(DEFAULT_EPSILON), negative_control=True, trials=20_000),
    ]


# ---------------------------------------------------------------------------
# The grids.


def _eps_family(family: str, make) -> Family:
    """``make(name, eps)`` at every ε of the grid."""
    return Family(family, tuple(make(point_name(family, eps=eps), eps) for eps in EPSILONS))


def _families() -> dict[str, Family]:
    out = [
        _eps_family("discrete_laplace", discrete_laplace_target),
        _eps_family("discrete_gaussian", discrete_gaussian_target),
        _eps_family("exponential_mechanism", exponential_target),
        bound_selection_family(),
        mean_bound_selection_family(),
        aggregate_mean_bound_selection_family(),
        _eps_family("bounding_estimate", bounding_estimate_target),
        _eps_family("clip_choice", clip_choice_target),
        _eps_family("group_quantiles", group_quantiles_target),
        entropy_bound_selection_family(),
        *[publisher_family(p) for p in PUBLISHERS],
        _eps_family("dpa_ahp_first_pass", first_pass_target),
        *[_eps_family(job, lambda name, eps, job=job: job_target(name, job, eps)) for job in SPARK_JOBS],
        *[_eps_family(f"entropy_{v}", lambda name, eps, v=v: entropy_target(name, v, eps)) for v in ENTROPY_VARIANTS],
        *[_eps_family(f"entropy_{o}", lambda name, eps, o=o: entropy_output_target(name, o, eps))
          for o in ("visits", "users")],
        *[_eps_family(f"entropy_{v}_ledger", lambda name, eps, v=v: ledger_target(name, v, eps))
          for v in ("limit_ss", "limit_cb_dp")],
        *[Family(f"frapp_{s}", tuple(frapp_target(point_name(f"frapp_{s}", gamma=g), s, g) for g in GAMMAS))
          for s in ("det_gd", "mask", "cut_paste")],
        Family("frapp_ran_gd", tuple(frapp_target(point_name("frapp_ran_gd", gamma=g), "ran_gd", g) for g in GAMMAS)),
        _eps_family("frapp_records_per_user", frapp_user_target),
        partition_family(),
        *[Family(c.name, (c,)) for c in negative_controls()],
    ]
    families = {f.name: f for f in out}
    # Limit-SS's boundary point: many users near the xi floor, where a rounded scale breaks smoothness.
    limit_ss = families["entropy_limit_ss"]
    boundary = entropy_target(point_name("entropy_limit_ss", eps=0.1, n=ent.BOUNDARY.visits[0].size), "limit_ss",
                              Fraction(1, 10), ent.BOUNDARY, trials=BOUNDARY_TRIALS)
    families["entropy_limit_ss"] = Family(limit_ss.name, (*limit_ss.points, boundary))
    return families


FAMILIES = _families()

# One point per family (``dp-spark audit NAME``): ε = 1 (5 for entropy, whose per-location share is
# ε/M), γ just under e, the publishers' mixed bins; the negative controls as they are.


def _default(family: Family) -> Target:
    if len(family.points) == 1:
        return family.points[0]
    # Entropy at ε = 5 (its per-location share is ε/M); the ledgers, whose statistic is
    # deterministic, at ε = 1, which a few hundred releases can already tell apart.
    per_location = family.name.startswith("entropy_") and not family.name.endswith("_ledger")
    eps = ENTROPY_EPSILON if per_location else DEFAULT_EPSILON
    wanted = (point_name(family.name, eps=eps), point_name(family.name, eps=eps, bins="mixed"),
              point_name(family.name, gamma=DEFAULT_GAMMA))
    point = next(t for t in family.points if t.name in wanted)
    trials = 20_000 if family.name in PUBLISHERS else point.trials  # one point: the publishers' full count
    return Target(family.name, point.claim_epsilon, point.claim_delta, point.what, point.sample,
                  point.negative_control, point.needs_spark, trials, point.refused)


TARGETS = {name: _default(family) for name, family in FAMILIES.items()}
GRID_POINTS = {t.name: t for family in FAMILIES.values() for t in family.points}
