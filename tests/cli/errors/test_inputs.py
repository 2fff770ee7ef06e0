"""Issue 48, deliverables 1 and 7: every input is identified by its content before a parser takes it,
and whatever ``compress`` writes, ``decompress`` reads (a tensor the reader would refuse is refused by
the writer first).

Each case builds a tiny file in the case's working folder and runs one command through the
``mistake`` harness (exit status 2, one ``ansforge: `` line naming the file and the fault, inputs
unchanged, nothing left behind). The GGUF files are written here byte by byte (:func:`gguf_bytes`),
so that a case can break exactly one field of the layout.
"""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest

from ansforge.model.coding.container import MAGIC, compress_checkpoint, open_container
from ansforge.model.llm.checkpoint import MAX_DIMS, open_checkpoint, shape_problem

EXPECTED = "expected a safetensors, GGUF or llama2.c checkpoint"
TEXT = "# Model card\n\nThis folder holds the weights of a small model, see the paper for details.\n" * 4


# --------------------------------------------------------------------------------------------------
# tiny files


def safetensors_bytes(header: dict, data: bytes = b"") -> bytes:
    """A safetensors file from its header, exactly as written (no validation)."""
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    return struct.pack("<Q", len(blob)) + blob + data


def tiny_safetensors() -> bytes:
    from safetensors.numpy import save

    rng = np.random.default_rng(0)
    return save({"w": rng.standard_normal((8, 16)).astype(np.float32), "b": np.ones(16, np.float32)})


def _gguf_string(s: bytes) -> bytes:
    s = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(s)) + s


def gguf_bytes(*, magic=b"GGUF", version=3, alignment=32, tensors=None, kv=None, n_tensors=None, n_kv=None,
               pad=True) -> bytes:
    """A GGUF file: ``tensors`` is a list of ``(name, dims (GGML order), ggml type, offset or None, data)``;
    ``offset None`` places the data at the next aligned offset. ``kv``: ``(key, type, raw value bytes)``."""
    if tensors is None:
        tensors = [("w", [4, 2], 0, None, np.arange(8, dtype=np.float32).tobytes())]
    kv = [(b"general.alignment", 4, struct.pack("<I", alignment))] if kv is None else kv
    head = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                               len(kv) if n_kv is None else n_kv)
    for key, vtype, raw in kv:
        head += _gguf_string(key) + struct.pack("<I", vtype) + raw
    offsets, data, pos = [], b"", 0
    for name, dims, gtype, offset, blob in tensors:
        pos += -pos % alignment
        offsets.append(pos if offset is None else offset)
        pos += len(blob)
    for (name, dims, gtype, _, _), offset in zip(tensors, offsets):
        head += _gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        head += struct.pack("<IQ", gtype, offset)
    if pad:
        head += b"\0" * (-len(head) % alignment)
    for (_, _, _, _, blob), offset in zip(tensors, offsets):
        data += b"\0" * (offset - len(data)) + blob if offset >= len(data) else blob
    return head + data


def legacy_llama2c_header() -> bytes:
    """The 28-byte header of a legacy llama2.c checkpoint (dim 8, hidden 16, 1 layer, 2 heads, ...)."""
    return struct.pack("<7i", 8, 16, 1, 2, 2, 32, 16)


def tiny_container(workdir, codec="tans8") -> bytes:
    (workdir / "m.safetensors").write_bytes(tiny_safetensors())
    compress_checkpoint(workdir / "m.safetensors", workdir / "m.ansf", codec, checkpoint_interval=64)
    return (workdir / "m.ansf").read_bytes()


def records(blob: bytes):
    """``(start, end)`` of each record (length, JSON, CRC) of a container, and the payload start."""
    _, _, n_t, n_s, _ = struct.unpack_from("<8sIIII", blob)
    pos, out = 24, []
    for _ in range(n_t + n_s):
        (length,) = struct.unpack_from("<I", blob, pos)
        out.append((pos, pos + 8 + length))
        pos += 8 + length
    return out, n_t, pos


def with_record(blob: bytes, index: int, edit) -> bytes:
    """The container with record ``index``'s JSON replaced by ``edit(record)``, its CRC recomputed."""
    spans, _, _ = records(blob)
    lo, hi = spans[index]
    rec = json.loads(blob[lo + 4:hi - 4])
    js = json.dumps(edit(rec), separators=(",", ":")).encode()
    return blob[:lo] + struct.pack("<I", len(js)) + js + struct.pack("<I", zlib.crc32(js)) + blob[hi:]


# --------------------------------------------------------------------------------------------------
# 1. every input is identified by its content, whatever its name

NOT_CHECKPOINTS = {
    # file name: (content, words the one line must hold)
    "readme.safetensors": (TEXT.encode(), ("not a safetensors file", "looks like text", EXPECTED)),
    "notes.gguf": (TEXT.encode(), ("not a GGUF file", "looks like text")),
    "story.bin": (TEXT.encode(), ("not a llama2.c checkpoint", "looks like text")),
    "config.safetensors": (json.dumps({"dim": 288, "n_layers": 6}).encode() * 4, ("JSON text",)),
    "tiny.bin": (b"x" * 27, ("too short to be a checkpoint", "27 bytes")),
    "blank.safetensors": (b"", ("not a safetensors file", "empty")),
    "pytorch_model.bin": (b"PK\x03\x04" + bytes(60), ("zip archive", "convert it to safetensors")),
    "weights.pt": (b"\x80\x02" + bytes(60), ("pickle",)),
    "model.gguf.gz": (b"\x1f\x8b\x08" + bytes(60), ("gzip",)),
    # a GGUF whose magic is damaged is not a llama2.c header problem
    "broken.gguf": (b"GGUX" + gguf_bytes()[4:], ("not a GGUF file", "match no format")),
}


@pytest.mark.parametrize("name", sorted(NOT_CHECKPOINTS))
def test_compress_names_what_a_file_is(mistake, workdir, name):
    content, words = NOT_CHECKPOINTS[name]
    (workdir / name).write_bytes(content)
    out = mistake("compress", "--model", name, "-o", "out.ansf", names=(name, *words))
    assert "llama2.c header" not in out.line


@pytest.mark.parametrize("verb", [("tables",), ("types",), ("histograms", "-o", "h.json"), ("quantize", "--to",
                                                                                              "e4m3", "-o", "q.st")])
def test_every_model_reader_names_what_a_file_is(mistake, workdir, verb):
    (workdir / "readme.safetensors").write_text(TEXT)
    mistake(verb[0], "--model", "readme.safetensors", *verb[1:],
            names=("readme.safetensors", "not a safetensors file", "looks like text"))


@pytest.mark.parametrize("name", ["model.ansf", "model.safetensors"])
def test_a_container_given_as_model_says_use_decompress(mistake, workdir, name):
    blob = tiny_container(workdir)
    (workdir / name).write_bytes(blob)
    mistake("compress", "--model", name, "-o", "out.ansf", names=(name, "ansforge container", "decompress"))


def test_a_cut_llama2c_header_is_still_called_one(mistake, workdir):
    (workdir / "cut.bin").write_bytes(legacy_llama2c_header()[:10])
    mistake("compress", "--model", "cut.bin", "-o", "out.ansf", names=("cut.bin", "truncated llama2.c header"))


@pytest.mark.parametrize("name, content, words", [
    ("readme.ansf", TEXT.encode(), ("not an ansforge container", "looks like text")),
    ("m.ansf", None, ("not an ansforge container", "safetensors checkpoint", "compress")),
    ("x.ansf", b"\x00\x01\x02", ("not an ansforge container", "3 bytes")),
    ("cut.ansf", MAGIC[:6], ("truncated", "has 6 bytes", "needs 24")),
])
def test_decompress_names_what_a_file_is(mistake, workdir, name, content, words):
    (workdir / name).write_bytes(tiny_safetensors() if content is None else content)
    mistake("decompress", name, "-o", "out.safetensors", names=(name, *words))


# --------------------------------------------------------------------------------------------------
# GGUF: the layout checked against the file, never numpy's messages


def _misaligned():
    data = np.arange(8, dtype=np.float32).tobytes()
    return gguf_bytes(tensors=[("w", [4, 2], 0, None, data), ("v", [4], 0, 36, data[:16])])


GGUF_CASES = {
    # name: (file bytes, words)
    "misaligned": (_misaligned, ("'v'", "data offset 36", "alignment (32)")),
    "past_end": (lambda: gguf_bytes()[:-4], ("'w'", "runs past the end", "truncated")),
    "cut_in_metadata": (lambda: gguf_bytes(kv=[(b"general.name", 8, _gguf_string(b"x" * 100))])[:100],
                        ("header truncated", "metadata entry 0", "'general.name'", "the file has 100")),
    "cut_in_tensor_info": (lambda: gguf_bytes(pad=False)[:70], ("header truncated", "tensor")),
    "counts": (lambda: gguf_bytes(n_tensors=1 << 40), ("declares", "tensors", "truncated or corrupt")),
    "version": (lambda: gguf_bytes(version=7), ("version 7", "not supported")),
    "ggml_type": (lambda: gguf_bytes(tensors=[("w", [4], 99, None, bytes(16))]), ("unknown GGML type 99",)),
    "alignment": (lambda: gguf_bytes(kv=[(b"general.alignment", 4, struct.pack("<I", 24))]),
                  ("alignment 24", "power of two")),
    "duplicate_key": (lambda: gguf_bytes(kv=[(b"a", 4, bytes(4)), (b"a", 4, bytes(4))]), ("'a'", "twice")),
    "value_type": (lambda: gguf_bytes(kv=[(b"a", 42, bytes(4))]), ("unknown value type 42",)),
    "huge_array": (lambda: gguf_bytes(kv=[(b"a", 9, struct.pack("<IQ", 4, 1 << 50))]), ("array of", "truncated")),
    "dims": (lambda: gguf_bytes(tensors=[("w", [1] * 5, 0, None, bytes(4))]), ("5 dimensions",)),
    "huge_dim": (lambda: gguf_bytes(tensors=[("w", [1 << 62, 0], 0, None, b"")]), ("2^48",)),
    "q4_0_rows": (lambda: gguf_bytes(tensors=[("w", [31], 2, None, bytes(18))]), ("Q4_0", "32-value blocks")),
}


@pytest.mark.parametrize("case", sorted(GGUF_CASES))
def test_crafted_gguf_is_one_line_naming_the_file(mistake, workdir, case):
    build, words = GGUF_CASES[case]
    (workdir / "m.gguf").write_bytes(build())
    out = mistake("compress", "--model", "m.gguf", "-o", "out.ansf", names=("m.gguf", "GGUF", *words))
    assert "index" not in out.line and "llama2.c" not in out.line


def test_misaligned_gguf_is_refused_by_tables_too(mistake, workdir):
    """A misaligned offset was read as shifted garbage (``tables`` exited 0)."""
    (workdir / "m.gguf").write_bytes(_misaligned())
    mistake("tables", "--model", "m.gguf", "--include", "*", names=("m.gguf", "data offset 36", "alignment"))


def test_handmade_gguf_reads_as_written(workdir):
    """The writer of these cases is a GGUF the gguf package reads: the cases break one field each."""
    (workdir / "m.gguf").write_bytes(gguf_bytes(tensors=[("w", [4, 2], 0, None, np.arange(8, dtype=np.float32).tobytes()),
                                                         ("v", [4], 0, None, np.ones(4, np.float32).tobytes())]))
    ck = open_checkpoint(workdir / "m.gguf")
    assert ck.tensor("w").array.tolist() == np.arange(8, dtype=np.float32).reshape(2, 4).tolist()
    assert ck.tensor("v").array.tolist() == [1.0] * 4


# --------------------------------------------------------------------------------------------------
# safetensors: odd shapes and headers

ODD_SHAPES = {
    # name: (shape, words): shapes the reader of a container refuses, so compress refuses them first
    "zero_beside_huge": ([0, 2 ** 62], ("[0, 4611686018427387904]", "2^48")),
    "dims_33": ([1] * 33, ("33 dimensions", "more than 32")),
    "dim_2_48": ([1 << 48, 0], ("2^48",)),
    "product": ([0, 1 << 30, 1 << 30], ("product", "2^48")),
}


def _odd(shape) -> bytes:
    n = int(np.prod(shape, dtype=object))
    return safetensors_bytes({"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 4 * n]}}, bytes(4 * n))


@pytest.mark.parametrize("case", sorted(ODD_SHAPES))
def test_compress_refuses_what_decompress_would(mistake, workdir, case):
    shape, words = ODD_SHAPES[case]
    (workdir / "odd.safetensors").write_bytes(_odd(shape))
    mistake("compress", "--model", "odd.safetensors", "-o", "out.ansf", names=("odd.safetensors", "'w'", *words))


@pytest.mark.parametrize("verb", [("tables",), ("types",)])
def test_zero_elements_beside_a_huge_dimension_is_one_line(mistake, workdir, verb):
    """``[0, 2**62]`` crashed ``_memmap`` with NumPy's ``array is too big``."""
    (workdir / "odd.safetensors").write_bytes(_odd([0, 2 ** 62]))
    out = mistake(*verb, "--model", "odd.safetensors", "--include", "*", names=("odd.safetensors", "'w'", "2^48"))
    assert "too big" not in out.line


def test_truncated_safetensors_header(mistake, workdir):
    blob = tiny_safetensors()
    (workdir / "cut.safetensors").write_bytes(blob[:40])
    mistake("compress", "--model", "cut.safetensors", "-o", "out.ansf",
            names=("cut.safetensors", "truncated safetensors header", "declares"))


def test_truncated_safetensors_data(mistake, workdir):
    blob = tiny_safetensors()
    (workdir / "cut.safetensors").write_bytes(blob[:-10])
    mistake("compress", "--model", "cut.safetensors", "-o", "out.ansf",
            names=("cut.safetensors", "truncated safetensors file", "576 bytes of tensor data", "has 566"))


def test_writer_and_reader_agree_on_the_edges(workdir):
    """The largest shapes the shared check accepts are written by compress and read back by decompress
    (bit-exact); one step past them both refuse, with the same words."""
    edge = {"a": ([1] * MAX_DIMS, 1), "b": ([0, (1 << 48) - 1], 0), "c": ([3, 0, 5], 0)}
    header, data = {}, b""
    for name, (shape, n) in edge.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + 4 * n]}
        data += np.full(n, 1.5, np.float32).tobytes()
    (workdir / "edge.safetensors").write_bytes(safetensors_bytes(header, data))
    compress_checkpoint(workdir / "edge.safetensors", workdir / "edge.ansf", "tans8")
    c = open_container(workdir / "edge.ansf")
    for name, (shape, _) in edge.items():
        assert c.record(name)["shape"] == shape
    c.decompress(workdir / "back.safetensors")
    back = open_checkpoint(workdir / "back.safetensors")
    assert {i.name: list(i.shape) for i in back.infos()} == {k: v[0] for k, v in edge.items()}
    for shape in ([1] * (MAX_DIMS + 1), [0, 1 << 48], [0, 1 << 24, 1 << 24]):
        assert shape_problem(shape) is not None


def test_fp8_nan_is_refused_as_stored(mistake, workdir):
    """An F8_E4M3 tensor is coded as stored: its NaN is refused without "after conversion"."""
    data = bytes([0x38, 0x7F, 0x40, 0xFF])  # 1.0, NaN, 2.0, -NaN
    (workdir / "fp8.safetensors").write_bytes(
        safetensors_bytes({"w": {"dtype": "F8_E4M3", "shape": [2, 2], "data_offsets": [0, 4]}}, data))
    out = mistake("compress", "--model", "fp8.safetensors", "-o", "out.ansf",
                  names=("fp8.safetensors", "'w'", "2 NaN/Inf", "--allow-nonfinite"))
    assert "conversion" not in out.line


def test_nan_after_a_real_conversion_says_so(mistake, workdir):
    data = np.array([1.0, np.nan, 2.0, 3.0], np.float32).tobytes()
    (workdir / "f.safetensors").write_bytes(
        safetensors_bytes({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, data))
    mistake("compress", "--model", "f.safetensors", "--pairs", "bf16", "-o", "out.ansf",
            names=("f.safetensors", "'w'", "after conversion to bf16"))


# --------------------------------------------------------------------------------------------------
# containers: cut short, and record numbers as `inspect` numbers them

CUTS = {  # where to cut the container: a function of (blob, record spans, payload start)
    "in_magic": lambda b, r, p: 5,
    "in_header": lambda b, r, p: 20,
    "in_first_record": lambda b, r, p: r[0][0] + 10,
    "in_stream_record": lambda b, r, p: r[-1][0] + 6,
    "in_payload": lambda b, r, p: p + (len(b) - p) // 2,
    "last_byte": lambda b, r, p: len(b) - 1,
}


@pytest.mark.parametrize("verb", ["decompress", "inspect"])
@pytest.mark.parametrize("cut", sorted(CUTS))
def test_a_cut_container_says_truncated_with_byte_counts(mistake, workdir, cut, verb):
    blob = tiny_container(workdir)
    spans, _, payload = records(blob)
    at = CUTS[cut](blob, spans, payload)
    (workdir / "cut.ansf").write_bytes(blob[:at])
    args = ("decompress", "cut.ansf", "-o", "out.safetensors") if verb == "decompress" else ("inspect", "cut.ansf")
    out = mistake(*args, names=("cut.ansf", "truncated", f"the file has {at:,} bytes"))
    assert "outside" not in out.line


def test_record_numbers_match_inspect(mistake, workdir, capfd):
    """A stream record's fault names "stream 0", the number ``inspect`` lists it under."""
    from ansforge.cli import main

    blob = tiny_container(workdir)
    assert main(["inspect", "m.ansf"]) == 0
    assert "\nstream 0: " in capfd.readouterr().out
    _, n_t, _ = records(blob)
    bad = with_record(blob, n_t, lambda r: {**r, "word_bytes": 3})
    (workdir / "bad.ansf").write_bytes(bad)
    mistake("inspect", "bad.ansf", names=("bad.ansf", "stream 0 record", "word_bytes = 3"))
    bad = with_record(blob, 1, lambda r: {k: v for k, v in r.items() if k != "name"})
    (workdir / "bad.ansf").write_bytes(bad)
    mistake("inspect", "bad.ansf", names=("bad.ansf", "tensor 1 record", "'name'"))


def test_a_crafted_container_shape_is_refused_by_the_shared_check(mistake, workdir):
    blob = tiny_container(workdir)
    bad = with_record(blob, 0, lambda r: {**r, "shape": [1] * 33})
    (workdir / "bad.ansf").write_bytes(bad)
    mistake("decompress", "bad.ansf", "-o", "out.safetensors", names=("bad.ansf", "33 dimensions"))


def test_simulate_container_does_not_claim_a_context_plan(mistake, workdir):
    """A plain tans8x2 container (two tensors in one stream, no plan) was refused as "with a context
    plan (N tables)"; it is refused for what it is: several tensors in one stream."""
    (workdir / "m.safetensors").write_bytes(tiny_safetensors())
    compress_checkpoint(workdir / "m.safetensors", workdir / "x2.ansf", "tans8x2", layout="model")
    out = mistake("simulate", "--core", "tans-decoder", "--container", "x2.ansf",
                  names=("x2.ansf", "stream 0 holds 2 tensors", "--stream-per-tensor"))
    assert "context plan" not in out.line


# (a folder given as --model is a Hugging Face checkpoint folder: tests/model/test_sharded.py)
@pytest.mark.parametrize("args, words", [
    (("decompress", "folder", "-o", "out.safetensors"), ("folder", "is a directory", ".ansf")),
    (("inspect", "folder"), ("folder", "is a directory", ".ansf")),
])
def test_a_folder_for_a_file(mistake, workdir, args, words):
    (workdir / "folder").mkdir()
    (workdir / "folder" / "model.safetensors").write_bytes(tiny_safetensors())
    mistake(*args, names=words)


@pytest.mark.parametrize("name, content, words", [
    ("tokenizer.json", json.dumps({"model": {"vocab": {"a": 0}}}).encode() * 8, ("JSON text",)),
    ("tok.safetensors", None, ("safetensors checkpoint", "tokenizer.bin")),
])
def test_generate_names_what_a_tokenizer_file_is(mistake, workdir, stories, name, content, words):
    (workdir / name).write_bytes(tiny_safetensors() if content is None else content)
    mistake("generate", "--model", stories, "--tokenizer", name, "--prompt", "hi", "--steps", "2",
            names=(name, "not a llama2.c tokenizer", *words))


def test_a_cut_llama2c_checkpoint_says_truncated(mistake, workdir, stories):
    blob = stories.read_bytes()
    (workdir / "cut.bin").write_bytes(blob[:len(blob) // 2])
    mistake("compress", "--model", "cut.bin", "-o", "out.ansf",
            names=("cut.bin", "llama2.c header", f"implies {len(blob)} bytes", f"has {len(blob) // 2}", "truncated"))


def test_compress_refuses_a_checkpoint_interval_decompress_would(mistake, workdir):
    """``--checkpoint-interval 2**50`` was written, then refused by decompress."""
    (workdir / "m.safetensors").write_bytes(tiny_safetensors())
    mistake("compress", "--model", "m.safetensors", "-o", "out.ansf", "--checkpoint-interval", str(1 << 50),
            names=("checkpoint_interval", str(1 << 50), "2^48"))
