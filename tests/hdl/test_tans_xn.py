"""The tANS cores for N interleaved states (issue 42, ``hdl/tans/cores_xn.py``: what the core registry
builds for every tANS codec, N = 1 .. 16): ``tans8xN`` streams (docs/bitstream.md §8) bit-exact
against the golden model (``parse_codec("tans8xN").coder()``) for N = 1, 2, 3 and 16 in the Amaranth
simulator under back-pressure, table sets, resumed blocks, corrupt streams, back-to-back commands
within N + 4 idle clocks; a long stream through Verilator with and without gaps. Whole models through
the ``tans8x16`` and ``tans8`` cores are ``tests/hdl/test_whole_models.py``'s; the coders' area, levels and
lint at N = 1, 2 and 16, ``tests/hdl/test_budgets.py``'s (``ansforge bench`` measures N = 4 and 8).
"""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.hdl.common import DecodeStatus
from ansforge.hdl.tans_xn import TansXnDecoder, TansXnDecoderCoder, TansXnEncoder, TansXnEncoderCoder
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.stream import Run
from ansforge.model.errors import ConfigError
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.jobs import CoreJob, blocks_job, make_job, stream_blocks
from ansforge.sim.streams import pack, payload_shape
from ansforge.sim.verilator import VerilatorEngine



def _codec(n):
    return parse_codec("tans8" if n == 1 else f"tans8x{n}")


def _table(rng, n, extra_bits=6, n_codes=20):
    """A table whose fields fit a word (R + K = 16 with escapes: the paper's packer)."""
    spec = _codec(n)
    counts = (rng.integers(1, 1000, size=n_codes) ** 2).astype(np.int64)
    ct, table = spec.tables(counts, extra_bits)
    return spec, ct, table, counts


def _pairs(rng, ct, counts, n, extra_bits=6):
    return ct.to_symbols(rng.choice(counts.size, size=n, p=counts / counts.sum()),
                         rng.integers(0, 1 << extra_bits, size=n))


def _core(cls, spec, table, programmable):
    return cls(spec, table=table, programmable=programmable, max_extra_bits=max(8, int(table.extra_bits.max())))


def _lengths(n):
    return sorted({1, 2, max(1, n - 1), n, n + 1, 2 * n + 3, 61})


#: N = 1 (the one-state coder inside), 2, 3 (odd, not a power of two) and 16 (the default); fixed
#: tables at odd N, programmable at even N.
BIT_EXACT_N = [1, 2, 3, 16]


@pytest.mark.parametrize("n", BIT_EXACT_N)
def test_decoder_bit_exact_with_back_pressure(n):
    """Streams shorter than, as long as and longer than N pairs (the last pair in any lane), with
    random valid/ready gaps: the golden decoder's pairs, status OK, end check passed."""
    rng = np.random.default_rng(n)
    spec, ct, table, counts = _table(rng, n)
    core = _core(TansXnDecoder, spec, table, programmable=n % 2 == 0)
    for k, count in enumerate(_lengths(n)):
        job = make_job("tans-decoder", spec, table, *_pairs(rng, ct, counts, count), core=core)
        stall = 0.0 if k == 0 else 0.3
        res = AmaranthEngine().run(job, stall_prob=stall, seed=count)
        ok, errs = job.check(res)
        assert ok, (n, count, stall, errs)
        # A pair leaves only in a clock in which o is ready; without gaps o is ready in every clock.
        assert count <= res.ready_cycles <= res.cycles and (stall > 0 or res.ready_cycles == res.cycles), \
            (count, res.ready_cycles, res.cycles)


@pytest.mark.parametrize("n", BIT_EXACT_N)
def test_encoder_bit_exact_with_back_pressure(n):
    """Empty streams, streams shorter and longer than N pairs, random valid/ready gaps: the golden
    encoder's words (the flush's N states and the marker included), ``last`` on the final one."""
    rng = np.random.default_rng(100 + n)
    spec, ct, table, counts = _table(rng, n)
    core = _core(TansXnEncoder, spec, table, programmable=n % 2 == 0)
    for k, count in enumerate([0] + _lengths(n)):
        job = make_job("tans-encoder", spec, table, *_pairs(rng, ct, counts, count), core=core)
        stall = 0.0 if k == 1 else 0.3
        ok, errs = job.check(AmaranthEngine().run(job, stall_prob=stall, seed=count))
        assert ok, (n, count, stall, errs)


@pytest.mark.parametrize("n", [2, 16])
def test_wide_fields_round_trip(n):
    """Escape fields wider than a word (R + K = 21 > W): the encoder's wide packer writes the golden
    words and the decoder reads them back."""
    rng = np.random.default_rng(7 * n)
    spec, ct, table, counts = _table(rng, n, extra_bits=13)
    for cls, kind in ((TansXnEncoder, "tans-encoder"), (TansXnDecoder, "tans-decoder")):
        core = _core(cls, spec, table, programmable=True)
        job = make_job(kind, spec, table, *_pairs(rng, ct, counts, 3 * n + 1, 13), core=core)
        ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.2, seed=n))
        assert ok, (kind, errs)


def _context(n, cols=64):
    from ansforge.model.coding.context import encode_context
    from ansforge.model.dtypes.pairs import BF16, fp32_to_bf16_rne
    rng = np.random.default_rng(5)
    scale = np.float32(2.0) ** (np.arange(12) % 4 * 4)[:, None].astype(np.float32)
    w = rng.standard_normal((12, cols)).astype(np.float32) * scale * np.float32(1e-3)
    coded = encode_context(_codec(n), [("rows-of-4-scales", fp32_to_bf16_rne(w))], BF16,
                           groups=(1,), axes=("rows",), max_sets=4)
    assert coded.plans[0].n_sets >= 2
    return coded, max(8, max(int(t.extra_bits.max()) for t in coded.tables))


@pytest.mark.parametrize("role,n", [("encoder", 2), ("encoder", 16), ("decoder", 1), ("decoder", 16)])
def test_table_sets_under_back_pressure(role, n):
    """Context tables (runs of table sets, a switch every 64 pairs): the encoder's pair ``set`` rides
    through the ring with its slot; the decoder's runs on ``sel`` follow its table reads, which run
    ahead of the pairs. Bit-exact with random valid/ready gaps."""
    from ansforge.sim.context import context_matrix_job
    coded, extra = _context(n)
    cls = TansXnEncoder if role == "encoder" else TansXnDecoder
    core = cls(coded.spec, programmable=True, max_extra_bits=extra, table_sets=4)
    job = context_matrix_job(f"tans-{role}", coded, 0, core)
    if role == "decoder":
        # The same stream twice, back to back: the reads past the first command's last pair take no
        # run of the second's.
        job.commands, job.inputs = job.commands * 2, np.concatenate([job.inputs, job.inputs])
        job.side = {"sel": job.side["sel"] * 2}
        job.expected, job.expected_status = np.concatenate([job.expected, job.expected]), job.expected_status * 2
        job.pairs, job.words = 2 * job.pairs, 2 * job.words
    ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.3, seed=2))
    assert ok, errs


@pytest.mark.parametrize("n", [2, 16])
def test_resumed_blocks(n):
    """A stream cut at checkpoints every 7 pairs (blocks start in every lane), one command per block,
    its ``state`` field holding the N lane states (the block's first pair's lane lowest)."""
    rng = np.random.default_rng(21 + n)
    spec, ct, table, counts = _table(rng, n)
    count = 7 * n + 3 if n <= 4 else 60
    s, e = _pairs(rng, ct, counts, count)
    st = spec.coder().encode([table], [Run(0, count)], s, e, checkpoint_interval=7)
    blocks = stream_blocks(st.words, st.checkpoints, count, word_bits=16)
    core = _core(TansXnDecoder, spec, table, programmable=True)
    job = blocks_job("tans-decoder", spec, table, core, [(b, b.words) for b in blocks])
    shape = core.signature.members["o"].signature.members["payload"].shape
    job.expected = (np.asarray(s, np.uint64) << np.uint64(shape["symbol"].offset)) | \
        (np.asarray(e, np.uint64) << np.uint64(shape["extra"].offset))
    job.expected_status = [0] * len(blocks)
    ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.25, seed=2))
    assert ok, errs


def test_corrupt_streams_end_with_their_status():
    """No marker, too few words (the pairs', the last word's, or the head states' of a command of no
    pairs), a pair short, a word too many: each command ends with its error status and the good stream
    after it decodes bit-exact. (A stream that ends inside its head states was reported OK on a
    command of no pairs, found by the formal ``detection`` of ``tans-decoder-x2``.)"""
    n = 4
    rng = np.random.default_rng(3)
    spec, ct, table, counts = _table(rng, n)
    s, e = _pairs(rng, ct, counts, 40)
    good = make_job("tans-decoder", spec, table, s, e, core=_core(TansXnDecoder, spec, table, True))
    core = good.core
    w = np.asarray(spec.coder().encode([table], [Run(0, 40)], s, e).words, np.uint64)[::-1].copy()
    empty = np.asarray(spec.coder().encode([table], [Run(0, 0)], s[:0], e[:0]).words, np.uint64)[::-1].copy()
    assert empty.size > 1
    # A marker word, then zero words holding every head state but the last whole: only the last state's
    # read runs past the end (its missing bits would read as zeros, a legal final state).
    R, W = spec.params.table_log, spec.params.word_bits
    k, b = divmod((n - 1) * R, W)
    short_head = np.array([1 << b] + [0] * k, np.uint64)
    cmd = {"count": 40, "resume": 0, "check_end": 1, "check_crc": 0, "crc": 0}
    zero_top = w.copy()
    zero_top[0] = 0
    cases = [(zero_top, 40, {DecodeStatus.NO_MARKER.value}),
             (w[:-2], 40, {DecodeStatus.OUT_OF_WORDS.value}),
             (w, 37, {DecodeStatus.FINAL_STATE.value, DecodeStatus.TRAILING_DATA.value}),
             (np.concatenate([w, np.zeros(1, np.uint64)]), 40, {DecodeStatus.TRAILING_DATA.value}),
             (w[:-1], 40, {DecodeStatus.OUT_OF_WORDS.value}),
             (empty[:1], 0, {DecodeStatus.OUT_OF_WORDS.value}),
             (short_head, 0, {DecodeStatus.OUT_OF_WORDS.value}),
             (empty, 0, {DecodeStatus.OK.value})]
    for words_in, count, statuses in cases:
        job = CoreJob("tans-decoder", core, cfg=good.cfg, pairs=count + good.pairs,
                      words=int(words_in.size) + good.words)
        job.commands = [pack(payload_shape(core, "cmd"), {**cmd, "count": count, "words": int(words_in.size)}),
                        good.commands[0]]
        job.inputs = np.concatenate([words_in, good.inputs])
        res = AmaranthEngine().run(job)
        assert res.statuses[0] in statuses and res.statuses[1] == 0, (statuses, res.statuses)
        assert np.array_equal(np.asarray(res.outputs[-40:], np.uint64), good.expected)


def _queued(cls, kind, n, commands, pairs, seed=1):
    rng = np.random.default_rng(seed)
    spec, ct, table, counts = _table(rng, n)
    core = _core(cls, spec, table, programmable=False)
    parts = [make_job(kind, spec, table, *_pairs(rng, ct, counts, pairs), core=core) for _ in range(commands)]
    job = CoreJob(kind, core, cfg=parts[0].cfg, pairs=commands * pairs, words=sum(p.words for p in parts))
    job.commands = [c for p in parts for c in p.commands]
    job.inputs = np.concatenate([p.inputs for p in parts])
    job.expected = np.concatenate([p.expected for p in parts])
    job.expected_status = [0] * commands
    return job


@pytest.mark.parametrize("kind", ["tans-decoder", "tans-encoder"])
@pytest.mark.parametrize("n", [2, 16])
def test_back_to_back_commands_within_n_plus_4_idle_clocks(kind, n):
    """Commands queued, inputs offered, outputs taken: bit-exact, one ``done`` per command, one pair
    per clock inside a command and at most N + 4 idle clocks at a boundary (the decoder's marker
    word and N state reads; the encoder's N flush steps and the packer's marker clock)."""
    commands, pairs = 3, 2 * n + 7
    cls = TansXnDecoder if kind == "tans-decoder" else TansXnEncoder
    job = _queued(cls, kind, n, commands, pairs)
    core = job.core
    port = core.o if kind == "tans-decoder" else core.i
    res = AmaranthEngine().run(job, trace={"pair": port.valid & port.ready, "done": core.done})
    ok, errs = job.check(res)
    assert ok, errs
    t = np.flatnonzero(res.trace["pair"])
    assert t.size == commands * pairs
    # Idle clocks a boundary costs: command k's pairs take ``pairs`` clocks after command k - 1's last
    # pair, plus these (the encoder's packer spends its marker clock right after the next stream's
    # first pair, so the clocks are counted over the whole command, not just before its first pair).
    idle = [int(t[(k + 1) * pairs - 1] - t[k * pairs - 1]) - pairs for k in range(1, commands)]
    assert max(idle) <= n + 4, idle
    assert int(t[pairs - 1] - t[0]) == pairs - 1       # one pair per clock inside a command
    assert int(res.trace["done"].sum()) == commands


@pytest.mark.parametrize("stall", [0.0, 0.2])
def test_long_stream_round_trip_verilator(stall):
    """tans8x16, 200,000 pairs: the encoder writes the golden words and the decoder reads the
    golden pairs (Verilator, the Verilog that ships); without gaps at least 0.999 pairs per clock
    each, latency, prologue and flush included; with gaps, bit-exact."""
    n, count = 16, 200_000
    rng = np.random.default_rng(9)
    spec, ct, table, counts = _table(rng, n, n_codes=40)
    s, e = _pairs(rng, ct, counts, count)
    for cls, kind in ((TansXnEncoder, "tans-encoder"), (TansXnDecoder, "tans-decoder")):
        core = _core(cls, spec, table, programmable=True)
        job = make_job(kind, spec, table, s, e, core=core)
        res = VerilatorEngine().run(job, stall_prob=stall, seed=1)
        ok, errs = job.check(res)
        assert ok, (kind, errs)
        if stall == 0:
            assert count / res.cycles >= 0.999, (kind, res.cycles)
            assert res.ready_cycles == res.cycles
        elif kind == "tans-decoder":
            # Under back-pressure the decoder keeps up with o: at least 0.99 pairs per clock in which
            # o was ready (its input words come with gaps too, and a word carries several pairs).
            assert count <= res.ready_cycles < res.cycles and count / res.ready_cycles >= 0.99, \
                (res.ready_cycles, res.cycles)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_states_and_options():
    """N = 1 .. 16 are taken (N = 1: the one-state coders); 17 is not a codec; shell=False is the
    coder alone."""
    for n in (1, 3, 16):
        TansXnDecoder(_codec(n), programmable=True)
        TansXnEncoder(_codec(n), programmable=True)
    with pytest.raises((ConfigError, ValueError)):
        parse_codec("tans8x17")
    dec = TansXnDecoder(_codec(8), programmable=True, shell=False)
    assert set(dec.signature.members) == set(TansXnDecoderCoder(dec.shape, 8).signature.members)
    enc = TansXnEncoder(_codec(8), programmable=True, shell=False)
    assert set(enc.signature.members) == set(TansXnEncoderCoder(enc.shape, 8).signature.members)
    with pytest.raises(ValueError, match="states"):
        TansXnDecoderCoder(dec.shape, 1)
    for n in (1, 8):
        assert set(TansXnDecoder(_codec(n), programmable=True).blocks()) == \
            {"coder", "bit window", "state update", "shell", "crc"}
        assert set(TansXnEncoder(_codec(n), programmable=True).blocks()) == {"coder", "shell"}
