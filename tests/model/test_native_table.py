"""The code tables in compiled code (``nativetable.c``) against their NumPy reference: the minimum-cost
normalization (``normalize_positive``) and the escape search (``search_escape_split``) give the same
frequencies and the same split, tie for tie, on random histograms and on every tensor of two real models,
and the compiled entries refuse arguments outside their contract with one line."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from ansforge.model.coding import nativeans
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.codetable import _search_native, build_code_table, search_escape_split
from ansforge.model.coding.probability import log2_table, normalize_positive
from ansforge.model.dtypes.pairs import PAIR_FORMATS, convert
from ansforge.model.llm.checkpoint import open_checkpoint

# Counts of every scale: ones and tens (ties everywhere), up to the billions (the 2**P scaling rounds)
counts_strategy = st.lists(st.one_of(st.integers(1, 3), st.integers(1, 100), st.integers(1, 10**9)),
                           min_size=1, max_size=120)


def _order(c: np.ndarray) -> list[int]:
    return sorted((int(i) for i in np.flatnonzero(c)), key=lambda i: (-int(c[i]), i))


def _both(c: np.ndarray, P: int, max_symbols: int, max_extra_bits: int, escape: bool, extra_bits: int = 8):
    order = _order(c)
    cap = min(max_symbols, 1 << P)
    native = _search_native(c, order, extra_bits, P, cap, max_extra_bits, escape)
    ref = search_escape_split(c, order, extra_bits, P, cap, max_extra_bits, escape,
                              lambda sc: normalize_positive(sc, P))
    return native, ref


@settings(max_examples=400, deadline=None)
@given(counts_strategy, st.integers(5, 16))
@example([1] * 37, 5)                   # 37 equal counts at 32 frequency units: no table, refused below
@example([5, 5, 5, 1, 1, 1, 1], 5)      # ties in the fill and the exchange
def test_normalize_is_the_reference_bit_for_bit(counts, P):
    c = np.array(counts, dtype=np.int64)
    if c.size > 1 << P:
        with pytest.raises(ValueError, match="1 to 2\\*\\*P counts"):
            nativeans.normalize(c, log2_table(P), P)
        return
    got = np.frombuffer(nativeans.normalize(c, log2_table(P), P), dtype=np.int64)
    assert np.array_equal(got, normalize_positive(c, P))
    assert int(got.sum()) == 1 << P and got.min() >= 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.just(0), st.integers(1, 3), st.integers(1, 1000), st.integers(1, 10**8)),
                min_size=1, max_size=90),
       st.sampled_from([5, 6, 8, 10, 12, 16]), st.sampled_from([2, 16, 64, 256]), st.booleans(),
       st.sampled_from([9, 12, 16, 64]))
def test_escape_search_is_the_reference(counts, P, max_symbols, escape, max_extra_bits):
    """Every rule of the search: the capacity (symbols and frequency units), the escape group's index
    width against the core's additional-data width, no escape at all, the pruning by the ideal cost."""
    c = np.array(counts, dtype=np.int64)
    if not c.any():
        return
    native, ref = _both(c, P, max_symbols, max_extra_bits, escape)
    assert native == ref


@pytest.mark.parametrize("path_fixture,pairs", [("minilm", "bf16"), ("minilm", "fp32"), ("stories", "bf16"),
                                                ("stories", "fp32")])
def test_every_tensor_of_two_models_gets_the_reference_table(request, path_fixture, pairs):
    """The tables the default format (tANS, R = 8, 64 symbols) and the rANS cores' format (P = 16) build
    for every tensor, through build_code_table as the codecs call it, equal the NumPy search's."""
    ck = open_checkpoint(request.getfixturevalue(path_fixture))
    fmt = PAIR_FORMATS[pairs]
    codecs = [parse_codec("tans8x16"), parse_codec("rans16x16")]
    tables = 0
    for info in ck.infos():
        if info.dtype not in ("F32", "BF16", "F16") or info.size == 0:
            continue
        bits = convert(ck.tensor(info.name).array, info.dtype, pairs)[0]
        counts = fmt.split(np.ascontiguousarray(bits).reshape(-1)).counts()
        for codec in codecs:
            got = codec.code_table(counts, fmt.extra_bits)
            P = got.precision_bits
            params = codec.tans if hasattr(codec, "tans") else codec.rans
            max_extra_bits = codec.tans.max_extra_bits if hasattr(codec, "tans") else 64  # as the codecs ask
            ref = search_escape_split(counts.astype(np.int64), _order(counts), fmt.extra_bits, P,
                                      min(params.max_symbols, 1 << P), max_extra_bits, True,
                                      lambda sc, P=P: normalize_positive(sc, P))
            assert got == ref, info.name
            tables += 1
    assert tables >= 2 * 20


def test_build_code_table_takes_the_compiled_search_only_for_the_default_quantizer():
    """A quantizer of the caller's runs in NumPy (its result, not the default's), and an empty tensor still
    gets its one-symbol table on both paths."""
    c = np.array([500, 300, 20, 3, 2, 1, 0, 9], dtype=np.int64)
    plain = build_code_table(c, 8, 8)
    half = build_code_table(c, 8, 8, quantizer=lambda sc: normalize_positive(sc, 8))
    assert plain == half
    assert build_code_table(np.zeros(4, dtype=np.int64), 8, 8).direct_codes == (0,)


@pytest.mark.parametrize("call,match", [
    (lambda: nativeans.normalize(np.array([3, 0, 2], dtype=np.int64), log2_table(8), 8), "every count must be positive"),
    (lambda: nativeans.normalize(np.array([3, 2], dtype=np.int64), log2_table(8), 9), "log2 table"),
    (lambda: nativeans.code_table_search(np.array([5], dtype=np.int64), np.array([1, 1], dtype=np.int64),
                                         np.zeros(2), np.zeros(2), log2_table(8), 1.0, 8, 8, 32, 64, True),
     "order names a code"),
    (lambda: nativeans.code_table_search(np.array([0], dtype=np.int64), np.array([1], dtype=np.int64),
                                         np.zeros(1), np.zeros(1), log2_table(8), 0.0, 8, 8, 32, 64, True),
     "inconsistent arguments"),
])
def test_compiled_entries_refuse_arguments_outside_their_contract(call, match):
    with pytest.raises(ValueError, match=match):
        call()
