"""Outliers and Table 2's level (§3.3): why a checkpoint's quantized weights cost more than Llama2-7B's.

Per-matrix linear quantization spends its ``2**Nb - 1`` steps on ``[-max|w|, max|w|]``; the bulk of
the weights lies within a few ``σ``. For a bell-shaped matrix the entropy of ``q`` is, at fine steps,

    H(q) ≈ h(w / σ) + log2(2**Nb - 1) - log2(max|w| / σ)        (h = 2.047 bits for a Gaussian)

so Table 2's *level* is set by ``max|w|/σ``: every doubling of the outlier ratio saves one bit per
weight, and the *slope* stays one bit per ``Nb``. (NZ-MSB pairs cost a little more than ``H(q)``, about
0.05–0.08 bits: they treat each power-of-two interval as flat.) :func:`measure_outliers` measures, per matrix:

* ``σ``, ``max|w|``, their ratio, and the excess kurtosis;
* the NZ-MSB bits at ``Nb`` (the paper's estimate) and the share of them spent on the top
  ``top_fraction`` of weights by ``|w|`` (each weight's ``-log2 p(code)`` plus its additional data);
* the Gaussian prediction above, from the measured ratio.

and, for the whole checkpoint, the ratio that the paper's Table 2 implies for Llama2-7B (the same
formula solved for ``max|w|/σ``), and a direct test: each matrix quantized with its range set to
that ratio times its own ``σ`` (no weight clips when the ratio exceeds the matrix's own) costs what
Table 2 reports if the ratio explains the gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model.llm.checkpoint import open_checkpoint, select_tensors
from ..model.dtypes.integers import NzMsbCode, clip_quantize, ideal_pair_bits, linear_quantize
from .table2 import PAPER_TABLE2, stored_values

__all__ = ["GAUSSIAN_ENTROPY_BITS", "MatrixOutliers", "OutlierReport", "measure_outliers", "gaussian_level",
           "paper_ratio", "pair_bits_per_weight"]

#: Differential entropy of a unit Gaussian, ``0.5·log2(2πe)`` bits.
GAUSSIAN_ENTROPY_BITS = 0.5 * math.log2(2 * math.pi * math.e)


def gaussian_level(nb: int, ratio: float) -> float:
    """Bits per weight of a Gaussian matrix with ``max|w|/σ = ratio`` quantized to ``nb`` bits."""
    return GAUSSIAN_ENTROPY_BITS + math.log2((1 << nb) - 1) - math.log2(ratio)


def paper_ratio(nb: int = 11) -> float:
    """The ``max|w|/σ`` for which :func:`gaussian_level` gives the paper's Table 2 at ``nb``."""
    return 2.0 ** (GAUSSIAN_ENTROPY_BITS + math.log2((1 << nb) - 1) - PAPER_TABLE2[nb])


def pair_bits_per_weight(pairs) -> np.ndarray:
    """Each pair's ``-log2 p(code)`` (its matrix's own frequencies) plus its additional-data width."""
    counts = pairs.counts()
    p = counts / max(int(counts.sum()), 1)
    codes = np.asarray(pairs.codes, dtype=np.int64)
    with np.errstate(divide="ignore"):
        return -np.log2(p[codes]) + pairs.extra_bits_per_code.astype(np.float64)[codes]


@dataclass(frozen=True)
class MatrixOutliers:
    name: str
    weights: int
    sigma: float
    max_abs: float
    kurtosis: float
    bits: float                  # NZ-MSB ideal bits of the matrix at nb
    top_bits: float              # of which on the top fraction of weights
    top_weights: int
    at_paper_ratio_bits: float   # quantized with range = paper_ratio · σ

    @property
    def ratio(self) -> float:
        return self.max_abs / self.sigma if self.sigma else 0.0


@dataclass
class OutlierReport:
    model: str
    nb: int
    top_fraction: float
    matrices: list[MatrixOutliers] = field(default_factory=list)
    per_matrix: bool = False

    @property
    def weights(self) -> int:
        return sum(m.weights for m in self.matrices)

    def _mean(self, values) -> float:
        return float(sum(m.weights * v for m, v in zip(self.matrices, values)) / self.weights)

    def summary(self) -> dict:
        ratios = np.array([m.ratio for m in self.matrices])
        measured = self._mean(m.bits / m.weights for m in self.matrices)
        predicted = self._mean(gaussian_level(self.nb, m.ratio) for m in self.matrices)
        paper = PAPER_TABLE2.get(self.nb)
        out = {"model": self.model, "nb": self.nb, "matrices": len(self.matrices), "weights": self.weights,
               "max_over_sigma_median": float(np.median(ratios)), "max_over_sigma_max": float(ratios.max()),
               "max_over_sigma_min": float(ratios.min()),
               "top_fraction": self.top_fraction,
               "top_bits_share": sum(m.top_bits for m in self.matrices) / sum(m.bits for m in self.matrices),
               "top_weights_share": sum(m.top_weights for m in self.matrices) / self.weights,
               "measured_bits_per_weight": measured, "gaussian_predicted_bits_per_weight": predicted,
               "paper_bits_per_weight": paper}
        if paper is not None:
            out.update(paper_implied_ratio=paper_ratio(self.nb),
                       at_paper_ratio_bits_per_weight=self._mean(m.at_paper_ratio_bits / m.weights
                                                                 for m in self.matrices),
                       gap_to_paper=measured - paper, gap_predicted=predicted - paper)
        return out

    def format_text(self) -> str:
        s = self.summary()
        lines = [f"Outliers of {self.model} ({s['matrices']} matrices, {s['weights']:,} weights; per-matrix linear "
                 f"quantization to Nb = {self.nb}, NZ-MSB pairs, ideal code size):",
                 f"  max|w|/sigma per matrix: median {s['max_over_sigma_median']:.1f}, min "
                 f"{s['max_over_sigma_min']:.1f}, max {s['max_over_sigma_max']:.1f}",
                 f"  top {self.top_fraction:.1%} of weights by |w| ({s['top_weights_share']:.3%} of the weights) take "
                 f"{s['top_bits_share']:.3%} of the bits",
                 f"  measured {s['measured_bits_per_weight']:.3f} bits/weight; Gaussian prediction from each matrix's "
                 f"max|w|/sigma {s['gaussian_predicted_bits_per_weight']:.3f}"]
        if s["paper_bits_per_weight"] is not None:
            lines += [f"  paper (Llama2-7B) {s['paper_bits_per_weight']:.3f}: the same formula implies max|w|/sigma = "
                      f"{s['paper_implied_ratio']:.1f} for Llama2-7B",
                      f"  gap to the paper {s['gap_to_paper']:+.3f} bits, of which max|w|/sigma predicts "
                      f"{s['gap_predicted']:+.3f}",
                      f"  each matrix quantized over +/-{s['paper_implied_ratio']:.1f} sigma instead of +/-max|w|: "
                      f"{s['at_paper_ratio_bits_per_weight']:.3f} bits/weight (paper {s['paper_bits_per_weight']:.3f})"]
        ranked = sorted(self.matrices, key=lambda m: -m.ratio)
        shown = ranked if self.per_matrix else ranked[:5]
        lines.append(f"  {'matrix':<48}{'max/sigma':>10}{'kurtosis':>10}{'bits/w':>9}{'top share':>11}")
        for m in shown:
            lines.append(f"  {m.name[:47]:<48}{m.ratio:10.1f}{m.kurtosis:10.2f}{m.bits / m.weights:9.3f}"
                         f"{m.top_bits / m.bits:11.3%}")
        if not self.per_matrix and len(ranked) > 5:
            lines.append(f"  ... {len(ranked) - 5} more (--per-matrix)")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {**self.summary(), "per_matrix": [
            {"name": m.name, "weights": m.weights, "sigma": m.sigma, "max_abs": m.max_abs, "max_over_sigma": m.ratio,
             "kurtosis": m.kurtosis, "bits_per_weight": m.bits / m.weights, "top_bits_share": m.top_bits / m.bits,
             "at_paper_ratio_bits_per_weight": m.at_paper_ratio_bits / m.weights} for m in self.matrices]}


def _largest(mag: np.ndarray, k: int) -> np.ndarray:
    """The indices ``np.argsort(-mag, kind="stable")[:k]`` gives (the ``k`` largest, ties to the lower
    index, in that order), from a partition instead of a whole sort: a 7B model's matrices are
    tens of millions of weights."""
    neg = -mag
    if k >= neg.size:
        return np.argsort(neg, kind="stable")[:k]
    thr = np.partition(neg, k - 1)[k - 1]
    if np.isnan(thr):                            # (NaN sorts last: fewer than k numbers)
        return np.argsort(neg, kind="stable")[:k]
    sel = np.concatenate([np.flatnonzero(neg < thr), np.flatnonzero(neg == thr)])
    sel = sel[np.lexsort((sel, neg[sel]))]       # by value, then index: the stable sort's order
    return sel[:k]


def measure_outliers(path: str | Path, nb: int = 11, top_fraction: float = 0.001, include=(), exclude=(),
                     per_matrix: bool = False) -> OutlierReport:
    """Measure the outliers of every selected matrix of ``path`` (module docstring)."""
    from ..model.errors import ConfigError

    if not 0 < top_fraction < 1:
        raise ConfigError(f"top fraction must be between 0 and 1, not {top_fraction!r}")
    ck = open_checkpoint(path)
    report = OutlierReport(Path(path).name, nb, top_fraction, per_matrix=per_matrix)
    code = NzMsbCode(nb)
    implied = paper_ratio(nb) if nb in PAPER_TABLE2 else None
    for info in select_tensors(ck, include, exclude):
        w = stored_values(ck.tensor(info.name)).ravel()
        sigma = float(np.std(w))
        top = float(np.abs(w).max()) if w.size else 0.0
        kurt = float(np.mean((w - w.mean()) ** 4) / sigma ** 4 - 3.0) if sigma else 0.0
        q, _ = linear_quantize(w, nb)
        pairs = code.split(q)
        per = pair_bits_per_weight(pairs)
        k = max(1, int(round(top_fraction * w.size)))
        biggest = _largest(np.abs(w), k)
        at_paper = float("nan")
        if implied is not None and sigma:
            qp, _ = clip_quantize(w, nb, implied * sigma)
            at_paper = ideal_pair_bits(code.split(qp))
        report.matrices.append(MatrixOutliers(info.name, int(w.size), sigma, top, kurt, float(per.sum()),
                                              float(per[biggest].sum()), k, at_paper))
    return report
