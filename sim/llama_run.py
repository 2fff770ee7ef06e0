"""A llama generating text from weights that came out of a chosen path: ``ansforge generate``.

``via`` picks the weight provider (:mod:`ansforge.model.llm.llama`):

``raw``
    the checkpoint as loaded (rounded to bf16/fp16 first when ``pairs`` says so);
``software``
    decompressed from an ansforge container by the golden codec;
``hardware``
    decompressed by the cycle-simulated decoder core of the codec (:class:`~.weights.HardwareWeights`),
    in the Amaranth simulator or Verilator.

Without ``container``, the checkpoint is compressed into a temporary container first (one stream
per tensor, so the hardware path can run it). ``compare`` also builds the raw model with the same
``pairs`` and checks that the logits are identical at every step.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..model.errors import ConfigError
from ..model.llm.llama import (CheckpointWeights, ContainerWeights, Generation, Llama, LlamaLayout, LlamaWeights,
                           generate, read_layout)
from ..model.llm.sampler import Sampler
from ..model.llm.tokenizer import BOS, Tokenizer, TokenizerError

__all__ = ["VIAS", "LlamaSetup", "load_llama", "find_tokenizer", "tokenizer_hint", "run_generation"]

VIAS = ("raw", "software", "hardware")


@dataclass
class LlamaSetup:
    """A llama built from one path, with what it cost to get its weights."""

    layout: LlamaLayout
    model: Llama
    provider: object
    load_seconds: float     # getting the weights: reading, or decoding the container (not compressing it)

    def describe(self) -> str:
        p = self.provider
        if p.name == "hardware":
            return (f"hardware: {p.kind} core ({p.container.streams[0].spec.name}) in {p.engine_name}, "
                    f"{p.pairs:,} pairs in {p.cycles:,} cycles ({p.pairs / max(1, p.cycles):.4f} pairs/clock), "
                    f"{p.pairs_per_second / 1e3:,.1f} k weights/s simulated")
        if p.name == "software":
            return f"software: golden {p.container.streams[0].spec.name} decoder, {self.load_seconds:.2f} s"
        return f"raw: {self.layout.path.name} ({self.layout.format}), {self.load_seconds:.2f} s"


def load_llama(model: str | Path, via: str = "raw", *, codec: str = "tans8", pairs: str = "auto",
               engine: str = "verilator", container: str | Path | None = None, dtype: str | None = None,
               workdir: str | Path | None = None) -> LlamaSetup:
    """A :class:`~ansforge.model.llm.llama.Llama` on weights from path ``via`` (see the module docstring).

    ``workdir`` holds the temporary container when none is given (a fresh temporary directory by
    default, removed once the weights are loaded).
    """
    if via not in VIAS:
        raise ConfigError(f"via must be one of {', '.join(VIAS)}, not {via!r}")
    layout = read_layout(model)
    t0 = time.perf_counter()
    if via == "raw":
        provider = CheckpointWeights(model, pairs)
        weights = LlamaWeights.load(layout, provider, dtype)
        seconds = time.perf_counter() - t0
    else:
        from ..model.coding.container import compress_checkpoint

        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            path = container
            if path is None:
                path = Path(tmp) / "model.ansf"
                compress_checkpoint(model, path, codec, pairs=pairs)     # the default (blocks) layout
            if via == "software":
                provider = ContainerWeights(path)
            else:
                from .weights import HardwareWeights

                provider = HardwareWeights(path, engine)
            t0 = time.perf_counter()       # the decode, not the compression into a temporary container
            weights = LlamaWeights.load(layout, provider, dtype)
            seconds = time.perf_counter() - t0
    return LlamaSetup(layout, Llama(weights), provider, seconds)


def tokenizer_hint(layout) -> str:
    """Where the tokenizer of the model ``layout`` describes comes from (for a mismatch's message)."""
    n = layout.config.vocab_size
    if layout.format == "llama2c" and n == 32000:
        return "for a 32,000-token llama2.c model, that is Llama 2's vocabulary, tokenizer.bin of the llama2.c repository"
    if layout.format == "llama2c":
        return (f"for a llama2.c model, the tok{n}.bin exported with it by llama2.c's `python tokenizer.py "
                f"--tokenizer-model=tok{n}.model` (karpathy/tinyllamas publishes tok512.bin beside stories260K.bin); "
                "llama2.c's tokenizer.bin is Llama 2's 32,000-token vocabulary")
    return (f"export the model's own {n}-token tokenizer.model to llama2.c's format with llama2.c's "
            "`python tokenizer.py --tokenizer-model=PATH/tokenizer.model`")


def find_tokenizer(model: str | Path, vocab_size: int, explicit: str | Path | None) -> tuple[Tokenizer | None, str]:
    """The tokenizer to use and a note for the user.

    An explicit path must match ``vocab_size`` (:class:`~ansforge.model.llm.tokenizer.TokenizerError`
    otherwise). Without one, ``tokenizer.bin`` beside the model is used when its size matches;
    otherwise there is none, and the caller works in token ids.
    """
    if explicit is not None:
        return Tokenizer.load(explicit, vocab_size), f"tokenizer {explicit}"
    beside = Path(model).with_name("tokenizer.bin")
    if beside.is_file():
        try:
            return Tokenizer.load(beside, vocab_size), f"tokenizer {beside}"
        except TokenizerError as e:
            return None, f"no matching tokenizer ({e}); starting from BOS, printing token ids"
    return None, "no tokenizer; starting from BOS, printing token ids"


def run_generation(model: str | Path, *, via: str = "raw", codec: str = "tans8", pairs: str = "auto",
                   engine: str = "verilator", container: str | Path | None = None, dtype: str | None = None,
                   steps: int = 256, temperature: float = 1.0, topp: float = 0.9, seed: int | None = None,
                   prompt: str | None = None, tokenizer: str | Path | None = None, ids: bool = False,
                   compare: bool = False, out=None, err=None) -> tuple[Generation, LlamaSetup]:
    """``ansforge generate``: text (or ids) to ``out``, progress and rates to ``err``."""
    out = out or sys.stdout
    err = err or sys.stderr
    if seed is None:
        seed = (time.time_ns() & 0xFFFFFFFF) or 1
    sampler = Sampler(temperature, topp, seed)
    layout = read_layout(model)
    tok, note = find_tokenizer(model, layout.config.vocab_size, tokenizer)
    if tok is None:
        note += f"; a matching tokenizer: {tokenizer_hint(layout)}"
    if tok is None and prompt:
        raise ConfigError(f"--prompt needs a tokenizer whose vocabulary matches the model's "
                          f"{layout.config.vocab_size} tokens ({note})")
    prompt_ids = tok.encode(prompt or "", bos=True) if tok is not None else [BOS]
    if len(prompt_ids) > layout.config.seq_len:
        raise ConfigError(f"the prompt is {len(prompt_ids)} tokens, longer than the model's context "
                          f"(seq_len = {layout.config.seq_len})")
    if steps > layout.config.seq_len - len(prompt_ids) + 1:
        print(f"ansforge: steps {steps} capped at the context: {layout.config.seq_len} positions", file=err)
    print(f"ansforge: {note}; seed {seed}", file=err)
    setup = load_llama(model, via, codec=codec, pairs=pairs, engine=engine, container=container, dtype=dtype)
    print(f"ansforge: weights via {setup.describe()}", file=err)
    ref = None
    if compare:
        ref = load_llama(model, "raw", pairs=pairs, dtype=dtype).model
    as_ids = ids or tok is None
    emitted: list[str] = []

    def on_token(prev: int, token: int) -> None:
        text = str(token) if as_ids else tok.piece(prev, token).decode("utf-8", errors="replace")
        if as_ids and emitted:
            text = " " + text
        emitted.append(text)
        out.write(text)
        out.flush()

    if not as_ids and prompt:
        out.write(prompt)
    gen = generate(setup.model, prompt_ids, steps, sampler, reference=ref, on_token=on_token)
    out.write("\n")
    print(f"ansforge: {len(gen.tokens)} tokens, {gen.steps} forward steps, {gen.tokens_per_second:,.1f} tokens/s",
          file=err)
    if compare:
        if gen.mismatch is None:
            print(f"ansforge: logits identical to the raw path at all {gen.steps} steps", file=err)
        else:
            print(f"ansforge: logits differ from the raw path from step {gen.mismatch} "
                  f"(max |difference| {gen.max_abs_diff:.3g})", file=err)
    return gen, setup
