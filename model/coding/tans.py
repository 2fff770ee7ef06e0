"""Golden tANS coder: the bit-exact model of the paper's tANS cores (§4.2, Table 1 "tANS 8 bits").

tANS is a finite-state machine over ``L = 2**R`` states (the paper: ``R = 8``, 256 states). A table
:class:`TansTable` is built from the symbols' normalized frequencies (``sum f_s = L``) by *spreading*
each symbol ``s`` over ``f_s`` states:

``"fse"``
    FSE's step spread: position ``p`` advances by ``L/2 + L/8 + 3`` modulo ``L``.
``"tuned"``
    Duda's precise spread: occurrence ``i = f_s .. 2 f_s - 1`` of ``s`` is placed by the key
    ``1 / (p_s ln(1 + 1/i))``, the position where a state of probability ``∝ 1/x`` expects it, using
    the symbols' true probabilities ``p_s``; the keys are sorted into states ``0 .. L-1``.

State ``X`` of the encoder lies in ``[L, 2L)``; the model speaks of the *state index* ``X - L``.
Coding one pair (symbol ``s``, additional data ``e`` of ``k_s`` bits):

encoder (pairs back to front)
    ``n = R + 1 - bitlen(f_s) - (X < f_s << (R + 1 - bitlen(f_s)))`` bits of ``X`` are written (its
    ``n`` low bits), ``X := spread position of (s, X >> n)``, then ``e`` is written (``k_s`` bits).
decoder (pairs front to back)
    ``s = symbol[X]``; one field of ``k_s + nb[X]`` bits is read: its high ``k_s`` bits are ``e``, its
    low ``nb[X]`` bits are added to ``base[X]`` to give the next state.

Bits go through a word stack of ``W``-bit words (``docs/bitstream.md``): the decoder reads the most
recently written bits first. The stream ends (decoder side: begins) with the final state index
(``R`` bits) and a ``1`` marker bit; the decoder finds the marker as the highest set bit of the last
word. The encoder starts from state index 0, which the decoder checks after the last pair, together
with an exhausted stream.

With ``N = TansParams.states > 1`` interleaved states, pair ``j`` is coded with state ``j mod N``; all
states start at index 0, the flush appends ``X_{N-1} .. X_0`` below the marker (the decoder reads
``X_0`` first) and the end check wants every index 0 (``docs/bitstream.md`` §8).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .codetable import CodeTable
try:  # the optional native kernels (setup.py); the loop in expected_bits_per_symbol is the reference
    from . import nativeans
except ImportError:  # pragma: no cover
    nativeans = None
from ..errors import ConfigError
from .stream import Checkpoint, DecodeWindow, pack_states, EncodedStream, Run, StreamError, reverse_chunks, word_dtype, word_list
from .stream import MAX_STATES, check_checkpoint, check_checkpoint_interval

__all__ = ["TansParams", "TansTable", "TansCoder", "SPREADS", "fse_spread", "tuned_spread", "stream_head", "stationary",
           "stationary_many", "expected_bits"]

SPREADS = ("fse", "tuned")


def stream_head(w: Sequence[int], R: int, W: int, states: int = 1) -> tuple[int, int, int, int | tuple[int, ...]]:
    """Where decoding starts at the top of a tANS stream of ``W``-bit words ``w`` (a list of ints).

    The last word holds a marker bit above the bits the encoder flushed; the final state indices
    (``R`` bits each) sit just below the marker, lane 0's first (read first), then lane 1's, ...
    Returns ``(h, cnt, buf, state)``: the words still unread (``w[:h]``), the ``cnt < W`` bits of
    ``buf`` left over from the head words, and the state index (an ``int`` for one state, a tuple of
    ``states`` indices otherwise, as :class:`~.stream.Checkpoint` holds them).
    Raises :class:`StreamError` on an empty stream, a last word without a marker, or a stream that
    ends inside the final states.
    """
    h = len(w)
    if h == 0:
        raise StreamError("tANS stream is empty: it lacks the final state and marker")
    top = int(w[h - 1])
    h -= 1
    if top == 0 or top >> W:
        raise StreamError("tANS stream's last word holds no marker bit (corrupt or not a tANS stream)")
    cnt = top.bit_length() - 1
    buf = top & ((1 << cnt) - 1)
    out = []
    for _ in range(states):
        while cnt < R:
            if h == 0:
                raise StreamError("tANS stream ends inside its final state" + ("s" if states > 1 else ""))
            h -= 1
            buf = (buf << W) | int(w[h])
            cnt += W
        cnt -= R
        out.append(buf >> cnt)
        buf &= (1 << cnt) - 1
    return h, cnt, buf, pack_states(out)


#: The stationary distribution's power iteration: at most this many steps, stopped when no state's
#: probability moves by ``STATIONARY_TOL`` in one step.
STATIONARY_MAX_ITER = 4000
STATIONARY_TOL = 1e-13


def stationary(lo: np.ndarray, hi: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The stationary distribution of a tANS encoder's states (index ``y`` of ``L``), by the power
    iteration of the lazy chain (a step is ``(pi + pi P) / 2``, which converges also for periodic tables)
    from the uniform distribution.

    The encoder reaches state ``y`` exactly from the states ``X - L`` in ``[lo[y], hi[y])`` that the
    decoder reaches from ``y`` (``base[y]`` and ``2**nb[y]`` of them), and only with ``y``'s symbol, of
    probability ``weight[y]``; so one step is a prefix sum and a difference per state. The native kernel
    (``nativeans.stationary_many``) runs the same operations in the same order, so the floats are the same
    whether the extension is built or not."""
    L = int(lo.size)
    if nativeans is not None:
        return np.frombuffer(nativeans.stationary_many(np.ascontiguousarray(lo, np.int64),
                                                       np.ascontiguousarray(hi, np.int64),
                                                       np.ascontiguousarray(weight, np.float64), 1,
                                                       STATIONARY_MAX_ITER, STATIONARY_TOL), dtype=np.float64)
    pi = np.full(L, 1.0 / L)
    prefix = np.zeros(L + 1)
    for _ in range(STATIONARY_MAX_ITER):
        np.cumsum(pi, out=prefix[1:])
        new = 0.5 * (weight * (prefix[hi] - prefix[lo]) + pi)
        done = np.abs(new - pi).max() < STATIONARY_TOL
        pi = new
        if done:
            break
    return pi


def stationary_many(blocks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """:func:`stationary` of several ``(lo, hi, weight)`` of one table size; each result is the one
    :func:`stationary` gives (the native kernel runs each table's own operations in its own order, side
    by side with the others, so that their chains of dependent operations overlap)."""
    sizes = {int(lo.size) for lo, _, _ in blocks}
    if nativeans is None or len(sizes) != 1 or not 1 < len(blocks) <= 8:
        return [stationary(lo, hi, w) for lo, hi, w in blocks]
    L = sizes.pop()
    lo = np.ascontiguousarray(np.concatenate([b[0] for b in blocks]), np.int64)
    hi = np.ascontiguousarray(np.concatenate([b[1] for b in blocks]), np.int64)
    w = np.ascontiguousarray(np.concatenate([b[2] for b in blocks]), np.float64)
    pi = np.frombuffer(nativeans.stationary_many(lo, hi, w, len(blocks), STATIONARY_MAX_ITER, STATIONARY_TOL),
                       dtype=np.float64)
    return [pi[k * L:(k + 1) * L] for k in range(len(blocks))]


def expected_bits(tables: Sequence["TansTable"], probabilities: Sequence[Sequence[float]]) -> list[float]:
    """:meth:`TansTable.expected_bits_per_symbol` of each table with its probabilities, the stationary
    distributions computed together (:func:`stationary_many`)."""
    ps = [np.asarray(p, dtype=np.float64) for p in probabilities]
    ps = [p / p.sum() for p in ps]
    pis = stationary_many([(t.base, t.base + (1 << t.nb_bits), p[t.symbol]) for t, p in zip(tables, ps)])
    return [float(pi @ t.nb_bits) for t, pi in zip(tables, pis)]


@functools.cache
def _bit_lengths(R: int) -> np.ndarray:
    """``int.bit_length`` of ``0 .. 2**(R+1)``: a table for the values of an ``R``-bit tANS table (the
    frequencies and the states ``x_s`` are at most ``2**R``, below ``2**(R+1)``)."""
    return _bit_length(np.arange((2 << R) + 1, dtype=np.int64))


def _bit_length(v: np.ndarray) -> np.ndarray:
    """``int.bit_length`` of each value of a non-negative ``int64`` array below 2**53 (frexp's exponent
    is exact there)."""
    return np.frexp(v.astype(np.float64))[1].astype(np.int64)


@dataclass(frozen=True)
class TansParams:
    """Parameters of a tANS core.

    table_log : int
        ``R``, 5 to 12: ``2**R`` states, frequencies of ``R`` bits. The paper's cores: 8.
    word_bits : int
        ``W``, width of a stream word, 8 to 32 (the paper: 16).
    max_symbols : int
        Largest alphabet, 2 to 256 (the paper: 64).
    max_extra_bits : int
        Largest additional-data width of a symbol, 0 to 32; the pair formats need up to 24
        (fp32), an escape symbol adds its index bits.
    states : int
        ``N``, 1 to 16: interleaved states sharing one word stream; pair ``j`` of a stream is coded
        with state ``j mod N`` (``docs/bitstream.md`` §8). 1 is the paper's single-state coder.
    """

    table_log: int = 8
    word_bits: int = 16
    max_symbols: int = 64
    max_extra_bits: int = 32
    states: int = 1

    def __post_init__(self) -> None:
        for name, lo, hi in (("table_log", 5, 12), ("word_bits", 8, 32), ("max_symbols", 2, 256),
                             ("max_extra_bits", 0, 32), ("states", 1, MAX_STATES)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise ConfigError(f"tANS {name} must be an integer from {lo} to {hi}, not {v!r}")

    @property
    def n_states(self) -> int:
        return 1 << self.table_log


def fse_spread(freqs: Sequence[int], table_log: int) -> np.ndarray:
    """Symbol of each state index under FSE's step spread."""
    L = 1 << table_log
    step = (L >> 1) + (L >> 3) + 3
    f = np.asarray(freqs, dtype=np.int64)
    # The k-th state placed (symbols in order, each f times) goes to k * step mod L: step is odd, so the
    # places are a permutation of the states, filled in one assignment.
    out = np.empty(L, dtype=np.int64)
    out[(np.arange(int(f.sum()), dtype=np.int64) * step) & (L - 1)] = np.repeat(np.arange(f.size, dtype=np.int64), f)
    return out


def tuned_spread(freqs: Sequence[int], table_log: int, probabilities: Sequence[float] | None = None) -> np.ndarray:
    """Symbol of each state index under Duda's precise spread (see the module docstring)."""
    f = np.asarray(freqs, dtype=np.int64)
    L = 1 << table_log
    p = np.asarray(probabilities if probabilities is not None else f / L, dtype=np.float64)
    p = np.where(p > 0, p, f / L)
    # Symbol s's keys at i = f_s .. 2 f_s - 1, every symbol's in one array (symbols in order)
    syms = np.repeat(np.arange(f.size, dtype=np.int64), f)
    first = np.cumsum(f) - f
    i = (f[syms] + np.arange(syms.size, dtype=np.int64) - first[syms]).astype(np.float64)
    keys = 1.0 / (p[syms] * np.log1p(1.0 / i))
    order = np.lexsort((syms, keys))  # by key, ties by symbol: reproducible
    return syms[order]


class TansTable:
    """Encoder and decoder tables of one alphabet (``2**R`` states).

    Attributes (all NumPy ``int64``)
    ----------
    symbol, nb_bits, base : shape (L,)
        Decoder: at state index ``x``, emit ``symbol[x]``, read ``nb_bits[x]`` bits ``v``; the next
        state index is ``base[x] + v``.
    encode_state : shape (L,)
        Encoder: state index reached from symbol ``s`` and ``x_s = f_s .. 2 f_s - 1`` is
        ``encode_state[cum[s] + x_s - f_s]``.
    """

    def __init__(self, code_table: CodeTable, params: TansParams, spread: str = "tuned",
                 probabilities: Sequence[float] | None = None, symbols: Sequence[int] | None = None):
        """Build from ``code_table`` by ``spread``, or from an explicit spread ``symbols`` (state index →
        symbol, as stored in a container and uploaded to a core), checked against the frequencies."""
        R = params.table_log
        if code_table.precision_bits != R:
            raise ConfigError(
                f"tANS table_log {R} needs a {R}-bit code table, got precision_bits={code_table.precision_bits}")
        if code_table.n_symbols > params.max_symbols:
            raise ConfigError(f"tANS alphabet of {code_table.n_symbols} symbols exceeds max_symbols={params.max_symbols}")
        widths = code_table.symbol_extra_bits
        if max(widths) > params.max_extra_bits:
            raise ConfigError(f"extra width {max(widths)} exceeds tANS max_extra_bits={params.max_extra_bits}")
        if spread not in SPREADS:
            raise ConfigError(f"tANS spread must be one of {', '.join(SPREADS)}, not {spread!r}")
        self.code_table = code_table
        self.params = params
        self.spread = spread
        L = 1 << R
        f = np.array(code_table.freqs, dtype=np.int64)
        self.freqs = f
        self.cum = np.zeros(f.size + 1, dtype=np.int64)
        np.cumsum(f, out=self.cum[1:])
        self.extra_bits = np.asarray(widths + (0,) * (f.size - len(widths)), dtype=np.int64)
        if symbols is not None:
            sym = np.asarray(symbols)
            if sym.shape != (L,) or sym.dtype.kind not in "iu" or (sym.dtype.kind == "i" and sym.min() < 0) \
                    or (counts := np.bincount(sym, minlength=f.size)).size != f.size or (counts != f).any():
                raise ConfigError(f"tANS spread must hold each symbol s exactly freqs[s] times in {L} states")
        else:
            sym = fse_spread(f, R) if spread == "fse" else tuned_spread(f, R, probabilities)
        # A stable sort by symbol lists each symbol's states in increasing x: the encoder's state table
        # (slot cum[s] + x_s - f_s holds the state index of the x_s-th occurrence), and a state's rank
        # in its group is its occurrence, x_s - f_s. (A container's spread is bytes: the radix sort.)
        order = np.argsort(sym, kind="stable")
        sym = sym.astype(np.int64)
        self.symbol = sym
        occ = np.empty(L, dtype=np.int64)
        occ[order] = np.arange(L, dtype=np.int64) - self.cum[sym[order]]
        xs = f[sym] + occ
        bit_length = _bit_lengths(R)
        nb = R + 1 - bit_length[xs]
        base = (xs << nb) - L
        self.nb_bits, self.base, self.encode_state = nb, base, order
        self.nb_high = R + 1 - bit_length[f]  # bits the encoder writes for s when X >= threshold[s]
        self.threshold = f << self.nb_high  # a state X in [L, 2L]; below it, one bit fewer

    def decoder_entries(self) -> np.ndarray:
        """The tANS decoder core's state table: per state index ``x`` (``L`` rows) the columns
        ``symbol, nb, base, k`` = ``symbol[x], nb_bits[x], base[x], extra_bits[symbol[x]]``."""
        return np.stack([self.symbol, self.nb_bits, self.base, self.extra_bits[self.symbol]], axis=1)

    def encoder_entries(self) -> np.ndarray:
        """The tANS encoder core's symbol table: per symbol the columns ``freq, cum, nb_high,
        threshold, k``; its second table is :attr:`encode_state` (slot ``cum[s] + x_s - f_s`` →
        state index)."""
        return np.stack([self.freqs, self.cum[:-1], self.nb_high, self.threshold, self.extra_bits], axis=1)

    def expected_bits_per_symbol(self, probabilities: Sequence[float]) -> float:
        """Average code bits per symbol of i.i.d. symbols with ``probabilities``, at the stationary
        distribution of the encoder's states (excludes additional data): the bits an encoder step into
        state ``y`` writes are the ``nb[y]`` its decoder reads, so the average is ``pi @ nb``."""
        p = np.asarray(probabilities, dtype=np.float64)
        p = p / p.sum()
        pi = stationary(self.base, self.base + (1 << self.nb_bits), p[self.symbol])
        return float(pi @ self.nb_bits)

    def to_json(self) -> dict:
        return {"spread": self.spread, "symbol": self.symbol.tolist()}


class TansCoder:
    """Single-lane golden tANS encoder and decoder over a sequence of runs (see :mod:`.stream`)."""

    def __init__(self, params: TansParams):
        self.params = params

    # -- encoder -------------------------------------------------------------------------------
    def encode(self, tables: Sequence[TansTable], runs: Sequence[Run], symbols: np.ndarray, extras: np.ndarray,
               checkpoint_interval: int | None = None) -> EncodedStream:
        """Encode pairs ``0 .. n-1`` (back to front) into words; checkpoints every ``checkpoint_interval`` pairs."""
        symbols = np.asarray(symbols, dtype=np.int64).ravel()
        extras = np.asarray(extras, dtype=np.uint64).ravel()
        interval = check_checkpoint_interval(checkpoint_interval)
        R, W, N = self.params.table_log, self.params.word_bits, self.params.states
        L, wmask = 1 << R, (1 << W) - 1
        words: list[int] = []
        push = words.append
        checkpoints: list[Checkpoint] = []
        acc, cnt = 0, 0
        # Interleaved states: pair i is coded with Xs[i mod N]; every state starts at X = L.
        Xs = [L] * N
        lane = (int(symbols.size) - 1) % N if symbols.size else 0
        current = None
        prepared: dict[int, tuple] = {}      # per table, once: runs may switch tables every few pairs
        for t, clo, syms, exs in reverse_chunks(tables, runs, symbols, extras):
            if t is not current:
                current = t
                if id(t) not in prepared:
                    prepared[id(t)] = (t.freqs.tolist(), t.cum.tolist(), t.nb_high.tolist(), t.threshold.tolist(),
                                       t.extra_bits.tolist(), t.encode_state.tolist())
                f, cum, nbh, thr, kb, enc = prepared[id(t)]
            for j in range(len(syms) - 1, -1, -1):
                s = syms[j]
                X = Xs[lane]
                n_out = nbh[s] - (X < thr[s])
                acc |= (X & ((1 << n_out) - 1)) << cnt
                cnt += n_out
                Xs[lane] = L + enc[cum[s] + (X >> n_out) - f[s]]
                acc |= exs[j] << cnt
                cnt += kb[s]
                while cnt >= W:
                    push(acc & wmask)
                    acc >>= W
                    cnt -= W
                i = clo + j
                if interval and i and i % interval == 0:
                    checkpoints.append(Checkpoint(i, len(words), cnt, pack_states(x - L for x in Xs)))
                lane = lane - 1 if lane else N - 1
        # Final state indices X_{N-1} .. X_0 (the decoder reads X_0 first), then the marker bit; the
        # top word is never zero.
        for k in range(N - 1, -1, -1):
            acc |= (Xs[k] - L) << cnt
            cnt += R
            while cnt >= W:
                push(acc & wmask)
                acc >>= W
                cnt -= W
        acc |= 1 << cnt
        cnt += 1
        while cnt >= W:
            push(acc & wmask)
            acc >>= W
            cnt -= W
        if cnt:
            push(acc)
        checkpoints.reverse()
        return EncodedStream(np.asarray(words, dtype=word_dtype(W)), int(symbols.size), checkpoints)

    # -- decoder -------------------------------------------------------------------------------
    def decode(self, words: np.ndarray, tables: Sequence[TansTable], runs: Sequence[Run], start: int = 0,
               count: int | None = None, checkpoint: Checkpoint | None = None
               ) -> tuple[np.ndarray, np.ndarray, Checkpoint]:
        """Decode pairs ``start .. start+count-1``; from ``checkpoint`` (at or before ``start``) or the top.

        Returns symbols, additional data and the checkpoint after the last decoded pair (to resume).

        Decoding to the end of the stream checks the final state index (0) and that every bit was read.
        Raises :class:`StreamError` on a stream that runs out of words or fails the final check.
        """
        window = DecodeWindow(runs, len(tables), start, count)
        R, W, N = self.params.table_log, self.params.word_bits, self.params.states
        w = word_list(words)
        h = len(w)
        if checkpoint is None or checkpoint.pair == 0:
            h, cnt, buf, X = stream_head(w, R, W, N)
            pos = 0
        else:
            check_checkpoint(checkpoint, start, h, W, N, 1 << R, mid_word=True)
            h, cnt, X, pos = checkpoint.word, checkpoint.bit, checkpoint.state, checkpoint.pair
            buf = (w[h] & ((1 << cnt) - 1)) if cnt else 0
        Xs = list(X) if N > 1 else [X]
        lane = pos % N
        prepared: dict[int, tuple] = {}
        for ti, pos, stop in window.chunks(pos):
            if ti not in prepared:
                t = tables[ti]
                prepared[ti] = (t.symbol.tolist(), t.nb_bits.tolist(), t.base.tolist(), t.extra_bits.tolist())
            sym, nbl, base, kb = prepared[ti]
            es, ee = [], []
            for _ in range(pos, stop):
                X = Xs[lane]
                s = sym[X]
                nb = nbl[X]
                need = nb + kb[s]
                while cnt < need:
                    if h == 0:
                        raise StreamError(f"tANS stream runs out of words at pair {pos + len(es)}")
                    h -= 1
                    buf = (buf << W) | w[h]
                    cnt += W
                cnt -= need
                v = buf >> cnt
                buf &= (1 << cnt) - 1
                Xs[lane] = base[X] + (v & ((1 << nb) - 1))
                lane = lane + 1 if lane + 1 < N else 0
                es.append(s)
                ee.append(v >> nb)
            window.store(pos, stop, es, ee)
        if window.reaches_end and (any(Xs) or cnt != 0 or h != 0 or buf != 0):
            shown = Xs[0] if N == 1 else Xs
            raise StreamError(f"tANS stream fails its end check: state index {shown} (expected "
                              f"{0 if N == 1 else [0] * N}), {cnt + W * h} unread bits")
        return window.symbols, window.extras, Checkpoint(window.end, h, cnt, pack_states(Xs))

