"""The expected item-count error of SRA at a per-user bound, computed from the raw records (NOT
PRIVATE): truncation bias, the variance of SRA's sampling, and the publisher's noise.

SRA keeps a uniform sample of min(n, b) of a user's n records (without replacement), so a user
with k records of item i keeps a hypergeometric number of them: mean k·p, p = min(1, b/n), and
variance b·(k/n)·(1 − k/n)·(n − b)/(n − 1) when n > b (zero otherwise). Users sample
independently, so over the users of item i

    E[count_i]   = Σ_u k_ui·min(1, b/n_u)       bias_i = true_i − E[count_i]
    Var[count_i] = Σ_u (the hypergeometric variance above)

and the expected MSE over the domain's ``cells`` items, with noise of variance σ² added to each,
is mean_i (bias_i² + Var[count_i]) + σ². Items without records add zero to the sum and count in
the mean, as ``evaluate``'s MSE counts them.

HPA keeps each user's records of highest popularity instead, ties at random: given the items'
scores, the g records of a user tied with item i, t of them ranked at or above it (its group
included), keep min(g, (b − (t − g))⁺) of their number, uniformly among the g, so the row's k
records are kept hypergeometrically among g with that many kept (``hpa_sampling_errors``).

Pure pandas and numpy over a DataFrame of (user_id, item_id) pairs, one row per record, all in
the domain. ``tune`` uses it; ``evaluate`` and the benchmarks may call it for the oracle curve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dp_spark.release.bound_selection import ranked_cells

NOT_PRIVATE = ("NOT PRIVATE: computed from the raw records without noise; for choosing parameters, never for "
               "publication")


@dataclass(frozen=True)
class SamplingError:
    """SRA's error from bounding at ``bound``, over ``cells`` items (means over the items)."""

    bound: int
    bias_squared: float  # mean_i bias_i²
    sampling_variance: float  # mean_i Var[count_i]
    expected_dropped: float  # Σ_i bias_i: records the bound drops, in expectation

    def expected_mse(self, noise_variance: float) -> float:
        return self.bias_squared + self.sampling_variance + noise_variance


def user_item_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per (user, item) with k (the user's records of the item) and n (all their records)."""
    missing = {"user_id", "item_id"} - set(pairs.columns)
    if missing:
        raise ValueError(f"the pairs need the columns user_id and item_id; missing {sorted(missing)}")
    table = pairs.groupby(["user_id", "item_id"], sort=False).size().rename("k").reset_index()
    table["n"] = table.groupby("user_id")["k"].transform("sum")
    return table


def _check_bound(bound) -> float:
    if isinstance(bound, bool) or int(bound) != bound or bound < 1:
        raise ValueError(f"bounds must be integers >= 1, got {bound!r}")
    return float(bound)


def kept_moments(k: np.ndarray, n: np.ndarray, bound: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the mean and variance of how many of the row's k records are kept when ``bound``
    (a number, or one per row) of the n records they are among are kept uniformly at random,
    hypergeometric: SRA's sample of a user's n records, or HPA's ties at the boundary."""
    bound = np.broadcast_to(np.asarray(bound, dtype=float), k.shape)
    cut = (n > bound) & (bound > 0)  # keeping all or none of them leaves no variance
    variance = np.zeros_like(k)
    share = k[cut] / n[cut]
    variance[cut] = bound[cut] * share * (1 - share) * (n[cut] - bound[cut]) / (n[cut] - 1)
    return k * np.minimum(1.0, bound / n), variance


def sra_item_moments(pairs: pd.DataFrame, bound: int) -> pd.DataFrame:
    """Per item with records: ``true`` (its records), ``expected`` (E[count] after SRA's bounding
    at ``bound``) and ``variance`` (Var[count]), exactly (see the module)."""
    b = _check_bound(bound)
    table = user_item_table(pairs)
    mean, variance = kept_moments(table["k"].to_numpy(dtype=float), table["n"].to_numpy(dtype=float), b)
    table = table.assign(expected=mean, variance=variance)
    return table.groupby("item_id").agg(true=("k", "sum"), expected=("expected", "sum"), variance=("variance", "sum"))


def sra_sampling_errors(pairs: pd.DataFrame, bounds: Sequence[int], cells: int) -> list[SamplingError]:
    """The bias and sampling variance of SRA's item counts at each bound, exactly (see the module),
    as means over ``cells`` items."""
    if cells < 1:
        raise ValueError(f"cells must be >= 1, got {cells}")
    table = user_item_table(pairs)
    if table["item_id"].nunique() > cells:
        raise ValueError(f"the pairs name {table['item_id'].nunique()} items, more than the {cells} cells")
    k = table["k"].to_numpy(dtype=float)
    n = table["n"].to_numpy(dtype=float)
    item = pd.factorize(table["item_id"])[0]
    true = np.bincount(item, weights=k)
    out = []
    for bound in bounds:
        mean, variance = kept_moments(k, n, _check_bound(bound))
        bias = true - np.bincount(item, weights=mean, minlength=true.size)
        out.append(SamplingError(int(bound), float(np.sum(bias**2)) / cells, float(variance.sum()) / cells,
                                 float(bias.sum())))
    return out


def ranked_sampling_errors(rows: pd.DataFrame, item_col: str, bounds: Sequence[int],
                           cells: int) -> list[SamplingError]:
    """HPA's bias and tie variance at each bound, as means over ``cells`` items, from ``rows``: one
    per (user, item) with k, t and g (bound_selection.ranked_cells) and the item in ``item_col``."""
    if cells < 1:
        raise ValueError(f"cells must be >= 1, got {cells}")
    k, t, g = (rows[c].to_numpy(dtype=float) for c in ("k", "t", "g"))
    item = pd.factorize(rows[item_col])[0]
    if item.max(initial=-1) >= cells:
        raise ValueError(f"the rows name {item.max() + 1} items, more than the {cells} cells")
    out = []
    for bound in bounds:
        # The user keeps b − (t − g) of the g records tied with the item, at random (0 to g of them).
        kept, variance = kept_moments(k, g, np.clip(_check_bound(bound) - (t - g), 0, g))
        bias = np.bincount(item, weights=k - kept)
        out.append(SamplingError(int(bound), float(np.dot(bias, bias)) / cells, float(variance.sum()) / cells,
                                 float(bias.sum())))
    return out


def hpa_sampling_errors(pairs: pd.DataFrame, bounds: Sequence[int], cells: int,
                        scores: Mapping) -> list[SamplingError]:
    """The bias and tie variance of HPA's item counts at each bound, exactly, when each user keeps
    its records of highest ``scores`` (item -> public score) first, ties at random (see the module)."""
    return ranked_sampling_errors(ranked_cells(user_item_table(pairs), "item_id", scores), "item_id", bounds, cells)


def sra_expected_mse(pairs: pd.DataFrame, bound: int, cells: int, noise_variance: float) -> float:
    """SRA's expected item-count MSE at ``bound`` over ``cells`` items, with noise of variance
    ``noise_variance`` per item (the publisher's at sensitivity ``bound``)."""
    return sra_sampling_errors(pairs, [bound], cells)[0].expected_mse(noise_variance)
