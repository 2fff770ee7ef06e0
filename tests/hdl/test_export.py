"""``ansforge verilog``'s export (``hdl/export.py``): every base core of the registry and the subsystem at
K = 2 get a module name of their own, a wrapper with ports named per field, a SystemVerilog package, a C
header and a Vivado script; the wrapper lints clean, the five designs lint together without a clash, the
package and the header hold the field order Python's layouts have (a random payload packed by Amaranth, by
the package's struct under Icarus and by the header's pack function under gcc is the same number).

What covers what: one build per base core at its default codec (the interleaved builds differ in field
widths only, which the same walk of the signature produces); one lint run, one Icarus run and one gcc run
for the five designs together; the CLI once (tans-decoder)."""

from __future__ import annotations

import json
import random
import re
import subprocess

import pytest
from amaranth.lib import data

from ansforge.cli import main
from ansforge.hdl.cores import BASE_BUILDS
from ansforge.hdl.export import describe, identifier
from ansforge.hdl.subsystem import AxiDecompressor
from ansforge.model.coding.codecs import parse_codec
from ansforge.sim.streams import pack

NAMES = {("tans", "decoder"): "ansforge_tans8x16_decoder", ("tans", "encoder"): "ansforge_tans8x16_encoder",
         ("rans", "decoder"): "ansforge_rans16x16_decoder", ("rans", "encoder"): "ansforge_rans16x16_encoder"}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The five exports, their files written into one folder."""
    out = tmp_path_factory.mktemp("export")
    comps = [row.build(parse_codec(row.default_codec), programmable=True) for row in BASE_BUILDS.values()]
    comps.append(AxiDecompressor(parse_codec("tans8x16"), lanes=2))
    found = []
    for comp in comps:
        e = describe(comp)
        files = e.files()
        for name, text in files.items():
            (out / name).write_text(text)
        found.append((e, files))
    return out, found


def _layouts(e) -> dict[str, data.Layout]:
    """Each payload's Amaranth layout, found independently of the export: from the signature by the
    payload's port, or the subsystem's records and table entries."""
    comp, out = e.core, {}
    for p in e.payloads:
        if p.port is not None:
            stream = comp.signature.members[p.port.split("__")[0]]
            out[p.name] = stream.signature.members["payload"].shape
        else:
            out[p.name] = {"tbl_decoder": comp.decoder_cfg_layout["data"].shape,
                           "tbl_float": comp.float_cfg_layout["data"].shape,
                           "record_header": comp.parallel.header_layout,
                           "table_entry": comp.parallel.entry_layout}[p.name]
    return out


def _random_value(layout, rng, prefix=""):
    """A random value of ``layout`` as Amaranth's ``const`` takes it (nested dicts), and the same values by
    the flat names the export gives them (nested names joined with ``_``)."""
    nested, flat = {}, {}
    for key, f in layout:
        if isinstance(f.shape, data.Layout):
            nested[key], sub = _random_value(f.shape, rng, f"{prefix}{key}_")
            flat.update(sub)
        else:
            nested[key] = flat[f"{prefix}{key}"] = rng.getrandbits(f.width)
    return nested, flat


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")     # the coder alone: named, not built
def test_default_names_are_unique_and_name_overrides(exports):
    _, found = exports
    names = [e.name for e, _ in found]
    assert names == [NAMES[k] for k in BASE_BUILDS] + ["ansforge_subsystem_tans8x16_k2"]
    for e, files in found:
        v = files[f"{e.name}.v"]
        assert re.search(rf"^module {e.name} \(", v, re.M) and re.search(rf"^module {e.name}_core\(", v, re.M)
        # every module of the text carries the name: Amaranth's submodules and the hand-written ones
        assert all(m.startswith((e.name, f"\\{e.name}")) for m in re.findall(r"^module (\S+)", v, re.M))
        assert list(files) == [f"{e.name}{s}" for s in (".v", "_pkg.sv", ".h", "_ooc.tcl", ".xdc")]
    assert describe(found[0][0].core, "mine").name == "mine"
    coder = BASE_BUILDS[("tans", "decoder")].build(parse_codec("tans8x16"), programmable=True, shell=False)
    assert describe(coder).name == "ansforge_tans8x16_decoder_coder"      # other ports: another name
    with pytest.raises(ValueError, match="module name must be a Verilog identifier"):
        describe(found[0][0].core, "2bad")


def test_wrapper_ports_are_the_fields_by_name(exports):
    _, found = exports
    ports = {e.name: {p.name: (p.direction, p.width) for p in e.ports} for e, _ in found}
    dec = ports["ansforge_tans8x16_decoder"]
    assert dec["cmd_count"] == ("input", 32) and dec["cmd_resume"] == ("input", 1)
    assert dec["cfg_addr"] == ("input", 8) and dec["cfg_data_symbol"] == ("input", 6)
    assert dec["i_data"] == ("input", 16) and dec["o_symbol"] == ("output", 6) and dec["o_extra"] == ("output", 8)
    assert dec["o_ready"] == ("input", 1) and dec["cmd_ready"] == ("output", 1) and dec["status"] == ("output", 3)
    assert ports["ansforge_rans16x16_decoder"]["cfg_data"] == ("input", 56)
    sub = ports["ansforge_subsystem_tans8x16_k2"]
    assert sub["s_axil_awaddr"] == ("input", 12) and sub["m_axis_tdata"] == ("output", 32)


def test_five_designs_lint_together_and_the_wrappers_clean(exports):
    """One Verilator run over the five ``.v`` files (and the packages): no error, no module defined
    twice, and not one warning of ``-Wall`` on a wrapper's lines (the core's own warnings are Amaranth's,
    budgeted by the cores' tests)."""
    out, found = exports
    files = [f"{e.name}.v" for e, _ in found] + [f"{e.name}_pkg.sv" for e, _ in found]
    # a top that uses every package and instantiates every wrapper, so that all are elaborated
    uses = "\n".join(f"  {e.name} u{i} ();" for i, (e, _) in enumerate(found))
    (out / "lint_top.sv").write_text("module lint_top;\n" + "".join(f"  import {e.name}_pkg::*;\n" for e, _ in found)
                                     + uses + "\nendmodule\n")
    r = subprocess.run(["verilator", "--lint-only", "-Wall", "-Wno-fatal", "-Wno-PINMISSING", "-Wno-DECLFILENAME",
                        "--top-module", "lint_top", *files, "lint_top.sv"], cwd=out, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "%Error" not in r.stderr, r.stderr[-3000:]
    assert "MODDUP" not in r.stderr
    for e, files_ in found:
        wrapper_lines = files_[f"{e.name}.v"].split(f"{e.name}_core core (")[0].count("\n") + 4
        bad = [w for w in re.findall(rf"%Warning-\w+: {e.name}\.v:(\d+):.*", r.stderr) if int(w) <= wrapper_lines]
        assert not bad, [ln for ln in r.stderr.splitlines() if f"{e.name}.v:" in ln][:5]
    pkg_warnings = [ln for ln in r.stderr.splitlines() if re.match(r"%Warning-\w+: \S+_pkg\.sv", ln)]
    assert not pkg_warnings, pkg_warnings[:5]


def test_package_and_header_hold_pythons_field_order(exports):
    """For every payload of the five designs: random field values packed by Amaranth (``layout.const``,
    and ``sim.streams.pack``, which writes the simulations' and testbenches' vectors), by the package's struct (Icarus) and by the header's ``_pack`` (gcc -Wall -Werror, all five headers
    in one program), the same number; the header's ``_unpack`` gives the fields back."""
    out, found = exports
    rng = random.Random(45)
    expected, sv, c_body = {}, [], []
    for k, (e, _) in enumerate(found):
        layouts = _layouts(e)
        lines = []
        for p in e.payloads:
            nested, flat = _random_value(layouts[p.name], rng)
            key = f"{e.name}.{p.name}"
            expected[key] = layouts[p.name].const(nested).as_value().value
            assert pack(layouts[p.name], nested) == expected[key]      # the packing the jobs' vectors use
            sets = [(f, flat[f.name]) for f in p.fields if not f.name.startswith("_pad")]
            lines.append(f"    begin {p.name}_t v; v = '0;\n" + "".join(
                f"      v.{identifier(f.name)} = {f.width}'h{x:x};\n" for f, x in sets)
                + f"      $display(\"{key} %h\", v); end")
            cset = []
            for f, x in sets:
                m = identifier(f.name)
                if f.width > 64:
                    cset += [f"v.{m}[{j}] = 0x{(x >> 32 * j) & 0xFFFFFFFF:x}u;" for j in range(-(-f.width // 32))]
                else:
                    cset.append(f"v.{m} = 0x{x:x}ull;")
            t, W = f"{e.name}_{p.name}", f"{e.name.upper()}_{p.name.upper()}_WORDS"
            c_body.append(f"  {{ {t}_t v, back; uint32_t w[{W}]; memset(&v, 0, sizeof v); {' '.join(cset)}\n"
                          f"    {t}_pack(&v, w); {t}_unpack(w, &back);\n"
                          f"    printf(\"{key} \"); for (int j = {W} - 1; j >= 0; j--) printf(\"%08x\", w[j]);\n"
                          f"    printf(\" %s\\n\", memcmp(&v, &back, sizeof v) == 0 ? \"same\" : \"differs\"); }}")
        sv.append(f"module chk{k};\n  import {e.name}_pkg::*;\n  initial begin\n" + "\n".join(lines) + "\n  end\nendmodule\n")
    (out / "chk.sv").write_text("\n".join(sv))
    pkgs = [f"{e.name}_pkg.sv" for e, _ in found]
    r = subprocess.run(["iverilog", "-g2012", "-o", "chk.vvp", *pkgs, "chk.sv"], cwd=out, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run(["vvp", "-n", "chk.vvp"], cwd=out, capture_output=True, text=True, timeout=60)
    got_sv = {k: int(v, 16) for k, v in re.findall(r"^(\S+) ([0-9a-f]+)$", r.stdout, re.M)}
    assert got_sv == expected
    (out / "chk.c").write_text("#include <stdio.h>\n" + "".join(f'#include "{e.name}.h"\n' for e, _ in found)
                               + "int main(void)\n{\n" + "\n".join(c_body) + "\n  return 0;\n}\n")
    r = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", "chk", "chk.c"], cwd=out,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run(["./chk"], cwd=out, capture_output=True, text=True, timeout=60)
    rows = re.findall(r"^(\S+) ([0-9a-f]+) (\w+)$", r.stdout, re.M)
    assert {k: int(v, 16) for k, v, _ in rows} == expected
    assert {s for _, _, s in rows} == {"same"}


def test_enums_and_register_map(exports):
    out, found = exports
    dec = (out / "ansforge_tans8x16_decoder.h").read_text()
    assert "ANSFORGE_TANS8X16_DECODER_DECODE_STATUS_CRC = 6" in dec
    pkg = (out / "ansforge_tans8x16_decoder_pkg.sv").read_text()
    assert "DECODE_STATUS_FINAL_STATE = 3'd3" in pkg
    sub = found[-1][0]
    h = (out / f"{sub.name}.h").read_text()
    assert "#define ANSFORGE_SUBSYSTEM_TANS8X16_K2_CSR_RECORDS 0x2Cu" in h
    assert f"#define ANSFORGE_SUBSYSTEM_TANS8X16_K2_RECORDS_VALUE 0x{sub.core.records_word():X}u" in h
    assert "#define ANSFORGE_SUBSYSTEM_TANS8X16_K2_UNIT_BITS 0x40u" in h
    assert f"#define ANSFORGE_SUBSYSTEM_TANS8X16_K2_PARAMS_VALUE 0x{sub.core.params_word():X}u" in h
    assert "ANSFORGE_SUBSYSTEM_TANS8X16_K2_TABLE_FLOAT 0x3u" in h


def test_vivado_script_and_constraint_parse(exports):
    """The Tcl runs under tclsh with Vivado's commands stubbed: every file it reads exists, and it asks for
    an out-of-context synthesis of the wrapper on a Kintex UltraScale+ with both reports."""
    out, found = exports
    e = found[0][0]
    stub = """set calls {}
foreach c {read_verilog read_xdc synth_design opt_design place_design route_design report_utilization
           report_timing_summary create_clock get_ports} {
    proc $c {args} "lappend ::calls \\[list $c {*}\\$args\\]; return {}"
}
set argv {}
source [lindex $::argv0_files 0]
source [lindex $::argv0_files 1]
foreach c $calls { puts $c }
"""
    (out / "stub.tcl").write_text(f"set argv0_files [list {e.name}_ooc.tcl {e.name}.xdc]\n" + stub)
    r = subprocess.run(["tclsh", "stub.tcl"], cwd=out, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    calls = r.stdout.splitlines()
    synth = next(c for c in calls if c.startswith("synth_design"))
    assert f"-top {e.name}" in synth and "-mode out_of_context" in synth and "-part xcku" in synth
    for c in calls:
        if c.startswith(("read_verilog", "read_xdc")):
            assert (out / c.split()[-1].split("/")[-1]).exists()
    assert any(c.startswith("report_utilization") for c in calls)
    assert any(c.startswith("report_timing_summary") for c in calls)
    assert any(c.startswith("create_clock -period 1.250 -name clk") for c in calls)


def test_cli_writes_the_files_beside_the_verilog(tmp_path, capsys):
    v = tmp_path / "dec.v"
    assert main(["verilog", "--core", "tans-decoder", "-o", str(v), "--json", str(tmp_path / "v.json")]) == 0
    doc = json.loads((tmp_path / "v.json").read_text())
    name = "ansforge_tans8x16_decoder"
    assert doc["module"] == name
    assert doc["files"] == [str(tmp_path / f) for f in ("dec.v", "dec_pkg.sv", "dec.h", "dec_ooc.tcl", "dec.xdc")]
    assert all((tmp_path / f).exists() for f in doc["files"])
    assert re.search(rf"^module {name} \(", v.read_text(), re.M)
    assert f"package {name}_pkg;" in (tmp_path / "dec_pkg.sv").read_text()
    assert "dec.v" in (tmp_path / "dec_ooc.tcl").read_text()
    # a file of the user's where one would go beside -o: refused in one line, nothing written
    (tmp_path / "mine.h").write_text("keep")
    capsys.readouterr()
    assert main(["verilog", "--core", "tans-decoder", "--name", "mine", "-o", str(tmp_path / "mine.v")]) == 2
    err = capsys.readouterr().err
    assert "mine.h: file exists" in err and err.count("\n") == 1
    assert (tmp_path / "mine.h").read_text() == "keep" and not (tmp_path / "mine.v").exists()
