"""Issue 48, deliverables 2, 3 and 6: the command line's surface.

* **Checks before work.** Every output path of every verb that writes (a file that exists, a folder
  where a file is expected or the reverse, the input itself, a folder that does not exist) and every
  option the chosen mode does not use is refused in one line before the model is read; argparse's own
  errors are one line too.
* **Atomic outputs.** A failure or an interrupt in the middle of writing a file or a folder leaves
  nothing new behind and what the user had intact (the ``mistake`` harness checks both for every case).
* **One surface.** ``--json F`` on every verb that reports figures or writes a file; one name per
  concept (``--threads``, ``--quiet``, ``--vcd DIR``, ``--fraction``) with the old spellings still
  working; every hardware verb takes both spellings of an interleaved core.

Every case runs in this process (``ansforge.cli.main``) on stories260K, so the whole file takes
seconds: the mistakes stop before any work.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ansforge.cli import build_parser, main
from ansforge.cli.common import given

TOKENIZER = Path(__file__).resolve().parents[3].parent / "shared" / "models" / "tokenizer.bin"
MATRIX = "layers.0.attention.wq.weight"


@pytest.fixture(scope="session")
def container(stories, tmp_path_factory) -> Path:
    """stories260K compressed once (tans8), copied into each case's folder as ``s.ansf``."""
    from ansforge.model.coding.container import compress_checkpoint

    out = tmp_path_factory.mktemp("container") / "s.ansf"
    compress_checkpoint(stories, out, "tans8")
    return out


@pytest.fixture
def files(workdir, stories, container) -> Path:
    """The case's folder: the model ``m.bin``, the container ``s.ansf``, earlier outputs the user keeps
    (``old.*``), a plain file ``f.txt``, an empty folder ``sub`` and a non-empty one ``full``."""
    shutil.copy(stories, workdir / "m.bin")
    shutil.copy(container, workdir / "s.ansf")
    for name in ("old.json", "old.md", "old.png", "old.ansf", "old.v", "f.txt"):
        (workdir / name).write_text(f"the user's {name}\n")
    (workdir / "sub").mkdir()
    (workdir / "full").mkdir()
    (workdir / "full" / "keep.txt").write_text("the user's file\n")
    return workdir


# --------------------------------------------------------------------------------------------------
# 1. every output path is checked before any work, with the right diagnosis

OUTPUTS = {
    # verb writing a file, each way of getting its path wrong
    "tables json = input": (("tables", "--model", "m.bin", "--json", "m.bin"), ("m.bin", "input file")),
    "tables json = input, --force": (("tables", "--model", "m.bin", "--json", "m.bin", "--force"),
                                     ("m.bin", "input file")),
    "tables markdown exists": (("tables", "--model", "m.bin", "--markdown", "old.md"), ("old.md", "exists", "--force")),
    "tables json is a folder": (("tables", "--model", "m.bin", "--json", "sub", "--force"), ("sub", "is a directory")),
    "tables json in a missing folder": (("tables", "--model", "m.bin", "--json", "nope/t.json"),
                                        ("nope", "no such directory")),
    "tables two outputs one path": (("tables", "--model", "m.bin", "--json", "t.out", "--markdown", "t.out"),
                                    ("t.out", "--json", "--markdown")),
    "simulate json = input": (("simulate", "--core", "tans-decoder", "--model", "m.bin", "--json", "m.bin"),
                              ("m.bin", "input file")),
    "simulate vcd is a file": (("simulate", "--core", "tans-decoder", "--model", "m.bin", "--engine", "amaranth",
                                "--vcd", "f.txt"), ("f.txt", "not a directory")),
    "histograms -o = input": (("histograms", "--model", "m.bin", "-o", "m.bin"), ("m.bin", "input file")),
    "histograms -o = second input, --force": (("histograms", "--model", "s.ansf", "--model", "m.bin", "-o", "m.bin",
                                               "--force"), ("m.bin", "input file")),
    "compress -o exists": (("compress", "--model", "m.bin", "-o", "old.ansf"), ("old.ansf", "exists", "--force")),
    "compress -o is a folder, --force": (("compress", "--model", "m.bin", "-o", "sub", "--force"),
                                         ("sub", "is a directory")),
    "compress -o = input": (("compress", "--model", "m.bin", "-o", "m.bin", "--force"), ("m.bin", "input file")),
    "compress json exists": (("compress", "--model", "m.bin", "-o", "new.ansf", "--json", "old.json"),
                             ("old.json", "exists")),
    "decompress -o = container": (("decompress", "s.ansf", "-o", "s.ansf", "--force"), ("s.ansf", "input file")),
    "quantize -o in a missing folder": (("quantize", "--model", "m.bin", "--to", "e4m3", "-o", "nope/q.safetensors"),
                                        ("nope", "no such directory")),
    "verilog -o folder, --force": (("verilog", "--core", "tans-decoder", "-o", "sub", "--force"),
                                   ("sub", "is a directory")),
    "verilog -o below a file": (("verilog", "--core", "tans-decoder", "-o", "f.txt/x.v"), ("f.txt", "not a directory")),
    "verilog -o exists": (("verilog", "--core", "tans-decoder", "-o", "old.v"), ("old.v", "exists", "--force")),
    "testbench -o is a file, --force": (("testbench", "--core", "tans-decoder", "--model", "m.bin", "-o", "f.txt",
                                         "--force"), ("f.txt", "is a file, not a directory")),
    "testbench -o = input, --force": (("testbench", "--core", "tans-decoder", "--model", "m.bin", "-o", "m.bin",
                                       "--force"), ("m.bin", "not a directory")),
    "testbench -o not empty": (("testbench", "--core", "tans-decoder", "--model", "m.bin", "-o", "full"),
                               ("full", "not an empty directory", "--force")),
    "testbench -o in a missing folder": (("testbench", "--core", "tans-decoder", "--model", "m.bin", "-o", "a/b"),
                                         ("a", "no such directory")),
    "figure -o folder": (("figure", "histogram", "--model", "m.bin", "-o", "sub"), ("sub", "is a directory")),
    "factory plot exists": (("factory", "--plot", "old.png"), ("old.png", "exists")),
    "prove vcd missing": (("prove", "--all", "--vcd", "nope"), ("nope", "no such directory", "--vcd")),
    "inspect json = container": (("inspect", "s.ansf", "--json", "s.ansf", "--force"), ("s.ansf", "input file")),
    "generate json = input": (("generate", "--model", "m.bin", "--json", "m.bin"), ("m.bin", "input file")),
    "bench -o folder": (("bench", "-o", "sub", "--only", "table1"), ("sub", "is a directory")),
    "quant-table plot = input": (("quant-table", "--model", "m.bin", "--plot", "m.bin"), ("m.bin", "input file")),
}


@pytest.mark.parametrize("case", OUTPUTS, ids=list(OUTPUTS))
def test_an_output_path_is_checked_before_any_work(files, mistake, monkeypatch, case):
    # Any reading of the model would be work done before the check: make it impossible.
    import ansforge.model.llm.checkpoint as checkpoint

    def no_reading(*a, **k):
        raise AssertionError("the model was opened before the outputs were checked")

    monkeypatch.setattr(checkpoint, "open_checkpoint", no_reading)
    args, names = OUTPUTS[case]
    mistake(*args, names=names)


# --------------------------------------------------------------------------------------------------
# 2. an option the chosen mode does not use is refused (one line, naming it), before any work

REFUSED = {
    "inspect --range without --tensor": (("inspect", "s.ansf", "--range", "0:3"), ("--range", "--tensor")),
    "verilog core --lanes": (("verilog", "--core", "tans-decoder", "--lanes", "0", "-o", "x.v"), ("--lanes", "subsystem")),
    "verilog subsystem --no-shell": (("verilog", "--top", "subsystem", "--no-shell", "-o", "x.v"), ("--no-shell",)),
    "resources core --bus-bits": (("resources", "--core", "rans-decoder", "--bus-bits", "64"), ("--bus-bits",)),
    "testbench core --target": (("testbench", "--core", "tans-decoder", "--model", "m.bin", "--target", "fp32",
                                 "-o", "tb"), ("--target",)),
    "compress --context-sets alone": (("compress", "--model", "m.bin", "--context-sets", "8", "-o", "c.ansf"),
                                      ("--context-sets", "--context")),
    "context --folds without --floor": (("context", "--model", "m.bin", "--folds", "1"), ("--folds", "--floor")),
    "context --floor --codec": (("context", "--model", "m.bin", "--floor", "--codec", "rans16"), ("--codec",)),
    "demo --no-cores --engine": (("demo", "--no-cores", "--engine", "amaranth"), ("--engine",)),
    "demo --model --histograms": (("demo", "--model", "m.bin", "--histograms", "h.json"), ("--histograms",)),
    "generate raw --codec": (("generate", "--model", "m.bin", "--codec", "rans16"), ("--codec", "raw")),
    "generate greedy --topp": (("generate", "--model", "m.bin", "--temperature", "0", "--topp", "0.5"), ("--topp",)),
    "factory --codec without --model": (("factory", "--codec", "rans16"), ("--codec", "--model")),
    "simulate --seed without stalls": (("simulate", "--core", "tans-decoder", "--model", "m.bin", "--seed", "3"),
                                       ("--seed", "--stall-prob")),
    "simulate container --limit": (("simulate", "--core", "tans-decoder", "--container", "s.ansf", "--limit", "4"),
                                   ("--limit", "--container")),
    "prove --all --codec": (("prove", "--all", "--codec", "rans16x5"), ("--codec",)),
    "tables --dask --threads": (("tables", "--model", "m.bin", "--dask", "tcp://127.0.0.1:1", "--threads", "2"),
                                ("--threads", "--dask")),
    "bench --skip-7b --layers": (("bench", "--skip-7b", "--layers", "2", "-o", "b.md"), ("--layers",)),
    "bench --fpga-lanes without fpga": (("bench", "--only", "table1", "--fpga-lanes", "2", "-o", "b.md"),
                                        ("--fpga-lanes", "fpga")),
    "bench --fpga-lanes 0": (("bench", "--only", "fpga", "--fpga-lanes", "1,0", "-o", "b.md"), ("--fpga-lanes", "1,0")),
    "bench --fpga-lanes x": (("bench", "--only", "fpga", "--fpga-lanes", "two", "-o", "b.md"), ("--fpga-lanes", "two")),
    "resources --nexus of a core": (("resources", "--core", "tans-decoder", "--nexus"), ("--nexus", "subsystem")),
    # values checked before the work, named as the user spelled them
    "tables --jobs 0 (old spelling)": (("tables", "--model", "m.bin", "--jobs", "0"), ("--jobs",)),
    "tables unknown --codecs": (("tables", "--model", "m.bin", "--codecs", "zip9"), ("zip9",)),
    "outliers --top 0 (old spelling)": (("outliers", "--model", "m.bin", "--top", "0"), ("--top",)),
    "outliers --fraction 2": (("outliers", "--model", "m.bin", "--fraction", "2"), ("--fraction",)),
    "core spellings disagree": (("simulate", "--core", "rans-decoder-x5", "--codec", "rans16", "--model", "m.bin"),
                                ("rans-decoder-x5", "rans16", "5")),
    "prove --codec of no build": (("prove", "--core", "tans-decoder", "--codec", "tans8x3"), ("tans8x3",)),
    "inspect missing tensor": (("inspect", "s.ansf", "--tensor", "nope"), ("nope",)),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_an_option_the_mode_does_not_use_is_refused(files, mistake, case):
    args, names = REFUSED[case]
    outcome = mistake(*args, names=names)
    assert outcome.stdout == ""          # nothing printed before the refusal (inspect's listing included)


def test_a_tokenizer_that_does_not_match_says_where_the_right_one_comes_from(files, mistake):
    shutil.copy(TOKENIZER, files / "tokenizer32k.bin")
    line = mistake("generate", "--model", "m.bin", "--tokenizer", "tokenizer32k.bin", "--steps", "2",
                   names=("tokenizer32k.bin", "32000", "512")).line
    assert "tok512.bin" in line and "llama2.c" in line and "tokenizer.py" in line


# --------------------------------------------------------------------------------------------------
# 3. argparse's own errors: one line, status 2

PARSER = {
    "negative --range": (("inspect", "s.ansf", "--range", "-1:3"), ("--range",)),
    "bad choice": (("simulate", "--core", "nope", "--model", "m.bin"), ("--core", "nope")),
    "missing required": (("compress", "-o", "x.ansf"), ("--model",)),
    "unknown option": (("inspect", "s.ansf", "--bogus"), ("--bogus",)),
    "not an integer": (("tables", "--model", "m.bin", "--threads", "two"), ("--threads", "two")),
    "exclusive options": (("prove", "--core", "tans-decoder", "--all"), ("--all", "--core")),
    "no verb": ((), ("VERB",)),
    "unknown verb": (("compres",), ("compres",)),
}


@pytest.mark.parametrize("case", PARSER, ids=list(PARSER))
def test_argparse_errors_are_one_line(files, mistake, case):
    args, names = PARSER[case]
    assert mistake(*args, names=names).line.startswith("ansforge: error: ")


def test_argparse_errors_are_one_line_in_a_child_process(files, mistake):
    mistake("inspect", "s.ansf", "--range", "-1:3", names=("--range",), process=True)


# --------------------------------------------------------------------------------------------------
# 4. a failure or an interrupt while writing leaves nothing behind, and what the user had intact


def _interrupt_after_writing(monkeypatch, module, name, exc):
    """Replace ``module.name`` (a writer taking an output path as its second argument, or a folder)
    by one that writes part of its output and then fails with ``exc``."""
    def writer(*args, **kwargs):
        out = Path(args[1])
        if out.suffix:
            out.write_bytes(b"partial")
        else:
            out.mkdir(parents=True, exist_ok=True)
            (out / "core.v").write_text("partial")
        raise exc
    monkeypatch.setattr(module, name, writer)


@pytest.mark.parametrize("exc,status", [(KeyboardInterrupt(), 130), (OSError(28, "No space left on device"), 2)],
                         ids=["interrupt", "disk full"])
@pytest.mark.parametrize("force", [False, True], ids=["new file", "over an old one"])
def test_compress_leaves_nothing_behind(files, mistake, monkeypatch, exc, status, force):
    import ansforge.model.coding.container as container

    _interrupt_after_writing(monkeypatch, container, "compress_checkpoint", exc)
    out = "old.ansf" if force else "new.ansf"
    mistake("compress", "--model", "m.bin", "-o", out, *(["--force"] if force else []), status=status)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")   # the interrupt comes before elaboration
@pytest.mark.parametrize("target", ["tb", "full"], ids=["new folder", "into a kept folder"])
def test_a_testbench_folder_is_staged(files, mistake, monkeypatch, target):
    import ansforge.sim.testbench as testbench

    _interrupt_after_writing(monkeypatch, testbench, "write_testbench", KeyboardInterrupt())
    line = mistake("testbench", "--core", "tans-decoder", "--model", "m.bin", "--matrix", MATRIX, "-o", target,
                   "--force", status=130).line
    assert line == "ansforge: interrupted"


def test_a_refused_container_writes_nothing(files, mistake):
    """A NaN found while coding (the output already begun) ends with the old file as it was."""
    from safetensors.numpy import save_file

    w = np.ones((8, 8), np.float32)
    w[5, 3] = np.nan
    save_file({"a.weight": np.ones((8, 8), np.float32), "layer.weight": w}, str(files / "nan.safetensors"))
    mistake("compress", "--model", "nan.safetensors", "-o", "old.ansf", "--force", names=("layer.weight",))


# --------------------------------------------------------------------------------------------------
# 5. one surface: --json on every verb that writes or reports, the old spellings still work

JSON = {
    "inspect": (("inspect", "s.ansf", "--tensor", MATRIX, "--range", "2:5"),
                lambda d: d["decoded"]["count"] == 5 and d["tensors"] == 49 and len(d["tensor_list"]) == 49),
    "compress": (("compress", "--model", "m.bin", "-o", "{out}/c.ansf"),
                 lambda d: d["tensors"] == 49 and d["pairs"] == 259_328 + 4_800 and d["bytes"] > 0),
    "decompress": (("decompress", "s.ansf", "-o", "{out}/d.safetensors"), lambda d: d["tensors"] == 49),
    "quantize": (("quantize", "--model", "m.bin", "--to", "e4m3", "-o", "{out}/q.safetensors"),
                 lambda d: d["quantized"] > 0 and d["to"] == "e4m3"),
    "generate": (("generate", "--model", "m.bin", "--steps", "3", "--temperature", "0", "--ids"),
                 lambda d: len(d["tokens"]) == 3 and d["text"].split() == [str(t) for t in d["tokens"]]),
    "verilog": (("verilog", "--core", "rans-decoder", "-o", "{out}/r.v"),
                lambda d: d["core"] == "rans-decoder" and d["codec"] == "rans16x16" and d["lines"] > 100),
    "testbench": (("testbench", "--core", "tans-decoder", "--model", "m.bin", "--matrix", MATRIX, "-o", "{out}/tb"),
                  lambda d: "tb.sv" in d["files"] and d["pairs"] == 4096 and d["matrix"] == MATRIX),
    "histograms": (("histograms", "--model", "m.bin", "-o", "{out}/h.json"),
                   lambda d: d["models"][0]["matrices"] == 36),
}


@pytest.mark.parametrize("verb", JSON, ids=list(JSON))
def test_json_of_what_was_written_or_reported(files, mistake, tmp_path, verb):
    out = tmp_path / "out"
    out.mkdir()
    args, check = JSON[verb]
    args = [a.format(out=out) for a in args]
    mistake(*args, "--json", out / "report.json", "--quiet", status=0)
    doc = json.loads((out / "report.json").read_text())
    assert check(doc), doc
    written = [p.name for p in out.iterdir()]
    assert not [n for n in written if n.startswith(".")], written      # no temporary left beside them


def _parse(*argv):
    return build_parser().parse_args(argv)


ALIASES = {
    "tables --jobs": (("tables", "--model", "m", "--jobs", "3"), "threads", 3),
    "tables --no-progress": (("tables", "--model", "m", "--no-progress"), "quiet", True),
    "demo --jobs": (("demo", "--model", "m", "--jobs", "2"), "threads", 2),
    "histograms --jobs": (("histograms", "--model", "m", "-o", "h", "--jobs", "2"), "threads", 2),
    "prove --jobs": (("prove", "--all", "--jobs", "2"), "threads", 2),
    "outliers --top": (("outliers", "--model", "m", "--top", "0.01"), "fraction", 0.01),
    "context --no-progress": (("context", "--model", "m", "--no-progress"), "quiet", True),
}


@pytest.mark.parametrize("case", ALIASES, ids=list(ALIASES))
def test_an_old_spelling_still_parses_and_is_hidden(case):
    argv, dest, value = ALIASES[case]
    args = _parse(*argv)
    old = next(a for a in argv if a.startswith("--") and a not in ("--model", "--all"))
    assert getattr(args, dest) == value and given(args, dest) == old
    parser = build_parser()
    for word in argv[:1]:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    assert old not in parser.format_help()          # hidden from --help, kept for one release
    new = {"threads": "--threads", "quiet": "--quiet", "fraction": "--fraction"}[dest]
    assert new in parser.format_help()


def test_old_spellings_run_end_to_end(files, mistake, tmp_path):
    """The aliases do what the new names do: ``outliers --top`` (and ``--no-progress``) gives the JSON
    that ``--fraction`` (and ``--quiet``) gives."""
    docs = []
    for frac, quiet in (("--top", "--no-progress"), ("--fraction", "--quiet")):
        out = tmp_path / f"o{frac}.json"
        mistake("outliers", "--model", "m.bin", frac, "0.01", "--json", out, quiet, status=0)
        docs.append(json.loads(out.read_text()))
    assert docs[0] == docs[1] and docs[0]


def test_simulate_vcd_takes_a_folder_and_the_old_file_name(files, mistake, tmp_path):
    base = ("simulate", "--core", "tans-decoder", "--model", "m.bin", "--engine", "amaranth", "--matrix", MATRIX,
            "--limit", "8")
    mistake(*base, "--vcd", tmp_path, status=0)
    mistake(*base, "--vcd", tmp_path / "old.vcd", status=0)            # F.vcd, one more release
    for name in ("tans-decoder.vcd", "old.vcd"):
        assert "$enddefinitions" in (tmp_path / name).read_text(), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.vcd", "tans-decoder.vcd", "work"]


def test_both_spellings_of_an_interleaved_core_are_the_same_core(files, mistake, tmp_path, monkeypatch):
    a, b = tmp_path / "a.v", tmp_path / "b.v"
    mistake("verilog", "--core", "tans-decoder-x2", "--no-shell", "-o", a, status=0)
    mistake("verilog", "--core", "tans-decoder", "--codec", "tans8x2", "--no-shell", "-o", b, status=0)
    assert a.read_text() == b.read_text() and "tans8x2" not in a.name
    # prove takes the other spelling too (its run replaced: only the core it would prove is checked)
    import ansforge.sim.formal as formal

    asked = []

    class Report:
        def format_text(self):
            return "ok"

        def to_json(self):
            return {}

        def ok(self):
            return True

    monkeypatch.setattr(formal, "prove", lambda cores, **kw: asked.append(tuple(cores)) or Report())
    mistake("prove", "--core", "rans-decoder", "--codec", "rans16x5", status=0)
    mistake("prove", "--core", "rans-decoder-x5", status=0)
    assert asked == [("rans-decoder-x5",), ("rans-decoder-x5",)]


def test_every_hardware_verb_takes_every_core_name():
    from ansforge.cli.cores import ALL_CORES
    from ansforge.hdl.cores import core_names, prove_names
    from ansforge.sim.formal import CORES

    assert ALL_CORES == core_names() and set(CORES) == set(prove_names()) <= set(ALL_CORES)
    for verb in ("simulate", "verilog", "testbench", "resources", "prove"):
        parser = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[verb]
        core = next(a for a in parser._actions if a.dest == "core")
        assert list(core.choices) == ALL_CORES, verb


def test_one_name_per_concept():
    """--threads for parallelism, --quiet everywhere, --vcd a folder, --top only a core/subsystem."""
    root = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))

    def leaves(sub, prefix=()):
        for name, p in sub.choices.items():
            inner = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            if inner:
                yield from leaves(inner[0], (*prefix, name))
            else:
                yield " ".join((*prefix, name)), p

    for name, p in leaves(root):
        shown = {o: a for a in p._actions if a.help != argparse.SUPPRESS for o in a.option_strings}
        assert "--quiet" in shown and "--jobs" not in shown and "--no-progress" not in shown, name
        if "--top" in shown:
            assert set(shown["--top"].choices) == {"core", "subsystem"}, name
        if "--vcd" in shown:
            assert shown["--vcd"].metavar == "DIR", name
        if "-o" in shown and name != "bench":     # (bench's report is BENCHMARKS.md itself)
            assert "--json" in shown, name      # every verb that writes a file says what it wrote
