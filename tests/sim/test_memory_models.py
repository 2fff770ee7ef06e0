"""The simulated memories' backing store (:class:`SimulationRam`): a registered read in the Amaranth
simulator, and a Verilog text whose size does not grow with the memory's depth."""

from __future__ import annotations

from amaranth.sim import Simulator

from ansforge.hdl.verilog import core_verilog
from ansforge.sim.memory import SharedMemory, SimulationRam
from ansforge.sim.subsystem import AxiMemory


def test_a_read_gives_the_word_one_clock_later_and_a_write_in_the_same_clock_reads_as_before():
    ram = SimulationRam(depth=16, width=8)
    seen = []

    async def bench(ctx):
        for addr in range(16):
            ctx.set(ram.w_en, 1)
            ctx.set(ram.w_addr, addr)
            ctx.set(ram.w_data, 3 * addr + 1)
            await ctx.tick()
        # read word 5 while writing it: the old word comes back, the new one a clock later
        ctx.set(ram.w_addr, 5)
        ctx.set(ram.w_data, 200)
        ctx.set(ram.r_addr, 5)
        await ctx.tick()
        seen.append(ctx.get(ram.r_data))
        ctx.set(ram.w_en, 0)
        await ctx.tick()
        seen.append(ctx.get(ram.r_data))
        ctx.set(ram.r_addr, 9)
        await ctx.tick()
        seen.append(ctx.get(ram.r_data))

    sim = Simulator(ram)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [16, 200, 28]


def test_the_verilog_of_a_memory_model_does_not_grow_with_its_depth():
    """The fpga bench's 2**19-beat image: no initial statement per word (the words are written through
    ``mem_cfg`` before a run reads them)."""
    small, large = (core_verilog(AxiMemory(depth=d, data_bits=64)) for d in (1 << 10, 1 << 19))
    assert len(large) < 1.1 * len(small)         # (the address widths grow with the depth, nothing else)
    assert "initial" not in large.split("module ansforge_sim_ram")[1]
    assert "reg [63:0] words [0:524287];" in large
    shared = core_verilog(SharedMemory(depth=1 << 18, beat_bits=128, addr_bits=18, tag_bits=3))
    assert len(shared) < len(small) * 2 and "ansforge_sim_ram_w128_d262144" in shared
