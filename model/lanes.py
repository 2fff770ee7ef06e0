"""Bulk mode: many independent lanes coded at once with NumPy, the software analogue of Fig. 12.

Fig. 12 of the paper instantiates several compressors/decompressors side by side, each with its own
stream, sharing memory through FIFOs. Here a tensor's pairs are cut into ``lanes`` contiguous slices;
lane ``l`` is an ordinary single-lane stream (``docs/bitstream.md``) of its slice, so its words are
*exactly* what :class:`~ansforge.model.tans.TansCoder` / :class:`~ansforge.model.rans.RansCoder`
produce for that slice (``tests/test_lanes.py`` checks it). Each NumPy operation advances every lane
by one pair, which amortizes the interpreter over the lanes; each lane pays its own final state.

Limits of the bulk mode (the single-lane models have none of them): one table for all lanes, no
checkpoints, and for rANS additional data of at most ``P`` bits per symbol.
"""

from __future__ import annotations

import numpy as np

from .codecs import CodecSpec
from .errors import ConfigError
from .stream import StreamError

__all__ = ["split_lanes", "encode_lanes", "decode_lanes"]


def split_lanes(n: int, lanes: int) -> np.ndarray:
    """Start of each lane's slice (``lanes + 1`` entries); lanes differ in length by at most one pair."""
    if lanes < 1:
        raise ConfigError(f"lanes must be at least 1, not {lanes}")
    return (np.arange(lanes + 1, dtype=np.int64) * n) // lanes


def _grid(values: np.ndarray, bounds: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.diff(bounds)
    m = int(lengths.max()) if lengths.size else 0
    grid = np.zeros((lengths.size, m), dtype=dtype)
    col = np.arange(m)
    mask = col[None, :] < lengths[:, None]
    grid[mask] = values
    return grid, lengths


def encode_lanes(spec: CodecSpec, table, symbols: np.ndarray, extras: np.ndarray, lanes: int) -> list[np.ndarray]:
    """Encode ``symbols``/``extras`` as ``lanes`` independent streams; returns each lane's words."""
    bounds = split_lanes(symbols.size, lanes)
    sym, lengths = _grid(np.asarray(symbols, np.int64), bounds, np.int64)
    ext, _ = _grid(np.asarray(extras, np.uint64), bounds, np.uint64)
    m = sym.shape[1]
    if spec.tans is not None:
        return _tans_encode(spec, table, sym, ext, lengths, m)
    return _rans_encode(spec, table, sym, ext, lengths, m)


def decode_lanes(spec: CodecSpec, table, lane_words: list[np.ndarray], lengths: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Decode lanes of ``lengths`` pairs each; returns the concatenated symbols and additional data."""
    lengths = np.asarray(lengths, dtype=np.int64)
    nw = np.array([w.size for w in lane_words], dtype=np.int64)
    words = np.zeros((len(lane_words), int(nw.max()) + 1 if nw.size else 1), dtype=np.uint64)
    for i, w in enumerate(lane_words):
        words[i, :w.size] = w
    m = int(lengths.max()) if lengths.size else 0
    if spec.tans is not None:
        s, e = _tans_decode(spec, table, words, nw, lengths, m)
    else:
        s, e = _rans_decode(spec, table, words, nw, lengths, m)
    mask = np.arange(m)[None, :] < lengths[:, None]
    return s[mask], e[mask]


# -- tANS ------------------------------------------------------------------------------------------

def _push(out, wp, acc, cnt, W, wmask, force=False):
    while True:
        full = (cnt > 0) if force else (cnt >= W)
        if not full.any():
            return
        idx = np.flatnonzero(full)
        out[idx, wp[idx]] = acc[idx] & wmask
        wp[idx] += 1
        acc[idx] >>= np.uint64(W)
        cnt[idx] -= W
        if force:
            cnt[idx] = np.maximum(cnt[idx], 0)


def _tans_encode(spec, t, sym, ext, lengths, m):
    R, W = spec.tans.table_log, spec.tans.word_bits
    L, nl = 1 << R, sym.shape[0]
    wmask = np.uint64((1 << W) - 1)
    kmax = int(t.extra_bits.max())
    out = np.zeros((nl, (m * (R + kmax)) // W + 4), dtype=np.uint64)
    wp = np.zeros(nl, np.int64)
    X = np.full(nl, L, np.int64)
    acc = np.zeros(nl, np.uint64)
    cnt = np.zeros(nl, np.int64)
    f, cum, nbh, thr = t.freqs, t.cum, t.nb_high, t.threshold
    kb, enc = t.extra_bits, t.encode_state
    ragged = bool((lengths != m).any())
    for j in range(m - 1, -1, -1):
        s = sym[:, j]
        act = lengths > j if ragged else None
        n_out = nbh[s] - (X < thr[s])
        k = kb[s]
        if act is not None:
            n_out = np.where(act, n_out, 0)
            k = np.where(act, k, 0)
        slot = cum[s] + (X >> n_out) - f[s]
        newX = L + enc[slot if act is None else np.where(act, slot, 0)]
        acc |= (X & ((1 << n_out) - 1)).astype(np.uint64) << cnt.astype(np.uint64)
        cnt += n_out
        X = newX if act is None else np.where(act, newX, X)
        acc |= ext[:, j] << cnt.astype(np.uint64)
        cnt += k
        _push(out, wp, acc, cnt, W, wmask)
    acc |= ((X - L) | L).astype(np.uint64) << cnt.astype(np.uint64)
    cnt += R + 1
    _push(out, wp, acc, cnt, W, wmask)
    _push(out, wp, acc, cnt, W, wmask, force=True)
    dt = np.uint16 if W <= 16 else np.uint32
    return [out[i, :wp[i]].astype(dt) for i in range(nl)]


def _tans_decode(spec, t, words, nw, lengths, m):
    R, W = spec.tans.table_log, spec.tans.word_bits
    nl = words.shape[0]
    rows = np.arange(nl)
    ptr = nw - 1
    top = words[rows, np.maximum(ptr, 0)].astype(np.int64)
    if np.any(top == 0):
        raise StreamError(f"tANS lane {int(np.flatnonzero(top == 0)[0])}: top word holds no marker bit")
    cnt = (np.frexp(top.astype(np.float64))[1] - 1).astype(np.int64)
    buf = (top & ((1 << cnt) - 1)).astype(np.uint64)
    W64 = np.uint64(W)

    def refill(need):
        while True:
            short = cnt < need
            if not short.any():
                return
            idx = np.flatnonzero(short)
            if np.any(ptr[idx] <= 0):
                raise StreamError(f"tANS lane {int(idx[ptr[idx] <= 0][0])} runs out of words")
            ptr[idx] -= 1
            buf[idx] = (buf[idx] << W64) | words[idx, ptr[idx]]
            cnt[idx] += W

    refill(np.full(nl, R))
    cnt -= R
    x = (buf >> cnt.astype(np.uint64)).astype(np.int64)
    buf &= (np.uint64(1) << cnt.astype(np.uint64)) - np.uint64(1)
    sym_t, nb_t, base_t, kb = t.symbol, t.nb_bits, t.base, t.extra_bits
    out_s = np.zeros((m, nl), np.int64)  # pair-major: each step writes one contiguous row
    out_e = np.zeros((m, nl), np.uint64)
    ragged = bool((lengths != m).any())
    for j in range(m):
        s = sym_t[x]
        nb = nb_t[x]
        need = nb + kb[s]
        if ragged:
            need = np.where(lengths > j, need, 0)
        refill(need)
        cnt -= need
        v = buf >> cnt.astype(np.uint64)
        buf &= (np.uint64(1) << cnt.astype(np.uint64)) - np.uint64(1)
        nbu = nb.astype(np.uint64)
        newx = base_t[x] + (v & ((np.uint64(1) << nbu) - np.uint64(1))).astype(np.int64)
        x = newx if not ragged else np.where(lengths > j, newx, x)
        out_s[j] = s
        out_e[j] = v >> nbu
    if np.any(x != 0) or np.any(cnt != 0) or np.any(ptr != 0):
        raise StreamError("tANS lanes fail their end check")
    return out_s.T, out_e.T


# -- rANS ------------------------------------------------------------------------------------------

def _rans_encode(spec, t, sym, ext, lengths, m):
    S, W, P = spec.rans.state_bits, spec.rans.word_bits, spec.rans.precision_bits
    if S > 64 or int(t.extra_bits.max()) > P:
        raise ConfigError("the rANS bulk mode needs S <= 64 and additional data of at most P bits per symbol")
    nl = sym.shape[0]
    wmask, Wu, Pu, hi = np.uint64((1 << W) - 1), np.uint64(W), np.uint64(P), np.uint64(S - P)
    out = np.zeros((nl, (m * (P + int(t.extra_bits.max()))) // W + S // W + 3), dtype=np.uint64)
    wp = np.zeros(nl, np.int64)
    x = np.zeros(nl, np.uint64)
    f, cum, kb = t.freqs.astype(np.uint64), t.cum.astype(np.uint64), t.extra_bits.astype(np.int64)
    ragged = bool((lengths != m).any())

    def put(fr, c, act):
        flush = (x >> hi) >= fr
        if act is not None:
            flush &= act
        if flush.any():
            idx = np.flatnonzero(flush)
            out[idx, wp[idx]] = x[idx] & wmask
            wp[idx] += 1
            x[idx] >>= Wu
        nx = ((x // fr) << Pu) | (c + x % fr)
        x[:] = nx if act is None else np.where(act, nx, x)

    for j in range(m - 1, -1, -1):
        s = sym[:, j]
        act = lengths > j if ragged else None
        k = kb[s]
        has = k > 0
        if has.any():
            fu = np.uint64(1) << (Pu - k.astype(np.uint64))
            a2 = has if act is None else (has & act)
            put(np.where(has, fu, np.uint64(1) << Pu), np.where(has, ext[:, j] * fu, np.uint64(0)), a2)
        put(f[s], cum[s], act)
    while True:
        live = x != 0
        if not live.any():
            break
        idx = np.flatnonzero(live)
        out[idx, wp[idx]] = x[idx] & wmask
        wp[idx] += 1
        x[idx] >>= Wu
    dt = np.uint32 if W <= 32 else np.uint64
    return [out[i, :wp[i]].astype(dt) for i in range(nl)]


def _rans_decode(spec, t, words, nw, lengths, m):
    S, W, P = spec.rans.state_bits, spec.rans.word_bits, spec.rans.precision_bits
    nl = words.shape[0]
    Wu, Pu, lo = np.uint64(W), np.uint64(P), np.uint64(1 << (S - W))
    pmask = np.uint64((1 << P) - 1)
    ptr = nw.copy()
    x = np.zeros(nl, np.uint64)

    def pop(mask):
        idx = np.flatnonzero(mask & (ptr > 0))
        if idx.size:
            ptr[idx] -= 1
            x[idx] = (x[idx] << Wu) | words[idx, ptr[idx]]

    pop(np.ones(nl, bool))
    for _ in range(S // W):
        pop(x < lo)
    f, cum, kb = t.freqs.astype(np.uint64), t.cum.astype(np.uint64), t.extra_bits.astype(np.int64)
    lut = np.repeat(np.arange(t.freqs.size), t.freqs) if P <= 16 else None
    right = t.cum[1:].astype(np.uint64)
    out_s = np.zeros((m, nl), np.int64)  # pair-major: each step writes one contiguous row
    out_e = np.zeros((m, nl), np.uint64)
    ragged = bool((lengths != m).any())
    for j in range(m):
        act = lengths > j if ragged else None
        q = x & pmask
        s = lut[q] if lut is not None else np.searchsorted(right, q, side="right")
        nx = (x >> Pu) * f[s] + q - cum[s]
        x = nx if act is None else np.where(act, nx, x)
        pop(x < lo)
        k = kb[s].astype(np.uint64)
        has = k > 0
        if act is not None:
            has &= act
        if has.any():
            q = x & pmask
            sh = Pu - k
            out_e[j] = np.where(has, q >> sh, np.uint64(0))
            nx = ((x >> Pu) << sh) | (q & ((np.uint64(1) << sh) - np.uint64(1)))
            x = np.where(has, nx, x)
            pop(has & (x < lo))
        out_s[j] = s
    if np.any(x != 0) or np.any(ptr != 0):
        raise StreamError("rANS lanes fail their end check")
    return out_s.T, out_e.T
