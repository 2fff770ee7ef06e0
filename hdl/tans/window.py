"""The tANS decoders' bit windows: the stream bits a step reads, from registers (combinational selects).

* :class:`BitWindow`: the one-state decoder's window, the next ``F = R + K`` bits at the read offset.
* :class:`PairWindow`: the two- and ``N``-state decoders' ring of word slots, the bits at the read
  offset and the ``R`` bits that end at a pair's field end, both selected by registers.

Words enter top of stack first (``docs/bitstream.md``); a window never reads a bit it does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

__all__ = ["BitWindow", "PairWindow", "BitWindowProbe", "PairWindowProbe"]


@dataclass(frozen=True)
class BitWindowProbe:
    """Its registers (made at construction, so that a harness can name them before elaboration), which the
    formal lemma ``window_queue`` ties to a bit queue: what the formal lemmas read of :class:`BitWindow`
    (its ``probe`` once elaborated; not ports)."""

    slots: list[Signal]
    nw: Signal
    hole: Signal
    off: Signal


@dataclass(frozen=True)
class PairWindowProbe:
    """The registers of a :class:`PairWindow` (made at construction, as :class:`BitWindowProbe`'s), which
    the formal lemma ``window_queue`` of the interleaved decoder ties to a queue of words (not ports)."""

    slots: list[Signal]
    nw: Signal
    rp: Signal
    wp: Signal


class BitWindow(wiring.Component):
    """The decoder's bit window: words in, the next ``F`` stream bits out, ``n`` bits consumed per clock.

    Words (``W`` bits, top of stack first) queue in ``N = D + 1`` slots, where ``D`` words cover a field of
    ``F`` bits at any offset and one more is prefetched; ``off`` (``< W``) bits of the oldest slot have
    been read. The field is ``D`` slots shifted by ``off`` (a ``W``-way extractor driven by registers
    only, so it runs in parallel with the coder's table read).

    Why slot 0 never takes a word from ``i``: the oldest slot then has a single source (the next slot),
    so it needs no multiplexer at all; a word that arrives at an empty window lands in slot 1 and slot 0
    is marked a ``hole``, which the next clock shifts away. That costs one clock when a stream starts
    and ``W`` LUTs less for good. With fields of at most ``W`` bits (the paper's 16-bit words and
    ``R + K = 16``) a step consumes at most one word and no slot needs more than a 2:1 multiplexer.

    Ports
    -----
    i : In(stream)
        ``W``-bit words. ``ready`` comes from registers (a free slot).
    field : Out(F)
        The next ``F`` bits of the stream, the next bit at the top (MSB); valid when ``full``.
    bits : Out
        Bits held and not yet read.
    full : Out(1)
        The window holds at least ``F`` bits and slot 0 is not a hole: ``field`` is the stream's.
    hole : Out(1)
        Slot 0 is empty while a younger slot holds a word (this clock shifts it in).
    n : In
        Bits read this clock (``0`` .. ``max(F, W)``); reading more than ``bits`` reads stale data (the
        coder reports that as an overrun).
    clear : In(1)
        Drop every word; ``off`` becomes ``clear_off`` (the unread low bits of a resumed first word).
        A word on ``i`` in the same clock is kept, as the first.

    Latency: a word taken in clock ``t`` is in the field from clock ``t + 1`` (``t + 2`` into an empty
    window).
    """

    def __init__(self, word_bits: int, field_bits: int):
        self._W, self._F = W, F = word_bits, field_bits
        self._D = -(-(F + W - 1) // W)
        self._N = self._D + 1
        #: The registers, made here so that a formal harness can name them before elaboration
        #: (``sim/formal/``: ``window_queue``, ``decoder_pipeline``) and state its invariants over them.
        #: Not ports. (One elaboration per window, as for any component.) ``slots[0]`` is the oldest
        #: word; ``nw`` words are held, in slots 0 .. nw-1, or 1 .. nw after a hole.
        self.probe = BitWindowProbe(slots=[Signal(W, name=f"slot{j}") for j in range(self._N)],
                                    nw=Signal(range(self._N + 1), name="nw"), hole=Signal(name="hole"),
                                    off=Signal(range(W), name="off"))
        # A read is a field (F bits) or the marker skip (up to W bits: a marker at bit 0 drops the
        # whole first word), so when F < W the window must count up to W (found by ansforge prove).
        self._n_max = max(F, W)
        self._Q = (W - 1 + self._n_max) // W
        super().__init__({
            "i": In(stream.Signature(W)),
            "field": Out(F), "bits": Out(range(self._N * W + 1)), "full": Out(1), "hole": Out(1),
            "n": In(range(self._n_max + 1)), "clear": In(1), "clear_off": In(range(W)),
        })

    def elaborate(self, platform):
        W, F, D, N, Q = self._W, self._F, self._D, self._N, self._Q
        m = Module()
        slots, nw, hole, off = self.probe.slots, self.probe.nw, self.probe.hole, self.probe.off
        window = Cat(*reversed(slots[:D]))
        # full: nw * W - off >= F, written per word count so that no subtractor is built.
        full_at = [(nw == c) & (off <= c * W - F) if c * W - F < W - 1 else nw == c
                   for c in range(N + 1) if c * W >= F]
        m.d.comb += [
            self.field.eq((window << off)[D * W - F:D * W]),
            self.bits.eq(nw * W - off),
            self.full.eq(~hole & Cat(*full_at).any()),
            self.hole.eq(hole),
            self.i.ready.eq(nw + hole != N),
        ]
        t = Signal(range(W + self._n_max))
        q = Signal(range(Q + 1))           # words read to their end this clock (0 while there is a hole)
        m.d.comb += t.eq(off + self.n)
        if W & (W - 1) == 0:
            m.d.comb += q.eq(t >> exact_log2(W))
        else:
            m.d.comb += q.eq(sum((t >= j * W).as_unsigned() for j in range(1, Q + 1)))
        take = Signal()
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        # Where a taken word lands, after this clock's shift: behind the held words, or in slot 1
        # (leaving a hole at 0) when no word is left.
        land = Signal(range(N + 1))
        m.d.comb += land.eq(Mux(hole, nw, nw - q))
        into_empty = Signal()
        m.d.comb += into_empty.eq(self.clear | (~hole & (nw == q)))
        for j in range(N):
            for s in range(1, Q + 1):
                if j + s < N:
                    cond = (q == s) if s > 1 else (hole | (q == 1))
                    with m.If(cond):
                        m.d.sync += slots[j].eq(slots[j + s])
            if j >= 1:
                with m.If(take & Mux(into_empty, j == 1, land == j)):
                    m.d.sync += slots[j].eq(self.i.payload)
        m.d.sync += [nw.eq(Mux(self.clear, 0, nw - q) + take), hole.eq(take & into_empty)]
        if W & (W - 1) == 0:
            m.d.sync += off.eq(Mux(self.clear, self.clear_off, t[:exact_log2(W)]))
        else:
            m.d.sync += off.eq(Mux(self.clear, self.clear_off, t - q * W))
        return m

def _gather(vec: list, amount, offsets: list[int]):
    """``Cat(vec[(amount + offsets[i]) mod len(vec)] for i)``: a rotating select built as a tree of
    4:1 multiplexers, two ``amount`` bits per level from the most significant down (one LUT6 each),
    each level computing only the positions the next one reads. (yosys maps a generic shift of the
    same select into about twice the LUTs.)"""
    M = len(vec)
    groups = []                                   # amount bit indices per level, most significant first
    b = len(amount)
    while b > 0:
        groups.append(list(range(max(0, b - 2), b)))
        b -= 2

    def shifts(g):
        return [sum(((v >> k) & 1) << bit for k, bit in enumerate(g)) for v in range(1 << len(g))]

    need = [sorted({o % M for o in offsets})]     # positions each level produces, last level first
    for g in reversed(groups[1:]):
        need.insert(0, sorted({(t + d) % M for t in need[0] for d in shifts(g)}))
    level = dict(enumerate(vec))
    for g, want in zip(groups, need):
        sel = [amount[bit] for bit in g]
        nxt = {}
        for t in want:
            c = [level[(t + d) % M] for d in shifts(g)]
            nxt[t] = Mux(sel[0], c[1], c[0]) if len(c) == 2 else \
                Mux(sel[1], Mux(sel[0], c[3], c[2]), Mux(sel[0], c[1], c[0]))
        level = nxt
    return Cat(*[level[o % M] for o in offsets])

class PairWindow(wiring.Component):
    """The bit window of the two-state decoder: a ring of ``D`` word slots; the bits at the read offset
    and the bits that end at a pair's field end ``pos``, both selected by registers.

    The coder keeps ``pos``, where the current pair's field ends, counted in bits from the top of the
    oldest held word. A step consumes every bit before ``pos``: ``pos // W`` words leave and the read
    offset becomes ``pos % W``. The coder computes the *next* pair's ``pos`` a clock ahead (the offset
    plus the next pair's ``need``, read from the table while this pair is decoded), so every select
    here is driven by registers and no adder sits between a table read and a select.

    Words are written into the slot after the newest (a clock enable, no multiplexer) and never move;
    the oldest slot's index ``rp`` joins the select amount instead (``rp · W + offset``, a rotation of
    the ``D · W``-bit ring). ``D`` is the smallest power of two with ``D · W > P``, so that a ring of
    full slots always holds the next field (one pair per clock with words offered every clock).

    Ports
    -----
    i : In(stream)
        ``W``-bit words, top of stack first. ``ready``: a slot is free, or one is freed this clock
        (combinational from ``step``).
    pos : In(range(P + 1))
        End of the current field, in bits from the top of the oldest word (``P = W + max(R + K - 1,
        R)``: an offset below ``W`` plus a field, or the marker skip plus a state).
    step : In(1)
        Consume every bit before ``pos`` this clock.
    hend : In(range(P + 1))
        Where the ``head`` bits end, as ``pos`` (the coder gives ``pos - nb``: a pair's extra bits end
        where its state bits begin).
    head : Out(H)
        The ``H`` bits that end at ``hend``, the bit before ``hend`` at bit 0 (a pair's extra bits,
        right-aligned; the coder masks those above ``k``).
    tail : Out(T)
        The ``T`` bits that end at ``pos``, the bit before ``pos`` at bit 0 (a pair's state bits;
        above the oldest word the ring's other bits, which the coder masks).
    holds : Out(1)
        The window holds every bit before ``pos``.
    empty : Out(1)
        No word is held (after a stream read to its end: nothing is left; the end check).
    room : Out(1)
        A slot is free (``i.ready`` in a clock without a step; a register compare).
    clear, clear_off : In
        Drop every word; the read offset becomes ``clear_off``. A word on ``i`` in the same clock is
        kept, as the first.

    Latency: a word taken in clock ``t`` is readable from ``t + 1``.
    """

    def __init__(self, word_bits: int, pos_max: int, head_bits: int, tail_bits: int):
        self._W, self._P, self._H, self._T = W, P, H, T = word_bits, pos_max, head_bits, tail_bits
        self._D = 1 << (P // W).bit_length()     # a power of two above P / W
        self._Q = P // W                         # words a step consumes at most
        #: The registers (``slots``: the ring; ``nw`` words held, the oldest in slot ``rp``, the next
        #: word goes to ``wp``), made here so that a formal harness can name them before elaboration
        #: (``sim/formal/``: ``window_queue`` of ``tans-decoder-x2``). Not ports.
        D = self._D
        self.probe = PairWindowProbe(slots=[Signal(W, name=f"slot{j}") for j in range(D)],
                                     nw=Signal(range(D + 1), name="nw"), rp=Signal(range(D), name="rp"),
                                     wp=Signal(range(D), name="wp"))
        super().__init__({
            "i": In(stream.Signature(W)), "pos": In(range(P + 1)), "step": In(1), "hend": In(range(P + 1)),
            "head": Out(H), "tail": Out(T), "holds": Out(1),
            "empty": Out(1), "room": Out(1), "clear": In(1), "clear_off": In(range(W)),
        })

    @property
    def slots(self) -> int:
        """``D``, the words the ring holds."""
        return self._D

    def elaborate(self, platform):
        W, D, Q, H, T, P = self._W, self._D, self._Q, self._H, self._T, self._P
        m = Module()
        slots, nw, rp, wp = self.probe.slots, self.probe.nw, self.probe.rp, self.probe.wp
        off = Signal(range(W))
        # The ring in stream order: bit ``s·W + p`` is bit ``p`` (from the top) of slot ``s``.
        ring = [slots[j // W][W - 1 - j % W] for j in range(D * W)]
        pow2 = W & (W - 1) == 0
        if pow2:
            lw = exact_log2(W)
            head_at = Cat(self.hend[:lw], (self.hend[lw:] + rp)[:exact_log2(D)]) if D > 1 else self.hend[:lw]
            tail_at = Cat(self.pos[:lw], (self.pos[lw:] + rp)[:exact_log2(D)]) if D > 1 else self.pos[:lw]
        else:
            head_at, tail_at = rp * W + self.hend, rp * W + self.pos
        m.d.comb += [
            self.head.eq(_gather(ring, head_at, [-1 - i for i in range(H)])),
            self.tail.eq(_gather(ring, tail_at, [-1 - i for i in range(T)])),
            self.holds.eq(Cat(*[(nw == c) & (self.pos <= c * W) for c in range(D + 1)]).any()),
            self.empty.eq(nw == 0),
        ]
        t = Signal(range(max(P, W - 1) + 1))
        q = Signal(range(Q + 1))
        m.d.comb += t.eq(Mux(self.step, self.pos, off))
        if pow2:
            m.d.comb += q.eq(t >> lw)
        else:
            m.d.comb += q.eq(sum((t >= j * W).as_unsigned() for j in range(1, Q + 1)))
        take = Signal()
        m.d.comb += [self.room.eq(nw != D), self.i.ready.eq(self.room | (q != 0)),
                     take.eq(self.i.valid & self.i.ready)]
        for j in range(D):
            with m.If(take & (wp == j)):
                m.d.sync += slots[j].eq(self.i.payload)
        m.d.sync += [wp.eq(wp + take if D > 1 else 0),
                     rp.eq(Mux(self.clear, wp, rp + q) if D > 1 else 0),
                     nw.eq(Mux(self.clear, 0, nw - q) + take)]
        if pow2:
            m.d.sync += off.eq(Mux(self.clear, self.clear_off, t[:lw]))
        else:
            m.d.sync += off.eq(Mux(self.clear, self.clear_off, t - q * W))
        return m
