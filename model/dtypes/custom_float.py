"""Custom floats as coding pairs (paper §3.1, Fig. 3): E8M2 (fp11), E8M3 (fp12), fp8 E5M2 / E4M3, fp16.

A :class:`MinifloatFormat` is a binary float of ``E`` exponent and ``M`` mantissa bits plus a sign. Its
coding pair is the one of Fig. 2 (:class:`~ansforge.model.dtypes.pairs.IeeeFloatPairs`): code = the exponent
field, mapped through the matrix's table of exponents that occur; additional data = sign and mantissa,
``M + 1`` bits. Bit patterns are stored right-aligned in ``uint16`` (``uint32`` above 16 bits).

Conversion from fp32 (and so from bf16, which widens to fp32 exactly) rounds to nearest, ties to even,
with gradual underflow. What happens above the largest finite value is the format's own rule:

=========  ===  ===  =====  ==============  ===============================================
format     E    M    bias   largest finite  overflow / specials
=========  ===  ===  =====  ==============  ===============================================
``e8m2``   8    2    127    1.75·2^127      IEEE: exponent field 255 is Inf/NaN; overflow → ±Inf
``e8m3``   8    3    127    1.875·2^127     IEEE
``e5m2``   5    2    15     57344           OCP FP8 E5M2: IEEE specials; **saturates** to ±57344
``e4m3``   4    3    7      448             OCP FP8 E4M3 ("FN"): no Inf, S.1111.111 is NaN;
                                            **saturates** to ±448
``fp16``   5    10   15     65504           IEEE binary16; overflow → ±Inf
=========  ===  ===  =====  ==============  ===============================================

The fp8 rows follow the OCP 8-bit floating point specification's saturating conversion (``satfinite``):
a finite value beyond the range becomes ±max, and ±Inf inputs become ±max too for E4M3 (which has no
Inf) and stay ±Inf for E5M2. ``saturate=False`` gives the non-saturating mode (E4M3 → NaN, E5M2 → Inf).
NaN inputs become the format's canonical NaN with their sign.

Invariants: :meth:`MinifloatFormat.to_float64` is exact for every pattern, and
``from_float(to_float64(bits)) == bits`` for every non-NaN pattern (all ``2**n`` are checked in tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .pairs import IeeeFloatPairs

__all__ = ["MinifloatFormat", "MINIFLOATS", "minifloat"]

_OVERFLOW = ("ieee", "fn")


@dataclass(frozen=True)
class MinifloatFormat:
    """A sign + ``exponent_bits`` + ``mantissa_bits`` float (see the module docstring).

    ``specials`` is ``"ieee"`` (the all-ones exponent field holds Inf and NaN) or ``"fn"`` (finite
    only: the all-ones field holds normal numbers, and only the all-ones pattern S.1…1.1…1 is NaN).
    ``saturate`` is the default overflow rule of :meth:`from_float`.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    specials: str = "ieee"
    saturate: bool = False

    def __post_init__(self) -> None:
        if not 2 <= self.exponent_bits <= 8:
            raise ConfigError(f"{self.name}: exponent_bits must be between 2 and 8, not {self.exponent_bits!r}")
        if not 0 <= self.mantissa_bits <= 23:
            raise ConfigError(f"{self.name}: mantissa_bits must be between 0 and 23, not {self.mantissa_bits!r}")
        if self.specials not in _OVERFLOW:
            raise ConfigError(f"{self.name}: specials must be one of {', '.join(_OVERFLOW)}, not {self.specials!r}")
        if self.specials == "fn" and self.mantissa_bits == 0:
            raise ConfigError(f"{self.name}: a finite-only format needs mantissa bits for its NaN pattern")

    # -- derived constants ---------------------------------------------------------------------
    @property
    def total_bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal number (and the scale of the subnormals)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite number."""
        top = (1 << self.exponent_bits) - 1
        return (top if self.specials == "fn" else top - 1) - self.bias

    @property
    def max_finite(self) -> float:
        m = self.mantissa_bits
        top_mantissa = (1 << m) - (2 if self.specials == "fn" else 1)
        return float((1 + top_mantissa / (1 << m)) * 2.0 ** self.emax)

    @property
    def pairs(self) -> IeeeFloatPairs:
        """The coding-pair format: code = exponent field, additional data = sign and mantissa."""
        return IeeeFloatPairs(self.name, self.exponent_bits, self.mantissa_bits)

    @property
    def bits_dtype(self) -> np.dtype:
        return self.pairs.bits_dtype

    def _nan_bits(self) -> int:
        e, m = self.exponent_bits, self.mantissa_bits
        if self.specials == "fn":
            return (1 << (e + m)) - 1
        return (((1 << e) - 1) << m) | (1 << max(m - 1, 0))

    def _inf_bits(self) -> int:
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits

    def _max_bits(self) -> int:
        return (self._nan_bits() - 1) if self.specials == "fn" else self._inf_bits() - 1

    # -- conversions ---------------------------------------------------------------------------
    def to_float64(self, bits: np.ndarray) -> np.ndarray:
        """The exact value of each pattern (float64 holds every value of these formats)."""
        b = np.asarray(bits).astype(np.int64)
        if b.size and (int(b.min()) < 0 or int(b.max()) >> self.total_bits):
            raise ConfigError(f"{self.name}: bit patterns must fit in {self.total_bits} bits")
        m, e_bits = self.mantissa_bits, self.exponent_bits
        sign = np.where((b >> (e_bits + m)) & 1, -1.0, 1.0)
        field = (b >> m) & ((1 << e_bits) - 1)
        frac = (b & ((1 << m) - 1)).astype(np.float64)
        normal = field != 0
        sig = np.where(normal, 1.0 + frac / (1 << m), frac / (1 << m))
        exp = np.where(normal, field - self.bias, self.emin)
        out = sign * np.ldexp(sig, exp.astype(np.int64))
        magnitude = b & ((1 << (e_bits + m)) - 1)
        if self.specials == "ieee":
            top = field == (1 << e_bits) - 1
            out = np.where(top & (frac == 0), sign * np.inf, out)
            out = np.where(top & (frac != 0), np.nan, out)
        else:
            out = np.where(magnitude == (1 << (e_bits + m)) - 1, np.nan, out)
        return out

    def from_float(self, values: np.ndarray, saturate: bool | None = None) -> np.ndarray:
        """Round float32/float64 values to this format's bit patterns, nearest-even (module docstring).

        Float64 inputs must be float32-representable for the rounding to be single (bf16 and fp32
        weights always are); the rounding itself is exact: ``|x| / 2**(e - M)`` is an exact float64
        and ``np.rint`` rounds it half to even.
        """
        saturate = self.saturate if saturate is None else bool(saturate)
        x = np.asarray(values, dtype=np.float64)
        m = self.mantissa_bits
        a = np.abs(x)
        negative = np.signbit(x)
        finite = np.isfinite(x)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            _, ex = np.frexp(np.where(finite, a, 0.0))
            e = np.maximum(ex.astype(np.int64) - 1, self.emin)
            quantum = np.ldexp(1.0, e - m)
            q = np.rint(np.where(finite, a, 0.0) / quantum)       # integer significand, ties to even
            r = q * quantum
        # Encode |r|: subnormal (field 0) below 2**emin, else field and mantissa of r's own binade.
        normal = r >= np.ldexp(1.0, self.emin)
        _, rex = np.frexp(np.where(normal, r, 1.0))
        re = np.where(normal, rex.astype(np.int64) - 1, self.emin)
        sig = np.rint(r / np.ldexp(1.0, re - m)).astype(np.int64)   # exact: r is a multiple of the quantum
        field = np.where(normal, re + self.bias, 0)
        mag = np.where(normal, (field << m) | (sig - (1 << m)), sig)
        over = finite & (r > self.max_finite)
        out = mag.astype(np.int64)
        if over.any():
            if saturate:
                out[over] = self._max_bits()
            else:
                out[over] = self._nan_bits() if self.specials == "fn" else self._inf_bits()
        inf = np.isinf(x)
        if inf.any():
            if self.specials == "ieee":
                out[inf] = self._inf_bits()
            else:
                out[inf] = self._max_bits() if saturate else self._nan_bits()
        nan = np.isnan(x)
        out = np.where(nan, self._nan_bits(), out)
        out = out | (negative.astype(np.int64) << (self.total_bits - 1))
        return out.astype(self.bits_dtype)


#: The formats of §3.1 by name, as the command line spells them.
MINIFLOATS: dict[str, MinifloatFormat] = {f.name: f for f in (
    MinifloatFormat("e8m2", 8, 2),
    MinifloatFormat("e8m3", 8, 3),
    MinifloatFormat("e5m2", 5, 2, "ieee", saturate=True),
    MinifloatFormat("e4m3", 4, 3, "fn", saturate=True),
    MinifloatFormat("fp16", 5, 10),
    MinifloatFormat("bf16", 8, 7),
)}


def minifloat(name: str) -> MinifloatFormat:
    """A format of :data:`MINIFLOATS` by name; the error names the valid ones."""
    if name not in MINIFLOATS:
        raise ConfigError(f"float format must be one of {', '.join(MINIFLOATS)}, not {name!r}")
    return MINIFLOATS[name]
