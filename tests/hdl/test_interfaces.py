"""The coding-pair interfaces of §4.3 (Figs. 9–11): golden model against independent NumPy
references, the cores against the golden model (Amaranth simulator with back-pressure, Verilator
on whole checkpoints)."""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.hdl.interfaces import FloatToPair, PairToFixed, PairToFloat
from ansforge.model.llm.checkpoint import open_checkpoint
from ansforge.model.errors import ConfigError, PairFormatError
from ansforge.model.dtypes.interfaces import (CodingPairFormat, FixedFormat, FixedToPairTable, FloatToPairTable, PairCode,
                                       PairToFixedTable, PairToFloatTable, exact_values)
from ansforge.model.dtypes.pairs import FP32, fp32_to_bf16_rne
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.interfaces import (fixed_to_pair_job, float_round_trip, float_to_pair_job, pack_pairs,
                                     pair_to_fixed_job, pair_to_float_job)
from ansforge.sim.jobs import CoreJob
from ansforge.sim.verilator import VerilatorEngine


def _run_both(job, seed=0):
    """Amaranth simulator with random valid/ready gaps, then Verilator, both bit-exact."""
    for engine, stall in ((AmaranthEngine(), 0.3), (VerilatorEngine(), 0.2)):
        ok, errs = job.check(engine.run(job, stall_prob=stall, seed=seed))
        assert ok, f"{engine.name}: {errs}"


def _float_round_trips(path, keep=lambda name: True) -> int:
    ck = open_checkpoint(path)
    engine, cores, n = VerilatorEngine(), {}, 0
    for info in ck.infos():
        if not info.supported or not keep(info.name):
            continue
        a = np.asarray(ck.tensor(info.name).array, dtype=np.float32)
        float_round_trip(a, "fp32", engine, name=info.name, cores=cores)
        float_round_trip(fp32_to_bf16_rne(a), "bf16", engine, name=info.name, cores=cores)
        n += a.size
    return n


def test_every_weight_round_trips_through_float_interfaces(stories):
    """FloatToPair → PairToFloat in Verilator, every tensor of stories260K with its own code table: the
    pairs equal the golden model's and the values come back bit-exact, as fp32 and as bf16."""
    assert _float_round_trips(stories) == 264_128


def test_minilm_embeddings_and_first_layer_round_trip_through_float_interfaces(minilm):
    """The same on MiniLM's other value ranges (LayerNorm gains near 1, biases, position embeddings):
    its embeddings but the 11.7M-weight word table, and every tensor of its first encoder layer (the
    other five layers are the same kinds of tensor; the whole file is 11.5 times the weights)."""
    n = _float_round_trips(minilm, lambda name: name.startswith("encoder.layer.0.")
                           or (name.startswith("embeddings.") and "word_embeddings" not in name))
    assert n == 1_972_608


def _narrow_format(rng):
    """fp32 exponent fields 0..255, each code with its own random mantissa width (0..23 bits)."""
    widths = rng.integers(0, 24, 256)
    widths[[0, 1, 254]] = [3, 2, 4]
    return CodingPairFormat.ieee("fp32", np.arange(256), widths), widths


def _rne_reference(x: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """x rounded to its exponent field's mantissa width with NumPy's rint (ties to even), in float64."""
    bits = x.view(np.uint32)
    field = (bits >> 23) & 255
    e = np.where(field == 0, -126, field.astype(np.int64) - 127)
    q = e - widths[field]
    with np.errstate(over="ignore"):
        return np.ldexp(np.rint(np.ldexp(x.astype(np.float64), -q)), q).astype(np.float32)


def test_float_to_pair_rounding_matches_numpy_rne():
    rng = np.random.default_rng(7)
    fmt, widths = _narrow_format(rng)
    n = 100_000
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    bits &= ~np.uint32(0x7F800000) | np.uint32(0)
    fields = rng.integers(0, 255, n).astype(np.uint32)                     # finite values
    fields[:300] = 254                                                     # the largest exponent
    fields[300:600] = 0                                                    # subnormals
    fields[600:900] = 1                                                    # the smallest normal exponent
    bits = (bits & np.uint32(0x807FFFFF)) | (fields << np.uint32(23))
    # mantissa all ones above the kept bits: the rounding carries into the exponent
    keep = widths[fields]
    carry = rng.random(n) < 0.2
    ones = ((np.uint64(1) << (23 - keep).astype(np.uint64)) - np.uint64(1)).astype(np.uint32)
    bits = np.where(carry, bits | ones | (np.uint32(1) << (23 - keep).astype(np.uint32) & np.uint32(0x7FFFFF)), bits)
    # exact ties: half a unit of the kept width, even and odd
    tie = (rng.random(n) < 0.1) & (keep < 23)
    half = (np.uint64(1) << (22 - keep).clip(0).astype(np.uint64)).astype(np.uint32)
    bits = np.where(tie, (bits & ~(half * np.uint32(2) - np.uint32(1))) | half, bits)
    x = bits.view(np.float32)
    codes, extra = FloatToPairTable(fmt, "fp32").apply(x)
    back = PairToFloatTable(fmt, "fp32").apply(codes, extra).view(np.float32)
    ref = _rne_reference(x, widths)
    assert np.array_equal(back.view(np.uint32), ref.view(np.uint32))
    assert np.count_nonzero(codes != np.searchsorted(np.arange(256), (bits >> 23) & 255)) > 1000   # carries
    assert np.isinf(back).any() and (back[fields == 0] == 0).any()
    job = float_to_pair_job(FloatToPairTable(fmt, "fp32"), x)
    ok, errs = job.check(VerilatorEngine().run(job, stall_prob=0.1, seed=3))
    assert ok, errs
    small = float_to_pair_job(FloatToPairTable(fmt, "fp32"), x[:1000:4])
    ok, errs = small.check(AmaranthEngine().run(small, stall_prob=0.3, seed=4))
    assert ok, errs


def _truncating_reference(x: np.ndarray, target: str, overflow: str) -> np.ndarray:
    """fp32 → fp16/bf16 by truncation toward zero, gradual underflow, saturation (or Inf)."""
    M, emin, emax = {"fp16": (10, -14, 15), "bf16": (7, -126, 127)}[target]
    a = np.abs(x.astype(np.float64))
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), emin)
    t = np.floor(np.ldexp(a, -(e - M).astype(int))) * np.ldexp(1.0, (e - M).astype(int))
    big = np.ldexp(2.0 - 2.0 ** -M, emax)
    t = np.where(a >= 2.0 ** (emax + 1), big if overflow == "saturate" else np.inf, t)
    return np.copysign(t, x)


@pytest.mark.parametrize("target,overflow", [("fp16", "saturate"), ("fp16", "inf"), ("bf16", "saturate")])
def test_pair_to_float_saturation_and_underflow_at_the_edges(target, overflow):
    """fp32 pairs into a narrower datapath: every exponent from below the subnormals to above the
    largest finite value, with random mantissas, against the documented truncating reference."""
    rng = np.random.default_rng(1)
    exps = np.arange(-40, 20) if target == "fp16" else np.arange(-150, 128)
    x = np.ldexp(1 + rng.random(exps.size * 8), np.repeat(exps, 8)).astype(np.float32)
    x *= np.where(rng.random(x.size) < 0.5, -1, 1).astype(np.float32)
    if target == "bf16":
        x = np.concatenate([x, np.array([3.4e38, -3.4e38, 1e-45, 0.0], np.float32)])
    pairs = FP32.split(x)
    fmt = CodingPairFormat.ieee("fp32", pairs.exponents)
    table = PairToFloatTable(fmt, target, overflow=overflow)
    got = table.apply(pairs.codes, pairs.extra)
    ref = _truncating_reference(x, target, overflow)
    as_f = got.view(np.float16).astype(np.float64) if target == "fp16" else \
        (got.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    assert np.array_equal(as_f, ref)
    assert np.array_equal(np.signbit(as_f), np.signbit(x))
    _run_both(pair_to_float_job(table, pairs.codes[::3], pairs.extra[::3], max_extra_bits=24))


def test_flush_underflow_and_normalization_limit():
    pairs = FP32.split(np.array([7e-5, 3e-5, -1e-7], np.float32))       # fp16: normal, subnormal, subnormal
    fmt = CodingPairFormat.ieee("fp32", pairs.exponents)
    flushed = PairToFloatTable(fmt, "fp16", underflow="flush").apply(pairs.codes, pairs.extra).view(np.float16)
    assert flushed[0] != 0 and flushed[1] == 0 and flushed[2] == 0 and np.signbit(flushed[2])
    fp16_subnormal = CodingPairFormat.ieee("fp16", [0, 15])
    with pytest.raises(ConfigError, match="code 0: .*normalization"):
        PairToFloatTable(fp16_subnormal, "fp32")


def test_fixed_point_round_trip_is_exact_and_saturates_at_the_edges():
    ints = CodingPairFormat.integers(11)                          # §3.3, Nb = 11: ±2047
    fx = FixedFormat(12, 0)
    v = np.arange(-2047, 2048)
    codes, extra = FixedToPairTable(ints, fx).apply(v)
    assert np.array_equal(exact_values(ints, codes, extra), v)                  # Fig. 6's coding
    assert list(codes[2047 + np.array([0, 1, -1, 13])]) == [0, 1, 1, 4]
    assert int(extra[2047 + 13]) == 0b0101 and int(extra[2047 - 1]) == 1     # 13: sign 0, 101b; -1: sign 1
    back = fx.to_signed(PairToFixedTable(ints, fx).apply(codes, extra))
    assert np.array_equal(back, v)
    job = fixed_to_pair_job(FixedToPairTable(ints, fx), v)
    ok, errs = job.check(VerilatorEngine().run(job, stall_prob=0.2))
    assert ok, errs
    _run_both(pair_to_fixed_job(PairToFixedTable(ints, fx), codes[::9], extra[::9]))
    _run_both(fixed_to_pair_job(FixedToPairTable(ints, fx), v[::13]))

    # bf16 pairs into Q7.8 (16 bits): exact where representable, truncation toward zero, saturation
    fx = FixedFormat(16, 8)
    x = np.array([0.0, 1.0, -1.0, 2 ** -8, -(2 ** -8), 2 ** -9, -(2 ** -9), 1.5 * 2 ** -8, -1.5 * 2 ** -8,
                  127.0, 127.5, -128.0, 128.0, -128.5, -129.0, 1e30, -1e30, 3.0e-39, 0.3, -0.3], np.float32)
    bits = fp32_to_bf16_rne(x)
    from ansforge.model.dtypes.pairs import BF16
    pairs = BF16.split(bits)
    fmt = CodingPairFormat.ieee("bf16", pairs.exponents)
    got = fx.to_signed(PairToFixedTable(fmt, fx).apply(pairs.codes, pairs.extra))
    xb = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    ref = np.clip(np.trunc(xb * 256), fx.lo, fx.hi)
    assert np.array_equal(got, ref)
    assert got[list(x).index(-128.0)] == -32768 and got[list(x).index(128.0)] == 32767
    _run_both(pair_to_fixed_job(PairToFixedTable(fmt, fx), pairs.codes, pairs.extra))
    # and the way back: every word the format can hold exactly (bf16-representable) round-trips
    q = np.arange(-32768, 32768, 37)
    codes2, extra2 = FixedToPairTable(CodingPairFormat((PairCode("direct", value=0.0),) + tuple(
        PairCode("float", e, 23) for e in range(-8, 8))), fx).apply(q)
    fmt2 = CodingPairFormat((PairCode("direct", value=0.0),) + tuple(PairCode("float", e, 23) for e in range(-8, 8)))
    assert np.array_equal(fx.to_signed(PairToFixedTable(fmt2, fx, max_extra_bits=24).apply(codes2, extra2)), q)


def test_direct_bypass_mixes_direct_and_exponent_codes():
    """Fig. 11: fp4-style direct values (sign in the additional data), an int8-style unsigned direct
    code and bf16 exponent codes, in one LUT of PairToFloat and of PairToFixed."""
    codes = (PairCode("direct", value=0.0), PairCode("direct", value=0.5, signed=True),
             PairCode("direct", value=1.5, signed=True), PairCode("direct", value=6.0, signed=True),
             PairCode("direct", value=-3.0)) + tuple(PairCode("float", e, 7) for e in range(-6, 3))
    fmt = CodingPairFormat(codes)
    rng = np.random.default_rng(5)
    c = rng.integers(0, len(fmt), 600)
    widths = fmt.extra_bits[c].astype(np.int64)
    e = (rng.integers(0, 1 << 16, c.size) & ((1 << widths) - 1)).astype(np.uint64)
    ref = exact_values(fmt, c, e)
    for target in ("bf16", "fp32"):
        table = PairToFloatTable(fmt, target)
        got = table.apply(c, e)
        as_f = (got.astype(np.uint32) << 16).view(np.float32) if target == "bf16" else got.view(np.float32)
        assert np.array_equal(as_f.astype(np.float64), ref)
        _run_both(pair_to_float_job(table, c, e), seed=2)
    fx = FixedFormat(16, 8)
    table = PairToFixedTable(fmt, fx)
    assert np.array_equal(fx.to_signed(table.apply(c, e)), np.trunc(ref * 256))     # truncation toward zero
    _run_both(pair_to_fixed_job(table, c, e), seed=3)


def test_a_value_without_a_code_is_a_miss():
    fmt = CodingPairFormat.ieee("fp32", [126, 127], 3)         # [0.5, 2) only, E8M3
    table = FloatToPairTable(fmt, "fp32")
    x = np.array([0.75, 1.5, 4.0, 1.99], np.float32)          # 4.0: no code; 1.99 rounds to 2.0: no code
    with pytest.raises(PairFormatError, match="value 2 .*exponent field 129"):
        table.apply(x)
    with pytest.raises(PairFormatError, match="value 0 .*128, after rounding"):
        FloatToPairTable(CodingPairFormat.ieee("fp32", [127], 3), "fp32").apply(np.array([1.99], np.float32))
    core = FloatToPair(source="fp32", max_codes=4, max_extra_bits=4)
    job = CoreJob("float-to-pair", core, cfg={"cfg": [int(v) for v in float_to_pair_job(table, x[:2], core=core).cfg["cfg"]]})
    job.inputs = x.view(np.uint32).astype(np.uint64)
    job.expected = np.zeros(4, np.uint64)
    res = AmaranthEngine().run(job, trace={"miss": core.miss})
    c_ok, e_ok = table.apply(x[:2])
    assert list(res.outputs[:2]) == list(pack_pairs(core, "o", c_ok, e_ok))
    assert list(res.outputs[2:]) == [0, 0]
    assert res.trace["miss"][-1] == 1


@pytest.mark.parametrize("make,match", [
    (lambda: PairToFloat(max_codes=0), "max_codes must be between 1 and 4096, not 0"),
    (lambda: PairToFloat(target="fp8"), "float format must be one of bf16, fp16, fp32, not 'fp8'"),
    (lambda: PairToFixed(fixed=FixedFormat(16, 0), max_extra_bits=40), "max_extra_bits must be between 1 and 32"),
    (lambda: FixedFormat(1, 0), "fixed width must be between 2 and 32, not 1"),
    (lambda: PairToFloatTable(CodingPairFormat((PairCode("direct", value=0.1),)), "bf16"),
     "code 0: direct value 0.1 is not exactly representable in bf16"),
    (lambda: PairToFloatTable(CodingPairFormat((PairCode("direct", value=1e6),)), "fp16"),
     "code 0: direct value 1000000.0 is not exactly representable in fp16"),
    (lambda: PairToFixedTable(CodingPairFormat((PairCode("direct", value=300.0),)), FixedFormat(16, 8)),
     "code 0: direct value 300.0 is not a 16-bit fixed-point value"),
    (lambda: FloatToPairTable(CodingPairFormat((PairCode("float", 200, 7),)), "bf16"),
     "code 0: exponent 200 is outside the bf16 format"),
    (lambda: FloatToPairTable(CodingPairFormat((PairCode("float", 3, 7), PairCode("float", 3, 5))), "bf16"),
     "code 1: exponent field 130 already has code 0"),
    (lambda: PairToFloat(max_codes=4, table=PairToFloatTable(CodingPairFormat.integers(8), "bf16")),
     "table has 9 codes, more than max_codes = 4"),
    (lambda: PairToFloat(target="fp32", table=PairToFloatTable(CodingPairFormat.integers(8), "bf16")),
     "table targets bf16, the core fp32"),
    (lambda: PairToFloatTable(CodingPairFormat.integers(8), "bf16", overflow="wrap"),
     "overflow must be 'saturate' or 'inf', not 'wrap'"),
    (lambda: PairCode("float", 5000, 7), "exponent must be between -1022 and 1023, not 5000"),
    (lambda: FixedToPairTable(CodingPairFormat.ieee("bf16", [127]), FixedFormat(8, 0)),
     "no direct code of value 0"),
])
def test_invalid_parameters_name_the_field(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()
