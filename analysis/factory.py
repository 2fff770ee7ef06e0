"""The token factory's bandwidth model (paper §4.7, Fig. 13), ``ansforge factory``.

``N`` LLM processors run one model in lockstep on different queries, each at ``T`` tokens/s. A token
needs every weight once, so a processor streams ``params * T`` weights per second. Four ways to
feed them, as DRAM bandwidth in bytes/s::

    neither     N * T * params * bytes_per_weight            each processor fetches raw weights
    compressed  N * T * params * bytes_per_weight * ratio    each fetches compressed weights
    shared      T * params * bytes_per_weight                one fetch broadcast to all (Fig. 13)
    both        T * params * bytes_per_weight * ratio        one compressed fetch, decompressed once

``ratio`` is the compressed size over the raw size (the paper's 0.66 for Llama2-7B bf16). The
paper's example: 7e9 bf16 weights, 10 processors at 10 tokens/s, ratio 0.66 → 92.4 GB/s instead of
1.4 TB/s. The decompressor must produce ``params * T`` pairs per second: at ``clock_hz`` and
``pairs_per_clock`` per lane (1 for the paper's cores) that is ``ceil(params * T / (clock * ppc))``
lanes (Fig. 12). ``ratio`` can instead come from the model itself, measured as ``ansforge tables``
measures it (:func:`measured_ratio`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..model.errors import ConfigError

__all__ = ["FactoryModel", "measured_ratio", "plot_factory", "PAPER_EXAMPLE"]


def _positive(name: str, value, *, integer: bool = False, upper: float | None = None) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(v) or v <= 0 or (upper is not None and v > upper):
        raise ConfigError(f"{name} must be positive{f' and at most {upper:g}' if upper else ''}, not {value!r}")
    if integer and v != int(v):
        raise ConfigError(f"{name} must be a whole number, not {value!r}")
    return v


@dataclass(frozen=True)
class FactoryModel:
    """Bandwidths of a token factory (see the module docstring). Units: bytes/s, tokens/s, Hz."""

    params: float
    bytes_per_weight: float = 2.0
    ratio: float = 0.66
    processors: int = 10
    tokens_per_s: float = 10.0
    clock_hz: float = 500e6
    pairs_per_clock: float = 1.0

    def __post_init__(self) -> None:
        _positive("--params", self.params)
        _positive("--bytes-per-weight", self.bytes_per_weight, upper=8)
        if not (isinstance(self.ratio, (int, float)) and 0 < self.ratio <= 1):
            raise ConfigError(f"--ratio is the compressed size over the raw size (the paper's 0.66), in (0, 1], "
                              f"not {self.ratio!r}; a 1.5:1 compression is --ratio 0.667")
        _positive("--processors", self.processors, integer=True)
        _positive("--tokens-per-s", self.tokens_per_s)
        _positive("--clock-mhz", self.clock_hz)
        _positive("--pairs-per-clock", self.pairs_per_clock)

    @property
    def bytes_per_token(self) -> float:
        return self.params * self.bytes_per_weight

    def bandwidth(self, *, shared: bool, compressed: bool) -> float:
        """DRAM bytes/s for the weights."""
        return self.tokens_per_s * self.bytes_per_token * (1 if shared else self.processors) * \
            (self.ratio if compressed else 1.0)

    @property
    def total_tokens_per_s(self) -> float:
        return self.processors * self.tokens_per_s

    @property
    def pairs_per_s(self) -> float:
        """Coding pairs the (shared) decompressor must produce per second."""
        return self.params * self.tokens_per_s

    @property
    def lanes(self) -> int:
        """Decoder lanes at :attr:`clock_hz`, :attr:`pairs_per_clock` each."""
        return max(1, math.ceil(self.pairs_per_s / (self.clock_hz * self.pairs_per_clock) - 1e-9))

    @property
    def clock_for_one_lane(self) -> float:
        """The clock (Hz) at which one lane alone keeps up."""
        return self.pairs_per_s / self.pairs_per_clock

    def summary(self) -> dict:
        return {**asdict(self), "bytes_per_token": self.bytes_per_token,
                "bandwidth_neither": self.bandwidth(shared=False, compressed=False),
                "bandwidth_compressed": self.bandwidth(shared=False, compressed=True),
                "bandwidth_shared": self.bandwidth(shared=True, compressed=False),
                "bandwidth_both": self.bandwidth(shared=True, compressed=True),
                "total_tokens_per_s": self.total_tokens_per_s, "pairs_per_s": self.pairs_per_s,
                "lanes": self.lanes, "clock_for_one_lane_hz": self.clock_for_one_lane}

    def format_text(self, source: str = "") -> str:
        gb = 1e9
        lines = [
            f"token factory: {self.processors} processors x {self.tokens_per_s:g} tokens/s = "
            f"{self.total_tokens_per_s:g} tokens/s of a {self.params:.4g}-weight model",
            f"weights per token: {self.bytes_per_token / gb:.4g} GB ({self.bytes_per_weight:g} bytes/weight); "
            f"compressed/raw ratio {self.ratio:.4f}{f' ({source})' if source else ''}",
            "DRAM bandwidth for the weights:",
            f"  neither shared nor compressed  {self.bandwidth(shared=False, compressed=False) / gb:10.1f} GB/s",
            f"  compressed, not shared         {self.bandwidth(shared=False, compressed=True) / gb:10.1f} GB/s",
            f"  shared, not compressed         {self.bandwidth(shared=True, compressed=False) / gb:10.1f} GB/s",
            f"  shared and compressed          {self.bandwidth(shared=True, compressed=True) / gb:10.1f} GB/s"
            f"   ({self.bandwidth(shared=False, compressed=False) / self.bandwidth(shared=True, compressed=True):.1f}x "
            "less)",
            f"decompressor: {self.pairs_per_s / 1e9:.4g} G pairs/s -> {self.lanes} lanes at "
            f"{self.clock_hz / 1e6:g} MHz, {self.pairs_per_clock:g} pair/clock each "
            f"(one lane would need {self.clock_for_one_lane / 1e9:.4g} GHz)",
        ]
        return "\n".join(lines)


#: §4.7: "10 tokens/s for each query for LLama2 7B ... ~92 Gbytes/s ... instead of 1.4 Tbytes/s".
PAPER_EXAMPLE = FactoryModel(params=7e9, bytes_per_weight=2.0, ratio=0.66, processors=10, tokens_per_s=10.0)


def measured_ratio(model: str | Path, codec: str = "tans8", pairs: str = "bf16") -> tuple[float, str]:
    """Compressed/raw ratio of ``model`` with ``codec``, as ``ansforge tables`` measures it (its
    codec row's bits per weight over the pair format's width)."""
    from ..analysis.table1 import compute_table1
    from ..model.coding.codecs import parse_codec
    from ..model.dtypes.pairs import PAIR_FORMATS

    spec = parse_codec(codec)
    table = compute_table1(model, pairs=pairs, general=[], constriction=False, codecs=[codec], progress=False)
    row = next((r for r in table.rows if r.method not in ("Original", "Simple", "Ideal")), None)
    if row is None or row.bits_per_weight is None:
        raise ConfigError(f"{model}: no {spec.label} row in its table")
    width = PAIR_FORMATS[pairs].total_bits
    return row.bits_per_weight / width, f"{row.method} on {Path(model).name}: {row.bits_per_weight:.3f} bits/weight"


def plot_factory(model: FactoryModel, out: str | Path | None = None, *, max_processors: int = 32,
                 title: str | None = None):
    """Two panels: bandwidth against N (the four feeds), and against the compression ratio.

    The paper's two figures of §4.7 (1.4 TB/s neither shared nor compressed, 92 GB/s shared and
    compressed, for Llama2-7B at N = 10, 10 tokens/s, ratio 0.66) are marked on both panels. Where two
    series coincide (not shared at N = 1 is the shared feed) the lower one is drawn thick underneath
    and the other dashed on top, so both stay visible. ``out`` ``None`` returns the figure open (for
    notebooks, without touching the backend); otherwise it is written and closed. Returns the figure.
    """
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6))
    ns = np.arange(1, max_processors + 1)
    gb = 1e9
    styles = ((False, False, "neither shared nor compressed", "-", 1.4, "#1f77b4"),
              (False, True, "compressed, not shared", "--", 1.4, "#ff7f0e"),
              (True, False, "shared, not compressed", "-", 5, "#bbbbbb"),
              (True, True, "shared + compressed", "-", 2.2, "#2ca02c"))
    for shared, compressed, label, style, lw, color in styles:
        bw = [FactoryModel(**{**asdict(model), "processors": int(n)}).bandwidth(shared=shared, compressed=compressed)
              for n in ns]
        a.plot(ns, np.array(bw) / gb, style, label=label, lw=lw, color=color, zorder=1 if lw > 4 else 2)
    a.axvline(model.processors, color="grey", lw=0.8, ls=":")
    pe = PAPER_EXAMPLE
    paper = ((pe.bandwidth(shared=False, compressed=False), "paper: 1.4 TB/s"),
             (pe.bandwidth(shared=True, compressed=True), "paper: 92 GB/s"))
    for value, text in paper:
        a.plot([pe.processors], [value / gb], "*", ms=13, color="#d62728", zorder=3)
        a.annotate(text, (pe.processors, value / gb), textcoords="offset points", xytext=(8, 5), fontsize=8,
                   color="#d62728")
    a.set_xlabel("processors N")
    a.set_ylabel("weight bandwidth (GB/s)")
    a.set_yscale("log")
    a.set_title(f"against N: {model.tokens_per_s:g} tokens/s per processor, ratio {model.ratio:.2f}", fontsize=9)
    a.legend(fontsize=7, loc="upper left")
    ratios = np.linspace(0.3, 1.0, 71)
    bw = [FactoryModel(**{**asdict(model), "ratio": float(r)}).bandwidth(shared=True, compressed=True) for r in ratios]
    b.plot(ratios, np.array(bw) / gb, "-", lw=6, color="#2ca02c", alpha=0.45, label="shared, any N", zorder=1)
    for n, color in zip(sorted({1, model.processors, 2 * model.processors}), ("#ff7f0e", "#9467bd", "#8c564b")):
        bw = [FactoryModel(**{**asdict(model), "ratio": float(r), "processors": n}).bandwidth(shared=False,
                                                                                             compressed=True)
              for r in ratios]
        label = f"not shared, N = {n}" + (" (= shared)" if n == 1 else "")
        b.plot(ratios, np.array(bw) / gb, "--", color=color, lw=1.5, label=label, zorder=2)
    b.plot([pe.ratio], [pe.bandwidth(shared=True, compressed=True) / gb], "*", ms=13, color="#d62728", zorder=3,
           label="paper: 92 GB/s shared (N = 10, ratio 0.66)")
    b.plot([pe.ratio], [pe.bandwidth(shared=False, compressed=True) / gb], "*", ms=13, color="#d62728",
           mfc="none", zorder=3, label="paper's example, not shared (N = 10)")
    b.axvline(model.ratio, color="grey", lw=0.8, ls=":")
    b.set_xlabel("compressed / raw size")
    b.set_ylabel("weight bandwidth (GB/s)")
    b.set_yscale("log")
    b.set_title("against the compression ratio (compressed weights)", fontsize=9)
    b.legend(fontsize=7, loc="center right")
    fig.suptitle(title or (f"Fig. 13 token factory: {model.params:.3g} weights x {model.bytes_per_weight:g} bytes, "
                           f"N = {model.processors}, {model.tokens_per_s:g} tokens/s each"), fontsize=10)
    fig.tight_layout()
    if out is not None:
        fig.savefig(out, dpi=110)
        plt.close(fig)
    return fig


def factory_ratio(ratio: float | None = None, model: str | Path | None = None,
                  codec: str = "tans8") -> tuple[float, str]:
    """The compressed/raw ratio of a token factory and where it comes from: measured on ``model`` with
    ``codec`` (:func:`measured_ratio`), else ``ratio`` as given, else the paper's example (0.66)."""
    if model is not None:
        return measured_ratio(model, codec)
    if ratio is not None:
        return ratio, "given"
    return PAPER_EXAMPLE.ratio, "the paper's"


__all__ += ["factory_ratio"]
