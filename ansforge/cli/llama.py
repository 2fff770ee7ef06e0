"""``ansforge generate``: a llama run on weights decompressed by the golden codec or the simulated cores."""

from __future__ import annotations

import argparse

from .common import need_verilator, verb


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH",
                   help="llama2.c .bin, Hugging Face llama .safetensors (config.json beside it) or GGUF llama")
    p.add_argument("--via", default="raw", choices=["raw", "software", "hardware"], help="weight path (default raw)")
    p.add_argument("--codec", default="tans8", metavar="CODEC", help="codec of the container: tans8, rans16, rans24, ...")
    p.add_argument("--engine", default="verilator", choices=["amaranth", "verilator"],
                   help="simulator of the hardware path (default verilator)")
    p.add_argument("--pairs", default="auto", choices=["auto", "bf16", "fp16", "fp32"],
                   help="coding pairs: auto = the checkpoint's own type (lossless); bf16/fp16 round first, "
                        "and the raw path (and --compare's reference) rounds the same way")
    p.add_argument("--container", default=None, metavar="F.ansf",
                   help="decompress this container instead of compressing the checkpoint into a temporary one")
    p.add_argument("--dtype", default=None, choices=["fp32", "bf16", "fp16"],
                   help="hold the weights in this type in memory (default: as decompressed)")
    p.add_argument("--steps", type=int, default=256, metavar="N", help="tokens to generate (default 256)")
    p.add_argument("--temperature", type=float, default=1.0, metavar="T", help="0 = greedy (default 1.0)")
    p.add_argument("--topp", type=float, default=0.9, metavar="P", help="nucleus sampling threshold (default 0.9)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="sampler seed (default: from the clock)")
    p.add_argument("--prompt", default=None, metavar="TEXT", help="prompt (needs a matching tokenizer)")
    p.add_argument("--tokenizer", default=None, metavar="F.bin",
                   help="llama2.c tokenizer.bin (default: tokenizer.bin beside the model, if its size matches)")
    p.add_argument("--ids", action="store_true", help="print token ids instead of text")
    p.add_argument("--compare", action="store_true",
                   help="also run the raw path and check that the logits are identical at every step (exit 1 if not)")


@verb("generate", _arguments,
      help="run a llama on weights decompressed by the golden codec or the simulated cores",
      description="Generate tokens with a NumPy llama (llama2.c run.c semantics) whose weights come "
                  "from the checkpoint (raw), from an ansforge container through the golden codec "
                  "(software), or through the cycle-simulated decoder core (hardware).")
def generate(args: argparse.Namespace) -> int:
    from ..sim.llama_run import run_generation

    if args.via == "hardware":
        need_verilator(args.engine)
    gen, _ = run_generation(args.model, via=args.via, codec=args.codec, pairs=args.pairs, engine=args.engine,
                            container=args.container, dtype=args.dtype, steps=args.steps,
                            temperature=args.temperature, topp=args.topp, seed=args.seed, prompt=args.prompt,
                            tokenizer=args.tokenizer, ids=args.ids, compare=args.compare)
    return 1 if gen.compared and gen.mismatch is not None else 0
