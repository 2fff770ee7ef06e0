"""Every coding-pair data type of §3 measured on one checkpoint (``ansforge types``).

Per matrix (the selection Table 1 counts), the stored weights are converted to each type and split
into its coding pairs; the size is the paper's estimate, ``-log2 p(code)`` over the matrix's own
code histogram plus the additional data, summed over matrices and divided by the weights. Rows:

* §3.1 custom floats: E8M2, E8M3, fp8 E5M2 / E4M3 (saturating, unscaled weights, as the formats
  are), fp16, and bf16 (Table 1's Ideal), each by round-to-nearest-even from the stored values;
* §3.2 posits ⟨8,0⟩, ⟨8,1⟩, ⟨16,1⟩ (nearest posit of each weight, unscaled);
* §3.3 integers at ``Nb = 7`` (NZ-MSB and direct codes; Table 2 has every ``Nb``);
* §3.5 saliency: the ``salient_fraction`` largest weights kept in bf16, the rest E8M3, one code
  space, against the same split with the important weights in a separate (position, value) store;
* §3.6 ternary (absmean): zero runs, groups of 8, hybrid.

The note of each row says what the conversion lost (values changed, saturated, flushed to zero).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model.checkpoint import open_checkpoint, select_tensors
from ..model.custom_float import MINIFLOATS
from ..model.integers import DirectCode, NzMsbCode, ideal_pair_bits, linear_quantize
from ..model.pairs import fp32_to_bf16_rne
from ..model.posit import POSITS
from ..model.saliency import code_bits, outlier_store_bits, salient_mask, split_salient
from ..model.ternary import GroupMaskCode, HybridCode, RunLengthCode, absmean_ternarize
from .table2 import stored_values

__all__ = ["TypeRow", "TypeSurvey", "survey_types", "FLOAT_ROWS", "POSIT_ROWS"]

FLOAT_ROWS = ("e8m2", "e8m3", "e5m2", "e4m3", "fp16", "bf16")
POSIT_ROWS = tuple(POSITS)


def _ideal(codes: np.ndarray, extra_total: int) -> float:
    c = np.bincount(np.asarray(codes, dtype=np.int64).ravel())
    nz = c[c > 0].astype(np.float64)
    return float(-(nz * np.log2(nz / nz.sum())).sum()) + extra_total


@dataclass
class TypeRow:
    section: str
    name: str
    bits: float = 0.0
    changed: int = 0
    note: str = ""


@dataclass
class TypeSurvey:
    model: str
    weights: int = 0
    matrices: int = 0
    rows: list[TypeRow] = field(default_factory=list)
    salient_fraction: float = 0.01

    def row(self, name: str) -> TypeRow:
        return next(r for r in self.rows if r.name == name)

    def bits_per_weight(self, name: str) -> float:
        return self.row(name).bits / self.weights

    def format_text(self) -> str:
        lines = [f"Coding-pair data types on {self.model} ({self.matrices} matrices, {self.weights:,} weights; "
                 f"ideal code size per matrix + additional data):",
                 f"{'Section':<8}{'Type':<52}{'Bits/weight':>12}  Note"]
        for r in self.rows:
            note = r.note or (f"{r.changed / self.weights:.1%} of values changed" if r.changed else "exact")
            lines.append(f"{r.section:<8}{r.name:<52}{r.bits / self.weights:>12.4f}  {note}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"model": self.model, "weights": self.weights, "matrices": self.matrices,
                "rows": [{"section": r.section, "type": r.name, "bits_per_weight": r.bits / self.weights,
                          "changed": r.changed, "note": r.note} for r in self.rows]}


def survey_types(path: str | Path, *, salient_fraction: float = 0.01, include=(), exclude=()) -> TypeSurvey:
    """Measure every type on the checkpoint at ``path`` (module docstring)."""
    ck = open_checkpoint(path)
    infos = select_tensors(ck, include, exclude)
    rows: dict[str, TypeRow] = {}

    def add(section, name, bits, changed=0, note=""):
        r = rows.setdefault(name, TypeRow(section, name, note=note))
        r.bits += bits
        r.changed += changed

    n = 0
    saturated = {k: 0 for k in FLOAT_ROWS}
    for info in infos:
        w = stored_values(ck.tensor(info.name))
        w32 = w.astype(np.float32)
        n += w.size
        for name in FLOAT_ROWS:
            fmt = MINIFLOATS[name]
            bits = fp32_to_bf16_rne(w32) if name == "bf16" else fmt.from_float(w32)
            back = fmt.to_float64(bits)
            pairs = fmt.pairs.split(bits)
            saturated[name] += int(np.count_nonzero(np.abs(back) == fmt.max_finite) - np.count_nonzero(np.abs(w) == fmt.max_finite))
            add("3.1", f"{name} (E{fmt.exponent_bits}M{fmt.mantissa_bits})", _ideal(pairs.codes, pairs.extra_bits_total()),
                int(np.count_nonzero(back != w)))
        for name, pf in POSITS.items():
            p = pf.from_float(w)
            pairs = pf.split(p)
            add("3.2", name, ideal_pair_bits(pairs), int(np.count_nonzero(pf.to_float64(p) != w.ravel())))
        q, _ = linear_quantize(w, 7)
        add("3.3", "int Nb=7, NZ-MSB codes", ideal_pair_bits(NzMsbCode(7).split(q)), note="quantized to ±127")
        add("3.3", "int Nb=7, direct codes (128 + sign)", ideal_pair_bits(DirectCode(7).split(q)),
            note="quantized to ±127")
        b16 = fp32_to_bf16_rne(w32).reshape(w.shape)
        mask = salient_mask(b16, salient_fraction)
        sp = split_salient(b16, mask, 3, 7)
        add("3.5", f"salient {salient_fraction:.0%} bf16 + E8M3, one code space", code_bits(sp.pairs),
            note="important weights exact, the rest E8M3")
        add("3.5", f"E8M3 + separate outlier store ({salient_fraction:.0%})", outlier_store_bits(b16, mask, 3),
            note="same values; outliers as (index, bf16)")
        t, _ = absmean_ternarize(w)
        flat = t.ravel()
        zeros = int(np.count_nonzero(flat == 0))
        for code, label in ((RunLengthCode, "zero runs + sign"), (GroupMaskCode, "groups of 8 (mask + signs)"),
                            (HybridCode, "hybrid (zero-group runs + masks)")):
            c = code(flat.size)
            add("3.6", f"ternary absmean, {label}", ideal_pair_bits(c.split(flat)))
        rows.setdefault("_zeros", TypeRow("", "_zeros")).changed += zeros
    zeros = rows.pop("_zeros").changed
    for r in rows.values():
        if r.section == "3.6":
            r.note = f"{zeros / n:.1%} zeros; raw 2-bit codes = 2.0, entropy of {{-1,0,1}} ≈ 1.58"
    for name in FLOAT_ROWS:
        fmt = MINIFLOATS[name]
        r = rows[f"{name} (E{fmt.exponent_bits}M{fmt.mantissa_bits})"]
        if saturated[name] > 0:
            r.note = f"{r.changed / n:.1%} of values changed, {saturated[name]:,} saturated to ±{fmt.max_finite:g}"
    return TypeSurvey(Path(path).name, n, len(infos), list(rows.values()), salient_fraction)
