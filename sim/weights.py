"""The ``hardware`` weight provider: tensors decompressed by the cycle-simulated decoder cores.

Each coded tensor of an ansforge container is one decoder job: its table written through the
programmable core's ``cfg`` port, then one command per container block (from the block's
checkpoint, the container's own CRC-32 checked in hardware), the words fed top of stack first.
The pairs the core emits — not the golden model's — are joined into the tensor's values through the
tensor's code table and exponent table. A core that reports anything but ``OK`` raises
:class:`HardwareDecodeError` naming the tensor, block and status.

A tensor with a context plan (``ansforge compress --context``, container version 4) writes all of its
table sets through ``cfg`` and feeds the plan's runs ``{set, count}`` on the core's ``sel`` stream,
which switches set without losing a cycle (:class:`~ansforge.hdl.common.TableSelect`); the core then
has ``table_sets`` (a power of two) for the largest plan, and a tensor without a plan is one run of
set 0.

One core is built per container (the codec's, ``max_extra_bits`` and ``max_symbols`` what the widest
table needs, ``table_sets`` what the largest plan needs), so the Verilator engine compiles it once. The decoder takes one table per command, so the container
must hold one stream per tensor (``ansforge compress --stream-per-tensor``; :meth:`from_checkpoint`
writes one).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..hdl.common import DecodeStatus
from ..hdl.cores import core_for
from ..model.coding.container import Container, compress_checkpoint, open_container
from ..model.errors import AnsforgeError, ConfigError
from ..model.llm.llama import stored_from_bits
from .jobs import blocks_job, build_core, cfg_writes, stream_blocks, unpack_pairs
from .streams import pack, payload_shape
from .model_run import engine_by_name

__all__ = ["HardwareWeights", "HardwareDecodeError"]


class HardwareDecodeError(AnsforgeError):
    """A simulated decoder core reported an error status on a container's stream."""


class HardwareWeights:
    """Tensors of ``container`` as the simulated decoder core of its codec outputs them.

    Attributes
    ----------
    pairs, cycles : int
        Coding pairs decoded and clock cycles spent, over every tensor fetched so far.
    seconds : float
        Wall time inside the simulation engine.
    """

    name = "hardware"

    def __init__(self, container: Container | str | Path, engine: str = "verilator", *, stall_prob: float = 0.0,
                 seed: int = 0) -> None:
        self.container = container if isinstance(container, Container) else open_container(container)
        self.engine_name = engine
        self.engine = engine_by_name(engine)
        self.stall_prob = stall_prob
        self.seed = seed
        self.pairs = self.cycles = 0
        self.seconds = 0.0
        streams = self.container.streams
        for st in streams:
            # before the layout checks: no layout helps a core decode states it was not built for
            core_for(st.spec, "decoder")
            planned = [self.container.tensors[ti]["name"] for ti in st.tensors
                       if self.container.tensors[ti].get("_plan") is not None]
            if st.spec.states > 1 and planned:
                # only a real plan: a stream's several tables may as well be several tensors or row shifts,
                # which the checks below name
                raise ConfigError(f"{self.container.path}: tensor {planned[0]!r} (stream {st.index}, "
                                  f"{st.spec.name}) is coded with a context plan; the decoder core takes table "
                                  "sets with one state only (compress with a single-state codec for context "
                                  "tables in hardware)")
            if len(st.tensors) > 1:
                raise ConfigError(f"{self.container.path}: stream {st.index} holds {len(st.tensors)} tensors; a "
                                  "decoder core takes one table per command, so hardware decoding needs one stream "
                                  "per tensor (ansforge compress --stream-per-tensor)")
            shifted = [self.container.tensors[ti]["name"] for ti in st.tensors
                       if "row_shifts" in self.container.tensors[ti]]
            if shifted:
                # The decoder cores read one additional-data width per table; a row-shifted tensor's rows
                # carry narrower fields that the software decoder shifts back, which no core does yet.
                raise ConfigError(f"{self.container.path}: tensor {shifted[0]!r} is coded with row_shifts "
                                  "(container version 3), which the hardware decoders do not restore; compress "
                                  "with --stream-per-tensor (row shifts off) for the hardware path")
        specs = {st.spec.name for st in streams}
        if len(specs) > 1:
            raise ConfigError(f"{self.container.path}: streams use several codecs ({', '.join(sorted(specs))})")
        self._core = None
        if streams:
            spec = streams[0].spec
            self.kind = f"{spec.kind}-decoder"
            k = max([8] + [int(t.extra_bits.max()) for st in streams for t in st.tables])
            symbols = max([64] + [len(t.code_table.freqs) for st in streams for t in st.tables])
            sets = max([1] + [len(st.tables) for st in streams])
            self.table_sets = 1 if sets == 1 else 1 << (sets - 1).bit_length()
            self._core = build_core(self.kind, spec, streams[0].tables[0] if streams[0].tables else None,
                                    programmable=True, max_extra_bits=k,
                                    max_symbols=1 << (symbols - 1).bit_length(), table_sets=self.table_sets)

    @classmethod
    def from_checkpoint(cls, model: str | Path, out: str | Path, codec: str = "tans8", pairs: str = "auto",
                        engine: str = "verilator", **kw) -> "HardwareWeights":
        """Compress ``model`` into container ``out`` (one stream per tensor), then read it back in hardware."""
        compress_checkpoint(model, out, codec, pairs=pairs, group="tensor")
        return cls(out, engine, **kw)

    @property
    def pairs_per_second(self) -> float:
        return self.pairs / self.seconds if self.seconds else 0.0

    def tensor(self, name: str) -> tuple[np.ndarray, str]:
        rec = self.container.record(name)
        if rec["coding"] != "pairs":
            raise ConfigError(f"{self.container.path}: tensor {name!r} is stored raw ({rec['dtype']}), "
                              "not as float coding pairs")
        st = self.container.streams[int(rec["stream"])]
        table = st.tables[0]
        words = self.container.stream_words(st)
        blocks = stream_blocks(words, st.checkpoints, st.n_pairs, word_bits=st.spec.word_bits,
                               crcs=[crc for _, _, crc in st.blocks])
        job = blocks_job(self.kind, st.spec, table, self._core, [(b, b.words) for b in blocks])
        if self.table_sets > 1:
            # Every set of the tensor's plan (or its one table as set 0), and the stream's runs as
            # the select stream: they span the commands, as the core's select does.
            job.cfg = cfg_writes(self._core, st.tables)
            sel = payload_shape(self._core, "sel")
            job.side = {"sel": [pack(sel, {"set": r.table, "count": r.count}) for r in st.runs if r.count]}
        t0 = time.perf_counter()
        res = self.engine.run(job, stall_prob=self.stall_prob, seed=self.seed)
        self.seconds += time.perf_counter() - t0
        self.pairs += job.pairs
        self.cycles += res.cycles
        for b, status in enumerate(res.statuses):
            if status != DecodeStatus.OK.value:
                raise HardwareDecodeError(
                    f"{self.container.path}: tensor {name!r} block {b}: the {self.kind} core reported "
                    f"{DecodeStatus(status).name}")
        if len(res.outputs) != job.pairs:
            raise HardwareDecodeError(f"{self.container.path}: tensor {name!r}: the {self.kind} core gave "
                                      f"{len(res.outputs)} pairs, the stream holds {job.pairs}")
        symbols, extras = unpack_pairs(self._core, res.outputs)
        bits = self.container.join(rec, symbols, extras)
        return stored_from_bits(bits.reshape(rec["shape"]), rec["dtype"]), rec["dtype"]
