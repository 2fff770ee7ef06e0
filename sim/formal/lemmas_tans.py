"""The tANS cores' queue and count lemmas of the composition (``window_queue``, ``packer_queue``,
``encoder_counts``, ``decoder_counts``; ``docs/formal.md``, Round 7). The rANS cores' counts are dispatched
to :mod:`.lemmas_rans`; the step lemmas are :mod:`.lemmas_tans_step`'s.
"""

from __future__ import annotations

from amaranth.hdl import Array, Assert, Assume, Cat, Const, Module, Mux, Signal, Value
from amaranth.hdl._ast import AnySeq

from ...hdl.common import DecodeStatus
from ...hdl.shell import DecoderShell, EncoderShell
from ...hdl.tans import BitWindow, PairWindow
from ...hdl.tans.packer import WordPacker
from .params import SMALL, small_core
from .benches import Bench, CommandLedger, elaborated_block, mask, top_mask, transfer_of, unused_ok
from .lemmas_rans import rans_decoder_counts_bench, rans_encoder_counts_bench


class ShadowQueue:
    """The bit queue a :class:`~ansforge.hdl.tans.BitWindow` must behave as (``window_queue``'s model,
    also ``decoder_pipeline``'s), driven by what the window is given and read: ``queue`` holds the bits
    taken and not yet read, the next bit at the top (bit ``QW - 1``), ``count`` how many, ``skip`` the
    bits of the next word already read (a clear with ``clear_off != 0`` and no word in its clock);
    ``take`` is the window's word transfer. :meth:`invariants` ties the window's registers
    (:attr:`BitWindow.probe`) to it, so that a k-induction over a harness holding it closes."""

    def __init__(self, b: "Bench", win, QW: int):
        m, W = b.m, len(win.i.payload)
        self._m, self._win, self._QW, self._W = m, win, QW, W
        self.queue = queue = Signal(QW, name="queue")
        self.count = count = Signal(range(QW + 1), name="queue_count")
        self.skip = skip = Signal(range(W), name="queue_skip")
        self.take = take = transfer_of(win.i)
        lead = Signal(range(W), name="word_skip")           # bits of the taken word already read
        m.d.comb += lead.eq(Mux(win.clear, win.clear_off, skip))
        word = Signal(QW, name="word_at_top")
        m.d.comb += word.eq(Cat(Const(0, QW - W), (win.i.payload << lead)[:W]))
        kept = Signal(range(QW + 1), name="kept")           # bits left after this clock's read (or clear)
        m.d.comb += kept.eq(Mux(win.clear, 0, count - win.n))
        rest = Signal(QW, name="queue_rest")
        m.d.comb += rest.eq(Mux(win.clear, 0, (queue << win.n)[:QW]))
        with m.If(b.rst):
            m.d.past += [queue.eq(0), count.eq(0), skip.eq(0)]
        with m.Else():
            m.d.past += [queue.eq(rest | Mux(take, word >> kept, 0)), count.eq(kept + Mux(take, W - lead, 0)),
                         skip.eq(Mux(take, 0, lead))]

    def invariants(self) -> None:
        """Assert the window's registers against the queue (each message starts with ``inv:``)."""
        m, W, QW = self._m, self._W, self._QW
        queue, count, skip = self.queue, self.count, self.skip
        slots, nw, hole, off = (self._win.probe.slots, self._win.probe.nw, self._win.probe.hole,
                                self._win.probe.off)
        N = len(slots)
        NW = N * W
        held = Signal(NW, name="window_words")              # the held words, the oldest at the top
        m.d.comb += held.eq(Mux(hole, Cat(Const(0, W), *reversed(slots[1:])), Cat(*reversed(slots))))
        m.d.comb += [Assert(nw + hole <= N, "inv: nw + hole <= N"), Assert(~hole | (nw != 0), "inv: a hole has a word"),
                     Assert((queue & ~top_mask(count, QW)) == 0, "inv: the queue is zero below its bits")]
        with m.If(nw == 0):
            m.d.comb += Assert((count == 0) & (skip == off), "inv: an empty window's offset is the pending skip")
        with m.Else():
            m.d.comb += [Assert(skip == 0, "inv: no pending skip while words are held"),
                         Assert(count == nw * W - off, "inv: count = nw W - off"),
                         Assert(((Value.cast(held << off)[:NW] ^ queue[QW - NW:]) & top_mask(count, NW)) == 0,
                                "inv: the held words are the queue")]


class WordQueue:
    """The queue of words a :class:`~ansforge.hdl.tans.PairWindow` must behave as (``window_queue``'s
    model of the two-state decoder, also its ``decoder_pipeline``'s), driven by what the window is given
    and drops: ``words`` the words taken and not consumed, the oldest first, ``count`` how many; a clear
    empties it (a word in the clear's clock is then its first), a step drops the ``pos // W`` oldest
    words (``dropped``), a word taken (``take``) joins at the end. A step without ``holds`` (a read past
    the stream's end) makes it ``unknown`` until the next clear. :meth:`invariants` ties the ring's
    registers (:attr:`PairWindow.probe`) to it, so that a k-induction over a harness holding it closes."""

    def __init__(self, b: "Bench", win):
        m, W, D = b.m, len(win.i.payload), len(win.probe.slots)
        self._m, self._win = m, win
        self.words = words = [Signal(W, name=f"queue_word{c}") for c in range(D)]
        self.count = count = Signal(range(D + 1), name="queue_count")
        self.unknown = unknown = Signal(name="queue_unknown")
        self.take = take = transfer_of(win.i)
        self.dropped = q = Signal(range(D + 1), name="words_dropped")    # none without a step
        m.d.comb += q.eq(Mux(win.step, win.pos // W, 0))
        kept = Signal(range(D + 1), name="queue_kept")
        m.d.comb += kept.eq(count - q)
        with m.If(b.rst):
            m.d.past += [count.eq(0), unknown.eq(0)]
        with m.Elif(win.clear):
            m.d.past += [count.eq(take), unknown.eq(0), words[0].eq(win.i.payload)]
        with m.Elif(win.step & ~win.holds):
            m.d.past += unknown.eq(1)
        with m.Else():
            # the kept words moved up by q, then the word taken behind them
            m.d.past += count.eq(kept + take)
            for c in range(D):
                moved = Array(words + [Const(0, W)] * D)[c + q]
                m.d.past += words[c].eq(Mux(take & (kept == c), win.i.payload, moved))

    def invariants(self) -> None:
        """Assert the ring's registers against the queue while it is known (messages start with ``inv:``)."""
        m, pr = self._m, self._win.probe
        slots, nw, rp, wp = pr.slots, pr.nw, pr.rp, pr.wp
        with m.If(~self.unknown):
            m.d.comb += [Assert(nw == self.count, "inv: nw is the queue's count"),
                         Assert(wp == (rp + nw)[:len(wp)], "inv: wp follows the newest word")]
            for c, word in enumerate(self.words):
                with m.If(c < self.count):
                    m.d.comb += Assert(Array(slots)[(rp + c)[:len(rp)]] == word, f"inv: the ring's word {c} is the queue's")


def window_queue_bench(core: str, mutant: str | None) -> Bench:
    """The decoder's bit window is a bit queue (``window_queue``, condition 2 of the composition).

    :class:`~ansforge.hdl.tans.BitWindow` of the small tANS decoder (``W = 8``, fields of
    ``F = R + K = 7`` bits) alone, every input free: a word offered or not in any clock, any payload,
    clears in any clock with any ``clear_off``, resets in any clock, and any read ``n`` that the
    coder may make (``n <= max(F, W)``, at most the bits held, none while ``hole`` or in a clear's
    clock: the coder's steps wait for ``~hole`` and are blocked by ``start``). The harness keeps the
    abstract queue (``queue``: the bits taken and not yet read, the next one at the top; ``count``;
    ``skip``: the bits of the next word already read, after a clear with ``clear_off`` and no word)
    and asserts in every clock, for every sequence: ``bits`` is the count (except while the window is
    empty with a pending skip, where it wraps: see the assertion); outside a ``hole``, the
    top ``min(count, F)`` bits of ``field`` are the queue's; ``full`` is ``~hole & count >= F``; the
    window takes a word whenever it holds fewer than ``F`` bits; a hole lasts one clock. The window's
    registers (``slots``, ``nw``, ``hole``, ``off``: :attr:`BitWindow.probe`) are tied to the queue
    by auxiliary assertions, so that the k-induction closes."""
    if core == "tans-decoder-x2":
        return pair_window_queue_bench(core, mutant)
    b = Bench(free_reset=True)
    m = b.m
    sh = SMALL["tans"]
    W, F = sh["word_bits"], sh["table_log"] + sh["max_extra_bits"]
    win = BitWindow(W, F)
    m.submodules.window = win
    slots, nw, off = win.probe.slots, win.probe.nw, win.probe.off
    N = len(slots)
    NW = N * W
    QW = NW + W                                         # room for a word too many (an overflow shows)
    n_max = max(F, W)
    m.d.comb += [win.i.valid.eq(AnySeq(1)), win.i.payload.eq(AnySeq(W)), win.clear.eq(AnySeq(1)),
                 win.clear_off.eq(AnySeq(len(win.clear_off))), win.n.eq(AnySeq(len(win.n)))]
    sq = ShadowQueue(b, win, QW)
    queue, count, skip, take = sq.queue, sq.count, sq.skip, sq.take
    # The reads the coder makes: within the queue, none while a hole is shifted out or in a clear's clock.
    m.d.comb += Assume((win.n <= n_max) & (win.n <= count) & ~((win.hole | win.clear) & (win.n != 0)))

    # The queue, as the coder sees it through the ports.
    seen = Signal(range(F + 1), name="field_valid_bits")
    m.d.comb += seen.eq(Mux(count >= F, F, count))
    # ``bits`` is ``nw W - off``: in the one state where the window is empty with a pending skip (a
    # clear with ``clear_off != 0`` and no word in its clock, until the next word) it is ``-off`` modulo
    # its width, not 0 (found by this lemma; docs/formal.md, Round 7): asserted everywhere else.
    m.d.comb += Assert((win.bits == count) | ((count == 0) & (skip != 0)), "bits is not the number of bits held")
    with m.If(~win.hole):
        m.d.comb += Assert(((win.field ^ queue[QW - F:]) & top_mask(seen, F)) == 0,
                           "the field's bits are not the queue's next bits")
    m.d.comb += Assert(win.full == (~win.hole & (count >= F)), "full is not 'no hole and at least F bits'")
    with m.If(count < F):
        m.d.comb += Assert(win.i.ready, "the window refuses a word while it holds fewer than F bits")
    m.d.comb += Assert(count <= NW, "the window took more bits than it holds")
    with m.If(b.started & ~b.p_rst & b.past(win.hole & ~(win.clear & take), "window_hole")):
        m.d.comb += Assert(~win.hole, "a hole lasts more than one clock")
    # Auxiliary invariants (the window's registers against the queue): they make the induction close.
    sq.invariants()
    # Covers: a word taken behind a word, and a read across two words; a clear with a word in its clock.
    b.cover(b.started & (count > W) & ~win.hole & (off + win.n > W) & take, "a read across two words while a word is taken")
    b.cover(b.started & win.clear & take & (nw >= 1), "a clear that drops words, with a word in its clock")
    return b


def pair_window_queue_bench(core: str, mutant: str | None) -> Bench:
    """The interleaved decoder's bit window is a queue of words (``window_queue`` of ``tans-decoder-x2``,
    the first link of its composition, as :func:`window_queue_bench` is the one-state decoder's).

    :class:`~ansforge.hdl.tans.PairWindow` exactly as the small two-state decoder builds it (``W = 8``,
    ``P = W + max(R + K - 1, R) = 14``, head bits ``H = max(R, K)``, tail bits ``T = R``: a ring of
    ``D = 2`` slots) alone, every input free: a word offered or not in any clock, any payload, any field
    end ``pos`` and head end ``hend`` (``<= P``), a step and a clear in any clock (with any
    ``clear_off``), resets in any clock. The harness keeps the abstract queue: the words taken and not
    consumed, the oldest first (``queue_words``, ``queue_count``). A clear empties it (a word in the
    clear's clock is then its first); a step drops the ``pos // W`` oldest words; a word taken joins at
    the end. Its bits in stream order are bit ``W - 1`` of the oldest word first.

    A step without ``holds`` is the coder's read past the stream's end (the coder reports it: its
    ``starved``); the window promises nothing after it until the next clear, and the harness marks the
    queue ``unknown`` until then. Otherwise it asserts in every clock, for every sequence: ``empty`` is
    "no word held", ``room`` "fewer than ``D`` words", ``i.ready`` "room, or a step that drops a word";
    ``holds`` is ``pos <= count W``; every bit of ``tail`` (``head``) at a stream position below
    ``pos`` (``hend``) and inside the held words is the queue's bit there. The ring's registers
    (:attr:`PairWindow.probe`: ``nw``, ``rp``, ``wp`` and the slots) are tied to the queue by auxiliary
    assertions, so that the k-induction closes."""
    b = Bench(free_reset=True)
    m = b.m
    built = small_core(core)
    coder = built.coder
    unused_ok(built, coder)                             # only its window is built
    # (the window's parameters from the coder's ports: R-bit states, W-bit words, K extra bits)
    R, W, K = len(coder.rstate), len(coder.i.payload), len(coder.o.p.extra)
    P, H, T = coder.pos_max, max(R, K, 1), R
    win = PairWindow(W, P, H, T)
    m.submodules.window = elaborated_block(win)
    D = win.slots
    m.d.comb += [win.i.valid.eq(AnySeq(1)), win.i.payload.eq(AnySeq(W)), win.step.eq(AnySeq(1)),
                 win.clear.eq(AnySeq(1)), win.clear_off.eq(AnySeq(len(win.clear_off))),
                 win.pos.eq(AnySeq(len(win.pos))), win.hend.eq(AnySeq(len(win.hend))),
                 Assume((win.pos <= P) & (win.hend <= P))]
    wq = WordQueue(b, win)
    words, count, unknown, take, q = wq.words, wq.count, wq.unknown, wq.take, wq.dropped

    stream_bits = Cat(*[words[c][W - 1 - j] for c in range(D) for j in range(W)])   # position p at bit p
    held = Signal(range(D * W + 1), name="held_bits")
    m.d.comb += held.eq(count * W)

    def bits_before(end, port, what):
        for i in range(len(port)):
            at = Signal(range(-1 - len(port), P + 1), name=f"{what}_bit{i}_at")
            m.d.comb += at.eq(end - 1 - i)
            with m.If(~unknown & (at >= 0) & (at < held)):
                m.d.comb += Assert(port[i] == stream_bits.bit_select(at[:len(held)], 1),
                                   f"{what} bit {i} is not the stream's bit before the {what}'s end")

    with m.If(~unknown):
        m.d.comb += [Assert(win.empty == (count == 0), "empty is not 'no word held'"),
                     Assert(win.room == (count != D), "room is not 'fewer than D words held'"),
                     Assert(win.i.ready == ((count != D) | (q != 0)), "ready is not 'room, or a step that drops a word'"),
                     Assert(win.holds == (win.pos <= held), "holds is not 'pos within the held words'")]
    # Auxiliary invariants: the ring against the queue.
    wq.invariants()
    bits_before(win.pos, win.tail, "tail")
    bits_before(win.hend, win.head, "head")
    # Covers: a full ring that takes a word in the clock a step frees a slot; a clear that drops words,
    # with a word in its clock.
    b.cover(~unknown & (count == D) & win.step & (q != 0) & take, "a full ring takes a word as a step drops one")
    b.cover(~unknown & win.clear & take & (count != 0), "a clear that drops words, with a word in its clock")
    return b


def packer_field(m: Module, F: int, bits, skip, lt, last, name: str):
    """A :class:`~ansforge.hdl.tans.packer.WordPacker` field as its ports document it: ``len = last + 1 -
    lt`` bits (modulo ``last``'s width) of ``bits`` (``F`` bits) from bit ``skip + lt``. Returns its length,
    its value (at bit 0) and whether it is legal (at most ``F`` bits, within ``bits``, every other bit 0)."""
    n = Signal(len(last), name=f"{name}_len")
    v = Signal(F, name=f"{name}_value")
    ok = Signal(name=f"{name}_legal")
    m.d.comb += [n.eq(last + 1 - lt), v.eq((bits >> (skip + lt)) & mask(n, F)),
                 ok.eq((n <= F) & (skip + lt + n <= F) & ((bits & ~(mask(n, F) << (skip + lt))[:F]) == 0))]
    return n, v, ok


def packer_queue_bench(core: str, mutant: str | None) -> Bench:
    """The interleaved encoder's word packer is a queue of bits (``packer_queue`` of ``tans-encoder-x2``,
    the first link of its composition, as :func:`pair_window_queue_bench` is the decoder's).

    :class:`~ansforge.hdl.tans.packer.WordPacker` exactly as the small two-state encoder builds it
    (``W = 8``, fields of ``F = max(R + K, R) = 7`` bits) alone: a field offered or not in any clock,
    ``o.ready`` free, resets in any clock. A field is what the coder's stage 1 gives (its contract,
    assumed): ``len = last + 1 - lt`` bits (modulo ``last``'s width, at most ``F``) of ``bits`` from bit
    ``skip + lt``, within ``F`` bits, every other bit of ``bits`` 0. The harness keeps the stream as a
    queue of bits taken and not yet on a word taken from ``o`` (the oldest at bit 0) and the words that
    end a stream: a field joins at the end; an ``end`` field is followed by the marker bit (``1``) and
    zeros up to the word's end, and that word is marked. Asserted for every sequence: every word taken
    from ``o`` is the queue's next ``W`` bits, ``last`` exactly on a marked word. The packer's registers
    (:attr:`WordPacker.probe`: its input register, ``mk3``, the accumulator and its count) are tied to the
    queue by auxiliary assertions, so that the k-induction closes."""
    b = Bench(free_reset=True)
    m = b.m
    built = small_core(core)
    coder = built.coder
    unused_ok(built, coder)                             # only its packer is built
    W, F = coder.accumulator_bits, coder.field_bits
    pk = WordPacker(W, F)
    m.submodules.packer = elaborated_block(pk)
    pr = pk.probe
    m.d.comb += [pk.i.valid.eq(AnySeq(1)), pk.i.p.eq(AnySeq(len(Value.cast(pk.i.p)))), pk.o.ready.eq(AnySeq(1))]
    lw = W.bit_length() - 1                             # W is a power of two here
    QB, QW = 5 * W, 5                                   # the queue: more than the packer holds

    def field(bits, skip, lt, last, name):
        return packer_field(m, F, bits, skip, lt, last, name)

    def round_up(v, name):
        """``v`` rounded up to a word's end, and the index of the word that ends there (its flag)."""
        r = Signal(len(v) + 1, name=name)
        word = Signal(range(QW), name=f"{name}_word")
        flag = Signal(QW, name=f"{name}_flag")
        m.d.comb += [r.eq(((v + W - 1) >> lw) << lw), word.eq((r >> lw) - 1), flag.eq(Const(1, QW) << word)]
        return r, flag

    p = pk.i.p
    n_in, v_in, ok_in = field(p.bits, p.skip, p.lt, p.last, "in")
    m.d.comb += Assume(~pk.i.valid | ok_in)
    queue = Signal(QB, name="queue")                    # bits taken, not yet on a word taken from o
    qlen = Signal(range(QB + 1), name="queue_len")
    ends = Signal(QW, name="queue_last_words")          # bit j: the queue's word j ends a stream
    take, out = transfer_of(pk.i), transfer_of(pk.o)
    q1, l1, e1 = Signal(QB, name="queue_after_word"), Signal(range(QB + 1), name="len_after_word"), \
        Signal(QW, name="ends_after_word")
    m.d.comb += [q1.eq(Mux(out, queue >> W, queue)), l1.eq(Mux(out, qlen - W, qlen)), e1.eq(Mux(out, ends >> 1, ends))]
    joined = Signal(range(QB + 2), name="len_with_field")
    m.d.comb += joined.eq(l1 + n_in)
    padded, padded_flag = round_up(joined + 1, "len_with_end")     # the marker, then zeros to the word's end
    with m.If(b.rst):
        m.d.past += [queue.eq(0), qlen.eq(0), ends.eq(0)]
    with m.Elif(take & p.end):
        m.d.past += [queue.eq(q1 | ((v_in | (Const(1, F + 1) << n_in)) << l1)[:QB]), qlen.eq(padded),
                     ends.eq(e1 | padded_flag)]
    with m.Elif(take):
        m.d.past += [queue.eq(q1 | (v_in << l1)[:QB]), qlen.eq(joined), ends.eq(e1)]
    with m.Else():
        m.d.past += [queue.eq(q1), qlen.eq(l1), ends.eq(e1)]
    with m.If(out):
        m.d.comb += [Assert(qlen >= W, "a word before the stream has its bits"),
                     Assert(pk.o.p.data == queue[:W], "a word is not the queue's next bits"),
                     Assert(pk.o.p.last == ends[0], "last does not mark a stream's last word")]
    m.d.comb += Assert(qlen <= QB - 2 * W, "the queue overflows (a word is not taken out)")
    # Auxiliary invariants: the packer's registers against the queue.
    n3, v3f, ok3 = field(pr.bits3, pr.skip3, pr.lt3, pr.last3, "held")
    olen = Signal(range(W + 1), name="o_len")
    m.d.comb += olen.eq(Mux(pk.o.valid, W, 0))
    marker = Signal(name="marker_owed")                 # the end field's marker not yet in bits3
    m.d.comb += marker.eq(pr.v3 & pr.end3 & ~pr.mk3)
    held = Signal(range(QB + 1), name="held_len")
    m.d.comb += held.eq(olen + pr.cnt + Mux(pr.v3, n3 + marker, 0))
    held_end, held_flag = round_up(held, "held_len_padded")
    model = Signal(QB, name="pipeline_bits")
    m.d.comb += model.eq(Mux(pk.o.valid, pk.o.p.data, 0) | ((pr.acc & mask(pr.cnt, W)) << olen)[:QB]
                         | Mux(pr.v3, (v3f | (marker << n3)) << (olen + pr.cnt), 0)[:QB])
    model_ends = Signal(QW, name="pipeline_last_words")
    m.d.comb += model_ends.eq((pk.o.valid & pk.o.p.last)
                              | Mux(pr.v3 & pr.end3, held_flag, 0))
    m.d.comb += [Assert(queue == model, "inv: the queue is o, the accumulator and the input register's field"),
                 Assert(qlen == Mux(pr.v3 & pr.end3, held_end, held), "inv: the queue's length"),
                 Assert(ends == model_ends, "inv: the stream ends are o's and the input register's"),
                 Assert(~pr.v3 | ok3, "inv: the input register holds a legal field"),
                 Assert(~(pr.v3 & pr.mk3) | (pr.end3 & (n3 == 1) & (v3f == 1)), "inv: the marker field follows an end"),
                 Assert(~pk.o.valid | pk.o.p.last | ~(pr.v3 & pr.end3) | (held_end > W), "inv: a word not last"),
                 Assert((queue >> qlen) == 0, "inv: the queue is zero above its bits")]
    b.cover(out & take & pr.v3 & (pr.cnt != 0), "a word taken while a field enters and one is held")
    b.cover(out & pk.o.p.last & take, "a stream's last word taken as the next stream's first field enters")
    return b


def encoder_counts_bench(core: str, mutant: str | None) -> Bench:
    """The encoder shell's counts for every ``N`` (``encoder_counts``, condition 3 of the composition;
    the rANS encoder's: :func:`rans_encoder_counts_bench`).

    :class:`~ansforge.hdl.shell.EncoderShell` of the small tANS encoder (3-bit counts) alone, its
    coder's side free: ``pair`` (a pair enters the coder) in any clock where the shell lets pairs
    through (``take``: in the core ``pair`` is ``i``'s transfer, whose ``ready`` includes ``take``),
    ``flushed`` (the coder's last word leaves) in any clock where it asks for the flush (the coder
    flushes only then), commands of any count offered in any clock, resets in any clock. The harness
    keeps the command's count ``N`` and the pairs ``k`` taken since it was accepted, and asserts for
    every sequence: pairs pass exactly while ``k < N`` (``take``; in the accepting clock, which may be
    the previous command's ``flushed`` clock, ``N != 0``),
    the flush is asked for exactly when ``k = N``, a command is accepted exactly when idle or in the
    clock of ``flushed``, and ``done`` is high exactly in the clock after ``flushed``. With the
    invariant ``remaining = N - k`` in ``RUN`` (the shell's registers,
    :attr:`~ansforge.hdl.shell.EncoderShell.probe`) the k-induction closes."""
    if core == "rans-encoder":
        return rans_encoder_counts_bench(core, mutant)
    b = Bench(free_reset=True)
    m = b.m
    bits = 3                                            # small_core's count_bits
    # The shell as the small core builds it (one layout for every N: the command is its count).
    built = small_core(core)
    unused_ok(built, built.coder)                       # only its shell is built
    shell = EncoderShell(built.cmd.p.shape())
    m.submodules.shell = elaborated_block(shell)
    remaining, running = shell.probe.remaining, shell.probe.running
    m.d.comb += [shell.cmd.valid.eq(AnySeq(1)), shell.cmd.p.count.eq(AnySeq(bits)), shell.pair.eq(AnySeq(1)),
                 shell.flushed.eq(AnySeq(1)), Assume(~shell.pair | shell.take), Assume(~shell.flushed | shell.flush)]
    busy = Signal(name="busy")                          # a command accepted, its flush not yet done
    N = Signal(bits, name="command_count")
    k = Signal(bits, name="pairs_taken")
    accept = transfer_of(shell.cmd)
    with m.If(b.rst):
        m.d.past += [busy.eq(0), N.eq(0), k.eq(0)]
    with m.Elif(accept):
        m.d.past += [busy.eq(1), N.eq(shell.cmd.p.count), k.eq(shell.pair)]
    with m.Else():
        with m.If(shell.flushed):
            m.d.past += busy.eq(0)
        with m.If(shell.pair):
            m.d.past += k.eq(k + 1)
    first = shell.cmd.valid & (shell.cmd.p.count != 0)     # the accepted command's first pair may pass
    with m.If(busy):
        # In the clock of ``flushed`` the next command is accepted: ``take`` is then for its first pair.
        m.d.comb += [Assert(shell.take == Mux(shell.flushed, first, k != N),
                            "pairs are not let through exactly while fewer than N are taken"),
                     Assert(shell.flush == (k == N), "the flush is not asked for exactly after the N-th pair"),
                     Assert(shell.cmd.ready == shell.flushed, "a command is accepted before the flush is done")]
    with m.Else():
        m.d.comb += [Assert(shell.take == first, "an idle shell lets pairs through other than the accepted command's first"),
                     Assert(~shell.flush, "an idle shell asks for a flush"),
                     Assert(shell.cmd.ready & (shell.idle == ~shell.cmd.valid), "an idle shell refuses a command")]
    done_due = b.past(busy & shell.flushed & ~b.rst, "done_due")
    m.d.comb += Assert(shell.done == done_due, "done is not the clock after the flush")
    # Auxiliary invariant: the count register against the harness's.
    m.d.comb += [Assert(running == busy, "inv: RUN exactly while a command is busy")]
    with m.If(busy):
        m.d.comb += Assert(remaining == N - k, "inv: remaining = N - k")
    b.cover(busy & (N == (1 << bits) - 1) & shell.flushed, "a command of the largest count flushed")
    b.cover(busy & shell.flushed & accept & (shell.cmd.p.count != 0) & shell.pair,
            "back to back: the next command and its first pair in the clock of the flush")
    return b


def decoder_counts_bench(core: str, mutant: str | None) -> Bench:
    """The decoder shell's counts for every ``N`` (``decoder_counts``, condition 3 of the composition;
    the rANS decoder's: :func:`rans_decoder_counts_bench`).

    :class:`~ansforge.hdl.shell.DecoderShell` of the small tANS decoder (3-bit counts, no CRC) alone,
    its coder's side free: ``fire`` in any clock where the shell asks for pairs (``run``) and the coder
    is past its prologue (``decoding``; both are what the coder's ``fire`` requires), every other
    coder output (``decoding``, ``starved``, ``no_marker``, the end-check facts, ``out_valid``) and
    ``words.ready`` free in every clock, commands and words offered in any clock, resets in any clock.
    The harness keeps, per command, its counts ``N`` and ``Nw``, the pairs ``k`` decoded and the words
    ``t`` taken since it was accepted, the commands not yet reported, and which of them decoded all
    its pairs. Asserted for every sequence: ``run`` only while ``k < N``, and while the command runs
    with ``k < N`` and no report held, ``run`` is high (no early stop); the command's words go to
    the coder one for one, none in the clock the command is accepted, and no word beyond ``Nw`` is
    taken (``ended`` exactly when ``t = Nw``), every word offered while ``t < Nw`` passes when the
    coder takes it; one ``done`` per command
    accepted (never more; at most two owed besides one whose ``done`` is high), and ``done`` with
    status ``OK`` only for a command that decoded exactly ``N`` pairs. The shell's counters are tied to the harness's by auxiliary
    assertions (:attr:`~ansforge.hdl.shell.DecoderShell.probe`), so that the k-induction closes."""
    if core == "rans-decoder":
        return rans_decoder_counts_bench(core, mutant)
    b = Bench(free_reset=True)
    m = b.m
    bits, sh = 3, SMALL["tans"]                         # small_core's count_bits
    # The shell as the small core builds it: its command carries the N states of a resume (N R bits;
    # R for the one-state decoder), and no CRC unit.
    built = small_core(core)
    unused_ok(built, built.coder)                       # only its shell is built
    shell = DecoderShell(built.cmd.p.shape(), sh["word_bits"], block_crc=False)
    m.submodules.shell = elaborated_block(shell)
    pr = shell.probe
    for port in (shell.cmd.valid, shell.cmd.p, shell.i.valid, shell.i.p, shell.words.ready, shell.fire,
                 shell.decoding, shell.starved, shell.no_marker, shell.final_state_zero, shell.window_empty,
                 shell.out_valid):
        m.d.comb += port.eq(AnySeq(len(Value.cast(port))))
    m.d.comb += Assume(~shell.fire | (shell.run & shell.decoding))
    accept, take, fed = transfer_of(shell.cmd), transfer_of(shell.i), transfer_of(shell.words)
    due = pr.reporting & ~shell.out_valid           # the shell's done comes in the next clock
    led = CommandLedger(b, bits, shell.cmd, take, shell.fire, shell.done, pr.finishing, due)
    N, Nw, k, t, pend_full = led.N, led.Nw, led.k, led.t, led.pend_full
    running = pr.run & ~accept                       # the clock belongs to the running command
    with m.If(shell.run):
        m.d.comb += Assert(pr.run & (k != N), "run is high while the command has no pairs left")
    with m.If(running & (k != N) & shell.decoding & ~(pr.reporting & shell.out_valid)):
        m.d.comb += Assert(shell.run, "run is low while the command has pairs left")
    with m.If(~pr.idle & ~accept):
        m.d.comb += Assert(shell.ended == (t == Nw), "ended is not 'every word of the command taken'")
    with m.If(take & ~accept):
        m.d.comb += Assert(~pr.idle & (t != Nw), "a word beyond the command's is taken")
    with m.If(running):
        m.d.comb += [Assert(fed == take, "a word of the command does not go to the coder"),
                     Assert(shell.i.ready == (shell.words.ready & (t != Nw)), "a word the coder takes is not taken")]
    with m.If(~pr.run & ~accept):
        m.d.comb += Assert(~shell.words.valid, "a word goes to the coder outside a command")
    with m.If(accept):
        m.d.comb += Assert(~shell.words.valid & ~take, "a word passes in the clock a command is accepted")
    led.check_reports(shell.done, shell.status, pr.idle, pr.reporting, pr.drain | pr.check)
    # Auxiliary invariants: the shell's registers against the harness's counts.
    m.d.comb += Assert(pr.rem_zero == (pr.remaining == 0), "inv: rem_zero")
    with m.If(~pr.idle):
        m.d.comb += [Assert(pr.no_words == (t == Nw), "inv: no_words"),
                     Assert(pr.words_left == Nw - t, "inv: words_left")]
    with m.If(pr.run):
        m.d.comb += Assert(pr.remaining == N - k, "inv: remaining")
    with m.If((pr.reporting | pr.drain | pr.check) & (pr.report == DecodeStatus.OK)):
        m.d.comb += Assert(pend_full, "inv: a waiting OK report is of a command that decoded its pairs")
    b.cover(shell.done & (shell.status == DecodeStatus.OK) & (N == (1 << bits) - 1),
            "a command of the largest count reported OK")
    b.cover(pr.run & accept & (led.owed == 2), "back to back: a command accepted while the previous one's report waits")
    return b
