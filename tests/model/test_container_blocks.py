"""Container version 6, the blocks layout (issue 43): each tensor's pairs cut into independent blocks,
each a complete stream with its own flush, head and CRC (docs/bitstream.md §6)."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from ansforge.analysis.fuzz import edit_records
from ansforge.cli import main
from ansforge.model.coding.container import BLOCK_PAIRS, DEFAULT_CODEC, VERSION_BLOCKS, VERSION_SPREADS, ContainerError, \
    compress_checkpoint, open_container
from ansforge.model.coding.stream import block_crc, block_spans, clip_runs, Run
from ansforge.model.llm.checkpoint import open_checkpoint, write_safetensors

DATA = Path(__file__).resolve().parents[1] / "data"

#: Block size of the small cases: tensors below, at and above it.
SMALL = 1000


def _tensors(rng) -> dict[str, np.ndarray]:
    a = (rng.standard_normal((45, 50)) * 0.02).astype(np.float32)     # 2250 pairs: 3 blocks, the last short
    a[:9] = a[:9].astype(np.float16).astype(np.float32)                # row shifts on those rows
    b = (rng.standard_normal((20, 50)) * 0.1).astype(np.float16)       # exactly one block
    c = rng.standard_normal(17).astype(np.float32)                     # smaller than a block
    d = (rng.standard_normal((40, 50)) * 0.05).astype(np.float32)      # exactly two blocks
    return {"a": a, "b": b, "c": c, "d": d, "e": np.zeros((0, 4), np.float32), "ids": np.arange(7, dtype=np.int64)}


def _write(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    write_safetensors(path, [(k, {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
                                  np.dtype(np.int64): "I64"}[v.dtype], v.shape) for k, v in tensors.items()],
                      lambda i, name: iter([np.ascontiguousarray(tensors[name]).ravel() if tensors[name].dtype != np.int64
                                            else np.ascontiguousarray(tensors[name]).view(np.uint8).ravel()]))
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("blocks")
    t = _tensors(np.random.default_rng(7))
    return _write(d / "m.safetensors", t), t


def _bits(v: np.ndarray) -> np.ndarray:
    return v.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[v.dtype.itemsize]).ravel()


CODECS = ["tans8", "tans8x2", "tans8x16", "rans16", "rans16x4", "rans16x16", "rans24x2"]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_block_alone(model, tmp_path, codec):
    """Bit-exact through read, decode_range inside a later block and decompress; each block decodes alone
    from its own words and head with the golden decoder (what a core does with resume = 0), ends in
    its end check, and its CRC is its words' in decoding order."""
    src, t = model
    f = tmp_path / "c.ansf"
    r = compress_checkpoint(src, f, codec, block_pairs=SMALL)
    c = open_container(f)
    assert (c.version, r["layout"], len(c.streams)) == (VERSION_BLOCKS, "blocks", 1)
    st = c.streams[0]
    assert st.checkpoints == [] and st.block_pairs == SMALL
    sizes = {c.tensors[blk.tensor]["name"]: [] for blk in st.spans}
    for blk in st.spans:
        sizes[c.tensors[blk.tensor]["name"]].append(blk.count)
    assert sizes == {"a": [1000, 1000, 250], "b": [1000], "c": [17], "d": [1000, 1000]}
    assert "row_shifts" in c.record("a")
    for name, v in t.items():
        assert np.array_equal(c.read(name).ravel(), _bits(v)), name
    # random access inside the third block of "a" and across the seam of "d"'s two blocks
    assert np.array_equal(c.decode_range("a", 2010, 200), _bits(t["a"])[2010:2210])
    assert np.array_equal(c.decode_range("d", 990, 30), _bits(t["d"])[990:1020])
    golden = st.spec.coder()
    for b, blk in enumerate(st.spans):
        words = np.array(c.block_words(st, b))  # a copy: the block's own address 0 first
        assert block_crc(words) == st.blocks[b][2]
        tables, runs = c.block_tables(st, b)
        s, e, end = golden.decode(words.tolist(), tables, runs, 0, blk.count, None)
        assert (end.word, end.bit) == (0, 0)
        s_all, e_all = c.decode_stream(st, blk.pair, blk.count)
        assert np.array_equal(s, s_all) and np.array_equal(e, e_all)
    out = tmp_path / "o.safetensors"
    c.decompress(out, threads=2)
    back = open_checkpoint(out)
    for name, v in t.items():
        if v.dtype != np.int64:
            assert np.array_equal(_bits(np.asarray(back.tensor(name).array)), _bits(v)), name


def test_block_spans_and_clip_runs():
    assert block_spans([2250, 1000, 17, 0, 2000], 1000) == [
        (0, 0, 1000), (0, 1000, 1000), (0, 2000, 250), (1, 2250, 1000), (2, 3250, 17), (4, 3267, 1000),
        (4, 4267, 1000)]
    runs = [Run(3, 100), Run(4, 50), Run(3, 850)]
    assert clip_runs(runs, 90, 70, 3) == [Run(0, 10), Run(1, 50), Run(0, 10)]
    assert clip_runs(runs, 0, 1000, 3) == [Run(0, 100), Run(1, 50), Run(0, 850)]


def test_threads_give_the_same_file_and_output(model, tmp_path):
    src, _ = model
    f1, f2 = tmp_path / "1.ansf", tmp_path / "2.ansf"
    compress_checkpoint(src, f1, "tans8x16", block_pairs=SMALL, threads=1)
    compress_checkpoint(src, f2, "tans8x16", block_pairs=SMALL, threads=2)
    assert f1.read_bytes() == f2.read_bytes()
    o1, o2 = tmp_path / "1.safetensors", tmp_path / "2.safetensors"
    open_container(f1).decompress(o1, threads=1)
    open_container(f1).decompress(o2, threads=2)
    assert o1.read_bytes() == o2.read_bytes()
    # One tensor of most of the weights: its blocks on threads (the others: whole tensors on processes).
    rng = np.random.default_rng(8)
    big = _write(tmp_path / "big.safetensors", {"w": (rng.standard_normal((90, 50)) * 0.02).astype(np.float32),
                                                 "b": rng.standard_normal(50).astype(np.float32)})
    g1, g2 = tmp_path / "g1.ansf", tmp_path / "g2.ansf"
    compress_checkpoint(big, g1, "tans8x16", block_pairs=SMALL, threads=1)
    compress_checkpoint(big, g2, "tans8x16", block_pairs=SMALL, threads=2)
    assert g1.read_bytes() == g2.read_bytes() and len(open_container(g1).streams[0].blocks) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["1.ansf", "2.ansf", "1.safetensors", "2.safetensors",
                                                                  "big.safetensors", "g1.ansf",
                                                                  "g2.ansf"])


def test_a_coding_process_hands_its_words_over_in_a_file(model, tmp_path):
    """With ``words_dir`` a task writes each stream's words to a file of its own (the processes of
    ``--threads N`` do, so that the words never go through a pipe): the same little-endian words, in a
    file the caller adopts and removes."""
    import dataclasses
    from ansforge.model.coding.container.write import CompressTask, _SpilledWords, _WordsFile, compress_tensor
    src, _ = model
    job = CompressTask("tans8x16", "auto", False, 1, 8, False, False, 0, SMALL)
    kept = compress_tensor(str(src), str(src), "a", job)[0][-1]
    folder = tmp_path / "words"
    folder.mkdir()
    filed = compress_tensor(str(src), str(src), "a", dataclasses.replace(job, words_dir=str(folder)))[0][-1]
    assert isinstance(filed.words, _WordsFile) and filed.words.size == kept.words.size
    assert Path(filed.words.path).read_bytes() == kept.words.astype("<u2").tobytes()
    spill = _SpilledWords(tmp_path / "spill", kept.words.dtype)
    spill.append(kept.words[:5])
    spill.append(filed.words)
    spill.append(kept.words[5:])
    with open(tmp_path / "out", "wb") as f:
        f.write(b"head")
        spill.copy_to(f)
    spill.remove()
    assert (tmp_path / "out").read_bytes() == b"head" + kept.words[:5].astype("<u2").tobytes() + \
        kept.words.astype("<u2").tobytes() + kept.words[5:].astype("<u2").tobytes()
    assert not any(folder.iterdir()) and not (tmp_path / "spill").exists()


def test_groups_decoded_ahead_on_threads_give_the_same_output(model, tmp_path, monkeypatch):
    """With several threads the tensors' groups are decoded ahead on a pool while the output is written
    (at their offsets, by a pool too): groups shrunk to a few blocks so that there are many, the output
    is byte-identical to one thread's, and a corrupt block in a late group is still named."""
    from ansforge.model.coding.container import read as container_read
    src, _ = model
    f = tmp_path / "m.ansf"
    compress_checkpoint(src, f, "tans8x16", block_pairs=SMALL)
    monkeypatch.setattr(container_read, "VALUES_GROUP_PAIRS", 2 * SMALL)
    monkeypatch.setattr(container_read, "MIN_GROUP_PAIRS", 1)
    outs = {}
    for th in (1, 2, 3):
        outs[th] = tmp_path / f"{th}.safetensors"
        open_container(f).decompress(outs[th], threads=th)
    assert outs[1].read_bytes() == outs[2].read_bytes() == outs[3].read_bytes()
    c = open_container(f)
    st = c.streams[0]
    last = len(st.blocks) - 1
    lo, hi, _ = st.blocks[last]
    blob = bytearray(f.read_bytes())
    blob[c._payload + st.offset + ((lo + hi) // 2) * st.word_bytes] ^= 0x04
    bad = tmp_path / "bad.ansf"
    bad.write_bytes(bytes(blob))
    with pytest.raises(ContainerError, match=rf"block {last} .*CRC32 mismatch"):
        open_container(bad).decompress(tmp_path / "o.safetensors", threads=2)
    assert not (tmp_path / "o.safetensors").exists() and not (tmp_path / "o.safetensors.partial").exists()


@pytest.mark.parametrize("threads", [2, 3])
def test_safetensors_written_on_threads_are_the_same_bytes(tmp_path, threads):
    rng = np.random.default_rng(threads)
    t = {"a": rng.standard_normal((300, 7)).astype(np.float32), "e": np.zeros((0, 3), np.float32),
         "h": rng.standard_normal(999).astype(np.float16), "b": rng.standard_normal(5).astype(np.float32)}
    specs = [(k, {4: "F32", 2: "F16"}[v.dtype.itemsize], v.shape) for k, v in t.items()]

    def fill(i, name):  # in pieces, as a decoder yields them
        flat = t[name].ravel()
        return [flat[a:a + 128] for a in range(0, flat.size, 128)] or [t[name]]  # an empty one as it is (2-D)
    write_safetensors(tmp_path / "1.safetensors", specs, fill)
    write_safetensors(tmp_path / "n.safetensors", specs, fill, threads=threads)
    assert (tmp_path / "1.safetensors").read_bytes() == (tmp_path / "n.safetensors").read_bytes()
    with pytest.raises(ValueError, match="tensor 'a': fill produced 128 values, shape needs 2100"):
        write_safetensors(tmp_path / "x.safetensors", specs, lambda i, name: fill(i, name)[:1], threads=threads)
    assert not (tmp_path / "x.safetensors").exists() and not (tmp_path / "x.safetensors.partial").exists()


def _killed(*args):
    """A coding process that dies without a result (as one the kernel kills for memory)."""
    os._exit(9)


def test_a_killed_coding_process_is_one_line_and_nothing_is_left(tmp_path, capsys, monkeypatch):
    import ansforge.model.coding.container.write as writer

    rng = np.random.default_rng(6)
    t = {f"w{k}": (rng.standard_normal((30, 40)) * 0.02).astype(np.float32) for k in range(4)}
    src = _write(tmp_path / "m.safetensors", t)
    monkeypatch.setattr(writer, "compress_tensor", _killed)
    assert main(["compress", "--model", str(src), "-o", str(tmp_path / "c.ansf"), "--threads", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a coding process was killed" in err[0] and "--threads 1" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


def test_a_tensor_refused_in_a_coding_process_is_one_line_and_nothing_is_left(tmp_path, capsys):
    """With ``--threads 2`` the tensors are coded in other processes: a NaN found there still refuses
    the checkpoint in one line naming the tensor, exit status 2, and no output or partial file remains."""
    rng = np.random.default_rng(5)
    t = {f"w{k}": (rng.standard_normal((30, 40)) * 0.02).astype(np.float32) for k in range(6)}
    t["w4"][3, 7] = np.nan
    src = _write(tmp_path / "m.safetensors", t)
    out = tmp_path / "c.ansf"
    assert main(["compress", "--model", str(src), "-o", str(out), "--threads", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tensor 'w4' holds 1 NaN/Inf values" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


@pytest.mark.parametrize("codec", ["tans8x16", "rans16x16"])
def test_corrupt_block_is_named(model, tmp_path, codec):
    """One flipped bit in block 3's words: read, decode_range and decompress name that block."""
    src, _ = model
    f = tmp_path / "c.ansf"
    compress_checkpoint(src, f, codec, block_pairs=SMALL)
    c = open_container(f)
    st = c.streams[0]
    blob = bytearray(f.read_bytes())
    lo, hi, _ = st.blocks[3]  # tensor "b"'s only block
    at = c._payload + st.offset + ((lo + hi) // 2) * st.word_bytes
    blob[at] ^= 0x10
    bad = tmp_path / "bad.ansf"
    bad.write_bytes(bytes(blob))
    c = open_container(bad)
    with pytest.raises(ContainerError, match=r"tensor 'b' block 3 .*CRC32 mismatch"):
        c.read("b")
    with pytest.raises(ContainerError, match=r"block 3 "):
        c.decompress(tmp_path / "o.safetensors", threads=2)
    assert np.array_equal(c.read("a"), open_container(f).read("a"))  # the other blocks still read


def test_a_real_block_of_2_18_pairs(tmp_path):
    rng = np.random.default_rng(3)
    t = {"w": (rng.standard_normal(BLOCK_PAIRS + 1234) * 0.03).astype(np.float16),
         "v": (rng.standard_normal(BLOCK_PAIRS) * 0.03).astype(np.float16)}
    src = _write(tmp_path / "m.safetensors", t)
    f = tmp_path / "c.ansf"
    compress_checkpoint(src, f, threads=2)
    c = open_container(f)
    st = c.streams[0]
    assert (c.version, st.spec.name) == (VERSION_BLOCKS, DEFAULT_CODEC)
    assert [blk.count for blk in st.spans] == [BLOCK_PAIRS, 1234, BLOCK_PAIRS]
    assert np.array_equal(c.read("w").ravel(), _bits(t["w"])) and np.array_equal(c.read("v").ravel(), _bits(t["v"]))
    assert np.array_equal(c.decode_range("w", BLOCK_PAIRS + 5, 100), _bits(t["w"])[BLOCK_PAIRS + 5:BLOCK_PAIRS + 105])


@pytest.mark.parametrize("codec", ["tans8x16", "rans16"])
def test_context_plans_in_blocks(tmp_path, codec):
    """Context plans (version 4's feature) work in the blocks layout: a block starts inside a group."""
    rng = np.random.default_rng(5)
    m = (rng.standard_normal((64, 48)) * np.linspace(0.001, 0.5, 64)[:, None]).astype(np.float32)
    src = _write(tmp_path / "m.safetensors", {"m": m})
    f = tmp_path / "c.ansf"
    compress_checkpoint(src, f, codec, layout="blocks", block_pairs=700, context="always")
    c = open_container(f)
    # a tANS set that leaves out its implied spread makes the file version 7 (VERSION_SPREADS)
    assert c.version == (VERSION_SPREADS if codec.startswith("tans") else VERSION_BLOCKS)
    assert "context" in c.record("m") and len(c.streams[0].spans) == 5
    assert np.array_equal(c.read("m").ravel(), _bits(m))
    assert np.array_equal(c.decode_range("m", 1400, 700), _bits(m)[1400:2100])


@pytest.mark.parametrize("threads", [1, 2])
def test_arrays_are_what_decompress_writes(model, tmp_path, threads):
    """``Container.arrays`` hands out every tensor as ``decompress`` writes it (the grouped native decode
    of a v6 stream, several blocks a call), in record order; a corrupt block is named as by ``read``."""
    src, t = model
    f = tmp_path / "c.ansf"
    compress_checkpoint(src, f, block_pairs=SMALL)
    c = open_container(f)
    got = dict(c.arrays(threads=threads))
    assert list(got) == c.names and len(c.streams[0].spans) > 2
    for name, v in t.items():
        assert got[name].tobytes() == np.ascontiguousarray(v).tobytes(), name
    blob = bytearray(f.read_bytes())
    lo, hi, _ = c.streams[0].blocks[1]
    at = c._payload + c.streams[0].offset + (lo + hi) // 2 * c.streams[0].word_bytes
    blob[at] ^= 0x10
    g = tmp_path / "bad.ansf"
    g.write_bytes(bytes(blob))
    with pytest.raises(ContainerError, match=r"block 1 .*CRC32 mismatch"):
        dict(open_container(g).arrays(threads=threads))


def test_default_is_tans8x16_in_blocks(model, tmp_path, capsys):
    src, t = model
    f = tmp_path / "c.ansf"
    assert main(["compress", "--model", str(src), "-o", str(f)]) == 0
    assert "tans8x16, blocks layout (container version 6" in capsys.readouterr().out
    c = open_container(f)
    assert c.version == VERSION_BLOCKS and {s.spec.name for s in c.streams} == {"tans8x16"}
    assert c.streams[0].block_pairs == BLOCK_PAIRS
    # the layouts of before, by name; a checkpoint interval alone keeps the model layout
    for args, version, streams in ((["--codec", "tans8", "--layout", "model"], 3, 1),
                                   (["--codec", "tans8", "--checkpoint-interval", "500"], 3, 1),
                                   (["--codec", "tans8", "--stream-per-tensor"], 2, 5)):
        assert main(["compress", "--model", str(src), "-o", str(f), "--force", *args]) == 0
        c = open_container(f)
        assert (c.version, len(c.streams), c.streams[0].block_pairs) == (version, streams, 0), args
    capsys.readouterr()
    assert main(["compress", "--model", str(src), "-o", str(f), "--force", "--layout", "blocks",
                 "--checkpoint-interval", "500"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--layout model or tensor" in err


def test_unknown_version_is_refused_in_one_line(model, tmp_path, capsys):
    src, _ = model
    f = tmp_path / "c.ansf"
    compress_checkpoint(src, f, block_pairs=SMALL)
    blob = bytearray(f.read_bytes())
    blob[8:12] = struct.pack("<I", 8)
    blob[20:24] = struct.pack("<I", zlib.crc32(bytes(blob[:20])) & 0xFFFFFFFF)
    g = tmp_path / "future.ansf"
    g.write_bytes(bytes(blob))
    with pytest.raises(ContainerError, match=r"version 8 is not supported: this ansforge reads versions 1 to 7"):
        open_container(g)
    assert main(["inspect", str(g)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "version 8" in err and "1 to 7" in err


def test_crafted_block_records_are_refused(model, tmp_path):
    src, _ = model
    f = tmp_path / "c.ansf"
    compress_checkpoint(src, f, block_pairs=SMALL)
    n_t = len(open_container(f).tensors)

    def stream(fn):
        return lambda r: fn(r.records[n_t])

    cases = {
        "drop": (stream(lambda s: s["blocks"].pop()), "blocks hold"),
        "size": (stream(lambda s: s.update(block_pairs=999)), "make 9 blocks of at most 999 pairs"),
        "shape": (stream(lambda s: s["blocks"].__setitem__(0, [1, 2, 3])), r"is not \[n_words, crc32\]"),
        "checkpoints": (stream(lambda s: s.update(checkpoints=[])), "has no place"),
        "v5": (lambda r: setattr(r, "version", 5), "needs container version 6"),
    }
    for name, (fn, words) in cases.items():
        with pytest.raises(ContainerError, match=words):
            open_container(edit_records(f, tmp_path / f"{name}.ansf", fn))


@pytest.mark.parametrize("path", sorted((DATA / "pre42").glob("*.ansf")) + sorted(DATA.glob("legacy_*.ansf")),
                         ids=lambda p: p.name)
def test_containers_of_before_decompress_as_they_read(path, tmp_path):
    """Every container written before version 6: decompress writes exactly the values read gives."""
    c = open_container(path)
    assert c.version < VERSION_BLOCKS and all(not st.block_pairs for st in c.streams)
    out = tmp_path / "o.safetensors"
    c.decompress(out, threads=2)
    back = open_checkpoint(out)
    for info in back.infos():
        rec = c.record(info.name)
        if rec["coding"] == "pairs":
            assert np.array_equal(_bits(np.asarray(back.tensor(info.name).array)), c.read(info.name).ravel()), info.name


@pytest.mark.parametrize("codec", ["tans8x16", "rans16x16"])
def test_fuzz_blocks_layout(model, tmp_path, codec):
    """300 structured mutations of a version-6 container: only AnsforgeError, none slow, memory bounded."""
    from ansforge.analysis.fuzz import fuzz_container

    src, _ = model
    f = tmp_path / "c.ansf"
    compress_checkpoint(src, f, codec, block_pairs=SMALL)
    rep = fuzz_container(f.read_bytes(), tmp_path, 300, seed=6)
    assert rep.crashes == [], rep.summary() + "\n" + "\n".join(map(str, rep.crashes[:10]))
    assert rep.slow == [] and rep.max_seconds < 5.0, rep.summary()
    assert rep.max_peak_bytes < 64 << 20, rep.summary()
