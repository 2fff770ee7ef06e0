"""The ``.ansf`` container: a compressed checkpoint, random access, and its integrity checks.

Layout (all integers little-endian)::

    header   magic b"ANSFORGE" | u32 version (6 blocks layout; else 2, 3 row shifts, 4 context, 5 states) | u32 n_tensors | u32 n_streams | u32 crc32(previous 20 bytes)
    records  n_tensors tensor records, then n_streams stream records, each:
             u32 length | UTF-8 JSON | u32 crc32(JSON)
    payload  the streams' words (little-endian, W/8 bytes each) and raw tensors, at the offsets the
             records give (relative to the payload start)

A **tensor record** names the tensor and gives its shape, stored dtype, how it was coded (``pairs``
or ``raw``), the pair format and conversion, the code→exponent table, the
:class:`~ansforge.model.coding.codetable.CodeTable` (direct and escape codes, normalized frequencies, extra
widths), for tANS the state→symbol spread, and where its pairs lie in which stream. A **stream
record** gives the codec and its parameters, the pair and word counts, the checkpoints
(``[pair, word, bit, state]``, every ``checkpoint_interval`` pairs; ``state`` is a list of ``N``
states for a codec of ``N > 1`` interleaved states) and one CRC-32 per **block**; the
blocks split the word addresses at the checkpoints, so block ``b`` holds the words a decoder reads
between checkpoints ``b - 1`` and ``b`` (:func:`~ansforge.model.coding.stream.block_ranges`), and its CRC is
taken in the order the decoder reads them (:func:`~ansforge.model.coding.stream.block_crc`), so a decoder
core checks it in hardware. The format of the words is ``docs/bitstream.md``.

By default (the **blocks** layout, version 6) all coded tensors share one stream record whose pairs are
cut into independent blocks (:class:`~ansforge.model.coding.stream.Block`): each tensor's pairs every
``block_pairs`` (2^18) pairs, each block a complete stream with its own flush, head and CRC, listed as
``[n_words, crc]`` (its pairs implied by the cut). Blocks are coded and decoded on any number of
threads, a core decodes one per command, and random access decodes at most the blocks a range
touches. The layouts of versions 2 to 5 stay: ``layout="model"`` (one stack, a checkpoint every
``checkpoint_interval`` pairs) and ``layout="tensor"`` (one such stream per tensor).

Every byte is covered by a CRC or a structural check: a flipped or missing byte raises
:class:`ContainerError` naming the tensor and block, never returns wrong weights, and never hangs
(decoders are bounded by the pair counts).
"""

from __future__ import annotations

import binascii
import functools
import json
import math
import mmap
import os
import re
import shutil
import struct
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..llm.checkpoint import ITEMSIZE, SUPPORTED_DTYPES, Llama2cCheckpoint, SafetensorsCheckpoint, \
    ShardedCheckpoint, hf_llama_config, identify, layout_plan, llama2c_config_of, open_checkpoint, shape_problem, \
    write_safetensors, write_sharded
from .codecs import Codec, RansCodec, parse_codec
from .registry import DEFAULT_FORMAT, legacy_codecs
from . import fastans, fastpairs, kernels
from .codetable import CodeTable
from .context import ContextPlan, context_tables, folded_format, plan_context, plan_from_record, plan_record, \
    set_counts, side_bits, spread_is_stored
from ..errors import AnsforgeError, ConfigError
from ..dtypes.custom_float import MINIFLOATS
from ..dtypes.pairs import PAIR_FORMATS, CodingPairs, Conversion, convert
from ..dtypes.quantized import (FP8_FORMATS, FP8_STORAGE, Q4_0_BLOCK, Q4_0_BLOCK_BYTES, Q4_0_SCALES, Q4_0_VALUES, Fp8Conversion,
                                q4_0_join, q4_0_split, to_fp8)
from .probability import ideal_bits
from .rans import RansParams
from .stream import BLOCK_PAIRS, MAX_STATES, Block, Checkpoint, Run, StreamError, block_crc, block_ranges, block_spans, \
    clip_runs, word_dtype

__all__ = ["ContainerError", "CodedTensor", "encode_tensors", "compress_checkpoint", "compress_tensor", "CompressTask",
           "Container", "ContainerStream", "open_container", "DEFAULT_CHECKPOINT_INTERVAL", "MAGIC", "VERSION",
           "VERSION_STATES", "VERSION_BLOCKS", "VERSION_SPREADS", "DEFAULT_CODEC", "DEFAULT_LAYOUT", "LAYOUTS", "BLOCK_PAIRS",
           "LEGACY_CODECS", "FORMATS", "format_sizes", "format_lines", "PUBLISHED_FP8_SAVING"]

#: Codecs ansforge wrote before, which it still reads: the legacy names of the codec registry
#: (:mod:`.registry`): ``rans16-s64w32``, rans16 coded with a 64-bit state until the paper preset moved to
#: S = 48 (one-DSP decoder multiply, docs/bitstream.md), and ``rans16xN-s48w32``, rans16xN with S = 48,
#: W = 32 until it moved to S = 32, W = 16 (the ``interleaved`` preset). Their codec records keep the names
#: ``rans16`` / ``rans16xN`` and carry S and W, so such a stream decodes exactly as it was written.
LEGACY_CODECS = legacy_codecs()

MAGIC = b"ANSFORGE"
VERSION = 4
#: Versions this reader accepts. Version 1 computed each block CRC over the block's words in address
#: order and did not give a word split by a tANS checkpoint to both blocks; version 2 uses
#: :func:`~ansforge.model.coding.stream.block_ranges` and :func:`~ansforge.model.coding.stream.block_crc`
#: (decoding order), which a decoder core checks as the words arrive.
#: Version 3 adds a tensor's optional ``row_shifts`` (:func:`row_shifts`); files without them are written
#: as version 2. Version 4 adds a matrix's optional ``context`` record (plan, selects and table sets,
#: :mod:`.context`); only files that hold one are written as version 4.
#: Version 5 adds codecs of ``N > 1`` interleaved states (a codec record's ``states``, checkpoints whose
#: state is a list of ``N`` states, ``docs/bitstream.md`` §8); a file is written as version 5 only when
#: one of its streams has ``N > 1``, so single-state files keep their version and their bytes. A file
#: is written as the highest version any of its fields needs.
VERSION_STATES = 5
#: Version 6 is the **blocks** layout (``docs/bitstream.md`` §6): a stream record gives ``block_pairs``
#: and its independent blocks ``[n_words, crc]`` instead of checkpoints; every field of versions 3 to 5
#: (row shifts, context plans, interleaved states) may appear in it.
VERSION_BLOCKS = 6
#: Version 7: a tANS context set may leave out its spread (``tans_symbols``) when it is the one its
#: frequencies imply (``tans_spread`` ``fse``, or ``tuned`` to the quantized probabilities ``f/L``;
#: docs/bitstream.md §6), which a reader rebuilds. Only files with such a set are written as version 7,
#: so every other file keeps its version and its bytes.
VERSION_SPREADS = 7
READ_VERSIONS = (1, 2, 3, 4, VERSION_STATES, VERSION_BLOCKS, VERSION_SPREADS)
#: The codec (the registry's default format, :data:`~.registry.DEFAULT_FORMAT`) and layout ``compress``
#: writes when none is named.
DEFAULT_CODEC = DEFAULT_FORMAT
LAYOUTS = ("blocks", "model", "tensor")
DEFAULT_LAYOUT = "blocks"
DEFAULT_CHECKPOINT_INTERVAL = 1 << 20
RAW_BLOCK_BYTES = 1 << 20
#: Largest payload offset or size a record may give (the reader checks them against the file after).
MAX_PAYLOAD = 1 << 48
#: Largest pair count, pair index or checkpoint interval a record may give (the writer refuses more).
MAX_PAIRS = 1 << 48
_HEADER = struct.Struct("<8sIIII")
_STORAGE = {"bf16": "BF16", "fp16": "F16", "fp32": "F32", "e4m3": "F8_E4M3", "e5m2": "F8_E5M2", "q4_0": "Q4_0",
            "q4_0_scale": "F16"}
#: Every pair format a tensor record may name: the float formats, fp8 and Q4_0's 4-bit values
#: (model/dtypes/quantized.py). A reader that predates one refuses the record by its pair_format.
FORMATS = {**PAIR_FORMATS, **FP8_FORMATS, "q4_0": Q4_0_VALUES, "q4_0_scale": Q4_0_SCALES}
#: Suffix of the record that holds a Q4_0 tensor's fp16 block scales (as fp16 pairs).
Q4_0_SCALES_SUFFIX = ":scales"
#: Suffix of the float32 scalar ``decompress`` writes beside an fp8 tensor converted with a scale
#: (vLLM's ``weight`` / ``weight_scale`` convention: dequantized = fp8 × scale).
FP8_SCALE_SUFFIX = "_scale"
_NATIVE = {"F32": "fp32", "F16": "fp16", "BF16": "bf16"}
_RAW_NUMPY = {"F64": "<f8", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4",
              "U16": "<u2", "U8": "u1", "BOOL": "?"}


class ContainerError(AnsforgeError):
    """A container that is truncated, corrupted or not an ansforge container."""


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _field(rec: dict, key: str, kind: type, fail: Callable[[str, str], ContainerError], where: str,
           lo: int | None = None, hi: int | None = None):
    """``rec[key]``, checked to be of JSON type ``kind`` (``int`` excludes booleans) and, for integers,
    within ``lo .. hi``; otherwise ``fail(where, ...)`` names the field and the value."""
    if key not in rec:
        raise fail(where, f"lacks field {key!r}")
    v = rec[key]
    ok = _is_int(v) if kind is int else isinstance(v, kind)
    if not ok:
        raise fail(where, f"field {key!r} must be {kind.__name__}, not {type(v).__name__} {str(v)[:40]}")
    if kind is int and ((lo is not None and v < lo) or (hi is not None and v > hi)):
        raise fail(where, f"field {key!r} = {v} is outside {lo}..{hi}")
    return v


def _crc(b: bytes | memoryview) -> int:
    return zlib.crc32(b) & 0xFFFFFFFF


@dataclass
class CodedTensor:
    """One tensor's part of a stream: its pairs' alphabet and coder table and where its pairs lie."""

    name: str
    pairs: CodingPairs
    code_table: CodeTable
    table: object
    first_pair: int = 0
    ideal_bits: float = 0.0
    row_shifts: list | None = None  #: ``[[rows, z], ...]`` (see :func:`row_shifts`), None when not used
    context: ContextPlan | None = None  #: the matrix's context plan (its ``pairs`` are the folded ones)
    set_tables: list | None = None      #: with ``context``: one coder table per table set


@dataclass
class CodedStream:
    """A stream of one or more tensors, encoded by a golden coder."""

    spec: Codec
    tensors: list[CodedTensor]
    words: np.ndarray
    checkpoints: list[Checkpoint]
    n_pairs: int
    checkpoint_interval: int
    runs: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    #: Independent blocks (container version 6), in stream order; empty for a stream of one stack.
    blocks: list = field(default_factory=list)
    block_pairs: int = 0

    @property
    def word_bits_total(self) -> int:
        return int(self.words.size) * self.spec.word_bits

    @property
    def checkpoint_bits(self) -> int:
        """Bits of the stored checkpoints: 32-bit word offset, 8-bit bit offset and the coder's ``N``
        states each."""
        return len(self.checkpoints) * (32 + 8 + self.spec.states * self.spec.state_bits)

    @property
    def total_bits(self) -> int:
        return self.word_bits_total + self.checkpoint_bits


#: Bits a row-shift run costs in the record (JSON ``[rows,z],``), charged when deciding to use them.
_SHIFT_RUN_BITS = 8 * 12


def row_shifts(pairs: CodingPairs, mantissa_bits: int) -> tuple[np.ndarray, int] | None:
    """Per row of the tensor, the trailing zero mantissa bits all of its values share (``z``), when not
    storing them saves bits; ``None`` otherwise. Returns ``(z per row, values per row)``.

    A checkpoint often holds rows stored at a lower precision than its type (MiniLM's fp32 word
    embeddings have 1,349 rows of fp16 precision, its pooler 13 zero bits in every value): those low
    mantissa bits are constant, yet each pair carries them as additional data. A row's ``z`` removes
    them: its pairs are coded with the tensor's table whose additional-data width is ``w - z``, and
    the decoder shifts the additional data left by ``z`` — in a core, a per-row register (loaded like
    the context tables' selector) that narrows the field read and a shifter on its output.
    """
    shape = pairs.shape
    n = int(pairs.codes.size)
    if n == 0 or mantissa_bits == 0:
        return None
    rows = int(shape[0]) if len(shape) >= 2 else 1
    per_row = n // rows
    # OR each row in the additional data's own dtype, then mask: one pass, no widened copy.
    orr = np.bitwise_or.reduce(np.asarray(pairs.extra).reshape(rows, per_row), axis=1).astype(np.uint64) \
        & ((np.uint64(1) << np.uint64(mantissa_bits)) - np.uint64(1))
    low = orr & (~orr + np.uint64(1))  # lowest set bit (0 for an all-zero row)
    z = np.where(orr == 0, mantissa_bits, np.log2(np.maximum(low, 1).astype(np.float64)).astype(np.int64))
    n_runs = 1 + int(np.count_nonzero(np.diff(z))) if z.size else 0
    if int(z.sum()) * per_row <= n_runs * _SHIFT_RUN_BITS:
        return None
    return z.astype(np.int64), per_row


def _rle(z: np.ndarray) -> list[list[int]]:
    edges = np.flatnonzero(np.diff(z)) + 1
    starts = np.concatenate([[0], edges])
    ends = np.concatenate([edges, [z.size]])
    return [[int(b - a), int(z[a])] for a, b in zip(starts, ends)]


def _shifted_tables(spec: Codec, ct: CodeTable, base, widths: list[int]) -> dict[int, object]:
    """The tensor's coder table with its additional data narrowed by each ``z`` (same frequencies and,
    for tANS, the same state spread: only the field widths differ)."""
    from dataclasses import replace as _replace
    out = {}
    for z in sorted(set(widths)):
        if z == 0:
            out[0] = base
            continue
        ct_z = _replace(ct, extra_bits=ct.extra_bits - z)
        out[z] = spec.shifted_table(ct_z, base)
    return out


def _map(fn: Callable, items: Sequence, threads: int) -> list:
    """``[fn(x) for x in items]``, on ``threads`` threads when more than one (NumPy and the compiled
    kernels release the GIL for the bulk of the work)."""
    if threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(fn, items))


def _tables_of(job: tuple) -> tuple | ConfigError:
    """``spec.tables(counts, extra_bits)`` for ``job = (spec, counts, extra_bits)``, or the ConfigError it
    raised (a worker process's part of :func:`encode_tensors`)."""
    spec, counts, extra_bits = job
    try:
        return spec.tables(counts, extra_bits)
    except ConfigError as exc:
        return exc


def _process_map(fn: Callable, jobs: Sequence, processes: int) -> list:
    """``[fn(x) for x in jobs]`` on ``processes`` forked processes (for work that holds the GIL); in this
    process where fork is not available."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    if processes <= 1 or len(jobs) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(x) for x in jobs]
    with ProcessPoolExecutor(max_workers=min(processes, len(jobs)), mp_context=multiprocessing.get_context("fork")) \
            as pool:
        return list(pool.map(fn, jobs, chunksize=max(1, len(jobs) // (4 * processes))))


def encode_tensors(spec: Codec, items: Sequence[tuple[str, CodingPairs]],
                   checkpoint_interval: int | None = DEFAULT_CHECKPOINT_INTERVAL, threads: int = 1,
                   mantissa_bits: Sequence[int] | None = None,
                   contexts: Sequence[ContextPlan | None] | None = None, block_pairs: int = 0) -> CodedStream:
    """Encode tensors' coding pairs, in order, into one stream of ``spec``'s coder (the compiled
    kernels of :mod:`.fastans` where they apply, bit-exact with the golden coder); the tensors' tables
    are built on ``threads`` threads.

    ``mantissa_bits`` (one per tensor) enables :func:`row_shifts`: rows whose low mantissa bits are
    all zero are coded with narrower additional data. Without it, tensor ``i`` is run ``i`` of table
    ``i`` (the layout Table 1 and the cores use).

    ``contexts`` (one per tensor, ``None`` for the one-table layout) codes tensor ``i`` with the table
    sets of its :class:`~.context.ContextPlan`: its pairs (already split in the plan's folded format)
    form a 2-D matrix, one coder table per set (:func:`~.context.context_tables`, one alphabet), and
    the runs switch set per group (:meth:`~.context.ContextPlan.runs`). Such a tensor has no row shifts.

    ``block_pairs`` > 0 codes the stream as independent blocks (container version 6,
    :func:`~.stream.block_spans`): each tensor's pairs cut every ``block_pairs`` pairs, each block a
    complete stream of its own (flush and head) with its tensor's tables, coded on ``threads``
    threads; the stream's words are the blocks' words back to back (``CodedStream.blocks``), and
    ``checkpoint_interval`` is not used (the blocks are the random-access points)."""

    def counted(index: int) -> tuple[np.ndarray, int]:
        pairs = items[index][1]
        return fastpairs.code_counts(pairs), int(pairs.extra_bits_per_code.max()) if pairs.extra_bits_per_code.size else 0

    # The tables of the tensors without a context plan are built in Python (normalization, spreads),
    # which holds the GIL: on more than one thread they are built in forked processes (the same
    # function of the same counts, so the same tables).
    built: dict[int, tuple] = {}
    plain = [i for i in range(len(items)) if contexts is None or contexts[i] is None]
    if threads > 1 and len(plain) > 1:
        counted_all = _map(counted, plain, threads)
        tabled = _process_map(_tables_of, [(spec, c, k) for c, k in counted_all], threads)
        built = {i: (c, k, t) for i, (c, k), t in zip(plain, counted_all, tabled)}

    def prepare(index: int):
        name, pairs = items[index]
        counts, extra_bits, done = built[index] if index in built else (*counted(index), None)
        plan = contexts[index] if contexts is not None else None
        try:
            if plan is None:
                if isinstance(done, ConfigError):
                    raise done
                ct, table = done if done is not None else spec.tables(counts, extra_bits)
                sets = None
            else:
                shape = tuple(pairs.shape)
                ct, sets = context_tables(spec, set_counts(pairs.codes, shape, plan, pairs.n_codes), extra_bits,
                                          container=True)
                table = sets[0]
        except ConfigError as exc:
            raise ConfigError(f"tensor {name!r}: {exc}") from None
        # The extra bits from the counts in hand: extra_bits_total() would count the codes a second time.
        ideal = ideal_bits(counts) + int(counts @ pairs.extra_bits_per_code.astype(np.int64))
        if plan is not None:
            return ct, table, ideal, None, (plan, sets)
        shifts = row_shifts(pairs, mantissa_bits[index]) if mantissa_bits is not None else None
        if shifts is not None:
            ideal -= float(shifts[0].sum()) * shifts[1]
        return ct, table, ideal, shifts, None

    prepared = _map(prepare, range(len(items)), threads)
    coded: list[CodedTensor] = []
    runs, tables, firsts = [], [], []
    spans_of: list[tuple[int, int, int, int]] = []  # per tensor: its tables lo..hi, its runs lo..hi
    pos = 0
    for (name, pairs), (ct, table, ideal, shifts, ctx) in zip(items, prepared):
        t_lo, r_lo = len(tables), len(runs)
        if ctx is not None:
            plan, sets = ctx
            coded.append(CodedTensor(name, pairs, ct, table, pos, ideal, None, plan, sets))
            runs += plan.runs(tuple(pairs.shape), first_table=len(tables))
            tables += sets
        elif shifts is None:
            coded.append(CodedTensor(name, pairs, ct, table, pos, ideal))
            runs.append(Run(len(tables), int(pairs.codes.size)))
            tables.append(table)
        else:
            z, per_row = shifts
            rle = _rle(z)
            coded.append(CodedTensor(name, pairs, ct, table, pos, ideal, rle))
            variants = _shifted_tables(spec, ct, table, [zz for _, zz in rle])
            index = {}
            for zz, t in variants.items():
                index[zz] = len(tables)
                tables.append(t)
            runs += [Run(index[zz], rows * per_row) for rows, zz in rle]
        spans_of.append((t_lo, len(tables), r_lo, len(runs)))
        firsts.append(pos)
        pos += int(pairs.codes.size)

    # The stream's symbols and additional data, each tensor written straight into its slice (no
    # per-tensor arrays to concatenate): bytes and 32-bit words where every alphabet fits them.
    compact = fastans.supported(spec)
    small = compact and all(ct.n_symbols < 255 and max(ct.symbol_extra_bits) <= 32 for ct, *_ in prepared)
    sy = np.empty(pos, np.uint8 if small else np.int64)
    ex = np.empty(pos, np.uint32 if small else np.uint64)

    def fill(index: int) -> None:
        name, pairs = items[index]
        ct, _, _, shifts, _ = prepared[index]
        lo, hi = firsts[index], firsts[index] + int(pairs.codes.size)
        try:
            if small and fastpairs.map_symbols(ct, pairs, shifts, sy[lo:hi], ex[lo:hi]):
                return
            s, e = ct.to_symbols(pairs.codes, pairs.extra, compact=compact)
        except ConfigError as exc:
            raise ConfigError(f"tensor {name!r}: {exc}") from None
        if shifts is not None:
            z, per_row = shifts
            e = (e.reshape(z.size, per_row) >> z.astype(e.dtype)[:, None]).ravel()
        sy[lo:hi] = s
        ex[lo:hi] = e

    _map(fill, range(len(items)), threads)
    if not block_pairs:
        stream = fastans.encode(spec, tables, runs, sy, ex, checkpoint_interval) if compact \
            else spec.coder().encode(tables, runs, sy, ex, checkpoint_interval)
        return CodedStream(spec, coded, stream.words, stream.checkpoints, pos, checkpoint_interval or 0, runs, tables)

    def encode_block(span: tuple[int, int, int]) -> np.ndarray:
        """One independent block: its tensor's tables and its share of the tensor's runs, coded alone."""
        ti, lo, n = span
        t_lo, t_hi, r_lo, r_hi = spans_of[ti]
        sub, bruns = tables[t_lo:t_hi], clip_runs(runs[r_lo:r_hi], lo - firsts[ti], n, t_lo)
        s, e = sy[lo:lo + n], ex[lo:lo + n]
        done = fastans.encode(spec, sub, bruns, s, e, 0) if compact else spec.coder().encode(sub, bruns, s, e, 0)
        return done.words, block_crc(done.words)

    spans = block_spans([int(p.codes.size) for _, p in items], block_pairs)
    # Largest blocks first, so that the threads finish together; the words go back in stream order.
    order = sorted(range(len(spans)), key=lambda b: -spans[b][2])
    coded_blocks = dict(zip(order, _map(encode_block, [spans[b] for b in order], threads)))
    parts = [coded_blocks[b][0] for b in range(len(spans))]
    blocks, word = [], 0
    for b, (ti, lo, n) in enumerate(spans):
        nw = int(parts[b].size)
        blocks.append(Block(lo, n, word, nw, int(coded_blocks[b][1]), ti))
        word += nw
    words = np.concatenate(parts) if parts else np.zeros(0, word_dtype(spec.word_bits))
    return CodedStream(spec, coded, words.astype(word_dtype(spec.word_bits), copy=False), [], pos, 0, runs, tables,
                       blocks, block_pairs)


# ------------------------------------------------------------------------------------------------
# Writing


def _coded_fields(spec: Codec, ct: CodedTensor, ctx: tuple | None) -> dict:
    """The fields of a coded tensor's record that its coding decides, in the order they are written:
    ``code_table``, ``ideal_bits``, ``row_shifts``, then the ``context`` record (``ctx``: plan, fold,
    unfolded ideal bits) or the coder table's own fields (tANS: its spread). A set's spread is stored
    only where it is not the one its frequencies imply (:func:`~.context.spread_is_stored`; version 7)."""
    out = {"code_table": ct.code_table.to_json(), "ideal_bits": ct.ideal_bits if ctx is None else ctx[2]}
    if ct.row_shifts is not None:
        out["row_shifts"] = ct.row_shifts
    if ct.context is not None:
        plan, fold, _ = ctx
        sets = []
        for t in ct.set_tables:
            entry = {"freqs": list(t.code_table.freqs), **spec.table_record(t)}
            if not spread_is_stored(t):
                entry.pop("tans_symbols", None)
            sets.append(entry)
        out["context"] = {**plan_record(plan, fold), "sets": sets}
    else:
        out.update(spec.table_record(ct.table))
    return out


def _json_bytes(value) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def _coded_bytes(spec: Codec, name: str, conv: Conversion, cp: CodingPairs, ctx: tuple | None, mantissa_bits: int,
                 choose: tuple[int, int, bool]) -> int:
    """Bytes that tensor ``name``'s coding costs in a container of ``choose`` = ``(block_pairs,
    checkpoint_interval, row_shifts)``: its words, the record fields its coding decides
    (:func:`_coded_fields`, its conversion and exponents) and its part of the stream record (its
    blocks' ``[n_words, crc]``, or its checkpoints and CRC blocks), coded alone as :func:`encode_tensors`
    codes it in the container. Exact for the blocks and tensor layouts (a tensor's blocks or stream are
    its own); for the model layout's one stream, up to the words and checkpoints shared at its ends."""
    block_pairs, interval, shifts = choose
    plan = ctx[0] if ctx is not None else None
    coded = encode_tensors(spec, [(name, cp)], interval, 1, mantissa_bits=[0 if plan else mantissa_bits] if shifts
                           else None, contexts=[plan] if plan is not None else None, block_pairs=block_pairs)
    fields = _coded_fields(spec, coded.tensors[0], ctx)
    if block_pairs:
        part = [[b.n_words, b.crc] for b in coded.blocks]
    else:
        part = [[c.to_record() for c in coded.checkpoints],
                [[lo, hi, block_crc(coded.words, lo, hi)] for lo, hi in block_ranges(int(coded.words.size),
                                                                                      coded.checkpoints)]]
    return int(coded.words.nbytes) + _json_bytes([conv.describe(), cp.exponents.tolist(), fields, part])


def _raw_bytes(ckpt, info) -> np.ndarray:
    """The stored bytes of ``info``, mapped from the file that holds them."""
    return np.memmap(ckpt.file_of(info), dtype=np.uint8, mode="r", offset=info.offset, shape=(info.nbytes,)) \
        if info.nbytes else np.zeros(0, np.uint8)


def _split_tensor(ckpt, info, model, spec: Codec, pairs: str, context: bool | str, context_fold: int,
                  context_sets: int, choose: tuple[int, int, bool] = (0, 0, False)) -> list | None:
    """Checkpoint ``ckpt``'s tensor ``info`` as ``(target, conversion, pairs, record fields)``, one per
    record (a Q4_0 tensor has two: its values and its scales); ``None`` for a tensor stored raw
    (:func:`compress_checkpoint`'s options; ``model`` names the checkpoint in messages).

    With ``context``, a 2-D float matrix keeps its context plan only where it pays: its bytes in the
    container (:func:`_coded_bytes` with ``choose`` = ``(block_pairs, checkpoint_interval,
    row_shifts)``: words, every table set and stored spread, selects, record and block entries) below
    those of the plain record the same options write without ``context``; otherwise it is that plain
    record, byte for byte. Either way its fields hold ``context_bytes`` = ``(plain bytes, bytes
    written)``."""
    if info.dtype in FP8_STORAGE:
        target = FP8_STORAGE[info.dtype]
        bits = _raw_bytes(ckpt, info)
        nonfinite = int(np.count_nonzero(~np.isfinite(MINIFLOATS[target].to_float64(bits))))
        return [(target, Conversion(target, target, False, 0, nonfinite),
                 FP8_FORMATS[target].split(bits.reshape(info.shape)), {})]
    if info.dtype == "Q4_0":
        if info.size % Q4_0_BLOCK or info.nbytes != info.size // Q4_0_BLOCK * Q4_0_BLOCK_BYTES:
            raise ConfigError(f"{model}: tensor {info.name!r} of type Q4_0 has {info.size} weights in "
                              f"{info.nbytes} bytes, not whole {Q4_0_BLOCK}-weight blocks of {Q4_0_BLOCK_BYTES} bytes")
        q, d = q4_0_split(_raw_bytes(ckpt, info))
        nonfinite = int(np.count_nonzero((d & np.uint16(0x7C00)) == np.uint16(0x7C00)))
        scales = info.name + Q4_0_SCALES_SUFFIX
        return [("q4_0", Conversion("q4_0", "q4_0", False, 0, 0), Q4_0_VALUES.split(q.reshape(info.shape)),
                 {"scales": scales}),
                ("q4_0_scale", Conversion("fp16", "fp16", False, 0, nonfinite), Q4_0_SCALES.split(d),
                 {"name": scales, "shape": [int(d.size)], "scales_of": info.name})]
    if info.dtype not in SUPPORTED_DTYPES:
        return None
    if pairs in FP8_FORMATS and len(info.shape) >= 2:
        bits, conv = to_fp8(ckpt.tensor(info.name).array, info.dtype, pairs)
        return [(pairs, conv, FP8_FORMATS[pairs].split(bits), {})]
    target = _NATIVE[info.dtype] if pairs == "auto" or pairs in FP8_FORMATS else pairs
    fmt = PAIR_FORMATS[target]
    plain = not context or len(info.shape) != 2 or info.size == 0  # split as it is, without a fold
    if plain and _NATIVE[info.dtype] == target:
        # As stored, no conversion: the compiled split, whose exponent histogram also counts the
        # NaN/Inf values (exponent field all ones) that convert() would count in a pass of its own.
        fast = fastpairs.split_pairs(fmt, ckpt.tensor(info.name).array)
        if fast is not None:
            cp, hist = fast
            return [(target, Conversion(target, target, False, 0, int(hist[-1])), cp, {})]
    bits, conv = convert(ckpt.tensor(info.name).array, info.dtype, target)
    if plain:
        return [(target, conv, fmt.split(bits), {})]
    # Context coding: the folded pairs carry the code; the record's ideal stays the unfolded
    # per-matrix ideal (Table 1's "Ideal"), so the gap is comparable with a plain container's.
    plain = fmt.split(bits)
    ideal = ideal_bits(plain.counts()) + plain.extra_bits_total()
    fold = min(context_fold, fmt.mantissa_bits, 16 - fmt.exponent_bits)  # codes index 16-bit exponent fields
    cp = folded_format(fmt, fold).split(bits.reshape(info.shape))
    # Each set as a record holds it: a decimal frequency and a comma per symbol, the set's keys.
    n_sym = max(1, int(np.count_nonzero(np.bincount(cp.codes, minlength=cp.n_codes))))
    plan = plan_context(cp.codes.reshape(info.shape), cp.n_codes, precision_bits=spec.precision_bits,
                        max_sets=context_sets, frequency_bits=8 * (1 + len(str((1 << spec.precision_bits) // n_sym))),
                        set_bits=8 * (len('{"freqs":[],"tans_spread":"tuned"},') if spec.kind == "tans" else
                                      len('{"freqs":[]},')))
    # The plain record this matrix would have without --context, exactly (the same path), against
    # the plan: each charged in full, in the container's own bytes.
    if context == "always":  # every plan kept, paying or not (tests and fuzzing of the format)
        return [(target, conv, cp, {"context": (plan, fold, ideal)})]
    (p_target, p_conv, p_cp, p_fields), = _split_tensor(ckpt, info, model, spec, pairs, False, 0, 0)
    where = f"{model}: tensor {info.name!r}"
    try:
        with_plan = _coded_bytes(spec, info.name, conv, cp, (plan, fold, ideal), 0, choose)
        without = _coded_bytes(spec, info.name, p_conv, p_cp, None, fmt.mantissa_bits, choose)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if with_plan < without:
        return [(target, conv, cp, {"context": (plan, fold, ideal), "context_bytes": (without, with_plan)})]
    return [(p_target, p_conv, p_cp, {**p_fields, "context_bytes": (without, without)})]


@dataclass(frozen=True)
class CompressTask:
    """What :func:`compress_tensor` needs of :func:`compress_checkpoint`'s options (small, picklable)."""

    codec: str
    pairs: str
    context: bool | str  #: True, False or "always" (compress_checkpoint)
    context_fold: int
    context_sets: int
    allow_nonfinite: bool
    row_shifts: bool
    checkpoint_interval: int
    block_pairs: int  #: > 0: the blocks layout's blocks; 0: one stream with checkpoints (tensor layout)


@functools.lru_cache(maxsize=4)
def _opened(path: str, stamp: tuple) -> object:
    """A worker's checkpoint, opened once for all its tasks on the same file (``stamp``: its size and
    modification time, so that a file rewritten in between is read again)."""
    return open_checkpoint(path, quantized=True)


def compress_tensor(path: str, model: str, name: str, job: CompressTask) -> list | None:
    """One task of :func:`compress_checkpoint` with ``tasks``: tensor ``name`` of the checkpoint at
    ``path`` (``model`` names it in messages) split, its tables built and coded alone, as
    :func:`compress_checkpoint` codes it in this process. Returns ``None`` for a tensor stored raw,
    else per record ``(target, conversion, pair count, fields, exponents, stream)``: the tensor's stream
    (blocks or checkpoints) without its pairs, which the caller joins in order."""
    st = os.stat(path)
    ckpt = _opened(path, (st.st_size, st.st_mtime_ns))
    return _code_tensor(ckpt, ckpt.info(name), model, job)


def _code_tensor(ckpt, info, model: str, job: CompressTask, threads: int = 1,
                 split_done: Callable[[], None] | None = None) -> list | None:
    """:func:`compress_tensor` of an opened checkpoint, its blocks coded on ``threads`` threads
    (``split_done()`` once the tensor is split into pairs): one tensor in memory at a time."""
    spec = parse_codec(job.codec)
    done = _split_tensor(ckpt, info, model, spec, job.pairs, job.context, job.context_fold,
                         job.context_sets, (job.block_pairs, job.checkpoint_interval, job.row_shifts))
    if split_done is not None:
        split_done()
    if done is None:
        return None
    out = []
    for target, conv, cp, fields in done:
        rec_name = fields.get("name", info.name)
        if conv.nonfinite and not job.allow_nonfinite:  # before the coding (the caller checks again)
            after = f" (after conversion to {target})" if conv.source != conv.target else ""
            raise ConfigError(f"{model}: tensor {rec_name!r} holds {conv.nonfinite} NaN/Inf values{after}; "
                              "pass allow_nonfinite (--allow-nonfinite) to code them exactly")
        plan = fields["context"][0] if "context" in fields else None
        bits = [0 if plan is not None else FORMATS[target].mantissa_bits] if job.row_shifts else None
        coded = encode_tensors(spec, [(rec_name, cp)], job.checkpoint_interval, threads, mantissa_bits=bits,
                               contexts=[plan] if plan is not None else None, block_pairs=job.block_pairs)
        for ct in coded.tensors:   # the pairs stay here: the caller needs only their count
            ct.pairs = None
        coded.runs, coded.tables = [], []
        out.append((target, conv, int(cp.codes.size), fields, cp.exponents.tolist(), coded))
    return out


def _process_tasks(processes: int, sizes: dict[str, int]) -> Callable:
    """A ``tasks`` function for :func:`compress_checkpoint` that codes whole tensors
    (:func:`compress_tensor`) on ``processes`` processes, results in order.

    Threads cannot share this work: building a tensor's tables (``CodeTable`` search, tuned spreads) is
    Python, which holds the GIL, and it is most of a tensor's coding time. The processes are forked (no
    progress bar's redraw is ever half done in a fork: ``ansforge.model.progress``), from a fork server
    or spawned where fork is not available.
    Tensors (``sizes``: weights by name) are handed out ahead of the one awaited up to ``2 * processes``
    times the largest tensor's weights (at least ``2 * processes`` tensors), so that the other processes
    keep working while one codes a large tensor, and memory holds a bounded number of tensors and their
    words, whatever the model's size."""

    def run(fn, jobs):
        import multiprocessing
        from collections import deque
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        methods = multiprocessing.get_all_start_methods()
        method = next(m for m in ("fork", "forkserver", "spawn") if m in methods)
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload([__name__])
        weights = [max(1, sizes[job[2]]) for job in jobs]          # job: (path, model, name, task)
        budget = 2 * processes * max(weights)
        pool = ProcessPoolExecutor(max_workers=min(processes, len(jobs)), mp_context=context)
        try:
            pending: deque = deque()
            ahead = handed = 0                              # weights in flight; tensors handed out
            for _ in jobs:
                while handed < len(jobs) and (len(pending) < 2 * processes or ahead + weights[handed] <= budget):
                    pending.append((weights[handed], jobs[handed][2], pool.submit(fn, *jobs[handed])))
                    ahead += weights[handed]
                    handed += 1
                size, name, future = pending.popleft()
                ahead -= size
                try:
                    done = future.result()
                except BrokenProcessPool:
                    raise AnsforgeError(f"a coding process was killed (e.g. out of memory) before tensor "
                                        f"{name!r} was coded; with --threads "
                                        f"{processes} up to {processes} tensors are in memory at once, --threads 1 "
                                        "holds one") from None
                yield done
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return run


def _join_blocks(spec: Codec, parts: Sequence[CodedStream], block_pairs: int, words: np.ndarray | None = None
                 ) -> CodedStream:
    """The blocks layout's one stream from its tensors' own (each a :func:`compress_tensor` result): the
    same words, blocks and positions as :func:`encode_tensors` of all of them (each tensor's blocks are
    cut from its first pair and coded with its own tables alone). ``words``: the stream's words where
    the parts' own have been written out already (:class:`_SpilledWords`), else their concatenation."""
    tensors, blocks, parts_words = [], [], []
    pos = word = 0
    for ti, st in enumerate(parts):
        for ct in st.tensors:
            ct.first_pair += pos
            tensors.append(ct)
        blocks += [Block(b.pair + pos, b.count, b.word + word, b.n_words, b.crc, ti) for b in st.blocks]
        parts_words.append(st.words)
        word += sum(b.n_words for b in st.blocks)
        pos += st.n_pairs
    dt = word_dtype(spec.word_bits)
    if words is None:
        words = np.concatenate(parts_words).astype(dt, copy=False) if parts_words else np.zeros(0, dt)
    return CodedStream(spec, tensors, words, [], pos, 0, [], [], blocks, block_pairs)


class _SpilledWords:
    """A blocks-layout stream's words, written to a file beside the output as each tensor is coded
    (a 7B model's are ~9 GB), then copied behind the container's header: what
    :class:`CodedStream` needs of them (``size``, ``dtype``) without holding them."""

    def __init__(self, path: Path, dtype: np.dtype):
        self.path, self.dtype, self.size = path, np.dtype(dtype).newbyteorder("<"), 0
        self._file = open(path, "wb")

    def append(self, words: np.ndarray) -> None:
        self._file.write(memoryview(np.ascontiguousarray(words.astype(self.dtype, copy=False))).cast("B"))
        self.size += int(words.size)

    def astype(self, dtype, copy: bool = True) -> "_SpilledWords":
        if np.dtype(dtype) != self.dtype:
            raise TypeError(f"spilled words are {self.dtype}, not {dtype}")  # pragma: no cover
        return self

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def close(self) -> None:
        self._file.close()

    def copy_to(self, f) -> None:
        """Append the words to the open file ``f`` (the kernel's copy where it has one)."""
        self._file.close()
        f.flush()
        with open(self.path, "rb") as src:
            left, out = self.nbytes, f.fileno()
            while left:
                try:
                    n = os.copy_file_range(src.fileno(), out, left)
                except (AttributeError, OSError):
                    f.seek(0, os.SEEK_END)
                    shutil.copyfileobj(src, f, 1 << 24)
                    f.flush()
                    return
                if n == 0:
                    raise OSError(f"{self.path}: {left} bytes short")  # pragma: no cover
                left -= n
        f.seek(0, os.SEEK_END)


class _WeightProgress:
    """:func:`compress_checkpoint`'s ``progress(done, total)`` in weights, safe to call from its threads."""

    def __init__(self, progress: Callable[[int, int], None] | None, total: int):
        self._progress, self._total, self._done = progress, total, 0
        self._lock = threading.Lock()

    def __call__(self, weights: int) -> None:
        if self._progress is not None:
            with self._lock:
                self._done += weights
                self._progress(self._done, max(self._total, self._done))

    def total(self, total: int) -> None:
        """The total now known (the split has said how many pairs are coded)."""
        if self._progress is not None:
            with self._lock:
                self._total = total
                self._progress(self._done, max(total, self._done))


def compress_checkpoint(model: str | os.PathLike[str], out: str | os.PathLike[str], codec: str = DEFAULT_CODEC, *,
                        pairs: str = "auto", checkpoint_interval: int | None = None,
                        group: str | None = None, layout: str | None = None, block_pairs: int = BLOCK_PAIRS,
                        allow_nonfinite: bool = False,
                        progress: Callable[[int, int], None] | None = None, threads: int = 1,
                        row_shifts: bool | None = None, context: bool | str = False, context_sets: int = 8,
                        context_fold: int = 1, tasks: Callable[[Callable, list[tuple]], Iterable] | None = None
                        ) -> dict:
    """Compress every tensor of checkpoint ``model`` into container ``out`` (written atomically).

    Parameters
    ----------
    codec
        A codec name (:func:`~ansforge.model.coding.codecs.parse_codec`).
    pairs
        ``auto`` codes each float tensor in its own storage format (lossless); ``bf16``, ``fp16`` or
        ``fp32`` convert first (the conversion is recorded; decompression returns the converted tensor).
        ``e4m3`` or ``e5m2`` convert every float tensor of two or more dimensions to fp8 with a
        per-tensor scale (:func:`~ansforge.model.dtypes.quantized.to_fp8`; the scale and the error are
        recorded; decompression writes the fp8 tensor and its scale as ``NAME_scale``) and code the
        others (norms, biases) as stored, as fp8 checkpoints do. Whatever ``pairs`` is, safetensors
        ``F8_E4M3``/``F8_E5M2`` tensors are coded as fp8 pairs and GGUF ``Q4_0`` tensors as their 4-bit
        values plus fp16 scales, losslessly; any other quantized type is refused.
    layout
        ``blocks`` (container version 6): one stream whose tensors are cut into independent blocks of
        at most ``block_pairs`` pairs (a tensor when smaller), each coded alone with its own flush and
        head, on ``threads`` threads; the blocks are the random-access points. ``model``: one stream for
        all coded tensors, with a checkpoint every ``checkpoint_interval`` pairs (default 2^20; the
        layout of versions 2 to 5). ``tensor``: one such stream per tensor. Default: ``group`` when
        given, else ``model`` when a ``checkpoint_interval`` is given (checkpoints belong to the
        one-stack layouts), else ``blocks``.
    group
        The older name of the one-stack layouts (``model`` or ``tensor``).
    checkpoint_interval
        Pairs between checkpoints in the ``model`` and ``tensor`` layouts (0: none); refused with
        ``blocks`` unless 0.
    allow_nonfinite
        NaN and Inf code exactly, but a checkpoint holding them is usually broken: refused unless set.
    threads
        Parallel workers (the container is the same for any number). The blocks layout codes whole
        tensors on ``threads`` processes (split, tables and blocks: building a table is Python, which
        threads cannot share), unless one tensor holds more than three quarters of the model's weights:
        then each tensor's blocks are coded on ``threads`` threads. The other layouts split tensors, build
        their tables and encode streams on ``threads`` threads.
    row_shifts
        Leave out rows' all-zero low mantissa bits (:func:`row_shifts`; version 3). Default: with
        ``group="model"``; not with ``group="tensor"``, the layout the hardware decoders read, whose
        commands take one table per stream.
    context
        Code every 2-D float tensor with context tables (:mod:`.context`; version 4): its top
        ``context_fold`` mantissa bits folded into the code, up to ``context_sets`` table sets chosen
        per row or column group by :func:`~.context.plan_context`, every set and select stored in the
        tensor's ``context`` record, where that costs fewer bytes in the file than the plain record
        (:func:`_split_tensor`; the summary's ``context`` says how many and what they saved). Other
        tensors are coded as without it. ``"always"`` keeps every plan, paying or not (to exercise the
        format on matrices too small for a plan to pay).
    progress
        ``progress(done, total)``, in weights, as the work advances: each tensor counts once when it is
        split into pairs (its tables chosen) and once more when its pairs are coded (``total`` is revised
        once, when the split has told how many pairs are coded). Called from worker threads, in order
        of completion; ``done`` never decreases.
    tasks
        Where the tensors are coded, instead of this process's ``threads``: a function that runs
        ``fn(*args)`` for each ``args`` of a list and returns (or yields) the results in order, e.g. on
        a Dask cluster (:func:`ansforge.analysis.parallel.ordered_results`). Each task is
        :func:`compress_tensor`: one tensor split, its tables built and its blocks (``blocks`` layout)
        or its stream (``tensor`` layout) coded, read by the checkpoint's absolute path, so the workers
        must see the same file system. The container is byte-identical to one coded here. The
        ``model`` layout (one stack for all tensors) is refused.

    Returns a summary (``tensors``, ``pairs``, ``bits``, ``ideal_bits``, ``gap``, ``bytes``; ``formats``:
    per pair format the :func:`format_sizes`; ``lossy``: ``(name, conversion)`` of each lossy tensor).
    """
    spec = parse_codec(codec)
    if pairs != "auto" and pairs not in PAIR_FORMATS and pairs not in FP8_FORMATS:
        raise ConfigError(f"pairs must be auto or one of {', '.join([*PAIR_FORMATS, *FP8_FORMATS])}, not {pairs!r}")
    if group is not None and group not in ("model", "tensor"):
        raise ConfigError(f"group must be 'model' or 'tensor', not {group!r}")
    if layout is None:
        layout = group or ("model" if checkpoint_interval is not None else "blocks")
    elif layout not in LAYOUTS:
        raise ConfigError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    elif group is not None and group != layout:
        raise ConfigError(f"layout {layout!r} and group {group!r} disagree")
    if tasks is not None and layout == "model":
        raise ConfigError("the model layout codes every tensor into one stream, which one task has to code; "
                          "tasks (--dask) take the blocks or tensor layout")
    if layout == "blocks":
        if checkpoint_interval:
            raise ConfigError(f"checkpoint_interval = {checkpoint_interval!r} needs the model or tensor layout; the "
                              f"blocks layout's independent blocks (at most {block_pairs} pairs) are its "
                              "random-access points")
        if isinstance(block_pairs, bool) or not isinstance(block_pairs, int) or not 1 <= block_pairs <= MAX_PAIRS:
            raise ConfigError(f"block_pairs must be an integer from 1 to 2^48 pairs, not {block_pairs!r}")
        checkpoint_interval = 0
    elif checkpoint_interval is None:
        checkpoint_interval = DEFAULT_CHECKPOINT_INTERVAL
    group = "tensor" if layout == "tensor" else "model"
    if isinstance(checkpoint_interval, bool) or not isinstance(checkpoint_interval, int) \
            or not 0 <= checkpoint_interval <= MAX_PAIRS:  # the reader's bound (Container._parse_stream)
        raise ConfigError(f"checkpoint_interval must be an integer from 0 to 2^48 pairs, not {checkpoint_interval!r}")
    ckpt = open_checkpoint(model, quantized=True)
    records: list[dict] = []
    coded_items: list[tuple[int, str, CodingPairs]] = []
    raw_payload: list[tuple[int, bytes]] = []
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"threads must be a positive integer, not {threads!r}")
    if context not in (False, True, "always"):
        raise ConfigError(f"context must be True, False or 'always', not {context!r}")
    if context and (isinstance(context_sets, bool) or not isinstance(context_sets, int) or not 1 <= context_sets <= 16):
        raise ConfigError(f"context_sets must be an integer from 1 to 16, not {context_sets!r}")
    if context and (isinstance(context_fold, bool) or not isinstance(context_fold, int) or context_fold < 0):
        raise ConfigError(f"context_fold must be a non-negative integer, not {context_fold!r}")

    infos = ckpt.infos()
    names = {info.name for info in infos}
    for info in infos:  # refuse before any work: a type we do not code, or a name our outputs would reuse
        problem = shape_problem(info.shape)
        if problem:  # the reader's own check (Container._parse): never write a file decompress refuses
            raise ConfigError(f"{model}: tensor {info.name!r} has shape {str(list(info.shape))[:120]}: {problem}; "
                              "an ansforge container holds at most 32 dimensions, each and the product of the "
                              "non-zero ones below 2^48")
        if info.dtype not in SUPPORTED_DTYPES and info.dtype not in FP8_STORAGE and info.dtype != "Q4_0" \
                and info.dtype not in ITEMSIZE:
            raise ConfigError(f"{model}: tensor {info.name!r} has type {info.dtype}, which ansforge does not code "
                              f"(it codes F32, F16, BF16, F8_E4M3, F8_E5M2 and GGUF Q4_0 tensors)")
        extra_name = info.name + Q4_0_SCALES_SUFFIX if info.dtype == "Q4_0" else info.name + FP8_SCALE_SUFFIX \
            if pairs in FP8_FORMATS and info.dtype in SUPPORTED_DTYPES and len(info.shape) >= 2 else None
        if extra_name is not None and extra_name in names:
            raise ConfigError(f"{model}: tensor {info.name!r} needs the name {extra_name!r} for its scales, "
                              "but the checkpoint has a tensor of that name")

    def raw_bytes(info) -> np.ndarray:
        return _raw_bytes(ckpt, info)

    ctx_of: dict[int, tuple] = {}  # record index -> (plan, fold, unfolded ideal bits)
    shifts = group == "model" if row_shifts is None else bool(row_shifts)
    # A matrix keeps its context plan where it costs fewer bytes in this container (_split_tensor).
    choose = (block_pairs if layout == "blocks" else 0, checkpoint_interval, shifts)
    context_bytes: list[tuple[int, int]] = []  # per 2-D float matrix: (plain bytes, bytes written)

    report = _WeightProgress(progress, 2 * sum(int(i.size) for i in infos))

    def split(info) -> list | None:
        done = _split_tensor(ckpt, info, model, spec, pairs, context, context_fold, context_sets, choose)
        report(int(info.size))
        return done

    parts: list[CodedStream] = []  # per tensor: each coded record's stream, as its task coded it
    job = CompressTask(codec, pairs, context, context_fold, context_sets, allow_nonfinite, shifts,
                       checkpoint_interval, block_pairs if layout == "blocks" else 0)
    # The blocks layout streams: one tensor split and coded at a time (its blocks on the threads), its
    # words written to a file beside the output at once, so that memory holds one tensor, whatever the
    # model's size. The one-stack layouts code everything at the end, from every tensor's pairs.
    per_tensor = tasks is not None or layout == "blocks"
    out = Path(out)
    if out.is_dir():
        raise ConfigError(f"{out}: is a directory")
    tmp = out.with_name(out.name + ".partial")
    spill = _SpilledWords(out.with_name(out.name + ".partial-words"), word_dtype(spec.word_bits)) \
        if layout == "blocks" else None

    def local(info):
        """This process's task: one tensor, split then coded on ``threads``; 2 x its weights reported."""
        done = _code_tensor(ckpt, info, model, job, threads, lambda: report(int(info.size)))
        report(int(info.size))
        return done

    if tasks is None and threads > 1 and layout == "blocks" and len(infos) > 1 \
            and max(int(i.size) for i in infos) <= 0.75 * sum(int(i.size) for i in infos):
        # Whole tensors on processes: a tensor's tables are built in Python, under the GIL. (One tensor
        # of most of the model's weights gains more from its blocks coded on threads, below.)
        tasks = _process_tasks(threads, {i.name: int(i.size) for i in infos})
    if tasks is None and not per_tensor:
        split_all = _map(split, infos, threads)
    elif tasks is None:
        split_all = map(local, infos)
    else:
        where = os.path.abspath(os.fspath(model))  # a worker's working folder is not ours
        split_all = tasks(compress_tensor, [(where, os.fspath(model), info.name, job) for info in infos])
    try:
        for info, done in zip(infos, split_all):
            if tasks is not None:  # a task has split and coded it
                report(2 * int(info.size))
            if done is None:
                rec: dict = {"name": info.name, "shape": list(info.shape), "source_dtype": info.dtype}
                rec.update({"coding": "raw", "dtype": info.dtype})
                raw_payload.append((len(records), bytes(raw_bytes(info))))
                records.append(rec)
                continue
            for target, conv, cp, fields, *coded in done:  # coded: a task's (exponents, stream); cp its pair count
                name = fields.get("name", info.name)
                rec = {"name": name, "shape": fields.get("shape", list(info.shape)), "source_dtype": info.dtype}
                if "context" in fields:
                    ctx_of[len(records)] = fields["context"]
                if "context_bytes" in fields:
                    context_bytes.append(fields["context_bytes"])
                if conv.nonfinite and not allow_nonfinite:
                    after = f" (after conversion to {target})" if conv.source != conv.target else ""
                    raise ConfigError(f"{model}: tensor {name!r} holds {conv.nonfinite} NaN/Inf values{after}; "
                                      "pass allow_nonfinite (--allow-nonfinite) to code them exactly")
                rec.update({"coding": "pairs", "dtype": _STORAGE[target], "pair_format": target,
                            "conversion": conv.describe(), "lossy": conv.lossy, "changed": conv.changed,
                            "exponents": coded[0] if coded else cp.exponents.tolist()})
                if isinstance(conv, Fp8Conversion):
                    rec.update({"scale": conv.scale, "rel_rmse": conv.rel_rmse, "max_abs_error": conv.max_abs_error})
                rec.update({k: v for k, v in fields.items() if k in ("scales", "scales_of")})
                if "scales" in fields:
                    rec["conversion"] = f"GGUF Q4_0 as stored: 4-bit values as codes, block scales in {fields['scales']!r}"
                elif "scales_of" in fields:
                    rec["conversion"] = f"fp16 block scales of Q4_0 tensor {fields['scales_of']!r}, as stored"
                coded_items.append((len(records), name, cp))
                records.append(rec)
                if coded:
                    if spill is not None:  # its words to the file now; the stream keeps their count
                        spill.append(coded[1].words)
                        coded[1].words = np.zeros(0, coded[1].words.dtype)  # not a view: it would keep them
                    parts.append(coded[1])
        if tasks is None and not per_tensor:  # what is left: the coded tensors' pairs
            report.total(sum(int(i.size) for i in infos) + sum(int(cp.codes.size) for _, _, cp in coded_items))
        groups = [coded_items] if group == "model" else [[it] for it in coded_items]
        groups = [g for g in groups if g]
        fmt_of = {ri: FORMATS[records[ri]["pair_format"]].mantissa_bits for ri, _, _ in coded_items}

        def encode_group(g, threads=1):
            coded = encode_tensors(spec, [(n, p) for _, n, p in g], checkpoint_interval, threads,
                                   mantissa_bits=[0 if ri in ctx_of else fmt_of[ri] for ri, _, _ in g] if shifts else None,
                                   contexts=[ctx_of[ri][0] if ri in ctx_of else None for ri, _, _ in g] if ctx_of else None,
                                   block_pairs=block_pairs if layout == "blocks" else 0)
            report(sum(int(p.codes.size) for _, _, p in g))
            return coded

        if per_tensor:  # coded a tensor at a time: the blocks layout's tensors joined into its one stream
            streams = parts if layout == "tensor" else [_join_blocks(spec, parts, block_pairs, spill)] if parts else []
        elif group == "model":
            streams = [encode_group(g, threads) for g in groups]
        else:
            streams = _map(encode_group, groups, threads)
        payload: list = []  # bytes and arrays, each written through the buffer protocol
        offset = 0
        stream_records = []
        for si, (g, st) in enumerate(zip(groups, streams)):
            # Little-endian words, written from the array itself (no bytes copy of the stream), or copied
            # from the file they were spilled to.
            blob = st.words if isinstance(st.words, _SpilledWords) else \
                np.ascontiguousarray(st.words.astype(st.words.dtype.newbyteorder("<"), copy=False))
            wb = st.words.dtype.itemsize
            if st.block_pairs:
                # Version 6: each block's pairs are implied (its tensor's pairs cut every block_pairs), so a
                # block is [n_words, crc] and its words follow the previous block's.
                stream_records.append({
                    "codec": spec.to_json(), "n_pairs": st.n_pairs, "n_words": int(st.words.size), "word_bytes": wb,
                    "payload_offset": offset, "block_pairs": st.block_pairs,
                    "blocks": [[b.n_words, b.crc] for b in st.blocks]})
            else:
                blocks = [[lo, hi, block_crc(st.words, lo, hi)]
                          for lo, hi in block_ranges(int(st.words.size), st.checkpoints)]
                stream_records.append({
                    "codec": spec.to_json(), "n_pairs": st.n_pairs, "n_words": int(st.words.size),
                    "word_bytes": wb, "payload_offset": offset, "checkpoint_interval": st.checkpoint_interval,
                    "checkpoints": [c.to_record() for c in st.checkpoints], "blocks": blocks})
            payload.append(blob)
            offset += blob.nbytes
            for (ri, _, cp), ct in zip(g, st.tensors):
                rec = records[ri]
                n = cp if isinstance(cp, int) else int(ct.pairs.codes.size)
                rec.update({"stream": si, "first_pair": ct.first_pair, "n_pairs": n})
                rec.update(_coded_fields(spec, ct, ctx_of.get(ri)))
                ct.ideal_bits = rec["ideal_bits"]
        for ri, data in raw_payload:
            blocks = [[o, min(len(data), o + RAW_BLOCK_BYTES), _crc(data[o:o + RAW_BLOCK_BYTES])]
                      for o in range(0, len(data), RAW_BLOCK_BYTES)]
            records[ri].update({"payload_offset": offset, "nbytes": len(data), "blocks": blocks})
            payload.append(data)
            offset += len(data)
        meta = getattr(ckpt, "metadata", None) if isinstance(ckpt, SafetensorsCheckpoint) else None
        if records and isinstance(meta, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            # The source file's own metadata (e.g. transformers' {"format": "pt"}, which its loader requires),
            # for decompress to write back: older readers ignore the key, so no version change.
            records[0]["file_metadata"] = dict(meta)
        source_layout = _file_layout(ckpt, infos)
        if records and source_layout is not None:
            # Where the tensors came from, for decompress to give the folder (shards, index, config.json) back:
            # older readers ignore the key and write one file, so no version change (as file_metadata).
            records[0]["file_layout"] = source_layout
        try:
            with open(tmp, "wb") as f:
                # The lowest version whose reader knows every field written, so that older readers still read
                # the files they can (and single-state files without plans stay byte-identical to theirs):
                # 5 with interleaved states, 4 with context plans, 3 with row shifts, 2 otherwise.
                # 6 for the blocks layout, whatever else it holds; 7 with a table set whose spread is implied.
                version = VERSION_SPREADS if any("tans_symbols" not in s for r in records if "context" in r
                                                 for s in r["context"]["sets"]) and spec.kind == "tans" else \
                    VERSION_BLOCKS if layout == "blocks" else VERSION_STATES if spec.states > 1 else \
                    VERSION if any("context" in r for r in records) else 3 if any("row_shifts" in r for r in records) else 2
                head = _HEADER.pack(MAGIC, version, len(records), len(stream_records), 0)[:20]
                f.write(head + struct.pack("<I", _crc(head)))
                for rec in records + stream_records:
                    js = json.dumps(rec, separators=(",", ":")).encode()
                    f.write(struct.pack("<I", len(js)) + js + struct.pack("<I", _crc(js)))
                for blob in payload:
                    if isinstance(blob, _SpilledWords):
                        blob.copy_to(f)
                    else:
                        f.write(memoryview(blob).cast("B"))
            os.replace(tmp, out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        bits = sum(s.total_bits for s in streams)
        ideal = sum(t.ideal_bits for s in streams for t in s.tensors)
        return {"tensors": len(records), "coded": len(coded_items), "pairs": sum(s.n_pairs for s in streams),
                "layout": layout, "version": version, "blocks": sum(len(s.blocks) for s in streams),
                "bits": bits, "ideal_bits": ideal, "gap": bits / ideal - 1 if ideal else 0.0,
                "streams": len(streams), "bytes": out.stat().st_size,
                "formats": format_sizes(records, [s.total_bits for s in streams]),
                "lossy": [(r["name"], r["conversion"]) for r in records if r.get("lossy")],
                **({"context": _context_summary(context_bytes, len(ctx_of), out.stat().st_size)} if context is True else {})}
    finally:
        if spill is not None:
            spill.close()
            spill.path.unlink(missing_ok=True)


def _context_summary(costs: Sequence[tuple[int, int]], kept: int, size: int) -> dict:
    """What ``--context`` did: ``matrices`` (2-D float matrices it planned), ``kept`` (those whose plan
    paid and was written), ``saved_bytes`` (their bytes with one table each, less what was written) and
    ``plain_bytes``, the size of the same container without ``--context`` (exact for the blocks and tensor
    layouts; :func:`_coded_bytes`)."""
    saved = sum(a - b for a, b in costs)
    return {"matrices": len(costs), "kept": kept, "saved_bytes": saved, "plain_bytes": size + saved}


def _file_layout(ckpt, infos) -> dict | None:
    """The ``file_layout`` record of a checkpoint: a sharded folder's :meth:`~.ShardedCheckpoint.layout`
    (shard files and their tensors and metadata, the index and ``config.json`` as read); for a llama2.c
    file whose tensors do not imply its configuration (:func:`~.checkpoint.llama2c_config_of`: an ak42
    version-1 file), the Hugging Face ``config.json`` of its header; ``None`` otherwise."""
    if isinstance(ckpt, ShardedCheckpoint):
        return ckpt.layout()
    if isinstance(ckpt, Llama2cCheckpoint) and llama2c_config_of([(i.name, i.shape) for i in infos]) != ckpt.config:
        return {"index": None, "config": _config_text(ckpt.config, "F32"), "shards": None}
    return None


def _config_text(config, dtype: str | None) -> str:
    return json.dumps(hf_llama_config(config, dtype), indent=2) + "\n"


def format_sizes(records: Sequence[dict], stream_bits: Sequence[int]) -> dict[str, dict]:
    """Per pair format of a container's tensor records: ``tensors``, ``weights``, ``raw_bytes`` (their
    storage as ``decompress`` writes it: 1 byte per fp8 weight, 18 bytes per 32 Q4_0 weights, …),
    ``bits`` and ``bits_per_weight``, ``fraction`` = coded bytes / raw bytes.

    ``bits`` are the streams' bits (final states and checkpoints included) shared out among each
    stream's tensors in proportion to their ideal bits: exact for a stream holding one format, and
    otherwise off by at most the stream's small gap to ideal. A Q4_0 tensor's scales (an fp16 record)
    count in ``q4_0``, which so measures the whole Q4_0 storage; table and record bytes are not counted.
    """
    ideal_in = [0.0] * len(stream_bits)
    for r in records:
        if r.get("coding") == "pairs":
            ideal_in[int(r["stream"])] += float(r.get("ideal_bits", 0.0))
    out: dict[str, dict] = {}
    for r in records:
        if r.get("coding") != "pairs":
            continue
        key = "q4_0" if "scales_of" in r else r["pair_format"]
        row = out.setdefault(key, {"tensors": 0, "weights": 0, "raw_bytes": 0, "bits": 0.0})
        si = int(r["stream"])
        row["bits"] += stream_bits[si] * float(r.get("ideal_bits", 0.0)) / ideal_in[si] if ideal_in[si] else 0.0
        if "scales_of" in r:
            continue
        n = int(r["n_pairs"])
        row["tensors"] += 1
        row["weights"] += n
        row["raw_bytes"] += n // Q4_0_BLOCK * Q4_0_BLOCK_BYTES if key == "q4_0" else n * FORMATS[key].total_bits // 8
    for row in out.values():
        row["bits_per_weight"] = row["bits"] / row["weights"] if row["weights"] else 0.0
        row["fraction"] = row["bits"] / 8 / row["raw_bytes"] if row["raw_bytes"] else 0.0
    return out


# ------------------------------------------------------------------------------------------------
# Reading

_NAME_RE = re.compile(rb'"name":"((?:[^"\\]|\\.)*)"')


@dataclass
class ContainerStream:
    """One coded stream of an open container (``Container.streams[index]``), as its record gives it.

    ``spec`` is the codec, ``n_pairs``/``n_words`` its sizes, ``word_bytes`` the width of a word,
    ``checkpoints`` the decoder states every ``checkpoint_interval`` pairs, ``blocks`` the
    ``(first word, end word, CRC-32)`` of each CRC block, ``tensors`` the indices of the tensors whose
    pairs it holds (in order) and ``tables``/``runs`` the code tables and which pairs each codes. Its
    words are :meth:`Container.stream_words`, its pairs :meth:`Container.decode_stream`; the last
    four fields are the reader's caches.
    """

    index: int
    spec: Codec
    n_pairs: int
    n_words: int
    word_bytes: int
    offset: int
    checkpoints: list[Checkpoint]
    blocks: list[tuple[int, int, int]]
    tensors: list[int] = field(default_factory=list)
    tables: list = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    #: per table: (index of the tensor it codes, its rows' shift z) — what joins its pairs to values
    table_owner: list[tuple[int, int]] = field(default_factory=list)
    verified: set = field(default_factory=set)
    word_list: list | None = None
    prepared: object = None
    #: Version 6: the most pairs of a block, and the independent blocks (:class:`~.stream.Block`, in
    #: stream order; ``blocks`` then holds their word ranges and CRCs); 0 and empty otherwise.
    block_pairs: int = 0
    spans: list = field(default_factory=list)
    #: per tensor (its index in the container): its tables and its runs, as index ranges of
    #: ``tables`` and ``runs``
    tensor_tables: dict = field(default_factory=dict)
    tensor_runs: dict = field(default_factory=dict)
    coded_pairs: int = 0


#: At most this many pairs of a version-6 stream are decoded to values in one native call (with their
#: blocks side by side): 2^24 bf16 values are 32 MiB held at once.
VALUES_GROUP_PAIRS = 1 << 24


class Container:
    """A read-only view of an ``.ansf`` container (see :func:`open_container`)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        #: Statistics: independent blocks (version 6) decoded so far, a block counted each time it is
        #: decoded (random access and :mod:`.lazy` decode only the blocks a range touches).
        self.blocks_decoded = 0
        self._count_lock = threading.Lock()
        if self.path.is_dir():
            raise ContainerError(f"{self.path}: is a directory; expected an .ansf file written by `ansforge compress`")
        # The file mapped read-only: records and streams are views of it, and decoded blocks' pages
        # are given back with madvise (:meth:`_release_blocks`).
        self._map: mmap.mmap | None = None
        try:
            if self.path.stat().st_size:
                with open(self.path, "rb") as f:
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self._data = np.frombuffer(self._map, dtype=np.uint8) if self._map is not None else b""
        except OSError as e:
            raise ContainerError(f"{self.path}: cannot read: {e.strerror or e}") from None
        self._parse()

    # -- parsing -----------------------------------------------------------------------------------
    def _fail(self, where: str, msg: str) -> ContainerError:
        return ContainerError(f"{self.path}: {where}: {msg}")

    def _bytes(self, lo: int, hi: int, where: str) -> bytes:
        if lo < 0 or hi > len(self._data) or lo > hi:
            raise self._fail(where, f"truncated (needs bytes {lo}..{hi}, file has {len(self._data)})")
        return bytes(self._data[lo:hi])

    def _truncated(self, needs: str) -> ContainerError:
        """A file cut short: the bytes it has and what needs more (``needs``)."""
        return ContainerError(f"{self.path}: truncated: the file has {len(self._data):,} bytes, {needs}")

    def _parse(self) -> None:
        start = bytes(self._data[:8])
        if start != MAGIC:
            if len(self._data) < 8 and MAGIC.startswith(start):
                raise self._truncated("its header needs 24")
            kind, what = identify(self.path)
            if kind in ("safetensors", "gguf", "llama2c"):
                what += ": `ansforge compress --model` makes a container of it"
            elif kind is None and what.startswith("it is too short"):
                what = f"it has only {len(self._data)} bytes"
            raise self._fail("header", f"not an ansforge container ({what}; bad magic); expected an .ansf file "
                                       "written by `ansforge compress`")
        if len(self._data) < 24:
            raise self._truncated("its header needs 24")
        head = bytes(self._data[:24])
        magic, version, n_t, n_s, crc = _HEADER.unpack(head)
        if crc != _crc(head[:20]):
            raise self._fail("header", "CRC32 mismatch")
        if version not in READ_VERSIONS:
            newer = version > max(READ_VERSIONS)
            raise self._fail("header", f"container version {version} is not supported: this ansforge reads versions "
                                       f"{min(READ_VERSIONS)} to {max(READ_VERSIONS)}"
                                       + (" (a newer ansforge wrote it)" if newer else ""))
        self.version = version
        if 24 + 8 * (n_t + n_s) > len(self._data):  # every record takes at least its length and CRC
            raise self._truncated(f"its {n_t} tensor and {n_s} stream records need at least {24 + 8 * (n_t + n_s):,}")
        pos = 24
        raw_records = []
        record_bytes: list[int] = []  # each record's bytes in the file (length, JSON, CRC)
        for i in range(n_t + n_s):
            # numbered from 0, as `ansforge inspect` numbers streams
            what = f"tensor {i} record" if i < n_t else f"stream {i - n_t} record"
            of = f"the {what} (of {n_t if i < n_t else n_s}, from 0)"
            if pos + 4 > len(self._data):
                raise self._truncated(f"{of} needs {pos + 4:,}")
            (length,) = struct.unpack("<I", self._bytes(pos, pos + 4, what))
            if pos + 8 + length > len(self._data):
                raise self._truncated(f"{of} needs {pos + 8 + length:,}")
            js = self._bytes(pos + 4, pos + 4 + length, what)
            (crc,) = struct.unpack("<I", self._bytes(pos + 4 + length, pos + 8 + length, what))
            if crc != _crc(js):
                if i < n_t:
                    m = _NAME_RE.search(js)
                    name = f"tensor {m.group(1).decode(errors='replace')!r} " if m else ""
                else:
                    held = [r.get("name") for r in raw_records[:n_t]
                            if isinstance(r, dict) and r.get("stream") == i - n_t]
                    name = f"tensor {held[0]!r}{f' (and {len(held) - 1} more)' if len(held) > 1 else ''} " \
                        if held else ""
                raise self._fail(f"{name}({what}), metadata block", "CRC32 mismatch")
            try:
                rec = json.loads(js)
            except (ValueError, RecursionError) as e:  # RecursionError: absurdly nested JSON
                raise self._fail(what, f"malformed JSON: {str(e)[:200]}") from None
            if not isinstance(rec, dict):
                raise self._fail(what, f"must be a JSON object, not {type(rec).__name__}")
            raw_records.append(rec)
            record_bytes.append(8 + length)
            pos += 8 + length
        self._payload = pos
        self.tensors: list[dict] = raw_records[:n_t]
        self._record_bytes = record_bytes
        self.streams: list[ContainerStream] = [self._parse_stream(si, rec) for si, rec in enumerate(raw_records[n_t:])]
        self._by_name = {}
        regions: list[tuple[int, int, str]] = [(st.offset, st.offset + st.n_words * st.word_bytes, f"stream {st.index}")
                                               for st in self.streams]
        self.file_metadata: dict[str, str] | None = None
        for i, rec in enumerate(self.tensors):
            where = f"tensor {i} record"
            name = _field(rec, "name", str, self._fail, where)
            where = f"tensor {name!r}"
            if "file_metadata" in rec:
                meta = rec["file_metadata"]
                if i:
                    raise self._fail(where, "file_metadata belongs in the first tensor record only")
                if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
                    raise self._fail(where, "file_metadata must map strings to strings")
                self.file_metadata = meta
            if "file_layout" in rec and i:
                raise self._fail(where, "file_layout belongs in the first tensor record only")
            if name in self._by_name:
                raise self._fail(where, "appears twice")
            self._by_name[name] = i
            coding = _field(rec, "coding", str, self._fail, where)
            shape = _field(rec, "shape", list, self._fail, where)
            problem = shape_problem(shape)  # the writer's own check (compress_checkpoint)
            if problem:
                raise self._fail(where, f"shape {str(shape)[:80]} has {problem}")
            size = 1
            for d in shape:
                size *= d
            if coding == "raw":
                regions.append(self._parse_raw(rec, where, size))
            elif coding == "pairs":
                self._parse_pairs(i, rec, where, size)
            else:
                raise self._fail(where, f"coding must be 'pairs' or 'raw', not {coding!r}")
        self._check_q4_0()
        self.file_layout: dict | None = None
        if self.tensors and "file_layout" in self.tensors[0]:
            self.file_layout = self._parse_file_layout(self.tensors[0]["file_layout"])
        # The payload is exactly the streams and raw tensors, back to back: every byte is accounted for,
        # bytes appended to a container are an error rather than silently ignored; a file cut short is
        # "truncated", before any field is judged against the bytes that are missing.
        expect = 0
        for lo, hi, what in sorted(regions):
            if lo != expect:
                raise self._fail(what, f"starts at payload offset {lo}, expected {expect} "
                                       f"({'overlap' if lo < expect else 'a gap'} in the payload)")
            expect = hi
        size = len(self._data) - self._payload
        if expect > size:
            raise self._truncated(f"its records describe {self._payload + expect:,}")
        if expect < size:
            raise self._fail("payload", f"{size - expect} bytes follow the last stream or tensor (appended data?)")
        for st in self.streams:
            if sum(r.count for r in st.runs) != st.n_pairs:
                raise self._fail(f"stream {st.index}", f"tensor pair counts add up to {sum(r.count for r in st.runs)}, "
                                                       f"not the stream's {st.n_pairs}")
            if st.block_pairs:
                self._parse_spans(st)
            # tANS: every pair's additional data is in the words, so a stream cannot hold more pairs than
            # its bits allow: this bounds the memory a decoder allocates by the file's size. Not so for
            # rANS, whose encoder starts from x = 0: pairs whose code and additional data are all zero
            # cost nothing there (an all-zero bias is a stream of 0 words), so only the shape bounds them.
            if not st.spec.extra_data_in_words:
                continue
            least = min((self.tensors[ti]["_code_table"].extra_bits - (int(self.tensors[ti]["_shifts"][0].max())
                                                                        if self.tensors[ti]["_shifts"] else 0)
                         for ti in st.tensors if self.tensors[ti]["n_pairs"]), default=0)
            if least * st.n_pairs > st.n_words * st.spec.word_bits:
                raise self._fail(f"stream {st.index}", f"{st.n_pairs} pairs of at least {least} bits each cannot "
                                                       f"fit in {st.n_words} {st.spec.word_bits}-bit words")

    def _parse_file_layout(self, layout: object) -> dict:
        """The first tensor record's ``file_layout``: ``index`` and ``config`` texts or null, ``shards`` null
        or the files (plain ``*.safetensors`` names) that hold every tensor exactly once."""
        where = f"tensor {self.tensors[0]['name']!r} file_layout"
        if not isinstance(layout, dict) or set(layout) != {"index", "config", "shards"}:
            raise self._fail(where, "must be an object of index, config and shards")
        for key in ("index", "config"):
            if not isinstance(layout[key], (str, type(None))):
                raise self._fail(where, f"{key} must be a text or null, not {type(layout[key]).__name__}")
        if layout["shards"] is None:
            if layout["index"] is not None:
                raise self._fail(where, "an index needs shards")
            return layout
        position = {r["name"]: k for k, r in enumerate(r for r in self.tensors if "scales_of" not in r)}
        try:
            layout_plan(layout, position)
        except ConfigError as e:
            raise self._fail(where, str(e)) from None
        return layout

    @property
    def sharded(self) -> bool:
        """Whether the container came from a sharded folder (its ``file_layout`` names the shards), which
        :meth:`decompress_folder` gives back."""
        return bool(self.file_layout and self.file_layout["shards"])

    def config_text(self) -> str | None:
        """The ``config.json`` that goes with the tensors: the source folder's as read, a llama2.c
        header's (:func:`~.checkpoint.hf_llama_config`; recorded, or implied by a legacy llama2.c
        file's tensors), or ``None``."""
        if self.file_layout is not None:
            return self.file_layout["config"]
        config = llama2c_config_of([(r["name"], r["shape"]) for r in self.tensors])
        if config is None:
            return None
        return _config_text(config, self.tensors[0]["dtype"])

    def _check_q4_0(self) -> None:
        """Each Q4_0 tensor and its scales' record name each other, and there is one scale per block."""
        for rec in self.tensors:
            if "scales" in rec:
                where = f"tensor {rec['name']!r}"
                size = int(rec["n_pairs"])
                other = self._by_name.get(rec["scales"])
                sc = self.tensors[other] if other is not None else None
                if sc is None or sc.get("scales_of") != rec["name"]:
                    raise self._fail(where, f"its scales' record {rec['scales']!r} is missing or names another tensor")
                if size % Q4_0_BLOCK or sc["shape"] != [size // Q4_0_BLOCK]:
                    raise self._fail(where, f"{size} Q4_0 weights need {size / Q4_0_BLOCK:g} scales in whole blocks, "
                                            f"its scales' record has shape {sc['shape']}")
            if "scales_of" in rec:
                owner = self._by_name.get(rec["scales_of"])
                if owner is None or self.tensors[owner].get("scales") != rec["name"]:
                    raise self._fail(f"tensor {rec['name']!r}", f"holds the scales of {rec['scales_of']!r}, "
                                                                "which does not name it")

    def _parse_stream(self, si: int, rec: dict) -> ContainerStream:
        where = f"stream {si} record"
        codec = _field(rec, "codec", dict, self._fail, where)
        try:
            spec = Codec.from_json(codec)
        except AnsforgeError as e:
            raise self._fail(where, str(e)) from None
        try:
            canonical = parse_codec(spec.name)
        except ConfigError:
            canonical = None
        if canonical != spec and spec not in LEGACY_CODECS:
            raise self._fail(where, f"codec {str(codec)[:200]} is not one that ansforge writes")
        if spec.states > 1 and self.version < VERSION_STATES:
            raise self._fail(where, f"codec {spec.name} interleaves {spec.states} states, which needs container "
                                    f"version {VERSION_STATES}, not {self.version}")
        # Bounded by what a file could hold, not by this file: a file cut short is reported as truncated
        # once every record is read (Container._parse), not as a field out of range.
        limit = MAX_PAYLOAD
        n_words = _field(rec, "n_words", int, self._fail, where, 0, limit)
        word_bytes = _field(rec, "word_bytes", int, self._fail, where)
        if word_bytes != word_dtype(spec.word_bits).itemsize:
            raise self._fail(where, f"word_bytes = {word_bytes} does not hold {spec.word_bits}-bit words")
        n_pairs = _field(rec, "n_pairs", int, self._fail, where, 0, 1 << 48)
        offset = _field(rec, "payload_offset", int, self._fail, where, 0, limit)
        # Version 6 holds only block streams; from version 7 (which a model- or tensor-layout file with an
        # implied spread has too) a stream record is a block stream when it gives block_pairs.
        if self.version == VERSION_BLOCKS or (self.version >= VERSION_SPREADS and "block_pairs" in rec):
            return self._parse_block_stream(si, rec, where, spec, n_pairs, n_words, word_bytes, offset)
        if "block_pairs" in rec:
            raise self._fail(where, f"field 'block_pairs' needs container version {VERSION_BLOCKS}, not {self.version}")
        interval = _field(rec, "checkpoint_interval", int, self._fail, where, 0, MAX_PAIRS)
        cps = _field(rec, "checkpoints", list, self._fail, where)
        if len(cps) > n_pairs:
            raise self._fail(where, f"{len(cps)} checkpoints for {n_pairs} pairs")
        state_limit, N = 1 << spec.state_bits, spec.states
        checkpoints, last = [], 0
        for c in cps:
            # One state: [pair, word, bit, state]; N > 1 states: [pair, word, bit, [s0, ..., s_{N-1}]].
            if not (isinstance(c, list) and len(c) == 4 and all(_is_int(v) for v in c[:3])
                    and (_is_int(c[3]) if N == 1 else isinstance(c[3], list) and all(_is_int(v) for v in c[3]))):
                raise self._fail(where, f"checkpoint {str(c)[:80]} is not [pair, word, bit, "
                                        + ("state]" if N == 1 else f"[{N} states]]"))
            pair, word, bit, state = c
            if N > 1 and len(state) != N:
                raise self._fail(where, f"checkpoint {str(c)[:80]} holds {len(state)} states, codec {spec.name} "
                                        f"has {N}")
            # Checkpoints lie strictly inside the stream, in increasing order, and fit the coder; a
            # decoder started from one is then bounded by the pair counts (pair = -2**31 once ran forever).
            if not (last < pair < n_pairs and 0 <= word <= n_words and 0 <= bit < spec.word_bits
                    and (bit == 0 or (spec.checkpoint_mid_word and word < n_words))
                    and all(0 <= v < state_limit for v in (state if N > 1 else [state]))):
                raise self._fail(where, f"checkpoint {str(c)[:120]} does not fit a stream of {n_pairs} pairs and "
                                        f"{n_words} words" + (" (checkpoints must increase)" if pair <= last else ""))
            last = pair
            checkpoints.append(Checkpoint(pair, word, bit, tuple(state) if N > 1 else state))
        if interval and (len(checkpoints) != (n_pairs - 1) // interval if n_pairs else checkpoints) \
                or any(c.pair != (k + 1) * interval for k, c in enumerate(checkpoints)):
            raise self._fail(where, f"checkpoints are not every checkpoint_interval = {interval} pairs")
        blocks = _field(rec, "blocks", list, self._fail, where)
        ranges = block_ranges(n_words, checkpoints)
        if len(blocks) != len(ranges) or not all(
                isinstance(b, list) and len(b) == 3 and all(_is_int(v) for v in b) and tuple(b[:2]) == r
                and 0 <= b[2] <= 0xFFFFFFFF for b, r in zip(blocks, ranges)):
            if self.version != 1:
                raise self._fail(where, "CRC blocks do not match the checkpoints' word ranges")
            if not all(isinstance(b, list) and len(b) == 3 and all(_is_int(v) for v in b)
                       and 0 <= b[0] <= b[1] <= n_words and 0 <= b[2] <= 0xFFFFFFFF for b in blocks) \
                    or len(blocks) != len(ranges):
                raise self._fail(where, "CRC blocks are malformed")
        return ContainerStream(si, spec, n_pairs, n_words, word_bytes, offset, checkpoints, [tuple(b) for b in blocks])

    def _parse_block_stream(self, si: int, rec: dict, where: str, spec: Codec, n_pairs: int, n_words: int,
                            word_bytes: int, offset: int) -> ContainerStream:
        """A version-6 stream record: ``block_pairs`` and ``blocks`` ``[n_words, crc]``, the blocks' words
        back to back from address 0; their pairs are checked once the tensors are read (:meth:`_parse_spans`)."""
        for key in ("checkpoints", "checkpoint_interval"):
            if key in rec:
                raise self._fail(where, f"field {key!r} has no place in a version-{self.version} stream (its "
                                        "independent blocks are the random-access points)")
        block_pairs = _field(rec, "block_pairs", int, self._fail, where, 1, MAX_PAIRS)
        blocks = _field(rec, "blocks", list, self._fail, where)
        if len(blocks) > n_pairs:
            raise self._fail(where, f"{len(blocks)} blocks for {n_pairs} pairs")
        ranges, word = [], 0
        for b, blk in enumerate(blocks):
            if not (isinstance(blk, list) and len(blk) == 2 and all(_is_int(v) for v in blk)
                    and 0 <= blk[0] <= n_words and 0 <= blk[1] <= 0xFFFFFFFF):
                raise self._fail(where, f"block {b} {str(blk)[:60]} is not [n_words, crc32]")
            ranges.append((word, word + blk[0], blk[1]))
            word += blk[0]
        if word != n_words:
            raise self._fail(where, f"blocks hold {word} words, the stream {n_words}")
        return ContainerStream(si, spec, n_pairs, n_words, word_bytes, offset, [], ranges, block_pairs=block_pairs)

    def _parse_spans(self, st: ContainerStream) -> None:
        """A version-6 stream's blocks against its tensors' pairs (:func:`~.stream.block_spans`)."""
        counts = [int(self.tensors[ti]["n_pairs"]) for ti in st.tensors]
        want = sum(-(-n // st.block_pairs) for n in counts)
        if want != len(st.blocks):
            raise self._fail(f"stream {st.index}", f"{len(st.blocks)} blocks, but its tensors' {sum(counts)} pairs "
                                                   f"make {want} blocks of at most {st.block_pairs} pairs")
        st.spans = [Block(lo, n, w_lo, w_hi - w_lo, crc, st.tensors[t])
                    for (t, lo, n), (w_lo, w_hi, crc) in zip(block_spans(counts, st.block_pairs), st.blocks)]

    def _parse_raw(self, rec: dict, where: str, size: int) -> tuple[int, int, str]:
        dtype = _field(rec, "dtype", str, self._fail, where)
        if dtype not in ITEMSIZE:
            raise self._fail(where, f"dtype {dtype!r} is not one of {', '.join(ITEMSIZE)}")
        limit = MAX_PAYLOAD
        offset = _field(rec, "payload_offset", int, self._fail, where, 0, limit)
        nbytes = _field(rec, "nbytes", int, self._fail, where, 0, limit)
        if nbytes != size * ITEMSIZE[dtype]:
            raise self._fail(where, f"nbytes = {nbytes}, but shape {rec['shape']} of {dtype} needs {size * ITEMSIZE[dtype]}")
        blocks = _field(rec, "blocks", list, self._fail, where)
        want = [(o, min(nbytes, o + RAW_BLOCK_BYTES)) for o in range(0, nbytes, RAW_BLOCK_BYTES)]
        if len(blocks) != len(want) or not all(
                isinstance(b, list) and len(b) == 3 and all(_is_int(v) for v in b) and tuple(b[:2]) == w
                and 0 <= b[2] <= 0xFFFFFFFF for b, w in zip(blocks, want)):
            raise self._fail(where, "CRC blocks do not cover the tensor's bytes")
        return offset, offset + nbytes, where

    def _parse_pairs(self, i: int, rec: dict, where: str, size: int) -> None:
        fmt_name = _field(rec, "pair_format", str, self._fail, where)
        if fmt_name not in FORMATS:
            raise self._fail(where, f"pair_format {fmt_name!r} is not one of {', '.join(FORMATS)}")
        fmt = FORMATS[fmt_name]
        if "scale" in rec:  # an fp8 tensor converted with a per-tensor scale
            sc = rec["scale"]
            if fmt_name not in FP8_FORMATS or isinstance(sc, bool) or not isinstance(sc, (int, float)) \
                    or not (0 < sc < float("inf")) or float(np.float32(sc)) != sc:
                raise self._fail(where, f"scale {str(sc)[:40]} must be a positive finite float32 of an fp8 tensor")
        if (fmt_name == "q4_0") != ("scales" in rec) or ("scales" in rec and not isinstance(rec["scales"], str)):
            raise self._fail(where, "a q4_0 tensor, and only one, names the record of its scales ('scales')")
        if (fmt_name == "q4_0_scale") != ("scales_of" in rec) or ("scales_of" in rec and not isinstance(rec["scales_of"], str)):
            raise self._fail(where, "a q4_0_scale tensor, and only one, names the Q4_0 tensor it scales ('scales_of')")
        if _field(rec, "dtype", str, self._fail, where) != _STORAGE[fmt_name]:
            raise self._fail(where, f"dtype {rec['dtype']!r} is not the storage of pair format {fmt_name}")
        plan = None
        if "context" in rec:
            # A context plan (version 4): the pairs are in the plan's folded format, so the exponent
            # table and the code table's extra width below are checked against that format.
            if self.version < 4:
                raise self._fail(where, f"field 'context' needs container version 4, not {self.version}")
            if fmt_name not in PAIR_FORMATS:  # plans fold mantissa bits: IEEE float pairs only
                raise self._fail(where, f"a context plan needs a {', '.join(PAIR_FORMATS)} tensor, not {fmt_name}")
            try:
                plan, fold = plan_from_record(rec["context"], rec["shape"],
                                              # codes index a 16-bit exponent table (CodingPairs.exponents)
                                              min(fmt.mantissa_bits, 16 - fmt.exponent_bits))
            except ConfigError as e:
                raise self._fail(where, str(e)) from None
            fmt = folded_format(fmt, fold)
        rec["_fmt"] = fmt
        for key in ("conversion",):
            _field(rec, key, str, self._fail, where)
        if not isinstance(rec.get("ideal_bits", 0.0), (int, float)) or isinstance(rec.get("ideal_bits"), bool):
            raise self._fail(where, f"ideal_bits must be a number, not {rec['ideal_bits']!r}")
        exps = _field(rec, "exponents", list, self._fail, where)
        if len(exps) > 1 << fmt.exponent_bits or not all(
                _is_int(e) and 0 <= e < 1 << fmt.exponent_bits for e in exps) or sorted(set(exps)) != exps:
            raise self._fail(where, f"exponents must be strictly increasing {fmt.exponent_bits}-bit fields")
        si = _field(rec, "stream", int, self._fail, where, 0, len(self.streams) - 1)
        st = self.streams[si]
        n_pairs = _field(rec, "n_pairs", int, self._fail, where, 0, 1 << 48)
        if n_pairs != size:
            raise self._fail(where, f"n_pairs = {n_pairs}, but shape {rec['shape']} holds {size} values")
        first = _field(rec, "first_pair", int, self._fail, where, 0, 1 << 48)
        if first != st.coded_pairs:
            raise self._fail(where, "tensor pairs are not contiguous in their stream")
        try:
            ct = CodeTable.from_json(_field(rec, "code_table", dict, self._fail, where))
        except AnsforgeError as e:
            raise self._fail(where, str(e)) from None
        if ct.precision_bits != st.spec.precision_bits or ct.extra_bits != (fmt.extra_bits if size else 0) \
                or (size and max(ct.direct_codes + ct.escape_codes) >= len(exps)):
            raise self._fail(where, f"code table (precision {ct.precision_bits}, extra {ct.extra_bits} bits) does "
                                    f"not fit codec {st.spec.name}, pair format {fmt_name} and {len(exps)} exponents")
        rec["_code_table"] = ct
        rec["_shifts"] = None
        rec["_plan"] = plan
        t_lo, r_lo = len(st.tables), len(st.runs)
        self._parse_tables(i, rec, where, st, ct, plan, fmt, size, n_pairs)
        st.coded_pairs += n_pairs  # its runs cover its pairs (a running sum: no pass over the runs per tensor)
        st.tensor_tables[i] = (t_lo, len(st.tables))
        st.tensor_runs[i] = (r_lo, len(st.runs))

    def _parse_tables(self, i: int, rec: dict, where: str, st: ContainerStream, ct: CodeTable, plan, fmt, size: int,
                      n_pairs: int) -> None:
        """A coded tensor's tables and runs (its one table, its row shifts' variants or its context
        plan's sets), appended to its stream's."""
        if plan is not None:
            if "row_shifts" in rec:
                raise self._fail(where, "a tensor with a context plan cannot have row_shifts")
            self._parse_context(rec, where, st, ct, plan, i)
            st.tensors.append(i)
            return
        try:
            table = st.spec.table_from_record(ct, lambda key: _field(rec, key, str, self._fail, where))
        except (ValueError, binascii.Error) as e:  # ConfigError is a ValueError too
            raise self._fail(where, f"coder table is inconsistent: {e}") from None
        st.tensors.append(i)
        if "row_shifts" not in rec:
            st.runs.append(Run(len(st.tables), n_pairs))
            st.tables.append(table)
            st.table_owner.append((i, 0))
            return
        shifts = _field(rec, "row_shifts", list, self._fail, where)
        rows = int(rec["shape"][0]) if len(rec["shape"]) >= 2 else 1
        if self.version < 3 or not size or not shifts or len(shifts) > rows or not all(
                isinstance(r, list) and len(r) == 2 and all(_is_int(v) for v in r) and r[0] >= 1
                and 0 <= r[1] <= fmt.mantissa_bits for r in shifts) or sum(r[0] for r in shifts) != rows:
            raise self._fail(where, f"row_shifts must be [rows, z] runs covering its {rows} rows with z from 0 to "
                                    f"{fmt.mantissa_bits} (version 3 and later)")
        per_row = size // rows
        try:
            variants = _shifted_tables(st.spec, ct, table, [z for _, z in shifts])
        except ValueError as e:
            raise self._fail(where, f"row_shifts do not fit the code table: {e}") from None
        index = {}
        for z, t in variants.items():
            index[z] = len(st.tables)
            st.tables.append(t)
            st.table_owner.append((i, z))
        st.runs.extend(Run(index[z], r * per_row) for r, z in shifts)
        rec["_shifts"] = (np.repeat(np.asarray([z for _, z in shifts], np.int64), [r for r, _ in shifts]), per_row)

    def _parse_context(self, rec: dict, where: str, st: "ContainerStream", ct: CodeTable, plan: ContextPlan,
                       index: int) -> None:
        """The table sets of a context record (one frequency list, and for tANS the spread, per set, on
        the code table's alphabet) and the runs its selects give, appended to ``st``."""
        ctx = rec["context"]
        sets = _field(ctx, "sets", list, self._fail, where + " context")
        if len(sets) != plan.n_sets:
            raise self._fail(where, f"context sets holds {len(sets)} table sets, n_sets is {plan.n_sets}")
        tables = []
        for k, entry in enumerate(sets):
            what = f"{where} context set {k}"
            if not isinstance(entry, dict):
                raise self._fail(what, f"must be an object, not {type(entry).__name__}")
            freqs = _field(entry, "freqs", list, self._fail, what)
            implied = st.spec.kind == "tans" and "tans_symbols" not in entry
            if implied and self.version < VERSION_SPREADS:
                raise self._fail(what, f"a table set without its spread ('tans_symbols') needs container version "
                                       f"{VERSION_SPREADS}, not {self.version}")
            try:
                ct_k = CodeTable(ct.direct_codes, ct.escape_codes, ct.extra_bits, tuple(freqs), ct.precision_bits)
                if implied:  # the spread its frequencies imply: fse, or tuned to f/L (version 7)
                    spread = _field(entry, "tans_spread", str, self._fail, what)
                    if spread not in ("fse", "tuned"):
                        raise ConfigError(f"tans_spread {spread[:40]!r} is not fse or tuned")
                    table = st.spec.coder_table(ct_k, spread=spread)
                    table.stored_spread = False
                    tables.append(table)
                    continue
                tables.append(st.spec.table_from_record(ct_k, lambda key: _field(entry, key, str, self._fail, what)))
            except (ValueError, TypeError, binascii.Error) as e:  # ConfigError is a ValueError too
                raise self._fail(what, f"table set is inconsistent: {e}") from None
        # A column plan is one run per group in every row: bound the runs by the file's size before
        # building them, so that a crafted shape (rANS pairs of zeros cost no words) cannot make the
        # reader allocate without limit. Real plans stay far below (MiniLM: < 0.1 run per byte).
        rows, cols = rec["shape"]
        n_runs = -(-rows // plan.group) if plan.axis == "rows" else rows * -(-cols // plan.group)
        if n_runs > 16 * len(self._data) + 16:
            raise self._fail(where, f"context plan makes {n_runs} runs, more than a {len(self._data)}-byte file "
                                    "can describe")
        first = len(st.tables)
        st.tables.extend(tables)
        st.table_owner.extend((index, 0) for _ in tables)
        st.runs.extend(plan.runs((rows, cols), first_table=first))

    # -- access ------------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [r["name"] for r in self.tensors]

    def record(self, name: str) -> dict:
        if name not in self._by_name:
            raise ConfigError(f"{self.path}: no tensor named {name!r}")
        return self.tensors[self._by_name[name]]

    def code_table(self, record: dict) -> CodeTable:
        """The :class:`CodeTable` (codes ↔ symbols, extra widths) of a tensor coded as pairs, given its
        :meth:`record`."""
        if record.get("coding") != "pairs":
            raise ConfigError(f"{self.path}: tensor {record.get('name')!r} is stored raw, it has no code table")
        return record["_code_table"]

    # -- streams -----------------------------------------------------------------------------------
    def stream_words(self, stream: ContainerStream) -> np.ndarray:
        """The coded words of ``stream`` (one of :attr:`streams`), in file order: a read-only view of the
        file, ``uint8`` … ``uint64`` as the stream's word width (its CRCs are not checked here)."""
        return self._words(stream)

    def decode_stream(self, stream: ContainerStream, start: int = 0,
                      count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``start .. start+count-1`` of ``stream`` (all from ``start`` when ``count`` is ``None``),
        decoded from the nearest checkpoint at or before ``start`` by the golden decoder.

        Returns ``(symbols, extras)`` as coded: the additional data of a tensor with row shifts lacks its
        rows' zero bits, which :meth:`join` restores. The CRCs of the blocks read are checked; a corrupt
        stream raises :class:`ContainerError` naming the tensor and block.
        """
        count = stream.n_pairs - start if count is None else count
        if start < 0 or count < 0 or start + count > stream.n_pairs:
            raise ConfigError(f"{self.path}: range {start}..{start + count} is outside stream {stream.index} "
                              f"of {stream.n_pairs} pairs")
        return self._decode(stream, start, count)

    def join(self, record: dict, symbols: np.ndarray, extras: np.ndarray, start: int = 0) -> np.ndarray:
        """Decoded pairs of a tensor → its values' bit patterns (flat, the dtype's unsigned integers).

        ``record`` is the tensor's :meth:`record`; ``symbols`` and ``extras`` are its pairs ``start ..``
        (counted from the tensor's first pair) as :meth:`decode_stream` or a decoder core gives them.
        The tensor's row shifts are restored and its code table maps each symbol back to its code.
        """
        return self._join(record, symbols, _unshift(record, extras, start))

    def _words(self, st: ContainerStream) -> np.ndarray:
        lo = self._payload + st.offset
        dt = np.dtype({1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}[st.word_bytes])
        hi = lo + st.n_words * st.word_bytes
        if hi > len(self._data):
            self._bytes(lo, hi, f"stream {st.index}")  # raises: truncated
        return np.asarray(self._data[lo:hi]).view(dt) if hi > lo else np.zeros(0, dt)  # a view of the mapping

    def _tensor_at(self, st: ContainerStream, pair: int) -> str:
        for ti in st.tensors:
            first, count = int(self.tensors[ti]["first_pair"]), int(self.tensors[ti]["n_pairs"])
            if first <= pair < first + count or (count == 0 and first == pair):
                return self.tensors[ti]["name"]
        return self.tensors[st.tensors[-1]]["name"] if st.tensors else "?"

    # -- independent blocks (version 6) ------------------------------------------------------------
    def _block_where(self, st: ContainerStream, b: int) -> str:
        blk = st.spans[b]
        first = int(self.tensors[blk.tensor]["first_pair"])
        return (f"tensor {self.tensors[blk.tensor]['name']!r} block {b} (stream {st.index}, its pairs "
                f"{blk.pair - first}..{blk.pair - first + blk.count}, words {blk.word}..{blk.word + blk.n_words})")

    def _verify_block(self, st: ContainerStream, b: int) -> None:
        """Independent block ``b``'s CRC (once per container)."""
        if b in st.verified:
            return
        lo, hi, crc = st.blocks[b]
        if block_crc(self._words(st), lo, hi) != crc:
            raise self._fail(self._block_where(st, b), "CRC32 mismatch")
        st.verified.add(b)

    def _block_tables(self, st: ContainerStream, b: int) -> tuple[list, list[Run], int, int]:
        """Block ``b``'s tables (its tensor's), its runs over them, and the tensor's tables' index range."""
        blk = st.spans[b]
        t_lo, t_hi = st.tensor_tables[blk.tensor]
        r_lo, r_hi = st.tensor_runs[blk.tensor]
        first = int(self.tensors[blk.tensor]["first_pair"])
        return st.tables[t_lo:t_hi], clip_runs(st.runs[r_lo:r_hi], blk.pair - first, blk.count, t_lo), t_lo, t_hi

    def block_tables(self, stream: ContainerStream, b: int) -> tuple[list, list[Run]]:
        """The coder tables of independent block ``b`` of a version-6 ``stream`` (its tensor's: one, its
        row shifts' variants or its context plan's sets) and the block's runs over them: with
        :meth:`block_words`, everything a decoder needs for that block."""
        if not stream.block_pairs:
            raise ConfigError(f"{self.path}: stream {stream.index} has no independent blocks (container version "
                              f"{self.version}); its blocks are CRC ranges between checkpoints")
        tables, runs, _, _ = self._block_tables(stream, b)
        return tables, runs

    def _release_blocks(self, st: ContainerStream, blocks: Sequence[int]) -> None:
        """Tell the kernel that the mapped pages of these decoded blocks' words are not needed again
        soon: a whole-model decode would otherwise keep every page of the container it has read resident
        (8.96 GB of 9 GB for a 7B model). The pages are file-backed and read-only, so a later read just
        maps them in again; where ``madvise`` is missing (not Linux or BSD), nothing is done."""
        mm = self._map
        if not blocks or mm is None or not hasattr(mm, "madvise"):
            return
        lo = self._payload + st.offset + min(st.blocks[b][0] for b in blocks) * st.word_bytes
        hi = self._payload + st.offset + max(st.blocks[b][1] for b in blocks) * st.word_bytes
        start = -(-lo // mmap.PAGESIZE) * mmap.PAGESIZE     # only pages wholly inside the blocks
        end = hi // mmap.PAGESIZE * mmap.PAGESIZE
        if end > start:
            try:
                mm.madvise(mmap.MADV_DONTNEED, start, end - start)
            except (OSError, ValueError):
                pass

    def block_words(self, stream: ContainerStream, b: int) -> np.ndarray:
        """The words of independent block ``b`` of a version-6 ``stream`` (its own address 0 first, as
        the encoder pushed them): a complete stream that a decoder (a core: one command, ``resume = 0``,
        ``count`` = the block's pairs, its CRC) decodes alone with its tensor's tables."""
        lo, hi, _ = stream.blocks[b]
        return self._words(stream)[lo:hi]

    def _decode_block(self, st: ContainerStream, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Every pair of independent block ``b`` (symbols and additional data as coded), its end check
        and CRC checked; a failure names the tensor and the block (its CRC first, when that fails)."""
        blk = st.spans[b]
        tables, runs, t_lo, _ = self._block_tables(st, b)
        words = self.block_words(st, b)
        try:
            if fastans.supported(st.spec):
                if not isinstance(st.prepared, dict):
                    st.prepared = {}
                prepared = st.prepared.get(t_lo)
                if prepared is None:
                    prepared = st.prepared[t_lo] = fastans.PreparedTables(st.spec, tables)
                s, e, _ = fastans.decode(st.spec, words, tables, runs, 0, blk.count, None, prepared)
            else:
                s, e, _ = st.spec.coder().decode(words.tolist(), tables, runs, 0, blk.count, None)
        except StreamError as exc:
            self._verify_block(st, b)
            raise self._fail(self._block_where(st, b), str(exc)) from None
        self._verify_block(st, b)
        self._count_block()
        return s, e

    def _count_block(self) -> None:
        with self._count_lock:
            self.blocks_decoded += 1

    def _joins(self, st: ContainerStream, t_lo: int, t_hi: int) -> list[tuple]:
        """The values decoder's join per table ``t_lo .. t_hi - 1`` of ``st`` (:func:`fastans.decode_values`):
        its owner tensor's code table and exponents, and its row shift."""
        return [(self.tensors[i]["_code_table"], self.tensors[i]["exponents"], z) for i, z in st.table_owner[t_lo:t_hi]]

    def _block_value_bits(self, st: ContainerStream, b: int) -> np.ndarray:
        """Independent block ``b`` decoded to its tensor's value bit patterns: the native values decoder
        where it applies, else its pairs joined (which names any error)."""
        blk = st.spans[b]
        rec = self.tensors[blk.tensor]
        if rec["pair_format"] != "q4_0" and fastans.supported(st.spec):
            tables, runs, t_lo, t_hi = self._block_tables(st, b)
            joins = self._joins(st, t_lo, t_hi)
            vals = fastans.decode_values(st.spec, self.block_words(st, b), tables, runs, [], joins, rec["_fmt"], 1)
            if vals is not None:
                self._verify_block(st, b)
                self._count_block()
                return vals
        s, e = self._decode_block(st, b)
        start = blk.pair - int(rec["first_pair"])
        e = _unshift(rec, e, start)
        bits = fastpairs.join_values(rec["_code_table"], rec["exponents"], rec["_fmt"], s, e) \
            if fastans.supported(st.spec) and rec["pair_format"] != "q4_0" else None
        return bits if bits is not None else self._join(rec, s.astype(np.int64), e.astype(np.uint64))

    def _group_values(self, st: ContainerStream, group: list[int], blocks_of: dict[int, list[int]],
                      threads: int) -> dict[int, np.ndarray] | None:
        """Tensors ``group`` (consecutive in ``st``, at least one pair each) as value bit patterns, every
        block of theirs in one native call (:func:`fastans.decode_values` with ``blocks``: their tables
        prepared once, the blocks side by side in the kernel), the blocks' CRCs checked; ``None`` where
        that path does not apply or a block fails (the caller then decodes block by block, which names
        the error)."""
        recs = [self.tensors[ti] for ti in group]
        fmt = recs[0]["_fmt"]
        if not fastans.supported(st.spec) or any(r["pair_format"] == "q4_0" or r["_fmt"] != fmt for r in recs):
            return None
        t_lo, t_hi = st.tensor_tables[group[0]][0], st.tensor_tables[group[-1]][1]
        r_lo, r_hi = st.tensor_runs[group[0]][0], st.tensor_runs[group[-1]][1]
        bs = [b for ti in group for b in blocks_of.get(ti, ())]  # ``blocks_of``: each tensor's blocks, in order
        if not bs or bs != list(range(bs[0], bs[0] + len(bs))):
            return None
        first = st.spans[bs[0]].pair
        w_lo = st.blocks[bs[0]][0]
        blocks = [(st.blocks[b][0] - w_lo, st.blocks[b][1] - w_lo, st.spans[b].pair - first,
                   st.spans[b].pair - first + st.spans[b].count) for b in bs]
        runs = [Run(r.table - t_lo, r.count) for r in st.runs[r_lo:r_hi]]
        joins = self._joins(st, t_lo, t_hi)
        words = self._words(st)[w_lo:st.blocks[bs[-1]][1]]
        vals = fastans.decode_values(st.spec, words, st.tables[t_lo:t_hi], runs, [], joins, fmt, threads, blocks)
        if vals is None:
            return None
        for b in bs:
            self._verify_block(st, b)
            self._count_block()
        out, a = {}, 0
        for ti, r in zip(group, recs):
            n = int(r["n_pairs"])
            out[ti] = vals[a:a + n]
            a += n
        return out

    def _block_values_source(self, st: ContainerStream, threads: int | None, pools: list) -> Callable[[int], np.ndarray]:
        """A version-6 stream's tensors as value bit patterns: ``get(tensor index)`` → its flat array.

        Consecutive tensors of one pair format are decoded together, up to :data:`VALUES_GROUP_PAIRS`
        pairs a group (one native call, the blocks side by side on ``threads`` threads), when the first
        of them is asked for: a model's blocks cost one call per group, not one each, and the memory
        held is one group's values. Where that path does not apply (or a block fails, to name the error)
        each tensor's blocks are decoded one by one: with one thread when the tensor is asked for; with
        more, every block is given at once, in stream order, to a pool of ``threads`` threads (appended
        to ``pools``, for the caller to shut down), so that the caller writes a tensor while the later
        ones decode."""
        n = kernels.default_threads() if threads is None else max(1, int(threads))
        groups: list[list[int]] = [[]]
        for ti in st.tensors:
            if int(self.tensors[ti]["n_pairs"]) == 0:
                continue
            if groups[-1] and sum(int(self.tensors[t]["n_pairs"]) for t in groups[-1]) \
                    + int(self.tensors[ti]["n_pairs"]) > VALUES_GROUP_PAIRS:
                groups.append([])
            groups[-1].append(ti)
        group_of = {ti: g for g in groups for ti in g}
        blocks_of: dict[int, list[int]] = {}
        for b, blk in enumerate(st.spans):
            blocks_of.setdefault(blk.tensor, []).append(b)
        ready: dict[int, np.ndarray] = {}
        tried: set[int] = set()
        per_block = self._per_block_source(st, n, pools)

        def get(ti: int) -> np.ndarray:
            if ti in ready:
                return ready.pop(ti)
            g = group_of.get(ti)
            if g is not None and g[0] not in tried:
                tried.add(g[0])
                got = self._group_values(st, g, blocks_of, n)
                if got is not None:
                    self._release_blocks(st, [b for t in g for b in blocks_of.get(t, ())])
                    ready.update(got)
                    return ready.pop(ti)
            return per_block(ti)
        return get

    def _per_block_source(self, st: ContainerStream, n: int, pools: list) -> Callable[[int], np.ndarray]:
        """:meth:`_block_values_source`'s block-by-block path (the pool starts on the first call)."""
        by_tensor: dict[int, list[int]] = {}
        for b, blk in enumerate(st.spans):
            by_tensor.setdefault(blk.tensor, []).append(b)
        out: dict[int, np.ndarray] = {}

        def alloc(ti: int) -> None:
            if len(by_tensor.get(ti, ())) != 1:
                out[ti] = np.empty(int(self.tensors[ti]["n_pairs"]), np.dtype(self.tensors[ti]["_fmt"].bits_dtype))

        def job(b: int) -> None:
            blk = st.spans[b]
            vals = self._block_value_bits(st, b)
            if len(by_tensor[blk.tensor]) == 1:
                out[blk.tensor] = vals  # a tensor of one block: its array as decoded, no copy
            else:
                a = blk.pair - int(self.tensors[blk.tensor]["first_pair"])
                out[blk.tensor][a:a + blk.count] = vals

        if n == 1:
            def get(ti: int) -> np.ndarray:
                alloc(ti)
                for b in by_tensor.get(ti, ()):
                    job(b)
                return out.pop(ti)
            return get
        started: list[ThreadPoolExecutor] = []

        def get_async(ti: int) -> np.ndarray:
            # Only the tensors the grouped path left come here (unusual formats, or an error to name):
            # their blocks go to the pool one tensor at a time.
            if not started:
                started.append(ThreadPoolExecutor(max_workers=n))
                pools.append(started[0])
            alloc(ti)
            for f in [started[0].submit(job, b) for b in by_tensor.get(ti, ())]:
                f.result()
            return out.pop(ti)
        return get_async

    def _decode_span(self, st: ContainerStream, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``start .. start+count-1`` of a version-6 stream: each block they touch decoded whole."""
        ss, es = [], []
        b = int(np.searchsorted([blk.pair for blk in st.spans], start, side="right")) - 1 if st.spans else 0
        end = start + count
        while count and b < len(st.spans) and st.spans[b].pair < end:
            blk = st.spans[b]
            s, e = self._decode_block(st, b)
            a, z = max(start, blk.pair) - blk.pair, min(end, blk.pair + blk.count) - blk.pair
            ss.append(s[a:z])
            es.append(e[a:z])
            b += 1
        if not ss:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        return np.concatenate(ss), np.concatenate(es)

    def _verify_blocks(self, st: ContainerStream, words: np.ndarray, lo_addr: int, hi_addr: int) -> None:
        raw = None
        for b, (lo, hi, crc) in enumerate(st.blocks):
            if b in st.verified or not (lo < hi_addr and hi > lo_addr):
                continue
            if self.version == 1:
                raw = words.tobytes() if raw is None else raw
                ok = _crc(raw[lo * st.word_bytes:hi * st.word_bytes]) == crc
            else:
                ok = block_crc(words, lo, hi) == crc
            if not ok:
                pair = st.checkpoints[b - 1].pair if b else 0
                raise self._fail(f"tensor {self._tensor_at(st, pair)!r} block {b} (stream {st.index}, words {lo}..{hi})",
                                 "CRC32 mismatch")
            st.verified.add(b)

    def _decode(self, st: ContainerStream, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        if st.block_pairs:
            return self._decode_span(st, start, count)
        words = self._words(st)
        cp = None
        for c in st.checkpoints:
            if c.pair <= start:
                cp = c
        top = cp.word + (1 if cp and cp.bit else 0) if cp else st.n_words
        try:
            if fastans.supported(st.spec):
                if st.prepared is None:
                    st.prepared = fastans.PreparedTables(st.spec, st.tables)
                s, e, after = fastans.decode(st.spec, words, st.tables, st.runs, start, count, cp, st.prepared)
            else:
                if st.word_list is None:
                    st.word_list = words.tolist()
                s, e, after = st.spec.coder().decode(st.word_list, st.tables, st.runs, start, count, cp)
        except StreamError as exc:
            self._verify_blocks(st, words, 0, top)
            raise self._fail(f"tensor {self._tensor_at(st, start)!r} (stream {st.index})", str(exc)) from None
        self._verify_blocks(st, words, after.word, top)
        return s, e

    def read(self, name: str) -> np.ndarray:
        """The tensor's stored bit patterns (or raw values), shaped, in the container's dtype: ``uint8``
        patterns for fp8, the 4-bit values ``q`` (``uint8``, 0..15, weight order) for a Q4_0 tensor,
        whose ``NAME:scales`` record reads as the blocks' fp16 patterns (``uint16``)."""
        rec = self.record(name)
        return self.read_range(name, 0, None).reshape(rec["shape"])

    def read_range(self, name: str, start: int, count: int | None) -> np.ndarray:
        """Values ``start .. start+count-1`` of the flattened tensor (bit patterns for float tensors)."""
        rec = self.record(name)
        n = int(np.prod(rec["shape"], dtype=np.int64))
        count = n - start if count is None else count
        if start < 0 or count < 0 or start + count > n:
            raise ConfigError(f"{self.path}: range {start}..{start + count} is outside tensor {name!r} of {n} values")
        if rec["coding"] == "raw":
            item = ITEMSIZE[rec["dtype"]]
            lo = self._payload + int(rec["payload_offset"])
            data = self._bytes(lo, lo + int(rec["nbytes"]), f"tensor {name!r}")
            for b, (o, hi, crc) in enumerate(rec["blocks"]):
                if _crc(data[o:hi]) != crc:
                    raise self._fail(f"tensor {name!r} block {b}", "CRC32 mismatch")
            return np.frombuffer(data[start * item:(start + count) * item], dtype=_RAW_NUMPY.get(rec["dtype"], f"V{item}"))
        st = self.streams[int(rec["stream"])]
        if st.block_pairs and count:  # version 6: the blocks the range lies in, each decoded to values
            return self._block_range(st, int(rec["first_pair"]) + start, count)
        s, e = self._decode(st, int(rec["first_pair"]) + start, count)
        return self._join(rec, s, _unshift(rec, e, start))

    def _block_range(self, st: ContainerStream, start: int, count: int) -> np.ndarray:
        """Values of stream pairs ``start .. start+count-1`` (one tensor's) of a version-6 stream: each
        block they touch decoded whole to values (:meth:`_block_value_bits`), then cut to the range."""
        b = int(np.searchsorted([blk.pair for blk in st.spans], start, side="right")) - 1
        end, parts = start + count, []
        while b < len(st.spans) and st.spans[b].pair < end:
            blk = st.spans[b]
            if blk.count:
                vals = self._block_value_bits(st, b)
                parts.append(vals[max(start, blk.pair) - blk.pair:min(end, blk.pair + blk.count) - blk.pair])
            b += 1
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _join(self, rec: dict, symbols: np.ndarray, extras: np.ndarray) -> np.ndarray:
        """Decoded symbols of a tensor → its values' bit patterns (flat), through its code table."""
        codes, extra = rec["_code_table"].from_symbols(symbols, extras)
        exps = np.asarray(rec["exponents"], dtype=np.uint16)
        if codes.size and int(codes.max()) >= exps.size:
            raise self._fail(f"tensor {rec['name']!r}", "decoded code outside the tensor's exponent table")
        fmt = rec["_fmt"]
        pairs = CodingPairs(codes.astype(np.uint16), extra.astype(np.uint32),
                            np.full(exps.size, fmt.extra_bits, np.uint8), exps, (codes.size,))
        return fmt.join(pairs).ravel()

    def decode_range(self, name: str, start: int, count: int) -> np.ndarray:
        """Random access: values ``start .. start+count-1`` of tensor ``name``, decoded from the nearest
        checkpoint at or before ``start`` (bit patterns of the tensor's dtype)."""
        return self.read_range(name, start, count)

    def _decode_all(self, st: ContainerStream, threads: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Every pair of a stream, its segments between checkpoints decoded on ``threads`` threads; all
        of its blocks' CRCs checked (a failed decode reports the corrupt block when there is one)."""
        if st.block_pairs:
            parts = _map(lambda b: self._decode_block(st, b), range(len(st.spans)),
                         kernels.default_threads() if threads is None else max(1, int(threads)))
            if not parts:
                return np.zeros(0, np.int64), np.zeros(0, np.uint64)
            return np.concatenate([s for s, _ in parts]), np.concatenate([e for _, e in parts])
        if not fastans.supported(st.spec):
            return self._decode(st, 0, st.n_pairs)
        words = self._words(st)
        try:
            s, e = fastans.decode_segments(st.spec, words, st.tables, st.runs, st.checkpoints, threads, compact=True)
        except StreamError as exc:
            self._verify_blocks(st, words, 0, st.n_words)
            raise self._fail(f"tensor {self._tensor_at(st, 0)!r} (stream {st.index})", str(exc)) from None
        self._verify_blocks(st, words, 0, st.n_words)
        return s, e

    def _decode_values(self, st: ContainerStream, threads: int | None) -> np.ndarray | None:
        """Every value of a stream's tensors (their bit patterns, in stream order) in one native pass
        (:func:`fastans.decode_values`), its blocks' CRCs checked; ``None`` where that path does not
        apply (then the pairs are decoded and joined per tensor, which also names any error)."""
        if len(st.table_owner) != len(st.tables) or not st.tables or not fastans.supported(st.spec):
            return None
        recs = [self.tensors[i] for i, _ in st.table_owner]
        fmts = {(r["_fmt"].extra_bits, r["_fmt"].mantissa_bits, r["_fmt"].total_bits, np.dtype(r["_fmt"].bits_dtype))
                for r in recs}
        if len(fmts) != 1 or any(r["pair_format"] == "q4_0" for r in recs):
            return None
        joins = self._joins(st, 0, len(st.tables))
        words = self._words(st)
        vals = fastans.decode_values(st.spec, words, st.tables, st.runs, st.checkpoints, joins, recs[0]["_fmt"],
                                     threads)
        if vals is not None:
            self._verify_blocks(st, words, 0, st.n_words)
        return vals

    def arrays(self, threads: int | None = 1) -> Iterator[tuple[str, np.ndarray]]:
        """Every tensor as :meth:`decompress` writes it, in record order: ``(name, flat array)`` (its
        safetensors dtype; ``uint8`` bytes for a raw tensor and for a Q4_0 tensor's blocks; bf16 as its
        ``uint16`` bit patterns), decoded as ``decompress``
        decodes them (a version-6 stream's tensors grouped into native calls on ``threads`` threads,
        every block's CRC checked) without writing a file."""
        pools: list[ThreadPoolExecutor] = []
        try:
            outputs, _ = self._outputs(threads, pools)
            for (name, _, _), fill in outputs:
                chunks = [np.asarray(c).ravel() for c in fill()]
                yield name, chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
        finally:
            for pool in pools:
                pool.shutdown(wait=True, cancel_futures=True)

    def decompress(self, out: str | os.PathLike[str], threads: int | None = 1) -> int:
        """Write every tensor to a safetensors file (atomically), bit-exact; ``threads`` threads decode
        each stream's checkpoint segments (``None``: one per CPU).

        fp8 tensors are written as ``F8_E4M3``/``F8_E5M2``; one converted with a per-tensor scale also
        gets a float32 scalar ``NAME_scale`` (dequantized weight = fp8 × scale; vLLM's convention), so
        the file is the fp8 checkpoint that was coded, not a re-widened approximation. A GGUF Q4_0
        tensor is written as its exact GGUF bytes, ``U8`` of shape ``(blocks, 18)`` (safetensors has no
        Q4_0 type); the metadata key ``ansforge.q4_0`` maps each such name to its weights' shape.
        Returns the number of tensors written."""
        pools: list[ThreadPoolExecutor] = []
        try:
            outputs, meta = self._outputs(threads, pools)
            write_safetensors(out, [spec for spec, _ in outputs], lambda index, name: outputs[index][1](), metadata=meta)
        finally:
            for pool in pools:
                pool.shutdown(wait=True, cancel_futures=True)
        return len(outputs)

    def decompress_folder(self, folder: str | os.PathLike[str], threads: int | None = 1) -> list[str]:
        """Write a container of a sharded folder (:attr:`sharded`) back as that folder: the same shard files
        holding the same tensors in the same order, each with its own metadata, the index and
        ``config.json`` as they were read (:func:`~.checkpoint.write_sharded` with the recorded layout; an
        fp8 tensor's ``NAME_scale`` joins its tensor's shard, and the index is then rebuilt). Each file is
        written atomically; returns the shard files' names."""
        if not self.sharded:
            raise ConfigError(f"{self.path}: not the container of a sharded folder (it has no shard layout); "
                              "decompress it to one .safetensors file")
        pools: list[ThreadPoolExecutor] = []
        try:
            outputs, _ = self._outputs(threads, pools)
            layout = json.loads(json.dumps(self.file_layout))
            shard_of = {n: s for s in layout["shards"] for n in s["tensors"]}
            for (name, _, _), _ in outputs:
                if name not in shard_of and name.endswith(FP8_SCALE_SUFFIX):
                    owner = shard_of[name[:-len(FP8_SCALE_SUFFIX)]]
                    owner["tensors"].insert(owner["tensors"].index(name[:-len(FP8_SCALE_SUFFIX)]) + 1, name)
            return write_sharded(folder, [spec for spec, _ in outputs], lambda index, name: outputs[index][1](),
                                 layout=layout)
        finally:
            for pool in pools:
                pool.shutdown(wait=True, cancel_futures=True)

    def _outputs(self, threads: int | None, pools: list) -> tuple[list, dict]:
        """What :meth:`decompress` writes: ``[((name, dtype, shape), fill), ...]`` in record order (``fill()``
        yields the tensor's arrays) and the file's metadata; a pool of decoding threads is appended to
        ``pools`` for the caller to shut down."""
        decoded: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        as_values: dict[int, object] = {}

        def stream_pairs(st: ContainerStream):
            if st.index not in decoded:
                decoded[st.index] = self._decode_all(st, threads)
            return decoded[st.index]

        def values(rec: dict) -> np.ndarray:
            st = self.streams[int(rec["stream"])]
            a, n = int(rec["first_pair"]), int(rec["n_pairs"])
            if st.block_pairs:  # version 6: the blocks on the threads, while the tensors before are written
                if st.index not in as_values:
                    as_values[st.index] = self._block_values_source(st, threads, pools)
                return as_values[st.index](self._by_name[rec["name"]])
            if st.index not in as_values:
                as_values[st.index] = self._decode_values(st, threads)
            if as_values[st.index] is not None:
                return as_values[st.index][a:a + n]
            s_all, e_all = stream_pairs(st)
            s, e = s_all[a:a + n], _unshift(rec, e_all[a:a + n], 0)
            bits = fastpairs.join_values(rec["_code_table"], rec["exponents"], rec["_fmt"], s, e) \
                if fastans.supported(st.spec) and rec["pair_format"] != "q4_0" else None
            if bits is None:  # the golden path (it also names a code outside the tables)
                bits = self._join(rec, s.astype(np.int64), e.astype(np.uint64))
            return bits

        def fill_record(rec: dict):
            if rec["coding"] == "raw":
                yield np.frombuffer(self.read_range(rec["name"], 0, None).tobytes(), np.uint8)
            elif rec["pair_format"] == "q4_0":
                yield q4_0_join(values(rec), values(self.record(rec["scales"])))
            elif rec["pair_format"] in FP8_FORMATS:
                yield values(rec).astype(np.uint8)
            else:
                bits = values(rec)
                yield bits.view(SUPPORTED_DTYPES[rec["dtype"]]) if rec["dtype"] != "BF16" else bits

        outputs: list[tuple[tuple[str, str, tuple], Callable]] = []
        q4 = {}
        for r in self.tensors:
            if "scales_of" in r:
                continue  # written inside its Q4_0 tensor's blocks
            if r["coding"] == "pairs" and r["pair_format"] == "q4_0":
                q4[r["name"]] = r["shape"]
                n_blocks = int(r["n_pairs"]) // Q4_0_BLOCK
                outputs.append(((r["name"], "U8", (n_blocks, Q4_0_BLOCK_BYTES)), lambda r=r: fill_record(r)))
                continue
            outputs.append(((r["name"], r["dtype"], tuple(r["shape"])), lambda r=r: fill_record(r)))
            if "scale" in r:
                outputs.append(((r["name"] + FP8_SCALE_SUFFIX, "F32", ()),
                                lambda r=r: iter([np.asarray([r["scale"]], np.float32)])))
        names = [spec[0] for spec, _ in outputs]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise self._fail(f"tensor {dup!r}", "is also the name of another tensor's scale in the output")
        # the source file's metadata as it was; a file without any (GGUF, llama2.c) gets a provenance note
        meta = dict(self.file_metadata) if self.file_metadata is not None else \
            {"ansforge": "decompressed from " + self.path.name}
        if q4:
            meta["ansforge.q4_0"] = json.dumps(q4, separators=(",", ":"))
        return outputs, meta

    def plan_text(self, record: dict) -> str:
        """A tensor's context plan in a few characters: ``kind axis/group xSETS +mFOLD`` (``-`` without)."""
        plan = record.get("_plan")
        if plan is None:
            return "-"
        return f"{record['context']['kind']} {plan.axis}/{plan.group} x{plan.n_sets} +m{record['context']['fold']}"

    def side_bits(self, record: dict) -> int:
        """Side information of a coded tensor, packed as :func:`~.context.side_bits` counts it from its
        record: the code→exponent table (``exponents``, each a field of the pair format's exponent
        width, folded bits included), one ``precision_bits`` frequency per symbol and table set, the
        selects and the plan header; and every tANS spread the record stores (a plain record's, a set's
        ``tans_symbols``), ``2^R`` slots of ``ceil(log2 n_symbols)`` bits each (a spread a set's
        frequencies imply is not stored, version 7). A tensor without a context plan is one set without
        selects."""
        ct, fmt = record["_code_table"], record["_fmt"]
        plan = record.get("_plan")
        sets = record["context"]["sets"] if plan else [record]
        spreads = sum(1 for t in sets if "tans_symbols" in t)
        spread_bits = (1 << ct.precision_bits) * max(1, math.ceil(math.log2(max(2, ct.n_symbols))))
        return side_bits(len(record["exponents"]), fmt.exponent_bits, plan.n_sets if plan else 1, ct.n_symbols,
                         ct.precision_bits, len(plan.selects) if plan else 0) + spreads * spread_bits

    def tensor_bits(self, name: str) -> dict:
        """What a coded tensor alone in its stream (``--stream-per-tensor``) or in its own blocks (the
        blocks layout) costs in this file: ``stream_bits`` (its stream's or blocks' words as stored),
        ``checkpoint_bits`` (32 + 8 + state bits each; none in the blocks layout), ``side_bits``
        (:meth:`side_bits`), ``record_bytes`` (its JSON record with length and CRC)."""
        rec = self.record(name)
        if rec["coding"] != "pairs":
            raise ConfigError(f"{self.path}: tensor {name!r} is stored raw, it has no stream")
        st = self.streams[int(rec["stream"])]
        if st.block_pairs:
            i = self._by_name[name]
            return {"stream_bits": sum(b.n_words for b in st.spans if b.tensor == i) * st.word_bytes * 8,
                    "checkpoint_bits": 0, "side_bits": self.side_bits(rec),
                    "record_bytes": self._record_bytes[i]}
        if len(st.tensors) != 1:
            raise ConfigError(f"{self.path}: tensor {name!r} shares stream {st.index} with {len(st.tensors) - 1} "
                              "other tensors; its own bits need one stream per tensor (--stream-per-tensor)")
        return {"stream_bits": st.n_words * st.word_bytes * 8,
                "checkpoint_bits": len(st.checkpoints) * (40 + st.spec.state_bits),
                "side_bits": self.side_bits(rec), "record_bytes": self._record_bytes[self._by_name[name]]}

    def summary(self) -> dict:
        bits = sum(st.n_words * st.word_bytes * 8 + len(st.checkpoints) * (40 + st.spec.states * st.spec.state_bits)
                   for st in self.streams)
        ideal = sum(float(r.get("ideal_bits", 0.0)) for r in self.tensors if r["coding"] == "pairs")
        pairs = sum(st.n_pairs for st in self.streams)
        return {"tensors": len(self.tensors), "streams": len(self.streams), "pairs": pairs, "bits": bits,
                "ideal_bits": ideal, "gap": bits / ideal - 1 if ideal else 0.0,
                "bits_per_pair": bits / pairs if pairs else 0.0, "bytes": len(self._data)}

    def formats(self) -> dict[str, dict]:
        """:func:`format_sizes` of this container's tensors (its streams' bits shared out by ideal bits)."""
        return format_sizes(self.tensors, [st.n_words * st.word_bytes * 8 + len(st.checkpoints) * (40 + st.spec.state_bits)
                                           for st in self.streams])

    def inspect(self) -> str:
        """A human-readable listing: streams, codecs, checkpoints, and per tensor its alphabet and size."""
        s = self.summary()
        lines = [f"{self.path}: ansforge container v{self.version}, {s['tensors']} tensors, {s['streams']} stream(s), "
                 f"{s['bytes']:,} bytes",
                 f"coded pairs {s['pairs']:,}: {s['bits_per_pair']:.4f} bits/pair, "
                 f"{100 * s['gap']:+.4f}% vs ideal (final state and checkpoints included)"]
        for st in self.streams:
            cut = f"{len(st.blocks)} independent blocks of at most {st.block_pairs:,} pairs" if st.block_pairs else \
                f"{len(st.checkpoints)} checkpoints, {len(st.blocks)} CRC blocks"
            lines.append(f"stream {st.index}: {st.spec.name} {st.spec.to_json()}, {st.n_pairs:,} pairs, "
                         f"{st.n_words:,} words, {cut}")
        lines += format_lines(self.formats())
        lines.append(f"{'tensor':40s} {'shape':>14s} {'dtype':>5s} {'coding':>8s} {'codes':>5s} {'esc':>3s} "
                     f"{'spread':>6s} {'context plan':>18s}  conversion")
        for r in self.tensors:
            shape = "x".join(map(str, r["shape"])) or "scalar"
            if r["coding"] == "pairs":
                ct = r["_code_table"]
                lines.append(f"{r['name'][:40]:40s} {shape:>14s} {r['dtype']:>5s} {r['pair_format']:>8s} "
                             f"{ct.n_codes:5d} {len(ct.escape_codes):3d} {r.get('tans_spread', '-'):>6s} "
                             f"{self.plan_text(r):>18s}  {r['conversion']}")
            else:
                lines.append(f"{r['name'][:40]:40s} {shape:>14s} {r['dtype']:>5s} {'raw':>8s}")
        return "\n".join(lines)


#: Published figure the fp8 rows are compared with: entropy-coded fp8 exponents save up to ~27 %.
PUBLISHED_FP8_SAVING = 0.27
_RAW_UNIT = {"e4m3": "1-byte fp8", "e5m2": "1-byte fp8", "q4_0": "18-byte/32-weight Q4_0"}


def format_lines(formats: dict[str, dict]) -> list[str]:
    """One line per pair format of :func:`format_sizes`: bits per weight and the stored fraction of
    its raw storage (fp8 and Q4_0 against the published fp8 saving of up to ~27 %)."""
    lines = []
    for name, f in formats.items():
        raw = _RAW_UNIT.get(name, f"{FORMATS[name].total_bits}-bit {name}")
        line = (f"format {name}: {f['tensors']} tensors, {f['weights']:,} weights, {f['bits_per_weight']:.4f} "
                f"bits/weight, {100 * f['fraction']:.2f}% of the raw {raw} storage "
                f"(saves {100 * (1 - f['fraction']):.2f}%")
        if name in FP8_FORMATS:
            line += f"; published fp8 figure: up to ~{100 * PUBLISHED_FP8_SAVING:.0f}%"
        lines.append(line + ")")
    return lines


def _unshift(rec: dict, extras: np.ndarray, start: int) -> np.ndarray:
    """Additional data of pairs ``start ..`` of a tensor with their rows' zero mantissa bits restored."""
    if not rec.get("_shifts"):
        return extras
    z_row, per_row = rec["_shifts"]
    z = z_row[np.arange(start, start + extras.size, dtype=np.int64) // per_row].astype(extras.dtype)
    return extras << z


def open_container(path: str | os.PathLike[str]) -> Container:
    """Open and validate a container's header and records (payload blocks are checked when decoded)."""
    return Container(path)
