"""Integers as coding pairs (paper §3.3, Figs. 5 and 6, Table 2).

**Linear quantization** (:func:`linear_quantize`), per matrix, to ``Nb`` magnitude bits plus a sign::

    scale = max|w| / (2**Nb - 1)          q = rint(w / scale)         (|q| <= 2**Nb - 1)

``rint`` rounds half to even; the largest weight maps to ``±(2**Nb - 1)`` exactly. This is the
paper's ``q = round(w / max|w| · (2**Nb − 1))`` (§3.3, [10]); an all-zero matrix has scale 1.

**NZ-MSB codes** (:class:`NzMsbCode`, Fig. 6). Zero has code 0 and no additional data. Any other
``v`` has code ``k + 1`` where ``k`` is the position of the most significant set bit of ``|v|``; the
additional data is the ``k`` bits below it, with the sign above them for signed values::

    signed:    code k ≥ 1 carries k bits      extra = sign << (k - 1) | (|v| - 2**(k - 1))
    unsigned:  code k ≥ 1 carries k - 1 bits  extra = v - 2**(k - 1)

(−1 → code 1, extra 1b; 13 = 1101b → code 4, extra 0101b.) ``max_extra_bits`` optionally
*saturates* the additional data (§3.3, "a kind of saturation"): codes that would carry more bits keep
only their top bits, and values are first rounded (nearest, ties to even) to what that keeps; a
rounding carry moves a value to the next code with zero low bits, so the rounded value is exact there
(in the top code, where no next code exists, the value rounds down instead).

**Direct codes** (:class:`DirectCode`, end of §3.3): one code per magnitude ``|v|`` and the sign as
one bit of additional data (none for zero), e.g. 128 codes plus sign for ``Nb = 7``.

**Subdivided NZ-MSB codes** (:class:`SubdividedCode`, the middle ground of §3.3: "subdivide the
coding intervals further"): each NZ-MSB interval ``2**(k-1) <= |v| < 2**k`` is cut into
``2**min(s, k-1)`` equal sub-intervals by the ``s`` bits below the most significant one, each its own
code; the rest of the bits and the sign stay additional data. ``s = 0`` is NZ-MSB, ``s >= Nb - 1`` is
the direct code (code = ``|v|``).

Both codes are golden models: ``join(split(v)) == v`` for every integer they accept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, PairFormatError

__all__ = ["QUANT_BITS", "IntegerPairs", "NzMsbCode", "DirectCode", "SubdividedCode", "linear_quantize",
           "clip_quantize", "ideal_pair_bits"]

#: The quantization widths of the paper's Table 2.
QUANT_BITS = (6, 7, 8, 9, 10, 11)


@dataclass(frozen=True, eq=False)
class IntegerPairs:
    """Integers as coding pairs: ``codes`` (int64), ``extra`` (uint64), and ``extra_bits_per_code``
    (width of each code's additional data, indexed by code)."""

    codes: np.ndarray
    extra: np.ndarray
    extra_bits_per_code: np.ndarray

    @property
    def n_codes(self) -> int:
        return int(self.extra_bits_per_code.size)

    def counts(self) -> np.ndarray:
        return np.bincount(self.codes, minlength=self.n_codes).astype(np.int64)

    def extra_bits_total(self) -> int:
        return int(self.counts() @ self.extra_bits_per_code.astype(np.int64))


def _as_int(values, where: str) -> np.ndarray:
    v = np.asarray(values)
    if v.dtype.kind not in "iu":
        raise PairFormatError(f"{where} takes integers, not dtype {v.dtype}")
    return v.astype(np.int64).ravel()


def _checked_pairs(pairs: IntegerPairs, widths: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, extra)`` as int64, refusing a code outside the alphabet or additional data too wide for it."""
    code = np.asarray(pairs.codes, dtype=np.int64)
    extra = np.asarray(pairs.extra).astype(np.int64)
    if code.size and (int(code.min()) < 0 or int(code.max()) >= widths.size):
        raise PairFormatError(f"{what} {int(code.max())} is outside 0..{widths.size - 1}")
    if np.any(extra >> widths[code]):
        raise PairFormatError(f"additional data wider than its {what} allows")
    return code, extra


def _msb(a: np.ndarray) -> np.ndarray:
    """Position of the most significant set bit of each positive int64 (exact for all int64; 0 for the
    others)."""
    a = np.asarray(a)
    if a.size and int(a.max()) < 1 << 53:
        # below 2**53 every integer is a float64, whose exponent is the position: one pass, not six
        _, e = np.frexp(a.astype(np.float64))
        return np.where(a > 0, e.astype(np.int64) - 1, 0)
    out = np.zeros(a.shape, dtype=np.int64)
    x = a.copy()
    for s in (32, 16, 8, 4, 2, 1):
        big = x >= (np.int64(1) << s)
        out += big * s
        x = np.where(big, x >> s, x)
    return out


@dataclass(frozen=True)
class NzMsbCode:
    """NZ-MSB coding of integers of up to ``magnitude_bits`` bits (see the module docstring).

    ``n_codes = magnitude_bits + 1``; code ``k`` carries ``k`` bits (signed) or ``k - 1`` (unsigned),
    capped at ``max_extra_bits`` when that is given.
    """

    magnitude_bits: int
    signed: bool = True
    max_extra_bits: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.magnitude_bits, bool) or not isinstance(self.magnitude_bits, (int, np.integer)) \
                or not 1 <= self.magnitude_bits <= 62:
            raise ConfigError(f"NZ-MSB code: magnitude_bits must be between 1 and 62, not {self.magnitude_bits!r}")
        if self.max_extra_bits is not None:
            lo = 1 if self.signed else 0
            if not isinstance(self.max_extra_bits, (int, np.integer)) or not lo <= self.max_extra_bits <= 63:
                raise ConfigError(f"NZ-MSB code: max_extra_bits must be between {lo} and 63, "
                                  f"not {self.max_extra_bits!r}")

    @property
    def n_codes(self) -> int:
        return self.magnitude_bits + 1

    def _full_widths(self) -> np.ndarray:
        k = np.arange(self.n_codes, dtype=np.int64)
        return k if self.signed else np.maximum(k - 1, 0)

    @property
    def extra_bits_per_code(self) -> np.ndarray:
        w = self._full_widths()
        return w if self.max_extra_bits is None else np.minimum(w, self.max_extra_bits)

    def _dropped(self, code: np.ndarray) -> np.ndarray:
        return self._full_widths()[code] - self.extra_bits_per_code[code]

    def saturate(self, values) -> np.ndarray:
        """Values rounded (nearest, ties to even) to what the capped additional data keeps."""
        v = _as_int(values, "NZ-MSB saturation")
        if self.max_extra_bits is None:
            return v
        a = np.abs(v)
        code = np.where(a == 0, 0, _msb(np.maximum(a, 1)) + 1)
        d = self._dropped(np.minimum(code, self.magnitude_bits))
        half = np.where(d > 0, np.int64(1) << np.maximum(d - 1, 0), 0)
        q = a >> d
        rem = a - (q << d)
        up = (rem > half) | ((rem == half) & (d > 0) & ((q & 1) == 1))
        r = (q + up) << d
        r = np.where(r >> self.magnitude_bits, q << d, r)   # the top code cannot carry: round down there
        return np.where(v < 0, -r, r)

    def split(self, values) -> IntegerPairs:
        """Integers → pairs. Saturated codes round first (:meth:`saturate`); the rest is exact."""
        v = self.saturate(values)
        a = np.abs(v)
        if not self.signed and v.size and int(v.min()) < 0:
            raise PairFormatError(f"unsigned NZ-MSB code got the negative value {int(v.min())}")
        if a.size and int(a.max()) >> self.magnitude_bits:
            raise PairFormatError(f"value {int(a.max())} does not fit {self.magnitude_bits} magnitude bits")
        code = np.where(a == 0, 0, _msb(np.maximum(a, 1)) + 1)
        low_bits = np.maximum(code - 1, 0)
        low = np.where(code > 0, a - (np.int64(1) << low_bits), 0) >> self._dropped(code)
        kept = low_bits - self._dropped(code)
        extra = low
        if self.signed:
            extra = np.where(code > 0, ((v < 0).astype(np.int64) << kept) | low, 0)
        return IntegerPairs(code, extra.astype(np.uint64), self.extra_bits_per_code.astype(np.uint8))

    def join(self, pairs: IntegerPairs) -> np.ndarray:
        """Pairs → integers (int64), the exact inverse of :meth:`split` on its output."""
        code, extra = _checked_pairs(pairs, self.extra_bits_per_code, "NZ-MSB code")
        low_bits = np.maximum(code - 1, 0)
        kept = low_bits - self._dropped(code)
        low = (extra & ((np.int64(1) << kept) - 1)) << self._dropped(code)
        a = np.where(code > 0, (np.int64(1) << low_bits) + low, 0)
        if self.signed:
            neg = (code > 0) & (((extra >> kept) & 1) == 1)
            a = np.where(neg, -a, a)
        return a


@dataclass(frozen=True)
class DirectCode:
    """One code per magnitude ``0 .. 2**magnitude_bits - 1``; the sign is one bit of additional data
    for every non-zero code (no sign when ``signed=False``)."""

    magnitude_bits: int
    signed: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.magnitude_bits, bool) or not isinstance(self.magnitude_bits, (int, np.integer)) \
                or not 1 <= self.magnitude_bits <= 16:
            raise ConfigError(f"direct code: magnitude_bits must be between 1 and 16, not {self.magnitude_bits!r}")

    @property
    def n_codes(self) -> int:
        return 1 << self.magnitude_bits

    @property
    def extra_bits_per_code(self) -> np.ndarray:
        w = np.full(self.n_codes, 1 if self.signed else 0, dtype=np.int64)
        w[0] = 0
        return w

    def split(self, values) -> IntegerPairs:
        v = _as_int(values, "direct code")
        a = np.abs(v)
        if a.size and int(a.max()) >= self.n_codes:
            raise PairFormatError(f"value {int(a.max())} has no direct code (codes 0..{self.n_codes - 1})")
        if not self.signed and v.size and int(v.min()) < 0:
            raise PairFormatError(f"unsigned direct code got the negative value {int(v.min())}")
        extra = ((v < 0) & self.signed).astype(np.uint64)
        return IntegerPairs(a, extra, self.extra_bits_per_code.astype(np.uint8))

    def join(self, pairs: IntegerPairs) -> np.ndarray:
        code = np.asarray(pairs.codes, dtype=np.int64)
        extra = np.asarray(pairs.extra).astype(np.int64)
        if code.size and (int(code.min()) < 0 or int(code.max()) >= self.n_codes):
            raise PairFormatError(f"direct code {int(code.max())} is outside 0..{self.n_codes - 1}")
        return np.where(extra & 1, -code, code)


@dataclass(frozen=True)
class SubdividedCode:
    """NZ-MSB intervals cut into ``2**min(split_bits, k - 1)`` codes each (module docstring).

    Code numbering: 0 is zero; interval ``k`` (``1 <= k <= magnitude_bits``) owns the codes
    ``first[k] .. first[k] + 2**min(s, k - 1) - 1`` with ``first[k] = 1 + sum_{j<k} 2**min(s, j - 1)``;
    its additional data is the sign above the ``k - 1 - min(s, k - 1)`` low bits.
    """

    magnitude_bits: int
    split_bits: int

    def __post_init__(self) -> None:
        if isinstance(self.magnitude_bits, bool) or not isinstance(self.magnitude_bits, (int, np.integer)) \
                or not 1 <= self.magnitude_bits <= 16:
            raise ConfigError(f"subdivided code: magnitude_bits must be between 1 and 16, not {self.magnitude_bits!r}")
        if isinstance(self.split_bits, bool) or not isinstance(self.split_bits, (int, np.integer)) \
                or not 0 <= self.split_bits <= 15:
            raise ConfigError(f"subdivided code: split_bits must be between 0 and 15, not {self.split_bits!r}")

    def _sub_bits(self) -> np.ndarray:
        """``min(s, k - 1)`` per interval ``k = 0 .. Nb`` (0 for the zero code)."""
        k = np.arange(self.magnitude_bits + 1, dtype=np.int64)
        return np.where(k > 0, np.minimum(self.split_bits, np.maximum(k - 1, 0)), 0)

    def _first(self) -> np.ndarray:
        per = np.where(np.arange(self.magnitude_bits + 1) > 0, np.int64(1) << self._sub_bits(), 1)
        return np.concatenate([[0], np.cumsum(per)[:-1]]).astype(np.int64)

    @property
    def n_codes(self) -> int:
        return int(self._first()[-1] + (1 << int(self._sub_bits()[-1])))

    @property
    def extra_bits_per_code(self) -> np.ndarray:
        k = np.arange(self.magnitude_bits + 1, dtype=np.int64)
        width = np.where(k > 0, k - 1 - self._sub_bits() + 1, 0)       # low bits + sign
        sizes = np.where(k > 0, np.int64(1) << self._sub_bits(), 1)
        return np.repeat(width, sizes)

    def split(self, values) -> IntegerPairs:
        v = _as_int(values, "subdivided code")
        a = np.abs(v)
        if a.size and int(a.max()) >> self.magnitude_bits:
            raise PairFormatError(f"value {int(a.max())} does not fit {self.magnitude_bits} magnitude bits")
        k = np.where(a == 0, 0, _msb(np.maximum(a, 1)) + 1)
        s = self._sub_bits()[k]
        low = np.maximum(k - 1, 0) - s                                   # bits left as additional data
        below = np.where(k > 0, a - (np.int64(1) << np.maximum(k - 1, 0)), 0)
        code = np.where(k > 0, self._first()[k] + (below >> low), 0)
        extra = np.where(k > 0, ((v < 0).astype(np.int64) << low) | (below & ((np.int64(1) << low) - 1)), 0)
        return IntegerPairs(code, extra.astype(np.uint64), self.extra_bits_per_code.astype(np.uint8))

    def join(self, pairs: IntegerPairs) -> np.ndarray:
        """Pairs → integers (int64), the exact inverse of :meth:`split`."""
        code, extra = _checked_pairs(pairs, self.extra_bits_per_code, "subdivided code")
        first = self._first()
        k = np.searchsorted(first, code, side="right") - 1
        s = self._sub_bits()[k]
        low = np.maximum(k - 1, 0) - s
        top = (code - first[k]) << low
        a = np.where(k > 0, (np.int64(1) << np.maximum(k - 1, 0)) + top + (extra & ((np.int64(1) << low) - 1)), 0)
        return np.where((k > 0) & (((extra >> low) & 1) == 1), -a, a)


def _quantizable(weights, magnitude_bits: int) -> np.ndarray:
    if isinstance(magnitude_bits, bool) or not isinstance(magnitude_bits, (int, np.integer)) \
            or not 1 <= magnitude_bits <= 30:
        raise ConfigError(f"quantization bits Nb must be between 1 and 30, not {magnitude_bits!r}")
    w = np.asarray(weights, dtype=np.float64)
    bad = ~np.isfinite(w)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise PairFormatError(f"cannot quantize a non-finite weight ({w.ravel()[i]} at flat index {i})")
    return w


def linear_quantize(weights, magnitude_bits: int) -> tuple[np.ndarray, float]:
    """Per-matrix linear quantization to ``magnitude_bits`` bits plus sign (module docstring).

    Returns ``(q, scale)`` with ``q`` int64 in ``±(2**Nb - 1)`` and ``w ≈ q · scale``. NaN or Inf
    weights are refused (the error names the first one's index).
    """
    w = _quantizable(weights, magnitude_bits)
    top = float(np.max(np.abs(w))) if w.size else 0.0
    levels = (1 << magnitude_bits) - 1
    scale = top / levels if top > 0 else 1.0
    q = np.rint(w / scale).astype(np.int64)
    return np.clip(q, -levels, levels), scale


def clip_quantize(weights, magnitude_bits: int, clip: float) -> tuple[np.ndarray, float]:
    """Linear quantization with the scale set by ``clip`` instead of ``max|w|`` (§3.3 saturation):
    ``scale = clip / (2**Nb - 1)``, weights beyond ``±clip`` saturate to ``±(2**Nb - 1)``."""
    if not np.isfinite(clip) or clip <= 0:
        raise ConfigError(f"clip magnitude must be a positive number, not {clip!r}")
    w = _quantizable(weights, magnitude_bits)
    levels = (1 << magnitude_bits) - 1
    scale = clip / levels
    return np.clip(np.rint(w / scale), -levels, levels).astype(np.int64), scale


def ideal_pair_bits(pairs: IntegerPairs) -> float:
    """``sum -log2 p(code)`` over the pairs plus their additional data, in bits (the paper's estimate)."""
    c = pairs.counts()
    nz = c[c > 0].astype(np.float64)
    n = nz.sum()
    return float(-(nz * np.log2(nz / n)).sum()) + pairs.extra_bits_total() if n else 0.0
