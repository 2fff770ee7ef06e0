"""The two-state tANS decoder of ``hdl/tans/decoder_x2.py`` (issue 18): ``tans8x2`` streams (docs/bitstream.md §8)
through :class:`~ansforge.hdl.tans.TansX2DecoderCoder`, selected by ``codec.states`` inside
``TansDecoder``: the formal harnesses' build ``tans-decoder-x2`` (``ansforge prove``), no longer what the
core registry ships (that is ``hdl/tans/cores_xn.py``'s ``TansXnDecoder`` for every N, tested with its
whole-model run, area budget and the ``tans8x2`` build in ``tests/test_tans_xn.py``).

Bit-exact against the golden model in the Amaranth simulator (random back-pressure, fixed and
programmable tables, other table sizes and word widths, resumed blocks, corrupt streams), back-to-back
commands, reset, lint, the CLI's ``tans8x2``, and ``synthesize``'s 512-deep LUT-RAM mapping.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from ansforge.analysis.area import LINT_KINDS, lint_warnings, synthesize
from ansforge.hdl.common import DecodeStatus
from ansforge.hdl.tans import TansDecoder, TansX2DecoderCoder
from ansforge.hdl.verilog import core_verilog
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.stream import Run
from ansforge.model.errors import ConfigError
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.jobs import CoreJob, blocks_job, make_job, stream_blocks
from ansforge.sim.streams import stream_get, stream_put



def build_core(kind, spec, table=None, **options):
    """The two-state datapath this file tests (``hdl/tans/cores.py`` TansDecoder, its TansX2DecoderCoder: the formal
    harnesses' build ``tans-decoder-x2``), with :func:`ansforge.sim.jobs.build_core`'s defaults; the core
    registry's ``tans8x2`` core (``hdl/tans/cores_xn.py``) is tested in ``tests/test_tans_xn.py``."""
    assert kind == "tans-decoder", kind
    k = options.pop("max_extra_bits", None)
    k = k if k is not None else max(8, int(table.extra_bits.max())) if table is not None else 8
    return TansDecoder(spec, table=table, max_extra_bits=k, **options)


#: Idle clocks between two back-to-back commands' pairs (inputs offered, outputs taken): the
#: first words and state reads of the next stream's head, which nothing overlaps yet (as the one-state
#: coder: ``tests/test_command_queue.py``; the issue's zero needs a second bit window).
X2_IDLE_BOUND = 4


def _table(rng, codec="tans8x2", n_codes=20):
    counts = (rng.integers(1, 1000, size=n_codes) ** 2).astype(np.int64)
    spec = parse_codec(codec)
    ct, table = spec.tables(counts, 8)
    return spec, ct, table, counts


def _pairs(rng, ct, counts, n):
    return ct.to_symbols(rng.choice(counts.size, size=n, p=counts / counts.sum()), rng.integers(0, 256, size=n))


@pytest.mark.parametrize("codec,programmable", [("tans8x2", True), ("tans8x2", False), ("tans5x2", True),
                                                ("tans12x2", False)])
def test_bit_exact_with_back_pressure_amaranth(codec, programmable):
    """Streams of 1, 2, 3 and a few hundred pairs (odd and even counts: the last pair in either
    lane), with and without random valid/ready gaps: the golden decoder's pairs, status OK. (A
    programmable 4096-entry tans12x2 table is left out: its cfg load alone is 4096 clocks of the
    Python simulator, and programmable tables of other sizes take the same path.)"""
    rng = np.random.default_rng(len(codec) + programmable)
    spec, ct, table, counts = _table(rng, codec)
    core = build_core("tans-decoder", spec, table, programmable=programmable)
    assert isinstance(core.shape, object) and core.codec.states == 2
    for n in (1, 2, 3, 257):
        s, e = _pairs(rng, ct, counts, n)
        job = make_job("tans-decoder", spec, table, s, e, core=core)
        for stall in (0.0, 0.3):
            ok, errs = job.check(AmaranthEngine().run(job, stall_prob=stall, seed=n))
            assert ok, (n, stall, errs)


@pytest.mark.parametrize("R,W,K", [(8, 8, 8), (8, 24, 8), (8, 32, 8), (8, 16, 0), (10, 8, 12)])
def test_other_word_and_extra_widths_amaranth(R, W, K):
    """Words of 8, 24 (not a power of two: the ring's selects take ``rp·W + offset``) and 32 bits, no
    extra bits, and fields wider than a word (R + K = 22 > W = 8): bit-exact with back-pressure."""
    from ansforge.model.coding.codecs import TansCodec
    spec = TansCodec.of(table_log=R, word_bits=W, states=2)
    rng = np.random.default_rng(R * W + K)
    counts = (rng.integers(1, 1000, size=20) ** 2).astype(np.int64)
    ct, table = spec.tables(counts, K)
    core = build_core("tans-decoder", spec, table, programmable=True, max_extra_bits=max(K, int(table.extra_bits.max())))
    for n in (1, 5, 61):
        s, e = ct.to_symbols(rng.choice(counts.size, size=n, p=counts / counts.sum()),
                             rng.integers(0, 1 << K, size=n) if K else np.zeros(n, np.int64))
        job = make_job("tans-decoder", spec, table, s, e, core=core)
        ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.3, seed=n))
        assert ok, (n, errs)


def test_resumed_blocks_at_odd_and_even_checkpoints_amaranth():
    """A stream cut at checkpoints every 7 pairs (so blocks start in either lane), one command per
    block, the command's state field holding both lanes (the block's first lane lowest)."""
    rng = np.random.default_rng(21)
    spec, ct, table, counts = _table(rng)
    n = 60
    s, e = _pairs(rng, ct, counts, n)
    st = spec.coder().encode([table], [Run(0, n)], s, e, checkpoint_interval=7)
    assert {cp.pair % 2 for cp in st.checkpoints} == {0, 1}
    blocks = stream_blocks(st.words, st.checkpoints, n, word_bits=16)
    core = build_core("tans-decoder", spec, table, programmable=True)
    job = blocks_job("tans-decoder", spec, table, core, [(b, b.words) for b in blocks])
    shape = core.signature.members["o"].signature.members["payload"].shape
    job.expected = (np.asarray(s, np.uint64) << np.uint64(shape["symbol"].offset)) | \
        (np.asarray(e, np.uint64) << np.uint64(shape["extra"].offset))
    job.expected_status = [0] * len(blocks)
    ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.25, seed=2))
    assert ok, errs


def test_corrupt_streams_end_with_their_status_amaranth():
    """A zero top word (no marker), too few words, too few pairs (final states not 0 or trailing
    bits) and a word too many: each command ends with its error status and the next decodes."""
    rng = np.random.default_rng(3)
    spec, ct, table, counts = _table(rng)
    s, e = _pairs(rng, ct, counts, 40)
    good = make_job("tans-decoder", spec, table, s, e, programmable=True)
    core = good.core
    words = spec.coder().encode([table], [Run(0, 40)], s, e).words
    w = np.asarray(words, np.uint64)[::-1].copy()             # top first, as the core reads them
    cmd = {"count": 40, "resume": 0, "check_end": 1, "check_crc": 0, "crc": 0}
    from ansforge.sim.streams import pack, payload_shape
    shape = payload_shape(core, "cmd")
    zero_top = w.copy()
    zero_top[0] = 0
    cases = [(zero_top, 40, {DecodeStatus.NO_MARKER.value}),
             (w[:-2], 40, {DecodeStatus.OUT_OF_WORDS.value}),
             (w, 37, {DecodeStatus.FINAL_STATE.value, DecodeStatus.TRAILING_DATA.value}),  # a pair short
             (np.concatenate([w, np.zeros(1, np.uint64)]), 40, {DecodeStatus.TRAILING_DATA.value})]
    for words_in, count, statuses in cases:
        job = CoreJob("tans-decoder", core, cfg=good.cfg, pairs=count + good.pairs, words=int(words_in.size) + good.words)
        job.commands = [pack(shape, {**cmd, "count": count, "words": int(words_in.size)}), good.commands[0]]
        job.inputs = np.concatenate([words_in, good.inputs])
        res = AmaranthEngine().run(job)
        assert res.statuses[0] in statuses and res.statuses[1] == 0, (statuses, res.statuses)
        # the good stream after the bad one decodes bit-exact
        assert np.array_equal(np.asarray(res.outputs[-40:], np.uint64), good.expected)


def _queued(commands=4, pairs=40, seed=1, programmable=False):
    rng = np.random.default_rng(seed)
    spec, ct, table, counts = _table(rng)
    core = build_core("tans-decoder", spec, table, programmable=programmable)
    parts = [make_job("tans-decoder", spec, table, *_pairs(rng, ct, counts, pairs), core=core) for _ in range(commands)]
    job = CoreJob("tans-decoder", core, cfg=parts[0].cfg, pairs=commands * pairs, words=sum(p.words for p in parts))
    job.commands = [c for p in parts for c in p.commands]
    job.inputs = np.concatenate([p.inputs for p in parts])
    job.expected = np.concatenate([p.expected for p in parts])
    job.expected_status = [0] * commands
    return job, [len(p.inputs) for p in parts]


def test_back_to_back_commands_idle_clocks():
    """Commands queued, words offered, pairs taken: bit-exact, and between the last pair of one command
    and the first of the next at most the next stream's two state reads."""
    commands, pairs = 4, 41
    job, _ = _queued(commands, pairs)
    core = job.core
    res = AmaranthEngine().run(job, trace={"pair": core.o.valid & core.o.ready, "done": core.done})
    ok, errs = job.check(res)
    assert ok, errs
    t = np.flatnonzero(res.trace["pair"])
    idle = [int(t[k * pairs] - t[k * pairs - 1] - 1) for k in range(1, commands)]
    assert max(idle) <= X2_IDLE_BOUND, idle
    assert int(res.trace["done"].sum()) == commands


def decode_after_reset(job) -> list[int]:
    """Write ``job``'s table through ``cfg``, reset the core for 3 clocks, then run its first command:
    the pairs the decoder gives (its status must be OK). (The one-state core's reset is tested in
    ``tests/test_command_queue.py``.)"""
    core = job.core
    rst = Signal()
    top = Module()
    top.submodules.core = ResetInserter({"sync": rst})(core)
    got = []

    async def drive(ctx):
        for w in job.cfg["cfg"]:
            await stream_put(ctx, core.cfg, w)
        ctx.set(rst, 1)
        await ctx.tick().repeat(3)
        ctx.set(rst, 0)
        await stream_put(ctx, core.cmd, job.commands[0])
        for w in job.inputs.tolist():
            await stream_put(ctx, core.i, w)

    async def collect(ctx):
        while True:
            got.append(await stream_get(ctx, core.o))

    async def finish(ctx):
        await ctx.tick().until(core.cmd.valid & core.cmd.ready)
        await ctx.tick().until(core.done)
        assert ctx.get(core.status).name == "OK"

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(drive, background=True)
    sim.add_testbench(collect, background=True)
    sim.add_testbench(finish)
    sim.run()
    return got



def test_reset_keeps_the_programmed_table():
    """A table written through cfg survives a reset (memories are not reset): after it the decoder
    decodes with that table, without reloading, bit-exact and OK."""
    job, _ = _queued(commands=1, pairs=300, seed=8, programmable=True)
    got = decode_after_reset(job)
    assert np.array_equal(np.array(got, dtype=np.uint64), job.expected)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_states_and_options_the_core_takes():
    """The tANS decoder takes 1 or 2 states (one line for others); two states refuse table sets;
    shell=False is the two-state coder alone."""
    with pytest.raises(ConfigError, match="takes streams of 1 or 2 states"):
        build_core("tans-decoder", parse_codec("tans8x4"), programmable=True)
    spec = parse_codec("tans8x2")
    with pytest.raises(ValueError, match="table_sets > 1 needs one state"):
        TansDecoder(spec, programmable=True, table_sets=2)
    coder = build_core("tans-decoder", spec, programmable=True, shell=False)
    assert set(coder.signature.members) == set(TansX2DecoderCoder(coder.shape).signature.members)
    assert len(coder.state) == 16     # both lanes
    shelled = build_core("tans-decoder", spec, programmable=True)
    assert set(shelled.blocks()) == {"coder", "bit window", "state update", "shell", "crc"}


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_a_table_deeper_than_256_states_is_measured_in_ram512x1s():
    """tans10x2: a 1024-state table, which yosys' own UltraScale LUT-RAM library cannot map (it offers
    a 512-deep single-port option its mapping file does not build); ``synthesize`` maps it with that
    option corrected: two RAM512X1S per entry bit, 8 LUTs each in the LUT-equivalents."""
    from ansforge.hdl.tans import decoder_entry_layout

    core = build_core("tans-decoder", parse_codec("tans10x2"), programmable=True, shell=False)
    r = synthesize(core_verilog(core), widelut=False)
    assert r["lutram"] == 2 * decoder_entry_layout(core.shape).size, r
    assert r["lut_equivalents"] == r["luts"] + 8 * r["lutram"], r


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("shell", [True, False])
def test_lint_no_warning_from_our_names(shell):
    """verilator -Wall on the two-state core: only Amaranth's own patterns remain."""
    counts = lint_warnings(core_verilog(TansDecoder(parse_codec("tans8x2"), programmable=True, shell=shell)))
    assert counts.get("WIDTH", 0) > 0, "verilator printed no WIDTH warning: the lint did not run"
    assert set(counts) <= set(LINT_KINDS), counts


def test_cli_simulate_and_verilog_take_tans8x2(stories, tmp_path):
    """``simulate --codec tans8x2`` (a matrix's first 200 pairs: both lanes, the command's end check)
    and ``verilog --codec tans8x2 --no-shell``; a build of another N is refused (status 2)."""
    from ansforge.cli import main
    assert main(["simulate", "--core", "tans-decoder", "--codec", "tans8x2", "--model", str(stories),
                 "--matrix", "layers.0.attention.wq.weight", "--engine", "amaranth", "--limit", "200"]) == 0
    v = tmp_path / "x2.v"
    assert main(["verilog", "--core", "tans-decoder", "--codec", "tans8x2", "--no-shell", "-o", str(v)]) == 0
    assert "start__valid" in v.read_text()
    # (the tans-encoder takes tans8x2 since issue 18's encoder: tests/test_tans_x2_encoder.py; the tANS cores
    # take N = 1 .. 16 since issue 42, tests/test_core_registry.py; a build and a codec of other N: status 2)
    assert main(["simulate", "--core", "tans-decoder-x2", "--codec", "tans8x3", "--model", str(stories)]) == 2
