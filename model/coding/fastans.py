"""Native-speed tANS and rANS stream coders, bit-exact with the golden models.

The golden coders (:mod:`.tans`, :mod:`.rans`) walk pairs in Python; they stay the reference. This
module runs *the same* single-lane algorithms, step for step, as machine code compiled by numba
(``@njit(nogil=True, cache=True)``): the same state, the same bit buffer and the same word stack, so
the words, checkpoints and decoded pairs are identical (``tests/test_fastans.py`` compares them with
the golden coders on random and real tensors, including every error path).

Why numba: the algorithms are short integer loops over NumPy arrays, which numba compiles to the
code a C extension would hold, without a compiler at ``pip install`` time (numba ships wheels), and
the compiled kernels are cached on disk, so a process pays the compilation once per installation.
``nogil`` lets threads decode independent segments at once: a stream's checkpoints (every
``checkpoint_interval`` pairs) are exactly the starting points that Fig. 12's parallel decoders use,
so :func:`decode_segments` splits a stream there and decodes the pieces on ``threads`` threads; each
piece must end in the state its successor's checkpoint records, which checks the seams.

Codecs of ``N > 1`` interleaved states (``docs/bitstream.md`` §8) run their own kernels
(``_tans_decode_n`` …), whose ``N`` states are independent dependency chains a CPU overlaps; the
``N = 1`` kernels are the single-state ones, untouched.

Limits (outside them the callers use the golden coders): tANS fields with ``W + R + 1 + k <= 64``
bits (the paper's tans8 with fp32 pairs: 16 + 9 + 30 = 55); rANS with ``S <= 64``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .rans import initial_state as rans_initial_state, stream_head as rans_stream_head
from .stream import Checkpoint, EncodedStream, Run, StreamError, check_checkpoint, check_pairs, check_runs, pack_states
from .stream import word_dtype
from .tans import stream_head

__all__ = ["supported", "encode", "decode", "decode_segments", "join_values", "default_threads", "PreparedTables"]

try:  # numba is a declared dependency; the guard only keeps `import ansforge` working while it installs
    from numba import njit
except ImportError:  # pragma: no cover
    njit = None

_NJIT = dict(nogil=True, cache=True, boundscheck=False)


def default_threads() -> int:
    """Threads used when none are asked for: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        return max(1, os.cpu_count() or 1)


def supported(spec) -> bool:
    """Whether ``spec`` (a :class:`~ansforge.model.coding.codecs.Codec`) runs on the compiled kernels
    (tANS tables whose fields are too wide for a 64-bit buffer fall back per stream, see the module)."""
    if njit is None:
        return False
    return _KERNELS[spec.kind].supported(spec)


def _widest_field_ok(spec, tables) -> bool:
    return _KERNELS[spec.kind].widest_field_ok(spec, tables)


# ------------------------------------------------------------------------------------------------
# kernels (integers: int64 where values stay below 2**63, uint64 for rANS states and bit buffers)

if njit is not None:

    @njit(**_NJIT)
    def _run_at(run_end, pos):
        """The run holding pair ``pos`` (``run_end`` ends with a sentinel larger than any pair)."""
        r = 0
        while run_end[r] <= pos:
            r += 1
        return r

    @njit(**_NJIT)
    def _tans_decode(w, h, cnt, buf, X, sym, nb, base, kb, run_tab, run_end, pos, stop, W, out_s, out_e, out0):
        """Decode pairs ``pos .. stop-1``; run ``r`` (table ``run_tab[r]``) ends before pair ``run_end[r]``.

        Returns ``(status, h, cnt, buf, X)``; status ``-1`` is success, else the pair where the words ran out.
        """
        r = _run_at(run_end, pos)
        while pos < stop:
            t, end = run_tab[r], min(stop, run_end[r])
            sym_t, nb_t, base_t, kb_t = sym[t], nb[t], base[t], kb[t]
            while pos < end:
                s = sym_t[X]
                n = nb_t[X]
                need = n + kb_t[s]
                while cnt < need:
                    if h == 0:
                        return pos, h, cnt, buf, X
                    h -= 1
                    buf = (buf << np.uint64(W)) | np.uint64(w[h])
                    cnt += W
                cnt -= need
                v = buf >> np.uint64(cnt)
                buf &= (np.uint64(1) << np.uint64(cnt)) - np.uint64(1)
                X = base_t[X] + np.int64(v & ((np.uint64(1) << np.uint64(n)) - np.uint64(1)))
                if pos >= out0:
                    out_s[pos - out0] = s
                    out_e[pos - out0] = v >> np.uint64(n)
                pos += 1
            r += 1
        return -1, h, cnt, buf, X

    @njit(**_NJIT)
    def _rans_decode(w, h, x, freq, cum, nsym, lut, lut_bits, nchunk, chunk_b, run_tab, run_end, pos, stop, W, P, S,
                     out_s, out_e, out0):
        """rANS twin of :func:`_tans_decode` (``lut`` maps a quantile to its symbol when ``P <= lut_bits``,
        else a binary search over ``cum``). Returns ``(status, h, x)``."""
        lo_bound = np.uint64(1) << np.uint64(S - W)
        pmask = (np.uint64(1) << np.uint64(P)) - np.uint64(1)
        uP = np.uint64(P)
        uW = np.uint64(W)
        r = _run_at(run_end, pos)
        while pos < stop:
            t, end = run_tab[r], min(stop, run_end[r])
            n_sym = nsym[t]
            while pos < end:
                q = x & pmask
                if P <= lut_bits:
                    s = np.int64(lut[t, np.int64(q)])
                else:
                    lo = 0
                    hi = n_sym - 1
                    while lo < hi:  # the last symbol whose cum <= q
                        mid = (lo + hi + 1) >> 1
                        if np.uint64(cum[t, mid]) <= q:
                            lo = mid
                        else:
                            hi = mid - 1
                    s = lo
                x = (x >> uP) * np.uint64(freq[t, s]) + q - np.uint64(cum[t, s])
                if x < lo_bound and h:
                    h -= 1
                    x = (x << uW) | np.uint64(w[h])
                e = np.uint64(0)
                for c in range(nchunk[t, s]):
                    b = np.uint64(chunk_b[t, s, c])
                    sh = uP - b
                    q = x & pmask
                    e = (e << b) | (q >> sh)
                    x = ((x >> uP) << sh) | (q & ((np.uint64(1) << sh) - np.uint64(1)))
                    if x < lo_bound and h:
                        h -= 1
                        x = (x << uW) | np.uint64(w[h])
                if pos >= out0:
                    out_s[pos - out0] = s
                    out_e[pos - out0] = e
                pos += 1
            r += 1
        return -1, h, x

    @njit(**_NJIT)
    def _run_before(run_end, r, i):
        """The run holding pair ``i``, searching down from run ``r`` (encoders walk pairs back to front)."""
        while r > 0 and run_end[r - 1] > i:
            r -= 1
        return r

    @njit(**_NJIT)
    def _tans_encode(syms, exs, run_tab, run_end, n_runs, freq, cum, nbh, thr, kb, enc, R, W, interval, out, cps):
        """Encode all pairs back to front (run ``r``, of table ``run_tab[r]``, ends before pair
        ``run_end[r]``); returns (n_words, n_checkpoints).
        ``cps`` rows: pair, word, bit, state (in encoder order: decreasing pair)."""
        L = np.int64(1) << R
        wmask = (np.uint64(1) << np.uint64(W)) - np.uint64(1)
        X = L
        acc = np.uint64(0)
        cnt = 0
        nw = nc = 0
        r = n_runs - 1
        for i in range(syms.size - 1, -1, -1):
            r = _run_before(run_end, r, i)
            t, s = run_tab[r], syms[i]
            n_out = nbh[t, s] - (1 if X < thr[t, s] else 0)
            acc |= np.uint64(X & ((np.int64(1) << n_out) - 1)) << np.uint64(cnt)
            cnt += n_out
            X = L + enc[t, cum[t, s] + (X >> n_out) - freq[t, s]]
            acc |= np.uint64(exs[i]) << np.uint64(cnt)
            cnt += kb[t, s]
            while cnt >= W:
                out[nw] = acc & wmask
                nw += 1
                acc >>= np.uint64(W)
                cnt -= W
            if interval and i and i % interval == 0:
                cps[nc, 0] = i
                cps[nc, 1] = nw
                cps[nc, 2] = cnt
                cps[nc, 3] = X - L
                nc += 1
        acc |= np.uint64((X - L) | L) << np.uint64(cnt)
        cnt += R + 1
        while cnt >= W:
            out[nw] = acc & wmask
            nw += 1
            acc >>= np.uint64(W)
            cnt -= W
        if cnt:
            out[nw] = acc
            nw += 1
        return nw, nc

    @njit(**_NJIT)
    def _rans_encode(syms, exs, run_tab, run_end, n_runs, freq, cum, nchunk, chunk_b, P, S, W, interval, out, cps):
        """rANS twin of :func:`_tans_encode` (state starts at 0, as the golden encoder's)."""
        uP = np.uint64(P)
        uW = np.uint64(W)
        pshift = np.uint64(S - P)
        wmask = (np.uint64(1) << uW) - np.uint64(1)
        x = np.uint64(0)
        nw = nc = 0
        r = n_runs - 1
        for i in range(syms.size - 1, -1, -1):
            r = _run_before(run_end, r, i)
            t, s = run_tab[r], syms[i]
            e = np.uint64(exs[i])
            for c in range(nchunk[t, s] - 1, -1, -1):  # least significant chunk first
                b = np.uint64(chunk_b[t, s, c])
                fu = np.uint64(1) << (uP - b)
                v = e & ((np.uint64(1) << b) - np.uint64(1))
                e >>= b
                if (x >> pshift) >= fu:
                    out[nw] = x & wmask
                    nw += 1
                    x >>= uW
                x = ((x // fu) << uP) | (v * fu + x % fu)
            fs = np.uint64(freq[t, s])
            if (x >> pshift) >= fs:
                out[nw] = x & wmask
                nw += 1
                x >>= uW
            x = ((x // fs) << uP) | (np.uint64(cum[t, s]) + x % fs)
            if interval and i and i % interval == 0:
                cps[nc, 0] = i
                cps[nc, 1] = nw
                cps[nc, 2] = 0
                cps[nc, 3] = x
                nc += 1
        while x:
            out[nw] = x & wmask
            nw += 1
            x >>= uW
        return nw, nc


    # -- N > 1 interleaved states (docs/bitstream.md §8): pair j is coded with state j mod N. The states
    # live in a small array, ``lane`` is the state of the next pair; the N = 1 kernels above stay as
    # they are (bit-exact with the single-state bitstream and not slowed by the lane bookkeeping).

    @njit(**_NJIT)
    def _tans_decode_n(w, h, cnt, buf, Xs, lane, sym, nb, base, kb, run_tab, run_end, pos, stop, W, out_s, out_e,
                       out0):
        """:func:`_tans_decode` over ``N = Xs.size`` states (``Xs`` updated in place, ``lane`` the state
        of pair ``pos``). Returns ``(status, h, cnt, buf, lane)``."""
        N = Xs.size
        r = _run_at(run_end, pos)
        while pos < stop:
            t, end = run_tab[r], min(stop, run_end[r])
            sym_t, nb_t, base_t, kb_t = sym[t], nb[t], base[t], kb[t]
            while pos < end:
                X = Xs[lane]
                s = sym_t[X]
                n = nb_t[X]
                need = n + kb_t[s]
                while cnt < need:
                    if h == 0:
                        return pos, h, cnt, buf, lane
                    h -= 1
                    buf = (buf << np.uint64(W)) | np.uint64(w[h])
                    cnt += W
                cnt -= need
                v = buf >> np.uint64(cnt)
                buf &= (np.uint64(1) << np.uint64(cnt)) - np.uint64(1)
                Xs[lane] = base_t[X] + np.int64(v & ((np.uint64(1) << np.uint64(n)) - np.uint64(1)))
                lane += 1
                if lane == N:
                    lane = 0
                if pos >= out0:
                    out_s[pos - out0] = s
                    out_e[pos - out0] = v >> np.uint64(n)
                pos += 1
            r += 1
        return -1, h, cnt, buf, lane

    @njit(**_NJIT)
    def _rans_decode_n(w, h, xs, lane, freq, cum, nsym, lut, lut_bits, nchunk, chunk_b, run_tab, run_end, pos, stop,
                       W, P, S, out_s, out_e, out0):
        """:func:`_rans_decode` over ``N = xs.size`` states: a state pops exactly when it falls below
        ``2**(S - W)``, and the words running out there is an error. Returns ``(status, h, lane)``."""
        N = xs.size
        lo_bound = np.uint64(1) << np.uint64(S - W)
        pmask = (np.uint64(1) << np.uint64(P)) - np.uint64(1)
        uP = np.uint64(P)
        uW = np.uint64(W)
        r = _run_at(run_end, pos)
        while pos < stop:
            t, end = run_tab[r], min(stop, run_end[r])
            n_sym = nsym[t]
            while pos < end:
                x = xs[lane]
                q = x & pmask
                if P <= lut_bits:
                    s = np.int64(lut[t, np.int64(q)])
                else:
                    lo = 0
                    hi = n_sym - 1
                    while lo < hi:
                        mid = (lo + hi + 1) >> 1
                        if np.uint64(cum[t, mid]) <= q:
                            lo = mid
                        else:
                            hi = mid - 1
                    s = lo
                x = (x >> uP) * np.uint64(freq[t, s]) + q - np.uint64(cum[t, s])
                if x < lo_bound:
                    if h == 0:
                        return pos, h, lane
                    h -= 1
                    x = (x << uW) | np.uint64(w[h])
                e = np.uint64(0)
                for c in range(nchunk[t, s]):
                    b = np.uint64(chunk_b[t, s, c])
                    sh = uP - b
                    q = x & pmask
                    e = (e << b) | (q >> sh)
                    x = ((x >> uP) << sh) | (q & ((np.uint64(1) << sh) - np.uint64(1)))
                    if x < lo_bound:
                        if h == 0:
                            return pos, h, lane
                        h -= 1
                        x = (x << uW) | np.uint64(w[h])
                xs[lane] = x
                lane += 1
                if lane == N:
                    lane = 0
                if pos >= out0:
                    out_s[pos - out0] = s
                    out_e[pos - out0] = e
                pos += 1
            r += 1
        return -1, h, lane

    # The decoders for N = 2, 4 and 8 hold the states in local variables X0 .. X7 and rotate them after
    # each pair (X0 is always the state of the pair being decoded), so the N chains live in registers
    # instead of a store and a reload per pair: measured on MiniLM's word embeddings (bf16, one thread)
    # tans8x2 decodes 1.3x and tans8x4 1.15x faster than with the array kernels above, which remain for
    # the other N. The branch on N is the same every pair (predicted, or unswitched by LLVM).

    @njit(**_NJIT)
    def _tans_decode_r(w, h, cnt, buf, Xs, lane, sym, nb, base, kb, run_tab, run_end, pos, stop, W, out_s, out_e,
                       out0):
        """:func:`_tans_decode_n` for ``N = Xs.size`` in (2, 4, 8), states in rotating locals."""
        N = Xs.size
        X0, X1, X2, X3 = Xs[lane % N], Xs[(lane + 1) % N], Xs[(lane + 2) % N], Xs[(lane + 3) % N]
        X4, X5, X6, X7 = Xs[(lane + 4) % N], Xs[(lane + 5) % N], Xs[(lane + 6) % N], Xs[(lane + 7) % N]
        status = -1
        r = _run_at(run_end, pos)
        while pos < stop:
            t, end = run_tab[r], min(stop, run_end[r])
            sym_t, nb_t, base_t, kb_t = sym[t], nb[t], base[t], kb[t]
            while pos < end:
                s = sym_t[X0]
                n = nb_t[X0]
                need = n + kb_t[s]
                while cnt < need:
                    if h == 0:
                        status = pos
                        break
                    h -= 1
                    buf = (buf << np.uint64(W)) | np.uint64(w[h])
                    cnt += W
                if status >= 0:
                    break
                cnt -= need
                v = buf >> np.uint64(cnt)
                buf &= (np.uint64(1) << np.uint64(cnt)) - np.uint64(1)
                Xn = base_t[X0] + np.int64(v & ((np.uint64(1) << np.uint64(n)) - np.uint64(1)))
                if N == 2:
                    X0, X1 = X1, Xn
                elif N == 4:
                    X0, X1, X2, X3 = X1, X2, X3, Xn
                else:
                    X0, X1, X2, X3, X4, X5, X6, X7 = X1, X2, X3, X4, X5, X6, X7, Xn
                if pos >= out0:
                    out_s[pos - out0] = s
                    out_e[pos - out0] = v >> np.uint64(n)
                pos += 1
            if status >= 0:
                break
            r += 1
        lane = pos % N
        Xs[lane] = X0
        Xs[(lane + 1) % N] = X1
        if N > 2:
            Xs[(lane + 2) % N] = X2
            Xs[(lane + 3) % N] = X3
        if N > 4:
            Xs[(lane + 4) % N] = X4
            Xs[(lane + 5) % N] = X5
            Xs[(lane + 6) % N] = X6
            Xs[(lane + 7) % N] = X7
        return status, h, cnt, buf, lane

    @njit(**_NJIT)
    def _rans_decode_r(w, h, xs, lane, freq, cum, nsym, lut, lut_bits, nchunk, chunk_b, run_tab, run_end, pos, stop,
                       W, P, S, out_s, out_e, out0):
        """:func:`_rans_decode_n` for ``N = xs.size`` in (2, 4, 8), states in rotating locals."""
        N = xs.size
        x0, x1, x2, x3 = xs[lane % N], xs[(lane + 1) % N], xs[(lane + 2) % N], xs[(lane + 3) % N]
        x4, x5, x6, x7 = xs[(lane + 4) % N], xs[(lane + 5) % N], xs[(lane + 6) % N], xs[(lane + 7) % N]
        lo_bound = np.uint64(1) << np.uint64(S - W)
        pmask = (np.uint64(1) << np.uint64(P)) - np.uint64(1)
        uP = np.uint64(P)
        uW = np.uint64(W)
        status = -1
        r = _run_at(run_end, pos)
        while pos < stop:
            t, end = run_tab[r], min(stop, run_end[r])
            n_sym = nsym[t]
            while pos < end:
                x = x0
                q = x & pmask
                if P <= lut_bits:
                    s = np.int64(lut[t, np.int64(q)])
                else:
                    lo = 0
                    hi = n_sym - 1
                    while lo < hi:
                        mid = (lo + hi + 1) >> 1
                        if np.uint64(cum[t, mid]) <= q:
                            lo = mid
                        else:
                            hi = mid - 1
                    s = lo
                x = (x >> uP) * np.uint64(freq[t, s]) + q - np.uint64(cum[t, s])
                if x < lo_bound:
                    if h == 0:
                        status = pos
                        break
                    h -= 1
                    x = (x << uW) | np.uint64(w[h])
                e = np.uint64(0)
                for c in range(nchunk[t, s]):
                    b = np.uint64(chunk_b[t, s, c])
                    sh = uP - b
                    q = x & pmask
                    e = (e << b) | (q >> sh)
                    x = ((x >> uP) << sh) | (q & ((np.uint64(1) << sh) - np.uint64(1)))
                    if x < lo_bound:
                        if h == 0:
                            status = pos
                            break
                        h -= 1
                        x = (x << uW) | np.uint64(w[h])
                if status >= 0:
                    break
                if N == 2:
                    x0, x1 = x1, x
                elif N == 4:
                    x0, x1, x2, x3 = x1, x2, x3, x
                else:
                    x0, x1, x2, x3, x4, x5, x6, x7 = x1, x2, x3, x4, x5, x6, x7, x
                if pos >= out0:
                    out_s[pos - out0] = s
                    out_e[pos - out0] = e
                pos += 1
            if status >= 0:
                break
            r += 1
        lane = pos % N
        xs[lane] = x0
        xs[(lane + 1) % N] = x1
        if N > 2:
            xs[(lane + 2) % N] = x2
            xs[(lane + 3) % N] = x3
        if N > 4:
            xs[(lane + 4) % N] = x4
            xs[(lane + 5) % N] = x5
            xs[(lane + 6) % N] = x6
            xs[(lane + 7) % N] = x7
        return status, h, lane


    @njit(**_NJIT)
    def _tans_encode_n(syms, exs, run_tab, run_end, n_runs, freq, cum, nbh, thr, kb, enc, R, W, N, interval, out,
                       cps):
        """:func:`_tans_encode` over ``N`` states (every one starts at ``X = L``; the flush appends
        ``X_{N-1} .. X_0`` then the marker). ``cps`` rows: pair, word, bit, then the ``N`` state indices."""
        L = np.int64(1) << R
        wmask = (np.uint64(1) << np.uint64(W)) - np.uint64(1)
        Xs = np.full(N, L, np.int64)
        acc = np.uint64(0)
        cnt = 0
        nw = nc = 0
        r = n_runs - 1
        lane = (syms.size - 1) % N if syms.size else 0
        for i in range(syms.size - 1, -1, -1):
            r = _run_before(run_end, r, i)
            t, s = run_tab[r], syms[i]
            X = Xs[lane]
            n_out = nbh[t, s] - (1 if X < thr[t, s] else 0)
            acc |= np.uint64(X & ((np.int64(1) << n_out) - 1)) << np.uint64(cnt)
            cnt += n_out
            Xs[lane] = L + enc[t, cum[t, s] + (X >> n_out) - freq[t, s]]
            acc |= np.uint64(exs[i]) << np.uint64(cnt)
            cnt += kb[t, s]
            while cnt >= W:
                out[nw] = acc & wmask
                nw += 1
                acc >>= np.uint64(W)
                cnt -= W
            if interval and i and i % interval == 0:
                cps[nc, 0] = i
                cps[nc, 1] = nw
                cps[nc, 2] = cnt
                for k in range(N):
                    cps[nc, 3 + k] = Xs[k] - L
                nc += 1
            lane = lane - 1 if lane else N - 1
        for k in range(N - 1, -1, -1):
            acc |= np.uint64(Xs[k] - L) << np.uint64(cnt)
            cnt += R
            while cnt >= W:
                out[nw] = acc & wmask
                nw += 1
                acc >>= np.uint64(W)
                cnt -= W
        acc |= np.uint64(1) << np.uint64(cnt)
        cnt += 1
        while cnt >= W:
            out[nw] = acc & wmask
            nw += 1
            acc >>= np.uint64(W)
            cnt -= W
        if cnt:
            out[nw] = acc
            nw += 1
        return nw, nc

    @njit(**_NJIT)
    def _rans_encode_n(syms, exs, run_tab, run_end, n_runs, freq, cum, nchunk, chunk_b, P, S, W, N, interval, out,
                       cps):
        """:func:`_rans_encode` over ``N`` states, each starting at ``2**(S - W)`` and flushed as
        ``ceil(S / W)`` words, ``x_{N-1}`` first."""
        uP = np.uint64(P)
        uW = np.uint64(W)
        pshift = np.uint64(S - P)
        wmask = (np.uint64(1) << uW) - np.uint64(1)
        xs = np.full(N, np.uint64(1) << np.uint64(S - W), np.uint64)
        nw = nc = 0
        r = n_runs - 1
        lane = (syms.size - 1) % N if syms.size else 0
        for i in range(syms.size - 1, -1, -1):
            r = _run_before(run_end, r, i)
            t, s = run_tab[r], syms[i]
            x = xs[lane]
            e = np.uint64(exs[i])
            for c in range(nchunk[t, s] - 1, -1, -1):
                b = np.uint64(chunk_b[t, s, c])
                fu = np.uint64(1) << (uP - b)
                v = e & ((np.uint64(1) << b) - np.uint64(1))
                e >>= b
                if (x >> pshift) >= fu:
                    out[nw] = x & wmask
                    nw += 1
                    x >>= uW
                x = ((x // fu) << uP) | (v * fu + x % fu)
            fs = np.uint64(freq[t, s])
            if (x >> pshift) >= fs:
                out[nw] = x & wmask
                nw += 1
                x >>= uW
            xs[lane] = ((x // fs) << uP) | (np.uint64(cum[t, s]) + x % fs)
            if interval and i and i % interval == 0:
                cps[nc, 0] = i
                cps[nc, 1] = nw
                cps[nc, 2] = 0
                for k in range(N):
                    cps[nc, 3 + k] = xs[k]
                nc += 1
            lane = lane - 1 if lane else N - 1
        per = (S + W - 1) // W
        for k in range(N - 1, -1, -1):
            x = xs[k]
            for _ in range(per):
                out[nw] = x & wmask
                nw += 1
                x >>= uW
        return nw, nc


    @njit(**_NJIT)
    def _first_bad_pair(syms, exs, run_tab, run_end, nsym, kb):
        """Index of the first pair whose symbol is outside its table or whose additional data is wider
        than its symbol's width; -1 if none (the golden :func:`~.stream.check_pairs`, without temporaries)."""
        r = 0
        for i in range(syms.size):
            while run_end[r] <= i:  # pairs go forward: advance from the last run, not from the first
                r += 1
            t = run_tab[r]
            s = syms[i]
            if s < 0 or s >= nsym[t]:
                return i
            k = kb[t, s]
            if k < 64 and (exs[i] >> np.uint64(k)) != np.uint64(0):
                return i
        return -1


    @njit(**_NJIT)
    def _join_values(s, e, direct_exp, esc_exp, n_direct, w, m, total, out):
        """Decoded (symbol, additional data) → IEEE bit patterns in ``out``, through the tensor's code
        table (direct symbols' exponent fields ``direct_exp``, escape group ``esc_exp``, pair extra width
        ``w = m + 1``); returns the first pair whose escape index is outside the group, or -1."""
        wmask = (np.uint64(1) << np.uint64(w)) - np.uint64(1)
        mmask = (np.uint64(1) << np.uint64(m)) - np.uint64(1)
        top = np.uint64(total - 1)
        um = np.uint64(m)
        uw = np.uint64(w)
        for i in range(s.size):
            sym = np.int64(s[i])
            x = np.uint64(e[i])
            if sym < n_direct:
                ex = np.uint64(direct_exp[sym])
            else:
                idx = np.int64(x >> uw)
                if idx >= esc_exp.size:
                    return i
                ex = np.uint64(esc_exp[idx])
                x &= wmask
            out[i] = ((x >> um) << top) | (ex << um) | (x & mmask)
        return -1


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

    def prepare_rans(self, spec, tables) -> None:
        P = spec.rans.precision_bits
        self.freq = _pad([t.freqs for t in tables])
        self.cum = _pad([t.cum[:-1] for t in tables])
        self.nsym = np.asarray([t.freqs.size for t in tables] or [1], dtype=np.int64)
        if P <= _LUT_BITS:
            self.lut = _pad([np.repeat(np.arange(t.freqs.size), t.freqs) for t in tables], np.uint8
                            if max((t.freqs.size for t in tables), default=1) <= 256 else np.int64)
        else:
            self.lut = np.zeros((1, 1), np.uint8)
        self.nchunk, self.chunk_b = _rans_chunks(tables, P)


def _runs(runs: Sequence[Run]) -> tuple[np.ndarray, np.ndarray]:
    tab = np.asarray([r.table for r in runs] + [0], dtype=np.int64)
    end = np.cumsum([r.count for r in runs], dtype=np.int64)
    return tab, np.concatenate([end, [np.iinfo(np.int64).max]]).astype(np.int64)


# ------------------------------------------------------------------------------------------------
# public entry points (same signatures and results as the golden coders)

def encode(spec, tables: Sequence, runs: Sequence[Run], symbols: np.ndarray, extras: np.ndarray,
           checkpoint_interval: int | None = None) -> EncodedStream:
    """:meth:`TansCoder.encode` / :meth:`RansCoder.encode`, compiled: the same words and checkpoints."""
    if not _widest_field_ok(spec, tables):
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
    p = PreparedTables(spec, tables)
    if _first_bad_pair(symbols, extras, run_tab, run_end, np.asarray([t.freqs.size for t in tables] or [1], np.int64),
                       _pad([t.extra_bits for t in tables])) >= 0:
        check_pairs(symbols.astype(np.int64), extras.astype(np.uint64), runs, [t.freqs.size for t in tables],
                    [t.extra_bits for t in tables])
    W = spec.word_bits
    out, cps, nw, nc = _KERNELS[spec.kind].encode(spec, p, tables, symbols, extras, run_tab, run_end, len(runs),
                                                  interval)
    checkpoints = [Checkpoint(int(row[0]), int(row[1]), int(row[2]), pack_states(row[3:]))
                   for row in cps[:nc][::-1].tolist()]
    return EncodedStream(out[:nw].astype(word_dtype(W)), int(n), checkpoints)


# The kernels write without bounds checks, so the buffer holds the most any pairs can produce:
# tANS writes at most R + 1 + k bits per pair, rANS pushes at most one word per coding step.

def _tans_encode_stream(spec, p, tables, symbols, extras, run_tab, run_end, n_runs, interval):
    n, W = symbols.size, spec.word_bits
    widest = max((int(t.extra_bits.max()) for t in tables if t.extra_bits.size), default=0)
    cap = (n * (spec.precision_bits + 1 + widest) + spec.precision_bits + 1) // W + 2
    N = spec.states
    cap += (N * spec.precision_bits) // W + 1
    out = np.empty(cap, dtype=np.uint64)
    cps = np.empty(((n - 1) // interval if interval and n else 0, 3 + N), dtype=np.int64)
    if N == 1:
        nw, nc = _tans_encode(symbols, extras, run_tab, run_end, n_runs, p.freq, p.cum, p.nbh, p.thr, p.kb, p.enc,
                              spec.tans.table_log, W, interval, out, cps)
    else:
        nw, nc = _tans_encode_n(symbols, extras, run_tab, run_end, n_runs, p.freq, p.cum, p.nbh, p.thr, p.kb, p.enc,
                                spec.tans.table_log, W, N, interval, out, cps)
    return out, cps, nw, nc


def _rans_encode_stream(spec, p, tables, symbols, extras, run_tab, run_end, n_runs, interval):
    n, W = symbols.size, spec.word_bits
    N = spec.states
    cap = n * (int(p.nchunk.max()) + 1) + N * (spec.state_bits // W + 1) + 2
    out = np.empty(cap, dtype=np.uint64)
    cps = np.empty(((n - 1) // interval if interval and n else 0, 3 + N), dtype=np.uint64)
    if N == 1:
        nw, nc = _rans_encode(symbols, extras, run_tab, run_end, n_runs, p.freq, p.cum, p.nchunk, p.chunk_b,
                              spec.rans.precision_bits, spec.rans.state_bits, W, interval, out, cps)
    else:
        nw, nc = _rans_encode_n(symbols, extras, run_tab, run_end, n_runs, p.freq, p.cum, p.nchunk, p.chunk_b,
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


def _tans_run(spec, p: PreparedTables, w, run_tab, run_end, pos, stop, state, out_s, out_e, out0):
    h, cnt, buf, X = state
    if isinstance(X, tuple):
        Xs = np.asarray(X, np.int64)
        kernel = _tans_decode_r if Xs.size in _ROTATED else _tans_decode_n
        status, h, cnt, buf, _ = kernel(w, h, cnt, np.uint64(buf), Xs, pos % Xs.size, p.sym, p.nb, p.base,
                                                p.kb, run_tab, run_end, pos, stop, spec.word_bits, out_s, out_e, out0)
        X = pack_states(Xs.tolist())
    else:
        status, h, cnt, buf, X = _tans_decode(w, h, cnt, np.uint64(buf), X, p.sym, p.nb, p.base, p.kb, run_tab,
                                              run_end, pos, stop, spec.word_bits, out_s, out_e, out0)
        X = int(X)
    if status >= 0:
        raise StreamError(f"tANS stream runs out of words at pair {status}")
    return int(h), int(cnt), int(buf), X


def _rans_run(spec, p: PreparedTables, w, run_tab, run_end, pos, stop, state, out_s, out_e, out0):
    h, x = state
    if isinstance(x, tuple):
        xs = np.asarray(x, np.uint64)
        kernel = _rans_decode_r if xs.size in _ROTATED else _rans_decode_n
        status, h, _ = kernel(w, h, xs, pos % xs.size, p.freq, p.cum, p.nsym, p.lut, _LUT_BITS, p.nchunk,
                                      p.chunk_b, run_tab, run_end, pos, stop, spec.word_bits, spec.rans.precision_bits,
                                      spec.rans.state_bits, out_s, out_e, out0)
        if status >= 0:
            raise StreamError(f"rANS stream runs out of words at pair {status}")
        return int(h), pack_states(xs.tolist())
    status, h, x = _rans_decode(w, h, np.uint64(x), p.freq, p.cum, p.nsym, p.lut, _LUT_BITS, p.nchunk, p.chunk_b, run_tab,
                                run_end, pos, stop, spec.word_bits, spec.rans.precision_bits, spec.rans.state_bits,
                                out_s, out_e, out0)
    return int(h), int(x)


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
    bad = _join_values(symbols, extras, direct, esc, code_table.n_direct, fmt.extra_bits, fmt.mantissa_bits,
                       fmt.total_bits, out)
    return None if bad >= 0 else out


def decode_segments(spec, words, tables: Sequence, runs: Sequence[Run], checkpoints: Sequence[Checkpoint],
                    threads: int | None = None, compact: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Decode a whole stream, split at its checkpoints, on ``threads`` threads (``None``: every CPU).

    Segment ``b`` runs from checkpoint ``b - 1`` (the top for ``b = 0``) to checkpoint ``b``; it must
    end in exactly the state checkpoint ``b`` records (words left, bit offset, coder state), otherwise
    the stream or its checkpoints are corrupt and :class:`StreamError` names the segment. The last
    segment ends with the golden end check. The result equals :func:`decode` of the whole stream;
    ``compact`` returns it as ``uint8`` symbols and ``uint32`` additional data where they fit (a fifth
    of the memory), for :func:`join_values`.
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

    def one(b: int) -> None:
        cp = bounds[b]
        pos, state = _start(spec, w, cp, cp.pair if cp is not None else 0)
        stop = stops[b]
        # Each segment writes its own slice of the shared output (disjoint: no lock needed).
        state = _run_kernel(spec, p, w, run_tab, run_end, pos, stop, state, out_s[pos:stop], out_e[pos:stop], pos)
        if b + 1 < len(bounds):
            nxt = bounds[b + 1]
            got = _finish(spec, state, stop, n)
            if (got.word, got.bit, got.state) != (nxt.word, nxt.bit, nxt.state):
                raise StreamError(f"segment {b} (pairs {pos}..{stop}) ends in state {got.as_tuple()}, but checkpoint "
                                  f"{b} records {nxt.as_tuple()}")
        else:
            _finish(spec, state, stop, n)

    threads = default_threads() if threads is None else max(1, int(threads))
    if threads == 1 or len(bounds) == 1:
        for b in range(len(bounds)):
            one(b)
    else:
        with ThreadPoolExecutor(max_workers=min(threads, len(bounds))) as pool:
            for f in [pool.submit(one, b) for b in range(len(bounds))]:
                f.result()
    return out_s, out_e


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
