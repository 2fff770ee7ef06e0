"""AXI4-Stream ports (hdl/axis.py): each core's generated Verilog, driven by cocotb on Icarus through
its AXI4-Stream ports with random TVALID/TREADY gaps, gives the golden model's output bit for bit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from cocotb_tools.check_results import get_results
from cocotb_tools.runner import get_runner

from ansforge.hdl.axis import AxisCore, axis_fields
from ansforge.model.coding.codecs import parse_codec
from ansforge.sim.jobs import make_job
from ansforge.sim.testbench import simulation_verilog

TESTS = Path(__file__).parent


def _vectors(job, stall_prob, seed):
    core = job.core
    members = core.signature.members
    w = job.core.signature.members["o"].signature.members["payload"].shape
    o_has_last = "data" in dict(w) if hasattr(w, "__iter__") else False

    def split(values, shape):
        fields = dict(shape) if hasattr(shape, "__iter__") else {}
        if "last" in fields:
            bits = fields["last"].offset
            return [[int(v) & ((1 << bits) - 1), int(v) >> bits] for v in values]
        return [[int(v), 0] for v in values]

    shape = {n: m.signature.members["payload"].shape for n, m in members.items() if m.is_signature}
    inputs = {n: split(job.cfg[n], shape[n]) for n in job.cfg}
    if "cmd" in members:
        inputs["cmd"] = split(job.commands, shape["cmd"])
    inputs["i"] = split(np.asarray(job.inputs, dtype=np.uint64).tolist(), shape["i"])
    if job.kind.startswith(("tans", "rans")):
        assert o_has_last == (not job.is_decoder)     # an ANS encoder's words carry last; pairs do not
    return {"inputs": inputs, "expected": split(np.asarray(job.expected, dtype=np.uint64).tolist(), shape["o"]),
            "statuses": list(job.expected_status) if job.is_decoder else [], "stall_prob": stall_prob,
            "seed": seed, "max_cycles": 20 * (sum(len(v) for v in inputs.values()) + len(job.expected)) + 1000}


def _interface_job(kind: str, rng):
    """A §4.3 interface core's job on bf16 weights: float -> pair or pair -> float, the tensor's own codes."""
    from ansforge.model.dtypes.interfaces import CodingPairFormat, FloatToPairTable, PairToFloatTable
    from ansforge.model.dtypes.pairs import BF16
    from ansforge.sim.interfaces import float_to_pair_job, pair_to_float_job

    bits = (rng.standard_normal(400).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    pairs = BF16.split(bits.view(np.uint16))
    fmt = CodingPairFormat.ieee("bf16", pairs.exponents)
    if kind == "float-to-pair":
        return float_to_pair_job(FloatToPairTable(fmt, "bf16"), bits)
    return pair_to_float_job(PairToFloatTable(fmt, "bf16"), pairs.codes, pairs.extra)


@pytest.mark.parametrize("kind", ["tans-decoder", "tans-encoder", "rans-decoder", "rans-encoder",
                                  "pair-to-float", "float-to-pair"])
def test_cocotb_axis_core_with_back_pressure(kind, tmp_path, monkeypatch):
    rng = np.random.default_rng(21)
    if kind.endswith("pair") or kind.startswith("pair"):
        job = _interface_job(kind, rng)
    else:
        spec = parse_codec("tans8" if kind.startswith("tans") else "rans16")
        counts = (rng.integers(1, 1000, size=12) ** 2).astype(np.int64)
        ct, table = spec.tables(counts, 8)
        n = 400
        s, e = ct.to_symbols(rng.choice(counts.size, size=n, p=counts / counts.sum()), rng.integers(0, 256, size=n))
        job = make_job(kind, spec, table, s, e, programmable=True)
    (tmp_path / "core.v").write_text(simulation_verilog(AxisCore(job.core), "axis_core"))
    (tmp_path / "vectors.json").write_text(json.dumps(_vectors(job, 0.25, 3)))
    runner = get_runner("icarus")
    runner.build(sources=[tmp_path / "core.v"], hdl_toplevel="axis_core", build_dir=tmp_path / "build",
                 timescale=("1ns", "1ps"))
    monkeypatch.syspath_prepend(str(TESTS))
    results = runner.test(test_module="cocotb_axis_bench", hdl_toplevel="axis_core", build_dir=tmp_path / "build",
                          test_dir=tmp_path, extra_env={"ANSFORGE_AXIS_VECTORS": str(tmp_path / "vectors.json"),
                                                        "PYTHONPATH": str(TESTS) + ":" + ":".join(sys.path)})
    tests, failures = get_results(results)
    assert tests == 1 and failures == 0, (tmp_path / "build").as_posix()


def test_axis_mapping_names_every_field():
    from ansforge.sim.jobs import build_core
    from ansforge.hdl.verilog import core_verilog

    dec = build_core("tans-decoder", parse_codec("tans8"), programmable=True)
    enc = build_core("tans-encoder", parse_codec("tans8"), programmable=True)
    assert axis_fields(dec, "o") == {"symbol": (0, 6), "extra": (6, 8)}
    assert axis_fields(dec, "i") == {"data": (0, 16)}             # the word's last is TLAST
    assert axis_fields(enc, "o") == {"data": (0, 16)}
    text = core_verilog(AxisCore(dec), "axis_core")
    for port in ("s_axis_i__tdata", "s_axis_i__tlast", "m_axis_o__tdata", "s_axis_cmd__tdata", "s_axis_cfg__tvalid"):
        assert port in text
    text = core_verilog(AxisCore(enc), "axis_core")
    for port in ("s_axis_i__tdata", "m_axis_o__tlast", "s_axis_sym_cfg__tdata", "s_axis_state_cfg__tready"):
        assert port in text
    with pytest.raises(TypeError, match="wiring.Component"):
        AxisCore(object())
