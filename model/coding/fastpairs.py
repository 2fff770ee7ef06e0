"""Compiled passes between a tensor's values and its coding pairs (§2), bit-exact with NumPy's.

What :meth:`~ansforge.model.dtypes.pairs.IeeeFloatPairs.split`, ``CodingPairs.counts``,
:meth:`~ansforge.model.coding.codetable.CodeTable.to_symbols` and ``from_symbols`` with
``IeeeFloatPairs.join`` compute, each in one or two passes over the tensor where the NumPy versions
make some ten temporaries of it. Each returns ``None`` or ``False`` where its kernel does not apply
(no native kernels, a format or table outside the kernel's limits), and the caller computes in NumPy:
``tests/model/test_native.py`` compares both on every path. The kernels are chosen by :mod:`.kernels`.
"""

from __future__ import annotations

import numpy as np

from .kernels import NATIVE_OUT, nativeans, native, numba

__all__ = ["join_values", "split_pairs", "code_counts", "map_symbols"]

#: Row shifts of none (the kernels' "no shift" argument).
_NO_SHIFTS = np.zeros(0, np.uint8)



def join_values(code_table, exponents: np.ndarray, fmt, symbols: np.ndarray, extras: np.ndarray) -> np.ndarray | None:
    """A tensor's bit patterns (``fmt.bits_dtype``) from its decoded pairs, in one compiled pass: what
    :meth:`CodeTable.from_symbols` and :meth:`IeeeFloatPairs.join` compute. ``None`` when a code lies
    outside the tensor's exponent table or an escape index outside its group (the caller reports it)."""
    exps = np.asarray(exponents, dtype=np.int64)
    codes = np.asarray(code_table.direct_codes + code_table.escape_codes, dtype=np.int64)
    if codes.size and int(codes.max()) >= exps.size and symbols.size:
        return None
    direct = exps[np.minimum(np.asarray(code_table.direct_codes, np.int64), max(exps.size - 1, 0))] if exps.size \
        else np.zeros(len(code_table.direct_codes), np.int64)
    esc = exps[np.asarray(code_table.escape_codes, np.int64)] if code_table.escape_codes else np.zeros(0, np.int64)
    out = np.empty(symbols.size, dtype=fmt.bits_dtype)
    if native() and (symbols.dtype, extras.dtype) in NATIVE_OUT and fmt.total_bits <= 64:
        bad = nativeans.join(symbols, extras, direct, esc, code_table.n_direct, fmt.extra_bits, fmt.mantissa_bits,
                             fmt.total_bits - 1, _NO_SHIFTS, 1, 0, out)
        return None if bad >= 0 else out
    bad = numba().join_values(symbols, extras, direct, esc, code_table.n_direct, fmt.extra_bits, fmt.mantissa_bits,
                       fmt.total_bits, out)
    return None if bad >= 0 else out


def split_pairs(fmt, values: np.ndarray):
    """``(fmt.split(values), exponent histogram)`` in two compiled passes (histogram, then codes and
    additional data; NumPy's split makes some ten temporaries of the tensor), or ``None`` where the
    native kernels do not run or ``fmt`` is not a 16- or 32-bit format of at most 8 exponent bits
    (the caller splits in NumPy then). ``fmt`` is an :class:`~ansforge.model.dtypes.pairs.IeeeFloatPairs`;
    the histogram (``int64``, ``2**exponent_bits`` entries) counts every exponent field, so its last
    entry is the number of NaN/Inf values."""
    from ..dtypes.pairs import CodingPairs
    if not native() or fmt.exponent_bits > 8 or fmt.total_bits not in (16, 32):
        return None
    bits = np.ascontiguousarray(fmt.as_bits(values))
    flat = bits.reshape(-1)
    hist = np.zeros(1 << fmt.exponent_bits, dtype=np.int64)
    nativeans.field_hist(flat, fmt.mantissa_bits, (1 << fmt.exponent_bits) - 1, hist)
    exponents = np.flatnonzero(hist).astype(np.uint16)
    lut = np.zeros(1 << fmt.exponent_bits, dtype=np.uint8)
    lut[exponents] = np.arange(exponents.size, dtype=np.uint8)
    codes = np.empty(flat.size, dtype=np.uint8)
    extra = np.empty(flat.size, dtype=fmt.bits_dtype)
    nativeans.split_pairs(flat, fmt.mantissa_bits, fmt.total_bits, lut, codes, extra)
    widths = np.full(exponents.size, fmt.extra_bits, dtype=np.uint8)
    return CodingPairs(codes, extra, widths, exponents, tuple(bits.shape)), hist


def code_counts(pairs) -> np.ndarray:
    """``pairs.counts()`` (occurrences of each code, ``int64``) in one compiled pass where the codes
    are bytes (NumPy's bincount first widens them to 8-byte integers)."""
    codes = np.asarray(pairs.codes)
    if not native() or codes.dtype != np.uint8 or not codes.flags.c_contiguous:
        return pairs.counts()
    hist = np.zeros(max(256, pairs.n_codes), dtype=np.int64)
    nativeans.field_hist(codes.reshape(-1), 0, 255, hist)
    # bincount's length: the table's codes, or up to the largest code that occurs if that is beyond it
    used = np.flatnonzero(hist[:256])
    return hist[: max(pairs.n_codes, int(used[-1]) + 1 if used.size else 0)].copy()


def map_symbols(code_table, pairs, shifts, out_s: np.ndarray, out_e: np.ndarray) -> bool:
    """``code_table.to_symbols(pairs)`` with the row shifts ``shifts`` (``(z per row, values per row)``
    of :func:`~.container.row_shifts`, or ``None``) applied to the additional data, written into
    ``out_s`` (``uint8``) and ``out_e`` (``uint32``) in one compiled pass. ``False`` where it does not
    apply (no native kernels, codes wider than a byte, more than 254 symbols or 32 additional-data
    bits): the caller maps in NumPy then. A code outside the table raises :class:`ConfigError`."""
    from ..errors import ConfigError
    codes, extra = np.asarray(pairs.codes).reshape(-1), np.asarray(pairs.extra).reshape(-1)
    if not native() or codes.dtype != np.uint8 or extra.dtype not in (np.uint16, np.uint32) or \
            code_table.n_symbols >= 255 or max(code_table.symbol_extra_bits) > 32 or \
            max(code_table.direct_codes + code_table.escape_codes) > 255:
        return False
    sym_of = np.full(256, 255, dtype=np.uint8)
    idx_of = np.zeros(256, dtype=np.uint32)
    sym_of[list(code_table.direct_codes)] = np.arange(code_table.n_direct)
    if code_table.escape_codes:
        sym_of[list(code_table.escape_codes)] = code_table.n_direct
        idx_of[list(code_table.escape_codes)] = np.arange(len(code_table.escape_codes), dtype=np.uint32)
    z, per_row = (np.asarray(shifts[0], dtype=np.uint8), int(shifts[1])) if shifts is not None else (_NO_SHIFTS, 1)
    bad = nativeans.map_symbols(np.ascontiguousarray(codes), np.ascontiguousarray(extra), sym_of, idx_of,
                                code_table.extra_bits, z, per_row, out_s, out_e)
    if bad >= 0:
        raise ConfigError(f"code {int(codes[bad])} occurs but is not in the code table")
    return True
