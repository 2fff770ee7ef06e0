"""The decompression subsystem of Fig. 12 as an FPGA block: AXI4 in, AXI4-Stream weights out.

:class:`AxiDecompressor` is what a designer drops between DRAM and an accelerator:

* an AXI4 read master (:class:`AxiReadMaster`) that fetches each lane's region of records;
* ``lanes`` decoder lanes sharing that port (:class:`~.parallel.ParallelDecoder`, paper §4.6), each with
  its own tables;
* per lane, the symbol → code step of the container's escape group (:class:`SymbolToCode`) and the
  pair → float interface of §4.3 (:class:`~.interfaces.PairToFloat`);
* an AXI4-Stream master of bf16 or fp32 weights, a slot per lane in each transfer;
* a register map behind an AXI4-Lite slave (:class:`AxiLiteSlave`) to point the lanes at their regions,
  start them and read the status (``docs/subsystem.md``).

The lanes are the core registry's decoders of the codec (by default the default container format's,
``tans8x16``: the interleaved ``TansXnDecoder``). One START runs each lane through its **region**
(``LANE_BASE[l]``, ``LANE_UNITS[l]``): records of a header, the table entries the block needs (none where
the lane holds them already) and an **independent block** (the blocks layout of ``ansforge compress``'s
default container, version 6: each block a ``docs/bitstream.md`` §8 stream with its own flush and head,
one decoder command), its words in the order a decoder reads them (top of the stack first). Lanes
therefore decode blocks of different tensors at once. Slot ``l`` of an output transfer is lane ``l``'s
next weight where ``TKEEP`` says so; a lane's weights are its region's blocks in order.

Built with ``table_sets`` > 1 or ``row_shifts``, the subsystem decodes every tensor of the default
container, those with several tables too (a row-shifted tensor's widths, a context plan's sets): each
table is loaded as a set, and each lane reads its blocks' runs ``{count, set, shift}`` from memory beside
its region (``LANE_RUNS``; :func:`~.parallel.run_entry_layout`); a run's ``shift`` puts its rows' zero
bits back into the pairs before the symbol → code step, so the escape index and the float interface see
the tensor's full-width pairs.

Throughput: up to ``lanes`` weights per clock. A lane decodes at most one pair per clock and needs, on
average, the coded bits of a pair from memory; the port gives ``bus_bits`` per clock, and each lane's
decoder takes one port word (``w`` = ``W``, or ``2 W`` for an rANS xN decoder) per clock, so the bound is
``min(lanes, bus_bits / bits_per_pair, lanes * w / bits_per_pair)`` (the last binds for fp32 pairs on
16-bit tANS words: 0.6 pairs per clock per lane). A pair costs at least its additional data (8 bits for bf16, 24 for
fp32), so ``lanes * extra_bits > bus_bits`` can never be fed: the constructor refuses it.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..model.coding.codecs import Codec
from ..model.errors import ConfigError
from ..model.dtypes.pairs import PAIR_FORMATS
from .common import COUNT_BITS, DecodeStatus, bits_for, check_int, pair_layout
from .interfaces import PairToFloat
from .parallel import TAG_BITS, ParallelDecoder, Table
from .cores import build_core, core_for, default_codec

__all__ = ["Table", "default_bus_bits", "axi4_read_signature", "axi4_lite_signature", "AxiReadMaster", "AxiLiteSlave", "SymbolToCode",
           "AxiDecompressor", "Csr", "CSR_ID", "subsystem_targets"]

#: ``ID`` register value: "ANSF".
CSR_ID = 0x414E5346


class Csr(enum.IntEnum):
    """Byte addresses of the registers (32 bits each; see ``docs/subsystem.md``)."""
    ID = 0x000          #: RO  0x414E5346 ("ANSF")
    #: RO  [7:0] lanes, [15:8] word bits W, [23:16] beat words, [24] rANS, [25] fp32 out, [28:26] set bits,
    #: [31:29] shift bits (0, 0: no runs)
    PARAMS = 0x004
    CONTROL = 0x008     #: WO  bit 0: START (latches BASE and the lane registers)
    STATUS = 0x00C      #: RO  bit 0 BUSY, bit 1 DONE, [6:4] DecodeStatus, bit 8 BUS_ERROR
    BASE_LO = 0x018     #: RW  byte address of beat 0, bits 31..0 (aligned to the bus width)
    BASE_HI = 0x01C     #: RW  bits 63..32 (64-bit AXI addresses)
    CYCLES = 0x020      #: RO  clocks from START to DONE of the last START
    WEIGHTS = 0x024     #: RO  weights sent on the output stream since START
    #: RO  [5:0] count bits: a block's pairs and words, a region's units and runs are below 2**count_bits
    LIMITS = 0x028
    #: RO  [6:0] unit bits, [10:7] header units, [14:11] entry units, [21:15] table entry data bits,
    #: [22] records may be parts of a block resumed at a checkpoint
    RECORDS = 0x02C
    #: RW  lane l at 0x100 + 8 l: its region's first beat (offset from BASE); + 4: its units (0: no blocks)
    LANE0 = 0x100
    LANE_RUNS0 = 0x200  #: RW  with runs: lane l at 0x200 + 8 l: its runs' first beat (from BASE); + 4: its runs


def subsystem_targets() -> tuple[str, ...]:
    """Output formats the subsystem emits (the pair formats whose weights it rebuilds)."""
    return ("bf16", "fp32")


def axi4_read_signature(addr_bits: int, data_bits: int, id_bits: int) -> wiring.Signature:
    """The read channels of an AXI4 master (ARM IHI 0022): ``AR`` out, ``R`` in; flip it for a slave."""
    return wiring.Signature({
        "araddr": Out(addr_bits), "arlen": Out(8), "arsize": Out(3), "arburst": Out(2), "arid": Out(id_bits),
        "arcache": Out(4), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
        "rdata": In(data_bits), "rresp": In(2), "rlast": In(1), "rid": In(id_bits), "rvalid": In(1),
        "rready": Out(1),
    })


def axi4_lite_signature(addr_bits: int = 12) -> wiring.Signature:
    """An AXI4-Lite master with 32-bit data (ARM IHI 0022, B1); flip it for a slave."""
    return wiring.Signature({
        "awaddr": Out(addr_bits), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(addr_bits), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
        "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
    })


class AxiReadMaster(wiring.Component):
    """Beat requests of the decoder lanes as single-beat AXI4 reads, one per request.

    Parameters
    ----------
    addr_bits : int
        AXI address width, 32 or 64.
    data_bits : int
        Bus width, a power of two from 8 to 1024: one beat.
    beat_addr_bits : int
        Width of a request's beat offset.
    id_bits : int
        ``ARID``/``RID`` width: a request's ``tag`` (its lane). Responses may come back in any order
        across IDs and in order within one, as AXI4 guarantees; the lanes need nothing more.

    Ports
    -----
    req : In(stream)  ``{addr: beat offset, tag}``; the read goes to ``base + addr * data_bits / 8``
    rsp : Out(stream) ``{data, tag}``; not back-pressured (``RREADY`` = 1): the requester reserves room
        for every read it issues, as :class:`~.parallel.ParallelDecoder` does with credits
    base : In(addr_bits)  byte address of beat 0 (its low ``log2(data_bits / 8)`` bits are ignored)
    m_axi : Out(:func:`axi4_read_signature`)
    error : Out(1)  a response came back with ``SLVERR``/``DECERR``; sticky until ``clear``
    clear : In(1)

    Latency: the ``AR`` channel is registered (one clock from ``req`` to ``ARVALID``); ``R`` goes to
    ``rsp`` without a register. ``ARLEN`` = 0, ``ARBURST`` = INCR, ``ARCACHE`` = 0b0011 (normal,
    bufferable, as Xilinx interconnects expect), ``ARPROT`` = 0.
    """

    def __init__(self, *, addr_bits: int = 32, data_bits: int = 64, beat_addr_bits: int = 24, id_bits: int = 2):
        if addr_bits not in (32, 64):
            raise ValueError(f"addr_bits must be 32 or 64, not {addr_bits!r}")
        self._data = check_int("data_bits", data_bits, 8, 1024)
        if data_bits & (data_bits - 1):
            raise ValueError(f"data_bits must be a power of two, not {data_bits!r}")
        self._shift = (data_bits // 8).bit_length() - 1
        self._beat = check_int("beat_addr_bits", beat_addr_bits, 1, addr_bits - self._shift)
        self._addr = addr_bits
        super().__init__({
            "req": In(stream.Signature(data.StructLayout({"addr": beat_addr_bits, "tag": id_bits}))),
            "rsp": Out(stream.Signature(data.StructLayout({"data": data_bits, "tag": id_bits}))),
            "base": In(addr_bits),
            "m_axi": Out(axi4_read_signature(addr_bits, data_bits, id_bits)),
            "error": Out(1),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        ax = self.m_axi
        m.d.comb += [ax.arlen.eq(0), ax.arsize.eq(self._shift), ax.arburst.eq(0b01), ax.arcache.eq(0b0011),
                     ax.arprot.eq(0), ax.rready.eq(1),
                     self.req.ready.eq(~ax.arvalid | ax.arready)]
        aligned = Cat(Const(0, self._shift), self.base[self._shift:])
        with m.If(self.req.valid & self.req.ready):
            m.d.sync += [ax.arvalid.eq(1), ax.arid.eq(self.req.p.tag),
                         ax.araddr.eq(aligned + (self.req.p.addr << self._shift))]
        with m.Elif(ax.arready):
            m.d.sync += ax.arvalid.eq(0)
        m.d.comb += [self.rsp.valid.eq(ax.rvalid), self.rsp.p.data.eq(ax.rdata), self.rsp.p.tag.eq(ax.rid)]
        with m.If(self.clear):
            m.d.sync += self.error.eq(0)
        with m.Elif(ax.rvalid & ax.rresp[1]):
            m.d.sync += self.error.eq(1)
        return m


class AxiLiteSlave(wiring.Component):
    """An AXI4-Lite slave (32-bit data) turned into register writes and reads.

    Ports
    -----
    s_axil : In(:func:`axi4_lite_signature`)
    wr : Out(stream) ``{addr, data}``: a complete write (address and data both received). The register
        file takes it when it can (``wr.ready``), and answers with ``wr_error`` in the same clock:
        ``BRESP`` = SLVERR if set, OKAY otherwise.
    wr_error : In(1)
    rd_addr : Out(addr_bits)  the read address, while ``ARVALID``; ``rd_data`` is sampled in that clock
    rd_data : In(32)
    rd_error : In(1)  ``RRESP`` = SLVERR (an address with no register)

    A write with ``WSTRB`` other than ``0b1111`` is answered SLVERR without reaching ``wr``: every
    register is written whole. One write and one read in flight at a time; ``BVALID``/``RVALID`` come one
    clock after the register file takes the write (read), from registers.
    """

    def __init__(self, *, addr_bits: int = 12):
        self._a = check_int("addr_bits", addr_bits, 3, 32)
        super().__init__({
            "s_axil": In(axi4_lite_signature(addr_bits)),
            "wr": Out(stream.Signature(data.StructLayout({"addr": addr_bits, "data": 32}))),
            "wr_error": In(1),
            "rd_addr": Out(addr_bits),
            "rd_data": In(32),
            "rd_error": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        s = self.s_axil
        aw_held, w_held, strb_ok = Signal(), Signal(), Signal()
        m.d.comb += [s.awready.eq(~aw_held & ~s.bvalid), s.wready.eq(~w_held & ~s.bvalid)]
        with m.If(s.awvalid & s.awready):
            m.d.sync += [aw_held.eq(1), self.wr.p.addr.eq(s.awaddr)]
        with m.If(s.wvalid & s.wready):
            m.d.sync += [w_held.eq(1), self.wr.p.data.eq(s.wdata), strb_ok.eq(s.wstrb == 0b1111)]
        both = aw_held & w_held & ~s.bvalid
        m.d.comb += self.wr.valid.eq(both & strb_ok)
        with m.If((self.wr.valid & self.wr.ready) | (both & ~strb_ok)):
            m.d.sync += [aw_held.eq(0), w_held.eq(0), s.bvalid.eq(1),
                         s.bresp.eq(Mux(~strb_ok | self.wr_error, 0b10, 0b00))]
        with m.Elif(s.bready):
            m.d.sync += s.bvalid.eq(0)

        m.d.comb += [s.arready.eq(~s.rvalid), self.rd_addr.eq(s.araddr)]
        with m.If(s.arvalid & s.arready):
            m.d.sync += [s.rvalid.eq(1), s.rdata.eq(self.rd_data), s.rresp.eq(Mux(self.rd_error, 0b10, 0b00))]
        with m.Elif(s.rready):
            m.d.sync += s.rvalid.eq(0)
        return m


class SymbolToCode(wiring.Component):
    """A decoder's symbol back to the pair's code: the container's escape group undone in hardware.

    A tensor's code table (:class:`~ansforge.model.coding.codetable.CodeTable`) gives each frequent code a
    symbol of its own and lets the rare ones share an *escape* symbol whose additional data carries
    the code's index in the escape group above the pair's ``extra_bits``. Per pair: one read of the
    symbol table ``{code, escape}``, one of the escape table (index → code), a multiplexer. Latency 1
    clock (registered output), one pair per clock. Golden model: ``CodeTable.from_symbols``.

    Parameters
    ----------
    max_symbols : int
        Symbol table depth (the decoder's ``max_symbols``).
    max_codes : int
        Codes up to ``max_codes - 1`` (the float table's depth).
    extra_bits : int
        ``w``: the pair format's additional data (8 for bf16, 24 for fp32).
    escape_bits : int
        Index bits of the widest escape group, 0..8 (0: no escape group).

    Ports
    -----
    i : In(stream)  ``{symbol, extra: w + escape_bits}``
    o : Out(stream) ``{symbol: code, extra: w}``
    cfg : In(stream) ``{escape_table, addr, code, escape}``: one entry of the symbol table
        (``escape_table`` = 0) or of the escape table (``escape_table`` = 1; ``escape`` unused)
    """

    def __init__(self, *, max_symbols: int = 64, max_codes: int = 64, extra_bits: int = 8, escape_bits: int = 5):
        self._sym_bits = bits_for(check_int("max_symbols", max_symbols, 2, 4096) - 1)
        self._code_bits = bits_for(check_int("max_codes", max_codes, 1, 4096) - 1)
        self._w = check_int("extra_bits", extra_bits, 1, 32)
        self._e = check_int("escape_bits", escape_bits, 0, 8)
        addr = max(self._sym_bits, self._e)
        super().__init__({
            "i": In(stream.Signature(pair_layout(self._sym_bits, self._w + self._e))),
            "o": Out(stream.Signature(pair_layout(self._code_bits, self._w))),
            "cfg": In(stream.Signature(data.StructLayout({"addr": addr, "code": self._code_bits, "escape": 1,
                                                          "escape_table": 1}))),
        })

    escape_bits = property(lambda self: self._e)
    extra_bits = property(lambda self: self._w)

    def elaborate(self, platform):
        m = Module()
        entry = data.StructLayout({"code": self._code_bits, "escape": 1})
        m.submodules.symbols = sym = Memory(shape=entry, depth=1 << self._sym_bits, init=[])
        ws, rs = sym.write_port(), sym.read_port(domain="comb")
        m.d.comb += [ws.addr.eq(self.cfg.p.addr), ws.data.code.eq(self.cfg.p.code), ws.data.escape.eq(self.cfg.p.escape),
                     ws.en.eq(self.cfg.valid & ~self.cfg.p.escape_table), self.cfg.ready.eq(1),
                     rs.addr.eq(self.i.p.symbol)]
        code = Signal(self._code_bits)
        m.d.comb += code.eq(rs.data.code)
        if self._e:
            m.submodules.escapes = esc = Memory(shape=self._code_bits, depth=1 << self._e, init=[])
            we, re = esc.write_port(), esc.read_port(domain="comb")
            m.d.comb += [we.addr.eq(self.cfg.p.addr), we.data.eq(self.cfg.p.code),
                         we.en.eq(self.cfg.valid & self.cfg.p.escape_table),
                         re.addr.eq(self.i.p.extra[self._w:])]
            with m.If(rs.data.escape):
                m.d.comb += code.eq(re.data)
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.o.valid.eq(1), self.o.p.symbol.eq(code), self.o.p.extra.eq(self.i.p.extra[:self._w])]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m


def _decoder_factory(codec: Codec, max_symbols: int, max_extra_bits: int, table_sets: int = 1,
                     count_bits: int = COUNT_BITS):
    return lambda: build_core(codec, "decoder", programmable=True, max_symbols=max_symbols,
                              max_extra_bits=max_extra_bits, block_crc=False, table_sets=table_sets,
                              count_bits=count_bits)


def default_bus_bits(codec, lanes: int, target: str) -> int:
    """The AXI4 data width an :class:`AxiDecompressor` gets when none is asked for: the narrowest of
    64, 128, ... bits that feeds ``lanes`` lanes of ``target`` weights their additional data each clock
    (a pair's least cost), and at least one word of ``codec``."""
    w = PAIR_FORMATS[target].extra_bits
    return max(64, codec.word_bits, 1 << max(0, lanes * w - 1).bit_length())


class AxiDecompressor(wiring.Component):
    """Fig. 12 as an FPGA block: compressed blocks over AXI4, ``lanes`` lanes, weights over AXI4-Stream.

    Parameters
    ----------
    codec : Codec or None
        The lanes' codec (programmable tables): any the core registry's decoders take; default the
        default container format's (``tans8x16``).
    lanes : int
        ``lanes``: 1, 2, 4, 8 or 16 decoder lanes.
    target : str
        ``"bf16"`` or ``"fp32"``: the pair format of the blocks and the weights out.
    bus_bits : int
        AXI4 data width: a power of two, a multiple of the decoder's port word, up to 1024, and at least
        ``lanes * extra_bits`` (else the port cannot feed the lanes: ``ValueError``).
    addr_bits : int
        AXI4 address width, 32 or 64.
    max_symbols, max_codes : int
        Decoder alphabet (the paper's 64) and float-table depth (codes per tensor; fp32 tensors may
        need up to 256).
    escape_bits : int
        Index bits of the widest escape group the lanes accept (0..8).
    fifo_beats : int
        Each lane's beat FIFO, in beats: cover the memory latency (``latency * lanes * bits_per_pair /
        bus_bits / lanes`` beats per lane in flight).
    table_sets : int
        Table sets of each lane's decoder, 1..16 (a power of two): the most tables a tensor has (its
        row-shift widths, or its context plan's sets). With more than one, the lanes read runs.
    row_shifts : bool
        Restore row shifts (a run's ``shift``, up to the target's mantissa bits); the lanes read runs.
    count_bits : int
        Width of a lane's counts (a block's pairs and words, its region's units, its runs, each below
        ``2**count_bits``; a larger value written to ``LANE_UNITS`` or ``LANE_RUNS`` is refused), 8..32.
        The default, 20, holds the default layout's blocks (at most 2**18 pairs, under 4 words a pair)
        and regions of 8 MB; each bit costs every lane's counters, compares and registers.
    resumable : bool
        A record may be a part of a block resumed at a checkpoint (its header carries the decoder
        command's ``resume``, ``state`` and ``bit``, and whether the stream ends with it;
        :func:`~.parallel.record_header_layout`): for a driver whose memory holds less than a block (the
        board's). ``RECORDS`` bit 22 says so.

    Ports
    -----
    s_axil : In(:func:`axi4_lite_signature`)  the register map (:class:`Csr`)
    m_axi : Out(:func:`axi4_read_signature`)  reads of the compressed streams
    m_axis : Out  ``tdata`` (``lanes`` slots of ``weight_bits``, slot ``l`` at bits ``l * weight_bits``: lane
        ``l``'s next weight), ``tkeep`` (the slots holding a weight, all of a slot's bytes or none; an empty
        slot's ``tdata`` is zero), ``tuser`` (``lanes`` tags of :data:`~.parallel.TAG_BITS`, slot ``l``'s at
        bits ``l * TAG_BITS``: the tag of the record its weight comes from; an empty slot's is meaningless),
        ``tlast`` (the START's last transfer), ``tvalid``, ``tready``
    done, status, error : Out  as ``STATUS``: ``done`` once every lane has read its region and the last
        weight is out, ``status`` the lowest failing lane's first :class:`~.common.DecodeStatus`,
        ``error`` an AXI read error; they hold until the next START. ``done`` doubles as a level interrupt.

    Latency from a transfer of the lanes' pairs to the output register: 2 clocks (symbol → code, pair →
    float).
    """

    def __init__(self, codec: Codec | None = None, *, lanes: int = 4, target: str = "bf16", bus_bits: int = 64,
                 addr_bits: int = 32, max_symbols: int = 64, max_codes: int = 64, escape_bits: int = 5,
                 fifo_beats: int = 16, table_sets: int = 1, row_shifts: bool = False, count_bits: int = 20,
                 resumable: bool = False):
        # An object whose parameters are refused is not an unused component: no warning when it is
        # collected (at once, when a caller such as the CLI catches the error).
        self._MustUse__silence = True
        if codec is None:
            from ..model.coding.codecs import parse_codec

            codec = parse_codec(default_codec("tans-decoder"))
        if not isinstance(codec, Codec):
            raise TypeError(f"codec must be a Codec, not {codec!r}")
        core_for(codec, "decoder")   # a codec no decoder core takes: one line naming which take what
        if target not in subsystem_targets():
            raise ValueError(f"target must be one of {', '.join(subsystem_targets())}, not {target!r}")
        self._codec, self._target = codec, target
        self._w = PAIR_FORMATS[target].extra_bits
        self._t = PAIR_FORMATS[target].total_bits
        self._k = check_int("lanes", lanes, 1, 16)
        if lanes & (lanes - 1):
            raise ValueError(f"lanes must be a power of two, not {lanes!r}")
        self._e = check_int("escape_bits", escape_bits, 0, 8)
        self._max_codes = check_int("max_codes", max_codes, 1, 256)
        self._max_symbols = check_int("max_symbols", max_symbols, 2, 256)
        self._sets = check_int("table_sets", table_sets, 1, 16)
        if table_sets & (table_sets - 1):
            raise ValueError(f"table_sets must be a power of two, not {table_sets!r}")
        if not isinstance(row_shifts, bool):
            raise TypeError(f"row_shifts must be a bool, not {row_shifts!r}")
        self._shift_bits = bits_for(PAIR_FORMATS[target].mantissa_bits) if row_shifts else 0
        self._cb = check_int("count_bits", count_bits, 8, COUNT_BITS)
        self._make_decoder = _decoder_factory(codec, max_symbols, self._w + self._e, table_sets, count_bits)
        # A lane's memory word is its decoder's port word (``W``, or ``2 W`` for an rANS xN decoder).
        try:
            proto = self._make_decoder()
        except ConfigError as exc:
            # the decoder names its own limit; say where the subsystem's additional data comes from
            raise ConfigError(f"{target} lanes give the decoder {self._w} + {self._e} bits of additional data "
                              f"({target}'s and the escape index's): {exc}") from None
        for part in (proto, *vars(proto).values()):     # a prototype for its port width, never elaborated
            if isinstance(part, Elaboratable):
                part._MustUse__silence = True
        W = proto.signature.members["i"].signature.members["payload"].shape["data"].width
        check_int("bus_bits", bus_bits, 8, 1024)
        if bus_bits & (bus_bits - 1) or bus_bits % W:
            raise ValueError(f"bus_bits must be a power of two and a multiple of the {W}-bit port word, not "
                             f"{bus_bits!r}")
        if lanes * self._w > bus_bits:
            raise ValueError(f"{lanes} lanes of {target} pairs need at least {lanes} x {self._w} = {lanes * self._w} "
                             f"bits of compressed data per clock (a pair's additional data alone); a {bus_bits}-bit "
                             f"bus cannot feed them: use at most {bus_bits // self._w} lanes or a wider bus")
        if addr_bits not in (32, 64):
            raise ValueError(f"addr_bits must be 32 or 64, not {addr_bits!r}")
        self._bus, self._addr = bus_bits, addr_bits
        self._p = bus_bits // W
        shift = (bus_bits // 8).bit_length() - 1
        self._beat_bits = min(COUNT_BITS, addr_bits - shift)
        self._dec_cfg = proto.signature.members["cfg"].signature.members["payload"].shape
        fproto = PairToFloat(target=target, max_codes=self._max_codes, max_extra_bits=self._w)
        fproto._MustUse__silence = True          # a prototype for its layout, never elaborated
        self._float_cfg = fproto.signature.members["cfg"].signature.members["payload"].shape
        # a table entry in memory carries the widest of the lanes' entries: the decoder's, the float
        # table's, a symbol's {code: 16, escape}
        data_bits = max(self._dec_cfg["data"].width, self._float_cfg["data"].width, 17)
        if data_bits > 112:
            raise ValueError(f"the decoder's table entry has {data_bits} data bits; a table entry in memory holds 112")
        self._par = ParallelDecoder(self._make_decoder, lanes=lanes,
                                    beat_words=self._p, addr_bits=self._beat_bits,
                                    fifo_beats=check_int("fifo_beats", fifo_beats, 2, 1024),
                                    shift_bits=self._shift_bits, table_data_bits=data_bits, resumable=resumable)
        super().__init__({
            "s_axil": In(axi4_lite_signature(12)),
            "m_axi": Out(axi4_read_signature(addr_bits, bus_bits, len(self._par.mem_req.p.tag))),
            "m_axis": Out(wiring.Signature({"tdata": Out(lanes * self._t), "tkeep": Out(lanes * self._t // 8),
                                            "tuser": Out(lanes * TAG_BITS), "tlast": Out(1), "tvalid": Out(1),
                                            "tready": In(1)})),
            "done": Out(1),
            "status": Out(DecodeStatus),
            "error": Out(1),
        })
        self._MustUse__silence = False

    codec = property(lambda self: self._codec)
    lanes = property(lambda self: self._k)
    target = property(lambda self: self._target)
    bus_bits = property(lambda self: self._bus)
    beat_words = property(lambda self: self._p)
    escape_bits = property(lambda self: self._e)
    max_codes = property(lambda self: self._max_codes)
    max_symbols = property(lambda self: self._max_symbols)
    extra_bits = property(lambda self: self._w)
    addr_bits = property(lambda self: self._addr)
    decoder_cfg_layout = property(lambda self: self._dec_cfg)
    table_sets = property(lambda self: self._sets)
    count_bits = property(lambda self: self._cb)
    shift_bits = property(lambda self: self._shift_bits)
    #: the lanes (:class:`~.parallel.ParallelDecoder`): its memory layout of words and runs
    parallel = property(lambda self: self._par)
    float_cfg_layout = property(lambda self: self._float_cfg)

    def lane_decoder(self):
        """A new decoder with the lanes' parameters (to synthesize or simulate one lane alone)."""
        return self._make_decoder()

    @property
    def decoder_prototype(self):
        """An unelaborated lane decoder: its ``cfg`` layout and table writes."""
        return self._par.decoder_prototype

    def params_word(self) -> int:
        """The ``PARAMS`` register's value."""
        return (self._k | self._codec.word_bits << 8 | self._p << 16 | (self._codec.kind == "rans") << 24
                | (self._target == "fp32") << 25 | self._par.set_bits << 26 | self._shift_bits << 29)

    def records_word(self) -> int:
        """The ``RECORDS`` register's value: how a lane's region is laid out (``docs/subsystem.md``)."""
        par = self._par
        unit = par.unit_bits
        return (unit | par.header_units << 7 | par.entry_units << 11
                | par.entry_layout["data"].width << 15 | par.resumable << 22)

    def elaborate(self, platform):
        m = Module()
        lanes, weight_bits = self._k, self._t
        m.submodules.lanes = par = self._par
        m.submodules.axi = rd = AxiReadMaster(addr_bits=self._addr, data_bits=self._bus,
                                               beat_addr_bits=self._beat_bits, id_bits=len(par.mem_req.p.tag))
        m.submodules.csr = csr = AxiLiteSlave(addr_bits=12)
        wiring.connect(m, wiring.flipped(self.s_axil), csr.s_axil)
        wiring.connect(m, rd.m_axi, wiring.flipped(self.m_axi))
        wiring.connect(m, par.mem_req, rd.req)
        wiring.connect(m, rd.rsp, par.mem_rsp)

        # -- per lane: symbol -> code -> float, in lockstep (same valid, same ready); which slots hold a
        # pair (``valid``) and the command's end travel beside the two stages
        s2c = [SymbolToCode(max_symbols=self._max_symbols, max_codes=self._max_codes, extra_bits=self._w,
                            escape_bits=self._e) for _ in range(lanes)]
        p2f = [PairToFloat(target=self._target, max_codes=self._max_codes, max_extra_bits=self._w) for _ in range(lanes)]
        for lane in range(lanes):
            m.submodules[f"symbol_to_code{lane}"] = s2c[lane]
            m.submodules[f"pair_to_float{lane}"] = p2f[lane]
            m.d.comb += [s2c[lane].i.valid.eq(par.o.valid), s2c[lane].i.p.eq(par.o.p.pairs[lane]),
                         p2f[lane].i.valid.eq(s2c[lane].o.valid), p2f[lane].i.p.eq(s2c[lane].o.p),
                         s2c[lane].o.ready.eq(p2f[lane].i.ready), p2f[lane].o.ready.eq(self.m_axis.tready)]
        m.d.comb += par.o.ready.eq(s2c[0].i.ready)

        busy, issuing = Signal(), Signal()
        mask1, last1, mask2, last2 = Signal(lanes), Signal(), Signal(lanes), Signal()
        tags1, tags2 = Signal(par.o.p.tags.shape()), Signal(par.o.p.tags.shape())
        with m.If(par.o.valid & par.o.ready):
            m.d.sync += [mask1.eq(par.o.p.valid), last1.eq(par.o.p.last), tags1.eq(par.o.p.tags)]
        with m.If(s2c[0].o.valid & s2c[0].o.ready):
            m.d.sync += [mask2.eq(mask1), last2.eq(last1), tags2.eq(tags1)]
        keep = Cat(*[Mux(mask2[lane], (1 << weight_bits // 8) - 1, 0)[:weight_bits // 8] for lane in range(lanes)])
        # a slot without a pair gives zeros (not its lane's last weight again): tdata is a function of tkeep
        m.d.comb += [self.m_axis.tvalid.eq(p2f[0].o.valid),
                     self.m_axis.tdata.eq(Cat(*[Mux(mask2[lane], p.o.p, 0)[:weight_bits]
                                                for lane, p in enumerate(p2f)])),
                     self.m_axis.tuser.eq(tags2),
                     self.m_axis.tkeep.eq(keep), self.m_axis.tlast.eq(last2)]

        # -- each lane's tables behind the decoder, written from its records once its pairs have left
        # both stages (the lanes hold the entry until then). ``drained`` is a clock late (a register):
        # a lane offers table entries only while it holds no pair, so none of its pairs can enter the
        # stages meanwhile, and once drained the stages stay so.
        stage1, stage2 = s2c[0].o.valid, p2f[0].o.valid
        for lane in range(lanes):
            t = par.tables[lane]
            drained = Signal(name=f"drained{lane}")
            m.d.sync += drained.eq(~(stage1 & mask1[lane]) & ~(stage2 & mask2[lane]))
            c, f = s2c[lane].cfg, p2f[lane].cfg
            m.d.comb += [t.ready.eq(drained),
                         c.valid.eq(t.valid & drained & ((t.p.kind == Table.SYMBOL) | (t.p.kind == Table.ESCAPE))),
                         c.p.addr.eq(t.p.addr), c.p.code.eq(t.p.data[:16]), c.p.escape.eq(t.p.data[16]),
                         c.p.escape_table.eq(t.p.kind == Table.ESCAPE),
                         f.valid.eq(t.valid & drained & (t.p.kind == Table.FLOAT)), f.p.addr.eq(t.p.addr),
                         f.p.data.eq(t.p.data)]

        # -- registers
        base = Signal(64)
        lane_base = [Signal(32, name=f"lane_base{lane}") for lane in range(lanes)]
        cb = self._cb
        lane_units = [Signal(cb, name=f"lane_units{lane}") for lane in range(lanes)]
        runs = par.has_runs
        lane_runs_base = [Signal(32, name=f"lane_runs_base{lane}") for lane in range(lanes)] if runs else []
        lane_runs = [Signal(cb, name=f"lane_runs{lane}") for lane in range(lanes)] if runs else []
        cycles, weights = Signal(32), Signal(32)
        a, d = csr.wr.p.addr, csr.wr.p.data
        par_cmd = par.cmd
        m.d.comb += [rd.base.eq(base[:self._addr])]

        is_start = (a == Csr.CONTROL) & d[0]
        writable = {Csr.BASE_LO: base[:32], Csr.BASE_HI: base[32:]}
        for lane in range(lanes):
            writable[Csr.LANE0 + 8 * lane] = lane_base[lane]
            writable[Csr.LANE0 + 8 * lane + 4] = lane_units[lane]
            if runs:
                writable[Csr.LANE_RUNS0 + 8 * lane] = lane_runs_base[lane]
                writable[Csr.LANE_RUNS0 + 8 * lane + 4] = lane_runs[lane]
        known = Cat(*[a == addr for addr in (*writable, Csr.CONTROL)]).any()
        # a count the lanes' counters cannot hold is refused, not truncated
        too_wide = (d[cb:] != 0) & Cat(*[a == addr for addr, reg in writable.items() if len(reg) < 32]).any() \
            if cb < 32 else 0
        # a START while one runs is refused: the lanes are reading their regions
        refused = ~known | (busy & is_start) | too_wide

        # A write is decoded into registers (``decoded``: its register one-hot, refused or not, a START)
        # the clock after the slave holds it, and completes the clock after that: the address decode
        # ends at flip-flops, not at every register's enable, the response or BUSY. A START reaches the
        # lanes a clock later still (``pend_start``), so that no lane's command waits on the decode
        # either (docs/design/subsystem.md).
        pend_start, decoded, d_refused, d_start = Signal(), Signal(), Signal(), Signal()
        d_hit, d_data = Signal(len(writable)), Signal(32)
        with m.If(csr.wr.valid & ~decoded & ~pend_start):
            m.d.sync += [decoded.eq(1), d_refused.eq(refused), d_start.eq(is_start & ~refused),
                         d_hit.eq(Cat(*[a == addr for addr in writable])), d_data.eq(d)]
        with m.If(decoded):
            m.d.sync += decoded.eq(0)
        m.d.comb += [csr.wr.ready.eq(decoded), csr.wr_error.eq(d_refused)]
        take = decoded & ~d_refused
        for i, reg in enumerate(writable.values()):
            with m.If(take & d_hit[i]):
                m.d.sync += reg.eq(d_data)
        with m.If(take):
            m.d.sync += pend_start.eq(d_start)
            with m.If(d_start):
                # BUSY and DONE answer for the new START at once, as the ``done`` port does
                m.d.sync += [busy.eq(1), self.done.eq(0)]

        # START: latch the command, clear status, run until the last weight is out
        with m.If(pend_start):
            m.d.sync += [pend_start.eq(0), issuing.eq(1), weights.eq(0), cycles.eq(0), self.status.eq(DecodeStatus.OK)]
            for lane in range(lanes):
                m.d.sync += [par_cmd.p.lanes[lane].base.eq(lane_base[lane][:self._beat_bits]),
                             par_cmd.p.lanes[lane].units.eq(lane_units[lane])]
                if runs:
                    m.d.sync += [par_cmd.p.lanes[lane].runs_base.eq(lane_runs_base[lane][:self._beat_bits]),
                                 par_cmd.p.lanes[lane].runs.eq(lane_runs[lane])]
        m.d.comb += [par_cmd.valid.eq(issuing), rd.clear.eq(pend_start)]
        with m.If(par_cmd.valid & par_cmd.ready):
            m.d.sync += issuing.eq(0)
        out_fire = self.m_axis.tvalid & self.m_axis.tready
        with m.If(out_fire):
            m.d.sync += weights.eq(weights + sum((b for b in mask2), start=Const(0, bits_for(lanes))))
        drained = ~Cat(*[s.o.valid for s in s2c], *[p.o.valid for p in p2f]).any()
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
            with m.If(~pend_start & ~issuing & par.done & drained):
                m.d.sync += [busy.eq(0), self.done.eq(1), self.status.eq(par.status)]
        m.d.comb += self.error.eq(rd.error)

        # reads
        status_word = Cat(busy, self.done, Const(0, 2), self.status.as_value(), Const(0, 1), rd.error)
        readable = {Csr.ID: Const(CSR_ID, 32), Csr.PARAMS: Const(self.params_word(), 32), Csr.STATUS: status_word,
                    Csr.CYCLES: cycles, Csr.WEIGHTS: weights, Csr.LIMITS: Const(cb, 32),
                    Csr.RECORDS: Const(self.records_word(), 32), **{addr: reg for addr, reg in writable.items()}}
        with m.Switch(csr.rd_addr):
            for addr, value in readable.items():
                with m.Case(addr):
                    m.d.comb += csr.rd_data.eq(value)
            with m.Default():
                m.d.comb += csr.rd_error.eq(1)
        return m
