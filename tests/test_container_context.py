"""``compress --context``: context plans, table sets and selects stored in the container (version 4),
decoded bit-exactly by the golden decoder and by the simulated decoder cores; old containers still
read; a crafted or corrupted context record is refused in one line."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ansforge.analysis.fuzz import join_records, split_records
from ansforge.cli import main
from ansforge.model.coding.container import ContainerError, compress_checkpoint, open_container
from ansforge.model.llm.checkpoint import open_checkpoint, select_tensors, write_safetensors

DATA = Path(__file__).resolve().parent / "data"


def _small_model(path: Path) -> dict:
    """A matrix whose rows have two scales (so the plan picks several table sets), a bf16 vector, an
    int tensor stored raw."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((48, 64)) * np.where(np.arange(48) % 3 == 0, 0.5, 0.004)[:, None]).astype(np.float32)
    b = ((rng.standard_normal(200) * 0.1).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    ids = np.arange(8, dtype=np.int32)
    data = {"w.a": a, "w.b": b, "ids": ids.view(np.uint8)}
    write_safetensors(path, [("w.a", "F32", a.shape), ("w.b", "BF16", b.shape), ("ids", "I32", ids.shape)],
                      lambda i, n: [data[n]])
    return data


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctx")
    _small_model(d / "m.safetensors")
    return d


def _same_tensors(a, b) -> None:
    for name in a.names:
        assert np.array_equal(a.read(name), b.read(name)), name


@pytest.mark.parametrize("codec", ["tans8", "rans16"])
def test_stories_round_trip_random_access_and_inspect(stories, tmp_path, capsys, codec):
    """Every tensor decodes bit-exactly (equal to the plain container's, and the decompressed file to the
    source's values); ranges decode from checkpoints across run boundaries; inspect names each plan."""
    f, plain, out = tmp_path / "c.ansf", tmp_path / "p.ansf", tmp_path / "c.safetensors"
    assert main(["compress", "--model", str(stories), "--codec", codec, "--context", "--checkpoint-interval", "3000",
                 "-o", str(f)]) == 0
    compress_checkpoint(stories, plain, codec, checkpoint_interval=3000)
    c, p = open_container(f), open_container(plain)
    assert c.version == 4 and p.version in (2, 3)
    planned = [r for r in c.tensors if r.get("context")]
    assert len(planned) == 38  # every 2-D matrix of stories260K (11 norm vectors stay plain)
    assert any(r["context"]["n_sets"] > 1 for r in planned)
    _same_tensors(c, p)
    assert main(["decompress", str(f), "-o", str(out)]) == 0
    dec = open_checkpoint(out)
    for name in c.names:
        assert np.array_equal(np.ascontiguousarray(dec.tensor(name).array).ravel().view(np.uint8),
                              np.ascontiguousarray(p.read(name)).ravel().view(np.uint8)), name
    rng = np.random.default_rng(1)
    for r in planned[:12]:
        n = int(np.prod(r["shape"]))
        a = int(rng.integers(0, n - 1))
        k = int(rng.integers(1, n - a + 1))
        assert np.array_equal(c.decode_range(r["name"], a, k), p.decode_range(r["name"], a, k)), r["name"]
    capsys.readouterr()
    name = planned[-1]["name"]
    assert main(["inspect", str(f), "--tensor", name, "--range", "100:5"]) == 0
    text = capsys.readouterr().out
    assert "ansforge container v4" in text and c.plan_text(c.record(name)) in text and "context plan" in text
    assert f"{name}: 5 values" in text


def _minilm_subset(minilm, out: Path, names: list[str]) -> None:
    ck = open_checkpoint(minilm)
    arrays = {n: np.ascontiguousarray(ck.tensor(n).array) for n in names}
    write_safetensors(out, [(n, "F32", arrays[n].shape) for n in names], lambda i, n: [arrays[n]])


@pytest.mark.parametrize("codec", ["tans8", "rans16"])
def test_minilm_subset_round_trip(minilm, tmp_path, codec):
    """A subset of MiniLM's matrices (the whole file is in the bench: ~10 s per codec), coded as bf16
    pairs and as fp32 (lossless): bit-exact, and smaller in stream bits than one table per matrix."""
    src = tmp_path / "sub.safetensors"
    _minilm_subset(minilm, src, ["encoder.layer.0.attention.self.query.weight",
                                 "encoder.layer.0.intermediate.dense.weight",
                                 "encoder.layer.3.output.dense.weight", "encoder.layer.5.attention.self.value.bias"])
    for pairs in ("bf16", "auto"):
        f, plain = tmp_path / f"c{pairs}.ansf", tmp_path / f"p{pairs}.ansf"
        rc = compress_checkpoint(src, f, codec, pairs=pairs, context=True, checkpoint_interval=100_000)
        rp = compress_checkpoint(src, plain, codec, pairs=pairs, checkpoint_interval=100_000)
        c, p = open_container(f), open_container(plain)
        _same_tensors(c, p)
        assert rc["bits"] < rp["bits"], (pairs, rc, rp)
        assert c.record("encoder.layer.5.attention.self.value.bias").get("context") is None  # 1-D: plain


def _side_bits_from_json(rec: dict) -> int:
    """Side information of a tensor record counted from its JSON alone (independent of the reader)."""
    ctx = rec.get("context")
    e_bits = {"bf16": 8, "fp16": 5, "fp32": 8}[rec["pair_format"]] + (ctx["fold"] if ctx else 0)
    symbols = len(rec["code_table"]["direct_codes"]) + (1 if rec["code_table"]["escape_codes"] else 0)
    sets = ctx["n_sets"] if ctx else 1
    assert all(len(s["freqs"]) == symbols for s in ctx["sets"]) if ctx else True
    sel = len(ctx["selects"]) * math.ceil(math.log2(sets)) if sets > 1 else 0
    return len(rec["exponents"]) * e_bits + sets * symbols * 16 + sel + 24


def test_minilm_context_figure_from_the_file(minilm, tmp_path):
    """The Context row of ``ansforge tables`` for MiniLM, recomputed from the container's bytes: its
    streams' words (n_words × word bytes, which must tile the payload) and its records' side
    information, for the matrices Table 1 counts; below Ideal by more than 0.8 %."""
    from ansforge.analysis.table1 import context_task

    f = tmp_path / "m.ansf"
    compress_checkpoint(minilm, f, "rans16", pairs="bf16", group="tensor", context=True)
    blob = f.read_bytes()
    r = split_records(blob)
    tensors, streams = r.records[:r.n_tensors], r.records[r.n_tensors:]
    assert r.version == 4
    assert sum(s["n_words"] * s["word_bytes"] for s in streams) + \
        sum(t.get("nbytes", 0) for t in tensors) == len(r.payload)
    names = [i.name for i in select_tensors(open_checkpoint(minilm), (), ())]
    by = {t["name"]: t for t in tensors}
    bits = ideal = weights = 0
    for n in names:
        t = by[n]
        s = streams[t["stream"]]
        # The stream's words really are in the file at its offset (not just claimed by the record).
        lo = s["payload_offset"]
        assert len(r.payload[lo:lo + s["n_words"] * s["word_bytes"]]) == s["n_words"] * s["word_bytes"]
        bits += 8 * s["n_words"] * s["word_bytes"] + len(s["checkpoints"]) * (40 + s["codec"]["state_bits"])
        bits += _side_bits_from_json(t)
        ideal += t["ideal_bits"]
        weights += math.prod(t["shape"])
    assert weights == 22_682_112
    per_weight, ideal_per_weight = bits / weights, ideal / weights
    assert ideal_per_weight == pytest.approx(10.6140, abs=5e-5)
    assert per_weight < ideal_per_weight * (1 - 0.008), per_weight
    res = context_task(str(minilm), names, "bf16", "rans16")
    assert res.verified and res.bits == bits
    print(f"MiniLM context: {per_weight:.4f} bits/weight, Ideal {ideal_per_weight:.4f} "
          f"({100 * (per_weight / ideal_per_weight - 1):+.3f} %), file {len(blob):,} bytes")


@pytest.mark.parametrize("codec,core", [("tans8", "tans-decoder"), ("rans16", "rans-decoder")])
def test_simulate_container_amaranth(small, tmp_path, capsys, codec, core):
    """The decoder core (Amaranth simulator) decodes a small context container, table sets through cfg
    and the plan's runs on sel, one command per CRC block: bit-exact with decompress."""
    f = tmp_path / "c.ansf"
    compress_checkpoint(small / "m.safetensors", f, codec, group="tensor", context=True, checkpoint_interval=1000)
    c = open_container(f)
    assert c.record("w.a")["context"]["n_sets"] > 1 and len(c.streams[0].checkpoints) > 0
    capsys.readouterr()
    assert main(["simulate", "--container", str(f), "--core", core, "--engine", "amaranth"]) == 0
    out = capsys.readouterr().out
    assert "bit-exact against decompress: yes" in out and "(1 with context plans" in out


def test_simulate_container_verilator_stories(stories, tmp_path, capsys):
    f = tmp_path / "s.ansf"
    assert main(["compress", "--model", str(stories), "--codec", "rans16", "--context", "--stream-per-tensor",
                 "--checkpoint-interval", "20000", "-o", str(f)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--container", str(f), "--core", "rans-decoder", "--engine", "verilator"]) == 0
    out = capsys.readouterr().out
    assert "bit-exact against decompress: yes" in out and "49 tensors (38 with context plans" in out


def test_generate_via_hardware_reads_a_context_container(stories, tmp_path):
    from ansforge.sim.llama_run import run_generation

    f = tmp_path / "s.ansf"
    compress_checkpoint(stories, f, "tans8", group="tensor", context=True)
    gen, setup = run_generation(stories, via="hardware", engine="verilator", container=f, steps=3, temperature=0.0,
                                ids=True, compare=True)
    assert gen.compared and gen.mismatch is None


def test_simulate_container_refuses_shared_streams_and_encoders(small, tmp_path, capsys):
    f = tmp_path / "c.ansf"
    compress_checkpoint(small / "m.safetensors", f, "tans8", context=True, layout="model")
    assert main(["simulate", "--container", str(f), "--core", "tans-decoder", "--engine", "amaranth"]) == 2
    assert main(["simulate", "--container", str(f), "--core", "tans-encoder", "--engine", "amaranth"]) == 2
    assert main(["simulate", "--container", str(f), "--core", "rans-decoder", "--engine", "amaranth"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(e.startswith("ansforge: error: ") for e in err)
    assert "one stream per tensor" in err[0] and "decoder core" in err[1] and "tans" in err[2]


@pytest.mark.parametrize("name,version", [("legacy_v2_tans8", 2), ("legacy_v3_rans16", 3), ("legacy_v5_rans16x4", 5)])
def test_containers_written_before_context_still_decode(tmp_path, name, version):
    """Fixtures written by earlier code (tests/data): before version 4, and ``rans16x4`` before the
    interleaved preset moved to S = 32, W = 16 (its streams keep S = 48, W = 32): same values as the
    model they came from."""
    c = open_container(DATA / f"{name}.ansf")
    assert c.version == version
    rng = np.random.default_rng(23)
    a = (rng.standard_normal((24, 40)) * 0.02).astype(np.float32)
    a[3::5] = a[3::5].astype(np.float16).astype(np.float32)
    b = ((rng.standard_normal(100) * 0.1).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    assert np.array_equal(c.read("w.a").view(np.float32), a)
    assert np.array_equal(c.read("w.b"), b)
    assert np.array_equal(c.read("ids").view(np.int32), np.arange(6, dtype=np.int32))
    assert np.array_equal(c.decode_range("w.a", 300, 400).view(np.float32), a.ravel()[300:700])


def _edit(src: Path, dst: Path, fn) -> Path:
    r = split_records(src.read_bytes())
    fn(r)
    dst.write_bytes(join_records(r))
    return dst


def _ctx(r, name="w.a"):
    return next(t for t in r.records[:r.n_tensors] if t["name"] == name)["context"]


def _set_version(r, v):
    r.version = v


BAD = {
    "kind": (lambda r: _ctx(r).update(kind="magnitude"), "context kind 'magnitude'"),
    "axis": (lambda r: _ctx(r)["params"].update(axis="diag"), "axis 'diag'"),
    "group": (lambda r: _ctx(r)["params"].update(group=0), "group 0"),
    "fold": (lambda r: _ctx(r).update(fold=9), "fold 9"),
    "n_sets_over_limit": (lambda r: _ctx(r).update(n_sets=17), "n_sets 17 is not an integer from 1 to 16"),
    "select_out_of_range": (lambda r: _ctx(r)["selects"].__setitem__(0, _ctx(r)["n_sets"]), "select"),
    "select_type": (lambda r: _ctx(r)["selects"].__setitem__(1, "x"), "select"),
    "selects_count": (lambda r: _ctx(r)["selects"].pop(), "selects must be a list of"),
    "sets_count": (lambda r: _ctx(r)["sets"].pop(), "sets holds"),
    "set_freqs": (lambda r: _ctx(r)["sets"][0]["freqs"].__setitem__(0, 0), "context set 0"),
    "set_spread": (lambda r: _ctx(r)["sets"][1].update(tans_symbols="!!"), "context set 1"),
    "context_not_object": (lambda r: next(t for t in r.records if t.get("name") == "w.a").update(context=[1]),
                           "context must be an object"),
    "version_3": (lambda r: _set_version(r, 3), "needs container version 4"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_crafted_context_record_is_refused_in_one_line(small, tmp_path, capsys, case):
    """A context record edited with its CRC right: the reader names the field, the CLI exits 2 in one
    line and writes nothing."""
    good = tmp_path / "good.ansf"
    compress_checkpoint(small / "m.safetensors", good, "tans8", context=True, checkpoint_interval=1000)
    assert _ctx(split_records(good.read_bytes()))["n_sets"] > 1
    fn, words = BAD[case]
    bad = _edit(good, tmp_path / "bad.ansf", fn)
    with pytest.raises(ContainerError, match="tensor 'w.a'"):
        open_container(bad)
    out = tmp_path / "out.safetensors"
    capsys.readouterr()
    assert main(["decompress", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("ansforge: error: ") and "bad.ansf" in err
    assert words in err, err
    assert not out.exists() and not (tmp_path / "out.safetensors.partial").exists()


def test_corrupted_context_record_fails_its_crc(small, tmp_path, capsys):
    good = tmp_path / "good.ansf"
    compress_checkpoint(small / "m.safetensors", good, "rans16", context=True)
    blob = bytearray(good.read_bytes())
    i = blob.index(b'"selects":[') + len(b'"selects":[')
    blob[i] ^= 0x01  # a select 0 -> 1 (or 1 -> 0): valid JSON, caught by the record's CRC
    bad = tmp_path / "bad.ansf"
    bad.write_bytes(bytes(blob))
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tensor 'w.a'" in err and "CRC32 mismatch" in err


def test_lanes_and_subsystem_refuse_context_tensors(small, tmp_path):
    """The lanes and the subsystem hold one table per tensor: a context-coded tensor is refused by
    name instead of decoding wrong weights (the decoder core of ``simulate --container`` takes it)."""
    from ansforge.model.errors import ConfigError
    from ansforge.sim.lanes import decode_container_lanes
    from ansforge.sim.subsystem import decode_container_subsystem

    f = tmp_path / "c.ansf"
    compress_checkpoint(small / "m.safetensors", f, "tans8", group="tensor", context=True)
    c = open_container(f)
    with pytest.raises(ConfigError, match=r"'w.a' is coded with a context plan"):
        decode_container_lanes(c, None, lanes=2)
    with pytest.raises(ConfigError, match=r"'w.a' is coded with a context plan"):
        decode_container_subsystem(c, None, lanes=2, names=["w.a"])


def test_crafted_plan_with_too_many_runs_is_refused_quickly(small, tmp_path):
    """rANS pairs of zeros cost no words, so a crafted shape can claim 2**26 pairs in a small file; a
    column plan of 1-column groups would then be 2**26 runs. The reader refuses it before building them."""
    import time

    good = tmp_path / "good.ansf"
    compress_checkpoint(small / "m.safetensors", good, "rans16", group="tensor", context=True, checkpoint_interval=0)

    def fn(r):
        t = next(t for t in r.records[:r.n_tensors] if t["name"] == "w.a")
        t["shape"], t["n_pairs"] = [1 << 20, 64], 1 << 26
        t["context"].update(params={"axis": "cols", "group": 1}, selects=[0] * 64)
        r.records[r.n_tensors + t["stream"]]["n_pairs"] = 1 << 26

    bad = _edit(good, tmp_path / "bad.ansf", fn)
    t0 = time.process_time()
    with pytest.raises(ContainerError, match=r"tensor 'w.a': context plan makes 67108864 runs"):
        open_container(bad)
    assert time.process_time() - t0 < 2.0
