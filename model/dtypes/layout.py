"""What every coding-pair data type of §3 declares: its codes and their additional-data widths.

A :class:`CodeLayout` is a list of named :class:`CodeSet` s, each a contiguous range of codes with
the width of each code's additional data (§3: "to each code value can be associated any number of
bits of additional data, including none at all"). It is the definition a user can write down (as
JSON, :meth:`CodeLayout.from_json`), and the one thing a core needs to know to carry the type:
:meth:`CodeLayout.check_core` refuses a layout with more codes or wider additional data than a core
was built for, naming the code set and the field.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

__all__ = ["CodeSet", "CodeLayout"]


def _count(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= value <= hi:
        raise ConfigError(f"{name} must be an integer between {lo} and {hi}, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class CodeSet:
    """Codes ``first .. first + len(extra_bits) - 1``; ``extra_bits[i]`` is the width of code ``first + i``."""

    name: str
    first: int
    extra_bits: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"code set name must be a non-empty string, not {self.name!r}")
        _count(f"code set {self.name!r}: first", self.first, 0, 1 << 16)
        if not len(self.extra_bits):
            raise ConfigError(f"code set {self.name!r}: extra_bits is empty (a set needs at least one code)")
        for i, w in enumerate(self.extra_bits):
            _count(f"code set {self.name!r}: extra_bits[{i}]", w, 0, 64)

    @property
    def last(self) -> int:
        return self.first + len(self.extra_bits) - 1


class CodeLayout:
    """Named, non-overlapping code sets (see the module docstring)."""

    def __init__(self, name: str, sets: Sequence[CodeSet]):
        self.name = name
        self.sets = tuple(sets)
        if not self.sets:
            raise ConfigError(f"{name}: a layout needs at least one code set")
        names = [s.name for s in self.sets]
        for s in self.sets:
            if names.count(s.name) > 1:
                raise ConfigError(f"{name}: code set name {s.name!r} is used twice")
        ordered = sorted(self.sets, key=lambda s: s.first)
        for a, b in zip(ordered, ordered[1:]):
            if b.first <= a.last:
                raise ConfigError(
                    f"{name}: code sets {a.name!r} (codes {a.first}..{a.last}) and {b.name!r} "
                    f"(codes {b.first}..{b.last}) overlap at code {b.first}")

    @property
    def n_codes(self) -> int:
        """One more than the highest code (unused codes in gaps count: a core's LUT spans them)."""
        return max(s.last for s in self.sets) + 1

    @property
    def max_extra_bits(self) -> int:
        return max(max(s.extra_bits) for s in self.sets)

    def extra_bits_per_code(self) -> np.ndarray:
        w = np.zeros(self.n_codes, dtype=np.int64)
        for s in self.sets:
            w[s.first:s.last + 1] = s.extra_bits
        return w

    def check_core(self, max_codes: int, max_extra_bits: int) -> None:
        """Raise :class:`ConfigError` unless a core with ``max_codes`` codes (its ``max_symbols``) and
        ``max_extra_bits`` can carry every code of this layout."""
        for s in self.sets:
            if s.last >= max_codes:
                raise ConfigError(f"{self.name}: code set {s.name!r} reaches code {s.last}, but the core has "
                                  f"max_symbols={max_codes}")
            widest = max(s.extra_bits)
            if widest > max_extra_bits:
                i = s.extra_bits.index(widest)
                raise ConfigError(f"{self.name}: code set {s.name!r}: extra_bits[{i}] = {widest} (code "
                                  f"{s.first + i}) is above the core's max_extra_bits={max_extra_bits}")

    def to_json(self) -> dict:
        return {"name": self.name, "sets": [{"name": s.name, "first": s.first, "extra_bits": list(s.extra_bits)}
                                            for s in self.sets]}

    @classmethod
    def from_json(cls, d: dict) -> "CodeLayout":
        """A layout written as ``{"name": ..., "sets": [{"name", "first", "extra_bits"}, ...]}``."""
        if not isinstance(d, dict) or not isinstance(d.get("sets"), list):
            raise ConfigError("a code layout is a JSON object with a list field 'sets'")
        sets = []
        for i, s in enumerate(d["sets"]):
            if not isinstance(s, dict):
                raise ConfigError(f"sets[{i}] must be an object, not {s!r}")
            missing = {"name", "first", "extra_bits"} - set(s)
            if missing:
                raise ConfigError(f"sets[{i}] lacks the field {sorted(missing)[0]!r}")
            widths = s["extra_bits"]
            if isinstance(widths, numbers.Integral) and not isinstance(widths, bool):
                widths = [widths] * _count(f"sets[{i}].count", s.get("count", 1), 1, 1 << 16)
            if not isinstance(widths, list):
                raise ConfigError(f"sets[{i}].extra_bits must be an integer or a list, not {widths!r}")
            sets.append(CodeSet(s["name"], s["first"], tuple(widths)))
        return cls(str(d.get("name", "layout")), sets)

    def __repr__(self) -> str:
        return f"CodeLayout({self.name!r}, {len(self.sets)} sets, {self.n_codes} codes, " \
               f"extra ≤ {self.max_extra_bits} bits)"
