"""Fig. 12 in simulation: a :class:`~ansforge.hdl.parallel.ParallelDecoder` on a :class:`~.memory.SharedMemory`.

:class:`LaneSystem` is the simulated top: the decoder lanes (the registry's decoder of the codec: the
interleaved ``TansXnDecoder`` for the default ``tans8x16``) and the memory model, with the memory's
contents written through ``mem_cfg`` and the decoders' table through ``cfg``.

Each lane decodes one **independent block** per command (:func:`blocks_job`): a complete
``docs/bitstream.md`` §8 stream, laid into the memory image from a beat-aligned base in the order its
decoder reads it. :func:`decode_container_lanes` decodes a version-6 container (``ansforge compress``'s
default, the blocks layout) as it is: each tensor's blocks, ``lanes`` at a time side by side, the words
read from the container and every pair checked against the container's own decoder. A tensor of the
older layouts, or any ``symbols``/``extras`` (:func:`lanes_job`, :func:`run_lanes`), is cut into
``lanes`` contiguous blocks coded alone with the codec (:func:`chunk_blocks`), as the blocks layout cuts
a tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..hdl.common import DecodeStatus, bits_for
from ..hdl.parallel import ParallelDecoder
from ..model.coding.codecs import Codec
from ..model.errors import AnsforgeError, ConfigError
from ..model.coding import fastans
from ..model.coding.stream import Run
from .jobs import CoreJob, port_words, build_core, cfg_writes
from .memory import SharedMemory
from .streams import field_bits, pack, payload_shape, payloads_to_pairs

__all__ = ["LaneSystem", "LaneRun", "lanes_job", "blocks_job", "chunk_blocks", "chunk_counts", "run_lanes", "run_blocks",
           "decode_container_lanes", "LaneMismatch", "unpack_rows", "unpack_lanes", "code_block"]


class LaneMismatch(AnsforgeError):
    """The lanes gave other pairs than the tensor's, or a lane reported an error."""


class LaneSystem(wiring.Component):
    """``ParallelDecoder`` + ``SharedMemory``: ports ``mem_cfg``, ``cfg``, ``cmd``, ``o``, ``done``, ``status``.

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
    """

    def __init__(self, spec: Codec, *, lanes: int = 4, beat_words: int = 2, fifo_beats: int = 8, depth: int = 1024,
                 latency: int = 4, interval: int = 1, max_extra_bits: int = 8, max_symbols: int = 64):
        if depth < 1:
            raise ConfigError(f"memory depth must be at least 1 beat, not {depth!r}")
        self.spec = spec
        addr_bits = bits_for(depth - 1)
        self._dec = ParallelDecoder(lambda: build_core(f"{spec.kind}-decoder", spec, None, programmable=True,
                                                       max_symbols=max_symbols, max_extra_bits=max_extra_bits,
                                                       block_crc=False),
                                    lanes=lanes, beat_words=beat_words, addr_bits=addr_bits, fifo_beats=fifo_beats)
        self._mem = SharedMemory(depth=depth, beat_bits=beat_words * self._dec.word_bits, addr_bits=addr_bits,
                                 tag_bits=bits_for(lanes - 1), latency=latency, interval=interval)
        d = self._dec.signature.members
        super().__init__({"mem_cfg": self._mem.signature.members["mem_cfg"], "cfg": d["cfg"], "cmd": d["cmd"],
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
        wiring.connect(m, wiring.flipped(self.cfg), dec.cfg)
        wiring.connect(m, wiring.flipped(self.cmd), dec.cmd)
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


def lane_image(system: LaneSystem, lane_words: list[np.ndarray]) -> tuple[list[int], list[dict]]:
    """Memory beats (``beat_words`` port words each, word 0 in the low bits) and each lane's ``{base, words}``
    (``words``: its stream words, the decoder command's count)."""
    per_beat, W, sw = system.decoder.beat_words, system.decoder.word_bits, system.decoder.stream_word_bits
    beats, lanes = [], []
    for words in lane_words:
        # the decoder's port words (two stream words each where its port is two wide), top of the stack first
        order = port_words(np.asarray(words, dtype=np.uint64), sw, W)[::-1]
        padded = np.zeros(-(-order.size // per_beat) * per_beat, np.uint64)
        padded[:order.size] = order
        lanes.append({"base": len(beats), "words": int(np.asarray(words).size)})
        for row in padded.reshape(-1, per_beat).tolist():
            beats.append(sum(int(w) << (W * j) for j, w in enumerate(row)))
    return beats, lanes


def chunk_counts(n: int, lanes: int) -> list[int]:
    """Pairs of each of ``lanes`` contiguous blocks of ``n`` pairs: ``ceil(n / lanes)`` each but the
    last ones (never increasing with the lane, as :class:`~ansforge.hdl.parallel.ParallelDecoder` needs)."""
    c = -(-int(n) // lanes) if n else 0
    return [max(0, min(c, int(n) - lane * c)) for lane in range(lanes)]


def code_block(spec: Codec, tables, runs, symbols: np.ndarray, extras: np.ndarray) -> np.ndarray:
    """One independent block's words (push order): the compiled coder where it applies, else the golden
    one (the same words)."""
    if fastans.supported(spec):
        return np.asarray(fastans.encode(spec, tables, runs, symbols, extras, 0).words)
    return np.asarray(spec.coder().encode(tables, runs, symbols, extras).words)


def chunk_blocks(spec: Codec, table, symbols: np.ndarray, extras: np.ndarray, lanes: int) -> list[tuple[np.ndarray, int]]:
    """``symbols``/``extras`` cut into ``lanes`` contiguous blocks (:func:`chunk_counts`), each coded alone
    with ``table``: ``(words in push order, pairs)`` per lane (an empty lane: no words, 0 pairs)."""
    out, at = [], 0
    for c in chunk_counts(np.asarray(symbols).size, lanes):
        s, e = symbols[at:at + c], extras[at:at + c]
        out.append((code_block(spec, [table], [Run(0, c)], s, e) if c else np.zeros(0, np.uint64), c))
        at += c
    return out


def blocks_job(system: LaneSystem, table, blocks: list[tuple[np.ndarray, int]]) -> tuple[CoreJob, int]:
    """The job that decodes ``blocks`` (at most ``lanes``; ``(words in push order, pairs)`` each, the
    pairs not increasing) side by side, block ``l`` in lane ``l``, with ``table`` written to every lane;
    returns it and the memory beats the blocks take. The expected pairs are the caller's."""
    k = system.decoder.lanes
    proto = system.decoder.decoder_prototype
    if int(table.extra_bits.max()) > proto.max_extra_bits or table.freqs.size > proto.max_symbols:
        raise ConfigError(f"the table has {table.freqs.size} symbols and up to {int(table.extra_bits.max())} bits of "
                          f"additional data; the lanes' decoders take {proto.max_symbols} and {proto.max_extra_bits}")
    if len(blocks) > k:
        raise ValueError(f"{len(blocks)} blocks for {k} lanes")
    counts = [int(c) for _, c in blocks] + [0] * (k - len(blocks))
    if any(b > a for a, b in zip(counts, counts[1:])):
        raise ValueError(f"the lanes' pair counts {counts} increase with the lane")
    beats, lanes = lane_image(system, [w for w, _ in blocks] + [np.zeros(0, np.uint64)] * (k - len(blocks)))
    if len(beats) > system.memory.depth:
        raise ConfigError(f"the lanes' streams take {len(beats)} beats, the memory holds {system.memory.depth}")
    for lane, c in zip(lanes, counts):
        lane["count"] = c
    mem_shape = payload_shape(system, "mem_cfg")
    job = CoreJob("parallel-decoder", system)
    dec_cfg = cfg_writes(proto, [table])
    job.cfg = {"mem_cfg": [pack(mem_shape, {"addr": a, "data": b}) for a, b in enumerate(beats)],
               "cfg": dec_cfg.get("cfg", [])}
    job.commands = [pack(payload_shape(system, "cmd"), {"count": sum(counts), "lanes": lanes})]
    job.pairs = sum(counts)
    job.words = sum(lane["words"] for lane in lanes)
    job.expected_status = [DecodeStatus.OK.value]
    return job, len(beats)


def lanes_job(system: LaneSystem, table, symbols: np.ndarray, extras: np.ndarray) -> tuple[CoreJob, int]:
    """The job that decodes ``symbols``/``extras`` (one tensor, one table) through ``system``'s lanes, cut
    into one contiguous block per lane (:func:`chunk_blocks`); returns it and its memory beats."""
    symbols, extras = np.asarray(symbols).ravel(), np.asarray(extras).ravel()
    return blocks_job(system, table, chunk_blocks(system.spec, table, symbols, extras, system.decoder.lanes))


def _row_fields(system: LaneSystem, outputs):
    """The rows ``o`` gave as 64-bit words (one row a line), each row's lane count ``n``, and a function
    giving lane ``j``'s (symbols, extras) column."""
    shape = payload_shape(system, "o")
    pair = payload_shape(system.decoder.decoder_prototype, "o")
    nwords = -(-shape.size // 64)
    if isinstance(outputs, np.ndarray):
        rows = outputs.astype(np.uint64).reshape(-1, 1)
    else:
        raw = b"".join(int(v).to_bytes(8 * nwords, "little") for v in outputs)
        rows = np.frombuffer(raw, dtype="<u8").reshape(-1, nwords).astype(np.uint64)
    n = field_bits(rows, shape["n"].offset, shape["n"].width).astype(np.int64)
    base = shape["pairs"].offset
    return n, lambda j: payloads_to_pairs(pair, rows, offset=base + j * pair.size)


def unpack_rows(system: LaneSystem, outputs) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``o`` gave, as the tensor's (symbols, extras) in pair order."""
    lanes = system.decoder.lanes
    n, column = _row_fields(system, outputs)
    sym, ext = (np.stack(f, 1) for f in zip(*(column(j) for j in range(lanes))))
    keep = np.arange(lanes)[None, :] < n[:, None]
    return sym[keep].astype(np.int64), ext[keep]


def unpack_lanes(system: LaneSystem, outputs, counts: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The rows ``o`` gave, as each lane's block (symbols, extras): lane ``l``'s pairs are its column of
    the first ``counts[l]`` rows."""
    n, column = _row_fields(system, outputs)
    out = []
    for j in range(len(counts)):
        s, e = column(j)
        keep = n > j
        out.append((np.asarray(s)[keep].astype(np.int64), np.asarray(e)[keep].astype(np.uint64)))
    return out


def run_blocks(engine, system: LaneSystem, table, blocks: list[tuple[np.ndarray, int]], expected, *,
               name: str = "tensor", stall_prob: float = 0.0, seed: int = 0) -> LaneRun:
    """Decode ``blocks`` side by side (:func:`blocks_job`); raises :class:`LaneMismatch` unless lane ``l``
    gives ``expected[l]`` (its block's ``(symbols, extras)``) exactly and every lane reports OK."""
    job, beats = blocks_job(system, table, blocks)
    res = engine.run(job, stall_prob=stall_prob, seed=seed)
    if res.statuses != job.expected_status:
        raise LaneMismatch(f"{name}: the lanes reported " + ", ".join(DecodeStatus(s).name for s in res.statuses))
    got = unpack_lanes(system, res.outputs, [c for _, c in blocks])
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


def _refuse_tables(container, st, ti: int, what: str) -> None:
    """One line for a tensor the lanes cannot take: several tables (row-shift variants or a context plan)."""
    rec = container.tensors[ti]
    name = rec["name"]
    if "context" in rec:
        # The lanes hold one table; a context plan's sets and selects need the decoder's sel stream.
        raise ConfigError(f"{container.path}: tensor {name!r} is coded with a context plan (container version 4), "
                          f"which {what} do not decode; use ansforge simulate --container (one decoder core, its "
                          "table sets), or compress without --context")
    lo, hi = st.tensor_tables[ti]
    raise ConfigError(f"{container.path}: tensor {name!r} is coded with row_shifts of {hi - lo} widths (one table "
                      f"each), which {what} do not decode (one table per command, no select stream); use ansforge "
                      "simulate --container (one decoder core, its table sets)")


def container_groups(container, st, lanes: int) -> list[tuple[int, list[int]]]:
    """A version-6 stream's commands for ``lanes`` lanes: per tensor, its blocks in order, ``lanes`` at a
    time (``(tensor index, block indices)``; a tensor's short block is its last, so the counts never
    increase with the lane)."""
    by_tensor: dict[int, list[int]] = {}
    for b, blk in enumerate(st.spans):
        by_tensor.setdefault(blk.tensor, []).append(b)
    return [(ti, bs[i:i + lanes]) for ti, bs in by_tensor.items() for i in range(0, len(bs), lanes)]


def decode_container_lanes(container, engine, *, lanes: int, beat_words: int = 2, fifo_beats: int = 8,
                           latency: int = 4, interval: int = 1, stall_prob: float = 0.0) -> list[tuple[str, LaneRun]]:
    """Every coded tensor of ``container`` through ``lanes`` lanes; per tensor, the sum of its commands.

    A version-6 container (the blocks layout, ``ansforge compress``'s default) is decoded as it is: each
    tensor's independent blocks, ``lanes`` at a time side by side, one lane each, their words read from
    the container and every pair checked against the container's own decoder. A tensor with several
    tables (row shifts of several widths, a context plan) is refused in one line; a row-shifted tensor
    of one width decodes (the pairs are compared as coded). A container of the older layouts needs one
    stream per tensor; each tensor is cut into ``lanes`` blocks coded alone (:func:`run_lanes`). One
    system is built for the container, so Verilator compiles it once."""
    streams = [st for st in container.streams if st.n_pairs]
    blocks_layout = all(st.block_pairs for st in streams)
    for st in streams:
        if st.block_pairs:
            for ti in st.tensors:
                lo, hi = st.tensor_tables[ti]
                if hi - lo > 1 or "context" in container.tensors[ti]:
                    _refuse_tables(container, st, ti, "the lanes")
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
            _refuse_tables(container, st, st.tensors[0], "the lanes")
    if not streams:
        return []
    spec = streams[0].spec
    k = max([8] + [int(t.extra_bits.max()) for st in streams for t in st.tables])
    word_bits = spec.word_bits
    if blocks_layout:
        need = max(sum(-(-(st.blocks[b][1] - st.blocks[b][0]) // beat_words) + 1 for b in bs)
                   for st in streams for _, bs in container_groups(container, st, lanes))
    else:
        per_lane = max(chunk_counts(st.n_pairs, lanes)[0] for st in streams)
        need = lanes * (2 + -(-(per_lane * (k + 16) + 8 * spec.states * word_bits) // (word_bits * beat_words)))
    system = LaneSystem(spec, lanes=lanes, beat_words=beat_words, fifo_beats=fifo_beats,
                        depth=1 << max(4, (need - 1).bit_length()), latency=latency, interval=interval,
                        max_extra_bits=k, max_symbols=max(64, max(t.freqs.size for st in streams for t in st.tables)))
    out = []
    for st in streams:
        if not st.block_pairs:
            name = container.tensors[st.tensors[0]]["name"]
            symbols, extras = container.decode_stream(st)
            out.append((name, run_lanes(engine, system, st.tables[0], symbols, extras, name=name,
                                        stall_prob=stall_prob)))
            continue
        runs: dict[int, LaneRun] = {}
        for ti, bs in container_groups(container, st, lanes):
            table = st.tables[st.tensor_tables[ti][0]]
            blocks = [(np.asarray(container.block_words(st, b)), st.spans[b].count) for b in bs]
            expected = [container.decode_stream(st, st.spans[b].pair, st.spans[b].count) for b in bs]
            name = container.tensors[ti]["name"]
            run = run_blocks(engine, system, table, blocks, expected, name=f"{name} blocks {bs[0]}..{bs[-1]}",
                             stall_prob=stall_prob)
            was = runs.get(ti, LaneRun(0, 0, 0))
            runs[ti] = LaneRun(was.pairs + run.pairs, was.cycles + run.cycles, was.beats + run.beats)
        out += [(container.tensors[ti]["name"], r) for ti, r in runs.items()]
    return out
