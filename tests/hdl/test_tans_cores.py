"""The one-state tANS cores (issue 18): coder/shell split, the shell's area.

``build_core`` here is the core registry's: ``tans8`` builds ``hdl/tans/cores_xn.py``'s cores at N = 1
(the one-state coders of ``hdl/tans/decoder_one.py`` and ``encoder_one.py`` inside). Their bit-exactness
under back-pressure, back-to-back commands, table sets and the whole-model pairs-per-clock run
are tested for every N in ``tests/hdl/test_tans_xn.py`` (N = 1 among them); whole models in
``tests/hdl/test_whole_models.py``; the coders' area, levels and lint in ``tests/hdl/test_budgets.py``;
back-to-back commands and a reset that keeps a programmed table in ``tests/sim/test_contracts.py``.
"""

from __future__ import annotations

import pytest

from ansforge.analysis.area import synthesize
from ansforge.hdl.tans import TansDecoderCoder, TansEncoderCoder, TansXnDecoder
from ansforge.model.coding.codecs import parse_codec
from ansforge.sim.jobs import build_core
from ansforge.hdl.verilog import core_verilog


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
