"""The token factory of Fig. 13 in simulation: one decoder, a broadcaster, ``N`` processor models.

:class:`ProcessorModel` stands for an LLM processor's weight port: after ``skew`` clocks it takes a
weight in a clock with probability ``accept / 256`` (a 16-bit LFSR of its own seed decides: jitter),
and folds every weight it takes into a CRC-32 and a count. :class:`TokenFactory` is the simulated
top: a programmable decoder core, :class:`~ansforge.hdl.broadcast.WeightBroadcaster`, and ``N``
processors whose skew/jitter/seed are written through ``proc_cfg``, so that one Verilator build
serves a whole sweep. When a command ends it reports, per port, ``{crc, count, stalls}`` on ``o``
(``stalls``: clocks in which the broadcaster held the decoder back), then raises ``done``.

:func:`factory_job` builds the job for a tensor; :func:`run_factory` runs it and checks that every
port received exactly the decoder's pair stream (same count, same CRC-32 as the golden pairs).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..hdl.broadcast import WeightBroadcaster
from ..hdl.common import DecodeStatus, WordCrc, bits_for, check_int
from ..model.coding.codecs import Codec
from ..model.errors import AnsforgeError, ConfigError
from ..model.coding.stream import Run
from .jobs import CoreJob, build_core, cfg_writes, code_block
from .streams import pack, payload_shape, unpack

__all__ = ["ProcessorModel", "TokenFactory", "PortSpec", "factory_job", "run_factory", "FactoryRun",
           "BroadcastMismatch", "lfsr_accepts"]

_LFSR_TAPS = 0xB400     # x^16 + x^14 + x^13 + x^11 + 1, Galois form: maximal length


def lfsr_accepts(seed: int, accept: int, cycles: int) -> np.ndarray:
    """The clocks in which a :class:`ProcessorModel` of ``seed``/``accept`` is willing (bool array)."""
    state, out = seed & 0xFFFF or 1, np.zeros(cycles, bool)
    for c in range(cycles):
        out[c] = (state & 0xFF) < accept
        state = (state >> 1) ^ (_LFSR_TAPS if state & 1 else 0)
    return out


class BroadcastMismatch(AnsforgeError):
    """A processor port received another stream than the decoder's."""


@dataclass(frozen=True)
class PortSpec:
    """One processor: ``skew`` clocks late, willing in a clock with probability ``accept / 256``."""

    skew: int = 0
    accept: int = 256
    seed: int = 1

    def __post_init__(self) -> None:
        check_int("skew", self.skew, 0, (1 << 16) - 1)
        check_int("accept", self.accept, 1, 256)
        check_int("seed", self.seed, 1, (1 << 16) - 1)


def _proc_layout() -> data.StructLayout:
    return data.StructLayout({"skew": 16, "accept": 9, "seed": 16})


class ProcessorModel(wiring.Component):
    """A processor's weight port: skew, LFSR jitter, CRC-32 and count of what it received."""

    def __init__(self, payload_bits: int):
        self._bits = check_int("payload_bits", payload_bits, 1, 1024)
        self._crc_bits = -(-payload_bits // 8) * 8
        super().__init__({"i": In(stream.Signature(payload_bits)), "start": In(1),
                          "setup": In(_proc_layout()), "count": Out(32), "crc": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = c = WordCrc(crc.catalog.CRC32_ISO_HDLC, self._crc_bits)
        wait = Signal(16)
        lfsr = Signal(16, init=1)
        fire = self.i.valid & self.i.ready
        m.d.comb += [self.i.ready.eq((wait == 0) & ~self.start & (lfsr[:8] < self.setup.accept)),
                     c.start.eq(self.start), c.valid.eq(fire), c.data.eq(self.i.p), self.crc.eq(c.crc)]
        with m.If(self.start):
            m.d.sync += [wait.eq(self.setup.skew), lfsr.eq(self.setup.seed), self.count.eq(0)]
        with m.Else():
            with m.If(wait != 0):
                m.d.sync += wait.eq(wait - 1)
            with m.Else():
                m.d.sync += lfsr.eq((lfsr >> 1) ^ Mux(lfsr[0], _LFSR_TAPS, 0))
            with m.If(fire):
                m.d.sync += self.count.eq(self.count + 1)
        return m


class TokenFactory(wiring.Component):
    """Decoder → :class:`WeightBroadcaster` → ``ports`` :class:`ProcessorModel` s (see the module docstring).

    Ports: ``proc_cfg`` ``{addr: port, data: {skew, accept, seed}}``, ``cfg`` (the decoder's table),
    ``cmd`` and ``i`` (the decoder's), ``o`` ``{port, crc, count, stalls}``, ``done``, ``status``.
    """

    def __init__(self, spec: Codec, *, ports: int, depth: int, max_extra_bits: int = 8, max_symbols: int = 64):
        self.spec = spec
        self._dec = build_core(f"{spec.kind}-decoder", spec, None, programmable=True, max_symbols=max_symbols,
                               max_extra_bits=max_extra_bits, block_crc=False)
        pair = self._dec.signature.members["o"].signature.members["payload"].shape
        self._bcast = WeightBroadcaster(pair, ports=ports, depth=depth)
        self._n = ports
        d = self._dec.signature.members
        super().__init__({
            "proc_cfg": In(stream.Signature(data.StructLayout({"addr": bits_for(ports - 1), "data": _proc_layout()}))),
            "cfg": d["cfg"], "cmd": d["cmd"], "i": d["i"],
            "o": Out(stream.Signature(data.StructLayout({"port": 8, "crc": 32, "count": 32, "stalls": 32}))),
            "done": Out(1), "status": Out(DecodeStatus)})

    decoder = property(lambda self: self._dec)
    broadcaster = property(lambda self: self._bcast)
    ports = property(lambda self: self._n)

    @property
    def programmable(self) -> bool:
        return True

    def elaborate(self, platform):
        m = Module()
        m.submodules.decoder = dec = self._dec
        m.submodules.broadcaster = bc = self._bcast
        wiring.connect(m, wiring.flipped(self.cfg), dec.cfg)
        wiring.connect(m, wiring.flipped(self.i), dec.i)
        wiring.connect(m, dec.o, bc.i)
        pair_bits = len(dec.o.p.as_value())

        busy, reporting, start = Signal(), Signal(), Signal()
        count = Signal(32)
        stalls = Signal(32)
        port = Signal(8)
        m.d.comb += [dec.cmd.valid.eq(self.cmd.valid & ~busy), dec.cmd.p.eq(self.cmd.p),
                     self.cmd.ready.eq(dec.cmd.ready & ~busy), self.proc_cfg.ready.eq(~busy)]
        procs = []
        for n in range(self._n):
            m.submodules[f"processor{n}"] = p = ProcessorModel(pair_bits)
            setup = Signal(_proc_layout(), name=f"setup{n}")
            with m.If(self.proc_cfg.valid & (self.proc_cfg.p.addr == n)):
                m.d.sync += setup.eq(self.proc_cfg.p.data)
            m.d.comb += [p.setup.eq(setup), p.start.eq(start), p.i.valid.eq(bc.o[n].valid), p.i.p.eq(bc.o[n].p),
                         bc.o[n].ready.eq(p.i.ready)]
            procs.append(p)

        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [busy.eq(1), start.eq(1), count.eq(self.cmd.p.count), stalls.eq(0), self.done.eq(0)]
        with m.Else():
            m.d.sync += start.eq(0)
        with m.If(busy & bc.stall):
            m.d.sync += stalls.eq(stalls + 1)

        # The decoder's ``done`` is high for one clock per command: remember it until the next command.
        dec_done = Signal()
        with m.If(busy & dec.done):
            m.d.sync += dec_done.eq(1)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += dec_done.eq(0)
        finished = Cat(*[p.count == count for p in procs]).all() | (dec.status != DecodeStatus.OK)
        with m.If(busy & ~reporting & ~start & dec_done & finished):
            m.d.sync += [reporting.eq(1), port.eq(0)]
        m.d.comb += [self.o.valid.eq(reporting), self.o.p.port.eq(port), self.o.p.stalls.eq(stalls)]
        for n, p in enumerate(procs):
            with m.If(port == n):
                m.d.comb += [self.o.p.crc.eq(p.crc), self.o.p.count.eq(p.count)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += port.eq(port + 1)
            with m.If(port == self._n - 1):
                m.d.sync += [reporting.eq(0), busy.eq(0), self.done.eq(1), self.status.eq(dec.status)]
        return m


@dataclass
class FactoryRun:
    """What the factory did: pairs per port, clocks (command to ``done``), decoder stall clocks."""

    pairs: int
    ports: int
    cycles: int
    stalls: int

    @property
    def stall_fraction(self) -> float:
        return self.stalls / self.cycles if self.cycles else 0.0


def factory_job(factory: TokenFactory, table, symbols: np.ndarray, extras: np.ndarray,
                ports: list[PortSpec]) -> tuple[CoreJob, int]:
    """The job that decodes one tensor through the factory; returns it and the golden CRC-32 of its
    pair stream (each pair's payload bits, zero-extended to whole bytes, least significant first)."""
    if len(ports) != factory.ports:
        raise ConfigError(f"{len(ports)} port specs for a factory of {factory.ports} ports")
    dec = factory.decoder
    if int(table.extra_bits.max()) > dec.max_extra_bits:
        raise ConfigError(f"the table needs {int(table.extra_bits.max())} bits of additional data, the decoder "
                          f"takes {dec.max_extra_bits}")
    symbols = np.asarray(symbols, dtype=np.int64).ravel()
    extras = np.asarray(extras, dtype=np.uint64).ravel()
    n = int(symbols.size)
    spec = factory.spec
    words = code_block(spec, [table], [Run(0, n)], symbols, extras)
    shape = dec.signature.members["o"].signature.members["payload"].shape
    pairs = (symbols.astype(np.uint64) << np.uint64(shape["symbol"].offset)) | \
        (extras << np.uint64(shape["extra"].offset))
    nbytes = -(-shape.size // 8)
    golden = zlib.crc32(pairs.astype("<u8").view(np.uint8).reshape(-1, 8)[:, :nbytes].tobytes())
    proc_shape = factory.signature.members["proc_cfg"].signature.members["payload"].shape
    job = CoreJob("factory-decoder", factory)
    job.cfg = {"proc_cfg": [pack(proc_shape, {"addr": i, "data": {"skew": p.skew, "accept": p.accept, "seed": p.seed}})
                            for i, p in enumerate(ports)],
               "cfg": cfg_writes(dec, [table]).get("cfg", [])}
    w = np.asarray(words, dtype=np.uint64)
    job.commands = [pack(payload_shape(dec, "cmd"), {"count": n, "words": int(w.size), "check_end": 1})]
    job.inputs = w[::-1].copy()
    job.words = int(w.size)
    job.expected_status = [DecodeStatus.OK.value]
    slowest = min(p.accept for p in ports)
    # the engines bound a run's clocks by ``pairs``: the slowest processor and the skew stretch it
    job.pairs = n * (1 + 256 // slowest) + max(p.skew for p in ports)
    return job, golden



def run_factory(engine, factory: TokenFactory, table, symbols, extras, ports: list[PortSpec], *,
                name: str = "tensor", stall_prob: float = 0.0, seed: int = 0) -> FactoryRun:
    """Run one tensor through the factory; raises :class:`BroadcastMismatch` unless every port got
    exactly the golden pair stream (count and CRC-32)."""
    job, golden = factory_job(factory, table, symbols, extras, ports)
    res = engine.run(job, stall_prob=stall_prob, seed=seed)
    if res.statuses != job.expected_status:
        raise BroadcastMismatch(f"{name}: the decoder reported " + ", ".join(DecodeStatus(s).name for s in res.statuses))
    shape = factory.signature.members["o"].signature.members["payload"].shape
    n = int(np.asarray(symbols).size)
    records = [unpack(shape, int(v)) for v in res.outputs]
    if [r["port"] for r in records] != list(range(factory.ports)):
        raise BroadcastMismatch(f"{name}: the factory reported ports {[r['port'] for r in records]}")
    for r in records:
        if r["count"] != n or r["crc"] != golden:
            raise BroadcastMismatch(f"{name}: port {r['port']} received {r['count']} of {n} pairs, CRC-32 "
                                    f"{r['crc']:#010x}, the decoder's stream has {golden:#010x}")
    return FactoryRun(n, factory.ports, res.cycles, records[0]["stalls"] if records else 0)
