"""The board's own blocks in the Amaranth simulator: the UART (bytes out of the transmitter come back out of
the receiver, a low stop bit is a framing error), the banked block memory (AXI4 reads in order with their
IDs under back-pressure, out of range answered DECERR) and the board registers the host reads."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from ansforge.hdl.board import BOARD_ID, BlockMemory, BoardCore, BoardReg, UartRx, UartTx
from ansforge.hdl.subsystem import CSR_ID
from ansforge.sim.formal.benches import unused_ok


def test_uart_bytes_come_back_in_order_across_gaps():
    rng = random.Random(3)
    div = 5
    m = Module()
    m.submodules.tx = tx = UartTx(div)
    m.submodules.rx = rx = UartRx(div)
    m.d.comb += rx.rx.eq(tx.tx)
    sent = [rng.randrange(256) for _ in range(40)]
    got = []

    async def send(ctx):
        for b in sent:
            for _ in range(rng.choice([0, 0, 3, 17])):
                await ctx.tick()
            ctx.set(tx.i.payload, b)
            ctx.set(tx.i.valid, 1)
            await ctx.tick().until(tx.i.ready)
            ctx.set(tx.i.valid, 0)

    async def receive(ctx):
        ctx.set(rx.o.ready, 1)
        while len(got) < len(sent):
            await ctx.tick()
            if ctx.get(rx.o.valid):
                got.append(ctx.get(rx.o.payload))
            assert not ctx.get(rx.framing_error)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(send)
    sim.add_testbench(receive)
    sim.run_until(1e-8 * 40 * 10 * div * 3)
    assert got == sent


def test_a_low_stop_bit_is_a_framing_error_and_no_byte():
    div = 4
    rx = UartRx(div)
    seen = {"bytes": 0, "errors": 0}

    async def line(ctx):
        bits = [0] + [1, 0, 1, 0, 1, 0, 1, 0] + [0]        # stop bit low
        for bit in bits + [1] * 4:
            ctx.set(rx.rx, bit)
            for _ in range(div):
                await ctx.tick()
                seen["bytes"] += ctx.get(rx.o.valid)
                seen["errors"] += ctx.get(rx.framing_error)

    sim = Simulator(rx)
    sim.add_clock(1e-8)
    sim.add_testbench(line)
    sim.run()
    assert seen == {"bytes": 0, "errors": 1}


@pytest.mark.parametrize("beats", [300, 2100])       # one bank; five banks behind two multiplexer levels
def test_block_memory_answers_reads_in_order_with_their_ids(beats):
    rng = random.Random(beats)
    base = 0x8000_0000
    mem = BlockMemory(beats=beats, data_bits=64, id_bits=2, base=base, bank_beats=512)
    content = {b: rng.getrandbits(64) for b in rng.sample(range(beats), 120)}
    reads = [(rng.choice(list(content)), rng.randrange(4)) for _ in range(150)] + [(beats, 1), (beats + 7, 2)]
    got = []

    async def write_then_read(ctx):
        for b, d in content.items():
            ctx.set(mem.wr.p.beat, b)
            ctx.set(mem.wr.p.data, d)
            ctx.set(mem.wr.valid, 1)
            await ctx.tick()
        ctx.set(mem.wr.valid, 0)
        for b, i in reads:
            ctx.set(mem.s_axi.araddr, base + 8 * b)
            ctx.set(mem.s_axi.arid, i)
            ctx.set(mem.s_axi.arvalid, 1)
            while True:                     # the read is taken at the edge where ARREADY is high
                *_, taken = await ctx.tick().sample(mem.s_axi.arready)
                if taken:
                    break
            ctx.set(mem.s_axi.arvalid, 0)
            for _ in range(rng.choice([0, 0, 0, 2])):
                await ctx.tick()

    async def take(ctx):
        while len(got) < len(reads):
            ready = rng.random() < 0.7
            ctx.set(mem.s_axi.rready, ready)
            *_, valid, rdata, rid, rresp = await ctx.tick().sample(mem.s_axi.rvalid, mem.s_axi.rdata, mem.s_axi.rid,
                                                                     mem.s_axi.rresp)
            if ready and valid:
                got.append((rdata, rid, rresp))

    sim = Simulator(mem)
    sim.add_clock(1e-8)
    sim.add_testbench(write_then_read)
    sim.add_testbench(take)
    sim.run_until(1e-8 * 4000)
    want = [(content[b], i, 0) if b < beats else (0, i, 3) for b, i in reads]
    assert got == want
    assert mem.latency == 4 + {300: 0, 2100: 2}[beats]


def test_the_board_describes_itself_in_its_registers():
    core = BoardCore(lanes=2, memory_beats=1024, clock_hz=62_500_000, divisor=21)
    regs = core.board_registers()
    assert regs[BoardReg.ID] == BOARD_ID != CSR_ID
    assert regs[BoardReg.MEMORY_BEATS] == 1024 and regs[BoardReg.CLOCK_HZ] == 62_500_000
    name = b"".join(regs[BoardReg.CODEC + 4 * i].to_bytes(4, "little") for i in range(8)).rstrip(b"\0")
    assert name == core.subsystem.codec.name.encode() == b"tans8x16"
    assert core.memory_bytes == 1024 * core.subsystem.bus_bits // 8
    unused_ok(core, core.subsystem, core.subsystem.parallel)      # described, never built


@pytest.mark.parametrize("kwargs, match", [
    (dict(memory_beats=8), "memory_beats must be between 16"),
    (dict(divisor=2), "divisor must be between 4"),
])
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_impossible_boards_are_refused(kwargs, match):
    args = dict(memory_beats=1024, clock_hz=50_000_000, divisor=16) | kwargs
    with pytest.raises(ValueError, match=match):
        BoardCore(**args)


def test_the_ulx3s_top_binds_its_pins_pll_and_clock():
    from ansforge.analysis.board import pll_config
    from ansforge.hdl.board import BOARDS, BoardTop

    board = BOARDS["ulx3s-85f"]
    pll, mhz = pll_config(board.oscillator_hz / 1e6, 75)
    assert mhz == 75 and board.oscillator_hz / 1e6 / pll["CLKI_DIV"] * pll["CLKFB_DIV"] == 75
    core = BoardCore(lanes=1, memory_beats=1024, clock_hz=75_000_000, divisor=25)
    plan = board.platform_class()().prepare(BoardTop(core, board, pll), name="top")
    lpf, il = plan.files["top.lpf"], plan.files["top.il"]
    for port, site in (("clk25_0__io", "G2"), ("uart_0__rx__io", "M1"), ("uart_0__tx__io", "L4"), ("led_0__io", "B2")):
        assert f'LOCATE COMP "{port}" SITE "{site}";' in lpf
    assert "FREQUENCY NET" in lpf and "75000000" in lpf.replace(".0 HZ", " HZ").replace(" ", "")
    assert "EHXPLLL" in il and f"CLKFB_DIV {pll['CLKFB_DIV']}" in il


def test_openfpgaloader_knows_the_board_readme_programs():
    import subprocess

    out = subprocess.run(["openFPGALoader", "--list-boards"], capture_output=True, text=True, timeout=60).stdout
    assert any(line.split()[:1] == ["ulx3s"] for line in out.splitlines())


def test_board_build_refuses_what_it_cannot_build_in_one_line(tmp_path, capsys):
    from ansforge.cli import main

    for args, match in ((["--lanes", "4"], "no default clock for 4 lanes on ulx3s-85f"),
                        (["--lanes", "3"], "--lanes 3: 1, 2, 4 or 8"),
                        (["--clock-mhz", "900"], "clock must be between 10 and 400 MHz")):
        assert main(["board", "build", *args, "-o", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and match in err[0], err
        assert not (tmp_path / "out").exists()


def test_the_cli_names_the_boards_the_registry_has():
    from ansforge.cli.board import BOARD_NAMES
    from ansforge.hdl.board import BOARDS

    assert tuple(BOARDS) == BOARD_NAMES
