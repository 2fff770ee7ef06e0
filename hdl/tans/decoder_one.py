"""The one-state tANS decoder's coder (``tansR``, ``N = 1``): state table, :class:`~.window.BitWindow`,
:class:`~.update.TansStateUpdate` and the state register, one pair per clock (what Table 3 measures).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..common import bits_for, pair_layout
from .shape import TansShape, decoder_entry_layout, tans_decoder_writes
from .update import TansStateUpdate
from .window import BitWindow

__all__ = ["TansDecoderCoder", "TansDecoderCoderProbe"]


@dataclass(frozen=True)
class TansDecoderCoderProbe:
    """Its window, state, phase and pair registers, which the formal pipeline lemma (``decoder_pipeline``) ties
    to the abstract decoder: what the formal lemmas read of :class:`TansDecoderCoder` (its ``probe`` once
    elaborated; not ports)."""

    window: BitWindow
    x: Value
    phase: Value
    first: Value
    overrun: Value
    no_marker: Value
    marker_skip: Value
    p_valid: Value
    p_symbol: Value
    p_top: Value
    p_need: Value
    p_nb: Value
    entry: object
    n: Value
    decode_phase: int


class TansDecoderCoder(wiring.Component):
    """The tANS decoder's coder alone (what Table 3 measures): state table, bit window, state register.

    It decodes one pair per clock while ``run`` is high and the window holds the pair's bits, and
    knows nothing of commands, counts, status or CRC (:class:`~.shell.DecoderShell` adds those).

    Ports
    -----
    start : In(stream)
        ``{resume, state, bit}``: begin a stream, dropping whatever the window holds. ``resume`` = 0:
        the first word holds the marker (its highest set bit), then ``R`` bits of final state follow.
        ``resume`` = 1: start at state index ``state``; of the first word only its low ``bit`` bits are
        unread (0: all). Always ready; a word on ``i`` in the same cycle is the stream's first.
    i : In(stream)
        ``W``-bit words, top of stack first.
    o : Out(stream)
        ``{symbol, extra}``, a register: the pair is on ``o`` the cycle after it is decoded.
    run : In(1)
        Decode pairs while high (the shell lowers it after the command's last pair). No pair is
        decoded in a cycle with ``start`` or a ``cfg`` write.
    fire : Out(1)
        A pair is decoded this cycle (it enters ``o``).
    decoding : Out(1)
        The marker/state prologue is over.
    starved : Out(1)
        The stream cannot go on: a step read past its end (``ended`` high and too few bits), or it has
        no words left for the marker or the state. Sticky until ``start``.
    ended : In(1)
        Every word of the stream has been given on ``i`` (the shell's word count ran out): a step may
        then read whatever is left instead of waiting for a whole field.
    pending : Out(1)
        A decoded pair has not left ``o`` yet (the shell's ``done`` waits for it).
    no_marker : Out(1)
        The first word of a ``resume`` = 0 stream is zero; the coder stops.
    state : Out(R)
        The state index (the end check wants 0).
    avail : Out
        Bits in the window not yet read (the end check wants 0).
    table_set : In, cores with table sets
        The set whose table decodes the current pair (address ``set << R | state``).
    cfg : In(stream), programmable cores
        ``{addr, data: {symbol, nb, base, need}}``: one table write per clock.

    Latency: a pair reaches ``o`` two clocks after it is decoded (the extra is right-aligned in the
    second register, off the table's path).

    Design (``docs/hdl-style.md``, "Designing for the clock")
    -----------------------------------------------------------
    * The table is read combinationally at the state register (a LUT-RAM on Xilinx, as in the
      paper). With one table set the writes go to the address in the state register itself (a write is registered, one per clock): read and
      write share one address, so the table maps as a single-port RAM (``RAM256X1S``, 4 LUTs per bit)
      instead of a dual-port one (``RAM64M8``).
    * :class:`BitWindow` gives the next ``R + K`` bits from registers, in parallel with the table read.
    * Whether a step may run never looks at the table: the window holds a whole field, or the stream
      has ended (``ended``); reading past the end is caught after the fact (``starved``). So the table
      feeds only the state update, the read count and the pair register.
    * The state update is ``base | v`` (``base`` has ``nb`` zero low bits), not an adder.
    * Loop-carried paths: table → ``need`` → select of the state bits in the field → mask (``nb``)
      and OR ``base`` → state; table → ``need`` → ``off + need`` → offset and slot enables.

    Measured area, clock and the variants tried: ``docs/design/tans.md`` (one-state decoder).
    """

    def __init__(self, shape: "TansShape"):
        self._shape = sh = shape
        self._entry = decoder_entry_layout(sh)
        #: The coder's registers and its window, filled in by :meth:`elaborate`: the formal lemma
        #: ``decoder_pipeline`` (``sim/formal/``) states its invariants over them. Not ports.
        self.probe: TansDecoderCoderProbe | None = None      # set by elaborate
        F, W = sh.need_max, sh.W
        self._field_words = -(-(F + W - 1) // W)
        self._slots = self._field_words + 1
        ports = {
            "start": In(stream.Signature(data.StructLayout({"resume": 1, "state": sh.R, "bit": bits_for(W - 1)}))),
            "i": In(stream.Signature(W)),
            "o": Out(stream.Signature(pair_layout(sh.symbol_bits, sh.K))),
            "run": In(1), "ended": In(1), "fire": Out(1), "pending": Out(1), "decoding": Out(1), "starved": Out(1),
            "no_marker": Out(1), "state": Out(sh.R), "avail": Out(range(self._slots * W + 1)),
        }
        if sh.sets > 1:
            ports["table_set"] = In(sh.set_bits)
        if sh.programmable:
            ports["cfg"] = In(stream.Signature(data.StructLayout({"addr": sh.R + sh.set_bits, "data": self._entry})))
        super().__init__(ports)

    @property
    def window_bits(self) -> int:
        """Bits of the window: ``(D + 1) W``."""
        return self._slots * self._shape.W

    @property
    def entry_layout(self) -> data.StructLayout:
        """The layout of a table row, ``{symbol, nb, base, need}`` (:func:`tans_decoder_writes`)."""
        return self._entry

    def elaborate(self, platform):
        sh = self._shape
        R, W, F, K = sh.R, sh.W, sh.need_max, sh.K
        m = Module()

        init = [] if sh.table is None else [r["data"] for r in tans_decoder_writes(sh.table)]
        m.submodules.table = table = Memory(shape=self._entry, depth=sh.L * sh.sets, init=init)
        rd = table.read_port(domain="comb")
        entry = rd.data
        m.submodules.window = win = BitWindow(W, F)
        wiring.connect(m, wiring.flipped(self.i), win.i)
        field = win.field

        x = Signal(R, name="x")                 # state index
        x_next = Signal(R)
        phase = Signal(2)
        SKIP, STATE, DECODE = 0, 1, 2
        first = Signal()                        # the next word taken is a marker word
        marker_skip = Signal(range(W + 1))      # bits above the marker, and the marker
        no_marker = Signal()
        overrun = Signal()                      # a step read past the end of the stream
        m.d.comb += [self.state.eq(x), self.avail.eq(win.bits), self.decoding.eq(phase == DECODE),
                     self.no_marker.eq(no_marker), self.start.ready.eq(1)]

        # The marker: the highest set bit of the stream's first word, found as the word is taken
        # (into a register: the priority encoder stays off the loop).
        in_skip = Signal(range(W + 1))
        for b in range(W):
            with m.If(self.i.payload[b]):
                m.d.comb += in_skip.eq(W - b)
        with m.If(first & self.i.valid & self.i.ready):
            m.d.sync += [marker_skip.eq(in_skip), first.eq(0), no_marker.eq(self.i.payload == 0)]

        # When a step may read: the window holds a whole field (whatever the step reads), or the
        # stream has no more words (``ended``) and the step reads what is left. Neither test looks
        # at the table, so the table feeds only the state update, the read count and the pair.
        ready_bits = ~win.hole & (win.full | self.ended)
        out_free = ~self.o.valid | self.o.ready
        pipe_free = Signal()                    # the pair register can take this clock's pair
        quiet = ~self.start.valid & (~self.cfg.valid if sh.programmable else 1)
        skip_step = Signal()
        state_step = Signal()
        m.d.comb += [
            self.fire.eq((phase == DECODE) & self.run & ready_bits & pipe_free & quiet),
            skip_step.eq((phase == SKIP) & ~first & ~no_marker & ~win.hole & (win.bits != 0) & quiet),
            state_step.eq((phase == STATE) & ready_bits & quiet),
            self.starved.eq(overrun | (self.ended & ~win.hole & (win.bits == 0) & (phase != DECODE))),
        ]
        n = Signal.like(win.n)                  # a field, or the marker skip (up to W bits)
        with m.If(self.fire):
            m.d.comb += n.eq(entry.need)
        with m.Elif(skip_step):
            m.d.comb += n.eq(marker_skip)
        with m.Elif(state_step):
            m.d.comb += n.eq(R)
        m.d.comb += win.n.eq(n)
        with m.If(n > win.bits):
            m.d.sync += overrun.eq(1)
        with m.If(skip_step):
            m.d.sync += phase.eq(STATE)
        with m.If(state_step):
            m.d.sync += phase.eq(DECODE)

        # The state update: base | the low nb bits of the pair's field. base has nb zero low bits
        # (docs/bitstream.md: base = (x_s << nb) - L), so an OR replaces the adder.
        m.submodules.update = update = TansStateUpdate(R, F)
        m.d.comb += [update.field.eq(field), update.need.eq(entry.need), update.nb.eq(entry.nb),
                     update.base.eq(entry.base), x_next.eq(x)]
        with m.If(self.fire):
            m.d.comb += x_next.eq(update.next)
        with m.Elif(state_step):
            m.d.comb += x_next.eq(field[F - R:])
        m.d.sync += x.eq(x_next)

        # The pair, in two registers: the decoded step (symbol, the field's top K bits and the
        # extra width) and then ``o``, where the extra is right-aligned. Its K:1 shifter and the
        # ``need - nb`` subtraction are then off the table's path.
        p_valid = Signal()
        p_symbol = Signal.like(entry.symbol)
        p_top = Signal(max(1, K))
        p_need = Signal.like(entry.need)
        p_nb = Signal.like(entry.nb)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.comb += [pipe_free.eq(~p_valid | out_free), self.pending.eq(p_valid | self.o.valid)]
        with m.If(p_valid & out_free):
            k = Signal(range(K + 1))
            m.d.comb += k.eq(p_need - p_nb)
            m.d.sync += [self.o.valid.eq(1), self.o.p.symbol.eq(p_symbol),
                         self.o.p.extra.eq((p_top << k)[K:2 * K] if K else 0), p_valid.eq(0)]
        with m.If(self.fire):
            m.d.sync += [p_valid.eq(1), p_symbol.eq(entry.symbol), p_need.eq(entry.need), p_nb.eq(entry.nb)]
            if K:
                m.d.sync += p_top.eq(field[F - K:])

        if sh.programmable:
            wr = table.write_port()
            if sh.sets == 1:
                # Written at the state register's address: one address, a single-port LUT-RAM.
                we, wd = Signal(), Signal(self._entry)
                m.d.sync += [we.eq(self.cfg.valid), wd.eq(self.cfg.p.data)]
                m.d.comb += [wr.addr.eq(x), wr.data.eq(wd), wr.en.eq(we)]
                with m.If(self.cfg.valid):
                    m.d.comb += x_next.eq(self.cfg.p.addr)
            else:
                m.d.comb += [wr.addr.eq(self.cfg.p.addr), wr.data.eq(self.cfg.p.data), wr.en.eq(self.cfg.valid)]
            m.d.comb += self.cfg.ready.eq(1)
        self.probe = TansDecoderCoderProbe(window=win, x=x, phase=phase, first=first, overrun=overrun,
                                           no_marker=no_marker, marker_skip=marker_skip, p_valid=p_valid,
                                           p_symbol=p_symbol, p_top=p_top, p_need=p_need, p_nb=p_nb, entry=entry,
                                           n=n, decode_phase=DECODE)
        if sh.sets > 1:
            m.d.comb += rd.addr.eq(Cat(x, self.table_set))
        else:
            m.d.comb += rd.addr.eq(x)

        with m.If(self.start.valid):
            p = self.start.p
            m.d.comb += [win.clear.eq(1), win.clear_off.eq(Mux(p.resume & (p.bit != 0), W - p.bit, 0)),
                         x_next.eq(p.state)]
            m.d.sync += [no_marker.eq(0), overrun.eq(0), first.eq(~p.resume),
                         phase.eq(Mux(p.resume, DECODE, SKIP))]
            with m.If(~p.resume & self.i.valid & self.i.ready):
                m.d.sync += [marker_skip.eq(in_skip), first.eq(0), no_marker.eq(self.i.payload == 0)]
        return m
