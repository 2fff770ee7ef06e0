"""The codec registry (``model/coding/registry.py``, issue 43 deliverable 4): every name it lists parses
and round-trips bit-exactly, ``parse_codec`` accepts nothing else, ``ansforge codecs`` joins it with the
core registry (``hdl/cores.py``), and every ``--codec`` help text, README's table of codecs and
docs/bitstream.md §8 agree with it. Tiny arrays, in-process: a few CPU-seconds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from ansforge.cli import build_parser, main
from ansforge.hdl.cores import BASE_BUILDS, ROLES, cores_for
from ansforge.model.coding import registry
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.container import DEFAULT_CODEC, LEGACY_CODECS, compress_checkpoint, open_container
from ansforge.model.coding.stream import MAX_STATES, Run
from ansforge.model.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
#: A codec name as help texts and docs write one (the legacy suffix included).
CODEC_WORD = re.compile(r"\b(?:tans|rans)\d+(?:x\d+)?(?:-s\d+w\d+)?\b")


def test_the_registry_lists_each_name_once_and_names_the_default_and_the_paper_once():
    names = registry.names()
    assert len(names) == len(set(names)) == 8 * 16 + 20 * 16 + 1 + 15      # tansR, ransP with N = 1..16; legacy
    assert sum(len(f.names()) for f in registry.FAMILIES) == len(names)
    assert registry.MAX_STATES == MAX_STATES
    assert DEFAULT_CODEC == registry.DEFAULT_FORMAT == "tans8x16"
    assert registry.default_for("rans") == "rans16x16" and registry.default_for("tans") == registry.DEFAULT_FORMAT
    assert registry.PAPER == {"tans": "tans8", "rans": "rans16"}
    assert LEGACY_CODECS == registry.legacy_codecs()
    for e in registry.entries():
        assert e.status in ("current", "legacy") and e.speed in registry.SPEEDS
        assert (e.status == "legacy") == (e.codec() in LEGACY_CODECS)
        assert registry.family_of(e.codec()) == e          # a stream's codec maps back to its one name
    # the core registry's base builds default to the registry's default format and keep the paper's
    for (kind, role), row in BASE_BUILDS.items():
        assert row.default_codec == registry.default_for(kind) and row.paper == registry.PAPER[kind], row.name


def _pairs(rng, spec, n: int):
    m = 12
    counts = (rng.integers(1, 1000, size=m) ** 2).astype(np.int64)
    ct = spec.code_table(counts, 3)
    s, e = ct.to_symbols(rng.choice(m, size=n, p=counts / counts.sum()), rng.integers(0, 8, size=n, dtype=np.uint64))
    return spec.coder_table(ct, counts, spread="fse"), s, e      # one tANS spread (choosing costs more)


def test_every_name_parses_and_round_trips_a_small_array_bit_exactly():
    rng = np.random.default_rng(43)
    for name in registry.names():
        spec = parse_codec(name)
        assert spec == registry.lookup(name) == registry.entry(name).codec()
        assert registry.entry(name).to_json()["parameters"]["states"] == spec.states
        assert spec.to_json()["name"] == spec.name == name.split("-")[0]   # a legacy name writes its old record
        table, s, e = _pairs(rng, spec, 2 * spec.states + 5)
        coder = spec.coder()
        runs = [Run(0, s.size)]
        st = coder.encode([table], runs, s, e)
        got_s, got_e, _ = coder.decode(st.words, [table], runs)
        assert np.array_equal(got_s, s) and np.array_equal(got_e, e), name


def test_parse_codec_accepts_nothing_the_registry_does_not_list():
    listed = set(registry.names())
    tried = accepted = 0
    for kind in ("tans", "rans", "tANS", "zans"):
        for bits in (0, 4, 5, 8, 12, 13, 16, 24, 25, 99):
            for n in (None, 0, 1, 2, 16, 17):
                for suffix in ("", "-s64w32", "-s48w32", "-legacy"):
                    name = f"{kind}{bits}" + (f"x{n}" if n is not None else "") + suffix
                    tried += 1
                    try:
                        spec = parse_codec(name)
                    except ConfigError as exc:
                        assert "\n" not in str(exc) and name in str(exc), exc      # one line, naming the value
                        continue
                    accepted += 1
                    plain = f"{kind.lower()}{bits}" + (f"x{n}" if n not in (None, 1) else "") + suffix
                    assert plain in listed, name
                    assert spec == registry.lookup(plain)
    assert tried > 900 and accepted > 50


def test_codecs_verb_joins_the_core_registry(tmp_path, capsys):
    out = tmp_path / "codecs.json"
    assert main(["codecs", "--all", "--json", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["default"] == registry.DEFAULT_FORMAT and doc["paper"] == registry.PAPER
    assert [c["name"] for c in doc["codecs"]] == registry.names()
    for c in doc["codecs"]:
        spec = parse_codec(c["name"])
        assert c["cores"] == {role: [r.name for r in cores_for(spec, role)] for role in ROLES}, c["name"]
        assert c["name"] in text
    by = {c["name"]: c for c in doc["codecs"]}
    assert by["tans8x16"]["roles"] == ["default"] and by["rans16"]["roles"] == ["paper"]
    assert by["rans16x16"]["cores"] == {"decoder": ["rans-decoder"], "encoder": ["rans-encoder"]}
    assert by["rans16-s64w32"]["status"] == "legacy" and by["rans16-s64w32"]["record_name"] == "rans16"
    assert main(["codecs"]) == 0 and "rans16xN-s48w32" in capsys.readouterr().out
    assert main(["codecs", "rans16x16", "tans8"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[2].startswith("rans16x16") and rows[3].startswith("tans8 ")
    assert main(["codecs", "tans9x3z"]) == 2
    assert "tans9x3z" in capsys.readouterr().err


def _codec_options():
    """(verb, option, action) of every option of every verb whose value is a codec name."""
    parser = build_parser()
    for verbs in parser.verbs:
        for name, sub in verbs.items():
            groups = getattr(sub, "verbs", [])
            subs = [(f"{name} {n}", p) for g in groups for n, p in g.items()] or [(name, sub)]
            for verb, p in subs:
                for a in getattr(p, "options", []):
                    if any(o == "--codec" or o.endswith("-codec") for o in a.option_strings):
                        yield verb, a.option_strings[-1], a


def test_every_codec_help_text_agrees_with_the_registry():
    seen = []
    for verb, option, action in _codec_options():
        seen.append(f"{verb} {option}")
        words = CODEC_WORD.findall(action.help)
        assert words, (verb, option, action.help)
        for w in words:
            assert w in registry.names() or w.replace("x<N>", "") in registry.names(), (verb, option, w)
        if verb != "prove" and option in ("--codec", "--context-codec"):
            assert registry.summary() in action.help, (verb, option)
        if action.default is not None:
            assert f"default {action.default}" in action.help, (verb, option, action.default)
        assert "not for the hardware" not in action.help
    assert {"compress --codec", "simulate --codec", "verilog --codec", "testbench --codec", "resources --codec",
            "factory --codec", "generate --codec", "context --codec", "tables --context-codec"} <= set(seen), seen
    helps = {f"{v} {o}": a.help for v, o, a in _codec_options()}
    assert "default tans8x16" in helps["compress --codec"]
    for verb in ("simulate", "verilog", "testbench"):
        assert f"{registry.default_for('tans')} for tANS cores and {registry.default_for('rans')}" in helps[f"{verb} --codec"]
    assert "the paper's, tans8 for tANS cores and rans16" in helps["resources --codec"]


@pytest.mark.parametrize("doc", ["README.md", "docs/bitstream.md"])
def test_the_docs_hold_the_registry_table(doc):
    text = (ROOT / doc).read_text()
    start = "<!-- codecs table: model/coding/registry.py markdown_table() -->"
    assert start in text, doc
    block = text.split(start, 1)[1].split("<!-- end of codecs table -->", 1)[0].strip().splitlines()
    assert block == registry.markdown_table(), f"{doc}: regenerate its table from registry.markdown_table()"
    if doc == "docs/bitstream.md":                # in §8, and every name §8 writes is one the registry lists
        s8 = text.split("## 8.", 1)[1]
        assert start in s8
        for w in CODEC_WORD.findall(s8):
            assert w in registry.names() or re.fullmatch(r"(tans|rans)\d+", w.split("x")[0]), w
    assert "`ansforge codecs" in (ROOT / "README.md").read_text()


def test_a_legacy_name_writes_the_old_record_and_reads_back(tmp_path):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(7)
    save_file({"w.weight": rng.normal(size=(16, 8)).astype(np.float32)}, str(tmp_path / "m.safetensors"))
    compress_checkpoint(tmp_path / "m.safetensors", tmp_path / "l.ansf", "rans16-s64w32")
    c = open_container(tmp_path / "l.ansf")
    spec = c.streams[0].spec
    assert spec in LEGACY_CODECS and spec.name == "rans16" and spec.state_bits == 64
    assert registry.family_of(spec).name == "rans16-s64w32"
    assert np.array_equal(c.read("w.weight").view(np.uint32), np.asarray(
        __import__("safetensors.numpy", fromlist=["load_file"]).load_file(str(tmp_path / "m.safetensors"))[
            "w.weight"]).view(np.uint32))


def test_an_unknown_codec_is_one_line_and_status_2(tmp_path, capsys):
    assert main(["compress", "--model", str(tmp_path / "m.bin"), "--codec", "zstd3", "-o",
                 str(tmp_path / "o.ansf")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "zstd3" in err and "tansR" in err and "ansforge codecs" in err
