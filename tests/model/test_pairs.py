"""Coding-pair formats: exact round trips on every bit pattern class, and RNE conversion."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ansforge.model.llm.checkpoint import open_checkpoint
from ansforge.model.errors import PairFormatError
from ansforge.model.dtypes.pairs import BF16, FP16, FP32, CodingPairs, convert, fp32_to_bf16_rne

SPECIAL16 = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFFF, 0x3F80]
SPECIAL_HALF = [0x0000, 0x8000, 0x0001, 0x03FF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x3C00]
SPECIAL32 = [0, 0x80000000, 1, 0x007FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x3F800000]


def _check(fmt, bits):
    pairs = fmt.split(bits)
    assert np.array_equal(fmt.join(pairs), bits)
    assert pairs.codes.shape == (bits.size,) and pairs.extra.shape == (bits.size,)
    assert np.all(np.diff(pairs.exponents.astype(int)) > 0)
    assert np.all(pairs.codes < pairs.n_codes)
    assert np.all(pairs.extra < (1 << int(pairs.extra_bits_per_code[0])))
    assert np.all(pairs.extra_bits_per_code == fmt.extra_bits)
    # Every code in the table occurs (the table is of exponents that occur).
    assert np.all(pairs.counts() > 0)
    # The code's exponent and the raw extra data rebuild the fields independently of join().
    e = (bits.ravel().astype(np.uint64) >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    assert np.array_equal(pairs.exponents[pairs.codes], e)
    sign = bits.ravel().astype(np.uint64) >> (fmt.total_bits - 1)
    assert np.array_equal(pairs.extra.astype(np.uint64) >> fmt.mantissa_bits, sign)


@settings(max_examples=200, deadline=None)
@given(arrays(np.uint16, st.integers(1, 300), elements=st.one_of(st.integers(0, 0xFFFF), st.sampled_from(SPECIAL16))))
def test_bf16_pairs_round_trip_any_bits(bits):
    _check(BF16, bits)


@settings(max_examples=200, deadline=None)
@given(arrays(np.uint16, st.integers(1, 300), elements=st.one_of(st.integers(0, 0xFFFF), st.sampled_from(SPECIAL_HALF))))
def test_fp16_pairs_round_trip_any_bits(bits):
    _check(FP16, bits)
    assert np.array_equal(FP16.join(FP16.split(bits.view(np.float16))), bits)


@settings(max_examples=200, deadline=None)
@given(arrays(np.uint32, st.integers(1, 300),
              elements=st.one_of(st.integers(0, 0xFFFFFFFF), st.sampled_from(SPECIAL32))))
def test_fp32_pairs_round_trip_any_bits(bits):
    _check(FP32, bits)
    assert np.array_equal(FP32.join(FP32.split(bits.view(np.float32))), bits)


def test_special_values_keep_their_payloads():
    bits = np.array(SPECIAL16, dtype=np.uint16)
    pairs = BF16.split(bits)
    assert 255 in pairs.exponents and 0 in pairs.exponents  # Inf/NaN and zero/subnormal are codes
    assert np.array_equal(BF16.join(pairs), bits)


def _bf16_reference(x: float) -> int:
    """RNE of a finite float32 to bf16, by the halfway rule on the dropped 16 bits (ties to the even one).

    Beyond the largest finite bf16 the same rule carries into the exponent and gives ±Inf, as IEEE requires.
    """
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    upper, dropped = b >> 16, b & 0xFFFF
    if dropped > 0x8000 or (dropped == 0x8000 and upper & 1):
        return (upper + 1) & 0xFFFF
    return upper


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 0xFFFFFFFF))
def test_fp32_to_bf16_rne_matches_reference(b):
    x = np.array([b], dtype=np.uint32).view(np.float32)
    out = int(fp32_to_bf16_rne(x)[0])
    if np.isnan(x[0]):
        assert (out & 0x7F80) == 0x7F80 and (out & 0x7F) != 0 and out >> 15 == b >> 31
        assert (out & 0x3F) == ((b >> 16) & 0x3F)  # payload kept
    else:
        assert out == _bf16_reference(float(x[0]))
        # and the result is the nearest: no bf16 is closer to x
        y = np.array([out << 16], dtype=np.uint32).view(np.float32)[0]
        for nb in (out - 1, out + 1):
            if 0 <= nb <= 0xFFFF and (nb & 0x7F80) != 0x7F80 and np.isfinite(y):
                z = np.array([nb << 16], dtype=np.uint32).view(np.float32)[0]
                assert abs(float(z) - float(x[0])) >= abs(float(y) - float(x[0]))


def test_rne_ties_go_to_even():
    x = np.array([0x3F808000, 0x3F818000, 0x7F7FFFFF, 0xFF7F8000], dtype=np.uint32).view(np.float32)
    assert fp32_to_bf16_rne(x).tolist() == [0x3F80, 0x3F82, 0x7F80, 0xFF80]


def test_conversion_reports():
    x = np.array([1.0, 1.0 + 2**-20, -0.0, np.inf, np.nan], dtype=np.float32)
    bits, conv = convert(x, "F32", "bf16")
    assert conv.lossy and conv.changed == 1 and conv.nonfinite == 2
    bits, conv = convert(x, "F32", "fp32")
    assert not conv.lossy and np.array_equal(bits, x.view(np.uint32))
    bf = fp32_to_bf16_rne(x)
    wide, conv = convert(bf, "BF16", "fp32")
    assert not conv.lossy and np.array_equal(fp32_to_bf16_rne(wide.view(np.float32)), bf)
    _, conv = convert(np.array([70000.0], np.float32), "F32", "fp16")
    assert conv.lossy and conv.changed == 1 and conv.nonfinite == 1


def _every_tensor(path):
    ck = open_checkpoint(path)
    skipped = [i.name for i in ck.infos() if not i.supported]
    assert skipped in ([], ["embeddings.position_ids"])  # MiniLM's int64 index buffer is not a weight
    return [ck.tensor(i.name) for i in ck.infos() if i.supported]


@pytest.mark.parametrize("model", ["stories", "minilm"])
def test_every_tensor_round_trips_in_every_pair_format(model, request):
    for rec in _every_tensor(request.getfixturevalue(model)):
        for target in ("bf16", "fp16", "fp32"):
            bits, conv = convert(rec.array, rec.dtype, target)
            fmt = {"bf16": BF16, "fp16": FP16, "fp32": FP32}[target]
            assert np.array_equal(fmt.join(fmt.split(bits)), bits), (rec.name, target)
        # fp32 pairs of the original fp32 tensor are lossless end to end.
        assert np.array_equal(FP32.join(FP32.split(rec.array)).view(np.float32), rec.array)


def test_split_with_a_given_table_and_bad_pairs():
    bits = np.array([0x3F80, 0x4000, 0x3F80], dtype=np.uint16)
    table = np.array([0x7E, 0x7F, 0x80], dtype=np.uint16)
    pairs = BF16.split(bits, table)
    assert pairs.codes.tolist() == [1, 2, 1] and np.array_equal(BF16.join(pairs), bits)
    with pytest.raises(PairFormatError, match="exponent field 128 occurs but is not in the code table"):
        BF16.split(bits, np.array([0x7F], dtype=np.uint16))
    bad = CodingPairs(np.array([3], np.uint8), np.array([0], np.uint16), pairs.extra_bits_per_code, table)
    with pytest.raises(PairFormatError, match="code 3 is outside the 3-entry exponent table"):
        BF16.join(bad)
    bad = CodingPairs(np.array([0], np.uint8), np.array([256], np.uint16), pairs.extra_bits_per_code, table)
    with pytest.raises(PairFormatError, match="does not fit 8 bits"):
        BF16.join(bad)
    with pytest.raises(PairFormatError, match="bf16 tensors are passed as uint16"):
        BF16.split(np.zeros(3, np.float32))
