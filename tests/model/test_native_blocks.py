"""What the native kernels do once per independent block of a container (docs/bitstream.md §6), checked
against the definitions they replace: the block CRC (``nativecrc.c``: zlib's CRC-32 of the words in
decoding order) on every path the CPU has, the stream heads (``tans_heads``: the golden ``stream_head`` of
many blocks at once) with their bad heads, and the tANS decoder tables built from a container's spread
against a plain loop over the states."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ansforge.model.coding import nativeans
from ansforge.model.coding.codetable import CodeTable
from ansforge.model.coding.stream import StreamError, block_crc, block_crcs
from ansforge.model.coding.tans import TansParams, TansTable, stream_head


def _zlib_reversed(words: np.ndarray, lo: int, hi: int) -> int:
    """The block CRC by its definition: zlib over the words' little-endian bytes, address hi - 1 first."""
    return zlib.crc32(np.ascontiguousarray(words[lo:hi][::-1]).astype(words.dtype.newbyteorder("<")).tobytes())


@pytest.mark.parametrize("path", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_block_crc_is_zlib_over_the_reversed_words_on_every_path(path, dtype):
    """Every folding path (byte-wise, 128-bit and 512-bit carry-less folds, as far as the CPU has them)
    on lengths around each path's thresholds (64 and 256 bytes) and their folding strides, at every
    alignment, and several ranges of one array in one call."""
    rng = np.random.default_rng(path * 10 + np.dtype(dtype).itemsize)
    words = rng.integers(0, 1 << 32, 5000, dtype=np.uint64).astype(dtype)
    wb = np.dtype(dtype).itemsize
    lengths = sorted({n // wb + d for n in (0, 16, 48, 64, 128, 256, 320, 512, 1024, 4096) for d in (-1, 0, 1)
                      if n // wb + d >= 0})
    ranges = [(lo, lo + n) for n in lengths for lo in (0, 1, 3, 7) if lo + n <= words.size]
    old = nativeans.crc32_path(-1)
    try:
        got_path = nativeans.crc32_path(path)
        assert got_path == min(path, old)
        got = block_crcs(words, ranges)
    finally:
        nativeans.crc32_path(old)
    assert got == [_zlib_reversed(words, lo, hi) for lo, hi in ranges]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3000), st.data())
def test_block_crc_of_random_ranges(n, data):
    words = np.random.default_rng(n).integers(0, 1 << 16, n, dtype=np.uint64).astype(np.uint16)
    lo = data.draw(st.integers(0, n))
    hi = data.draw(st.integers(lo, n))
    assert block_crc(words, lo, hi) == _zlib_reversed(words, lo, hi)


def test_block_crc_kernel_checks_its_ranges():
    words = np.zeros(10, np.uint16)
    out = np.zeros(1, np.uint64)
    with pytest.raises(ValueError, match="outside the 10 words"):
        nativeans.crc32_blocks(words, np.array([2]), np.array([11]), out)
    with pytest.raises(ValueError, match="1, 2 or 4 bytes"):
        nativeans.crc32_blocks(np.zeros(4, np.uint64), np.array([0]), np.array([1]), out)


def _golden_head(words: np.ndarray, lo: int, hi: int, R: int, N: int):
    """(B, states) by the golden ``stream_head`` of the block's own words, or None where it raises."""
    W = 8 * words.dtype.itemsize
    try:
        h, cnt, _, state = stream_head(words[lo:hi].tolist(), R, W, N)
    except StreamError:
        return None
    return (lo + h) * W + cnt, list(state) if N > 1 else [state]


@pytest.mark.parametrize("dtype,R,N", [(np.uint16, 8, 16), (np.uint16, 8, 1), (np.uint8, 5, 3), (np.uint32, 11, 7),
                                       (np.uint16, 12, 16)])
def test_stream_heads_are_the_golden_ones(dtype, R, N):
    """Blocks side by side, some too short for their final states, some with an empty top word (no
    marker): every good head equals the golden one, and the first bad block is the one reported."""
    rng = np.random.default_rng(R * 100 + N)
    W = 8 * np.dtype(dtype).itemsize
    sizes = rng.integers(0, 2 + (N * R) // W * 2, 40)
    words = rng.integers(0, 1 << W, int(sizes.sum()), dtype=np.uint64).astype(dtype)
    his = np.cumsum(sizes)
    los = his - sizes
    for b in range(0, 40, 7):  # an empty top word: no marker
        if sizes[b]:
            words[his[b] - 1] = 0
    want = [_golden_head(words, int(lo), int(hi), R, N) for lo, hi in zip(los, his)]
    first_bad = next((b for b, w in enumerate(want) if w is None), -1)
    Bs = np.zeros(40, np.int64)
    Xs = np.zeros(40 * N, np.int64)
    assert nativeans.tans_heads(words, W, R, N, los.astype(np.int64), his.astype(np.int64), Bs, Xs) == first_bad
    for b in range(first_bad if first_bad >= 0 else 40):
        assert (int(Bs[b]), Xs[b * N:(b + 1) * N].tolist()) == want[b]
    # the good blocks alone give no error
    good = [b for b, w in enumerate(want) if w is not None]
    Bs, Xs = np.zeros(len(good), np.int64), np.zeros(len(good) * N, np.int64)
    assert nativeans.tans_heads(words, W, R, N, los[good].astype(np.int64), his[good].astype(np.int64), Bs, Xs) == -1
    assert [(int(Bs[i]), Xs[i * N:(i + 1) * N].tolist()) for i in range(len(good))] == [want[b] for b in good]


def _plain_tables(freqs: list[int], spread: list[int], R: int):
    """The tANS tables of a spread by a loop over the states (docs/bitstream.md §3): state index x of
    symbol s is s's occurrence number o = f_s, f_s + 1, ... in increasing x; it reads nb = R + 1 -
    bit_length(o) bits to base (o << nb) - L; the encoder's slot cum_s + o - f_s holds x."""
    L = 1 << R
    cum = [sum(freqs[:s]) for s in range(len(freqs))]
    seen = [0] * len(freqs)
    nb, base, enc = [0] * L, [0] * L, [0] * L
    for x, s in enumerate(spread):
        o = freqs[s] + seen[s]
        seen[s] += 1
        nb[x] = R + 1 - o.bit_length()
        base[x] = (o << nb[x]) - L
        enc[cum[s] + o - freqs[s]] = x
    nbh = [R + 1 - f.bit_length() for f in freqs]
    return nb, base, enc, nbh, [f << n for f, n in zip(freqs, nbh)]


@settings(max_examples=80, deadline=None)
@given(st.integers(5, 12), st.data())
def test_tans_tables_from_a_spread_are_the_plain_loops(R, data):
    L = 1 << R
    n = data.draw(st.integers(1, min(L, 20)))
    cuts = sorted(data.draw(st.lists(st.integers(1, L - 1), min_size=n - 1, max_size=n - 1, unique=True))) if n > 1 else []
    freqs = [b - a for a, b in zip([0, *cuts], [*cuts, L])]
    spread = data.draw(st.permutations([s for s, f in enumerate(freqs) for _ in range(f)]))
    ct = CodeTable(tuple(range(n)), (), 4, tuple(freqs), R)
    table = TansTable(ct, TansParams(R, 16, 64, 8), "tuned", symbols=np.asarray(spread, np.uint8 if n <= 256 else np.int64))
    nb, base, enc, nbh, thr = _plain_tables(freqs, spread, R)
    assert table.symbol.tolist() == spread
    assert (table.nb_bits.tolist(), table.base.tolist(), table.encode_state.tolist()) == (nb, base, enc)
    assert (table.nb_high.tolist(), table.threshold.tolist()) == (nbh, thr)


@pytest.mark.parametrize("bad", [[0] * 31 + [1], [1] * 32, [0] * 16 + [1] * 15 + [2], [-1] + [0] * 15 + [1] * 16,
                                 [0.0] * 16 + [1.0] * 16, [0] * 16 + [1] * 17])
def test_tans_spread_that_does_not_match_the_frequencies_is_refused(bad):
    ct = CodeTable((0, 1), (), 4, (16, 16), 5)
    with pytest.raises(ValueError, match="exactly freqs"):
        TansTable(ct, TansParams(5, 16, 64, 8), "tuned", symbols=np.asarray(bad))
