"""Native-speed tANS and rANS stream coders, bit-exact with the golden models.

The golden coders (:mod:`.tans`, :mod:`.rans`) walk pairs in Python; they stay the reference. This
module runs *the same* single-lane algorithms, step for step, as machine code, so the words,
checkpoints and decoded pairs are identical (``tests/model/test_fastans.py`` and ``tests/model/test_native.py``
compare them with the golden coders on random and real tensors, including every error path). The
kernels are the C extension ``nativeans`` where it is built, else numba's (:mod:`.kernels` chooses);
the passes between a tensor's values and its pairs are in :mod:`.fastpairs`.

Both release the GIL, so threads decode independent segments at once: a stream's checkpoints (every
``checkpoint_interval`` pairs) are exactly the starting points that Fig. 12's parallel decoders use,
so :func:`decode_segments` splits a stream there and decodes the pieces on ``threads`` threads; each
piece must end in the state its successor's checkpoint records, which checks the seams.

Codecs of ``N > 1`` interleaved states (``docs/bitstream.md`` §8) are independent dependency chains a
CPU overlaps (the tANS decoders' speed comes from them: ``tans8x8`` decodes several times faster than
``tans8``).

Limits (outside them the callers use the golden coders): tANS fields with ``W + R + 1 + k <= 64``
bits (the paper's tans8 with fp32 pairs: 16 + 9 + 30 = 55); rANS with ``S <= 64``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .rans import initial_state as rans_initial_state, stream_head as rans_stream_head
from .stream import Checkpoint, EncodedStream, Run, StreamError, check_checkpoint, check_pairs, check_runs, pack_states
from .stream import word_dtype
from .tans import stream_head
from .kernels import NATIVE_OUT, default_threads, nativeans, native, numba, numba_importable

__all__ = ["supported", "encode", "decode", "decode_segments", "decode_values", "PreparedTables"]


def supported(spec) -> bool:
    """Whether ``spec`` (a :class:`~ansforge.model.coding.codecs.Codec`) runs on the compiled kernels
    (tANS tables whose fields are too wide for a 64-bit buffer fall back per stream, see the module)."""
    if not native() and not numba_importable():
        return False
    return _KERNELS[spec.kind].supported(spec)


def _widest_field_ok(spec, tables) -> bool:
    return _KERNELS[spec.kind].widest_field_ok(spec, tables)


# ------------------------------------------------------------------------------------------------
# kernels (integers: int64 where values stay below 2**63, uint64 for rANS states and bit buffers)

# ------------------------------------------------------------------------------------------------
# tables as padded 2-D arrays (one row per table)

def _pad(rows: Sequence[np.ndarray], dtype=np.int64) -> np.ndarray:
    width = max((r.size for r in rows), default=1) or 1
    out = np.zeros((max(1, len(rows)), width), dtype=dtype)
    for i, r in enumerate(rows):
        out[i, :r.size] = r
    return out


def _rans_chunks(tables, P: int) -> tuple[np.ndarray, np.ndarray]:
    """Per table and symbol, the additional data's uniform chunks, most significant first (the golden
    coder's :meth:`~ansforge.model.coding.rans.RansCoder._chunks`)."""
    width = max((t.extra_bits.size for t in tables), default=1) or 1
    most = max((-(-int(k) // P) for t in tables for k in t.extra_bits), default=0) or 1
    n = np.zeros((len(tables), width), np.int64)
    b = np.zeros((len(tables), width, most), np.int64)
    for ti, t in enumerate(tables):
        for s, k in enumerate(t.extra_bits.tolist()):
            if k:
                q = -(-k // P)
                parts = [k - P * (q - 1)] + [P] * (q - 1)
                n[ti, s] = q
                b[ti, s, :q] = parts
    return n, b


_LUT_BITS = 16
#: State counts whose decoders keep the states in rotating local variables (``_tans_decode_r``).
_ROTATED = (2, 4, 8)


class PreparedTables:
    """A stream's tables in kernel form, built once per (tables) and reused by every segment."""

    def __init__(self, spec, tables):
        self.spec = spec
        self.native_ok = False
        _KERNELS[spec.kind].prepare(self, spec, tables)

    def prepare_tans(self, spec, tables) -> None:
        self.sym = _pad([t.symbol for t in tables])
        self.nb = _pad([t.nb_bits for t in tables])
        self.base = _pad([t.base for t in tables])
        self.kb = _pad([t.extra_bits for t in tables])
        self.freq = _pad([t.freqs for t in tables])
        self.cum = _pad([t.cum[:-1] for t in tables])
        self.nbh = _pad([t.nb_high for t in tables])
        self.thr = _pad([t.threshold for t in tables])
        self.enc = _pad([t.encode_state for t in tables])
        self.nsym = np.asarray([t.freqs.size for t in tables] or [1], dtype=np.int64)
        if native():
            self._prepare_tans_native(spec)

    def _prepare_tans_native(self, spec) -> None:
        """The native kernels' packed entries (nativeans.c): per state ``base | nb << 32 | need << 40 |
        symbol << 48`` for the decoder, per symbol ``thr | nbh << 16 | k << 24 | (cum - f) << 32`` and
        the spread as ``uint16`` for the encoder. ``native_ok`` is False when a table leaves the
        kernels' limits (then the numba kernels run); a legal table never does."""
        L = 1 << spec.tans.table_log
        sym, nb, base, kb = self.sym, self.nb, self.base, self.kb
        self.native_ok = sym.shape[1] == L and self.enc.shape[1] == L and bool(
            (sym >= 0).all() and (sym < self.nsym[:, None]).all() and (nb >= 0).all() and (nb <= 16).all()
            and (base >= 0).all() and (base + (1 << nb) <= L).all() and (kb >= 0).all() and (kb <= 40).all()
            and (self.enc >= 0).all() and (self.enc < L).all() and (self.thr >= 0).all() and (self.thr < 1 << 16).all()
            and (self.nbh >= 0).all() and (self.nbh < 32).all())
        if not self.native_ok:
            return
        need = nb + np.take_along_axis(kb, sym, axis=1)
        self.native_ok = bool((need <= 56).all())
        self.dec_se = (base.astype(np.uint64) | (nb.astype(np.uint64) << np.uint64(32))
                       | (need.astype(np.uint64) << np.uint64(40)) | (sym.astype(np.uint64) << np.uint64(48)))
        off = (self.cum - self.freq).astype(np.int64) & 0xFFFFFFFF
        self.esym = (self.thr.astype(np.uint64) | (self.nbh.astype(np.uint64) << np.uint64(16))
                     | (kb.astype(np.uint64) << np.uint64(24)) | (off.astype(np.uint64) << np.uint64(32)))
        self.enc16 = self.enc.astype(np.uint16)

    _lut = None
    _lut_of = None
    _lut16 = None

    @property
    def lut(self) -> np.ndarray:
        """The numba rANS kernels' slot -> symbol table (``uint8``, or ``int64`` past 256 symbols), built on
        first use: the native kernels read ``lut16`` and never need it."""
        if self._lut is None:
            tables, P = self._lut_of
            if P <= _LUT_BITS:
                self._lut = _pad([np.repeat(np.arange(t.freqs.size), t.freqs) for t in tables], np.uint8
                                 if max((t.freqs.size for t in tables), default=1) <= 256 else np.int64)
            else:
                self._lut = np.zeros((1, 1), np.uint8)
        return self._lut

    @property
    def lut16(self) -> np.ndarray:
        """The generic native rANS decoder's slot -> symbol table (``uint16``, a row of ``2**P`` per table;
        P <= 16), built on first use: the interleaved preset's kernel (``rans16_decode``) builds what it
        needs from ``freq`` and ``cum``."""
        if self._lut16 is None:
            tables, P = self._lut_of
            self._lut16 = _quantile_symbols(tables, P) if P <= _LUT_BITS else np.zeros(1, np.uint16)
        return self._lut16

    def prepare_rans(self, spec, tables) -> None:
        P = spec.rans.precision_bits
        self.freq = _pad([t.freqs for t in tables])
        self.cum = _pad([t.cum[:-1] for t in tables])
        self.nsym = np.asarray([t.freqs.size for t in tables] or [1], dtype=np.int64)
        self._lut_of = (tables, P)  # the numba kernels' slot table, built on first use (lut)
        self.nchunk, self.chunk_b = _rans_chunks(tables, P)
        self.kb = _pad([t.extra_bits for t in tables])
        if native():
            # the native decoders need at most 2^16 symbols and, at P <= 16, a slot table of 2^P slots per
            # table (lut16): frequencies that sum to 2^P
            self.native_ok = max((t.freqs.size for t in tables), default=1) <= 1 << 16 and (
                P > _LUT_BITS or all(int(t.freqs.sum()) == 1 << P for t in tables))


def _quantile_symbols(tables: Sequence, P: int) -> np.ndarray:
    """The native rANS decoder's quantile -> symbol table, one ``uint16`` row of ``2**P`` per table,
    repeated straight into its row (a 64 K-entry row a table at P = 16: built in ``int64`` and padded
    after, it was a sixth of a whole-model rANS decode). A table whose frequencies do not sum to ``2**P``
    gets a row of its own length, which the caller refuses."""
    if not tables or any(int(t.freqs.sum()) != 1 << P for t in tables):
        return _pad([np.repeat(np.arange(t.freqs.size), t.freqs) for t in tables], np.uint16)
    out = np.empty((max(1, len(tables)), 1 << P), np.uint16)
    for row, t in zip(out, tables):
        row[:] = np.repeat(np.arange(t.freqs.size, dtype=np.uint16), t.freqs)
    return out


def _runs(runs: Sequence[Run]) -> tuple[np.ndarray, np.ndarray]:
    tab = np.asarray([r.table for r in runs] + [0], dtype=np.int64)
    end = np.cumsum([r.count for r in runs], dtype=np.int64)
    return tab, np.concatenate([end, [np.iinfo(np.int64).max]]).astype(np.int64)


# ------------------------------------------------------------------------------------------------
# public entry points (same signatures and results as the golden coders)

def encode(spec, tables: Sequence, runs: Sequence[Run], symbols: np.ndarray, extras: np.ndarray,
           checkpoint_interval: int | None = None, prepared: PreparedTables | None = None) -> EncodedStream:
    """:meth:`TansCoder.encode` / :meth:`RansCoder.encode`, compiled: the same words and checkpoints (the
    golden coder itself where the compiled kernels do not apply: :func:`supported`, too wide a field).

    ``prepared``: ``PreparedTables(spec, tables)`` built by the caller, for a caller that codes many
    streams with the same tables (the blocks of one tensor); built here otherwise."""
    if not supported(spec) or not _widest_field_ok(spec, tables):
        return spec.coder().encode(tables, runs, symbols, extras, checkpoint_interval)
    # Compact integer arrays (uint8 symbols, uint32 additional data) are taken as they are: the kernels
    # are compiled per dtype, and widening 10^8 pairs to 64 bits costs more than coding them.
    symbols = np.asarray(symbols).ravel()
    extras = np.asarray(extras).ravel()
    if symbols.dtype.kind not in "iu":
        symbols = symbols.astype(np.int64)
    if extras.dtype.kind != "u":
        extras = extras.astype(np.uint64)
    symbols, extras = np.ascontiguousarray(symbols), np.ascontiguousarray(extras)
    interval = int(checkpoint_interval or 0)
    if interval < 0:
        return spec.coder().encode(tables, runs, symbols, extras, checkpoint_interval)  # golden error
    check_runs(runs, len(tables), symbols.size)
    n = symbols.size
    run_tab, run_end = _runs(runs)
    p = prepared if prepared is not None else PreparedTables(spec, tables)
    if native() and p.native_ok:
        # The native kernels take (uint8, uint32) or (int64, uint64) and check every pair themselves.
        if not (symbols.dtype == np.uint8 and extras.dtype == np.uint32):
            symbols = symbols.astype(np.int64, copy=False)
            extras = extras.astype(np.uint64, copy=False)
    elif numba().first_bad_pair(symbols, extras, run_tab, run_end, p.nsym, _pad([t.extra_bits for t in tables])) >= 0:
        _bad_pairs(symbols, extras, runs, tables)
    W = spec.word_bits
    out, cps, nw, nc = _KERNELS[spec.kind].encode(spec, p, tables, symbols, extras, run_tab, run_end, len(runs),
                                                  interval)
    if nw < 0:  # the native kernel found a pair outside its table: the golden check names it
        _bad_pairs(symbols, extras, runs, tables)
        raise StreamError(f"pair {-1 - nw} cannot be coded with its table")  # pragma: no cover
    checkpoints = [Checkpoint(int(row[0]), int(row[1]), int(row[2]), pack_states(row[3:]))
                   for row in cps[:nc][::-1].tolist()]
    return EncodedStream(out[:nw].astype(word_dtype(W), copy=False), int(n), checkpoints)


def _bad_pairs(symbols, extras, runs, tables) -> None:
    """Raise the golden coders' error for the first pair outside its table (:func:`~.stream.check_pairs`)."""
    check_pairs(symbols.astype(np.int64), extras.astype(np.uint64), runs, [t.freqs.size for t in tables],
                [t.extra_bits for t in tables])


def _native_status(name: str, status: int, nw: int) -> int:
    """``nw`` from a native encoder's status (0 ok; 1 a pair outside its table: ``-1 - pair``)."""
    if status == 1:
        return -1 - nw
    if status:
        raise StreamError(f"{name}: the native encoder stopped (status {status}; a table outside its limits)")
    return nw


# The kernels write without bounds checks, so the buffer holds the most any pairs can produce:
# tANS writes at most R + 1 + k bits per pair, rANS pushes at most one word per coding step.

def _tans_encode_stream(spec, p, tables, symbols, extras, run_tab, run_end, n_runs, interval):
    n, W = symbols.size, spec.word_bits
    widest = max((int(t.extra_bits.max()) for t in tables if t.extra_bits.size), default=0)
    cap = (n * (spec.precision_bits + 1 + widest) + spec.precision_bits + 1) // W + 2
    N = spec.states
    cap += (N * spec.precision_bits) // W + 1
    cps = np.empty(((n - 1) // interval if interval and n else 0, 3 + N), dtype=np.int64)
    if native() and p.native_ok and W in (8, 16, 32):
        out = np.empty(cap * (W // 8) + 16, dtype=np.uint8)
        status, nw, nc = nativeans.tans_encode(symbols, extras, run_tab, run_end, p.esym, p.nsym, p.enc16,
                                               spec.tans.table_log, W, N, interval, out, cps)
        return out.view(word_dtype(W)), cps, _native_status("tANS", status, nw), nc
    out = np.empty(cap, dtype=np.uint64)
    if N == 1:
        nw, nc = numba().tans_encode(symbols, extras, run_tab, run_end, n_runs, p.freq, p.cum, p.nbh, p.thr, p.kb, p.enc,
                              spec.tans.table_log, W, interval, out, cps)
    else:
        nw, nc = numba().tans_encode_n(symbols, extras, run_tab, run_end, n_runs, p.freq, p.cum, p.nbh, p.thr, p.kb, p.enc,
                                spec.tans.table_log, W, N, interval, out, cps)
    return out, cps, nw, nc


def _rans_encode_stream(spec, p, tables, symbols, extras, run_tab, run_end, n_runs, interval):
    n, W = symbols.size, spec.word_bits
    N = spec.states
    cap = n * (int(p.nchunk.max()) + 1) + N * (spec.state_bits // W + 1) + 2
    cps = np.empty(((n - 1) // interval if interval and n else 0, 3 + N), dtype=np.uint64)
    if native() and p.native_ok and _is_r16(spec):
        out = np.empty(cap, dtype=np.uint16)
        status, nw, nc = nativeans.rans16_encode(symbols, extras, run_tab, run_end, p.freq, p.cum, p.nsym, p.kb,
                                                 p.nchunk, p.chunk_b, N, interval, out, cps)
        return out, cps, _native_status("rANS", status, nw), nc
    if native() and p.native_ok and W in (8, 16, 32):
        out = np.empty(cap, dtype=word_dtype(W))
        status, nw, nc = nativeans.rans_encode(symbols, extras, run_tab, run_end, p.freq, p.cum, p.nsym, p.kb,
                                               p.nchunk, p.chunk_b, spec.rans.precision_bits, spec.rans.state_bits,
                                               W, N, interval, out, cps)
        return out, cps, _native_status("rANS", status, nw), nc
    out = np.empty(cap, dtype=np.uint64)
    if N == 1:
        nw, nc = numba().rans_encode(symbols, extras, run_tab, run_end, n_runs, p.freq, p.cum, p.nchunk, p.chunk_b,
                              spec.rans.precision_bits, spec.rans.state_bits, W, interval, out, cps)
    else:
        nw, nc = numba().rans_encode_n(symbols, extras, run_tab, run_end, n_runs, p.freq, p.cum, p.nchunk, p.chunk_b,
                                spec.rans.precision_bits, spec.rans.state_bits, W, N, interval, out, cps)
    return out, cps, nw, nc


def _start(spec, w: np.ndarray, checkpoint: Checkpoint | None, start: int):
    """Decoder state at the top of the stream or at ``checkpoint`` (the golden coders' rules)."""
    return _KERNELS[spec.kind].start(spec, w, checkpoint, start)


def _tans_start(spec, w: np.ndarray, checkpoint: Checkpoint | None, start: int):
    W = spec.word_bits
    h = int(w.size)
    R = spec.tans.table_log
    N = spec.states
    if checkpoint is None or checkpoint.pair == 0:
        # Only the head words are read: at most ceil((N R + W) / W) + 1 of them.
        head = max(0, h - (N * R + 2 * W) // W - 1)
        hh, cnt, buf, state = stream_head(w[head:].tolist(), R, W, N)
        return 0, (head + hh, cnt, buf, state)
    c = checkpoint
    check_checkpoint(c, start, h, W, N, 1 << R, mid_word=True)
    return c.pair, (c.word, c.bit, (int(w[c.word]) & ((1 << c.bit) - 1)) if c.bit else 0, c.state)


def _rans_start(spec, w: np.ndarray, checkpoint: Checkpoint | None, start: int):
    W = spec.word_bits
    h = int(w.size)
    S, N = spec.rans.state_bits, spec.states
    if checkpoint is None or checkpoint.pair == 0:
        # The golden head on the top words only: N states never take more than ceil(S/W) words each
        # (one state: after k pops x >= 2**((k-1)W), so it stops within ceil(S/W) pops).
        head = max(0, h - N * (-(-S // W)))
        hh, xs = rans_stream_head(w[head:].tolist(), spec.rans)
        return 0, (head + hh, xs[0] if N == 1 else pack_states(xs))
    check_checkpoint(checkpoint, start, h, W, N, 1 << S, mid_word=False)
    return checkpoint.pair, (checkpoint.word, checkpoint.state)


def _run_kernel(spec, p: PreparedTables, w, run_tab, run_end, pos, stop, state, out_s, out_e, out0):
    """One kernel call from ``state`` at pair ``pos``; returns the state after pair ``stop - 1``."""
    return _KERNELS[spec.kind].run(spec, p, w, run_tab, run_end, pos, stop, state, out_s, out_e, out0)


def _native_words(spec, p: PreparedTables, w: np.ndarray) -> np.ndarray | None:
    """``w`` as the native kernels read it (little-endian ``W``-bit items), or None where they cannot
    (a word wider than ``W`` bits, which only the golden arithmetic defines; or ``W`` not 8/16/32)."""
    if not (native() and p.native_ok):
        return None
    W = spec.word_bits
    if W not in (8, 16, 32):
        return None
    if w.dtype.itemsize * 8 != W:
        if w.size and int(w.max()) >> W:
            return None
        w = w.astype(word_dtype(W))
    return w


def _tans_run(spec, p: PreparedTables, w, run_tab, run_end, pos, stop, state, out_s, out_e, out0):
    h, cnt, buf, X = state
    wn = _native_words(spec, p, w)
    if wn is not None and (out_s.dtype, out_e.dtype) in NATIVE_OUT:
        W = spec.word_bits
        Xs = np.asarray(X if isinstance(X, tuple) else (X,), np.int64)
        status, B = nativeans.tans_decode(wn, h * W + cnt, Xs, pos % Xs.size, p.dec_se, 1 << spec.tans.table_log,
                                          run_tab, run_end, pos, stop, out_s, out_e, out0)
        if status >= 0:
            raise StreamError(f"tANS stream runs out of words at pair {status}")
        h, cnt, buf = nativeans.tans_state_at(wn, W, h, B)
        return int(h), int(cnt), int(buf), pack_states(Xs.tolist())
    if isinstance(X, tuple):
        Xs = np.asarray(X, np.int64)
        kernel = numba().tans_decode_r if Xs.size in _ROTATED else numba().tans_decode_n
        status, h, cnt, buf, _ = kernel(w, h, cnt, np.uint64(buf), Xs, pos % Xs.size, p.sym, p.nb, p.base,
                                        p.kb, run_tab, run_end, pos, stop, spec.word_bits, out_s, out_e, out0)
        X = pack_states(Xs.tolist())
    else:
        status, h, cnt, buf, X = numba().tans_decode(w, h, cnt, np.uint64(buf), X, p.sym, p.nb, p.base, p.kb, run_tab,
                                                   run_end, pos, stop, spec.word_bits, out_s, out_e, out0)
        X = int(X)
    if status >= 0:
        raise StreamError(f"tANS stream runs out of words at pair {status}")
    return int(h), int(cnt), int(buf), X


def _is_r16(spec) -> bool:
    """Whether ``spec`` is the interleaved rANS preset (``rans16xN``: S = 32, W = 16, P = 16, N > 1), which
    the native ``rans16_*`` kernels code (AVX-512 across the 16 states of ``N = 16``)."""
    r = spec.rans
    return spec.states > 1 and (r.state_bits, r.word_bits, r.precision_bits) == (32, 16, 16)


def _r16_ok(p: PreparedTables) -> bool:
    """Whether the ``rans16_*`` kernels take these tables: frequencies that fill the 2^16 slots, and
    additional data of at most 32 bits (their pairs are ``uint32``)."""
    return bool(p.native_ok and int(p.kb.max(initial=0)) <= 32)


def _r16_decode(spec, p: PreparedTables, wn, run_tab, run_end, starts, stops, out0, out_s, out_e,
                join=None) -> list[tuple[int, tuple]]:
    """Segments ``starts[i] = (pos, (h, states))`` .. ``stops[i]`` of a ``rans16xN`` stream in one native call
    (side by side in the AVX-512 kernel): pairs into ``out_s`` (``uint8``) and ``out_e`` (``uint32``), or with
    ``join`` (the values decoder's per-table arrays) values into ``out_s``, at ``pair - out0``. Returns each
    segment's status (-1 success, >= 0 the pair where the words ran out, -2 an escape index outside its
    group) and its state after the segment."""
    N = spec.states
    hs = np.asarray([h for _, (h, _) in starts], np.int64)
    xs = np.asarray([x for _, (_, x) in starts], np.uint64).reshape(-1)
    poss = np.asarray([pos for pos, _ in starts], np.int64)
    stop = np.asarray(stops, np.int64)
    statuses = np.empty(len(starts), np.int64)
    if join is None:
        nativeans.rans16_decode(wn, hs, xs, p.freq, p.cum, p.nsym, p.nchunk, p.chunk_b, run_tab, run_end,
                                poss, stop, out0, out_s, out_e, 0, _NO_I64, _NO_I64, _NO_U32, _NO_U32, 0, 0, 0,
                                statuses)
    else:
        z, n_esc, hi, esc, wbits, m, top = join
        nativeans.rans16_decode(wn, hs, xs, p.freq, p.cum, p.nsym, p.nchunk, p.chunk_b, run_tab, run_end,
                                poss, stop, out0, out_s, _NO_U32, 1, z, n_esc, hi, esc, wbits, m, top, statuses)
    return [(int(statuses[i]), (int(hs[i]), pack_states(xs[i * N:(i + 1) * N].tolist()))) for i in range(len(starts))]


def _rans_run(spec, p: PreparedTables, w, run_tab, run_end, pos, stop, state, out_s, out_e, out0):
    h, x = state
    wn = _native_words(spec, p, w)
    if wn is not None and _is_r16(spec) and _r16_ok(p) and (out_s.dtype, out_e.dtype) in NATIVE_OUT:
        compact = out_s.dtype == np.uint8
        if not compact and int(p.nsym.max()) <= 256:
            # decode() asks for int64 pairs: the kernel writes compact ones, widened here
            cs, ce = np.empty(out_s.size, np.uint8), np.empty(out_s.size, np.uint32)
        elif compact:
            cs, ce = out_s, out_e
        else:
            cs = None
        if cs is not None:
            [(status, st)] = _r16_decode(spec, p, wn, run_tab, run_end, [(pos, (h, x))], [stop], out0, cs, ce)
            if status >= 0:
                raise StreamError(f"rANS stream runs out of words at pair {status}")
            if not compact:
                out_s[:] = cs
                out_e[:] = ce
            return st
    if wn is not None and (out_s.dtype, out_e.dtype) in NATIVE_OUT:
        xs = np.asarray(x if isinstance(x, tuple) else (x,), np.uint64)
        status, h = nativeans.rans_decode(wn, h, xs, p.freq, p.cum, p.nsym, p.lut16, p.nchunk, p.chunk_b, run_tab,
                                          run_end, pos, stop, spec.word_bits, spec.rans.precision_bits,
                                          spec.rans.state_bits, out_s, out_e, out0)
        if status >= 0:
            raise StreamError(f"rANS stream runs out of words at pair {status}")
        return int(h), pack_states(xs.tolist())
    if isinstance(x, tuple):
        xs = np.asarray(x, np.uint64)
        kernel = numba().rans_decode_r if xs.size in _ROTATED else numba().rans_decode_n
        status, h, _ = kernel(w, h, xs, pos % xs.size, p.freq, p.cum, p.nsym, p.lut, _LUT_BITS, p.nchunk,
                              p.chunk_b, run_tab, run_end, pos, stop, spec.word_bits, spec.rans.precision_bits,
                              spec.rans.state_bits, out_s, out_e, out0)
        if status >= 0:
            raise StreamError(f"rANS stream runs out of words at pair {status}")
        return int(h), pack_states(xs.tolist())
    status, h, x = numba().rans_decode(w, h, np.uint64(x), p.freq, p.cum, p.nsym, p.lut, _LUT_BITS, p.nchunk, p.chunk_b,
                                     run_tab, run_end, pos, stop, spec.word_bits, spec.rans.precision_bits,
                                     spec.rans.state_bits, out_s, out_e, out0)
    return int(h), int(x)


_NO_I64 = np.zeros(0, np.int64)
_NO_U32 = np.zeros(0, np.uint32)



def _as_words(words) -> np.ndarray:
    """The words as a contiguous native unsigned array (kept in their own width: no 4x copy to uint64)."""
    w = np.asarray(words)
    if w.dtype.kind != "u" or w.dtype.byteorder not in "=|":
        w = w.astype(np.uint64)
    return np.ascontiguousarray(w)


def decode(spec, words, tables: Sequence, runs: Sequence[Run], start: int = 0, count: int | None = None,
           checkpoint: Checkpoint | None = None, prepared: PreparedTables | None = None
           ) -> tuple[np.ndarray, np.ndarray, Checkpoint]:
    """:meth:`TansCoder.decode` / :meth:`RansCoder.decode`, compiled: the same pairs, checkpoint and errors."""
    if not _widest_field_ok(spec, tables):
        return spec.coder().decode(words, tables, runs, start, count, checkpoint)
    n = check_runs(runs, len(tables))
    count = n - start if count is None else count
    if start < 0 or count < 0 or start + count > n:
        from ..errors import ConfigError
        raise ConfigError(f"pairs {start}..{start + count} are outside the stream's {n} pairs")
    w = _as_words(words)
    pos, state = _start(spec, w, checkpoint, start)
    p = prepared or PreparedTables(spec, tables)
    run_tab, run_end = _runs(runs)
    out_s = np.empty(count, np.int64)
    out_e = np.empty(count, np.uint64)
    state = _run_kernel(spec, p, w, run_tab, run_end, pos, start + count, state, out_s, out_e, start)
    return out_s, out_e, _finish(spec, state, start + count, n)


def _finish(spec, state, end: int, n: int) -> Checkpoint:
    """The end check (when ``end`` is the stream's end) and the checkpoint to resume from."""
    return _KERNELS[spec.kind].finish(spec, state, end, n)


def _tans_finish(spec, state, end: int, n: int) -> Checkpoint:
    h, cnt, buf, X = state
    N = spec.states
    Xs = list(X) if isinstance(X, tuple) else [X]
    if end == n and (any(Xs) or cnt != 0 or h != 0 or buf != 0):
        shown = Xs[0] if N == 1 else Xs
        raise StreamError(f"tANS stream fails its end check: state index {shown} (expected "
                          f"{0 if N == 1 else [0] * N}), {cnt + spec.word_bits * h} unread bits")
    return Checkpoint(end, h, cnt, X)


def _rans_finish(spec, state, end: int, n: int) -> Checkpoint:
    h, x = state
    N = spec.states
    xs = list(x) if isinstance(x, tuple) else [x]
    x0 = rans_initial_state(spec.rans)
    if end == n and (any(v != x0 for v in xs) or h != 0):
        shown = xs[0] if N == 1 else xs
        raise StreamError(f"rANS stream fails its end check: final state {shown} (expected "
                          f"{x0 if N == 1 else [x0] * N}), {h} unread words")
    return Checkpoint(end, h, 0, x)


def decode_segments(spec, words, tables: Sequence, runs: Sequence[Run], checkpoints: Sequence[Checkpoint],
                    threads: int | None = None, compact: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Decode a whole stream, split at its checkpoints, on ``threads`` threads (``None``: every CPU).

    Segment ``b`` runs from checkpoint ``b - 1`` (the top for ``b = 0``) to checkpoint ``b``; it must
    end in exactly the state checkpoint ``b`` records (words left, bit offset, coder state), otherwise
    the stream or its checkpoints are corrupt and :class:`StreamError` names the segment. The last
    segment ends with the golden end check. The result equals :func:`decode` of the whole stream;
    ``compact`` returns it as ``uint8`` symbols and ``uint32`` additional data where they fit (a fifth
    of the memory), for :func:`.fastpairs.join_values`.
    """
    if not _widest_field_ok(spec, tables):
        s, e, _ = spec.coder().decode(words, tables, runs)
        return s, e
    n = check_runs(runs, len(tables))
    w = _as_words(words)
    p = PreparedTables(spec, tables)
    run_tab, run_end = _runs(runs)
    small = compact and max((t.freqs.size for t in tables), default=1) <= 256 \
        and max((int(t.extra_bits.max()) for t in tables if t.extra_bits.size), default=0) <= 32
    out_s = np.empty(n, np.uint8 if small else np.int64)
    out_e = np.empty(n, np.uint32 if small else np.uint64)
    bounds = [None, *checkpoints]
    stops = [c.pair for c in checkpoints] + [n]
    wn = _native_words(spec, p, w) if spec.kind == "rans" and _is_r16(spec) and small and _r16_ok(p) else None

    def some(bs: list[int]) -> None:
        """rans16xN: segments ``bs`` in one native call (side by side in the AVX-512 kernel), each checked as
        ``one`` checks it."""
        starts = [_start(spec, w, bounds[b], bounds[b].pair if bounds[b] is not None else 0) for b in bs]
        got = _r16_decode(spec, p, wn, run_tab, run_end, starts, [stops[b] for b in bs], 0, out_s, out_e)
        for b, (pos, _), (status, state) in zip(bs, starts, got):
            if status >= 0:
                raise StreamError(f"rANS stream runs out of words at pair {status}")
            _check_seam(b, pos, state)

    def _check_seam(b: int, pos: int, state) -> None:
        stop = stops[b]
        if b + 1 < len(bounds):
            nxt = bounds[b + 1]
            got = _finish(spec, state, stop, n)
            if (got.word, got.bit, got.state) != (nxt.word, nxt.bit, nxt.state):
                raise StreamError(f"segment {b} (pairs {pos}..{stop}) ends in state {got.as_tuple()}, but checkpoint "
                                  f"{b} records {nxt.as_tuple()}")
        else:
            _finish(spec, state, stop, n)

    threads = default_threads() if threads is None else max(1, int(threads))
    if wn is not None:
        if threads == 1 or len(bounds) == 1:
            some(list(range(len(bounds))))
        else:
            groups = [list(range(len(bounds)))[i::threads] for i in range(min(threads, len(bounds)))]
            with ThreadPoolExecutor(max_workers=len(groups)) as pool:
                for f in [pool.submit(some, g) for g in groups]:
                    f.result()
        return out_s, out_e

    def one(b: int) -> None:
        cp = bounds[b]
        pos, state = _start(spec, w, cp, cp.pair if cp is not None else 0)
        stop = stops[b]
        # Each segment writes its own slice of the shared output (disjoint: no lock needed).
        state = _run_kernel(spec, p, w, run_tab, run_end, pos, stop, state, out_s[pos:stop], out_e[pos:stop], pos)
        _check_seam(b, pos, state)

    if threads == 1 or len(bounds) == 1:
        for b in range(len(bounds)):
            one(b)
    else:
        with ThreadPoolExecutor(max_workers=min(threads, len(bounds))) as pool:
            for f in [pool.submit(one, b) for b in range(len(bounds))]:
                f.result()
    return out_s, out_e


#: The values decoder's marker of an escape state (nativeans.c ``ESC``).
_ESC = 0xFFFFFFFF


def decode_values(spec, words, tables: Sequence, runs: Sequence[Run], checkpoints: Sequence[Checkpoint],
                  joins: Sequence[tuple], fmt, threads: int | None = None,
                  blocks: Sequence[tuple[int, int, int, int]] | None = None) -> np.ndarray | None:
    """A whole tANS stream decoded straight into value bit patterns (``fmt.bits_dtype``), one per pair:
    :func:`decode_segments` and :func:`.fastpairs.join_values` in one native pass, without the intermediate pairs.

    ``joins[t]`` is ``(code_table, exponents, z)`` for table ``t``: the tensor's code table and
    code→exponent list, and its rows' shift ``z`` (docs/bitstream.md §6: the table codes ``w - z``
    bits of additional data that land shifted left by ``z``; 0 without row shifts). Every table
    joins with the one pair format ``fmt`` (sign and mantissa as the additional data).

    The segments between checkpoints go to the kernel together (one call per thread), so that the
    AVX-512 kernels (VBMI: ``N`` = 8 or 16; permute: ``N`` = 16; 16-bit values) can run them side by side.

    ``rans16xN`` streams (the interleaved rANS preset) decode here too, through the native
    ``rans16_decode`` (AVX-512 across the 16 states of ``N = 16``).

    ``blocks`` (with no ``checkpoints``): ``words`` holds independent streams side by side, block
    ``i = (word_lo, word_hi, pair_lo, pair_hi)`` coding pairs ``pair_lo .. pair_hi - 1`` of ``runs``
    from its own head at ``word_hi`` down to ``word_lo`` (a version-6 container's blocks,
    ``docs/bitstream.md`` §6). They are the segments: one native call decodes many blocks side by side
    with every table of the call prepared once, so that a model's thousands of blocks cost one call per
    group of tensors, not one each. Each block's end check is the golden one, relative to its
    ``word_lo``.

    Returns ``None`` where this path does not apply (no native kernels, another rANS codec, another
    format, a table outside the kernel's limits) or when the stream is corrupt: the caller then runs
    :func:`decode_segments`, which names the error as the golden decoder does.
    """
    if native() and spec.kind == "rans" and _is_r16(spec):
        return _r16_values(spec, words, tables, runs, checkpoints, joins, fmt, threads, blocks)
    if not (native() and spec.kind == "tans" and len(joins) == len(tables) and tables
            and fmt.extra_bits == fmt.mantissa_bits + 1 and np.dtype(fmt.bits_dtype).itemsize in (1, 2, 4)
            and _widest_field_ok(spec, tables)):
        return None
    n = check_runs(runs, len(tables))
    w = _as_words(words)
    p = PreparedTables(spec, tables)
    wn = _native_words(spec, p, w)
    if wn is None or not p.native_ok:
        return None
    m, wbits = fmt.mantissa_bits, fmt.extra_bits
    his, z, escs = [], np.zeros(len(tables), np.int64), []
    for t, (ct, exponents, zt) in enumerate(joins):
        exps = np.asarray(exponents, dtype=np.int64)
        codes = list(ct.direct_codes) + list(ct.escape_codes)
        if (codes and max(codes) >= exps.size) or not 0 <= zt <= m or ct.extra_bits != wbits \
                or (np.asarray(tables[t].extra_bits[:ct.n_direct]) != wbits - zt).any():
            return None
        hi = np.full(max(p.sym.shape[1], int(p.nsym[t])), _ESC, np.uint64)
        hi[:ct.n_direct] = exps[np.asarray(ct.direct_codes, np.int64)].astype(np.uint64) << np.uint64(m)
        his.append(hi)
        z[t] = zt
        escs.append(exps[np.asarray(ct.escape_codes, np.int64)] if ct.escape_codes else np.zeros(0, np.int64))
    hi = np.stack([h[:p.nsym.max()] for h in his]) if his else np.zeros((1, 1), np.uint64)
    hi_state = np.take_along_axis(hi, p.sym, axis=1)
    vtab = np.ascontiguousarray(p.base.astype(np.uint64) | (p.nb.astype(np.uint64) << np.uint64(16))
                                | ((p.dec_se >> np.uint64(40)) & np.uint64(0xFF)) << np.uint64(24)
                                | (hi_state << np.uint64(32)))
    esc = _pad(escs) if escs else np.zeros((1, 1), np.int64)
    n_esc = np.asarray([e.size for e in escs], np.int64)
    run_tab, run_end = _runs(runs)
    out = np.empty(n, dtype=fmt.bits_dtype)
    L = 1 << spec.tans.table_log
    W = spec.word_bits
    segs = _Segments(spec, w, n, checkpoints, blocks)
    if segs.bad:
        return None

    N = spec.states

    def some_blocks(bs: list[int]) -> bool:
        """Independent blocks ``bs`` in one native call: their heads read and their end checks done on
        whole arrays (``tans_heads``; the end check is the golden one: every bit of the block read,
        every state index back to 0), no Python per block."""
        blk = np.asarray([segs.blocks[b] for b in bs], np.int64).reshape(-1, 4)
        los, his = np.ascontiguousarray(blk[:, 0]), np.ascontiguousarray(blk[:, 1])
        Bs = np.empty(len(bs), np.int64)
        Xs = np.empty(len(bs) * N, np.int64)
        if nativeans.tans_heads(wn, W, spec.tans.table_log, N, los, his, Bs, Xs) != -1:
            return False
        statuses = np.empty(len(bs), np.int64)
        nativeans.tans_decode_values(wn, Bs, Xs, vtab, L, run_tab, run_end, np.ascontiguousarray(blk[:, 2]),
                                     np.ascontiguousarray(blk[:, 3]), z, esc, n_esc, wbits, m, fmt.total_bits - 1,
                                     out, statuses)
        return bool((statuses == -1).all() and (Bs == los * W).all() and not Xs.any())

    def some(bs: list[int]) -> bool:
        """Segments ``bs`` in one native call (side by side in the AVX-512 kernel), each checked
        against the checkpoint (or the block end) that ends it."""
        if segs.blocks is not None:
            return some_blocks(bs)
        starts = [segs.start(b) for b in bs]
        Bs = np.asarray([h * W + cnt for _, (h, cnt, _, _) in starts], np.int64)
        Xs = np.asarray([X if isinstance(X, tuple) else (X,) for _, (_, _, _, X) in starts], np.int64).reshape(-1)
        poss = np.asarray([pos for pos, _ in starts], np.int64)
        stop = np.asarray([segs.stops[b] for b in bs], np.int64)
        statuses = np.empty(len(bs), np.int64)
        nativeans.tans_decode_values(wn, Bs, Xs, vtab, L, run_tab, run_end, poss, stop, z, esc, n_esc, wbits, m,
                                     fmt.total_bits - 1, out, statuses)
        for i, b in enumerate(bs):
            if statuses[i] != -1:
                return False
            h, cnt, buf = nativeans.tans_state_at(wn, W, starts[i][1][0], int(Bs[i]))
            if not segs.ends(b, (int(h), int(cnt), int(buf), pack_states(Xs[i * N:(i + 1) * N].tolist()))):
                return False
        return True

    return out if segs.run(some, threads) else None


def _r16_values(spec, words, tables, runs, checkpoints, joins, fmt, threads, blocks=None):
    """:func:`decode_values` of a ``rans16xN`` stream (the native ``rans16_decode`` in its values mode)."""
    if not (len(joins) == len(tables) and tables and fmt.extra_bits == fmt.mantissa_bits + 1
            and np.dtype(fmt.bits_dtype).itemsize in (1, 2, 4)):
        return None
    n = check_runs(runs, len(tables))
    w = _as_words(words)
    p = PreparedTables(spec, tables)
    wn = _native_words(spec, p, w)
    if wn is None or not _r16_ok(p):
        return None
    m, wbits = fmt.mantissa_bits, fmt.extra_bits
    width = p.freq.shape[1]
    hi = np.full((len(tables), width), _ESC, np.uint32)
    z = np.zeros(len(tables), np.int64)
    escs = []
    for t, (ct, exponents, zt) in enumerate(joins):
        exps = np.asarray(exponents, dtype=np.int64)
        codes = list(ct.direct_codes) + list(ct.escape_codes)
        if (codes and max(codes) >= exps.size) or not 0 <= zt <= m or ct.extra_bits != wbits \
                or (np.asarray(tables[t].extra_bits[:ct.n_direct]) != wbits - zt).any() or ct.n_direct > width \
                or (exps.size and (int(exps.max()) >> (fmt.total_bits - 1 - m) or int(exps.min()) < 0)):
            return None
        hi[t, :ct.n_direct] = (exps[np.asarray(ct.direct_codes, np.int64)] << m).astype(np.uint32)
        z[t] = zt
        escs.append(exps[np.asarray(ct.escape_codes, np.int64)] << m if ct.escape_codes else np.zeros(0, np.int64))
    esc = _pad(escs).astype(np.uint32) if escs else np.zeros((1, 1), np.uint32)
    n_esc = np.asarray([e.size for e in escs], np.int64)
    run_tab, run_end = _runs(runs)
    out = np.empty(n, dtype=fmt.bits_dtype)
    join = (z, n_esc, np.ascontiguousarray(hi), np.ascontiguousarray(esc), wbits, m, fmt.total_bits - 1)
    segs = _Segments(spec, w, n, checkpoints, blocks)
    if segs.bad:
        return None

    def some(bs: list[int]) -> bool:
        starts = [segs.start(b) for b in bs]
        got = _r16_decode(spec, p, wn, run_tab, run_end, starts, [segs.stops[b] for b in bs], 0, out, None, join)
        return all(status == -1 and segs.ends(b, state) for b, (status, state) in zip(bs, got))

    return out if segs.run(some, threads) else None


class _Segments:
    """The pieces :func:`decode_values` hands to the kernels: the stretches between a stream's
    checkpoints (each must end in the state its successor records), or independent blocks (each from
    its own head down to its first word, where the golden end check holds)."""

    def __init__(self, spec, w: np.ndarray, n: int, checkpoints: Sequence[Checkpoint], blocks):
        self.spec, self.w, self.n = spec, w, n
        self.blocks = None if blocks is None else [tuple(int(v) for v in b) for b in blocks]
        self.bad = False
        if self.blocks is None:
            self.bounds = [None, *checkpoints]
            self.stops = [c.pair for c in checkpoints] + [n]
            return
        # Blocks tile the pairs and the words in order; anything else is not a container's blocks.
        pair, word = 0, 0
        for lo, hi, a, b in self.blocks:
            if lo != word or hi < lo or a != pair or b < a or hi > w.size:
                self.bad = True
            word, pair = hi, b
        self.bad = self.bad or bool(checkpoints) or pair != n
        self.stops = [b for _, _, _, b in self.blocks]

    def __len__(self) -> int:
        return len(self.stops)

    def start(self, i: int):
        """``(first pair, decoder state)`` of segment ``i``."""
        if self.blocks is None:
            c = self.bounds[i]
            return _start(self.spec, self.w, c, c.pair if c is not None else 0)
        lo, hi, a, _ = self.blocks[i]
        # The words below hi, indexed as in the whole array: the head is read at hi, as a block's own.
        return a, _start(self.spec, self.w[:hi], None, 0)[1]

    def ends(self, i: int, state) -> bool:
        """Whether segment ``i`` ended as it must (raises StreamError on a failed end check)."""
        if self.blocks is None:
            got = _finish(self.spec, state, self.stops[i], self.n)
            if i + 1 < len(self.bounds):
                nxt = self.bounds[i + 1]
                return (got.word, got.bit, got.state) == (nxt.word, nxt.bit, nxt.state)
            return True
        lo, _, _, b = self.blocks[i]
        h, *rest = state
        if h < lo:
            return False
        _finish(self.spec, (h - lo, *rest), b, b)
        return True

    def run(self, some: Callable[[list[int]], bool], threads: int | None) -> bool:
        """``some`` over every segment, on ``threads`` threads (segments dealt round-robin); False on
        any failure (the caller then decodes pair by pair, which names the error)."""
        k = len(self)
        threads = default_threads() if threads is None else max(1, int(threads))
        # Longest first: the SIMD kernels run consecutive segments side by side until the group's
        # longest ends, so segments of like length go together (and threads get even shares).
        starts = [0] + self.stops[:-1] if self.blocks is None else [a for _, _, a, _ in self.blocks]
        order = sorted(range(k), key=lambda i: starts[i] - self.stops[i])
        try:
            if threads == 1 or k == 1:
                return some(order)
            groups = [order[i::threads] for i in range(min(threads, k))]
            with ThreadPoolExecutor(max_workers=len(groups)) as pool:
                return all(pool.map(some, groups))
        except StreamError:
            return False


class _Kernels:
    """The compiled path of one codec kind: which codecs it takes and the kind's steps (one
    implementation per kind, selected by ``spec.kind``: no caller branches on it)."""

    def __init__(self, supported, widest_field_ok, prepare, encode, start, run, finish):
        self.supported, self.widest_field_ok, self.prepare = supported, widest_field_ok, prepare
        self.encode, self.start, self.run, self.finish = encode, start, run, finish


def _tans_widest_field_ok(spec, tables) -> bool:
    """Whether every pair's widest field (``W + R + 1 + k`` bits) fits the kernel's 64-bit buffer."""
    k = max((int(t.extra_bits.max()) for t in tables if t.extra_bits.size), default=0)
    return spec.tans.word_bits + spec.tans.table_log + 1 + k <= 64


_KERNELS: dict[str, _Kernels] = {
    "tans": _Kernels(lambda spec: True, _tans_widest_field_ok, PreparedTables.prepare_tans, _tans_encode_stream,
                     _tans_start, _tans_run, _tans_finish),
    "rans": _Kernels(lambda spec: spec.rans.state_bits <= 64 and spec.rans.word_bits <= 32,
                     lambda spec, tables: True, PreparedTables.prepare_rans, _rans_encode_stream, _rans_start,
                     _rans_run, _rans_finish),
}
