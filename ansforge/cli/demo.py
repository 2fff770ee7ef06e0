"""``ansforge demo``: Table-1 estimates from the shipped exponent histograms (or a checkpoint's full Table 1)."""

from __future__ import annotations

import argparse

from .common import alias, refuse, spelled, threads, verb, write_json


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, metavar="PATH", help="compute the full Table 1 of this checkpoint instead")
    p.add_argument("--histograms", default=None, metavar="F.json",
                   help="use histograms written by `ansforge histograms` instead of the shipped ones")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="with --model: tasks at a time, each in a worker process (default: one per CPU)")
    alias(p, "--jobs", "threads", type=int)
    p.add_argument("--engine", choices=("auto", "verilator", "amaranth"), default="auto",
                   help="engine of the core simulation (auto: verilator when installed)")
    p.add_argument("--no-cores", action="store_true", help="skip the cycle-accurate decoder cores")


@verb("demo", _arguments, help="Table-1 estimates from shipped exponent histograms (no download needed)",
      description="Print Table-1-style figures. With no arguments, from the exponent histograms "
                  "measured from stories260K and MiniLM-L6 that ship with ansforge; with --model, "
                  "the full Table 1 of that checkpoint.",
      json="also write the figures (Table 1 rows, each core's pairs, cycles and bit-exactness) as JSON")
def demo(args: argparse.Namespace) -> int:
    # The title first, before the imports (amaranth, numpy) and the work: a newcomer sees it at once.
    if args.model is not None:
        refuse(args, ["histograms"], "does not apply with --model (its Table 1 comes from the weights)")
    else:
        refuse(args, ["threads"], "applies only with --model (the shipped histograms need no workers)")
    if args.no_cores:
        refuse(args, ["engine"], "does not apply with --no-cores (no core is simulated)")
    threads(args.threads, spelled(args, "threads"))
    print("ansforge demo: lossless coding-pair compression (Liguori, Table 1)", flush=True)
    from ..analysis.demo import run_demo

    figures: dict = {"verb": "demo"}
    _, ok = run_demo(args.model, args.histograms, jobs=args.threads, engine=args.engine, cores=not args.no_cores,
                     emit=lambda line: print(line, flush=True), title=False, figures=figures)
    write_json(args, args.json, figures)
    return 0 if ok else 1
