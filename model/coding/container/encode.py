"""Tensors' coding pairs into one coded stream: their tables, row shifts and, per layout, independent
blocks or checkpoints (:func:`encode_tensors`), bit-exact with the golden coders.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..codecs import Codec
from .. import fastans, fastpairs
from ..codetable import CodeTable
from ..context import ContextPlan, context_tables, set_counts
from ...errors import ConfigError
from ...dtypes.pairs import CodingPairs
from ..probability import ideal_bits
from ..stream import Block, Run, block_crc, block_spans, clip_runs, word_dtype
from .pools import process_map, thread_map
from .records import CodedStream, CodedTensor, DEFAULT_CHECKPOINT_INTERVAL


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


def shifted_tables(spec: Codec, ct: CodeTable, base, widths: list[int]) -> dict[int, object]:
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


def _tables_of(job: tuple) -> tuple | ConfigError:
    """``spec.tables(counts, extra_bits)`` for ``job = (spec, counts, extra_bits)``, or the ConfigError it
    raised (a worker process's part of :func:`encode_tensors`)."""
    spec, counts, extra_bits = job
    try:
        return spec.tables(counts, extra_bits)
    except ConfigError as exc:
        return exc


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
        counted_all = thread_map(counted, plain, threads)
        tabled = process_map(_tables_of, [(spec, c, k) for c, k in counted_all], threads)
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

    prepared = thread_map(prepare, range(len(items)), threads)
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
            variants = shifted_tables(spec, ct, table, [zz for _, zz in rle])
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

    thread_map(fill, range(len(items)), threads)
    if not block_pairs:
        stream = fastans.encode(spec, tables, runs, sy, ex, checkpoint_interval) if compact \
            else spec.coder().encode(tables, runs, sy, ex, checkpoint_interval)
        return CodedStream(spec, coded, stream.words, stream.checkpoints, pos, checkpoint_interval or 0, runs, tables)

    kernel_tables: dict[int, fastans.PreparedTables] = {}  # per tensor, shared by its blocks

    def encode_block(span: tuple[int, int, int]) -> np.ndarray:
        """One independent block: its tensor's tables and its share of the tensor's runs, coded alone."""
        ti, lo, n = span
        t_lo, t_hi, r_lo, r_hi = spans_of[ti]
        sub, bruns = tables[t_lo:t_hi], clip_runs(runs[r_lo:r_hi], lo - firsts[ti], n, t_lo)
        s, e = sy[lo:lo + n], ex[lo:lo + n]
        if compact:
            # Two threads may build a tensor's tables at once; both builds are the same, either is kept.
            p = kernel_tables.get(ti)
            if p is None:
                p = kernel_tables[ti] = fastans.PreparedTables(spec, sub)
            done = fastans.encode(spec, sub, bruns, s, e, 0, prepared=p)
        else:
            done = spec.coder().encode(sub, bruns, s, e, 0)
        return done.words, block_crc(done.words)

    spans = block_spans([int(p.codes.size) for _, p in items], block_pairs)
    # Largest blocks first, so that the threads finish together; the words go back in stream order.
    order = sorted(range(len(spans)), key=lambda b: -spans[b][2])
    coded_blocks = dict(zip(order, thread_map(encode_block, [spans[b] for b in order], threads)))
    parts = [coded_blocks[b][0] for b in range(len(spans))]
    blocks, word = [], 0
    for b, (ti, lo, n) in enumerate(spans):
        nw = int(parts[b].size)
        blocks.append(Block(lo, n, word, nw, int(coded_blocks[b][1]), ti))
        word += nw
    words = np.concatenate(parts) if parts else np.zeros(0, word_dtype(spec.word_bits))
    return CodedStream(spec, coded, words.astype(word_dtype(spec.word_bits), copy=False), [], pos, 0, runs, tables,
                       blocks, block_pairs)
