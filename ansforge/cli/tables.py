"""``ansforge tables``: the paper's Table 1 for a checkpoint."""

from __future__ import annotations

import argparse

from ..model import progress
from .common import UsageError, check_dask, dask_cluster, spelled, threads, verb, write, write_json


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="llama2.c .bin, safetensors or GGUF checkpoint")
    p.add_argument("--markdown", default=None, metavar="F", help="also write the table as Markdown")
    p.add_argument("--per-matrix", action="store_true", help="add one row per matrix")
    p.add_argument("--general", default="gzip,bzip2,xz,zstd", metavar="LIST",
                   help="general-purpose compressors to run, comma-separated from gzip,bzip2,xz,zstd "
                        "(default: all; empty for none), and zipnn (the [peers] extra)")
    p.add_argument("--no-constriction", action="store_true", help="skip the constriction rANS row")
    from ..model.coding.registry import PAPER, codec_help, summary

    rows = f"{PAPER['rans']},{PAPER['tans']}"
    p.add_argument("--codecs", default=rows, metavar="LIST",
                   help=f"golden ANS codecs to run, each a row with its gap to Ideal, comma-separated: {summary()} "
                        f"(default: {rows}, the paper's rows; empty for none)")
    p.add_argument("--context-codec", default=PAPER["rans"], metavar="CODEC",
                   help=codec_help(what="codec of the Context row (compress --context, read back from the file)",
                                   default_text=f"default {PAPER['rans']}, empty for no such row"))


@verb("tables", _arguments, help="the paper's Table 1 for a checkpoint",
      description="Table 1 (§2.1): Original, Simple, Ideal, the ANS rows, constriction rANS, and "
                  "gzip -9 / bzip2 -9 / xz -9 / zstd -19 of the concatenated coded bytes.",
      json="also write the table as JSON", force=True, selection="pairs", parallel=True,
      outputs={"markdown": "file"})
def tables(args: argparse.Namespace) -> int:
    from ..analysis.table1 import compute_table1

    from ..analysis.table1 import GENERAL_COMPRESSORS, PEER_COMPRESSORS
    from ..model.coding.codecs import parse_codec

    general = [g.strip() for g in args.general.split(",") if g.strip()]
    for g in general:     # every value is checked before hours of work, not after
        if g not in GENERAL_COMPRESSORS and g not in PEER_COMPRESSORS:
            raise UsageError(f"--general: unknown compressor {g!r} (expected any of "
                             f"{', '.join([*GENERAL_COMPRESSORS, *PEER_COMPRESSORS])})")
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    for flag, c in [("--codecs", c) for c in codecs] + [("--context-codec", args.context_codec.strip())] * bool(
            args.context_codec.strip()):
        try:
            parse_codec(c)
        except (ValueError, ArithmeticError) as exc:
            raise UsageError(f"{flag} {c}: {exc}") from None
    threads(args.threads, spelled(args, "threads"))
    check_dask(args)
    with dask_cluster(args) as client:
        table = compute_table1(args.model, pairs=args.pairs, include=args.include, exclude=args.exclude,
                               general=general, constriction=not args.no_constriction, codecs=codecs,
                               context=args.context_codec.strip() or None, jobs=args.threads,
                               dask=client, progress=progress.enabled())
    print(table.format_text(per_matrix=args.per_matrix))
    write_json(args, args.json, table.to_json())
    write(args, args.markdown, table.to_markdown(per_matrix=args.per_matrix))
    return 0
