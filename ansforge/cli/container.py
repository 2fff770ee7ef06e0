"""The .ansf container verbs: ``compress``, ``decompress`` and ``inspect``; ``quantize`` makes the quantized
checkpoints (GGUF Q4_0, fp8 safetensors) that ``compress`` codes as pairs."""

from __future__ import annotations

import argparse
import functools

from ..model import progress
from .common import UsageError, add_dask, check_dask, dask_cluster, given, one_pass_memory, refuse, spelled, \
    staged, threads, verb, write_json


def _compress_arguments(p: argparse.ArgumentParser) -> None:
    from ..model.coding.registry import DEFAULT_FORMAT, codec_help

    p.add_argument("--model", required=True, metavar="PATH", help="llama2.c .bin, safetensors or GGUF checkpoint")
    p.add_argument("--codec", default=None, metavar="CODEC",
                   help=codec_help(DEFAULT_FORMAT, what="the codec of every stream"))
    p.add_argument("--pairs", default="auto", choices=["auto", "bf16", "fp16", "fp32", "e4m3", "e5m2"],
                   help="pair format: auto keeps each tensor's storage type (lossless); bf16/fp16/fp32 convert "
                        "(RNE); e4m3/e5m2 convert every matrix to fp8 with a per-tensor scale (absmax to the "
                        "largest finite fp8, OCP satfinite; lossy, reported). fp8 and GGUF Q4_0 tensors are "
                        "always coded losslessly as they are")
    p.add_argument("--layout", default=None, choices=["blocks", "model", "tensor"],
                   help="blocks (default; container version 6): each tensor cut into independent blocks of at most "
                        "262144 pairs, coded and decoded on --threads, each block its own random-access point; "
                        "model: one stream with a checkpoint every --checkpoint-interval pairs (versions 2 to 5); "
                        "tensor: one such stream per tensor")
    p.add_argument("--checkpoint-interval", type=int, default=None, metavar="PAIRS",
                   help="with --layout model or tensor (the default layout when given alone): a random-access "
                        "checkpoint every PAIRS pairs (default 1048576; 0 for none)")
    p.add_argument("--stream-per-tensor", action="store_true",
                   help="--layout tensor: one independent stream per tensor, with checkpoints")
    p.add_argument("--context", action="store_true",
                   help="context tables: code each 2-D matrix with up to --context-sets table sets chosen per "
                        "row/column group, the top mantissa bit in the code, where that costs fewer bytes in the file "
                        "than one table (every table set, spread, select and record byte charged), so the file is "
                        "never larger than without --context (container version 4 to 7)")
    p.add_argument("--context-sets", type=int, default=8, metavar="N",
                   help="with --context: table sets per matrix, at most (1..16, default 8)")
    p.add_argument("--allow-nonfinite", action="store_true", help="code NaN/Inf weights (exactly) instead of refusing")
    p.add_argument("-o", "--output", required=True, metavar="F.ansf", help="container to write")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="parallel workers (default 1; the file is the same for any N): with the blocks layout, "
                        "whole tensors on N processes (split, tables, blocks), or a tensor's blocks on N threads "
                        "when it holds most of the model's weights; the other layouts' tensors on N threads")
    add_dask(p, "one task per tensor (split, tables, blocks; the same file; --layout blocks or tensor)")


@verb("compress", _compress_arguments, help="compress a checkpoint into an .ansf container",
      description="Code every tensor of a checkpoint with a golden ANS codec into a container "
                  "(docs/bitstream.md): float tensors as coding pairs, others stored raw.",
      force="replace an existing output file", json="also write what was written (sizes, bits per pair, "
      "formats, lossy conversions) as JSON", outputs={"output": "file"})
def compress(args: argparse.Namespace) -> int:
    from ..model.coding.codecs import parse_codec
    from ..analysis.parallel import ordered_results
    from ..model.coding.container import DEFAULT_CODEC, DEFAULT_LAYOUT, compress_checkpoint

    if not args.context:
        refuse(args, ["context_sets"], "needs --context")
    if not 1 <= args.context_sets <= 16:
        raise UsageError(f"--context-sets must be between 1 and 16, not {args.context_sets}")
    if args.checkpoint_interval is not None and args.checkpoint_interval < 0:
        raise UsageError(f"--checkpoint-interval must be 0 or more, not {args.checkpoint_interval}")
    layout = args.layout
    if args.stream_per_tensor:
        if layout not in (None, "tensor"):
            raise UsageError(f"--stream-per-tensor is --layout tensor; it cannot go with --layout {layout}")
        layout = "tensor"
    if layout is None:  # checkpoints belong to the one-stack layouts: given alone, they choose one
        layout = "model" if args.checkpoint_interval is not None else DEFAULT_LAYOUT
    if layout == "blocks" and args.checkpoint_interval is not None:
        raise UsageError("--checkpoint-interval needs --layout model or tensor: the blocks layout's independent "
                         "blocks are its random-access points")
    codec = args.codec or DEFAULT_CODEC
    n = threads(args.threads)
    check_dask(args)
    if args.dask is not None and layout == "model":
        raise UsageError("--dask codes each tensor as a task of its own: it takes --layout blocks (the default) or "
                         "tensor, not the model layout's one stream" + (" (which --checkpoint-interval alone selects)"
                                                                          if args.layout is None else ""))
    try:
        parse_codec(codec)
    except (ValueError, ArithmeticError) as exc:
        raise UsageError(f"--codec {codec}: {exc}") from None
    one_pass_memory()
    out = args.output
    with dask_cluster(args) as client, staged(args, out) as tmp, \
            progress.bar(None, f"compress ({codec}, {layout} layout)", unit="w", scale=True) as bar:
        tasks = None if client is None else functools.partial(ordered_results, client)
        # compress counts a weight twice (split into pairs, then coded): the bar shows weights, each
        # half done after its split, so its rate and ETA follow the work itself
        r = compress_checkpoint(args.model, tmp, codec, pairs=args.pairs, checkpoint_interval=args.checkpoint_interval,
                                layout=layout, allow_nonfinite=args.allow_nonfinite, threads=n,
                                context=args.context, context_sets=args.context_sets, tasks=tasks,
                                progress=lambda done, total: bar.to(done // 2, total // 2))
    write_json(args, args.json, {"verb": "compress", "model": args.model, "output": out, "codec": codec,
                                 **{k: v for k, v in r.items() if not k.startswith("_")}})
    cut = f"{r['blocks']:,} independent blocks" if layout == "blocks" else \
        f"{r['streams']} stream{'s' if r['streams'] != 1 else ''}"
    print(f"wrote {out}: {codec}, {layout} layout (container version {r['version']}, {cut}), {r['tensors']} tensors "
          f"({r['coded']} coded), {r['pairs']:,} pairs, {r['bytes']:,} bytes; "
          f"{r['bits'] / max(1, r['pairs']):.4f} bits/pair, {100 * r['gap']:+.4f}% vs ideal")
    if "context" in r:
        k = r["context"]
        print(f"context: {k['kept']} of {k['matrices']} matrices kept a plan (the others cost less with one table), "
              f"{r['bytes']:,} bytes, {100 * (r['bytes'] / k['plain_bytes'] - 1):+.2f}% vs one table per matrix "
              f"({k['plain_bytes']:,} bytes)")
    from ..model.coding.container import format_lines

    for line in format_lines({k: v for k, v in r["formats"].items() if k in ("e4m3", "e5m2", "q4_0")}):
        print(line)
    if r["lossy"]:
        name, conv = r["lossy"][0]
        more = f" (and {len(r['lossy']) - 1} more; `ansforge inspect` lists each)" if len(r["lossy"]) > 1 else ""
        print(f"lossy: {len(r['lossy'])} tensors converted, e.g. {name}: {conv}{more}")
    return 0


def _decompress_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("container", metavar="F.ansf", help="container written by `ansforge compress`")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="safetensors file to write (with the source's config.json beside it, when the container "
                        "has one: a sharded folder's, a llama2.c model's); for the container of a sharded folder, "
                        "a folder to write the same shards, index and config.json into (a name ending in "
                        ".safetensors writes one file instead)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="threads that decode the independent blocks (or a stream's checkpoint segments) at once, "
                        "ahead of the writer, and that write the output (default 1; the output is the same for any N)")


@verb("decompress", _decompress_arguments, help="decompress an .ansf container to safetensors, bit-exact",
      description="Decode every stream of a container (checking each block's CRC-32) and write "
                  "the tensors, bit for bit as they were coded, to a safetensors file, or the container of "
                  "a sharded Hugging Face folder back to its shards, index and config.json.",
      force="replace an existing output file (or write into an existing folder)",
      json="also write what was written as JSON")
def decompress(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..model.coding.container import open_container
    from .common import check_output

    n = threads(args.threads)
    one_pass_memory()
    c = open_container(args.container)
    out = Path(args.output)
    if c.sharded and not out.name.endswith(".safetensors"):
        with staged(args, out, kind="dir") as tmp:
            files = c.decompress_folder(tmp, threads=n)
        written = sum(1 for r in c.tensors if "scales_of" not in r) + sum(1 for r in c.tensors if "scale" in r)
        what = f"{len(files)} shards, {'an index, ' if c.file_layout['index'] is not None else ''}" \
               f"{'config.json, ' if c.config_text() is not None else ''}{written} tensors"
        extra = {"shards": files}
    else:
        config = c.config_text()
        beside = out.with_name("config.json") if config is not None else None
        if beside is not None:
            check_output(args, beside, option="config.json beside the output")   # before any work
        check_output(args, out, option=given(args, "output") or "-o")
        with staged(args, out) as tmp:
            written = c.decompress(tmp, threads=n)
            if beside is not None:
                with staged(args, beside) as tmp_config, open(tmp_config, "w", encoding="utf-8", newline="") as f:
                    f.write(config)
        what = f"{written} tensors" + (f", and {beside}" if beside is not None else "")
        extra = {"config": str(beside) if beside is not None else None}
    write_json(args, args.json, {"verb": "decompress", "container": args.container, "output": args.output,
                                 "tensors": written, "version": c.version, **extra})
    print(f"wrote {args.output}: {what}")
    return 0


def _inspect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("container", metavar="F.ansf", help="container written by `ansforge compress`")
    p.add_argument("--tensor", default=None, metavar="NAME", help="also decode this tensor's values")
    p.add_argument("--range", default=None, metavar="START:COUNT",
                   help="with --tensor: decode only this range, from the independent blocks it lies in (or the "
                        "nearest checkpoint)")


@verb("inspect", _inspect_arguments, help="list an .ansf container's streams, codecs and tensors",
      description="List a container's streams, codecs, tables and tensors; with --tensor, decode "
                  "one tensor (or a range of it, from the nearest checkpoint).",
      json="also write the listing (and the decoded values) as JSON", force="replace an existing JSON file")
def inspect(args: argparse.Namespace) -> int:
    from ..model.coding.container import open_container

    span = None
    if args.range is not None:
        if args.tensor is None:
            raise UsageError(f"{spelled(args, 'range')} needs --tensor (the tensor whose values to decode)")
        try:
            a, n = (int(v) for v in args.range.split(":"))
        except ValueError:
            raise UsageError(f"--range must be START:COUNT, not {args.range!r}") from None
        if a < 0 or n < 0:
            raise UsageError(f"--range START:COUNT takes numbers of 0 or more, not {args.range!r}")
        span = (a, n)
    c = open_container(args.container)
    if args.tensor is not None:
        c.record(args.tensor)         # a missing tensor: one line, before the listing
    vals = None
    if args.tensor is not None:       # decoded (and checked) before anything is printed
        vals = c.decode_range(args.tensor, *span) if span else c.read(args.tensor).ravel()
    print(c.inspect())
    if vals is not None:
        import numpy as np

        with np.printoptions(threshold=20, edgeitems=8):
            print(f"{args.tensor}: {vals.size} values (bit patterns {vals.dtype}): {vals}")
    if args.json:
        doc = {"verb": "inspect", "container": args.container, "version": c.version, **c.summary(),
               "stream_list": [{"index": st.index, "codec": st.spec.name, "pairs": st.n_pairs, "words": st.n_words,
                                "word_bytes": st.word_bytes, "checkpoints": len(st.checkpoints),
                                "crc_blocks": len(st.blocks)} for st in c.streams],
               "formats": c.formats(),
               "tensor_list": [{k: v for k, v in r.items() if not k.startswith("_")} for r in c.tensors]}
        if vals is not None:
            doc["decoded"] = {"tensor": args.tensor, "start": span[0] if span else 0, "count": int(vals.size),
                              "dtype": str(vals.dtype), "bit_patterns": vals}
        write_json(args, args.json, doc)
    return 0


def _quantize_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="llama2.c .bin, safetensors or GGUF float checkpoint")
    p.add_argument("--to", required=True, choices=["q4_0", "e4m3", "e5m2"],
                   help="q4_0: a GGUF file of Q4_0 matrices (gguf's reference quantizer); e4m3/e5m2: a safetensors "
                        "file of fp8 matrices, each with a float32 NAME_scale (absmax to the largest finite fp8)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="GGUF (q4_0) or safetensors (fp8) file to write")


@verb("quantize", _quantize_arguments, help="write a Q4_0 GGUF or an fp8 safetensors copy of a checkpoint",
      description="Quantize every float matrix of a checkpoint (norms and biases stay float32) into the "
                  "quantized formats `compress` codes losslessly, to measure what it saves on them.",
      force="replace an existing output file", json="also write what was written as JSON",
      outputs={"output": "file"})
def quantize(args: argparse.Namespace) -> int:
    from ..analysis.formats import quantize_checkpoint

    out = args.output
    with staged(args, out) as tmp:
        r = quantize_checkpoint(args.model, tmp, args.to)
    write_json(args, args.json, {"verb": "quantize", "model": args.model, "output": out, "to": args.to, **r})
    print(f"wrote {out}: {r['quantized']} matrices ({r['weights']:,} weights) as {args.to}, {r['kept']} tensors kept "
          "as float32")
    return 0
