"""Context tables: several probability tables per matrix, beyond the paper's one (extends §2.1, §4.2).

The paper codes every code of a matrix with one table. Weights are not identically distributed
inside a matrix: rows (output channels) differ in scale, so a row's exponent histogram is narrower
than the matrix's. A **context plan** (:class:`ContextPlan`) cuts the matrix into groups of
``group`` consecutive rows (``axis="rows"``) or columns (``axis="cols"``), and gives each group one of
``sets`` **table sets**; each set is a probability table over the matrix's one code alphabet. The
encoder chooses axis, group size, ``sets`` and the selects (:func:`plan_context`), and everything it
chose is charged to the stream (:class:`ContextCost`):

* the shared code→exponent table, ``n_codes · code_field_bits``;
* per table set, one frequency of ``precision_bits`` per symbol of the alphabet;
* the selects, ``ceil(log2 sets)`` bits per group, and a 24-bit header (axis, group, sets).

Optionally the top mantissa bit is **folded** into the code (:func:`folded_format`): the pair format
``E + f`` "exponent" bits and ``M - f`` mantissa bits of the same bit pattern, so a code is an
(exponent, top mantissa bit) pair. Inside a binade, weights near the bottom are more frequent than
near the top (the density falls with the magnitude), which the folded code captures.

The coded stream is an ordinary golden stream (:mod:`.stream`) whose **runs** switch table set: pairs
in row-major order, a run per group (row groups are contiguous; a column group is one run per row).
A decoder core holds the ``sets`` table sets at once and switches on a select stream of runs; an encoder core
takes the set with each pair (:mod:`ansforge.hdl`): neither loses a cycle at a switch. Runs work with any
number of interleaved states (pair ``j`` with state ``j mod N``, whatever its set).

In a container (``compress --context``) a set's tables are built by :func:`context_tables` with
``container=True``: the alphabet of least cost over the sets (:func:`sets_alphabet`) and a tANS spread
stored only where it pays its record bytes (:func:`set_table`); the container keeps a matrix's plan only
where the matrix costs fewer bytes with it than with one table (``_split_tensor`` in :mod:`.container`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import fastans
from .codecs import Codec
from .codetable import CodeTable, optimal_quantizer
from ..errors import ConfigError
from ..dtypes.pairs import CodingPairs, IeeeFloatPairs
from .stream import Run

__all__ = ["folded_format", "ContextPlan", "ContextCost", "ContextCoded", "plan_context", "group_counts",
           "context_tables", "set_counts", "cluster_sets", "encode_context", "decode_context", "plan_record", "plan_from_record",
           "side_bits", "set_table", "sets_alphabet", "spread_is_stored", "spread_record_bytes", "AXES", "GROUPS", "HEADER_BITS", "MAX_SETS", "PLAN_KINDS"]

AXES = ("rows", "cols")
#: Table sets a plan may use (a core's ``table_sets`` is a power of two up to this).
MAX_SETS = 16
#: Plan kinds a container's ``context`` record may name (:func:`plan_from_record`). A new kind adds
#: an entry here and its ``params`` → runs mapping; the record's layout does not change.
PLAN_KINDS = ("groups",)
#: Stream header of a plan: axis (1 bit), group size (16 bits), sets - 1 (4 bits), fold (3 bits).
HEADER_BITS = 24


def folded_format(fmt: IeeeFloatPairs, fold: int) -> IeeeFloatPairs:
    """``fmt`` with its top ``fold`` mantissa bits moved into the code (same bit patterns)."""
    if isinstance(fold, bool) or not isinstance(fold, (int, np.integer)) or not 0 <= fold <= fmt.mantissa_bits:
        raise ConfigError(f"fold must be between 0 and {fmt.mantissa_bits} mantissa bits, not {fold!r}")
    if fold == 0:
        return fmt
    return IeeeFloatPairs(f"{fmt.name}+m{fold}", fmt.exponent_bits + fold, fmt.mantissa_bits - fold)


@dataclass(frozen=True)
class ContextPlan:
    """Which table set codes each group of a ``rows × cols`` matrix (see the module docstring)."""

    axis: str
    group: int
    n_sets: int
    selects: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.axis not in AXES:
            raise ConfigError(f"context axis must be one of {', '.join(AXES)}, not {self.axis!r}")
        if not 1 <= self.group <= 65535:
            raise ConfigError(f"context group must be between 1 and 65535 rows/columns, not {self.group!r}")
        if not 1 <= self.n_sets <= MAX_SETS:
            raise ConfigError(f"context n_sets must be between 1 and {MAX_SETS}, not {self.n_sets!r}")
        if any(not 0 <= s < self.n_sets for s in self.selects):
            raise ConfigError(f"context selects must be table sets 0..{self.n_sets - 1}")

    @classmethod
    def single(cls, shape: tuple[int, int]) -> "ContextPlan":
        """The paper's plan: one table for the whole matrix."""
        return cls("rows", max(1, shape[0]), 1, (0,))

    @property
    def select_bits(self) -> int:
        return len(self.selects) * math.ceil(math.log2(self.n_sets)) if self.n_sets > 1 else 0

    def group_of(self, shape: tuple[int, int]) -> np.ndarray:
        """Group index of every weight, row-major (int64, ``rows × cols``)."""
        rows, cols = shape
        if self.axis == "rows":
            g = np.arange(rows) // self.group
            return np.repeat(g[:, None], cols, axis=1)
        g = np.arange(cols) // self.group
        return np.repeat(g[None, :], rows, axis=0)

    def runs(self, shape: tuple[int, int], first_table: int = 0) -> list[Run]:
        """Runs over the pairs in row-major order; table ``first_table + select``; equal neighbours merged."""
        rows, cols = shape
        sel = np.asarray(self.selects, dtype=np.int64)
        n_groups = -(-(rows if self.axis == "rows" else cols) // self.group)
        if sel.size != n_groups:
            raise ConfigError(f"context plan has {sel.size} selects for {n_groups} groups of a {rows}×{cols} matrix")
        if self.axis == "rows":
            counts = np.minimum(self.group, rows - np.arange(n_groups) * self.group) * cols
            tables = sel
        else:
            width = np.minimum(self.group, cols - np.arange(n_groups) * self.group)
            counts = np.tile(width, rows)
            tables = np.tile(sel, rows)
        runs: list[Run] = []
        for t, c in zip(tables.tolist(), counts.tolist()):
            if runs and runs[-1].table == first_table + t:
                runs[-1] = Run(runs[-1].table, runs[-1].count + c)
            else:
                runs.append(Run(first_table + t, c))
        return runs

    def to_json(self) -> dict:
        return {"axis": self.axis, "group": self.group, "n_sets": self.n_sets, "selects": list(self.selects)}


def set_counts(codes: np.ndarray, shape: tuple[int, int], plan: ContextPlan, n_codes: int) -> np.ndarray:
    """Code histogram of every table set (``n_sets × n_codes`` int64) of a matrix's codes (row-major)."""
    grp = plan.group_of(shape).ravel()
    set_of = np.asarray(plan.selects, dtype=np.int64)[grp]
    flat = set_of * n_codes + np.asarray(codes, dtype=np.int64).ravel()
    return np.bincount(flat, minlength=plan.n_sets * n_codes).reshape(plan.n_sets, n_codes)


def plan_record(plan: ContextPlan, fold: int) -> dict:
    """The container's generic plan record (docs/bitstream.md §6): ``kind`` and its ``params``, the
    mantissa bits folded into the code (``fold``), ``n_sets`` and the per-group ``selects``. The writer adds
    the table sets (``sets``)."""
    return {"kind": "groups", "params": {"axis": plan.axis, "group": plan.group}, "fold": int(fold),
            "n_sets": plan.n_sets, "selects": list(plan.selects)}


def plan_from_record(rec: dict, shape: Sequence[int], max_fold: int) -> tuple[ContextPlan, int]:
    """``(plan, fold)`` of a container's plan record for a matrix of ``shape`` whose pair format lets
    at most ``max_fold`` mantissa bits fold into the code; :class:`ConfigError` naming the field that is malformed or out of range (the
    kind, a parameter, the set count over :data:`MAX_SETS`, a select outside ``0 .. n_sets-1``, the
    number of selects against the matrix's groups)."""
    def _int(v) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    if not isinstance(rec, dict):
        raise ConfigError(f"context must be an object, not {type(rec).__name__}")
    kind = rec.get("kind")
    if kind not in PLAN_KINDS:
        raise ConfigError(f"context kind {str(kind)[:40]!r} is not one of {', '.join(PLAN_KINDS)}")
    if len(shape) != 2:
        raise ConfigError(f"context plans need a 2-D matrix, not shape {list(shape)}")
    params = rec.get("params")
    if not isinstance(params, dict):
        raise ConfigError("context params must be an object")
    axis, group = params.get("axis"), params.get("group")
    if axis not in AXES:
        raise ConfigError(f"context params axis {str(axis)[:40]!r} is not one of {', '.join(AXES)}")
    if not _int(group) or not 1 <= group <= 65535:
        raise ConfigError(f"context params group {str(group)[:40]} is not an integer from 1 to 65535")
    fold = rec.get("fold")
    if not _int(fold) or not 0 <= fold <= max_fold:
        raise ConfigError(f"context fold {str(fold)[:40]} is not an integer from 0 to {max_fold}")
    n_sets = rec.get("n_sets")
    if not _int(n_sets) or not 1 <= n_sets <= MAX_SETS:
        raise ConfigError(f"context n_sets {str(n_sets)[:40]} is not an integer from 1 to {MAX_SETS}")
    selects = rec.get("selects")
    lines = shape[0] if axis == "rows" else shape[1]
    n_groups = -(-lines // group)
    if not isinstance(selects, list) or len(selects) != n_groups:
        raise ConfigError(f"context selects must be a list of {n_groups} table sets, one per group of "
                          f"{group} {axis} of a {shape[0]}x{shape[1]} matrix")
    bad = next((v for v in selects if not _int(v) or not 0 <= v < n_sets), None)
    if bad is not None or (selects and not all(_int(v) for v in selects)):
        raise ConfigError(f"context select {str(bad)[:40]} is outside table sets 0..{n_sets - 1}")
    return ContextPlan(axis, int(group), int(n_sets), tuple(int(v) for v in selects)), int(fold)


def side_bits(n_codes: int, code_field_bits: int, n_sets: int, n_symbols: int, precision_bits: int,
              n_selects: int) -> int:
    """Side information of one coded matrix, packed as :class:`ContextCost` charges it: the
    code→exponent table, one frequency per symbol and set, ``ceil(log2 n_sets)`` bits per select and
    the :data:`HEADER_BITS` plan header (the one-table plan has no selects)."""
    sel = n_selects * math.ceil(math.log2(n_sets)) if n_sets > 1 else 0
    return n_codes * code_field_bits + n_sets * n_symbols * precision_bits + sel + HEADER_BITS


def group_counts(codes: np.ndarray, axis: str, group: int, n_codes: int) -> np.ndarray:
    """Code histogram of every group (``n_groups × n_codes`` int64) of a 2-D code array."""
    c = np.asarray(codes, dtype=np.int64)
    if c.ndim != 2:
        raise ConfigError(f"context tables need a 2-D matrix of codes, not shape {c.shape}")
    lines = c if axis == "rows" else c.T
    g = np.arange(lines.shape[0]) // group
    n_groups = int(g[-1]) + 1 if g.size else 0
    flat = (g[:, None] * n_codes + lines).ravel()
    return np.bincount(flat, minlength=n_groups * n_codes).reshape(n_groups, n_codes)


def cluster_sets(C: np.ndarray, sets: int, iters: int = 12) -> np.ndarray:
    """Selects of ``sets`` sets for group histograms ``C``: quantiles of the mean code, then Lloyd
    iterations that move each group to the set of least cross-entropy. Deterministic."""
    n = C.sum(1)
    S = C.shape[1]
    mean = (C * np.arange(S)).sum(1) / np.maximum(n, 1)
    order = np.argsort(mean, kind="stable")
    cw = np.cumsum(n[order])
    lab = np.empty(len(C), dtype=np.int64)
    lab[order] = np.minimum((np.maximum(cw, 1) - 1) * sets // max(int(cw[-1]), 1), sets - 1)
    for _ in range(iters):
        T = np.stack([C[lab == k].sum(0) for k in range(sets)]).astype(np.float64) + 1e-3
        L = -np.log2(T / T.sum(1, keepdims=True))
        new = (C @ L.T).argmin(1)
        if np.array_equal(new, lab):
            break
        lab = new
    # Renumber the sets by first use, dropping empty ones (their tables would cost for nothing).
    used = list(dict.fromkeys(lab.tolist()))
    remap = {s: i for i, s in enumerate(used)}
    return np.asarray([remap[s] for s in lab.tolist()], dtype=np.int64)


def _entropy_bits(counts: np.ndarray) -> float:
    nz = counts[counts > 0].astype(np.float64)
    return float(-(nz * np.log2(nz / nz.sum())).sum()) if nz.size else 0.0


def _estimate(C: np.ndarray, lab: np.ndarray, sets: int, n_symbols: int, precision_bits: int,
              set_bits: float = 0.0) -> float:
    bits = sum(_entropy_bits(C[lab == k].sum(0)) for k in range(sets))
    return bits + sets * (n_symbols * precision_bits + set_bits) + \
        (len(lab) * math.ceil(math.log2(sets)) if sets > 1 else 0)


#: Group sizes tried per axis. Column groups start at 4 columns: a column group is one run per row,
#: so narrow ones mean a select (and a run) every few pairs.
GROUPS = {"rows": (1, 4, 16, 64), "cols": (4, 16, 64)}


def plan_context(codes: np.ndarray, n_codes: int, *, precision_bits: int = 16, max_sets: int = 8,
                 groups: Sequence[int] | None = None, axes: Sequence[str] = AXES,
                 frequency_bits: float | None = None, set_bits: float = 0.0) -> ContextPlan:
    """The plan of least estimated cost (entropy of each set's pooled counts, plus tables and
    selects) over ``axes`` × ``groups`` × ``sets = 1 .. max_sets`` (powers of two and the sets the
    clustering leaves). A table set is charged ``frequency_bits`` per symbol (default
    ``precision_bits``, packed) and ``set_bits`` more (what a container's set record adds beyond its
    frequencies). The one-table plan is always a candidate, so a plan never costs more than the
    paper's by this estimate."""
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise ConfigError(f"context tables need a 2-D matrix of codes, not shape {codes.shape}")
    if not 1 <= max_sets <= 16:
        raise ConfigError(f"max_sets must be between 1 and 16, not {max_sets!r}")
    n_symbols = int(np.count_nonzero(np.bincount(codes.ravel(), minlength=n_codes)))
    per = precision_bits if frequency_bits is None else frequency_bits
    best_cost = _estimate(np.bincount(codes.ravel(), minlength=n_codes)[None, :], np.zeros(1, np.int64), 1,
                          n_symbols, per, set_bits)
    best = ContextPlan.single(codes.shape)
    for axis in axes:
        if axis not in AXES:
            raise ConfigError(f"context axis must be one of {', '.join(AXES)}, not {axis!r}")
        lines = codes.shape[0] if axis == "rows" else codes.shape[1]
        for g in (groups if groups is not None else GROUPS[axis]):
            if g >= lines:
                continue
            C = group_counts(codes, axis, g, n_codes)
            sets = 2
            while sets <= max_sets:
                lab = cluster_sets(C, sets)
                k_used = int(lab.max()) + 1
                cost = _estimate(C, lab, k_used, n_symbols, per, set_bits)
                if cost < best_cost:
                    best_cost = cost
                    best = ContextPlan(axis, int(g), k_used, tuple(int(v) for v in lab))
                sets *= 2
    return best


@dataclass(frozen=True)
class ContextCost:
    """Bits of one context-coded matrix set, every part charged (see the module docstring)."""

    weights: int
    stream_bits: int
    code_table_bits: int
    frequency_bits: int
    select_bits: int
    header_bits: int

    @property
    def total_bits(self) -> int:
        return self.stream_bits + self.code_table_bits + self.frequency_bits + self.select_bits + self.header_bits

    @property
    def bits_per_weight(self) -> float:
        return self.total_bits / self.weights if self.weights else 0.0

    def __add__(self, other: "ContextCost") -> "ContextCost":
        return ContextCost(*(a + b for a, b in zip(
            (self.weights, self.stream_bits, self.code_table_bits, self.frequency_bits, self.select_bits,
             self.header_bits),
            (other.weights, other.stream_bits, other.code_table_bits, other.frequency_bits, other.select_bits,
             other.header_bits))))


def spread_record_bytes(table_log: int) -> int:
    """Bytes a stored tANS spread adds to a container's set record (``"tans_symbols":"…",``): the key,
    quotes, comma and the ``2^R`` slots' symbols as ``4·ceil(2^R / 3)`` base64 characters."""
    return len('"tans_symbols":"",') + 4 * -(-(1 << table_log) // 3)


def spread_is_stored(table) -> bool:
    """Whether a container stores ``table``'s slot → symbol spread: a tANS table whose spread is not
    the one its frequencies imply (:func:`set_table`); rANS tables have none."""
    return hasattr(table, "symbol") and getattr(table, "stored_spread", True)


def set_table(spec: Codec, ct: CodeTable, counts: np.ndarray, stored_cost_bits: float | None) -> object:
    """The coder table of one table set. rANS: its one table. tANS with ``stored_cost_bits`` (a
    container's set): the cheapest of the spreads its frequencies alone imply (``fse``; ``tuned``
    with the quantized probabilities ``f/L``), which a reader rebuilds, and the spread tuned to the
    set's true probabilities, which must be stored and is charged ``stored_cost_bits``; cost = the
    stationary expected code bits of the set's ``counts`` plus that charge. The table's
    ``stored_spread`` says which (:func:`spread_is_stored`). Without it, :meth:`Codec.coder_table`'s
    choice (the golden model's streams of :func:`encode_context`)."""
    if stored_cost_bits is None or not hasattr(spec, "tans"):
        return spec.coder_table(ct, counts)
    sc = ct.symbol_counts(counts).astype(np.float64)
    n = float(sc.sum())
    derived = [spec.coder_table(ct, spread=s) for s in ("fse", "tuned")]
    if n == 0:
        derived[0].stored_spread = False
        return derived[0]
    probs = sc / n
    true = spec.coder_table(ct, counts, spread="tuned")
    cands = derived + [true]
    cost = [n * t.expected_bits_per_symbol(np.pad(probs, (0, t.freqs.size - probs.size))) for t in cands]
    cost[2] += stored_cost_bits
    k = int(np.argmin(cost))
    best = cands[k]
    best.stored_spread = k == 2
    return best


def _set_frequencies(quantize, sc: np.ndarray) -> np.ndarray:
    # Absent symbols weigh 1/4096 of an occurrence: they get frequency 1 and cost the rest nothing.
    return np.asarray(quantize(np.where(sc > 0, sc * 4096, 1)), dtype=np.int64)


def sets_alphabet(spec: Codec, counts_per_set: np.ndarray, extra_bits: int, frequency_bits: float) -> CodeTable | None:
    """The alphabet of least cost for the sets' own tables, or ``None`` where the codec's own choice
    stands (constriction's quantizer, which has no escape; fewer than three codes).

    :meth:`Codec.code_table` chooses direct codes and escape group for one table of the total counts;
    with table sets each set is quantized alone, so the same alphabet costs more (every direct symbol
    takes at least one of the ``2^R`` slots of every set). This tries every split of the codes, most
    frequent first, into direct symbols and an escape group as :func:`~.codetable.build_code_table`
    does, at each the code bits of every set with its own quantized frequencies (the cross-entropy),
    the escape index bits and ``frequency_bits`` per frequency stored, and keeps the cheapest. Its
    ``freqs`` are the total's (the record's code table; the sets' are their own)."""
    if spec.kind == "rans" and spec.is_constriction:
        return None
    C = np.asarray(counts_per_set, dtype=np.int64)
    total = C.sum(0)
    order = sorted(np.flatnonzero(total).tolist(), key=lambda i: (-int(total[i]), i))
    n = len(order)
    if n < 3:
        return None
    P = spec.precision_bits
    params = spec.params
    capacity = min(params.max_symbols, 1 << P)
    max_extra = params.max_extra_bits if spec.kind == "tans" else 64
    quantize = optimal_quantizer(P)
    best: tuple[float, CodeTable] | None = None
    for n_direct in range(n, 0, -1):
        direct, group = sorted(order[:n_direct]), sorted(order[n_direct:])
        if len(group) == 1 or n_direct + (1 if group else 0) > capacity:
            continue
        index_bits = (len(group) - 1).bit_length() if group else 0
        if extra_bits + index_bits > max_extra:
            continue
        SC = np.concatenate([C[:, direct], C[:, group].sum(1, keepdims=True)], axis=1) if group else C[:, direct]
        cost = float(SC[:, -1].sum()) * index_bits + SC.size * frequency_bits
        for sc in SC:
            f = _set_frequencies(quantize, sc)
            used = sc > 0
            cost -= float((sc[used] * np.log2(f[used] / (1 << P))).sum())
        if best is None or cost < best[0] - 1e-9:
            tsc = SC.sum(0)
            best = (cost, CodeTable(tuple(direct), tuple(group), extra_bits,
                                    tuple(int(v) for v in quantize(tsc)), P))
    return best[1] if best is not None else None


def context_tables(spec: Codec, counts_per_set: np.ndarray, extra_bits: int, *,
                   container: bool = False) -> tuple[CodeTable, list]:
    """One alphabet and one coder table per set.

    Every set keeps the whole alphabet, so a decoder's symbol → code map is the same for all sets;
    a symbol absent from a set gets the smallest frequency (1). The alphabet is the codec's choice for
    the matrix's total counts; with ``container`` (a container's matrix, every part charged in its
    bytes) the one of least cost over the sets (:func:`sets_alphabet`), and each tANS set's spread is
    stored only where that pays (:func:`set_table`, a stored spread charged its record bytes).
    """
    total = counts_per_set.sum(0)
    P = spec.precision_bits
    base = sets_alphabet(spec, counts_per_set, extra_bits, 8 * (1 + len(str((1 << P) // 16)))) \
        if container else None
    base = base if base is not None else spec.code_table(total, extra_bits)
    stored_cost_bits = 8 * spread_record_bytes(P) if container and spec.kind == "tans" else None
    quantize = optimal_quantizer(P)
    tables = []
    for c in counts_per_set:
        sc = base.symbol_counts(c)
        freqs = _set_frequencies(quantize, sc)
        freqs = np.pad(freqs, (0, len(base.freqs) - freqs.size), constant_values=0)
        if freqs.size > sc.size:          # a one-symbol alphabet's unused second slot
            freqs = np.asarray(base.freqs, dtype=np.int64)
        ct = CodeTable(base.direct_codes, base.escape_codes, base.extra_bits, tuple(int(f) for f in freqs),
                       base.precision_bits)
        tables.append(set_table(spec, ct, c, stored_cost_bits))
    return base, tables


@dataclass
class ContextCoded:
    """Matrices coded with context tables into one golden stream (:func:`encode_context`)."""

    spec: Codec
    names: list[str]
    shapes: list[tuple[int, int]]
    formats: list[IeeeFloatPairs]
    exponents: list[np.ndarray]
    plans: list[ContextPlan]
    code_tables: list[CodeTable]
    tables: list                     # coder tables, all matrices' sets in order
    runs: list[Run]
    symbols: np.ndarray
    extras: np.ndarray
    words: np.ndarray
    cost: ContextCost


def encode_context(spec: Codec, matrices: Sequence[tuple[str, np.ndarray]], fmt: IeeeFloatPairs, *,
                   fold: int = 0, max_sets: int = 8, groups: Sequence[int] | None = None,
                   axes: Sequence[str] = AXES, single: bool = False, container: bool = False) -> ContextCoded:
    """Code 2-D matrices of bit patterns (``fmt``) with context tables into one stream of ``spec``.

    ``single=True`` forces the paper's one table per matrix (the same accounting, for comparison).
    ``container=True`` builds the tables as a container does (:func:`context_tables`: the sets'
    alphabet, a tANS spread stored only where it pays) and charges every stored spread, ``2^R`` slots
    of ``ceil(log2 symbols)`` bits, with the frequencies; without it, tANS spreads are not charged.
    """
    pf = folded_format(fmt, fold)
    names, shapes, exps, plans, cts, tables, runs, syms, exs = [], [], [], [], [], [], [], [], []
    cost = ContextCost(0, 0, 0, 0, 0, 0)
    for name, bits in matrices:
        bits = np.asarray(bits)
        if bits.ndim != 2:
            raise ConfigError(f"matrix {name!r}: context tables need 2-D matrices, not shape {bits.shape}")
        pairs: CodingPairs = pf.split(bits)
        codes = pairs.codes.reshape(bits.shape).astype(np.int64)
        n_codes = pairs.n_codes
        plan = ContextPlan.single(bits.shape) if single else plan_context(
            codes, n_codes, precision_bits=spec.precision_bits, max_sets=max_sets, groups=groups, axes=axes)
        grp = plan.group_of(bits.shape).ravel()
        set_of = np.asarray(plan.selects, dtype=np.int64)[grp]
        counts = np.zeros((plan.n_sets, n_codes), dtype=np.int64)
        np.add.at(counts, (set_of, codes.ravel()), 1)
        try:
            ct, set_tables = context_tables(spec, counts, pf.extra_bits, container=container)
            s, e = ct.to_symbols(pairs.codes, pairs.extra)
        except ConfigError as exc:
            raise ConfigError(f"matrix {name!r}: {exc}") from None
        runs.extend(plan.runs(bits.shape, first_table=len(tables)))
        names.append(name)
        shapes.append(tuple(bits.shape))
        exps.append(pairs.exponents)
        plans.append(plan)
        cts.append(ct)
        tables.extend(set_tables)
        syms.append(s)
        exs.append(e)
        spreads = sum(spread_is_stored(t) for t in set_tables) if container else 0
        spread_bits = spreads * (1 << spec.precision_bits) * max(1, math.ceil(math.log2(max(2, ct.n_symbols))))
        cost = cost + ContextCost(int(bits.size), 0, n_codes * pf.exponent_bits,
                                  plan.n_sets * ct.n_symbols * spec.precision_bits + spread_bits, plan.select_bits,
                                  HEADER_BITS)
    sy = np.concatenate(syms) if syms else np.zeros(0, np.int64)
    ex = np.concatenate(exs) if exs else np.zeros(0, np.uint64)
    # The compiled coder where it applies: the golden coder's words (tests/model/test_fastans.py), and
    # a whole checkpoint in seconds rather than a minute.
    stream = fastans.encode(spec, tables, runs, sy, ex)
    cost = ContextCost(cost.weights, int(stream.words.size) * spec.word_bits, cost.code_table_bits,
                       cost.frequency_bits, cost.select_bits, cost.header_bits)
    return ContextCoded(spec, names, shapes, [pf] * len(names), exps, plans, cts, tables, runs, sy, ex,
                        stream.words, cost)


def decode_context(coded: ContextCoded) -> list[np.ndarray]:
    """Decode the stream back to each matrix's bit patterns (the golden decoder, end check included)."""
    sy, ex, _ = coded.spec.coder().decode(coded.words, coded.tables, coded.runs)
    out, pos = [], 0
    for shape, pf, exps, ct in zip(coded.shapes, coded.formats, coded.exponents, coded.code_tables):
        n = shape[0] * shape[1]
        codes, extra = ct.from_symbols(sy[pos:pos + n], ex[pos:pos + n])
        widths = np.full(exps.size, pf.extra_bits, dtype=np.uint8)
        out.append(pf.join(CodingPairs(codes.astype(np.uint16), extra, widths, exps, shape)))
        pos += n
    return out
