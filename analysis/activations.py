"""§4.5: a llama's activations as bf16 coding pairs, runtime rANS tables per block against a static tANS table.

The llama runs on short token-id prompts (a BOS and one token each, spread over the vocabulary), the
inputs of every weight matrix are recorded per generated token (a block), and they are coded two ways:
per-block runtime rANS tables (each block's table charged), and one static tANS table built from
separate calibration prompts. ``ansforge activations`` prints this report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["calibration_prompts", "measured_prompts", "ActivationReport", "activation_report"]


def calibration_prompts(vocab_size: int, count: int) -> list[list[int]]:
    """``count`` calibration prompts: BOS (1) and one token, the tokens 2, 3, ... in turn."""
    return [[1, 2 + i % (vocab_size - 2)] for i in range(count)]


def measured_prompts(vocab_size: int, count: int, calibration: int) -> list[list[int]]:
    """``count`` measured prompts: BOS and one token, strided by 97 from after the calibration tokens."""
    return [[1, 2 + (calibration + 97 * i) % (vocab_size - 2)] for i in range(count)]


@dataclass
class ActivationReport:
    """The costs of the two ways to code the measured activations (``rows``: runtime, then static)."""

    model: str
    values: int
    blocks: int
    prompts: int
    calibration: int
    calibration_values: int
    rows: list = field(default_factory=list)

    def format_text(self) -> str:
        lines = [f"Activations of {self.model}: {self.values:,} values in {self.blocks} blocks (one per token "
                 f"step) from {self.prompts} prompts; static table from {self.calibration_values:,} values of "
                 f"{self.calibration} calibration prompts.",
                 f"  per-block ideal (no tables charged): {self.rows[0].ideal_per_value:.4f} bits/activation "
                 "(raw bf16: 16)"]
        for r in self.rows:
            lines.append(f"  {r.mode:<8} {r.codec:<7} {r.bits_per_value:.4f} bits/activation "
                         f"(stream {r.stream_bits / r.values:.4f} + tables {r.table_bits / r.values:.4f})")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"values": self.values, "blocks": self.blocks, "modes": [
            {"mode": r.mode, "codec": r.codec, "bits_per_value": r.bits_per_value, "stream_bits": r.stream_bits,
             "table_bits": r.table_bits, "ideal_per_value": r.ideal_per_value} for r in self.rows]}


def activation_report(model: str | Path, *, steps: int = 48, calibration: int = 8, prompts: int = 4,
                      runtime_codec: str = "rans12", static_codec: str = "tans8") -> ActivationReport:
    """Run the llama at ``model`` for ``steps`` tokens on ``calibration`` and ``prompts`` prompts and cost
    its measured activations with runtime ``runtime_codec`` tables and a static ``static_codec`` table."""
    from ..model.coding.codecs import parse_codec
    from ..model.llm.activations import collect_activations, runtime_cost, static_cost
    from ..model.llm.llama import CheckpointWeights, Llama, LlamaWeights, read_layout

    runtime, static = parse_codec(runtime_codec), parse_codec(static_codec)
    llama = Llama(LlamaWeights.load(read_layout(model), CheckpointWeights(model)))
    vocab = llama.config.vocab_size
    cal = collect_activations(llama, calibration_prompts(vocab, calibration), steps)
    test = collect_activations(llama, measured_prompts(vocab, prompts, calibration), steps, seed=1000)
    blocks = test.bf16_blocks()
    rows = [runtime_cost(blocks, runtime), static_cost(cal.bf16_blocks(), blocks, static)]
    return ActivationReport(Path(model).name, test.values, len(blocks), prompts, calibration, cal.values, rows)
