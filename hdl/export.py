"""What ``ansforge verilog`` writes for a designer: a module name of its own, ports named per field, and
the headers, from the component's signature alone.

:func:`describe` walks a component's :class:`~amaranth.lib.wiring.Signature` (flattened, so every port
with its direction) and, for each payload whose shape is a :mod:`amaranth.lib.data` layout, its fields
(nested layouts to their leaves, names joined with ``_``). Nothing here lists a core's ports by hand, so
every core of the registry (:data:`~.cores.REGISTRY`) and the subsystem
(:class:`~.subsystem.AxiDecompressor`) get the same five texts (:meth:`Export.files`):

* ``<name>.v`` (or the ``-o`` file): the core as module ``<name>_core`` (Amaranth's packed ports
  ``cmd__payload``, ...; its submodules ``<name>_core.coder``, ...; its hand-written modules prefixed with
  ``<name>_``) and a wrapper module ``<name>``, the top, whose ports are the fields by name: ``cmd_count``,
  ``cfg_addr``, ``cfg_data_symbol``, ``i_data``, ``o_symbol``, ``cmd_valid``, ``o_ready``, ``status``,
  ``clk``, ``rst``. The wrapper is wires only: no logic, no latency.

Beside it, named after that file's stem (``<name>`` by default):

* ``<stem>_pkg.sv``: the SystemVerilog package ``<name>_pkg``, every payload as a ``typedef struct
  packed`` (first field the most significant, as IEEE 1800 packs them) with ``<PAYLOAD>_<FIELD>_OFFSET``
  and ``_WIDTH`` localparams, every enumerated port or field (the decoders'
  :class:`~.common.DecodeStatus`) as a ``typedef enum``, and, for the subsystem, its register map
  (:class:`~.subsystem.Csr`), the records a lane reads (a header, table entries of a
  :class:`~.parallel.Table` kind, and the decoder's and float table's entry data).
* ``<stem>.h``: the same in C (``#define`` lines, enums, a struct per payload, every name prefixed with
  ``<NAME>_``/``<name>_``) and ``<name>_<payload>_pack``/``_unpack`` between a struct and the payload
  as little-endian 32-bit words (word 0 is bits 31..0).
* ``<stem>_ooc.tcl`` and ``<stem>.xdc``: Vivado out-of-context synthesis of ``<name>`` on a Kintex
  UltraScale+ (:data:`PART`) with the clock constraint, writing utilization and timing reports: what a
  user with Vivado runs to compare with Table 3. Generated and syntax-checked here, never run.

Identifiers that are keywords of SystemVerilog or C (a command's ``bit`` field) get a trailing ``_`` in the
package and the header; the wrapper's port names are prefixed by their stream and need none.
"""

from __future__ import annotations

import enum as py_enum
import inspect
import re
from dataclasses import dataclass, field

from amaranth.hdl import Shape
from amaranth.lib import data, wiring

from .verilog import core_verilog

__all__ = ["PART", "Field", "Payload", "Port", "Export", "default_name", "describe", "export_files", "identifier"]

#: The Vivado part of the synthesis script: a Kintex UltraScale+ (Table 3's family; the paper names no
#: device, and this is the KCU116 board's, speed grade -2).
PART = "xcku5p-ffvb676-2-e"
#: Clock period of the XDC in ns: Table 3's Kintex UltraScale+ cores run at 617 to > 800 MHz (a core);
#: the subsystem's AXI side is constrained at 250 MHz, a usual fabric clock beside DDR4.
CORE_PERIOD_NS = 1.25
SUBSYSTEM_PERIOD_NS = 4.0

_SV_KEYWORDS = frozenset("""alias always always_comb always_ff always_latch and assert assign assume automatic before
begin bind bins binsof bit break buf bufif0 bufif1 byte case casex casez cell chandle checker class clocking cmos
config const constraint context continue cover covergroup coverpoint cross deassign default defparam design
disable dist do edge else end endcase endmodule enum event eventually expect export extends extern final
first_match for force foreach forever fork forkjoin function generate genvar global highz0 highz1 if iff ifnone
ignore_bins illegal_bins implements implies import incdir include initial inout input inside instance int
integer interconnect interface intersect join join_any join_none large let liblist library local localparam
logic longint macromodule matches medium modport module nand negedge nettype new nexttime nmos nor
noshowcancelled not notif0 notif1 null or output package packed parameter pmos posedge primitive priority
program property protected pull0 pull1 pulldown pullup pulsestyle_ondetect pulsestyle_onevent pure rand randc
randcase randsequence rcmos real realtime ref reg reject_on release repeat restrict return rnmos rpmos rtran
rtranif0 rtranif1 s_always s_eventually s_nexttime s_until s_until_with scalared sequence shortint shortreal
showcancelled signed small soft solve specify specparam static string strong strong0 strong1 struct super
supply0 supply1 sync_accept_on sync_reject_on table tagged task this throughout time timeprecision timeunit
tran tranif0 tranif1 tri tri0 tri1 triand trior trireg type typedef union unique unique0 unsigned until
until_with untyped use uwire var vectored virtual void wait wait_order wand weak weak0 weak1 while wildcard
wire with within wor xnor xor""".split())
_C_KEYWORDS = frozenset("""auto bool break case char const continue default do double else enum extern float for
goto if inline int long register restrict return short signed sizeof static struct switch typedef union unsigned
void volatile while""".split())


def identifier(name: str, keywords=_SV_KEYWORDS | _C_KEYWORDS) -> str:
    """``name`` as an identifier of SystemVerilog and C: a keyword gets a trailing ``_``."""
    return f"{name}_" if name in keywords else name


def _snake(name: str) -> str:
    """``DecodeStatus`` -> ``decode_status``; anything not a letter or digit becomes ``_``."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(name))
    return re.sub(r"[^a-z0-9_]", "_", s.lower())


@dataclass(frozen=True)
class Field:
    """A leaf field of a payload: ``name`` (nested names joined with ``_``), bit ``offset`` and ``width``
    in the payload, and ``enum``, the enumeration class of its shape or ``None``."""

    name: str
    offset: int
    width: int
    enum: type | None = None


@dataclass(frozen=True)
class Payload:
    """A payload layout: ``name`` (the stream, ``cmd``, ``cfg``; or a layout the subsystem stages),
    ``width`` in bits, ``fields`` by increasing offset (gaps, which struct layouts do not have, would be
    ``_pad<offset>`` fields), ``port`` the core's packed port (``cmd__payload``; ``None`` for a layout
    that is not a port), ``direction`` ``"input"``/``"output"`` (``None`` likewise)."""

    name: str
    width: int
    fields: tuple[Field, ...]
    port: str | None = None
    direction: str | None = None
    doc: str = ""

    @property
    def words(self) -> int:
        """32-bit words of the payload (the C helpers' array length)."""
        return max(1, -(-self.width // 32))


@dataclass(frozen=True)
class Port:
    """A port of the wrapper: ``name`` (``cmd_count``), ``direction`` (``"input"``/``"output"``),
    ``width``, and where it goes in the core: its packed port ``core`` (``cmd__payload``) at ``offset``."""

    name: str
    direction: str
    width: int
    core: str
    offset: int = 0


@dataclass
class Export:
    """Everything :func:`describe` derives from a component: its module ``name``, the core's ports
    (``core_ports``: Amaranth name, direction, width, in signature order), the wrapper's ``ports``, the
    ``payloads``, the ``enums`` (class name -> class), and for the subsystem its ``registers`` (CSR name
    -> (byte address, description)), ``tables`` (a table entry's ``kind``) and ``constants``."""

    name: str
    core: wiring.Component
    core_ports: list[tuple[str, str, int]]
    ports: list[Port]
    payloads: list[Payload]
    enums: dict[str, type] = field(default_factory=dict)
    registers: dict[str, tuple[int, str]] = field(default_factory=dict)
    tables: dict[str, tuple[int, str]] = field(default_factory=dict)
    constants: dict[str, tuple[int, str]] = field(default_factory=dict)
    period_ns: float = CORE_PERIOD_NS
    summary: str = ""

    # --- Verilog -----------------------------------------------------------------------------------------

    def core_verilog(self) -> str:
        """The component's Verilog as module ``<name>_core`` (:func:`~.verilog.core_verilog`), its
        hand-written modules prefixed with ``<name>_`` so that two exports never define one twice."""
        return core_verilog(self.core, f"{self.name}_core", prefix=self.name)

    def wrapper_verilog(self, core_text: str | None = None) -> str:
        """The top module ``<name>``: the fields as ports, wired to ``<name>_core``'s packed ports. With
        ``core_text`` (that module's Verilog), every port named here is checked to exist there."""
        clocked = [p for p in ("clk", "rst") if core_text is None or _has_port(core_text, f"{self.name}_core", p)]
        if core_text is not None:
            declared = _module_ports(core_text, f"{self.name}_core")
            missing = [n for n, _, _ in self.core_ports if n not in declared]
            if missing:
                raise ValueError(f"{self.name}_core has no port {', '.join(missing)} (Amaranth named them otherwise)")
        decl = [f"  input wire {p}" for p in clocked]
        decl += [f"  {p.direction} wire {_range(p.width)}{p.name}" for p in self.ports]
        body, conns = [], [f".{p}({p})" for p in clocked]
        by_core: dict[str, list[Port]] = {}
        for p in self.ports:
            by_core.setdefault(p.core, []).append(p)
        for core_port, direction, width in self.core_ports:
            parts = by_core[core_port]
            if len(parts) == 1 and parts[0].width == width:        # a whole port: renamed only
                conns.append(f".{core_port}({parts[0].name})")
                continue
            body.append(f"  wire {_range(width)}{core_port};")
            if direction == "input":
                body.append(f"  assign {core_port} = {_concat(parts, width)};")
            else:
                body += [f"  assign {p.name} = {core_port}{_slice(p.offset, p.width, width)};" for p in parts]
            conns.append(f".{core_port}({core_port})")
        conn_text = ",\n    ".join(conns)
        return (f"// {self.name}: {self.summary}\n"
                f"// Written by ansforge (hdl/export.py). Ports named per field around {self.name}_core (the\n"
                f"// same design with packed ports); field offsets and widths: {self.name}_pkg.sv, {self.name}.h.\n"
                f"// Wires only: no logic and no latency between these ports and the core's. clk: rising edge;\n"
                f"// rst: synchronous, active high. A stream moves a payload when <stream>_valid and _ready are high.\n"
                f"module {self.name} (\n" + ",\n".join(decl) + "\n);\n" + "\n".join(body) + "\n"
                f"  {self.name}_core core (\n    {conn_text}\n  );\nendmodule\n")

    def verilog(self) -> str:
        """``<name>.v``: the wrapper (the top), then the core and its submodules."""
        core_text = self.core_verilog()
        return self.wrapper_verilog(core_text) + "\n" + core_text

    # --- SystemVerilog package ---------------------------------------------------------------------------

    def package(self) -> str:
        """``<name>_pkg.sv``: payload structs, offsets and widths, enums, and the register map."""
        L = [f"// {self.name}_pkg: field layouts of {self.name} ({self.summary}).",
             "// Written by ansforge (hdl/export.py) from the component's signature; offsets are bits from",
             "// the payload's bit 0, a struct's first field is its most significant (IEEE 1800 packed).",
             f"package {self.name}_pkg;"]
        for cls in self.enums.values():
            e, w = _snake(cls.__name__), Shape.cast(cls).width
            L.append(f"  localparam int {e.upper()}_WIDTH = {w};")
            items = ",\n".join(f"    {e.upper()}_{m.name} = {w}'d{m.value}" for m in cls)
            L.append(f"  typedef enum logic {_range(w, True)}{{\n{items}\n  }} {e}_t;")
        for p in self.payloads:
            up = p.name.upper()
            L.append(f"  // {p.name}: {p.doc}" if p.doc else f"  // {p.name}")
            L.append(f"  localparam int {up}_WIDTH = {p.width};")
            for f in p.fields:
                L += [f"  localparam int {up}_{f.name.upper()}_OFFSET = {f.offset};",
                      f"  localparam int {up}_{f.name.upper()}_WIDTH = {f.width};"]
            members = "\n".join(f"    logic {_range(f.width, True)}{identifier(f.name)};" for f in reversed(p.fields))
            L.append(f"  typedef struct packed {{\n{members}\n  }} {p.name}_t;")
        for title, rows in (("register byte addresses (32-bit registers)", self.registers),
                            ("a table entry's kind: the lane's table it writes", self.tables),
                            ("constants", self.constants)):
            if rows:
                L.append(f"  // {title}")
                for k, (v, doc) in rows.items():
                    L.append(f"  localparam logic [31:0] {k} = 32'h{v:X};" + (f"  // {doc}" if doc else ""))
        L.append(f"endpackage : {self.name}_pkg")
        return "\n".join(L) + "\n"

    # --- C header ----------------------------------------------------------------------------------------

    def header(self) -> str:
        """``<name>.h``: the same as ``#define`` lines and enums, a struct per payload and its pack/unpack."""
        N, n = self.name.upper(), self.name
        L = [f"/* {n}.h: field layouts of {n} ({self.summary}).",
             " * Written by ansforge (hdl/export.py) from the component's signature. A payload travels as",
             " * little-endian 32-bit words: word 0 holds bits 31..0. */",
             f"#ifndef {N}_H", f"#define {N}_H", "", "#include <stdint.h>", "#include <string.h>", "",
             "#ifndef ANSFORGE_EXPORT_BITS", "#define ANSFORGE_EXPORT_BITS",
             "/* Copy `width` bits of `src` (from its bit 0) to bits offset.. of `dst`; both little-endian words. */",
             "static inline void ansforge_put_bits(uint32_t *dst, unsigned offset, unsigned width, const uint32_t *src)",
             "{", "    for (unsigned i = 0; i < width; i++) {", "        unsigned d = offset + i;",
             "        uint32_t b = (src[i / 32] >> (i % 32)) & 1u;",
             "        dst[d / 32] = (dst[d / 32] & ~(1u << (d % 32))) | (b << (d % 32));", "    }", "}",
             "/* Bits offset..offset + width - 1 of `src` to `dst` from its bit 0 (dst zeroed by the caller). */",
             "static inline void ansforge_get_bits(uint32_t *dst, const uint32_t *src, unsigned offset, unsigned width)",
             "{", "    for (unsigned i = 0; i < width; i++) {", "        unsigned s = offset + i;",
             "        dst[i / 32] |= ((src[s / 32] >> (s % 32)) & 1u) << (i % 32);", "    }", "}",
             "#endif", ""]
        for cls in self.enums.values():
            e = _snake(cls.__name__).upper()
            L.append(f"#define {N}_{e}_WIDTH {Shape.cast(cls).width}")
            L.append(f"enum {n}_{_snake(cls.__name__)} {{\n" +
                     ",\n".join(f"    {N}_{e}_{m.name} = {m.value}" for m in cls) + "\n};")
        L.append("")
        for p in self.payloads:
            up = f"{N}_{p.name.upper()}"
            L.append(f"/* {p.name}: {p.doc} */" if p.doc else f"/* {p.name} */")
            L += [f"#define {up}_WIDTH {p.width}", f"#define {up}_WORDS {p.words}"]
            for f in p.fields:
                L += [f"#define {up}_{f.name.upper()}_OFFSET {f.offset}", f"#define {up}_{f.name.upper()}_WIDTH {f.width}"]
            members = [f"    {_c_type(f.width)} {identifier(f.name)}{_c_dims(f.width)};  /* [{f.offset + f.width - 1}:{f.offset}] */"
                       for f in p.fields]
            L.append("typedef struct {\n" + "\n".join(members) + f"\n}} {n}_{p.name}_t;")
            pack = [f"static inline void {n}_{p.name}_pack(const {n}_{p.name}_t *v, uint32_t w[{up}_WORDS])", "{",
                    f"    memset(w, 0, sizeof(uint32_t) * {up}_WORDS);"]
            unpack = [f"static inline void {n}_{p.name}_unpack(const uint32_t w[{up}_WORDS], {n}_{p.name}_t *v)", "{",
                      "    memset(v, 0, sizeof *v);"]
            for f in p.fields:
                m = identifier(f.name)
                if f.width > 64:
                    pack.append(f"    ansforge_put_bits(w, {f.offset}, {f.width}, v->{m});")
                    unpack.append(f"    ansforge_get_bits(v->{m}, w, {f.offset}, {f.width});")
                elif f.width > 32:
                    pack.append(f"    {{ uint32_t t[2] = {{(uint32_t)v->{m}, (uint32_t)(v->{m} >> 32)}}; "
                                f"ansforge_put_bits(w, {f.offset}, {f.width}, t); }}")
                    unpack.append(f"    {{ uint32_t t[2] = {{0, 0}}; ansforge_get_bits(t, w, {f.offset}, {f.width}); "
                                  f"v->{m} = (uint64_t)t[0] | (uint64_t)t[1] << 32; }}")
                else:
                    pack.append(f"    {{ uint32_t t[1] = {{v->{m}}}; ansforge_put_bits(w, {f.offset}, {f.width}, t); }}")
                    unpack.append(f"    {{ uint32_t t[1] = {{0}}; ansforge_get_bits(t, w, {f.offset}, {f.width}); v->{m} = t[0]; }}")
            L += pack + ["}"] + unpack + ["}", ""]
        for title, rows in (("register byte addresses (32-bit registers)", self.registers),
                            ("a table entry's kind: the lane's table it writes", self.tables),
                            ("constants", self.constants)):
            if rows:
                L.append(f"/* {title} */")
                for k, (v, doc) in rows.items():
                    L.append(f"#define {N}_{k} 0x{v:X}u" + (f"  /* {doc} */" if doc else ""))
                L.append("")
        L.append(f"#endif /* {N}_H */")
        return "\n".join(L) + "\n"

    # --- Vivado ------------------------------------------------------------------------------------------

    def xdc(self) -> str:
        """``<name>.xdc``: the clock of an out-of-context run."""
        return (f"# {self.name}: clock constraint for out-of-context synthesis (written by ansforge).\n"
                f"create_clock -period {self.period_ns:.3f} -name clk [get_ports clk]\n")

    def ooc_tcl(self, verilog_file: str, xdc_file: str | None = None) -> str:
        """``<stem>_ooc.tcl``: Vivado synthesis of ``<name>`` out of context from ``verilog_file`` and
        ``xdc_file`` (default ``<name>.xdc``) beside the script (``vivado -mode batch -source
        <stem>_ooc.tcl``; ``-tclargs impl`` also places and routes); the reports go beside it too."""
        xdc_file = xdc_file or f"{self.name}.xdc"
        script = xdc_file[:-len(".xdc")] + "_ooc.tcl" if xdc_file.endswith(".xdc") else f"{self.name}_ooc.tcl"
        return f"""# {self.name}: Vivado out-of-context synthesis on a Kintex UltraScale+ (Table 3's family), written
# by ansforge (hdl/export.py); not run by ansforge. Run from any directory:
#   vivado -mode batch -source {script} [-tclargs impl]
# It writes {self.name}_utilization.rpt and {self.name}_timing.rpt beside this script. ANSFORGE_DSP48E2
# selects the DSP48E2 primitive of the rANS multiply-add (as ansforge's own area figures do).
set here [file dirname [file normalize [info script]]]
set part {PART}
read_verilog [file join $here {verilog_file}]
read_xdc -mode out_of_context [file join $here {xdc_file}]
synth_design -top {self.name} -part $part -mode out_of_context -verilog_define ANSFORGE_DSP48E2
if {{[lsearch -exact $argv impl] >= 0}} {{
    opt_design
    place_design
    route_design
}}
report_utilization -file [file join $here {self.name}_utilization.rpt]
report_timing_summary -max_paths 10 -file [file join $here {self.name}_timing.rpt]
"""

    def files(self, verilog_file: str | None = None) -> dict[str, str]:
        """The five texts by file name: ``verilog_file`` (default ``<name>.v``) and, named after its stem,
        ``<stem>_pkg.sv``, ``<stem>.h``, ``<stem>_ooc.tcl``, ``<stem>.xdc`` (the stem, not the module name,
        so that two exports of one core into one folder, as two ``-o`` files, never write the same file)."""
        verilog_file = verilog_file or f"{self.name}.v"
        stem = verilog_file.rsplit(".", 1)[0] if "." in verilog_file.lstrip(".") else verilog_file
        beside = {f"{stem}_pkg.sv": self.package(), f"{stem}.h": self.header(),
                  f"{stem}_ooc.tcl": self.ooc_tcl(verilog_file, f"{stem}.xdc"), f"{stem}.xdc": self.xdc()}
        if verilog_file in beside:
            raise ValueError(f"{verilog_file}: the Verilog file would have the name of a file written beside it "
                             f"({', '.join(beside)}); give it another name")
        return {verilog_file: self.verilog(), **beside}


# --- helpers of the Verilog text --------------------------------------------------------------------------


def _range(width: int, always: bool = False) -> str:
    return f"[{width - 1}:0] " if width > 1 or always else ""


def _slice(offset: int, width: int, total: int) -> str:
    if total == 1:
        return ""
    return f"[{offset}]" if width == 1 else f"[{offset + width - 1}:{offset}]"


def _concat(parts: list[Port], width: int) -> str:
    """``{msb_field, ..., lsb_field}`` for ``width`` bits, zero bits where no field lies."""
    items, pos = [], 0
    for p in sorted(parts, key=lambda p: p.offset):
        if p.offset > pos:
            items.append(f"{p.offset - pos}'d0")
        items.append(p.name)
        pos = p.offset + p.width
    if pos < width:
        items.append(f"{width - pos}'d0")
    return items[0] if len(items) == 1 else "{" + ", ".join(reversed(items)) + "}"


def _module_ports(text: str, module: str) -> set[str]:
    m = re.search(rf"^module {re.escape(module)}\((.*?)\);", text, re.M | re.S)
    if m is None:
        raise ValueError(f"no module {module} in the Verilog text")
    return {p.strip() for p in m.group(1).split(",") if p.strip()}


def _has_port(text: str, module: str, port: str) -> bool:
    return port in _module_ports(text, module)


def _c_type(width: int) -> str:
    return "uint64_t" if 32 < width <= 64 else "uint32_t"


def _c_dims(width: int) -> str:
    return f"[{-(-width // 32)}]" if width > 64 else ""


# --- what a component's signature says ---------------------------------------------------------------------


def _enum_of(shape) -> type | None:
    return shape if isinstance(shape, type) and issubclass(shape, py_enum.Enum) else None


def _leaves(layout: data.Layout, prefix: str = "", base: int = 0):
    """(name, offset, width, enum) of every leaf of ``layout``, nested names joined with ``_``."""
    for key, f in layout:
        name = f"{prefix}{key}"
        shape = f.shape
        if isinstance(shape, data.Layout):
            yield from _leaves(shape, f"{name}_", base + f.offset)
        else:
            yield name, base + f.offset, f.width, _enum_of(shape)


def _payload(name: str, layout: data.Layout, port=None, direction=None, doc="") -> Payload:
    fields, pos = [], 0
    for fname, off, width, enum in sorted(_leaves(layout), key=lambda t: t[1]):
        if off < pos:
            raise ValueError(f"{name}: field {fname} overlaps another (a union layout has no flat export)")
        if off > pos:
            fields.append(Field(f"_pad{pos}", pos, off - pos))
        fields.append(Field(fname, off, width, enum))
        pos = off + width
    if pos < layout.size:
        fields.append(Field(f"_pad{pos}", pos, layout.size - pos))
    return Payload(name, layout.size, tuple(fields), port, direction, doc)


def _entry_payload(name: str, shape, doc: str) -> Payload:
    """A table entry: its layout's fields, or one field ``data`` where the entry is a plain number."""
    if isinstance(shape, data.Layout):
        return _payload(name, shape, doc=doc)
    width = Shape.cast(shape).width
    return Payload(name, width, (Field("data", 0, width),), doc=doc)


def default_name(component) -> str:
    """The module name a component is exported as when none is given: ``ansforge_<codec>_<role>`` for a
    core of the registry (``ansforge_tans8x16_decoder``, ``ansforge_rans16x16_encoder``: the codec names
    ``N``; ``_coder`` added for a coder built without its shell), ``ansforge_subsystem_<codec>_k<lanes>`` (``_fp32`` added for fp32 output) for the subsystem,
    and ``ansforge_<class in snake case>`` for any other component."""
    from .cores import REGISTRY
    from .subsystem import AxiDecompressor

    if isinstance(component, AxiDecompressor):
        name = f"ansforge_subsystem_{component.codec.name}_k{component.lanes}"
        name += "" if component.target == "bf16" else f"_{component.target}"
    else:
        codec = getattr(component, "codec", None)
        role = next((r.role for r in REGISTRY if type(component) is r.core_class), None)
        if role is None:
            role = "decoder" if "Decoder" in type(component).__name__ else \
                "encoder" if "Encoder" in type(component).__name__ else None
        if codec is not None and role is not None:
            # the coder alone (``--no-shell``) has other ports than the core: another name
            name = f"ansforge_{codec.name}_{role}" + ("_coder" if getattr(component, "shell", True) is False else "")
        else:
            name = f"ansforge_{_snake(type(component).__name__)}"
    return re.sub(r"[^a-z0-9_]", "_", name.lower())


def _enum_comments(cls) -> dict[str, str]:
    """The ``#:`` comments of an enumeration's members in its source (the register map's one text)."""
    try:
        src = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\s*(\w+)\s*=\s*[^#\n]+#:\s*(.*)$", src, re.M)}


def describe(component: wiring.Component, name: str | None = None) -> Export:
    """The :class:`Export` of ``component`` as module ``name`` (default :func:`default_name`)."""
    from .common import DecodeStatus
    from .parallel import TAG_BITS
    from .subsystem import AxiDecompressor, Csr, CSR_ID, Table

    name = name or default_name(component)
    if not name.isidentifier():
        raise ValueError(f"module name must be a Verilog identifier (letters, digits, _), not {name!r}")
    core_ports, ports, payloads, enums = [], [], [], {}
    for path, member, _ in component.signature.flatten(component):
        core = "__".join(map(str, path))
        direction = "input" if member.flow == wiring.In else "output"
        width = Shape.cast(member.shape).width
        core_ports.append((core, direction, width))
        shape = member.shape
        stem = "_".join(map(str, path[:-1] if path[-1] == "payload" else path))
        if isinstance(shape, data.Layout):
            p = _payload(stem, shape, core, direction, f"{'input' if direction == 'input' else 'output'} "
                                                       f"payload of stream {stem} (core port {core})")
            payloads.append(p)
            for f in p.fields:
                ports.append(Port(f"{stem}_{f.name}", direction, f.width, core, f.offset))
                if f.enum is not None:
                    enums[f.enum.__name__] = f.enum
        else:
            ports.append(Port("_".join(map(str, path)), direction, width, core))
            if _enum_of(shape) is not None:
                enums[shape.__name__] = shape
    names = [p.name for p in ports] + ["clk", "rst"]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ValueError(f"{type(component).__name__}: wrapper ports {', '.join(clash)} would have one name")
    export = Export(name, component, core_ports, ports, payloads, enums)
    codec = getattr(component, "codec", None)
    export.summary = type(component).__name__ + (f", codec {codec.name}" if codec is not None else "")
    if isinstance(component, AxiDecompressor):
        export.summary += f", {component.lanes} lane{'s' if component.lanes != 1 else ''}, {component.target} out, {component.bus_bits}-bit AXI4"
        export.period_ns = SUBSYSTEM_PERIOD_NS
        enums.setdefault("DecodeStatus", DecodeStatus)     # the STATUS register's [6:4]
        docs = _enum_comments(Csr)
        export.registers = {f"CSR_{m.name}": (int(m), docs.get(m.name, "")) for m in Csr}
        tdocs = _enum_comments(Table)
        export.tables = {f"TABLE_{m.name}": (int(m), tdocs.get(m.name, "")) for m in Table}
        export.constants = {
            "CSR_ID_VALUE": (CSR_ID, "the ID register"),
            "PARAMS_VALUE": (component.params_word(), "the PARAMS register of this build"),
            "LANES": (component.lanes, "decoder lanes"),
            "BUS_BITS": (component.bus_bits, "AXI4 read data width"),
        }
        par = component.parallel
        unit = par.unit_bits
        export.constants.update({
            "RECORDS_VALUE": (component.records_word(), "the RECORDS register of this build"),
            "UNIT_BITS": (unit, "a lane region's unit: records are whole units, unit 0 of a beat in its low bits"),
            "HEADER_UNITS": (par.header_units, "units of a record's header"),
            "ENTRY_UNITS": (par.entry_units, "units of a table entry"),
            "TAG_BITS": (TAG_BITS, "a record's tag: slot l's is bits [TAG_BITS l +: TAG_BITS] of m_axis_tuser"),
        })
        payloads.append(_entry_payload("record_header", par.header_layout,
                                       "a record's header in a lane's region, from bit 0 of its first unit: its "
                                       "block's pairs and stream words, the table entries that follow it, and "
                                       "the tag its weights carry on m_axis_tuser (TAG_BITS a slot)"))
        payloads.append(_entry_payload("table_entry", par.entry_layout,
                                       "a table entry in a record, from bit 0 of its first unit: data (below) "
                                       "written at addr of the lane's table kind (TABLE_*)"))
        for kind, layout in (("decoder", component.decoder_cfg_layout), ("float", component.float_cfg_layout)):
            payloads.append(_entry_payload(f"tbl_{kind}", layout["data"].shape,
                                           f"the data of a TABLE_{kind.upper()} entry, from bit 0 (its address "
                                           f"< 2**{layout['addr'].width})"))
    return export


def export_files(component: wiring.Component, name: str | None = None, verilog_file: str | None = None) -> dict[str, str]:
    """:meth:`Export.files` of :func:`describe`: file name -> text."""
    return describe(component, name).files(verilog_file)
