"""Golden rANS coder: the bit-exact model of the paper's rANS cores (§4.2, Table 1 "rANS 16 bits").

Parameters (:class:`RansParams`): state ``S`` bits, word ``W`` bits, probability precision ``P`` bits,
with ``S >= W + P`` (what rANS needs: a state of at least ``2**(S - W)`` keeps ``P`` bits above the
word it may pop). Presets:

``paper``
    ``P = 16``, ``W = 32``, ``S = 48``: the paper's core (16-bit probabilities, 32-bit words). ``S = W + P``
    is the narrowest state: the decoder's multiply is ``(S - P) x (P + 1)`` = 32 x 17 bits.
``constriction``
    ``P = 24``, ``W = 32``, ``S = 64``: bit-exact with constriction's ``AnsCoder``.

One symbol of frequency ``f`` and cumulative ``c`` (``sum f = 2**P``)::

    encode:  if x >> (S - P) >= f:  push(x mod 2**W);  x >>= W
             x = (x // f) << P | (c + x mod f)
    decode:  q = x mod 2**P;  find s with c_s <= q < c_s + f_s
             x = (x >> P) * f_s + q - c_s
             if x < 2**(S - W) and words remain:  x = x << W | pop()

A coding pair is the code symbol followed (decoder order) by its additional data as uniform symbols:
``k`` bits are coded in chunks of at most ``P`` bits, most significant chunk first, a ``b``-bit chunk
``v`` with ``f = 2**(P - b)`` and ``c = v * f``; ``k = 0`` codes nothing. For ``k <= P`` this is
exactly constriction's ``Uniform(2**k)`` model.

The encoder starts from ``x = 0`` (so the first symbols cost nothing extra) and, after the first pair,
pushes the state's non-zero words, least significant first (``docs/bitstream.md``). The decoder pops
the top word (never zero) and keeps popping until ``x >= 2**(S - W)`` or the stack is empty; after the
last pair it checks ``x == 0`` and an empty stack.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .codetable import CodeTable
from ..errors import ConfigError
from .stream import Checkpoint, DecodeWindow, EncodedStream, Run, StreamError, reverse_chunks, word_dtype, word_list
from .stream import check_checkpoint_interval

__all__ = ["RansParams", "RansTable", "RansCoder", "RANS_PRESETS"]


@dataclass(frozen=True)
class RansParams:
    """rANS core parameters: ``state_bits`` S, ``word_bits`` W, ``precision_bits`` P (see module)."""

    state_bits: int = 64
    word_bits: int = 32
    precision_bits: int = 16
    max_symbols: int = 256

    def __post_init__(self) -> None:
        for name, lo, hi in (("state_bits", 16, 128), ("word_bits", 8, 64), ("precision_bits", 5, 24),
                             ("max_symbols", 2, 1 << 16)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise ConfigError(f"rANS {name} must be an integer from {lo} to {hi}, not {v!r}")
        if self.state_bits < self.word_bits + self.precision_bits:
            raise ConfigError(
                f"rANS state_bits S={self.state_bits} must be >= word_bits + precision_bits = "
                f"{self.word_bits} + {self.precision_bits}")


RANS_PRESETS: dict[str, RansParams] = {
    "paper": RansParams(48, 32, 16),
    "constriction": RansParams(64, 32, 24),
}


class RansTable:
    """Frequencies, cumulatives and per-symbol additional-data widths of one alphabet."""

    def __init__(self, code_table: CodeTable, params: RansParams):
        P = params.precision_bits
        if code_table.precision_bits != P:
            raise ConfigError(f"rANS precision {P} needs a {P}-bit code table, got {code_table.precision_bits}")
        if len(code_table.freqs) > params.max_symbols:
            raise ConfigError(f"rANS alphabet of {len(code_table.freqs)} symbols exceeds max_symbols={params.max_symbols}")
        self.code_table = code_table
        self.params = params
        f = np.asarray(code_table.freqs, dtype=np.int64)
        widths = code_table.symbol_extra_bits
        self.freqs = f
        self.cum = np.concatenate([[0], np.cumsum(f)]).astype(np.int64)
        self.extra_bits = np.asarray(widths + (0,) * (f.size - len(widths)), dtype=np.int64)
        self._lut: list[int] | None = None

    def core_entries(self) -> np.ndarray:
        """The rANS cores' symbol table: per symbol the columns ``freq, cum, k`` (``freq`` may be
        ``2**P`` for a one-symbol alphabet)."""
        return np.stack([self.freqs, self.cum[:-1], self.extra_bits], axis=1)

    def core_buckets(self, bucket_bits: int, splits: int = 2) -> np.ndarray:
        """The decoder cores' quantile → symbol guess: per bucket of ``2**(P - bucket_bits)``
        quantiles (the top ``bucket_bits`` bits of ``q``) the columns ``base, split_1 .. split_n``.

        The core's candidate is ``base + sum_j (q mod 2**(P - bucket_bits) > split_j)``; it is exact
        where the bucket meets at most ``splits + 1`` symbols, and otherwise the core steps one symbol
        per clock towards the right one. ``base`` is chosen per bucket to make those steps rarest: of
        the windows of ``splits + 1`` adjacent symbols that meet the bucket, the one that leaves the
        fewest steps over the bucket's quantiles (each as likely as any other of its symbol's, the
        frequencies being the probabilities). ``split_j`` is the offset before symbol ``base + j``'s
        first quantile, or ``2**(P - bucket_bits) - 1`` (the compare never holds) where that symbol
        does not start inside the bucket.
        """
        P = self.params.precision_bits
        if not 1 <= bucket_bits <= P:
            raise ConfigError(f"rANS bucket_bits must be from 1 to P = {P}, not {bucket_bits!r}")
        width, n = 1 << (P - bucket_bits), self.freqs.size
        right, starts = self.cum[1:], np.arange(1 << bucket_bits, dtype=np.int64) * width
        first = np.searchsorted(right, starts, side="right")
        last = np.maximum(np.searchsorted(right, starts + width - 1, side="right"), first)
        # Quantiles of bucket b in symbol s, and the steps a quantile of s takes from window a.
        overlap = np.clip(np.minimum(self.cum[None, 1:], (starts + width)[:, None])
                          - np.maximum(self.cum[None, :-1], starts[:, None]), 0, None)
        s_, a_ = np.arange(n)[:, None], np.arange(n)[None, :]
        steps = np.where(s_ < a_, a_ - s_, np.where(s_ > a_ + splits, s_ - a_ - splits, 0))
        cost = (overlap @ steps).astype(np.float64)
        allowed = (a_ >= first[:, None]) & (a_ <= np.maximum(last - splits, first)[:, None])
        base = np.where(allowed, cost, np.inf).argmin(axis=1)
        cols = [base]
        for j in range(1, splits + 1):
            at = self.cum[np.minimum(base + j, n)] - starts
            cols.append(np.where((base + j < n) & (at > 0) & (at < width), at - 1, width - 1))
        return np.stack(cols, axis=1).astype(np.int64)

    def symbol_lookup(self):
        """Quantile → symbol: a table for ``P <= 16``, a binary search above (as the hardware would)."""
        P = self.params.precision_bits
        if P <= 16:
            if self._lut is None:
                self._lut = np.repeat(np.arange(self.freqs.size), self.freqs).tolist()
            return self._lut.__getitem__
        right = self.cum[1:].tolist()
        return lambda q: bisect.bisect_right(right, q)


class RansCoder:
    """Single-lane golden rANS encoder and decoder over a sequence of runs (see :mod:`.stream`)."""

    def __init__(self, params: RansParams):
        self.params = params

    def _chunks(self, k: int) -> list[int]:
        """Chunk widths of ``k`` additional-data bits, most significant chunk first."""
        P = self.params.precision_bits
        if k == 0:
            return []
        q = -(-k // P)
        return [k - P * (q - 1)] + [P] * (q - 1)

    def encode(self, tables: Sequence[RansTable], runs: Sequence[Run], symbols: np.ndarray, extras: np.ndarray,
               checkpoint_interval: int | None = None) -> EncodedStream:
        """Encode pairs ``0 .. n-1`` back to front into words; checkpoints every ``checkpoint_interval`` pairs."""
        symbols = np.asarray(symbols, dtype=np.int64).ravel()
        extras = np.asarray(extras, dtype=np.uint64).ravel()
        interval = check_checkpoint_interval(checkpoint_interval)
        S, W, P = self.params.state_bits, self.params.word_bits, self.params.precision_bits
        wmask, pshift = (1 << W) - 1, S - P
        words: list[int] = []
        push = words.append
        checkpoints: list[Checkpoint] = []
        x = 0
        current = None
        prepared: dict[int, tuple] = {}      # per table, once: runs may switch tables every few pairs
        for t, clo, syms, exs in reverse_chunks(tables, runs, symbols, extras):
            if t is not current:
                current = t
                if id(t) not in prepared:
                    # Per symbol: the uniform chunks of its additional data, least significant first.
                    prepared[id(t)] = (t.freqs.tolist(), t.cum.tolist(),
                                       [[(b, 1 << (P - b)) for b in reversed(self._chunks(int(k)))]
                                        for k in t.extra_bits])
                f, cum, chunks = prepared[id(t)]
            for j in range(len(syms) - 1, -1, -1):
                s = syms[j]
                e = exs[j]
                for b, fu in chunks[s]:
                    v = e & ((1 << b) - 1)
                    e >>= b
                    if x >> pshift >= fu:
                        push(x & wmask)
                        x >>= W
                    x = ((x // fu) << P) | (v * fu + x % fu)
                fs = f[s]
                if x >> pshift >= fs:
                    push(x & wmask)
                    x >>= W
                x = ((x // fs) << P) | (cum[s] + x % fs)
                i = clo + j
                if interval and i and i % interval == 0:
                    checkpoints.append(Checkpoint(i, len(words), 0, x))
        while x:
            push(x & wmask)
            x >>= W
        checkpoints.reverse()
        return EncodedStream(np.asarray(words, dtype=word_dtype(W)), int(symbols.size), checkpoints)

    def decode(self, words: np.ndarray, tables: Sequence[RansTable], runs: Sequence[Run], start: int = 0,
               count: int | None = None, checkpoint: Checkpoint | None = None
               ) -> tuple[np.ndarray, np.ndarray, Checkpoint]:
        """Decode pairs ``start .. start+count-1``; from ``checkpoint`` (at or before ``start``) or the top.

        Returns symbols, additional data and the checkpoint after the last decoded pair (to resume).

        Decoding to the end checks ``x == 0`` and an empty stack; raises :class:`StreamError` otherwise.
        """
        window = DecodeWindow(runs, len(tables), start, count)
        S, W, P = self.params.state_bits, self.params.word_bits, self.params.precision_bits
        lo_bound, pmask = 1 << (S - W), (1 << P) - 1
        w = word_list(words)
        h = len(w)
        if checkpoint is None or checkpoint.pair == 0:
            x = 0
            if h:
                h -= 1
                x = w[h]
                if x == 0 or x >> W:
                    raise StreamError("rANS stream's top word is zero (corrupt or not an rANS stream)")
                while x < lo_bound and h:
                    h -= 1
                    x = (x << W) | w[h]
            pos = 0
        else:
            if not 0 <= checkpoint.pair <= start or not 0 <= checkpoint.word <= h or checkpoint.bit != 0 \
                    or not 0 <= checkpoint.state < (1 << S):
                raise StreamError(f"checkpoint {checkpoint.as_tuple()} does not fit this stream")
            h, x, pos = checkpoint.word, checkpoint.state, checkpoint.pair
        prepared: dict[int, tuple] = {}
        for ti, pos, stop in window.chunks(pos):
            if ti not in prepared:
                t = tables[ti]
                prepared[ti] = (t.freqs.tolist(), t.cum.tolist(), t.symbol_lookup(),
                                [[(b, P - b, (1 << (P - b)) - 1) for b in self._chunks(int(k))] for k in t.extra_bits])
            f, cum, lookup, chunks = prepared[ti]
            es, ee = [], []
            for _ in range(pos, stop):
                q = x & pmask
                s = lookup(q)
                x = (x >> P) * f[s] + q - cum[s]
                if x < lo_bound and h:
                    h -= 1
                    x = (x << W) | w[h]
                e = 0
                for b, sh, m in chunks[s]:
                    q = x & pmask
                    e = (e << b) | (q >> sh)
                    x = ((x >> P) << sh) | (q & m)
                    if x < lo_bound and h:
                        h -= 1
                        x = (x << W) | w[h]
                es.append(s)
                ee.append(e)
            window.store(pos, stop, es, ee)
        if window.reaches_end and (x != 0 or h != 0):
            raise StreamError(f"rANS stream fails its end check: final state {x} (expected 0), {h} unread words")
        return window.symbols, window.extras, Checkpoint(window.end, h, 0, x)
