"""Binary and ternary weights as coding pairs (paper §3.6, Fig. 8) and the zero-skipping dot product.

Weights are ternarized with BitNet b1.58's *absmean* rule (:func:`absmean_ternarize`)::

    gamma = mean|W|        W_t = clip(rint(W / (gamma + eps)), -1, 1)        (eps = 1e-5)

Three codings of a matrix in row-major order (``n`` weights, ``n`` known to the decoder):

**Zero runs** (:class:`RunLengthCode`). Each non-zero weight is one pair: the run of zeros before it as
an *unsigned* NZ-MSB code (§3.3: code 0 for run 0, code k ≥ 1 for runs ``2**(k-1) .. 2**k - 1`` with
``k - 1`` low bits), and for ternary weights its sign as the top bit of the additional data. Zeros
after the last non-zero weight are implied by ``n``. ({0,0,0,-1,1,0,0,1} → (3,-1), (0,+1), (2,+1).)

**Groups of 8** (:class:`GroupMaskCode`). Each group of 8 weights is one pair: code = the mask of its
non-zero positions (bit ``i`` = weight ``i`` of the group, first weight in the MSB as Fig. 8 draws
it), additional data = the signs of its non-zero weights in order, 1 = negative (none for binary).
{0,-1,1,0,0,-1,0,0} → code 01100100b, extra 101b. The last group is padded with zeros.

**Hybrid** (:class:`HybridCode`). Groups again, but runs of all-zero groups are one pair: mask codes
1..255 are codes 0..254, and a run of ``r >= 1`` zero groups is code ``255 + k - 1`` for the
unsigned NZ-MSB code ``k`` of ``r`` (``k - 1`` low bits of extra). Trailing zero groups are implied.

:func:`zero_skipping_matvec` consumes run-length pairs directly: it never touches a zero weight, and
its integer result equals the dense ``W_t @ x`` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, PairFormatError
from .integers import IntegerPairs, NzMsbCode
from .layout import CodeLayout, CodeSet

__all__ = ["absmean_ternarize", "threshold_ternarize", "sign_binarize", "RunLengthCode", "GroupMaskCode", "HybridCode", "zero_skipping_matvec",
           "dense_matvec"]

_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def absmean_ternarize(weights, eps: float = 1e-5) -> tuple[np.ndarray, float]:
    """BitNet b1.58's absmean quantizer: ``(W_t as int8 in {-1, 0, 1}, gamma)``."""
    w = np.asarray(weights, dtype=np.float64)
    if not np.isfinite(w).all():
        i = int(np.flatnonzero(~np.isfinite(w.ravel()))[0])
        raise PairFormatError(f"cannot ternarize a non-finite weight ({w.ravel()[i]} at flat index {i})")
    gamma = float(np.mean(np.abs(w))) if w.size else 0.0
    return np.clip(np.rint(w / (gamma + eps)), -1, 1).astype(np.int8), gamma


def threshold_ternarize(weights, threshold: float) -> tuple[np.ndarray, float]:
    """Ternary weights keeping only ``|w| > threshold · mean|W|``: ``(W_t int8, alpha)`` with
    ``alpha`` the mean ``|w|`` of the kept weights, the least-squares scale of that sign pattern.
    Larger thresholds leave more zeros (and whole zero groups, where hybrid coding differs)."""
    w = np.asarray(weights, dtype=np.float64)
    absmean_ternarize(w)                                   # the same refusal of non-finite weights
    if not np.isfinite(threshold) or threshold < 0:
        raise ConfigError(f"ternary threshold must be a non-negative number, not {threshold!r}")
    a = np.abs(w)
    keep = a > threshold * (float(a.mean()) if a.size else 0.0)
    alpha = float(a[keep].mean()) if keep.any() else 0.0
    return (np.sign(w) * keep).astype(np.int8), alpha


def sign_binarize(weights) -> tuple[np.ndarray, float]:
    """Binary weights (XNOR-Net / BinaryConnect): ``b = [w >= 0]`` as {0, 1} (1 for +alpha, 0 for
    -alpha) and ``alpha = mean|W|``; the decoded value is ``alpha · (2b - 1)``."""
    w = np.asarray(weights, dtype=np.float64)
    absmean_ternarize(w)
    return (w >= 0).astype(np.int8), float(np.abs(w).mean()) if w.size else 0.0


def _check_weights(w, ternary: bool) -> np.ndarray:
    w = np.asarray(w)
    if w.dtype.kind not in "iu":
        raise PairFormatError(f"binary/ternary codes take integer weights, not dtype {w.dtype}")
    w = w.astype(np.int64).ravel()
    allowed = (-1, 0, 1) if ternary else (0, 1)
    bad = ~np.isin(w, allowed)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PairFormatError(f"{'ternary' if ternary else 'binary'} weight {int(w[i])} at flat index {i} "
                              f"is not one of {allowed}")
    return w


def _bits_for_run(n: int) -> int:
    return max(1, int(n).bit_length())


@dataclass(frozen=True)
class RunLengthCode:
    """Zero runs before each non-zero weight (module docstring). ``n`` bounds the run lengths."""

    n: int
    ternary: bool = True

    @property
    def _runs(self) -> NzMsbCode:
        return NzMsbCode(_bits_for_run(self.n), signed=False)

    def layout(self) -> CodeLayout:
        widths = self._runs.extra_bits_per_code + (1 if self.ternary else 0)
        return CodeLayout("zero runs", [CodeSet("run", 0, tuple(int(x) for x in widths))])

    def split(self, weights) -> IntegerPairs:
        w = _check_weights(weights, self.ternary)
        if w.size != self.n:
            raise ConfigError(f"run-length code built for n = {self.n} weights got {w.size}")
        pos = np.flatnonzero(w)
        runs = np.diff(np.concatenate([[-1], pos])) - 1
        p = self._runs.split(runs)
        extra = p.extra.astype(np.int64)
        if self.ternary:
            low = np.maximum(p.codes - 1, 0)
            extra = ((w[pos] < 0).astype(np.int64) << low) | extra
        return IntegerPairs(p.codes, extra.astype(np.uint64), self.layout().extra_bits_per_code().astype(np.uint8))

    def runs_and_signs(self, pairs: IntegerPairs) -> tuple[np.ndarray, np.ndarray]:
        """Decode the pairs into (run before each non-zero weight, its sign ±1)."""
        codes = np.asarray(pairs.codes, dtype=np.int64)
        extra = np.asarray(pairs.extra).astype(np.int64)
        low = np.maximum(codes - 1, 0)
        sign = np.where(self.ternary & (((extra >> low) & 1) == 1), -1, 1) if self.ternary else np.ones_like(codes)
        runs = self._runs.join(IntegerPairs(codes, (extra & ((np.int64(1) << low) - 1)).astype(np.uint64),
                                            self._runs.extra_bits_per_code.astype(np.uint8)))
        if runs.size and int(np.sum(runs + 1)) > self.n:
            raise PairFormatError(f"run-length pairs cover {int(np.sum(runs + 1))} weights, more than n = {self.n}")
        return runs, sign

    def join(self, pairs: IntegerPairs) -> np.ndarray:
        runs, sign = self.runs_and_signs(pairs)
        w = np.zeros(self.n, dtype=np.int8)
        w[np.cumsum(runs + 1) - 1] = sign
        return w


@dataclass(frozen=True)
class GroupMaskCode:
    """Groups of 8: presence-mask code plus the signs (module docstring)."""

    n: int
    ternary: bool = True

    def layout(self) -> CodeLayout:
        return CodeLayout("groups of 8", [CodeSet("mask", 0, tuple(int(p) if self.ternary else 0 for p in _POP8))])

    def _groups(self, weights) -> np.ndarray:
        w = _check_weights(weights, self.ternary)
        if w.size != self.n:
            raise ConfigError(f"group code built for n = {self.n} weights got {w.size}")
        return np.concatenate([w, np.zeros(-w.size % 8, dtype=np.int64)]).reshape(-1, 8)

    def split(self, weights) -> IntegerPairs:
        g = self._groups(weights)
        nz = g != 0
        codes = (nz * (1 << np.arange(7, -1, -1))).sum(1)
        extra = np.zeros(len(g), dtype=np.int64)
        if self.ternary:
            for i in range(8):      # append the sign of each non-zero weight, first weight first
                extra = np.where(nz[:, i], (extra << 1) | (g[:, i] < 0), extra)
        return IntegerPairs(codes, extra.astype(np.uint64), self.layout().extra_bits_per_code().astype(np.uint8))

    def join(self, pairs: IntegerPairs) -> np.ndarray:
        codes = np.asarray(pairs.codes, dtype=np.int64)
        extra = np.asarray(pairs.extra).astype(np.int64)
        if codes.size != -(-self.n // 8) or (codes.size and (codes.min() < 0 or codes.max() > 255)):
            raise PairFormatError(f"group pairs: expected {-(-self.n // 8)} mask codes in 0..255")
        nz = ((codes[:, None] >> np.arange(7, -1, -1)) & 1) == 1
        left = _POP8[codes].copy()
        g = np.zeros((codes.size, 8), dtype=np.int8)
        for i in range(8):
            left = left - nz[:, i]
            neg = self.ternary & (((extra >> left) & 1) == 1)
            g[:, i] = np.where(nz[:, i], np.where(neg, -1, 1), 0)
        return g.ravel()[:self.n]


@dataclass(frozen=True)
class HybridCode:
    """Runs of all-zero groups plus mask codes for the other groups (module docstring)."""

    n: int
    ternary: bool = True

    @property
    def _runs(self) -> NzMsbCode:
        return NzMsbCode(_bits_for_run(-(-self.n // 8)), signed=False)

    def layout(self) -> CodeLayout:
        masks = tuple(int(p) if self.ternary else 0 for p in _POP8[1:])
        runs = tuple(int(x) for x in self._runs.extra_bits_per_code[1:])
        return CodeLayout("hybrid", [CodeSet("mask", 0, masks), CodeSet("zero groups", 255, runs)])

    def split(self, weights) -> IntegerPairs:
        groups = GroupMaskCode(self.n, self.ternary).split(weights)
        masks, signs = groups.codes, groups.extra.astype(np.int64)
        nonzero = np.flatnonzero(masks)
        runs = np.diff(np.concatenate([[-1], nonzero])) - 1       # zero groups before each non-zero group
        rp = self._runs.split(runs)
        # Interleave: [run pair if run > 0], mask pair, for each non-zero group.
        has_run = runs > 0
        n_pairs = nonzero.size + int(has_run.sum())
        codes = np.empty(n_pairs, dtype=np.int64)
        extra = np.empty(n_pairs, dtype=np.int64)
        mask_at = np.arange(nonzero.size) + np.cumsum(has_run)
        run_at = mask_at[has_run] - 1
        codes[mask_at], extra[mask_at] = masks[nonzero] - 1, signs[nonzero]
        codes[run_at], extra[run_at] = 255 + rp.codes[has_run] - 1, rp.extra[has_run].astype(np.int64)
        return IntegerPairs(codes, extra.astype(np.uint64), self.layout().extra_bits_per_code().astype(np.uint8))

    def join(self, pairs: IntegerPairs) -> np.ndarray:
        codes = np.asarray(pairs.codes, dtype=np.int64)
        extra = np.asarray(pairs.extra).astype(np.int64)
        is_run = codes >= 255
        k = np.where(is_run, codes - 255 + 1, 0)
        runs = self._runs.join(IntegerPairs(k, np.where(is_run, extra, 0).astype(np.uint64),
                                            self._runs.extra_bits_per_code.astype(np.uint8)))
        # Each pair advances by its run (zero groups) or by one group.
        advance = np.where(is_run, runs, 1)
        start = np.cumsum(advance) - advance
        n_groups = -(-self.n // 8)
        if advance.size and int(advance.sum()) > n_groups:
            raise PairFormatError(f"hybrid pairs cover {int(advance.sum())} groups, more than {n_groups}")
        masks = np.zeros(n_groups, dtype=np.int64)
        signs = np.zeros(n_groups, dtype=np.int64)
        masks[start[~is_run]] = codes[~is_run] + 1
        signs[start[~is_run]] = extra[~is_run]
        return GroupMaskCode(self.n, self.ternary).join(IntegerPairs(masks, signs.astype(np.uint64), _POP8))


def zero_skipping_matvec(code: RunLengthCode, pairs: IntegerPairs, cols: int, x) -> np.ndarray:
    """``W_t @ x`` for integer ``x`` from the run-length pairs of row-major ``W_t`` (rows × ``cols``).

    Walks the pairs only: position advances by ``run + 1`` per pair and the product adds ``±x[col]``
    to the pair's row, so zero weights cost nothing. Returns int64 of length ``n // cols``.
    """
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise ConfigError(f"zero-skipping dot product takes integer activations, not dtype {x.dtype}")
    if x.shape != (cols,) or code.n % cols:
        raise ConfigError(f"activation vector of shape {x.shape} does not match {code.n // max(cols, 1)}×{cols} weights")
    runs, sign = code.runs_and_signs(pairs)
    pos = np.cumsum(runs + 1) - 1
    rows, col = np.divmod(pos, cols)
    out = np.zeros(code.n // cols, dtype=np.int64)
    np.add.at(out, rows, sign * x.astype(np.int64)[col])
    return out


def dense_matvec(weights: np.ndarray, x) -> np.ndarray:
    """The dense integer reference ``W_t @ x`` (int64)."""
    return np.asarray(weights, dtype=np.int64) @ np.asarray(x, dtype=np.int64)
