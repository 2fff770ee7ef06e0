"""Codec names (``tans8``, ``rans16``, ``rans24`` …) and what each builds for a tensor.

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .codetable import CodeTable, build_code_table, constriction_quantizer, optimal_quantizer
from ..errors import ConfigError
from .rans import RANS_PRESETS, RansCoder, RansParams, RansTable
from .tans import SPREADS, TansCoder, TansParams, TansTable

__all__ = ["CodecSpec", "parse_codec", "DEFAULT_CODECS"]

DEFAULT_CODECS = ("tans8", "rans16", "rans24")


@dataclass(frozen=True)
class CodecSpec:
    """One named codec configuration (see the module docstring)."""

    name: str
    tans: TansParams | None = None
    rans: RansParams | None = None

    @property
    def kind(self) -> str:
        return "tans" if self.tans is not None else "rans"

    @property
    def precision_bits(self) -> int:
        return self.tans.table_log if self.tans is not None else self.rans.precision_bits

    @property
    def word_bits(self) -> int:
        return self.tans.word_bits if self.tans is not None else self.rans.word_bits

    @property
    def state_bits(self) -> int:
        """Bits of a stored coder state (a checkpoint): ``R`` for tANS, ``S`` for rANS."""
        return self.tans.table_log if self.tans is not None else self.rans.state_bits

    @property
    def is_constriction(self) -> bool:
        return self.rans is not None and self.name == "rans24"

    def label(self) -> str:
        """Table 1 row label, as the paper writes it."""
        if self.tans is not None:
            return f"tANS {self.tans.table_log} bits"
        return f"rANS {self.rans.precision_bits} bits" + (" (constriction preset)" if self.is_constriction else "")

    def coder(self):
        return TansCoder(self.tans) if self.tans is not None else RansCoder(self.rans)

    def code_table(self, counts: np.ndarray, extra_bits: int) -> CodeTable:
        """The tensor's alphabet and frequencies for code ``counts`` and pair extra width ``extra_bits``."""
        if self.tans is not None:
            return build_code_table(counts, extra_bits, self.tans.table_log, max_symbols=self.tans.max_symbols,
                                    max_extra_bits=self.tans.max_extra_bits)
        P = self.rans.precision_bits
        if self.is_constriction:
            return build_code_table(counts, extra_bits, P, quantizer=constriction_quantizer, escape=False,
                                    max_symbols=self.rans.max_symbols, max_extra_bits=64)
        return build_code_table(counts, extra_bits, P, quantizer=optimal_quantizer(P),
                                max_symbols=self.rans.max_symbols, max_extra_bits=64)

    def coder_table(self, code_table: CodeTable, counts: np.ndarray | None = None, spread: str | None = None,
                    spread_symbols=None):
        """The coder's table; for tANS the spread of lower expected cost unless one is given."""
        if self.rans is not None:
            return RansTable(code_table, self.rans)
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
        costs = [t.expected_bits_per_symbol(np.pad(probs, (0, t.freqs.size - probs.size))) for t in candidates]
        return candidates[int(np.argmin(costs))]

    def to_json(self) -> dict:
        if self.tans is not None:
            p = self.tans
            return {"name": self.name, "kind": "tans", "table_log": p.table_log, "word_bits": p.word_bits,
                    "max_symbols": p.max_symbols, "max_extra_bits": p.max_extra_bits}
        p = self.rans
        return {"name": self.name, "kind": "rans", "state_bits": p.state_bits, "word_bits": p.word_bits,
                "precision_bits": p.precision_bits, "max_symbols": p.max_symbols}

    @classmethod
    def from_json(cls, d: dict) -> "CodecSpec":
        try:
            if d["kind"] == "tans":
                return cls(str(d["name"]), tans=TansParams(int(d["table_log"]), int(d["word_bits"]),
                                                           int(d["max_symbols"]), int(d["max_extra_bits"])))
            if d["kind"] == "rans":
                return cls(str(d["name"]), rans=RansParams(int(d["state_bits"]), int(d["word_bits"]),
                                                           int(d["precision_bits"]), int(d["max_symbols"])))
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(f"codec record is malformed: {e}") from None
        raise ConfigError(f"codec kind must be 'tans' or 'rans', not {d.get('kind')!r}")


_NAME = re.compile(r"^(tans|rans)(\d+)$")


def parse_codec(name: str) -> CodecSpec:
    """``tans5`` … ``tans12``, ``rans5`` … ``rans24`` (see the module docstring)."""
    m = _NAME.match(str(name).strip().lower())
    if not m:
        raise ConfigError(f"codec must be tansR (R = 5..12) or ransP (P = 5..24), e.g. tans8, rans16, rans24; "
                          f"not {name!r}")
    kind, bits = m.group(1), int(m.group(2))
    if kind == "tans":
        if not 5 <= bits <= 12:
            raise ConfigError(f"codec {name!r}: tANS table_log R must be from 5 to 12, not {bits}")
        return CodecSpec(f"tans{bits}", tans=TansParams(table_log=bits, word_bits=16, max_symbols=64))
    if not 5 <= bits <= 24:
        raise ConfigError(f"codec {name!r}: rANS precision P must be from 5 to 24, not {bits}")
    if bits == 24:
        return CodecSpec("rans24", rans=RANS_PRESETS["constriction"])
    if bits == 16:
        return CodecSpec("rans16", rans=RANS_PRESETS["paper"])
    return CodecSpec(f"rans{bits}", rans=RansParams(64, 32, bits))
