"""Fig. 12 in simulation: a :class:`~ansforge.hdl.parallel.ParallelDecoder` on a :class:`~.memory.SharedMemory`.

:class:`LaneSystem` is the simulated top: the decoder lanes and the memory model, with the memory's
contents written through ``mem_cfg`` and the decoders' table through ``cfg``. :func:`lanes_job`
lays a tensor's interleaved streams (:func:`ansforge.model.coding.lanes.encode_lanes`, the golden codec's
interleaved mode) into the memory image, one lane after another from beat-aligned bases, each in
the order its decoder reads it; :func:`run_lanes` runs one such job and checks every pair against
the tensor's pairs; :func:`decode_container_lanes` does it for every tensor of a container.
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
from ..model.coding.lanes import encode_lanes, lane_lengths
from .jobs import CoreJob, build_core, cfg_writes
from .memory import SharedMemory
from .streams import field_bits, pack, payload_shape, payloads_to_pairs

__all__ = ["LaneSystem", "LaneRun", "lanes_job", "run_lanes", "decode_container_lanes", "LaneMismatch"]


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
    """Memory beats (``beat_words`` words each, word 0 in the low bits) and each lane's ``{base, words}``."""
    per_beat, W = system.decoder.beat_words, system.decoder.word_bits
    beats, lanes = [], []
    for words in lane_words:
        order = np.asarray(words, dtype=np.uint64)[::-1]          # top of the stack first
        padded = np.zeros(-(-order.size // per_beat) * per_beat, np.uint64)
        padded[:order.size] = order
        lanes.append({"base": len(beats), "words": int(order.size)})
        for row in padded.reshape(-1, per_beat).tolist():
            beats.append(sum(int(w) << (W * j) for j, w in enumerate(row)))
    return beats, lanes


def lanes_job(system: LaneSystem, table, symbols: np.ndarray, extras: np.ndarray) -> tuple[CoreJob, int]:
    """The job that decodes ``symbols``/``extras`` (one tensor, one table) through ``system``'s lanes;
    returns it and the number of memory beats its streams take."""
    lanes = system.decoder.lanes
    proto = system.decoder.decoder_prototype
    if int(table.extra_bits.max()) > proto.max_extra_bits or table.freqs.size > proto.max_symbols:
        raise ConfigError(f"the table has {table.freqs.size} symbols and up to {int(table.extra_bits.max())} bits of "
                          f"additional data; the lanes' decoders take {proto.max_symbols} and {proto.max_extra_bits}")
    symbols, extras = np.asarray(symbols).ravel(), np.asarray(extras).ravel()
    lane_words = encode_lanes(system.spec, table, symbols, extras, lanes)
    beats, lanes = lane_image(system, lane_words)
    if len(beats) > system.memory.depth:
        raise ConfigError(f"the lanes' streams take {len(beats)} beats, the memory holds {system.memory.depth}")
    mem_shape = payload_shape(system, "mem_cfg")
    job = CoreJob("parallel-decoder", system)
    dec_cfg = cfg_writes(system.decoder.decoder_prototype, [table])
    job.cfg = {"mem_cfg": [pack(mem_shape, {"addr": a, "data": b}) for a, b in enumerate(beats)],
               "cfg": dec_cfg.get("cfg", [])}
    job.commands = [pack(payload_shape(system, "cmd"), {"count": int(symbols.size), "lanes": lanes})]
    job.pairs = int(symbols.size)
    job.words = sum(lane["words"] for lane in lanes)
    job.expected_status = [DecodeStatus.OK.value]
    return job, len(beats)


def unpack_rows(system: LaneSystem, outputs) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``o`` gave, as the tensor's (symbols, extras) in pair order."""
    shape = payload_shape(system, "o")
    pair = payload_shape(system.decoder.decoder_prototype, "o")
    lanes, pw = system.decoder.lanes, pair.size
    nwords = -(-shape.size // 64)
    if isinstance(outputs, np.ndarray):
        rows = outputs.astype(np.uint64).reshape(-1, 1)
    else:
        raw = b"".join(int(v).to_bytes(8 * nwords, "little") for v in outputs)
        rows = np.frombuffer(raw, dtype="<u8").reshape(-1, nwords).astype(np.uint64)
    n = field_bits(rows, shape["n"].offset, shape["n"].width).astype(np.int64)
    base = shape["pairs"].offset
    sym, ext = (np.stack(f, 1) for f in zip(*(payloads_to_pairs(pair, rows, offset=base + j * pw) for j in range(lanes))))
    keep = np.arange(lanes)[None, :] < n[:, None]
    return sym[keep].astype(np.int64), ext[keep]


def run_lanes(engine, system: LaneSystem, table, symbols: np.ndarray, extras: np.ndarray, *, name: str = "tensor",
              stall_prob: float = 0.0, seed: int = 0) -> LaneRun:
    """Decode one tensor through the lanes; raises :class:`LaneMismatch` unless every pair is the tensor's."""
    job, beats = lanes_job(system, table, symbols, extras)
    res = engine.run(job, stall_prob=stall_prob, seed=seed)
    if res.statuses != job.expected_status:
        raise LaneMismatch(f"{name}: the lanes reported " + ", ".join(DecodeStatus(s).name for s in res.statuses))
    s, e = unpack_rows(system, res.outputs)
    want_s, want_e = np.asarray(symbols).ravel().astype(np.int64), np.asarray(extras).ravel().astype(np.uint64)
    if s.size != want_s.size or not (np.array_equal(s, want_s) and np.array_equal(e, want_e)):
        n = min(s.size, want_s.size)
        bad = np.flatnonzero((s[:n] != want_s[:n]) | (e[:n] != want_e[:n]))
        raise LaneMismatch(f"{name}: {s.size} pairs out of {want_s.size}, first difference at pair "
                           f"{int(bad[0]) if bad.size else n}")
    return LaneRun(int(want_s.size), res.cycles, beats)


def decode_container_lanes(container, engine, *, lanes: int, beat_words: int = 2, fifo_beats: int = 8,
                           latency: int = 4, interval: int = 1, stall_prob: float = 0.0) -> list[tuple[str, LaneRun]]:
    """Every coded tensor of ``container`` (one stream per tensor) through ``lanes`` lanes: its pairs,
    with its own table, in the golden codec's interleaved mode. One system is built for the largest
    tensor, so Verilator compiles it once."""
    streams = [st for st in container.streams if st.n_pairs]
    for st in streams:
        st.spec.hardware_check()  # the lane cores decode one state
        if len(st.tensors) != 1:
            raise ConfigError(f"{container.path}: stream {st.index} holds {len(st.tensors)} tensors; the lanes "
                              "take one table per command (compress with one stream per tensor)")
        if "row_shifts" in container.tensors[st.tensors[0]]:
            raise ConfigError(f"{container.path}: tensor {container.tensors[st.tensors[0]]['name']!r} is coded with "
                              "row_shifts (container version 3), which the lanes do not restore; compress with "
                              "--stream-per-tensor (row shifts off)")
        if "context" in container.tensors[st.tensors[0]]:
            # The lanes hold one table; a context plan's sets and selects need the decoder's sel stream.
            raise ConfigError(f"{container.path}: tensor {container.tensors[st.tensors[0]]['name']!r} is coded with "
                              "a context plan (container version 4), which the lanes do not decode; use "
                              "ansforge simulate --container (one decoder core), or compress without --context")
    if not streams:
        return []
    spec = streams[0].spec
    k = max([8] + [int(t.extra_bits.max()) for st in streams for t in st.tables])
    per_lane = max(int(lane_lengths(st.n_pairs, lanes)[0]) for st in streams)
    word_bits = spec.word_bits
    bound = lanes * (2 + -(-(per_lane * (k + 16) + 4 * word_bits) // (word_bits * beat_words)))
    system = LaneSystem(spec, lanes=lanes, beat_words=beat_words, fifo_beats=fifo_beats,
                        depth=1 << max(4, (bound - 1).bit_length()), latency=latency, interval=interval,
                        max_extra_bits=k, max_symbols=max(64, max(t.freqs.size for st in streams for t in st.tables)))
    out = []
    for st in streams:
        name = container.tensors[st.tensors[0]]["name"]
        symbols, extras = container.decode_stream(st)
        out.append((name, run_lanes(engine, system, st.tables[0], symbols, extras, name=name, stall_prob=stall_prob)))
    return out
