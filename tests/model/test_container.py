"""The .ansf container: bit-exact round trips of both models through every codec, random access,
gaps to the ideal, and 10^4 corrupted or truncated containers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ansforge.model.llm.checkpoint import open_checkpoint, select_tensors, write_safetensors
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.container import ContainerError, compress_checkpoint, encode_tensors, open_container
from ansforge.model.errors import AnsforgeError, ConfigError
from ansforge.model.dtypes.pairs import BF16, convert

from ..support import corrupt_blobs

CODECS = ("tans8", "rans16", "rans24")


def _assert_round_trip(model, out_dir, codec, pairs):
    f = out_dir / f"{codec}_{pairs}.ansf"
    compress_checkpoint(model, f, codec, pairs=pairs)
    c = open_container(f)
    c.decompress(out_dir / f"{codec}_{pairs}.safetensors")
    back = open_checkpoint(out_dir / f"{codec}_{pairs}.safetensors")
    src = open_checkpoint(model)
    assert back.names() == src.names()
    for info in src.infos():
        if not info.supported:  # non-float tensors pass through raw
            raw = np.memmap(src.path, np.uint8, "r", offset=info.offset, shape=(info.nbytes,))
            got = np.memmap(back.path, np.uint8, "r", offset=back.info(info.name).offset, shape=(info.nbytes,))
            assert np.array_equal(raw, got), info.name
            continue
        expected, _ = convert(src.tensor(info.name).array, info.dtype,
                              {"F32": "fp32", "F16": "fp16", "BF16": "bf16"}[info.dtype] if pairs == "auto" else pairs)
        got = back.tensor(info.name).array
        assert got.shape == expected.shape, info.name
        assert np.array_equal(got.view(expected.dtype), expected), info.name
    return c


@pytest.mark.parametrize("codec", CODECS + ("tans11",))
@pytest.mark.parametrize("pairs", ["auto", "bf16"])
def test_stories_every_tensor_round_trips(stories, tmp_path, codec, pairs):
    _assert_round_trip(stories, tmp_path, codec, pairs)


@pytest.mark.parametrize("codec", CODECS)
def test_minilm_every_tensor_round_trips_losslessly(minilm, tmp_path, codec):
    c = _assert_round_trip(minilm, tmp_path, codec, "auto")
    assert c.summary()["pairs"] > 22_000_000


def test_decompress_gives_back_the_source_file_byte_for_byte(minilm, tmp_path):
    """MiniLM's safetensors file (written by the safetensors library, metadata {"format": "pt"}, which
    transformers' loader requires) comes back identical, header and metadata included."""
    compress_checkpoint(minilm, tmp_path / "m.ansf", "tans8x8")
    open_container(tmp_path / "m.ansf").decompress(tmp_path / "m.safetensors")
    assert (tmp_path / "m.safetensors").read_bytes() == Path(minilm).read_bytes()


def test_source_metadata_is_kept_and_a_file_without_it_gets_none(tmp_path):
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((16, 8)) * 0.02).astype(np.float32)
    for k, meta in enumerate(({"format": "pt", "note": "ü, \"quoted\""}, None)):
        src = tmp_path / f"src{k}.safetensors"
        write_safetensors(src, [("w", "F32", w.shape)], lambda i, n: [w], metadata=meta)
        compress_checkpoint(src, tmp_path / f"m{k}.ansf", "rans16")
        c = open_container(tmp_path / f"m{k}.ansf")
        assert c.file_metadata == (meta or {})
        c.decompress(tmp_path / f"out{k}.safetensors")
        assert open_checkpoint(tmp_path / f"out{k}.safetensors").metadata == (meta or {})
        assert (tmp_path / f"out{k}.safetensors").read_bytes() == src.read_bytes()


# Acceptance: gap to the ideal on MiniLM's 2-D matrices and on stories260K (bf16 pairs), final state
# and checkpoints included.
# rans16's state is S = W + P = 48 bits (one DSP for the decoder's multiply, issue 19): its lower bound
# 2**16 = 2**P costs ~0.01 % over S = 64 (measured 0.0274 % MiniLM, 0.0295 % stories260K).
TARGETS = {"rans16": 0.0003, "rans24": 0.00002, "tans8": 0.005, "tans11": 0.001}


@pytest.fixture(scope="module")
def minilm_matrices(minilm):
    ck = open_checkpoint(minilm)
    return [(i.name, BF16.split(convert(ck.tensor(i.name).array, i.dtype, "bf16")[0]))
            for i in select_tensors(ck)]


@pytest.mark.parametrize("codec", list(TARGETS))
def test_gap_to_ideal_minilm(minilm_matrices, codec):
    st = encode_tensors(parse_codec(codec), minilm_matrices)
    gap = st.total_bits / sum(t.ideal_bits for t in st.tensors) - 1
    assert len(minilm_matrices) == 40
    assert 0 <= gap <= TARGETS[codec], f"{codec}: gap {100 * gap:.5f}%"


@pytest.mark.parametrize("codec", list(TARGETS))
def test_gap_to_ideal_stories(stories, codec):
    ck = open_checkpoint(stories)
    items = [(i.name, BF16.split(convert(ck.tensor(i.name).array, i.dtype, "bf16")[0])) for i in select_tensors(ck)]
    st = encode_tensors(parse_codec(codec), items)
    gap = st.total_bits / sum(t.ideal_bits for t in st.tensors) - 1
    assert 0 <= gap <= TARGETS[codec], f"{codec}: gap {100 * gap:.5f}%"


@pytest.mark.parametrize("codec", CODECS)
def test_decode_range_1000_random_positions(stories, tmp_path, codec):
    f = tmp_path / "s.ansf"
    compress_checkpoint(stories, f, codec, pairs="bf16", checkpoint_interval=4096)
    c = open_container(f)
    assert len(c.streams[0].checkpoints) == c.streams[0].n_pairs // 4096
    full = {n: c.read(n).ravel() for n in c.names}
    rng = np.random.default_rng(11)
    names = [n for n in c.names if full[n].size]
    for _ in range(1000):
        n = names[int(rng.integers(len(names)))]
        start = int(rng.integers(0, full[n].size))
        count = int(rng.integers(0, min(600, full[n].size - start) + 1))
        assert np.array_equal(c.decode_range(n, start, count), full[n][start:start + count])



@pytest.mark.parametrize("codec", ("tans8", "rans16"))
def test_public_stream_api(stories, tmp_path, codec):
    """stream_words, decode_stream and join: what the simulators and reports read a stream through."""
    f = tmp_path / "s.ansf"
    compress_checkpoint(stories, f, codec, pairs="bf16", checkpoint_interval=4096)
    c = open_container(f)
    st = c.streams[0]
    words = c.stream_words(st)
    assert words.size == st.n_words and words.dtype.itemsize == st.word_bytes and not words.flags.writeable
    symbols, extras = c.decode_stream(st)
    assert symbols.size == extras.size == st.n_pairs
    for ti in st.tensors:
        rec = c.tensors[ti]
        a, n = int(rec["first_pair"]), int(rec["n_pairs"])
        assert np.array_equal(c.join(rec, symbols[a:a + n], extras[a:a + n]), c.read(rec["name"]).ravel())
        assert c.code_table(rec).n_codes <= len(rec["exponents"])
    s2, e2 = c.decode_stream(st, 5000, 300)
    assert np.array_equal(s2, symbols[5000:5300]) and np.array_equal(e2, extras[5000:5300])
    assert c.decode_stream(st, st.n_pairs - 7)[0].size == 7
    for start, count in ((-1, 2), (0, st.n_pairs + 1), (st.n_pairs, 1)):
        with pytest.raises(ConfigError, match="outside stream 0"):
            c.decode_stream(st, start, count)

def test_checkpoint_overhead_falls_with_interval(stories, tmp_path):
    sizes = {}
    for k in (1024, 16384, 0):
        r = compress_checkpoint(stories, tmp_path / f"{k}.ansf", "rans16", pairs="bf16", checkpoint_interval=k)
        sizes[k] = r["bits"]
    assert sizes[1024] > sizes[16384] > sizes[0]


def _tiny_model(path):
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((40, 30)) * 0.02).astype(np.float32)
    c = (rng.standard_normal(100) * 0.1).astype(np.float32).view(np.uint32)
    c = ((c + 0x8000) >> 16).astype(np.uint16)
    d = np.arange(10, dtype=np.int64)
    tensors = [("w.a", "F32", a.shape), ("w.c", "BF16", c.shape), ("ids", "I64", d.shape), ("empty", "F32", (0,))]
    data = {"w.a": a, "w.c": c, "ids": d.view(np.uint8), "empty": np.zeros(0, np.float32)}
    write_safetensors(path, tensors, lambda i, n: [data[n]])
    return data


@pytest.mark.parametrize("codec", CODECS)
def test_fuzzed_containers_never_return_wrong_weights(tmp_path, codec):
    """3,000 corrupted containers in all (1,000 per codec; structured cases: tests/model/test_container_fuzz.py): a
    flipped byte or a truncation always raises an error naming where (tensor and block, record, or header),
    never returns different weights, never hangs."""
    model = tmp_path / "tiny.safetensors"
    _tiny_model(model)
    f = tmp_path / "tiny.ansf"
    compress_checkpoint(model, f, codec, checkpoint_interval=256)
    good = f.read_bytes()
    ref = open_container(f)
    expected = {n: ref.read(n).tobytes() for n in ref.names}
    rng = np.random.default_rng(len(codec))
    bad = tmp_path / "bad.ansf"
    raised = 0
    for case, blob in enumerate(corrupt_blobs(good, rng, 1000)):
        bad.write_bytes(blob)
        try:
            c = open_container(bad)
            got = {n: c.read(n).tobytes() for n in c.names}
        except AnsforgeError as e:
            msg = str(e)
            assert "bad.ansf" in msg
            assert any(w in msg for w in ("block", "header", "record", "truncated", "payload")), msg
            raised += 1
            continue
        assert got == expected, f"case {case}: corrupted container decoded to different weights"
    assert raised == 1000


def test_bad_container_inputs(tmp_path, stories):
    f = tmp_path / "x.ansf"
    f.write_bytes(b"not a container at all, just some bytes")
    with pytest.raises(ContainerError, match="bad magic"):
        open_container(f)
    with pytest.raises(ContainerError, match="truncated"):
        f.write_bytes(b"ANSF")
        open_container(f)
    with pytest.raises(ConfigError, match="codec"):
        compress_checkpoint(stories, tmp_path / "y.ansf", "huffman")
    with pytest.raises(ConfigError, match="checkpoint_interval"):
        compress_checkpoint(stories, tmp_path / "y.ansf", "tans8", checkpoint_interval=-1)
    assert not (tmp_path / "y.ansf").exists()


def test_nonfinite_weights_refused_unless_allowed(tmp_path):
    model = tmp_path / "nan.safetensors"
    a = np.array([1.0, np.nan, np.inf, -0.0], dtype=np.float32)
    write_safetensors(model, [("w", "F32", a.shape)], lambda i, n: [a])
    with pytest.raises(ConfigError, match=r"'w' holds 2 NaN/Inf"):
        compress_checkpoint(model, tmp_path / "n.ansf", "tans8")
    compress_checkpoint(model, tmp_path / "n.ansf", "tans8", allow_nonfinite=True)
    got = open_container(tmp_path / "n.ansf").read("w")
    assert np.array_equal(got, a.view(np.uint32))


def _as_version_1(blob: bytes) -> bytes:
    """Rewrite a version-2 container as version 1 wrote it: block CRCs over the words in address
    order, blocks cut at the checkpoints' word offsets only (an independent re-implementation)."""
    import json
    import struct
    import zlib
    magic, version, n_t, n_s, _ = struct.unpack("<8sIIII", blob[:24])
    assert version == 2
    pos, records = 24, []
    for _ in range(n_t + n_s):
        (length,) = struct.unpack("<I", blob[pos:pos + 4])
        records.append(json.loads(blob[pos + 4:pos + 4 + length]))
        pos += 8 + length
    payload = blob[pos:]
    for rec in records[n_t:]:
        wb, base = rec["word_bytes"], rec["payload_offset"]
        words = payload[base:base + rec["n_words"] * wb]
        bounds = [rec["n_words"]] + [c[1] for c in rec["checkpoints"]] + [0]
        rec["blocks"] = [[lo, hi, zlib.crc32(words[lo * wb:hi * wb])] for hi, lo in zip(bounds, bounds[1:])]
    head = struct.pack("<8sIII", magic, 1, n_t, n_s)
    out = head + struct.pack("<I", zlib.crc32(head))
    for rec in records:
        js = json.dumps(rec).encode()
        out += struct.pack("<I", len(js)) + js + struct.pack("<I", zlib.crc32(js))
    return out + payload


@pytest.mark.parametrize("codec", ["tans8", "rans16"])
def test_version_1_containers_still_read(tmp_path, codec):
    """Version 2 changed how block CRCs are taken (decoding order, for the cores); version 1 files
    still decode, and a flipped payload byte in one is still caught."""
    model = tmp_path / "tiny.safetensors"
    _tiny_model(model)
    f2, f1 = tmp_path / "v2.ansf", tmp_path / "v1.ansf"
    compress_checkpoint(model, f2, codec, checkpoint_interval=256)
    blob = _as_version_1(f2.read_bytes())
    f1.write_bytes(blob)
    c2, c1 = open_container(f2), open_container(f1)
    assert (c1.version, c2.version) == (1, 2)
    for n in c2.names:
        assert np.array_equal(c1.read(n), c2.read(n)), n
    bad = bytearray(blob)
    bad[-5] ^= 0x10        # in the payload
    f1.write_bytes(bytes(bad))
    with pytest.raises(AnsforgeError, match="CRC32 mismatch|block"):
        c = open_container(f1)
        for n in c.names:
            c.read(n)


@pytest.mark.parametrize("codec", ["rans16", "tans8"])
def test_an_all_zero_tensor_in_its_own_stream_reads_back(codec, tmp_path):
    """rANS codes all-zero pairs from its initial state x = 0 at no cost: MiniLM's pooler bias, alone in its
    stream, is 384 pairs in 0 words. The reader used to refuse such a container as too short."""
    src = tmp_path / "m.safetensors"
    rng = np.random.default_rng(4)
    data = {"zero.bias": np.zeros(384, np.float32), "w": rng.standard_normal((32, 32)).astype(np.float32)}
    write_safetensors(src, [(n, "F32", a.shape) for n, a in data.items()], lambda i, n: [data[n]])
    out = tmp_path / "m.ansf"
    compress_checkpoint(src, out, codec, group="tensor")
    c = open_container(out)
    assert np.array_equal(c.read("zero.bias").view(np.float32), np.zeros(384, np.float32))
