"""``ansforge bench``: speed, size and memory, written to BENCHMARKS.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..model import progress
from .common import UsageError, refuse, verb, write, write_json


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="BENCHMARKS.md", metavar="F", help="report to write (default BENCHMARKS.md)")
    p.add_argument("--layers", type=int, default=32, metavar="L",
                   help="layers of the synthetic Llama-2-7B folder (default 32, the full 6.7 G weights; about 36 GB of disk)")
    p.add_argument("--skip-7b", action="store_true", help="skip the synthetic 7B-shape run")
    p.add_argument("--tmpdir", default=None, metavar="DIR", help="where to write the temporary checkpoint")
    p.add_argument("--only", default=None, metavar="LIST",
                   help="comma-separated sections: table1, coders, software, hardware, subsystem, fpga, board, context, prove, "
                        "llama, "
                        "streaming, 7b (default: all)")
    p.add_argument("--fpga-lanes", default=None, metavar="LIST",
                   help="lane counts of the fpga section (comma-separated, each 1 to 32; default 1,2,4,8,16)")
    p.add_argument("--stories", default=None, metavar="PATH",
                   help="stories260K.bin for the llama section (default: ../shared/models beside the checkout)")


@verb("bench", _arguments, help="measure speed, size and memory; write BENCHMARKS.md",
      description="Benchmarks: Table 1 on MiniLM against gzip/bzip2/xz/zstd and constriction, the coders' "
                  "speed against peers, the cores, and a synthetic Llama-2-7B-size folder through compress, "
                  "decompress, inspect, tables and simulate (written to a temporary folder, deleted after), "
                  "each step's wall time and peak memory.",
      force="replace an existing report (with --only: replace those sections in it, keep the others)",
      outputs={"output": "file"},
      json="also write the report's sections and tables as JSON (the same figures as the Markdown)")
def bench(args: argparse.Namespace) -> int:
    from ..analysis.bench import run_bench

    from ..analysis.bench import SECTIONS

    only = [x.strip() for x in args.only.split(",") if x.strip()] if args.only else None
    for section in only or ():
        if section not in SECTIONS:
            raise UsageError(f"--only: no section {section!r} (sections: {', '.join(SECTIONS)})")
    if args.skip_7b or (only is not None and "7b" not in only):
        refuse(args, ["layers", "tmpdir"], "applies only to the 7b section, which this run skips")
    fpga_lanes = None
    if args.fpga_lanes is not None:
        if only is not None and "fpga" not in only:
            raise UsageError("--fpga-lanes applies only to the fpga section, which this run skips")
        try:
            fpga_lanes = tuple(int(x) for x in args.fpga_lanes.split(","))
        except ValueError:
            raise UsageError(f"--fpga-lanes: {args.fpga_lanes!r} is not a comma-separated list of lane counts") from None
        bad = [k for k in fpga_lanes if not 1 <= k <= 32]
        if bad or not fpga_lanes:
            raise UsageError(f"--fpga-lanes: lane counts are 1 to 32, not {args.fpga_lanes}")
    if args.tmpdir is not None and not Path(args.tmpdir).is_dir():
        raise UsageError(f"{args.tmpdir}: no such directory (for --tmpdir)")
    for name in ("layers",):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, not {getattr(args, name)}")
    with progress.activity(f"bench: {', '.join(only) if only else 'every section'}"):
        rep = run_bench(layers=args.layers, skip_7b=args.skip_7b,
                        tmpdir=args.tmpdir, argv=sys.argv[1:], only=only, stories=args.stories,
                        fpga_lanes=fpga_lanes)
    merged = only is not None and args.output is not None and Path(args.output).is_file()
    if merged:
        # A run of some sections updates those in the existing report (--force): the others stay.
        from ..analysis.bench import merge_report
        rep = merge_report(Path(args.output).read_text(), rep, only, "ansforge " + " ".join(sys.argv[1:]))
    write(args, args.output, rep)
    if args.json is not None:
        from ..analysis.report_tables import markdown_tables

        write_json(args, args.json, {"verb": "bench", "output": args.output, "only": only,
                                     "sections": markdown_tables(rep)})
    print(f"updated {', '.join(only)} in {args.output}" if merged else f"wrote {args.output}")
    return 0
