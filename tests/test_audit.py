"""Privacy audits: the Clopper–Pearson bounds, the lower bound on synthetic mechanisms of known
ε, every audit target within its claim, and every negative control caught."""

import json

import numpy as np
import pytest

from dp_spark import audit
from dp_spark.audit_targets import TARGETS
from dp_spark.cli import main

NEGATIVE_CONTROLS = ("negative_control_half_noise", "dpa_ahp_as_published", "limit_ss_paper_beta")
SLOW = {"alpa", "fourier", "grouping", "ahp", "dpa_ahp", "dpa_ahp_first_pass", "sra", "hpa", "dpsense"}


def test_clopper_pearson_matches_tables():
    # Two-sided 95% interval for 5 of 100 (each side 2.5%): [0.0164, 0.1128].
    assert audit.cp_lower(5, 100, 0.025) == pytest.approx(0.01643, abs=1e-4)
    assert audit.cp_upper(5, 100, 0.025) == pytest.approx(0.11283, abs=1e-4)
    assert audit.cp_lower(0, 50, 0.025) == 0.0
    assert audit.cp_upper(0, 50, 0.025) == pytest.approx(1 - 0.025 ** (1 / 50), rel=1e-6)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_lower_bound_is_below_and_near_the_true_epsilon(epsilon):
    """Continuous Laplace of scale 1/ε shifted by 1 is exactly ε-DP: the bound stays below ε
    and, with 200,000 releases, comes within 15% of it."""
    rng = np.random.default_rng(int(epsilon * 10))
    d = rng.laplace(0.0, 1 / epsilon, 200_000)
    d2 = rng.laplace(1.0, 1 / epsilon, 200_000)
    bound, _event = audit.audit_samples(d, d2)
    assert 0.85 * epsilon < bound <= epsilon


def test_identical_mechanisms_give_a_bound_near_zero():
    rng = np.random.default_rng(3)
    bound, _ = audit.audit_samples(rng.normal(size=50_000), rng.normal(size=50_000))
    assert bound < 0.1


def test_delta_lowers_the_bound():
    rng = np.random.default_rng(4)
    d, d2 = rng.laplace(0, 1, 100_000), rng.laplace(1, 1, 100_000)
    assert audit.audit_samples(d, d2, delta=0.05)[0] < audit.audit_samples(d, d2)[0]


@pytest.mark.parametrize("name", [n for n, t in TARGETS.items() if not t.negative_control])
def test_every_mechanism_is_within_its_claim(name, spark):
    target = TARGETS[name]
    trials = 600 if name in SLOW else None  # the slow ones: fewer releases, a weaker but valid test
    result = audit.run(target, trials, seed=11, spark=spark if target.needs_spark else None)
    assert not result.flagged, (result.lower_bound, result.claim_epsilon, result.event)


@pytest.mark.parametrize("name, trials", [("negative_control_half_noise", None), ("dpa_ahp_as_published", 2000),
                                          ("limit_ss_paper_beta", None)])
def test_negative_controls_are_caught(name, trials):
    result = audit.run(TARGETS[name], trials, seed=5)
    assert result.negative_control
    assert result.flagged, (result.lower_bound, result.claim_epsilon, result.event)


def test_every_negative_control_is_registered():
    assert {n for n, t in TARGETS.items() if t.negative_control} == set(NEGATIVE_CONTROLS)


def test_cli_exit_codes(tmp_path, capsys):
    assert main(["audit", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in TARGETS)
    out = tmp_path / "audit.json"
    assert main(["audit", "negative_control_half_noise", "--trials", "50000", "--json", str(out)]) == 4
    assert json.loads(out.read_text())[0]["flagged"] is True
    assert main(["audit", "discrete_laplace", "--trials", "50000"]) == 0
    assert "consistent with the claim" in capsys.readouterr().out
    assert main(["audit", "no_such_mechanism"]) == 2
    assert main(["audit", "discrete_laplace", "--trials", "5"]) == 2
