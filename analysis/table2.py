"""The paper's Table 2 (§3.3) and Fig. 5 on any checkpoint: linearly quantized integers as coding pairs.

Each selected matrix is quantized on its own (:func:`~ansforge.model.dtypes.integers.linear_quantize`,
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

from ..model.llm.checkpoint import open_checkpoint, select_tensors
from ..model.errors import CheckpointError
from ..model.dtypes.integers import (QUANT_BITS, DirectCode, NzMsbCode, SubdividedCode, clip_quantize, ideal_pair_bits,
                              linear_quantize)
from .lossy import SCALE_BITS, ErrorStats, ModelEffect, charged_bits, error_stats, heldout_bits, probe_or_none

__all__ = ["QuantRow", "VariantRow", "QuantTable", "plot_quant_tradeoff", "compute_table2", "PAPER_TABLE2", "plot_quant_histogram", "stored_values"]

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


@dataclass
class QuantRow:
    """One ``Nb`` of Table 2, summed over the matrices: ideal (the paper's), tables charged and held-out
    sizes of NZ-MSB and direct codes, in bits; the error of the quantization; its effect on the model."""

    nb: int
    weights: int
    nz_msb_bits: float
    direct_bits: float
    nz_msb_charged: float = 0.0
    direct_charged: float = 0.0
    nz_msb_heldout: float = 0.0
    direct_heldout: float = 0.0
    errors: ErrorStats = field(default_factory=ErrorStats)
    effect: ModelEffect | None = None

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
class VariantRow:
    """A §3.3 variant at one ``Nb``: subdivided intervals, saturated additional data, or clipping."""

    label: str
    nb: int
    weights: int
    ideal: float = 0.0
    charged: float = 0.0
    heldout: float = 0.0
    errors: ErrorStats = field(default_factory=ErrorStats)
    effect: ModelEffect | None = None

    def to_json(self) -> dict:
        return {"variant": self.label, "nb": self.nb, "bits_per_weight": self.charged / self.weights,
                "ideal_bits_per_weight": self.ideal / self.weights,
                "heldout_bits_per_weight": self.heldout / self.weights, **self.errors.to_json(),
                **_effect_json(self.effect)}


def _effect_json(effect: ModelEffect | None) -> dict:
    return {"kl_nats": effect.kl_nats if effect else None,
            "greedy_agreement": effect.greedy_agreement if effect else None}


def _effect_cells(effect: ModelEffect | None) -> list[str]:
    return [f"{effect.kl_nats:.2e}", f"{effect.greedy_agreement:.1%}"] if effect else ["-", "-"]


def _aligned(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
    return ["  ".join(h.ljust(w) for h, w in zip(head, widths))] + \
        ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in rows]


@dataclass
class QuantTable:
    model: str
    rows: list[QuantRow] = field(default_factory=list)
    matrices: int = 0
    variants: list[VariantRow] = field(default_factory=list)
    positions: int = 0
    effect_note: str = ""

    def row(self, nb: int) -> QuantRow:
        return next(r for r in self.rows if r.nb == nb)

    def variant(self, label: str) -> VariantRow:
        return next(v for v in self.variants if v.label == label)

    def slopes(self) -> list[float]:
        """Bits per weight added by each extra Nb between consecutive rows (the paper: about 1)."""
        return [(b.nz_msb_per_weight - a.nz_msb_per_weight) / (b.nb - a.nb) for a, b in zip(self.rows, self.rows[1:])]

    def format_text(self) -> str:
        n = self.rows[0].weights
        head = ["Nb", "Range", "NZ-MSB ideal", "+tables", "held-out", "Direct ideal", "+tables", "held-out",
                "Raw", "Paper", "relRMSE", "flushed", "KL nats", "greedy"]
        rows = [[str(r.nb), r.range, f"{r.nz_msb_per_weight:.3f}", f"{r.nz_msb_charged / n:.3f}",
                 f"{r.nz_msb_heldout / n:.3f}", f"{r.direct_per_weight:.3f}", f"{r.direct_charged / n:.3f}",
                 f"{r.direct_heldout / n:.3f}", str(r.nb + 1),
                 f"~{PAPER_TABLE2[r.nb]:.3f}" if r.nb in PAPER_TABLE2 else "-", f"{r.errors.rel_rmse:.5f}",
                 f"{r.errors.flushed:.2%}", *_effect_cells(r.effect)] for r in self.rows]
        effect = (f"effect on the model over {self.positions} greedy positions" if self.positions
                  else f"no effect on the model measured: {self.effect_note}")
        lines = [f"Table 2 for {self.model} ({self.matrices} matrices, {n:,} weights; per-matrix linear quantization; "
                 "bits/weight: ideal = the paper's estimate, +tables = 16-bit frequency and identity of each used code "
                 f"and the 32-bit scale charged per matrix, held-out = each half coded with the other's histogram; "
                 f"{effect}):"]
        lines += _aligned(head, rows)
        s = self.slopes()
        if s:
            lines.append(f"Slope per extra Nb (ideal): {', '.join(f'{v:.3f}' for v in s)} bits (paper: ~1.000)")
        if self.variants:
            lines += ["", f"§3.3 saturation and subdivision at Nb = {self.variants[0].nb} (NZ-MSB = 1 code per "
                          "power-of-two interval, direct = 1 code per magnitude):"]
            head = ["Variant", "+tables", "ideal", "held-out", "relRMSE", "maxRel", "flushed", "saturated", "KL nats",
                    "greedy"]
            rows = [[v.label, f"{v.charged / n:.3f}", f"{v.ideal / n:.3f}", f"{v.heldout / n:.3f}",
                     f"{v.errors.rel_rmse:.5f}", f"{v.errors.max_rel_err:.3g}", f"{v.errors.flushed:.2%}",
                     f"{v.errors.saturated:.3%}", *_effect_cells(v.effect)] for v in self.variants]
            lines += _aligned(head, rows)
        return "\n".join(lines)

    def to_json(self) -> dict:
        n = self.rows[0].weights if self.rows else 1
        return {"model": self.model, "matrices": self.matrices, "effect_positions": self.positions,
                "effect_note": self.effect_note,
                "size": "bits_per_weight: ideal code size + additional data + tables (16-bit frequency and identity "
                        "per used code) + 32-bit scale, per matrix; heldout: each half coded with the other half's "
                        "histogram (+1/2 smoothing)",
                "rows": [{"nb": r.nb, "weights": r.weights, "nz_msb_bits_per_weight": r.nz_msb_per_weight,
                          "direct_bits_per_weight": r.direct_per_weight, "bits_per_weight": r.nz_msb_charged / n,
                          "nz_msb_heldout_bits_per_weight": r.nz_msb_heldout / n,
                          "direct_charged_bits_per_weight": r.direct_charged / n,
                          "direct_heldout_bits_per_weight": r.direct_heldout / n, **r.errors.to_json(),
                          **_effect_json(r.effect)} for r in self.rows],
                "variants": [v.to_json() for v in self.variants]}


def _variant_codes(nb: int, subdivide, saturate_bits, clips):
    """(label, quantizer, code) of each §3.3 variant: quantizer(w) -> (q, scale), code splits q."""
    plain = lambda w: linear_quantize(w, nb)   # noqa: E731
    out = [("NZ-MSB", plain, NzMsbCode(nb))]
    out += [(f"subdivided s={s} ({SubdividedCode(nb, s).n_codes} codes)", plain, SubdividedCode(nb, s))
            for s in subdivide if 0 < s < nb - 1]
    out.append((f"direct ({1 << nb} codes)", plain, DirectCode(nb)))
    out += [(f"NZ-MSB, additional data saturated to {b} bits", plain, NzMsbCode(nb, max_extra_bits=b))
            for b in saturate_bits if 1 <= b < nb]
    out += [(f"NZ-MSB, clipped at {c:g}·max|w|", lambda w, c=c: clip_quantize(w, nb, c * (float(np.abs(w).max()) or 1.0)),
             NzMsbCode(nb)) for c in clips]
    return out


def compute_table2(path: str | Path, nbs=QUANT_BITS, include=(), exclude=(), *, variants_nb: int | None = None,
                   subdivide=(1, 2, 3), saturate_bits=(8,), clips=(0.5, 0.25), steps: int | None = 0) -> QuantTable:
    """Table 2 for the checkpoint at ``path`` (default selection: the matrices Table 1 counts).

    ``variants_nb`` adds the §3.3 variants at that ``Nb``: interval subdivision by ``s`` bits for each
    of ``subdivide``, additional data saturated to each of ``saturate_bits`` (the paper's "kind of
    saturation"), and clipping at each of ``clips`` times the matrix's ``max|w|`` (the same Nb spent
    on a narrower range: finer steps for the bulk, the outliers saturated). ``steps`` > 0
    measures the effect on the model of every row on a llama (:class:`~.lossy.EffectProbe`; ``None``:
    automatic, :func:`~.lossy.probe_or_none`).
    """
    ck = open_checkpoint(path)
    infos = select_tensors(ck, include, exclude)
    probe, why = probe_or_none(path, steps)
    rows = {nb: QuantRow(nb, 0, 0.0, 0.0) for nb in nbs}
    specs = _variant_codes(variants_nb, subdivide, saturate_bits, clips) if variants_nb else []
    variants = {label: VariantRow(label, variants_nb, 0) for label, _, _ in specs}
    values: dict[object, dict[str, np.ndarray]] = {}

    def keep(key, name, v, shape):
        if probe is not None:
            values.setdefault(key, {})[name] = np.asarray(v, dtype=np.float32).reshape(shape)

    for info in infos:
        w = stored_values(ck.tensor(info.name))
        for nb in nbs:
            r = rows[nb]
            q, scale = linear_quantize(w, nb)
            nz, direct = NzMsbCode(nb).split(q), DirectCode(nb).split(q)
            r.weights += w.size
            r.nz_msb_bits += ideal_pair_bits(nz)
            r.direct_bits += ideal_pair_bits(direct)
            r.nz_msb_charged += charged_bits(nz, side_bits=SCALE_BITS)
            r.direct_charged += charged_bits(direct, side_bits=SCALE_BITS)
            r.nz_msb_heldout += heldout_bits(nz) + SCALE_BITS
            r.direct_heldout += heldout_bits(direct) + SCALE_BITS
            r.errors = r.errors + error_stats(w, q * scale)
            keep(nb, info.name, q * scale, w.shape)
        for label, quantize, code in specs:
            v = variants[label]
            q, scale = quantize(w)
            pairs = code.split(q)
            decoded = code.join(pairs) * scale
            v.weights += w.size
            v.ideal += ideal_pair_bits(pairs)
            v.charged += charged_bits(pairs, side_bits=SCALE_BITS)
            v.heldout += heldout_bits(pairs) + SCALE_BITS
            top = scale * ((1 << variants_nb) - 1) * (1 + 1e-12)      # above it: clipped (float slack for max|w|)
            v.errors = v.errors + error_stats(w, decoded, max_mag=top)
            keep(label, info.name, decoded, w.shape)
    if probe is not None:
        for nb, r in rows.items():
            r.effect = probe.measure(values[nb])
        for label, v in variants.items():
            v.effect = probe.measure(values[label])
    return QuantTable(Path(path).name, list(rows.values()), len(infos), list(variants.values()),
                      probe.positions if probe else 0, why)


def plot_quant_histogram(path: str | Path, out: str | Path | None, matrix: str | None = None, nb: int = 11,
                         bins: int = 255) -> dict:
    """Fig. 5: one matrix (default: layer 0's Wq) quantized to ``nb`` bits, two panels, log counts.

    Left: the values ``q`` in ``bins`` equal bins over the occupied range (a bin holding a single
    weight still shows as a bar on the log scale; bins of at most 3 weights are also marked with a
    dot, so lone outliers cannot hide), with the NZ-MSB code boundaries ``±2**k`` drawn and labelled
    by code. Right: what the coder sees, the occurrences of each NZ-MSB code. ``out`` may be ``None``
    to leave the figure open (notebooks). Returns the figures it drew.
    """
    import matplotlib.pyplot as plt

    from .figures import pick_matrix

    name = pick_matrix(path, matrix)
    w = stored_values(open_checkpoint(path).tensor(name))
    q, scale = linear_quantize(w, nb)
    pairs = NzMsbCode(nb).split(q)
    bits = ideal_pair_bits(pairs) / q.size
    span = max(int(np.abs(q).max()), 1)
    edges = np.linspace(-span - 0.5, span + 0.5, bins + 1)
    counts, _ = np.histogram(q.ravel(), edges)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [2.2, 1]})
    centers = 0.5 * (edges[1:] + edges[:-1])
    left.bar(centers, counts, width=edges[1] - edges[0], color="#3b6ea8", log=True)
    rare = (counts > 0) & (counts <= 3)
    left.plot(centers[rare], counts[rare], "o", color="#c4572a", ms=4, label=f"bins of 1-3 weights ({int(rare.sum())})")
    left.set_ylim(0.5, counts.max() * 2)
    for k in range(1, nb + 1):
        edge = 1 << (k - 1)
        if edge > span:
            break
        for sgn in (-1, 1):
            left.axvline(sgn * (edge - 0.5), color="0.6", lw=0.6, ls=":", zorder=0)
        if edge >= span / 40:      # label boundaries far enough apart to read
            left.text(edge - 0.5, counts.max() * 1.3, f"code {k}", rotation=90, fontsize=7, va="top", ha="right")
    left.set_xlim(edges[0], edges[-1])
    left.set_xlabel(f"quantized value q (Nb = {nb}, range ±{(1 << nb) - 1}; {bins} bins of "
                    f"{edges[1] - edges[0]:.3g} values; dotted: NZ-MSB code boundaries ±2^(k-1))")
    left.set_ylabel("weights per bin (log)")
    left.legend(fontsize=8, loc="upper right")
    codes = pairs.counts()
    used = np.flatnonzero(codes)
    right.bar(used, codes[used], color="#c4572a", log=True)
    right.set_xlabel("NZ-MSB code k (|q| in [2^(k-1), 2^k); code 0: q = 0)")
    right.set_ylabel("occurrences (log)")
    right.set_title(f"{used.size} codes used", fontsize=9)
    fig.suptitle(f"Fig. 5: {Path(path).name}, {name} ({'x'.join(map(str, w.shape))}) linearly quantized to Nb = {nb} "
                 f"(+sign): {bits:.3f} bits/weight as NZ-MSB pairs (ideal), max|q| = {span}, "
                 f"max|w|/sigma = {float(np.abs(w).max() / (np.std(w) or 1)):.1f}", fontsize=10, wrap=True)
    fig.tight_layout()
    info = {"matrix": name, "nb": nb, "scale": scale, "bits_per_weight": bits, "max_abs_q": span,
            "zeros": int(np.count_nonzero(q == 0)), "rare_bins": int(rare.sum()), "bin_width": float(edges[1] - edges[0]),
            "figure": fig}
    if out is not None:
        fig.savefig(out, dpi=120)
        plt.close(fig)
    return info


def plot_quant_tradeoff(table: QuantTable, out: str | Path | None = None):
    """§3.3's size/error trade-off: bits per weight (tables charged) against relative RMSE, for NZ-MSB
    and direct codes at every ``Nb`` and each variant. Returns the matplotlib ``Figure``."""
    import matplotlib.pyplot as plt

    n = table.rows[0].weights
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    err = [r.errors.rel_rmse for r in table.rows]
    ax.plot([r.nz_msb_charged / n for r in table.rows], err, "o-", color="#3b6ea8", label="NZ-MSB, Nb = "
            + ",".join(str(r.nb) for r in table.rows))
    ax.plot([r.direct_charged / n for r in table.rows], err, "s--", color="#888888", label="direct codes")
    for r in table.rows:
        ax.annotate(f"Nb={r.nb}", (r.nz_msb_charged / n, r.errors.rel_rmse), textcoords="offset points",
                    xytext=(4, 4), fontsize=7)
    markers = "^v<>Dph*"
    for i, v in enumerate(table.variants[1:]):
        ax.plot(v.charged / n, v.errors.rel_rmse, markers[i % len(markers)], ms=8, label=v.label)
    ax.set_yscale("log")
    ax.set_xlabel("bits per weight (ideal + additional data + tables charged)")
    ax.set_ylabel("relative RMSE of the weights")
    nb = f" at Nb = {table.variants[0].nb}" if table.variants else ""
    ax.set_title(f"§3.3 size/error trade-off on {table.model} ({table.matrices} matrices): saturation and "
                 f"subdivision{nb}", fontsize=10)
    ax.grid(True, which="both", color="#e6e6e6", lw=0.5)
    ax.legend(fontsize=7)
    fig.tight_layout()
    if out is not None:
        fig.savefig(out, dpi=120)
        plt.close(fig)
    return fig
