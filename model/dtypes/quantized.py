"""Already-quantized tensors as coding pairs: fp8 (OCP E4M3 / E5M2) and GGUF Q4_0 blocks.

fp8
---
An fp8 value is a binary float like bf16, so its coding pair is the one of Fig. 2
(:class:`~ansforge.model.dtypes.pairs.IeeeFloatPairs`): **code** = the exponent field through the
tensor's code→exponent table, **additional data** = sign and mantissa (E4M3: 4 bits, E5M2: 3 bits).
The bit patterns are taken as they are, so every pattern (E4M3's NaN S.1111.111, E5M2's Inf/NaN)
round-trips exactly. Storage: one byte per value, safetensors ``F8_E4M3`` / ``F8_E5M2``.

:func:`to_fp8` produces fp8 from a float checkpoint with a **per-tensor scale**: ``s = absmax /
max_finite`` (absmax over the tensor's finite values; 448 for E4M3, 57344 for E5M2; ``s = 1`` for an
all-zero tensor), then ``fp8 = RNE_satfinite(float32(x / s))`` with the OCP rules of
:class:`~ansforge.model.dtypes.custom_float.MinifloatFormat`. The dequantized weight is ``fp8 × s``,
the convention of fp8 checkpoints served by vLLM (``weight`` in F8_E4M3 beside a float32
``weight_scale``). The division rounds once to float32 and the fp8 rounding once more (as
``(x / s).to(float8)`` does in PyTorch).

Q4_0
----
A GGUF Q4_0 block is 18 bytes for 32 weights: an fp16 scale ``d`` then 16 bytes ``qs``; weight ``j``
of the block is ``(q_j - 8) · d`` with ``q_j = qs[j] & 15`` for ``j < 16`` and ``qs[j - 16] >> 4``
otherwise. :func:`q4_0_split` gives the ``q`` in weight order (one byte each, 0..15) and the scales'
fp16 bit patterns; :func:`q4_0_join` is its exact inverse. The ``q`` are coded as pairs of
:data:`Q4_0_VALUES` (code = the 4-bit value through the tensor's table of values that occur, no
additional data); the scales as pairs of :data:`Q4_0_SCALES`: code = the fp16 exponent field with the
top 3 mantissa bits (8 bits, through the tensor's table), additional data = sign and the low 7 mantissa
bits — bf16's layout laid over the fp16 pattern, so that every pair fits the paper core's 8 extra bits
(plain fp16 pairs would need 11) and the code also carries the mantissa bits that are not uniform
(MiniLM: 11.77 bits per scale ideal against 12.17 for exponent-only codes; ≤ 46 codes per tensor).

Hardware
--------
Each layout is a :class:`~ansforge.model.dtypes.layout.CodeLayout` (:func:`layout`) within the paper
cores' limits (≤ 64 codes, ≤ 8 additional-data bits; :data:`PAPER_CORE_LIMITS`); for the Q4_0 scales
the codes are those a tensor's table holds (≤ 64 with the tANS/rANS tables' escapes beyond). A decoder core emits ``{symbol, extra}``; the §4.3
interface core :class:`~ansforge.hdl.interfaces.PairToFloat` turns an fp8 pair into the value: its LUT
entry for the code holds the exponent field, the additional data's top bit
is the sign and the rest the mantissa; built with an fp8 ``target`` it outputs the fp8 bit patterns
exactly (:func:`pair_to_float_format`, checked in the Amaranth simulator on all 256 patterns, with the
paper core's 64 codes and 8 extra bits). The scales' pairs come out of the same core built for bf16
(``CodingPairFormat.ieee("bf16", table)`` reproduces the 16-bit pattern, here an fp16 scale). A Q4_0 ``q`` needs no LUT arithmetic at all: the code table's
direct mapping gives the 4-bit value, and ``(q - 8) · d`` is one small multiply per weight with ``d``
held for 32 pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, PairFormatError
from .custom_float import MINIFLOATS
from .layout import CodeLayout, CodeSet
from .pairs import CodingPairs, Conversion, IeeeFloatPairs

__all__ = ["FP8_FORMATS", "FP8_STORAGE", "IntegerPairs", "Q4_0_VALUES", "Q4_0_BLOCK", "Q4_0_BLOCK_BYTES",
           "Q4_0_SCALES", "Fp8Conversion", "to_fp8", "q4_0_split", "q4_0_join", "layout", "PAPER_CORE_LIMITS", "pair_to_float_format"]

#: fp8 pair formats by the name ``--pairs`` uses; code = exponent field, extra = sign + mantissa.
FP8_FORMATS: dict[str, IeeeFloatPairs] = {n: MINIFLOATS[n].pairs for n in ("e4m3", "e5m2")}
#: safetensors dtype ↔ fp8 pair format.
FP8_STORAGE: dict[str, str] = {"F8_E4M3": "e4m3", "F8_E5M2": "e5m2"}
Q4_0_BLOCK = 32        #: weights per Q4_0 block
Q4_0_BLOCK_BYTES = 18  #: bytes per Q4_0 block: fp16 scale + 16 bytes of nibbles
_CHUNK = 1 << 20  #: values :func:`to_fp8` rounds at once
#: (max codes, max additional-data bits) of the paper's decoder cores (§4, Table 3).
PAPER_CORE_LIMITS = (64, 8)


@dataclass(frozen=True)
class IntegerPairs:
    """Pairs of ``bits``-bit unsigned integers with no additional data: code = the value through the
    tensor's table of values that occur (``exponents`` in :class:`CodingPairs`, strictly increasing).

    It has the attributes of :class:`~ansforge.model.dtypes.pairs.IeeeFloatPairs` that the container
    reads (``exponent_bits`` = the value width, ``mantissa_bits = extra_bits = 0``), so a tensor of it
    is stored, checked and decoded like a float tensor. Values are ``uint8``.
    """

    name: str
    bits: int

    @property
    def exponent_bits(self) -> int:
        return self.bits

    mantissa_bits = 0
    extra_bits = 0

    @property
    def total_bits(self) -> int:
        return self.bits

    @property
    def bits_dtype(self) -> np.dtype:
        return np.dtype(np.uint8)

    def split(self, values: np.ndarray) -> CodingPairs:
        v = np.asarray(values)
        if v.dtype.kind != "u" or (v.size and int(v.max()) >> self.bits):
            raise PairFormatError(f"{self.name} pairs need unsigned {self.bits}-bit values")
        hist = np.bincount(v.ravel(), minlength=1 << self.bits)
        table = np.flatnonzero(hist).astype(np.uint16)
        lut = np.zeros(1 << self.bits, np.uint8)
        lut[table] = np.arange(table.size, dtype=np.uint8)
        return CodingPairs(lut[v.ravel()], np.zeros(v.size, np.uint32), np.zeros(table.size, np.uint8), table,
                           tuple(v.shape))

    def join(self, pairs: CodingPairs) -> np.ndarray:
        codes = np.asarray(pairs.codes).ravel()
        table = np.asarray(pairs.exponents)
        if codes.size and int(codes.max()) >= table.size:
            raise PairFormatError(f"code {int(codes.max())} is outside the {table.size}-entry value table")
        return table.astype(np.uint8)[codes]


#: Q4_0's 4-bit values as pairs.
Q4_0_VALUES = IntegerPairs("q4_0", 4)
#: Q4_0's fp16 block scales as pairs: the 16-bit pattern split as bf16 is (code = bits 14..7: the fp16
#: exponent field and top 3 mantissa bits; additional data = sign and bits 6..0), module docstring.
Q4_0_SCALES = IeeeFloatPairs("q4_0_scale", 8, 7)


@dataclass(frozen=True)
class Fp8Conversion(Conversion):
    """A :class:`Conversion` to fp8 with a per-tensor scale: the scale and the error of ``fp8 × scale``
    against the source (``rel_rmse`` = ‖w' − w‖₂ / ‖w‖₂, ``max_abs_error`` in the weights' units)."""

    scale: float = 1.0
    rel_rmse: float = 0.0
    max_abs_error: float = 0.0

    def describe(self) -> str:
        return (f"{self.source} scaled by 1/{self.scale:.6g} (absmax → max finite) and rounded to {self.target} "
                f"(OCP satfinite, round-to-nearest-even, lossy: {self.changed} values changed, "
                f"relative RMS error {self.rel_rmse:.3e}, max |error| {self.max_abs_error:.3e})")


def _as_float32(array: np.ndarray, dtype: str) -> np.ndarray:
    a = np.asarray(array)
    if dtype == "BF16":
        return (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    if dtype in ("F16", "F32"):
        return a.astype(np.float32)
    raise ConfigError(f"cannot convert stored dtype {dtype!r} to fp8 (expected F32, F16 or BF16)")


def to_fp8(array: np.ndarray, dtype: str, target: str) -> tuple[np.ndarray, Fp8Conversion]:
    """A stored float tensor (``F32``/``F16``/``BF16`` as :func:`~ansforge.model.dtypes.pairs.convert`
    takes it) → fp8 bit patterns (``uint8``) with a per-tensor scale (module docstring), and the report.

    ``scale`` is a float32 value (returned as a Python float, exactly); dequantize as ``fp8 × scale``.
    """
    if target not in FP8_FORMATS:
        raise ConfigError(f"fp8 format must be one of {', '.join(FP8_FORMATS)}, not {target!r}")
    fmt = MINIFLOATS[target]
    x = _as_float32(array, dtype)
    finite = np.isfinite(x)
    absmax = float(np.abs(x[finite]).max()) if finite.any() else 0.0
    scale = np.float32(absmax / fmt.max_finite) if absmax > 0 else np.float32(1.0)
    if not np.isfinite(scale) or scale == 0:  # absmax below max_finite · 2**-149: keep the values unscaled
        scale = np.float32(1.0)
    flat = x.reshape(-1)
    bits = np.empty(flat.size, np.uint8)
    changed, sq_err, sq_norm, max_err = 0, 0.0, 0.0, 0.0
    for lo in range(0, flat.size, _CHUNK):  # chunks: from_float's float64 temporaries stay small
        xc = flat[lo:lo + _CHUNK]
        with np.errstate(over="ignore", invalid="ignore"):
            y = xc / scale  # float32 ÷ float32: one rounding
        b = fmt.from_float(y).astype(np.uint8)
        bits[lo:lo + xc.size] = b
        back = fmt.to_float64(b) * float(scale)
        xs = xc.astype(np.float64)
        ok = np.isfinite(xs) & np.isfinite(back)
        err = np.where(ok, back - xs, 0.0)
        same = (back == xs) | (np.isnan(back) & np.isnan(xs))
        zeros = xs == 0
        if zeros.any():
            same[zeros] = (back[zeros] == 0) & (np.signbit(back[zeros]) == np.signbit(xs[zeros]))
        changed += int(same.size - np.count_nonzero(same))
        sq_err += float(np.sum(err ** 2))
        sq_norm += float(np.sum(np.where(ok, xs, 0.0) ** 2))
        max_err = max(max_err, float(np.abs(err).max()) if err.size else 0.0)
    src = {"F32": "fp32", "F16": "fp16", "BF16": "bf16"}[dtype]
    conv = Fp8Conversion(src, target, True, changed, int(np.count_nonzero(~finite)), float(scale),
                         float(np.sqrt(sq_err / sq_norm)) if sq_norm else 0.0, max_err)
    bits = bits.reshape(x.shape)
    return bits, conv


def q4_0_split(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 data (``uint8``, 18 bytes per block, any shape) → ``(q, d)``: the 4-bit values in weight
    order (``uint8``, 32 per block) and the blocks' fp16 scales as bit patterns (``uint16``)."""
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1)
    if b.size % Q4_0_BLOCK_BYTES:
        raise PairFormatError(f"Q4_0 data of {b.size} bytes is not a whole number of {Q4_0_BLOCK_BYTES}-byte blocks")
    b = b.reshape(-1, Q4_0_BLOCK_BYTES)
    d = np.ascontiguousarray(b[:, :2]).view("<u2").ravel().astype(np.uint16)
    qs = b[:, 2:]
    q = np.concatenate([qs & np.uint8(15), qs >> np.uint8(4)], axis=1)  # weights 0..15 low nibbles, 16..31 high
    return q.ravel(), d


def q4_0_join(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Exact inverse of :func:`q4_0_split`: the Q4_0 bytes (``uint8``, 18 per block)."""
    q = np.asarray(q, dtype=np.uint8).reshape(-1, Q4_0_BLOCK)
    d = np.asarray(d, dtype=np.uint16).ravel()
    if q.shape[0] != d.size:
        raise PairFormatError(f"{q.shape[0]} Q4_0 blocks of values but {d.size} scales")
    out = np.empty((d.size, Q4_0_BLOCK_BYTES), np.uint8)
    out[:, :2] = d.astype("<u2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = (q[:, :16] & np.uint8(15)) | (q[:, 16:] << np.uint8(4))
    return out.ravel()


def layout(name: str, n_codes: int | None = None) -> CodeLayout:
    """The :class:`CodeLayout` of a container pair format (``e4m3``, ``e5m2``, ``q4_0``,
    ``q4_0_scale``): the codes a core's LUT spans and the additional-data width of each. fp8 and Q4_0
    span every exponent field / 4-bit value; ``q4_0_scale`` the ``n_codes`` of a tensor's table
    (default: all 256 code fields)."""
    if name in FP8_FORMATS:
        f = FP8_FORMATS[name]
        return CodeLayout(f"fp8 {name}", [CodeSet("exponent", 0, (f.extra_bits,) * (1 << f.exponent_bits))])
    if name == "q4_0":
        return CodeLayout("q4_0", [CodeSet("value", 0, (0,) * 16)])
    if name == "q4_0_scale":
        n = 1 << Q4_0_SCALES.exponent_bits if n_codes is None else n_codes
        return CodeLayout("q4_0_scale", [CodeSet("exponent and top mantissa bits", 0, (Q4_0_SCALES.extra_bits,) * n)])
    raise ConfigError(f"no layout for pair format {name!r} (expected e4m3, e5m2, q4_0 or q4_0_scale)")


def pair_to_float_format(name: str, exponents) -> "CodingPairFormat":
    """The :class:`~ansforge.model.dtypes.interfaces.CodingPairFormat` that configures
    :class:`~ansforge.hdl.interfaces.PairToFloat` to turn an fp8 tensor's pairs (``exponents``: its
    code→exponent table) back into the fp8 bit patterns: build the core with ``target =
    FP8_FORMATS[name]`` (8-bit output). Code ``i`` carries exponent field ``exponents[i]`` (field 0: the
    subnormals, no hidden bit); the additional data's top bit is the sign, the rest the mantissa,
    passed through unshifted. The all-ones field is a "special" code, whose mantissa also passes
    through: E5M2's Inf/NaN and E4M3's top binade (256..448 and its NaN S.1111.111) come out bit-exact.

    Widening to bf16/fp16 in the same core is not possible for the subnormals (field 0), whose
    significand ``0.f`` would need normalizing; the core produces fp8 and a bf16 datapath widens it.
    """
    from .interfaces import CodingPairFormat

    if name not in FP8_FORMATS:
        raise ConfigError(f"fp8 format must be one of {', '.join(FP8_FORMATS)}, not {name!r}")
    return CodingPairFormat.ieee(FP8_FORMATS[name], exponents)
