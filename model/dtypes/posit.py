"""Posits as coding pairs (paper §3.2, Fig. 4): code = regime and exponent, extra = sign and fraction.

A posit⟨n, es⟩ pattern ``p`` (``n`` bits, two's complement for negatives) decodes, after taking
``|p|``, into a regime run of ``m`` equal bits (``k = m - 1`` for a run of ones, ``-m`` for zeros), up
to ``es`` exponent bits (bits cut off by a long regime are zeros) and ``nf`` fraction bits::

    value = (-1)**s · 2**(k · 2**es + e) · (1 + f / 2**nf)

The **code** is the *scale* ``k · 2**es + e``: regime and exponent together form an exponent (§3.2).
Two more codes stand for zero and NaR. The **additional data** is the sign above the ``nf`` fraction
bits, ``nf + 1`` bits, and ``nf`` depends on the code alone (a longer regime leaves fewer bits): the
variable-width additional data of §3. Code numbering (:meth:`PositFormat.layout`)::

    code 0: zero (no additional data)     code 1: NaR (none)
    code 2 + i: the i-th scale from the smallest, -(n-2)·2**es … (n-2)·2**es

``join(split(p)) == p`` for all ``2**n`` patterns (tests check every pattern for n ≤ 16).
:meth:`PositFormat.from_float` rounds to the nearest posit, ties to the even pattern, never to zero or
NaR (posit rounding: below minpos → ±minpos, above maxpos → ±maxpos), for ``n <= 16`` by search in
the sorted table of every posit's exact value.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, PairFormatError
from .integers import IntegerPairs
from .layout import CodeLayout, CodeSet

__all__ = ["PositFormat", "POSITS"]


@dataclass(frozen=True)
class PositFormat:
    """posit⟨n, es⟩, ``3 <= n <= 32``, ``0 <= es <= n - 3``."""

    n: int
    es: int

    def __post_init__(self) -> None:
        for name, v in (("n", self.n), ("es", self.es)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ConfigError(f"posit {name} must be an integer, not {v!r}")
        if not 3 <= self.n <= 32:
            raise ConfigError(f"posit n must be between 3 and 32, not {self.n!r}")
        if not 0 <= self.es <= self.n - 3:
            raise ConfigError(f"posit es = {self.es} is too large for n = {self.n}: es must be between 0 and "
                              f"n - 3 = {self.n - 3} (sign and the shortest regime take 3 bits)")

    @property
    def name(self) -> str:
        return f"posit<{self.n},{self.es}>"

    @property
    def max_scale(self) -> int:
        return (self.n - 2) << self.es

    @property
    def n_scales(self) -> int:
        return 2 * self.max_scale + 1

    def fraction_bits(self, scale: np.ndarray) -> np.ndarray:
        """``nf`` of each scale: what the regime (and the es exponent bits) leave of ``n - 1`` bits."""
        k = np.asarray(scale, dtype=np.int64) >> self.es
        regime = np.where(k >= 0, k + 2, 1 - k)          # run plus terminator
        return np.maximum(self.n - 1 - regime - self.es, 0)

    def layout(self) -> CodeLayout:
        scales = np.arange(-self.max_scale, self.max_scale + 1)
        return CodeLayout(self.name, [CodeSet("zero", 0, (0,)), CodeSet("NaR", 1, (0,)),
                                      CodeSet("scale", 2, tuple(int(w) + 1 for w in self.fraction_bits(scales)))])

    def _check(self, bits) -> np.ndarray:
        b = np.asarray(bits)
        if b.dtype.kind not in "iu":
            raise PairFormatError(f"{self.name} takes bit patterns (integers), not dtype {b.dtype}")
        b = b.astype(np.int64).ravel()
        if b.size and (int(b.min()) < 0 or int(b.max()) >> self.n):
            raise PairFormatError(f"{self.name} bit patterns must fit in {self.n} bits")
        return b

    def split(self, bits) -> IntegerPairs:
        """Posit patterns → pairs (codes as in the module docstring)."""
        n, es = self.n, self.es
        p = self._check(bits)
        full = np.int64((1 << n) - 1)
        sign = (p >> (n - 1)) & 1
        mag = np.where(sign == 1, (-p) & full, p)                 # |p| as a pattern
        body = mag & ((np.int64(1) << (n - 1)) - 1)               # n - 1 bits below the sign
        first = (body >> (n - 2)) & 1
        # Regime run length: leading ones of body (first = 1) or leading zeros (first = 0).
        inverted = np.where(first == 1, ~body & ((np.int64(1) << (n - 1)) - 1), body)
        lead = np.full(p.shape, n - 1, dtype=np.int64)           # run to the end when inverted == 0
        nz = inverted != 0
        msb = np.zeros(p.shape, dtype=np.int64)
        x = np.where(nz, inverted, 1)
        for s in (16, 8, 4, 2, 1):
            big = x >= (np.int64(1) << s)
            msb += big * s
            x = np.where(big, x >> s, x)
        lead = np.where(nz, n - 2 - msb, lead)
        k = np.where(first == 1, lead - 1, -lead)
        rest = np.maximum(n - 1 - lead - 1, 0)                    # bits after the terminator
        e_present = np.minimum(rest, es)
        nf = rest - e_present
        tail = body & ((np.int64(1) << rest) - 1)
        e = (tail >> nf) << (es - e_present)
        frac = tail & ((np.int64(1) << nf) - 1)
        scale = (k << es) + e
        code = scale + self.max_scale + 2
        code = np.where(p == 0, 0, np.where(p == (np.int64(1) << (n - 1)), 1, code))
        extra = np.where(code >= 2, (sign << nf) | frac, 0)
        return IntegerPairs(code, extra.astype(np.uint64), self.layout().extra_bits_per_code().astype(np.uint8))

    def join(self, pairs: IntegerPairs) -> np.ndarray:
        """Pairs → posit patterns (``uint32``), the exact inverse of :meth:`split`."""
        n, es = self.n, self.es
        code = np.asarray(pairs.codes, dtype=np.int64)
        extra = np.asarray(pairs.extra).astype(np.int64)
        if code.size and (int(code.min()) < 0 or int(code.max()) >= self.n_scales + 2):
            raise PairFormatError(f"{self.name} code {int(code.max())} is outside 0..{self.n_scales + 1}")
        widths = self.layout().extra_bits_per_code()[code]
        if np.any(extra >> widths):
            raise PairFormatError(f"{self.name}: additional data wider than its code allows")
        scale = np.where(code >= 2, code - 2 - self.max_scale, 0)
        k = scale >> es
        e = scale & ((1 << es) - 1)
        lead = np.where(k >= 0, k + 1, -k)
        rest = np.maximum(n - 1 - lead - 1, 0)
        e_present = np.minimum(rest, es)
        nf = rest - e_present
        frac = extra & ((np.int64(1) << nf) - 1)
        sign = (extra >> nf) & 1
        regime_len = np.minimum(lead + 1, n - 1)
        ones = (np.int64(1) << lead) - 1
        # Regime bits: k >= 0 → lead ones then a 0; k < 0 → lead zeros then a 1 (terminators may be cut).
        regime = np.where(k >= 0, ones << (regime_len - lead), np.where(regime_len > lead, 1, 0))
        body = (regime << rest) | ((e >> (es - e_present)) << nf) | frac
        full = np.int64((1 << n) - 1)
        p = np.where(sign == 1, (-body) & full, body)
        p = np.where(code == 0, 0, np.where(code == 1, np.int64(1) << (n - 1), p))
        return p.astype(np.uint32)

    def to_float64(self, bits) -> np.ndarray:
        """Exact value of each pattern (NaR → NaN); exact in float64 for n ≤ 32 with es ≤ 4ish ranges."""
        pairs = self.split(bits)
        code = pairs.codes
        scale = np.where(code >= 2, code - 2 - self.max_scale, 0)
        nf = self.fraction_bits(scale)
        extra = pairs.extra.astype(np.int64)
        frac = extra & ((np.int64(1) << nf) - 1)
        sign = np.where((extra >> nf) & 1, -1.0, 1.0)
        v = sign * np.ldexp(1.0 + frac / np.ldexp(1.0, nf), scale)
        return np.where(code == 0, 0.0, np.where(code == 1, np.nan, v))

    def from_float(self, values) -> np.ndarray:
        """Round to the nearest posit pattern (module docstring); NaN/Inf → NaR. ``n <= 16`` only."""
        if self.n > 16:
            raise ConfigError(f"{self.name}: rounding to posits is implemented for n <= 16 (by table search)")
        x = np.asarray(values, dtype=np.float64).ravel()
        pats = np.arange(1 << self.n, dtype=np.int64)
        vals = self.to_float64(pats)
        keep = ~np.isnan(vals)
        order = np.argsort(vals[keep], kind="stable")
        sv, sp = vals[keep][order], pats[keep][order]
        i = np.clip(np.searchsorted(sv, x), 1, sv.size - 1)
        lo, hi = sv[i - 1], sv[i]
        take_hi = (x - lo > hi - x) | ((x - lo == hi - x) & ((sp[i] & 1) == 0))
        j = np.where(take_hi, i, i - 1)
        j = np.where(x >= sv[-1], sv.size - 1, np.where(x <= sv[0], 0, j))
        out = sp[j]
        # Never round a non-zero value to zero: it goes to ±minpos.
        zero_at = int(np.flatnonzero(sv == 0)[0])
        out = np.where((out == 0) & (x > 0), sp[zero_at + 1], out)
        out = np.where((out == 0) & (x < 0), sp[zero_at - 1], out)
        out = np.where(x == 0, 0, out)
        out = np.where(~np.isfinite(x), 1 << (self.n - 1), out)
        return out.astype(np.uint32)


#: The posits the issue names, by name.
POSITS: dict[str, PositFormat] = {p.name: p for p in (PositFormat(8, 0), PositFormat(8, 1), PositFormat(16, 1))}
