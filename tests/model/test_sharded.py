"""Sharded Hugging Face folders as checkpoints (MiniLM split into 3 shards reads as the single file), bad
folders refused in one line, and ``ansforge synth``'s folder drawn from the shipped statistics."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from ansforge.cli import main
from ansforge.model.coding.container import open_container
from ansforge.model.errors import CheckpointError, ConfigError
from ansforge.model.llm.checkpoint import (INDEX_NAME, ShardedCheckpoint, open_checkpoint, select_tensors,
                                           shard_name, write_safetensors, write_sharded)

QUERY0 = "encoder.layer.0.attention.self.query.weight"


def _copy(ck, infos):
    """``write_sharded``'s ``(tensors, fill)`` for a copy of ``infos`` of checkpoint ``ck``."""
    def fill(k, name):
        info = infos[k]
        if info.supported:
            yield ck.tensor(name).array
        else:
            yield np.memmap(ck.file_of(info), np.uint8, "r", info.offset, (info.nbytes,))
    return [(i.name, i.dtype, i.shape) for i in infos], fill


@pytest.fixture(scope="module")
def mini3(minilm, tmp_path_factory) -> Path:
    """MiniLM as a Hugging Face folder of 3 shards (the 47 MB embedding alone in the second)."""
    ck = open_checkpoint(minilm)
    folder = tmp_path_factory.mktemp("mini") / "mini3"
    tensors, fill = _copy(ck, ck.infos())
    files = write_sharded(folder, tensors, fill, max_shard_bytes=44_000_000,
                          config=(minilm.parent / "config.json").read_text(), metadata=ck.metadata)
    assert files == [shard_name(k, 3) for k in (1, 2, 3)]
    return folder


def _run(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_three_shards_read_as_the_single_file(minilm, mini3):
    one, three = open_checkpoint(minilm), open_checkpoint(mini3)
    assert isinstance(three, ShardedCheckpoint) and len(three.shards) == 3
    assert three.names() == one.names()         # the index's order, here the file's
    for a, b in zip(one.infos(), three.infos()):
        assert (a.name, a.shape, a.dtype, a.nbytes) == (b.name, b.shape, b.dtype, b.nbytes)
        assert b.file is not None and b.file.parent == mini3
        raw = [np.memmap(c.file_of(i), np.uint8, "r", i.offset, (i.nbytes,)) for c, i in ((one, a), (three, b))]
        assert np.array_equal(*raw), a.name
    assert three.metadata == one.metadata == {"format": "pt"}
    assert all(s.metadata == {"format": "pt"} for s in three.shards)
    assert three.config_text == (minilm.parent / "config.json").read_text()
    # Tensors of different shards at the same offset and size are not taken for tied storage.
    assert [i.name for i in select_tensors(three)] == [i.name for i in select_tensors(one)]


def test_a_folders_layout_writes_it_back_byte_for_byte(mini3, tmp_path):
    ck = open_checkpoint(mini3)
    tensors, fill = _copy(ck, ck.infos())
    out = tmp_path / "back"
    write_sharded(out, tensors[::-1], lambda k, name: fill(len(tensors) - 1 - k, name), layout=ck.layout())
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in mini3.iterdir())
    for p in mini3.iterdir():
        assert (out / p.name).read_bytes() == p.read_bytes(), p.name


def test_verbs_give_the_same_figures(minilm, mini3, capsys):
    for verb in (["types", "--include", QUERY0],
                 ["tables", "--include", "encoder.layer.0.attention.self.*", "--general", "", "--no-constriction",
                  "--context-codec", ""],
                 ["outliers", "--include", QUERY0]):
        s1, one, _ = _run(capsys, verb[0], "--model", minilm, *verb[1:])
        s3, three, _ = _run(capsys, verb[0], "--model", mini3, *verb[1:])
        assert s1 == s3 == 0, verb
        assert three.splitlines()[1:] == one.splitlines()[1:], verb   # the first line names the input


def test_compress_gives_the_same_bytes(minilm, tmp_path, capsys):
    ck = open_checkpoint(minilm)
    # with MiniLM's integer position ids: a raw tensor, copied from the shard that holds it
    infos = [i for i in ck.infos() if i.name.startswith("encoder.layer.0.") or i.dtype == "I64"]
    assert any(i.dtype == "I64" for i in infos)
    tensors, fill = _copy(ck, infos)
    write_safetensors(tmp_path / "one.safetensors", tensors, fill, metadata=ck.metadata)
    write_sharded(tmp_path / "three", tensors, fill, max_shard_bytes=3_000_000, metadata=ck.metadata)
    assert len(open_checkpoint(tmp_path / "three").shards) == 3
    for src, out in ((tmp_path / "one.safetensors", "one.ansf"), (tmp_path / "three", "three.ansf")):
        status, _, err = _run(capsys, "compress", "--model", src, "-o", tmp_path / out, "--quiet")
        assert status == 0, err
    # The same records and payload; the folder's container adds only where each tensor came from.
    one, three = open_container(tmp_path / "one.ansf"), open_container(tmp_path / "three.ansf")
    assert one.file_layout is None and three.sharded and three.file_layout["index"] is not None
    strip = [{k: v for k, v in r.items() if k != "file_layout"} for r in three.tensors]
    assert strip == one.tensors and one.version == three.version
    assert np.array_equal(np.asarray(one.stream_words(one.streams[0])), np.asarray(three.stream_words(three.streams[0])))


def test_decompress_gives_the_folder_back(mini3, tmp_path, capsys):
    """MiniLM in 3 shards: compress, then decompress to a folder writes the same shards, index and config
    byte for byte; to a .safetensors name, one file with the config beside it."""
    f = tmp_path / "m.ansf"
    assert _run(capsys, "compress", "--model", mini3, "-o", f, "--threads", "2")[0] == 0
    status, out, err = _run(capsys, "decompress", f, "-o", tmp_path / "back", "--threads", "2")
    assert status == 0, err
    assert "3 shards, an index, config.json, 104 tensors" in out
    assert sorted(p.name for p in (tmp_path / "back").iterdir()) == sorted(p.name for p in mini3.iterdir())
    for p in mini3.iterdir():
        assert (tmp_path / "back" / p.name).read_bytes() == p.read_bytes(), p.name
    # into an existing folder only with --force; never over the container
    status, _, err = _run(capsys, "decompress", f, "-o", tmp_path / "back")
    assert status == 2 and "not an empty directory" in err and err.count("\n") == 1
    single = tmp_path / "one" / "model.safetensors"
    single.parent.mkdir()
    assert _run(capsys, "decompress", f, "-o", single)[0] == 0
    assert open_checkpoint(single).names() == open_checkpoint(mini3).names()
    assert (single.parent / "config.json").read_bytes() == (mini3 / "config.json").read_bytes()
    status, _, err = _run(capsys, "decompress", f, "-o", single)        # the config beside it exists too
    assert status == 2 and "config.json" in err and "exists" in err


def test_a_crafted_file_layout_is_refused_in_one_line(tmp_path, capsys):
    from ansforge.model.coding.container import ContainerError

    w = np.ones((2, 2), np.float32)
    folder = tmp_path / "two"
    folder.mkdir()
    _shard(folder / shard_name(1, 2), {"a": w})
    _shard(folder / shard_name(2, 2), {"b": w})
    f = tmp_path / "c.ansf"
    assert _run(capsys, "compress", "--model", folder, "-o", f)[0] == 0
    blob = f.read_bytes()
    good = json.dumps(shard_name(2, 2)).encode()
    for bad, why in ((json.dumps("../x.safetensors").encode(), "not a new"),
                     (json.dumps(shard_name(1, 2)).encode(), "not a new")):
        forged = _rewrite_first_record(blob, lambda js: js.replace(good, bad))
        g = tmp_path / "bad.ansf"
        g.write_bytes(forged)
        with pytest.raises(ContainerError, match=why):
            open_container(g)
        status, _, err = _run(capsys, "decompress", g, "-o", tmp_path / "out")
        assert status == 2 and err.count("\n") == 1 and "file_layout" in err and not (tmp_path / "out").exists()


def _rewrite_first_record(blob: bytes, edit) -> bytes:
    """``blob`` with its first record's JSON edited and its length and CRC made to fit."""
    import zlib

    (n,) = struct.unpack_from("<I", blob, 24)
    js = edit(blob[28:28 + n])
    return blob[:24] + struct.pack("<I", len(js)) + js + struct.pack("<I", zlib.crc32(js) & 0xFFFFFFFF) \
        + blob[28 + n + 4:]


def test_a_llama2c_model_decompresses_with_its_config(stories, tmp_path, capsys):
    """stories260K.bin: decompress to DIR/model.safetensors writes the Hugging Face config.json of its
    header beside it (implied by the legacy file's tensors: the container stays byte for byte what it was)."""
    from ansforge.model.llm.checkpoint import hf_llama_config

    f = tmp_path / "s.ansf"
    assert _run(capsys, "compress", "--model", stories, "-o", f)[0] == 0
    assert "file_layout" not in open_container(f).tensors[0]
    out = tmp_path / "hf" / "model.safetensors"
    out.parent.mkdir()
    status, text, err = _run(capsys, "decompress", f, "-o", out)
    assert status == 0 and "config.json" in text, err
    config = json.loads((out.parent / "config.json").read_text())
    assert config == hf_llama_config(open_checkpoint(stories).config, "F32")
    assert config["num_attention_heads"] == 8 and config["num_key_value_heads"] == 4
    assert config["max_position_embeddings"] == 512 and config["tie_word_embeddings"] is True


def test_generate_reads_a_decompressed_llama2c_model(stories, tmp_path, capsys):
    f = tmp_path / "s.ansf"
    assert _run(capsys, "compress", "--model", stories, "-o", f)[0] == 0
    out = tmp_path / "hf" / "model.safetensors"
    out.parent.mkdir()
    assert _run(capsys, "decompress", f, "-o", out)[0] == 0
    args = ("--steps", "6", "--temperature", "0", "--ids", "--quiet")
    s1, ref, _ = _run(capsys, "generate", "--model", stories, *args)
    s2, got, err = _run(capsys, "generate", "--model", out, *args)
    assert s1 == s2 == 0, err
    assert got.split() == ref.split() and len(ref.split()) == 6


def _shard(path: Path, tensors: dict[str, np.ndarray]) -> None:
    items = list(tensors.items())
    write_safetensors(path, [(n, "F32", a.shape) for n, a in items], lambda k, n: [items[k][1]])


def _index(folder: Path, weight_map: dict[str, str]) -> None:
    (folder / INDEX_NAME).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def _bad_folders(tmp: Path) -> dict[str, tuple[Path, str]]:
    w = np.ones((2, 2), np.float32)
    cases = {}

    def folder(name: str) -> Path:
        p = tmp / name
        p.mkdir()
        return p

    cases["empty"] = (folder("empty"), "an empty directory")
    p = folder("notes")
    (p / "README.md").write_text("# not a model\n")
    cases["no checkpoints"] = (p, "not a checkpoint folder")
    p = folder("missing")
    _shard(p / shard_name(1, 2), {"a": w})
    _index(p, {"a": shard_name(1, 2), "b": shard_name(2, 2)})
    cases["missing shard"] = (p, "missing shard")
    p = folder("twice")
    _shard(p / shard_name(1, 2), {"a": w, "b": w})
    _shard(p / shard_name(2, 2), {"b": w})
    cases["in two shards"] = (p, "'b' is in two shards")
    p = folder("absent")
    _shard(p / shard_name(1, 2), {"a": w})
    _shard(p / shard_name(2, 2), {"b": w})
    _index(p, {"a": shard_name(1, 2), "b": shard_name(1, 2)})
    cases["index names an absent tensor"] = (p, "'b' is placed in model-00001-of-00002.safetensors, which does not hold")
    p = folder("text")
    (p / "model.safetensors").write_text("hello")
    cases["shard not safetensors"] = (p, "shard is not a safetensors file")
    p = folder("badindex")
    _shard(p / shard_name(1, 1), {"a": w})
    (p / INDEX_NAME).write_text('{"weights": {}}')
    cases["index without weight_map"] = (p, "not a safetensors index")
    return cases


def test_bad_folders_get_one_line(tmp_path, capsys):
    for what, (folder, message) in _bad_folders(tmp_path).items():
        with pytest.raises(CheckpointError, match=message):
            open_checkpoint(folder)
        status, out, err = _run(capsys, "types", "--model", folder)
        assert status == 2 and out == "", what
        assert err.startswith("ansforge: error: ") and err.count("\n") == 1 and message in err, (what, err)


def _bf16_fields(bits: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    bits = bits.ravel()
    e = np.bincount((bits >> 7) & 0xFF, minlength=256)
    return e / e.sum(), float(np.mean(bits >> 15)), np.bincount(bits & 0x7F, minlength=128) / bits.size


def test_synth_writes_a_llama_folder_drawn_from_the_shipped_statistics(tmp_path, capsys):
    from importlib import resources

    out = tmp_path / "syn"
    status, text, err = _run(capsys, "synth", "--like", "llama2-7b", "--layers", "1", "--scale", "8", "-o", out)
    assert status == 0, err
    assert "not a trained model" in text
    assert sorted(p.name for p in out.iterdir()) == ["config.json", shard_name(1, 1), INDEX_NAME]
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]) == \
        (512, 1376, 1, 4000) and cfg["model_type"] == "llama" and cfg["torch_dtype"] == "bfloat16"
    ck = open_checkpoint(out)
    assert ck.names()[:3] == ["model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                              "model.layers.0.self_attn.q_proj.weight"]
    assert ck.names()[-2:] == ["model.norm.weight", "lm_head.weight"] and len(ck.names()) == 12
    shapes = {i.name: i.shape for i in ck.infos()}
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (512, 1376)
    assert shapes["model.layers.0.mlp.gate_proj.weight"] == (1376, 512)
    assert shapes["lm_head.weight"] == (4000, 512) and all(i.dtype == "BF16" for i in ck.infos())
    # The exponents follow the shipped histogram of the same role, sign and mantissa the measured ones.
    hist = json.loads(resources.files("ansforge.analysis").joinpath("data", "exponent_histograms.json").read_text())
    ref = next(m for m in hist["models"][0]["matrices"] if m["name"] == "layers.0.feed_forward.w1.weight")
    want = np.zeros(256)
    for e, c in ref["exponent_counts"].items():
        want[int(e)] = c
    stats = json.loads(resources.files("ansforge.analysis").joinpath("data", "weight_statistics.json").read_text())
    gate = stats["models"][0]["roles"]["gate"]
    exps, negative, mant = _bf16_fields(ck.tensor("model.layers.0.mlp.gate_proj.weight").bits())
    assert np.abs(exps - want / want.sum()).sum() < 0.01
    assert abs(negative - gate["negative"] / gate["values"]) < 0.005
    assert np.abs(mant - np.array(gate["mantissa_counts"]) / gate["values"]).sum() < 0.05
    # Not a Gaussian: the mantissa is far from uniform, as measured.
    assert mant[1] > 1.5 * mant[127]
    # The same seed gives the same values, whatever --layers; another seed others.
    again = tmp_path / "again"
    assert _run(capsys, "synth", "--like", "llama2-7b", "--layers", "2", "--scale", "8", "-o", again)[0] == 0
    two = open_checkpoint(again)
    assert len(two.names()) == 21
    for name in ck.names():
        assert np.array_equal(two.tensor(name).array, ck.tensor(name).array), name
    other = tmp_path / "other"
    assert _run(capsys, "synth", "--like", "llama2-7b", "--layers", "1", "--scale", "64", "--seed", "1", "-o", other)[0] == 0
    small = tmp_path / "small"
    assert _run(capsys, "synth", "--like", "llama2-7b", "--layers", "1", "--scale", "64", "-o", small)[0] == 0
    assert (other / shard_name(1, 1)).read_bytes() != (small / shard_name(1, 1)).read_bytes()
    status, _, err = _run(capsys, "synth", "--like", "llama2-7b", "--layers", "33", "-o", tmp_path / "x")
    assert status == 2 and "--layers 33" in err and not (tmp_path / "x").exists()


def test_a_crafted_layout_is_refused_before_writing(tmp_path):
    w = np.ones((2, 2), np.float32)
    tensors, fill = [("a", "F32", (2, 2)), ("b", "F32", (2, 2))], lambda k, name: [w]
    good = {"index": None, "config": None, "shards": [{"file": "x.safetensors", "tensors": ["a", "b"], "metadata": {}}]}
    write_sharded(tmp_path / "ok", tensors, fill, layout=good)
    assert open_checkpoint(tmp_path / "ok").names() == ["a", "b"]
    for shards, why in (([{"file": "../x.safetensors", "tensors": ["a", "b"]}], "not a new"),
                        ([{"file": "x.safetensors", "tensors": ["a"]}], "'b' is in no shard"),
                        ([{"file": "x.safetensors", "tensors": ["a", "b"]}, {"file": "y.safetensors", "tensors": ["a"]}],
                         "in two shards")):
        with pytest.raises(ConfigError, match=why):
            write_sharded(tmp_path / "bad", tensors, fill, layout={"index": None, "config": None, "shards": shards})
        assert not (tmp_path / "bad").exists() and not (tmp_path / "x.safetensors").exists()


def test_a_tensor_added_to_a_layout_gets_a_rebuilt_index(mini3, tmp_path):
    ck = open_checkpoint(mini3)
    tensors, fill = _copy(ck, ck.infos())
    layout = ck.layout()
    layout["shards"][0]["tensors"].append("extra_scale")
    scale = np.ones((), np.float32)
    write_sharded(tmp_path / "x", [*tensors, ("extra_scale", "F32", ())],
                  lambda k, name: [scale] if name == "extra_scale" else fill(k, name), layout=layout)
    back = open_checkpoint(tmp_path / "x")
    assert back.names() == [*ck.names(), "extra_scale"] and back.shards[0].names[-1] == "extra_scale"
    index = json.loads((tmp_path / "x" / INDEX_NAME).read_text())
    assert index["metadata"]["total_size"] == sum(i.nbytes for i in ck.infos()) + 4
