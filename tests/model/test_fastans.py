"""The compiled kernels (model/coding/fastans.py) against the golden coders: identical words, checkpoints,
decoded pairs and errors, for random alphabets and MiniLM tensors, every codec family, segments on
several threads, and the fused pair → IEEE join."""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.model.coding import fastans, fastpairs
from ansforge.model.llm.checkpoint import open_checkpoint
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.dtypes.pairs import PAIR_FORMATS, convert
from ansforge.model.coding.stream import Checkpoint, Run, StreamError

from ..support import check_fast_decode

CODECS = ("tans8", "tans5", "tans12", "rans16", "rans24", "rans9")


def _stream(spec, rng, n_tensors=3, fmt="bf16"):
    """Tensors of random skewed exponent distributions (escape symbols included) as one stream."""
    f = PAIR_FORMATS[fmt]
    tables, syms, exs, runs, cts = [], [], [], [], []
    for i in range(n_tensors):
        n = int(rng.integers(0, 3000)) if i == 1 else int(rng.integers(2000, 9000))
        n_codes = int(rng.integers(1, 90))
        p = rng.dirichlet(np.full(n_codes, 0.3))
        codes = rng.choice(n_codes, size=n, p=p).astype(np.uint16)
        counts = np.bincount(codes, minlength=n_codes).astype(np.int64)
        extra = rng.integers(0, 1 << f.extra_bits, n, dtype=np.uint64)
        ct, t = spec.tables(counts, f.extra_bits if n else 0)
        s, e = ct.to_symbols(codes, extra)
        tables.append(t), syms.append(s), exs.append(e), runs.append(Run(i, s.size)), cts.append(ct)
    return tables, np.concatenate(syms), np.concatenate(exs), runs


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("fmt", ["bf16", "fp32"])
def test_kernels_equal_golden(codec, fmt):
    spec = parse_codec(codec)
    rng = np.random.default_rng(hash((codec, fmt)) % 2 ** 32)
    for interval in (0, 1000, 777):
        tables, s, e, runs = _stream(spec, rng, fmt=fmt)
        g = spec.coder().encode(tables, runs, s, e, interval)
        f = fastans.encode(spec, tables, runs, s, e, interval)
        assert f.words.dtype == g.words.dtype and np.array_equal(f.words, g.words)
        assert f.checkpoints == g.checkpoints and f.n_pairs == g.n_pairs
        check_fast_decode(spec, g, tables, runs, s, e, rng, skip=50)
        for threads in (1, 3):
            ss, ee = fastans.decode_segments(spec, g.words, tables, runs, g.checkpoints, threads)
            assert np.array_equal(ss, s) and np.array_equal(ee, e)


@pytest.mark.parametrize("codec", ["tans8", "rans16", "rans24"])
def test_minilm_tensor_equal_golden(minilm, codec):
    spec = parse_codec(codec)
    ck = open_checkpoint(minilm)
    info = [i for i in ck.infos() if len(i.shape) == 2][3]
    bits, _ = convert(ck.tensor(info.name).array, info.dtype, "fp32")
    cp = PAIR_FORMATS["fp32"].split(bits.ravel()[:60000])
    counts = cp.counts()
    ct, t = spec.tables(counts, 24)
    s, e = ct.to_symbols(cp.codes, cp.extra)
    runs = [Run(0, s.size)]
    g = spec.coder().encode([t], runs, s, e, 4096)
    f = fastans.encode(spec, [t], runs, s, e, 4096)
    assert np.array_equal(f.words, g.words) and f.checkpoints == g.checkpoints
    ss, ee = fastans.decode_segments(spec, f.words, [t], runs, f.checkpoints, 2, compact=True)
    assert np.array_equal(fastpairs.join_values(ct, cp.exponents, PAIR_FORMATS["fp32"], ss, ee), bits.ravel()[:60000])


@pytest.mark.parametrize("codec", ["tans8", "rans16", "rans24"])
def test_errors_equal_golden(codec):
    """Truncated, corrupted and mismatched streams raise StreamError in both, with the same message."""
    spec = parse_codec(codec)
    rng = np.random.default_rng(7)
    tables, s, e, runs = _stream(spec, rng)
    st = spec.coder().encode(tables, runs, s, e, 1000)
    cases = [st.words[1:], st.words[:-1], st.words[:0], np.concatenate([st.words, st.words[:1]])]
    flipped = st.words.copy()
    flipped[len(flipped) // 2] ^= 0x55
    cases.append(flipped)
    for words in cases:
        errors = []
        for dec in (lambda: spec.coder().decode(words, tables, runs), lambda: fastans.decode(spec, words, tables, runs)):
            try:
                out = dec()
                errors.append(("ok", np.array_equal(out[0], s)))
            except StreamError as exc:
                errors.append(("err", str(exc)))
        assert errors[0] == errors[1]
    bad = [Checkpoint(c.pair, c.word, c.bit, (c.state + 1) % 256) for c in st.checkpoints]
    with pytest.raises(StreamError, match="segment|runs out|end check"):
        fastans.decode_segments(spec, st.words, tables, runs, bad, 2)
    with pytest.raises(StreamError, match="does not fit"):
        fastans.decode(spec, st.words, tables, runs, 5, 1, Checkpoint(-2 ** 31, 0, 0, 0))


def test_encoder_rejects_what_golden_rejects():
    spec = parse_codec("tans8")
    rng = np.random.default_rng(3)
    tables, s, e, runs = _stream(spec, rng, n_tensors=1)
    e = e.copy()
    e[5] = 1 << 40
    with pytest.raises(Exception) as g:
        spec.coder().encode(tables, runs, s, e)
    with pytest.raises(type(g.value), match=str(g.value).split(":")[0]):
        fastans.encode(spec, tables, runs, s, e)
