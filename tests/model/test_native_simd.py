"""The SIMD paths of the native kernels (model/coding/nativeans_simd.c) against the scalar kernels and the
golden coders, each path forced with ``nativeans.simd_level``: the rANS coders of the interleaved preset
(``rans16xN``; AVX-512 across the 16 states of ``N = 16``), the AVX-512 tANS encoder of ``N = 16``, the AVX2 values decoder of ``tans8x16``
and its relatives, and the AVX-512 F/BW (permute) one that level 2 runs on CPUs without VBMI. Same words, checkpoints, pairs, values and errors, on random tables and data: several
tables and runs, escape symbols, odd lengths, checkpoints that do and do not fall on a block of 16,
checkpoint (range) decodes and corrupt streams. A path the CPU lacks runs as the best one below it
(``simd_level`` caps at the CPU's), so every test runs everywhere; CI's CPU has AVX-512."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from ansforge.model.coding import fastans, fastpairs, nativeans
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.stream import Run, StreamError
from ansforge.model.dtypes.pairs import PAIR_FORMATS

from ..support import check_fast_decode, random_stream

LEVELS = (0, 1, 2)


@contextlib.contextmanager
def level(lv):
    old = nativeans.simd_level(-1)
    nativeans.simd_level(lv)
    try:
        yield
    finally:
        nativeans.simd_level(old)


def test_levels_are_capped_at_the_cpu():
    cpu = nativeans.cpu_simd_level
    assert cpu in LEVELS
    for lv in LEVELS:
        with level(lv):
            assert nativeans.simd_level(-1) == min(lv, cpu)
            assert nativeans.simd(-1) == (min(lv, cpu) > 0 or (lv >= 2 and bool(nativeans.cpu_has_vbmi_kernel)))
    with level(2):
        nativeans.simd(0)
        assert nativeans.simd_level(-1) == 0 and nativeans.simd(-1) is False


def _sizes(rng):
    # a long run (the vector path), a short one (scalar), an odd one, an empty one, another long one
    return [int(rng.integers(5000, 9000)), int(rng.integers(1, 40)), int(rng.integers(1025, 3000)) | 1, 0,
            int(rng.integers(2000, 6000))]


@pytest.mark.parametrize("codec", ["rans16x16", "rans16x5", "rans16x2", "tans8x16", "tans11x16", "tans5x16", "tans8x4"])
@pytest.mark.parametrize("fmt", ["bf16", "fp16", "fp32"])
def test_encode_every_level_equals_golden(codec, fmt):
    """Words and checkpoints of the native encoders at every level are the golden coder's (uint8/uint32
    pairs, what compress passes, and int64/uint64 ones), checkpoint intervals on and off a block of 16: the
    rANS preset's (AVX-512 across 16 states) and tANS's (AVX-512 for 16 states, pairs merged two at a time
    into the accumulator where they fit 56 bits); several tables and runs, escape symbols, odd lengths."""
    spec = parse_codec(codec)
    rng = np.random.default_rng(len(codec) * 7 + PAIR_FORMATS[fmt].total_bits)
    tables, s, e, runs, _, _ = random_stream(spec, rng, _sizes(rng), fmt)
    for interval in (0, 1024, 1000, 37):
        g = spec.coder().encode(tables, runs, s, e, interval)
        for lv in LEVELS:
            with level(lv):
                for ss, ee in ((s, e), (s.astype(np.uint8), e.astype(np.uint32))):
                    f = fastans.encode(spec, tables, runs, ss, ee, interval)
                    assert f.words.dtype == g.words.dtype and np.array_equal(f.words, g.words), (lv, interval)
                    assert f.checkpoints == g.checkpoints, (lv, interval)


@pytest.mark.parametrize("codec", ["rans16x16", "rans16x7"])
@pytest.mark.parametrize("fmt", ["bf16", "fp16", "fp32"])
def test_rans16_decode_every_level_equals_golden(codec, fmt):
    """Pairs (whole stream, segments side by side on 1 and 2 threads, checkpoint and range decodes) and
    values at every level are the golden decoder's."""
    spec = parse_codec(codec)
    f = PAIR_FORMATS[fmt]
    rng = np.random.default_rng(len(codec) * 11 + f.total_bits)
    tables, s, e, runs, cts, exps = random_stream(spec, rng, _sizes(rng), fmt)
    joins = [(ct, ex, 0) for ct, ex in zip(cts, exps)]
    want_v = np.concatenate([fastpairs.join_values(ct, ex, f, s[a:a + r.count], e[a:a + r.count])
                             for ct, ex, r, a in zip(cts, exps, runs, np.cumsum([0] + [r.count for r in runs]))])
    for interval in (0, 2048, 1000, 333):
        g = spec.coder().encode(tables, runs, s, e, interval)
        for lv in LEVELS:
            with level(lv):
                for threads in (1, 2):
                    ss, ee = fastans.decode_segments(spec, g.words, tables, runs, g.checkpoints, threads, compact=True)
                    assert np.array_equal(ss, s) and np.array_equal(ee, e), (lv, interval, threads)
                    v = fastans.decode_values(spec, g.words, tables, runs, g.checkpoints, joins, f, threads)
                    assert v is not None and np.array_equal(v, want_v), (lv, interval, threads)
                check_fast_decode(spec, g, tables, runs, s, e, rng)


def _outcome(fn):
    try:
        return ("ok", fn())
    except StreamError as exc:
        return ("err", str(exc))


@pytest.mark.parametrize("codec", ["rans16x16"])
def test_rans16_corrupt_streams_give_the_same_result_at_every_level(codec):
    """Flipped bits, cut streams and wrong checkpoints: every level returns the same pairs and values or
    raises the same error (never a crash)."""
    spec = parse_codec(codec)
    f = PAIR_FORMATS["bf16"]
    rng = np.random.default_rng(43)
    tables, s, e, runs, cts, exps = random_stream(spec, rng, [6000, 3000])
    joins = [(ct, ex, 0) for ct, ex in zip(cts, exps)]
    g = spec.coder().encode(tables, runs, s, e, 2048)
    for k in range(24):
        bad = g.words.copy()
        if k % 4 == 3:
            bad = bad[int(rng.integers(1, 40)):]
        else:
            for _ in range(1 + k % 3):
                bad[int(rng.integers(0, bad.size))] ^= np.uint16(1 << int(rng.integers(0, 16)))
        res = []
        for lv in LEVELS:
            with level(lv):
                pairs = _outcome(lambda: fastans.decode_segments(spec, bad, tables, runs, g.checkpoints, 1,
                                                                 compact=True))
                vals = fastans.decode_values(spec, bad, tables, runs, g.checkpoints, joins, f, 1)
                res.append((pairs, vals))
        for other in res[1:]:
            (pa, va), (pb, vb) = res[0], other
            assert pa[0] == pb[0]
            if pa[0] == "ok":
                assert all(np.array_equal(x, y) for x, y in zip(pa[1], pb[1]))
            else:
                assert pa[1] == pb[1]
            assert (va is None and vb is None) or (va is not None and vb is not None and np.array_equal(va, vb))


def test_rans16_kernel_arguments_are_checked():
    w = np.zeros(8, np.uint16)
    one = np.ones(1, np.int64)
    f = np.asarray([1 << 16], np.int64)
    z = np.zeros(1, np.int64)
    rt, re = np.zeros(2, np.int64), np.asarray([5, 2 ** 62], np.int64)
    st = np.full(16, 1 << 16, np.uint64)
    nul64, nul32 = np.zeros(0, np.int64), np.zeros(0, np.uint32)
    with pytest.raises(ValueError):  # output smaller than the pairs asked for
        nativeans.rans16_decode(w, np.asarray([8]), st, f, z, one, z, np.ones((1, 1), np.int64), rt, re,
                                np.zeros(1, np.int64), np.asarray([5]), 0, np.zeros(2, np.uint8), np.zeros(2, np.uint32),
                                0, nul64, nul64, nul32, nul32, 0, 0, 0, np.zeros(1, np.int64))
    with pytest.raises(ValueError):  # a frequency past 2^16
        nativeans.rans16_decode(w, np.asarray([8]), st, f + 1, z, one, z, np.ones((1, 1), np.int64), rt, re,
                                np.zeros(1, np.int64), np.asarray([5]), 0, np.zeros(5, np.uint8), np.zeros(5, np.uint32),
                                0, nul64, nul64, nul32, nul32, 0, 0, 0, np.zeros(1, np.int64))
    two = np.asarray([2], np.int64)
    for freq, cum in (([1 << 15, 1 << 15], [0, 1 << 15]), ([1 << 15, 1 << 14], [0, 1 << 15]),
                      ([1 << 15, 1 << 15], [0, 1 << 14])):
        # two symbols: the kernel builds its slot lookups from freq and cum, so the starts must be the
        # frequencies' prefix sums over all 2^16 slots (the first pair is the control)
        args = (w, np.asarray([8]), st, np.asarray(freq, np.int64), np.asarray(cum, np.int64), two,
                np.zeros(2, np.int64), np.ones((1, 2, 1), np.int64), rt, re, np.zeros(1, np.int64), np.asarray([5]),
                0, np.zeros(5, np.uint8), np.zeros(5, np.uint32), 0, nul64, nul64, nul32, nul32, 0, 0, 0,
                np.zeros(1, np.int64))
        if cum == [0, 1 << 15] and freq[1] == 1 << 15:
            nativeans.rans16_decode(*args)
        else:
            with pytest.raises(ValueError, match="table outside its limits"):
                nativeans.rans16_decode(*args)
    with pytest.raises(ValueError):  # N = 1 is not this preset
        nativeans.rans16_encode(np.zeros(5, np.uint8), np.zeros(5, np.uint32), rt, re, f, z, one, z, z,
                                np.ones((1, 1), np.int64), 1, 0, np.zeros(64, np.uint16), np.zeros((0, 4), np.uint64))


@pytest.mark.parametrize("extra_bits", [8, 19, 20, 21, 23, 24])
def test_tans_encode_pairs_of_every_width_around_the_vector_limits(extra_bits):
    """Pairs of up to 28 bits go into the accumulator two at a time, up to 32 one at a time in the vector
    encoder, wider ones in the scalar kernel only: widths on both sides of each limit (an R = 8 state's
    9 bits and the additional data's, escape indices included), the same words at every level."""
    spec = parse_codec("tans8x16")
    rng = np.random.default_rng(extra_bits)
    tables, syms, exs, runs = [], [], [], []
    for i, (n, n_codes) in enumerate(((7000, 3), (3001, 40), (5000, 64))):
        p = rng.dirichlet(np.full(n_codes, 0.3))
        codes = rng.choice(n_codes, size=n, p=p)
        ct, t = spec.tables(np.bincount(codes, minlength=n_codes), extra_bits)
        sy, ex = ct.to_symbols(codes, rng.integers(0, 1 << extra_bits, n, dtype=np.uint64))
        tables.append(t), syms.append(sy), exs.append(ex), runs.append(Run(i, n))
    s, e = np.concatenate(syms), np.concatenate(exs)
    g = spec.coder().encode(tables, runs, s, e, 1000)
    for lv in LEVELS:
        with level(lv):
            f = fastans.encode(spec, tables, runs, s.astype(np.uint8), e.astype(np.uint32), 1000)
            assert np.array_equal(f.words, g.words) and f.checkpoints == g.checkpoints, lv


@pytest.mark.parametrize("codec", ["rans16x16", "tans8x16"])
def test_bad_pairs_are_the_golden_errors(codec):
    """A symbol outside its table or additional data wider than its symbol's, inside a group of 16 the
    vector encoders would take, and at the stream's ends: the golden coder's error at every level."""
    spec = parse_codec(codec)
    rng = np.random.default_rng(9)
    tables, s, e, runs, _, _ = random_stream(spec, rng, [4000])
    for edit, i in (("extra", 1500), ("symbol", 2001), ("extra", 7), ("symbol", 3999)):
        s2, e2 = s.astype(np.uint8), e.astype(np.uint32)
        if edit == "extra":
            e2[i] = 1 << 20
        else:
            s2[i] = 250
        with pytest.raises(Exception) as g:
            spec.coder().encode(tables, runs, s2.astype(np.int64), e2.astype(np.uint64))
        for lv in LEVELS:
            with level(lv), pytest.raises(type(g.value), match=str(g.value).split(":")[0]):
                fastans.encode(spec, tables, runs, s2, e2)


@pytest.mark.parametrize("codec", ["tans8x16", "tans11x16", "tans5x16", "tans7x16"])
@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_tans_values_decoder_every_level_equals_the_scalar_one(codec, fmt):
    """The AVX2 values kernel (level 1; N = 16, 16-bit values), the AVX-512 ones (level 2: the VBMI kernel
    where the CPU has it, else the permute kernel for L <= 256 (tans5/7/8: one, four and eight register
    pairs), else AVX2 again) and the scalar one give the same values, and the same None for corrupt
    streams."""
    spec = parse_codec(codec)
    f = PAIR_FORMATS[fmt]
    rng = np.random.default_rng(len(codec) * 17 + f.total_bits)
    tables, s, e, runs, cts, exps = random_stream(spec, rng, _sizes(rng), fmt)
    joins = [(ct, ex, 0) for ct, ex in zip(cts, exps)]
    for interval in (300, 1024, 10 ** 6):
        g = spec.coder().encode(tables, runs, s, e, interval)
        res = []
        for lv in LEVELS:
            with level(lv):
                res.append([fastans.decode_values(spec, g.words, tables, runs, g.checkpoints, joins, f, th)
                            for th in (1, 3)])
        assert res[0][0] is not None
        assert all(np.array_equal(r, res[0][0]) for rr in res for r in rr)
    for k in range(16):
        bad = g.words.copy()
        bad[int(rng.integers(0, bad.size))] ^= np.asarray(1 << int(rng.integers(0, 16)), bad.dtype)
        got = []
        for lv in LEVELS:
            with level(lv):
                got.append(fastans.decode_values(spec, bad, tables, runs, g.checkpoints, joins, f, 1))
        assert all((a is None and got[0] is None) or (a is not None and got[0] is not None and np.array_equal(a, got[0]))
                   for a in got)


def test_tans_avx2_row_shifts():
    spec = parse_codec("tans8x16")
    f = PAIR_FORMATS["bf16"]
    rng = np.random.default_rng(12)
    n, z = 20000, 3
    codes = rng.choice(6, size=n, p=[.5, .2, .1, .1, .05, .05]).astype(np.uint16)
    counts = np.bincount(codes, minlength=6).astype(np.int64)
    extra = rng.integers(0, 1 << (f.extra_bits - z), n, dtype=np.uint64)
    ct, t = spec.tables(counts, f.extra_bits - z)
    s, e = ct.to_symbols(codes, extra)
    g = spec.coder().encode([t], [Run(0, n)], s, e, 1500)
    full_ct, _ = spec.tables(counts, f.extra_bits)
    exps = np.arange(6) + 100
    want = fastpairs.join_values(full_ct, exps, f, s, e << np.uint64(z))
    for lv in LEVELS:
        with level(lv):
            got = fastans.decode_values(spec, g.words, [t], [Run(0, n)], g.checkpoints, [(full_ct, exps, z)], f, 1)
        assert np.array_equal(got, want), lv


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_rans16_values_with_escapes_in_a_small_table(fmt):
    """A long run of a table of at most 32 symbols whose rare codes are escapes (the AVX-512 kernel's
    search-and-permute path and its escape permute): every level gives the golden pairs' values."""
    spec = parse_codec("rans16x16")
    f = PAIR_FORMATS[fmt]
    rng = np.random.default_rng(77 + f.total_bits)
    n = 40000
    common = rng.choice(10, size=n, p=np.full(10, 0.1)).astype(np.uint16)
    rare = np.arange(10, 30).repeat(2)  # 20 codes twice each: cheaper as one escape group than as symbols
    common[rng.choice(n, size=rare.size, replace=False)] = rare
    counts = np.bincount(common, minlength=30).astype(np.int64)
    extra = rng.integers(0, 1 << f.extra_bits, n, dtype=np.uint64)
    ct, t = spec.tables(counts, f.extra_bits)
    assert ct.escape_codes and t.freqs.size <= 32
    s, e = ct.to_symbols(common, extra)
    exps = np.sort(rng.choice(1 << f.exponent_bits, size=30, replace=False))
    want = fastpairs.join_values(ct, exps, f, s, e)
    g = spec.coder().encode([t], [Run(0, n)], s, e, 4096)
    for lv in LEVELS:
        with level(lv):
            got = fastans.decode_values(spec, g.words, [t], [Run(0, n)], g.checkpoints, [(ct, exps, 0)], f, 1)
            assert got is not None and np.array_equal(got, want), lv
            ss, ee = fastans.decode_segments(spec, g.words, [t], [Run(0, n)], g.checkpoints, 1, compact=True)
            assert np.array_equal(ss, s) and np.array_equal(ee, e), lv


def _escape_table(spec, rng, n, n_common, n_rare, fmt, z):
    """Pairs of a tensor of a few common codes and ``n_rare`` rare ones (three times each), which the code table
    groups under its escape symbol, coded with ``w - z`` bits of additional data."""
    f = PAIR_FORMATS[fmt]
    codes = rng.choice(n_common, size=n, p=rng.dirichlet(np.full(n_common, 2.0))).astype(np.uint16)
    rare = np.arange(n_common, n_common + n_rare).repeat(3)
    codes[rng.choice(n, size=rare.size, replace=False)] = rare
    counts = np.bincount(codes, minlength=n_common + n_rare).astype(np.int64)
    ct, t = spec.tables(counts, f.extra_bits - z)
    s, e = ct.to_symbols(codes, rng.integers(0, 1 << (f.extra_bits - z), n, dtype=np.uint64))
    exps = np.sort(rng.choice(1 << f.exponent_bits, size=n_common + n_rare, replace=False))
    full_ct = spec.tables(counts, f.extra_bits)[0]  # the join's: w bits of which the table codes w - z
    assert full_ct.escape_codes == ct.escape_codes
    return full_ct, t, s, e, exps


@pytest.mark.parametrize("groups", [(20, 30, 60), (20, 28)])
def test_tans_permute_kernel_escapes_shifts_and_runs(groups):
    """The AVX-512 F/BW permute kernel (level 2 where the CPU has AVX-512 but not the VBMI kernel: CI's
    Cascade Lake) against the scalar kernel, bit for bit: one stream of tables switching by runs, each
    with an escape group (sizes ``groups``; where every group of the call has at most 32 exponents they
    are looked up with a permute, else lane by lane), the second table under row shift z = 2, the last
    one's escapes in most lanes; checkpoints off a block of 16 (segments ending mid-block), the golden
    values where z = 0, and flipped bits and a cut stream giving None at both levels alike."""
    spec = parse_codec("tans8x16")
    f = PAIR_FORMATS["bf16"]
    rng = np.random.default_rng(4316 + len(groups))
    zs = [2 if i == 1 else 0 for i in range(len(groups))]
    parts = [_escape_table(spec, rng, 9001 - 2000 * i, 12 if i + 1 < len(groups) else 2, g, "bf16", z)
             for i, (g, z) in enumerate(zip(groups, zs))]
    assert [len(p[0].escape_codes) for p in parts] == list(groups)
    tables = [p[1] for p in parts]
    runs = [Run(i, p[2].size) for i, p in enumerate(parts)]
    s, e = np.concatenate([p[2] for p in parts]), np.concatenate([p[3] for p in parts])
    joins = [(p[0], p[4], z) for p, z in zip(parts, zs)]
    g = spec.coder().encode(tables, runs, s, e, 1000)

    def both(words):
        got = []
        for lv in (0, 2):
            with level(lv):
                got.append(fastans.decode_values(spec, words, tables, runs, g.checkpoints, joins, f, 1))
        a, b = got
        assert (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
        return a

    v = both(g.words)
    assert v is not None
    for i in range(len(parts)):
        if zs[i] == 0:
            lo = sum(r.count for r in runs[:i])
            want = fastpairs.join_values(parts[i][0], parts[i][4], f, parts[i][2], parts[i][3])
            assert np.array_equal(v[lo:lo + runs[i].count], want)
    nones = 0
    for k in range(16):
        bad = g.words.copy()
        if k == 15:
            bad = bad[5:]
        else:
            bad[int(rng.integers(0, bad.size))] ^= np.asarray(1 << int(rng.integers(0, 16)), bad.dtype)
        nones += both(bad) is None
    assert nones > 0
