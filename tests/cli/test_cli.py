"""The command line: help on every verb, outputs, and one-line errors (exit 2) for bad input."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from ansforge.cli import build_parser
from ..support import ansforge, one_line_error

README = Path(__file__).resolve().parents[2] / "README.md"




def _verbs(parser=None, prefix=()):
    """Every verb and sub-verb of the parser (``figure histogram``, ...), read from argparse itself."""
    parser = parser or build_parser()
    out = [list(prefix)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _verbs(sub, (*prefix, name))
    return out


VERBS = _verbs()


def test_the_verb_list_is_read_from_the_parser():
    assert len([v for v in VERBS if len(v) == 1]) >= 17
    assert ["figure", "quant-histogram"] in VERBS and ["resources"] in VERBS and ["generate"] in VERBS


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: " ".join(v) or "ansforge")
def test_every_verb_has_help(verb):
    r = ansforge(*verb, "--help")
    assert r.returncode == 0 and r.stdout.startswith(f"usage: {' '.join(['ansforge', *verb])}"), r.stderr
    assert "--help" in r.stdout and not r.stderr
    if verb:   # README's table of verbs names every one
        assert f"`ansforge {' '.join(verb)}" in README.read_text(), verb


@pytest.mark.parametrize("verb", VERBS[1:], ids=lambda v: " ".join(v))
def test_every_option_is_explained(verb):
    parser = build_parser()
    for word in verb:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    assert parser.description, verb
    bare = [a.option_strings or a.dest for a in parser._actions
            if a.help is None and not isinstance(a, argparse._SubParsersAction)]
    assert not bare, (verb, bare)


def test_demo_runs_with_no_arguments(on_a_terminal):
    r = on_a_terminal("demo")
    t_first, out, err, rc = r.first_line_seconds, r.stdout, r.stderr, r.status
    assert rc == 0, err
    # The title comes before any import or computation (within a second on a quiet machine; the bound
    # leaves room for a loaded CI runner), then the report line by line.
    assert out.startswith("ansforge demo: lossless coding-pair compression") and t_first < 5, t_first
    assert "10.6125" in out and "10.6140" in out
    assert "tANS 8 bits: +0.0273% vs Ideal (estimate from histograms)" in out
    assert "LOSSY" not in out
    assert "the fp32 checkpoint was rounded to bf16 before coding (round-to-nearest-even, 259,327 values" in out
    # The cores: a tANS and an rANS decoder in Verilator, bit-exact, at ~1 pair per clock.
    assert "cycle-accurate (verilator engine): 65,536 bf16 pairs" in out and "2 models, 131,072 pairs per core" in out
    cores = [line for line in out.splitlines() if "bit-exact with the golden model" in line]
    assert [line.split()[0] for line in cores] == ["tans-decoder", "rans-decoder"]
    for line in cores:
        assert "131,072 pairs" in line and line.split("bit-exact with the golden model: ")[1].startswith("yes")
        assert float(line.split(" pairs/clock")[0].split()[-1]) >= 0.99
    # On the terminal: what each step does, and a bar per core (tqdm's "|" bar and its matrix count).
    assert "» Table 1 estimates for stories260K" in err and "» rans-decoder (rans16)" in err
    assert "tans-decoder tans8:" in err and "matrix" in err


@pytest.mark.parametrize("json_out", [False, True])
def test_simulate_shows_a_bar_on_a_terminal_unless_json(stories, tmp_path, json_out, on_a_terminal):
    args = ["simulate", "--core", "tans-decoder", "--model", stories, "--engine", "amaranth", "--limit", "40",
            "--matrix", "layers.0.attention.wq.weight", "--matrix", "layers.0.attention.wk.weight"]
    r = on_a_terminal(*args, *(["--json", tmp_path / "r.json"] if json_out else []))
    out, err, rc = r.stdout, r.stderr, r.status
    assert rc == 0 and "bit-exact against the golden model: yes" in out, err
    if json_out:
        assert err == "" and json.loads((tmp_path / "r.json").read_text())
    else:
        assert "tans-decoder (amaranth)" in err and "2/2" in err and "matrix" in err, err


def test_simulate_under_back_pressure_reports_pairs_per_ready_cycle(stories, tmp_path):
    """Issue 42 item 1: with --stall-prob, the clocks in which o was ready and the pairs per such
    clock, beside the pairs per cycle (which the testbench's gaps lower); the JSON has the same count."""
    r = ansforge("simulate", "--core", "tans-decoder", "--model", stories, "--matrix", "layers.0.attention.wq.weight",
                 "--stall-prob", "0.25", "--seed", "2", "--json", tmp_path / "r.json")
    assert r.returncode == 0 and "bit-exact against the golden model: yes" in r.stdout, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["pairs"] <= rep["ready_cycles"] < rep["cycles"], rep
    assert (f"o was ready in {rep['ready_cycles']:,} of the cycles, "
            f"{rep['pairs'] / rep['ready_cycles']:.4f} pairs per ready cycle") in r.stdout, r.stdout


def test_demo_is_quiet_off_a_terminal():
    r = ansforge("demo", "--no-cores")
    assert r.returncode == 0 and r.stderr == "" and "Table 1: all-MiniLM-L6-v2" in r.stdout


def test_demo_with_a_llama_ends_with_a_hardware_generation(stories):
    r = ansforge("demo", "--model", stories, "--engine", "verilator")
    assert r.returncode == 0, r.stderr
    tail = r.stdout.split("Generation from hardware-decompressed weights (16 greedy steps):")[1]
    assert "tans-decoder core (tans8) in verilator, 260,032 pairs" in tail
    assert "logits identical to the raw checkpoint's at all 16 steps: yes" in tail
    assert len(tail.split("output: ")[1].splitlines()[0].split()) == 16


def test_demo_cores_in_the_amaranth_simulator():
    r = ansforge("demo", "--engine", "amaranth")
    assert r.returncode == 0, r.stderr
    assert "cycle-accurate (amaranth engine)" in r.stdout
    assert r.stdout.count("bit-exact with the golden model: yes") == 2


def test_tables_json_markdown_and_no_overwrite(stories, tmp_path):
    js, md = tmp_path / "t.json", tmp_path / "t.md"
    r = ansforge("tables", "--model", stories, "--json", js, "--markdown", md, "--per-matrix", "--general", "gzip,bzip2")
    assert r.returncode == 0, r.stderr
    doc = json.loads(js.read_text())
    assert set(doc) >= {"model", "weights", "matrices", "rows", "per_matrix"}
    assert doc["weights"] == 259_328 and doc["matrices"] == 36 and len(doc["per_matrix"]) == 36
    methods = [row["method"] for row in doc["rows"]]
    assert methods == ["Original", "Simple", "Ideal", "rANS 16 bits", "tANS 8 bits", "Context (rANS 16 bits, container)",
                       "rANS 24 bits (constriction)",
                       "Huffman per tensor (DFloat11-style)", "Huffman per layer (DFloat11-style)", "Gzip -9", "Bzip2 -9"]
    for row in doc["rows"]:
        assert set(row) >= {"method", "bytes", "percent_of_original", "bits_per_weight", "code_bits"}
    assert {"name", "unique_exponents", "entropy", "bits_per_weight"} <= set(doc["per_matrix"][0])
    assert "| Ideal |" in md.read_text()
    assert "layers.4.feed_forward.w3.weight" in r.stdout
    before = js.read_bytes()
    r = ansforge("tables", "--model", stories, "--json", js)
    assert r.returncode == 2 and "file exists" in r.stderr and js.read_bytes() == before


def test_figure_histogram_writes_a_png(stories, tmp_path):
    out = tmp_path / "fig1.png"
    r = ansforge("figure", "histogram", "--model", stories, "--matrix", "layers.0.attention.wq.weight", "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_histograms_feed_the_demo(stories, tmp_path):
    out = tmp_path / "h.json"
    assert ansforge("histograms", "--model", stories, "-o", out).returncode == 0
    r = ansforge("demo", "--histograms", out)
    assert r.returncode == 0 and "10.6125" in r.stdout


def test_histograms_force_replaces_an_existing_file(stories, tmp_path):
    # `histograms` takes --model repeatedly (a list): --force over an existing file once crashed (TypeError).
    out = tmp_path / "h.json"
    out.write_text("old\n")
    r = ansforge("histograms", "--model", stories, "-o", out, "--force")
    assert r.returncode == 0 and r.stdout.startswith(f"wrote {out}: 36 matrices"), r.stderr
    doc = json.loads(out.read_text())
    assert doc["format"] == "ansforge-exponent-histograms" and doc["models"][0]["name"] == "stories260K"
    # Every --model stays protected, --force or not.
    small = tmp_path / "small.safetensors"
    save_file({"layer.weight": np.ones((4, 4), np.float32)}, str(small))
    before = small.read_bytes()
    one_line_error(ansforge("histograms", "--model", stories, "--model", small, "-o", small, "--force"),
                    "small.safetensors", "refusing to overwrite the input file")
    assert small.read_bytes() == before




def test_missing_file(tmp_path):
    one_line_error(ansforge("tables", "--model", tmp_path / "nope.bin"), "nope.bin", "no such file")


def test_truncated_header(stories, tmp_path):
    bad = tmp_path / "trunc.bin"
    bad.write_bytes(stories.read_bytes()[:10])
    one_line_error(ansforge("tables", "--model", bad), "trunc.bin", "truncated llama2.c header")


def test_llama2c_header_disagrees_with_file_length(stories, tmp_path):
    bad = tmp_path / "short.bin"
    bad.write_bytes(stories.read_bytes()[:-4])
    one_line_error(ansforge("tables", "--model", bad), "short.bin", "dim=64", "implies")


def test_gguf_with_q4_0_tensors(tmp_path):
    path = tmp_path / "q4.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("norm.weight", np.ones(32, np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((2, 18), np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    one_line_error(ansforge("tables", "--model", path), "q4.gguf", "blk.0.attn_q.weight", "Q4_0")


def test_safetensors_with_an_int32_tensor(tmp_path):
    path = tmp_path / "int.safetensors"
    save_file({"layer.weight": np.zeros((4, 4), np.int32)}, str(path))
    one_line_error(ansforge("tables", "--model", path), "int.safetensors", "layer.weight", "I32")


def test_corrupt_safetensors_header(tmp_path):
    path = tmp_path / "junk.safetensors"
    path.write_bytes((64).to_bytes(8, "little") + b"{" + b"x" * 20)
    one_line_error(ansforge("tables", "--model", path), "junk.safetensors")


def test_impossible_options(stories):
    one_line_error(ansforge("tables", "--model", stories, "--general", "rar"), "rar")
    one_line_error(ansforge("tables", "--model", stories, "--jobs", "0"), "--jobs")


_BLAS_PROBE = ("import os, sys; from ansforge.cli import main; main(sys.argv[1:]); "
               "print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules, file=sys.stderr)")


def test_blas_runs_on_one_thread_except_for_the_verbs_that_multiply_a_llamas_matrices(tmp_path):
    """OpenBLAS starts a spinning thread per core when NumPy loads; only a verb that runs a llama keeps it,
    and a value the user set is theirs."""
    import os
    import subprocess
    import sys
    from ansforge.cli.common import REGISTRY
    build_parser()
    assert {v.name for v in REGISTRY if v.blas} == {"generate", "activations", "quant-table", "types"}
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def probe(*argv, **extra):
        r = subprocess.run([sys.executable, "-c", _BLAS_PROBE, *argv], capture_output=True, text=True,
                           env={**env, **extra}, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stderr.strip().splitlines()[-1]
    assert probe("codecs", "--json", str(tmp_path / "a.json")) == "1 True"
    assert probe("codecs", "--json", str(tmp_path / "b.json"), OPENBLAS_NUM_THREADS="3") == "3 True"
    assert probe("generate", "--model", str(tmp_path / "missing.bin")).startswith("None ")
