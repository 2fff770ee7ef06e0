"""Issue 48, deliverable 5: progress that tells the truth.

On a terminal (standard error a pseudo-terminal, as a user sees it) a long step shows progress that
advances with the work done and the elapsed time, redrawn at least every few seconds; with ``--json``,
``--quiet`` or off a terminal not one byte of progress is written. ``resources`` says what it does
before it builds anything and leaves nothing behind when interrupted. The take-home testbench says
how far it is every 10 % of its outputs. ``simulate`` builds the Verilog ``demo`` built, so the
Verilator cache (keyed by the Verilog) hits.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

MATRIX = "layers.0.attention.wk.weight"     # stories260K's smallest counted matrix: 2,048 pairs


def _percentages(err: str) -> list[int]:
    return [int(p) for p in re.findall(r"(\d+)%\|", err)]


#: The longest a terminal may stay without a redraw while work goes on: the bars and activities redraw
#: every second (ansforge.model.progress.TICK_SECONDS); the rest is room for a loaded CI runner.
SILENCE = 5.0

SGR = re.compile(r"\x1b\[[0-9;]*m")      # a colour (Select Graphic Rendition) sequence


# --------------------------------------------------------------------------------------------------
# tables: one bar of weight passes, fed from inside the workers' loops


def test_tables_bar_advances_with_the_work_on_a_terminal(minilm, tmp_path, on_a_terminal):
    # MiniLM's first layer (1.8 M weights, about 12 s on a fast machine): stories260K's whole Table 1 takes
    # 1.4 s there, too short for the bar (polled four times a second) to show many fractions.
    r = on_a_terminal("tables", "--model", minilm, "--include", "encoder.layer.0.*", "--exclude", "*LayerNorm*",
                      cwd=tmp_path, env={"NO_COLOR": "1"})
    assert r.status == 0 and "Table 1:" in r.stdout and "xz -9" in r.stdout, r.stderr[-2000:]
    err = r.stderr
    # The bar moves with the weights done (many distinct fractions, in order), shows the elapsed time
    # and names what is running; redrawn at least every few seconds; no colour.
    seen = _percentages(err)
    assert len(set(seen)) >= 5 and seen == sorted(seen), seen
    assert re.search(r"Table 1: +\d+%\|.*\| [\d.]+[kM]?/[\d.]+M \[00:0\d<", err), err[-500:]
    assert re.search(r"w/s, [^\]]*(rans16|tans8|context|gzip|bzip2|xz|zstd|matrices)", err), err[-1000:]
    assert r.longest_silence() < SILENCE, r.chunks
    assert not SGR.search(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", ["--json", "--quiet", "off a terminal"])
def test_tables_writes_no_progress_with_json_quiet_or_off_a_terminal(stories, tmp_path, how, on_a_terminal):
    args = ["tables", "--model", stories, "--general", "gzip", "--codecs", "tans8", "--context-codec", "",
            "--no-constriction"]
    if how == "off a terminal":
        r = subprocess.run([sys.executable, "-m", "ansforge", *map(str, args)], capture_output=True, text=True,
                           cwd=tmp_path, timeout=300)
        assert r.returncode == 0 and r.stderr == "" and "Gzip -9" in r.stdout, r.stderr
        return
    extra = ["--json", tmp_path / "t.json"] if how == "--json" else ["--quiet"]
    r = on_a_terminal(*args, *extra, cwd=tmp_path)
    assert r.status == 0 and r.chunks == [] and "Gzip -9" in r.stdout, r.stderr
    if how == "--json":
        assert json.loads((tmp_path / "t.json").read_text())["rows"]


def test_table1_progress_counts_every_weight_pass(stories):
    """Each task counts exactly its weight in the bar: the bar ends at its total, never past it."""
    from ansforge.analysis import table1
    from ansforge.model.llm.checkpoint import open_checkpoint, select_tensors

    names = [i.name for i in select_tensors(open_checkpoint(str(stories)), (), ())]
    total = sum(i.size for i in select_tensors(open_checkpoint(str(stories)), (), ()))
    import ctypes
    import multiprocessing

    cases = [(table1.codec_task, (str(stories), names, "bf16", "tans8"), 3 * total),
             (table1.context_task, (str(stories), names, "bf16", "rans16"), 4 * total),
             (table1.stream_task, (str(stories), names, "bf16", "gzip"), total),
             (table1.matrix_task, (str(stories), names[0], "bf16", True),
              2 * open_checkpoint(str(stories)).info(names[0]).size)]
    table1._done = multiprocessing.RawArray(ctypes.c_int64, len(cases))
    try:
        for slot, (fn, args, weight) in enumerate(cases):
            fn(*args, slot)
            assert table1._done[slot] == weight, (fn.__name__, table1._done[slot], weight)
    finally:
        table1._done = None


def test_compress_bar_counts_weights_with_a_rate_and_an_eta(minilm, tmp_path, on_a_terminal):
    """Issue 47 item 6: compress's bar counts the model's weights (each half done when its tensor is
    split into pairs, whole when it is coded), in order, with a rate and an estimate of the time left."""
    r = on_a_terminal("compress", "--model", minilm, "-o", tmp_path / "m.ansf", cwd=tmp_path)
    assert r.status == 0 and "22,713,216 pairs" in r.stdout, r.stderr[-2000:]
    err = r.stderr
    seen = _percentages(err)
    # MiniLM's word embeddings are half its weights and an idle machine codes the whole model in about a
    # second and a half: two distinct redraws (one of them 100 %) is all a fast run may show
    assert len(set(seen)) >= 2 and seen == sorted(seen) and max(seen) == 100, seen
    # done/total in weights (MiniLM's 22.7 M, its raw int64 tensor's 512 included), elapsed<left, rate
    assert re.search(r"compress \(tans8x16, blocks layout\): +\d+%\|.*\| [\d.]+[kM]?/22\.7M "
                     r"\[\d\d:\d\d<\d\d:\d\d, +[\d.]+[kM]? w/s\]", err), err[-800:]
    assert r.longest_silence() < SILENCE, r.chunks


def test_a_failing_context_row_names_the_input_not_its_temporary_container(stories, monkeypatch):
    from ansforge.analysis import table1
    from ansforge.model.coding import container
    from ansforge.model.errors import ConfigError

    def refuse(model, out, *args, **kwargs):
        raise ConfigError(f"{out}: tensor 'x' shape [0, 281474976710656] is not a list of at most 32 sizes")

    monkeypatch.setattr(container, "compress_checkpoint", refuse)
    with pytest.raises(ConfigError) as err:
        table1.context_task(str(stories), [MATRIX], "bf16", "rans16")
    assert str(err.value).startswith(f"{stories}: tensor 'x' shape") and "context.ansf" not in str(err.value)


# --------------------------------------------------------------------------------------------------
# resources: its first line at once, a line per tool run; interrupted, nothing left behind


def test_resources_says_what_it_does_at_once_and_leaves_nothing_when_interrupted(tmp_path, on_a_terminal):
    temp = tmp_path / "tmp"
    temp.mkdir()
    # (a cache of its own: a synthesis kept by another test would leave nothing to interrupt)
    r = on_a_terminal("resources", "--core", "tans-decoder", "--no-fmax", cwd=tmp_path,
                      env={"TMPDIR": str(temp), "ANSFORGE_CACHE": str(tmp_path / "cache")},
                      until="yosys synth_xilinx -family xcup -nowidelut: 00:02")
    err = r.stderr
    first = next(t for t, c in r.chunks if b"\xc2\xbb" in c)   # the first "»" line
    # Within a second on a quiet machine (0.3 s measured); the bound leaves room for a loaded CI runner.
    assert first < 3, (first, err[:300])
    assert err.startswith("» tans-decoder (tans8x16): the core's Verilog, then 3 yosys synth_xilinx runs"), err[:300]
    assert "tans-decoder: yosys synth_xilinx -family xcup -nowidelut: 00:0" in err
    assert r.longest_silence() < SILENCE, r.chunks
    # Ctrl-C: 130 and one line, no temporary folder of yosys left (nor anything else).
    assert r.status == 130, (r.status, err[-500:])
    assert list(temp.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def test_resources_is_silent_off_a_terminal_until_its_report(monkeypatch, capfd):
    """Off a terminal the steps print nothing (the tool runs are replaced: only the progress is checked)."""
    from ansforge.analysis import area

    monkeypatch.setattr(area, "_yosys", lambda verilog, extra, timeout=None, label="": (
        "   10 LUT6\n    4 FDRE\n", "length=3"))
    a = area.core_area("tans-decoder", ecp5=False, widelut=False)
    assert a.luts == 10 and a.levels == 3
    out, err = capfd.readouterr()
    assert out == "" and err == ""


# --------------------------------------------------------------------------------------------------
# the take-home testbench: a line every 10 % of its outputs


def test_the_testbench_says_how_far_it_is_every_tenth_of_its_outputs(stories, tmp_path):
    from ansforge.cli import main

    out = tmp_path / "tb"
    assert main(["testbench", "--core", "tans-decoder", "--model", str(stories), "--matrix", MATRIX, "-o", str(out)]) == 0
    r = subprocess.run(["sh", "run_iverilog.sh"], cwd=out, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout[-1000:], r.stderr[-1000:])
    lines = r.stdout.splitlines()
    steps = [re.fullmatch(r"progress: (\d+) of 2048 outputs \((\d+)%\), cycle (\d+)", ln) for ln in lines[:-1]]
    assert all(steps) and [int(m.group(2)) for m in steps] == list(range(10, 100, 10)), lines
    counts = [int(m.group(1)) for m in steps]
    assert counts == [205 * k for k in range(1, 10)]
    cycles = [int(m.group(3)) for m in steps]
    assert cycles == sorted(cycles) and lines[-1].startswith("PASS: 2048 outputs bit-exact")


# --------------------------------------------------------------------------------------------------
# demo, then simulate: one Verilator build


class _Built(Exception):
    pass


def _demo_and_simulate_cores(stories, monkeypatch):
    """The cores ``demo`` and ``simulate --model stories260K`` run, by core kind (each caught at its
    first run: nothing is simulated)."""
    from ansforge.analysis.demo import DEMO_CORES
    from ansforge.analysis.histograms import embedded_histograms
    from ansforge.sim import model_run

    class Catch:
        def run(self, job, **kw):
            built.setdefault(job.kind, []).append(job.core)
            raise _Built

    built: dict[str, list] = {}
    monkeypatch.setattr(model_run, "engine_by_name", lambda name: Catch())
    models = embedded_histograms()
    for kind, codec in DEMO_CORES:
        bigs = [max(m["matrices"], key=lambda x: sum(int(c) for c in x["exponent_counts"].values())) for m in models]
        demo = [model_run.histogram_pairs(big, codec, 64, j) for j, big in enumerate(bigs)]
        mine = model_run.model_pairs(str(stories), codec)
        for mats in (demo, mine):
            with pytest.raises(_Built):
                model_run.simulate_matrices(kind, codec, mats, engine="verilator")
    return built


def test_simulate_builds_the_verilog_demo_built(stories, monkeypatch):
    from ansforge.hdl.verilog import core_verilog

    built = _demo_and_simulate_cores(stories, monkeypatch)
    assert sorted(built) == ["rans-decoder", "tans-decoder"]
    texts = {kind: [core_verilog(core) for core in cores] for kind, cores in built.items()}
    assert all(demo == mine for demo, mine in texts.values()), [k for k, (d, m) in texts.items() if d != m]


def test_an_equal_design_is_not_compiled_again(monkeypatch, tmp_path, capfd):
    """The Verilator cache is keyed by the Verilog and the harness: a second engine (a second command)
    given a core with the same Verilog finds the first one's build, compiles nothing and says so."""
    from ansforge.model import progress
    from ansforge.model.coding.codecs import parse_codec
    from ansforge.sim import verilator
    from ansforge.sim.jobs import build_core

    monkeypatch.setattr(verilator, "verilator_available", lambda: True)
    monkeypatch.setattr(progress, "enabled", lambda: True)      # as on a terminal
    compiled = []

    def compile_(self, core, d, v, cpp):
        compiled.append(d.name)
        (d / "obj_dir").mkdir(parents=True)
        (d / "obj_dir" / "Vtop").write_text("built")

    monkeypatch.setattr(verilator.VerilatorEngine, "_compile", compile_)
    spec = parse_codec("tans8")
    a = verilator.VerilatorEngine(cache_dir=tmp_path).build(build_core("tans-decoder", spec, programmable=True,
                                                                      max_extra_bits=16))
    core = build_core("tans-decoder", spec, programmable=True, max_extra_bits=16)
    b = verilator.VerilatorEngine(cache_dir=tmp_path).build(core)
    assert a == b and len(compiled) == 1
    assert capfd.readouterr().err.splitlines() == [f"» verilator: {type(core).__name__} as built before (cache {a.parent.parent})"]
