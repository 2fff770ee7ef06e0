"""``ansforge board build`` and ``ansforge board run``: the decompression subsystem on a real board."""

from __future__ import annotations

import argparse

from .common import UsageError, group, staged, verb, write_json

group("board", __name__, help="build a bitstream for a board, or run a container through one",
      description="The decompression subsystem on an FPGA board (docs/board.md): `board build` makes the "
                  "bitstream, `board run` drives the board (or its simulation) over its UART.",
      dest="board_verb", metavar="BOARD_VERB")


#: What ``--board`` takes (``hdl/board.py`` ``BOARDS``, checked in the handler: building the parser
#: imports no HDL).
BOARD_NAMES = ("ulx3s-85f",)


def _codec_help() -> str:
    from ..model.coding.registry import codec_help, default_for

    return codec_help(what="the lanes' codec", default_text=f"default: the default container format's, "
                                                             f"{default_for('tans')}")


def _build_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--board", default="ulx3s-85f", metavar="NAME",
                   help=f"the board: {', '.join(BOARD_NAMES)} (default ulx3s-85f)")
    p.add_argument("--codec", default=None, metavar="CODEC", help=_codec_help())
    p.add_argument("--lanes", type=int, default=1, metavar="K", help="decoder lanes: 1, 2, 4 or 8 (default 1)")
    p.add_argument("--target", default="bf16", choices=("bf16", "fp32"), help="the weights' format (default bf16)")
    p.add_argument("--clock-mhz", type=float, default=None, metavar="F",
                   help="the design clock (default: the board's for the lane count, chosen from out-of-context place "
                        "and route at its speed grade: 65 MHz for 1 lane and 62.5 for 2 on the ULX3S-85F; other lane "
                        "counts need it; see docs/board.md)")
    p.add_argument("--memory-kib", type=int, default=None, metavar="KIB",
                   help="block memory for compressed words (default: the board's, 416 KiB on the ULX3S-85F: all its block RAM)")
    p.add_argument("--seed", type=int, default=1, metavar="S", help="nextpnr's placement seed (default 1)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder to write: top.bit, top.svf, build.json and the tools' logs")


@verb("build", _build_arguments, under="board", help="build a bitstream: PLL, UART, block memory, lanes, checker",
      description="Synthesize, place and route and pack a bitstream for the board (Amaranth's platform flow from "
                  "amaranth-boards, YoWASP yosys, nextpnr-ecp5 and ecppack): the PLL from the board's oscillator to "
                  "the design clock, a UART at 3 Mbaud, on-chip block memory for compressed words, the subsystem's "
                  "lanes and a CRC-32 checker of their weights. Prints each step, then the achieved clock and slack. "
                  "Program it with `openFPGALoader -b ulx3s DIR/top.bit`.",
      force=True, outputs={"output": "dir"}, json="also write the build's summary (clock, Fmax, slack, times) as JSON")
def board_build(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..analysis.board import build_bitstream
    from ..model.coding.codecs import parse_codec
    from ..model.errors import ConfigError

    from ..hdl.board import BOARDS

    if args.board not in BOARDS:
        raise UsageError(f"--board {args.board}: one of {', '.join(BOARDS)}")
    if args.lanes not in (1, 2, 4, 8):
        raise UsageError(f"--lanes {args.lanes}: 1, 2, 4 or 8")
    if args.memory_kib is not None and not 16 <= args.memory_kib <= 4096:
        raise UsageError(f"--memory-kib {args.memory_kib}: between 16 and 4096")
    codec = parse_codec(args.codec) if args.codec else None
    with staged(args, args.output, kind="dir") as tmp:
        try:
            b = build_bitstream(tmp, board=args.board, lanes=args.lanes, codec=codec, target=args.target,
                                clock_mhz=args.clock_mhz, memory_kib=args.memory_kib, seed=args.seed)
        except (ConfigError, ValueError, TypeError) as exc:
            raise UsageError(str(exc)) from None
    verdict = "met" if b.met else "NOT met"
    print(f"{args.output}/top.bit: {b.board}, {b.lanes} lane(s) of {b.codec}, {b.target} weights, {b.memory_kib} KiB "
          f"block memory")
    print(f"clock {b.clock_mhz:g} MHz, achieved Fmax {b.fmax_mhz:.1f} MHz (nextpnr-ecp5, speed grade of the board, "
          f"seed {args.seed}): timing {verdict}, slack {b.slack_ns:+.2f} ns")
    print(f"UART {b.baud / 1e6:.3f} Mbaud ({b.divisor} clocks a bit); steps "
          + ", ".join(f"{k} {v:.0f} s" for k, v in b.seconds.items()))
    write_json(args, args.json, {"verb": "board build", **asdict(b), "directory": args.output,
                                 "bitstream": f"{args.output}/top.bit", "svf": f"{args.output}/top.svf"})
    return 0 if b.met else 1


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("container", metavar="FILE.ansf", help="the container whose blocks to decode on the board")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", metavar="DEV", help="the board's serial port (e.g. /dev/ttyUSB0)")
    where.add_argument("--sim", action="store_true",
                       help="the same board top in Verilator behind a pseudo-terminal instead of a board")
    p.add_argument("--tensor", action="append", default=None, metavar="NAME",
                   help="only this tensor (repeatable; default: every coded tensor)")
    p.add_argument("--lanes", type=int, default=1, metavar="K",
                   help="with --sim: the simulated build's lanes (default 1); a board says its own")
    p.add_argument("--codec", default=None, metavar="CODEC", help=f"with --sim: {_codec_help()}")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds to wait for a START to finish (default 60)")


@verb("run", _run_arguments, under="board", help="decode a container's blocks on the board and check them",
      description="Upload each block of the container to the board's memory, run it, and compare each lane's "
                  "count and CRC-32 with the software decode of the same block; prints per block its pairs, the "
                  "clocks from the START to its last weight, pairs per clock and the decode rate at the board's "
                  "clock. A mismatch exits 1 naming the block. --sim runs the bitstream's own top in Verilator "
                  "through the same host code (UART bits included, at a faster divisor).",
      json="also write every block's result as JSON")
def board_run_verb(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    from ..model.coding.container import open_container
    from ..model.coding.codecs import parse_codec
    from ..sim.board import BoardLink, board_run, simulated_board

    if args.lanes not in (1, 2, 4, 8):
        raise UsageError(f"--lanes {args.lanes}: 1, 2, 4 or 8")
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout}: a positive number of seconds")
    if not args.sim and (args.lanes != 1 or args.codec):
        raise UsageError("--lanes and --codec describe a simulated build (--sim); a board says its own")
    container = open_container(args.container)
    known = {r["name"] for r in container.tensors}
    for name in args.tensor or ():
        if name not in known:
            raise UsageError(f"--tensor {name}: {args.container} has no tensor of that name")
    import serial

    with ExitStack() as stack:
        if args.sim:
            from ..analysis.board import design_clock_mhz

            clock, _ = design_clock_mhz("ulx3s-85f", args.lanes)
            board = stack.enter_context(simulated_board(lanes=args.lanes, clock_hz=round(clock * 1e6),
                                                        codec=parse_codec(args.codec) if args.codec else None))
            port, name = board.port, "simulated board"
        else:
            port, name = args.port, args.port
        try:
            ser = stack.enter_context(serial.Serial(port, 3_000_000, timeout=2.0 if not args.sim else 30.0))
        except serial.SerialException as exc:
            raise UsageError(f"--port {port}: {exc}") from None
        rows = []

        def show(r):
            rate = r.pairs / r.cycles * clock_mhz if r.cycles else 0.0
            mark = "ok" if r.ok else ("MISMATCH" if r.status == "OK" else r.status)
            print(f"START {r.start:3d} lane {r.lane}: {r.tensor} block {r.block}: {r.pairs:,} pairs, {r.cycles:,} clocks, "
                  f"{r.pairs_per_clock():.3f} pairs/clock, {rate:.1f} M weights/s at {clock_mhz:g} MHz: {mark}",
                  flush=True)
            rows.append(r)

        def summary(done):
            if len(done) > 1:
                pairs, clocks = sum(r.pairs for r in done), max(r.cycles for r in done)
                print(f"START {done[0].start:3d}: {len(done)} blocks, {pairs:,} pairs in {clocks:,} clocks, "
                      f"{pairs / clocks:.3f} pairs/clock, {pairs / clocks * clock_mhz:.1f} M weights/s", flush=True)

        link = BoardLink(ser, name=name)
        clock_mhz = link.info().clock_hz / 1e6
        info, results = board_run(link, container, names=args.tensor, timeout_s=args.timeout, on_block=show,
                                   on_start=summary)
    bad = [r for r in results if not r.ok]
    pairs = sum(r.pairs for r in results)
    parts = sum(1 for r in results if "part" in str(r.block))
    print(f"{len(results)} blocks{f' ({parts} of them parts of larger blocks)' if parts else ''}, {pairs:,} pairs on {name} ({info.lanes} lane(s) of {info.codec}, "
          f"{info.clock_hz / 1e6:g} MHz{', simulated' if args.sim else ''}): "
          + ("every count and CRC-32 equal to the software decode" if not bad else f"{len(bad)} mismatched"))
    write_json(args, args.json, {
        "verb": "board run", "container": args.container, "board": name, "simulated": bool(args.sim),
        "lanes": info.lanes, "codec": info.codec, "clock_hz": info.clock_hz,
        "blocks": [{"start": r.start, "lane": r.lane, "tensor": r.tensor, "block": r.block, "pairs": r.pairs,
                    "cycles": r.cycles, "count": r.count, "crc": r.crc, "expected_crc": r.expected_crc,
                    "status": r.status, "ok": r.ok} for r in results]})
    if bad:
        r = bad[0]
        print(f"ansforge: error: {r.tensor} block {r.block} (START {r.start}, lane {r.lane}): {r.count:,} weights, "
              f"CRC-32 {r.crc:08x}, status {r.status}; the software decode gives {r.pairs:,} weights, CRC-32 "
              f"{r.expected_crc:08x}")
        return 1
    return 0
