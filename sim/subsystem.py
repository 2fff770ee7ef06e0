"""The decompression subsystem in simulation: a block of a container through its AXI ports, bit-exact.

:class:`SubsystemBench` is the simulated board around an :class:`~ansforge.hdl.subsystem.AxiDecompressor`:

* :class:`AxiMemory`, an AXI4 read slave in front of a memory image, with a fixed read latency and a
  minimum interval between accepted reads (a DRAM controller's figures, not its timing model);
* :class:`AxiLiteWriter`, an AXI4-Lite master that plays register writes from a stream, one at a
  time, as a CPU's driver would (it checks every ``BRESP``).

Its ports are streams, so both simulation engines and the take-home testbench (``ansforge testbench
--top subsystem``) drive it unchanged: ``mem_cfg`` (the memory image), ``csr_cfg`` (the base and lane
registers), ``cmd`` (the START write), ``o`` (the AXI4-Stream output as ``{data, keep, last}``), ``done``
and ``status`` (the decode status in bits 2..0, an AXI read error in bit 3, a refused register write in
bit 4).

:func:`lanes_program` lays each lane's blocks into its region of records (a header, the tensor's table
entries where the lane does not hold them, the block's words: :func:`~.lanes.region_image`) and writes the
register program: a :class:`SubsystemProgram`, what a driver does for one START, free of any bench;
:func:`subsystem_program` does it for one tensor's blocks, one a lane (a tensor given as pairs is cut
into ``lanes`` contiguous blocks coded alone, :func:`~.lanes.chunk_blocks`). :func:`run_program` runs a
program on a :class:`SubsystemBench` and checks every lane's weights in its slot.
:mod:`.container_plan` gives and runs the STARTs of a whole container. The cocotb bench
``tests/hdl/cocotb_subsystem_bench.py`` runs the same programs against cocotbext-axi's AXI4 models.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..hdl.common import DecodeStatus, bits_for, check_int
from ..hdl.parallel import TAG_BITS
from ..hdl.subsystem import AxiDecompressor, Csr, Table, axi4_lite_signature, axi4_read_signature
from ..model.coding.codecs import Codec
from ..model.errors import AnsforgeError, ConfigError
from ..model.dtypes.interfaces import CodingPairFormat, PairToFloatTable
from ..model.dtypes.pairs import PAIR_FORMATS
from .jobs import CoreJob
from .lanes import chunk_blocks, decoder_entries, region_image, run_entries
from .memory import SimulationRam
from .streams import field_bits, pack
from .testbench import payload_ints

__all__ = ["AxiMemory", "AxiLiteWriter", "SubsystemBench", "SubsystemRun", "SubsystemMismatch", "Block",
           "SubsystemProgram", "subsystem_program", "program_job", "run_program", "program_bound", "lane_bound",
           "run_subsystem", "checkpoint_block", "subsystem_bench_for", "run_block",
           "memory_depth",
           "pack_rows", "transfer_lanes", "container_order", "lane_streams", "MEMORY_BASE", "LaneBlock", "lanes_program", "tensor_entries",
           "table_beats"]

#: Byte address of the memory image on the simulated AXI bus (a DDR window, away from 0 so that the
#: read master's address arithmetic is exercised).
MEMORY_BASE = 0x8000_0000


class SubsystemMismatch(AnsforgeError):
    """The subsystem gave other weights than the container's, or reported an error."""


class AxiMemory(wiring.Component):
    """An AXI4 read slave over ``depth`` beats at :data:`MEMORY_BASE`: a response ``latency`` clocks after
    each read, at most one read accepted every ``interval`` clocks.

    Single-beat reads (``ARLEN`` = 0, what :class:`~ansforge.hdl.subsystem.AxiReadMaster` issues);
    others, and addresses outside the image, answer ``SLVERR``/``DECERR``. Responses come in request
    order and are not held back: the master keeps ``RREADY`` high. ``mem_cfg`` writes the image.
    """

    def __init__(self, *, depth: int, data_bits: int, addr_bits: int = 32, id_bits: int = 2, latency: int = 32,
                 interval: int = 1):
        self._depth = check_int("depth", depth, 1, 1 << 24)
        self._data = data_bits
        self._shift = (data_bits // 8).bit_length() - 1
        self._latency = check_int("latency", latency, 1, 1024)
        self._interval = check_int("interval", interval, 1, 1024)
        self._addr = addr_bits
        super().__init__({
            "mem_cfg": In(stream.Signature(data.StructLayout({"addr": bits_for(depth - 1), "data": data_bits}))),
            "s_axi": In(axi4_read_signature(addr_bits, data_bits, id_bits)),
        })

    depth = property(lambda self: self._depth)
    latency = property(lambda self: self._latency)
    interval = property(lambda self: self._interval)

    def elaborate(self, platform):
        m = Module()
        m.submodules.storage = ram = SimulationRam(depth=self._depth, width=self._data)
        s = self.s_axi
        m.d.comb += [ram.w_addr.eq(self.mem_cfg.p.addr), ram.w_data.eq(self.mem_cfg.p.data),
                     ram.w_en.eq(self.mem_cfg.valid), self.mem_cfg.ready.eq(1)]
        cool = Signal(bits_for(self._interval - 1))
        fire = s.arvalid & s.arready
        m.d.comb += s.arready.eq(cool == 0)
        with m.If(fire):
            m.d.sync += cool.eq(self._interval - 1)
        with m.Elif(cool != 0):
            m.d.sync += cool.eq(cool - 1)
        offset = Signal(self._addr)
        m.d.comb += offset.eq(s.araddr - MEMORY_BASE)
        beat = offset >> self._shift
        resp = Signal(2)
        m.d.comb += resp.eq(0b00)
        with m.If((s.arlen != 0) | (s.arsize != self._shift)):
            m.d.comb += resp.eq(0b10)                          # SLVERR: not a one-beat, full-width read
        with m.Elif((s.araddr < MEMORY_BASE) | (beat >= self._depth)):
            m.d.comb += resp.eq(0b11)                          # DECERR: outside the image
        valid, addr, tag, err = fire, beat, s.arid, resp
        for stage in range(self._latency - 1):
            v, a, t, e = Signal(name=f"v{stage}"), Signal(bits_for(self._depth - 1), name=f"a{stage}"), \
                Signal(len(s.arid), name=f"t{stage}"), Signal(2, name=f"e{stage}")
            m.d.sync += [v.eq(valid), a.eq(addr), t.eq(tag), e.eq(err)]
            valid, addr, tag, err = v, a, t, e
        m.d.comb += [ram.r_addr.eq(addr), s.rdata.eq(ram.r_data)]
        m.d.sync += [s.rvalid.eq(valid), s.rid.eq(tag), s.rresp.eq(err), s.rlast.eq(valid)]
        return m


class AxiLiteWriter(wiring.Component):
    """Register writes ``{addr, data}`` from ``i`` as AXI4-Lite write transactions, one at a time.

    ``idle`` is high when no write is in flight; ``error`` is set (sticky) by a ``BRESP`` other than OKAY.
    ``AWVALID`` and ``WVALID`` rise together and each drops on its own handshake, as a CPU's bus bridge does.
    """

    def __init__(self, addr_bits: int = 12):
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"addr": addr_bits, "data": 32}))),
            "m_axil": Out(axi4_lite_signature(addr_bits)),
            "idle": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        b = self.m_axil
        waiting = Signal()
        m.d.comb += [self.i.ready.eq(~waiting), self.idle.eq(~waiting), b.wstrb.eq(0b1111), b.bready.eq(1),
                     b.arvalid.eq(0), b.rready.eq(1)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [waiting.eq(1), b.awvalid.eq(1), b.wvalid.eq(1), b.awaddr.eq(self.i.p.addr),
                         b.wdata.eq(self.i.p.data)]
        with m.If(b.awvalid & b.awready):
            m.d.sync += b.awvalid.eq(0)
        with m.If(b.wvalid & b.wready):
            m.d.sync += b.wvalid.eq(0)
        with m.If(b.bvalid & waiting):
            m.d.sync += waiting.eq(0)
            with m.If(b.bresp != 0):
                m.d.sync += self.error.eq(1)
        return m


def _csr_layout() -> data.StructLayout:
    return data.StructLayout({"addr": 12, "data": 32})


class SubsystemBench(wiring.Component):
    """:class:`AxiDecompressor` + :class:`AxiMemory` + :class:`AxiLiteWriter` (see the module docstring).

    Parameters
    ----------
    dut : AxiDecompressor
    depth : int
        Memory beats.
    latency, interval : int
        As :class:`AxiMemory` (defaults: 32 clocks, one read per clock: a DDR4 controller's read
        latency at a 250 MHz fabric clock, order of magnitude).
    """

    def __init__(self, dut: AxiDecompressor, *, depth: int, latency: int = 32, interval: int = 1):
        if not isinstance(dut, AxiDecompressor):
            raise TypeError(f"dut must be an AxiDecompressor, not {dut!r}")
        self.dut = dut
        self.memory = AxiMemory(depth=depth, data_bits=dut.bus_bits, addr_bits=dut.addr_bits,
                                id_bits=len(dut.m_axi.arid), latency=latency, interval=interval)
        self.writer = AxiLiteWriter()
        lanes_bits = len(dut.m_axis.tdata)
        user_bits = len(dut.m_axis.tuser)
        super().__init__({
            "mem_cfg": self.memory.signature.members["mem_cfg"],
            "csr_cfg": In(stream.Signature(_csr_layout())),
            "cmd": In(stream.Signature(_csr_layout())),
            "o": Out(stream.Signature(data.StructLayout({"data": lanes_bits, "keep": lanes_bits // 8, "last": 1,
                                                         "user": user_bits}))),
            "done": Out(1),
            "status": Out(5),
        })

    @property
    def programmable(self) -> bool:
        return True

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        m.submodules.memory = mem = self.memory
        m.submodules.writer = wr = self.writer
        wiring.connect(m, dut.m_axi, mem.s_axi)
        wiring.connect(m, wr.m_axil, dut.s_axil)
        wiring.connect(m, wiring.flipped(self.mem_cfg), mem.mem_cfg)
        # table and block registers first, then START: the writer takes one write at a time, in order
        with m.If(self.csr_cfg.valid):
            m.d.comb += [wr.i.valid.eq(1), wr.i.p.eq(self.csr_cfg.p), self.csr_cfg.ready.eq(wr.i.ready)]
        with m.Else():
            m.d.comb += [wr.i.valid.eq(self.cmd.valid), wr.i.p.eq(self.cmd.p), self.cmd.ready.eq(wr.i.ready)]
        a = dut.m_axis
        m.d.comb += [self.o.valid.eq(a.tvalid), a.tready.eq(self.o.ready), self.o.p.data.eq(a.tdata),
                     self.o.p.keep.eq(a.tkeep), self.o.p.last.eq(a.tlast), self.o.p.user.eq(a.tuser),
                     self.done.eq(dut.done & wr.idle),
                     self.status.eq(dut.status.as_value() | (dut.error << 3) | (wr.error << 4))]
        return m


@dataclass
class Block:
    """One tensor as the subsystem decodes it: coder table, code table, exponent table, its symbols and
    additional data, and its weights' bit patterns (what the output stream must carry)."""

    name: str
    spec: Codec
    table: object
    code_table: object
    exponents: np.ndarray
    symbols: np.ndarray
    extras: np.ndarray
    bits: np.ndarray


def checkpoint_block(path: str, codec: str, matrix: str | None, target: str = "bf16") -> Block:
    """Matrix ``matrix`` of checkpoint ``path`` (default: the smallest the paper counts) as ``target``
    pairs (bf16: rounded to nearest even, as ``--pairs bf16``; fp32: the stored values), coded with
    ``codec``'s tables the way ``ansforge compress`` builds them."""
    from ..model.llm.checkpoint import open_checkpoint, select_tensors
    from ..model.coding.codecs import parse_codec
    from ..model.dtypes.pairs import convert

    spec = parse_codec(codec)
    ck = open_checkpoint(path)
    infos = {i.name: i for i in select_tensors(ck)}
    if matrix is not None and matrix not in infos:
        raise ConfigError(f"{path}: no matrix named {matrix!r} (matrices: {', '.join(sorted(infos)[:8])} ...)")
    if not infos:
        raise ConfigError(f"{path}: no matrix to test")
    info = infos[matrix] if matrix else min(infos.values(), key=lambda i: int(np.prod(i.shape)))
    rec = ck.tensor(info.name)
    values = convert(rec.array, rec.dtype, target)[0]
    pf = PAIR_FORMATS[target]
    pairs = pf.split(values)
    counts = pairs.counts()
    ct, table = spec.tables(counts, pf.extra_bits)
    s, e = ct.to_symbols(pairs.codes, pairs.extra)
    return Block(info.name, spec, table, ct, np.asarray(pairs.exponents), s, e, pf.as_bits(values).ravel())


def table_beats(dut: AxiDecompressor) -> int:
    """Beats a lane's record takes beyond its block's words at most: a header and every table entry
    (the decoder's table, every set; the symbol, escape and float tables) plus padding."""
    par = dut.parallel
    cfg = dut.decoder_cfg_layout
    entries = (1 << cfg["addr"].width) + dut.max_symbols + (1 << dut.escape_bits) + dut.max_codes
    units = par.header_units + entries * par.entry_units + 1
    return -(-units // par.units_per_beat) + 1


def memory_depth(dut: AxiDecompressor, n_pairs: int) -> int:
    """Beats (a power of two) that hold any ``n_pairs``-pair block's lane regions: per pair at most the
    coder's state bits (17 covers tANS R <= 16 and an rANS renormalization word's share) plus its
    additional data and escape index; per lane a final state, a padded beat and a record's header and
    tables (:func:`table_beats`)."""
    per_lane = -(-int(n_pairs) // dut.lanes)
    head = 2 * dut.codec.states * max(dut.codec.state_bits, dut.codec.word_bits)    # flush and head, padding
    beats = dut.lanes * (2 + table_beats(dut) + -(-(per_lane * (dut.extra_bits + dut.escape_bits + 17) + head
                                                     + 4 * dut.codec.word_bits) // dut.bus_bits))
    return 1 << max(4, (beats - 1).bit_length())


def subsystem_bench_for(dut: AxiDecompressor, block: Block, *, latency: int = 32, interval: int = 1) -> CoreJob:
    """The :class:`SubsystemBench` job that decodes ``block`` through ``dut`` (memory sized to fit)."""
    bench = SubsystemBench(dut, depth=memory_depth(dut, block.symbols.size), latency=latency, interval=interval)
    return program_job(bench, subsystem_program(dut, block.spec, block.table, block.code_table, block.exponents,
                                                block.symbols, block.extras, block.bits, name=block.name))


def run_block(engine, dut: AxiDecompressor, block: Block, *, latency: int = 32, interval: int = 1,
              stall_prob: float = 0.0, seed: int = 0) -> SubsystemRun:
    """``block`` through ``dut`` on a :class:`SubsystemBench` of its size (see :func:`run_subsystem`)."""
    bench = SubsystemBench(dut, depth=memory_depth(dut, block.symbols.size), latency=latency, interval=interval)
    return run_subsystem(engine, bench, block.spec, block.table, block.code_table, block.exponents, block.symbols,
                         block.extras, block.bits, name=block.name, stall_prob=stall_prob, seed=seed)


@dataclass
class SubsystemRun:
    """One block through the subsystem: weights, clocks (START to done), compressed bits read, bound."""

    weights: int
    cycles: int
    coded_bits: int
    bound: float            # weights per clock the lanes and the bus allow for this block
    table_beats: int = 0    # beats of records' headers and tables the lanes read beside the blocks' words

    @property
    def weights_per_clock(self) -> float:
        return self.weights / self.cycles if self.cycles else 0.0


def _packed(writes: list[tuple[int, int]]) -> np.ndarray:
    """Register writes ``(byte address, value)`` as the bench's ``csr_cfg`` payloads (the value's low 32
    bits; a whole model's program is some 10^5 writes, so they are packed as arrays)."""
    layout = _csr_layout()
    a, d = layout["addr"], layout["data"]
    addr = np.fromiter((int(x) for x, _ in writes), dtype=np.uint64, count=len(writes))
    value = np.fromiter((int(v) & 0xFFFF_FFFF for _, v in writes), dtype=np.uint64, count=len(writes))
    if (addr >> np.uint64(a.width)).any():
        raise ValueError(f"field 'addr': {int(addr.max())} does not fit {a.width} bits")
    return (addr << np.uint64(a.offset)) | (value << np.uint64(d.offset))


def lane_streams(spec: Codec, table, symbols: np.ndarray, extras: np.ndarray, lanes: int) -> list[np.ndarray]:
    """Each lane's words (push order): the tensor cut into ``lanes`` contiguous blocks, each coded alone
    (:func:`~.lanes.chunk_blocks`)."""
    return [w for w, _ in chunk_blocks(spec, table, np.asarray(symbols).ravel(), np.asarray(extras).ravel(), lanes)]


def tensor_entries(dut: AxiDecompressor, tables, code_table, exponents, fold: int = 0,
                   name: str = "tensor") -> list[tuple[int, int, int]]:
    """The table entries ``(kind, addr, data)`` (:class:`~ansforge.hdl.parallel.Table`) that load a tensor
    into a lane of ``dut``: its coder ``tables`` (one table set each), its code table's symbol and escape
    entries and its float entries (``exponents``: each code's exponent field; ``fold``: see
    :func:`float_writes`)."""
    tables = list(tables) if isinstance(tables, (list, tuple)) else [tables]
    if code_table.index_bits > dut.escape_bits:
        raise ConfigError(f"{name}: the tensor's escape group needs {code_table.index_bits} index bits; the "
                          f"subsystem was built with escape_bits = {dut.escape_bits}")
    if code_table.n_symbols > dut.max_symbols or len(exponents) > dut.max_codes:
        raise ConfigError(f"{name}: the tensor has {code_table.n_symbols} symbols and {len(exponents)} codes; the "
                          f"subsystem takes {dut.max_symbols} and {dut.max_codes}")
    if code_table.extra_bits + fold != dut.extra_bits:
        raise ConfigError(f"{name}: the tensor's pairs have {code_table.extra_bits} bits of additional data and "
                          f"{fold} folded into the code; the {dut.target} subsystem's have {dut.extra_bits}")
    if len(tables) > 1 << dut.parallel.set_bits:
        raise ConfigError(f"{name}: the tensor has {len(tables)} tables; the subsystem was built with "
                          f"{dut.table_sets} table sets")
    out = decoder_entries(dut.parallel, tables)
    out += [(Table.SYMBOL, s, c) for s, c in enumerate(code_table.direct_codes)]
    if code_table.has_escape:
        out.append((Table.SYMBOL, code_table.n_direct, 1 << 16))
    out += [(Table.ESCAPE, i, c) for i, c in enumerate(code_table.escape_codes)]
    f_shape = dut.float_cfg_layout
    out += [(Table.FLOAT, w["addr"], pack(f_shape["data"].shape, w["data"]))
            for w in float_writes(dut.target, dut.extra_bits, exponents, fold)]
    return out


@dataclass
class LaneBlock:
    """One block as a lane decodes it: its ``words`` (push order) and ``count`` pairs, the table ``entries``
    loaded before it (``None``: the lane keeps the tables it holds), its ``runs`` ``(set, shift, count)``
    (``None``: one run of set 0, no shift), the weights' bit patterns it must give (``bits``), its tensor
    (``tensor``, the container's index) and the ``tag`` its weights carry out (``TUSER``): a START numbers
    its blocks in container order from 0. ``part``: a part of a block cut at a checkpoint, the header's
    ``{resume, partial, bit, state}`` (resumable lanes only; ``None``: a whole block)."""

    words: np.ndarray
    count: int
    entries: list | None
    runs: list | None
    bits: np.ndarray
    tensor: int = -1
    tag: int = 0
    part: dict | None = None
    #: ``(stream index, block index)`` of a version-6 container's block (``None``: a block coded here)
    origin: tuple | None = None


@dataclass
class SubsystemProgram:
    """One START of an :class:`AxiDecompressor`, as a driver runs it: the memory image, the register writes
    before the START, and the weights that must come out of each lane.

    ``beats`` are the image from :data:`MEMORY_BASE` on, one ``bus_bits`` beat a row of 64-bit pieces
    (beat ``i`` at byte ``MEMORY_BASE + i * bus_bits / 8``, little-endian); ``writes`` the AXI4-Lite writes
    ``(byte address, value)`` in order (``BASE``, the lane registers; the START itself, ``CONTROL`` = 1,
    is not among them); ``lanes`` each lane's weights' bit patterns, its blocks' one after another (what
    ``ansforge decompress`` gives for them); ``coded_bits`` the compressed bits of the blocks (their words,
    not their headers or tables); ``table_beats`` the beats of the records' headers and tables;
    ``blocks`` each lane's blocks as ``(tag, weights)``, in the order the lane decodes them."""

    name: str
    beats: np.ndarray
    writes: list[tuple[int, int]]
    lanes: list[np.ndarray]
    coded_bits: int
    table_beats: int = 0
    blocks: list[list[tuple[int, int]]] = field(default_factory=list)

    @property
    def weights(self) -> int:
        return sum(int(b.size) for b in self.lanes)


def lanes_program(dut: AxiDecompressor, lane_blocks: list[list[LaneBlock]], name: str = "program") -> SubsystemProgram:
    """The :class:`SubsystemProgram` in which lane ``l`` decodes ``lane_blocks[l]`` in order (at most
    ``lanes`` lists): each lane's region of records (:func:`~.lanes.region_image`) and, with runs, its
    blocks' runs."""
    par = dut.parallel
    if len(lane_blocks) > dut.lanes:
        raise ValueError(f"blocks for {len(lane_blocks)} lanes; the subsystem has {dut.lanes}")
    lane_blocks = list(lane_blocks) + [[] for _ in range(dut.lanes - len(lane_blocks))]
    entries = None
    if par.has_runs:
        entries = []
        for blocks in lane_blocks:
            lane = []
            for b in blocks:
                runs = b.runs if b.runs is not None else [(0, 0, b.count)]
                if sum(x[2] for x in runs) != b.count:
                    raise ValueError(f"{name}: runs of {sum(x[2] for x in runs)} pairs for a block of {b.count}")
                lane += run_entries(par, runs)
            entries.append(lane)
    elif any(b.runs is not None and any(x[0] or x[1] for x in b.runs) for bl in lane_blocks for b in bl):
        raise ConfigError(f"{name}: a tensor has several tables or row shifts; the subsystem was built with "
                          "neither table sets nor row shifts")
    try:
        image, regs = region_image(par, [[(b.words, b.count, b.entries, b.tag, b.part) for b in bl] for bl in lane_blocks],
                                   entries)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc} (count_bits = {dut.count_bits}: cut it into smaller blocks or build "
                          "the subsystem with more count bits)") from None
    writes = [(Csr.BASE_LO, MEMORY_BASE), (Csr.BASE_HI, 0)]
    for lane, reg in enumerate(regs):
        writes += [(Csr.LANE0 + 8 * lane, reg["base"]), (Csr.LANE0 + 8 * lane + 4, reg["units"])]
        if par.has_runs:
            writes += [(Csr.LANE_RUNS0 + 8 * lane, reg["runs_base"]), (Csr.LANE_RUNS0 + 8 * lane + 4, reg["runs"])]
    bits = [np.concatenate([np.asarray(b.bits).ravel() for b in bl]) if bl else np.zeros(0, np.uint64)
            for bl in lane_blocks]
    coded = sum(int(np.asarray(b.words).size) for bl in lane_blocks for b in bl) * dut.codec.word_bits
    tables = sum(par.header_units + par.entry_units * len(b.entries or []) for bl in lane_blocks for b in bl)
    return SubsystemProgram(name, image, [(int(a), int(d)) for a, d in writes], bits, coded,
                            -(-tables // par.units_per_beat), [[(b.tag, b.count) for b in bl] for bl in lane_blocks])


def subsystem_program(dut: AxiDecompressor, spec: Codec, table, code_table, exponents, symbols: np.ndarray,
                      extras: np.ndarray, expected_bits: np.ndarray,
                      blocks: list[tuple[np.ndarray, int]] | None = None,
                      runs: list[list[tuple[int, int, int]]] | None = None, fold: int = 0,
                      name: str = "tensor") -> SubsystemProgram:
    """The :class:`SubsystemProgram` that decodes up to ``lanes`` independent blocks of one tensor (its
    coder ``table`` or tables, one table set each, ``code_table`` and exponent table) in one START, block
    ``l`` in lane ``l``, each lane loading the tensor's tables first: ``blocks`` (``(words in push order,
    pairs)`` each; default ``symbols``/``extras`` cut into one contiguous block per lane); ``runs``: each
    block's ``(set, shift, count)`` (a subsystem built with table sets or row shifts needs them; default one
    run of set 0, no shift). ``expected_bits`` are the blocks' weights' bit patterns, one block after
    another. ``fold``: mantissa bits a context plan folded into the tensor's codes (see :func:`float_writes`)."""
    tables = list(table) if isinstance(table, (list, tuple)) else [table]
    entries = tensor_entries(dut, tables, code_table, exponents, fold, name)
    if blocks is None:
        blocks = chunk_blocks(spec, tables[0], np.asarray(symbols).ravel(), np.asarray(extras).ravel(), dut.lanes)
    if len(blocks) > dut.lanes:
        raise ValueError(f"{len(blocks)} blocks for {dut.lanes} lanes")
    bits = np.asarray(expected_bits).ravel()
    if sum(int(c) for _, c in blocks) != bits.size:
        raise ValueError(f"{bits.size} weights for blocks of {sum(int(c) for _, c in blocks)}")
    lane_blocks, at = [], 0
    for lane, (w, c) in enumerate(blocks):
        if c:
            lane_blocks.append([LaneBlock(np.asarray(w), int(c), entries, runs[lane] if runs is not None else None,
                                          bits[at:at + c], tag=lane)])
        else:
            lane_blocks.append([])
        at += int(c)
    return lanes_program(dut, lane_blocks, name)


def program_job(bench: SubsystemBench, program: SubsystemProgram) -> CoreJob:
    """The :class:`SubsystemBench` job that runs ``program``: its image in the bench's memory, its register
    writes on ``csr_cfg``, the START on ``cmd`` (the weights are checked by :func:`run_program`)."""
    dut = bench.dut
    beats = np.asarray(program.beats, dtype=np.uint64)
    n_beats = beats.shape[0]
    if n_beats > bench.memory.depth:
        raise ConfigError(f"{program.name}: the lanes' regions take {n_beats} beats, the memory holds "
                          f"{bench.memory.depth}")
    mem_shape = bench.signature.members["mem_cfg"].signature.members["payload"].shape
    job = CoreJob("subsystem-decoder", bench)
    addr_field, data_field = mem_shape["addr"], mem_shape["data"]
    mem = pack_rows(n_beats, mem_shape.size,
                    [(addr_field.offset, addr_field.width, np.arange(n_beats, dtype=np.uint64))]
                    + [(data_field.offset + 64 * j, min(64, dut.bus_bits - 64 * j), beats[:, j])
                       for j in range(beats.shape[1])])
    job.cfg = {"mem_cfg": mem, "csr_cfg": _packed(program.writes)}
    job.commands = _packed([(Csr.CONTROL, 1)])
    job.pairs = program.weights
    job.words = n_beats * dut.beat_words
    job.expected_status = [0]
    job.expected = np.zeros((0, 1), np.uint64)
    job.slots = (PAIR_FORMATS[dut.target].total_bits, [np.asarray(b).astype(np.uint64) for b in program.lanes])
    if program.blocks:
        job.slot_tags = [np.repeat(np.asarray([t for t, _ in blocks], np.uint64), [c for _, c in blocks])
                         for blocks in program.blocks]
    return job


def float_writes(target: str, extra_bits: int, exponents, fold: int = 0) -> list[dict]:
    """The float table's writes of a ``target`` subsystem whose pairs carry ``extra_bits`` for a tensor's codes
    (its ``exponents``: each code's exponent field).

    With ``fold`` = 1 (a context plan's folded code: field ``E << 1 | t``, ``t`` the mantissa's top bit,
    the pair one bit narrower), the lanes shift the pair left by one (its run's ``shift``), which puts
    the escape index and the sign back where the full-width pair has them and leaves the mantissa
    ``m`` one bit high; the code's entry is exponent ``E``'s with ``hidden = t`` and ``shift = M + 1``,
    so the significand ``t m 0`` shifted right by one is the mantissa field ``t m``. More folded bits do
    not fit the entry's one-bit ``hidden``: refused in one line."""
    if fold not in (0, 1):
        raise ConfigError(f"the tensor's context plan folds {fold} mantissa bits into its codes; the subsystem's "
                          "float stage takes at most 1 (compress_checkpoint's context_fold, 1 by default)")
    exps = [int(e) >> fold for e in exponents]
    writes = PairToFloatTable(CodingPairFormat.ieee(target, exps), target, max_extra_bits=extra_bits).writes()
    if fold:
        mantissa = PAIR_FORMATS[target].mantissa_bits
        for w, e in zip(writes, exponents):
            if not w["data"]["direct"]:
                w["data"].update(hidden=int(e) & 1, shift=mantissa + 1)
    return writes


def pack_rows(n: int, width: int, fields: list[tuple[int, int, np.ndarray]]) -> np.ndarray:
    """``n`` payloads of ``width`` bits as rows of little-endian ``uint64`` words (what the Verilator
    engine reads and writes), each the OR of its ``(offset, width <= 64, values)`` fields."""
    out = np.zeros((n, max(1, -(-width // 64))), dtype=np.uint64)
    for offset, w, values in fields:
        v = np.asarray(values, dtype=np.uint64).ravel() & np.uint64((1 << w) - 1 if w < 64 else 2 ** 64 - 1)
        q, r = divmod(offset, 64)
        out[:, q] |= v << np.uint64(r)
        if r and r + w > 64:
            out[:, q + 1] |= v >> np.uint64(64 - r)
    return out


def transfer_lanes(dut: AxiDecompressor, rows: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """The output transfers (:func:`pack_rows` rows of ``{data, keep, last, user}``) as each lane's weights
    (slot ``l``'s where its ``TKEEP`` bytes are set), the tag (``TUSER``) of each of those weights, and the
    ``TLAST`` column. A slot's ``TKEEP`` is all of its bytes or none, and its ``TDATA`` is zero where none:
    :class:`SubsystemMismatch` otherwise."""
    lanes, weight_bits = dut.lanes, PAIR_FORMATS[dut.target].total_bits
    wb = weight_bits // 8
    keep_at, last_at = lanes * weight_bits, lanes * weight_bits + lanes * wb
    user_at = last_at + 1
    out, tags = [], []
    for j in range(lanes):
        value = field_bits(rows, weight_bits * j, weight_bits)
        keep = field_bits(rows, keep_at + wb * j, wb)
        if ((keep != 0) & (keep != (1 << wb) - 1)).any():
            raise SubsystemMismatch(f"lane {j}: a transfer keeps part of its weight's bytes")
        if (value[keep == 0] != 0).any():
            raise SubsystemMismatch(f"lane {j}: a transfer without its weight carries data in its slot")
        out.append(value[keep != 0])
        tags.append(field_bits(rows, user_at + TAG_BITS * j, TAG_BITS)[keep != 0])
    return out, tags, field_bits(rows, last_at, 1)


def container_order(lanes: list[np.ndarray], tags: list[np.ndarray]) -> np.ndarray:
    """The weights of one START in container order, from each slot's weights and their tags
    (:func:`transfer_lanes`): ansforge's driver tags a START's blocks 0, 1, ... in container order, and a
    block's weights leave in order in one slot, so the weights sorted by tag (stably) are the START's."""
    weights = np.concatenate(lanes) if lanes else np.zeros(0, np.uint64)
    order = np.argsort(np.concatenate(tags) if tags else np.zeros(0, np.uint64), kind="stable")
    return weights[order]


def run_program(engine, bench: SubsystemBench, program: SubsystemProgram, *, stall_prob: float = 0.0,
                seed: int = 0) -> SubsystemRun:
    """``program`` through ``bench`` on ``engine``; raises :class:`SubsystemMismatch` unless every lane gives
    its blocks' weights in order, each with its block's tag on ``TUSER``, the weights put back in container
    order by their tags (:func:`container_order`) are the program's blocks' by tag, ``TKEEP`` marks exactly
    the weights, ``TLAST`` is on the last transfer alone and the status is OK."""
    job = program_job(bench, program)
    name, dut = program.name, bench.dut
    width = len(dut.m_axis.tdata) + len(dut.m_axis.tkeep) + 1 + len(dut.m_axis.tuser)
    nwords = -(-width // 64)
    if getattr(engine, "name", "") == "verilator":
        res = engine.run(job, stall_prob=stall_prob, seed=seed, raw_outputs=True)
        got = np.asarray(res.outputs, dtype=np.uint64).reshape(-1, nwords)
    else:                                   # the Amaranth engine speaks Python integers
        job.cfg = {k: payload_ints(v) for k, v in job.cfg.items()}
        job.commands = payload_ints(job.commands)
        res = engine.run(job, stall_prob=stall_prob, seed=seed)
        got = pack_rows(len(res.outputs), nwords * 64,
                        [(64 * j, 64, np.array([(int(v) >> (64 * j)) & (2 ** 64 - 1) for v in res.outputs],
                                               dtype=np.uint64)) for j in range(nwords)])
    if res.statuses != [0]:
        s = res.statuses[0] if res.statuses else None
        what = "no status" if s is None else ", ".join(
            [DecodeStatus(s & 7).name] + (["AXI read error"] if s & 8 else []) + (["register write refused"] if s & 16 else []))
        raise SubsystemMismatch(f"{name}: the subsystem reported {what}")
    try:
        lanes, tags, last = transfer_lanes(dut, got)
    except SubsystemMismatch as exc:
        raise SubsystemMismatch(f"{name}: {exc}") from None
    for lane, (have, want) in enumerate(zip(lanes, program.lanes)):
        want = np.asarray(want).astype(np.uint64)
        if have.size != want.size or not np.array_equal(have, want):
            n = min(have.size, want.size)
            bad = np.flatnonzero(have[:n] != want[:n])
            raise SubsystemMismatch(f"{name}: lane {lane} gave {have.size} weights of its {want.size}; the first "
                                    f"difference at weight {int(bad[0]) if bad.size else n}")
    if program.blocks:
        by_tag = {}
        for lane, blocks in enumerate(program.blocks):
            want = np.repeat(np.asarray([t for t, _ in blocks], np.uint64), [c for _, c in blocks])
            if not np.array_equal(tags[lane], want):
                bad = int(np.flatnonzero(tags[lane] != want)[0])
                raise SubsystemMismatch(f"{name}: lane {lane}'s weight {bad} carries tag {int(tags[lane][bad])}, "
                                        f"its block's is {int(want[bad])}")
            at = 0
            for t, c in blocks:
                by_tag[t] = np.asarray(program.lanes[lane][at:at + c]).astype(np.uint64)
                at += c
        ordered = np.concatenate([by_tag[t] for t in sorted(by_tag)]) if by_tag else np.zeros(0, np.uint64)
        if not np.array_equal(container_order(lanes, tags), ordered):
            raise SubsystemMismatch(f"{name}: the weights put in order by their tags are not the blocks' in order")
    if program.weights and (last.size == 0 or last[-1] != 1 or last[:-1].any()):
        raise SubsystemMismatch(f"{name}: TLAST is not on the last transfer alone")
    return SubsystemRun(job.pairs, res.cycles, program.coded_bits, program_bound(bench, program),
                        program.table_beats)


def lane_bound(dut: AxiDecompressor, bits_per_pair: float, interval: int = 1) -> float:
    """Weights per clock ``dut`` can give for pairs of ``bits_per_pair`` coded bits on average, from a
    memory that takes a read every ``interval`` clocks: ``min(K, B / interval / b, K * w / b)``. ``K``
    lanes decode at most a pair per clock each; the bus brings ``B`` bits per read; a lane's decoder takes
    one port word of ``w`` bits per clock (``W``, or ``2 W`` for an rANS xN decoder), which bounds a
    lane below one pair per clock where a pair costs more than a word (fp32 pairs: 26.6 bits, 16-bit
    tANS words)."""
    if not bits_per_pair:
        return float(dut.lanes)
    return min(dut.lanes, dut.bus_bits / interval / bits_per_pair, dut.lanes * dut.parallel.word_bits / bits_per_pair)


def program_bound(bench: SubsystemBench, program: SubsystemProgram) -> float:
    """:func:`lane_bound` of ``program``'s coded bits per weight on ``bench``."""
    n = program.weights
    return lane_bound(bench.dut, program.coded_bits / n if n else 0.0, bench.memory.interval)


def run_subsystem(engine, bench: SubsystemBench, spec: Codec, table, code_table, exponents, symbols, extras,
                  expected_bits, *, name: str = "tensor", stall_prob: float = 0.0, seed: int = 0,
                  blocks: list[tuple[np.ndarray, int]] | None = None,
                  runs: list[list[tuple[int, int, int]]] | None = None, fold: int = 0) -> SubsystemRun:
    """One START through the subsystem (:func:`subsystem_program`: ``blocks`` side by side with their
    ``runs``, or the tensor cut into one block per lane), checked as :func:`run_program` checks it."""
    program = subsystem_program(bench.dut, spec, table, code_table, exponents, symbols, extras, expected_bits,
                                blocks, runs, fold, name=name)
    return run_program(engine, bench, program, stall_prob=stall_prob, seed=seed)
