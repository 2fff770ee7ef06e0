"""The tANS decoders' state updates (combinational): the next state index from a table entry and the
pair's field bits, ``base | bits`` (``base`` has ``nb`` zero low bits, so an OR and no adder).

* :class:`TansStateUpdate`: the one-state decoder's, selecting the ``nb`` state bits by ``need``.
* :class:`TansTailUpdate`: the two- and ``N``-state decoders', on the ``R`` bits that end at the
  pair's field end (a mask and an OR).
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .shape import thermometer

__all__ = ["TansStateUpdate", "TansTailUpdate"]


class TansStateUpdate(wiring.Component):
    """The decoder's next state: ``base | v``, where ``v`` is the low ``nb`` bits of the pair's
    ``need``-bit field (combinational).

    ``base = (x_s << nb) - L`` has ``nb`` zero low bits (``docs/bitstream.md``), so an OR joins the
    two parts and no carry chain sits in the loop. ``v`` is selected from the ``F``-bit field by
    ``need`` (the pair's field ends ``need`` bits into it) and masked by ``nb``: the loop's logic
    after the table read.

    Ports
    -----
    field : In(F)
        The next ``F`` stream bits, the next bit at the top.
    need, nb, base : In
        The state's table entry: bits the pair reads, state bits among them, the next-state base.
    next : Out(R)
        The next state index.
    """

    def __init__(self, table_log: int, field_bits: int):
        self._R, self._F = table_log, field_bits
        super().__init__({"field": In(field_bits), "need": In(range(field_bits + 1)),
                          "nb": In(range(table_log + 1)), "base": In(table_log), "next": Out(table_log)})

    def elaborate(self, platform):
        R, F = self._R, self._F
        m = Module()
        v = (self.field << self.need)[F:F + R] & thermometer(self.nb, R)
        m.d.comb += self.next.eq(self.base | v)
        return m

class TansTailUpdate(wiring.Component):
    """The two-state decoder's next state: ``base | (tail & mask(nb))`` (combinational).

    ``tail`` holds the bits that end at the pair's field end, so the state bits are its low ``nb``
    bits: a mask and an OR (``base`` has ``nb`` zero low bits), no select by ``need`` and no adder.

    Ports
    -----
    tail : In(R)
        The ``R`` stream bits that end at the pair's field end (the last bit at bit 0).
    nb, base : In
        The state's table entry: next-state bit count and base.
    next : Out(R)
        The next state index.
    """

    def __init__(self, table_log: int):
        self._R = table_log
        super().__init__({"tail": In(table_log), "nb": In(range(table_log + 1)), "base": In(table_log),
                          "next": Out(table_log)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.next.eq(self.base | (self.tail & thermometer(self.nb, self._R)))
        return m
