"""The core registry (``hdl/cores.py`` ``REGISTRY``, issue 42 deliverable 4): every registered build
elaborates, every codec the container can write is taken by a core of each role or refused in one line
naming which cores take what, everything that names a core derives from it, the README's table is the
registry's, and the old import names still work."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.lib import wiring

from ansforge.hdl.cores import (REGISTRY, ROLES, CoreBuild, base_names, build_core, core_build, core_for,
                                core_names, cores_for, default_codec, markdown_table, no_core, prove_names, refusal)
from ansforge.model.coding.codecs import DEFAULT_CODECS, parse_codec
from ansforge.model.coding.container import DEFAULT_CODEC, LEGACY_CODECS
from ansforge.model.coding.rans import RANS_PRESETS
from ansforge.model.coding.stream import MAX_STATES
from ansforge.model.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
#: The paper configuration (DEVELOPERS.md): 64 codes, 8 extra bits, programmable tables.
PAPER = dict(programmable=True, max_symbols=64, max_extra_bits=8)


def _every_codec_name() -> list[str]:
    """Every codec name ``parse_codec`` accepts (its error message gives the ranges: tansR R = 5..12,
    ransP P = 5..24, N = 1..MAX_STATES), and the presets' names."""
    names = [f"{kind}{b}" + (f"x{n}" if n > 1 else "")
             for kind, bits in (("tans", range(5, 13)), ("rans", range(5, 25)))
             for b in bits for n in range(1, MAX_STATES + 1)]
    for bad in ("tans4", "tans13", "rans4", "rans25", f"tans8x{MAX_STATES + 1}"):
        with pytest.raises(ConfigError):
            parse_codec(bad)
    return names + [n for n in DEFAULT_CODECS if n not in names]


def _every_codec():
    """Every codec object a container can hold: the names, and the legacy codecs ansforge still reads."""
    return [parse_codec(n) for n in _every_codec_name()] + list(LEGACY_CODECS)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("name", [r.name for r in REGISTRY] + ["tans-decoder-x16", "tans-encoder-x16",
                                                               "rans-decoder-x16"])
def test_every_registered_build_elaborates(name):
    """Each row (and the N = 16 builds of the default container format) at the paper configuration,
    programmable: built from its default codec, made of its declared coder and shell, elaborated whole."""
    build = core_build(name)
    core = build.build(**PAPER)
    assert isinstance(core, build.core_class)
    blocks = core.blocks()
    assert isinstance(blocks["coder"], build.coder_classes), (name, type(blocks["coder"]))
    assert isinstance(blocks["shell"], build.shell_classes), (name, type(blocks["shell"]))
    assert core.codec.name == build.default_codec and build.takes(core.codec)
    assert "module" in rtlil.convert(core, name=name.replace("-", "_"))
    # Issue 42 item 5: every block --breakdown lists is a Component that builds alone.
    for block_name, block in blocks.items():
        assert isinstance(block, wiring.Component), (name, block_name, type(block))
        assert "module" in rtlil.convert(block, name=block_name.replace(" ", "_").replace("-", "_"))


def test_no_block_writes_into_its_parents_module():
    """Issue 42 item 5: a sub-block is a submodule joined through its ports; no hdl class takes its
    parent's ``Module`` to add logic to it."""
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "hdl").rglob("*.py"))
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if re.match(r"\s*def __init__\(self, m\b", line)]
    assert not offenders, offenders


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_every_codec_is_taken_or_refused_in_one_line():
    """For each role, a codec the registry's base build takes is built by :func:`build_core` as that
    build's class; every other is refused by :func:`build_core` in one line that names the codec and
    which cores take what, and the core class refuses it too (the registry hides no codec a core takes)."""
    taken = {role: 0 for role in ROLES}
    for codec in _every_codec():
        for role in ROLES:
            rows = cores_for(codec, role)
            assert len(rows) <= 1, (codec.name, role, rows)
            cls = [r for r in REGISTRY if r.base == r.name and r.kind == codec.kind and r.role == role][0].core_class
            try:
                cls(codec, **PAPER)
                accepted = True
            except (ConfigError, ValueError):
                accepted = False
            assert accepted == bool(rows), (codec.name, codec.params, role)
            if rows:
                taken[role] += 1
                assert core_for(codec, role) is rows[0]
                assert isinstance(build_core(codec, role, **PAPER), rows[0].core_class)
            else:
                with pytest.raises(ConfigError) as e:
                    build_core(codec, role, **PAPER)
                msg = str(e.value)
                assert msg == refusal(codec, role) and "\n" not in msg and codec.name in msg
                if no_core(codec, role) is None:
                    assert f"{codec.kind}-{role} takes " in msg, msg
                else:                           # a retired format: the line says what to do instead
                    assert msg.endswith("format): decode it in software, or recompress"), msg
    assert taken["decoder"] > 100 and taken["encoder"] > 100


def test_what_each_base_build_takes():
    """The rows say what issue 42 asks: tANS any R with N = 1 .. 16; the rANS decoder rans5..24 and
    rans16x5..16; the rANS encoder N = 1 and N = 16."""
    names = {r.name: set(r.codec_names()) for r in REGISTRY}
    assert names["tans-decoder"] == names["tans-encoder"] == {
        f"tans{b}" + (f"x{n}" if n > 1 else "") for b in range(5, 13) for n in range(1, 17)}
    assert names["rans-decoder"] == {f"rans{p}" for p in range(5, 25)} | {f"rans16x{n}" for n in range(5, 17)}
    assert {"rans16", "rans24", "rans16x16", "rans24x16"} <= names["rans-encoder"]
    assert not any(re.fullmatch(r"rans\d+x(\d+)", n) and not n.endswith("x16") for n in names["rans-encoder"])
    # every interleaved row is a restriction of its base row, with its own formal configuration
    for r in REGISTRY:
        if r.base != r.name:
            assert set(r.codec_names()) <= names[r.base] and r.interleaved and r.formal is not None
            assert r.core == core_build(r.base).core
    # a base build is made for the default container format (what compress writes) unless told otherwise;
    # the paper's one-state codec stays beside it for Table 3 and the <base>-x<N> builds' defaults
    assert [r.default_codec for r in REGISTRY if r.base == r.name] == ["tans8x16", "tans8x16", "rans16x16",
                                                                       "rans16x16"]
    assert [r.paper for r in REGISTRY if r.base == r.name] == ["tans8", "tans8", "rans16", "rans16"]
    assert DEFAULT_CODEC in [r.default_codec for r in REGISTRY if r.kind == "tans"]
    assert [default_codec(n) for n in ("tans-decoder", "rans-encoder", "tans-decoder-x4", "rans-decoder-x5")] == [
        "tans8x16", "rans16x16", "tans8x4", "rans16x5"]
    # the interleaved preset is the one rANS xN streams take
    assert parse_codec("rans16x5").params.state_bits == RANS_PRESETS["interleaved"].state_bits


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_both_spellings_name_one_build():
    from ansforge.cli.cores import _split_core

    assert _split_core("rans-decoder-x5") == ("rans-decoder", 5)
    assert _split_core("tans-decoder-x16") == ("tans-decoder", 16)
    assert _split_core("rans-decoder") == ("rans-decoder", None)
    assert core_build("rans-decoder-x5").codec_names() == ["rans16x5"]
    assert core_build("tans-encoder-x16").default_codec == "tans8x16"
    for bad in ("tans-decoder-x17", "rans-decoder-x3", "rans-encoder-x5", "tans-decoder-x1", "foo"):
        with pytest.raises(ValueError, match="core must be one of"):
            core_build(bad)
    with pytest.raises(ConfigError, match=r"^codec tans8x3: the tans-decoder-x2 build takes tans5\.\.12, N = 2"):
        core_build("tans-decoder-x2").build(parse_codec("tans8x3"), **PAPER)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_everything_names_cores_from_the_registry():
    import argparse

    from ansforge.analysis import bench
    from ansforge.cli import cores as cli
    from ansforge.cli import build_parser
    from ansforge.sim import formal, jobs
    from ansforge.sim.formal import mutants

    assert cli.ALL_CORES == core_names() and cli.CORES == base_names() and cli.PROVE_CORES == prove_names()
    for r in REGISTRY:
        assert r.name in cli.ALL_CORES
    for n in cli.INTERLEAVED_CORES:
        assert n in cli.CORE_HELP or n.rpartition("-x")[0] + "-x" in cli.CORE_HELP
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for verb in ("simulate", "verilog", "testbench", "resources", "prove"):
        core = next(a for a in sub.choices[verb]._actions if a.dest == "core")
        assert list(core.choices) == core_names(), verb
    assert list(jobs.CORES) == base_names() and list(bench.CORES) == base_names()
    assert set(bench.INTERLEAVED_CODECS) == set(base_names())
    assert prove_names() == list(formal.CORES)
    assert set(formal.INTERLEAVED_CORES) == {r.name for r in REGISTRY if r.formal and r.formal.states > 1}
    assert {m.core for m in mutants.MUTANTS.values()} <= set(prove_names())
    assert set(formal.PROGRESS_CLOCKS) == set(prove_names())
    assert formal.XN_BAKED == ("rans-decoder-x5",)
    assert formal.MIN_DEPTH == {"rans-decoder-x5": 20, "rans-encoder-x16": 20}
    for name in prove_names():
        row = core_build(name)
        assert isinstance(formal.small_core(name), row.formal.harness_class), name


def test_cli_refuses_a_codec_no_core_takes_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ansforge", "verilog", "--core", "rans-encoder", "--codec", "rans16x4",
                        "-o", tmp_path / "x.v"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == ["ansforge: error: --codec rans16x4: no encoder core takes it (rans-encoder takes rans5..24; "
                     "rans8..24, N = 16; docs/bitstream.md §8)"], r.stderr
    assert not (tmp_path / "x.v").exists()


def test_legacy_s48_container_decodes_in_software_and_no_core_takes_it(tmp_path):
    """A legacy S = 48 rANS xN container (``rans16xN-s48w32``, whose one-pop decoder datapath was
    retired) still decodes in software, bit-exact; ``simulate --container`` and ``verilog --codec`` refuse
    it in one line naming the file or the value, exit 2, nothing written. (The encoder keeps N = 16.)"""
    from safetensors.numpy import save_file

    from ansforge.model.coding.container import open_container

    rng = np.random.default_rng(5)
    weights = {"w": (rng.standard_normal((64, 96)) * 0.05).astype(np.float32)}
    save_file(weights, str(tmp_path / "m.safetensors"))
    f = tmp_path / "m.ansf"

    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "ansforge", *map(str, argv)], capture_output=True, text=True,
                              timeout=300)

    assert cli("compress", "--model", tmp_path / "m.safetensors", "--codec", "rans16x5-s48w32", "-o", f,
               "-q").returncode == 0
    c = open_container(f)
    assert {st.spec.params.state_bits for st in c.streams} == {48}
    assert np.array_equal(c.read("w").view(np.float32), weights["w"])       # (read gives the raw bits)
    line = "no decoder core takes rans16x5-s48w32 (legacy S = 48 format): decode it in software, or recompress"
    assert no_core(c.streams[0].spec, "decoder") == line and no_core(c.streams[0].spec, "encoder") is None
    r = cli("simulate", "--core", "rans-decoder", "--container", f)
    assert (r.returncode, r.stderr.strip().splitlines()) == (2, [f"ansforge: error: {f}: {line}"]), r.stderr
    r = cli("verilog", "--core", "rans-decoder-x5", "--codec", "rans16x5-s48w32", "-o", tmp_path / "x.v")
    assert (r.returncode, r.stderr.strip().splitlines()) == (
        2, [f"ansforge: error: --codec rans16x5-s48w32: {line}"]), r.stderr
    assert not (tmp_path / "x.v").exists()


def test_readme_table_is_the_registry():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- cores table: hdl/cores\.py markdown_table\(\) -->\n(.*?)\n<!-- end of cores table -->",
                  text, re.S)
    assert m, "README.md has no cores table"
    assert m.group(1).splitlines() == markdown_table()


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_old_import_names_still_work():
    from ansforge.cli.cores import ALL_CORES, CORES, INTERLEAVED_CORES, PROVE_CORES, _split_core  # noqa: F401
    from ansforge.hdl.cores import CORE_CLASSES, PAPER_CODECS, core_states, paper_codec, table_writes  # noqa: F401
    from ansforge.sim.formal import CORES as FORMAL_CORES, ONE_STATE_CORES, check_mutant  # noqa: F401
    from ansforge.hdl.rans import RansDecoder, RansEncoder
    from ansforge.hdl.tans_xn import TansXnDecoder, TansXnEncoder
    from ansforge.sim.jobs import CORES as JOB_CORES, build_core as job_build_core

    assert CORES == ["tans-decoder", "tans-encoder", "rans-decoder", "rans-encoder"] == list(JOB_CORES)
    assert ONE_STATE_CORES == tuple(CORES)
    assert {"tans-decoder-x2", "tans-encoder-x2", "rans-decoder-x5", "rans-encoder-x16"} <= set(INTERLEAVED_CORES)
    assert len(CORE_CLASSES) == 4 and CORE_CLASSES[("tans", "decoder")] is TansXnDecoder
    assert dict(CORE_CLASSES.items()) == {("tans", "decoder"): TansXnDecoder, ("tans", "encoder"): TansXnEncoder,
                                          ("rans", "decoder"): RansDecoder, ("rans", "encoder"): RansEncoder}
    assert PAPER_CODECS == {"tans": "tans8", "rans": "rans16"}
    assert paper_codec("rans-decoder") == "rans16" and paper_codec("tans-encoder-x2") == "tans8x2"
    assert core_states(parse_codec("rans16x5"), "decoder") == (1, *range(5, 17))
    assert isinstance(job_build_core("tans-decoder", parse_codec("tans8x16"), programmable=True), TansXnDecoder)
    assert isinstance(job_build_core("rans-decoder-x5", parse_codec("rans16x5"), programmable=True), RansDecoder)
    assert isinstance(REGISTRY[0], CoreBuild)
