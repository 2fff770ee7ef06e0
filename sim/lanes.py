"""Fig. 12 in simulation: a :class:`~ansforge.hdl.parallel.ParallelDecoder` on a :class:`~.memory.SharedMemory`.

:class:`LaneSystem` is the simulated top: the decoder lanes (the registry's decoder of the codec: the
interleaved ``TansXnDecoder`` for the default ``tans8x16``) and the memory model, with the memory's
contents written through ``mem_cfg``.

Each lane reads a region of records (:func:`region_image`): per record an **independent block** (a
complete ``docs/bitstream.md`` §8 stream, in the order its decoder reads it), behind a header and, where
the lane does not hold them yet, its decoder's table entries (:func:`decoder_entries`). :func:`decode_container_lanes` decodes a version-6 container (``ansforge compress``'s
default, the blocks layout) as it is: each tensor's blocks, ``lanes`` at a time side by side, the words
read from the container and every pair checked against the container's own decoder. A tensor of the
older layouts, or any ``symbols``/``extras`` (:func:`lanes_job`, :func:`run_lanes`), is cut into
``lanes`` contiguous blocks coded alone with the codec (:func:`chunk_blocks`), as the blocks layout cuts
a tensor.

A tensor with several tables (its row-shift widths, or a context plan's sets) decodes too: the system is
built with table sets (and a run ``shift`` where the container has row shifts), every table of the
tensor is written as a set, and each lane reads its block's runs ``{count, set, shift}`` from memory
(:func:`block_runs`, laid after the words). The pairs then leave with their rows' shifts restored
(:func:`unshifted`), as ``Container.join`` takes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..hdl.common import DecodeStatus, bits_for
from ..hdl.parallel import ParallelDecoder, Table
from ..model.coding.codecs import Codec
from ..model.errors import AnsforgeError, ConfigError
from ..model.coding.stream import Run
from .jobs import CoreJob, port_words, build_core, cfg_writes, code_block
from .memory import SharedMemory
from .streams import field_bits, pack, payload_shape, payloads_to_pairs, unpack

__all__ = ["LaneSystem", "LaneRun", "lanes_job", "blocks_job", "chunk_blocks", "chunk_counts", "run_lanes", "run_blocks",
           "decode_container_lanes", "LaneMismatch", "unpack_rows", "unpack_lanes", "code_block", "block_runs",
           "unshifted", "run_entries", "container_lane_options", "region_image", "decoder_entries", "beat_ints"]


class LaneMismatch(AnsforgeError):
    """The lanes gave other pairs than the tensor's, or a lane reported an error."""


class LaneSystem(wiring.Component):
    """``ParallelDecoder`` + ``SharedMemory``: ports ``mem_cfg``, ``cmd``, ``o``, ``done``, ``status`` (the
    decoders' tables come from memory, in the lanes' records).

    Parameters
    ----------
    spec : Codec
        The codec of the lanes' decoders (built programmable, ``max_extra_bits`` wide).
    lanes, beat_words, fifo_beats : int
        As :class:`~ansforge.hdl.parallel.ParallelDecoder`.
    depth : int
        Memory beats.
    latency, interval : int
        As :class:`~.memory.SharedMemory`.
    table_sets, shift_bits : int
        The decoders' table sets (1: one table, no runs) and the runs' shift width (0: none), as
        :class:`~ansforge.hdl.parallel.ParallelDecoder`.
    """

    def __init__(self, spec: Codec, *, lanes: int = 4, beat_words: int = 2, fifo_beats: int = 8, depth: int = 1024,
                 latency: int = 4, interval: int = 1, max_extra_bits: int = 8, max_symbols: int = 64,
                 table_sets: int = 1, shift_bits: int = 0):
        if depth < 1:
            raise ConfigError(f"memory depth must be at least 1 beat, not {depth!r}")
        self.spec = spec
        addr_bits = bits_for(depth - 1)
        self._dec = ParallelDecoder(lambda: build_core(f"{spec.kind}-decoder", spec, None, programmable=True,
                                                       max_symbols=max_symbols, max_extra_bits=max_extra_bits,
                                                       block_crc=False, table_sets=table_sets),
                                    lanes=lanes, beat_words=beat_words, addr_bits=addr_bits, fifo_beats=fifo_beats,
                                    shift_bits=shift_bits)
        self._mem = SharedMemory(depth=depth, beat_bits=beat_words * self._dec.word_bits, addr_bits=addr_bits,
                                 tag_bits=len(self._dec.mem_req.p.tag), latency=latency, interval=interval)
        d = self._dec.signature.members
        super().__init__({"mem_cfg": self._mem.signature.members["mem_cfg"], "cmd": d["cmd"],
                          "o": d["o"], "done": Out(1), "status": Out(DecodeStatus)})

    decoder = property(lambda self: self._dec)
    memory = property(lambda self: self._mem)

    @property
    def programmable(self) -> bool:
        return True

    def elaborate(self, platform):
        m = Module()
        m.submodules.lanes = dec = self._dec
        m.submodules.memory = mem = self._mem
        wiring.connect(m, dec.mem_req, mem.req)
        wiring.connect(m, mem.rsp, dec.mem_rsp)
        wiring.connect(m, wiring.flipped(self.mem_cfg), mem.mem_cfg)
        wiring.connect(m, wiring.flipped(self.cmd), dec.cmd)
        for lane in range(dec.lanes):
            m.d.comb += dec.tables[lane].ready.eq(1)     # the lanes' records carry decoder entries only
        wiring.connect(m, dec.o, wiring.flipped(self.o))
        m.d.comb += [self.done.eq(dec.done), self.status.eq(dec.status)]
        return m



@dataclass
class LaneRun:
    """One tensor through the lanes: pairs, clock cycles (command to ``done``), memory beats read."""

    pairs: int
    cycles: int
    beats: int

    @property
    def pairs_per_clock(self) -> float:
        return self.pairs / self.cycles if self.cycles else 0.0


def run_entries(dec, runs) -> list[int]:
    """A block's runs ``(set, shift, count)`` as the memory entries of ``dec``'s lanes
    (:func:`~ansforge.hdl.parallel.run_entry_layout`): a run longer than an entry's ``count`` holds is
    split, a run of no pairs left out."""
    layout = dec.run_layout
    most = (1 << layout["count"].width) - 1
    out = []
    for t, z, c in runs:
        if (t and not dec.set_bits) or t >> dec.set_bits or (z and not dec.shift_bits) or z >> dec.shift_bits:
            raise ConfigError(f"a run of table set {t} and shift {z}; the lanes take {1 << dec.set_bits} sets "
                              f"and shifts below {1 << dec.shift_bits}")
        c = int(c)
        while c:
            n = min(c, most)
            fields = {"count": n, **({"set": t} if dec.set_bits else {}), **({"shift": z} if dec.shift_bits else {})}
            out.append(pack(layout, fields))
            c -= n
    return out


def decoder_entries(dec, tables) -> list[tuple[int, int, int]]:
    """The table entries ``(kind, addr, data)`` (:class:`~ansforge.hdl.parallel.Table` ``DECODER``) that
    load ``tables`` (one table, or table set ``t`` each) into a lane of ``dec`` (a ``ParallelDecoder``)."""
    proto = dec.decoder_prototype
    shape = payload_shape(proto, "cfg")
    tables = list(tables) if isinstance(tables, (list, tuple)) else [tables]
    return [(Table.DECODER, int(unpack(shape, w)["addr"]), w >> shape["data"].offset)
            for w in cfg_writes(proto, tables).get("cfg", [])]


def region_image(dec, lane_records: list[list[tuple[np.ndarray, int, list]]],
                 lane_runs: list[list[int]] | None = None, start: int = 0) -> tuple[np.ndarray, list[dict]]:
    """The memory image of ``dec``'s lanes (a ``ParallelDecoder``): lane ``l``'s region holds its records
    ``lane_records[l]``, each ``(words in push order, pairs, entries)``, ``(words, pairs, entries, tag)``
    or ``(words, pairs, entries, tag, part)`` (``entries``: table entries ``(kind, addr, data)`` to load
    before the block, or none; ``tag``: what the block's pairs carry out, 0 if not given; ``part``: for
    resumable lanes, ``{resume, partial, bit, state}`` of a part of a block cut at a checkpoint, or
    ``None``: :func:`~ansforge.hdl.parallel.record_header_layout`), as :class:`~ansforge.hdl.parallel.LaneFront`
    reads them; with ``lane_runs`` (each lane's run entries, :func:`run_entries`, its blocks' one after
    another) the runs lie after every region.

    Returns the beats, as rows of 64-bit pieces (piece 0 the low bits; a beat narrower than 64 bits in
    the low bits of one), and each lane's ``{base, units}`` (and ``{runs_base, runs}``): the command's,
    for an image laid from beat ``start`` on."""
    U, per_beat = dec.unit_bits, dec.units_per_beat
    W, sw = dec.word_bits, dec.stream_word_bits
    per_unit = U // W
    hdr, ent = dec.header_layout, dec.entry_layout
    hdr_units, ent_units = dec.header_units, dec.entry_units
    unit_mask = (1 << U) - 1
    limit = 1 << dec.count_bits

    def units_of(value: int, n: int) -> list[int]:
        return [(value >> (U * j)) & unit_mask for j in range(n)]

    rows, regs, at = [], [], start
    for lane, records in enumerate(lane_records):
        parts = []
        for words, count, entries, *rest in records:
            tag = int(rest[0]) if rest else 0
            part = rest[1] if len(rest) > 1 else None
            if part and "state" not in hdr.members:
                raise ConfigError(f"lane {lane}: a part of a block resumed at a checkpoint; the lanes were not built "
                                  "resumable")
            if not 0 <= tag < 1 << hdr["tag"].width:
                raise ConfigError(f"lane {lane}: a record tagged {tag}; a header holds tags below "
                                  f"2**{hdr['tag'].width}")
            words = np.asarray(words, dtype=np.uint64)
            entries = list(entries or [])
            for what, v in (("pairs", count), ("words", words.size)):
                if v >= limit:
                    raise ConfigError(f"lane {lane}: a block of {v:,} {what}; the lanes count below "
                                      f"2**{dec.count_bits}")
            if len(entries) >= 1 << hdr["entries"].width:
                raise ConfigError(f"lane {lane}: {len(entries)} table entries in one record; a header holds "
                                  f"{(1 << hdr['entries'].width) - 1}")
            head = pack(hdr, {"count": int(count), "words": int(words.size), "entries": len(entries), "tag": tag,
                              **(part or {})})
            parts.append(np.asarray(units_of(head, hdr_units), np.uint64))
            if entries:
                parts.append(np.asarray([u for k, a, d in entries
                                         for u in units_of(pack(ent, {"data": int(d), "addr": int(a), "kind": int(k)}),
                                                           ent_units)], np.uint64))
            # the decoder's port words (two stream words each where its port is two wide), top of the stack first
            order = port_words(words, sw, W)[::-1]
            padded = np.zeros(-(-order.size // per_unit) * per_unit, np.uint64)
            padded[:order.size] = order
            cols = padded.reshape(-1, per_unit)
            packed = np.zeros(cols.shape[0], np.uint64)
            for j in range(per_unit):
                packed |= cols[:, j] << np.uint64(W * j)
            parts.append(packed)
        units = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
        if units.size >= limit:
            raise ConfigError(f"lane {lane}: a region of {units.size:,} units; the lanes count below "
                              f"2**{dec.count_bits}: give the lane fewer blocks per command")
        n_beats = -(-units.size // per_beat)
        padded = np.zeros(n_beats * per_beat, np.uint64)
        padded[:units.size] = units
        # a unit is 64 bits (several a beat) or the whole beat (one, narrower): either way a beat's pieces
        rows.append(padded.reshape(n_beats, per_beat))
        regs.append({"base": at, "units": int(units.size)})
        at += n_beats
    pieces = rows[0].shape[1] if rows else max(1, per_beat)
    if lane_runs is not None:
        per, rb = dec.runs_per_beat, dec.run_bits
        for reg, entries in zip(regs, lane_runs):
            reg.update({"runs_base": at, "runs": len(entries)})
            if len(entries) >= limit:
                raise ConfigError(f"a lane's {len(entries):,} runs; the lanes count below 2**{dec.count_bits}")
            beats = [sum(int(e) << (rb * j) for j, e in enumerate(entries[a:a + per]))
                     for a in range(0, len(entries), per)]
            rows.append(np.asarray([[(b >> (64 * j)) & (2 ** 64 - 1) for j in range(pieces)] for b in beats],
                                   np.uint64).reshape(-1, pieces))
            at += len(beats)
    image = np.concatenate(rows) if rows else np.zeros((0, pieces), np.uint64)
    return image, regs


def beat_ints(image: np.ndarray) -> list[int]:
    """:func:`region_image`'s beats as Python integers."""
    return [sum(int(v) << (64 * j) for j, v in enumerate(row)) for row in np.asarray(image).tolist()]


def block_runs(container, st, b: int, fold: int = 0) -> list[tuple[int, int, int]]:
    """Independent block ``b``'s runs as the lanes take them: ``(set, shift, count)``, the set counted from
    its tensor's first table and the shift its table's row shift (0 for a context plan's sets) plus
    ``fold`` (the subsystem's realignment of a folded code's pairs, ``sim/subsystem.py`` ``float_writes``)."""
    _, runs = container.block_tables(st, b)
    t_lo = st.tensor_tables[st.spans[b].tensor][0]
    return [(r.table, st.table_owner[t_lo + r.table][1] + fold, r.count) for r in runs if r.count]


def unshifted(extras: np.ndarray, runs: list[tuple[int, int, int]]) -> np.ndarray:
    """A block's additional data as coded → with its runs' row shifts restored (what the lanes give)."""
    e = np.asarray(extras).astype(np.uint64).ravel()
    z = np.repeat(np.asarray([r[1] for r in runs], np.uint64), [r[2] for r in runs])
    if z.size != e.size:
        raise ValueError(f"runs of {z.size} pairs for {e.size} pairs")
    return e << z


def chunk_counts(n: int, lanes: int) -> list[int]:
    """Pairs of each of ``lanes`` contiguous blocks of ``n`` pairs: ``ceil(n / lanes)`` each but the
    last ones."""
    c = -(-int(n) // lanes) if n else 0
    return [max(0, min(c, int(n) - lane * c)) for lane in range(lanes)]


def chunk_blocks(spec: Codec, table, symbols: np.ndarray, extras: np.ndarray, lanes: int) -> list[tuple[np.ndarray, int]]:
    """``symbols``/``extras`` cut into ``lanes`` contiguous blocks (:func:`chunk_counts`), each coded alone
    with ``table``: ``(words in push order, pairs)`` per lane (an empty lane: no words, 0 pairs)."""
    out, at = [], 0
    for c in chunk_counts(np.asarray(symbols).size, lanes):
        s, e = symbols[at:at + c], extras[at:at + c]
        out.append((code_block(spec, [table], [Run(0, c)], s, e) if c else np.zeros(0, np.uint64), c))
        at += c
    return out


def blocks_job(system: LaneSystem, table, blocks: list[tuple[np.ndarray, int]],
               runs: list[list[tuple[int, int, int]]] | None = None, preload: bool = True) -> tuple[CoreJob, int]:
    """The job that decodes ``blocks`` (at most ``lanes``; ``(words in push order, pairs)`` each) side by
    side, block ``l`` in lane ``l``, each lane loading ``table`` (one table, or a list: table set ``t`` each)
    from a record; ``runs``: each block's ``(set, shift, count)`` (default: all of it with set 0, no
    shift; needed by lanes with table sets or shifts). With ``preload`` (the default, as Fig. 12 has the
    tables in place) the tables come in a command of their own before the timed one (records of no pairs:
    the job's cycles are the blocks' alone); else in front of each block, timed. Returns the job and the
    memory beats it takes. The expected pairs are the caller's."""
    k = system.decoder.lanes
    proto = system.decoder.decoder_prototype
    tables = list(table) if isinstance(table, (list, tuple)) else [table]
    for t in tables:
        if int(t.extra_bits.max()) > proto.max_extra_bits or t.freqs.size > proto.max_symbols:
            raise ConfigError(f"the table has {t.freqs.size} symbols and up to {int(t.extra_bits.max())} bits of "
                              f"additional data; the lanes' decoders take {proto.max_symbols} and "
                              f"{proto.max_extra_bits}")
    if len(tables) > 1 << system.decoder.set_bits:
        raise ConfigError(f"{len(tables)} tables; the lanes' decoders hold {1 << system.decoder.set_bits} sets")
    if len(blocks) > k:
        raise ValueError(f"{len(blocks)} blocks for {k} lanes")
    counts = [int(c) for _, c in blocks] + [0] * (k - len(blocks))
    entries = None
    if system.decoder.has_runs:
        runs = list(runs) if runs is not None else [[(0, 0, c)] for c in counts[:len(blocks)]]
        runs += [[]] * (k - len(runs))
        for r, c in zip(runs, counts):
            if sum(x[2] for x in r) != c:
                raise ValueError(f"runs of {sum(x[2] for x in r)} pairs for a block of {c}")
        entries = [run_entries(system.decoder, r) for r in runs]
    elif runs is not None and any(x[0] or x[1] for r in runs for x in r):
        raise ConfigError("the blocks have several tables or row shifts; the lanes were built without runs")
    load = decoder_entries(system.decoder, tables)
    cmd_shape = payload_shape(system, "cmd")
    commands, images = [], []
    if preload:
        image, lanes = region_image(system.decoder, [[(np.zeros(0, np.uint64), 0, load)] for _ in range(k)],
                                    [[] for _ in range(k)] if entries is not None else None)
        commands.append(pack(cmd_shape, {"lanes": lanes}))
        images.append(image)
    image, lanes = region_image(system.decoder, [[(w, c, None if preload else load)] for w, c in blocks]
                                + [[] for _ in range(k - len(blocks))], entries,
                                start=sum(len(i) for i in images))
    commands.append(pack(cmd_shape, {"lanes": lanes}))
    image = np.concatenate(images + [image])
    if len(image) > system.memory.depth:
        raise ConfigError(f"the lanes' regions take {len(image)} beats, the memory holds {system.memory.depth}")
    mem_shape = payload_shape(system, "mem_cfg")
    job = CoreJob("parallel-decoder", system)
    job.cfg = {"mem_cfg": [pack(mem_shape, {"addr": a, "data": b}) for a, b in enumerate(beat_ints(image))]}
    job.commands = commands
    job.timed_from = len(commands) - 1
    job.pairs = sum(counts)
    job.words = len(image) * system.decoder.beat_words    # every port word the lanes read, tables included
    job.expected_status = [DecodeStatus.OK.value] * len(commands)
    return job, len(image)


def lanes_job(system: LaneSystem, table, symbols: np.ndarray, extras: np.ndarray) -> tuple[CoreJob, int]:
    """The job that decodes ``symbols``/``extras`` (one tensor, one table) through ``system``'s lanes, cut
    into one contiguous block per lane (:func:`chunk_blocks`); returns it and its memory beats."""
    symbols, extras = np.asarray(symbols).ravel(), np.asarray(extras).ravel()
    return blocks_job(system, table, chunk_blocks(system.spec, table, symbols, extras, system.decoder.lanes))


def unpack_lanes(system: LaneSystem, outputs) -> list[tuple[np.ndarray, np.ndarray]]:
    """The transfers ``o`` gave, as each lane's pairs (symbols, extras): lane ``l``'s are slot ``l`` of the
    transfers whose ``valid`` has bit ``l``."""
    shape = payload_shape(system, "o")
    pair = payload_shape(system.decoder.decoder_prototype, "o")
    nwords = -(-shape.size // 64)
    if isinstance(outputs, np.ndarray):
        rows = outputs.astype(np.uint64).reshape(-1, nwords)
    else:
        raw = b"".join(int(v).to_bytes(8 * nwords, "little") for v in outputs)
        rows = np.frombuffer(raw, dtype="<u8").reshape(-1, nwords).astype(np.uint64)
    valid = field_bits(rows, shape["valid"].offset, shape["valid"].width).astype(np.int64)
    base = shape["pairs"].offset
    out = []
    for j in range(system.decoder.lanes):
        s, e = payloads_to_pairs(pair, rows, offset=base + j * pair.size)
        keep = (valid >> j) & 1 == 1
        out.append((np.asarray(s)[keep].astype(np.int64), np.asarray(e)[keep].astype(np.uint64)))
    return out


def unpack_rows(system: LaneSystem, outputs) -> tuple[np.ndarray, np.ndarray]:
    """The transfers ``o`` gave, as the pairs of lane 0's block, then lane 1's, ... (a tensor cut into
    contiguous blocks, :func:`chunk_blocks`, in pair order)."""
    lanes = unpack_lanes(system, outputs)
    return (np.concatenate([s for s, _ in lanes]).astype(np.int64), np.concatenate([e for _, e in lanes]))


def run_blocks(engine, system: LaneSystem, table, blocks: list[tuple[np.ndarray, int]], expected, *,
               name: str = "tensor", stall_prob: float = 0.0, seed: int = 0,
               runs: list[list[tuple[int, int, int]]] | None = None) -> LaneRun:
    """Decode ``blocks`` side by side (:func:`blocks_job`, ``table`` and ``runs`` as there); raises
    :class:`LaneMismatch` unless lane ``l`` gives ``expected[l]`` (its block's ``(symbols, extras)``, the
    extras with their row shifts restored) exactly and every lane reports OK."""
    job, beats = blocks_job(system, table, blocks, runs)
    res = engine.run(job, stall_prob=stall_prob, seed=seed)
    if res.statuses != job.expected_status:
        raise LaneMismatch(f"{name}: the lanes reported " + ", ".join(DecodeStatus(s).name for s in res.statuses))
    got = unpack_lanes(system, res.outputs)
    for lane, ((s, e), (ws, we)) in enumerate(zip(got, expected)):
        ws, we = np.asarray(ws).ravel().astype(np.int64), np.asarray(we).ravel().astype(np.uint64)
        if s.size != ws.size or not (np.array_equal(s, ws) and np.array_equal(e, we)):
            k = min(s.size, ws.size)
            bad = np.flatnonzero((s[:k] != ws[:k]) | (e[:k] != we[:k]))
            raise LaneMismatch(f"{name}: lane {lane} gave {s.size} pairs of its block's {ws.size}, first difference "
                               f"at pair {int(bad[0]) if bad.size else k}")
    return LaneRun(job.pairs, res.cycles, beats)


def run_lanes(engine, system: LaneSystem, table, symbols: np.ndarray, extras: np.ndarray, *, name: str = "tensor",
              stall_prob: float = 0.0, seed: int = 0) -> LaneRun:
    """Decode one tensor through the lanes, one contiguous block per lane (:func:`chunk_blocks`); raises
    :class:`LaneMismatch` unless every pair is the tensor's."""
    symbols, extras = np.asarray(symbols).ravel(), np.asarray(extras).ravel()
    blocks = chunk_blocks(system.spec, table, symbols, extras, system.decoder.lanes)
    expected, at = [], 0
    for _, c in blocks:
        expected.append((symbols[at:at + c], extras[at:at + c]))
        at += c
    return run_blocks(engine, system, table, blocks, expected, name=name, stall_prob=stall_prob, seed=seed)


def _refuse_older(container, st, ti: int, what: str) -> None:
    """One line for a context-coded tensor of the older layouts (one stack per stream), which the lanes
    cut into blocks coded alone with one table."""
    raise ConfigError(f"{container.path}: tensor {container.tensors[ti]['name']!r} is coded with a context plan in "
                      f"a one-stack stream (container version 4), which {what} do not decode; compress with the "
                      "default blocks layout")


def container_lane_options(container, streams, tensors=None) -> tuple[int, int]:
    """``(table_sets, shift_bits)`` lanes need for the version-6 ``streams`` of ``container`` (``tensors``:
    the container's tensor indices to count, default all): a power of two of sets for the tensor with the
    most tables (1: every tensor one table), and the width of the largest row shift (0: none)."""
    v6 = [st for st in streams if st.block_pairs]
    keep = (lambda t: True) if tensors is None else set(tensors).__contains__
    sets = max([1] + [hi - lo for st in v6 for t, (lo, hi) in st.tensor_tables.items() if keep(t)])
    most = max([0] + [z for st in v6 for t, z in st.table_owner if keep(t)])
    return (1 if sets == 1 else 1 << (sets - 1).bit_length()), (bits_for(most) if most else 0)


def container_groups(container, st, lanes: int) -> list[tuple[int, list[int]]]:
    """A version-6 stream's commands for ``lanes`` lanes: per tensor, its blocks in order, ``lanes`` at a
    time (``(tensor index, block indices)``; a tensor's short block is its last, so the counts never
    increase with the lane)."""
    by_tensor: dict[int, list[int]] = {}
    for b, blk in enumerate(st.spans):
        by_tensor.setdefault(blk.tensor, []).append(b)
    return [(ti, bs[i:i + lanes]) for ti, bs in by_tensor.items() for i in range(0, len(bs), lanes)]


def decode_container_lanes(container, engine, *, lanes: int, beat_words: int = 2, fifo_beats: int = 8,
                           latency: int = 4, interval: int = 1, stall_prob: float = 0.0,
                           names: list[str] | None = None) -> list[tuple[str, LaneRun]]:
    """Every coded tensor of ``container`` through ``lanes`` lanes; per tensor, the sum of its commands.

    A version-6 container (the blocks layout, ``ansforge compress``'s default) is decoded as it is: each
    tensor's independent blocks, ``lanes`` at a time side by side, one lane each, their words read from
    the container and every pair checked against the container's own decoder (its row shifts restored).
    A tensor with several tables (row-shift widths, a context plan) has them written as table sets and
    each block's runs read from memory (:func:`block_runs`). A container of the older layouts needs one
    stream per tensor without row shifts or context plans; each tensor is cut into ``lanes`` blocks coded
    alone (:func:`run_lanes`). One system is built for the container, so Verilator compiles it once.
    ``names``: only these tensors (the system is still built for the whole container)."""
    streams = [st for st in container.streams if st.n_pairs]
    blocks_layout = all(st.block_pairs for st in streams)
    for st in streams:
        if st.block_pairs:
            continue
        st.spec.hardware_check()  # the older layouts: one state, as they were written for the lanes
        if len(st.tensors) != 1:
            raise ConfigError(f"{container.path}: stream {st.index} holds {len(st.tensors)} tensors; the lanes "
                              "take one table per command (compress with the default blocks layout)")
        if "row_shifts" in container.tensors[st.tensors[0]]:
            raise ConfigError(f"{container.path}: tensor {container.tensors[st.tensors[0]]['name']!r} is coded with "
                              "row_shifts (container version 3) in a one-stack stream, which the lanes do not "
                              "restore; compress with the default blocks layout")
        if "context" in container.tensors[st.tensors[0]]:
            _refuse_older(container, st, st.tensors[0], "the lanes")
    if not streams:
        return []
    spec = streams[0].spec
    # a shifted pair leaves as wide as its tensor's unshifted ones, even where no row of it has z = 0
    k = max([8] + [int(t.extra_bits.max()) + (st.table_owner[i][1] if st.block_pairs else 0)
                   for st in streams for i, t in enumerate(st.tables)])
    word_bits = spec.word_bits
    sets, shift_bits = container_lane_options(container, streams)
    has_runs = sets > 1 or shift_bits > 0
    if blocks_layout:
        # words, and (with runs) a beat per two runs at worst (a 32-bit beat holds one) plus padding
        need = max(sum(-(-(st.blocks[b][1] - st.blocks[b][0]) // beat_words) + 1
                       + (len(block_runs(container, st, b)) + 1 if has_runs else 0) for b in bs)
                   for st in streams for _, bs in container_groups(container, st, lanes))
    else:
        per_lane = max(chunk_counts(st.n_pairs, lanes)[0] for st in streams)
        need = lanes * (2 + -(-(per_lane * (k + 16) + 8 * spec.states * word_bits) // (word_bits * beat_words)))
    options = dict(lanes=lanes, beat_words=beat_words, fifo_beats=fifo_beats, latency=latency, interval=interval,
                   max_extra_bits=k, max_symbols=max(64, max(t.freqs.size for st in streams for t in st.tables)),
                   table_sets=sets, shift_bits=shift_bits)
    # each lane's record also holds a header and its decoder's tables (every set): their beats at most,
    # from bounds on the layouts (a header at most 80 bits, an entry 128; a unit at least
    # min(64, beat) bits of the stream's words), so that no system is built just to measure them
    unit = min(64, beat_words * word_bits)
    table = streams[0].tables[0]
    entries = sets * (len(table.decoder_entries()) if hasattr(table, "decoder_entries") else 512)
    need += lanes * (1 + -(-80 // unit) + entries * -(-128 // unit))
    system = LaneSystem(spec, depth=1 << max(4, (need - 1).bit_length()), **options)
    out = []
    for st in streams:
        if not st.block_pairs:
            name = container.tensors[st.tensors[0]]["name"]
            if names is not None and name not in names:
                continue
            symbols, extras = container.decode_stream(st)
            out.append((name, run_lanes(engine, system, st.tables[0], symbols, extras, name=name,
                                        stall_prob=stall_prob)))
            continue
        runs: dict[int, LaneRun] = {}
        for ti, bs in container_groups(container, st, lanes):
            if names is not None and container.tensors[ti]["name"] not in names:
                continue
            lo, hi = st.tensor_tables[ti]
            blocks = [(np.asarray(container.block_words(st, b)), st.spans[b].count) for b in bs]
            block_run = [block_runs(container, st, b) for b in bs]
            expected = []
            for b, r in zip(bs, block_run):
                s, e = container.decode_stream(st, st.spans[b].pair, st.spans[b].count)
                expected.append((s, unshifted(e, r) if shift_bits else e))
            name = container.tensors[ti]["name"]
            run = run_blocks(engine, system, st.tables[lo:hi], blocks, expected,
                             name=f"{name} blocks {bs[0]}..{bs[-1]}", stall_prob=stall_prob,
                             runs=block_run if has_runs else None)
            was = runs.get(ti, LaneRun(0, 0, 0))
            runs[ti] = LaneRun(was.pairs + run.pairs, was.cycles + run.cycles, was.beats + run.beats)
        out += [(container.tensors[ti]["name"], r) for ti, r in runs.items()]
    return out
