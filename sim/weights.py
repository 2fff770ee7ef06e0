"""The ``hardware`` weight provider: tensors decompressed by the cycle-simulated decoder cores.

The default container (``ansforge compress`` with no options: version 6, the **blocks** layout,
``tans8x16``) is decoded as the cores are meant to take it: each coded tensor is one decoder job, its
tables written through the programmable core's ``cfg`` port, then **one command per independent
block** (``resume`` = 0: the block is a complete ``docs/bitstream.md`` §8 stream with its own flush and
head, its words fed top of stack first, the container's CRC-32 of the block checked in hardware). The
core is the registry's decoder of the container's codec (:func:`~ansforge.hdl.cores.core_for`): the
interleaved ``TansXnDecoder`` at ``N = 16`` for the default container.

A tensor with several tables (the row-shift variants of a **row-shifted** tensor, which the blocks
layout enables by default, or a context plan's table sets, ``--context``) has every one of them written
through ``cfg`` as a table set and the block's runs ``{set, count}`` fed on the core's ``sel`` stream,
which switches set without losing a cycle; the core then has ``table_sets`` (a power of two) for the
tensor with the most tables. A row-shifted pair's additional data comes out of the core as coded (its
row's zero bits left out); the rows' shifts are restored when the pairs are joined into values
(:meth:`~ansforge.model.coding.container.Container.join`, as the golden decoder does), so no row shift is
refused.

The pairs the core emits — not the golden model's — are joined into the tensor's values through the
tensor's code table and exponent table. A core that reports anything but ``OK`` raises
:class:`HardwareDecodeError` naming the tensor, block and status.

Containers of the older layouts (versions 2 to 5) decode as before: one command per CRC block, from
the block's checkpoint; their decoder takes one table per command, so such a container must hold one
stream per tensor (``--layout tensor``) without row shifts.

One core is built per container (the codec's, ``max_extra_bits`` and ``max_symbols`` what the widest
table needs, ``table_sets`` what the tensor with the most tables needs), so the Verilator engine
compiles it once.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..hdl.common import DecodeStatus
from ..hdl.cores import core_for
from ..model.coding.container import DEFAULT_CODEC, Container, compress_checkpoint, open_container
from ..model.errors import AnsforgeError, ConfigError
from ..model.llm.llama import stored_from_bits
from .jobs import StreamBlock, blocks_job, build_core, cfg_writes, stream_blocks, unpack_pairs
from .streams import pack, payload_shape
from .model_run import engine_by_name

__all__ = ["HardwareWeights", "HardwareDecodeError"]


class HardwareDecodeError(AnsforgeError):
    """A simulated decoder core reported an error status on a container's stream."""


class HardwareWeights:
    """Tensors of ``container`` as the simulated decoder core of its codec outputs them.

    Attributes
    ----------
    pairs, cycles, commands : int
        Coding pairs decoded, clock cycles spent and core commands (blocks) run, over every tensor
        fetched so far.
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
        self.pairs = self.cycles = self.commands = 0
        self.seconds = 0.0
        streams = self.container.streams
        for st in streams:
            # before the layout checks: no layout helps a core decode states it was not built for
            core_for(st.spec, "decoder")
            if not st.block_pairs:
                self._check_one_stack(st)
        specs = {st.spec.name for st in streams}
        if len(specs) > 1:
            raise ConfigError(f"{self.container.path}: streams use several codecs ({', '.join(sorted(specs))})")
        self._core = None
        if streams:
            spec = streams[0].spec
            self.kind = f"{spec.kind}-decoder"
            k = max([8] + [int(t.extra_bits.max()) for st in streams for t in st.tables])
            symbols = max([64] + [len(t.code_table.freqs) for st in streams for t in st.tables])
            # a blocks-layout stream holds every tensor's tables; a command takes its tensor's
            sets = max([1] + [hi - lo for st in streams if st.block_pairs for lo, hi in st.tensor_tables.values()]
                       + [len(st.tables) for st in streams if not st.block_pairs])
            self.table_sets = 1 if sets == 1 else 1 << (sets - 1).bit_length()
            self._core = build_core(self.kind, spec, streams[0].tables[0] if streams[0].tables else None,
                                    programmable=True, max_extra_bits=k,
                                    max_symbols=1 << (symbols - 1).bit_length(), table_sets=self.table_sets)

    def _check_one_stack(self, st) -> None:
        """What a decoder core needs of a stream of the older layouts (versions 2 to 5): one tensor, no
        row shifts, and a context plan only where the core takes table sets with it."""
        c = self.container
        if len(st.tensors) > 1:
            raise ConfigError(f"{c.path}: stream {st.index} holds {len(st.tensors)} tensors; a decoder core takes "
                              "one table per command, so a container of the model layout needs one stream per "
                              "tensor (compress with the default blocks layout, or --stream-per-tensor)")
        shifted = [c.tensors[ti]["name"] for ti in st.tensors if "row_shifts" in c.tensors[ti]]
        if shifted:
            # A one-stack stream switches tables on row boundaries inside one command, which the select
            # stream does; but such a stream always holds several tensors (row shifts are off with
            # --stream-per-tensor), refused above, so this names a crafted or older file.
            raise ConfigError(f"{c.path}: tensor {shifted[0]!r} is coded with row_shifts (container version 3) "
                              "in a one-stack stream, which the hardware decoders do not take; compress with the "
                              "default blocks layout (or --stream-per-tensor, row shifts off)")

    @classmethod
    def from_checkpoint(cls, model: str | Path, out: str | Path, codec: str = DEFAULT_CODEC, pairs: str = "auto",
                        engine: str = "verilator", *, block_pairs: int | None = None, **kw) -> "HardwareWeights":
        """Compress ``model`` into container ``out`` as ``ansforge compress`` does (the blocks layout;
        ``block_pairs``: at most that many pairs a block, default the container's), then read it back in
        hardware."""
        opts = {} if block_pairs is None else {"block_pairs": block_pairs}
        compress_checkpoint(model, out, codec, pairs=pairs, **opts)
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
        if st.block_pairs:
            return self._blocks_tensor(name, rec, st)
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
        return self._finish(name, rec, job, blocks=list(range(len(blocks))))

    def _blocks_tensor(self, name: str, rec: dict, st) -> tuple[np.ndarray, str]:
        """A tensor of a version-6 stream: one command per independent block (``resume`` = 0, the block's
        pairs, words and CRC), its tensor's tables as the core's table sets, the blocks' runs on ``sel``."""
        c = self.container
        ti = next(i for i, r in enumerate(c.tensors) if r is rec)
        which = [b for b, blk in enumerate(st.spans) if blk.tensor == ti]
        t_lo, t_hi = st.tensor_tables[ti]
        tables = st.tables[t_lo:t_hi]
        blocks, runs = [], []
        for b in which:
            blk = st.spans[b]
            words = np.asarray(c.block_words(st, b))
            blocks.append(StreamBlock(blk.pair, blk.count, None, words[::-1].astype(np.uint64), int(blk.crc), True))
            runs += c.block_tables(st, b)[1]
        job = blocks_job(self.kind, st.spec, tables[0], self._core, [(b, b.words) for b in blocks])
        job.cfg = cfg_writes(self._core, tables)
        if self.table_sets > 1:
            sel = payload_shape(self._core, "sel")
            job.side = {"sel": [pack(sel, {"set": r.table, "count": r.count}) for r in runs if r.count]}
        return self._finish(name, rec, job, blocks=which)

    def _finish(self, name: str, rec: dict, job, blocks: list[int]) -> tuple[np.ndarray, str]:
        """Run ``job`` (the tensor's commands, one per block of ``blocks``), check every status and the
        pair count, and join the core's pairs into the tensor's values (row shifts restored)."""
        t0 = time.perf_counter()
        res = self.engine.run(job, stall_prob=self.stall_prob, seed=self.seed)
        self.seconds += time.perf_counter() - t0
        self.pairs += job.pairs
        self.cycles += res.cycles
        self.commands += len(job.commands)
        for b, status in zip(blocks, res.statuses):
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
