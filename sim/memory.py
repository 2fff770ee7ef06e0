"""A shared memory port for simulation: latency, bandwidth and a request/response protocol (Fig. 12).

:class:`SharedMemory` models the memory a group of decompressors shares: a DRAM controller or an
on-chip buffer behind one port. It is an Amaranth component, so that it runs unchanged in both
simulation engines next to the cores it serves, and it is synthesizable (a block RAM with a delay
line), but it is a *model*: the numbers that matter are its parameters.

* ``beat_bits``: the port width; one request reads one beat.
* ``latency``: clocks from an accepted request to its response (``>= 1``).
* ``interval``: clocks between accepted requests (``1`` = a beat per clock; ``2`` halves the
  bandwidth).

Responses come in request order and are never held back (``rsp.ready`` is ignored): the
requester must reserve room before it asks, as :class:`ansforge.hdl.parallel.ParallelDecoder`
does. The contents are written through ``mem_cfg`` before the run (the simulation engines send
every ``*cfg`` stream first).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..hdl.common import bits_for, check_int

__all__ = ["SharedMemory"]


class SharedMemory(wiring.Component):
    """``depth`` beats of ``beat_bits``; ``req {addr, tag}`` → ``rsp {data, tag}`` after ``latency`` clocks."""

    def __init__(self, *, depth: int, beat_bits: int, addr_bits: int, tag_bits: int, latency: int = 1,
                 interval: int = 1):
        self._depth = check_int("depth", depth, 1, 1 << 24)
        self._beat = check_int("beat_bits", beat_bits, 1, 1024)
        self._a = check_int("addr_bits", addr_bits, 1, 32)
        self._latency = check_int("latency", latency, 1, 1024)
        self._interval = check_int("interval", interval, 1, 1024)
        super().__init__({
            "mem_cfg": In(stream.Signature(data.StructLayout({"addr": self._a, "data": beat_bits}))),
            "req": In(stream.Signature(data.StructLayout({"addr": self._a, "tag": tag_bits}))),
            "rsp": Out(stream.Signature(data.StructLayout({"data": beat_bits, "tag": tag_bits}))),
        })

    latency = property(lambda self: self._latency)
    interval = property(lambda self: self._interval)
    depth = property(lambda self: self._depth)

    def elaborate(self, platform):
        m = Module()
        m.submodules.storage = mem = Memory(shape=self._beat, depth=self._depth, init=[])
        wr = mem.write_port()
        rd = mem.read_port()          # registered: the response's last clock of latency
        m.d.comb += [wr.addr.eq(self.mem_cfg.p.addr), wr.data.eq(self.mem_cfg.p.data),
                     wr.en.eq(self.mem_cfg.valid), self.mem_cfg.ready.eq(1)]

        cool = Signal(bits_for(self._interval - 1))
        fire = self.req.valid & self.req.ready
        m.d.comb += self.req.ready.eq(cool == 0)
        with m.If(fire):
            m.d.sync += cool.eq(self._interval - 1)
        with m.Elif(cool != 0):
            m.d.sync += cool.eq(cool - 1)

        # delay line of latency - 1 stages, then the registered read
        valid, addr, tag = fire, self.req.p.addr, self.req.p.tag
        for stage in range(self._latency - 1):
            v, a, t = Signal(name=f"v{stage}"), Signal(self._a, name=f"a{stage}"), Signal(len(tag), name=f"t{stage}")
            m.d.sync += [v.eq(valid), a.eq(addr), t.eq(tag)]
            valid, addr, tag = v, a, t
        m.d.comb += [rd.addr.eq(addr), rd.en.eq(1)]
        m.d.sync += [self.rsp.valid.eq(valid), self.rsp.p.tag.eq(tag)]
        m.d.comb += self.rsp.p.data.eq(rd.data)
        return m
