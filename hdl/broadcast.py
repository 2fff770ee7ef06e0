"""The token factory's weight broadcaster (paper §4.7, Fig. 13).

One decompressor feeds ``N`` LLM processors that run the same model in lockstep on different
queries, so they need the same weights at the same time. :class:`WeightBroadcaster` writes every
weight it accepts into ``N`` skew FIFOs, one per processor port; a processor that is briefly late
(clock-domain jitter, a different chip, a pipeline hiccup) drains its FIFO later, and the
decompressor stops only when some FIFO is full. Every port receives the identical stream: a weight
enters all FIFOs in the same clock or none.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .common import check_int

__all__ = ["WeightBroadcaster"]


class WeightBroadcaster(wiring.Component):
    """One stream in, ``ports`` identical streams out, each through a ``depth``-entry skew FIFO.

    Parameters
    ----------
    shape : shape-castable
        The payload (a weight, a coding pair, a row of pairs).
    ports : int
        ``N``, the processors: 1..64.
    depth : int
        Entries of each skew FIFO, 1..65536: the skew a port may fall behind the fastest port
        without stalling the decompressor.

    Ports
    -----
    i : In(stream)   from the decompressor; ``ready`` only when every FIFO has room
    o : Out(stream) array of ``N``  to the processors
    stall : Out(1)  the decompressor offers a weight that cannot be taken this clock

    The FIFOs are ``SyncFIFO`` s (LUTRAM, read in the same clock): a weight is on a port one clock after
    it is accepted, and a depth of 2 or more streams one weight per clock (a one-entry FIFO cannot be
    written while full, even in the clock it is read, so it passes a weight every other clock).
    """

    def __init__(self, shape, *, ports: int, depth: int = 16):
        self._n = check_int("ports", ports, 1, 64)
        self._depth = check_int("depth", depth, 1, 1 << 16)
        self._shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape)).array(self._n),
                          "stall": Out(1)})

    ports = property(lambda self: self._n)
    depth = property(lambda self: self._depth)

    def elaborate(self, platform):
        m = Module()
        width = len(self.i.p.as_value()) if hasattr(self.i.p, "as_value") else len(self.i.p)
        room = []
        for n in range(self._n):
            m.submodules[f"skew{n}"] = q = fifo.SyncFIFO(width=width, depth=self._depth)
            m.d.comb += [q.w_data.eq(self.i.p), q.w_en.eq(self.i.valid & self.i.ready),
                         self.o[n].valid.eq(q.r_rdy), self.o[n].p.eq(q.r_data), q.r_en.eq(self.o[n].ready)]
            room.append(q.w_rdy)
        m.d.comb += [self.i.ready.eq(Cat(*room).all()), self.stall.eq(self.i.valid & ~self.i.ready)]
        return m
