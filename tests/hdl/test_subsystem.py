"""The decompression subsystem (Fig. 12 as an FPGA block, ``docs/subsystem.md``): real tensors through its
AXI4 read port, register map and AXI4-Stream output, bit-exact against ``ansforge decompress``; the
register map's answers; an AXI read error reported; the CLI's ``--top subsystem``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from amaranth.sim import Simulator

from ansforge.cli import main
from ansforge.hdl.parallel import TAG_BITS
from ansforge.hdl.subsystem import CSR_ID, AxiDecompressor, Csr
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.container import compress_checkpoint, open_container
from ansforge.model.coding.registry import DEFAULT_FORMAT
from ansforge.model.errors import ConfigError
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.container_plan import decode_container_subsystem, plan_container_subsystem, runs_throughput
from ansforge.sim.subsystem import MEMORY_BASE, SubsystemMismatch, checkpoint_block, run_block, subsystem_bench_for
from ansforge.sim.testbench import exported_simulation_verilog
from ansforge.sim.verilator import VerilatorEngine

MATRIX = "layers.0.attention.wk.weight"     # stories260K: 2,048 weights


@pytest.fixture(scope="module")
def stories_containers(stories, tmp_path_factory):
    """stories260K in the default layout (independent blocks, here of 4,096 pairs so that every lane has
    blocks) as tans8x16 with bf16 and fp32 pairs and rans16x16 with bf16 pairs, and in the older
    one-stream-per-tensor layout as tans8 bf16."""
    d = tmp_path_factory.mktemp("subsystem")
    out = {}
    for codec, pairs, layout in (("tans8x16", "bf16", {"block_pairs": 4096}), ("tans8x16", "auto", {"block_pairs": 4096}),
                                 ("rans16x16", "bf16", {"block_pairs": 4096}), ("tans8", "bf16", {"group": "tensor"})):
        path = d / f"{codec}-{pairs}.ansf"
        compress_checkpoint(stories, path, codec, pairs=pairs, **layout)
        out[codec, "fp32" if pairs == "auto" else pairs] = open_container(path)
    return out


@pytest.mark.parametrize("codec, target, lanes, interval", [("tans8x16", "fp32", 2, 1), ("rans16x16", "bf16", 2, 3)])
def test_a_matrix_through_the_subsystem_with_stalls(stories, codec, target, lanes, interval):
    """Random TREADY gaps on the output and a memory that takes a read only every ``interval`` clocks
    (ARVALID held under back-pressure): every weight, TKEEP and TLAST as the golden model says."""
    block = checkpoint_block(str(stories), codec, MATRIX, target)
    dut = AxiDecompressor(parse_codec(codec), lanes=lanes, target=target, bus_bits=64)
    run = run_block(AmaranthEngine(), dut, block, latency=7, interval=interval, stall_prob=0.25, seed=3)
    assert run.weights == 2048


def test_whole_stories260k_through_verilator_at_the_lane_bound(stories_containers):
    """Every tensor of stories260K in the default layout through Verilator from a memory with 32 clocks of
    latency: tans8x16 bf16 through 4 lanes, tans8x16 fp32 and rans16x16 bf16 through 2 (the rANS cores
    take at most 16 bits of additional data: no fp32 pairs), every lane loading each block's tables from
    its record; bit-exact with the container's decoder, and no slower than 0.92 of the bound
    min(K, bus bits / coded bits per weight) on the blocks' words plus four clocks for each beat of a
    lane's headers and tables (a tensor's table is some 400 entries of one or two beats, and
    stories260K's tensors are a few thousand weights each: MiniLM goes through ``bench --only fpga``,
    at 0.96 of the bound at K = 8). The two
    largest tensors of the older layout (one stream per tensor, one state: cut into blocks coded alone)
    too."""
    eng = VerilatorEngine()
    for codec, target, lanes in (("tans8x16", "bf16", 4), ("tans8x16", "fp32", 2), ("rans16x16", "bf16", 2),
                                 ("tans8", "bf16", 4)):
        c = stories_containers[codec, target]
        coded = sorted((r for r in c.tensors if r["coding"] == "pairs"), key=lambda r: -r["n_pairs"])
        names = None if codec != "tans8" else [r["name"] for r in coded[:2]]
        runs = decode_container_subsystem(c, eng, lanes=lanes, latency=32, names=names)
        assert sum(r.weights for _, r in runs) == (264_128 if names is None else sum(r["n_pairs"] for r in coded[:2]))
        for name, r in runs:
            # the blocks at 0.92 of the bound, and a lane's headers and tables at most four clocks a beat:
            # a lane's reader is granted at most every other clock, and a record's first words follow its
            # last table entry
            assert r.bound <= lanes and r.table_beats > 0
            assert r.cycles <= r.weights / r.bound / 0.92 + 4 * r.table_beats / lanes, (codec, target, name, r)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")     # the refused subsystem is never built
def test_a_block_larger_than_the_lane_counters_is_refused(stories):
    """A driver never writes a count the lanes would truncate: the program names the block and the width."""
    block = checkpoint_block(str(stories), "tans8x16", MATRIX, "bf16")
    dut = AxiDecompressor(lanes=1, target="bf16", count_bits=8)
    with pytest.raises(ConfigError, match=r"lane 0: a block of 2,048 pairs; the lanes count below 2\*\*8 \(count_bits = 8"):
        subsystem_bench_for(dut, block)


def test_a_wrong_weight_is_caught(stories):
    block = checkpoint_block(str(stories), "tans8", MATRIX, "bf16")
    block.bits = block.bits.copy()
    block.bits[777] ^= 1
    dut = AxiDecompressor(parse_codec("tans8"), lanes=2, target="bf16", bus_bits=64)
    with pytest.raises(SubsystemMismatch, match="lane 0 gave 1024 weights of its 1024; the first difference at "
                                                "weight 777"):                 # lane 0 holds weights 0..1023
        run_block(AmaranthEngine(), dut, block, latency=4)


def test_a_region_shorter_than_its_records_ends_with_out_of_words(stories):
    """A driver's region that ends inside its block's words (LANE_UNITS too small): the START ends, no
    hang, with OUT_OF_WORDS; the other lane's block is unaffected."""
    from ansforge.sim.subsystem import SubsystemBench, memory_depth, run_program, subsystem_program
    block = checkpoint_block(str(stories), "tans8x16", MATRIX, "bf16")
    dut = AxiDecompressor(lanes=2, target="bf16")
    program = subsystem_program(dut, block.spec, block.table, block.code_table, block.exponents, block.symbols,
                                block.extras, block.bits)
    program.writes = [(a, d - 3 if a == Csr.LANE0 + 4 else d) for a, d in program.writes]
    bench = SubsystemBench(dut, depth=memory_depth(dut, block.symbols.size), latency=4)
    with pytest.raises(SubsystemMismatch, match="reported OUT_OF_WORDS"):
        run_program(AmaranthEngine(), bench, program)


def test_a_read_outside_memory_is_reported(stories):
    """BASE pointing below the memory: DECERR on every read, the ``error`` output and STATUS bit 8 set."""
    block = checkpoint_block(str(stories), "tans8", MATRIX, "bf16")
    dut = AxiDecompressor(parse_codec("tans8"), lanes=2, target="bf16", bus_bits=64)
    job = subsystem_bench_for(dut, block, latency=4)
    csr = job.cfg["csr_cfg"].copy()
    base = (csr >> np.uint64(0)) & np.uint64(0xFFF)
    data = csr >> np.uint64(12)
    at = np.flatnonzero((base == Csr.BASE_LO) & (data == MEMORY_BASE))
    assert at.size == 1
    csr[at[0]] = np.uint64(Csr.BASE_LO) | np.uint64(0x1000_0000) << np.uint64(12)
    job.cfg["csr_cfg"] = csr
    res = AmaranthEngine().run(_as_amaranth(job))
    assert res.statuses and res.statuses[0] & 8, res.statuses


def _as_amaranth(job):
    from ansforge.sim.testbench import payload_ints
    job.cfg = {k: payload_ints(v) for k, v in job.cfg.items()}
    job.commands = payload_ints(job.commands)
    return job


def _axil(dut):
    """Write/read helpers for the AXI4-Lite slave, one transaction at a time (Amaranth testbench)."""
    s = dut.s_axil

    async def write(ctx, addr, data, strb=0b1111):
        ctx.set(s.awaddr, addr)
        ctx.set(s.wdata, data)
        ctx.set(s.wstrb, strb)
        ctx.set(s.awvalid, 1)
        ctx.set(s.wvalid, 1)
        ctx.set(s.bready, 1)
        aw = w = False
        for _ in range(50):
            aw_now, w_now = ctx.get(s.awready), ctx.get(s.wready)
            await ctx.tick()
            aw, w = aw or aw_now, w or w_now
            if aw:
                ctx.set(s.awvalid, 0)
            if w:
                ctx.set(s.wvalid, 0)
            if ctx.get(s.bvalid):
                resp = ctx.get(s.bresp)
                await ctx.tick()
                ctx.set(s.bready, 0)
                return resp
        raise AssertionError("no write response")

    async def read(ctx, addr):
        ctx.set(s.araddr, addr)
        ctx.set(s.arvalid, 1)
        ctx.set(s.rready, 1)
        for _ in range(50):
            ready = ctx.get(s.arready)
            await ctx.tick()
            if ready:
                ctx.set(s.arvalid, 0)
            if ctx.get(s.rvalid):
                v, resp = ctx.get(s.rdata), ctx.get(s.rresp)
                await ctx.tick()
                ctx.set(s.rready, 0)
                return v, resp
        raise AssertionError("no read response")

    return write, read


def test_register_map_answers():
    dut = AxiDecompressor(parse_codec("tans8"), lanes=4, target="bf16", bus_bits=64)
    write, read = _axil(dut)
    seen = {}

    async def bench(ctx):
        seen["id"] = await read(ctx, Csr.ID)
        seen["params"] = await read(ctx, Csr.PARAMS)
        seen["w_base"] = await write(ctx, Csr.BASE_LO, 123456)
        seen["base"] = await read(ctx, Csr.BASE_LO)
        seen["w_lane3"] = await write(ctx, Csr.LANE0 + 8 * 3 + 4, 77)
        seen["lane3"] = await read(ctx, Csr.LANE0 + 8 * 3 + 4)
        seen["limits"] = await read(ctx, Csr.LIMITS)
        seen["records"] = await read(ctx, Csr.RECORDS)
        seen["w_count_max"] = await write(ctx, Csr.LANE0 + 8 + 4, (1 << 20) - 1)
        seen["w_count_over"] = await write(ctx, Csr.LANE0 + 8 + 4, 1 << 20)
        seen["count_kept"] = await read(ctx, Csr.LANE0 + 8 + 4)
        seen["w_words_over"] = await write(ctx, Csr.LANE0 + 4, 1 << 31)
        seen["w_base_wide"] = await write(ctx, Csr.LANE0, 1 << 31)
        seen["w_nowhere"] = await write(ctx, 0x7F0, 1)
        seen["nowhere"] = await read(ctx, 0x7F0)
        seen["w_partial"] = await write(ctx, Csr.BASE_LO, 5, strb=0b0011)
        seen["base_after"] = await read(ctx, Csr.BASE_LO)
        seen["status"] = await read(ctx, Csr.STATUS)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["id"] == (CSR_ID, 0)
    assert seen["params"] == (dut.params_word(), 0) and seen["params"][0] & 0xFF == 4
    assert seen["w_base"] == 0 and seen["base"] == (123456, 0)
    assert seen["w_lane3"] == 0 and seen["lane3"] == (77, 0)
    # counts the lanes' 20-bit counters cannot hold are refused, not truncated; a beat offset is not a count
    assert seen["limits"] == (20, 0) and dut.count_bits == 20
    assert seen["w_count_max"] == 0 and seen["w_count_over"] == 0b10 and seen["count_kept"] == ((1 << 20) - 1, 0)
    assert seen["w_words_over"] == 0b10 and seen["w_base_wide"] == 0
    assert seen["w_nowhere"] == 0b10 and seen["nowhere"][1] == 0b10          # SLVERR
    assert seen["w_partial"] == 0b10 and seen["base_after"] == (123456, 0)    # partial writes change nothing
    # a region's units, header and table entries: what a driver lays out (docs/subsystem.md)
    assert seen["records"] == (dut.records_word(), 0) and seen["records"][0] & 0x7F == 64
    assert seen["status"] == (0, 0)                                         # idle, not done, OK


@pytest.mark.parametrize("kw, message", [
    (dict(lanes=16, bus_bits=64), "cannot feed"),                 # 16 x 8 bits of additional data > 64
    (dict(lanes=3), "power of two"),
    (dict(lanes=4, bus_bits=48), "power of two"),
    (dict(lanes=4, target="fp16"), "target must be one of"),
])
def test_impossible_configurations_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        AxiDecompressor(parse_codec("tans8"), **kw)


def test_fp32_lanes_of_the_rans_cores_are_refused_with_the_reason():
    """The rANS xN decoder takes at most P = 16 bits of additional data: the refusal names what the fp32
    lanes would give it (and leaves no unused-elaboratable warning behind: warnings fail the tests)."""
    with pytest.raises(ConfigError, match=r"fp32 lanes give the decoder 24 \+ 5 bits .*K <= P <= 16"):
        AxiDecompressor(parse_codec("rans16x16"), lanes=2, target="fp32", bus_bits=64)


def test_cli_verilog_and_bad_parameters(tmp_path, capsys):
    out = tmp_path / "s.v"
    assert main(["verilog", "--top", "subsystem", "--lanes", "2", "-o", str(out)]) == 0
    text = out.read_text()
    for port in ("s_axil__awaddr", "m_axi__araddr", "m_axi__rdata", "m_axis__tdata", "m_axis__tkeep", "m_axis__tlast"):
        assert port in text
    capsys.readouterr()
    assert main(["verilog", "--top", "subsystem", "--lanes", "16", "--bus-bits", "64", "-o", str(tmp_path / "x.v")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot feed" in err[0] and not (tmp_path / "x.v").exists()
    assert main(["verilog", "--top", "subsystem", "--core", "tans-decoder", "-o", str(tmp_path / "y.v")]) == 2
    assert "takes no --core" in capsys.readouterr().err
    assert main(["verilog", "-o", str(tmp_path / "z.v")]) == 2
    assert "needs --core" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["verilog", "--top", "soc", "-o", str(tmp_path / "w.v")])
    assert exc.value.code == 2 and "invalid choice: 'soc'" in capsys.readouterr().err


def test_take_home_testbench_of_the_subsystem(stories, tmp_path, capsys):
    """``ansforge testbench --top subsystem`` (the default format): PASS under Icarus and Verilator in the
    same number of clocks (one stall pattern, the testbench's own), a progress line every 10 % of the
    weights; one wrong expected weight of a lane, or one wrong tag (TUSER), fails in both."""
    out = tmp_path / "tb"
    assert main(["testbench", "--top", "subsystem", "--lanes", "2", "--model", str(stories), "--matrix", MATRIX,
                 "-o", str(out)]) == 0
    assert f"decompression subsystem ({DEFAULT_FORMAT}, 2 lanes, bf16)" in capsys.readouterr().out
    assert f"(subsystem-decoder, codec {DEFAULT_FORMAT})" in (out / "README.txt").read_text()
    runs = [subprocess.run(["sh", script], cwd=out, capture_output=True, text=True, timeout=600)
            for script in ("run_iverilog.sh", "run_verilator.sh")]
    for r in runs:
        assert r.returncode == 0 and "PASS: 2048 outputs" in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])
        assert r.stdout.count("progress: ") == 9
    cycles = [re.search(r"PASS: .* in (\d+) cycles", r.stdout).group(1) for r in runs]
    assert cycles[0] == cycles[1]
    good = (out / "lane1.hex").read_text().splitlines()
    # each line is {tag, weight}: lane 1 decodes the matrix's second block, tagged 1
    assert {int(v, 16) >> 16 for v in good} == {1}
    for flip, where in ((1, 500), (1 << 16, 300)):     # a weight's bit, then a tag's
        lines = list(good)
        lines[where] = format(int(lines[where], 16) ^ flip, f"0{len(lines[where])}x")
        (out / "lane1.hex").write_text("\n".join(lines) + "\n")
        for command in (["vvp", "-n", "tb.vvp"], ["obj_dir/Vtb"]):
            r = subprocess.run(command, cwd=out, capture_output=True, text=True, timeout=600)
            assert r.returncode != 0 and f"FAIL: lane 1 weight {where} " in r.stdout, (command, r.stdout[-1000:])



def test_cocotbext_axi_models_drive_the_default_format(stories, tmp_path, monkeypatch):
    """The exported subsystem (default format, 2 lanes, bf16) between cocotbext-axi's AXI4 RAM (random
    ARREADY and R pauses), AXI4-Lite master (the driver's register program) and AXI4-Stream sink (random
    TREADY pauses), on Icarus: two tensors of a default-format stories260K container (wq, 4,096 weights,
    and wk, 2,048) in blocks of 1,536 pairs, in two STARTs: the first wq's first two blocks, one a lane;
    the second wk's first block in lane 0 and, in lane 1, wq's last block then wk's last, its tables
    loaded between them. Every weight under TKEEP in its lane's slot equals ``decompress``'s, carries its
    block's tag on TUSER, and the weights put back in order by their tags are the STARTs' in container
    order.
    (Icarus runs the cocotb bench at about 300 weights a second: whole models go through Verilator in
    the tests above.)"""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    path = tmp_path / "stories.ansf"
    compress_checkpoint(stories, path, pairs="bf16", block_pairs=1536)
    c = open_container(path)
    assert {st.spec.name for st in c.streams} == {DEFAULT_FORMAT}
    names = ["layers.0.attention.wq.weight", "layers.0.attention.wk.weight"]
    plan = plan_container_subsystem(c, lanes=2, names=names, start_pairs=4096)
    dut = plan.dut
    programs = list(plan.programs)
    assert [[lane.size for lane in p.lanes] for p in programs] == [[1536, 1536], [1536, 1536]]
    decoded = {n: c.read(n).view(np.uint16).ravel() for n in names}
    got = np.sort(np.concatenate([lane for p in programs for lane in p.lanes]))
    assert np.array_equal(got, np.sort(np.concatenate(list(decoded.values()))))
    # the STARTs' weights one after another in container order, which the bench puts back by TUSER
    whole = np.concatenate([decoded[n] for n in names])
    beat_bytes = dut.bus_bits // 8
    vectors = {
        "seed": 7, "pause": 0.3, "base": MEMORY_BASE, "memory_bytes": 1 << 32, "timeout_us": 40_000,
        "id": CSR_ID, "params": dut.params_word(), "lanes": dut.lanes, "weight_bytes": 2, "tag_bits": TAG_BITS,
        "csr": {r.name: int(r) for r in Csr},
        "programs": [{"name": p.name, "weights": p.weights, "writes": p.writes,
                      "image": b"".join(sum(int(v) << (64 * j) for j, v in enumerate(row)).to_bytes(beat_bytes, "little")
                                        for row in p.beats.tolist()).hex(),
                      "lanes": [lane.astype("<u2").tobytes().hex() for lane in p.lanes],
                      "blocks": p.blocks, "ordered": whole[at:at + p.weights].astype("<u2").tobytes().hex()}
                     for p, at in zip(programs, np.cumsum([0] + [p.weights for p in programs]))],
    }
    module, verilog = exported_simulation_verilog(dut)
    (tmp_path / "subsystem.v").write_text(verilog)
    (tmp_path / "vectors.json").write_text(json.dumps(vectors))
    tests = Path(__file__).parent
    runner = get_runner("icarus")
    runner.build(sources=[tmp_path / "subsystem.v"], hdl_toplevel=module, build_dir=tmp_path / "build",
                 timescale=("1ns", "1ps"))
    monkeypatch.syspath_prepend(str(tests))
    results = runner.test(test_module="cocotb_subsystem_bench", hdl_toplevel=module, build_dir=tmp_path / "build",
                          test_dir=tmp_path, extra_env={"ANSFORGE_SUBSYSTEM_VECTORS": str(tmp_path / "vectors.json"),
                                                        "PYTHONPATH": str(tests) + ":" + ":".join(sys.path)})
    n, failures = get_results(results)
    assert n == 1 and failures == 0, (tmp_path / "build").as_posix()
