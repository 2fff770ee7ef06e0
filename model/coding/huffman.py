"""DFloat11-style Huffman coding of bf16 weights: the peer the benchmarks time beside the ANS coders.

DFloat11 (Zhang et al., 2025, "70% Size, 100% Accuracy") stores a bf16 tensor as two arrays: the
8-bit exponents, Huffman-coded with one code per tensor (or per transformer block), and a raw byte
per weight holding the sign and the 7 mantissa bits. This module is that layout, as the project's
own implementation (DFloat11's decoder is a CUDA kernel and does not run on a CPU):

* the code: canonical Huffman, code lengths from :func:`code_lengths`, at most ``max_length`` bits
  (32, as DFloat11); codes are assigned in order of (length, exponent), so the 256 lengths alone
  describe the code (8 bits each when stored, as ``analysis.table1.huffman_bits`` charges them);
* the payload: the codes of the exponents in tensor order, most significant bit first, packed into
  bytes from the top bit (the last byte zero-padded);
* the raw bytes: ``sign << 7 | mantissa`` per weight, in tensor order.

:func:`encode_bf16` / :func:`decode_bf16` are the golden model (NumPy, and a bit-serial decoder a
reader can check against the definition); ``fastans``'s native extension has the same coder as
compiled loops (``huff_encode_bf16``, ``huff_decode_bf16``), which ``encode_bf16_native`` and
``decode_bf16_native`` call and ``tests/model/test_huffman.py`` holds bit-exact against this model.

A hardware note, since the project is about cores: a Huffman decoder of this kind resolves one code
per clock only with a table of 2^L entries or a comparator per code length; the tANS core of Table 3
decodes a pair per clock from a 2^R-entry table with the additional data in the same stream.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..errors import AnsforgeError

__all__ = ["MAX_CODE_LENGTH", "HuffmanBf16", "code_lengths", "canonical_codes", "split_bf16",
           "encode_bf16", "decode_bf16", "encode_bf16_native", "decode_bf16_native", "native_available"]

#: DFloat11's limit on a code's length (its decoder's four 8-bit lookup levels).
MAX_CODE_LENGTH = 32


def _plain_lengths(c: np.ndarray) -> np.ndarray:
    lengths = np.zeros(c.size, dtype=np.int64)
    live = [int(i) for i in np.flatnonzero(c)]
    if len(live) == 1:
        lengths[live[0]] = 1  # a lone symbol still needs a code a decoder can read
        return lengths
    heap = [(int(c[i]), i, [i]) for i in live]
    heapq.heapify(heap)
    tie = c.size
    while len(heap) > 1:
        a, _, sa = heapq.heappop(heap)
        b, _, sb = heapq.heappop(heap)
        for i in sa + sb:
            lengths[i] += 1
        heapq.heappush(heap, (a + b, tie, sa + sb))
        tie += 1
    return lengths


def code_lengths(counts: np.ndarray, max_length: int | None = MAX_CODE_LENGTH) -> np.ndarray:
    """Huffman code lengths (bits, int64) of symbols with ``counts``; zero counts get length 0.

    With ``max_length``, a code longer than that is avoided by halving the counts (rounding up, so no
    symbol disappears) and building again until it fits: what a DFloat11-style coder does when a tensor's
    rarest exponents would need codes longer than its decoder's tables. ``None`` gives the unlimited code.
    """
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim != 1 or (c < 0).any():
        raise AnsforgeError("Huffman: counts must be a 1-D array of non-negative integers")
    if max_length is not None and np.count_nonzero(c) > (1 << max_length):
        raise AnsforgeError(f"Huffman: {np.count_nonzero(c)} symbols do not fit codes of {max_length} bits")
    lengths = _plain_lengths(c)
    while max_length is not None and lengths.max(initial=0) > max_length:
        c = np.where(c > 0, (c + 1) // 2, 0)
        lengths = _plain_lengths(c)
    return lengths


def canonical_codes(lengths: np.ndarray) -> np.ndarray:
    """The canonical code (uint64, right-aligned in ``lengths[s]`` bits) of every symbol: codes in order
    of (length, symbol), each the previous one plus one, shifted left when the length grows."""
    lengths = np.asarray(lengths, dtype=np.int64)
    codes = np.zeros(lengths.size, dtype=np.uint64)
    code, prev = 0, 0
    for s in sorted(np.flatnonzero(lengths), key=lambda s: (int(lengths[s]), int(s))):
        n = int(lengths[s])
        code <<= n - prev
        codes[s] = code
        code += 1
        prev = n
    if prev and code > (1 << prev):
        raise AnsforgeError("Huffman: the code lengths overflow a prefix code (Kraft sum above 1)")
    return codes


@dataclass(frozen=True)
class HuffmanBf16:
    """One bf16 tensor in the DFloat11 layout.

    ``lengths``: uint8[256], the code length of each exponent (0 = absent); ``payload``: the exponent
    codes, ``nbits`` bits, MSB first; ``raw``: uint8 per weight, ``sign << 7 | mantissa``.
    """
    lengths: np.ndarray
    payload: bytes
    nbits: int
    raw: np.ndarray

    @property
    def size_bytes(self) -> int:
        """Bytes stored: payload, raw bytes, and one byte per exponent the code has (its length: the
        charge ``analysis.table1.huffman_bits`` makes for the code table)."""
        return len(self.payload) + int(self.raw.size) + int(np.count_nonzero(self.lengths))


def split_bf16(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(exponent, sign << 7 | mantissa) bytes of bf16 bit patterns (uint16)."""
    v = np.asarray(values)
    if v.dtype != np.uint16:
        raise AnsforgeError(f"Huffman: bf16 bit patterns must be uint16, got {v.dtype}")
    v = v.ravel()
    exponents = ((v >> 7) & 0xFF).astype(np.uint8)
    raw = (((v >> 8) & 0x80) | (v & 0x7F)).astype(np.uint8)
    return exponents, raw


def _table(values: np.ndarray, lengths: np.ndarray | None, max_length: int) -> np.ndarray:
    if lengths is None:
        exponents, _ = split_bf16(values)
        lengths = code_lengths(np.bincount(exponents, minlength=256), max_length)
    lengths = np.asarray(lengths)
    if lengths.shape != (256,) or (lengths < 0).any() or (lengths > MAX_CODE_LENGTH).any():
        raise AnsforgeError(f"Huffman: code lengths must be 256 values in 0..{MAX_CODE_LENGTH}")
    return lengths.astype(np.uint8)


def encode_bf16(values: np.ndarray, lengths: np.ndarray | None = None,
                max_length: int = MAX_CODE_LENGTH) -> HuffmanBf16:
    """Golden encoder: ``values`` (uint16 bf16 patterns) with the given code ``lengths`` (uint8[256],
    e.g. one code shared by a layer) or, by default, the tensor's own length-limited Huffman code."""
    lengths = _table(values, lengths, max_length)
    exponents, raw = split_bf16(values)
    lens = lengths.astype(np.int64)[exponents]
    if exponents.size and (lens == 0).any():
        e = int(exponents[np.flatnonzero(lens == 0)[0]])
        raise AnsforgeError(f"Huffman: exponent {e} has no code in the table")
    codes = canonical_codes(lengths)[exponents]
    bits = np.zeros(int(lens.sum()), dtype=np.uint8)
    ends = np.cumsum(lens)
    starts = ends - lens
    for b in range(int(lengths.max(initial=0))):  # bit b of each code, counted from its top
        has = lens > b
        bits[starts[has] + b] = ((codes[has] >> (lens[has] - 1 - b).astype(np.uint64)) & 1).astype(np.uint8)
    return HuffmanBf16(lengths, np.packbits(bits).tobytes(), int(bits.size), raw)


def decode_bf16(h: HuffmanBf16) -> np.ndarray:
    """Golden decoder, one bit at a time as the definition reads (slow: for checking, not for use)."""
    lengths = np.asarray(h.lengths, dtype=np.int64)
    codes = canonical_codes(lengths)
    lookup = {(int(lengths[s]), int(codes[s])): s for s in np.flatnonzero(lengths)}
    bits = np.unpackbits(np.frombuffer(h.payload, dtype=np.uint8))
    if h.nbits > bits.size:
        raise AnsforgeError(f"Huffman: payload holds {bits.size} bits, the header says {h.nbits}")
    out = np.zeros(h.raw.size, dtype=np.uint16)
    pos = 0
    longest = int(lengths.max(initial=0))
    for i in range(h.raw.size):
        code, n = 0, 0
        while True:
            if n == longest or pos >= h.nbits:
                raise AnsforgeError(f"Huffman: no code at bit {pos - n} (weight {i})")
            code = (code << 1) | int(bits[pos])
            pos += 1
            n += 1
            if (n, code) in lookup:
                break
        e, r = lookup[(n, code)], int(h.raw[i])
        out[i] = ((r & 0x80) << 8) | (e << 7) | (r & 0x7F)
    if pos != h.nbits:
        raise AnsforgeError(f"Huffman: {h.nbits - pos} payload bits left after the last weight")
    return out


# -------------------------------------------------------------------------------------------------
# The compiled coder (the benchmarks' speed rows).

def _native():
    try:
        from . import nativeans
    except ImportError:
        return None
    return nativeans if hasattr(nativeans, "huff_decode_bf16") else None


def native_available() -> bool:
    """Whether the native extension (with the Huffman loops) is built."""
    return _native() is not None


def _need_native():
    mod = _native()
    if mod is None:
        raise AnsforgeError("Huffman: the native extension is not built (pip install -e . with a C compiler)")
    return mod


def encode_bf16_native(values: np.ndarray, lengths: np.ndarray | None = None,
                       max_length: int = MAX_CODE_LENGTH) -> HuffmanBf16:
    """:func:`encode_bf16` as one compiled pass (bit-exact with it)."""
    mod = _need_native()
    lengths = _table(values, lengths, max_length)
    v = np.ascontiguousarray(np.asarray(values).ravel())
    if v.dtype != np.uint16:
        raise AnsforgeError(f"Huffman: bf16 bit patterns must be uint16, got {v.dtype}")
    codes = canonical_codes(lengths).astype(np.uint32)
    payload = np.zeros(v.size * int(lengths.max(initial=0)) // 8 + 16, dtype=np.uint8)
    raw = np.empty(v.size, dtype=np.uint8)
    nbits = mod.huff_encode_bf16(v, codes, lengths, payload, raw)
    if nbits < 0:
        e = int((v[-nbits - 1] >> 7) & 0xFF)
        raise AnsforgeError(f"Huffman: exponent {e} has no code in the table")
    return HuffmanBf16(lengths, payload[: (nbits + 7) // 8].tobytes(), int(nbits), raw)


def decode_bf16_native(h: HuffmanBf16, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`decode_bf16` as one compiled pass with a 2^12-entry first-level table (codes up to 12 bits
    in one lookup, longer ones by the canonical first-code comparison)."""
    mod = _need_native()
    lengths = np.asarray(h.lengths)
    if lengths.shape != (256,) or (lengths > MAX_CODE_LENGTH).any():
        raise AnsforgeError(f"Huffman: code lengths must be 256 values in 0..{MAX_CODE_LENGTH}")
    canonical_codes(lengths)  # refuses lengths that are no prefix code
    raw = np.ascontiguousarray(h.raw, dtype=np.uint8)
    if out is None:
        out = np.empty(raw.size, dtype=np.uint16)
    if out.dtype != np.uint16 or out.size != raw.size:
        raise AnsforgeError("Huffman: the output must be uint16 with one item per raw byte")
    if h.nbits < 0 or h.nbits > 8 * len(h.payload):
        raise AnsforgeError(f"Huffman: payload holds {8 * len(h.payload)} bits, the header says {h.nbits}")
    status = mod.huff_decode_bf16(h.payload, h.nbits, raw, lengths.astype(np.uint8), out)
    if status == -2:
        raise AnsforgeError(f"Huffman: payload bits left after the last weight ({h.nbits} bits in all)")
    if status >= 0:
        raise AnsforgeError(f"Huffman: no code in the payload for weight {status}")
    return out
