"""The .ansf container verbs: ``compress``, ``decompress`` and ``inspect``; ``quantize`` makes the quantized
checkpoints (GGUF Q4_0, fp8 safetensors) that ``compress`` codes as pairs."""

from __future__ import annotations

import argparse

from ..model import progress
from .common import UsageError, check_output, one_pass_memory, threads, verb


def _compress_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="llama2.c .bin, safetensors or GGUF checkpoint")
    p.add_argument("--codec", default="tans8", metavar="CODEC",
                   help="tans8 (paper's tANS, R = 8), rans16 (paper's rANS), rans24 (constriction preset), or "
                        "any tansR / ransP; a suffix xN (tans8x4, rans16x2) interleaves N = 2..16 states in the "
                        "stream, for faster software decoding (not for the hardware cores) (default tans8)")
    p.add_argument("--pairs", default="auto", choices=["auto", "bf16", "fp16", "fp32", "e4m3", "e5m2"],
                   help="pair format: auto keeps each tensor's storage type (lossless); bf16/fp16/fp32 convert "
                        "(RNE); e4m3/e5m2 convert every matrix to fp8 with a per-tensor scale (absmax to the "
                        "largest finite fp8, OCP satfinite; lossy, reported). fp8 and GGUF Q4_0 tensors are "
                        "always coded losslessly as they are")
    p.add_argument("--checkpoint-interval", type=int, default=1 << 20, metavar="PAIRS",
                   help="a random-access checkpoint every PAIRS pairs (default 1048576; 0 for none)")
    p.add_argument("--stream-per-tensor", action="store_true",
                   help="one independent stream per tensor (costs a final state each) instead of one per file")
    p.add_argument("--context", action="store_true",
                   help="context tables: code each 2-D matrix with up to --context-sets table sets chosen per "
                        "row/column group, the top mantissa bit in the code (container version 4)")
    p.add_argument("--context-sets", type=int, default=8, metavar="N",
                   help="with --context: table sets per matrix, at most (1..16, default 8)")
    p.add_argument("--allow-nonfinite", action="store_true", help="code NaN/Inf weights (exactly) instead of refusing")
    p.add_argument("-o", "--output", required=True, metavar="F.ansf", help="container to write")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="threads that split tensors, build tables and encode (default 1; the file is the same)")


@verb("compress", _compress_arguments, help="compress a checkpoint into an .ansf container",
      description="Code every tensor of a checkpoint with a golden ANS codec into a container "
                  "(docs/bitstream.md): float tensors as coding pairs, others stored raw.",
      force="replace an existing output file")
def compress(args: argparse.Namespace) -> int:
    from ..model.coding.container import compress_checkpoint

    if args.context_sets != 8 and not args.context:
        raise UsageError("--context-sets needs --context")
    if not 1 <= args.context_sets <= 16:
        raise UsageError(f"--context-sets must be between 1 and 16, not {args.context_sets}")
    out = check_output(args, args.output)
    one_pass_memory()
    with progress.activity(f"compress ({args.codec})") as note:
        r = compress_checkpoint(args.model, out, args.codec, pairs=args.pairs,
                                checkpoint_interval=args.checkpoint_interval,
                                group="tensor" if args.stream_per_tensor else "model",
                                allow_nonfinite=args.allow_nonfinite, threads=threads(args.threads),
                                context=args.context, context_sets=args.context_sets,
                                progress=lambda name: note(f"split {name}"))
    print(f"wrote {out}: {r['tensors']} tensors ({r['coded']} coded), {r['pairs']:,} pairs, {r['bytes']:,} bytes; "
          f"{r['bits'] / max(1, r['pairs']):.4f} bits/pair, {100 * r['gap']:+.4f}% vs ideal")
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
    p.add_argument("-o", "--output", required=True, metavar="OUT.safetensors", help="safetensors file to write")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="threads that decode a stream's checkpoint segments at once (default 1)")


@verb("decompress", _decompress_arguments, help="decompress an .ansf container to safetensors, bit-exact",
      description="Decode every stream of a container (checking each block's CRC-32) and write "
                  "the tensors, bit for bit as they were coded, to a safetensors file.",
      force="replace an existing output file")
def decompress(args: argparse.Namespace) -> int:
    from ..model.coding.container import open_container

    out = check_output(args, args.output, directory=False)
    n = threads(args.threads)
    one_pass_memory()
    c = open_container(args.container)
    written = c.decompress(out, threads=n)
    print(f"wrote {out}: {written} tensors")
    return 0


def _inspect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("container", metavar="F.ansf", help="container written by `ansforge compress`")
    p.add_argument("--tensor", default=None, metavar="NAME", help="also decode this tensor's values")
    p.add_argument("--range", default=None, metavar="START:COUNT",
                   help="with --tensor: decode only this range, from the nearest checkpoint")


@verb("inspect", _inspect_arguments, help="list an .ansf container's streams, codecs and tensors",
      description="List a container's streams, codecs, tables and tensors; with --tensor, decode "
                  "one tensor (or a range of it, from the nearest checkpoint).")
def inspect(args: argparse.Namespace) -> int:
    from ..model.coding.container import open_container

    c = open_container(args.container)
    print(c.inspect())
    if args.tensor is not None:
        import numpy as np

        if args.range:
            try:
                a, n = (int(v) for v in args.range.split(":"))
            except ValueError:
                raise UsageError(f"--range must be START:COUNT, not {args.range!r}") from None
            vals = c.decode_range(args.tensor, a, n)
        else:
            vals = c.read(args.tensor).ravel()
        with np.printoptions(threshold=20, edgeitems=8):
            print(f"{args.tensor}: {vals.size} values (bit patterns {vals.dtype}): {vals}")
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
      force="replace an existing output file")
def quantize(args: argparse.Namespace) -> int:
    from ..analysis.formats import quantize_checkpoint

    out = check_output(args, args.output, directory=False)
    r = quantize_checkpoint(args.model, out, args.to)
    print(f"wrote {out}: {r['quantized']} matrices ({r['weights']:,} weights) as {args.to}, {r['kept']} tensors kept "
          "as float32")
    return 0
