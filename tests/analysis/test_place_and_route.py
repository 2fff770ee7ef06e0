"""The second place-and-route target (issue 45 item 1): a Lattice Nexus has no out-of-context mode, so
the design goes inside a ring of registers (``analysis.area._io_ring``); the flow must place, route and
time it. Fmax figures belong in ``ansforge bench``; this checks the path and the ring's wiring."""

import re


def test_nexus_ring_registers_every_port_and_the_flow_times_it():
    from ansforge.analysis import area
    from ansforge.hdl.verilog import core_verilog
    from ansforge.model.coding.codecs import parse_codec
    from ansforge.sim.jobs import build_core

    core = build_core("tans-encoder", parse_codec("tans8x16"), programmable=True, max_symbols=64,
                      max_extra_bits=8, shell=False)
    text = core_verilog(core)
    ports = area._top_ports(text)
    ins = sum(w for d, n, w in ports if d == "input" and n != "clk")
    outs = sum(w for d, n, w in ports if d == "output")
    assert ins > 20 and outs > 20 and {n for _, n, _ in ports} >= {"clk", "rst"}
    ring = area._io_ring(text)[len(text):]
    # one shift register drives every input bit but the clock (the reset too); every output bit is folded
    assert f"reg [{ins}:0] chain;" in ring and f"reg [{outs - 1}:0] fold0;" in ring
    for _, name, _ in ports:
        assert len(re.findall(rf"\.{re.escape(name)}\(", ring)) == 1, name
    fmax = area.nexus_fmax(text, seed=1)
    assert fmax is not None and fmax > 10
