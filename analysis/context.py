"""Context tables measured on a checkpoint (``ansforge context``): the paper's one table per matrix
against up to ``sets`` table sets per matrix, with and without the folded mantissa bit.

Every row is a real golden stream of ``codec``: encoded, decoded again and compared bit-exactly with
the matrices, every table, select and header charged (:class:`~ansforge.model.coding.context.ContextCost`).
The reference line is the paper's per-matrix ideal (Table 1's "Ideal", no table charged at all).

On a terminal (:mod:`ansforge.model.progress`) the matrices read show as a bar of weights, each coding
run (encode, decode, compare) as a line with its elapsed time, and :func:`context_floor` as a bar of
the weights measured; off a terminal nothing is printed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model import progress
from ..model.llm.checkpoint import open_checkpoint, select_tensors
from ..model.coding.codecs import parse_codec
from ..model.coding.registry import DEFAULT_FORMAT
from ..model.coding.context import ContextCost, cluster_sets, decode_context, encode_context, group_counts
from ..model.errors import AnsforgeError, ConfigError
from ..model.dtypes.pairs import PAIR_FORMATS, convert
from ..model.coding.probability import ideal_bits

__all__ = ["ContextRow", "ContextReport", "context_report", "ContextFloor", "FloorRow", "FLOOR_FAMILIES", "context_floor", "conditional_entropy_bits", "adaptive_bits"]


@dataclass(frozen=True)
class ContextRow:
    label: str
    cost: ContextCost
    sets: int
    plans: dict


@dataclass
class ContextReport:
    model: str
    codec: str
    weights: int
    ideal_bits: float
    rows: list[ContextRow] = field(default_factory=list)

    @property
    def ideal_per_weight(self) -> float:
        return self.ideal_bits / self.weights

    def row(self, label: str) -> ContextRow:
        return next(r for r in self.rows if r.label == label)

    def gain(self, label: str) -> float:
        """Relative saving of a row against the paper's per-matrix ideal (positive = smaller)."""
        return 1 - self.row(label).cost.bits_per_weight / self.ideal_per_weight

    def format_text(self) -> str:
        lines = [f"Context tables on {self.model} ({self.weights:,} weights, {self.codec}, bit-exact round trip):",
                 f"  paper's per-matrix ideal (no tables charged): {self.ideal_per_weight:.4f} bits/weight",
                 f"{'Method':<40}{'bits/weight':>12}{'vs ideal':>10}{'tables+selects':>16}{'sets':>6}  plans"]
        for r in self.rows:
            c = r.cost
            over = (c.code_table_bits + c.frequency_bits + c.select_bits + c.header_bits) / c.weights
            plans = ", ".join(f"{k} {v}" for k, v in sorted(r.plans.items()))
            lines.append(f"{r.label:<40}{c.bits_per_weight:>12.4f}{-self.gain(r.label):>+10.2%}{over:>16.4f}"
                         f"{r.sets:>6}  {plans}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"model": self.model, "codec": self.codec, "weights": self.weights,
                "ideal_bits_per_weight": self.ideal_per_weight,
                "rows": [{"method": r.label, "bits_per_weight": r.cost.bits_per_weight, "sets": r.sets,
                          "stream_bits": r.cost.stream_bits, "code_table_bits": r.cost.code_table_bits,
                          "frequency_bits": r.cost.frequency_bits, "select_bits": r.cost.select_bits,
                          "header_bits": r.cost.header_bits, "plans": r.plans} for r in self.rows]}


def context_report(path: str | Path, codec: str = DEFAULT_FORMAT, *, pairs: str = "bf16", max_sets: int = 8,
                   folds=(0, 1), include=(), exclude=()) -> ContextReport:
    """Code the checkpoint's matrices (Table 1's selection) one table per matrix and with context
    tables for each ``fold``, the tables built as a container builds them and every stored tANS spread
    charged (:func:`~ansforge.model.coding.context.encode_context` with ``container=True``); every
    stream is decoded and checked bit-exactly."""
    spec = parse_codec(codec)
    fmt = PAIR_FORMATS[pairs]
    ck = open_checkpoint(path)
    mats = []
    ideal = 0.0
    infos = select_tensors(ck, include, exclude)
    with progress.bar(sum(i.size for i in infos), "context: reading the matrices", unit="w") as advance:
        for info in infos:
            rec = ck.tensor(info.name)
            bits, _ = convert(rec.array, rec.dtype, pairs)
            bits = bits.reshape(rec.shape)
            advance(info.size)
            if bits.ndim != 2:
                continue
            mats.append((info.name, bits))
            p = fmt.split(bits)
            ideal += ideal_bits(p.counts()) + p.extra_bits_total()
    report = ContextReport(Path(path).name, spec.label(), sum(b.size for _, b in mats), ideal)
    runs = [("one table per matrix (paper)", dict(single=True))]
    runs += [(f"context tables, sets <= {max_sets}" + (f", +{f} mantissa bit in code" if f else ""),
              dict(fold=f, max_sets=max_sets)) for f in folds]
    for k, (label, kw) in enumerate(runs):
        with progress.activity(f"context {k + 1}/{len(runs)}: {label}", report=True) as note:
            note(f"encoding {report.weights:,} weights")
            coded = encode_context(spec, mats, fmt, container=True, **kw)
            note("decoding")
            back = decode_context(coded)
        for (name, m), b in zip(mats, back):
            if not np.array_equal(m, b):
                raise AnsforgeError(f"context-table stream of {name!r} did not decode bit-exactly")
        plans: dict[str, int] = {}
        for p in coded.plans:
            key = "single" if p.n_sets == 1 else f"{p.axis}/{p.group}"
            plans[key] = plans.get(key, 0) + 1
        report.rows.append(ContextRow(label, coded.cost, sum(p.n_sets for p in coded.plans), plans))
    return report


# --- how far context tables can go: the empirical floor of each context family ---------------------

#: Context families of :func:`context_floor`: one table per matrix, row groups, column groups, and
#: their product (rows clustered into ``a`` sets, columns into ``b``, ``a · b = sets`` cells).
FLOOR_FAMILIES = ("matrix", "rows", "cols", "rows x cols")


@dataclass(frozen=True)
class FloorRow:
    family: str
    fold: int
    sign: bool
    contexts: int
    bits: float
    adaptive_bits: float
    symbols: int = 0          # the most distinct codes of one matrix (a core takes at most 256)

    def layout(self) -> str:
        """The code this row measures, e.g. ``sign+exp+m2`` (``exp``: the format's exponent field)."""
        return ("sign+" if self.sign else "") + "exp" + (f"+m{self.fold}" if self.fold else "")


@dataclass
class ContextFloor:
    """:func:`context_floor`'s result: bits of the counted matrices per family and code layout (the
    floor, and what an adaptive coder with the same contexts spends)."""

    model: str
    pairs: str
    sets: int
    weights: int
    rows: list[FloorRow] = field(default_factory=list)

    def best(self) -> FloorRow:
        return min(self.rows, key=lambda r: r.bits)

    def format_text(self) -> str:
        lines = [f"Context floor on {self.model} ({self.weights:,} weights, {self.pairs} pairs, at most "
                 f"{self.sets} contexts per matrix): the empirical entropy of the code given its context, "
                 "plus the raw bits; no table, select or header charged, so every static coder with "
                 "these contexts spends at least this much. 'adaptive': the exact code length of an "
                 "adaptive coder (Krichevsky-Trofimov counts) with the same contexts, selects charged: "
                 "what learning the tables costs, an estimate of a stored table's price",
                 f"{'Family':<14}{'code':<16}{'symbols':>8}{'contexts':>9}{'floor':>9}{'adaptive':>10}  (bits/weight)"]
        for r in self.rows:
            lines.append(f"{r.family:<14}{r.layout():<16}{r.symbols:>8}{r.contexts:>9}{r.bits / self.weights:>9.4f}"
                         f"{r.adaptive_bits / self.weights:>10.4f}")
        b = self.best()
        a = min(self.rows, key=lambda r: r.adaptive_bits)
        lines.append(f"lowest floor: {b.family}, {b.layout()}: {b.bits / self.weights:.4f} bits/weight; "
                     f"lowest adaptive: {a.family}, {a.layout()}: {a.adaptive_bits / self.weights:.4f}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"model": self.model, "pairs": self.pairs, "sets": self.sets, "weights": self.weights,
                "rows": [{"family": r.family, "code": r.layout(), "fold": r.fold, "sign": r.sign,
                          "contexts": r.contexts, "symbols": r.symbols, "floor_bits_per_weight": r.bits / self.weights,
                          "adaptive_bits_per_weight": r.adaptive_bits / self.weights} for r in self.rows]}


def _context_counts(codes: np.ndarray, ctx: np.ndarray, n_codes: int) -> np.ndarray:
    """Code histogram of every context (``n_contexts × n_codes`` int64)."""
    n_ctx = int(ctx.max()) + 1
    counts = np.bincount((ctx.astype(np.int64) * n_codes + codes).ravel(), minlength=n_ctx * n_codes)
    return counts.reshape(n_ctx, n_codes)


def conditional_entropy_bits(codes: np.ndarray, ctx: np.ndarray, n_codes: int) -> float:
    """``Σ_c n_c H(code | ctx = c)`` in bits: the empirical entropy of each context's codes."""
    return sum(ideal_bits(row) for row in _context_counts(codes, ctx, n_codes))


_LGAMMA = np.vectorize(math.lgamma, otypes=[np.float64])


def adaptive_bits(codes: np.ndarray, ctx: np.ndarray, n_codes: int) -> float:
    """Code length in bits of an adaptive coder with one Krichevsky-Trofimov estimator per context
    (counts start at 1/2 for each of the matrix's ``n_codes`` symbols): exact, not an estimate, for
    any order of the weights (the product of the sequential probabilities depends only on the counts)."""
    counts = _context_counts(codes, ctx, n_codes)
    used = counts.sum(1) > 0
    counts = counts[used]
    n = counts.sum(1)
    k = n_codes / 2
    nats = (_LGAMMA(n + k) - math.lgamma(k)).sum() - (_LGAMMA(counts + 0.5) - math.lgamma(0.5)).sum()
    return float(nats / math.log(2))


def _family_contexts(codes: np.ndarray, n_codes: int, family: str, sets: int, labels: dict) -> np.ndarray:
    """The context of every weight of a 2-D code array under ``family`` (at most ``sets`` contexts),
    row and column sets chosen by :func:`~ansforge.model.coding.context.cluster_sets` (Lloyd iterations
    on cross-entropy, the clustering ``compress --context`` uses). ``labels`` caches the row and column
    histograms and clusterings of this code array across families."""
    a, b = _row_col_sets(family, sets)

    def sets_of(axis: str, k: int) -> np.ndarray:
        lines = codes.shape[0 if axis == "rows" else 1]
        if k == 1 or lines == 1:
            return np.zeros(lines, np.int64)
        if (axis, k) not in labels:
            if axis not in labels:
                labels[axis] = group_counts(codes, axis, 1, n_codes)
            labels[axis, k] = cluster_sets(labels[axis], k)
        return labels[axis, k]

    return sets_of("rows", a)[:, None] * b + sets_of("cols", b)[None, :]


def _row_col_sets(family: str, sets: int) -> tuple[int, int]:
    """Row sets and column sets of a family (``rows x cols``: 16 sets are 4 row sets x 4 column sets)."""
    if family == "matrix" or sets == 1:
        return 1, 1
    if family == "rows x cols":
        a = 1 << ((sets.bit_length() - 1) // 2)
        return a, sets // a
    return (sets, 1) if family == "rows" else (1, sets)


def _select_bits(family: str, shape: tuple[int, int], sets: int) -> int:
    """Bits of the selects: ``ceil(log2 a)`` per row and ``ceil(log2 b)`` per column."""
    a, b = _row_col_sets(family, sets)
    return shape[0] * math.ceil(math.log2(a)) + shape[1] * math.ceil(math.log2(b))


def context_floor(path: str | Path, *, pairs: str = "bf16", sets: int = 16, folds=(0, 1, 2, 3),
                  families=FLOOR_FAMILIES, include=(), exclude=()) -> ContextFloor:
    """How far context tables of each family can go on a checkpoint's matrices (Table 1's selection).

    For every family of :data:`FLOOR_FAMILIES` with at most ``sets`` contexts per matrix, every
    ``fold`` (top mantissa bits moved into the code) and the sign outside or inside the code, the
    bits are the empirical conditional entropy of the code given its context plus the bits left raw.
    By Gibbs' inequality no static table per context codes a context's codes in fewer bits than their
    empirical entropy, so a coder with these contexts, whatever its tables, spends at least this much
    *before* its tables and selects are stored: a floor for the family as instantiated here (the
    sets come from the same clustering as ``compress --context``; other partitions are not searched).
    The floor falls as the code grows (more folded bits: more symbols, fewer weights per table
    entry) because it charges no table; ``adaptive`` is the exact code length of an adaptive coder
    with the same contexts and the selects charged, which pays for learning every table from the data.
    """
    if not 1 <= sets <= 16:
        raise ConfigError(f"sets must be between 1 and 16, not {sets!r}")
    if not families or any(f not in FLOOR_FAMILIES for f in families):
        raise ConfigError(f"families must be among {', '.join(FLOOR_FAMILIES)}, not {families!r}")
    M = PAIR_FORMATS[pairs].mantissa_bits
    folds = tuple(folds)
    if any(isinstance(f, bool) or not 0 <= int(f) <= M for f in folds):
        raise ConfigError(f"folds must be between 0 and {M} mantissa bits, not {folds!r}")
    ck = open_checkpoint(path)
    totals: dict[tuple, float] = {}
    weights = 0
    infos = select_tensors(ck, include, exclude)
    with progress.bar(sum(i.size for i in infos) * len(folds) * 2, "context floor", unit="w") as advance:
        for info in infos:
            weights += _floor_of(ck, info, pairs, folds, families, sets, totals, advance)
    if not weights:
        raise AnsforgeError(f"{path}: no 2-D matrix selected for the context floor")
    rows = [FloorRow(f, fold, sign, 1 if f == "matrix" else sets, fl, ad, sy)
            for (f, fold, sign), (fl, ad, sy) in totals.items()]
    rows.sort(key=lambda r: (FLOOR_FAMILIES.index(r.family), r.sign, r.fold))
    return ContextFloor(Path(path).name, pairs, sets, weights, rows)


def _floor_of(ck, info, pairs: str, folds, families, sets: int, totals: dict, advance) -> int:
    """Add one matrix's floor and adaptive bits to ``totals`` (:func:`context_floor`); its weights, 0 if
    it is not 2-D. ``advance`` counts its weights once per fold and sign."""
    fmt = PAIR_FORMATS[pairs]
    E, M = fmt.exponent_bits, fmt.mantissa_bits
    rec = ck.tensor(info.name)
    bits, _ = convert(rec.array, rec.dtype, pairs)
    bits = np.asarray(bits).reshape(rec.shape)
    if bits.ndim != 2:
        advance(info.size * len(folds) * 2)
        return 0
    b = bits.astype(np.int64)
    for fold in folds:
        for sign in (False, True):
            field_ = b >> (M - fold)
            if not sign:
                field_ &= (1 << (E + fold)) - 1
            raw = (M - fold) + (0 if sign else 1)
            values, dense = np.unique(field_, return_inverse=True)
            dense = dense.reshape(b.shape)
            labels: dict = {}
            for family in families:
                ctx = _family_contexts(dense, values.size, family, sets, labels)
                k2 = (family, fold, sign)
                floor = conditional_entropy_bits(dense, ctx, values.size) + raw * b.size
                adaptive = adaptive_bits(dense, ctx, values.size) + raw * b.size + _select_bits(family, b.shape, sets)
                f0, a0, s0 = totals.get(k2, (0.0, 0.0, 0))
                totals[k2] = (f0 + floor, a0 + adaptive, max(s0, int(values.size)))
            advance(b.size)
    return int(b.size)
