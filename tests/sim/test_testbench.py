"""The take-home testbench (``ansforge testbench``): it passes on the real matrix under Icarus and
Verilator with the same stall pattern, and fails, with a non-zero status, when one expected vector
is wrong. It drives the exported wrapper's named ports with the package's types (``hdl/export.py``;
the export itself is tested in ``test_export.py``)."""

from __future__ import annotations

import re
import subprocess

import pytest

from ansforge.cli import main

MATRIX = "layers.0.attention.wk.weight"     # stories260K's smallest counted matrix: 2,048 pairs


def _run(path, script):
    return subprocess.run(["sh", script], cwd=path, capture_output=True, text=True, timeout=600)


def _write(tmp_path, stories, core, seed=5):
    out = tmp_path / core
    assert main(["testbench", "--core", core, "--model", str(stories), "--matrix", MATRIX, "--seed", str(seed),
                 "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize("core", ["tans-decoder", "tans-encoder", "rans-decoder", "rans-encoder"])
def test_testbench_passes_under_icarus(core, stories, tmp_path):
    out = _write(tmp_path, stories, core)
    tb = (out / "tb.sv").read_text()
    pkg = re.search(r"^  import (ansforge_\w+_pkg)::\*;", tb, re.M)
    assert pkg and (out / f"{pkg.group(1)}.sv").exists()
    assert ".cmd_count(cmd_payload.count)" in tb and ".o_valid(o_valid)" in tb and "__" not in tb
    r = _run(out, "run_iverilog.sh")
    assert r.returncode == 0 and "PASS" in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])


def test_one_wrong_vector_fails_in_both_simulators_with_the_same_stalls(stories, tmp_path):
    out = _write(tmp_path, stories, "tans-decoder")
    icarus, verilator = _run(out, "run_iverilog.sh"), _run(out, "run_verilator.sh")
    assert icarus.returncode == 0 and verilator.returncode == 0, (icarus.stdout[-1000:], verilator.stderr[-2000:])
    cycles = [re.search(r"PASS: .* in (\d+) cycles", r.stdout).group(1) for r in (icarus, verilator)]
    assert cycles[0] == cycles[1]           # the testbench's own xorshift: one stall pattern everywhere
    lines = (out / "expected.hex").read_text().splitlines()
    lines[100] = format(int(lines[100], 16) ^ 1, f"0{len(lines[100])}x")
    (out / "expected.hex").write_text("\n".join(lines) + "\n")
    bad_icarus = _run(out, "run_iverilog.sh")
    bad_verilator = subprocess.run(["obj_dir/Vtb"], cwd=out, capture_output=True, text=True, timeout=600)
    for r in (bad_icarus, bad_verilator):
        assert r.returncode != 0 and "FAIL: output 100 " in r.stdout, (r.returncode, r.stdout[-1000:])


def test_testbench_refuses_a_non_empty_directory(stories, tmp_path, capsys):
    (tmp_path / "mine.txt").write_text("keep")
    assert main(["testbench", "--core", "tans-decoder", "--model", str(stories), "-o", str(tmp_path)]) == 2
    assert "not an empty directory" in capsys.readouterr().err
    assert (tmp_path / "mine.txt").read_text() == "keep"
