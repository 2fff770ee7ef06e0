"""Coding pairs to and from the numbers a processor computes with (paper §4.3, Figs. 9–11).

This module is the golden model of the four interface cores of :mod:`ansforge.hdl.interfaces`. A
:class:`CodingPairFormat` says what each code *means*; from it, the table classes below compute the
per-code LUT entries that the cores hold, and their ``apply`` methods are the cores' arithmetic, value
for value. Every table also produces the ``cfg`` write sequence of its programmable core.

What a code means (:class:`PairCode`), with ``m`` mantissa bits and additional data ``extra``::

    kind "float"    value = (-1)**s * (hidden + f / 2**m) * 2**exponent
                    extra = s << m | f                 (m + 1 bits: the sign is its top bit)
    kind "special"  an IEEE Inf/NaN code: target exponent field all ones, payload f padded/truncated
    kind "direct"   value = the code's own value (Fig. 11), times (-1)**s when ``signed``
                    extra = s (1 bit) when signed, else no bits

``hidden`` = 0 describes an IEEE subnormal code (exponent field 0, ``exponent`` = the format's
``emin``) and, with ``exponent`` = 0, the zero code of the integers of §3.3.

Behaviour at the edges, shared by model and hardware:

* **PairToFloat** never rounds (the paper rounds on the compress side): a mantissa wider than the
  target's is truncated. A code whose exponent is above the target's largest finite exponent
  **saturates** to ±(largest finite value) (``overflow="saturate"``, the default) or gives ±Inf
  (``overflow="inf"``). A code below the target's normal range **underflows gradually**: the
  significand is shifted into the target's subnormal field and truncated, down to ±0
  (``underflow="flush"`` flushes every such code to ±0 instead).
* **PairToFixed** truncates toward zero (the magnitude is shifted, then negated) and saturates to
  the largest positive / most negative word. Inf and NaN codes saturate.
* **FloatToPair** and **FixedToPair** round the mantissa to nearest, ties to even, to the width of
  the value's own code; a carry out of the mantissa moves the value to the next exponent's code with
  a zero mantissa. A value whose exponent (after the carry) has no code is a *miss*: the core flags
  the pair, the model raises.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, PairFormatError
from .pairs import BF16, FP16, FP32, IeeeFloatPairs

__all__ = ["PairCode", "CodingPairFormat", "FixedFormat", "PairToFloatTable", "PairToFixedTable",
           "FloatToPairTable", "FixedToPairTable", "float_format", "FLOAT_TARGETS", "exact_values"]

#: Float formats an interface core can produce or take.
FLOAT_TARGETS: dict[str, IeeeFloatPairs] = {f.name: f for f in (BF16, FP16, FP32)}

_KINDS = ("float", "special", "direct")
_MAX_EXTRA = 32


def float_format(name_or_format) -> IeeeFloatPairs:
    """``"bf16"``, ``"fp16"``, ``"fp32"`` or an :class:`~ansforge.model.dtypes.pairs.IeeeFloatPairs`."""
    if isinstance(name_or_format, IeeeFloatPairs):
        return name_or_format
    if name_or_format not in FLOAT_TARGETS:
        raise ConfigError(f"float format must be one of {', '.join(FLOAT_TARGETS)}, not {name_or_format!r}")
    return FLOAT_TARGETS[name_or_format]


def _bias(fmt: IeeeFloatPairs) -> int:
    return (1 << (fmt.exponent_bits - 1)) - 1


def _int(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise ConfigError(f"{name} must be between {lo} and {hi}, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class PairCode:
    """Meaning of one code (see the module docstring).

    Attributes
    ----------
    kind : str
        ``"float"``, ``"special"`` or ``"direct"``.
    exponent : int
        Unbiased exponent of a float code (``-1022 .. 1023``).
    mantissa_bits : int
        ``m``: mantissa bits in the additional data of a float/special code (0..31).
    hidden : int
        1 for a normal significand ``1.f``, 0 for ``0.f`` (subnormals, the zero code).
    value : float
        A direct code's value (exactly representable in the target of the table that uses it).
    signed : bool
        A direct code takes its sign from one bit of additional data.
    """

    kind: str = "float"
    exponent: int = 0
    mantissa_bits: int = 0
    hidden: int = 1
    value: float = 0.0
    signed: bool = False

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ConfigError(f"code kind must be one of {', '.join(_KINDS)}, not {self.kind!r}")
        _int("exponent", self.exponent, -1022, 1023)
        _int("mantissa_bits", self.mantissa_bits, 0, _MAX_EXTRA - 1)
        if self.hidden not in (0, 1):
            raise ConfigError(f"hidden must be 0 or 1, not {self.hidden!r}")
        if self.kind == "direct" and not np.isfinite(self.value):
            raise ConfigError(f"a direct code's value must be finite, not {self.value!r}")

    @property
    def extra_bits(self) -> int:
        """Width of the code's additional data."""
        if self.kind == "direct":
            return int(self.signed)
        return self.mantissa_bits + 1


@dataclass(frozen=True)
class CodingPairFormat:
    """What every code of a coding-pair format means: the configuration of the interface cores."""

    codes: tuple[PairCode, ...]

    def __post_init__(self) -> None:
        if not 1 <= len(self.codes) <= 4096:
            raise ConfigError(f"a coding-pair format needs 1 to 4096 codes, not {len(self.codes)}")

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def extra_bits(self) -> np.ndarray:
        """Additional-data width of each code (``uint8``)."""
        return np.array([c.extra_bits for c in self.codes], dtype=np.uint8)

    @classmethod
    def ieee(cls, fmt, exponents: Sequence[int], mantissa_bits: Sequence[int] | int | None = None) -> "CodingPairFormat":
        """The codes of an IEEE float format's pairs: code ``i`` is exponent field ``exponents[i]``
        (:meth:`~ansforge.model.dtypes.pairs.IeeeFloatPairs.split`'s table), with the format's full mantissa
        or ``mantissa_bits`` (per code, or one width for all: narrower custom floats such as E8M2)."""
        fmt = float_format(fmt)
        exps = [int(e) for e in np.asarray(exponents).ravel()]
        if mantissa_bits is None:
            mantissa_bits = fmt.mantissa_bits
        widths = [int(mantissa_bits)] * len(exps) if np.ndim(mantissa_bits) == 0 else [int(m) for m in mantissa_bits]
        if len(widths) != len(exps):
            raise ConfigError(f"{len(widths)} mantissa widths for {len(exps)} codes")
        top, bias = (1 << fmt.exponent_bits) - 1, _bias(fmt)
        codes = []
        for i, (f, m) in enumerate(zip(exps, widths)):
            _int(f"exponent field of code {i}", f, 0, top)
            if f == top:
                codes.append(PairCode("special", 0, m, 0))
            elif f == 0:
                codes.append(PairCode("float", 1 - bias, m, 0))
            else:
                codes.append(PairCode("float", f - bias, m, 1))
        return cls(tuple(codes))

    @classmethod
    def integers(cls, magnitude_bits: int) -> "CodingPairFormat":
        """The integers of §3.3 (Fig. 6): code 0 is zero (no additional data); code ``k`` holds
        ``2**(k-1) <= |v| < 2**k`` with ``k`` bits of additional data, the sign and the ``k - 1``
        bits below the most significant one. ``magnitude_bits`` = ``Nb``."""
        nb = _int("magnitude_bits", magnitude_bits, 1, _MAX_EXTRA - 1)
        return cls((PairCode("direct", value=0.0),) + tuple(PairCode("float", k - 1, k - 1, 1) for k in range(1, nb + 1)))

    def values(self, codes: np.ndarray, extra: np.ndarray) -> np.ndarray:
        """Exact value of each pair as float64 (±Inf/NaN for special codes)."""
        return exact_values(self, codes, extra)


def exact_values(fmt: CodingPairFormat, codes: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """Value of each pair of ``fmt`` in float64, computed from the definition (a reference for tests)."""
    codes = np.asarray(codes).astype(np.int64).ravel()
    extra = np.asarray(extra).astype(np.uint64).ravel()
    out = np.empty(codes.size)
    for c, pc in enumerate(fmt.codes):
        sel = codes == c
        if not sel.any():
            continue
        e = extra[sel]
        if pc.kind == "direct":
            sign = (e & np.uint64(1)).astype(np.float64) if pc.signed else 0.0
            out[sel] = pc.value * (1 - 2 * sign)
            continue
        m = pc.mantissa_bits
        sign = ((e >> np.uint64(m)) & np.uint64(1)).astype(np.float64)
        f = (e & np.uint64((1 << m) - 1)).astype(np.float64)
        if pc.kind == "special":
            out[sel] = np.where(f == 0, np.inf, np.nan) * (1 - 2 * sign)
        else:
            out[sel] = (1 - 2 * sign) * np.ldexp(pc.hidden + f / 2.0 ** m, pc.exponent)
    return out


def _check_pairs(fmt: CodingPairFormat, codes, extra) -> tuple[np.ndarray, np.ndarray]:
    codes = np.asarray(codes).ravel()
    extra = np.asarray(extra).ravel()
    if codes.size != extra.size:
        raise PairFormatError(f"{codes.size} codes but {extra.size} additional-data values")
    if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= len(fmt)):
        bad = int(codes[(codes < 0) | (codes >= len(fmt))][0])
        raise PairFormatError(f"code {bad} is outside the format's {len(fmt)} codes")
    codes = codes.astype(np.int64)
    extra = extra.astype(np.uint64)
    wide = extra >> fmt.extra_bits.astype(np.uint64)[codes]
    if wide.any():
        i = int(np.flatnonzero(wide)[0])
        raise PairFormatError(f"pair {i}: additional data {int(extra[i])} does not fit the "
                              f"{int(fmt.extra_bits[codes[i]])} bits of code {int(codes[i])}")
    return codes, extra


def _extra_width(fmt: CodingPairFormat, max_extra_bits: int | None) -> int:
    """The LUT's additional-data width: ``max_extra_bits``, or what the widest code needs."""
    need = int(fmt.extra_bits.max())
    width = need if max_extra_bits is None else _int("max_extra_bits", max_extra_bits, 1, _MAX_EXTRA)
    if need > width:
        raise ConfigError(f"code {int(np.argmax(fmt.extra_bits))} has {need} bits of additional data, more "
                          f"than max_extra_bits = {width}")
    return width


def _table_entry_arrays(entries: list[dict], names: Sequence[str]) -> dict[str, np.ndarray]:
    return {n: np.array([e[n] for e in entries], dtype=np.int64) for n in names}


# ------------------------------------------------------------------------------------------------
# Decompress side: pairs → numbers (Figs. 9a, 10a, 11)


class PairToFloatTable:
    """The code→exponent LUT of :class:`~ansforge.hdl.interfaces.PairToFloat` (Fig. 9a, with Fig. 11).

    One entry per code, ``{direct, signed, sign_bit, hidden, shift, exp, value}``:

    * ``sign_bit``: position of the sign in the additional data; ``signed``: whether there is one.
    * a float code: significand ``sig = hidden << sign_bit | f``; the target mantissa field is the low
      ``M`` bits of ``(sig << M) >> shift`` and the exponent field ``exp``. ``shift = m`` in range;
      ``m + emin - e`` when the code underflows gradually (``exp`` = 0).
    * a direct code (Fig. 11), and a code that saturates: the target bits ``value``, with the sign bit
      OR-ed in from the additional data when ``signed``.

    ``shift`` saturates at :attr:`max_shift`, where every significand bit has left the field.
    """

    FIELDS = ("direct", "signed", "sign_bit", "hidden", "shift", "exp", "value")

    def __init__(self, fmt: CodingPairFormat, target="bf16", *, overflow: str = "saturate",
                 underflow: str = "gradual", max_extra_bits: int | None = None):
        self.format, self.target = fmt, float_format(target)
        if overflow not in ("saturate", "inf"):
            raise ConfigError(f"overflow must be 'saturate' or 'inf', not {overflow!r}")
        if underflow not in ("gradual", "flush"):
            raise ConfigError(f"underflow must be 'gradual' or 'flush', not {underflow!r}")
        self.overflow, self.underflow = overflow, underflow
        self.max_extra_bits = _extra_width(fmt, max_extra_bits)
        t = self.target
        E, M, bias = t.exponent_bits, t.mantissa_bits, _bias(t)
        self.max_shift = self.max_extra_bits + M
        emin, emax, top = 1 - bias, bias, (1 << E) - 1
        big = ((top - 1) << M | ((1 << M) - 1)) if overflow == "saturate" else top << M
        entries = []
        for c, pc in enumerate(fmt.codes):
            e = dict(direct=0, signed=1, sign_bit=pc.extra_bits - 1, hidden=pc.hidden, shift=pc.mantissa_bits,
                     exp=0, value=0)
            if pc.kind == "direct":
                e.update(direct=1, signed=int(pc.signed), sign_bit=0, hidden=0, shift=0,
                         value=self._direct_bits(c, pc.value))
            elif pc.kind == "special":
                e.update(hidden=0, exp=top)
            elif pc.exponent > emax:
                e.update(direct=1, hidden=0, shift=0, value=big)
            elif pc.hidden and pc.exponent >= emin:
                e.update(exp=pc.exponent + bias)
            else:
                if not pc.hidden and pc.exponent > emin:
                    raise ConfigError(
                        f"code {c}: a significand 0.f at exponent {pc.exponent} is a normal {t.name} number "
                        f"only after normalization, which PairToFloat does not do (emin of {t.name} is {emin})")
                shift = pc.mantissa_bits + emin - pc.exponent
                e.update(shift=self.max_shift if underflow == "flush" and pc.hidden else min(shift, self.max_shift))
            entries.append(e)
        self.entries = entries
        self.arrays = _table_entry_arrays(entries, self.FIELDS)

    def _direct_bits(self, code: int, value: float) -> int:
        t = self.target
        dt = {16: np.float16, 32: np.float32}.get(t.total_bits)
        if t.name == "bf16":
            bits = int(np.array([value], np.float32).view(np.uint32)[0]) >> 16
            back = float(np.array([bits << 16], np.uint32).view(np.float32)[0])
        else:
            # A value beyond the target's range casts to inf (NumPy warns); the check below names it.
            with np.errstate(over="ignore"):
                bits = int(np.array([value], dt).view(t.bits_dtype)[0])
                back = float(np.array([value], dt)[0])
        if back != value or not np.isfinite(back):
            raise ConfigError(f"code {code}: direct value {value!r} is not exactly representable in {t.name}")
        return bits

    def writes(self) -> list[dict]:
        """The ``cfg`` write sequence of the programmable core."""
        return [{"addr": c, "data": dict(e)} for c, e in enumerate(self.entries)]

    def apply(self, codes: np.ndarray, extra: np.ndarray) -> np.ndarray:
        """Target bit patterns (``uint16``/``uint32``) of the pairs: the core's output, value for value."""
        codes, extra = _check_pairs(self.format, codes, extra)
        a = {k: v[codes].astype(np.uint64) for k, v in self.arrays.items()}
        t = self.target
        M, top_bit = np.uint64(t.mantissa_bits), np.uint64(t.total_bits - 1)
        sign = (extra >> a["sign_bit"]) & a["signed"] & np.uint64(1)
        sig = (extra & ~(np.uint64(1) << a["sign_bit"])) | (a["hidden"] << a["sign_bit"])
        shift = a["shift"]
        aligned = np.where(shift >= np.uint64(64), np.uint64(0), (sig << M) >> np.minimum(shift, np.uint64(63)))
        mant = aligned & np.uint64((1 << t.mantissa_bits) - 1)
        floating = (a["exp"] << M) | mant
        out = np.where(a["direct"].astype(bool), a["value"], floating) | (sign << top_bit)
        return out.astype(t.bits_dtype)


@dataclass(frozen=True)
class FixedFormat:
    """A two's complement fixed-point word: ``width`` bits, ``frac_bits`` of them after the point."""

    width: int
    frac_bits: int = 0

    def __post_init__(self) -> None:
        _int("fixed width", self.width, 2, 32)
        _int("frac_bits", self.frac_bits, -64, 64)

    @property
    def lo(self) -> int:
        return -(1 << (self.width - 1))

    @property
    def hi(self) -> int:
        return (1 << (self.width - 1)) - 1

    def to_signed(self, words: np.ndarray) -> np.ndarray:
        """Unsigned ``width``-bit words as int64."""
        w = np.asarray(words).astype(np.int64)
        return np.where(w >> (self.width - 1) & 1, w - (1 << self.width), w)

    def to_words(self, ints: np.ndarray) -> np.ndarray:
        """int64 values in ``[lo, hi]`` as unsigned ``width``-bit words (``uint64``)."""
        return (np.asarray(ints).astype(np.int64) & ((1 << self.width) - 1)).astype(np.uint64)


class PairToFixedTable:
    """The LUT of :class:`~ansforge.hdl.interfaces.PairToFixed` (Fig. 10a, with Fig. 11).

    One entry per code, ``{direct, sat, signed, sign_bit, hidden, rshift, value}``. A float code's
    magnitude is ``(sig << L) >> rshift`` with ``L = width - 1`` and ``rshift = L - (e - m + frac)``
    (saturating at :attr:`max_shift`); it saturates when it exceeds the word's range. ``sat`` marks
    a code whose every value is out of range (and Inf/NaN codes); ``value`` is a direct code's word.
    """

    FIELDS = ("direct", "sat", "signed", "sign_bit", "hidden", "rshift", "value")

    def __init__(self, fmt: CodingPairFormat, fixed: FixedFormat, *, max_extra_bits: int | None = None):
        if not isinstance(fixed, FixedFormat):
            raise ConfigError(f"fixed must be a FixedFormat, not {fixed!r}")
        self.format, self.fixed = fmt, fixed
        self.max_extra_bits = _extra_width(fmt, max_extra_bits)
        L = fixed.width - 1
        self.max_shift = L + self.max_extra_bits + 1
        entries = []
        for c, pc in enumerate(fmt.codes):
            e = dict(direct=0, sat=0, signed=1, sign_bit=pc.extra_bits - 1, hidden=pc.hidden, rshift=0, value=0)
            if pc.kind == "direct":
                scaled = pc.value * 2.0 ** fixed.frac_bits
                if scaled != int(scaled) or not fixed.lo <= scaled <= fixed.hi or (pc.signed and -scaled < fixed.lo):
                    raise ConfigError(f"code {c}: direct value {pc.value!r} is not a {fixed.width}-bit fixed-point "
                                      f"value with {fixed.frac_bits} fraction bits")
                e.update(direct=1, signed=int(pc.signed), sign_bit=0, hidden=0,
                         value=int(scaled) & ((1 << fixed.width) - 1))
            elif pc.kind == "special" or (pc.hidden and pc.exponent + fixed.frac_bits > L) or \
                    L - (pc.exponent - pc.mantissa_bits + fixed.frac_bits) < 0:
                # every value of the code is beyond the word (or Inf/NaN): saturate
                e.update(sat=1, hidden=0)
            else:
                e.update(rshift=min(L - (pc.exponent - pc.mantissa_bits + fixed.frac_bits), self.max_shift))
            entries.append(e)
        self.entries = entries
        self.arrays = _table_entry_arrays(entries, self.FIELDS)

    def writes(self) -> list[dict]:
        return [{"addr": c, "data": dict(e)} for c, e in enumerate(self.entries)]

    def apply(self, codes: np.ndarray, extra: np.ndarray) -> np.ndarray:
        """Fixed-point words (``uint64``, ``width`` bits) of the pairs: the core's output."""
        codes, extra = _check_pairs(self.format, codes, extra)
        a = {k: v[codes] for k, v in self.arrays.items()}
        f = self.fixed
        sb = a["sign_bit"].astype(np.uint64)
        sign = ((extra >> sb) & np.uint64(1)).astype(np.int64) & a["signed"]
        sig = (extra & ~(np.uint64(1) << sb)) | (a["hidden"].astype(np.uint64) << sb)
        L = f.width - 1
        r = a["rshift"].astype(np.uint64)
        # sig < 2**32 and L < 32: sig << L fits 64 bits
        mag = np.where(r >= np.uint64(64), np.uint64(0), (sig << np.uint64(L)) >> np.minimum(r, np.uint64(63)))
        limit = np.where(sign == 1, np.uint64(1 << L), np.uint64((1 << L) - 1))
        over = (a["sat"] == 1) | (mag > limit)
        mag = np.where(over, limit, mag).astype(np.int64)
        val = np.where(sign == 1, -mag, mag)
        direct = a["value"]
        direct = np.where(direct >> L & 1, direct - (1 << f.width), direct)
        val = np.where(a["direct"] == 1, np.where(sign == 1, -direct, direct), val)
        return f.to_words(val)


# ------------------------------------------------------------------------------------------------
# Compress side: numbers → pairs, with rounding (Figs. 9b, 10b)


def _rne(frac: np.ndarray, have: np.ndarray, want: np.ndarray, hidden) -> tuple[np.ndarray, np.ndarray]:
    """``frac`` (``have`` bits below the ``hidden`` bit) rounded to ``want`` bits, to nearest, ties to
    even: (q, carry). Evenness is that of the whole significand: with ``want`` = 0 it is the hidden bit's."""
    frac, have, want = (np.asarray(x).astype(np.uint64) for x in (frac, have, want))
    drop = np.where(have > want, have - want, np.uint64(0))
    widen = np.where(want > have, want - have, np.uint64(0))
    q = (frac >> drop) << widen
    rem = frac & ((np.uint64(1) << drop) - np.uint64(1))
    half = np.where(drop > 0, np.uint64(1) << np.maximum(drop, np.uint64(1)) - np.uint64(1), np.uint64(0))
    odd = np.where(want == 0, np.asarray(hidden).astype(np.uint64), q & np.uint64(1)).astype(bool)
    up = (drop > 0) & ((rem > half) | ((rem == half) & odd))
    q = q + up.astype(np.uint64)
    carry = q >> want
    return np.where(carry.astype(bool), np.uint64(0), q), carry.astype(bool)


class _ToPairTable:
    """An exponent-indexed LUT of the compress side: ``{valid, code, bits}`` per index."""

    FIELDS = ("valid", "code", "bits")

    def writes(self) -> list[dict]:
        return [{"addr": i, "data": dict(e)} for i, e in enumerate(self.entries)]

    #: Entries that the index (plus a rounding carry) can reach; FixedToPair keeps its zero entry after them.
    reach: int = 0

    def _lookup(self, index: np.ndarray, frac: np.ndarray, have: np.ndarray, hidden, where: str):
        a = self.arrays
        valid = a["valid"][index].astype(bool)
        want = a["bits"][index]
        q, carry = _rne(frac, have, want, hidden)
        nxt = np.minimum(index + 1, self.reach - 1)
        index = np.where(carry, index + 1, index)
        inside = index < self.reach
        valid = np.where(carry, inside & a["valid"][nxt].astype(bool), valid)
        miss = ~valid
        if miss.any():
            i = int(np.flatnonzero(miss)[0])
            raise PairFormatError(f"value {i} ({where} {int(index[i])}{', after rounding' if carry[i] else ''}) "
                                  "has no code in the table")
        return a["code"][index], a["bits"][index], q


class FloatToPairTable(_ToPairTable):
    """The exponent→code LUT of :class:`~ansforge.hdl.interfaces.FloatToPair` (Fig. 9b).

    Indexed by the source format's exponent field; entry ``{valid, code, bits}`` with ``bits`` the
    code's mantissa width ``m``. Built from a :class:`CodingPairFormat` whose codes are the source
    format's exponent fields (a field with no code is a miss).
    """

    def __init__(self, fmt: CodingPairFormat, source="fp32"):
        self.format, self.source = fmt, float_format(source)
        s = self.source
        bias, top = _bias(s), (1 << s.exponent_bits) - 1
        entries = [dict(valid=0, code=0, bits=0) for _ in range(top + 1)]
        for c, pc in enumerate(fmt.codes):
            if pc.kind == "direct":
                raise ConfigError(f"code {c} is a direct code; FloatToPair maps exponents to codes")
            field = top if pc.kind == "special" else (pc.exponent + bias if pc.hidden else 0)
            if pc.kind == "float" and (not 0 <= field < top or (not pc.hidden and pc.exponent != 1 - bias)):
                raise ConfigError(f"code {c}: exponent {pc.exponent} is outside the {s.name} format")
            if entries[field]["valid"]:
                raise ConfigError(f"code {c}: exponent field {field} already has code {entries[field]['code']}")
            entries[field] = dict(valid=1, code=c, bits=pc.mantissa_bits)
        self.entries = entries
        self.reach = len(entries)
        self.arrays = _table_entry_arrays(entries, self.FIELDS)

    def apply(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes, extra) of the source values (float array or bit patterns), rounded RNE."""
        s = self.source
        bits = s.as_bits(values).ravel().astype(np.uint64)
        M = s.mantissa_bits
        field = ((bits >> np.uint64(M)) & np.uint64((1 << s.exponent_bits) - 1)).astype(np.int64)
        sign = bits >> np.uint64(s.total_bits - 1)
        frac = bits & np.uint64((1 << M) - 1)
        code, width, q = self._lookup(field, frac, np.full(field.size, M), field != 0, "exponent field")
        return code, (sign << width.astype(np.uint64)) | q


class FixedToPairTable(_ToPairTable):
    """The LUT of :class:`~ansforge.hdl.interfaces.FixedToPair` (Fig. 10b).

    Indexed by the position ``p`` of the magnitude's leading one (``0 .. width``; ``width`` is only
    reached by a rounding carry), entry ``{valid, code, bits}`` for the exponent ``p - frac_bits``;
    entry ``width + 1`` holds :attr:`zero_code`, the direct code of value 0 (its additional data is 0).
    """

    def __init__(self, fmt: CodingPairFormat, fixed: FixedFormat):
        if not isinstance(fixed, FixedFormat):
            raise ConfigError(f"fixed must be a FixedFormat, not {fixed!r}")
        self.format, self.fixed = fmt, fixed
        entries = [dict(valid=0, code=0, bits=0) for _ in range(fixed.width + 1)]
        self.zero_code = None
        for c, pc in enumerate(fmt.codes):
            if pc.kind == "direct":
                if pc.value == 0 and self.zero_code is None:
                    self.zero_code = c
                continue
            if pc.kind != "float" or not pc.hidden:
                continue
            p = pc.exponent + fixed.frac_bits
            if 0 <= p <= fixed.width and not entries[p]["valid"]:
                entries[p] = dict(valid=1, code=c, bits=pc.mantissa_bits)
        if self.zero_code is None:
            raise ConfigError("the format has no direct code of value 0, which FixedToPair needs for zero")
        self.reach = len(entries)
        entries.append(dict(valid=1, code=self.zero_code, bits=0))   # index width + 1: the zero code
        self.entries = entries
        self.arrays = _table_entry_arrays(entries, self.FIELDS)

    def apply(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes, extra) of fixed-point words (unsigned ``width``-bit patterns or signed ints)."""
        f = self.fixed
        w = np.asarray(words).ravel()
        v = f.to_signed(w) if w.dtype.kind == "u" else w.astype(np.int64)
        if v.size and (int(v.min()) < f.lo or int(v.max()) > f.hi):
            raise PairFormatError(f"value outside the {f.width}-bit fixed-point range")
        sign = (v < 0).astype(np.uint64)
        mag = np.abs(v).astype(np.uint64)
        zero = mag == 0
        p = np.zeros(v.size, np.int64)
        nz = ~zero
        p[nz] = np.floor(np.log2(mag[nz].astype(np.float64))).astype(np.int64)
        # float log2 may be off by one right at powers of two for wide words: fix up exactly
        p = np.where(nz & (mag >> p.astype(np.uint64) == 0), p - 1, p)
        p = np.where(nz & (mag >> p.astype(np.uint64) > 1), p + 1, p)
        frac = mag & ((np.uint64(1) << p.astype(np.uint64)) - np.uint64(1))
        idx = np.where(zero, 0, p)
        code, width, q = self._lookup(idx[nz], frac[nz], p[nz], 1, "leading-one position")
        codes = np.full(v.size, self.zero_code, np.int64)
        extra = np.zeros(v.size, np.uint64)
        codes[nz] = code
        extra[nz] = (sign[nz] << width.astype(np.uint64)) | q
        return codes, extra
