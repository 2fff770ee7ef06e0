"""Bulk mode: many independent lanes coded at once with NumPy, the software analogue of Fig. 12.

Fig. 12 of the paper puts several decompressors side by side, each with its own word stream, their
outputs merged back into one stream of weights. Here pair ``i`` of a tensor goes to lane
``i % lanes`` (round robin), so lane ``l`` codes the pairs ``l, l + lanes, l + 2 lanes, ...``, and
its words are *exactly* the single-lane stream (``docs/bitstream.md``) that
:class:`~ansforge.model.coding.tans.TansCoder` / :class:`~ansforge.model.coding.rans.RansCoder` produce for that
strided slice (``tests/model/test_lanes.py`` checks it). Each NumPy operation advances every lane by one
pair, which amortizes the interpreter over the lanes, and the round-robin order makes step ``j``'s
output one contiguous row of the result. Each lane pays its own final state.

The decoders are branch-free: a lane's words are laid out top of stack first, every bit position is
an absolute offset into that layout, and a field is read by one gather from a table of 64-bit
windows (tANS) or one conditional word pop per renormalization (rANS).

Limits of the bulk mode (the single-lane models have none of them): single-state codecs only (a
codec of ``N > 1`` interleaved states is one stream, not lanes: :class:`ConfigError`), one table for
all lanes, no checkpoints, a word width of 8, 16 or 32 bits; for tANS a field (``nb + k`` bits) of at most
``65 - W`` bits, for rANS ``S <= 64`` and additional data of at most ``P`` bits per symbol.
"""

from __future__ import annotations

import numpy as np

from .codecs import Codec
from ..errors import ConfigError
from .stream import StreamError, word_dtype

__all__ = ["lane_lengths", "lane_pairs", "encode_lanes", "decode_lanes"]

_U64 = np.uint64


def lane_lengths(n: int, lanes: int) -> np.ndarray:
    """Pairs in each of ``lanes`` lanes (``int64``) when ``n`` pairs are dealt round robin."""
    if isinstance(lanes, bool) or not isinstance(lanes, (int, np.integer)) or lanes < 1:
        raise ConfigError(f"lanes must be a positive integer, not {lanes!r}")
    return np.maximum(0, (n - np.arange(lanes, dtype=np.int64) + lanes - 1) // lanes)


def lane_pairs(values: np.ndarray, lane: int, lanes: int) -> np.ndarray:
    """The pairs lane ``lane`` of ``lanes`` carries: ``values[lane::lanes]``."""
    return np.asarray(values)[lane::lanes]


def _rows(values: np.ndarray, lanes: int, dtype) -> np.ndarray:
    """``values`` padded with zeros and laid out as ``(steps, lanes)``: row ``j`` = step ``j`` of every lane."""
    m = -(-values.size // lanes)
    grid = np.zeros(m * lanes, dtype=dtype)
    grid[:values.size] = values
    return grid.reshape(m, lanes)


def _check_states(spec: Codec) -> None:
    """The bulk lanes are single-state streams side by side (Fig. 12); a codec of ``N > 1`` interleaved
    states in one stream (``docs/bitstream.md`` §8) is a different layout, refused here."""
    if spec.states > 1:
        raise ConfigError(f"codec {spec.name} interleaves {spec.states} states in one stream; the bulk lanes code "
                          f"single-state streams (use {spec.name.partition('x')[0]} with lanes, or the compiled "
                          f"coders for {spec.name})")


def _check_words(spec: Codec, word_bits: int) -> int:
    if word_bits not in (8, 16, 32):
        raise ConfigError(f"{spec.name}: the bulk mode needs 8-, 16- or 32-bit words, not {word_bits}")
    return word_bits


def encode_lanes(spec: Codec, table, symbols: np.ndarray, extras: np.ndarray, lanes: int) -> list[np.ndarray]:
    """Encode ``symbols``/``extras`` as ``lanes`` independent streams; returns each lane's words."""
    _check_states(spec)
    symbols = np.asarray(symbols).ravel()
    extras = np.asarray(extras).ravel()
    n = symbols.size
    lane_lengths(n, lanes)
    sym = _rows(symbols, lanes, np.intp)
    ext = _rows(extras, lanes, np.uint64)
    live = n - (sym.shape[0] - 1) * lanes  # lanes that take part in the last step
    return _LANE_CODERS[spec.kind][0](spec, table, sym, ext, live)


def decode_lanes(spec: Codec, table, lane_words: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode ``n`` pairs dealt round robin over ``len(lane_words)`` lanes; returns them in their order.

    Symbols come back as ``uint8``/``uint16`` and additional data as ``uint32`` (``uint64`` when a
    symbol carries more than 32 bits). Raises :class:`StreamError` naming a lane that fails its end
    check (final state, every bit read) or has no words.
    """
    _check_states(spec)
    lanes = len(lane_words)
    lengths = lane_lengths(n, lanes)
    nw = np.array([w.size for w in lane_words], dtype=np.int64)
    W = _check_words(spec, spec.word_bits)
    dt = word_dtype(W)
    flat = np.concatenate([_lane_words(w, i, W, dt)[::-1] for i, w in enumerate(lane_words)] + [np.zeros(8, dt)])
    off = np.concatenate([[0], np.cumsum(nw)]).astype(np.int64)
    m = int(lengths[0]) if lanes else 0
    live = n - (m - 1) * lanes
    nsym = table.freqs.size
    s_out = np.empty((m, lanes), dtype=np.uint8 if nsym <= 256 else np.uint16)
    e_out = np.empty((m, lanes), dtype=np.uint32 if int(table.extra_bits.max()) <= 32 else np.uint64)
    _LANE_CODERS[spec.kind][1](spec, table, flat, off, m, live, s_out, e_out)
    return s_out.reshape(-1)[:n], e_out.reshape(-1)[:n]


def _lane_words(words, lane: int, W: int, dtype) -> np.ndarray:
    a = np.asarray(words)
    if a.dtype == dtype:
        return a
    if a.ndim != 1 or a.dtype.kind not in "ui" or (a.size and (int(a.min()) < 0 or int(a.max()) >> W)):
        raise StreamError(f"lane {lane}: its words are not a 1-D array of {W}-bit words")
    return a.astype(dtype)


def _bad_lanes(bad: np.ndarray) -> str:
    idx = np.flatnonzero(bad)
    return f"lane {int(idx[0])}" + (f" (and {idx.size - 1} more)" if idx.size > 1 else "")


# -- tANS ------------------------------------------------------------------------------------------

def _push(out, wp, acc, cnt, W, wmask, force=False):
    while True:
        full = (cnt > 0) if force else (cnt >= W)
        if not full.any():
            return
        idx = np.flatnonzero(full)
        out[idx, wp[idx]] = acc[idx] & wmask
        wp[idx] += 1
        acc[idx] >>= _U64(W)
        cnt[idx] -= W
        if force:
            cnt[idx] = np.maximum(cnt[idx], 0)


def _tans_encode(spec, t, sym, ext, live):
    R, W = spec.tans.table_log, _check_words(spec, spec.tans.word_bits)
    m, nl = sym.shape
    L = 1 << R
    wmask = _U64((1 << W) - 1)
    kmax = int(t.extra_bits.max())
    out = np.zeros((nl, (m * (R + kmax) + R + 1) // W + 2), dtype=np.uint64)
    wp = np.zeros(nl, np.int64)
    X = np.full(nl, L, np.int64)
    acc = np.zeros(nl, np.uint64)
    cnt = np.zeros(nl, np.int64)
    f, cum, nbh, thr = t.freqs, t.cum, t.nb_high, t.threshold
    kb, enc = t.extra_bits, t.encode_state
    for j in range(m - 1, -1, -1):
        s = sym[j]
        act = np.arange(nl) < live if (j == m - 1 and live < nl) else None
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
        acc |= ext[j] << cnt.astype(np.uint64)
        cnt += k
        _push(out, wp, acc, cnt, W, wmask)
    acc |= ((X - L) | L).astype(np.uint64) << cnt.astype(np.uint64)
    cnt += R + 1
    _push(out, wp, acc, cnt, W, wmask)
    _push(out, wp, acc, cnt, W, wmask, force=True)
    return [out[i, :wp[i]].astype(word_dtype(W)) for i in range(nl)]


def _tans_decode(spec, t, flat, off, m, live, s_out, e_out):
    R, W = spec.tans.table_log, _check_words(spec, spec.tans.word_bits)
    nl = off.size - 1
    nw = np.diff(off)
    need_t = (t.nb_bits + t.extra_bits[t.symbol]).astype(np.uint64)
    if int(need_t.max()) > 65 - W:
        raise ConfigError(f"{spec.name}: a field of {int(need_t.max())} bits exceeds the bulk mode's {65 - W}")
    if np.any(nw == 0):
        raise StreamError(f"tANS {_bad_lanes(nw == 0)} has no words: it lacks the final state and marker")
    # win[i] = the 64 bits that start at word i of the top-first layout (MSB = the next bit read): the
    # words stored big-endian make win[i] an unaligned big-endian 64-bit read at byte i * W / 8.
    step = W // 8
    be = flat.astype(flat.dtype.newbyteorder(">"))
    win = np.ndarray((flat.size - 8 // step,), dtype=">u8", buffer=be, strides=(step,)).astype(np.uint64)
    top = flat[off[:-1]].astype(np.uint64)
    if np.any(top == 0):
        raise StreamError(f"tANS {_bad_lanes(top == 0)}: the top word holds no marker bit")
    marker = np.frexp(top.astype(np.float64))[1]  # bit length of the top word; its highest bit is the marker
    pos = (off[:-1] * W + (W - marker) + 1).astype(np.uint64)
    Wl, wm, c64 = _U64(W.bit_length() - 1), _U64(W - 1), _U64(64)
    x = ((win.take(pos >> Wl) << (pos & wm)) >> _U64(64 - R)).astype(np.intp)
    pos += _U64(R)
    sym_t, nb_t, base_t = t.symbol.astype(s_out.dtype), t.nb_bits.astype(np.uint64), t.base.astype(np.uint64)
    lowmask_t = (np.uint64(1) << nb_t) - np.uint64(1)
    for j in range(m):
        need = need_t.take(x)
        last = j == m - 1 and live < nl
        if last:
            act = np.arange(nl) < live
            need = np.where(act, need, _U64(0))
        v = (win.take(pos >> Wl) << (pos & wm)) >> (c64 - need)
        pos += need
        np.right_shift(v, nb_t.take(x), out=e_out[j], casting="unsafe")
        s_out[j] = sym_t.take(x)
        xn = (base_t.take(x) + (v & lowmask_t.take(x))).astype(np.intp)
        x = np.where(act, xn, x) if last else xn
    end = (off[1:] * W).astype(np.uint64)
    bad = (x != 0) | (pos != end)
    if bad.any():
        raise StreamError(f"tANS {_bad_lanes(bad)} fails its end check (final state index 0, every bit read)")


# -- rANS ------------------------------------------------------------------------------------------

def _rans_check(spec, t):
    S, W, P = spec.rans.state_bits, _check_words(spec, spec.rans.word_bits), spec.rans.precision_bits
    if S > 64 or int(t.extra_bits.max()) > P:
        raise ConfigError(f"{spec.name}: the rANS bulk mode needs S <= 64 and additional data of at most "
                          f"P = {P} bits per symbol")
    return S, W, P


def _rans_encode(spec, t, sym, ext, live):
    S, W, P = _rans_check(spec, t)
    m, nl = sym.shape
    wmask, Wu, Pu, hi = _U64((1 << W) - 1), _U64(W), _U64(P), _U64(S - P)
    out = np.zeros((nl, (m * (P + int(t.extra_bits.max()))) // W + S // W + 3), dtype=np.uint64)
    wp = np.zeros(nl, np.int64)
    x = np.zeros(nl, np.uint64)
    f, cum, kb = t.freqs.astype(np.uint64), t.cum.astype(np.uint64), t.extra_bits.astype(np.int64)

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
        s = sym[j]
        act = np.arange(nl) < live if (j == m - 1 and live < nl) else None
        k = kb[s]
        has = k > 0
        if has.any():
            fu = _U64(1) << (Pu - k.astype(np.uint64))
            a2 = has if act is None else (has & act)
            put(np.where(has, fu, _U64(1) << Pu), np.where(has, ext[j] * fu, _U64(0)), a2)
        put(f[s], cum[s], act)
    while True:
        nz = x != 0
        if not nz.any():
            break
        idx = np.flatnonzero(nz)
        out[idx, wp[idx]] = x[idx] & wmask
        wp[idx] += 1
        x[idx] >>= Wu
    return [out[i, :wp[i]].astype(word_dtype(W)) for i in range(nl)]


def _rans_decode(spec, t, flat, off, m, live, s_out, e_out):
    S, W, P = _rans_check(spec, t)
    nl = off.size - 1
    Wu, Pu, lo, pmask, wmask = _U64(W), _U64(P), _U64(1 << (S - W)), _U64((1 << P) - 1), _U64((1 << W) - 1)
    # two[i] = word i | word i+1 << W: the (at most two) words a pair pops, in one gather.
    # Little-endian words make two[i] an unaligned 2W-bit read at byte i * W / 8.
    le = flat.astype(flat.dtype.newbyteorder("<"))
    two = np.ndarray((flat.size - 1,), dtype=f"<u{2 * W // 8}", buffer=le, strides=(W // 8,)).astype(np.uint64)
    ptr = off[:-1].copy()
    end = off[1:]
    x = np.zeros(nl, np.uint64)
    has = ptr < end
    x[has] = flat[ptr[has]]
    ptr[has] += 1
    if np.any(has & (x == 0)):
        raise StreamError(f"rANS {_bad_lanes(has & (x == 0))}: the top word is zero")
    for _ in range(S // W):
        short = (x < lo) & (ptr < end)
        x = np.where(short, (x << Wu) | flat.take(ptr).astype(np.uint64), x)
        ptr += short
    # One gather per pair fetches a symbol's f, additional-data shift sh = P - k, symbol and cum,
    # packed as f | sh << (P + 1) | symbol << (P + 7) | shared << (P + 15) | cum << (64 - P), cum on
    # top so that a shift alone extracts it (the symbol field is 16 bits wide when indexed by q,
    # where no shared flag is needed, 8 bits otherwise). For P <= 16 the table is indexed by the
    # P-bit quantile q directly; otherwise by q's 2**16 buckets, or the symbol is looked up first.
    n_sym = t.freqs.size
    sh_t = (P - t.extra_bits).astype(np.uint64)  # a symbol's additional data: one uniform chunk
    c_sh, c_sym, c_cum = _U64(P + 1), _U64(P + 7), _U64(64 - P)
    fm = _U64((1 << (P + 1)) - 1)
    pack = (t.freqs.astype(np.uint64) | (sh_t << c_sh) | (t.cum[:-1].astype(np.uint64) << c_cum))
    by_q = P <= 16
    by_bucket = not by_q and n_sym <= 256
    if by_q:
        sym_of_q = np.repeat(np.arange(n_sym, dtype=np.uint64), t.freqs)
        pack = pack[sym_of_q] | (sym_of_q << c_sym)
    elif by_bucket:
        # 2**16 buckets of q, each holding the packed entry of the symbol its first q falls in, with
        # the shared bit set where the bucket also holds a later symbol's quantiles (at most n_sym - 1 buckets
        # do). One gather decides almost every lane; the few in a shared bucket search the edges.
        bshift = _U64(P - 16)
        right = t.cum[1:].astype(np.uint64)
        starts = np.arange(1 << 16, dtype=np.uint64) << bshift
        first = np.searchsorted(right, starts, side="right")
        last = np.searchsorted(right, starts + ((one_b := _U64(1)) << bshift) - one_b, side="right")
        pack_sym = pack | (np.arange(n_sym, dtype=np.uint64) << c_sym)
        shared = _U64(1 << (P + 15))
        bpack = pack_sym[first] | np.where(first != last, shared, _U64(0))
    else:
        # The symbol at the start of each of 2**16 buckets of q, then a step up while q is past the
        # symbol's right edge: one step in the common bucket that holds one symbol.
        bshift = _U64(P - 16)
        right = t.cum[1:].astype(np.uint64)
        bucket = np.searchsorted(right, np.arange(1 << 16, dtype=np.uint64) << bshift, side="right")
        bucket = bucket.astype(np.uint8 if n_sym <= 256 else np.uint16)
    one, c63 = _U64(1), _U64(63)
    one_pop = S == 2 * W and int(t.extra_bits.max()) <= W - P
    flat64 = flat.astype(np.uint64) if one_pop else None
    safe_until, exhausted = 0, False
    for j in range(m):
        last = j == m - 1 and live < nl
        q = x & pmask
        if by_q:
            e = pack.take(q.view(np.int64))     # an intp index: take converts uint64 ones first
            np.right_shift(e, c_sym, out=s_out[j], casting="unsafe")     # 16-bit symbol field
        elif by_bucket:
            e = bpack.take((q >> bshift).view(np.int64))
            amb = (e & shared) != 0        # a bool array: nonzero() on it is 10x faster than on uint64
            if amb.any():
                idx = amb.nonzero()[0]
                e[idx] = pack_sym.take(np.searchsorted(right, q.take(idx), side="right"))
            np.right_shift(e, c_sym, out=s_out[j], casting="unsafe")     # the uint8 store keeps the symbol
        else:
            s = bucket.take(q >> bshift).astype(np.intp)
            up = q >= right.take(s)
            while up.any():
                s += up
                up = q >= right.take(s)
            e = pack.take(s)
            s_out[j] = s
        # A lane pops at most one word per step (one_pop), so while every lane had r words left r
        # steps ago, none can be out of words now: within such a window the bounds test is skipped.
        # It is needed once a lane is out of words: its last pairs decode from a state below the
        # renormalization bound (the encoder started at x = 0) and must not pop.
        if one_pop and j >= safe_until and not exhausted:
            r = int((end - ptr).min()) if nl else 0
            exhausted = r <= 0
            safe_until = j + r
        guarded = not one_pop or exhausted or last
        if guarded:
            w2 = two.take(ptr)
            w1 = w2 & wmask
            more = ptr < end
        else:
            w1 = flat64.take(ptr, mode="clip")
        xn = (x >> Pu) * (e & fm) + (q - (e >> c_cum))
        short1 = (xn < lo) & more if guarded else xn < lo
        xn = np.where(short1, (xn << Wu) | w1, xn)
        # k = 0 leaves the state alone (sh = P), exactly as the golden model's skipped chunk.
        q = xn & pmask
        sh = (e >> c_sh) & c63
        np.right_shift(q, sh, out=e_out[j], casting="unsafe")
        xn = ((xn >> Pu) << sh) | (q & ((one << sh) - one))
        if last:
            act = np.arange(nl) < live
            short1 &= act
            xn = np.where(act, xn, x)
        if one_pop:
            # After a pop for the symbol, x >= 2**(2W - P - k) >= 2**W: at most one pop per pair,
            # and it is word ``ptr`` whichever step makes it.
            short2 = (xn < lo) & more if guarded else xn < lo
            x = np.where(short2, (xn << Wu) | w1, xn)
            ptr += short1 | short2
        else:
            ptr += short1
            short2 = (xn < lo) & (ptr < end)
            x = np.where(short2, (xn << Wu) | ((w2 >> (short1 * Wu)) & wmask), xn)
            ptr += short2
    bad = (x != 0) | (ptr != end)
    if bad.any():
        raise StreamError(f"rANS {_bad_lanes(bad)} fails its end check (final state 0, every word read)")


#: Per codec kind, its lane encoder and decoder (selected by ``spec.kind``, not by branching on it).
_LANE_CODERS = {"tans": (_tans_encode, _tans_decode), "rans": (_rans_encode, _rans_decode)}
