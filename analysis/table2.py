"""The paper's Table 2 (§3.3) and Fig. 5 on any checkpoint: linearly quantized integers as coding pairs.

Each selected matrix is quantized on its own (:func:`~ansforge.model.integers.linear_quantize`,
``q = rint(w / max|w| · (2**Nb − 1))``) and coded as NZ-MSB pairs (Fig. 6); the size is the paper's
estimate, ``-log2 p(code)`` summed plus the additional data, per matrix, averaged over all weights.
Next to it: direct coding (one code per magnitude, the end of §3.3) and the raw ``Nb + 1`` bits.

Weights are read as stored (fp32, fp16 or bf16 widened to float64): quantization does not go through
bf16 first. Matrices stream one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model.checkpoint import open_checkpoint, select_tensors
from ..model.errors import CheckpointError
from ..model.integers import QUANT_BITS, DirectCode, NzMsbCode, ideal_pair_bits, linear_quantize

__all__ = ["QuantRow", "QuantTable", "compute_table2", "PAPER_TABLE2", "plot_quant_histogram", "stored_values"]

#: The paper's Table 2 (Llama2-7B): Nb → average bits per weight.
PAPER_TABLE2 = {6: 3.391, 7: 4.391, 8: 5.391, 9: 6.392, 10: 7.392, 11: 8.393}


def stored_values(record) -> np.ndarray:
    """A checkpoint tensor's values as float64 (bf16 bit patterns widened exactly)."""
    a = np.asarray(record.array)
    if record.dtype == "BF16":
        a = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    v = a.astype(np.float64)
    if not np.isfinite(v).all():
        i = int(np.flatnonzero(~np.isfinite(v).ravel())[0])
        raise CheckpointError(f"tensor {record.name!r} holds a non-finite value ({v.ravel()[i]}) at flat index {i}")
    return v


@dataclass(frozen=True)
class QuantRow:
    nb: int
    weights: int
    nz_msb_bits: float
    direct_bits: float

    @property
    def range(self) -> str:
        return f"+/- {(1 << self.nb) - 1}"

    @property
    def nz_msb_per_weight(self) -> float:
        return self.nz_msb_bits / self.weights

    @property
    def direct_per_weight(self) -> float:
        return self.direct_bits / self.weights


@dataclass
class QuantTable:
    model: str
    rows: list[QuantRow] = field(default_factory=list)
    matrices: int = 0

    def row(self, nb: int) -> QuantRow:
        return next(r for r in self.rows if r.nb == nb)

    def slopes(self) -> list[float]:
        """Bits per weight added by each extra Nb (the paper: about 1)."""
        return [b.nz_msb_per_weight - a.nz_msb_per_weight for a, b in zip(self.rows, self.rows[1:])]

    def format_text(self) -> str:
        head = ["Nb", "Range", "Avg bits/weight (NZ-MSB)", "Direct codes", "Raw (Nb+1)", "Paper (Llama2-7B)"]
        rows = [[str(r.nb), r.range, f"{r.nz_msb_per_weight:.3f}", f"{r.direct_per_weight:.3f}", str(r.nb + 1),
                 f"~{PAPER_TABLE2[r.nb]:.3f}" if r.nb in PAPER_TABLE2 else "-"] for r in self.rows]
        widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
        lines = [f"Table 2 for {self.model} ({self.matrices} matrices, {self.rows[0].weights:,} weights; "
                 f"per-matrix linear quantization, ideal code size):",
                 "  ".join(h.ljust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in rows]
        s = self.slopes()
        if s:
            lines.append(f"Slope per extra Nb: {', '.join(f'{v:.3f}' for v in s)} bits (paper: ~1.000)")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"model": self.model, "matrices": self.matrices,
                "rows": [{"nb": r.nb, "weights": r.weights, "nz_msb_bits_per_weight": r.nz_msb_per_weight,
                          "direct_bits_per_weight": r.direct_per_weight} for r in self.rows]}


def compute_table2(path: str | Path, nbs=QUANT_BITS, include=(), exclude=()) -> QuantTable:
    """Table 2 for the checkpoint at ``path`` (default selection: the matrices Table 1 counts)."""
    ck = open_checkpoint(path)
    infos = select_tensors(ck, include, exclude)
    nz = {nb: 0.0 for nb in nbs}
    direct = {nb: 0.0 for nb in nbs}
    n = 0
    for info in infos:
        w = stored_values(ck.tensor(info.name))
        n += w.size
        for nb in nbs:
            q, _ = linear_quantize(w, nb)
            nz[nb] += ideal_pair_bits(NzMsbCode(nb).split(q))
            direct[nb] += ideal_pair_bits(DirectCode(nb).split(q))
    return QuantTable(Path(path).name, [QuantRow(nb, n, nz[nb], direct[nb]) for nb in nbs], len(infos))


def plot_quant_histogram(path: str | Path, out: str | Path, matrix: str | None = None, nb: int = 11) -> dict:
    """Fig. 5: the histogram of one matrix quantized to ``nb`` bits (default: layer 0's Wq), with the
    NZ-MSB code boundaries ±2**k marked. Returns the figures it drew."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .figures import pick_matrix

    name = pick_matrix(path, matrix)
    w = stored_values(open_checkpoint(path).tensor(name))
    q, scale = linear_quantize(w, nb)
    lim = (1 << nb) - 1
    counts = np.bincount((q.ravel() + lim), minlength=2 * lim + 1)
    pairs = NzMsbCode(nb).split(q)
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(np.arange(-lim, lim + 1), counts, width=1.0, color="tab:blue")
    for k in range(1, nb):
        for sgn in (-1, 1):
            ax.axvline(sgn * (1 << k), color="0.8", lw=0.6, zorder=0)
    nzq = np.flatnonzero(counts)
    span = max(abs(int(nzq[0]) - lim), abs(int(nzq[-1]) - lim)) if nzq.size else lim
    ax.set_xlim(-span - 1, span + 1)
    ax.set_xlabel(f"quantized value q (Nb = {nb}, range ±{lim})")
    ax.set_ylabel("occurrences")
    bits = ideal_pair_bits(pairs) / q.size
    ax.set_title(f"Fig. 5: {name} quantized to {nb + 1} bits: {bits:.3f} bits/weight as NZ-MSB pairs")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return {"matrix": name, "nb": nb, "scale": scale, "bits_per_weight": bits, "max_abs_q": int(np.abs(q).max()),
            "zeros": int(counts[lim])}
