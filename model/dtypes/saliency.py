"""Weight saliency as coding pairs (paper §3.5): important and ordinary weights in one code space.

Ordinary weights are bf16 rounded (nearest even) to ``ordinary_mantissa_bits`` (an E8Mm float, §3.1);
important weights keep ``important_mantissa_bits`` (7: bf16 exactly). Each set has its own codes, one
per exponent that occurs in it, so one exponent may have an ordinary *and* an important code (§3.5:
"we can assign the same exponent two different codes"); the decompressor tells them apart by code
alone. Layout (:meth:`SalientPairs.layout`)::

    codes 0 .. n_o - 1          "ordinary":  exponent table ordinary[i],  1 + m_o bits of extra
    codes n_o .. n_o + n_i - 1  "important": exponent table important[i], 1 + m_i bits of extra

:func:`salient_mask` chooses important weights by magnitude (the ``fraction`` largest ``|w|``); any
user-given boolean mask works the same. :func:`outlier_store_bits` is the usual alternative to compare
against: every weight coded as ordinary plus a separate list of (position, bf16 value) outliers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .custom_float import MinifloatFormat
from ..errors import ConfigError, PairFormatError
from .integers import IntegerPairs
from .layout import CodeLayout, CodeSet

__all__ = ["SalientPairs", "salient_mask", "activation_importance", "interface_format", "split_salient", "join_salient", "outlier_store_bits", "code_bits"]


def _bf16_to_float(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


@dataclass(frozen=True, eq=False)
class SalientPairs:
    """One matrix's salient coding pairs: the pairs and both code→exponent tables."""

    pairs: IntegerPairs
    ordinary: np.ndarray           # exponent field of each ordinary code
    important: np.ndarray          # exponent field of each important code
    ordinary_mantissa_bits: int
    important_mantissa_bits: int

    def layout(self) -> CodeLayout:
        sets = []
        if self.ordinary.size:
            sets.append(CodeSet("ordinary", 0, (1 + self.ordinary_mantissa_bits,) * self.ordinary.size))
        if self.important.size:
            sets.append(CodeSet("important", self.ordinary.size,
                                (1 + self.important_mantissa_bits,) * self.important.size))
        return CodeLayout("salient", sets)


def _check_bits(name: str, m: int) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 0 <= m <= 7:
        raise ConfigError(f"{name} must be between 0 and 7 (bf16 keeps 7 mantissa bits), not {m!r}")
    return int(m)


def salient_mask(bf16_bits: np.ndarray, fraction: float, importance: np.ndarray | None = None) -> np.ndarray:
    """The ``fraction`` (0..1) of weights with the largest ``importance`` (default: magnitude ``|w|``;
    ties broken by position)."""
    if not 0 <= fraction <= 1:
        raise ConfigError(f"salient fraction must be between 0 and 1, not {fraction!r}")
    if importance is None:
        a = np.abs(_bf16_to_float(bf16_bits)).ravel()
    else:
        if np.shape(importance) != np.shape(bf16_bits):
            raise ConfigError(f"importance of shape {np.shape(importance)} for weights of shape {np.shape(bf16_bits)}")
        a = np.asarray(importance, dtype=np.float64).ravel()
    k = int(round(fraction * a.size))
    mask = np.zeros(a.size, dtype=bool)
    if k:
        mask[np.argsort(-a, kind="stable")[:k]] = True
    return mask.reshape(np.shape(bf16_bits))


def activation_importance(weights: np.ndarray, input_norms: np.ndarray) -> np.ndarray:
    """The gradient-free importance ``|w_ij| · ‖x_j‖`` (Wanda's score): a weight matters as much as
    it moves its output on calibration inputs; ``input_norms[j]`` is ``‖x_j‖`` of input column ``j``."""
    w = np.asarray(weights, dtype=np.float64)
    x = np.asarray(input_norms, dtype=np.float64).ravel()
    if w.ndim != 2 or x.size != w.shape[1]:
        raise ConfigError(f"activation importance needs one input norm per column: {x.size} norms for a "
                          f"matrix of shape {w.shape}")
    return np.abs(w) * x[None, :]


def interface_format(sp: "SalientPairs"):
    """The §4.3 interface configuration of salient pairs: every code an E8 float with its own mantissa
    width (ordinary or important), so a PairToFloat core decodes both kinds by code alone."""
    from .interfaces import CodingPairFormat

    return CodingPairFormat.ieee("bf16", np.concatenate([sp.ordinary, sp.important]),
                                 [sp.ordinary_mantissa_bits] * sp.ordinary.size
                                 + [sp.important_mantissa_bits] * sp.important.size)


def split_salient(bf16_bits: np.ndarray, mask: np.ndarray, ordinary_mantissa_bits: int = 3,
                  important_mantissa_bits: int = 7) -> SalientPairs:
    """bf16 patterns and an importance mask → :class:`SalientPairs` (ordinary weights are rounded)."""
    mo = _check_bits("ordinary_mantissa_bits", ordinary_mantissa_bits)
    mi = _check_bits("important_mantissa_bits", important_mantissa_bits)
    bits = np.asarray(bf16_bits)
    if bits.dtype != np.uint16:
        raise PairFormatError(f"salient pairs take bf16 bit patterns (uint16), not dtype {bits.dtype}")
    mask = np.asarray(mask)
    if mask.shape != bits.shape or mask.dtype != bool:
        raise ConfigError(f"importance mask must be a boolean array of shape {bits.shape}, "
                          f"not {mask.dtype} {mask.shape}")
    bits, mask = bits.ravel(), mask.ravel()
    x = _bf16_to_float(bits)
    if not np.isfinite(x).all():
        i = int(np.flatnonzero(~np.isfinite(x))[0])
        raise PairFormatError(f"salient pairs: non-finite weight {x[i]} at flat index {i}")
    fmt_o, fmt_i = MinifloatFormat(f"e8m{mo}", 8, mo), MinifloatFormat(f"e8m{mi}", 8, mi)
    ob = fmt_o.from_float(x).astype(np.int64)
    ib = fmt_i.from_float(x).astype(np.int64)
    oe, ie = (ob >> mo) & 0xFF, (ib >> mi) & 0xFF
    ordinary = np.unique(oe[~mask]).astype(np.int64)
    important = np.unique(ie[mask]).astype(np.int64)
    lut_o = np.zeros(256, dtype=np.int64)
    lut_o[ordinary] = np.arange(ordinary.size)
    lut_i = np.zeros(256, dtype=np.int64)
    lut_i[important] = ordinary.size + np.arange(important.size)
    codes = np.where(mask, lut_i[ie], lut_o[oe])
    extra = np.where(mask, ((ib >> (8 + mi)) << mi) | (ib & ((1 << mi) - 1)),
                     ((ob >> (8 + mo)) << mo) | (ob & ((1 << mo) - 1)))
    widths = np.concatenate([np.full(ordinary.size, 1 + mo), np.full(important.size, 1 + mi)]).astype(np.uint8)
    return SalientPairs(IntegerPairs(codes, extra.astype(np.uint64), widths), ordinary, important, mo, mi)


def join_salient(sp: SalientPairs) -> np.ndarray:
    """Pairs → the value each weight decodes to, as bf16 patterns (``uint16``)."""
    codes = np.asarray(sp.pairs.codes, dtype=np.int64)
    extra = np.asarray(sp.pairs.extra).astype(np.int64)
    no = sp.ordinary.size
    if codes.size and int(codes.max()) >= no + sp.important.size:
        raise PairFormatError(f"salient code {int(codes.max())} is outside the {no + sp.important.size} codes")
    imp = codes >= no
    m = np.where(imp, sp.important_mantissa_bits, sp.ordinary_mantissa_bits)
    table = np.concatenate([sp.ordinary, sp.important]).astype(np.int64)
    e = table[codes] if codes.size else codes
    sign = extra >> m
    frac = (extra & ((np.int64(1) << m) - 1)) << (7 - m)
    return ((sign << 15) | (e << 7) | frac).astype(np.uint16)


def code_bits(pairs: IntegerPairs) -> float:
    """``sum -log2 p(code)`` plus the additional data of ``pairs``, in bits."""
    c = pairs.counts()
    nz = c[c > 0].astype(np.float64)
    return float(-(nz * np.log2(nz / nz.sum())).sum()) + pairs.extra_bits_total() if nz.size else 0.0


def outlier_store_bits(bf16_bits: np.ndarray, mask: np.ndarray, ordinary_mantissa_bits: int = 3) -> float:
    """Bits of the separate-store alternative: every weight as an ordinary E8Mm pair (entropy-coded
    exponent) plus, per important weight, its position (``ceil(log2 n)`` bits) and its bf16 value (16)."""
    everyone = split_salient(bf16_bits, np.zeros(np.shape(bf16_bits), dtype=bool), ordinary_mantissa_bits)
    n = int(np.size(bf16_bits))
    k = int(np.count_nonzero(mask))
    return code_bits(everyone.pairs) + k * (max(1, (n - 1).bit_length()) + 16)
