"""Context tables measured on a checkpoint (``ansforge context``): the paper's one table per matrix
against up to ``sets`` table sets per matrix, with and without the folded mantissa bit.

Every row is a real golden stream of ``codec``: encoded, decoded again and compared bit-exactly with
the matrices, every table, select and header charged (:class:`~ansforge.model.coding.context.ContextCost`).
The reference line is the paper's per-matrix ideal (Table 1's "Ideal", no table charged at all).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model.llm.checkpoint import open_checkpoint, select_tensors
from ..model.coding.codecs import parse_codec
from ..model.coding.context import ContextCost, decode_context, encode_context
from ..model.errors import AnsforgeError
from ..model.dtypes.pairs import PAIR_FORMATS, convert
from ..model.coding.probability import ideal_bits

__all__ = ["ContextRow", "ContextReport", "context_report"]


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


def context_report(path: str | Path, codec: str = "rans16", *, pairs: str = "bf16", max_sets: int = 8,
                   folds=(0, 1), include=(), exclude=()) -> ContextReport:
    """Code the checkpoint's matrices (Table 1's selection) one table per matrix and with context
    tables for each ``fold``; every stream is decoded and checked bit-exactly."""
    spec = parse_codec(codec)
    fmt = PAIR_FORMATS[pairs]
    ck = open_checkpoint(path)
    mats = []
    ideal = 0.0
    for info in select_tensors(ck, include, exclude):
        rec = ck.tensor(info.name)
        bits, _ = convert(rec.array, rec.dtype, pairs)
        bits = bits.reshape(rec.shape)
        if bits.ndim != 2:
            continue
        mats.append((info.name, bits))
        p = fmt.split(bits)
        ideal += ideal_bits(p.counts()) + p.extra_bits_total()
    report = ContextReport(Path(path).name, spec.label(), sum(b.size for _, b in mats), ideal)
    runs = [("one table per matrix (paper)", dict(single=True))]
    runs += [(f"context tables, sets <= {max_sets}" + (f", +{f} mantissa bit in code" if f else ""),
              dict(fold=f, max_sets=max_sets)) for f in folds]
    for label, kw in runs:
        coded = encode_context(spec, mats, fmt, **kw)
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
