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

DATA = Path(__file__).resolve().parents[1] / "data"


def _small_model(path: Path) -> dict:
    """A matrix whose rows have two scales (so the plan picks several table sets, and they pay for their
    tables in the file for both codecs), a bf16 vector, an int tensor stored raw."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((64, 128)) * np.where(np.arange(64) % 3 == 0, 0.5, 0.004)[:, None]).astype(np.float32)
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


def test_stories_round_trip_random_access_and_inspect(stories, tmp_path, capsys):
    """Every tensor decodes bit-exactly (equal to the plain container's, and the decompressed file to the
    source's values); ranges decode from checkpoints across run boundaries; inspect names each plan. The
    model layout (one stream, checkpoints) with tans8 sets whose spreads are implied: version 7."""
    codec = "tans8"
    f, plain, out = tmp_path / "c.ansf", tmp_path / "p.ansf", tmp_path / "c.safetensors"
    assert main(["compress", "--model", str(stories), "--codec", codec, "--context", "--checkpoint-interval", "3000",
                 "-o", str(f)]) == 0
    assert "context: 38 of 38 matrices kept a plan" in capsys.readouterr().out
    compress_checkpoint(stories, plain, codec, checkpoint_interval=3000)
    c, p = open_container(f), open_container(plain)
    assert c.version == 7 and p.version in (2, 3) and f.stat().st_size < plain.stat().st_size
    planned = [r for r in c.tensors if r.get("context")]
    assert len(planned) == 38  # every 2-D matrix of stories260K pays for its plan (11 norm vectors stay plain)
    assert any("tans_symbols" not in s for r in planned for s in r["context"]["sets"])
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
    assert "ansforge container v7" in text and c.plan_text(c.record(name)) in text and "context plan" in text
    assert f"{name}: 5 values" in text


def _minilm_subset(minilm, out: Path, names: list[str]) -> None:
    ck = open_checkpoint(minilm)
    arrays = {n: np.ascontiguousarray(ck.tensor(n).array) for n in names}
    write_safetensors(out, [(n, "F32", arrays[n].shape) for n in names], lambda i, n: [arrays[n]])


def _tensor_bytes(c, name: str) -> int:
    """A tensor's bytes in a blocks-layout file: its record (length, JSON, CRC) and its blocks' words."""
    b = c.tensor_bits(name)
    return b["record_bytes"] + b["stream_bits"] // 8


@pytest.mark.parametrize("pairs", ["auto", "bf16"])
def test_minilm_matrices_keep_a_plan_only_where_it_pays(minilm, tmp_path, pairs):
    """Three large MiniLM matrices (of different shapes and layers) and a bias, as fp32 (lossless) and
    bf16 pairs, in the default format: each matrix costs at most its bytes with one table (its record,
    every set and stored spread in it, and its blocks' words), less where it kept a plan; the file is
    smaller than the plain file by what compress says, and decodes to the same values. The whole model
    (bf16) is test_minilm_context_figure_from_the_file."""
    names = ["encoder.layer.0.attention.self.query.weight", "encoder.layer.0.intermediate.dense.weight",
             "encoder.layer.3.output.dense.weight"]
    src = tmp_path / "sub.safetensors"
    _minilm_subset(minilm, src, names + ["encoder.layer.5.attention.self.value.bias"])
    f, plain = tmp_path / "c.ansf", tmp_path / "p.ansf"
    rc = compress_checkpoint(src, f, pairs=pairs, context=True)
    rp = compress_checkpoint(src, plain, pairs=pairs)
    c, p = open_container(f), open_container(plain)
    _same_tensors(c, p)
    assert rc["context"]["plain_bytes"] == rp["bytes"] and rc["bytes"] <= rp["bytes"]
    assert rc["context"]["matrices"] == 3 and rc["context"]["kept"] >= 1
    for n in names:
        if c.record(n).get("context"):
            assert _tensor_bytes(c, n) < _tensor_bytes(p, n), n
        else:  # the plain record, byte for byte
            assert {k: v for k, v in c.record(n).items() if not k.startswith("_")} == \
                {k: v for k, v in p.record(n).items() if not k.startswith("_")}, n
    assert c.record("encoder.layer.5.attention.self.value.bias").get("context") is None  # 1-D: plain


def _side_bits_from_json(rec: dict, precision_bits: int) -> int:
    """Side information of a tensor record counted from its JSON alone (independent of the reader): the
    exponent table, a frequency per symbol and set, the selects, the plan header, and each stored tANS
    spread (``tans_symbols``) at ``ceil(log2 symbols)`` bits per slot."""
    ctx = rec.get("context")
    e_bits = {"bf16": 8, "fp16": 5, "fp32": 8}[rec["pair_format"]] + (ctx["fold"] if ctx else 0)
    symbols = len(rec["code_table"]["direct_codes"]) + (1 if rec["code_table"]["escape_codes"] else 0)
    sets = ctx["n_sets"] if ctx else 1
    assert all(len(s["freqs"]) == symbols for s in ctx["sets"]) if ctx else True
    sel = len(ctx["selects"]) * math.ceil(math.log2(sets)) if sets > 1 else 0
    spreads = sum("tans_symbols" in s for s in (ctx["sets"] if ctx else [rec]))
    return len(rec["exponents"]) * e_bits + sets * symbols * precision_bits + sel + 24 + \
        spreads * (1 << precision_bits) * max(1, math.ceil(math.log2(max(2, symbols))))


def test_minilm_context_figure_from_the_file(minilm, tmp_path):
    """The whole of MiniLM as bf16 pairs in the default format (tans8x16, blocks) with --context: never
    larger than without (by exactly what compress says), and its bits per weight over Table 1's matrices
    recomputed from the file's bytes: each tensor's blocks' words (n_words × word bytes, which must tile
    the payload) and its record's side information, every set, stored spread and select charged. The
    figure agrees with Container.tensor_bits, and it is 0.8 % below Ideal."""
    f, plain = tmp_path / "m.ansf", tmp_path / "p.ansf"
    rc = compress_checkpoint(minilm, f, pairs="bf16", context=True)
    rp = compress_checkpoint(minilm, plain, pairs="bf16")
    assert rc["bytes"] < rp["bytes"] == rc["context"]["plain_bytes"]
    blob = f.read_bytes()
    r = split_records(blob)
    tensors, streams = r.records[:r.n_tensors], r.records[r.n_tensors:]
    assert r.version == 7 and len(streams) == 1 and streams[0]["codec"]["name"] == "tans8x16"
    st = streams[0]
    assert st["n_words"] * st["word_bytes"] + sum(t.get("nbytes", 0) for t in tensors) == len(r.payload)
    assert sum(n for n, _ in st["blocks"]) == st["n_words"]
    # Each tensor's blocks: its pairs cut every block_pairs, in stream order.
    words_of, b = {}, 0
    for t in sorted((t for t in tensors if t["coding"] == "pairs"), key=lambda t: t["first_pair"]):
        k = -(-t["n_pairs"] // st["block_pairs"])
        words_of[t["name"]] = sum(n for n, _ in st["blocks"][b:b + k])
        b += k
    assert b == len(st["blocks"])
    names = [i.name for i in select_tensors(open_checkpoint(minilm), (), ())]
    by = {t["name"]: t for t in tensors}
    c = open_container(f)
    bits = ideal = weights = 0
    for n in names:
        t = by[n]
        one = 8 * words_of[n] * st["word_bytes"] + _side_bits_from_json(t, 8)
        assert one == sum(v for k, v in c.tensor_bits(n).items() if k.endswith("_bits")), n
        bits += one
        ideal += t["ideal_bits"]
        weights += math.prod(t["shape"])
    assert weights == 22_682_112
    per_weight, ideal_per_weight = bits / weights, ideal / weights
    assert ideal_per_weight == pytest.approx(10.6140, abs=5e-5)
    assert per_weight < ideal_per_weight * (1 - 0.0075), per_weight
    print(f"MiniLM context: {per_weight:.4f} bits/weight, Ideal {ideal_per_weight:.4f} "
          f"({100 * (per_weight / ideal_per_weight - 1):+.3f} %), file {len(blob):,} bytes, plain {rp['bytes']:,}")


@pytest.mark.parametrize("codec,version", [("tans8x16", 7), ("rans16x16", 6)])
def test_interleaved_context_round_trips_through_decompress_and_the_golden_model(small, tmp_path, codec, version):
    """Table sets, selects and runs with 16 interleaved states, in blocks cut inside the plan's groups:
    decompress (the compiled kernels) gives the source's values back, and every block decoded by the
    golden model alone (its words, its tables, its runs) gives the same values. tANS sets whose spread
    their frequencies imply leave it out (version 7)."""
    src, f, out = small / "m.safetensors", tmp_path / "c.ansf", tmp_path / "c.safetensors"
    compress_checkpoint(src, f, codec, context=True, block_pairs=3000)
    c = open_container(f)
    st = c.streams[0]
    assert (c.version, st.spec.name) == (version, codec) and c.record("w.a")["context"]["n_sets"] > 1
    assert main(["decompress", str(f), "-o", str(out)]) == 0
    source, back = open_checkpoint(src), open_checkpoint(out)
    for name in ("w.a", "w.b"):
        assert np.ascontiguousarray(back.tensor(name).array).tobytes() == \
            np.ascontiguousarray(source.tensor(name).array).tobytes(), name
    golden = {}
    for b, blk in enumerate(st.spans):
        tables, runs = c.block_tables(st, b)
        sy, ex, _ = st.spec.coder().decode(c.block_words(st, b), tables, runs)
        rec = c.tensors[blk.tensor]
        golden.setdefault(rec["name"], []).append(c.join(rec, sy, ex, blk.pair - rec["first_pair"]))
    assert len(golden["w.a"]) == 3  # 8,192 pairs in blocks of 3,000
    for name, parts in golden.items():
        assert np.array_equal(np.concatenate(parts), c.read(name).ravel()), name


def test_simulate_container_verilator_interleaved_context(small, tmp_path, capsys):
    """The tANS decoder core in the default format (tans8x16) decodes a context container in Verilator,
    table sets (their implied spreads rebuilt by the host) through cfg and selects on sel, one command
    per block: bit-exact with decompress."""
    f = tmp_path / "c.ansf"
    assert main(["compress", "--model", str(small / "m.safetensors"), "--context", "-o", str(f)]) == 0
    assert open_container(f).version == 7
    capsys.readouterr()
    assert main(["simulate", "--container", str(f), "--core", "tans-decoder", "--engine", "verilator"]) == 0
    out = capsys.readouterr().out
    assert "tans8x16" in out and "(1 with context plans" in out and "bit-exact against decompress: yes" in out


def test_stories_context_file_is_never_larger(stories, tmp_path, capsys):
    """stories260K in the default format, as fp32 (lossless) and bf16 pairs: with --context the file is
    smaller than without, by exactly what compress prints against one table per matrix."""
    for pairs in ("auto", "bf16"):
        f, plain = tmp_path / f"c-{pairs}.ansf", tmp_path / f"p-{pairs}.ansf"
        assert main(["compress", "--model", str(stories), "--pairs", pairs, "-o", str(plain)]) == 0
        assert main(["compress", "--model", str(stories), "--pairs", pairs, "--context", "-o", str(f)]) == 0
        out = capsys.readouterr().out
        size, base = f.stat().st_size, plain.stat().st_size
        assert size < base and f"{100 * (size / base - 1):+.2f}% vs one table per matrix ({base:,} bytes)" in out
        assert "context: 38 of 38 matrices kept a plan" in out, out
        _same_tensors(open_container(f), open_container(plain))


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
    """The rANS decoder core over every stories260K tensor, 38 of them with context plans: kept whether
    they pay or not (``context="always"``; rANS sets' 16-bit frequencies rarely pay on so small a model),
    so that the core switches table sets in every matrix."""
    f = tmp_path / "s.ansf"
    compress_checkpoint(stories, f, "rans16", context="always", group="tensor", checkpoint_interval=20000)
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
    from ansforge.sim.container_plan import decode_container_subsystem

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
