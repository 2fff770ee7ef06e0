"""The tANS encoders' word packers (two- and ``N``-state): variable-width fields in, ``W``-bit words
out, the marker bit after a stream's last field (``docs/bitstream.md``).

* :class:`WordPacker`: fields of up to ``W`` bits, one per clock.
* :class:`WideWordPacker`: wider fields (a flush's states), split in front of a :class:`WordPacker`.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..common import bits_for, word_layout

__all__ = ["WordPacker", "WordPackerProbe", "WideWordPacker"]


@dataclass(frozen=True)
class WordPackerProbe:
    """The registers of a :class:`WordPacker` (its ``probe`` once elaborated; not ports), which the
    formal lemma ``packer_queue`` of the interleaved encoder ties to a queue of bits: the input register
    (``v3`` and the field), ``mk3`` (it holds the marker bit after an end field), the accumulator
    ``acc`` and its fill count ``cnt``."""

    v3: Signal
    bits3: Signal
    skip3: Signal
    lt3: Signal
    last3: Signal
    end3: Signal
    mk3: Signal
    acc: Signal
    cnt: Signal


class WordPacker(wiring.Component):
    """Bit fields in (first bit at 0), ``W``-bit words out in push order, one field per clock.

    A field of ``len`` bits (``F`` at most) is placed at the fill count ``cnt < W`` by a rotation of
    ``W`` bits (``log2 W`` stages of 2:1, i.e. two levels of 4:1) instead of a ``2W``-bit shifter: the
    rotated bits at or above ``cnt`` complete the word, those below are the next word's start, and
    ``cnt > q`` chooses per bit ``q`` between the held bits and the new ones (one LUT6 per bit with
    ``cnt``'s four bits). Fields are at most ``W`` bits (:class:`WideWordPacker` takes wider ones).

    Ports
    -----
    i : In(stream)
        ``{bits: F, skip, lt, last, end}``: the field is ``last + 1 - lt`` bits (modulo
        ``2**len(last)``: ``last`` all ones and ``lt = 0`` is an empty field) of ``bits`` from bit
        ``skip + lt`` (the others are 0). ``lt`` is the ring's compare, taken as it is: the
        packer's two adders (``tot = cnt + last + (1 - lt)``, ``cnt - skip - lt``) absorb it as a
        carry-in instead of adders in front of them (19 LUT-equivalents less than ``skip = sh + lt``
        and ``len = nb_high + k - lt``, measured in the coder). ``end`` marks a stream's last
        field: the packer holds its input register one more clock, for the marker bit (``1``) that
        follows it, and the word that takes the marker is the stream's last (partial, or full when
        the marker lands at bit ``W - 1``). ``ready`` comes from registers and ``o.ready``.
    o : Out(stream)
        ``{data: W, last}``, a register.

    Latency: a field taken in clock ``t`` is in a word on ``o`` from clock ``t + 2``; an end field
    costs one clock more (the marker's), whatever the fill count.
    """

    def __init__(self, word_bits: int, field_bits: int):
        if field_bits > word_bits:
            raise ValueError(f"WordPacker takes fields of at most word_bits={word_bits} bits, not {field_bits}")
        self._W, self._F = word_bits, field_bits
        self.probe: WordPackerProbe | None = None      # set by elaborate
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"bits": field_bits, "skip": range(word_bits),
                                                       "last": bits_for(2 * word_bits - 1), "end": 1, "lt": 1}))),
            "o": Out(stream.Signature(word_layout(word_bits))),
        })

    def elaborate(self, platform):
        W, F = self._W, self._F
        m = Module()
        v3, end3, lt3 = Signal(), Signal(), Signal()
        bits3, last3 = Signal(F), Signal(bits_for(2 * W - 1))
        skip3 = Signal(range(W))
        acc = Signal(W)
        cnt = Signal(range(W))

        seg = Signal(W)
        m.d.comb += seg.eq(bits3)
        tot = Signal(range(2 * W))
        # tot = cnt + (last + 1 - lt): lt a carry-in (1 - lt = ~lt), one adder (modulo 2**len(tot), where
        # last = -1 is an empty field).
        m.d.comb += tot.eq(cnt + last3 + ~lt3)
        full = Signal()
        m.d.comb += full.eq(tot >= W)
        # rot = seg rotated left by cnt - skip - lt (mod W): the field's first bit lands at cnt.
        # cnt - skip - lt = cnt + ~skip + ~lt (~skip = -skip - 1, ~lt = 1 - lt): lt is a carry-in.
        # Two (or more) stages of 4:1 multiplexers, one LUT6 per bit each.
        amt = Signal(range(W))
        if W & (W - 1) == 0:
            m.d.comb += amt.eq((cnt + ~skip3 + ~lt3)[:len(amt)])
        else:
            first = skip3 + lt3
            m.d.comb += amt.eq(Mux(cnt >= first, cnt - first, cnt + W - first))
        rot = seg
        for b in range(0, len(amt), 2):
            sel = amt[b:b + 2]
            nxt = Signal(W, name=f"rot{b}")
            choices = [Cat(rot[W - (j << b) % W:], rot[:W - (j << b) % W]) if (j << b) % W else rot
                       for j in range(1 << len(sel))]
            with m.Switch(sel):
                for j, c in enumerate(choices):
                    with m.Case(j):
                        m.d.comb += nxt.eq(c)
            rot = nxt
        rot_s = rot
        lo = Signal(W)
        # Bits below cnt are held, the others are the field's: one LUT6 per bit (cnt, acc, rot).
        m.d.comb += lo.eq(Cat(*(Mux(cnt > q, acc[q], rot_s[q]) for q in range(W - 1)), rot_s[W - 1]))
        mk3 = Signal()           # the input register holds the marker bit that follows an end field
        stay = Signal()          # the end field keeps the input register another clock, for the marker
        m.d.comb += stay.eq(end3 & ~mk3)
        fin = Signal()           # this step writes the marker and emits the stream's last word
        m.d.comb += fin.eq(end3 & mk3)
        can_push = ~self.o.valid | self.o.ready
        step = Signal()
        m.d.comb += [step.eq(v3 & can_push),
                     # An end field holds the input register for a clock, which becomes the marker
                     # field; ready comes from registers.
                     self.i.ready.eq(~v3 | (can_push & ~stay))]
        emit = Signal()
        m.d.comb += emit.eq(step & (full | fin))
        cnt_next = Signal(range(W))
        m.d.comb += cnt_next.eq(Mux(fin, 0, Mux(full, tot - W, tot)))
        with m.If(step):
            m.d.sync += [acc.eq(Mux(full, rot_s, lo)), cnt.eq(cnt_next)]
            with m.If(~stay):
                m.d.sync += v3.eq(0)
        # A field is never taken while one stays (ready is low then), so the marker field (one bit,
        # 1) comes first and maps onto the flip-flops' synchronous set and reset.
        with m.If(step & stay):
            m.d.sync += [bits3.eq(1), last3.eq(0), skip3.eq(0), lt3.eq(0), mk3.eq(1)]
        with m.Elif(self.i.valid & self.i.ready):
            m.d.sync += [bits3.eq(self.i.p.bits), last3.eq(self.i.p.last), end3.eq(self.i.p.end),
                         skip3.eq(self.i.p.skip), lt3.eq(self.i.p.lt), mk3.eq(0)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += v3.eq(1)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(emit):
            m.d.sync += [self.o.valid.eq(1), self.o.p.data.eq(lo), self.o.p.last.eq(fin)]
        self.probe = WordPackerProbe(v3=v3, bits3=bits3, skip3=skip3, lt3=lt3, last3=last3, end3=end3, mk3=mk3,
                                     acc=acc, cnt=cnt)
        return m

class WideWordPacker(wiring.Component):
    """:class:`WordPacker`'s ports for fields wider than a word (``F > W``: escape codes with many
    extra bits), at one field per clock as long as the average stays below ``W`` bits.

    A plain accumulator of ``2W + F`` bits: a clock that emits a word (``cnt >= W``) also inserts the
    next field behind it, so a wide field costs no clock; a field waits only when the accumulator
    cannot take it. An ``end`` field takes the marker bit (``1``) above it, and then the accumulator
    drains (the last word may be partial) before the next stream's first field is taken. Not what the paper configuration builds
    (``R + K = W`` there), so its size is not budgeted: its ``ready`` passes ``o.ready`` through.
    """

    def __init__(self, word_bits: int, field_bits: int):
        self._W, self._F = word_bits, field_bits
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"bits": field_bits, "skip": range(field_bits),
                                                       "last": bits_for(field_bits), "end": 1, "lt": 1}))),
            "o": Out(stream.Signature(word_layout(word_bits))),
        })

    def elaborate(self, platform):
        W, F = self._W, self._F
        A = 2 * W + F + 1
        m = Module()
        v3, end3, lt3 = Signal(), Signal(), Signal()
        bits3, last3 = Signal(F), Signal(bits_for(F))
        skip3 = Signal(range(F))
        acc = Signal(A)
        cnt = Signal(range(A + 1))
        drain = Signal()
        len3 = Signal(range(F + 1))       # the field's bits
        lenm = Signal(range(F + 2))       # and the marker bit after an end field
        val = Signal(F + 1)               # the field at bit 0, the marker above it
        m.d.comb += [len3.eq(last3 + ~lt3), lenm.eq(len3 + end3),
                     val.eq((bits3 >> (skip3 + lt3)) | (end3 << len3))]
        o_free = ~self.o.valid | self.o.ready
        emit, last, consume = Signal(), Signal(), Signal()
        base = Signal(range(A + 1))
        m.d.comb += [emit.eq(o_free & ((cnt >= W) | (drain & (cnt != 0)))),
                     last.eq(drain & (cnt <= W)),
                     base.eq(Mux(emit, Mux(cnt >= W, cnt - W, 0), cnt)),
                     consume.eq(v3 & ~drain & (base + lenm <= A)),
                     self.i.ready.eq(~v3 | consume)]
        kept = Mux(emit, acc >> W, acc)
        m.d.sync += [acc.eq(kept | Mux(consume, val << base, 0)[:A]),
                     cnt.eq(base + Mux(consume, lenm, 0))]
        with m.If(consume):
            m.d.sync += v3.eq(0)
            with m.If(end3):
                m.d.sync += drain.eq(1)
        with m.If(emit & last):
            m.d.sync += drain.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [v3.eq(1), bits3.eq(self.i.p.bits), last3.eq(self.i.p.last), end3.eq(self.i.p.end),
                         skip3.eq(self.i.p.skip), lt3.eq(self.i.p.lt)]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(emit):
            m.d.sync += [self.o.valid.eq(1), self.o.p.data.eq(acc[:W]), self.o.p.last.eq(last)]
        return m
