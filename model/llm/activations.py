"""Activations as coding pairs (paper §4.5): runtime tables against a static calibration profile.

:func:`collect_activations` runs the NumPy llama (:mod:`.llama`) token by token and records every
vector a weight matrix multiplies (attention and FFN inputs, the attention output, the FFN hidden
state): the activations a processor would stream to and from memory. One token step's vectors, in
forward order, form one **block**. Values are rounded to bf16 (nearest even) and split into the
coding pairs of Fig. 2, so the code is the exponent, as for the weights.

Two ways to code them, both through a real golden coder, each block its own stream (so any block
can be read back alone, as §4.4 wants):

**runtime** (:func:`runtime_cost`), the paper's first option
    Per block: count the codes, normalize the counts (:func:`~.codetable.build_code_table`), program
    an rANS coder with them, code the block. The table goes with the block and is charged to it:
    ``8`` bits per code's exponent and ``precision_bits`` per symbol's frequency.
**static** (:func:`static_cost`), the paper's "better option"
    One table from calibration prompts, fixed in a tANS coder. The alphabet is all 256 exponents:
    those never seen in calibration get a count of 1 (they land in the escape group), so any block
    codes. The table is charged once for the whole run, not per block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..coding.codecs import Codec
from ..errors import ConfigError
from .llama import Llama, generate
from ..dtypes.pairs import BF16, fp32_to_bf16_rne
from ..coding.probability import ideal_bits
from .sampler import Sampler
from ..coding.stream import Run

__all__ = ["ActivationTrace", "collect_activations", "ModeCost", "runtime_cost", "static_cost"]


class _Recording:
    """A stored matrix whose ``matvec`` records its input vector before multiplying."""

    def __init__(self, matrix, sink: list):
        self._m, self._sink = matrix, sink

    def matvec(self, x):
        self._sink.append(np.asarray(x, dtype=np.float32).copy())
        return self._m.matvec(x)

    def __getattr__(self, name):
        return getattr(self._m, name)


class _RecordingWeights:
    def __init__(self, weights, sink: list):
        self._w, self._sink = weights, sink

    def __getitem__(self, name):
        return _Recording(self._w[name], self._sink)

    def __iter__(self):
        return iter(self._w)


@dataclass
class ActivationTrace:
    """Recorded activations: one fp32 block per token step, and the tokens that produced them."""

    blocks: list[np.ndarray] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)

    @property
    def values(self) -> int:
        return sum(b.size for b in self.blocks)

    def bf16_blocks(self) -> list[np.ndarray]:
        """Each block rounded to bf16 bit patterns (``uint16``)."""
        return [fp32_to_bf16_rne(b) for b in self.blocks]


def collect_activations(model: Llama, prompts: Sequence[Sequence[int]], steps: int, *, seed: int = 42,
                        temperature: float = 1.0) -> ActivationTrace:
    """Generate ``steps`` tokens after each prompt (token ids, BOS first) and record the activations.

    Non-finite activations are refused (they name the prompt and step): a model that produces them
    is broken, and coding them would hide it.
    """
    trace = ActivationTrace()
    weights = model.weights
    for pi, prompt in enumerate(prompts):
        sink: list[np.ndarray] = []

        model.weights = _RecordingWeights(weights, sink)
        original = model.forward
        try:
            # an instance attribute shadows Llama.forward for this prompt only (generate calls it)
            def forward(token, pos, _orig=original):
                before = len(sink)
                out = _orig(token, pos)
                block = np.concatenate(sink[before:])
                if not np.isfinite(block).all():
                    raise ConfigError(f"prompt {pi}, position {pos}: the model produced a non-finite activation")
                trace.blocks.append(block)
                del sink[before:]
                return out
            model.forward = forward
            g = generate(model, list(prompt), steps, Sampler(temperature=temperature, seed=seed + pi))
        finally:
            del model.forward
            model.weights = weights
        trace.tokens.append(g.tokens)
    return trace


@dataclass(frozen=True)
class ModeCost:
    """Bits of coding activation blocks one way; ``table_bits`` are charged, ``stream_bits`` are the words."""

    mode: str
    codec: str
    values: int
    stream_bits: int
    table_bits: int
    ideal_bits: float           # per-block ideal (entropy of each block's own codes + additional data)

    @property
    def bits_per_value(self) -> float:
        return (self.stream_bits + self.table_bits) / self.values if self.values else 0.0

    @property
    def ideal_per_value(self) -> float:
        return self.ideal_bits / self.values if self.values else 0.0


def _code_block(spec: Codec, code_table, table, bits: np.ndarray, exponents: np.ndarray) -> int:
    pairs = BF16.split(bits, exponents)
    s, e = code_table.to_symbols(pairs.codes, pairs.extra)
    coder = spec.coder()
    stream = coder.encode([table], [Run(0, s.size)], s, e)
    ds, de, _ = coder.decode(stream.words, [table], [Run(0, s.size)])
    if not (np.array_equal(ds, s) and np.array_equal(de, e)):      # the golden pair must invert
        raise AssertionError("activation block did not decode to itself")
    return int(stream.words.size) * spec.word_bits


def runtime_cost(blocks: Sequence[np.ndarray], spec: Codec) -> ModeCost:
    """Per-block tables (module docstring), through ``spec``'s golden coder (rANS in the paper)."""
    stream = tables = 0
    ideal = 0.0
    n = 0
    for bits in blocks:
        pairs = BF16.split(bits)
        counts = pairs.counts()
        ct, table = spec.tables(counts, BF16.extra_bits)
        stream += _code_block(spec, ct, table, bits, pairs.exponents)
        tables += pairs.n_codes * BF16.exponent_bits + ct.n_symbols * spec.precision_bits
        ideal += ideal_bits(counts) + pairs.extra_bits_total()
        n += bits.size
    return ModeCost("runtime", spec.name, n, stream, tables, ideal)


def static_cost(calibration: Sequence[np.ndarray], blocks: Sequence[np.ndarray], spec: Codec) -> ModeCost:
    """One table from the ``calibration`` blocks, fixed, coding ``blocks`` (module docstring)."""
    if not calibration:
        raise ConfigError("static tables need at least one calibration block")
    hist = sum(BF16.exponent_histogram(b) for b in calibration)
    counts = hist * 64 + 1          # every exponent codes; unseen ones cost a little, seen ones nothing
    exponents = np.arange(256, dtype=np.uint16)
    ct, table = spec.tables(counts, BF16.extra_bits)
    stream, ideal, n = 0, 0.0, 0
    for bits in blocks:
        stream += _code_block(spec, ct, table, bits, exponents)
        pairs = BF16.split(bits)
        ideal += ideal_bits(pairs.counts()) + pairs.extra_bits_total()
        n += bits.size
    table_bits = ct.n_codes * BF16.exponent_bits + ct.n_symbols * spec.precision_bits
    return ModeCost("static", spec.name, n, stream, table_bits, ideal)
