"""The tANS cores' step lemmas (``encoder_step``, ``decoder_step``: one pair from any state on the arbitrary
local table, ``docs/formal.md`` Round 6), one-state and two-state, with the golden steps they share
(:func:`tans_encoder_step`, :func:`tans_xn_encoder_step`).
"""

from __future__ import annotations

from amaranth.hdl import Array, Assume, Cat, Const, Module, Mux, Signal, Value
from amaranth.hdl._ast import AnyConst
from amaranth.lib import data
from amaranth.utils import bits_for as _bits

from ...hdl.common import DecodeStatus
from .params import (DECODER_STEP_CLOCKS, ENCODER_STEP_CLOCKS, SMALL, XN_DECODER_STEP_CLOCKS, XN_ENCODER_STEP_CLOCKS,
                     small_core)
from .benches import (Bench, LocalTansTable, bit_length_of, check_decoded_pair, elaborated_inside, mask, tans_layout,
                      transfer_of)


def tans_encoder_step(m: Module, X, row, extra, name: str):
    """The tANS encoder's step as ``TansEncoderCoder`` documents it, written here as the golden step:
    from state ``X`` (``R + 1`` bits, ``L <= X < 2L``) with the symbol row ``row`` (its layout) and the
    extra bits: ``n = nb_high - (X < threshold)``, slot ``(cum - freq) + (X >> n)``, ``X' = L |
    state[slot]``; the pair pushes the ``n`` low bits of ``X`` and then its ``k`` extra bits (oldest
    first). Returns ``(X', bits, length)``."""
    sh = SMALL["tans"]
    R, K = sh["table_log"], sh["max_extra_bits"]
    n = Signal(range(R + 1), name=f"{name}_n")
    slot = Signal(R, name=f"{name}_slot")
    nxt = Signal(R + 1, name=f"{name}_next")
    bits = Signal(R + K, name=f"{name}_bits")
    length = Signal(range(R + K + 1), name=f"{name}_len")
    m.d.comb += [n.eq(row.nb_high - (X < row.threshold)), slot.eq((row.cum - row.freq + (X >> n))[:R]),
                 bits.eq((X & mask(n, R + 1))[:R] | ((extra & mask(row.k, K)) << n)), length.eq(n + row.k)]
    return n, slot, nxt, bits, length


def _tans_step_bench(core: str, mutant: str | None):
    """The step lemmas' common start: a bench, the small ``core`` (``tans-decoder``/``tans-encoder``,
    the shipped class) programmed with the arbitrary local table of one free
    symbol, and the small configuration's ``(R, K, W, L)``."""
    b = Bench(free_reset=False)
    dut = small_core(core)
    setattr(b.m.submodules, "dec" if core == "tans-decoder" else "enc", dut)
    table = LocalTansTable(b, "round_trip", 1)
    table.program(dut, role="dec" if core == "tans-decoder" else "enc")
    sh = SMALL["tans"]
    return b, dut, table, (sh["table_log"], sh["max_extra_bits"], sh["word_bits"], 1 << sh["table_log"])


def model_symbol_row(m: Module, table: LocalTansTable, symbol, name: str = "pair"):
    """The encoder row of ``table``'s ``s*`` as the model computes it (``LocalTansTable.program``'s, role
    ``enc``): ``{freq, cum, nb_high, threshold, k}``, ``k`` that of ``symbol``."""
    sh = SMALL["tans"]
    R, K = sh["table_log"], sh["max_extra_bits"]
    row = Signal(data.StructLayout({"freq": R + 1, "cum": R, "nb_high": _bits(R), "threshold": R + 2,
                                    "k": _bits(K)}), name=f"{name}_row")
    nbh = Signal(range(R + 2), name=f"{name}_nb_high")
    m.d.comb += nbh.eq(R + 1 - bit_length_of(m, table.f, f"{name}_freq"))
    m.d.comb += [row.freq.eq(table.f), row.cum.eq(table.c), row.nb_high.eq(nbh), row.threshold.eq(table.f << nbh),
                 row.k.eq(Array(table.k)[symbol])]
    return row


def _pair_from_any_state(b: Bench, table: LocalTansTable):
    """The decoder step lemmas' pair: a free state index ``x0`` (``X0 = L | x0``) and a legal pair ``q``
    (``qs``, ``qe``) of ``s*``, coded by the golden step with the model's row: ``(x0, qs, qe, X1, bits,
    length)``."""
    m = b.m
    sh = SMALL["tans"]
    R, K, L = sh["table_log"], sh["max_extra_bits"], 1 << sh["table_log"]
    sb = _bits(table.n_sym - 1)
    x0 = Signal(R, name="start_state")
    X0 = Signal(R + 1, name="start_x")
    qs, qe = Signal(sb, name="pair_symbol"), Signal(K, name="pair_extra")
    m.d.comb += [x0.eq(AnyConst(R)), X0.eq(L | x0), qs.eq(AnyConst(sb)), qe.eq(AnyConst(K)),
                 Assume(table.legal_pair(qs, qe))]
    row = model_symbol_row(m, table, qs)
    n, slot, X1, bits, length = tans_encoder_step(m, X0, row, qe, "pair")
    m.d.comb += X1.eq(L | Array(table.state)[slot])
    return x0, qs, qe, X1, bits, length


def _resumed_words(b: Bench, NW: int):
    """The decoder step lemmas' stream: ``NW`` free words, the first with ``bit`` unread low bits (0: all
    ``W``): ``(words, bit, read0, stream)``, ``read0`` the first word's bits already read and ``stream``
    the unread bits, the next one at the top."""
    m = b.m
    W = SMALL["tans"]["word_bits"]
    words = [Signal(W, name=f"word{j}") for j in range(NW)]
    m.d.comb += [w.eq(AnyConst(W)) for w in words]
    bit = Signal(range(W), name="resume_bit")
    m.d.comb += bit.eq(AnyConst(len(bit)))
    avail0 = Signal(range(W + 1), name="first_word_unread")
    m.d.comb += avail0.eq(Mux(bit == 0, W, bit))
    read0 = Signal(range(W + 1), name="first_word_read")
    m.d.comb += read0.eq(W - avail0)
    stream = Signal(NW * W, name="stream_next")
    m.d.comb += stream.eq((Cat(*reversed(words)) << read0)[:NW * W])
    return words, bit, read0, stream


def _resume(b: Bench, dec, table: LocalTansTable, count: int, state, bit, words, sent, k_w):
    """Drive the decoder step lemmas' command once the table is written: resume at ``state`` with ``bit``
    unread bits of the first word, ``count`` pairs over the ``words`` (one a clock, counted in ``k_w``),
    end check off, pairs always taken; ``sent`` goes high once the command is taken."""
    m = b.m
    NW = len(words)
    go = ~table.prog
    c = dec.cmd.p
    m.d.comb += [dec.cmd.valid.eq(go & ~sent), c.count.eq(count), c.words.eq(NW), c.resume.eq(1), c.check_end.eq(0),
                 c.state.eq(state), c.bit.eq(bit), c.check_crc.eq(0), c.crc.eq(0)]
    m.d.comb += [dec.i.valid.eq(go & (k_w < NW)), dec.i.p.data.eq(Array(words)[k_w]),
                 dec.i.p.last.eq(0), dec.o.ready.eq(1)]
    with m.If(transfer_of(dec.cmd)):
        m.d.past += sent.eq(1)
    with m.If(transfer_of(dec.i)):
        m.d.past += k_w.eq(k_w + 1)


def decoder_step_bench(family: str, mutant: str | None, tables: str) -> Bench:
    """The decoder's step from an arbitrary state (``decoder_step``, tANS): the decoder inverts the
    encoder's step from *any* state, going on from a pair it has just decoded.

    Free: a legal table (the local table, pair symbol ``s*``), a state ``X0`` (``L <= X0 < 2L``) and a
    legal pair ``q``; the harness computes the encoder's step (:func:`tans_encoder_step`, the encoder
    row of ``s*`` as the model computes it): ``X1`` and the pair's bits. The decoder is resumed through
    its command (``resume = 1``, two pairs) at a free state ``xw`` with ``b`` free (the unread low bits
    of the first word) on four words, words offered every clock and pairs always taken. Its first
    pair is a *warm-up*: ``xw``'s row is a free witness of a symbol other than ``s*`` (any ``need``),
    its bits are free, and an ``Assume`` says the decoder is in ``X1`` after it; the next bits are
    ``q``'s: ``q`` follows a pair of the decoder's own, not a fresh resume (``docs/formal.md``, Round 6).
    Asserted: its second pair is ``q``, it reports OK, and at ``done`` its state is ``X0`` and it has
    read exactly the warm-up's and ``q``'s bits."""
    assert family == "tans", family
    b, dec, table, (R, K, W, L) = _tans_step_bench("tans-decoder", mutant)
    m = b.m
    x0, qs, qe, X1, bits, length = _pair_from_any_state(b, table)
    # A warm-up pair first (the resumed state ``xw``, whose row is a free witness
    # of a symbol other than s*, reads ``need_w`` free bits), after which the decoder must be in ``X1``
    # (an Assume): the pair is then decoded by a decoder that goes on from a pair, not a fresh resume.
    NW = 4
    words, bit, read0, stream = _resumed_words(b, NW)
    below = Signal(range(NW * W + 1), name="stream_below_pair")
    top = Signal(R + K, name="stream_top")
    need_w = Signal(range(R + K + 2), name="warm_need")
    xw = Signal(R, name="warm_state")
    m.d.comb += [xw.eq(AnyConst(R)), Assume(Array(table.dsym)[xw] != table.sym)]
    nbw = Signal(range(R + 2), name="warm_nb")
    m.d.comb += nbw.eq(R + 1 - bit_length_of(m, Array(table.dy)[xw], "warm_y"))
    m.d.comb += need_w.eq(nbw + Array(table.k)[Array(table.dsym)[xw]])
    after = Signal(NW * W, name="stream_after_warm_up")
    m.d.comb += after.eq((stream << need_w)[:NW * W])
    m.d.comb += [below.eq(NW * W - length), top.eq(after >> below)]
    m.d.comb += Assume(top == bits)

    sent = Signal(name="dec_cmd_sent")
    k_w = Signal(range(NW + 1), name="words_out")
    into = Signal(range(NW + 1), name="words_into_window")
    k_out = Signal(range(4), name="pairs_out")
    finished = Signal(name="finished")
    _resume(b, dec, table, 2, xw, bit, words, sent, k_w)
    coder = dec.coder
    with m.If(transfer_of(coder.i)):
        m.d.past += into.eq(into + 1)
    first = 1                   # the index of q among the decoded pairs
    check_decoded_pair(b, dec, k_out, first, qs, qe)
    # After the warm-up's step the decoder holds X1 (the warm-up row and bits that lead there).
    fired = Signal(name="warm_fired")
    with m.If(coder.fire):
        m.d.past += fired.eq(1)
    with m.If(fired):
        m.d.comb += Assume(b.past(fired, "warm_fired") | (coder.state == X1[:R]))
    with m.If(transfer_of(dec.o)):
        m.d.past += k_out.eq(k_out + 1)
    ending = sent & dec.done & ~finished
    b.check(ending, dec.status == DecodeStatus.OK, "the decoder does not report OK")
    b.check(ending, k_out == first + 1, "the decoder reports done before returning the pair")
    b.check(ending, coder.state == x0, "the decoder's state after the pair is not the encoder's before it")
    read = Signal(range(NW * W + 1), name="bits_read")
    m.d.comb += read.eq(into * W - read0 - coder.avail)
    b.check(ending, read == need_w + length, "the decoder did not read exactly the pair's bits")
    with m.If(ending):
        m.d.past += finished.eq(1)
    b.check(b.cycle >= table.clocks + DECODER_STEP_CLOCKS, finished, "the step has not finished in time")
    b.cover(finished, "a pair decoded after a warm-up pair from a resumed checkpoint")
    return b


def xn_decoder_step_bench(core: str, mutant: str | None) -> Bench:
    """The two-state decoder's step from an arbitrary state (``decoder_step`` of ``tans-decoder-x2``): the
    shipped :class:`~ansforge.hdl.tans.TansXnDecoder` at ``N = 2`` inverts the encoder's step from any
    state of a lane, going on from a pair that lane has just decoded, with the other lane's pair between.

    As :func:`decoder_step_bench`, on the same arbitrary local table (its decoder rows are the ``N``-state
    core's rows too: ``{symbol, nb, base, need}`` at the state), with two lanes. Free: ``X0``, the legal
    pair ``q`` of ``s*`` (the harness computes ``X1`` and ``q``'s bits with :func:`tans_encoder_step`),
    both resumed states ``xw0``, ``xw1`` and ``b`` (the first word's unread bits) on four words, offered
    every clock, pairs always taken. The command (``resume = 1``, three pairs) decodes lane 0's *warm-up*
    from ``xw0`` (a free witness row of a symbol other than ``s*``), after which an ``Assume`` puts lane 0
    in ``X1`` (the coder's state register ``xa`` in the clock after that step: with ``N = 2`` the new
    state goes there); then lane 1's pair from ``xw1`` (any row, any bits); then lane 0's pair, whose bits
    are ``q``'s. Asserted: the third pair is ``q``; its field ends exactly after the two earlier pairs'
    bits and ``q``'s (the step's ``pos`` plus the words the window dropped before it); lane 0 is in ``X0``
    after it; the command reports OK after three pairs, by :data:`XN_DECODER_STEP_CLOCKS`."""
    b = Bench(free_reset=False)
    dec = small_core(core)
    coder = dec.coder
    elaborated_inside(coder)                            # its probe, with the core built around it as shipped
    b.m.submodules.dec = dec
    pr = coder.probe
    table = LocalTansTable(b, "round_trip", 1)
    table.program(dec, role="dec")
    sh = SMALL["tans"]
    R, K, W = sh["table_log"], sh["max_extra_bits"], sh["word_bits"]
    assert (R, W, K) == (len(coder.rstate), len(coder.i.payload), len(coder.o.p.extra)) and coder.states == 2
    m = b.m
    x0, qs, qe, X1, bits, length = _pair_from_any_state(b, table)
    NW = 4
    words, bit, read0, stream = _resumed_words(b, NW)
    # The warm-ups: lane 0's from xw0 (not s*), lane 1's from xw1 (any); each reads its row's need.
    xws, needs = [], []
    for lane in range(2):
        xw = Signal(R, name=f"warm{lane}_state")
        m.d.comb += xw.eq(AnyConst(R))
        nbw = Signal(range(R + 2), name=f"warm{lane}_nb")
        m.d.comb += nbw.eq(R + 1 - bit_length_of(m, Array(table.dy)[xw], f"warm{lane}_y"))
        need = Signal(range(R + K + 2), name=f"warm{lane}_need")
        m.d.comb += need.eq(nbw + Array(table.k)[Array(table.dsym)[xw]])
        xws.append(xw)
        needs.append(need)
    m.d.comb += Assume(Array(table.dsym)[xws[0]] != table.sym)
    before = Signal(range(2 * (R + K) + 3), name="warm_need")   # both warm-ups' bits
    m.d.comb += before.eq(needs[0] + needs[1])
    after = Signal(NW * W, name="stream_after_warm_ups")
    m.d.comb += after.eq((stream << before)[:NW * W])
    below = Signal(range(NW * W + 1), name="stream_below_pair")
    top = Signal(R + K, name="stream_top")
    m.d.comb += [below.eq(NW * W - length), top.eq(after >> below), Assume(top == bits)]

    sent = Signal(name="dec_cmd_sent")
    k_w = Signal(range(NW + 1), name="words_out")
    k_out = Signal(range(4), name="pairs_out")
    fires = Signal(range(4), name="pairs_fired")
    finished = Signal(name="finished")
    _resume(b, dec, table, 3, Cat(*xws), bit, words, sent, k_w)
    # The window drops the pos // W oldest words at a step: the words before the current field's.
    dropped = Signal(range(NW + 2), name="words_dropped")
    with m.If(pr.step & (fires != 3)):
        m.d.past += dropped.eq(dropped + (pr.pos >> (W.bit_length() - 1)))
    with m.If(coder.fire):
        m.d.past += fires.eq(fires + 1)
    # After lane 0's warm-up step its state (now in xa) is X1.
    with m.If(b.past(coder.fire & (fires == 0), "warm_fired")):
        m.d.comb += Assume(pr.xa == X1[:R])
    last = 2                                            # q is the third pair
    q_fire = coder.fire & (fires == last)
    b.check(q_fire, dropped * W + pr.pos == read0 + before + length,
            "the decoder did not read exactly the pairs' bits")
    b.check(b.past(q_fire, "q_fired"), pr.xa == x0, "the decoder's state after the pair is not the encoder's before it")
    check_decoded_pair(b, dec, k_out, last, qs, qe)
    with m.If(transfer_of(dec.o)):
        m.d.past += k_out.eq(k_out + 1)
    ending = sent & dec.done & ~finished
    b.check(ending, dec.status == DecodeStatus.OK, "the decoder does not report OK")
    b.check(ending, k_out == last + 1, "the decoder reports done before returning the pair")
    with m.If(ending):
        m.d.past += finished.eq(1)
    b.check(b.cycle >= table.clocks + XN_DECODER_STEP_CLOCKS, finished, "the step has not finished in time")
    b.cover(finished, "a lane's pair decoded after its own warm-up and the other lane's pair, from a resume")
    return b


def _encode_against(b: Bench, enc, table: LocalTansTable, pairs, golden, golden_len, clocks: int, what: str):
    """The encoder step lemmas' run: one command of the ``pairs`` (``(symbol, extra)``), given back to back
    but for a gap of 4 clocks before the last (the pipeline empties: the pair is coded from an idle
    state), words always taken; asserted: the words are ``golden`` (``golden_len`` bits, oldest first), the
    last one marked ``last``, and the command is done by ``clocks`` after the table's."""
    m = b.m
    W = len(enc.o.p.data)
    NP, TOT = len(pairs), len(golden)
    GAP = 4
    n_in = Signal(range(NP + 1), name="enc_pairs_in")
    gap = Signal(range(GAP + 1), name="enc_gap")
    sent = Signal(name="enc_cmd_sent")
    go = ~table.prog
    m.d.comb += [enc.cmd.valid.eq(go & ~sent), enc.cmd.p.count.eq(NP),
                 enc.i.valid.eq(go & (n_in < NP) & ((n_in < NP - 1) | (gap == GAP))),
                 enc.i.p.symbol.eq(Array([s for s, _ in pairs])[n_in]),
                 enc.i.p.extra.eq(Array([e for _, e in pairs])[n_in]), enc.o.ready.eq(1)]
    with m.If(transfer_of(enc.cmd)):
        m.d.past += sent.eq(1)
    with m.If(transfer_of(enc.i)):
        m.d.past += n_in.eq(n_in + 1)
    with m.If((n_in == NP - 1) & (gap != GAP)):
        m.d.past += gap.eq(gap + 1)
    NWORDS = -(-TOT // W)
    k_o = Signal(range(NWORDS + 2), name="words_out")
    expect = Signal(W, name="expected_word")
    m.d.comb += expect.eq(Array([golden[j * W:(j + 1) * W] for j in range(NWORDS)])[k_o])
    left = Signal(range(TOT + 1), name="golden_bits_left")
    m.d.comb += left.eq(golden_len - k_o * W)
    b.check(transfer_of(enc.o), k_o * W < golden_len, "the encoder pushes more words than the golden stream has")
    b.check(transfer_of(enc.o), enc.o.p.data == expect, "a word differs from the golden stream's")
    b.check(transfer_of(enc.o), enc.o.p.last == (left <= W), "a word's last flag differs from the golden stream's")
    with m.If(transfer_of(enc.o)):
        m.d.past += k_o.eq(k_o + 1)
    finished = Signal(name="finished")
    with m.If(sent & enc.done):
        m.d.past += finished.eq(1)
    b.check(sent & enc.done, k_o * W >= golden_len, "the encoder is done before the golden stream's last word")
    b.check(b.cycle >= table.clocks + clocks, finished, "the step has not finished in time")
    b.cover(finished, what)


def encoder_step_bench(family: str, mutant: str | None, tables: str) -> Bench:
    """The encoder's step from an arbitrary idle state (``encoder_step``, tANS): the encoder core's step
    is the golden step.

    Two *warm-up* pairs bring the encoder to an arbitrary idle state: their symbols are not ``s*``, so
    their symbol rows are free bits in the local table (``nb_high`` in ``1..R``, ``k <= K``), and the
    slot states are free; after them the encoder holds any state ``X0 = L | state[slot]`` and any
    ``c0 <= R + K = W - 1`` pending bits (the second warm-up's ``n`` low bits of its free state and its
    ``k`` extra bits, the first one's ``n = k = 0``): every idle state (state, fewer than ``W`` pending
    bits). Then, after a gap of 4 clocks (the pipeline empties), the pair ``q`` of symbol ``s*``
    (legal), then the flush. The
    harness computes the golden stream (:func:`tans_encoder_step`: the warm-ups' bits, ``q``'s bits
    from ``X0`` with the model's row of ``s*``, then ``X1 = L | state[slot]`` with its marker, ``R + 1``
    bits) and asserts the encoder's words are exactly that stream, oldest bit first, the last word
    marked ``last``."""
    assert family == "tans", family
    b, enc, table, (R, K, W, L) = _tans_step_bench("tans-encoder", mutant)
    m = b.m
    layout = tans_layout(enc.sym_cfg.p.data)
    rows = b.platform.contents["sym"]
    sb = _bits(table.n_sym - 1)
    pairs = []
    X = Const(L, R + 1)
    TOT = 2 * (R + K) + (R + K) + R + 1
    got_bits, got_len = Const(0, TOT), Const(0, 1)
    for i in range(3):
        s_, e_ = Signal(sb, name=f"pair{i}_symbol"), Signal(K, name=f"pair{i}_extra")
        m.d.comb += [s_.eq(AnyConst(sb)), e_.eq(AnyConst(K))]
        row = Signal(layout, name=f"pair{i}_row")
        m.d.comb += Value.cast(row).eq(Array(rows)[s_])
        if i < 2:       # the warm-ups: any symbol but s*, its free row (n in 0..R, k <= K)
            m.d.comb += [Assume(s_ != table.sym), Assume((row.nb_high >= 1) & (row.nb_high <= R) & (row.k <= K))]
        else:           # q: a legal pair of s* (its row is the model's)
            m.d.comb += Assume(table.legal_pair(s_, e_))
        n, slot, nxt, bits, length = tans_encoder_step(m, X, row, e_, f"pair{i}")
        m.d.comb += nxt.eq(L | Array(table.state)[slot])
        acc = Signal(TOT, name=f"pair{i}_stream")
        total = Signal(range(TOT + 1), name=f"pair{i}_stream_len")
        m.d.comb += [acc.eq(got_bits | (bits << got_len)), total.eq(got_len + length)]
        pairs.append((s_, e_))
        X, got_bits, got_len = nxt, acc, total
    golden = Signal(TOT, name="golden_stream")
    golden_len = Signal(range(TOT + 1), name="golden_len")
    m.d.comb += [golden.eq(got_bits | (X << got_len)), golden_len.eq(got_len + R + 1)]

    _encode_against(b, enc, table, pairs, golden, golden_len, ENCODER_STEP_CLOCKS,
                    "a step from the warm-up state, flushed")
    return b


def tans_xn_encoder_step(m: Module, X, row, extra, name: str):
    """The ``N``-state encoder's step as its symbol row documents it (:func:`~ansforge.hdl.tans.shape.x2_symbol_entry`:
    ``{base, thr, sh, last}``), the golden step of its warm-ups: from state ``X`` (``R + 1`` bits),
    ``lt = (X - L) >> 1 < thr``, ``n = R - sh - lt``, ``k = last + 1 + sh - R`` (modulo ``last``'s width),
    slot ``base + (X >> n)``; the pair pushes the ``n`` low bits of ``X``, then its ``k`` extra bits.
    Returns ``(n, slot, X', bits, length, k)``, ``X'`` for the caller to drive."""
    sh = SMALL["tans"]
    R, K = sh["table_log"], sh["max_extra_bits"]
    lt = Signal(name=f"{name}_lt")
    n = Signal(range(R + 1), name=f"{name}_n")
    k = Signal(len(row.last), name=f"{name}_k")
    slot = Signal(R, name=f"{name}_slot")
    nxt = Signal(R + 1, name=f"{name}_next")
    bits = Signal(R + K, name=f"{name}_bits")
    length = Signal(range(R + K + 1), name=f"{name}_len")
    m.d.comb += [lt.eq(X[1:R] < row.thr), n.eq(R - row.sh - lt), k.eq(row.last + 1 + row.sh - R),
                 slot.eq((row.base + (X >> n))[:R]),
                 bits.eq((X & mask(n, R + 1))[:R] | ((extra & mask(k, K)) << n)), length.eq(n + k)]
    return n, slot, nxt, bits, length, k


def xn_encoder_step_bench(core: str, mutant: str | None) -> Bench:
    """The two-state encoder's step from an arbitrary idle state (``encoder_step`` of ``tans-encoder-x2``):
    the shipped :class:`~ansforge.hdl.tans.TansXnEncoder` at ``N = 2`` codes a pair of a legal table as
    the golden step, from any state of its lane, whatever the other lane holds and whatever bits are
    pending, and flushes both lanes and the marker after it.

    As :func:`encoder_step_bench`, on the same arbitrary local table (the ``N``-state core's symbol rows
    ``{base, thr, sh, last}`` for ``s*`` are the model's, :func:`~ansforge.hdl.tans.shape.x2_symbol_rows`'s
    formulas). Three *warm-up* pairs of symbols other than ``s*`` with free rows (``sh <= R``, ``n >= 0``,
    ``k <= K``) and free slot states, coded as their rows say (:func:`tans_xn_encoder_step`), bring the
    encoder from reset to every idle state: lane 1 (the next pair's) in any ``X0`` (the second warm-up's
    slot state), lane 0 in any state (the third's), and any ``c0 <= R + K = W - 1`` pending bits of any
    value (the third's field; the first two may be empty). After a gap of 4 clocks comes the legal pair
    ``q`` of ``s*``, coded from ``X0`` by :func:`tans_encoder_step` with the model's row, then the flush:
    lane 0's state index, lane 1's (``X1``), ``R`` bits each, and the marker bit. Asserted: the words are
    exactly that stream, oldest bit first, the last one marked ``last``, done by
    :data:`XN_ENCODER_STEP_CLOCKS`."""
    b = Bench(free_reset=False)
    enc = small_core(core)
    assert enc.coder.states == 2
    b.m.submodules.enc = enc
    table = LocalTansTable(b, "round_trip", 1)
    table.program(enc, role="enc")
    sh = SMALL["tans"]
    R, K, L = sh["table_log"], sh["max_extra_bits"], 1 << sh["table_log"]
    m = b.m
    layout = tans_layout(enc.sym_cfg.p.data)
    rows = b.platform.contents["sym"]
    sb = _bits(table.n_sym - 1)
    NP = 4
    TOT = NP * (R + K) + 2 * R + 1
    lanes = [Const(L, R + 1), Const(L, R + 1)]
    got_bits, got_len = Const(0, TOT), Const(0, 1)
    pairs = []
    for i in range(NP):
        lane = i % 2
        s_, e_ = Signal(sb, name=f"pair{i}_symbol"), Signal(K, name=f"pair{i}_extra")
        m.d.comb += [s_.eq(AnyConst(sb)), e_.eq(AnyConst(K))]
        if i < NP - 1:          # a warm-up: any symbol but s*, its free row
            row = Signal(layout, name=f"pair{i}_row")
            m.d.comb += Value.cast(row).eq(Array(rows)[s_])
            m.d.comb += Assume(s_ != table.sym)
            n, slot, nxt, bits, length, k = tans_xn_encoder_step(m, lanes[lane], row, e_, f"pair{i}")
            m.d.comb += Assume((row.sh <= R) & ((row.sh != R) | (row.thr == 0)) & (k <= K))
        else:                   # q: a legal pair of s*, its row the model's
            m.d.comb += Assume(table.legal_pair(s_, e_))
            row = model_symbol_row(m, table, s_)
            n, slot, nxt, bits, length = tans_encoder_step(m, lanes[lane], row, e_, f"pair{i}")
        m.d.comb += nxt.eq(L | Array(table.state)[slot])
        acc = Signal(TOT, name=f"pair{i}_stream")
        total = Signal(range(TOT + 1), name=f"pair{i}_stream_len")
        m.d.comb += [acc.eq(got_bits | (bits << got_len)), total.eq(got_len + length)]
        pairs.append((s_, e_))
        lanes[lane], got_bits, got_len = nxt, acc, total
    # The flush: the ring's head first (lane 0, coded two pairs ago), then lane 1 (q's X1), R bits of
    # each state's index; then the marker.
    golden = Signal(TOT, name="golden_stream")
    golden_len = Signal(range(TOT + 1), name="golden_len")
    m.d.comb += [golden.eq(got_bits | (Cat(lanes[0][:R], lanes[1][:R], Const(1, 1)) << got_len)),
                 golden_len.eq(got_len + 2 * R + 1)]

    _encode_against(b, enc, table, pairs, golden, golden_len, XN_ENCODER_STEP_CLOCKS,
                    "a step of one lane from the warm-up state, both lanes flushed")
    return b
