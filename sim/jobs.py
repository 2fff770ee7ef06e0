"""Simulation jobs: a core, the stimulus the golden model implies, and the response it must give.

A :class:`CoreJob` is engine-neutral: payloads are integers (:mod:`.streams`), so the same job runs
in the Amaranth simulator and in Verilator and both results are checked against the same
expectation, which comes from the golden coders of :mod:`ansforge.model` and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from amaranth.lib import wiring

from ..hdl.common import COUNT_BITS, DecodeStatus
from ..hdl.cores import base_names, core_build, table_writes
from ..model.coding import fastans
from ..model.coding.codecs import Codec
from ..model.coding.stream import Checkpoint, Run, block_crc, block_ranges
from .streams import pack, pairs_to_payloads, payload_shape, payloads_to_pairs

__all__ = ["CORES", "SIMULATION_EXTRA_BITS", "simulation_extra_bits", "simulation_core", "CoreJob", "SimResult", "StreamBlock", "build_core", "make_job", "stream_blocks", "block_command", "port_inputs", "port_outputs", "stream_words",
           "blocks_job", "unpack_pairs", "cfg_writes", "command_state", "code_block"]

#: The base builds of :data:`~ansforge.hdl.cores.REGISTRY` (:func:`build_core` also takes their
#: ``<core>-x<N>`` builds).
CORES = tuple(base_names())


@dataclass
class SimResult:
    """What a core did: payload bits on ``o``, each decoder command's status, clock cycles."""

    outputs: list[int]
    statuses: list[int]
    cycles: int
    trace: dict[str, np.ndarray] | None = None   # sampled signals per cycle (Amaranth engine, ``trace=``)
    #: of ``cycles``, the clocks in which the testbench held ``o.ready`` high (all of them without
    #: back-pressure): pairs per ready clock is the core's own rate under back-pressure
    ready_cycles: int | None = None


@dataclass
class CoreJob:
    """Stimulus and expected response of one core run (see the module docstring)."""

    kind: str
    core: wiring.Component
    cfg: dict[str, list[int]] = field(default_factory=dict)
    commands: list[int] = field(default_factory=list)
    inputs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))    # payload bits on ``i``
    expected: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))  # payload bits on ``o``
    expected_status: list[int] = field(default_factory=list)
    side: dict[str, list[int]] = field(default_factory=dict)    # other input streams (``sel``), fed with ``i``
    pairs: int = 0
    words: int = 0
    #: Outputs in slots instead of ``expected`` (a multi-lane output whose transfers depend on timing):
    #: ``(slot bits, expected values of each slot)``; ``o``'s payload is ``{data, keep, last}``, slot ``l``
    #: the ``l``-th ``slot bits`` of ``data``, present where its ``keep`` bytes are all set.
    slots: tuple[int, list[np.ndarray]] | None = None
    #: With ``slots``, each slot's expected tags (``o``'s ``user``, a tag per slot), one per value.
    slot_tags: list[np.ndarray] | None = None
    #: The first command the run's cycles count from (the ones before it, e.g. table loads, untimed).
    timed_from: int = 0

    @property
    def is_decoder(self) -> bool:
        return self.kind.endswith("decoder")

    def check(self, result: SimResult) -> tuple[bool, list[str]]:
        """Whether ``result`` is bit-exact, and what differs (first mismatch, counts, statuses)."""
        errs = []
        got = np.asarray(result.outputs, dtype=np.uint64)
        if not np.array_equal(got, self.expected):
            n = min(got.size, self.expected.size)
            diff = np.flatnonzero(got[:n] != self.expected[:n])
            first = int(diff[0]) if diff.size else n
            errs.append(f"output {first} of {self.expected.size} differs (core gave {got.size} outputs)")
        if self.is_decoder and result.statuses != self.expected_status:
            errs.append("status " + ", ".join(DecodeStatus(s).name for s in result.statuses) + " expected "
                        + ", ".join(DecodeStatus(s).name for s in self.expected_status))
        return not errs, errs


#: Additional-data width of the programmable core a simulation of bf16 coding pairs builds: the 8 raw
#: bits of a pair and at most 8 bits of escape index (a bf16 exponent is one of 256 codes), so that it
#: takes every table. Built at this width whatever the tables of the run need, the core's Verilog is
#: the same for every checkpoint and every histogram, and Verilator's cache (keyed by the Verilog,
#: :mod:`.verilator`) compiles each core once: ``simulate`` after ``demo`` reuses the demo's build.
SIMULATION_EXTRA_BITS = 16


def simulation_extra_bits(tables) -> int:
    """The ``max_extra_bits`` of a programmable core that runs ``tables`` (code tables with an
    ``extra_bits`` array): :data:`SIMULATION_EXTRA_BITS`, or more where a table needs more."""
    return max([SIMULATION_EXTRA_BITS] + [int(np.max(t.extra_bits)) for t in tables if np.size(t.extra_bits)])


def simulation_core(kind: str, spec: Codec, tables, **options) -> wiring.Component:
    """The programmable ``kind`` core that a simulation writing ``tables`` through ``cfg`` runs: no table
    as its reset contents and :func:`simulation_extra_bits` of additional data, so that its Verilog
    depends on neither the checkpoint nor the histogram (one Verilator build for ``demo`` and every
    ``simulate`` of the core). ``options``: :func:`build_core`'s."""
    return build_core(kind, spec, None, programmable=True, max_extra_bits=simulation_extra_bits(tables), **options)


def build_core(kind: str, spec: Codec, table=None, *, programmable: bool = False, max_symbols: int = 64,
               max_extra_bits: int | None = None, block_crc: bool = True, table_sets: int = 1,
               shell: bool = True, count_bits: int = COUNT_BITS) -> wiring.Component:
    """The core ``kind`` (one of :data:`CORES`, or a build of :func:`~ansforge.hdl.cores.core_build`) for codec ``spec`` with ``table`` baked in, or loadable
    if programmable (``table=None``: an empty programmable core): the registry's build
    (:meth:`~ansforge.hdl.cores.CoreBuild.build`, which refuses a codec it does not take in one line) with
    the simulator's defaults. ``max_extra_bits`` defaults to what ``table`` needs (at least 8, the
    paper's). ``block_crc`` (decoders) builds the hardware CRC-32 check. ``table_sets`` > 1 builds a
    programmable context-table core. ``shell=False`` builds the coder alone (no commands, counters,
    status or CRC: what Table 3 measures); it has the coder's ports, which the simulation engines do not
    drive. ``count_bits`` is the width of a command's counts (the shell's counters)."""
    try:
        build = core_build(kind)
    except ValueError:
        raise ValueError(f"core must be one of {', '.join(CORES)} (or <core>-x<N>), not {kind!r}") from None
    if spec.kind != build.kind:
        raise ValueError(f"core {kind} needs a {'tANS' if build.kind == 'tans' else 'rANS'} codec, not {spec.name}")
    k = max_extra_bits if max_extra_bits is not None else \
        max(8, int(table.extra_bits.max())) if table is not None else 8
    options = {"block_crc": block_crc} if build.role == "decoder" else {}
    return build.build(spec, table, programmable=programmable, max_symbols=max_symbols, max_extra_bits=k,
                       table_sets=table_sets, shell=shell, count_bits=count_bits, **options)


def cfg_writes(core, tables) -> dict[str, list[int]]:
    """Packed ``cfg`` writes (per port) that load ``tables[t]`` as table set ``t`` of a programmable
    core (``{}`` for a fixed-table core): the core's :meth:`table_writes`, packed for its ports."""
    if not core.programmable:
        return {}
    out = {}
    for port, writes in table_writes(core, tables).items():
        shape = payload_shape(core, port)      # once per port: a signature lookup costs more than a pack
        out[port] = [pack(shape, w) for w in writes]
    return out


def code_block(spec: Codec, tables, runs, symbols: np.ndarray, extras: np.ndarray) -> np.ndarray:
    """One independent stream's words (push order), as the golden coder gives them: computed by the
    compiled coder of :mod:`~ansforge.model.coding.fastans` where it applies (the same words, tested
    against the golden coder at every state count; tens of times faster on a whole model), else by
    the golden coder itself."""
    return np.asarray(fastans.encode(spec, tables, runs, symbols, extras, 0).words)


def make_job(kind: str, spec: Codec, table, symbols: np.ndarray, extras: np.ndarray, *,
             programmable: bool = False, max_symbols: int = 64, max_extra_bits: int | None = None,
             core: wiring.Component | None = None) -> CoreJob:
    """A job that codes ``symbols``/``extras`` (pair order) with one command, checked against the
    golden coder: a decoder gets the golden words (top first) and must give back the pairs; an
    encoder gets the pairs back to front and must give the golden words in push order."""
    core = core or build_core(kind, spec, table, programmable=programmable, max_symbols=max_symbols,
                              max_extra_bits=max_extra_bits)
    symbols = np.asarray(symbols, dtype=np.int64)
    extras = np.asarray(extras, dtype=np.uint64)
    n = int(symbols.size)
    words = code_block(spec, [table], [Run(0, n)], symbols, extras)
    dec = kind.endswith("decoder")
    pair_shape = payload_shape(core, "o" if dec else "i")
    pairs = pairs_to_payloads(pair_shape, symbols, extras)
    w = np.asarray(words, dtype=np.uint64)
    job = CoreJob(kind, core, cfg=cfg_writes(core, [table]), pairs=n, words=len(words))
    if dec:
        crc = block_crc(np.asarray(words), word_bits=spec.word_bits)
        job.commands = [pack(payload_shape(core, "cmd"), {"count": n, "words": len(words), "resume": 0, "check_end": 1,
                                                   "check_crc": 1, "crc": crc})]
        job.inputs = port_inputs(core, w[::-1], spec.word_bits)
        job.expected = pairs
        job.expected_status = [DecodeStatus.OK.value]
    else:
        job.commands = [pack(payload_shape(core, "cmd"), {"count": n})]
        job.inputs = pairs[::-1].copy()
        job.expected = port_outputs(core, w, spec.word_bits)
    return job


@dataclass(frozen=True)
class StreamBlock:
    """One decoder command's share of a stream: the pairs between two checkpoints.

    ``words`` are the block's words in the order the decoder reads them (top of the stack first),
    ``resume`` the checkpoint it starts from (``None`` for the top of the stream), ``crc`` the block
    CRC-32 (:func:`~ansforge.model.coding.stream.block_crc`) and ``last`` whether it ends the stream.
    """

    first_pair: int
    count: int
    resume: Checkpoint | None
    words: np.ndarray
    crc: int
    last: bool


def stream_blocks(words: np.ndarray, checkpoints: list[Checkpoint], n_pairs: int, *, word_bits: int,
                  crcs: list[int] | None = None) -> list[StreamBlock]:
    """A stream cut at its checkpoints as the container cuts it (``crcs``: the container's CRCs;
    default: computed from ``words``)."""
    words = np.asarray(words)
    cps = list(checkpoints)
    firsts = [0] + [c.pair for c in cps]
    ends = [c.pair for c in cps] + [n_pairs]
    ranges = block_ranges(int(words.size), cps)
    if crcs is not None and len(crcs) != len(ranges):
        raise ValueError(f"{len(crcs)} block CRCs for {len(ranges)} blocks")
    out = []
    for b, (lo, hi) in enumerate(ranges):
        crc = crcs[b] if crcs is not None else block_crc(words, lo, hi, word_bits)
        out.append(StreamBlock(firsts[b], ends[b] - firsts[b], cps[b - 1] if b else None,
                               words[lo:hi][::-1].astype(np.uint64), int(crc), b == len(ranges) - 1))
    return out


def port_words(words_push_order: np.ndarray, word_bits: int, port_bits: int) -> np.ndarray:
    """Stream words (push order) as port words: one each, or where the port is two words wide two,
    the first pushed in the low half, an odd last word with a zero high half (the words' 32-bit
    alignment from the stream's bottom up, as a host stores them)."""
    w = np.asarray(words_push_order, dtype=np.uint64)
    if port_bits == word_bits:
        return w
    if port_bits != 2 * word_bits:
        raise ValueError(f"the core's words are {port_bits} bits, the stream's {word_bits}")
    if w.size % 2:
        w = np.concatenate([w, np.zeros(1, np.uint64)])
    return w[0::2] | (w[1::2] << np.uint64(word_bits))


def port_inputs(core, words_top_first: np.ndarray, word_bits: int) -> np.ndarray:
    """A decoder command's stream words (top of the stack first) as ``i`` payloads: the encoder's port
    words (:func:`port_outputs`), last first. Where the port is two words wide (an rANS decoder whose
    pairs may pop twice, :meth:`~ansforge.hdl.rans.RansDecoderCoderXN.port_words`) the first popped is
    in the high half, and an odd count's first port word has a zero high half above the stream."""
    field = payload_shape(core, "i")["data"]
    w = np.asarray(words_top_first, dtype=np.uint64)[::-1]
    return port_words(w, word_bits, field.width)[::-1] << np.uint64(field.offset)


def port_outputs(core, words_push_order: np.ndarray, word_bits: int) -> np.ndarray:
    """An encoder's stream words (push order) as the ``o`` payloads it gives (:func:`port_words`),
    ``last`` on the final one."""
    shape = payload_shape(core, "o")
    w = port_words(words_push_order, word_bits, shape["data"].width)
    last = np.zeros(w.size, dtype=np.uint64)
    last[-1:] = 1
    return (w << np.uint64(shape["data"].offset)) | (last << np.uint64(shape["last"].offset))


def stream_words(core, outputs, word_bits: int) -> np.ndarray:
    """An encoder's ``o`` payloads back to its stream words (push order): what a host stores. Where the
    port is two words wide, each port word's low half first, and a zero high half of the last one (an
    odd count's: a stream's top word is a state's top word, never 0) dropped."""
    field = payload_shape(core, "o")["data"]
    port = (np.asarray(outputs, dtype=np.uint64) >> np.uint64(field.offset)) & np.uint64((1 << field.width) - 1)
    if field.width != 2 * word_bits:
        return port
    mask = np.uint64((1 << word_bits) - 1)
    w = np.stack([port & mask, port >> np.uint64(word_bits)], axis=1).ravel()
    return w[:-1] if w.size and w[-1] == 0 else w


def command_state(core, cp: Checkpoint | None) -> int:
    """The ``state`` field of a decoder command that resumes at ``cp`` (0 without one). With ``N``
    interleaved states the field holds ``N`` equal parts, the state of the checkpoint's pair ``i`` (lane
    ``i mod N``) in the lowest and the lanes that follow above it (``docs/bitstream.md`` §8)."""
    if cp is None:
        return 0
    lanes = cp.lane_states
    n = len(lanes)
    if n == 1:
        return int(lanes[0])
    part = payload_shape(core, "cmd")["state"].width // n
    return sum(int(lanes[(cp.pair + k) % n]) << (k * part) for k in range(n))


def block_command(core, block: StreamBlock, n_words: int | None = None) -> int:
    """The decoder command for ``block`` (``n_words``: announce another word count, for corruption)."""
    cp = block.resume
    return pack(payload_shape(core, "cmd"), {"count": block.count,
                                             "words": block.words.size if n_words is None else n_words,
                                             "resume": int(cp is not None), "state": command_state(core, cp),
                                             "bit": cp.bit if cp else 0, "check_end": int(block.last),
                                             "check_crc": 1, "crc": block.crc})


def blocks_job(kind: str, spec: Codec, table, core, blocks: list[tuple[StreamBlock, np.ndarray]]) -> CoreJob:
    """A decoder job that runs ``blocks`` back to back, each ``(block, words it is fed)``, with
    ``table`` written through ``cfg`` first if the core is programmable. The expected pairs and
    statuses are left for the caller (they come from the golden decoder of the same stream)."""
    job = CoreJob(kind, core, cfg=cfg_writes(core, [table]))
    job.commands = [block_command(core, b, int(w.size)) for b, w in blocks]
    job.inputs = np.concatenate([port_inputs(core, w, spec.word_bits) for _, w in blocks]) if blocks else \
        np.zeros(0, np.uint64)
    job.pairs = sum(b.count for b, _ in blocks)
    job.words = int(job.inputs.size)
    return job


def unpack_pairs(core, outputs) -> tuple[np.ndarray, np.ndarray]:
    """A decoder's ``o`` payloads as (symbols, extras)."""
    return payloads_to_pairs(payload_shape(core, "o"), outputs)
