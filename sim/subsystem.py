"""The decompression subsystem in simulation: a block of a container through its AXI ports, bit-exact.

:class:`SubsystemBench` is the simulated board around an :class:`~ansforge.hdl.subsystem.AxiDecompressor`:

* :class:`AxiMemory`, an AXI4 read slave in front of a memory image, with a fixed read latency and a
  minimum interval between accepted reads (a DRAM controller's figures, not its timing model);
* :class:`AxiLiteWriter`, an AXI4-Lite master that plays register writes from a stream, one at a
  time, as a CPU's driver would (it checks every ``BRESP``).

Its ports are streams, so both simulation engines and the take-home testbench (``ansforge testbench
--top subsystem``) drive it unchanged: ``mem_cfg`` (the memory image), ``csr_cfg`` (the table and block
registers), ``cmd`` (the START write), ``o`` (the AXI4-Stream output as ``{data, keep, last}``), ``done``
and ``status`` (the decode status in bits 2..0, an AXI read error in bit 3, a refused register write in
bit 4).

:func:`subsystem_program` lays up to ``lanes`` independent blocks into a memory image, one per lane, and
writes their register program: a :class:`SubsystemProgram`, what a driver does for one START, free of
any bench (a tensor given as pairs is cut into ``lanes`` contiguous blocks coded alone,
:func:`~.lanes.chunk_blocks`); :func:`run_program` runs one on a :class:`SubsystemBench` and checks every
weight. :func:`plan_container_subsystem` gives the programs of every coded tensor of a container, a
version-6 container (``ansforge compress``'s default, the blocks layout) from its own blocks, ``lanes``
side by side, with the container's own decoder's weights (what ``ansforge decompress`` writes);
:func:`decode_container_subsystem` runs them. The cocotb bench ``tests/hdl/cocotb_subsystem_bench.py`` runs
the same programs against cocotbext-axi's AXI4 models.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..hdl.common import DecodeStatus, bits_for, check_int
from ..hdl.subsystem import (AxiDecompressor, Csr, Table, axi4_lite_signature, axi4_read_signature,
                             default_bus_bits)
from ..model.coding.codecs import Codec
from ..model.errors import AnsforgeError, ConfigError
from ..model.dtypes.interfaces import CodingPairFormat, PairToFloatTable
from ..model.dtypes.pairs import PAIR_FORMATS
from .jobs import CoreJob, cfg_writes
from .lanes import block_runs, chunk_blocks, container_groups, container_lane_options, lane_image, run_entries
from .memory import SimulationRam
from .streams import pack, unpack
from .testbench import payload_ints

__all__ = ["AxiMemory", "AxiLiteWriter", "SubsystemBench", "SubsystemRun", "SubsystemMismatch", "Block",
           "SubsystemProgram", "subsystem_program", "program_job", "run_program", "program_bound", "lane_bound",
           "ContainerPlan", "plan_container_subsystem", "run_subsystem",
           "decode_container_subsystem", "runs_throughput", "checkpoint_block", "subsystem_bench_for", "run_block",
           "memory_depth",
           "pack_rows", "expected_rows", "lane_streams", "MEMORY_BASE"]

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
        super().__init__({
            "mem_cfg": self.memory.signature.members["mem_cfg"],
            "csr_cfg": In(stream.Signature(_csr_layout())),
            "cmd": In(stream.Signature(_csr_layout())),
            "o": Out(stream.Signature(data.StructLayout({"data": lanes_bits, "keep": lanes_bits // 8, "last": 1}))),
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
                     self.o.p.keep.eq(a.tkeep), self.o.p.last.eq(a.tlast),
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


def memory_depth(dut: AxiDecompressor, n_pairs: int) -> int:
    """Beats (a power of two) that hold any ``n_pairs``-pair block's lane streams: per pair at most the
    coder's state bits (17 covers tANS R <= 16 and an rANS renormalization word's share) plus its
    additional data and escape index; per lane a final state and a padded beat."""
    per_lane = -(-int(n_pairs) // dut.lanes)
    head = 2 * dut.codec.states * max(dut.codec.state_bits, dut.codec.word_bits)    # flush and head, padding
    beats = dut.lanes * (2 + -(-(per_lane * (dut.extra_bits + dut.escape_bits + 17) + head + 4 * dut.codec.word_bits)
                               // dut.bus_bits))
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


def _table_writes(kind: Table, entries: list[tuple[int, int]], width: int,
                  staged: dict[int, int]) -> list[tuple[int, int]]:
    """Stage each entry's data (``width`` bits) in ``TBL_DATA0..3`` and write it. A staging register is
    written only where its value changes (``staged``: what each holds, kept across calls; the hardware
    takes the entry's low ``width`` bits), as a driver would, so most entries cost two writes."""
    out = []
    for addr, value in entries:
        for j in range(-(-width // 32)):
            word = (int(value) >> (32 * j)) & 0xFFFF_FFFF
            if staged.get(j) != word:
                out.append((Csr.TBL_DATA0 + 4 * j, word))
                staged[j] = word
        out.append((Csr.TBL_WRITE, int(kind) << 30 | addr))
    return out


def lane_streams(spec: Codec, table, symbols: np.ndarray, extras: np.ndarray, lanes: int) -> list[np.ndarray]:
    """Each lane's words (push order): the tensor cut into ``lanes`` contiguous blocks, each coded alone
    (:func:`~.lanes.chunk_blocks`)."""
    return [w for w, _ in chunk_blocks(spec, table, np.asarray(symbols).ravel(), np.asarray(extras).ravel(), lanes)]


@dataclass
class SubsystemProgram:
    """One START of an :class:`AxiDecompressor`, as a driver runs it: the memory image, the register writes
    before the START, and the weights that must come out.

    ``beats`` are the image from :data:`MEMORY_BASE` on, one ``bus_bits`` beat each (beat ``i`` at byte
    ``MEMORY_BASE + i * bus_bits / 8``, little-endian); ``writes`` the AXI4-Lite writes ``(byte address,
    value)`` in order (tables, ``BASE``, the lane registers; the START itself, ``CONTROL`` = 1,
    is not among them); ``counts`` each lane's pairs; ``bits`` the blocks' weights' bit patterns, one block
    after another (what ``ansforge decompress`` gives); ``coded_bits`` the compressed bits the lanes read.
    """

    name: str
    beats: list[int]
    writes: list[tuple[int, int]]
    counts: list[int]
    bits: np.ndarray
    coded_bits: int

    def expected_rows(self, dut: AxiDecompressor) -> np.ndarray:
        """The output transfers as :func:`expected_rows` gives them."""
        return expected_rows(dut, self.bits, self.counts)

    def expected_frame(self, dut: AxiDecompressor) -> bytes:
        """The output stream's bytes with ``TKEEP`` applied, transfer after transfer (one AXI4-Stream frame,
        ``TLAST`` on its last transfer): weight ``j`` of each lane whose block is longer than ``j``,
        little-endian."""
        weight_bytes = PAIR_FORMATS[dut.target].total_bits // 8
        counts = np.asarray(self.counts, dtype=np.int64)
        starts = np.cumsum(counts) - counts
        row = np.arange(counts.max() if counts.size else 0, dtype=np.int64)[:, None]
        order = (starts[None, :] + row)[row < counts[None, :]]        # row-major: transfer, then lane
        dtype = np.dtype("<u2") if weight_bytes == 2 else np.dtype("<u4")
        return np.asarray(self.bits).ravel()[order].astype(dtype).tobytes()


def subsystem_program(dut: AxiDecompressor, spec: Codec, table, code_table, exponents, symbols: np.ndarray,
                      extras: np.ndarray, expected_bits: np.ndarray,
                      blocks: list[tuple[np.ndarray, int]] | None = None,
                      runs: list[list[tuple[int, int, int]]] | None = None, fold: int = 0,
                      name: str = "tensor") -> SubsystemProgram:
    """The :class:`SubsystemProgram` that decodes up to ``lanes`` independent blocks of one tensor (its
    coder ``table`` or tables, one table set each, ``code_table`` and exponent table) in one START:
    ``blocks`` (``(words in push order, pairs)`` each, pairs not increasing; default ``symbols``/``extras``
    cut into one contiguous block per lane); ``runs``: each block's ``(set, shift, count)`` (a subsystem
    built with table sets or row shifts needs them; default one run of set 0, no shift).
    ``expected_bits`` are the blocks' weights' bit patterns, one block after another. ``fold``: mantissa
    bits a context plan folded into the tensor's codes (its ``exponents`` are then the folded fields, its
    pairs ``fold`` bits narrower; the runs' shifts must include it, see :func:`float_writes`)."""
    lanes, W = dut.lanes, spec.word_bits
    if code_table.index_bits > dut.escape_bits:
        raise ConfigError(f"the tensor's escape group needs {code_table.index_bits} index bits; the subsystem "
                          f"was built with escape_bits = {dut.escape_bits}")
    if code_table.n_symbols > dut.max_symbols or len(exponents) > dut.max_codes:
        raise ConfigError(f"the tensor has {code_table.n_symbols} symbols and {len(exponents)} codes; the subsystem "
                          f"takes {dut.max_symbols} and {dut.max_codes}")
    if code_table.extra_bits + fold != dut.extra_bits:
        raise ConfigError(f"the tensor's pairs have {code_table.extra_bits} bits of additional data and {fold} "
                          f"folded into the code; the {dut.target} subsystem's have {dut.extra_bits}")
    tables = list(table) if isinstance(table, (list, tuple)) else [table]
    if blocks is None:
        blocks = chunk_blocks(spec, tables[0], np.asarray(symbols).ravel(), np.asarray(extras).ravel(), lanes)
    if len(blocks) > lanes:
        raise ValueError(f"{len(blocks)} blocks for {lanes} lanes")
    blocks = list(blocks) + [(np.zeros(0, np.uint64), 0)] * (lanes - len(blocks))
    counts = [int(c) for _, c in blocks]
    if any(b > a for a, b in zip(counts, counts[1:])):
        raise ValueError(f"the lanes' pair counts {counts} increase with the lane")
    if sum(counts) != np.asarray(expected_bits).size:
        raise ValueError(f"{np.asarray(expected_bits).size} weights for blocks of {sum(counts)}")
    par = dut.parallel
    if len(tables) > 1 << par.set_bits:
        raise ConfigError(f"the tensor has {len(tables)} tables; the subsystem was built with "
                          f"{dut.table_sets} table sets")
    entries = None
    if par.has_runs:
        runs = list(runs) if runs is not None else [[(0, 0, c)] for c in counts if c]
        runs += [[]] * (lanes - len(runs))
        for r, c in zip(runs, counts):
            if sum(x[2] for x in r) != c:
                raise ValueError(f"runs of {sum(x[2] for x in r)} pairs for a block of {c}")
        entries = [run_entries(par, r) for r in runs]
    elif runs is not None and any(x[0] or x[1] for r in runs for x in r):
        raise ConfigError("the tensor has several tables or row shifts; the subsystem was built with neither "
                          "table sets nor row shifts")
    beats, lane_regs = lane_image(_Lanes(par), [w for w, _ in blocks], entries)
    limit = 1 << dut.count_bits
    for lane, (regs, count) in enumerate(zip(lane_regs, counts)):
        for what, v in (("pairs", count), ("words", regs["words"]), ("runs", regs.get("runs", 0))):
            if v >= limit:
                raise ConfigError(f"{name}: lane {lane}'s block has {v:,} {what}; the subsystem's lanes count "
                                  f"below 2**{dut.count_bits} (count_bits = {dut.count_bits}): cut it into "
                                  f"smaller blocks or build the subsystem with more count bits")

    csr, staged = [], {}
    proto = dut.decoder_prototype
    cfg_shape = proto.signature.members["cfg"].signature.members["payload"].shape
    for packed in cfg_writes(proto, tables).get("cfg", []):
        w = unpack(cfg_shape, packed)
        csr += _table_writes(Table.DECODER, [(w["addr"], packed >> cfg_shape["data"].offset)],
                             cfg_shape["data"].width, staged)
    sym = [(s, c) for s, c in enumerate(code_table.direct_codes)]
    if code_table.has_escape:
        sym.append((code_table.n_direct, 1 << 16))
    csr += _table_writes(Table.SYMBOL, sym, 17, staged)
    csr += _table_writes(Table.ESCAPE, list(enumerate(code_table.escape_codes)), 16, staged)
    f_shape = dut.float_cfg_layout
    csr += _table_writes(Table.FLOAT, [(w["addr"], pack(f_shape["data"].shape, w["data"]))
                                       for w in float_writes(dut.target, dut.extra_bits, exponents, fold)],
                         f_shape["data"].width, staged)
    csr += [(Csr.BASE_LO, MEMORY_BASE), (Csr.BASE_HI, 0)]
    for lane, (regs, count) in enumerate(zip(lane_regs, counts)):
        csr += [(Csr.LANE0 + 8 * lane, regs["base"]), (Csr.LANE0 + 8 * lane + 4, regs["words"]),
                (Csr.LANE_COUNT0 + 4 * lane, count)]
        if par.has_runs:
            csr += [(Csr.LANE_RUNS0 + 8 * lane, regs["runs_base"]), (Csr.LANE_RUNS0 + 8 * lane + 4, regs["runs"])]
    return SubsystemProgram(name, [int(b) for b in beats], [(int(a), int(d)) for a, d in csr], counts,
                            np.asarray(expected_bits).ravel(), sum(regs["words"] for regs in lane_regs) * W)


def program_job(bench: SubsystemBench, program: SubsystemProgram) -> CoreJob:
    """The :class:`SubsystemBench` job that runs ``program``: its image in the bench's memory, its register
    writes on ``csr_cfg``, the START on ``cmd``, its weights expected on ``o``."""
    dut = bench.dut
    n_beats = len(program.beats)
    if n_beats > bench.memory.depth:
        raise ConfigError(f"the lanes' streams take {n_beats} beats, the memory holds {bench.memory.depth}")
    mem_shape = bench.signature.members["mem_cfg"].signature.members["payload"].shape
    job = CoreJob("subsystem-decoder", bench)
    addr_field, data_field = mem_shape["addr"], mem_shape["data"]
    # a beat as 64-bit pieces (a bus may be wider than 64 bits)
    pieces = -(-dut.bus_bits // 64)
    chunks = np.asarray([[(v >> (64 * j)) & (2 ** 64 - 1) for j in range(pieces)] for v in program.beats],
                        dtype=np.uint64).reshape(n_beats, pieces)
    mem = pack_rows(n_beats, mem_shape.size,
                    [(addr_field.offset, addr_field.width, np.arange(n_beats, dtype=np.uint64))]
                    + [(data_field.offset + 64 * j, min(64, dut.bus_bits - 64 * j), chunks[:, j])
                       for j in range(pieces)])
    job.cfg = {"mem_cfg": mem, "csr_cfg": _packed(program.writes)}
    job.commands = _packed([(Csr.CONTROL, 1)])
    job.pairs = sum(program.counts)
    job.words = n_beats * dut.beat_words
    job.expected_status = [0]
    job.expected = program.expected_rows(dut)
    return job


class _Lanes:
    """What :func:`~.lanes.lane_image` reads of a system: its ``decoder`` (here the subsystem's lanes)."""

    def __init__(self, decoder):
        self.decoder = decoder


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


def expected_rows(dut: AxiDecompressor, bits: np.ndarray, counts: list[int]) -> np.ndarray:
    """The ``o`` payloads (``{data, keep, last}``) that carry the lanes' blocks, ``counts[l]`` weights of
    ``bits`` (one block after another) in lane ``l``: transfer ``j`` holds weight ``j`` of each lane whose
    block is longer than ``j``; as :func:`pack_rows` rows."""
    lanes, weight_bits = dut.lanes, PAIR_FORMATS[dut.target].total_bits
    bits = np.asarray(bits).ravel().astype(np.uint64)
    counts = list(counts) + [0] * (lanes - len(counts))
    if sum(counts) != bits.size:
        raise ValueError(f"{bits.size} weights for blocks of {sum(counts)}")
    rows = max(counts) if counts else 0
    grid = np.zeros((rows, lanes), np.uint64)
    present = np.zeros((rows, lanes), bool)
    at = 0
    for j, c in enumerate(counts):
        grid[:c, j] = bits[at:at + c]
        present[:c, j] = True
        at += c
    keep = np.zeros(rows, np.uint64)
    for j in range(lanes):
        keep |= present[:, j].astype(np.uint64) * np.uint64(((1 << (weight_bits // 8)) - 1) << (weight_bits // 8 * j))
    last = np.zeros(rows, np.uint64)
    last[-1:] = 1
    width = lanes * weight_bits + lanes * weight_bits // 8 + 1
    return pack_rows(rows, width, [(weight_bits * j, weight_bits, grid[:, j]) for j in range(lanes)]
                     + [(lanes * weight_bits, lanes * weight_bits // 8, keep), (lanes * weight_bits + lanes * weight_bits // 8, 1, last)])


def run_program(engine, bench: SubsystemBench, program: SubsystemProgram, *, stall_prob: float = 0.0,
                seed: int = 0) -> SubsystemRun:
    """``program`` through ``bench`` on ``engine``; raises :class:`SubsystemMismatch` unless every weight,
    ``TKEEP`` and ``TLAST`` is as expected and the status is OK."""
    job = program_job(bench, program)
    name, expected = program.name, job.expected
    if getattr(engine, "name", "") == "verilator":
        res = engine.run(job, stall_prob=stall_prob, seed=seed, raw_outputs=True)
        got = np.asarray(res.outputs, dtype=np.uint64).reshape(-1, expected.shape[1])
    else:                                   # the Amaranth engine speaks Python integers
        job.cfg = {k: payload_ints(v) for k, v in job.cfg.items()}
        job.commands = payload_ints(job.commands)
        res = engine.run(job, stall_prob=stall_prob, seed=seed)
        got = pack_rows(len(res.outputs), expected.shape[1] * 64,
                        [(64 * j, 64, np.array([(int(v) >> (64 * j)) & (2 ** 64 - 1) for v in res.outputs],
                                               dtype=np.uint64)) for j in range(expected.shape[1])])
    if res.statuses != [0]:
        s = res.statuses[0] if res.statuses else None
        what = "no status" if s is None else ", ".join(
            [DecodeStatus(s & 7).name] + (["AXI read error"] if s & 8 else []) + (["register write refused"] if s & 16 else []))
        raise SubsystemMismatch(f"{name}: the subsystem reported {what}")
    if got.shape != expected.shape or not np.array_equal(got, expected):
        n = min(got.shape[0], expected.shape[0])
        bad = np.flatnonzero((got[:n] != expected[:n]).any(axis=1))
        first = int(bad[0]) if bad.size else n
        raise SubsystemMismatch(f"{name}: output transfer {first} of {expected.shape[0]} differs "
                                f"(the subsystem gave {got.shape[0]} transfers)")
    return SubsystemRun(job.pairs, res.cycles, program.coded_bits, program_bound(bench, program))


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
    n = sum(program.counts)
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


#: Pairs per block when a tensor is decoded through the subsystem: a driver's DMA descriptor. Larger
#: tensors are decoded block after block (each block's lanes coded alone, the tensor's tables kept), so
#: the simulated memory stays small: Amaranth writes a memory's every word into its Verilog.
BLOCK_PAIRS = 1 << 15


@dataclass
class ContainerPlan:
    """How a container's coded tensors go through one :class:`AxiDecompressor`: the subsystem built for
    them, the memory beats its largest START needs, and its STARTs, made one at a time as ``programs``
    is iterated: ``(tensor index, program)``, a tensor's STARTs one after another."""

    dut: AxiDecompressor
    depth: int
    programs: Iterator[tuple[int, SubsystemProgram]]


def plan_container_subsystem(container, *, lanes: int = 4, bus_bits: int | None = None, latency: int = 32,
                             fifo_beats: int | None = None, names: list[str] | None = None,
                             block_pairs: int = BLOCK_PAIRS) -> ContainerPlan | None:
    """The :class:`ContainerPlan` of every coded tensor of ``container`` (bf16 or fp32 pairs; ``names``:
    these only) through ``lanes`` lanes, or ``None`` if it has none. A version-6 container (the blocks layout, ``ansforge compress``'s default) is
    decoded from its own independent blocks, ``lanes`` of a tensor side by side per START; a tensor of
    the older layouts (one stream per tensor) in pieces of at most ``block_pairs`` pairs, each cut into
    one block per lane and coded alone. A version-6 tensor with several tables (row-shift widths, a
    context plan) has them written as table sets, its blocks' runs read from memory and its rows' shifts
    restored in hardware (the subsystem is built with ``table_sets`` and ``row_shifts`` as the container
    needs); the older layouts' row-shifted and context-coded tensors are refused in one line.
    ``bus_bits`` defaults to the narrowest bus that feeds the lanes (at least 64); ``fifo_beats`` to
    what covers ``latency``. Every START's weights are the container's own decoder's (what ``ansforge
    decompress`` writes)."""
    streams = {st.index: st for st in container.streams}
    recs = [r for r in container.tensors if r["coding"] == "pairs" and r["n_pairs"]
            and (names is None or r["name"] in names)]
    if not recs:
        return None
    formats = {r["pair_format"] for r in recs}
    if len(formats) != 1 or next(iter(formats)) not in ("bf16", "fp32"):
        raise ConfigError(f"{container.path}: the subsystem emits one of bf16, fp32; the container's pairs are "
                          f"{', '.join(sorted(formats))}")
    target = next(iter(formats))
    for r in recs:
        st = streams[int(r["stream"])]
        if "context" in r and int(r["context"].get("fold", 0)) > 1:
            raise ConfigError(f"{container.path}: tensor {r['name']!r} is coded with a context plan that folds "
                              f"{r['context']['fold']} mantissa bits into its codes; the subsystem's float stage "
                              "takes at most 1 (compress_checkpoint's context_fold, 1 by default)")
        if st.block_pairs:
            continue
        # The older layouts: each tensor is cut into lane blocks coded alone with its one table.
        if "context" in r or "row_shifts" in r:
            raise ConfigError(f"{container.path}: tensor {r['name']!r} is coded with "
                              f"{'a context plan' if 'context' in r else 'row shifts'} in a one-stack stream "
                              f"(container version {container.version}), which the subsystem does not decode; "
                              "compress with the default blocks layout")
        st.spec.hardware_check()  # the older layouts: one state, as they were written for the subsystem
        if len(st.tensors) != 1:
            raise ConfigError(f"{container.path}: tensor {r['name']!r} shares stream {st.index} with other tensors; "
                              "the subsystem decodes one table per block (compress with the default blocks layout)")
    spec = streams[int(recs[0]["stream"])].spec
    w = PAIR_FORMATS[target].extra_bits
    bus = bus_bits or default_bus_bits(spec, lanes, target)
    escape_bits = max(container.code_table(r).index_bits for r in recs)
    max_codes = 1 << max(6, (max(len(r["exponents"]) for r in recs) - 1).bit_length())
    # a lane at full rate reads (w + a few code bits) / bus beats per clock: twice the latency's worth
    fifo = fifo_beats or max(8, 1 << (2 * latency * (w + 4) // bus).bit_length())
    v6 = [st for st in streams.values() if st.block_pairs]
    sets, shift_bits = container_lane_options(container, v6)
    # a context plan's folded mantissa bit goes back through the runs' shift too (see float_writes)
    folds = {id(r): int(r["context"].get("fold", 0)) if "context" in r else 0 for r in recs}
    if any(folds[id(r)] for r in recs if streams[int(r["stream"])].block_pairs):
        shift_bits = max(shift_bits, 1)
    check_int("block_pairs", block_pairs, 1, 1 << 24)
    old = [int(r["n_pairs"]) for r in recs if not streams[int(r["stream"])].block_pairs]
    # the lanes count a block's pairs and words (under 4 words a pair): the default width unless a block
    # is larger
    largest = max([st.block_pairs for st in v6] + ([min(block_pairs, max(old))] if old else []))
    count_bits = min(32, max(20, bits_for(4 * largest)))
    dut = AxiDecompressor(spec, lanes=lanes, target=target, bus_bits=bus, max_codes=max_codes,
                          escape_bits=max(1, escape_bits), fifo_beats=min(fifo, 1024), table_sets=sets,
                          row_shifts=shift_bits > 0, count_bits=count_bits)
    depth = memory_depth(dut, min(block_pairs, max(old))) if old else 16
    # a version-6 START's image: each block's words from a beat of its own, then its runs
    par = dut.parallel
    words_per_beat = dut.beat_words * par.word_bits // spec.word_bits
    for st in v6:
        for ti, bs in container_groups(container, st, lanes):
            if id(container.tensors[ti]) not in {id(r) for r in recs}:
                continue
            need = sum(-(-(st.blocks[b][1] - st.blocks[b][0]) // words_per_beat) for b in bs)
            if par.has_runs:
                need += sum(-(-len(run_entries(par, block_runs(container, st, b, folds[id(container.tensors[ti])])))
                              // par.runs_per_beat) for b in bs)
            depth = max(depth, 1 << max(4, (need - 1).bit_length()))
    wanted = {id(r) for r in recs}
    index = {id(r): i for i, r in enumerate(container.tensors)}

    def programs():
        for st in v6:
            # the container's own blocks, ``lanes`` of a tensor side by side per START
            for ti, bs in container_groups(container, st, lanes):
                r = container.tensors[ti]
                if id(r) not in wanted:
                    continue
                bits = container.read(r["name"]).view(np.uint16 if target == "bf16" else np.uint32).ravel()
                first = int(r["first_pair"])
                blocks = [(np.asarray(container.block_words(st, b)), st.spans[b].count) for b in bs]
                want = np.concatenate([bits[st.spans[b].pair - first:st.spans[b].pair - first + st.spans[b].count]
                                       for b in bs])
                lo, hi = st.tensor_tables[ti]
                yield ti, subsystem_program(
                    dut, spec, st.tables[lo:hi], container.code_table(r), r["exponents"], None, None, want,
                    blocks=blocks, fold=folds[id(r)], name=f"{r['name']} blocks {bs[0]}..{bs[-1]}",
                    runs=[block_runs(container, st, b, folds[id(r)]) for b in bs] if par.has_runs else None)
        for r in recs:
            st = streams[int(r["stream"])]
            if st.block_pairs:
                continue
            symbols, extras = container.decode_stream(st)
            bits = container.read(r["name"]).view(np.uint16 if target == "bf16" else np.uint32).ravel()
            for a in range(0, symbols.size, block_pairs):
                b = min(a + block_pairs, symbols.size)
                yield index[id(r)], subsystem_program(dut, spec, st.tables[0], container.code_table(r), r["exponents"],
                                                      symbols[a:b], extras[a:b], bits[a:b],
                                                      name=f"{r['name']} pairs {a}..{b - 1}")

    return ContainerPlan(dut, depth, programs())


def runs_throughput(runs: list[tuple[str, SubsystemRun]]) -> tuple[float, float]:
    """(weights per clock, bound) of :func:`decode_container_subsystem`'s per-tensor runs taken together:
    every weight over every clock, and each tensor's bound weighted by the clocks it takes at that bound."""
    weights = sum(r.weights for _, r in runs)
    return weights / sum(r.cycles for _, r in runs), weights / sum(r.weights / r.bound for _, r in runs)


def decode_container_subsystem(container, engine, *, lanes: int = 4, bus_bits: int | None = None,
                               latency: int = 32, interval: int = 1, fifo_beats: int | None = None,
                               stall_prob: float = 0.0, names: list[str] | None = None,
                               block_pairs: int = BLOCK_PAIRS, progress=None) -> list[tuple[str, SubsystemRun]]:
    """Every coded tensor of ``container`` (:func:`plan_container_subsystem`) through one
    :class:`SubsystemBench` with ``lanes`` lanes on ``engine``, every weight checked bit-exactly against the
    container's own decoder; per tensor, the sum over its STARTs. ``progress(name)`` is called after each
    tensor."""
    plan = plan_container_subsystem(container, lanes=lanes, bus_bits=bus_bits, latency=latency,
                                    fifo_beats=fifo_beats, names=names, block_pairs=block_pairs)
    if plan is None:
        return []
    bench = SubsystemBench(plan.dut, depth=plan.depth, latency=latency, interval=interval)
    totals: dict[int, SubsystemRun] = {}

    def finished(ti):
        total = totals[ti]
        total.bound = lane_bound(plan.dut, total.coded_bits / total.weights, interval)
        if progress:
            progress(container.tensors[ti]["name"])

    for ti, program in plan.programs:
        if totals and ti not in totals:
            finished(next(reversed(totals)))
        run = run_program(engine, bench, program, stall_prob=stall_prob)
        was = totals.get(ti, SubsystemRun(0, 0, 0, 0.0))
        totals[ti] = SubsystemRun(was.weights + run.weights, was.cycles + run.cycles,
                                  was.coded_bits + run.coded_bits, 0.0)
    if totals:
        finished(next(reversed(totals)))
    return [(container.tensors[ti]["name"], total) for ti, total in totals.items()]
