"""``ansforge demo``: Table-1-style figures with no download, from the shipped exponent histograms.

With no arguments it uses the histograms measured from stories260K and MiniLM-L6 (see
:mod:`ansforge.analysis.histograms`) and prints, per model, the weight-independent rows of the paper's
Table 1 and the cost of the normalized probability tables a tANS (8-bit) or rANS (16-bit) core would be
programmed with. Given ``--model``, it computes the full Table 1 of that checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from .histograms import embedded_histograms, load_histograms
from .table1 import compute_table1, table1_from_histograms

__all__ = ["PAPER_LLAMA2_7B", "run_demo"]

#: Table 1 of the paper (Llama2-7B, bf16, 6,607,077,376 weights): method → average bits per weight.
PAPER_LLAMA2_7B = {"Original": 16.0, "Simple": 13.0, "Ideal": 10.58, "rANS 16 bits": 10.58, "tANS 8 bits": 10.69,
                   "Gzip -9": 12.69, "Bzip2 -9": 11.10}


def run_demo(model: str | Path | None = None, histograms: str | Path | None = None,
             jobs: int | None = None) -> str:
    """Return the demo's report as text."""
    out = ["ansforge demo: lossless coding-pair compression (Liguori, Table 1)", ""]
    if model is not None:
        table = compute_table1(model, jobs=jobs)
        out.append(table.format_text())
    else:
        models = load_histograms(histograms) if histograms else embedded_histograms()
        origin = str(histograms) if histograms else "measured exponent histograms shipped with ansforge"
        out.append(f"Source: {origin}. Estimates need only the histograms; rows that need the weights")
        out.append("(constriction rANS, gzip, bzip2, ...) come from `ansforge tables --model PATH`.")
        for m in models:
            note = "estimated from exponent histograms; weights were " + m.get("conversion", "as stored")
            table = table1_from_histograms(m["name"], m["matrices"], m.get("pairs", "bf16"), note)
            out += ["", table.format_text()]
            out.append(f"  source: {m.get('source', '?')}")
    out += ["", "The paper's Llama2-7B figures (bits/weight), for comparison:",
            "  " + ", ".join(f"{k} {v:g}" for k, v in PAPER_LLAMA2_7B.items())]
    return "\n".join(out)
