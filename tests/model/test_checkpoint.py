"""Checkpoint readers: every format gives the same tensors as an independent read of the bytes."""

from __future__ import annotations

import struct

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from ansforge.model.llm.checkpoint import (Checkpoint, TensorInfo, open_checkpoint, select_tensors,
                                       write_safetensors)
from ansforge.model.errors import CheckpointError
from ansforge.model.dtypes.pairs import fp32_to_bf16_rne

from ..conftest import read_stories_raw


def test_stories_legacy_layout_matches_raw_bytes(stories):
    header, floats = read_stories_raw(stories)
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = header
    assert (dim, hidden, layers, heads, kv_heads, vocab) == (64, 172, 5, 8, 4, 512)
    ck = open_checkpoint(stories)
    assert ck.format == "llama2c" and ck.version == 0 and ck.config.shared_classifier
    # The file is exactly the concatenation of the tensors, in llama2.c's order.
    assert np.array_equal(np.concatenate([t.array.ravel() for t in ck]), floats)
    emb = ck.tensor("tok_embeddings.weight")
    assert emb.shape == (512, 64) and np.array_equal(emb.array.ravel(), floats[:512 * 64])
    wk = ck.tensor("layers.3.attention.wk.weight")
    assert wk.shape == (32, 64)


def test_default_selection_counts_the_papers_matrices(stories, minilm):
    sel = select_tensors(open_checkpoint(stories))
    assert len(sel) == 36 and sum(i.size for i in sel) == 259_328
    assert not any("norm" in i.name or "freq_cis" in i.name for i in sel)
    sel = select_tensors(open_checkpoint(minilm))
    assert len(sel) == 40 and sum(i.size for i in sel) == 22_682_112
    assert "embeddings.position_ids" not in [i.name for i in sel]


def test_include_and_exclude_patterns(stories):
    ck = open_checkpoint(stories)
    wq = select_tensors(ck, include=["layers.*.attention.wq.weight"])
    assert [i.name for i in wq] == [f"layers.{k}.attention.wq.weight" for k in range(5)]
    norms = select_tensors(ck, include=["*norm*"])
    assert len(norms) == 11 and all(len(i.shape) == 1 for i in norms)
    no_ffn = select_tensors(ck, exclude=["*feed_forward*"])
    assert len(no_ffn) == 36 - 15
    with pytest.raises(CheckpointError, match="matches no tensor"):
        select_tensors(ck, include=["nothing*"])


def test_shared_storage_is_counted_once():
    class Tied(Checkpoint):
        def __init__(self):
            super().__init__("tied")
            self._infos = [TensorInfo("embed", (4, 2), "F32", 0, 32), TensorInfo("lm_head", (4, 2), "F32", 0, 32),
                           TensorInfo("w", (2, 2), "F32", 32, 16)]

        def _view(self, info):
            raise AssertionError

    assert [i.name for i in select_tensors(Tied())] == ["embed", "w"]


def _write_v1(path, header, tensors, shared: bool) -> None:
    """llama2.c version-1 export, written independently of ansforge (export.py's layout)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<I", 0x616B3432) + struct.pack("<i", 1) + struct.pack("<7i", *header))
        f.write(struct.pack("B", int(shared)))
        f.write(b"\0" * (256 - f.tell()))
        for t in tensors:
            f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())


def _stories_tensors(stories):
    ck = open_checkpoint(stories)
    return ck, {t.name: np.array(t.array) for t in ck}


def test_v1_export_and_unshared_classifier(stories, tmp_path):
    ck, t = _stories_tensors(stories)
    L = 5
    order = ([f"layers.{i}.attention_norm.weight" for i in range(L)] + [f"layers.{i}.ffn_norm.weight" for i in range(L)]
             + ["norm.weight", "tok_embeddings.weight"]
             + [f"layers.{i}.attention.{w}.weight" for w in ("wq", "wk", "wv", "wo") for i in range(L)]
             + [f"layers.{i}.feed_forward.{w}.weight" for w in ("w1", "w2", "w3") for i in range(L)])
    header = (64, 172, 5, 8, 4, 512, 512)
    classifier = t["tok_embeddings.weight"][::-1].copy()
    _write_v1(tmp_path / "v1.bin", header, [t[n] for n in order] + [classifier], shared=False)
    v1 = open_checkpoint(tmp_path / "v1.bin")
    assert v1.version == 1 and not v1.config.shared_classifier
    for name in order:
        assert np.array_equal(v1.tensor(name).array, t[name]), name
    assert np.array_equal(v1.tensor("output.weight").array, classifier)
    sel = select_tensors(v1)
    assert len(sel) == 37 and sel[-1].name == "output.weight"
    # Legacy with a separate classifier: negative vocab size, classifier after freq_cis.
    raw = bytearray(stories.read_bytes())
    struct.pack_into("<i", raw, 20, -512)
    (tmp_path / "legacy.bin").write_bytes(bytes(raw) + classifier.astype("<f4").tobytes())
    legacy = open_checkpoint(tmp_path / "legacy.bin")
    assert np.array_equal(legacy.tensor("output.weight").array, classifier)
    assert len(select_tensors(legacy)) == 37


def test_safetensors_f32_f16_bf16(stories, tmp_path):
    _, t = _stories_tensors(stories)
    save_file(t, str(tmp_path / "f32.safetensors"))
    save_file({k: v.astype(np.float16) for k, v in t.items()}, str(tmp_path / "f16.safetensors"))
    names = list(t)
    bf = {k: fp32_to_bf16_rne(v) for k, v in t.items()}
    write_safetensors(tmp_path / "bf16.safetensors", [(k, "BF16", t[k].shape) for k in names],
                      lambda i, name: [bf[name]])
    for fname, dtype, expect in (("f32", "F32", t), ("f16", "F16", {k: v.astype(np.float16) for k, v in t.items()}),
                                 ("bf16", "BF16", bf)):
        ck = open_checkpoint(tmp_path / f"{fname}.safetensors")
        assert ck.format == "safetensors"
        assert sorted(ck.names()) == sorted(names)
        for rec in ck:
            assert rec.dtype == dtype and rec.shape == expect[rec.name].shape
            assert np.array_equal(rec.array.view(np.uint8), np.ascontiguousarray(expect[rec.name]).view(np.uint8))
        assert len(select_tensors(ck)) == 36


def test_gguf_f32_f16_bf16(stories, tmp_path):
    _, t = _stories_tensors(stories)
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    names = list(t)
    for i, (name, v) in enumerate(t.items()):
        kind = i % 3
        if kind == 0:
            w.add_tensor(name, v)
        elif kind == 1:
            w.add_tensor(name, v.astype(np.float16))
        else:
            w.add_tensor(name, fp32_to_bf16_rne(v), raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ck = open_checkpoint(path)
    assert ck.format == "gguf" and ck.names() == names
    for i, rec in enumerate(ck):
        v = t[rec.name]
        expect = (v, v.astype(np.float16), fp32_to_bf16_rne(v))[i % 3]
        assert rec.dtype == ("F32", "F16", "BF16")[i % 3]
        assert rec.shape == v.shape
        assert np.array_equal(rec.array.view(np.uint8), np.ascontiguousarray(expect).view(np.uint8))


def test_tensors_are_memory_mapped_not_loaded(stories):
    rec = open_checkpoint(stories).tensor("layers.0.feed_forward.w1.weight")
    assert isinstance(rec.array, np.memmap) and not rec.array.flags.writeable
