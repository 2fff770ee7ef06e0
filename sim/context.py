"""Context-table jobs: a matrix coded with several table sets, run through the extended cores.

One job per matrix of a :class:`~ansforge.model.coding.context.ContextCoded`: the matrix's table sets are
written through ``cfg`` as sets ``0 .. sets-1`` of a programmable core built with ``table_sets >= sets``;
the decoder gets the matrix's runs on ``sel`` and the encoder gets each pair's set in its payload.
The expected words and pairs come from the golden coder on the same tables and runs, so the core
must switch table sets exactly where the golden model does, without losing a cycle.
"""

from __future__ import annotations

import numpy as np

from ..hdl.common import DecodeStatus
from ..model.coding.context import ContextCoded
from ..model.coding.stream import block_crc
from .jobs import CoreJob, build_core, cfg_writes, code_block
from .streams import pack, pairs_to_payloads, payload_shape

__all__ = ["context_core", "context_matrix_job", "matrix_slices"]


def matrix_slices(coded: ContextCoded) -> list[tuple[int, int, int]]:
    """Per matrix: (first pair, pair count, first table) in the coded stream."""
    out, pos, tab = [], 0, 0
    for shape, plan in zip(coded.shapes, coded.plans):
        n = shape[0] * shape[1]
        out.append((pos, n, tab))
        pos += n
        tab += plan.n_sets
    return out


def context_core(kind: str, coded: ContextCoded, *, max_symbols: int = 64, max_extra_bits: int | None = None):
    """A programmable ``kind`` core with enough table sets (a power of two) for every matrix."""
    k = max(p.n_sets for p in coded.plans)
    sets = 1 << max(1, (k - 1).bit_length())
    extra = max_extra_bits if max_extra_bits is not None else max(8, max(int(t.extra_bits.max()) for t in coded.tables))
    return build_core(kind, coded.spec, programmable=True, max_symbols=max_symbols, max_extra_bits=extra,
                      table_sets=sets)


def context_matrix_job(kind: str, coded: ContextCoded, index: int, core) -> CoreJob:
    """The job of matrix ``index`` on ``core`` (from :func:`context_core`), checked against the
    golden coder of that matrix's tables and runs."""
    first, n, tab = matrix_slices(coded)[index]
    plan, shape = coded.plans[index], coded.shapes[index]
    tables = coded.tables[tab:tab + plan.n_sets]
    runs = plan.runs(shape)
    sy = coded.symbols[first:first + n]
    ex = coded.extras[first:first + n]
    words = code_block(coded.spec, tables, runs, sy, ex)
    dec = kind.endswith("decoder")
    pair_shape, word_shape = payload_shape(core, "o" if dec else "i"), payload_shape(core, "i" if dec else "o")
    pairs = pairs_to_payloads(pair_shape, sy, ex)
    w = np.asarray(words, dtype=np.uint64)
    job = CoreJob(kind, core, cfg=cfg_writes(core, tables), pairs=n, words=int(w.size))
    if dec:
        job.commands = [pack(payload_shape(core, "cmd"), {"count": n, "words": int(w.size), "resume": 0, "check_end": 1,
                                                   "check_crc": 1,
                                                   "crc": block_crc(np.asarray(words), word_bits=coded.spec.word_bits)})]
        job.inputs = (w << np.uint64(word_shape["data"].offset))[::-1].copy()
        sel_shape = payload_shape(core, "sel")
        job.side = {"sel": [pack(sel_shape, {"set": r.table, "count": r.count}) for r in runs]}
        job.expected = pairs
        job.expected_status = [DecodeStatus.OK.value]
    else:
        set_of = np.repeat(np.asarray([r.table for r in runs], dtype=np.uint64),
                           np.asarray([r.count for r in runs], dtype=np.int64))
        with_set = pairs | (set_of << np.uint64(pair_shape["set"].offset))
        last = np.zeros(w.size, dtype=np.uint64)
        last[-1:] = 1
        job.commands = [pack(payload_shape(core, "cmd"), {"count": n})]
        job.inputs = with_set[::-1].copy()
        job.expected = (w << np.uint64(word_shape["data"].offset)) | (last << np.uint64(word_shape["last"].offset))
    return job
