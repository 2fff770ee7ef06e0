"""``ansforge generate``: a llama run on weights decompressed by the golden codec or the simulated cores."""

from __future__ import annotations

import argparse

from .common import UsageError, need_verilator, refuse, verb, write_json


def _arguments(p: argparse.ArgumentParser) -> None:
    from ..model.coding.registry import DEFAULT_FORMAT, codec_help

    p.add_argument("--model", required=True, metavar="PATH",
                   help="llama2.c .bin, Hugging Face llama .safetensors (config.json beside it) or GGUF llama")
    p.add_argument("--via", default="raw", choices=["raw", "software", "hardware"], help="weight path (default raw)")
    p.add_argument("--codec", default=DEFAULT_FORMAT, metavar="CODEC",
                   help=codec_help(DEFAULT_FORMAT, what="--via software or hardware: the codec of the container"))
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


class _Tee:
    """Standard output that also keeps what was written (the generated text, for --json)."""

    def __init__(self, out):
        self.out, self.parts = out, []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


@verb("generate", _arguments,
      help="run a llama on weights decompressed by the golden codec or the simulated cores",
      description="Generate tokens with a NumPy llama (llama2.c run.c semantics) whose weights come "
                  "from the checkpoint (raw), from an ansforge container through the golden codec "
                  "(software), or through the cycle-simulated decoder core (hardware).",
      json="also write what was generated (token ids, text, rates, the comparison) as JSON",
      force="replace an existing JSON file", blas=True)
def generate(args: argparse.Namespace) -> int:
    import io
    import sys
    import time

    from ..model.llm.llama import read_layout
    from ..model.llm.tokenizer import Tokenizer, TokenizerError
    from ..sim.llama_run import run_generation, tokenizer_hint

    if args.via == "raw":
        refuse(args, ["codec", "container", "engine"], "does not apply with --via raw (the weights are read "
                                                        "from the checkpoint as they are)")
    if args.via == "software":
        refuse(args, ["engine"], "applies only with --via hardware (the simulator of the decoder core)")
    if args.container is not None:
        refuse(args, ["codec"], "does not apply with --container (the container gives the codec)")
    if args.temperature == 0:
        refuse(args, ["topp", "seed"], "does not apply with --temperature 0 (greedy sampling draws nothing)")
    if args.temperature < 0:
        raise UsageError(f"--temperature must be 0 or more, not {args.temperature}")
    if not 0 <= args.topp <= 1:
        raise UsageError(f"--topp must be between 0 and 1, not {args.topp}")
    if args.steps < 1:
        raise UsageError(f"--steps must be at least 1, not {args.steps}")
    if args.seed is not None and not 0 < args.seed < 2 ** 32:
        raise UsageError(f"--seed must be in 1 .. 2**32 - 1, not {args.seed}")
    if args.via == "hardware":
        need_verilator(args.engine)
    layout = read_layout(args.model)
    if args.tokenizer is not None:
        try:
            Tokenizer.load(args.tokenizer, layout.config.vocab_size)
        except TokenizerError as exc:
            if "vocab_size" not in str(exc):
                raise
            raise UsageError(f"{exc}: {tokenizer_hint(layout)}") from None
    seed = args.seed if args.seed is not None else ((time.time_ns() & 0xFFFFFFFF) or 1)
    out = _Tee(sys.stdout)
    err = io.StringIO() if args.quiet else sys.stderr
    gen, setup = run_generation(args.model, via=args.via, codec=args.codec, pairs=args.pairs, engine=args.engine,
                                container=args.container, dtype=args.dtype, steps=args.steps,
                                temperature=args.temperature, topp=args.topp, seed=seed, prompt=args.prompt,
                                tokenizer=args.tokenizer, ids=args.ids, compare=args.compare, out=out, err=err)
    write_json(args, args.json, {
        "verb": "generate", "model": args.model, "via": args.via, "weights": setup.describe(),
        "codec": None if args.via == "raw" else args.codec, "seed": seed if args.temperature else None, "temperature": args.temperature,
        "topp": args.topp, "prompt": args.prompt, "prompt_ids": gen.prompt, "tokens": gen.tokens,
        "text": "".join(out.parts).rstrip("\n"), "steps": gen.steps, "seconds": gen.seconds,
        "tokens_per_second": gen.tokens_per_second, "compared": gen.compared,
        "logits_identical": (gen.mismatch is None) if gen.compared else None,
        "first_mismatch": gen.mismatch, "max_abs_diff": gen.max_abs_diff if gen.compared else None})
    return 1 if gen.compared and gen.mismatch is not None else 0
