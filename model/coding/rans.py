"""Golden rANS coder: the bit-exact model of the paper's rANS cores (§4.2, Table 1 "rANS 16 bits").

Parameters (:class:`RansParams`): state ``S`` bits, word ``W`` bits, probability precision ``P`` bits,
with ``S >= W + P`` (what rANS needs: a state of at least ``2**(S - W)`` keeps ``P`` bits above the
word it may pop). Presets:

``paper``
    ``P = 16``, ``W = 32``, ``S = 48``: the paper's core (16-bit probabilities, 32-bit words). ``S = W + P``
    is the narrowest state: the decoder's multiply is ``(S - P) x (P + 1)`` = 32 x 17 bits.
``constriction``
    ``P = 24``, ``W = 32``, ``S = 64``: bit-exact with constriction's ``AnsCoder``.
``interleaved``
    ``P = 16``, ``W = 16``, ``S = 32``: ``rans16xN`` (``N > 1`` states). The interleaved cores read and
    write two words a 32-bit port word (the paper's 32-bit words), and their multiply is ``16 x 17``
    bits, all of it in one DSP.

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

With ``N = RansParams.states > 1`` interleaved states, pair ``j`` (its code and its chunks) is coded
with state ``j mod N``; every state starts at ``2**(S - W)`` (:func:`initial_state` says why), is
flushed as ``ceil(S / W)`` words (``x_{N-1}`` first), and the decoder pops exactly when a state falls
below ``2**(S - W)`` (``docs/bitstream.md`` §8).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .codetable import CodeTable
from ..errors import ConfigError
from .stream import Checkpoint, DecodeWindow, pack_states, EncodedStream, Run, StreamError, reverse_chunks, word_dtype, word_list
from .stream import MAX_STATES, check_checkpoint, check_checkpoint_interval

__all__ = ["RansParams", "RansTable", "RansCoder", "RANS_PRESETS", "initial_state", "stream_head", "freq_reciprocals"]


@dataclass(frozen=True)
class RansParams:
    """rANS core parameters: ``state_bits`` S, ``word_bits`` W, ``precision_bits`` P (see module) and
    ``states`` N (1 to 16 interleaved states sharing one word stream, ``docs/bitstream.md`` §8)."""

    state_bits: int = 64
    word_bits: int = 32
    precision_bits: int = 16
    max_symbols: int = 256
    states: int = 1

    def __post_init__(self) -> None:
        for name, lo, hi in (("state_bits", 16, 128), ("word_bits", 8, 64), ("precision_bits", 5, 24),
                             ("max_symbols", 2, 1 << 16), ("states", 1, MAX_STATES)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise ConfigError(f"rANS {name} must be an integer from {lo} to {hi}, not {v!r}")
        if self.state_bits < self.word_bits + self.precision_bits:
            raise ConfigError(
                f"rANS state_bits S={self.state_bits} must be >= word_bits + precision_bits = "
                f"{self.word_bits} + {self.precision_bits}")


def initial_state(params: RansParams) -> int:
    """Every state's value before the encoder's first symbol, which the decoder's end check expects.

    One state starts at 0: its first symbols are absorbed while ``x < 2**(S - W)``, before any word is
    pushed, and the decoder tells those steps from a renormalization by the empty stack. ``N > 1``
    states share one stack, so a state still absorbing (a lane of zero-cost symbols stays at 0) could
    pop another lane's word; they start at ``2**(S - W)`` instead, which keeps every state in
    ``[2**(S - W), 2**S)`` and makes "pop exactly when ``x < 2**(S - W)``" the decoder's rule."""
    return 0 if params.states == 1 else 1 << (params.state_bits - params.word_bits)


def stream_head(w: Sequence[int], params: RansParams) -> tuple[int, list[int]]:
    """Where decoding starts at the top of an rANS stream of words ``w`` (a list of ints): the words
    still unread and the ``N`` states (lane order).

    One state: pop the top word (never zero), then pop while ``x < 2**(S - W)`` and words remain. ``N > 1``
    states: pop ``ceil(S / W)`` words per state, most significant first, lane 0 first; each must lie
    in ``[2**(S - W), 2**S)``. Raises :class:`StreamError` on a zero top word, or top words that
    cannot hold the ``N`` states."""
    S, W, N = params.state_bits, params.word_bits, params.states
    h = len(w)
    if N == 1:
        x = 0
        if h:
            h -= 1
            x = int(w[h])
            if x == 0 or x >> W:
                raise StreamError("rANS stream's top word is zero (corrupt or not an rANS stream)")
            while x < (1 << (S - W)) and h:
                h -= 1
                x = (x << W) | int(w[h])
        return h, [x]
    per = -(-S // W)
    xs = []
    for _ in range(N):
        x = 0
        for _ in range(per):
            if h == 0:
                raise StreamError(f"rANS stream's top words cannot hold its {N} states ({per} words each)")
            h -= 1
            x = (x << W) | int(w[h])
        if not (1 << (S - W)) <= x < (1 << S):
            raise StreamError(f"rANS stream's top words cannot hold its {N} states: state {len(xs)} = {x} is "
                              f"outside {1 << (S - W)}..{(1 << S) - 1}")
        xs.append(x)
    return h, xs


RANS_PRESETS: dict[str, RansParams] = {
    "paper": RansParams(48, 32, 16),
    "constriction": RansParams(64, 32, 24),
    # rans16xN: 16-bit renormalisation (a pair may pop, or push, a word before its chunk and another
    # after it); the interleaved cores take two such words a 32-bit port word, and their multiply is
    # 16 x 17 bits (docs/bitstream.md §8).
    "interleaved": RansParams(32, 16, 16),
}


def freq_reciprocals(freqs, precision_bits: int) -> np.ndarray:
    """Per frequency ``f`` (1 .. ``2**P``) the columns ``e, R``: ``e = P + 1 - bit_length(f)``
    normalises it, ``F = f << e`` in ``[2**P, 2**(P + 1))``, and ``R = floor((2**(2P + 1) - 1) / F)``
    in ``[2**P, 2**(P + 1))`` is its reciprocal (``2**(2P + 1) / F - 1 < R <= 2**(2P + 1) / F``).
    A frequency of 0 (a symbol never coded) gets ``0, 0``."""
    P = precision_bits
    f = np.asarray(freqs, dtype=np.int64).reshape(-1)
    e = np.where(f > 0, P + 1 - np.frexp(np.maximum(f, 1).astype(np.float64))[1], 0).astype(np.int64)
    R = np.where(f > 0, ((1 << (2 * P + 1)) - 1) // np.maximum(f << e, 1), 0)
    return np.stack([e, R], axis=1).astype(np.int64)


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

    def core_reciprocals(self) -> np.ndarray:
        """The interleaved encoder core's division data: per symbol the columns ``e, R`` of
        :func:`freq_reciprocals`."""
        return freq_reciprocals(self.freqs, self.params.precision_bits)

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
        S, W, P, N = self.params.state_bits, self.params.word_bits, self.params.precision_bits, self.params.states
        wmask, pshift = (1 << W) - 1, S - P
        words: list[int] = []
        push = words.append
        checkpoints: list[Checkpoint] = []
        # Pair i is coded with xs[i mod N]. One state starts at 0 (its first symbols cost nothing); N > 1
        # states start at 2**(S - W), the bottom of the normalized interval, so that a decoder pops
        # exactly when x < 2**(S - W): see initial_state.
        xs = [initial_state(self.params)] * N
        lane = (int(symbols.size) - 1) % N if symbols.size else 0
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
                x = xs[lane]
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
                xs[lane] = ((x // fs) << P) | (cum[s] + x % fs)
                i = clo + j
                if interval and i and i % interval == 0:
                    checkpoints.append(Checkpoint(i, len(words), 0, pack_states(xs)))
                lane = lane - 1 if lane else N - 1
        if N == 1:
            x = xs[0]
            while x:  # the state's non-zero words, least significant first
                push(x & wmask)
                x >>= W
        else:
            # Every state in exactly ceil(S / W) words, x_{N-1} first and x_0 last, least significant
            # word first: the decoder pops x_0's words first, most significant first.
            for x in reversed(xs):
                for _ in range(-(-S // W)):
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
        S, W, P, N = self.params.state_bits, self.params.word_bits, self.params.precision_bits, self.params.states
        lo_bound, pmask = 1 << (S - W), (1 << P) - 1
        w = word_list(words)
        h = len(w)
        if checkpoint is None or checkpoint.pair == 0:
            h, xs = stream_head(w, self.params)
            pos = 0
        else:
            check_checkpoint(checkpoint, start, h, W, N, 1 << S, mid_word=False)
            h, xs, pos = checkpoint.word, list(checkpoint.lane_states), checkpoint.pair
        # One state pops while words remain (its first symbols were absorbed at x < 2**(S - W) before
        # any word was pushed); N > 1 states pop exactly when x < 2**(S - W) and fail without words.
        strict = N > 1
        lane = pos % N
        x = xs[lane]
        prepared: dict[int, tuple] = {}
        for ti, pos, stop in window.chunks(pos):
            if ti not in prepared:
                t = tables[ti]
                prepared[ti] = (t.freqs.tolist(), t.cum.tolist(), t.symbol_lookup(),
                                [[(b, P - b, (1 << (P - b)) - 1) for b in self._chunks(int(k))] for k in t.extra_bits])
            f, cum, lookup, chunks = prepared[ti]
            es, ee = [], []
            for _ in range(pos, stop):
                x = xs[lane]
                q = x & pmask
                s = lookup(q)
                x = (x >> P) * f[s] + q - cum[s]
                if x < lo_bound and h:
                    h -= 1
                    x = (x << W) | w[h]
                elif x < lo_bound and strict:
                    raise StreamError(f"rANS stream runs out of words at pair {pos + len(es)}")
                e = 0
                for b, sh, m in chunks[s]:
                    q = x & pmask
                    e = (e << b) | (q >> sh)
                    x = ((x >> P) << sh) | (q & m)
                    if x < lo_bound and h:
                        h -= 1
                        x = (x << W) | w[h]
                    elif x < lo_bound and strict:
                        raise StreamError(f"rANS stream runs out of words at pair {pos + len(es)}")
                xs[lane] = x
                lane = lane + 1 if lane + 1 < N else 0
                es.append(s)
                ee.append(e)
            window.store(pos, stop, es, ee)
        x0 = initial_state(self.params)
        if window.reaches_end and (any(v != x0 for v in xs) or h != 0):
            shown = xs[0] if N == 1 else xs
            raise StreamError(f"rANS stream fails its end check: final state {shown} (expected "
                              f"{x0 if N == 1 else [x0] * N}), {h} unread words")
        return window.symbols, window.extras, Checkpoint(window.end, h, 0, pack_states(xs))
