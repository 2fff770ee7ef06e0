"""The board top in Verilator behind a pseudo-terminal, driven by the host code a real board gets
(``ansforge.sim.board``; pyserial on the pseudo-terminal): stories260K's tensors come out with the
software decode's count and CRC-32 on two lanes at once, a corrupted block is reported with its decode
status, the protocol answers what it must to bad commands and stays in step, and ``ansforge board run
--sim`` prints each block and fails in one line on bad input."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import serial

from ansforge.analysis.board import design_clock_mhz
from ansforge.cli import main
from ansforge.hdl.board import BoardReg, Command, Reply
from ansforge.hdl.subsystem import CSR_ID, Csr
from ansforge.model.coding.container import compress_checkpoint, open_container
from ansforge.model.errors import ConfigError
from ansforge.sim.board import BoardLink, block_parts, board_run, board_starts, run_start, simulated_board
from ansforge.sim.container_plan import container_blocks, container_lanes

LANES = 2
TENSORS = ["tok_embeddings.weight", "layers.0.attention.wq.weight", "layers.1.feed_forward.w2.weight",
           "layers.2.attention_norm.weight", "norm.weight"]


@pytest.fixture(scope="module")
def container(stories, tmp_path_factory):
    out = tmp_path_factory.mktemp("board") / "stories.ansf"
    compress_checkpoint(stories, out, pairs="bf16")
    return open_container(out)


@pytest.fixture(scope="module")
def board():
    # the build `ansforge board run --sim --lanes 2` makes: the CLI test below finds it compiled
    with simulated_board(lanes=LANES, clock_hz=round(design_clock_mhz("ulx3s-85f", LANES)[0] * 1e6)) as b:
        yield b


@pytest.fixture()
def link(board):
    with serial.Serial(board.port, timeout=30) as port:
        yield BoardLink(port, name="simulated board")


def test_stories_tensors_through_the_board_match_the_software_decode(container, link):
    info, results = board_run(link, container, names=TENSORS)
    assert info.lanes == LANES and info.codec == "tans8x16"
    by_tensor = {r.tensor for r in results}
    assert by_tensor == set(TENSORS)
    for r in results:
        assert r.ok, r
        assert r.count == r.pairs > 0 and r.cycles >= r.pairs
    # both lanes decode at once: some START holds two blocks
    assert max(sum(1 for x in results if x.start == r.start) for r in results) == LANES
    big = max(results, key=lambda r: r.pairs)
    assert big.pairs_per_clock() > 0.8, big          # one pair per clock less the table load


def test_a_corrupted_block_is_reported_with_its_status(container, link):
    info = link.info()
    dut = info.decompressor()
    need = container_lanes(container, ["layers.0.attention.wk.weight"])
    blocks = [("layers.0.attention.wk.weight", i, b) for i, b in enumerate(container_blocks(container, dut, need))]
    (program, items), = board_starts(dut, blocks, info.memory_beats)
    good, = run_start(link, dut, 0, program, items)
    assert good.ok
    beats = program.beats.copy()
    beats[-3] ^= np.uint64(0x0F0F_0000_F0F0)           # words of the block, near its end
    bad, = run_start(link, dut, 1, type(program)(**{**vars(program), "beats": beats}), items)
    assert not bad.ok and bad.status != "OK" and bad.crc != bad.expected_crc
    # the next START is clean again: a decode error does not stick
    again, = run_start(link, dut, 2, program, items)
    assert again.ok


def test_a_block_cut_at_checkpoints_decodes_in_parts_on_both_lanes(container, link):
    """What a block larger than the board's memory goes through: parts resumed at checkpoints."""
    name = "layers.0.feed_forward.w1.weight"
    info = link.info()
    dut = info.decompressor()
    need = container_lanes(container, [name])
    blk, = container_blocks(container, dut, need)
    parts = block_parts(container, dut, blk, 3000)
    assert [p.count for p in parts] == [3000, 3000, 3000, 2008]
    assert [(p.part["resume"], p.part["partial"]) for p in parts] == [(0, 1), (1, 1), (1, 1), (1, 0)]
    starts = board_starts(dut, [(name, f"0 part {j}", p) for j, p in enumerate(parts)], info.memory_beats)
    assert [len(items) for _, items in starts] == [LANES, LANES]
    results = [r for s, (program, items) in enumerate(starts) for r in run_start(link, dut, s, program, items)]
    assert all(r.ok for r in results), results
    assert sum(r.count for r in results) == blk.count


def test_the_protocol_answers_bad_commands_and_stays_in_step(link):
    port = link.port
    port.write(b"\x00")
    assert port.read(1) == bytes([Reply.UNKNOWN])
    port.write(struct.pack("<BHI", Command.WRITE_REG, BoardReg.ID, 1))           # the board's are read-only
    assert port.read(1) == bytes([Reply.SLVERR])
    port.write(struct.pack("<BH", Command.READ_REG, 0x1FFC))                      # no register there
    assert port.read(5)[4] == Reply.SLVERR
    beats = link.read_reg(BoardReg.MEMORY_BEATS)
    port.write(struct.pack("<BII", Command.WRITE_MEM, beats - 1, 2) + bytes(16))  # one beat past the end
    assert port.read(1) == bytes([Reply.RANGE])
    assert link.read_reg(Csr.ID) == CSR_ID


def test_a_block_larger_than_the_memory_is_refused_naming_it(container, link):
    info = link.info()
    dut = info.decompressor()
    need = container_lanes(container, ["layers.0.feed_forward.w1.weight"])
    blocks = [("layers.0.feed_forward.w1.weight", i, b) for i, b in enumerate(container_blocks(container, dut, need))]
    with pytest.raises(ConfigError, match=r"tensor 'layers.0.feed_forward.w1.weight', block 0: .* memory holds 64 beats"):
        board_starts(dut, blocks, 64)


def test_board_run_sim_prints_each_block(container, board, capsys):
    assert main(["board", "run", "--sim", "--lanes", str(LANES), str(container.path), "--tensor",
                 "layers.3.attention.wv.weight", "--tensor", "norm.weight"]) == 0
    out = capsys.readouterr().out
    assert "layers.3.attention.wv.weight block 0: 2,048 pairs" in out and "norm.weight block 0: 64 pairs" in out
    assert "every count and CRC-32 equal to the software decode" in out


@pytest.mark.parametrize("args, match", [
    (["--sim", "missing.ansf"], "missing.ansf"),
    (["--port", "/dev/nonexistent-ansforge-board", "CONTAINER"], "--port /dev/nonexistent-ansforge-board"),
    (["--sim", "--lanes", "2", "CONTAINER", "--tensor", "no.such.tensor"], "--tensor no.such.tensor: "),
    (["--port", "/dev/null", "--lanes", "2", "CONTAINER"], "--lanes and --codec describe a simulated build"),
])
def test_board_run_refuses_bad_input_in_one_line(container, board, args, match, capsys):
    args = [str(container.path) if a == "CONTAINER" else a for a in args]
    assert main(["board", "run", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0] and err[0].startswith("ansforge: error:"), err
