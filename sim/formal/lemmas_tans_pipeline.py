"""The tANS cores' pipeline lemmas (``encoder_pipeline``, ``decoder_pipeline``: the coder is
the golden coder for any timing) and ``composition`` (the blocks composed; ``docs/formal.md``,
Round 7). The rANS cores' pipelines are dispatched to :mod:`.lemmas_rans`.
"""

from __future__ import annotations

from amaranth.hdl import Array, Assert, Assume, Cat, Const, Mux, Signal, Value
from amaranth.hdl._ast import AnyConst, AnySeq
from amaranth.lib import data

from ...hdl.tans.cores_xn import TansXnDecoder
from ...hdl.tans.shape import thermometer
from ...model.coding.codetable import CodeTable
from ...model.coding.tans import TansParams, TansTable
from .params import SMALL, small_core
from .benches import (unused_ok, Bench, TablePlatform, elaborated_block, elaborated_inside, free_core, load_tracker,
                      mask, tans_layout, transfer_of)
from .lemmas_rans import rans_decoder_pipeline_bench, rans_encoder_pipeline_bench
from .lemmas_rans_xn import holds_offered_stream
from .lemmas_tans import ShadowQueue, WordQueue, packer_field
from .lemmas_tans_step import tans_encoder_step, tans_xn_encoder_step


def owed_pairs(b: Bench, layout, fire, pop, expect):
    """The pairs a decoder's coder has decoded and not yet put out (at most two: its pair register and
    ``o``), kept by a pipeline harness: ``(e0, e1, fc)``, the oldest, the next and how many. ``fire``
    adds ``expect`` (the abstract decoder's pair of this clock), ``pop`` (a transfer on ``o``) takes
    ``e0``."""
    m = b.m
    e0, e1 = Signal(layout, name="owed0"), Signal(layout, name="owed1")
    fc = Signal(range(3), name="owed")
    with m.If(b.rst):
        m.d.past += fc.eq(0)
    with m.Else():
        m.d.past += fc.eq(fc + fire - pop)
        with m.If(pop):
            m.d.past += e0.eq(Mux(fire & (fc == 1), expect, e1))
            with m.If(fire):
                m.d.past += e1.eq(expect)
        with m.Elif(fire):
            with m.If(fc == 0):
                m.d.past += e0.eq(expect)
            with m.Else():
                m.d.past += e1.eq(expect)
    return e0, e1, fc


def encoder_pipeline_bench(core: str, mutant: str | None) -> Bench:
    """The encoder's coder is the golden encoder for any timing (``encoder_pipeline``, condition 1 of
    the composition: back-to-back pairs; the rANS encoder's: :func:`rans_encoder_pipeline_bench`).

    :class:`~ansforge.hdl.tans.TansEncoderCoder` of the small tANS encoder alone, on an arbitrary table
    held in its memories (:class:`TablePlatform`: every symbol row ``AnyConst`` with ``nb_high <= R``,
    ``k <= K`` and ``n`` never below 0 (``nb_high >= 1`` or ``threshold <= L``), which every legal row
    meets (a symbol of all ``L`` slots has ``nb_high = 0`` and ``threshold = L``); every slot's state
    ``AnyConst``; no writes), pairs offered in any clock (back to back or not, any
    symbol and extra bits), ``o.ready`` free, resets in any clock, and the flush as the shell gives
    it: once asked for, held until ``flushed``, with no pair entering meanwhile except in the clock
    of ``flushed`` (the next command's first). The harness runs the golden encoder beside it
    (:func:`tans_encoder_step` per pair taken, in the clock it is taken; the final state and its
    marker appended when the flush is first asked for): its state ``X`` and its queue of pushed bits
    not yet taken from ``o``. Asserted for every sequence: every word taken from ``o`` is the queue's
    next ``W`` bits (zero-padded), marked ``last`` exactly when it ends the flushed stream, and a
    stream's ``flushed`` leaves the queue empty. The pipeline's registers
    (:attr:`~ansforge.hdl.tans.TansEncoderCoder.probe`) are tied to the golden state by auxiliary
    assertions (what is in each stage, the golden queue being ``o``, the accumulator, stage 3's
    bits, stage 1's pair stepped from the coder's ``X``, and the marker not yet inserted), so that
    the k-induction closes."""
    if core == "rans-encoder":
        return rans_encoder_pipeline_bench(core, mutant)
    if core == "tans-encoder-x2":
        return xn_encoder_pipeline_bench(core, mutant)
    b = Bench(free_reset=True)
    m = b.m
    sh = SMALL["tans"]
    R, K, W, L = sh["table_log"], sh["max_extra_bits"], sh["word_bits"], 1 << sh["table_log"]
    enc = small_core("tans-encoder")
    unused_ok(enc)                                      # only its coder is built
    coder = enc.coder
    b.platform = TablePlatform()
    layout = tans_layout(coder.sym_cfg.p.data)
    n_sym = sh["max_symbols"]
    rows = [Signal(layout, name=f"sym_row{q}") for q in range(n_sym)]
    states = [Signal(R, name=f"slot_state{j}") for j in range(L)]
    def table_row(r):       # n = nb_high - (X < threshold) in 0..R for every X >= L; k <= K
        return (r.nb_high <= R) & (r.k <= K) & ((r.nb_high != 0) | (r.threshold <= L))
    for r in rows:
        m.d.comb += [Value.cast(r).eq(AnyConst(layout.size)), Assume(table_row(r))]
    m.d.comb += [st.eq(AnyConst(R)) for st in states]
    b.platform.contents["sym"] = [Value.cast(r) for r in rows]
    b.platform.contents["state"] = states
    m.submodules.coder = elaborated_block(coder)
    pr = coder.probe
    m.d.comb += [coder.sym_cfg.valid.eq(0), coder.state_cfg.valid.eq(0), coder.sym_cfg.p.eq(0), coder.state_cfg.p.eq(0),
                 coder.i.valid.eq(AnySeq(1)), coder.i.p.eq(AnySeq(len(Value.cast(coder.i.p)))),
                 coder.o.ready.eq(AnySeq(1)), coder.flush.eq(AnySeq(1))]
    QB = 48                                             # the golden queue (more than the pipeline holds)
    X = Signal(R + 1, init=L, name="golden_x")
    queue = Signal(QB, name="golden_queue")             # bits pushed, not yet taken from o; the oldest at 0
    qlen = Signal(range(QB + 1), name="golden_queue_len")
    fs = Signal(name="golden_flush")                    # the flush asked for, its marker appended, not yet flushed
    take, out = transfer_of(coder.i), transfer_of(coder.o)
    # The flush, as the shell gives it: held from the clock it is asked for until flushed; no pair
    # enters meanwhile except in the clock of flushed.
    m.d.comb += [Assume(~fs | coder.flush), Assume(~(coder.flush & take) | coder.flushed)]
    # The golden step of the pair taken this clock (its row read at its symbol, as the model's).
    row = Signal(layout, name="golden_row")
    m.d.comb += Value.cast(row).eq(Array([Value.cast(r) for r in rows])[coder.i.p.symbol])
    n, slot, nxt, bits, length = tans_encoder_step(m, X, row, coder.i.p.extra, "golden")
    m.d.comb += nxt.eq(L | Array(states)[slot])
    # This clock's queue after o's transfer, then the pair's bits or the flush's marker behind it.
    q1, l1 = Signal(QB, name="queue_after_word"), Signal(range(QB + 1), name="len_after_word")
    m.d.comb += [q1.eq(Mux(out, queue >> W, queue)), l1.eq(Mux(out, Mux(qlen >= W, qlen - W, 0), qlen))]
    start = coder.flush & ~fs                           # the flush is asked for (first clock)
    with m.If(b.rst):
        m.d.past += [X.eq(L), queue.eq(0), qlen.eq(0), fs.eq(0)]
    with m.Elif(start & ~take):
        m.d.past += [queue.eq(q1 | (X << l1)[:QB]), qlen.eq(l1 + R + 1), X.eq(L), fs.eq(1)]
    with m.Else():
        with m.If(take):
            m.d.past += [queue.eq(q1 | (bits << l1)[:QB]), qlen.eq(l1 + length), X.eq(nxt)]
        with m.Else():
            m.d.past += [queue.eq(q1), qlen.eq(l1)]
        with m.If(coder.flushed):
            m.d.past += fs.eq(0)
    with m.If(out):
        m.d.comb += [Assert(qlen != 0, "a word from an empty stream"),
                     Assert(coder.o.p.data == queue[:W], "a word is not the golden stream's next bits"),
                     Assert(coder.o.p.last == (fs & (qlen <= W)), "last does not mark the flushed stream's end")]
    with m.If(coder.flushed):
        m.d.comb += Assert(fs & (qlen <= W), "flushed before the stream's last bits")
    m.d.comb += Assert(qlen <= QB - W, "the golden queue overflows (a word is not taken out)")
    # Auxiliary invariants: the pipeline's registers against the golden encoder.
    v1, e1, base1, extra1 = pr.v1, pr.e1, pr.base1, pr.extra1
    v3, bits3, len3, acc, cnt, Xc, FL = pr.v3, pr.bits3, pr.len3, pr.acc, pr.cnt, pr.x, pr.flushing
    n1, slot1, nxt1, bits1, len1 = tans_encoder_step(m, Xc, e1, extra1, "stage1")
    m.d.comb += nxt1.eq(L | Array(states)[slot1])
    ahead = Signal(R + 1, name="x_ahead")               # the coder's X once stage 1's pair has stepped
    m.d.comb += ahead.eq(Mux(v1, nxt1, Xc))
    pend = Signal(name="marker_pending")                # the golden marker is appended, the coder's not yet
    m.d.comb += pend.eq(fs & ~FL)
    olen = Signal(range(W + 1), name="o_len")
    m.d.comb += olen.eq(Mux(coder.o.valid, Mux(qlen >= W, W, qlen), 0))
    s3 = Signal(range(QB + 1), name="after_acc")
    s1 = Signal(range(QB + 1), name="after_stage3")
    s0 = Signal(range(QB + 1), name="after_stage1")
    m.d.comb += [s3.eq(olen + cnt), s1.eq(s3 + Mux(v3, len3, 0)), s0.eq(s1 + Mux(v1, len1, 0))]
    model = Signal(QB, name="pipeline_bits")
    m.d.comb += model.eq(Mux(coder.o.valid, coder.o.p.data, 0) | (acc << olen)[:QB] | Mux(v3, bits3 << s3, 0)[:QB]
                         | Mux(v1, bits1 << s1, 0)[:QB] | Mux(pend, ahead << s0, 0)[:QB])
    m.d.comb += [Assert(queue == model, "inv: the golden queue is o, the accumulator and the stages' bits"),
                 Assert(qlen == s0 + Mux(pend, R + 1, 0), "inv: the golden length"),
                 Assert(X == Mux(fs, L, ahead), "inv: the golden state is the coder's, stage 1 stepped"),
                 Assert(Xc[R] & ((acc >> cnt) == 0) & ((bits3 >> len3) == 0) & (cnt < W) & (len3 <= R + K),
                        "inv: the coder's registers are in range"),
                 Assert(~coder.o.valid | coder.o.p.last | (qlen >= W), "inv: a full word on o"),
                 Assert(~coder.o.valid | (qlen != 0), "inv: a word on o is in the golden queue"),
                 Assert(~(fs & coder.o.valid & ~coder.o.p.last) | (qlen > W),
                        "inv: a flushed stream goes on after a word not last"),
                 Assert((queue >> qlen) == 0, "inv: the golden queue is zero above its bits"),
                 Assert(~coder.o.valid | ~coder.o.p.last | (FL & (qlen <= W) & (s3 == olen) & ~v3 & ~v1),
                        "inv: a last word on o is the stream's end"),
                 Assert(~v1 | (base1 == (e1.cum - e1.freq)[:R]), "inv: stage 1's slot base"),
                 Assert(~v1 | table_row(e1), "inv: stage 1's row is a table row"),
                 Assert(~FL | (fs & ~v1 & (Xc == L)), "inv: the coder flushes only when asked, from L, stage 1 empty")]
    b.cover(take & v1 & v3 & out, "back to back: a pair taken with one in each stage while a word is taken")
    b.cover(coder.flushed & take & b.past(out, "out1"), "a stream flushed after a word, the next one's first pair taken")
    return b


def xn_encoder_pipeline_bench(core: str, mutant: str | None) -> Bench:
    """The two-state encoder's coder gives its packer the golden encoder's fields for any timing
    (``encoder_pipeline`` of ``tans-encoder-x2``; the packer's words from those fields are
    ``packer_queue``'s).

    :class:`~ansforge.hdl.tans.TansXnEncoderCoder` of the small two-state encoder alone, on an arbitrary
    table held in its memories (every symbol row ``AnyConst`` of the ``N``-state layout ``{base, thr, sh,
    last}`` with ``sh <= R``, ``n`` never below 0 and ``k <= K``, which every legal row meets; every slot's
    state ``AnyConst``; no writes), pairs offered in any clock with extra bits that fit their row's ``k``,
    ``o.ready`` free, resets in any clock, and the flush as the shell gives it: held from the clock it is
    asked for until ``flushed``. The harness runs the golden two-state encoder beside it
    (:func:`~.lemmas_tans.tans_xn_encoder_step` per pair taken, on the lane whose turn it is, in the clock
    it is taken; when the flush is first asked for, both lanes' state indices, ``R`` bits each, the next
    lane first and the last one marked ``end``, and both lanes back to ``L``) and keeps the fields it
    owes the packer. Asserted for every sequence: every field the packer takes is legal (its
    ``packer_queue`` premise) and is the next owed one, its length and its ``end`` included. The coder's
    registers (:attr:`~ansforge.hdl.tans.TansXnEncoderCoder.probe`: stage 1, the flush count, the ring's
    ``x``, ``slot`` and ``fresh``) are tied to the golden encoder by auxiliary assertions, so that the
    induction closes."""
    b = Bench(free_reset=True)
    m = b.m
    sh = SMALL["tans"]
    R, K, L = sh["table_log"], sh["max_extra_bits"], 1 << sh["table_log"]
    enc = small_core(core)
    unused_ok(enc)                                      # only its coder is built
    coder = enc.coder
    assert coder.states == 2
    F = coder.field_bits
    b.platform = TablePlatform()
    layout = tans_layout(coder.sym_cfg.p.data)
    LB = layout["last"].width
    n_sym = sh["max_symbols"]

    def k_of(r, name):
        k = Signal(LB, name=f"{name}_k")
        m.d.comb += k.eq(r.last + 1 + r.sh - R)
        return k

    def table_row(r, name):     # n = R - sh - lt in 0..R for every state; k <= K
        return (r.sh <= R) & ((r.sh != R) | (r.thr == 0)) & (k_of(r, name) <= K)
    rows = [Signal(layout, name=f"sym_row{q}") for q in range(n_sym)]
    states = [Signal(R, name=f"slot_state{j}") for j in range(L)]
    for q, r in enumerate(rows):
        m.d.comb += [Value.cast(r).eq(AnyConst(layout.size)), Assume(table_row(r, f"sym_row{q}"))]
    m.d.comb += [st.eq(AnyConst(R)) for st in states]
    b.platform.contents["sym"] = [Value.cast(r) for r in rows]
    b.platform.contents["state"] = states
    b.platform.frozen = {"sym", "state"}
    m.submodules.coder = elaborated_block(coder)
    pr = coder.probe
    elaborated_inside(pr.ring)
    rp, ring, pk = pr.ring.probe, pr.ring, pr.packer
    m.d.comb += [coder.sym_cfg.valid.eq(0), coder.state_cfg.valid.eq(0), coder.sym_cfg.p.eq(0), coder.state_cfg.p.eq(0),
                 coder.i.valid.eq(AnySeq(1)), coder.i.p.eq(AnySeq(len(Value.cast(coder.i.p)))),
                 coder.o.ready.eq(AnySeq(1)), coder.flush.eq(AnySeq(1))]
    take, pop = transfer_of(coder.i), transfer_of(pk.i)
    H = Signal(R + 1, init=L, name="golden_head")      # the lane the next pair codes
    O = Signal(R + 1, init=L, name="golden_other")
    fs = Signal(name="golden_flush")                    # the flush asked for and not yet flushed
    m.d.comb += Assume(~fs | coder.flush)
    row = Signal(layout, name="golden_row")
    m.d.comb += Value.cast(row).eq(Array([Value.cast(r) for r in rows])[coder.i.p.symbol])
    m.d.comb += Assume(~take | ((coder.i.p.extra >> k_of(row, "golden_row")) == 0))
    _, slot, nxt, bits, length, _ = tans_xn_encoder_step(m, H, row, coder.i.p.extra, "golden")
    m.d.comb += nxt.eq(L | Array(states)[slot])
    start = coder.flush & ~fs
    # The owed fields, oldest first: (value, length, end).
    D = 3
    ov = [Signal(F, name=f"owed{j}_value") for j in range(D)]
    ol = [Signal(LB, name=f"owed{j}_len") for j in range(D)]
    oe = [Signal(name=f"owed{j}_end") for j in range(D)]
    oc = Signal(range(D + 1), name="owed")
    n_in, v_in, ok_in = packer_field(m, F, pk.i.p.bits, pk.i.p.skip, pk.i.p.lt, pk.i.p.last, "packer_in")
    with m.If(pop):
        m.d.comb += [Assert(oc != 0, "a field the golden encoder does not owe"),
                     Assert(ok_in, "a field is not a legal packer field"),
                     Assert((v_in == ov[0]) & (n_in == ol[0]), "a field is not the golden encoder's next one"),
                     Assert(pk.i.p.end == oe[0], "a field's end is not the golden stream's")]
    # The FIFO after this clock's pop, then this clock's pushes.
    after = [(Mux(pop, a1, a0), Mux(pop, b1, b0), Mux(pop, c1, c0))
             for (a0, b0, c0), (a1, b1, c1) in zip(zip(ov, ol, oe), list(zip(ov, ol, oe))[1:] + [(0, 0, 0)])]
    left = Signal(range(D + 1), name="owed_after_pop")
    m.d.comb += left.eq(oc - pop)
    pushes = [(take, [(bits, length, 0)]), (start, [(H[:R], R, 0), (O[:R], R, 1)])]
    with m.If(b.rst):
        m.d.past += [H.eq(L), O.eq(L), fs.eq(0), oc.eq(0)]
    with m.Else():
        m.d.past += fs.eq((fs | start) & ~coder.flushed)
        m.d.past += [ov[j].eq(after[j][0]) for j in range(D)]
        m.d.past += [ol[j].eq(after[j][1]) for j in range(D)]
        m.d.past += [oe[j].eq(after[j][2]) for j in range(D)]
        m.d.past += oc.eq(left)
        for when, fields in pushes:
            with m.If(when):
                m.d.past += oc.eq(left + len(fields))
                for f, (v, n, e) in enumerate(fields):
                    for j in range(D):
                        with m.If(left + f == j):
                            m.d.past += [ov[j].eq(v), ol[j].eq(n), oe[j].eq(e)]
        with m.If(take):
            m.d.past += [H.eq(O), O.eq(nxt)]
        with m.If(start):
            m.d.past += [H.eq(L), O.eq(L)]
    m.d.comb += Assert(oc <= D, "inv: at most three fields owed")
    # Auxiliary invariants: the coder's registers against the golden encoder.
    x = ring.x
    B = Signal(R, name="ring_other")                    # the other lane's state index in the ring
    m.d.comb += B.eq(Mux(rp.fresh, 0, Array(states)[rp.slot[:R]]))
    row1 = Signal(layout, name="stage1_row")
    m.d.comb += [row1.base.eq(pr.base1), row1.thr.eq(pr.thr1), row1.sh.eq(pr.sh1), row1.last.eq(pr.last1)]
    _, slot1, nxt1, bits1, len1, k1 = tans_xn_encoder_step(m, L | x, row1, pr.ext1, "stage1")
    m.d.comb += nxt1.eq(L | Array(states)[slot1])
    pair1 = Signal(name="stage1_pair")
    fl_first, fl_last = Signal(name="stage1_flush_first"), Signal(name="stage1_flush_last")
    m.d.comb += [pair1.eq(pr.v1 & ~pr.fl1 & ~pr.wr1), fl_first.eq(pr.v1 & pr.fl1 & ~pr.end1),
                 fl_last.eq(pr.v1 & pr.fl1 & pr.end1)]
    # The lanes once stage 1's step is done (the next lane first).
    a0, a1 = Signal(R, name="lanes_after0"), Signal(R, name="lanes_after1")
    m.d.comb += [a0.eq(Mux(pair1, B, Mux(fl_last, 0, x))), a1.eq(Mux(pair1, nxt1[:R], Mux(fl_last, 0, B)))]
    model = ([(pair1, (bits1, len1, 0))] + [(fl_first, (x, R, 0)), (fl_first, (B, R, 1)), (fl_last, (x, R, 1))]
             + [(fs & ~fl_first, (a0, R, 0)), (fs & ~fl_first, (a1, R, 1))])
    count = Signal(range(len(model) + 1), name="model_owed")
    m.d.comb += count.eq(sum(Value.cast(w).as_unsigned() for w, _ in model))
    m.d.comb += Assert(oc == count, "inv: the owed fields are stage 1's step and the flush's")
    # The j-th owed field is the j-th present entry of the model.
    for j in range(D):
        seen = Const(0, 3)
        for i, (w, (v, n, e)) in enumerate(model):
            here = Signal(name=f"owed{j}_is_model{i}")
            m.d.comb += here.eq(w & (seen == j))
            with m.If(here & (oc > j)):
                m.d.comb += Assert((ov[j] == v) & (ol[j] == n) & (oe[j] == e), f"inv: owed field {j}")
            seen = seen + w
    m.d.comb += [Assert(Mux(fs | fl_first | fl_last, (H == L) & (O == L), (H == (L | a0)) & (O == (L | a1))),
                        "inv: the golden lanes are the ring's once stage 1 has stepped"),
                 Assert(~(pr.v1 & pr.wr1), "inv: no table write"),
                 Assert((pr.fc != 0) == fl_first, "inv: the flush count is the first flush step's"),
                 Assert(~fl_first | fs, "inv: a first flush step only while the flush is asked for"),
                 Assert(~fl_last | rp.fresh, "inv: the last flush step follows a restart"),
                 Assert(~(pr.v1 & pr.fl1) | ((pr.thr1 == 0) & (pr.sh1 == 0) & (pr.last1 == R - 1) & (pr.ext1 == 0)),
                        "inv: a flush step's row is the state's R bits"),
                 Assert(~pair1 | (table_row(row1, "stage1_row") & ((pr.ext1 >> k1) == 0)),
                        "inv: stage 1's pair has a table row and extra bits that fit it")]
    b.cover(take & pair1 & pop, "back to back: a pair taken while stage 1's enters the packer")
    b.cover(coder.flushed & b.past(pop, "popped"), "a stream flushed after a field")
    return b


def decoder_pipeline_bench(core: str, mutant: str | None) -> Bench:
    """The decoder's coder is the abstract decoder over its bit queue, for any history and timing
    (``decoder_pipeline``, the rest of condition 2 of the composition; the rANS decoder's:
    :func:`rans_decoder_pipeline_bench`).

    :class:`~ansforge.hdl.tans.TansDecoderCoder` of the small tANS decoder alone, as shipped (programmable:
    its table write path included), its table an arbitrary constant (the memory's contents) whose rows are
    legal-shaped (``nb <= R``, ``nb <= need <= nb + K``, ``base`` with ``nb`` zero low bits), table writes
    of legal-shaped rows in any clock (a write also moves the state to its address: the abstract decoder
    follows), streams started in any clock from their top (``resume = 0``: the marker word, then the
    state) or resumed (``resume = 1``) at any state and offset, words offered in any clock once a stream
    has started, ``run``, ``ended`` and ``o.ready`` free; streams that are not read past their end (no
    pair decoded, and no head state read, with fewer bits held than it needs: an ``Assume``; ``detection``
    covers those). The harness keeps the bit queue (as ``window_queue``), the abstract state and the
    pairs decoded and not yet taken from ``o``; a stream from its top first reads its marker skip (the
    first word's bits down to its highest set bit) and then ``R`` bits, the state; at each pair it
    decodes the queue's next ``need`` bits with the row of its state (the first ``need - nb`` bits are
    the extra bits, the next ``nb`` give ``next = base | v``). Asserted for every sequence: the coder's
    state is the abstract state; the head reads are those two; a pair reads exactly its ``need`` bits;
    every pair taken from ``o`` is the next abstract pair (none lost, none twice, in order, under any
    back-pressure); ``pending`` exactly while pairs are owed. So a pair decoded after any history is
    decoded as ``decoder_step`` decodes it from the same state and bits."""
    if core == "rans-decoder":
        return rans_decoder_pipeline_bench(core, mutant)
    if core == "tans-decoder-x2":
        return xn_decoder_pipeline_bench(core, mutant)
    b = Bench(free_reset=True)
    m = b.m
    sh = SMALL["tans"]
    R, K, W = sh["table_log"], sh["max_extra_bits"], sh["word_bits"]
    F = R + K
    # The shipped build, table write path included (programmable): the table's contents are the
    # harness's (a baked table, a real one with the pinned frequencies, only gives the memory its shape).
    baked = TansTable(CodeTable((0, 1, 2), (3, 4, 5, 6), 0, (13, 9, 7, 3), R), TansParams(table_log=R), "fse")
    dec = TansXnDecoder(**sh, programmable=True, block_crc=False, count_bits=3, table=baked)
    unused_ok(dec)                                      # only its coder is built
    coder = dec.coder
    # The table: any constant (the memory's contents from the first clock, :class:`TablePlatform`).
    b.platform = TablePlatform()
    elayout = coder.entry_layout
    rows = [Signal(elayout, name=f"dec_row{a}") for a in range(1 << R)]
    m.d.comb += [Value.cast(r).eq(AnyConst(elayout.size)) for r in rows]
    b.platform.contents["dec"] = [Value.cast(r) for r in rows]
    m.submodules.coder = elaborated_block(coder)
    pr = coder.probe
    win = pr.window
    slots, nw = win.probe.slots, win.probe.nw
    N = len(slots)
    NW = N * W
    QW = NW + W
    entry = pr.entry
    m.d.comb += [coder.start.valid.eq(AnySeq(1)), coder.start.p.resume.eq(AnySeq(1)),
                 coder.start.p.state.eq(AnySeq(R)), coder.start.p.bit.eq(AnySeq(len(coder.start.p.bit))),
                 coder.i.valid.eq(AnySeq(1)), coder.i.payload.eq(AnySeq(W)), coder.run.eq(AnySeq(1)),
                 coder.ended.eq(AnySeq(1)), coder.o.ready.eq(AnySeq(1))]
    begun = Signal(name="begun")                        # a stream has been started
    with m.If(b.rst):
        m.d.past += begun.eq(0)
    with m.Elif(coder.start.valid):
        m.d.past += begun.eq(1)
    m.d.comb += Assume(~coder.i.valid | begun | coder.start.valid)
    def legal(r):           # a legal-shaped row: nb <= R, k = need - nb <= K, base with nb zero low bits
        return (r.nb <= R) & (r.need >= r.nb) & (r.need <= r.nb + K) & ((r.base & mask(r.nb, R)) == 0)

    for r in rows:
        m.d.comb += Assume(legal(r))
    # Table writes in any clock (the shell passes them only between commands; here also during a
    # stream), of legal-shaped rows. A write moves the coder's state to its address (the table is written
    # at the state register's address): the abstract decoder follows, as a resume at that state would.
    cfg = coder.cfg
    m.d.comb += [cfg.valid.eq(AnySeq(1)), Value.cast(cfg.p).eq(AnySeq(len(Value.cast(cfg.p)))),
                 Assume(~cfg.valid | legal(cfg.p.data))]
    # Every row the coder reads is one of those: the contents or a legal write. (Sound: no trace from
    # reset reads another; it pins the written rows' registers in the induction's first clocks.)
    m.d.comb += Assume(legal(pr.entry))
    # The bit queue (window_queue's model), driven by what the window is given and read.
    sq = ShadowQueue(b, win, QW)
    queue, count = sq.queue, sq.count
    # The abstract decode of this clock's pair: the row of the state, the queue's next need bits.
    k = Signal(range(K + 1), name="pair_k")
    m.d.comb += k.eq(entry.need - entry.nb)
    ext = Signal(K, name="expected_extra")
    v = Signal(R, name="expected_state_bits")
    m.d.comb += [ext.eq(queue >> (QW - k).as_unsigned()),
                 v.eq((queue >> (QW - entry.need).as_unsigned()) & mask(entry.nb, R))]
    nxt = Signal(R, name="expected_next")
    m.d.comb += nxt.eq(entry.base | v)
    pair_layout = data.StructLayout({"symbol": len(entry.symbol), "extra": K})
    expect = Signal(pair_layout, name="expected_pair")
    m.d.comb += [expect.symbol.eq(entry.symbol), expect.extra.eq(ext)]
    fire = coder.fire
    m.d.comb += Assume(~fire | (count >= entry.need))     # no stream is read past its end
    # A stream started from its top (resume = 0): the abstract prologue reads the marker skip (the
    # first word's bits above its highest set bit, and that bit) and then R bits, the state.
    phase, first, no_marker = pr.phase, pr.first, pr.no_marker
    SKIP, STATE, DECODE = 0, 1, pr.decode_phase
    top = queue[QW - W:]                                # the queue's first word (the marker word)
    mskip = Signal(range(W + 1), name="expected_marker_skip")
    for bit in range(W):
        with m.If(top[bit]):
            m.d.comb += mskip.eq(W - bit)
    skip_read = Signal(name="skip_read")
    state_read = Signal(name="state_read")
    m.d.comb += [skip_read.eq(begun & (phase == SKIP) & (win.n != 0)),
                 state_read.eq(begun & (phase == STATE) & (win.n != 0))]
    m.d.comb += Assume(~state_read | (count >= R))       # (nor its head)
    xs = Signal(R, name="abstract_state")
    with m.If(b.rst):
        m.d.past += xs.eq(0)
    with m.Elif(coder.start.valid):
        m.d.past += xs.eq(coder.start.p.state)
    with m.Elif(cfg.valid):
        m.d.past += xs.eq(cfg.p.addr)
    with m.Elif(fire):
        m.d.past += xs.eq(nxt)
    with m.Elif(state_read):
        m.d.past += xs.eq(queue[QW - R:])
    pop = transfer_of(coder.o)
    e0, e1, fc = owed_pairs(b, pair_layout, fire, pop, expect)
    m.d.comb += Assert(coder.state == xs, "the coder's state is not the abstract decoder's")
    m.d.comb += Assert(fire | (win.n == 0) | skip_read | state_read, "bits are read without a pair")
    with m.If(skip_read):
        m.d.comb += Assert(~first & (count >= W) & (top != 0) & (win.n == mskip),
                           "the marker skip is not the first word's bits down to its highest set bit")
    with m.If(state_read):
        m.d.comb += Assert(win.n == R, "the stream head's state read is not R bits")
    with m.If(fire):
        m.d.comb += [Assert(win.n == entry.need, "a pair does not read exactly its need bits"),
                     Assert((fc != 2) | pop, "a pair is decoded over one still owed")]
    with m.If(pop):
        m.d.comb += [Assert(fc != 0, "a pair on o that was not decoded"),
                     Assert(Value.cast(coder.o.p) == Value.cast(e0), "a pair on o is not the next decoded pair")]
    m.d.comb += Assert(coder.pending == (fc != 0), "pending is not 'pairs owed'")
    # Auxiliary invariants: the window as in window_queue, the pipeline's registers against the owed pairs.
    sq.invariants()
    m.d.comb += Assert(count <= NW, "inv: the window holds the queue")
    p_valid = pr.p_valid
    p_extra = Signal(K, name="p_extra")
    p_k = Signal(range(K + 1), name="p_k")
    m.d.comb += [p_k.eq(pr.p_need - pr.p_nb), p_extra.eq((pr.p_top << p_k)[K:2 * K])]
    p_pair = Cat(pr.p_symbol, p_extra)
    newest = Mux(fc == 2, Value.cast(e1), Value.cast(e0))
    m.d.comb += [Assert(fc == coder.o.valid + p_valid, "inv: the owed pairs are in o and the pair register"),
                 Assert(~coder.o.valid | (Value.cast(coder.o.p) == Value.cast(e0)), "inv: o holds the oldest owed pair"),
                 Assert(~p_valid | (p_pair == newest), "inv: the pair register holds the newest owed pair"),
                 Assert(~p_valid | (pr.p_need >= pr.p_nb) & (pr.p_need - pr.p_nb <= K), "inv: the pair's k"),
                 Assert(phase <= DECODE, "inv: a phase"),
                 Assert(~first | begun & (phase == SKIP) & (count == 0) & (nw == 0) & (sq.skip == 0),
                        "inv: waiting for the marker word"),
                 Assert(no_marker == (begun & (phase == SKIP) & ~first & (top == 0)), "inv: no marker"),
                 Assert(~(begun & (phase == SKIP)) | first | (count >= W) & (pr.marker_skip == mskip),
                        "inv: the marker word is held and its skip computed"),
                 Assert(begun | (count == 0) & (nw == 0) & (sq.skip == 0) & (phase == SKIP) & ~first,
                        "inv: before a stream")]
    fired = b.past(fire, "fired")
    b.cover(fire & fired & pop & (entry.need != 0), "pairs decoded back to back while one is taken")
    b.cover((fc == 2) & ~coder.o.ready & fired, "two pairs owed, held under back-pressure")
    b.cover(fire & coder.ended & (count < F) & (fc == 1), "a pair decoded at a stream's end from a partial field")
    from_top = Signal(name="from_top")                  # the current stream was started from its top
    wrote = Signal(name="wrote")                        # a table row was written before it
    with m.If(b.rst):
        m.d.past += [from_top.eq(0), wrote.eq(0)]
    with m.Elif(coder.start.valid):
        m.d.past += from_top.eq(~coder.start.p.resume)
    with m.If(cfg.valid):
        m.d.past += wrote.eq(1)
    b.cover(fire & from_top & wrote, "a pair decoded from a stream's top, after a table write")
    return b


def xn_decoder_pipeline_bench(core: str, mutant: str | None) -> Bench:
    """The two-state decoder's coder is the abstract two-state decoder over its word queue, for any
    history and timing (``decoder_pipeline`` of ``tans-decoder-x2``: the second link of its chain, after
    ``window_queue``).

    :class:`~ansforge.hdl.tans.TansXnDecoderCoder` of the small two-state decoder (``R = 5``, ``W = 8``,
    ``K = 2``) alone, its table arbitrary legal-shaped rows (``nb <= R``, ``nb <= need <= nb + K``,
    ``base`` with ``nb`` zero low bits; the memory's contents, :class:`TablePlatform`, no writes through
    ``cfg``) that change arbitrarily at every start and reset and hold in between: a write comes only
    while the shell is idle, and ``composition`` checks that no pair is decoded between a write and the
    next start, so every table a stream may meet is one of these; streams started in any clock from their top (the marker word, then
    ``X_0``, ``X_1``, ``R`` bits each) or resumed (the states through ``rstate``, lane ``rlane``, and ``bit``
    unread bits of the first word), words offered in any clock once a stream has started but not in a
    start's clock, ``run`` in any clock after the first start but not in a start's clock (the shell's, as
    ``composition`` checks), ``ended`` and ``o.ready`` free; streams not read past their end (no step
    without ``holds``: an ``Assume``; ``detection`` covers the rest) whose marker word is not zero.

    The harness keeps the window's word queue (as ``window_queue``), the read offset ``ofs`` (the bits
    of the oldest held word already read), the abstract lanes ``x0``, ``x1``, whose turn it is, the
    prologue's progress and the pairs decoded and not yet taken from ``o``. Each step of the coder (the
    window's ``step``) is the abstract decoder's next step: a prologue step reads the next ``R`` bits (or
    takes ``rstate``) into the next lane; a decoding step decodes the next ``need`` bits with the row of
    the lane whose turn it is (the first ``need - nb`` bits are the extra bits, the next ``nb`` give
    ``next = base | v``) and passes the turn. Asserted for every sequence: every step reads exactly the
    bits the abstract step reads (``pos`` is their end); the coder fires exactly the abstract decoding
    steps; every pair taken from ``o`` is the next abstract pair (none lost, none twice, in order, under
    any back-pressure); ``pending`` exactly while pairs are owed; ``rlane`` is the lane a resume's
    prologue fills; once decoding, ``state_zero`` exactly when both lanes are at state 0 and ``empty``
    exactly when no word is held. The coder's registers (:attr:`TansXnDecoderCoder.probe`) are tied to
    the abstract decoder by auxiliary assertions, so that the k-induction closes."""
    b = Bench(free_reset=True)
    m = b.m
    built = small_core(core)
    coder = built.coder
    unused_ok(built)                                    # only its coder is built
    R, W, K = len(coder.rstate), len(coder.i.payload), len(coder.o.p.extra)
    N = coder.states
    assert N == 2, N                                    # the ring below is T and xa: no E, no flight
    b.platform = TablePlatform()
    elayout = coder.cfg.p.data.shape()
    # The table: arbitrary from the first clock, and arbitrary again from the clock after every start
    # or reset (what a write while no stream runs can make of it: ``composition`` checks that no pair
    # is decoded between a write and the next start), so the invariants must come back at a start
    # whatever the new table is.
    rows = [Signal(elayout, name=f"dec_row{a}") for a in range(1 << R)]
    for a, r in enumerate(rows):
        kept = Signal(elayout, name=f"dec_row{a}_kept")
        m.d.comb += Value.cast(r).eq(Mux(b.started, kept, AnyConst(elayout.size)))
        m.d.past += Value.cast(kept).eq(Mux(coder.start.valid | b.rst, AnySeq(elayout.size), r))
    b.platform.contents["dec"] = [Value.cast(r) for r in rows]
    b.platform.frozen.add("dec")

    def legal(r):           # nb <= R, k = need - nb <= K, base with nb zero low bits
        return (r.nb <= R) & (r.need >= r.nb) & (r.need <= r.nb + K) & ((r.base & mask(r.nb, R)) == 0)
    for r in rows:
        m.d.comb += Assume(legal(r))
    m.submodules.coder = elaborated_block(coder)
    pr = coder.probe
    win = pr.window
    D = win.slots
    start, p = coder.start, coder.start.p
    m.d.comb += [start.valid.eq(AnySeq(1)), p.resume.eq(AnySeq(1)), p.bit.eq(AnySeq(len(p.bit))),
                 coder.rstate.eq(AnySeq(R)), coder.i.valid.eq(AnySeq(1)), coder.i.payload.eq(AnySeq(W)),
                 coder.run.eq(AnySeq(1)), coder.ended.eq(AnySeq(1)), coder.o.ready.eq(AnySeq(1)),
                 coder.cfg.valid.eq(0), Value.cast(coder.cfg.p).eq(0)]
    begun = Signal(name="begun")                        # a stream has been started
    with m.If(b.rst):
        m.d.past += begun.eq(0)
    with m.Elif(start.valid):
        m.d.past += begun.eq(1)
    # The shell's: no word and no run before the first stream or in a start's clock.
    m.d.comb += Assume(~(coder.i.valid | coder.run) | begun & ~start.valid)
    # The window's word queue (window_queue's model), driven by what the window is given and drops.
    wq = WordQueue(b, win)
    words, count, take, q = wq.words, wq.count, wq.take, wq.dropped
    DW = D * W
    held = Cat(*reversed(words))                        # the queue's bits, the oldest first (at the top)
    # No stream is read past its end: a step only with the bits it reads held (or in a start's clock,
    # where the start wins); the marker word is not zero (detection's).
    m.d.comb += Assume(~win.step | win.holds | start.valid)
    # The abstract decoder.
    first = Signal(name="abstract_waits_for_marker")
    hc = Signal(range(N + 1), name="abstract_prologue_steps")
    resume = Signal(name="abstract_resume")
    ofs = Signal(range(DW + 1), name="abstract_offset")  # bits of the oldest held word already read
    x = [Signal(R, name=f"abstract_x{j}") for j in range(N)]
    turn = Signal(range(N), name="abstract_turn")
    m.d.comb += Assume(~(first & take) | (coder.i.payload != 0))
    # This clock's step, as the abstract decoder makes it.
    at = Signal(DW, name="bits_at_offset")              # the queue's bits from the offset, at the top
    m.d.comb += at.eq((held << ofs)[:DW])
    cur = Signal(elayout, name="abstract_row")
    m.d.comb += Value.cast(cur).eq(Array([Value.cast(r) for r in rows])[Array(x)[turn]])
    field = Signal(R + K, name="abstract_field")        # the pair's need bits, right-aligned
    m.d.comb += field.eq(at >> (DW - cur.need).as_unsigned())
    extra = Signal(K, name="abstract_extra")
    v = Signal(R, name="abstract_state_bits")
    m.d.comb += [extra.eq(field >> cur.nb), v.eq(field & mask(cur.nb, R + K))]
    head = Signal(R, name="abstract_head_state")        # a prologue's state read from the stream
    m.d.comb += head.eq(at[DW - R:])
    decoding = Signal(name="abstract_decoding")
    m.d.comb += decoding.eq(begun & ~first & (hc == N))
    adv = Signal(range(R + K + 1), name="abstract_bits_read")
    m.d.comb += adv.eq(Mux(decoding, cur.need, Mux(resume, 0, R)))
    mskip = Signal(range(W + 1), name="abstract_marker_skip")
    for bit in range(W):
        with m.If(coder.i.payload[bit]):
            m.d.comb += mskip.eq(W - bit)
    pair_layout = data.StructLayout({"symbol": len(cur.symbol), "extra": K})
    expect = Signal(pair_layout, name="expected_pair")
    m.d.comb += [expect.symbol.eq(cur.symbol), expect.extra.eq(extra)]
    step = win.step & ~start.valid
    with m.If(b.rst):
        m.d.past += [first.eq(0), hc.eq(N), resume.eq(0), ofs.eq(0), turn.eq(0)]
    with m.Elif(start.valid):
        m.d.past += [first.eq(~p.resume), hc.eq(0), resume.eq(p.resume), turn.eq(0),
                     ofs.eq(Mux(p.resume & (p.bit != 0), W - p.bit, 0))]
    with m.Elif(first & take):
        m.d.past += [first.eq(0), ofs.eq(mskip)]
    with m.Elif(step):
        m.d.past += ofs.eq(ofs + adv - q * W)
        with m.If(decoding):
            m.d.past += [Array(x)[turn].eq(cur.base | v), turn.eq(turn + 1 if N > 2 else ~turn)]
        with m.Else():
            m.d.past += [hc.eq(hc + 1), Array(x)[hc[:len(turn)]].eq(Mux(resume, coder.rstate, head))]
    fire, pop = coder.fire, transfer_of(coder.o)
    e0, e1, fc = owed_pairs(b, pair_layout, fire, pop, expect)
    # The ports and the steps against the abstract decoder.
    with m.If(begun & ~start.valid):
        m.d.comb += [Assert(fire == (step & decoding), "the coder fires other than at the abstract decoding steps"),
                     Assert(~step | ~first, "a step before the stream's marker word")]
        with m.If(step):
            m.d.comb += Assert(win.pos == ofs + adv, "a step does not read exactly the abstract step's bits")
        with m.If(begun & resume & ~first & (hc != N)):
            m.d.comb += Assert(coder.rlane == hc[:len(coder.rlane)], "rlane is not the lane the resume fills next")
    with m.If(fire):
        m.d.comb += Assert((fc != 2) | pop, "a pair is decoded over one still owed")
    with m.If(pop):
        m.d.comb += [Assert(fc != 0, "a pair on o that was not decoded"),
                     Assert(Value.cast(coder.o.p) == Value.cast(e0), "a pair on o is not the next decoded pair")]
    m.d.comb += Assert(coder.pending == (fc != 0), "pending is not 'pairs owed'")
    with m.If(decoding):
        m.d.comb += [Assert(coder.state_zero == ((x[0] == 0) & (x[1] == 0)), "state_zero is not 'both lanes at 0'"),
                     Assert(coder.empty == (count == 0), "empty is not 'no word held'")]
    # Auxiliary invariants: the window against the queue, the ring and the pipeline against the abstract
    # decoder and the owed pairs.
    wq.invariants()
    m.d.comb += Assert(~wq.unknown, "inv: the queue is known (no read past the end)")
    T = pr.T
    m.d.comb += [Assert(pr.first == first, "inv: first"), Assert(~pr.overrun, "inv: no overrun"),
                 Assert(~pr.no_marker, "inv: no marker"),
                 Assert(pr.armed == (~begun | ~first), "inv: armed"),
                 Assert(pr.hd == (begun & (hc != N)), "inv: hd"),
                 Assert(~begun | (pr.hc == hc), "inv: hc"),
                 Assert(~begun | (pr.hm == (hc == 0)), "inv: hm"),
                 Assert(~begun | (pr.resume == resume), "inv: resume"),
                 Assert(~begun | (pr.hadv == Mux(resume, 0, R)), "inv: hadv"),
                 Assert(ofs <= W, "inv: the offset is within the oldest word"),
                 Assert((hc <= N) & (count <= D), "inv: the prologue count and the queue in range")]
    with m.If(begun & first):
        m.d.comb += Assert((count == 0) & (ofs == 0) & (pr.pos == 0) & ~resume & (hc == 0),
                           "inv: waiting for the marker word")
    with m.If(begun & (hc != N)):
        m.d.comb += Assert((T.nb == R) & (T.base == 0) & (turn == 0), "inv: a prologue's entry, lane 0 next")
    with m.If(begun & ~first & (hc != N)):
        m.d.comb += [Assert(pr.pos == ofs + Mux(resume, 0, R), "inv: a prologue's pos"),
                     Assert(resume | (ofs + R <= DW), "inv: a prologue's read in range")]
        with m.If(hc == 1):
            m.d.comb += Assert(pr.xa == x[0], "inv: the prologue's first state is in the ring")
    with m.If(decoding):
        other = Array(x)[~turn]
        m.d.comb += [Assert(Value.cast(T) == Value.cast(cur), "inv: T is the row of the lane whose turn it is"),
                     Assert(pr.xa == other, "inv: xa is the other lane's state"),
                     Assert(pr.pos == ofs + cur.need, "inv: pos is the current field's end"),
                     Assert(ofs < W, "inv: the offset is below a word"),
                     Assert(pr.zc == (Array(x)[turn] == 0), "inv: zc counts the current lane's zero state")]
    p_pair = Cat(pr.p_symbol, pr.p_top & thermometer(pr.p_k, K))
    newest = Mux(fc == 2, Value.cast(e1), Value.cast(e0))
    m.d.comb += [Assert(fc == coder.o.valid + pr.p_valid, "inv: the owed pairs are in o and the pair register"),
                 Assert(~coder.o.valid | (Value.cast(coder.o.p) == Value.cast(e0)), "inv: o holds the oldest owed pair"),
                 Assert(~pr.p_valid | (p_pair == newest), "inv: the pair register holds the newest owed pair"),
                 Assert(pr.p_k <= K, "inv: the pair's k")]
    fired = b.past(fire, "fired")
    b.cover(fire & fired & pop & (cur.need != 0), "pairs decoded back to back while one is taken")
    b.cover((fc == 2) & ~coder.o.ready & fired, "two pairs owed, held under back-pressure")
    b.cover(decoding & coder.state_zero & coder.empty & resume, "a resumed stream decoded to its end")
    b.cover(decoding & coder.state_zero & coder.empty & ~resume & b.past(fire, "fired_end"), "a stream from its top decoded to its end")
    return b


def composition_bench(core: str, mutant: str | None) -> Bench:
    """The lemmas' environments hold inside the core (``composition``): what each composition lemma of
    ``core`` assumes of the block beside it, asserted on the whole core, shell and coder wired as
    shipped, so that the chain of lemmas is joined by checked facts instead of an argument.

    The small core with every input free as in ``stream_rules`` (input streams obey the stream rules,
    table writes and resets in any clock); rANS decoder: a ``resume`` command's state is a legal
    checkpoint's (normalized, or the stream has no word). Asserted in every clock, per core:

    * every core: table writes reach the coder only while the shell is idle (the pipeline lemmas hold
      their table constant over a stream, or follow a write as a resume);
    * tANS decoder (``decoder_counts``, ``decoder_pipeline``): a pair is decoded only while the shell
      runs the coder and its prologue is over; no word reaches the coder before its first stream starts,
      and neither a word nor ``run`` in a start's clock (the interleaved coder's contract); the two-state
      decoder also: no pair between a table write and the next stream's start (its ``decoder_pipeline``
      changes its table only at starts and resets);
    * tANS encoder (``encoder_counts``, ``encoder_pipeline``): a pair enters only while the shell lets
      pairs through; ``flushed`` only while the flush is asked for; once asked for, the flush is held
      until ``flushed``, with no pair meanwhile but in the clock of ``flushed``; the two-state encoder
      also: while the shell is idle (the only time it passes table writes) no pair is in stage 1 and the
      ring's other lane is restarted (its ``encoder_pipeline`` reads the table nowhere else);
    * rANS encoder (``encoder_counts``, ``encoder_pipeline``): a pair enters only while the shell runs
      the coder; a word leaves only while the coder holds one; ``start``, ``run`` and ``flush`` one at a
      time; the sixteen-state encoder: an entry only while the shell runs the coder, the coder's
      ``run``, ``ghost`` and ``final`` the shell's, and no table write while it may take an entry;
    * rANS decoder (``decoder_counts``, ``decoder_pipeline``): a pair only while the shell runs the
      coder, and only after a state was loaded; no word and no pair in a load's clock; no word once
      ``ended``, which drops only in a load's clock or the next; decoding starts (the first pair after a load) from a
      normalized state or once the stream has no word left.

    k-induction where it closes, else bounded (depth 20)."""
    # (The rANS decoder on its baked pinned table, cfg idle: with table writes the bounded check took
    # 97 s, against CI's budget; its table-write gate is the encoder's ``_gate_cfg``, checked there.)
    b, dut, outs = free_core(core, mutant, elaborated=True, pinned=core == "rans-decoder")
    m = b.m
    shell, coder = b.dut_module.submodules.shell, b.dut_module.submodules.coder
    if core == "tans-encoder-x2":
        # Its coder's registers, with the core built around them as shipped (below: table writes).
        elaborated_inside(coder)
        elaborated_inside(coder.probe.ring)
    if core == "rans-decoder":
        sh = SMALL["rans"]
        lo = 1 << (sh["state_bits"] - sh["word_bits"])
        m.d.comb += Assume(~dut.cmd.valid | ~dut.cmd.p.resume | (dut.cmd.p.state >= lo) | (dut.cmd.p.words == 0))
    for port in ("cfg", "sym_cfg", "state_cfg"):
        if port in coder.signature.members:
            with m.If(getattr(coder, port).valid):
                m.d.comb += Assert(shell.idle, "a table write reaches the coder while the shell is not idle")
    if core in ("tans-decoder", "tans-decoder-x2"):
        begun = Signal(name="begun")
        with m.If(b.rst):
            m.d.past += begun.eq(0)
        with m.Elif(coder.start.valid):
            m.d.past += begun.eq(1)
        with m.If(coder.fire):
            m.d.comb += Assert(shell.run & coder.decoding, "a pair is decoded outside the shell's run or the prologue")
        if core == "tans-decoder-x2":           # its decoder_pipeline changes the table only at starts
            stale = Signal(name="table_written")        # a table write since the last stream's start
            with m.If(b.rst | coder.start.valid):
                m.d.past += stale.eq(0)
            with m.Elif(coder.cfg.valid):
                m.d.past += stale.eq(1)
            with m.If(coder.fire):
                m.d.comb += Assert(~stale, "a pair is decoded after a table write, before the next stream's start")
        with m.If(coder.i.valid):
            m.d.comb += Assert(begun, "a word reaches the coder before its first stream")
        with m.If(coder.start.valid):
            m.d.comb += Assert(~coder.i.valid & ~shell.run, "a word or a pair is asked for in a stream's start clock")
        b.cover(coder.fire & b.past(coder.fire, "fired"), "pairs back to back")
    elif core in ("tans-encoder", "tans-encoder-x2"):
        take = transfer_of(coder.i)
        asked = Signal(name="flush_asked")          # the flush is asked for and not yet flushed
        with m.If(b.rst):
            m.d.past += asked.eq(0)
        with m.Else():
            m.d.past += asked.eq((asked | coder.flush) & ~coder.flushed)
        with m.If(shell.pair):
            m.d.comb += Assert(shell.take, "a pair enters while the shell does not let pairs through")
        with m.If(shell.flushed):
            m.d.comb += Assert(shell.flush, "flushed while the flush is not asked for")
        with m.If(asked & ~b.rst):
            m.d.comb += Assert(coder.flush, "the flush is not held until flushed")
        with m.If(coder.flush & take):
            m.d.comb += Assert(coder.flushed, "a pair enters while the flush is asked for")
        if core == "tans-encoder-x2":
            # encoder_pipeline holds its table constant: a write comes only where none of its invariants
            # reads the table (no pair in stage 1, the ring's other lane restarted), so they hold on the
            # new table from the write on.
            pr, rp = coder.probe, coder.probe.ring.probe
            with m.If(shell.idle):
                m.d.comb += Assert(~(pr.v1 & ~pr.fl1 & ~pr.wr1) & rp.fresh,
                                   "the shell takes table writes while a pair or a lane's state depends on the table")
            m.d.comb += Assert((pr.fc == 0) | (coder.flush & pr.v1 & pr.fl1 & ~pr.end1),
                               "inv: a flush under way is asked for, its first step in stage 1")
        if core == "tans-encoder":
            b.cover(coder.flushed & take, "the next stream's first pair in the clock of flushed")
        else:                   # its coder takes no pair while the flush is asked for, flushed's clock included
            ended = Signal(name="stream_flushed")
            with m.If(b.rst):
                m.d.past += ended.eq(0)
            with m.Elif(coder.flushed):
                m.d.past += ended.eq(1)
            b.cover(ended & take, "a stream flushed, then the next one's first pair")
    elif core == "rans-encoder-x16":
        # encoder_counts: an entry only while the shell runs the coder; encoder_pipeline: the shell's
        # run, ghost and final are encoder_counts' (the same wires), and its table constant while an
        # entry may read it.
        with m.If(coder.step):
            m.d.comb += Assert(coder.run, "an entry enters while the shell does not run the coder")
        with m.If(coder.cfg.valid):
            m.d.comb += Assert(~coder.run, "a table write while the coder may take an entry")
        m.d.comb += [Assert((coder.run == shell.run) & (coder.ghost == shell.ghost) & (coder.final == shell.final),
                            "the coder's run, ghost and final are not the shell's")]
        b.cover(coder.step & coder.final & dut.cmd.valid & dut.cmd.ready, "a command accepted with the last entry")
    elif core == "rans-decoder-x5":
        # decoder_pipeline's environment: ended never in the clock after a word of stage 5's stream was
        # taken, and a skip port word only while no word of its stream is buffered.
        take = transfer_of(coder.i)
        took = b.past(take & ~b.rst, "took")
        took_tag = b.past(coder.i.p.tag, "took_tag")
        with m.If(coder.ended & took & ~b.p_rst):
            m.d.comb += Assert(took_tag != coder.pair_tag, "ended in the clock after a word of stage 5's stream was taken")
        with m.If(take & coder.i.p.skip):
            m.d.comb += Assert(~holds_offered_stream(coder), "a skip port word comes while a word of its stream is buffered")
        with m.If(coder.step):
            m.d.comb += Assert(coder.run, "a pair enters the ring while the shell does not run the coder")
        b.cover(take & coder.i.p.skip & coder.held.any(), "an odd stream's first body port word behind another stream's words")
    elif core == "rans-encoder":
        with m.If(coder.step):
            m.d.comb += Assert(coder.run, "a pair enters while the shell does not run the coder")
        with m.If(transfer_of(coder.o)):
            m.d.comb += Assert(coder.held != 0, "a word leaves while the coder holds none")
        m.d.comb += Assert((coder.start + coder.run + coder.flush) <= 1, "start, run and flush at once")
        b.cover(coder.step & b.past(coder.flush, "flushing"), "a pair in the clock after a flush word (back to back)")
    else:
        with m.If(coder.step):
            m.d.comb += Assert(coder.run, "a pair is decoded while the shell does not run the coder")
        with m.If(coder.load):
            m.d.comb += Assert(~coder.i.valid & ~coder.run, "a word or a pair in a load's clock")
        with m.If(coder.ended):
            m.d.comb += Assert(~coder.i.valid, "a word reaches the coder after the stream's end")
        loaded, fresh, kept = load_tracker(b, coder)
        with m.If(coder.run):
            m.d.comb += Assert(loaded, "a pair is asked for before any state was loaded")
        with m.If(coder.run & fresh):
            m.d.comb += Assert((coder.state >= lo) | (coder.ended & ~coder.buffered),
                               "decoding starts from a state below 2**(S - W) while words remain")
        with m.If(kept):
            m.d.comb += Assert(coder.ended, "ended drops without a load")
        b.cover(coder.step & coder.ended & ~coder.buffered, "a pair decoded after the stream's last word")
    return b
