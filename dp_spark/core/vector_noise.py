"""Exact discrete Laplace (or discrete Gaussian) noise keyed by cell index, for drawing on the
executors.

The driver draws noise from one stream (:class:`~dp_spark.core.mechanisms.RandomSource`). On the
executors each task must draw its own cells' noise, and a retried task must draw the *same*
noise: otherwise a cell written by a failed attempt and again by its retry could be seen with two
independent noises, which doubles what that cell leaks. So here the random bits are a function of
a secret and the cell index only, never of which task or attempt asks:

- a :class:`NoiseSecret` of 32 bytes is drawn once per release on the driver from the OS CSPRNG
  (or derived from a fixed ``seed`` for reproducible runs, with no guarantee);
- the cell indices are cut into aligned blocks of :data:`BLOCK_CELLS`; block ``j`` of a noised
  column gets its own key, keyed BLAKE2b(secret; label, scale, j);
- the block key feeds a counter-mode stream, SHAKE-256(block key ‖ counter), read as 64-bit
  words, and the driver's exact sampler (CKS 2020, Algorithms 1 and 2 for the discrete Laplace,
  3 for the discrete Gaussian, whose keys have their own personalisation; integer comparisons
  only) draws the block's :data:`BLOCK_CELLS` values from it.

A range of cells gets the slice of its blocks' values, so the noise of a cell is the same
whichever partition, batch or attempt covers it. Claim: docs/mechanisms.md, "Privacy claim:
range_noise, CellNoise"; the design and its measurements: docs/executor_noise.md.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dp_spark.core.discrete_gaussian import as_variance, discrete_gaussian
from dp_spark.core.mechanisms import RandomSource, _discrete_laplace, as_scale

# Cells per keyed block: a range pays for at most two partial blocks at its ends, and each block is
# one vectorised run of the sampler, long enough that numpy's per-call cost is small. Measured on
# one core (µs per cell, scales 20 and 1/2): 1.83 at 4,096 cells, 1.14–1.36 at 16,384, 0.84–0.89
# at 65,536, 0.68–0.75 at 262,144 (a block's values are built in memory at once: 0.5 MB each).
BLOCK_CELLS = 65536
SECRET_BYTES = 32
_STREAM_CHUNK_BYTES = 1 << 16
# BLAKE2b personalisations (16 bytes): they separate these keys from any other use, and the discrete
# Gaussian's keys from the discrete Laplace's (a Laplace column keeps the keys it had before there was a
# Gaussian, so seeded releases are unchanged).
_PERSON = b"dp-spark-noise-1"
_GAUSSIAN_PERSON = b"dp-spark-gauss-1"
LAPLACE = "laplace"
GAUSSIAN = "gaussian"
_PERSONS = {LAPLACE: _PERSON, GAUSSIAN: _GAUSSIAN_PERSON}
_MAX_CELL = (1 << 63) - 1


@dataclass(frozen=True)
class NoiseSecret:
    """The per-release secret every executor's noise is derived from.

    Its bytes are kept out of ``repr`` so the secret does not land in logs, plans or error
    messages; whoever holds them can regenerate every noise value of the release.
    """

    key: bytes = field(repr=False)
    seeded: bool = False

    def __post_init__(self):
        if not isinstance(self.key, bytes) or len(self.key) != SECRET_BYTES:
            raise ValueError(f"a noise secret must be {SECRET_BYTES} bytes")

    @classmethod
    def fresh(cls) -> NoiseSecret:
        """A new secret from the OS CSPRNG: the only choice for a real release."""
        return cls(os.urandom(SECRET_BYTES), seeded=False)

    @classmethod
    def from_seed(cls, seed: int) -> NoiseSecret:
        """A secret derived from a fixed integer seed: reproducible, and private to nobody."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        material = seed.to_bytes(max(1, -(-seed.bit_length() // 8)), "little")
        return cls(hashlib.blake2b(material, digest_size=SECRET_BYTES, person=b"dp-spark-seed-1").digest(),
                   seeded=True)


class KeyedStream(RandomSource):
    """Uniform 64-bit words from SHAKE-256(key ‖ counter), counter = 0, 1, 2, ...

    A deterministic function of ``key``: two streams with the same key give the same words,
    which is what makes a retried task draw the same noise. Built where it is used, from the
    secret and a block index; never pickled, since a copy that went on to serve other cells
    would repeat its words there.
    """

    def __init__(self, key: bytes):
        self.seeded = True  # deterministic given the key; the secret, not this object, is private
        self._bits = None
        self._key = bytes(key)
        self._counter = 0
        self._pool = np.empty(0, dtype=np.uint64)

    def __getstate__(self):
        raise TypeError("a KeyedStream is not shipped: build it from the NoiseSecret and the block index")

    def words(self, n: int) -> np.ndarray:
        if n > self._pool.size:
            chunks = [self._pool]
            have = self._pool.size
            while have < n:
                block = hashlib.shake_256(self._key + self._counter.to_bytes(8, "little"))
                fresh = np.frombuffer(block.digest(_STREAM_CHUNK_BYTES), dtype="<u8").astype(np.uint64)
                self._counter += 1
                chunks.append(fresh)
                have += fresh.size
            self._pool = np.concatenate(chunks)
        taken, self._pool = self._pool[:n], self._pool[n:]
        return taken


def block_key(secret: NoiseSecret, label: str, scale: Fraction, block: int, mechanism: str = LAPLACE) -> bytes:
    """The key of one block of one noised column: keyed BLAKE2b, personalised by the mechanism,
    over an unambiguous encoding of (label, scale, block index); ``scale`` is the discrete
    Laplace's scale or the discrete Gaussian's σ². Two columns of a release need different
    labels, or they would get the same noise."""
    if mechanism not in _PERSONS:
        raise ValueError(f"unknown noise mechanism {mechanism!r}; expected one of {', '.join(_PERSONS)}")
    if not isinstance(label, str) or not label:
        raise ValueError("a noised column needs a non-empty label")
    name = label.encode("utf-8")
    message = b"".join([
        len(name).to_bytes(4, "little"), name,
        scale.numerator.to_bytes(8, "little"), scale.denominator.to_bytes(8, "little"),
        block.to_bytes(8, "little"),
    ])
    return hashlib.blake2b(message, key=secret.key, digest_size=32, person=_PERSONS[mechanism]).digest()


def _checked(scale: Fraction | int, mechanism: str) -> Fraction:
    return as_variance(scale) if mechanism == GAUSSIAN else as_scale(scale)


def block_noise(secret: NoiseSecret, label: str, scale: Fraction | int, block: int,
                mechanism: str = LAPLACE) -> np.ndarray:
    """The :data:`BLOCK_CELLS` exact noise values of cells ``block·BLOCK_CELLS`` …
    ``(block+1)·BLOCK_CELLS − 1``: discrete Laplace, P(Z = z) ∝ exp(−|z|/scale), or with
    ``mechanism`` = "gaussian" the discrete Gaussian of variance parameter σ² = ``scale``."""
    scale = _checked(scale, mechanism)
    rng = KeyedStream(block_key(secret, label, scale, block, mechanism))
    if mechanism == GAUSSIAN:
        return discrete_gaussian(rng, scale, BLOCK_CELLS)
    return _discrete_laplace(rng, np.full(BLOCK_CELLS, scale.numerator, dtype=np.uint64),
                             np.full(BLOCK_CELLS, scale.denominator, dtype=np.uint64))


def range_noise(secret: NoiseSecret, label: str, scale: Fraction | int, first: int, last: int,
                mechanism: str = LAPLACE) -> np.ndarray:
    """One exact noise value (:func:`block_noise`'s) per cell index in ``first`` … ``last`` (both
    included).

    A function of (secret, mechanism, label, scale, cell index) only: any range covering a cell
    gives it the same value, so a retried or re-partitioned task releases the same noise.
    """
    for name, value in (("first", first), ("last", last)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= _MAX_CELL:
            raise ValueError(f"{name} must be a cell index in [0, 2^63), got {value!r}")
    first, last = int(first), int(last)
    if first > last:
        raise ValueError(f"first cell {first} is after last cell {last}")
    scale = _checked(scale, mechanism)
    first_block, last_block = first // BLOCK_CELLS, last // BLOCK_CELLS
    values = np.concatenate([block_noise(secret, label, scale, b, mechanism)
                             for b in range(first_block, last_block + 1)])
    offset = first - first_block * BLOCK_CELLS
    return values[offset: offset + (last - first + 1)]


@dataclass(frozen=True)
class CellNoise:
    """The noise of one noised column, handed out by the budget once its ledger entry is spent
    (:meth:`dp_spark.core.ledger.Budget.discrete_laplace_on_executors`, ``..._gaussian_...``) and
    shipped to the executors, where ``noise(first, last)`` is :func:`range_noise` of those cells.
    It carries the secret, which its ``repr`` leaves out. ``scale``: the Laplace scale, or the
    Gaussian's σ²."""

    secret: NoiseSecret
    label: str
    scale: Fraction
    mechanism: str = LAPLACE

    def __call__(self, first: int, last: int) -> np.ndarray:
        return range_noise(self.secret, self.label, self.scale, first, last, self.mechanism)
