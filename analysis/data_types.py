"""Every coding-pair data type of §3 measured on one checkpoint: size, error, effect (``ansforge types``).

Per matrix (the selection Table 1 counts), the stored weights are converted to each type and split
into its coding pairs. **Size** is the paper's estimate (``-log2 p(code)`` over the matrix's own code
histogram plus the additional data) **with the tables charged** (:func:`~.lossy.charged_bits`: a
16-bit frequency per used code, the used codes' identities, and a 32-bit scale where the type has
one), summed over matrices and divided by the weights; the uncharged estimate is printed beside it.
**Error** is :class:`~.lossy.ErrorStats` against the stored weights; on a llama checkpoint the
**effect on the model** is the mean next-token KL divergence and greedy agreement over ``steps``
positions (:class:`~.lossy.EffectProbe`). Rows:

* §3.1 custom floats: E8M2, E8M3, fp8 E5M2 / E4M3 (saturating, unscaled weights, as the formats
  are), fp16, and bf16 (Table 1's Ideal), each by round-to-nearest-even from the stored values;
* §3.2 posits ⟨8,0⟩, ⟨8,1⟩, ⟨16,1⟩ (nearest posit of each weight, unscaled; below minpos a weight
  is clamped to ±minpos, never flushed);
* §3.3 integers at ``Nb = 7`` (NZ-MSB and direct codes; ``ansforge quant-table`` has every ``Nb``,
  saturation and subdivision);
* §3.5 saliency: the ``salient_fraction`` most important weights kept in bf16, the rest E8M3, one
  code space (decoded through the §4.3 PairToFloat table, checked bit-exact against the golden join),
  against the same split with the important weights in a separate (position, value) store.
  Importance is ``|w|`` or, on a llama, ``|w|·‖x‖`` from the probe's calibration activations;
* §3.6 binary (sign · mean|w|: one code per weight, groups of 8) and ternary: absmean (BitNet b1.58)
  and thresholds ``|w| > θ·mean|w|`` with zero runs, groups of 8 and hybrid. At large θ whole groups
  are zero and hybrid departs from groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model.llm.checkpoint import open_checkpoint, select_tensors
from ..model.dtypes.custom_float import MINIFLOATS
from ..model.errors import AnsforgeError, ConfigError
from ..model.dtypes.integers import DirectCode, IntegerPairs, NzMsbCode, linear_quantize
from ..model.dtypes.interfaces import PairToFloatTable
from ..model.dtypes.pairs import fp32_to_bf16_rne
from ..model.dtypes.posit import POSITS
from ..model.dtypes.saliency import activation_importance, interface_format, join_salient, salient_mask, split_salient
from ..model.dtypes.ternary import (GroupMaskCode, HybridCode, RunLengthCode, absmean_ternarize, sign_binarize,
                             threshold_ternarize)
from .lossy import SCALE_BITS, ErrorStats, ModelEffect, charged_bits, error_stats, ideal_bits, probe_or_none
from .table2 import stored_values

__all__ = ["TypeRow", "TypeSurvey", "survey_types", "FLOAT_ROWS", "POSIT_ROWS", "IMPORTANCE", "TERNARY_THRESHOLDS"]

FLOAT_ROWS = ("e8m2", "e8m3", "e5m2", "e4m3", "fp16", "bf16")
POSIT_ROWS = tuple(POSITS)
IMPORTANCE = ("magnitude", "activation")
#: Thresholds θ (in units of mean|w|) of the extra ternary rows.
TERNARY_THRESHOLDS = (1.5, 3.0)


def _bf16_values(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


@dataclass
class TypeRow:
    """One type's totals over the matrices: ``bits`` with tables charged, ``ideal`` without."""

    section: str
    name: str
    bits: float = 0.0
    ideal: float = 0.0
    errors: ErrorStats = field(default_factory=ErrorStats)
    effect: ModelEffect | None = None
    note: str = ""


@dataclass
class TypeSurvey:
    model: str
    weights: int = 0
    matrices: int = 0
    rows: list[TypeRow] = field(default_factory=list)
    salient_fraction: float = 0.01
    importance: str = "magnitude"
    effect_note: str = ""
    positions: int = 0

    def row(self, name: str) -> TypeRow:
        return next(r for r in self.rows if r.name == name)

    def bits_per_weight(self, name: str) -> float:
        """Tables charged."""
        return self.row(name).bits / self.weights

    def format_text(self) -> str:
        effect = (f"effect on the model over {self.positions} greedy positions from BOS" if self.positions
                  else f"no effect on the model measured: {self.effect_note}")
        lines = [f"Coding-pair data types on {self.model} ({self.matrices} matrices, {self.weights:,} weights). "
                 "Bits/w: ideal code size + additional data + tables charged (16-bit frequency and identity of "
                 "each used code, 32-bit scales); Ideal: without tables. Errors against the stored weights; "
                 f"{effect}.",
                 f"{'Sect':<5}{'Type':<46}{'Bits/w':>8}{'Ideal':>8}{'relRMSE':>9}{'maxRel':>9}{'KL nats':>10}"
                 f"{'greedy':>8}  Note"]
        for r in self.rows:
            e = r.errors
            kl = f"{r.effect.kl_nats:10.2e}" if r.effect else f"{'-':>10}"
            gr = f"{r.effect.greedy_agreement:8.1%}" if r.effect else f"{'-':>8}"
            note = "; ".join(x for x in (e.describe(), r.note) if x) or ("exact" if e.sq_err == 0 else "")
            lines.append(f"{r.section:<5}{r.name:<46}{r.bits / self.weights:8.3f}{r.ideal / self.weights:8.3f}"
                         f"{e.rel_rmse:9.4f}{e.max_rel_err:9.3g}{kl}{gr}  {note}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        rows = []
        for r in self.rows:
            rows.append({"section": r.section, "type": r.name, "bits_per_weight": r.bits / self.weights,
                         "ideal_bits_per_weight": r.ideal / self.weights, **r.errors.to_json(),
                         "kl_nats": r.effect.kl_nats if r.effect else None,
                         "greedy_agreement": r.effect.greedy_agreement if r.effect else None, "note": r.note})
        return {"model": self.model, "weights": self.weights, "matrices": self.matrices,
                "size": "ideal code size + additional data + tables (16-bit frequency and identity per used code) "
                        "+ 32-bit scales, per matrix",
                "salient_fraction": self.salient_fraction, "importance": self.importance,
                "effect_positions": self.positions, "effect_note": self.effect_note, "rows": rows}


class _Collector:
    """Accumulates each type's size, error and converted values over the matrices."""

    def __init__(self, keep_values: bool):
        self.rows: dict[str, TypeRow] = {}
        self.values: dict[str, dict[str, np.ndarray]] = {}
        self.keep = keep_values

    def add(self, matrix: str, section: str, name: str, w: np.ndarray, w_hat: np.ndarray, pairs, *,
            alphabet: int | None = None, side_bits: int = 0, extra_bits: float = 0.0, min_mag=None, max_mag=None,
            note: str = "") -> None:
        r = self.rows.setdefault(name, TypeRow(section, name, note=note))
        r.bits += charged_bits(pairs, alphabet, side_bits) + extra_bits
        r.ideal += ideal_bits(pairs.counts()) + pairs.extra_bits_total() + extra_bits
        r.errors = r.errors + error_stats(w, w_hat, min_mag=min_mag, max_mag=max_mag)
        if self.keep:
            self.values.setdefault(name, {})[matrix] = np.asarray(w_hat, dtype=np.float32).reshape(np.shape(w))


def survey_types(path: str | Path, *, salient_fraction: float = 0.01, importance: str = "magnitude",
                 steps: int | None = 0, thresholds=TERNARY_THRESHOLDS, include=(), exclude=()) -> TypeSurvey:
    """Measure every type on the checkpoint at ``path`` (module docstring).

    ``steps`` > 0 measures the effect on the model when ``path`` is a llama (``None``: automatic, see
    :func:`~.lossy.probe_or_none`); ``importance`` is
    ``"magnitude"`` or ``"activation"`` (``|w|·‖x‖``, needs a llama and ``steps`` > 0).
    """
    if importance not in IMPORTANCE:
        raise ConfigError(f"importance must be one of {', '.join(IMPORTANCE)}, not {importance!r}")
    ck = open_checkpoint(path)
    infos = select_tensors(ck, include, exclude)
    probe, why = probe_or_none(path, steps)
    if importance == "activation" and probe is None:
        raise ConfigError(f"{path}: importance 'activation' needs calibration activations of a llama ({why})")
    col = _Collector(probe is not None)
    n = 0
    zeros: dict[str, int] = {}
    for info in infos:
        w = stored_values(ck.tensor(info.name))
        w32 = w.astype(np.float32)
        n += w.size
        add = lambda *a, **k: col.add(info.name, *a, **k)    # noqa: E731
        for name in FLOAT_ROWS:
            fmt = MINIFLOATS[name]
            bits = fp32_to_bf16_rne(w32) if name == "bf16" else fmt.from_float(w32)
            add("3.1", f"{name} (E{fmt.exponent_bits}M{fmt.mantissa_bits})", w, fmt.to_float64(bits),
                fmt.pairs.split(bits), alphabet=1 << fmt.exponent_bits,
                min_mag=math.ldexp(1.0, fmt.emin - fmt.mantissa_bits), max_mag=fmt.max_finite)
        for name, pf in POSITS.items():
            p = pf.from_float(w)
            add("3.2", name, w, pf.to_float64(p), pf.split(p), min_mag=math.ldexp(1.0, -pf.max_scale),
                max_mag=math.ldexp(1.0, pf.max_scale))
        q, scale = linear_quantize(w, 7)
        add("3.3", "int Nb=7, NZ-MSB codes", w, q * scale, NzMsbCode(7).split(q), side_bits=SCALE_BITS)
        add("3.3", "int Nb=7, direct codes (128 + sign)", w, q * scale, DirectCode(7).split(q), side_bits=SCALE_BITS)

        b16 = fp32_to_bf16_rne(w32).reshape(w.shape)
        score = None
        if importance == "activation":
            norms = probe.input_norms.get(info.name)
            if norms is None or w.ndim != 2:
                raise ConfigError(f"{path}: no calibration activations reach matrix {info.name!r}")
            score = activation_importance(w, norms)
        mask = salient_mask(b16, salient_fraction, score)
        sp = split_salient(b16, mask, 3, 7)
        decoded = PairToFloatTable(interface_format(sp), "bf16").apply(sp.pairs.codes, sp.pairs.extra)
        if not np.array_equal(decoded, join_salient(sp)):
            raise AnsforgeError(f"matrix {info.name!r}: the §4.3 PairToFloat table disagrees with the salient join")
        values = _bf16_values(decoded)
        by = "|w|·‖x‖" if importance == "activation" else "|w|"
        add("3.5", f"salient {salient_fraction:.0%} by {by}: bf16 + E8M3, one space", w, values, sp.pairs,
            alphabet=512, note="decoded by the §4.3 PairToFloat table, bit-exact")
        ordinary = split_salient(b16, np.zeros(w.shape, dtype=bool), 3)
        k = int(mask.sum())
        add("3.5", f"E8M3 + separate outlier store ({salient_fraction:.0%})", w, values, ordinary.pairs,
            alphabet=256, extra_bits=k * (max(1, (w.size - 1).bit_length()) + 16), note="outliers as (index, bf16)")

        b, alpha = sign_binarize(w)
        flat = b.ravel()
        add("3.6", "binary sign·mean|w|, one code per weight", w, alpha * (2.0 * b - 1),
            IntegerPairs(flat.astype(np.int64), np.zeros(flat.size, np.uint64), np.zeros(2, np.uint8)),
            side_bits=SCALE_BITS)
        add("3.6", "binary sign·mean|w|, groups of 8", w, alpha * (2.0 * b - 1),
            GroupMaskCode(flat.size, ternary=False).split(flat), side_bits=SCALE_BITS)
        variants = [("absmean", *absmean_ternarize(w))]
        variants += [(f"|w|>{t:g}·mean", *threshold_ternarize(w, t)) for t in thresholds]
        for label, t, scale in variants:
            flat = t.ravel()
            zeros[label] = zeros.get(label, 0) + int(np.count_nonzero(flat == 0))
            for code, coding in ((RunLengthCode, "zero runs"), (GroupMaskCode, "groups of 8"),
                                 (HybridCode, "hybrid")):
                c = code(flat.size)
                add("3.6", f"ternary {label}, {coding}", w, scale * t.astype(np.float64), c.split(flat),
                    alphabet=c.layout().n_codes, side_bits=SCALE_BITS)
    for label, z in zeros.items():
        for r in col.rows.values():
            if r.name.startswith(f"ternary {label},"):
                r.note = f"{z / n:.1%} zeros"
    if probe is not None:
        for name, r in col.rows.items():
            r.effect = probe.measure(col.values[name])
    return TypeSurvey(Path(path).name, n, len(infos), list(col.rows.values()), salient_fraction, importance, why,
                      probe.positions if probe else 0)
