"""A whole container through the decompression subsystem: what its lanes need, its blocks, its STARTs.

:func:`container_lanes` says what lanes a container's coded tensors need (pair format, codec, escape
bits, float-table depth, table sets, row shifts) and :func:`container_blocks` gives its blocks as a lane
decodes them (:class:`~.subsystem.LaneBlock`: a version-6 container's own independent blocks, or an older
layout's tensor cut into blocks coded alone). :func:`plan_container_subsystem` builds the subsystem for
them and deals the blocks to the lanes (:func:`schedule_blocks`) in STARTs, each a
:class:`~.subsystem.SubsystemProgram` with the container's own decoder's weights (what ``ansforge
decompress`` writes); :func:`decode_container_subsystem` runs them on a :class:`~.subsystem.SubsystemBench`.
A board takes :func:`container_lanes` and :func:`container_blocks` for its own fixed lanes
(:mod:`.board`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from ..hdl.common import bits_for, check_int
from ..hdl.parallel import TAG_BITS
from ..hdl.subsystem import AxiDecompressor, default_bus_bits
from ..model.coding.codecs import Codec
from ..model.dtypes.pairs import PAIR_FORMATS
from ..model.errors import ConfigError
from .lanes import block_runs, chunk_blocks, container_lane_options
from .subsystem import (LaneBlock, SubsystemBench, SubsystemProgram, SubsystemRun, lanes_program, run_program,
                        tensor_entries)

__all__ = ["BLOCK_PAIRS", "LANE_START_PAIRS", "schedule_blocks", "ContainerPlan", "ContainerLanes", "container_lanes",
           "container_blocks", "plan_container_subsystem", "runs_throughput", "decode_container_subsystem"]


#: Pairs per block when a tensor of the older layouts (one stream per tensor) is decoded through the
#: subsystem: each piece is cut into one block per lane and coded alone, the tensor's tables kept.
BLOCK_PAIRS = 1 << 15

#: Pairs per lane and START when a container is decoded through the subsystem: a driver's program (its
#: memory image some MB a lane). A lane's region then stays below ``2**20`` units (fp32 pairs: about 27
#: coded bits each, 0.9 M units), the lanes' default count width.
LANE_START_PAIRS = 1 << 21


def schedule_blocks(blocks: list[LaneBlock], lanes: int, held: list[int] | None = None,
                    entry_clocks: float = 1.0) -> list[list[LaneBlock]]:
    """``blocks`` dealt to ``lanes`` lanes, as a driver deals them: the longest first, each to the lane
    that would finish it first, counting a clock a pair and, where the lane last held another tensor's
    tables, ``entry_clocks`` a table entry to load them; a block whose lane already holds its tensor's
    tables is given ``entries = None`` (the lane keeps them). ``held``: each lane's tensor before these
    blocks (updated in place; -1: none)."""
    held = held if held is not None else [-1] * lanes
    load = [0.0] * lanes
    out: list[list[LaneBlock]] = [[] for _ in range(lanes)]
    # the longest first (LPT: within 4/3 of the best makespan); a tensor's blocks stay together
    for b in sorted(blocks, key=lambda b: -b.count):
        cost = [load[j] + b.count + (0 if held[j] == b.tensor else entry_clocks * len(b.entries or []))
                for j in range(lanes)]
        j = min(range(lanes), key=lambda x: (cost[x], held[x] != b.tensor, x))
        out[j].append(replace(b, entries=None if held[j] == b.tensor else b.entries))
        load[j], held[j] = cost[j], b.tensor
    return out


@dataclass
class ContainerPlan:
    """How a container's coded tensors go through one :class:`AxiDecompressor`: the subsystem built for
    them, the memory beats its largest START needs, and its STARTs (each a :class:`SubsystemProgram` of up to :data:`START_PAIRS` pairs, its blocks dealt to
    the lanes by :func:`schedule_blocks`)."""

    dut: AxiDecompressor
    depth: int
    programs: Iterator[SubsystemProgram]


@dataclass
class ContainerLanes:
    """What the lanes need to decode a container's coded tensors (:func:`container_lanes`): the pair
    format, the codec, the widest escape group, the float table's depth, the table sets and row-shift bits,
    the largest block and the coded records themselves (``records``, ``folds``: each one's folded mantissa
    bits, by ``id``)."""

    target: str
    spec: Codec
    escape_bits: int
    max_codes: int
    table_sets: int
    shift_bits: int
    largest: int
    records: list
    folds: dict
    block_pairs: int = BLOCK_PAIRS

    def check(self, dut: AxiDecompressor, where: str) -> None:
        """``ConfigError`` naming the first parameter in which ``dut`` (a subsystem built beforehand, a
        board's) cannot decode these tensors."""
        need = [("pair format", dut.target == self.target, self.target, dut.target),
                ("codec", dut.codec == self.spec, self.spec.name, dut.codec.name),
                ("escape bits", dut.escape_bits >= self.escape_bits, f"{self.escape_bits}", f"{dut.escape_bits}"),
                ("float table codes", dut.max_codes >= self.max_codes, f"{self.max_codes}", f"{dut.max_codes}"),
                ("table sets", dut.table_sets >= self.table_sets, f"{self.table_sets}", f"{dut.table_sets}"),
                ("row-shift bits", dut.shift_bits >= self.shift_bits, f"{self.shift_bits}", f"{dut.shift_bits}"),
                # a block's words are checked where its record is laid out (region_image)
                ("count bits", (1 << dut.count_bits) > self.largest, f"{bits_for(self.largest)}", f"{dut.count_bits}")]
        for what, ok, needed, has in need:
            if not ok:
                raise ConfigError(f"{where}: its tensors need {what} {needed}; the subsystem was built with {has}")


def container_lanes(container, names: list[str] | None = None, block_pairs: int = BLOCK_PAIRS) -> ContainerLanes | None:
    """What :func:`plan_container_subsystem` builds the lanes for (see there), or ``None`` if the container
    has no coded tensor; a container the subsystem cannot decode is refused in one line (``ConfigError``)."""
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
    escape_bits = max(container.code_table(r).index_bits for r in recs)
    max_codes = 1 << max(6, (max(len(r["exponents"]) for r in recs) - 1).bit_length())
    v6 = [st for st in streams.values() if st.block_pairs]
    index = {id(r): i for i, r in enumerate(container.tensors)}
    sets, shift_bits = container_lane_options(container, v6, [index[id(r)] for r in recs])
    # a context plan's folded mantissa bit goes back through the runs' shift too (see float_writes)
    folds = {id(r): int(r["context"].get("fold", 0)) if "context" in r else 0 for r in recs}
    if any(folds[id(r)] for r in recs if streams[int(r["stream"])].block_pairs):
        shift_bits = max(shift_bits, 1)
    check_int("block_pairs", block_pairs, 1, 1 << 24)
    old = [int(r["n_pairs"]) for r in recs if not streams[int(r["stream"])].block_pairs]
    largest = max([st.block_pairs for st in v6] + ([min(block_pairs, max(old))] if old else []))
    return ContainerLanes(target, spec, max(1, escape_bits), max_codes, sets, shift_bits, largest, recs, folds,
                          block_pairs)


def container_blocks(container, dut: AxiDecompressor, need: ContainerLanes) -> Iterator[LaneBlock]:
    """The blocks of ``need``'s tensors, in container order, as ``dut``'s lanes decode them (tag 0): a
    version-6 tensor's own blocks, an older layout's tensor cut into blocks of at most ``need.block_pairs``
    pairs (and at most its ``1/lanes``), each coded alone. Each carries its tensor's table entries and the
    container's own decoder's weights."""
    streams = {st.index: st for st in container.streams}
    index = {id(r): i for i, r in enumerate(container.tensors)}
    entries: dict[int, list] = {}
    for r in need.records:
        st = streams[int(r["stream"])]
        ti = index[id(r)]
        fold = need.folds[id(r)]
        bits = container.read(r["name"]).view(np.uint16 if need.target == "bf16" else np.uint32).ravel()
        if st.block_pairs:
            lo, hi = st.tensor_tables[ti]
            tables = st.tables[lo:hi]
        else:
            tables = [st.tables[0]]
        if ti not in entries:
            entries[ti] = tensor_entries(dut, tables, container.code_table(r), r["exponents"], fold, r["name"])
        if st.block_pairs:
            first = int(r["first_pair"])
            for b, span in enumerate(st.spans):
                if span.tensor != ti:
                    continue
                yield LaneBlock(np.asarray(container.block_words(st, b)), span.count, entries[ti],
                                block_runs(container, st, b, fold) if dut.parallel.has_runs else None,
                                bits[span.pair - first:span.pair - first + span.count], ti, origin=(st.index, b))
        else:
            symbols, extras = container.decode_stream(st)
            piece = min(need.block_pairs, -(-symbols.size // dut.lanes))
            for a in range(0, symbols.size, piece):
                b = min(a + piece, symbols.size)
                yield LaneBlock(np.asarray(chunk_blocks(need.spec, tables[0], symbols[a:b], extras[a:b], 1)[0][0]),
                                b - a, entries[ti], None, bits[a:b], ti)


def plan_container_subsystem(container, *, lanes: int = 4, bus_bits: int | None = None, latency: int = 32,
                             fifo_beats: int | None = None, names: list[str] | None = None,
                             block_pairs: int = BLOCK_PAIRS, start_pairs: int | None = None) -> ContainerPlan | None:
    """The :class:`ContainerPlan` of every coded tensor of ``container`` (bf16 or fp32 pairs; ``names``:
    these only) through ``lanes`` lanes, or ``None`` if it has none. A version-6 container (the blocks
    layout, ``ansforge compress``'s default) is decoded from its own independent blocks; a tensor of the
    older layouts (one stream per tensor) in blocks of at most ``block_pairs`` pairs (and at most its
    ``1/lanes``), each coded alone. The blocks of every tensor, in container order, are dealt to the lanes
    (:func:`schedule_blocks`) in STARTs of at most about ``start_pairs`` pairs (default ``lanes`` times
    :data:`LANE_START_PAIRS`), as many as that takes and of equal size: lanes decode blocks of different
    tensors at once, each loading a tensor's tables from its record where it does not hold them. A
    version-6 tensor with several tables (row-shift widths, a context plan) has them loaded as table sets,
    its blocks' runs read from memory and its rows' shifts restored in hardware (the subsystem is built
    with ``table_sets`` and ``row_shifts`` as the container needs); the older layouts' row-shifted and
    context-coded tensors are refused in one line. ``bus_bits`` defaults to the narrowest bus that feeds
    the lanes (at least 64); ``fifo_beats`` to what covers ``latency``. Every weight is the container's
    own decoder's (what ``ansforge decompress`` writes)."""
    need = container_lanes(container, names, block_pairs)
    if need is None:
        return None
    target, spec = need.target, need.spec
    w = PAIR_FORMATS[target].extra_bits
    bus = bus_bits or default_bus_bits(spec, lanes, target)
    # a lane at full rate reads (w + a few code bits) / bus beats per clock: twice the latency's worth
    fifo = fifo_beats or max(8, 1 << (2 * latency * (w + 4) // bus).bit_length())
    start_pairs = check_int("start_pairs", start_pairs or lanes * LANE_START_PAIRS, 1, 1 << 30)
    total = sum(int(r["n_pairs"]) for r in need.records)
    # as many STARTs as ``start_pairs`` needs, of equal size: the last is no shorter than the others
    start_pairs = -(-total // -(-total // start_pairs))
    # the lanes count a block's pairs and words (under 4 words a pair) and a region's units: the default
    # width unless a START's region may be larger
    largest = need.largest
    # a lane's region: its pairs' coded bits (at most a few more than their additional data) in units
    per_lane = -(-start_pairs // lanes) + largest
    units = per_lane * (w + 16) // min(64, bus)
    count_bits = min(32, max(20, bits_for(4 * largest), bits_for(units)))
    dut = AxiDecompressor(spec, lanes=lanes, target=target, bus_bits=bus, max_codes=need.max_codes,
                          escape_bits=need.escape_bits, fifo_beats=min(fifo, 1024), table_sets=need.table_sets,
                          row_shifts=need.shift_bits > 0, count_bits=count_bits)

    def programs():
        # Each START's lanes load the tables of their first block: the hardware keeps a lane's tables
        # from one START to the next, but every START here is simulated from reset.
        batch, n, k = [], 0, 0
        for blk in container_blocks(container, dut, need):
            if len(batch) == 1 << TAG_BITS:
                raise ConfigError(f"{container.path}: more than {1 << TAG_BITS:,} blocks in one START (a record's "
                                  "tag numbers them): give fewer pairs a START (start_pairs)")
            batch.append(replace(blk, tag=len(batch)))      # tags: the START's blocks in container order
            n += blk.count
            if n >= start_pairs:
                yield lanes_program(dut, schedule_blocks(batch, lanes), f"START {k}")
                batch, n, k = [], 0, k + 1
        if batch:
            yield lanes_program(dut, schedule_blocks(batch, lanes), f"START {k}")

    # the STARTs are made here, so that the bench's memory is sized to the largest image
    made = list(programs())
    depth = 1 << max(4, (max(len(p.beats) for p in made) - 1).bit_length())
    return ContainerPlan(dut, depth, iter(made))


def runs_throughput(runs: list[tuple[str, SubsystemRun]]) -> tuple[float, float]:
    """(weights per clock, bound) of :func:`decode_container_subsystem`'s runs taken together: every weight
    over every clock, and each run's bound weighted by the clocks it takes at that bound."""
    weights = sum(r.weights for _, r in runs)
    return weights / sum(r.cycles for _, r in runs), weights / sum(r.weights / r.bound for _, r in runs)


def decode_container_subsystem(container, engine, *, lanes: int = 4, bus_bits: int | None = None,
                               latency: int = 32, interval: int = 1, fifo_beats: int | None = None,
                               stall_prob: float = 0.0, names: list[str] | None = None,
                               block_pairs: int = BLOCK_PAIRS, start_pairs: int | None = None,
                               progress=None) -> list[tuple[str, SubsystemRun]]:
    """Every coded tensor of ``container`` (:func:`plan_container_subsystem`) through one
    :class:`SubsystemBench` with ``lanes`` lanes on ``engine``, every weight checked bit-exactly against the
    container's own decoder; one run per START (``START k``), table loads included in its clocks.
    ``progress(name)`` is called after each START."""
    plan = plan_container_subsystem(container, lanes=lanes, bus_bits=bus_bits, latency=latency,
                                    fifo_beats=fifo_beats, names=names, block_pairs=block_pairs,
                                    start_pairs=start_pairs)
    if plan is None:
        return []
    bench = SubsystemBench(plan.dut, depth=plan.depth, latency=latency, interval=interval)
    out = []
    for program in plan.programs:
        out.append((program.name, run_program(engine, bench, program, stall_prob=stall_prob)))
        if progress:
            progress(program.name)
    return out
