"""Simulation jobs for the coding-pair interface cores (§4.3, Figs. 9–11).

Each builder returns a :class:`~.jobs.CoreJob` whose stimulus is the values or pairs, whose ``cfg``
writes come from the table object of :mod:`ansforge.model.dtypes.interfaces`, and whose expected output is
that table's ``apply`` (the golden model), so that both engines check the core against it.
:func:`float_round_trip` runs whole tensors FloatToPair → PairToFloat, the second core fed with
the pairs the first one gave.
"""

from __future__ import annotations

import numpy as np

from ..hdl.interfaces import FixedToPair, FloatToPair, PairToFixed, PairToFloat
from ..model.errors import AnsforgeError
from ..model.dtypes.interfaces import (CodingPairFormat, FixedToPairTable, FloatToPairTable, PairToFixedTable,
                                PairToFloatTable)
from .jobs import CoreJob
from .streams import pack, pairs_to_payloads, payload_shape, payloads_to_pairs

__all__ = ["interface_cfg", "pair_to_float_job", "pair_to_fixed_job", "float_to_pair_job", "fixed_to_pair_job",
           "pack_pairs", "unpack_interface_pairs", "float_round_trip", "InterfaceMismatch"]


class InterfaceMismatch(AnsforgeError):
    """A simulated interface core gave other values than its golden model."""



def interface_cfg(core, table) -> dict[str, list[int]]:
    """The packed ``cfg`` writes that load ``table`` (its ``writes()``) into an interface core."""
    shape = payload_shape(core, "cfg")
    return {"cfg": [pack(shape, w) for w in table.writes()]}


def pack_pairs(core, port: str, codes: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """Pairs as the payload bits of ``core``'s pair port ``port`` (``uint64``)."""
    return pairs_to_payloads(payload_shape(core, port), codes, extra)


def unpack_interface_pairs(core, outputs) -> tuple[np.ndarray, np.ndarray]:
    """(codes, extra) of a FloatToPair/FixedToPair core's ``o`` payloads."""
    return payloads_to_pairs(payload_shape(core, "o"), outputs)


def _job(kind: str, core, table, inputs: np.ndarray, expected: np.ndarray) -> CoreJob:
    job = CoreJob(kind, core, cfg=interface_cfg(core, table))
    job.inputs = np.asarray(inputs, dtype=np.uint64)
    job.expected = np.asarray(expected, dtype=np.uint64)
    job.pairs = int(job.inputs.size)
    return job


def pair_to_float_job(table: PairToFloatTable, codes, extra, core: PairToFloat | None = None, **kw) -> CoreJob:
    """Pairs through :class:`PairToFloat` (``kw``: core parameters), expecting ``table.apply``."""
    core = core or PairToFloat(target=table.target.name, max_codes=kw.get("max_codes", max(64, len(table.entries))),
                               max_extra_bits=kw.get("max_extra_bits", table.max_extra_bits), table=None)
    return _job("pair-to-float", core, table, pack_pairs(core, "i", codes, extra), table.apply(codes, extra))


def pair_to_fixed_job(table: PairToFixedTable, codes, extra, core: PairToFixed | None = None, **kw) -> CoreJob:
    """Pairs through :class:`PairToFixed`, expecting ``table.apply``."""
    core = core or PairToFixed(fixed=table.fixed, max_codes=kw.get("max_codes", max(64, len(table.entries))),
                               max_extra_bits=kw.get("max_extra_bits", table.max_extra_bits))
    return _job("pair-to-fixed", core, table, pack_pairs(core, "i", codes, extra), table.apply(codes, extra))


def float_to_pair_job(table: FloatToPairTable, values, core: FloatToPair | None = None, **kw) -> CoreJob:
    """Float values (or bit patterns) through :class:`FloatToPair`, expecting ``table.apply``."""
    core = core or FloatToPair(source=table.source.name, max_codes=kw.get("max_codes", max(64, len(table.format))),
                               max_extra_bits=kw.get("max_extra_bits", int(table.format.extra_bits.max())))
    bits = table.source.as_bits(values).ravel()
    codes, extra = table.apply(bits)
    return _job("float-to-pair", core, table, bits, pack_pairs(core, "o", codes, extra))


def fixed_to_pair_job(table: FixedToPairTable, words, core: FixedToPair | None = None, **kw) -> CoreJob:
    """Fixed-point words (signed ints or ``width``-bit patterns) through :class:`FixedToPair`."""
    core = core or FixedToPair(fixed=table.fixed, max_codes=kw.get("max_codes", max(64, len(table.format))),
                               max_extra_bits=kw.get("max_extra_bits", int(table.format.extra_bits.max())))
    w = np.asarray(words).ravel()
    bits = table.fixed.to_words(w) if w.dtype.kind == "i" else w.astype(np.uint64)
    codes, extra = table.apply(bits)
    return _job("fixed-to-pair", core, table, bits, pack_pairs(core, "o", codes, extra))


def _run_checked(engine, job: CoreJob, what: str, **kw):
    res = engine.run(job, **kw)
    ok, errs = job.check(res)
    if not ok:
        raise InterfaceMismatch(f"{what}: {job.kind}: " + "; ".join(errs))
    return res


def float_round_trip(values: np.ndarray, fmt_name: str, engine, *, name: str = "tensor",
                     cores: dict | None = None, **kw) -> int:
    """``values`` (one tensor, stored as ``fmt_name``: ``"bf16"`` bit patterns or float32) through
    FloatToPair then PairToFloat, with the tensor's own code→exponent table; the second core takes
    the pairs the first one gave. Raises :class:`InterfaceMismatch` unless the pairs equal the golden
    model's and the floats come back bit-exact. ``cores`` caches one core of each kind (built for 256
    codes, so every table fits and Verilator compiles each once). Returns the clock cycles spent."""
    from ..model.dtypes.pairs import PAIR_FORMATS
    pf = PAIR_FORMATS[fmt_name]
    bits = pf.as_bits(np.asarray(values)).ravel()
    exps = np.flatnonzero(pf.exponent_histogram(bits)).astype(np.uint16)
    fmt = CodingPairFormat.ieee(fmt_name, exps)
    cores = cores if cores is not None else {}
    k = pf.extra_bits
    if ("f2p", fmt_name) not in cores:
        cores["f2p", fmt_name] = FloatToPair(source=fmt_name, max_codes=256, max_extra_bits=k)
        cores["p2f", fmt_name] = PairToFloat(target=fmt_name, max_codes=256, max_extra_bits=k)
    f2p, p2f = cores["f2p", fmt_name], cores["p2f", fmt_name]
    job1 = float_to_pair_job(FloatToPairTable(fmt, fmt_name), bits, core=f2p)
    res1 = _run_checked(engine, job1, name, **kw)
    codes, extra = unpack_interface_pairs(f2p, res1.outputs)
    table = PairToFloatTable(fmt, fmt_name, max_extra_bits=k)
    job2 = pair_to_float_job(table, codes, extra, core=p2f)
    if not np.array_equal(job2.expected, bits.astype(np.uint64)):
        raise InterfaceMismatch(f"{name}: the golden PairToFloat does not give the {fmt_name} values back")
    res2 = _run_checked(engine, job2, name, **kw)
    return res1.cycles + res2.cycles
