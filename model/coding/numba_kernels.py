"""The numba kernels of :mod:`.fastans` (the fallback when the native extension ``nativeans`` is not built).

Compiled by numba (``@njit(nogil=True, cache=True)``) on first use and cached on disk. Importing
this module imports numba (about 0.2 s), so :mod:`.fastans` imports it only when it needs it: on a
machine where ``nativeans`` was built, the command-line path never does. The algorithms are those of
the golden coders (:mod:`.tans`, :mod:`.rans`), step for step; ``tests/model/test_fastans.py`` and
``tests/model/test_native.py`` hold both kernel sets to the golden coders.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["run_at", "tans_decode", "rans_decode", "run_before", "tans_encode", "rans_encode", "tans_decode_n", "rans_decode_n", "tans_decode_r", "rans_decode_r", "tans_encode_n", "rans_encode_n", "first_bad_pair", "join_values"]

_NJIT = dict(nogil=True, cache=True, boundscheck=False)



@njit(**_NJIT)
def run_at(run_end, pos):
    """The run holding pair ``pos`` (``run_end`` ends with a sentinel larger than any pair)."""
    r = 0
    while run_end[r] <= pos:
        r += 1
    return r

@njit(**_NJIT)
def tans_decode(w, h, cnt, buf, X, sym, nb, base, kb, run_tab, run_end, pos, stop, W, out_s, out_e, out0):
    """Decode pairs ``pos .. stop-1``; run ``r`` (table ``run_tab[r]``) ends before pair ``run_end[r]``.

    Returns ``(status, h, cnt, buf, X)``; status ``-1`` is success, else the pair where the words ran out.
    """
    r = run_at(run_end, pos)
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
def rans_decode(w, h, x, freq, cum, nsym, lut, lut_bits, nchunk, chunk_b, run_tab, run_end, pos, stop, W, P, S,
                 out_s, out_e, out0):
    """rANS twin of :func:`tans_decode` (``lut`` maps a quantile to its symbol when ``P <= lut_bits``,
    else a binary search over ``cum``). Returns ``(status, h, x)``."""
    lo_bound = np.uint64(1) << np.uint64(S - W)
    pmask = (np.uint64(1) << np.uint64(P)) - np.uint64(1)
    uP = np.uint64(P)
    uW = np.uint64(W)
    r = run_at(run_end, pos)
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
def run_before(run_end, r, i):
    """The run holding pair ``i``, searching down from run ``r`` (encoders walk pairs back to front)."""
    while r > 0 and run_end[r - 1] > i:
        r -= 1
    return r

@njit(**_NJIT)
def tans_encode(syms, exs, run_tab, run_end, n_runs, freq, cum, nbh, thr, kb, enc, R, W, interval, out, cps):
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
        r = run_before(run_end, r, i)
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
def rans_encode(syms, exs, run_tab, run_end, n_runs, freq, cum, nchunk, chunk_b, P, S, W, interval, out, cps):
    """rANS twin of :func:`tans_encode` (state starts at 0, as the golden encoder's)."""
    uP = np.uint64(P)
    uW = np.uint64(W)
    pshift = np.uint64(S - P)
    wmask = (np.uint64(1) << uW) - np.uint64(1)
    x = np.uint64(0)
    nw = nc = 0
    r = n_runs - 1
    for i in range(syms.size - 1, -1, -1):
        r = run_before(run_end, r, i)
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
def tans_decode_n(w, h, cnt, buf, Xs, lane, sym, nb, base, kb, run_tab, run_end, pos, stop, W, out_s, out_e,
                   out0):
    """:func:`tans_decode` over ``N = Xs.size`` states (``Xs`` updated in place, ``lane`` the state
    of pair ``pos``). Returns ``(status, h, cnt, buf, lane)``."""
    N = Xs.size
    r = run_at(run_end, pos)
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
def rans_decode_n(w, h, xs, lane, freq, cum, nsym, lut, lut_bits, nchunk, chunk_b, run_tab, run_end, pos, stop,
                   W, P, S, out_s, out_e, out0):
    """:func:`rans_decode` over ``N = xs.size`` states: a state pops exactly when it falls below
    ``2**(S - W)``, and the words running out there is an error. Returns ``(status, h, lane)``."""
    N = xs.size
    lo_bound = np.uint64(1) << np.uint64(S - W)
    pmask = (np.uint64(1) << np.uint64(P)) - np.uint64(1)
    uP = np.uint64(P)
    uW = np.uint64(W)
    r = run_at(run_end, pos)
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
def tans_decode_r(w, h, cnt, buf, Xs, lane, sym, nb, base, kb, run_tab, run_end, pos, stop, W, out_s, out_e,
                   out0):
    """:func:`tans_decode_n` for ``N = Xs.size`` in (2, 4, 8), states in rotating locals."""
    N = Xs.size
    X0, X1, X2, X3 = Xs[lane % N], Xs[(lane + 1) % N], Xs[(lane + 2) % N], Xs[(lane + 3) % N]
    X4, X5, X6, X7 = Xs[(lane + 4) % N], Xs[(lane + 5) % N], Xs[(lane + 6) % N], Xs[(lane + 7) % N]
    status = -1
    r = run_at(run_end, pos)
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
def rans_decode_r(w, h, xs, lane, freq, cum, nsym, lut, lut_bits, nchunk, chunk_b, run_tab, run_end, pos, stop,
                   W, P, S, out_s, out_e, out0):
    """:func:`rans_decode_n` for ``N = xs.size`` in (2, 4, 8), states in rotating locals."""
    N = xs.size
    x0, x1, x2, x3 = xs[lane % N], xs[(lane + 1) % N], xs[(lane + 2) % N], xs[(lane + 3) % N]
    x4, x5, x6, x7 = xs[(lane + 4) % N], xs[(lane + 5) % N], xs[(lane + 6) % N], xs[(lane + 7) % N]
    lo_bound = np.uint64(1) << np.uint64(S - W)
    pmask = (np.uint64(1) << np.uint64(P)) - np.uint64(1)
    uP = np.uint64(P)
    uW = np.uint64(W)
    status = -1
    r = run_at(run_end, pos)
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
def tans_encode_n(syms, exs, run_tab, run_end, n_runs, freq, cum, nbh, thr, kb, enc, R, W, N, interval, out,
                   cps):
    """:func:`tans_encode` over ``N`` states (every one starts at ``X = L``; the flush appends
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
        r = run_before(run_end, r, i)
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
def rans_encode_n(syms, exs, run_tab, run_end, n_runs, freq, cum, nchunk, chunk_b, P, S, W, N, interval, out,
                   cps):
    """:func:`rans_encode` over ``N`` states, each starting at ``2**(S - W)`` and flushed as
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
        r = run_before(run_end, r, i)
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
def first_bad_pair(syms, exs, run_tab, run_end, nsym, kb):
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
def join_values(s, e, direct_exp, esc_exp, n_direct, w, m, total, out):
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
