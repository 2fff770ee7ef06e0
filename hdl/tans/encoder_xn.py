"""The tANS encoder's coder for ``N >= 2`` interleaved states (``tansRxN``, ``docs/bitstream.md`` §8),
one pair per clock.

Pair ``j`` of a stream is coded with state ``j mod N``. The ``N`` states sit in a rotating register
chain (:class:`TansXnEncoderRing`): the state being coded is at its head and the state a step
produces enters at its tail, so no ``N``-way multiplexer grows with ``N``; the chain between the
table and the head is plain flip-flops with one clock enable (yosys maps it to ``SRL16E`` shift
registers, counted in the LUT-equivalents), and every loop is one clock, from registers. The ring
is ``x`` (clock A: compare, shift, slot adder), ``slot`` (clock B: the state-table read), then
``N - 2`` states in flight; the packer is the two-state encoder's (:class:`~.packer.WordPacker`).
Measured area and clock by ``N``: ``docs/design/tans.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..common import pair_layout, word_layout
from .packer import WideWordPacker, WordPacker
from .shape import xn_field_bits, xn_last_bits, xn_state_count, xn_symbol_entry, xn_symbol_rows

__all__ = ["TansXnEncoderRing", "TansXnEncoderRingProbe", "TansXnEncoderCoder", "TansXnEncoderCoderProbe"]


@dataclass(frozen=True)
class TansXnEncoderRingProbe:
    """The ring's registers besides its ports (its ``probe`` once elaborated): the state-table address
    ``slot`` of the state a step produced, ``fresh`` (that state is 0: the step restarted) and the
    states in flight (none for ``N = 2``). Read by the formal lemma ``encoder_pipeline`` of
    ``tans-encoder-x2``; not ports."""

    slot: Signal
    fresh: Signal
    flight: list


@dataclass(frozen=True)
class TansXnEncoderCoderProbe:
    """Stage 1's registers (a pair's row and extra bits, or a flush step or a table write), the flush
    steps queued ``fc``, and the ring and packer blocks (the coder's ``probe`` once elaborated; not
    ports), which the formal lemma ``encoder_pipeline`` of ``tans-encoder-x2`` ties to the golden
    ``N``-state encoder."""

    v1: Signal
    base1: Value
    thr1: Signal
    sh1: Signal
    ext1: Signal
    last1: Signal
    end1: Signal
    fl1: Signal
    wr1: Signal
    fc: Signal
    ring: "TansXnEncoderRing"
    packer: wiring.Component


class TansXnEncoderRing(wiring.Component):
    """The ``N`` states of the encoder and its state table: ``x`` (clock A), ``slot`` (clock B: the
    table read), then ``N - 2`` states in flight back to ``x``.

    On ``step`` the state in ``x`` is coded with the row ``base, thr, sh`` (registers of the coder's
    stage 1): ``n = R - sh - lt`` state bits, ``slot := set · 2**R | (base + (L|x) >> n)``, ``low``: the
    ``n`` state bits the pair writes, at the top of ``R`` bits; and every state moves one place: ``x`` takes the oldest state in flight, the first place
    in flight takes the table read at ``slot`` (0 when ``fresh``). ``restart`` with ``step`` marks the
    new ``slot`` ``fresh``: after ``N`` restarting steps (a flush, or table writes) every state is 0,
    the next stream's initial states.
    """

    def __init__(self, table_log: int, set_bits: int, states: int, init=()):
        self._R, self._S, self._N, self._init = table_log, set_bits, xn_state_count(states), list(init)
        self.probe: TansXnEncoderRingProbe | None = None       # set by elaborate
        R = table_log
        ports = {"step": In(1), "restart": In(1), "base": In(R), "thr": In(R - 1), "sh": In(range(R + 1)),
                 "lead": In(1), "x": Out(R), "lt": Out(1), "low": Out(R), "we": In(1), "wdata": In(R)}
        if set_bits:
            ports["set"] = In(set_bits)
        super().__init__(ports)

    def elaborate(self, platform):
        R, S, N = self._R, self._S, self._N
        m = Module()
        m.submodules.states = states = Memory(shape=R, depth=1 << (R + S), init=self._init)
        rd = states.read_port(domain="comb")
        wr = states.write_port()
        slot = Signal(R + S)
        fresh = Signal(init=1)
        T0, T = Signal(2 * R), Signal(2 * R)
        flight = [Signal(R, name=f"x{j}") for j in range(N - 2)]    # flight[0] <- the read; x <- flight[-1]
        m.d.comb += [
            self.lt.eq(self.x[1:] < self.thr),
            T0.eq(Cat(self.x, self.lead) << self.sh),
            T.eq(Mux(self.lt, T0 << 1, T0)),
            self.low.eq(T[:R]),
            rd.addr.eq(slot), wr.addr.eq(slot), wr.en.eq(self.we), wr.data.eq(self.wdata),
        ]
        with m.If(self.step):
            m.d.sync += [slot[:R].eq(self.base + T[R:]), fresh.eq(self.restart)]
            if S:
                m.d.sync += slot[R:].eq(self.set)
            first = flight[0] if flight else self.x
            # A synchronous reset (the flip-flops' own), not a multiplexer after the table read.
            with m.If(fresh):
                m.d.sync += first.eq(0)
            with m.Else():
                m.d.sync += first.eq(rd.data)
            if flight:
                for j in range(1, len(flight)):
                    m.d.sync += flight[j].eq(flight[j - 1])
                m.d.sync += self.x.eq(flight[-1])
        self.probe = TansXnEncoderRingProbe(slot=slot, fresh=fresh, flight=flight)
        return m

class TansXnEncoderCoder(wiring.Component):
    """The tANS encoder's coder for ``N >= 2`` interleaved states: one pair per clock.

    Three stages: (1) the pair's symbol row, read combinationally at ``i``'s symbol and registered
    with its shift and field length (no adder per pair; flush and table-write steps enter here as
    rows of constants); (2) clock A of the ring, :class:`TansXnEncoderRing`, and the pair's field;
    (3) the :class:`~.packer.WordPacker`, with ``N`` states in the ring. The encoder takes the pairs back to front, so after the stream's
    pair 0 (lane 0) the ring brings lanes ``N - 1, N - 2, ..., 0`` to ``x`` in the next ``N`` steps:
    exactly the flush's order (``X_{N-1}`` first, ``X_0`` last). The flush is therefore ``N`` steps of
    one ``R``-bit field each (``x`` itself: ``sh = lt = 0``), the last one marked ``end`` (the packer
    appends the marker bit); each restarts the ring, so the next stream's states are 0.

    Ports
    -----
    i : In(stream)
        ``{symbol, extra}`` (and ``set`` with table sets), the pairs from the last to the first.
        ``ready`` comes from registers.
    o : Out(stream)
        ``W``-bit words in push order, a register; ``last`` marks a stream's final (partial) word.
    sym_cfg, state_cfg : In(stream), programmable cores
        Symbol rows (:func:`xn_symbol_rows`) at ``set · 2**symbol_bits + symbol`` (one per clock) and
        state-table rows at ``set << R | slot`` (through the pipeline: ``ready`` when stage 1 is free).
        Neither is given together with pairs.
    flush : In(1)
        High after the stream's last pair has been given (no pair is taken while it is high).
    flushed : Out(1)
        The flush's last step is queued this clock: the next stream's pairs may follow from the next
        clock, while this stream drains (its last word leaves ``o`` marked ``last``).
    """

    def __init__(self, shape, states: int):
        self.probe: TansXnEncoderCoderProbe | None = None      # set by elaborate
        self._shape = sh = shape
        self._N = xn_state_count(states)
        R, K = sh.R, sh.K
        if sh.W < R + 1:
            raise ValueError(f"the interleaved tANS encoder needs word_bits >= table_log + 1, not {sh.W} < {R + 1}")
        self._entry = xn_symbol_entry(sh)
        self._F = xn_field_bits(sh)
        ports = {"i": In(stream.Signature(pair_layout(sh.symbol_bits, K, sh.set_bits))),
                 "o": Out(stream.Signature(word_layout(sh.W))),
                 "flush": In(1), "flushed": Out(1)}
        if sh.programmable:
            ports["sym_cfg"] = In(stream.Signature(data.StructLayout(
                {"addr": sh.symbol_bits + sh.set_bits, "data": self._entry})))
            ports["state_cfg"] = In(stream.Signature(data.StructLayout({"addr": R + sh.set_bits, "data": R})))
        super().__init__(ports)

    @property
    def states(self) -> int:
        return self._N

    @property
    def field_bits(self) -> int:
        return self._F

    @property
    def accumulator_bits(self) -> int:
        return self._shape.W

    def elaborate(self, platform):
        sh = self._shape
        R, K, F, S, N = sh.R, sh.K, self._F, sh.set_bits, self._N
        m = Module()
        if sh.table is None:
            sym_init, state_init = [], []
        else:
            sym_init, state_init = xn_symbol_rows(sh.table, sh), [int(v) for v in sh.table.encode_state]
        m.submodules.symbols = symbols = Memory(shape=self._entry, depth=sh.sets << sh.symbol_bits, init=sym_init)
        sym_rd = symbols.read_port(domain="comb")
        m.submodules.ring = ring = TansXnEncoderRing(R, S, N, state_init)
        m.submodules.packer = packer = (WordPacker if F <= sh.W else WideWordPacker)(sh.W, F)
        wiring.connect(m, packer.o, wiring.flipped(self.o))

        v1 = Signal()
        base1, thr1 = Signal(R), Signal(R - 1)
        sh1 = Signal(range(R + 1))
        ext1 = Signal(max(1, K))
        last1 = Signal(xn_last_bits(sh))
        end1, fl1, wr1 = Signal(), Signal(), Signal()   # the flush's last step; a flush step; a table write
        set1 = Signal(max(1, S))
        wd1, wd2, we2 = Signal(R), Signal(R), Signal()
        fc = Signal(range(N))                           # flush steps queued

        advance = Signal()
        m.d.comb += [
            packer.i.valid.eq(v1 & ~wr1),
            packer.i.p.bits.eq(Cat(ring.low, ext1)),
            packer.i.p.skip.eq(sh1),
            packer.i.p.lt.eq(ring.lt),
            packer.i.p.last.eq(last1),
            packer.i.p.end.eq(end1),
            advance.eq(v1 & (wr1 | packer.i.ready)),
            ring.step.eq(advance), ring.restart.eq(fl1 | wr1),
            ring.thr.eq(thr1), ring.sh.eq(sh1), ring.lead.eq(~wr1),
            ring.we.eq(we2), ring.wdata.eq(wd2),
        ]
        if S:
            m.d.comb += ring.set.eq(set1)
        m.d.sync += we2.eq(advance & wr1)
        with m.If(advance):
            m.d.sync += [v1.eq(0), wd2.eq(wd1)]

        free1 = Signal()
        m.d.comb += free1.eq(~v1 | advance)
        sym_addr = Cat(self.i.p.symbol, self.i.p.set) if S else self.i.p.symbol
        write = Signal()
        if sh.programmable:
            m.d.comb += [self.state_cfg.ready.eq(free1), write.eq(self.state_cfg.valid & free1),
                         self.sym_cfg.ready.eq(1)]
            sym_wr = symbols.write_port()
            m.d.comb += [sym_rd.addr.eq(Mux(self.sym_cfg.valid, self.sym_cfg.p.addr, sym_addr)),
                         sym_wr.addr.eq(sym_rd.addr), sym_wr.data.eq(self.sym_cfg.p.data),
                         sym_wr.en.eq(self.sym_cfg.valid)]
        else:
            m.d.comb += sym_rd.addr.eq(sym_addr)
        flush_step = Signal()
        fc_last = Signal()
        m.d.comb += [flush_step.eq(self.flush & free1 & ~write), fc_last.eq(fc == N - 1),
                     self.flushed.eq(flush_step & fc_last), self.i.ready.eq(free1 & ~self.flush)]
        with m.If(flush_step):
            m.d.sync += fc.eq(Mux(fc_last, 0, fc + 1))
        row = sym_rd.data
        pair = Signal()
        pseudo = Signal()
        m.d.comb += [pair.eq(self.i.valid & self.i.ready & ~write & ~flush_step), pseudo.eq(write | flush_step)]
        with m.If(pseudo | pair):
            m.d.sync += [v1.eq(1), end1.eq(flush_step & fc_last), fl1.eq(flush_step), wr1.eq(write)]
        # Flush step: one state (x itself: sh = 0, lt = 0), R bits. Write: the slot is the address.
        # (The extra bits are cleared: the wide packer takes every bit above a field as it is.)
        with m.If(pseudo):
            m.d.sync += [thr1.eq(0), sh1.eq(0), last1.eq(R - 1), ext1.eq(0)]
        with m.Elif(pair):
            m.d.sync += [thr1.eq(row.thr), sh1.eq(row.sh), ext1.eq(self.i.p.extra), last1.eq(row.last)]
        if sh.programmable:
            a1 = Signal(R)
            m.d.comb += ring.base.eq(Mux(wr1, a1, base1))
            with m.If(write):
                m.d.sync += [a1.eq(self.state_cfg.p.addr[:R]), wd1.eq(self.state_cfg.p.data)]
                if S:
                    m.d.sync += set1.eq(self.state_cfg.p.addr[R:])
            with m.Elif(pair):
                m.d.sync += base1.eq(row.base)
                if S:
                    m.d.sync += set1.eq(self.i.p.set)
        else:
            m.d.comb += ring.base.eq(base1)
            with m.If(pair):
                m.d.sync += base1.eq(row.base)
                if S:
                    m.d.sync += set1.eq(self.i.p.set)
        self.probe = TansXnEncoderCoderProbe(v1=v1, base1=base1, thr1=thr1, sh1=sh1, ext1=ext1, last1=last1, end1=end1,
                                             fl1=fl1, wr1=wr1, fc=fc, ring=ring, packer=packer)
        return m
