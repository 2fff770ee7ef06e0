"""What the golden tANS and rANS coders share: runs of tables, checkpoints, encoded streams, errors.

A **stream** codes a sequence of coding pairs, already mapped to (symbol, additional data) by each
tensor's :class:`~ansforge.model.coding.codetable.CodeTable`. Consecutive pairs coded with the same table form
a **run**; a stream that holds several tensors switches table at each tensor boundary, as the paper's
decompressor does between matrices. The bit-level rules are in ``docs/bitstream.md``.

Words are a **stack**: the encoder (which runs back to front, paper §4.1) appends words at increasing
addresses, the decoder reads them from the highest address down. A **checkpoint** lets a decoder start
at pair ``pair`` (§4.4: "besides the memory location and a bit pointer, we also need some information
on the status of the decompressor"):

``word``
    number of words still to be read (the decoder next reads address ``word - 1``);
``bit``
    number of not yet consumed bits left in the word at address ``word`` (its low bits; tANS only);
``state``
    the coder state (tANS: state index ``0 .. 2**R - 1``; rANS: the ``S``-bit state). A stream of
    ``N > 1`` interleaved states (``docs/bitstream.md`` §8) stores a tuple of ``N`` states, lane
    ``k``'s state at index ``k``: the decoder codes pair ``pair`` with state ``pair mod N``. A stream
    of one state keeps a plain ``int``, so its checkpoints and container records are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
import zlib
from dataclasses import dataclass, field

import numpy as np

from ..errors import AnsforgeError, ConfigError
from . import kernels

__all__ = ["Checkpoint", "EncodedStream", "StreamError", "Run", "check_runs", "table_at", "CHUNK",
           "reverse_chunks", "DecodeWindow", "word_list", "word_dtype", "block_ranges", "block_crc", "block_crcs",
           "check_checkpoint_interval", "MAX_STATES", "pack_states", "check_checkpoint", "Block", "block_spans",
           "clip_runs", "BLOCK_PAIRS"]

#: Most interleaved states a stream may have (``TansParams.states``, ``RansParams.states``).
MAX_STATES = 16

#: Pairs converted to Python lists at a time by the golden loops (bounds their memory).
CHUNK = 1 << 16

#: Most pairs of one independent block (container version 6, ``docs/bitstream.md`` §6): a tensor's
#: pairs are cut into blocks of this many pairs, the last one shorter (a tensor smaller than this is
#: one block).
BLOCK_PAIRS = 1 << 18


def check_checkpoint_interval(k: int | None) -> int:
    """A coder's ``checkpoint_interval`` (pairs between checkpoints) checked: ``None`` or 0 → 0 (no
    checkpoints), else a positive integer; anything else raises :class:`ConfigError`."""
    if k is None or k == 0:
        return 0
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"checkpoint_interval must be a positive integer, not {k!r}")
    return int(k)


class StreamError(AnsforgeError):
    """A word stream that cannot be what the encoder produced (truncated, corrupted or mismatched)."""


@dataclass(frozen=True)
class Checkpoint:
    """Decoder state before pair ``pair`` (see the module docstring): ``state`` is an ``int`` for one
    state, a tuple of ``N`` ints (lane ``k`` at index ``k``) for ``N > 1`` interleaved states."""

    pair: int
    word: int
    bit: int
    state: int | tuple[int, ...]

    def as_tuple(self) -> tuple:
        return (self.pair, self.word, self.bit, self.state)

    @property
    def lane_states(self) -> tuple[int, ...]:
        """The states as a tuple, one per lane (``(state,)`` for a single-state stream)."""
        return self.state if isinstance(self.state, tuple) else (self.state,)

    def to_record(self) -> list:
        """The container's checkpoint record: ``[pair, word, bit, state]``, or ``[pair, word, bit,
        [s0, ..., s_{N-1}]]`` for ``N > 1`` states."""
        st = self.state
        return [self.pair, self.word, self.bit, list(st) if isinstance(st, tuple) else st]


def check_checkpoint(c: Checkpoint, start: int, h: int, W: int, states: int, limit: int, mid_word: bool) -> None:
    """Raise :class:`StreamError` unless checkpoint ``c`` can start a decoder of a stream of ``h`` words
    at or before pair ``start``: ``0 <= pair <= start``, ``0 <= word <= h``, ``bit`` inside a word
    (tANS, ``mid_word``; it needs the word at address ``word``) or 0 (rANS), and ``states`` states
    (an ``int`` for one, a tuple of ``states`` ints otherwise) each in ``0 .. limit - 1``."""
    st = c.state
    ok_state = (isinstance(st, tuple) and len(st) == states > 1) or (states == 1 and not isinstance(st, tuple))
    if not (0 <= c.pair <= start and 0 <= c.word <= h and ok_state
            and (0 <= c.bit < W and not (c.bit and c.word >= h) if mid_word else c.bit == 0)
            and all(0 <= v < limit for v in c.lane_states)):
        raise StreamError(f"checkpoint {c.as_tuple()} does not fit this stream")


def pack_states(states) -> int | tuple[int, ...]:
    """A checkpoint's ``state`` field from the lanes' states: the ``int`` itself for one state (today's
    records), a tuple of ints for ``N > 1``."""
    states = [int(v) for v in states]
    return states[0] if len(states) == 1 else tuple(states)


@dataclass(frozen=True)
class Run:
    """``count`` consecutive pairs coded with ``tables[table]``."""

    table: int
    count: int


@dataclass
class EncodedStream:
    """Output of a golden encoder: the words (encoder order) and the checkpoints (increasing ``pair``)."""

    words: np.ndarray
    n_pairs: int
    checkpoints: list[Checkpoint] = field(default_factory=list)

    @property
    def n_words(self) -> int:
        return int(self.words.size)


def check_runs(runs: Sequence[Run], n_tables: int, n_pairs: int | None = None) -> int:
    """Validate runs against the table list; returns the total number of pairs."""
    total = 0
    for i, r in enumerate(runs):
        if not 0 <= r.table < n_tables:
            raise ConfigError(f"runs[{i}].table = {r.table} is outside the {n_tables} tables")
        if r.count < 0:
            raise ConfigError(f"runs[{i}].count = {r.count} is negative")
        total += r.count
    if n_pairs is not None and total != n_pairs:
        raise ConfigError(f"runs cover {total} pairs, but {n_pairs} pairs were given")
    return total


def table_at(runs: Sequence[Run]) -> np.ndarray:
    """Start pair of each run (int64, ``len(runs) + 1`` entries, last = total)."""
    return np.concatenate([[0], np.cumsum([r.count for r in runs], dtype=np.int64)]).astype(np.int64)


def check_pairs(symbols: np.ndarray, extras: np.ndarray, runs: Sequence[Run], n_symbols: Sequence[int],
                widths: Sequence[Sequence[int]]) -> None:
    """Reject symbols outside their table's alphabet and additional data wider than its symbol allows
    (vectorised over all pairs: a stream may switch tables every few pairs)."""
    if not symbols.size:
        return
    counts = np.asarray([r.count for r in runs], dtype=np.int64)
    table = np.repeat(np.asarray([r.table for r in runs], dtype=np.int64), counts)
    limit = np.asarray(n_symbols, dtype=np.int64)[table]
    bad = (symbols < 0) | (symbols >= limit)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        run = int(np.searchsorted(table_at(runs), j, side="right")) - 1
        raise ConfigError(f"run {run}: symbol outside the table's {int(limit[j])}-symbol alphabet")
    wide = max(len(w) for w in widths)
    wtab = np.zeros((len(widths), wide), dtype=np.uint64)
    for t, w in enumerate(widths):
        wtab[t, :len(w)] = np.asarray(w, dtype=np.uint64)
    w = wtab[table, symbols]
    e = extras.astype(np.uint64)
    over = (e >> np.minimum(w, np.uint64(63))) != 0
    if over.any():
        j = int(np.flatnonzero(over)[0])
        raise ConfigError(f"pair {j}: additional data {int(e[j])} does not fit its symbol's {int(w[j])} bits")


def reverse_chunks(tables: Sequence, runs: Sequence[Run], symbols: np.ndarray, extras: np.ndarray):
    """Validate pairs for an encoder, then yield ``(table, first_pair, symbols, extras)`` from the last
    pair backwards, :data:`CHUNK` pairs at a time, as Python lists the golden loops walk in reverse."""
    check_runs(runs, len(tables), symbols.size)
    check_pairs(symbols, extras, runs, [t.freqs.size for t in tables], [t.extra_bits for t in tables])
    starts = table_at(runs)
    for ri in range(len(runs) - 1, -1, -1):
        lo, hi = int(starts[ri]), int(starts[ri + 1])
        for chi in range(hi, lo, -CHUNK):
            clo = max(lo, chi - CHUNK)
            yield tables[runs[ri].table], clo, symbols[clo:chi].tolist(), extras[clo:chi].tolist()


def word_dtype(word_bits: int) -> np.dtype:
    """The smallest unsigned NumPy type that holds a ``word_bits``-bit stream word."""
    for bits, dt in ((8, np.uint8), (16, np.uint16), (32, np.uint32)):
        if word_bits <= bits:
            return np.dtype(dt)
    return np.dtype(np.uint64)


def block_ranges(n_words: int, checkpoints: Sequence[Checkpoint]) -> list[tuple[int, int]]:
    """Word-address ranges ``[lo, hi)`` of a stream's CRC blocks, in decoding order.

    Block ``b`` holds every word a decoder reads between checkpoint ``b - 1`` (the top of the stream
    for ``b = 0``) and checkpoint ``b`` (the bottom of the stream for the last block): exactly the
    words a decoder core is given when it decodes that block from its checkpoint. A word split by a
    tANS checkpoint's bit offset is read by both neighbours, so it belongs to both blocks.
    """
    tops = [n_words] + [c.word + (1 if c.bit else 0) for c in checkpoints]
    bottoms = [c.word for c in checkpoints] + [0]
    return list(zip(bottoms, tops))


def block_crc(words: np.ndarray, lo: int = 0, hi: int | None = None, word_bits: int | None = None) -> int:
    """CRC-32 of ``words[lo:hi]`` in decoding order (address ``hi - 1`` first).

    The CRC is zlib's (ISO-HDLC: reflected, init and final XOR ``0xFFFFFFFF``) over each word's
    ``W / 8`` little-endian bytes: what a decoder core computes on its word input, a ``W``-bit word
    per clock. Cores whose ``W`` is not a multiple of 8 (``word_bits``) compute the same reflected
    CRC over ``W``-bit words, taken here from :mod:`amaranth.lib.crc` (slow: tests only).
    """
    w = np.asarray(words)
    hi = w.size if hi is None else hi
    return block_crcs(w, [(lo, hi)], word_bits)[0]


def block_crcs(words: np.ndarray, ranges: Sequence[tuple[int, int]], word_bits: int | None = None) -> list[int]:
    """:func:`block_crc` of ``words[lo:hi]`` for every ``(lo, hi)`` of ``ranges``, in one pass of the
    native kernel where it is built (``nativecrc.c``: the words folded with PCLMULQDQ, reversed in
    registers, no copy), else through zlib on reversed pieces of the words."""
    w = np.asarray(words)
    word_bits = word_bits or 8 * w.dtype.itemsize
    if word_bits not in (8, 16, 32):
        from amaranth.lib.crc.catalog import CRC32_ISO_HDLC
        crc = CRC32_ISO_HDLC(data_width=word_bits)
        return [int(crc.compute(int(x) for x in w[lo:hi][::-1])) for lo, hi in ranges]
    dt = word_dtype(word_bits).newbyteorder("<")
    if kernels.native() and w.dtype == dt and w.flags.c_contiguous:
        lo_hi = np.asarray(ranges, np.int64).reshape(-1, 2)
        out = np.empty(lo_hi.shape[0], np.uint64)
        kernels.nativeans.crc32_blocks(w, np.ascontiguousarray(lo_hi[:, 0]), np.ascontiguousarray(lo_hi[:, 1]), out)
        return [int(c) for c in out]
    crcs = []
    for lo, hi in ranges:
        blk = w[lo:hi][::-1]
        # In pieces of 2^16 words: each reversed copy stays in cache (no copy of the whole stream).
        crc = 0
        for i in range(0, blk.size, 1 << 16):
            crc = zlib.crc32(np.ascontiguousarray(blk[i:i + (1 << 16)], dtype=dt), crc)
        crcs.append(crc & 0xFFFFFFFF)
    return crcs


@dataclass(frozen=True)
class Block:
    """One independent block of a stream (container version 6, ``docs/bitstream.md`` §6).

    Pairs ``pair .. pair+count-1`` of the stream (all of one tensor, the stream's tensor ``tensor``)
    coded alone: a complete stream of §3/§4/§8 with its own encoder flush and head, which a decoder
    starts at its top (a core: ``resume = 0``) and ends with the end check, needing nothing of another
    block. Its words lie at addresses ``word .. word+n_words-1`` of the stream's payload (address
    ``word`` is the block's own address 0), and ``crc`` is :func:`block_crc` of them (decoding order).
    """

    pair: int
    count: int
    word: int
    n_words: int
    crc: int
    tensor: int


def block_spans(counts: Sequence[int], block_pairs: int = BLOCK_PAIRS) -> list[tuple[int, int, int]]:
    """How a stream of tensors of ``counts`` pairs (in order) is cut into independent blocks:
    ``(tensor, first pair in the stream, pairs)`` per block, in stream order. Each tensor's pairs are
    cut every ``block_pairs`` pairs from its first, the last block of a tensor holding the rest; a
    tensor without pairs has no block."""
    if isinstance(block_pairs, bool) or not isinstance(block_pairs, (int, np.integer)) or block_pairs < 1:
        raise ConfigError(f"block_pairs must be a positive integer, not {block_pairs!r}")
    out, pos = [], 0
    for t, n in enumerate(counts):
        n = int(n)
        for a in range(0, n, int(block_pairs)):
            out.append((t, pos + a, min(int(block_pairs), n - a)))
        pos += n
    return out


def clip_runs(runs: Sequence[Run], lo: int, count: int, table_base: int = 0) -> list[Run]:
    """The runs of pairs ``lo .. lo+count-1`` of ``runs`` (positions counted from the first run's
    start), their table indices less ``table_base``: what a block of those pairs is coded with."""
    out, pos, hi = [], 0, lo + count
    for r in runs:
        a, b = max(pos, lo), min(pos + r.count, hi)
        if a < b:
            out.append(Run(r.table - table_base, b - a))
        pos += r.count
        if pos >= hi:
            break
    return out


def word_list(words) -> list[int]:
    """Words as a Python list (the golden decoders index it per pair); a list is used as it is."""
    return words if isinstance(words, list) else np.asarray(words).tolist()


class DecodeWindow:
    """Pairs ``start .. start+count-1`` of a stream of runs: validation, output arrays, and the walk over
    runs, :data:`CHUNK` pairs at a time, from the position a decoder starts at."""

    def __init__(self, runs: Sequence[Run], n_tables: int, start: int, count: int | None):
        self.n = check_runs(runs, n_tables)
        count = self.n - start if count is None else count
        if start < 0 or count < 0 or start + count > self.n:
            raise ConfigError(f"pairs {start}..{start + count} are outside the stream's {self.n} pairs")
        self.runs, self.start, self.end = runs, start, start + count
        self.symbols = np.empty(count, dtype=np.int64)
        self.extras = np.empty(count, dtype=np.uint64)
        self._starts = table_at(runs)

    @property
    def reaches_end(self) -> bool:
        """Whether the window ends at the stream's end (where the end check applies)."""
        return self.end == self.n

    def chunks(self, pos: int):
        """Yield ``(table_index, pos, stop)`` for consecutive spans of one table from ``pos`` to the end."""
        starts = self._starts
        ri = int(np.searchsorted(starts, pos, side="right")) - 1
        while pos < self.end:
            stop = min(self.end, int(starts[ri + 1]), pos + CHUNK)
            yield self.runs[ri].table, pos, stop
            pos = stop
            if pos == int(starts[ri + 1]):
                ri += 1

    def store(self, pos: int, stop: int, symbols: list[int], extras: list[int]) -> None:
        """Keep the part of decoded pairs ``pos .. stop-1`` that lies inside the window."""
        if stop > self.start:
            a = max(pos, self.start)
            self.symbols[a - self.start:stop - self.start] = symbols[a - pos:]
            self.extras[a - self.start:stop - self.start] = extras[a - pos:]
