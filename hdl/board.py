"""The decompression subsystem on a board: a UART host link, an on-chip block memory and a weight checker.

:class:`BoardCore` is what a bitstream for a development board holds around
:class:`~.subsystem.AxiDecompressor` (Fig. 12's lanes), and what ``ansforge board run --sim`` simulates:

* a UART (:class:`UartRx`, :class:`UartTx`; 8 data bits, no parity, one stop bit) and the host protocol
  (:class:`HostBridge`, ``docs/board.md``): write and read the subsystem's registers and the board's own,
  and load compressed words into
* the block memory (:class:`BlockMemory`): on-chip RAM that answers the subsystem's AXI4 reads, one beat
  per clock, so that the lanes decode at full clock;
* the weight checker (:class:`WeightChecker`): the subsystem's output stream is always taken; per lane a
  CRC-32 of its weights, their count and the clock of its last weight since the START, which the host
  compares with the software decode.

:class:`BoardTop` adds what only the board has: the PLL from the board's oscillator to the design clock
(``EHXPLLL`` on ECP5) and the pins, through an Amaranth platform of ``amaranth-boards``. The board
registry (:data:`BOARDS`) names the boards a bitstream is built for.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.build import ResourceError
from amaranth.hdl import Cat, ClockDomain, Const, Elaboratable, Instance, Module, Mux, Signal
from amaranth.lib import crc, data, enum, io, stream, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..model.coding.codecs import Codec
from .common import WordCrc, bits_for, check_int
from .parallel import TAG_BITS
from .subsystem import AxiDecompressor, axi4_lite_signature, axi4_read_signature

__all__ = ["UartRx", "UartTx", "BlockMemory", "BANK_BEATS", "WeightChecker", "HostBridge", "BoardCore", "BoardTop", "BoardReg",
           "Command", "Reply", "BOARD_ID", "BOARD_VERSION", "BOARDS", "Board", "MEMORY_BASE"]

#: ``BOARD_ID`` register: "ANSB".
BOARD_ID = 0x414E5342
#: The host protocol's version (``BOARD_VERSION``): a host refuses a board of another.
BOARD_VERSION = 1
#: Byte address of beat 0 of the block memory on the subsystem's AXI4 bus (where
#: :func:`~ansforge.sim.subsystem.lanes_program` puts its image).
MEMORY_BASE = 0x8000_0000


class Command(enum.IntEnum):
    """The host protocol's command bytes (``docs/board.md``); arguments little-endian."""
    WRITE_REG = 0x57    #: 'W' addr u16, data u32 → resp u8
    READ_REG = 0x52     #: 'R' addr u16 → data u32, resp u8
    WRITE_MEM = 0x4D    #: 'M' beat u32, beats u32, then beats × bus_bits/8 bytes → resp u8


class Reply(enum.IntEnum):
    """The response byte of every command."""
    OK = 0x00
    RANGE = 0x01        #: WRITE_MEM past the end of the memory: nothing written, the data bytes consumed
    SLVERR = 0x02       #: AXI4-Lite SLVERR: no such register, a read-only one written, or the subsystem refused
    UNKNOWN = 0xFF      #: not a command byte; the board waits for the next one


class BoardReg(enum.IntEnum):
    """The board's own registers (read-only, 32 bits), at 0x1000 and up of the host protocol's address
    space (below 0x1000: the subsystem's, :class:`~.subsystem.Csr`)."""
    ID = 0x1000             #: 0x414E5342 ("ANSB")
    VERSION = 0x1004        #: :data:`BOARD_VERSION`
    CLOCK_HZ = 0x1008       #: the design clock, Hz (as built; the PLL's achieved frequency)
    MEMORY_BEATS = 0x100C   #: the block memory's depth, in beats of the subsystem's bus
    #: [8:0] max codes, [17:9] max symbols, [21:18] escape bits, [27:22] count bits, [28] row shifts
    BUILD = 0x1010
    UART_DIVISOR = 0x1014   #: design clocks per UART bit
    CODEC = 0x1020          #: 8 words: the lanes' codec name, ASCII, little-endian, zero-padded
    #: lane l at 0x1100 + 16 l: its weights since the START; + 4: their CRC-32; + 8: clocks from the
    #: START to its last weight
    LANE0 = 0x1100


@dataclass(frozen=True)
class Board:
    """A board a bitstream is built for: its ``amaranth-boards`` platform, the oscillator the PLL takes,
    the UART and the pins of its status LEDs."""
    name: str
    platform: str           #: "module:Class" of amaranth-boards
    oscillator: str         #: the clock resource
    oscillator_hz: int
    memory_kib: int         #: the block memory a build gets by default (the device's block RAM allows it)
    nextpnr: tuple          #: nextpnr-ecp5's device, package and speed arguments
    notes: str

    def platform_class(self):
        import importlib

        mod, cls = self.platform.split(":")
        return getattr(importlib.import_module(mod), cls)


#: The board registry: ``ansforge board build --board NAME`` (``ansforge/cli/board.py`` ``BOARD_NAMES`` lists
#: the same names without importing this module).
BOARDS: dict[str, Board] = {
    "ulx3s-85f": Board("ulx3s-85f", "amaranth_boards.ulx3s:ULX3S_85F_Platform", "clk25", 25_000_000, 416,
                       ("--85k", "--package", "CABGA381", "--speed", "6"),
                       "Radiona ULX3S with the LFE5U-85F (CABGA381, speed grade 6): 208 block RAMs of 18 Kbit, "
                       "FT231X USB-UART"),
}


class UartRx(wiring.Component):
    """A UART receiver: 8 data bits, no parity, one stop bit, least significant bit first.

    ``rx`` goes through two flip-flops (it comes from a pin). A start bit is the line low; each bit is
    sampled in its middle, ``divisor`` clocks apart. A byte whose stop bit is low is dropped and
    ``framing_error`` pulses.

    Ports: ``rx`` (In 1, the line, idle high); ``o`` (Out stream of 8 bits, registered; a byte not taken
    before the next one ends is replaced by it); ``framing_error`` (Out 1, one clock).
    """

    def __init__(self, divisor: int):
        self._div = check_int("divisor", divisor, 4, 1 << 16)
        super().__init__({"rx": In(1, init=1), "o": Out(stream.Signature(8)), "framing_error": Out(1)})

    divisor = property(lambda self: self._div)

    def elaborate(self, platform):
        m = Module()
        div = self._div
        sync0, line = Signal(init=1), Signal(init=1)
        m.d.sync += [sync0.eq(self.rx), line.eq(sync0)]
        timer = Signal(range(div))
        bit = Signal(range(10))
        shreg = Signal(8)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.sync += self.framing_error.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += [timer.eq(div // 2), bit.eq(0)]
                    m.next = "BITS"
            with m.State("BITS"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [timer.eq(div - 1), bit.eq(bit + 1)]
                    with m.If(bit == 0):
                        # the middle of the start bit: a glitch shorter than half a bit is not a byte
                        with m.If(line):
                            m.next = "IDLE"
                    with m.Elif(bit < 9):
                        m.d.sync += shreg.eq(Cat(shreg[1:], line))
                    with m.Else():
                        with m.If(line):
                            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(shreg)]
                        with m.Else():
                            m.d.sync += self.framing_error.eq(1)
                        # the middle of the stop bit: the next start bit may begin half a bit from here
                        m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """A UART transmitter: 8 data bits, no parity, one stop bit, ``divisor`` clocks a bit.

    Ports: ``i`` (In stream of 8 bits; taken when the line is idle), ``tx`` (Out 1, registered, idle high).
    """

    def __init__(self, divisor: int):
        self._div = check_int("divisor", divisor, 4, 1 << 16)
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    divisor = property(lambda self: self._div)

    def elaborate(self, platform):
        m = Module()
        div = self._div
        timer = Signal(range(div))
        shreg = Signal(10, init=0x3FF)
        left = Signal(range(11))
        m.d.comb += self.i.ready.eq(left == 0)
        m.d.sync += self.tx.eq(shreg[0])
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [shreg.eq(Cat(Const(0, 1), self.i.payload, Const(1, 1))), left.eq(10), timer.eq(div - 1)]
        with m.Elif(left != 0):
            with m.If(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            with m.Else():
                m.d.sync += [timer.eq(div - 1), left.eq(left - 1), shreg.eq(Cat(shreg[1:], Const(1, 1)))]
        return m


#: Beats of one bank of :class:`BlockMemory`: the depth of one ECP5 block RAM at its narrowest (16384 × 1).
BANK_BEATS = 16384


class BlockMemory(wiring.Component):
    """On-chip memory behind an AXI4 read slave, written through a port of its own.

    The memory is banks of ``bank_beats`` beats, each read through registers of its own, then a tree of
    registered 4:1 multiplexers. A bank is one block RAM deep at its narrowest (16384 × 1 on ECP5: a
    64-bit bank is 64 of them side by side, each bit of the bank's register fed by one block RAM): a
    memory of most of a device's block RAM spreads over the whole die, and with one output multiplexer
    and one register the path from a block RAM's output across the die to that register was the design's
    longest (measured: 14.4 ns at speed grade 6, 8.1 ns of it routing). Banks one block RAM deep at its
    widest (512 × 36) made 96 banks whose 6,144 register bits congested the router (over 10 minutes).

    Parameters
    ----------
    beats : int
        Depth, in beats of ``data_bits`` (block RAM: ``beats * data_bits / 8`` bytes).
    data_bits, addr_bits, id_bits : int
        The AXI4 bus: data width, address width, ``ARID`` width.
    base : int
        Byte address of beat 0; a read below it or past the last beat is answered ``DECERR`` with zero data.
    bank_beats : int
        Beats of a bank, a power of two (default :data:`BANK_BEATS`).

    Ports
    -----
    s_axi : In(flipped :func:`~.subsystem.axi4_read_signature`)  single-beat reads (``ARLEN`` is ignored:
        :class:`~.subsystem.AxiReadMaster` issues only those), answered in order with ``RLAST`` = 1
    wr : In(stream) ``{beat, data}``: write one beat (always ready)

    Latency: ``AR`` to ``R`` :attr:`latency` clocks (the block RAM's read, :attr:`BANK_REGISTERS` bank
    registers, one per multiplexer level, the response register); one read per clock while ``RREADY``.
    """

    def __init__(self, *, beats: int, data_bits: int, addr_bits: int = 32, id_bits: int = 1, base: int = MEMORY_BASE,
                 bank_beats: int = BANK_BEATS):
        self._beats = check_int("beats", beats, 1, 1 << 24)
        self._bank = check_int("bank_beats", bank_beats, 2, 1 << 24)
        if bank_beats & (bank_beats - 1):
            raise ValueError(f"bank_beats must be a power of two, not {bank_beats!r}")
        self._bus = check_int("data_bits", data_bits, 8, 1024)
        self._addr = check_int("addr_bits", addr_bits, 8, 64)
        self._base = check_int("base", base, 0, (1 << addr_bits) - 1)
        self._shift = (data_bits // 8).bit_length() - 1
        self._banks = -(-beats // bank_beats)
        levels, n = 0, self._banks
        while n > 1:
            n, levels = -(-n // 4), levels + 1
        self._levels = levels
        super().__init__({
            "s_axi": In(axi4_read_signature(addr_bits, data_bits, id_bits)),
            "wr": In(stream.Signature(data.StructLayout({"beat": bits_for(beats - 1), "data": data_bits}))),
        })

    beats = property(lambda self: self._beats)
    banks = property(lambda self: self._banks)
    #: clocks from ``AR`` to ``R``
    latency = property(lambda self: 2 + self.BANK_REGISTERS + self._levels)

    #: Registers between a bank's block RAM and the first multiplexer.
    BANK_REGISTERS = 2

    def elaborate(self, platform):
        m = Module()
        s = self.s_axi
        nb, bb = self._banks, self._bank
        low = bb.bit_length() - 1
        offset = Signal(self._addr)
        m.d.comb += offset.eq(s.araddr - self._base)
        beat = offset[self._shift:]
        advance = ~s.rvalid | s.rready
        m.d.comb += [s.arready.eq(advance), self.wr.ready.eq(1), s.rlast.eq(1)]
        # the request's valid, ID, in-range flag and bank, carried beside the data through every stage
        stages = 1 + self.BANK_REGISTERS + self._levels
        valid = [Signal(name=f"valid{i}") for i in range(stages)]
        ids = [Signal.like(s.arid, name=f"id{i}") for i in range(stages)]
        ok = [Signal(name=f"ok{i}") for i in range(stages)]
        sel = [Signal(max(1, bits_for(nb - 1)), name=f"bank{i}") for i in range(stages)]
        with m.If(advance):
            m.d.sync += [valid[0].eq(s.arvalid), ids[0].eq(s.arid), ok[0].eq(beat < self._beats),
                         sel[0].eq(beat[low:])]
            for i in range(1, stages):
                m.d.sync += [valid[i].eq(valid[i - 1]), ids[i].eq(ids[i - 1]), ok[i].eq(ok[i - 1]),
                             sel[i].eq(sel[i - 1])]
        level = []
        for b in range(nb):
            depth = min(bb, self._beats - b * bb)
            m.submodules[f"bank{b}"] = mem = Memory(shape=self._bus, depth=depth, init=[])
            wp, rp = mem.write_port(), mem.read_port()
            m.d.comb += [wp.addr.eq(self.wr.p.beat[:low]), wp.data.eq(self.wr.p.data),
                         wp.en.eq(self.wr.valid & (self.wr.p.beat[low:] == b)),
                         rp.en.eq(advance), rp.addr.eq(beat[:low])]
            # two registers: the placer puts one beside the block RAM and the next towards the multiplexer
            held = rp.data
            for k in range(self.BANK_REGISTERS):
                # no reset: a reset would be a LUT in front of each flip-flop, which then sits with the LUTs
                nxt = Signal(self._bus, name=f"bank{b}_data{k}", reset_less=True)
                with m.If(advance):
                    m.d.sync += nxt.eq(held)
                held = nxt
            level.append(held)
        for k in range(self._levels):
            pick = sel[self.BANK_REGISTERS + k][2 * k:2 * k + 2]
            nxt = []
            for g in range(0, len(level), 4):
                group = level[g:g + 4]
                out = Signal(self._bus, name=f"mux{k}_{g // 4}", reset_less=True)
                with m.If(advance):
                    with m.Switch(pick):
                        for j, d in enumerate(group):
                            with m.Case(j):
                                m.d.sync += out.eq(d)
                nxt.append(out)
            level = nxt
        last = stages - 1
        with m.If(advance):
            m.d.sync += [s.rvalid.eq(valid[last]), s.rid.eq(ids[last]), s.rresp.eq(Mux(ok[last], 0b00, 0b11)),
                         s.rdata.eq(Mux(ok[last], level[0], 0))]
        return m


class WeightChecker(wiring.Component):
    """Takes the subsystem's weights at full rate and checks them per lane.

    Per lane ``l``: the weights of slot ``l`` since ``clear`` (``count``), their CRC-32 (zlib's, over each
    weight's ``weight_bits / 8`` bytes, least significant first, in the lane's order: ``crc``) and the clock
    of its last weight counted from ``clear`` (``last``, 0 if none). ``tready`` is always 1.

    Ports: ``i`` (In, the subsystem's ``m_axis``), ``clear`` (In 1), ``count``, ``crc``, ``last`` (Out,
    ``lanes`` × 32 bits each, as arrays).
    """

    def __init__(self, *, lanes: int, weight_bits: int):
        self._k = check_int("lanes", lanes, 1, 16)
        self._t = weight_bits
        axis = wiring.Signature({"tdata": Out(lanes * weight_bits), "tkeep": Out(lanes * weight_bits // 8),
                                 "tuser": Out(lanes * TAG_BITS), "tlast": Out(1), "tvalid": Out(1), "tready": In(1)})
        words = data.ArrayLayout(32, lanes)
        super().__init__({"i": In(axis), "clear": In(1), "count": Out(words), "crc": Out(words),
                          "last": Out(words)})

    def elaborate(self, platform):
        m = Module()
        t = self._t
        clock = Signal(32)
        m.d.comb += self.i.tready.eq(1)
        m.d.sync += clock.eq(Mux(self.clear, 1, clock + 1))
        for lane in range(self._k):
            proc = WordCrc(crc.catalog.CRC32_ISO_HDLC, t)
            m.submodules[f"crc{lane}"] = proc
            kept = self.i.tvalid & self.i.tkeep[lane * t // 8]
            m.d.comb += [proc.start.eq(self.clear), proc.valid.eq(kept & ~self.clear),
                         proc.data.eq(self.i.tdata[lane * t:(lane + 1) * t]), self.crc[lane].eq(proc.crc)]
            with m.If(self.clear):
                m.d.sync += [self.count[lane].eq(0), self.last[lane].eq(0)]
            with m.Elif(kept):
                m.d.sync += [self.count[lane].eq(self.count[lane] + 1), self.last[lane].eq(clock)]
        return m


class HostBridge(wiring.Component):
    """The host protocol (``docs/board.md``): bytes from the UART to register and memory writes, replies back.

    A command is a byte of :class:`Command` and its arguments (little-endian); every command is answered.
    An address below 0x1000 goes to the subsystem's AXI4-Lite slave, 0x1000 and up to the board's registers
    (``reg_addr``/``reg_data``/``reg_error``, read-only). ``WRITE_MEM`` writes ``beats`` beats from
    ``beat`` on, each ``bus_bits / 8`` bytes least significant first; a range past ``memory_beats`` is
    answered :attr:`Reply.RANGE` after its bytes (nothing is written). A command left unfinished for
    ``timeout`` clocks is dropped (the host's way to resynchronise: wait, then send a command again).

    Ports: ``rx`` (In stream of bytes), ``tx`` (Out stream of bytes), ``m_axil`` (Out
    :func:`~.subsystem.axi4_lite_signature` of 12 address bits), ``mem`` (Out stream ``{beat, data}``),
    ``reg_addr`` (Out 16), ``reg_data`` (In 32), ``reg_error`` (In 1), ``started`` (Out 1: one clock, a
    START the subsystem accepted).
    """

    def __init__(self, *, bus_bits: int, memory_beats: int, timeout: int):
        self._bus = check_int("bus_bits", bus_bits, 8, 1024)
        self._beats = check_int("memory_beats", memory_beats, 1, 1 << 24)
        self._timeout = check_int("timeout", timeout, 16, 1 << 30)
        super().__init__({
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "m_axil": Out(axi4_lite_signature(12)),
            "mem": Out(stream.Signature(data.StructLayout({"beat": bits_for(memory_beats - 1), "data": bus_bits}))),
            "reg_addr": Out(16),
            "reg_data": In(32),
            "reg_error": In(1),
            "started": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bus_bytes = self._bus // 8
        a = self.m_axil
        op = Signal(8)
        args = Signal(64)              # argument bytes shifted in from the top: the last n bytes at [64 - 8n:]
        need = Signal(range(9))        # argument bytes still to come
        reply = Signal(40)             # reply bytes, least significant first
        reply_left = Signal(range(6))
        beat_data = Signal(self._bus)
        beat_bytes = Signal(range(bus_bytes + 1))
        beat_at = Signal(33)
        beats_left = Signal(33)
        in_range = Signal()
        idle = Signal(range(self._timeout + 1))
        addr = Signal(16)
        wdata = Signal(32)
        m.d.comb += self.reg_addr.eq(addr)
        m.d.sync += self.started.eq(0)

        m.d.comb += [self.tx.valid.eq(reply_left != 0), self.tx.payload.eq(reply[:8])]
        with m.If(self.tx.valid & self.tx.ready):
            m.d.sync += [reply.eq(reply >> 8), reply_left.eq(reply_left - 1)]

        def answer(value, n):
            m.d.sync += [reply.eq(value), reply_left.eq(n)]

        byte = self.rx.payload
        shifted = Cat(args[8:], byte)
        m.d.comb += [a.awprot.eq(0), a.arprot.eq(0), a.wstrb.eq(0b1111), a.bready.eq(1), a.rready.eq(1)]
        m.d.comb += [self.mem.p.beat.eq(beat_at), self.mem.p.data.eq(beat_data)]

        with m.FSM():
            with m.State("OPCODE"):
                m.d.comb += self.rx.ready.eq(reply_left == 0)
                m.d.sync += idle.eq(0)
                with m.If(self.rx.valid & self.rx.ready):
                    m.d.sync += op.eq(byte)
                    with m.Switch(byte):
                        with m.Case(Command.WRITE_REG):
                            m.d.sync += need.eq(6)
                            m.next = "ARGS"
                        with m.Case(Command.READ_REG):
                            m.d.sync += need.eq(2)
                            m.next = "ARGS"
                        with m.Case(Command.WRITE_MEM):
                            m.d.sync += need.eq(8)
                            m.next = "ARGS"
                        with m.Default():
                            answer(Reply.UNKNOWN, 1)
            with m.State("ARGS"):
                m.d.comb += self.rx.ready.eq(1)
                m.d.sync += idle.eq(idle + 1)
                with m.If(self.rx.valid):
                    m.d.sync += [args.eq(shifted), need.eq(need - 1), idle.eq(0)]
                    with m.If(need == 1):
                        m.next = "EXECUTE"
                with m.Elif(idle == self._timeout):
                    m.next = "OPCODE"
            with m.State("EXECUTE"):
                with m.Switch(op):
                    with m.Case(Command.WRITE_REG):
                        # six bytes: addr u16 at [16:32], data u32 at [32:64]
                        m.d.sync += [addr.eq(args[16:32]), wdata.eq(args[32:64])]
                        m.next = "WRITE"
                    with m.Case(Command.READ_REG):
                        m.d.sync += addr.eq(args[48:64])       # two bytes
                        m.next = "READ"
                    with m.Default():       # WRITE_MEM: beat u32 at [0:32], beats u32 at [32:64]
                        end = args[0:32] + args[32:64]
                        m.d.sync += [beat_at.eq(args[0:32]), beats_left.eq(args[32:64]),
                                     in_range.eq(end <= self._beats), beat_bytes.eq(0), idle.eq(0)]
                        m.next = "DATA"
            with m.State("WRITE"):
                hit = addr < 0x1000
                m.d.comb += [a.awaddr.eq(addr), a.wdata.eq(wdata), a.awvalid.eq(hit), a.wvalid.eq(hit)]
                with m.If(~hit):
                    answer(Reply.SLVERR, 1)     # the board's registers are read-only
                    m.next = "OPCODE"
                with m.Elif(a.awready & a.wready):
                    m.next = "WRITE_RESP"
            with m.State("WRITE_RESP"):
                with m.If(a.bvalid):
                    answer(a.bresp, 1)
                    m.d.sync += self.started.eq((addr == 0x008) & wdata[0] & (a.bresp == 0))
                    m.next = "OPCODE"
            with m.State("READ"):
                hit = addr < 0x1000
                m.d.comb += [a.araddr.eq(addr), a.arvalid.eq(hit)]
                with m.If(~hit):
                    answer(Cat(self.reg_data, Mux(self.reg_error, Reply.SLVERR, Reply.OK)), 5)
                    m.next = "OPCODE"
                with m.Elif(a.arready):
                    m.next = "READ_RESP"
            with m.State("READ_RESP"):
                with m.If(a.rvalid):
                    answer(Cat(a.rdata, a.rresp, Const(0, 6)), 5)
                    m.next = "OPCODE"
            with m.State("DATA"):
                m.d.comb += self.rx.ready.eq((beat_bytes != bus_bytes) & (beats_left != 0))
                with m.If(beats_left == 0):
                    answer(Mux(in_range, Reply.OK, Reply.RANGE), 1)
                    m.next = "OPCODE"
                with m.Elif(beat_bytes == bus_bytes):
                    m.d.comb += self.mem.valid.eq(in_range)
                    m.d.sync += [beat_bytes.eq(0), beat_at.eq(beat_at + 1), beats_left.eq(beats_left - 1)]
                with m.Elif(self.rx.valid):
                    m.d.sync += [beat_data.eq(Cat(beat_data[8:], byte)), beat_bytes.eq(beat_bytes + 1), idle.eq(0)]
                with m.Else():
                    m.d.sync += idle.eq(idle + 1)
                    with m.If(idle == self._timeout):
                        m.next = "OPCODE"
        return m


class BoardCore(wiring.Component):
    """What a board's bitstream runs, without its PLL and pins: host link, block memory, lanes, checker.

    Parameters
    ----------
    codec : Codec or None
        The lanes' codec (default: the default container format's).
    lanes, target, bus_bits, max_codes, escape_bits, table_sets, row_shifts, count_bits, fifo_beats
        The :class:`~.subsystem.AxiDecompressor`'s.
    memory_beats : int
        The block memory's depth in beats of ``bus_bits``.
    clock_hz : int
        The design clock (what ``CLOCK_HZ`` reads; the host's rates are computed at it).
    divisor : int
        Design clocks per UART bit (``clock_hz / baud``; a simulation runs a small one, the protocol the same).

    Ports: ``uart_rx`` (In 1), ``uart_tx`` (Out 1), ``leds`` (Out 8: [0] busy, [1] done, [2] a decode
    error, [3] a bus error, [4] a UART framing error since reset).
    """

    def __init__(self, codec: Codec | None = None, *, lanes: int = 1, target: str = "bf16", bus_bits: int | None = None,
                 memory_beats: int, clock_hz: int, divisor: int, max_codes: int = 64, escape_bits: int = 5,
                 table_sets: int = 1, row_shifts: bool = False, count_bits: int = 20, fifo_beats: int = 16):
        from .subsystem import default_bus_bits

        self._MustUse__silence = True
        if codec is None:
            from ..model.coding.codecs import parse_codec
            from .cores import default_codec

            codec = parse_codec(default_codec("tans-decoder"))
        bus = bus_bits or default_bus_bits(codec, lanes, target)
        self._sub = AxiDecompressor(codec, lanes=lanes, target=target, bus_bits=bus, max_codes=max_codes,
                                    escape_bits=escape_bits, table_sets=table_sets, row_shifts=row_shifts,
                                    count_bits=count_bits, fifo_beats=fifo_beats, resumable=True)
        self._beats = check_int("memory_beats", memory_beats, 16, 1 << 24)
        self._clock = check_int("clock_hz", clock_hz, 1, 1_000_000_000)
        self._div = check_int("divisor", divisor, 4, 1 << 16)
        self._codec_name = codec.name.encode()
        if len(self._codec_name) > 32:
            raise ValueError(f"codec name {codec.name!r} is longer than the 32 bytes of the CODEC registers")
        self._build = (max_codes | self._sub.max_symbols << 9 | escape_bits << 18 | count_bits << 22
                       | int(row_shifts) << 28)
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "leds": Out(8)})
        self._MustUse__silence = False

    subsystem = property(lambda self: self._sub)
    memory_beats = property(lambda self: self._beats)
    clock_hz = property(lambda self: self._clock)
    divisor = property(lambda self: self._div)

    @property
    def memory_bytes(self) -> int:
        return self._beats * self._sub.bus_bits // 8

    def board_registers(self) -> dict[int, int]:
        """The constant board registers, ``{address: value}`` (the lanes' are live)."""
        regs = {BoardReg.ID: BOARD_ID, BoardReg.VERSION: BOARD_VERSION, BoardReg.CLOCK_HZ: self._clock,
                BoardReg.MEMORY_BEATS: self._beats, BoardReg.BUILD: self._build, BoardReg.UART_DIVISOR: self._div}
        name = self._codec_name.ljust(32, b"\0")
        for i in range(8):
            regs[BoardReg.CODEC + 4 * i] = int.from_bytes(name[4 * i:4 * i + 4], "little")
        return {int(k): v for k, v in regs.items()}

    def elaborate(self, platform):
        m = Module()
        sub = self._sub
        m.submodules.rx = rx = UartRx(self._div)
        m.submodules.tx = tx = UartTx(self._div)
        # a command is dropped after about 1,000 byte times without a byte
        m.submodules.bridge = bridge = HostBridge(bus_bits=sub.bus_bits, memory_beats=self._beats,
                                                  timeout=self._div * 10 * 1024)
        m.submodules.memory = mem = BlockMemory(beats=self._beats, data_bits=sub.bus_bits, addr_bits=sub.addr_bits,
                                                id_bits=len(sub.m_axi.arid))
        m.submodules.subsystem = sub
        m.submodules.checker = chk = WeightChecker(lanes=sub.lanes, weight_bits=len(sub.m_axis.tdata) // sub.lanes)
        m.d.comb += [rx.rx.eq(self.uart_rx), self.uart_tx.eq(tx.tx)]
        wiring.connect(m, rx.o, bridge.rx)
        wiring.connect(m, bridge.tx, tx.i)
        wiring.connect(m, bridge.m_axil, sub.s_axil)
        wiring.connect(m, bridge.mem, mem.wr)
        wiring.connect(m, sub.m_axi, mem.s_axi)
        wiring.connect(m, sub.m_axis, chk.i)
        m.d.comb += chk.clear.eq(bridge.started)

        # the board's registers: constants, then per lane {count, crc, last}
        consts = self.board_registers()
        a = bridge.reg_addr
        m.d.comb += bridge.reg_error.eq(1)
        with m.Switch(a):
            for addr, value in consts.items():
                with m.Case(addr):
                    m.d.comb += [bridge.reg_data.eq(value), bridge.reg_error.eq(0)]
            for lane in range(sub.lanes):
                for k, field in enumerate((chk.count, chk.crc, chk.last)):
                    with m.Case(BoardReg.LANE0 + 16 * lane + 4 * k):
                        m.d.comb += [bridge.reg_data.eq(field[lane]), bridge.reg_error.eq(0)]

        framing = Signal()
        with m.If(rx.framing_error):
            m.d.sync += framing.eq(1)
        busy = Signal()
        with m.If(bridge.started):
            m.d.sync += busy.eq(1)
        with m.Elif(sub.done):
            m.d.sync += busy.eq(0)
        m.d.comb += self.leds.eq(Cat(busy, sub.done, sub.status.as_value() != 0, sub.error, framing))
        return m


class BoardTop(Elaboratable):
    """A :class:`BoardCore` on a board: the PLL from the board's oscillator to ``core.clock_hz``, the reset
    held until the PLL locks, the UART pins and the LEDs.

    ``pll`` is the ``EHXPLLL`` configuration (:func:`ansforge.sim.board.pll_config`, from ``ecppll``):
    ``{"CLKI_DIV", "CLKFB_DIV", "CLKOP_DIV", "CLKOP_CPHASE", ...}``.
    """

    def __init__(self, core: BoardCore, board: Board, pll: dict[str, int]):
        self.core, self.board, self.pll = core, board, dict(pll)

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = cd = ClockDomain("sync")
        platform.add_clock_constraint(cd.clk, self.core.clock_hz)
        m.submodules.osc = osc = io.Buffer("i", platform.request(self.board.oscillator, 0, dir="-"))
        locked = Signal()
        p = self.pll
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=str(self.board.oscillator_hz / 1e6), a_FREQUENCY_PIN_CLKOP=str(self.core.clock_hz / 1e6),
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED", p_DPHASE_SOURCE="DISABLED",
            p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB", p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=p["CLKI_DIV"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p["CLKOP_DIV"],
            p_CLKOP_CPHASE=p["CLKOP_CPHASE"], p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=p["CLKFB_DIV"],
            i_RST=0, i_STDBY=0, i_CLKI=osc.i, o_CLKOP=cd.clk, i_CLKFB=cd.clk,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0,
            i_ENCLKOP=0, o_LOCK=locked)
        m.submodules.reset = ResetSynchronizer(~locked, domain="sync")
        m.submodules.core = core = self.core
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [core.uart_rx.eq(rx.i), tx.o.eq(core.uart_tx)]
        for i in range(8):
            try:
                pin = platform.request("led", i, dir="-")
            except ResourceError:       # a board with fewer LEDs shows the first ones
                break
            m.submodules[f"led{i}"] = led = io.Buffer("o", pin)
            m.d.comb += led.o.eq(core.leds[i])
        return m
