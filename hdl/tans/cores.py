"""The tANS cores for one and two states: a coder and, optionally, its command shell.

* :class:`TansCoreBase`: the read-only parameters every tANS core shares; :func:`expose_coder` wires a
  coder built without its shell to the core's ports.
* :class:`TansDecoder`: :class:`~.decoder_one.TansDecoderCoder` (``N = 1``) or
  :class:`~.decoder_x2.TansX2DecoderCoder` (``N = 2``) with :class:`~ansforge.hdl.shell.DecoderShell`.
* :class:`TansEncoder`: :class:`~.encoder_one.TansEncoderCoder` (``N = 1``) or
  :class:`~.encoder_x2.TansEncoderX2Coder` (``N = 2``) with :class:`~ansforge.hdl.shell.EncoderShell`.

These are the formal harnesses' builds; the core registry ships :mod:`.cores_xn`'s.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.wiring import In

from ...model.coding.codecs import TansCodec
from ...model.coding.tans import TansTable
from ..common import (COUNT_BITS, CoreParameters, WordCrc, bits_for, check_bool, check_int, core_codec,
                      decoder_command_layout, decoder_ports, encoder_command_layout, encoder_ports,
                      table_select_layout)
from ..link import connect_link
from ..shell import DecoderShell, EncoderShell, decoder_link, encoder_link
from .decoder_one import TansDecoderCoder
from .decoder_x2 import TansX2DecoderCoder
from .encoder_one import TansEncoderCoder
from .encoder_x2 import TansEncoderX2Coder
from .shape import (TansShape, decoder_entry_layout, symbol_entry, tans_decoder_writes, tans_encoder_writes,
                    x2_last_bits, x2_symbol_rows)
from .update import TansStateUpdate, TansTailUpdate
from .window import BitWindow, PairWindow

__all__ = ["expose_coder", "TansCoreBase", "TansDecoder", "TansEncoder"]


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
                                                  table_sets=sh.sets, set_bits=sh.set_bits)
        wiring.connect(m, wiring.flipped(self.cmd), shell.cmd)
        wiring.connect(m, wiring.flipped(self.i), shell.i)
        wiring.connect(m, coder.o, wiring.flipped(self.o))
        wiring.connect(m, shell.words, coder.i)
        connect_link(m, decoder_link(), shell, coder)
        m.d.comb += [
            coder.start.valid.eq(shell.start), coder.start.p.resume.eq(self.cmd.p.resume),
            coder.start.p.state.eq(self.cmd.p.state), coder.start.p.bit.eq(self.cmd.p.bit),
            shell.final_state_zero.eq(coder.state == 0),
            shell.window_empty.eq(coder.empty if self._states == 2 else coder.avail == 0),
            shell.out_valid.eq(coder.pending), self.done.eq(shell.done), self.status.eq(shell.status),
        ]
        if sh.programmable:
            m.d.comb += [coder.cfg.valid.eq(self.cfg.valid & shell.idle), coder.cfg.p.eq(self.cfg.p),
                         self.cfg.ready.eq(shell.idle)]
        if sh.sets > 1:
            wiring.connect(m, wiring.flipped(self.sel), shell.sel)
            m.d.comb += coder.table_set.eq(shell.table_set)
        return m

class TansEncoder(TansCoreBase):
    """tANS encoder: coding pairs in (back to front), words out in push order, one pair per clock.

    Parameters are those of :class:`TansDecoder` (no ``block_crc``); ``shell=False``
    builds the coder alone (its ports). A codec of two interleaved states (``tans8x2``,
    ``docs/bitstream.md`` §8) builds :class:`~.encoder_x2.TansEncoderX2Coder` (its symbol rows are
    :func:`~.shape.x2_symbol_entry`, which :meth:`table_writes` gives; its flush is queued behind
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
                 programmable: bool = False, table_sets: int = 1, shell: bool = True, count_bits: int = COUNT_BITS):
        codec = core_codec(TansCodec, codec, states=(1, 2), table_log=table_log, word_bits=word_bits)
        sh = TansShape(codec, max_symbols, max_extra_bits, table, programmable, table_sets)
        self._shape = sh
        self._shell = check_bool("shell", shell)
        self._count_bits = check_int("count_bits", count_bits, 1, COUNT_BITS)
        # Two interleaved states (tans8x2): the ring coder, whose table read has a clock of its own.
        self._coder_cls = TansEncoderX2Coder if codec.tans.states == 2 else TansEncoderCoder
        self._coder = self._coder_cls(sh)
        self._sym_entry = symbol_entry(sh)
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
        m.submodules.shell = shell = EncoderShell(self.cmd.p.shape())
        wiring.connect(m, wiring.flipped(self.cmd), shell.cmd)
        wiring.connect(m, coder.o, wiring.flipped(self.o))
        m.d.comb += [coder.i.p.eq(self.i.p), coder.i.valid.eq(self.i.valid & shell.take),
                     self.i.ready.eq(coder.i.ready & shell.take),
                     shell.pair.eq(self.i.valid & self.i.ready)]
        connect_link(m, encoder_link(), shell, coder)
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
        return m
