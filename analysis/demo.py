"""``ansforge demo``: Table-1-style figures with no download, from the shipped exponent histograms.

With no arguments it uses the histograms measured from stories260K and MiniLM-L6 (see
:mod:`ansforge.analysis.histograms`) and prints, per model, the weight-independent rows of the paper's
Table 1 and the cost of the normalized probability tables a tANS (8-bit) or rANS (16-bit) core would be
programmed with. Given ``--model``, it computes the full Table 1 of that checkpoint.

It then runs a tANS and an rANS decoder core, cycle by cycle, on pairs drawn from the largest matrix
histogram of each model (:func:`~ansforge.sim.model_run.histogram_pairs`), and reports pairs per
clock and whether the cores' pairs are bit-exact with the golden models. The Verilator engine runs
when ``verilator`` is installed (65,536 pairs per model, so 131,072 per core for the two shipped
models); otherwise the Amaranth simulator does (2,048 pairs per model, for speed).

The report is emitted line by line as it is computed (``emit``), so the first line appears at once;
what is being done, and the Verilator build, show as progress on a terminal (:mod:`..model.progress`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..model import progress
from ..sim.model_run import histogram_pairs, simulate_matrices
from ..sim.verilator import verilator_available
from .histograms import embedded_histograms, load_histograms
from .table1 import compute_table1, table1_from_histograms

__all__ = ["PAPER_LLAMA2_7B", "DEMO_CORES", "DEMO_TITLE", "run_demo", "demo_cores", "conversion_note"]

#: The demo's first line, printed before anything is imported or computed.
DEMO_TITLE = "ansforge demo: lossless coding-pair compression (Liguori, Table 1)"

#: The cores ``ansforge demo`` simulates: (core, codec).
DEMO_CORES = (("tans-decoder", "tans8"), ("rans-decoder", "rans16"))

#: Table 1 of the paper (Llama2-7B, bf16, 6,607,077,376 weights): method → average bits per weight.
PAPER_LLAMA2_7B = {"Original": 16.0, "Simple": 13.0, "Ideal": 10.58, "rANS 16 bits": 10.58, "tANS 8 bits": 10.69,
                   "Gzip -9": 12.69, "Bzip2 -9": 11.10}


def demo_cores(models: list[dict], engine: str = "auto", pairs: int | None = None, seed: int = 0,
               emit: Callable[[str], None] | None = None, results: list[dict] | None = None
               ) -> tuple[list[str], bool]:
    """Simulate :data:`DEMO_CORES` on pairs drawn from each model's largest matrix histogram.

    ``pairs`` are drawn per model, so each core decodes ``pairs * len(models)``. Returns the report
    lines (each also passed to ``emit`` as soon as it is known) and whether every core was bit-exact
    with the golden model; each core's figures are appended to ``results`` when it is given."""
    emit = emit or (lambda line: None)
    if engine == "auto":
        engine = "verilator" if verilator_available() else "amaranth"
    n = pairs or (65_536 if engine == "verilator" else 2_048)
    mats = []
    for m in models:
        big = max(m["matrices"], key=lambda x: sum(int(c) for c in x["exponent_counts"].values()))
        mats.append((m["name"], big))
    lines = [f"Hardware cores, cycle-accurate ({engine} engine): {n:,} bf16 pairs drawn from the largest matrix "
             f"histogram of each of the {len(mats)} models, {n * len(mats):,} pairs per core:"]
    emit(lines[0])
    ok = True
    for kind, codec in DEMO_CORES:
        progress.step(f"{kind} ({codec}): drawing pairs, encoding them with the golden model, simulating the core"
                      + (" (the first run compiles it with Verilator, then it is cached)" if engine == "verilator"
                         else ""))
        mp = [histogram_pairs(big, codec, n, seed + j) for j, (_, big) in enumerate(mats)]
        with progress.bar(len(mp), f"{kind} {codec}", unit="matrix") as update:
            rep = simulate_matrices(kind, codec, mp, engine=engine, progress=lambda *_: update(1))
        ok &= rep.bit_exact
        if results is not None:
            results.append({"core": kind, "codec": codec, "engine": engine, "pairs": rep.pairs,
                            "cycles": rep.cycles, "pairs_per_clock": rep.pairs_per_cycle, "words": rep.words,
                            "bit_exact": rep.bit_exact, "matrices": [f"{name}: {big['name']}" for name, big in mats],
                            "errors": list(rep.errors[:3])})
        where = ", ".join(f"{name.split(' ')[0]} {big['name']}" for name, big in mats)
        row = [f"  {kind:12s} {codec:6s}: {rep.pairs:,} pairs in {rep.cycles:,} cycles = "
               f"{rep.pairs_per_cycle:.4f} pairs/clock, {rep.words:,} words; bit-exact with the golden model: "
               f"{'yes' if rep.bit_exact else 'NO'}  ({where})"] + [f"    {e}" for e in rep.errors[:3]]
        for line in row:
            emit(line)
        lines += row
    return lines, ok


def conversion_note(note: str) -> str:
    """Say what a histogram file's conversion note means without "LOSSY" in a lossless demo: the
    rounding of an fp32 checkpoint to bf16 *before* coding, after which coding is bit-exact."""
    m = re.fullmatch(r"converted (\w+) -> (\w+) by round-to-nearest-even: LOSSY \(([\d,]+) values changed\).*", note)
    if not m:
        return note
    src, dst, changed = m.groups()
    return (f"the {src} checkpoint was rounded to {dst} before coding (round-to-nearest-even, {changed} values "
            f"changed by the rounding); coding the {dst} weights is lossless")


def demo_generation(model: str | Path, engine: str = "auto", steps: int = 16, codec: str = "tans8"
                    ) -> tuple[list[str], bool]:
    """A short greedy generation on ``model``'s weights as the simulated ``codec`` decoder core
    decompresses them, checked against the raw checkpoint's logits at every step.

    Returns the report lines and whether the logits were identical. A checkpoint that is not a
    llama (MiniLM, say) gets one line saying why it was skipped."""
    import io

    from ..model.errors import CheckpointError
    from ..model.llm.llama import read_layout
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
             jobs: int | None = None, engine: str = "auto", cores: bool = True,
             emit: Callable[[str], None] | None = None, title: bool = True,
             figures: dict | None = None) -> tuple[str, bool]:
    """The demo's report as text, and whether every simulated core was bit-exact.

    Each line is also passed to ``emit`` as soon as it is computed (the CLI prints it at once);
    ``title=False`` leaves out :data:`DEMO_TITLE` (the CLI prints it before importing anything).
    ``figures``, when given, receives the same results as data (``demo --json``): ``tables`` (each
    Table 1 as :meth:`to_json` writes it), ``cores`` (each simulated core's pairs, cycles, pairs per
    clock and bit-exactness), ``generation`` (its report lines, with ``--model``), ``bit_exact`` and
    the paper's Llama2-7B figures."""
    ok = True
    out: list[str] = []
    doc = figures if figures is not None else {}
    doc.update(source=str(model) if model is not None else (str(histograms) if histograms else "shipped histograms"),
               tables=[], cores=[])

    def say(*lines: str) -> None:
        for line in lines:
            out.append(line)
            if emit:
                emit(line)

    if title:
        say(DEMO_TITLE)
    say("")
    if model is not None:
        progress.step(f"Table 1 of {model}: every matrix through the golden codecs, constriction and gzip/bzip2/xz/zstd")
        table = compute_table1(model, jobs=jobs)
        doc["tables"].append(table.to_json())
        say(table.format_text())
        if cores:
            progress.step("a llama generating from weights the simulated decoder core decompresses")
            lines, ok = demo_generation(model, engine)
            doc["generation"] = {"lines": lines, "logits_identical": ok}
            say("", *lines)
    else:
        models = load_histograms(histograms) if histograms else embedded_histograms()
        origin = str(histograms) if histograms else "measured exponent histograms shipped with ansforge"
        say(f"Source: {origin}. Estimates need only the histograms; rows that need the weights",
            "(constriction rANS, gzip, bzip2, ...) come from `ansforge tables --model PATH`.")
        for m in models:
            progress.step(f"Table 1 estimates for {m['name']}: normalizing {len(m['matrices'])} matrices' tables")
            note = "estimated from exponent histograms; " + conversion_note(m.get("conversion", "weights as stored"))
            table = table1_from_histograms(m["name"], m["matrices"], m.get("pairs", "bf16"), note)
            doc["tables"].append(table.to_json())
            say("", table.format_text(), f"  source: {m.get('source', '?')}")
        if cores:
            say("")
            lines, ok = demo_cores(models, engine, emit=say, results=doc["cores"])
    doc.update(bit_exact=ok, paper_llama2_7b_bits_per_weight=dict(PAPER_LLAMA2_7B))
    say("", "The paper's Llama2-7B figures (bits/weight), for comparison:",
        "  " + ", ".join(f"{k} {v:g}" for k, v in PAPER_LLAMA2_7B.items()))
    return "\n".join(out), ok
