"""Normalized probabilities (paper §4.2, Eq. 2) and the ideal cost of a code stream.

An ANS core is configured with integer frequencies ``f_i`` of ``N`` bits: every code that occurs has
``f_i >= 1`` and ``sum(f_i) == 2**N``. Coding ``c_i`` occurrences of code ``i`` then costs

    cost(f) = sum_i c_i * (N - log2 f_i)   bits,

a cross-entropy that is never below the ideal ``sum_i c_i * log2(C / c_i)`` with ``C = sum_i c_i``.

:func:`normalize_counts` returns the integer table of *minimum* cost. The cost is a sum of convex
functions of the individual ``f_i`` under one linear constraint, so a table is optimal exactly when no
single unit of frequency can move from one code to another and lower the cost (the exchange condition
of separable convex resource allocation). The algorithm starts from ``max(1, floor(c_i 2**N / C))``,
adds or removes units greedily by marginal cost until the sum is ``2**N``, then exchanges units while
any exchange helps. Every step strictly lowers the cost, and the number of steps is of the order of the
number of codes. Ties go to the lowest code index, so tables are reproducible bit for bit.

:func:`proportional_counts` is the plain method it is compared with: round ``c_i 2**N / C`` to
nearest, clamp to 1, and put the rounding residue on the most frequent code.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..errors import ConfigError

try:  # the optional native kernels (setup.py): the same tables from compiled code; this module is the reference
    from . import nativeans
except ImportError:  # pragma: no cover - machines without a compiler
    nativeans = None

__all__ = [
    "MIN_PRECISION_BITS",
    "MAX_PRECISION_BITS",
    "log2_table",
    "normalize_counts",
    "normalize_positive",
    "proportional_counts",
    "cross_entropy_bits",
    "ideal_bits",
    "entropy_bits",
    "leaky_quantize",
]

MIN_PRECISION_BITS = 5
MAX_PRECISION_BITS = 24
#: Precisions up to this one normalize in compiled code (``nativeans.normalize``), with the logarithms
#: of :func:`log2_table`; above it (a table of 2**N doubles would be large) the NumPy loop below runs.
NATIVE_PRECISION_BITS = 16


def native_precision(precision_bits) -> bool:
    """Whether tables of this precision normalize in compiled code: the extension built and a valid
    ``N`` up to :data:`NATIVE_PRECISION_BITS` (an invalid one takes the NumPy path, which names it)."""
    return (nativeans is not None and isinstance(precision_bits, (int, np.integer))
            and not isinstance(precision_bits, bool) and MIN_PRECISION_BITS <= precision_bits <= NATIVE_PRECISION_BITS)


@functools.cache
def log2_table(precision_bits: int) -> np.ndarray:
    """NumPy's ``log2`` of ``0 .. 2**N + 1`` (``-inf`` at 0): every frequency and frequency + 1 of an
    ``N``-bit table. The compiled normalization and escape search read their logarithms here, from the
    same vectorized ``log2`` as the loops below, so they compare the same floats (the C library's
    ``log2`` differs from NumPy's in the last bit for some integers)."""
    with np.errstate(divide="ignore"):
        t = np.log2(np.arange((1 << precision_bits) + 2, dtype=np.float64))
    t.flags.writeable = False
    return t


def _check(counts: np.ndarray, precision_bits: int) -> np.ndarray:
    if isinstance(precision_bits, bool) or not isinstance(precision_bits, (int, np.integer)):
        raise ConfigError(f"precision_bits must be an integer, not {precision_bits!r}")
    if not MIN_PRECISION_BITS <= precision_bits <= MAX_PRECISION_BITS:
        raise ConfigError(
            f"precision_bits must be between {MIN_PRECISION_BITS} and {MAX_PRECISION_BITS}, not {precision_bits}"
        )
    c = np.asarray(counts)
    if c.ndim != 1 or c.dtype.kind not in "iu":
        raise ConfigError(f"counts must be a 1-D integer array, got shape {c.shape} dtype {c.dtype}")
    c = c.astype(np.int64)
    if c.size and c.min() < 0:
        raise ConfigError(f"counts must be non-negative; count of code {int(np.argmin(c))} is {int(c.min())}")
    occurring = int(np.count_nonzero(c))
    if occurring == 0:
        raise ConfigError("counts are all zero: there is nothing to normalize")
    if occurring > 1 << precision_bits:
        raise ConfigError(
            f"{occurring} codes occur, but {precision_bits}-bit frequencies hold at most {1 << precision_bits}"
        )
    return c


def normalize_counts(counts: np.ndarray, precision_bits: int) -> np.ndarray:
    """Integer frequencies of minimum cross-entropy cost (see the module docstring).

    Parameters
    ----------
    counts : array of int, shape (n,)
        Occurrences of each code; codes with count 0 get frequency 0.
    precision_bits : int
        ``N``, from 5 to 24.

    Returns
    -------
    ndarray of int64, shape (n,)
        ``f`` with ``f.sum() == 2**N``, ``f[i] >= 1`` where ``counts[i] > 0``, ``f[i] == 0`` elsewhere.
    """
    c = _check(counts, precision_bits)
    idx = np.flatnonzero(c)
    out = np.zeros_like(c)
    if native_precision(precision_bits):
        P = int(precision_bits)
        out[idx] = np.frombuffer(nativeans.normalize(np.ascontiguousarray(c[idx]), log2_table(P), P), dtype=np.int64)
    else:
        out[idx] = normalize_positive(c[idx], precision_bits)
    return out


def normalize_positive(counts: np.ndarray, precision_bits: int) -> np.ndarray:
    """:func:`normalize_counts` of counts that are all positive, in NumPy: the reference of the compiled
    ``nativeans.normalize`` and where it is not built. No argument checks."""
    total_freq = 1 << precision_bits
    w = np.asarray(counts).astype(np.float64)
    f = np.maximum(1, np.floor(w * total_freq / w.sum())).astype(np.int64)

    def gain_up(f: np.ndarray) -> np.ndarray:  # cost saved by f_i += 1
        return w * (np.log2(f + 1.0) - np.log2(f))

    def loss_down(f: np.ndarray) -> np.ndarray:  # cost added by f_i -= 1 (infinite at 1)
        with np.errstate(divide="ignore"):
            return np.where(f > 1, w * (np.log2(f) - np.log2(f - 1.0)), np.inf)

    deficit = total_freq - int(f.sum())
    while deficit > 0:
        # Large deficits (many codes) are filled in batches of the best candidates at once.
        g = gain_up(f)
        k = min(deficit, max(1, deficit // 4), w.size)
        best = np.argsort(-g, kind="stable")[:k]
        f[best] += 1
        deficit -= k
    while deficit < 0:
        f[int(np.argmin(loss_down(f)))] -= 1
        deficit += 1
    # Exchange phase: move one unit from the cheapest donor to the best receiver while it pays.
    while True:  # terminates: each move strictly lowers the cost and the tables are finite
        g = gain_up(f)
        d = loss_down(f)
        i = int(np.argmax(g))
        j = int(np.argmin(d))
        if i == j or not g[i] > d[j] * (1 + 1e-12):
            break
        f[i] += 1
        f[j] -= 1
    return f


def proportional_counts(counts: np.ndarray, precision_bits: int) -> np.ndarray:
    """Plain proportional rounding: ``max(1, round(c_i 2**N / C))``, residue on the largest codes.

    This is the baseline :func:`normalize_counts` is measured against; it satisfies the same
    invariants (sum ``2**N``, every occurring code ``>= 1``) but not minimum cost.
    """
    c = _check(counts, precision_bits)
    total_freq = 1 << precision_bits
    idx = np.flatnonzero(c)
    w = c[idx].astype(np.float64)
    f = np.maximum(1, np.rint(w * total_freq / w.sum())).astype(np.int64)
    residue = total_freq - int(f.sum())
    order = np.argsort(-f, kind="stable")
    pos = 0
    while residue != 0:
        k = order[pos % order.size]
        step = max(residue, 1 - int(f[k])) if residue < 0 else residue
        f[k] += step
        residue -= step
        pos += 1
    out = np.zeros_like(c)
    out[idx] = f
    return out


def cross_entropy_bits(counts: np.ndarray, freqs: np.ndarray, precision_bits: int) -> float:
    """Cost in bits of coding ``counts`` with the ``precision_bits``-bit table ``freqs`` (double precision)."""
    c = np.asarray(counts, dtype=np.float64)
    f = np.asarray(freqs, dtype=np.float64)
    used = c > 0
    if np.any(f[used] <= 0):
        code = int(np.flatnonzero(used & (f <= 0))[0])
        raise ConfigError(f"code {code} occurs but has frequency 0")
    return float(np.sum(c[used] * (precision_bits - np.log2(f[used]))))


def ideal_bits(counts: np.ndarray) -> float:
    """Ideal cost ``sum_i c_i * -log2(c_i / C)`` in bits, in double precision."""
    c = np.asarray(counts, dtype=np.float64)
    c = c[c > 0]
    if c.size == 0:
        return 0.0
    total = c.sum()
    return float(np.sum(c * (math.log2(total) - np.log2(c))))


def entropy_bits(counts: np.ndarray) -> float:
    """Empirical entropy in bits per symbol (0 for an empty histogram)."""
    total = float(np.sum(counts))
    return ideal_bits(counts) / total if total else 0.0


def leaky_quantize(probabilities: np.ndarray, precision_bits: int = 24) -> np.ndarray:
    """Integer frequencies exactly as constriction's ``Categorical(p, perfect=False)`` derives them.

    constriction (``from_floating_point_probabilities_fast``) gives every symbol one unit and spreads
    the remaining ``2**N - n`` units by truncating scaled float cumulatives::

        scale = float64(2**N - n) / total            # total = left-to-right float64 sum of p
        left[i] = trunc(cum[i] * scale) + i          # cum[i] = left-to-right float64 sum of p[:i]
        f[i] = left[i+1] - left[i],  left[n] = 2**N

    The sums are sequential (not pairwise), which :func:`numpy.cumsum` reproduces bit for bit. Every
    symbol, also one of probability 0, gets ``f >= 1`` ("leaky").

    Parameters
    ----------
    probabilities : array of float64, shape (n,), ``2 <= n < 2**N - 1``
        Non-negative and finite, with a positive sum (need not be normalized).
    precision_bits : int
        ``N``; constriction's Python ``Categorical`` uses 24.
    """
    p = np.asarray(probabilities)
    if p.ndim != 1 or p.dtype.kind != "f":
        raise ConfigError(f"probabilities must be a 1-D float array, got shape {p.shape} dtype {p.dtype}")
    p = p.astype(np.float64)
    n = p.size
    if not 2 <= n < (1 << precision_bits) - 1:
        raise ConfigError(f"leaky quantization needs 2 to {(1 << precision_bits) - 2} symbols, got {n}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        bad = int(np.flatnonzero(~np.isfinite(p) | (p < 0))[0])
        raise ConfigError(f"probabilities[{bad}] = {p[bad]!r} is not a finite non-negative number")
    cum = np.cumsum(p)
    total = float(cum[-1])
    if not total > 0 or not math.isfinite(total) or total < np.finfo(np.float64).tiny:
        raise ConfigError("probabilities must have a positive, finite, normal sum")
    scale = float((1 << precision_bits) - n) / total
    left = np.empty(n + 1, dtype=np.int64)
    left[0] = 0
    # trunc of a non-negative float equals floor; products stay below 2**N so int64 is exact.
    left[1:n] = np.floor(cum[:-1] * scale).astype(np.int64) + np.arange(1, n)
    left[n] = 1 << precision_bits
    return np.diff(left)
