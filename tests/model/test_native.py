"""The native kernels (model/coding/nativeans.c, through fastans and fastpairs) against the golden coders and the numba
kernels: identical words, checkpoints, decoded pairs, values and errors for every state count N = 1..16,
random tables (escape symbols, several tables and runs, row shifts), edge cases (no pairs, one pair, the
widest additional data a kernel takes) and fuzzed streams, which must raise the project's StreamError
exactly where the other kernels do and never crash."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest

from ansforge.model.coding import fastans, fastpairs, kernels, nativeans
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.dtypes.pairs import PAIR_FORMATS as FLOATS
from ansforge.model.dtypes.quantized import FP8_FORMATS
from ansforge.model.coding.stream import Checkpoint, Run, StreamError

from ..support import check_fast_decode, random_stream

STATES = list(range(1, 17))
PAIR_FORMATS = {**FLOATS, **FP8_FORMATS}


def test_the_extension_is_built_and_used():
    """CI installs with a compiler, so the extension must be there (no skip): without it every
    figure of the speed section would silently be the numba fallback's."""
    assert nativeans.tans_decode is not None and kernels.backend() == "native"


@contextlib.contextmanager
def backend(name):
    old = kernels.set_backend(name)
    try:
        yield
    finally:
        kernels.set_backend(old)


def _stream(spec, rng, n_tensors=3, fmt="bf16", sizes=None):
    """Tensors of random skewed exponent distributions (escape symbols included) as one stream; the
    second tensor small (under 300 pairs, possibly none)."""
    sizes = sizes or [int(rng.integers(0, 300)) if i == 1 else int(rng.integers(500, 3000)) for i in range(n_tensors)]
    return random_stream(spec, rng, sizes, fmt)


def _both(fn):
    """``fn()`` with the numba and with the native kernels."""
    out = []
    for name in ("numba", "native"):
        with backend(name):
            try:
                out.append(("ok", fn()))
            except StreamError as exc:
                out.append(("err", str(exc)))
    return out


def _same(a, b):
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("family", ["tans8", "tans11", "rans16", "rans24"])
@pytest.mark.parametrize("n", STATES)
def test_every_state_count_equals_golden_and_numba(family, n):
    spec = parse_codec(family if n == 1 else f"{family}x{n}")
    rng = np.random.default_rng(n * 101 + len(family))
    tables, s, e, runs, _, _ = _stream(spec, rng)
    for interval in (0, 257, 1000):
        g = spec.coder().encode(tables, runs, s, e, interval)
        for name in ("numba", "native"):
            with backend(name):
                f = fastans.encode(spec, tables, runs, s, e, interval)
                assert f.words.dtype == g.words.dtype and np.array_equal(f.words, g.words), name
                assert f.checkpoints == g.checkpoints, name
                check_fast_decode(spec, g, tables, runs, s, e, rng, checkpoints=2)
                for threads in (1, 2):
                    ss, ee = fastans.decode_segments(spec, g.words, tables, runs, g.checkpoints, threads, compact=True)
                    assert np.array_equal(ss, s) and np.array_equal(ee, e)


@pytest.mark.parametrize("codec", ["tans8", "tans8x4", "rans16", "rans16x3"])
def test_compact_inputs_give_the_same_words(codec):
    """uint8 symbols with uint32 additional data (what compress passes) code as int64/uint64 ones do."""
    spec = parse_codec(codec)
    tables, s, e, runs, _, _ = _stream(spec, np.random.default_rng(5))
    wide = fastans.encode(spec, tables, runs, s, e, 300)
    narrow = fastans.encode(spec, tables, runs, s.astype(np.uint8), e.astype(np.uint32), 300)
    assert np.array_equal(wide.words, narrow.words) and wide.checkpoints == narrow.checkpoints


@pytest.mark.parametrize("codec", ["tans8", "tans8x8", "tans12x16", "rans16", "rans24x5"])
@pytest.mark.parametrize("sizes", [[0], [1], [0, 1, 0], [2, 0, 3]])
def test_tiny_streams(codec, sizes):
    spec = parse_codec(codec)
    tables, s, e, runs, _, _ = _stream(spec, np.random.default_rng(len(sizes)), len(sizes), sizes=sizes)
    g = spec.coder().encode(tables, runs, s, e, 1)
    res = _both(lambda: fastans.encode(spec, tables, runs, s, e, 1))
    for kind, f in res:
        assert kind == "ok" and np.array_equal(f.words, g.words) and f.checkpoints == g.checkpoints
    res = _both(lambda: fastans.decode_segments(spec, g.words, tables, runs, g.checkpoints, 1))
    assert res[0][0] == "ok" and _same(res[0][1], res[1][1])
    assert np.array_equal(res[1][1][0], s)


@pytest.mark.parametrize("codec", ["tans5", "tans12x3", "rans16x2", "rans9"])
def test_widest_additional_data(codec):
    """fp32 pairs (24 bits) with escape symbols: the widest fields the container writes."""
    spec = parse_codec(codec)
    tables, s, e, runs, _, _ = _stream(spec, np.random.default_rng(9), fmt="fp32")
    assert max(int(t.extra_bits.max()) for t in tables) >= 24
    g = spec.coder().encode(tables, runs, s, e, 500)
    for kind, f in _both(lambda: fastans.encode(spec, tables, runs, s, e, 500)):
        assert np.array_equal(f.words, g.words) and f.checkpoints == g.checkpoints
    a, b = _both(lambda: fastans.decode_segments(spec, g.words, tables, runs, g.checkpoints, 2))
    assert _same(a, b) and np.array_equal(b[1][1], e)


@pytest.mark.parametrize("codec", ["tans8", "tans8x2", "tans9x7", "tans8x16", "rans16", "rans16x4"])
def test_fuzzed_streams_fail_as_numba_does(codec):
    """Random word flips, truncations, extensions and checkpoint edits: the native decoders give the
    numba decoders' pairs or their StreamError, message for message, and never crash."""
    spec = parse_codec(codec)
    rng = np.random.default_rng(sum(map(ord, codec)))
    tables, s, e, runs, _, _ = _stream(spec, rng)
    g = spec.coder().encode(tables, runs, s, e, 400)
    w0 = g.words
    for case in range(120):
        w = w0.copy()
        cps = list(g.checkpoints)
        kind = case % 5
        if kind == 0:
            for _ in range(int(rng.integers(1, 4))):
                w[int(rng.integers(0, w.size))] ^= np.asarray(1 << int(rng.integers(0, 8 * w.itemsize)), w.dtype)
        elif kind == 1:
            w = w[:int(rng.integers(0, w.size))]
        elif kind == 2:
            w = w[int(rng.integers(1, 4)):]
        elif kind == 3:
            w = np.concatenate([w, rng.integers(0, 1 << (8 * w.itemsize), int(rng.integers(1, 4))).astype(w.dtype)])
        elif cps:
            i = int(rng.integers(0, len(cps)))
            c = cps[i]
            st = c.state
            st = tuple((v + int(rng.integers(0, 3))) % 256 for v in st) if isinstance(st, tuple) \
                else (st + int(rng.integers(0, 3))) % 256
            cps[i] = Checkpoint(c.pair, max(0, c.word + int(rng.integers(-2, 3))), c.bit, st)
        a, b = _both(lambda: fastans.decode_segments(spec, w, tables, runs, cps, 1))
        assert a[0] == b[0] and _same(a[1], b[1]), (case, a, b)
        a, b = _both(lambda: fastans.decode(spec, w, tables, runs))
        assert a[0] == b[0] and _same(a[1], b[1]), (case, a, b)


@pytest.mark.parametrize("codec", ["tans8", "tans8x8", "tans7x16", "tans12x3"])
@pytest.mark.parametrize("fmt", ["bf16", "fp32", "fp16", "e4m3"])
def test_values_decoder_equals_the_join(codec, fmt):
    """decode_values (decode and join in one pass, row shifts included) gives join_values' bit
    patterns, and None (so the caller names the error) for corrupt streams."""
    spec = parse_codec(codec)
    f = PAIR_FORMATS[fmt]
    rng = np.random.default_rng(len(codec) * 7 + f.total_bits)
    tables, s, e, runs, cts, exps = _stream(spec, rng, fmt=fmt)
    g = spec.coder().encode(tables, runs, s, e, 300)
    ss, ee = fastans.decode_segments(spec, g.words, tables, runs, g.checkpoints, 1)
    want, a = [], 0
    for r, ct, ex in zip(runs, cts, exps):
        want.append(fastpairs.join_values(ct, ex, f, ss[a:a + r.count], ee[a:a + r.count]))
        a += r.count
    joins = [(ct, ex, 0) for ct, ex in zip(cts, exps)]
    for threads in (1, 3):
        got = fastans.decode_values(spec, g.words, tables, runs, g.checkpoints, joins, f, threads)
        assert got is not None and got.dtype == f.bits_dtype and np.array_equal(got, np.concatenate(want))
    for k in range(12):  # corrupt words: the values of the pair decoder and join, or None where they fail
        bad = g.words.copy()
        bad[int(rng.integers(0, bad.size))] ^= np.asarray(1 << int(rng.integers(0, 16)), bad.dtype)
        r = fastans.decode_values(spec, bad, tables, runs, g.checkpoints, joins, f, 1 + k % 2)
        try:
            ss, ee = fastans.decode_segments(spec, bad, tables, runs, g.checkpoints, 1)
        except StreamError:
            assert r is None
            continue
        parts, a = [], 0
        for rr, ct, ex in zip(runs, cts, exps):
            parts.append(fastpairs.join_values(ct, ex, f, ss[a:a + rr.count], ee[a:a + rr.count]))
            a += rr.count
        if any(p is None for p in parts):
            assert r is None
        else:
            assert r is not None and np.array_equal(r, np.concatenate(parts))


def _cpu_has_avx512_path() -> bool:
    """Whether this CPU has what the AVX-512 values kernel needs (Linux: /proc/cpuinfo)."""
    from pathlib import Path

    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512vbmi", "avx512dq", "bmi2"))


@contextlib.contextmanager
def simd(flag):
    old = nativeans.simd(-1)
    nativeans.simd(flag)
    try:
        yield
    finally:
        nativeans.simd(int(old))


def _cpu_simd_level() -> int:
    """The SIMD level nativeans_simd.c's kernels may use on this CPU: 2 AVX-512 F/BW/DQ/VL, 1 AVX2 (with
    BMI2 and FMA), 0 none (Linux: /proc/cpuinfo)."""
    from pathlib import Path

    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return 0
    if not all(f in flags for f in ("avx2", "bmi2", "fma")):
        return 0
    return 2 if all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq")) else 1


def test_simd_path_is_chosen_where_the_cpu_has_it():
    with simd(1):
        assert bool(nativeans.cpu_has_vbmi_kernel) == _cpu_has_avx512_path()
        assert nativeans.simd_level(-1) == nativeans.cpu_simd_level == _cpu_simd_level()
        assert nativeans.simd(-1) == (_cpu_has_avx512_path() or _cpu_simd_level() > 0)
    with simd(0):
        assert nativeans.simd(-1) is False and nativeans.simd_level(-1) == 0


@pytest.mark.parametrize("codec", ["tans8x16", "tans11x16", "tans5x16", "tans8x8", "tans5x8"])
@pytest.mark.parametrize("fmt", ["bf16", "fp16", "fp32"])
def test_simd_values_decoder_equals_the_scalar_one(codec, fmt):
    """The AVX-512 values kernels (N = 16 and 8, 16-bit values; N = 16, 32-bit values: segments side by
    side, several tables and runs, escape symbols, row shifts) and the scalar kernel, each forced, give
    the same values bit for bit, and the same None for corrupt streams."""
    spec = parse_codec(codec)
    f = PAIR_FORMATS[fmt]
    rng = np.random.default_rng(len(codec) * 13 + f.total_bits)
    tables, s, e, runs, cts, exps = _stream(spec, rng, n_tensors=4, fmt=fmt)
    for interval in (300, 1000, 10 ** 6):
        g = spec.coder().encode(tables, runs, s, e, interval)
        joins = [(ct, ex, 0) for ct, ex in zip(cts, exps)]
        with simd(0):
            want = fastans.decode_values(spec, g.words, tables, runs, g.checkpoints, joins, f, 1)
        with simd(1):
            got = fastans.decode_values(spec, g.words, tables, runs, g.checkpoints, joins, f, 1)
            got3 = fastans.decode_values(spec, g.words, tables, runs, g.checkpoints, joins, f, 3)
        assert want is not None and got is not None and np.array_equal(got, want) and np.array_equal(got3, want)
    for k in range(16):  # corrupt words: the same values or the same None
        bad = g.words.copy()
        bad[int(rng.integers(0, bad.size))] ^= np.asarray(1 << int(rng.integers(0, 16)), bad.dtype)
        with simd(0):
            want = fastans.decode_values(spec, bad, tables, runs, g.checkpoints, joins, f, 1)
        with simd(1):
            got = fastans.decode_values(spec, bad, tables, runs, g.checkpoints, joins, f, 1)
        assert (want is None and got is None) or np.array_equal(got, want)


@pytest.mark.parametrize("codec, fmt, n, z, interval, seed, flags", [
    ("tans8x4", "fp32", 4000, 5, 1000, 11, (None,)),
    # The AVX-512 kernels (zmm for x16, ymm for x8) against the scalar kernel, each forced.
    ("tans8x16", "bf16", 20000, 3, 1500, 12, (0, 1)),
    ("tans8x8", "bf16", 20000, 3, 1500, 12, (0, 1)),
    ("tans8x16", "fp32", 20000, 7, 1500, 13, (0, 1))])
def test_values_decoder_row_shifts(codec, fmt, n, z, interval, seed, flags):
    """A table coding ``w - z`` bits whose values land shifted left by ``z`` (container row shifts)."""
    spec = parse_codec(codec)
    f = PAIR_FORMATS[fmt]
    rng = np.random.default_rng(seed)
    codes = rng.choice(6, size=n, p=[.5, .2, .1, .1, .05, .05]).astype(np.uint16)
    counts = np.bincount(codes, minlength=6).astype(np.int64)
    extra = rng.integers(0, 1 << (f.extra_bits - z), n, dtype=np.uint64)
    ct, t = spec.tables(counts, f.extra_bits - z)
    s, e = ct.to_symbols(codes, extra)
    g = spec.coder().encode([t], [Run(0, n)], s, e, interval)
    full_ct, _ = spec.tables(counts, f.extra_bits)
    exps = np.arange(6) + 100
    want = fastpairs.join_values(full_ct, exps, f, s, e << np.uint64(z))
    for flag in flags:
        with (simd(flag) if flag is not None else contextlib.nullcontext()):
            got = fastans.decode_values(spec, g.words, [t], [Run(0, n)], g.checkpoints, [(full_ct, exps, z)], f, 1)
        assert np.array_equal(got, want)


def test_encoder_errors_are_the_golden_errors():
    spec = parse_codec("tans8x4")
    tables, s, e, runs, _, _ = _stream(spec, np.random.default_rng(3), n_tensors=1)
    for edit in ("extra", "symbol"):
        s2, e2 = s.copy(), e.copy()
        if edit == "extra":
            e2[5] = 1 << 40
        else:
            s2[7] = 200
        with pytest.raises(Exception) as g:
            spec.coder().encode(tables, runs, s2, e2)
        with pytest.raises(type(g.value), match=str(g.value).split(":")[0]):
            fastans.encode(spec, tables, runs, s2, e2)


def test_kernel_arguments_are_checked():
    """The extension refuses inconsistent arrays with ValueError/TypeError instead of reading past them."""
    w = np.zeros(4, np.uint16)
    st = np.zeros(2, np.int64)
    tab = np.zeros(256, np.uint64)
    rt, re = np.zeros(2, np.int64), np.asarray([5, 2 ** 62], np.int64)
    with pytest.raises(ValueError):  # outputs smaller than the pairs asked for
        nativeans.tans_decode(w, 64, st, 0, tab, 256, rt, re, 0, 5, np.zeros(2, np.uint8), np.zeros(2, np.uint32), 0)
    with pytest.raises(ValueError):  # a state outside the table
        nativeans.tans_decode(w, 64, np.asarray([0, 999], np.int64), 0, tab, 256, rt, re, 0, 5,
                              np.zeros(5, np.uint8), np.zeros(5, np.uint32), 0)
    with pytest.raises(ValueError):  # a run naming a table that is not there
        nativeans.tans_decode(w, 64, st, 0, tab, 256, np.asarray([3, 0], np.int64), re, 0, 5,
                              np.zeros(5, np.uint8), np.zeros(5, np.uint32), 0)
    with pytest.raises(TypeError):
        nativeans.tans_decode(w, 64, st.astype(np.int32), 0, tab, 256, rt, re, 0, 5, np.zeros(5, np.uint8),
                              np.zeros(5, np.uint32), 0)


def test_stationary_distribution_is_the_numpy_loops_bit_for_bit():
    """The spread choice's power iteration (nativeans.stationary_many of one table) gives exactly the NumPy loop's floats,
    so a container does not depend on whether the extension was built."""
    import ansforge.model.coding.tans as tans_mod

    rng = np.random.default_rng(21)
    for codec in ("tans5", "tans8", "tans11"):
        spec = parse_codec(codec)
        for _ in range(4):
            counts = (rng.dirichlet(np.full(int(rng.integers(2, 50)), 0.3)) * 1e6).astype(np.int64) + 1
            ct, t = spec.tables(counts, 8)
            probs = ct.symbol_counts(counts) / ct.symbol_counts(counts).sum()
            p = np.pad(probs, (0, t.freqs.size - probs.size))
            native = t.expected_bits_per_symbol(p)
            saved, tans_mod.nativeans = tans_mod.nativeans, None
            try:
                numpy_loop = t.expected_bits_per_symbol(p)
            finally:
                tans_mod.nativeans = saved
            assert native == numpy_loop


def test_compress_and_decompress_import_no_numba(tmp_path):
    """The command-line path runs on the native kernels without importing numba, Amaranth or matplotlib
    (they cost most of a small decompress's time)."""
    import subprocess
    import sys

    from safetensors.numpy import save_file

    rng = np.random.default_rng(2)
    save_file({"w": rng.standard_normal((64, 300)).astype(np.float32),
               "b": rng.standard_normal(300).astype(np.float32).astype(np.float16)}, str(tmp_path / "m.safetensors"))
    code = ("import sys; from ansforge.cli import main; "
            f"main(['compress', '--model', {str(tmp_path / 'm.safetensors')!r}, '-o', {str(tmp_path / 'm.ansf')!r}, "
            "'--codec', 'tans8x8']); "
            f"main(['decompress', {str(tmp_path / 'm.ansf')!r}, '-o', {str(tmp_path / 'o.safetensors')!r}]); "
            "print(sorted(m for m in ('numba', 'amaranth', 'matplotlib', 'scipy') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
    from safetensors.numpy import load_file
    a, b = load_file(str(tmp_path / "m.safetensors")), load_file(str(tmp_path / "o.safetensors"))
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)


def _special_values(rng, fmt, n):
    """Random bit patterns of ``fmt`` with the cases a split must keep: ±0, subnormals, ±Inf, NaN payloads."""
    bits = rng.integers(0, 1 << fmt.total_bits, size=n, dtype=np.uint64).astype(fmt.bits_dtype)
    top, e_all = fmt.total_bits - 1, (1 << fmt.exponent_bits) - 1
    special = np.array([0, 1 << top, 1, e_all << fmt.mantissa_bits, (e_all << fmt.mantissa_bits) | 1,
                        (1 << top) | (e_all << fmt.mantissa_bits) | 3], dtype=np.uint64).astype(fmt.bits_dtype)
    bits[: special.size] = special[: bits.size]
    return bits


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (33, 65), (3, 4, 5)])
def test_compiled_split_equals_the_numpy_split(fmt, shape):
    """``fastpairs.split_pairs`` (what ``compress`` uses) gives the golden split's pairs, dtypes included,
    and the exponent histogram whose last entry counts NaN/Inf; ``code_counts`` equals ``counts()``."""
    f = FLOATS[fmt]
    rng = np.random.default_rng(sum(shape) + f.total_bits)
    n = int(np.prod(shape))
    for bits in (_special_values(rng, f, n).reshape(shape),
                 # a realistic tensor: few exponents, so the table and the codes are small
                 (rng.standard_normal(n) * 0.02).astype(np.float32).view(np.uint32).reshape(shape)):
        if bits.dtype != f.bits_dtype:
            bits = (bits >> np.uint32(32 - f.total_bits)).astype(f.bits_dtype) if f.total_bits < 32 else bits
        golden = f.split(bits)
        fast, hist = fastpairs.split_pairs(f, bits)
        for a, b in ((golden.codes, fast.codes), (golden.extra, fast.extra), (golden.exponents, fast.exponents),
                     (golden.extra_bits_per_code, fast.extra_bits_per_code)):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert fast.shape == golden.shape == tuple(shape)
        assert np.array_equal(f.join(fast), bits)
        assert int(hist.sum()) == n and int(hist[-1]) == int(np.count_nonzero(f.exponent_field(bits) == hist.size - 1))
        assert np.array_equal(fastpairs.code_counts(fast), golden.counts())


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 17, 4099])
def test_byte_histogram_is_bincount(n):
    """``field_hist`` of bytes (a tensor's codes: eight 32-bit histograms, eight bytes a load) adds
    ``np.bincount`` to the counts it is given, at every length modulo 8, every byte value, skewed codes
    and a view that starts off the array's alignment."""
    from ansforge.model.coding import nativeans
    rng = np.random.default_rng(n)
    for codes in (rng.integers(0, 256, n + 3, dtype=np.uint8)[3:],
                  np.minimum(rng.geometric(0.6, n), 255).astype(np.uint8), np.full(n, 255, np.uint8)):
        hist = np.arange(256, dtype=np.int64)
        nativeans.field_hist(codes, 0, 255, hist)
        assert np.array_equal(hist, np.arange(256) + np.bincount(codes, minlength=256))


@pytest.mark.parametrize("codec", ["tans8", "rans16"])
@pytest.mark.parametrize("fmt", ["bf16", "fp32"])
@pytest.mark.parametrize("shifts", [False, True])
def test_compiled_symbol_map_equals_to_symbols(codec, fmt, shifts):
    """``fastpairs.map_symbols`` (escape symbols, row shifts) writes what ``CodeTable.to_symbols`` and the
    row shift of ``encode_tensors`` compute; a code outside the table is the project's error."""
    from ansforge.model.errors import ConfigError
    f, spec = FLOATS[fmt], parse_codec(codec)
    rng = np.random.default_rng(5)
    rows, per_row = 40, 96
    # Skewed exponents, so that rare ones fall into the escape group of an 8-bit table.
    e = np.clip(np.round(rng.standard_normal(rows * per_row) * 6), -40, 40).astype(np.int64) + 120
    mant = rng.integers(0, 1 << f.mantissa_bits, rows * per_row, dtype=np.int64)
    z = rng.integers(0, f.mantissa_bits + 1, rows) if shifts else np.zeros(rows, np.int64)
    mant = (mant >> np.repeat(z, per_row)) << np.repeat(z, per_row)
    sign = rng.integers(0, 2, rows * per_row, dtype=np.int64)
    bits = ((sign << (f.total_bits - 1)) | (e << f.mantissa_bits) | mant).astype(f.bits_dtype).reshape(rows, per_row)
    pairs = f.split(bits)
    ct, _ = spec.tables(pairs.counts(), f.extra_bits)
    assert ct.escape_codes or codec != "tans8"
    s, x = ct.to_symbols(pairs.codes, pairs.extra)
    if shifts:
        x = (x.reshape(rows, per_row) >> z.astype(np.uint64)[:, None]).ravel()
    out_s, out_e = np.empty(s.size, np.uint8), np.empty(s.size, np.uint32)
    assert fastpairs.map_symbols(ct, pairs, (z, per_row) if shifts else None, out_s, out_e)
    assert np.array_equal(out_s, s) and np.array_equal(out_e, x)
    bad = dataclasses.replace(pairs, codes=np.where(np.arange(pairs.codes.size) == 17, 200, pairs.codes).astype(np.uint8))
    with pytest.raises(ConfigError, match="code 200"):
        fastpairs.map_symbols(ct, bad, None, out_s, out_e)


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
def test_vector_symbol_map_is_the_scalar_one_at_every_length(dtype):
    """The AVX-512 VBMI rows of ``map_symbols`` (64 pairs a step, the rest by the scalar loop) write what
    the scalar loop writes: symbols, escape indices above ``w`` data bits, row shifts, and the first code
    outside the table, at every length around the step. (On a CPU without VBMI both runs are scalar.)"""
    rng = np.random.default_rng(9)
    sym_of = np.full(256, 255, np.uint8)
    idx_of = np.zeros(256, np.uint32)
    direct = rng.choice(256, 40, replace=False)
    escaped = np.setdiff1d(np.arange(256), direct)[rng.permutation(200)[:90]]
    sym_of[direct] = np.arange(40)
    sym_of[escaped] = 40
    idx_of[escaped] = np.arange(90)
    known = np.concatenate([direct, escaped])
    w = 7 if dtype == np.uint16 else 23
    for n in [*range(0, 140), 191, 192, 193, 1000]:
        for rows in ((1, 3) if n else (1,)):
            codes = known[rng.integers(0, known.size, n * rows)].astype(np.uint8)
            extra = rng.integers(0, 1 << w, n * rows).astype(dtype)
            z = rng.integers(0, w + 1, rows).astype(np.uint8) if rows > 1 else np.zeros(0, np.uint8)
            if n and rng.random() < 0.3:
                codes[rng.integers(0, codes.size)] = np.setdiff1d(np.arange(256), known)[0]
            got = []
            for flag in (1, 0):
                with simd(flag):
                    out_s, out_e = np.zeros(codes.size, np.uint8), np.zeros(codes.size, np.uint32)
                    bad = nativeans.map_symbols(codes, extra, sym_of, idx_of, w, z, max(n, 1), out_s, out_e)
                    got.append((bad, out_s, out_e))
            (bad1, s1, e1), (bad0, s0, e0) = got
            assert bad1 == bad0, (n, rows)
            if bad0 < 0:
                assert np.array_equal(s1, s0) and np.array_equal(e1, e0), (n, rows)
                want = (extra.astype(np.uint64) | idx_of[codes].astype(np.uint64) << np.uint64(w)) \
                    >> np.repeat(z if rows > 1 else np.zeros(1, np.uint8), n).astype(np.uint64)
                assert np.array_equal(s0, sym_of[codes]) and np.array_equal(e0, want.astype(np.uint32))


@pytest.mark.parametrize("codec", ["tans8", "rans16", "tans8x4"])
def test_compress_is_the_same_file_with_and_without_the_compiled_split(tmp_path, codec):
    """``compress`` through the compiled split, counts and symbol map (native) and through NumPy and
    the numba coders writes the same bytes: fp32 rows with shifts, bf16, fp16, an escape-heavy tensor."""
    from ansforge.model.coding.container import compress_checkpoint, open_container
    from ansforge.model.llm.checkpoint import write_safetensors
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((48, 40)) * 0.02).astype(np.float32)
    a[::3] = a[::3].astype(np.float16).astype(np.float32)  # rows with zero low mantissa bits
    wide = np.exp(rng.uniform(-60, 60, 3000)).astype(np.float32) * rng.choice([-1, 1], 3000)
    b = ((rng.standard_normal(500) * 0.1).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    h = (rng.standard_normal(300) * 0.3).astype(np.float16)
    data = {"a": a, "wide": wide.astype(np.float32), "b": b, "h": h}
    write_safetensors(tmp_path / "m.safetensors", [("a", "F32", a.shape), ("wide", "F32", wide.shape),
                                                   ("b", "BF16", b.shape), ("h", "F16", h.shape)],
                      lambda i, nm: [data[nm]])
    files = {}
    for name in ("native", "numba"):
        with backend(name):
            compress_checkpoint(tmp_path / "m.safetensors", tmp_path / f"{name}.ansf", codec, checkpoint_interval=512)
        files[name] = (tmp_path / f"{name}.ansf").read_bytes()
    assert files["native"] == files["numba"]
    c = open_container(tmp_path / "native.ansf")
    c.decompress(tmp_path / "back.safetensors")
    from ansforge.model.llm.checkpoint import open_checkpoint
    back = open_checkpoint(tmp_path / "back.safetensors")
    assert all(np.asarray(back.tensor(k).array).tobytes() == np.asarray(v).tobytes() for k, v in data.items())


@pytest.mark.parametrize("codec", ["tans8", "tans8x3", "tans8x16"])
def test_pairs_that_fill_the_accumulator_to_64_bits(codec):
    """Regression (found by the 7B run): bf16 pairs whose widest pair is 19 bits (a frequency-1 escape
    symbol, 8 state bits, 8 + 3 escape-index bits) let the encoder store its accumulator every three
    pairs, and three such pairs after a store's 7 leftover bits reach exactly 64 bits, where the store's
    shift (``cnt & 56``) was 0 instead of 64: stale bits were ORed under the next pairs, a valid stream of
    wrong additional data. Escapes with a direct pair now and then hit it within a few hundred pairs."""
    spec = parse_codec(codec)
    rng = np.random.default_rng(3)
    counts = np.zeros(18, dtype=np.int64)
    counts[:10] = 100_000
    counts[10:] = 1                       # eight rare codes: one escape symbol, 3 index bits
    ct, table = spec.tables(counts, 8)
    esc = ct.n_direct
    assert int(table.freqs[esc]) == 1 and int(table.extra_bits[esc]) == 11
    # escapes, with a direct code now and then so that the bits left after a store vary
    codes = np.where(rng.random(4000) < 0.8, rng.integers(10, 18, 4000), rng.integers(0, 10, 4000)).astype(np.uint16)
    s, e = ct.to_symbols(codes, rng.integers(0, 256, codes.size, dtype=np.uint64))
    runs = [Run(0, s.size)]
    g = spec.coder().encode([table], runs, s, e, 0)
    f = fastans.encode(spec, [table], runs, s.astype(np.uint8), e.astype(np.uint32), 0)
    assert np.array_equal(f.words, g.words)
    assert np.array_equal(spec.coder().decode(f.words, [table], runs, 0, s.size)[1], e)
