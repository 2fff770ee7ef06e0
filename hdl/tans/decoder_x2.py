"""The two-state tANS decoder's coder (``tansRx2``, ``docs/bitstream.md`` §8): state table,
:class:`~.window.PairWindow`, :class:`~.update.TansTailUpdate`, one pair per clock. The formal
harnesses' ``tans-decoder-x2`` build; the registry ships :class:`~.decoder_xn.TansXnDecoderCoder`.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..common import bits_for, pair_layout
from .shape import TansShape, decoder_entry_layout, tans_decoder_writes, thermometer
from .update import TansTailUpdate
from .window import PairWindow

__all__ = ["TansX2DecoderCoder"]


class TansX2DecoderCoder(wiring.Component):
    """The tANS decoder's coder for streams of two interleaved states (``tansRx2``, ``docs/bitstream.md``
    §8), one pair per clock; what Table 3 measures for this bitstream.

    Pair ``j`` is decoded with lane ``j mod 2``'s state, so each state has two clocks: in one the
    table is read at the address register ``xa`` (the state of the *next* pair's lane) into the entry
    register ``T``; in the other ``T`` decodes its pair and the lane's next state goes back into ``xa``.
    The window (:class:`PairWindow`) is driven by ``pos``, the current pair's field end, which is
    computed one clock ahead from the table's ``need``. The extra bits are read right-aligned, as the
    bits that end at ``pos - nb`` (where the state bits begin), and masked to ``k = need - nb`` at the
    output register: no shifter.

    Ports
    -----
    start : In(stream)
        ``{resume, state, bit}``: begin a stream. ``resume`` = 0: the first word holds the marker,
        then ``X_0`` and ``X_1`` (``R`` bits each) follow. ``resume`` = 1: ``state`` holds the two
        state indices, the state of the command's first pair in the low ``R`` bits and the other
        lane's above (a checkpoint before pair ``i`` gives ``s[i mod 2] | s[(i + 1) mod 2] << R``);
        ``bit`` as in :class:`TansDecoderCoder`. Always ready.
    i, o, run, ended, fire, pending, decoding, starved, no_marker, cfg
        As in :class:`TansDecoderCoder` (``starved`` also when the marker word never comes).
    empty : Out(1)
        The window holds no word (the end check: a stream read to its end has none left; a step
        never ends inside a word it has not read to its end unless it overran, which ``starved``
        reports). :class:`TansDecoderCoder` has ``avail`` (its bits) instead.
    state : Out(2 R)
        The two lanes' state indices (the end check wants 0).

    Pipeline and loops (every loop one clock, each from registers)
    ---------------------------------------------------------------
    * ``xa`` → table (LUT-RAM, written at ``xa`` like the one-state coder: single-port) → ``T``, and
      → ``need`` → ``pos % W + need`` → ``pos``.
    * ``pos`` → the ``R`` bits ending there (:func:`_gather`: 4:1 multiplexers, 3 levels) → mask by
      ``T.nb``, OR ``T.base`` → ``xa``.
    * ``pos``, word count → ``holds`` → step → slot enables.

    The stream head: the marker's position is found as the first word is taken (a leading-zero count
    by halving) and ``pos`` is set to the end of ``X_0``; two prologue steps run through the same state update with a constant entry
    (``nb = R``, ``base = 0``) and read ``X_0``, ``X_1``; a resume takes one, which loads ``X_1`` (held in
    a register since the start) into ``xa`` in place of the state update (an input of the LUT that
    already selects ``xa``'s next value, where loading ``T.base`` with it took a multiplexer per bit).
    The prologue runs while ``run`` is low. Latency: a pair reaches ``o`` two clocks after it is
    decoded (as :class:`TansDecoderCoder`). Between two streams: the first word lands, then the two
    state reads (3 to 4 idle clocks between back-to-back commands' pairs, as with one state).

    Measured area, clock and the variants tried: ``docs/design/tans.md`` (two-state decoder).
    """

    def __init__(self, shape: "TansShape"):
        self._shape = sh = shape
        if sh.sets > 1:
            raise ValueError("table_sets > 1 needs one state (tans8): with two states the table is read a "
                             "clock before the pair, across a set switch")
        self._entry = decoder_entry_layout(sh)
        W = sh.W
        self._P = W + max(sh.need_max - 1, sh.R)
        ports = {
            "start": In(stream.Signature(data.StructLayout({"resume": 1, "state": 2 * sh.R, "bit": bits_for(W - 1)}))),
            "i": In(stream.Signature(W)),
            "o": Out(stream.Signature(pair_layout(sh.symbol_bits, sh.K))),
            "run": In(1), "ended": In(1), "fire": Out(1), "pending": Out(1), "decoding": Out(1), "starved": Out(1),
            "no_marker": Out(1), "state": Out(2 * sh.R),
            "empty": Out(1),
        }
        if sh.programmable:
            ports["cfg"] = In(stream.Signature(data.StructLayout({"addr": sh.R, "data": self._entry})))
        super().__init__(ports)

    @property
    def pos_max(self) -> int:
        """The largest field end ``P`` the window serves: ``W + max(R + K - 1, R)``."""
        return self._P

    @property
    def window_bits(self) -> int:
        """Bits of the window's ring: ``D W`` (:class:`PairWindow`)."""
        return (1 << (self._P // self._shape.W).bit_length()) * self._shape.W

    def elaborate(self, platform):
        sh = self._shape
        R, W, K = sh.R, sh.W, sh.K
        H = max(R, K, 1)
        m = Module()
        init = [] if sh.table is None else [r["data"] for r in tans_decoder_writes(sh.table)]
        m.submodules.table = table = Memory(shape=self._entry, depth=sh.L, init=init)
        rd = table.read_port(domain="comb")
        m.submodules.window = win = PairWindow(W, self._P, H, R)
        wiring.connect(m, wiring.flipped(self.i), win.i)
        m.submodules.update = up = TansTailUpdate(R)

        xa = Signal(R)                          # table address: the state of the next pair's lane
        xo = Signal(R)                          # the state whose entry is in T (the end check)
        T = Signal(self._entry)                 # the current pair's entry
        pos = Signal(range(self._P + 1))        # where the current pair's field ends (PairWindow)
        head = Signal(2)                        # prologue steps left (state reads / the resume fill)
        first = Signal()                        # the next word taken holds the marker
        no_marker = Signal()
        overrun = Signal()
        x1 = Signal(R)                          # a resume's second state, for xa at its one prologue step
        use_x1 = Signal()                       # that step is next (xa takes x1, not the state update)
        m.d.comb += [self.state.eq(Cat(xa, xo)), self.empty.eq(win.empty), self.decoding.eq(head == 0),
                     self.no_marker.eq(no_marker), self.start.ready.eq(1), win.pos.eq(pos),
                     self.starved.eq(overrun | (self.ended & first))]

        # The marker, found as the first word is taken: pos becomes the end of X_0 (skip + R).
        in_pos = Signal.like(pos)
        # The marker bit's position as a leading-zero count, by halving (zero padding below a word that
        # is not a power of two wide): log2(W) levels of "is the upper half zero?" and a 2:1 select.
        # Measured: about 10 LUTs fewer than a W-way priority chain (one level deeper; off every loop).
        wb = 1 << (W - 1).bit_length()
        v = Cat(Const(0, wb - W), self.i.payload)
        zeros = []
        while len(v) > 1:
            h = len(v) // 2
            zeros.append(v[h:] == 0)
            v = Mux(zeros[-1], v[:h], v[h:])
        m.d.comb += in_pos.eq(Cat(*reversed(zeros)) + 1 + R)
        # A word is taken at the stream head only in clocks without a step (a start, or ``first``),
        # when the window's ready is just "a slot is free": that register, not ``i.ready`` (which
        # follows the step), keeps the marker off the step's path.
        marker_now = Signal()
        m.d.comb += marker_now.eq(self.i.valid & win.room & Mux(self.start.valid, ~self.start.p.resume, first))

        out_free = ~self.o.valid | self.o.ready
        p_valid = Signal()
        pipe_free = Signal()
        quiet = ~self.start.valid & (~self.cfg.valid if sh.programmable else 1)
        step = Signal()
        m.d.comb += [
            pipe_free.eq(~p_valid | out_free),
            step.eq(~first & ~no_marker & (win.holds | self.ended) & quiet
                    & ((head != 0) | (self.run & pipe_free))),
            self.fire.eq(step & (head == 0)),
            win.step.eq(step), win.hend.eq(pos - T.nb),
            up.tail.eq(win.tail), up.nb.eq(T.nb), up.base.eq(T.base),
        ]
        with m.If(step & ~win.holds):
            m.d.sync += overrun.eq(1)

        # The next field's end: the offset left by this step plus the next pair's need.
        if W & (W - 1) == 0:
            rest = pos[:exact_log2(W)]
        else:
            rest = pos - W * sum((pos >= j * W).as_unsigned() for j in range(1, self._P // W + 1))
        xa_next = Signal(R)
        m.d.comb += xa_next.eq(xa)
        with m.If(step):
            # symbol and need only matter for pairs: loaded as read (a clock enable, no multiplexer);
            # nb and base keep the start's state-read entry (nb = R, base = 0) through the first state read.
            m.d.sync += [xo.eq(xa), head.eq(head - (head != 0)), use_x1.eq(0), T.symbol.eq(rd.data.symbol),
                         T.need.eq(rd.data.need)]
            with m.If(head != 2):
                m.d.sync += [T.nb.eq(rd.data.nb), T.base.eq(rd.data.base)]

        # The pair, in two registers (as TansDecoderCoder): the decoded step, then ``o`` with the
        # extra right-aligned, off the loops.
        # p_top holds the K bits at the pair's offset, its k extra bits at the top: the extra is
        # p_top >> (K - k), with K - k = K + nb - need computed from T at the decode.
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

        if sh.programmable:
            # Written at the address register: one address, a single-port LUT-RAM (RAM256X1S).
            wr = table.write_port()
            we, wd = Signal(), Signal(self._entry)
            m.d.sync += [we.eq(self.cfg.valid), wd.eq(self.cfg.p.data)]
            m.d.comb += [wr.addr.eq(xa), wr.data.eq(wd), wr.en.eq(we), self.cfg.ready.eq(1)]
            with m.If(self.cfg.valid):
                m.d.comb += xa_next.eq(self.cfg.p.addr)
        m.d.comb += rd.addr.eq(xa)

        with m.If(self.start.valid):
            p = self.start.p
            m.d.comb += [win.clear.eq(1), win.clear_off.eq(Mux(p.resume & (p.bit != 0), W - p.bit, 0)),
                         xa_next.eq(p.state[:R])]
            m.d.sync += [no_marker.eq(0), overrun.eq(0), first.eq(~p.resume), head.eq(Mux(p.resume, 1, 2)),
                         T.nb.eq(R), T.base.eq(0), x1.eq(p.state[R:]), use_x1.eq(p.resume),
                         pos.eq(win.clear_off)]
        with m.If(marker_now):
            m.d.sync += [pos.eq(in_pos), first.eq(0), no_marker.eq(self.i.payload == 0)]
        # pos's step value last (start, marker and step never meet): the adder feeds the outermost
        # select, one LUT before the register (the table → need → adder → pos loop is the ECP5 limit).
        with m.If(step):
            m.d.sync += pos.eq(rest + Mux(head == 2, R, rd.data.need))
        # The state update last: its select is the outermost multiplexer in front of ``xa``.
        m.d.sync += xa.eq(Mux(step, Mux(use_x1, x1, up.next), xa_next))
        return m
