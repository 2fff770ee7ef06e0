"""The coding-pair interfaces of §4.3 (Figs. 9–11): pairs to and from float and fixed-point numbers.

Four cores, one value per clock each, between a decompressor/compressor core and a processor:

=================  ==========================  ==========================================
core               in → out                    LUT (programmable through ``cfg``)
=================  ==========================  ==========================================
``PairToFloat``    pair → float bits           per code: exponent, mantissa alignment,
                                               direct value (Fig. 11), saturation
``PairToFixed``    pair → fixed-point word     per code: shift, direct value, saturation
``FloatToPair``    float bits → pair           per exponent field: code, mantissa width
``FixedToPair``    fixed-point word → pair     per leading-one position: code, width
=================  ==========================  ==========================================

Each LUT is a :class:`~amaranth.lib.memory.Memory` with asynchronous (``comb``) read ports: a few
dozen entries of a few dozen bits, LUTRAM on an FPGA, read in the same cycle as the value arrives
so that the core is a single pipeline stage (latency 1 clock, full throughput, the output register
is the only state). The tables and the exact arithmetic, saturation and rounding are those of
:mod:`ansforge.model.dtypes.interfaces`, whose table objects also produce the ``cfg`` writes.

Pairs use the decoder/encoder cores' layout (:func:`~.common.pair_layout`, ``symbol`` = the code),
so that ``wiring.connect(m, decoder.o, pair_to_float.i)`` needs no glue when the decoder's symbols
are the format's codes (a code table without an escape symbol).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..model.dtypes.interfaces import (FixedFormat, FixedToPairTable, FloatToPairTable, PairToFixedTable,
                                PairToFloatTable, float_format)
from .common import bits_for, check_int, pair_layout

__all__ = ["PairToFloat", "PairToFixed", "FloatToPair", "FixedToPair"]


def _pipeline(m: Module, i, o, result) -> None:
    """One register stage: ``o`` takes ``result`` when ``i`` transfers; ``i`` waits only on a full ``o``."""
    m.d.comb += i.ready.eq(~o.valid | o.ready)
    with m.If(i.valid & i.ready):
        m.d.sync += [o.valid.eq(1), o.p.eq(result)]
    with m.Elif(o.ready):
        m.d.sync += o.valid.eq(0)


def _lut(m: Module, name: str, layout, depth: int, init, cfg, n_reads: int):
    """A LUT written through ``cfg`` (always ready), with ``n_reads`` same-cycle read ports."""
    m.submodules[name] = mem = Memory(shape=layout, depth=depth, init=init)
    wr = mem.write_port()
    m.d.comb += [wr.addr.eq(cfg.p.addr), wr.data.eq(cfg.p.data), wr.en.eq(cfg.valid), cfg.ready.eq(1)]
    return [mem.read_port(domain="comb") for _ in range(n_reads)]


def _init(layout, table, depth: int) -> list:
    if table is None:
        return []
    return [dict(e) for e in table.entries]


def _significand(m: Module, extra, entry, k: int):
    """(sign, significand): the sign bit of the additional data replaced by the hidden bit."""
    onehot = Signal(k)
    sign = Signal()
    sig = Signal(k)
    m.d.comb += [onehot.eq(Const(1, 1) << entry.sign_bit), sign.eq(extra.bit_select(entry.sign_bit, 1) & entry.signed),
                 sig.eq((extra & ~onehot) | Mux(entry.hidden, onehot, 0))]
    return sign, sig


class _InterfaceCore(wiring.Component):
    """Read-only elaboration parameters every interface core has, and their checks."""

    def _check_parameters(self, table, cls, max_codes, max_extra_bits, mismatch: str = "") -> None:
        self._max_codes = check_int("max_codes", max_codes, 1, 4096)
        self._k = check_int("max_extra_bits", max_extra_bits, 1, 32)
        self._code_bits = bits_for(self._max_codes - 1)
        if table is None:
            return
        if not isinstance(table, cls):
            raise TypeError(f"table must be a {cls.__name__}, not {table!r}")
        if len(table.format) > self._max_codes:
            raise ValueError(f"table has {len(table.format)} codes, more than max_codes = {self._max_codes}")
        widest = getattr(table, "max_extra_bits", None) or int(table.format.extra_bits.max())
        if widest > self._k:
            raise ValueError(f"table needs max_extra_bits = {widest}, the core has {self._k}")
        if mismatch:
            raise ValueError(mismatch)

    @property
    def max_codes(self) -> int:
        return self._max_codes

    @property
    def max_extra_bits(self) -> int:
        return self._k


class PairToFloat(_InterfaceCore):
    """Coding pairs to floats (Fig. 9a), with the direct-value bypass of Fig. 11.

    Parameters
    ----------
    target : str
        Output format: ``"bf16"``, ``"fp16"`` or ``"fp32"``.
    max_codes : int
        LUT depth, 1..4096 (the paper's cores: 64).
    max_extra_bits : int
        Widest additional data, 1..32.
    table : PairToFloatTable or None
        LUT contents at reset; it is rewritten through ``cfg`` at run time either way.

    Ports
    -----
    i : In(stream)  ``{symbol: code, extra}``
    o : Out(stream) target bit pattern (16 or 32 bits)
    cfg : In(stream) ``{addr, data}``: one LUT entry (:class:`~ansforge.model.dtypes.interfaces.PairToFloatTable`)

    Per pair: one LUT read, one barrel shift of ``max_extra_bits + M`` bits (mantissa padding,
    truncation or the gradual-underflow shift) and the direct/float multiplexer. Latency 1.
    """

    def __init__(self, *, target: str = "bf16", max_codes: int = 64, max_extra_bits: int = 8,
                 table: PairToFloatTable | None = None):
        self._target = float_format(target)
        t = self._target
        self._check_parameters(table, PairToFloatTable, max_codes, max_extra_bits,
                               "" if table is None or table.target == t else
                               f"table targets {table.target.name}, the core {t.name}")
        self._max_shift = self._k + t.mantissa_bits
        self._entry = data.StructLayout({"direct": 1, "signed": 1, "sign_bit": bits_for(self._k - 1), "hidden": 1,
                                         "shift": bits_for(self._max_shift), "exp": t.exponent_bits,
                                         "value": t.total_bits})
        self._table = table
        super().__init__({"i": In(stream.Signature(pair_layout(self._code_bits, self._k))),
                          "o": Out(stream.Signature(t.total_bits)),
                          "cfg": In(stream.Signature(data.StructLayout({"addr": self._code_bits, "data": self._entry})))})

    @property
    def target(self):
        return self._target

    def elaborate(self, platform):
        m = Module()
        t, k = self._target, self._k
        depth = 1 << self._code_bits
        (rd,) = _lut(m, "lut", self._entry, depth, _init(self._entry, self._table, depth), self.cfg, 1)
        e = rd.data
        m.d.comb += rd.addr.eq(self.i.p.symbol)
        sign, sig = _significand(m, self.i.p.extra, e, k)
        aligned = Signal(k + t.mantissa_bits)
        m.d.comb += aligned.eq(Cat(Const(0, t.mantissa_bits), sig) >> e.shift)
        result = Signal(t.total_bits)
        m.d.comb += result.eq(Mux(e.direct, e.value, Cat(aligned[:t.mantissa_bits], e.exp))
                              | (sign << (t.total_bits - 1)))
        _pipeline(m, self.i, self.o, result)
        return m


class PairToFixed(_InterfaceCore):
    """Coding pairs to two's complement fixed point (Fig. 10a), with the direct bypass of Fig. 11.

    The significand is shifted by the code's LUT shift into a ``width``-bit word, negated for a
    negative sign, and saturated to the word's range (see :mod:`ansforge.model.dtypes.interfaces`).

    Parameters
    ----------
    fixed : FixedFormat
        Output word: ``width`` (2..32) bits, ``frac_bits`` after the point.
    max_codes, max_extra_bits, table
        As :class:`PairToFloat` (``table``: a :class:`~ansforge.model.dtypes.interfaces.PairToFixedTable`).

    Ports: ``i`` pairs, ``o`` fixed-point words (``width`` bits), ``cfg`` LUT writes. Latency 1.
    """

    def __init__(self, *, fixed: FixedFormat, max_codes: int = 64, max_extra_bits: int = 8,
                 table: PairToFixedTable | None = None):
        if not isinstance(fixed, FixedFormat):
            raise TypeError(f"fixed must be a FixedFormat, not {fixed!r}")
        self._fixed = fixed
        self._check_parameters(table, PairToFixedTable, max_codes, max_extra_bits,
                               "" if table is None or table.fixed == fixed else
                               f"table is for {table.fixed}, the core for {fixed}")
        F = fixed.width
        self._max_shift = F - 1 + self._k + 1
        self._entry = data.StructLayout({"direct": 1, "sat": 1, "signed": 1, "sign_bit": bits_for(self._k - 1),
                                         "hidden": 1, "rshift": bits_for(self._max_shift), "value": F})
        self._table = table
        super().__init__({"i": In(stream.Signature(pair_layout(self._code_bits, self._k))),
                          "o": Out(stream.Signature(F)),
                          "cfg": In(stream.Signature(data.StructLayout({"addr": self._code_bits, "data": self._entry})))})

    @property
    def fixed(self) -> FixedFormat:
        return self._fixed

    def elaborate(self, platform):
        m = Module()
        F, k = self._fixed.width, self._k
        L = F - 1
        depth = 1 << self._code_bits
        (rd,) = _lut(m, "lut", self._entry, depth, _init(self._entry, self._table, depth), self.cfg, 1)
        e = rd.data
        m.d.comb += rd.addr.eq(self.i.p.symbol)
        sign, sig = _significand(m, self.i.p.extra, e, k)
        mag = Signal(k + L)
        limit = Signal(F)
        clipped = Signal(F)
        m.d.comb += [mag.eq(Cat(Const(0, L), sig) >> e.rshift),
                     limit.eq(Mux(sign, 1 << L, (1 << L) - 1)),
                     clipped.eq(Mux(e.sat | (mag > limit), limit, mag))]
        magnitude = Mux(e.direct, e.value, clipped)
        result = Signal(F)
        m.d.comb += result.eq(Mux(sign, -magnitude, magnitude))
        _pipeline(m, self.i, self.o, result)
        return m


class _ToPair(_InterfaceCore):
    """Shared part of the compress-side cores: RNE of a left-aligned fraction to the code's width."""

    def _ports(self, in_bits: int, index_bits: int):
        self._entry = data.StructLayout({"valid": 1, "code": self._code_bits, "bits": bits_for(self._k - 1)})
        return {"i": In(stream.Signature(in_bits)),
                "o": Out(stream.Signature(pair_layout(self._code_bits, self._k))),
                "cfg": In(stream.Signature(data.StructLayout({"addr": index_bits, "data": self._entry}))),
                "miss": Out(1)}

    def _round(self, m: Module, sign, hidden, frac, frac_bits: int, e0, e1, next_ok):
        """(code, extra, valid) of a value whose fraction below the leading ``hidden`` bit is ``frac``
        (``frac_bits`` bits, left-aligned), rounded to ``e0.bits`` bits with a carry into ``e1``."""
        k = self._k
        wide = Signal(frac_bits + k)
        rsh = Signal(bits_for(frac_bits + k))
        rsh1 = Signal(bits_for(frac_bits + k))
        q, rem, half = Signal(k), Signal(frac_bits + k), Signal(frac_bits + k)
        qr = Signal(k + 1)
        carry = Signal()
        m.d.comb += [wide.eq(Cat(Const(0, k), frac)), rsh.eq(frac_bits + k - e0.bits), rsh1.eq(rsh - 1),
                     q.eq(wide >> rsh), rem.eq(wide & ((Const(1, 1) << rsh) - 1)),
                     half.eq(Const(1, 1) << rsh1),   # rsh > frac_bits >= 1: the half bit exists
                     # ties to an even significand: with no mantissa bits kept, its LSB is the hidden bit
                     qr.eq(q + ((rem > half) | ((rem == half) & Mux(e0.bits == 0, hidden, q[0])))),
                     carry.eq(qr.bit_select(e0.bits, 1))]
        code, width, mant, valid = Signal(self._code_bits), Signal(bits_for(k - 1)), Signal(k), Signal()
        with m.If(carry):
            m.d.comb += [code.eq(e1.code), width.eq(e1.bits), mant.eq(0), valid.eq(e1.valid & next_ok)]
        with m.Else():
            m.d.comb += [code.eq(e0.code), width.eq(e0.bits), mant.eq(qr), valid.eq(e0.valid)]
        extra = Signal(k)
        m.d.comb += extra.eq(mant | (sign << width))
        return code, extra, valid

    def _emit(self, m: Module, code, extra, valid) -> None:
        result = Signal(self.o.p.shape())
        m.d.comb += [result.symbol.eq(Mux(valid, code, 0)), result.extra.eq(Mux(valid, extra, 0))]
        _pipeline(m, self.i, self.o, result)
        with m.If(self.i.valid & self.i.ready & ~valid):
            m.d.sync += self.miss.eq(1)


class FloatToPair(_ToPair):
    """Floats to coding pairs (Fig. 9b): exponent→code LUT and round-to-nearest-even.

    The exponent field addresses the LUT twice (``field`` and ``field + 1``); the mantissa is rounded
    to the code's width, and a carry out of it takes the next field's code with a zero mantissa. A
    value whose exponent has no code (after the carry) leaves the pair ``(0, 0)`` and sets the sticky
    ``miss`` output; the golden model raises for it.

    Parameters
    ----------
    source : str
        Input format: ``"bf16"``, ``"fp16"`` or ``"fp32"``.
    max_codes, max_extra_bits : int
        Code and additional-data widths of the output pairs.
    table : FloatToPairTable or None
        LUT contents at reset (``2**E`` entries), rewritable through ``cfg``.

    Latency 1 clock, one value per clock.
    """

    def __init__(self, *, source: str = "fp32", max_codes: int = 64, max_extra_bits: int = 8,
                 table: FloatToPairTable | None = None):
        self._source = s = float_format(source)
        self._check_parameters(table, FloatToPairTable, max_codes, max_extra_bits,
                               "" if table is None or table.source == s else
                               f"table is for {table.source.name} values, the core for {s.name}")
        self._table = table
        super().__init__(self._ports(s.total_bits, s.exponent_bits))

    @property
    def source(self):
        return self._source

    def elaborate(self, platform):
        m = Module()
        s = self._source
        E, M = s.exponent_bits, s.mantissa_bits
        depth = 1 << E
        rd0, rd1 = _lut(m, "lut", self._entry, depth, _init(self._entry, self._table, depth), self.cfg, 2)
        v = self.i.p
        field = v[M:M + E]
        m.d.comb += [rd0.addr.eq(field), rd1.addr.eq(field + 1)]
        code, extra, valid = self._round(m, v[-1], field != 0, v[:M], M, rd0.data, rd1.data, field != depth - 1)
        self._emit(m, code, extra, valid)
        return m


class FixedToPair(_ToPair):
    """Fixed-point words to coding pairs (Fig. 10b): normalization, LUT, round-to-nearest-even.

    The magnitude of the two's complement word goes through a priority encoder (the leading one's
    position ``p``) and a left shift that puts the leading one at the top; ``p`` addresses the LUT
    (and ``p + 1`` for a rounding carry); zero takes the LUT's last entry, the zero code.

    Parameters
    ----------
    fixed : FixedFormat
        Input word (``width`` 2..32 bits).
    max_codes, max_extra_bits, table
        As :class:`FloatToPair` (``table``: a :class:`~ansforge.model.dtypes.interfaces.FixedToPairTable`,
        ``width + 2`` entries).

    Latency 1 clock, one value per clock; ``miss`` as :class:`FloatToPair`.
    """

    def __init__(self, *, fixed: FixedFormat, max_codes: int = 64, max_extra_bits: int = 8,
                 table: FixedToPairTable | None = None):
        if not isinstance(fixed, FixedFormat):
            raise TypeError(f"fixed must be a FixedFormat, not {fixed!r}")
        self._fixed = fixed
        self._check_parameters(table, FixedToPairTable, max_codes, max_extra_bits,
                               "" if table is None or table.fixed == fixed else
                               f"table is for {table.fixed}, the core for {fixed}")
        self._table = table
        super().__init__(self._ports(fixed.width, bits_for(fixed.width + 1)))

    @property
    def fixed(self) -> FixedFormat:
        return self._fixed

    def elaborate(self, platform):
        m = Module()
        F = self._fixed.width
        depth = F + 2
        rd0, rd1 = _lut(m, "lut", self._entry, depth, _init(self._entry, self._table, depth), self.cfg, 2)
        x = self.i.p
        sign = x[F - 1]
        mag = Signal(F)
        m.d.comb += mag.eq(Mux(sign, -x, x))
        p = Signal(bits_for(F - 1))
        for b in range(F):          # later assignments win: p ends at the leading one
            with m.If(mag[b]):
                m.d.comb += p.eq(b)
        lsh = Signal(bits_for(F - 1))
        norm = Signal(F)
        zero = Signal()
        m.d.comb += [lsh.eq(F - 1 - p), norm.eq(mag << lsh), zero.eq(mag == 0),
                     rd0.addr.eq(Mux(zero, F + 1, p)), rd1.addr.eq(p + 1)]
        code, extra, valid = self._round(m, sign, 1, norm[:F - 1], F - 1, rd0.data, rd1.data, 1)
        self._emit(m, Mux(zero, rd0.data.code, code), Mux(zero, 0, extra), Mux(zero, rd0.data.valid, valid))
        return m
