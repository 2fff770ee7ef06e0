"""Fig. 1 of the paper (histogram of a matrix's weight values) next to its exponent histogram.

The left panel is the paper's Fig. 1: how often each weight value occurs, on a linear scale, for one
matrix (the paper shows Llama2-7B's ``Wq0``). The right panel is what the coding pair sees (Fig. 2 b):
occurrences of each exponent, i.e. of each code, on a log scale, with the matrix's code entropy.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import numpy as np

from ..model.llm.checkpoint import open_checkpoint, select_tensors
from ..model.errors import CheckpointError
from ..model.dtypes.pairs import PAIR_FORMATS, convert
from ..model.coding.probability import entropy_bits

__all__ = ["DEFAULT_MATRIX_PATTERNS", "pick_matrix", "plot_histogram", "plot_waveform"]

#: The paper's Fig. 1 matrix is layer 0's query projection; these patterns find it across formats.
DEFAULT_MATRIX_PATTERNS = ("*layers.0.attention.wq*", "*layers.0.self_attn.q_proj*", "blk.0.attn_q*",
                           "*layer.0.attention.self.query*")


def pick_matrix(path: str | Path, matrix: str | None) -> str:
    """The matrix to plot: ``matrix`` if given (must exist), else layer 0's Wq, else the first matrix."""
    ckpt = open_checkpoint(path)
    if matrix is not None:
        ckpt.info(matrix)
        return matrix
    names = [i.name for i in select_tensors(ckpt)]
    for pattern in DEFAULT_MATRIX_PATTERNS:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if hits:
            return hits[0]
    return names[0]


def plot_histogram(path: str | Path, matrix: str | None, out: str | Path, *, pairs: str = "bf16",
                   bins: int = 255):
    """Draw Fig. 1 and the exponent histogram of one matrix; return the matplotlib ``Figure``.

    ``out`` may be ``None`` to only return the figure (for notebooks).
    """
    import matplotlib

    if out is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = pick_matrix(path, matrix)
    rec = open_checkpoint(path).tensor(name)
    fmt = PAIR_FORMATS[pairs]
    bits, conv = convert(rec.array.reshape(-1), rec.dtype, pairs)
    if pairs == "bf16":
        values = (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    else:
        values = bits.view(np.float16 if pairs == "fp16" else np.float32).astype(np.float32)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        raise CheckpointError(f"{path}: tensor {name!r} has no finite values to plot")
    hist = fmt.exponent_histogram(bits)
    exps = np.flatnonzero(hist)

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    lim = float(np.max(np.abs(finite))) or 1.0
    left.hist(finite, bins=bins, range=(-lim, lim), color="#3b6ea8")
    left.set_title(f"Fig. 1: weight values of {name}")
    left.set_xlabel(f"weight value ({pairs})")
    left.set_ylabel("occurrences")

    bias = (1 << (fmt.exponent_bits - 1)) - 1
    right.bar(exps.astype(int) - bias, hist[exps], color="#c4572a", width=0.8)
    right.set_yscale("log")
    right.set_title(f"exponents: {exps.size} codes, entropy {entropy_bits(hist):.3f} bits/code")
    right.set_xlabel("unbiased exponent (value ≈ ±2^e); one bar per code")
    right.set_ylabel("occurrences (log)")
    fig.suptitle(f"{Path(path).name}: {rec.shape[0]}x{rec.shape[1] if len(rec.shape) > 1 else 1}, {conv.describe()}",
                 fontsize=9)
    fig.tight_layout()
    if out is not None:
        fig.savefig(out, dpi=110)
        plt.close(fig)
    return fig


def plot_waveform(trace: dict[str, np.ndarray], *, start: int = 0, cycles: int = 32, ax=None,
                  widths: dict[str, int] | None = None):
    """Draw a logic-analyser view of sampled signals (``SimResult.trace`` of the Amaranth engine).

    One lane per signal, one column per clock cycle from ``start``: 1-bit signals (or those given
    width 1 in ``widths``) as levels, wider ones as bus segments labelled with their value in hex.
    Returns the matplotlib ``Axes``.
    """
    import matplotlib.pyplot as plt

    if not trace:
        raise ValueError("trace holds no signals")
    names = list(trace)
    n = min(cycles, min(len(v) for v in trace.values()) - start)
    if n <= 0:
        raise ValueError(f"trace has no cycles from {start}")
    if ax is None:
        _, ax = plt.subplots(figsize=(min(16, 2 + 0.35 * n), 0.55 * len(names) + 0.8))
    t = np.arange(start, start + n + 1)
    for lane, name in enumerate(reversed(names)):
        v = np.asarray(trace[name][start:start + n], dtype=np.int64)
        y0 = lane * 1.5
        one_bit = (widths or {}).get(name, 2 if v.max(initial=0) > 1 else 1) == 1
        if one_bit:
            ax.step(t, y0 + np.append(v, v[-1]), where="post", color="#1f5f9f", lw=1.4)
        else:
            edges = [0] + [i for i in range(1, n) if v[i] != v[i - 1]] + [n]
            for a, b in zip(edges, edges[1:]):
                ax.fill_between([t[a] + 0.06, t[b] - 0.06], y0 + 0.1, y0 + 0.9, color="#e8eef6",
                                edgecolor="#1f5f9f", lw=1)
                if b - a >= 1:
                    ax.text((t[a] + t[b]) / 2, y0 + 0.5, f"{v[a]:x}", ha="center", va="center", fontsize=7)
    ax.set_yticks([lane * 1.5 + 0.5 for lane in range(len(names))], list(reversed(names)), fontsize=8)
    ax.set_xlim(start, start + n)
    ax.set_xlabel("clock cycle")
    ax.grid(axis="x", color="#dddddd", lw=0.5)
    return ax
