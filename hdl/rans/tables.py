"""The coders' table memories: the symbol table ``{freq, cum, k}`` (and the interleaved encoder's
reciprocal fields) and the decoder's bucket table, LUT-RAM read combinationally, with the ``cfg``
write port of a programmable core.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module
from amaranth.lib import data
from amaranth.lib.memory import Memory

from .shape import RansShape


class RansTables:
    """The symbol table (and the decoder's bucket table) of a coder, with its ``cfg`` write port."""

    def __init__(self, m: Module, sh: RansShape, cfg, *, buckets: bool):
        m.submodules.symbols = self._sym = Memory(shape=sh.entry, depth=sh.slots * sh.sets, init=sh.symbol_init())
        self._sym_rd = self._sym.read_port(domain="comb")
        self._bkt = None
        if buckets:
            m.submodules.buckets = self._bkt = Memory(shape=sh.bucket, depth=(1 << sh.B) * sh.sets,
                                                      init=sh.bucket_init())
            self._bkt_rd = self._bkt.read_port(domain="comb")
        self._sh = sh
        if cfg is not None:
            ib = sh.index_bits
            is_bucket = cfg.p.addr[ib]
            wr = self._sym.write_port()
            m.d.comb += [cfg.ready.eq(1), wr.data.eq(cfg.p.data[:sh.entry.size]),
                         wr.addr.eq(Cat(cfg.p.addr[:sh.symbol_bits], cfg.p.addr[ib + 1:])),
                         wr.en.eq(cfg.valid & ~is_bucket)]
            if buckets:
                wb = self._bkt.write_port()
                m.d.comb += [wb.data.eq(cfg.p.data[:sh.bucket.size]),
                             wb.addr.eq(Cat(cfg.p.addr[:sh.B], cfg.p.addr[ib + 1:])),
                             wb.en.eq(cfg.valid & is_bucket)]

    def symbol(self, m: Module, symbol, table_set=None) -> data.View:
        m.d.comb += self._sym_rd.addr.eq(symbol if table_set is None else Cat(symbol, table_set))
        return self._sym_rd.data

    def bucket(self, m: Module, index, table_set=None) -> data.View:
        m.d.comb += self._bkt_rd.addr.eq(index if table_set is None else Cat(index, table_set))
        return self._bkt_rd.data
