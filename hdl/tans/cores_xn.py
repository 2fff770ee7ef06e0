"""The tANS cores for ``N = 1 .. 16`` interleaved states (``tansR``, ``tansRxN``): what the core registry builds.

:class:`TansXnDecoder`, :class:`TansXnEncoder`: a coder and, optionally, its command shell. ``N = 1`` builds the one-state coders
(:mod:`.decoder_one`, :mod:`.encoder_one`: a single state has no clock to spare for a pipelined
table read), ``N >= 2`` :mod:`.decoder_xn`'s and :mod:`.encoder_xn`'s. The golden model is
:class:`~ansforge.model.coding.tans.TansCoder` with ``TansParams.states = N``
(``parse_codec("tans8x16")``).

Latency at a command boundary (``tests/hdl/test_tans_xn.py``): the decoder spends the marker word and ``N``
state reads, ``N + 1`` or ``N + 2`` idle clocks; the encoder ``N`` flush steps and the packer's marker
clock, ``N + 1`` (3 at ``N = 2``). Measured area, clock and throughput by ``N``: ``docs/design/tans.md``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.wiring import In

from ...model.coding.codecs import TansCodec
from ...model.coding.stream import MAX_STATES
from ...model.coding.tans import TansTable
from ..common import (COUNT_BITS, WordCrc, bits_for, check_bool, check_int, core_codec, decoder_command_layout,
                      decoder_ports, encoder_command_layout, encoder_ports)
from ..link import connect_link
from ..shell import DecoderShell, EncoderShell, decoder_link, encoder_link
from .cores import TansCoreBase, expose_coder
from .decoder_one import TansDecoderCoder
from .decoder_xn import TansXnDecoderCoder
from .encoder_one import TansEncoderCoder
from .encoder_xn import TansXnEncoderCoder
from .shape import TansShape, decoder_entry_layout, tans_decoder_writes, tans_encoder_writes, xn_symbol_rows
from .update import TansStateUpdate, TansTailUpdate
from .window import BitWindow, PairWindow

__all__ = ["XN_STATES", "TansXnDecoder", "TansXnEncoder"]


#: The state counts the cores of this module take (``MAX_STATES`` of the golden model).
XN_STATES = tuple(range(1, MAX_STATES + 1))

class TansXnDecoder(TansCoreBase):
    """tANS decoder: words (top of stack first) in, coding pairs out, one pair per clock, for streams of
    ``N = 1 .. 16`` interleaved states: :class:`TansXnDecoderCoder` (``N >= 2``) or
    :class:`~.decoder_one.TansDecoderCoder` (``N = 1``) in the command shell :class:`~.shell.DecoderShell`.

    Parameters
    ----------
    codec : TansCodec or None
        ``tansR`` or ``tansRxN`` (or ``table_log`` / ``word_bits`` for one state).
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
        ``True`` (default): the command shell (counters, status, end-of-stream checks, CRC) around the
        coder. ``False``: the coder alone (its ports), as Table 3 measures it.
    count_bits : int
        Width of a command's pair and word counts, 1..32 (default 32).

    Ports (``shell=True``)
    ----------------------
    cmd : In(stream)
        :func:`~.common.decoder_command_layout` with ``state`` of ``N R`` bits: a resume's lane state
        indices, the command's first pair's lane lowest (``sim/jobs.py`` ``command_state``). The core
        holds them in a register (loaded with the command, a clock enable only) and gives the coder
        lane ``rlane``'s (an ``N``-way select, outside the coder).
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
    cfg : In(stream), programmable cores only
        ``{addr: R (+ set) bits, data: {symbol, nb, base, need}}`` writes to the state table
        (accepted when idle, one per clock).
    sel : In(stream), cores with ``table_sets > 1``
        :func:`~.common.table_select_layout` runs: the next ``count`` pairs use table set ``set``
        (a switch costs no cycle).

    Commands back to back: ``cmd`` is accepted while the previous command ends, so a driver sends
    commands without waiting for ``done`` and counts ``done`` clocks. Table writes (``cfg``) are
    accepted only in ``IDLE`` with no command offered (a command offered in the same clock goes first).

    Reset: the table is a memory and a reset leaves it as it is (only registers reset): a programmed
    table survives a reset. The command being run and a status still waiting to be reported are
    dropped (no ``done`` comes for them); a command offered on ``cmd`` but not yet accepted is
    accepted after the reset (``tests/hdl/test_command_queue.py``).
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
            from ..common import table_select_layout
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
        connect_link(m, decoder_link(), shell, coder)
        m.d.comb += [
            coder.start.valid.eq(shell.start), coder.start.p.resume.eq(self.cmd.p.resume),
            coder.start.p.bit.eq(self.cmd.p.bit),
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
    """tANS encoder: coding pairs in (back to front), words out in push order, one pair per clock, for
    ``N = 1 .. 16`` interleaved states: :class:`TansXnEncoderCoder` (``N >= 2``) or
    :class:`~.encoder_one.TansEncoderCoder` (``N = 1``) in :class:`~.shell.EncoderShell`.

    Parameters are those of :class:`TansXnDecoder` (no ``block_crc``); ``shell=False`` builds the
    coder alone (its ports).

    Ports (``shell=True``)
    ----------------------
    cmd : In(stream)
        :func:`~.common.encoder_command_layout`: encode ``count`` pairs from state ``L``, then write
        the final state indices and the marker bit and flush (``docs/bitstream.md``).
    i : In(stream)
        ``{symbol, extra}``, the command's pairs from the last to the first; with ``table_sets > 1``
        also ``set``, the table set that codes the pair (switches cost no cycle).
    o : Out(stream)
        ``W``-bit words in push order (a register); ``last`` marks the command's final (partial) word.
    done : Out
        High for one clock per command, in command order, in the clock after the transfer of its
        ``last`` word (the coder's ``flushed`` comes when its flush is queued). The next command is
        accepted in the clock of that transfer (a driver counts ``done`` clocks).
    sym_cfg, state_cfg : In(stream), programmable cores only
        Writes ``{addr, data}`` to the symbol table (address ``set · 2**symbol_bits + symbol``) and to
        the encode-state table (``set << R | slot``); accepted when idle.

    Reset: the tables are memories and keep their contents through a reset; the states return to
    ``L`` and the pipeline empties; the running command is dropped (no ``done`` for it).
    """

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
                     shell.pair.eq(self.i.valid & self.i.ready)]
        connect_link(m, encoder_link(), shell, coder)
        if self._states > 1:
            m.d.sync += self.done.eq(self.o.valid & self.o.ready & self.o.p.last)
        else:
            m.d.comb += self.done.eq(shell.done)
        for name in ("sym_cfg", "state_cfg"):
            if name in self.signature.members:
                a, b = getattr(self, name), getattr(coder, name)
                m.d.comb += [b.valid.eq(a.valid & shell.idle), b.p.eq(a.p), a.ready.eq(shell.idle & b.ready)]
        return m
