"""The codec registry: every codec name a user may write, in one place (issue 43).

Each name belongs to one :class:`Family` of :data:`FAMILIES`: its kind, its parameters (a preset or a
rule), its interleaved states ``N``, whether it is **current** (``compress`` writes it) or **legacy**
(a parameter set ansforge wrote before; its files still decode, byte for byte) and its software speed
class (:data:`SPEEDS`). :func:`parse_codec` (:mod:`.codecs`) accepts exactly the names listed here
(:func:`names`) and builds each through its family (:func:`lookup`).

Named once, here:

* :data:`DEFAULT_FORMAT` (``tans8x16``): what ``compress`` writes, and what every command that writes or
  builds for a codec uses when none is named (:func:`default_for` gives each kind's: the same ``N``);
* :data:`PAPER` (``tans8``, ``rans16``; one state): the white paper's configuration, Table 1's rows and
  Table 3's cores;
* :data:`CONSTRICTION` (``rans24``): constriction's ``AnsCoder`` format.

Legacy parameter sets have names of their own, the current name with the parameters that differ:
``rans16-s64w32`` is ``rans16`` as written before the paper preset moved to ``S = 48`` (a one-DSP
decoder multiply), and ``rans16xN-s48w32`` is ``rans16xN`` as written before the ``interleaved`` preset
(``S = 32``, ``W = 16``). Their codec records keep the name they were written with (``rans16``,
``rans16xN``; the record carries ``S`` and ``W``), so an old file decodes exactly as it was written and
one written under a legacy name is byte-identical to an old one.

Which cores take a codec is the core registry's to say (:mod:`ansforge.hdl.cores`: ``REGISTRY``,
``cores_for``): imports run analysis → sim → hdl → model, so this module does not name a core;
``ansforge codecs`` joins the two.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache

from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:                   # pragma: no cover
    from .codecs import Codec

# The codec classes and parameters (NumPy) are imported where a codec is built, so that the command line's
# help texts (summary(), codec_help()) cost no NumPy import.

#: ``N``'s largest value (:data:`~.stream.MAX_STATES`; tests/model/test_codec_registry.py checks they agree).
MAX_STATES = 16

__all__ = ["DEFAULT_FORMAT", "PAPER", "CONSTRICTION", "SPEEDS", "Family", "Entry", "FAMILIES", "lookup", "names",
           "entries", "entry", "family_of", "speed_of", "MAX_STATES", "legacy_codecs", "default_for", "ranges_text", "summary", "codec_help", "markdown_table",
           "parse"]

#: The default format: interleaved tANS, R = 8, N = 16 (issue 43). ``compress`` writes it, and every
#: command that writes or builds for a codec uses it (:func:`default_for`, its kind's) when none is named.
DEFAULT_FORMAT = "tans8x16"
#: The white paper's configuration, one state: "tANS 8 bits" and "rANS 16 bits" (Table 1's rows, Table 3's
#: cores, the base core builds' own codec).
PAPER = {"tans": "tans8", "rans": "rans16"}
#: constriction's ``AnsCoder`` format (``P = 24``, its quantizer, no escape; one state).
CONSTRICTION = "rans24"

#: Software speed classes (decode, the compiled kernels of :mod:`.fastans`; BENCHMARKS.md has the figures).
SPEEDS = {
    "simd": "vector kernels where the CPU has them (tANS N = 8 or 16: AVX-512 VBMI, N = 16 also AVX2; rans16x16: "
            "AVX-512), else the interleaved native kernels",
    "interleaved": "native C kernels, N independent dependency chains overlapped",
    "serial": "native C kernels, one dependency chain (several times slower than N = 8 or 16)",
}

_TANS_BITS = tuple(range(5, 13))
_RANS_BITS = tuple(range(5, 25))
_ONE = (1,)
_XN = tuple(range(2, MAX_STATES + 1))


@dataclass(frozen=True)
class Family:
    """Codec names of one rule: ``pattern`` (``tansR``, ``rans16xN``, ``rans16-s64w32``) over ``bits``
    (``R`` or ``P``) and ``states`` (``N``; 1 has no ``xN`` suffix).

    Attributes
    ----------
    preset : str
        Where the parameters come from: ``"tans"`` (``R``, ``W = 16``, 64 symbols), ``"ransP"``
        (``S = 64``, ``W = 32``, ``P``), a :data:`~.rans.RANS_PRESETS` key (``"paper"``, ``"interleaved"``,
        ``"constriction"``), or ``"legacy-s64"`` / ``"legacy-s48"``.
    status : str
        ``"current"`` (written) or ``"legacy"`` (read; a legacy name writes the old parameters).
    suffix : str
        A legacy name's suffix after the current name (``-s64w32``); the codec record keeps the current name.
    text : str
        What it is, in a line.
    """

    pattern: str
    kind: str
    bits: tuple[int, ...]
    states: tuple[int, ...]
    preset: str
    status: str
    text: str
    suffix: str = ""

    def record_name(self, bits: int, states: int) -> str:
        """The name a codec record holds (a legacy name's too: the name it was written with)."""
        return f"{self.kind}{bits}" + (f"x{states}" if states > 1 else "")

    def name(self, bits: int, states: int) -> str:
        """The name a user writes."""
        return self.record_name(bits, states) + self.suffix

    def names(self) -> list[str]:
        return [self.name(b, n) for b in self.bits for n in self.states]

    def params(self, bits: int, states: int):
        """The validated :class:`~.tans.TansParams` or :class:`~.rans.RansParams` of ``bits`` and ``states``."""
        from .rans import RANS_PRESETS, RansParams
        from .tans import TansParams

        if self.preset == "tans":
            return TansParams(table_log=bits, word_bits=16, max_symbols=64, states=states)
        if self.preset == "ransP":
            return RansParams(64, 32, bits, states=states)
        if self.preset == "legacy-s64":
            return RansParams(64, 32, bits, states=states)
        if self.preset == "legacy-s48":
            return RansParams(48, 32, bits, states=states)
        return dataclasses.replace(RANS_PRESETS[self.preset], states=states)

    def codec(self, bits: int, states: int) -> Codec:
        """The codec object (:class:`~.codecs.TansCodec` or :class:`~.codecs.RansCodec`)."""
        from .codecs import RansCodec, TansCodec

        cls = TansCodec if self.kind == "tans" else RansCodec
        return cls(self.record_name(bits, states), self.params(bits, states))

    def parameters_text(self) -> str:
        """The parameters in words: ``S = 32, W = 16, P = 16`` (``R``/``P`` as ranges where they vary)."""
        b = ranges_text(self.bits)
        if self.kind == "tans":
            return f"R = {b}, W = 16, 64 symbols"
        p = self.params(self.bits[0], self.states[0])
        S = "64" if self.preset == "ransP" else str(p.state_bits)
        return f"S = {S}, W = {p.word_bits}, P = {b}"


def ranges_text(values) -> str:
    """``(5, 6, 7, 9)`` as ``5..7, 9``: runs of three or more as ``a..b``."""
    runs: list[list[int]] = []
    for v in sorted(set(values)):
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


_PLAIN_P = tuple(p for p in _RANS_BITS if p not in (16, 24))

#: Every family, current first. Together they list every name :func:`parse_codec` accepts, each once.
FAMILIES: tuple[Family, ...] = (
    Family("tansR", "tans", _TANS_BITS, _ONE, "tans", "current",
           "tANS, L = 2^R states, optimal R-bit frequencies, escape symbol, per tensor the spread (fse or tuned) "
           "of lower expected cost; tans8 is the paper's"),
    Family("tansRxN", "tans", _TANS_BITS, _XN, "tans", "current",
           f"tansR with N interleaved states sharing the stream (docs/bitstream.md §8); {DEFAULT_FORMAT} is the "
           "default format"),
    Family("rans16", "rans", (16,), _ONE, "paper", "current",
           "the paper's rANS (preset paper: S = W + P = 48, the decoder's multiply fits one DSP)"),
    Family("rans16xN", "rans", (16,), _XN, "interleaved", "current",
           "interleaved rANS (preset interleaved: 16-bit renormalisation); rans16x16 is what the rANS cores read "
           "and write"),
    Family("ransP", "rans", _PLAIN_P, _ONE, "ransP", "current", "rANS, optimal P-bit frequencies, escape where it pays"),
    Family("ransPxN", "rans", _PLAIN_P, _XN, "ransP", "current", "ransP with N interleaved states"),
    Family("rans24", "rans", (24,), _ONE, "constriction", "current",
           "constriction preset: constriction's quantizer, no escape, the words of its AnsCoder"),
    Family("rans24xN", "rans", (24,), _XN, "constriction", "current",
           "constriction's quantizer with N interleaved states (not constriction's format)"),
    Family("rans16-s64w32", "rans", (16,), _ONE, "legacy-s64", "legacy",
           "rans16 as written before the paper preset moved to S = 48 (record name rans16)", suffix="-s64w32"),
    Family("rans16xN-s48w32", "rans", (16,), _XN, "legacy-s48", "legacy",
           "rans16xN as written before the interleaved preset (record name rans16xN)", suffix="-s48w32"),
)


def speed_of(kind: str, states: int, params) -> str:
    """The software speed class (:data:`SPEEDS`) of a codec of ``kind``, ``states`` and ``params``."""
    if kind == "tans" and states in (8, 16):
        return "simd"
    if kind == "rans" and states == 16 and (params.state_bits, params.word_bits, params.precision_bits) == (32, 16, 16):
        return "simd"
    return "interleaved" if states > 1 else "serial"


@dataclass(frozen=True)
class Entry:
    """One codec name: its family, ``R``/``P``, ``N``, and what the registry says of it."""

    name: str
    family: Family
    bits: int
    states: int

    @property
    def kind(self) -> str:
        return self.family.kind

    @property
    def status(self) -> str:
        return self.family.status

    def codec(self) -> Codec:
        return self.family.codec(self.bits, self.states)

    @property
    def speed(self) -> str:
        return speed_of(self.kind, self.states, self.family.params(self.bits, self.states))

    @property
    def roles(self) -> tuple[str, ...]:
        """``default``, ``paper``, ``constriction``: what this name is named as, if anything."""
        return tuple(r for r, n in (("default", DEFAULT_FORMAT), (f"default {self.kind}", default_for(self.kind)),
                                    ("paper", PAPER.get(self.kind)), ("constriction", CONSTRICTION))
                     if n == self.name and not (r.startswith("default ") and n == DEFAULT_FORMAT))

    def to_json(self) -> dict:
        c = self.codec()
        params = {k: v for k, v in c.to_json().items() if k not in ("name", "kind")}
        params.setdefault("states", 1)
        return {"name": self.name, "kind": self.kind, "family": self.family.pattern, "status": self.status,
                "record_name": c.name, "parameters": params, "speed": self.speed, "roles": list(self.roles)}


@lru_cache(maxsize=1)
def _index() -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for f in FAMILIES:
        for b in f.bits:
            for n in f.states:
                name = f.name(b, n)
                assert name not in out, name
                out[name] = Entry(name, f, b, n)
    return out


def entries() -> list[Entry]:
    """Every name's :class:`Entry`, family by family."""
    return list(_index().values())


def names() -> list[str]:
    """Every codec name a user may write (what :func:`parse_codec` accepts, besides ``xN`` spelled ``x1``)."""
    return list(_index())


_NAME = re.compile(r"^(tans|rans)(\d+)(?:x(\d+))?(-[a-z0-9]+)?$")


def _normal(name: str) -> str:
    """``name`` as the registry spells it: lower case, ``x1`` dropped (``tans8x1`` is ``tans8``)."""
    text = str(name).strip().lower()
    m = _NAME.match(text)
    if not m:
        return text
    n = m.group(3)
    return f"{m.group(1)}{int(m.group(2))}" + (f"x{int(n)}" if n is not None and int(n) != 1 else "") + (m.group(4) or "")


def entry(name: str) -> Entry:
    """The :class:`Entry` of ``name``, or :class:`ConfigError`: one line naming the value and what it could be."""
    text = _normal(name)
    found = _index().get(text)
    if found is not None:
        return found
    m = _NAME.match(text)
    if not m:
        raise ConfigError(f"codec must be {summary()}; not {name!r} (`ansforge codecs` lists them)")
    kind, bits = m.group(1), int(m.group(2))
    states = int(m.group(3)) if m.group(3) is not None else 1
    if m.group(4):
        legacy = ", ".join(f.pattern for f in FAMILIES if f.status == "legacy")
        raise ConfigError(f"codec {name!r}: no such parameter set (legacy names: {legacy}; `ansforge codecs` lists them)")
    if not 1 <= states <= MAX_STATES:
        raise ConfigError(f"codec {name!r}: interleaved states N must be from 1 to {MAX_STATES}, not {states}")
    if kind == "tans":
        raise ConfigError(f"codec {name!r}: tANS table_log R must be from 5 to 12, not {bits}")
    raise ConfigError(f"codec {name!r}: rANS precision P must be from 5 to 24, not {bits}")


def lookup(name: str) -> Codec:
    """The codec object of ``name`` (:func:`entry`)."""
    return entry(name).codec()


parse = lookup


def family_of(codec: Codec) -> Entry | None:
    """The registry's entry of a codec object (a container's stream's), or ``None``: a current name's
    when it is one, else the legacy name of its parameters."""
    for f in FAMILIES:
        if f.kind == codec.kind and codec.precision_bits in f.bits and codec.states in f.states \
                and f.record_name(codec.precision_bits, codec.states) == codec.name \
                and f.codec(codec.precision_bits, codec.states) == codec:
            return _index()[f.name(codec.precision_bits, codec.states)]
    return None


def legacy_codecs() -> tuple[Codec, ...]:
    """The codec objects of the legacy names (what the container reader accepts besides the current ones)."""
    return tuple(e.codec() for e in entries() if e.status == "legacy")


def default_for(kind: str | None = None) -> str:
    """The default format of ``kind`` (``None``: :data:`DEFAULT_FORMAT`'s): its ``N`` with the kind's
    paper precision (``rans16x16`` for rANS). A verb that builds a core checks that a core takes it."""
    m = _NAME.match(DEFAULT_FORMAT)
    states = int(m.group(3) or 1)
    if kind is None or kind == m.group(1):
        return DEFAULT_FORMAT
    return PAPER[kind] + (f"x{states}" if states > 1 else "")


def summary() -> str:
    """Every name in one line (the families' patterns and ranges), for help texts and errors."""
    return (f"tansR (R = {ranges_text(_TANS_BITS)}) or ransP (P = {ranges_text(_RANS_BITS)}), optionally xN for N = 2.."
            f"{MAX_STATES} interleaved states; legacy: "
            + ", ".join(f.pattern for f in FAMILIES if f.status == "legacy"))


def codec_help(default: str | None = None, *, what: str = "codec", default_text: str | None = None) -> str:
    """A ``--codec`` help text: ``what``, the names (:func:`summary`), the named ones, and the default
    (``default``, a name, or ``default_text``, words)."""
    named = (f"{DEFAULT_FORMAT} is the default format, {PAPER['tans']} and {PAPER['rans']} the paper's (one state), "
             f"{CONSTRICTION} constriction's")
    tail = default_text or (f"default {default}" if default else "")
    return f"{what}: {summary()} ({named}; `ansforge codecs` lists every name)" + (f"; {tail}" if tail else "")


def markdown_table() -> list[str]:
    """The families as a Markdown table (docs/bitstream.md §8 and README hold it; a test checks them)."""
    lines = ["| names | kind | parameters | N | status | software speed |", "|---|---|---|---|---|---|"]
    for f in FAMILIES:
        speeds = sorted({speed_of(f.kind, n, f.params(f.bits[0], n)) for n in f.states},
                        key=list(SPEEDS).index)
        n = "1" if f.states == _ONE else ranges_text(f.states)
        lines.append(f"| `{f.pattern}` | {f.kind} | {f.parameters_text()} | {n} | {f.status} | {', '.join(speeds)} |")
    return lines
