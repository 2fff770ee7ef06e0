"""Decoder cores on container blocks: clean blocks decode, every corrupted block is flagged, none hangs.

A stream is cut into blocks at its checkpoints exactly as the container cuts it
(:func:`~ansforge.model.coding.stream.block_ranges`); each block is one decoder command that starts at its
checkpoint and checks the block's CRC-32 (:func:`~ansforge.model.coding.stream.block_crc`) in hardware.
Corrupted blocks run back to back in one Verilator job, so the test also shows that a core recovers:
each command must drain its words and leave the next command a clean start.
"""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.hdl.common import DecodeStatus
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.stream import Run, StreamError, block_crc
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.jobs import blocks_job, build_core, make_job, stream_blocks
from ansforge.sim.streams import pack
from ansforge.sim.verilator import VerilatorEngine
from ..support import corrupt_words

N_PAIRS = 3000
INTERVAL = 500
CASES_PER_CODEC = 400          # x 3 codecs = 1200 corrupted blocks
CYCLE_SLACK = 16               # per command: FSM states, pipeline, CRC check


def _stream(codec: str, seed: int):
    rng = np.random.default_rng(seed)
    spec = parse_codec(codec)
    counts = (rng.integers(1, 1000, size=24) ** 2).astype(np.int64)
    ct, table = spec.tables(counts, 8)
    s, e = ct.to_symbols(rng.choice(24, size=N_PAIRS, p=counts / counts.sum()), rng.integers(0, 256, size=N_PAIRS))
    st = spec.coder().encode([table], [Run(0, N_PAIRS)], s, e, checkpoint_interval=INTERVAL)
    return spec, table, s, e, st




@pytest.mark.parametrize("codec, kind", [("tans8", "tans-decoder"), ("rans16", "rans-decoder"),
                                         ("rans24", "rans-decoder")])
def test_corrupted_blocks_are_flagged(codec, kind):
    spec, table, s, e, st = _stream(codec, seed=len(codec) + ord(kind[0]))
    core = build_core(kind, spec, table)
    blocks = stream_blocks(st.words, st.checkpoints, N_PAIRS, word_bits=spec.word_bits)
    assert len(blocks) == N_PAIRS // INTERVAL
    engine = VerilatorEngine()

    # Clean: every block from its checkpoint gives its slice of pairs, status OK, CRC checked.
    job = blocks_job(kind, spec, table, core, [(b, b.words) for b in blocks])
    pair_shape = core.signature.members["o"].signature.members["payload"].shape
    job.expected = np.array([pack(pair_shape, {"symbol": int(a), "extra": int(b)}) for a, b in zip(s, e)],
                            dtype=np.uint64)
    job.expected_status = [DecodeStatus.OK.value] * len(blocks)
    res = engine.run(job)
    assert job.check(res)[0], job.check(res)[1]

    # Corrupted: 400 blocks back to back, each followed by nothing but the next corrupted block.
    rng = np.random.default_rng(ord(codec[-1]))
    runs, modes = [], []
    for _ in range(CASES_PER_CODEC):
        blk = blocks[int(rng.integers(len(blocks)))]
        mode, bad = corrupt_words(rng, blk.words, spec.word_bits)
        if np.array_equal(bad, blk.words):      # a flip that undid itself (same bit twice)
            bad = bad.copy()
            bad[0] ^= np.uint64(1)
        runs.append((blk, bad))
        modes.append(mode)
    job = blocks_job(kind, spec, table, core, runs)
    bound = sum(b.count + int(w.size) + CYCLE_SLACK for b, w in runs)
    res = engine.run(job, max_cycles=bound)        # TimeoutError past the bound: a hang
    assert len(res.statuses) == CASES_PER_CODEC
    flagged = [st_ != DecodeStatus.OK.value for st_ in res.statuses]
    missed = [modes[i] for i, f in enumerate(flagged) if not f]
    assert not missed, f"{len(missed)} corrupted blocks ended OK: {missed[:5]}"
    assert res.cycles <= bound
    reasons = {DecodeStatus(v).name for v in res.statuses}
    assert "CRC" in reasons, reasons


def test_extra_bit_flip_needs_the_crc():
    """A flipped bit of raw additional data decodes without an ANS error; only the CRC sees it."""
    spec, table, s, e, st = _stream("rans16", seed=11)
    coder = spec.coder()
    words = np.asarray(st.words)
    rng = np.random.default_rng(3)
    for _ in range(200):   # find a flip the golden decoder cannot detect: it lands in additional data
        addr, bit = int(rng.integers(words.size)), int(rng.integers(spec.word_bits))
        bad = words.copy()
        bad[addr] ^= bad.dtype.type(1 << bit)
        try:
            s2, e2, _ = coder.decode(bad, [table], [Run(0, N_PAIRS)], 0, N_PAIRS)
        except StreamError:
            continue
        if not np.array_equal(e2, e):
            break
    else:
        pytest.fail("no undetectable flip found")
    core = build_core("rans-decoder", spec, table)
    for check_crc, want in ((0, DecodeStatus.OK), (1, DecodeStatus.CRC)):
        job = make_job("rans-decoder", spec, table, s, e, core=core)
        job.inputs = bad[::-1].astype(np.uint64)
        shape = core.signature.members["cmd"].signature.members["payload"].shape
        job.commands = [pack(shape, {"count": N_PAIRS, "words": words.size, "check_end": 1, "check_crc": check_crc,
                                     "crc": block_crc(words)})]
        res = AmaranthEngine().run(job)
        assert res.statuses == [want.value]
        got_extra = np.array([v >> core.signature.members["o"].signature.members["payload"].shape["extra"].offset
                              for v in res.outputs], dtype=np.uint64) & np.uint64((1 << 8) - 1)
        assert not np.array_equal(got_extra, e & np.uint64(0xFF))   # wrong pairs: the state check alone passes them


@pytest.mark.parametrize("width", [8, 12, 16, 32])
def test_word_crc_matches_zlib_and_the_library(width):
    """The decoders' CRC unit against the model's block CRC (zlib for 8/16/32-bit words) and
    amaranth.lib.crc's software model, across a restart."""
    from amaranth.lib.crc.catalog import CRC32_ISO_HDLC
    from amaranth.sim import Simulator

    from ansforge.hdl.common import WordCrc

    rng = np.random.default_rng(width)
    words = [rng.integers(0, 1 << width, size=n).astype(np.uint64) for n in (1, 7, 40)]
    dut = WordCrc(CRC32_ISO_HDLC, width)
    got = []

    async def bench(ctx):
        for blk in words:
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.valid, 1)
            for w in blk.tolist():
                ctx.set(dut.data, w)
                await ctx.tick()
            ctx.set(dut.valid, 0)
            await ctx.tick()
            got.append(ctx.get(dut.crc))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for blk, value in zip(words, got):
        assert value == CRC32_ISO_HDLC(data_width=width).compute(blk.tolist())
        # block_crc takes words in decoding order from the top address: feed it the reverse
        assert value == block_crc(blk[::-1], word_bits=width)
