"""The tANS decoder's coder for ``N >= 2`` interleaved states (``tansRxN``, ``docs/bitstream.md`` §8),
one pair per clock.

Pair ``j`` of a stream is decoded with state ``j mod N``. The ``N`` states sit in a rotating register
chain: the state being decoded is at its head and the state a step produces enters at its tail, so
no ``N``-way multiplexer grows with ``N``; every loop is one clock, from registers. The ring is ``T``
(the current pair's table entry), ``E`` (the next pair's entry, read one clock ahead, ``N >= 3``
only), ``xa`` (the state table's address), then ``N - 3`` states in flight. The bit window and the
state update are the two-state decoder's (:class:`~.window.PairWindow`,
:class:`~.update.TansTailUpdate`).
Measured area and clock by ``N``: ``docs/design/tans.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..common import bits_for, pair_layout
from .shape import decoder_entry_layout, tans_decoder_writes, thermometer, xn_state_count
from .update import TansTailUpdate
from .window import PairWindow

__all__ = ["TansXnDecoderCoder", "TansXnDecoderCoderProbe"]


@dataclass(frozen=True)
class TansXnDecoderCoderProbe:
    """Its window and registers, which the formal pipeline lemma (``decoder_pipeline`` of
    ``tans-decoder-x2``) ties to the abstract ``N``-state decoder: what the formal lemmas read of
    :class:`TansXnDecoderCoder` (its ``probe`` once elaborated; not ports). ``E`` is ``None`` and
    ``flight`` empty for ``N = 2``."""

    window: PairWindow
    step: Value
    T: Value
    E: Value | None
    xa: Value
    flight: list
    pos: Value
    hc: Value
    hd: Value
    hm: Value
    hadv: Value
    resume: Value
    first: Value
    no_marker: Value
    armed: Value
    overrun: Value
    zc: Value
    p_valid: Value
    p_symbol: Value
    p_top: Value
    p_k: Value


class TansXnDecoderCoder(wiring.Component):
    """The tANS decoder's coder for streams of ``N >= 2`` interleaved states; what Table 3 measures.

    The ring, one position per state (``T`` at the head):

    * ``T``: the current pair's table entry ``{symbol, nb, base, need}``. A step decodes it: the
      lane's next state is ``T.base | (the R bits that end at pos) & mask(T.nb)``
      (:class:`~.update.TansTailUpdate`) and enters the ring's tail.
    * ``E`` (``N >= 3``): the next pair's entry, read from the LUT-RAM at ``xa`` one clock before it is
      needed, so that no table read sits in a loop: ``pos`` (the next field's end) is ``pos % W +
      E.need``, a register into an adder. With ``N = 2`` the entry is read at ``xa`` in the step clock.
    * ``xa``: the state table's address (also the write address of a ``cfg`` write: one address, a
      single-port ``RAM256X1S``).
    * ``N - 3`` more states, plain flip-flops shifted on each step (no multiplexer).

    Ports
    -----
    start : In(stream)
        ``{resume, bit}``: begin a stream. ``resume`` = 0: the first word holds the marker, then
        ``X_0 .. X_{N-1}`` (``R`` bits each) follow. ``resume`` = 1: the ``N`` states come through
        ``rstate``; of the first word only its low ``bit`` bits are unread (0: all). Always ready.
        In its clock ``run`` is low and ``i`` offers no word (the shell's: the stream's first word
        comes a clock later); a step of the previous stream in that clock is overridden.
    rlane : Out(range(N)); rstate : In(R)
        During a resume's prologue the coder takes the state of lane ``rlane`` (counted from the
        command's first pair: the state of the checkpoint's pair ``i`` is lane 0, pair ``i + 1``'s lane
        1, ...) from ``rstate``, one per clock (the core's shell holds the command's states and
        selects; the coder keeps no ``N R``-bit register for them).
    i, o, run, ended, fire, pending, decoding, starved, no_marker
        As in :class:`~.decoder_one.TansDecoderCoder` (``starved`` also when the marker word never comes).
    cfg : In(stream)
        Table writes ``{addr, data}``, always ready, only while no stream runs (the shell passes them
        while idle): a write does not wait for a step (one table set: it loads the state register with
        its address, and the write is made there in the next clock).
    empty : Out(1)
        The window holds no word (the end check: a stream read to its end has none left; a step never
        ends inside a word it has not read to its end unless it overran, which ``starved`` reports).
    state_zero : Out(1)
        Every lane's state index is 0 (the end check): the last ``N`` states to enter the ring were 0
        (a count of zero states saturating at ``N - 1`` and a compare of the tail, not an ``N R``-bit
        compare).

    The prologue: ``N`` steps through the state update with a constant entry (``nb = R``, ``base =
    0``) read ``X_0 .. X_{N-1}`` from the stream into the ring's tail (a resume's steps take
    ``rstate`` instead and read no bits); the last one loads ``X_0``'s entry into ``T``. Between
    back-to-back commands: the marker word, then the ``N`` state reads.
    """

    def __init__(self, shape, states: int):
        self.probe: TansXnDecoderCoderProbe | None = None      # set by elaborate
        self._shape = sh = shape
        self._N = N = xn_state_count(states)
        self._entry = decoder_entry_layout(sh)
        W = sh.W
        self._P = W + max(sh.need_max - 1, sh.R)
        ports = {
            "start": In(stream.Signature(data.StructLayout({"resume": 1, "bit": bits_for(W - 1)}))),
            "rlane": Out(range(N)), "rstate": In(sh.R),
            "i": In(stream.Signature(W)),
            "o": Out(stream.Signature(pair_layout(sh.symbol_bits, sh.K))),
            "run": In(1), "ended": In(1), "fire": Out(1), "pending": Out(1), "decoding": Out(1), "starved": Out(1),
            "no_marker": Out(1), "state_zero": Out(1), "empty": Out(1),
        }
        if sh.sets > 1:
            ports.update({"read": Out(1), "table_set": In(sh.set_bits), "set_known": In(1)})
        if sh.programmable:
            ports["cfg"] = In(stream.Signature(data.StructLayout({"addr": sh.R + sh.set_bits, "data": self._entry})))
        super().__init__(ports)

    @property
    def states(self) -> int:
        return self._N

    @property
    def read_ahead(self) -> int:
        """Steps between a pair's table read and its decode: 2 (``E``, then ``T``) for ``N >= 3``, 1 for
        ``N = 2``."""
        return 2 if self._N >= 3 else 1

    @property
    def pos_max(self) -> int:
        """The largest field end ``P`` the window serves: ``W + max(R + K - 1, R)``."""
        return self._P

    @property
    def window_bits(self) -> int:
        return (1 << (self._P // self._shape.W).bit_length()) * self._shape.W

    def elaborate(self, platform):
        sh = self._shape
        R, W, K, N = sh.R, sh.W, sh.K, self._N
        H = max(R, K, 1)
        m = Module()
        init = [] if sh.table is None else [r["data"] for r in tans_decoder_writes(sh.table)]
        # Distributed RAM (the paper's): with N >= 3 the read feeds only the register E, which yosys would
        # otherwise absorb into a block RAM's output register.
        m.submodules.table = table = Memory(shape=self._entry, depth=sh.L * sh.sets, init=init,
                                            attrs={"ram_style": "distributed"})
        rd = table.read_port(domain="comb")
        m.submodules.window = win = PairWindow(W, self._P, H, R)
        wiring.connect(m, wiring.flipped(self.i), win.i)
        m.submodules.update = up = TansTailUpdate(R)

        xa = Signal(R)                                  # table address
        T = Signal(self._entry)                         # the current pair's entry
        if N >= 3:
            E = Signal(self._entry)                     # the next pair's entry (read a clock ahead)
            nxt = E
        else:
            nxt = rd.data
        flight = [Signal(R, name=f"x{j}") for j in range(max(0, N - 3))]   # xa <- flight[0] <- ... <- tail
        tail = flight[-1] if flight else xa             # where a step's new state goes
        pos = Signal(range(self._P + 1))
        hc = Signal(range(N + 1))                       # prologue steps taken
        hd = Signal()                                   # the prologue runs (hc != N)
        hm = Signal()                                   # more than one prologue step left (hc < N - 1)
        hadv = Signal(range(R + 1))                     # bits a prologue step reads: R, or 0 (resume)
        resume = Signal()
        first = Signal()
        no_marker = Signal()
        # ``~first & ~no_marker`` as one register, written where they are: ``step`` is on the lanes'
        # longest path, and two gates less there is worth a flip-flop (docs/design/subsystem.md, step 13).
        armed = Signal(init=1)
        overrun = Signal()
        zc = Signal(range(N))                           # zero states right before the tail's, saturating
        m.d.comb += [self.empty.eq(win.empty), self.decoding.eq(~hd), self.no_marker.eq(no_marker),
                     self.start.ready.eq(1), win.pos.eq(pos), self.rlane.eq(hc[:len(self.rlane)]),
                     self.starved.eq(overrun | (self.ended & first)),
                     self.state_zero.eq((tail == 0) & (zc == N - 1))]

        # The marker, found as the first word is taken: pos = the end of X_0.
        in_pos = Signal.like(pos)
        wb = 1 << (W - 1).bit_length()
        v = Cat(Const(0, wb - W), self.i.payload)
        zeros = []
        while len(v) > 1:
            h = len(v) // 2
            zeros.append(v[h:] == 0)
            v = Mux(zeros[-1], v[:h], v[h:])
        m.d.comb += in_pos.eq(Cat(*reversed(zeros)) + 1 + R)
        marker_now = Signal()
        m.d.comb += marker_now.eq(self.i.valid & win.room & first)

        out_free = ~self.o.valid | self.o.ready
        p_valid = Signal()
        pipe_free = Signal()
        step = Signal()
        # Table sets: a step whose read is a pair's (the last read_ahead prologue steps and every decode)
        # reads at ``table_set`` and waits until it is known (``set_known``).
        rp = Signal()
        set_gate = (self.set_known | ~rp) if sh.sets > 1 else 1
        m.d.comb += [
            pipe_free.eq(~p_valid | out_free),
            step.eq(armed & (win.holds | self.ended) & (hd | (self.run & pipe_free))
                    & set_gate),
            self.fire.eq(step & ~hd),
            win.step.eq(step), win.hend.eq(pos - T.nb),
            up.tail.eq(win.tail), up.nb.eq(T.nb), up.base.eq(T.base),
        ]
        with m.If(step & ~win.holds):
            m.d.sync += overrun.eq(1)

        if W & (W - 1) == 0:
            rest = pos[:exact_log2(W)]
        else:
            rest = pos - W * sum((pos >= j * W).as_unsigned() for j in range(1, self._P // W + 1))

        # The new state: the update, or a resume's state (its prologue reads no bits).
        new = Signal(R)
        m.d.comb += new.eq(Mux(resume & hd, self.rstate, up.next))
        with m.If(step):
            m.d.sync += [T.symbol.eq(nxt.symbol), T.need.eq(nxt.need),
                         zc.eq(Mux(tail == 0, Mux(zc == N - 1, zc, zc + 1), 0))]
            with m.If(~hm):
                m.d.sync += [T.nb.eq(nxt.nb), T.base.eq(nxt.base)]
            with m.If(hd):
                m.d.sync += [hc.eq(hc + 1), hd.eq(hc != N - 1), hm.eq(hc < N - 2 if N > 2 else 0),
                             rp.eq(hc + 1 >= N - self.read_ahead)]
            if N >= 3:
                m.d.sync += E.eq(rd.data)
            for j in range(len(flight) - 1):
                m.d.sync += flight[j].eq(flight[j + 1])
            if flight:
                m.d.sync += flight[-1].eq(new)

        # The pair, in two registers: off the loops.
        p_symbol = Signal.like(T.symbol)
        p_top = Signal(max(1, K))
        p_k = Signal(range(K + 1))
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.comb += self.pending.eq(p_valid | self.o.valid)
        with m.If(p_valid & out_free):
            m.d.sync += [self.o.valid.eq(1), self.o.p.symbol.eq(p_symbol), p_valid.eq(0)]
            if K:
                m.d.sync += self.o.p.extra.eq(p_top & thermometer(p_k, K))
        with m.If(self.fire):
            m.d.sync += [p_valid.eq(1), p_symbol.eq(T.symbol), p_k.eq(T.need - T.nb)]
            if K:
                m.d.sync += p_top.eq(win.head[:K])

        xa_next = Signal(R)
        m.d.comb += xa_next.eq(Mux(step, flight[0] if flight else new, xa))
        if sh.sets > 1:
            m.d.comb += self.read.eq(step & rp)
        if sh.programmable and sh.sets > 1:
            wr = table.write_port()
            m.d.comb += [wr.addr.eq(self.cfg.p.addr), wr.data.eq(self.cfg.p.data), wr.en.eq(self.cfg.valid),
                         self.cfg.ready.eq(1)]
        elif sh.programmable:
            wr = table.write_port()
            we, wd = Signal(), Signal(self._entry)
            m.d.sync += [we.eq(self.cfg.valid), wd.eq(self.cfg.p.data)]
            m.d.comb += [wr.addr.eq(xa), wr.data.eq(wd), wr.en.eq(we), self.cfg.ready.eq(1)]
            # The write's address wins over a step's state (a write comes only while no stream runs).
            with m.If(self.cfg.valid):
                m.d.comb += xa_next.eq(self.cfg.p.addr)
        m.d.comb += rd.addr.eq(Cat(xa, self.table_set) if sh.sets > 1 else xa)
        m.d.sync += xa.eq(xa_next)

        with m.If(marker_now):
            m.d.sync += [pos.eq(in_pos), first.eq(0), no_marker.eq(self.i.payload == 0),
                         armed.eq(self.i.payload != 0)]
        with m.If(step):
            m.d.sync += pos.eq(rest + Mux(hm, hadv, nxt.need))
        # A start wins over a step in its clock (last here): the step is a finished or failed stream's
        # (``run`` is low then), and the prologue rewrites every register it moved. A step that waited
        # for ``start`` and the table write instead put the shell's acceptance in front of the word take.
        with m.If(self.start.valid):
            p = self.start.p
            m.d.comb += [win.clear.eq(1), win.clear_off.eq(Mux(p.resume & (p.bit != 0), W - p.bit, 0))]
            m.d.sync += [no_marker.eq(0), overrun.eq(0), first.eq(~p.resume), armed.eq(p.resume),
                         hc.eq(0), hd.eq(1), hm.eq(N > 1),
                         T.nb.eq(R), T.base.eq(0), resume.eq(p.resume), hadv.eq(Mux(p.resume, 0, R)), rp.eq(0),
                         pos.eq(win.clear_off)]
        self.probe = TansXnDecoderCoderProbe(
            window=win, step=step, T=T, E=E if N >= 3 else None, xa=xa, flight=flight, pos=pos, hc=hc, hd=hd,
            hm=hm, hadv=hadv, resume=resume, first=first, no_marker=no_marker, armed=armed, overrun=overrun,
            zc=zc, p_valid=p_valid, p_symbol=p_symbol, p_top=p_top, p_k=p_k)
        return m
