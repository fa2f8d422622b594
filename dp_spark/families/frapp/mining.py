"""FRAPP on Spark: records coded over public domains, perturbed on the executors, mined level by
level with one pass per itemset length (specification §6.6). The math is in
:mod:`dp_spark.families.frapp.perturbation`.

A coded table has one long column ``_a{j}`` per attribute: the value index for raw and
det_gd/ran_gd records, the bit set of present values for mask and cut_paste records.

Claim: docs/frapp.md, "Privacy claim: frapp".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dp_spark.core.mechanisms import RandomSource
from dp_spark.errors import DataError
from dp_spark.families.frapp import perturbation as frapp
from dp_spark.io.validation import refuse_strictly


@dataclass(frozen=True)
class AttributeSpec:
    """How a source column becomes a public domain: numeric ``edges`` (a bucket below the first
    edge, one between each pair, one from the last edge up; ``right_closed`` puts each edge in
    the bucket below it) or categorical ``values`` (anything else goes to ``other`` if set)."""

    column: str
    edges: tuple[float, ...] | None = None
    right_closed: bool = False
    values: tuple[str, ...] | None = None
    other: str | None = None

    def attribute(self) -> frapp.Attribute:
        if self.edges is not None:
            e = [f"{v:g}" for v in self.edges]
            if self.right_closed:
                labels = [f"<={e[0]}"] + [f"({a},{b}]" for a, b in zip(e, e[1:])] + [f">{e[-1]}"]
            else:
                labels = [f"<{e[0]}"] + [f"[{a},{b})" for a, b in zip(e, e[1:])] + [f">={e[-1]}"]
            return frapp.Attribute(self.column, tuple(labels))
        return frapp.Attribute(self.column, tuple(self.values) + ((self.other,) if self.other else ()))


@dataclass(frozen=True)
class Scheme:
    """A perturbation scheme with its parameters fixed: γ (det_gd, ran_gd), p (mask), K and ρ
    (cut_paste), and the worst output-probability ratio it guarantees."""

    name: str
    gamma: Fraction
    sizes: tuple[int, ...]
    p: Fraction | None = None
    cp_k: int = frapp.PAPER_CP_K
    rho: Fraction | None = None

    @classmethod
    def of(cls, name: str, gamma: Fraction, sizes, cp_k: int = frapp.PAPER_CP_K, rho: Fraction | None = None):
        sizes = tuple(sizes)
        if name == "mask":
            return cls(name, gamma, sizes, p=frapp.mask_p(gamma, len(sizes)))
        if name == "cut_paste":
            rho = rho if rho is not None else frapp.cp_rho(gamma, cp_k, len(sizes))
            return cls(name, gamma, sizes, cp_k=cp_k, rho=rho)
        return cls(name, gamma, sizes)

    @property
    def ratio(self) -> float:
        """max over outputs v and records u1, u2 of P(v | u1)/P(v | u2): e^ε of the local guarantee."""
        if self.name == "mask":
            return float(frapp.mask_ratio(self.p, len(self.sizes)))
        if self.name == "cut_paste":
            return frapp.cp_ratio(float(self.rho), self.cp_k, len(self.sizes))
        if self.name == "ran_gd":  # computed from the keep probabilities the sampler draws from
            n_c = frapp.record_space(list(self.sizes))
            return float(frapp.gd_worst_ratio(frapp.ran_gd_keep_probabilities(self.gamma, n_c), n_c))
        return float(self.gamma)

    def parameters(self) -> dict:
        out = {"scheme": self.name, "gamma": float(self.gamma), "record_space": frapp.record_space(list(self.sizes)),
               "worst_ratio": self.ratio}
        if self.name in ("det_gd", "ran_gd"):
            x = frapp.gamma_x(self.gamma, frapp.record_space(list(self.sizes)))
            out["keep_probability"] = float((self.gamma - 1) * x)
        if self.name == "ran_gd":  # α is below the paper's γx/2 where that would clip (frapp.ran_gd_alpha)
            out.update(alpha=float(frapp.ran_gd_alpha(self.gamma, frapp.record_space(list(self.sizes)))),
                       alpha_paper=float(self.gamma * x / 2), r_points=frapp.RAN_GD_POINTS)
        if self.name == "mask":
            out["p"] = float(self.p)
        if self.name == "cut_paste":
            out.update(K=self.cp_k, rho=float(self.rho))
        return out


def code_column(spec: AttributeSpec) -> Column:
    """The value's index in the domain, or null when it has none."""
    c = F.col(f"`{spec.column}`")
    if spec.edges is not None:
        number = c.cast("double")
        index = F.lit(0)
        for edge in spec.edges:
            passed = number > edge if spec.right_closed else number >= edge
            index = index + passed.cast("int")
        return F.when(number.isNotNull(), index.cast("long"))
    text = F.trim(c.cast("string"))
    index = F.lit(len(spec.values)) if spec.other else F.lit(None)
    for i, value in reversed(list(enumerate(spec.values))):
        index = F.when(text == value, F.lit(i)).otherwise(index)
    return F.when(c.isNotNull(), index.cast("long"))


def code_columns(count: int) -> list[str]:
    return [f"_a{j}" for j in range(count)]


def check_columns(df: DataFrame, specs: list[AttributeSpec]) -> None:
    """A DataError when the records lack an attribute's column (their schema is public: checked
    before the charge too)."""
    missing = [s.column for s in specs if s.column not in df.columns]
    if missing:
        raise DataError(f"source has no column {', '.join(missing)} (it has: {', '.join(df.columns)})")


def coded(df: DataFrame, specs: list[AttributeSpec], strict: bool = True, progress=None) -> tuple[DataFrame, int]:
    """(DataFrame[_a0, …]: the records as value indices, the number of records dropped), from
    one aggregate pass. A record with a value missing or outside its attribute's domain is an
    error when ``strict`` (the count goes to ``progress`` as a diagnostic), dropped otherwise."""
    check_columns(df, specs)
    table = df.select(*[code_column(spec).alias(f"_a{j}") for j, spec in enumerate(specs)])
    unusable = F.lit(False)
    for j in range(len(specs)):
        unusable = unusable | F.col(f"_a{j}").isNull()
    bad = table.agg(*[F.sum(F.col(f"_a{j}").isNull().cast("long")).alias(f"b{j}") for j in range(len(specs))],
                    F.sum(unusable.cast("long")).alias("dropped")).first()
    for j, spec in enumerate(specs):
        if strict and bad[f"b{j}"]:
            refuse_strictly(f"column {spec.column!r} has values missing or outside its public domain (list them in "
                            "'values', or give the attribute an 'other' value)", f"{bad[f'b{j}']:,} values", progress)
    dropped = int(bad["dropped"] or 0)
    return (table.where(~unusable) if dropped else table), dropped


def perturb(table: DataFrame, scheme: Scheme, seed: int | None = None) -> DataFrame:
    """The perturbed table, drawn on the executors: one random source per Arrow batch, from the
    OS CSPRNG (or, with a seed, from the seed and the batch's first row id, for tests).
    Not deterministic without a seed: persist or write it before reading it twice."""
    columns = code_columns(len(scheme.sizes))
    sizes = list(scheme.sizes)

    def perturb_blocks(blocks):
        for block in blocks:
            if block.empty:
                yield block[columns]
                continue
            rng = RandomSource(None if seed is None else seed * 1_000_003 + int(block["_row"].iloc[0]))
            codes = block[columns].to_numpy(dtype=np.int64)
            if scheme.name == "mask":
                out = frapp.perturb_mask(codes, sizes, scheme.p, rng)
            elif scheme.name == "cut_paste":
                out = frapp.perturb_cut_paste(codes, sizes, scheme.cp_k, scheme.rho, rng)
            else:
                out = frapp.perturb_gd(codes, sizes, scheme.gamma, rng, randomized=scheme.name == "ran_gd")
            yield pd.DataFrame(out, columns=columns)

    with_row = table.select(*columns, F.monotonically_increasing_id().alias("_row"))
    return with_row.mapInPandas(perturb_blocks, ", ".join(f"{c} long" for c in columns))


def summed_statistics(table: DataFrame, candidates: list, scheme_name: str, p: Fraction | None = None) -> np.ndarray:
    """One pass: every partition sums :func:`frapp.level_statistics` over its records in numpy and
    sends one array; the driver adds them."""
    columns = code_columns(len(table.columns))
    length = frapp.statistics_length(candidates, scheme_name)

    def partition_sums(blocks):
        total = np.zeros(length)
        for block in blocks:
            if not block.empty:
                total += frapp.level_statistics(block[columns].to_numpy(dtype=np.int64), candidates, scheme_name, p)
        yield pd.DataFrame({"s": [total.tolist()]})

    rows = table.select(*columns).mapInPandas(partition_sums, "s array<double>").collect()
    return np.sum([np.asarray(r["s"]) for r in rows], axis=0) if rows else np.zeros(length)


def mine(table: DataFrame, sizes: list[int], scheme: Scheme | None, sup_min: float,
         progress=lambda _m: None) -> dict:
    """Frequent itemsets with their (reconstructed) supports: of the raw coded table when
    ``scheme`` is None (exact Apriori, the ground truth), else of the perturbed one."""
    rows = table.count()
    if rows == 0:
        raise DataError("no records to mine")
    name = "exact" if scheme is None else scheme.name

    def support_of(candidates):
        stats = summed_statistics(table, candidates, name, None if scheme is None else scheme.p)
        if scheme is None:
            return frapp.reconstruct(stats, candidates, "exact", sizes, rows)
        return frapp.reconstruct(stats, candidates, name, sizes, rows, scheme.gamma, scheme.cp_k, scheme.rho)

    return frapp.apriori(support_of, frapp.first_level(sizes), sup_min, progress)


def labelled(table: DataFrame, attributes: list[frapp.Attribute], bit_sets: bool) -> DataFrame:
    """The coded table with the attribute names and value labels: one label per attribute, or,
    for bit-set records, the array of labels whose bit is set."""
    out = []
    for j, attribute in enumerate(attributes):
        code = F.col(f"_a{j}")
        if bit_sets:
            present = [F.when(F.shiftright(code, v).bitwiseAND(1) == 1, F.lit(label))
                       for v, label in enumerate(attribute.labels)]
            out.append(F.array_compact(F.array(*present)).alias(attribute.name))
        else:
            out.append(F.element_at(F.array(*[F.lit(x) for x in attribute.labels]), (code + 1).cast("int"))
                       .alias(attribute.name))
    return table.select(*out)


def itemsets_table(found: dict, attributes: list[frapp.Attribute]) -> pd.DataFrame:
    """One row per frequent itemset: length, a readable label, and its support."""
    ordered = sorted(found.items(), key=lambda kv: (len(kv[0]), -kv[1], kv[0]))
    return pd.DataFrame({
        "length": [len(i) for i, _ in ordered],
        "itemset": [frapp.itemset_label(i, attributes) for i, _ in ordered],
        "support": [float(s) for _, s in ordered],
    })


def sizes_of(attributes: list[frapp.Attribute]) -> list[int]:
    return [len(a.labels) for a in attributes]


def check_bit_capacity(attributes: list[frapp.Attribute]) -> None:
    """Bit sets live in a long per attribute."""
    for a in attributes:
        if len(a.labels) > 62:
            raise ValueError(f"attribute {a.name!r} has {len(a.labels)} values; at most 62 are supported")
    if math.prod(len(a.labels) for a in attributes) > 2**62:
        raise ValueError("the record space is too large")
