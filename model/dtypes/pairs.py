"""Coding pairs for IEEE-style floats (paper §2, Fig. 2; §3.1).

A float becomes a *coding pair*: a **code**, the index of its biased exponent field in the matrix's
table of exponents that occur, which is entropy-coded; and **additional data**, the sign and mantissa
bits, kept raw. The exponent field is taken as a bit pattern, so ±0, subnormals (exponent field 0),
±Inf and every NaN payload (exponent field all ones) are ordinary pairs and round-trip exactly.

Additional-data layout (``E`` exponent bits, ``M`` mantissa bits, width ``M + 1``)::

    extra = sign << M | mantissa        # sign is the most significant bit of the additional data

================  ===  ===  ===========  ==================
format            E    M    extra bits   storage
================  ===  ===  ===========  ==================
``bf16``          8    7    8            uint16 bit pattern
``fp16``          5    10   11           float16 / uint16
``fp32``          8    23   24           float32 / uint32
================  ===  ===  ===========  ==================

Conversions between these types are explicit functions (:func:`convert`) that report whether they lose
information; coding itself is always lossless for the tensor actually coded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, PairFormatError

__all__ = [
    "CodingPairs",
    "IeeeFloatPairs",
    "BF16",
    "FP16",
    "FP32",
    "PAIR_FORMATS",
    "Conversion",
    "fp32_to_bf16_rne",
    "convert",
]


@dataclass(frozen=True, eq=False)
class CodingPairs:
    """A tensor as coding pairs, in the tensor's flat (row-major) order.

    Attributes
    ----------
    codes : ndarray of uint8
        Code of each value, ``0 <= code < len(exponents)``.
    extra : ndarray of uint16 or uint32
        Additional data of each value, right-aligned, ``extra < 2**extra_bits_per_code[code]``.
    extra_bits_per_code : ndarray of uint8
        Width in bits of the additional data of each code.
    exponents : ndarray of uint16
        The code→exponent table: biased exponent field of each code, strictly increasing.
    shape : tuple of int
        Shape of the tensor the pairs came from.
    """

    codes: np.ndarray
    extra: np.ndarray
    extra_bits_per_code: np.ndarray
    exponents: np.ndarray
    shape: tuple[int, ...] = field(default=())

    @property
    def n_codes(self) -> int:
        return int(self.exponents.size)

    def counts(self) -> np.ndarray:
        """Occurrences of each code, ``int64`` of length :attr:`n_codes`."""
        return np.bincount(self.codes, minlength=self.n_codes).astype(np.int64)

    def extra_bits_total(self) -> int:
        """Total additional-data bits of the tensor."""
        return int(self.counts() @ self.extra_bits_per_code.astype(np.int64))


@dataclass(frozen=True)
class IeeeFloatPairs:
    """Coding-pair format of a binary float with ``exponent_bits`` and ``mantissa_bits`` (plus sign).

    ``split`` accepts the stored values (a float array of matching width) or their unsigned bit
    patterns; ``join`` returns bit patterns of :attr:`bits_dtype`. ``join(split(x))`` equals the bit
    patterns of ``x`` for every input, including NaN payloads.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int

    @property
    def total_bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def extra_bits(self) -> int:
        return 1 + self.mantissa_bits

    @property
    def bits_dtype(self) -> np.dtype:
        return np.dtype(np.uint16) if self.total_bits <= 16 else np.dtype(np.uint32)

    def as_bits(self, values: np.ndarray) -> np.ndarray:
        """Values of this format (floats of its width, or unsigned bit patterns that fit) as its bit
        patterns (:attr:`bits_dtype`), a view where possible; anything else raises :class:`PairFormatError`."""
        values = np.asarray(values)
        if values.dtype.kind == "f":
            if values.dtype.itemsize * 8 != self.total_bits:
                raise PairFormatError(
                    f"{self.name} pairs need {self.total_bits}-bit values, got dtype {values.dtype}"
                    + (" (bf16 tensors are passed as uint16 bit patterns)" if self.name == "bf16" else "")
                )
            return values.view(self.bits_dtype)
        if values.dtype.kind != "u" or values.dtype.itemsize * 8 < self.total_bits:
            raise PairFormatError(f"{self.name} pairs need unsigned bit patterns, got dtype {values.dtype}")
        if values.dtype.itemsize * 8 > self.total_bits and values.size and int(values.max()) >> self.total_bits:
            raise PairFormatError(f"{self.name} bit patterns must fit in {self.total_bits} bits")
        return values.astype(self.bits_dtype, copy=False)

    def exponent_field(self, values: np.ndarray) -> np.ndarray:
        """Biased exponent field of each value (``uint16``)."""
        bits = self.as_bits(values)
        return ((bits >> self.mantissa_bits) & ((1 << self.exponent_bits) - 1)).astype(np.uint16)

    def exponent_histogram(self, values: np.ndarray) -> np.ndarray:
        """Occurrences of every exponent field value, ``int64`` of length ``2**exponent_bits``."""
        exps = self.exponent_field(values).ravel()
        return np.bincount(exps, minlength=1 << self.exponent_bits).astype(np.int64)

    def split(self, values: np.ndarray, exponents: np.ndarray | None = None) -> CodingPairs:
        """Split values into coding pairs.

        Parameters
        ----------
        values
            Stored values or their bit patterns.
        exponents
            The code→exponent table to use (strictly increasing exponent fields). ``None`` builds the
            table of the exponents that occur in ``values``; a given table lets a tensor be split chunk
            by chunk with one table, and every exponent that occurs must be in it.
        """
        bits = self.as_bits(values)
        shape = tuple(bits.shape)
        flat = bits.ravel()
        m, dt = self.mantissa_bits, self.bits_dtype.type
        exps = (flat >> dt(m)) & dt((1 << self.exponent_bits) - 1)
        hist = np.bincount(exps, minlength=1 << self.exponent_bits)
        if exponents is None:
            exponents = np.flatnonzero(hist).astype(np.uint16)
        else:
            exponents = np.asarray(exponents, dtype=np.uint16)
            if exponents.size == 0 or np.any(np.diff(exponents.astype(np.int64)) <= 0) or \
                    int(exponents[-1]) >> self.exponent_bits:
                raise PairFormatError(
                    f"code→exponent table must be strictly increasing {self.exponent_bits}-bit fields")
            outside = hist.copy()
            outside[exponents] = 0
            if outside.any():
                raise PairFormatError(
                    f"exponent field {int(np.flatnonzero(outside)[0])} occurs but is not in the code table")
        code_dtype = np.uint8 if exponents.size <= 256 else np.uint16
        lut = np.zeros(1 << self.exponent_bits, dtype=code_dtype)
        lut[exponents] = np.arange(exponents.size, dtype=code_dtype)
        codes = lut[exps]
        extra = ((flat >> dt(self.total_bits - 1)) << dt(m)) | (flat & dt((1 << m) - 1))
        widths = np.full(exponents.size, self.extra_bits, dtype=np.uint8)
        return CodingPairs(codes, extra, widths, exponents, shape)

    def join(self, pairs: CodingPairs) -> np.ndarray:
        """Exact inverse of :meth:`split`: bit patterns of :attr:`bits_dtype`, in ``pairs.shape``."""
        codes = np.asarray(pairs.codes).ravel()
        extra = np.asarray(pairs.extra).ravel()
        exponents = np.asarray(pairs.exponents)
        if codes.size != extra.size:
            raise PairFormatError(f"{codes.size} codes but {extra.size} additional-data values")
        if exponents.size and int(exponents.max()) >> self.exponent_bits:
            raise PairFormatError(
                f"code→exponent table holds {int(exponents.max())}, which does not fit {self.exponent_bits} bits"
            )
        if codes.size and int(codes.max()) >= exponents.size:
            raise PairFormatError(f"code {int(codes.max())} is outside the {exponents.size}-entry exponent table")
        if extra.size and int(extra.max()) >> self.extra_bits:
            raise PairFormatError(f"additional data {int(extra.max())} does not fit {self.extra_bits} bits")
        m = self.mantissa_bits
        dt = self.bits_dtype.type
        e = exponents.astype(self.bits_dtype)[codes]
        sign = (extra >> m).astype(self.bits_dtype)
        out = (sign << dt(self.total_bits - 1)) | (e << dt(m)) | (extra & ((1 << m) - 1)).astype(self.bits_dtype)
        shape = pairs.shape if pairs.shape and int(np.prod(pairs.shape)) == out.size else out.shape
        return out.reshape(shape)


BF16 = IeeeFloatPairs("bf16", 8, 7)
FP16 = IeeeFloatPairs("fp16", 5, 10)
FP32 = IeeeFloatPairs("fp32", 8, 23)

#: Pair formats by name, as the command line spells them.
PAIR_FORMATS: dict[str, IeeeFloatPairs] = {f.name: f for f in (BF16, FP16, FP32)}

# Storage dtype of a checkpoint tensor → the pair format that codes it without conversion.
_NATIVE = {"F32": "fp32", "F16": "fp16", "BF16": "bf16"}


def fp32_to_bf16_rne(values: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 bit patterns, round-to-nearest-even.

    Finite values round to nearest, ties to even (values beyond the bf16 range round to ±Inf, as
    IEEE rounding requires). NaNs stay NaN with the sign and the top 7 payload bits kept; a NaN whose
    kept payload would be zero gets the quiet bit, so it never turns into Inf.

    Returns
    -------
    ndarray of uint16
        bf16 bit patterns, same shape.
    """
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    out = (rounded >> np.uint32(16)).astype(np.uint16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        truncated = (bits[nan] >> np.uint32(16)).astype(np.uint16)
        out[nan] = truncated | np.uint16(0x0040)
    return out


@dataclass(frozen=True)
class Conversion:
    """What converting a stored tensor to a pair format did.

    ``lossy`` is a property of the conversion (a narrowing one); ``changed`` counts the values whose
    value actually changed (NaNs count as unchanged when they stay NaN).
    """

    source: str
    target: str
    lossy: bool
    changed: int
    nonfinite: int

    def describe(self) -> str:
        if self.source == self.target:
            return f"{self.target} as stored (no conversion)"
        if not self.lossy:
            return f"{self.source} widened exactly to {self.target}"
        return (f"{self.source} rounded to {self.target} (round-to-nearest-even, lossy: "
                f"{self.changed} values changed)")


def convert(array: np.ndarray, dtype: str, target: str) -> tuple[np.ndarray, Conversion]:
    """Convert a stored tensor (see :class:`~ansforge.model.llm.checkpoint.TensorRecord`) to a pair format.

    Parameters
    ----------
    array
        Stored values: float32 for ``F32``, float16 for ``F16``, uint16 bit patterns for ``BF16``.
    dtype
        ``"F32"``, ``"F16"`` or ``"BF16"``.
    target
        ``"bf16"``, ``"fp16"`` or ``"fp32"``.

    Returns
    -------
    bits, conversion
        Bit patterns in the target format (``uint16``/``uint32``) and a :class:`Conversion` report.
    """
    if target not in PAIR_FORMATS:
        raise ConfigError(f"pair format must be one of {', '.join(PAIR_FORMATS)}, not {target!r}")
    if dtype not in _NATIVE:
        raise ConfigError(f"cannot convert stored dtype {dtype!r} (expected F32, F16 or BF16)")
    source = _NATIVE[dtype]
    a = np.asarray(array)
    if source == target:
        bits = PAIR_FORMATS[target].as_bits(a)
        nonfinite = int(np.count_nonzero(PAIR_FORMATS[target].exponent_field(bits) == (1 << PAIR_FORMATS[target].exponent_bits) - 1))
        return bits, Conversion(source, target, False, 0, nonfinite)
    if source == "bf16":
        as32 = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    else:
        as32 = a.astype(np.float32)  # fp16 → fp32 is exact
    if target == "fp32":
        bits = as32.view(np.uint32)
        conv = Conversion(source, target, False, 0, int(np.count_nonzero(~np.isfinite(as32))))
        return bits, conv
    if target == "bf16":
        bits = fp32_to_bf16_rne(as32)
        back = (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    else:
        with np.errstate(over="ignore"):
            half = as32.astype(np.float16)  # NumPy rounds float32 → float16 to nearest even
        bits = half.view(np.uint16)
        back = half.astype(np.float32)
    same = (back == as32) | (np.isnan(back) & np.isnan(as32))
    # +0 and -0 compare equal but differ in the sign bit; compare bit patterns for zeros.
    zeros = (as32 == 0)
    if zeros.any():
        same[zeros] = np.signbit(back[zeros]) == np.signbit(as32[zeros])
    changed = int(same.size - np.count_nonzero(same))
    nonfinite = int(np.count_nonzero(~np.isfinite(back)))
    return bits, Conversion(source, target, True, changed, nonfinite)
