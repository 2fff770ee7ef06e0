"""The redesigned rANS cores (issue 19): bucket-table symbol search, coder alone, tables.

The short, structural checks run in the Amaranth simulator; all of stories260K runs in Verilator (with
and without back-pressure, and the clocks a command costs) in ``tests/hdl/test_whole_models.py``, the
coders' area in ``tests/hdl/test_budgets.py``. That a reset keeps a programmed table is ``tests/sim/test_contracts.py``'s ``test_a_reset_mid_command_keeps_the_contract_and_the_table`` (these
cores at ``rans16`` among every registered build: programmed, reset mid-command, the next command
bit-exact without a reload).
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from ansforge.hdl.rans import BUCKET_SPLITS, RansDecoder, RansEncoder, bucket_bits_for, rans_writes
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.rans import RANS_PRESETS, RansCoder, RansParams
from ansforge.model.coding.stream import Run
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.jobs import cfg_writes, make_job
from ansforge.sim.streams import pack, stream_get, stream_put
from ..support import crowded_freqs, rans_table


def _walks(table, bucket_bits):
    """Steps the decoder takes from its candidate to the symbol, for every quantile."""
    P = table.params.precision_bits
    q = np.arange(1 << P)
    right = np.searchsorted(table.cum[1:], q, side="right")
    b = table.core_buckets(bucket_bits, BUCKET_SPLITS)[q >> (P - bucket_bits)]
    low = q & ((1 << (P - bucket_bits)) - 1)
    cand = b[:, 0] + sum(low > b[:, 1 + j] for j in range(BUCKET_SPLITS))
    return np.abs(right - cand)


def test_bucket_table_candidates():
    """Exact (no step) where no bucket meets more than ``BUCKET_SPLITS + 1`` symbols (here: every frequency
    at least a quarter of a 1024-quantile bucket); otherwise a few steps, never more
    than the symbols a bucket meets, and the chosen window beats the naive 'symbol at the bucket start'."""
    rng = np.random.default_rng(5)
    wide = rng.integers(256, 2000, size=40)
    wide[-1] += (1 << 16) - wide.sum()
    assert (_walks(rans_table(wide), 6) == 0).all()
    t = rans_table(crowded_freqs(rng))
    steps = _walks(t, 6)
    assert steps.max() <= 63 and steps.sum() > 0
    q = np.arange(1 << 16)
    naive = np.abs(np.searchsorted(t.cum[1:], q, side="right")
                   - np.searchsorted(t.cum[1:], (q >> 10) << 10, side="right"))
    assert steps.sum() < naive.sum()
    assert bucket_bits_for(16) == 6 and bucket_bits_for(5) == 5


def test_crowded_table_decodes_and_encodes_bit_exact():
    """The general case (frequencies far below a bucket): the decoder steps, both cores stay exact."""
    rng = np.random.default_rng(9)
    freqs = crowded_freqs(rng)
    spec = parse_codec("rans16")
    table = rans_table(freqs, params=spec.rans)
    p = freqs / freqs.sum()
    # Favour the crowded symbols so that many pairs take the stepping path.
    w = np.where(freqs < 4, 50.0, 1.0) * p
    s = rng.choice(freqs.size, size=600, p=w / w.sum())
    e = rng.integers(0, 256, size=600)
    for kind in ("rans-decoder", "rans-encoder"):
        job = make_job(kind, spec, table, s, e, programmable=True)
        res = AmaranthEngine().run(job, stall_prob=0.2, seed=3)
        ok, errs = job.check(res)
        assert ok, errs
    job = make_job("rans-decoder", spec, table, s, e)
    res = AmaranthEngine().run(job)
    assert job.check(res)[0]
    assert res.cycles > s.size + 20        # the stepping path ran


def test_two_chunks_per_pair_bit_exact():
    """Additional data wider than P (24 bits at P = 16: two chunks, up to three words a pair) takes
    the general path of both cores: bit-exact, with back-pressure."""
    rng = np.random.default_rng(4)
    spec = parse_codec("rans16")
    freqs = rng.integers(1, 3000, size=20)
    freqs[-1] += (1 << 16) - freqs.sum()
    table = rans_table(freqs, params=spec.rans, extra=24)
    s = rng.choice(freqs.size, size=300, p=freqs / freqs.sum())
    e = rng.integers(0, 1 << 24, size=300)
    for kind in ("rans-decoder", "rans-encoder"):
        job = make_job(kind, spec, table, s, e, max_extra_bits=24)
        ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.2, seed=5))
        assert ok, (kind, errs)


def _simulate(top, core, bench, *feeders, cycles: int) -> list[int]:
    """Run ``bench`` with ``feeders`` in the background for ``cycles`` clocks; returns what ``core.o`` gave."""
    got = []

    async def collect(ctx):
        while True:
            got.append(await stream_get(ctx, core.o))

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    for f in feeders:
        sim.add_testbench(f, background=True)
    sim.add_testbench(collect, background=True)
    sim.run_until(1e-8 * cycles)
    return got


def _small_case(seed: int, n: int = 200):
    """A 20-symbol rans16 table, ``n`` pairs drawn from it and their golden words."""
    rng = np.random.default_rng(seed)
    spec = parse_codec("rans16")
    counts = (rng.integers(1, 300, size=20) ** 2).astype(np.int64)
    ct, table = spec.tables(counts, 8)
    s, e = ct.to_symbols(rng.choice(20, size=n, p=counts / counts.sum()), rng.integers(0, 256, size=n))
    return spec, table, s, e, RansCoder(spec.rans).encode([table], [Run(0, s.size)], s, e).words


def test_decoder_coder_alone():
    """``shell=False``: the coder driven through its own ports (load, run, ended) gives the
    golden pairs; its ports are the coder's, without cmd/status/done."""
    spec, table, s, e, words = _small_case(4)
    core = RansDecoder(table=table, max_extra_bits=int(table.extra_bits.max()), shell=False)
    members = set(core.signature.members)
    assert {"i", "o", "load", "run", "ended", "state"} <= members
    assert not members & {"cmd", "status", "done"}
    # The stream's start is the shell's job: pop the top words into the first state here.
    S, W = spec.rans.state_bits, spec.rans.word_bits
    stack = words[::-1].tolist()
    x = 0
    while x < 1 << (S - W) and stack:
        x = (x << W) | stack.pop(0)
    loaded = [False]

    async def bench(ctx):
        ctx.set(core.load_state, x)
        ctx.set(core.load, 1)
        await ctx.tick()
        ctx.set(core.load, 0)
        loaded[0] = True
        ctx.set(core.run, 1)
        await ctx.tick().until(core.step)
        n = 1
        while n < s.size:
            await ctx.tick()
            n += ctx.get(core.step)
        ctx.set(core.run, 0)

    async def feed(ctx):
        while not loaded[0]:           # a load empties the word buffer
            await ctx.tick()
        for w in stack:
            await stream_put(ctx, core.i, w)
        ctx.set(core.ended, 1)

    got = _simulate(core, core, bench, feed, cycles=600)
    shape = core.o.p.shape()
    assert got == [pack(shape, {"symbol": int(a), "extra": int(b)}) for a, b in zip(s, e)]


def test_encoder_coder_alone():
    """``shell=False`` encoder: pairs in through ``i`` with ``run``, ``flush`` at the end: the golden words."""
    spec, table, s, e, words = _small_case(6)
    core = RansEncoder(table=table, max_extra_bits=int(table.extra_bits.max()), shell=False)
    assert not set(core.signature.members) & {"cmd", "done"}
    shape = core.i.p.shape()

    async def bench(ctx):
        ctx.set(core.start, 1)
        await ctx.tick()
        ctx.set(core.start, 0)
        ctx.set(core.run, 1)
        for a, b in zip(s[::-1].tolist(), e[::-1].tolist()):
            await stream_put(ctx, core.i, pack(shape, {"symbol": a, "extra": b}))
        ctx.set(core.run, 0)
        ctx.set(core.flush, 1)

    got = _simulate(core, core, bench, cycles=600)
    assert got == words.tolist()


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_cfg_writes_cover_both_tables():
    """``rans_writes``: every symbol slot, then every bucket of the decoder's bucket table."""
    rng = np.random.default_rng(1)
    t = rans_table(crowded_freqs(rng))
    w = rans_writes(t, 64, table_set=1)
    assert len(w) == 64 + 64 and all(x["addr"] >> 7 == 1 for x in w)
    core = RansDecoder(programmable=True, table_sets=2)
    assert len(cfg_writes(core, [t, t])["cfg"]) == 2 * (64 + 64)
    assert RANS_PRESETS["paper"].state_bits == 48


def test_containers_written_with_the_old_64_bit_state_still_decode(stories, tmp_path, monkeypatch):
    """rans16 used S = 64 before the paper preset moved to S = 48: a container written that way
    records S in its codec record and still decodes, exactly, with S = 64."""
    import ansforge.model.coding.container as container
    import ansforge.model.coding.container.write as writer
    from ansforge.model.llm.checkpoint import open_checkpoint
    from ansforge.model.coding.codecs import RansCodec

    old = RansCodec("rans16", RansParams(64, 32, 16))
    monkeypatch.setattr(writer, "parse_codec", lambda name: old)
    path = tmp_path / "old.ansf"
    container.compress_checkpoint(stories, path, "rans16")
    monkeypatch.undo()
    c = container.open_container(path)
    assert {st.spec.rans.state_bits for st in c.streams} == {64}
    ck = open_checkpoint(stories)
    name = c.names[1]
    got, want = c.read(name), ck.tensor(name).array
    assert got.nbytes == want.nbytes and np.array_equal(got.view(np.uint8), want.view(np.uint8))
