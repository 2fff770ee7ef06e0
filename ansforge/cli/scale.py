"""``ansforge synth``: a synthetic checkpoint of a real model's names and shapes, for speed, memory and scale."""

from __future__ import annotations

import argparse

from .common import UsageError, staged, verb, write_json

#: The weight-statistics file shipped beside the exponent histograms (sign, mantissa, norms per role).
STATISTICS = "weight_statistics.json"


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--like", required=True, choices=("llama2-7b",),
                   help="the model whose tensor names, shapes and config.json to take")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder to write: bf16 shards model-0000k-of-0000n.safetensors (at most 5 GB each), "
                        "model.safetensors.index.json, config.json")
    p.add_argument("--layers", type=int, default=None, metavar="L",
                   help="keep the first L transformer layers (default: all 32)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0): the same seed gives "
                                                                     "the same bytes")
    p.add_argument("--scale", type=int, default=1, metavar="S",
                   help="divide the hidden size, the MLP size and the vocabulary by S (1, 2, 4, ... 64; default 1): "
                        "a quick look at the same structure")


@verb("synth", _arguments, help="write a synthetic Llama-2-7B-shaped checkpoint drawn from measured statistics",
      description="A Hugging Face folder of sharded bf16 safetensors with Llama-2-7B's tensor names and shapes "
                  "(and its config.json), whose values are drawn from statistics measured on real models and "
                  "shipped with ansforge (per-matrix exponent histograms, per-role sign balance and mantissa "
                  "distribution), not a Gaussian. For speed, memory and scale: its Table 1 echoes the histograms "
                  "it was drawn from, and its context gains mean nothing.",
      force=True, outputs={"output": "dir"},
      json="also write what was written (folder, shards, tensors, weights, bytes, seed, wall time) as JSON")
def synth(args: argparse.Namespace) -> int:
    import json
    import math
    import time
    from importlib import resources

    from ..analysis.histograms import embedded_histograms
    from ..model import progress
    from ..model.errors import ConfigError
    from ..model.llm.synth import LIKE, llama_statistics, llama_tensors, write_synthetic

    if args.layers is not None and not 1 <= args.layers <= LIKE[args.like]["num_hidden_layers"]:
        raise UsageError(f"--layers {args.layers}: {args.like} has layers 1 to {LIKE[args.like]['num_hidden_layers']}")
    if args.scale not in (1, 2, 4, 8, 16, 32, 64):
        raise UsageError(f"--scale {args.scale}: a power of two from 1 to 64")
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed}: a non-negative integer")
    doc = json.loads(resources.files("ansforge.analysis").joinpath("data", STATISTICS).read_text())
    stats = llama_statistics(embedded_histograms(), doc)
    dims = dict(LIKE[args.like], num_hidden_layers=args.layers or LIKE[args.like]["num_hidden_layers"])
    for key in ("hidden_size", "intermediate_size", "vocab_size"):
        dims[key] //= args.scale
    total = sum(math.prod(s) for *_, s in llama_tensors(dims))
    start = time.perf_counter()
    with staged(args, args.output, kind="dir") as tmp, progress.bar(total, "synth", unit="weights") as bar:
        try:
            out = write_synthetic(tmp, stats, like=args.like, layers=args.layers, seed=args.seed, scale=args.scale,
                                  progress=bar)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    wall = time.perf_counter() - start
    print(f"{args.output}: {out['tensors']} tensors, {out['weights']:,} bf16 weights ({out['bytes'] / 1e9:.2f} GB) "
          f"in {len(out['shards'])} shards, {wall:.1f} s wall")
    print(f"synthetic {args.like} shape (seed {args.seed}, scale 1/{args.scale}, {dims['num_hidden_layers']} layers): "
          f"values drawn from {stats.model}'s measured exponent histograms, sign balance and mantissa distribution; "
          "not a trained model (for speed, memory and scale only)")
    write_json(args, args.json, {"verb": "synth", "like": args.like, "output": args.output, "seed": args.seed,
                                 "scale": args.scale, "layers": dims["num_hidden_layers"], "shards": out["shards"],
                                 "tensors": out["tensors"], "weights": out["weights"], "bytes": out["bytes"],
                                 "wall_seconds": wall, "statistics_of": stats.model})
    return 0
