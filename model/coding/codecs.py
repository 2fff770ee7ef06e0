"""Codec objects: one per kind (:class:`TansCodec`, :class:`RansCodec`), named ``tans8``, ``rans16``, ``rans24`` ….

A codec object owns its validated parameters (a :class:`~.tans.TansParams` or :class:`~.rans.RansParams`,
whose ``__post_init__`` is the one place their ranges are checked) and knows everything the golden
model needs of its kind: :meth:`Codec.tables` builds a tensor's code table and coder table in one step
(counts → :class:`~.codetable.CodeTable` → :class:`~.tans.TansTable` / :class:`~.rans.RansTable`),
:meth:`Codec.coder` gives the golden coder, :meth:`Codec.to_json` / :meth:`Codec.from_json` round-trip
the container's codec record and :meth:`Codec.label` names Table 1's row. Code that works on either kind
calls these methods; it never asks which kind it holds.

The hardware cores take a codec object too, but the function that builds the core of a codec
(``build_core``) lives in :mod:`ansforge.hdl.cores`, not here: imports only run analysis → sim → hdl
→ model, so ``model/`` never imports ``hdl/``. The hdl cores derive their widths from the codec's
parameters and check only hardware options (table sets, programmable, whether a table fits).

``tansR``
    tANS with table log ``R`` (5 to 12), 16-bit words, at most 64 symbols (the paper's core), the
    escape symbol, optimal ``R``-bit frequencies and, per tensor, whichever spread (``fse`` or
    ``tuned``) has the lower expected cost. ``tans8`` is the paper's "tANS 8 bits".
``ransP``
    rANS with ``P``-bit probabilities (5 to 24), ``S = 64``, ``W = 32``, optimal frequencies and the
    escape symbol where it pays. ``rans16`` is the paper's "rANS 16 bits" (preset ``paper``, whose
    state is ``S = W + P = 48`` bits: the decoder's multiply fits one DSP).
``rans24``
    the ``constriction`` preset: ``P = 24``, ``W = 32``, ``S = 64`` with constriction's own leaky
    quantization of ``counts / total`` and no escape, so its words are exactly those of
    constriction's ``AnsCoder`` (``Categorical`` for the code, ``Uniform(2**k)`` for the extra data).
``…xN``
    any of the above with ``N = 2 … 16`` interleaved states sharing the stream (``tans8x2``,
    ``rans16x4``, ``rans24x2``): pair ``j`` is coded with state ``j mod N`` (``docs/bitstream.md`` §8),
    so a core gives each state ``N`` clocks and a CPU runs ``N`` independent chains. ``N = 1`` (no
    suffix) is the single-state bitstream, unchanged. ``rans24xN`` is no longer constriction's format.
    ``rans16xN`` takes the ``interleaved`` preset, ``S = 32`` and ``W = 16`` (16-bit renormalisation:
    the interleaved cores' multiply is ``16 x 17`` bits and their 32-bit port words carry two words);
    streams written with ``S = 48``, ``W = 32`` before are still read (their records carry both).

Every name, its family, whether it is current or legacy (``rans16-s64w32``, ``rans16xN-s48w32``), its
software speed class, the default format and the paper's configuration are defined once, in
:mod:`.registry` (``ansforge codecs`` lists them with the cores that take each); :func:`parse_codec`
accepts exactly its names.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .codetable import CodeTable, build_code_table, constriction_quantizer
from ..errors import ConfigError
from .rans import RANS_PRESETS, RansCoder, RansParams, RansTable
from .tans import SPREADS, TansCoder, TansParams, TansTable, expected_bits
from .stream import MAX_STATES

__all__ = ["Codec", "TansCodec", "RansCodec", "parse_codec", "DEFAULT_CODECS"]



def __getattr__(name: str):
    # DEFAULT_CODECS, the old name of the named codecs: the paper's two and constriction's (.registry names them).
    if name == "DEFAULT_CODECS":
        from .registry import CONSTRICTION, PAPER

        return (PAPER["tans"], PAPER["rans"], CONSTRICTION)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Codec:
    """One named codec configuration: the common interface of :class:`TansCodec` and :class:`RansCodec`.

    Subclasses are frozen dataclasses holding ``name`` and their validated parameters; every method
    that differs by kind is overridden there (no caller branches on the kind).
    """

    name: str
    #: ``"tans"`` or ``"rans"``: the codec record's ``kind`` and the prefix of the core names.
    kind: ClassVar[str] = ""
    #: The coder-table class of this kind (what a core of this kind accepts as ``table``).
    table_type: ClassVar[type] = object

    #: Whether every pair's extra data is in the words (tANS), so a stream's pair count is bounded by its
    #: bits; rANS codes all-zero pairs in no bits at all.
    extra_data_in_words: ClassVar[bool] = False
    #: Whether a checkpoint may sit inside a word (``bit > 0``, tANS); rANS checkpoints are word-aligned.
    checkpoint_mid_word: ClassVar[bool] = False

    @property
    def params(self):
        """The validated parameters (:class:`~.tans.TansParams` or :class:`~.rans.RansParams`)."""
        raise NotImplementedError

    def with_params(self, **changes) -> "Codec":
        """The same codec with some parameters changed (``word_bits=32``, say), validated again."""
        return dataclasses.replace(self, **{self.kind: dataclasses.replace(self.params, **changes)})

    @property
    def precision_bits(self) -> int:
        """Bits of a frequency: ``R`` for tANS, ``P`` for rANS."""
        raise NotImplementedError

    @property
    def word_bits(self) -> int:
        """``W``, bits of a stream word."""
        return self.params.word_bits

    @property
    def state_bits(self) -> int:
        """Bits of a stored coder state (a checkpoint): ``R`` for tANS, ``S`` for rANS."""
        raise NotImplementedError

    @property
    def is_constriction(self) -> bool:
        """Whether this is the ``rans24`` constriction preset (its own quantizer, no escape; with
        ``states > 1`` the quantizer stays but the words are not constriction's)."""
        return False

    @property
    def states(self) -> int:
        """``N``, the interleaved states of a stream (1: the single-state bitstream)."""
        return self.params.states

    def hardware_check(self, states: tuple[int, ...] = (1,)) -> None:
        """Raise :class:`ConfigError` unless a hardware core that decodes streams of ``states``
        interleaved states (a tuple of ``N``; the lanes, the subsystem and the weight paths take 1)
        can take this codec's streams."""
        if self.states not in states:
            have = _count_ranges(states)
            raise ConfigError(f"codec {self.name} interleaves {self.states} states; this hardware takes "
                              f"streams of {have} state{'s' if states != (1,) else ''} "
                              "(docs/bitstream.md §8 says which core takes which)")

    def label(self) -> str:
        """Table 1 row label, as the paper writes it."""
        raise NotImplementedError

    def coder(self):
        """The golden coder (:class:`~.tans.TansCoder` or :class:`~.rans.RansCoder`)."""
        raise NotImplementedError

    def code_table(self, counts: np.ndarray, extra_bits: int) -> CodeTable:
        """The tensor's alphabet and frequencies for code ``counts`` and pair extra width ``extra_bits``."""
        raise NotImplementedError

    def coder_table(self, code_table: CodeTable, counts: np.ndarray | None = None, spread: str | None = None,
                    spread_symbols=None):
        """The coder's table for ``code_table`` (tANS: the spread of lower expected cost for ``counts``
        unless ``spread`` or a stored slot→symbol spread ``spread_symbols`` is given; rANS ignores both)."""
        raise NotImplementedError

    def tables(self, counts: np.ndarray, extra_bits: int, *, spread: str | None = None, spread_symbols=None
               ) -> tuple[CodeTable, object]:
        """``(code_table, coder_table)`` of a tensor whose pair codes occur ``counts`` times and whose
        extra data is ``extra_bits`` wide: the whole counts → code table → coder table step."""
        ct = self.code_table(counts, extra_bits)
        return ct, self.coder_table(ct, counts, spread=spread, spread_symbols=spread_symbols)

    def expected_code_bits(self, code_table: CodeTable, table, counts: np.ndarray) -> float:
        """Expected bits of the codes (not the extra data) of a tensor whose codes occur ``counts``
        times, coded with ``table``: the cross-entropy for rANS, the stationary expected cost of the
        tANS table plus the escape index bits for tANS."""
        return float(code_table.coded_bits(counts))

    def shifted_table(self, code_table: CodeTable, base):
        """The coder table of ``code_table`` that keeps ``base``'s spread (tANS; rANS: the plain table)."""
        return self.coder_table(code_table)

    def table_record(self, table) -> dict:
        """What a container's tensor record stores of ``table`` beyond its code table (tANS: the spread)."""
        return {}

    def table_from_record(self, code_table: CodeTable, field):
        """The coder table a tensor record describes: ``code_table`` plus what :meth:`table_record`
        stored, read as ``field(key)`` (a string; the container's checked reader)."""
        return self.coder_table(code_table)

    def to_json(self) -> dict:
        """The container's codec record (``name``, ``kind`` and the parameters, integers)."""
        raise NotImplementedError

    @classmethod
    def from_record(cls, d: dict) -> "Codec":
        """This kind's codec from a codec record's fields: ``KeyError``, ``TypeError`` or ``ValueError``
        when one is missing or malformed (:meth:`from_json` turns them into :class:`ConfigError`)."""
        raise NotImplementedError

    @classmethod
    def from_json(cls, d: dict) -> "Codec":
        """The codec of a container's codec record (:meth:`to_json`), or :class:`ConfigError`."""
        kind = d.get("kind") if isinstance(d, dict) else None
        sub = _KINDS.get(kind) if isinstance(kind, str) else None
        if sub is None:
            raise ConfigError(f"codec kind must be 'tans' or 'rans', not {kind!r}")
        try:
            return sub.from_record(d)
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(f"codec record is malformed: {e}") from None


@dataclass(frozen=True)
class TansCodec(Codec):
    """A tANS codec: ``tans`` holds its :class:`~.tans.TansParams` (``R``, ``W``, symbols, extra bits)."""

    name: str
    tans: TansParams
    kind: ClassVar[str] = "tans"
    table_type: ClassVar[type] = TansTable
    extra_data_in_words: ClassVar[bool] = True
    checkpoint_mid_word: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not isinstance(self.tans, TansParams):
            raise TypeError(f"tans must be a TansParams, not {type(self.tans).__name__}")

    @classmethod
    def of(cls, table_log: int = 8, word_bits: int = 16, **kw) -> "TansCodec":
        """A codec named ``tans<table_log>`` from loose parameters (validated by :class:`~.tans.TansParams`)."""
        params = TansParams(table_log=table_log, word_bits=word_bits, **kw)
        return cls(f"tans{table_log}{_suffix(params.states)}", params)

    @property
    def params(self) -> TansParams:
        return self.tans

    @property
    def precision_bits(self) -> int:
        return self.tans.table_log

    @property
    def state_bits(self) -> int:
        return self.tans.table_log

    def label(self) -> str:
        return f"tANS {self.tans.table_log} bits{_suffix(self.states, ' x')}"

    def coder(self) -> TansCoder:
        return TansCoder(self.tans)

    def code_table(self, counts: np.ndarray, extra_bits: int) -> CodeTable:
        return build_code_table(counts, extra_bits, self.tans.table_log, max_symbols=self.tans.max_symbols,
                                max_extra_bits=self.tans.max_extra_bits)

    def coder_table(self, code_table: CodeTable, counts: np.ndarray | None = None, spread: str | None = None,
                    spread_symbols=None) -> TansTable:
        if spread_symbols is not None:
            return TansTable(code_table, self.tans, spread or "tuned", symbols=spread_symbols)
        probs = None
        if counts is not None:
            sc = code_table.symbol_counts(counts)
            probs = sc / max(1, sc.sum())
        if spread is not None:
            return TansTable(code_table, self.tans, spread, probabilities=probs)
        candidates = [TansTable(code_table, self.tans, s, probabilities=probs) for s in SPREADS]
        if probs is None or probs.sum() == 0:
            return candidates[-1]
        costs = expected_bits(candidates, [np.pad(probs, (0, t.freqs.size - probs.size)) for t in candidates])
        return candidates[int(np.argmin(costs))]

    def shifted_table(self, code_table: CodeTable, base) -> TansTable:
        return self.coder_table(code_table, spread=base.spread, spread_symbols=base.symbol)

    def expected_code_bits(self, code_table: CodeTable, table: TansTable, counts: np.ndarray) -> float:
        sc = code_table.symbol_counts(counts)
        code = float(sc.sum()) * table.expected_bits_per_symbol(np.pad(sc, (0, table.freqs.size - sc.size)))
        return code + (float(sc[-1]) * code_table.index_bits if code_table.has_escape else 0.0)

    def table_record(self, table: TansTable) -> dict:
        return {"tans_spread": table.spread,
                "tans_symbols": base64.b64encode(table.symbol.astype(np.uint8).tobytes()).decode()}

    def table_from_record(self, code_table: CodeTable, field) -> TansTable:
        spread, text = field("tans_spread"), field("tans_symbols")
        if len(text) > 4 * (1 << self.tans.table_log):
            raise ConfigError("tans_symbols is longer than the table")
        return self.coder_table(code_table, spread=spread,
                                spread_symbols=np.frombuffer(base64.b64decode(text, validate=True), np.uint8))

    def to_json(self) -> dict:
        p = self.tans
        return {"name": self.name, "kind": "tans", "table_log": p.table_log, "word_bits": p.word_bits,
                "max_symbols": p.max_symbols, "max_extra_bits": p.max_extra_bits, **_states_json(p.states)}

    @classmethod
    def from_record(cls, d: dict) -> "TansCodec":
        return cls(str(d["name"]), TansParams(int(d["table_log"]), int(d["word_bits"]), int(d["max_symbols"]),
                                              int(d["max_extra_bits"]), _states_record(d)))


@dataclass(frozen=True)
class RansCodec(Codec):
    """An rANS codec: ``rans`` holds its :class:`~.rans.RansParams` (``S``, ``W``, ``P``, symbols);
    named ``rans24`` it is the constriction preset (:attr:`is_constriction`)."""

    name: str
    rans: RansParams
    kind: ClassVar[str] = "rans"
    table_type: ClassVar[type] = RansTable

    def __post_init__(self) -> None:
        if not isinstance(self.rans, RansParams):
            raise TypeError(f"rans must be a RansParams, not {type(self.rans).__name__}")

    @classmethod
    def of(cls, state_bits: int = 48, word_bits: int = 32, precision_bits: int = 16, **kw) -> "RansCodec":
        """A codec named ``rans<precision_bits>`` from loose parameters (validated by :class:`~.rans.RansParams`)."""
        params = RansParams(state_bits=state_bits, word_bits=word_bits, precision_bits=precision_bits, **kw)
        return cls(f"rans{precision_bits}{_suffix(params.states)}", params)

    @property
    def params(self) -> RansParams:
        return self.rans

    @property
    def precision_bits(self) -> int:
        return self.rans.precision_bits

    @property
    def state_bits(self) -> int:
        return self.rans.state_bits

    @property
    def is_constriction(self) -> bool:
        return self.name.partition("x")[0] == "rans24"

    def label(self) -> str:
        return f"rANS {self.rans.precision_bits} bits{_suffix(self.states, ' x')}" + (
            " (constriction preset)" if self.is_constriction else "")

    def coder(self) -> RansCoder:
        return RansCoder(self.rans)

    def code_table(self, counts: np.ndarray, extra_bits: int) -> CodeTable:
        P = self.rans.precision_bits
        if self.is_constriction:
            return build_code_table(counts, extra_bits, P, quantizer=constriction_quantizer, escape=False,
                                    max_symbols=self.rans.max_symbols, max_extra_bits=64)
        return build_code_table(counts, extra_bits, P, max_symbols=self.rans.max_symbols, max_extra_bits=64)

    def coder_table(self, code_table: CodeTable, counts: np.ndarray | None = None, spread: str | None = None,
                    spread_symbols=None) -> RansTable:
        return RansTable(code_table, self.rans)

    def to_json(self) -> dict:
        p = self.rans
        return {"name": self.name, "kind": "rans", "state_bits": p.state_bits, "word_bits": p.word_bits,
                "precision_bits": p.precision_bits, "max_symbols": p.max_symbols, **_states_json(p.states)}

    @classmethod
    def from_record(cls, d: dict) -> "RansCodec":
        return cls(str(d["name"]), RansParams(int(d["state_bits"]), int(d["word_bits"]), int(d["precision_bits"]),
                                              int(d["max_symbols"]), _states_record(d)))


_KINDS: dict[str, type[Codec]] = {"tans": TansCodec, "rans": RansCodec}

def _count_ranges(counts: tuple[int, ...]) -> str:
    """``(1, 5, 6, …, 16)`` as ``"1 or 5 to 16"``: runs of three or more consecutive counts as a range."""
    runs: list[list[int]] = []
    for n in sorted(set(counts)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [f"{r[0]} to {r[-1]}" if len(r) > 2 else " or ".join(map(str, r)) for r in runs]
    return " or ".join(parts)


def _suffix(states: int, sep: str = "x") -> str:
    """A codec name's ``xN`` suffix: none for one state, so ``tans8`` keeps its name."""
    return f"{sep}{states}" if states > 1 else ""


def _states_json(states: int) -> dict:
    """The codec record's ``states`` key: only for ``N > 1``, so single-state records (and the
    containers that hold them) stay byte-identical to those written before interleaving."""
    return {"states": states} if states > 1 else {}


def _states_record(d: dict) -> int:
    """``states`` of a codec record (1 when absent); a record that spells out 1 is not one ansforge
    writes, and a non-integer is malformed."""
    if "states" not in d:
        return 1
    v = d["states"]
    if isinstance(v, bool) or not isinstance(v, int) or v == 1:
        raise ValueError(f"states must be an integer from 2 to {MAX_STATES} when present, not {v!r}")
    return v


def parse_codec(name: str) -> Codec:
    """The codec object of a codec name: every name the codec registry lists (:mod:`.registry`,
    ``ansforge codecs``): ``tans5`` … ``tans12``, ``rans5`` … ``rans24``, with an optional ``xN`` suffix
    for ``N = 1 … 16`` interleaved states (``tans8x2``; ``x1`` is the plain name), and the legacy
    parameter sets' names (``rans16-s64w32``, ``rans16xN-s48w32``). Anything else is a
    :class:`ConfigError` of one line naming the value and what it could be."""
    from .registry import lookup

    return lookup(name)
