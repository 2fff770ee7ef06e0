"""The DFloat11-style Huffman peer (model/coding/huffman.py): the golden model against its definition,
the compiled coder bit-exact against the golden model, corrupt streams refused, and the size the
`tables` row charges equal to what the coder writes."""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.analysis.table1 import huffman_lengths
from ansforge.model.coding import huffman as H
from ansforge.model.errors import AnsforgeError


def _bf16(rng, n, scale=0.05):
    x = (rng.standard_normal(n).astype(np.float32) * np.float32(scale)).view(np.uint32)
    return ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even


def _specials():
    # +-0, subnormals, +-inf, NaNs, the largest finite values: every exponent class
    return np.array([0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC0, 0xFFFF, 0x7F7F, 0xFF7F,
                     0x3F80, 0xBF80], dtype=np.uint16)


def test_the_extension_has_the_huffman_coder():
    assert H.native_available()


def test_canonical_code_is_a_prefix_code_in_length_then_symbol_order():
    lengths = np.zeros(256, dtype=np.int64)
    lengths[[3, 7, 9, 200]] = [2, 1, 3, 3]
    codes = H.canonical_codes(lengths)
    assert {s: (int(lengths[s]), int(codes[s])) for s in (7, 3, 9, 200)} == \
        {7: (1, 0b0), 3: (2, 0b10), 9: (3, 0b110), 200: (3, 0b111)}
    with pytest.raises(AnsforgeError, match="Kraft"):
        H.canonical_codes(np.array([1, 1, 1]))


def test_lengths_are_limited_to_32_bits_keeping_every_symbol():
    fib = [1, 1]
    while len(fib) < 45:
        fib.append(fib[-1] + fib[-2])
    c = np.array(fib, dtype=np.int64)  # Fibonacci counts give the deepest Huffman tree: 44 bits unlimited
    assert H.code_lengths(c, None).max() == 44
    limited = H.code_lengths(c)
    assert limited.max() <= 32 and (limited > 0).all()
    assert sum(2.0 ** -limited) <= 1.0
    assert huffman_lengths(c).tolist() == limited.tolist()


@pytest.mark.parametrize("case", ["normal", "specials", "one exponent", "two exponents", "every exponent"])
def test_golden_round_trip_and_native_bit_exact(case):
    rng = np.random.default_rng(hash(case) & 0xFFFF)
    v = {"normal": lambda: _bf16(rng, 20_000),
         "specials": lambda: np.concatenate([_specials(), _bf16(rng, 500)]),
         "one exponent": lambda: (0x3F80 | rng.integers(0, 128, 300)).astype(np.uint16),
         "two exponents": lambda: rng.choice([0x3F80, 0x4000], 300).astype(np.uint16),
         "every exponent": lambda: rng.integers(0, 1 << 16, 5000).astype(np.uint16)}[case]()
    g = H.encode_bf16(v)
    assert np.array_equal(H.decode_bf16(g), v)
    n = H.encode_bf16_native(v)
    assert (n.nbits, n.payload, n.lengths.tolist()) == (g.nbits, g.payload, g.lengths.tolist())
    assert np.array_equal(n.raw, g.raw)
    assert np.array_equal(H.decode_bf16_native(n), v)
    # the size the `tables` Huffman rows charge is what the coder writes
    counts = np.bincount((v >> 7) & 0xFF, minlength=256)
    assert g.nbits == int(huffman_lengths(counts) @ counts)
    assert g.size_bytes == (g.nbits + 7) // 8 + v.size + np.count_nonzero(counts)


def test_long_codes_take_the_second_level_path():
    """Codes longer than the 12-bit first-level table: lengths 1, 2, ..., 20, 20 on 21 exponents."""
    rng = np.random.default_rng(9)
    lengths = np.zeros(256, dtype=np.uint8)
    exps = np.arange(100, 121)
    lengths[exps] = list(range(1, 21)) + [20]
    v = ((rng.choice(exps, 4000) << 7) | rng.integers(0, 128, 4000)).astype(np.uint16)
    v[:21] = exps << 7  # every code at least once
    g = H.encode_bf16(v, lengths)
    assert g.lengths.max() == 20
    n = H.encode_bf16_native(v, lengths)
    assert (n.nbits, n.payload) == (g.nbits, g.payload)
    assert np.array_equal(H.decode_bf16(g), v)
    assert np.array_equal(H.decode_bf16_native(g), v)


def test_one_code_shared_by_a_layer():
    rng = np.random.default_rng(3)
    tensors = [_bf16(rng, 3000, s) for s in (0.02, 0.05, 0.1)]
    counts = sum(np.bincount((t >> 7) & 0xFF, minlength=256) for t in tensors)
    shared = H.code_lengths(counts)
    for t in tensors:
        h = H.encode_bf16_native(t, shared)
        assert np.array_equal(H.decode_bf16_native(h), t)
        assert h.payload == H.encode_bf16(t, shared).payload


def test_an_exponent_without_a_code_is_refused():
    v = np.array([0x3F80, 0x4000], dtype=np.uint16)
    lengths = np.zeros(256, dtype=np.uint8)
    lengths[0x7F] = 1
    for enc in (H.encode_bf16, H.encode_bf16_native):
        with pytest.raises(AnsforgeError, match="exponent 128 has no code"):
            enc(v, lengths)


def test_corrupt_streams_give_our_error_never_a_crash():
    rng = np.random.default_rng(5)
    v = _bf16(rng, 2000)
    h = H.encode_bf16_native(v)
    import dataclasses
    with pytest.raises(AnsforgeError):  # too few bits for every weight
        H.decode_bf16_native(dataclasses.replace(h, nbits=h.nbits - 40))
    with pytest.raises(AnsforgeError):  # bits left over
        H.decode_bf16_native(dataclasses.replace(h, raw=h.raw[:-5]))
    with pytest.raises(AnsforgeError):  # header past the payload
        H.decode_bf16_native(dataclasses.replace(h, nbits=8 * len(h.payload) + 1))
    with pytest.raises(AnsforgeError):  # lengths that are no prefix code
        H.decode_bf16_native(dataclasses.replace(h, lengths=np.full(256, 1, dtype=np.uint8)))
    for _ in range(200):
        p = bytearray(h.payload)
        for i in rng.integers(0, len(p), int(rng.integers(1, 4))):
            p[i] ^= 1 << int(rng.integers(0, 8))
        bad = dataclasses.replace(h, payload=bytes(p))
        try:
            golden = H.decode_bf16(bad)
        except AnsforgeError:
            with pytest.raises(AnsforgeError):
                H.decode_bf16_native(bad)
        else:
            assert np.array_equal(H.decode_bf16_native(bad), golden)
