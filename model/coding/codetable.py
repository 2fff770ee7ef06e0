"""The symbol alphabet an ANS core codes for one tensor: direct codes plus an optional escape code.

A tensor's coding pairs have codes ``0 .. n-1`` (its code→exponent table, paper §2). An ANS core with
few probability bits pays for rare codes: every code that occurs needs a frequency of at least
``1 / 2**N``. A :class:`CodeTable` therefore lets the rarest codes share one **escape symbol**; the
escape carries the code's index inside the escape group in its additional data, so the coding pair
stays a (symbol, additional data) pair of per-symbol width, exactly what the cores of §4.2 accept::

    direct symbol s < n_direct : code = direct_codes[s],     extra = pair extra             (w bits)
    escape symbol s = n_direct : code = escape_codes[index], extra = index << w | pair extra
                                                                             (w + index_bits bits)

``index_bits = ceil(log2(len(escape_codes)))``. The table (direct codes, escape codes, normalized
frequencies of the symbols, widths) is part of the container and of the core's configuration, so the
hardware sees the escape like any other symbol.

:func:`build_code_table` chooses the escape group that minimizes the tensor's total coded size: the
escape group is always a set of the least frequent codes, and every split point is priced exactly with
the coder's own quantizer (cross-entropy of the quantized frequencies plus the index bits).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .probability import cross_entropy_bits, ideal_bits, leaky_quantize, log2_table, native_precision, normalize_counts

try:  # the optional native kernels (setup.py): the escape search in compiled code; the loop below is the reference
    from . import nativeans
except ImportError:  # pragma: no cover - machines without a compiler
    nativeans = None

__all__ = ["CodeTable", "build_code_table", "Quantizer", "optimal_quantizer", "constriction_quantizer"]

#: Maps symbol counts (int64, every entry > 0) to integer frequencies summing to ``2**precision``.
Quantizer = Callable[[np.ndarray], np.ndarray]


def optimal_quantizer(precision_bits: int) -> Quantizer:
    """The foundation's minimum-cost normalizer (:func:`~ansforge.model.coding.probability.normalize_counts`)."""
    return lambda counts: normalize_counts(counts, precision_bits)


def constriction_quantizer(counts: np.ndarray) -> np.ndarray:
    """constriction's leaky 24-bit quantization of ``counts / counts.sum()``.

    constriction needs at least two symbols; a one-symbol alphabet gets an unused second symbol of
    probability 0, whose leaky frequency is 1 (see :func:`leaky_quantize`).
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.size == 1:
        return leaky_quantize(np.array([1.0, 0.0]), 24)
    return leaky_quantize(c / c.sum(), 24)


@dataclass(frozen=True)
class CodeTable:
    """Symbol alphabet of one tensor for an ANS coder.

    Attributes
    ----------
    direct_codes : tuple of int
        Code (index into the tensor's code→exponent table) of each direct symbol.
    escape_codes : tuple of int
        Codes grouped under the escape symbol, in index order; empty (no escape) or at least 2.
    extra_bits : int
        Width ``w`` of the pair format's additional data (8 for bf16).
    freqs : tuple of int
        Integer frequency of each symbol (direct symbols, then the escape symbol), summing to
        ``2**precision_bits``. Non-zero for every symbol. A one-symbol alphabet may carry a second,
        unused symbol (constriction's models need two).
    precision_bits : int
        ``N``: the table log ``R`` of a tANS coder or the probability precision ``P`` of rANS.
    """

    direct_codes: tuple[int, ...]
    escape_codes: tuple[int, ...]
    extra_bits: int
    freqs: tuple[int, ...]
    precision_bits: int

    def __post_init__(self) -> None:
        # Types and ranges first: a container record reaches here, and 1 << precision_bits of a huge
        # value would exhaust memory before any check below could reject it.
        if not _is_int(self.precision_bits) or not 1 <= self.precision_bits <= 32:
            raise ConfigError(f"code table: precision_bits = {self.precision_bits!r} is not an integer from 1 to 32")
        if not _is_int(self.extra_bits):
            raise ConfigError(f"code table: extra_bits = {self.extra_bits!r} is not an integer")
        for field_name in ("direct_codes", "escape_codes", "freqs"):
            values = getattr(self, field_name)
            if not isinstance(values, tuple) or len(values) > 1 << 16 or not _all_ints(values):
                raise ConfigError(f"code table: {field_name} must be at most 65536 integers")
        n = self.n_symbols
        if n == 0:
            raise ConfigError("code table: an alphabet needs at least one symbol")
        if len(self.escape_codes) == 1:
            raise ConfigError("code table: an escape group needs at least 2 codes (1 code is a direct symbol)")
        codes = list(self.direct_codes) + list(self.escape_codes)
        if len(set(codes)) != len(codes) or min(codes) < 0 or max(codes) >= 1 << 16:
            raise ConfigError(f"code table: codes must be distinct integers from 0 to 65535, got {codes[:8]}"
                              f"{' ...' if len(codes) > 8 else ''}")
        if len(self.freqs) != n and not (n == 1 and len(self.freqs) == 2):
            raise ConfigError(f"code table: freqs has {len(self.freqs)} entries for {n} symbols")
        if min(self.freqs) <= 0:
            s, f = next((s, f) for s, f in enumerate(self.freqs) if f <= 0)
            raise ConfigError(f"code table: freqs[{s}] = {f}; every symbol of the alphabet needs a frequency >= 1")
        if sum(self.freqs) != 1 << self.precision_bits:
            raise ConfigError(
                f"code table: freqs sum to {sum(self.freqs)}, not 2**precision_bits = {1 << self.precision_bits}")
        if not 0 <= self.extra_bits <= 32:
            raise ConfigError(f"code table: extra_bits = {self.extra_bits} is outside 0..32")

    @property
    def n_direct(self) -> int:
        return len(self.direct_codes)

    @property
    def has_escape(self) -> bool:
        return bool(self.escape_codes)

    @property
    def n_symbols(self) -> int:
        return len(self.direct_codes) + (1 if self.escape_codes else 0)

    @property
    def index_bits(self) -> int:
        """Width of the escape index, ``ceil(log2(len(escape_codes)))`` (0 without escape)."""
        return (len(self.escape_codes) - 1).bit_length() if self.escape_codes else 0

    @property
    def symbol_extra_bits(self) -> tuple[int, ...]:
        """Additional-data width of each symbol: ``w`` for direct symbols, ``w + index_bits`` for escape."""
        widths = [self.extra_bits] * self.n_direct
        if self.escape_codes:
            widths.append(self.extra_bits + self.index_bits)
        return tuple(widths)

    @property
    def n_codes(self) -> int:
        return len(self.direct_codes) + len(self.escape_codes)

    def to_symbols(self, codes: np.ndarray, extra: np.ndarray, compact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Map coding pairs to (symbol ``int64``, additional data ``uint64``) of this alphabet;
        ``compact``: ``uint8`` symbols and ``uint32`` additional data where they fit (the compiled
        coders take them as they are: a fifth of the memory traffic); they may then be the inputs
        themselves, not copies."""
        codes = np.asarray(codes).ravel()
        top = int(codes.max()) if codes.size else -1
        size = max(self.n_codes, top + 1)
        small = compact and self.n_symbols < 255 and max(self.symbol_extra_bits) <= 32
        udt = np.uint32 if small else np.uint64
        if small and not self.escape_codes and codes.dtype == np.uint8 and top < self.n_direct and \
                self.direct_codes == tuple(range(self.n_direct)):
            # Every code is its own symbol (the usual case: codes index the exponents that occur):
            # the arrays as they are, no copies (compact results are read-only inputs of the coders).
            return codes, np.asarray(extra).ravel().astype(udt, copy=False)
        sym_of = np.full(size, 255 if small else -1, dtype=np.uint8 if small else np.int64)
        idx_of = np.zeros(size, dtype=udt)
        sym_of[list(self.direct_codes)] = np.arange(self.n_direct)
        if self.escape_codes:
            sym_of[list(self.escape_codes)] = self.n_direct
            idx_of[list(self.escape_codes)] = np.arange(len(self.escape_codes), dtype=udt)
        symbols = sym_of[codes]
        missing = (symbols == 255) if small else (symbols < 0)
        if symbols.size and missing.any():
            bad = int(codes[np.flatnonzero(missing)[0]])
            raise ConfigError(f"code {bad} occurs but is not in the code table")
        extra = np.asarray(extra).ravel().astype(udt)
        if self.escape_codes:
            extra |= idx_of[codes] << udt(self.extra_bits)
        return symbols, extra

    def from_symbols(self, symbols: np.ndarray, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Inverse of :meth:`to_symbols`: (codes ``int64``, pair additional data ``uint64``)."""
        symbols = np.asarray(symbols, dtype=np.int64).ravel()
        extra = np.asarray(extra, dtype=np.uint64).ravel()
        direct = np.asarray(self.direct_codes + (0,), dtype=np.int64)
        codes = direct[np.minimum(symbols, self.n_direct)]
        if self.escape_codes:
            esc = symbols == self.n_direct
            index = (extra[esc] >> np.uint64(self.extra_bits)).astype(np.int64)
            if index.size and int(index.max()) >= len(self.escape_codes):
                raise ConfigError(
                    f"escape index {int(index.max())} is outside the {len(self.escape_codes)}-code escape group")
            codes[esc] = np.asarray(self.escape_codes, dtype=np.int64)[index]
            extra = extra & np.uint64((1 << self.extra_bits) - 1)
        return codes, extra

    def symbol_counts(self, counts: np.ndarray) -> np.ndarray:
        """Occurrences of each symbol (``int64``, escape last) given the tensor's code ``counts``."""
        c = np.asarray(counts, dtype=np.int64)
        size = max(self.direct_codes + self.escape_codes) + 1  # an empty tensor's dummy code lies beyond counts
        c = np.pad(c, (0, max(0, size - c.size)))
        return _symbol_counts(c, list(self.direct_codes), list(self.escape_codes))

    def coded_bits(self, counts: np.ndarray) -> float:
        """Cross-entropy cost in bits of coding codes with ``counts`` (plus escape index bits)."""
        return _cost(np.asarray(counts, dtype=np.int64), self)

    def to_json(self) -> dict:
        return {"direct_codes": list(self.direct_codes), "escape_codes": list(self.escape_codes),
                "extra_bits": self.extra_bits, "freqs": list(self.freqs), "precision_bits": self.precision_bits}

    @classmethod
    def from_json(cls, d: dict) -> "CodeTable":
        """The table of a :meth:`to_json` record; integers must be JSON integers (no floats, no booleans)."""
        if not isinstance(d, dict):
            raise ConfigError(f"code table record must be an object, not {type(d).__name__}")
        keys = ("direct_codes", "escape_codes", "extra_bits", "freqs", "precision_bits")
        missing = [k for k in keys if k not in d]
        if missing:
            raise ConfigError(f"code table record lacks {', '.join(missing)}")
        for k in ("direct_codes", "escape_codes", "freqs"):
            if not isinstance(d[k], list):
                raise ConfigError(f"code table record: {k} must be a list, not {type(d[k]).__name__}")
        return cls(tuple(d["direct_codes"]), tuple(d["escape_codes"]), d["extra_bits"], tuple(d["freqs"]),
                   d["precision_bits"])


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _all_ints(values: tuple) -> bool:
    """Whether every value is an integer (not a bool): exact ``int``s (a JSON record's) are checked by type
    alone, the one test a container's tables need per value."""
    return all(type(v) is int for v in values) or all(_is_int(v) for v in values)


def _symbol_counts(counts: np.ndarray, direct: list[int], escape: list[int]) -> np.ndarray:
    sc = counts[direct].tolist()
    if escape:
        sc.append(int(counts[escape].sum()))
    return np.asarray(sc, dtype=np.int64)


def _cost(counts: np.ndarray, table: CodeTable) -> float:
    sc = _symbol_counts(counts, list(table.direct_codes), list(table.escape_codes))
    return _alphabet_cost(sc, np.asarray(table.freqs, dtype=np.int64), table.precision_bits,
                          table.index_bits if table.escape_codes else None)


def _alphabet_cost(sc: np.ndarray, freqs: np.ndarray, precision_bits: int, index_bits: int | None) -> float:
    """Bits of coding symbol counts ``sc`` with ``freqs``, plus the escape index (``index_bits`` a code
    of the last symbol; ``None``: no escape symbol)."""
    bits = cross_entropy_bits(sc, freqs[:sc.size], precision_bits)
    if index_bits is not None:
        bits += int(sc[-1]) * index_bits
    return bits


def search_escape_split(c: np.ndarray, order: list[int], extra_bits: int, precision_bits: int, capacity: int,
                        max_extra_bits: int, escape: bool, q: Quantizer) -> CodeTable | None:
    """The search of :func:`build_code_table` over its splits (``order``: the occurring codes, most frequent
    first), in NumPy with any quantizer: the reference of the compiled search (``nativeans.code_table_search``)
    and what runs where that is not built or the quantizer is not the default. ``None``: no split fits."""
    n = len(order)
    best: tuple | None = None
    for n_direct in range(n, -1, -1):
        direct, group = order[:n_direct], order[n_direct:]
        if len(group) == 1 or (n_direct == 0 and n > 1 and not group):
            continue
        if group and not escape:
            break
        n_sym = n_direct + (1 if group else 0)
        if n_sym > capacity:
            continue
        index_bits = (len(group) - 1).bit_length() if group else 0
        if extra_bits + index_bits > max_extra_bits:
            continue
        direct, group = sorted(direct), sorted(group)
        sc = _symbol_counts(c, direct, group)
        # No table codes sc in fewer bits than its ideal (Gibbs' inequality), so a candidate whose ideal
        # plus escape indices already exceeds the best cost cannot win: it is not normalized (the costly
        # step). The margin covers the rounding of both sums, so the choice is the full search's.
        if best is not None and ideal_bits(sc) + (int(sc[-1]) * index_bits if group else 0) \
                > best[0] * (1 + 1e-9) + 1e-6:
            continue
        freqs = np.asarray(q(sc), dtype=np.int64)
        # The candidate's cost without building its table: a CodeTable checks itself, about a sixth of
        # this search's time when every candidate was built.
        cost = _alphabet_cost(sc, freqs, precision_bits, index_bits if group else None)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, direct, group, freqs)
        if not escape:
            break
    if best is None:
        return None
    _, direct, group, freqs = best
    return CodeTable(tuple(direct), tuple(group), extra_bits, tuple(int(v) for v in freqs), precision_bits)


def _search_native(c: np.ndarray, order: list[int], extra_bits: int, precision_bits: int, capacity: int,
                   max_extra_bits: int, escape: bool) -> CodeTable | None:
    """:func:`search_escape_split` with the default quantizer, compiled: the same floats (NumPy's
    logarithms passed in, NumPy's pairwise sums), so the same table, tie for tie."""
    o = np.asarray(order, dtype=np.int64)
    groups = np.zeros(o.size + 1, dtype=np.int64)  # groups[k]: the summed counts of order[k:]
    groups[:-1] = np.cumsum(c[o][::-1])[::-1]
    with np.errstate(divide="ignore"):
        log_counts = np.log2(c.astype(np.float64))
        log_groups = np.log2(groups.astype(np.float64))
    got = nativeans.code_table_search(o, c, log_counts, log_groups, log2_table(precision_bits),
                                      math.log2(float(c.sum())), precision_bits, extra_bits, max_extra_bits,
                                      capacity, escape)
    if got is None:
        return None
    n_direct, freqs = got
    return CodeTable(tuple(sorted(order[:n_direct])), tuple(sorted(order[n_direct:])), extra_bits,
                     tuple(np.frombuffer(freqs, dtype=np.int64).tolist()), precision_bits)


def build_code_table(counts: np.ndarray, extra_bits: int, precision_bits: int, *,
                     quantizer: Quantizer | None = None, max_symbols: int = 256,
                     max_extra_bits: int = 32, escape: bool = True) -> CodeTable:
    """Choose direct codes, escape group and frequencies of minimum total size for ``counts``.

    Parameters
    ----------
    counts : array of int, shape (n_codes,)
        Occurrences of each code of the tensor; codes with count 0 are left out of the alphabet.
    extra_bits : int
        Additional-data width of the pair format.
    precision_bits : int
        Frequencies sum to ``2**precision_bits``.
    quantizer
        Counts → frequencies; default :func:`optimal_quantizer` of ``precision_bits``.
    max_symbols : int
        Largest alphabet the core accepts (the paper's cores: 64); codes beyond it must escape.
    max_extra_bits : int
        Largest additional-data width the core accepts; bounds ``extra_bits + index_bits``.
    escape : bool
        ``False`` forbids the escape symbol (every occurring code is direct).
    """
    c = np.asarray(counts)
    if c.ndim != 1 or c.dtype.kind not in "iu" or (c.size and c.min() < 0):
        raise ConfigError("counts must be a 1-D array of non-negative integers")
    c = c.astype(np.int64)
    if extra_bits > max_extra_bits:
        raise ConfigError(f"extra_bits = {extra_bits} exceeds the core's maximum additional-data width {max_extra_bits}")
    occurring = [int(i) for i in np.flatnonzero(c)]
    if not occurring:  # an empty tensor still gets a valid (unused) one-symbol alphabet
        c = np.ones(1, dtype=np.int64)
        occurring = [0]
    # Most frequent first; ties by code so the choice is reproducible.
    order = sorted(occurring, key=lambda i: (-int(c[i]), i))
    n = len(order)
    capacity = min(max_symbols, 1 << precision_bits)
    if quantizer is None and nativeans is not None and native_precision(precision_bits):
        best = _search_native(c, order, extra_bits, int(precision_bits), capacity, max_extra_bits, escape)
    else:
        best = search_escape_split(c, order, extra_bits, precision_bits, capacity, max_extra_bits, escape,
                                   quantizer or optimal_quantizer(precision_bits))
    if best is None:
        raise ConfigError(
            f"{n} codes occur, but a {capacity}-symbol alphabet with at most {max_extra_bits} additional-data "
            f"bits cannot hold them (raise max_symbols or max_extra_bits, or allow the escape symbol)")
    return best

