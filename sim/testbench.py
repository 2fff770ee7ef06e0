"""A self-checking Verilog testbench a designer takes home: the core's Verilog, its stimulus and its
expected response as ``$readmemh`` files, and a testbench that runs unchanged under Icarus Verilog
(``iverilog -g2012``), Verilator (``--binary``) or any IEEE 1800 simulator (xsim, Questa).

The testbench drives the same :class:`~.jobs.CoreJob` the two engines of this package run: the table
writes (``cfg`` streams) first, then the commands, one at a time, each after the previous one's
``done``, with the input streams alongside; it compares every output payload with the golden model's
and, for a decoder, every command's status. Valid and ready gaps come from a 32-bit xorshift
generator written in the testbench itself, so a seed gives the same stall pattern in every simulator.

It prints a ``progress:`` line every 10 % of the expected outputs (the count, the percentage and the
clock cycle: a long run under Icarus is seen to advance), then ``PASS`` and finishes with status 0, or
prints the first ``FAIL`` (output index, got, expected) and ends with ``$fatal`` (a non-zero status: 1
under Icarus, 134 under Verilator).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from amaranth.hdl import Shape

from amaranth.lib.wiring import In

from .jobs import CoreJob
from ..hdl.export import describe, identifier
from ..hdl.verilog import core_verilog

__all__ = ["TESTBENCH_FILES", "simulation_verilog", "exported_simulation_verilog", "write_testbench", "payload_ints"]

#: Files :func:`write_testbench` writes besides the ``.hex`` vectors and the package ``<module>_pkg.sv``.
TESTBENCH_FILES = ("core.v", "tb.sv", "run_iverilog.sh", "run_verilator.sh", "README.txt")


def _input_streams(core) -> tuple[list[str], list[str]]:
    """(table-write streams, side streams such as ``sel``) of ``core``, in signature order."""
    members = core.signature.members
    streams = [n for n, m in members.items() if m.is_signature and m.flow == In]
    cfg = [n for n in streams if n.endswith("cfg")]
    return cfg, [n for n in streams if n not in cfg and n not in ("cmd", "i")]


def _width(core, name: str) -> int:
    return Shape.cast(core.signature.members[name].signature.members["payload"].shape).width


def payload_ints(values) -> list[int]:
    """Payloads as Python integers, from a list, a 1-D array or rows of little-endian ``uint64`` words
    (the 2-D arrays that jobs with payloads wider than 64 bits carry)."""
    if isinstance(values, np.ndarray):
        if values.ndim == 2:
            return [sum(int(w) << (64 * j) for j, w in enumerate(row)) for row in values.tolist()]
        return [int(v) for v in values.tolist()]
    return [int(v) for v in values]


def _bits(payload, width: int) -> str:
    """A payload's range: ``CMD_WIDTH - 1:0`` from the package where it has a struct, else numeric."""
    return f"{payload.name.upper()}_WIDTH - 1:0" if payload is not None else f"{width - 1}:0"


def _hex(path: Path, values, width: int) -> None:
    digits = max(1, -(-width // 4))
    path.write_text("".join(f"{int(v):0{digits}x}\n" for v in values))


_TRIGGER = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$", re.M)


def _time_zero_events(verilog: str) -> str:
    """Yosys's Verilog runs its ``always @*`` blocks once at time 0 through a dummy register that they
    all read; Icarus does not count that register's initializer as a change, so a block that reads only
    flip-flops holding their initial value (an FSM's decoded outputs, such as ``cfg.ready``) would stay
    ``x`` (IEEE 1800 runs declaration initializers before time 0, without an event). Each such
    register gets a simulation-only toggle at 1 ns (synthesis ignores ``initial``; the file gets the
    testbench's timescale so that 1 ns is before the first clock edge at 5 ns)."""
    body = _TRIGGER.sub(lambda m: f"{m.group(0)}\n{m.group(1)}initial #1 {m.group(2)} = 1'h1;", verilog)
    return "`timescale 1ns/1ps\n" + body


def simulation_verilog(core, name: str = "top") -> str:
    """``core``'s Verilog for an event-driven simulator (Icarus, xsim, Questa, cocotb on them): the
    Verilog :func:`~ansforge.hdl.verilog.core_verilog` gives, with a ``1ns/1ps`` timescale and the time-zero toggle
    described in :func:`_time_zero_events` (simulation-only; synthesis sees the same design)."""
    return _time_zero_events(core_verilog(core, name))


def exported_simulation_verilog(component, module: str | None = None) -> tuple[str, str]:
    """``component`` as ``ansforge verilog`` exports it (:mod:`~ansforge.hdl.export`: module ``module``, by
    default :func:`~ansforge.hdl.export.default_name`, with ports named per field around
    ``<module>_core``), for an event-driven simulator as :func:`simulation_verilog`: (module, Verilog)."""
    export = describe(component, module)
    return export.name, _simulation_text(export)


def _simulation_text(export) -> str:
    core_text = export.core_verilog()
    return _time_zero_events(export.wrapper_verilog(core_text) + "\n" + core_text)


def write_testbench(job: CoreJob, out_dir: str | Path, *, stall_prob: float = 0.2, seed: int = 1,
                    module: str | None = None, max_cycles: int | None = None) -> list[Path]:
    """Write ``job`` as a self-checking testbench into ``out_dir`` (created; existing files replaced).

    Parameters
    ----------
    job : CoreJob
        Its core, table writes, commands, inputs and expected outputs and statuses. ``core.v`` holds the
        core as ``ansforge verilog`` exports it (:mod:`~ansforge.hdl.export`): module ``module`` (default
        :func:`~ansforge.hdl.export.default_name`) with ports named per field around ``<module>_core``;
        ``<module>_pkg.sv`` is its package, which ``tb.sv`` imports for the payloads' types, widths and
        field offsets.
    stall_prob : float
        Probability, per stream and clock, of a gap in ``valid`` (inputs) or ``ready`` (outputs), in
        ``[0, 1)``; quantized to 1/256.
    seed : int
        Seed of the testbench's xorshift generator (1 .. 2**32 - 1).
    max_cycles : int, optional
        Watchdog: the testbench fails if it has not finished after this many clocks (default: a bound
        from the job's sizes and ``stall_prob``).

    Returns the files written.
    """
    if not 0 <= stall_prob < 1:
        raise ValueError(f"stall_prob must be in [0, 1), not {stall_prob!r}")
    if not 0 < seed < 2 ** 32:
        raise ValueError(f"seed must be in 1 .. 2**32 - 1, not {seed!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    core = job.core
    members = core.signature.members
    cfg_names, side_names = _input_streams(core)
    has_cmd = "cmd" in members
    has_status = "status" in members
    streams = [(n, payload_ints(job.cfg.get(n, []))) for n in cfg_names]
    if has_cmd:
        streams.append(("cmd", payload_ints(job.commands)))
    if "i" in members:      # a core's data input (a subsystem reads its data from its memory model)
        streams.append(("i", [int(v) for v in np.asarray(job.inputs, dtype=np.uint64)]))
    streams += [(n, payload_ints(job.side.get(n, []))) for n in side_names]
    expected = payload_ints(job.expected)
    slot_bits, slot_values = job.slots if job.slots is not None else (0, [])
    # where ``o`` carries a tag per slot (``user``) and the job knows each weight's, lane<l>.hex holds
    # ``{tag, weight}``: the tag above the weight
    o_fields = members["o"].signature.members["payload"].shape
    tag_bits = 0
    if job.slots is not None and job.slot_tags is not None and "user" in o_fields.members:
        tag_bits = o_fields["user"].width // max(1, len(slot_values))
        slot_values = [np.asarray(v).astype(np.uint64) | (np.asarray(t).astype(np.uint64) << np.uint64(slot_bits))
                       for v, t in zip(slot_values, job.slot_tags)]
    total = sum(len(v) for _, v in streams) + (len(expected) if job.slots is None else sum(map(len, slot_values)))
    max_cycles = max_cycles or int((total + 1000) / (1 - stall_prob) ** 2 * 4)
    written = []

    def put(name, text):
        p = out / name
        p.write_text(text)
        written.append(p)

    export = describe(core, module)
    module = export.name
    pkg = f"{module}_pkg"
    put("core.v", _simulation_text(export))
    put(f"{pkg}.sv", export.package())
    payloads = {p.port: p for p in export.payloads if p.port is not None}

    def connect(stream: str, end: str, var: str) -> list[str]:
        """The wrapper's ports of ``stream``'s ``end`` (``payload``, ``valid``, ``ready``) on ``var``: an
        input payload's fields as members of its struct, an output's at the package's offsets and widths
        into a wire vector (the one the expected payloads are compared with), anything else whole."""
        core_port = f"{stream}__{end}"
        ports = [p for p in export.ports if p.core == core_port]
        payload = payloads.get(core_port)
        if payload is None:
            return [f"    .{p.name}({var})" for p in ports]
        up, fields = payload.name.upper(), [f for f in payload.fields if not f.name.startswith("_pad")]
        if payload.direction == "input":        # ``var`` is the package's struct: its members by name
            return [f"    .{payload.name}_{f.name}({var}.{identifier(f.name)})" for f in fields]
        return [f"    .{payload.name}_{f.name}({var}[{up}_{f.name.upper()}_OFFSET +: {up}_{f.name.upper()}_WIDTH])"
                for f in fields]

    for name, values in streams:
        _hex(out / f"{name}.hex", values, _width(core, name))
        written.append(out / f"{name}.hex")
    if job.slots is None:
        _hex(out / "expected.hex", expected, _width(core, "o"))
        written.append(out / "expected.hex")
    for lane, values in enumerate(slot_values):
        _hex(out / f"lane{lane}.hex", payload_ints(values), slot_bits + tag_bits)
        written.append(out / f"lane{lane}.hex")
    if has_status:
        _hex(out / "status.hex", job.expected_status, 8)
        written.append(out / "status.hex")
    threshold = int(round(stall_prob * 256))

    decls, resets, drives, ports = [], [], [], ["    .clk(clk)", "    .rst(rst)"]
    for name, values in streams:
        w, n = _width(core, name), len(values)
        typed = payloads.get(f"{name}__payload")       # the package's struct of this payload, if any
        decls += [f"  localparam integer N_{name} = {n};",
                  f"  reg [{_bits(typed, w)}] mem_{name} [0:{max(n, 1) - 1}];",
                  f"  {typed.name}_t {name}_payload;" if typed else f"  reg [{w - 1}:0] {name}_payload;",
                  f"  reg {name}_valid;", f"  wire {name}_ready;", f"  integer idx_{name};"]
        ports += (connect(name, "payload", f"{name}_payload") + connect(name, "valid", f"{name}_valid")
                  + connect(name, "ready", f"{name}_ready"))
        resets += [f"    idx_{name} = 0; {name}_valid = 0; {name}_payload = 0;",
                   f"    if (N_{name} > 0) $readmemh(\"{name}.hex\", mem_{name});"]
        gate = {"cmd": "cfg_done && !waiting", "i": "cfg_done"}.get(name, "cfg_done" if name in side_names else "1")
        if name in cfg_names:
            gate = " && ".join([f"idx_{c} >= N_{c}" for c in cfg_names[:cfg_names.index(name)]] or ["1"])
        drives.append(f"""      if ({name}_valid && {name}_ready) begin
        {name}_valid <= 0;
        idx_{name} <= idx_{name} + 1;{" waiting <= 1; n_cmd_sent <= n_cmd_sent + 1;" if name == "cmd" else ""}
      end else if (!{name}_valid && idx_{name} < N_{name} && ({gate}) && !gap(rnd_{name})) begin
        {name}_valid <= 1;
        {name}_payload <= mem_{name}[idx_{name}];
      end""")
    rnd_names = [n for n, _ in streams] + ["o"]
    w_o = _width(core, "o")
    ports += connect("o", "payload", "o_payload") + connect("o", "valid", "o_valid") + connect("o", "ready", "o_ready")
    if has_cmd:
        ports += [f"    .{p.name}(done)" for p in export.ports if p.core == "done"]
    if has_status:
        ports += [f"    .{p.name}(status)" for p in export.ports if p.core == "status"]
    status_w = Shape.cast(members["status"].shape).width if has_status else 1
    cfg_done = " && ".join([f"idx_{c} >= N_{c}" for c in cfg_names] or ["1"])
    n_cmd = len(job.commands) if has_cmd else 0
    finished = "n_cmd_done == N_cmd && n_out == N_OUT" if has_cmd else "n_out == N_OUT"
    status_check = f"""
      if (waiting && done && !cmd_valid) begin
        waiting <= 0;
        n_cmd_done <= n_cmd_done + 1;{'''
        if (status !== mem_status[n_cmd_done][%d:0]) begin
          $display("FAIL: command %%0d status %%0d, expected %%0d", n_cmd_done, status, mem_status[n_cmd_done]);
          $fatal(1, "status mismatch");
        end''' % (status_w - 1) if has_status else ""}
      end""" if has_cmd else ""
    if job.slots is None:
        output_check = """    if (o_valid && o_ready) begin
      if (n_out >= N_OUT) begin
        $display("FAIL: output %0d is one more than the %0d expected", n_out, N_OUT);
        $fatal(1, "extra output");
      end else if (o_payload !== mem_expected[n_out]) begin
        $display("FAIL: output %0d is %h, expected %h", n_out, o_payload, mem_expected[n_out]);
        $fatal(1, "output mismatch");
      end
      n_out <= n_out + 1;
      if (N_OUT >= 10 && (n_out + 1) % STEP == 0 && n_out + 1 < N_OUT)
        $display("progress: %0d of %0d outputs (%0d%%), cycle %0d", n_out + 1, N_OUT, (n_out + 1) / STEP * 10, cycle);
    end"""
        slot_decls = f"""  reg [{_bits(payloads.get("o__payload"), w_o)}] mem_expected [0:{max(len(expected), 1) - 1}];"""
        slot_resets = '    $readmemh("expected.hex", mem_expected);'
    else:
        # each slot of ``o`` against its lane's next expected value, wherever its transfer falls
        o_shape = members["o"].signature.members["payload"].shape
        data_at, keep_at, last_at = o_shape["data"].offset, o_shape["keep"].offset, o_shape["last"].offset
        kb = slot_bits // 8
        lanes = len(slot_values)
        user_at = o_shape["user"].offset if tag_bits else 0
        tagged_bits = slot_bits + tag_bits
        slot_decls = "\n".join(
            [f"  localparam integer N_LANE{l} = {len(v)};\n  reg [{tagged_bits - 1}:0] mem_lane{l} [0:{max(len(v), 1) - 1}];"
             f"\n  integer idx_lane{l};\n  wire kept{l} = o_payload[{keep_at + l * kb} +: {kb}] == {{{kb}{{1'b1}}}};"
             f"\n  wire [{slot_bits - 1}:0] slot{l} = o_payload[{data_at + l * slot_bits} +: {slot_bits}];"
             + (f"\n  wire [{tagged_bits - 1}:0] tagged{l} = {{o_payload[{user_at + l * tag_bits} +: {tag_bits}], slot{l}}};"
                if tag_bits else f"\n  wire [{tagged_bits - 1}:0] tagged{l} = slot{l};")
             for l, v in enumerate(slot_values)]
            + ["  integer next_report;",
               "  wire ends = " + " && ".join(f"idx_lane{l} + kept{l} == N_LANE{l}" for l in range(lanes)) + ";"])
        slot_resets = "\n".join([f'    idx_lane{l} = 0; if (N_LANE{l} > 0) $readmemh("lane{l}.hex", mem_lane{l});'
                                  for l in range(lanes)] + ["    next_report = STEP;"])
        checks = "\n".join(f"""      if (kept{l}) begin
        if (idx_lane{l} >= N_LANE{l}) begin
          $display("FAIL: lane {l} gives a weight after its %0d", N_LANE{l});
          $fatal(1, "extra output");
        end else if (tagged{l} !== mem_lane{l}[idx_lane{l}]) begin
          $display("FAIL: lane {l} weight %0d is %h, expected %h{' (its tag, then the weight)' if tag_bits else ''}",
                   idx_lane{l}, tagged{l}, mem_lane{l}[idx_lane{l}]);
          $fatal(1, "output mismatch");
        end
        idx_lane{l} <= idx_lane{l} + 1;
      end else if (o_payload[{keep_at + l * kb} +: {kb}] != 0 || slot{l} != 0) begin
        $display("FAIL: slot {l} of a transfer keeps part of its bytes or carries data without them");
        $fatal(1, "slot mismatch");
      end""" for l in range(lanes))
        output_check = f"""    if (o_valid && o_ready) begin
{checks}
      if (o_payload[{last_at}] !== ends) begin
        $display("FAIL: TLAST is %0d on a transfer at weight %0d of %0d", o_payload[{last_at}], n_out, N_OUT);
        $fatal(1, "last mismatch");
      end
      n_out <= n_out + {" + ".join(f"kept{l}" for l in range(lanes))};
      if (n_out + {" + ".join(f"kept{l}" for l in range(lanes))} >= next_report && next_report < N_OUT) begin
        $display("progress: %0d of %0d weights (%0d%%), cycle %0d", next_report, N_OUT, next_report / STEP * 10, cycle);
        next_report <= next_report + STEP;
      end
    end"""
    n_out_total = len(expected) if job.slots is None else sum(map(len, slot_values))
    tb = f"""// Self-checking testbench written by ansforge (sim/testbench.py). To run it:
//   with Icarus: iverilog -g2012 -o tb {pkg}.sv tb.sv core.v && vvp tb
//   with Verilator 5: ./run_verilator.sh (--binary, top module tb)
// Exit status 0 and "PASS": every output and status matched; "FAIL ..." and a non-zero status otherwise.
`timescale 1ns/1ps
module tb;
  import {pkg}::*;  // payload types, widths and field offsets of {module} ({pkg}.sv)
  reg clk = 0;
  reg rst = 1;
  always #5 clk = ~clk;
  localparam integer N_OUT = {n_out_total};
  localparam integer MAX_CYCLES = {max_cycles};
  localparam integer STALL = {threshold};  // gap when a random byte is below it (stall probability * 256)
  localparam integer STEP = N_OUT >= 10 ? (N_OUT + 9) / 10 : 1;  // a progress line every 10 % of the outputs
{chr(10).join(decls)}
  wire [{_bits(payloads.get("o__payload"), w_o)}] o_payload;  // the core's named output ports, at the package's offsets
  wire o_valid;
  reg o_ready;
  integer n_out, cycle;
  reg [31:0] rnd;
{f"  wire done;" if has_cmd else ""}
{f"  wire [{status_w - 1}:0] status;" if has_status else ""}
{f"  reg [7:0] mem_status [0:{max(n_cmd, 1) - 1}];" if has_status else ""}
{"" if has_cmd else "  localparam integer N_cmd = 0;"}
{slot_decls}
  integer n_cmd_sent, n_cmd_done;
  reg waiting;
  wire cfg_done = {cfg_done};
{chr(10).join(f"  reg [31:0] rnd_{n};" for n in rnd_names)}

  {module} dut (
{(',' + chr(10)).join(ports)}
  );

  // xorshift32: the same stall pattern in every simulator.
  function [31:0] xorshift(input [31:0] x);
    reg [31:0] y;
    begin
      y = x ^ (x << 13);
      y = y ^ (y >> 17);
      xorshift = y ^ (y << 5);
    end
  endfunction

  function gap(input [31:0] r);
    gap = r[7:0] < STALL;
  endfunction

  initial begin
{chr(10).join(resets)}
{slot_resets}
{'    $readmemh("status.hex", mem_status);' if has_status else ""}
    n_out = 0; cycle = 0; o_ready = 0; waiting = 0; n_cmd_sent = 0; n_cmd_done = 0;
    rnd = 32'd{seed};
{chr(10).join(f"    rnd_{n} = 32'd{seed} ^ 32'h{(0x9E3779B9 * (k + 1)) & 0xFFFFFFFF:08x};" for k, n in enumerate(rnd_names))}
    repeat (2) @(posedge clk);
    @(negedge clk) rst = 0;  // between edges: no race with the clocked block
  end

  always @(posedge clk) if (!rst) begin
{chr(10).join(f"    rnd_{n} <= xorshift(rnd_{n});" for n in rnd_names)}
    cycle <= cycle + 1;
    if (cycle >= MAX_CYCLES) begin
      $display("FAIL: no result after %0d cycles (%0d of %0d outputs)", cycle, n_out, N_OUT);
      $fatal(1, "timeout");
    end
{output_check}
    o_ready <= !gap(rnd_o);
{chr(10).join(drives)}{status_check}
    if ({finished}) begin
      $display("PASS: %0d outputs bit-exact{' (commands: %0d)' if has_cmd else ''} in %0d cycles", n_out{', n_cmd_done' if has_cmd else ''}, cycle);
      $finish;
    end
  end
endmodule
"""
    put("tb.sv", tb)
    put("run_iverilog.sh", "#!/bin/sh\nset -e\ncd \"$(dirname \"$0\")\"\n"
                           f"iverilog -g2012 -o tb.vvp {pkg}.sv tb.sv core.v\n"
                           "vvp -n tb.vvp\n")
    put("run_verilator.sh", "#!/bin/sh\nset -e\ncd \"$(dirname \"$0\")\"\n"
                            f"verilator --binary -Wno-fatal -Wno-lint -Wno-style --top-module tb {pkg}.sv tb.sv core.v\n"
                            "obj_dir/Vtb\n")
    for f in ("run_iverilog.sh", "run_verilator.sh"):
        (out / f).chmod(0o755)
    # the format it decodes or writes: a core's codec, or the subsystem's lanes' (a bench holds it as ``dut``)
    codec = getattr(core, "codec", None) or getattr(getattr(core, "dut", None), "codec", None)
    what = job.kind + (f", codec {codec.name}" if codec is not None else "")
    put("README.txt", f"""Self-checking testbench for {type(core).__name__} ({what}), written by ansforge.

core.v          the core's Verilog: module {module}, ports named per field (<stream>_<field>,
                <stream>_valid / _ready, clk, rst), around {module}_core (packed <stream>__payload ports)
{pkg}.sv  its package: each payload as a packed struct, field offsets and widths
*.hex           stimulus ({", ".join(n for n, _ in streams)}) and {"expected.hex" if job.slots is None else "lane<l>.hex (each output slot's values" + (", each its TUSER tag above the weight" if tag_bits else "") + ")"}{", status.hex" if has_status else ""}
                ($readmemh, one payload per line)
tb.sv           the testbench: table writes first, then each command after the previous one's done,
                random valid/ready gaps (p = {stall_prob}, seed {seed}, xorshift32), every output compared

Run: ./run_iverilog.sh  or  ./run_verilator.sh  (any IEEE 1800 simulator: {pkg}.sv tb.sv core.v, top tb).
It prints a progress line every 10 % of the outputs, then PASS and exits 0, or prints the first FAIL
and exits non-zero.
""")
    return written
