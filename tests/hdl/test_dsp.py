"""The registered multiply-add block (:class:`~ansforge.hdl.dsp.MulAdd`): its Amaranth description and its
Verilog text (a behavioural branch, and a DSP48E2 primitive under ``ANSFORGE_DSP48E2``). The Verilog
branch runs bit-exact in Verilator inside the interleaved rANS decoder (``tests/hdl/test_rans_xn_decoder.py``);
what it synthesizes to is that decoder's area budget there."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from ansforge.hdl.dsp import DSP48E2_DEFINE, MulAdd
from ansforge.hdl.verilog import core_verilog


@pytest.mark.parametrize("widths,match", [((27, 17, 48, 48), "a_bits"), ((26, 18, 48, 48), "b_bits"),
                                          ((26, 17, 48, 49), "p_bits"), ((26, 17, 49, 48), "c_bits"),
                                          ((0, 17, 48, 48), "a_bits")])
def test_bad_widths(widths, match):
    with pytest.raises(ValueError, match=match):
        MulAdd(*widths)


def test_two_enabled_clocks_of_latency():
    """``p`` is ``a * b + c`` (mod ``2**p_bits``) of the operands taken two enabled clocks before; a clock
    without ``en`` moves nothing."""
    dut = MulAdd(26, 17, 48, 48)
    rng = random.Random(5)
    ops = [(rng.getrandbits(26), rng.getrandbits(17), rng.getrandbits(48)) for _ in range(40)]

    async def bench(ctx):
        taken = []
        for a, b, c in ops:
            en = rng.random() < 0.7
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            ctx.set(dut.c, c)
            ctx.set(dut.en, en)
            await ctx.tick()
            if en:
                taken.append((a * b + c) % (1 << 48))
            if len(taken) >= 2 and en:
                assert ctx.get(dut.p) == taken[-2]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_verilog_has_both_branches():
    text = core_verilog(MulAdd(26, 17, 48, 48))
    assert text.count("module ansforge_mul_add_a26_b17_c48_p48") == 1
    assert f"`ifdef {DSP48E2_DEFINE}" in text and "DSP48E2 #(" in text and "`else" in text
