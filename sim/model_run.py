"""Whole checkpoints through a simulated core: every matrix's bf16 coding pairs, table per matrix.

One programmable core is built for the whole model (``max_extra_bits`` = what the widest matrix
table needs, escape index included), and each matrix is one run: its table written through ``cfg``,
then one command. This is what ``ansforge simulate`` and the whole-model tests run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from ..model.llm.checkpoint import open_checkpoint, select_tensors
from ..model.coding.codecs import parse_codec
from ..model.dtypes.pairs import BF16, convert
from .jobs import CORES, make_job, simulation_core

__all__ = ["MatrixPairs", "model_pairs", "histogram_pairs", "SimReport", "simulate_matrices", "engine_by_name"]


@dataclass
class MatrixPairs:
    """One matrix's bf16 coding pairs mapped through a codec's table."""

    name: str
    table: object
    symbols: np.ndarray
    extras: np.ndarray
    probabilities: np.ndarray   # of each symbol, as the table's quantizer saw them (counts / total)


def model_pairs(path: str, codec: str, names: Sequence[str] | None = None) -> list[MatrixPairs]:
    """The matrices of checkpoint ``path`` (all 2-D ones, or ``names``) as ``codec`` symbols and extras."""
    spec = parse_codec(codec)
    ck = open_checkpoint(path)
    infos = select_tensors(ck)
    if names:
        known = {i.name: i for i in infos}
        missing = [n for n in names if n not in known]
        if missing:
            raise ValueError(f"{path}: no matrix named {missing[0]!r} (matrices: {', '.join(sorted(known)[:8])} ...)")
        infos = [known[n] for n in names]
    out = []
    for info in infos:
        rec = ck.tensor(info.name)
        pairs = BF16.split(convert(rec.array, rec.dtype, "bf16")[0])
        counts = pairs.counts()
        ct, table = spec.tables(counts, BF16.extra_bits)
        s, e = ct.to_symbols(pairs.codes, pairs.extra)
        sc = ct.symbol_counts(counts).astype(np.float64)
        probs = sc / sc.sum() if sc.size > 1 else np.array([1.0, 0.0])
        out.append(MatrixPairs(info.name, table, s, e, probs))
    return out


def histogram_pairs(matrix: dict, codec: str, n: int, seed: int = 0) -> MatrixPairs:
    """``n`` bf16 coding pairs drawn from one matrix's measured exponent histogram.

    ``matrix`` is an entry of a histogram document (:mod:`ansforge.analysis.histograms`:
    ``{"name", "exponent_counts": {exponent: count}}``). The table is built from the measured counts,
    as for the real matrix; codes are drawn i.i.d. with those frequencies, and the additional data
    (sign and 7 mantissa bits, kept raw by the paper) uniformly. This is what ``ansforge demo``
    feeds the cores on a machine without checkpoints.
    """
    spec = parse_codec(codec)
    hist = matrix.get("exponent_counts") if isinstance(matrix, dict) else None
    if not hist:
        raise ValueError(f"histogram matrix {matrix.get('name', '?') if isinstance(matrix, dict) else matrix!r} "
                         "has no exponent_counts")
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    counts = np.array([int(c) for _, c in sorted(hist.items(), key=lambda kv: int(kv[0]))], dtype=np.int64)
    rng = np.random.default_rng(seed)
    ct, table = spec.tables(counts, BF16.extra_bits)
    codes = rng.choice(counts.size, size=n, p=counts / counts.sum())
    s, e = ct.to_symbols(codes, rng.integers(0, 1 << BF16.extra_bits, size=n))
    sc = ct.symbol_counts(counts).astype(np.float64)
    probs = sc / sc.sum() if sc.size > 1 else np.array([1.0, 0.0])
    return MatrixPairs(str(matrix["name"]), table, s, e, probs)


@dataclass
class SimReport:
    """``ansforge simulate --json`` (keys fixed by the issue), plus per-matrix detail."""

    core: str
    engine: str
    matrices: int
    pairs: int
    cycles: int
    pairs_per_cycle: float
    words: int
    bit_exact: bool
    errors: list[str] = field(default_factory=list)
    constriction_exact: bool | None = None
    sim_seconds: float = 0.0    # wall time inside the engine (stimulus generation excluded)
    #: of ``cycles``, the clocks in which ``o`` was ready (the testbench's back-pressure, ``stall_prob``)
    ready_cycles: int = 0
    per_matrix: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def engine_by_name(name: str):
    if name == "amaranth":
        from .amaranth_sim import AmaranthEngine
        return AmaranthEngine()
    if name == "verilator":
        from .verilator import VerilatorEngine
        return VerilatorEngine()
    raise ValueError(f"engine must be amaranth or verilator, not {name!r}")


def simulate_matrices(kind: str, codec: str, matrices: list[MatrixPairs], *, engine: str = "verilator",
                      stall_prob: float = 0.0, seed: int = 0, vcd: str | None = None, limit: int | None = None,
                      progress=None) -> SimReport:
    """Run each matrix (its first ``limit`` pairs if given) through one programmable ``kind`` core."""
    if kind not in CORES:
        raise ValueError(f"core must be one of {', '.join(CORES)}, not {kind!r}")
    spec = parse_codec(codec)
    if spec.kind != kind.split("-")[0]:
        raise ValueError(f"core {kind} cannot run codec {codec} ({spec.kind.upper()})")
    if not matrices:
        raise ValueError("no matrices to simulate")
    eng = engine_by_name(engine)
    core = simulation_core(kind, spec, [m.table for m in matrices])
    rep = SimReport(kind, engine, 0, 0, 0, 0.0, 0, True)
    if spec.is_constriction:
        rep.constriction_exact = True
    for i, mp in enumerate(matrices):
        s, e = (mp.symbols, mp.extras) if limit is None else (mp.symbols[:limit], mp.extras[:limit])
        job = make_job(kind, spec, mp.table, s, e, core=core)
        t0 = time.perf_counter()
        res = eng.run(job, stall_prob=stall_prob, seed=seed + i, vcd=vcd if i == 0 else None)
        rep.sim_seconds += time.perf_counter() - t0
        ok, errs = job.check(res)
        rep.matrices += 1
        rep.pairs += job.pairs
        rep.words += job.words
        rep.cycles += res.cycles
        ready = res.cycles if res.ready_cycles is None else res.ready_cycles
        rep.ready_cycles += ready
        rep.bit_exact &= ok
        rep.errors += [f"{mp.name}: {x}" for x in errs]
        row = {"matrix": mp.name, "pairs": job.pairs, "words": job.words, "cycles": res.cycles,
               "ready_cycles": ready, "bit_exact": ok}
        if spec.is_constriction:
            same = _constriction_agrees(mp.table, mp.probabilities, s, e)
            row["constriction_exact"] = same
            rep.constriction_exact &= same
            if not same:
                rep.errors.append(f"{mp.name}: golden words differ from constriction's")
        rep.per_matrix.append(row)
        if progress:
            progress(i + 1, len(matrices), mp.name, ok)
    rep.pairs_per_cycle = rep.pairs / rep.cycles if rep.cycles else 0.0
    return rep


def _constriction_agrees(table, probabilities, symbols, extras) -> bool:
    """Whether constriction's ``AnsCoder``, given the same float ``probabilities``, produces the golden
    words for these pairs (the constriction preset: Categorical for the symbol, Uniform for extras)."""
    from ..model.coding.constriction_codec import encode_pairs
    from ..model.coding.rans import RansCoder
    from ..model.coding.stream import Run

    words, _ = encode_pairs(probabilities, table.extra_bits, symbols, extras)
    ours = RansCoder(table.params).encode([table], [Run(0, symbols.size)], symbols, extras).words
    return bool(np.array_equal(words, ours))
