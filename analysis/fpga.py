"""The decompression subsystem against what a designer would otherwise buy (``ansforge bench --only fpga``).

For each lane count ``K`` the subsystem of the default format (``tans8x16`` lanes, bf16 out, the
narrowest AXI4 bus that feeds them) is measured with the project's one definition of every hardware
figure (:mod:`.area`): LUT-equivalents, FFs, BRAM and DSP from yosys ``synth_xilinx -family xcup``;
Fmax on ECP5-8 (nextpnr-ecp5, out of context) and on a Lattice Nexus LIFCL-40 (nextpnr-nexus, inside a
ring of registers), each the median of 3 seeds; weights per clock from Verilator, every weight checked
against ``ansforge decompress``. Throughput in GB/s is decompressed bf16 bytes (2 per weight) at the
measured weights per clock and the ECP5 median Fmax.

fp32 pairs (the model's own fp32 values: 8 exponent bits coded, sign and 23 mantissa bits raw) go through
the fp32 build of the same subsystem at each ``K`` in Verilator too, its weights per clock reported against
their bound: a lane's decoder takes one 16-bit word a clock, below one pair a clock at about 27 coded bits a
weight (:func:`~ansforge.sim.subsystem.lane_bound`). Only its throughput is measured; its area and clock are not.

Beside them, the published figures of AMD's Vitis Data Compression Library kernels (:data:`VENDOR_IP`):
read from AMD's pages, not measured here, on UltraScale+ with Vivado. An ECP5 is several times slower
than an UltraScale+, so GB/s at the ECP5 clock understates what the same netlist gives there; LUT counts
are comparable (LUT-equivalents count LUT-RAM as Vivado's LUT column does).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..model import progress
from .area import NEXUS_DEVICE, CoreArea, core_area, subsystem_area

__all__ = ["VendorFigure", "VENDOR_IP", "FPGA_LANES", "Throughput", "LaneRow", "fpga_rows", "fp32_markdown", "fpga_markdown"]

#: Lane counts of the sweep (``bench --only fpga``).
FPGA_LANES = (1, 2, 4, 8, 16)

#: Decompressed bytes per bf16 weight.
BF16_BYTES = 2


@dataclass(frozen=True)
class VendorFigure:
    """A decompressor's published figures (Vivado, UltraScale+), as its vendor prints them."""

    name: str
    luts: int
    brams: int
    urams: int
    mhz: float
    mb_per_s: float | None      # decompressed MB/s; None where the page quotes none
    source: str


#: AMD Vitis Data Compression Library (Vitis Libraries), L2 decompression kernels, as published.
VENDOR_IP = (
    VendorFigure("AMD Vitis zstd decompress (32 KB window)", 22_000, 32, 3, 234, 658.86,
                 "https://xilinx.github.io/Vitis_Libraries/data_compression/2021.2/source/L2/zstdd_32KB.html"),
    VendorFigure("AMD Vitis LZ4 streaming decompress (8 bytes/clock)", 5_500, 0, 4, 300, None,
                 "https://docs.amd.com/r/2023.1-English/Vitis_Libraries/data_compression/source/L2/"
                 "lz4_dec_streaming_parallelByte8.html"),
)


@dataclass(frozen=True)
class Throughput:
    """One build's run in Verilator: its AXI4 width, weights per clock (with their bound) on the largest
    tensor and on the whole model, and the wall seconds (the Verilator build included)."""

    bus_bits: int
    big_weights_per_clock: float
    big_bound: float
    model_weights_per_clock: float
    model_bound: float
    wall_s: float


@dataclass
class LaneRow:
    """One lane count's figures: the subsystem's area and clocks, its Verilator throughput on bf16 pairs
    (the build measured), and on fp32 pairs through the fp32 build where measured."""

    lanes: int
    area: CoreArea
    bf16: Throughput
    fp32: Throughput | None = None

    @property
    def gb_per_s(self) -> float | None:
        """Decompressed bf16 GB/s on the largest tensor at the ECP5 median Fmax."""
        f = self.area.ecp5_fmax_mhz
        return None if f is None else self.bf16.big_weights_per_clock * f * 1e6 * BF16_BYTES / 1e9


def fpga_rows(model: str, lanes=FPGA_LANES, *, nexus: bool = True,
              fp32: bool = True) -> tuple[list[LaneRow], str, int, float]:
    """The sweep over ``lanes`` on the checkpoint ``model`` (bf16 pairs, the default format; with ``fp32``,
    the model's fp32 pairs through the fp32 build too: :attr:`LaneRow.fp32`); returns the rows, the largest
    tensor's name and pairs, and the lane coder's LUT-equivalents (coder alone, paper configuration) for the
    area bound ``K × (coder + 250) + 1000``."""
    from ..hdl.subsystem import AxiDecompressor, default_bus_bits
    from ..model.coding.codecs import parse_codec
    from ..model.coding.container import compress_checkpoint, open_container
    from ..sim.verilator import VerilatorEngine

    codec = "tans8x16"
    spec = parse_codec(codec)
    coder = core_area("tans-decoder", codec, shell=False, ecp5=False, widelut=False).lut_equivalents
    rows = []
    eng = VerilatorEngine()
    with tempfile.TemporaryDirectory(prefix="ansforge-fpga-") as tmp, \
            progress.bar(len(lanes), "bench fpga: lanes", unit="lane counts") as bar:
        out = Path(tmp) / "model.ansf"
        bar.note("compressing the model")
        compress_checkpoint(model, out, codec, pairs="bf16")
        c = open_container(out)
        big = max((r for r in c.tensors if r["coding"] == "pairs"), key=lambda r: int(r["n_pairs"]))
        c32 = None
        if fp32:
            out32 = Path(tmp) / "model-fp32.ansf"
            compress_checkpoint(model, out32, codec, pairs="fp32")
            c32 = open_container(out32)
        for k in lanes:
            bar.note(f"K = {k}: area and place and route")
            # the narrowest bus that feeds K lanes (64 bits up to 8 lanes): K = 16 needs 128
            dut = AxiDecompressor(spec, lanes=k, target="bf16", bus_bits=default_bus_bits(spec, k, "bf16"))
            area = subsystem_area(dut, codec, nexus=nexus)
            bar.note(f"K = {k}: Verilator")
            row = LaneRow(k, area, _throughput(c, eng, k, big["name"]))
            if c32 is not None:
                bar.note(f"K = {k}: Verilator, fp32 pairs")
                row.fp32 = _throughput(c32, eng, k, big["name"])
            rows.append(row)
            bar()
    return rows, big["name"], int(big["n_pairs"]), coder


def _throughput(container, engine, lanes: int, big: str) -> Throughput:
    """Every coded tensor of ``container`` through ``lanes`` lanes (the narrowest bus that feeds them) on
    ``engine``, the tensor ``big`` and the whole model."""
    from ..hdl.subsystem import default_bus_bits
    from ..sim.container_plan import decode_container_subsystem, runs_throughput

    target = {r["pair_format"] for r in container.tensors if r["coding"] == "pairs"}.pop()
    t = time.perf_counter()
    every = decode_container_subsystem(container, engine, lanes=lanes)
    wall = time.perf_counter() - t
    one = decode_container_subsystem(container, engine, lanes=lanes, names=[big])
    return Throughput(default_bus_bits(container.streams[0].spec, lanes, target), *runs_throughput(one),
                      *runs_throughput(every), wall)


def fp32_markdown(rows: list[LaneRow]) -> list[str]:
    """The fp32 build's throughput per lane count (the rows that have :attr:`LaneRow.fp32`), or nothing."""
    fp32 = [r for r in rows if r.fp32 is not None]
    if not fp32:
        return []
    md = ["", "fp32 pairs through the fp32 build of the same subsystem (Verilator; its area and clock are not "
              "measured). Bound = min(K, bus bits / coded bits per weight, K × 16 / coded bits per weight): a "
              "lane's decoder takes one 16-bit word a clock.", "",
          "| Lanes K | AXI4 bits | Weights / clock, largest tensor (bound) | Weights / clock, whole model (bound) "
          "| Verilator wall s |",
          "|---:|---:|---|---|---:|"]
    md += [f"| {r.lanes} | {r.fp32.bus_bits} | {r.fp32.big_weights_per_clock:.3f} ({r.fp32.big_bound:.3f}) | "
           f"{r.fp32.model_weights_per_clock:.3f} ({r.fp32.model_bound:.3f}) | {r.fp32.wall_s:.0f} |" for r in fp32]
    return md


def fpga_markdown(rows: list[LaneRow], big: str, big_pairs: int, coder: int, model_name: str) -> list[str]:
    """The section's Markdown: the sweep, the vendor figures, and what each column means."""
    md = ["| Lanes K | AXI4 bits | LUT-equivalents | Bound K×(coder+250)+1000 | FFs | BRAM | DSP | "
          "ECP5-8 Fmax MHz (seeds) | Nexus Fmax MHz (seeds) | Weights / clock, largest tensor (bound) | "
          "Weights / clock, whole model (bound) | GB/s bf16 at ECP5 Fmax, largest tensor | GB/s per 1,000 LUT-eq | Verilator wall s |",
          "|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---:|---:|---:|"]

    def mhz(median, seeds):
        return "n/a" if median is None else f"{median:.1f} ({', '.join(f'{s:.1f}' for s in seeds)})"

    for r in rows:
        a = r.area
        bound = r.lanes * (coder + 250) + 1000
        gbs = r.gb_per_s
        t = r.bf16
        md.append(f"| {r.lanes} | {t.bus_bits} | {a.lut_equivalents:,} | {bound:,} "
                  f"({'met' if a.lut_equivalents <= bound else f'{a.lut_equivalents / bound - 1:.0%} over'}) | "
                  f"{a.ffs:,} | {a.brams} | {a.dsps} | {mhz(a.ecp5_fmax_mhz, a.ecp5_fmax_seeds)} | "
                  f"{mhz(a.nexus_fmax_mhz, a.nexus_fmax_seeds)} | {t.big_weights_per_clock:.3f} ({t.big_bound:.3f}) | "
                  f"{t.model_weights_per_clock:.3f} ({t.model_bound:.3f}) | "
                  f"{'n/a' if gbs is None else f'{gbs:.2f}'} | "
                  f"{'n/a' if gbs is None else f'{gbs / a.lut_equivalents * 1000:.3f}'} | {t.wall_s:.0f} |")
    md += fp32_markdown(rows)
    md += ["", f"Largest tensor: `{big}` ({big_pairs:,} weights of {model_name}, {-(-big_pairs // (1 << 18))} "
               "independent blocks). Whole model: every coded tensor's blocks dealt to the lanes, longest first, "
               "in STARTs of up to 2 M pairs a lane, each lane loading a block's tables from its region where it "
               "does not hold them; the clocks include the table loads. Lane coder: the tANS decoder alone, paper "
               f"configuration, {coder} LUT-equivalents. Output: each weight with its block's 16-bit tag in its "
               f"slot of `TUSER`. Fmax: median of 3 seeds; Nexus {NEXUS_DEVICE} "
               "(yosys synth_nexus with abc for its LUT step, nextpnr-nexus router1), the design inside a ring "
               "of registers because nextpnr-nexus has no out-of-context mode.", "",
           "Published decompression kernels (AMD Vitis Data Compression Library on UltraScale+ with Vivado; "
           "published figures, **not measured here**):", "",
           "| Kernel | LUTs | BRAM | URAM | MHz | Decompressed MB/s | GB/s per 1,000 LUTs | Source |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for v in VENDOR_IP:
        per = "n/a" if v.mb_per_s is None else f"{v.mb_per_s / 1000 / v.luts * 1000:.3f}"
        md.append(f"| {v.name} | {v.luts:,} | {v.brams} | {v.urams} | {v.mhz:g} | "
                  f"{'not quoted' if v.mb_per_s is None else f'{v.mb_per_s:g}'} | {per} | {v.source} |")
    md += ["", "The vendor kernels decompress general byte streams (zstd, LZ4) and run at their UltraScale+ "
               "clock; the subsystem decodes weights coded by ansforge, and its GB/s is at the ECP5 clock, "
               "several times below what the same netlist reaches on UltraScale+."]
    return md
