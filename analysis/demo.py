"""``ansforge demo``: Table-1-style figures with no download, from the shipped exponent histograms.

With no arguments it uses the histograms measured from stories260K and MiniLM-L6 (see
:mod:`ansforge.analysis.histograms`) and prints, per model, the weight-independent rows of the paper's
Table 1 and the cost of the normalized probability tables a tANS (8-bit) or rANS (16-bit) core would be
programmed with. Given ``--model``, it computes the full Table 1 of that checkpoint.

It then runs a tANS and an rANS decoder core, cycle by cycle, on pairs drawn from the largest matrix
histogram of each model (:func:`~ansforge.sim.model_run.histogram_pairs`), and reports pairs per
clock and whether the cores' pairs are bit-exact with the golden models. The Verilator engine runs
when ``verilator`` is installed (65,536 pairs per matrix); otherwise the Amaranth simulator does
(2,048 pairs per matrix, for speed).
"""

from __future__ import annotations

from pathlib import Path

from ..sim.model_run import histogram_pairs, simulate_matrices
from ..sim.verilator import verilator_available
from .histograms import embedded_histograms, load_histograms
from .table1 import compute_table1, table1_from_histograms

__all__ = ["PAPER_LLAMA2_7B", "DEMO_CORES", "run_demo", "demo_cores"]

#: The cores ``ansforge demo`` simulates: (core, codec).
DEMO_CORES = (("tans-decoder", "tans8"), ("rans-decoder", "rans16"))

#: Table 1 of the paper (Llama2-7B, bf16, 6,607,077,376 weights): method → average bits per weight.
PAPER_LLAMA2_7B = {"Original": 16.0, "Simple": 13.0, "Ideal": 10.58, "rANS 16 bits": 10.58, "tANS 8 bits": 10.69,
                   "Gzip -9": 12.69, "Bzip2 -9": 11.10}


def demo_cores(models: list[dict], engine: str = "auto", pairs: int | None = None, seed: int = 0
               ) -> tuple[list[str], bool]:
    """Simulate :data:`DEMO_CORES` on pairs drawn from each model's largest matrix histogram.

    Returns the report lines and whether every core was bit-exact with the golden model."""
    if engine == "auto":
        engine = "verilator" if verilator_available() else "amaranth"
    n = pairs or (65_536 if engine == "verilator" else 2_048)
    mats = []
    for m in models:
        big = max(m["matrices"], key=lambda x: sum(int(c) for c in x["exponent_counts"].values()))
        mats.append((m["name"], big))
    lines = [f"Hardware cores, cycle-accurate ({engine} engine): {n:,} bf16 pairs drawn from the largest matrix "
             "histogram of each model:"]
    ok = True
    for kind, codec in DEMO_CORES:
        mp = [histogram_pairs(big, codec, n, seed + j) for j, (_, big) in enumerate(mats)]
        rep = simulate_matrices(kind, codec, mp, engine=engine)
        ok &= rep.bit_exact
        where = ", ".join(f"{name.split(' ')[0]} {big['name']}" for name, big in mats)
        lines.append(f"  {kind:12s} {codec:6s}: {rep.pairs:,} pairs in {rep.cycles:,} cycles = "
                     f"{rep.pairs_per_cycle:.4f} pairs/clock, {rep.words:,} words; bit-exact with the golden model: "
                     f"{'yes' if rep.bit_exact else 'NO'}  ({where})")
        lines += [f"    {e}" for e in rep.errors[:3]]
    return lines, ok


def demo_generation(model: str | Path, engine: str = "auto", steps: int = 16, codec: str = "tans8"
                    ) -> tuple[list[str], bool]:
    """A short greedy generation on ``model``'s weights as the simulated ``codec`` decoder core
    decompresses them, checked against the raw checkpoint's logits at every step.

    Returns the report lines and whether the logits were identical. A checkpoint that is not a
    llama (MiniLM, say) gets one line saying why it was skipped."""
    import io

    from ..model.errors import CheckpointError
    from ..model.llama import read_layout
    from ..sim.llama_run import run_generation

    try:
        read_layout(model)
    except CheckpointError as e:
        return [f"Generation skipped: {e}"], True
    if engine == "auto":
        engine = "verilator" if verilator_available() else "amaranth"
    out, err = io.StringIO(), io.StringIO()
    gen, setup = run_generation(model, via="hardware", codec=codec, engine=engine, steps=steps, temperature=0,
                                compare=True, seed=1, out=out, err=err)
    same = gen.mismatch is None
    return [f"Generation from hardware-decompressed weights ({steps} greedy steps):",
            f"  weights via {setup.describe()}",
            f"  output: {out.getvalue().strip()}",
            f"  logits identical to the raw checkpoint's at all {gen.steps} steps: {'yes' if same else 'NO'}"
            + ("" if same else f" (first difference at step {gen.mismatch})")], same


def run_demo(model: str | Path | None = None, histograms: str | Path | None = None,
             jobs: int | None = None, engine: str = "auto", cores: bool = True) -> tuple[str, bool]:
    """The demo's report as text, and whether every simulated core was bit-exact."""
    ok = True
    out = ["ansforge demo: lossless coding-pair compression (Liguori, Table 1)", ""]
    if model is not None:
        table = compute_table1(model, jobs=jobs)
        out.append(table.format_text())
        if cores:
            lines, ok = demo_generation(model, engine)
            out += [""] + lines
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
        if cores:
            lines, ok = demo_cores(models, engine)
            out += [""] + lines
    out += ["", "The paper's Llama2-7B figures (bits/weight), for comparison:",
            "  " + ", ".join(f"{k} {v:g}" for k, v in PAPER_LLAMA2_7B.items())]
    return "\n".join(out), ok
