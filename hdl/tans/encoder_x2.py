"""The tANS encoder coder for two interleaved states (``tans8x2``, ``docs/bitstream.md`` §8).

Pair ``j`` of a stream is coded with state ``j mod 2``. The encoder runs the pairs back to front, so
the state that codes a pair is the one that did *not* code the pair given just before it; the two
states take turns through a two-register ring, and each has two clocks for its step:

* clock A (:class:`TansEncoderStateRing`, the ``x`` register → ``slot`` register):
  ``n = nb_high - (X < threshold)``; ``slot = (cum - freq) + (X >> n)``; the pair's bits
  (``n`` low bits of ``X``, then ``k`` extra bits) leave for the packer;
* clock B (``slot`` register → ``x`` register): ``X := L | state[slot]``, a LUT-RAM read at a
  registered address, nothing else.

While one state is in A the other is in B; both registers advance together, one pair per clock.

Which hardware state is golden state 0 needs no pair count: the last pair given is pair 0 (golden
state 0), so the flush writes the state in ``x`` (the other one, golden state 1) first, then the
state read from ``slot`` (golden state 0), both in one step and one field of ``2R`` bits; the packer
appends the marker bit. Both states start at index 0; that is the ring's ``fresh`` flag (the state
behind ``slot`` is the initial one: the read gives 0) and a synchronous reset of ``x``, so no
multiplexer sits after the table read on the state's path.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..common import pair_layout, word_layout
from .packer import WideWordPacker, WordPacker
from .shape import x2_field_bits, x2_last_bits, x2_symbol_entry, x2_symbol_rows

__all__ = ["TansEncoderStateRing", "TansEncoderX2Coder"]


class TansEncoderStateRing(wiring.Component):
    """The two states of the encoder and its state table: ``x`` (clock A) and ``slot`` (clock B).

    On ``step`` the state in ``x`` is coded with the row ``base, thr, sh`` (registers of the coder's
    stage 1): ``n = R - sh - lt`` state bits, ``slot := set · 2**R | (base + (L|x) >> n)``; at the same
    time the other state comes back from the table: ``x := state[slot]`` (0 instead when ``fresh`` or
    ``restart``).

    One shifter serves the slot and the pair's bits: ``T = (lead·L | x) << skip`` with
    ``skip = R - n = sh + lt``; its high ``R`` bits are ``X >> n`` (the slot's offset) and its low
    ``R`` bits, ``low``, hold the ``n`` state bits the pair writes, at the top (zeros below). It
    shifts by ``sh`` beside the compare and then by ``lt`` (a 2:1 choice): shifting by ``sh + lt``
    directly measured 5 LUT-equivalents less but 8 levels and 156 MHz instead of 6 and about 185
    before the packer took ``lt`` as a carry-in; since then it measures 12 more (276 instead of 264)
    and 8 levels.

    Ports
    -----
    step : In(1)
        Advance both registers (one pair, or one flush or write step).
    restart : In(1)
        With ``step``: the stream ends here; both states become index 0 (``x`` now, the other on
        the next step through ``fresh``).
    base : In(R); thr : In(R - 1); sh : In(range(R + 1)); set : In
        The pair's row: ``thr = (threshold - L) / 2``, ``sh = R - nb_high``.
    lead : In(1)
        The state's leading bit (1: ``X = L | x``). A table write gives 0 with ``sh = thr = 0``,
        so that the slot is ``base``, the write's address.
    x : Out(R)
        The state index in clock A (a register).
    lt : Out(1)
        ``x < 2·thr``: the pair writes ``nb_high - 1`` state bits instead of ``nb_high``.
    low : Out(R)
        ``(x << (R - n)) mod 2**R``, ``R - n = sh + lt``: the pair's state bits end at bit ``R``.
    other : Out(R)
        The state behind ``slot``: the table read (combinational; 0 while ``fresh``), the one ``x``
        takes on the next step. After a stream's last pair it is golden state 0 while ``x`` holds
        golden state 1: the flush writes both in one step.
    we, wdata : In
        Write ``wdata`` to the state table at the ``slot`` register (the table is single-port: its
        one address is a register).
    """

    def __init__(self, table_log: int, set_bits: int, init=()):
        self._R, self._S, self._init = table_log, set_bits, list(init)
        R = table_log
        ports = {"step": In(1), "restart": In(1), "base": In(R), "thr": In(R - 1), "sh": In(range(R + 1)),
                 "lead": In(1), "x": Out(R), "lt": Out(1), "low": Out(R), "other": Out(R),
                 "we": In(1), "wdata": In(R)}
        if set_bits:
            ports["set"] = In(set_bits)
        super().__init__(ports)

    def elaborate(self, platform):
        R, S = self._R, self._S
        m = Module()
        m.submodules.states = states = Memory(shape=R, depth=1 << (R + S), init=self._init)
        rd = states.read_port(domain="comb")
        wr = states.write_port()
        slot = Signal(R + S)
        fresh = Signal(init=1)     # the state behind ``slot`` is a new stream's initial state
        T0, T = Signal(2 * R), Signal(2 * R)
        m.d.comb += [
            # x < 2·thr: the threshold is even (its bit 0 is not stored).
            self.lt.eq(self.x[1:] < self.thr),
            # X << sh beside the compare; lt then moves it one more place (a 2:1 choice that the
            # slot's adder absorbs), so the loop is compare -> choice -> add, not compare -> shift.
            T0.eq(Cat(self.x, self.lead) << self.sh),
            T.eq(Mux(self.lt, T0 << 1, T0)),
            self.low.eq(T[:R]),
            rd.addr.eq(slot), wr.addr.eq(slot), wr.en.eq(self.we), wr.data.eq(self.wdata),
            self.other.eq(Mux(fresh, 0, rd.data)),
        ]
        with m.If(self.step):
            m.d.sync += [slot[:R].eq(self.base + T[R:]), fresh.eq(self.restart)]
            if S:
                m.d.sync += slot[R:].eq(self.set)
            # A synchronous reset (the flip-flops' own), not a multiplexer after the table read.
            with m.If(fresh | self.restart):
                m.d.sync += self.x.eq(0)
            with m.Else():
                m.d.sync += self.x.eq(rd.data)
        return m

class TansEncoderX2Coder(wiring.Component):
    """The tANS encoder's coder for two interleaved states (``tans8x2``): one pair per clock.

    Ports
    -----
    i : In(stream)
        ``{symbol, extra}`` (and ``set`` with table sets), the pairs from the last to the first.
        ``ready`` comes from registers.
    o : Out(stream)
        ``W``-bit words in push order, a register; ``last`` marks a stream's final (partial) word.
    flush : In(1)
        High after the stream's last pair has been given (no pair is taken while it is high): the
        coder queues the flush (``X_1``, then ``X_0``: one field of ``2R`` bits; the packer appends
        the marker bit) behind the stream's pairs, one clock, and the next stream's states start at
        index 0.
    flushed : Out(1)
        The flush is queued this clock: the next stream's pairs may be given from the next clock,
        while this stream drains. Its last word leaves ``o`` later, marked ``last``.
    sym_cfg, state_cfg : In(stream), programmable cores
        Symbol rows :func:`x2_symbol_entry` at ``set · 2**symbol_bits + symbol`` (one per clock) and
        state-table rows at ``set << R | slot`` (through the pipeline: ``ready`` when stage 1 is free).
        Neither is given together with pairs.

    Pipeline
    --------
    1. The pair's symbol row, read combinationally at ``i``'s symbol, is registered with
       its ``sh = R - nb_high``, ``last = nb_high + k - 1`` and ``thr`` (no adder per pair). Flush
       and table-write steps enter here too, as rows of constants (the flip-flops' own set/reset).
    2. Clock A of the ring (:class:`TansEncoderStateRing`). The pair's field goes to the packer as
       ``{x << (R - n) (R bits), extra}`` with ``R - n = sh + lt``: its ``n`` state bits end right below
       the extra bits, so the extra bits need no shifter and the state bits one shift of ``R`` bits
       (beside the slot's); the packer starts the field at ``sh + lt``, ``last + 1 - lt`` bits
       (``lt`` goes to the packer as is, a carry-in of its adders). The flush step's field is
       ``{x, other}`` (``X_1`` with ``sh = lt = 0``, and ``X_0`` from the table read in the extra
       bits' place: an ``R``-bit choice, the price of a one-step flush).
    3. The :class:`WordPacker` (fields of at most ``W`` bits: the paper's ``R + K = 16``), else
       the :class:`WideWordPacker`.

    Clock B of the ring is the table read; two states make it a stage of its own. A pair's words
    are on ``o`` three clocks after the pair is taken; a stream's last word about six clocks after
    its last pair.

    The extra bits are used as given: a pair's additional data has ``k`` bits (the golden model's
    contract), so nothing above them is masked.

    A command boundary costs two clocks in all: the flush's one step through stage 1 and the marker's
    clock in the packer.

    Measured area, clock and the variants tried: ``docs/design/tans.md`` (two-state encoder).
    """

    def __init__(self, shape):
        self._shape = sh = shape
        R, K = sh.R, sh.K
        if sh.W < R + 1:
            raise ValueError(f"the two-state tANS encoder needs word_bits >= table_log + 1, not {sh.W} < {R + 1}")
        self._entry = x2_symbol_entry(sh)
        # A pair's field is at most R + K bits; the flush's is X_1 and X_0 (2R bits; the packer
        # appends the marker bit).
        self._F = x2_field_bits(sh)
        ports = {"i": In(stream.Signature(pair_layout(sh.symbol_bits, K, sh.set_bits))),
                 "o": Out(stream.Signature(word_layout(sh.W))),
                 "flush": In(1), "flushed": Out(1)}
        if sh.programmable:
            ports["sym_cfg"] = In(stream.Signature(data.StructLayout(
                {"addr": sh.symbol_bits + sh.set_bits, "data": self._entry})))
            ports["state_cfg"] = In(stream.Signature(data.StructLayout({"addr": R + sh.set_bits, "data": R})))
        super().__init__(ports)

    @property
    def field_bits(self) -> int:
        """Widest field the packer takes: ``max(R + K, 2R)`` (a pair's, the flush's)."""
        return self._F

    def elaborate(self, platform):
        sh = self._shape
        R, K, F, S = sh.R, sh.K, self._F, sh.set_bits
        m = Module()
        if sh.table is None:
            sym_init, state_init = [], []
        else:
            sym_init, state_init = x2_symbol_rows(sh.table, x2_last_bits(sh)), [int(v) for v in sh.table.encode_state]
        m.submodules.symbols = symbols = Memory(shape=self._entry, depth=sh.sets << sh.symbol_bits, init=sym_init)
        sym_rd = symbols.read_port(domain="comb")
        m.submodules.ring = ring = TansEncoderStateRing(R, S, state_init)
        m.submodules.packer = packer = (WordPacker if F <= sh.W else WideWordPacker)(sh.W, F)
        wiring.connect(m, packer.o, wiring.flipped(self.o))

        # Stage 1 registers.
        v1 = Signal()
        base1, thr1 = Signal(R), Signal(R - 1)
        sh1 = Signal(range(R + 1))     # R - nb_high: where the state bits are moved up to
        ext1 = Signal(max(1, K))
        last1 = Signal(x2_last_bits(sh))       # nb_high + k - 1 (modulo 2**width): see x2_symbol_entry
        end1, wr1 = Signal(), Signal()   # the flush's step; a table write's (no field)
        set1 = Signal(max(1, S))
        wd1, wd2, we2 = Signal(R), Signal(R), Signal()

        # Stage 2: clock A (the ring) and the pair's bits.
        lt = ring.lt
        advance = Signal()
        m.d.comb += [
            packer.i.valid.eq(v1 & ~wr1),
            # The n = nb_high - lt state bits end at bit R, right below the extra bits: no shifter
            # for the extra bits; the packer starts the field at bit ``R - n = sh + lt``.
            # The flush step: X_1 (in x: sh = lt = 0) and X_0 (read from the table) in one field.
            packer.i.p.bits.eq(Cat(ring.low, Mux(end1, ring.other, ext1))),
            packer.i.p.skip.eq(sh1),
            packer.i.p.lt.eq(lt),
            packer.i.p.last.eq(last1),
            packer.i.p.end.eq(end1),
            advance.eq(v1 & (wr1 | packer.i.ready)),
            # A flush or a table write restarts both states.
            ring.step.eq(advance), ring.restart.eq(end1 | wr1),
            ring.thr.eq(thr1), ring.sh.eq(sh1), ring.lead.eq(~wr1),
            ring.we.eq(we2), ring.wdata.eq(wd2),
        ]
        if S:
            m.d.comb += ring.set.eq(set1)
        m.d.sync += we2.eq(advance & wr1)
        with m.If(advance):
            m.d.sync += [v1.eq(0), wd2.eq(wd1)]

        # Stage 1: a table write, a flush step or a pair, in that priority.
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
        m.d.comb += [flush_step.eq(self.flush & free1 & ~write), self.flushed.eq(flush_step),
                     self.i.ready.eq(free1 & ~self.flush)]
        row = sym_rd.data
        pair = Signal()
        pseudo = Signal()        # a flush or table-write step: its row is made of constants
        m.d.comb += [pair.eq(self.i.valid & self.i.ready & ~write & ~flush_step), pseudo.eq(write | flush_step)]
        with m.If(pseudo | pair):
            m.d.sync += [v1.eq(1), end1.eq(flush_step), wr1.eq(write)]
        # Each register of the row: the constants of the pseudo rows first (the flip-flops' own
        # synchronous set/reset), the pair's value under the clock enable.
        # Flush: X_1 (all of x: sh = 0, lt = 0), then X_0 in the extra bits' place (k = R): 2R bits.
        # Write: lt = 0, sh = 0 and the state's leading bit 0 (ring.lead), so that the slot is the address.
        with m.If(pseudo):
            m.d.sync += [thr1.eq(0), sh1.eq(0), last1.eq(2 * R - 1)]
        with m.Elif(pair):
            # The extra bits are not masked to k: a pair's additional data has k bits (the golden
            # model's contract, docs/bitstream.md §1), so the bits above are 0.
            m.d.sync += [thr1.eq(row.thr), sh1.eq(row.sh),
                         ext1.eq(self.i.p.extra), last1.eq(row.last)]
        if sh.programmable:
            addr = self.state_cfg.p.addr
            # The write's address has a register of its own and is chosen after base1, where the
            # slot adder's LUTs absorb the choice (5 LUT-equivalents less than a multiplexer in
            # front of base1, measured; 8 flip-flops more).
            a1 = Signal(R)
            m.d.comb += ring.base.eq(Mux(wr1, a1, base1))
            with m.If(write):
                m.d.sync += [a1.eq(addr[:R]), wd1.eq(self.state_cfg.p.data)]
                if S:
                    m.d.sync += set1.eq(addr[R:])
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
        return m
