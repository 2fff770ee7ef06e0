"""The rANS cores' widths and table contents: :class:`RansShape` (what every block is built from),
the bucket table's constants (:data:`MAX_BUCKET_BITS`, :data:`BUCKET_SPLITS`, :data:`XN_SPLITS`), the
interleaved encoder's reciprocal fields and the ``cfg`` write sequence :func:`rans_writes`.
"""

from __future__ import annotations

from amaranth.lib import data, stream
from amaranth.lib.wiring import In

from ...model.coding.rans import RansTable
from ..common import COUNT_BITS, bits_for, check_core_table, check_int


#: Widest bucket index of the decoder's bucket table (64 entries: one bank of 64-deep LUT-RAM).
MAX_BUCKET_BITS = 6
#: Splits per bucket: the candidate is exact where a bucket meets at most ``BUCKET_SPLITS + 1`` symbols
#: (otherwise the decoder steps one symbol per clock); nine splits fill 14 RAM64M8 (96 of their 98 bits).
BUCKET_SPLITS = 9
#: Splits per bucket of the interleaved-state decoder (:class:`RansDecoderCoderXN`): exact where a bucket
#: meets at most six symbols (8 RAM64M8 and five compares). Measurements: ``docs/design/rans.md``.
XN_SPLITS = 5


def bucket_bits_for(precision_bits: int) -> int:
    """Bits of ``q`` that index the decoder's bucket table: ``min(P, MAX_BUCKET_BITS)``."""
    return min(precision_bits, MAX_BUCKET_BITS)


def recip_split(P: int) -> tuple[int, int]:
    """The interleaved encoder's split of a symbol's normalising shift ``e`` (0 .. ``P``,
    :meth:`~ansforge.model.coding.rans.RansTable.core_reciprocals`) into ``4 a + b``: ``a =
    min(e // 4, amax)`` shifts the dividend before the reciprocal multiply (a 4-way multiplexer for
    ``P = 16``), ``b`` (0 .. ``bmax``) picks the quotient's bits from the product. Returns ``(amax, bmax)``."""
    amax = max(0, (P - 1) // 4)
    return amax, P - 4 * amax


def recip_entry(P: int, e: int, R: int) -> dict:
    """A symbol entry's reciprocal fields: ``R`` less its leading one (``R`` is in ``[2**P, 2**(P + 1))``)
    and ``e`` as ``a, b`` (:func:`recip_split`); all 0 for an unused symbol."""
    if not R:
        return {"rcp": 0, "sa": 0, "sb": 0}
    amax, _ = recip_split(P)
    a = min(e // 4, amax)
    return {"rcp": R - (1 << P), "sa": a, "sb": e - 4 * a}


class RansShape:
    """The widths an rANS core derives from its codec, and its checked hardware options.

    ``S``, ``W`` and ``P`` come from ``codec.rans`` (validated once, by
    :class:`~ansforge.model.coding.rans.RansParams`, which also enforces ``S >= W + P``); only the
    hardware choices are checked here: ``max_symbols`` (2 to 256 slots), ``max_extra_bits`` (0 to
    32), ``table_sets`` (1 to 16), ``programmable`` and whether ``table`` fits.
    """

    def __init__(self, codec, max_symbols, max_extra_bits, table, programmable, table_sets=1,
                 count_bits=COUNT_BITS, interleaved_decoder=False, reciprocal=False):
        self.codec = codec
        self.count_bits = check_int("count_bits", count_bits, 1, COUNT_BITS)
        self.S = codec.rans.state_bits
        self.W = codec.rans.word_bits
        self.P = codec.rans.precision_bits
        self.sets, self.set_bits, self.max_symbols, self.K = check_core_table(
            table, RansTable, "precision_bits", self.P, table_sets=table_sets, programmable=programmable,
            max_symbols=max_symbols, max_extra_bits=max_extra_bits)
        self.table, self.programmable = table, programmable
        self.symbol_bits = bits_for(self.max_symbols - 1)
        self.slots = 1 << self.symbol_bits          # symbol entries per table set
        self.chunks = -(-self.K // self.P)
        # A pair moves at most one word when it has at most one chunk of k <= W - P bits: after a
        # pop x >= 2**(S - P), so the chunk cannot need another (and, mirrored, after a push the
        # symbol cannot). The paper's cores (K = 8, P = 16, W = 32) are such.
        self.one_word = self.chunks <= 1 and self.K <= self.W - self.P
        # The interleaved-state decoder's bucket entries have :data:`XN_SPLITS` splits (the interleaved
        # encoder keeps the one-state bucket layout: it reads no bucket).
        self.interleaved = bool(interleaved_decoder)
        # The interleaved encoder's entries also hold the frequency's reciprocal and normalising shift
        # (``RansTable.core_reciprocals``), ahead of ``k`` so that ``rans_writes`` knows every offset.
        self.recip = bool(reciprocal)
        amax, bmax = recip_split(self.P)
        self.entry = data.StructLayout({"freq": self.P + 1, "cum": self.P + 1,
                                        **({"rcp": self.P, "sa": bits_for(amax), "sb": bits_for(bmax)}
                                           if self.recip else {}),
                                        "k": bits_for(self.K)})
        self.B = bucket_bits_for(self.P)
        self.off_bits = self.P - self.B
        self.splits = XN_SPLITS if self.interleaved else BUCKET_SPLITS
        self.bucket = data.StructLayout({"base": self.symbol_bits, **{f"split{j}": max(1, self.off_bits)
                                                                      for j in range(self.splits)}})
        self.index_bits = max(self.symbol_bits, self.B)
        self.cfg_data_bits = max(self.entry.size, self.bucket.size)

    def cfg_port(self):
        """The ``cfg`` write stream of a programmable core: ``{addr, data}`` with ``addr = set · 2**(i + 1)
        + bucket · 2**i + index`` (``i`` = :attr:`index_bits`): a symbol entry ``{freq, cum, k}`` or, with
        the ``bucket`` bit, a bucket entry ``{base, split0 .. split8}`` (bits of ``data`` from the least significant)."""
        return In(stream.Signature(data.StructLayout({"addr": self.index_bits + 1 + self.set_bits,
                                                      "data": self.cfg_data_bits})))

    def symbol_init(self) -> list[dict]:
        if self.table is not None:
            rows = self.table.core_entries()
            init = [{"freq": int(r[0]), "cum": int(r[1]), "k": int(r[2])} for r in rows]
        else:
            init = []
        init += [{"freq": 0, "cum": 1 << self.P, "k": 0}] * (self.slots - len(init))
        if self.recip:
            rec = self.table.core_reciprocals().tolist() if self.table is not None else []
            rec += [(0, 0)] * (self.slots - len(rec))
            init = [{**e, **recip_entry(self.P, *r)} for e, r in zip(init, rec)]
        return init * self.sets

    def bucket_init(self) -> list[dict]:
        if self.table is not None:
            init = [{"base": int(r[0]), **{f"split{j}": int(v) for j, v in enumerate(r[1:])}}
                    for r in self.table.core_buckets(self.B, self.splits)]
        else:
            none = (1 << self.off_bits) - 1
            init = [{"base": 0, **{f"split{j}": none for j in range(self.splits)}}] * (1 << self.B)
        return init * self.sets


def rans_writes(table: RansTable, max_symbols: int, table_set: int = 0, interleaved: bool = False,
                reciprocal: bool = False) -> list[dict]:
    """The ``cfg`` write sequence for ``table`` in a core of ``max_symbols`` slots, as table set
    ``table_set``: every symbol entry ``{freq, cum, k}`` (unused slots get ``cum = 2**P``, ``freq = 0``:
    they never match), then every bucket entry of the decoder's bucket table (an encoder ignores
    those) of :data:`BUCKET_SPLITS` splits. ``interleaved``: the buckets of :class:`RansDecoderCoderXN`,
    of :data:`XN_SPLITS` splits. ``reciprocal``: the layout of :class:`RansEncoderXnCoder`, entries
    ``{freq, cum, rcp, sa, sb, k}`` (:func:`recip_entry`)."""
    P = table.params.precision_bits
    sb, B = bits_for(max_symbols - 1), bucket_bits_for(P)
    ib = max(sb, B)
    base = table_set << (ib + 1)
    rows = [tuple(int(v) for v in r) for r in table.core_entries()]
    rows += [(0, 1 << P, 0)] * (max_symbols - len(rows))
    splits = XN_SPLITS if interleaved else BUCKET_SPLITS
    if reciprocal:
        amax, bmax = recip_split(P)
        rec = table.core_reciprocals().tolist()
        rec += [(0, 0)] * (max_symbols - len(rec))
        sa_at = 3 * P + 2                        # the entry's fields after freq, cum (P + 1 each), rcp (P)
        sb_at = sa_at + bits_for(amax)
        k_at = sb_at + bits_for(bmax)
        out = []
        for s, ((f, c, k), (e, R)) in enumerate(zip(rows, rec)):
            r = recip_entry(P, e, R)
            out.append({"addr": base + s, "data": f | (c << (P + 1)) | (r["rcp"] << (2 * P + 2)) | (r["sa"] << sa_at)
                        | (r["sb"] << sb_at) | (k << k_at)})
    else:
        out = [{"addr": base + s, "data": f | (c << (P + 1)) | (k << (2 * P + 2))} for s, (f, c, k) in enumerate(rows)]
    ob = max(1, P - B)
    out += [{"addr": base + (1 << ib) + b, "data": sum(int(v) << (sb + ob * j) for j, v in enumerate(r[1:])) | int(r[0])}
            for b, r in enumerate(table.core_buckets(B, splits))]
    return out
