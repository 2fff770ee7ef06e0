"""The coders' table memories: the symbol table ``{freq, cum, k}`` (and the interleaved encoder's
reciprocal fields) and the decoder's bucket table, LUT-RAM read combinationally, with the ``cfg``
write port of a programmable core.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .shape import RansShape


class RansTables(wiring.Component):
    """The symbol table (and, with ``buckets``, the decoder's bucket table) of a coder.

    Ports: ``symbol_addr`` (``set · slots + symbol``, :attr:`RansShape.symbol_bits` + ``set_bits``
    bits) and ``symbol`` (an entry of ``shape.entry``), read in the same clock (LUT-RAM, no register);
    with ``buckets``, ``bucket_addr`` (``set · 2**B + index``) and ``bucket`` (``shape.bucket``)
    likewise; with a programmable shape, ``cfg`` (:meth:`RansShape.cfg_port`, always ready): a write
    takes effect at the next clock. The contents at reset are the shape's baked or initial tables.
    """

    def __init__(self, shape: RansShape, *, buckets: bool):
        self._shape, self._buckets = shape, buckets
        sh = shape
        members = {"symbol_addr": In(sh.symbol_bits + sh.set_bits), "symbol": Out(sh.entry)}
        if buckets:
            members |= {"bucket_addr": In(sh.B + sh.set_bits), "bucket": Out(sh.bucket)}
        if sh.programmable:
            members["cfg"] = sh.cfg_port()
        super().__init__(members)

    def elaborate(self, platform):
        sh = self._shape
        m = Module()
        m.submodules.symbols = sym = Memory(shape=sh.entry, depth=sh.slots * sh.sets, init=sh.symbol_init())
        rd = sym.read_port(domain="comb")
        m.d.comb += [rd.addr.eq(self.symbol_addr), self.symbol.eq(rd.data)]
        if self._buckets:
            m.submodules.buckets = bkt = Memory(shape=sh.bucket, depth=(1 << sh.B) * sh.sets, init=sh.bucket_init())
            rb = bkt.read_port(domain="comb")
            m.d.comb += [rb.addr.eq(self.bucket_addr), self.bucket.eq(rb.data)]
        if sh.programmable:
            cfg, ib = self.cfg, sh.index_bits
            is_bucket = cfg.p.addr[ib]
            wr = sym.write_port()
            m.d.comb += [cfg.ready.eq(1), wr.data.eq(cfg.p.data[:sh.entry.size]),
                         wr.addr.eq(Cat(cfg.p.addr[:sh.symbol_bits], cfg.p.addr[ib + 1:])),
                         wr.en.eq(cfg.valid & ~is_bucket)]
            if self._buckets:
                wb = bkt.write_port()
                m.d.comb += [wb.data.eq(cfg.p.data[:sh.bucket.size]),
                             wb.addr.eq(Cat(cfg.p.addr[:sh.B], cfg.p.addr[ib + 1:])),
                             wb.en.eq(cfg.valid & is_bucket)]
        return m


def table_address(index, table_set=None):
    """A table read address: ``index`` in the table set ``table_set`` (none: the only set)."""
    return index if table_set is None else Cat(index, table_set)
