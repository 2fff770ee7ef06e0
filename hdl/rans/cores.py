"""The rANS cores, coder plus command shell: :class:`RansDecoder` and :class:`RansEncoder` (each picks
the one-state or the interleaved coder by ``codec.states``); ``shell=False`` builds the coder alone.
"""

from __future__ import annotations

from amaranth.hdl import Module, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In

from ...model.coding.codecs import RansCodec
from ...model.coding.rans import RansTable
from ..common import (COUNT_BITS, BlockCrc, CoreParameters, TableSelect, check_bool, core_codec, decoder_ports, encoder_ports,
                      table_select_layout)
from .link import connect_link, decoder_link, decoder_xn_link, encoder_link, encoder_xn_link
from .shape import rans_writes, RansShape
from .tables import RansTables
from .decoder_one import RansDecoderCoder
from .decoder_xn import TAG_BITS, XN_STATES, RansDecoderCoderXN
from .shell import RansDecoderShell, RansEncoderShell
from .shell_xn import RansDecoderShellXN, RansEncoderShellXN
from .encoder_one import RansEncoderCoder
from .encoder_xn import ENCODER_XN_STATES, RansEncoderXnCoder


class _RansCore(CoreParameters):
    """Read-only parameters shared by the rANS cores."""

    @property
    def state_bits(self) -> int:
        return self._shape.S

    @property
    def precision_bits(self) -> int:
        return self._shape.P

    @property
    def shell(self) -> bool:
        """Whether the command shell is built (``False``: the coder alone, what Table 3 measures)."""
        return self._shell

    @property
    def count_bits(self) -> int:
        """Width of a command's pair and word counts (the shell's counters)."""
        return self._shape.count_bits

    def table_writes(self, tables) -> dict[str, list[dict]]:
        """The ``cfg`` writes (unpacked ``{addr, data}`` dicts, :func:`rans_writes`) that load ``tables[t]``
        as table set ``t``."""
        sh = self._shape
        return {"cfg": [w for t, table in enumerate(tables)
                        for w in rans_writes(table, sh.max_symbols, t, sh.interleaved, sh.recip)]}

    def _setup(self, sh: RansShape, shell: bool, ports: dict, coder_cls) -> None:
        """Validate ``shell`` and take the shelled ``ports`` (plus ``cfg``) or the coder's."""
        self._shape, self._coder_cls = sh, coder_cls
        self._shell = check_bool("shell", shell)
        if shell and sh.programmable:
            ports["cfg"] = sh.cfg_port()
        super().__init__(ports if shell else coder_cls.ports(sh))

    def _coder(self) -> tuple[Module, wiring.Component]:
        """A module with the coder; without the shell, its ports are the core's."""
        m = Module()
        m.submodules.coder = coder = self._coder_cls(self._shape)
        if not self._shell:
            wiring.connect(m, wiring.flipped(self), coder)      # the core's ports are the coder's
        return m, coder

    def _gate_cfg(self, m: Module, coder: wiring.Component, idle: Value) -> None:
        """Tables are written between commands only."""
        if self._shape.programmable:
            m.d.comb += [coder.cfg.valid.eq(self.cfg.valid & idle), coder.cfg.p.eq(self.cfg.p),
                         self.cfg.ready.eq(coder.cfg.ready & idle)]


class RansDecoder(_RansCore):
    """rANS decoder: words (top of stack first) in, coding pairs out, one pair per clock.

    Parameters
    ----------
    state_bits, word_bits, precision_bits : int
        ``S``, ``W``, ``P`` with ``S >= W + P`` (presets: paper 48/32/16, constriction 64/32/24).
    max_symbols : int
        Symbol slots, 2..256 (the paper: 64).
    max_extra_bits : int
        Widest additional data of a symbol, 0..32 (the paper: 8).
    table : RansTable or None
        Baked-in table, or the reset contents of a programmable core (``None``: no symbols).
    programmable : bool
        Add the ``cfg`` stream (:func:`rans_writes`; accepted when idle).
    block_crc : bool
        As for :class:`~ansforge.hdl.tans.TansXnDecoder`.
    table_sets : int
        As for :class:`~ansforge.hdl.tans.TansXnDecoder` (context tables; ``sel`` port).
    shell : bool
        ``True``: :class:`RansDecoderCoder` behind :class:`RansDecoderShell`, with the ports of
        :class:`~ansforge.hdl.tans.TansXnDecoder` and a command ``state`` of ``S`` bits (``bit`` must be
        0). ``False``: the coder alone, with its ports (what Table 3 measures).
    count_bits : int
        Width of a command's pair and word counts (the shell's counters), 1..32 (default 32; as for
        :class:`~ansforge.hdl.tans.TansXnDecoder`).

    Reset: the tables are memories and survive (the module docstring); the shell drops the running
    command and a report still waiting (no ``done`` comes for them), see :class:`RansDecoderShell`.
    """

    def __init__(self, codec: RansCodec | None = None, *, state_bits: int | None = None, word_bits: int | None = None,
                 precision_bits: int | None = None, max_symbols: int = 64, max_extra_bits: int = 8,
                 table: RansTable | None = None, programmable: bool = False, block_crc: bool = True,
                 table_sets: int = 1, shell: bool = True, count_bits: int = COUNT_BITS):
        codec = core_codec(RansCodec, codec, states=(1, *XN_STATES), state_bits=state_bits, word_bits=word_bits,
                           precision_bits=precision_bits)
        sh = RansShape(codec, max_symbols, max_extra_bits, table, programmable, table_sets, count_bits,
                        interleaved_decoder=codec.states > 1)
        self._block_crc = check_bool("block_crc", block_crc)
        self._interleaved = codec.states > 1
        if self._interleaved:
            RansDecoderCoderXN.check_shape(sh)
        # Words on ``i``: two stream words each where a pair may pop twice (RansDecoderCoderXN.port_words).
        pw = RansDecoderCoderXN.port_words(sh) if self._interleaved else 1
        ports = decoder_ports(sh.S, 1, sh.W * pw, sh.symbol_bits, sh.K, count_bits=sh.count_bits)
        if sh.sets > 1:
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        self._setup(sh, shell, ports, RansDecoderCoderXN if self._interleaved else RansDecoderCoder)

    def blocks(self) -> dict[str, wiring.Component]:
        """The core's blocks, each a fresh Component that synthesizes alone (``--breakdown``): the
        coder and, inside it, its tables, its multiply-add and, with several table
        sets, the table select; with the shell, the shell (its CRC unit included) and the CRC unit by itself."""
        sh = self._shape
        out = {"coder": self._coder_cls(sh), "tables": RansTables(sh, buckets=True)}
        out["multiply-add"] = (RansDecoderCoderXN if self._interleaved else RansDecoderCoder).multiply_add(sh)
        if sh.sets > 1:
            out["table select"] = TableSelect(sh.set_bits)
        if self._shell:
            out["shell"] = self._shell_cls(sh, self._block_crc)
            if self._block_crc:
                out["crc"] = BlockCrc(2 * sh.W, zeros_first=sh.W) if self._interleaved else BlockCrc(sh.W)
        return out

    @property
    def _shell_cls(self):
        return RansDecoderShellXN if self._interleaved else RansDecoderShell

    def elaborate(self, platform):
        sh = self._shape
        m, coder = self._coder()
        if not self._shell:
            return m
        m.submodules.shell = sh_ = self._shell_cls(sh, self._block_crc)
        wiring.connect(m, wiring.flipped(self.cmd), sh_.cmd)
        wiring.connect(m, sh_.word, coder.i)
        wiring.connect(m, wiring.flipped(self.o), coder.o)
        if sh.sets > 1:
            wiring.connect(m, wiring.flipped(self.sel), coder.sel)
        m.d.comb += [sh_.i.valid.eq(self.i.valid), sh_.i.p.eq(self.i.p), self.i.ready.eq(sh_.i.ready),
                     self.done.eq(sh_.done), self.status.eq(sh_.status)]
        if self._interleaved:
            link = decoder_xn_link(sh, TAG_BITS, RansDecoderCoderXN.port_words(sh))
            m.d.comb += sh_.pair_taken.eq(coder.o.valid & self.o.ready)
        else:
            link = decoder_link(sh)
            m.d.comb += sh_.pair_valid.eq(coder.o.valid)
        connect_link(m, link, sh_, coder)
        self._gate_cfg(m, coder, sh_.idle)
        return m


class RansEncoder(_RansCore):
    """rANS encoder: coding pairs in (back to front), words out in push order, one pair per clock.

    Parameters are those of :class:`RansDecoder` (no ``block_crc``; ``count_bits`` too); with ``shell=True`` the ports are
    those of :class:`~ansforge.hdl.tans.TansXnEncoder` (``cfg`` as in :class:`RansDecoder`; with
    ``table_sets`` the pairs carry their ``set``), with ``shell=False`` those of
    :class:`RansEncoderCoder`.

    ``codec.states`` picks the coder: one state, :class:`RansEncoderCoder` (its divider is one clock);
    ``N`` interleaved states (``docs/bitstream.md`` §8, ``N`` in :data:`ENCODER_XN_STATES`: ``rans16x16``),
    :class:`RansEncoderXnCoder`, a ring of ``N`` pipeline stages that writes the ``N`` states' flush
    itself while the next command's pairs go in (its shell :class:`RansEncoderShellXN`; with
    ``shell=False`` the ports are that coder's). Other state counts are refused (``ConfigError``), as
    is an ``N``-state core whose pairs may code more than one chunk (``max_extra_bits > P``:
    ``ValueError``).
    """

    def __init__(self, codec: RansCodec | None = None, *, state_bits: int | None = None, word_bits: int | None = None,
                 precision_bits: int | None = None, max_symbols: int = 64, max_extra_bits: int = 8,
                 table: RansTable | None = None, programmable: bool = False, table_sets: int = 1, shell: bool = True,
                 count_bits: int = COUNT_BITS):
        codec = core_codec(RansCodec, codec, states=(1, *ENCODER_XN_STATES), state_bits=state_bits,
                           word_bits=word_bits, precision_bits=precision_bits)
        sh = RansShape(codec, max_symbols, max_extra_bits, table, programmable, table_sets, count_bits,
                        reciprocal=codec.states > 1)
        # One state: the single-clock divider; N > 1 interleaved states: the pipelined ring.
        # Words on ``o``: two stream words each where a pair may push twice (RansEncoderXnCoder.port_words).
        pw = RansEncoderXnCoder.port_words(sh) if codec.states > 1 else 1
        self._setup(sh, shell, encoder_ports(sh.W * pw, sh.symbol_bits, sh.K, sh.set_bits, count_bits=sh.count_bits),
                    RansEncoderXnCoder if codec.states > 1 else RansEncoderCoder)
        if codec.states > 1:
            RansEncoderXnCoder.check_shape(sh)      # here, not at elaboration

    def blocks(self) -> dict[str, wiring.Component]:
        """The core's blocks, each a fresh Component that synthesizes alone (``--breakdown``): the
        coder and, inside it, its table and the one-state coder's divider; with the shell, the shell."""
        out = {"coder": self._coder_cls(self._shape), "tables": RansTables(self._shape, buckets=False)}
        if self._coder_cls is RansEncoderCoder:
            out["divider"] = RansEncoderCoder.divider(self._shape)
        if self._shell:
            out["shell"] = self._new_shell()
        return out

    def _new_shell(self) -> wiring.Component:
        if self._coder_cls is RansEncoderXnCoder:
            return RansEncoderShellXN(self._shape)
        return RansEncoderShell(self._shape, self._coder_cls.depth(self._shape))

    def elaborate(self, platform):
        m, coder = self._coder()
        if not self._shell:
            return m
        m.submodules.shell = sh_ = self._new_shell()
        if isinstance(sh_, RansEncoderShellXN):
            wiring.connect(m, wiring.flipped(self.cmd), sh_.cmd)
            wiring.connect(m, wiring.flipped(self.i), coder.i)
            m.d.comb += [self.o.valid.eq(coder.o.valid), self.o.p.data.eq(coder.o.p), self.o.p.last.eq(coder.last),
                         coder.o.ready.eq(self.o.ready), sh_.emit.eq(coder.o.valid & coder.o.ready),
                         self.done.eq(sh_.done)]
            connect_link(m, encoder_xn_link(self._shape), sh_, coder)
            self._gate_cfg(m, coder, sh_.idle)
            return m
        wiring.connect(m, wiring.flipped(self.cmd), sh_.cmd)
        wiring.connect(m, wiring.flipped(self.i), coder.i)
        m.d.comb += [self.o.valid.eq(coder.o.valid), self.o.p.data.eq(coder.o.p), self.o.p.last.eq(sh_.last),
                     coder.o.ready.eq(self.o.ready), sh_.emit.eq(coder.o.valid & coder.o.ready),
                     self.done.eq(sh_.done)]
        connect_link(m, encoder_link(self._shape, self._coder_cls.depth(self._shape)), sh_, coder)
        self._gate_cfg(m, coder, sh_.idle)
        return m
