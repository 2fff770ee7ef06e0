"""The paper's Table 1 (§2.1) on any checkpoint: coding pairs against general-purpose compressors.

Rows, with the paper's method names (scripts depend on them):

``Original``
    The coded tensors at their storage width (16 bits per bf16 weight).
``Simple``
    Per matrix, ``ceil(log2(number of codes))`` bits per code plus the additional data.
``Ideal``
    Per matrix, ``sum -log2(p)`` over the codes with ``p`` the code frequency, in double precision,
    plus the additional data.
``rANS 16 bits``, ``tANS 8 bits`` (and any other ``--codecs``)
    The golden codecs of the hardware (:mod:`ansforge.model.coding.rans`, :mod:`ansforge.model.coding.tans`): the
    selected matrices coded in file order as one stream exactly as ``ansforge compress --layout model``
    writes it (final state and checkpoints included), decoded again and checked bit-exact; past
    :data:`CODEC_STREAM_PAIRS` pairs (2^25, more than MiniLM's matrices) the matrices are cut into
    several such streams, so that a 7B model's rows hold one stream's pairs in memory at a time. The
    note gives the gap to Ideal.
``Context (rANS 16 bits, container)`` (``context=`` codec)
    ``ansforge compress --context --stream-per-tensor`` of the checkpoint into a temporary container,
    read back from the file: for the selected matrices, their streams' words as stored on disk, their
    checkpoints, and their side information as the records give it, packed (code→exponent table, one
    frequency per symbol and table set, the selects, the plan header:
    :meth:`~ansforge.model.coding.container.Container.side_bits`). Every selected tensor is decoded from
    the file and checked bit-exact. The note gives the gap to Ideal and the bytes the records' JSON takes.
``rANS 24 bits (constriction)``
    The codes through constriction's ``AnsCoder`` (32-bit words, 64-bit state, 24-bit probabilities),
    decoded again and checked bit-exact against the original tensor; additional data raw.
``Gzip -9``, ``Bzip2 -9``, ``xz -9``, ``zstd -19``
    The concatenated bytes of the coded tensors (little-endian, in file order), through Python's
    ``gzip`` (``mtime=0``), ``bz2``, ``lzma`` and ``zstandard``.

Work is split into one task per matrix and one streaming task per general-purpose compressor, all
reading the checkpoint by memory map in chunks of :data:`CHUNK_VALUES` values, so peak memory is a few
hundred MB per worker whatever the model size.

Progress (a terminal only, :mod:`ansforge.model.progress`): one bar of weight passes, each task
counting the weights it has been through as it goes: per :data:`PROGRESS_VALUES` values handed to a
general-purpose compressor (xz -9 and zstd -19 take minutes on a model of 20 M weights), per tensor
read, coded and checked in the golden-codec and Context tasks, per matrix in the histogram and
constriction tasks. Worker processes add to a shared array (one slot per task) that the bar reads
four times a second; the tasks still running are named after the counts, each with the share of its
own weights done (``xz 63%``). With ``--dask`` the bar advances per finished task.
"""

from __future__ import annotations

import bz2
import dataclasses
import functools
import gzip
import lzma
import math
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..model.coding import constriction_codec
from ..model.coding.codecs import parse_codec
from ..model.llm.checkpoint import Checkpoint, open_checkpoint, select_tensors
from ..model import progress as _progress
from ..model.errors import AnsforgeError, ConfigError
from ..model.dtypes.pairs import PAIR_FORMATS, Conversion, convert
from ..model.coding.probability import (cross_entropy_bits, entropy_bits, ideal_bits, normalize_counts,
                                 proportional_counts)
from .huffman_sizes import HUFFMAN_ROWS, huffman_bits, huffman_lengths
from .parallel import Task, run_tasks

__all__ = [
    "CHUNK_VALUES",
    "PROGRESS_VALUES",
    "GENERAL_COMPRESSORS",
    "PEER_COMPRESSORS",
    "HUFFMAN_ROWS",
    "huffman_lengths",
    "huffman_bits",
    "zipnn_version",
    "PAPER_CODECS",
    "CodecResult",
    "NORMALIZER_PRECISIONS",
    "MatrixStats",
    "Row",
    "Table1",
    "compute_table1",
    "table1_from_histograms",
]

#: Values converted and coded at once; bounds a worker's memory to a few hundred MB.
CHUNK_VALUES = 1 << 24
#: Values handed to a general-purpose compressor at once: its task's progress advances at least this
#: often (half a MB of bf16, about a second of xz -9). The compressed bytes do not depend on it.
PROGRESS_VALUES = 1 << 18

#: General-purpose compressors: (row name, command-line key).
GENERAL_COMPRESSORS: dict[str, str] = {"gzip": "Gzip -9", "bzip2": "Bzip2 -9", "xz": "xz -9", "zstd": "zstd -19"}
#: Weight compressors run on request (``--general zipnn``), from the ``[peers]`` extra.
PEER_COMPRESSORS: dict[str, str] = {"zipnn": "ZipNN"}
#: Rows of a DFloat11-style entropy coder: one Huffman code of the exponents per tensor or per layer,
#: sign and mantissa stored raw, each code's table charged at 8 bits per exponent it codes.

#: The paper's golden-codec rows (``rANS 16 bits``, ``tANS 8 bits``), by codec name.
PAPER_CODECS = ("rans16", "tans8")
CONSTRICTION_ROW = "rANS 24 bits (constriction)"

#: Precisions at which the optimal normalizer is compared with proportional rounding (tANS 8, rANS 16).
NORMALIZER_PRECISIONS = (8, 16)


@dataclass
class MatrixStats:
    """What Table 1 needs from one matrix; every figure is exact, counts are integers."""

    name: str
    shape: tuple[int, ...]
    weights: int
    exponent_counts: dict[int, int]
    extra_bits: int
    ideal_bits: float
    simple_bits: int
    conversion: Conversion
    normalized_bits: dict[int, tuple[float, float]] = field(default_factory=dict)
    constriction_words: int | None = None
    constriction_verified: bool | None = None
    seconds: float = 0.0

    @property
    def n_codes(self) -> int:
        return len(self.exponent_counts)

    @property
    def entropy(self) -> float:
        return entropy_bits(np.array(list(self.exponent_counts.values()), dtype=np.int64))

    def to_json(self) -> dict[str, Any]:
        d = {
            "name": self.name,
            "shape": list(self.shape),
            "weights": self.weights,
            "unique_exponents": self.n_codes,
            "entropy": self.entropy,
            "bits_per_weight": (self.ideal_bits + self.extra_bits) / self.weights if self.weights else 0.0,
            "simple_bits_per_weight": (self.simple_bits + self.extra_bits) / self.weights if self.weights else 0.0,
            "exponent_counts": {str(k): v for k, v in self.exponent_counts.items()},
            "conversion": self.conversion.describe(),
        }
        if self.constriction_words is not None:
            d["rans24_bits_per_weight"] = (32 * self.constriction_words + self.extra_bits) / self.weights
            d["rans24_verified"] = self.constriction_verified
        return d


@dataclass(frozen=True)
class Row:
    """One row of Table 1. ``bytes`` is ``None`` for a row that was not computed."""

    method: str
    bytes: int | None
    percent_of_original: float | None
    bits_per_weight: float | None
    code_bits: float | None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if not d["note"]:
            del d["note"]
        return d


@dataclass
class Table1:
    """Table 1 of one model, with its per-matrix rows and how it was obtained."""

    model: str
    pairs: str
    matrices: list[MatrixStats]
    rows: list[Row]
    conversion: str
    normalizer: list[dict[str, float]]
    seconds: dict[str, float]  #: process CPU seconds of each method, measured inside its worker
    wall_seconds: float

    @property
    def weights(self) -> int:
        return sum(m.weights for m in self.matrices)

    def row(self, method: str) -> Row:
        for r in self.rows:
            if r.method == method:
                return r
        raise KeyError(method)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "pairs": self.pairs,
            "weights": self.weights,
            "matrices": len(self.matrices),
            "conversion": self.conversion,
            "rows": [r.to_json() for r in self.rows],
            "per_matrix": [m.to_json() for m in self.matrices],
            "normalizer": self.normalizer,
            "seconds": self.seconds,
            "wall_seconds": self.wall_seconds,
        }

    # ---------------------------------------------------------------------------------------------
    def _cells(self) -> list[list[str]]:
        out = []
        for r in self.rows:
            if r.bytes is None:
                out.append([r.method, "not computed", "-", "-", "-"])
                continue
            out.append([
                r.method,
                f"{r.bytes:,}",
                f"{r.percent_of_original:.2f}",
                f"{r.bits_per_weight:.4f}",
                "-" if r.code_bits is None else f"{r.code_bits:.4f}",
            ])
        return out

    _HEAD = ["Method", "File size (bytes)", "% of original", "Avg weight (bits)", "Avg code (bits)"]

    def format_text(self, per_matrix: bool = False) -> str:
        lines = [
            f"Table 1: {self.model}",
            f"  {len(self.matrices)} matrices, {self.weights:,} weights, {self.pairs} coding pairs; "
            f"{self.conversion}",
            "",
        ]
        lines.append(_render([self._HEAD, *self._cells()]))
        notes = [r for r in self.rows if r.note]
        if notes:
            lines.append("")
            lines += [f"  {r.method}: {r.note}" for r in notes]
        if self.normalizer:
            lines.append("")
            lines.append("  Probability normalization (code bits per weight, all matrices):")
            for n in self.normalizer:
                lines.append(
                    f"    {n['precision_bits']:2d}-bit frequencies: optimal {n['optimal_code_bits']:.5f}, "
                    f"proportional rounding {n['proportional_code_bits']:.5f} "
                    f"(optimal saves {n['gain_percent']:.3f} % of code bits; ideal {n['ideal_code_bits']:.5f})"
                )
        if per_matrix:
            lines.append("")
            lines.append(self.format_per_matrix())
        return "\n".join(lines)

    def format_per_matrix(self) -> str:
        head = ["Matrix", "Shape", "Weights", "Exponents", "Entropy", "Ideal bits/w", "rANS24 bits/w"]
        rows = [head]
        for m in self.matrices:
            j = m.to_json()
            rows.append([
                m.name, "x".join(map(str, m.shape)), f"{m.weights:,}", str(m.n_codes), f"{m.entropy:.4f}",
                f"{j['bits_per_weight']:.4f}",
                f"{j['rans24_bits_per_weight']:.4f}" if "rans24_bits_per_weight" in j else "-",
            ])
        return _render(rows)

    def to_markdown(self, per_matrix: bool = False) -> str:
        lines = [f"### Table 1: {self.model}", "",
                 f"{len(self.matrices)} matrices, {self.weights:,} weights, {self.pairs} coding pairs; {self.conversion}.",
                 "", "| " + " | ".join(self._HEAD) + " |", "|" + "---|" * 5]
        lines += ["| " + " | ".join(c) + " |" for c in self._cells()]
        if per_matrix:
            lines += ["", "| Matrix | Shape | Weights | Exponents | Entropy | Ideal bits/w |", "|---|---|---|---|---|---|"]
            for m in self.matrices:
                j = m.to_json()
                lines.append(f"| {m.name} | {'x'.join(map(str, m.shape))} | {m.weights:,} | {m.n_codes} | "
                             f"{m.entropy:.4f} | {j['bits_per_weight']:.4f} |")
        return "\n".join(lines) + "\n"


def _render(rows: list[list[str]]) -> str:
    """Text table: first row is the header, first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return "\n".join(out)


# -------------------------------------------------------------------------------------------------
# Worker tasks (top-level, so that process pools and Dask can ship them)


@functools.lru_cache(maxsize=4)
def _open(path: str) -> Checkpoint:
    return open_checkpoint(path)


def _chunks(path: str, name: str, pairs: str) -> Iterator[tuple[np.ndarray, Conversion]]:
    """The tensor's values as ``pairs`` bit patterns, CHUNK_VALUES at a time, in flat order."""
    rec = _open(path).tensor(name)
    flat = rec.array.reshape(-1)
    for start in range(0, flat.size, CHUNK_VALUES):
        yield convert(flat[start:start + CHUNK_VALUES], rec.dtype, pairs)


def _merge(a: Conversion | None, b: Conversion) -> Conversion:
    if a is None:
        return b
    return Conversion(a.source, a.target, a.lossy, a.changed + b.changed, a.nonfinite + b.nonfinite)


#: Work done by each task of the running :func:`compute_table1`, in weight passes, one slot per task: a
#: ``multiprocessing`` array that the forked workers inherit and the parent's bar reads. ``None``
#: outside compute_table1 and on a Dask worker (the tasks then count nothing).
_done = None


def _advance(slot: int, n: int) -> None:
    """Count ``n`` weight passes of task ``slot`` done (each task runs in one process: no lock)."""
    done = _done
    if done is not None and 0 <= slot < len(done) and n:
        done[slot] += int(n)


def matrix_task(path: str, name: str, pairs: str, constriction: bool, slot: int = -1) -> MatrixStats:
    """Exponent histogram, Simple, Ideal, normalizer costs and (optionally) constriction of one matrix.
    Progress: its weights once for the histogram, once more for constriction."""
    t0 = time.process_time()
    fmt = PAIR_FORMATS[pairs]
    info = _open(path).info(name)
    hist = np.zeros(1 << fmt.exponent_bits, dtype=np.int64)
    conversion: Conversion | None = None
    for bits, conv in _chunks(path, name, pairs):
        hist += fmt.exponent_histogram(bits)
        conversion = _merge(conversion, conv)
        _advance(slot, bits.size)
    if conversion is None:  # empty tensor
        conversion = Conversion(pairs, pairs, False, 0, 0)
    exponents = np.flatnonzero(hist).astype(np.uint16)
    counts = hist[exponents]
    n = int(counts.sum())
    code_len = math.ceil(math.log2(exponents.size)) if exponents.size > 1 else 0
    stats = MatrixStats(
        name=name,
        shape=info.shape,
        weights=n,
        exponent_counts={int(e): int(c) for e, c in zip(exponents, counts)},
        extra_bits=n * fmt.extra_bits,
        ideal_bits=ideal_bits(counts),
        simple_bits=n * code_len,
        conversion=conversion,
    )
    if n:
        for p in NORMALIZER_PRECISIONS:
            if exponents.size <= 1 << p:
                stats.normalized_bits[p] = (
                    cross_entropy_bits(counts, normalize_counts(counts, p), p),
                    cross_entropy_bits(counts, proportional_counts(counts, p), p),
                )
    if constriction and n:
        stats.constriction_words, stats.constriction_verified = _constriction_round_trip(
            path, name, pairs, exponents, counts)
        _advance(slot, n)
    stats.seconds = time.process_time() - t0
    return stats


def _constriction_round_trip(path: str, name: str, pairs: str, exponents: np.ndarray,
                             counts: np.ndarray) -> tuple[int, bool]:
    """Encode the matrix's codes chunk by chunk, decode them, and compare the rebuilt bits with the original."""
    fmt = PAIR_FORMATS[pairs]
    chunks = [bits for bits, _ in _chunks(path, name, pairs)]
    words = constriction_codec.encode_chunks([fmt.split(b, exponents).codes for b in chunks], counts)
    ok = True
    try:
        decoded = constriction_codec.decode_chunks(words, counts, [b.size for b in chunks])
        for bits, codes in zip(chunks, decoded):
            pairs_ = fmt.split(bits, exponents)
            rebuilt = fmt.join(dataclasses.replace(pairs_, codes=codes.astype(pairs_.codes.dtype)))
            ok &= bool(np.array_equal(rebuilt, bits))
        for _ in decoded:  # runs the stream-empty check
            pass
    except ConfigError:
        ok = False
    return int(words.size), ok


class _Counter:
    """A write-only file object that counts bytes (for ``gzip.GzipFile``)."""

    def __init__(self) -> None:
        self.n = 0

    def write(self, b: bytes) -> int:
        self.n += len(b)
        return len(b)

    def flush(self) -> None:
        pass


def _pieces(path: str, names: Sequence[str], pairs: str, slot: int) -> Iterator[bytes]:
    """The coded tensors' bytes in file order, :data:`PROGRESS_VALUES` values at a time, each counted
    as done for task ``slot`` once the caller has taken the next (a streaming compressor's input: its
    output does not depend on how the input is cut)."""
    for name in names:
        for bits, _ in _chunks(path, name, pairs):
            flat = bits.reshape(-1)
            for start in range(0, flat.size, PROGRESS_VALUES):
                piece = flat[start:start + PROGRESS_VALUES]
                yield piece.tobytes()
                _advance(slot, piece.size)


def stream_task(path: str, names: Sequence[str], pairs: str, method: str, slot: int = -1) -> tuple[int, float]:
    """Compressed size in bytes of the concatenated coded tensors, and the worker's process CPU seconds
    (``time.process_time``: wall time inside a worker counted waits for the other workers' CPU)."""
    t0 = time.process_time()
    if method == "gzip":
        sink = _Counter()
        gz = gzip.GzipFile(fileobj=sink, mode="wb", compresslevel=9, mtime=0)  # type: ignore[arg-type]
        for piece in _pieces(path, names, pairs, slot):
            gz.write(piece)
        gz.close()
        return sink.n, time.process_time() - t0
    if method == "bzip2":
        comp: Any = bz2.BZ2Compressor(9)
        compress, finish = comp.compress, comp.flush
    elif method == "xz":
        comp = lzma.LZMACompressor(preset=9)
        compress, finish = comp.compress, comp.flush
    elif method == "zstd":
        import zstandard

        comp = zstandard.ZstdCompressor(level=19).compressobj()
        compress, finish = comp.compress, comp.flush
    elif method == "zipnn":
        return _zipnn_bytes(path, names, pairs, slot), time.process_time() - t0
    else:
        raise ConfigError(f"unknown compressor {method!r} (expected one of {', '.join(GENERAL_COMPRESSORS)})")
    n = 0
    for piece in _pieces(path, names, pairs, slot):
        n += len(compress(piece))
    n += len(finish())
    return n, time.process_time() - t0


def zipnn_version() -> str:
    """The installed ZipNN's version; :class:`ConfigError` when the ``[peers]`` extra is missing."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("zipnn")
    except PackageNotFoundError:
        raise ConfigError("ZipNN is not installed: pip install 'ansforge[peers]'") from None


_ZIPNN_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _zipnn_bytes(path: str, names: Sequence[str], pairs: str, slot: int = -1) -> int:
    """ZipNN's compressed size of each tensor's bytes (its byte grouping needs the dtype), summed."""
    zipnn_version()
    from zipnn import ZipNN
    z = ZipNN(input_format="byte", bytearray_dtype=_ZIPNN_DTYPE[pairs], threads=1)
    total = 0
    for name in names:
        chunks = [bits.tobytes() for bits, _ in _chunks(path, name, pairs)]
        if chunks:
            total += len(z.compress(bytearray(b"".join(chunks))))  # ZipNN 0.5.4 rewrites its input in place
        _advance(slot, _open(path).info(name).size)
    return total


# -------------------------------------------------------------------------------------------------


@dataclass
class CodecResult:
    """One golden codec over the selected matrices: coded bits (words + checkpoints) and verification."""

    codec: str
    label: str
    bits: int
    ideal_bits: float
    verified: bool
    seconds: float
    estimate: bool = False
    record_bytes: int | None = None  #: Context row: bytes of the tensors' JSON records in the file

    @property
    def gap(self) -> float:
        return self.bits / self.ideal_bits - 1 if self.ideal_bits else 0.0


#: Pairs of consecutive matrices :func:`codec_task` codes as one stream, at most (a larger matrix is a
#: stream of its own): every matrix of MiniLM or stories260K shares one stream, while a 7B model's rows
#: hold one such group in memory at a time.
CODEC_STREAM_PAIRS = 1 << 25

#: Pairs checked per step when a decoded stream is compared (bounded temporaries of 64-bit codes).
_COMPARE_PAIRS = 1 << 22


def codec_task(path: str, names: Sequence[str], pairs: str, codec: str, slot: int = -1) -> CodecResult:
    """Encode the selected matrices with a golden codec, in file order, consecutive matrices sharing
    one stream up to :data:`CODEC_STREAM_PAIRS` pairs (a larger matrix its own stream; each stream with
    its final state and checkpoints, as ``ansforge compress --layout model`` writes it), decode each
    stream and compare bit for bit; one stream's pairs in memory at a time.
    Progress: the weights once as each tensor is read and split, once when its stream is encoded, once
    as it is decoded and compared."""
    t0 = time.process_time()
    spec = parse_codec(codec)
    fmt = PAIR_FORMATS[pairs]
    total_bits, ideal, ok = 0, 0.0, True
    from ..model.coding import fastpairs

    group: list[tuple[str, Any]] = []
    originals: list[np.ndarray] = []  # the group's tensors as read, to compare the decoded values with
    for k, name in enumerate(names):
        chunks = [b.ravel() for b, _ in _chunks(path, name, pairs)]
        bits = np.concatenate(chunks) if chunks else np.zeros(0, fmt.bits_dtype)  # a zero-size tensor
        del chunks
        fast = fastpairs.split_pairs(fmt, bits)  # compiled: NumPy's split makes some ten temporaries
        group.append((name, fast[0] if fast is not None else fmt.split(bits)))
        originals.append(bits)
        _advance(slot, int(bits.size))
        size = sum(int(p.codes.size) for _, p in group)
        following = int(np.prod(_open(path).info(names[k + 1]).shape)) if k + 1 < len(names) else None
        if following is None or size + following > CODEC_STREAM_PAIRS:
            good, bits_, ideal_ = _code_group(spec, fmt, group, originals, slot)
            ok &= good
            total_bits += bits_
            ideal += ideal_
            group, originals = [], []
    return CodecResult(spec.name, spec.label(), total_bits, ideal, ok, time.process_time() - t0)


def _code_group(spec, fmt, group: list, originals: list[np.ndarray], slot: int) -> tuple[bool, int, float]:
    """One stream of :func:`codec_task`: (decoded bit-exact, its bits, its tensors' ideal bits)."""
    from ..model.coding import fastans, fastpairs
    from ..model.coding.container import DEFAULT_CHECKPOINT_INTERVAL, encode_tensors

    st = encode_tensors(spec, group, DEFAULT_CHECKPOINT_INTERVAL)
    _advance(slot, sum(int(p.codes.size) for _, p in group))
    # The compiled coders (bit-exact with the golden ones, tests/model/test_fastans.py) where they apply.
    if fastans.supported(spec):
        syms, exs = fastans.decode_segments(spec, st.words, st.tables, st.runs, st.checkpoints, threads=1,
                                            compact=True)
    else:
        syms, exs, _ = spec.coder().decode(st.words, st.tables, st.runs)
    ok = True
    for t, bits in zip(st.tensors, originals):
        a, n = t.first_pair, int(t.pairs.codes.size)
        # The decoded pairs joined back into values (compiled where it applies), against the tensor read.
        joined = fastpairs.join_values(t.code_table, t.pairs.exponents, fmt, syms[a:a + n], exs[a:a + n])
        if joined is not None:
            ok &= bool(np.array_equal(joined.reshape(-1), bits.reshape(-1)))
        else:
            for lo in range(0, n, _COMPARE_PAIRS):
                hi = min(n, lo + _COMPARE_PAIRS)
                codes, extra = t.code_table.from_symbols(syms[a + lo:a + hi], exs[a + lo:a + hi])
                ok &= bool(np.array_equal(codes, t.pairs.codes[lo:hi])
                           and np.array_equal(extra, t.pairs.extra[lo:hi].astype(np.uint64)))
        _advance(slot, n)
    return ok, st.total_bits, sum(t.ideal_bits for t in st.tensors)


def context_label(codec: str) -> str:
    return f"Context ({parse_codec(codec).label()}, container)"


def context_task(path: str, names: Sequence[str], pairs: str, codec: str, slot: int = -1) -> CodecResult:
    """The Context row: the checkpoint compressed with ``--context`` (one stream per tensor) into a
    temporary container, the selected tensors' bits read back from the file and each tensor decoded
    and compared bit for bit with its ``pairs`` conversion. ``seconds`` is the CPU time; the result's
    ``label`` carries the JSON bytes of the selected tensors' records in its note (see :func:`_assemble`).

    An error names ``path``, the user's checkpoint, never the temporary container. Progress: the
    selected weights once as compress reports each tensor split and planned, once when the container
    is written, twice as each tensor is read back and compared."""
    import tempfile

    from ..model.coding.container import compress_checkpoint, open_container

    t0 = time.process_time()
    spec = parse_codec(codec)
    bits, ideal, ok, record_bytes = 0, 0.0, True, 0
    sizes = {name: _open(path).info(name).size for name in names}
    with tempfile.TemporaryDirectory(prefix="ansforge-context-") as tmp:
        f = Path(tmp) / "context.ansf"
        try:
            # Table 1 codes NaN/Inf like any other exponent (its conversion line counts them), so does this row.
            seen = [0]  # compress reports (done, total) in weights split and coded: the slot counts its share

            def advance(done: int, total: int) -> None:
                share = done * sum(sizes.values()) // max(1, total)
                if share > seen[0]:
                    _advance(slot, share - seen[0])
                    seen[0] = share
            compress_checkpoint(path, f, codec, pairs=pairs, group="tensor", context=True, allow_nonfinite=True,
                                progress=advance)
            _advance(slot, sum(sizes.values()))
            c = open_container(f)
            for name in names:
                b = c.tensor_bits(name)
                bits += b["stream_bits"] + b["checkpoint_bits"] + b["side_bits"]
                record_bytes += b["record_bytes"]
                ideal += float(c.record(name)["ideal_bits"])
                chunks = [x.ravel() for x, _ in _chunks(path, name, pairs)]
                want = np.concatenate(chunks) if chunks else np.zeros(0, PAIR_FORMATS[pairs].bits_dtype)
                ok &= bool(np.array_equal(c.read(name).ravel(), want))
                _advance(slot, 2 * sizes[name])
        except AnsforgeError as exc:
            raise _naming_the_input(exc, f, path) from None
    r = CodecResult(spec.name, context_label(codec), bits, ideal, ok, time.process_time() - t0)
    r.record_bytes = record_bytes
    return r


def _naming_the_input(exc: AnsforgeError, container: Path, path: str) -> AnsforgeError:
    """``exc`` from the Context row's temporary ``container``, said of the user's checkpoint ``path``: the
    temporary file the user never named leaves the message, which starts with ``path``."""
    text = re.sub(re.escape(str(container.parent)) + r"[^\s:'\"]*:?\s*", "", str(exc))  # context.ansf(.partial)
    text = re.sub(re.escape(container.name) + r"[^\s:'\"]*:?\s*", "", text).strip() or type(exc).__name__
    if not text.startswith(path):
        text = f"{path}: {text}"
    try:
        return type(exc)(text)
    except TypeError:          # an error class with another constructor
        return AnsforgeError(text)


def _estimate_codec(spec, stats: Sequence[MatrixStats], extra_bits: int) -> CodecResult:
    """Expected size of a golden codec from exponent histograms alone: each matrix's code table, its
    cross-entropy (rANS) or the stationary expected cost of its tANS table, plus escape index bits."""
    bits = 0.0
    ideal = 0.0
    for m in stats:
        counts = np.array(list(m.exponent_counts.values()), dtype=np.int64)
        ct, table = spec.tables(counts, extra_bits)
        bits += spec.expected_code_bits(ct, table, counts) + m.extra_bits
        ideal += m.ideal_bits + m.extra_bits
    return CodecResult(spec.name, spec.label(), int(math.ceil(bits)), ideal, True, 0.0, estimate=True)


def _row(method: str, bits: float, extra_bits: int, weights: int, original_bits: int, note: str = "") -> Row:
    nbytes = math.ceil(bits / 8)
    return Row(method, nbytes, 100.0 * nbytes * 8 / original_bits, bits / weights,
               (bits - extra_bits) / weights if extra_bits >= 0 else None, note)


def _assemble(model: str, pairs: str, matrices: list[MatrixStats], general: dict[str, int], constriction: bool,
              codecs: Sequence[CodecResult] = (), context: CodecResult | None = None
              ) -> tuple[list[Row], list[dict[str, float]], str]:
    fmt = PAIR_FORMATS[pairs]
    weights = sum(m.weights for m in matrices)
    if weights == 0:
        raise AnsforgeError(f"{model}: the selected tensors hold no values")
    original = weights * fmt.total_bits
    extra = sum(m.extra_bits for m in matrices)
    rows = [
        Row("Original", original // 8, 100.0, float(fmt.total_bits), None),
        _row("Simple", sum(m.simple_bits for m in matrices) + extra, extra, weights, original),
        _row("Ideal", sum(m.ideal_bits for m in matrices) + extra, extra, weights, original),
    ]
    for c in codecs:
        note = f"{100 * c.gap:+.4f}% vs Ideal" + (" (estimate from histograms)" if c.estimate else "")
        if not c.estimate and not c.verified:
            note += "; ROUND TRIP FAILED"
        rows.append(_row(c.label, c.bits, extra, weights, original, note))
    if context is not None:
        ideal = sum(m.ideal_bits for m in matrices) + extra
        note = (f"{100 * (context.bits / ideal - 1):+.4f}% vs Ideal; streams on disk, tables and selects packed "
                f"(the records' JSON: {context.record_bytes:,} bytes)")
        if not context.verified:
            note += "; ROUND TRIP FAILED"
        rows.append(_row(context.label, context.bits, extra, weights, original, note))
    if constriction:
        words = sum(m.constriction_words or 0 for m in matrices)
        verified = all(m.constriction_verified for m in matrices)
        rows.append(_row(CONSTRICTION_ROW, 32 * words + extra, extra, weights, original,
                         "" if verified else "ROUND TRIP FAILED"))
    for label, per in zip(HUFFMAN_ROWS, ("tensor", "layer")):
        rows.append(_row(label, huffman_bits(matrices, per) + extra, extra, weights, original,
                         "exponent Huffman, sign and mantissa raw, code tables included"))
    for key, nbytes in general.items():
        label = f"ZipNN {zipnn_version()} (per tensor)" if key == "zipnn" else GENERAL_COMPRESSORS[key]
        r = _row(label, 8 * nbytes, -1, weights, original)
        rows.append(Row(r.method, nbytes, r.percent_of_original, r.bits_per_weight, None))
    normalizer = []
    for p in NORMALIZER_PRECISIONS:
        if all(p in m.normalized_bits for m in matrices):
            opt = sum(m.normalized_bits[p][0] for m in matrices)
            prop = sum(m.normalized_bits[p][1] for m in matrices)
            normalizer.append({
                "precision_bits": p,
                "optimal_code_bits": opt / weights,
                "proportional_code_bits": prop / weights,
                "ideal_code_bits": sum(m.ideal_bits for m in matrices) / weights,
                "gain_percent": 100.0 * (prop - opt) / prop if prop else 0.0,
            })
    conv = _describe_conversions(matrices)
    return rows, normalizer, conv


def _describe_conversions(matrices: list[MatrixStats]) -> str:
    c = matrices[0].conversion
    changed = sum(m.conversion.changed for m in matrices)
    nonfinite = sum(m.conversion.nonfinite for m in matrices)
    sources = sorted({m.conversion.source for m in matrices})
    if all(m.conversion.source == m.conversion.target for m in matrices):
        text = f"coded as stored ({c.target}); lossless"
    elif any(m.conversion.lossy for m in matrices):
        text = (f"converted {'/'.join(sources)} -> {c.target} by round-to-nearest-even: LOSSY "
                f"({changed:,} values changed); coding is lossless for the {c.target} tensors")
    else:
        text = f"widened exactly {'/'.join(sources)} -> {c.target}; lossless"
    if nonfinite:
        text += f"; {nonfinite:,} Inf/NaN values (coded like any other exponent)"
    return text


def compute_table1(
    path: str | Path,
    *,
    pairs: str = "bf16",
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    general: Sequence[str] = tuple(GENERAL_COMPRESSORS),
    constriction: bool = True,
    codecs: Sequence[str] = PAPER_CODECS,
    context: str | None = "rans16",
    jobs: int | None = None,
    dask: Any = None,
    progress: bool | None = None,
) -> Table1:
    """Compute Table 1 for the selected matrices of a checkpoint.

    Parameters
    ----------
    path
        llama2.c, safetensors or GGUF checkpoint.
    pairs
        Pair format the tensors are coded in: ``"bf16"`` (the paper), ``"fp16"`` or ``"fp32"``; tensors
        stored otherwise are converted first (round-to-nearest-even when narrowing, reported as lossy).
    include, exclude
        Shell-style name patterns, see :func:`~ansforge.model.llm.checkpoint.select_tensors`.
    general
        General-purpose compressors to run over the concatenated bytes: any of ``gzip``, ``bzip2``,
        ``xz``, ``zstd``.
    constriction
        Add the constriction rANS row (encoded, decoded and verified bit-exact).
    codecs
        Golden codecs to run (:func:`~ansforge.model.coding.codecs.parse_codec` names), one row each.
    context
        Codec of the Context row (:func:`context_task`), or ``None`` for no such row.
    jobs, dask
        See :func:`~ansforge.analysis.parallel.run_tasks`: ``dask`` is a scheduler's address, ``"local"``
        or a connected ``distributed.Client``; its workers read the checkpoint by its absolute path.
    progress
        ``False``: no bar; otherwise the bar of weight passes (module docstring) wherever
        :func:`ansforge.model.progress.enabled` (a terminal, not ``--json``/``--quiet``): never off one.
    """
    if pairs not in PAIR_FORMATS:
        raise ConfigError(f"--pairs must be one of {', '.join(PAIR_FORMATS)}, not {pairs!r}")
    for g in general:
        if g not in GENERAL_COMPRESSORS and g not in PEER_COMPRESSORS:
            raise ConfigError(f"unknown compressor {g!r} (expected any of "
                              f"{', '.join([*GENERAL_COMPRESSORS, *PEER_COMPRESSORS])})")
        if g == "zipnn":
            zipnn_version()
    t0 = time.perf_counter()
    path = str(Path(path))
    ckpt = open_checkpoint(path)
    selected = select_tensors(ckpt, include, exclude)
    names = [i.name for i in selected]
    total = sum(i.size for i in selected)
    # Longest first: the streaming compressors read everything, so they start before the matrices.
    specs = [parse_codec(c) for c in codecs]
    # Each task's weight is the weight passes it counts as it goes (_advance); its argument ``slot`` is
    # its index in the task list.
    # On a Dask cluster the workers open the checkpoint themselves: by its absolute path, which a
    # worker started elsewhere (its own working folder) finds on the shared file system.
    task_path = os.path.abspath(path) if dask is not None else path
    steps: list[tuple[Any, tuple, int, str]] = [(codec_task, (task_path, names, pairs, sp.name), 3 * total, sp.name)
                                                for sp in specs]
    if context:
        steps.append((context_task, (task_path, names, pairs, parse_codec(context).name), 4 * total, "context"))
    steps += [(stream_task, (task_path, names, pairs, g), total, g) for g in general]
    order = sorted(range(len(selected)), key=lambda k: -selected[k].size)
    steps += [(matrix_task, (task_path, selected[k].name, pairs, constriction),
               selected[k].size * (2 if constriction else 1), "") for k in order]
    tasks = [Task(fn, (*args, slot), weight) for slot, (fn, args, weight, _) in enumerate(steps)]
    labels = [label for *_, label in steps]
    results = _run_with_progress(tasks, labels, jobs=jobs, dask=dask,
                                 show=progress is not False and _progress.enabled())
    coded = results[:len(specs)]
    results = results[len(specs):]
    ctx = results.pop(0) if context else None
    compressed = {g: results[i][0] for i, g in enumerate(general)}
    seconds = {GENERAL_COMPRESSORS.get(g, PEER_COMPRESSORS.get(g)): results[i][1] for i, g in enumerate(general)}
    seconds.update({f"{c.label} (encode + decode, compiled coders)": c.seconds for c in coded})
    if ctx is not None:
        seconds[f"{ctx.label} (plan, compress, read back)"] = ctx.seconds
    by_index = dict(zip(order, results[len(general):]))
    matrices = [by_index[k] for k in range(len(selected))]
    seconds["matrices (histogram, Ideal, normalizer, constriction)"] = sum(m.seconds for m in matrices)
    rows, normalizer, conv = _assemble(path, pairs, matrices, compressed, constriction, coded, ctx)
    return Table1(path, pairs, matrices, rows, conv, normalizer, seconds, time.perf_counter() - t0)


def _run_with_progress(tasks: list[Task], labels: list[str], *, jobs: int | None, dask: Any,
                       show: bool) -> list[Any]:
    """:func:`run_tasks` under one bar of weight passes, read from the tasks' shared counters (module
    docstring) four times a second; the note names the tasks running, each with the share of its own
    weights done (``xz 63%``: it moves every few seconds where the whole bar's 1 % is minutes of xz
    -9), and ``matrices k/N`` for the per-matrix ones. On Dask the tasks run elsewhere:
    :func:`run_tasks`' own bar, per finished task."""
    global _done
    if not show or dask is not None:
        return run_tasks(tasks, jobs=jobs, dask=dask, progress=show, desc="Table 1")
    import ctypes
    import multiprocessing
    import threading

    weights = [t.weight for t in tasks]
    matrices = [i for i, label in enumerate(labels) if not label]
    done = multiprocessing.RawArray(ctypes.c_int64, len(tasks))
    stop = threading.Event()
    with _progress.bar(sum(weights), "Table 1", unit="w") as bar:
        shown = 0

        def poll() -> None:
            nonlocal shown
            now = [min(int(d), w) for d, w in zip(done, weights)]
            bar(sum(now) - shown)
            shown = sum(now)
            running = [f"{labels[i]} {100 * now[i] // weights[i]}%" for i in range(len(tasks))
                       if labels[i] and 0 < now[i] < weights[i]]
            finished = sum(1 for i in matrices if now[i] >= weights[i])
            if matrices and finished < len(matrices) and any(now[i] for i in matrices):
                running.append(f"matrices {finished}/{len(matrices)}")
            bar.note(", ".join(running))

        def watch() -> None:
            while not stop.wait(0.25):
                poll()

        watcher = threading.Thread(target=watch, name="ansforge-table1-progress", daemon=True)
        _done = done          # before the workers fork: they inherit it
        watcher.start()
        try:
            return run_tasks(tasks, jobs=jobs, progress=False)
        finally:
            stop.set()
            watcher.join()
            _done = None


def table1_from_histograms(model: str, matrices: Sequence[dict[str, Any]], pairs: str = "bf16",
                           conversion: str = "from measured exponent histograms") -> Table1:
    """Table-1 estimates from exponent histograms alone (no weights): Original, Simple, Ideal.

    ``matrices`` holds ``{"name", "shape", "exponent_counts": {exponent: count}}`` entries, as shipped
    in :mod:`ansforge.model.histograms`. Rows that need the weights themselves are not computed.
    """
    fmt = PAIR_FORMATS[pairs]
    stats = []
    for m in matrices:
        ec = {int(k): int(v) for k, v in m["exponent_counts"].items() if int(v) > 0}
        counts = np.array(list(ec.values()), dtype=np.int64)
        n = int(counts.sum())
        code_len = math.ceil(math.log2(len(ec))) if len(ec) > 1 else 0
        s = MatrixStats(m["name"], tuple(m["shape"]), n, ec, n * fmt.extra_bits, ideal_bits(counts),
                        n * code_len, Conversion(pairs, pairs, False, 0, 0))
        for p in NORMALIZER_PRECISIONS:
            s.normalized_bits[p] = (cross_entropy_bits(counts, normalize_counts(counts, p), p),
                                    cross_entropy_bits(counts, proportional_counts(counts, p), p))
        stats.append(s)
    estimates = [_estimate_codec(parse_codec(c), stats, fmt.extra_bits) for c in PAPER_CODECS]
    rows, normalizer, _ = _assemble(model, pairs, stats, {}, constriction=False, codecs=estimates)
    return Table1(model, pairs, stats, rows, conversion, normalizer, {}, 0.0)
