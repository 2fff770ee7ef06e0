"""cocotb bench (run by tests/hdl/test_subsystem.py through cocotb's runner on Icarus): the decompression
subsystem's exported Verilog (``ansforge verilog --top subsystem``: ports named per field) between
cocotbext-axi's models, as a board would hold it:

* ``AxiRamRead`` on ``m_axi``: the compressed blocks in memory, with random pauses on AR (``ARREADY``
  back-pressure) and on R (gaps between responses: a memory of varying latency);
* ``AxiLiteMaster`` on ``s_axil``: the driver's register program, as written in ``docs/subsystem.md``
  (``BASE``, the lane registers, ``START``), then ``STATUS`` polled until ``DONE``;
* ``AxiStreamSink`` on ``m_axis``: the weights, with random ``TREADY`` pauses; each START's transfers
  make one frame (``TLAST`` on its last); slot ``l`` of a transfer is lane ``l``'s next weight where its
  ``TKEEP`` bytes are set, and each lane's weights must be its blocks' in the container's own decoder's
  (what ``ansforge decompress`` writes).

The programs come as JSON (path in ``ANSFORGE_SUBSYSTEM_VECTORS``): ``sim.subsystem.SubsystemProgram``'s
image (blocks and tables), register writes and each lane's expected weights per START, the register
addresses, and the pause probability and seed.
"""

from __future__ import annotations

import json
import logging
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiReadBus, AxiRamRead, AxiStreamBus, AxiStreamSink)


def _pauses(rng: random.Random, probability: float):
    while True:
        yield rng.random() < probability


@cocotb.test()
async def subsystem_decodes_every_start_between_axi_models(dut):
    vec = json.loads(open(os.environ["ANSFORGE_SUBSYSTEM_VECTORS"]).read())
    rng = random.Random(vec["seed"])
    p = vec["pause"]
    csr = vec["csr"]
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    ram = AxiRamRead(AxiReadBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=vec["memory_bytes"])
    ram.ar_channel.set_pause_generator(_pauses(rng, p))
    ram.r_channel.set_pause_generator(_pauses(rng, p))
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst)
    sink.set_pause_generator(_pauses(rng, p))
    for model in (ram, axil.write_if, axil.read_if, sink):     # a line per transfer otherwise
        model.log.setLevel(logging.WARNING)

    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await RisingEdge(dut.clk)

    assert await axil.read_dword(csr["ID"]) == vec["id"]
    assert await axil.read_dword(csr["PARAMS"]) == vec["params"]
    for n, prog in enumerate(vec["programs"]):
        ram.write(vec["base"], bytes.fromhex(prog["image"]))
        for addr, value in prog["writes"]:
            await axil.write_dword(addr, value)
        await axil.write_dword(csr["CONTROL"], 1)
        frame = await with_timeout(sink.recv(compact=False), vec["timeout_us"], "us")
        lanes, wb = vec["lanes"], vec["weight_bytes"]
        data, keep, user = bytes(frame.tdata), list(frame.tkeep), list(frame.tuser)
        got = [bytearray() for _ in range(lanes)]
        tags = [[] for _ in range(lanes)]
        for at in range(0, len(data), lanes * wb):
            for lane in range(lanes):
                slot = slice(at + lane * wb, at + (lane + 1) * wb)
                kept = keep[slot]
                assert all(kept) or not any(kept), f"{prog['name']}: a transfer keeps part of lane {lane}'s weight"
                if all(kept):
                    got[lane] += data[slot]
                    tags[lane].append(user[at] >> (vec["tag_bits"] * lane) & ((1 << vec["tag_bits"]) - 1))
        for lane in range(lanes):
            want = [t for t, count in prog["blocks"][lane] for _ in range(count)]
            assert tags[lane] == want, f"{prog['name']}: lane {lane}'s TUSER tags are not its blocks'"
        # the weights put back in container order by their tags: the START's blocks in order
        by_tag = {}
        for lane in range(lanes):
            at = 0
            for t, count in prog["blocks"][lane]:
                by_tag[t] = bytes(got[lane][at:at + count * wb])
                at += count * wb
        assert b"".join(by_tag[t] for t in sorted(by_tag)) == bytes.fromhex(prog["ordered"]), prog["name"]
        for lane in range(lanes):
            expected = bytes.fromhex(prog["lanes"][lane])
            if bytes(got[lane]) != expected:
                first = next((i for i, (a, b) in enumerate(zip(got[lane], expected)) if a != b),
                             min(len(got[lane]), len(expected)))
                raise AssertionError(f"{prog['name']}: lane {lane} gave {len(got[lane])} bytes, {len(expected)} "
                                     f"expected; first difference at byte {first}")
        status = await axil.read_dword(csr["STATUS"])
        for _ in range(1000):                   # DONE follows the last transfer within the output pipeline
            if status & 2:
                break
            status = await axil.read_dword(csr["STATUS"])
        assert status & 2, f"{prog['name']}: STATUS {status:#x} never DONE"
        assert (status >> 4) & 7 == 0 and not status & 0x100, f"{prog['name']}: STATUS {status:#x}"
        assert await axil.read_dword(csr["WEIGHTS"]) == prog["weights"], prog["name"]
        cycles = await axil.read_dword(csr["CYCLES"])
        dut._log.info("START %d (%s): %d weights in %d clocks", n, prog["name"], prog["weights"], cycles)
