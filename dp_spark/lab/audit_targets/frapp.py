"""Audit samplers for FRAPP (specification §6): local DP per record, replacement neighbours.

The scheme is built by ``Scheme.of`` exactly as the job's config builds it, and records are
perturbed by the functions the job's ``frapp_mining.perturb`` calls. Parameters the code refuses
(``Scheme.of`` raising) give a refused grid point: nothing is released, nothing to audit.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dp_spark.core.mechanisms import RandomSource
from dp_spark.families.frapp import perturbation as frapp
from dp_spark.families.frapp.mining import Scheme

SMALL_SIZES = (2, 2)
RECORDS = (np.array([0, 0]), np.array([1, 1]))  # D's record against D′'s (they differ in every attribute)
CP_K = 1  # Cut-and-Paste's K: K = 3 needs γ ≥ 4 on two attributes


def scheme(name: str, gamma: Fraction, sizes) -> Scheme:
    return Scheme.of(name, gamma, list(sizes), cp_k=CP_K)


def claim(built: Scheme) -> float:
    """ln of the scheme's worst ratio, rounded up as the ledger does (≤ ln γ)."""
    return float(frapp.epsilon_of(built.ratio))


def perturb(built: Scheme, codes: np.ndarray, rng: RandomSource) -> np.ndarray:
    """What ``frapp_mining.perturb`` does to one block of coded records."""
    sizes = list(built.sizes)
    if built.name == "mask":
        return frapp.perturb_mask(codes, sizes, built.p, rng)
    if built.name == "cut_paste":
        return frapp.perturb_cut_paste(codes, sizes, built.cp_k, built.rho, rng)
    return frapp.perturb_gd(codes, sizes, built.gamma, rng, randomized=built.name == "ran_gd")


def record_sampler(built: Scheme):
    """One perturbed record per trial, on 2 × 2 values: the statistic is the whole output (for MASK
    and C&P, per attribute the bit set: a·64 + b)."""
    def sample(side, trials, seed, _spark):
        out = perturb(built, np.tile(RECORDS[side], (trials, 1)), RandomSource(seed))
        return (out[:, 0] * 64 + out[:, 1]).astype(float)
    return sample


USER_RECORDS = 2  # records_per_user in the user-level target


def user_sampler(built: Scheme, records_per_user: int = USER_RECORDS):
    """A user with ``records_per_user`` records: all (0, 0) on D, all (1, 1) on D′ (replacement,
    so the record count N stays public and equal, §1.1). The statistic is the tuple of the user's
    perturbed records as one code (2 × 2 values: 4 codes per record)."""
    def sample(side, trials, seed, _spark):
        rng = RandomSource(seed)
        codes = np.tile(RECORDS[side], (trials * records_per_user, 1))
        out = perturb(built, codes, rng)
        per_record = (out[:, 0] * 2 + out[:, 1]).reshape(trials, records_per_user)
        return (per_record * (4 ** np.arange(records_per_user))).sum(axis=1).astype(float)
    return sample


def per_record_gamma(epsilon: Fraction, records_per_user: int = USER_RECORDS) -> Fraction:
    """γ = e^(ε/L), as the job's config turns a per-record ε into γ (specification §1.1 rule 4)."""
    return frapp.gamma_below(epsilon / records_per_user)
