"""cocotb bench (run by tests/hdl/test_axis.py through cocotb's runner on Icarus): one core behind
:class:`ansforge.hdl.axis.AxisCore`, driven through its AXI4-Stream ports with random TVALID/TREADY gaps.

The vectors come as JSON (path in ``ANSFORGE_AXIS_VECTORS``): per input stream a list of
``[tdata, tlast]``, the expected ``[tdata, tlast]`` outputs on ``m_axis_o``, the expected statuses
(decoders) and the gap probability and seed. Table writes go first, then each command after the previous
one's ``done``, with the input streams alongside; every output transfer is compared as it happens.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


@cocotb.test()
async def axis_core_matches_the_golden_model(dut):
    vec = json.loads(open(os.environ["ANSFORGE_AXIS_VECTORS"]).read())
    rng = random.Random(vec["seed"])
    gap = vec["stall_prob"]
    streams = vec["inputs"]                       # {name: [[tdata, tlast], ...]} in driving order
    cfg = [n for n in streams if n.endswith("cfg")]
    expected, statuses = vec["expected"], vec["statuses"]
    has_cmd = "cmd" in streams

    def port(name, sig):
        return getattr(dut, f"s_axis_{name}__{sig}")

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    for n in streams:
        port(n, "tvalid").value = 0
        port(n, "tdata").value = 0
        port(n, "tlast").value = 0
    dut.m_axis_o__tready.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0

    idx = {n: 0 for n in streams}
    valid = {n: False for n in streams}
    waiting, got, done_cmds, got_status = False, 0, 0, []
    for cycle in range(vec["max_cycles"]):
        cfg_done = all(idx[c] >= len(streams[c]) for c in cfg)
        for n, items in streams.items():
            allowed = (n in cfg and all(idx[c] >= len(streams[c]) for c in cfg[:cfg.index(n)])) or \
                (n == "cmd" and cfg_done and not waiting) or (n not in cfg and n != "cmd" and cfg_done)
            if not valid[n] and idx[n] < len(items) and allowed and rng.random() >= gap:
                valid[n] = True
                port(n, "tdata").value, port(n, "tlast").value = items[idx[n]]
            port(n, "tvalid").value = int(valid[n])
        dut.m_axis_o__tready.value = int(rng.random() >= gap)
        await ReadOnly()
        fired = [n for n in streams if valid[n] and int(port(n, "tready").value)]
        if int(dut.m_axis_o__tvalid.value) and int(dut.m_axis_o__tready.value):
            assert got < len(expected), f"output {got} is one more than the {len(expected)} expected"
            want = expected[got]
            have = [int(dut.m_axis_o__tdata.value), int(dut.m_axis_o__tlast.value)]
            assert have == want, f"output {got}: (tdata, tlast) = {have}, expected {want}"
            got += 1
        if has_cmd and waiting and int(dut.done.value) and not valid["cmd"]:
            waiting = False
            done_cmds += 1
            if statuses:
                got_status.append(int(dut.status.value))
        await RisingEdge(dut.clk)
        for n in fired:
            valid[n] = False
            idx[n] += 1
            if n == "cmd":
                waiting = True
        if got == len(expected) and (not has_cmd or done_cmds == len(streams["cmd"])):
            break
    else:
        raise AssertionError(f"no result after {vec['max_cycles']} cycles ({got} of {len(expected)} outputs)")
    assert got_status == statuses, (got_status, statuses)
    dut._log.info(f"PASS: {got} outputs bit-exact in {cycle + 1} cycles")
